"""Chapter 7's data-parallel scaling figure is chapter 8's step model (dp07, issue 38: one answer per
question).

The figure (:func:`~llmsizing.charts.render_dp_scaling`) draws ``step_time(...).efficiency``: each
collective hidden only behind its own window (DDP's all-reduce behind the last micro-batch's backward). One
busy fraction is derived by hand: the all-reduce's bytes over the link (data/links.csv) against the last
backward."""

from __future__ import annotations

import math

import pytest
from test_ch7_data_parallel import LLAMA3_8B, NIC_PER_GPU, _achievable

from llmsizing import Parallel
from llmsizing.charts import render_dp_scaling
from llmsizing.comm import busy_fraction, communication, step_compute_time_s
from llmsizing.layouts import step_time

GB_TOKENS = dict(global_batch=512, seq=4096)
LINES = ("DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3 / FSDP")       # the figure's lines, in drawing order (zero 0-3)


def _drawn(view):
    """{(panel index, line label): {dp: busy fraction}} as plotted (the figure's own data, not its text)."""
    out = {}
    for i, ax in enumerate(view.figure.axes):
        for line in ax.get_lines():
            if line.get_label() in LINES:
                out[(i, line.get_label())] = dict(zip(line.get_xdata(), line.get_ydata()))
    return out


@pytest.fixture(scope="module")
def figure():
    return _drawn(render_dp_scaling("llama-3-8b", gpu="H100 SXM", **GB_TOKENS))


@pytest.mark.parametrize("panel,zero,dp", [(2, 0, 64), (2, 0, 256), (2, 1, 128), (2, 2, 16), (2, 3, 8),
                                           (1, 1, 32), (0, 0, 8)])
def test_figure_draws_step_time(figure, panel, zero, dp):
    """Each point is step_time's compute / step for that layout (one GPU per node: gpus_per_node=1)."""
    kw = dict(gpus_per_node=1) if panel == 2 else {}
    st = step_time("llama-3-8b", "H100 SXM", Parallel(dp=dp, zero=zero), batch=1, seq=4096,
                   grad_accum=512 // dp, **kw)
    assert figure[(panel, LINES[zero])][dp] == pytest.approx(st.efficiency, rel=1e-12)


@pytest.mark.parametrize("dp, buckets", [(64, 65), (256, 26)])
def test_ddp_one_gpu_per_node_by_hand(figure, dp, buckets):
    """DDP, one GPU per node (one 400 Gb/s NIC each at the network share of data/links.csv), 512 x 4,096
    tokens: m = 512 / dp micro-batches. The all-reduce: 2 (dp-1)/dp x 2 bytes x N over the link, plus NCCL's
    tree latency (2 log2 dp levels of 3.75 ring steps) per Megatron-Core bucket of max(40M, 1M x dp)
    parameters, closed at the first parameter that fills it, walking backwards (session 37,
    tests/test_megatron_buckets.py): a layer is fc2 58,720,256, fc1 117,440,512 and 41,951,232 of norms, qkv
    and proj. At 64M: the LM head (525,336,576), the final norm with layer 31's fc2 and fc1, then per layer
    its attention with the next one's fc2 (100,671,488) and that one's fc1, and layer 0's attention with the
    embedding: 1 + 1 + 2 x 31 + 1 = 65 (one per 64M: 126). At 256M: layer 31 and 30's fc2 (276,836,352),
    30's rest and 29's fc2 and fc1, 29's attention and layer 28 (260,063,232): 3 buckets per 4 layers, 24,
    and the head and the embedding: 26 (one per 256M: 32). Under no_sync it starts in the last micro-batch's
    backward, 2/3 of one micro-batch's compute (backward = 2 x forward); what outlasts it is waited for. The
    compute is the step model's own term (step_compute_time_s)."""
    share, alpha = _achievable("network")
    m = 512 // dp
    ar = (2 * (dp - 1) / dp * 2 * LLAMA3_8B / (NIC_PER_GPU * share)
          + buckets * 3.75 * 2 * math.log2(dp) * alpha)
    compute = step_compute_time_s("llama-3-8b", Parallel(dp=dp), batch=1, seq=4096, gpu="H100 SXM",
                                  grad_accum=m)
    exposed = max(0.0, ar - compute / m * 2 / 3)
    assert figure[(2, "DDP")][dp] == pytest.approx(compute / (compute + exposed), rel=1e-6)
    # the old figure (the whole step as the window) drew 100% here; the step model does not
    assert busy_fraction(compute, ar, overlap=1.0) == 1.0 > figure[(2, "DDP")][dp]


def test_whole_step_overlap_is_an_upper_bound_and_one_formula(figure):
    """overlap=1 draws the whole step as the window (the figure before dp07): busy_fraction(compute, comm, 1),
    never below the step model's value; step_time's single share and busy_fraction are one formula."""
    bound = _drawn(render_dp_scaling("llama-3-8b", gpu="H100 SXM", overlap=1.0, **GB_TOKENS))
    assert bound.keys() == figure.keys()
    for key, pts in figure.items():
        assert all(bound[key][d] >= y - 1e-12 for d, y in pts.items()), key
    par = Parallel(dp=256, zero=2)
    c = step_compute_time_s("llama-3-8b", par, batch=1, seq=4096, gpu="H100 SXM", grad_accum=2)
    t = communication("llama-3-8b", par, batch=1, seq=4096, gpu="H100 SXM", grad_accum=2,
                      gpus_per_node=1).time_s
    assert bound[(2, "ZeRO-2")][256] == pytest.approx(busy_fraction(c, t, 1.0), rel=1e-12)
    for o in (0.0, 0.4, 1.0):
        st = step_time("llama-3-8b", "H100 SXM", par, batch=1, seq=4096, grad_accum=2, gpus_per_node=1,
                       overlap=o)
        assert st.efficiency == pytest.approx(busy_fraction(c, t, o), rel=1e-12)
    with pytest.raises(ValueError, match="overlap"):
        render_dp_scaling(overlap=1.5)
