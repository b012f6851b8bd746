"""Chapter 4b's and chapter 5's timeline of one measured step (issue 38, read04b): the figure used to call the
forward's level "the phase's peak", drawn over the loss's own forward, whose measured maximum is far above it,
while the step's peak comes later. Now the loss's forward is a stretch of its own, the forward's library value
is marked where the forward ends, and only the step's peak is called a peak, with its value derived here by
hand from the measurement."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from llmsizing.charts import render_step_timeline
from llmsizing.measurements import STEP_TIMELINE_CSV

MiB = 2**20

#: data/step_measurements.csv, the row the timeline draws (LlamaForCausalLM, hf, autocast-bf16, sdpa, no
#: recomputation, foreach, 2 x 512 tokens, vocabulary 32,000): the live bytes when the loss backward begins,
#: that is, what the forward and the loss's own forward left.
FORWARD_END_BYTES = 440_851_748
BATCH, SEQ, VOCAB = 2, 512, 32_000


@pytest.fixture(scope="module")
def view():
    return render_step_timeline()


def _texts(fig) -> list[str]:
    ax = fig.axes[0]
    legend = ax.get_legend()
    return [t.get_text() for t in ax.texts] + [t.get_text() for t in legend.get_texts()]


def test_the_labelled_peak_is_the_loss_backward_worked_out_by_hand(view):
    # nll_loss's backward writes an fp32 gradient of the log-probabilities and log_softmax's backward an fp32
    # gradient of the logits while the first is alive: 2 x 4 bytes for each of b x s x V logits, on top of
    # what the forward left
    by_hand = (FORWARD_END_BYTES + 2 * 4 * BATCH * SEQ * VOCAB) / MiB          # 670.43 MiB
    ax = view.figure.axes[0]
    peaks = [t for t in ax.texts if "peak" in t.get_text()]
    assert len(peaks) == 1, [t.get_text() for t in ax.texts]
    text = peaks[0].get_text()
    assert "in the loss backward" in text
    measured, library = (float(v.replace(",", "")) for v in re.findall(r"([\d,]+\.\d) MiB", text))
    assert measured == pytest.approx(by_hand, abs=0.05)
    assert library == pytest.approx(by_hand, rel=1e-3)
    # the label points at the highest live bytes of the step, an op of the loss backward
    tl = pd.read_csv(STEP_TIMELINE_CSV)
    x, y = peaks[0].xy
    assert y == pytest.approx(tl["live_bytes"].max() / MiB)
    assert tl.loc[tl["op_index"] == x, "phase"].item() == "loss_backward"


def test_nothing_else_is_called_a_peak(view):
    others = [t for t in _texts(view.figure) if "peak" in t and not t.startswith("peak of the step")]
    assert not others, others


def test_the_loss_forward_is_drawn_as_its_own_stretch_without_a_library_value(view):
    ax = view.figure.axes[0]
    names = [t.get_text() for t in ax.texts]
    assert names.count("loss forward") == 1 and names.count("forward") == 1
    tl = pd.read_csv(STEP_TIMELINE_CSV)
    loss_fwd = tl[tl["phase"] == "loss_forward"]["op_index"]
    # no library level lies over the loss forward's ops
    for coll in ax.collections:
        for seg in getattr(coll, "get_segments", lambda: [])():
            xs = [p[0] for p in seg]
            if len(xs) == 2 and xs[0] != xs[1]:
                assert max(xs) < loss_fwd.min() or min(xs) > loss_fwd.max(), xs
    # the summary prints its measured maximum and no library value
    row = next(ln for ln in view.summary.splitlines() if ln.strip().startswith("loss forward"))
    assert f"{tl.loc[loss_fwd.index, 'live_bytes'].max() / MiB:.1f}" in row and " - " in row


def test_the_forwards_library_value_is_marked_where_the_forward_ends(view):
    ax = view.figure.axes[0]
    marks = [ln for ln in ax.lines if ln.get_label() == "library: what the forward leaves"]
    assert len(marks) == 1
    (x,), (y,) = marks[0].get_xdata(), marks[0].get_ydata()
    tl = pd.read_csv(STEP_TIMELINE_CSV)
    assert x == tl[tl["phase"] == "loss_backward"]["op_index"].min()
    # the measured live bytes there, by hand from the step's row; the library within 0.1%
    assert tl.loc[tl["op_index"] == x, "live_bytes"].item() == FORWARD_END_BYTES
    assert y == pytest.approx(FORWARD_END_BYTES / MiB, rel=1e-3)
