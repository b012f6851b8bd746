"""ttft35's cost, measured (paired, interleaved rounds, medians): the cohort run (``serve_churn.kv_churn``)
now also counts the work up to the batch's last first token (``Churn.to_last_first_token``), which
``Serving.last_ttft_s`` prices over the KV room. Each round runs the cases below in a fresh interpreter on
main's ``src`` (``git archive`` of ``BASE``) and on this checkout's, the two sides alternating (base-new,
new-base); CPU time (``time.process_time``) per call, medians over the rounds and the median paired ratio.

Cases: Llama-3-8B on an H100 (its blocks and room as ``serving`` gives them), 1,024 + 256 tokens twice the
room of 346 (chapter 15's 692 requests) and 8 times, 128 + 2,048 tokens twice its room of 203, 4,096 + 512
tokens twice its room of 96.

Run: ``.venv/bin/python benchmarks/bench_ttft35.py [BASE] [--rounds 6]``. Does not assert (timings are not
tests).

Measured (ttft35, 2026-12-03, against main 4dd8d24f; CPU ms a call, medians, paired ratio):

* counting with a pass over the cohorts each step (a sum, then the same fused into the loop that advances
  them), 6 rounds each, load 2-3: 1.25-1.43, then 1.25-1.38 (10.9 -> 14.1 ms at twice the room, 51.8 ->
  70.4 ms at 8 times);
* counting from ``mass``, the running requests' computed tokens kept as they change (what is committed),
  10 rounds, load 1.5-1.8: 10.9 -> 10.7 ms (1.011), 45.2 -> 45.0 (0.996), 28.5 -> 29.3 (1.019), 19.3 ->
  19.5 (1.000): within the noise; a 6-round run at load 2-3 gave 0.84-0.97.
* cohort36 (the run also keeps the whole run's counts, ``Churn.to_last_token``, one more ``StepCounts`` at
  its end), against main a9d92b3b, 6 rounds, load 1.6-2.0: 15.9 -> 14.7 ms (1.051), 67.7 -> 65.6 (0.988),
  45.8 -> 42.1 (0.972), 30.4 -> 29.1 (0.981): within the noise.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
CALLS = """
import json, time
from llmsizing.serve_churn import kv_churn
from llmsizing.serve_step import serving
out = {}
for prompt, output, over in ((1024, 256, 2), (1024, 256, 8), (128, 2048, 2), (4096, 512, 2)):
    s = serving("llama-3-8b", "H100 SXM", prompt=prompt, output=output)
    args = (s.kv_capacity.blocks, over * s.kv_batch, prompt, output, s.max_num_seqs)
    kv_churn(*args)                                      # (warm)
    t = time.process_time()
    for _ in range(3):
        kv_churn(*args)
    out[f"{prompt}+{output} x{over}"] = (time.process_time() - t) / 3
print(json.dumps(out))
"""


def _round(src: str) -> dict:
    import json

    out = subprocess.run([sys.executable, "-c", CALLS], env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", nargs="?", default="main")
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(HERE), "archive", args.base, "src", "data"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        got = {"base": [], "new": []}
        for r in range(args.rounds):
            for side in (("base", "new") if r % 2 == 0 else ("new", "base")):
                got[side].append(_round(str(Path(tmp) / "src") if side == "base" else str(HERE / "src")))
    print(f"{'case':22s} {'base ms':>8s} {'new ms':>7s} {'new/base':>9s}")
    for case in got["base"][0]:
        b = [x[case] for x in got["base"]]
        n = [x[case] for x in got["new"]]
        ratio = statistics.median([y / x for x, y in zip(b, n)])
        print(f"{case:22s} {statistics.median(b) * 1e3:8.1f} {statistics.median(n) * 1e3:7.1f} {ratio:9.3f}")


if __name__ == "__main__":
    main()
