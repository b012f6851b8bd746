"""The names and config keys a model is described by, below both :mod:`llmsizing.model` and the config reader
:mod:`llmsizing.hf_config` (issue 32: each imports them from here, so neither imports the other's tables and
the two form no circle).

The activation names and the keys that mark a mixture of experts, :func:`moe_layer_indices`, and the config
reader's tables: the ``model_type`` values it reads (:data:`HF_FAMILIES`), the Hugging Face config classes'
defaults (:data:`HF_DEFAULTS`, from transformers 5.24's ``configuration_<type>.py``), the keys a config may
give under another name and the config key each :class:`~llmsizing.model.Model` field is read from (for error
messages). :mod:`llmsizing.model` and :mod:`llmsizing.hf_config` re-export every name, so their old import
paths keep working.
"""

from __future__ import annotations

from ._validate import check_int


#: MLP activation functions by their Hugging Face names (``hidden_act`` / ``activation_function``); with
#: ``gated_mlp`` the activation is applied to the gate (``silu`` gives SwiGLU, ``gelu_pytorch_tanh`` GeGLU).
#: ``relu2`` is the squared ReLU of Nemotron (So et al. 2021, "Primer"), applied to a two-matrix MLP.
ACTIVATIONS = ("silu", "gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "relu2")
_HF_ACTIVATION_ALIASES = {"swish": "silu", "gelu_fast": "gelu_new", "gelu_python": "gelu",
                          "bloom_gelu": "gelu_new"}

#: Config keys that mark a mixture-of-experts model (Mixtral, Qwen-MoE, OLMoE, DeepSeek, ...).
#: ``from_hf_config`` reads them for the MoE families it knows (:data:`HF_FAMILIES`) and refuses them under
#: any other ``model_type``: a dense count of a mixture of experts is badly wrong (85% low for Mixtral 8x7B).
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok",
            "moe_intermediate_size", "n_shared_experts", "num_shared_experts", "moe_num_experts")


def moe_layer_indices(layers: int, *, first_dense: int = 0, every: int = 1,
                      dense_layers=()) -> tuple[int, ...]:
    """The indices of the MoE layers of a ``layers``-layer model, as
    :attr:`Model.moe_layers <llmsizing.model.Model.moe_layers>` takes them: from layer ``first_dense`` on
    (DeepSeek's ``first_k_dense_replace``), the layers ``i`` with ``(i + 1) % every == 0`` (Qwen-MoE's
    ``decoder_sparse_step``, Llama 4's ``interleave_moe_layer_step``), less ``dense_layers`` (Qwen-MoE's
    ``mlp_only_layers``)."""
    layers = check_int("layers", layers)
    first_dense = check_int("first_dense", first_dense, minimum=0)
    every = check_int("every", every)
    skip = {check_int("dense_layers[i]", i, minimum=0) for i in dense_layers}
    return tuple(i for i in range(first_dense, layers) if (i + 1) % every == 0 and i not in skip)


#: The ``model_type`` values :meth:`Model.from_hf_config <llmsizing.model.Model.from_hf_config>` reads, dense
#: then mixtures of experts.
HF_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "gemma3", "phi3",
               "olmo2", "nemotron", "gpt_neox", "falcon", "opt", "bloom", "gpt2", "mixtral", "qwen2_moe",
               "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss", "llama4_text", "llama4")
_MOE_FAMILIES = frozenset({"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss",
                           "llama4_text"})
#: Multimodal configs whose ``text_config`` is read as the given text ``model_type``.
_MULTIMODAL = {"gemma3": "gemma3_text", "llama4": "llama4_text"}

_LLAMA_FLAGS = {"num_key_value_heads": None, "head_dim": None, "tie_word_embeddings": False,
                "hidden_act": "silu"}

#: The defaults of the Hugging Face config classes (``transformers`` 5.x ``configuration_<type>.py``) for the
#: keys ``from_hf_config`` reads, used when a key is absent. ``None`` means "computed": ``head_dim`` is
#: ``hidden_size // num_attention_heads``, a ``null``/``None`` ``num_key_value_heads`` the head count, GPT-2's
#: ``n_inner`` ``4 x n_embd``. Keys without a default here (the shape: layers, widths, heads, vocabulary) are
#: required.
HF_DEFAULTS: dict[str, dict] = {
    "llama": {"num_key_value_heads": None, "head_dim": None, "max_position_embeddings": 2048,
              "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False},
    "mistral": {"num_key_value_heads": 8, "head_dim": None, "max_position_embeddings": 4096 * 32,
                "tie_word_embeddings": False, "hidden_act": "silu", "sliding_window": 4096},
    "qwen2": {"num_key_value_heads": 32, "head_dim": None, "max_position_embeddings": 32768,
              "tie_word_embeddings": False, "hidden_act": "silu", "use_sliding_window": False,
              "sliding_window": 4096, "max_window_layers": 28, "layer_types": None},
    "gpt2": {"n_inner": None, "n_positions": 1024, "tie_word_embeddings": True,
             "activation_function": "gelu_new"},
    "qwen3": {**_LLAMA_FLAGS, "num_key_value_heads": 32, "head_dim": 128, "max_position_embeddings": 32768,
              "attention_bias": False, "use_sliding_window": False},
    "gemma": {**_LLAMA_FLAGS, "num_key_value_heads": 16, "head_dim": 256, "max_position_embeddings": 8192,
              "tie_word_embeddings": True, "hidden_act": "gelu_pytorch_tanh", "attention_bias": False},
    "gemma2": {**_LLAMA_FLAGS, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 8192,
               "tie_word_embeddings": True, "hidden_act": "gelu_pytorch_tanh", "attention_bias": False,
               "sliding_window": 4096, "layer_types": None},
    "gemma3_text": {**_LLAMA_FLAGS, "num_key_value_heads": 4, "head_dim": 256,
                    "max_position_embeddings": 131072, "tie_word_embeddings": True,
                    "hidden_act": "gelu_pytorch_tanh", "attention_bias": False, "sliding_window": 4096,
                    "layer_types": None, "sliding_window_pattern": 6},
    "phi3": {**_LLAMA_FLAGS, "max_position_embeddings": 4096, "sliding_window": None},
    "olmo2": {**_LLAMA_FLAGS, "max_position_embeddings": 2048, "attention_bias": False},
    "nemotron": {**_LLAMA_FLAGS, "max_position_embeddings": 4096, "hidden_act": "relu2",
                 "attention_bias": False, "mlp_bias": False},
    "gpt_neox": {"max_position_embeddings": 2048, "tie_word_embeddings": False, "hidden_act": "gelu",
                 "attention_bias": True, "use_parallel_residual": True},
    "falcon": {"max_position_embeddings": 2048, "tie_word_embeddings": True, "parallel_attn": True,
               "new_decoder_architecture": False, "multi_query": True, "num_kv_heads": None, "bias": False,
               "ffn_hidden_size": None, "num_ln_in_parallel_attn": None, "activation": "gelu"},
    "opt": {"max_position_embeddings": 2048, "tie_word_embeddings": True, "enable_bias": True,
            "activation_function": "relu", "word_embed_proj_dim": None, "do_layer_norm_before": True,
            "_remove_final_layer_norm": False, "layer_norm_elementwise_affine": True},
    # BLOOM has ALiBi and no position table; seq_length (2048, its training length) is not a BloomConfig key
    "bloom": {"tie_word_embeddings": True, "seq_length": 2048},
    "mixtral": {**_LLAMA_FLAGS, "num_key_value_heads": 8, "max_position_embeddings": 4096 * 32,
                "sliding_window": None, "num_local_experts": 8, "num_experts_per_tok": 2},
    "qwen2_moe": {**_LLAMA_FLAGS, "num_key_value_heads": 16, "max_position_embeddings": 32768,
                  "qkv_bias": True, "use_sliding_window": False, "sliding_window": 4096,
                  "max_window_layers": 28, "layer_types": None, "num_experts": 60, "num_experts_per_tok": 4,
                  "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
                  "decoder_sparse_step": 1, "mlp_only_layers": None},
    "qwen3_moe": {**_LLAMA_FLAGS, "num_key_value_heads": 4, "max_position_embeddings": 32768,
                  "attention_bias": False, "use_sliding_window": False, "num_experts": 128,
                  "num_experts_per_tok": 8, "moe_intermediate_size": 768, "decoder_sparse_step": 1,
                  "mlp_only_layers": None},
    "deepseek_v2": {**_LLAMA_FLAGS, "max_position_embeddings": 2048, "attention_bias": False,
                    "n_routed_experts": 64, "n_shared_experts": 2, "moe_intermediate_size": 1407,
                    "first_k_dense_replace": 0, "moe_layer_freq": 1, "q_lora_rank": 1536, "kv_lora_rank": 512,
                    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
                    "topk_method": "greedy", "n_group": None, "topk_group": None},
    "deepseek_v3": {**_LLAMA_FLAGS, "max_position_embeddings": 4096, "attention_bias": False,
                    "n_routed_experts": 256, "n_shared_experts": 1, "moe_intermediate_size": 2048,
                    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1,
                    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                    "v_head_dim": 128, "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4},
    "gpt_oss": {**_LLAMA_FLAGS, "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131072,
                "attention_bias": True, "sliding_window": 128, "layer_types": None, "num_local_experts": 128,
                "num_experts_per_tok": 4},
    "llama4_text": {**_LLAMA_FLAGS, "num_key_value_heads": 8, "head_dim": 128,
                    "max_position_embeddings": 131072, "attention_bias": False, "num_local_experts": 16,
                    "num_experts_per_tok": 1, "moe_layers": None, "interleave_moe_layer_step": 1,
                    "layer_types": None, "no_rope_layers": None, "no_rope_layer_interval": 4,
                    "attention_chunk_size": 8192},
}

#: Keys a config may give under another name (Hugging Face's ``attribute_map`` and backward-compatible
#: kwargs).
_ALIASES = {"bloom": {"n_layer": ("num_hidden_layers",), "n_head": ("num_attention_heads",),
                      "hidden_size": ("n_embed",)}}

#: The config key each :class:`Model` field is read from, by ``model_type`` (for error messages).
_HF_KEY_OF_FIELD = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
                    "kv_heads": "num_key_value_heads", "head_dim": "head_dim",
                    "ffn_hidden": "intermediate_size", "vocab": "vocab_size",
                    "max_seq": "max_position_embeddings", "activation": "hidden_act",
                    "tied_embeddings": "tie_word_embeddings", "sliding_window": "sliding_window",
                    "experts_per_token": "num_experts_per_tok", "expert_ffn_hidden": "moe_intermediate_size",
                    "experts": "num_local_experts"}
_GPT2_KEY_OF_FIELD = {**_HF_KEY_OF_FIELD, "layers": "n_layer", "hidden": "n_embd", "heads": "n_head",
                      "ffn_hidden": "n_inner", "max_seq": "n_positions", "activation": "activation_function"}
_FAMILY_KEY_OF_FIELD = {
    "gpt2": _GPT2_KEY_OF_FIELD,
    "qwen2_moe": {**_HF_KEY_OF_FIELD, "experts": "num_experts"},
    "qwen3_moe": {**_HF_KEY_OF_FIELD, "experts": "num_experts"},
    "deepseek_v2": {**_HF_KEY_OF_FIELD, "experts": "n_routed_experts"},
    "deepseek_v3": {**_HF_KEY_OF_FIELD, "experts": "n_routed_experts"},
    "llama4_text": {**_HF_KEY_OF_FIELD, "expert_ffn_hidden": "intermediate_size",
                    "ffn_hidden": "intermediate_size_mlp"},
    "falcon": {**_HF_KEY_OF_FIELD, "kv_heads": "num_kv_heads", "ffn_hidden": "ffn_hidden_size",
               "activation": "activation"},
    "opt": {**_HF_KEY_OF_FIELD, "ffn_hidden": "ffn_dim", "activation": "activation_function"},
    "bloom": {**_HF_KEY_OF_FIELD, "layers": "n_layer", "heads": "n_head", "max_seq": "seq_length"},
}


__all__ = ["ACTIVATIONS", "MOE_KEYS", "moe_layer_indices", "HF_FAMILIES", "HF_DEFAULTS"]
