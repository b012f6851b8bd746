"""Which of a step's communication the step waits for, group by group (issue 21's "overlap per group"; taught
in chapter 8): :func:`exposed_by_group`, which :func:`~llmsizing.layouts.step_time` and the planner's pricing
(:mod:`llmsizing.plan_terms`) apply to a :class:`~llmsizing.comm.Communication` against the slowest stage's
compute. Moved out of :mod:`llmsizing.layouts` (which re-exports it, so ``from llmsizing.layouts import
exposed_by_group`` still works) to keep that module under 600 lines."""

from __future__ import annotations

import warnings

import numpy as np

# the windows a data-parallel collective hides behind, and which run once per micro-batch: one table,
# collectives.DP_SLOTS (a "dp" Collective carries its own in slot, from zero_traffic.dp_collectives); still
# importable here
from .collectives import DP_PER_MICRO_BATCH, DP_SLOTS  # noqa: F401
from .moe_time import shared_overlap_exposed_s
from .pipeline_schedule import grad_reduces, zero3_exposed_s
from .zero_traffic import dp_collectives

#: The backward's tensor-parallel collectives that Megatron-LM's column-parallel Linear layers (QKV, MLP up)
#: launch with ``async_op=True`` beside a GEMM of their own backward, by the names
#: :func:`~llmsizing.comm.communication` gives them: ``(window, share of the collective's calls)``. With
#: sequence parallelism the re-gather of the layer's input (2 of the backward's 4 all-gathers a layer; the
#: other 2, the row-parallel layers' gathers of their output gradient, feed the next GEMM and stay exposed)
#: runs beside the dgrad GEMM, and the dgrad's reduce-scatter (both of the backward's) beside the wgrad GEMM;
#: without it the dgrad's all-reduce (both of the backward's) beside the wgrad GEMM.
#: ``LinearWithGradAccumulationAndAsyncCommunication.backward``, megatron/core/tensor_parallel/layers.py
#: (NVIDIA/Megatron-LM cf7efd4f, 2021-08-30, "allreduce overlap with wgrad gemm"; 02bb1f5c, 2022-03-02,
#: "column parallel linear with sequence parallelism"); Transformer Engine's ``_Linear`` backward does the
#: same (transformer_engine/pytorch/module/linear.py: ``gather_along_first_dim(..., async_op=True)``,
#: "Tensor-parallel communication is overlapped with dgrad GEMM"; the dgrad's
#: ``reduce_scatter_along_first_dim`` / ``allreduce`` with ``async_op=True`` before the wgrad GEMM).
TP_BACKWARD_ASYNC = {"SP all-gather (backward)": ("dgrad", 0.5),
                     "SP reduce-scatter (backward)": ("wgrad", 1.0),
                     "TP all-reduce (backward)": ("wgrad", 1.0)}



def tp_backward_async_s(comm) -> tuple:
    """``(dgrad, wgrad)``: the seconds of ``comm``'s tensor-parallel collectives that Megatron-LM's
    column-parallel backward launches beside its dgrad and its wgrad GEMMs (:data:`TP_BACKWARD_ASYNC`'s
    shares, as :func:`exposed_by_group` adds them up; arrays where a collective's time is one). The
    planner's arrays take the windows off per row (:func:`llmsizing.plan_pricing._price`, plan44)."""
    out = {"dgrad": 0.0, "wgrad": 0.0}
    for c in comm.collectives:
        if c.group == "tp" and c.collective in TP_BACKWARD_ASYNC:
            window, share = TP_BACKWARD_ASYNC[c.collective]
            out[window] = out[window] + c.time_s * share
    return out["dgrad"], out["wgrad"]


#: Each window's index in :data:`DP_SLOTS`.
_SLOT_INDEX = {name: i for i, name in enumerate(DP_SLOTS)}

#: Each data-parallel collective :func:`~llmsizing.zero_traffic.dp_collectives` names, by its
#: :data:`DP_SLOTS` index: read off its own rows (every ZeRO stage, resharded or not, pipelined or not), so
#: it cannot drift from them. Deprecated with :func:`dp_slot` (review24c M5): the
#: window is a collective's ``slot``, not its name.
DP_SLOT_OF = {name: _SLOT_INDEX[slot] for zero in range(4) for reshard in (True, False)
              for pipelined in (False, True)
              for name, _, _, _, slot in dp_collectives(zero, 1.0, 2.0, 2.0, 1, reshard, pipelined=pipelined)}


def _slot_of_name(name: str) -> int:
    base = name[:-len(" (experts)")] if name.endswith(" (experts)") else name
    try:
        return DP_SLOT_OF[base]
    except KeyError:
        raise ValueError(f"name={name!r} is no data-parallel collective of zero_traffic.dp_collectives: "
                         f"one of {sorted(DP_SLOT_OF)}, optionally followed by ' (experts)'") from None


def dp_slot(name: str) -> int:
    """Deprecated (review24c M5): the :data:`DP_SLOTS` index of the data-parallel collective called ``name``
    (the experts' rows end in " (experts)"), looked up in :data:`DP_SLOT_OF`; a name it does not hold is
    refused. A data-parallel :class:`~llmsizing.collectives.Collective` carries its window in ``slot``
    (``DP_SLOTS.index(c.slot)``), set from :func:`~llmsizing.zero_traffic.dp_collectives`' rows; read that."""
    warnings.warn("exposure.dp_slot(name) reads a collective's window off its name and goes in the next "
                  "release: read Collective.slot (DP_SLOTS.index(c.slot)), set by "
                  "zero_traffic.dp_collectives",
                  DeprecationWarning, stacklevel=2)
    return _slot_of_name(name)


def _dp_slot_index(c) -> int:
    """The :data:`DP_SLOTS` index of a data-parallel :class:`~llmsizing.collectives.Collective`: its
    ``slot``. One built without a slot (by hand, before review24c M5) is still placed by its name, with a
    DeprecationWarning."""
    if c.slot is not None:
        return _SLOT_INDEX[c.slot]
    warnings.warn(f"data-parallel Collective {c.collective!r} has no slot: its window is read off its name, "
                  "which goes in the next release; give Collective(..., slot=...) (one of "
                  "collectives.DP_SLOTS, as zero_traffic.dp_collectives names it)", DeprecationWarning,
                  stacklevel=3)
    return _slot_of_name(c.collective)


def _pos(x):
    """``max(0, x)`` of a float or, element by element, of an array."""
    return max(0.0, x) if isinstance(x, float) else np.maximum(0.0, x)


def _longer(a, b):
    """The larger of two exposures, floats or, element by element, arrays."""
    return max(a, b) if isinstance(a, float) and isinstance(b, float) else np.maximum(a, b)


def dp_window_terms_s(per_pass, fwd_s, bwd_s, micro_batches, slot1=None) -> tuple:
    """The seconds the step waits for each :data:`DP_SLOTS` slot's data-parallel collectives of ONE link
    (a tuple of five, floats or arrays; :func:`dp_window_exposed_s` takes the same arguments and adds them
    up): the per-micro-batch slots (:data:`DP_PER_MICRO_BATCH`) ``micro_batches x max(0, pass - window)``,
    the others ``max(0, step - window)``, ZeRO-3's backward slot ``slot1`` if given. Kept apart so that
    :func:`exposed_by_group` can take, slot by slot, the longest of several links' (review24b M2)."""
    s0, s1, s2, s3, s4 = per_pass
    m = micro_batches
    if slot1 is None:
        slot1 = m * _pos(s1 - bwd_s)
    return m * _pos(s0 - fwd_s), slot1, _pos(s2 - fwd_s), m * _pos(s3 - bwd_s), _pos(s4 - bwd_s)


def dp_window_exposed_s(per_pass, fwd_s=None, bwd_s=None, micro_batches=None, slot1=None, **old):
    """Seconds the step waits for the data-parallel collectives of ONE link: ``per_pass`` holds, per
    :data:`DP_SLOTS` slot, the seconds of one pass of all that slot's collectives on the link added up (a
    micro-batch's for the per-micro-batch slots, :data:`DP_PER_MICRO_BATCH`, the step's for the others;
    floats, or arrays with one entry per plan), ``fwd_s`` and ``bwd_s`` one micro-batch's forward and
    backward on the slowest stage, ``micro_batches`` the micro-batches per step; ``slot1``, if given, the
    exposed seconds of ZeRO-3's backward slot (under a pipeline:
    :func:`~llmsizing.pipeline_schedule.zero3_exposed_s`).

    Collectives that share a link share its bandwidth while they overlap the same compute, so their times add
    before the window is taken off, once (issue 35). Megatron-Core keeps a mixture of experts' dense and
    expert parameters in separate buffers (``self.buffers``, ``self.expert_parallel_buffers``) and launches
    both buffers' bucket groups together (``start_grad_sync``: ``for bucket_group in self.bucket_groups +
    self.expert_parallel_bucket_groups``; ``start_param_sync`` likewise for the weight all-gathers;
    megatron/core/distributed/distributed_data_parallel.py), each asynchronously on its own process group
    (``_coalescing_manager(communication_group, async_ops=async_op)``, param_and_grad_buffer.py) once the last
    micro-batch's backward has made a bucket's gradients (``register_grad_ready`` counts them only ``if
    self.is_last_microbatch``): two streams on one set of NICs during one backward, not two backwards. The
    sum is exact for the bytes; every call's latency counts in full, as if the two ran one after the other
    (at most the shorter one's latencies too much). The one rule of :func:`exposed_by_group` and the planner
    (:func:`llmsizing.plan_dp._dp_exposed`, one plan per array entry): the sum of
    :func:`dp_window_terms_s`. (``fwd=`` and ``bwd=``, the old keywords, still work and warn.)"""
    if old:                                            # (the names before review24b L8: fwd, bwd)
        fwd_s, bwd_s = _renamed(old, fwd_s, bwd_s)
    if fwd_s is None or bwd_s is None or micro_batches is None:
        raise TypeError("dp_window_exposed_s() needs per_pass, fwd_s, bwd_s and micro_batches")
    t0, t1, t2, t3, t4 = dp_window_terms_s(per_pass, fwd_s, bwd_s, micro_batches, slot1)
    return t0 + t1 + t2 + t3 + t4


def _renamed(old: dict, fwd_s, bwd_s) -> tuple:
    """``(fwd_s, bwd_s)`` from the keywords ``fwd=`` and ``bwd=`` of ``old`` (renamed with their unit), with
    one DeprecationWarning; anything else in ``old`` is refused."""
    unknown = set(old) - {"fwd", "bwd"}
    if unknown:
        raise TypeError(f"dp_window_exposed_s() got an unexpected keyword argument {min(unknown)!r}")
    for name, given in (("fwd", fwd_s), ("bwd", bwd_s)):
        if name in old and given is not None:
            raise TypeError(f"dp_window_exposed_s() got both {name}= and {name}_s=: give {name}_s= only")
    warnings.warn("dp_window_exposed_s(fwd=..., bwd=...) is now fwd_s=..., bwd_s=... (seconds in the name)",
                  DeprecationWarning, stacklevel=3)
    return old.get("fwd", fwd_s), old.get("bwd", bwd_s)


def _window_s(compute_s: float, micro: int, fwd_share: float) -> tuple[float, float]:
    """(forward, backward) seconds of one micro-batch on the slowest stage: the windows communication can
    hide behind."""
    one = compute_s / micro
    return one * fwd_share, one * (1 - fwd_share)


def exposed_by_group(comm, compute_s: float, *, grad_accum: int, fwd_share: float,
                     async_tp: bool = False, cp_attention_s: tuple = (0.0, 0.0),
                     ep_overlap: float = 0.0, shared_expert_s: tuple = (0.0, 0.0),
                     tp_backward_s: tuple | None = None) -> dict[str, float]:
    """Seconds of each group's communication the step waits for, collective by collective (issue 21's "overlap
    per group"; taught in chapter 8):

    * tensor parallelism sits on the critical path (each all-reduce or all-gather feeds the next matmul),
      unless ``async_tp`` (PyTorch's async TP, Megatron's TP overlap) hides it behind the step's compute;
      ``tp_backward_s``, the seconds per step of the column-parallel layers' ``(dgrad, wgrad)`` GEMMs on this
      GPU, hides the backward's collectives that Megatron-LM and Transformer Engine launch beside them
      (:data:`TP_BACKWARD_ASYNC`): the re-gathers behind the dgrad GEMMs, the dgrad's reduction behind the
      wgrad GEMMs, each window taken off once per step (what exceeds it is exposed; ``None``: no such
      overlap, every TP collective exposed);
    * the gradient all-reduce or reduce-scatter of DDP and ZeRO-1 overlaps only the last micro-batch's
      backward (the earlier micro-batches only accumulate); ZeRO-2's per-micro-batch reduce-scatter each
      its own backward;
    * the weights' all-gather after the optimizer step (ZeRO-1/2) overlaps the next step's first forward
      (Megatron-LM's ``--overlap-param-gather``);
    * ZeRO-3's gathers (one call per layer) are prefetched behind each micro-batch's forward and backward,
      its reduce-scatters behind the backward: a micro-batch's calls, latencies included, against its window
      (under a pipeline each unit's own window, :func:`~llmsizing.pipeline_schedule.zero3_exposed_s`);
    * the data-parallel collectives of one window that ride the same link (a mixture of experts' dense
      parameters over ``dp x cp`` and its routed experts' over ``edp``, the rows "(experts)") share it: their
      times add and the window is taken off once per link (:func:`dp_window_exposed_s`, issue 35), while
      collectives on different links (each :class:`~llmsizing.network.Collective`'s ``link``) run side by
      side, each against the whole window, so in each window the step waits for the link that finishes last:
      slot by slot the longest exposure over the links, then the slots added up (review24b M2; Megatron-Core
      launches both buffers' bucket groups together, :func:`dp_window_exposed_s`). Megatron-Core's expert
      grid (etp-ep-edp-pp) keeps the dense grid's (tp-cp-dp-pp) pipeline groups
      (``parallel_state.initialize_model_parallel`` asserts it), so both groups span the same ``tp x cp x
      dp`` ranks and :func:`~llmsizing.comm.communication` puts them on one link; two links come only from
      collectives built by hand;
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
    tp_async = {"dgrad": 0.0, "wgrad": 0.0}     # the backward's collectives beside a GEMM (tp_backward_s)
    dp_links: dict = {}                   # each link's five slots' seconds per step and ZeRO-3's units
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
            window, share = TP_BACKWARD_ASYNC.get(c.collective, (None, 0.0))
            if tp_backward_s is not None and window is not None:
                tp_async[window] += t * share
                t = t * (1.0 - share)
            tp_total += t
        elif c.group == "pp":
            out["pp"] += min(t, 2 * (comm.parallel.pp - 1) * c.one_call_s)
        else:                   # data parallelism: added up per link and slot (DP_SLOTS, dp_window_exposed_s)
            per_step, units = dp_links.setdefault(c.link, ([0.0] * len(DP_SLOTS), [0]))
            k = _dp_slot_index(c)                     # (its window: the collective's slot, M5)
            per_step[k] += t
            if k == 1:                                 # ZeRO-3's backward: its calls per micro-batch (or run)
                units[0] = c.calls // grad_reduces(comm.parallel, m)
    # each link's windows, once; links run side by side, so in each slot the step waits for the longest
    exposed = None
    for per_step, units in dp_links.values():
        zero3 = zero3_exposed_s(comm.parallel, m, units[0], fwd, bwd, per_step[1]) if per_step[1] else 0.0
        per_pass = [t / m if each else t for t, each in zip(per_step, DP_PER_MICRO_BATCH)]
        terms = dp_window_terms_s(per_pass, fwd, bwd, m, slot1=zero3)
        exposed = terms if exposed is None else tuple(map(_longer, exposed, terms))
    if exposed is not None:
        t0, t1, t2, t3, t4 = exposed
        out["dp"] = t0 + t1 + t2 + t3 + t4
    if async_tp:           # all of it behind the step's compute (the forward's collectives too)
        out["tp"] = max(0.0, tp_total + tp_async["dgrad"] + tp_async["wgrad"] - compute_s)
    elif tp_backward_s is not None:
        out["tp"] = tp_total + _pos(tp_async["dgrad"] - tp_backward_s[0]) + \
            _pos(tp_async["wgrad"] - tp_backward_s[1])
    else:
        out["tp"] = tp_total
    return out
