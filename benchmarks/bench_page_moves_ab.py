"""Paired, interleaved A/B of a participant's moves in Voila (issue 38: every widget <= 100 ms a move as a
participant sees it): tests/browser/measure_participant.py run alternately from a base worktree (e.g.
``git worktree add --detach /work/wt-base main``, with this tree's tests/browser/test_lab.py copied in, so
that both sides are timed by one harness) and from this tree, each with its own ``src`` on PYTHONPATH, then
pooled medians per side and kind of move (tools/participant_stats.py's split). Not a test; run it by hand:

    .venv/bin/python benchmarks/bench_page_moves_ab.py --base /work/wt-base --chapter 17 --pairs 4

Measured (lat37, 2026-12-03), 2-core machine shared with other helpers (1-minute load 1.3-3.3 during the
runs), chapter 17, 7 pairs (385 moves a side), base = main d6f6c793, this = lat37 (the busy mark on the
figure's image, off in the new figure's own message; no echo_update from a Voila kernel). Pooled medians,
base -> this (ms; "browser CPU" is Chromium's CPU over the whole move, the harness's own calls included):

    step        painted 142 -> 135 (p90 203 -> 180), to the page (rest) 33 -> 25, browser CPU 141 -> 138
    back        painted  45 ->  40 (p90  64 ->  55), to the page (rest) 17 -> 14, browser CPU 106 ->  98
    all moves   painted 100 ->  90 (p90 176 -> 164), to the page (rest) 23 -> 17, browser CPU 123 -> 115

The kernel's CPU is the same on both sides (step 83 / 85 ms, back 4 / 4). Chapter 12: the report
(/work/notes/s37/lat37.md). Kernel messages a move (tests/browser/trace_moves.py): a new setting 7 -> 5
(status busy, busy mark on, figure + mark off, summary, status idle), a kept answer 5 -> 4 (the echo_update
gone).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from participant_stats import nearest_rank, split  # noqa: E402


def run(tree: Path, out: Path, label: str, chapter: str) -> int:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), PART_OUT=str(out), PART_RUN=label)
    return subprocess.call([str(tree / ".venv" / "bin" / "python"), "-m", "pytest",
                            "tests/browser/measure_participant.py", "-p", "no:cacheprovider", "-q",
                            "-k", f"voila and {chapter}"], cwd=tree, env=env, stdout=subprocess.DEVNULL)


def pooled(record: dict, chapter: str, side: str) -> dict:
    """Pooled medians of every run of ``side`` (its label starts with it) by kind of move."""
    runs = [v["moves"] for k, v in record.items() if k.startswith(f"voila {chapter} run {side}")]
    out = {}
    for kind in ("step", "back", "model pick", "all"):
        moves = [m for ms in runs for m in ms if kind == "all" or m.get("kind") == kind]
        parts = [split(m) for m in moves]
        out[kind] = {key: (round(nearest_rank(vals, 0.5)) if (vals := [p[key] for p in parts
                                                                         if p[key] is not None]) else None)
                     for key in ("painted", "kernel_cpu_ms", "to_page_ms", "browser_ms", "browser_cpu_ms")}
        out[kind]["moves"] = len(moves)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="the base worktree (its .venv linked)")
    ap.add_argument("--chapter", default="17")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "page_moves_ab.json")
    args = ap.parse_args(argv)
    for i in range(1, args.pairs + 1):
        for side, tree in (("base", args.base), ("this", ROOT)):
            rc = run(tree, args.out, f"{side}{i}", args.chapter)
            print(f"{side}{i}: rc {rc}, 1-minute load {os.getloadavg()[0]:.2f}", flush=True)
    record = json.loads(args.out.read_text())
    for side in ("base", "this"):
        for kind, s in pooled(record, args.chapter, side).items():
            print(side, kind, s)


if __name__ == "__main__":
    main()
