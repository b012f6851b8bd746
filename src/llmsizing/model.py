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
import re
from dataclasses import dataclass, replace
from functools import cached_property
from os import PathLike
from pathlib import Path

from ._validate import MAX_MEANINGFUL, check_bool, check_choice, check_int

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
        for f in ("gated_mlp", "tied_embeddings", "bias", "qkv_bias", "learned_pos", "fused_qkv"):
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
        mixture-of-experts fields (:data:`MOE_KEYS`) under any ``model_type``; the error names the keys it saw.

        Every key read is checked, and an error names the **config key** and the file
        (``config.json: num_attention_heads must be an integer >= 1, got 0``; ``num_key_value_heads`` must divide
        ``num_attention_heads``), never a :class:`Model` field. A key that is absent gets the default of the
        Hugging Face config class (:data:`HF_DEFAULTS`: Mistral's ``num_key_value_heads`` is 8, Qwen2's 32);
        ``null`` is read as absent, except where the class's ``__post_init__`` gives it its own meaning
        (``num_key_value_heads: null`` is ``num_attention_heads``, ``sliding_window: null`` no window, ``head_dim:
        null`` ``hidden_size // num_attention_heads``). A present but invalid value (0, a float,
        ``"false"``, an integer of thousands of digits) is refused, not replaced. Bias flags the Hugging Face
        class ignores are ignored too: Qwen2 always has biases on q, k and v only, Mistral none.

        Sliding windows follow each architecture's Hugging Face code (``transformers`` 5.x):

        * ``mistral``: ``sliding_window`` applies to every layer (``modeling_mistral.py``); absent it is
          ``MistralConfig``'s 4096 (Mistral 7B v0.1), ``null`` is no window (v0.2 and v0.3);
        * ``qwen2``: ``sliding_window`` counts only with ``use_sliding_window``; then the layers with
          ``layer_types[i] == "sliding_attention"`` are windowed, by default those with
          ``i >= max_window_layers`` (``Qwen2Config.__post_init__``). No windowed layer (``max_window_layers``
          >= ``num_hidden_layers``, Qwen2's released configs) is full attention; every layer windowed is a window;
          a mix of full and windowed layers is refused (a :class:`Model` has one window for all its layers);
        * ``llama`` and ``gpt2``: no window; a ``sliding_window`` key is ignored, as Hugging Face ignores it.
        """
        config, where = _load_hf_config(config)
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f"name must be a non-empty string or None, got {name!r}")
        mtype = config.get("model_type")
        moe = [k for k in MOE_KEYS if config.get(k) not in (None, 0, False)]
        if moe:
            seen = ", ".join(f"{k}={_short(config[k])}" for k in moe)
            raise ValueError(f"{where}: {seen} {'marks' if len(moe) == 1 else 'mark'} a mixture-of-experts model "
                             f"(model_type {_short(mtype)}); from_hf_config counts dense models only, and a dense "
                             "count of a mixture of experts leaves out all its experts but one")
        if not isinstance(mtype, str) or mtype not in HF_DEFAULTS:
            raise ValueError(f"{where}: unsupported model_type {_short(mtype)}; supported: llama, mistral, qwen2, "
                             "gpt2. Build a Model(...) by hand for other architectures.")
        get = _ConfigReader(config, where, mtype)
        name = name or str(config.get("_name_or_path") or mtype)
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
        heads, hidden = get.int("num_attention_heads"), get.int("hidden_size")
        head_dim = get.int("head_dim")
        if head_dim is None:
            get.divisible("hidden_size", hidden, "num_attention_heads", heads)
        kv = get.int("num_key_value_heads")
        if kv is None or config.get("num_key_value_heads", 0) is None:
            kv = heads                      # null (or Llama's absent): __post_init__ makes it the head count
        if kv > heads or heads % kv:
            absent = "" if "num_key_value_heads" in config else f", Hugging Face's default for {mtype} when the " \
                                                                "key is absent"
            raise ValueError(f"{where}: num_key_value_heads ({kv}{absent}) must divide num_attention_heads "
                             f"({heads}) and be at most it")
        bias = qkv_bias = False
        if mtype == "llama":
            # Llama's attention_bias puts a bias on q, k, v AND o; mlp_bias on gate, up and down. A Model
            # represents "biases everywhere" (bias) or "q, k, v only" (qkv_bias), not one without the
            # other: refuse rather than return a count that is silently off.
            attn_bias, mlp_bias = get.bool("attention_bias"), get.bool("mlp_bias")
            if attn_bias != mlp_bias:
                raise ValueError(f"{where}: attention_bias={attn_bias} with mlp_bias={mlp_bias} is not "
                                 "supported (Model has no field for biases on attention only or MLP only)")
            bias = attn_bias
        elif mtype == "qwen2":
            qkv_bias = True          # Qwen2Attention hard-codes bias on q, k, v; attention_bias is ignored
        layers = get.int("num_hidden_layers")
        fields = dict(layers=layers, hidden=hidden, heads=heads, kv_heads=kv, head_dim=head_dim,
                      ffn_hidden=get.int("intermediate_size"), vocab=get.int("vocab_size"), gated_mlp=True,
                      tied_embeddings=get.bool("tie_word_embeddings"), norm="rmsnorm", bias=bias, qkv_bias=qkv_bias,
                      learned_pos=False, max_seq=get.int("max_position_embeddings"),
                      activation=get.activation("hidden_act"), sliding_window=get.window(layers))
        return get.build(cls, name, fields)


#: The defaults of the Hugging Face config classes (``transformers`` 5.x ``configuration_<type>.py``) for the
#: keys ``from_hf_config`` reads, used when a key is absent. ``None`` means "computed": ``head_dim`` is
#: ``hidden_size // num_attention_heads``, a ``null``/``None`` ``num_key_value_heads`` the head count, GPT-2's
#: ``n_inner`` ``4 x n_embd``. Keys without a default here are required.
HF_DEFAULTS: dict[str, dict] = {
    "llama": {"num_key_value_heads": None, "head_dim": None, "max_position_embeddings": 2048,
              "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False},
    "mistral": {"num_key_value_heads": 8, "head_dim": None, "max_position_embeddings": 4096 * 32,
                "tie_word_embeddings": False, "hidden_act": "silu", "sliding_window": 4096},
    "qwen2": {"num_key_value_heads": 32, "head_dim": None, "max_position_embeddings": 32768,
              "tie_word_embeddings": False, "hidden_act": "silu", "use_sliding_window": False,
              "sliding_window": 4096, "max_window_layers": 28, "layer_types": None},
    "gpt2": {"n_inner": None, "n_positions": 1024, "tie_word_embeddings": True, "activation_function": "gelu_new"},
}

#: The config key each :class:`Model` field is read from, by ``model_type`` (for error messages).
_HF_KEY_OF_FIELD = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
                    "kv_heads": "num_key_value_heads", "head_dim": "head_dim", "ffn_hidden": "intermediate_size",
                    "vocab": "vocab_size", "max_seq": "max_position_embeddings", "activation": "hidden_act",
                    "tied_embeddings": "tie_word_embeddings", "sliding_window": "sliding_window"}
_GPT2_KEY_OF_FIELD = {**_HF_KEY_OF_FIELD, "layers": "n_layer", "hidden": "n_embd", "heads": "n_head",
                      "ffn_hidden": "n_inner", "max_seq": "n_positions", "activation": "activation_function"}

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

    def build(self, cls, name: str, fields: dict) -> "Model":
        """``cls(name, **fields)``; an error the Model raises names the config keys, not its fields."""
        try:
            return cls(name=name, **fields)
        except (TypeError, ValueError) as exc:
            keys = _GPT2_KEY_OF_FIELD if self.mtype == "gpt2" else _HF_KEY_OF_FIELD
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
