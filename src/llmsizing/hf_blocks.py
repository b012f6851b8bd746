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
from .layer_kinds import AttentionLayout, StateMixer
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


def _act(k: _Keys, key: str):
    act = k.value(key, required=False)
    act = _HF_ACTIVATION_ALIASES.get(act, act) if isinstance(act, str) else None
    return act if act in ACTIVATIONS else None


def _bert_decoder(k: _Keys, tied_default: bool) -> dict:
    """BERT's post-norm block run causally (``modeling_bert_generation.py``'s ``BertGenerationDecoder``,
    ``modeling_git.py``'s text decoder): learned positions and a LayerNorm after the embedding, biased
    ``query``/``key``/``value``/``dense`` and two-matrix MLP, a LayerNorm after each sub-block and none at the
    end, an LM head with a bias (BertGeneration's tied to the embedding). Cross-attention
    (``add_cross_attention``) and GIT's per-image temporal embeddings are refused; GIT's image encoder is a
    tower, not counted (as Gemma 3's)."""
    if k.switch("add_cross_attention"):
        raise ValueError(f"{k.where}: add_cross_attention=True (cross-attention to an encoder in every "
                         "layer) is not modelled")
    if k.value("num_image_with_embedding", required=False) is not None:
        raise ValueError(f"{k.where}: num_image_with_embedding={k.value('num_image_with_embedding')} "
                         "(GIT's per-image temporal embeddings) is not modelled")
    k.used.update(("vision_config", "position_embedding_type"))
    return dict(_base(k, tied_default), heads=k.int("num_attention_heads"),
                ffn_hidden=k.int("intermediate_size"), gated_mlp=False, norm="layernorm", bias=True,
                learned_pos=True, max_seq=k.int("max_position_embeddings"), embed_norm=True, final_norm=False,
                lm_head_bias=True, activation=_act(k, "hidden_act"))


def _modernbert_decoder(k: _Keys) -> dict:
    """``modeling_modernbert_decoder.py``: a LayerNorm after the embedding; per layer q, k, v and ``Wo``
    (biased with ``attention_bias``), a LayerNorm before attention except in layer 0 (``nn.Identity``) and
    one before the MLP, a GeGLU MLP (``Wi`` of ``2 x intermediate_size``, ``mlp_bias``); a final LayerNorm, a
    prediction head (``dense`` of ``hidden x hidden``, ``classifier_bias``, and a LayerNorm) and a decoder
    tied to the embedding with ``decoder_bias``; LayerNorms biased only with ``norm_bias``. The
    ``sliding_attention`` layers of ``layer_types`` (by default all but every
    ``global_attn_every_n_layers``-th) see ``local_attention // 2`` tokens back. Here the block's one norm
    (``norms_per_layer`` 1) stands for ``mlp_norm`` and an extra tensor in ``layers - 1`` layers for the
    attention norms."""
    f = _base(k, True)
    n, h = f["layers"], f["hidden"]
    nb, cb = k.switch("norm_bias"), k.switch("classifier_bias")
    norm = [("weight", (h,))] + ([("bias", (h,))] if nb else [])
    kinds = k.value("layer_types", required=False)
    if kinds is None:
        every = k.config.get("global_attn_every_n_layers", 3)
        kinds = ["sliding_attention" if i % every else "full_attention" for i in range(n)]
    _kinds(_Fixed(k, kinds), n, "layer_types", ("sliding_attention",), ("full_attention",))
    local, windowed = k.int("local_attention"), kinds.count("sliding_attention")
    k.used.update(("layer_types", "local_attention", "norm_bias", "classifier_bias", "decoder_bias",
                   "classifier_activation", "classifier_dropout"))
    extra = tuple(("norms", f"attn_norm.{w}", s, n - 1) for w, s in norm) + tuple(
        ("lm_head", f"head.norm.{w}", s, "one") for w, s in norm) + (
        ("lm_head", "head.dense.weight", (h, h), "one"),) + (
        (("lm_head", "head.dense.bias", (h,), "one"),) if cb else ())
    f.update(heads=k.int("num_attention_heads"), ffn_hidden=k.int("intermediate_size"),
             norm="layernorm" if nb else "layernorm_nobias", bias=bool(k.switch("attention_bias")),
             mlp_bias=bool(k.switch("mlp_bias")), embed_norm=True, norms_per_layer=1,
             lm_head_bias=bool(k.switch("decoder_bias")), activation=_act(k, "hidden_activation"),
             extra_layer_tensors=extra)
    if windowed:
        f.update(sliding_window=local // 2, window_layers=None if windowed == n else windowed)
    return f


_DOGE = Rule(source=_src("doge"), qk_norm="head", mlp_bias="mlp_bias", window="all")


def _doge(k: _Keys) -> dict:
    """``modeling_doge.py``: the Llama block with per-head q/k RMSNorms, dynamic-mask attention's ``A`` (one
    per KV head) and ``dt_proj`` (KV heads x head_dim to one per KV head, biased with ``attention_bias``) and
    two residual gains of ``hidden`` numbers per layer (``input_residual``, ``post_attention_residual``). The
    dynamic mask keeps ``keep_window_size`` keys per query but caches every token. ``is_moe`` (the
    cross-domain MoE of ``num_experts`` single-neuron experts) is refused; without it ``num_experts`` and
    ``num_experts_per_tok`` size nothing."""
    if k.switch("is_moe"):
        raise ValueError(f"{k.where}: is_moe=True (Doge's cross-domain MoE, DogeCDMoE) is not modelled")
    config = {key: v for key, v in k.config.items() if key not in ("num_experts", "num_experts_per_tok")}
    k2 = _Keys(config, k.where, k.mtype)
    f = generic_fields(config, k.where, k.mtype, _DOGE, keys=k2)
    k.used |= k2.used | {"num_experts", "num_experts_per_tok", "keep_window_size", "is_moe"}
    kvd, b = f["kv_heads"] * f["head_dim"], f["bias"]
    f["extra_layer_tensors"] = (("attention", "A", (f["kv_heads"],)),
                                ("attention", "dt_proj.weight", (f["kv_heads"], kvd))) + (
        (("attention", "dt_proj.bias", (f["kv_heads"],)),) if b else ()) + (
        ("norms", "input_residual", (f["hidden"],)), ("norms", "post_attention_residual", (f["hidden"],)))
    return f


def _cpmant(k: _Keys) -> dict:
    """``modeling_cpmant.py`` (CPM-Ant): RMSNorms with a gain before attention and before the GELU-gated MLP
    (``w_0``, ``w_1``, ``w_out`` of ``dim_ff``), ``num_attention_heads x dim_head`` q, k, v and output without
    biases, a final RMSNorm; the input embedding holds ``vocab_size + prompt_types x prompt_length`` rows,
    plus a segment embedding (``segment_types`` rows) and one relative-position bias table of
    ``segment_types^2 + position_bias_num_buckets`` rows per head; the LM head (``vocab_size`` rows) is never
    tied (``_tied_weights_keys`` is empty)."""
    f = _base(k, False)
    h, heads = f["hidden"], k.int("num_attention_heads")
    prompts = k.int("prompt_types", minimum=0) * k.int("prompt_length", minimum=0)
    seg = k.int("segment_types")
    k.used.update(("tie_word_embeddings", "position_bias_max_distance"))
    extra = (("embedding", "segment_embedding.weight", (seg, h), "one"),
             ("position", "position_bias.relative_attention_bias",
              (seg * seg + k.int("position_bias_num_buckets"), heads), "one"))
    extra += (("embedding", "prompt_embedding.weight", (prompts, h), "one"),) if prompts else ()
    return dict(f, tied_embeddings=False, heads=heads, head_dim=k.int("dim_head"), ffn_hidden=k.int("dim_ff"),
                activation="gelu", extra_layer_tensors=extra)


_GEMMA = dict(qk_norm="head", norms=4, mlp_bias=False, window=None, activation_key="hidden_activation")
_GEMMA4 = Rule(source=_src("gemma4"), **_GEMMA)
_GEMMA3N = Rule(source=_src("gemma3n"), **_GEMMA)


def _kv_sharing(k: _Keys, kinds: list) -> tuple[int, int]:
    """The windowed and full layers among the last ``num_kv_shared_layers`` (their configs'
    ``kv_sharing_modes``: each reuses the keys and values of the last earlier layer of its kind)."""
    n, shared = len(kinds), k.int("num_kv_shared_layers", minimum=0)
    own = kinds[:n - shared]
    if shared and (shared >= n or set(own) != set(kinds)):
        raise ValueError(f"{k.where}: num_kv_shared_layers={shared} leaves no earlier layer of every kind to "
                         "share keys and values from (as kv_sharing_modes requires)")
    tail = kinds[n - shared:]
    return tail.count("sliding_attention"), tail.count("full_attention")


def _gemma_windows(k: _Keys, kinds: list, window: int) -> dict:
    _kinds(_Fixed(k, kinds), len(kinds), "layer_types", ("sliding_attention",), ("full_attention",))
    k.used.update(("layer_types", "sliding_window"))
    w = kinds.count("sliding_attention")
    return dict(sliding_window=window, window_layers=None if w == len(kinds) else w) if w else {}


def _ple(k: _Keys, n: int, h: int) -> tuple:
    """Per-layer embeddings (Gemma 3n's and Gemma 4's PLE): one table of ``vocab_size_per_layer_input`` rows
    of ``layers x hidden_size_per_layer_input``, a projection of the hidden state to the same width and a
    norm; per layer a gate (``per_layer_input_gate``), a projection back (``per_layer_projection``) and a
    norm."""
    p = k.int("hidden_size_per_layer_input", minimum=0, required=False)
    if not p:
        return ()
    v = k.int("vocab_size_per_layer_input")
    return (("embedding", "embed_tokens_per_layer.weight", (v, n * p), "one"),
            ("embedding", "per_layer_model_projection.weight", (n * p, h), "one"),
            ("embedding", "per_layer_projection_norm.weight", (p,), "one"),
            ("mlp", "per_layer_input_gate.weight", (p, h)), ("mlp", "per_layer_projection.weight", (h, p)),
            ("norms", "post_per_layer_input_norm.weight", (h,)))


def _gemma4(k: _Keys) -> dict:
    """``modeling_gemma4.py`` (and ``modeling_gemma4_unified.py``): Gemma 3's block (four RMSNorms, per-head
    q/k norms, the value norm without weights) with a ``layer_scalar`` buffer per layer; the
    ``full_attention`` layers take their head width and KV heads from ``per_layer_config`` (by default
    ``global_head_dim`` 512 and, with ``attention_k_eq_v``, ``num_global_key_value_heads``); with
    ``attention_k_eq_v`` the full layers have no ``v_proj``; the last ``num_kv_shared_layers`` layers reuse
    earlier keys and values (no k/v projections, no cache) and with ``use_double_wide_mlp`` have an MLP twice
    as wide; per-layer embeddings with ``hidden_size_per_layer_input``. ``enable_moe_block`` is refused."""
    if k.switch("enable_moe_block"):
        raise ValueError(f"{k.where}: enable_moe_block=True (a router and experts beside the dense MLP, with "
                         "three more norms per layer) is not modelled")
    n = k.int("num_hidden_layers")
    kinds = k.value("layer_types", required=False)
    if kinds is None:
        kinds = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
    kinds = list(kinds[:-1]) + ["full_attention"] if isinstance(kinds, list) and kinds else kinds
    k_eq_v = bool(k.switch("attention_k_eq_v"))
    plc = k.config.get("per_layer_config")
    if plc is None:
        glob = {"head_dim": k.config.get("global_head_dim", 512)}
        if k_eq_v and k.config.get("num_global_key_value_heads") is not None:
            glob["num_key_value_heads"] = k.config["num_global_key_value_heads"]
        plc = {i: glob for i, t in enumerate(kinds) if t == "full_attention"}
    keys = {"head_dim", "num_key_value_heads"}
    if not isinstance(plc, dict) or any(not isinstance(v, dict) or set(v) - keys for v in plc.values()):
        raise ValueError(f"{k.where}: per_layer_config={_short(plc)}: only head_dim and num_key_value_heads "
                         "overrides are read")
    try:
        idx = {int(i) for i in plc}
    except (TypeError, ValueError):
        raise ValueError(f"{k.where}: per_layer_config keys must be layer indices, got "
                         f"{_short(plc)}") from None
    overrides = {tuple(sorted(v.items())) for v in plc.values()}
    full = {i for i, t in enumerate(kinds) if t == "full_attention"}
    if plc and (idx != full or len(overrides) > 1):
        raise ValueError(f"{k.where}: per_layer_config={_short(plc)} overrides layers other than the "
                         "full_attention ones, or not all alike: one width per kind of layer is represented")
    sw, sf = _kv_sharing(k, kinds)
    win = k.int("sliding_window")
    if k.value("use_bidirectional_attention", required=False) == "all":
        win = win // 2 + 1                                  # Gemma4TextConfig.__post_init__
    k.used.update(("per_layer_config", "global_head_dim", "num_global_key_value_heads", "attention_k_eq_v",
                   "num_kv_shared_layers", "use_double_wide_mlp", "enable_moe_block", "num_experts",
                   "top_k_experts", "moe_intermediate_size", "hidden_size_per_layer_input",
                   "vocab_size_per_layer_input"))
    config = {key: v for key, v in k.config.items() if key not in ("num_experts",)}
    k2 = _Keys(config, k.where, k.mtype)
    k2.used |= k.used
    f = generic_fields(config, k.where, k.mtype, _GEMMA4, keys=k2)
    k.used |= k2.used | {"num_experts"}
    f.update(_gemma_windows(k, kinds, win))
    o = dict(next(iter(overrides))) if plc else {}
    fhd, fkv = o.get("head_dim", f["head_dim"]), o.get("num_key_value_heads", f["kv_heads"])
    if f["heads"] % fkv:
        raise ValueError(f"{k.where}: per_layer_config num_key_value_heads ({fkv}) must divide "
                         f"num_attention_heads ({f['heads']})")
    if (fhd, fkv) != (f["head_dim"], f["kv_heads"]) or (k_eq_v and full) or sw or sf:
        f["attention_layout"] = AttentionLayout(fhd, fkv, k_eq_v and bool(full), sw, sf)
    h, ffn = f["hidden"], f["ffn_hidden"]
    extra = (("norms", "layer_scalar", (1,)),) + _ple(k, n, h)
    if k.switch("use_double_wide_mlp") and sw + sf:            # the KV-sharing layers' MLP is twice as wide
        extra += (("mlp", "double_wide.gate_proj.weight", (ffn, h), sw + sf),
                  ("mlp", "double_wide.up_proj.weight", (ffn, h), sw + sf),
                  ("mlp", "double_wide.down_proj.weight", (h, ffn), sw + sf))
    f["extra_layer_tensors"] = extra
    return f


def _gemma3n(k: _Keys) -> dict:
    """``modeling_gemma3n.py`` (Gemma 3n's text model): Gemma 3's block with per-layer embeddings, AltUp
    (``altup_num_inputs`` streams: per layer a router, its norm, prediction and correction coefficients and
    an output scale; ``altup_num_inputs - 1`` projections in and out of the streams), LAuReL (a rank-
    ``laurel_rank`` side branch and its norm) and the last ``num_kv_shared_layers`` layers reusing earlier
    keys and values; ``intermediate_size`` may be one per layer (all alike here, or refused)."""
    n = k.int("num_hidden_layers")
    kinds = k.value("layer_types", required=False)
    if kinds is None:
        kinds = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(n)]
    ffn = k.value("intermediate_size")
    if isinstance(ffn, list):
        if len(ffn) != n or len(set(ffn)) != 1:
            raise ValueError(f"{k.where}: intermediate_size={_short(ffn)}: MLPs of different widths per "
                             "layer are not represented (one width for every layer)")
        ffn = ffn[0]
    sw, sf = _kv_sharing(k, kinds)
    a, r = k.int("altup_num_inputs"), k.int("laurel_rank")
    k.used.update(("intermediate_size", "num_kv_shared_layers", "altup_num_inputs", "laurel_rank",
                   "altup_active_idx", "altup_coef_clip", "altup_correct_scale",
                   "activation_sparsity_pattern",
                   "hidden_size_per_layer_input", "vocab_size_per_layer_input"))
    config = dict(k.config, intermediate_size=ffn)
    k2 = _Keys(config, k.where, k.mtype)
    k2.used |= k.used
    f = generic_fields(config, k.where, k.mtype, _GEMMA3N, keys=k2)
    k.used |= k2.used
    f.update(_gemma_windows(k, kinds, k.int("sliding_window")))
    h = f["hidden"]
    if sw or sf:
        f["attention_layout"] = AttentionLayout(shared_window=sw, shared_full=sf)
    f["extra_layer_tensors"] = _ple(k, n, h) + (
        ("norms", "altup.correct_output_scale", (h,)), ("mlp", "altup.correction_coefs.weight", (a, a)),
        ("mlp", "altup.prediction_coefs.weight", (a * a, a)), ("mlp", "altup.modality_router.weight", (a, h)),
        ("norms", "altup.router_norm.weight", (h,)), ("mlp", "laurel.linear_left.weight", (r, h)),
        ("mlp", "laurel.linear_right.weight", (h, r)), ("norms", "laurel.post_laurel_norm.weight", (h,)),
        ("embedding", "altup_projections.weight", (a - 1, h, h), "one"),
        ("embedding", "altup_unembed_projections.weight", (a - 1, h, h), "one"))
    return f


def _zamba(k: _Keys, v2: bool) -> dict:
    """``modeling_zamba.py`` / ``modeling_zamba2.py``: every layer is a Mamba (Zamba2: Mamba-2) layer with its
    RMSNorm; the ``hybrid`` layers of ``layers_block_type`` first run ONE shared transformer block (Zamba2:
    ``num_mem_blocks`` of them in turn) on the hidden state concatenated with the embeddings (attention of
    ``2 x hidden_size`` inputs, RMSNorms of ``2 x hidden`` and ``hidden``, a gated MLP; Zamba2's with
    biases under ``add_bias_linear``), then a ``hidden x hidden`` linear of their own (Zamba2: and per use a
    rank-``adapter_rank`` adapter on the MLP's ``gate_up_proj``, and on q, k, v with
    ``use_shared_attention_adapter``). The block's weights count once, its KV cache once per use."""
    f = _base(k, True)
    n, h = f["layers"], f["hidden"]
    kinds = k.value("layers_block_type", required=False)
    if kinds is None and v2:
        m = "linear_attention"
        kinds = [m] + ([m] * 5 + ["hybrid"]) * 7 + [m] * 4 + ["hybrid"] + [m] * 3 + ["hybrid"] + [m] * 2
    elif kinds is None:
        per, off = k.int("attn_layer_period"), k.int("attn_layer_offset", minimum=0)
        kinds = ["linear_attention"] * 2 + ["hybrid"] + [
            "hybrid" if i % per == off else "linear_attention" for i in range(n - 3)]
    kinds = [{"mamba": "linear_attention"}.get(t, t) for t in kinds] if isinstance(kinds, list) else kinds
    _kinds(_Fixed(k, kinds), n, "layers_block_type", ("linear_attention",), ("hybrid",))
    uses = kinds.count("hybrid")
    heads = k.int("num_attention_heads")
    kv = k.int("num_key_value_heads", required=False) or heads
    if v2:           # Zamba2Config.__post_init__ sets the attention widths whatever the config says
        wide, hd, ffn = 2 * h, 2 * h // heads, k.int("intermediate_size", required=False) or 4 * h
        blocks, bias, r = min(k.int("num_mem_blocks"), uses), bool(k.switch("add_bias_linear")), \
            k.int("adapter_rank")
        mixer = StateMixer("mamba2", inner=int(k.value("mamba_expand") * h), state=k.int("mamba_d_state"),
                           conv=k.int("mamba_d_conv"), heads=k.int("n_mamba_heads"),
                           groups=k.int("mamba_ngroups"), proj_bias=bias, conv_bias=True)
    else:
        wide = k.int("attention_hidden_size", required=False) or 2 * h
        hd = k.int("attention_head_dim", required=False) or 2 * h // heads
        ffn, blocks, bias, r = k.int("intermediate_size"), 1, False, 0
        dt = k.value("mamba_dt_rank")                 # "auto": ceil(hidden / 16), ZambaConfig.__post_init__
        mixer = StateMixer("mamba", inner=k.int("mamba_expand") * h, state=k.int("mamba_d_state"),
                           conv=k.int("mamba_d_conv"),
                           dt_rank=-(-h // 16) if dt == "auto" else k.int("mamba_dt_rank"),
                           proj_bias=bool(k.switch("mamba_proj_bias")),
                           conv_bias=bool(k.switch("mamba_conv_bias")))
    if heads % kv:
        raise ValueError(f"{k.where}: num_key_value_heads ({kv}) must divide num_attention_heads ({heads})")
    mlp = [("mlp", "block.gate_up_proj.weight", (2 * ffn, h)), ("mlp", "block.down_proj.weight", (h, ffn))] \
        if v2 else [("mlp", f"block.{p}_proj.weight", (ffn, h)) for p in ("gate", "up")] + [
            ("mlp", "block.down_proj.weight", (h, ffn))]
    mlp += [("mlp", "block.gate_up_proj.bias", (2 * ffn,)), ("mlp", "block.down_proj.bias", (h,))] \
        if bias else []
    block = [("attention", "block.q_proj.weight", (heads * hd, wide)),
             ("attention", "block.k_proj.weight", (kv * hd, wide)),
             ("attention", "block.v_proj.weight", (kv * hd, wide)),
             ("attention", "block.o_proj.weight", (h, heads * hd)),
             ("norms", "block.input_layernorm.weight", (wide,)),
             ("norms", "block.pre_ff_layernorm.weight", (h,))] + mlp
    per_use = [("attention", "hybrid.linear.weight", (h, h))]
    if v2:
        per_use += [("mlp", "adapter.gate_up.0.weight", (r, h)),
                    ("mlp", "adapter.gate_up.1.weight", (2 * ffn, r))]
        if k.switch("use_shared_attention_adapter"):
            per_use += [("attention", f"adapter.{p}.{i}.weight", s) for p in "qkv"
                        for i, s in ((0, (r, wide)), (1, (wide, r)))]
    k.used.update(("layers_block_type", "attn_layer_period", "attn_layer_offset", "attention_hidden_size",
                   "attention_head_dim", "hidden_mamba_act", "use_long_context", "use_mem_rope",
                   "use_mem_eff_path", "n_mamba_heads", "mamba_dt_rank", "hidden_act"))
    return dict(f, heads=heads, kv_heads=kv, head_dim=hd, ffn_hidden=ffn, norms_per_layer=1, mixer=mixer,
                mixer_mlp=False, extra_layer_tensors=tuple(e + (blocks,) for e in block)
                + tuple(e + (uses,) for e in per_use),
                attention_layout=AttentionLayout(block_uses=uses, block_kv=2 * kv * hd))


#: The types read here and their readers: ``{model_type: (reader, modeling file)}``.
BLOCK_TYPES = {"rwkv": (_rwkv, _src("rwkv")), "nemotron_h": (_nemotron_h, _src("nemotron_h")),
               "lfm3": (_lfm3, _src("lfm3")), "recurrent_gemma": (_recurrent_gemma, _src("recurrent_gemma")),
               "bailing_hybrid": (_bailing_hybrid, _src("bailing_hybrid")),
               "gpt_neox_japanese": (_gpt_neox_japanese, _src("gpt_neox_japanese")),
               "bert-generation": (lambda k: _bert_decoder(k, True), _src("bert_generation")),
               "git": (lambda k: _bert_decoder(k, False), _src("git")),
               "modernbert-decoder": (_modernbert_decoder, _src("modernbert_decoder")),
               "doge": (_doge, _src("doge")), "cpmant": (_cpmant, _src("cpmant")),
               "gemma4_text": (_gemma4, _src("gemma4")),
               "gemma4_unified_text": (_gemma4, _src("gemma4_unified")),
               "gemma3n_text": (_gemma3n, _src("gemma3n")),
               "zamba": (lambda k: _zamba(k, False), _src("zamba")),
               "zamba2": (lambda k: _zamba(k, True), _src("zamba2"))}


__all__ = ["BLOCK_TYPES"]
