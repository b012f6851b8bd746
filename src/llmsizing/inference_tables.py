"""Chapter 3's comparison tables of inference memory, one call each (issue 38, book38).

Each table sets models side by side with the library's own figures: the KV cache per token and for a long
sequence (:func:`kv_table`, the section on multi-head latent attention), a hybrid's cache and fixed state
against a dense model's (:func:`hybrid_table`), where the ``1.2 x weights`` rule stops holding
(:func:`breakeven_table`), and a published memory table checked against the book's estimate
(:func:`seed_memory_check`, seed 000). No formula lives here: the rows come from
:mod:`llmsizing.inference` and :mod:`llmsizing.serve_engine`. Chapter 3.
"""

from __future__ import annotations

from ._validate import check_int, check_sequence
from .catalog import get_gpu, resolve_model
from .inference import (inference_memory, kv_cache_bytes_per_token, kv_numbers_per_token_per_layer,
                        rule_of_thumb_breakeven_tokens, state_bytes_per_sequence, weights_bytes)
from .serve_engine import kv_capacity_tokens
from .units import GB, GiB


def _models(models):
    """``(label, Model)`` for each of ``models`` (catalogue names label themselves; a Model by its name)."""
    return [(m if isinstance(m, str) else m.name, resolve_model(m, moe=True))
            for m in check_sequence("models", models, example="['llama-3-70b', 'deepseek-v3']")]


def kv_table(models, *, context: int = 131072):
    """One row per model: its layers, the numbers it caches per token and layer
    (:func:`~llmsizing.inference.kv_numbers_per_token_per_layer`: a latent for MLA, keys and values for GQA),
    its bf16 KV bytes per token (formatted with thousands separators) and the KV cache of one
    ``context``-token sequence in GiB, to 0.1. Chapter 3, "Multi-head latent attention"."""
    import pandas as pd

    context = check_int("context", context)
    rows = {label: {"layers": m.layers, "numbers per token and layer": kv_numbers_per_token_per_layer(m),
                    "KV bytes per token (bf16)": f"{kv_cache_bytes_per_token(m):,.0f}",
                    f"KV cache of {context // 1024:,}K tokens (GiB)":
                        round(inference_memory(m, context=context).kv_cache_bytes / GiB, 1)}
            for label, m in _models(models)}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")


def hybrid_table(models, *, context: int = 262144, gpu="H100 SXM", tp: int = 4):
    """One row per model (by its name): parameters (billions), attention layers of all layers, bf16 KV cache
    per token (KiB) and fixed state per sequence (MiB, 0 for a model that only attends), the cache of one
    ``context``-token sequence (GiB; binary units, as the chapter's other KV tables) and the KV tokens vLLM
    holds on a ``tp``-GPU replica of ``gpu``
    (:func:`~llmsizing.serve_engine.kv_capacity_tokens`, the states of ``max_num_seqs`` sequences set aside).
    Chapter 3, "Hybrid models"."""
    import pandas as pd

    context = check_int("context", context)
    g = get_gpu(gpu)
    cache = f"cache at {context // 1024:,}K (GiB)"
    rows = {m.name: {"params (B)": m.n_params / 1e9,
                     "attention layers": f"{m.n_attention_layers} of {m.layers}",
                     "KV per token (KiB)": kv_cache_bytes_per_token(m) / 2**10,
                     "state per sequence (MiB)": state_bytes_per_sequence(m) / 2**20,
                     cache: inference_memory(m, context=context).kv_cache_bytes / GiB,
                     f"KV tokens, {tp} x {g.name}": kv_capacity_tokens(m, g, tp=tp).tokens}
            for _, m in _models(models)}
    return pd.DataFrame.from_dict(rows, orient="index")


def breakeven_table(models):
    """One row per model: the cached tokens (batch x context, summed) at which the KV cache alone reaches
    the rule's 20% of the weights, those at which the book's whole estimate (allowance included) reaches the
    rule, and the same with int4 weights (:func:`~llmsizing.inference.rule_of_thumb_breakeven_tokens`).
    Chapter 3."""
    import pandas as pd

    rows = {label: {"KV = 20% of weights (tokens)": rule_of_thumb_breakeven_tokens(m),
                    "book = rule (tokens)": rule_of_thumb_breakeven_tokens(m, with_overhead=True),
                    "same, int4 weights": rule_of_thumb_breakeven_tokens(m, weights="int4",
                                                                         with_overhead=True)}
            for label, m in _models(models)}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")


def seed_memory_check(claims: dict, *, context: int = 4096, batch: int = 32):
    """A published memory table against the book's estimate. ``claims``: ``{model: (GB at batch 1, GB at
    ``batch``, GB in 8 bits, GB in 4 bits)}``, the table's four figures for ``context``-token sequences
    (seed 000's). Each claim is followed by the book's figure: the total of :func:`inference_memory` at batch
    1 and at ``batch`` (with that batch's KV cache apart), and the int8 and int4 weights. In GB (10^9 bytes),
    the seed's unit. Chapter 3, "Checking seed 000's memory table"."""
    import pandas as pd

    if not isinstance(claims, dict) or not claims:
        raise TypeError(f"claims must be a non-empty dict {{model: (b1, b{batch}, int8, int4) GB}}, got "
                        f"{type(claims).__name__}")
    context, batch = check_int("context", context), check_int("batch", batch)
    rows = {}
    for name, figures in claims.items():
        if isinstance(figures, (str, bytes)) or not hasattr(figures, "__len__") or len(figures) != 4:
            raise TypeError(f"claims[{name!r}] must be four figures (b1, b{batch}, int8, int4) in GB, got "
                            f"{figures!r}")
        b1, bn, i8, i4 = figures
        one, many = (inference_memory(name, batch=b, context=context) for b in (1, batch))
        rows[name] = {"seed b=1 GB": b1, "book b=1 GB": one.total_bytes / GB,
                      f"seed b={batch} GB": bn, f"book b={batch} GB": many.total_bytes / GB,
                      f"KV b={batch} GB": many.kv_cache_bytes / GB,
                      "seed int8 GB": i8, "book int8 weights GB": weights_bytes(name, "int8") / GB,
                      "seed 4-bit GB": i4, "book int4 weights GB": weights_bytes(name, "int4") / GB}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")
