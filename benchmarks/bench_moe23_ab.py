"""Paired A/B (ab_rounds) of merge 1ffe32c's render change: chapter 17's widget moving to each mixture of
experts, ``charts.time_money_plan._bare`` (the plans' columns read from a frame without plan()'s ``attrs``,
which pandas deep-copies into every column it gives) against reading them from the table itself (base). The
widget is built warm (``long_context_widget(warm=True)``), so each move is its render and PNG, the part this
change touches.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_moe23_ab.py [--rounds N]

Prints per model the median CPU ms per move of each side and the median paired ratio. Does not assert.

Measured 2026-12-01 (branch moe23, 18:09:07-18:10:10 UTC, load 5.9-6.7 on 2 cores shared with other
sessions), --rounds 10, median CPU ms per move, base -> new (median paired ratio): mixtral-8x7b 35 -> 33
(0.957), qwen3-30b-a3b 35 -> 35 (0.919), qwen3-235b-a22b 30 -> 26 (0.919), deepseek-v2 32 -> 28 (0.922),
deepseek-v3 29 -> 24 (0.878), gpt-oss-120b 30 -> 27 (0.933), llama-4-scout 28 -> 27 (0.927),
granite-3.0-1b-a400m 39 -> 40 (0.976), granite-3.0-3b-a800m 33 -> 30 (0.899), olmoe-1b-7b 31 -> 29 (0.931);
all 32 -> 29 ms."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_rounds  # noqa: E402

from llmsizing.charts import plan_groups, time_money_plan  # noqa: E402


def use(bare) -> None:
    time_money_plan._bare = plan_groups._bare = bare     # (render_plan's and _plan_groups', session 25)


if __name__ == "__main__":
    ab_rounds.run(__doc__.split("\n\n")[0], use, time_money_plan._bare, lambda table: table)
