"""The optimizer step's temporary in chapter 5's measured steps
(step_measurements.optimizer_temporary_bytes_per_param; the chapter worked it out in a cell). By hand from
rows of data/step_measurements.csv: HF step-llama, 19,155,200 parameters, its largest tensor the untied
32,000 x 256 embedding (and LM head)."""

from __future__ import annotations

import pytest

from llmsizing.measurements import load_steps, optimizer_temporary_bytes_per_param

N_LLAMA = 19_155_200


def _row(df, **kw):
    sel = df
    for k, v in kw.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, kw
    return sel


def test_foreach_is_one_state_sized_temporary_by_hand():
    """fp32, 1 x 128: (383,106,336 - 306,485,536) / 19,155,200 = 76,620,800 / 19,155,200 = 4.0 bytes;
    bf16: (191,554,272 - 153,243,872) / 19,155,200 = 38,310,400 / 19,155,200 = 2.0 bytes."""
    df = load_steps()
    base = dict(stack="hf", model="step-llama", attention="eager", recompute="none", batch=1, seq=128)
    fp32 = _row(df, mode="fp32", **base)
    bf16 = _row(df, mode="bf16", **base)
    assert fp32["optimizer_max_bytes"].iloc[0] == 383_106_336
    assert fp32["optimizer_end_bytes"].iloc[0] == 306_485_536
    assert optimizer_temporary_bytes_per_param(fp32).iloc[0] == 76_620_800 / N_LLAMA == 4.0
    assert optimizer_temporary_bytes_per_param(bf16).iloc[0] == 38_310_400 / N_LLAMA == 2.0


def test_forloop_is_two_copies_of_the_largest_tensor_and_fused_none():
    """fp32 for-loop, 2 x 256 SDPA: 372,028,704 - 306,491,680 = 65,537,024 bytes, two fp32 copies of the
    32,000 x 256 embedding (2 x 32,768,000 = 65,536,000) and 1,024 bytes more; fused: 0."""
    df = load_steps()
    base = dict(stack="hf", model="step-llama", mode="fp32", attention="sdpa", recompute="none", batch=2,
                seq=256)
    loop = optimizer_temporary_bytes_per_param(_row(df, optimizer_impl="forloop", **base)).iloc[0]
    assert loop * N_LLAMA == pytest.approx(65_537_024)
    assert loop == pytest.approx(2 * 32_000 * 256 * 4 / N_LLAMA, abs=1_024 / N_LLAMA)
    assert optimizer_temporary_bytes_per_param(_row(df, optimizer_impl="fused", **base)).iloc[0] == 0


def test_default_reads_every_committed_row():
    t = optimizer_temporary_bytes_per_param()
    assert len(t) == len(load_steps()) and (t >= 0).all()
