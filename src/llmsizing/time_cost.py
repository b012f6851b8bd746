"""Training time and cost: days, GPU-hours and dollars (Part III, "FLOPs, MFU and training time" and "Cost").

:func:`training_time` is the entry point for one run, a run on its layout's own step, or a run in stages
(:mod:`llmsizing.stages`); :func:`cost_by_gpu` prices the finished job on each GPU type. The arithmetic (FLOPs
per token, the MFU and HFU, GPU-hours that do not depend on the GPU count) and the calibrated MFU are
:mod:`llmsizing.mfu`'s, whose names are importable from here too.
"""

from __future__ import annotations

import contextlib
import warnings as _warnings

from ._compat import retire as _retire
from ._validate import check_bool, check_choice, check_fraction, check_int, check_number
from .catalog import get_gpu, gpu_price, resolve_gpus, resolve_model, resolve_prices
from .fewest_gpus import dualpipe_fewest_accum, min_gpus
from .mfu import (FLOPS_CONVENTIONS, MFU_MODEL_CSV, PUBLISHED_RUNS_CSV, MfuEstimate,  # noqa: F401
                  TrainingTime, _causal_factor, _layout_label, _mfu_model, _peak_flops, _rerun_layers,
                  _runs_frame, _time_at, implied_mfu, mfu_estimate, mfu_model_table, mfu_range_factors,
                  mfu_residuals, published_runs, run_time)
from .flops import RECOMPUTE
from .hardware import effective_dtype
from .all_to_all import DEFAULT_DISPATCHER, check_dispatcher
from .job import check_moe_options, check_step_recipe, takes_job
from .model import Model
from .mtp import check_mtp_depth
from .moe_layouts import ep_candidates
from .moe_default import planned_together, routing_kwargs
from .parallel import OP_SAC_MODES, RECOMPUTE_MODES, Parallel, resolve_parallel
from .precision import compute_dtype
from .plan_space import cp_search_kwargs
from .planner import check_global_batch
from .stages import _staged, layout_time
# the one MoE time path (issue 35) lives in stages, below this module: stages=... and whole runs use it too
from .stages import (MOE_DEFAULT_BATCH_TOKENS, MOE_LAYOUTS_KEPT, _kept_moe_layout, _moe_default_layout,  # noqa: F401
                     _moe_run, _moe_step_run, moe_default_global_batch, moe_default_layout)


@takes_job("time")
def training_time(model: Model | str, *, tokens: float | None = None, gpu, n_gpus: int | None = None,
                  seq: int | None = None, parallel: Parallel | None = None, mfu: float | None = None,
                  mfu_range: tuple[float, float] | None = None, price_usd_per_gpu_hour: float | None = None,
                  recompute: str = "none", dtype: str | None = None, causal: bool = False,
                  whole_run: bool = False, precision: str | None = None, stages=None,
                  plan_options: dict | None = None, goodput: float = 1.0, recompute_layers: int | None = None,
                  global_batch: int | None = None, micro_batch: int = 1, moe_dense_mfu: bool = False,
                  framework: str | None = None, tokens_per_step: float | None = None, mtp_depth: int = 0,
                  capacity_factor: float | None = None, dispatcher: str = "alltoall", schedule: str = "1f1b",
                  comm_sms: int = 0, ep_overlap: float = 0.0, max_nodes="model",
                  load_skew: float | None = None, kernel_efficiency: float | None = None,
                  overlap: float | None = None, node=None, tp_backward_overlap: bool | None = None,
                  accounted_split: bool = False, cp_degrees=None, cp_comm: str = "p2p"):
    """Days, GPU-hours and dollars to train ``model`` on ``tokens`` tokens of length ``seq`` with ``n_gpus``
    GPUs of type ``gpu`` (or ``parallel.gpus`` when only a layout is given). Without either, the GPU-hours and
    the cost stand (they do not depend on the GPU count; a model card gives none) and the days are ``None``.
    ``training_time(job, tokens=...)`` takes a :class:`~llmsizing.job.Job`: the run on its layout's own step.

    **On a layout's own step.** ``parallel`` with ``global_batch`` (sequences per optimizer step;
    ``micro_batch`` sequences per GPU and micro-batch) times the run as :func:`~llmsizing.planner.plan` and
    :func:`~llmsizing.layouts.step_time` do: the MFU is the layout's, from its step, with the calibrated range
    of the GPU's generation around it, so a plan row and this call give the same days (``tests/test_job.py``).

    ``mfu`` defaults to the calibrated estimate (:func:`mfu_estimate`: by GPU generation and dtype, model
    size, sequence length, full recomputation, and ``whole_run`` for a whole run's GPU-hours with its
    restarts), with the range of that generation's published runs; the result's ``warnings`` say when the run
    lies outside them. An ``mfu`` given without ``mfu_range`` is taken as exact (a range of one point). The
    MFU is end to end: it already
    includes communication, bubbles and restarts, so ``parallel`` only sets the GPU count here (the planner
    derives a layout's MFU from its step time). ``price_usd_per_gpu_hour`` defaults to the catalogue's
    on-demand price (its source and date are in ``data/gpus.csv``; prices move). ``recompute`` changes the
    HFU, not the MFU (recomputation is work the model does not need); ``recompute_layers`` (with
    ``recompute="full"``) is partial recomputation, the first that many layers of each model chunk of
    ``parallel`` (the model as one chunk without a layout; Megatron-LM's block method,
    :func:`~llmsizing.memory.training_memory`): the HFU counts those layers' second forward, and the
    calibrated MFU takes that share of full recomputation's term (:func:`mfu_estimate`). ``dtype`` (the peak
    the MFU is of) defaults to the ``precision`` recipe's (:func:`~llmsizing.precision.compute_dtype`):
    ``precision="fp8-mixed"`` times the run at the FP8 dense peak with the FP8 calibration and band, as
    ``dtype="fp8"`` does. Taught in the "FLOPs, MFU and training time" chapter.

    **What the planner knows** (issue 34). ``tokens_per_step`` (the global batch in tokens per optimizer
    step, e.g. 4,194,304) with ``n_gpus`` and ``framework`` (the stack: e.g. ``"megatron-core"``,
    ``"torchtitan"``, ``"deepspeed"``; ``None`` is unknown) are terms of the calibrated estimate (a stack
    offset and a term in tokens per GPU per step), whose range is its GPU generation's
    (:mod:`llmsizing.mfu_inputs`; measured coverage in ``data/intervals.csv``, area ``training-inputs``).
    Without ``tokens_per_step`` (the default) the same model reads the run as its fit reads one whose source
    publishes no batch, with the same range.

    **Stages.** ``stages=[(tokens, seq), ...]`` (or :class:`Stage` objects, each with its own layout, global
    batch, GPU count or MFU) instead of ``tokens``/``seq`` plans a run that changes its context on the way and
    returns a :class:`StagedTrainingTime`: one :class:`TrainingTime` per stage and the totals. Each stage gets
    its MFU as :class:`Stage` says (its own ``seq`` in the calibrated estimate, or its own layout). ``dtype``,
    ``causal`` and the price apply to every stage; ``mfu``, ``mfu_range`` and ``whole_run`` to the stages on
    the calibrated estimate (a layout's or a plan's MFU is a steady state from its step time, with the
    calibrated range around it); ``recompute`` (and ``recompute_layers``) to every stage but a planned one
    (the plan picks its own). ``n_gpus`` or ``parallel`` give the GPU count of a stage that names none. A
    stage planned by :func:`~llmsizing.planner.plan` gets ``plan_options`` (e.g.
    ``{"precision": "bf16-mixed-fp32-grads"}``) passed on. A single stage gives the same numbers as the call
    with that ``tokens`` and ``seq``.

    **A mixture of experts** (issues 24 and 35) is timed on the MoE step of :mod:`llmsizing.moe_time`, the one
    :func:`~llmsizing.layouts.step_time` and :func:`~llmsizing.planner.plan` use (grouped expert GEMMs,
    routing kernels, load skew, the all-to-all): on ``parallel`` (which may carry ``ep``; at
    :func:`moe_default_global_batch` sequences) or, without it, on :func:`moe_default_layout`: the planner's
    fastest plan on exactly ``n_gpus`` (at about 2**22 tokens a step), or without ``n_gpus`` the fewest GPUs
    that hold a step (the days are then those on them); then as ``global_batch=`` does; a warning names the
    layout. ``whole_run=True`` takes the calibration's whole-run share of that step's MFU
    (:func:`~llmsizing.mfu.whole_run_factor`), and each stage of ``stages`` without an MFU or a global batch
    of its own is timed so too (issue 35). A given ``mfu`` or ``mfu_range``, or an ``n_gpus`` with no such
    layout, keep the calibrated MFU at the active size (a warning says it is an extrapolation from dense
    runs). ``moe_dense_mfu=True`` (deprecated) asks for that old estimate, stages and whole runs included.
    ``mtp_depth`` (issue 35): DeepSeek-V3's multi-token-prediction modules on the MoE step's last stage, their
    FLOPs (:func:`~llmsizing.moe.mtp_flops_per_token`, 3.8% of V3's) and memory (:mod:`llmsizing.mtp`), as
    ``step_time(mtp_depth=)`` and ``training_memory(mtp_depth=)`` give them; only on a MoE step (not with
    ``mfu``, ``mfu_range``, ``stages`` or ``moe_dense_mfu``). Without ``parallel`` the layout is
    :func:`moe_default_layout`'s, planned without the module (``plan()`` does not search it).
    ``capacity_factor`` (token dropping; ``None``: dropless) likewise: the step's load skew capped
    (:func:`~llmsizing.moe_time.load_skew`) and the expert buffers at that capacity. ``dispatcher`` (the MoE
    token dispatcher, :func:`~llmsizing.layouts.step_time`'s): with ``global_batch``, or on the MoE step
    without it (its layout then planned with it), as ``mtp_depth``. ``cp_degrees`` and ``cp_comm`` (the
    context-parallel degrees and K/V exchange searched; default ``plan()``'s) go to the search of that layout
    (:func:`moe_default_layout`: the plan and the fewest GPUs), the only one this call makes. Chapter 18.

    **The step's recipe** (moeapi42, issue 35: DeepSeek-V3's own recipe through every entry point).
    ``schedule`` (``"1f1b"``, ``"zb1p"``, ``"dualpipe"``), ``comm_sms`` (SMs kept by communication kernels,
    below the GPU's count), ``ep_overlap`` (0 to 1, the all-to-all's hidden share) and ``max_nodes``
    (``"model"``, ``None`` or a node count): :func:`~llmsizing.layouts.step_time`'s, priced on the layout's
    step as it prices them, with ``global_batch`` (any model) or on a mixture of experts' MoE step without it
    (its layout then planned with them, through the fewest GPUs without ``n_gpus``, which search
    ``"dualpipe"`` too since dmin49, as ``plan(schedule="dualpipe")`` does); not with
    ``stages``, ``mfu``, ``mfu_range`` or
    ``moe_dense_mfu``. DeepSeek-V3 as its report states it: ``parallel=DEEPSEEK_V3_LAYOUT`` (with its split),
    ``global_batch``, ``precision="fp8-deepseek"``, ``mtp_depth=1``, ``schedule="dualpipe"``, ``comm_sms=20``,
    ``ep_overlap=1``, ``max_nodes=4`` (``tests/test_moe_one_step.py``). ``load_skew`` (a measured skew in
    place of the default; not with ``capacity_factor``) likewise.

    **The step model's own knobs** (jobtime42, issue 35: a :class:`~llmsizing.job.Job`'s days from the step
    :func:`~llmsizing.layouts.step_time` gives it). ``kernel_efficiency`` (the share of the dense peak while
    computing), ``overlap`` (one hidden share of all communication), ``node`` (a
    :func:`~llmsizing.network.get_node` name or node) and ``tp_backward_overlap`` (Megatron's column-parallel
    backward hiding its TP collectives, plan44) are ``step_time``'s, checked there: with
    ``global_batch`` and ``parallel`` only (``None``, the default: as before). A calibrated MFU, or a
    layout this call plans, has no such step, so they are refused there. ``framework`` with
    ``global_batch`` and ``parallel`` (range44; refused there before, so no old call changes) names the
    step's stack as ``step_time(framework=)`` does: the range of the days, GPU-hours and cost is that
    stack family's (:func:`~llmsizing.mfu.layout_range_factors`), the one :func:`~llmsizing.planner.plan`
    states for the same row, and its TP overlap is the stack's where ``tp_backward_overlap`` is ``None``.
    ``training_time(job)`` of a :class:`~llmsizing.job.Job` that names a ``framework`` passes it so: its
    ``days_low``/``days_high`` (and the other ends) moved from the pooled range to the stack's (range44;
    a job with no framework is unchanged).

    **Goodput.** ``goodput`` (default 1.0: today's numbers, a steady state) is the useful share of wall time
    left by interruptions and checkpoints, from :func:`~llmsizing.reliability.goodput`; days, GPU-hours and
    cost are divided by it (the tokens per second stay the steady state's). It replaces the flat "add 10-20%
    for failures". Not with ``whole_run=True``, whose calibrated MFU already includes a whole run's restarts
    (that would count them twice), nor with ``stages`` (divide the totals by it)."""
    model = resolve_model(model, moe=True)
    goodput = check_fraction("goodput", goodput)
    if goodput < 1 and whole_run:
        raise ValueError(f"goodput={goodput:g} with whole_run=True counts the restarts twice: the whole-run "
                         "MFU already includes them; give one of them")
    if (framework is not None and global_batch is None or tokens_per_step is not None) and (
            global_batch is not None or stages is not None or model.is_moe):
        raise ValueError("framework= and tokens_per_step= time a dense model on the calibrated estimate: not "
                         "with global_batch=, stages= or a mixture of experts (plan() and Job take a "
                         "framework; framework= also names the stack of a layout's step, with "
                         "global_batch= and parallel=)")
    g = get_gpu(gpu)
    disp = check_dispatcher(dispatcher).name
    if disp != DEFAULT_DISPATCHER and global_batch is None and (
            stages is not None or mfu is not None or mfu_range is not None or moe_dense_mfu):
        raise ValueError(f"dispatcher={dispatcher!r} prices a mixture of experts' MoE step: not with "
                         "stages=, mfu=, mfu_range= or moe_dense_mfu=True")
    step_recipe = {**check_step_recipe(schedule, comm_sms, (g,), load_skew=load_skew, model=model,
                                       capacity_factor=capacity_factor),
                   **routing_kwargs(ep_overlap, max_nodes)}
    if step_recipe and (stages is not None or mfu is not None or mfu_range is not None or moe_dense_mfu):
        raise ValueError(f"{_recipe_text(step_recipe)} price a layout's step: not with stages=, mfu=, "
                         "mfu_range= or moe_dense_mfu=True")
    step_only = {k: v for k, v in (("kernel_efficiency", kernel_efficiency), ("overlap", overlap),
                                   ("node", node), ("tp_backward_overlap", tp_backward_overlap))
                 if v is not None}
    if step_only and global_batch is None:
        raise ValueError(f"{_recipe_text(step_only)}: step_time's knobs, priced on a given layout's step "
                         "only: give global_batch= with parallel= (the calibrated MFU, or a layout this "
                         "call plans, has no such step)")
    moe_opts = check_mtp_depth(model, mtp_depth) or capacity_factor is not None
    if moe_opts and (stages is not None or mfu is not None or mfu_range is not None or moe_dense_mfu):
        raise ValueError(f"mtp_depth={mtp_depth} and capacity_factor={capacity_factor!r} price a mixture of "
                         "experts' MoE step: not with stages=, mfu=, mfu_range= or moe_dense_mfu=True")
    if stages is None:
        dtype = compute_dtype("bf16-mixed" if precision is None else precision, dtype)
    accounted = {"accounted_split": True} if check_bool("accounted_split", accounted_split) else {}
    if accounted and (not model.is_moe or parallel is not None or global_batch is not None
                      or stages is not None or mfu is not None or mfu_range is not None or moe_dense_mfu):
        raise ValueError("accounted_split=True searches a mixture of experts' accounted pipeline splits for "
                         "the layout this call plans (plan()'s, min_gpus'): not with parallel=, "
                         "global_batch=, stages=, mfu=, mfu_range= or moe_dense_mfu=True, nor for a dense "
                         "model (no layout is searched there; a planned Stage takes plan_options="
                         "{'accounted_split': True})")
    # (the context-parallel degrees and K/V exchange of the layout this call plans, where it plans one)
    cps = cp_search_kwargs(cp_degrees, cp_comm, seq)
    if cps and (not model.is_moe or parallel is not None or global_batch is not None
                or stages is not None or mfu is not None or mfu_range is not None or moe_dense_mfu):
        raise ValueError(f"{_recipe_text(cps)}: the context-parallel degrees searched for the layout this "
                         "call plans (plan()'s, min_gpus'): not with parallel=, global_batch=, stages=, "
                         "mfu=, mfu_range= or moe_dense_mfu=True, nor for a dense model (no layout is "
                         "searched there; a planned Stage takes plan_options={'cp_degrees': ...})")
    if check_bool("moe_dense_mfu", moe_dense_mfu):
        _warnings.warn("moe_dense_mfu=True times a mixture of experts at the calibrated MFU of a dense model "
                       "of its active size, not on its MoE step (llmsizing.moe_time); it goes in the next "
                       "release", DeprecationWarning, stacklevel=3)
    elif (model.is_moe and global_batch is None and stages is None and mfu is None and mfu_range is None
          and tokens is not None and seq is not None):
        if micro_batch != 1:
            raise ValueError(f"micro_batch={micro_batch!r} applies with global_batch= and parallel= only (a "
                             "run timed on its layout's step)")
        run = _moe_run(model, g, tokens=tokens, seq=check_int("seq", seq), n_gpus=n_gpus, parallel=parallel,
                       recompute=check_choice("recompute", recompute, RECOMPUTE),
                       recompute_layers=recompute_layers,
                       precision="bf16-mixed" if precision is None else precision, dtype=dtype, causal=causal,
                       price=price_usd_per_gpu_hour, goodput=goodput, whole_run=whole_run,
                       mtp_depth=mtp_depth, capacity_factor=capacity_factor, dispatcher=disp, **step_recipe,
                       **accounted, **cps)
        if run is not None:
            return run[0]
    if disp != DEFAULT_DISPATCHER and global_batch is None:
        raise ValueError(f"dispatcher={dispatcher!r}: no MoE step to price it on (give tokens=, seq= and "
                         f"global_batch= with parallel=, or an n_gpus that {model.name} has a layout on; a "
                         "dense model has neither)")
    if step_recipe and global_batch is None:
        raise ValueError(f"{_recipe_text(step_recipe)}: no step to price them on (give tokens=, seq= and "
                         f"global_batch= with parallel=, or for a mixture of experts an n_gpus that "
                         f"{model.name} has a layout on; a dense model's calibrated MFU has no step)")
    if moe_opts and global_batch is None:
        raise ValueError(f"mtp_depth={mtp_depth}, capacity_factor={capacity_factor!r}: no MoE step to price "
                         f"them on (give tokens=, seq= and parallel=, or an n_gpus that {model.name} has a "
                         "layout on; a dense model has neither)")
    if global_batch is not None:
        if stages is not None or parallel is None or mfu is not None or mfu_range is not None or whole_run:
            raise ValueError("global_batch= times the run on its layout's own step: give it with parallel= "
                             "(and micro_batch=), without stages=, mfu=, mfu_range= or whole_run=")
        if tokens is None or seq is None:
            raise ValueError("give tokens= (a number > 0) and seq= (an integer >= 1) with global_batch=")
        par = resolve_parallel(parallel, model, check_int("seq", seq))
        if n_gpus is not None and check_int("n_gpus", n_gpus) != par.gpus:
            raise ValueError(f"n_gpus={n_gpus} but parallel uses tp*cp*pp*dp = {par.gpus} GPUs; give one of "
                             "them")
        t = layout_time(model, g, par, tokens=check_number("tokens", tokens, allow_equal=False), seq=seq,
                        micro_batch=check_int("micro_batch", micro_batch),
                        global_batch=check_global_batch(global_batch),
                        precision="bf16-mixed" if precision is None else precision, dtype=dtype,
                        # (on the layout's own step: torchtitan's op SAC too, as step_time prices it)
                        recompute=check_choice("recompute", recompute, RECOMPUTE_MODES),
                        recompute_layers=recompute_layers, causal=check_bool("causal", causal),
                        price_value=gpu_price(g, price_usd_per_gpu_hour), goodput=goodput,
                        mtp_depth=mtp_depth, capacity_factor=capacity_factor, dispatcher=disp,
                        **step_recipe, **step_only, **({} if framework is None else {"framework": framework}))
        return t
    if isinstance(recompute, str) and recompute in OP_SAC_MODES:     # (was "unknown recompute"; review30a)
        raise ValueError(f"recompute={recompute!r}, torchtitan's op SAC, is timed on a layout's own step "
                         "only (the calibrated MFU has no op-SAC term): give global_batch= with parallel= "
                         "(and micro_batch=)")
    if stages is not None:
        if goodput < 1:
            raise ValueError("goodput applies to a single stage; with stages=, divide the totals' days and "
                             "GPU-hours by it")
        if tokens is not None or seq is not None:
            raise ValueError("give tokens= and seq=, or stages=[(tokens, seq), ...], not both")
        return _staged(model, g, stages, n_gpus=n_gpus, parallel=parallel, mfu=mfu, mfu_range=mfu_range,
                       price=price_usd_per_gpu_hour, recompute=recompute, dtype=dtype, causal=causal,
                       whole_run=whole_run, plan_options=plan_options, recompute_layers=recompute_layers,
                       precision=precision, moe_dense_mfu=moe_dense_mfu)
    if plan_options is not None:
        raise ValueError("plan_options applies to stages=[Stage(..., global_batch=...)] only")
    if micro_batch != 1:
        raise ValueError(f"micro_batch={micro_batch!r} applies with global_batch= and parallel= only (a run "
                         "timed on its layout's step)")
    return run_time(model, tokens=tokens, gpu=g, n_gpus=n_gpus, seq=seq, parallel=parallel, mfu=mfu,
                    mfu_range=mfu_range, price_usd_per_gpu_hour=price_usd_per_gpu_hour, recompute=recompute,
                    dtype=dtype, causal=causal, whole_run=whole_run, goodput=goodput,
                    recompute_layers=recompute_layers, framework=framework, tokens_per_step=tokens_per_step,
                    precision="bf16-mixed" if precision is None else precision)


def _recipe_text(kw: dict) -> str:
    """The step-recipe keywords ``kw`` as given: ``"schedule='zb1p', comm_sms=20"``."""
    return ", ".join(f"{k}={v!r}" for k, v in kw.items())


def cost_by_gpu(model: Model | str, *, tokens: float, seq: int, gpus=None, batch: int = 1,
                recompute: str = "full", mfu: float | None = None, prices: dict | None = None,
                max_gpus: int = 65536, ep_degrees=None, moe_dense_mfu: bool = False, mtp_depth: int = 0,
                capacity_factor: float | None = None, dispatcher: str = "alltoall", schedule: str = "1f1b",
                comm_sms: int = 0, ep_overlap: float = 0.0, max_nodes="model",
                load_skew: float | None = None, accounted_split: bool = False, cp_degrees=None,
                cp_comm: str = "p2p"):
    """The cost of the finished job on each GPU type, not the hourly rate: for each of ``gpus`` (default: the
    whole catalogue), the fewest GPUs that hold a training step (:func:`~llmsizing.fewest_gpus.min_gpus`,
    micro-batch ``batch`` of ``seq`` tokens with ``recompute``), the days on that many, and the GPU-hours and
    dollars of the run (:func:`training_time`), with the MFU range. ``prices`` maps a GPU name to a USD price
    per GPU-hour (default: the catalogue's), any spelling :func:`~llmsizing.catalog.get_gpu` accepts; a key
    that names no GPU is refused, and so is a GPU listed twice. A GPU type on which nothing fits within
    ``max_gpus`` gets a ``fits`` of False and a ``why`` instead of numbers. ``dtype`` says the format each GPU
    is priced in: ``"bf16"``, or ``"fp16"`` on a GPU without BF16 (the V100 trains the same recipe in FP16
    mixed precision, at its FP16 rate: :func:`~llmsizing.hardware.dense_tflops`). ``price_kind`` is the
    price's :attr:`~llmsizing.catalog.GPU.price_kind`: sorted by cost, the GPUs with an *estimated* price
    after all the others (never ranked as if it were a list price). Taught in the "Cost" chapter.

    A mixture of experts (issue 24) gets each GPU's fewest GPUs from :func:`~llmsizing.fewest_gpus.min_gpus`'s
    own search over expert parallelism (``ep`` among the divisors of its routed experts, or ``ep_degrees``),
    and its run from :func:`training_time` on that many GPUs: the MoE step (:mod:`llmsizing.moe_time`) of the
    fastest plan of :func:`~llmsizing.planner.plan` on exactly that many (:func:`moe_default_layout`, which
    the ``layout`` and ``ep`` columns then name), unless ``mfu`` is given or ``moe_dense_mfu=True``
    (deprecated: the calibrated MFU at the active size). The frame then has an ``ep`` column after ``layout``
    and a ``warnings`` column (``training_time``'s warnings, joined by `` | ``), and
    ``attrs["warnings"]`` lists every distinct one once. A dense model's frame is as before (no ``ep``, no
    ``warnings``). ``mtp_depth`` (DeepSeek-V3's multi-token-prediction modules) and ``capacity_factor``
    (token dropping; ``None``: dropless) go to all three, the fewest GPUs, the plan and the step (issue 35:
    one MoE path); not with ``mfu`` or ``moe_dense_mfu``, which do not time the MoE step. ``dispatcher``
    (the MoE token dispatcher, :data:`~llmsizing.all_to_all.DISPATCHERS`) likewise, to the step of all three.
    The step's recipe (moeapi42): ``schedule`` (``"1f1b"``, ``"zb1p"`` or, since dmin49, ``"dualpipe"``:
    the fewest GPUs DualPipe runs on, :func:`~llmsizing.fewest_gpus.min_gpus` at
    :func:`~llmsizing.fewest_gpus.dualpipe_fewest_accum` micro-batches, the count ``plan(schedule=
    "dualpipe")`` gives), ``comm_sms`` and ``load_skew`` to all three, ``ep_overlap`` and ``max_nodes`` to the
    plan and the step (:func:`training_time`'s); a GPU whose SM count is not known, or not above
    ``comm_sms``, gets a ``fits`` of False and the reason. Not with ``mfu`` or ``moe_dense_mfu``.
    ``accounted_split=True`` (a bool; off by default, as ``plan()`` and
    :func:`~llmsizing.fewest_gpus.min_gpus` take it; cost49): a mixture of experts' accounted pipeline splits
    too, in the fewest GPUs and the plan on them (a dense model's search has them always). ``cp_degrees`` and
    ``cp_comm``: the context-parallel degrees and K/V exchange searched, as :func:`~llmsizing.planner.plan`
    and :func:`~llmsizing.fewest_gpus.min_gpus` take them (default: ``plan()``'s, none below 16K tokens, up
    to 32 at long context), in the fewest GPUs and the plan on them. The plans of the GPU types that share a
    global batch are searched together (:func:`~llmsizing.moe_default.planned_together`, the same answers;
    dual50). Chapter 18."""
    import pandas as pd

    from .catalog import list_gpus

    model = resolve_model(model, moe=True)
    if ep_degrees is not None:                         # refused here, not as a "does not fit" on every GPU
        ep_degrees = ep_candidates(model, ep_degrees)
    options = check_moe_options(model, mtp_depth, capacity_factor)          # ({} by default: as before)
    if options and (mfu is not None or moe_dense_mfu):
        raise ValueError(f"mtp_depth={mtp_depth} and capacity_factor={capacity_factor!r} price a mixture of "
                         "experts' MoE step: not with mfu= or moe_dense_mfu=True")
    if check_dispatcher(dispatcher).name != DEFAULT_DISPATCHER:    # (the step's only, as max_nodes travels)
        if mfu is not None or moe_dense_mfu:
            raise ValueError(f"dispatcher={dispatcher!r} prices a mixture of experts' MoE step: not with "
                             "mfu= or moe_dense_mfu=True")
        options = {**options, "dispatcher": dispatcher}
    recipe = check_step_recipe(schedule, comm_sms, searched=True, load_skew=load_skew, model=model,
                               capacity_factor=capacity_factor)      # (each GPU's SMs: on its own row)
    routing = routing_kwargs(ep_overlap, max_nodes)
    if (recipe or routing) and not model.is_moe:
        raise ValueError(f"{_recipe_text({**recipe, **routing})}: cost_by_gpu prices a dense model at the "
                         "calibrated MFU, which has no step to price them on (training_time with parallel= "
                         "and global_batch= does)")
    if (recipe or routing) and (mfu is not None or moe_dense_mfu):
        raise ValueError(f"{_recipe_text({**recipe, **routing})} price a mixture of experts' MoE step: not "
                         "with mfu= or moe_dense_mfu=True")
    # (a mixture of experts' accounted splits, as plan(accounted_split=True): to the fewest GPUs and the plan)
    accounted = {"accounted_split": True} if check_bool("accounted_split", accounted_split) else {}
    moe_kw = {**({"ep_degrees": ep_degrees} if ep_degrees is not None else {}), **options}
    # (DualPipe: the micro-batches that let every pp it runs, its memory the same for all: dmin49)
    accum = {"grad_accum": dualpipe_fewest_accum(model)} if recipe.get("schedule") == "dualpipe" else {}
    gpu_list = resolve_gpus(list_gpus() if gpus is None else gpus)
    prices = resolve_prices(prices, gpu_list)
    # everything checked before the first GPU, so that a bad argument is refused even where nothing fits
    tokens = check_number("tokens", tokens, allow_equal=False)
    seq = check_int("seq", seq)
    cps = cp_search_kwargs(cp_degrees, cp_comm, seq)       # (min_gpus' and the plan's: only when given)
    batch = check_int("batch", batch)
    check_choice("recompute", recompute, RECOMPUTE)
    mfu = None if mfu is None else check_fraction("mfu", mfu)
    max_gpus = check_int("max_gpus", max_gpus)
    if check_bool("moe_dense_mfu", moe_dense_mfu):
        _warnings.warn("moe_dense_mfu=True prices a mixture of experts at the calibrated MFU of a dense "
                       "model of its active size, not on its MoE step (llmsizing.moe_time); it goes in the "
                       "next release", DeprecationWarning, stacklevel=3)
    price_of = {g.name: prices[g.name] if g.name in prices else gpu_price(g, name="prices") for g in gpu_list}
    moe_step = model.is_moe and mfu is None and not moe_dense_mfu     # (timed on the fastest plan on as many)

    def fewest(g, count_only=False):
        return min_gpus(model, g, batch=batch, seq=seq, recompute=recompute, max_gpus=max_gpus, **moe_kw,
                        **recipe, **accum, **accounted, **cps,
                        **({"_count_only": True} if count_only else {}))

    # each GPU type's fewest GPUs first (only the count where the MoE step is timed: dual50), then the runs,
    # the fastest plans of the GPU types sharing a global batch searched together (planned_together)
    counts = {}
    for g in gpu_list:
        try:
            counts[g.name] = fewest(g, count_only=moe_step)
        except ValueError as e:
            counts[g.name] = e
    found = [(g, counts[g.name]) for g in gpu_list if isinstance(counts[g.name], int)]
    together = planned_together(model, found, seq=seq, recompute=recompute, precision="bf16-mixed",
                                ep_degrees=ep_degrees, **options, **recipe, **routing, **accounted, **cps) \
        if moe_step else contextlib.nullcontext()
    rows, seen = [], []
    with together:
        for g in gpu_list:
            row = {"gpu": g.name, "price_usd_per_gpu_hour": price_of[g.name], "dtype": effective_dtype(g)}
            if isinstance(got := counts[g.name], Exception):
                rows.append({**row, "fits": False, "why": str(got)})
                continue
            run = None
            if moe_step:
                try:
                    run = _moe_run(model, g, tokens=tokens, seq=seq, n_gpus=got, parallel=None,
                                   recompute=recompute, recompute_layers=None, precision="bf16-mixed",
                                   dtype=compute_dtype("bf16-mixed"), causal=False,
                                   price=row["price_usd_per_gpu_hour"], goodput=1.0, ep_degrees=ep_degrees,
                                   **options, **recipe, **routing, **accounted, **cps)
                except ValueError as e:                  # e.g. a step so slow that its MFU is below 0.1%
                    rows.append({**row, "fits": False, "why": str(e)})
                    continue
                # (no layout of the plan's on that many: the fewest GPUs' own, searched again in full)
                plan = fewest(g) if run is None else None
            else:
                plan = got
            if run is not None:
                t, par = run
                gpus, layout = par.gpus, par
            else:
                gpus, layout = plan.gpus, plan.parallel
                with _warnings.catch_warnings():
                    _warnings.simplefilter("ignore", DeprecationWarning)
                    t = training_time(model, tokens=tokens, gpu=g, n_gpus=plan.gpus, seq=seq, mfu=mfu,
                                      price_usd_per_gpu_hour=row["price_usd_per_gpu_hour"],
                                      recompute=recompute, moe_dense_mfu=moe_dense_mfu and model.is_moe)
            moe_cols = {"ep": layout.ep} if model.is_moe else {}
            rows.append({**row, "fits": True, "why": "", "min_gpus": gpus, "layout": _layout_label(layout),
                         **moe_cols, "tokens_per_s_per_gpu": t.tokens_per_s_per_gpu,
                         "days_on_min_gpus": t.days, "gpu_hours": t.gpu_hours,
                         "gpu_hours_low": t.gpu_hours_low, "gpu_hours_high": t.gpu_hours_high,
                         "cost_usd": t.cost_usd, "cost_usd_low": t.cost_usd_low,
                         "cost_usd_high": t.cost_usd_high,
                         **({"warnings": " | ".join(t.warnings)} if model.is_moe else {})})
            seen.append(t.warnings)
    df = pd.DataFrame(rows)
    if "cost_usd" not in df:                           # no GPU type fits: keep the columns a caller reads
        df["cost_usd"] = float("nan")
    # an estimated price is never ranked as if it were a list price (issue 38): such rows follow the others
    kind = {g.name: "reader" if g.name in prices else g.price_kind for g in gpu_list}
    df["price_kind"] = df["gpu"].map(kind)
    df["_est"] = df["price_kind"] == "estimate"
    df = df.sort_values(["fits", "_est", "cost_usd"], ascending=[False, True, True],
                        na_position="last").drop(columns="_est").reset_index(drop=True)
    if model.is_moe:
        df.attrs["warnings"] = tuple(dict.fromkeys(w for ws in seen for w in ws))
    return df


# The book's single MFU and band before issue 21 (0.40, from 0.30 to 0.50: the spread of nine published runs).
# The calibrated estimate replaced them; code that built bands from them silently kept the old answer (issue
# 32).
__getattr__ = _retire(__name__, {
    "MFU_DEFAULT": (0.40, "mfu_estimate(model, gpu=..., seq=...).mfu"),
    "MFU_LOW": (0.30, "mfu_estimate(...).low or mfu_range_factors(gpu, dtype)"),
    "MFU_HIGH": (0.50, "mfu_estimate(...).high or mfu_range_factors(gpu, dtype)")})
