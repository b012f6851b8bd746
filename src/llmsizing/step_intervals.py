"""The range of an MFU predicted from a layout, checked on sources it never saw (chapter 12; issue 34).

:func:`~llmsizing.layouts.step_time` predicts a run's step, hence its MFU, from its layout at one kernel
efficiency per GPU generation and dtype: the median of the per-run efficiencies that make the step model
reproduce each calibration run's published MFU (:func:`~llmsizing.calibration.run_kernel_efficiency`,
:func:`~llmsizing.calibration.fit_kernel_efficiency`). Its range is measured as every other range of the book
(:mod:`llmsizing.intervals`), leaving one source out:

1. For each source ``k`` (:func:`~llmsizing.intervals.source_key`), the fold's efficiency of each (generation,
   dtype) is the median of the **other** sources' per-run efficiencies, over the runs the production fit
   takes (calibration runs without context parallelism), rounded to the 3 decimals of
   ``data/kernel_efficiency.csv``; a (generation, dtype) the fold has no run of takes the lower median of the
   fold's generations of that dtype, as ``tools/calibrate.py`` writes a stand-in (:func:`fold_efficiencies`).
2. ``step_time`` at that efficiency predicts the MFU of each of ``k``'s runs with a published layout
   (held-out and context-parallel runs included); ``log(published / predicted)`` is out of source.
3. :func:`~llmsizing.intervals.loso_check` (nested, each source weighing the same) states the 80% bounds and
   measures their coverage: each source's runs against the interval computed without that source.

Every step model change (attention kernels, GEMM shapes, latency) moves these numbers: ``tools/calibrate.py``
recomputes them into ``data/intervals.csv`` (area :data:`AREA`), which
:func:`~llmsizing.mfu.layout_range_factors` reads for ``step_time``, ``run_from_step`` and ``plan``.
"""

from __future__ import annotations

from functools import cache

from .mfu import LAYOUT_RANGE_AREA

#: The area of ``data/intervals.csv`` that holds the range of an MFU predicted from a layout.
AREA = LAYOUT_RANGE_AREA

#: What the width may depend on (a column of the per-run table, or ``None``: pooled). Pooled: with 10
#: sources the nested folds have 9, just :func:`~llmsizing.intervals.min_units` at 80%, and no dtype or
#: generation has 9 sources of its own (FP8: 4, Ampere: 4), so a stratum would take the pooled bounds anyway.
STEP_INTERVAL_STRATA = None


def _mfu_at(row, efficiency: float) -> float:
    """The MFU :func:`~llmsizing.layouts.step_time` gives ``row``'s published layout at ``efficiency``, as
    :func:`~llmsizing.calibration.run_kernel_efficiency` evaluates it
    (:func:`~llmsizing.calibration.run_mfu_at`, the same call)."""
    from .calibration import run_mfu_at

    return run_mfu_at(row, efficiency)


@cache
def _default_layout_runs():
    return _layout_runs(None)


def layout_runs(runs=None):
    """The runs of ``runs`` (default :func:`~llmsizing.time_cost.published_runs`) whose layout was published
    (:func:`~llmsizing.calibration._layout_of`), with :func:`~llmsizing.calibration.fit_kernel_efficiency`'s
    columns (``generation``, ``kernel_efficiency``: NaN where even 100% would not reach the published MFU,
    ``kernel_fit``) and ``source_key``: a copy. The default table's per-run bisections run once per
    process."""
    return (_default_layout_runs() if runs is None else _layout_runs(runs)).copy()


def _layout_runs(runs):
    from .calibration import _layout_of, fit_kernel_efficiency
    from .intervals import source_key

    df, _ = fit_kernel_efficiency(runs)
    df = df[[_layout_of(r) is not None for r in df.itertuples()]].copy()
    if df.empty:
        raise ValueError("runs has no run with a published layout (dp, global_batch and a GPU count that "
                         "adds up): there is nothing to check")
    if "source" not in df.columns:
        raise ValueError("runs lacks the column 'source' (a table like published_runs() has it)")
    df["source_key"] = [source_key(s) for s in df["source"]]
    return df


def fold_efficiencies(per_run, train) -> dict:
    """``{(generation, dtype): efficiency}`` fitted on the rows of ``per_run`` (:func:`layout_runs`) where
    ``train`` (a boolean mask) is true, for every (generation, dtype) of ``per_run``: the median of the
    ``kernel_fit`` rows' ``kernel_efficiency`` (module docstring, step 1), rounded to 3 decimals; a key
    without such a row takes the lower median of the fitted keys of its dtype (of all keys if none)."""
    import numpy as np

    train = np.asarray(train, dtype=bool)
    if train.shape != (len(per_run),):
        raise ValueError(f"train must be one True/False per run ({len(per_run)}), got shape {train.shape}")
    fit = per_run[train & per_run["kernel_fit"].to_numpy(bool)
                  & per_run["kernel_efficiency"].notna().to_numpy()]
    if fit.empty:
        raise ValueError("train leaves no calibration run with a fitted kernel efficiency: nothing to fit")
    by = fit.groupby(["generation", "dtype"])["kernel_efficiency"].median()
    med = {k: round(float(v), 3) for k, v in by.items()}
    out = {}
    for key in dict.fromkeys(zip(per_run["generation"], per_run["dtype"])):
        if key in med:
            out[key] = med[key]
        else:
            same = sorted(v for k, v in med.items() if k[1] == key[1]) or sorted(med.values())
            out[key] = same[(len(same) - 1) // 2]
    return out


def step_loso_check(runs=None, *, coverage: float = 0.8, strata: str | None = STEP_INTERVAL_STRATA):
    """The step model's MFU checked by leaving one source out (module docstring): ``(check, per_run)``, a
    :class:`~llmsizing.intervals.LosoCheck` over the runs with a published layout and those runs
    (:func:`layout_runs`) with ``predicted_mfu`` (at the efficiency fitted without the run's source) added.
    ``strata``: a column of the runs whose values may get bounds of their own, or ``None``."""
    import numpy as np

    from .intervals import loso_check

    df = layout_runs(runs)
    if strata is not None and strata not in df.columns:
        raise ValueError(f"strata must be a column of runs or None, got {strata!r}")
    rows = list(df.itertuples())
    keys = list(zip(df["generation"], df["dtype"]))
    src = df["source_key"].to_numpy(object)
    memo = {}

    def log_mfu(i, e):
        if (i, e) not in memo:
            memo[i, e] = float(np.log(_mfu_at(rows[i], e)))
        return memo[i, e]

    def fit_predict(train, test):
        eff = fold_efficiencies(df, train)
        return [log_mfu(i, eff[keys[i]]) for i in np.flatnonzero(test)]

    labels = None if strata is None else df[strata].astype(str).to_numpy(object)
    try:
        check = loso_check(np.log(df["implied_mfu"].to_numpy(float)), src, fit_predict, coverage=coverage,
                           strata=labels)
    except ValueError as e:
        msg = str(e)
        raise ValueError(msg if msg.startswith("runs") else f"runs: {msg}") from None
    df["predicted_mfu"] = df["implied_mfu"].to_numpy(float) / np.exp(check.residuals)
    return check, df


def source_table(check, per_run):
    """Per source (rows of ``per_run`` in :func:`step_loso_check`'s order): its runs, the least and largest
    out-of-source ratio ``published / predicted`` and how many runs fall inside the interval computed without
    it; sorted by the least ratio. Chapter 12 prints it."""
    import numpy as np
    import pandas as pd

    d = pd.DataFrame({"source": per_run["source_key"].to_numpy(object), "ratio": np.exp(check.residuals),
                      "inside": check.inside})
    t = d.groupby("source").agg(runs=("ratio", "size"), min_ratio=("ratio", "min"),
                                max_ratio=("ratio", "max"), inside=("inside", "sum"))
    return t.sort_values("min_ratio").reset_index()
