"""Reading Hugging Face ``config.json`` files into a :class:`~llmsizing.model.Model` (chapter 1, "From a
config file"; issue 24 for the families beyond Llama, Mistral, Qwen2 and GPT-2).

:meth:`Model.from_hf_config <llmsizing.model.Model.from_hf_config>` documents what each family reads; this
module holds the reader: the Hugging Face config classes' defaults (:data:`HF_DEFAULTS`, from transformers
5.24's ``configuration_<type>.py``), the per-family layouts, and the checks whose errors name the config key
and file. Every family's count is checked against transformers' own modules built on the meta device
(``data/hf_meta_param_counts.csv``, ``tools/measure_memory.py hf-counts``; ``tests/test_config_families.py``).
The file's loading and the key reader with its checks (:class:`~llmsizing.hf_reader._ConfigReader`) live in
:mod:`llmsizing.hf_reader` (session 24); this module holds the families' layouts and re-exports them.
"""

from __future__ import annotations

# the tables, and the activation names and MoE keys Model shares, live one level down in model_keys
# (issue 32)
from .model_keys import (_ALIASES, _FAMILY_KEY_OF_FIELD, _GPT2_KEY_OF_FIELD,  # noqa: F401
                         _HF_ACTIVATION_ALIASES, _HF_KEY_OF_FIELD, _LLAMA_FLAGS, _MOE_FAMILIES, _MULTIMODAL,
                         ACTIVATIONS, HF_DEFAULTS, HF_FAMILIES, MOE_KEYS, moe_layer_indices)
from .hf_generic import generic_fields
# the file's loading and the key reader with its checks live in hf_reader; their names stay importable here
from .hf_reader import (_ConfigReader, _digits, _HugeInt, _load_hf_config, _parse_int, _short,  # noqa: F401
                        _with_positions)
from .hf_ssm import SSM_TYPES, ssm_fields
from .hf_types import REFUSED_TYPES, TYPE_RULES


def model_from_hf_config(cls, config, name=None):
    """:meth:`Model.from_hf_config <llmsizing.model.Model.from_hf_config>` (its docstring says what each
    family reads): ``cls(...)`` from a Hugging Face config dict or file."""
    config, where = _load_hf_config(config)
    if name is not None and (not isinstance(name, str) or not name):
        raise TypeError(f"name must be a non-empty string or None, got {name!r}")
    mtype = config.get("model_type")
    if mtype is not None and not isinstance(mtype, str):     # (a list or dict cannot even be looked up)
        raise TypeError(f"{where}: model_type must be a string, one of {', '.join(HF_FAMILIES)}; got "
                        f"{type(mtype).__name__} {_short(mtype)}")
    name = name or str(config.get("_name_or_path") or mtype)
    if mtype in _MULTIMODAL and isinstance(config.get("text_config"), dict):
        # the text model of a multimodal config (Gemma 3, Llama 4): counted without the vision tower
        config, mtype = dict(config["text_config"]), _MULTIMODAL[mtype]
        config.setdefault("model_type", mtype)
        where = f"{where} (text_config)"
    elif (isinstance(mtype, str) and mtype not in HF_DEFAULTS and mtype not in TYPE_RULES
          and mtype not in REFUSED_TYPES and isinstance(config.get("text_config"), dict)
          and isinstance(config["text_config"].get("model_type"), str)):
        # any other multimodal config whose text model is a type read here (GOT-OCR2's qwen2): its text model
        config = config["text_config"]
        where, mtype = f"{where} (text_config)", config["model_type"]
    if isinstance(mtype, str) and mtype in REFUSED_TYPES:
        raise ValueError(f"{where}: model_type {mtype!r} is not read by from_hf_config: "
                         f"{REFUSED_TYPES[mtype]}. Build a Model(...) by hand if its layers allow; the types "
                         f"it reads: {', '.join(HF_FAMILIES)} and llmsizing.hf_types.TYPE_RULES")
    if isinstance(mtype, str) and mtype in SSM_TYPES:
        try:
            return cls(name=name, **_with_positions(config, where, mtype, ssm_fields(config, where, mtype)))
        except (TypeError, ValueError) as exc:
            text = str(exc)
            raise type(exc)(text if text.startswith(where) else f"{where} ({SSM_TYPES[mtype][1]}): {text}") \
                from None
    if isinstance(mtype, str) and mtype in TYPE_RULES and mtype not in HF_DEFAULTS:
        rule = TYPE_RULES[mtype]
        try:
            return cls(name=name, **_with_positions(config, where, mtype,
                                                    generic_fields(config, where, mtype, rule)))
        except (TypeError, ValueError) as exc:
            text = str(exc)
            raise type(exc)(text if text.startswith(where) else f"{where} ({rule.source}): {text}") from None
    moe = [k for k in MOE_KEYS if config.get(k) not in (None, 0, False)]
    if moe and mtype not in _MOE_FAMILIES:
        seen = ", ".join(f"{k}={_short(config[k])}" for k in moe)
        raise ValueError(f"{where}: {seen} {'marks' if len(moe) == 1 else 'mark'} a mixture-of-experts model "
                         f"(model_type {_short(mtype)}), which from_hf_config does not read for that "
                         f"model_type; a dense count of a mixture of experts leaves out all its experts but "
                         f"one. Mixture-of-experts families it reads: {', '.join(sorted(_MOE_FAMILIES))}")
    if mtype in _MULTIMODAL:
        raise ValueError(f"{where}: a {mtype} config is read through its text_config (a dict of the text "
                         "model's keys), which this one lacks")
    if not isinstance(mtype, str) or mtype not in HF_DEFAULTS:
        raise ValueError(f"{where}: unsupported model_type {_short(mtype)}; supported: "
                         f"{', '.join(HF_FAMILIES)}. Build a Model(...) by hand for other architectures.")
    get = _ConfigReader(config, where, mtype)
    if mtype == "gpt2":
        hidden, heads = get.int("n_embd"), get.int("n_head")
        get.divisible("n_embd", hidden, "n_head", heads)
        fields = dict(layers=get.int("n_layer"), hidden=hidden, heads=heads, ffn_hidden=get.int("n_inner"),
                      vocab=get.int("vocab_size"), gated_mlp=False,
                      tied_embeddings=get.bool("tie_word_embeddings"), norm="layernorm", bias=True,
                      learned_pos=True, max_seq=get.int("n_positions"), fused_qkv=True,     # c_attn
                      activation=get.activation("activation_function"))
        fields["ffn_hidden"] = 4 * hidden if fields["ffn_hidden"] is None else fields["ffn_hidden"]
        return get.build(cls, name, fields)
    if mtype in _OTHER_LAYOUTS:
        return get.build(cls, name, _OTHER_LAYOUTS[mtype](get))
    heads, hidden = get.int("num_attention_heads"), get.int("hidden_size")
    mla = mtype in ("deepseek_v2", "deepseek_v3")
    head_dim = None if mla else get.int("head_dim")
    get.used.add("head_dim")          # (MLA: DeepseekV2Config derives it from the q/k dims, read below)
    if head_dim is None and not mla:
        get.divisible("hidden_size", hidden, "num_attention_heads", heads)
    kv = heads if mla else get.kv_heads(heads)
    bias = qkv_bias = False
    mlp_bias = None
    if mtype == "llama":
        # Llama's attention_bias puts a bias on q, k, v AND o; mlp_bias on gate, up and down
        attn_bias, mlp_b = get.bool("attention_bias"), get.bool("mlp_bias")
        bias, mlp_bias = attn_bias, (None if mlp_b == attn_bias else mlp_b)
    elif mtype == "qwen2":
        qkv_bias = True          # Qwen2Attention hard-codes bias on q, k, v; attention_bias is ignored
    elif mtype == "qwen2_moe":
        qkv_bias = get.bool("qkv_bias")
    elif mtype == "gpt_oss":
        bias, mlp_bias = get.bool("attention_bias"), True          # experts' biases are always there
    elif mtype == "nemotron":
        attn_bias, mlp_b = get.bool("attention_bias"), get.bool("mlp_bias")
        bias, mlp_bias = attn_bias, (None if mlp_b == attn_bias else mlp_b)
    elif "attention_bias" in HF_DEFAULTS[mtype]:
        if get.bool("attention_bias"):
            if mla:
                raise ValueError(f"{where}: attention_bias=true is not supported for {mtype} (multi-head "
                                 "latent attention without biases only)")
            bias, mlp_bias = True, False                             # q, k, v, o only
    layers = get.int("num_hidden_layers")
    act_key = "hidden_activation" if config.get("hidden_activation") is not None else "hidden_act"
    fields = dict(layers=layers, hidden=hidden, heads=heads, kv_heads=kv, head_dim=head_dim,
                  ffn_hidden=get.int("intermediate_size"), vocab=get.int("vocab_size"),
                  gated_mlp=mtype != "nemotron", tied_embeddings=get.bool("tie_word_embeddings"),
                  norm="layernorm" if mtype == "nemotron" else "rmsnorm", bias=bias, qkv_bias=qkv_bias,
                  learned_pos=False, max_seq=get.int("max_position_embeddings"),
                  activation=get.activation(act_key), mlp_bias=mlp_bias)
    if mtype in ("mistral", "qwen2", "llama"):
        fields["sliding_window"] = get.window(layers)
    else:
        fields.update(get.layer_windows(layers))
    if mtype in ("qwen3", "qwen3_moe", "gemma3_text"):
        fields["qk_norm"] = "head"
    elif mtype == "olmo2":
        fields["qk_norm"] = "proj"
    if mtype in ("gemma2", "gemma3_text"):
        fields["norms_per_layer"] = 4
    if mtype == "phi3":
        fields["fused_qkv"] = True
    if mtype == "gpt_oss":
        fields["attn_sinks"] = True
    if mla:
        fields.update(q_lora_rank=get.opt_int("q_lora_rank"), kv_lora_rank=get.int("kv_lora_rank"),
                      qk_rope_head_dim=get.int("qk_rope_head_dim"),
                      qk_nope_head_dim=get.int("qk_nope_head_dim"), v_head_dim=get.int("v_head_dim"))
    if mtype in _MOE_FAMILIES:
        fields.update(get.moe(layers))
        if mtype == "llama4_text":    # dense layers are intermediate_size_mlp wide, experts intermediate_size
            fields["ffn_hidden"] = get.int("intermediate_size_mlp")
            if get.bool("use_qk_norm"):       # modeling_llama4's Llama4TextL2Norm: no gains, rotating layers
                fields["qk_norm"] = "head_l2"
    return get.build(cls, name, fields)



def _gpt_neox_fields(get: "_ConfigReader") -> dict:
    hidden, heads = get.int("hidden_size"), get.int("num_attention_heads")
    get.divisible("hidden_size", hidden, "num_attention_heads", heads)
    attn_bias = get.bool("attention_bias")          # query_key_value and dense; the MLP always has biases
    return dict(layers=get.int("num_hidden_layers"), hidden=hidden, heads=heads,
                ffn_hidden=get.int("intermediate_size"), vocab=get.int("vocab_size"), gated_mlp=False,
                tied_embeddings=get.bool("tie_word_embeddings"), norm="layernorm", bias=attn_bias,
                mlp_bias=None if attn_bias else True, fused_qkv=True, activation=get.activation("hidden_act"),
                max_seq=get.int("max_position_embeddings"), parallel_block=get.bool("use_parallel_residual"))


def _falcon_fields(get: "_ConfigReader") -> dict:
    hidden, heads = get.int("hidden_size"), get.int("num_attention_heads")
    get.divisible("hidden_size", hidden, "num_attention_heads", heads)
    new, parallel = get.bool("new_decoder_architecture"), get.bool("parallel_attn")
    # modeling_falcon.py sizes query_key_value from num_kv_heads only with the new architecture; ALiBi has no
    # parameters
    get.used.update(("num_kv_heads", "alibi"))
    if new:                                       # grouped keys: (heads + 2 num_kv_heads) x head_dim rows
        kv = get.int("num_kv_heads")
        kv = heads if kv is None else kv
    else:                                         # multi-query: one key and value head, or none shared
        kv = 1 if get.bool("multi_query") else heads
    if not parallel:
        norms = 2
    else:                                         # modeling_falcon.py: 2 with the new architecture by default
        n_ln = get.int("num_ln_in_parallel_attn")
        n_ln = 2 if n_ln is None and new else n_ln
        norms = 2 if n_ln == 2 else 1
    ffn = get.int("ffn_hidden_size")
    return dict(layers=get.int("num_hidden_layers"), hidden=hidden, heads=heads, kv_heads=kv,
                ffn_hidden=4 * hidden if ffn is None else ffn, vocab=get.int("vocab_size"), gated_mlp=False,
                tied_embeddings=get.bool("tie_word_embeddings"), norm="layernorm", bias=get.bool("bias"),
                fused_qkv=True, activation=get.activation("activation"),
                max_seq=get.int("max_position_embeddings"), norms_per_layer=norms,
                parallel_block=parallel or new)


def _opt_fields(get: "_ConfigReader") -> dict:
    hidden, heads = get.int("hidden_size"), get.int("num_attention_heads")
    get.divisible("hidden_size", hidden, "num_attention_heads", heads)
    proj = get.int("word_embed_proj_dim")
    if proj is not None and proj != hidden:
        raise ValueError(f"{get.where}: word_embed_proj_dim ({proj}) != hidden_size ({hidden}) adds OPT's "
                         "project_in/project_out matrices (OPT-350m), which Model does not represent")
    if not get.bool("do_layer_norm_before") or get.bool("_remove_final_layer_norm") or \
            not get.bool("layer_norm_elementwise_affine"):
        raise ValueError(f"{get.where}: OPT with do_layer_norm_before=false, _remove_final_layer_norm=true "
                         "or layer_norm_elementwise_affine=false (OPT-350m's post-norm layout) is not "
                         "supported")
    return dict(layers=get.int("num_hidden_layers"), hidden=hidden, heads=heads,
                ffn_hidden=get.int("ffn_dim"), vocab=get.int("vocab_size"), gated_mlp=False,
                tied_embeddings=get.bool("tie_word_embeddings"), norm="layernorm",
                bias=get.bool("enable_bias"), learned_pos=True, pos_offset=2,
                max_seq=get.int("max_position_embeddings"), activation=get.activation("activation_function"))


def _bloom_fields(get: "_ConfigReader") -> dict:
    hidden, heads = get.int("hidden_size"), get.int("n_head")
    get.divisible("hidden_size", hidden, "n_head", heads)
    return dict(layers=get.int("n_layer"), hidden=hidden, heads=heads, ffn_hidden=4 * hidden,
                vocab=get.int("vocab_size"), gated_mlp=False, tied_embeddings=get.bool("tie_word_embeddings"),
                norm="layernorm", bias=True, fused_qkv=True, embed_norm=True, activation="gelu",
                max_seq=get.int("seq_length"))


_OTHER_LAYOUTS = {"gpt_neox": _gpt_neox_fields, "falcon": _falcon_fields, "opt": _opt_fields,
                  "bloom": _bloom_fields}
