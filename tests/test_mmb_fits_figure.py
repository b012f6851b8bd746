"""Chapter 4b's micro-batch figure keeps its text inside the PNG with the widget's longest choices (issue 38:
clipped labels). The longest dense model, GPU and recipe names ran the title ~30 px past the 730 px figure;
where nothing fits, every curve is "equal" to every other and the merged legend labels ran past it too."""
from llmsizing.charts.one_gpu_activations import render_max_micro_batch
from llmsizing.widgets import max_micro_batch_widget

LONG = dict(gpu="A100 PCIe 80GB", precision="bf16-mixed-fp32-grads", zero3_gpus=64)


def _right_edges(view):
    fig = view.figure
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    ax = fig.axes[0]
    title = ax._left_title
    legend = ax.get_legend()
    return fig.bbox.width, title.get_window_extent(renderer).x1, (
        None if legend is None else legend.get_window_extent(renderer).x1)


def test_the_longest_title_fits():
    width, title_x1, legend_x1 = _right_edges(render_max_micro_batch("bloomberggpt-50b", **LONG))
    assert title_x1 <= width and legend_x1 is not None and legend_x1 <= width


def test_nothing_fits_shows_no_legend_and_a_title_inside():
    view = render_max_micro_batch("llama-3.1-405b", **LONG)
    width, title_x1, legend_x1 = _right_edges(view)
    assert "nothing fits" in " ".join(t.get_text() for t in view.figure.axes[0].texts)
    assert title_x1 <= width and legend_x1 is None


def test_the_default_title_keeps_its_size():
    assert render_max_micro_batch().figure.axes[0]._left_title.get_fontsize() == 9


def test_the_widget_drops_the_legend_where_nothing_fits_and_brings_it_back():
    w = max_micro_batch_widget()
    w.controls["model"].value = "llama-3.1-405b"
    for k, v in LONG.items():
        w.controls[k].value = v
    assert w.figure.axes[0].get_legend() is None
    w.controls["model"].value = "llama-3-8b"
    assert w.figure.axes[0].get_legend() is not None
