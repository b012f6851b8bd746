"""min_gpus searches the pipeline degrees plan() searches (issue 35: one answer per question): for a dense
model the divisors of the layers (Megatron-LM's even split) and those of ``layers + 2`` (the embedding and
the loss each counted as a layer's place, ``--account-for-embedding/loss-in-pipeline-split``; Dubey et
al. 2024, Sec. 3.3.2), for a mixture of experts the latter only with ``accounted_split=True``, as ``plan()``.

What is checked, and where the expected values come from:

* GPT-3 175B (96 layers, h = 12,288, 4h MLP, biases, tied embeddings, 2,048 learned positions) on H100s,
  4,096 tokens, micro-batch 1, 8 micro-batches, no recomputation: 98 = 7 x 14, so tp 8 x pp 7 = 56 GPUs
  splits 13, five 14s, 13, which no even split gives (7 does not divide 96). By hand: a layer's parameters on
  one of 8 tensor-parallel ranks (column-parallel weights and biases split, the row-parallel biases and the
  LayerNorms whole) 12 h^2 / 8 + 7 h / 8 + 6 h = 226,576,896; the first stage adds the vocabulary-parallel
  embedding 50,257 h / 8 and the whole position table 2,048 h, the last the tied head's copy and the final
  LayerNorm; 16 bytes a parameter (BF16 weights and gradients, FP32 master and Adam's two moments). 1F1B
  keeps ``pp - s`` micro-batches in flight on stage ``s``: 7 x 13 = 91 layers' activations on the first,
  6 x 14 = 84 on the second. A layer's activations with sequence parallelism are at least 32 sbh / t bytes
  (Korthikanti et al. 2022, Table 2, without the two dropout masks of its 34 and, with flash attention, the
  5as/h scores) and at most 34 sbh / t (flash's log-sum-exp, 4 a s b / t bytes, is below 2 sbh / t). So the
  second stage outweighs the first (1.99 GB more states, at most 7 x 34 sbh / t = 1.50 GB fewer
  activations), and it fits: its peak is at most the states plus 85 layers' 34 sbh / t (the 84 in flight and
  one in its backward), 68.94 GB, and 1 GiB + 1.08 x that is 75.52 GB, below 90% of 80 GiB (76.97 GB). With
  tp 8 the next fewer GPUs in a pipeline, pp 6 (48 GPUs), hold 16 layers and the embedding on the first stage
  and 96 layers' activations: 59.64 GB of states + 96 x 32 sbh / t = 78.97 GB before any allowance, over the
  limit. Before this change min_gpus answered 64 (tp 8, pp 8).
* Llama 3.1 405B at 32,768 tokens with full recomputation: Meta's split, 126 layers on 16 stages of 7,
  fourteen 8s, 7 (Dubey et al. 2024, Sec. 3.3.2), tp 8, 128 GPUs, its per-stage parameters by hand; before,
  144 (pp 18, seven layers a stage).
* the count is never above the fewest GPUs of plan()'s rows with the same micro-batch, recomputation and no
  context parallelism, and equals it where plan() has the answer's layout (a global batch of ``batch x 64 x
  dp``; 64 micro-batches, at least every ``pp`` plan() tries there, so both keep ``pp`` in flight): ten
  models; before, GPT-3 175B (64 vs 56), Qwen-14B (8 vs 6) and Llama 3.1 405B (144 vs 128) were above.
* a mixture of experts: the default searches the even splits only (as plan()'s default), and
  ``accounted_split=True`` plan(accounted_split=True)'s too: Qwen3-30B-A3B under DualPipe on 20 H100s, 48
  layers on 10 stages of 4, eight 5s, 4 (50 = 10 x 5), where the default needs 24.
"""

from __future__ import annotations

import pytest

import llmsizing as L
from llmsizing.fewest_gpus import dualpipe_fewest_accum, fits_on, min_gpus
from llmsizing.memory import USABLE_FRACTION, training_memory
from llmsizing.parallel import ACCOUNTED, Parallel, layers_per_stage

H100 = "H100 SXM"
LIMIT = USABLE_FRACTION * 80 * 2**30
GIB = 2**30


def _states(r):
    s = r.states
    return s.weights_bytes + s.gradients_bytes + s.master_bytes + s.optimizer_state_bytes


def test_gpt3_175b_on_seven_accounted_stages_by_hand():
    h, s, t, vocab = 12288, 4096, 8, 50257
    layer = 12 * h * h // t + 7 * h // t + 6 * h
    assert layer == 226_576_896
    first, mid, last = 13 * layer + vocab * h // t + 2048 * h, 14 * layer, 13 * layer + vocab * h // t + 2 * h
    par = Parallel(tp=8, pp=7, dp=1, zero=0, sp=True, **ACCOUNTED)
    assert list(layers_per_stage(96, par)) == [13, 14, 14, 14, 14, 14, 13]
    runs = training_memory("gpt3-175b", parallel=par, batch=1, seq=s, grad_accum=8, _all_stages=True)
    assert [_states(r) for r in runs] == pytest.approx([16 * first] + [16 * mid] * 5 + [16 * last], rel=1e-12)
    assert [r.activations.layer_count for r in runs] == [91, 84, 70, 56, 42, 28, 13]
    lo, hi = 32 * s * h // t, 34 * s * h // t                   # a layer's activations, bytes
    assert 16 * (mid - first) - 7 * hi > 0.49e9                 # the second stage is the heavier
    assert runs[1].total_bytes > runs[0].total_bytes
    peak_hi = 16 * mid + 85 * hi
    assert round(peak_hi / 1e9, 2) == 68.94
    assert GIB + 1.08 * peak_hi < LIMIT
    assert 16 * mid + 84 * lo <= (runs[1].total_bytes - GIB) / 1.08 <= peak_hi
    # tp 8 on fewer GPUs: pp 6 (16 layers a stage) does not fit even without an allowance
    six = 16 * (16 * layer + vocab * h // t + 2048 * h) + 6 * 16 * lo
    assert round(six / 1e9, 2) == 78.97 and six > LIMIT

    best = min_gpus("gpt3-175b", H100, batch=1, seq=s, grad_accum=8)
    assert best.gpus == 56                                      # (64, tp 8 pp 8, before)
    p = best.parallel
    assert (p.tp, p.pp, p.dp, p.account_for_embedding, p.account_for_loss) == (8, 7, 1, True, True)
    assert best.total_bytes == max(r.total_bytes for r in runs) == runs[1].total_bytes


def test_no_gpt3_layout_on_fewer_than_56_h100s_holds_the_step():
    """Every layout min_gpus may build on fewer GPUs (tp from the node's 8 that divides the 96 heads, pp
    among the even and accounted splits, ZeRO 0-3, 2 and 3 without a pipeline), weighed one by one."""
    M = L.get_model("gpt3-175b")
    pps = [p for p in range(1, 56) if 96 % p == 0 or (98 % p == 0 and p <= 96)]
    weighed = 0
    for tp in (1, 2, 4, 8):
        for pp in pps:
            for dp in range(1, 55 // (tp * pp) + 1):
                for zero in (0, 1) if pp > 1 else (0, 1, 2, 3):
                    split = {} if M.layers % pp == 0 else ACCOUNTED
                    par = Parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=tp > 1, **split)
                    mem = training_memory(M, parallel=par, batch=1, seq=4096, grad_accum=8)
                    assert mem.total_bytes > LIMIT, par
                    weighed += 1
    assert weighed > 100


def test_llama_405b_on_metas_sixteen_stages_by_hand():
    h, t = 16384, 8
    layer = (2 * h * h + 2 * h * 8 * 128 + 3 * h * 53248) // t + 2 * h
    assert layer == 398_491_648
    best = min_gpus("llama-3.1-405b", H100, batch=1, seq=32768, grad_accum=64, recompute="full")
    p = best.parallel
    assert (best.gpus, p.tp, p.pp, p.dp, p.account_for_embedding) == (128, 8, 16, 1, True)   # (144 before)
    assert list(layers_per_stage(126, p)) == [7] + [8] * 14 + [7]
    runs = training_memory("llama-3.1-405b", parallel=p, batch=1, seq=32768, grad_accum=64, recompute="full",
                           _all_stages=True)
    emb = 128256 * h // t
    assert [r.states.weights_bytes for r in runs] == pytest.approx(
        [2 * (7 * layer + emb)] + [2 * 8 * layer] * 14 + [2 * (7 * layer + emb + h)], rel=1e-12)
    assert [r.activations.layer_count for r in runs] == [16 * 7] + [(16 - s) * 8 for s in range(1, 15)] + [7]
    assert best.total_bytes == max(r.total_bytes for r in runs) <= LIMIT


#: (model, seq, micro-batch, recomputation): ten models, the three that moved among them
VS_PLAN = [("gpt3-175b", 4096, 1, "none"), ("qwen-14b", 8192, 1, "selective"),
           ("llama-3.1-405b", 32768, 1, "full"), ("llama-3-8b", 8192, 1, "selective"),
           ("llama-2-13b", 4096, 2, "full"), ("llama-3-70b", 8192, 1, "selective"),
           ("qwen2-7b", 4096, 1, "none"), ("bloom-176b", 32768, 1, "full"), ("gpt-39b", 4096, 2, "full"),
           ("zb-gpt-28.3b", 4096, 1, "none"), ("qwen3-30b-a3b", 8192, 1, "selective"),
           ("mixtral-8x7b", 4096, 1, "none")]


@pytest.mark.parametrize("model,seq,batch,rc", VS_PLAN)
def test_never_above_plans_fewest(model, seq, batch, rc):
    m = 64
    best = min_gpus(model, H100, batch=batch, seq=seq, grad_accum=m, recompute=rc)
    df = L.plan(model, tokens=1e12, gpus=(H100,), seq=seq, global_batch=batch * m * best.parallel.dp,
                max_gpus=best.gpus, micro_batches=(batch,), recomputes=(rc,), cp_degrees=(1,), explain=False)
    assert len(df) and df["n_gpus"].min() == best.gpus


def test_a_mixture_of_experts_accounted_split_as_plans():
    kw = dict(batch=1, seq=4096, schedule="dualpipe", grad_accum=dualpipe_fewest_accum("qwen3-30b-a3b"))
    plain = min_gpus("qwen3-30b-a3b", H100, **kw)
    acc = min_gpus("qwen3-30b-a3b", H100, accounted_split=True, **kw)
    assert plain.gpus == 24 and not plain.parallel.account_for_embedding       # (the default: as before)
    p = acc.parallel
    assert (acc.gpus, p.tp, p.pp, p.dp) == (20, 2, 10, 1)
    assert list(layers_per_stage(48, p)) == [4] + [5] * 8 + [4]
    df = L.plan("qwen3-30b-a3b", tokens=1e12, gpus=(H100,), seq=4096, global_batch=kw["grad_accum"] * 8,
                max_gpus=24, micro_batches=(1,), recomputes=("none",), cp_degrees=(1,), max_pp=12,
                schedule="dualpipe", accounted_split=True, explain=False)
    assert df["n_gpus"].min() == 20


@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "mixtral-8x7b"])
def test_a_mixture_of_experts_accounted_split_never_above_plans(model):
    """1F1B with ``accounted_split=True`` on both sides (Qwen3-30B-A3B: pp 5, 10, 25 besides 48's divisors;
    Mixtral's 32 layers: 34 = 2 x 17, pp 17)."""
    m = 64
    best = min_gpus(model, H100, batch=1, seq=8192, grad_accum=m, recompute="selective", accounted_split=True)
    df = L.plan(model, tokens=1e12, gpus=(H100,), seq=8192, global_batch=m * best.parallel.dp,
                max_gpus=best.gpus, micro_batches=(1,), recomputes=("selective",), cp_degrees=(1,),
                accounted_split=True, explain=False)
    assert len(df) and df["n_gpus"].min() == best.gpus


def test_accounted_split_is_a_bool():
    with pytest.raises((TypeError, ValueError), match="accounted_split"):
        min_gpus("qwen3-30b-a3b", H100, batch=1, seq=4096, accounted_split="yes")


def test_fits_on_tries_the_accounted_splits_too():
    """Qwen-14B (40 layers) at 32,768 tokens with full recomputation: 42 = 3 x 14, tp 2 x pp 3 (13, 14, 13) on
    6 H100s is min_gpus's answer now (8 before, tp 8), and fits_on, "by the test min_gpus applies", says so;
    on 63 GPUs (no even-split tp x pp of a power-of-two tp divides 63 but pp 1) the accounted pp 3 and 21 are
    tried too."""
    best = min_gpus("qwen-14b", H100, batch=1, seq=32768, recompute="full")
    p = best.parallel
    assert (best.gpus, p.tp, p.pp, p.dp, p.account_for_embedding) == (6, 2, 3, 1, True)
    assert list(layers_per_stage(40, p)) == [13, 14, 13]
    assert fits_on("qwen-14b", H100, 6, seq=32768) and not fits_on("qwen-14b", H100, 5, seq=32768)
    assert fits_on("qwen-14b", H100, 63, seq=32768)
