"""Paired CPU time of chapter 17's widget moving to each mixture of experts, with moe20's drawing changes on
(``new``: the planner figure's cloud of plans stamps each pixel's marker once, ``charts._PointCloud``;
``charts._plan_groups`` keyed on the columns it reads, ``charts._groups_key``; the widget canvas's renderer
keeps a new string's bitmap from the layout it measured, ``widgets.canvas``; ``plan_candidates._candidates``
numbers its pairs with a dict) and off in the same process (``base``: matplotlib's own ``Line2D.draw`` and
``RendererAgg.get_text_width_height_descent``, the groups keyed on the whole table, ``charts._table_key``,
and ``np.unique``'s numbering, ``_FEW_ROWS = -1``), rounds alternating base-new and new-base
(benchmarks/ab_rounds.py). Each round: kept results cleared (bench_planner.kept, and the kept plan groups),
a new widget (a new canvas: no kept texts) on a dense model, then each MoE model in turn at the widget's
defaults (as bench_ch17_models).

    PYTHONPATH=src:tests .venv/bin/python benchmarks/bench_moe20_ab.py [--rounds N]

Prints per model the median CPU ms per move of each side and the median of the paired ratios new / base.

Measured 2026-12-01 16:32-16:35 UTC (branch moe20; 2 cores shared with other sessions, load 8-10),
--rounds 20, median CPU ms per model move, base -> new (median paired ratio): Mixtral 103 -> 98 (0.933),
Qwen3-30B-A3B 167 -> 156 (0.954), Qwen3-235B 78 -> 76 (0.997), DeepSeek-V2 149 -> 141 (0.953), DeepSeek-V3
71 -> 70 (0.993), gpt-oss-120b 133 -> 126 (0.948), Scout 112 -> 108 (0.965), granite 1B 148 -> 138 (0.933),
granite 3B 103 -> 97 (0.957), OLMoE 114 -> 109 (0.936); all 300 moves 115 -> 112. Issue 35's bar (100 ms a
move) is still not met for Qwen3-30B-A3B, DeepSeek-V2, gpt-oss-120b and granite-3.0-1b-a400m at this load.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_rounds  # noqa: E402


class _GroupsKept:
    """The kept plan groups, cleared as the other kept results are (``cache_clear``)."""

    @staticmethod
    def cache_clear() -> None:
        from llmsizing.charts import time_money_plan

        time_money_plan._PLAN_GROUPS_KEPT.clear()


def main() -> None:
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from llmsizing import plan_candidates
    from llmsizing.charts import plan_groups
    from llmsizing.charts import time_money_plan as tmp
    from llmsizing.widgets import canvas

    fig = Figure()
    canvas._text_cache_canvas()(fig)
    renderer = type(fig.canvas.get_renderer())
    new = dict(draw=tmp._PointCloud.draw, key=tmp._groups_key,
               measure=renderer.get_text_width_height_descent, few=plan_candidates._FEW_ROWS)
    base = dict(draw=Line2D.draw, key=tmp._table_key, measure=RendererAgg.get_text_width_height_descent,
                few=-1)

    def use(side: dict) -> None:
        tmp._PointCloud.draw = side["draw"]
        plan_groups._groups_key = side["key"]          # (where _plan_groups reads it, session 25)
        renderer.get_text_width_height_descent = side["measure"]
        plan_candidates._FEW_ROWS = side["few"]

    ab_rounds.run(__doc__.split("\n\n")[0], use, new, base, extra_caches=(_GroupsKept,))


if __name__ == "__main__":
    main()
