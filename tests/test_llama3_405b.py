"""Llama 3 405B as Meta ran it (issue 34): 8K pre-training without activation checkpointing.

Dubey et al. 2024, "The Llama 3 Herd of Models" (arXiv:2407.21783), Sec. 3.3.2 and Table 4: tp=8, cp=1,
pp=16, dp=64 (8,192 GPUs, 32 sequences per DP group) or dp=128 (16,384 GPUs, 16 per group), 8,192 tokens;
FSDP that shards the optimizer states and gradients but does not reshard the weights after the forward; fp32
gradient accumulation and fp32 reduce-scatter; one transformer layer fewer on the first and last stages, "the
first model chunk on the first stage has only the embedding, and the last model chunk on the last stage has
only output projection and loss": 126 + 2 = 128 places on 16 stages, one per chunk, so 8 chunks per stage
(Megatron-LM's --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split arithmetic).

Every expected number below is worked out by hand from the architecture (Llama 3.1 405B's config: hidden
16,384, 126 layers, 128 heads, 8 KV heads of 128, MLP 53,248, vocabulary 128,256) and Megatron-LM's schedule
formula, not read off the library.
"""

import pytest

from llmsizing.catalog import get_gpu, get_model
from llmsizing.memory import training_memory
from llmsizing.parallel import Parallel, pipeline_in_flight, stage_chunks

GiB = 2**30
L405 = get_model("llama-3.1-405b")
H100 = get_gpu("H100 SXM")
SEQ = 8192
RECIPE = "bf16-mixed-fp32-grads"      # "FP32 gradient accumulation ... reduce-scatter gradients in FP32"


def meta(dp: int, cp: int = 1) -> Parallel:
    # Sec. 3.3.2: gradients accumulated "over multiple micro-batches", N contiguous micro-batches per stage
    return Parallel(tp=8, pp=16, dp=dp, cp=cp, cp_comm="all_gather", zero=3, reshard_after_forward=False,
                    sp=True, virtual_stages=8, account_for_embedding=True, account_for_loss=True,
                    grad_reduce="chunk_run")


# ---------------------------------------------------------------- the layout's chunks
def test_chunks_embedding_and_loss_alone():
    ch = stage_chunks(L405.layers, meta(128))
    assert ch[0] == (0,) + (1,) * 7          # the first chunk of the first stage: the embedding only
    assert ch[-1] == (1,) * 7 + (0,)         # the last chunk of the last stage: output projection and loss
    assert all(c == (1,) * 8 for c in ch[1:-1])
    assert sum(map(sum, ch)) == 126


# ---------------------------------------------------------------- micro-batches in flight, by hand
# Megatron-LM, megatron/core/pipeline_parallel/schedules.py (commit d98e8a6), get_pp_rank_microbatches,
# lines 964-965: num_warmup = (pp - rank - 1) * 2
#                              + (num_model_chunks - 1) * microbatch_group_size_per_vp_stage
# (group size defaults to pp, model_parallel_config.py line 568), capped at
# num_microbatches * num_model_chunks (lines 976-977); then each 1F1B step runs one forward before one
# backward, so a rank holds warm-up + 1 chunk forwards at its peak. get_schedule_table (line 989) orders
# the forwards in groups of pp micro-batches, chunk by chunk; get_model_chunk_id (lines 1244-1249) runs
# the backwards through the chunks in reverse.
def test_in_flight_second_stage_dp64_by_hand():
    p, v, m, rank = 16, 8, 32, 1                 # 2,048 sequences / dp 64 = 32 micro-batches of one sequence
    warm = (p - rank - 1) * 2 + (v - 1) * p      # 28 + 112 = 140 chunk forwards
    held = warm + 1                              # 141 chunks of one layer each
    assert held == 141
    f = pipeline_in_flight(p, m, v, chunks=stage_chunks(L405.layers, meta(64)))
    assert f[1] * 8 == pytest.approx(141)        # in units of the stage's 8 layers: 17.625 micro-batches
    # the equal-chunk closed form agrees on a middle stage: p + (p - 1 - 2 rank) / v
    assert pipeline_in_flight(p, m, v)[1] == pytest.approx(16 + (16 - 1 - 2) / 8)


def test_in_flight_first_stage_embedding_chunk_by_hand():
    # first stage: warm-up 2 x 15 + 7 x 16 = 142 forwards, the table's first 128 being chunks 0..7 for
    # micro-batches 0..15 and then chunk 0 again for 16..29; forward 143 is chunk 0, micro-batch 30. Chunk 0
    # holds no transformer layer, so the layers held are chunks 1..7 x 16 micro-batches = 112; the steady
    # state then pairs each chunk-1 forward (+1 layer) with a chunk-7 backward (-1), so 112 is the peak.
    f = pipeline_in_flight(16, 32, 8, chunks=stage_chunks(L405.layers, meta(64)))
    assert f[0] * 7 == pytest.approx(7 * 16)
    # an even split's first stage (no embedding chunk, 8 equal chunks) holds 16 + 15/8 stage micro-batches
    assert pipeline_in_flight(16, 32, 8)[0] == pytest.approx(16 + 15 / 8)


def test_in_flight_dp128_every_micro_batch_in_warm_up():
    # 16 micro-batches: warm-up 2 (15 - rank) + 112 >= 16 x 8 = 128 for ranks 0..7, so they hold all 16
    f = pipeline_in_flight(16, 16, 8, chunks=stage_chunks(L405.layers, meta(128)))
    assert [round(x * n) for x, n in zip(f[:3], (7, 8, 8))] == [112, 128, 128]
    assert f[8] * 8 == pytest.approx(2 * 7 + 112 + 1)          # rank 8: 127 chunk forwards


# ---------------------------------------------------------------- memory per GPU, term by term
# parameters of one layer on one tensor-parallel rank: q and o 16,384^2 each, k and v 16,384 x 1,024 each,
# gate/up/down 16,384 x 53,248 each, all split by tp = 8; the two RMSNorm gains (16,384 each) replicated
LAYER_GPU = (2 * 16384**2 + 2 * 16384 * 1024 + 3 * 16384 * 53248) // 8 + 2 * 16384       # 398,491,648
STAGE_GPU = 8 * LAYER_GPU                                                                 # a middle stage
# bytes one layer saves for one micro-batch of one 8K sequence, tp = 8 with sequence parallelism, flash
# attention, no dropout (Korthikanti et al. 2022, Sec. 4, with a gated MLP and grouped-query attention), in
# bf16: the two norms' inputs, the QKV and MLP inputs (sharded, re-gathered in the backward), Q, the output
# of attention (the out-projection's input), each s h / t; K and V, 2 s x 1,024 / t; gate and up, 2 s f / t,
# and their product, s f / t; plus fp32 softmax statistics (16 heads x s) and the norms' fp32 rstd (2 x s/t)
SH_T = 8192 * 16384 // 8
LAYER_ACT = 2 * (6 * SH_T + 2 * 8192 * 1024 // 8 + 3 * 8192 * 53248 // 8) + 4 * 16 * 8192 + 2 * 4 * 8192 // 8


def test_layer_bytes_by_hand():
    assert LAYER_GPU == 398_491_648
    assert LAYER_ACT == 533_209_088


@pytest.mark.parametrize("dp, micro, held", [(128, 16, 128), (64, 32, 141)])
def test_memory_8k_by_hand(dp, micro, held):
    r = training_memory(L405, batch=1, seq=SEQ, grad_accum=micro, parallel=meta(dp), precision=RECIPE)
    assert r.stage == 1                           # the second stage: 8 layers, the most in flight
    weights = 2 * STAGE_GPU                                    # bf16, whole: not resharded after the forward
    grads = 4 * STAGE_GPU / dp                                 # fp32, sharded over dp
    optimizer = 12 * STAGE_GPU / dp                            # fp32 master + Adam's two moments, sharded
    acts = held * LAYER_ACT                                    # layers x micro-batches held
    working = 0.5 * LAYER_ACT                                  # one layer's backward (LAYER_WORKING_SET)
    unit_grad = 4 * max(LAYER_GPU, 128256 * 16384 / 8)         # a block's fp32 gradient (reduce-scattered)
    assert r.weights_bytes == pytest.approx(weights)
    assert r.gradients_bytes == pytest.approx(grads)
    assert r.optimizer_bytes == pytest.approx(optimizer)
    assert r.activations_bytes == pytest.approx(acts)
    peak = weights + grads + optimizer + acts + working + unit_grad
    assert r.peak_phase == "backward" and r.peak_bytes == pytest.approx(peak)
    assert r.total_bytes == pytest.approx(GiB + 1.08 * peak)   # the book's allowance: 1 GiB + 8%


def test_8k_fits_without_recomputation():
    cap = H100.memory_bytes
    big = training_memory(L405, batch=1, seq=SEQ, grad_accum=16, parallel=meta(128), precision=RECIPE)
    assert big.total_bytes <= cap                 # 16,384 GPUs: fits with the book's allowance
    small = training_memory(L405, batch=1, seq=SEQ, grad_accum=32, parallel=meta(64), precision=RECIPE)
    assert small.peak_bytes + GiB <= cap          # 8,192 GPUs: the tensors and the fixed 1 GiB fit...
    assert small.total_bytes > cap                # ...but not the unsourced 8% fragmentation guess on top
    # and the book's old reading (ZeRO-1 keeps the stage's whole bf16 gradients, 4 chunks) did not fit
    old = Parallel(tp=8, pp=16, dp=128, zero=1, sp=True, virtual_stages=4,
                   stage_layers=(7,) + (8,) * 14 + (7,))
    r = training_memory(L405, batch=1, seq=SEQ, grad_accum=16, parallel=old)
    assert r.total_bytes > cap
    assert r.gradients_bytes == pytest.approx(2 * STAGE_GPU)


def test_128k_with_cp16_fits_without_recomputation():
    r = training_memory(L405, batch=1, seq=131072, grad_accum=16, parallel=meta(8, cp=16), precision=RECIPE)
    assert r.total_bytes <= H100.memory_bytes


def test_undeallocated_outputs_by_hand():
    par = meta(64)
    keep = Parallel(**{**{f: getattr(par, f) for f in par.__dataclass_fields__},
                       "deallocate_pipeline_outputs": False})
    a = training_memory(L405, batch=1, seq=SEQ, grad_accum=32, parallel=par, precision=RECIPE)
    b = training_memory(L405, batch=1, seq=SEQ, grad_accum=32, parallel=keep, precision=RECIPE)
    # each held chunk keeps its output: bf16 x s x h / tp (sequence parallel), 141 chunks on the second stage
    assert b.activations_bytes - a.activations_bytes == pytest.approx(141 * 2 * SH_T)


# ---------------------------------------------------------------- old calls and bad inputs
def test_defaults_unchanged():
    p = Parallel(tp=8, pp=4)
    assert not p.account_for_embedding and not p.account_for_loss and p.deallocate_pipeline_outputs
    assert pipeline_in_flight(4, 8, 2) == pipeline_in_flight(4, 8, 2, chunks=((2, 2),) * 4)


@pytest.mark.parametrize("kw, word", [
    (dict(account_for_embedding=True), "pp > 1"),
    (dict(pp=2, account_for_loss="yes"), "account_for_loss"),
    (dict(pp=2, deallocate_pipeline_outputs=1.5), "deallocate_pipeline_outputs"),
])
def test_bad_parallel(kw, word):
    with pytest.raises((ValueError, TypeError), match=word):
        Parallel(**kw)


def test_bad_split_refused():
    # 128 places / 16 stages = 8: three chunks per stage cannot split them (Megatron-LM asserts the same)
    with pytest.raises(ValueError, match="virtual_stages=3"):
        training_memory(L405, batch=1, seq=SEQ, grad_accum=16, parallel=Parallel(
            tp=8, pp=16, sp=True, virtual_stages=3, account_for_embedding=True, account_for_loss=True))
    with pytest.raises(ValueError, match="pp=5"):
        training_memory(L405, batch=1, seq=SEQ, grad_accum=16, parallel=Parallel(
            tp=8, pp=5, sp=True, account_for_embedding=True))


@pytest.mark.parametrize("chunks", [((1, 1),) * 3, ((1,),) * 4, ((1, -1),) * 4])
def test_bad_chunks(chunks):
    with pytest.raises(ValueError, match="chunks"):
        pipeline_in_flight(4, 8, 2, chunks=chunks)


def test_named_layout_is_the_papers():
    from llmsizing import LLAMA3_RECIPE, llama3_405b_layout

    assert llama3_405b_layout(64) == meta(64) and llama3_405b_layout(8, cp=16) == meta(8, cp=16)
    assert LLAMA3_RECIPE == RECIPE
    with pytest.raises(ValueError, match="dp"):
        llama3_405b_layout(0)
