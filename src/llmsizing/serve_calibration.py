"""Serving calibration: published serving figures next to the model, the fit of its step constants, and the
range a prediction is stated with, checked on sources the fit never saw (chapter 15; issues 22, 34).

``data/serving_published.csv`` holds published serving figures, each with its engine, version and batching era
(``static``: one fixed batch run to completion; ``continuous``: sequences admitted every step), model, GPU,
tensor parallelism, formats, lengths, batch, metric, value, source URL and date, and a ``calibration`` column
(``yes`` rows are fitted on, with every other speed not marked ``known_out``: :func:`_trainable`).
:func:`fit_constants` finds the weight-read bandwidth efficiency, the attention (KV-read) efficiency and the
prefill MFU, shared by every engine, and a fixed time per engine step for each engine *and batching era*
(``vLLM/continuous``, ``TensorRT-LLM/static``, ...), minimising the squared log ratios ``published /
predicted`` by a deterministic Nelder-Mead search (the library has no SciPy). An engine and era without rows
is priced at that era's pooled overhead. A row's ``attention_kernel`` says how its engine's decode attention
reads a grouped-query model's KV heads (``grouped`` or ``per-query-head``: TensorRT-LLM before its XQA
kernel). The MFU is a 16-bit share: an FP8 row computes at it times
:func:`~llmsizing.hardware.dtype_kernel_share` (0.763 = 0.521 / 0.683, the training calibration's FP8 over
BF16 kernel efficiency; not fitted here). Before serve43 one MFU served both, and the FP8 rows (a third of the
speeds, the large-batch TensorRT-LLM rows near the ridge) pulled it down from what the 16-bit prefills reach:
held out, the squared log ratios summed to 3.68, now 2.86 (2.66 at serve43's share of 0.768); a share fitted
inside each fold instead gave 3.87 at serve43 (the FP8 rows are mostly one source's, so leaving it out leaves
the share to the H200 page's few rows). The nested check's median width is sensitive to that share (re-run on
today's rows, cut15, the share fixed on every GPU): at 0.624, 0.70, 0.763 (today's, the stored 1.738x),
0.83, 0.883 (Bekman's best-GEMM FP8/BF16 ratio) or 1.0 it is 1.93x, 1.83x, 1.74x, 1.87x, 1.85x, 1.98x
(serve43's grid, at 0.768 for the third: 1.96x, 1.85x, 1.75x, 1.89x, 1.92x, 1.98x). It also jumps within a
few thousandths of the share: 1.74x at 0.760, 0.7628 (today's unrounded), 0.765 and 0.768, but 1.76x at
0.763 and 1.79x at 0.770. Only the training ratio (the model's, a calibrated figure, not a fit to these
rows) comes under issue 34's 1.8x, and that grid was seen before it was kept: the bar is met narrowly, not
robustly. Dead ends of the same pass:
each GPU's own training kernel efficiency too (Ampere's over Hopper's) fitted better and
judged wider (1.72x, 1.82x out of sample); the GEMM-shape curve (:func:`~llmsizing.kernels.gemm_efficiency`)
would charge the weight read twice at the few rows of a decode step (it is a smoothed roofline itself). What
is left: TensorRT-LLM 0.6.1's long-prompt and long-output rows run faster than the model (its 2,048-token
prefills at large batch need an MFU near 0.8 on A100 FP16), and both RTX 4090 pages (LMDeploy AWQ,
llama.cpp) read the weights at 0.71-0.76 of the bandwidth at batch 1, above the shared share; no published
figure in ``data/`` prices either.

**The stated range** (issue 34) comes from leaving one *source* (URL: all rows of one page or paper) out at a
time (:func:`loso_residuals`): refit on the other sources' calibration rows, predict every speed of the
held-out source, keep the log of engine speed / model speed. The 80% range of a group of predictions is the
split-conformal pair of order statistics of those held-out residuals (:func:`conformal_quantiles`). The
residuals may be grouped by what could explain the spread (:data:`GROUPINGS`: whether the engine had its own
overhead in the fold, a time to first token or a per-token figure, the batching era, the engine); a group with
fewer than :data:`MIN_GROUP` residuals is merged into its parent. A grouping is used only where it narrows the
median range at 75% measured coverage or more (:func:`grouping_table`, :func:`grouping_choice`), both measured
by the nested check below, the one the book states (:func:`nested_residuals`, :func:`nested_grouped`; grp43:
until then by the plain one); today none does, so :data:`SERVING_GROUPING` is ``"pooled"`` (issue 34,
ranges2). The coverage is measured out of sample too
(:func:`interval_table`): each source's rows are checked against ranges built from the other sources'
residuals only. Those residuals come from refits that saw the judged source; :func:`nested_check` judges it
as the training checks are, by residuals from refits that saw neither it nor their own source, and is what
the book states (:data:`NESTED_GROUP`, :func:`nested_table`; issue 34's bar :data:`MAX_WIDTH` is judged on its
median width). ``tools/calibrate_serving.py`` writes the constants to
``data/serving_model.csv``, the ranges to ``data/serving_intervals.csv`` and the held-out residuals to
``data/serving_loso.csv``. A row's prediction and the fit itself (:func:`predict_row`, :func:`fit_constants`,
its fast predictors and search) live in :mod:`llmsizing.serve_fit` (session 24); their names stay importable
from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._validate import check_choice
from .catalog import DATA_DIR
from .serve_engine import BATCHING, DEFAULT_ENGINE, engine_key
from .serve_step import ENGINE_STEP_OVERHEAD_S, ENGINES, ERA_STEP_OVERHEAD_S, RANGE_HIGH, RANGE_LOW, serving
# a row's prediction, the fit's fast predictors, loss and search, and fit_constants live in serve_fit; their
# names stay importable from here (loso_residuals calls fit_constants through this module's name)
from .serve_fit import (_FIELDS, _PROBE, _READS, FITTED, RATIO_METRICS, TIME_METRICS, _fast_rows,  # noqa: F401
                        _in_bounds, _key, _loss_of, _nelder_mead, _Row, _serving_of, _value, fit_constants,
                        fit_mfu, predict_row)


#: The nominal coverage of the stated range.
COVERAGE = 0.8
#: Fewest held-out residuals a group of the range needs; a smaller group is merged into its parent.
MIN_GROUP = 10
#: The groupings of held-out residuals measured (:func:`grouping_table`): each maps a residual row to the
#: groups it may take its range from, narrowest first (a group under :data:`MIN_GROUP` rows is skipped).
def _by_calibration(cal, kind, batching, engine) -> tuple:
    name = "calibrated" if cal else "uncalibrated"
    return f"{name}/{kind}", name, "all"


GROUPINGS = {
    "calibrated-kind": _by_calibration,
    "kind": lambda cal, kind, batching, engine: (kind, "all"),
    "batching-kind": lambda cal, kind, batching, engine: (f"{batching}/{kind}", batching, "all"),
    "batching": lambda cal, kind, batching, engine: (batching, "all"),
    "engine": lambda cal, kind, batching, engine: (engine, "all"),
    "pooled": lambda cal, kind, batching, engine: ("all",),
}
#: The grouping of the stated range. ``"calibrated-kind"`` until issue 34's ranges2 pass; leaving one source
#: out, it covered 75.8% of the held-out speeds at a median range of 1.81x, the pooled range 77.3% at 1.76x
#: (and 1.82x against 2.02x for the ranges built without the row's source): :func:`grouping_table`.
#: Re-measured after the 2026-12-01 audit read the SGLang rows as TPOT: calibrated-kind 69.7% at 1.80x (2.00x
#: out of sample), pooled 81.8% at 1.745x (1.808x); ``engine`` ties pooled out of sample, so pooled stays.
#: Again once a step stopped reading the untied input embedding's table (2026-12-01): calibrated-kind 77.3% at
#: 1.72x (1.98x), pooled 81.8% at 1.681x (1.743x), ``engine`` the same as pooled; pooled stays.
#: Again once FP8 compute was priced at the MFU times the training calibration's FP8 share (serve43):
#: calibrated-kind 75.8% at 1.67x (1.78x), pooled 83.3% at 1.669x (1.673x), ``engine`` the same; pooled stays.
#: Since grp43 the rule reads the nested check (:func:`grouping_choice`; the ``*_nested`` columns of
#: ``data/serving_groupings.csv``; session 42 measured it once by hand, before serve43: pooled 1.978x, engine
#: 1.985x, kind 1.997x). At serve43's model: pooled 87.9% at 1.740x; engine 90.9% and batching-kind 84.8% at
#: the same 1.740x (the median speed is TensorRT-LLM 0.6.1's, 28 of 66, and takes the pooled range in both);
#: kind 87.9% at 1.777x; calibrated-kind 90.9% at 2.07x; batching 90.9% at 2.05x. None narrower: pooled stays.
#: After the refit that priced Megatron-LM's backward TP overlap (Hopper BF16 0.678 -> 0.683): pooled 86.4% at
#: 1.738x, engine 89.4% and batching-kind 83.3% at the same 1.738x, batching 89.4% at 1.98x; pooled stays.
SERVING_GROUPING = "pooled"
#: Issue 34's bar for the serving range: out-of-source coverage at least this ...
MIN_COVERAGE = 0.75
#: ... and a median width ``high / low`` of the ranges each held-out speed is judged by at most this. The
#: width judged is the *nested* check's (:data:`NESTED_GROUP`), as training's and fine-tuning's (ranges42).
MAX_WIDTH = 1.8
#: The row of ``data/serving_intervals.csv`` (and the ``nested_*`` columns of ``data/serving_loso.csv``) with
#: the held-out check nested as training's is (:func:`nested_check`): the coverage and median width the book
#: states for serving. Its ``low``/``high`` are blank: the stated range (row ``all``) does not change.
NESTED_GROUP = "overall-nested"
#: How the range is built (written to ``data/serving_intervals.csv``).
METHOD = ("leave-one-source-out refit; split-conformal order statistics of held-out log speed ratios, every "
          "held-out speed one unit, pooled over engines and metrics (grouping 'pooled': no grouping of "
          "serve_calibration.GROUPINGS narrowed the nested check's median range at 75% measured coverage; "
          "serve_calibration.grouping_choice)")


def _read():
    import pandas as pd

    df = pd.read_csv(DATA_DIR / "serving_published.csv")
    for col in ("kv_cache", "compute"):   # the formats the engine ran; 16-bit where a row leaves them blank
        df[col] = df[col].fillna("bf16") if col in df else "bf16"
    col = "attention_kernel"   # how the engine's decode attention reads GQA KV heads; grouped where blank
    df[col] = df[col].fillna("grouped") if col in df else "grouped"
    df["known_out"] = df["known_out"].fillna("") if "known_out" in df else ""   # why a row is known to miss
    bad = sorted(set(df["batching"].fillna("")) - set(BATCHING))
    if bad:
        raise ValueError(f"data/serving_published.csv: batching must be one of {BATCHING}, got {bad}")
    return df


def _trainable(r) -> bool:
    """Whether the fit learns from a row: a calibration row, or any other speed not marked ``known_out`` (a
    miss with a stated cause). A left-out source is never in the fit that predicts it
    (:func:`loso_residuals`)."""
    return r.calibration == "yes" or (not r.known_out and r.metric not in RATIO_METRICS)


def _ratio(r, value, predicted):
    """published / predicted as a speed: for times (``ttft_s``, ``itl_s``) predicted / published, so that
    below 1 always means the engine is slower than the model."""
    return predicted / value if r.metric in TIME_METRICS else value / predicted


def overhead_interval() -> tuple[float, float]:
    """The smallest and largest step overhead fitted for an engine and era (seconds). Before issue 34 an
    engine without rows was stated over this whole interval; now it is priced at its era's pooled overhead
    and stated with the range measured for engines the fit had not seen (:func:`serving_range`)."""
    return min(ENGINE_STEP_OVERHEAD_S.values()), max(ENGINE_STEP_OVERHEAD_S.values())


# ----------------------------------------------------------------------------- conformal range
def conformal_quantiles(log_residuals, coverage: float = COVERAGE) -> tuple[float, float]:
    """The split-conformal central interval of held-out residuals, every residual its own unit
    (:func:`llmsizing.intervals.conformal_bounds` with ``sources=None``, the one implementation; Vovk et al.
    2005; Lei et al. 2018, Sec. 2.2): with ``n`` residuals sorted and ``a = 1 - coverage``, the
    ``floor((n + 1) a / 2)``-th and ``ceil((n + 1)(1 - a / 2))``-th smallest. Raises ValueError when ``n`` is
    too small for a finite interval."""
    from .intervals import conformal_bounds

    return conformal_bounds(log_residuals, coverage)


def _kind(metric: str) -> str:
    return "ttft" if metric == "ttft_s" else "per-token"


def _chain(calibrated: bool, metric: str, batching: str = "continuous", engine: str = "",
           grouping: str | None = None) -> tuple:
    """The groups a prediction may take its range from, narrowest first (:data:`GROUPINGS`)."""
    return GROUPINGS[grouping or SERVING_GROUPING](bool(calibrated), _kind(metric), batching, engine)


def _row_chain(r, grouping=None) -> tuple:
    return _chain(r.calibrated, r.metric, getattr(r, "batching", "continuous"), getattr(r, "engine", ""),
                  grouping)


def _group_quantiles(res, grouping: str | None = None) -> dict:
    """group -> (low, high) log quantiles for every group with at least :data:`MIN_GROUP` residuals ("all"
    always)."""
    members = {}
    for r in res.itertuples():
        for g in _row_chain(r, grouping):
            members.setdefault(g, []).append(r.log_ratio)
    return {g: conformal_quantiles(v) for g, v in members.items() if g == "all" or len(v) >= MIN_GROUP}


def _assign(res, quantiles, grouping: str | None = None) -> list:
    return [next(g for g in _row_chain(r, grouping) if g in quantiles) for r in res.itertuples()]


# ----------------------------------------------------------------------------- the fit
def _overhead(c, r) -> tuple[float, bool]:
    """(step overhead, whether the row's engine and era had their own) under fitted constants ``c``."""
    if _key(r) in c["engines"]:
        return c["engines"][_key(r)], True
    return c["eras"].get(r.batching, c["any"]), False


def _fit_without(fit_rows, fits):
    """``left_out -> constants``: :func:`fit_constants` on the rows of ``fit_rows`` whose source is not in the
    frozenset ``left_out``, each set fitted once and kept in the dict ``fits`` (shared between the checks of
    one run: :func:`loso_residuals`, :func:`nested_check`, :func:`nested_residuals`)."""
    learnt_from = frozenset(r.url for r in fit_rows)

    def fit(left_out: frozenset):
        key = left_out & learnt_from      # leaving out a source the fit never learns from changes nothing
        if key not in fits:
            fits[key] = fit_constants([r for r in fit_rows if r.url not in key])
        return fits[key]
    return fit


def _log_ratio(c, r) -> tuple[float, bool]:
    """(log engine speed / model speed, whether the row's engine and era had their own overhead) under
    fitted constants ``c``."""
    t0, cal = _overhead(c, r)
    pred = predict_row(r, mbu=c["weights_bu"], attention_bu=c["attention_bu"], mfu=c["prefill_mfu"],
                       step_overhead_s=t0)
    return math.log(_ratio(r, r.value, pred)), cal


def loso_residuals(fits: dict | None = None):
    """Leave one source out (module docstring): for each source (URL), refit on the other sources'
    trainable rows (:func:`_trainable`) and predict that source's speeds (ratio metrics left out). Returns
    ``(full, res)``: the fit on every trainable row, and a DataFrame of one row per held-out figure with
    ``row`` (its index in ``data/serving_published.csv``), ``source``, ``engine``, ``batching``, ``metric``,
    ``kind``, ``calibrated`` (its engine and era had their own overhead in the fold) and ``log_ratio`` (log
    engine speed / model speed). A source without calibration rows is predicted by the full fit, which never
    saw it. ``fits``: a dict of refits kept between checks (:func:`_fit_without`; grp43)."""
    import pandas as pd

    df = _read()
    fit_rows = [r for r in df.itertuples() if _trainable(r)]
    fit = _fit_without(fit_rows, {} if fits is None else fits)
    full = fit(frozenset())
    out = []
    for src in sorted(df["url"].unique()):
        c = fit(frozenset({src}))      # (the full fit where the source has no row the fit learns from)
        for r in df[(df["url"] == src) & ~df["metric"].isin(RATIO_METRICS)].itertuples():
            log_ratio, cal = _log_ratio(c, r)
            out.append(dict(row=r.Index, source=src, engine=r.engine, batching=r.batching, metric=r.metric,
                            kind=_kind(r.metric), calibrated=cal, log_ratio=round(log_ratio, 6)))
    return full, pd.DataFrame(out)


def nested_check(coverage: float = COVERAGE, *, nested: bool = True, fits: dict | None = None):
    """Serving's held-out check run by :func:`llmsizing.intervals.loso_check`, as training's and fine-tuning's
    are (issue 34, audit34): each held-out source's speeds judged by bounds from residuals of refits that saw
    neither that source nor the residual's own (``nested=True``: ``S + S (S - 1) / 2`` distinct refits, a
    pair's serving both orders: 45, about 15 s CPU),
    every figure weighing alike as in :func:`interval_table`. ``nested=False`` is the stored check
    (``data/serving_intervals.csv``: each source judged by the other sources' held-out residuals, whose refits
    saw it). Sources with ratio figures only are always in the fit, as in :func:`loso_residuals`. Returns
    ``(check, sources)``: the :class:`~llmsizing.intervals.LosoCheck` (log residuals = log engine speed /
    model speed) and the source (URL) of each of its rows. A measurement: the stated range does not use it.
    ``fits``: a dict of refits kept between checks (:func:`_fit_without`; grp43)."""
    import numpy as np

    from .intervals import loso_check

    df = _read()
    fit_rows = [r for r in df.itertuples() if _trainable(r)]
    rows = list(df[~df["metric"].isin(RATIO_METRICS)].itertuples())
    urls = np.array([r.url for r in rows], dtype=object)
    every, fit = frozenset(urls), _fit_without(fit_rows, {} if fits is None else fits)

    def fit_predict(train, test):
        c = fit(every - frozenset(urls[train]))
        # (log y = 0: the residual is the log ratio)
        return np.array([-_log_ratio(c, rows[i])[0] for i in np.flatnonzero(test)])

    check = loso_check(np.zeros(len(rows)), urls, fit_predict, coverage=coverage, nested=nested, unit="row")
    return check, urls


def nested_table(coverage: float = COVERAGE, fits: dict | None = None):
    """The nested check (:func:`nested_check`, ``nested=True``; about a minute) as
    ``tools/calibrate_serving.py`` stores it: ``(per_row, row)``. ``per_row`` has the ``row`` of
    ``data/serving_published.csv`` and ``nested_low``, ``nested_high`` (the speed ratios of the range the
    row's source was judged by, from refits that saw neither it nor the residual's own source) and
    ``nested_inside``; ``row`` is the :data:`NESTED_GROUP` row of ``data/serving_intervals.csv`` (coverage
    over every held-out speed, median width of those ranges; ``low``/``high`` blank). Issue 34, ranges42.
    ``fits``: as :func:`nested_check`'s."""
    import numpy as np
    import pandas as pd

    check, urls = nested_check(coverage, nested=True, fits=fits)
    df = _read()
    index = df[~df["metric"].isin(RATIO_METRICS)].index       # nested_check's rows, in its order
    per_row = pd.DataFrame({"row": index, "nested_low": np.round(np.exp(check.low_log), 4),
                            "nested_high": np.round(np.exp(check.high_log), 4),
                            "nested_inside": np.asarray(check.inside, bool)})
    row = dict(group=NESTED_GROUP, coverage_nominal=coverage, low=float("nan"), high=float("nan"),
               n_rows=len(per_row), n_sources=len(set(urls)),
               coverage_out_of_sample=round(float(per_row["nested_inside"].mean()), 3),
               width_out_of_sample=round(float((per_row["nested_high"] / per_row["nested_low"]).median()), 3))
    return per_row, row


def nested_residuals(fits: dict | None = None):
    """The held-out residuals the nested check is made of, kept per grouping (grp43, issue 34: the grouping of
    the range is chosen on the check the book states). For each *judged* source ``k`` and each source ``j``
    of a speed, ``j``'s speeds predicted by the refit that saw neither ``k`` nor ``j`` (``j == k``: the refit
    without ``k``, the plain held-out residual). A DataFrame of one row per (``judged_source``, speed) with
    :func:`loso_residuals`' columns: ``row``, ``source`` (``j``), ``engine``, ``batching``, ``metric``,
    ``kind``, ``calibrated`` (whether that refit had the row's engine and era) and ``log_ratio``. The same
    refits as :func:`nested_check` (pass one ``fits`` dict to both to fit them once)."""
    import pandas as pd

    df = _read()
    fit = _fit_without([r for r in df.itertuples() if _trainable(r)], {} if fits is None else fits)
    ranged = df[~df["metric"].isin(RATIO_METRICS)]
    sources = sorted(ranged["url"].unique())
    out = []
    for k in sources:
        for j in sources:
            c = fit(frozenset({k, j}))
            for r in ranged[ranged["url"] == j].itertuples():
                log_ratio, cal = _log_ratio(c, r)
                out.append(dict(judged_source=k, row=r.Index, source=j, engine=r.engine, batching=r.batching,
                                metric=r.metric, kind=_kind(r.metric), calibrated=cal,
                                log_ratio=round(log_ratio, 6)))
    return pd.DataFrame(out)


def nested_grouped(inner, grouping: str | None = None):
    """The nested check of a grouping (:data:`GROUPINGS`; default :data:`SERVING_GROUPING`) from
    :func:`nested_residuals` ``inner``: each judged source's speeds (``source == judged_source``) take the
    range of the first group of their chain (:func:`_group_quantiles`, :data:`MIN_GROUP`) among the other
    sources' residuals of refits that saw neither. One row per speed: ``row``, ``group``, ``nested_low``,
    ``nested_high`` (speed ratios, unrounded) and ``nested_inside``. Pooled, the bounds are
    :func:`nested_check`'s (``unit="row"``)."""
    import pandas as pd

    out = []
    for k, part in inner.groupby("judged_source", sort=False):
        q = _group_quantiles(part[part["source"] != k], grouping)
        mine = part[part["source"] == k]
        for r, g in zip(mine.itertuples(), _assign(mine, q, grouping)):
            lo, hi = q[g]
            out.append(dict(row=r.row, group=g, nested_low=math.exp(lo), nested_high=math.exp(hi),
                            nested_inside=lo - 1e-12 <= r.log_ratio <= hi + 1e-12))
    return pd.DataFrame(out).sort_values("row", ignore_index=True)


def interval_table(res, grouping: str | None = None):
    """The stated ranges from held-out residuals ``res`` (:func:`loso_residuals`), grouped by ``grouping``
    (:data:`GROUPINGS`; default :data:`SERVING_GROUPING`). Returns
    ``(table, checked)``:
    ``table`` has one row per group (``low``, ``high`` speed ratios, ``width`` = high / low, ``n_rows``,
    ``n_sources``, ``coverage_out_of_sample``) and an ``overall`` row (coverage over every row, the median
    width); ``checked`` is ``res`` with each row's ``group``, the ``low`` and ``high`` it was checked against
    (built without its own source's residuals) and ``inside``. ``width`` is the final ranges' (built from
    every residual), ``width_out_of_sample`` the median over the group's rows of the range each was checked
    against."""
    import pandas as pd

    final = _group_quantiles(res, grouping)
    checked = res.copy()
    lows, highs = [], []
    for src, part in res.groupby("source", sort=False):
        q = _group_quantiles(res[res["source"] != src], grouping)
        for r, g in zip(part.itertuples(), _assign(part, q, grouping)):
            lows.append((r.Index, math.exp(q[g][0])))
            highs.append((r.Index, math.exp(q[g][1])))
    checked["low"] = pd.Series(dict(lows)).round(4)
    checked["high"] = pd.Series(dict(highs)).round(4)
    checked["group"] = _assign(res, final, grouping)
    oos_width = checked["high"] / checked["low"]
    ratio = checked["log_ratio"].map(math.exp)
    checked["inside"] = (ratio >= checked["low"]) & (ratio <= checked["high"])
    rows = []
    for g, (lo, hi) in final.items():
        part = checked[checked["group"] == g]
        rows.append(dict(group=g, low=round(math.exp(lo), 3), high=round(math.exp(hi), 3),
                         width=round(math.exp(hi - lo), 3), n_rows=len(part),
                         n_sources=part["source"].nunique(),
                         coverage_out_of_sample=round(part["inside"].mean(), 3) if len(part) else math.nan,
                         width_out_of_sample=round(float(oos_width[part.index].median()), 3) if len(part)
                         else math.nan))
    widths = [math.exp(final[g][1] - final[g][0]) for g in checked["group"]]
    rows.append(dict(group="overall", low=float("nan"), high=float("nan"),
                     width=round(float(pd.Series(widths).median()), 3), n_rows=len(checked),
                     n_sources=checked["source"].nunique(),
                     coverage_out_of_sample=round(checked["inside"].mean(), 3),
                     width_out_of_sample=round(float(oos_width.median()), 3)))
    table = pd.DataFrame(rows)
    table.insert(1, "coverage_nominal", COVERAGE)
    return table, checked


def grouping_table(res, inner=None):
    """Every grouping of :data:`GROUPINGS` measured on the held-out residuals ``res``: coverage out of sample,
    median width of the stated ranges and of the ranges each row was checked against (issue 34: a grouping is
    used only where it narrows the median range at 75% measured coverage or more). With ``inner``
    (:func:`nested_residuals`), also ``coverage_nested`` and ``median_width_nested``: the same check nested
    (:func:`nested_grouped`), the figures the grouping is chosen on (:func:`grouping_choice`; grp43). ``used``
    marks :data:`SERVING_GROUPING`."""
    import pandas as pd

    out = []
    for name in GROUPINGS:
        overall = interval_table(res, name)[0].set_index("group").loc["overall"]
        row = dict(grouping=name, coverage_out_of_sample=overall["coverage_out_of_sample"],
                   median_width=overall["width"], median_width_out_of_sample=overall["width_out_of_sample"])
        if inner is not None:
            chk = nested_grouped(inner, name)
            row.update(coverage_nested=round(float(chk["nested_inside"].mean()), 3),
                       median_width_nested=round(float((chk["nested_high"] / chk["nested_low"]).median()), 3))
        out.append({**row, "used": name == SERVING_GROUPING})
    return pd.DataFrame(out)


def grouping_choice(table) -> str:
    """The grouping issue 34's rule picks from :func:`grouping_table` (its stored form,
    ``data/serving_groupings.csv``, too): among the groupings covering at least :data:`MIN_COVERAGE` of the
    held-out speeds in the nested check, the narrowest median nested width; ``"pooled"`` unless one is
    strictly narrower (a grouping is used only where it narrows the range). Before grp43 the rule read the
    plain check's figures (``coverage_out_of_sample``, ``median_width_out_of_sample``)."""
    if not hasattr(table, "columns"):
        raise TypeError(f"table must be a DataFrame (grouping_table), got {type(table).__name__}")
    t = table.set_index("grouping") if "grouping" in table.columns else table
    for col in ("coverage_nested", "median_width_nested"):
        if col not in t:
            raise ValueError(f"table must have the nested check's column {col!r}: grouping_table(res, inner)")
    ok = t.loc[t["coverage_nested"] >= MIN_COVERAGE, "median_width_nested"]
    if ok.empty:
        return "pooled"          # none meets the coverage bar: no grouping earns its complexity
    best = ok.idxmin()
    return "pooled" if "pooled" in ok and ok[best] >= ok["pooled"] else best


def fit_serving_constants(fits: dict | None = None):
    """Everything ``tools/calibrate_serving.py`` writes: ``(constants, table, checked)``, the fit on every
    calibration row (:func:`fit_constants`, with ``step_overhead_s`` the default engine's), the stated
    ranges and the held-out check (:func:`interval_table` of :func:`loso_residuals`, given ``fits``). (Before
    issue 34 it returned ``(constants, low, high)``, the range being every row's spread.)"""
    full, res = loso_residuals(fits)
    table, checked = interval_table(res)
    full = {**full, "step_overhead_s": full["engines"][engine_key(DEFAULT_ENGINE, full["engines"])]}
    return full, table, checked


# ----------------------------------------------------------------------------- published rows and ranges
def _stored_check():
    import pandas as pd

    return pd.read_csv(DATA_DIR / "serving_loso.csv").set_index("row")


def published_serving(**constants):
    """``data/serving_published.csv`` with ``predicted`` (:func:`predict_row`), ``published_over_predicted``
    and ``speed_ratio`` (the engine's speed over the model's: for rates the same, for times inverted) at the
    fitted constants, ``nearest_ratio`` (the same; kept for old callers), and the check out of sample
    (``data/serving_loso.csv``, :func:`interval_table`): ``loso_ratio`` (the speed ratio when the row's source
    was left out of the fit), ``group``, ``low``, ``high`` (the range built without the source) and
    ``inside`` (NaN for a ratio of two runs, which the range does not cover), and the nested check as
    stored (:func:`nested_table`, no refit): ``nested_low``, ``nested_high``, ``nested_inside`` (the range
    each speed was judged by, from refits that saw neither its source nor the residual's own; what chapter
    15 states; NaN for a ratio). Chapter 15."""
    df = _read()
    preds = [predict_row(r, **constants) for r in df.itertuples()]
    df["predicted"] = preds
    df["published_over_predicted"] = df["value"] / df["predicted"]
    df["speed_ratio"] = [_ratio(r, r.value, p) for r, p in zip(df.itertuples(), preds)]
    df["nearest_ratio"] = df["speed_ratio"]
    chk = _stored_check()
    df["loso_ratio"] = chk["log_ratio"].map(math.exp).reindex(df.index)
    for col in ("group", "low", "high", "inside", "nested_low", "nested_high", "nested_inside"):
        df[col] = chk[col].reindex(df.index)
    return df


def _range_of(calibrated: bool, metric: str) -> tuple[float, float]:
    from .serve_step import _FIT

    table = {g: (lo, hi) for g, lo, hi in _FIT.intervals}
    return table[next((g for g in _chain(calibrated, metric) if g in table), "all")]


@dataclass(frozen=True)
class ServingRange:
    """What :func:`serving_range` states: the central prediction and the 80% range a published figure of the
    same setting lies in. ``itl_s`` and ``ttft_s`` run (fastest, slowest), ``output_tokens_per_s`` (lowest,
    highest); ``engine`` names the engine and era whose overhead the central prediction uses."""
    central: object            # the Serving of the central prediction
    itl_s: tuple
    ttft_s: tuple
    output_tokens_per_s: tuple
    engine_overhead_known: bool
    engine: str = ""
    coverage: float = COVERAGE


def serving_range(model, gpu, *, engine: str | None = None, batching: str = "continuous",
                  **kwargs) -> ServingRange:
    """The stated 80% range of a serving prediction (chapter 15, "Checked against published figures"). An
    engine with its own fitted overhead (``engine=``, one of :data:`llmsizing.serve.ENGINES`; the default
    ``None`` is vLLM) or a given ``step_overhead_s`` takes the ``calibrated`` ranges; any other engine name is
    priced at ``batching``'s pooled overhead and takes the ``uncalibrated`` ranges, measured on engines the
    fit had not seen. Per-token figures (ITL, rates) and the TTFT each take their group's range
    (``data/serving_intervals.csv``). ``kwargs`` and ``batching`` go to :func:`llmsizing.serve.serving`
    (kv30: a static batch runs as stated, a continuous one in waves above ``max_batch``)."""
    name = DEFAULT_ENGINE if engine is None else engine
    if not isinstance(name, str):
        raise TypeError(f"engine must be an engine name (str), got {type(name).__name__}")
    check_choice("batching", batching, BATCHING)
    known = name in ENGINES or "step_overhead_s" in kwargs
    if name in ENGINES:
        central = serving(model, gpu, engine=name, batching=batching, **kwargs)
    else:
        from dataclasses import replace

        central = serving(model, gpu, batching=batching,
                          **{"step_overhead_s": ERA_STEP_OVERHEAD_S[batching], **kwargs})
        central = replace(central, engine=f"{name}/{batching} (pooled {batching} overhead)")
    p_lo, p_hi = _range_of(known, "itl_s")
    t_lo, t_hi = _range_of(known, "ttft_s")
    return ServingRange(central, (central.itl_s / p_hi, central.itl_s / p_lo),
                        (central.ttft_s / t_hi, central.ttft_s / t_lo),
                        (central.output_tokens_per_s * p_lo, central.output_tokens_per_s * p_hi), known,
                        central.engine)


#: The compute formats :func:`mfu_by_compute` fits apart by default: FP8 and the 16-bit formats.
MFU_GROUPS = {"fp8": ("fp8",), "16-bit": ("bf16", "fp16", "fp16-acc16")}


def mfu_by_compute(groups=None):
    """The prefill MFU each group of the rows the fit learns from (:func:`_trainable`) would fit alone, the
    bandwidth shares and step overheads held at the stored constants (:func:`~llmsizing.serve_fit.fit_mfu`):
    a DataFrame indexed by group (``groups``: label -> the ``compute`` formats of
    ``data/serving_published.csv`` it takes, default :data:`MFU_GROUPS`), then ``all`` (every such row), with
    ``n_rows`` and ``prefill_mfu``. ``all`` reproduces the stored MFU, the joint fit's optimum; a group's
    differs where its rows pull the shared MFU their way. The FP8 rows compute at the MFU times
    :func:`~llmsizing.hardware.dtype_kernel_share` (serve43), so both groups' figures are 16-bit shares:
    before, fitted alone the FP8 rows set one MFU at 0.500 and the 16-bit rows at 0.609. Chapter 15
    ("Prefill is compute-bound")."""
    import pandas as pd

    from .serve_step import _FIT

    groups = MFU_GROUPS if groups is None else groups
    if not isinstance(groups, dict) or not groups:
        raise TypeError(f"groups must be a non-empty dict of label -> compute formats, got {groups!r}")
    rows = [r for r in _read().itertuples() if _trainable(r)]
    held = dict(weights_bu=_FIT.weights_bu, attention_bu=_FIT.attention_bu,
                step_overhead_s=dict(_FIT.engine_step_overhead_s))
    out = {}
    for label, formats in {**groups, "all": None}.items():
        sub = rows if formats is None else [r for r in rows if r.compute in formats]
        if not sub:
            raise ValueError(f"groups[{label!r}]: no row the fit learns from computes in {formats}")
        out[label] = {"n_rows": len(sub), "prefill_mfu": fit_mfu(sub, **held)}
    return pd.DataFrame(out).T.astype({"n_rows": int})


__all__ = ["FITTED", "COVERAGE", "MIN_GROUP", "MIN_COVERAGE", "MAX_WIDTH", "NESTED_GROUP", "nested_check",
           "nested_table", "predict_row", "published_serving", "fit_constants",
           "fit_serving_constants", "loso_residuals", "interval_table", "grouping_table", "grouping_choice",
           "nested_residuals", "nested_grouped",
           "conformal_quantiles", "GROUPINGS", "SERVING_GROUPING",
           "overhead_interval", "ServingRange", "serving_range", "RANGE_LOW", "RANGE_HIGH", "MFU_GROUPS",
           "mfu_by_compute", "fit_mfu"]
