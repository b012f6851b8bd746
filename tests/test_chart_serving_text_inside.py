"""Chapter 15's figures keep their text inside the PNG (issue 38, read37a).

The cost-by-GPU figure's axis label ran 137 px past the right edge of its 691-px PNG ("... an estimated
pric") and its title 9 px; the serving curve's roofline panel put its last tick label (16384) 1 px past the
edge. Each figure is drawn as the chapter draws it (its default view and the cost figure for the chapter's
load) and for two other models, and every drawn text must lie inside the figure at a readable size
(``tests/test_chart_text_inside.py``'s check, the one the planner figure passes)."""

from __future__ import annotations

import pytest

from llmsizing import charts
from tests.test_chart_text_inside import _texts_outside

LOAD = dict(prompt=1024, output=256, itl_s=0.05, ttft_s=1.0)   # chapter 15's running load


@pytest.mark.parametrize("model", ["llama-3-70b", "llama-3-8b", "mixtral-8x7b"])
def test_serving_cost_figure_text_is_inside_the_png(model):
    outside, small = _texts_outside(charts.render_serving_cost(model, **LOAD).figure)
    assert not outside, "text cut at the figure's edge: " + "; ".join(outside)
    assert not small, "text too small to read: " + "; ".join(small)


def test_serving_cost_label_still_says_what_a_hatched_bar_is():
    ax = charts.render_serving_cost("llama-3-70b", **LOAD).figure.axes[0]
    assert "hatched: an estimated price" in ax.get_xlabel() and "80% range" in ax.get_xlabel()
    assert "ITL <= 50 ms" in ax.get_title(loc="left")


@pytest.mark.parametrize("kw", [dict(), dict(model="llama-3-70b", gpu="H100 SXM", tp=4, batch=64)],
                         ids=["default", "70b-tp4"])
def test_serving_curve_text_is_inside_the_png(kw):
    outside, small = _texts_outside(charts.render_serving_curve(**kw).figure)
    assert not outside, "text cut at the figure's edge: " + "; ".join(outside)
    assert not small, "text too small to read: " + "; ".join(small)


@pytest.mark.parametrize("model", ["llama-3-70b", "llama-3-8b"])
def test_serving_cost_figure_reads_every_cost_on_a_log_axis(model):
    """Issue 38 (book38): Llama-3-70B's costs run from $0.40 (MI325X) to $54.9 (L40S) per million output
    tokens, 137 times; on main's linear axis (0 to 1.6 x $69, the L40S's whisker, over ~430 px) the MI325X's
    bar was 0.401 / 110 x 430 = 1.6 px long and the eight cheapest GPUs' bars were all under 7 px. On a log
    axis every bar is at least 20 px long, and a dearer cost ends further right (the order survives)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    view = charts.render_serving_cost(model, **LOAD)
    fig = view.figure
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    x0 = ax.transAxes.transform((0, 0))[0]
    ends = sorted((b.get_x() + b.get_width(), ax.transData.transform((b.get_x() + b.get_width(), 0))[0] - x0)
                  for b in ax.patches if b.get_width() == b.get_width())          # NaN: no layout, no bar
    assert len(ends) >= 15
    assert min(px for _, px in ends) >= 20, ends[:3]
    assert all(a[1] < b[1] for a, b in zip(ends, ends[1:]) if a[0] < b[0])
