"""Where the CPU of chapter 17's "add a GPU type" move goes (issues 35 and 38): ``plan()`` at the widget's
defaults (128K context, 16M tokens a batch, <= 16,384 GPUs, the ring) on H100 SXM, then on H100 SXM and one
more type, split into

* ``add``: the move as a reader makes it: every kept result cleared, the H100 search made, then the two;
* ``alone``: the same, but the new type searched alone (its fit and pricing: the move's own work);
* ``merge``: the two again with every fit and priced block kept, the searched tables cleared (what the move
  spends beyond the new type's own search: merging the fits, finding the priced blocks, the frame, the
  listing, and the answer frame);
* ``cached``: the two asked again, the search kept (the answer frame only: every move pays it);
* ``after``: the new type alone after the two (its fit and block kept: what a "search alone" costs when
  nothing of it is new).

Least CPU (``time.process_time``) of ``--repeats`` runs, in ms, then the load average.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_gpu_union.py [--models M,M] [--new A10,B200]
        [--repeats 5]

2026-12-05 07:32-07:34 UTC, main 03fcbc19, 1-minute load 3.6-3.9 (other helpers; least of 5):

    model            new          alone     add   merge  cached   after
    qwen3-30b-a3b    A10           28.6    39.5    14.4    10.0     5.1
    qwen3-30b-a3b    A100 80GB     43.0    57.7    19.0    14.2     8.6
    qwen3-30b-a3b    B200          52.4    70.4    22.2    13.9    10.6
    mistral-7b       A10           28.5    33.6     9.5     3.6     4.8
    mistral-7b       A100 80GB     30.5    36.0    11.2     4.3     6.1
    mistral-7b       B200          30.1    35.2    11.0     4.4     6.4
    llama-3-8b       A10           21.7    25.7     7.3     2.9     3.8
    llama-3-8b       A100 80GB     26.1    30.7     9.4     3.6     5.6
    llama-3-8b       B200          27.3    31.6     9.9     4.0     6.0
    gpt2             A10           14.3    17.5     5.9     2.6     3.6
    gpt2             A100 80GB     14.7    17.2     6.9     2.8     4.3
    gpt2             B200          14.9    18.6     7.4     3.1     4.7

(At load ~1, 07:14-07:18: qwen3-30b-a3b + A10 alone 29.6, add 43.9, merge 16.8; mistral-7b 23.5, 28.3, 8.6.)
So the move is the new type's own search (``alone``: its fit and pricing, 72-86% of ``add``) plus the merge
of the known type's kept fit and block and the frame (``merge - cached``: 3-8 ms) and the answer frame over
the union (``cached``); the "4.5 ms" of a search of the new type alone is ``after``'s, its fit and block
kept by the move. Each type's fit and priced block are kept already (``plan_fits``, ``kept_price``); what is
left to merge is the per-row work of the frame, the listing and the answer frame on the union's rows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_planner import kept  # noqa: E402

from llmsizing import planner  # noqa: E402

DEFAULT = dict(tokens=8e11, seq=131072, global_batch=2**24 // 131072, max_gpus=16384, cp_comm="p2p")
PICK = "H100 SXM"


def _cpu_ms(f) -> float:
    c = time.process_time()
    f()
    return (time.process_time() - c) * 1e3


def measure(model: str, new: str, repeats: int) -> dict:
    """The least CPU (ms) of each part (the module docstring) over ``repeats`` runs."""
    def ask(*gpus):
        return lambda: planner.plan(model, gpus=gpus, **DEFAULT)

    def fresh():
        for f in kept():
            f.cache_clear()
        ask(PICK)()

    got: dict = {k: [] for k in ("alone", "add", "merge", "cached", "after")}
    for _ in range(repeats):
        fresh()
        got["alone"].append(_cpu_ms(ask(new)))
        fresh()
        got["add"].append(_cpu_ms(ask(PICK, new)))
        got["cached"].append(_cpu_ms(ask(PICK, new)))
        got["after"].append(_cpu_ms(ask(new)))
        planner._search.clear_tables()              # (the tables only: every fit and priced block stays)
        ask(PICK)()
        got["merge"].append(_cpu_ms(ask(PICK, new)))
    return {k: min(v) for k, v in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="qwen3-30b-a3b,mistral-7b,llama-3-8b,gpt2")
    ap.add_argument("--new", default="A10,A100 80GB,B200")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    print(f"{'model':16s} {'new':10s} " + " ".join(f"{k:>7s}" for k in ("alone", "add", "merge", "cached",
                                                                          "after")))
    for model in a.models.split(","):
        for new in a.new.split(","):
            r = measure(model, new, a.repeats)
            print(f"{model:16s} {new:10s} " + " ".join(f"{r[k]:7.1f}" for k in ("alone", "add", "merge",
                                                                               "cached", "after")))
    print("load", open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
