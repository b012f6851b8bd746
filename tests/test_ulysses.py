"""Ulysses-style context parallelism (cp_comm="a2a"; issue 38). Expected volumes are written out from
DeepSpeed-Ulysses' own count (Jacobs et al. 2023, Sec. 3.2: per layer an all-to-all of Q, K, V with aggregate
message 3 N h before the attention and one of the output, N h, after it; 4 N h / P per link), not read off the
library. A GPU keeps its own 1 / P share of each buffer, so it sends (P - 1) / P of its N h / P."""

import pytest

import llmsizing as L
from llmsizing.activations import cp_attention_buffers_bytes
from llmsizing.parallel import Parallel

GPU = "H100 SXM"


def _cp_rows(comm, word):
    return [c for c in comm.collectives if c.group == "cp" and word in c.collective]


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_multi_head_attention_sends_the_papers_4_N_h_over_P(cp):
    """Llama 2 7B has 32 heads and 32 KV heads (plain multi-head attention), hidden h = 4,096, 32 layers.
    At N = 32,768 tokens in BF16 (2 bytes), one layer's forward sends 4 N h / P x (P - 1) / P elements."""
    n, h, layers, b = 32768, 4096, 32, 2
    comm = L.communication("llama-2-7b", Parallel(cp=cp, cp_comm="a2a"), batch=1, seq=n, gpu=GPU)
    per_layer = 4 * n * h * b / cp * (cp - 1) / cp
    fwd = sum(c.bytes_per_gpu for c in _cp_rows(comm, "(forward)"))
    bwd = sum(c.bytes_per_gpu for c in _cp_rows(comm, "(backward)"))
    assert fwd == pytest.approx(layers * per_layer, rel=1e-12)
    assert bwd == pytest.approx(layers * per_layer, rel=1e-12)          # dO out, dQ dK dV back: the same
    # the paper's point: the volume per GPU falls as 1 / P (x (P-1)/P), unlike the ring's K, V hops
    assert fwd * cp * cp / (cp - 1) == pytest.approx(layers * 4 * n * h * b)


def test_grouped_query_attention_shrinks_k_and_v():
    """Llama 3 8B: 32 query heads, 8 KV heads of 128, hidden 4,096. Q and O are N h each; K and V are
    N x 8 x 128 = N h / 4 each: (1 + 1/4 + 1/4) N h before the attention, N h after it, 2.5 N h in all."""
    n, h, layers, b, cp = 131072, 4096, 32, 2, 8
    comm = L.communication("llama-3-8b", Parallel(cp=cp, cp_comm="a2a"), batch=1, seq=n, gpu=GPU)
    qkv = _cp_rows(comm, "Q,K,V (forward)")[0]
    assert qkv.message_bytes == 1.5 * n * h * b / cp                    # 201,326,592 bytes
    assert qkv.calls == layers
    total = sum(c.bytes_per_gpu for c in _cp_rows(comm, ""))
    assert total == pytest.approx(2 * layers * 2.5 * n * h * b / cp * (cp - 1) / cp)


def test_ulysses_sends_less_than_the_ring_and_is_exposed_in_full():
    """The ring sends K, V (N / P x 2 x 8 x 128 per rank) P - 1 hops forward and K, V with dK, dV P - 1 hops
    backward: 3 (P - 1) chunks per layer, i.e. 3 (P - 1) / P x N h / 2 for Llama 3 8B, against Ulysses'
    2 x 2.5 (P - 1) / P x N h / P. At P = 8: ring 1.5 N h x 7/8, Ulysses 0.625 N h x 7/8 (2.4x less)."""
    n, cp = 131072, 8
    kw = dict(batch=1, seq=n, gpu=GPU)
    ring = L.communication("llama-3-8b", Parallel(cp=cp), **kw)
    a2a = L.communication("llama-3-8b", Parallel(cp=cp, cp_comm="a2a"), **kw)
    r = sum(c.bytes_per_gpu for c in _cp_rows(ring, ""))
    u = sum(c.bytes_per_gpu for c in _cp_rows(a2a, ""))
    assert r / u == pytest.approx(1.5 / 0.625)
    st = L.step_time("llama-3-8b", GPU, Parallel(cp=cp, cp_comm="a2a"), batch=1, seq=n)
    assert st.exposed["cp"] == pytest.approx(sum(c.time_s for c in _cp_rows(a2a, "")))


def test_the_heads_limit_the_degree():
    """Each rank gets 1 / P of a TP rank's heads: Llama 3 8B's 8 KV heads allow P = 8, not 16; Llama 3 405B
    at tp = 8 has one KV head per rank, so Ulysses cannot split it at all (Meta used the all-gather)."""
    kw = dict(batch=1, seq=131072, gpu=GPU)
    L.communication("llama-3-8b", Parallel(cp=8, cp_comm="a2a"), **kw)
    with pytest.raises(ValueError, match=r"cp=16 with cp_comm='a2a'.*8 KV heads"):
        L.communication("llama-3-8b", Parallel(cp=16, cp_comm="a2a"), **kw)
    with pytest.raises(ValueError, match=r"cp=2 with cp_comm='a2a'.*1 KV heads"):
        L.communication("llama-3.1-405b", Parallel(tp=8, sp=True, cp=2, cp_comm="a2a"), **kw)
    with pytest.raises(ValueError, match="cp_comm"):
        Parallel(cp=2, cp_comm="ulysses")


def test_the_buffers_are_one_copy_of_the_heads_it_receives():
    """Forward: the all-to-all's Q, K, V output, as many bytes as this rank's own: Llama 3 8B at 128K, P = 8,
    BF16: Q = 16,384 x 4,096 x 2 = 128 MiB, K + V = 64 MiB. Backward: dO, and dQ, dK, dV: 128 + 192 MiB."""
    mib = 2 ** 20
    fwd, bwd = cp_attention_buffers_bytes("llama-3-8b", batch=1, seq=131072, cp=8, cp_comm="a2a")
    assert (fwd / mib, bwd / mib) == (192, 320)
