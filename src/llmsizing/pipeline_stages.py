"""How a pipeline splits a model's layers (chapter 8; partial recomputation in the "Long context" chapter):
the transformer layers of each pipeline stage (:func:`layers_per_stage`, :func:`uneven_stages`), of each model
chunk of an interleaved stage (:func:`chunk_layers`, :func:`stage_chunks`), the layers each stage recomputes
with Megatron-LM's block method (:func:`check_recompute_layers`, :func:`recomputed_layers`), and the
micro-batches whose activations each stage holds at its peak (:func:`pipeline_in_flight`).

Sources: Megatron-LM's even split (``pp`` dividing the layers) with
``--account-for-embedding-in-pipeline-split`` / ``--account-for-loss-in-pipeline-split``
(``get_num_layers_to_build``, ``transformer_block.py``), its block recomputation
(``TransformerBlock._checkpointed_forward``) and its interleaved schedule
(``pipeline_parallel/schedules.py``); Narayanan et al. 2021 (Sec. 2.2); Korthikanti et al. 2022 (Sec. 4.2.3,
5); Dubey et al. 2024 (Llama 3), Sec. 3.3.2.

These functions read a layout's pipeline fields only (:class:`PipelineLayout`); the layout itself,
:class:`~llmsizing.parallel.Parallel`, lives in :mod:`llmsizing.parallel`, which re-exports every name here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol

from ._validate import check_int
from .pipeline_schedule import MAX_PP


class PipelineLayout(Protocol):
    """What the split reads of a layout (:class:`~llmsizing.parallel.Parallel` has these fields): the
    pipeline stages, the model chunks per stage, an uneven split if given, and whether the embedding and the
    loss take a layer's place."""

    pp: int
    virtual_stages: int
    stage_layers: tuple | None
    account_for_embedding: bool
    account_for_loss: bool


@dataclass(frozen=True)
class _NoPipeline:
    """The pipeline fields of the single-GPU layout (``Parallel()``): one stage, one chunk, an even split."""

    pp: int = 1
    virtual_stages: int = 1
    stage_layers: tuple | None = None
    account_for_embedding: bool = False
    account_for_loss: bool = False


#: A layout of ``None``: the whole model on one stage.
_ONE_STAGE = _NoPipeline()


def layers_per_stage(layers: int, parallel: PipelineLayout) -> tuple[int, ...]:
    """The transformer layers of each pipeline stage: ``parallel.stage_layers``, or an even split
    (``layers // pp`` each, the first ``layers % pp`` stages one more), with ``account_for_embedding`` /
    ``account_for_loss`` of ``layers + 1`` or ``+ 2`` places, the first (last) stage giving one to the
    embedding (loss). When ``pp`` divides the places this is Megatron-LM's split; any other count Megatron-LM
    refuses unless it is told the stages' layers (``get_num_layers_to_build`` asserts that ``pp`` divides
    them; ``--decoder-first/last-pipeline-num-layers`` or ``--pipeline-model-parallel-layout`` set them), so
    the remainder on the first stages is this library's choice (126 layers on 16 stages: fourteen 8s, two 7s).
    Taught in chapter 8."""
    if parallel.stage_layers is not None:
        return parallel.stage_layers
    emb, loss = parallel.account_for_embedding, parallel.account_for_loss
    base, extra = divmod(check_int("layers", layers) + emb + loss, parallel.pp)
    out = [base + (i < extra) for i in range(parallel.pp)]
    out[0] -= emb                          # Megatron-LM: the embedding and the loss take a layer's place
    out[-1] -= loss
    return tuple(out)


def uneven_stages(layers: int, pp: int, *, first: int, last: int) -> tuple[int, ...]:
    """``stage_layers`` with ``first`` layers on the first stage and ``last`` on the last, the rest split as
    evenly as possible over the middle stages (the earlier ones take the remainder). Llama 3 405B:
    ``uneven_stages(126, 16, first=7, last=7)`` gives 7, fourteen 8s, 7 (Dubey et al. 2024, Sec. 3.3.2: one
    layer fewer on the first stage, which holds the embedding, and on the last, which holds the LM head)."""
    layers, pp = check_int("layers", layers), check_int("pp", pp, minimum=2, maximum=MAX_PP)
    first, last = check_int("first", first), check_int("last", last)
    rest = layers - first - last
    if rest < pp - 2 or (pp == 2 and rest):
        raise ValueError(f"first={first} and last={last} leave {rest} layers for the {pp - 2} middle stages "
                         f"of {layers}: each needs at least one")
    if pp == 2:
        return (first, last)
    base, extra = divmod(rest, pp - 2)
    return (first, *(base + (i < extra) for i in range(pp - 2)), last)


def chunk_layers(layers: int, virtual_stages: int = 1) -> tuple[int, ...]:
    """The transformer layers of each of the ``virtual_stages`` model chunks of a pipeline stage holding
    ``layers`` layers: equal chunks when ``virtual_stages`` divides ``layers`` (what Megatron-LM's interleaved
    schedule requires), otherwise the first ``layers % virtual_stages`` chunks one layer more (an uneven split
    such as Llama 3's 7-layer first stage in 4 chunks: 2, 2, 2, 1). One chunk (the stage) without
    interleaving. Used by partial recomputation (:func:`recomputed_layers`)."""
    n, v = check_int("layers", layers), check_int("virtual_stages", virtual_stages)
    if v > n:
        raise ValueError(f"virtual_stages={v} needs at least that many layers on the stage, got layers={n}")
    base, extra = divmod(n, v)
    return tuple(base + (k < extra) for k in range(v))


def stage_chunks(layers: int, parallel: PipelineLayout) -> tuple[tuple[int, ...], ...]:
    """The transformer layers of each model chunk of each pipeline stage (:func:`chunk_layers` of the
    stage's layers), the embedding and the loss counted as one layer's place in the first chunk of the first
    stage and the last chunk of the last stage when ``parallel.account_for_embedding`` /
    ``account_for_loss`` say so (Megatron-LM's ``get_num_layers_to_build``: that chunk builds one layer
    fewer; Llama 3 405B with ``virtual_stages=8``: ``(0, 1, ..., 1)`` on the first stage). Chapter 8.
    Kept for the last 4,096 (layers, layout) pairs: a layout is immutable, and the memory model asks this of
    every stage of every candidate layout."""
    par = _ONE_STAGE if parallel is None else parallel
    try:
        return _kept_stage_chunks(layers, par)
    except TypeError:                   # an unhashable field (or a bad ``layers``: refused below, as given)
        return _stage_chunks(layers, par)


def _stage_chunks(layers: int, par: PipelineLayout) -> tuple[tuple[int, ...], ...]:
    out = []
    for i, n in enumerate(layers_per_stage(layers, par)):
        emb, loss = par.account_for_embedding and i == 0, par.account_for_loss and i == par.pp - 1
        c = list(chunk_layers(n + emb + loss, par.virtual_stages))
        c[0] -= emb
        c[-1] -= loss
        out.append(tuple(c))
    return tuple(out)


_kept_stage_chunks = functools.lru_cache(maxsize=4096, typed=True)(_stage_chunks)


def check_recompute_layers(recompute: str, recompute_layers, layers: int,
                           parallel: PipelineLayout | None = None) -> int | None:
    """``recompute_layers`` checked against ``recompute`` and the layout: ``None`` (every layer, today's
    meaning of ``recompute``), or an integer ``N`` from 0 to the layers of the largest model chunk (a pipeline
    stage's layers over ``virtual_stages``; the model's ``layers`` without a pipeline), allowed with
    ``recompute="full"`` only. Megatron-LM's ``--recompute-num-layers`` with ``--recompute-method block``
    (:func:`recomputed_layers`)."""
    if recompute_layers is None:
        return None
    par = _ONE_STAGE if parallel is None else parallel
    top = max(max(c) for c in stage_chunks(layers, par))
    n = check_int("recompute_layers", recompute_layers, minimum=0, maximum=top)
    if recompute != "full":
        raise ValueError(f"recompute_layers={n} recomputes whole layers, Megatron-LM's "
                         "--recompute-granularity full --recompute-method block: use recompute='full', got "
                         f"recompute={recompute!r} (or recompute_layers=None)")
    return n


def recomputed_layers(layers: int, parallel: PipelineLayout | None, recompute_layers: int) -> tuple[int, ...]:
    """The layers each pipeline stage recomputes with partial recomputation: the first ``recompute_layers``
    layers of each of its model chunks (:func:`chunk_layers`), all of a chunk that has fewer, summed over its
    ``virtual_stages`` chunks. The rest of the stage's layers keep every activation.

    Source: Megatron-LM, ``megatron/core/transformer/transformer_block.py``,
    ``TransformerBlock._checkpointed_forward`` with ``recompute_method == 'block'``: a block is one model
    chunk (one per virtual pipeline stage), and for ``l`` in its layers, ``l < recompute_num_layers`` runs the
    layer under ``tensor_parallel.checkpoint`` (only its input is saved), the others run plainly. NeMo's
    documentation of the flag says the same: the number is per pipeline stage, per virtual stage with
    interleaving. Megatron-LM's other method, ``'uniform'``, groups ALL of a chunk's layers in blocks of
    ``recompute_num_layers`` and checkpoints only each block's input: it always reruns every layer's forward
    (the FLOPs of ``recompute="full"``) and keeps fewer checkpoints (one per block, plus one block's working
    set rebuilt at a time); not modelled here. Without a pipeline the model is one chunk: its first
    ``recompute_layers`` layers. Taught in the "Long context" chapter."""
    par = _ONE_STAGE if parallel is None else parallel
    n = check_int("recompute_layers", recompute_layers, minimum=0)
    return tuple(sum(min(n, c) for c in chunks) for chunks in stage_chunks(layers, par))


def pipeline_in_flight(pp: int, microbatches: int, virtual_stages: int = 1, *,
                       chunks=None) -> list[float]:
    """Micro-batches whose activations each pipeline stage holds at once at its peak, in units of "all of
    this stage's layers for one micro-batch", for stages ``0 .. pp-1``.

    * 1F1B (PipeDream-Flush; Narayanan et al. 2021, Sec. 2.2): stage ``i`` runs ``pp - i - 1`` warm-up
      forwards, then alternates one forward and one backward, so it holds ``min(pp - i, m)`` micro-batches;
      the first stage holds the most, ``min(pp, m)``.
    * Interleaved 1F1B with ``v`` model chunks per stage: Megatron-LM's schedule warms up with
      ``2 (pp - i - 1) + (v - 1) pp`` chunk forwards (capped at ``m v``), so stage ``i`` holds that plus one
      chunk, each ``1 / v`` of its layers. On the first stage that is ``pp (1 + (pp - 1) / (pp v))``
      micro-batches: Korthikanti et al. 2022's interleaving penalty ``1 + (p - 1) / (p v)`` (Sec. 4.2.3),
      which Megatron-LM's ``theoretical_memory_usage.py`` applies.

    * ``chunks`` (:func:`stage_chunks`: the layers of each stage's ``v`` model chunks) counts chunks of
      unequal size exactly: the warm-up and the steady state hold the chunk forwards Megatron-LM's schedule
      table orders (``get_schedule_table``: groups of ``pp`` micro-batches, chunk by chunk; the backward takes
      the chunks in reverse, ``get_model_chunk_id``), and the stage holds, at its peak, the most layers of
      those micro-batches at once, in units of its own layers. The first chunk holds the most (``2 pp - 1``
      micro-batches on the first stage against ``pp`` for the others), so Llama 3's embedding-only first
      chunk (``account_for_embedding``) lightens the first stage. Equal chunks give the formula above.

    Source: Megatron-LM, ``megatron/core/pipeline_parallel/schedules.py`` (commit d98e8a6, 2026-08),
    ``get_pp_rank_microbatches``: ``num_warmup_microbatches = (pipeline_parallel_size -
    pipeline_parallel_rank - 1) * 2 + (num_model_chunks - 1) * microbatch_group_size_per_vp_stage`` (the
    group size defaults to ``pp``), capped at ``num_microbatches * num_model_chunks`` (then every micro-batch
    is in the warm-up). Taught in chapter 8. ``pp`` is at most :data:`MAX_PP` (one number per stage is
    returned).
    """
    p = check_int("pp", pp, maximum=MAX_PP)
    m = check_int("microbatches", microbatches)
    v = check_int("virtual_stages", virtual_stages)
    if v > 1 and p == 1:
        raise ValueError(f"virtual_stages={v} needs pp > 1: interleaving splits each pipeline stage")
    if v == 1:
        return [float(min(p - i, m)) for i in range(p)]
    even = [min(2 * (p - i - 1) + (v - 1) * p + 1, m * v) / v for i in range(p)]
    if chunks is None:
        return even
    chunks = tuple(tuple(check_int("chunks", c, minimum=0) for c in row) for row in chunks)
    if len(chunks) != p or any(len(row) != v for row in chunks):
        raise ValueError(f"chunks must give {v} chunk sizes (virtual_stages) for each of the {p} stages (pp)")
    return [even[i] if len(set(row)) == 1 else _held_layers(p, i, m, row) / max(sum(row), 1)
            for i, row in enumerate(chunks)]


@functools.lru_cache(maxsize=1024)
def _held_layers(p: int, rank: int, m: int, sizes: tuple) -> float:
    """The most layer x micro-batch units pipeline rank ``rank`` holds at once under Megatron-LM's
    interleaved schedule with chunks of ``sizes`` layers (:func:`pipeline_in_flight`): its forwards follow
    ``get_schedule_table`` (groups of ``p`` micro-batches, chunk after chunk), the warm-up runs
    ``get_pp_rank_microbatches``' count, then each step runs one forward and one backward (the backward's
    chunk is ``v - 1 -`` the table's), and the peak is read after each forward."""
    v = len(sizes)
    order = [c for lo in range(0, m, p) for c in range(v) for _ in range(lo, min(lo + p, m))]
    total = m * v
    warm = min(2 * (p - rank - 1) + (v - 1) * p, total)
    held = peak = 0
    for k in range(total):
        held += sizes[order[k]]
        peak = max(peak, held)
        if k >= warm:
            held -= sizes[v - 1 - order[k - warm]]
    return float(peak)
