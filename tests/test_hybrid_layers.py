"""Issue 36: layers with a fixed state per sequence (Mamba, Mamba-2, linear attention) in the KV-cache and serving
figures. Expected values are worked out by hand from the transformers class defaults (``JambaConfig()``: 32
layers, attention in layers 4, 12, 20, 28, 8 KV heads of 128; Mamba of 2 x 4096 channels, d_state 16, d_conv 4;
``LaraMiniConfig()``: 34 layers in the period linear, sliding, linear, full, sliding; window 512)."""

from __future__ import annotations

import pytest

from llmsizing import Model
from llmsizing.inference import (inference_memory, kv_cache_bytes_per_token, kv_cached_tokens,
                                 state_bytes_per_sequence)
from llmsizing.layer_kinds import StateMixer
from llmsizing.serve_engine import kv_capacity_tokens, state_bytes_per_gpu

# vLLM's default max_num_seqs on an H100 SXM (vllm/engine/arg_utils.py, EngineArgs: 1024 when the device's
# total memory is >= 70 GiB and its name has no "a100"; 81,559 MiB = 79.6 GiB): the states set aside
H100_MAX_NUM_SEQS = 1024

JAMBA_KV = 4 * 2 * 8 * 128 * 2                          # 4 attention layers, K and V, bf16: 16,384 bytes
JAMBA_STATE = 28 * (8192 * 4 + 8192 * 16) * 2           # 28 Mamba layers: conv + SSM state, bf16


def jamba():
    return Model.from_hf_config({"model_type": "jamba"})


def test_kv_counts_attention_layers_only_and_the_state_is_per_sequence():
    m = jamba()
    assert (m.n_attention_layers, m.n_mixer_layers) == (4, 28)
    assert kv_cache_bytes_per_token(m) == JAMBA_KV
    assert state_bytes_per_sequence(m) == JAMBA_STATE == 9_175_040
    mem = inference_memory(m, batch=3, context=1000)
    assert mem.kv_cache_bytes == 3 * 1000 * JAMBA_KV + 3 * JAMBA_STATE


def test_windows_among_mixer_layers_average_over_the_attention_layers():
    m = Model.from_hf_config({"model_type": "lara_mini"})
    sliding, full = 13, 7                                 # i % 5 in (1, 4) and i % 5 == 3 for i < 34
    assert (m.n_attention_layers, m.n_window_layers) == (sliding + full, sliding)
    assert kv_cached_tokens(m, 4096) == (sliding * 512 + full * 4096) / (sliding + full)
    assert kv_cache_bytes_per_token(m) == (sliding + full) * 2 * 4 * 128 * 2


def test_serving_sets_the_state_aside_for_every_running_sequence():
    m = jamba()
    plain = m.with_(mixer=None, mixer_layers=None)        # the same model as if every layer attended
    assert state_bytes_per_gpu(m, tp=2) == JAMBA_STATE / 2
    with_state = kv_capacity_tokens(m, "H100 SXM", tp=2)
    # the same weights and activations; the KV room is smaller by max_num_seqs states per GPU
    dense_room = kv_capacity_tokens(plain.with_(), "H100 SXM", tp=2)
    assert with_state.block_bytes == 16 * JAMBA_KV / 2
    assert dense_room.block_bytes == 16 * 32 * 2 * 8 * 128 * 2 / 2
    assert with_state.kv_bytes == pytest.approx(
        with_state.usable_bytes - with_state.weights_bytes - with_state.activation_peak_bytes
        - with_state.non_torch_bytes - with_state.cuda_graph_bytes - H100_MAX_NUM_SEQS * JAMBA_STATE / 2)


def test_a_model_without_attention_has_no_token_capacity_but_says_why():
    m = Model.from_hf_config({"model_type": "mamba2"})
    assert kv_cache_bytes_per_token(m) == 0
    with pytest.raises(ValueError, match="no attention layer"):
        kv_capacity_tokens(m, "H100 SXM")


def test_mixer_fields_are_checked():
    mix = StateMixer("mamba", inner=64, state=4, dt_rank=2)
    with pytest.raises(ValueError, match="mixer_mlp=False"):
        Model("x", layers=2, hidden=32, heads=4, ffn_hidden=64, vocab=10, mixer=mix, mixer_layers=(0,),
              mixer_mlp=False)
    with pytest.raises(ValueError, match="give mixer"):
        Model("x", layers=2, hidden=32, heads=4, ffn_hidden=64, vocab=10, mixer_layers=(0,))
    with pytest.raises(ValueError, match="kind"):
        StateMixer("xlstm", inner=64, state=4)
    with pytest.raises(ValueError, match="heads"):
        StateMixer("mamba2", inner=64, state=4, heads=3)


def test_parameter_breakdown_of_a_hybrid_sums_to_its_count():
    for t in ("jamba", "falcon_h1", "qwen3_next", "mamba"):
        m = Model.from_hf_config({"model_type": t})
        assert sum(m.param_breakdown().values()) == m.n_params


def test_gpt_neo_local_layers_are_windows_and_its_output_bias_stands_alone():
    """GPTNeoConfig(): 24 layers alternating global and local (window_size 256), hidden 2048, q/k/v without
    biases and out_proj with one (modeling_gpt_neo.py)."""
    m = Model.from_hf_config({"model_type": "gpt_neo"})
    assert (m.sliding_window, m.n_window_layers) == (256, 12)
    assert kv_cached_tokens(m, 2048) == (12 * 256 + 12 * 2048) / 24
    names = {n for _, n, _, _ in m.tensors()}
    assert "layers.o_proj.bias" in names and "layers.q_proj.bias" not in names


def test_attention_flops_count_the_attention_layers_only():
    """Jamba: 4 attention layers of 32 heads x 128; at 1,000 keys the core is 4 x 1000 x 32 x 128 x 4 FLOPs."""
    from llmsizing.flops import attention_flops_per_token
    assert attention_flops_per_token(jamba(), seq=1000) == 4 * 1000 * 32 * 128 * 4


def test_lfm2_short_convolution_layers_by_hand():
    """LFM2-1.2B's layout (16 layers, attention in 2, 5, 8, 10, 12, 14; hidden 2048, 32 heads of 64, 8 KV
    heads; intermediate_size 12288 auto-adjusted to 2/3 = 8192; conv_L_cache 3; tied embeddings of 65,536):
    a conv layer is in_proj 3h x h + conv h x 3 + out_proj h x h + 2 norms + MLP 3 x h x 8192, an attention
    layer q, k, v, o + two q/k norms of 64 + 2 norms + the MLP. transformers' meta count of the same config is
    1,170,340,608 (LFM2-1.2B's "1.17B") and its cache holds 61,440 conv-state numbers."""
    h, f = 2048, 8192
    mlp, norms = 3 * h * f, 2 * h
    conv = 3 * h * h + h * 3 + h * h + norms + mlp
    attn = h * h + 2 * 8 * 64 * h + h * h + 2 * 64 + norms + mlp
    m = Model.from_hf_config({"model_type": "lfm2", "hidden_size": h, "num_hidden_layers": 16,
                              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 12288,
                              "vocab_size": 65536, "full_attn_idxs": [2, 5, 8, 10, 12, 14]})
    assert m.n_params == 10 * conv + 6 * attn + 65536 * h + h == 1_170_340_608
    assert m.state_numbers_per_sequence == 10 * h * 3
    assert kv_cache_bytes_per_token(m) == 6 * 2 * 8 * 64 * 2


def test_decode_step_reads_and_writes_the_state():
    """Issue 36: each decode step of a Mamba-2 layer reads its per-sequence state and writes it back. One
    attention layer (4 heads of 64: K and V, 2 bytes: 1,024 B per token) and three Mamba-2 layers (512
    channels, 8 heads, one group, state 16, conv 4: (512 + 2 x 16) x 4 + 512 x 16 = 10,368 numbers, 2 bytes)."""
    from llmsizing.serve_step import serving
    m = Model("hybrid", layers=4, hidden=256, heads=4, ffn_hidden=512, vocab=1000,
              mixer=StateMixer("mamba2", inner=512, state=16, conv=4, heads=8, groups=1), mixer_layers=(0, 1, 2))
    one, two = (serving(m, "H100 SXM", batch=b, prompt=1024, output=256) for b in (1, 2))
    cached = 1024 + 256 // 2
    state = 3 * ((512 + 2 * 16) * 4 + 512 * 16) * 2
    assert state == 62_208
    # ... and one more row of the (untied) input embedding gathered: 256 x 2 bytes
    assert two.decode_bytes_per_gpu - one.decode_bytes_per_gpu == pytest.approx(1024 * cached + 2 * state + 512)


def test_state_dtype_fp32_doubles_the_state_terms():
    """Issue 36: an engine may keep a Mamba state in FP32 (vLLM's --mamba-ssm-cache-dtype, Nemotron-H's
    mamba_ssm_cache_dtype) while the KV cache is BF16: the reserve for max_num_seqs sequences and each decode
    step's read and write double (4 bytes instead of 2 per state number)."""
    from llmsizing.serve_step import serving
    m = Model("hybrid", layers=4, hidden=256, heads=4, ffn_hidden=512, vocab=1000,
              mixer=StateMixer("mamba2", inner=512, state=16, conv=4, heads=8, groups=1), mixer_layers=(0, 1, 2))
    state_bf16 = 62_208                                     # test_decode_step_reads_and_writes_the_state
    bf16 = kv_capacity_tokens(m, "H100 SXM")
    fp32 = kv_capacity_tokens(m, "H100 SXM", state_dtype="fp32")
    assert bf16.kv_bytes - fp32.kv_bytes == pytest.approx(H100_MAX_NUM_SEQS * state_bf16)
    one, two = (serving(m, "H100 SXM", batch=2, state_dtype=d) for d in (None, "fp32"))
    assert two.decode_bytes_per_gpu - one.decode_bytes_per_gpu == pytest.approx(2 * 2 * state_bf16)
    with pytest.raises(ValueError, match="state_dtype"):
        kv_capacity_tokens(m, "H100 SXM", state_dtype="fp33")
