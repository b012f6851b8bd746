"""DualPipe's memory per GPU: :func:`~llmsizing.memory.training_memory` with ``schedule="dualpipe"``.

DeepSeek-V3 report (arXiv:2412.19437, Sec. 3.2.1, Table 2) sets DualPipe against 1F1B and ZB1P on ``PP``
pipeline ranks: the parameters per device are ``2x`` (each rank holds two chunks of the model, one from each
end of the pipeline) and the activations ``PP + 1`` micro-batches' worth (1F1B and ZB1P: ``PP``). The
reference (``deepseek-ai/DualPipe``, ``dualpipe.py``) gives rank ``i`` the stages ``i`` and ``pp - 1 - i``;
before its first backward it runs ``pp - i`` forwards of stage ``i`` and ``i + 1`` of stage ``pp - 1 - i``,
then overlaps each forward with a backward, so it holds at most those many micro-batches of each: ``pp + 1``
in all. These are 1F1B's counts ``min(pp - j, m)`` on stages ``j = i`` and ``j = pp - 1 - i`` for
``m >= pp`` (DualPipe needs ``m >= 2 pp``), so a DualPipe rank is the sum of those two 1F1B stages: their
model states, their kept activations (one layer rebuilt at a time under recomputation, not two), the
embedding's and the head's parts (rank 0 and rank ``pp - 1`` hold both), their optimizer temporaries and
autocast copies. Ranks ``i`` and ``pp - 1 - i`` hold the same two chunks with the same counts, so the first
half of the ranks gives every rank. The report: with a large EP size the two copies do not much increase the
memory (the experts are sharded over ``ep``; the dense parts are the ones doubled). Chapter 18 checks
DeepSeek-V3's own plan with :func:`~llmsizing.deepseek.deepseek_memory`, which counts the same two terms.
"""

from __future__ import annotations

from .act_terms import ActivationMemory
from .footprint import TrainingMemory, step_phases, zero_grad_buffer
from .mtp import add_states
from .parallel import Parallel
from .states import default_overhead_bytes


def check_dualpipe(par: Parallel, grad_accum: int, recompute_layers) -> None:
    """DualPipe's own assertions (``dualpipe.py``: an even number of ranks, an even number of micro-batches
    of at least ``2 pp``) and what this model of it leaves out: interleaving (DualPipe's two chunks are its
    own) and partial recomputation; a :class:`ValueError` naming the parameter."""
    if par.pp < 2 or par.pp % 2:
        raise ValueError(f"schedule='dualpipe' needs an even parallel.pp >= 2 (each rank holds two stages), "
                         f"got pp={par.pp}")
    if grad_accum % 2 or grad_accum < 2 * par.pp:
        raise ValueError(f"schedule='dualpipe' needs an even grad_accum >= 2 pp = {2 * par.pp} (DualPipe's "
                         f"own assertions), got grad_accum={grad_accum}")
    if par.virtual_stages > 1:
        raise ValueError(f"schedule='dualpipe' holds two chunks per rank of its own: parallel.virtual_stages "
                         f"must be 1, got {par.virtual_stages}")
    if recompute_layers is not None:
        raise ValueError("schedule='dualpipe' is not modelled with partial recomputation: give "
                         f"recompute_layers=None, got {recompute_layers!r}")


def add_activations(a: ActivationMemory, b: ActivationMemory, rebuilt_bytes: float) -> ActivationMemory:
    """Two stages' activations on one GPU (DualPipe's two chunks): everything each keeps, one layer rebuilt
    (``rebuilt_bytes``, counted in each stage's ``layers_bytes``) once."""
    bd = {k: a.breakdown.get(k, 0.0) + b.breakdown.get(k, 0.0) for k in {**a.breakdown, **b.breakdown}}
    return ActivationMemory(a.per_layer_bytes, a.layers_bytes + b.layers_bytes - rebuilt_bytes,
                            a.embedding_bytes + b.embedding_bytes, a.logits_bytes + b.logits_bytes, bd,
                            a.layer_count + b.layer_count,
                            (a.recomputed[0] + b.recomputed[0], a.recomputed[1] + b.recomputed[1]),
                            a.offset_bytes + b.offset_bytes)


def dualpipe_ranks(par: Parallel, grad_accum: int, acts: tuple, states: tuple, rebuilt_bytes: float,
                   overhead_bytes: float | None, grad_buffer, common: tuple) -> list[TrainingMemory]:
    """One :class:`~llmsizing.footprint.TrainingMemory` per DualPipe rank ``0 .. pp/2 - 1`` (``stage`` the
    rank, ``in_flight`` its ``pp + 1`` micro-batches), from :func:`~llmsizing.memory.training_memory`'s
    1F1B sides ``acts`` and ``states`` of every stage, ``rebuilt_bytes`` one layer's recomputation (in each
    stage's activations). ``common``: the result's micro-batch, ``seq``, stack, optimizer step."""
    flops, cp_buffers, loss, working, stage_acts, in_flight = acts
    gathered, copies, head_copy, by_stage = states
    (batch, seq, stack, impl), pp, out = common, par.pp, []
    for i in range(pp // 2):
        j = pp - 1 - i                                  # the rank's second chunk: it holds the head
        (sa, ga, oa), (sb, gb, ob) = by_stage[i], by_stage[j]
        st, act = add_states(sa, sb), add_activations(stage_acts[i], stage_acts[j], rebuilt_bytes)
        phases = step_phases(st, act, grad_accum=grad_accum, autocast_bytes=2 * copies, loss_bytes=loss,
                             optimizer_bytes=oa + ob, layer_working_bytes=working, head_grad_bytes=ga + gb,
                             head_copy_bytes=head_copy, gathered_bytes=gathered, cp_buffers_bytes=cp_buffers,
                             grad_buffer=zero_grad_buffer(grad_buffer, par.zero))
        over = (default_overhead_bytes(max(sum(v.values()) for v in phases.values()))
                if overhead_bytes is None else overhead_bytes)
        out.append(TrainingMemory(st, act, over, batch, grad_accum, seq, flops, phases, stack, impl,
                                  autocast_copies_bytes=2 * copies, loss_temporaries_bytes=loss,
                                  optimizer_temporaries_bytes=oa + ob, stage=i,
                                  in_flight=in_flight[i] + in_flight[j], gathered_bytes=gathered,
                                  grad_buffer=grad_buffer))
    return out


def rank_params(on_stage: list) -> list:
    """Each DualPipe rank's parameters (ranks ``0 .. pp/2 - 1``): its two stages'."""
    pp = len(on_stage)
    return [on_stage[i] + on_stage[pp - 1 - i] for i in range(pp // 2)]


__all__ = ["check_dualpipe", "add_activations", "dualpipe_ranks", "rank_params"]
