"""Paired A/B (ab_rounds) of moe23's render change: chapter 17's widget moving to each mixture of experts,
``charts.time_money_plan._bare`` (the plans' columns read from a frame without plan()'s ``attrs``, which
pandas deep-copies into every column it gives) against reading them from the table itself (base). The
widget is built warm (``long_context_widget(warm=True)``, moe23), so each move is its render and PNG, the
part this change touches.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_moe23_ab.py [--rounds N]

Prints per model the median CPU ms per move of each side and the median paired ratio. Does not assert."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_rounds  # noqa: E402

from llmsizing.charts import time_money_plan  # noqa: E402


def use(bare) -> None:
    time_money_plan._bare = bare


if __name__ == "__main__":
    ab_rounds.run(__doc__.split("\n\n")[0], use, time_money_plan._bare, lambda table: table)
