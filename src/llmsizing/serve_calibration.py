"""Serving calibration: published serving figures next to the model, and the fit of its four step constants
(chapter 15, "Serving"; issue 22).

``data/serving_published.csv`` holds published serving figures, each with its engine and version, model, GPU,
tensor parallelism, formats, lengths, batch, metric, value, source URL and date, and a ``calibration`` column:
``yes`` rows are fitted on, ``no`` rows are held out and only checked. :func:`fit_serving_constants` finds the
weight-read bandwidth efficiency, the attention (KV-read) efficiency, the fixed time per engine step and the
prefill MFU that minimise the squared log ratios ``published / predicted`` over the calibration rows, by a
deterministic Nelder-Mead search (the library has no SciPy). The residual range is the lowest and highest ratio
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
    return df


def predict_row(r, **constants) -> float:
    """What :func:`llmsizing.serve.serving` predicts for one row of ``data/serving_published.csv`` (a
    namedtuple from ``itertuples``), at the given constants (``mbu``, ``attention_bu``, ``step_overhead_s``,
    ``mfu``; default the calibrated ones). Rates count the prefill (:attr:`Serving.output_tokens_per_s`)."""
    from .serve import serving

    kw = dict(tp=int(r.tp), weights=r.weights, kv_cache=r.kv_cache, compute=r.compute, prompt=int(r.prompt),
              output=int(r.output), attention_kernel=r.attention_kernel, **constants)
    s = serving(r.model, r.gpu, batch=int(r.batch), **kw)
    if r.metric == "batch_gain":
        return s.output_tokens_per_s / serving(r.model, r.gpu, **kw).output_tokens_per_s
    if r.metric == "grouped_attention_gain":   # the same run with a grouped over a per-query-head kernel
        kw["attention_kernel"] = "per-query-head"
        return (serving(r.model, r.gpu, batch=int(r.batch), **{**kw, "attention_kernel": "grouped"}).output_tokens_per_s
                / serving(r.model, r.gpu, batch=int(r.batch), **kw).output_tokens_per_s)
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


def _to_constants(x):
    return dict(mbu=x[0], attention_bu=x[1], step_overhead_s=x[2], mfu=x[3])


def _loss(x, rows) -> float:
    for v, (_, lo, hi) in zip(x, FITTED):
        if not lo <= v <= hi:
            return math.inf
    c = _to_constants(x)
    return sum(math.log(_ratio(r, r.value, predict_row(r, **c))) ** 2 for r in rows)


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
    """Fit the four constants on the ``calibration == "yes"`` rows (module docstring). Returns ``(constants,
    low, high)``: a dict ``weights_bu, attention_bu, step_overhead_s, prefill_mfu`` and the residual range
    (speed ratios, rounded outwards to 0.05)."""
    df = _read()
    rows = [r for r in df.itertuples() if r.calibration == "yes"]
    x, _ = _nelder_mead(lambda x: _loss(x, rows), [0.8, 0.6, 0.002, 0.5], [0.05, 0.1, 0.002, 0.1])
    x = [round(x[0], 3), round(x[1], 3), round(x[2], 5), round(x[3], 3)]
    c = _to_constants(x)
    ratios = [_ratio(r, r.value, predict_row(r, **c)) for r in rows]
    low = math.floor(min(ratios) * 20) / 20
    high = math.ceil(max(ratios) * 20) / 20
    return dict(zip([n for n, _, _ in FITTED], x)), low, high


__all__ = ["FITTED", "predict_row", "published_serving", "fit_serving_constants"]
