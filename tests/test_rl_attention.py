"""Packed rollouts attend per sequence (issue 38, chapter 19): the trainer's attention is priced at
``sum s_i^2 / sum s_i``, not at the packed row. Expected values derived by hand."""

import math

import pytest

from llmsizing.layouts import step_time
from llmsizing.parallel import Parallel
from llmsizing.rl import rl_run
from llmsizing.rl_trainer import packed_attention_seq, response_second_moment, rollout_attention_seq

H100 = "H100 SXM"


def test_two_packed_sequences_attend_like_one_of_2560_tokens():
    """1,024 + 3,072 tokens in a 4,096-token row: (1,024^2 + 3,072^2) / 4,096 = 10,485,760 / 4,096 = 2,560."""
    assert packed_attention_seq([1024, 3072]) == 2560
    assert packed_attention_seq([4096]) == 4096
    with pytest.raises(ValueError):
        packed_attention_seq([])


def test_step_model_flops_of_two_packed_sequences_by_hand():
    """Llama-3-8B (32 layers, 32 heads of 128): the attention core's forward is 4 x keys x 32 x 128 x 32 =
    524,288 x keys FLOPs per token (full matrix, the MFU convention), three passes in training. The row of
    1,024 + 3,072 tokens has 2,560 keys per token on average, so its model FLOPs are the 4,096-token row's
    less 4,096 tokens x 3 x 524,288 x (4,096 - 2,560); the GEMMs and the collectives are the row's."""
    kw = dict(batch=1, seq=4096, grad_accum=1)
    row = step_time("llama-3-8b", H100, Parallel(dp=1), **kw)
    packed = step_time("llama-3-8b", H100, Parallel(dp=1), attention_seq=2560, **kw)
    assert row.model_flops - packed.model_flops == pytest.approx(4096 * 3 * 524288 * (4096 - 2560), rel=1e-9)
    assert packed.tokens == row.tokens == 4096
    assert packed.comm_s == row.comm_s
    assert packed.compute_s < row.compute_s
    with pytest.raises(ValueError):
        step_time("llama-3-8b", H100, Parallel(dp=1), attention_seq=4097, **kw)


def _truncated_exponential(mean_u):
    """E[u^2] of p(u) ~ exp(-lam u) on [0, 1] with mean ``mean_u``, in closed form (the integrals of u^k
    exp(-lam u)), lam by bisection: an independent check of the library's grid."""
    def m1(lam):
        return 1 / lam - 1 / math.expm1(lam)

    lo, hi = 1e-9, 200.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if m1(mid) > mean_u else (lo, mid)
    lam = (lo + hi) / 2
    z = -math.expm1(-lam) / lam
    return (2 - math.exp(-lam) * (lam * lam + 2 * lam + 2)) / lam ** 3 / z


def test_response_second_moment_is_the_maximum_entropy_one():
    """At a mean of half the cap the maximum-entropy lengths are uniform: E[s^2] = cap^2 / 3. Below it,
    the truncated exponential (closed form above): NeMo RL's Llama 3.1 8B benchmark, mean 932 of 3,968.
    With every response at the cap, E[s^2] = cap^2."""
    assert response_second_moment(1984, 3968) == pytest.approx(3968 ** 2 / 3, rel=1e-6)
    assert response_second_moment(932, 3968) == pytest.approx(3968 ** 2 * _truncated_exponential(932 / 3968),
                                                              rel=1e-5)
    assert response_second_moment(3968, 3968) == 3968 ** 2
    with pytest.raises(ValueError):
        response_second_moment(4000, 3968)


def test_rollout_attention_seq_counts_the_prompt():
    """Prompt p, responses s: E over tokens of (p + s) = (p^2 + 2 p mean + E[s^2]) / (p + mean). One length
    (every response the same): p + s. Measured lengths 896, 1,920, 3,968 after 128: 3,072 (test_rl)."""
    assert rollout_attention_seq(128, 3968, 3968) == 4096
    e2 = response_second_moment(932, 3968)
    assert rollout_attention_seq(128, 932, 3968) == round((128 ** 2 + 2 * 128 * 932 + e2) / (128 + 932))
    assert rollout_attention_seq(128, 2261.3, 3968, lengths=[896, 1920, 3968]) == 3072


def test_shorter_packed_attention_lowers_the_update_of_a_layout():
    """On a layout's step (a mixture of experts), the 40K-cap rollouts of NeMo RL's Qwen3-30B-A3B
    benchmark (mean 8,042 of 40,832) attend over far less than their 40,960-token rows: the update falls
    and padding (one rollout a row, attending over all of it) costs more."""
    kw = dict(gpu=H100, n_gpus=32, prompts_per_step=64, samples_per_prompt=16, prompt=128,
              response=(8042, 40832), steps=1, train_layout=(4, 8, 8, 1))
    packed = rl_run("qwen3-30b-a3b", **kw)
    assert packed.attention_seq < 0.4 * 40960
    padded = rl_run("qwen3-30b-a3b", packing=False, **kw)
    assert padded.attention_seq == 40960
    assert padded.phases["update"] > packed.phases["update"]
