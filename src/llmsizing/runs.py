"""A whole run from one step: days, GPU-hours and dollars from a layout's step time (Part III, "Case
studies").

:func:`~llmsizing.time_cost.training_time` starts from an assumed MFU; :func:`~llmsizing.layouts.step_time`
starts from a layout and says where one step's seconds go. :func:`run_from_step` joins the two: the step's
seconds (plus, for ZeRO-Offload, what the host's part of the step leaves exposed: :func:`offload_exposed_s`)
give the MFU the layout reaches, and that MFU gives the run's days and cost exactly as ``training_time`` does,
with the 80% range of an MFU predicted from a layout (:func:`~llmsizing.mfu.layout_range_factors`, as
:func:`~llmsizing.planner.plan` does). It adds no
formula of its own beyond ``steps = tokens / tokens per step``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ._validate import MIN_FRACTION, check_bool, check_choice, check_int, check_number
from .catalog import get_gpu, resolve_model
from .comm import OffloadTime
from .flops import RECOMPUTE, _partial_flops_per_token, training_flops_per_token
from .hardware import dense_tflops
from .layouts import StepTime
from .model import Model
from .parallel import check_recompute_layers, recomputed_layers
from .mfu import LAYOUT_RANGE_AREA, layout_range_area, layout_range_factors
from .mfu_inputs import layout_range_note
from .time_cost import TrainingTime, training_time


def offload_exposed_s(offload: OffloadTime, step: StepTime, *, delayed_update: bool = False) -> float:
    """Seconds of a ZeRO-Offload step (:func:`~llmsizing.zero_traffic.offload_time`) that the GPU waits for,
    given the layout's ``step`` (:func:`~llmsizing.layouts.step_time`), whose busy time (compute + bubble) is
    what the host's work can hide behind.

    ZeRO-Offload (Ren et al. 2021, Sec. 4) copies each gradient bucket to the host while the backward runs, so
    the copies cost only what outlasts the step's busy time. Then the host runs Adam and sends the 16-bit
    weights back before the next forward: both on the critical path, unless the "one-step delayed parameter
    update" (``delayed_update=True``) overlaps them, with the copies, with the next step's compute (then only
    what exceeds the busy time is exposed). Taught in the "Case studies" chapter."""
    if not isinstance(offload, OffloadTime):
        raise TypeError("offload must be an OffloadTime from zero_traffic.offload_time(...), got "
                        f"{type(offload).__name__}")
    if not isinstance(step, StepTime):
        raise TypeError(f"step must be a StepTime from layouts.step_time(...), got {type(step).__name__}")
    check_bool("delayed_update", delayed_update)
    busy = step.busy_s
    host_step = offload.cpu_adam_s + offload.weights_up_s
    if delayed_update:
        return max(0.0, offload.grads_down_s + host_step - busy)
    return max(0.0, offload.grads_down_s - busy) + host_step


@dataclass(frozen=True)
class StepRun:
    """A run priced from one step (:func:`run_from_step`): ``step_s`` is the layout's step
    (:attr:`~llmsizing.layouts.StepTime.step_s`), ``extra_s`` what is added per step (offload), ``steps`` the
    number of optimizer steps, and ``time`` the :class:`~llmsizing.time_cost.TrainingTime` at the MFU the step
    implies (``time.mfu``), with the range of an MFU predicted from a layout; ``range_area`` names that
    range's area in ``data/intervals.csv``, and ``range_note`` is ``""`` where that range is calibrated,
    else that no calibrated range applies on the GPU and dtype
    (:func:`~llmsizing.mfu_inputs.layout_range_note`)."""

    step_s: float
    extra_s: float
    steps: float
    tokens_per_step: int
    time: TrainingTime
    range_area: str = LAYOUT_RANGE_AREA
    range_note: str = ""

    @property
    def total_step_s(self) -> float:
        return self.step_s + self.extra_s

    @property
    def mfu(self) -> float:
        return self.time.mfu


def run_from_step(model: Model | str, step: StepTime, *, tokens: float, gpu, seq: int, extra_s: float = 0.0,
                  recompute: str = "none", price_usd_per_gpu_hour: float | None = None,
                  dtype: str = "bf16", recompute_layers: int | None = None) -> StepRun:
    """Days, GPU-hours and dollars of a run of ``tokens`` tokens made of steps like ``step`` (a
    :class:`~llmsizing.layouts.StepTime` from :func:`~llmsizing.layouts.step_time` for the same ``model``,
    ``gpu`` and ``seq``), each lasting ``step.step_s + extra_s`` seconds.

    The MFU is the step's model FLOPs (:func:`~llmsizing.flops.training_flops_per_token` x the tokens of a
    step, no recomputation: Chowdhery et al. 2022, App. B) over ``GPUs x dense peak x step seconds``; the
    days and dollars are then :func:`~llmsizing.time_cost.training_time`'s at that MFU (so the days are
    ``tokens / tokens per step x step seconds``), and the range scales that MFU by the step's
    (:attr:`~llmsizing.layouts.StepTime.range_factors`: the leave-one-source-out range of an MFU predicted
    from a layout, :func:`~llmsizing.mfu.layout_range_factors`, capped at 1), as the planner does.
    ``recompute`` must be what the step ran with (it sets the hardware FLOPs utilisation reported as
    ``time.hfu``), and so must ``recompute_layers`` (partial recomputation, per model chunk of the step's
    layout: :func:`~llmsizing.memory.training_memory`). Taught in the "Case studies" chapter. A mixture of
    experts (a step of :func:`~llmsizing.layouts.step_time` with ``ep``) counts its active parameters' FLOPs,
    as the step's own ``mfu`` does (chapter 18)."""
    model = resolve_model(model, moe=True)
    if not isinstance(step, StepTime):
        raise TypeError(f"step must be a StepTime from layouts.step_time(...), got {type(step).__name__}")
    g = get_gpu(gpu)
    tokens = check_number("tokens", tokens, allow_equal=False)
    extra_s = check_number("extra_s", extra_s)
    seq = check_int("seq", seq)
    check_choice("recompute", recompute, RECOMPUTE)
    par = step.communication.parallel
    n_rc = check_recompute_layers(recompute, recompute_layers, model.layers, par)
    n_gpus = par.gpus
    total_s = step.step_s + extra_s
    per_token = training_flops_per_token(model, seq=seq)
    mfu = per_token * step.tokens / (total_s * n_gpus * dense_tflops(g, dtype) * 1e12)
    if mfu > 1:
        raise ValueError(f"the step implies an MFU of {mfu:.2f} > 1: is step for {model.name} on {g.name} "
                         f"with seq={seq}?")
    low, high = step.range_factors or layout_range_factors(g, dtype, moe=model.is_moe)
    if mfu * low < MIN_FRACTION:                    # (the range's low end must be an MFU training_time takes)
        raise ValueError(f"the step ({total_s:g} s with extra_s={extra_s:g}) implies an MFU of {mfu:.4g}, "
                         f"below {MIN_FRACTION / low:.4g}: is step for {model.name} on {g.name} with "
                         f"seq={seq}, and extra_s in seconds?")
    t = training_time(model, tokens=tokens, gpu=g, n_gpus=n_gpus, seq=seq, mfu=mfu,
                      mfu_range=(mfu * low, min(1.0, mfu * high)),
                      price_usd_per_gpu_hour=price_usd_per_gpu_hour,
                      recompute=recompute if n_rc is None else "none", dtype=dtype)
    if n_rc is not None:        # the HFU counts the rerun forward of the recomputed layers only
        rerun = sum(recomputed_layers(model.layers, par, n_rc))
        t = replace(t, hfu=mfu * _partial_flops_per_token(model, seq, rerun, False) / per_token)
    note = step.range_note if step.range_factors else layout_range_note(g, dtype)   # the range's, as above
    return StepRun(step.step_s, extra_s, tokens / step.tokens, step.tokens, t,
                   range_area=step.range_area or layout_range_area(model.is_moe), range_note=note)
