"""Serving calibration: published serving figures next to the model, and the fit of its step constants
(chapter 15, "Serving"; issue 22).

``data/serving_published.csv`` holds published serving figures, each with its engine and version, model, GPU,
tensor parallelism, formats, lengths, batch, metric, value, source URL and date, and a ``calibration`` column:
``yes`` rows are fitted on, ``no`` rows are held out and only checked. :func:`fit_serving_constants` finds the
weight-read bandwidth efficiency, the attention (KV-read) efficiency, the fixed time per engine step and the
prefill MFU that minimise the squared log ratios ``published / predicted`` over the calibration rows, by a
deterministic Nelder-Mead search (the library has no SciPy). The three efficiencies are shared by every
engine; the fixed step time is fitted per engine (``step_overhead_s[engine]``), and a pooled one, fitted over
all the rows at the shared efficiencies, is the default for an engine without rows. A row's
``attention_kernel`` says how its engine's decode attention reads a grouped-query model's KV heads
(``grouped`` or ``per-query-head``: TensorRT-LLM before its XQA kernel). Besides rates and times, a row may
give ``batch_gain`` (throughput at its batch over batch 1) or ``grouped_attention_gain`` (the same run with a
grouped over a per-query-head kernel). The stated range is the lowest and highest speed ratio over every row,
calibration and held-out (an engine without its own overhead at the nearest prediction over the fitted
engines' overheads, :func:`overhead_interval`), rounded outwards to 0.05 (2026-11-26: 23 new held-out rows
showed that the calibration rows' own spread, 0.75-1.3, held for only 90% of the figures the fit had not
seen); ``tools/calibrate_serving.py`` writes both to ``data/serving_model.csv``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .catalog import DATA_DIR
from .serve_step import ENGINE_STEP_OVERHEAD_S, ENGINES, RANGE_HIGH, RANGE_LOW, serving

#: Metrics that are times (a lower value is faster).
TIME_METRICS = ("ttft_s", "itl_s")
#: The constants :func:`fit_serving_constants` fits, in order, with their search bounds.
FITTED = (("weights_bu", 0.3, 1.0), ("attention_bu", 0.1, 1.0), ("step_overhead_s", 0.0, 0.02),
          ("prefill_mfu", 0.2, 1.0))


def _read():
    import pandas as pd

    df = pd.read_csv(DATA_DIR / "serving_published.csv")
    for col in ("kv_cache", "compute"):   # the formats the engine ran; 16-bit where a row leaves them blank
        df[col] = df[col].fillna("bf16") if col in df else "bf16"
    col = "attention_kernel"   # how the engine's decode attention reads GQA KV heads; grouped where blank
    df[col] = df[col].fillna("grouped") if col in df else "grouped"
    df["known_out"] = df["known_out"].fillna("") if "known_out" in df else ""   # why a row is known to miss
    return df


def predict_row(r, **constants) -> float:
    """What :func:`llmsizing.serve.serving` predicts for one row of ``data/serving_published.csv`` (a
    namedtuple from ``itertuples``), at the given constants (``mbu``, ``attention_bu``, ``step_overhead_s``,
    ``mfu``; default the calibrated ones, with the row's engine's own step overhead where it has one). Rates
    count the prefill (:attr:`Serving.output_tokens_per_s`)."""
    kw = dict(tp=int(r.tp), weights=r.weights, kv_cache=r.kv_cache, compute=r.compute, prompt=int(r.prompt),
              output=int(r.output), attention_kernel=r.attention_kernel, **constants)
    if "step_overhead_s" not in constants and r.engine in ENGINES:
        kw["engine"] = r.engine
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
    """The smallest and largest step overhead fitted for an engine (seconds). An engine without calibration
    rows may run anywhere in between, so :func:`serving_range` and :func:`published_serving` give such an
    engine the whole interval instead of the pooled value alone (2026-11-26: LMDeploy's TurboMind at batch 1
    on an RTX 4090 is 1.6 times as fast as the pooled overhead allows, and near the leanest engine's)."""
    return min(ENGINE_STEP_OVERHEAD_S.values()), max(ENGINE_STEP_OVERHEAD_S.values())


def _uncalibrated(r, engines) -> bool:
    """Whether a row's engine has no overhead of its own (and the row is a speed, not a ratio of two runs)."""
    return r.engine not in engines and r.metric not in ("batch_gain", "grouped_attention_gain")


def _nearest_ratio(ratio_fast: float, ratio_slow: float) -> float:
    """The speed ratio to the nearest prediction an overhead interval allows: ``ratio_fast`` is the ratio to
    the prediction at the smallest overhead (the fastest), ``ratio_slow`` at the largest; 1 when the engine's
    speed lies between them."""
    return ratio_fast if ratio_fast > 1.0 else ratio_slow if ratio_slow < 1.0 else 1.0


def published_serving(**constants):
    """``data/serving_published.csv`` with ``predicted`` (:func:`predict_row`), ``published_over_predicted``
    and ``speed_ratio`` (the engine's speed over the model's: for rates the same, for times inverted),
    ``nearest_ratio`` and ``inside``. For an engine with its own fitted overhead ``nearest_ratio`` is the
    ``speed_ratio``; for an engine without (the prediction uses the pooled overhead) it is the speed ratio to
    the nearest prediction over :func:`overhead_interval`, 1 when the engine's speed lies inside that
    interval's predictions. ``inside`` says whether ``nearest_ratio`` lies in the stated range,
    :data:`llmsizing.serve.RANGE_LOW` to ``RANGE_HIGH``: the range :func:`serving_range` states.
    Chapter 15."""
    df = _read()
    preds = [predict_row(r, **constants) for r in df.itertuples()]
    df["predicted"] = preds
    df["published_over_predicted"] = df["value"] / df["predicted"]
    df["speed_ratio"] = [_ratio(r, r.value, p) for r, p in zip(df.itertuples(), preds)]
    lo_t, hi_t = overhead_interval()
    near = []
    for r in df.itertuples():
        if _uncalibrated(r, ENGINES) and "step_overhead_s" not in constants:
            fast = _ratio(r, r.value, predict_row(r, **{**constants, "step_overhead_s": lo_t}))
            slow = _ratio(r, r.value, predict_row(r, **{**constants, "step_overhead_s": hi_t}))
            near.append(_nearest_ratio(fast, slow))
        else:
            near.append(r.speed_ratio)
    df["nearest_ratio"] = near
    df["inside"] = (df["nearest_ratio"] >= RANGE_LOW) & (df["nearest_ratio"] <= RANGE_HIGH)
    return df


@dataclass(frozen=True)
class ServingRange:
    """What :func:`serving_range` states: the central prediction and the range a published figure of the same
    setting lies in. ``itl_s`` and ``ttft_s`` run (fastest, slowest), ``output_tokens_per_s`` (lowest,
    highest)."""
    central: object            # the Serving of the central prediction
    itl_s: tuple
    ttft_s: tuple
    output_tokens_per_s: tuple
    engine_overhead_known: bool


def serving_range(model, gpu, *, engine: str | None = None, **kwargs) -> ServingRange:
    """The stated range of a serving prediction (chapter 15, "Checked against published figures"): a published
    speed lies between ``RANGE_LOW`` times the slowest prediction and ``RANGE_HIGH`` times the fastest. For a
    calibrated engine (``engine=``, one of :data:`llmsizing.serve.ENGINES`) or a given ``step_overhead_s`` the
    slowest and fastest predictions are the central one; for an engine the calibration has not seen
    (``engine=None``) they are the predictions at the largest and smallest fitted overheads
    (:func:`overhead_interval`), since that engine's own overhead is unknown. ``kwargs`` go to
    :func:`llmsizing.serve.serving`."""
    central = serving(model, gpu, engine=engine, **kwargs)
    known = engine is not None or "step_overhead_s" in kwargs
    if known:
        fast = slow = central
    else:
        lo_t, hi_t = overhead_interval()
        fast = serving(model, gpu, **{**kwargs, "step_overhead_s": lo_t})
        slow = serving(model, gpu, **{**kwargs, "step_overhead_s": hi_t})
    return ServingRange(central, (fast.itl_s / RANGE_HIGH, slow.itl_s / RANGE_LOW),
                        (fast.ttft_s / RANGE_HIGH, slow.ttft_s / RANGE_LOW),
                        (slow.output_tokens_per_s * RANGE_LOW, fast.output_tokens_per_s * RANGE_HIGH), known)


def _to_constants(x, engine_index):
    """Constants for one row from the search vector
    ``[weights_bu, attention_bu, prefill_mfu, t0_engine...]``."""
    return dict(mbu=x[0], attention_bu=x[1], mfu=x[2], step_overhead_s=x[3 + engine_index])


def _in_bounds(x) -> bool:
    shared = [(lo, hi) for name, lo, hi in FITTED if name != "step_overhead_s"]
    t0 = next((lo, hi) for name, lo, hi in FITTED if name == "step_overhead_s")
    return (all(lo <= v <= hi for v, (lo, hi) in zip(x[:3], shared))
            and all(t0[0] <= v <= t0[1] for v in x[3:]))


def _loss(x, rows, engines) -> float:
    if not _in_bounds(x):
        return math.inf
    return sum(math.log(_ratio(r, r.value, predict_row(r, **_to_constants(x, engines.index(r.engine))))) ** 2
               for r in rows)


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


def fit_serving_constants():
    """Fit the constants on the ``calibration == "yes"`` rows (module docstring). The weight-read and
    attention bandwidth shares and the prefill MFU are shared by every engine; the fixed step overhead is
    fitted per engine (each engine's scheduler, sampler and launches are its own), all in one search. The
    pooled step overhead, the default for an engine without calibration rows, is then fitted over all the rows
    at the shared constants. Returns ``(constants, low, high)``: a dict
    ``weights_bu, attention_bu, step_overhead_s, prefill_mfu, engine_step_overhead_s`` (the last a dict engine
    -> seconds) and the stated range (every row's speed ratio at its engine's constants, or the nearest over
    :func:`overhead_interval` for an engine without rows, rounded outwards to 0.05)."""
    df = _read()
    rows = [r for r in df.itertuples() if r.calibration == "yes"]
    engines = sorted({r.engine for r in rows})
    n = len(engines)
    x, _ = _nelder_mead(lambda x: _loss(x, rows, engines), [0.8, 0.6, 0.5] + [0.002] * n,
                        [0.05, 0.1, 0.1] + [0.002] * n, iters=200 * (3 + n))
    x = [round(x[0], 3), round(x[1], 3), round(x[2], 3)] + [round(v, 5) for v in x[3:]]
    # the pooled overhead: the shared constants fixed, one overhead for every row
    anonymous = [r._replace(engine=None) for r in rows]
    pooled, _ = _nelder_mead(lambda t: _loss(x[:3] + t, anonymous, [None]), [0.002], [0.002])
    # the range: every row's speed ratio at the fitted constants (calibration and held-out rows alike: the
    # held-out rows of 2026-11-26 fell outside the calibration rows' own spread), an engine without its own
    # overhead taken at the nearest of the fitted engines' overheads
    fitted = dict(zip(engines, x[3:]))
    lo_t, hi_t = min(fitted.values()), max(fitted.values())
    ratios = []
    for r in df.itertuples():
        c = dict(mbu=x[0], attention_bu=x[1], mfu=x[2])
        if _uncalibrated(r, engines):
            ratios.append(_nearest_ratio(_ratio(r, r.value, predict_row(r, **c, step_overhead_s=lo_t)),
                                         _ratio(r, r.value, predict_row(r, **c, step_overhead_s=hi_t))))
        else:
            t0 = fitted.get(r.engine, round(pooled[0], 5))
            ratios.append(_ratio(r, r.value, predict_row(r, **c, step_overhead_s=t0)))
    low = math.floor(min(ratios) * 20) / 20
    high = math.ceil(max(ratios) * 20) / 20
    constants = dict(weights_bu=x[0], attention_bu=x[1], step_overhead_s=round(pooled[0], 5),
                     prefill_mfu=x[2], engine_step_overhead_s=dict(zip(engines, x[3:])))
    return constants, low, high


__all__ = ["FITTED", "predict_row", "published_serving", "fit_serving_constants", "overhead_interval",
           "ServingRange", "serving_range"]
