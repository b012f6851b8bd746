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
from os import PathLike
from pathlib import Path

from ._validate import check_bool, check_choice, check_int

NORMS = ("layernorm", "rmsnorm")

#: Components of :meth:`Model.param_breakdown`, in the order charts draw them.
COMPONENTS = ("embedding", "position", "attention", "mlp", "norms", "lm_head")


class _HFConfig(dict):
    def __missing__(self, key):
        raise ValueError(f"config.json (model_type {self.get('model_type')!r}) is missing the field {key!r}")


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer, described by the numbers in its config file.

    ``head_dim`` defaults to ``hidden // heads`` and ``kv_heads`` to ``heads`` (no GQA). ``ffn_hidden`` is the
    width of the MLP's inner layer; with ``gated_mlp`` (SwiGLU) the MLP has three matrices (gate, up, down),
    without it two (up, down). ``bias`` puts a bias on every linear layer (GPT-2 style); ``qkv_bias`` only on
    the query/key/value projections (Qwen2 style). LayerNorm always has a bias (2 vectors), RMSNorm only a gain.
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

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty string, got {self.name!r}")
        for f in ("layers", "hidden", "heads", "ffn_hidden", "vocab", "max_seq"):
            check_int(f, getattr(self, f))
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
            check_bool(f, getattr(self, f))
        check_choice("norm", self.norm, NORMS)

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
    @property
    def n_params(self) -> int:
        """Exact number of parameters (tied embeddings counted once)."""
        return sum(math.prod(s) * k for _, _, s, k in self.tensors())

    @property
    def params_per_layer(self) -> int:
        return sum(math.prod(s) for _, _, s in self.layer_tensors())

    def param_breakdown(self) -> dict[str, int]:
        """Parameters by component (keys: :data:`COMPONENTS`), summing to :attr:`n_params`."""
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
        """Build a :class:`Model` from a Hugging Face ``config.json`` (a dict or a path to the file).

        Supported ``model_type``: ``llama``, ``mistral``, ``qwen2``, ``gpt2``. Anything else raises
        ``ValueError``: a silently wrong architecture would give a silently wrong count.
        """
        if isinstance(config, (str, PathLike)):
            config = json.loads(Path(config).read_text())
        if not isinstance(config, dict):
            raise TypeError(f"config must be a dict or a path to config.json, got {type(config).__name__}")
        config = _HFConfig(config)   # a missing required field raises ValueError naming it, not KeyError
        mtype = config.get("model_type")
        name = name or config.get("_name_or_path") or str(mtype)
        if mtype in ("llama", "mistral", "qwen2"):
            heads = config["num_attention_heads"]
            # Llama's attention_bias puts a bias on q, k, v AND o; mlp_bias on gate, up and down. A Model
            # represents "biases everywhere" (bias) or "q, k, v only" (qkv_bias, Qwen2), not one without the
            # other: refuse rather than return a count that is silently off.
            attn_bias, mlp_bias = bool(config.get("attention_bias", False)), bool(config.get("mlp_bias", False))
            if attn_bias != mlp_bias:
                raise ValueError(f"attention_bias={attn_bias} with mlp_bias={mlp_bias} is not supported by "
                                 "from_hf_config (Model has no field for biases on attention only or MLP only)")
            return cls(
                name=name,
                layers=config["num_hidden_layers"],
                hidden=config["hidden_size"],
                heads=heads,
                kv_heads=config.get("num_key_value_heads") or heads,
                head_dim=config.get("head_dim") or config["hidden_size"] // heads,
                ffn_hidden=config["intermediate_size"],
                vocab=config["vocab_size"],
                gated_mlp=True,
                tied_embeddings=bool(config.get("tie_word_embeddings", False)),
                norm="rmsnorm",
                bias=attn_bias and mlp_bias,
                qkv_bias=(mtype == "qwen2"),
                learned_pos=False,
                max_seq=config.get("max_position_embeddings", 4096),
            )
        if mtype == "gpt2":
            h = config["n_embd"]
            return cls(
                name=name,
                layers=config["n_layer"],
                hidden=h,
                heads=config["n_head"],
                ffn_hidden=config.get("n_inner") or 4 * h,
                vocab=config["vocab_size"],
                gated_mlp=False,
                tied_embeddings=bool(config.get("tie_word_embeddings", True)),
                norm="layernorm",
                bias=True,
                learned_pos=True,
                max_seq=config.get("n_positions", 1024),
            )
        raise ValueError(f"unsupported model_type {mtype!r} in config; supported: llama, mistral, qwen2, gpt2. "
                         "Build a Model(...) by hand for other architectures.")


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
