"""Inference memory (chapter 3): weights, GQA-aware KV cache, overhead, quantised weights.

KV cache per token = 2 (K and V) x layers x kv_heads x head_dim x bytes, computed here from the config
fields of each model as published on the Hugging Face hub.
"""

from __future__ import annotations

import math

import pytest
from conftest import small_models
from hypothesis import given
from hypothesis import strategies as st

from llmsizing import get_model, inference_memory, kv_cache_bytes_per_token, weights_bytes
from llmsizing.inference import RULE_OF_THUMB
from llmsizing.units import GiB

# (layers, kv_heads, head_dim) from each model's config.json
KV_SHAPES = {
    "llama-2-7b": (32, 32, 128),
    "llama-2-13b": (40, 40, 128),
    "llama-2-70b": (80, 8, 128),
    "llama-3-8b": (32, 8, 128),
    "llama-3-70b": (80, 8, 128),
    "llama-3.1-405b": (126, 8, 128),
    "mistral-7b": (32, 8, 128),
    "qwen2-7b": (28, 4, 128),
    "gpt2": (12, 12, 64),
}


@pytest.mark.parametrize("name", sorted(KV_SHAPES))
def test_kv_cache_per_token_from_config(name):
    L, g, d = KV_SHAPES[name]
    assert kv_cache_bytes_per_token(name) == 2 * L * g * d * 2
    assert kv_cache_bytes_per_token(name, "fp8") == 2 * L * g * d * 1
    assert kv_cache_bytes_per_token(name, "fp32") == 2 * L * g * d * 4


def test_kv_cache_known_values():
    assert kv_cache_bytes_per_token("llama-2-7b") == 512 * 1024          # 0.5 MiB per token
    assert kv_cache_bytes_per_token("llama-2-70b") == 320 * 1024         # GQA: 8 KV heads of 64
    # GQA divides the cache by heads / kv_heads: llama-3-8b (8 of 32) is a quarter of llama-2-7b
    assert kv_cache_bytes_per_token("llama-3-8b") * 4 == kv_cache_bytes_per_token("llama-2-7b")


def test_llama2_7b_inference_by_hand():
    """4,096 tokens of llama-2-7b's bf16 cache = 4096 x 0.5 MiB = 2 GiB; weights 2 bytes x 6.74B."""
    im = inference_memory("llama-2-7b", batch=1, context=4096)
    n = 6_738_415_616
    assert im.weights_bytes == 2 * n
    assert im.kv_cache_bytes == 2 * GiB
    assert im.overhead_bytes == pytest.approx(GiB + 0.08 * (2 * n + 2 * GiB))
    assert im.total_bytes == pytest.approx(2 * n + 2 * GiB + im.overhead_bytes)
    assert im.rule_of_thumb_bytes == pytest.approx(1.2 * 2 * n)
    assert RULE_OF_THUMB == 1.2
    df = im.to_frame()
    assert df.loc["total", "bytes"] == pytest.approx(im.total_bytes)
    assert df.loc["KV cache", "GiB"] == 2.0


def test_kv_cache_linear_in_batch_and_context():
    full = get_model("mistral-7b").with_(sliding_window=None)     # Mistral 7B v0.2: no window
    one = inference_memory(full, batch=1, context=1000).kv_cache_bytes
    assert inference_memory(full, batch=8, context=1000).kv_cache_bytes == 8 * one
    assert inference_memory(full, batch=1, context=32000).kv_cache_bytes == 32 * one
    assert one == 1000 * 128 * 1024      # 2 x 32 x 8 x 128 x 2 = 128 KiB per token


def test_sliding_window_caps_the_kv_cache_per_sequence():
    # Mistral-7B v0.1's config.json: sliding_window 4096 (Jiang et al. 2023, Sec. 2: rolling buffer cache)
    v01 = get_model("mistral-7b")
    assert v01.sliding_window == 4096
    per_token = 2 * 32 * 8 * 128 * 2
    assert inference_memory(v01, batch=3, context=32000).kv_cache_bytes == 3 * 4096 * per_token
    assert inference_memory(v01, batch=3, context=1000).kv_cache_bytes == 3 * 1000 * per_token


@given(st.integers(1, 20000), st.integers(1, 64), st.integers(1, 8))
def test_window_never_increases_the_kv_cache(window, context_k, batch):
    base = get_model("llama-3-8b")
    windowed = base.with_(sliding_window=window)
    context = context_k * 512
    assert (inference_memory(windowed, batch=batch, context=context).kv_cache_bytes
            <= inference_memory(base, batch=batch, context=context).kv_cache_bytes)


def test_explicit_overhead():
    im = inference_memory("gpt2", batch=1, context=1024, overhead_bytes=0.0)
    assert im.total_bytes == im.weights_bytes + im.kv_cache_bytes


# ----------------------------------------------------------------------------- quantised weights
def test_int4_quantises_only_the_block_linears_llama2_7b():
    """Linear layers of the blocks: 32 x (4 x 4096^2 + 3 x 4096 x 11008); the rest (embeddings, LM head,
    norms) stays bf16, as bitsandbytes/GPTQ/AWQ leave it."""
    linear = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    rest = 2 * 32000 * 4096 + (2 * 32 + 1) * 4096
    assert linear + rest == 6_738_415_616
    assert weights_bytes("llama-2-7b", "int4") == 0.5 * linear + 2 * rest
    assert weights_bytes("llama-2-7b", "int8") == 1 * linear + 2 * rest
    assert weights_bytes("llama-2-7b", "nf4") == pytest.approx((4.127 / 8) * linear + 2 * rest, rel=1e-4)
    assert weights_bytes("llama-2-7b", "fp32") == 4 * 6_738_415_616
    assert weights_bytes("llama-2-7b", "fp16") == 2 * 6_738_415_616


def test_quantised_biases_stay_bf16_qwen2():
    """Qwen2's q/k/v biases are 1-D: not quantised."""
    h, g, d, L, f, V = 3584, 4, 128, 28, 18944, 152064
    linear = L * (h * h + 2 * h * g * d + h * h + 3 * h * f)
    rest = 7_615_616_512 - linear
    assert rest == 2 * V * h + (2 * L + 1) * h + L * (h + 2 * g * d)
    assert weights_bytes("qwen2-7b", "int4") == 0.5 * linear + 2 * rest


# ----------------------------------------------------------------------------- invariants (hypothesis)
DTYPE_ORDER = ["fp32", "bf16", "fp8", "nf4", "int4"]   # bytes per element, decreasing


@given(small_models(), st.integers(1, 64), st.integers(1, 8192), st.integers(1, 8))
def test_more_layers_never_fewer_inference_bytes(m, batch, context, extra):
    a = inference_memory(m, batch=batch, context=context)
    b = inference_memory(m.with_(layers=m.layers + extra), batch=batch, context=context)
    assert b.weights_bytes > a.weights_bytes
    assert b.kv_cache_bytes > a.kv_cache_bytes
    assert b.total_bytes > a.total_bytes


@given(small_models(), st.integers(1, 16), st.integers(1, 4096))
def test_smaller_dtype_never_more_bytes(m, batch, context):
    w = [weights_bytes(m, d) for d in DTYPE_ORDER]
    assert w == sorted(w, reverse=True)
    kv = [inference_memory(m, batch=batch, context=context, kv_cache=d).kv_cache_bytes for d in DTYPE_ORDER]
    assert kv == sorted(kv, reverse=True)
    tot = [inference_memory(m, batch=batch, context=context, weights=d, kv_cache=d).total_bytes
           for d in DTYPE_ORDER]
    assert tot == sorted(tot, reverse=True)


@given(small_models(), st.integers(1, 16), st.integers(1, 4096))
def test_fewer_kv_heads_never_more_cache(m, batch, context):
    full = inference_memory(m.with_(kv_heads=m.heads), batch=batch, context=context).kv_cache_bytes
    gqa = inference_memory(m, batch=batch, context=context).kv_cache_bytes
    mqa = inference_memory(m.with_(kv_heads=1), batch=batch, context=context).kv_cache_bytes
    assert mqa <= gqa <= full
    assert gqa * m.heads == full * m.kv_heads       # exactly the GQA ratio


@given(small_models(), st.integers(1, 16), st.integers(1, 4096),
       st.sampled_from(DTYPE_ORDER), st.sampled_from(DTYPE_ORDER))
def test_inference_fields_finite_and_positive(m, batch, context, w, kv):
    im = inference_memory(m, batch=batch, context=context, weights=w, kv_cache=kv)
    for f in ("weights_bytes", "kv_cache_bytes", "overhead_bytes", "total_bytes", "rule_of_thumb_bytes"):
        v = getattr(im, f)
        assert math.isfinite(v) and v > 0, f
    assert im.kv_cache_bytes == kv_cache_bytes_per_token(m, kv) * batch * context



def test_chart_legends_name_only_gpus_whose_line_is_visible():
    """Chapter 3's default charts once named GPUs in the legend whose capacity lines fell outside the axis as if
    they were drawn."""
    from llmsizing.catalog import get_gpu
    from llmsizing.charts import render_inference_memory, render_inference_vs_context

    gpus = ("A10", "L40S", "H100 SXM", "H200")
    cases = ((render_inference_memory(gpus=gpus), True), (render_inference_vs_context(gpus=gpus), False))
    hidden = 0
    for view, horizontal in cases:
        ax = view.figure.axes[0]
        lo, hi = ax.get_xlim() if horizontal else ax.get_ylim()
        named = [t.get_text() for t in view.figure.legends[0].get_texts()]
        for name in gpus:
            visible = lo <= get_gpu(name).memory_gib <= hi
            hidden += not visible
            # a GPU whose line is on the axis is named plainly; one beyond it is named as such (issue 25: adding
            # a GPU beyond the axis must still change the figure), never drawn as if it were visible
            mine = [label for label in named if label.startswith(name + " (")]
            assert len(mine) == 1, (name, named)
            assert mine[0].endswith("beyond the axis") != visible, (name, named, lo, hi)
    assert hidden > 0                    # the defaults do put some GPUs off the axis: the case is exercised


@pytest.mark.parametrize("dtype, bytes_per_bias", [("int4", 2), ("int8", 2), ("int4-g128", 2), ("q4_k_m", 4)])
def test_routed_experts_biases_are_not_quantised_gpt_oss(dtype, bytes_per_bias):
    """gpt-oss-120b's routed experts carry biases, (experts, out) per projection: 36 layers x 128 experts x
    (2 x 2,880 gate_up + 2,880 down) = 39,813,120 numbers. 2-D as they are, they are vectors of the stacked
    experts, not matrices: quantised formats keep them in bf16 (2 bytes), GGUF in F32 (4), as every other
    bias. Before session 27 (read27b) the quantised formats priced them as 4- or 8-bit matrices."""
    from dataclasses import replace

    from llmsizing.catalog import get_model

    m = get_model("gpt-oss-120b")
    no_bias = replace(m, mlp_bias=False)
    biases = 36 * 128 * (2 * 2880 + 2880)
    assert m.n_params - no_bias.n_params == biases == 39_813_120
    assert weights_bytes(m, dtype) - weights_bytes(no_bias, dtype) == bytes_per_bias * biases


def test_min_serving_gpus_pays_the_fixed_part_on_every_gpu():
    """Llama 3 70B in bf16 serving 6 sequences of 8,192 tokens on H100 SXMs, by hand: weights
    2 x 70,553,706,496 bytes, KV cache 6 x 8,192 x (2 x 80 layers x 8 KV heads x 128 x 2 bytes); the
    allowance is 1 GiB per GPU plus 8% of the tensors, and the driver reports 81,559 MiB. Two GPUs would each
    hold 1 GiB + 1.08 x half the tensors, more than 81,559 MiB; three hold it. Counting the 1 GiB once for
    the pair would have said two."""
    from llmsizing.inference import min_serving_gpus

    tensors = 2 * 70_553_706_496 + 6 * 8192 * (2 * 80 * 8 * 128 * 2)
    h100 = 81_559 * 2**20
    assert GiB + 1.08 * tensors / 2 > h100 >= GiB + 1.08 * tensors / 3
    r = inference_memory("llama-3-70b", batch=6, context=8192)
    assert r.total_bytes == pytest.approx(GiB + 1.08 * tensors)
    assert r.total_bytes <= 2 * h100                    # the once-per-replica count: 2, one GPU short
    assert min_serving_gpus(r, "H100 SXM") == 3


def test_min_serving_gpus_relations_and_bad_input():
    from llmsizing.inference import min_serving_gpus
    from llmsizing.memory import min_gpus_for_bytes

    # no allowance at all: nothing is paid per GPU, so the count is the total over the whole capacity
    r0 = inference_memory("llama-3.1-405b", batch=4, context=8192, overhead_bytes=0)
    whole = min_gpus_for_bytes(r0.total_bytes, "H100 SXM", usable_fraction=1.0)
    assert min_serving_gpus(r0, "H100 SXM") == whole
    # a fixed part paid per GPU never needs fewer GPUs than one paid once
    for batch in (1, 6, 32):
        r = inference_memory("llama-3-70b", batch=batch, context=8192)
        once = min_gpus_for_bytes(r.total_bytes, "H100 SXM", usable_fraction=1.0)
        assert min_serving_gpus(r, "H100 SXM") >= once
    assert min_serving_gpus(inference_memory("llama-3-8b", context=8192), "A10") == 1
    with pytest.raises(TypeError, match="memory"):
        min_serving_gpus(r.total_bytes, "H100 SXM")
    with pytest.raises(ValueError, match="fixed_bytes_per_gpu"):
        min_serving_gpus(inference_memory("llama-3-8b", overhead_bytes=100 * GiB), "A10",
                         fixed_bytes_per_gpu=50 * GiB)
