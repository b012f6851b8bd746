"""What chapter 17's new-setting steps would cost if the planner's per-setting entries were ready before the
step (issues 35, 38; speed44): the ceiling of the lever session 43 named, the memory fit's entries (and the
collectives' prices) of every context length and K/V exchange the widget offers worked out ahead, on arrays.

Replays bench_ch17_participant_walk.py's walk (the widget built as the book builds it, no speculation) and
times ``planner.plan`` (CPU, ``time.process_time``) at each context step (128K -> 256K) and K/V exchange step
(ring -> all-gather). With ``--ready``, just before each such step a ``plan()`` of the same setting but a GPU
limit of 8,192 is made and not timed: it shares the step's :class:`~llmsizing.plan_memory.SearchMemory` (the
dense and MoE memory entries, ``per_micro`` at every ``cp``, the state tables), the kept layer rows
(:func:`~llmsizing.plan_terms.layer_terms`, the tp and cp collectives' ``communication()`` calls) and the
MoE data-parallel rows, but not the candidates (their key holds the GPU limit), the kept fits or the kept
price blocks, so the timed step still weighs and prices all its plans. Its own CPU (what the entries cost
when made one setting at a time, as now) is printed too. Runs alternate, each in a fresh process.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_ch17_ready_entries.py [--models 10] [--repeats 5]

Does not assert (timings are not tests).

Measured 2026-12-04 18:08-18:10 UTC (speed44, main fae918dc, 2 cores shared, load 1.7-3.4), ``--models
10 --repeats 5``: see benchmarks/README.md's 100 ms row (speed44) for the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ch17_participant_walk import walk  # noqa: E402

TIMED = ("seq", "cp_comm")


def one_run(models: int, ready: bool) -> list:
    """One walk: ``[(control, plan CPU ms of the step, CPU ms of the untimed plan made before it)]``."""
    import llmsizing.planner as planner
    from llmsizing.widgets import long_context_widget
    from llmsizing.widgets.long_context import _plan_args

    real = planner.plan
    spent = [0.0]

    def timed(*a, **k):
        c0 = time.process_time()
        try:
            return real(*a, **k)
        finally:
            spent[0] += time.process_time() - c0

    planner.plan = timed            # (before the widget is built: it imports plan at build time)
    w = long_context_widget("llama-3.1-405b", speculate=False)
    out = []
    for kind, control, value in walk(w, models):
        before = 0.0
        if ready and kind == "step" and control in TIMED:
            at = {k: c.value for k, c in w.controls.items()}
            at[control] = value
            args, kw = _plan_args(at["model"], at["seq"], tuple(at["gpus"]), at["batch_tokens"], 8192,
                                  at["cp_comm"])
            c0 = time.process_time()
            try:
                real(*args, **kw)
            except ValueError:                  # (nothing fits within 8,192: the step shows why)
                pass
            before = (time.process_time() - c0) * 1e3
        spent[0] = 0.0
        w.controls[control].value = value
        if kind == "step" and control in TIMED:
            out.append((control, spent[0] * 1e3, before))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5, help="runs a side, each in a fresh process")
    ap.add_argument("--child", choices=("cold", "ready"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_run(args.models, args.child == "ready")))
        return
    print(os.popen("cat /proc/loadavg").read().strip())
    runs: dict = {"cold": [], "ready": []}
    for _ in range(args.repeats):
        for side in runs:                        # (alternated: the machine's load falls on both alike)
            out = subprocess.run([sys.executable, __file__, "--child", side, "--models", str(args.models)],
                                 capture_output=True, text=True, check=True, env=dict(os.environ))
            runs[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
            r = runs[side][-1]
            print(f"{side:5s} " + "  ".join(
                f"{c}: plan median {statistics.median(x[1] for x in r if x[0] == c):5.1f} ms"
                + (f" (made before: {statistics.median(x[2] for x in r if x[0] == c):5.1f})"
                   if side == "ready" else "") for c in TIMED), flush=True)
    for side, per_run in runs.items():
        for c in TIMED:
            meds = [statistics.median(x[1] for x in r if x[0] == c) for r in per_run]
            print(f"{side:5s} {c:8s} median of {len(per_run)} runs' medians "
                  f"{statistics.median(meds):5.1f} ms (runs {', '.join(f'{m:.1f}' for m in meds)})")
    print(os.popen("cat /proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
