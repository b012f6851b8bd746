"""Context parallelism's ring against the attention it hides behind, swept over sequence lengths (the "Long
context" chapter): :func:`cp_overlap_sweep`, built on :func:`~llmsizing.layouts.step_time`. It moved here from
:mod:`llmsizing.layouts` (issue 34), which still forwards it with a DeprecationWarning. And
:func:`document_length_at_mfu`: the mean document length at which a packed long-context step's MFU, counted
over each document, reaches a given one (the chapter's 128K against 8K); :func:`document_mask_check`, what a
published document-length statistic makes of that step, counted over each document and over the whole row.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import get_gpu, resolve_model
from ._validate import check_fraction, check_int
from .flops import document_length_bound, training_flops_per_token
from .layouts import _cp_attention_s, step_time
from .model import Model
from .parallel import Parallel


def cp_overlap_sweep(model: Model | str, gpu, parallel: Parallel, *, seqs, batch: int = 1,
                     grad_accum: int = 1, recompute: str = "none", kernel_efficiency: float | None = None,
                     node=None):
    """Context parallelism's communication against the attention it can hide behind, for each sequence length
    of ``seqs`` (each a multiple of ``2 x parallel.cp``), as a DataFrame indexed by ``seq``: ``compute_s``
    (the step's compute on one GPU, :func:`~llmsizing.comm.step_compute_time_s`), ``attention_s`` (its
    attention core, forward and backward: what the ring's hops hide behind,
    :func:`~llmsizing.layouts.exposed_by_group`),
    ``cp_comm_s`` (the ring's traffic, ``cp_comm="p2p"``), ``hidden_s`` and ``exposed_s`` (how much of it the
    step waits for), and ``all_gather_s`` (the same bytes as all-gathers and a reduce-scatter, all exposed).
    All from :func:`~llmsizing.layouts.step_time`: the ring's bytes grow as ``s`` and the attention as
    ``s^2``, so at long context the ring hides and the gather's cost shrinks next to the compute. Taught in
    the "Long context" chapter."""
    from dataclasses import replace

    from ._validate import check_sequence

    par = parallel if isinstance(parallel, Parallel) else None
    if par is None or par.cp < 2:
        raise ValueError(f"parallel must be a Parallel with cp >= 2, got {parallel!r}")
    seqs = [check_int("seqs[i]", s) for s in check_sequence("seqs", seqs, example="(16384, 32768, 65536)")]
    import pandas as pd

    rows = []
    for s in seqs:
        kw = dict(batch=batch, seq=s, grad_accum=grad_accum, recompute=recompute,
                  kernel_efficiency=kernel_efficiency, node=node)
        ring = step_time(model, gpu, replace(par, cp_comm="p2p"), **kw)
        gather = step_time(model, gpu, replace(par, cp_comm="all_gather"), **kw)
        fwd, bwd = _cp_attention_s(resolve_model(model), get_gpu(gpu), ring.communication.parallel,
                                   batch=batch, seq=s, grad_accum=grad_accum, recompute=recompute,
                                   dtype="bf16", eff=ring.kernel_efficiency)
        comm = ring.comm_by_group_s["cp"]
        rows.append({"seq": s, "compute_s": ring.compute_s, "attention_s": fwd + bwd, "cp_comm_s": comm,
                     "hidden_s": comm - ring.exposed["cp"], "exposed_s": ring.exposed["cp"],
                     "all_gather_s": gather.exposed["cp"]})
    return pd.DataFrame(rows).set_index("seq")


def document_length_at_mfu(model: Model | str, gpu, parallel: Parallel, *, seq: int, mfu: float,
                           batch: int = 1, shortest: int = 1024, longest: int | None = None,
                           resolution: int = 1024, **step_kw) -> int:
    """The longest token-weighted mean document length (``attention_seq`` of
    :func:`~llmsizing.layouts.step_time`, to within ``resolution`` tokens) in ``[shortest, longest]`` at which
    a step on rows of ``seq`` packed tokens still runs below ``mfu``, its MFU counted over each document (the
    attention FLOPs the kernels run). Found by bisection, which assumes the MFU rises with the mean length
    (longer documents put more of the step in attention, whose FLOPs step_time counts over the whole matrix
    while the kernels run the causal half: chapter 17); the result ``a`` runs below ``mfu`` and the MFU
    reaches ``mfu`` within ``resolution`` tokens above ``a``. ``longest`` defaults to ``seq``; ``batch`` and
    ``step_kw`` go to ``step_time`` (``grad_accum``, ``precision``, ...). ValueError if the MFU already
    reaches ``mfu`` at ``shortest`` or stays below it at ``longest``: no crossing in the range.

    Chapter 17 asks where Llama 3 405B's 128K step (Meta's layout; Dubey et al. 2024, Table 4) meets the 8K
    step's MFU: WLB-LLM (Wang et al. 2025, OSDI, Sec. 2.2) bounds Meta's mean document at
    :func:`~llmsizing.flops.document_length_bound`'s 81,920 tokens, and any mean below the crossing puts the
    128K step below 8K, as Table 4 has it."""
    seq = check_int("seq", seq)
    target = check_fraction("mfu", mfu)
    longest = seq if longest is None else check_int("longest", longest, maximum=seq)
    shortest = check_int("shortest", shortest, maximum=longest)
    resolution = check_int("resolution", resolution, maximum=seq)

    def below(a: int) -> bool:
        return step_time(model, gpu, parallel, batch=batch, seq=seq, attention_seq=a, **step_kw).mfu < target

    if not below(shortest):
        raise ValueError(f"mfu={target:g}: the step already reaches it at shortest={shortest:,} tokens; "
                         f"give a lower shortest or a higher mfu")
    if below(longest):
        raise ValueError(f"mfu={target:g}: the step stays below it up to longest={longest:,} tokens; "
                         f"give a longer longest (at most seq={seq:,}) or a lower mfu")
    lo, hi = shortest, longest
    while hi - lo > resolution:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if below(mid) else (lo, mid)
    return lo



@dataclass(frozen=True)
class DocumentMaskCheck:
    """:func:`document_mask_check`'s answer: a packed step of ``seq`` tokens under document masks.

    ``mean_bound``: the longest token-weighted mean document the statistic allows
    (:func:`~llmsizing.flops.document_length_bound`); ``mfu_per_document``: the step's MFU at that mean, its
    attention counted over each document (the FLOPs the kernels run); ``mfu_half_window``: the same at a
    mean of ``seq // 2``; ``mfu_over_window``: the step at the bound with its FLOPs counted as one document of
    the whole row, a floor (shorter documents run faster and count the same); ``crossing``: the longest mean
    whose per-document MFU stays below the reference (:func:`document_length_at_mfu`, to ``resolution``)."""

    mean_bound: float
    mfu_per_document: float
    mfu_half_window: float
    mfu_over_window: float
    crossing: int


#: WLB-LLM's trace of Meta's 405B 128K job (Wang et al. 2025, OSDI, Sec. 2.2): over 75% of the tokens sit in
#: documents shorter than half the window (chapter 17's bound on the token-weighted mean document).
WLB_LLM_SHORT_DOC_SHARE = 0.75


def document_mask_check(model: Model | str, gpu, parallel: Parallel, *, seq: int, mfu: float, share: float,
                        shorter_than: float, batch: int = 1, resolution: int = 1,
                        **step_kw) -> DocumentMaskCheck:
    """How a step on rows of ``seq`` packed tokens, whose documents put at least ``share`` of the tokens in
    documents shorter than ``shorter_than``, compares with a reference ``mfu`` under the two ways of
    counting its FLOPs (:class:`DocumentMaskCheck`). ``batch`` and ``step_kw`` (``grad_accum``,
    ``precision``, ...) go to :func:`~llmsizing.layouts.step_time`. ValueError for a bad ``share`` or
    ``shorter_than`` (:func:`~llmsizing.flops.document_length_bound`) or when no mean in ``[1,024, seq]``
    crosses ``mfu`` (:func:`document_length_at_mfu`).

    Chapter 17 runs it on Llama 3 405B's 128K step as Meta laid it out (Dubey et al. 2024, Table 4) with
    WLB-LLM's statistic (Wang et al. 2025, OSDI, Sec. 2.2: over 75% of the tokens in documents shorter than
    half the window) and the 8K step's MFU as ``mfu``: counted over the window the step would run far above
    Table 4, counted over each document level with or below the 8K step."""
    seq = check_int("seq", seq)
    bound = document_length_bound(seq, share=share, shorter_than=shorter_than)
    doc, half = (step_time(model, gpu, parallel, batch=batch, seq=seq, attention_seq=int(a), **step_kw).mfu
                 for a in (bound, seq // 2))
    window = doc * training_flops_per_token(model, seq=seq) / training_flops_per_token(model, seq=int(bound))
    cross = document_length_at_mfu(model, gpu, parallel, seq=seq, mfu=mfu, batch=batch,
                                   resolution=resolution, **step_kw)
    return DocumentMaskCheck(mean_bound=bound, mfu_per_document=doc, mfu_half_window=half,
                             mfu_over_window=window, crossing=cross)
