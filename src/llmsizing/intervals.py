"""Prediction intervals checked on sources they never saw (chapter 10, "How sure is the estimate"; issue 34).

One recipe for every calibrated area (training MFU, fine-tuning step time, serving): a model ``f`` fitted on
published rows predicts ``log y``; its range is stated at a nominal coverage (80%) and that coverage is
*measured*, never assumed.

1. **Leave one source out.** Rows are grouped by the paper or benchmark they come from (:func:`source_key`):
   rows of one source share a cluster, a framework version and an author's way of counting, so their errors
   move together and holding out single rows would flatter the fit. For each source ``k`` the model is
   refitted on the other sources and predicts ``k``'s rows; ``log(published) - log(predicted)`` is an
   out-of-source residual (:func:`loso_residuals`).
2. **Conformal bounds with the source as the unit** (:func:`conformal_bounds`; split conformal: Vovk et al.
   2005, Lei et al. 2018, "Distribution-free predictive inference for regression", Sec. 2.2; leaving groups
   out: Barber et al. 2021, "Predictive inference with the jackknife+", Sec. 3; weighting each group as one
   draw: the pooled-CDF method of Dunn, Wasserman and Ramdas 2022, "Distribution-free prediction sets for
   two-layer hierarchical models"). A new paper is a new draw of a source, not of a row, so each of the ``S``
   sources weighs the same and its rows share its weight; the upper bound is the smallest residual at which
   the weighted share reaches ``(1 - alpha / 2)(S + 1) / S``, the lower bound the same from below
   (``alpha = 1 - coverage``; both tails are kept apart, because whole runs fall short of a steady state more
   often than they beat it). With one row per source this is the textbook rank ``ceil((n + 1)(1 - alpha /
   2))``. Weighting by row instead (``unit="row"``) counts a benchmark of 13 rows 13 times and under-covers a
   new source whose rows move together.
3. **Measured, not assumed** (:func:`loso_check`). The coverage a reader can trust is that of each held-out
   source's rows by the interval computed *without* that source: for each ``k``, every other source ``j`` is
   scored by a model fitted without ``j`` and ``k`` (nested), the bounds come from those scores only, and
   ``k``'s rows are checked against them. The median of ``high / low`` over the rows is the width stated
   with it. With two sources no nested check exists: ``nested=False`` then scores ``j`` by the fold that left
   ``j`` out (its fit saw ``k``), which is said in the method.
4. **Width where the data differ** (``strata``): a stratum (e.g. BF16 against FP8) gets bounds of its own
   when it has enough units for finite ones (:func:`min_units`: 9 at 80%); otherwise the pooled bounds apply.
5. **Calibrated rows only** (``calibrated``): a row whose fit has nothing of its own to go on (a GPU
   generation and dtype with no calibration run among the other sources: a stand-in efficiency or intercept)
   is not a draw of the calibrated model's error. Such a row, decided per fold, sets no bound (neither the
   stated ones nor a nested fold's); it is still checked against the interval computed without its source,
   and ``LosoCheck.calibrated`` marks it so that its coverage is reported apart (issue 34).

Plain functions on arrays; the areas' fits live in :mod:`llmsizing.calibration`,
:mod:`llmsizing.finetune_time` and the serving modules, and ``tools/calibrate.py`` writes the measured table
to ``data/intervals.csv``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

#: The nominal coverage every range of the book is stated at.
NOMINAL_COVERAGE = 0.8
#: What counts as one draw in :func:`conformal_bounds`: a source (the default) or a row.
UNITS = ("source", "row")
#: How :func:`conformal_bounds` scores a residual: its two tails apart (the default) or its absolute value.
SCORES = ("tails", "absolute")


def source_key(source) -> str:
    """The paper or benchmark a ``source`` cell cites: the text before its first ``" ("`` (the details in
    brackets, table or commit, are dropped), stripped of trailing punctuation. ``"Narayanan et al. 2021
    (arXiv:2104.04473), Table 1"`` -> ``"Narayanan et al. 2021"``."""
    if not isinstance(source, str):
        raise TypeError(f"source must be a string (a CSV's source cell), got {type(source).__name__}")
    key = source.split(" (")[0].strip(" ,;:.")
    if not key:
        raise ValueError(f"source must name a paper or benchmark before any bracket, got {source!r}")
    return key


def _check_coverage(coverage) -> float:
    import numbers

    if isinstance(coverage, bool) or not isinstance(coverage, numbers.Real):
        raise TypeError(f"coverage must be a number in (0, 1), e.g. 0.8; got {type(coverage).__name__}")
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be in (0, 1), e.g. 0.8; got {coverage!r}")
    return float(coverage)


def _finite_array(name, values):
    import numpy as np

    try:
        a = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}") from None
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite numbers (log residuals); got a NaN or infinity")
    return a


def min_units(coverage: float = NOMINAL_COVERAGE, score: str = "tails") -> int:
    """The fewest units (sources, or rows with ``unit="row"``) for which both bounds of
    :func:`conformal_bounds` are finite at ``coverage``: the smallest ``S`` with ``(1 - alpha / 2)(S + 1) / S
    <= 1``, i.e. ``S >= (2 - alpha) / alpha`` (9 at 80%). With ``score="absolute"`` (one step, ``(1 -
    alpha)(S + 1) / S <= 1``) ``S >= (1 - alpha) / alpha``: 4 at 80% (the MoE range, 7 sources; issue 35).
    A stratum still needs the two-tailed count for a range of its own (:func:`loso_check`)."""
    alpha = 1 - _check_coverage(coverage)
    if score not in SCORES:
        raise ValueError(f"score must be one of {', '.join(SCORES)}; got {score!r}")
    return math.ceil(((1 - alpha) if score == "absolute" else (2 - alpha)) / alpha - 1e-9)


def nested_min_units(coverage: float = NOMINAL_COVERAGE) -> int:
    """The fewest units a nested leave-one-unit-out check of :func:`conformal_bounds` needs at ``coverage``:
    each fold sets its bounds from the other ``S - 1`` units, which must be :func:`min_units`, so ``S =
    min_units + 1`` (10 at 80%, 5 at 60%; :func:`llmsizing.rl.rl_interval`, chapter 19)."""
    return min_units(coverage) + 1


def sources_outside(n_sources: int, coverage: float = NOMINAL_COVERAGE) -> float:
    """How many sources' weight each bound of :func:`conformal_bounds` leaves outside it when ``n_sources``
    sources (each weighing ``1 / n_sources``) set it: ``n_sources - (1 - alpha / 2)(n_sources + 1)``, at
    least 0. At 0 the bounds are the most extreme residuals; a source whose runs stray leaves the bound
    only once this reaches 1 (``n_sources >= (2 - alpha / 2) / (alpha / 2)``: 19 at 80%, so a nested check
    of 20 sources). At 80%: 9 sources leave 0 outside, 10 leave 0.1 (module docstring, step 2; chapter
    10)."""
    from ._validate import check_int

    n = check_int("n_sources", n_sources)
    alpha = 1 - _check_coverage(coverage)
    return max(0.0, n - (1 - alpha / 2) * (n + 1))


def _upper(r, w, level):
    """The smallest of ``r`` at which the cumulative weight ``w`` (in ``r``'s sorted order) reaches
    ``level``."""
    import numpy as np

    order = np.argsort(r, kind="stable")
    cum = np.cumsum(w[order])
    return float(r[order][min(int(np.searchsorted(cum, level - 1e-12)), len(r) - 1)])


def conformal_bounds(log_residuals, coverage: float = NOMINAL_COVERAGE, sources=None,
                     score: str = "tails") -> tuple[float, float]:
    """``(lower, upper)`` log bounds that hold a new source's residual with probability at least ``coverage``
    when the sources are exchangeable (module docstring, step 2): each of the ``S`` sources of ``sources``
    (one label per residual; ``None``: every residual its own source) weighs ``1 / S``, shared by its rows,
    and the bounds are where the weighted share of residuals passes ``(1 - alpha / 2)(S + 1) / S`` from
    either end. Raises ``ValueError`` with fewer than :func:`min_units` sources of ``score`` (a bound would
    be infinite).

    ``score`` (:data:`SCORES`): ``"tails"`` (the default, every range of the book) keeps the two tails apart
    as above, each with its own finite-sample step ``(S + 1) / S``; ``"absolute"`` scores ``|residual|``
    (Lei et al. 2018, Sec. 2.2) and returns ``(-q, q)``, ``q`` where the weighted share of ``|residual|``
    passes ``(1 - alpha)(S + 1) / S``: one step instead of two, so less conservative, symmetric about the
    prediction (:mod:`llmsizing.range_candidates` measures both)."""
    import numpy as np

    coverage = _check_coverage(coverage)
    if score not in SCORES:
        raise ValueError(f"score must be one of {', '.join(SCORES)}; got {score!r}")
    r = _finite_array("log_residuals", log_residuals)
    if sources is None:
        src = np.arange(len(r)).astype(object)
    else:
        src = _groups("sources", sources, len(r))
    keys, inverse, counts = np.unique(src.astype(str), return_inverse=True, return_counts=True)
    n_units, alpha = len(keys), 1 - coverage
    if n_units < min_units(coverage, score):
        raise ValueError(f"log_residuals come from {n_units} {'sources' if sources is not None else 'values'}"
                         f": at coverage={coverage:g} both bounds need at least {min_units(coverage, score)}"
                         f" (score={score!r})")
    w = 1.0 / (n_units * counts[inverse])
    if score == "absolute":
        level = (1 - alpha) * (n_units + 1) / n_units      # (<= 1: min_units of the absolute score)
        q = _upper(np.abs(r), w, level)
        return -q, q
    level = (1 - alpha / 2) * (n_units + 1) / n_units
    return -_upper(-r, w, level), _upper(r, w, level)


@dataclass(frozen=True)
class Interval:
    """A range as factors on a prediction: ``low`` and ``high`` (``exp`` of the log bounds), at ``coverage``,
    from ``n_rows`` residuals of ``n_sources`` sources."""

    low: float
    high: float
    coverage: float
    n_rows: int
    n_sources: int

    @property
    def width(self) -> float:
        """``high / low``: how many times the fast end exceeds the slow end."""
        return self.high / self.low


def loso_interval(log_residuals_by_source, coverage: float = NOMINAL_COVERAGE,
                  unit: str = "source") -> Interval:
    """The interval of :func:`conformal_bounds` over out-of-source residuals given as ``{source: [log
    residual, ...]}`` (each source's rows predicted by a model fitted without it): what serving or any other
    area calls once it has its own leave-one-source-out residuals. ``unit="source"`` (default) needs
    :func:`min_units` sources; ``unit="row"`` weighs rows alike (for an area with fewer sources: say so)."""
    from collections.abc import Mapping

    if not isinstance(log_residuals_by_source, Mapping):
        raise TypeError("log_residuals_by_source must be a mapping {source: [log residuals]}, got "
                        f"{type(log_residuals_by_source).__name__}")
    if len(log_residuals_by_source) < 2:
        raise ValueError(f"log_residuals_by_source must hold at least 2 sources (one source's residuals "
                         f"cannot show how a new source differs); got {len(log_residuals_by_source)}")
    parts = [_finite_array(f"log_residuals_by_source[{k!r}]", v) for k, v in log_residuals_by_source.items()]
    if any(len(p) == 0 for p in parts):
        raise ValueError("log_residuals_by_source has a source with no residual")
    import numpy as np

    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}; got {unit!r}")
    allr = np.concatenate(parts)
    labels = np.concatenate([[str(k)] * len(p) for k, p in zip(log_residuals_by_source, parts)])
    lo, hi = conformal_bounds(allr, coverage, labels if unit == "source" else None)
    return Interval(math.exp(lo), math.exp(hi), coverage, len(allr), len(parts))


def _groups(name, values, n):
    import numpy as np

    a = np.asarray(values, dtype=object).ravel()
    if len(a) != n:
        raise ValueError(f"{name} must have one entry per row ({n}), got {len(a)}")
    return a


def loso_residuals(log_y, sources, fit_predict):
    """Out-of-source log residuals, one per row: for each source ``k``, ``fit_predict(train, test)`` (boolean
    masks over the rows: fit on ``train``, return the log predictions of the ``test`` rows in order) is called
    with ``train = sources != k`` and ``test = sources == k``."""
    import numpy as np

    y = _finite_array("log_y", log_y)
    src = _groups("sources", sources, len(y))
    out = np.full(len(y), np.nan)
    for k in dict.fromkeys(src):
        test = src == k
        out[test] = y[test] - _predictions(fit_predict, src != k, test)
    return out


def _predictions(fit_predict, train, test):
    import numpy as np

    if not callable(fit_predict):
        raise TypeError(f"fit_predict must be a function (train, test) -> log predictions, got "
                        f"{type(fit_predict).__name__}")
    pred = _finite_array("fit_predict's log predictions", fit_predict(train, test))
    if len(pred) != int(np.sum(test)):
        raise ValueError(f"fit_predict returned {len(pred)} predictions for {int(np.sum(test))} test rows")
    return pred


def _bounds(res, src, strata, coverage, unit, score="tails"):
    """Pooled bounds, and per stratum those of its own residuals where it has :func:`min_units` units."""
    units = src if unit == "source" else None
    pooled = conformal_bounds(res, coverage, units, score)
    per = {}
    if strata is not None:
        for s in dict.fromkeys(strata):
            mine = strata == s
            n = len(set(src[mine])) if unit == "source" else int(mine.sum())
            if n >= min_units(coverage):
                per[s] = conformal_bounds(res[mine], coverage, None if units is None else units[mine], score)
    return pooled, per


@dataclass(frozen=True)
class LosoCheck:
    """What :func:`loso_check` measured. Per row (arrays in the rows' order): ``residuals`` (out of source),
    ``low_log``/``high_log`` (the bounds computed without the row's source) and ``inside``. ``bounds`` are the
    stated log bounds (all sources), ``{stratum: (lo, hi)}`` with key ``None`` for the pooled ones."""

    residuals: object
    low_log: object
    high_log: object
    inside: object
    bounds: dict
    coverage: float
    nested: bool
    unit: str = "source"
    #: Per row: whether the fit without the row's source calibrates it (step 5); ``None``: every row.
    calibrated: object = None

    @property
    def calibrated_rows(self):
        """``calibrated`` as a boolean array (all True when the check was given no rule)."""
        import numpy as np

        return np.ones(len(self.residuals), bool) if self.calibrated is None else self.calibrated

    @property
    def measured_coverage(self) -> float:
        """The share of rows inside the interval computed without their source (the calibrated rows: a row
        priced on a stand-in is counted apart, module docstring step 5)."""
        return float(self.inside[self.calibrated_rows].mean())

    @property
    def median_width(self) -> float:
        """The median over the calibrated rows of ``high / low`` of those intervals."""
        import numpy as np

        cal = self.calibrated_rows
        return float(np.exp(np.median(self.high_log[cal] - self.low_log[cal])))

    def stated(self, stratum=None) -> tuple[float, float]:
        """The stated ``(low, high)`` factors for ``stratum`` (the pooled ones if it has none of its own)."""
        lo, hi = self.bounds.get(stratum, self.bounds[None])
        return math.exp(lo), math.exp(hi)


def copied_check(check: LosoCheck) -> LosoCheck:
    """A copy of ``check`` whose arrays and bounds are its own (a check kept for the default table is handed
    out this way, so that no caller can change the kept one)."""
    import dataclasses

    import numpy as np

    keys = ("residuals", "low_log", "high_log", "inside") + (("calibrated",) * (check.calibrated is not None))
    return dataclasses.replace(check, **{k: np.array(getattr(check, k), copy=True) for k in keys},
                               bounds=dict(check.bounds))


def keyed_calibration(keys, fits):
    """A ``calibrated(train, test)`` rule for :func:`loso_check` (module docstring, step 5): a test row is
    calibrated when a row of ``train`` where ``fits`` is true has its key (``keys``: one per row, e.g. its
    (GPU generation, dtype); ``fits``: the rows a fit learns its keys from, e.g. the calibration runs).
    Returns one True/False per test row, in order."""
    import numpy as np

    keys = list(keys)
    fits = np.asarray(fits, dtype=bool)
    if fits.shape != (len(keys),):
        raise ValueError(f"fits must be one True/False per key ({len(keys)}), got shape {fits.shape}")

    def calibrated(train, test):
        known = {keys[i] for i in np.flatnonzero(np.asarray(train, bool) & fits)}
        return np.array([keys[i] in known for i in np.flatnonzero(test)], dtype=bool)

    return calibrated


def _calibrated_of(calibrated, train, test):
    import numpy as np

    n = int(np.sum(test))
    if calibrated is None:
        return np.ones(n, bool)
    out = np.asarray(calibrated(train, test), dtype=bool).ravel()
    if len(out) != n:
        raise ValueError(f"calibrated returned {len(out)} flags for {n} test rows")
    return out


def loso_check(log_y, sources, fit_predict, *, coverage: float = NOMINAL_COVERAGE, strata=None,
               nested: bool = True, unit: str = "source", score: str = "tails",
               calibrated=None) -> LosoCheck:
    """Leave-one-source-out conformal intervals and their measured coverage (module docstring, steps 1-5).
    ``fit_predict(train, test)`` as in :func:`loso_residuals`; ``strata`` an optional label per row; ``unit``
    what :func:`conformal_bounds` weighs alike (:data:`UNITS`), ``score`` how it scores a residual
    (:data:`SCORES`); ``calibrated(train, test)`` (e.g. :func:`keyed_calibration`; ``None``: every row) one
    True/False per test row, False where the fit on ``train`` has no calibration of its own for the row: such
    a row sets no bound (step 5). Nested (the default) refits ``S + S (S - 1)`` times and needs three sources
    or more."""
    import numpy as np

    coverage = _check_coverage(coverage)
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}; got {unit!r}")
    if not isinstance(nested, bool):
        raise TypeError(f"nested must be True or False, got {type(nested).__name__}")
    y = _finite_array("log_y", log_y)
    src = _groups("sources", sources, len(y))
    st = None if strata is None else _groups("strata", strata, len(y))
    keys = list(dict.fromkeys(src))
    if len(keys) < (3 if nested else 2):
        raise ValueError(f"sources must name at least {3 if nested else 2} sources for a "
                         f"{'nested ' if nested else ''}leave-one-source-out check; got {len(keys)}")
    if score not in SCORES:
        raise ValueError(f"score must be one of {', '.join(SCORES)}; got {score!r}")
    res = loso_residuals(y, src, fit_predict)
    cal = np.ones(len(y), bool)
    for k in keys:
        cal[src == k] = _calibrated_of(calibrated, src != k, src == k)
    pooled, per = _bounds(res[cal], src[cal], None if st is None else st[cal], coverage, unit, score)
    lo_log, hi_log = np.empty(len(y)), np.empty(len(y))
    for k in keys:
        test, rest = src == k, src != k
        inner_cal = cal.copy()
        if nested:
            inner = np.full(len(y), np.nan)
            for j in keys:
                if j != k:
                    mine = src == j
                    inner[mine] = y[mine] - _predictions(fit_predict, rest & ~mine, mine)
                    inner_cal[mine] = _calibrated_of(calibrated, rest & ~mine, mine)
        else:
            inner = res
        use = rest & inner_cal
        p, s = _bounds(inner[use], src[use], None if st is None else st[use], coverage, unit, score)
        for i in np.flatnonzero(test):
            lo_log[i], hi_log[i] = s.get(st[i], p) if st is not None else p
    inside = (res >= lo_log - 1e-12) & (res <= hi_log + 1e-12)
    return LosoCheck(res, lo_log, hi_log, inside, {None: pooled, **per}, coverage, nested, unit,
                     None if calibrated is None else cal)


def intervals_table():
    """``data/intervals.csv`` as a DataFrame: per area (training, fine-tuning, ...) and group, the nominal and
    the measured (leave-one-source-out) coverage, the median width ``high / low``, the stated factors, the
    rows and sources behind them and the method. Written by ``tools/calibrate.py``; shown in chapters 10 and
    16."""
    from pathlib import Path

    import pandas as pd

    return pd.read_csv(Path(__file__).resolve().parents[2] / "data" / "intervals.csv")


@cache
def _measured_rows() -> dict:
    import csv
    from pathlib import Path

    with open(Path(__file__).resolve().parents[2] / "data" / "intervals.csv", newline="") as fh:
        return {(r["area"], r["group"]): r for r in csv.DictReader(fh)}


def coverage_note(area: str, group: str, runs: str) -> str:
    """What ``data/intervals.csv``'s row ``(area, group)`` measured out of source, in words, naming its runs
    ``runs`` (e.g. ``"FP8 runs"``): ``"80% range; out of source it held 3 of 6 FP8 runs (3 sources), 1.83x
    wide at the median"`` (the nominal coverage, then each run against the interval computed without its
    source, and the median end-to-end width of those intervals: issue 34 states both). What
    :func:`~llmsizing.mfu.mfu_estimate` states with its range (``MfuEstimate.range_note``); chapter 10."""
    return (f"{float(_measured_row(area, group)['nominal_coverage']):.0%} range; out of source it held "
            + held_note(area, group, runs))


def held_note(area: str, group: str, runs: str) -> str:
    """The measured half of :func:`coverage_note`: ``"3 of 6 FP8 runs (3 sources), 1.83x wide at the median"``
    (what :func:`~llmsizing.mfu_inputs.estimate_note` adds for a second row)."""
    row = _measured_row(area, group)
    n = int(row["n_rows"])
    held = round(float(row["measured_coverage"]) * n)
    return (f"{held} of {n} {runs} ({row['n_sources']} sources), {float(row['median_width']):.2f}x wide at "
            "the median")


def _measured_row(area: str, group: str) -> dict:
    row = _measured_rows().get((area, group))
    if row is None:
        raise ValueError(f"data/intervals.csv has no row ({area!r}, {group!r}): run tools/calibrate.py")
    return row


def median_factor_check(y, src, coverage: float, unit: str = "source") -> tuple:
    """``(check, low, high)``: a one-factor correction (the median of the log ratios ``y``) checked by
    :func:`loso_check` leaving the sources ``src`` out, ``unit`` the units of its coverage, and the stated
    range as factors on the prediction. Used by :func:`llmsizing.rl.rl_interval` (RL steps, Part V) and
    :func:`llmsizing.rl_split.forward_split_interval` (the log-prob/update split)."""
    import numpy as np

    def fit_predict(train, test):
        return np.full(int(test.sum()), np.median(y[train]))

    chk = loso_check(y, src, fit_predict, coverage=coverage, unit=unit)
    lo, hi = chk.stated()
    mid = math.exp(float(np.median(y)))
    return chk, mid * lo, mid * hi
