"""A job spec (issue 32): one frozen description of what is being run, so that the same facts are stated once
and checked once, and every answer about it reads them from the same place.

A :class:`Job` is the model, the GPU (and node), the layout (:class:`~llmsizing.parallel.Parallel`), the
recipe (precision, optimizer, attention kernel, software stack), the batch (micro-batch and accumulation
steps; the global batch follows from the layout's ``dp``), the sequence length and the recomputation.
Megatron-Core's ``TransformerConfig`` and llm-analysis's configs do the same for a run; this one holds only
what the library's answers read. :func:`~llmsizing.memory.training_memory`,
:func:`~llmsizing.layouts.step_time`, :func:`~llmsizing.time_cost.training_time` and
:func:`~llmsizing.planner.plan` take a job in place of their first argument (``training_memory(job)``,
``step_time(job)``, ``training_time(job, tokens=1e12)``); keyword calls keep working unchanged, and a keyword
given with a job overrides the job's value (``training_memory(job, batch=2)``). :meth:`Job.from_plan_row`
turns a row of :func:`~llmsizing.planner.plan`'s frame back into the job it priced, so that the direct
functions re-check the row (chapter 12).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from ._validate import check_bool, check_choice, check_int, check_number
from .act_terms import ATTENTION, STACKS
from .all_to_all import DEFAULT_DISPATCHER, check_dispatcher, dispatcher_kwargs
from .catalog import GPU, get_gpu, resolve_model
from .footprint import check_code_options, check_grad_buffer, check_grad_buffer_kind, zero_grad_buffer
from .frameworks import stack_family, tp_backward_overlap_of  # noqa: F401
from .hardware import check_recipe_runs_on
from .model import Model
from .moe import check_capacity_factor
from .moe_time import SCHEDULES, comm_sm_share
from .mtp import check_mtp_depth
from .op_sac import check_op_sac
from .parallel import (OP_SAC_MODES, RECOMPUTE, RECOMPUTE_MODES, SINGLE_GPU, Parallel, check_recompute_layers,
                       pipeline_split, resolve_parallel)
from .pipeline_schedule import pipelined_zero_fields
from .precision import OPTIMIZERS, RECIPES, check_recipe

@dataclass(frozen=True)
class Job:
    """What is being run: ``model`` on ``gpu`` GPUs in the layout ``parallel``, ``micro_batch`` sequences of
    ``seq`` tokens per GPU and micro-batch, ``grad_accum`` micro-batches per optimizer step, with the recipe
    ``precision`` and ``optimizer``, the ``attention`` kernel and software ``stack``, and ``recompute``
    (``recompute_layers`` for partial recomputation; torchtitan's op SAC,
    :data:`~llmsizing.parallel.OP_SAC_MODES`, refused here where :func:`~llmsizing.op_sac.check_op_sac` does
    not model it, and its plan searches it beside the default recomputations). ``node`` (a
    :func:`~llmsizing.network.get_node` name or ``None`` for the GPU's default node),
    ``max_nodes`` (``"model"``: the routing's own node limit),
    ``ep_overlap``, ``kernel_efficiency`` and ``overlap`` (``None``: calibrated) are what the step model reads
    beyond that; ``framework`` names the training software (e.g. ``"megatron-core"``, ``"torchtitan"``), whose
    stack family sets the range of the step's MFU, the plan's days and the job's days (range44; ``None``:
    unknown, the pooled range; :func:`~llmsizing.frameworks.stack_family`). ``mtp_depth``: a mixture of
    experts' multi-token-prediction modules (DeepSeek-V3's, :mod:`llmsizing.mtp`), and ``capacity_factor``
    its token dropping (``None``: dropless), which its memory, step, time and plan price; ``schedule``
    the pipeline schedule (``"1f1b"``, ``"zb1p"``, ``"dualpipe"``) and ``comm_sms`` the SMs its
    communication kernels keep
    (DeepSeek-V3's recipe: ``"dualpipe"``, 20), and ``load_skew`` a measured load skew in place of the
    default, which its step, time and plan price (:func:`check_step_recipe`; a plan searches DualPipe's
    layouts, dual48; its memory prices ``schedule``: DualPipe's two chunks per rank,
    :mod:`llmsizing.memory_dualpipe`);
    ``dispatcher`` its token dispatcher
    (``"alltoall"`` or ``"deepep"``, :data:`~llmsizing.all_to_all.DISPATCHERS`), which its step and plan
    price; under the model's group-limited routing or a ``max_nodes`` limit ``"alltoall"`` too sends a
    token once per GPU or node it reaches (DeepSeek's kernels), so the two can price alike there.
    ``grad_buffer`` (issue 38, :data:`~llmsizing.footprint.GRAD_BUFFERS`): the gradients live in a
    persistent buffer (Megatron-Core's DDP grad buffer, PyTorch DDP's buckets; ``"ddp-copy"``, PyTorch DDP's
    default, with the ``.grad`` tensors apart from it), which its memory and plan price
    (:func:`~llmsizing.memory.training_memory`; DDP and ZeRO-1 only, refused with ZeRO-2 or 3). What the
    run's own code does (issue 38, :mod:`llmsizing.footprint`): ``loss``
    (:data:`~llmsizing.footprint.LOSS_KINDS`: ``"fp32"``, ``"bf16"``, ``"compiled"``), ``tp_vocab``
    (:data:`~llmsizing.footprint.TP_VOCABS`) and
    ``no_sync_grads`` (:data:`~llmsizing.footprint.NO_SYNC_GRADS`), which its memory prices; its step and
    time hold no memory, and its plan refuses them (:data:`PLAN_REFUSES_CODE_OPTIONS`). Checked
    when made: a model and layout that cannot run together are refused here, once."""

    model: Model | str
    gpu: GPU | str
    seq: int
    parallel: Parallel = SINGLE_GPU
    micro_batch: int = 1
    grad_accum: int = 1
    precision: str = "bf16-mixed"
    optimizer: str = "adamw"
    recompute: str = "none"
    recompute_layers: int | None = None
    attention: str = "flash"
    stack: str = "fused"
    node: object = None
    max_nodes: int | str | None = "model"
    ep_overlap: float = 0.0
    kernel_efficiency: float | None = None
    overlap: float | None = field(default=None)
    framework: str | None = None
    mtp_depth: int = 0
    capacity_factor: float | None = None
    grad_buffer: bool | str = False
    dispatcher: str = "alltoall"
    schedule: str = "1f1b"
    comm_sms: int = 0
    load_skew: float | None = None
    tp_backward_overlap: bool | None = None
    loss: str = "fp32"
    tp_vocab: str = "split"
    no_sync_grads: str = "none"

    def __post_init__(self):
        model = resolve_model(self.model, moe=True)
        set_ = functools.partial(object.__setattr__, self)
        set_("model", model)
        set_("gpu", get_gpu(self.gpu))
        set_("seq", check_int("seq", self.seq))
        set_("micro_batch", check_int("micro_batch", self.micro_batch))
        set_("grad_accum", check_int("grad_accum", self.grad_accum))
        set_("parallel", resolve_parallel(self.parallel, model, self.seq))
        set_("precision", check_recipe("precision", self.precision))
        set_("gpu", check_recipe_runs_on(self.precision, self.gpu))
        check_choice("optimizer", self.optimizer, tuple(OPTIMIZERS))
        check_choice("attention", self.attention, ATTENTION)
        check_choice("stack", self.stack, STACKS)
        # (after attention and stack: a bad name is refused as such, not as what op SAC models; review30a)
        if check_choice("recompute", self.recompute, RECOMPUTE_MODES) in OP_SAC_MODES:    # (torchtitan's)
            par, recipe = self.parallel, RECIPES[self.precision]
            check_op_sac(model, recompute=self.recompute, tp=par.tp, sp=par.sp, cp=par.cp,
                         attention=self.attention, stack=self.stack, autocast=recipe.autocast, fp8=recipe.fp8,
                         dropout=False)
        if self.recompute_layers is not None:
            check_recompute_layers(self.recompute, self.recompute_layers, model.layers)
        if not (self.max_nodes is None or self.max_nodes == "model"):
            set_("max_nodes", check_int("max_nodes", self.max_nodes))
        set_("ep_overlap", check_number("ep_overlap", self.ep_overlap, maximum=1.0))
        set_("dispatcher", check_dispatcher(self.dispatcher).name)
        if self.dispatcher != DEFAULT_DISPATCHER and not model.is_moe:   # (as training_time refuses it)
            raise ValueError(f"dispatcher={self.dispatcher!r} prices a mixture of experts' token dispatch; "
                             f"{model.name} is dense (experts=0): give dispatcher={DEFAULT_DISPATCHER!r}")
        tp_backward_overlap_of(self.framework, self.tp_backward_overlap)   # (a known name or None; a bool)
        options = check_moe_options(model, self.mtp_depth, self.capacity_factor)
        set_("mtp_depth", options.get("mtp_depth", 0))
        set_("capacity_factor", options.get("capacity_factor"))
        set_("grad_buffer", check_grad_buffer(self.grad_buffer, self.parallel.zero))
        code = check_code_options(model, self.parallel, loss=self.loss, tp_vocab=self.tp_vocab,   # (as
                                  no_sync_grads=self.no_sync_grads, grad_buffer=self.grad_buffer)  # memory's)
        for name, value in zip(CODE_OPTION_DEFAULTS, code):
            set_(name, value)
        recipe = check_step_recipe(self.schedule, self.comm_sms, (self.gpu,), load_skew=self.load_skew,
                                   model=model, capacity_factor=self.capacity_factor)
        set_("schedule", recipe.get("schedule", "1f1b"))
        set_("comm_sms", recipe.get("comm_sms", 0))
        set_("load_skew", recipe.get("load_skew"))

    @property
    def n_gpus(self) -> int:
        """GPUs the job runs on: the layout's ``tp x cp x pp x dp``."""
        return self.parallel.gpus

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step: ``micro_batch x grad_accum x dp``."""
        return self.micro_batch * self.grad_accum * self.parallel.dp

    def replace(self, **changes) -> "Job":
        """A copy with ``changes`` (checked again)."""
        return replace(self, **changes)

    def kwargs(self, kind: str) -> dict:
        """The keywords of one answer about this job: ``"memory"``
        (:func:`~llmsizing.memory.training_memory`), ``"step"`` (:func:`~llmsizing.layouts.step_time`),
        ``"time"`` (:func:`~llmsizing.time_cost.training_time`, timed on the layout's own step) or ``"plan"``
        (:func:`~llmsizing.planner.plan`: the model, GPU and recipe; the layout is what a plan searches, so
        the job's is not passed). ``grad_buffer`` goes to the memory and the plan, and only where set (an
        old job's keywords unchanged); ``loss``, ``tp_vocab`` and ``no_sync_grads`` to the memory where not
        their defaults, and a plan of a job with any of them not at its default is refused
        (:data:`PLAN_REFUSES_CODE_OPTIONS`: the search prices the defaults)."""
        recipe = dict(precision=self.precision, recompute=self.recompute,
                      recompute_layers=self.recompute_layers, **self._moe_options())
        buffer = {"grad_buffer": self.grad_buffer} if self.grad_buffer else {}
        if kind == "memory":
            return dict(model=self.model, batch=self.micro_batch, seq=self.seq, grad_accum=self.grad_accum,
                        parallel=self.parallel, optimizer=self.optimizer, attention=self.attention,
                        stack=self.stack, **recipe, **buffer, **self._code_options(),
                        **({"schedule": self.schedule} if self.schedule != "1f1b" else {}))
        if kind == "step":
            return dict(model=self.model, gpu=self.gpu, parallel=self.parallel, batch=self.micro_batch,
                        seq=self.seq, grad_accum=self.grad_accum, node=self.node, max_nodes=self.max_nodes,
                        ep_overlap=self.ep_overlap, kernel_efficiency=self.kernel_efficiency,
                        overlap=self.overlap, framework=self.framework, **recipe, **self._dispatch(),
                        **self._step_recipe(), **self._tp_backward())
        if kind == "time":
            return dict(model=self.model, gpu=self.gpu, parallel=self.parallel, seq=self.seq,
                        global_batch=self.global_batch, micro_batch=self.micro_batch, **recipe,
                        **self._dispatch(), **self._step_recipe(), **self._routing(),
                        **self._step_knobs())
        if kind == "plan":
            if self._code_options():
                raise ValueError(PLAN_REFUSES_CODE_OPTIONS.format(", ".join(
                    f"{k}={v!r}" for k, v in self._code_options().items())))
            return dict(model=self.model, gpus=(self.gpu.name,), seq=self.seq, global_batch=self.global_batch,
                        precision=self.precision, optimizer=self.optimizer, attention=self.attention,
                        stack=self.stack, max_nodes=self.max_nodes, ep_overlap=self.ep_overlap,
                        framework=self.framework, **self._moe_options(), **self._dispatch(), **buffer,
                        **self._op_sac(), **self._step_recipe(), **self._tp_backward())
        raise ValueError(f"kind must be one of 'memory', 'step', 'time', 'plan'; got {kind!r}")

    def _moe_options(self) -> dict:
        """``mtp_depth`` and ``capacity_factor`` where not their defaults (old calls' keywords unchanged)."""
        return {**({"mtp_depth": self.mtp_depth} if self.mtp_depth else {}),
                **({"capacity_factor": self.capacity_factor} if self.capacity_factor is not None else {})}

    def _code_options(self) -> dict:
        """``loss``, ``tp_vocab`` and ``no_sync_grads`` where not their defaults (issue 38: an old job's
        keywords unchanged)."""
        return {k: getattr(self, k) for k, v in CODE_OPTION_DEFAULTS.items() if getattr(self, k) != v}

    def _step_recipe(self) -> dict:
        """``schedule``, ``comm_sms`` and ``load_skew`` where not their defaults (moeapi42: an old job's
        keywords unchanged)."""
        return {**({"schedule": self.schedule} if self.schedule != "1f1b" else {}),
                **({"comm_sms": self.comm_sms} if self.comm_sms else {}),
                **({"load_skew": self.load_skew} if self.load_skew is not None else {})}

    def _routing(self) -> dict:
        """``ep_overlap`` and ``max_nodes`` where not their defaults, for ``training_time`` (moeapi42: it
        took neither before, so a job's days were those of its step without them)."""
        return {**({"ep_overlap": self.ep_overlap} if self.ep_overlap else {}),
                **({"max_nodes": self.max_nodes} if self.max_nodes != "model" else {})}

    def _step_knobs(self) -> dict:
        """``kernel_efficiency``, ``overlap`` and ``node`` where set, for ``training_time`` (jobtime42: it
        took none of them before, so a job's days were those of its step without them), and the stack:
        ``framework`` where named (range44: the range of the job's days is its stack's, as ``plan`` and
        ``step_time(job)`` state it; the pooled one before) with the job's own ``tp_backward_overlap``
        (``step_time`` resolves ``None`` by the stack, plan44), else ``tp_backward_overlap=True`` where the
        job's own keyword asks for it (an old job's keywords unchanged)."""
        stack = ({"framework": self.framework, **self._tp_backward()} if self.framework is not None else
                 {"tp_backward_overlap": True} if self.tp_backward_overlap else {})
        return {**{k: v for k, v in (("kernel_efficiency", self.kernel_efficiency), ("overlap", self.overlap),
                                     ("node", self.node)) if v is not None}, **stack}

    def _op_sac(self) -> dict:
        """A plan's ``recomputes`` for a job that runs torchtitan's op SAC: the default search's
        recomputations and the job's mode (the search as before for any other job)."""
        return {"recomputes": RECOMPUTE + (self.recompute,)} if self.recompute in OP_SAC_MODES else {}

    def _tp_backward(self) -> dict:      # (only when given: None is the stack's own, as before)
        return {} if self.tp_backward_overlap is None else {"tp_backward_overlap": self.tp_backward_overlap}

    def _dispatch(self) -> dict:
        """``dispatcher`` where not the default (an old call's keywords unchanged)."""
        return dispatcher_kwargs(self.dispatcher)

    @classmethod
    def from_plan_row(cls, row, model, *, seq: int, precision: str = "bf16-mixed", optimizer: str = "adamw",
                      attention: str = "flash", stack: str = "fused", cp_comm: str = "p2p",
                      expert_tp: bool = False, max_nodes="model", ep_overlap: float = 0.0,
                      kernel_efficiency: float | None = None, overlap: float | None = None,
                      framework: str | None = None, shared_expert_overlap: bool = False, mtp_depth: int = 0,
                      capacity_factor: float | None = None, grad_buffer: bool | str = False,
                      dispatcher: str = "alltoall", schedule: str = "1f1b", comm_sms: int = 0,
                      load_skew: float | None = None, tp_backward_overlap: bool | None = None) -> "Job":
        """The job one row of :func:`~llmsizing.planner.plan`'s frame prices (a ``Series`` or an
        ``itertuples()`` row), given the plan's own options (the keywords here are :func:`plan`'s, with its
        defaults; ``shared_expert_overlap`` goes to the layout; ``mtp_depth``, ``capacity_factor``,
        ``schedule``, ``comm_sms`` and ``load_skew`` to the job; ``grad_buffer`` to the job where the row's
        ZeRO stage is 0 or 1, as :func:`plan` applies it). ``training_memory(job)``, ``step_time(job)``
        and ``training_time(job, tokens=...)`` then reproduce the row's memory, step and days
        (``tests/test_job.py``). The row's ``virtual_stages``
        (interleaved chunks, 1 if absent) and its pipeline split (issue 34: a ``pp`` that does not divide the
        layers counts the embedding and the loss as a layer's place each,
        :func:`~llmsizing.plan_pricing.pipeline_split`) are the layout's."""
        import pandas as pd

        grad_buffer = check_grad_buffer_kind(grad_buffer)
        get = row.get if hasattr(row, "get") else functools.partial(getattr, row)
        n = get("recompute_layers", None)
        pp = int(get("pp"))
        # (the planner's split: Megatron-LM's even one where pp divides the layers, else the accounted one,
        # else (a DualPipe search's, dual48) uneven first and last stages: parallel.pipeline_split)
        par = Parallel(tp=int(get("tp")), cp=int(get("cp", 1)), pp=pp, dp=int(get("dp")),
                       zero=int(get("zero")), sp=bool(get("sp")), ep=int(get("ep", 1)), expert_tp=expert_tp,
                       cp_comm=cp_comm, virtual_stages=int(get("virtual_stages", 1)),
                       **pipeline_split(resolve_model(model, moe=True), pp),
                       **pipelined_zero_fields(int(get("zero")), pp),
                       **({"shared_expert_overlap": True} if shared_expert_overlap else {}))
        return cls(model, get("gpu"), seq, par, micro_batch=int(get("micro_batch")),
                   grad_accum=int(get("grad_accum")), precision=precision, optimizer=optimizer,
                   recompute=get("recompute"), recompute_layers=None if n is None or pd.isna(n) else int(n),
                   attention=attention, stack=stack, max_nodes=max_nodes, ep_overlap=ep_overlap,
                   kernel_efficiency=kernel_efficiency, overlap=overlap, framework=framework,
                   mtp_depth=mtp_depth, capacity_factor=capacity_factor,
                   grad_buffer=zero_grad_buffer(grad_buffer, int(get("zero"))), dispatcher=dispatcher,
                   schedule=schedule, comm_sms=comm_sms, load_skew=load_skew,
                   tp_backward_overlap=tp_backward_overlap)


#: The defaults of :func:`~llmsizing.memory.training_memory`'s options for what a run's own code does (issue
#: 38; :class:`Job`'s and the command line's: ``tests/test_job_code_options.py`` checks them against it).
CODE_OPTION_DEFAULTS = {"loss": "fp32", "tp_vocab": "split", "no_sync_grads": "none"}

#: Why ``plan(job)`` refuses a job whose ``loss``, ``tp_vocab`` or ``no_sync_grads`` is not the default
#: (issue 38): the planner's search (:func:`~llmsizing.planner.plan`, and
#: :func:`~llmsizing.fewest_gpus.min_gpus`) prices every layout's memory with the defaults, so the job's
#: option would be silently dropped.
PLAN_REFUSES_CODE_OPTIONS = (
    "plan(job) of a job with {}: the planner's search (plan, min_gpus) prices every layout's memory with "
    "loss='fp32', tp_vocab='split' and no_sync_grads='none' and cannot honour it. Price the job's own layout "
    "with training_memory(job) (max_micro_batch takes the same keywords), or plan a job with the defaults "
    "(job.replace(loss='fp32', tp_vocab='split', no_sync_grads='none'))")


def check_moe_options(model: Model, mtp_depth, capacity_factor) -> dict:
    """``mtp_depth`` and ``capacity_factor`` checked for ``model`` as every answer checks them (a depth from 0
    to 8, :func:`~llmsizing.mtp.check_mtp_depth`, and a capacity factor from 1 to 64,
    :func:`~llmsizing.moe.check_capacity_factor`, both for a mixture of experts only), as keywords: only those
    not at their defaults (``{}`` for ``mtp_depth=0, capacity_factor=None``: an old call's keywords). The one
    check of :class:`Job`, :func:`~llmsizing.planner.plan`, :func:`~llmsizing.fewest_gpus.min_gpus` and
    :func:`~llmsizing.time_cost.cost_by_gpu` (issue 35)."""
    depth = check_mtp_depth(model, mtp_depth)
    cap = check_capacity_factor(capacity_factor)
    if cap is not None and not model.is_moe:
        raise ValueError(f"capacity_factor={capacity_factor!r} drops tokens a mixture of experts routes; "
                         f"{model.name} is dense (experts=0): give capacity_factor=None")
    return {**({"mtp_depth": depth} if depth else {}),
            **({"capacity_factor": cap} if cap is not None else {})}


#: What :func:`check_step_recipe` refused (before dmin49) where an answer searches a layout with a search of
#: its own (:func:`~llmsizing.fewest_gpus.min_gpus`, and the layout :func:`~llmsizing.time_cost.training_time`
#: or :func:`~llmsizing.time_cost.cost_by_gpu` chooses through it). :func:`~llmsizing.planner.plan` searches
#: DualPipe since dual48 and ``min_gpus`` since dmin49 (issue 35: one answer per question), so nothing raises
#: it; the name stays for old imports.
SEARCH_REFUSES_DUALPIPE = (
    "schedule='dualpipe' is priced on a given layout (step_time, training_time with parallel= and "
    "global_batch=, a Job) and searched by plan(schedule='dualpipe') and min_gpus(schedule='dualpipe', "
    "grad_accum=...)")


def check_step_recipe(schedule="1f1b", comm_sms=0, gpus=(), *, searched: bool = False, load_skew=None,
                      model=None, capacity_factor=None) -> dict:
    """The step recipe's ``schedule`` (:data:`~llmsizing.moe_time.SCHEDULES`: ``"1f1b"``, ``"zb1p"`` or
    ``"dualpipe"``) and ``comm_sms`` (SMs kept by communication kernels, an integer from 0 to below each of
    ``gpus``' SM count, :func:`~llmsizing.moe_time.comm_sm_share`; DeepSeek-V3: 20 of the H800's 132)
    checked as :func:`~llmsizing.layouts.step_time` checks them, as keywords: only those not at their
    defaults (``{}`` for ``"1f1b"``, 0: an old call's keywords). ``searched``: for an answer that searches the
    layout with a search of its own, where DualPipe was refused until
    :func:`~llmsizing.fewest_gpus.min_gpus` searched it (dmin49; :func:`~llmsizing.planner.plan` since
    dual48): kept for old calls, it refuses nothing now. ``load_skew`` (``None``: the
    measured default of :func:`~llmsizing.moe_time.load_skew`; else 1 to 64, the slowest expert rank's
    routed work over the mean): a mixture of experts' only (refused for a dense ``model``) and not with
    ``capacity_factor``, which sets it, as ``step_time`` refuses both. The one check of :class:`Job`,
    :func:`~llmsizing.planner.plan`, :func:`~llmsizing.fewest_gpus.min_gpus`,
    :func:`~llmsizing.time_cost.training_time` and :func:`~llmsizing.time_cost.cost_by_gpu` (moeapi42, issue
    35: one MoE path; DeepSeek-V3's own recipe)."""
    schedule = check_choice("schedule", schedule, SCHEDULES)
    n = check_int("comm_sms", comm_sms, minimum=0, maximum=1024)
    for g in gpus:
        comm_sm_share(g, n)                        # (an SM count not known, or not below it: ValueError)
    check_bool("searched", searched)            # (DualPipe searched by every answer that searches: dmin49)
    skew = None if load_skew is None else check_number("load_skew", load_skew, minimum=1.0, maximum=64.0)
    if skew is not None and model is not None and not model.is_moe:
        raise ValueError(f"load_skew={load_skew!r} is a mixture of experts' routed load; {model.name} is "
                         "dense (experts=0): give load_skew=None")
    if skew is not None and capacity_factor is not None:
        raise ValueError(f"load_skew={load_skew!r} with capacity_factor={capacity_factor!r}: the capacity "
                         "sets the load skew (moe_time.load_skew); give one of them")
    return {**({"schedule": schedule} if schedule != "1f1b" else {}), **({"comm_sms": n} if n else {}),
            **({"load_skew": skew} if skew is not None else {})}


def takes_job(kind: str):
    """Let an answer take a :class:`Job` as its first argument: ``f(job, **overrides)`` is
    ``f(**job.kwargs(kind), **overrides)``; any other first argument is the old call, unchanged."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kw):
            if args and isinstance(args[0], Job):
                if len(args) > 1:
                    raise TypeError(f"{fn.__name__}(job, ...): give the other arguments by keyword")
                return fn(**{**args[0].kwargs(kind), **kw})
            return fn(*args, **kw)

        return wrapper

    return decorate
