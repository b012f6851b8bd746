"""Sliding windows (issue 20, class 6): read from a config as each architecture's Hugging Face code reads it, and
counted the same way in every phase (training, prefill, decode).

Expected values come from the Hugging Face sources (``transformers`` 5.x) and from the published parameter
count, worked by hand here, not from the library's own output:

* ``MistralConfig``: ``sliding_window: int | None = 4096``, used by every layer (``modeling_mistral.py``);
* ``Qwen2Config.__post_init__``: ``sliding_window = sliding_window if use_sliding_window else None`` and, without
  ``layer_types``, layer ``i`` is ``"sliding_attention"`` iff the window is set and ``i >= max_window_layers``;
  ``Qwen2Attention`` windows only those layers;
* ``LlamaConfig`` has no ``sliding_window`` and ``modeling_llama.py`` passes none: the key is ignored.
"""

from __future__ import annotations

import pytest

import llmsizing as L
from llmsizing.flops import attention_flops_per_token, forward_flops_per_token, training_flops_per_token

BASE = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "intermediate_size": 14336, "vocab_size": 32000, "max_position_embeddings": 32768}


# ----------------------------------------------------------------------------- reading configs
@pytest.mark.parametrize("mtype", ["llama"])
def test_llama_ignores_sliding_window(mtype):
    """The Llama config from_hf_config honoured sliding_window: a window Hugging Face's Llama never applies."""
    assert L.Model.from_hf_config({**BASE, "model_type": mtype, "sliding_window": 4096}).sliding_window is None


def test_gpt2_ignores_sliding_window():
    gpt2 = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257,
            "sliding_window": 256}
    assert L.Model.from_hf_config(gpt2).sliding_window is None


def test_mistral_window_applies_to_every_layer_with_hugging_faces_default():
    m = {**BASE, "model_type": "mistral"}
    assert L.Model.from_hf_config({**m, "sliding_window": 2048}).sliding_window == 2048
    assert L.Model.from_hf_config({**m, "sliding_window": None}).sliding_window is None    # v0.2, v0.3
    assert L.Model.from_hf_config(m).sliding_window == 4096             # absent: MistralConfig's default
    # MistralConfig warns about layer_types and MistralModel ignores them: so does the library
    assert L.Model.from_hf_config({**m, "sliding_window": 2048,
                                   "layer_types": ["full_attention"] * 32}).sliding_window == 2048


def _qwen(**kw):
    return {**BASE, "model_type": "qwen2", "num_hidden_layers": 28, "sliding_window": 4096, **kw}


@pytest.mark.parametrize("config, window", [
    (_qwen(), None),                                                       # use_sliding_window absent: False
    (_qwen(use_sliding_window=False, max_window_layers=0), None),
    (_qwen(use_sliding_window=True, max_window_layers=28), None),          # no layer i >= 28 of 28: refused before
    (_qwen(use_sliding_window=True, max_window_layers=70), None),
    (_qwen(use_sliding_window=True, max_window_layers=0), 4096),           # every layer windowed
    (_qwen(use_sliding_window=True, max_window_layers=0, sliding_window=None), None),
    (_qwen(use_sliding_window=True, layer_types=["full_attention"] * 28), None),
    (_qwen(use_sliding_window=True, layer_types=["attention"] * 28), None),      # Hugging Face's legacy name
    (_qwen(use_sliding_window=True, max_window_layers=28, layer_types=["sliding_attention"] * 28), 4096),
    (_qwen(use_sliding_window=False, layer_types=["sliding_attention"] * 28), None),
])
def test_qwen2_windows_the_layers_hugging_face_windows(config, window):
    assert L.Model.from_hf_config(config).sliding_window == window


def test_qwen2_default_max_window_layers_with_28_layers_loads():
    """Qwen2Config's default max_window_layers is 28: a 28-layer config with use_sliding_window and no
    max_window_layers has no windowed layer."""
    assert L.Model.from_hf_config(_qwen(use_sliding_window=True)).sliding_window is None


@pytest.mark.parametrize("config, key", [
    (_qwen(use_sliding_window=True, max_window_layers=14), "max_window_layers"),      # layers 14..27 windowed
    (_qwen(use_sliding_window=True, layer_types=["full_attention", "sliding_attention"] * 14), "layer_types"),
    (_qwen(use_sliding_window=True, layer_types=["sliding_attention"] * 27), "layer_types"),
    (_qwen(use_sliding_window=True, layer_types=["linear_attention"] * 28), "layer_types"),
    (_qwen(use_sliding_window=True, max_window_layers=0, sliding_window=0), "sliding_window"),
    (_qwen(use_sliding_window="yes"), "use_sliding_window"),
])
def test_qwen2_mixed_or_odd_layers_are_refused_naming_the_key(config, key):
    with pytest.raises((ValueError, TypeError), match=key):
        L.Model.from_hf_config(config)


# ----------------------------------------------------------------------------- FLOPs in every phase
#: Mistral 7B v0.1: 32 layers, 32 heads of 128, window 4096; its matmul weights are the published 7,241,732,096
#: parameters less the 32,000 x 4,096 input embedding (the LM head is untied and is a matmul).
MISTRAL = "mistral-7b"
LAYERS, HEADS, HEAD_DIM, W = 32, 32, 128, 4096
MATMUL = 7_241_732_096 - 32_000 * 4_096


def _attention(keys: float) -> float:
    """QK^T and attn @ V: 2 x 2 FLOPs per key, head dimension, head and layer."""
    return 4 * keys * HEADS * HEAD_DIM * LAYERS


@pytest.mark.parametrize("seq, keys, causal_keys", [
    (1024, 1024, 512),                       # inside the window: unchanged
    (4096, 4096, 2048),
    (8192, 4096, (W * W / 2 + (8192 - W) * W) / 8192),      # the causal band: w^2/2 + (s - w) w, over s
    (32768, 4096, (W * W / 2 + (32768 - W) * W) / 32768),
])
def test_window_caps_the_attention_term_in_the_forward(seq, keys, causal_keys):
    assert attention_flops_per_token(MISTRAL, seq=seq) == pytest.approx(_attention(keys), rel=1e-12)
    assert attention_flops_per_token(MISTRAL, seq=seq, causal=True) == pytest.approx(_attention(causal_keys),
                                                                                      rel=1e-12)
    assert forward_flops_per_token(MISTRAL, seq=seq) == pytest.approx(2 * MATMUL + _attention(keys), rel=1e-12)


def test_training_counts_the_window_as_decode_does():
    """Training at 32K counted 32,768 keys per token while a decode step at 32K counted 4,096."""
    train = training_flops_per_token(MISTRAL, seq=32768)
    assert train == pytest.approx(3 * (2 * MATMUL + _attention(W)), rel=1e-12)
    assert training_flops_per_token(MISTRAL, seq=32768, recompute="selective") == \
        pytest.approx(train + _attention(W), rel=1e-12)
    no_window = L.get_model(MISTRAL).with_(sliding_window=None)
    assert training_flops_per_token(no_window, seq=32768) == pytest.approx(3 * (2 * MATMUL + _attention(32768)),
                                                                            rel=1e-12)
    assert training_flops_per_token(no_window, seq=4096) == training_flops_per_token(MISTRAL, seq=4096)


def test_prefill_and_decode_count_the_window_as_training_does():
    prompt, output = 16384, 512
    s = L.serving(MISTRAL, "H100 SXM", prompt=prompt, output=output, batch=2)
    band = (W * W / 2 + (prompt - W) * W) / prompt                 # the prompt's causal keys per token
    assert s.prefill_flops_per_gpu == pytest.approx(prompt * (2 * MATMUL + _attention(band)), rel=1e-12)
    assert s.decode_flops_per_gpu == pytest.approx(2 * (2 * MATMUL + _attention(W)), rel=1e-12)
    r = L.decode_step_roofline(MISTRAL, "H100 SXM", batch=3, context=20000)
    assert r.flops == pytest.approx(3 * (2 * MATMUL + _attention(W)), rel=1e-12)
    r = L.decode_step_roofline(MISTRAL, "H100 SXM", batch=3, context=1000)
    assert r.flops == pytest.approx(3 * (2 * MATMUL + _attention(1000)), rel=1e-12)


def test_training_time_of_a_windowed_model_at_long_context():
    """A run at 32K tokens per sequence costs the FLOPs of the window, not of the full 32K x 32K matrix."""
    t = L.training_time(MISTRAL, tokens=1e9, gpu="H100 SXM", n_gpus=8, seq=32768, mfu=0.4)
    assert t.flops_per_token == pytest.approx(3 * (2 * MATMUL + _attention(W)), rel=1e-12)


def test_gpt_oss_windows_every_other_layer_as_chapter_10_says():
    """Chapter 10's sentence on the cap (small47): gpt-oss-120b's config.json ``layer_types`` alternates
    ``sliding_attention`` (window 128) and ``full_attention`` over its 36 layers, so half are windowed and a query
    attends, averaged over the layers, to (128 + s) / 2 keys beyond the window."""
    from llmsizing.flops import attention_keys_per_token

    m = L.get_model("gpt-oss-120b")
    assert (m.sliding_window, m.window_layers, m.n_attention_layers) == (128, 18, 36)
    assert attention_keys_per_token(m, seq=8192) == pytest.approx((128 + 8192) / 2, rel=1e-12)
    assert attention_keys_per_token(m, seq=100) == 100                   # inside the window: no cap
