"""Before/after check of the command line's output: run each command below as ``python -m llmsizing ...``
(every subcommand, text, --json or --csv, --help, and errors) and store its stdout, stderr and exit code.

    .venv/bin/python tools/cli_output_check.py /tmp/before.json          # on the old code
    .venv/bin/python tools/cli_output_check.py /tmp/after.json --compare /tmp/before.json

``--compare`` lists the commands whose output is not byte-identical (exit code 1 if any). Used when cli.py
was split into cli_plan (session 21): no command's output moved.
"""
import hashlib, json, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

H = ["--gpu", "H100 SXM"]
CMDS = [
    ["--help"], ["models"], ["models", "--json"], ["gpus"], ["gpus", "--csv"], ["gpus", "--json"],
    ["memory", "--help"], ["time", "--help"], ["cost", "--help"], ["plan", "--help"], ["serve", "--help"],
    ["finetune", "--help"], ["rl", "--help"],
    ["memory", "llama-3-8b", "--batch", "1", "--seq", "8192", *H],
    ["memory", "llama-3-70b", "--batch", "1", "--seq", "4096", "--tp", "8", "--pp", "2", "--dp", "4",
     "--zero", "1", "--grad-accum", "8", "--json"],
    ["memory", "deepseek-v3", "--batch", "1", "--seq", "4096", "--dp", "64", "--ep", "64", "--pp", "16",
     "--grad-accum", "16", "--mtp-depth", "1", "--capacity-factor", "1.25", "--recompute", "full"],
    ["memory", "llama-3-8b", "--batch", "1", "--seq", "8192", "--recompute-layers", "3"],
    ["time", "llama-3-70b", "--tokens", "1T", *H, "--gpus", "1024", "--seq", "8192"],
    ["time", "llama-3-70b", "--tokens", "1T", *H, "--gpus", "1024", "--seq", "8192", "--json"],
    ["time", "llama-3.1-405b", "--stage", "14.8T:8192", "--stage", "800B:131072", *H, "--gpus", "16384",
     "--whole-run"],
    ["time", "llama-3-8b", "--stage", "1T:8192:512", *H, "--gpus", "256"],
    ["time", "llama-3-8b", "--stage", "1T:8192:512", *H, "--gpus", "256", "--mfu", "0.4"],
    ["time", "llama-3-8b", "--tokens", "1T", "--stage", "1T:8192", *H, "--gpus", "256"],
    ["cost", "mixtral-8x7b", "--tokens", "1T", "--seq", "4096", *H, "--gpu", "B200", "--gpu", "MI300X"],
    ["cost", "llama-3-8b", "--tokens", "1T", "--seq", "4096", *H, "--json"],
    ["cost", "llama-3-8b", "--tokens", "1T", "--seq", "4096", *H, "--csv"],
    ["cost", "deepseek-v3", "--tokens", "1T", "--seq", "4096", "--gpu", "H800"],
    ["cost", "llama-3-8b", "--tokens", "1T", "--seq", "4096", "--gpu", "nope"],
    ["plan", "llama-3-70b", "--tokens", "1T", "--seq", "8192", "--global-batch", "1024", *H, "--gpu", "B200"],
    ["plan", "llama-3-70b", "--tokens", "1T", "--seq", "8192", "--global-batch", "1024", "--deadline-days",
     "30", "--budget", "2M", "--all"],
    ["plan", "llama-3-70b", "--stage", "1T:8192:1024", "--stage", "50B:32768:256", *H, "--max-gpus", "1024"],
    ["plan", "llama-3-8b", "--tokens", "1T", "--seq", "8192", "--global-batch", "512", "--json",
     "--top", "5"],
    ["plan", "mixtral-8x7b", "--tokens", "1T", "--seq", "4096", "--global-batch", "512", "--ep", "8"],
    ["plan", "qwen3-30b-a3b", "--tokens", "1T", "--seq", "4096", "--global-batch", "512", "--mtp-depth", "1",
     "--capacity-factor", "1.25", "--top", "5"],
    ["plan", "llama-3-8b", "--tokens", "1T", "--seq", "8192", "--global-batch", "512", "--mtp-depth", "1"],
    ["plan", "llama-3-8b", "--tokens", "1T", "--seq", "8192"],
    ["plan", "llama-3-8b", "--stage", "1T:8192", "--deadline-days", "3"],
    ["serve", "llama-3-70b", *H, "--prompt", "1024", "--output", "256", "--users", "1000", "--itl-ms", "50"],
    ["serve", "llama-3-8b", *H, "--prompt", "4096", "--output", "512", "--rps", "20", "--itl-ms", "30",
     "--json"],
    ["finetune", "llama-3-8b", "--method", "lora", *H, "--tokens", "100M", "--seq", "2048", "--batch", "4"],
    ["finetune", "llama-3-70b", "--method", "qlora", "--gpu", "A100 80GB", "--gpus", "4", "--strategy",
     "fsdp", "--tokens", "50M", "--json"],
    ["rl", "llama-3-8b", "--gpus", "64", "--prompts", "512", "--response", "1024"],
    ["frobnicate"], ["time", "llama-3-8b"],
    # ui28: `time --dispatcher` (training_time's dispatcher on the MoE step), refused at an MFU and on a
    # dense model, as `cost` refuses it
    ["time", "qwen3-30b-a3b", "--tokens", "1T", "--seq", "4096", *H, "--gpus", "64", "--dispatcher",
     "deepep"],
    ["time", "qwen3-30b-a3b", "--tokens", "1T", "--seq", "4096", *H, "--gpus", "64", "--dispatcher",
     "deepep", "--mfu", "0.4"],
    ["time", "llama-3-8b", "--tokens", "1T", "--seq", "4096", *H, "--gpus", "8", "--dispatcher", "alltoall"],
    ["cost", "olmoe-1b-7b", "--tokens", "1T", "--seq", "4096", *H, "--ep", "8", "--dispatcher", "deepep"],
    ["cost", "llama-3-8b", "--tokens", "1T", "--seq", "4096", *H, "--dispatcher", "deepep"],
    # lows29: `plan --dispatcher` refused on a dense model as `cost` and `time` refuse it (single and staged)
    ["plan", "llama-3-8b", "--tokens", "1T", "--seq", "8192", "--global-batch", "512", "--dispatcher",
     "deepep"],
    ["plan", "llama-3-8b", "--stage", "1T:8192:512", *H, "--max-gpus", "256", "--dispatcher", "alltoall"],
    ["plan", "olmoe-1b-7b", "--tokens", "1T", "--seq", "4096", "--global-batch", "256", *H, "--max-gpus",
     "64", "--ep", "8", "--dispatcher", "deepep", "--top", "5"],
]

def run(i):
    r = subprocess.run([sys.executable, "-m", "llmsizing", *CMDS[i]], capture_output=True, text=True)
    return {"cmd": CMDS[i], "rc": r.returncode, "out": r.stdout, "err": r.stderr}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):       # (not a path: "--help" once became a file)
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["--help"], ["-h"]) else 2)
    out = Path(sys.argv[1])
    before = json.loads(Path(sys.argv[3]).read_text()) if sys.argv[2:3] == ["--compare"] else None
    with ThreadPoolExecutor(2) as ex:
        res = list(ex.map(run, range(len(CMDS))))
    out.write_text(json.dumps(res, indent=1))
    for r in res:
        print(r["rc"], hashlib.md5((r["out"] + r["err"]).encode()).hexdigest()[:8], len(r["out"]),
              " ".join(r["cmd"])[:90], "|", r["err"][-100:].strip().replace("\n", " "))
    if before is not None:
        moved = [" ".join(r["cmd"]) for r, b in zip(res, before) if r != b]
        print(f"{len(res)} commands, {len(moved)} not byte-identical" + "".join(f"\n  {m}" for m in moved))
        sys.exit(bool(moved))
