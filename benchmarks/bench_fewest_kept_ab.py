"""Paired A/B of chapter 10's fit questions (hot34, issue 38): what render_training_time asks on each figure
(``fits_on`` on every GPU count, then ``min_gpus``), with min_gpus's and fits_on's dense layouts built anew
(``Parallel``: the path before hot34's fewest_gpus change) against kept (``parallel.kept_parallel``), in one
process, alternating A and B question by question, so that a shared machine's load falls on both alike.
CPU ms (``time.process_time``) per figure's questions: medians and the median paired ratio (B / A).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_fewest_kept_ab.py [--rounds N]

Does not assert (timings are not tests); tests/test_fewest_kept_layouts.py checks that the answers are equal.
"""

from __future__ import annotations

import argparse
import statistics
import time

from llmsizing import fewest_gpus
from llmsizing.charts.time_money import TIME_GPU_COUNTS
from llmsizing.fewest_gpus import fits_on, min_gpus
from llmsizing.parallel import Parallel, kept_parallel

SETTINGS = [(m, g, s) for m in ("gpt2", "llama-3-8b", "llama-3-70b", "llama-3.1-405b", "mixtral-8x7b")
            for g in ("H100 SXM", "A100 80GB") for s in (2048, 8192)]


def questions(model, gpu, seq):
    """The questions of one chapter 10 figure at 1,024 GPUs marked."""
    for n in sorted(set(TIME_GPU_COUNTS) | {1024}):
        fits_on(model, gpu, n, seq=seq)
    try:
        min_gpus(model, gpu, batch=1, seq=seq, recompute="full")
    except ValueError:
        pass


def timed(build, setting) -> float:
    fewest_gpus.kept_parallel = build
    t = time.process_time()
    questions(*setting)
    return (time.process_time() - t) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    for s in SETTINGS:                               # warm: the stage runs both sides share are kept
        questions(*s)
    a, b = [], []
    for r in range(args.rounds):
        for i, s in enumerate(SETTINGS):
            if (r + i) % 2:
                b.append(timed(kept_parallel, s))
                a.append(timed(Parallel, s))
            else:
                a.append(timed(Parallel, s))
                b.append(timed(kept_parallel, s))
    fewest_gpus.kept_parallel = kept_parallel
    ratio = statistics.median(y / x for x, y in zip(a, b))
    print(f"{len(a)} figures' questions: built anew {statistics.median(a):.1f} ms -> kept "
          f"{statistics.median(b):.1f} ms (median paired ratio {ratio:.3f})")


if __name__ == "__main__":
    main()
