"""The fit of the serving step model's constants (chapter 15; issues 22 and 34), split out of
:mod:`llmsizing.serve_calibration` (session 24: it had reached the 600-line limit): what
:func:`llmsizing.serve.serving` predicts for one published row (:func:`predict_row`), each row's speed as a
function of the four constants read off five ``serving()`` calls (:class:`_Row`, checked against
:func:`predict_row` by :func:`_fast_rows`), the loss (squared log ratios of published over predicted speed,
:func:`_loss_of`) and a deterministic Nelder-Mead search (Nelder and Mead 1965; the library has no SciPy),
and :func:`fit_constants`: the weight-read and attention bandwidth shares and the prefill MFU shared by every
engine, a step overhead per engine and batching era. No figure of its own: the rows are
``data/serving_published.csv``'s. :mod:`llmsizing.serve_calibration` (the held-out residuals and the stated
range) re-exports these names; ``tools/calibrate_serving.py --check`` checks the stored constants.
"""

from __future__ import annotations

import math

from .serve_step import ENGINE_STEP_OVERHEAD_S, ERA_STEP_OVERHEAD_S, serving

#: Metrics that are times (a lower value is faster).
TIME_METRICS = ("ttft_s", "itl_s")
#: Metrics that are a ratio of two runs (a batch's gain, a kernel's gain): checked, not in the stated range.
RATIO_METRICS = ("batch_gain", "grouped_attention_gain")
#: The constants :func:`fit_constants` fits, in order, with their search bounds.
FITTED = (("weights_bu", 0.3, 1.0), ("attention_bu", 0.1, 1.0), ("step_overhead_s", 0.0, 0.02),
          ("prefill_mfu", 0.2, 1.0))


def _key(r) -> str:
    """A row's engine and batching era, as the fit keys its step overhead: ``"vLLM/continuous"``."""
    return f"{r.engine}/{r.batching}"


def _engine_cap(r) -> dict:
    """The running-sequence cap a row's engine ran with (issue 34): a static batch runs whole (TensorRT-LLM's
    static batching runs the engine's ``max_batch_size`` sequences together, built at the stated batch), so
    ``max_num_seqs`` is the row's batch and ``batching="static"`` keeps the KV room from queueing it (kv30:
    three static rows are over vLLM's KV room as the library counts it, yet ran whole); a continuous-batching
    row keeps the library's defaults (vLLM's)."""
    return {"max_num_seqs": int(r.batch), "batching": "static"} if r.batching == "static" else {}


def predict_row(r, **constants) -> float:
    """What :func:`llmsizing.serve.serving` predicts for one row of ``data/serving_published.csv`` (a
    namedtuple from ``itertuples``), at the given constants (``mbu``, ``attention_bu``, ``step_overhead_s``,
    ``mfu``; default the calibrated ones, with the step overhead of the row's engine and era where it has
    one, else the era's pooled one). Rates count the prefill (:attr:`Serving.output_tokens_per_s`)."""
    kw = dict(tp=int(r.tp), weights=r.weights, kv_cache=r.kv_cache, compute=r.compute, prompt=int(r.prompt),
              output=int(r.output), attention_kernel=r.attention_kernel, **_engine_cap(r), **constants)
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
        # (the running batch: a batch over max_num_seqs runs in waves, its ITL and rate the running batch's)
        self.r, self.chunks, self.batch, self.output, self.gpus = r, s0.prefill_chunks, s0.running_batch, \
            s0.output, s0.gpus
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
              output=int(r.output), attention_kernel=r.attention_kernel, **_engine_cap(r), **constants)
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


def fit_mfu(rows, *, weights_bu: float, attention_bu: float, step_overhead_s: dict) -> float:
    """The prefill MFU ``rows`` alone would fit with the other constants held: the two bandwidth shares as
    given and each row's step overhead ``step_overhead_s[engine/batching]`` (:func:`_key`). The same loss as
    :func:`fit_constants` (squared log ratios of published over predicted speed), searched over the MFU only,
    within :data:`FITTED`'s box. Chapter 15 fits the FP8 and the 16-bit rows apart with it, to show which way
    each pulls the one shared MFU (``serve_calibration.mfu_by_compute``). Raises ``ValueError`` for no rows
    and a ``KeyError`` naming an engine without an overhead."""
    rows = [r for r in rows if r.metric not in RATIO_METRICS]
    if not rows:
        raise ValueError("rows: fitting the MFU needs at least one row whose metric is a speed or a time")
    keys = sorted({_key(r) for r in rows})
    missing = [k for k in keys if k not in step_overhead_s]
    if missing:
        raise KeyError(f"step_overhead_s has no overhead for {missing}: give one per engine/batching key")
    loss = _loss_of(rows, keys, _fast_rows(rows))
    fixed = [weights_bu, attention_bu]
    t0 = [step_overhead_s[k] for k in keys]
    (mfu,), _ = _nelder_mead(lambda x: loss(fixed + [x[0]] + t0), [0.5], [0.1], iters=120)
    return round(mfu, 3)
