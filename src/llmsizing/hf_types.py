"""The Hugging Face model types read by what their config keys mean (issue 36; chapter 1, "Load your model").

Most decoder-only types of ``transformers`` are the Llama block with a few switches: biases on q/k/v (and o),
per-head q/k norms, a norm before and after each sub-block, a mixture of experts with shared experts and dense
first layers. :data:`TYPE_RULES` holds one small :class:`Rule` per type, citing the ``modeling_<type>.py`` it
follows; the keys are read with transformers' own spellings (each config class's ``attribute_map``) and
defaults (its dataclass fields), both from ``data/hf_config_classes.json``, which ``tools/measure_memory.py
hf-sweep`` writes from the installed transformers. Every type here is checked against transformers' own
``...ForCausalLM`` built on the meta device from the class default and from the dict ``save_pretrained``
writes (``data/hf_type_sweep.csv``, ``tests/test_hf_sweep.py``).

Never a guess: a key of the config class that the type's rule does not read, set to a value other than the
class default, and not known to leave every parameter alone (:data:`NO_PARAMETER_KEYS`), is an error naming
the key; so is a spelling of the expert count that the type's config class does not accept, or two spellings
that disagree.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CLASSES_JSON = Path(__file__).resolve().parents[2] / "data" / "hf_config_classes.json"

#: Every spelling of a mixture of experts' routed-expert count and top-k that some transformers config class
#: accepts (its field or an ``attribute_map`` alias).
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
EXPERT_TOPK_KEYS = ("num_experts_per_tok", "num_experts_per_token", "moe_k", "moe_topk")

#: Keys that change no parameter count and no cache byte (token ids, rotary and scaling constants, dropout,
#: initialisation, loss coefficients, output flags): a value other than the class default is fine.
NO_PARAMETER_KEYS = re.compile(
    r"^(.*token_id.*|.*token_index|rope.*|.*_rope_.*|.*dropout.*|.*initializer.*|init_.*|.*_eps|.*epsilon|"
    r"use_cache|dtype|torch_dtype|architectures|_name_or_path|transformers_version|output_.*|return_dict|"
    r".*scaling.*|.*softcap.*|.*softcapping|pretraining_tp|_attn_implementation.*|id2label|label2id|"
    r"problem_type|tokenizer_class|task_specific_params|chunk_size_feed_forward|.*temperature.*|"
    r".*aux_loss.*|router_z_loss.*|norm_topk_prob|routed_scaling_factor|partial_rotary_factor|"
    r"max_position_embeddings|model_type|is_encoder_decoder|is_decoder|add_cross_attention|"
    r"tie_encoder_decoder|prefix|bad_words_ids|.*_multiplier|logit_scale|query_pre_attn_scalar|"
    r"attention_multiplier|residual_multiplier|embedding_multiplier|sliding_window|use_sliding_window|"
    r"max_window_layers|layer_types|hidden_act|hidden_activation|topk_method|n_group|topk_group|"
    r"num_expert_group|scoring_func|seq_aux|.*capacity.*|router_jitter.*|.*_jitter_.*|"
    r"moe_router_.*|use_bias_correction|expert_bias_update_rate|attn_logit_softcapping|"
    r"final_logit_softcapping|cache_implementation|pad_token_id|bos_token_id|eos_token_id|"
    r"num_nextn_predict_layers|num_mtp_layers|mtp_.*|use_qk_norm_|base_model_.*|"
    r"position_embedding_type|use_mup|mup_.*|.*pdrop|original_max_position_embeddings|"
    r"use_bidirectional_attention|swiglu_alpha|swiglu_limit|scale_.*|.*softmax.*|summary_.*|"
    r"reorder_and_upcast_attn|layerdrop|attn_scale|floor_scale|clip_qkv|route_scale|slow_but_exact|"
    r"enable_moe_fp32_combine|sliding_window_pattern|apply_residual_connection_post_layernorm|"
    r"dim_model_base|global_attn_every_n_layers|moe_apply_router_weight_on_input|rotary_dim|n_ctx|"
    r"scale_embedding)$")


@lru_cache(maxsize=1)
def config_classes() -> dict:
    """``data/hf_config_classes.json``: per ``model_type`` the config class name, its ``attribute_map``
    (``{alias: field}``) and the defaults of its dataclass fields, as the installed transformers defines them
    (``tools/measure_memory.py hf-sweep``)."""
    with open(CLASSES_JSON, encoding="utf-8") as fh:
        return json.load(fh)


def class_default(mtype: str, key: str):
    """``(True, default)`` of ``key`` in ``mtype``'s config class, or ``(False, None)`` if it has no such
    field."""
    d = config_classes().get(mtype, {}).get("defaults", {})
    return (key in d), d.get(key)


def synonyms(mtype: str, key: str) -> tuple[str, ...]:
    """``key`` and every spelling ``mtype``'s config class maps to the same field (its ``attribute_map``,
    ``{alias: attribute}``), the dataclass field first (Qwen3-MoE's field ``num_experts`` is stored and saved
    as ``num_local_experts``: both are read)."""
    amap = config_classes().get(mtype, {}).get("attribute_map", {})
    group = {key}
    for _ in range(3):
        group |= {amap[g] for g in group if g in amap} | {a for a, f in amap.items() if f in group}
    fields = config_classes().get(mtype, {}).get("defaults", {})
    return tuple(sorted(group, key=lambda g: (g not in fields, g != key, g)))


@dataclass(frozen=True)
class Moe:
    """A type's mixture of experts (transformers' ``<Type>MoE`` / ``SparseMoeBlock``): routed experts of width
    ``width`` (a key), ``shared`` shared experts (a key giving their number, each of ``width``) or one shared
    expert of width ``shared_width`` (a key), with a sigmoid gate (``shared_gate``); ``router_bias``: the
    router's bias or score-correction buffer (saved in the checkpoint); dense layers: the first
    ``first_dense`` (a key) layers, those not ``(i + 1) % step == 0`` (a key), those listed by ``dense_list``
    (a key)."""

    width: str = "moe_intermediate_size"
    shared: str | None = None
    shared_width: str | None = None
    shared_gate: bool = False
    router_bias: bool = False
    first_dense: str | None = None
    step: str | None = None
    dense_list: str | None = None


@dataclass(frozen=True)
class Rule:
    """How one model type's config maps to a :class:`~llmsizing.model.Model`: a bias switch is a config key
    (read as a bool), ``True`` (always) or ``False`` (never); ``qkv_bias`` biases q, k and v, ``o_bias`` also
    the output projection; ``qk_norm`` ``"head"``/``"proj"``; ``norms`` per block (1 to 4); ``norm``
    ``"rmsnorm"`` (a gain) or ``"layernorm"`` (gain and bias); ``gated`` a three-matrix MLP; ``moe``;
    ``window`` ``"all"`` (``sliding_window`` on every layer), ``"types"`` (the layers ``layer_types`` marks
    ``sliding_attention``) or ``None``; ``sinks``: one learned logit per head; ``qk_norm_key``: the key that
    switches ``qk_norm`` on (``None``: always on); ``mla``: multi-head latent attention (DeepSeek-V2's keys
    ``q_lora_rank``, ``kv_lora_rank``, ``qk_rope_head_dim``, ``qk_nope_head_dim``, ``v_head_dim``);
    ``attn_gate``: Model's ``attn_gate``; ``ffn_key``: the MLP width's key (``None`` there: 4 x hidden);
    ``gpt2_layout``: GPT-2's block (learned positions, fused q/k/v with ``multi_query`` giving one key/value
    head); ``lm_head_bias``: a bias on the LM head; ``parallel``: attention and MLP side by side on one norm
    (GPT-J); ``pos_offset``: learned positions, ``max_position_embeddings`` plus this many rows (BioGPT's 2;
    ``None``: no learned positions); ``final_norm``: a norm after the last block; ``indexer``: DeepSeek Sparse
    Attention's indexer (:class:`~llmsizing.layer_kinds.Indexer`; keys ``index_n_heads``, ``index_head_dim``)
    in every layer (``"all"``) or in the ``"full"`` layers of ``indexer_types`` (``"types"``); ``extra``:
    small tensors every layer adds, ``(component, name, shape[, (key, value)[, "moe"]])``, each dimension an
    int or a Model field (``"hidden"``, ``"ffn_hidden"``, ``"head_dim"``), present only when the
    config's ``key`` is ``value`` if that is given (``None``: always), in the MoE layers only with
    ``"moe"``; ``source``: the modeling file."""

    source: str
    qkv_bias: str | bool = "attention_bias"
    o_bias: str | bool = "attention_bias"
    mlp_bias: str | bool = "mlp_bias"
    qk_norm: str | None = None
    norms: int = 2
    norm: str = "rmsnorm"
    gated: bool = True
    moe: Moe | None = None
    window: str | None = "types"
    sinks: bool = False
    activation_key: str = "hidden_act"
    qk_norm_key: str | None = None
    mla: bool = False
    attn_gate: str | None = None
    ffn_key: str = "intermediate_size"
    gpt2_layout: bool = False
    lm_head_bias: bool = False
    parallel: bool = False
    pos_offset: int | None = None
    final_norm: bool = True
    indexer: str | None = None
    extra: tuple = ()


def _src(t: str) -> str:
    return f"transformers/models/{t}/modeling_{t}.py"


_QK = dict(qk_norm="head")
_XIELU = tuple(("mlp", f"act_fn.{w}", (1,), ("hidden_act", "xielu"))
               for w in ("alpha_p", "alpha_n", "beta", "eps"))
_NO_BIAS = dict(qkv_bias=False, o_bias=False, mlp_bias=False)
_DS_MOE = Moe(shared="n_shared_experts", first_dense="first_k_dense_replace")
_SHARED_BIAS = Moe(shared="n_shared_experts", router_bias=True)
_DS_MOE_BIAS = Moe(shared="n_shared_experts", first_dense="first_k_dense_replace", router_bias=True)

#: One entry per model type read through :class:`Rule` (the Llama block and its switches). Built by reading
#: each ``modeling_<type>.py`` and checked on the meta device (``data/hf_type_sweep.csv``).
TYPE_RULES: dict[str, Rule] = {t: Rule(_src(t), **kw) for t, kw in {
    # ---- the Llama block exactly (attention_bias on q, k, v, o; mlp_bias on the MLP)
    "cwm": {}, "exaone": {}, "helium": {}, "internlm3": {}, "iquestcoder": {},
    "ministral3": {}, "smollm3": {}, "granite": {}, "ernie4_5": dict(qkv_bias="use_bias", o_bias="use_bias",
                                                                   mlp_bias="use_bias"),
    "arcee": dict(gated=False), "hyperclovax": dict(norms=4),
    "vaultgemma": dict(mlp_bias=False, activation_key="hidden_activation"),
    # ---- q, k, v biases (Qwen2-style)
    "seed_oss": dict(qkv_bias="attention_bias", o_bias="attention_out_bias", mlp_bias=False),
    "glm": dict(o_bias=False, mlp_bias=False), "glm4": dict(o_bias=False, mlp_bias=False, norms=4),
    "stablelm": dict(qkv_bias="use_qkv_bias", o_bias=False, mlp_bias=False, norm="layernorm"),
    # ---- one norm per block (attention and MLP in parallel): Cohere's LayerNorm has no bias
    "cohere": dict(mlp_bias=False, norms=1, qk_norm="proj", qk_norm_key="use_qk_norm"),
    "cohere2": dict(mlp_bias=False, norms=1),
    # ---- per-head q/k norms, post-norms
    "exaone4": dict(_QK, mlp_bias=False), "olmo3": dict(qk_norm="proj", mlp_bias=False),
    "granite_swa": dict(sinks=True),
    # ---- mixtures of experts
    "granitemoe": dict(mlp_bias=False, moe=Moe(width="intermediate_size")),
    "granitemoeshared": dict(mlp_bias=False, moe=Moe(width="intermediate_size",
                                                     shared_width="shared_intermediate_size")),
    "minimax_m2": dict(qk_norm="proj", mlp_bias=False, moe=Moe(width="intermediate_size", router_bias=True)),
    "phimoe": dict(mlp_bias=False, norm="layernorm", moe=Moe(width="intermediate_size")),
    "olmoe": dict(qk_norm="proj", mlp_bias=False, moe=Moe(width="intermediate_size")),
    "mellum": dict(_QK, mlp_bias=False, moe=Moe()),
    "glm4_moe": dict(o_bias=False, mlp_bias=False, qk_norm="head", qk_norm_key="use_qk_norm",
                     moe=Moe(shared="n_shared_experts", first_dense="first_k_dense_replace",
                             router_bias=True)),
    "sarvam_moe": dict(o_bias=False, mlp_bias=False, qk_norm="head", qk_norm_key="use_qk_norm",
                       moe=Moe(shared="n_shared_experts", first_dense="first_k_dense_replace",
                               router_bias=True)),
    "exaone_moe": dict(_QK, mlp_bias=False, moe=Moe(shared="num_shared_experts",
                                                    first_dense="first_k_dense_replace", router_bias=True)),
    "hy_v3": dict(_QK, moe=Moe(shared="num_shared_experts", router_bias=True)),
    "granitemoe_swa": dict(mlp_bias=False, sinks=True, moe=Moe(width="intermediate_size")),
    "flex_olmo": dict(qk_norm="proj", mlp_bias=False, moe=Moe(width="intermediate_size")),
    "solar_open": dict(o_bias=False, mlp_bias=False, moe=_SHARED_BIAS),
    "aria_text": dict(mlp_bias=False, moe=Moe(width="intermediate_size", shared="moe_num_shared_experts")),
    "flint": dict(_QK, sinks=True, mlp_bias=False, moe=Moe(shared_width="shared_expert_intermediate_size",
                                                        step="decoder_sparse_step",
                                                        dense_list="mlp_only_layers")),
    # ---- multi-head latent attention (DeepSeek-V2's attention)
    "minicpm3": dict(mla=True, mlp_bias=False), "youtu": dict(mla=True, mlp_bias=False),
    "glm4_moe_lite": dict(mla=True, mlp_bias=False, moe=_SHARED_BIAS),
    "sarvam_mla": dict(mla=True, mlp_bias=False, moe=_DS_MOE_BIAS),
    # ---- GPT-2-like blocks written with Llama's names
    "starcoder2": dict(qkv_bias="use_bias", o_bias="use_bias", mlp_bias="use_bias", norm="layernorm",
                       gated=False),
    "jais2": dict(norm="layernorm", gated=False),
    "kolibri1": dict(_QK, norms=4, mlp_bias=False, moe=Moe(shared_width="shared_expert_intermediate_size",
                                                           router_bias=True)),
    # ---- GPT-2's block (SantaCoder/StarCoder 1: one key/value head with multi_query)
    # ---- GPT-J's parallel block: no attention biases, a biased MLP and LM head, one LayerNorm
    "gptj": dict(qkv_bias=False, o_bias=False, mlp_bias=True, norm="layernorm", gated=False, norms=1,
                 ffn_key="n_inner", window=None, activation_key="activation_function", lm_head_bias=True,
                 parallel=True),
    "codegen": dict(qkv_bias=False, o_bias=False, mlp_bias=True, norm="layernorm", gated=False, norms=1,
                    ffn_key="n_inner", window=None, activation_key="activation_function", lm_head_bias=True,
                    parallel=True),
    # ---- Phi-1/1.5/2: GPT-J's parallel block with biases on attention too (qk_layernorm, LayerNorms with
    #      biases per head, is not read: refused when set); CTRL: biases everywhere, sinusoidal positions
    "phi": dict(qkv_bias=True, o_bias=True, mlp_bias=True, norm="layernorm", gated=False, norms=1,
                window=None, lm_head_bias=True, parallel=True),
    "ctrl": dict(qkv_bias=True, o_bias=True, mlp_bias=True, norm="layernorm", gated=False, window=None,
                 ffn_key="dff", lm_head_bias=True),
    # ---- norms without parameters: OLMo's non-parametric LayerNorm, nanochat's weightless RMSNorm (its q/k
    #      norms too) and two-matrix relu^2 MLP
    "olmo": dict(mlp_bias=False, norm="layernorm_noweight"),
    "nanochat": dict(mlp_bias=False, norm="rmsnorm_noweight", gated=False),
    # ---- Persimmon: fused q/k/v and everything biased, per-head q/k LayerNorms with biases (qk_layernorm)
    "persimmon": dict(qkv_bias=True, o_bias=True, mlp_bias=True, norm="layernorm", gated=False, window=None,
                      qk_norm="head_ln", qk_norm_key="qk_layernorm"),
    # ---- GPT-1: GPT-2's block, post-norm, no final norm
    "openai-gpt": dict(qkv_bias=True, o_bias=True, mlp_bias=True, norm="layernorm", gated=False, window=None,
                       gpt2_layout=True, activation_key="afn", final_norm=False),
    # ---- fairseq-style decoders: biases everywhere, two LayerNorms, positions learned (BioGPT, 2 extra rows)
    #      or sinusoidal (XGLM, no parameters)
    "biogpt": dict(qkv_bias=True, o_bias=True, mlp_bias=True, norm="layernorm", gated=False, window=None,
                   pos_offset=2),
    "xglm": dict(qkv_bias=True, o_bias=True, mlp_bias=True, norm="layernorm", gated=False, window=None,
                 ffn_key="ffn_dim", activation_key="activation_function"),
    "gpt_bigcode": dict(qkv_bias=True, o_bias=True, mlp_bias=True, norm="layernorm", gated=False,
                        ffn_key="n_inner", gpt2_layout=True, window=None,
                        activation_key="activation_function"),
    # ---- DeepSeek Sparse Attention: DeepSeek-V3's MLA and experts with a lightning indexer in every layer
    #      (DeepSeek-V3.2) or in the layers indexer_types marks "full" (GLM-5)
    "deepseek_v32": dict(mla=True, qkv_bias=False, o_bias=False, mlp_bias=False, window=None, indexer="all",
                         moe=_DS_MOE_BIAS),
    "glm_moe_dsa": dict(mla=True, qkv_bias=False, o_bias=False, mlp_bias=False, window=None, indexer="types",
                        moe=_DS_MOE_BIAS),
    # ---- small extra tensors per layer (Rule.extra): BitNet b1.58's sub-norms before o_proj and down_proj;
    #      differential attention's four lambda vectors (its group norm has no weight); Apertus's xIELU
    #      activation (alpha_p, alpha_n parameters, beta and eps saved buffers) with a two-matrix MLP
    "bitnet": dict(mlp_bias=False, extra=(("norms", "attn_sub_norm.weight", ("hidden",)),
                                          ("norms", "ffn_sub_norm.weight", ("ffn_hidden",)))),
    "diffllama": dict(mlp_bias=False, extra=tuple(("attention", f"lambda_{q}", ("head_dim",))
                                                  for q in ("q1", "k1", "q2", "k2"))),
    "apertus": dict(_QK, mlp_bias=False, gated=False, extra=_XIELU),
    "apertus1p5_text": dict(_QK, mlp_bias=False, gated=False, extra=_XIELU),
    # ---- DeepSeek-V3's layout with a norm after the experts inside each MoE block (post_mlp_layernorm)
    "axk1": dict(mla=True, qkv_bias=False, o_bias=False, mlp_bias=False, window=None, moe=_SHARED_BIAS,
                 extra=(("norms", "post_mlp_layernorm.weight", ("hidden",), None, "moe"),)),
    # ---- a gate on the attention output
    "beam": dict(_QK, norms=4, mlp_bias=False, attn_gate="full", moe=Moe(router_bias=True),
                 extra=(("attention", "gate_bias", ("heads",)),)),           # one gate bias per head
    "afmoe": dict(_QK, norms=4, mlp_bias=False, attn_gate="full",
                  moe=Moe(shared="num_shared_experts", first_dense="num_dense_layers", router_bias=True)),
    "laguna": dict(_QK, mlp_bias=False, attn_gate="head",
                   moe=Moe(shared_width="shared_expert_intermediate_size", router_bias=True)),
    # ---- Phi-4-multimodal's text model: Phi-3's block (fused qkv_proj, gate_up_proj; no biases); its image
    #      and audio encoders are towers, not counted; Emu3's text model (through its text_config)
    "phi4_multimodal": dict(_NO_BIAS, window="all"), "emu3_text_model": {},
    "cohere2_moe": dict(mlp_bias=False, norms=1, moe=Moe(width="intermediate_size",
                                                         shared="num_shared_experts")),
}.items()}


_ENCODER = "an encoder (it also has a masked-LM head) run as a decoder: BERT-style blocks are not modelled"
_INDEXER = ("DeepSeek-V3.2's indexer (read for deepseek_v32 and glm_moe_dsa) with parts of its own: "
            "not mapped yet")
_HYPER = ("hyper-connections (hc_mult residual streams with their own mixing parameters) around a "
          "sparse-attention indexer: not modelled")

#: The decoder-only causal-LM types of transformers 5.24 that :meth:`Model.from_hf_config` refuses, and why
#: (issue 36: refused by name, never guessed). ``data/hf_type_sweep.csv`` holds every type;
#: ``tests/test_hf_sweep.py`` checks that each is either exact or listed here.
REFUSED_TYPES: dict[str, str] = {
    "axk2": _INDEXER + " (norms with a low-rank gate, fc1/fc2; a query gate, q_gate_proj)",
    "bert": _ENCODER,
    "big_bird": _ENCODER,
    "blt": "byte latent transformer (local encoder and decoder around a global model): not modelled",
    "camembert": _ENCODER,
    "cohere_compass_text": ("transformers 5.24 cannot build its own class default (build: KeyError: "
                            "'full_attention')"),
    "data2vec-text": _ENCODER,
    "dbrx": ("transformers 5.24 cannot build its own class default (build: AttributeError: "
             "'DbrxAttentionConfig' object has no attribute ')"),
    "deepseek_v4": _HYPER + " (and compressed attention, compress_rates)",
    "dory": ("looped middle layers (n_recurrent_loops) whose KV cache is kept per loop "
             "(recurrent_kv_cache_mode), with a gated attention output, learned scalars and L2 norms: not "
             "modelled"),
    "dots1": ("transformers 5.24 cannot build its own class default (build: TypeError: empty() takes 1"
              " positional argument but 3 were given)"),
    "dots3_note": "a multimodal model whose text part (dots3_note_text) is not read yet",
    "dots3_note_text": _INDEXER + " (its sliding-window layers have attention widths of their own, "
                       "per_layer_config; a norm on the rotary key alone, k_rope_only_layernorm)",
    "electra": _ENCODER,
    "ernie": _ENCODER,
    "gemma3n": "transformers 5.24 cannot build its own class default (build: ImportError: )",
    "gemma4_assistant": ("transformers 5.24 cannot build its own class default (config: "
                         "StrictDataclassClassValidationError('Class validation error fo)"),
    "gemma4_unified_assistant": ("an assistant head that shares the KV of another model (no k/v "
                                 "projections): not modelled"),
    "hrm_text": ("two weight-shared stacks run in nested loops (H_cycles x L_cycles) with a gated attention "
                 "output: the cache per token of a looped stack is not modelled"),
    "hunyuan_v1_dense": ("transformers 5.24 cannot build its own class default (build: TypeError: "
                         "unsupported operand type(s) for ** or pow(): 'NoneTy)"),
    "hunyuan_v1_moe": ("transformers 5.24 cannot build its own class default (build: TypeError: "
                       "unsupported operand type(s) for ** or pow(): 'NoneTy)"),
    "hy_v4": _HYPER,
    "inkling2_loop_text": ("looped layers with message gates, short convolutions and relative position "
                           "biases: not mapped yet"),
    "inkling2_text": "mixture of experts with its own routing modules: not mapped yet",
    "inkling_text": "mixture of experts with its own routing modules: not mapped yet",
    "lfm2_moe": ("transformers 5.24 cannot build its own class default (build: TypeError: 'NoneType' "
                 "object is not subscriptable)"),
    "longcat_flash": "two attention blocks per layer and zero-computation experts: not modelled",
    "megatron-bert": _ENCODER,
    "minimax_m3_vl_text": ("sparse attention with an indexer and dense/MoE layer widths of its own: "
                           "not mapped yet"),
    "ministral": ("transformers 5.24 cannot build its own class default (build: TypeError: unsupported"
                  " operand type(s) for ** or pow(): 'NoneTy)"),
    "mllama": ("cross-attention layers to an image encoder, whose cache grows with the image's tokens, not "
               "the text's: not modelled"),
    "moshi": "an audio model with multi-codebook heads: not modelled",
    "moss_transcribe_diarize": "a speech model's decoder: not modelled",
    "qwen4_exp": ("transformers 5.24 cannot build its own class default (build: TypeError: unsupported"
                  " operand type(s) for //: 'NoneType' and ')"),
    "qwen4_exp_text": ("transformers 5.24 cannot build its own class default (build: TypeError: "
                       "unsupported operand type(s) for //: 'NoneType' and ')"),
    "reformer": ("transformers 5.24 cannot build its own class default (build: AssertionError: If you "
                 "want to use `ReformerModelWithLMHead` ma)"),
    "rembert": _ENCODER,
    "roberta": _ENCODER,
    "roberta-prelayernorm": _ENCODER,
    "roc_bert": _ENCODER,
    "roformer": _ENCODER,
    "trocr": ("a decoder with cross-attention to an image encoder in every layer, whose cache grows with the "
              "image's tokens, not the text's: not modelled"),
    "xlm": _ENCODER,
    "xlm-roberta": _ENCODER,
    "xlm-roberta-xl": _ENCODER,
    "xlnet": "an encoder (XLNet) run as a decoder",
    "xmod": _ENCODER,
    "zaya": "an MLP router and compressed attention of its own: not modelled",
}


SWEEP_CSV = CLASSES_JSON.parent / "hf_type_sweep.csv"
#: Types whose released configs are read although their class default cannot be counted (DeepseekV2Config's
#: default has no top-k; transformers 5.24 cannot build NemotronConfig's default).
CLASS_DEFAULT_GAPS = ("deepseek_v2", "nemotron")


def sweep_coverage() -> dict:
    """How many of the installed transformers' causal-LM types the reader reads exactly, from
    ``data/hf_type_sweep.csv`` (chapter 1, "From a Hugging Face config"): ``types`` (all causal-LM types but
    encoder-decoders), ``unbuildable`` (transformers cannot build its own class default), ``encoders`` (an
    encoder with a masked-LM head run as a decoder), ``decoder_only`` (the rest), ``read`` (of those, the
    types read; each is checked exact in ``tests/test_hf_sweep.py``), ``with_state`` (of those read, the types
    whose cache holds a fixed state per sequence: Mamba or linear-attention layers), ``refused`` by reason and
    the ``transformers_version`` measured."""
    import csv

    with open(SWEEP_CSV, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kind"] == "full"]
    built = [r for r in rows if not r["error"]]
    llm = sorted({r["model_type"] for r in built if r["encoder_style"] == "0"})
    refused: dict[str, list[str]] = {}
    for t in llm:
        if t in REFUSED_TYPES:
            refused.setdefault(REFUSED_TYPES[t], []).append(t)
    return {"types": len(rows), "unbuildable": len(rows) - len(built),
            "encoders": len(built) - len(llm), "decoder_only": len(llm),
            "read": sum(t not in REFUSED_TYPES for t in llm), "refused": refused,
            "with_state": sum(t not in REFUSED_TYPES and r["state_per_sequence"] not in ("", "0")
                              for r in built if (t := r["model_type"]) in llm),
            "transformers_version": rows[0]["transformers_version"]}


def rule_for(mtype) -> Rule | None:
    """The :class:`Rule` of ``mtype``, or ``None``."""
    return TYPE_RULES.get(mtype) if isinstance(mtype, str) else None


__all__ = ["TYPE_RULES", "REFUSED_TYPES", "sweep_coverage", "Rule", "Moe", "rule_for", "config_classes",
           "class_default", "synonyms", "EXPERT_COUNT_KEYS", "EXPERT_TOPK_KEYS", "NO_PARAMETER_KEYS"]
