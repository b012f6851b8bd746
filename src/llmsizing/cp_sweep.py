"""Context parallelism's ring against the attention it hides behind, swept over sequence lengths (the "Long
context" chapter): :func:`cp_overlap_sweep`, built on :func:`~llmsizing.layouts.step_time`. It moved here from
:mod:`llmsizing.layouts` (issue 34), which still forwards it with a DeprecationWarning.
"""

from __future__ import annotations

from .catalog import get_gpu, resolve_model
from ._validate import check_int
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
