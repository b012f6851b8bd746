"""The config reader of the Hugging Face types with state-space (Mamba) or linear-attention layers (issue 36;
chapter 1, "Load your model"; chapter 3 for their cache): pure Mamba and Mamba-2 models and the hybrids
that put attention layers among them; also a few layouts that need a reader of their own rather than a
:class:`~llmsizing.hf_types.Rule` (GPT-Neo, MPT, Ernie 4.5 MoE, JetMoE). Each reader follows
transformers 5.24's ``modeling_<type>.py`` (cited per type in :data:`SSM_TYPES`), reads every key in the
spellings its config class accepts and with its defaults (:class:`~llmsizing.hf_generic._Keys`), and
refuses any unread key that could change the count.
"""

from __future__ import annotations

import math

from .hf_blocks import BLOCK_TYPES, _base, _Fixed, _kinds, _src
from .hf_extra import EXTRA_TYPES
from .hf_generic import _Keys, _short, generic_fields, refuse_unread
from .hf_types import Moe, Rule, config_classes
from .layer_kinds import StateMixer
from .model_keys import _HF_ACTIVATION_ALIASES, ACTIVATIONS


def _dt_rank(k: _Keys, key: str, hidden: int) -> int:
    """``"auto"`` is ``ceil(hidden / 16)`` (``MambaConfig.__post_init__``, ``JambaConfig``'s too)."""
    v = k.value(key)
    return math.ceil(hidden / 16) if v == "auto" else k.int(key)


def _mamba(k: _Keys) -> dict:
    """``modeling_mamba.py`` / ``modeling_falcon_mamba.py``: a block is an RMSNorm and ``MambaMixer``
    (FalconMamba's extra norms on dt, B and C have no weights)."""
    f = _base(k, True)
    h = f["hidden"]
    k.used.update(("intermediate_size",))          # MambaConfig.__post_init__ sets it to expand x hidden
    mixer = StateMixer("mamba", inner=int(k.value("expand") * h), state=k.int("state_size"),
                       conv=k.int("conv_kernel"), dt_rank=_dt_rank(k, "time_step_rank", h),
                       proj_bias=bool(k.switch("use_bias")), conv_bias=bool(k.switch("use_conv_bias")))
    return dict(f, heads=1, ffn_hidden=h, norms_per_layer=1, mixer=mixer, mixer_mlp=False)


def _mamba2(k: _Keys) -> dict:
    """``modeling_mamba2.py``: a block is an RMSNorm and ``Mamba2Mixer`` (``inner = expand x hidden``, which
    ``validate_architecture`` requires to be ``num_heads x head_dim``)."""
    f = _base(k, False)
    h = f["hidden"]
    inner = int(k.value("expand") * h)
    heads = k.int("num_heads")
    if heads * k.int("head_dim") != inner:
        raise ValueError(f"{k.where}: num_heads x head_dim must be expand x hidden_size ({inner}), as "
                         "Mamba2Config.validate_architecture requires")
    k.used.update(("time_step_rank",))               # not a parameter of Mamba-2 (dt_bias is per head)
    mixer = StateMixer("mamba2", inner=inner, state=k.int("state_size"), conv=k.int("conv_kernel"),
                       heads=heads, groups=k.int("n_groups"), proj_bias=bool(k.switch("use_bias")),
                       conv_bias=bool(k.switch("use_conv_bias")))
    return dict(f, heads=1, ffn_hidden=h, norms_per_layer=1, mixer=mixer, mixer_mlp=False)


def _attention(k: _Keys, f: dict, qkv_bias: bool = False, mlp_bias: bool = False) -> dict:
    heads = k.int("num_attention_heads")
    kv = k.int("num_key_value_heads", required=False) or heads
    return dict(f, heads=heads, kv_heads=kv, ffn_hidden=k.int("intermediate_size"), qkv_bias=qkv_bias,
                bias=False, mlp_bias=mlp_bias)


def _jamba(k: _Keys) -> dict:
    """``modeling_jamba.py``: attention in layers ``i % attn_layer_period == attn_layer_offset``, Mamba
    (with RMSNorms on dt, B and C) elsewhere; experts (``num_experts`` of width ``intermediate_size``, a
    router without bias) in layers ``i % expert_layer_period == expert_layer_offset``, a dense MLP
    elsewhere."""
    f = _attention(k, _base(k, False))
    h, n = f["hidden"], f["layers"]
    a_per, a_off = k.int("attn_layer_period"), k.int("attn_layer_offset", minimum=0)
    e_per, e_off = k.int("expert_layer_period"), k.int("expert_layer_offset", minimum=0)
    mixer = StateMixer("mamba", inner=k.int("mamba_expand") * h, state=k.int("mamba_d_state"),
                       conv=k.int("mamba_d_conv"), dt_rank=_dt_rank(k, "mamba_dt_rank", h),
                       proj_bias=bool(k.switch("mamba_proj_bias")),
                       conv_bias=bool(k.switch("mamba_conv_bias")), bc_dt_norms=True)
    f.update(mixer=mixer, mixer_layers=tuple(i for i in range(n) if i % a_per != a_off))
    experts = k.int("num_experts", minimum=0)
    moe = tuple(i for i in range(n) if i % e_per == e_off)
    if experts > 1 and moe:
        f.update(experts=experts, experts_per_token=k.int("num_experts_per_tok"), moe_layers=moe)
    else:
        k.used.add("num_experts_per_tok")
    return f


def _bamba(k: _Keys) -> dict:
    """``modeling_bamba.py``: attention in ``attn_layer_indices`` (``None``: none), ``BambaMixer`` (Mamba-2)
    elsewhere, every layer with a gated MLP of ``intermediate_size`` (``mlp_bias``); attention biases with
    ``attention_bias``."""
    f = _attention(k, _base(k, False), qkv_bias=k.switch("attention_bias"), mlp_bias=k.switch("mlp_bias"))
    h, n = f["hidden"], f["layers"]
    if f["qkv_bias"]:
        f.update(bias=True, qkv_bias=False, mlp_bias=f["mlp_bias"])
    attn = k.value("attn_layer_indices", required=False) or []
    if not isinstance(attn, list) or any(not isinstance(i, int) or not 0 <= i < n for i in attn):
        raise ValueError(f"{k.where}: attn_layer_indices must be a list of layer indices below {n}, got "
                         f"{attn!r}")
    f.update(mixer=_mamba2_mixer(k, h), mixer_layers=tuple(i for i in range(n) if i not in attn))
    return f


def _mamba2_mixer(k: _Keys, h: int, p: str = "mamba_") -> StateMixer:
    """A Mamba-2 mixer from the ``mamba_*`` keys of a hybrid (Bamba, GraniteMoeHybrid, NemotronH)."""
    inner = int(k.value(p + "expand") * h) if p + "expand" in _fields(k) else k.int(p + "num_heads") \
        * k.int(p + "head_dim")
    heads = k.int(p + "n_heads") if p + "n_heads" in _fields(k) else k.int(p + "num_heads")
    d_head = p + ("d_head" if p + "d_head" in _fields(k) else "head_dim")
    if k.value(d_head) != "auto" and k.int(d_head) * heads != inner:
        raise ValueError(f"{k.where}: the Mamba heads x head width must be the mixer width ({inner})")
    return StateMixer("mamba2", inner=inner, state=k.int(p + "d_state" if p + "d_state" in _fields(k)
                                                          else "ssm_state_size"),
                      conv=k.int(p + "d_conv" if p + "d_conv" in _fields(k) else "conv_kernel"),
                      heads=heads, groups=k.int(p + "n_groups"), proj_bias=bool(k.switch(p + "proj_bias")),
                      conv_bias=bool(k.switch(p + "conv_bias")))


def _fields(k: _Keys) -> dict:
    return config_classes().get(k.mtype, {}).get("defaults", {})


def _granitemoehybrid(k: _Keys) -> dict:
    """``modeling_granitemoehybrid.py``: every layer a Mamba-2 mixer or attention (``layer_types``), then
    ``num_local_experts`` routed experts of ``intermediate_size`` (a router without bias) plus a gated
    ``shared_mlp`` of ``shared_intermediate_size`` (alone when there are no experts)."""
    f = _attention(k, _base(k, False))
    if k.switch("attention_bias"):
        f.update(bias=True, mlp_bias=False)
    n, shared = f["layers"], k.int("shared_intermediate_size")
    f.update(mixer=_mamba2_mixer(k, f["hidden"]),
             mixer_layers=_kinds(k, n, "layer_types", ("linear_attention", "mamba"),
                                 ("attention", "full_attention")))
    experts = k.int("num_local_experts", minimum=0)
    if experts:
        f.update(experts=experts, experts_per_token=k.int("num_experts_per_tok"),
                 expert_ffn_hidden=f["ffn_hidden"], shared_experts=1, shared_expert_ffn_hidden=shared)
    else:
        f.update(ffn_hidden=shared)
        k.used.update(("num_experts_per_tok",))
    return f


_QWEN3_NEXT = Rule(source=_src("qwen3_next"), qkv_bias=False, o_bias=False, mlp_bias=False, qk_norm="head",
                   attn_gate="full", window=None,
                   moe=Moe(shared_width="shared_expert_intermediate_size", shared_gate=True,
                           step="decoder_sparse_step", dense_list="mlp_only_layers"))


_QWEN3_5 = Rule(source=_src("qwen3_5"), qkv_bias=False, o_bias=False, mlp_bias=False, qk_norm="head",
                attn_gate="full", window=None)
_QWEN3_5_MOE = Rule(source=_src("qwen3_5_moe"), qkv_bias=False, o_bias=False, mlp_bias=False, qk_norm="head",
                    attn_gate="full", window=None,
                    moe=Moe(shared_width="shared_expert_intermediate_size", shared_gate=True))


_LARA_MINI = Rule(source=_src("lara_mini"), mlp_bias=False, qk_norm="head", window=None,
                  moe=Moe(shared_width="shared_expert_intermediate_size"))
_LARA_PATTERN = ("linear_attention", "sliding_attention", "linear_attention", "full_attention",
                 "sliding_attention")


def _lara_mini(k: _Keys) -> dict:
    """``modeling_lara_mini.py``: Gated DeltaNet, sliding-window and full attention layers (``layer_types``;
    by default the released period of five), every layer with routed experts and an ungated shared expert."""
    n = k.int("num_hidden_layers")
    kinds = k.value("layer_types", required=False)
    if kinds is None:
        kinds = [_LARA_PATTERN[i % 5] for i in range(n)]
    f = _qwen3_next(k, _LARA_MINI, kinds)
    windowed = sum(t == "sliding_attention" for t in kinds)
    if windowed:
        f.update(sliding_window=k.int("sliding_window"),
                 window_layers=None if windowed == n - len(f["mixer_layers"]) else windowed)
    return f


def _qwen3_next(k: _Keys, rule: Rule = _QWEN3_NEXT, kinds: list | None = None) -> dict:
    """``modeling_qwen3_next.py``: ``Qwen3NextGatedDeltaNet`` in the ``linear_attention`` layers of
    ``layer_types`` (by default three in four: every ``full_attention_interval``-th layer attends), gated
    attention elsewhere (``q_proj`` doubled for the output gate, per-head q/k norms), Qwen2-MoE's experts with
    a gated shared expert."""
    n = k.int("num_hidden_layers")
    kinds = kinds or k.value("layer_types", required=False)
    if kinds is None:
        every = k.config.get("full_attention_interval", 4)
        kinds = ["linear_attention" if (i + 1) % every else "full_attention" for i in range(n)]
    k.used.update(("layer_types", "full_attention_interval"))
    mix = _kinds(_Fixed(k, kinds), n, "layer_types", ("linear_attention",),
                 ("full_attention",) + (("sliding_attention",) if rule is _LARA_MINI else ()))
    heads, groups = k.int("linear_num_value_heads"), k.int("linear_num_key_heads")
    mixer = StateMixer("gdn", inner=heads * k.int("linear_value_head_dim"),
                       state=k.int("linear_key_head_dim"), conv=k.int("linear_conv_kernel_dim"),
                       heads=heads, groups=groups, conv_bias=False)
    f = generic_fields(k.config, k.where, k.mtype, rule, keys=k)
    return dict(f, mixer=mixer, mixer_layers=mix)


_OLMO_HYBRID = Rule(source=_src("olmo_hybrid"), mlp_bias=False, qk_norm="proj", window=None)


def _olmo_hybrid(k: _Keys) -> dict:
    """``modeling_olmo_hybrid.py``: ``OlmoHybridGatedDeltaNet`` (q, k, v, a, b, g and o projections: the
    parameters of Gated DeltaNet) in the ``linear_attention`` layers, OLMo 2's attention (q/k norms over the
    projections, norms after attention and MLP) elsewhere; ``OlmoHybridConfig.__post_init__``'s defaults:
    every fourth layer attends (at least the last), ``num_attention_heads`` key and value heads of
    ``0.75 hidden / heads`` and twice that channels."""
    n, h, a = k.int("num_hidden_layers"), k.int("hidden_size"), k.int("num_attention_heads")
    kinds = k.value("layer_types", required=False)
    if kinds is None:
        kinds = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
        if "full_attention" not in kinds:
            kinds[-1] = "full_attention"
    mix = _kinds(_Fixed(k, kinds), n, "layer_types", ("linear_attention",), ("full_attention",))
    groups = k.int("linear_num_key_heads", required=False) or a
    heads = k.int("linear_num_value_heads", required=False) or a
    kd = k.int("linear_key_head_dim", required=False) or int(0.75 * h / groups)
    vd = k.int("linear_value_head_dim", required=False) or 2 * kd
    mixer = StateMixer("gdn", inner=heads * vd, state=kd, conv=k.int("linear_conv_kernel_dim"), heads=heads,
                       groups=groups, conv_bias=False)
    k.used.update(("linear_allow_neg_eigval", "linear_a_log_min", "linear_a_log_max", "linear_dt_min",
                   "linear_dt_max", "linear_dt_init_floor"))
    f = generic_fields(k.config, k.where, k.mtype, _OLMO_HYBRID, keys=k)
    return dict(f, mixer=mixer, mixer_layers=mix)


def _falcon_h1(k: _Keys) -> dict:
    """``modeling_falcon_h1.py``: every layer runs attention and ``FalconH1Mixer`` (Mamba-2 of
    ``mamba_d_ssm`` channels, or ``mamba_expand x hidden``; its gated norm only with ``mamba_rms_norm``;
    ``projectors_bias`` on ``out_proj``) side by side after one norm, then a gated MLP."""
    f = _attention(k, _base(k, False), mlp_bias=k.switch("mlp_bias"))
    if k.switch("attention_bias"):
        f.update(bias=True)
    h = f["hidden"]
    inner = k.int("mamba_d_ssm", required=False) or int(k.value("mamba_expand") * h)
    heads = k.int("mamba_n_heads")
    if k.value("mamba_d_head") != "auto" and k.int("mamba_d_head") * heads != inner:
        raise ValueError(f"{k.where}: mamba_n_heads x mamba_d_head must be the mixer width ({inner})")
    k.used.update(("mamba_expand", "mamba_norm_before_gate", "mlp_multipliers", "ssm_multipliers"))
    mixer = StateMixer("mamba2", inner=inner, state=k.int("mamba_d_state"), conv=k.int("mamba_d_conv"),
                       heads=heads, groups=k.int("mamba_n_groups"),
                       proj_bias=bool(k.switch("mamba_proj_bias")),
                       out_bias=bool(k.switch("projectors_bias")),
                       conv_bias=bool(k.switch("mamba_conv_bias")),
                       gated_norm=bool(k.switch("mamba_rms_norm")))
    return dict(f, mixer=mixer, mixer_parallel=True)


_MINIMAX = Rule(source=_src("minimax"), qkv_bias=False, o_bias=False, mlp_bias=False, window=None,
                moe=Moe(width="intermediate_size"))


def _minimax(k: _Keys) -> dict:
    """``modeling_minimax.py``: lightning attention in the ``linear_attention`` layers of ``layer_types``
    (by default every second layer), softmax attention elsewhere, Mixtral's experts in every layer."""
    n = k.int("num_hidden_layers")
    kinds = k.value("layer_types", required=False)
    if kinds is None:
        kinds = ["full_attention" if (i + 1) % 2 else "linear_attention" for i in range(n)]
    k.used.add("layer_types")
    mix = _kinds(_Fixed(k, kinds), n, "layer_types", ("linear_attention",), ("full_attention",))
    f = generic_fields(k.config, k.where, k.mtype, _MINIMAX, keys=k)
    d = f["head_dim"]
    mixer = StateMixer("lightning", inner=f["heads"] * d, state=d, heads=f["heads"],
                       block=k.int("block_size"), conv_bias=False)
    return dict(f, mixer=mixer, mixer_layers=mix)


_KIMI_LINEAR = Rule(source=_src("kimi_linear"), qkv_bias=False, o_bias=False, mlp_bias=False, mla=True,
                    window=None, moe=Moe(shared="n_shared_experts", router_bias=True))


def _kimi_linear(k: _Keys) -> dict:
    """``modeling_kimi_linear.py``: Kimi Delta Attention in the ``linear_attention`` layers of ``layer_types``
    (by default all but every fourth from layer 4), DeepSeek-V3's latent attention elsewhere; routed experts
    (a score-correction buffer) and ``n_shared_experts`` shared ones in the ``sparse`` layers of
    ``mlp_layer_types`` (by default all but the first ``first_k_dense_replace``, 1)."""
    n = k.int("num_hidden_layers")
    kinds = k.value("layer_types", required=False)
    if kinds is None:
        if "linear_attn_config" in k.config:
            raise ValueError(f"{k.where}: linear_attn_config is not read; give layer_types")
        kinds = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n)]
    mix = _kinds(_Fixed(k, kinds), n, "layer_types", ("linear_attention",), ("full_attention",))
    config = dict(k.config)
    if config.get("mlp_layer_types") is None:
        first = config.get("first_k_dense_replace", 1)
        config["mlp_layer_types"] = ["dense" if i < first else "sparse" for i in range(n)]
    k2 = _Keys(config, k.where, k.mtype)
    k2.used |= k.used | {"layer_types", "first_k_dense_replace"}
    heads, hd = k2.int("linear_num_heads"), k2.int("linear_head_dim")
    mixer = StateMixer("kda", inner=heads * hd, state=hd, conv=k2.int("linear_conv_kernel_dim"), heads=heads,
                       groups=heads, conv_bias=False)
    f = generic_fields(config, k.where, k.mtype, _KIMI_LINEAR, keys=k2)
    k.used |= k2.used
    return dict(f, mixer=mixer, mixer_layers=mix)


def _gpt_neo(k: _Keys) -> dict:
    """``modeling_gpt_neo.py`` (not a state-space model; a layout of its own): GPT-2's block with learned
    positions, q/k/v without biases but ``out_proj`` with one, and the ``local`` layers of ``attention_types``
    (by default every second) attending to the last ``window_size`` tokens."""
    n, h = k.int("num_layers"), k.int("hidden_size")
    types = k.value("attention_types", required=False) or [[["global", "local"], 12]]
    kinds = [t for item in types for _ in range(item[1]) for t in item[0]]
    if len(kinds) != n or set(kinds) - {"global", "local"}:
        raise ValueError(f"{k.where}: attention_types must expand to {n} 'global' or 'local' layers, got "
                         f"{_short(types)}")
    tied = k.value("tie_word_embeddings", required=False)
    act = k.value("activation_function", required=False)
    act = _HF_ACTIVATION_ALIASES.get(act, act) if isinstance(act, str) else None
    local = kinds.count("local")
    f = dict(layers=n, hidden=h, heads=k.int("num_heads"),
             ffn_hidden=k.int("intermediate_size", required=False) or 4 * h, vocab=k.int("vocab_size"),
             gated_mlp=False, norm="layernorm", bias=False, o_bias=True, mlp_bias=True, learned_pos=True,
             max_seq=k.int("max_position_embeddings"), tied_embeddings=True if tied is None else bool(tied),
             activation=act if act in ACTIVATIONS else None)
    if local:
        f.update(sliding_window=k.int("window_size"), window_layers=None if local == n else local)
    return f


def _mpt(k: _Keys) -> dict:
    """``modeling_mpt.py`` (a layout of its own): fused ``Wqkv`` and ``out_proj`` without biases, an MLP of
    ``4 x hidden`` without biases (``expansion_ratio`` other than 4 is refused: transformers ignores it, MPT's
    own code does not), LayerNorms whose bias is removed, ALiBi (no parameters); ``attn_config`` and
    ``learned_pos_emb`` build no parameter in transformers' module."""
    h = k.int("d_model")
    if k.int("expansion_ratio") != 4:
        raise ValueError(f"{k.where}: expansion_ratio={k.value('expansion_ratio')} is ignored by "
                         "transformers' MptMLP (always 4 x d_model) but not by MPT's own code; refused "
                         "rather than guess")
    tied = k.value("tie_word_embeddings", required=False)
    k.used.update(("attn_config", "learned_pos_emb", "max_seq_len", "norm_type", "init_device",
                   "embedding_fraction"))
    return dict(layers=k.int("n_layers"), hidden=h, heads=k.int("n_heads"), ffn_hidden=4 * h,
                vocab=k.int("vocab_size"), gated_mlp=False, norm="layernorm_nobias", fused_qkv=True,
                tied_embeddings=True if tied is None else bool(tied), activation="gelu")


def _lfm2(k: _Keys) -> dict:
    """``modeling_lfm2.py``: ``Lfm2ShortConv`` in the ``conv`` layers of ``layer_types`` (by default those not
    in ``full_attn_idxs``; ``None``: every layer attends), attention with per-head q/k RMSNorms elsewhere, a
    gated MLP whose width ``block_auto_adjust_ff_dim`` shrinks to ``2/3``, times ``block_ffn_dim_multiplier``,
    rounded up to ``block_multiple_of``; the last norm is called ``embedding_norm``."""
    n, h = k.int("num_hidden_layers"), k.int("hidden_size")
    kinds = k.value("layer_types", required=False)
    if kinds is None:
        full = k.value("full_attn_idxs", required=False)
        full = range(n) if full is None else full
        kinds = ["full_attention" if i in full else "conv" for i in range(n)]
    k.used.update(("layer_types", "full_attn_idxs"))
    mix = _kinds(_Fixed(k, kinds), n, "layer_types", ("conv",), ("full_attention",))
    f = k.int("intermediate_size")
    if k.switch("block_auto_adjust_ff_dim"):
        f = int(2 * f / 3)
        mult = k.value("block_ffn_dim_multiplier", required=False)
        if mult is not None:
            step = k.int("block_multiple_of")
            f = step * ((int(mult * f) + step - 1) // step)
    k.used.update(("block_ffn_dim_multiplier", "block_multiple_of"))
    heads = k.int("num_attention_heads")
    tied = k.value("tie_word_embeddings", required=False)
    mixer = StateMixer("shortconv", inner=h, state=0, conv=k.int("conv_L_cache"),
                       conv_bias=bool(k.switch("conv_bias")))
    kv = k.int("num_key_value_heads", required=False) or heads
    return dict(layers=n, hidden=h, heads=heads, kv_heads=kv, ffn_hidden=f, vocab=k.int("vocab_size"),
                qk_norm="head",
                tied_embeddings=True if tied is None else bool(tied), mixer=mixer, mixer_layers=mix)


_ERNIE_MOE = Rule(source=_src("ernie4_5_moe"), qkv_bias="use_bias", o_bias="use_bias", mlp_bias="use_bias",
                  window=None, moe=Moe(shared="moe_num_shared_experts", router_bias=True))


def _ernie4_5_moe(k: _Keys) -> dict:
    """``modeling_ernie4_5_moe.py`` (not a state-space model; a layer pattern of its own): experts in the
    layers ``(i + 1) % moe_layer_interval == 0`` from ``moe_layer_start_index`` to ``moe_layer_end_index``
    (-1: the last), each with ``moe_num_shared_experts`` shared experts and a learned score-correction bias;
    ``use_bias`` biases attention, MLPs and the LM head."""
    n = k.int("num_hidden_layers")
    start, every = k.int("moe_layer_start_index", minimum=0), k.int("moe_layer_interval")
    end = k.value("moe_layer_end_index")
    end = n - 1 if end == -1 else k.int("moe_layer_end_index", minimum=0)
    f = generic_fields(k.config, k.where, k.mtype, _ERNIE_MOE, keys=k)
    moe = tuple(i for i in range(n) if (i + 1) % every == 0 and start <= i <= end)
    if "experts" in f and moe:
        f["moe_layers"] = moe
    else:
        for key in ("experts", "experts_per_token", "expert_ffn_hidden", "shared_experts", "router_bias",
                    "moe_layers"):
            f.pop(key, None)
    return dict(f, lm_head_bias=bool(k.switch("use_bias")))


def _jetmoe(k: _Keys) -> dict:
    """``modeling_jetmoe.py`` (a layout of its own): a mixture of attention heads (``JetMoeMoA``: per layer
    ``num_local_experts`` query and output projections of ``num_key_value_heads x kv_channels``, a router
    without bias, one bias after the combine; ``kv_proj`` shared, no bias) and a mixture of MLP experts
    (``JetMoeMoE``: fused gate/up of ``2 x intermediate_size``, a router, one bias after the combine), both
    top-``num_experts_per_tok``; ``JetMoeConfig.__post_init__`` sets ``num_attention_heads`` to
    ``num_key_value_heads x num_experts_per_tok`` whatever the config says."""
    f = _base(k, True)
    kv, e, top = k.int("num_key_value_heads"), k.int("num_local_experts"), k.int("num_experts_per_tok")
    if top > e:
        raise ValueError(f"{k.where}: num_experts_per_tok ({top}) must be at most num_local_experts ({e})")
    act = k.value("activation_function", required=False)
    act = _HF_ACTIVATION_ALIASES.get(act, act) if isinstance(act, str) else None
    ffn = k.int("intermediate_size")
    k.used.add("num_attention_heads")                 # overwritten by __post_init__ (above)
    return dict(f, heads=kv * top, kv_heads=kv, head_dim=k.int("kv_channels"), ffn_hidden=ffn,
                max_seq=k.int("max_position_embeddings"), activation=act if act in ACTIVATIONS else None,
                experts=e, experts_per_token=top, expert_ffn_hidden=ffn, attn_experts=e,
                attn_experts_per_token=top, o_bias=True,
                extra_layer_tensors=(("mlp", "mlp.down_proj.bias", (f["hidden"],), "moe"),))


#: Keys of these types that change no parameter and no state: kernels, scan and time-step settings.
_NO_PARAMETERS = ("max_position_embeddings", "hidden_act", "layer_types", "use_mamba_kernels", "use_mambapy",
                  "use_associative_scan", "residual_in_fp32", "rescale_prenorm_residual", "chunk_size",
                  "mamba_chunk_size", "time_step_min", "time_step_max", "time_step_floor", "time_step_limit",
                  "time_step_scale", "time_step_init_scheme", "num_logits_to_keep", "z_loss_coefficient",
                  "full_attn_alpha_factor", "full_attn_beta_factor", "linear_attn_alpha_factor",
                  "linear_attn_beta_factor", "mlp_alpha_factor", "mlp_beta_factor")

#: The types read here and their readers: ``{model_type: (reader, modeling file)}``.
SSM_TYPES = {"mamba": (_mamba, _src("mamba")), "falcon_mamba": (_mamba, _src("falcon_mamba")),
             "mamba2": (_mamba2, _src("mamba2")), "jamba": (_jamba, _src("jamba")),
             "bamba": (_bamba, _src("bamba")),
             "granitemoehybrid": (_granitemoehybrid, _src("granitemoehybrid")),
             "qwen3_next": (_qwen3_next, _src("qwen3_next")),
             "lfm2": (_lfm2, _src("lfm2")), **BLOCK_TYPES, **EXTRA_TYPES,
             "ernie4_5_moe": (_ernie4_5_moe, _src("ernie4_5_moe")),
             "jetmoe": (_jetmoe, _src("jetmoe")),
             "mpt": (_mpt, _src("mpt")),
             "gpt_neo": (_gpt_neo, _src("gpt_neo")),
             "falcon_h1": (_falcon_h1, _src("falcon_h1")),
             "kimi_linear": (_kimi_linear, _src("kimi_linear")),
             "minimax": (_minimax, _src("minimax")),
             "lara_mini": (_lara_mini, _src("lara_mini")),
             "olmo_hybrid": (_olmo_hybrid, _src("olmo_hybrid")),
             "qwen3_5_text": (lambda k: _qwen3_next(k, _QWEN3_5), _src("qwen3_5")),
             "qwen3_5_moe_text": (lambda k: _qwen3_next(k, _QWEN3_5_MOE), _src("qwen3_5_moe"))}


def ssm_fields(config: dict, where: str, mtype: str) -> dict:
    """The :class:`~llmsizing.model.Model` fields of a config of a :data:`SSM_TYPES` type."""
    reader, source = SSM_TYPES[mtype]
    k = _Keys(config, where, mtype)
    k.used.update(_NO_PARAMETERS)
    fields = reader(k)
    refuse_unread(config, where, mtype, k.used, source)
    return fields


__all__ = ["SSM_TYPES", "ssm_fields"]
