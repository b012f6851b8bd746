"""The trainer's side of an RL step on a layout, and the colocated pool's moves (chapter 19).

:mod:`llmsizing.rl` prices the update and the forward passes of an RL step. With a trainer layout (NeMo RL
publishes each benchmark's ``[TP, CP, EP, PP]``; a mixture of experts gets :func:`default_layout` when none
is given) they are timed on that layout's own step (:func:`llmsizing.layouts.step_time`: kernel efficiency,
pipeline bubble, exposed tensor-, context- and expert-parallel communication), not at the dense-calibrated
MFU of whole pre-training runs, which a model of 3B active parameters in 30B never reaches (chapter 18).

* **Packing.** The rollouts are packed into micro-batches of one ``seq``-token row each (NeMo RL's
  ``sequence_packing``, verl's ``use_remove_padding`` with ``use_dynamic_bsz``): a data-parallel rank runs
  ``ceil(tokens / (seq x dp))`` micro-batches. Padding each rollout to ``seq`` instead (``packing=False``)
  runs ``rollouts / dp`` rows of ``seq`` tokens, the padding included.
* **Forward passes** (old policy, reference, values): the same micro-batches, forward only, so the update's
  step time x the forward's FLOP share of the update's hardware FLOPs (full recomputation, as the trainers
  run long responses: :func:`llmsizing.flops.training_flops_per_token`).
* **Colocated moves** (:func:`colocated_moves_s`), each at the pool's links:

  - weight sync: every GPU rebuilds the full 16-bit weights ``W``, bucket by bucket (slime's
    ``UpdateWeightFromTensor``: "broadcast PP/EP, gather TP, convert HF, send" to the engine on the same GPU
    by CUDA IPC), an all-gather of ``W`` over the pool (:func:`llmsizing.network.collective_time_s`);
  - the engine's sleep and wake: vLLM's sleep mode level 1 "offloads model weights and discards the KV
    cache" (vLLM docs, "Sleep Mode"); waking copies them back: ``2 x W / gen_tp`` per GPU over the host link
    (:data:`llmsizing.comm.HOST_LINK_GBPS`);
  - with ``offload``, the trainer's states (weights, gradients, optimizer) to the host and back while the
    engine runs (verl's ``param_offload``/``optimizer_offload``, slime's ``offload_train``): ``2 x`` the
    trainer's bytes per GPU over the host link.
"""

from __future__ import annotations

import math

from .comm import HOST_LINK_GBPS
from .flops import forward_flops_per_token, training_flops_per_token
from .layouts import step_time
from .network import collective_time_s, group_link
from .parallel import Parallel
from .serve_engine import weights_bytes_per_gpu

#: How the trainer recomputes activations: full, as verl, OpenRLHF and NeMo RL's long-response recipes do.
TRAIN_RECOMPUTE = "full"


def default_layout(m, gpus: int, gpus_per_node: int) -> tuple[int, int, int, int] | None:
    """``(tp, cp, ep, pp)`` for a mixture of experts without a published layout: expert parallelism over the
    largest group within a node (and the pool) that divides the expert count, so that the all-to-all stays on
    the scale-up link, as NeMo RL's Qwen3-30B-A3B recipes on DGX-H100 use EP8; the rest data parallel. A pool
    that is not a multiple of that group is refused (ValueError): a smaller group would price a trainer whose
    every GPU holds all the experts. ``None`` for a dense model (its trainer keeps the calibrated MFU)."""
    if not m.is_moe:
        return None
    ep = max(d for d in range(1, min(gpus, gpus_per_node) + 1) if m.experts % d == 0)
    if gpus % ep:
        raise ValueError(f"a trainer pool of {gpus} GPUs is not a multiple of the expert-parallel group "
                         f"({ep}); give train_layout= or another pool size")
    return (1, 1, ep, 1)


def layout_parallel(m, layout, gpus: int) -> Parallel:
    """A :class:`~llmsizing.parallel.Parallel` of ``layout = (tp, cp, ep, pp)`` on ``gpus`` GPUs: data
    parallelism takes what is left (``gpus // (tp x cp x pp)``, at least 1), sequence parallelism with tensor
    parallelism, the distributed optimizer (ZeRO-1), as Megatron-Core's recipes run."""
    tp, cp, ep, pp = (int(x) for x in layout)
    dp = gpus // (tp * cp * pp)
    if dp < 1:
        raise ValueError(f"train_layout={tuple(layout)} needs tp x cp x pp = {tp * cp * pp} GPUs; the "
                         f"trainer has {gpus}")
    return Parallel(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep if m.is_moe else 1, sp=tp > 1, zero=1)


def micro_batches(tokens: float, rollouts: int, seq: int, dp: int, packing: bool = True) -> int:
    """Micro-batches of one ``seq``-token row per data-parallel rank: packed ``ceil(tokens / (seq x dp))``,
    padded ``ceil(rollouts / dp)``."""
    return math.ceil(tokens / (seq * dp)) if packing else math.ceil(rollouts / dp)


def layout_trainer(m, g, node, par: Parallel, *, tokens: float, rollouts: int, seq: int,
                   packing: bool = True):
    """``((central, fast, slow) update seconds, forward share)`` of one pass over the rollouts on ``par``:
    :func:`~llmsizing.layouts.step_time` of the micro-batches (:func:`micro_batches`), its range from the
    layout's MFU range (``data/intervals.csv``), and the forward's share of the update's hardware FLOPs."""
    micro = micro_batches(tokens, rollouts, seq, par.dp, packing)
    st = step_time(m, g, par, batch=1, seq=seq, grad_accum=micro, recompute=TRAIN_RECOMPUTE, node=node)
    lo, hi = st.mfu_range
    t = st.step_s
    full = training_flops_per_token(m, seq=seq, recompute=TRAIN_RECOMPUTE)
    share = forward_flops_per_token(m, seq=seq) / full
    return (t, t * st.mfu / hi, t * st.mfu / lo), share


def colocated_moves_s(m, g, node, *, gpus: int, gen_tp: int, offload: bool, train_bytes: float,
                      host_link_gbps: float = HOST_LINK_GBPS) -> dict[str, float]:
    """Seconds of the colocated pool's moves per step (module docstring): ``sync`` (all-gather of the full
    16-bit weights over the pool), ``engine_sleep_wake`` (``2 x W / gen_tp`` over the host link) and
    ``trainer_offload`` (``2 x train_bytes`` over the host link when ``offload``)."""
    w = weights_bytes_per_gpu(m, "bf16", tp=1)
    link = group_link(g, node, size=gpus)
    host = host_link_gbps * 1e9
    return {"sync": collective_time_s("all-gather", w, gpus, link) if gpus > 1 else 0.0,
            "engine_sleep_wake": 2 * w / gen_tp / host,
            "trainer_offload": 2 * train_bytes / host if offload else 0.0}


__all__ = ["TRAIN_RECOMPUTE", "default_layout", "layout_parallel", "micro_batches", "layout_trainer",
           "colocated_moves_s"]
