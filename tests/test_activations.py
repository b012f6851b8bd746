"""Activation memory (chapter 4) against Korthikanti et al. 2022 and hand-written op-by-op counts, plus the
invariants the chapter relies on.

Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", Sec. 4.1 and
Table 2), for a GPT layer in 16-bit with dropout, eager attention, 1-byte dropout masks:

* no parallelism:                   s*b*h*(34 + 5*a*s/h)
* tensor parallel t:                s*b*h*(10 + 24/t + 5*a*s/(h*t))
* tensor + sequence parallel:       s*b*h*(34 + 5*a*s/h) / t
* tensor (+ sequence) + selective:  s*b*h*(10 + 24/t)   (s*b*h*34/t with SP)
* full recomputation:               2*s*b*h per layer

The paper leaves out the LayerNorms' fp32 statistics: each LayerNorm keeps a mean and a reciprocal standard
deviation per token, 2 x 4 bytes x s*b, so the two LayerNorms of a layer add 16*s*b bytes. They are replicated
under plain TP (every rank normalises the full sequence) and split by SP (each rank normalises s/t tokens).
"""

from __future__ import annotations

import math

import pytest
from conftest import small_models
from hypothesis import assume, given
from hypothesis import strategies as st

from llmsizing import Model, activation_memory, get_model
from llmsizing.activations import ACT_COMPONENTS, korthikanti_bytes_per_layer, layer_terms


def gpt_layer_model(h: int, a: int, layers: int = 1, vocab: int = 50257) -> Model:
    """Korthikanti's setting: LayerNorm, GeLU MLP with f = 4h, biases, learned positions."""
    return Model("gpt-like", layers=layers, hidden=h, heads=a, ffn_hidden=4 * h, vocab=vocab, gated_mlp=False,
                 tied_embeddings=True, norm="layernorm", bias=True, learned_pos=True, max_seq=2048)


KORTHIKANTI = dict(dtype="bf16", attention="eager", dropout=True, mask_bytes=1.0)
NORM_STATS = 2 * 2 * 4          # 2 LayerNorms x (mean, rstd) x fp32, per token

# (hidden, heads, seq, batch): GPT-3 175B as in the paper's Sec. 4, GPT-2 small, and a tiny layer
CASES = [(12288, 96, 2048, 1), (768, 12, 1024, 4), (64, 4, 32, 3)]


# ----------------------------------------------------------------------------- Korthikanti's closed forms
def test_gpt3_quadratic_term_dominates():
    """Korthikanti Sec. 4.1: for GPT-3 175B (a = 96, h = 12288, s = 2048) 5as/h = 80 > 34."""
    a, h, s = 96, 12288, 2048
    assert 5 * a * s / h == 80


@pytest.mark.parametrize("h,a,s,b", CASES)
def test_simple_case_34_plus_5as_over_h(h, a, s, b):
    m = gpt_layer_model(h, a)
    act = activation_memory(m, batch=b, seq=s, **KORTHIKANTI)
    paper = s * b * h * (34 + 5 * a * s / h)
    assert act.per_layer_bytes == pytest.approx(paper + NORM_STATS * s * b, rel=1e-12)
    assert korthikanti_bytes_per_layer(m, batch=b, seq=s) == pytest.approx(paper, rel=1e-12)


@pytest.mark.parametrize("t", [2, 4])
@pytest.mark.parametrize("h,a,s,b", CASES)
def test_tensor_parallel_10_plus_24_over_t(h, a, s, b, t):
    m = gpt_layer_model(h, a)
    act = activation_memory(m, batch=b, seq=s, tp=t, **KORTHIKANTI)
    paper = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    assert act.per_layer_bytes == pytest.approx(paper + NORM_STATS * s * b, rel=1e-12)   # stats replicated
    assert korthikanti_bytes_per_layer(m, batch=b, seq=s, tp=t) == pytest.approx(paper, rel=1e-12)


@pytest.mark.parametrize("t", [2, 4])
@pytest.mark.parametrize("h,a,s,b", CASES)
def test_sequence_parallel_divides_by_t(h, a, s, b, t):
    m = gpt_layer_model(h, a)
    act = activation_memory(m, batch=b, seq=s, tp=t, sp=True, **KORTHIKANTI)
    paper = s * b * h * (34 + 5 * a * s / h) / t
    assert act.per_layer_bytes == pytest.approx(paper + NORM_STATS * s * b / t, rel=1e-12)
    assert korthikanti_bytes_per_layer(m, batch=b, seq=s, tp=t, sp=True) == pytest.approx(paper, rel=1e-12)


@pytest.mark.parametrize("h,a,s,b", CASES)
def test_selective_recompute_table2(h, a, s, b):
    m = gpt_layer_model(h, a)
    sel = dict(KORTHIKANTI, recompute="selective")
    assert activation_memory(m, batch=b, seq=s, **sel).per_layer_bytes == \
        pytest.approx(34 * s * b * h + NORM_STATS * s * b, rel=1e-12)
    for t in (2, 4):
        assert activation_memory(m, batch=b, seq=s, tp=t, **sel).per_layer_bytes == \
            pytest.approx(s * b * h * (10 + 24 / t) + NORM_STATS * s * b, rel=1e-12)
        assert activation_memory(m, batch=b, seq=s, tp=t, sp=True, **sel).per_layer_bytes == \
            pytest.approx((34 * s * b * h + NORM_STATS * s * b) / t, rel=1e-12)
    # the peak adds what ONE layer rebuilds during its backward: its 5as^2b of scores, probabilities and mask
    L = 6
    mL = gpt_layer_model(h, a, layers=L)
    assert activation_memory(mL, batch=b, seq=s, **sel).layers_bytes == \
        pytest.approx(L * (34 * s * b * h + NORM_STATS * s * b) + 5 * a * s * s * b, rel=1e-12)


@pytest.mark.parametrize("h,a,s,b", CASES)
def test_full_recompute_keeps_2sbh_per_layer(h, a, s, b):
    L = 6
    m = gpt_layer_model(h, a, layers=L)
    full = activation_memory(m, batch=b, seq=s, recompute="full", **KORTHIKANTI)
    assert full.per_layer_bytes == 2 * s * b * h
    # plus one layer's complete working set while it is recomputed in backward, less its first norm's
    # input (2sbh), which is the checkpoint itself and already counted
    one_layer = s * b * h * (34 + 5 * a * s / h) + NORM_STATS * s * b
    assert full.layers_bytes == pytest.approx(L * 2 * s * b * h + one_layer - 2 * s * b * h, rel=1e-12)
    # with SP the checkpointed input is the sequence-sharded hidden state (as Megatron stores it)
    assert activation_memory(m, batch=b, seq=s, recompute="full", tp=2, sp=True,
                             **KORTHIKANTI).per_layer_bytes == 2 * s * b * h / 2


# ----------------------------------------------------------------------------- generalisations, by hand
@pytest.mark.parametrize("h,a,s,b", CASES)
def test_flash_drops_the_quadratic_terms(h, a, s, b):
    """Flash attention (Dao et al. 2022) keeps Q, K, V, the output and an fp32 log-sum-exp per row and
    regenerates the attention-dropout mask from the RNG state: 34sbh (all 11 + 19 + 4 linear terms stay)
    + 4*a*s*b, nothing in s^2."""
    m = gpt_layer_model(h, a)
    act = activation_memory(m, batch=b, seq=s, **dict(KORTHIKANTI, attention="flash"))
    assert act.per_layer_bytes == pytest.approx(34 * s * b * h + 4 * a * s * b + NORM_STATS * s * b, rel=1e-12)


@pytest.mark.parametrize("h,a,s,b", CASES)
def test_no_dropout(h, a, s, b):
    """Without dropout: no residual masks (2 x sbh x 1 byte), no attention mask (as^2b x 1 byte) and no
    dropout output (as^2b x 2 bytes): sbh(34 - 2) + as^2b(5 - 3)."""
    m = gpt_layer_model(h, a)
    act = activation_memory(m, batch=b, seq=s, **dict(KORTHIKANTI, dropout=False))
    assert act.per_layer_bytes == pytest.approx(32 * s * b * h + 2 * a * s * s * b + NORM_STATS * s * b,
                                                rel=1e-12)


@pytest.mark.parametrize("h,a,s,b", CASES)
def test_fp32_doubles_the_16bit_tensors_only(h, a, s, b):
    """In fp32 the 16-bit tensors (32sbh + 4as^2b) double; masks (2sbh + as^2b at 1 byte) and the fp32
    statistics do not: 66sbh + 9as^2b."""
    m = gpt_layer_model(h, a)
    act = activation_memory(m, batch=b, seq=s, **dict(KORTHIKANTI, dtype="fp32"))
    assert act.per_layer_bytes == pytest.approx(
        2 * (32 * s * b * h + 4 * a * s * s * b) + (2 * s * b * h + a * s * s * b) + NORM_STATS * s * b, rel=1e-12)


def test_cpu_style_masks():
    """mask_bytes=2 (a bf16 mask as CPU PyTorch keeps it): masks 2sbh + as^2b cost twice as much."""
    h, a, s, b = 768, 12, 256, 2
    m = gpt_layer_model(h, a)
    one = activation_memory(m, batch=b, seq=s, **KORTHIKANTI).per_layer_bytes
    two = activation_memory(m, batch=b, seq=s, **dict(KORTHIKANTI, mask_bytes=2.0)).per_layer_bytes
    assert two - one == pytest.approx(2 * s * b * h + a * s * s * b, rel=1e-12)


def test_llama_layer_by_hand():
    """Llama-2-7B layer, bf16, flash, no dropout, op by op (Megatron-LM's fused SwiGLU, RMSNorm with an fp32
    rstd): 2 RMSNorm inputs 2 x 2sbh + 2 x 4sb; QKV input 2sbh; Q, K, V 3 x 2sbh (32 KV heads); log-sum-exp
    4 x a x s x b; o_proj input 2sbh; MLP input 2sbh; the fused SwiGLU's [gate | up] input and fc2's input, the
    product, 3 x 2sbf (``SwiGLUFunction`` saves only its input; issue 26). Hugging Face's unfused SwiGLU also keeps
    SiLU(gate): 4 x 2sbf."""
    m = get_model("llama-2-7b")
    h, a, f, s, b = 4096, 32, 11008, 4096, 1
    sb = s * b
    expected = 2 * 2 * sb * h + 2 * 4 * sb + 2 * sb * h + 3 * 2 * sb * h + 4 * a * s * b + 2 * sb * h \
        + 2 * sb * h + 3 * 2 * sb * f
    assert activation_memory(m, batch=b, seq=s).per_layer_bytes == expected
    hf = layer_terms(m, batch=b, seq=s, stack="hf")["mlp"]
    assert hf - layer_terms(m, batch=b, seq=s)["mlp"] == 2 * sb * f


def test_gqa_layer_by_hand():
    """Mistral-7B: K and V have 8 x 128 = 1024 columns, not 4096 (the fused SwiGLU keeps 3 f-wide tensors)."""
    h, a, g, d, f, s, b = 4096, 32, 8, 128, 14336, 1024, 2
    sb = s * b
    expected = (2 * 2 * sb * h + 2 * 4 * sb) + 2 * sb * h + (2 * sb * a * d + 2 * 2 * sb * g * d) \
        + 4 * a * s * b + 2 * sb * h + 2 * sb * h + 3 * 2 * sb * f
    assert activation_memory("mistral-7b", batch=b, seq=s).per_layer_bytes == expected


def test_logits_and_embedding_by_hand():
    """Logits: fp32 log-probabilities b*s*V*4 + final-norm input 2sbh + its stats + LM-head input 2sbh
    + int64 targets 8sb. Embedding: int64 token ids 8sb (+ a 1-byte dropout mask sbh)."""
    s, b = 2048, 2
    sb = s * b
    m = get_model("llama-3-8b")                      # RMSNorm: one fp32 statistic per token
    act = activation_memory(m, batch=b, seq=s)
    assert act.logits_bytes == 4 * sb * 128256 + 2 * sb * 4096 + 4 * sb + 2 * sb * 4096 + 8 * sb
    assert act.embedding_bytes == 8 * sb
    g = get_model("gpt2")                            # LayerNorm: two
    act = activation_memory(g, batch=b, seq=s, dropout=True)
    assert act.logits_bytes == 4 * sb * 50257 + 2 * sb * 768 + 8 * sb + 2 * sb * 768 + 8 * sb
    assert act.embedding_bytes == 8 * sb + sb * 768
    bf = activation_memory(m, batch=b, seq=s, logits_dtype="bf16")
    assert act.logits_bytes - 0 > 0 and bf.logits_bytes == pytest.approx(
        activation_memory(m, batch=b, seq=s).logits_bytes - 2 * sb * 128256)


def test_128k_vocab_logits_are_the_largest_tensor():
    """Llama-3-8B at 8K tokens: the fp32 log-probabilities (4 x s x 128256) outweigh a whole layer."""
    act = activation_memory("llama-3-8b", batch=1, seq=8192)
    assert 4 * 8192 * 128256 > act.per_layer_bytes


def test_breakdown_sums_and_frame():
    for rc in ("none", "selective", "full"):
        act = activation_memory("llama-2-7b", batch=2, seq=2048, recompute=rc, attention="eager", dropout=True)
        assert list(act.breakdown) == list(ACT_COMPONENTS)
        assert sum(act.breakdown.values()) == pytest.approx(act.total_bytes, rel=1e-12)
        assert act.total_bytes == act.layers_bytes + act.embedding_bytes + act.logits_bytes
        df = act.to_frame()
        assert df.loc["total", "bytes"] == pytest.approx(act.total_bytes)


# ----------------------------------------------------------------------------- invariants (hypothesis)
attention_st = st.sampled_from(["flash", "eager"])
recompute_st = st.sampled_from(["none", "selective", "full"])
dtype_st = st.sampled_from(["bf16", "fp16", "fp32"])


def fields(act):
    return {"per_layer": act.per_layer_bytes, "layers": act.layers_bytes, "embedding": act.embedding_bytes,
            "logits": act.logits_bytes, "total": act.total_bytes, **act.breakdown}


@given(small_models(), st.integers(1, 16), st.integers(1, 1024), attention_st, recompute_st, st.booleans(),
       dtype_st)
def test_exactly_linear_in_batch(m, b, s, attention, recompute, dropout, dtype):
    """Every saved tensor has a factor b (nothing is batch-independent): f(2b) = 2 f(b), f(3b) = 3 f(b)."""
    kw = dict(seq=s, attention=attention, recompute=recompute, dropout=dropout, dtype=dtype)
    one, two, three = (fields(activation_memory(m, batch=k * b, **kw)) for k in (1, 2, 3))
    for k in one:
        assert two[k] == pytest.approx(2 * one[k], rel=1e-12, abs=0), k
        assert three[k] == pytest.approx(3 * one[k], rel=1e-12, abs=0), k


@given(small_models(), st.integers(1, 8), st.integers(2, 2048), recompute_st, st.booleans(), dtype_st)
def test_flash_never_more_than_eager(m, b, s, recompute, dropout, dtype):
    """From s = 2 on. (At s = 1 eager's softmax output, one 16-bit number per row, is smaller than flash's
    fp32 log-sum-exp per row: 2 bytes < 4 bytes. True of the kernels too.) With selective recomputation only
    from s >= head_dim: the layer rebuilt in the backward holds eager's s x s scores (>= 4 s^2 bytes per head)
    against flash's new output and log-sum-exp (2 s d + 4 s bytes), which is smaller only once s >= d/2 + 1
    (hypothesis found s = 2 with d = 8)."""
    if recompute == "selective":
        assume(s >= m.head_dim)
    kw = dict(batch=b, seq=s, recompute=recompute, dropout=dropout, dtype=dtype)
    flash = activation_memory(m, attention="flash", **kw)
    eager = activation_memory(m, attention="eager", **kw)
    assert flash.total_bytes <= eager.total_bytes
    assert flash.per_layer_bytes <= eager.per_layer_bytes


def _rebuilt_flash_output(m, b, s, dtype):
    """Selective recomputation with flash attention reruns the kernel, which saves a fresh output O
    (b x s x a x d elements) for its own backward: measured in chapter 5, where it makes selective + flash
    cost slightly MORE at the peak than no recomputation."""
    return {"bf16": 2, "fp16": 2, "fp32": 4}[dtype] * b * s * m.heads * m.head_dim


@given(small_models(), st.integers(1, 8), st.integers(1, 2048), attention_st, st.booleans(), dtype_st)
def test_recompute_ordering(m, b, s, attention, dropout, dtype):
    """What a layer keeps: full <= selective <= none. At the peak (one layer rebuilt during backward):
    selective <= none for eager attention; for flash, selective exceeds none by at most the rebuilt kernel's
    fresh output; full <= selective from 2 layers (with one layer, checkpointing its input costs more than
    it saves, which is true of real checkpointing too)."""
    kw = dict(batch=b, seq=s, attention=attention, dropout=dropout, dtype=dtype)
    none, sel, full = (activation_memory(m, recompute=r, **kw) for r in ("none", "selective", "full"))
    assert full.per_layer_bytes <= sel.per_layer_bytes <= none.per_layer_bytes
    slack = _rebuilt_flash_output(m, b, s, dtype) if attention == "flash" else 0
    assert sel.total_bytes <= none.total_bytes + slack
    m2 = m.with_(layers=max(m.layers, 2))
    none2, full2 = (activation_memory(m2, recompute=r, **kw) for r in ("none", "full"))
    sel2 = activation_memory(m2, recompute="selective", **kw)
    assert full2.total_bytes <= sel2.total_bytes <= none2.total_bytes + slack


@pytest.mark.parametrize("name", ["gpt2", "llama-2-7b", "llama-3-8b", "llama-2-70b", "mistral-7b"])
@pytest.mark.parametrize("attention", ["flash", "eager"])
def test_recompute_ordering_catalogued_models(name, attention):
    m = get_model(name)
    for s in (256, 1024, 4096, m.max_seq):
        for dropout in (False, True):
            full, sel, none = (activation_memory(m, batch=1, seq=s, attention=attention, dropout=dropout,
                                                 recompute=r).total_bytes for r in ("full", "selective", "none"))
            slack = _rebuilt_flash_output(m, 1, s, "bf16") if attention == "flash" else 0
            assert sel <= none + slack and full <= none, (s, dropout)
            assert full <= sel, (s, dropout)


def test_full_never_more_than_selective_eager_long_context():
    """Both recompute levels report the peak (one layer rebuilt during backward), so full <= selective even
    where one layer's s^2 scores are huge (eager, 32K tokens, dropout)."""
    m = get_model("mistral-7b")
    kw = dict(batch=1, seq=32768, attention="eager", dropout=True)
    full = activation_memory(m, recompute="full", **kw).total_bytes
    sel = activation_memory(m, recompute="selective", **kw).total_bytes
    assert full <= sel


@given(small_models(), st.integers(1, 8), st.integers(1, 1024), attention_st, recompute_st, st.booleans(),
       st.integers(1, 8))
def test_more_layers_never_fewer_activation_bytes(m, b, s, attention, recompute, dropout, extra):
    kw = dict(batch=b, seq=s, attention=attention, recompute=recompute, dropout=dropout)
    assert activation_memory(m.with_(layers=m.layers + extra), **kw).total_bytes > \
        activation_memory(m, **kw).total_bytes


@given(small_models(), st.integers(1, 8), st.integers(1, 1024), attention_st, recompute_st, st.booleans())
def test_smaller_dtype_never_more_bytes(m, b, s, attention, recompute, dropout):
    kw = dict(batch=b, seq=s, attention=attention, recompute=recompute, dropout=dropout)
    f32, b16, f16 = (activation_memory(m, dtype=d, **kw).total_bytes for d in ("fp32", "bf16", "fp16"))
    assert b16 == f16 <= f32
    assert activation_memory(m, logits_dtype="bf16", **kw).total_bytes <= activation_memory(m, **kw).total_bytes


@given(small_models(), st.integers(1, 8), st.integers(1, 1024), attention_st, recompute_st, st.booleans())
def test_fewer_kv_heads_never_more_bytes(m, b, s, attention, recompute, dropout):
    kw = dict(batch=b, seq=s, attention=attention, recompute=recompute, dropout=dropout)
    mha = activation_memory(m.with_(kv_heads=m.heads), **kw).total_bytes
    gqa = activation_memory(m, **kw).total_bytes
    mqa = activation_memory(m.with_(kv_heads=1), **kw).total_bytes
    assert mqa <= gqa <= mha


@given(small_models(), st.sampled_from([2, 4, 8]), st.integers(1, 4), st.integers(1, 1024), attention_st,
       recompute_st, st.booleans())
def test_sequence_parallel_divides_each_layer(m, t, b, s, attention, recompute, dropout):
    assume(m.heads % t == 0 and m.ffn_hidden % t == 0 and m.kv_heads % t == 0)
    kw = dict(batch=b, seq=s, attention=attention, recompute=recompute, dropout=dropout)
    base = activation_memory(m, **kw)
    tp = activation_memory(m, tp=t, **kw)
    sp = activation_memory(m, tp=t, sp=True, **kw)
    assert sp.per_layer_bytes == pytest.approx(base.per_layer_bytes / t, rel=1e-12)
    assert sp.layers_bytes == pytest.approx(base.layers_bytes / t, rel=1e-12)
    assert sp.per_layer_bytes <= tp.per_layer_bytes <= base.per_layer_bytes
    assert sp.total_bytes <= tp.total_bytes <= base.total_bytes


@given(small_models(), st.integers(1, 8), st.integers(1, 1024), st.integers(1, 512), attention_st, recompute_st)
def test_longer_sequences_and_dropout_never_fewer_bytes(m, b, s, extra, attention, recompute):
    kw = dict(batch=b, attention=attention, recompute=recompute)
    assert activation_memory(m, seq=s + extra, **kw).total_bytes > activation_memory(m, seq=s, **kw).total_bytes
    assert activation_memory(m, seq=s, dropout=True, **kw).total_bytes >= \
        activation_memory(m, seq=s, dropout=False, **kw).total_bytes


@given(small_models(), st.integers(1, 8), st.integers(1, 2048), attention_st, recompute_st, st.booleans(),
       dtype_st, st.sampled_from([0.0, 0.125, 1.0, 2.0]))
def test_all_fields_finite_and_non_negative(m, b, s, attention, recompute, dropout, dtype, mask_bytes):
    act = activation_memory(m, batch=b, seq=s, attention=attention, recompute=recompute, dropout=dropout,
                            dtype=dtype, mask_bytes=mask_bytes)
    for k, v in fields(act).items():
        assert math.isfinite(v) and v >= 0, k
    assert act.total_bytes > 0


def test_selective_with_flash_only_trades_the_lse_for_one_rebuilt_output():
    """With flash attention, selective recomputation drops each layer's fp32 log-sum-exp (4*a*s*b bytes)
    and, at the peak, holds one rebuilt layer's output (2*s*b*a*d) and log-sum-exp again: by hand."""
    m = get_model("llama-3-8b")
    b, s, L, a, d = 2, 4096, m.layers, m.heads, m.head_dim
    none = activation_memory(m, batch=b, seq=s, attention="flash", recompute="none").total_bytes
    sel = activation_memory(m, batch=b, seq=s, attention="flash", recompute="selective").total_bytes
    lse = 4 * a * s * b
    assert sel - none == pytest.approx(-(L - 1) * lse + 2 * s * b * a * d, rel=1e-12)
