"""The mixture-of-experts fields of a :class:`~llmsizing.model.Model` and their checks (chapter 1,
"Mixtures of experts: total and active parameters"; the fields are documented on
:class:`~llmsizing.model.Model`). Split from :mod:`llmsizing.model` (session 23: that module had reached
the 600-line limit).
"""

from __future__ import annotations

from ._validate import check_int


def _opt_int(name: str, value, minimum: int = 1):
    return None if value is None else check_int(name, value, minimum=minimum)


def check_moe_fields(model) -> None:
    """Check a :class:`~llmsizing.model.Model`'s mixture-of-experts fields (``experts``,
    ``experts_per_token``, ``shared_experts``, expert widths, ``moe_layers``, expert groups) and store what
    each check returns on the (frozen) model; a dense model (``experts=0``) may set none of them. Errors name
    the field and its allowed range."""
    _check_attn_experts(model)
    e = check_int("experts", model.experts, minimum=0)
    object.__setattr__(model, "experts", e)
    for f in ("experts_per_token", "shared_experts"):
        object.__setattr__(model, f, check_int(f, getattr(model, f), minimum=0))
    if e == 0:
        for f in ("experts_per_token", "shared_experts", "expert_ffn_hidden", "shared_expert_ffn_hidden",
                  "moe_layers"):
            if getattr(model, f) not in (None, 0):
                raise ValueError(f"{f} describes a mixture of experts: give experts (routed experts per "
                                 f"MoE layer) >= 1 too, or leave {f} unset")
        for f in ("shared_expert_gate", "router_bias", "expert_groups", "expert_groups_per_token"):
            if getattr(model, f):
                raise ValueError(f"{f} describes a mixture of experts: give experts >= 1 too")
        return
    groups = check_int("expert_groups", model.expert_groups, minimum=0)
    per_token = check_int("expert_groups_per_token", model.expert_groups_per_token, minimum=0)
    if (groups == 0) != (per_token == 0) or per_token > groups or (groups and e % groups):
        raise ValueError(f"expert_groups ({groups}) must divide experts ({e}) and "
                         f"expert_groups_per_token ({per_token}) be from 1 to expert_groups; both 0 for "
                         "routing without groups")
    object.__setattr__(model, "expert_groups", groups)
    object.__setattr__(model, "expert_groups_per_token", per_token)
    k = model.experts_per_token
    if not 1 <= k <= e:
        raise ValueError(f"experts_per_token must be an integer >= 1 and <= experts ({e}), got {k}")
    object.__setattr__(model, "expert_ffn_hidden", _opt_int("expert_ffn_hidden", model.expert_ffn_hidden))
    object.__setattr__(model, "shared_expert_ffn_hidden",
                       _opt_int("shared_expert_ffn_hidden", model.shared_expert_ffn_hidden))
    if model.shared_expert_gate and not model.shared_experts:
        raise ValueError("shared_expert_gate gates a shared expert: give shared_experts >= 1 too")
    if model.moe_layers is not None:
        if isinstance(model.moe_layers, (str, bytes)) or not hasattr(model.moe_layers, "__iter__"):
            raise TypeError(f"moe_layers must be a sequence of layer indices, got {model.moe_layers!r}")
        idx = tuple(sorted({check_int("moe_layers[i]", i, minimum=0, maximum=model.layers - 1)
                            for i in model.moe_layers}))
        if len(idx) != len(tuple(model.moe_layers)):
            raise ValueError(f"moe_layers lists a layer twice: {tuple(model.moe_layers)!r}")
        if not idx:
            raise ValueError("moe_layers is empty: a model with experts needs at least one MoE layer "
                             "(or set experts=0 for a dense model)")
        object.__setattr__(model, "moe_layers", None if len(idx) == model.layers else idx)


def _check_attn_experts(model) -> None:
    """``attn_experts`` / ``attn_experts_per_token``, the mixture of attention heads (documented on
    :class:`~llmsizing.model.Model`): both 0, or ``1 <= attn_experts_per_token <= attn_experts`` with
    ``attn_experts_per_token`` dividing ``heads`` and MLP experts, q/k/v projections (not MLA, not fused),
    every layer attention, no ``attention_layout``."""
    e = check_int("attn_experts", model.attn_experts, minimum=0)
    k = check_int("attn_experts_per_token", model.attn_experts_per_token, minimum=0)
    object.__setattr__(model, "attn_experts", e)
    object.__setattr__(model, "attn_experts_per_token", k)
    if e == 0:
        if k:
            raise ValueError("attn_experts_per_token describes a mixture of attention heads: give "
                             "attn_experts >= 1 too, or leave attn_experts_per_token=0")
        return
    if not 1 <= k <= e or model.heads % k:
        raise ValueError(f"attn_experts_per_token must be an integer from 1 to attn_experts ({e}) that "
                         f"divides heads ({model.heads}), got {k}")
    if (not model.experts or model.kv_lora_rank is not None or model.fused_qkv or model.mixer is not None
            or model.attention_layout is not None or model.attn_gate is not None or model.bias
            or model.qkv_bias):
        raise ValueError("attn_experts (a mixture of attention heads) needs experts >= 1 (MLP experts) and "
                         "plain q/k/v projections: no kv_lora_rank, fused_qkv, mixer, attention_layout, "
                         "attn_gate, bias or qkv_bias (o_bias, the bias after the experts, is allowed)")
