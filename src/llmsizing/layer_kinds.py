"""Sequence mixers with a fixed per-sequence state instead of a KV cache (issue 36; chapters 1 and 3): the
selective state-space layers of Mamba (Gu & Dao 2023, arXiv:2312.00752) and Mamba-2 (Dao & Gu 2024,
arXiv:2405.21060), as ``transformers`` 5.24 builds them.

A :class:`StateMixer` describes one such layer: its parameter tensors (``modeling_mamba.py``'s
``MambaMixer``: ``in_proj``, a depthwise ``conv1d``, ``x_proj``, ``dt_proj``, ``A_log``, ``D``, ``out_proj``;
``modeling_mamba2.py``'s ``Mamba2Mixer``: one ``in_proj`` for x, z, B, C and dt, ``conv1d`` over x, B and C,
``dt_bias``, ``A_log``, ``D``, a gated RMSNorm, ``out_proj``) and the state a sequence keeps in it whatever
its length: the last ``conv`` inputs of the convolution and the SSM state, the ``conv_states`` and
``recurrent_states`` of transformers' ``LinearAttentionLayer`` cache (``cache_utils.py``). A
:class:`~llmsizing.model.Model` lists which of its layers use the mixer instead of attention
(``mixer_layers``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_bool, check_choice, check_int

#: The mixer kinds: Mamba's selective scan (one state of ``state`` numbers per channel), Mamba-2's (one per
#: head and head channel, B and C shared within ``groups``) and the gated delta rule of Gated DeltaNet (Yang,
#: Kautz & Hatamizadeh 2024, arXiv:2412.06464; Qwen3-Next's ``Qwen3NextGatedDeltaNet``): ``heads`` value heads
#: of ``inner / heads`` channels, ``groups`` key heads of ``state`` channels, a ``state x head`` matrix of
#: state per value head.
#: ``lightning``: MiniMax-01's lightning attention (arXiv:2501.08313; ``MiniMaxLightningAttention``), linear
#: attention with a ``head x head`` state per head and no convolution, whose decay tables of ``block``
#: positions are persistent buffers (saved in the checkpoint; counted, as DeepSeek-V3's router bias is).
#: ``kda``: Kimi Delta Attention (Kimi Linear, arXiv:2510.26692; ``KimiLinearDeltaAttention``): ``heads``
#: heads of ``state`` channels for q, k and v, a low-rank forget gate and output gate, a ``state x state``
#: state per head.
#: ``shortconv``: LFM2's gated short convolution (``Lfm2ShortConv``): ``in_proj`` to B, C and x, a depthwise
#: convolution of ``conv`` taps over ``inner = hidden`` channels, ``out_proj``; its state is the last ``conv``
#: inputs only (``state`` 0).
#: ``rwkv``: RWKV-4's time mixing (Peng et al. 2023, arXiv:2305.13048; ``RwkvSelfAttention``): key, value,
#: receptance and output matrices, per-channel decay and bonus, three token-shift mixes; the channel mixing's
#: receptance matrix and two mixes also live here (its key/value matrices are the block's two-matrix MLP). Its
#: state: the last input of both token shifts (``conv_channels = 2 inner``, ``conv`` 1) and the WKV numerator,
#: denominator and running maximum (``state`` 3 per channel), the five tensors of ``RwkvOutput.state``.
#: ``rglru``: Griffin's recurrent block (De et al. 2024, arXiv:2402.19427; RecurrentGemma's
#: ``RecurrentGemmaRecurrentBlock``): two biased input projections to ``inner`` (``lru_width``) channels, a
#: depthwise convolution of ``conv`` taps with bias, the RG-LRU (a recurrent parameter per channel,
#: block-diagonal input and recurrence gates of ``heads`` blocks with biases), a biased output projection.
#: Its state: the convolution's last ``conv - 1`` inputs and one recurrent number per channel.
#: ``kda_full``: Kimi Delta Attention with full-rank forget and output gates (``f_proj``, ``g_proj`` of
#: ``inner x hidden``; Ling 2.5's ``BailingHybridDeltaAttention``), the same state.
#: ``mlstm``: xLSTM's matrix LSTM (Beck et al. 2024, arXiv:2405.04517; ``xLSTMLayer``): q and k of
#: ``state`` channels, v and an output gate of ``inner``, per-head input and forget gates with biases, a
#: per-head norm over v, ``out_proj``; per head a ``state/heads x inner/heads`` memory, a normaliser of
#: ``state/heads`` and a running maximum (``xLSTMCache.rnn_state``), no convolution.
MIXER_KINDS = ("mamba", "mamba2", "gdn", "lightning", "kda", "shortconv", "rwkv", "rglru", "kda_full",
               "mlstm")


#: Components an extra tensor may count under (:meth:`~llmsizing.model.Model.param_breakdown`'s names): a
#: block's, and, outside the blocks, ``embedding``/``position`` for lookup tables (CPM-Ant's prompt rows and
#: segment embedding, Gemma's per-layer embeddings; :func:`llmsizing.flops.matmul_params` leaves them out) and
#: ``lm_head`` for the other model-level tensors (ModernBERT's prediction head, Gemma's per-layer-input and
#: AltUp projections), which are multiplied.
EXTRA_COMPONENTS = ("attention", "mlp", "norms", "embedding", "position", "lm_head")


@dataclass(frozen=True)
class StateMixer:
    """One state-space mixer layer.

    ``inner``: the expanded width (``expand x hidden``: transformers' ``intermediate_size`` of the mixer);
    ``state``: ``d_state`` (``state_size``); ``conv``: the convolution's kernel (``conv_kernel``/``d_conv``);
    Mamba: ``dt_rank`` (``time_step_rank``) and ``bc_dt_norms`` (Jamba's RMSNorms on dt, B and C);
    Mamba-2: ``heads`` (``num_heads``, each of ``inner / heads`` channels) and ``groups`` (``n_groups``);
    ``proj_bias``: biases on ``in_proj`` and ``out_proj`` (``use_bias``); ``out_bias``: on ``out_proj`` alone
    (``None``: as ``proj_bias``; Falcon-H1's ``projectors_bias``); ``conv_bias``: on ``conv1d``;
    ``gated_norm``: Mamba-2's gated RMSNorm before ``out_proj`` (Falcon-H1's ``mamba_rms_norm`` can drop
    it)."""

    kind: str
    inner: int
    state: int
    conv: int = 4
    dt_rank: int = 0
    heads: int = 0
    groups: int = 1
    proj_bias: bool = False
    conv_bias: bool = True
    bc_dt_norms: bool = False
    gated_norm: bool = True
    out_bias: bool | None = None
    block: int = 0

    def __post_init__(self):
        check_choice("kind", self.kind, MIXER_KINDS)
        for f in ("inner", "state", "conv"):
            object.__setattr__(self, f, check_int(f, getattr(self, f), minimum=0 if f == "state" else 1))
        for f in ("proj_bias", "conv_bias", "bc_dt_norms", "gated_norm"):
            object.__setattr__(self, f, check_bool(f, getattr(self, f)))
        if self.kind == "lightning":
            object.__setattr__(self, "block", check_int("block", self.block))
        if self.kind == "mamba":
            object.__setattr__(self, "dt_rank", check_int("dt_rank", self.dt_rank))
        elif self.kind not in ("shortconv", "rwkv", "rglru"):
            heads = check_int("heads", self.heads)
            groups = check_int("groups", self.groups)
            if self.inner % heads or heads % groups:
                raise ValueError(f"heads ({heads}) must divide inner ({self.inner}) and groups ({groups}) "
                                 "must divide heads")
            object.__setattr__(self, "heads", heads)
            object.__setattr__(self, "groups", groups)
            if self.kind == "mlstm" and (self.state == 0 or self.state % heads):
                raise ValueError(f"heads ({heads}) must divide state ({self.state}), the mLSTM's q/k width")

    @property
    def conv_channels(self) -> int:
        """Channels of the depthwise convolution: ``inner`` (Mamba), ``inner + 2 groups x state`` (Mamba-2:
        x, B and C)."""
        if self.kind in ("lightning", "mlstm"):
            return 0
        if self.kind in ("mamba", "shortconv", "rglru"):
            return self.inner
        if self.kind == "rwkv":
            return 2 * self.inner
        return self.inner + 2 * self.groups * self.state

    def _kda_tensors(self, h: int) -> list[tuple[str, str, tuple[int, ...]]]:
        """``KimiLinearDeltaAttention``: q, k, v projections, ``conv1d`` over them (no bias), the forget gate
        (``f_a_proj``, ``f_b_proj``, ``dt_bias`` per channel, ``A_log`` per head), ``b_proj``, the output gate
        (``g_a_proj``, ``g_b_proj``), a gated RMSNorm over one head, ``o_proj``."""
        d, r, a = self.inner, self.state, self.heads
        t = [("attention", f"{p}_proj.weight", (d, h)) for p in "qkv"]
        if self.kind == "kda_full":
            return t + [("attention", "conv1d.weight", (3 * d, 1, self.conv)),
                        ("attention", "f_proj.weight", (d, h)), ("attention", "dt_bias", (d,)),
                        ("attention", "A_log", (a,)), ("attention", "b_proj.weight", (a, h)),
                        ("attention", "g_proj.weight", (d, h)), ("norms", "o_norm.weight", (r,)),
                        ("attention", "o_proj.weight", (h, d))]
        return t + [("attention", "conv1d.weight", (3 * d, 1, self.conv)),
                    ("attention", "f_a_proj.weight", (r, h)), ("attention", "f_b_proj.weight", (d, r)),
                    ("attention", "dt_bias", (d,)), ("attention", "A_log", (a,)),
                    ("attention", "b_proj.weight", (a, h)), ("attention", "g_a_proj.weight", (r, h)),
                    ("attention", "g_b_proj.weight", (d, r)), ("norms", "o_norm.weight", (r,)),
                    ("attention", "o_proj.weight", (h, d))]

    def _lightning_tensors(self, h: int) -> list[tuple[str, str, tuple[int, ...]]]:
        """``MiniMaxLightningAttention``: ``qkv_proj``, ``output_gate``, ``out_proj``, an RMSNorm over all
        heads, and the buffers ``slope_rate``, ``query_decay``, ``key_decay``, ``diagonal_decay``."""
        d, a, b = self.inner, self.heads, self.block
        return [("attention", "qkv_proj.weight", (3 * d, h)), ("attention", "output_gate.weight", (d, h)),
                ("attention", "out_proj.weight", (h, d)), ("norms", "norm.weight", (d,)),
                ("attention", "slope_rate", (a,)), ("attention", "query_decay", (a, b)),
                ("attention", "key_decay", (a, b)), ("attention", "diagonal_decay", (a, b, b))]

    def _gdn_tensors(self, h: int) -> list[tuple[str, str, tuple[int, ...]]]:
        """Qwen3-Next's ``Qwen3NextGatedDeltaNet``: ``in_proj_qkvz``, ``in_proj_ba``, ``conv1d`` (no bias),
        ``dt_bias``, ``A_log``, a gated RMSNorm over one value head, ``out_proj`` (no biases)."""
        d, c, v = self.inner, self.conv_channels, self.heads
        return [("attention", "in_proj_qkvz.weight", (c + d, h)),
                ("attention", "in_proj_ba.weight", (2 * v, h)),
                ("attention", "conv1d.weight", (c, 1, self.conv)), ("attention", "dt_bias", (v,)),
                ("attention", "A_log", (v,)), ("norms", "gated_norm.weight", (d // v,)),
                ("attention", "out_proj.weight", (h, d))]

    def tensors(self, hidden: int) -> list[tuple[str, str, tuple[int, ...]]]:
        """The mixer's parameter tensors as ``(component, name, shape)`` (the block's norm not included). The
        mixer does attention's job (mixing tokens), so its matrices count under
        :meth:`Model.param_breakdown`'s ``"attention"`` and its norms under ``"norms"``."""
        h, d, n, c = hidden, self.inner, self.state, self.conv_channels
        if self.kind == "gdn":
            return self._gdn_tensors(h)
        if self.kind == "lightning":
            return self._lightning_tensors(h)
        if self.kind in ("kda", "kda_full"):
            return self._kda_tensors(h)
        if self.kind == "mlstm":
            a = self.heads
            return [("attention", f"{p}.weight", (n, h)) for p in "qk"] + [
                ("attention", f"{p}.weight", (d, h)) for p in ("v", "ogate_preact")] + [
                ("attention", f"{g}gate_preact.{w}", (a, h) if w == "weight" else (a,)) for g in "if"
                for w in ("weight", "bias")] + [("norms", "multihead_norm.weight", (d,)),
                                                ("attention", "out_proj.weight", (h, d))]
        if self.kind == "rglru":
            b = d // self.heads
            return [("attention", f"linear_{w}.{p}", (d, h) if p == "weight" else (d,)) for w in "yx"
                    for p in ("weight", "bias")] + [
                ("attention", "linear_out.weight", (h, d)), ("attention", "linear_out.bias", (h,)),
                ("attention", "conv_1d.weight", (d, 1, self.conv)), ("attention", "conv_1d.bias", (d,)),
                ("attention", "rg_lru.recurrent_param", (d,))] + [
                ("attention", f"rg_lru.{g}_gate_{p}", (self.heads, b) + ((b,) if p == "weight" else ()))
                for g in ("input", "recurrent") for p in ("weight", "bias")]
        if self.kind == "rwkv":
            mix = [("attention", f"{p}.time_mix_{w}", (1, 1, h)) for p, ws in
                   (("attention", ("key", "value", "receptance")), ("feed_forward", ("key", "receptance")))
                   for w in ws]
            return [("attention", "time_decay", (d,)), ("attention", "time_first", (d,))] + mix + [
                ("attention", f"attention.{w}.weight", (d, h)) for w in ("key", "value", "receptance")] + [
                ("attention", "attention.output.weight", (h, d)),
                ("attention", "feed_forward.receptance.weight", (h, h))]
        if self.kind == "shortconv":
            b = [("attention", "in_proj.bias", (3 * d,)), ("attention", "conv.bias", (d,)),
                 ("attention", "out_proj.bias", (h,))] if self.conv_bias else []
            w = [("attention", "in_proj.weight", (3 * d, h)), ("attention", "conv.weight", (d, 1, self.conv))]
            return w + [("attention", "out_proj.weight", (h, d))] + b
        t = []
        if self.kind == "mamba":
            t.append(("attention", "in_proj.weight", (2 * d, h)))
            t += [("attention", "in_proj.bias", (2 * d,))] if self.proj_bias else []
        else:
            t.append(("attention", "in_proj.weight", (d + c + self.heads, h)))
            t += [("attention", "in_proj.bias", (d + c + self.heads,))] if self.proj_bias else []
        t.append(("attention", "conv1d.weight", (c, 1, self.conv)))
        t += [("attention", "conv1d.bias", (c,))] if self.conv_bias else []
        if self.kind == "mamba":
            r = self.dt_rank
            t += [("attention", "x_proj.weight", (r + 2 * n, d)), ("attention", "dt_proj.weight", (d, r)),
                  ("attention", "dt_proj.bias", (d,)), ("attention", "A_log", (d, n)),
                  ("attention", "D", (d,))]
            if self.bc_dt_norms:
                t += [("norms", "dt_norm.weight", (r,)), ("norms", "b_norm.weight", (n,)),
                      ("norms", "c_norm.weight", (n,))]
        else:
            t += [("attention", "dt_bias", (self.heads,)), ("attention", "A_log", (self.heads,)),
                  ("attention", "D", (self.heads,))]
            t += [("norms", "gated_norm.weight", (d,))] if self.gated_norm else []
        t.append(("attention", "out_proj.weight", (h, d)))
        out_bias = self.proj_bias if self.out_bias is None else self.out_bias
        t += [("attention", "out_proj.bias", (h,))] if out_bias else []
        return t

    @property
    def state_numbers(self) -> int:
        """Numbers one sequence keeps in ONE mixer layer: the convolution's last ``conv`` inputs
        (``conv_channels x conv``) plus the SSM state (``inner x state``: Mamba's per channel, Mamba-2's per
        head and head channel), as transformers' cache holds them."""
        if self.kind == "rglru":                  # the convolution keeps conv - 1 inputs, the LRU one number
            return self.inner * (self.conv - 1) + self.inner
        if self.kind == "mlstm":                  # per head: memory, normaliser, running maximum
            return self.state * self.inner // self.heads + self.state + self.heads
        return self.conv_channels * self.conv + self.inner * self.state


@dataclass(frozen=True)
class Indexer:
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2-Exp technical report, DeepSeek-AI 2025,
    Sec. 1, Eq. 1; ``transformers`` 5.24's ``DeepseekV32Indexer``): beside each attention layer's MLA, a small
    scorer picks the ``index_topk`` tokens attention reads. Its tensors: ``wq_b`` from MLA's query latent
    (``q_rank``) to ``heads x head_dim``, ``wk`` from the block input to one ``head_dim`` key, a LayerNorm on
    that key (gain and bias), ``weights_proj`` to one weight per head. Each token adds its ``head_dim`` key to
    the cache of every layer with an indexer (``update_indexer``). ``layers``: how many attention layers run
    one (``None``: all; GLM-5's ``indexer_types`` ``"shared"`` layers reuse the previous layer's choice and
    have none)."""

    heads: int
    head_dim: int
    q_rank: int
    layers: int | None = None

    def __post_init__(self):
        for f in ("heads", "head_dim", "q_rank"):
            object.__setattr__(self, f, check_int(f, getattr(self, f)))
        if self.layers is not None:
            object.__setattr__(self, "layers", check_int("layers", self.layers, minimum=0))

    def tensors(self, hidden: int) -> list[tuple[str, str, tuple[int, ...]]]:
        """The indexer's tensors in one layer, under ``"attention"`` (its LayerNorm under ``"norms"``)."""
        a, d = self.heads, self.head_dim
        return [("attention", "indexer.wq_b.weight", (a * d, self.q_rank)),
                ("attention", "indexer.wk.weight", (d, hidden)),
                ("norms", "indexer.k_norm.weight", (d,)), ("norms", "indexer.k_norm.bias", (d,)),
                ("attention", "indexer.weights_proj.weight", (a, hidden))]


@dataclass(frozen=True)
class AttentionLayout:
    """Attention layers that differ from the block's (Gemma 4's ``per_layer_config``, Gemma 3n's and Gemma 4's
    KV sharing; ``transformers`` 5.24's ``Gemma4TextAttention``, ``Gemma3nTextAttention``).

    ``full_head_dim``/``full_kv_heads``: the head width and KV heads of the full-attention layers (those not
    in :attr:`~llmsizing.model.Model.window_layers`; ``None``: the block's), queries and output included;
    ``full_k_eq_v``: those layers have no ``v_proj``, their values are the keys (``attention_k_eq_v``: the
    cache still holds both); ``shared_window``/``shared_full``: how many windowed / full layers reuse the keys
    and values of an earlier layer of their kind (``num_kv_shared_layers``, the last layers): no ``k_proj``,
    ``v_proj`` or ``k_norm`` and nothing cached; ``block_uses``/``block_kv``: attention outside the layer
    list, a shared block run at ``block_uses`` depths, each caching ``block_kv`` numbers per token (Zamba's
    and Zamba2's shared transformer block; its weights are extra tensors held once). ``v_head_dim``: values
    and the output projection's input are this wide per head in every layer (``None``: ``head_dim``;
    MiMo-V2-Flash's 128 beside q/k of 192); ``full_sinks=False``: the full layers have no attention sinks
    (MiMo-V2-Flash's windowed layers have them)."""

    full_head_dim: int | None = None
    full_kv_heads: int | None = None
    full_k_eq_v: bool = False
    shared_window: int = 0
    shared_full: int = 0
    block_uses: int = 0
    block_kv: int = 0
    v_head_dim: int | None = None
    full_sinks: bool = True

    def __post_init__(self):
        object.__setattr__(self, "full_sinks", check_bool("full_sinks", self.full_sinks))
        for f in ("full_head_dim", "full_kv_heads", "v_head_dim"):
            if getattr(self, f) is not None:
                object.__setattr__(self, f, check_int(f, getattr(self, f)))
        for f in ("shared_window", "shared_full", "block_uses", "block_kv"):
            object.__setattr__(self, f, check_int(f, getattr(self, f), minimum=0))
        object.__setattr__(self, "full_k_eq_v", check_bool("full_k_eq_v", self.full_k_eq_v))


#: The tensors a KV-sharing layer does not hold (its keys and values come from an earlier layer).
_KV_TENSORS = ("k_proj.weight", "k_proj.bias", "v_proj.weight", "v_proj.bias", "k_norm.weight")


def attention_layout_tensors(m) -> list[tuple[str, str, tuple[int, ...], int]]:
    """The attention tensors (``(component, name, shape, layers)``, names under ``layers.``) of a
    :class:`~llmsizing.model.Model` with an :class:`AttentionLayout`: windowed and full layers, each with and
    without their own keys and values."""
    from dataclasses import replace
    lay, n_w = m.attention_layout, m.n_window_layers
    full = replace(m, head_dim=lay.full_head_dim or m.head_dim, kv_heads=lay.full_kv_heads or m.kv_heads,
                   attention_layout=None)
    out = []
    for src, n, shared, tag in ((m, n_w, lay.shared_window, ""),
                                (full, m.n_attention_layers - n_w, lay.shared_full, "full_attn.")):
        vd = (lay.v_head_dim or src.head_dim) * src.heads        # values: v_proj's rows, o_proj's input
        for c, name, s in src._attention_tensors():
            if tag and (lay.full_k_eq_v and name.startswith("v_proj.")
                        or not lay.full_sinks and name == "sinks"):
                continue
            if lay.v_head_dim and name in ("v_proj.weight", "v_proj.bias", "o_proj.weight"):
                s = (s[0], vd) if name == "o_proj.weight" else (vd // src.heads * src.kv_heads,) + s[1:]
            k = n - shared if name in _KV_TENSORS else n
            if k:
                out.append((c, f"layers.{tag}{name}", s, k))
    return out


def kv_groups(m) -> list[tuple[int, int, bool]]:
    """``(layers, numbers per token per layer, windowed)`` of a model's cached attention layers (not MLA):
    the windowed and the full ones, without the KV-sharing layers, each at its own width (``2 x kv_heads x
    head_dim``)."""
    lay, n_w = m.attention_layout, m.n_window_layers
    n_f = m.n_attention_layers - n_w
    if lay is None:
        return [(n_w, 2 * m.kv_heads * m.head_dim, True), (n_f, 2 * m.kv_heads * m.head_dim, False)]
    hd_f, kv_f = lay.full_head_dim or m.head_dim, lay.full_kv_heads or m.kv_heads
    return [(n_w - lay.shared_window, m.kv_heads * (m.head_dim + (lay.v_head_dim or m.head_dim)), True),
            (n_f - lay.shared_full, kv_f * (hd_f + (lay.v_head_dim or hd_f)), False),
            (lay.block_uses, lay.block_kv, False)]


def check_layer_kinds(m) -> None:
    """Checks and normalises a :class:`~llmsizing.model.Model`'s layer-kind fields (called by its
    ``__post_init__``): ``extra_layer_tensors`` (small tensors every layer holds beyond the Llama block:
    BitNet's sub-norms, differential attention's lambdas, xIELU's scalars; in the MoE layers only, AXK1's
    post-MoE norm; in one layer only, GPT-NeoX-Japanese's last output bias; the Hugging Face reader derives
    them from a type's rule), ``mixer``/``mixer_layers``/``mixer_mlp``/``mixer_parallel``, ``indexer`` and
    ``mlp_free_layers``, the layers whose block ends after attention or the mixer (Nemotron-H, whose blocks
    hold one sub-layer each: a Mamba or attention block not followed by an MLP or MoE block); those layers
    have one norm, no MLP and no experts, which needs ``norms_per_layer`` 2 and explicit ``moe_layers``."""
    object.__setattr__(m, "mixer_mlp", check_bool("mixer_mlp", m.mixer_mlp))
    object.__setattr__(m, "mixer_parallel", check_bool("mixer_parallel", m.mixer_parallel))
    if m.indexer is not None and not isinstance(m.indexer, Indexer):
        raise TypeError(f"indexer must be an Indexer, got {type(m.indexer).__name__}")
    if not isinstance(m.mlp_free_layers, (tuple, list)):
        raise TypeError(f"mlp_free_layers must be a tuple of layer indices, got {m.mlp_free_layers!r}")
    free = tuple(sorted({check_int("mlp_free_layers[i]", i, minimum=0, maximum=m.layers - 1)
                         for i in m.mlp_free_layers}))
    object.__setattr__(m, "mlp_free_layers", free)
    extra = tuple(m.extra_layer_tensors)
    for e in extra:
        count = len(e) == 4 and isinstance(e[3], int) and not isinstance(e[3], bool)
        if (not isinstance(e, tuple) or len(e) not in (3, 4) or not isinstance(e[1], str)
                or not isinstance(e[2], tuple) or e[0] not in EXTRA_COMPONENTS
                or not (e[3:] in ((), ("moe",), ("one",)) or count)):
            raise TypeError("extra_layer_tensors must hold (component, name, shape[, 'moe', 'one' or a layer "
                            f"count]) tuples, component one of {', '.join(EXTRA_COMPONENTS)}, 'moe' for the "
                            "MoE layers only, 'one' for one tensor in the model, an int for that many layers,"
                            f" got {e!r}")
        if count:
            check_int("extra_layer_tensors count", e[3], minimum=0, maximum=m.layers)
        for d in e[2]:
            check_int("extra_layer_tensors shape", d)
    object.__setattr__(m, "extra_layer_tensors", extra)
    lay = m.attention_layout
    if lay is not None:
        if not isinstance(lay, AttentionLayout):
            raise TypeError(f"attention_layout must be an AttentionLayout, got {type(lay).__name__}")
        n_w = m.n_window_layers
        if m.kv_lora_rank is not None or m.fused_qkv or lay.shared_window > n_w \
                or lay.shared_full > m.n_attention_layers - n_w:
            raise ValueError("attention_layout needs q/k/v projections (not MLA or fused) and at most "
                             "window_layers windowed and the other attention layers full KV-sharing layers")
    moe_clash = m.experts and (m.moe_layers is None or set(free) & set(m.moe_layers))
    if free and (m.norms_per_layer != 2 or moe_clash or len(free) == m.layers):
        raise ValueError("mlp_free_layers needs norms_per_layer=2, some layers with an MLP and explicit "
                         "moe_layers that exclude them")
    if m.mixer is None:
        if m.mixer_layers is not None or not m.mixer_mlp or m.mixer_parallel:
            raise ValueError("mixer_layers and mixer_mlp describe state-space layers: give mixer too")
        return
    if not isinstance(m.mixer, StateMixer):
        raise TypeError(f"mixer must be a StateMixer, got {type(m.mixer).__name__}")
    if m.mixer_layers is not None:
        idx = tuple(sorted({check_int("mixer_layers[i]", i, minimum=0, maximum=m.layers - 1)
                            for i in m.mixer_layers}))
        object.__setattr__(m, "mixer_layers", None if len(idx) == m.layers else idx)
    if not m.mixer_mlp and (m.mixer_layers is not None or m.experts or m.mixer_parallel):
        raise ValueError("mixer_mlp=False (mixer layers without an MLP) needs every layer to be a mixer "
                         "layer (mixer_layers=None) and no experts")


__all__ = ["MIXER_KINDS", "EXTRA_COMPONENTS", "AttentionLayout", "attention_layout_tensors", "kv_groups",
           "StateMixer", "Indexer", "check_layer_kinds"]
