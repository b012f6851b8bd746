"""The end-to-end MFU model with two inputs a planner knows before a run (chapter 10; issue 34): the stack
family (:func:`~llmsizing.frameworks.stack_family`) and the tokens each GPU processes per optimizer step
(``global_batch x seq / n_gpus``). Fitted and checked by ``tools/calibrate.py``
(:func:`~llmsizing.range_candidates.inputs_model_table`, the procedure registered in advance in
:data:`~llmsizing.range_candidates.REGISTERED`): the baseline model's terms (data/mfu_model.csv) plus a stack
offset and a slope in log tokens per GPU, with an 80% range per GPU generation (conformal bounds of the
absolute out-of-source residual, Lei et al. 2018 Sec. 2.2, each source weighing the same); its coverage of
sources the fit never saw is in ``data/intervals.csv`` (area :data:`AREA`). It is the library's one end-to-end
estimate (:func:`~llmsizing.mfu.mfu_estimate`, issue 34): without a global batch it predicts as the fit treats
a run whose source publishes none (the tokens term at its reference, the flag ``batch_unpublished`` on: 22 of
the 118 runs, whose out-of-source coverage is the row ``batch:unpublished``), without a framework as a run of
an unknown stack. The pooled model without these inputs (``data/mfu_model.csv``, area ``training``) stays only
as the baseline ``tools/calibrate.py`` and chapter 10 compare it with."""

from __future__ import annotations

from functools import cache
from pathlib import Path

#: The file ``tools/calibrate.py`` writes the model to.
INPUTS_MODEL_CSV = Path(__file__).resolve().parents[2] / "data" / "mfu_inputs_model.csv"
#: The area of ``data/intervals.csv`` that holds its measured coverage and width.
AREA = "training-inputs"
#: The reference of the tokens-per-GPU term (tokens per GPU per optimizer step).
TOKENS_PER_GPU_REF = 4096
_STACKS = ("megatron", "deepspeed", "pytorch")


@cache
def _rows() -> dict:
    import csv

    with open(INPUTS_MODEL_CSV, newline="") as fh:
        keep = ("generation", "dtype", "range_group")
        return {(r["generation"], r["dtype"]): {k: (v if k in keep else float(v)) for k, v in r.items()}
                for r in csv.DictReader(fh)}


def _row_of(generation: str, key_dtype: str) -> tuple[dict, bool]:
    """``(row, known)``: the model's row of ``generation`` in ``key_dtype`` (``"bf16"`` or ``"fp8"``), or,
    ``known`` False, the lower median intercept of the dtype's rows with the widest range of any row."""
    table = _rows()
    row = table.get((generation, key_dtype))
    if row is not None:
        return row, True
    same = sorted((r for r in table.values() if r["dtype"] == key_dtype), key=lambda r: r["intercept"])
    same = same or sorted(table.values(), key=lambda r: r["intercept"])
    return {**same[(len(same) - 1) // 2], "low": min(r["low"] for r in table.values()),
            "high": max(r["high"] for r in table.values())}, False


def range_factors(generation: str, key_dtype: str) -> tuple[float, float]:
    """``(low, high)``: the 80% range's factors of ``generation`` in ``key_dtype`` (the widest of any row
    where no run calibrates it): :func:`~llmsizing.mfu.mfu_range_factors`."""
    row, _ = _row_of(generation, key_dtype)
    return row["low"], row["high"]


def inputs_log_mfu(generation: str, key_dtype: str, *, size: float, seq: int, share: float, whole_run: bool,
                   family: str, tokens_per_gpu: float | None) -> tuple[float, float, float, bool]:
    """``(log_mfu, low, high, known)``: the log MFU of the inputs model for a run of ``size`` parameters
    (active ones for an MoE), ``seq`` tokens, a ``share`` of its layers recomputed, a whole run or a steady
    state, the stack ``family`` (``"unknown"`` is the fit's reference) and ``tokens_per_gpu`` per optimizer
    step (``None``: not known, read as the fit reads a run whose source publishes no batch: the tokens term
    at its reference :data:`TOKENS_PER_GPU_REF`, i.e. 0, and the ``batch_unpublished`` term on), and the
    range's factors (the generation's: the same with or without a batch). ``known`` is False for a
    (generation, dtype) without published runs: then the lower median intercept of the dtype's rows and the
    widest range of any row are used (:func:`~llmsizing.mfu.mfu_estimate` warns)."""
    import math

    if family not in _STACKS + ("unknown",):
        raise ValueError(f"family must be one of {', '.join(_STACKS)} or unknown; got {family!r}")
    if tokens_per_gpu is not None and not (isinstance(tokens_per_gpu, (int, float))
                                           and math.isfinite(tokens_per_gpu) and tokens_per_gpu > 0):
        raise ValueError(f"tokens_per_gpu must be a finite number > 0; got {tokens_per_gpu!r}")
    row, known = _row_of(generation, key_dtype)
    log_mfu = (row["intercept"] + row["size_exponent"] * math.log(size / 1e10)
               + row["seq_exponent"] * math.log(seq / 4096) + row["full_recompute"] * share
               + row["whole_run"] * bool(whole_run)
               + (row[f"stack_{family}"] if family != "unknown" else 0.0)
               + (row["batch_unpublished"] if tokens_per_gpu is None
                  else row["log_tokens_per_gpu"] * math.log(tokens_per_gpu / TOKENS_PER_GPU_REF)))
    return log_mfu, row["low"], row["high"], known


def inputs_model_table():
    """``data/mfu_inputs_model.csv`` as a DataFrame (chapter 10): per (generation, dtype) the coefficients
    and the range ``low``/``high`` of the generation's stratum ``range_group``."""
    import pandas as pd

    return pd.DataFrame(list(_rows().values()))


def inputs_of(framework, tokens_per_step, n_gpus, warnings: list | None = None):
    """``(family, tokens_per_gpu)`` for the inputs model: ``framework`` names the training software
    (:func:`~llmsizing.frameworks.stack_family`; ``None`` is the fit's ``"unknown"`` stack) and
    ``tokens_per_step`` (tokens per optimizer step: global batch x sequence length, with ``n_gpus``) gives
    the tokens per GPU; without it ``tokens_per_gpu`` is ``None``, the fit's "batch not published"
    (:func:`inputs_log_mfu`). ``warnings`` is deprecated (a DeprecationWarning): nothing is added to it (a
    framework is used with or without a batch)."""
    import math
    import numbers

    from .frameworks import stack_family

    if warnings is not None:
        import warnings as _warnings

        _warnings.warn("inputs_of(warnings=) is no longer used (a framework counts with or without a batch) "
                       "and will go; call inputs_of(framework, tokens_per_step, n_gpus)", DeprecationWarning,
                       stacklevel=2)
    family = stack_family(framework)             # TypeError/ValueError unless a known name or None
    if tokens_per_step is None:
        return family, None
    if isinstance(tokens_per_step, bool) or not isinstance(tokens_per_step, numbers.Real):
        raise TypeError(f"tokens_per_step must be a number (tokens per optimizer step, e.g. 4_194_304); got "
                        f"{type(tokens_per_step).__name__}")
    if not (math.isfinite(tokens_per_step) and tokens_per_step >= 1):
        raise ValueError(f"tokens_per_step must be a finite number >= 1 (tokens per optimizer step, e.g. "
                         f"4_194_304); got {tokens_per_step!r}")
    if n_gpus is None:
        raise ValueError("tokens_per_step= needs n_gpus= (the model reads tokens per GPU per step)")
    return family, float(tokens_per_step) / n_gpus


@cache
def no_run_note(generation: str, dtype: str) -> str:
    """``"; no CDNA 3 16-bit run among them"`` when ``data/published_runs.csv`` has no run (calibration or
    held out) of ``generation`` in ``dtype`` (``"fp8"``, else 16-bit: blank, bf16 and fp16 count alike, as the
    fits read them; the generation by its name, :func:`~llmsizing.hardware.generation_name`), else ``""``:
    the end of :func:`~llmsizing.mfu.mfu_estimate`'s ``range_note``, which states a coverage measured on
    other generations' runs. A generation can have runs and no fitted row of its own (issue 34 added
    held-out FP8 runs on MI300X and B200), so the runs are read, not the fit."""
    import csv

    from .hardware import generation_name, kernel_efficiency_row

    key = "fp8" if dtype == "fp8" else "bf16"
    with open(INPUTS_MODEL_CSV.parent / "published_runs.csv", newline="") as fh:
        seen = {kernel_efficiency_row(r["gpu"], d).generation
                for r in csv.DictReader(fh) if (d := "fp8" if r["dtype"] == "fp8" else "bf16") == key}
    words = "FP8" if key == "fp8" else "16-bit"
    return "" if generation in seen else f"; no {generation_name(generation)} {words} run among them"


@cache
def _stand_in_cells() -> dict:
    import csv

    with open(INPUTS_MODEL_CSV.parent / "stand_in_runs.csv", newline="") as fh:
        return {(r["area"], r["generation"], r["dtype"]): r for r in csv.DictReader(fh)}


@cache
def stand_in_note(area: str, generation: str, dtype: str) -> str:
    """What an estimate of ``area`` (``"training"``, ``"training-inputs"``, ``"training-layout"``) on a GPU
    ``generation`` and ``dtype`` with no calibration run (a stand-in efficiency or intercept) can say of its
    range: that no calibrated range applies, and where the published runs of that cell sit against the area's
    prediction (``data/stand_in_runs.csv``, out of source, written by ``tools/calibrate.py``): e.g. ``"no
    calibrated range applies: no CDNA 3 FP8 run calibrates it; the 2 published CDNA 3 FP8 runs (1 source) sit
    at 0.53-0.55 of this estimate, 0 of them inside the calibrated range"``; of a single run, ``"the 1
    published Blackwell 16-bit run (1 source) sits at 0.41 of this estimate, outside the calibrated range"``
    (pytorch/ao's BF16 row on 8 power-limited B200s, issue 34); or that ``data/published_runs.csv`` holds
    none (not that none is published anywhere: the data holds what the book's sources were read for)."""
    from .hardware import generation_name

    key = "fp8" if dtype in ("fp8", "fp4") else "bf16"
    words = "FP8" if key == "fp8" else "16-bit"
    name = generation_name(generation)          # "CDNA 3", not the key "cdna3"
    note = f"no calibrated range applies: no {name} {words} run calibrates it"
    cell = _stand_in_cells().get((area, generation, key))
    if cell is None:
        return note + f"; no {name} {words} run is in data/published_runs.csv"
    n = int(cell["n_rows"])
    k = cell["n_sources"]
    if n == 1:
        where = "inside" if int(cell["inside"]) else "outside"
        return (note + f"; the 1 published {name} {words} run (1 source) sits at "
                f"{float(cell['min_ratio']):.2f} of this estimate, {where} the calibrated range")
    return (note + f"; the {n} published {name} {words} run{'s' * (n != 1)} ({k} source"
            f"{'s' * (k != '1')}) sit at {float(cell['min_ratio']):.2f}-{float(cell['max_ratio']):.2f} of "
            f"this estimate, {cell['inside']} of them inside the calibrated range")


def estimate_note(area: str, group: str, runs: str, generation: str, dtype: str, calibrated: bool,
                  batch_known: bool = True) -> str:
    """:func:`~llmsizing.mfu.mfu_estimate`'s ``range_note``: the measured coverage of ``data/intervals.csv``'s
    row ``(area, group)`` (:func:`~llmsizing.intervals.coverage_note`, ``runs`` naming its runs) for a
    ``calibrated`` generation and dtype; otherwise :func:`stand_in_note` first, then that coverage as the
    calibrated cells' (the band the estimate borrows), issue 34. Without a batch (``batch_known=False``), and
    for :data:`AREA`, what the same ranges held of the runs whose source publishes none (the row
    ``batch:unpublished``): the runs predicted as this estimate is."""
    from .intervals import coverage_note, held_note

    note = coverage_note(area, group, runs)
    if not batch_known and area == AREA:
        note += "; and " + held_note(AREA, "batch:unpublished",
                                     "runs without a published batch, estimated as this one")
    if calibrated:
        return note + no_run_note(generation, dtype)
    return f"{stand_in_note(area, generation, dtype)} (the band shown is the calibrated cells': {note})"


def layout_range_note(gpu, dtype: str = "bf16") -> str:
    """What the range of an MFU from a layout (:func:`~llmsizing.mfu.layout_range_factors`) can claim on
    ``gpu`` in ``dtype``: ``""`` where the step model's kernel efficiency of that GPU generation and dtype is
    fitted on published runs (``data/kernel_efficiency.csv``, ``runs``), else :func:`stand_in_note` for the
    area ``training-layout`` and that the band shown is the calibrated cells' (issue 34: e.g. the B200 and
    MI300X in FP8, whose published runs sit well below the stand-in's prediction). :func:`~llmsizing.planner.
    plan` puts it in its frame's ``attrs["range_notes"]``; chapters 10 and 12."""
    from .hardware import kernel_efficiency_row

    row = kernel_efficiency_row(gpu, dtype)
    if row.runs:
        return ""
    note = stand_in_note("training-layout", row.generation, dtype)
    return f"{note} (the band shown is the calibrated cells')"
