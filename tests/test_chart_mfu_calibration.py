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
