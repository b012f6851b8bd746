"""Paired, interleaved A/B of a widget's kernel CPU per new setting (issues 35 and 38, speed38): a base
checkout (e.g. ``git worktree add --detach /work/wt-base main``) and this one, each in a fresh ipykernel
started as Voila starts one (benchmarks/bench_kernel_moves.py's ``one_kernel``: the chapter's cells run, then
the participant's walk of tests/browser/measure_participant.py, every move one ``comm_msg`` as the page sends
it, its CPU read from /proc over all the kernel's threads). The sides alternate kernel by kernel (odd pairs
base first) and walk the same moves, so each move is paired with its twin on the other side.

    .venv/bin/python benchmarks/bench_speed38_ab.py --base /work/wt-base [--chapter 17] [--pairs 4]
        [--rounds 6] [--out F]

Prints per side the median and p90 of the kernel CPU of the moves to new settings (steps; picks; both), the
median of its parts (plan(), the rest of the render, the PNG: draw and encode), the median paired ratio
(this / base, move by move) and the 1-minute load before and after each kernel. Does not assert (timings
are not tests).

Measured (speed38, 2026-12-03, base = main b7573a86 in a detached worktree, this = speed38 5ddd7cf7;
``--pairs 4 --rounds 6``, 144 new settings a side; medians, base -> this):

    20:52-20:59 UTC, load 3.6 -> 1.1: new settings 114.7 -> 100.1 ms (p90 194.4 -> 174.6), paired 0.898;
        plan() 59.1 -> 50.2, render 16.1 -> 15.0, PNG 35.2 -> 33.5, around 6.1 -> 5.6
    21:00-21:06 UTC, load 2.0 -> 3.6: new settings 96.2 -> 103.3 ms (p90 169.4 -> 161.3), paired 1.023;
        plan() 49.4 -> 51.8, render 14.0 -> 14.4, PNG 30.5 -> 32.2, around 5.4 -> 5.5

The parts this branch does not touch (render, PNG, around) and moves that search nothing (a lower GPU limit,
a kept mixture of experts' pick) move by 5-15% between the two runs and between kernels of one side: a
whole-move change under ~10 ms is not resolved here. The one move both runs agree on: adding a GPU type to
a mixture of experts' search (A10 to H100 SXM), plan() 126.3 -> 112.4 and 113.5 -> 97.9 ms (its Megatron
bucket counts; /work/notes/s38/speed38.md).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_kernel_moves import one_kernel, split  # noqa: E402


def p90(xs: list) -> float:
    """The nearest-rank 90th percentile of ``xs``."""
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.9 * (len(s) - 1)))]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="the base checkout (its book/ and src/)")
    ap.add_argument("--chapter", default="17", choices=("12", "17", "18"))
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=6, help="model picks a kernel, each then every control's "
                                                          "step and back")
    ap.add_argument("--out", type=Path, help="every move's record (JSON)")
    a = ap.parse_args(argv)
    sides = (("base", a.base.resolve()), ("this", ROOT))
    runs = []
    for p in range(a.pairs):
        for name, tree in (sides if p % 2 == 0 else sides[::-1]):
            load0 = os.getloadavg()[0]
            rec = one_kernel(tree, a.chapter, a.rounds)
            rec.update(side=name, pair=p, load=(load0, os.getloadavg()[0]))
            runs.append(rec)
            new = [m["cpu_ms"] for m in rec["moves"] if m["kind"] != "back"]
            print(f"pair {p + 1} {name}: median {statistics.median(new):.1f} ms a new setting, load "
                  f"{load0:.2f} -> {rec['load'][1]:.2f}", flush=True)
    if a.out:
        a.out.write_text(json.dumps(runs, indent=1))
    print(f"\nchapter {a.chapter}, {a.pairs} pairs x {a.rounds} rounds; kernel CPU ms (all threads), "
          "base -> this")
    for kinds, label in ((("step",), "steps"), (("model pick",), "picks"), (("step", "model pick"), "new")):
        got = {s: [split(m) for r in runs if r["side"] == s for m in r["moves"] if m["kind"] in kinds]
               for s, _ in sides}
        ratios = [t["cpu"] / b["cpu"] for rb, rt in _pairs(runs) for b, t in zip(
            [split(m) for m in rb["moves"] if m["kind"] in kinds],
            [split(m) for m in rt["moves"] if m["kind"] in kinds])]
        med = {s: {k: statistics.median(x[k] for x in v) for k in ("cpu", "plan", "render", "png", "around")}
               for s, v in got.items()}
        tail = {s: p90([x["cpu"] for x in v]) for s, v in got.items()}
        print(f"{label:6s} n={len(got['this']):3d}  median {med['base']['cpu']:6.1f} -> "
              f"{med['this']['cpu']:6.1f}  p90 {tail['base']:6.1f} -> {tail['this']:6.1f}  paired ratio "
              f"median {statistics.median(ratios):.3f}")
        print("        parts (medians): " + ", ".join(
            f"{k} {med['base'][k]:.1f} -> {med['this'][k]:.1f}" for k in ("plan", "render", "png", "around")))


def _pairs(runs: list):
    """(base run, this run) of each pair."""
    by = {}
    for r in runs:
        by.setdefault(r["pair"], {})[r["side"]] = r
    return [(v["base"], v["this"]) for v in by.values() if len(v) == 2]


if __name__ == "__main__":
    main()
