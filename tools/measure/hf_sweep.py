"""Sub-command ``hf-sweep``: every decoder-only causal-LM model type of the installed transformers, built from
its config class's defaults on the meta device, counted (issue 36).

For each ``model_type`` of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` whose config is not an encoder-decoder, it
builds ``AutoModelForCausalLM.from_config(ConfigClass())`` under ``torch.device("meta")`` (nothing allocated,
nothing downloaded) and writes two rows: the config as ``to_dict()`` gives it (``kind=full``) and as
``save_pretrained`` writes it (``to_diff_dict()``: only the keys that differ from the class defaults,
``kind=saved``), with the same truth:

  model_type, kind, model_class   the type, which config dict, the transformers class built
  config_json                     the config dict (sorted keys)
  n_params                        sum(p.numel() for p in model.parameters()) (shared tensors once)
  n_persistent_buffers            numbers in buffers the state dict saves (DeepSeek-V3's router bias), outside
                                  any tower
  n_text_params                   parameters outside any vision / audio tower and projector (the text model a
                                  multimodal config's ``text_config`` describes)
  routed_expert_params            parameters of modules named ``experts`` (not ``shared_expert*``)
  experts, experts_per_token      the config's routed expert count and top-k as the config object reads them
                                  (its ``attribute_map`` resolved), 0 for a dense model
  kv_per_token                    numbers a token adds to the KV cache: the out features of every attention
                                  module's ``k_proj`` and ``v_proj`` (MLA: ``kv_a_proj_with_mqa``; a DeepSeek
                                  sparse-attention indexer's ``wk``, whose key the cache keeps), over layers;
                                  not a module with a ``conv1d`` (a linear-attention mixer: no KV cache)
  state_per_sequence              numbers of the fixed per-sequence state a Mamba / linear-attention layer
                                  keeps instead of a KV cache: the conv_states and recurrent_states the
                                  model's own cache (``DynamicCache`` layers, ``LinearAttentionLayer``) holds
                                  after a 5-token forward pass on the meta device, batch 1, over layers
                                  (empty if that forward pass fails: ``state_error``)
  encoder_style                   1 if the type also has a masked-LM head (BERT, RoBERTa, XLNet, ...): an
                                  encoder that transformers can run as a decoder, not a decoder-only LLM
  error                           why the model could not be built (then no counts)
  transformers_version, torch_version, measured_on

It also writes ``data/hf_config_classes.json``: per type the config class, its ``attribute_map`` and the
defaults of its dataclass fields, which the library's reader uses (:mod:`llmsizing.hf_types`).

The library's test (``tests/test_hf_sweep.py``) reads every row without torch: the count is exact, or the type
is refused by name with its reason. A few minutes for all types on one core.
"""

from __future__ import annotations

import json
import re
import time

import torch

from .core import date_today, write_csv

_TOWER = re.compile(r"(^|\.)(vision|visual|audio|vision_tower|vision_model|audio_tower|multi_modal_projector|"
                    r"mm_projector|vision_embed|image_newline|embed_vision|embed_audio|connector|image_embed)")
_EXPERT_COUNT = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


def _experts(cfg) -> tuple[int, int]:
    sub = getattr(cfg, "text_config", None) or cfg
    e = k = 0
    for key in _EXPERT_COUNT:
        v = getattr(sub, key, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            e = v
            break
    for key in ("num_experts_per_tok", "num_experts_per_token", "moe_k", "moe_topk"):
        v = getattr(sub, key, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return e, v
    return e, k


def _kv_per_token(model) -> int:
    n = 0
    for name, mod in model.named_modules():
        if _TOWER.search(name):
            continue
        kids = dict(mod.named_children())
        if "conv1d" in kids:                 # a linear-attention mixer (OLMo-hybrid's GDN has k_proj, v_proj)
            continue
        if "wk" in kids and "weights_proj" in kids:   # a sparse-attention indexer's key (update_indexer)
            n += kids["wk"].out_features
        if "query" in kids and "key" in kids and "value" in kids:    # BERT-style self-attention (GIT)
            n += kids["key"].out_features + kids["value"].out_features
        elif "project_k" in kids and "project_v" in kids:             # CPM-Ant's attention
            n += kids["project_k"].out_features + kids["project_v"].out_features
        elif "kv_a_proj_with_mqa" in kids:
            n += kids["kv_a_proj_with_mqa"].out_features
        elif "k_proj" in kids and "v_proj" in kids and hasattr(kids["k_proj"], "out_features"):
            n += kids["k_proj"].out_features + kids["v_proj"].out_features
    return n


def _state_per_sequence(model) -> tuple[int | str, str]:
    """Numbers of conv and recurrent state in the cache the model itself fills (batch 1), over layers."""
    try:
        model.to(torch.bfloat16)             # grouped expert matmuls take bf16 only; the meta device costs nothing
        with torch.device("meta"), torch.no_grad():
            out = model(input_ids=torch.zeros(1, 5, dtype=torch.long), use_cache=True)
    except Exception as exc:                                        # noqa: BLE001
        return "", f"forward: {type(exc).__name__}: {exc}"[:200]
    cache, n = getattr(out, "past_key_values", None), 0
    # MiniMax's own cache class keeps the lightning-attention state in a list of its own (MiniMaxCache)
    n += sum(t.numel() for t in getattr(cache, "linear_cache", None) or () if isinstance(t, torch.Tensor))
    # RWKV returns its recurrent state itself (``RwkvOutput.state``: five tensors over layers), not a cache
    n += sum(t.numel() for t in getattr(out, "state", None) or () if isinstance(t, torch.Tensor))
    # xLSTM returns its cache itself (``xLSTMCausalLMOutput.cache``): per layer the mLSTM's memory, normaliser
    # and maximum (``xLSTMCache.rnn_state``)
    for states in (getattr(getattr(out, "cache", None), "rnn_state", None) or {}).values():
        n += sum(t.numel() for t in states if isinstance(t, torch.Tensor))
    # RecurrentGemma keeps its state in its modules (only its recurrent blocks set these attributes)
    for mod in model.modules():
        for attr in ("conv1d_state", "recurrent_states"):
            t = getattr(mod, attr, None)
            n += t.numel() if isinstance(t, torch.Tensor) else 0
    for layer in getattr(cache, "layers", None) or ():
        for attr in ("conv_states", "recurrent_states"):
            states = getattr(layer, attr, None)
            if isinstance(states, dict):
                n += sum(t.numel() for t in states.values() if isinstance(t, torch.Tensor))
            elif isinstance(states, torch.Tensor):
                n += states.numel()
    return n, ""


#: Hybrid types whose class default has Mamba layers only, which transformers 5.24's mask code cannot run
#: (``get_seq_length`` needs an attention layer): measured with the last layer made attention, the state per
#: Mamba layer times the default's layers.
_LAST_LAYER_ATTENTION = {"bamba": lambda c: setattr(c, "attn_layer_indices", [c.num_hidden_layers - 1]),
                         "granitemoehybrid": lambda c: c.layer_types.__setitem__(-1, "full_attention")}


def _state_all_mamba(mtype, cfg) -> tuple[int | str, str]:
    import copy
    from transformers import AutoModelForCausalLM
    c = copy.deepcopy(cfg)
    _LAST_LAYER_ATTENTION[mtype](c)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(c)
    n, err = _state_per_sequence(model)
    if err:
        return n, err
    layers = cfg.num_hidden_layers
    return n * layers // (layers - 1), ""


def _count(model) -> dict:
    n = text = routed = 0
    for name, p in model.named_parameters():
        k = p.numel()
        n += k
        if not _TOWER.search(name):
            text += k
        if re.search(r"(^|\.)experts\.", name) and "shared_expert" not in name:
            routed += k
    persistent = set(model.state_dict())
    # a tower's own buffers (Phi-4-multimodal's audio normalisation) belong to the tower, not the text model
    bufs = sum(b.numel() for name, b in model.named_buffers() if name in persistent and not _TOWER.search(name))
    return dict(n_params=n, n_persistent_buffers=bufs, n_text_params=text, routed_expert_params=routed,
                kv_per_token=_kv_per_token(model))


def _types(transformers):
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def _one_class(cls) -> dict:
    import dataclasses
    d = {}
    for f in dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ():
        v = f.default
        if v is dataclasses.MISSING:
            if f.default_factory is dataclasses.MISSING:
                continue
            try:
                v = f.default_factory()
            except Exception:                                   # noqa: BLE001
                continue
        try:
            json.dumps(v)
        except TypeError:
            continue
        d[f.name] = v
    return {"class": cls.__name__, "attribute_map": dict(getattr(cls, "attribute_map", {})), "defaults": d,
            "sub_configs": {k: getattr(v, "__name__", str(v)) for k, v in getattr(cls, "sub_configs", {}).items()}}


def _classes(types, CONFIG_MAPPING) -> dict:
    out = {t: _one_class(CONFIG_MAPPING[t]) for t in types}
    # a text sub-config whose model_type is not a causal-LM type itself (Emu3's emu3_text_model): its class
    # too, so that a text_config saved without its defaults is read with them
    for t in types:
        sub = getattr(CONFIG_MAPPING[t], "sub_configs", {}).get("text_config")
        st = getattr(sub, "model_type", None)
        if isinstance(sub, type) and isinstance(st, str) and st and st not in out:
            out[st] = _one_class(sub)
    return out


def cmd_hf_sweep(args):
    """Build every decoder-only causal-LM type's class default on the meta device and count it."""
    import transformers
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    transformers.logging.set_verbosity_error()
    today, rows = date_today(), []
    types = _types(transformers)
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES
    with open(args.classes_out, "w", encoding="utf-8") as fh:
        json.dump(_classes(types, CONFIG_MAPPING), fh, indent=0, sort_keys=True)
    if args.only:
        types = [t for t in types if t in args.only]
    for mtype in types:
        t0 = time.perf_counter()
        base = dict(model_type=mtype, encoder_style=int(mtype in MODEL_FOR_MASKED_LM_MAPPING_NAMES),
                    transformers_version=transformers.__version__,
                    torch_version=torch.__version__, measured_on=today)
        try:
            cfg = CONFIG_MAPPING[mtype]()
        except Exception as exc:                                    # noqa: BLE001
            rows.append(dict(base, kind="full", model_class="", config_json="", error=f"config: {exc!r}"[:300]))
            continue
        if getattr(cfg, "is_encoder_decoder", False):
            print(f"{mtype:28s} encoder-decoder: skipped", flush=True)
            continue
        try:
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(cfg)
            counts = _count(model)
            counts["state_per_sequence"], counts["state_error"] = (
                _state_all_mamba(mtype, cfg) if mtype in _LAST_LAYER_ATTENTION else _state_per_sequence(model))
            cls, err = type(model).__name__, ""
            del model
        except Exception as exc:                                    # noqa: BLE001
            counts, cls, err = {}, "", f"build: {type(exc).__name__}: {exc}"[:300]
        e, k = _experts(cfg)
        for kind, d in (("full", cfg.to_dict()), ("saved", cfg.to_diff_dict())):
            d = {key: v for key, v in d.items() if key not in ("transformers_version",)}
            rows.append(dict(base, kind=kind, model_class=cls,
                             config_json=json.dumps(d, sort_keys=True, default=str), error=err,
                             experts=e, experts_per_token=k, **counts))
        print(f"{mtype:28s} {cls:40s} {counts.get('n_params', 0):>16,} {time.perf_counter() - t0:5.1f}s {err[:80]}",
              flush=True)
    cols = ["model_type", "kind", "model_class", "config_json", "n_params", "n_persistent_buffers", "n_text_params",
            "routed_expert_params", "experts", "experts_per_token", "kv_per_token", "state_per_sequence", "encoder_style", "error",
            "state_error",
            "transformers_version", "torch_version", "measured_on"]
    write_csv(args.out, [{c: r.get(c, "") for c in cols} for r in rows])
    print(f"wrote {len(rows)} rows to {args.out}")
