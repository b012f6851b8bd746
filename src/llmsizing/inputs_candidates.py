"""Session 48's pre-registered candidates for the range of the end-to-end MFU model from the planner's inputs
(area ``training-inputs``, :mod:`llmsizing.mfu_inputs`; chapter 10, issue 34). Written down, with the adoption
rule below, before any of them was computed.

The fit is the one the library states (:data:`~llmsizing.range_candidates.REGISTERED` ``"registered"``: the
baseline terms, a stack family offset, log tokens per GPU with a "batch not published" flag; least squares
refit without the held-out source in every outer and inner fold); the candidates change only how its 80%
conformal range is built from the out-of-source residuals, by inputs a planner knows before a run:

- ``"kind_strata"``: group-conditional bounds by what is asked, a steady state or a whole-run total (the
  baseline's range already splits by kind; the inputs range does not): the stratum generation x kind where it
  has :func:`~llmsizing.intervals.min_units` sources, else the kind, else pooled.
- ``"named_strata"``: group-conditional bounds by whether the stack is named (a family other than
  ``"unknown"``: :func:`~llmsizing.frameworks.stack_family`; a user who names a framework gets the named
  band): generation x named, else named, else pooled.
- ``"scaled"``: normalised residuals (locally weighted conformal, Lei et al. 2018 Sec. 5.2): score
  ``|r| / s(x)`` with ``log s(x) = g . (stack unnamed, batch unpublished, whole run)``, ``g`` (with an
  intercept, which the quantile absorbs) the source-weighted least squares of ``log max(|r|, 0.01)`` (1%: the
  precision of a published MFU) on the fold's inner residuals, each inner row scored with ``g`` fitted without
  its own source; the quantile per GPU generation as today (9+ sources, else pooled); bounds ``+-q s(x)``.

Every candidate is checked nested, leaving whole sources out, with the same stand-in rule as
:func:`~llmsizing.intervals.loso_check` (a run whose generation and dtype no other source calibrates sets no
bound and is counted apart).

**Adoption rule** (registered with them): a candidate passes when, over the runs calibrated in their fold, its
coverage is at least 75% in every group of ``data/intervals.csv``'s area ``training-inputs`` that is at least
75% today (all, ampere, hopper, stack:deepspeed, stack:megatron, stack:pytorch, bf16, fp8, steady-state,
pretraining-total, batch:published, batch:unpublished; stack:unknown, 63.2% today, is reported, not gated) and
its median width over all those runs is strictly below today's 1.8637x. If several pass, the one with the
narrowest median width is adopted; no combination is tried this session (3 candidates, 3 tries). A candidate
that passes but moves a published figure a test checks is reported, not adopted. Nothing is widened by hand.
"""

from __future__ import annotations

from functools import cache

#: name -> (how the bounds are built, its inputs): ``"levels"`` strata finest first (else pooled),
#: ``"scaled"`` the covariates of the scale model.
REGISTERED48 = {
    "kind_strata": ("levels", ("generation:kind", "kind")),
    "named_strata": ("levels", ("generation:named", "named")),
    "scaled": ("scaled", ("stack_unnamed", "batch_unpublished", "whole_run")),
}
#: The floor of ``|r|`` in the scale model's log (candidate ``"scaled"``).
SCALE_FLOOR = 0.01
#: Today's median width of the area (data/intervals.csv, training-inputs, all) a candidate must fall below.
TODAY_WIDTH = 1.8637
#: The groups whose coverage must stay at least 75% (those at 75% or more today).
GATED_GROUPS = ("all", "ampere", "hopper", "stack:deepspeed", "stack:megatron", "stack:pytorch", "bf16",
                "fp8", "steady-state", "pretraining-total", "batch:published", "batch:unpublished")


def _levels(df, columns, name):
    """The stratum labels of ``"levels"`` candidate ``name`` (finest first), or today's (per generation)."""
    import numpy as np

    from .range_candidates import _columns_family

    gen = df["generation"].astype(str).to_numpy(object)
    kind = np.where(df["kind"] == "pretraining-total", "pretraining-total", "steady-state").astype(object)
    named = np.where(_columns_family(df) == "unknown", "unnamed", "named").astype(object)
    by = {"generation": gen, "kind": kind, "named": named,
          "generation:kind": np.array([f"{a}:{b}" for a, b in zip(gen, kind)], dtype=object),
          "generation:named": np.array([f"{a}:{b}" for a, b in zip(gen, named)], dtype=object)}
    labels = REGISTERED48[name][1] if name != "today" else ("generation",)
    return [by[label] for label in labels]


def _scale_covariates(df, columns):
    """Per run, the covariates of candidate ``"scaled"``'s scale model (:data:`REGISTERED48`)."""
    import numpy as np

    from .range_candidates import _columns_family

    z = {"stack_unnamed": (_columns_family(df) == "unknown").astype(float),
         "batch_unpublished": columns["batch_unpublished"],
         "whole_run": (df["kind"] == "pretraining-total").to_numpy(float)}
    return np.column_stack([z[c] for c in REGISTERED48["scaled"][1]])


def _scale_fit(r, z, src):
    """``g`` (intercept dropped): weighted least squares of ``log max(|r|, SCALE_FLOOR)`` on ``1, z``."""
    import numpy as np

    _, inv, counts = np.unique(src.astype(str), return_inverse=True, return_counts=True)
    w = np.sqrt(1.0 / counts[inv])
    x = np.column_stack([np.ones(len(r)), z]) * w[:, None]
    y = np.log(np.maximum(np.abs(r), SCALE_FLOOR)) * w
    return np.linalg.lstsq(x, y, rcond=None)[0][1:]


@cache
def _residuals():
    """The registered fit's outer and nested inner out-of-source residuals (every fold refit), shared by every
    candidate: ``(df, columns, src, keys, res, cal, inner, inner_cal)``."""
    import numpy as np

    from . import calibration as C
    from .intervals import keyed_calibration, loso_residuals
    from .range_candidates import REGISTERED, _columns, _extra_predictor

    df = C._prepared(None)
    columns = _columns(df)
    extra = np.column_stack([columns[t] for t in REGISTERED["registered"][0]])
    src = df["source_key"].to_numpy(object)
    cols = C._FitColumns(df)
    predict = _extra_predictor(cols, extra)
    calibrated = keyed_calibration(cols.keys, cols.calibration)
    y = np.log(df["implied_mfu"].to_numpy(float))
    res = loso_residuals(y, src, predict)
    keys = list(dict.fromkeys(src))
    cal = np.ones(len(y), bool)
    for k in keys:
        cal[src == k] = calibrated(src != k, src == k)
    inner, inner_cal = {}, {}
    for k in keys:
        rest = src != k
        inner[k], inner_cal[k] = np.full(len(y), np.nan), cal.copy()
        for j in keys:
            if j != k:
                mine = src == j
                inner[k][mine] = y[mine] - predict(rest & ~mine, mine)
                inner_cal[k][mine] = calibrated(rest & ~mine, mine)
    return df, columns, src, keys, res, cal, inner, inner_cal


def candidate48_check(name: str, *, coverage: float = 0.8):
    """The nested leave-one-source-out check of :data:`REGISTERED48` ``name`` (``"today"``: the stated
    procedure, per generation, which must give data/intervals.csv's 84.3% / 1.864x). Returns ``per_run``: per
    run its source, generation, dtype, kind, stack family, batch, ``residual``, ``low_log``/``high_log``
    (computed without its source), ``inside`` and ``calibrated``."""
    import numpy as np
    import pandas as pd

    from .range_candidates import _columns_family, _level_bounds

    if name != "today" and name not in REGISTERED48:
        raise ValueError(f"name must be 'today' or one of {', '.join(REGISTERED48)}; got {name!r}")
    df, columns, src, keys, res, cal, inner, inner_cal = _residuals()
    scaled = name == "scaled"
    levels = _levels(df, columns, "today" if scaled else name)
    z = _scale_covariates(df, columns) if scaled else None
    lo, hi = np.empty(len(src)), np.empty(len(src))
    for k in keys:
        test, use = src == k, (src != k) & inner_cal[k]
        r, s = inner[k][use], src[use]
        if scaled:
            score = np.empty(len(r))
            for j in dict.fromkeys(s):
                g = _scale_fit(r[s != j], z[use][s != j], s[s != j])
                score[s == j] = np.abs(r[s == j]) / np.exp(z[use][s == j] @ g)
            g_all = _scale_fit(r, z[use], s)
        for i in np.flatnonzero(test):
            b = _level_bounds(score if scaled else r, s, [lv[use] for lv in levels], [lv[i] for lv in levels],
                              coverage, "absolute")
            m = float(np.exp(z[i] @ g_all)) if scaled else 1.0
            lo[i], hi[i] = b[0] * m, b[1] * m
    inside = (res >= lo - 1e-12) & (res <= hi + 1e-12)
    return pd.DataFrame({
        "source_key": src, "run": df["run"].to_numpy(object), "generation": df["generation"].to_numpy(object),
        "dtype": df["dtype"].to_numpy(object),
        "kind": np.where(df["kind"] == "pretraining-total", "pretraining-total", "steady-state"),
        "stack": _columns_family(df), "batch": np.where(columns["batch_unpublished"] > 0, "unpublished",
                                                        "published"),
        "residual": res, "low_log": lo, "high_log": hi, "inside": inside, "calibrated": cal})


def group_table(per_run):
    """Coverage, median width, runs and sources of ``per_run`` (:func:`candidate48_check`) over the runs
    calibrated in their fold, per group as ``data/intervals.csv`` names them, and the stand-in runs apart."""
    import numpy as np
    import pandas as pd

    c = per_run[per_run["calibrated"]]
    by_prefix = (("generation", ""), ("stack", "stack:"), ("dtype", ""), ("kind", ""), ("batch", "batch:"))
    parts = [("all", c)] + [(f"{pre}{g}", p) for by, pre in by_prefix for g, p in c.groupby(by)]
    parts.append(("stand-in", per_run[~per_run["calibrated"]]))
    return pd.DataFrame([{"group": g, "coverage": float(p["inside"].mean()),
                          "median_width": float(np.exp(np.median(p["high_log"] - p["low_log"]))),
                          "runs": len(p), "sources": p["source_key"].nunique()} for g, p in parts if len(p)])


def passes(table) -> bool:
    """The registered rule (module docstring) on :func:`group_table`'s ``table``."""
    t = table.set_index("group")
    return bool(all(t.loc[g, "coverage"] >= 0.75 for g in GATED_GROUPS if g in t.index)
                and t.loc["all", "median_width"] < TODAY_WIDTH)
