"""The config reader of the model types in :data:`llmsizing.hf_types.TYPE_RULES` (issue 36; chapter 1,
"Load your model"): a :class:`~llmsizing.hf_types.Rule` says which keys switch which part of the Llama block
on, this module reads them in every spelling the type's config class accepts, with its defaults, and refuses
any key it does not read that would change the count.
"""

from __future__ import annotations

from ._validate import MAX_MEANINGFUL, check_bool, check_int
from .hf_types import (EXPERT_COUNT_KEYS, EXPERT_TOPK_KEYS, NO_PARAMETER_KEYS, Rule, class_default,
                       config_classes, synonyms)
from .layer_kinds import Indexer
from .model_keys import _HF_ACTIVATION_ALIASES, ACTIVATIONS, moe_layer_indices


def _short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class _Keys:
    """Reads one config dict of one type: every spelling (``attribute_map``), the class default, and which
    keys were read."""

    def __init__(self, config: dict, where: str, mtype: str):
        self.config, self.where, self.mtype, self.used = config, where, mtype, set()

    def value(self, key: str, required: bool = True):
        names = synonyms(self.mtype, key)
        self.used.update(names)
        given = [(n, self.config[n]) for n in names if self.config.get(n) is not None]
        if len({_short(v, 10_000) for _, v in given}) > 1:
            raise ValueError(f"{self.where}: " + " and ".join(f"{n}={_short(v)}" for n, v in given)
                             + f" name the same field of {self._cls()} and disagree")
        if given:
            return given[0][1]
        if names[0] in self.config:                       # an explicit null: the class's own meaning of None
            return None
        has, default = class_default(self.mtype, names[0])
        if has:
            return default
        if required:
            raise ValueError(f"{self.where} (model_type {self.mtype!r}) is missing the key {key!r}, which "
                             f"{self._cls()} has no default for")
        return None

    def _cls(self) -> str:
        return config_classes().get(self.mtype, {}).get("class", self.mtype)

    def int(self, key: str, minimum: int = 1, required: bool = True):
        v = self.value(key, required)
        if v is None and not required:
            return None
        if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 64:
            raise ValueError(f"{self.where}: {key} must be an integer >= {minimum} and <= "
                             f"{MAX_MEANINGFUL:,}, got {_short(v)}")
        try:
            return check_int(key, v, minimum=minimum)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{self.where}: {exc}") from None

    def switch(self, s) -> bool:
        if isinstance(s, bool):
            return s
        v = self.value(s, required=False)
        if v is None:
            return False
        try:
            return check_bool(s, v)
        except TypeError as exc:
            raise TypeError(f"{self.where}: {exc}") from None

    def field_of(self, spellings) -> str | None:
        """The one of ``spellings`` that is a field (or alias) of the type's config class."""
        for k in spellings:
            names = synonyms(self.mtype, k)
            if class_default(self.mtype, names[0])[0]:
                return names[0]
        return None


def generic_fields(config: dict, where: str, mtype: str, rule: Rule, keys: "_Keys | None" = None) -> dict:
    """The :class:`~llmsizing.model.Model` fields of a config of a :data:`~llmsizing.hf_types.TYPE_RULES`
    type (``keys``: a reader that has already read some keys, e.g. a hybrid's state-space ones)."""
    k = keys or _Keys(config, where, mtype)
    layers, hidden, heads = k.int("num_hidden_layers"), k.int("hidden_size"), k.int("num_attention_heads")
    if rule.gpt2_layout:
        kv = 1 if k.switch("multi_query") else heads
    else:
        kv = k.int("num_key_value_heads", required=False) or heads
    head_dim = k.int("head_dim", required=False) or hidden // heads       # transformers floors it
    if head_dim == 0:
        raise ValueError(f"{where}: num_attention_heads ({heads}) must be at most hidden_size ({hidden}) "
                         "unless head_dim is given")
    if not rule.mla and (kv > heads or heads % kv):       # MLA: every head gets its own key and value
        raise ValueError(f"{where}: num_key_value_heads ({kv}) must divide num_attention_heads ({heads}) "
                         "and be at most it")
    # intermediate_size may be absent when every layer has experts (Solar Open): the experts' width then
    per_layer = k.value("num_attention_heads_per_layer", required=False) \
        if class_default(mtype, "num_attention_heads_per_layer")[0] else None
    if per_layer is not None and (not isinstance(per_layer, list) or set(per_layer) != {heads}):
        raise ValueError(f"{where}: num_attention_heads_per_layer={_short(per_layer)} gives layers different "
                         "head counts, which Model does not represent (one head count for every layer)")
    act = k.value(rule.activation_key, required=False)
    act = _HF_ACTIVATION_ALIASES.get(act, act) if isinstance(act, str) else None
    qkv, o, mlp = k.switch(rule.qkv_bias), k.switch(rule.o_bias), k.switch(rule.mlp_bias)
    if o and not qkv:
        raise ValueError(f"{where}: a bias on the output projection without q/k/v biases is not represented")
    tied = k.value("tie_word_embeddings", required=False)
    max_seq = k.value("max_position_embeddings", required=False)
    fields = dict(layers=layers, hidden=hidden, heads=heads, kv_heads=kv, head_dim=head_dim,
                  ffn_hidden=k.int(rule.ffn_key,
                                   required=rule.moe is None and not rule.gpt2_layout
                                   and rule.ffn_key != "n_inner")
                  or (k.int(rule.moe.width) if rule.moe else 4 * hidden),
                  vocab=k.int("vocab_size"), gated_mlp=rule.gated,
                  tied_embeddings=bool(True if tied is None else check_bool("tie_word_embeddings", tied)),
                  norm=rule.norm, bias=o, qkv_bias=qkv and not o, mlp_bias=mlp,
                  max_seq=max_seq if isinstance(max_seq, int) and not isinstance(max_seq, bool)
                  and max_seq > 0 else 4096,
                  activation=act if act in ACTIVATIONS else None,
                  qk_norm=rule.qk_norm if rule.qk_norm_key is None or k.switch(rule.qk_norm_key) else None,
                  norms_per_layer=rule.norms, attn_sinks=rule.sinks, attn_gate=rule.attn_gate,
                  lm_head_bias=rule.lm_head_bias, parallel_block=rule.parallel, final_norm=rule.final_norm)
    if rule.mla:
        q_rank = k.value("q_lora_rank", required=False)
        fields.update(kv_heads=heads, head_dim=None, qkv_bias=False, bias=False, qk_norm=None,
                      q_lora_rank=None if q_rank is None else k.int("q_lora_rank"),
                      kv_lora_rank=k.int("kv_lora_rank"), qk_rope_head_dim=k.int("qk_rope_head_dim"),
                      qk_nope_head_dim=k.int("qk_nope_head_dim"), v_head_dim=k.int("v_head_dim"))
        k.used.update(("head_dim", "num_key_value_heads"))
    if rule.gpt2_layout:
        fields.update(learned_pos=True, fused_qkv=True)
    if rule.pos_offset is not None:
        fields.update(learned_pos=True, pos_offset=rule.pos_offset, max_seq=k.int("max_position_embeddings"))
    fields.update(_windows(k, layers, rule))
    fields.update(_moe(k, layers, rule))
    if rule.indexer:
        fields["indexer"] = _indexer(k, layers, rule, fields.get("q_lora_rank"))
    extra = [e for e in rule.extra
             if len(e) == 3 or e[3] is None or k.value(e[3][0], required=False) == e[3][1]]
    fields["extra_layer_tensors"] = tuple(
        (e[0], e[1], tuple(d if isinstance(d, int) else fields[d] for d in e[2])) + tuple(e[4:])
        for e in extra)
    # a multimodal type's tower sub-configs (Phi-4-multimodal's vision_config, audio_config) size towers the
    # text model's count leaves out (as Gemma 3's vision tower)
    k.used.update(s for s in config_classes().get(mtype, {}).get("sub_configs", {}) if s != "text_config")
    _refuse_unread(k, rule)
    return fields


def _indexer(k: _Keys, layers: int, rule: Rule, q_rank) -> Indexer:
    """DeepSeek Sparse Attention's indexer (``modeling_deepseek_v32.py``'s ``DeepseekV32Indexer``): its
    queries come from MLA's query latent, so ``q_lora_rank`` must be set; with ``indexer_types`` (GLM-5) only
    the ``"full"`` layers have one, the list derived as ``GlmMoeDsaConfig.__post_init__`` does when absent."""
    if q_rank is None:
        raise ValueError(f"{k.where}: q_lora_rank=None, but the sparse-attention indexer reads the query "
                         "latent (wq_b takes q_lora_rank inputs)")
    kinds = k.value("layer_types", required=False)
    if kinds is not None and (not isinstance(kinds, list) or set(kinds) != {"indexed_attention"}):
        raise ValueError(f"{k.where}: layer_types={_short(kinds)}: only 'indexed_attention' layers are read")
    n = None
    if rule.indexer == "types":
        types = k.value("indexer_types", required=False)
        if types is None:
            pattern = k.config.get("index_topk_pattern")
            if pattern is not None:
                types = [{"F": "full", "S": "shared"}.get(c, c) for c in pattern]
            else:
                freq = max(k.config.get("index_topk_freq", 1), 1)
                off = k.config.get("index_skip_topk_offset", 2)
                types = ["full" if max(i - off + 1, 0) % freq == 0 else "shared" for i in range(layers)]
        if not isinstance(types, list) or len(types) != layers or set(types) - {"full", "shared"}:
            raise ValueError(f"{k.where}: indexer_types must be a list of {layers} 'full' or 'shared', got "
                             f"{_short(types)}")
        n = types.count("full")
    k.used.update(("index_topk", "index_topk_pattern", "index_topk_freq", "index_skip_topk_offset"))
    return Indexer(heads=k.int("index_n_heads"), head_dim=k.int("index_head_dim"), q_rank=q_rank,
                   layers=None if n == layers else n)


def _windows(k: _Keys, layers: int, rule: Rule) -> dict:
    if rule.window is None:
        return {}
    window = k.value("sliding_window", required=False)
    if window is None:
        return {}
    if rule.window == "all":
        return {"sliding_window": k.int("sliding_window")}
    types = k.value("layer_types", required=False)
    if types is None:
        return {}
    if not isinstance(types, list) or len(types) != layers:
        raise ValueError(f"{k.where}: layer_types must be a list of {layers} entries (num_hidden_layers), "
                         f"got {_short(types)}")
    odd = sorted({_short(t) for t in types if t not in ("full_attention", "sliding_attention", "attention")})
    if odd:
        raise ValueError(f"{k.where}: layer_types entries {', '.join(odd)} are not attention layers this "
                         f"reader represents for {k.mtype}")
    n = sum(t == "sliding_attention" for t in types)
    if n == 0:
        return {}
    return {"sliding_window": k.int("sliding_window"), "window_layers": None if n == layers else n}


def _moe(k: _Keys, layers: int, rule: Rule) -> dict:
    count_key, topk_key = k.field_of(EXPERT_COUNT_KEYS), k.field_of(EXPERT_TOPK_KEYS)
    foreign = [n for n in EXPERT_COUNT_KEYS + EXPERT_TOPK_KEYS if k.config.get(n) not in (None, 0, False)
               and n not in synonyms(k.mtype, count_key or n) + synonyms(k.mtype, topk_key or n)]
    if foreign:
        raise ValueError(f"{k.where}: {', '.join(f'{n}={_short(k.config[n])}' for n in foreign)} is not a "
                         f"key of {k._cls()} (model_type {k.mtype!r}); its expert count is "
                         f"{count_key or 'not a key'}")
    if rule.moe is None:
        given = [n for n in EXPERT_COUNT_KEYS if k.config.get(n) not in (None, 0, False)]
        if given:
            raise ValueError(f"{k.where}: {given[0]}={_short(k.config[given[0]])} marks a mixture of "
                             f"experts, which this reader does not read for model_type {k.mtype!r}")
        return {}
    m = rule.moe
    experts = k.int(count_key, minimum=0)
    if experts == 0:
        return {}
    out = dict(experts=experts, experts_per_token=k.int(topk_key), expert_ffn_hidden=k.int(m.width))
    if m.shared:
        n = k.int(m.shared, minimum=0)
        if n:
            out["shared_experts"] = n
    if m.shared_width:
        w = k.int(m.shared_width, minimum=0)
        if w:
            out.update(shared_experts=1, shared_expert_ffn_hidden=w, shared_expert_gate=m.shared_gate)
    out["router_bias"] = m.router_bias
    first = k.int(m.first_dense, minimum=0) if m.first_dense else 0
    step = k.int(m.step) if m.step else 1
    dense = k.value(m.dense_list, required=False) if m.dense_list else None
    kinds = k.value("mlp_layer_types", required=False) if class_default(k.mtype, "mlp_layer_types")[0] \
        else None
    if kinds is not None:                          # one of "dense"/"sparse" per layer: it decides alone
        if not isinstance(kinds, list) or len(kinds) != layers or set(kinds) - {"dense", "sparse"}:
            raise ValueError(f"{k.where}: mlp_layer_types must be a list of {layers} 'dense' or 'sparse', "
                             f"got {_short(kinds)}")
        out["moe_layers"] = tuple(i for i, t in enumerate(kinds) if t == "sparse")
        k.used.update(n for n in (m.first_dense, m.step, m.dense_list) if n)
    else:
        out["moe_layers"] = moe_layer_indices(layers, first_dense=min(first, layers), every=step,
                                              dense_layers=dense or ())
    if not out["moe_layers"]:
        return {}
    return out


def _refuse_unread(k: _Keys, rule: Rule) -> None:
    refuse_unread(k.config, k.where, k.mtype, k.used, rule.source)


def refuse_unread(config: dict, where: str, mtype: str, used, source: str | None = None) -> None:
    """A key of the type's config class that the reader did not read (``used``), set to something else than
    the class default, which is not known to leave the parameters alone (:data:`NO_PARAMETER_KEYS`): an error
    naming it."""
    cls = config_classes().get(mtype, {}).get("class", mtype)
    for key, v in config.items():
        if key in used or NO_PARAMETER_KEYS.match(key):
            continue
        has, default = class_default(mtype, key)
        if has and v != default:
            raise ValueError(f"{where}: {key}={_short(v)} (the {cls} default is {_short(default)}) is not "
                             f"read for model_type {mtype!r}" + (f" ({source})" if source else "")
                             + " and may change the parameter count; from_hf_config refuses rather than "
                             "guess")


__all__ = ["generic_fields", "refuse_unread"]
