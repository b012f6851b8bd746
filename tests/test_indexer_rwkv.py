"""Issue 36, round 3: DeepSeek Sparse Attention's indexer (DeepSeek-V3.2, GLM-5) and RWKV, by hand.

Expected values are transformers 5.24's own meta-device counts (``data/hf_type_sweep.csv``, or the one config
measured below) and arithmetic written out from the modeling files, never the library's output.
"""

from __future__ import annotations

import csv
import math
import json
from pathlib import Path

import pytest

from llmsizing import Model
from llmsizing.inference import kv_cache_bytes_per_token, state_bytes_per_sequence
from llmsizing.layer_kinds import Indexer, StateMixer

ROWS = {(r["model_type"], r["kind"]): r for r in csv.DictReader(
    open(Path(__file__).resolve().parents[1] / "data" / "hf_type_sweep.csv", newline=""))}


def _cfg(t, kind="full"):
    return json.loads(ROWS[(t, kind)]["config_json"])


def test_deepseek_v32_is_deepseek_v3_plus_one_indexer_per_layer():
    """DeepseekV32Indexer (modeling_deepseek_v32.py): wq_b 1,536 -> 64 x 128, wk 7,168 -> 128, a LayerNorm of
    128 (gain and bias), weights_proj 7,168 -> 64; 61 layers. transformers' own V3.2 and V3 class defaults differ
    by exactly that, and the library reads V3.2 exactly."""
    per_layer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert per_layer == 13_959_424
    v32, v3 = ROWS[("deepseek_v32", "full")], ROWS[("deepseek_v3", "full")]
    assert int(v32["n_params"]) - int(v3["n_params"]) == 61 * per_layer == 851_524_864
    m = Model.from_hf_config(_cfg("deepseek_v32"))
    assert m.n_params == int(v32["n_params"]) + int(v32["n_persistent_buffers"])
    # the cache: MLA's latent and rotary key (512 + 64) plus the indexer's key (128), per layer and token
    assert kv_cache_bytes_per_token(m, "bf16") == 2 * 61 * (512 + 64 + 128) == 2 * int(v32["kv_per_token"])
    assert kv_cache_bytes_per_token(m, "fp8") == 61 * 704


GLM5_SMALL = {"model_type": "glm_moe_dsa", "vocab_size": 1000, "hidden_size": 512, "intermediate_size": 256,
              "moe_intermediate_size": 64, "num_hidden_layers": 8, "num_attention_heads": 8,
              "num_key_value_heads": 64, "n_routed_experts": 8, "kv_lora_rank": 128, "q_lora_rank": 256,
              "index_head_dim": 64, "index_n_heads": 4, "index_topk_freq": 3}


def test_glm5_shared_indexer_layers_follow_index_topk_freq():
    """GlmMoeDsaConfig.__post_init__ without indexer_types: layer i runs its own indexer when
    max(i - 2 + 1, 0) % index_topk_freq == 0: with 8 layers and freq 3, layers 0, 1, 4, 7; the other four reuse
    the previous choice and have no indexer. transformers 5.24 on the meta device counts this config (plus the
    router's score-correction buffer) at 25,149,480 (measured with the .venv-measure interpreter:
    GlmMoeDsaConfig(**GLM5_SMALL)). Each missing indexer: 256 x 4 x 64 + 512 x 64 + 2 x 64 + 512 x 4."""
    m = Model.from_hf_config(GLM5_SMALL)
    assert m.indexer.layers == 4
    assert m.n_params == 25_149_480
    every = Model.from_hf_config({k: v for k, v in GLM5_SMALL.items() if k != "index_topk_freq"})
    assert every.indexer.layers is None
    assert every.n_params - m.n_params == 4 * (256 * 4 * 64 + 512 * 64 + 2 * 64 + 512 * 4) == 401_920
    explicit = dict(GLM5_SMALL, indexer_types=["full", "full", "shared", "shared", "full", "shared", "shared",
                                               "full"])
    assert Model.from_hf_config(explicit).n_params == m.n_params
    # 8 layers of MLA (128 + 64) and 4 indexer keys of 64
    assert kv_cache_bytes_per_token(m, "bf16") == 2 * (8 * (128 + 64) + 4 * 64)


def test_indexer_needs_the_query_latent():
    with pytest.raises(ValueError, match="q_lora_rank"):
        Model.from_hf_config(dict(_cfg("deepseek_v32", "saved"), q_lora_rank=None))
    with pytest.raises(ValueError, match="indexer_types"):
        Model.from_hf_config(dict(GLM5_SMALL, indexer_types=["full"] * 3))
    with pytest.raises(TypeError, match="indexer must be an Indexer"):
        Model("x", 2, 64, 4, 128, 100, indexer="yes")
    with pytest.raises(ValueError, match="heads"):
        Indexer(heads=0, head_dim=64, q_rank=32)


def test_rwkv_class_default_by_hand():
    """RwkvConfig(): hidden 4,096, 32 layers, vocab 50,277, attention width = hidden, intermediate 4 x hidden
    (modeling_rwkv.py). Per block: time mixing (time_decay, time_first: 2 x 4,096; three token-shift mixes;
    key, value, receptance, output: 4 x 4,096^2), channel mixing (two mixes; receptance 4,096^2; key and value
    2 x 4,096 x 16,384), two LayerNorms; then block 0's pre_ln, ln_out, an untied head."""
    h, n, v, f = 4096, 32, 50_277, 16_384
    block = 2 * h + 3 * h + 4 * h * h + 2 * h + h * h + 2 * h * f + 2 * 2 * h
    m = Model.from_hf_config(_cfg("rwkv"))
    assert m.n_params == n * block + 2 * v * h + 2 * h + 2 * h == 7_392_649_216
    assert m.n_params == int(ROWS[("rwkv", "full")]["n_params"])
    # state: five hidden-wide tensors per layer (two token shifts, WKV numerator, denominator, maximum)
    assert m.state_numbers_per_sequence == 5 * h * n == int(ROWS[("rwkv", "full")]["state_per_sequence"])
    assert state_bytes_per_sequence(m, "bf16") == 2 * 5 * h * n
    assert m.n_attention_layers == 0 and kv_cache_bytes_per_token(m) == 0


def test_rwkv_refuses_an_attention_width_transformers_cannot_run():
    with pytest.raises(ValueError, match="attention_hidden_size"):
        Model.from_hf_config(dict(_cfg("rwkv", "saved"), attention_hidden_size=2048))
    assert StateMixer("rwkv", inner=8, state=3, conv=1).state_numbers == 5 * 8


# ----------------------------------------------------------------------------- Nemotron-H (one sub-layer blocks)
NEMOTRON_H_SMALL = {"model_type": "nemotron_h", "hidden_size": 256, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "head_dim": 64, "mamba_num_heads": 8, "mamba_head_dim": 32,
                    "ssm_state_size": 16, "intermediate_size": 512, "moe_intermediate_size": 64,
                    "moe_shared_expert_intermediate_size": 128, "n_routed_experts": 4, "num_experts_per_tok": 2,
                    "vocab_size": 1000}


@pytest.mark.parametrize("extra, params, routed", [
    # transformers 5.24's meta-device counts (parameters plus the routers' score-correction buffers) of
    # NemotronHConfig(**NEMOTRON_H_SMALL, **extra), measured with the .venv-measure interpreter
    ({"hybrid_override_pattern": "M-M-M*-M-M*-M-"}, 4_084_112, 0),
    ({"hybrid_override_pattern": "MEMEM*EMEMEM*E", "mamba_n_groups": 4}, 3_496_616, 786_432),
    ({"hybrid_override_pattern": "M*EMEM*", "n_groups": 2}, 1_953_296, 262_144),
])
def test_nemotron_h_patterns_against_transformers(extra, params, routed):
    m = Model.from_hf_config({**NEMOTRON_H_SMALL, **extra})
    assert m.n_params == params and m.routed_expert_params == routed
    pattern = extra["hybrid_override_pattern"]
    # a Model layer is a Mamba ("M") or attention ("*") block and the MLP ("-") or MoE ("E") block after it
    assert m.layers == pattern.count("M") + pattern.count("*")
    assert m.n_attention_layers == pattern.count("*")
    assert kv_cache_bytes_per_token(m, "bf16") == 2 * pattern.count("*") * 2 * 2 * 64
    groups = extra.get("mamba_n_groups", extra.get("n_groups", 8))
    # Mamba-2 state per layer: conv over x, B and C (256 + 2 x groups x 16 channels, 4 taps) + 256 x 16
    assert m.state_numbers_per_sequence == pattern.count("M") * ((256 + 2 * groups * 16) * 4 + 256 * 16)


def test_nemotron_h_class_default_by_hand():
    """NemotronHConfig(): blocks Mamba, MoE, attention, MLP (hidden 4,096; 8 non-gated experts of 7,688 and one
    shared MLP of 7,688; a 21,504 MLP; 32 heads, 8 KV heads of 128; Mamba-2 of 128 heads x 64, 8 groups,
    state 128, conv 4)."""
    h, e, fe, f, v = 4096, 8, 7688, 21_504, 131_072
    inner, conv_ch = 128 * 64, 128 * 64 + 2 * 8 * 128
    mamba = h * (inner + conv_ch + 128) + conv_ch * 4 + conv_ch + 3 * 128 + inner + h * inner
    moe = e * h + e * 2 * h * fe + 2 * h * fe          # router, experts, shared MLP (buffer: e below)
    attn = h * 32 * 128 + 2 * h * 8 * 128 + 32 * 128 * h
    mlp = 2 * h * f
    m = Model.from_hf_config({"model_type": "nemotron_h"})
    assert m.n_params == mamba + moe + e + attn + mlp + 4 * h + h + 2 * v * h == 1_968_355_720
    assert m.state_numbers_per_sequence == conv_ch * 4 + inner * 128 == 1_089_536


def test_nemotron_h_refuses_what_a_model_layer_cannot_hold():
    with pytest.raises(ValueError, match="does not follow a Mamba or attention block"):
        Model.from_hf_config({**NEMOTRON_H_SMALL, "hybrid_override_pattern": "M--"})
    with pytest.raises(ValueError, match="moe_latent_size"):
        Model.from_hf_config({**NEMOTRON_H_SMALL, "moe_latent_size": 64})
    with pytest.raises(ValueError, match="mlp_free_layers"):
        Model("x", 2, 64, 4, 128, 100, norms_per_layer=1, mlp_free_layers=(0,))


# ----------------------------------------------------------------------------- small extra tensors per layer
@pytest.mark.parametrize("mtype, per_layer", [
    # BitNetConfig(): 30 layers, hidden 2,560, intermediate 6,912: attn_sub_norm + ffn_sub_norm gains
    ("bitnet", 2560 + 6912),
    # DiffLlamaConfig(): head_dim 64: lambda_q1, lambda_k1, lambda_q2, lambda_k2 (its group norm has no weight)
    ("diffllama", 4 * 64),
    # ApertusConfig() (hidden_act "xielu"): XIELU's alpha_p, alpha_n (parameters) and beta, eps (saved buffers)
    ("apertus", 4),
    ("apertus1p5_text", 4),
])
def test_extra_layer_tensors_by_hand(mtype, per_layer):
    """The model is the Llama-style block of its rule plus these tensors in every layer; without them (the
    same config read, extras dropped) it is short by exactly layers x the tensors, and with them it equals
    transformers' count (parameters plus persistent buffers)."""
    import dataclasses
    row = ROWS[(mtype, "full")]
    m = Model.from_hf_config(_cfg(mtype))
    assert m.n_params == int(row["n_params"]) + int(row["n_persistent_buffers"])
    bare = dataclasses.replace(m, extra_layer_tensors=())
    assert m.n_params - bare.n_params == m.layers * per_layer


def test_xielu_scalars_only_with_xielu():
    m = Model.from_hf_config(dict(_cfg("apertus", "saved"), hidden_act="relu2"))
    assert m.extra_layer_tensors == ()
    with pytest.raises(TypeError, match="extra_layer_tensors"):
        Model("x", 2, 64, 4, 128, 100, extra_layer_tensors=(("weights", "a", (1,)),))


def test_beam_gate_bias_and_lfm3_layout_by_hand():
    """BeamConfig(): 52 layers, 48 heads of 128: a full output gate (hidden 5,120 -> 48 x 128) and one gate bias
    per head in every layer. Lfm3Config(): 24 layers, attention where i % 4 is 2 (6) or 0 with i > 0 (5), conv
    elsewhere: 13 conv layers of 2,048 channels and 7 taps (2,048 x 7 state numbers each), 11 attention layers
    (4 KV heads of 128)."""
    import dataclasses
    beam = Model.from_hf_config(_cfg("beam"))
    no_gate = dataclasses.replace(beam, attn_gate=None, extra_layer_tensors=())
    assert beam.n_params - no_gate.n_params == 52 * (5120 * 48 * 128 + 48)
    lfm3 = Model.from_hf_config(_cfg("lfm3"))
    assert (lfm3.n_mixer_layers, lfm3.n_attention_layers) == (13, 11)
    assert lfm3.state_numbers_per_sequence == 13 * 2048 * 7 == int(ROWS[("lfm3", "full")]["state_per_sequence"])
    assert kv_cache_bytes_per_token(lfm3, "bf16") == 2 * 11 * 2 * 4 * 128


def test_recurrent_gemma_by_hand():
    """RecurrentGemmaConfig(): 26 layers of (recurrent, recurrent, attention) repeated: 18 RG-LRU layers of
    2,560 channels in 10 gate blocks of 256, conv of 4 taps; 8 local-attention layers (10 heads of 256, 10 KV
    heads as num_key_value_heads None gives). RG-LRU per layer: linear_y and linear_x with biases, linear_out
    with bias, conv weight and bias, recurrent_param, two block-diagonal gates with biases; an attention layer
    instead: q, k, v, o of 2,560 x 2,560, a bias on o only (attention_bias False)."""
    h, d, heads, b = 2560, 2560, 10, 256
    rglru = 2 * (d * h + d) + h * d + h + d * 4 + d + d + 2 * (heads * b * b + heads * b)
    m = Model.from_hf_config(_cfg("recurrent_gemma"))
    import dataclasses
    attention_only = dataclasses.replace(m, mixer=None, mixer_layers=None)
    attn = 4 * h * h + h
    assert m.n_params - attention_only.n_params == 18 * (rglru - attn)
    assert m.n_params == int(ROWS[("recurrent_gemma", "full")]["n_params"])
    # state: 3 conv inputs and one recurrent number per channel, per RG-LRU layer (transformers' own modules)
    assert m.state_numbers_per_sequence == 18 * (3 * d + d) == int(ROWS[("recurrent_gemma", "full")]
                                                                   ["state_per_sequence"])


def test_axk1_norm_in_the_moe_layers_only():
    """AXK1MoE (modeling_axk1.py) adds post_mlp_layernorm (a gain of hidden_size) in each MoE layer
    only: the config's own mlp_layer_types counts them."""
    import dataclasses
    cfg = _cfg("axk1")
    m = Model.from_hf_config(cfg)
    n_moe = cfg["mlp_layer_types"].count("sparse")
    assert m.n_moe_layers == n_moe > 0
    bare = dataclasses.replace(m, extra_layer_tensors=())
    assert m.n_params - bare.n_params == n_moe * cfg["hidden_size"]
    assert m.n_params == int(ROWS[("axk1", "full")]["n_params"]) + int(ROWS[("axk1", "full")]
                                                                       ["n_persistent_buffers"])


def test_bailing_hybrid_by_hand_and_as_the_hub_writes_it():
    """BailingHybridConfig(): 42 layers, every 6th MLA attention (7), 35 linear layers of 32 heads x 128 with
    full-rank gates. Per linear layer: q, k, v, f_proj, g_proj (4,096 x 2,560 each), conv (3 x 4,096 x 4),
    dt_bias 4,096, A_log 32, b_proj 32 x 2,560, o_norm 128, o_proj 2,560 x 4,096. State: conv inputs
    3 x 4,096 x 4 and 32 heads x 128 x 128. A config as the Hub writes it (head_dim 128, no linear_* keys)
    describes the same model as the class default."""
    h, d, a, r = 2560, 32 * 128, 32, 128
    layer = 5 * d * h + 3 * d * 4 + d + a + a * h + r + h * d
    m = Model.from_hf_config(_cfg("bailing_hybrid"))
    assert m.n_mixer_layers == 35 and m.mixer.tensors(h) and sum(
        math.prod(s) for _, _, s in m.mixer.tensors(h)) == layer
    assert m.state_numbers_per_sequence == 35 * (3 * d * 4 + a * r * r) == 20_070_400
    assert kv_cache_bytes_per_token(m, "bf16") == 2 * 7 * (512 + 64)
    hub = {key: v for key, v in _cfg("bailing_hybrid", "saved").items() if not key.startswith("linear_")}
    hub["head_dim"] = 128
    assert Model.from_hf_config(hub).n_params == m.n_params


def test_gpt_neox_japanese_by_hand():
    """GPTNeoXJapaneseConfig(): hidden 2,560, 32 layers, MLP 4 x 2,560, vocab 32,000, tied embed_out: per layer
    query_key_value 3 h^2 and dense h^2 (no biases), the MLP 2 h x 4 h, two LayerNorms; one dense_bias of h in
    the last layer; a final LayerNorm."""
    h, n, f, v = 2560, 32, 4 * 2560, 32_000
    m = Model.from_hf_config(_cfg("gpt_neox_japanese"))
    assert m.n_params == n * (4 * h * h + 2 * h * f + 4 * h) + h + 2 * h + v * h == 2_598_837_760
    assert m.n_params == int(ROWS[("gpt_neox_japanese", "full")]["n_params"])
