"""Issue 38 (nits39): the planner figure (chapters 12 and 17) as a reader sees it, checked without pixels.

- Each GPU type's own front ("best on B200 alone") is drawn under the time-vs-cost front; where it *is* the
  front (chapter 12: every front plan runs on B200s) it was hidden under the front's line. It is now a band
  wider than the front's line by at least 1 px on each side: (band - line) / 2 points x 96 / 72 px >= 1 px,
  so band >= line + 1.5 pt.
- The memory panel's "chosen:" title has one form for every plan (chapter 12 drew "4,096 GPUs, tp=8 ..." for
  its fastest plan and "512 x B200, tp=1 ..." for its cheapest).
- The plans' legend (9 pt since nits39, larger than before) covers none of the points a reader reads: the
  front's dots, each GPU type's own front, the chosen plan.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from llmsizing import charts
from llmsizing.charts import PLAN_GPUS
from llmsizing.planner import plan

CH12 = dict(tokens=1e12, gpus=PLAN_GPUS, seq=8192, global_batch=512, max_gpus=4096)
CH17 = dict(tokens=8e11, gpus=("H100 SXM",), seq=131072, global_batch=128, max_gpus=16384)
CASES = [("llama-3-70b", CH12, "cheapest"), ("llama-3-70b", CH12, "fastest"),
         ("llama-3.1-405b", CH17, "fastest")]


def _figure(model, run, which):
    plans = plan(model, **run)
    front = plans[plans["pareto"]]
    pick = front.index[0] if which == "cheapest" else front["days"].idxmin()
    fig = charts.render_plan(model, **run, plans=plans, highlight=pick).figure
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig


@pytest.mark.parametrize("model,run,which", CASES, ids=["ch12-cheapest", "ch12-fastest", "ch17-fastest"])
def test_own_front_shows_round_the_front(model, run, which):
    ax = _figure(model, run, which).axes[0]
    front = [ln for ln in ax.lines if ln.get_label().startswith("_") and ln.get_linestyle() == "-"
             and ln.get_color() == "0.2"]
    own = [ln for ln in ax.lines if ln.get_label().startswith("best on ")]
    assert len(front) == 1 and own
    for line in own:
        assert line.get_zorder() < front[0].get_zorder()                  # under the front's line
        assert line.get_linewidth() >= front[0].get_linewidth() + 1.5, line.get_label()


def test_chosen_titles_have_one_form():
    titles = [_figure(model, run, which).axes[1].get_title(loc="left") for model, run, which in CASES]
    form = re.compile(r"^chosen: [\d,]+ GPUs, tp=\d+( cp=\d+)? pp=\d+( vp=\d+)? dp=\d+ ZeRO-\d$")
    assert all(form.match(t) for t in titles), titles
    # chapter 12's two plans: 4,096 GPUs with vp=20 and 512 GPUs with plain pipeline stages
    assert " vp=" in titles[1] and " vp=" not in titles[0]


@pytest.mark.parametrize("model,run,which", CASES, ids=["ch12-cheapest", "ch12-fastest", "ch17-fastest"])
def test_legend_covers_no_front_point(model, run, which):
    fig = _figure(model, run, which)
    ax = fig.axes[0]
    box = ax.get_legend().get_window_extent()
    read = [ln for ln in ax.lines if not ln.get_label().endswith("plans that fit")]   # all but the cloud
    xy = np.vstack([ax.transData.transform(np.column_stack(ln.get_data())) for ln in read])
    inside = (xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)
    assert not inside.any(), xy[inside]
