"""Position encodings (review22 M3; issue 34's memory-bound kernels, :mod:`llmsizing.pointwise`): how a model
tells attention where each token is, which decides whether a rotary kernel passes over its queries and keys.
A :class:`~llmsizing.model.Model` records it in ``positions`` (:data:`POSITIONS`) and ``rope_layers``:

* ``"rope"``: the rotary embedding (Su et al. 2021, arXiv:2104.09864), run on the query and key heads of
  ``rope_layers`` of the layers (``None``: all of them). SmolLM3 leaves it out of every fourth layer and
  Llama 4 out of its full-attention layers (``no_rope_layers`` in their Hugging Face configs, where 1 marks a
  layer that rotates: ``SmolLM3Config``, ``Llama4TextConfig``). Partial rotary (GPT-NeoX's ``rotary_pct``,
  GPT-J's ``rotary_dim``, Phi's ``partial_rotary_factor``) turns only part of each head, but the kernels
  still read and write the whole head: Transformer Engine's fused kernel copies the unrotated tail to its
  output ("copy the rest", ``transformer_engine/common/fused_rope/fused_rope.cu``) and Hugging Face's
  partial-rotary models concatenate the turned and the passed parts again (``torch.cat``), so no rotary
  fraction is kept;
* ``"alibi"``: ALiBi (Press et al. 2022, arXiv:2108.12409; BLOOM, MPT, BloombergGPT, Falcon with
  ``alibi``): a linear bias per head added to the attention scores inside the attention kernel, with no pass
  of its own over the queries and keys: FlashAttention-2 takes it as ``alibi_slopes`` of
  ``flash_attn_func``, and BLOOM's Megatron-DeepSpeed and Hugging Face code pass the bias as the addend of
  the score GEMM (``torch.baddbmm(alibi, query, key)``). Its cost is in the attention core, not here;
* ``"learned"``: a table of learned positions (``learned_pos``, its parameters counted in chapter 1; GPT-2,
  GPT-3, OPT), read beside the token embedding on the first stage;
* ``"none"``: no position signal at all (NoPE; attention-free state-space stacks; the attention layers of
  Jamba, Nemotron-H and Zamba). Read from a Hugging Face config it means "no rotary embedding and no learned
  table", so it also holds the fixed sinusoidal tables of CTRL and XGLM and CPM-Ant's position bias inside
  attention: their add on the first stage (the learned table's ``h b`` per token, without its gather and
  gradient) is not counted, an approximation of well under 0.1% of a step.

``positions=None`` (the default) keeps the reading the library had before the field: ``"learned"`` with
``learned_pos``, ``"rope"`` otherwise (:func:`position_encoding`).
"""

from __future__ import annotations

import re
import warnings

from ._validate import check_choice, check_int

#: ``Model.positions`` values (module docstring).
POSITIONS = ("rope", "alibi", "learned", "none")

#: A Hugging Face config key that sets up a rotary embedding (``rope_theta``, ``rope_parameters``,
#: ``rope_scaling``, ``qk_rope_head_dim``, ``no_rope_layers``, ``rotary_pct``, ``rotary_dim``,
#: ``partial_rotary_factor``, ...): every rotary config class in data/hf_config_classes.json has one, and a
#: class with none builds no rotary embedding (review23a M2).
_ROTARY_KEY = re.compile(r"rope|rotary")

#: Hugging Face model types whose modelling code adds ALiBi whatever the config holds:
#: ``modeling_bloom.py``'s ``build_alibi_tensor`` and ``modeling_mpt.py``'s ``build_mpt_alibi_tensor``.
ALIBI_TYPES = ("bloom", "mpt")


def position_encoding(model) -> str:
    """The model's position encoding, one of :data:`POSITIONS`: ``model.positions``, or without it
    ``"learned"`` with a learned table (``learned_pos``) and ``"rope"`` otherwise."""
    if model.positions is not None:
        return model.positions
    return "learned" if model.learned_pos else "rope"


def rotary_layers(model) -> int:
    """How many of the model's layers run the rotary embedding: ``rope_layers`` (default all) with
    ``"rope"``, none with any other encoding."""
    if position_encoding(model) != "rope":
        return 0
    return model.layers if model.rope_layers is None else model.rope_layers


def check_positions(model) -> None:
    """Check a :class:`~llmsizing.model.Model`'s ``positions`` and ``rope_layers``: ``positions`` one of
    :data:`POSITIONS` (or ``None``) and ``"learned"`` exactly when ``learned_pos`` is set; ``rope_layers``
    from 0 to ``layers``, only with rotary positions."""
    if model.positions is not None:
        check_choice("positions", model.positions, POSITIONS)
        if (model.positions == "learned") != model.learned_pos:
            raise ValueError(f"positions={model.positions!r} and learned_pos={model.learned_pos} disagree: a "
                             "learned position table is positions='learned' with learned_pos=True")
    if model.rope_layers is not None:
        if position_encoding(model) != "rope":
            raise ValueError(f"rope_layers counts the layers with a rotary embedding: only with "
                             f"positions='rope', got positions={position_encoding(model)!r}")
        object.__setattr__(model, "rope_layers",
                           check_int("rope_layers", model.rope_layers, minimum=0, maximum=model.layers))


def rotary_interval(layers: int, rope_layers: int) -> int | None:
    """The ``k`` for which leaving out every ``k``-th of ``layers`` layers (layers ``k``, ``2k``, ...: Hugging
    Face's ``no_rope_layer_interval`` rule) leaves ``rope_layers`` rotating, or ``None`` if no ``k`` does."""
    for k in range(1, layers + 1):
        if layers - layers // k == rope_layers:
            return k
    return None


def positions_changes(model, changes: dict) -> dict:
    """``changes`` for ``Model.with_`` with the position fields that follow from them (review23a M4), so
    edits that worked before the fields existed still do:

    * a change of ``learned_pos`` without ``positions`` resets ``positions`` (and ``rope_layers``) to their
      defaults, which follow ``learned_pos`` (:func:`position_encoding`);
    * a change of ``layers`` without ``rope_layers`` keeps the rule that set ``rope_layers``: with every
      ``k``-th layer left out (:func:`rotary_interval`; SmolLM3's and Llama 4's 4) the new stack leaves out
      every ``k``-th too; a count no interval gives is scaled to the new depth (rounded) with a
      DeprecationWarning, as the rule is not known (pass ``rope_layers``)."""
    changes = dict(changes)
    if ("learned_pos" in changes and "positions" not in changes
            and changes["learned_pos"] != model.learned_pos):
        changes["positions"] = None
        changes.setdefault("rope_layers", None)
    layers = changes.get("layers", model.layers)
    if ("rope_layers" not in changes and model.rope_layers is not None and layers != model.layers
            and isinstance(layers, int) and not isinstance(layers, bool) and layers >= 1):
        k = rotary_interval(model.layers, model.rope_layers)
        if model.rope_layers == model.layers:
            changes["rope_layers"] = layers
        elif k is not None:
            changes["rope_layers"] = layers - layers // k
        else:
            changes["rope_layers"] = min(layers, round(model.rope_layers * layers / model.layers))
            warnings.warn(f"with_(layers={layers}): rope_layers={model.rope_layers} of {model.layers} "
                          "follows no every-k-th-layer rule, so it is scaled to "
                          f"{changes['rope_layers']} of {layers}; pass rope_layers= with layers= (a later "
                          "version will require it)", DeprecationWarning, stacklevel=3)
    return changes


def hf_positions(config: dict, where: str, mtype: str, fields: dict, defaults: dict | None = None) -> dict:
    """``positions`` (and ``rope_layers``) of a Hugging Face config read into ``fields``, from the config's
    keys over its class's ``defaults``: a learned table (``learned_pos`` in ``fields``); ALiBi for
    :data:`ALIBI_TYPES` or ``alibi: true`` (Falcon); ``"none"`` when every layer is an attention-free mixer or
    the class's ``position_embedding_type`` is not ``"rope"`` (Granite 4.0's ``GraniteMoeHybridConfig``:
    NoPE), or when the class is known and neither its defaults nor the config hold a rotary key
    (:data:`_ROTARY_KEY`: Jamba's, Nemotron-H's and Zamba's attention layers take no position signal, and
    their config classes have none); otherwise rotary, on the layers ``no_rope_layers`` marks 1, or without
    that list on all but every ``no_rope_layer_interval``-th (``SmolLM3Config``, ``Llama4TextConfig``)."""
    cfg = {**(defaults or {}), **config}
    if fields.get("learned_pos"):
        return {"positions": "learned"}
    if mtype in ALIBI_TYPES or cfg.get("alibi") is True:
        return {"positions": "alibi"}
    if (fields.get("mixer") is not None and fields.get("mixer_layers") is None
            and not fields.get("mixer_parallel")) or ("position_embedding_type" in (defaults or {})
                                                      and cfg["position_embedding_type"] != "rope"):
        return {"positions": "none"}
    if defaults and not any(_ROTARY_KEY.search(key) for key in cfg):
        return {"positions": "none"}
    layers = fields["layers"]
    flags, interval = cfg.get("no_rope_layers"), cfg.get("no_rope_layer_interval")
    if flags:
        if not isinstance(flags, list) or len(flags) != layers or any(f not in (0, 1) for f in flags):
            raise ValueError(f"{where}: no_rope_layers must be a list of {layers} flags (0 or 1)")
        return {"positions": "rope", "rope_layers": sum(flags)}
    if interval is not None:
        interval = check_int("no_rope_layer_interval", interval)
        return {"positions": "rope", "rope_layers": sum(1 for i in range(layers) if (i + 1) % interval)}
    return {"positions": "rope"}


__all__ = ["POSITIONS", "ALIBI_TYPES", "position_encoding", "rotary_layers", "check_positions",
           "hf_positions", "rotary_interval", "positions_changes"]
