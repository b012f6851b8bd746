"""The MFU model and what a run at an MFU takes (Part III, "FLOPs, MFU and training time"): the published runs
and the calibrated MFU estimate with its range, the MFU a published run implies, and one run's days, GPU-hours
and dollars at a given MFU (:func:`run_time`). :func:`llmsizing.time_cost.training_time` is the public entry
point (one run, or a run in stages); this module holds what it and :mod:`llmsizing.stages` share. The
published runs, the MFU each implies and the calibrated model's table live in :mod:`llmsizing.mfu_published`
(session 24), whose names stay importable from here.


The arithmetic (Kaplan et al. 2020; Narayanan et al. 2021, Sec. 5.1; Chowdhery et al. 2022, App. B):

* a run of ``D`` tokens costs ``C = D x F`` FLOPs, ``F`` = :func:`~llmsizing.flops.training_flops_per_token`
  (``6N`` plus the attention term, without recomputation: the model's FLOPs);
* a GPU with dense peak ``P`` that reaches model FLOPs utilisation ``MFU`` processes
  ``P x MFU / F`` tokens per second;
* ``n`` GPUs finish in ``D / (n x tokens/s per GPU)`` seconds, and the GPU-hours ``C / (P x MFU) / 3600`` do
  not depend on ``n`` at all: more GPUs buy time, not a cheaper job, until the MFU itself falls.

**MFU versus HFU.** MFU counts only the FLOPs the model needs (Chowdhery et al. 2022). Hardware FLOPs
utilisation (HFU) also counts what recomputation re-runs, so it is higher for the same run; a paper that
reports "TFLOP/s per GPU" with recomputation on (Narayanan et al. 2021, Eq. 3) reports hardware FLOPs.

**The MFU is an input here**, not something this module predicts from first principles: its default and range
come from the published runs (``data/published_runs.csv``; :func:`published_runs`; :func:`mfu_estimate`),
which include everything a real run loses: communication that is not hidden, pipeline bubbles, stragglers,
and, for GPU-hour totals, restarts after failures. From a layout, :func:`~llmsizing.layouts.step_time` derives
the MFU instead (an output of the kernel efficiency and the losses).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ._validate import check_bool, check_choice, check_fraction, check_int, check_number, check_sequence
from .catalog import gpu_price, price_kind_of, resolve_model
from .flops import RECOMPUTE, training_flops_per_token
from .hardware import check_recipe_runs_on, generation_name
# the published runs, the MFU each implies and the calibrated model's table live in mfu_published; their
# names stay importable from here
from .mfu_published import (FLOPS_CONVENTIONS, MFU_MODEL_CSV, PUBLISHED_RUNS_CSV,  # noqa: F401
                            _mfu_model, _peak_flops, _runs_frame, implied_mfu, mfu_model_table,
                            mfu_range_factors, published_runs)
from .model import Model
from .parallel import Parallel, resolve_parallel
from .precision import compute_dtype


#: The area of ``data/intervals.csv`` that holds the range of an MFU predicted from a layout
#: (:mod:`llmsizing.step_intervals`).
LAYOUT_RANGE_AREA = "training-layout"


#: The area of ``data/intervals.csv`` that holds the range of a mixture of experts' step predicted from a
#: layout (:func:`~llmsizing.moe_runs.moe_loso_check`: measured on published MoE runs, issue 35).
MOE_RANGE_AREA = "moe-layout"


def _layout_ranges() -> dict:
    return _area_ranges(LAYOUT_RANGE_AREA)


def _moe_ranges() -> dict:
    return _area_ranges(MOE_RANGE_AREA)


@cache
def _area_ranges(area: str) -> dict:
    import csv

    with open(MFU_MODEL_CSV.parent / "intervals.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["area"] == area]
    # a group with no stated bounds (a stack row whose location failed its out-of-source check) maps to None
    return {r["group"]: (float(r["low"]), float(r["high"])) if r["low"] and r["high"] else None for r in rows}


def layout_range_area(moe: bool = False) -> str:
    """The area of ``data/intervals.csv`` whose range :func:`layout_range_factors` states: that of a mixture
    of experts' step (:data:`MOE_RANGE_AREA`) if ``moe``, else :data:`LAYOUT_RANGE_AREA`."""
    return MOE_RANGE_AREA if check_bool("moe", moe) else LAYOUT_RANGE_AREA


def layout_range_factors(gpu, dtype: str = "bf16", framework: str | None = None, *,
                         moe: bool = False) -> tuple[float, float]:
    """``(low, high)``: the factors of the 80% range around an MFU predicted from a layout
    (:func:`~llmsizing.layouts.step_time` at the calibrated kernel efficiency), as ``data/intervals.csv``'s
    area :data:`LAYOUT_RANGE_AREA` states it (leave-one-source-out conformal bounds of the step model's
    residuals, :mod:`llmsizing.step_intervals`; its measured coverage and median width are in the same rows):
    with a ``framework`` of a known stack family (:func:`~llmsizing.frameworks.stack_family`: e.g.
    ``"megatron-core"``, ``"torchtitan"``, or ``"megatron"``/``"deepspeed"``/``"pytorch"``; another name
    raises ValueError) the row of that family on ``gpu``'s generation ``"stack:<family>:<generation>"``,
    else the family's ``"stack:<family>"``; else (``None`` or ``"unknown"``) the row of ``gpu``'s generation
    or of ``dtype`` if the check gave one its own bounds, else the pooled row ``"all"``. What
    :func:`~llmsizing.layouts.step_time` (``StepTime.mfu_range``), :func:`~llmsizing.runs.run_from_step` and
    :func:`~llmsizing.planner.plan` report; chapters 10 and 12.

    ``moe=True`` (a mixture of experts' step, issue 35): the range of area :data:`MOE_RANGE_AREA`, measured
    leaving whole sources out on the published MoE runs (:func:`~llmsizing.moe_runs.moe_loso_check`), one
    pooled row ``"all"`` for every GPU, dtype and stack (7 sources give no stratum a range of its own); the
    dense range, set on dense runs, held about half of those runs. ``framework`` is then checked only."""
    group = layout_range_group(gpu, dtype, framework, moe=moe)
    return (_moe_ranges() if moe else _layout_ranges())[group]


def layout_range_group(gpu, dtype: str = "bf16", framework: str | None = None, *, moe: bool = False) -> str:
    """The ``group`` of ``data/intervals.csv``'s area :func:`layout_range_area` (``moe``) whose range
    :func:`layout_range_factors` gives for ``gpu``, ``dtype`` and ``framework`` (e.g.
    ``"stack:pytorch:hopper"``, ``"stack:megatron"``, ``"bf16"`` or ``"all"``; with ``moe`` always
    ``"all"``): what :func:`~llmsizing.planner.plan` records in its frame's ``attrs["range_rows"]``."""
    from .frameworks import stack_family
    from .hardware import kernel_efficiency_row

    # FP4 (NVFP4) runs are priced with the FP8 rows: no FP4 training run is published yet (issue 36)
    key_dtype = "fp8" if check_choice("dtype", dtype, ("bf16", "fp16", "fp8", "fp4")) in ("fp8", "fp4") \
        else "bf16"
    family = stack_family(framework)
    generation = kernel_efficiency_row(gpu, dtype).generation
    if layout_range_area(moe) == MOE_RANGE_AREA:
        if _moe_ranges().get("all") is None:
            raise ValueError(f"data/intervals.csv has no stated range for area {MOE_RANGE_AREA!r}: run "
                             "tools/calibrate.py")
        return "all"
    table = _layout_ranges()
    stack = (f"stack:{family}:{generation}", f"stack:{family}") if family != "unknown" else ()
    for group in (*stack, generation, key_dtype, "all"):
        if group in table:
            if table[group] is None:
                if group.startswith("stack:"):
                    # a stack row states no range when its location missed the 75% out-of-source coverage
                    # (tools/calibrate.py): the stack is not known well enough there, so the plain range
                    return layout_range_group(gpu, dtype, None)
                continue
            return group
    raise ValueError(f"data/intervals.csv has no stated range for area {LAYOUT_RANGE_AREA!r}: run "
                     "tools/calibrate.py")


def plan_range_factors(frame, gpu: str) -> tuple[float, float]:
    """``(low, high)``: the factors of the 80% range :func:`~llmsizing.planner.plan` applied to its plans on
    ``gpu`` (a name in ``frame["gpu"]``): the row ``frame.attrs["range_rows"][gpu]`` of area
    ``frame.attrs["range_area"]`` of ``data/intervals.csv``, the one :func:`layout_range_factors` gave the
    planner. Issue 34; chapter 12."""
    attrs = getattr(frame, "attrs", None) or {}
    if "range_rows" not in attrs or "range_area" not in attrs:
        raise TypeError("frame must be a table of llmsizing.planner.plan(...) (its attrs name the range's "
                        "rows)")
    rows = attrs["range_rows"]
    if gpu not in rows:
        raise ValueError(f"gpu: {gpu!r} is not one of the plan's GPUs; allowed: {', '.join(rows)}")
    bounds = _area_ranges(attrs["range_area"]).get(rows[gpu])
    if bounds is None:
        raise ValueError(f"gpu: {gpu!r}'s row {rows[gpu]!r} of data/intervals.csv states no range")
    return bounds


def time_range_ends(value: float, factors) -> tuple[float, float]:
    """``(value / high, value / low)``: a time or a cost predicted at an MFU whose stated 80% range is
    ``factors = (low, high)`` (:func:`layout_range_factors`, :func:`plan_range_factors`), at the range's fast
    and slow ends. The step's time goes as ``1 / MFU``, and so do the days, GPU-hours and cost of a run of a
    fixed number of steps: the planner's ``days_low = days / high`` and ``days_high = days / low``
    (:func:`~llmsizing.plan_frame.answer_frame`). Two more figures scale by the same factors:

    * a difference of two such times on the same range (the same GPU, dtype and stack, so one factor for
      both): ``(a - b) / high = a / high - b / high``. Not a difference of times on two ranges (two GPUs, or a
      dense and an MoE step), whose ends need not move together;
    * a what-if that rescales a plan's step (its step at another kernel efficiency): the range is the spread
      of published runs around the step model's prediction, so it moves with the prediction.

    Worked, chapter 12: Llama-3-70B's cheapest plan on a trillion tokens, 512 B200s, takes 9.095 days and the
    front's next plan (1,024) 4.728, both on the range 0.7974-1.1625 (``data/intervals.csv``,
    training-layout, bf16); the 4.367 days saved run from 4.367 / 1.1625 = 3.757 to 4.367 / 0.7974 = 5.477.
    Issue 34."""
    value = check_number("value", value, minimum=None)      # (a difference may be negative)
    pair = check_sequence("factors", factors, example="(0.80, 1.24)")
    if len(pair) != 2:
        raise ValueError(f"factors must be a pair (low, high), e.g. (0.80, 1.24); got {len(pair)} items")
    low, high = pair
    low = check_number("factors[0]", low, allow_equal=False)
    high = check_number("factors[1]", high, allow_equal=False)
    if not low <= 1 <= high:
        raise ValueError(f"factors: a range must contain 1 (low <= 1 <= high), got ({low:g}, {high:g})")
    return value / high, value / low


@dataclass(frozen=True)
class MfuEstimate:
    """The end-to-end MFU the calibration predicts for a run (:func:`mfu_estimate`), its range, and why it may
    be less sure: ``warnings`` name every way the run lies outside the published runs it was fitted on."""

    mfu: float
    low: float
    high: float
    generation: str
    warnings: tuple
    #: How the range measured out of source on runs like this one (``data/intervals.csv`` in words,
    #: :func:`~llmsizing.intervals.coverage_note`): an FP8 recipe's names the FP8 runs' own coverage.
    range_note: str = ""


def mfu_estimate(model: Model | str, *, gpu, seq: int, dtype: str | None = None, recompute: str = "none",
                 whole_run: bool = False, n_gpus: int | None = None,
                 precision: str = "bf16-mixed", recompute_layers: int | None = None,
                 parallel: Parallel | None = None, framework: str | None = None,
                 tokens_per_step: float | None = None) -> MfuEstimate:
    """The calibrated end-to-end MFU of a run (``data/mfu_inputs_model.csv``, :mod:`llmsizing.mfu_inputs`,
    fitted by ``tools/calibrate.py`` on ``data/published_runs.csv``): the GPU generation's and dtype's
    intercept, a term in model size and one in sequence length, what full recomputation costs
    (``recompute="full"``), what a whole run's GPU-hours lose against a measured steady state
    (``whole_run=True``: restarts, evaluation, stragglers), the stack's offset and the tokens per GPU per
    step. The range is an 80% prediction interval per GPU generation: the conformal bounds of the
    residuals of leave-one-source-out fits (:mod:`llmsizing.intervals`), whose coverage of sources the fit
    never saw is measured and stored in ``data/intervals.csv`` and stated with the
    estimate (``range_note``): for an FP8 recipe the FP8 runs' own coverage (chapter 10); for a generation
    and dtype with no calibration run, that no calibrated range applies and where its published runs sit
    (:func:`~llmsizing.mfu_inputs.estimate_note`).

    A GPU generation with no published run (the fit's median intercept is used), a model size, sequence length
    or GPU count outside those of the generation's runs each add a warning. ``dtype`` defaults to the
    ``precision`` recipe's (:func:`~llmsizing.precision.compute_dtype`): an FP8 recipe gets the FP8 rows,
    ``dtype="fp8"`` gives the same. Taught in chapter 10.

    ``recompute_layers`` (with ``recompute="full"``): partial recomputation, the first that many layers of
    each model chunk of ``parallel`` (the model as one chunk without it;
    :func:`~llmsizing.parallel.recomputed_layers`). The fit's full-recomputation term is taken in proportion
    to the layers rerun (``share x term`` in log MFU, the share
    :func:`~llmsizing.flops.training_flops_per_token` reruns): an interpolation, since every calibration run
    recomputed all its layers or none (``0`` gives the no-recomputation estimate, every layer the full one).

    A mixture of experts (issue 24): the MFU is of its active parameters' FLOPs
    (:func:`~llmsizing.flops.training_flops_per_token`), and the size term is taken at its active parameters
    ``N_active`` (the work per token; its attention is that of a dense model of its width). An extrapolation,
    said in a warning: the calibration's runs are dense, and an MoE's grouped GEMMs of small experts and its
    all-to-all (:func:`~llmsizing.layouts.step_time` models the latter) are not in the fit. Chapter 18.

    ``tokens_per_step`` (the global batch in tokens, with ``n_gpus``) and ``framework`` (the stack; ``None``:
    unknown): the tokens per GPU per step and the stack offset. Without ``tokens_per_step`` (the default) the
    same model as its fit reads a run whose source publishes no batch, with the same range (one estimate,
    issue 34; chapter 10); ``range_note`` then adds what that range held of those runs."""
    from .hardware import kernel_efficiency_row
    from .mfu_inputs import AREA, estimate_note, inputs_log_mfu, inputs_of

    model = resolve_model(model, moe=True)
    g = check_recipe_runs_on(precision, gpu)
    seq = check_int("seq", seq)
    dtype = compute_dtype(precision, dtype)
    n_gpus = None if n_gpus is None else check_int("n_gpus", n_gpus)
    key_dtype = "fp8" if dtype in ("fp8", "fp4") else "bf16"      # FP4: the FP8 fit (no FP4 run published)
    check_choice("recompute", recompute, RECOMPUTE)
    share = float(recompute == "full") if recompute_layers is None else _rerun_layers(
        model, recompute, recompute_layers, parallel) / model.layers
    whole_run = check_bool("whole_run", whole_run)
    generation = kernel_efficiency_row(g, dtype).generation
    warnings = []
    family, tokens_per_gpu = inputs_of(framework, tokens_per_step, n_gpus)
    size = float(model.active_params) if model.is_moe else model.n_params
    if model.is_moe:
        warnings.append(f"{model.name} is a mixture of experts: the calibration's runs are dense; the size "
                        f"term is taken at its {size / 1e9:,.3g}B active parameters, without its grouped "
                        "GEMMs' lower efficiency or its all-to-all (step_time models the all-to-all)")
    log_mfu, low, high, known = inputs_log_mfu(generation, key_dtype, size=size, seq=seq, share=share,
                                               whole_run=whole_run, family=family,
                                               tokens_per_gpu=tokens_per_gpu)
    row = _mfu_model().get((generation, key_dtype))    # (the extent of the generation's published runs)
    name = generation_name(generation)                  # the warnings name it: "CDNA 3", not "cdna3"
    if not known or row is None:
        warnings.append(f"no published {key_dtype} run calibrates the {g.name} ({name}): the median "
                        "generation's MFU and the widest range of any generation are used")
    else:
        if not row["min_params"] / 2 <= size <= row["max_params"] * 2:
            warnings.append(f"{size / 1e9:,.3g}B parameters is outside the {name} {key_dtype} runs' "
                            f"{row['min_params'] / 1e9:,.3g}B to {row['max_params'] / 1e9:,.3g}B")
        if not row["min_seq"] / 2 <= seq <= row["max_seq"] * 2:
            warnings.append(f"seq={seq:,} is outside the {name} {key_dtype} runs' "
                            f"{row['min_seq']:,.0f} to {row['max_seq']:,.0f} tokens")
        if n_gpus is not None and row["max_gpus"] == row["max_gpus"] and not (
                row["min_gpus"] / 2 <= n_gpus <= row["max_gpus"] * 2):
            warnings.append(f"{n_gpus:,} GPUs is outside the {name} {key_dtype} runs' "
                            f"{row['min_gpus']:,.0f} to {row['max_gpus']:,.0f}")
    import math

    central = min(math.exp(log_mfu), 1.0)
    # the coverage stated: the FP8 runs' own, the whole-run totals' own, else the generation's range's
    if key_dtype == "fp8":
        group, runs = "fp8", "FP8 runs"
    elif whole_run:
        group, runs = "pretraining-total", "whole-run totals"
    else:
        group, runs = ((generation, f"{generation_name(generation)} runs") if known
                       else ("all", "published runs"))
    return MfuEstimate(central, central * low, min(1.0, central * high), generation, tuple(warnings),
                       estimate_note(AREA, group, runs, generation, key_dtype, known and row is not None,
                                     tokens_per_gpu is not None))


def _rerun_layers(model: Model, recompute: str, recompute_layers, parallel) -> int:
    """The model's layers that partial recomputation reruns (``recompute_layers`` per model chunk of
    ``parallel``, checked), for :func:`mfu_estimate` and :func:`training_time`."""
    from .parallel import check_recompute_layers, recomputed_layers

    par = None if parallel is None else resolve_parallel(parallel, model)
    n = check_recompute_layers(recompute, recompute_layers, model.layers, par)
    return sum(recomputed_layers(model.layers, par, n))


def mfu_residuals():
    """Every published run (:func:`published_runs`) against the calibrated end-to-end MFU model: its
    ``generation``, ``implied_mfu``, the ``predicted_mfu`` of :func:`mfu_estimate` for the same model, GPU,
    sequence length, dtype, full recomputation, whole-run total, stack and tokens per step (where published),
    the ``residual`` ``implied / predicted``, the range ``low``/``high`` of its generation as MFUs, and
    ``inside``: whether the run lies in that range.
    The range is stated at 80%, so about one run in five lies outside it; whether a run lies inside the range
    computed *without* its source (the honest check) is
    :func:`~llmsizing.calibration.mfu_loso_check`'s. One row per run, in the order of
    ``data/published_runs.csv``. Taught in chapter 10."""
    import pandas as pd

    from .frameworks import stack_family

    rows = []
    for r in published_runs().itertuples():
        # the batch and stack as the fit reads them (range_candidates._columns): a run without a published
        # global batch or GPU count is estimated as one whose batch is unpublished
        batch = pd.notna(r.global_batch) and pd.notna(r.n_gpus)
        est = mfu_estimate(r.model, gpu=r.gpu, seq=int(r.seq), dtype=r.dtype,
                           recompute="full" if r.recompute == "full" else "none",
                           whole_run=r.kind == "pretraining-total", n_gpus=int(r.n_gpus) if batch else None,
                           framework=stack_family(r.framework, lenient=True),
                           tokens_per_step=r.global_batch * r.seq if batch else None)
        rows.append({"run": r.run, "gpu": r.gpu, "dtype": "fp8" if r.dtype == "fp8" else "bf16",
                     "generation": est.generation, "framework": r.framework, "calibration": r.calibration,
                     "implied_mfu": r.implied_mfu, "predicted_mfu": est.mfu,
                     "residual": r.implied_mfu / est.mfu, "low": est.low, "high": est.high,
                     "inside": bool(est.low * (1 - 1e-9) <= r.implied_mfu <= est.high * (1 + 1e-9))})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class TrainingTime:
    """How long a run takes and what it costs, with the range its MFU range implies (:func:`training_time`).

    ``days_low``/``gpu_hours_low``/``cost_usd_low`` go with ``mfu_high`` (the fast end) and the ``_high``
    figures with ``mfu_low``. ``hfu`` is the hardware FLOPs utilisation the same run has with its
    recomputation (equal to ``mfu`` without). Without a GPU count (``n_gpus`` ``None``: a model card gives
    GPU-hours, not GPUs) the days are ``None`` and the GPU-hours and cost stand: they do not depend on it."""

    model: str
    gpu: str
    n_gpus: int | None
    tokens: float
    seq: int
    mfu: float
    mfu_low: float
    mfu_high: float
    hfu: float
    flops_per_token: float
    tokens_per_s_per_gpu: float
    days: float | None
    days_low: float | None
    days_high: float | None
    gpu_hours: float
    gpu_hours_low: float
    gpu_hours_high: float
    price_usd_per_gpu_hour: float
    cost_usd: float
    cost_usd_low: float
    cost_usd_high: float
    warnings: tuple = ()
    #: The stage's layout as tables name it (``"TP8 PP16 DP64 ZeRO-1"``), ``""`` when none was given or
    #: planned.
    layout: str = ""
    #: Where the MFU came from: ``"calibrated estimate"``, ``"given"``, ``"step_time of the layout"`` or
    #: ``"plan(): ..."`` (:class:`Stage` says when each applies).
    mfu_source: str = ""
    #: The useful share of wall time the days and GPU-hours include (:func:`~llmsizing.reliability.goodput`:
    #: interruptions and checkpoints); 1.0 (the default) for a steady state without them.
    goodput: float = 1.0
    #: What :attr:`price_usd_per_gpu_hour` is (:data:`~llmsizing.catalog.PRICE_KINDS`): ``"list"``,
    #: ``"estimate"`` (a placeholder, never to be read as a list price) or ``"reader"`` (a price the caller
    #: gave); :func:`~llmsizing.catalog.price_kind_of`.
    price_kind: str = "list"
    #: How the calibrated estimate's range measured out of source (``MfuEstimate.range_note``; an FP8
    #: recipe's names the FP8 runs' coverage); ``""`` for a given MFU or a layout's.
    range_note: str = ""

    @property
    def total_flops(self) -> float:
        """The run's model FLOPs: tokens x FLOPs per token."""
        return self.tokens * self.flops_per_token

    def to_frame(self):
        """One row per bound (low / central / high) with MFU, tokens/s per GPU, days, GPU-hours and cost."""
        import pandas as pd

        rows = []
        for label, mfu, days, hours, cost in (
                ("fast end", self.mfu_high, self.days_low, self.gpu_hours_low, self.cost_usd_low),
                ("central", self.mfu, self.days, self.gpu_hours, self.cost_usd),
                ("slow end", self.mfu_low, self.days_high, self.gpu_hours_high, self.cost_usd_high)):
            rows.append({"case": label, "mfu": mfu,
                         "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu * mfu / self.mfu,
                         "days": days, "gpu_hours": hours, "cost_usd": cost})
        return pd.DataFrame(rows).set_index("case")


def whole_run_factor(model, gpu, *, seq: int, dtype: str | None = None) -> float:
    """What a whole run's GPU-hours keep of a steady state's MFU (restarts, evaluation, stragglers): the
    calibration's ``whole_run`` term, ``exp(coefficient)`` of the GPU generation's row of
    ``data/mfu_inputs_model.csv`` (:func:`mfu_estimate` with and without ``whole_run``), used on a mixture of
    experts' step MFU (issue 35). Chapter 10."""
    whole = mfu_estimate(model, gpu=gpu, seq=seq, dtype=dtype, whole_run=True).mfu
    return whole / mfu_estimate(model, gpu=gpu, seq=seq, dtype=dtype).mfu


def _time_at(model, g, tokens, seq, n_gpus, mfu, low, high, price, recompute, dtype, causal, warnings, *,
             parallel=None, source="", layout=None, goodput: float = 1.0,
             rerun_layers: int | None = None, range_note: str = "") -> TrainingTime:
    """A :class:`TrainingTime` from a checked MFU and range: GPU-hours ``tokens x F / (peak x MFU) / 3600``,
    divided by the ``goodput`` (the useful share of wall time). ``rerun_layers``: the layers partial
    recomputation reruns (:func:`_rerun_layers`), for the HFU."""
    from .flops import _partial_flops_per_token

    peak = _peak_flops(g, dtype)
    per_token = training_flops_per_token(model, seq=seq, causal=causal)
    hardware_per_token = (training_flops_per_token(model, seq=seq, recompute=recompute, causal=causal)
                          if rerun_layers is None
                          else _partial_flops_per_token(model, seq, rerun_layers, causal))
    hfu = mfu * hardware_per_token / per_token
    if hfu > 1:
        raise ValueError(f"mfu={mfu:g} with recompute={recompute!r} needs a hardware utilisation of "
                         f"{hfu:.2f} > 1")

    def hours(m: float) -> float:                      # GPU-hours at MFU m: independent of the GPU count
        return tokens * per_token / (peak * m) / 3600 / goodput

    h, h_low, h_high = hours(mfu), hours(high), hours(low)
    if layout is None:
        layout = "" if parallel is None else _layout_label(parallel)
    days = ((None, None, None) if n_gpus is None
            else (h / n_gpus / 24, h_low / n_gpus / 24, h_high / n_gpus / 24))
    return TrainingTime(model.name, g.name, n_gpus, tokens, seq, mfu, low, high, hfu, per_token,
                        peak * mfu / per_token, *days,
                        h, h_low, h_high, price, h * price, h_low * price, h_high * price, tuple(warnings),
                        layout, source, goodput, price_kind_of(g, price), range_note)


def _causal_factor(model, seq: int, causal: bool) -> float:
    """A step time's MFU in the causal count (``causal=True``): the same seconds, fewer FLOPs counted."""
    if not causal:
        return 1.0
    return training_flops_per_token(model, seq=seq, causal=True) / training_flops_per_token(model, seq=seq)


def _layout_label(par: Parallel) -> str:
    """``"TP8 PP2 DP4 ZeRO-1"``: how tables name a layout (``"TP8+SP CP16 PP16 DP8 ZeRO-1"`` with context
    parallelism; ``"CP16 all-gather"`` when its K, V are all-gathered rather than sent around a ring; ``"PP16
    VP8"`` with eight interleaved chunks per stage)."""
    parts = [f"TP{par.tp}" + ("+SP" if par.sp else "")]
    if par.cp > 1:
        parts.append(f"CP{par.cp}" + (" all-gather" if par.cp_comm == "all_gather" else ""))
    parts += [f"PP{par.pp}"] + ([f"VP{par.virtual_stages}"] if par.virtual_stages > 1 else [])
    parts += [f"DP{par.dp}"] + ([f"EP{par.ep}"] if par.ep > 1 else [])
    if par.zero:
        parts.append(f"ZeRO-{par.zero}")
    if par.offload != "none":
        parts.append(f"offload {par.offload}")
    return " ".join(parts)

def run_time(model: Model | str, *, tokens: float | None = None, gpu, n_gpus: int | None = None,
             seq: int | None = None, parallel: Parallel | None = None, mfu: float | None = None,
             mfu_range: tuple[float, float] | None = None, price_usd_per_gpu_hour: float | None = None,
             recompute: str = "none", dtype: str | None = None, causal: bool = False, whole_run: bool = False,
             precision: str = "bf16-mixed", goodput: float = 1.0, recompute_layers: int | None = None,
             framework: str | None = None, tokens_per_step: float | None = None) -> TrainingTime:
    """One run (one stage) of :func:`llmsizing.time_cost.training_time`, whose docstring says what every
    argument does: the calibrated or given MFU and its range, then :func:`_time_at`. A stage of a staged run
    that is timed on the calibrated estimate or a given MFU is exactly this call (:mod:`llmsizing.stages`)."""
    model = resolve_model(model, moe=True)
    goodput = check_fraction("goodput", goodput)
    if goodput < 1 and whole_run:
        raise ValueError(f"goodput={goodput:g} with whole_run=True counts the restarts twice: the whole-run "
                         "MFU already includes them; give one of them")
    g = check_recipe_runs_on(precision, gpu)
    dtype = compute_dtype(precision, dtype)
    if tokens is None or seq is None:
        raise ValueError("give tokens= (a number > 0) and seq= (an integer >= 1)")
    tokens = check_number("tokens", tokens, allow_equal=False)
    seq = check_int("seq", seq)
    check_bool("causal", causal)
    check_choice("recompute", recompute, RECOMPUTE)
    if parallel is not None:
        par = resolve_parallel(parallel, model)
        if n_gpus is not None and check_int("n_gpus", n_gpus) != par.gpus:
            raise ValueError(f"n_gpus={n_gpus} but parallel uses tp*cp*pp*dp = {par.gpus} GPUs; give one of "
                             "them")
        n_gpus = par.gpus
    n_gpus = None if n_gpus is None else check_int("n_gpus", n_gpus)   # (GPU-hours need no GPU count)
    par = None if parallel is None else par
    rerun = None if recompute_layers is None else _rerun_layers(model, recompute, recompute_layers, par)
    warnings: tuple = ()
    if mfu is not None and (framework is not None or tokens_per_step is not None):
        raise ValueError("framework= and tokens_per_step= are inputs of the calibrated estimate: not with "
                         "mfu=")
    if mfu is None:
        est = mfu_estimate(model, gpu=g, seq=seq, dtype=dtype, recompute=recompute, whole_run=whole_run,
                           n_gpus=n_gpus, recompute_layers=recompute_layers, parallel=par,
                           framework=framework, tokens_per_step=tokens_per_step)
        mfu, warnings, note = est.mfu, est.warnings, est.range_note
        default_range = (est.low, est.high)
        source = "calibrated estimate"
    else:
        mfu, note = check_fraction("mfu", mfu), ""
        default_range = (mfu, mfu)
        source = "given"
    if mfu_range is None:
        low, high = default_range
    else:
        note = ""                                      # the caller's range: no measured coverage of ours
        bounds = check_sequence("mfu_range", mfu_range, example="(0.3, 0.5)")
        if len(bounds) != 2:
            raise ValueError(f"mfu_range must be two numbers (low, high), e.g. (0.3, 0.5); got {mfu_range!r}")
        low, high = bounds
    low = check_fraction("mfu_range[0]", low)
    high = check_fraction("mfu_range[1]", high)
    if not low <= mfu <= high:
        raise ValueError(f"mfu_range must contain mfu: got mfu={mfu:g} and mfu_range=({low:g}, {high:g})")
    price = gpu_price(g, price_usd_per_gpu_hour)
    return _time_at(model, g, tokens, seq, n_gpus, mfu, low, high, price, recompute, dtype, causal, warnings,
                    parallel=par, source=source, goodput=goodput, rerun_layers=rerun, range_note=note)

