"""Paired A/B in one process of speed27's changes (issue 38): the moves of chapter 17's and chapter 12's
widgets that are new settings, each round from scratch (every kept result cleared, a new widget), with the
branch's changes switched off (main's behaviour: each search's ``dense_arrays._kept`` parts its own) and on
in alternate rounds, so that the load of the machine falls on both sides alike.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_speed27_ab.py [--rounds N] [--kinds K ...]

Kinds: ``17seq`` (chapter 17, each of five models moved to 64K and 256K), ``17cp`` (its K/V exchange to
all-gather), ``17gpus`` (H100 SXM + B200), ``12step`` (chapter 12, each of four models' sequence to 4K and
global batch to 1,024), ``12moe`` (chapter 12's picks of four mixtures of experts). Prints per kind the
median and p90 CPU ms (``time.process_time``) of the moves, off -> on, and the median of the paired ratios
(on / off, move by move), and the median CPU ms per move inside the parts the change touches
(``dense_arrays.search_pieces``, ``moe_prefetch._columns``), off -> on. Does not assert (timings are not
tests).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_planner  # noqa: E402

from llmsizing import dense_arrays, moe_prefetch  # noqa: E402
from llmsizing.widgets import long_context_widget, planner_widget  # noqa: E402

NEW_KEPT = dense_arrays._kept
#: The parts the change touches, timed on their own too (their CPU ms inside each move): the pieces of a
#: dense model's (and a mixture of experts' reference layouts') calls and of a mixture of experts' states.
PARTS = ((dense_arrays, "search_pieces"), (moe_prefetch, "_columns"))
CH17_MODELS = ("qwen3-30b-a3b", "deepseek-v2", "llama-3-70b", "gpt-oss-120b", "mixtral-8x7b")
CH12_MODELS = ("mixtral-8x7b", "qwen3-30b-a3b", "llama-3-8b", "deepseek-v2")


def old_kept(memory) -> dict:
    """main's ``dense_arrays._kept``: the parts kept on each search's own SearchMemory."""
    return memory.__dict__.setdefault("_dense_arrays", {})


def moves(kind: str, timed) -> None:
    """One round of ``kind``'s moves, each through ``timed(widget, control, value)``."""
    if kind.startswith("17"):
        w = long_context_widget(speculate=False)
        for m in CH17_MODELS:
            w.controls["model"].value = m
            if kind == "17seq":
                for s in (65536, 262144):
                    timed(w, "seq", s)
                w.controls["seq"].value = 131072
            elif kind == "17cp":
                timed(w, "cp_comm", "all_gather")
                w.controls["cp_comm"].value = "p2p"
            else:
                timed(w, "gpus", ("H100 SXM", "B200"))
                w.controls["gpus"].value = ("H100 SXM",)
    elif kind == "12step":
        w = planner_widget()
        for m in CH12_MODELS:
            w.controls["model"].value = m
            for c, v in (("seq", 4096), ("global_batch", 1024)):
                before = w.controls[c].value
                timed(w, c, v)
                w.controls[c].value = before
    else:
        w = planner_widget()
        for m in ("mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v2", "olmoe-1b-7b"):
            timed(w, "model", m)
            w.controls["model"].value = "llama-3-8b"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--kinds", nargs="+", default=["17seq", "17cp", "17gpus", "12step", "12moe"])
    args = ap.parse_args()
    out: dict = {}
    inner = {"s": 0.0}
    real = {name: getattr(mod, name) for mod, name in PARTS}

    def clocked(fn):
        def run(*a, **kw):
            c0 = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                inner["s"] += time.process_time() - c0
        return run

    for mod, name in PARTS:
        setattr(mod, name, clocked(real[name]))
    parts: dict = {}
    try:
        for r in range(args.rounds):
            for kind in args.kinds:
                for on in ((False, True) if r % 2 == 0 else (True, False)):
                    dense_arrays._kept = NEW_KEPT if on else old_kept
                    for kept in bench_planner.kept():
                        kept.cache_clear()
                    got = out.setdefault((kind, on), {})
                    seen: dict = {}

                    def timed(w, c, v):
                        key = (w.controls["model"].value, c, v)
                        seen[key] = seen.get(key, -1) + 1
                        inner["s"] = 0.0
                        c0 = time.process_time()
                        w.controls[c].value = v
                        got.setdefault((key, seen[key]), []).append(time.process_time() - c0)
                        parts.setdefault((kind, on), []).append(inner["s"])
                        if w.error.value:
                            print(f"  {kind} {key}: {w.error.value[:100]}")
                    moves(kind, timed)
    finally:
        dense_arrays._kept = NEW_KEPT
        for mod, name in PARTS:
            setattr(mod, name, real[name])
    print(f"{'kind':8s} {'moves':>6s} {'off median':>11s} {'on median':>10s} {'off p90':>8s} {'on p90':>7s} "
          f"{'ratio':>6s} {'parts off -> on (median ms)':>28s}")
    for kind in args.kinds:
        off, on = out[kind, False], out[kind, True]
        a = sorted(x for v in off.values() for x in v)
        b = sorted(x for v in on.values() for x in v)
        ratios = [y / x for k in off for x, y in zip(off[k], on[k])]
        print(f"{kind:8s} {len(a):6d} {statistics.median(a) * 1e3:11.1f} {statistics.median(b) * 1e3:10.1f} "
              f"{a[int(0.9 * (len(a) - 1))] * 1e3:8.1f} {b[int(0.9 * (len(b) - 1))] * 1e3:7.1f} "
              f"{statistics.median(ratios):6.3f} {statistics.median(parts[kind, False]) * 1e3:14.1f} -> "
              f"{statistics.median(parts[kind, True]) * 1e3:.1f}")


if __name__ == "__main__":
    main()
