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
kernel).

**The stated range** (issue 34) comes from leaving one *source* (URL: all rows of one page or paper) out at a
time (:func:`loso_residuals`): refit on the other sources' calibration rows, predict every speed of the
held-out source, keep the log of engine speed / model speed. The 80% range of a group of predictions is the
split-conformal pair of order statistics of those held-out residuals (:func:`conformal_quantiles`). The
residuals may be grouped by what could explain the spread (:data:`GROUPINGS`: whether the engine had its own
overhead in the fold, a time to first token or a per-token figure, the batching era, the engine); a group with
fewer than :data:`MIN_GROUP` residuals is merged into its parent. A grouping is used only where it narrows the
median range at 75% measured coverage or more (:func:`grouping_table`); today none does, so
:data:`SERVING_GROUPING` is ``"pooled"`` (issue 34, ranges2). The coverage is measured out of sample too
(:func:`interval_table`): each source's rows are checked against ranges built from the other sources'
residuals only. ``tools/calibrate_serving.py`` writes the constants to
``data/serving_model.csv``, the ranges to ``data/serving_intervals.csv`` and the held-out residuals to
``data/serving_loso.csv``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._validate import check_choice, check_fraction
from .catalog import DATA_DIR
from .serve_engine import BATCHING, DEFAULT_ENGINE, engine_key
from .serve_step import ENGINE_STEP_OVERHEAD_S, ENGINES, ERA_STEP_OVERHEAD_S, RANGE_HIGH, RANGE_LOW, serving

#: Metrics that are times (a lower value is faster).
TIME_METRICS = ("ttft_s", "itl_s")
#: Metrics that are a ratio of two runs (a batch's gain, a kernel's gain): checked, not in the stated range.
RATIO_METRICS = ("batch_gain", "grouped_attention_gain")
#: The constants :func:`fit_constants` fits, in order, with their search bounds.
FITTED = (("weights_bu", 0.3, 1.0), ("attention_bu", 0.1, 1.0), ("step_overhead_s", 0.0, 0.02),
          ("prefill_mfu", 0.2, 1.0))
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
SERVING_GROUPING = "pooled"
#: How the range is built (written to ``data/serving_intervals.csv``).
METHOD = ("leave-one-source-out refit; split-conformal order statistics of held-out log speed ratios, every "
          "held-out speed one unit, pooled over engines and metrics (grouping 'pooled': no grouping of "
          "serve_calibration.GROUPINGS narrowed the median range at 75% measured coverage)")


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


def _key(r) -> str:
    """A row's engine and batching era, as the fit keys its step overhead: ``"vLLM/continuous"``."""
    return f"{r.engine}/{r.batching}"


def predict_row(r, **constants) -> float:
    """What :func:`llmsizing.serve.serving` predicts for one row of ``data/serving_published.csv`` (a
    namedtuple from ``itertuples``), at the given constants (``mbu``, ``attention_bu``, ``step_overhead_s``,
    ``mfu``; default the calibrated ones, with the step overhead of the row's engine and era where it has
    one, else the era's pooled one). Rates count the prefill (:attr:`Serving.output_tokens_per_s`)."""
    kw = dict(tp=int(r.tp), weights=r.weights, kv_cache=r.kv_cache, compute=r.compute, prompt=int(r.prompt),
              output=int(r.output), attention_kernel=r.attention_kernel, **constants)
    if "step_overhead_s" not in constants:
        if _key(r) in ENGINE_STEP_OVERHEAD_S:
            kw["engine"] = _key(r)
        else:
            kw["step_overhead_s"] = ERA_STEP_OVERHEAD_S[r.batching]
    s = serving(r.model, r.gpu, batch=int(r.batch), **kw)
    if r.metric == "batch_gain":
        return s.output_tokens_per_s / serving(r.model, r.gpu, **kw).output_tokens_per_s
    if r.metric == "grouped_attention_gain":   # the same run with a grouped over a per-query-head kernel
        grouped = serving(r.model, r.gpu, batch=int(r.batch), **{**kw, "attention_kernel": "grouped"})
        per_head = serving(r.model, r.gpu, batch=int(r.batch), **{**kw, "attention_kernel": "per-query-head"})
        return grouped.output_tokens_per_s / per_head.output_tokens_per_s
    return getattr(s, r.metric)


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
#: The time fields of a Serving the fitted metrics are built from (:class:`llmsizing.serve.Serving`).
_FIELDS = ("prefill_compute_s", "prefill_memory_s", "prefill_comm_s", "batch_prefill_s", "decode_compute_s",
           "decode_memory_s", "decode_comm_s", "interleave_s")


#: The fields each metric reads (:meth:`_Row.at`), in the order it reads them.
_READS = {"ttft_s": ("prefill_compute_s", "prefill_memory_s", "prefill_comm_s"),
          "itl_s": ("decode_memory_s", "decode_compute_s", "decode_comm_s", "interleave_s"),
          "rate": ("decode_memory_s", "decode_compute_s", "decode_comm_s", "batch_prefill_s")}
#: Efficiencies small enough that one side of a field's max (memory or compute) clearly wins: the probes of
#: :meth:`_Row.maxed_prefill`, x = 1 / efficiency at 100 and 200.
_PROBE = (0.01, 0.005)


def _value(t, x1, x2, x3, t0):
    """A field at the reciprocal efficiencies ``x1, x2, x3`` and step overhead ``t0``: ``t`` is its constant
    and four coefficients, or (a batch prefill whose max switches sides, :meth:`_Row.maxed_prefill`) the
    memory line's constant and two coefficients, the compute line's constant and coefficient, and the
    overhead's coefficient."""
    if len(t) == 5:
        c, a1, a2, a3, a4 = t
        return c + sum((a1 * x1, a2 * x2, a3 * x3, a4 * t0))
    m0, m1, m2, c0, c3, a4 = t
    return max(m0 + sum((m1 * x1, m2 * x2)), c0 + c3 * x3) + a4 * t0


class _Row:
    """A row's speed as a function of the four constants, without calling serving() in the search. Each time
    field of :class:`~llmsizing.serve.Serving` is ``a / mbu + b / attention_bu + c / mfu + d t0 + e`` (the
    roofline terms over their efficiencies), read off five calls to serving(); the metric is then built as the
    Serving properties build it. :func:`_fast_rows` checks it against :func:`predict_row` at random constants;
    where it differs, the batch's prefill is tried as a max of its memory and compute lines
    (:meth:`maxed_prefill`), and the slow path is kept for a row where that differs too."""

    def __init__(self, r):
        base = dict(mbu=1.0, attention_bu=1.0, mfu=1.0, step_overhead_s=0.0)
        s0 = _serving_of(r, **base)
        steps = [("mbu", 0.5, 1.0), ("attention_bu", 0.5, 1.0), ("mfu", 0.5, 1.0),
                 ("step_overhead_s", 0.01, 0.01)]
        self.coef = {}
        for name, value, scale in steps:
            s1 = _serving_of(r, **{**base, name: value})
            self.coef[name] = {f: (getattr(s1, f) - getattr(s0, f)) / scale for f in _FIELDS}
        self.const = {f: getattr(s0, f) - sum(self.coef[n][f] for n in ("mbu", "attention_bu", "mfu"))
                      for f in _FIELDS}
        self.r, self.chunks, self.batch, self.output, self.gpus = r, s0.prefill_chunks, s0.batch, s0.output, \
            s0.gpus
        # per field: its constant and its four coefficients, in the order of __call__'s terms
        self.terms = {f: (self.const[f], *(self.coef[n][f] for n in ("mbu", "attention_bu", "mfu",
                                                                      "step_overhead_s"))) for f in _FIELDS}
        self._set_reads()

    def _set_reads(self):
        metric = self.r.metric
        self.reads = tuple(self.terms[f] for f in _READS[metric if metric in ("ttft_s", "itl_s") else "rate"])

    def maxed_prefill(self):
        """Take ``batch_prefill_s`` as ``max(memory line, compute line) + chunks t0`` (serve_step: the batch's
        prefill is ``max(compute, memory)`` plus its fixed communication and overheads), each line read off
        serving() where its side clearly wins (:data:`_PROBE`)."""
        f, (lo, hi), x_lo, x_hi = "batch_prefill_s", _PROBE, 1 / _PROBE[0], 1 / _PROBE[1]

        def at(**kw):
            return getattr(_serving_of(self.r, **{"mbu": 1.0, "attention_bu": 1.0, "mfu": 1.0,
                                                  "step_overhead_s": 0.0, **kw}), f)

        m = at(mbu=lo, attention_bu=lo)
        m1 = (at(mbu=hi, attention_bu=lo) - m) / (x_hi - x_lo)
        m2 = (at(mbu=lo, attention_bu=hi) - m) / (x_hi - x_lo)
        c = at(mfu=lo)
        c3 = (at(mfu=hi) - c) / (x_hi - x_lo)
        line = (m - m1 * x_lo - m2 * x_lo, m1, m2, c - c3 * x_lo, c3, self.terms[f][4])
        self.terms = {**self.terms, f: line}
        self._set_reads()

    def __call__(self, mbu, attention_bu, mfu, step_overhead_s):
        return self.at(1 / mbu, 1 / attention_bu, 1 / mfu, step_overhead_s)

    def at(self, x1, x2, x3, t0):
        """The row's metric at the reciprocal efficiencies ``x1 = 1 / mbu``, ``x2 = 1 / attention_bu``,
        ``x3 = 1 / mfu`` and step overhead ``t0``: each field it reads worked out once (:func:`_value`)."""
        metric = self.r.metric
        if metric == "ttft_s":
            pc, pm, pcomm = (_value(t, x1, x2, x3, t0) for t in self.reads)
            return max(pc, pm) + pcomm + self.chunks * t0
        dm, dc, dcomm, last = (_value(t, x1, x2, x3, t0) for t in self.reads)
        step = max(dm, dc) + dcomm + t0
        if metric == "itl_s":
            return step + (self.batch - 1) * last / self.output
        rate = self.batch * self.output / (last + self.output * step)
        return rate / self.gpus if metric == "output_tokens_per_s_per_gpu" else rate


def _serving_of(r, **constants):
    kw = dict(tp=int(r.tp), weights=r.weights, kv_cache=r.kv_cache, compute=r.compute, prompt=int(r.prompt),
              output=int(r.output), attention_kernel=r.attention_kernel, **constants)
    return serving(r.model, r.gpu, batch=int(r.batch), **kw)


def _fast_rows(rows) -> dict:
    """Row index -> a fast predictor (:class:`_Row`) for every row where it matches :func:`predict_row` to
    1e-9 at three fixed points of the search box; a row where it does not is tried with its batch prefill as
    a max (:meth:`_Row.maxed_prefill`), kept if that matches at those points, every corner of the search box
    and 30 more random points; other rows use :func:`predict_row`."""
    import itertools
    import random

    rng = random.Random(34)
    points = [dict(mbu=rng.uniform(0.3, 1), attention_bu=rng.uniform(0.1, 1), mfu=rng.uniform(0.2, 1),
                   step_overhead_s=rng.uniform(0, 0.02)) for _ in range(3)]
    bounds = {("mbu" if n == "weights_bu" else "mfu" if n == "prefill_mfu" else n): (lo, hi)
              for n, lo, hi in FITTED}
    box = [(max(lo, 1e-3), hi) for lo, hi in bounds.values()]
    more = [dict(zip(bounds, c)) for c in itertools.product(*box)]
    more += [{n: rng.uniform(lo, hi) for n, (lo, hi) in zip(bounds, box)} for _ in range(30)]
    out = {}
    for r in rows:
        if r.metric in RATIO_METRICS:
            continue
        f = _Row(r)
        if all(math.isclose(f(**p), predict_row(r, **p), rel_tol=1e-9) for p in points):
            out[r.Index] = f
            continue
        f.maxed_prefill()
        if all(math.isclose(f(**p), predict_row(r, **p), rel_tol=1e-9) for p in points + more):
            out[r.Index] = f
    return out


def _in_bounds(x) -> bool:
    shared = [(lo, hi) for name, lo, hi in FITTED if name != "step_overhead_s"]
    t0 = next((lo, hi) for name, lo, hi in FITTED if name == "step_overhead_s")
    return (all(lo <= v <= hi for v, (lo, hi) in zip(x[:3], shared))
            and all(t0[0] <= v <= t0[1] for v in x[3:]))


def _loss_of(rows, keys, fast):
    """The search's loss as a function of the vector ``[weights_bu, attention_bu, prefill_mfu, t0_key...]``
    (``keys`` in order): the sum over ``rows`` of the squared log of published / predicted speed
    (:func:`_ratio`), each row predicted by its fast predictor (``fast``, :func:`_fast_rows`) or else by
    :func:`predict_row`; infinite outside the search box. What each row needs is worked out once, the three
    reciprocal efficiencies once per point."""
    index = {k: i for i, k in enumerate(keys)}
    plan = [(fast.get(r.Index), r, r.value, r.metric in TIME_METRICS, 3 + index[_key(r)]) for r in rows]

    def loss(x):
        if not _in_bounds(x):
            return math.inf
        x1, x2, x3 = 1 / x[0], 1 / x[1], 1 / x[2]

        def term(f, r, value, is_time, i):
            predicted = f.at(x1, x2, x3, x[i]) if f is not None else predict_row(
                r, mbu=x[0], attention_bu=x[1], mfu=x[2], step_overhead_s=x[i])
            return math.log(predicted / value if is_time else value / predicted) ** 2

        return sum(term(*p) for p in plan)

    return loss


def _nelder_mead(f, x0, steps, iters=300):
    pts = [list(x0)] + [[v + (steps[i] if i == j else 0) for j, v in enumerate(x0)] for i in range(len(x0))]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = sorted(range(len(pts)), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        centre = [sum(p[j] for p in pts[:-1]) / (len(pts) - 1) for j in range(len(x0))]
        refl = [c + (c - w) for c, w in zip(centre, pts[-1])]
        fr = f(refl)
        if fr < vals[0]:
            exp = [c + 2 * (c - w) for c, w in zip(centre, pts[-1])]
            fe = f(exp)
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = [c + 0.5 * (w - c) for c, w in zip(centre, pts[-1])]
            fc = f(con)
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:
                pts = [pts[0]] + [[b + 0.5 * (p - b) for b, p in zip(pts[0], q)] for q in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    i = min(range(len(pts)), key=lambda i: vals[i])
    return pts[i], vals[i]


def fit_constants(rows) -> dict:
    """Fit the constants on ``rows`` (namedtuples of ``data/serving_published.csv``; module docstring): the
    two bandwidth shares and the prefill MFU shared, a step overhead per engine and era, all in one search;
    then the shared constants fixed, one overhead pooled per era over its rows, and one over every row
    (``any``, for an era without rows). Returns a dict ``weights_bu, attention_bu, prefill_mfu, engines`` (key
    -> seconds), ``eras`` (era -> seconds) and ``any``."""
    rows = list(rows)
    if not rows:
        raise ValueError("rows: the fit needs at least one calibration row")
    fast = _fast_rows(rows)
    keys = sorted({_key(r) for r in rows})
    n = len(keys)
    x, _ = _nelder_mead(_loss_of(rows, keys, fast), [0.8, 0.6, 0.5] + [0.002] * n,
                        [0.05, 0.1, 0.1] + [0.002] * n, iters=200 * (3 + n))
    x = [round(x[0], 3), round(x[1], 3), round(x[2], 3)] + [round(v, 5) for v in x[3:]]

    def pooled(sub):    # the shared constants fixed, one overhead for every row of `sub`
        anonymous = [r._replace(engine="*", batching="*") for r in sub]
        loss = _loss_of(anonymous, ["*/*"], fast)
        t, _ = _nelder_mead(lambda t: loss(x[:3] + t), [0.002], [0.002])
        return round(t[0], 5)

    eras = {b: pooled([r for r in rows if r.batching == b]) for b in sorted({r.batching for r in rows})}
    return dict(weights_bu=x[0], attention_bu=x[1], prefill_mfu=x[2], engines=dict(zip(keys, x[3:])),
                eras=eras, any=pooled(rows))


def _overhead(c, r) -> tuple[float, bool]:
    """(step overhead, whether the row's engine and era had their own) under fitted constants ``c``."""
    if _key(r) in c["engines"]:
        return c["engines"][_key(r)], True
    return c["eras"].get(r.batching, c["any"]), False


def loso_residuals():
    """Leave one source out (module docstring): for each source (URL), refit on the other sources'
    trainable rows (:func:`_trainable`) and predict that source's speeds (ratio metrics left out). Returns
    ``(full, res)``: the fit on every trainable row, and a DataFrame of one row per held-out figure with
    ``row`` (its index in ``data/serving_published.csv``), ``source``, ``engine``, ``batching``, ``metric``,
    ``kind``, ``calibrated`` (its engine and era had their own overhead in the fold) and ``log_ratio`` (log
    engine speed / model speed). A source without calibration rows is predicted by the full fit, which never
    saw it."""
    import pandas as pd

    df = _read()
    fit_rows = [r for r in df.itertuples() if _trainable(r)]
    full = fit_constants(fit_rows)
    out = []
    for src in sorted(df["url"].unique()):
        train = [r for r in fit_rows if r.url != src]
        c = full if len(train) == len(fit_rows) else fit_constants(train)
        for r in df[(df["url"] == src) & ~df["metric"].isin(RATIO_METRICS)].itertuples():
            t0, cal = _overhead(c, r)
            pred = predict_row(r, mbu=c["weights_bu"], attention_bu=c["attention_bu"], mfu=c["prefill_mfu"],
                               step_overhead_s=t0)
            out.append(dict(row=r.Index, source=src, engine=r.engine, batching=r.batching, metric=r.metric,
                            kind=_kind(r.metric), calibrated=cal, log_ratio=round(math.log(_ratio(r, r.value,
                                                                                                  pred)), 6)))
    return full, pd.DataFrame(out)


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
    lows, highs, groups = [], [], []
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


def grouping_table(res):
    """Every grouping of :data:`GROUPINGS` measured on the held-out residuals ``res``: coverage out of sample,
    median width of the stated ranges and of the ranges each row was checked against (issue 34: a grouping is
    used only where it narrows the median range at 75% measured coverage or more)."""
    import pandas as pd

    out = []
    for name in GROUPINGS:
        overall = interval_table(res, name)[0].set_index("group").loc["overall"]
        out.append(dict(grouping=name, coverage_out_of_sample=overall["coverage_out_of_sample"],
                        median_width=overall["width"],
                        median_width_out_of_sample=overall["width_out_of_sample"],
                        used=name == SERVING_GROUPING))
    return pd.DataFrame(out)


def fit_serving_constants():
    """Everything ``tools/calibrate_serving.py`` writes: ``(constants, table, checked)``, the fit on every
    calibration row (:func:`fit_constants`, with ``step_overhead_s`` the default engine's), the stated
    ranges and the held-out check (:func:`interval_table` of :func:`loso_residuals`). (Before issue 34 it
    returned ``(constants, low, high)``, the range being every row's spread.)"""
    full, res = loso_residuals()
    table, checked = interval_table(res)
    full["step_overhead_s"] = full["engines"][engine_key(DEFAULT_ENGINE, full["engines"])]
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
    ``inside`` (NaN for a ratio of two runs, which the range does not cover). Chapter 15."""
    df = _read()
    preds = [predict_row(r, **constants) for r in df.itertuples()]
    df["predicted"] = preds
    df["published_over_predicted"] = df["value"] / df["predicted"]
    df["speed_ratio"] = [_ratio(r, r.value, p) for r, p in zip(df.itertuples(), preds)]
    df["nearest_ratio"] = df["speed_ratio"]
    chk = _stored_check()
    df["loso_ratio"] = chk["log_ratio"].map(math.exp).reindex(df.index)
    for col in ("group", "low", "high", "inside"):
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
    (``data/serving_intervals.csv``). ``kwargs`` go to :func:`llmsizing.serve.serving`."""
    name = DEFAULT_ENGINE if engine is None else engine
    if not isinstance(name, str):
        raise TypeError(f"engine must be an engine name (str), got {type(name).__name__}")
    check_choice("batching", batching, BATCHING)
    known = name in ENGINES or "step_overhead_s" in kwargs
    if name in ENGINES:
        central = serving(model, gpu, engine=name, **kwargs)
    else:
        from dataclasses import replace

        central = serving(model, gpu, **{"step_overhead_s": ERA_STEP_OVERHEAD_S[batching], **kwargs})
        central = replace(central, engine=f"{name}/{batching} (pooled {batching} overhead)")
    p_lo, p_hi = _range_of(known, "itl_s")
    t_lo, t_hi = _range_of(known, "ttft_s")
    return ServingRange(central, (central.itl_s / p_hi, central.itl_s / p_lo),
                        (central.ttft_s / t_hi, central.ttft_s / t_lo),
                        (central.output_tokens_per_s * p_lo, central.output_tokens_per_s * p_hi), known,
                        central.engine)


__all__ = ["FITTED", "COVERAGE", "MIN_GROUP", "predict_row", "published_serving", "fit_constants",
           "fit_serving_constants", "loso_residuals", "interval_table", "grouping_table",
           "conformal_quantiles", "GROUPINGS", "SERVING_GROUPING",
           "overhead_interval", "ServingRange", "serving_range", "RANGE_LOW", "RANGE_HIGH"]
