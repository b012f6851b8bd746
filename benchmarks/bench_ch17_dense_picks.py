"""A dense model's first search in chapter 17's widget (issues 35, 38; pick49): what a pick of a dense model
pays once for the model itself (its layouts, their model states, its gradient-bucket counts, its
data-parallel rows), against the same search once the model's own work is kept.

Each measurement is a fresh process: two other searches first (the widget's default model and a mixture of
experts, at the widget's defaults: 128K, 16M tokens per batch, H100 SXM, 16,384 GPUs, ring exchange), then
``plan()`` of the model at those defaults, timed (``time.process_time``): the **first** search. ``warm``: the
same, but the model searched at 256K first (its per-model work kept), then the 128K search timed; the
difference is the per-model work a pick pays. The garbage collection the searches before left due is made
before the timed search (``gc.collect()``): the planner pauses the collector during a search, so a collection
due when the model's search at 256K returned fell in the timed call's first allocation (mistral-7b's ``warm``
search measured 70-78 ms with it, 50-55 without). ``--widget``: the chapter's widget built first
(``warm=True``, no speculation) instead of the two searches. ``--repeats R`` fresh processes per figure, the
least kept; ``--base OTHER/src`` alternates them with another tree's ``src/`` (an A/B at the same load).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_ch17_dense_picks.py [--repeats 5] [--base OTHER/src]
        [--widget] [MODEL ...]

Does not assert (timings are not tests).
"""
from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time

#: Dense models of the drop-down, spread over the catalogue (small to large), when none is named.
MODELS = ("gpt2", "tinyllama-1.1b", "mistral-7b", "llama-3-8b", "qwen2-7b", "nemotron-4-15b", "llama-2-70b",
          "gpt3-175b")
SEQ, NEXT, BATCH_TOKENS, MAX_GPUS = 131072, 262144, 2**24, 16384


def _args(seq: int) -> dict:
    return dict(tokens=8e11, gpus=("H100 SXM",), seq=seq, global_batch=max(BATCH_TOKENS // seq, 1),
                max_gpus=MAX_GPUS, cp_comm="p2p")


def child(model: str, warm: bool, widget: bool) -> float:
    """The CPU ms of ``model``'s search at the widget's defaults in this (fresh) process."""
    from llmsizing.catalog import get_model, list_models
    from llmsizing.planner import plan

    if widget:
        import matplotlib

        matplotlib.use("Agg")
        from llmsizing.widgets.long_context import long_context_widget

        long_context_widget(speculate=False)
    else:
        moe = next(m for m in list_models() if get_model(m).is_moe)
        for other in ("llama-3.1-405b", moe):
            plan(other, **_args(SEQ))
    if warm:
        plan(model, **_args(NEXT))
    gc.collect()    # (the collection the searches before left due, not this search's: ~20 ms, in either mode)
    t = time.process_time()
    plan(model, **_args(SEQ))
    return (time.process_time() - t) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=list(MODELS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--base", help="another tree's src/, alternated with this tree's")
    ap.add_argument("--widget", action="store_true", help="build chapter 17's widget first")
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(f"{child(args.child[0], args.child[1] == 'warm', args.widget):.3f}")
        return
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    trees = [("this", here)] + ([("base", args.base)] if args.base else [])
    with open("/proc/loadavg") as f:
        print("load before:", f.read().split()[:3])
    best: dict = {}
    for _ in range(args.repeats):
        for model in args.models:
            for mode in ("first", "warm"):
                for name, src in trees:
                    env = {**os.environ, "PYTHONPATH": src}
                    out = subprocess.run([sys.executable, __file__, "--child", model, mode]
                                         + (["--widget"] if args.widget else []),
                                         env=env, capture_output=True, text=True, check=True)
                    ms = float(out.stdout.split()[-1])
                    key = (model, mode, name)
                    best[key] = min(best.get(key, ms), ms)
    with open("/proc/loadavg") as f:
        print("load after:", f.read().split()[:3])
    head = f"{'model':18s}" + "".join(f"  {n + ' ' + m:>12s}" for n, _ in trees for m in ("first", "warm"))
    print(head + "  (CPU ms, least of", args.repeats, "fresh processes)")
    for model in args.models:
        row = "".join(f"  {best[model, m, n]:12.1f}" for n, _ in trees for m in ("first", "warm"))
        print(f"{model:18s}{row}")


if __name__ == "__main__":
    main()
