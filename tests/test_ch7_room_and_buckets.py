"""Chapter 7's Exercise 7.1 under the book's memory rule, and PyTorch DDP's gradient buckets, derived by hand.

Both expectations come from published shapes (Meta's Llama 3 configs: hidden 8,192, 80 layers, FFN 28,672,
64 heads and 8 KV heads of 128, vocabulary 128,256 for the 70B; hidden 4,096, 32 layers, FFN 14,336, 32 heads
and 8 KV heads for the 8B), the H100 SXM's memory as NVML reports it (81,559 MiB) and PyTorch's bucket
defaults (reducer.hpp: 25 MiB, first bucket 1 MiB), not from the library's output.
"""

import math

import pytest

from llmsizing.memory import activation_room_bytes
from llmsizing.parallel import Parallel
from llmsizing.units import GiB
from llmsizing.zero_traffic import torch_ddp_buckets

H100_BYTES = 81_559 * 2**20


def _llama70_params():
    h, f, v, layers, kv = 8192, 28672, 128256, 80, 8 * 128
    block = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h      # q, o; k, v; gate, up, down; two RMSNorms
    return 2 * v * h + layers * block + h                    # untied embedding and head; final norm


def _room_by_hand(nodes):
    n = _llama70_params()
    states = 16 * n / (8 * nodes)                             # ZeRO-3: all 16 bytes per parameter sharded
    gathered = 4 * 128256 * 8192                              # the largest unit (LM head): bf16 weight + grad
    # peak = states + gathered + acts; 1 GiB + 1.08 x peak <= 0.9 x capacity
    return (0.9 * H100_BYTES - GiB) / 1.08 - states - gathered


def test_llama70_params_by_hand():
    assert _llama70_params() == 70_553_706_496


@pytest.mark.parametrize("nodes", [3, 4, 5])
def test_room_matches_hand(nodes):
    got = activation_room_bytes("llama-3-70b", "H100 SXM", parallel=Parallel(dp=8 * nodes, zero=3))
    assert got == pytest.approx(_room_by_hand(nodes), rel=1e-9)


def test_exercise_7_1_needs_five_nodes():
    # 30 GiB of activations: 4 nodes leave about 28.7 GiB under the rule, 5 nodes about 35.2 GiB
    need = 30 * GiB
    fewest = next(k for k in range(1, 64) if _room_by_hand(k) >= need)
    assert fewest == 5
    assert activation_room_bytes("llama-3-70b", "H100 SXM", parallel=Parallel(dp=40, zero=3)) >= need
    assert activation_room_bytes("llama-3-70b", "H100 SXM", parallel=Parallel(dp=32, zero=3)) < need
    # the raw capacity (no 90%, no allowance, no gathered unit) would say 3 nodes
    assert H100_BYTES - 16 * _llama70_params() / 24 >= need


def test_room_rejects_bad_fraction():
    with pytest.raises(ValueError, match="usable_fraction"):
        activation_room_bytes("llama-3-70b", "H100 SXM", usable_fraction=1.5)


def test_torch_ddp_buckets_llama8_by_hand():
    # backward order: LM head (1.05 GB) closes the 1 MiB first bucket; each block then closes 5 buckets of
    # >= 25 MiB: down, up, gate (117 MB each), MLP norm + o_proj (33.6 MB), v + k (8.4 MB each) + q (33.6 MB);
    # its attention norm rides into the next bucket (the final norm into layer 31's down, layer 0's into the
    # embedding's bucket)
    h, kv, f = 4096, 1024, 14336
    assert 2 * h * f >= 25 * 2**20 and 2 * (h * h + h) >= 25 * 2**20 and 2 * (2 * h * kv) < 25 * 2**20
    assert torch_ddp_buckets("llama-3-8b") == 1 + 32 * 5 + 1
    # under autocast the gradients are fp32: v + k (2 x 16.8 MB) now reach 25 MiB and close a bucket of their
    # own, so each block closes 6 buckets: down, up, gate, MLP norm + o_proj, v + k, q (+ the attention norm)
    assert 4 * 2 * h * kv >= 25 * 2**20 and 4 * h * h >= 25 * 2**20
    assert torch_ddp_buckets("llama-3-8b", precision="bf16-mixed-fp32-grads") == 1 + 32 * 6 + 1


def test_torch_ddp_buckets_fewer_than_bytes_over_cap():
    n = 8_030_261_248                                       # Llama-3-8B's parameters
    assert torch_ddp_buckets("llama-3-8b") < math.ceil(2 * n / (25 * 2**20))
    with pytest.raises(ValueError, match="bucket_cap_mb"):
        torch_ddp_buckets("llama-3-8b", bucket_cap_mb=0)


def test_narayanan_eq3_by_hand():
    """Narayanan et al. 2021 (Sec. 5.1): GPT-3 175B (96 layers, hidden 12,288, 2,048 tokens, vocabulary padded
    to 51,200) on 300B tokens and 1,024 A100s at 140 TFLOP/s per GPU trains in "about 34 days". The paper
    gets 34 from its 8TP/(nX) shortcut; Eq. 3 worked by hand gives 34.7 days (review24c L11)."""
    from llmsizing.flops import narayanan_eq3_flops_per_token

    # by hand: 1 + 2,048/73,728 + 51,200/18,874,368 = 1.030490; 96 x 96 x 12,288^2 = 1.39156e12
    per_token = 1.39156e12 * 1.030490                              # = 1.4340e12 FLOP per token
    days_by_hand = 300e9 * per_token / (1024 * 140e12) / 86_400     # = 34.73 days
    assert days_by_hand == pytest.approx(34.7, abs=0.05)
    got = narayanan_eq3_flops_per_token("gpt3-175b", seq=2048, vocab=51200)
    assert got == pytest.approx(per_token, rel=1e-4)
    days = 300e9 * got / (1024 * 140e12) / 86_400
    assert days == pytest.approx(34, rel=0.03)                      # the paper's published figure, within 3%
