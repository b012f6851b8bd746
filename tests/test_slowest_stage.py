"""The slowest pipeline stage is the one whose whole time is largest (review22 M6): GEMMs and attention at
their rates plus the memory-bound kernels' bytes at HBM bandwidth (llmsizing.pointwise), not the one with
the most FLOPs. A catalogue case where the two differ: the Zero Bubble paper's 1.5B GPT (Qi et al. 2023,
Table 3: 22 layers, hidden 2,304, vocabulary 32,000) on 8 stages of an accounted split (Megatron-LM's
--account-for-embedding/loss-in-pipeline-split: (22 + 2) / 8 = 3 places a stage, the first and the last one
layer fewer). A middle stage holds 3 layers; the last 2 layers, the LM head (6 x 2,304 x 32,000 = 442
MFLOP a token) and the loss's softmax over 32,000 logits, 52 bytes each (1.66 MB a token): fewer FLOPs,
more time."""

import numpy as np
import pytest

from llmsizing.catalog import get_gpu, get_model
from llmsizing.comm import step_compute_time_s
from llmsizing.flops import stage_attention_flops_per_token, stage_flops_per_token
from llmsizing.kernels import compute_seconds, rates
from llmsizing.parallel import Parallel
from llmsizing.pointwise import pointwise_seconds, stage_candidates, stage_pointwise_bytes_per_token

SEQ, BATCH, M = 4096, 1, 8


def _stage_seconds(model, par, gpu, eff):
    """Each stage's seconds, from the library's pieces (FLOPs, attention FLOPs, memory-bound bytes)."""
    gemm, att = rates(model, gpu, tp=1, cp=1, batch=BATCH, seq=SEQ, dtype="bf16", kernel_efficiency=eff)
    tokens = BATCH * SEQ * M
    f = stage_flops_per_token(model, par, seq=SEQ)
    full = stage_attention_flops_per_token(model, par, seq=SEQ)
    causal = stage_attention_flops_per_token(model, par, seq=SEQ, causal=True)
    pw = stage_pointwise_bytes_per_token(model, par)
    return f, [compute_seconds(f[i], full[i], causal[i], tokens, gemm, att)
               + pointwise_seconds(pw[i], tokens, gpu.memory_bandwidth_gbps * 1e9) for i in range(len(f))]


def test_the_last_stage_is_slowest_by_time_though_a_middle_one_has_more_flops():
    m, g = get_model("zb-gpt-1.5b"), get_gpu("H100 SXM")
    par = Parallel(pp=8, account_for_embedding=True, account_for_loss=True)
    flops, seconds = _stage_seconds(m, par, g, 0.65)
    assert max(range(8), key=flops.__getitem__) == 1          # a middle stage: 3 layers
    assert max(range(8), key=seconds.__getitem__) == 7        # the last: 2 layers, the head and the loss
    step = step_compute_time_s(m, par, batch=BATCH, seq=SEQ, grad_accum=M, gpu=g, kernel_efficiency=0.65)
    assert step == max(seconds) and step > seconds[1] * 1.05


def test_stage_candidates_keep_every_stage_no_other_outweighs():
    # (GEMM FLOPs, causal FLOPs, MoE layers, bytes): the first is outweighed by the second; the third and the
    # fourth are equal (the first of them kept); the last is heavier in bytes only
    rows = [(1, 1, 0, 1), (2, 1, 0, 1), (2, 1, 0, 1), (1, 1, 0, 1), (1, 1, 0, 9)]
    assert stage_candidates(rows) == (1, 4)
    assert stage_candidates([(3, 2, 0, 5)]) == (0,)


@pytest.mark.parametrize("pp", [3, 4, 6, 8, 12])
def test_every_accounted_split_prices_its_slowest_stage(pp):
    m, g = get_model("zb-gpt-1.5b"), get_gpu("H100 SXM")
    par = Parallel(pp=pp, account_for_embedding=True, account_for_loss=True)
    _, seconds = _stage_seconds(m, par, g, 0.65)
    step = step_compute_time_s(m, par, batch=BATCH, seq=SEQ, grad_accum=M, gpu=g, kernel_efficiency=0.65)
    assert step == max(seconds)


def test_stage_candidates_match_the_pair_by_pair_definition():
    """Issue 38: stage_candidates compares all pairs at once; the oracle is its definition pair by pair
    (no other row at least as heavy in every piece, of equal rows the first), on random small-integer
    tables with many ties and repeats, and on tables with negative pieces, as arrays and as lists."""
    rng = np.random.default_rng(38)

    def by_pairs(rows):
        rows = [tuple(float(v) for v in r) for r in rows]

        def covers(j, i):
            return all(a >= c for a, c in zip(rows[j], rows[i])) and (rows[j] != rows[i] or j < i)

        return tuple(i for i in range(len(rows)) if not any(covers(j, i) for j in range(len(rows)) if j != i))

    for _ in range(300):
        n, k = rng.integers(1, 12), rng.integers(1, 6)
        rows = rng.integers(-2, 3, size=(n, k)).astype(float)
        assert stage_candidates(rows) == by_pairs(rows)
        # (an array is read as it is, speed28: lists, integer and float32 arrays give the same)
        assert stage_candidates(rows.tolist()) == stage_candidates(rows.astype(int)) == by_pairs(rows)
        assert stage_candidates(rows.astype(np.float32)) == by_pairs(rows)
    assert stage_candidates([]) == ()
    assert stage_candidates([(1.0, 2.0), (1.0, 2.0), (0.0, 3.0)]) == (0, 2)
