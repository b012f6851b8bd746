"""The published training runs and the calibrated end-to-end MFU model's table (Part III, "FLOPs, MFU and
training time", chapter 10), split out of :mod:`llmsizing.mfu` (session 24: it had reached the 600-line
limit): ``data/published_runs.csv`` (every row with its source and date) and the MFU each run implies in the
library's own FLOP count (:func:`published_runs`, :func:`implied_mfu`: model FLOPs over GPU-hours times the
dense peak, Chowdhery et al. 2022, App. B; a reported hardware-FLOPs figure converted with Narayanan et al.
2021, Eq. 3), and the calibrated model fitted on them with its 80% range's factors per GPU generation
(:func:`mfu_model_table`, :func:`mfu_range_factors`; leave-one-source-out bounds,
:mod:`llmsizing.mfu_inputs`).
:mod:`llmsizing.mfu` (and :mod:`llmsizing.time_cost`) re-export these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ._validate import check_bool, check_choice, check_fraction, check_int, check_number, check_sequence
from .catalog import get_gpu, resolve_model
from .flops import training_flops_per_token
from .hardware import dense_tflops
from .model import Model


PUBLISHED_RUNS_CSV = Path(__file__).resolve().parents[2] / "data" / "published_runs.csv"


#: Conventions of a published "TFLOP/s per GPU": ``"model"`` counts the model's FLOPs (MFU),
#: ``"full-recompute"`` also the forward that full recomputation re-runs (HFU).
FLOPS_CONVENTIONS = ("model", "full-recompute")


def _peak_flops(gpu, dtype: str) -> float:
    """The dense peak in FLOP/s (:func:`~llmsizing.hardware.dense_tflops`)."""
    return dense_tflops(gpu, dtype) * 1e12


def implied_mfu(model: Model | str, *, gpu, seq: int, tokens: float | None = None,
                gpu_hours: float | None = None, tflops_per_gpu: float | None = None,
                flops_convention: str = "model", dtype: str = "bf16") -> float:
    """The MFU a published run implies, from either its token count and GPU-hours, or its reported TFLOP/s per
    GPU (converted to model FLOPs when the paper counted full recomputation's extra forward).

    ``model FLOPs / (GPU-hours x 3600 x dense peak)``: the inverse of :func:`training_time`. An MFU above 1
    (more FLOPs than the GPUs' dense peak can do in those hours) is refused, naming the inputs: it is a wrong
    unit (GPU-days, node-hours, a sparse peak), a wrong GPU, or a wrong token count, never a utilisation.

    A mixture of experts (issue 24) counts its ACTIVE parameters' FLOPs, with the same
    :func:`~llmsizing.flops.training_flops_per_token` that :func:`training_time` divides by (``6 N_active``,
    less the input embedding lookup, plus the attention term): DeepSeek-V3's 2,664K H800 GPU-hours for 14.8T
    tokens imply about 22% of the FP8 dense peak (44% of the BF16 one), ``tests/test_moe_cost.py`` by hand.
    Chapter 18."""
    model = resolve_model(model, moe=True)
    g = get_gpu(gpu)
    seq = check_int("seq", seq)
    check_choice("flops_convention", flops_convention, FLOPS_CONVENTIONS)   # (checked even where unused)
    peak = _peak_flops(g, dtype)
    per_token = training_flops_per_token(model, seq=seq)
    if tflops_per_gpu is not None:
        if tokens is not None or gpu_hours is not None:
            raise ValueError("give either tflops_per_gpu, or tokens and gpu_hours, not both")
        reported = check_number("tflops_per_gpu", tflops_per_gpu, allow_equal=False)
        achieved = reported * 1e12
        if flops_convention == "full-recompute":
            achieved *= per_token / training_flops_per_token(model, seq=seq, recompute="full")
        mfu = achieved / peak
        if not mfu <= 1:
            raise ValueError(f"tflops_per_gpu={reported:g} ({flops_convention} FLOPs) on the {g.name} "
                             f"implies an MFU of {mfu:.3g} > 1: above its dense {dtype} peak of "
                             f"{peak / 1e12:g} TFLOP/s (a figure with sparsity, or another dtype or GPU?)")
        return mfu
    if tokens is None or gpu_hours is None:
        raise ValueError("give tokens and gpu_hours (or tflops_per_gpu)")
    tokens = check_number("tokens", tokens, allow_equal=False)
    gpu_hours = check_number("gpu_hours", gpu_hours, allow_equal=False)
    mfu = tokens * per_token / (gpu_hours * 3600 * peak)
    if not mfu <= 1:
        raise ValueError(f"tokens={tokens:g} in gpu_hours={gpu_hours:g} on the {g.name} imply an MFU of "
                         f"{mfu:.3g} > 1: more model FLOPs than its dense {dtype} peak can do in those hours "
                         "(GPU-hours, not node-hours or GPU-days? the right GPU, seq and token count?)")
    return mfu


@cache
def _runs_frame():
    import pandas as pd

    return pd.read_csv(PUBLISHED_RUNS_CSV, keep_default_na=False, na_values=[""])


def published_runs():
    """The published runs of ``data/published_runs.csv`` (each with its source and date; the layout where it
    was published) and the MFU each implies in the library's own FLOP count, as a DataFrame.

    ``implied_mfu`` is taken, in this order of preference, from the tokens per second per GPU the source
    reports (times :func:`~llmsizing.flops.training_flops_per_token`: one FLOP convention for every source,
    whichever attention count the source used), from its TFLOP/s per GPU (:func:`implied_mfu`, converted from
    hardware FLOPs where the source counted recomputation), or from its tokens and GPU-hours. It is over the
    dense peak of the run's ``dtype`` (an FP8 run against the FP8 peak; ``fp16`` runs at the ``bf16`` rate).
    ``calibration`` says whether a run is fitted on (``True``) or held out to check the fit (``False``).
    NVIDIA's NeMo / Megatron-Bridge performance-summary tables are deliberately not among the sources, fitted
    or held out (issue 35): the ranges are checked against other published figures the fit has not seen."""
    import pandas as pd

    df = _runs_frame().copy()
    df["dtype"] = df["dtype"].fillna("bf16")
    mfus = []
    for r in df.itertuples():
        dtype = "fp8" if r.dtype == "fp8" else "bf16"
        if pd.notna(r.tokens_per_s_per_gpu):
            per_token = training_flops_per_token(r.model, seq=int(r.seq))
            mfus.append(check_fraction(f"the MFU of run {r.run!r}",
                                       r.tokens_per_s_per_gpu * per_token / _peak_flops(r.gpu, dtype)))
        elif pd.notna(r.reported_tflops_per_gpu):
            mfus.append(implied_mfu(r.model, gpu=r.gpu, seq=int(r.seq),
                                    tflops_per_gpu=r.reported_tflops_per_gpu,
                                    flops_convention=r.reported_flops_convention, dtype=dtype))
        else:
            mfus.append(implied_mfu(r.model, gpu=r.gpu, seq=int(r.seq), tokens=r.tokens,
                                    gpu_hours=r.gpu_hours, dtype=dtype))
    df["implied_mfu"] = mfus
    df["calibration"] = df["calibration"] == "yes"
    return df


MFU_MODEL_CSV = PUBLISHED_RUNS_CSV.parent / "mfu_model.csv"


@cache
def _mfu_model() -> dict:
    import csv

    with open(MFU_MODEL_CSV, newline="") as fh:
        return {(r["generation"], r["dtype"]): {k: (v if k in ("generation", "dtype") else float(v or "nan"))
                                                for k, v in r.items()} for r in csv.DictReader(fh)}


def mfu_model_table():
    """The calibrated end-to-end MFU model :func:`mfu_estimate` uses (``data/mfu_inputs_model.csv``,
    :func:`~llmsizing.mfu_inputs.inputs_model_table`) as a DataFrame, one row per calibrated GPU generation
    and dtype: the fit's intercept and terms, the 80% range's factors ``low``/``high`` and its ``width``
    (``high / low``; ``width_whole_run`` the same: the range is the generation's for a steady state and a
    whole run alike), and the extent of the generation's runs (``data/mfu_model.csv``: ``runs``,
    ``min_params`` ...). Shown in chapter 10."""
    from .mfu_inputs import inputs_model_table

    df = inputs_model_table()
    extent = ("runs", "calibration_runs", "min_params", "max_params", "min_seq", "max_seq", "min_gpus",
              "max_gpus")
    model = _mfu_model()
    for c in extent:
        df[c] = [model.get((g, d), {}).get(c, float("nan")) for g, d in zip(df["generation"], df["dtype"])]
    df["width"] = df["high"] / df["low"]
    df["width_whole_run"] = df["width"]
    return df


def mfu_range_factors(gpu, dtype: str = "bf16", *, whole_run: bool = False) -> tuple[float, float]:
    """``(low, high)``: the factors of the 80% range around the calibrated MFU of ``gpu``'s generation in
    ``dtype`` (``data/mfu_inputs_model.csv``: leave-one-source-out conformal bounds per GPU generation,
    :mod:`llmsizing.mfu_inputs`; their measured coverage is in ``data/intervals.csv``, area
    ``training-inputs``; the widest of any generation for a GPU with no published run). ``whole_run`` is
    checked and gives the same range: the generation's range holds steady states and whole-run totals alike
    (its coverage of the totals is the row ``pretraining-total``). A prediction's range is ``prediction x
    low`` to ``prediction x high``: what :func:`training_time`, :func:`~llmsizing.planner.plan` and
    :func:`~llmsizing.runs.run_from_step` report."""
    from .hardware import kernel_efficiency_row
    from .mfu_inputs import range_factors

    # FP4 (NVFP4) runs are priced with the FP8 rows: no FP4 training run is published yet (issue 36)
    key_dtype = "fp8" if check_choice("dtype", dtype, ("bf16", "fp16", "fp8", "fp4")) in ("fp8", "fp4") \
        else "bf16"
    check_bool("whole_run", whole_run)
    return range_factors(kernel_efficiency_row(gpu, dtype).generation, key_dtype)


@dataclass(frozen=True)
class BestPublishedRun:
    """The published run of ``data/published_runs.csv`` with the highest MFU among those asked for
    (:func:`best_published_run`): its ``run`` label, ``gpu``, ``n_gpus`` (None where the source gives none),
    the MFU it implies in the library's FLOP count (``mfu``), how many runs were compared (``among``), and
    ``mfu_causal``: the same run counted as a causal attention kernel runs it, half the score matrix
    (:func:`~llmsizing.flops.training_flops_per_token` with ``causal=True``; chapter 4), the work the GPUs
    did.
    At long context the two differ: FlashAttention-2's GPT3-2.7B at 8K is 72% counted PaLM's way (the whole
    score matrix, as the paper counts), 60% as run."""

    run: str
    gpu: str
    n_gpus: int | None
    mfu: float
    among: int
    mfu_causal: float


#: the ``kind`` cells of ``data/published_runs.csv``: a step's steady state, or a whole run's GPU-hours
RUN_KINDS = ("steady-state", "pretraining-total")


def best_published_run(gpu, dtype: str = "bf16", kind: str = "steady-state") -> BestPublishedRun:
    """The highest-MFU run among the published runs on ``gpu`` (a catalogue name, or a tuple of them) in
    ``dtype`` (``"bf16"`` includes the ``fp16`` runs, which run at the same peak) and of ``kind``, fitted or
    held out alike: what chapter 6 sets beside Llama 3 405B's 38-43% (the largest dense run, not the best).
    The MFU is :func:`published_runs`' ``implied_mfu`` (the whole score matrix counted, as PaLM and most
    papers do); ``mfu_causal`` counts what a causal kernel computes. Raises ValueError if no run matches."""
    names = [gpu] if isinstance(gpu, str) else check_sequence("gpu", gpu,
                                                                  example='("A100 80GB", "A100 40GB")')
    gpus = tuple(get_gpu(g).name for g in names)
    dtype = check_choice("dtype", dtype, ("bf16", "fp8"))
    kind = check_choice("kind", kind, RUN_KINDS)
    df = published_runs()
    dtypes = ("bf16", "fp16") if dtype == "bf16" else ("fp8",)
    rows = df[df["gpu"].isin(gpus) & df["dtype"].isin(dtypes) & (df["kind"] == kind)]
    if rows.empty:
        raise ValueError(f"no published {kind} run on {', '.join(gpus)} in {dtype}: data/published_runs.csv "
                         f"has runs on {', '.join(sorted(df['gpu'].unique()))}")
    best = rows.loc[rows["implied_mfu"].idxmax()]
    n = None if best["n_gpus"] != best["n_gpus"] else int(best["n_gpus"])   # NaN: the source gives no count
    mfu, seq = float(best["implied_mfu"]), int(best["seq"])
    causal = training_flops_per_token(best["model"], seq=seq, causal=True) / training_flops_per_token(
        best["model"], seq=seq)
    return BestPublishedRun(str(best["run"]), str(best["gpu"]), n, mfu, len(rows), mfu * causal)

