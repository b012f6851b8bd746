"""Serving calibration: published serving figures next to the model, and the fit of its step constants
(chapter 15, "Serving"; issue 22).

``data/serving_published.csv`` holds published serving figures, each with its engine and version, model, GPU,
tensor parallelism, formats, lengths, batch, metric, value, source URL and date, and a ``calibration`` column:
``yes`` rows are fitted on, ``no`` rows are held out and only checked. :func:`fit_serving_constants` finds the
weight-read bandwidth efficiency, the attention (KV-read) efficiency, the fixed time per engine step and the
prefill MFU that minimise the squared log ratios ``published / predicted`` over the calibration rows, by a
deterministic Nelder-Mead search (the library has no SciPy). The three efficiencies are shared by every engine;
the fixed step time is fitted per engine (``step_overhead_s[engine]``), and a pooled one, fitted over all the
rows at the shared efficiencies, is the default for an engine without rows. A row's ``attention_kernel`` says
how its engine's decode attention reads a grouped-query model's KV heads (``grouped`` or ``per-query-head``:
TensorRT-LLM before its XQA kernel). Besides rates and times, a row may give ``batch_gain`` (throughput at its
batch over batch 1) or ``grouped_attention_gain`` (the same run with a grouped over a per-query-head kernel). The residual range is the lowest and highest ratio
over the calibration rows, rounded outwards to 0.05; ``tools/calibrate_serving.py`` writes both to
``data/serving_model.csv``.
"""

from __future__ import annotations

import math

from .catalog import DATA_DIR

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
    from .serve import ENGINES, serving

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


def published_serving(**constants):
    """``data/serving_published.csv`` with ``predicted`` (:func:`predict_row`), ``published_over_predicted``
    and ``speed_ratio`` (the engine's speed over the model's: for rates the same, for times inverted), and
    ``inside`` (whether the speed ratio lies in the stated range, :data:`llmsizing.serve.RANGE_LOW` to
    ``RANGE_HIGH``). Chapter 15."""
    from .serve import RANGE_HIGH, RANGE_LOW

    df = _read()
    preds = [predict_row(r, **constants) for r in df.itertuples()]
    df["predicted"] = preds
    df["published_over_predicted"] = df["value"] / df["predicted"]
    df["speed_ratio"] = [_ratio(r, r.value, p) for r, p in zip(df.itertuples(), preds)]
    df["inside"] = (df["speed_ratio"] >= RANGE_LOW) & (df["speed_ratio"] <= RANGE_HIGH)
    return df


def _to_constants(x, engine_index):
    """Constants for one row from the search vector ``[weights_bu, attention_bu, prefill_mfu, t0_engine...]``."""
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
    """Fit the constants on the ``calibration == "yes"`` rows (module docstring). The weight-read and attention
    bandwidth shares and the prefill MFU are shared by every engine; the fixed step overhead is fitted per engine
    (each engine's scheduler, sampler and launches are its own), all in one search. The pooled step overhead,
    the default for an engine without calibration rows, is then fitted over all the rows at the shared
    constants. Returns ``(constants, low, high)``: a dict ``weights_bu, attention_bu, step_overhead_s,
    prefill_mfu, engine_step_overhead_s`` (the last a dict engine -> seconds) and the residual range (speed
    ratios at each row's engine's constants, rounded outwards to 0.05)."""
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
    ratios = [_ratio(r, r.value, predict_row(r, **_to_constants(x, engines.index(r.engine)))) for r in rows]
    low = math.floor(min(ratios) * 20) / 20
    high = math.ceil(max(ratios) * 20) / 20
    constants = dict(weights_bu=x[0], attention_bu=x[1], step_overhead_s=round(pooled[0], 5), prefill_mfu=x[2],
                     engine_step_overhead_s=dict(zip(engines, x[3:])))
    return constants, low, high


__all__ = ["FITTED", "predict_row", "published_serving", "fit_serving_constants"]
