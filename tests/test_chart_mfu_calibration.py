"""Chapter 10's calibration figure (charts.time_money.render_mfu_calibration, read0810): one run per row."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from llmsizing.charts import render_mfu_calibration  # noqa: E402
from llmsizing.time_cost import mfu_residuals  # noqa: E402


def test_every_run_name_has_room_and_every_dot_is_drawn():
    view = render_mfu_calibration()
    top, ax_r = view.figure.axes[:2]
    labels = ax_r.get_yticklabels()
    assert sum(1 for t in labels if t.get_text()) == len(mfu_residuals())
    row_in = ax_r.get_position().height * view.figure.get_figheight() / len(labels)
    # a 6.2-point run name is 6.2 / 72 = 0.086 inches tall: its row must be at least that
    assert row_in >= 6.2 / 72, row_in
    # the top panel holds the highest implied MFU (an A100 run near 72%), not clipped at 65%
    assert top.get_ylim()[1] >= 100 * mfu_residuals()["implied_mfu"].max()


def test_a_stand_in_group_is_said_to_have_no_calibrated_range():
    texts = [t.get_text() for t in render_mfu_calibration().figure.axes[1].texts]
    assert any("blackwell FP8: stand-in, no calibrated range" in t for t in texts), texts
    assert any(t.startswith(" hopper BF16: x0.") for t in texts), texts


def test_a_group_of_one_run_is_summarised_in_the_singular():
    # data27: pytorch/ao's BF16 row is the only Blackwell BF16 run; its group line names its one residual
    # (implied over predicted MFU of that run, read from mfu_residuals), and the panel marks it a stand-in
    res = mfu_residuals()
    one = res[(res["generation"] == "blackwell") & (res["dtype"] == "bf16")]
    assert len(one) == 1
    view = render_mfu_calibration()
    ratio = one["implied_mfu"].iloc[0] / one["predicted_mfu"].iloc[0]
    assert f"\nblackwell bf16: 1 run, residual x{ratio:.2f}, range x" in view.summary
    assert ": 1 runs" not in view.summary
    texts = [t.get_text() for t in view.figure.axes[1].texts]
    assert any("blackwell BF16: stand-in, no calibrated range" in t for t in texts), texts


def test_the_legend_draws_a_held_out_only_group_open_and_tells_the_grey_groups_apart():
    """data/published_runs.csv has no calibration run on a Blackwell or CDNA3 part (checked by hand: every B200
    and MI300X row is torchao's, held out), so their legend entries are open markers, as their dots are; the
    calibrated groups (Ampere BF16, Hopper BF16 and FP8) keep filled ones. The groups drawn in the same grey
    each get a marker of their own, so the legend tells them apart (read27f)."""
    view = render_mfu_calibration()
    handles, names = view.figure.axes[0].get_legend_handles_labels()
    face = {n: h.get_markerfacecolor() for h, n in zip(handles, names)}
    marker = {n: h.get_marker() for h, n in zip(handles, names)}
    held_out_only = {n for n in names if n.split()[0] in ("blackwell", "cdna3")}
    assert {"ampere BF16", "hopper BF16", "hopper FP8"} <= set(names) and len(held_out_only) >= 3
    assert all(face[n] == "white" for n in held_out_only)
    assert all(face[n] != "white" for n in ("ampere BF16", "hopper BF16", "hopper FP8"))
    grey = [n for n, h in zip(names, handles) if h.get_markeredgecolor() == "0.4"]
    assert len(grey) >= 2 and len({marker[n] for n in grey}) == len(grey)
