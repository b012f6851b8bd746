"""Issue 36, round 4: the Hugging Face types read through extra tensors and an attention layout (BERT-style
decoders, ModernBERT's decoder, CPM-Ant, Gemma 4 and Gemma 3n, Zamba, xLSTM), checked by hand arithmetic
from each ``modeling_<type>.py`` and against transformers' own meta-device counts (the sweep rows, and a few
configs other than the class defaults measured in ``.venv-measure``; constants below). Expected values never
come from the library."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from llmsizing import Model
from llmsizing.inference import kv_cache_bytes_per_token, kv_cached_tokens
from llmsizing.layer_kinds import AttentionLayout, StateMixer

DATA = Path(__file__).resolve().parents[1] / "data"
ROWS = {(r["model_type"], r["kind"]): r for r in csv.DictReader(open(DATA / "hf_type_sweep.csv", newline=""))}


def _default(mtype: str) -> Model:
    return Model.from_hf_config(json.loads(ROWS[(mtype, "saved")]["config_json"]))


def _truth(mtype: str) -> int:
    """transformers' meta-device count of the class default (parameters plus persistent buffers)."""
    r = ROWS[(mtype, "full")]
    return int(r["n_params"]) + int(r["n_persistent_buffers"])


def test_bert_generation_by_hand():
    """BertGenerationConfig(): 24 post-norm BERT layers of 1024, MLP 4096, 50,358 tokens, 512 positions, a
    LayerNorm after the embedding, the decoder tied to the embedding with a bias of its own."""
    h, f, v, layers = 1024, 4096, 50_358, 24
    layer = 4 * (h * h + h) + 2 * 2 * h + (f * h + f) + (h * f + h)
    want = v * h + 512 * h + 2 * h + layers * layer + v
    assert want == _truth("bert-generation") == 354_452_662
    m = _default("bert-generation")
    assert m.n_params == want
    assert kv_cache_bytes_per_token(m, "bf16") == 2 * (2 * layers * h)


def test_cpmant_by_hand():
    """CpmAntConfig(): 48 layers of 4096 (32 heads of 128, no biases), a GELU-gated MLP of 10,240; the input
    embedding holds 30,720 tokens plus 32 x 32 prompt rows, a segment embedding of 32 rows, one
    relative-position table of 32 x 32 + 512 rows per head; an untied LM head of 30,720 rows."""
    h, f, layers = 4096, 10_240, 48
    want = ((30_720 + 32 * 32) * h + 32 * h + (32 * 32 + 512) * 32
            + layers * (2 * h + 4 * h * h + 3 * f * h) + h + 30_720 * h)
    assert want == _truth("cpmant") == 9_517_453_312
    m = _default("cpmant")
    assert m.n_params == want and not m.tied_embeddings
    assert kv_cache_bytes_per_token(m, "bf16") == 2 * (2 * layers * h)


def test_modernbert_decoder_by_hand():
    """ModernBertDecoderConfig(): 22 layers of 768, a GeGLU MLP of 1152 (Wi of 2 x 1152), LayerNorms without
    bias, no attention norm in layer 0, a prediction head (dense 768 x 768 and a norm) and a decoder tied to
    the embedding with a bias; two layers in three see 64 tokens back (local_attention 128 // 2)."""
    h, f, v, layers = 768, 1152, 50_368, 22
    want = v * h + h + layers * (4 * h * h + 2 * f * h + h * f + h) + (layers - 1) * h + h + h * h + h + v
    assert want == _truth("modernbert-decoder") == 149_655_232
    m = _default("modernbert-decoder")
    assert m.n_params == want
    assert (m.sliding_window, m.window_layers) == (64, 14)          # layers 1, 2, 4, 5, ...: 22 - 8 global


def test_gemma4_full_layers_of_their_own_width_by_hand():
    """A small Gemma 4 text config with attention_k_eq_v: ten windowed layers of 4 KV heads of 32, two full
    layers of 2 KV heads of 64 without v_proj (their values are the keys); transformers counts 7,543,948
    (measured on the meta device, .venv-measure)."""
    h, f, v = 256, 512, 1000
    sliding = 8 * 32 * h + 2 * 4 * 32 * h + h * 8 * 32 + 2 * 32 + 4 * h + 3 * f * h + 1   # + layer_scalar
    full = 8 * 64 * h + 2 * 64 * h + h * 8 * 64 + 2 * 64 + 4 * h + 3 * f * h + 1          # no v_proj
    want = v * h + 10 * sliding + 2 * full + h
    assert want == 7_543_948
    m = Model.from_hf_config({"model_type": "gemma4_text", "hidden_size": h, "intermediate_size": f,
                              "num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 4,
                              "head_dim": 32, "vocab_size": v, "hidden_size_per_layer_input": 0,
                              "attention_k_eq_v": True, "num_global_key_value_heads": 2,
                              "global_head_dim": 64})
    assert m.n_params == want
    assert kv_cache_bytes_per_token(m, "bf16") == 2 * (10 * 2 * 4 * 32 + 2 * 2 * 2 * 64)   # 3,072 numbers
    # cached tokens at 4,096 of context: the windowed layers keep 512, weighted by their KV width
    want_tokens = (10 * 256 * 512 + 2 * 256 * 4096) / (10 * 256 + 2 * 256)
    assert kv_cached_tokens(m, 4096) == pytest.approx(want_tokens)


G4 = {"model_type": "gemma4_text", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 12,
      "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32, "vocab_size": 1000,
      "vocab_size_per_layer_input": 1000, "hidden_size_per_layer_input": 16}


@pytest.mark.parametrize("extra, params, kv", [
    # Gemma 4 E2B's layout: per-layer embeddings, the last 4 layers share KV, their MLPs twice as wide
    ({"num_kv_shared_layers": 4, "use_double_wide_mlp": True}, 13_916_988, 5_888),
    ({"attention_k_eq_v": True, "num_global_key_value_heads": 2, "global_head_dim": 64,
      "num_kv_shared_layers": 5, "use_double_wide_mlp": True}, 9_557_468, 1_792)])
def test_gemma4_kv_sharing_against_transformers(extra, params, kv):
    """transformers 5.24's Gemma4ForCausalLM of these configs on the meta device (parameters + layer_scalar
    buffers; the k/v projections' out features, k standing for v with attention_k_eq_v)."""
    m = Model.from_hf_config({**G4, **extra})
    assert m.n_params == params
    assert kv_cache_bytes_per_token(m, "bf16") == 2 * kv


def test_gemma3n_shares_kv_in_its_last_layers():
    """Gemma3nTextConfig(): 35 layers, the last 15 reuse earlier keys and values: 20 layers of 2 KV heads of
    256 cache."""
    m = _default("gemma3n_text")
    assert m.n_params == _truth("gemma3n_text")
    assert m.attention_layout == AttentionLayout(shared_window=12, shared_full=3)
    assert kv_cache_bytes_per_token(m, "bf16") == 2 * (20 * 2 * 2 * 256)


def test_zamba_by_hand():
    """ZambaConfig(): 76 Mamba layers of 3712 (inner 7424, d_state 16, d_conv 4, dt_rank 232), 13 of them
    first running the one shared block (attention on 2 x 3712 inputs, 16 heads of 464; a gated MLP of 14,848)
    and a 3712 x 3712 linear of their own; tied embeddings of 32,000."""
    h, d, n, r, c, f = 3712, 7424, 16, 232, 4, 14_848
    mamba = 2 * d * h + d * c + d + (r + 2 * n) * d + d * r + d + d * n + d + h * d + h
    block = 3 * (2 * h) * (2 * h) + h * (2 * h) + 2 * h + h + 3 * f * h
    want = 32_000 * h + 76 * mamba + block + 13 * h * h + h
    assert want == _truth("zamba") == 7_232_490_496
    m = _default("zamba")
    assert m.n_params == want
    assert kv_cache_bytes_per_token(m, "bf16") == 2 * (13 * 2 * 16 * 464)      # KV once per use
    assert m.state_numbers_per_sequence == 76 * (d * c + d * n)


def test_xlstm_by_hand():
    """xLSTMConfig(): 32 blocks of 4096, 8 heads, q/k of 2048, v of 4096, a gated MLP of 2.667 x 4096 rounded
    up to 64 (10,944); per head a 256 x 512 memory, a normaliser of 256 and a maximum."""
    h, qk, v, f, a = 4096, 2048, 4096, 10_944, 8
    block = h + 2 * qk * h + 2 * v * h + 2 * (a * h + a) + v + h * v + h + 3 * f * h
    want = 50_304 * h + 32 * block + h + 50_304 * h
    assert want == _truth("xlstm") == 6_865_424_896
    m = _default("xlstm")
    assert m.n_params == want
    assert m.state_numbers_per_sequence == 32 * a * (256 * 512 + 256 + 1) == 33_620_224


def test_emu3_text_config_saved_without_defaults():
    """Emu3's text model read through its text_config, whose unsaved keys take Emu3TextConfig's defaults
    (data/hf_config_classes.json now holds that sub-config class too)."""
    m = Model.from_hf_config({"model_type": "emu3", "text_config": {"model_type": "emu3_text_model"}})
    assert m.n_params == _truth("emu3")


@pytest.mark.parametrize("config, key", [
    ({"model_type": "doge", "is_moe": True}, "is_moe"),
    ({**G4, "enable_moe_block": True}, "enable_moe_block"),
    ({**G4, "per_layer_config": {"5": {"head_dim": 64, "intermediate_size": 9}}}, "per_layer_config"),
    ({**G4, "per_layer_config": {"3": {"head_dim": 64}}}, "per_layer_config"),
    ({**G4, "num_kv_shared_layers": 7}, "num_kv_shared_layers"),
    ({"model_type": "gemma3n_text", "intermediate_size": [8192] * 34 + [4096]}, "intermediate_size"),
    ({"model_type": "bert-generation", "add_cross_attention": True}, "add_cross_attention"),
    ({"model_type": "git", "num_image_with_embedding": 2}, "num_image_with_embedding"),
    ({"model_type": "xlstm", "use_bias": True}, "use_bias"),
    ({"model_type": "xlstm", "hidden_size": 4000}, "multiples of 64"),
    ({"model_type": "zamba", "layers_block_type": ["hybrid", "attention"] * 38}, "layers_block_type")])
def test_what_these_readers_do_not_represent_is_refused_by_name(config, key):
    with pytest.raises(ValueError, match=key):
        Model.from_hf_config(config)


def test_layout_and_mixer_checks():
    with pytest.raises(ValueError, match="attention_layout"):
        Model(name="x", layers=4, hidden=64, heads=4, ffn_hidden=128, vocab=100,
              attention_layout=AttentionLayout(shared_full=5))
    with pytest.raises(TypeError, match="attention_layout"):
        Model(name="x", layers=4, hidden=64, heads=4, ffn_hidden=128, vocab=100, attention_layout=3)
    with pytest.raises(ValueError, match="must divide state"):
        StateMixer("mlstm", inner=64, state=6, heads=4)
    with pytest.raises(TypeError, match="extra_layer_tensors"):
        Model(name="x", layers=4, hidden=64, heads=4, ffn_hidden=128, vocab=100,
              extra_layer_tensors=(("lm_head", "w", (3,), "all"),))
    m = Model(name="x", layers=4, hidden=64, heads=4, ffn_hidden=128, vocab=100,
              extra_layer_tensors=(("lm_head", "head.w", (64, 64), "one"), ("norms", "g", (64,), 3)))
    base = m.with_(extra_layer_tensors=())
    assert m.n_params - base.n_params == 64 * 64 + 3 * 64
    assert m.param_breakdown()["lm_head"] - base.param_breakdown()["lm_head"] == 64 * 64
    assert m.block_params - base.block_params == 3 * 64            # the head is not a block tensor


def test_flops_of_lookup_tables_full_layers_and_a_shared_block_by_hand():
    """FLOPs: Gemma's per-layer embedding table is a lookup (left out of the matmul weights, while the tied
    token embedding stays as the LM head); Zamba's shared block multiplies at each of its 13 uses; Gemma 4's
    full layers attend with their own head width (4 x keys x heads x head_dim per layer)."""
    from llmsizing.flops import attention_flops_per_token, matmul_params
    e2b = Model.from_hf_config({**G4, "num_kv_shared_layers": 4, "use_double_wide_mlp": True})
    assert matmul_params(e2b) == e2b.n_params - 1000 * 12 * 16               # the 1000 x (12 x 16) table
    z = _default("zamba")
    h, f = 3712, 14_848
    block = 3 * (2 * h) * (2 * h) + h * (2 * h) + 2 * h + h + 3 * f * h
    assert matmul_params(z) == z.n_params + 12 * block            # tied: the embedding stays as the LM head
    assert attention_flops_per_token(z, seq=1024) == 4 * 1024 * 16 * 464 * 13
    g = Model.from_hf_config({**G4, "hidden_size_per_layer_input": 0, "global_head_dim": 64})
    # ten windowed layers see 512 keys (window 512 < 1024), two full layers 1024 keys with heads of 64
    assert attention_flops_per_token(g, seq=1024) == 4 * 8 * (10 * 512 * 32 + 2 * 1024 * 64)


def test_mimo_v2_flash_by_hand_and_against_transformers():
    """A small MiMo-V2-Flash config (7 layers: full attention in layers 0 and 5, windowed elsewhere with twice
    the 2 KV heads and sinks; q/k of 24, v of 16 per head, q/k/v biased; a dense first layer, then 4 experts
    of 32 with a router bias buffer). transformers 5.24 counts 938,176 (parameters + buffers), 960 KV numbers
    per token and a window of 64 (sliding_window_size 63 + 1), measured on the meta device."""
    h, heads = 128, 8
    windowed = (heads * 24 * h + heads * 24) + (4 * 24 * h + 4 * 24) + (4 * 16 * h + 4 * 16) \
        + h * heads * 16 + heads
    full = (heads * 24 * h + heads * 24) + (2 * 24 * h + 2 * 24) + (2 * 16 * h + 2 * 16) + h * heads * 16
    moe = 4 * h + 4 + 4 * 3 * 32 * h
    want = 2 * 500 * h + h + 5 * windowed + 2 * full + 7 * 2 * h + 3 * 256 * h + 6 * moe
    assert want == 938_176
    m = Model.from_hf_config({"model_type": "mimo_v2_flash", "hidden_size": h, "intermediate_size": 256,
                              "num_hidden_layers": 7, "num_attention_heads": heads, "num_key_value_heads": 2,
                              "head_dim": 24, "v_head_dim": 16, "vocab_size": 500,
                              "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
                              "attention_bias": True,
                              "sliding_window_size": 63})
    assert m.n_params == want and m.routed_expert_params == 6 * 4 * 3 * 32 * h
    assert kv_cache_bytes_per_token(m, "bf16") == 2 * (5 * 4 * (24 + 16) + 2 * 2 * (24 + 16)) == 2 * 960
    assert (m.sliding_window, m.window_layers) == (64, 5)


def test_activation_memory_says_it_approximates_these_layers():
    """The saved-activation count describes attention + MLP layers tensor by tensor; for Zamba's Mamba layers
    and Gemma 4's full layers of their own width it is an approximation, and says so (a dense Llama does not
    warn)."""
    from llmsizing.activations import activation_memory

    for mtype, words in (("zamba", "mixer"), ("gemma4_text", "own widths")):
        with pytest.warns(UserWarning, match=words):
            activation_memory(_default(mtype), batch=1, seq=512)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        activation_memory("llama-3-8b", batch=1, seq=512)
