"""Megatron-LM's column-parallel backward hides part of tensor parallelism (issue 34, train44).

``LinearWithGradAccumulationAndAsyncCommunication.backward`` (megatron/core/tensor_parallel/layers.py; since
NVIDIA/Megatron-LM cf7efd4f, 2021-08-30, and 02bb1f5c, 2022-03-02) launches, in each column-parallel layer's
backward (QKV, MLP up), the re-gather of its sequence-parallel input with ``async_op=True`` before the dgrad
GEMM and the dgrad's reduce-scatter (all-reduce without SP) with ``async_op=True`` before the wgrad GEMM;
Transformer Engine's ``_Linear`` does the same. ``step_time(..., tp_backward_overlap=True)`` prices it
(``exposure.TP_BACKWARD_ASYNC``); a published row opts in by ``tp_comm_overlap = backward``. The expected
values below are worked from the published layout and architecture, not read off the code.
"""

from __future__ import annotations

import pandas as pd
import pytest

from llmsizing.calibration import _layout_of, attention_kernel_of, run_mfu_at, tp_backward_overlap_of
from llmsizing.comm import communication
from llmsizing.exposure import exposed_by_group
from llmsizing.kernels import rates
from llmsizing.layouts import step_time, tp_backward_windows_s
from llmsizing.mfu import published_runs
from llmsizing.parallel import Parallel
from llmsizing.run_nodes import run_node


def _row(name_part):
    df = published_runs()
    return next(df[df["run"].str.contains(name_part, regex=False)].itertuples())


def _tp(st, name):
    return sum(c.time_s for c in st.communication.collectives if c.collective == name)


def test_nemotron_15b_hides_the_regathers_and_the_dgrad_reduce_scatters_by_hand():
    """Parmar et al. 2024, Table 2: Nemotron-4 15B on 768 H100s, TP8 x DP96, batch 384 (micro-batch 1: four
    micro-batches a step), seq 4,096; Table 1: 32 layers, hidden 6,144, 48 heads and 8 KV heads of 128, MLP
    4 x 6,144 = 24,576 (squared ReLU, not gated). A layer's backward runs, per micro-batch, 4 SP all-gathers
    (2 re-gathers of a column-parallel input, 2 gathers of a row-parallel output gradient) and 2 reduce-
    scatters (the column-parallel dgrads): the overlap hides 2 of the 4 gathers and both reduce-scatters."""
    r = _row("Nemotron-4 15B, 768 H100s")
    assert tp_backward_overlap_of(r)
    par, micro, accum, rc = _layout_of(r)
    assert (par.tp, par.sp, micro, accum) == (8, True, 1, 4)
    e = 0.68
    kw = dict(batch=1, seq=4096, grad_accum=4, kernel_efficiency=e, recompute=rc, dtype="bf16",
              node=run_node(r), attention_kernel=attention_kernel_of(r.framework, r.gpu))
    off = step_time(r.model, r.gpu, par, **kw)
    on = step_time(r.model, r.gpu, par, tp_backward_overlap=True, **kw)
    ag_bwd, rs_bwd = _tp(off, "SP all-gather (backward)"), _tp(off, "SP reduce-scatter (backward)")
    ag_fwd, rs_fwd = _tp(off, "SP all-gather (forward)"), _tp(off, "SP reduce-scatter (forward)")
    assert off.exposed_by_group_s["tp"] == pytest.approx(ag_fwd + rs_fwd + ag_bwd + rs_bwd, rel=1e-12)
    # the windows: each column-parallel GEMM's dgrad (and wgrad) has its forward's 2 m n k FLOPs; on one of
    # 8 GPUs QKV is 4,096 x 6,144 -> (48 + 2 x 8) x 128 / 8 = 1,024, the MLP's up 4,096 x 6,144 -> 3,072
    flops = 2 * 4096 * 6144 * (1024 + 3072) * 32 * 4
    assert flops == 26_388_279_066_624
    gemm = rates(r.model, r.gpu, tp=8, cp=1, batch=1, seq=4096, dtype="bf16", kernel_efficiency=e)[0]
    dgrad, wgrad = tp_backward_windows_s(r.model, r.gpu, par, batch=1, seq=4096, grad_accum=4, dtype="bf16",
                                         eff=e, layers=32)
    assert dgrad == wgrad == pytest.approx(flops / gemm, rel=1e-12)
    assert dgrad > ag_bwd / 2 and wgrad > rs_bwd            # wide enough: all of it hides
    hidden = ag_bwd / 2 + rs_bwd
    assert on.exposed_by_group_s["tp"] == pytest.approx(ag_fwd + rs_fwd + ag_bwd / 2, rel=1e-12)
    assert on.step_s == pytest.approx(off.step_s - hidden, rel=1e-12)
    assert on.compute_s == off.compute_s and on.exposed_by_group_s["dp"] == off.exposed_by_group_s["dp"]
    # 2 + 2 + 4 + 2 SP calls of one size a layer (forward gathers, reduce-scatters; backward the same),
    # of which 2 + 2 hide; the published MFU sits that much closer to the prediction
    assert hidden / (ag_fwd + rs_fwd + ag_bwd + rs_bwd) == pytest.approx(4 / 10, rel=1e-9)
    assert on.mfu / off.mfu == pytest.approx(off.step_s / on.step_s, rel=1e-12) and on.mfu > off.mfu
    # the calibration prices the row with its flag
    assert run_mfu_at(r, e) == pytest.approx(on.mfu, rel=1e-12)


def test_a_short_window_leaves_the_rest_exposed_by_hand():
    """What a window cannot cover stays exposed, window by window: the re-gathers behind the dgrad GEMMs
    (``tp_backward_s[0]``), the dgrad reduce-scatters behind the wgrad GEMMs (``[1]``)."""
    par = Parallel(tp=8, dp=1, sp=True)
    comm = communication("llama-3-8b", par, batch=1, seq=4096, gpu="H100 SXM", grad_accum=2)
    times = {c.collective: c.time_s for c in comm.collectives if c.group == "tp"}
    ag, rs = times["SP all-gather (backward)"], times["SP reduce-scatter (backward)"]
    total = sum(times.values())
    kw = dict(grad_accum=2, fwd_share=1 / 3)
    assert exposed_by_group(comm, 1.0, **kw)["tp"] == pytest.approx(total, rel=1e-12)
    # no window: the same as no overlap
    none = exposed_by_group(comm, 1.0, tp_backward_s=(0.0, 0.0), **kw)["tp"]
    assert none == pytest.approx(total, rel=1e-12)
    # a dgrad window of a quarter of the gathers' time covers half the re-gathers; no wgrad window
    got = exposed_by_group(comm, 1.0, tp_backward_s=(ag / 4, 0.0), **kw)["tp"]
    assert got == pytest.approx(total - ag / 4, rel=1e-12)
    # windows longer than both: the re-gathers (half the backward's gathers) and the reduce-scatters hide
    got = exposed_by_group(comm, 1.0, tp_backward_s=(1.0, 1.0), **kw)["tp"]
    assert got == pytest.approx(total - ag / 2 - rs, rel=1e-12)
    # async TP hides all of it behind the step's compute, with or without the windows
    assert exposed_by_group(comm, 1.0, async_tp=True, tp_backward_s=(1.0, 1.0), **kw)["tp"] == \
        exposed_by_group(comm, 1.0, async_tp=True, **kw)["tp"] == 0.0


def test_without_sequence_parallelism_the_backward_all_reduces_hide():
    """Without SP a layer's backward all-reduces are both the column-parallel dgrads' (the row-parallel
    layers' backward needs none): cf7efd4f's ``all_reduce(grad_input, async_op=True)`` before the wgrad GEMM.
    Only the forward's all-reduces stay exposed."""
    par = Parallel(tp=4, dp=1, sp=False)
    kw = dict(batch=2, seq=2048, grad_accum=4, kernel_efficiency=0.7, dtype="bf16")
    off = step_time("llama-3-8b", "H100 SXM", par, **kw)
    on = step_time("llama-3-8b", "H100 SXM", par, tp_backward_overlap=True, **kw)
    fwd, bwd = _tp(off, "TP all-reduce (forward)"), _tp(off, "TP all-reduce (backward)")
    assert fwd > 0 and bwd > 0
    assert on.exposed_by_group_s["tp"] == pytest.approx(fwd, rel=1e-12)
    assert on.step_s == pytest.approx(off.step_s - bwd, rel=1e-12)


def test_no_tensor_parallelism_nothing_changes():
    par = Parallel(tp=1, pp=4, dp=2)
    kw = dict(batch=1, seq=2048, grad_accum=8, kernel_efficiency=0.7, dtype="bf16")
    assert step_time("llama-3-8b", "A100 80GB", par, tp_backward_overlap=True, **kw).step_s == \
        step_time("llama-3-8b", "A100 80GB", par, **kw).step_s


def test_the_flag_is_a_bool():
    with pytest.raises(TypeError, match="tp_backward_overlap"):
        step_time("llama-3-8b", "H100 SXM", Parallel(tp=8, sp=True), batch=1, seq=2048,
                  tp_backward_overlap=1)


@pytest.mark.parametrize("value, expected", [("backward", True), (" Backward ", True), ("yes", False),
                                             ("", False), (None, False), (float("nan"), False)])
def test_tp_backward_overlap_of_reads_the_cell(value, expected):
    assert tp_backward_overlap_of(pd.Series({"tp_comm_overlap": value})) is expected
    assert tp_backward_overlap_of(pd.Series({"model": "x"})) is False


def test_marked_rows_are_megatron_lm_of_2022_on_and_say_why():
    """Only rows whose framework is Megatron-LM of a version with the async backward (2022 or later) carry
    ``backward``: Nemotron-4, MegaScale's baseline and Megatron-LM's own README of 2022-05-19 (commit
    841f789f, after 02bb1f5c); Narayanan et al.'s April 2021 runs (before cf7efd4f) and the Megatron-DeepSpeed
    forks do not."""
    df = published_runs()
    marked = df[df["tp_comm_overlap"].fillna("") == "backward"]
    # Nemotron-4 15B (3), 340B (3), MegaScale's baseline (8), the README's selective-recomputation runs (3)
    assert len(marked) == 17
    assert set(marked["framework"]) == {"megatron-lm", "megatron"}
    assert (pd.to_datetime(marked["as_of"]) >= "2022-03-02").all()
    assert all("tp_comm_overlap: backward" in n for n in marked["note"])
    readme = df["source"].str.contains("841f789f")
    assert readme.sum() == 3 and (df.loc[readme, "tp_comm_overlap"] == "backward").all()
    assert df[df["source"].str.startswith("Narayanan")]["tp_comm_overlap"].isna().all()
    assert df[df["framework"] == "megatron-deepspeed"]["tp_comm_overlap"].isna().all()
