"""Decoder-only transformer architectures and their exact parameter counts (chapter 1, "Counting parameters").

One list of tensors, :meth:`Model.tensors`, is the single source of truth: the parameter count, the
per-component breakdown and the factored optimizer state (Adafactor, chapter 2) are all derived from it, so
they cannot disagree.

Sources for the layer layouts:

* GPT-2: Radford et al. 2019; Hugging Face ``transformers`` ``modeling_gpt2.py`` (biases everywhere,
  LayerNorm with bias, learned positions, tied embeddings).
* GPT-3: Brown et al. 2020, Table 2.1 (same layout as GPT-2 at 96 x 12288).
* Llama: Touvron et al. 2023a/b, Llama 3 team (Dubey et al.) 2024; ``modeling_llama.py`` (RMSNorm,
  SwiGLU MLP with three matrices, no biases, rotary positions, grouped-query attention in the larger models).
* Mistral 7B: Jiang et al. 2023 (Llama layout with GQA). Qwen2: Yang et al. 2024 (bias on Q, K and V only).
* Mixtures of experts and multi-head latent attention (chapter 1, "Mixtures of experts: total and active
  parameters"; chapter 3 for MLA's KV cache): Mixtral (Jiang et al. 2024, arXiv:2401.04088), DeepSeek-V2
  (arXiv:2405.04434) and DeepSeek-V3 (arXiv:2412.19437), Qwen2-MoE/Qwen3 (Yang et al. 2025, arXiv:2505.09388),
  gpt-oss (OpenAI 2025 model card), Llama 4; the other Hugging Face families of :meth:`Model.from_hf_config`
  (Gemma 1-3, Phi-3, OLMo 2, Nemotron, GPT-NeoX, Falcon, OPT, BLOOM). Every layout is the module tree of
  ``transformers`` 5.23's ``modeling_<type>.py``, checked tensor for tensor on the meta device
  (``data/hf_meta_param_counts.csv``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from functools import cached_property
from os import PathLike
from pathlib import Path

from ._validate import MAX_MEANINGFUL, check_bool, check_choice, check_int

NORMS = ("layernorm", "rmsnorm")

#: Components of :meth:`Model.param_breakdown`, in the order charts draw them. A mixture of experts' routed and
#: shared experts and its router count under ``"mlp"`` (:meth:`Model.moe_breakdown` splits them).
COMPONENTS = ("embedding", "position", "attention", "mlp", "norms", "lm_head")


#: MLP activation functions by their Hugging Face names (``hidden_act`` / ``activation_function``); with
#: ``gated_mlp`` the activation is applied to the gate (``silu`` gives SwiGLU, ``gelu_pytorch_tanh`` GeGLU).
#: ``relu2`` is the squared ReLU of Nemotron (So et al. 2021, "Primer"), applied to a two-matrix MLP.
ACTIVATIONS = ("silu", "gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "relu2")
_HF_ACTIVATION_ALIASES = {"swish": "silu", "gelu_fast": "gelu_new", "gelu_python": "gelu", "bloom_gelu": "gelu_new"}

#: Config keys that mark a mixture-of-experts model (Mixtral, Qwen-MoE, OLMoE, DeepSeek, ...). ``from_hf_config``
#: reads them for the MoE families it knows (:data:`HF_FAMILIES`) and refuses them under any other
#: ``model_type``: a dense count of a mixture of experts is badly wrong (85% low for Mixtral 8x7B).
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
            "n_shared_experts", "num_shared_experts", "moe_num_experts")

#: ``qk_norm`` values: a norm over each head's query and key vectors (``head_dim`` gains each: Qwen3, Gemma 3,
#: Qwen3-MoE), or over the whole query and key projections (``heads x head_dim`` and ``kv_heads x head_dim``
#: gains: OLMo 2).
QK_NORMS = ("head", "proj")

#: The names of a block's norms, in order, for ``norms_per_layer`` = 1 .. 4: Falcon-7B's parallel block has one
#: (``input_layernorm``), most models two, Gemma 2 and 3 four (a norm before AND after attention and the MLP).
_NORM_NAMES = ("attn_norm", "mlp_norm", "post_attn_norm", "post_mlp_norm")

#: What the functions that do not model mixtures of experts yet say when they are given one.
MOE_NOT_MODELLED = "expert parallelism and MoE activations are not modelled yet"


class MoENotModelledError(ValueError):
    """Raised by :func:`require_dense` (a ``ValueError``): a function that does not model mixtures of experts
    was given one."""


def require_dense(model: "Model", what: str) -> "Model":
    """Return ``model`` if it is dense; refuse a mixture of experts (:attr:`Model.is_moe`) naming ``what`` (the
    function that cannot handle it) and what is missing (:data:`MOE_NOT_MODELLED`).

    This is the library's one guard for functions that would silently compute a dense answer for an MoE model
    (training memory, activations, the planner's search, pipeline stages, serving time): they call it (directly
    or through :func:`llmsizing.catalog.resolve_model`), so the day expert parallelism is modelled there is one
    place to lift it. What DOES handle an MoE model: :attr:`Model.n_params`, :attr:`Model.active_params`, the
    weights and KV cache of :mod:`llmsizing.inference`, and the FLOPs of :mod:`llmsizing.flops` (chapter 1,
    "Mixtures of experts")."""
    if getattr(model, "is_moe", False):
        raise MoENotModelledError(
            f"{what}: {model.name!r} is a mixture of experts ({model.experts} routed experts, "
            f"{model.experts_per_token} per token) and {MOE_NOT_MODELLED}. Its parameters (n_params, "
            "active_params), weights, KV cache and FLOPs are modelled; its training memory, activations, "
            "parallel layouts and serving time are not")
    return model


def _opt_int(name: str, value, minimum: int = 1):
    return None if value is None else check_int(name, value, minimum=minimum)


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer, described by the numbers in its config file.

    ``head_dim`` defaults to ``hidden // heads`` and ``kv_heads`` to ``heads`` (no GQA). ``ffn_hidden`` is the
    width of the MLP's inner layer; with ``gated_mlp`` (SwiGLU) the MLP has three matrices (gate, up, down),
    without it two (up, down). ``bias`` puts a bias on every linear layer (GPT-2 style); ``qkv_bias`` only on
    the query/key/value projections (Qwen2 style). LayerNorm always has a bias (2 vectors), RMSNorm only a gain.
    ``activation`` is the MLP's activation function by its Hugging Face name (default: ``"silu"`` with a gated
    MLP, ``"gelu_new"`` without); it changes no parameter count, only what the Hugging Face stack saves for
    backward. ``sliding_window`` (``None``: full attention) limits how far back each token attends (Mistral
    7B v0.1: 4096); it caps the KV cache (:func:`~llmsizing.inference.inference_memory`) and the attention FLOPs
    (:func:`~llmsizing.flops.attention_keys_per_token`). ``fused_qkv`` says the query, key and value projections are
    one matrix of ``(heads + 2 kv_heads) x head_dim`` rows (GPT-2's ``c_attn``, BLOOM's and Falcon's
    ``query_key_value``, MPT's ``Wqkv``): the same parameters, but LoRA adapts it as one matrix
    (:func:`~llmsizing.finetune.lora_params`), as PEFT does.

    ``max_seq`` is the context the model was trained with. The library accepts longer sequences: none of its
    memory formulas depends on the position encoding except learned positions (GPT-2 has exactly ``max_seq``
    position rows and cannot run longer). For rotary models, a longer context assumes the positions are
    extended (RoPE scaling or position interpolation, as Llama 3.1 does to 128K); the memory is the same, the
    quality is the trainer's concern.

    **The odd parts of other families** (all default to the Llama/GPT-2 layout above, so a dense model built
    without them is exactly what it was):

    * ``mlp_bias`` (``None``: the same as ``bias``): biases on the MLP's matrices independently of the attention's
      (Qwen3's and Llama's ``attention_bias`` without ``mlp_bias``; Nemotron's ``mlp_bias``);
    * ``qk_norm``: ``"head"`` (a norm of ``head_dim`` gains on queries and on keys: Qwen3, Gemma 3) or ``"proj"``
      (over the whole projections: OLMo 2), :data:`QK_NORMS`;
    * ``attn_sinks``: one learned logit per head that every softmax also normalises over (gpt-oss's ``sinks``);
    * ``norms_per_layer`` (1 to 4; default 2): Falcon-7B's parallel block has one norm, Gemma 2 and 3 four;
    * ``embed_norm``: a norm right after the embedding (BLOOM's ``word_embeddings_layernorm``);
    * ``pos_offset``: learned position rows beyond ``max_seq`` (OPT's table has ``max_seq + 2``);
    * ``window_layers``: how many of the layers use ``sliding_window`` (``None``: all of them); the rest attend
      to everything (Gemma 2 and gpt-oss alternate, Gemma 3 has five windowed layers for one global);
    * ``parallel_block``: attention and MLP read the same input and add into one residual (GPT-J, GPT-NeoX,
      Falcon). No parameter changes; recorded for what it saves.

    Position encodings without parameters (rotary, partial rotary, ALiBi), logit soft-capping and attention
    scaling change no parameter and no cache byte, and have no field.

    **Mixtures of experts** (``experts > 0``; Shazeer et al. 2017, Fedus et al. 2021; Mixtral, Jiang et al. 2024;
    DeepSeekMoE, Dai et al. 2024): an MoE layer replaces the MLP by ``experts`` routed expert MLPs of width
    ``expert_ffn_hidden`` (default ``ffn_hidden``; Hugging Face's ``moe_intermediate_size``), of which a linear
    router (``hidden x experts``, plus a bias with ``router_bias``) picks ``experts_per_token`` for each token;
    ``shared_experts`` MLPs of width ``shared_expert_ffn_hidden`` (default ``expert_ffn_hidden``) see every token
    (DeepSeek's ``n_shared_experts``; Qwen2-MoE's and Llama 4's one shared expert), Qwen2-MoE's with a
    ``1 x hidden`` sigmoid gate (``shared_expert_gate``). ``moe_layers`` lists the indices of the MoE layers
    (``None``: every layer); the others are dense MLPs of width ``ffn_hidden`` (DeepSeek-V3's first three
    layers, Llama 4 Maverick's every other layer). Routed experts have the same matrices as the dense MLP
    (``gated_mlp``, ``mlp_bias``). Use :func:`moe_layer_indices` to build ``moe_layers`` from a config's
    ``first_k_dense_replace`` / ``decoder_sparse_step`` / ``interleave_moe_layer_step``.

    **Multi-head latent attention** (``kv_lora_rank`` set; DeepSeek-V2, DeepSeek-AI 2024, arXiv:2405.04434,
    Sec. 2.1): queries go through a rank-``q_lora_rank`` bottleneck (``q_a_proj``, a norm, ``q_b_proj``; none
    with ``q_lora_rank=None``, DeepSeek-V2-Lite), keys and values are one shared latent of ``kv_lora_rank``
    numbers plus one rotary key of ``qk_rope_head_dim`` shared by all heads (``kv_a_proj_with_mqa``), expanded
    per head by ``kv_b_proj`` to ``qk_nope_head_dim`` key and ``v_head_dim`` value numbers. ``head_dim`` is then
    the query/key width ``qk_nope_head_dim + qk_rope_head_dim`` and ``kv_heads`` must be ``heads``; the KV cache
    is the latent plus the rotary key (:func:`~llmsizing.inference.kv_cache_bytes_per_token`).
    """

    name: str
    layers: int
    hidden: int
    heads: int
    ffn_hidden: int
    vocab: int
    kv_heads: int | None = None
    head_dim: int | None = None
    gated_mlp: bool = True
    tied_embeddings: bool = False
    norm: str = "rmsnorm"
    bias: bool = False
    qkv_bias: bool = False
    learned_pos: bool = False
    max_seq: int = 4096
    activation: str | None = None
    sliding_window: int | None = None
    fused_qkv: bool = False
    # ---- odd parts of other dense families (defaults: the layout above)
    mlp_bias: bool | None = None
    qk_norm: str | None = None
    attn_sinks: bool = False
    norms_per_layer: int = 2
    embed_norm: bool = False
    pos_offset: int = 0
    window_layers: int | None = None
    parallel_block: bool = False
    # ---- mixture of experts (experts=0: dense)
    experts: int = 0
    experts_per_token: int = 0
    expert_ffn_hidden: int | None = None
    shared_experts: int = 0
    shared_expert_ffn_hidden: int | None = None
    shared_expert_gate: bool = False
    router_bias: bool = False
    moe_layers: tuple[int, ...] | None = None
    # ---- multi-head latent attention (kv_lora_rank=None: none)
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty string, got {self.name!r}")
        # every field keeps what its check returns (Python int/bool), so NumPy scalars cannot overflow later
        for f in ("layers", "hidden", "heads", "ffn_hidden", "vocab", "max_seq"):
            object.__setattr__(self, f, check_int(f, getattr(self, f)))
        mla = self.kv_lora_rank is not None
        kv = self.heads if self.kv_heads is None else check_int("kv_heads", self.kv_heads)
        if kv > self.heads or self.heads % kv:
            raise ValueError(f"kv_heads must divide heads ({self.heads}) and be <= heads, got {kv}")
        if mla:
            self._check_mla(kv)
            hd = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.head_dim is not None and check_int("head_dim", self.head_dim) != hd:
                raise ValueError(f"head_dim must be qk_nope_head_dim + qk_rope_head_dim ({hd}) with "
                                 f"multi-head latent attention (kv_lora_rank), got {self.head_dim}")
        else:
            for f in ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
                if getattr(self, f) is not None:
                    raise ValueError(f"{f} describes multi-head latent attention: give kv_lora_rank too, "
                                     f"or leave {f}=None")
            hd = self.hidden // self.heads if self.head_dim is None else check_int("head_dim", self.head_dim)
            if self.head_dim is None and self.hidden % self.heads:
                raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads}) "
                                 "unless head_dim is given")
        object.__setattr__(self, "kv_heads", kv)
        object.__setattr__(self, "head_dim", hd)
        for f in ("gated_mlp", "tied_embeddings", "bias", "qkv_bias", "learned_pos", "fused_qkv", "attn_sinks",
                  "embed_norm", "parallel_block", "shared_expert_gate", "router_bias"):
            object.__setattr__(self, f, check_bool(f, getattr(self, f)))
        if self.mlp_bias is not None:
            object.__setattr__(self, "mlp_bias", check_bool("mlp_bias", self.mlp_bias))
        check_choice("norm", self.norm, NORMS)
        if self.qk_norm is not None:
            check_choice("qk_norm", self.qk_norm, QK_NORMS)
        object.__setattr__(self, "norms_per_layer", check_int("norms_per_layer", self.norms_per_layer, maximum=4))
        object.__setattr__(self, "pos_offset", check_int("pos_offset", self.pos_offset, minimum=0))
        act = self.activation
        if act is None:              # the usual pairing: SwiGLU for gated MLPs, GPT-2's gelu_new otherwise
            act = "silu" if self.gated_mlp else "gelu_new"
        object.__setattr__(self, "activation", check_choice("activation", act, ACTIVATIONS))
        if self.sliding_window is not None:
            object.__setattr__(self, "sliding_window", check_int("sliding_window", self.sliding_window))
        if self.window_layers is not None:
            if self.sliding_window is None:
                raise ValueError("window_layers counts the layers that use sliding_window: give sliding_window "
                                 "too, or leave window_layers=None")
            object.__setattr__(self, "window_layers", check_int("window_layers", self.window_layers, minimum=0,
                                                                maximum=self.layers))
        self._check_moe()

    def _check_mla(self, kv: int) -> None:
        for f in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            if getattr(self, f) is None:
                raise ValueError(f"{f} is required with multi-head latent attention (kv_lora_rank is set)")
            object.__setattr__(self, f, check_int(f, getattr(self, f)))
        object.__setattr__(self, "q_lora_rank", _opt_int("q_lora_rank", self.q_lora_rank))
        if kv != self.heads:
            raise ValueError(f"kv_heads must equal heads ({self.heads}) with multi-head latent attention "
                             f"(every head gets its own key and value from the shared latent), got {kv}")
        if self.fused_qkv or self.qk_norm is not None or self.qkv_bias or self.bias:
            raise ValueError("multi-head latent attention (kv_lora_rank) has no fused_qkv, qk_norm, qkv_bias or "
                             "bias variant in this library")

    def _check_moe(self) -> None:
        e = check_int("experts", self.experts, minimum=0)
        object.__setattr__(self, "experts", e)
        for f in ("experts_per_token", "shared_experts"):
            object.__setattr__(self, f, check_int(f, getattr(self, f), minimum=0))
        if e == 0:
            for f in ("experts_per_token", "shared_experts", "expert_ffn_hidden", "shared_expert_ffn_hidden",
                      "moe_layers"):
                if getattr(self, f) not in (None, 0):
                    raise ValueError(f"{f} describes a mixture of experts: give experts (routed experts per MoE "
                                     f"layer) >= 1 too, or leave {f} unset")
            for f in ("shared_expert_gate", "router_bias"):
                if getattr(self, f):
                    raise ValueError(f"{f} describes a mixture of experts: give experts >= 1 too")
            return
        k = self.experts_per_token
        if not 1 <= k <= e:
            raise ValueError(f"experts_per_token must be an integer >= 1 and <= experts ({e}), got {k}")
        object.__setattr__(self, "expert_ffn_hidden", _opt_int("expert_ffn_hidden", self.expert_ffn_hidden))
        object.__setattr__(self, "shared_expert_ffn_hidden",
                           _opt_int("shared_expert_ffn_hidden", self.shared_expert_ffn_hidden))
        if self.shared_expert_gate and not self.shared_experts:
            raise ValueError("shared_expert_gate gates a shared expert: give shared_experts >= 1 too")
        if self.moe_layers is not None:
            if isinstance(self.moe_layers, (str, bytes)) or not hasattr(self.moe_layers, "__iter__"):
                raise TypeError(f"moe_layers must be a sequence of layer indices, got {self.moe_layers!r}")
            idx = tuple(sorted({check_int("moe_layers[i]", i, minimum=0, maximum=self.layers - 1)
                                for i in self.moe_layers}))
            if len(idx) != len(tuple(self.moe_layers)):
                raise ValueError(f"moe_layers lists a layer twice: {tuple(self.moe_layers)!r}")
            if not idx:
                raise ValueError("moe_layers is empty: a model with experts needs at least one MoE layer "
                                 "(or set experts=0 for a dense model)")
            object.__setattr__(self, "moe_layers", None if len(idx) == self.layers else idx)

    # ------------------------------------------------------------------ layer kinds
    @property
    def is_moe(self) -> bool:
        """Whether this is a mixture of experts (``experts > 0``)."""
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        """Whether attention is multi-head latent attention (``kv_lora_rank`` set; DeepSeek-V2/V3)."""
        return self.kv_lora_rank is not None

    @property
    def n_moe_layers(self) -> int:
        """How many layers have experts (0 for a dense model)."""
        if not self.experts:
            return 0
        return self.layers if self.moe_layers is None else len(self.moe_layers)

    @property
    def n_dense_layers(self) -> int:
        """How many layers have a dense MLP (every layer of a dense model)."""
        return self.layers - self.n_moe_layers

    @property
    def n_window_layers(self) -> int:
        """How many layers use :attr:`sliding_window` (0 without one)."""
        if self.sliding_window is None:
            return 0
        return self.layers if self.window_layers is None else self.window_layers

    # ------------------------------------------------------------------ tensors
    def _attention_tensors(self) -> list[tuple[str, str, tuple[int, ...]]]:
        h, a, g, d = self.hidden, self.heads, self.kv_heads, self.head_dim
        norm = [("weight", (h,))] + ([("bias", (h,))] if self.norm == "layernorm" else [])
        t: list[tuple[str, str, tuple[int, ...]]] = []
        t += [("norms", f"attn_norm.{n}", s) for n, s in norm]
        if self.is_mla:
            r, c, nope, rope, v = (self.q_lora_rank, self.kv_lora_rank, self.qk_nope_head_dim,
                                   self.qk_rope_head_dim, self.v_head_dim)
            if r is None:
                t.append(("attention", "q_proj.weight", (a * d, h)))
            else:
                t += [("attention", "q_a_proj.weight", (r, h)), ("norms", "q_a_layernorm.weight", (r,)),
                      ("attention", "q_b_proj.weight", (a * d, r))]
            t += [("attention", "kv_a_proj_with_mqa.weight", (c + rope, h)),
                  ("norms", "kv_a_layernorm.weight", (c,)),
                  ("attention", "kv_b_proj.weight", (a * (nope + v), c)),
                  ("attention", "o_proj.weight", (h, a * v))]
        else:
            for proj, out in (("q", a * d), ("k", g * d), ("v", g * d)):
                t.append(("attention", f"{proj}_proj.weight", (out, h)))
                if self.bias or self.qkv_bias:
                    t.append(("attention", f"{proj}_proj.bias", (out,)))
            t.append(("attention", "o_proj.weight", (h, a * d)))
            if self.bias:
                t.append(("attention", "o_proj.bias", (h,)))
        if self.qk_norm == "head":
            t += [("norms", "q_norm.weight", (d,)), ("norms", "k_norm.weight", (d,))]
        elif self.qk_norm == "proj":
            t += [("norms", "q_norm.weight", (a * d,)), ("norms", "k_norm.weight", (g * d,))]
        if self.attn_sinks:
            t.append(("attention", "sinks", (a,)))
        return t

    def _norm_tensors(self, which: str) -> list[tuple[str, str, tuple[int, ...]]]:
        h = self.hidden
        norm = [("weight", (h,))] + ([("bias", (h,))] if self.norm == "layernorm" else [])
        return [("norms", f"{which}.{n}", s) for n, s in norm]

    def _mlp_tensors(self, prefix: str, f: int, experts: int | None = None, bias: bool | None = None):
        """The matrices of one MLP of width ``f`` (``experts`` of them stacked as ``(E, out, in)``)."""
        h = self.hidden
        bias = self._mlp_bias if bias is None else bias
        stack = () if experts is None else (experts,)
        t = []
        for proj in (("gate_proj", "up_proj") if self.gated_mlp else ("up_proj",)):
            t.append(("mlp", f"{prefix}{proj}.weight", stack + (f, h)))
            if bias:
                t.append(("mlp", f"{prefix}{proj}.bias", stack + (f,)))
        t.append(("mlp", f"{prefix}down_proj.weight", stack + (h, f)))
        if bias:
            t.append(("mlp", f"{prefix}down_proj.bias", stack + (h,)))
        return t

    @property
    def _mlp_bias(self) -> bool:
        return self.bias if self.mlp_bias is None else self.mlp_bias

    def _moe_mlp_tensors(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """The MoE part of one MoE layer: router, routed experts (stacked, ``(experts, out, in)``, as Hugging
        Face's fused expert modules hold them), shared experts (as one MLP of ``shared_experts x`` the width,
        as DeepSeek's ``shared_experts`` module is) and the shared expert's gate."""
        h, e = self.hidden, self.experts
        t = [("mlp", "router.weight", (e, h))]
        if self.router_bias:
            t.append(("mlp", "router.bias", (e,)))
        t += self._mlp_tensors("experts.", self.expert_ffn_hidden or self.ffn_hidden, experts=e)
        if self.shared_experts:
            fs = self.shared_expert_ffn_hidden or self.expert_ffn_hidden or self.ffn_hidden
            t += self._mlp_tensors("shared_experts.", self.shared_experts * fs, bias=False)
            if self.shared_expert_gate:
                t.append(("mlp", "shared_expert_gate.weight", (1, h)))
        return t

    def layer_tensors(self, kind: str | None = None) -> list[tuple[str, str, tuple[int, ...]]]:
        """The tensors of ONE transformer block as ``(component, name, shape)``; matrices are (out, in).

        ``kind`` is ``"dense"`` (a block with a dense MLP) or ``"moe"`` (a block with experts; routed experts are
        one ``(experts, out, in)`` tensor per matrix); the default is the model's only kind of block, or
        ``"moe"`` for a mixture of experts with some dense layers."""
        if kind is None:
            kind = "moe" if self.n_moe_layers else "dense"
        check_choice("kind", kind, ("dense", "moe"))
        if kind == "moe" and not self.is_moe:
            raise ValueError(f"kind='moe': {self.name!r} is dense (experts=0)")
        t = self._attention_tensors()
        if self.norms_per_layer >= 3:
            t += self._norm_tensors(_NORM_NAMES[2])
        if self.norms_per_layer >= 2:
            t += self._norm_tensors(_NORM_NAMES[1])
        t += self._moe_mlp_tensors() if kind == "moe" else self._mlp_tensors("", self.ffn_hidden)
        if self.norms_per_layer >= 4:
            t += self._norm_tensors(_NORM_NAMES[3])
        return t

    def tensors(self) -> list[tuple[str, str, tuple[int, ...], int]]:
        """Every parameter tensor as ``(component, name, shape, copies)``; ``copies`` is the number of layers
        that hold it for block tensors (``layers``; the dense or the MoE layers for their MLPs) and 1 otherwise.
        Tied embeddings are counted once (the LM head reuses the embedding)."""
        h = self.hidden
        t = [("embedding", "embed_tokens.weight", (self.vocab, h), 1)]
        if self.embed_norm:
            t += [(c, n, s, 1) for c, n, s in self._norm_tensors("embed_norm")]
        if self.learned_pos:
            t.append(("position", "embed_positions.weight", (self.max_seq + self.pos_offset, h), 1))
        n_moe, n_dense = self.n_moe_layers, self.n_dense_layers
        if n_moe == 0:
            t += [(c, f"layers.{n}", s, self.layers) for c, n, s in self.layer_tensors("dense")]
        else:
            dense_mlp = {n for _, n, _ in self._mlp_tensors("", self.ffn_hidden)}
            moe_mlp = {n for _, n, _ in self._moe_mlp_tensors()}
            for c, n, s in self.layer_tensors("moe"):
                t.append((c, f"layers.{n}", s, n_moe if n in moe_mlp else self.layers))
            if n_dense:
                t += [(c, f"layers.{n}", s, n_dense) for c, n, s in self._mlp_tensors("", self.ffn_hidden)
                      if n in dense_mlp]
        t += [("norms", "final_norm.weight", (h,), 1)]
        if self.norm == "layernorm":
            t.append(("norms", "final_norm.bias", (h,), 1))
        if not self.tied_embeddings:
            t.append(("lm_head", "lm_head.weight", (self.vocab, h), 1))
        return t

    # ------------------------------------------------------------------ counts
    @cached_property
    def n_params(self) -> int:
        """Exact number of parameters (tied embeddings counted once; every expert of a mixture of experts).
        Computed once per (immutable) Model."""
        return sum(math.prod(s) * k for _, _, s, k in self.tensors())

    @property
    def params_per_layer(self) -> int | float:
        """Parameters of one transformer block. A mixture of experts whose layers differ (some dense, some
        with experts) gets the mean over its layers, a float; every other model an exact ``int``."""
        if self.n_moe_layers in (0, self.layers):
            return sum(math.prod(s) for _, _, s in self.layer_tensors())
        return self.block_params / self.layers

    @cached_property
    def block_params(self) -> int:
        """Parameters of all transformer blocks together (every layer; every expert)."""
        return sum(math.prod(s) * k for _, n, s, k in self.tensors() if n.startswith("layers."))

    @cached_property
    def active_params(self) -> int:
        """Parameters one token uses (chapter 1, "Mixtures of experts: total and active parameters").

        Convention: everything but the routed experts counts once, as in :attr:`n_params` (the input embedding,
        the LM head, attention, norms, dense MLPs, shared experts, the router); of the routed experts, the
        ``experts_per_token`` a token is sent to in each MoE layer. The input embedding is counted, as
        DeepSeek-V3's "37B activated" and Mixtral's "12.9B active" count it (the library's counts match them
        that way: chapter 1); :func:`~llmsizing.flops.forward_flops_per_token` leaves it out, as it leaves it out
        of a dense model's FLOPs (a lookup, not a matrix multiply). A dense model's active parameters are its
        parameters."""
        if not self.is_moe:
            return self.n_params
        return self.n_params - self.routed_expert_params + self.routed_expert_params * self.experts_per_token \
            // self.experts

    @cached_property
    def routed_expert_params(self) -> int:
        """Parameters of all routed experts of all MoE layers (0 for a dense model)."""
        return sum(math.prod(s) * k for _, n, s, k in self.tensors() if n.startswith("layers.experts."))

    @cached_property
    def active_block_params(self) -> int:
        """:attr:`block_params` one token uses: the routed experts only ``experts_per_token`` of ``experts``."""
        return self.block_params - self.routed_expert_params + self.routed_expert_params * \
            self.experts_per_token // max(self.experts, 1)

    def moe_breakdown(self) -> dict[str, int]:
        """The MoE part of :attr:`n_params`: ``routed_experts``, ``active_routed_experts`` (the top-k share),
        ``shared_experts``, ``router`` (weights, bias and Qwen2-MoE's shared-expert gate), over all MoE layers;
        zeros for a dense model."""
        out = {"routed_experts": self.routed_expert_params,
               "active_routed_experts": self.routed_expert_params * self.experts_per_token // max(self.experts, 1),
               "shared_experts": 0, "router": 0}
        for _, n, s, k in self.tensors():
            if n.startswith("layers.shared_experts."):
                out["shared_experts"] += math.prod(s) * k
            elif n.startswith(("layers.router.", "layers.shared_expert_gate.")):
                out["router"] += math.prod(s) * k
        return out

    def param_breakdown(self) -> dict[str, int]:
        """Parameters by component (keys: :data:`COMPONENTS`), summing to :attr:`n_params`."""
        return dict(self._breakdown)

    @cached_property
    def _breakdown(self) -> dict[str, int]:
        out = dict.fromkeys(COMPONENTS, 0)
        for comp, _, s, k in self.tensors():
            out[comp] += math.prod(s) * k
        return out

    def with_(self, **changes) -> "Model":
        """A copy with some fields changed (``head_dim``/``kv_heads`` recomputed unless given)."""
        if ("hidden" in changes or "heads" in changes) and not self.is_mla:
            changes.setdefault("head_dim", None)
        if "heads" in changes and not self.is_mla:
            changes.setdefault("kv_heads", None)
        if "heads" in changes and self.is_mla:
            changes.setdefault("kv_heads", changes["heads"])
        return replace(self, **changes)

    # ------------------------------------------------------------------ Hugging Face
    @classmethod
    def from_hf_config(cls, config: dict | str | PathLike, name: str | None = None) -> "Model":
        """Build a :class:`Model` from a Hugging Face ``config.json``: a dict, a path to the file, or a folder
        that holds one (as ``save_pretrained`` writes it).

        Supported ``model_type`` (:data:`HF_FAMILIES`): dense ``llama``, ``mistral``, ``qwen2``, ``qwen3``,
        ``gemma``, ``gemma2``, ``gemma3_text`` (and ``gemma3``: its ``text_config``), ``phi3``, ``olmo2``,
        ``nemotron``, ``gpt_neox``, ``falcon``, ``opt``, ``bloom``, ``gpt2``; mixtures of experts ``mixtral``,
        ``qwen2_moe``, ``qwen3_moe``, ``deepseek_v2``, ``deepseek_v3``, ``gpt_oss``, ``llama4_text`` (and
        ``llama4``: its ``text_config``; the vision tower is not counted). Each family's count equals the
        parameters of transformers 5.23's ``<Family>ForCausalLM`` built from the same config on the meta device
        (``data/hf_meta_param_counts.csv``, made by ``tools/measure_memory.py hf-counts``). Anything else raises
        ``ValueError`` naming the ``model_type``: a silently wrong architecture would give a silently wrong count.
        So does a config with mixture-of-experts fields (:data:`MOE_KEYS`) under a dense ``model_type``; the
        error names the keys it saw.

        Every key read is checked, and an error names the **config key** and the file
        (``config.json: num_attention_heads must be an integer >= 1, got 0``; ``num_key_value_heads`` must divide
        ``num_attention_heads``), never a :class:`Model` field. A key that is absent gets the default of the
        Hugging Face config class (:data:`HF_DEFAULTS`: Mistral's ``num_key_value_heads`` is 8, Qwen2's 32);
        ``null`` is read as absent, except where the class's ``__post_init__`` gives it its own meaning
        (``num_key_value_heads: null`` is ``num_attention_heads``, ``sliding_window: null`` no window, ``head_dim:
        null`` ``hidden_size // num_attention_heads``). A present but invalid value (0, a float,
        ``"false"``, an integer of thousands of digits) is refused, not replaced. Bias flags the Hugging Face
        class ignores are ignored too: Qwen2 always has biases on q, k and v only, Mistral none.

        What each family adds (transformers 5.23's ``modeling_<type>.py``):

        * ``qwen3``, ``qwen3_moe``, ``gemma3_text``: per-head q/k RMSNorms; ``olmo2``: q/k norms over the
          whole projections; ``gemma2``/``gemma3_text``: four norms per block; ``attention_bias`` (``qwen3``,
          ``gemma*``, ``olmo2``, ``nemotron``, ``llama4_text``, ``gpt_oss``) biases q, k, v and o only;
        * ``phi3``: fused ``qkv_proj`` and ``gate_up_proj`` (the same parameters as separate matrices);
          ``nemotron``: a two-matrix MLP with squared ReLU and LayerNorm with a bias (``LayerNorm1P``);
        * ``gpt_neox``: fused q/k/v, biases (``attention_bias`` on attention, always on the MLP), parallel
          attention and MLP (``use_parallel_residual``), partial rotary (no parameters); ``falcon``: fused q/k/v
          with multi-query (``multi_query``) or grouped (``new_decoder_architecture``, ``num_kv_heads``) keys,
          one or two LayerNorms per parallel block (``num_ln_in_parallel_attn``), ALiBi or rotary (no
          parameters); ``opt``: learned positions with 2 extra rows, biases, ReLU; ``bloom``: ALiBi, fused q/k/v,
          a LayerNorm after the embedding;
        * windows: ``mistral``, ``mixtral``, ``phi3`` window every layer; ``gemma2``, ``gemma3_text``,
          ``gpt_oss`` window the layers ``layer_types`` marks ``sliding_attention`` (by default every other
          layer, Gemma 3 five in six); ``llama4_text``'s chunked-attention layers (``attention_chunk_size``,
          three in four) are kept as windows of the chunk size (the same KV cache; their attention FLOPs are
          counted as a window's, up to twice a chunk's); ``qwen3``/``qwen3_moe`` with ``use_sliding_window`` are
          refused (no released config sets it);
        * mixtures of experts: ``mixtral`` and ``gpt_oss`` (``num_local_experts``, experts of width
          ``intermediate_size``; gpt-oss's router and experts have biases, its attention learned ``sinks``),
          ``qwen2_moe`` and ``qwen3_moe`` (``num_experts`` of width ``moe_intermediate_size`` in the layers
          ``(i + 1) % decoder_sparse_step == 0`` not in ``mlp_only_layers``, the others dense of width
          ``intermediate_size``; Qwen2-MoE's gated shared expert of ``shared_expert_intermediate_size``),
          ``deepseek_v2``/``deepseek_v3`` (``n_routed_experts`` and ``n_shared_experts`` of width
          ``moe_intermediate_size`` from layer ``first_k_dense_replace`` on, multi-head latent attention; a
          ``moe_layer_freq`` other than 1 is refused: DeepSeek's own code and Hugging Face's disagree on it, and
          no released model uses it; DeepSeek-V3's ``e_score_correction_bias`` is a buffer in Hugging Face's
          module, updated by a rule rather than by gradients, but it is stored in the checkpoint and counted here
          as the router's bias: 256 numbers per MoE layer, 14,848 in all, which make the published
          671,026,419,200), ``llama4_text``
          (``num_local_experts`` of width ``intermediate_size`` plus a shared expert of that width in the
          ``moe_layers`` / every ``interleave_moe_layer_step``-th layer, dense layers of
          ``intermediate_size_mlp``; its q/k norm has no weights).

        Sliding windows of the older families follow each architecture's Hugging Face code (``transformers`` 5.x):

        * ``mistral``: ``sliding_window`` applies to every layer (``modeling_mistral.py``); absent it is
          ``MistralConfig``'s 4096 (Mistral 7B v0.1), ``null`` is no window (v0.2 and v0.3);
        * ``qwen2``: ``sliding_window`` counts only with ``use_sliding_window``; then the layers with
          ``layer_types[i] == "sliding_attention"`` are windowed, by default those with
          ``i >= max_window_layers`` (``Qwen2Config.__post_init__``). No windowed layer (``max_window_layers``
          >= ``num_hidden_layers``, Qwen2's released configs) is full attention; every layer windowed is a window;
          a mix of full and windowed layers is refused;
        * ``llama`` and ``gpt2``: no window; a ``sliding_window`` key is ignored, as Hugging Face ignores it.
        """
        config, where = _load_hf_config(config)
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f"name must be a non-empty string or None, got {name!r}")
        mtype = config.get("model_type")
        name = name or str(config.get("_name_or_path") or mtype)
        if mtype in _MULTIMODAL and isinstance(config.get("text_config"), dict):
            # the text model of a multimodal config (Gemma 3, Llama 4): counted without the vision tower
            config, mtype = dict(config["text_config"]), _MULTIMODAL[mtype]
            config.setdefault("model_type", mtype)
            where = f"{where} (text_config)"
        moe = [k for k in MOE_KEYS if config.get(k) not in (None, 0, False)]
        if moe and mtype not in _MOE_FAMILIES:
            seen = ", ".join(f"{k}={_short(config[k])}" for k in moe)
            raise ValueError(f"{where}: {seen} {'marks' if len(moe) == 1 else 'mark'} a mixture-of-experts model "
                             f"(model_type {_short(mtype)}), which from_hf_config does not read for that "
                             f"model_type; a dense count of a mixture of experts leaves out all its experts but "
                             f"one. Mixture-of-experts families it reads: {', '.join(sorted(_MOE_FAMILIES))}")
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
            if mtype == "llama4_text":     # dense layers are intermediate_size_mlp wide, experts intermediate_size
                fields["ffn_hidden"] = get.int("intermediate_size_mlp")
        return get.build(cls, name, fields)


def moe_layer_indices(layers: int, *, first_dense: int = 0, every: int = 1, dense_layers=()) -> tuple[int, ...]:
    """The indices of the MoE layers of a ``layers``-layer model, as :attr:`Model.moe_layers` takes them: from
    layer ``first_dense`` on (DeepSeek's ``first_k_dense_replace``), the layers ``i`` with ``(i + 1) % every == 0``
    (Qwen-MoE's ``decoder_sparse_step``, Llama 4's ``interleave_moe_layer_step``), less ``dense_layers``
    (Qwen-MoE's ``mlp_only_layers``)."""
    layers = check_int("layers", layers)
    first_dense = check_int("first_dense", first_dense, minimum=0)
    every = check_int("every", every)
    skip = {check_int("dense_layers[i]", i, minimum=0) for i in dense_layers}
    return tuple(i for i in range(first_dense, layers) if (i + 1) % every == 0 and i not in skip)


#: The ``model_type`` values :meth:`Model.from_hf_config` reads, dense then mixtures of experts.
HF_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "gemma3", "phi3", "olmo2",
               "nemotron", "gpt_neox", "falcon", "opt", "bloom", "gpt2", "mixtral", "qwen2_moe", "qwen3_moe",
               "deepseek_v2", "deepseek_v3", "gpt_oss", "llama4_text", "llama4")
_MOE_FAMILIES = frozenset({"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss",
                           "llama4_text"})
#: Multimodal configs whose ``text_config`` is read as the given text ``model_type``.
_MULTIMODAL = {"gemma3": "gemma3_text", "llama4": "llama4_text"}

_LLAMA_FLAGS = {"num_key_value_heads": None, "head_dim": None, "tie_word_embeddings": False, "hidden_act": "silu"}

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
    "gpt2": {"n_inner": None, "n_positions": 1024, "tie_word_embeddings": True, "activation_function": "gelu_new"},
    "qwen3": {**_LLAMA_FLAGS, "num_key_value_heads": 32, "head_dim": 128, "max_position_embeddings": 32768,
              "attention_bias": False, "use_sliding_window": False},
    "gemma": {**_LLAMA_FLAGS, "num_key_value_heads": 16, "head_dim": 256, "max_position_embeddings": 8192,
              "tie_word_embeddings": True, "hidden_act": "gelu_pytorch_tanh", "attention_bias": False},
    "gemma2": {**_LLAMA_FLAGS, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 8192,
               "tie_word_embeddings": True, "hidden_act": "gelu_pytorch_tanh", "attention_bias": False,
               "sliding_window": 4096, "layer_types": None},
    "gemma3_text": {**_LLAMA_FLAGS, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131072,
                    "tie_word_embeddings": True, "hidden_act": "gelu_pytorch_tanh", "attention_bias": False,
                    "sliding_window": 4096, "layer_types": None, "sliding_window_pattern": 6},
    "phi3": {**_LLAMA_FLAGS, "max_position_embeddings": 4096, "sliding_window": None},
    "olmo2": {**_LLAMA_FLAGS, "max_position_embeddings": 2048, "attention_bias": False},
    "nemotron": {**_LLAMA_FLAGS, "max_position_embeddings": 4096, "hidden_act": "relu2", "attention_bias": False,
                 "mlp_bias": False},
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
                  "qkv_bias": True, "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28,
                  "layer_types": None, "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408,
                  "shared_expert_intermediate_size": 5632, "decoder_sparse_step": 1, "mlp_only_layers": None},
    "qwen3_moe": {**_LLAMA_FLAGS, "num_key_value_heads": 4, "max_position_embeddings": 32768,
                  "attention_bias": False, "use_sliding_window": False, "num_experts": 128,
                  "num_experts_per_tok": 8, "moe_intermediate_size": 768, "decoder_sparse_step": 1,
                  "mlp_only_layers": None},
    "deepseek_v2": {**_LLAMA_FLAGS, "max_position_embeddings": 2048, "attention_bias": False,
                    "n_routed_experts": 64, "n_shared_experts": 2, "moe_intermediate_size": 1407,
                    "first_k_dense_replace": 0, "moe_layer_freq": 1, "q_lora_rank": 1536, "kv_lora_rank": 512,
                    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128},
    "deepseek_v3": {**_LLAMA_FLAGS, "max_position_embeddings": 4096, "attention_bias": False,
                    "n_routed_experts": 256, "n_shared_experts": 1, "moe_intermediate_size": 2048,
                    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1,
                    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                    "v_head_dim": 128},
    "gpt_oss": {**_LLAMA_FLAGS, "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131072,
                "attention_bias": True, "sliding_window": 128, "layer_types": None, "num_local_experts": 128,
                "num_experts_per_tok": 4},
    "llama4_text": {**_LLAMA_FLAGS, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072,
                    "attention_bias": False, "num_local_experts": 16, "num_experts_per_tok": 1,
                    "moe_layers": None, "interleave_moe_layer_step": 1, "layer_types": None,
                    "no_rope_layers": None, "no_rope_layer_interval": 4, "attention_chunk_size": 8192},
}

#: Keys a config may give under another name (Hugging Face's ``attribute_map`` and backward-compatible kwargs).
_ALIASES = {"bloom": {"n_layer": ("num_hidden_layers",), "n_head": ("num_attention_heads",),
                      "hidden_size": ("n_embed",)}}

#: The config key each :class:`Model` field is read from, by ``model_type`` (for error messages).
_HF_KEY_OF_FIELD = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
                    "kv_heads": "num_key_value_heads", "head_dim": "head_dim", "ffn_hidden": "intermediate_size",
                    "vocab": "vocab_size", "max_seq": "max_position_embeddings", "activation": "hidden_act",
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
    if new:                                           # grouped keys: (heads + 2 num_kv_heads) x head_dim rows
        kv = get.int("num_kv_heads")
        kv = heads if kv is None else kv
    else:                                             # multi-query: one key and value head, or none shared
        kv = 1 if get.bool("multi_query") else heads
    if not parallel:
        norms = 2
    else:                                             # modeling_falcon.py: 2 with the new architecture by default
        n_ln = get.int("num_ln_in_parallel_attn")
        n_ln = 2 if n_ln is None and new else n_ln
        norms = 2 if n_ln == 2 else 1
    ffn = get.int("ffn_hidden_size")
    return dict(layers=get.int("num_hidden_layers"), hidden=hidden, heads=heads, kv_heads=kv,
                ffn_hidden=4 * hidden if ffn is None else ffn, vocab=get.int("vocab_size"), gated_mlp=False,
                tied_embeddings=get.bool("tie_word_embeddings"), norm="layernorm", bias=get.bool("bias"),
                fused_qkv=True, activation=get.activation("activation"), max_seq=get.int("max_position_embeddings"),
                norms_per_layer=norms, parallel_block=parallel or new)


def _opt_fields(get: "_ConfigReader") -> dict:
    hidden, heads = get.int("hidden_size"), get.int("num_attention_heads")
    get.divisible("hidden_size", hidden, "num_attention_heads", heads)
    proj = get.int("word_embed_proj_dim")
    if proj is not None and proj != hidden:
        raise ValueError(f"{get.where}: word_embed_proj_dim ({proj}) != hidden_size ({hidden}) adds OPT's "
                         "project_in/project_out matrices (OPT-350m), which Model does not represent")
    if not get.bool("do_layer_norm_before") or get.bool("_remove_final_layer_norm") or \
            not get.bool("layer_norm_elementwise_affine"):
        raise ValueError(f"{get.where}: OPT with do_layer_norm_before=false, _remove_final_layer_norm=true or "
                         "layer_norm_elementwise_affine=false (OPT-350m's post-norm layout) is not supported")
    return dict(layers=get.int("num_hidden_layers"), hidden=hidden, heads=heads, ffn_hidden=get.int("ffn_dim"),
                vocab=get.int("vocab_size"), gated_mlp=False, tied_embeddings=get.bool("tie_word_embeddings"),
                norm="layernorm", bias=get.bool("enable_bias"), learned_pos=True, pos_offset=2,
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


def _short(value, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (a config value can be a huge list or a 5,000-digit number)."""
    if isinstance(value, _HugeInt):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a {_digits(value):,}-digit integer"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _digits(value: int) -> int:
    """Decimal digits of a (possibly huge) integer, without converting it to a string (Python refuses to above
    4,300 digits)."""
    return len(str(value)) if value.bit_length() < 10_000 else int(math.log10(abs(value))) + 1


class _HugeInt:
    """A JSON integer too long to convert (Python's limit: 4,300 digits): kept as its digit count so that the
    key it belongs to can be named when it is read."""

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))

    def __str__(self) -> str:
        return f"a {self.digits:,}-digit integer"

    __repr__ = __str__


def _parse_int(text: str):
    return int(text) if len(text) <= 4000 else _HugeInt(text)


def _load_hf_config(config) -> tuple[dict, str]:
    """The config as a dict, and how to name it in errors (the file's path, or "config")."""
    if isinstance(config, dict):
        return config, "config"
    if not isinstance(config, (str, PathLike)):
        raise TypeError(f"config must be a dict or a path to config.json, got {type(config).__name__}")
    path = Path(config)
    try:
        if path.is_dir():
            path = path / "config.json"
        found = path.is_file()
    except OSError as exc:                  # a name the file system refuses (too long, ...): not a config file
        raise FileNotFoundError(f"no config file at {_short(str(path), 200)} ({exc.strerror})") from None
    if not found:
        raise FileNotFoundError(f"no config file at {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read as a UTF-8 text file ({exc})") from None
    if not text.strip():
        raise ValueError(f"{path} is empty: expected a JSON object like a Hugging Face config.json")
    try:
        data = json.loads(text, parse_int=_parse_int)    # (integers of thousands of digits: _HugeInt)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    except RecursionError:                               # Python's json recurses once per level of nesting
        raise ValueError(f"{path}: its JSON is nested too deeply to be a config.json") from None
    except ValueError as exc:                            # anything else Python's json refuses
        raise ValueError(f"{path} cannot be read as JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object (a config.json), got a {type(data).__name__}")
    return data, str(path)


class _ConfigReader:
    """Reads and checks config keys; every error names the key (and the file)."""

    def __init__(self, config: dict, where: str, mtype: str):
        self.config, self.where, self.mtype = config, where, mtype
        self.defaults = HF_DEFAULTS[mtype]

    def _value(self, key):
        """``(value, False)``, or ``(Hugging Face's default, True)`` when the key is absent or ``null``."""
        value = self.config.get(key)
        for alias in _ALIASES.get(self.mtype, {}).get(key, ()):
            if value is None:
                value = self.config.get(alias)
        if value is None:
            if key not in self.defaults:
                raise ValueError(f"{self.where} (model_type {self.mtype!r}) is missing the key {key!r}")
            return self.defaults[key], True
        return value, False

    def _error(self, exc: Exception) -> Exception:
        return type(exc)(f"{self.where}: {exc}")

    def int(self, key: str, *, minimum: int = 1):
        value, missing = self._value(key)
        if missing:
            return value
        if isinstance(value, _HugeInt) or (isinstance(value, int) and not isinstance(value, bool)
                                           and value.bit_length() > 64):
            raise ValueError(f"{self.where}: {key} must be an integer >= {minimum} and <= {MAX_MEANINGFUL:,}, "
                             f"got {_short(value)}")
        try:
            return check_int(key, value, minimum=minimum)
        except (TypeError, ValueError) as exc:
            raise self._error(exc) from None

    def bool(self, key: str) -> bool:
        value, missing = self._value(key)
        if missing:
            return value
        try:
            return check_bool(key, value)
        except TypeError as exc:
            raise self._error(exc) from None

    def activation(self, key: str) -> str:
        value, missing = self._value(key)
        if missing:
            return value
        value = _HF_ACTIVATION_ALIASES.get(value, value) if isinstance(value, str) else value
        try:
            return check_choice(key, value, ACTIVATIONS)
        except (TypeError, ValueError) as exc:
            raise self._error(exc) from None

    def divisible(self, key: str, value: int, by_key: str, by: int) -> None:
        if value % by:
            extra = " unless head_dim is given" if by_key == "num_attention_heads" else ""
            raise ValueError(f"{self.where}: {key} ({value}) must be divisible by {by_key} ({by}){extra}")

    def window(self, layers: int) -> int | None:
        """The sliding window of every layer, or None (module docstring of :meth:`Model.from_hf_config`)."""
        if self.mtype == "mistral":
            if "sliding_window" in self.config and self.config["sliding_window"] is None:
                return None                                      # v0.2, v0.3: null is no window
            return self.int("sliding_window")
        if self.mtype != "qwen2" or not self.bool("use_sliding_window"):
            return None                                          # llama, gpt2: Hugging Face ignores the key
        if "sliding_window" in self.config and self.config["sliding_window"] is None:
            return None
        window = self.int("sliding_window")
        types = self.config.get("layer_types")
        if types is None:
            first = self.int("max_window_layers", minimum=0)
            types = ["sliding_attention" if i >= first else "full_attention" for i in range(layers)]
            source = f"max_window_layers={first}"
        else:
            if isinstance(types, (str, bytes, dict)) or not isinstance(types, list):
                raise TypeError(f"{self.where}: layer_types must be a list of 'full_attention' or "
                                f"'sliding_attention', one per layer; got {_short(types)}")
            if len(types) != layers:
                raise ValueError(f"{self.where}: layer_types has {len(types)} entries for num_hidden_layers="
                                 f"{layers}: give one per layer")
            types = ["full_attention" if t == "attention" else t for t in types]    # Hugging Face's legacy name
            odd = sorted({_short(t) for t in types if t not in ("full_attention", "sliding_attention")})
            if odd:
                raise ValueError(f"{self.where}: layer_types entries must be 'full_attention' or "
                                 f"'sliding_attention' for qwen2, got {', '.join(odd)}")
            source = "layer_types"
        windowed = sum(t == "sliding_attention" for t in types)
        if windowed == 0:
            return None
        if windowed < layers:
            raise ValueError(f"{self.where}: use_sliding_window with {source} makes {windowed} of {layers} layers "
                             "windowed and the rest full attention, which Model does not represent (one window "
                             "for every layer)")
        return window

    def opt_int(self, key: str, *, minimum: int = 1):
        """An integer, or ``None`` when the config gives ``null`` (DeepSeek-V2-Lite's ``q_lora_rank``)."""
        if key in self.config and self.config[key] is None:
            return None
        return self.int(key, minimum=minimum)

    def kv_heads(self, heads: int) -> int:
        kv = self.int("num_key_value_heads")
        if kv is None or self.config.get("num_key_value_heads", 0) is None:
            kv = heads                      # null (or Llama's absent): __post_init__ makes it the head count
        if kv > heads or heads % kv:
            absent = "" if "num_key_value_heads" in self.config else \
                f", Hugging Face's default for {self.mtype} when the key is absent"
            raise ValueError(f"{self.where}: num_key_value_heads ({kv}{absent}) must divide num_attention_heads "
                             f"({heads}) and be at most it")
        return kv

    def int_list(self, key: str, layers: int) -> list[int] | None:
        """A list of layer indices (``mlp_only_layers``, ``moe_layers``), or None when absent/null."""
        value, missing = self._value(key)
        if missing or value is None:
            return None
        if not isinstance(value, list):
            raise TypeError(f"{self.where}: {key} must be a list of layer indices, got {_short(value)}")
        try:
            return [check_int(f"{key}[{i}]", v, minimum=0, maximum=layers - 1) for i, v in enumerate(value)]
        except (TypeError, ValueError) as exc:
            raise self._error(exc) from None

    def _layer_types(self, layers: int, default) -> list[str]:
        types = self.config.get("layer_types")
        if types is None:
            return [default(i) for i in range(layers)]
        if isinstance(types, (str, bytes, dict)) or not isinstance(types, list):
            raise TypeError(f"{self.where}: layer_types must be a list, one entry per layer; got {_short(types)}")
        if len(types) != layers:
            raise ValueError(f"{self.where}: layer_types has {len(types)} entries for num_hidden_layers="
                             f"{layers}: give one per layer")
        types = ["full_attention" if t == "attention" else t for t in types]
        odd = sorted({_short(t) for t in types
                      if t not in ("full_attention", "sliding_attention", "chunked_attention")})
        if odd:
            raise ValueError(f"{self.where}: layer_types entries must be 'full_attention', 'sliding_attention' "
                             f"or 'chunked_attention' for {self.mtype}, got {', '.join(odd)}")
        return types

    def layer_windows(self, layers: int) -> dict:
        """``sliding_window`` and ``window_layers`` of the families after the first four (see
        :meth:`Model.from_hf_config`)."""
        m = self.mtype
        if m in ("mixtral", "phi3"):                              # a window on every layer, or none
            if self.config.get("sliding_window") is None:
                return {}
            return {"sliding_window": self.int("sliding_window")}
        if m in ("qwen3", "qwen3_moe"):
            if self.bool("use_sliding_window"):
                raise ValueError(f"{self.where}: use_sliding_window=true is not supported for {m} (no released "
                                 "config sets it)")
            return {}
        if m == "qwen2_moe":
            if not self.bool("use_sliding_window"):
                return {}
            first = self.int("max_window_layers", minimum=0)
            types = self._layer_types(layers, lambda i: "sliding_attention" if (i + 1) % 2 and i < first
                                      else "full_attention")
            key = "sliding_window"
        elif m == "gemma2" or m == "gpt_oss":
            types = self._layer_types(layers, lambda i: "sliding_attention" if (i + 1) % 2 else "full_attention")
            key = "sliding_window"
        elif m == "gemma3_text":
            pattern = self.int("sliding_window_pattern")
            types = self._layer_types(layers, lambda i: "sliding_attention" if (i + 1) % pattern
                                      else "full_attention")
            key = "sliding_window"
        elif m == "llama4_text":
            if "attention_chunk_size" in self.config and self.config["attention_chunk_size"] is None:
                return {}
            no_rope = self.config.get("no_rope_layers")
            if no_rope:           # 1: a rotary layer, which is the chunked one (Llama4TextConfig.__post_init__)
                if not isinstance(no_rope, list) or len(no_rope) != layers:
                    raise ValueError(f"{self.where}: no_rope_layers must be a list of {layers} flags")
                default = lambda i: "chunked_attention" if no_rope[i] else "full_attention"  # noqa: E731
            else:
                interval = self.int("no_rope_layer_interval")
                default = lambda i: "chunked_attention" if (i + 1) % interval else "full_attention"  # noqa: E731
            types = self._layer_types(layers, default)
            key = "attention_chunk_size"
        else:
            return {}
        windowed = sum(t in ("sliding_attention", "chunked_attention") for t in types)
        if windowed == 0 or (key in self.config and self.config[key] is None):
            return {}
        return {"sliding_window": self.int(key), "window_layers": None if windowed == layers else windowed}

    def moe(self, layers: int) -> dict:
        """The mixture-of-experts fields of a config of one of the MoE families."""
        m = self.mtype
        if m in ("mixtral", "gpt_oss", "llama4_text"):
            experts = self.int("num_local_experts")
        elif m in ("qwen2_moe", "qwen3_moe"):
            experts = self.int("num_experts", minimum=0)
        else:
            experts = self.int("n_routed_experts")
        if experts == 0:                                   # Qwen-MoE with num_experts=0: every layer dense
            return {}
        out = dict(experts=experts, experts_per_token=self.int("num_experts_per_tok"))
        if m in ("qwen2_moe", "qwen3_moe"):
            out["expert_ffn_hidden"] = self.int("moe_intermediate_size")
            step = self.int("decoder_sparse_step")
            out["moe_layers"] = moe_layer_indices(layers, every=step,
                                                  dense_layers=self.int_list("mlp_only_layers", layers) or ())
            if m == "qwen2_moe":
                fs = self.int("shared_expert_intermediate_size", minimum=0)
                if fs:
                    out.update(shared_experts=1, shared_expert_ffn_hidden=fs, shared_expert_gate=True)
        elif m in ("deepseek_v2", "deepseek_v3"):
            out["expert_ffn_hidden"] = self.int("moe_intermediate_size")
            shared = self.int("n_shared_experts", minimum=0)
            if shared:
                out["shared_experts"] = shared
            if self.int("moe_layer_freq") != 1:
                raise ValueError(f"{self.where}: moe_layer_freq={self.config['moe_layer_freq']} is not supported "
                                 "(DeepSeek's reference code and Hugging Face's disagree on it; every released "
                                 "DeepSeek model has 1)")
            first = self.int("first_k_dense_replace", minimum=0)
            if first >= layers:
                raise ValueError(f"{self.where}: first_k_dense_replace ({first}) leaves no MoE layer of "
                                 f"num_hidden_layers={layers}")
            out["moe_layers"] = moe_layer_indices(layers, first_dense=first)
        elif m == "gpt_oss":
            out["router_bias"] = True
        if m == "deepseek_v3":          # e_score_correction_bias: in the checkpoint, a buffer in transformers
            out["router_bias"] = True
        elif m == "llama4_text":
            width = self.int("intermediate_size")
            out.update(expert_ffn_hidden=width, shared_experts=1, shared_expert_ffn_hidden=width)
            listed = self.int_list("moe_layers", layers)
            out["moe_layers"] = tuple(listed) if listed is not None else \
                moe_layer_indices(layers, every=self.int("interleave_moe_layer_step"))
        if "moe_layers" in out and not out["moe_layers"]:
            return {}                                       # no layer has experts: a dense model
        return out

    def build(self, cls, name: str, fields: dict) -> "Model":
        """``cls(name, **fields)``; an error the Model raises names the config keys, not its fields."""
        try:
            return cls(name=name, **fields)
        except (TypeError, ValueError) as exc:
            keys = _FAMILY_KEY_OF_FIELD.get(self.mtype, _HF_KEY_OF_FIELD)
            text = re.sub(r"\b(" + "|".join(keys) + r")\b", lambda m: keys[m.group(1)], str(exc))
            raise type(exc)(f"{self.where}: {text}") from None


# ----------------------------------------------------------------------------- approximations
def approx_params_12lh2(model: Model) -> int:
    """The popular shortcut ``N ~ 12 L h^2`` (chapter 1, "Counting parameters").

    It counts only the transformer blocks of a GPT-2/GPT-3 style layer without GQA and with ``f = 4h``:
    4 h^2 for the attention projections (q, k, v, o) plus 8 h^2 for a two-matrix MLP, and drops biases,
    norms, embeddings and the LM head. Kaplan et al. 2020 (arXiv:2001.08361) Sec. 2.1 write it as
    ``N ~ 2 d_model n_layer (2 d_attn + d_ff) = 12 n_layer d_model^2``. Compare with :attr:`Model.n_params`
    to see how wrong it is for a given model; the book does so per catalogued model.
    """
    if not isinstance(model, Model):
        raise TypeError(f"model must be a Model, got {type(model).__name__}")
    return 12 * model.layers * model.hidden**2
