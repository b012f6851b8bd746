"""The fewest GPUs that hold a training run, and a layout that gets there (chapter 8, "3D layouts").

:func:`min_gpus` answers the first half of "how many GPUs": the memory half. It tries every layout the
library can run (tensor parallelism inside a node, pipeline stages that split the layers evenly, every ZeRO
stage DeepSpeed allows with them) and, for each, solves for the smallest data-parallel degree whose most
loaded GPU fits. The time-and-money chapters then decide how many GPUs the run *should* use.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ._compat import forward as _forward
from ._validate import check_bool, check_fraction, check_int, check_number, renamed
from .all_to_all import check_dispatcher, node_limit
from .catalog import get_gpu, resolve_model
from .comm import communication, exposed_share_s, stage_compute_times_s
from .footprint import TrainingMemory
from .frameworks import tp_backward_overlap_of
from .flops import _partial_flops_per_token, attention_flops_per_token, training_flops_per_token
from .hardware import check_recipe_runs_on, dense_tflops
from .hardware import kernel_efficiency as default_efficiency
from .kernels import rates
from .job import takes_job
from .mfu import layout_range_area, layout_range_factors
from .mfu_inputs import layout_range_note
from .model import Model
from .exposure import exposed_by_group  # noqa: F401  (re-exported: its old home)
from .moe_time import load_skew as _load_skew
from .moe_time import schedule_bubble, shared_expert_window_s
from .parallel import (OP_SAC_MODES, OP_SAC_SDPA_SAVED, Parallel, check_layout, chunk_layers,
                       layers_per_stage, recomputed_layers)
from .precision import compute_dtype
from .states import USABLE_FRACTION


#: The most GPUs a node may have (``gpus_per_node``): tensor-parallel degrees are searched among its divisors.
#: NVIDIA's GB200 NVL72 puts 72 GPUs in one NVLink domain; 1,024 leaves room for larger ones.
MAX_GPUS_PER_NODE = 1024


@dataclass(frozen=True)
class Plan:
    """A layout that fits: ``parallel``, its per-GPU ``total_bytes`` (peak + allowance, most loaded GPU), the
    GPU's ``capacity_bytes``, the communication seconds per step with no overlap (``comm_s``), the compute
    seconds at the assumed MFU (``compute_s``) and the pipeline ``bubble`` (a fraction of ``compute_s``)."""

    parallel: Parallel
    total_bytes: float
    capacity_bytes: float
    comm_s: float
    compute_s: float
    bubble: float

    @property
    def gpus(self) -> int:
        return self.parallel.gpus

    @property
    def step_s(self) -> float:
        """Compute + bubble + communication, none of it overlapped: a pessimistic step time."""
        return self.compute_s * (1 + self.bubble) + self.comm_s


def _divisors(n: int, limit: int | None = None) -> list[int]:
    """The divisors of ``n`` (at most ``limit``, if given), ascending. Pairs ``d, n // d`` with ``d`` up to
    ``sqrt(n)``: ``O(sqrt n)`` steps, or ``O(limit)`` when that is fewer, never ``O(n)``."""
    top = math.isqrt(n)
    if limit is not None and limit < top:
        return [d for d in range(1, limit + 1) if n % d == 0]
    small = [d for d in range(1, top + 1) if n % d == 0]
    out = small + [n // d for d in reversed(small) if n // d != d]
    return out if limit is None else [d for d in out if d <= limit]


# =========================================================================== where a step's time goes
def _recompute_layers_top(model: Model, parallel: Parallel, seq: int) -> int:
    """The most layers a model chunk of ``parallel`` has (the largest ``recompute_layers`` that still changes
    anything), after checking the layout: for :func:`least_recompute_layers` and
    :func:`recompute_layer_sweep`."""
    if not isinstance(parallel, Parallel):
        raise TypeError(f"parallel must be a Parallel(...), got {type(parallel).__name__}")
    check_layout(model, tp=parallel.tp, pp=parallel.pp, sp=parallel.sp,
                 virtual_stages=parallel.virtual_stages, zero=parallel.zero, offload=parallel.offload,
                 stage_layers=parallel.stage_layers, cp=parallel.cp, seq=check_int("seq", seq))
    stages = layers_per_stage(model.layers, parallel)
    return max(max(chunk_layers(n, parallel.virtual_stages)) for n in stages)


def least_recompute_layers(model: Model | str, gpu, parallel: Parallel, *, batch: int, seq: int,
                           grad_accum: int = 1, usable_fraction: float = USABLE_FRACTION, **kw) -> int | None:
    """The fewest layers per model chunk that partial recomputation must rerun (``recompute="full",
    recompute_layers=N``, Megatron-LM's block method: :func:`~llmsizing.memory.training_memory`) for the most
    loaded GPU of ``parallel`` to hold the step within ``usable_fraction`` of ``gpu``'s memory (the planner's
    :data:`USABLE_FRACTION` by default): ``0`` if it fits without recomputation, ``None`` if it does not fit
    even with every layer recomputed. Each extra recomputed layer trades a plain layer's tensors for its
    input, so the memory falls with ``N`` and the first ``N`` that fits is the answer (at most the layers of a
    chunk are tried). ``kw`` goes to :func:`~llmsizing.memory.training_memory` (``precision``,
    ``attention``...). Taught in the "Long context" chapter."""
    from .memory import training_memory

    model = resolve_model(model)
    if not isinstance(parallel, Parallel):
        raise TypeError(f"parallel must be a Parallel(...), got {type(parallel).__name__}")
    usable_fraction = check_fraction("usable_fraction", usable_fraction)
    limit = usable_fraction * get_gpu(gpu).memory_bytes
    for n in range(_recompute_layers_top(model, parallel, seq) + 1):
        t = training_memory(model, batch=batch, seq=seq, grad_accum=grad_accum, parallel=parallel,
                            recompute="full", recompute_layers=n, **kw)
        if t.total_bytes <= limit:
            return n
    return None


def recompute_layer_sweep(model: Model | str, gpu, parallel: Parallel, *, batch: int, seq: int,
                          grad_accum: int = 1) -> list[tuple[int, TrainingMemory, StepTime]]:
    """Partial recomputation (``recompute="full", recompute_layers=N``, Megatron-LM's block method) at every
    ``N`` a model chunk of ``parallel`` allows, from ``0`` (none) to the longest chunk's layers (every layer):
    one ``(N, memory, step)`` per ``N``, in that order (so the list's index is ``N``), with ``memory`` the
    most loaded GPU's :func:`~llmsizing.memory.training_memory` and ``step`` the slowest stage's
    :func:`step_time` on ``gpu``. The memory falls and the step grows with ``N``; the least ``N`` that fits is
    :func:`least_recompute_layers`. Taught in the "Long context" chapter (its table and exercise 4)."""
    from .memory import training_memory

    model = resolve_model(model)
    rows = []
    for n in range(_recompute_layers_top(model, parallel, seq) + 1):
        t = training_memory(model, batch=batch, seq=seq, grad_accum=grad_accum, parallel=parallel,
                            recompute="full", recompute_layers=n)
        s = step_time(model, gpu, parallel, batch=batch, seq=seq, grad_accum=grad_accum, recompute="full",
                      recompute_layers=n)
        rows.append((n, t, s))
    return rows


def _cp_attention_s(model, g, par, *, batch: int, seq: int, grad_accum: int, recompute: str, dtype: str,
                    eff: float, recompute_layers: int | None = None, attention_kernel: str | None = None,
                    rate: float | None = None, attention_seq: int | None = None) -> tuple[float, float]:
    """This GPU's attention-core seconds per step, ``(forward, backward)``, on the slowest stage: what the
    ring's hops of context parallelism can hide behind (:func:`exposed_by_group`). The forward's ``QK^T`` and
    ``attn @ V`` as causal kernels compute them (:func:`~llmsizing.flops.attention_flops_per_token` with
    ``causal=True``) of the stage's layers for ``batch x seq x grad_accum`` tokens over ``tp x cp`` GPUs, at
    the attention kernels' rate (:func:`llmsizing.kernels.rates`, as the step's compute); twice that in the
    backward, and the forward twice with full recomputation (which runs the ring again; with
    ``recompute_layers``, the recomputed layers of that stage only). ``(0, 0)`` without context
    parallelism. ``rate``: that rate, if the caller has it (the planner's); ``attention_seq``: step_time's."""
    if par.cp == 1:
        return 0.0, 0.0
    stages = layers_per_stage(model.layers, par)
    layers = stages[most := max(range(par.pp), key=lambda i: stages[i])]
    # the attention core as causal kernels run it, at the attention kernels' rate (comm.step_compute_time_s)
    att = attention_seq or seq
    rate = rates(model, g, tp=par.tp, cp=par.cp, batch=batch, seq=att, dtype=dtype, kernel_efficiency=eff,
                 attention_kernel=attention_kernel)[1] if rate is None else rate
    one = (attention_flops_per_token(model, seq=att, causal=True) / model.layers * layers * batch * seq
           * grad_accum / (par.tp * par.cp) / rate)
    if recompute_layers is not None:
        return one * (1 + recomputed_layers(model.layers, par, recompute_layers)[most] / layers), 2 * one
    # (torchtitan's op SAC reruns the ring only where SDPA's output is not saved: "op-sac-sdpa-rerun")
    rerun = recompute == "full" or (recompute in OP_SAC_MODES and not OP_SAC_SDPA_SAVED[recompute])
    return one * (2 if rerun else 1), 2 * one


@dataclass(frozen=True)
class StepTime:
    """One training step's time on a GPU of the slowest pipeline stage, in its parts (:func:`step_time`).
    ``compute_s`` is that stage's arithmetic at the kernel efficiency, ``bubble`` the pipeline bubble as a
    fraction of it, ``communication`` every collective of the step (:class:`~llmsizing.comm.Communication`),
    ``tokens`` the tokens the whole run processes per step (micro-batch x sequence x micro-batches x ``dp``;
    the ``cp`` GPUs of a group share their sequences). ``exposed`` is the communication the step waits for, by
    group (:func:`exposed_by_group`); when a single ``overlap`` share is given instead (the simple model of
    chapter 7), ``exposed`` is ``None`` and a share ``overlap`` of all communication hides behind the busy
    time. ``model_flops`` is the step's model FLOPs on all GPUs (no recomputation) and ``peak_flops`` one
    GPU's dense peak, for :attr:`mfu`, whose 80% range (``data/intervals.csv``'s area ``range_area``) is
    ``range_factors`` (:attr:`mfu_range`). ``range_note`` is ``""`` where that range is calibrated, else that
    no calibrated range applies on this GPU and dtype (a stand-in kernel efficiency: the band is borrowed;
    :func:`~llmsizing.mfu_inputs.layout_range_note`, issue 34)."""

    compute_s: float
    bubble: float
    communication: object
    overlap: float | None
    tokens: int
    exposed: dict | None = None
    model_flops: float = 0.0
    peak_flops: float = 0.0
    kernel_efficiency: float = 0.0
    range_factors: tuple | None = None
    range_area: str = ""
    range_note: str = ""

    @property
    def mfu_range(self) -> tuple[float, float]:
        """``(low, high)`` MFU: ``mfu x range_factors`` (:func:`~llmsizing.mfu.layout_range_factors`)."""
        lo, hi = self.range_factors or (math.nan, math.nan)
        return self.mfu * lo, (min(1.0, self.mfu * hi) if hi == hi else math.nan)

    @property
    def bubble_s(self) -> float:
        """Idle pipeline time: ``bubble x compute_s``."""
        return self.bubble * self.compute_s

    @property
    def busy_s(self) -> float:
        """Compute plus bubble: the time the GPU is occupied by the pipeline schedule."""
        return self.compute_s + self.bubble_s

    @property
    def comm_by_group_s(self) -> dict[str, float]:
        """Communication seconds by parallel group (``"dp"``, ``"tp"``, ``"pp"``; 0 for an absent group; and
        ``"cp"`` when the layout has context parallelism)."""
        by = self.communication.by_group()
        groups = ("dp", "tp", "pp") + (("cp",) if self.communication.parallel.cp > 1 else ()) + \
            (("ep",) if self.communication.parallel.ep > 1 else ())
        return {k: by.get(k, 0.0) for k in groups}

    @property
    def comm_s(self) -> float:
        """All communication, none of it hidden."""
        return self.communication.time_s

    @property
    def exposed_by_group_s(self) -> dict[str, float]:
        """The communication the step waits for, by group."""
        if self.exposed is not None:
            return dict(self.exposed)
        share = self.exposed_comm_s / self.comm_s if self.comm_s else 0.0
        return {k: v * share for k, v in self.comm_by_group_s.items()}

    @property
    def exposed_comm_s(self) -> float:
        """The communication the step waits for: the sum of :attr:`exposed` or, with one ``overlap`` share,
        ``(1 - overlap) x comm_s`` but never less than what the busy time cannot hide
        (``comm_s - busy_s``)."""
        if self.exposed is not None:
            return sum(self.exposed.values())
        return exposed_share_s(self.comm_s, self.busy_s, self.overlap)

    @property
    def step_s(self) -> float:
        """Compute + bubble + exposed communication."""
        return self.busy_s + self.exposed_comm_s

    @property
    def efficiency(self) -> float:
        """``compute_s / step_s``: the share of the step spent on the arithmetic (what articles call "parallel
        efficiency")."""
        return self.compute_s / self.step_s

    @property
    def mfu(self) -> float:
        """The end-to-end model FLOPs utilisation of the step: its model FLOPs over ``GPUs x dense peak x
        step_s`` (Chowdhery et al. 2022, App. B). An output: the kernel efficiency, less the bubble, the
        exposed communication, recomputation and the slowest stage's extra work."""
        return self.model_flops / (self.communication.parallel.gpus * self.peak_flops * self.step_s)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.step_s

    def parts(self) -> dict[str, float]:
        """Seconds per step by part, in drawing order: ``compute``, ``pipeline bubble``, then each group's
        communication in full (before overlap)."""
        return {"compute": self.compute_s, "pipeline bubble": self.bubble_s, **self.comm_by_group_s}


@functools.lru_cache(maxsize=256)
def _range_note(g, dtype: str) -> str:
    """:func:`~llmsizing.mfu_inputs.layout_range_note` once per (GPU, dtype): step_time runs in loops."""
    return layout_range_note(g, dtype)


@takes_job("step")
def step_time(model: Model | str, gpu, parallel: Parallel | None = None, *, batch: int, seq: int,
              grad_accum: int = 1, kernel_efficiency: float | None = None, overlap: float | None = None,
              recompute: str = "none", precision: str = "bf16-mixed", gpus_per_node: int | None = None,
              inter_node_gbps: float | None = None, dtype: str | None = None, async_tp: bool = False,
              node=None, mfu: float | None = None, recompute_layers: int | None = None,
              ep_overlap: float = 0.0, max_nodes: int | str | None = "model",
              attention_kernel: str | None = None, schedule: str = "1f1b", mtp_depth: int = 0,
              comm_sms: int = 0, load_skew: float | None = None, framework: str | None = None,
              attention_seq: int | None = None, capacity_factor: float | None = None,
              dispatcher: str = "alltoall", tp_backward_overlap: bool | None = None,
              protocols: bool = False) -> StepTime:
    """Where one training step's time goes on a GPU of the slowest pipeline stage: compute
    (:func:`~llmsizing.comm.step_compute_time_s` at ``kernel_efficiency`` of the dense peak, default the
    calibrated one of the GPU's generation), the pipeline bubble (:func:`~llmsizing.parallel.pipeline_bubble`
    x compute: Narayanan et al. 2021, Sec. 2.2; for 1F1B its fill and drain at each stage's own speed,
    :func:`~llmsizing.moe_time.schedule_bubble`'s ``stage_times``, session 39) and each group's communication
    (:func:`~llmsizing.comm.communication`, on the network of ``node``), of which what each group cannot hide
    is added (:func:`exposed_by_group`; ``async_tp`` hides tensor parallelism behind compute).

    The result's :attr:`StepTime.mfu` is the end-to-end MFU: an output, never charged twice. A number for
    ``overlap`` (0 to 1) replaces the per-group rule by one share of all communication hidden behind the busy
    time (``0``: nothing hidden, :attr:`Plan.step_s`; ``1``: ``max(compute + bubble, communication)``, the
    scaling book's lower bound), as chapter 7 first teaches it. ``mfu=`` is the old name of
    ``kernel_efficiency`` (deprecated). ``batch`` is the micro-batch, ``grad_accum`` the micro-batches per
    step (a pipeline's micro-batches). ``dtype`` is the tensor-core format of the matrix multiplies: by
    default the recipe's (:func:`~llmsizing.precision.compute_dtype`: ``"fp8"`` for ``precision="fp8-mixed"``
    or ``"fp8-deepseek"``, with the FP8 peak and its calibrated efficiency; ``"bf16"`` otherwise). With
    context parallelism (``parallel.cp``) the compute is split over ``tp x cp`` GPUs and the ring's hops hide
    behind the attention (:func:`exposed_by_group`). ``recompute_layers`` (with ``recompute="full"``) is
    partial recomputation, the first that many layers of each model chunk
    (:func:`~llmsizing.memory.training_memory`): the slowest stage's compute, its collectives and the HFU
    count only those layers' second forward. Taught in chapter 8; the parallelism explorer draws it; context
    parallelism and partial recomputation in the "Long context" chapter. A mixture of experts (issue 24)
    computes its active FLOPs on each stage's dense and MoE layers and adds the expert-parallel all-to-all
    (:mod:`llmsizing.moe`; the routing's node limit ``max_nodes``: ``"model"``, the default, is the model's
    own from its config's ``n_group``/``topk_group``, as :func:`~llmsizing.planner.plan` takes it; ``None``
    routes over every node), exposed except the share ``ep_overlap`` (0 to 1) and what the shared experts hide
    with ``parallel.shared_expert_overlap``. ``ep_overlap`` is 0 by default because Megatron-Core's own
    overlap is off by default (``overlap_moe_expert_parallel_comm: bool = False``,
    megatron/core/model_parallel_config.py; ``--overlap-moe-expert-parallel-comm --delay-wgrad-compute``,
    MCore 0.14). Turned on, it runs one micro-batch's forward beside another's backward layer by layer, each
    all-to-all behind the other's attention and MLP (pipeline_parallel/combined_1f1b.py), only in the 1F1B
    phase: the first forward, the last backward and a pipeline's warm-up and cool-down stay exposed; it needs
    a virtual pipeline when ``pp > 1`` and refuses full recomputation and the shared-expert overlap
    (transformer/transformer_config.py). No source gives the share it hides, so none is assumed: a run with it
    on gives its own. DualPipe: 1 (DeepSeek-V3, arXiv 2412.19437 Sec. 3.2.1, "fully hidden"; the DeepSeek
    rows' value). Chapter 18.
    ``step_time(job)`` takes a :class:`~llmsizing.job.Job`. ``attention_kernel``: the attention kernel whose
    published speed prices the attention core (:func:`~llmsizing.kernels.attention_kernels`; default the GPU
    generation's, as the planner uses). Issue 35's MoE terms (:mod:`llmsizing.moe_time`): ``schedule``
    ``"1f1b"`` (default), ``"zb1p"`` or ``"dualpipe"`` sets the bubble
    (:func:`~llmsizing.moe_time.schedule_bubble`); ``mtp_depth``, ``comm_sms`` and ``load_skew`` go to
    :func:`~llmsizing.comm.step_compute_time_s`; ``capacity_factor`` (token dropping, ``None``: dropless) sets
    ``load_skew`` as :func:`~llmsizing.moe_time.load_skew` caps it (and ``training_memory`` the expert
    buffers). ``framework``: the software stack; its family sets the range.
    ``attention_seq``: a packed row's attention length (:func:`~llmsizing.comm.step_compute_time_s`).
    ``dispatcher``: the MoE token dispatcher, ``"alltoall"`` (default: ``k`` copies a token, Megatron-Core's
    ``alltoall``) or ``"deepep"`` (once a GPU and once a node, Megatron-Core's ``flex`` on DeepEP;
    :func:`~llmsizing.all_to_all.all_to_all_s`).
    ``tp_backward_overlap``: the backward's tensor-parallel collectives that Megatron-LM's (and Transformer
    Engine's) column-parallel Linear layers launch beside their own dgrad and wgrad GEMMs hide behind those
    GEMMs (:data:`~llmsizing.exposure.TP_BACKWARD_ASYNC`, :func:`tp_backward_windows_s`); the default path
    of Megatron-LM since 2022, no flag. ``None`` (default): as ``framework``'s stack family does on its
    default path (:func:`~llmsizing.frameworks.tp_backward_overlap_of`: the Megatron family hides them; no
    stack named, every TP collective exposed, as before); ``True``/``False`` says so explicitly.
    ``protocols``: the DP, TP and CP collectives by NCCL protocol, the cheaper of the two fitted lines
    (:func:`~llmsizing.comm.ring_collective`; issue 34, phys47); default ``False``, the single line the
    ranges were measured with (the planner's arrays price the single line only)."""
    model = resolve_model(model, moe=True)
    g = check_recipe_runs_on(precision, gpu)
    ep_overlap = check_number("ep_overlap", ep_overlap, maximum=1.0)
    batch, seq, m = check_int("batch", batch), check_int("seq", seq), check_int("grad_accum", grad_accum)
    att = seq if attention_seq is None else check_int("attention_seq", attention_seq, maximum=seq)
    eff = renamed("kernel_efficiency", kernel_efficiency, "mfu", mfu)
    overlap = None if overlap is None else check_number("overlap", overlap, maximum=1.0)
    async_tp = check_bool("async_tp", async_tp)
    tp_backward_overlap = tp_backward_overlap_of(framework, tp_backward_overlap)
    dtype = compute_dtype(precision, dtype)
    max_nodes = node_limit(max_nodes)
    comm = communication(model, parallel, batch=batch, seq=seq, gpu=g, gpus_per_node=gpus_per_node,
                         inter_node_gbps=inter_node_gbps, precision=precision, grad_accum=m,
                         recompute=recompute, node=node, recompute_layers=recompute_layers,
                         max_nodes=max_nodes, dispatcher=check_dispatcher(dispatcher).name,
                         protocols=check_bool("protocols", protocols))
    par = comm.parallel
    if capacity_factor is not None:     # token dropping caps the skew (moe_time.load_skew; Switch)
        if load_skew is not None or not model.is_moe:
            raise ValueError(f"capacity_factor={capacity_factor!r} sets a mixture of experts' load skew: "
                             f"give it or load_skew=, not both ({model.name}: is_moe={model.is_moe})")
        load_skew = _load_skew(model, par.ep, capacity_factor=capacity_factor)
    eff = default_efficiency(g, dtype) if eff is None else check_fraction("kernel_efficiency", eff)
    # every stage's compute (step_compute_time_s is their max): 1F1B's fill and drain pass each other stage
    # at its own speed (schedule_bubble; session 39, issue 35), zero bubble's and DualPipe's too (zb40)
    stages = stage_compute_times_s(model, par, batch=batch, seq=seq, gpu=g, grad_accum=m, recompute=recompute,
                                   kernel_efficiency=eff, dtype=dtype, recompute_layers=recompute_layers,
                                   attention_kernel=attention_kernel, mtp_depth=mtp_depth, comm_sms=comm_sms,
                                   load_skew=load_skew, schedule=schedule, attention_seq=att)
    compute = max(stages)
    if schedule == "dualpipe" and par.pp > 1:     # (the bubble needs each stage's time, not each rank's)
        stages = stage_compute_times_s(model, par, batch=batch, seq=seq, gpu=g, grad_accum=m,
                                       recompute=recompute, kernel_efficiency=eff, dtype=dtype,
                                       recompute_layers=recompute_layers, attention_kernel=attention_kernel,
                                       mtp_depth=mtp_depth, comm_sms=comm_sms, load_skew=load_skew,
                                       attention_seq=att)
    bubble = schedule_bubble(schedule, par.pp, m, par.virtual_stages, stage_times=stages)
    model_per_token = training_flops_per_token(model, seq=att)
    if recompute_layers is None:
        hardware_per_token = training_flops_per_token(model, seq=att, recompute=recompute)
    else:       # every stage's recomputed layers (the count is per model chunk)
        rerun = sum(recomputed_layers(model.layers, par, recompute_layers))
        hardware_per_token = _partial_flops_per_token(model, att, rerun, False)
    fwd_share = (model_per_token / 3) / hardware_per_token     # the forward's share (recomputation: backward)
    cp_att = _cp_attention_s(model, g, par, batch=batch, seq=seq, grad_accum=m, recompute=recompute,
                             dtype=dtype, eff=eff, recompute_layers=recompute_layers,
                             attention_kernel=attention_kernel, attention_seq=att)
    sh = shared_expert_window_s(model, g, par, batch, seq, dtype, eff, comm_sms)   # ((0, 0) if off)
    tp_bwd = None
    if tp_backward_overlap and par.tp > 1:      # the column-parallel layers' dgrad and wgrad GEMMs
        per_stage = layers_per_stage(model.layers, par)          # (the slowest stage's; DualPipe: the most)
        layers = max(per_stage) if schedule == "dualpipe" else per_stage[list(stages).index(compute)]
        tp_bwd = tp_backward_windows_s(model, g, par, batch=batch, seq=seq, grad_accum=m, dtype=dtype,
                                       eff=eff, layers=layers)
    exposed = None if overlap is not None else exposed_by_group(
        comm, compute, grad_accum=m, fwd_share=fwd_share, async_tp=async_tp, cp_attention_s=cp_att,
        ep_overlap=ep_overlap, shared_expert_s=sh, tp_backward_s=tp_bwd)
    # (a mixture of experts' step states the range measured on published MoE runs: issue 35)
    tokens, rf = batch * seq * m * par.dp, layout_range_factors(g, dtype, framework, moe=model.is_moe)
    return StepTime(compute, bubble, comm, overlap, tokens, exposed, model_per_token * tokens,
                    dense_tflops(g, dtype) * 1e12, eff, rf, layout_range_area(model.is_moe),
                    _range_note(g, dtype))


def tp_backward_windows_s(model, gpu, parallel, *, batch: int, seq: int, grad_accum: int, dtype: str,
                          eff: float, layers: int) -> tuple[float, float]:
    """``(dgrad, wgrad)``: the seconds per step that one GPU of a stage holding ``layers`` layers spends in
    the backward GEMMs of its column-parallel Linear layers (QKV and the MLP's up projection,
    :func:`~llmsizing.kernels.layer_gemms`), each ``2 m n k`` FLOPs a micro-batch (the forward's), at the
    layer's GEMM rate (:func:`~llmsizing.kernels.rates`, the one the compute is priced at): the windows
    behind which Megatron-LM's column-parallel backward hides its re-gathers (dgrad) and its dgrad's reduction
    (wgrad) (:data:`~llmsizing.exposure.TP_BACKWARD_ASYNC`). The two are equal: each GEMM's dgrad and wgrad
    have its forward's FLOPs."""
    from .kernels import layer_gemms

    tokens = max(1, batch * seq // parallel.cp)
    qkv, _, up, _ = layer_gemms(model, tp=parallel.tp, tokens=tokens, ep=parallel.ep)
    gemm_rate = rates(model, gpu, tp=parallel.tp, cp=parallel.cp, batch=batch, seq=seq, dtype=dtype,
                      kernel_efficiency=eff, ep=parallel.ep)[0]
    flops = 2.0 * (math.prod(qkv) + math.prod(up)) * layers * grad_accum
    return flops / gemm_rate, flops / gemm_rate


_MOVED_UP = {"cp_overlap_sweep": "llmsizing.cp_sweep", "min_gpus": "llmsizing.fewest_gpus",
             "MIN_GPUS_MAX": "llmsizing.fewest_gpus", "STAGE_RUNS_KEPT": "llmsizing.fewest_gpus"}
__getattr__ = _forward(__name__, _MOVED_UP)
