"""CPU time of chapter 12's widget (``planner_widget``) when a participant picks models (issue 38: every move
<= 100 ms painted, so about 50 ms of kernel CPU). Each round builds a new widget at its defaults (Llama 3 70B,
1T tokens, the chapter's GPU types, 8K, 512 sequences, <= 4,096 GPUs), clears the planner's kept results
(benchmarks/bench_planner.kept) and then picks each model of ``MODELS`` in turn, dense and mixture of experts
alternately, as part24's participant did: each pick is a new planner search at the other defaults, its
render and its PNG (never a kept answer). With ``--steps`` each pick is followed by one step of each other
search control (tokens, sequence, global batch, max GPUs: each a setting not drawn before), set back before
the next pick (not timed).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_ch12_models.py [--rounds N] [--split] [--steps]
        [--only MODEL ...] [--profile FILE]

Prints per model the median, p90 and max CPU ms (``time.process_time``) of its pick over the rounds
(``--split``: the medians of its plan() calls, of render_plan and of the PNG draw, ``dashboard._figure_png``),
and the median and p90 of all picks. ``--profile FILE``: cProfile of all timed moves into FILE. Does not
assert (timings are not tests).

Measured 2026-12-02 (branch speed25 at 5e46a9a; base = main 957e83b as a ``git archive`` of src and data on
PYTHONPATH, the same venv; base, new, base, new one after the other, 04:41:14-04:42:40 UTC, load 4.1-4.7 on 2
cores shared with other sessions), --rounds 5 --split --steps, CPU ms, base -> new (two pairs):

    picks, median of the 40          86 -> 66      88 -> 66
    picks, p90                      129 -> 94     127 -> 95
    steps, median of the 160         62 -> 45      64 -> 45
    steps, p90                      104 -> 71     104 -> 72
    steps over 50 ms                121 -> 54     121 -> 57

Then at fedef93 (the widget's lower GPU limit also a cut of its wider search: ``plans_within``, no new
search), 04:48:33-04:49:30 UTC, load 2.2-2.7, the same way:

    picks, median of the 40          84 -> 64      84 -> 64
    picks, p90                      126 -> 90     123 -> 91
    picks over 50 ms                 40 -> 36      40 -> 36
    steps, median of the 160         60 -> 34      60 -> 35
    steps, p90                      101 -> 61     100 -> 60
    steps over 50 ms                121 -> 35     121 -> 34

    per pick (median)    mixtral 80-81 -> 66-68, llama-3-8b 68 -> 51, qwen3-30b-a3b 121 -> 93,
                         llama-3.1-405b 107-108 -> 63, deepseek-v2 125-126 -> 85-86, mistral-7b 66 -> 49,
                         olmoe-1b-7b 76-77 -> 68, llama-2-13b 85-87 -> 57-58
    per step (median of the models) tokens 22-31 -> 21-31 (no search), sequence 59-106 -> 42-76, global
                         batch 56-104 -> 35-77, max GPUs 54-94 -> 20-32
    a pick's plan() 41-96 -> 24-61 ms; its render_plan 8-12 and PNG 13-15 ms unchanged.

What changed (speed25): each pipeline degree's stage terms kept across GPU types and searches
(``plan_stage_terms._pp_terms``), the pointwise bytes per stage made once per call, a fresh search of
several GPU types fitted all at once (``plan_fits._all_at_once``) and priced in one call
(``plan_pricing.kept_price``); a lower GPU limit is a cut of the widget's wider search.
What is left of a pick (~50-95 ms): the new model's memory entries and fit (~11-31 ms), its pricing (~12-30),
plan()'s frame (~3-9), render_plan (~10) and the PNG (~14): the 50 ms of issue 38 is met by 4 of the 40 picks
(Mistral 7B's, 49 ms median); the steps' median is met, not their p90 (60-61 ms: the sequence and global
batch steps of the mixtures of experts, each a new search).

Measured 2026-12-02 (branch speed26 at fd9261d; base = main 47c3c4b's src on PYTHONPATH, the same venv; load
0.7-1.1 at 06:05-06:06 UTC, 2.8-3.0 at 06:13, on 2 cores shared with other sessions), --rounds 5 --split
(--steps in the first two pairs), CPU ms of all picks, base -> new, median (p90):

    06:05-06:06  129 (213) -> 113 (198)     101 (142) -> 110 (157)
    06:13-06:14  114 (165) -> 136 (212)     128 (184) -> 105 (160)

The pairs disagree in sign: one run's median moves by 10-25 ms with the load (CPU time too: the other
sessions share the cores' caches), more than the change. It is measured instead in one process by
benchmarks/bench_speed26_ab.py, main's function and the new one in turn on chapter 12's recorded arguments
(06:14 UTC, load 2.7-3.1), ms, main -> new, and whole picks paired move by move (10 rounds):

    _kept_key_rows of a new model    mixtral-8x7b 7.0 -> 3.7, qwen3-30b-a3b 13.8 -> 7.5, deepseek-v2
                                     11.3 -> 5.1, olmoe-1b-7b 10.6 -> 5.6 (every row the same bits)
    (an earlier run, 06:11, load 3.6: 14.5 -> 6.9, 20.9 -> 11.3, 20.7 -> 9.3, 20.2 -> 10.4)
    whole picks (median)             mixtral-8x7b 98.7 -> 94.8, qwen3-30b-a3b 154.2 -> 147.6,
                                     deepseek-v2 138.0 -> 130.8, olmoe-1b-7b 114.3 -> 115.4;
                                     paired difference, median of the 40: 4.7 ms

What changed (speed26): a mixture of experts' data-parallel rows (plan_moe._kept_key_rows) of every GPU type
that keeps none of a key worked out in one ``_key_rows`` call for all of them instead of one per GPU type (a
new model on the widget's four GPU types: four calls, each with its own NumPy and link overhead). Dense
models' picks are unchanged (no such rows), and so is chapter 17 at its one GPU type (bench_ch17_models.py,
--rounds 5 --split --controls, two pairs at 06:06-06:11 UTC, load 1.4-4.8: the MoE moves' medians 46-64 ms
either side, all 51-54). The walk_ch12_bits / walk_ch17_bits digests, forward and reversed, are main's.

Since 2026-12-02 (branch speed27): search_pieces' kept layout parts are shared across contexts
(bench_ch17_models.py's docstring); a chapter 12 sequence step reuses them. Its steps to 4K and to a global
batch of 1,024 (four models, 64 moves), paired (benchmarks/bench_speed27_ab.py --rounds 8, 08:41-08:44 UTC,
load 0.6-1.1): 89.0 (136.7) -> 86.3 (125.4) ms median (p90), ratio 0.952, the parts 2.2 -> 1.1 ms a move.
plan()'s price_kind column is taken from a string column of the GPUs' kinds (~1 ms of a 59,000-plan table,
~0.2 ms of chapter 12's ~12,000). A pick (a new model) is unchanged: nothing of it is kept from another model.
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

from llmsizing import charts, planner  # noqa: E402
from llmsizing.widgets import dashboard, planner_widget  # noqa: E402

#: The picks, dense and mixture of experts in turn (the widget starts on Llama 3 70B, never picked: its answer
#: is kept).
MODELS = ("mixtral-8x7b", "llama-3-8b", "qwen3-30b-a3b", "llama-3.1-405b", "deepseek-v2", "mistral-7b",
          "olmoe-1b-7b", "llama-2-13b")
#: The other search controls' steps (``--steps``), each to a setting not drawn before.
STEPS = (("tokens", 2e12), ("seq", 4096), ("global_batch", 1024), ("max_gpus", 2048))


def p90(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--split", action="store_true")
    ap.add_argument("--steps", action="store_true")
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--profile", default=None)
    args = ap.parse_args()
    models = [m for m in MODELS if args.only is None or m in args.only]
    clock = {"plan": 0.0, "render": 0.0, "png": 0.0}
    real = {"plan": (planner, "plan"), "render": (charts, "render_plan"), "png": (dashboard, "_figure_png")}
    saved = {k: getattr(mod, name) for k, (mod, name) in real.items()}

    if args.split:
        for k, (mod, name) in real.items():
            setattr(mod, name, bench_planner.clocked(clock, k, saved[k]))
    picks: dict = {m: [] for m in models}
    parts: dict = {(m, k): [] for m in models for k in clock}
    steps: dict = {(m, c): [] for m in models for c, _ in STEPS}
    prof = None
    if args.profile:
        import cProfile
        prof = cProfile.Profile()
    try:
        for _ in range(args.rounds):
            for kept in bench_planner.kept():
                kept.cache_clear()
            w = planner_widget()
            for m in models:
                clock.update(plan=0.0, render=0.0, png=0.0)
                if prof:
                    prof.enable()
                c0 = time.process_time()
                w.controls["model"].value = m
                picks[m].append(time.process_time() - c0)
                if prof:
                    prof.disable()
                for k in clock:
                    parts[m, k].append(clock[k])
                if w.error.value:
                    print(f"  {m}: {w.error.value[:100]}")
                if not args.steps:
                    continue
                defaults = {c: w.controls[c].value for c, _ in STEPS}
                for c, value in STEPS:
                    if prof:
                        prof.enable()
                    c0 = time.process_time()
                    w.controls[c].value = value
                    steps[m, c].append(time.process_time() - c0)
                    if prof:
                        prof.disable()
                for c, _ in STEPS[::-1]:
                    w.controls[c].value = defaults[c]
    finally:
        for k, (mod, name) in real.items():
            setattr(mod, name, saved[k])
    ms = 1e3
    print(f"{'model':22s} {'med':>5s} {'p90':>5s} {'max':>5s}" + (" plan render png" if args.split else "")
          + ("   steps: " + " ".join(c for c, _ in STEPS) if args.steps else ""))
    for m in models:
        xs = picks[m]
        row = f"{m:22s} {statistics.median(xs)*ms:5.0f} {p90(xs)*ms:5.0f} {max(xs)*ms:5.0f}"
        if args.split:
            row += "".join(f" {statistics.median(parts[m, k])*ms:5.0f}" for k in clock)
        if args.steps:
            row += "   " + " ".join(f"{statistics.median(steps[m, c])*ms:4.0f}" for c, _ in STEPS)
        print(row)
    alls = [x for m in models for x in picks[m]]
    print(f"all picks: median {statistics.median(alls)*ms:.0f} ms, p90 {p90(alls)*ms:.0f} ms, "
          f"{sum(x > 0.05 for x in alls)} of {len(alls)} over 50 ms")
    if args.steps:
        alls = [x for v in steps.values() for x in v]
        print(f"all steps: median {statistics.median(alls)*ms:.0f} ms, p90 {p90(alls)*ms:.0f} ms, "
              f"{sum(x > 0.05 for x in alls)} of {len(alls)} over 50 ms")
    if prof:
        prof.dump_stats(args.profile)


if __name__ == "__main__":
    main()
