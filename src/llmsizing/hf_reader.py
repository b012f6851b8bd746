"""Reading a Hugging Face ``config.json`` key by key (chapter 1, "From a config file"; issues 24 and 36),
split out of :mod:`llmsizing.hf_config` (session 24: it had reached the 600-line limit): the file's loading,
with the errors that name it (:func:`_load_hf_config`; integers of thousands of digits kept as
:class:`_HugeInt`), and :class:`_ConfigReader`, which reads each key over the Hugging Face config class's
default (:data:`~llmsizing.model_keys.HF_DEFAULTS`, transformers 5.24's ``configuration_<type>.py``; the class
defaults of ``hf_config_classes.json``), checks it with an error that names the key and the file, and reads
the families' sliding windows and mixture-of-experts fields; :meth:`_ConfigReader.build` refuses an unread key
that may change the count (:func:`llmsizing.hf_generic.refuse_unread`). :mod:`llmsizing.hf_config` holds the
families' layouts and re-exports these names; ``tests/test_config_families.py`` checks the counts against
transformers' own modules.
"""

from __future__ import annotations

import json
import math
import re
from os import PathLike
from pathlib import Path

from ._validate import MAX_MEANINGFUL, check_bool, check_choice, check_int
from .hf_generic import refuse_unread
from .hf_types import EXPERT_COUNT_KEYS, class_default, config_classes, synonyms
from .model_keys import (_ALIASES, _FAMILY_KEY_OF_FIELD, _HF_ACTIVATION_ALIASES, _HF_KEY_OF_FIELD,
                         ACTIVATIONS, HF_DEFAULTS, moe_layer_indices)
from .positions import hf_positions


def _with_positions(config: dict, where: str, mtype: str, fields: dict) -> dict:
    """``fields`` with the config's ``positions`` and ``rope_layers``
    (:func:`llmsizing.positions.hf_positions`, over the config class's defaults)."""
    defaults = config_classes().get(mtype, {}).get("defaults", {})
    return {**fields, **hf_positions(config, where, mtype, fields, defaults)}


def _short(value, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (a config value can be a huge list or a 5,000-digit
    number)."""
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
    except OSError as exc:                 # a name the file system refuses (too long, ...): not a config file
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
        self.used = {"no_rope_layers", "num_key_value_heads"}      # (also read directly, below)

    def _value(self, key):
        """``(value, False)``, or ``(Hugging Face's default, True)`` when the key is absent or ``null``."""
        names = (key,) + _ALIASES.get(self.mtype, {}).get(key, ()) + synonyms(self.mtype, key)
        self.used.update(names)
        given = {n: self.config[n] for n in dict.fromkeys(names) if self.config.get(n) is not None}
        if len({_short(v, 10_000) for v in given.values()}) > 1:    # two spellings of one field (issue 36)
            raise ValueError(f"{self.where}: " + " and ".join(f"{n}={_short(v)}" for n, v in given.items())
                             + f" name the same field of the {self.mtype} config class and disagree")
        if given:
            return next(iter(given.values())), False
        if key not in self.defaults:
            has, default = class_default(self.mtype, synonyms(self.mtype, key)[0])
            if not has:                      # (the class defaults of transformers: hf_config_classes.json)
                raise ValueError(f"{self.where} (model_type {self.mtype!r}) is missing the key {key!r}")
            return default, True
        return self.defaults[key], True

    def _error(self, exc: Exception) -> Exception:
        return type(exc)(f"{self.where}: {exc}")

    def int(self, key: str, *, minimum: int = 1):
        value, missing = self._value(key)
        if missing:
            return value
        if isinstance(value, _HugeInt) or (isinstance(value, int) and not isinstance(value, bool)
                                           and value.bit_length() > 64):
            raise ValueError(f"{self.where}: {key} must be an integer >= {minimum} and <= "
                             f"{MAX_MEANINGFUL:,}, got {_short(value)}")
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
            types = ["full_attention" if t == "attention" else t for t in types]  # Hugging Face's legacy name
            odd = sorted({_short(t) for t in types if t not in ("full_attention", "sliding_attention")})
            if odd:
                raise ValueError(f"{self.where}: layer_types entries must be 'full_attention' or "
                                 f"'sliding_attention' for qwen2, got {', '.join(odd)}")
            source = "layer_types"
        windowed = sum(t == "sliding_attention" for t in types)
        if windowed == 0:
            return None
        if windowed < layers:
            raise ValueError(f"{self.where}: use_sliding_window with {source} makes {windowed} of {layers} "
                             "layers windowed and the rest full attention, which Model does not represent "
                             "(one window for every layer)")
        return window

    def opt_int(self, key: str, *, minimum: int = 1):
        """An integer, or ``None`` when the config gives ``null`` (DeepSeek-V2-Lite's ``q_lora_rank``)."""
        self.used.add(key)
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
            raise ValueError(f"{self.where}: num_key_value_heads ({kv}{absent}) must divide "
                             f"num_attention_heads ({heads}) and be at most it")
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
            raise TypeError(f"{self.where}: layer_types must be a list, one entry per layer; got "
                            f"{_short(types)}")
        if len(types) != layers:
            raise ValueError(f"{self.where}: layer_types has {len(types)} entries for num_hidden_layers="
                             f"{layers}: give one per layer")
        types = ["full_attention" if t == "attention" else t for t in types]
        odd = sorted({_short(t) for t in types
                      if t not in ("full_attention", "sliding_attention", "chunked_attention")})
        if odd:
            raise ValueError(f"{self.where}: layer_types entries must be 'full_attention', "
                             f"'sliding_attention' or 'chunked_attention' for {self.mtype}, got "
                             f"{', '.join(odd)}")
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
                raise ValueError(f"{self.where}: use_sliding_window=true is not supported for {m} (no "
                                 "released config sets it)")
            return {}
        if m == "qwen2_moe":
            if not self.bool("use_sliding_window"):
                return {}
            first = self.int("max_window_layers", minimum=0)
            types = self._layer_types(layers, lambda i: "sliding_attention" if (i + 1) % 2 and i < first
                                      else "full_attention")
            key = "sliding_window"
        elif m == "gemma2" or m == "gpt_oss":
            types = self._layer_types(layers,
                                      lambda i: "sliding_attention" if (i + 1) % 2 else "full_attention")
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
            if no_rope:         # 1: a rotary layer, which is the chunked one (Llama4TextConfig.__post_init__)
                if not isinstance(no_rope, list) or len(no_rope) != layers:
                    raise ValueError(f"{self.where}: no_rope_layers must be a list of {layers} flags")
                default = lambda i: "chunked_attention" if no_rope[i] else "full_attention"  # noqa: E731
            else:
                interval = self.int("no_rope_layer_interval")
                default = lambda i: ("chunked_attention" if (i + 1) % interval  # noqa: E731
                                     else "full_attention")
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
        count = {"qwen2_moe": "num_experts", "qwen3_moe": "num_experts", "deepseek_v2": "n_routed_experts",
                 "deepseek_v3": "n_routed_experts"}.get(m, "num_local_experts")
        foreign = [k for k in EXPERT_COUNT_KEYS if self.config.get(k) not in (None, 0, False)
                   and k not in synonyms(m, count)]
        if foreign:              # transformers would ignore it and build its default: never guess (issue 36)
            raise ValueError(f"{self.where}: {foreign[0]}={_short(self.config[foreign[0]])} is not a "
                             f"spelling the {m} config class accepts for its expert count "
                             f"({', '.join(synonyms(m, count))}); transformers would ignore it")
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
                raise ValueError(f"{self.where}: moe_layer_freq={self.config['moe_layer_freq']} is not "
                                 "supported (DeepSeek's reference code and Hugging Face's disagree on it; "
                                 "every released DeepSeek model has 1)")
            first = self.int("first_k_dense_replace", minimum=0)
            if first >= layers:
                raise ValueError(f"{self.where}: first_k_dense_replace ({first}) leaves no MoE layer of "
                                 f"num_hidden_layers={layers}")
            out["moe_layers"] = moe_layer_indices(layers, first_dense=first)
            out.update(self.expert_groups(experts))
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

    def expert_groups(self, experts: int) -> dict:
        """DeepSeek's group-limited routing (``topk_method`` ``"group_limited_greedy"`` or ``"noaux_tc"``,
        with ``n_group`` and ``topk_group``; transformers' ``DeepseekV3MoE`` routes by group):
        ``expert_groups`` and ``expert_groups_per_token``, or nothing for ``"greedy"`` routing over every
        expert, or when the token may use every group."""
        method, _ = self._value("topk_method")
        groups, _ = self._value("n_group")
        top, _ = self._value("topk_group")
        if method == "greedy" or groups is None or top is None:
            return {}
        groups, top = self.int("n_group"), self.int("topk_group")
        if top > groups or experts % groups:
            raise ValueError(f"{self.where}: n_group ({groups}) must divide n_routed_experts ({experts}) and "
                             f"topk_group ({top}) be at most n_group")
        return {} if top == groups else {"expert_groups": groups, "expert_groups_per_token": top}

    def build(self, cls, name: str, fields: dict):
        """``cls(name, **fields)``; an error the Model raises names the config keys, not its fields. A key of
        the config class that was not read, set to a value other than its default, that may change the count,
        is an error naming it (issue 36; :func:`llmsizing.hf_generic.refuse_unread`)."""
        refuse_unread(self.config, self.where, self.mtype, self.used)
        try:
            return cls(name=name, **_with_positions(self.config, self.where, self.mtype, fields))
        except (TypeError, ValueError) as exc:
            keys = _FAMILY_KEY_OF_FIELD.get(self.mtype, _HF_KEY_OF_FIELD)
            text = re.sub(r"\b(" + "|".join(keys) + r")\b", lambda m: keys[m.group(1)], str(exc))
            raise type(exc)(f"{self.where}: {text}") from None
