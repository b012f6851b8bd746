"""Paired A/B, in ONE process, of ``plan()`` as chapter 17's long-context widget calls it (issue 38; pick30),
the twin of benchmarks/bench_ch12_plan_ab.py: the library at another commit (``BASE``, main by default; its
``src`` and ``data`` as a ``git archive``, imported as ``llmsizing_base``) against this checkout, side by side
round by round, order alternating. Each round and side starts with every kept result cleared
(benchmarks/bench_planner.kept(), by module and name on each side) and the widget's default search made
(llama-3.1-405b at 128K on H100 SXM, 16M tokens a batch, <= 16,384 GPUs, ring), then times:

* model picks: 12 dense catalogue models in turn at those defaults, each a first visit with what earlier
  picks kept still kept, as in the widget (the mixtures of experts are searched when the widget is built);
* moves of the default model: the other context lengths (16M tokens a batch), 8M and 4M tokens a batch, the
  all-gather K/V exchange, each a new search (``_search.clear_tables()``: the searched tables only, the
  model's kept parts stay, as in the widget).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_ch17_plan_ab.py [BASE] [ROUNDS]    # default main 5

Prints per kind the median CPU ms of each side and the median of the paired ratios (this / base), then the
load average before and after. Does not assert (timings are not tests).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ch12_plan_ab import paired  # noqa: E402

TOKENS = 2 ** 24
DEFAULT = dict(tokens=8e11, gpus=("H100 SXM",), seq=131072, global_batch=TOKENS // 131072, max_gpus=16384,
               cp_comm="p2p")
FIRST = "llama-3.1-405b"
MODELS = ("gpt2", "llama-2-7b", "llama-2-70b", "gpt-39b", "qwen-72b", "mpt-bench-13b", "bloom-176b",
          "granite-3.0-8b", "mistral-7b", "gpt-145b", "llama-3-8b", "nemotron-4-15b")
MOVES = (tuple(dict(seq=s, global_batch=TOKENS // s) for s in (8192, 32768, 65536, 262144))
         + (dict(global_batch=2 ** 23 // 131072), dict(global_batch=2 ** 22 // 131072),
            dict(cp_comm="all_gather")))


def main() -> None:
    paired(FIRST, DEFAULT, {"model picks": MODELS}, MOVES, "bench_ch17_plan_ab_")


if __name__ == "__main__":
    main()
