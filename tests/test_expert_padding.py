"""Each expert's rows run in whole 128-row tiles (issue 35, moe38; ``kernels.expert_padding_share``).

ScatterMoE as Granite 3.0 ran it gives each expert ``ceil(count / 128)`` blocks of ``BLOCK_M = 128`` rows
(shawntan/scattermoe 0526612, ``kernels/ops.py``: ``padded_block_indices``); DeepGEMM's contiguous layout
aligns each expert's segment to its M block (README a6d97a1); MegaBlocks' dMoE rounds each expert's tokens up
to its ``blocking`` of 128 (``layers/dmoe.py``). The grouped share
the library had (DeepGEMM's masked benchmark) gives every group exactly 256, 512 or 1,024 rows, so it holds no
padding. Under routing an expert's count is no multiple of 128: its last tile holds 1 to 128 rows, 64.5 on
average, so the kernel computes ``rows + 63.5`` rows for ``rows`` useful ones (one whole tile below 128).
"""

import math

import pytest

from llmsizing import kernels as K


@pytest.mark.parametrize("rows, by_hand", [
    (1024, 1024 / 1087.5),     # Granite 1B-A400M, JetMoE-8B at 4,096 tokens: 4,096 x 8 / 32, 4,096 x 2 / 8
    (819.2, 819.2 / 882.7),    # Granite 3.0 3B-A800M: 4,096 x 8 / 40
    (512, 512 / 575.5),        # OLMoE-1B-7B (4,096 x 8 / 64) and Phi-3.5-MoE (4,096 x 2 / 16)
    (128, 128 / 191.5),        # one tile's worth still leaves the next one half full on average
    (64, 64 / 128),            # below one tile: one whole tile is computed
    (1, 1 / 128),
])
def test_padding_share_by_hand(rows, by_hand):
    assert K.expert_padding_share(rows) == pytest.approx(by_hand, rel=1e-12)


def test_block_is_the_kernels_128_and_another_block_follows_the_same_rule():
    assert K.EXPERT_M_BLOCK == 128
    assert K.expert_padding_share(1024, block=64) == pytest.approx(1024 / (1024 + 31.5), rel=1e-12)
    assert K.expert_padding_share(1024, block=1) == 1.0          # one-row tiles: nothing to pad


@pytest.mark.parametrize("bad", [dict(rows=0), dict(rows=-5), dict(rows=math.nan), dict(rows=1024, block=0),
                                 dict(rows=1024, block=2.5)])
def test_bad_input_is_refused_by_name(bad):
    with pytest.raises((ValueError, TypeError), match="rows|block"):
        K.expert_padding_share(**bad)


def test_granite_1b_experts_pay_the_padding_in_the_layer_rate():
    """Granite 3.0 1B-A400M (hidden 1,024, 32 experts of 512, top-8) at one 4,096-token sequence: 1,024 rows
    an expert, all 32 experts on the GPU (no expert parallelism). Its routed GEMMs' rate is the curve at all
    32,768 rows times the grouped share at 1,024 times 1,024 / 1,087.5; the attention GEMMs are untouched. So
    the layer's GEMM seconds, with the padding and without it (the share alone), differ by exactly the routed
    GEMMs' seconds x 63.5 / 1,024."""
    from llmsizing.catalog import get_model

    m = get_model("granite-3.0-1b-a400m")
    assert (m.hidden, m.experts, m.experts_per_token, m.expert_ffn_hidden) == (1024, 32, 8, 512)
    (mq, nq, kq), (mp, np_, kp), (mu, nu, ku), (md, nd, kd) = K.layer_gemms(m, tp=1, tokens=4096)
    assert mu == md == 1024
    g = "H100 SXM"
    attn = [(mq * nq * kq, K.gemm_efficiency(g, mq, nq, kq)),
            (mp * np_ * kp, K.gemm_efficiency(g, mp, np_, kp))]
    share = K.grouped_gemm_share(1024)
    routed = [(32 * mu * nu * ku, K.gemm_efficiency(g, 32 * mu, nu, ku) * share),
              (32 * md * nd * kd, K.gemm_efficiency(g, 32 * md, nd, kd) * share)]
    flops = sum(f for f, _ in attn + routed)
    unpadded_s = sum(f / e for f, e in attn + routed)
    routed_s = sum(f / e for f, e in routed)
    padded_s = unpadded_s + routed_s * 63.5 / 1024
    assert K.layer_gemm_efficiency(m, g, tp=1, tokens=4096) == pytest.approx(flops / padded_s, rel=1e-9)


@pytest.mark.parametrize("skew", [0.0, 1.0])
def test_the_last_tile_is_half_full_on_average_under_routing(skew):
    """First principles for the rule's 63.5: route Granite 3.0 1B-A400M's micro-batch (4,096 tokens, top-8
    of 32 experts) at random, uniformly (skew 0) or with expert e drawn in proportion to (e + 1) ** -skew
    (skew 1: the busiest expert gets about 11 times the quietest's tokens), 200 micro-batches, and count
    the rows the 128-row tiles compute beyond each expert's tokens: their mean lies within 3 of 63.5
    either way (62.7 and 64.4 with this seed)."""
    import numpy as np

    rng = np.random.default_rng(38)
    weights = (np.arange(32) + 1.0) ** -skew
    pads = []
    for _ in range(200):                     # each token's 8 distinct experts: Gumbel top-k, the same law as
        keys = np.log(weights) + rng.gumbel(size=(4096, 32))      # drawing without replacement by weight
        chosen = np.argpartition(-keys, 8, axis=1)[:, :8]
        counts = np.bincount(chosen.ravel(), minlength=32)
        assert counts.sum() == 4096 * 8
        pads.extend((-counts) % 128)
    assert abs(np.mean(pads) - 63.5) < 3
