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
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import cached_property
from os import PathLike
from pathlib import Path

from ._validate import check_bool, check_choice, check_int

NORMS = ("layernorm", "rmsnorm")

#: Components of :meth:`Model.param_breakdown`, in the order charts draw them.
COMPONENTS = ("embedding", "position", "attention", "mlp", "norms", "lm_head")


#: MLP activation functions by their Hugging Face names (``hidden_act`` / ``activation_function``); with
#: ``gated_mlp`` the activation is applied to the gate (``silu`` gives SwiGLU, ``gelu_pytorch_tanh`` GeGLU).
ACTIVATIONS = ("silu", "gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
_HF_ACTIVATION_ALIASES = {"swish": "silu"}

#: Config keys that mark a mixture-of-experts model (Mixtral, Qwen-MoE, OLMoE, DeepSeek, ...). A dense count of
#: such a config is badly wrong (85% low for Mixtral 8x7B), so ``from_hf_config`` refuses it.
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
            "n_shared_experts", "num_shared_experts", "moe_num_experts")


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
    7B v0.1: 4096); it caps the KV cache (:func:`~llmsizing.inference.inference_memory`).

    ``max_seq`` is the context the model was trained with. The library accepts longer sequences: none of its
    memory formulas depends on the position encoding except learned positions (GPT-2 has exactly ``max_seq``
    position rows and cannot run longer). For rotary models, a longer context assumes the positions are
    extended (RoPE scaling or position interpolation, as Llama 3.1 does to 128K); the memory is the same, the
    quality is the trainer's concern.
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

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty string, got {self.name!r}")
        # every field keeps what its check returns (Python int/bool), so NumPy scalars cannot overflow later
        for f in ("layers", "hidden", "heads", "ffn_hidden", "vocab", "max_seq"):
            object.__setattr__(self, f, check_int(f, getattr(self, f)))
        kv = self.heads if self.kv_heads is None else check_int("kv_heads", self.kv_heads)
        if kv > self.heads or self.heads % kv:
            raise ValueError(f"kv_heads must divide heads ({self.heads}) and be <= heads, got {kv}")
        hd = self.hidden // self.heads if self.head_dim is None else check_int("head_dim", self.head_dim)
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads}) "
                             "unless head_dim is given")
        object.__setattr__(self, "kv_heads", kv)
        object.__setattr__(self, "head_dim", hd)
        for f in ("gated_mlp", "tied_embeddings", "bias", "qkv_bias", "learned_pos"):
            object.__setattr__(self, f, check_bool(f, getattr(self, f)))
        check_choice("norm", self.norm, NORMS)
        act = self.activation
        if act is None:              # the usual pairing: SwiGLU for gated MLPs, GPT-2's gelu_new otherwise
            act = "silu" if self.gated_mlp else "gelu_new"
        object.__setattr__(self, "activation", check_choice("activation", act, ACTIVATIONS))
        if self.sliding_window is not None:
            object.__setattr__(self, "sliding_window", check_int("sliding_window", self.sliding_window))

    # ------------------------------------------------------------------ tensors
    def layer_tensors(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """The tensors of ONE transformer block as ``(component, name, shape)``; matrices are (out, in)."""
        h, a, g, d, f = self.hidden, self.heads, self.kv_heads, self.head_dim, self.ffn_hidden
        norm = [("weight", (h,))] + ([("bias", (h,))] if self.norm == "layernorm" else [])
        t: list[tuple[str, str, tuple[int, ...]]] = []
        t += [("norms", f"attn_norm.{n}", s) for n, s in norm]
        for proj, out in (("q", a * d), ("k", g * d), ("v", g * d)):
            t.append(("attention", f"{proj}_proj.weight", (out, h)))
            if self.bias or self.qkv_bias:
                t.append(("attention", f"{proj}_proj.bias", (out,)))
        t.append(("attention", "o_proj.weight", (h, a * d)))
        if self.bias:
            t.append(("attention", "o_proj.bias", (h,)))
        t += [("norms", f"mlp_norm.{n}", s) for n, s in norm]
        ins = ("gate_proj", "up_proj") if self.gated_mlp else ("up_proj",)
        for proj in ins:
            t.append(("mlp", f"{proj}.weight", (f, h)))
            if self.bias:
                t.append(("mlp", f"{proj}.bias", (f,)))
        t.append(("mlp", "down_proj.weight", (h, f)))
        if self.bias:
            t.append(("mlp", "down_proj.bias", (h,)))
        return t

    def tensors(self) -> list[tuple[str, str, tuple[int, ...], int]]:
        """Every parameter tensor as ``(component, name, shape, copies)``; ``copies`` is ``layers`` for block
        tensors and 1 otherwise. Tied embeddings are counted once (the LM head reuses the embedding)."""
        h = self.hidden
        t = [("embedding", "embed_tokens.weight", (self.vocab, h), 1)]
        if self.learned_pos:
            t.append(("position", "embed_positions.weight", (self.max_seq, h), 1))
        t += [(c, f"layers.{n}", s, self.layers) for c, n, s in self.layer_tensors()]
        t += [("norms", "final_norm.weight", (h,), 1)]
        if self.norm == "layernorm":
            t.append(("norms", "final_norm.bias", (h,), 1))
        if not self.tied_embeddings:
            t.append(("lm_head", "lm_head.weight", (self.vocab, h), 1))
        return t

    # ------------------------------------------------------------------ counts
    @cached_property
    def n_params(self) -> int:
        """Exact number of parameters (tied embeddings counted once). Computed once per (immutable) Model."""
        return sum(math.prod(s) * k for _, _, s, k in self.tensors())

    @property
    def params_per_layer(self) -> int:
        return sum(math.prod(s) for _, _, s in self.layer_tensors())

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
        if "hidden" in changes or "heads" in changes:
            changes.setdefault("head_dim", None)
        if "heads" in changes:
            changes.setdefault("kv_heads", None)
        return replace(self, **changes)

    # ------------------------------------------------------------------ Hugging Face
    @classmethod
    def from_hf_config(cls, config: dict | str | PathLike, name: str | None = None) -> "Model":
        """Build a :class:`Model` from a Hugging Face ``config.json``: a dict, a path to the file, or a folder
        that holds one (as ``save_pretrained`` writes it).

        Supported ``model_type``: ``llama``, ``mistral``, ``qwen2``, ``gpt2``. Anything else raises
        ``ValueError``: a silently wrong architecture would give a silently wrong count. So does a config with
        mixture-of-experts fields (:data:`MOE_KEYS`) under any ``model_type``.

        Every key read is checked, and an error names the **config key** (``num_attention_heads must be an
        integer >= 1, got 0``). Keys that Hugging Face fills with a default when absent or ``null``
        (``num_key_value_heads``, ``head_dim``, ``n_inner``, ``tie_word_embeddings``, ...) get that default;
        a present but invalid value (0, a float, ``"false"``) is refused, not replaced. Bias flags the Hugging
        Face class ignores are ignored too: Qwen2 always has biases on q, k and v only, Mistral none.
        Sliding windows: Mistral's ``sliding_window`` (v0.1: 4096; ``null`` from v0.2 on); Qwen2's only with
        ``use_sliding_window`` and on every layer (``max_window_layers`` 0).
        """
        config, where = _load_hf_config(config)
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f"name must be a non-empty string or None, got {name!r}")
        mtype = config.get("model_type")
        if not isinstance(mtype, str):
            raise ValueError(f"{where}: model_type must be one of llama, mistral, qwen2, gpt2, got {mtype!r}")
        moe = [k for k in MOE_KEYS if config.get(k) not in (None, 0, False)]
        if moe:
            raise ValueError(f"{where}: {', '.join(moe)} mark a mixture-of-experts model; from_hf_config counts "
                             "dense models only (a dense count of Mixtral 8x7B would be 85% low)")
        get = _ConfigReader(config, where, mtype)
        name = name or str(config.get("_name_or_path") or mtype)
        if mtype in ("llama", "mistral", "qwen2"):
            heads = get.int("num_attention_heads")
            hidden = get.int("hidden_size")
            bias = qkv_bias = False
            if mtype == "llama":
                # Llama's attention_bias puts a bias on q, k, v AND o; mlp_bias on gate, up and down. A Model
                # represents "biases everywhere" (bias) or "q, k, v only" (qkv_bias), not one without the
                # other: refuse rather than return a count that is silently off.
                attn_bias, mlp_bias = get.bool("attention_bias", False), get.bool("mlp_bias", False)
                if attn_bias != mlp_bias:
                    raise ValueError(f"{where}: attention_bias={attn_bias} with mlp_bias={mlp_bias} is not "
                                     "supported (Model has no field for biases on attention only or MLP only)")
                bias = attn_bias
            elif mtype == "qwen2":
                qkv_bias = True          # Qwen2Attention hard-codes bias on q, k, v; attention_bias is ignored
            window = get.int("sliding_window", None)
            if mtype == "qwen2":
                if not get.bool("use_sliding_window", False):
                    window = None
                elif window is not None and get.int("max_window_layers", 28, minimum=0) > 0:
                    raise ValueError(f"{where}: use_sliding_window with max_window_layers > 0 mixes full and "
                                     "windowed layers, which Model does not represent")
            return cls(
                name=name,
                layers=get.int("num_hidden_layers"),
                hidden=hidden,
                heads=heads,
                kv_heads=get.int("num_key_value_heads", heads),
                head_dim=get.int("head_dim", None),
                ffn_hidden=get.int("intermediate_size"),
                vocab=get.int("vocab_size"),
                gated_mlp=True,
                tied_embeddings=get.bool("tie_word_embeddings", False),
                norm="rmsnorm",
                bias=bias,
                qkv_bias=qkv_bias,
                learned_pos=False,
                max_seq=get.int("max_position_embeddings", 4096),
                activation=get.activation("hidden_act", "silu"),
                sliding_window=window,
            )
        if mtype == "gpt2":
            h = get.int("n_embd")
            return cls(
                name=name,
                layers=get.int("n_layer"),
                hidden=h,
                heads=get.int("n_head"),
                ffn_hidden=get.int("n_inner", 4 * h),
                vocab=get.int("vocab_size"),
                gated_mlp=False,
                tied_embeddings=get.bool("tie_word_embeddings", True),
                norm="layernorm",
                bias=True,
                learned_pos=True,
                max_seq=get.int("n_positions", 1024),
                activation=get.activation("activation_function", "gelu_new"),
            )
        raise ValueError(f"{where}: unsupported model_type {mtype!r}; supported: llama, mistral, qwen2, gpt2. "
                         "Build a Model(...) by hand for other architectures.")


def _load_hf_config(config) -> tuple[dict, str]:
    """The config as a dict, and how to name it in errors (the file's path, or "config")."""
    if isinstance(config, dict):
        return config, "config"
    if not isinstance(config, (str, PathLike)):
        raise TypeError(f"config must be a dict or a path to config.json, got {type(config).__name__}")
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"no config file at {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read as a UTF-8 text file ({exc})") from None
    if not text.strip():
        raise ValueError(f"{path} is empty: expected a JSON object like a Hugging Face config.json")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object (a config.json), got a {type(data).__name__}")
    return data, str(path)


_REQUIRED = object()


class _ConfigReader:
    """Reads and checks config keys; every error names the key (and the file)."""

    def __init__(self, config: dict, where: str, mtype: str):
        self.config, self.where, self.mtype = config, where, mtype

    def _value(self, key, default):
        value = self.config.get(key)
        if value is None:                 # absent or null: Hugging Face's default
            if default is _REQUIRED:
                raise ValueError(f"{self.where} (model_type {self.mtype!r}) is missing the key {key!r}")
            return None, True
        return value, False

    def int(self, key: str, default=_REQUIRED, *, minimum: int = 1):
        value, missing = self._value(key, default)
        if missing:
            return default
        try:
            return check_int(key, value, minimum=minimum)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{self.where}: {exc}") from None

    def bool(self, key: str, default: bool) -> bool:
        value, missing = self._value(key, default)
        if missing:
            return default
        try:
            return check_bool(key, value)
        except TypeError as exc:
            raise TypeError(f"{self.where}: {exc}") from None

    def activation(self, key: str, default: str) -> str:
        value, missing = self._value(key, default)
        if missing:
            return default
        value = _HF_ACTIVATION_ALIASES.get(value, value) if isinstance(value, str) else value
        try:
            return check_choice(key, value, ACTIVATIONS)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{self.where}: {exc}") from None


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
