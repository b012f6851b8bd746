"""training_memory(schedule="dualpipe"): DeepSeek-V3 report (arXiv:2412.19437), Sec. 3.2.1, Table 2:

    method    parameter   activation
    1F1B      1x          PP
    ZB1P      1x          PP
    DualPipe  2x          PP + 1

(issue 35, session 42). The expected values are worked out by hand below for a small Llama-style model."""

from __future__ import annotations

import pytest

from llmsizing.job import Job
from llmsizing.memory import training_memory
from llmsizing.model import Model
from llmsizing.parallel import Parallel

# 8 layers, h = 64, 4 heads (no GQA), SwiGLU f = 256, RMSNorm, untied embedding and head, vocab 1000
TINY = Model("dualpipe-tiny", layers=8, hidden=64, heads=4, ffn_hidden=256, vocab=1000)
H, F, V, SEQ = 64, 256, 1000, 128
PP, M = 4, 8                                   # 2 layers a stage; DualPipe needs m even and >= 2 pp
LAYER = 4 * H * H + 3 * H * F + 2 * H          # q, k, v, o; gate, up, down; two RMSNorm gains = 65,664
PAR = Parallel(pp=PP)


def _mem(schedule, **kw):
    return training_memory(TINY, batch=1, seq=SEQ, parallel=PAR, grad_accum=M, schedule=schedule, **kw)


def _first(schedule, **kw):
    """Stage 0 (1F1B) or rank 0 (DualPipe), whichever is the most loaded."""
    return _mem(schedule, _all_stages=True, **kw)[0]


def test_dualpipe_holds_two_chunks_of_parameters():
    """Table 2's "2x": rank 0 holds stage 0 (2 layers + embedding) and stage 3 (2 layers + final norm +
    head); rank 1 stages 1 and 2 (4 layers). 1F1B's stage 0 holds 2 layers + embedding."""
    one, dual = _mem("1f1b"), _mem("dualpipe")
    assert one.stages[0]["params"] == 2 * LAYER + V * H                                # 195,328
    assert [r["params"] for r in dual.stages] == [4 * LAYER + 2 * V * H + H, 4 * LAYER]  # 390,720; 262,656
    assert [r["stage"] for r in dual.stages] == [0, 1]                  # ranks pp/2 .. pp-1 mirror these
    assert dual.weights_bytes > 1.9 * one.weights_bytes


def test_dualpipe_holds_pp_plus_one_micro_batches():
    """Table 2's activations: PP (1F1B, ZB1P) against PP + 1 (DualPipe) micro-batches, on every rank."""
    assert _mem("1f1b").in_flight == PP
    assert [r["micro-batches in flight"] for r in _mem("dualpipe").stages] == [PP + 1, PP + 1]


def test_dualpipe_keeps_pp_plus_one_stages_of_layer_inputs_under_full_recomputation():
    """Full recomputation keeps each layer's input, batch x seq x h in bf16 = 1 x 128 x 64 x 2 = 16,384
    bytes per layer and micro-batch: DualPipe's rank 0 keeps (PP + 1) micro-batches x 2 layers of them, and
    rebuilds one layer at a time as 1F1B does (not one per chunk)."""
    one, dual = _first("1f1b", recompute="full"), _first("dualpipe", recompute="full")
    assert (one.stage, one.in_flight, dual.stage, dual.in_flight) == (0, PP, 0, PP + 1)
    kept = lambda a: a.layers_bytes - a.rebuilt_bytes                         # noqa: E731
    assert kept(one.activations) == PP * 2 * SEQ * H * 2                        # 131,072
    assert kept(dual.activations) == (PP + 1) * 2 * SEQ * H * 2                 # 163,840
    assert dual.activations.rebuilt_bytes == one.activations.rebuilt_bytes > 0


def test_dualpipe_layers_activations_are_pp_plus_one_over_pp_of_1f1b():
    """Without recomputation an even split's stage keeps X per micro-batch: 1F1B's stage 0 PP X, DualPipe's
    rank 0 (PP - 0) X + (0 + 1) X = (PP + 1) X; the embedding's (stage 0's, PP in flight) and the head's
    logits (once) are the same on both."""
    one, dual = _first("1f1b").activations, _first("dualpipe").activations
    assert dual.layers_bytes == pytest.approx(one.layers_bytes * (PP + 1) / PP, rel=1e-12)
    assert dual.embedding_bytes == one.embedding_bytes > 0
    assert dual.logits_bytes > 0 and one.logits_bytes == 0        # 1F1B's stage 0 has no head


def test_zb1p_is_counted_as_1f1b_and_the_default_is_unchanged():
    """Table 2: ZB1P's parameter and activation columns are 1F1B's."""
    one, zb = _mem("1f1b"), _mem("zb1p")
    assert zb.total_bytes == one.total_bytes and zb.stages == one.stages
    old = training_memory(TINY, batch=1, seq=SEQ, parallel=PAR, grad_accum=M)
    assert old.total_bytes == one.total_bytes


def test_a_dualpipe_job_prices_its_memory():
    job = Job(TINY, "H100 SXM", SEQ, PAR, grad_accum=M, schedule="dualpipe")
    assert training_memory(job).total_bytes == _mem("dualpipe").total_bytes
    assert "schedule" not in Job(TINY, "H100 SXM", SEQ, PAR, grad_accum=M).kwargs("memory")


@pytest.mark.parametrize("kw, exc, match", [
    (dict(schedule="gpipe"), ValueError, "schedule"),
    (dict(schedule="dualpipe", parallel=Parallel(pp=3)), ValueError, "even parallel.pp"),
    (dict(schedule="dualpipe", parallel=Parallel()), ValueError, "even parallel.pp"),
    (dict(schedule="dualpipe", grad_accum=6), ValueError, "grad_accum >= 2 pp = 8"),
    (dict(schedule="dualpipe", grad_accum=9), ValueError, "even grad_accum"),
    (dict(schedule="dualpipe", parallel=Parallel(pp=4, virtual_stages=2)), ValueError, "virtual_stages"),
    (dict(schedule="dualpipe", recompute="full", recompute_layers=1), ValueError, "recompute_layers"),
])
def test_dualpipe_refuses_what_it_does_not_model(kw, exc, match):
    args = {**dict(batch=1, seq=SEQ, parallel=PAR, grad_accum=M), **kw}
    with pytest.raises(exc, match=match):
        training_memory(TINY, **args)


def test_training_memory_agrees_with_deepseek_memory_on_dualpipes_states_and_in_flight():
    """DeepSeek-V3's own plan (chapter 18: 16 ranks, the balanced split, FP8 recipe, one MTP module):
    deepseek_memory pairs its chunks itself (rank i: chunks i and 15 - i); training_memory's DualPipe ranks
    hold the same model states byte for byte and the same pp + 1 = 17 micro-batches."""
    from dataclasses import replace

    from llmsizing.deepseek import (DEEPSEEK_V3_BALANCED_SPLIT, DEEPSEEK_V3_LAYOUT, DEEPSEEK_V3_MICRO_BATCHES,
                                    deepseek_memory)

    par = replace(DEEPSEEK_V3_LAYOUT, stage_layers=DEEPSEEK_V3_BALANCED_SPLIT)
    ds = deepseek_memory("deepseek-v3", par)
    ours = training_memory("deepseek-v3", batch=1, seq=4096, parallel=par,
                           grad_accum=DEEPSEEK_V3_MICRO_BATCHES, precision="fp8-deepseek", mtp_depth=1,
                           schedule="dualpipe", _all_stages=True)
    assert len(ours) == len(ds.ranks) == 8
    for a, b in zip(ds.ranks, ours):
        assert (a["rank"], a["chunks"]) == (b.stage, (b.stage, 15 - b.stage))
        assert b.states.total_bytes == a["states"] and b.in_flight == sum(a["in_flight"]) == 17
