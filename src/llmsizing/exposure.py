"""Which of a step's communication the step waits for, group by group (issue 21's "overlap per group"; taught
in chapter 8): :func:`exposed_by_group`, which :func:`~llmsizing.layouts.step_time` and the planner's pricing
(:mod:`llmsizing.plan_terms`) apply to a :class:`~llmsizing.comm.Communication` against the slowest stage's
compute. Moved out of :mod:`llmsizing.layouts` (which re-exports it, so ``from llmsizing.layouts import
exposed_by_group`` still works) to keep that module under 600 lines."""

from __future__ import annotations

from .moe_time import shared_overlap_exposed_s
from .pipeline_schedule import grad_reduces, zero3_exposed_s


def _window_s(compute_s: float, micro: int, fwd_share: float) -> tuple[float, float]:
    """(forward, backward) seconds of one micro-batch on the slowest stage: the windows communication can
    hide behind."""
    one = compute_s / micro
    return one * fwd_share, one * (1 - fwd_share)


def exposed_by_group(comm, compute_s: float, *, grad_accum: int, fwd_share: float,
                     async_tp: bool = False, cp_attention_s: tuple = (0.0, 0.0),
                     ep_overlap: float = 0.0, shared_expert_s: tuple = (0.0, 0.0)) -> dict[str, float]:
    """Seconds of each group's communication the step waits for, collective by collective (issue 21's "overlap
    per group"; taught in chapter 8):

    * tensor parallelism sits on the critical path (each all-reduce or all-gather feeds the next matmul),
      unless ``async_tp`` (PyTorch's async TP, Megatron's TP overlap) hides it behind the step's compute;
    * the gradient all-reduce or reduce-scatter of DDP and ZeRO-1 overlaps only the last micro-batch's
      backward (the earlier micro-batches only accumulate); ZeRO-2's per-micro-batch reduce-scatter each
      its own backward;
    * the weights' all-gather after the optimizer step (ZeRO-1/2) overlaps the next step's first forward
      (Megatron-LM's ``--overlap-param-gather``);
    * ZeRO-3's gathers (one call per layer) are prefetched behind each micro-batch's forward and backward,
      its reduce-scatters behind the backward: a micro-batch's calls, latencies included, against its window
      (under a pipeline each unit's own window, :func:`~llmsizing.pipeline_schedule.zero3_exposed_s`);
    * pipeline sends hide in 1F1B's steady state; the fill and drain wait for ``2 (pp - 1)`` of them;
    * nothing hides in the pipeline bubble (the stages are idle because they wait for each other);
    * context parallelism (a ``"cp"`` entry, only when ``cp > 1``): the ring's hops (``cp_comm="p2p"``) run
      while the attention computes the block already received (Transformer Engine's ``AttnFuncWithCPAndKVP2P``
      overlaps each step's compute with the next step's send), so the forward hops hide behind
      ``(cp - 1) / cp`` of the forward's attention and the backward hops behind as much of the backward's:
      ``cp_attention_s`` is this GPU's ``(forward, backward)`` attention-core seconds per step, and only what
      exceeds them is exposed. The all-gather and reduce-scatter of ``cp_comm="all_gather"`` are exposed in
      full (TE's ``AttnFuncWithCPAndKVAllGather``: "KV all-gather between CP ranks is exposed"; Llama 3
      accepts it because at 128K the gather is small next to the attention it feeds, Dubey et al. 2024, Sec.
      3.3.2). So are Ulysses' all-to-alls (``cp_comm="a2a"``): the attention waits for its heads.
    * expert parallelism (an ``"ep"`` entry, only when ``ep > 1``): the all-to-alls sit between the router and
      the experts, so they are exposed, less what the shared experts beside them hide (``shared_expert_s``:
      :func:`~llmsizing.moe_time.shared_overlap_exposed_s`), less the share ``ep_overlap`` that DeepSeek-V3's
      DualPipe hides by running one micro-batch's forward chunk against another's backward."""
    m = grad_accum
    fwd, bwd = _window_s(compute_s, m, fwd_share)
    out = {"dp": 0.0, "tp": 0.0, "pp": 0.0}
    if comm.parallel.cp > 1:
        out["cp"] = 0.0
        cp_share = (comm.parallel.cp - 1) / comm.parallel.cp
    if comm.parallel.ep > 1:
        out["ep"] = 0.0
    tp_total = 0.0
    zero3_bwd = 0.0
    for c in comm.collectives:
        t = c.time_s
        if c.group == "ep":                                    # ---- expert parallelism (llmsizing.moe)
            out["ep"] += shared_overlap_exposed_s(c, shared_expert_s) * (1.0 - ep_overlap)
        elif c.group == "cp":
            if "ring" in c.collective:            # hidden behind this direction's attention blocks
                window = cp_attention_s[0 if "(forward)" in c.collective else 1] * cp_share
                out["cp"] += max(0.0, t - window) if isinstance(t, float) else (t - window).clip(0.0)
            else:
                out["cp"] += t
        elif c.group == "tp":
            tp_total += t
        elif c.group == "pp":
            out["pp"] += min(t, 2 * (comm.parallel.pp - 1) * c.one_call_s)
        elif "all-gather (forward)" in c.collective:           # ZeRO-3, per micro-batch (one call a layer)
            out["dp"] += m * max(0.0, t / m - fwd)
        elif c.collective.startswith("ZeRO-3"):        # backward gather and gradient reduce-scatter (or runs)
            zero3_bwd, units = zero3_bwd + t, c.calls // grad_reduces(comm.parallel, m)
        elif "weight all-gather" in c.collective:              # ZeRO-1/2 after the optimizer step
            out["dp"] += max(0.0, t - fwd)
        elif c.collective.startswith("ZeRO-2 gradient"):       # ZeRO-2's reduce-scatter, every micro-batch
            out["dp"] += m * max(0.0, t / m - bwd)
        else:                                                  # DDP / ZeRO-1 gradients: the last backward
            out["dp"] += max(0.0, t - bwd)
    if zero3_bwd:
        out["dp"] += zero3_exposed_s(comm.parallel, m, units, fwd, bwd, zero3_bwd)
    out["tp"] = max(0.0, tp_total - compute_s) if async_tp else tp_total
    return out
