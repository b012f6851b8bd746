"""Issue 38 (nits39): chapter 16's calibration figure coloured its series by model only, so two sources'
series of one model (llama-3-8b on an A100 and on an RTX 4090; llama-2-13b on an A100 and on an H100) drew
the same dots in the same colour. Each series of published rows (one source, GPU, model and method) now
differs from every other in colour, the dots' marker or fill, or its line's dash, and the figure's text stays
inside its PNG."""

from __future__ import annotations

from collections import Counter

import matplotlib.colors as mcolors
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from llmsizing.charts import render_finetune_calibration
from llmsizing.finetune_time import finetune_residuals


def _series(fig):
    """(model line, dots) pairs: each series draws its model's line, then its published dots."""
    lines = fig.axes[0].lines
    return list(zip(lines[0::2], lines[1::2]))


def test_every_series_differs():
    fig = render_finetune_calibration().figure
    series = _series(fig)
    assert all(d.get_linestyle() == "None" and ln.get_linestyle() != "None" for ln, d in series)
    rows = finetune_residuals()
    one = rows[(rows["n_gpus"] == 1) & rows["method"].isin(["lora", "qlora"])]
    # one series per (model, method, GPU, source): 20 in data/finetune_published.csv today
    assert len(series) == len(one.groupby(["model", "method", "gpu", "source"]).size())
    style = Counter((mcolors.to_hex(d.get_color()), d.get_marker(), mcolors.to_hex(d.get_markerfacecolor()),
                     ln.get_linestyle()) for ln, d in series)
    assert max(style.values()) == 1, [s for s, n in style.items() if n > 1]


def test_each_source_and_gpu_has_its_own_marker_named_in_a_legend():
    fig = render_finetune_calibration().figure
    ax = fig.axes[0]
    legends = [a for a in ax.get_children() if a.__class__.__name__ == "Legend"]
    assert len(legends) == 2                           # model and method (lines); source and GPU (dots)
    names = {t.get_text() for leg in legends for t in leg.get_texts()}
    assert {"torchtune, RTX 4090", "universal-llm-trainer, H100 SXM",
            "universal-llm-trainer, A100 80GB"} <= names


def test_text_is_inside_the_png():
    fig = render_finetune_calibration().figure
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    out = [t.get_text() for t in texts if (b := t.get_window_extent(r)).x1 > fig.bbox.width + 0.5
           or b.x0 < -0.5 or b.y0 < -0.5 or b.y1 > fig.bbox.height + 0.5]
    assert not out, out
