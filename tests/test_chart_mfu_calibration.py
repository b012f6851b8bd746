"""Chapter 10's calibration figure (charts.time_money.render_mfu_calibration): one strip per GPU generation
and dtype, readable at the book's width (read38b: 1,810 px tall with about 150 run names at 6 pt)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from PIL import Image  # noqa: E402

from llmsizing.charts import render_mfu_calibration  # noqa: E402
from llmsizing.time_cost import mfu_residuals  # noqa: E402


def _texts(fig):
    """Every text artist a reader sees: tick labels, axis labels, legends, annotations."""
    return [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]


def test_every_text_is_at_least_8_points_and_the_png_fits_a_page():
    # main drew 147 run names at 6.2 pt into a PNG 1,810 px tall; the book's column is about 800 px wide, so
    # a figure that shows one screen's worth is at most ~900 px tall; 8 pt is the smallest size read38b allows
    view = render_mfu_calibration()
    small = [(t.get_text()[:30], t.get_fontsize()) for t in _texts(view.figure) if t.get_fontsize() < 8]
    assert not small, small
    width, height = Image.open(io.BytesIO(view.png())).size
    assert height <= 900, (width, height)


def test_one_strip_per_group_and_every_dot_is_drawn():
    view = render_mfu_calibration()
    top, ax_r = view.figure.axes[:2]
    res = mfu_residuals()
    groups = set(zip(res["generation"], res["dtype"]))
    labels = [t.get_text() for t in ax_r.get_yticklabels()]
    assert len(labels) == len(groups)
    # each strip's label counts its runs: the counts add up to every published run
    assert sum(int(lab.split("\n")[1].split(" run")[0]) for lab in labels) == len(res)
    dots = [ln for ln in ax_r.get_lines()
            if ln.get_marker() not in ("None", "", None) and ln.get_linestyle() == "None"]
    assert len(dots) == len(res)
    # the top panel holds the highest implied MFU (an A100 run near 72%), not clipped at 65%
    assert top.get_ylim()[1] >= 100 * res["implied_mfu"].max()


def test_the_runs_outside_their_range_are_named_in_the_summary():
    res = mfu_residuals()
    summary = render_mfu_calibration().summary
    assert all(f"  {run}: implied" in summary for run in res.loc[~res["inside"], "run"])
    assert not any(f"  {run}: implied" in summary for run in res.loc[res["inside"], "run"])


def test_a_stand_in_group_is_said_to_have_no_calibrated_range():
    ax_r = render_mfu_calibration().figure.axes[1]
    said = dict(zip([t.get_text().split("\n")[0] for t in ax_r.get_yticklabels()],
                    [t.get_text() for t in ax_r.texts]))
    assert said["Blackwell FP8"].startswith("stand-in, no calibrated range"), said
    assert said["Hopper BF16"].startswith("range x0."), said


def test_a_group_of_one_run_is_summarised_in_the_singular():
    # data27: pytorch/ao's BF16 row is the only Blackwell BF16 run; its group line names its one residual
    # (implied over predicted MFU of that run, read from mfu_residuals), and the panel marks it a stand-in
    res = mfu_residuals()
    one = res[(res["generation"] == "blackwell") & (res["dtype"] == "bf16")]
    assert len(one) == 1
    view = render_mfu_calibration()
    ratio = one["implied_mfu"].iloc[0] / one["predicted_mfu"].iloc[0]
    assert f"\nBlackwell bf16: 1 run, residual x{ratio:.2f}, range x" in view.summary
    assert ": 1 runs" not in view.summary
    labels = [t.get_text() for t in view.figure.axes[1].get_yticklabels()]
    assert "Blackwell BF16\n1 run, 1 outside" in labels, labels


def test_the_range_column_stays_inside_the_figure():
    view = render_mfu_calibration()
    renderer = FigureCanvasAgg(view.figure).get_renderer()
    fig_box = view.figure.bbox
    for t in view.figure.axes[1].texts:
        box = t.get_window_extent(renderer)
        assert box.x1 <= fig_box.x1 and box.y0 >= 0, (t.get_text(), box, fig_box)


def test_the_legend_draws_a_held_out_only_group_open_and_tells_the_grey_groups_apart():
    """data/published_runs.csv has no calibration run on a Blackwell or CDNA3 part (checked by hand: every
    B200 and MI300X row is torchao's, held out), so their legend entries are open markers, as their dots are;
    the calibrated groups (Ampere BF16, Hopper BF16 and FP8) keep filled ones. The groups drawn in the same
    grey each get a marker of their own, so the legend tells them apart (read27f)."""
    view = render_mfu_calibration()
    handles, names = view.figure.axes[0].get_legend_handles_labels()
    face = {n: h.get_markerfacecolor() for h, n in zip(handles, names)}
    marker = {n: h.get_marker() for h, n in zip(handles, names)}
    held_out_only = {n for n in names if n.split()[0] in ("Blackwell", "CDNA")}
    assert {"Ampere BF16", "Hopper BF16", "Hopper FP8"} <= set(names) and len(held_out_only) >= 3
    assert all(face[n] == "white" for n in held_out_only)
    assert all(face[n] != "white" for n in ("Ampere BF16", "Hopper BF16", "Hopper FP8"))
    grey = [n for n, h in zip(names, handles) if h.get_markeredgecolor() == "0.4"]
    assert len(grey) >= 2 and len({marker[n] for n in grey}) == len(grey)
