"""What ZeRO's data parallelism moves per training step (chapter 7): the collectives of DDP and ZeRO-1/2/3
among the data-parallel GPUs, split into gradient buckets or FSDP units, and ZeRO-Offload's transfers to and
from the host with the host's Adam step.

Sources: Rajbhandari et al. 2020 (ZeRO), Sec. 7 and Fig. 1: which stage reduce-scatters the gradients and
all-gathers the weights, and how often; Megatron-Core's ``DistributedDataParallelConfig.bucket_size`` (core
v0.7) for DDP's and the distributed optimizer's buckets; torchtitan's ``apply_fsdp`` (one FSDP unit per
transformer block) for ZeRO-3's calls; Ren et al. 2021 (ZeRO-Offload) for the host's side. Chapter 9 counts
the calls on FSDP2. :func:`~llmsizing.comm.communication` prices these collectives on each group's link and
the planner reuses them (:mod:`llmsizing.plan_terms`). Moved out of :mod:`llmsizing.comm` (which re-exports
every name, so ``from llmsizing.comm import dp_schedule`` still works) to keep that module under 600 lines;
ZeRO-3's gathered unit (:func:`zero3_gathered_bytes`, beside FSDP's root) likewise out of
:mod:`llmsizing.memory`, which re-exports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._validate import check_int, check_number
from .catalog import MIN_GPU_SPEED, resolve_model
from .collectives import DP_PER_MICRO_BATCH, DP_SLOTS  # noqa: F401 (the windows dp_collectives names)
from .gpu_states import stage_params
from .grad_buckets import (DP_BUCKET_MIN_PARAMS, DP_BUCKET_PARAMS_PER_RANK,  # noqa: F401 (re-exported)
                           MEGATRON_PARAM_ALIGN, bucket_ends, dp_bucket_params, megatron_bucket_assignment,
                           megatron_buckets, megatron_calls_of)
from .model import Model
from .network import host_link_gbps as gpu_host_link_gbps
from .parallel import Parallel, layers_per_stage, resolve_parallel
from .precision import DTYPE_BYTES, RECIPES, check_recipe
from .states import _layer_params, edge_params

#: Layers per ZeRO-3 unit: one all-gather (forward, and again in the backward) and one gradient reduce-scatter
#: per unit and micro-batch. PyTorch FSDP gathers one FSDP unit at a time, and the recipes wrap each
#: transformer block as its own unit (``fully_shard`` on every block, then on the root): one call per layer.
#: DeepSpeed's ZeRO-3 issues its own calls (per module, prefetched up to ``stage3_prefetch_bucket_size``; the
#: gradients reduced per ``reduce_bucket_size``): not modelled.
FSDP_UNIT_LAYERS = 1

#: FSDP units besides the blocks': the root (``fully_shard`` on the whole model) takes what no block holds,
#: the embedding, the final norm and the LM head, as one more unit, so one more all-gather and reduce-scatter
#: per pass: ``layers + 1`` calls. Measured on torch 2.13's ``fully_shard`` (gloo, CPU, a 1-4 layer HF Llama:
#: ``data/fsdp_unit_calls.csv``, ``tools/measure/fsdp_units.py``; ``tests/test_fsdp_unit_calls.py``):
#: ``reshard_after_forward=True`` on every unit (what the library prices with
#: :attr:`~llmsizing.parallel.Parallel.reshard_after_forward`) gathers ``layers + 1`` units in the forward and
#: again in the backward and reduce-scatters ``layers + 1``; ``False`` gathers once. torch's default (None) is
#: False for the root ("True for non-root modules and False for root modules", ``fully_shard``'s docstring),
#: so its backward gathers ``layers`` units and not the root's weights (:func:`fsdp_root_params`: 13% of
#: Llama-3-8B's): priced as such by ``Parallel(reshard_after_forward=None)`` since session 36. torchtitan's
#: ``apply_fsdp`` wraps the embedding and ``[norm, output]`` apart: ``layers + 2`` forward all-gathers and
#: reduce-scatters (one over the price, 3% of Llama-3-8B's 33), ``layers + 1`` backward all-gathers (the head
#: kept). Under a pipeline a stage counts no root (``dp_calls(pipelined=True)``): exact for a middle stage,
#: whose root holds nothing, one call under for the stages that hold the embedding or the head. Until session
#: 34 the root was folded into the blocks' units (``layers`` calls: 32 for Llama-3-8B, 33 measured).
FSDP_ROOT_UNITS = 1

#: PyTorch ``DistributedDataParallel``'s default gradient buckets, in bytes: ``bucket_cap_mb=25`` (25 MiB,
#: ``kDefaultBucketBytesCap`` in ``torch/csrc/distributed/c10d/reducer.hpp``), and a first bucket of 1 MiB
#: (``kDefaultFirstBucketBytes``, ``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``) so that the first
#: all-reduce starts early in the backward pass.
TORCH_DDP_BUCKET_BYTES = 25 * 2**20
TORCH_DDP_FIRST_BUCKET_BYTES = 2**20


def torch_ddp_bucket_assignment(model: Model | str, *, precision: str = "bf16-mixed",
                                bucket_cap_mb: float | None = None) -> list[list[str]]:
    """The gradient buckets of PyTorch's ``DistributedDataParallel`` for ``model``, in the order they are
    all-reduced, each the names of its tensors (``layers.3.down_proj.weight``, ...): what
    :func:`torch_ddp_buckets` counts.

    The order is the reverse of the library's per-layer order (the LM head, the final norm, then each block
    from the last: down, up, gate, its MLP norm, o, v, k, q, its attention norm; the embedding last), which is
    the order the gradients become ready. DDP (torch 2.13) puts every gradient in one bucket for the first
    step and then rebuilds its buckets in that order (``Reducer::rebuild_buckets``); measured on a 4-layer HF
    Llama with gloo (``data/ddp_bucket_order.csv``, ``tools/measure/ddp_buckets.py``;
    ``tests/test_ddp_bucket_order.py``), bucket for bucket. A bucket closes once it holds at least the cap:
    the first at 1 MiB when ``bucket_cap_mb`` is left at its default (None: 25 MiB,
    :data:`TORCH_DDP_BUCKET_BYTES`, :data:`TORCH_DDP_FIRST_BUCKET_BYTES`), at the cap itself when one is
    given (``_BucketCapacityConfig.create`` in ``torch/nn/parallel/distributed.py``), as measured.
    Chapter 7."""
    model = resolve_model(model, moe=True)
    check_recipe("precision", precision)
    if bucket_cap_mb is None:
        cap, limit = TORCH_DDP_BUCKET_BYTES, TORCH_DDP_FIRST_BUCKET_BYTES
    else:
        cap = limit = check_number("bucket_cap_mb", bucket_cap_mb, minimum=1e-3) * 2**20
    grad_b = DTYPE_BYTES[RECIPES[precision].grads]
    t = model.tensors()
    first = next((i for i, e in enumerate(t) if e[1].startswith("layers.")), len(t))
    block = [e for e in t if e[1].startswith("layers.")]
    forward = [(n, math.prod(s)) for _, n, s, _ in t[:first]]
    for i in range(model.layers):
        forward += [(f"layers.{i}.{n[len('layers.'):]}", math.prod(s)) for _, n, s, k in block if i < k]
    forward += [(n, math.prod(s)) for _, n, s, _ in t[first:] if not n.startswith("layers.")]
    names = [n for n, _ in reversed(forward)]
    ends = bucket_ends(np.array([n * grad_b for _, n in reversed(forward)], dtype=float), cap, first=limit)
    return [names[a:b] for a, b in zip([0, *ends[:-1]], ends)]


def torch_ddp_buckets(model: Model | str, *, precision: str = "bf16-mixed",
                      bucket_cap_mb: float | None = None) -> int:
    """Gradient buckets, so all-reduce calls per step, of PyTorch's ``DistributedDataParallel`` for
    ``model``'s gradients in the recipe's gradient dtype, with ``bucket_cap_mb`` MiB buckets (None: DDP's
    default, 25 MiB after a first bucket of 1 MiB; a value given caps the first bucket too, as torch does).

    PyTorch fills its buckets by bytes, tensor by tensor, in the order the backward pass produces the
    gradients, and closes a bucket as soon as it holds at least the cap
    (``_compute_bucket_assignment_by_size`` in ``torch/csrc/distributed/c10d/reducer.cpp``;
    :func:`torch_ddp_bucket_assignment` gives the buckets, measured bucket for bucket on torch 2.13). A tensor
    larger than the cap closes a bucket of its own, so a model of large matrices has fewer buckets than
    ``bytes / cap``. This counts the buckets DDP rebuilds after its first step, which all-reduces every
    gradient in one bucket. Until session 34 a given cap kept a 1 MiB first bucket (the default's rule) and
    the default was written ``25.0``: one bucket more for a model whose first gradients are small (measured:
    3 buckets, not 4, for the tied 4-layer Llama at 4 MiB). Megatron-Core's DDP buckets by parameters instead
    (:func:`dp_bucket_params`), and that is the count :func:`~llmsizing.comm.communication` prices.
    Chapter 7."""
    return len(torch_ddp_bucket_assignment(model, precision=precision, bucket_cap_mb=bucket_cap_mb))


def fsdp_root_params(model: Model | str, tp: int = 1) -> float:
    """Parameters of FSDP's root unit on one tensor-parallel rank: what no transformer block holds, the
    embedding, the final norm and an untied LM head (:func:`~llmsizing.states.edge_params` of one pipeline
    stage, the pieces the model states already count). ``fully_shard`` on the whole model after each block
    takes them as one unit (:data:`FSDP_ROOT_UNITS`); torch's default keeps it gathered from the forward to
    the backward (``Parallel(reshard_after_forward=None)``): ``fully_shard`` gives every unit True when the
    argument is None and remembers it (``auto_reshard_after_forward``, ``_fully_shard.py``), and
    ``FSDPState._lazy_init`` then sets the root's ``post_forward_mesh_info = None`` ("For the root, do not
    reshard after forward", ``_fsdp_state.py``), which ``FSDPParamGroup._reshard_after_forward`` reads as
    False (``_fsdp_param_group.py``; torch/distributed/fsdp/_fully_shard/, pytorch main as stored, torch
    2.13 as measured). Llama-3-8B: 2 x 128,256 x 4,096 + 4,096 = 1,050,677,248 (13.1% of its 8.03B).
    Chapters 7 and 9."""
    model = resolve_model(model, moe=True)
    return sum(edge_params(model, check_int("tp", tp), 1).values())


def dp_calls(zero: int, on_rank: float, *, layers: int | None = None, bucket_params: float | None = None,
             pipelined: bool = False, buckets: int | None = None) -> int:
    """Calls of each data-parallel collective per pass (per micro-batch for ZeRO-3's, per step or micro-batch
    for the others, :func:`dp_schedule`): ZeRO-3, one per FSDP unit, ``ceil(layers / FSDP_UNIT_LAYERS)`` and
    the root's (:data:`FSDP_ROOT_UNITS`: ``layers + 1``, as measured on FSDP2; not under a pipeline,
    ``pipelined``, where a middle stage's root holds nothing; ``layers=None``, one call per pass, the old
    schedule);
    DDP and ZeRO-1/2, one per gradient bucket: ``buckets`` when given (Megatron-Core's own layout,
    :func:`megatron_buckets`, what :func:`~llmsizing.comm.communication` and the planner pass), else
    ``ceil(on_rank / bucket_params)`` (one call when ``bucket_params`` is None), the rule until session 37: an
    upper bound, as Megatron-Core closes a bucket only at a parameter's end past ``bucket_params`` (Llama-3-8B
    on 8 GPUs: 201 against 98)."""
    if layers is None:               # the old schedule: one call per pass
        layers, pipelined = 1, True
    layers = check_int("layers", layers)
    if zero == 3:
        return math.ceil(layers / FSDP_UNIT_LAYERS) + (0 if pipelined else FSDP_ROOT_UNITS)
    if buckets is not None:
        return check_int("buckets", buckets)
    if bucket_params is None:
        return 1
    bucket = check_number("bucket_params", bucket_params, minimum=1.0)
    return max(1, math.ceil(on_rank / bucket))


def dp_collectives(zero: int, on_rank: float, weight_bytes: float, grad_bytes: float, grad_accum: int,
                   reshard_after_forward: bool | None = True, *, layers: int | None = None,
                   pipelined: bool = False, bucket_params: float | None = None,
                   grad_reduces: int | None = None, root_params: float | None = None,
                   buckets: int | None = None) -> list[tuple]:
    """The data-parallel collectives of one step for ``on_rank`` parameters on a GPU, as ``(name, kind,
    message bytes of one call, calls, slot)``, ``slot`` the window of
    :data:`~llmsizing.collectives.DP_SLOTS` each hides behind (:func:`~llmsizing.comm.communication`'s
    rules, ZeRO, Rajbhandari et al. 2020, Sec. 7): DDP's gradient all-reduce and ZeRO-1's gradient
    reduce-scatter once per step behind the last backward (``"gradients"``), and ZeRO-1's weight
    all-gather behind the next step's first forward (``"weight all-gather"``); ZeRO-2's reduce-scatter
    every micro-batch behind its backward (``"ZeRO-2 reduce-scatter"``); ZeRO-3's forward weight
    all-gathers behind each forward and (resharded after the forward) its backward all-gathers and
    gradient reduce-scatters behind each backward (every micro-batch; ``grad_reduces`` times per step if
    given: ``grad_reduce="chunk_run"``). Each is split into :func:`dp_calls` calls: ZeRO-3 gathers and
    reduce-scatters one FSDP unit at a time (:data:`FSDP_UNIT_LAYERS`, :data:`FSDP_ROOT_UNITS`), the others
    one bucket at a time (``buckets``, Megatron-Core's layout, :func:`megatron_buckets`; else one per
    ``bucket_params``, :func:`dp_bucket_params`; one call when both are None, the old rule), so
    each call pays its own latency. :func:`~llmsizing.comm.communication` prices them on the group's link
    and gives each :class:`~llmsizing.collectives.Collective` its ``slot`` (the planner reuses them).
    ``pipelined`` (``pp > 1``) ZeRO-3 without resharding gathers the weights once per step, not per
    micro-batch, behind the step's first forward as ZeRO-1/2's gather
    (:attr:`~llmsizing.parallel.Parallel.reshard_after_forward` says why). The window is set here, with
    the collective, so that no reader finds it from the name (review24c M5). ``reshard_after_forward=None``
    is torch's default (every block resharded, the root kept): the backward gathers all units but the root's,
    ``root_params`` of the ``on_rank`` parameters (:func:`fsdp_root_params`; measured,
    :data:`FSDP_ROOT_UNITS`); with no root counted (``pipelined``, or ``layers=None``) it is ``True``."""
    k = dp_calls(zero, on_rank, layers=layers, bucket_params=bucket_params, pipelined=pipelined,
                 buckets=buckets)
    w, g, m = on_rank * weight_bytes / k, on_rank * grad_bytes / k, grad_accum
    back_k, back_w = k, w                   # the backward's gathers: every unit, or all but the kept root
    if reshard_after_forward is None:
        if zero == 3 and not pipelined and layers is not None:
            if root_params is None:
                raise ValueError("root_params (the root unit's parameters on this GPU, fsdp_root_params) is "
                                 "needed with reshard_after_forward=None: the root is kept after the forward")
            root = check_number("root_params", root_params, minimum=0.0, maximum=on_rank)
            back_k = k - FSDP_ROOT_UNITS
            back_w = (on_rank - root) * weight_bytes / back_k
        reshard_after_forward = True
    if zero == 0:
        return [("DP gradient all-reduce", "all-reduce", g, k, "gradients")]
    if zero == 1:
        return [("ZeRO-1 gradient reduce-scatter", "reduce-scatter", g, k, "gradients"),
                ("ZeRO-1 weight all-gather", "all-gather", w, k, "weight all-gather")]
    if zero == 2:
        return [("ZeRO-2 gradient reduce-scatter", "reduce-scatter", g, m * k, "ZeRO-2 reduce-scatter"),
                ("ZeRO-2 weight all-gather", "all-gather", w, k, "weight all-gather")]
    kept = pipelined and not reshard_after_forward    # hidden as ZeRO-1/2's gather is (exposed_by_group)
    return ([("FSDP weight all-gather (kept for the step)", "all-gather", w, k, "weight all-gather") if kept
             else ("ZeRO-3 weight all-gather (forward)", "all-gather", w, m * k, "ZeRO-3 forward gather")]
            + ([("ZeRO-3 weight all-gather (backward)", "all-gather", back_w, m * back_k, "ZeRO-3 backward")]
               if reshard_after_forward else [])
            + [("ZeRO-3 gradient reduce-scatter", "reduce-scatter", g, (grad_reduces or m) * k,
                "ZeRO-3 backward")])


def dp_schedule(zero: int, on_rank: float, weight_bytes: float, grad_bytes: float, grad_accum: int,
                reshard_after_forward: bool | None = True, *, layers: int | None = None,
                pipelined: bool = False, bucket_params: float | None = None, grad_reduces: int | None = None,
                root_params: float | None = None, buckets: int | None = None) -> list[tuple]:
    """:func:`dp_collectives` without the window: ``(name, kind, message bytes of one call, calls)`` per
    data-parallel collective of one step (its shape before review24c M5, for callers that unpack four)."""
    return [row[:4] for row in dp_collectives(
        zero, on_rank, weight_bytes, grad_bytes, grad_accum, reshard_after_forward, layers=layers,
        pipelined=pipelined, bucket_params=bucket_params, grad_reduces=grad_reduces, root_params=root_params,
        buckets=buckets)]


#: PCIe Gen4 x16, one way, decimal GB/s: 16 GT/s x 16 lanes x 128/130 (the 128b/130b line code) / 8 bits =
#: 31.5 GB/s (PCI-SIG, PCI Express Base Specification 4.0). The "32 GB/s" of datasheets rounds it up.
PCIE_GEN4_X16_GBPS = 16 * 16 * 128 / 130 / 8

#: PCIe Gen5 x16, one way, decimal GB/s: 32 GT/s x 16 lanes x 128/130 / 8 = 63.0 GB/s (PCI-SIG, PCI Express
#: Base Specification 5.0: twice Gen4's transfer rate, the same line code), the host link of H100, H200, B200
#: and MI300X servers (their rows of ``data/gpus.csv``: :func:`~llmsizing.network.host_link_gbps`).
PCIE_GEN5_X16_GBPS = 32 * 16 * 128 / 130 / 8

#: PCIe Gen4 x16 (:data:`PCIE_GEN4_X16_GBPS`), one way, decimal GB/s: the host link of A100, L40S and L4
#: servers. Until session 28 it was every GPU's host link; now each GPU's comes from its data
#: (:func:`~llmsizing.network.host_link_gbps`, ``host_link_gbps=None``), and this figure is what a call that
#: names no GPU still gets (with a DeprecationWarning), and a hand-made GPU without host data.
HOST_LINK_GBPS = PCIE_GEN4_X16_GBPS


def resolve_host_link(host_link_gbps: float | None, gpu=None, *, caller: str = "offload_time") -> float:
    """The host link a caller prices, one way, GB/s: ``host_link_gbps`` if given (checked), else ``gpu``'s
    (:func:`~llmsizing.network.host_link_gbps`: its row of ``data/gpus.csv``), else, for an old call that
    names neither, :data:`HOST_LINK_GBPS` with a DeprecationWarning. Chapter 7."""
    if host_link_gbps is not None:
        return check_number("host_link_gbps", host_link_gbps, minimum=MIN_GPU_SPEED)
    if gpu is not None:
        return gpu_host_link_gbps(gpu)
    import warnings

    warnings.warn(f"{caller}() without gpu= or host_link_gbps= is deprecated: it prices PCIe Gen4 x16 "
                  f"({HOST_LINK_GBPS:.1f} GB/s) for every GPU; pass gpu= to price the GPU's own host link "
                  "(data/gpus.csv, network.host_link_gbps)", DeprecationWarning, stacklevel=3)
    return HOST_LINK_GBPS

#: How fast the host's CPU Adam streams one GPU's optimizer partition, decimal GB/s of memory traffic: an
#: eighth of an 8-GPU host (:data:`GPUS_PER_HOST`). Checked in chapter 7: Ren et al. 2021's CPU-Adam scaled
#: to a DGX H100's DRAM (614 GB/s, :func:`~llmsizing.hardware.cpu_adam_params_per_s`) gives each of 8 GPUs
#: 1.17B parameters/s; 40 GB/s / 30 B is 1.33B, 14% faster. The whole host serving one GPU (8 x 40 / 30 B,
#: 10.7B/s) is 3% faster than DeepSpeed's CPU-Adam on a GH200's Grace (SuperOffload blog: 8B in 0.769 s).
HOST_MEMORY_GBPS, GPUS_PER_HOST = 40.0, 8

#: Bytes of host memory traffic per parameter in one CPU Adam step: read the fp32 gradient (4), read and
#: write the fp32 master weight, the first and the second moment (3 x 8), write the 16-bit weight that goes
#: back to the GPU (2).
CPU_ADAM_BYTES_PER_PARAM = 4 + 3 * 8 + 2


@dataclass(frozen=True)
class OffloadTime:
    """What ZeRO-Offload (Ren et al. 2021) adds to a step on one GPU, in seconds, none of it overlapped: the
    16-bit gradients sent down to the host (``grads_down_s``), the 16-bit weights sent back up
    (``weights_up_s``; with ``offload="optimizer+params"`` each micro-batch's forward and backward fetch them
    again), and the host's Adam step over this GPU's ``partition_params`` parameters (``cpu_adam_s``)."""

    partition_params: float
    grads_down_bytes: float
    weights_up_bytes: float
    grads_down_s: float
    weights_up_s: float
    cpu_adam_s: float

    @property
    def transfer_s(self) -> float:
        return self.grads_down_s + self.weights_up_s

    @property
    def total_s(self) -> float:
        """Transfers + CPU Adam, back to back: the cost with no overlap at all."""
        return self.transfer_s + self.cpu_adam_s


def offload_time(model: Model | str, parallel: Parallel, *, grad_accum: int = 1,
                 precision: str = "bf16-mixed", host_link_gbps: float | None = None,
                 host_memory_gbps: float = HOST_MEMORY_GBPS, gpus_per_host: int = GPUS_PER_HOST,
                 gpu=None) -> OffloadTime:
    """Seconds ZeRO-Offload / ZeRO-Infinity add to a step per GPU (:class:`OffloadTime`): ``parallel`` must
    offload (``offload="optimizer"`` with ZeRO >= 1, or ``"optimizer+params"`` with ZeRO-3).

    Each GPU owns ``1/dp`` of its (tensor- and pipeline-parallel) parameters
    (:func:`~llmsizing.gpu_states.stage_params`, most loaded stage). Per step it sends that partition's 16-bit
    gradients down the host link (once per micro-batch with ZeRO-2/3, which accumulate into the host buffer;
    once with ZeRO-1), the host runs Adam over it (:data:`CPU_ADAM_BYTES_PER_PARAM` bytes of memory traffic
    each), and the updated 16-bit weights come back up once (with ``"optimizer+params"`` the weights stay on
    the host and every micro-batch's forward and backward fetch the partition instead). ``host_link_gbps`` is
    one way; None (the default) takes ``gpu``'s (:func:`~llmsizing.network.host_link_gbps`: PCIe Gen5 x16,
    63.0 GB/s, on an H100; Gen4 x16, 31.5, on an A100), and a call with neither gets :data:`HOST_LINK_GBPS`
    with a DeprecationWarning (:func:`resolve_host_link`). The host's Adam streams 8 x ``host_memory_gbps``
    (a constant above) split over ``gpus_per_host`` GPUs (1 for a GH200 or a host of its own). DeepSpeed
    overlaps the gradient copies with the backward and, with its "one-step delayed parameter update" (Ren et
    al. 2021), the CPU step with the next step's compute; :attr:`OffloadTime.total_s` is the cost without
    that. Chapter 7."""
    model = resolve_model(model)
    par = resolve_parallel(parallel, model)
    if par.offload == "none":
        raise ValueError("parallel.offload is 'none': offload_time needs offload='optimizer' (ZeRO >= 1) or "
                         "'optimizer+params' (ZeRO-3)")
    m = check_int("grad_accum", grad_accum)
    recipe = RECIPES[check_recipe("precision", precision)]
    link = resolve_host_link(host_link_gbps, gpu)
    mem = check_number("host_memory_gbps", host_memory_gbps, minimum=MIN_GPU_SPEED) * GPUS_PER_HOST
    mem /= check_int("gpus_per_host", gpus_per_host, maximum=1024)
    part = max(stage_params(model, par)) / par.dp
    down = part * DTYPE_BYTES[recipe.grads] * (m if par.zero >= 2 else 1)
    up = part * DTYPE_BYTES[recipe.weights] * (2 * m if par.offload == "optimizer+params" else 1)
    return OffloadTime(part, down, up, down / (link * 1e9), up / (link * 1e9),
                       part * CPU_ADAM_BYTES_PER_PARAM / (mem * 1e9))


def zero3_gathered_bytes(model: Model | str, *, precision: str = "bf16-mixed",
                         parallel: Parallel | None = None) -> float:
    """Bytes ZeRO-3/FSDP gathers on each GPU while it computes: one unit's full weights and, in the backward,
    its full gradient before the reduce-scatter (0 unless ``parallel.zero == 3``).

    The unit is the largest of one transformer block (FSDP wraps each block) and the embedding or LM head
    matrix, split by tensor parallelism. DeepSpeed's ``estimate_zero3_model_states_mem_needs`` counts
    ``4 x largest_layer_params`` (a 16-bit weight and gradient of the largest single module); the same
    16-bit recipe gives the same bytes here when that module is the embedding or LM head and outweighs a
    block (Llama 3), and more when a block is larger (GPT-3 175B: a block is 2.9x its embedding). FSDP2 also
    prefetches the next block's weights during the forward by default, which this leaves out (chapter 9
    measures it). With torch's default (``reshard_after_forward=None``, no pipeline) the root unit
    (:func:`~llmsizing.zero_traffic.fsdp_root_params`) stays gathered from the forward to the backward, and
    its gradients wait for its reduce-scatter in the backward's final callback (``_fsdp_state.py``): the
    root's weights whole, and on top the larger of a block's weights and gradients with the final norm's and
    LM head's gradients (a block's backward) and the root's whole gradient (the embedding's backward, at the
    backward's end, when few activations are left: conservative by their difference where it wins, 0.18 GB
    for Llama-3-8B). As measured on torch's ``fully_shard`` (``data/fsdp_root_held.csv``,
    ``tests/test_fsdp_root_held.py``; a block's own gradient by hand). With ``True`` torch holds the same
    whenever the model computes and frees the root only between the forward and the backward, as measured.
    ``True`` here counts one unit at a time, the largest, as DeepSpeed's own estimator does (above; its live
    parameters are bounded by ``stage3_max_live_parameters``) and as torchtitan's ``apply_fsdp`` wraps (the
    embedding and the final norm with the head as units of their own, no weights left to the root): for
    ``fully_shard`` with the embedding and the head left to the root it is 2.10 GB short for Llama-3-8B in
    bf16 (the root's weights, a block's, their gradients; ``tests/test_fsdp_root_held.py``). Chapter 7.
    """
    model = resolve_model(model, moe=True)
    check_recipe("precision", precision)
    return _zero3_gathered(model, precision, resolve_parallel(parallel, model))


def _zero3_gathered(model: Model, precision: str, par: Parallel) -> float:
    """:func:`zero3_gathered_bytes` of arguments already checked (as :func:`_optimizer_temporaries`)."""
    if par.zero < 3:
        return 0.0
    recipe = RECIPES[precision]
    block = _layer_params(model, par.tp)[0]           # (one layer's parameters on a tp rank, kept; issue 38)
    matrix = model.vocab * model.hidden / par.tp
    # without resharding after the forward the stage's weights stay gathered and are counted with the
    # weights (ModelStates): only the unit's full gradient, before its reduce-scatter, comes on top
    weights = DTYPE_BYTES[recipe.weights] if par.reshard_after_forward is not False else 0
    if par.reshard_after_forward is None and par.pp == 1:    # torch's default: the root kept, whole
        w_b, g_b = DTYPE_BYTES[recipe.weights], DTYPE_BYTES[recipe.grads]
        root = fsdp_root_params(model, par.tp)
        # the root's gradients from the backward's start: the final norm's and the LM head's (a tied head's
        # in the embedding's weight); all of them once the embedding's is accumulated
        head = edge_params(model, par.tp, 1)["last"] + (matrix if model.tied_embeddings else 0.0)
        return w_b * root + max(w_b * block + g_b * (head + block), g_b * root)
    if par.grad_reduce == "chunk_run":    # the largest chunk's whole gradient, accumulated over its run
        chunk = -(-max(layers_per_stage(model.layers, par)) // par.virtual_stages)
        return weights * max(block, matrix) + DTYPE_BYTES[recipe.grads] * max(block * chunk, matrix)
    return (weights + DTYPE_BYTES[recipe.grads]) * max(block, matrix)
