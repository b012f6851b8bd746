"""The model catalogue (chapter 1, "Counting parameters"): ``data/models.csv``, one row per model with its
published parameter count, source and date, read into :class:`~llmsizing.model.Model` descriptions
(:func:`get_model`, :func:`list_models`, :func:`model_table`), and :func:`resolve_model`, the library's one
guard for functions that do not model a mixture of experts. Moved out of :mod:`llmsizing.catalog` unchanged
(session 25), which still exports every name; the GPU catalogue and the prices stay there.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ._validate import _unknown, check_bool
from .model import Model, moe_layer_indices, require_dense

#: ``data/models.csv`` at the repository root (the package is installed editable from ``src/``).
MODELS_CSV = Path(__file__).resolve().parents[2] / "data" / "models.csv"


# ----------------------------------------------------------------------------- models
@dataclass(frozen=True)
class ModelEntry:
    """A catalogue row: the architecture plus the published parameter count and where it comes from."""

    model: Model
    published_params: int
    published_rounded_to: int
    source: str
    as_of: str


#: Columns of ``data/models.csv`` added for mixtures of experts, multi-head latent attention and the odd parts
#: of other families (issue 24) and the position encoding (``positions``, ``rope_layers``: review22 M3); blank
#: for a dense Llama-style model, and optional: a file without them still loads. ``embed_norm`` (a norm
#: right after the word embeddings: BLOOM's ``word_embeddings_layernorm`` in transformers'
#: ``modeling_bloom.py``, BloombergGPT's Sec. 3.1) and ``pos_offset`` (learned position rows beyond
#: ``max_seq``: OPT's 2, transformers' ``OPTLearnedPositionalEmbedding``) are
#: :class:`~llmsizing.model.Model`'s fields of the same names (issue 38); each row's ``source`` cites where
#: its value comes from.
_OPTIONAL_INT = ("experts", "experts_per_token", "expert_ffn_hidden", "shared_experts",
                 "shared_expert_ffn_hidden", "window_layers", "q_lora_rank", "kv_lora_rank",
                 "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "expert_groups",
                 "expert_groups_per_token", "rope_layers", "pos_offset")
_OPTIONAL_FLAG = ("router_bias", "attn_sinks", "embed_norm")


def _model_from_row(r: dict[str, str]) -> Model:
    def flag(k):
        return r[k].strip().lower() == "true"

    def cell(k):
        return (r.get(k) or "").strip()

    extra: dict = {}
    for k in _OPTIONAL_INT:
        if cell(k):
            extra[k] = int(cell(k))
    for k in _OPTIONAL_FLAG:
        if cell(k):
            extra[k] = flag(k)
    if cell("mlp_bias"):
        extra["mlp_bias"] = flag("mlp_bias")
    for k in ("qk_norm", "positions"):
        if cell(k):
            extra[k] = cell(k)
    if cell("first_dense_layers") and int(cell("first_dense_layers")):
        extra["moe_layers"] = moe_layer_indices(int(r["layers"]), first_dense=int(cell("first_dense_layers")))
    return Model(
        name=r["name"], layers=int(r["layers"]), hidden=int(r["hidden"]), heads=int(r["heads"]),
        kv_heads=int(r["kv_heads"]), head_dim=int(r["head_dim"]), ffn_hidden=int(r["ffn_hidden"]),
        vocab=int(r["vocab"]), gated_mlp=flag("gated_mlp"), tied_embeddings=flag("tied_embeddings"),
        norm=r["norm"], bias=flag("bias"), qkv_bias=flag("qkv_bias"), learned_pos=flag("learned_pos"),
        max_seq=int(r["max_seq"]),
        sliding_window=int(r["sliding_window"]) if r["sliding_window"].strip() else None,
        fused_qkv=flag("fused_qkv"), **extra,
    )


@cache
def _model_entries() -> dict[str, ModelEntry]:
    out = {}
    with open(MODELS_CSV, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        m = _model_from_row(r)
        out[m.name] = ModelEntry(m, int(r["published_params"]), int(r["published_rounded_to"]),
                                 r["source"], r["as_of"])
    return out


def list_models(*, moe: bool | None = None) -> list[str]:
    """Names of the catalogued models, in catalogue order: all of them, or with ``moe=False`` only the dense
    ones (what the functions that do not model mixtures of experts yet accept, :func:`resolve_model`), with
    ``moe=True`` only the mixtures of experts."""
    entries = _model_entries()
    if moe is None:
        return list(entries)
    moe = check_bool("moe", moe)
    return [k for k, e in entries.items() if e.model.is_moe == moe]


def get_model(name: str) -> Model:
    """The catalogued :class:`Model` called ``name`` (e.g. ``"llama-2-7b"``)."""
    if not isinstance(name, str):
        raise TypeError(f"model name must be a string, got {type(name).__name__}")
    entries = _model_entries()
    if name not in entries:
        raise _unknown("model", name, list(entries))
    return entries[name].model


def model_entry(name: str) -> ModelEntry:
    """The catalogue row for ``name``: the model plus its published count, source and date."""
    get_model(name)
    return _model_entries()[name]


def resolve_model(model: Model | str, *, moe: bool = False) -> Model:
    """Accept a :class:`Model` or a catalogue name.

    A mixture of experts (:attr:`Model.is_moe`) is refused unless ``moe=True``: this is the library's one
    guard (:func:`llmsizing.model.require_dense`) for the functions that would otherwise compute a dense
    answer for it (fine-tuning, speculative decoding, chapter 4's and 7's dense formulas). The functions that
    do handle one pass ``moe=True``: the weights and KV cache of :mod:`llmsizing.inference`, the FLOPs of
    :mod:`llmsizing.flops`, training memory, activations, communication and step time with expert parallelism
    (:mod:`llmsizing.moe`, issue 24), the planner, the calibrated MFU, training time and cost, and serving.
    The error names the function that refused."""
    if isinstance(model, str):
        model = get_model(model)
    elif not isinstance(model, Model):
        raise TypeError(f"model must be a Model or a catalogue name, got {type(model).__name__}")
    if model.experts and not moe:
        frame = sys._getframe(1)
        while frame.f_back is not None and frame.f_code.co_name.startswith(("<", "_")):
            frame = frame.f_back       # past comprehensions, lambdas and private helpers: the public function
        require_dense(model, frame.f_code.co_name)
    return model


def model_table():
    """The model catalogue as a DataFrame: shape, exact count (and, for a mixture of experts, its experts and
    active parameters), published count and source."""
    import pandas as pd

    rows = []
    for e in _model_entries().values():
        m = e.model
        rows.append(dict(name=m.name, layers=m.layers, hidden=m.hidden, heads=m.heads, kv_heads=m.kv_heads,
                         ffn_hidden=m.ffn_hidden, vocab=m.vocab, n_params=m.n_params,
                         experts=m.experts, experts_per_token=m.experts_per_token,
                         active_params=m.active_params, published_params=e.published_params,
                         published_rounded_to=e.published_rounded_to, source=e.source, as_of=e.as_of))
    return pd.DataFrame(rows).set_index("name")
