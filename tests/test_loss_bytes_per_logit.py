"""The loss's bytes per logit in chapter 5's measured steps (step_measurements.loss_bytes_per_logit, issue 38
book38: chapter 4b worked it out in a cell). By hand from the first row of data/step_measurements.csv (HF,
fp32, 1 x 128 tokens, vocabulary 32,000: 4,096,000 logits)."""

from __future__ import annotations

import pytest

from llmsizing.measurements import load_steps, loss_bytes_per_logit
from llmsizing.memory import LOSS_BACKWARD_BYTES_PER_LOGIT


def test_first_row_by_hand():
    """Forward: (276,040,492 - 259,656,492) / 4,096,000 = 16,384,000 / 4,096,000 = 4.0 bytes per logit (the
    fp32 upcast); backward: (292,423,460 - 259,656,492) / 4,096,000 = 32,766,968 / 4,096,000 = 7.99975."""
    df = load_steps().head(1)
    row = df.iloc[0]
    assert (row["batch"], row["seq"], row["vocab"]) == (1, 128, 32000)
    assert (row["forward_end_bytes"], row["loss_forward_max_bytes"], row["loss_backward_max_bytes"]) == (
        259_656_492, 276_040_492, 292_423_460)
    assert loss_bytes_per_logit(df, "forward").iloc[0] == 4.0
    assert loss_bytes_per_logit(df).iloc[0] == pytest.approx(32_766_968 / 4_096_000)


def test_every_measured_backward_is_the_library_s_8_bytes():
    b = loss_bytes_per_logit()
    assert LOSS_BACKWARD_BYTES_PER_LOGIT["hf"] == 8
    assert b.between(7.99, 8.0).all() and (loss_bytes_per_logit(moment="forward") < b).all()


def test_a_bad_moment_is_named():
    with pytest.raises(ValueError, match="moment"):
        loss_bytes_per_logit(moment="optimizer")
