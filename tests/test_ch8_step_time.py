"""Chapter 8 by hand: the pipeline bubble, tensor- and sequence-parallel traffic, pipeline sends, and the step
time split of :func:`llmsizing.layouts.step_time`. Every expected value is written out from the papers'
formulas (Shoeybi et al. 2019; Korthikanti et al. 2022; Narayanan et al. 2021) and the datasheet figures, not
copied from the library's output."""

from __future__ import annotations

import pytest

import llmsizing as L
from llmsizing import Parallel, communication, pipeline_bubble
from llmsizing.charts import render_parallel_explorer, render_pipeline_bubble
from llmsizing.flops import stage_flops_per_token
from llmsizing.layouts import StepTime, step_time
from llmsizing.parallel import uneven_stages

import _kernels_by_hand as KH

H100 = "H100 SXM"
NVLINK_NOMINAL = 900e9 / 2        # NVLink 4: 900 GB/s bidirectional per GPU -> 450 GB/s each way
NIC = 50e9                        # one 400 Gb/s NDR NIC per GPU in a DGX H100 = 50 GB/s each way


def _links_csv(link_class):
    """(achievable share, latency per step in s) of a link class, read from data/links.csv."""
    import csv
    from pathlib import Path

    with open(Path(__file__).resolve().parents[1] / "data" / "links.csv", newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if r["link_class"] == link_class)
    return float(row["achievable_fraction"]), float(row["alpha_us"]) * 1e-6


NV_SHARE, NV_ALPHA = _links_csv("nvlink")
NET_SHARE, NET_ALPHA = _links_csv("network")
NVLINK_ONE_WAY = NVLINK_NOMINAL * NV_SHARE


# ----------------------------------------------------------------------------- the bubble
def test_bubble_plain_1f1b_by_hand():
    # (p - 1) idle slots at each end of a flush, against m slots of work (Narayanan et al. 2021, Sec. 2.2)
    assert pipeline_bubble(4, 8) == pytest.approx(3 / 8)
    assert pipeline_bubble(8, 32) == pytest.approx(7 / 32)
    assert pipeline_bubble(2, 1) == pytest.approx(1.0)
    assert pipeline_bubble(1, 7) == 0.0


def test_bubble_interleaved_by_hand():
    # v chunks per stage shrink each idle slot v-fold: (p - 1) / (v m)
    assert pipeline_bubble(8, 16, 2) == pytest.approx(7 / 32)
    assert pipeline_bubble(4, 8, 4) == pytest.approx(3 / 32)
    # interleaving by v is worth exactly as much as v times the micro-batches
    assert pipeline_bubble(8, 8, 4) == pytest.approx(pipeline_bubble(8, 32))


def test_bubble_chart_reports_the_idle_share():
    text = render_pipeline_bubble().summary
    # p = 4, m = 8: bubble 3/8, idle share (3/8)/(11/8) = 3/11 = 27%
    assert "m=8: 27%" in text.splitlines()[2]
    # p = 8, v = 2, m = 16: bubble 7/32, share 7/39 = 18%
    assert "m=16: 18%" in text.splitlines()[4]
    # the interleaved schedule needs m a multiple of p (groups of p micro-batches): no m=4 point at p = 8;
    # m = 8: bubble 7/16, share 7/23 = 30%
    assert "m=4:" not in text.splitlines()[4] and "m=8: 30%" in text.splitlines()[4]
    # the title counts the idle slots, p - 1 (Narayanan et al. 2021), not the ratio (p - 1)/m, against m
    title = render_pipeline_bubble().figure.axes[0].get_title(loc="left")
    assert "p - 1 idle slots per m micro-batches" in title and "(p - 1)/m idle" not in title
    with pytest.raises(ValueError, match="pps"):
        render_pipeline_bubble(pps=())
    with pytest.raises(ValueError, match="max_microbatches"):
        render_pipeline_bubble(max_microbatches=1)


# ----------------------------------------------------------------------------- TP / SP / PP traffic
def _group(comm, name):
    return [c for c in comm.collectives if c.collective == name]


def test_tp_all_reduce_bytes_per_layer_by_hand():
    # Llama-3-70B, t = 8, b = 1, s = 4096, h = 8192, bf16 activations: each all-reduce is a b s h x 2-byte buffer;
    # a ring all-reduce sends 2 (t-1)/t of it; 2 all-reduces per layer forward (after attention, after the MLP)
    # and 2 backward (Shoeybi et al. 2019, Fig. 4)
    t, b, s, h, layers = 8, 1, 4096, 8192, 80
    per_layer_fwd = 2 * (2 * (t - 1) / t) * b * s * h * 2
    comm = communication("llama-3-70b", Parallel(tp=t), batch=b, seq=s, gpu=H100)
    fwd, = _group(comm, "TP all-reduce (forward)")
    bwd, = _group(comm, "TP all-reduce (backward)")
    assert fwd.message_bytes == b * s * h * 2
    assert fwd.bytes_per_gpu == pytest.approx(layers * per_layer_fwd)
    assert bwd.bytes_per_gpu == pytest.approx(layers * per_layer_fwd)
    # inside one 8-GPU node: NVLink one way at its achieved share, plus 2 (t - 1) ring steps per call
    calls = 2 * layers
    assert fwd.time_s == pytest.approx(layers * per_layer_fwd / NVLINK_ONE_WAY + calls * 2 * (t - 1) * NV_ALPHA)


def test_tp_across_nodes_rides_the_shared_nics():
    # the same t = 8 group split over two 4-GPU nodes: each GPU's ring share leaves its node over the 4 NICs of
    # the group's 4 GPUs there (4 x 50 GB/s nominal, at the network's achieved share) instead of NVLink
    kw = dict(batch=1, seq=4096, gpu=H100)
    inside = communication("llama-3-70b", Parallel(tp=8), **kw)
    across = communication("llama-3-70b", Parallel(tp=8), gpus_per_node=4, **kw)
    assert all(c.bandwidth_gbps * 1e9 == pytest.approx(NVLINK_ONE_WAY) for c in inside.collectives)
    assert all(c.bandwidth_gbps * 1e9 == pytest.approx(4 * NIC * NET_SHARE) for c in across.collectives)
    # 4 all-reduces per layer of a 2-byte b s h buffer; latency: 2 (t - 1) = 14 ring steps inside; across nodes
    # the cheaper of the ring's 14 and NCCL's tree, 2 log2 t = 6 levels of 3.75 ring steps each (22.5): the
    # ring, at the network's latency per step
    t, calls, sent = 8, 4 * 80, 4 * 80 * 2 * 7 / 8 * 2 * 4096 * 8192
    assert inside.by_group()["tp"] == pytest.approx(sent / NVLINK_ONE_WAY + calls * 2 * (t - 1) * NV_ALPHA)
    # across the two nodes the all-reduce is hierarchical (issue 34): reduced inside each node, then each node
    # sends the buffer 2 (2 - 1) / 2 = 1 time over its 4 NICs, not the flat ring's 2 x 7 / 8
    sent_across = calls * 1.0 * 2 * 4096 * 8192
    assert across.by_group()["tp"] == pytest.approx(sent_across / (4 * NIC * NET_SHARE) + calls * 14 * NET_ALPHA)


def test_sp_moves_the_same_forward_bytes_as_tp():
    # all-reduce = reduce-scatter + all-gather: 2 (t-1)/t S = (t-1)/t S + (t-1)/t S (Korthikanti et al. 2022)
    kw = dict(batch=2, seq=2048, gpu=H100)
    tp = communication("llama-3-8b", Parallel(tp=4), **kw)
    sp = communication("llama-3-8b", Parallel(tp=4, sp=True), **kw)
    tp_fwd = _group(tp, "TP all-reduce (forward)")[0].bytes_per_gpu
    sp_fwd = (_group(sp, "SP all-gather (forward)")[0].bytes_per_gpu
              + _group(sp, "SP reduce-scatter (forward)")[0].bytes_per_gpu)
    assert sp_fwd == pytest.approx(tp_fwd)
    t, b, s, h, layers = 4, 2, 2048, 4096, 32
    assert tp_fwd == pytest.approx(layers * 2 * 2 * (t - 1) / t * b * s * h * 2)


def test_pp_sends_one_activation_and_one_gradient_per_microbatch():
    # middle stage: per micro-batch one b s h bf16 activation out and one gradient back; v times interleaved
    b, s, h, m = 1, 4096, 8192, 16
    for v in (1, 2):
        comm = communication("llama-3-70b", Parallel(pp=4, virtual_stages=v), batch=b, seq=s, gpu=H100,
                             grad_accum=m)
        pp, = _group(comm, "PP send/recv (activations and their gradients)")
        assert pp.bytes_per_gpu == pytest.approx(2 * m * v * b * s * h * 2)


# ----------------------------------------------------------------------------- step_time
def _flops_per_token(name, seq):
    m = L.get_model(name)
    matmul = m.n_params - m.vocab * m.hidden          # untied: the embedding lookup is no matmul
    attention = 4 * seq * m.heads * m.head_dim * m.layers
    return 3 * (2 * matmul + attention)


def test_step_time_compute_is_the_slowest_stage_by_hand():
    """80 layers on 4 stages: 20 each, and the last also runs the LM head (2 x vocab x hidden FLOPs per token
    forward, 3x that in training). Each layer: 3 x (2 x its parameters + 4 s heads head_dim attention)."""
    b, s, m = 1, 4096, 16
    mdl = L.get_model("llama-3-70b")
    par = Parallel(tp=8, pp=4, dp=2, sp=True)
    st = step_time("llama-3-70b", H100, par, batch=b, seq=s, grad_accum=m, kernel_efficiency=0.4)
    layer = 3 * (2 * mdl.params_per_layer + 4 * s * mdl.heads * mdl.head_dim)
    head = 3 * 2 * mdl.vocab * mdl.hidden
    last = 20 * layer + head
    assert stage_flops_per_token(mdl, par, seq=s) == pytest.approx((20 * layer,) * 3 + (last,))
    # the last stage over its tp = 8 GPUs (issue 34, tests/_kernels_by_hand.py): its Linear layers at 40% of
    # 989.4 TFLOP/s x their GEMMs' efficiency (4,096 tokens, the 70B's widths / 8); its attention core, the
    # causal half of 3 x 4 s heads d per layer, at FlashAttention-2's 294 TFLOP/s x 3 / 3.5 (H100, 4K)
    attention = 3 * 4 * s * mdl.heads * mdl.head_dim
    gemm_rate = 989.4e12 * 0.4 * KH.layer_gemm_eff(*KH.LLAMA3_70B, tp=8, tokens=b * s, ridge=989.4 / 3.35)
    tokens = b * s * m / 8

    # the memory-bound kernels (llmsizing.pointwise) at the H100's 3.35 TB/s: 20 layers + the loss on the last
    # (and the embedding on the first stage)
    pw_layer = KH.pointwise_layer_bytes(*KH.LLAMA3_70B)
    pw_embedding, pw_loss = KH.pointwise_end_bytes(mdl.hidden, mdl.vocab)

    def by_hand(flops, layers, end_bytes):
        return ((flops - layers * attention) * tokens / gemm_rate
                + layers * attention / 2 * tokens / (294e12 * 3 / 3.5)
                + (layers * pw_layer + end_bytes) * tokens / KH.H100_HBM)
    expected = by_hand(last, 20, pw_loss)
    assert st.compute_s == pytest.approx(expected)
    assert st.compute_s > _flops_per_token("llama-3-70b", s) * b * s * m / (8 * 4) / (989.4e12 * 0.4)
    # the bubble (session 39): 1F1B's fill and drain pass the three other stages once each at their own speed,
    # a micro-batch's worth, (first + 2 middle) / m; the slowest stage's speed would charge 3 / 16 of it
    first, middle = by_hand(20 * layer, 20, pw_embedding), by_hand(20 * layer, 20, 0)
    assert st.bubble_s == pytest.approx((first + 2 * middle) / m)
    assert st.bubble == pytest.approx((first + 2 * middle) / (m * expected)) and st.bubble < 3 / 16
    assert st.tokens == b * s * m * 2
    # uneven stages (one layer fewer on the last): 21, 20, 20, 19 + head
    uneven = Parallel(tp=8, pp=4, dp=2, sp=True, stage_layers=uneven_stages(80, 4, first=21, last=19))
    assert stage_flops_per_token(mdl, uneven, seq=s)[-1] == pytest.approx(19 * layer + head)
    slow = (by_hand(21 * layer, 21, pw_embedding) if 21 * layer > 19 * layer + head else
            by_hand(19 * layer + head, 19, pw_loss))
    assert step_time("llama-3-70b", H100, uneven, batch=b, seq=s, grad_accum=m,
                     kernel_efficiency=0.4).compute_s == pytest.approx(slow)


def test_exposed_by_group_rules_by_hand():
    """TP waits in full (each collective feeds the next matmul) unless async TP; DDP's one gradient all-reduce
    hides behind the last micro-batch's backward only (2/3 of one micro-batch's compute without recomputation)."""
    b, s, m = 1, 4096, 8
    kw = dict(batch=b, seq=s, grad_accum=m, kernel_efficiency=0.5)
    tp = step_time("llama-3-8b", H100, Parallel(tp=8), **kw)
    assert tp.comm_by_group_s["tp"] > 0
    assert tp.exposed_by_group_s["tp"] == pytest.approx(tp.comm_by_group_s["tp"])
    hidden = step_time("llama-3-8b", H100, Parallel(tp=8), async_tp=True, **kw)
    assert hidden.exposed_by_group_s["tp"] == pytest.approx(max(0.0, tp.comm_by_group_s["tp"] - tp.compute_s))
    # DDP over 64 nodes, one GPU each: one all-reduce of bf16 gradients on one NIC per GPU
    n = L.get_model("llama-3-8b").n_params
    d = 64
    ddp = step_time("llama-3-8b", H100, Parallel(dp=d), gpus_per_node=1, **kw)
    # latency: NCCL's tree, 2 ceil(log2 64) = 12 levels of 3.75 ring steps each (45, fewer than the ring's
    # 126), once per Megatron-Core bucket of max(40e6, 1e6 x 64) = 64e6 parameters, closed at the parameter
    # that fills it: the LM head, the final norm with layer 31's fc2 and fc1, then each layer's attention
    # (41,951,232) with the next one's fc2 (100,671,488) and that one's fc1, and layer 0's attention with the
    # embedding: 1 + 1 + 2 x 31 + 1 = 65 calls (session 37; one per 64e6 gave ceil(125.5) = 126, issue 34)
    ring = 2 * (d - 1) / d * 2 * n / (NIC * NET_SHARE) + 65 * 3.75 * 2 * 6 * NET_ALPHA
    # the compute as kernels run it (tests/_kernels_by_hand.py): Linear layers at 50% x their GEMMs' efficiency,
    # the causal half of the attention core at FlashAttention-2's 294 TFLOP/s x 3 / 3.5 (H100, 4K)
    mdl = L.get_model("llama-3-8b")
    attention = 3 * 4 * s * mdl.heads * mdl.head_dim * mdl.layers
    gemm_rate = 989.4e12 * 0.5 * KH.layer_gemm_eff(*KH.LLAMA3_8B, tp=1, tokens=b * s, ridge=989.4 / 3.35)
    compute = ((_flops_per_token("llama-3-8b", s) - attention) * b * s * m / gemm_rate
               + attention / 2 * b * s * m / (294e12 * 3 / 3.5)
               # the memory-bound kernels (llmsizing.pointwise): 32 layers, the embedding and the loss
               + (32 * KH.pointwise_layer_bytes(*KH.LLAMA3_8B) + sum(KH.pointwise_end_bytes(4096, 128256)))
               * b * s * m / KH.H100_HBM)
    assert ddp.compute_s == pytest.approx(compute)
    last_backward = compute / m * 2 / 3
    assert ddp.comm_by_group_s["dp"] == pytest.approx(ring)
    assert ddp.exposed_by_group_s["dp"] == pytest.approx(ring - last_backward)
    assert ddp.step_s == pytest.approx(compute + ring - last_backward)


def test_step_time_parts_add_up():
    par = Parallel(tp=4, pp=2, dp=4, zero=1, sp=True)
    st = step_time("llama-3-8b", H100, par, batch=1, seq=4096, grad_accum=8, overlap=0.0)
    parts = st.parts()
    assert list(parts) == ["compute", "pipeline bubble", "dp", "tp", "pp"]
    assert all(v > 0 for v in parts.values())
    assert sum(parts.values()) == pytest.approx(st.step_s)             # overlap 0: everything adds
    assert parts["dp"] + parts["tp"] + parts["pp"] == pytest.approx(st.comm_s)
    assert st.efficiency == pytest.approx(parts["compute"] / sum(parts.values()))


def test_overlap_hides_communication_only_as_far_as_compute_lasts():
    par = Parallel(tp=8, dp=4, zero=1, sp=True)
    kw = dict(batch=1, seq=4096, grad_accum=4)
    none = step_time("llama-3-70b", H100, par, overlap=0.0, **kw)
    half = step_time("llama-3-70b", H100, par, overlap=0.5, **kw)
    full = step_time("llama-3-70b", H100, par, overlap=1.0, **kw)
    busy, comm = none.busy_s, none.comm_s
    assert half.step_s == pytest.approx(busy + max(0.5 * comm, comm - busy))
    assert full.step_s == pytest.approx(max(busy, comm))
    assert none.step_s >= half.step_s >= full.step_s
    # communication longer than compute: even full overlap leaves the difference exposed
    slow = step_time("llama-3-70b", H100, Parallel(dp=64, zero=3), batch=1, seq=512, overlap=1.0)
    assert slow.comm_s > slow.busy_s
    assert slow.step_s == pytest.approx(slow.comm_s)


def test_explorer_draws_step_time():
    # one source of truth: the explorer's summary prints step_time's numbers
    kw = dict(tp=2, pp=2, dp=2, zero=1, sp=True, batch=1, seq=2048, grad_accum=8, recompute="selective")
    text = render_parallel_explorer(**kw).summary
    par = Parallel(tp=2, pp=2, dp=2, zero=1, sp=True)
    st = step_time("llama-3-8b", H100, par, batch=1, seq=2048, grad_accum=8, recompute="selective")
    assert f"step time {st.step_s:.3f} s -> MFU {st.mfu:.0%}" in text
    assert f"tp {st.comm_by_group_s['tp']:.3f} of {st.comm_by_group_s['tp']:.3f} s" in text   # TP: all exposed
    fast = render_parallel_explorer(**kw, async_tp=True).summary
    assert "(async TP)" in fast and fast != text


def test_step_time_refuses_bad_input():
    kw = dict(batch=1, seq=1024)
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="overlap"):
            step_time("llama-3-8b", H100, None, overlap=bad, **kw)
    with pytest.raises(TypeError, match="overlap"):
        step_time("llama-3-8b", H100, None, overlap="0.5", **kw)
    with pytest.raises(ValueError, match="kernel_efficiency"):
        step_time("llama-3-8b", H100, None, kernel_efficiency=0, **kw)
    with pytest.raises(ValueError, match="grad_accum"):
        step_time("llama-3-8b", H100, None, grad_accum=0, **kw)
    with pytest.raises(TypeError, match="parallel"):
        step_time("llama-3-8b", H100, "tp=2", **kw)
    assert isinstance(step_time("gpt2", "A10", None, **kw), StepTime)


def test_numpy_scalars_give_the_same_step():
    # widgets and np.arange sweeps hand over NumPy scalars: same result as Python numbers
    import numpy as np

    kw = dict(batch=1, seq=2048, grad_accum=4, kernel_efficiency=0.4, overlap=0.5)
    par = Parallel(tp=2, pp=2, dp=2, zero=1, sp=True)
    py = step_time("llama-3-8b", H100, par, **kw)
    npk = {k: (np.int64(v) if isinstance(v, int) else np.float64(v)) for k, v in kw.items()}
    nps = step_time("llama-3-8b", H100, par, **npk)
    assert nps.step_s == py.step_s and nps.parts() == py.parts() and nps.tokens == py.tokens
    assert type(nps.tokens) is int


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_bubble_share_in_unit_interval_and_falls_with_microbatches(p):
    shares = [pipeline_bubble(p, m) / (1 + pipeline_bubble(p, m)) for m in (1, 2, 4, 8, 16, 64)]
    assert all(0 <= x < 1 for x in shares)
    assert shares == sorted(shares, reverse=True)


# ----------------------------------------------------------------------------- Llama 3 405B, Table 4
@pytest.mark.parametrize("gpus", [8192, 16384])
def test_llama3_405b_published_layout_mfu_within_20_percent(gpus):
    """Dubey et al. 2024, Table 4: TP8 CP1 PP16 with DP64 (8,192 H100s) or DP128 (16,384), 16M-token batches of
    8,192-token sequences (2,048 per step), micro-batch 1, 126 layers with one fewer on the first and last
    stages, interleaved schedule (V = 4, the book's choice: the paper does not give it), Megatron's distributed
    optimizer (ZeRO-1) with sequence parallelism, no recomputation charged (chapter 8 says why). The published MFU is read from data/published_runs.csv."""
    from llmsizing.time_cost import published_runs

    runs = published_runs()
    row = runs[runs["run"].str.startswith(f"Llama 3.1 405B, {gpus:,} GPUs (TP8")].iloc[0]
    tp, pp, dp = int(row["tp"]), int(row["pp"]), int(row["dp"])
    assert tp * pp * dp == gpus and int(row["seq"]) == 8192
    par = Parallel(tp=tp, pp=pp, dp=dp, zero=1, sp=True, virtual_stages=4,
                   stage_layers=uneven_stages(126, pp, first=7, last=7))
    sequences = int(row["global_batch"])
    st = step_time("llama-3.1-405b", H100, par, batch=1, seq=8192,        # micro-batch 1 (the paper; blank in
                   grad_accum=sequences // dp)                              # the CSV)
    assert 0.8 <= st.mfu / float(row["reported_mfu"]) <= 1.2, (st.mfu, row["reported_mfu"])
