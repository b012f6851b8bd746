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
* **Attention in a packed row** (:func:`packed_attention_seq`). The trainers pack without letting a rollout
  attend to its neighbours: verl's ``use_remove_padding`` unpads the micro-batch into one row and hands the
  rollouts' boundaries (``cu_seqlens``, from ``flash_attn.bert_padding.unpad_input``) to FlashAttention's
  variable-length kernel (``verl/workers/actor/dp_actor.py``; its Megatron path passes them as
  ``PackedSeqParams``), as OpenRLHF's ``packing_samples`` and NeMo RL's ``sequence_packing`` do. A row of
  sequences ``s_i`` so computes ``sum s_i^2`` of the score matrix (causal: about half), not ``(sum s_i)^2``:
  per token, the attention of one sequence of ``sum s_i^2 / sum s_i`` tokens, which the step is priced at
  (``attention_seq`` of :func:`llmsizing.layouts.step_time`; the GEMMs, the collectives and the memory keep
  the row's tokens). From ``(mean, longest)`` alone the lengths are the maximum-entropy ones with that mean
  on ``[0, longest]`` (:func:`response_second_moment`); measured lengths replace that assumption.
* **Forward passes** (old policy, reference, values): the same micro-batches, forward only
  (:func:`forward_pass_s`): the update's busy time x the forward's FLOP share of its hardware FLOPs (full
  recomputation, as Megatron recipes for long responses and verl's FSDP workers run:
  :func:`llmsizing.flops.training_flops_per_token`), plus each group's exposed communication x the share
  of its calls a forward-only pass runs (:func:`forward_comm_share`: 2/7 of the tensor-parallel calls with
  sequence parallelism, 1/3 of the expert all-to-alls), not the FLOPs' 1/4.
* **Colocated moves** (:func:`colocated_moves_s`), each at the pool's links:

  - weight sync: every GPU rebuilds the full 16-bit weights ``W``, bucket by bucket (slime's
    ``UpdateWeightFromTensor``: "broadcast PP/EP, gather TP, convert HF, send" to the engine on the same GPU
    by CUDA IPC), an all-gather of ``W`` over the pool (:func:`llmsizing.network.collective_time_s`);
  - the engine's sleep and wake: vLLM's sleep mode level 1 "offloads model weights and discards the KV
    cache" (vLLM docs, "Sleep Mode"); waking copies them back: ``2 x W / gen_tp`` per GPU over the GPU's host
    link (:func:`llmsizing.network.host_link_gbps`: PCIe Gen5 x16 on an H100 or MI300X, Gen4 on an A100);
  - with ``offload``, the trainer's model states (weights, gradients, optimizer) to the host and back while
    the engine runs: ``2 x`` their bytes per GPU over the host link. The states, not the trainer's peak: the
    activations are freed when the step ends and nothing moves them. verl's ``offload_fsdp_model_to_cpu``
    moves each FSDP unit's flat parameter and ``offload_fsdp_optimizer`` the optimizer's tensors
    (``verl/utils/fsdp_utils.py``); OpenRLHF's ``offload_deepspeed_states`` asks DeepSpeed ZeRO-3 for its
    optimizer states, its gradient buffer and its fp32 and 16-bit parameters
    (``openrlhf/utils/deepspeed/deepspeed_utils.py``);
  - with ``offload`` and a reference model, the reference's frozen 16-bit weights too, ``2 x`` their bytes
    per GPU (:func:`reference_weight_bytes`): verl's reference worker with ``ref.fsdp_config.param_offload``
    loads its FSDP parameters for its pass and offloads them after (``compute_ref_log_prob``,
    ``verl/workers/fsdp_workers.py``), as OpenRLHF's ``--ref_reward_offload`` does its DeepSpeed engine;
    without ``offload`` they stay on the GPU beside the engine (and the trainer). slime swaps them through
    its host backup instead (:func:`weight_backup_s`, below). NeMo RL swaps them in from host memory for its
    pass (``use_reference_model``: the policy's weights copied down, the reference's up, the policy's back
    up), three copies of the weights where this prices two: a lower bound there.

* **What stays without offload** (:func:`trainer_state_bytes`). A colocated trainer that does not offload
  keeps its model states on the GPU while the engine generates, not its peak: the activations of the last
  micro-batch are freed after its backward, and verl empties the allocator's cache before the engine wakes
  (``aggressive_empty_cache`` in ``rollout_mode``, ``verl/workers/fsdp_workers.py``). The engine's share of
  the memory (vLLM's ``gpu_memory_utilization``) is what those states leave. Which states stay is the
  trainer's: DeepSpeed ZeRO-3 keeps the four kinds OpenRLHF's offload names (optimizer states, the gradient
  buffer, fp32 and 16-bit parameters), and Megatron-Core keeps its gradient buffer, so the 16 bytes per
  parameter hold for them; verl's FSDP actor holds fp32 parameters and frees its gradients at the end of
  ``update_policy`` (``actor_optimizer.zero_grad()``, ``verl/workers/actor/dp_actor.py``; PyTorch sets them
  to ``None``), so 12 of its 16 bytes stay and the count is 4/3 of verl's.
* **Sync as slime runs it** (:func:`bucketed_sync_s`). The bandwidth of the gather is not what sets slime's
  colocated update: every rank gathers the weights into 512 MiB buckets (``--update-weight-buffer-size``,
  ``slime/utils/arguments.py``), and each bucket is converted to Hugging Face names, turned into CUDA IPC
  handles, posted to the engine and loaded, one after the other (``update_weight_from_tensor.py``). Its
  authors measured the whole update of Qwen3-30B-A3B at 7 s after their optimisations (He, Zhu and Li 2025,
  "Efficient RL Training - Optimizing Weight Sync in slime", from 120 s), of which the engine's side is
  20 ms per bucket (their profile: IPC open 3, rebuild 5, load 12 ms). :data:`SLIME_SYNC_BUCKET_S` is that
  7 s over the model's ``ceil(W / 512 MiB)`` buckets; the slime v0.1.0 release note's 48 s for GLM-4.5
  355B-A32B in BF16 is the check it was not derived from.
* **What slime's step timer holds beyond its named phases** (``perf/step_time = train_wait + train``,
  ``slime/observability/train_metric_utils.py``): the moves above outside ``update_weights`` (the trainer's
  ``sleep``/``wake_up`` through torch_memory_saver with a CPU backup, the engines' release and resume), and
  the evaluation run every ``--eval-interval`` steps inside the loop (``train.py``), whose generation
  :func:`llmsizing.rl.rl_run` prices with ``evaluation=`` and spreads over the steps.
* **Weight backups** (:func:`weight_backup_s`). slime keeps the policy's 16-bit weights in host memory
  (``TensorBackuper``, ``slime/backends/megatron_utils/actor.py``): after every update it copies them down
  (``backup("actor")``), and the colocated update reads that copy (``weights_getter``). With a reference
  model it swaps the reference's weights in before the reference log-probabilities and the policy's back
  after (``_switch_model``): two more copies up. A reference is loaded whenever the KL loss is switched
  on, even at coefficient 0 (``with_ref=args.kl_coef != 0 or args.use_kl_loss``,
  ``slime/ray/placement_group.py``).
"""

from __future__ import annotations

import functools
import math
import warnings
from pathlib import Path

from ._validate import check_number
from .comm import CPU_ADAM_BYTES_PER_PARAM, HOST_LINK_GBPS, HOST_MEMORY_GBPS  # noqa: F401 (still importable)
from .flops import forward_flops_per_token, training_flops_per_token
from .layouts import step_time
from .network import collective_time_s, group_link
from .parallel import Parallel
from .serve_engine import weights_bytes_per_gpu
from .zero_traffic import resolve_host_link

#: How the trainer recomputes activations: full, as verl, OpenRLHF and NeMo RL's long-response recipes do.
TRAIN_RECOMPUTE = "full"
#: slime's weight-update bucket (``--update-weight-buffer-size`` default, ``slime/utils/arguments.py``).
SLIME_SYNC_BUCKET_BYTES = 512 * 2**20
#: slime's measured colocated update of Qwen3-30B-A3B in BF16 (He, Zhu and Li 2025, section 4.3), seconds.
SLIME_SYNC_QWEN3_30B_S = 7.0
#: Its BF16 weights, bytes: 30.53e9 parameters x 2 (the catalogue's qwen3-30b-a3b,
#: :func:`llmsizing.serve_engine.weights_bytes_per_gpu` at ``tp=1``).
SLIME_SYNC_QWEN3_30B_BYTES = 61.064245248e9
#: Seconds per bucket of slime's colocated update: the 7 s over ``ceil(W / 512 MiB)`` = 114 buckets.
SLIME_SYNC_BUCKET_S = SLIME_SYNC_QWEN3_30B_S / math.ceil(SLIME_SYNC_QWEN3_30B_BYTES / SLIME_SYNC_BUCKET_BYTES)


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


def packed_attention_seq(lengths) -> float:
    """The length of one sequence whose attention per token equals that of ``lengths`` packed in a row under
    a document mask (module docstring): ``sum s_i^2 / sum s_i``, the token-weighted mean length. Two
    sequences of 1,024 and 3,072 tokens: 2,560, against the row's 4,096. Exact in the full-matrix and the
    causal convention alike (both are linear in the keys); a sliding window, which caps a long sequence's
    keys, makes it an upper bound."""
    vals = [check_number(f"lengths[{i}]", v, allow_equal=False) for i, v in enumerate(lengths)]
    if not vals:
        raise ValueError("lengths must hold at least one sequence length")
    return sum(v * v for v in vals) / sum(vals)


@functools.lru_cache(maxsize=256)
def response_second_moment(mean: float, longest: int) -> float:
    """``E[s^2]`` of response lengths ``s`` on ``[0, longest]`` with mean ``mean`` when nothing else is
    known: the maximum-entropy distribution with that mean on that interval, ``p(s) ~ exp(-lam s)`` (Jaynes
    1957; Cover and Thomas, "Elements of Information Theory", Sec. 12.1), decaying for a mean below
    ``longest / 2`` (many short responses, a tail to the cap), uniform at it, piling up at the cap above it.
    ``mean == longest``: every response at the cap. Solved for ``lam`` by bisection on a 4,096-point grid."""
    import numpy as np

    mean = check_number("mean", mean, allow_equal=False)
    top = check_number("longest", longest, allow_equal=False)
    if mean > top:
        raise ValueError(f"mean={mean:g} is longer than longest={top:g}")
    if mean == top:
        return top * top
    u = (np.arange(4096) + 0.5) / 4096                     # lengths over the cap, midpoints

    def moments(lam):
        w = np.exp(-lam * (u - (0.0 if lam >= 0 else 1.0)))   # shifted: no overflow either way
        return (w @ u) / w.sum(), (w @ (u * u)) / w.sum()

    lo, hi = -2000.0, 2000.0                                # the mean falls as lam grows
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if moments(mid)[0] > mean / top else (lo, mid)
    return float(moments((lo + hi) / 2)[1]) * top * top


#: Published per-step response-length summaries (mean, shortest, longest, cap, share cut at the cap, the
#: slowest rollout's length), each row with its source: what checks :func:`response_second_moment`.
RESPONSE_LENGTHS_CSV = Path(__file__).resolve().parents[2] / "data" / "rl_response_lengths.csv"


def response_length_bounds(mean: float, shortest: float, cap: float,
                           clip_ratio: float) -> tuple[float, float]:
    """The least and the most ``E[s^2]`` that response lengths can have, given their ``mean``, the
    ``shortest``, the ``cap`` and the share ``clip_ratio`` cut at the cap (the four figures verl logs each
    step). The cut share sits at the cap; the others have mean ``m' = (mean - clip_ratio x cap) /
    (1 - clip_ratio)``: all at ``m'`` gives the least, split between ``shortest`` and the cap (a limit: just
    under it) the most. Lengths in tokens, the bounds in tokens squared; verl's ``response_length/*`` metrics
    (``verl/trainer/ppo/metric_utils.py``) are the four figures. Chapter 19."""
    mean = check_number("mean", mean, allow_equal=False)
    cap = check_number("cap", cap, allow_equal=False)
    shortest = check_number("shortest", shortest, maximum=mean)
    c = check_number("clip_ratio", clip_ratio, maximum=1.0, allow_equal=True)
    if mean > cap:
        raise ValueError(f"mean={mean:g} is longer than cap={cap:g}")
    if c == 1.0:
        return cap * cap, cap * cap
    rest = (mean - c * cap) / (1 - c)
    if rest < shortest:
        raise ValueError(f"clip_ratio={c:g} puts more than the mean at the cap: the other responses would "
                         f"average {rest:g} tokens, under the shortest ({shortest:g})")
    q = (rest - shortest) / (cap - shortest) if cap > shortest else 0.0
    lo = c * cap * cap + (1 - c) * rest * rest
    hi = c * cap * cap + (1 - c) * (q * cap * cap + (1 - q) * shortest * shortest)
    return lo, hi


def response_length_check():
    """:func:`response_second_moment`'s assumption against each published step of
    :data:`RESPONSE_LENGTHS_CSV` (chapter 19): the token-weighted mean response ``E[s^2] / mean`` (what the
    packed attention and a draining engine see) from the maximum-entropy lengths on ``[0, cap]``
    (``maxent_tokens``), the least and most the published figures allow (:func:`response_length_bounds`:
    ``low_tokens``, ``high_tokens``, ``inside``), and the maximum-entropy lengths that keep the published
    share at the cap (``clipped_tokens``: that share at the cap, the rest maximum-entropy with the rest's
    mean). ``waits_for_cap``: the rollout that finished last was one at the cap, as the generation's
    ``max(n x mean / b, longest)`` takes the longest to be."""
    import pandas as pd

    d = pd.read_csv(RESPONSE_LENGTHS_CSV)
    rows = []
    for r in d.itertuples():
        m, cap, c = float(r.response_mean), float(r.response_cap), float(r.clip_ratio)
        lo, hi = response_length_bounds(m, r.response_min, cap, c)
        me = response_second_moment(m, cap)
        rest = (m - c * cap) / (1 - c)
        clipped = c * cap * cap + (1 - c) * response_second_moment(rest, cap)
        rows.append({"maxent_tokens": me / m, "low_tokens": lo / m, "high_tokens": hi / m,
                     "clipped_tokens": clipped / m, "inside": lo <= me <= hi,
                     "at_cap": c * r.rollouts, "waits_for_cap": r.slowest_response == cap})
    return pd.concat([d[["run", "rollouts", "response_mean", "response_min", "response_cap", "clip_ratio",
                         "source"]], pd.DataFrame(rows, index=d.index)], axis=1)


def rollout_attention_seq(prompt: int, mean: float, longest: int, lengths=None) -> int:
    """:func:`packed_attention_seq` of rollouts of ``prompt + response`` tokens, rounded: from measured
    ``lengths`` of the responses when given, else from their ``mean`` and ``longest``
    (:func:`response_second_moment`): ``(p^2 + 2 p mean + E[s^2]) / (p + mean)``."""
    p = check_number("prompt", prompt)
    if lengths is not None:
        return round(packed_attention_seq([p + s for s in lengths]))
    return round((p * p + 2 * p * mean + response_second_moment(mean, longest)) / (p + mean))


def forward_comm_share(comm, group: str, recompute: str = TRAIN_RECOMPUTE) -> float:
    """The share of ``group``'s communication seconds in an update (:class:`~llmsizing.comm.Communication`)
    that one forward-only pass runs: the update's forward collectives (named "(forward)" by
    :func:`llmsizing.comm.communication`, which counts the recomputed forward's too) over the passes that
    run them (2 with full recomputation), over all of the group's. Read from the counts Megatron-LM runs:
    with sequence parallelism 4 calls per layer forward, 4 + 2 backward (the all-gathers again for the
    weight gradient), so 4 / (8 + 6) = 2/7 with full recomputation; expert parallelism's dispatch and combine
    2 forward and 2 backward, so 2 / 6 = 1/3; the data-parallel gradient collectives none. 0 for a group
    without communication."""
    mine = [c for c in comm.collectives if c.group == group]
    total = sum(c.time_s for c in mine)
    if total <= 0:
        return 0.0
    passes = 2 if recompute == "full" else 1
    return sum(c.time_s for c in mine if "(forward)" in c.collective) / passes / total


def forward_pass_s(st, flop_share: float, recompute: str = TRAIN_RECOMPUTE) -> float:
    """Seconds of one forward-only pass (old policy, reference, values) over the same micro-batches as the
    update whose :class:`~llmsizing.layouts.StepTime` is ``st``, priced by parts: the busy time (compute and
    bubble) at the forward's share of the hardware FLOPs, and each group's exposed communication at that
    group's forward share (:func:`forward_comm_share`), not at the FLOPs' 1/4."""
    comm = sum(v * forward_comm_share(st.communication, k, recompute)
               for k, v in st.exposed_by_group_s.items())
    return st.busy_s * flop_share + comm


def layout_trainer(m, g, node, par: Parallel, *, tokens: float, rollouts: int, seq: int,
                   packing: bool = True, recompute: str = TRAIN_RECOMPUTE, attention_seq: int | None = None):
    """``((central, fast, slow) update seconds, forward share)`` of one pass over the rollouts on ``par``:
    :func:`~llmsizing.layouts.step_time` of the micro-batches (:func:`micro_batches`), its range from the
    layout's MFU range (``data/intervals.csv``), and a forward-only pass's seconds over the update's
    (:func:`forward_pass_s`: the FLOPs' share of the busy time, each group's forward share of its
    communication). ``recompute``: the update's activation recomputation (``"full"``, or ``"none"`` as
    verl's Megatron engine runs by default). ``attention_seq``: the packed rows' attention length
    (:func:`rollout_attention_seq`; default ``seq``, as padded rows run)."""
    micro = micro_batches(tokens, rollouts, seq, par.dp, packing)
    att = seq if attention_seq is None else attention_seq
    st = step_time(m, g, par, batch=1, seq=seq, grad_accum=micro, recompute=recompute, node=node,
                   attention_seq=att)
    lo, hi = st.mfu_range
    t = st.step_s
    full = training_flops_per_token(m, seq=att, recompute=recompute)
    share = forward_pass_s(st, forward_flops_per_token(m, seq=att) / full, recompute) / t
    return (t, t * st.mfu / hi, t * st.mfu / lo), share


def colocated_moves_s(m, g, node, *, gpus: int, gen_tp: int, offload: bool, state_bytes: float | None = None,
                      host_link_gbps: float | None = None, sync_bucket_s: float = 0.0,
                      train_bytes: float | None = None, reference_bytes: float = 0.0) -> dict[str, float]:
    """Seconds of the colocated pool's moves per step (module docstring): ``sync`` (all-gather of the full
    16-bit weights over the pool, plus :func:`bucketed_sync_s` when ``sync_bucket_s`` is given),
    ``engine_sleep_wake`` (``2 x W / gen_tp`` over the host link), ``trainer_offload`` (``2 x
    state_bytes``, the trainer's model states per GPU, over the host link when ``offload``) and
    ``reference_offload`` (``2 x reference_bytes``, the reference model's weights per GPU,
    :func:`reference_weight_bytes`, likewise; 0 without a reference). ``host_link_gbps`` (one way) None: the
    GPU ``g``'s (:func:`llmsizing.network.host_link_gbps`).

    ``train_bytes`` is the old name of ``state_bytes`` (deprecated: it invited the trainer's peak, which
    counts activations that are never offloaded)."""
    if train_bytes is not None:
        if state_bytes is not None:
            raise TypeError("give state_bytes only (train_bytes is its deprecated name)")
        warnings.warn("colocated_moves_s(train_bytes=) is deprecated: pass state_bytes=, the trainer's model "
                      "states per GPU (weights, gradients, optimizer), not its peak", DeprecationWarning,
                      stacklevel=2)
        state_bytes = train_bytes
    if state_bytes is None:
        raise TypeError("colocated_moves_s needs state_bytes=, the trainer's model states per GPU")
    state_bytes = check_number("state_bytes", state_bytes)
    reference_bytes = check_number("reference_bytes", reference_bytes)
    w = weights_bytes_per_gpu(m, "bf16", tp=1)
    link = group_link(g, node, size=gpus)
    host = resolve_host_link(host_link_gbps, g, caller="colocated_moves_s") * 1e9
    gather = collective_time_s("all-gather", w, gpus, link) if gpus > 1 else 0.0
    return {"sync": gather + bucketed_sync_s(w, sync_bucket_s),
            "engine_sleep_wake": 2 * w / gen_tp / host,
            "trainer_offload": 2 * state_bytes / host if offload else 0.0,
            "reference_offload": 2 * reference_bytes / host if offload else 0.0}


@functools.lru_cache(maxsize=256)
def reference_weight_bytes(m, gpus: int, layout=None) -> float:
    """The frozen reference model's 16-bit weights per GPU (no gradients, no optimizer: it only runs
    forward), sharded as the policy's weights are (:func:`trainer_state_bytes`): without ``layout`` FSDP
    (ZeRO-3) over ``gpus``, ``2 N / gpus``; with a layout ``(tp, cp, ep, pp)`` split by tensor, pipeline and
    expert parallelism only (:func:`layout_parallel`'s distributed optimizer shards the optimizer, not the
    weights), the most loaded GPU's (:func:`llmsizing.gpu_states.stage_params`). What a colocated
    ``offload`` moves to the host and back beside the trainer's states, and what stays on the GPU without
    it (module docstring)."""
    from .memory import stage_params

    par = Parallel(dp=gpus, zero=3) if layout is None else layout_parallel(m, layout, gpus)
    local = max(stage_params(m, par)) / (par.dp if par.zero == 3 else 1)
    return 2 * local


@functools.lru_cache(maxsize=256)
def trainer_state_bytes(m, gpus: int, layout=None, cpu_optimizer: bool = False) -> float:
    """The trainer's model states per GPU (weights, gradients, optimizer): what stays on a GPU between two
    updates, so what a colocated ``offload`` moves to the host and back, and what a colocated trainer
    without it keeps beside the engine (module docstring). Without ``layout``: FSDP (ZeRO-3) over ``gpus``,
    16 bytes per parameter over the pool (also for a mixture of experts timed on :func:`default_layout`,
    which is chosen for its all-to-all, not for memory). With a given layout ``(tp, cp, ep, pp)``:
    :func:`layout_parallel`'s distributed optimizer (ZeRO-1: the weights and gradients split over tensor,
    pipeline and expert parallelism only), its most loaded GPU (:func:`llmsizing.gpu_states.model_states`).
    ``cpu_optimizer`` keeps the optimizer on the host (``offload="optimizer"``). No activations: they are
    freed after the update."""
    from dataclasses import replace

    from .memory import model_states

    par = Parallel(dp=gpus, zero=3) if layout is None else layout_parallel(m, layout, gpus)
    if cpu_optimizer:
        par = replace(par, offload="optimizer")
    return model_states(m, parallel=par).total_bytes


def cpu_adam_s(m, par: Parallel, gpus: int, host_link_gbps: float | None = None,
               host_memory_gbps: float = HOST_MEMORY_GBPS, *, gpu=None) -> float:
    """Seconds a CPU optimizer adds to one update (Megatron's ``--optimizer-cpu-offload``, which slime's and
    Miles' MoE recipes set): the GPU's optimizer partition's 16-bit gradients down and 16-bit weights up the
    host link, and the host's Adam over it at :data:`~llmsizing.zero_traffic.CPU_ADAM_BYTES_PER_PARAM` bytes
    of memory traffic per parameter (the ZeRO-Offload costs of :func:`llmsizing.zero_traffic.offload_time`,
    chapter 7). The partition is the GPU's parameters (:func:`llmsizing.gpu_states.stage_params`) over the
    group that shards them: data parallelism for a dense model; for a mixture of experts, whose parameters are
    mostly experts, the expert-data-parallel group ``gpus / (ep x pp)``. ``host_link_gbps`` (one way) None:
    ``gpu``'s (:func:`llmsizing.network.host_link_gbps`); neither: PCIe Gen4 x16 with a DeprecationWarning."""
    from .memory import stage_params

    link = resolve_host_link(host_link_gbps, gpu, caller="cpu_adam_s")

    local = max(stage_params(m, par))
    shards = max(1, gpus // (par.ep * par.pp)) if m.is_moe else par.dp
    part = local / shards
    return 2 * part * 2 / (link * 1e9) + part * CPU_ADAM_BYTES_PER_PARAM / (host_memory_gbps * 1e9)


def weight_backup_s(m, par: Parallel, *, reference: bool,
                    host_link_gbps: float | None = None, gpu=None) -> float:
    """Seconds per step of slime's host copies of the weights (module docstring): the GPU's 16-bit parameters
    (:func:`llmsizing.gpu_states.stage_params`, largest stage) once down after the update, and with a
    ``reference`` twice more up (the reference in, the policy back), over the host link (``host_link_gbps``
    one way; None: ``gpu``'s, :func:`llmsizing.network.host_link_gbps`)."""
    from .memory import stage_params

    link = resolve_host_link(host_link_gbps, gpu, caller="weight_backup_s")

    copies = 3 if reference else 1
    return copies * 2 * max(stage_params(m, par)) / (link * 1e9)


def bucketed_sync_s(weights_bytes: float, bucket_s: float,
                    bucket_bytes: float = SLIME_SYNC_BUCKET_BYTES) -> float:
    """Seconds of the per-bucket work of a bucketed weight update (module docstring): ``ceil(W /
    bucket_bytes) x bucket_s``; 0 when ``bucket_s`` is 0."""
    if bucket_s <= 0:
        return 0.0
    return math.ceil(weights_bytes / bucket_bytes) * bucket_s


__all__ = ["TRAIN_RECOMPUTE", "SLIME_SYNC_BUCKET_BYTES", "SLIME_SYNC_QWEN3_30B_S",
           "SLIME_SYNC_QWEN3_30B_BYTES", "SLIME_SYNC_BUCKET_S", "default_layout", "layout_parallel",
           "micro_batches", "packed_attention_seq", "response_second_moment", "rollout_attention_seq",
           "layout_trainer", "forward_comm_share", "forward_pass_s", "colocated_moves_s",
           "trainer_state_bytes", "reference_weight_bytes",
           "cpu_adam_s", "bucketed_sync_s", "weight_backup_s", "RESPONSE_LENGTHS_CSV",
           "response_length_bounds", "response_length_check"]
