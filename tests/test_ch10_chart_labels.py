"""Chapter 10's figures say what the prose says, inside their axes (read38b)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

from llmsizing.charts import render_mfu_calibration, render_training_time  # noqa: E402


def test_the_training_time_title_says_1t_tokens_as_the_prose_does():
    # the prose says "a trillion tokens"; 10**12 tokens is 1T (the title printed "1e+12 tokens")
    view = render_training_time("llama-3-70b", tokens=1e12, gpu="H100 SXM", seq=8192, n_gpus=1024)
    titles = [ax.get_title(loc="left") for ax in view.figure.axes]
    assert any(t.startswith("llama-3-70b, 1T tokens of 8,192") for t in titles), titles
    assert not any("e+1" in t for t in titles)


def test_each_range_label_of_the_calibration_figure_stays_above_the_x_axis():
    # each group's range is written beside its strip; the last group's (cdna3 BF16) crossed the x axis by
    # about a tenth of a row when it hung below the group's last run: its text must end above the axes' bottom
    view = render_mfu_calibration()
    ax_r = view.figure.axes[1]
    renderer = FigureCanvasAgg(view.figure).get_renderer()
    bottom = ax_r.get_window_extent(renderer).y0          # display coordinates grow upwards
    texts = [t for t in ax_r.texts if "range" in t.get_text()]
    assert len(texts) == len(ax_r.get_yticks()) and all(t.get_window_extent(renderer).y0 >= bottom
                                                        for t in texts), [
        (t.get_text(), t.get_window_extent(renderer).y0, bottom) for t in texts]
