"""More Hugging Face readers of layer kinds beyond the Llama block (issue 36; chapter 1, "Load your model";
chapter 3 for their cache): RWKV, Nemotron-H's one-sub-layer blocks, LFM3 and RecurrentGemma (Griffin), and
the helpers the state-space readers of :mod:`llmsizing.hf_ssm` share. Each reader follows transformers 5.24's
``modeling_<type>.py`` (cited per type in :data:`BLOCK_TYPES`), reads every key in the spellings its config
class accepts and with its defaults (:class:`~llmsizing.hf_generic._Keys`);
:func:`llmsizing.hf_ssm.ssm_fields` runs them and refuses any unread key that could change the count.
"""

from __future__ import annotations

from .hf_generic import _Keys, _short, generic_fields
from .hf_types import Moe, Rule
from .layer_kinds import StateMixer
from .model_keys import _HF_ACTIVATION_ALIASES, ACTIVATIONS


def _src(t: str) -> str:
    return f"transformers/models/{t}/modeling_{t}.py"


def _base(k: _Keys, tied_default: bool) -> dict:
    tied = k.value("tie_word_embeddings", required=False)
    return dict(layers=k.int("num_hidden_layers"), hidden=k.int("hidden_size"), vocab=k.int("vocab_size"),
                tied_embeddings=tied_default if tied is None else bool(tied))


def _kinds(k: _Keys, n: int, key: str, mixer: tuple, attention: tuple) -> tuple[int, ...]:
    """The mixer layers of a per-layer list of kinds (``layer_types``); any other kind is refused."""
    kinds = k.value(key)
    if not isinstance(kinds, list) or len(kinds) != n or set(kinds) - set(mixer) - set(attention):
        raise ValueError(f"{k.where}: {key} must be a list of {n} entries among "
                         f"{', '.join(mixer + attention)}, got {_short(kinds)}")
    return tuple(i for i, t in enumerate(kinds) if t in mixer)


class _Fixed:
    """A key reader that answers one key from a given value (a default that ``__post_init__`` computes)."""

    def __init__(self, k: _Keys, value):
        self.where, self._value = k.where, value

    def value(self, key: str):
        return self._value


def _rwkv(k: _Keys) -> dict:
    """``modeling_rwkv.py``: a LayerNorm after the embedding (block 0's ``pre_ln``), then per block a
    LayerNorm and RWKV time mixing, a LayerNorm and channel mixing (``key`` to ``intermediate_size``,
    squared ReLU, ``value`` back: the two-matrix MLP; its ``receptance`` is counted with the mixer),
    ``ln_out``, an LM head (``head``). ``RwkvConfig.__post_init__``: ``attention_hidden_size`` defaults to
    ``hidden_size`` and ``intermediate_size`` to ``4 x hidden_size``; the state ``RwkvModel`` allocates is
    ``hidden_size`` wide, so another attention width is refused."""
    f = _base(k, False)
    h = f["hidden"]
    att = k.int("attention_hidden_size", required=False) or h
    if att != h:
        raise ValueError(f"{k.where}: attention_hidden_size ({att}) other than hidden_size ({h}): "
                         "RwkvModel's state is hidden_size wide, so transformers cannot run it; refused")
    k.used.update(("rescale_every", "context_length"))
    mixer = StateMixer("rwkv", inner=h, state=3, conv=1)
    return dict(f, heads=1, ffn_hidden=k.int("intermediate_size", required=False) or 4 * h, gated_mlp=False,
                norm="layernorm", embed_norm=True, activation="relu2", mixer=mixer)


#: NemotronHConfig.__post_init__'s old spellings, which it moves to the fields (configs may still carry them).
_NEMOTRON_H_LEGACY = {"mamba_n_groups": "n_groups", "mamba_d_conv": "conv_kernel", "mamba_expand": "expand",
                      "mamba_conv_bias": "use_conv_bias", "mamba_chunk_size": "chunk_size"}
_NEMOTRON_H_PATTERN = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}


def _nemotron_h(k: _Keys) -> dict:
    """``modeling_nemotron_h.py``: every block is ONE sub-layer after an RMSNorm: a Mamba-2 mixer
    (``linear_attention``; ``mamba_num_heads x mamba_head_dim`` channels, ``expand`` unused), attention
    (``full_attention``; no biases), a two-matrix squared-ReLU MLP (``mlp``) or experts (``moe``: non-gated
    experts, a router with a score-correction buffer, one shared MLP of
    ``moe_shared_expert_intermediate_size`` whatever ``n_shared_experts`` says), as ``layers_block_type``
    (or the old ``hybrid_override_pattern``) lists them. A Model layer here is one Mamba or attention block
    plus the MLP or MoE block right after it, if any (``mlp_free_layers`` otherwise), which is the same
    tensors; an MLP or MoE block that does not follow a Mamba or attention block is refused."""
    config = {_NEMOTRON_H_LEGACY.get(key, key): v for key, v in k.config.items()}
    k2 = _Keys(config, k.where, k.mtype)
    k2.used |= k.used
    kinds = k2.value("layers_block_type", required=False)
    if kinds is None:
        pattern = config.get("hybrid_override_pattern")
        kinds = ["linear_attention", "moe", "full_attention", "mlp"] if pattern is None else \
            [_NEMOTRON_H_PATTERN.get(c, c) for c in pattern]
    if not isinstance(kinds, list) or not kinds or set(kinds) - set(_NEMOTRON_H_PATTERN.values()):
        raise ValueError(f"{k.where}: layers_block_type must list 'linear_attention', 'full_attention', "
                         f"'mlp' or 'moe' blocks, got {_short(kinds)}")
    layers: list[list] = []
    for i, t in enumerate(kinds):
        if t in ("linear_attention", "full_attention"):
            layers.append([t, None])
        elif not layers or layers[-1][1] is not None:
            raise ValueError(f"{k.where}: block {i} ({t}) does not follow a Mamba or attention block, which "
                             "a Model layer (token mixing, then an MLP) does not represent")
        else:
            layers[-1][1] = t
    if k2.value("moe_latent_size", required=False) is not None:
        raise ValueError(f"{k.where}: moe_latent_size={k2.value('moe_latent_size')} (experts in a latent "
                         "space, fc1/fc2_latent_proj) is not modelled")
    h, heads = k2.int("hidden_size"), k2.int("num_attention_heads")
    mlp_bias = bool(k2.switch("mlp_bias"))
    f = dict(layers=len(layers), hidden=h, heads=heads, kv_heads=k2.int("num_key_value_heads", required=False)
             or heads, head_dim=k2.int("head_dim", required=False) or h // heads,
             ffn_hidden=k2.int("intermediate_size"), vocab=k2.int("vocab_size"), gated_mlp=False,
             mlp_bias=mlp_bias, activation="relu2", tied_embeddings=bool(k2.switch("tie_word_embeddings")),
             mixer_layers=tuple(i for i, (t, _) in enumerate(layers) if t == "linear_attention"),
             mlp_free_layers=tuple(i for i, (_, m) in enumerate(layers) if m is None))
    heads_m = k2.int("mamba_num_heads")
    f["mixer"] = StateMixer("mamba2", inner=heads_m * k2.int("mamba_head_dim"),
                            state=k2.int("ssm_state_size"),
                            conv=k2.int("conv_kernel"), heads=heads_m, groups=k2.int("n_groups"),
                            proj_bias=bool(k2.switch("use_bias")), conv_bias=bool(k2.switch("use_conv_bias")))
    moe = tuple(i for i, (_, m) in enumerate(layers) if m == "moe")
    experts = k2.int("n_routed_experts", minimum=0)
    if moe and experts:
        if mlp_bias:
            raise ValueError(f"{k.where}: mlp_bias with experts (biased expert matrices) is not modelled")
        f.update(experts=experts, experts_per_token=k2.int("num_experts_per_tok"), moe_layers=moe,
                 expert_ffn_hidden=k2.int("moe_intermediate_size"), router_bias=True, shared_experts=1,
                 shared_expert_ffn_hidden=k2.int("moe_shared_expert_intermediate_size"))
    elif moe:
        raise ValueError(f"{k.where}: 'moe' blocks with n_routed_experts=0")
    k2.used.update(("num_hidden_layers", "expand", "attention_bias", "mamba_proj_bias", "n_shared_experts",
                    "mamba_hidden_act", "mlp_hidden_act", "mamba_ssm_cache_dtype",
                    "moe_shared_expert_overlap",
                    "num_experts_per_tok", "moe_intermediate_size", "moe_shared_expert_intermediate_size",
                    "hybrid_override_pattern") + tuple(_NEMOTRON_H_LEGACY))
    k.used |= k2.used
    return f


_LFM3 = Rule(source=_src("lfm3"), mlp_bias=False, qk_norm="head", window=None)


def _lfm3(k: _Keys) -> dict:
    """``modeling_lfm3.py``: LFM2's short convolutions in the ``conv`` layers of ``layer_types`` (by default
    three in four), attention with per-head q/k norms elsewhere (``sliding_attention`` ones windowed), a
    per-head output gate (``g_proj``, with ``use_attention_gate``), norms before and after both sub-blocks
    (``use_sandwich_norm``; else before only), a gated MLP of ``intermediate_size``."""
    n = k.int("num_hidden_layers")
    kinds = k.value("layer_types", required=False)
    if kinds is None:
        kinds = ["full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i > 0 else "conv"
                 for i in range(n)]
    mix = _kinds(_Fixed(k, kinds), n, "layer_types", ("conv",), ("full_attention", "sliding_attention"))
    sandwich, gate = k.switch("use_sandwich_norm"), k.switch("use_attention_gate")
    mixer = StateMixer("shortconv", inner=k.int("hidden_size"), state=0, conv=k.int("conv_L_cache"),
                       conv_bias=bool(k.switch("conv_bias")))
    k.used.add("layer_types")
    f = generic_fields(k.config, k.where, k.mtype, _LFM3, keys=k)
    f.update(mixer=mixer, mixer_layers=mix, norms_per_layer=4 if sandwich else 2,
             attn_gate="head" if gate else None)
    windowed = sum(t == "sliding_attention" for t in kinds)
    if windowed:
        f.update(sliding_window=k.int("sliding_window"),
                 window_layers=None if windowed == n - len(mix) else windowed)
    return f


def _recurrent_gemma(k: _Keys) -> dict:
    """``modeling_recurrent_gemma.py`` (Griffin): ``block_types`` repeated over the layers, ``recurrent``
    blocks (RG-LRU of ``lru_width``, default ``hidden_size``, channels in ``num_attention_heads`` gate
    blocks) and ``attention`` blocks (local attention over ``attention_window_size`` tokens; q, k, v biased
    with ``attention_bias``, the output always), each then a gated MLP of ``intermediate_size // 2`` with
    biases; two RMSNorms per block, tied embeddings by default."""
    n, h, heads = k.int("num_hidden_layers"), k.int("hidden_size"), k.int("num_attention_heads")
    types = k.value("block_types")
    if not isinstance(types, (list, tuple)) or not types or set(types) - {"recurrent", "attention"}:
        raise ValueError(f"{k.where}: block_types must list 'recurrent' or 'attention', got {_short(types)}")
    kinds = (list(types) * (n // len(types) + 1))[:n]
    lru = k.int("lru_width", required=False) or h
    mixer = StateMixer("rglru", inner=lru, state=0, conv=k.int("conv1d_width"), heads=heads, groups=heads)
    bias = bool(k.switch("attention_bias"))
    act = k.value("hidden_activation", required=False)
    act = _HF_ACTIVATION_ALIASES.get(act, act) if isinstance(act, str) else None
    k.used.update(("logits_soft_cap", "w_init_variance_scale", "final_w_init_variance_scale", "block_types"))
    f = dict(layers=n, hidden=h, heads=heads, kv_heads=k.int("num_key_value_heads", required=False) or heads,
             head_dim=h // heads, ffn_hidden=k.int("intermediate_size") // 2, vocab=k.int("vocab_size"),
             bias=bias, o_bias=True, mlp_bias=True, activation=act if act in ACTIVATIONS else None,
             tied_embeddings=bool(k.switch("tie_word_embeddings")), mixer=mixer,
             mixer_layers=tuple(i for i, t in enumerate(kinds) if t == "recurrent"))
    if "attention" in kinds:
        f["sliding_window"] = k.int("attention_window_size")
    return f


_BAILING = Rule(source=_src("bailing_hybrid"), qkv_bias=False, o_bias=False, mlp_bias=False, mla=True,
                window=None, attn_gate="head", moe=Moe(shared="n_shared_experts", router_bias=True))


def _bailing_hybrid(k: _Keys) -> dict:
    """``modeling_bailing_hybrid.py`` (Ling 2.5): ``BailingHybridDeltaAttention`` (Kimi Delta Attention with
    full-rank forget and output gates) in the ``linear_attention`` layers of ``layer_types`` (by default all
    but every ``layer_group_size``-th), DeepSeek-V3's latent attention with a per-head output gate elsewhere;
    experts with ``n_shared_experts`` shared ones and a score-correction buffer in the ``sparse`` layers of
    ``mlp_layer_types``. ``BailingHybridConfig.__post_init__`` sizes the linear layers with the configured
    ``head_dim``, ``num_attention_heads`` and ``short_conv_kernel_size`` (kept as ``linear_head_dim``,
    ``linear_num_heads``, ``linear_conv_kernel_dim``) and then sets ``head_dim`` to ``qk_rope_head_dim``."""
    n = k.int("num_hidden_layers")
    kinds = k.value("layer_types", required=False)
    if kinds is None:
        every = k.int("layer_group_size")
        kinds = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n)]
    k.used.update(("layer_types", "layer_group_size", "kda_safe_gate", "kda_lower_bound"))
    mix = _kinds(_Fixed(k, kinds), n, "layer_types", ("linear_attention",), ("full_attention",))
    c = k.config
    heads = c.get("linear_num_heads") or k.int("num_attention_heads")
    hd = c.get("linear_head_dim") or k.int("head_dim")
    conv = c.get("linear_conv_kernel_dim") or k.int("short_conv_kernel_size")
    mixer = StateMixer("kda_full", inner=heads * hd, state=hd, conv=conv, heads=heads, groups=heads,
                       conv_bias=False)
    f = generic_fields(k.config, k.where, k.mtype, _BAILING, keys=k)
    return dict(f, mixer=mixer, mixer_layers=mix)


def _gpt_neox_japanese(k: _Keys) -> dict:
    """``modeling_gpt_neox_japanese.py``: fused ``query_key_value`` and ``dense`` without biases, except one
    ``dense_bias`` in the last layer only; an MLP of ``int(hidden x intermediate_multiple_size)`` without
    biases; two LayerNorms per block, a final one; ``embed_out`` tied to the embedding by default."""
    h = k.int("hidden_size")
    act = k.value("hidden_act", required=False)
    act = _HF_ACTIVATION_ALIASES.get(act, act) if isinstance(act, str) else None
    return dict(layers=k.int("num_hidden_layers"), hidden=h, heads=k.int("num_attention_heads"),
                ffn_hidden=int(h * k.value("intermediate_multiple_size")), vocab=k.int("vocab_size"),
                gated_mlp=False, norm="layernorm", fused_qkv=True,
                tied_embeddings=bool(k.switch("tie_word_embeddings")),
                activation=act if act in ACTIVATIONS else None,
                extra_layer_tensors=(("attention", "dense_bias", (h,), "one"),))


#: The types read here and their readers: ``{model_type: (reader, modeling file)}``.
BLOCK_TYPES = {"rwkv": (_rwkv, _src("rwkv")), "nemotron_h": (_nemotron_h, _src("nemotron_h")),
               "lfm3": (_lfm3, _src("lfm3")), "recurrent_gemma": (_recurrent_gemma, _src("recurrent_gemma")),
               "bailing_hybrid": (_bailing_hybrid, _src("bailing_hybrid")),
               "gpt_neox_japanese": (_gpt_neox_japanese, _src("gpt_neox_japanese"))}


__all__ = ["BLOCK_TYPES"]
