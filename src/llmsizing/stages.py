"""A run in stages: training that changes its context on the way (chapter 10, "A run in stages"; issue 23).

Llama 3 trained at 8K tokens and then extended to 128K for its last ~800B tokens (Dubey et al. 2024, Sec.
3.4.2); DeepSeek-V3 at 4K, then 32K and 128K (DeepSeek-AI 2024, Sec. 4.3). Each stage has its own sequence
length, and may have its own layout: :func:`~llmsizing.time_cost.training_time` with ``stages=`` plans them
one after another (:class:`Stage`, :class:`StagedTrainingTime`). The arithmetic of each stage is
:mod:`llmsizing.time_cost`'s; this module only chooses each stage's MFU (given, from a layout's step time,
from the planner, or the calibrated estimate) and adds the stages up. ``data/published_stages.csv`` holds the
published stage-by-stage runs it is checked against (:func:`published_stage_checks`). The layout and global
batch a mixture of experts is timed on when none is given live in :mod:`llmsizing.moe_default` (session 24),
whose names stay importable from here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ._validate import check_bool, check_choice, check_fraction, check_int, check_number, check_sequence
from .catalog import get_gpu, gpu_price, resolve_model
from .flops import RECOMPUTE
from .all_to_all import DEFAULT_DISPATCHER, dispatcher_kwargs
from .job import Job
from .layouts import step_time
from .memory import training_memory
from .intervals import coverage_note
from .mfu import (MOE_RANGE_AREA, PUBLISHED_RUNS_CSV, TrainingTime, _causal_factor, _layout_label, _time_at,
                  layout_range_factors, run_time, whole_run_factor)
# the layout and global batch a mixture of experts is timed on without one live in moe_default; their names
# stay importable from here
from .moe_default import (MOE_DEFAULT_BATCH_TOKENS, MOE_LAYOUTS_KEPT, _Fastest, _kept_fastest,  # noqa: F401
                          _kept_fewest, _kept_moe_layout, _moe_default_layout, _sharing,
                          moe_default_global_batch, moe_default_layout)
from .model import Model
from .parallel import Parallel, check_recompute_layers, recomputed_layers, resolve_parallel
from .planner import check_global_batch, plan, recompute_kwargs
from .precision import check_recipe, compute_dtype

#: Runs published stage by stage, with their sources (:func:`published_stages`).
PUBLISHED_STAGES_CSV = PUBLISHED_RUNS_CSV.parent / "published_stages.csv"


@dataclass(frozen=True)
class Stage:
    """One stage of a run that changes its context on the way (Llama 3: 8K, then 128K for its last ~800B
    tokens, Dubey et al. 2024, Sec. 3.4.2; DeepSeek-V3: 4K, then 32K and 128K, DeepSeek-AI 2024, Sec. 4.3):
    ``tokens`` trained at sequence length ``seq``, optionally on a layout of its own. Give a list of them to
    :func:`training_time` as ``stages=``; a plain ``(tokens, seq)`` pair is read as ``Stage(tokens, seq)``.

    How the stage's MFU is found (the first that applies; the result's ``mfu_source`` says which):

    1. ``mfu`` given: that MFU, exact (on ``parallel.gpus`` GPUs if a layout is given);
    2. ``parallel`` and ``global_batch`` (sequences per optimizer step): the layout's own step,
       :func:`~llmsizing.layouts.step_time` with micro-batch ``micro_batch`` and
       ``global_batch / (micro_batch x dp)`` micro-batches, so the MFU is an output of the layout (its bubble,
       its communication at this ``seq``), with the 80% range of an MFU predicted from a layout around it
       (:func:`~llmsizing.mfu.layout_range_factors`, as :func:`~llmsizing.planner.plan` reports it; so does
       case 3). The run's ``plan_options["framework"]`` names its stack here too (stage44): the stack
       family's range and TP backward overlap, as ``training_time(..., parallel=, global_batch=,
       framework=)`` states them (none named: as before). A layout that does not
       fit the GPU's memory adds a warning (it is not refused: the caller chose it);
    3. ``global_batch`` without a layout: :func:`~llmsizing.planner.plan` for this stage alone (same GPU type,
       ``global_batch``, at most the stage's GPU count): the **fastest** plan on at most ``n_gpus`` GPUs when
       a GPU count is known (the cluster is the run's for the stage), the cheapest plan when none is, with the
       plan's own recomputation. A stage that no layout holds raises :class:`~llmsizing.planner.NoPlanError`
       naming the stage;
    4. otherwise the calibrated estimate at the stage's own ``seq`` (:func:`mfu_estimate`, with its range),
       exactly as a single-stage :func:`training_time` call: ``parallel`` alone only sets the GPU count.

    ``n_gpus`` defaults to the run's (``training_time(n_gpus=)``) or ``parallel.gpus``. ``name`` labels the
    stage in tables (default ``"stage 1"``, ``"stage 2"``...)."""

    tokens: float
    seq: int
    parallel: Parallel | None = None
    global_batch: int | None = None
    n_gpus: int | None = None
    micro_batch: int = 1
    mfu: float | None = None
    name: str = ""

    def __post_init__(self):
        object.__setattr__(self, "tokens", check_number("tokens", self.tokens, allow_equal=False))
        object.__setattr__(self, "seq", check_int("seq", self.seq))
        if self.parallel is not None and not isinstance(self.parallel, Parallel):
            raise TypeError(f"parallel must be a Parallel(...) or None, got {type(self.parallel).__name__}")
        if self.global_batch is not None:
            object.__setattr__(self, "global_batch", check_global_batch(self.global_batch))
        if self.n_gpus is not None:
            object.__setattr__(self, "n_gpus", check_int("n_gpus", self.n_gpus))
            if self.parallel is not None and self.n_gpus != self.parallel.gpus:
                raise ValueError(f"n_gpus={self.n_gpus} but the stage's parallel uses {self.parallel.gpus} "
                                 "GPUs; give one of them")
        object.__setattr__(self, "micro_batch", check_int("micro_batch", self.micro_batch))
        if self.mfu is not None:
            object.__setattr__(self, "mfu", check_fraction("mfu", self.mfu))
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string, got {type(self.name).__name__} {self.name!r}")


def _as_stage(i: int, item) -> Stage:
    """``stages[i]`` as a :class:`Stage`: a Stage, or a ``(tokens, seq)`` pair; errors name ``stages[i]``."""
    if isinstance(item, Stage):
        return item
    if isinstance(item, (str, bytes, dict)) or not hasattr(item, "__len__") or len(item) != 2:
        raise TypeError(f"stages[{i}] must be a Stage(tokens, seq, ...) or a (tokens, seq) pair, e.g. "
                        f"(15e12, 8192); got {type(item).__name__} {item!r}")
    try:
        return Stage(item[0], item[1])
    except (TypeError, ValueError) as e:
        raise type(e)(f"stages[{i}]: {e}") from None


@dataclass(frozen=True)
class StagedTrainingTime:
    """A run in stages (:func:`training_time` with ``stages=``): one :class:`TrainingTime` per stage, each
    with its own sequence length, layout, MFU, days, GPU-hours and cost, and the totals.

    The stages run one after another, so days, GPU-hours and dollars add up. The ``_low``/``_high`` totals add
    the stages' bounds: they assume every stage sits at the same end of its range (the same calibration's
    error in each, which is the likely case), a wider range than independent errors would give. :attr:`mfu` is
    the whole run's: its model FLOPs over what the GPU-hours could do at the dense peak (the stages' MFUs
    averaged harmonically, weighted by their FLOPs)."""

    model: str
    gpu: str
    stages: tuple
    #: The stages' labels in tables (:attr:`Stage.name`, or ``"stage 1"``, ``"stage 2"``...).
    names: tuple = ()

    def label(self, i: int) -> str:
        """Stage ``i``'s label."""
        return self.names[i] if i < len(self.names) and self.names[i] else f"stage {i + 1}"

    def _sum(self, field: str) -> float:
        return sum(getattr(st, field) for st in self.stages)

    tokens = property(lambda self: self._sum("tokens"), doc="Tokens over all stages.")
    total_flops = property(lambda self: self._sum("total_flops"), doc="Model FLOPs over all stages.")
    days = property(lambda self: self._sum("days"), doc="Days, the stages one after another.")
    days_low = property(lambda self: self._sum("days_low"), doc="Days at every stage's fast end.")
    days_high = property(lambda self: self._sum("days_high"), doc="Days at every stage's slow end.")
    gpu_hours = property(lambda self: self._sum("gpu_hours"), doc="GPU-hours over all stages.")
    gpu_hours_low = property(lambda self: self._sum("gpu_hours_low"), doc="GPU-hours at the fast ends.")
    gpu_hours_high = property(lambda self: self._sum("gpu_hours_high"), doc="GPU-hours at the slow ends.")
    cost_usd = property(lambda self: self._sum("cost_usd"), doc="Dollars over all stages.")
    cost_usd_low = property(lambda self: self._sum("cost_usd_low"), doc="Dollars at the fast ends.")
    cost_usd_high = property(lambda self: self._sum("cost_usd_high"), doc="Dollars at the slow ends.")

    @property
    def price_kind(self) -> str:
        """What the stages' price is (one GPU, one price): ``"estimate"`` if any stage's is, else the
        first's."""
        kinds = [st.price_kind for st in self.stages]
        return "estimate" if "estimate" in kinds else kinds[0]

    @property
    def mfu(self) -> float:
        """The whole run's MFU: ``sum(FLOPs) / sum(FLOPs / MFU)`` over the stages (same GPU and dtype)."""
        return self.total_flops / sum(st.total_flops / st.mfu for st in self.stages)

    @property
    def warnings(self) -> tuple:
        """Every stage's warnings, each prefixed with the stage's name."""
        return tuple(f"{self.label(i)}: {w}" for i, st in enumerate(self.stages) for w in st.warnings)

    def to_frame(self):
        """One row per stage and a ``total`` row: tokens, seq, GPUs, layout, where the MFU came from, MFU and
        its range, tokens/s per GPU, days, GPU-hours and cost with their bounds. The total row's ``mfu`` is
        :attr:`mfu`; its ``n_gpus`` is the largest stage's; its seq, layout and range are left empty."""
        import pandas as pd

        cols = ("tokens", "seq", "n_gpus", "layout", "mfu_source", "mfu", "mfu_low", "mfu_high",
                "tokens_per_s_per_gpu", "days", "days_low", "days_high", "gpu_hours", "gpu_hours_low",
                "gpu_hours_high", "cost_usd", "cost_usd_low", "cost_usd_high")
        rows = [{"stage": self.label(i), **{c: getattr(st, c) for c in cols}}
                for i, st in enumerate(self.stages)]
        total = {"stage": "total", **{c: getattr(self, c) for c in cols if hasattr(self, c)}}
        total.update(seq=None, n_gpus=max(st.n_gpus for st in self.stages), layout="", mfu_source="",
                     mfu_low=None, mfu_high=None, tokens_per_s_per_gpu=None)
        return pd.DataFrame(rows + [total]).set_index("stage")


def _staged(model, g, stages, *, n_gpus, parallel, mfu, mfu_range, price, recompute, dtype, causal, whole_run,
            plan_options, recompute_layers=None, precision=None, moe_dense_mfu=False) -> StagedTrainingTime:
    """:func:`training_time` for a list of stages (see :class:`Stage`); everything checked before any stage.
    ``dtype`` is the one given (``None``: the recipe's). The precision flows once: ``precision`` (or, when it
    is not given, ``plan_options["precision"]``; ``"bf16-mixed"`` when neither is) is every stage's recipe, so
    a planned stage is planned and timed in it, for its MFU and its peak alike; the two may not disagree."""
    items = [_as_stage(i, item) for i, item in
             enumerate(check_sequence("stages", stages, example="[(15e12, 8192), (8e11, 131072)]"))]
    check_bool("causal", causal)
    check_bool("whole_run", whole_run)
    check_choice("recompute", recompute, RECOMPUTE)
    if recompute_layers is not None:            # (checked against each stage's own layout there)
        check_recompute_layers(recompute, recompute_layers, model.layers)
    if plan_options is not None and not isinstance(plan_options, dict):
        raise TypeError(f"plan_options must be a dict of plan() keywords, got {type(plan_options).__name__}")
    planned = (plan_options or {}).get("precision")
    if precision is not None and planned is not None and \
            check_recipe("precision", precision) != check_recipe("plan_options['precision']", planned):
        raise ValueError(f"precision={precision!r} and plan_options['precision']={planned!r} disagree: give "
                         "the run's precision once (precision= applies to every stage, the planned ones too)")
    precision = check_recipe("precision", precision or planned or "bf16-mixed")
    dtype = compute_dtype(precision, dtype)
    run_gpus = run_par = None
    if parallel is not None:
        run_par = resolve_parallel(parallel, model)
        run_gpus = run_par.gpus
        if n_gpus is not None and check_int("n_gpus", n_gpus) != run_gpus:
            raise ValueError(f"n_gpus={n_gpus} but parallel uses {run_gpus} GPUs; give one of them")
    elif n_gpus is not None:
        run_gpus = check_int("n_gpus", n_gpus)
    # (stage44: a layout stage reads plan_options' framework and precision, so a run of layout stages
    # alone may give those two; any other key is plan()'s and needs a planned stage)
    stepped = [st.global_batch is not None and st.mfu is None for st in items]     # (a layout's or a plan's)
    planned_any = any(s and st.parallel is None for s, st in zip(stepped, items))
    layout_any = any(s and st.parallel is not None for s, st in zip(stepped, items))
    if plan_options and not planned_any and not (layout_any and set(plan_options) <= {"framework",
                                                                                     "precision"}):
        raise ValueError("plan_options applies only to stages planned by plan(): Stage(tokens, seq, "
                         "global_batch=...) without parallel or mfu (its 'framework' and 'precision' also to "
                         "a stage with its own layout: Stage(tokens, seq, parallel=..., global_batch=...))")
    for key in plan_options or {}:
        if key in ("tokens", "gpus", "seq", "global_batch", "max_gpus", "model", "prices", "explain",
                   "deadline_days", "budget_usd"):
            raise ValueError(f"plan_options may not set {key!r}: the stage and the run set it")
    price_value = gpu_price(g, price)
    out = []
    for i, st in enumerate(items):
        label = st.name or f"stage {i + 1}"
        try:
            t = _one_stage(model, g, st, run_gpus, run_par, mfu, mfu_range, price, price_value, recompute,
                           dtype, causal, whole_run, {**(plan_options or {}), "precision": precision},
                           recompute_layers, moe_dense_mfu)
        except (TypeError, ValueError) as e:
            raise type(e)(f"stages[{i}] ({label}, tokens={st.tokens:g}, seq={st.seq:,}): {e}") from e
        out.append(t)
    return StagedTrainingTime(model.name, g.name, tuple(out), tuple(st.name or f"stage {i + 1}"
                                                                    for i, st in enumerate(items)))


def layout_time(model, g, par: Parallel, *, tokens: float, seq: int, micro_batch: int, global_batch: int,
                precision: str, dtype: str, recompute: str, recompute_layers: int | None, causal: bool,
                price_value: float, node=None, max_nodes="model", goodput: float = 1.0,
                whole_run: bool = False, mtp_depth: int = 0,
                capacity_factor: float | None = None, dispatcher: str = "alltoall",
                schedule: str = "1f1b", comm_sms: int = 0, ep_overlap: float = 0.0,
                load_skew: float | None = None, kernel_efficiency: float | None = None,
                overlap: float | None = None, tp_backward_overlap: bool | None = None,
                framework: str | None = None) -> TrainingTime:
    """A run timed on its layout's own step (a stage's case 2 above;
    :func:`~llmsizing.time_cost.training_time` with ``parallel`` and ``global_batch``):
    :func:`~llmsizing.layouts.step_time` with ``global_batch / (micro_batch x dp)`` micro-batches gives the
    MFU, in ``precision`` at the ``dtype`` peak, with the range of an MFU predicted from a layout around it
    (:func:`~llmsizing.mfu.layout_range_factors`); a layout that does not fit adds a warning (the caller chose
    it). ``whole_run`` (a mixture of experts' whole run, issue 35): the step's MFU times the calibration's
    whole-run share (:func:`~llmsizing.mfu.whole_run_factor`: restarts, evaluation, stragglers), the layout's
    range around it. ``mtp_depth`` (the MTP module on the last stage) and ``capacity_factor`` (token
    dropping; issue 35): as ``step_time`` and ``training_memory`` price them; ``dispatcher`` (the MoE token
    dispatcher) as ``step_time`` does; so do the step recipe's ``schedule``, ``comm_sms``, ``load_skew``
    and the all-to-all's ``ep_overlap`` and ``max_nodes`` (moeapi42), and ``kernel_efficiency``,
    ``overlap`` and ``node`` (jobtime42: a :class:`~llmsizing.job.Job`'s days from its own step) and
    ``tp_backward_overlap`` (plan44), checked by
    ``step_time``. ``framework`` (range44: ``None``, the default, as before) is ``step_time``'s: its stack
    family's range (:func:`~llmsizing.mfu.layout_range_factors`, the one :func:`~llmsizing.planner.plan`
    states for that stack) and its TP overlap where ``tp_backward_overlap`` is ``None``."""
    per_step = micro_batch * par.dp
    if global_batch % per_step:
        raise ValueError(f"global_batch={global_batch:,} is not a multiple of micro_batch x dp = "
                         f"{micro_batch} x {par.dp}: the layout cannot reach it")
    accum = global_batch // per_step
    rc = dict(recompute=recompute, recompute_layers=recompute_layers, precision=precision,
              mtp_depth=mtp_depth, capacity_factor=capacity_factor)
    step = step_time(model, g, par, batch=micro_batch, seq=seq, grad_accum=accum, dtype=dtype, node=node,
                     max_nodes=max_nodes, **rc, **dispatcher_kwargs(dispatcher),
                     **({"schedule": schedule} if schedule != "1f1b" else {}),
                     **({"comm_sms": comm_sms} if comm_sms else {}),
                     **({"ep_overlap": ep_overlap} if ep_overlap else {}),
                     **({"load_skew": load_skew} if load_skew is not None else {}),
                     **({"kernel_efficiency": kernel_efficiency} if kernel_efficiency is not None else {}),
                     **({"overlap": overlap} if overlap is not None else {}),
                     **({} if tp_backward_overlap is None else {"tp_backward_overlap": tp_backward_overlap}),
                     **({} if framework is None else {"framework": framework}))
    share = whole_run_factor(model, g, seq=seq, dtype=dtype) if whole_run else 1.0
    m = check_fraction("the layout's MFU", step.mfu * share * _causal_factor(model, seq, causal))
    warnings = []
    total = training_memory(model, batch=micro_batch, seq=seq, grad_accum=accum, parallel=par,
                            **rc).total_bytes
    if total > g.memory_bytes:
        warnings.append(f"the layout needs {total / 2**30:,.1f} GiB per GPU (recompute={recompute!r}), more "
                        f"than the {g.name}'s {g.memory_gib:,.1f} GiB")
    rerun = None if recompute_layers is None else sum(recomputed_layers(model.layers, par, recompute_layers))
    low_f, high_f = layout_range_factors(g, dtype, framework, moe=model.is_moe)   # (the stack's: range44)
    # (a mixture of experts states the range of published MoE runs and what it held of them: issue 35)
    note = coverage_note(MOE_RANGE_AREA, "all", "published MoE runs") if model.is_moe else ""
    return _time_at(model, g, tokens, seq, par.gpus, m, m * low_f, min(1.0, m * high_f), price_value,
                    recompute, dtype, causal, warnings, parallel=par,
                    source="step_time of the layout" + (", a whole run's share of it" if whole_run else ""),
                    rerun_layers=rerun, goodput=goodput, range_note=note)


def _one_stage(model, g, st: Stage, run_gpus, run_par, mfu, mfu_range, price, price_value, recompute, dtype,
               causal, whole_run, plan_options, recompute_layers=None, moe_dense_mfu=False) -> TrainingTime:
    par = None if st.parallel is None else resolve_parallel(st.parallel, model)
    gpus = par.gpus if par is not None else (st.n_gpus if st.n_gpus is not None else run_gpus)
    if st.mfu is not None or (st.global_batch is None):
        # 1 (given) or 4 (the calibrated estimate at this stage's seq): the single-stage call itself
        if gpus is None:
            raise ValueError("give n_gpus (for the run or the stage), a layout (parallel=), or a "
                             "global_batch to plan the stage")
        one_mfu = st.mfu if st.mfu is not None else mfu
        one_range = None if st.mfu is not None else mfu_range
        # the GPU count from the stage's layout, its n_gpus, or the run's layout or n_gpus (labelled as the
        # old call)
        count = dict(parallel=par) if par is not None else (
            dict(n_gpus=gpus) if st.n_gpus is not None or run_par is None else dict(parallel=run_par))
        if model.is_moe and one_mfu is None and one_range is None and not moe_dense_mfu:
            run = _moe_run(model, g, tokens=st.tokens, seq=st.seq, n_gpus=count.get("n_gpus"),
                           parallel=count.get("parallel"), recompute=recompute,
                           recompute_layers=recompute_layers, precision=plan_options["precision"],
                           dtype=dtype, causal=causal, price=price, goodput=1.0, whole_run=whole_run)
            if run is not None:
                return run[0]
        return run_time(model, tokens=st.tokens, gpu=g, seq=st.seq, mfu=one_mfu, mfu_range=one_range,
                        price_usd_per_gpu_hour=price, recompute=recompute, dtype=dtype, causal=causal,
                        whole_run=whole_run, recompute_layers=recompute_layers,
                        precision=plan_options["precision"], **count)
    if par is not None:                                # 2: the layout's own step time
        return layout_time(model, g, par, tokens=st.tokens, seq=st.seq, micro_batch=st.micro_batch,
                           global_batch=st.global_batch, precision=plan_options["precision"], dtype=dtype,
                           recompute=recompute, recompute_layers=recompute_layers, causal=causal,
                           price_value=price_value, framework=plan_options.get("framework"))
    if dtype != compute_dtype(plan_options["precision"]):
        raise ValueError(f"dtype={dtype!r} with a planned stage (global_batch, no layout): a plan runs in "
                         f"its recipe's dtype, {compute_dtype(plan_options['precision'])!r} for precision="
                         f"{plan_options['precision']!r}; give precision='fp8-mixed' for FP8, or leave dtype "
                         "out")
    low_f, high_f = layout_range_factors(g, dtype, plan_options.get("framework"), moe=model.is_moe)
    # 3: plan() for this stage alone
    kw = dict(plan_options)
    if price is not None:
        kw["prices"] = {g.name: price}
    df = plan(model, tokens=st.tokens, gpus=(g.name,), seq=st.seq, global_batch=st.global_batch,
              max_gpus=gpus, **kw)
    if gpus is not None:
        row = df.sort_values(["days", "cost_usd"]).iloc[0]
        why = f"plan(): the fastest on at most {gpus:,} GPUs"
    else:
        row = df.iloc[0]                                 # (sorted cheapest first)
        why = "plan(): the cheapest plan"
    m = check_fraction("the plan's MFU", float(row["mfu"]) * _causal_factor(model, st.seq, causal))
    chosen = Job.from_plan_row(row, model, seq=st.seq, cp_comm=kw.get("cp_comm", "p2p"),
                               expert_tp=kw.get("expert_tp", False),           # (EP included: issue 33)
                               shared_expert_overlap=kw.get("shared_expert_overlap", False)).parallel
    n_rc = recompute_kwargs(row)["recompute_layers"]          # (the plan's own partial recomputation)
    t = _time_at(model, g, st.tokens, st.seq, int(row["n_gpus"]), m, m * low_f, min(1.0, m * high_f),
                 price_value, row["recompute"], dtype, causal, (), parallel=chosen, source=why,
                 rerun_layers=None if n_rc is None else sum(recomputed_layers(model.layers, chosen, n_rc)))
    return t


def _moe_run(model, g, *, tokens, seq, n_gpus, parallel, recompute, recompute_layers, precision, dtype,
             causal, price, goodput, ep_degrees=None, whole_run=False, mtp_depth=0, capacity_factor=None,
             dispatcher="alltoall", accounted_split=False, cp_degrees=None, cp_comm="p2p", **recipe):
    """:func:`training_time`'s mixture of experts without a global batch: ``(the run, its layout)`` on the
    MoE step of ``parallel`` or :func:`moe_default_layout`, or ``None`` when there is none. ``mtp_depth``,
    ``capacity_factor`` and ``dispatcher`` go to the step (:func:`layout_time`) and to
    :func:`moe_default_layout`'s plan (issue 35: it was chosen without them before ``plan()`` searched
    them); ``recipe``, :func:`llmsizing.job.check_step_recipe`'s and
    :func:`~llmsizing.moe_default.routing_kwargs`' keywords (``schedule``, ``comm_sms``, ``ep_overlap``,
    ``max_nodes``; moeapi42), likewise; ``accounted_split`` (cost49), ``cp_degrees`` and ``cp_comm`` to the
    plan and the fewest GPUs only."""
    n = None if n_gpus is None else check_int("n_gpus", n_gpus)
    if parallel is not None:
        par = resolve_parallel(parallel, model, seq)
        chosen = ((par, moe_default_global_batch(par, seq=seq, schedule=recipe.get("schedule", "1f1b")), 1)
                  if n in (None, par.gpus) else None)
    else:
        chosen = moe_default_layout(model, g, seq=seq, n_gpus=n, recompute=recompute, precision=precision,
                                    ep_degrees=ep_degrees, mtp_depth=mtp_depth,
                                    capacity_factor=capacity_factor, dispatcher=dispatcher,
                                    accounted_split=accounted_split, cp_degrees=cp_degrees,
                                    cp_comm=cp_comm, **recipe)
    if chosen is None:
        return None
    par, gb, micro = chosen
    return _moe_step_run(model, g, par, tokens=tokens, seq=seq, micro_batch=micro, recompute=recompute,
                         recompute_layers=recompute_layers, precision=precision, dtype=dtype, causal=causal,
                         global_batch=gb, price=price, goodput=goodput, whole_run=whole_run,
                         mtp_depth=mtp_depth, capacity_factor=capacity_factor, dispatcher=dispatcher,
                         **recipe), par


def _moe_step_run(model, g, par: Parallel, *, tokens, seq, micro_batch, recompute, recompute_layers,
                  precision, dtype, causal, price, goodput, global_batch=None, whole_run=False, mtp_depth=0,
                  capacity_factor=None, dispatcher="alltoall", **recipe):
    """A mixture of experts' run on the MoE step of layout ``par`` (:func:`~llmsizing.stages.layout_time`,
    as ``training_time(parallel=, global_batch=)``), the global batch :func:`moe_default_global_batch`'s
    unless given, with a warning that names both."""
    gb = (moe_default_global_batch(par, seq=seq, micro_batch=micro_batch,
                                   schedule=recipe.get("schedule", "1f1b"))
          if global_batch is None else global_batch)
    t = layout_time(model, g, par, tokens=check_number("tokens", tokens, allow_equal=False), seq=seq,
                    micro_batch=micro_batch, global_batch=gb, precision=precision, dtype=dtype,
                    recompute=recompute, recompute_layers=recompute_layers,
                    causal=check_bool("causal", causal), price_value=gpu_price(g, price), goodput=goodput,
                    whole_run=check_bool("whole_run", whole_run), mtp_depth=mtp_depth,
                    capacity_factor=capacity_factor, dispatcher=dispatcher, **recipe)
    note = (f"{model.name} is a mixture of experts: timed on its MoE step (llmsizing.moe_time) on the layout "
            f"{_layout_label(par)}, {gb:,} sequences per step; the range is a layout's"
            + (f"; with {mtp_depth} MTP module(s) on its last stage" if mtp_depth else "")
            + (f"; capacity factor {capacity_factor:g}" if capacity_factor is not None else "")
            + ("" if dispatcher == DEFAULT_DISPATCHER else f"; the {dispatcher} dispatcher")
            + "".join(f"; {k}={v}" for k, v in sorted(recipe.items())))
    return dataclasses.replace(t, warnings=(note, *t.warnings))


def published_stages():
    """``data/published_stages.csv``: runs published stage by stage (DeepSeek-V3: 4K, then 32K and 128K;
    Llama 3.1 405B: 8K, then ~800B tokens at 128K), one row per stage with its tokens, sequence length, batch,
    the GPU-hours of its ``phase`` as published (``phase_gpu_hours``, repeated on each row of a phase the
    source does not split) and the source and date. Checked by :func:`published_stage_checks`."""
    import pandas as pd

    return pd.read_csv(PUBLISHED_STAGES_CSV, keep_default_na=False, na_values=[""])


def deepseek_v3_standin() -> Model:
    """A dense stand-in for DeepSeek-V3's FLOPs per token (``training_time``'s calibrated MFU refuses a
    mixture of experts: the catalogue's ``deepseek-v3`` and :mod:`llmsizing.moe` model its memory and step,
    not its MFU): its 61 layers, hidden size 7,168 and vocabulary of 129,280 (the model's ``config.json``),
    128 attention heads of 160 dimensions (MLA scores with 192-dimensional queries and keys and mixes
    128-dimensional values: 160 is their mean, so ``QK^T`` plus ``attn @ V`` cost what they cost in MLA), one
    KV head, and a SwiGLU MLP of 13,020 so that the parameters come to about the 37B a token activates
    (DeepSeek-AI 2024, arXiv:2412.19437, Sec. 2).

    Right: the matmul FLOPs per token (2 x ~37B) and the attention FLOPs at every sequence length. Not
    modelled: the routing, the experts' load imbalance and all-to-all communication, MLA's compression, the
    multi-token prediction module (used in training, about 2% more FLOPs). Use it for ratios between stages of
    the same run, not for the run's absolute MFU."""
    return Model(name="deepseek-v3 dense stand-in", layers=61, hidden=7168, heads=128, head_dim=160,
                 kv_heads=1, ffn_hidden=13020, vocab=129280, max_seq=131072)


def _run(model, *, gpu, n_gpus: int, stages, dtype: str | None = None, whole_run: bool = False):
    """``training_time(model, gpu=, n_gpus=, stages=, dtype=, whole_run=)`` with every other argument at its
    default (:mod:`llmsizing.time_cost` sits above this module)."""
    return _staged(resolve_model(model, moe=True), get_gpu(gpu), stages, n_gpus=n_gpus, parallel=None,
                   mfu=None, mfu_range=None, price=None, recompute="none", dtype=dtype,
                   causal=False, whole_run=whole_run, plan_options=None)


def published_stage_checks():
    """The staged runs of :func:`published_stages` against :func:`training_time` with ``stages=``, one row per
    check (``run``, ``check``, ``predicted``, ``published``, ``ratio`` = predicted / published, ``unit``):

    * DeepSeek-V3: the GPU-hours of the context extension (32K and 128K) over those of pre-training at 4K,
      with the calibrated estimate at each stage's own ``seq`` (FP8 on H800s) on :func:`deepseek_v3_standin`;
    * Llama 3.1 405B: the whole run's GPU-hours (8K, then 128K) with the MFUs of the paper's Table 4 for each
      stage (steady state: the published total also holds interruptions, so this should come out a little
      lower), and with the calibrated whole-run estimate at each stage's ``seq``.

    Taught in chapter 10 ("A run in stages"); ``tests/test_stages.py`` holds the ranges."""
    import pandas as pd

    df = published_stages()
    rows = []
    ds = df[df["run"] == "DeepSeek-V3"]
    r = _run(deepseek_v3_standin(), gpu="H800", n_gpus=int(ds["n_gpus"].iloc[0]), dtype="fp8",
             stages=[Stage(float(x.tokens), int(x.seq), name=x.stage) for x in ds.itertuples()])
    pre = [st.gpu_hours for st, p in zip(r.stages, ds["phase"]) if p == "pre-training"]
    ext = [st.gpu_hours for st, p in zip(r.stages, ds["phase"]) if p == "context extension"]
    published = ds.groupby("phase")["phase_gpu_hours"].first()
    rows.append({"run": "DeepSeek-V3", "check": "context extension / pre-training GPU-hours",
                 "predicted": sum(ext) / sum(pre),
                 "published": published["context extension"] / published["pre-training"], "unit": "ratio"})
    ll = df[df["run"] == "Llama 3.1 405B"]
    n = int(ll["n_gpus"].iloc[0])
    total = float(ll["phase_gpu_hours"].iloc[0])
    given = _run("llama-3.1-405b", gpu="H100 SXM", n_gpus=n, stages=[
        Stage(float(x.tokens), int(x.seq), mfu=float(x.reported_mfu), name=x.stage) for x in ll.itertuples()])
    rows.append({"run": "Llama 3.1 405B", "check": "GPU-hours at the published MFU of each stage",
                 "predicted": given.gpu_hours, "published": total, "unit": "GPU-hours"})
    est = _run("llama-3.1-405b", gpu="H100 SXM", n_gpus=n, whole_run=True, stages=[
        Stage(float(x.tokens), int(x.seq), name=x.stage) for x in ll.itertuples()])
    rows.append({"run": "Llama 3.1 405B", "check": "GPU-hours at the calibrated whole-run MFU of each stage",
                 "predicted": est.gpu_hours, "published": total, "unit": "GPU-hours"})
    out = pd.DataFrame(rows)
    out["ratio"] = out["predicted"] / out["published"]
    return out
