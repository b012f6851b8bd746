"""Hugging Face readers of types whose parts beyond the Llama block are extra tensors or an attention
layout (issue 36; chapter 1, "Load your model"; chapter 3 for their cache): BERT-style decoders
(BertGeneration, GIT), ModernBERT's decoder, Doge, CPM-Ant, Gemma 4 and Gemma 3n (per-layer embeddings, full
layers of their own width, KV sharing, AltUp, LAuReL), Zamba and Zamba2 (a shared transformer block), xLSTM.
Each reader follows transformers 5.24's ``modeling_<type>.py`` (cited per type in :data:`EXTRA_TYPES`) and
reads every key in the spellings and with the defaults of its config class
(:class:`~llmsizing.hf_generic._Keys`); :func:`llmsizing.hf_ssm.ssm_fields` runs them and refuses any unread
key that could change the count.
"""

from __future__ import annotations

from .hf_blocks import _base, _Fixed, _kinds, _src
from .hf_generic import _Keys, _short, generic_fields
from .hf_types import Moe, Rule
from .layer_kinds import AttentionLayout, StateMixer
from .model_keys import _HF_ACTIVATION_ALIASES, ACTIVATIONS


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
            ("lm_head", "per_layer_model_projection.weight", (n * p, h), "one"),
            ("lm_head", "per_layer_projection_norm.weight", (p,), "one"),
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
        ("lm_head", "altup_projections.weight", (a - 1, h, h), "one"),
        ("lm_head", "altup_unembed_projections.weight", (a - 1, h, h), "one"))
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


def _xlstm(k: _Keys) -> dict:
    """``modeling_xlstm.py`` (xLSTM 7B, Beck et al. 2025, arXiv:2503.13427; its own implementation, not
    the ``xlstm`` package's): per block an RMSNorm and the mLSTM layer (q, k of ``hidden x qk_dim_factor``, v
    and the output gate of ``hidden x v_dim_factor``), an RMSNorm and a gated SiLU MLP of ``hidden x
    ffn_proj_factor`` rounded up to ``ffn_round_up_to_multiple_of`` (``weight_mode="fused"`` fuses the same
    matrices); a final RMSNorm with ``add_out_norm``. Its cache (``xLSTMCache``) sizes q/k and v rounded up to
    64: a width that is not a multiple of 64 does not match the layer and is refused, as ``use_bias`` (biased
    norms) is."""
    f = _base(k, False)
    h = f["hidden"]
    if k.switch("use_bias"):
        raise ValueError(f"{k.where}: use_bias=True (RMSNorms with a bias, biased projections) is not "
                         "modelled")
    qk, v = int(h * k.value("qk_dim_factor")), int(h * k.value("v_dim_factor"))
    if qk % 64 or v % 64:
        raise ValueError(f"{k.where}: q/k width {qk} and v width {v} must be multiples of 64: xLSTMCache "
                         "rounds them up to 64 and would not match the layer")
    step = k.int("ffn_round_up_to_multiple_of")
    x = h * k.value("ffn_proj_factor")                 # round_up_to_next_multiple_of, as the module does
    ffn = int(((x + step - 1) // step) * step)
    k.used.update(("embedding_dim", "num_blocks", "qk_dim_factor", "v_dim_factor", "ffn_proj_factor",
                   "ffn_round_up_to_multiple_of", "weight_mode", "add_out_norm", "mode", "chunkwise_kernel",
                   "sequence_kernel", "step_kernel", "autocast_kernel_dtype", "inference_state_dtype",
                   "max_inference_chunksize", "return_last_states", "norm_reduction_force_float32",
                   "gate_soft_cap", "output_logit_soft_cap", "chunk_size", "use_bias"))
    mixer = StateMixer("mlstm", inner=v, state=qk, heads=k.int("num_heads"), conv=1)
    return dict(f, heads=1, ffn_hidden=ffn, mixer=mixer, final_norm=bool(k.switch("add_out_norm")))


_MIMO = Rule(source=_src("mimo_v2_flash"), qkv_bias="attention_bias", o_bias=False, mlp_bias=False,
             sinks=True, window=None, moe=Moe(router_bias=True))


def _mimo_v2_flash(k: _Keys) -> dict:
    """``modeling_mimo_v2_flash.py`` (MiMo-V2-Flash): q and k of ``head_dim``, v and the output projection's
    input of ``v_head_dim`` per head (q/k/v biased with ``attention_bias``, o never); the
    ``sliding_attention`` layers (by default all but the first and every sixth) have twice
    ``num_key_value_heads`` and learned sinks, the full layers neither; a dense first layer and experts with
    a score-correction buffer after it (``mlp_layer_types``, ``MiMoV2FlashConfig.__post_init__``'s
    defaults)."""
    n = k.int("num_hidden_layers")
    kinds = k.value("layer_types", required=False)
    if kinds is None:
        kinds = ["full_attention" if i == 0 or not (i + 1) % 6 else "sliding_attention" for i in range(n)]
    config = dict(k.config)
    if config.get("mlp_layer_types") is None:
        config["mlp_layer_types"] = ["dense"] + ["sparse"] * (n - 1)
    k2 = _Keys(config, k.where, k.mtype)
    k2.used |= k.used | {"v_head_dim", "attention_value_scale", "sliding_window_size"}
    f = generic_fields(config, k.where, k.mtype, _MIMO, keys=k2)
    k.used |= k2.used
    win = k.config["sliding_window_size"] + 1 if k.config.get("sliding_window_size") is not None \
        else k.int("sliding_window")
    f.update(_gemma_windows(k, kinds, win))
    kv, w = f["kv_heads"], kinds.count("sliding_attention")
    if w and f["heads"] % (2 * kv):
        raise ValueError(f"{k.where}: twice num_key_value_heads ({2 * kv}) must divide num_attention_heads "
                         f"({f['heads']}) in the sliding_attention layers")
    vhd = k.int("v_head_dim")
    f.update(kv_heads=2 * kv if w else kv, attention_layout=AttentionLayout(
        full_kv_heads=kv, v_head_dim=None if vhd == f["head_dim"] else vhd, full_sinks=False))
    return f


#: The types read here and their readers: ``{model_type: (reader, modeling file)}``.
EXTRA_TYPES = {"bert-generation": (lambda k: _bert_decoder(k, True), _src("bert_generation")),
               "git": (lambda k: _bert_decoder(k, False), _src("git")),
               "modernbert-decoder": (_modernbert_decoder, _src("modernbert_decoder")),
               "doge": (_doge, _src("doge")), "cpmant": (_cpmant, _src("cpmant")),
               "gemma4_text": (_gemma4, _src("gemma4")),
               "gemma4_unified_text": (_gemma4, _src("gemma4_unified")),
               "gemma3n_text": (_gemma3n, _src("gemma3n")),
               "zamba": (lambda k: _zamba(k, False), _src("zamba")),
               "zamba2": (lambda k: _zamba(k, True), _src("zamba2")), "xlstm": (_xlstm, _src("xlstm")),
               "mimo_v2_flash": (_mimo_v2_flash, _src("mimo_v2_flash"))}


__all__ = ["EXTRA_TYPES"]
