"""What might explain the spread of the end-to-end MFU model's out-of-source residuals (chapter 10; issue 34).

The baseline end-to-end model (:func:`~llmsizing.calibration.fit_mfu_model`, fit 2) knows no layout; its 80%
range is the widest of the book's training ranges. Each candidate here adds terms to its least-squares fit,
terms a user planning a job knows before it runs (GPU count, stack family, global batch, GPU memory, the
date), or changes how the conformal bounds score a residual (:data:`~llmsizing.intervals.SCORES`), and is
checked the way the baseline's range is (:func:`~llmsizing.calibration.mfu_loso_check`): leaving whole sources
out, nested, each source weighing the same, widths apart for steady states and whole-run totals where a kind
has enough sources. A candidate meets issue 34 when its measured coverage is at least :data:`MIN_COVERAGE` and
its median width at most :data:`MAX_WIDTH`.

Where a run does not publish the quantity a term reads (a model card gives no GPU count or batch), the term is
0 there and, for the batch terms, an indicator "not published" takes its place: a user always knows it, the
table does not. :func:`planner_layout_check` prices the runs with a published layout at the layout
:func:`~llmsizing.planner.plan` would choose for their GPU count and batch: what not knowing the layout costs.
"""

from __future__ import annotations

from functools import cache

#: Issue 34's bar for a training range: out-of-source coverage at least this ...
MIN_COVERAGE = 0.75
#: ... and a median width ``high / low`` at most this.
MAX_WIDTH = 1.6
#: The reference points of the candidate terms: 256 GPUs, 4,096 tokens per GPU per optimizer step.
GPUS_REF, TOKENS_PER_GPU_REF = 256, 4096
#: The stack families that get an offset (``"unknown"`` is the reference).
FAMILIES = ("megatron", "deepspeed", "pytorch")


def _columns_family(df):
    """The stack family (:func:`~llmsizing.frameworks.stack_family`, lenient) of each row of ``df``."""
    import numpy as np

    from .frameworks import stack_family

    return np.array([stack_family(f, lenient=True) for f in df["framework"]], dtype=object)


def _columns(df) -> dict:
    """Per candidate term, its column over the rows of ``df`` (:func:`~llmsizing.calibration._prepared`)."""
    import numpy as np

    from .catalog import get_gpu
    from .flops import attention_flops_share

    n_gpus = df["n_gpus"].to_numpy(float)
    batch = df["global_batch"].to_numpy(float) if "global_batch" in df else np.full(len(df), np.nan)
    seq = df["seq"].to_numpy(float)
    n = df["n_params"].to_numpy(float)
    memory = np.array([get_gpu(g).memory_gib * 2**30 for g in df["gpu"]])
    family = _columns_family(df)
    date = [str(a) for a in df["as_of"]]

    def known(v):
        return np.where(np.isfinite(v), v, 0.0)

    with np.errstate(invalid="ignore", divide="ignore"):
        tokens_per_gpu = batch * seq / n_gpus
        return {
            "log_gpus": known(np.log(n_gpus / GPUS_REF)),
            **{f"stack_{f}": (family == f).astype(float) for f in FAMILIES},
            "single_node": known(np.where(np.isfinite(n_gpus), (n_gpus <= 8).astype(float), np.nan)),
            "year": np.array([int(a[:4]) + (int(a[5:7]) - 1) / 12 - 2024 for a in date]),
            "state_pressure": known(np.log(16 * n / (n_gpus * memory))),
            "log_tokens_per_gpu": known(np.log(tokens_per_gpu / TOKENS_PER_GPU_REF)),
            "batch_unpublished": (~np.isfinite(tokens_per_gpu)).astype(float),
            "selective_recompute": (df["recompute"] == "selective").to_numpy(float),
            "hopper_size": (df["generation"] == "hopper").to_numpy(float) * np.log(n / 1e10),
            "hopper_seq": (df["generation"] == "hopper").to_numpy(float) * np.log(seq / 4096),
            "attention_share": np.array([attention_flops_share(m, seq=int(s)) for m, s in zip(df["model"],
                                                                                             df["seq"])]),
        }


_STACK = tuple(f"stack_{f}" for f in FAMILIES)
_BATCH = ("log_tokens_per_gpu", "batch_unpublished")
#: The candidates: name -> (the extra terms, what they say). ``"none"`` is the baseline model
#: (data/mfu_model.csv), which the library no longer answers with.
CANDIDATES = {
    "none": ((), "the baseline model (generation and dtype, size, sequence, full recompute, whole run)"),
    "gpus": (("log_gpus",), "+ log GPU count"),
    "stack": (_STACK, "+ stack family offsets"),
    "stack+gpus": (_STACK + ("log_gpus",), "+ stack family and log GPU count"),
    "single_node": (("single_node",), "+ one node or less (8 GPUs)"),
    "year": (("year",), "+ the date of the source (a plan's is today's)"),
    "state_pressure": (("state_pressure",), "+ log(16 N / (GPUs x memory)): how full sharded states are"),
    "tokens_per_gpu": (_BATCH, "+ log tokens per GPU per optimizer step (batch x seq / GPUs)"),
    "stack+tokens_per_gpu": (_STACK + _BATCH, "+ stack family and log tokens per GPU per step"),
    "selective": (("selective_recompute",), "+ selective recomputation"),
    "hopper_slopes": (("hopper_size", "hopper_seq"), "+ size and sequence slopes of their own on Hopper"),
}


def candidate_check(name: str = "none", *, score: str = "tails", coverage: float = 0.8):
    """The nested leave-one-source-out check (:func:`~llmsizing.intervals.loso_check`) of the end-to-end
    model with candidate ``name``'s terms (:data:`CANDIDATES`) added to its fit, its bounds scored by
    ``score`` (:data:`~llmsizing.intervals.SCORES`), strata as the baseline's range
    (:data:`~llmsizing.calibration.INTERVAL_STRATA`): ``(check, runs)``. ``name="none"`` with ``"tails"``
    is the baseline's check."""
    from .intervals import SCORES, copied_check

    if name not in CANDIDATES:
        raise ValueError(f"name must be one of {', '.join(CANDIDATES)}; got {name!r}")
    if score not in SCORES:
        raise ValueError(f"score must be one of {', '.join(SCORES)}; got {score!r}")
    check, df = _candidate_check(name, score, coverage)
    return copied_check(check), df.copy()


def _extra_predictor(cols, extra, src=None):
    """``fit_predict(train, test)`` for :func:`~llmsizing.intervals.loso_check`: the end-to-end MFU model's
    least squares on the ``train`` calibration rows with the ``extra`` columns as more terms, its log MFU for
    the ``test`` rows. With ``src`` (each row's source), each source's calibration runs weigh the same in the
    least squares (row weight ``1 / rows of its source among the fit's``; session 38's P3)."""
    import numpy as np

    from . import calibration as C

    n_extra = extra.shape[1]

    def fit_predict(train, test):
        fit = np.flatnonzero(train & cols.calibration)
        cal = cols.rows(fit)
        groups = sorted(set(cal.keys))
        x = np.column_stack([C._design_of(cal, groups), extra[fit]])
        y = np.log(cal.implied_mfu)
        if src is not None:
            _, inv, counts = np.unique(src[fit].astype(str), return_inverse=True, return_counts=True)
            w = np.sqrt(1.0 / counts[inv])
            x, y = x * w[:, None], y * w
        beta = np.round(np.linalg.lstsq(x, y, rcond=None)[0], 4)
        rows = np.flatnonzero(test)
        base = C._predict_log(cols.rows(rows), groups, beta[:len(beta) - n_extra])
        return base + extra[rows] @ beta[len(beta) - n_extra:]

    return fit_predict


@cache
def _candidate_check(name, score, coverage):
    import numpy as np

    from . import calibration as C
    from .intervals import keyed_calibration, loso_check

    df = C._prepared(None)
    cols = C._FitColumns(df)
    columns = _columns(df)
    extra = np.column_stack([columns[t] for t in CANDIDATES[name][0]]) if CANDIDATES[name][0] else \
        np.zeros((len(df), 0))
    src = df["source_key"].to_numpy(object)
    fit_predict = _extra_predictor(cols, extra)
    labels = np.where(df["kind"] == "pretraining-total", "pretraining-total", "steady-state")
    check = loso_check(np.log(df["implied_mfu"].to_numpy(float)), src, fit_predict, coverage=coverage,
                       strata=labels, score=score, calibrated=keyed_calibration(cols.keys, cols.calibration))
    return check, df


def candidate_table(names=None, scores=("tails", "absolute")):
    """One row per candidate (:data:`CANDIDATES`, or ``names``) and score: its terms, measured coverage,
    median width, the stated pooled factors and whether it meets issue 34 (:data:`MIN_COVERAGE`,
    :data:`MAX_WIDTH`). Chapter 10 prints it."""
    import math

    import pandas as pd

    rows = []
    for name in CANDIDATES if names is None else names:
        for score in scores:
            check, _ = candidate_check(name, score=score)
            low, high = check.stated()
            rows.append({"candidate": name, "terms": CANDIDATES[name][1], "score": score,
                         "coverage": check.measured_coverage, "median_width": check.median_width,
                         "low": low, "high": high,
                         "meets": bool(check.measured_coverage >= MIN_COVERAGE
                                       and check.median_width <= MAX_WIDTH + 1e-12
                                       and math.isfinite(check.median_width))})
    return pd.DataFrame(rows)


def planner_layout_check(runs=None):
    """The runs with a published layout (:func:`~llmsizing.step_intervals.layout_runs`) priced two ways at
    today's kernel efficiency: at their published layout (:func:`~llmsizing.calibration.run_mfu_at`) and at
    the fastest layout :func:`~llmsizing.planner.plan` finds for the same model, GPU, GPU count, sequence,
    global batch and node (:func:`~llmsizing.run_nodes.plan_network`) (every layer recomputed or none, as the
    published layouts; no interleaving searched). Returns ``(check, per_run)``: ``per_run`` with ``step_mfu``,
    ``plan_mfu`` and ``gap = log(plan / step)`` (NaN where no plan uses exactly the run's GPUs), and the
    nested check of ``log(published / plan_mfu)`` around the other sources' median (calibration runs), which
    is what a range built on the planner's choice would measure. The planner's choice is made once, at the
    efficiency fitted on every source: a small leak the layout area's check (fold efficiencies) does not
    have."""
    import numpy as np

    from .calibration import run_mfu_at
    from .hardware import kernel_efficiency
    from .intervals import loso_check
    from .planner import plan
    from .run_nodes import plan_network
    from .step_intervals import layout_runs

    df = layout_runs(runs)
    step, planned = [], []
    for r in df.itertuples():
        step.append(run_mfu_at(r, kernel_efficiency(r.gpu, r.dtype)))
        frame = plan(r.model, tokens=1e10, gpus=(r.gpu,), seq=int(r.seq), global_batch=int(r.global_batch),
                     max_gpus=int(r.n_gpus), explain=False, partial_recompute=False,
                     precision="fp8-mixed" if r.dtype == "fp8" else "bf16-mixed", micro_batches=(1, 2, 4, 8),
                     **plan_network(r))
        frame = frame[frame["n_gpus"] == int(r.n_gpus)]
        planned.append(float(frame["mfu"].max()) if len(frame) else np.nan)
    df["step_mfu"], df["plan_mfu"] = step, planned
    df["gap"] = np.log(df["plan_mfu"] / df["step_mfu"])
    ok = df["plan_mfu"].notna().to_numpy()
    sub = df[ok]
    y = np.log(sub["implied_mfu"] / sub["plan_mfu"]).to_numpy(float)
    cal = sub["calibration"].astype(bool).to_numpy()

    def fit_predict(train, test):
        return np.full(int(test.sum()), np.median(y[train & cal]))

    return loso_check(y, sub["source_key"].to_numpy(object), fit_predict), df


# Dead end (plan46, pre-registered; llmsizing.step_intervals.PLANNED_AREA, planned_loso_check): the
# planner's own pick, each run given only what its team stated (model, GPU, GPU count, sequence, batch,
# precision, stack, node) at the efficiency fitted without its source, scored log(published / pick MFU),
# two-tailed, nested leave-one-source-out: 87.4% of 111 runs inside (2 without a plan counted outside) but
# a median width of 2.04x, above issue 34's 1.6x: how much faster than the published layout the planner's
# pick is varies too much from source to source (x0.98 to x1.65, 10-90%). planner_layout_check below is the
# same question at today's efficiency with the published recomputation and micro-batches up to 8.
#: The term groups :func:`selection_check` chooses among (every subset of them): the candidates' terms.
TERM_GROUPS = {"stack": _STACK, "batch": _BATCH, "selective": ("selective_recompute",),
               "hopper": ("hopper_size", "hopper_seq"), "gpus": ("log_gpus",), "year": ("year",),
               "pressure": ("state_pressure",), "single_node": ("single_node",)}


def _fold_residuals(df, cols, extra, y, src, keys):
    """Out-of-source residuals with ``extra`` terms: every row left out with its source (``outer``) and, per
    source ``k``, every other source's rows left out with theirs and ``k`` (``inner[k]``), as
    :func:`~llmsizing.intervals.loso_check` computes them."""
    import numpy as np


    predict = _extra_predictor(cols, extra)
    outer, inner = np.full(len(y), np.nan), {}
    for k in keys:
        test = src == k
        outer[test] = y[test] - predict(src != k, test)
        inner[k] = np.full(len(y), np.nan)
        for j in keys:
            if j != k:
                mine = src == j
                inner[k][mine] = y[mine] - predict((src != k) & ~mine, mine)
    return outer, inner


@cache
def _subset_residuals(sub):
    """:func:`_fold_residuals` of the default table with the term groups ``sub`` (kept per process)."""
    import numpy as np

    from . import calibration as C

    df = C._prepared(None)
    columns = _columns(df)
    terms = [t for g in sub for t in TERM_GROUPS[g]]
    extra = np.column_stack([columns[t] for t in terms]) if terms else np.zeros((len(df), 0))
    src = df["source_key"].to_numpy(object)
    return _fold_residuals(df, C._FitColumns(df), extra, np.log(df["implied_mfu"].to_numpy(float)), src,
                           list(dict.fromkeys(src)))


def selection_check(groups=None, *, score: str = "absolute", coverage: float = 0.8):
    """The term choice itself checked leaving whole sources out: for each source ``k``, every subset of
    ``groups`` (names of :data:`TERM_GROUPS`, default all: 256 subsets, minutes) is scored on the other
    sources alone (the bounds of their out-of-source residuals, each fit also without ``k``; strata as the
    baseline's range) and the subset with the narrowest median width is kept; ``k``'s runs are then predicted
    with it and checked against its bounds. Returns ``(coverage, median_width, chosen, per_run)``: the
    measured coverage and median width over the runs calibrated in their fold (as
    :class:`~llmsizing.intervals.LosoCheck` counts them), ``{source: chosen subset}`` and per run its source,
    generation, dtype, kind, stack family, ``inside``, ``width`` and ``calibrated`` (where the coverage falls
    short: a group's share inside can be far from the whole's). This is the honest figure for a
    range whose terms were picked by looking at these runs: :func:`candidate_table` checks each candidate as
    if it had been fixed in advance."""
    import itertools
    import math

    import numpy as np
    import pandas as pd

    from . import calibration as C
    from .intervals import SCORES, _bounds, _check_coverage, keyed_calibration

    names = list(TERM_GROUPS) if groups is None else list(groups)
    unknown = [g for g in names if g not in TERM_GROUPS]
    if unknown:
        raise ValueError(f"groups must name term groups of {', '.join(TERM_GROUPS)}; got {unknown}")
    if score not in SCORES:
        raise ValueError(f"score must be one of {', '.join(SCORES)}; got {score!r}")
    coverage = _check_coverage(coverage)
    df = C._prepared(None)
    src = df["source_key"].to_numpy(object)
    keys = list(dict.fromkeys(src))
    st = np.where(df["kind"] == "pretraining-total", "pretraining-total", "steady-state").astype(object)
    subsets = [s for r in range(len(names) + 1) for s in itertools.combinations(names, r)]
    fits = {sub: _subset_residuals(sub) for sub in subsets}
    lo, hi, res, chosen = np.empty(len(src)), np.empty(len(src)), np.empty(len(src)), {}
    # a run on a (generation, dtype) its fold has no calibration run of sets no bound (intervals, step 5)
    cols = C._FitColumns(df)
    calibrated, cal = keyed_calibration(cols.keys, cols.calibration), np.ones(len(src), bool)
    for k in keys:
        test, rest = src == k, src != k           # (rest: the rows that set k's bounds)
        cal[test] = calibrated(rest, test)
        for j in keys:
            if j != k:
                rest[src == j] &= calibrated((src != k) & (src != j), src == j)
        best = None
        for sub in subsets:
            pooled, per = _bounds(fits[sub][1][k][rest], src[rest], st[rest], coverage, "source", score)
            width = float(np.median([per.get(s, pooled)[1] - per.get(s, pooled)[0] for s in st[rest]]))
            if best is None or width < best[0] - 1e-12:
                best = (width, sub, pooled, per)
        _, sub, pooled, per = best
        chosen[k] = sub
        for i in np.flatnonzero(test):
            lo[i], hi[i] = per.get(st[i], pooled)
            res[i] = fits[sub][0][i]
    inside = (res >= lo - 1e-12) & (res <= hi + 1e-12)
    per_run = pd.DataFrame({"source_key": src, "generation": df["generation"].to_numpy(object),
                            "dtype": df["dtype"].to_numpy(object), "kind": st,
                            "stack_family": _columns_family(df), "inside": inside, "width": np.exp(hi - lo),
                            "calibrated": cal})
    return float(inside[cal].mean()), math.exp(float(np.median((hi - lo)[cal]))), chosen, per_run


#: Issue 34's pre-registered procedures (ranges34p, written before they were run): the extra terms, the
#: conformal score and the strata the bounds are calibrated over. ``"registered"`` is the one checked first;
#: ``"fallback"`` (Hopper's own size and sequence slopes added) the only fallback, declared with it.
REGISTERED = {
    "registered": (_STACK + _BATCH, "absolute", "generation"),
    "fallback": (_STACK + _BATCH + ("hopper_size", "hopper_seq"), "absolute", "generation"),
}
#: The groups :func:`registered_check` reports coverage and width for (columns of its per-run table).
REPORT_BY = ("generation", "stack_family", "dtype", "kind")
#: Session 48's pre-registered candidates for the range of ``"registered"`` (the same fit, refit in every
#: outer and inner fold; only the conformal bounds change), with the rule, before any was computed: adopt only
#: if, over the runs calibrated in their fold, coverage stays >= 75% in every group of data/intervals.csv's
#: training-inputs at >= 75% today and the median width falls below 1.8637x (narrowest if several; 3 tries).
#: ``"levels"``: strata finest first, each needing min_units sources, else pooled; ``"scaled"``: normalised
#: residuals |r| / s(x) (Lei et al. 2018 Sec. 5.2), log s(x) the source-weighted least squares of
#: log max(|r|, 0.01) on the flags, each inner row scored without its source, quantile per generation.
#: Dead end (all three fail, none adopted): coverage / median width 85.0% / 1.905x, 91.4% / 2.045x,
#: 90.0% / 2.098x against today's 84.3% / 1.864x (each also drops fp8, 11 runs, to 72.7%). A stratum of
#: fewer sources pays a larger finite-sample step, (S + 1) / S, in every fold (hopper's named stacks: 11
#: sources, 10 in a fold), and no split isolates the wide residuals: Ampere's BloombergGPT (x0.60), InternLM
#: (x1.35) and OPT (x0.73) are steady states; Hopper's KempnerForge (x0.70-1.56 in one source), Megatron-LM's
#: model table (x1.28) and torchtitan's H200 run (x1.44) are named stacks, beside the Llama 3 / 3.1 cards'
#: unnamed whole runs (x0.76, x0.84).
REGISTERED48 = {
    "kind_strata": ("levels", ("generation:kind", "kind")),
    "named_strata": ("levels", ("generation:named", "named")),
    "scaled": ("scaled", ("stack_unnamed", "batch_unpublished", "whole_run")),
}


def registered_check(name: str = "registered", *, coverage: float = 0.8):
    """The nested leave-one-source-out check (:func:`~llmsizing.intervals.loso_check`, as
    ``tools/calibrate.py`` checks the baseline's range) of the pre-registered procedure ``name``
    (:data:`REGISTERED`): the end-to-end fit with its extra terms, its score, and bounds of their own per GPU
    generation with :func:`~llmsizing.intervals.min_units` sources (else pooled). Returns ``(check,
    per_run)``: ``per_run`` has per run its source, :data:`REPORT_BY` groups, ``inside``, ``width`` and
    ``batch`` (``"unpublished"`` where the fit reads no tokens per GPU: how an estimate without
    ``tokens_per_step`` is predicted)."""
    from .intervals import copied_check

    if name not in REGISTERED:
        raise ValueError(f"name must be one of {', '.join(REGISTERED)}; got {name!r}")
    check, per_run = _registered_check(name, coverage)
    return copied_check(check), per_run.copy()


@cache
def _registered_check(name, coverage):
    import numpy as np
    import pandas as pd

    from . import calibration as C
    from .intervals import keyed_calibration, loso_check

    terms, score, strata = REGISTERED[name]
    df = C._prepared(None)
    columns = _columns(df)
    extra = np.column_stack([columns[t] for t in terms])
    src = df["source_key"].to_numpy(object)
    labels = df[strata].astype(str).to_numpy(object)
    cols = C._FitColumns(df)
    predict = _extra_predictor(cols, extra)
    # a run whose generation and dtype no other source calibrates sets no bound (intervals, step 5)
    check = loso_check(np.log(df["implied_mfu"].to_numpy(float)), src, predict, coverage=coverage,
                       strata=labels, score=score, calibrated=keyed_calibration(cols.keys, cols.calibration))
    kind = np.where(df["kind"] == "pretraining-total", "pretraining-total", "steady-state")
    per_run = pd.DataFrame({"source_key": src, "generation": df["generation"].to_numpy(object),
                            "dtype": df["dtype"].to_numpy(object), "kind": kind,
                            "stack_family": _columns_family(df), "inside": check.inside,
                            "calibrated": check.calibrated_rows,
                            "width": np.exp(check.high_log - check.low_log),
                            "batch": np.where(columns["batch_unpublished"] > 0, "unpublished", "published")})
    return check, per_run


def registered_table(name: str = "registered"):
    """Coverage and median width of :func:`registered_check` ``name`` overall and per group of
    :data:`REPORT_BY`, over the runs calibrated in their fold: one row per (by, group) with ``runs`` and
    ``sources``, and ``meets`` (coverage at least
    :data:`MIN_COVERAGE`; the overall row also median width at most :data:`MAX_WIDTH`)."""
    import numpy as np
    import pandas as pd

    _, per_run = registered_check(name)
    per_run = per_run[per_run["calibrated"]]        # (the stand-in runs are counted apart: intervals, step 5)
    rows = [("all", "all", per_run)] + [(by, g, part) for by in REPORT_BY for g, part in per_run.groupby(by)]
    out = [{"by": by, "group": g, "coverage": float(p["inside"].mean()),
            "median_width": float(np.median(p["width"])), "runs": len(p),
            "sources": p["source_key"].nunique()}
           for by, g, p in rows]
    t = pd.DataFrame(out)
    narrow = (t["by"] != "all") | (t["median_width"] <= MAX_WIDTH + 1e-12)
    t["meets"] = (t["coverage"] >= MIN_COVERAGE) & narrow
    return t


def inputs_model_table(name: str = "registered"):
    """The pre-registered procedure ``name`` (:data:`REGISTERED`) fitted on every source's calibration runs,
    as ``data/mfu_inputs_model.csv`` stores it (``tools/calibrate.py``): one row per (generation, dtype) with
    its intercept, the shared terms of :data:`~llmsizing.calibration.TERMS` and the extra terms (coefficients
    rounded to 4 decimals, as the fit's), and the 80% range ``low``/``high`` of the row's generation (its own
    bounds where it has :func:`~llmsizing.intervals.min_units` sources, else the pooled ones; widened to hold
    1 and rounded outwards, as :func:`~llmsizing.calibration.fit_mfu_model`'s) with ``range_group``, the
    stratum they come from."""
    import math

    import numpy as np
    import pandas as pd

    from . import calibration as C

    terms, _, _ = REGISTERED[name]
    check, _ = registered_check(name)
    df = C._prepared(None)
    columns = _columns(df)
    cols = C._FitColumns(df)
    fit = np.flatnonzero(cols.calibration)
    cal = cols.rows(fit)
    groups = sorted(set(cal.keys))
    x = np.column_stack([C._design_of(cal, groups), np.column_stack([columns[t][fit] for t in terms])])
    beta = np.round(np.linalg.lstsq(x, np.log(cal.implied_mfu), rcond=None)[0], 4)
    shared = dict(zip(C.TERMS + tuple(terms), beta[len(groups):]))
    rows = []
    for i, (gen, dtype) in enumerate(groups):
        stratum = gen if gen in check.bounds else None
        lo, hi = check.bounds[stratum]
        rows.append({"generation": gen, "dtype": dtype, "intercept": beta[i], **shared,
                     "low": math.floor(min(math.exp(lo), 1.0) * 1e4) / 1e4,
                     "high": math.ceil(max(math.exp(hi), 1.0) * 1e4) / 1e4,
                     "range_group": stratum or "all"})
    return pd.DataFrame(rows)


#: Session 38's pre-registered candidates (issue 34; written down before they were computed, with the reason
#: for each, in the session's report): name -> (extra fit terms, whether the least squares weighs each
#: source the same, an extra stratum). Each is checked on both procedures of :data:`PROCEDURES`. Measured
#: (tools/range_candidates.py --s38): on the inputs range only ``attention_share`` met the adoption rule
#: (84.3% -> 82.9%, 1.864x -> 1.677x) and it is not stated: it moves DeepSeek-V3's published
#: context-extension share from 1.21x to 1.42x of the prediction (tests/test_stages.py asks 25%) and Llama
#: 3.1 405B's 128K/8K MFU from 0.84 to 0.79 (Meta: 0.93); the end-to-end baseline's single passes did not
#: survive together (2.30x).
PREREGISTERED38 = {
    "attention_share": (("attention_share",), False, None),
    "log_width": (("log_width",), False, None),
    "source_weighted": ((), True, None),
    "training_run": (("training_run",), False, "training_run"),
    "stack_strata": ((), False, "stack"),
}
#: The two ranges they are tried on: ``"E"`` the end-to-end baseline (no extra term, two-tailed score, width
#: per kind) and ``"I"`` the inputs range the library states (:data:`REGISTERED` ``"registered"``).
PROCEDURES = {"E": ((), "tails", "kind"), "I": (_STACK + _BATCH, "absolute", "generation")}
#: P6 of the pre-registration: per procedure, the candidates that met the adoption rule alone (coverage at
#: least 80% and no more than 2 points below the procedure's, median width narrower), checked together once.
COMBINED38 = {"E": "log_width+source_weighted+training_run", "I": "attention_share"}
#: The sources whose figures are a model's own production training run (its authors trained and released
#: the model: model paper, technical report, model card); every other source is a framework's or method's
#: benchmark (framework docs, systems papers and their baselines, vendor blogs). Whole-run totals are
#: training runs by definition (candidate ``"training_run"``).
TRAINING_RUN_SOURCES = (
    "BigScience Workshop 2022, BLOOM", "Hugging Face 2025, SmolLM3",
    "IBM Granite Team 2024, Granite 3.0 Language Models", "Llama 3 Herd of Models",
    "Meta, Llama 3 model card",
    "Meta, Llama 3.1 model card", "MosaicML 2023, MPT-7B model card",
    "NVIDIA 2024, Nemotron-4 340B Technical Report", "Parmar et al. 2024, Nemotron-4 15B Technical Report",
    "Smith et al. 2022, MT-NLG", "Touvron et al. 2023, LLaMA", "Touvron et al. 2023, Llama 2",
    "Wu et al. 2023, BloombergGPT", "Zeng et al. 2022, GLM-130B", "Zhang et al. 2022, OPT",
    "bigscience-workshop/bigscience train/tr11-176B-ml/README.md", "jzhang38/TinyLlama")


def _columns38(df) -> dict:
    """The candidate columns of :data:`PREREGISTERED38` over the rows of ``df`` not in :func:`_columns`
    (which has ``attention_share``, :func:`~llmsizing.flops.attention_flops_share`): log(hidden / 4,096)
    and the training-run flag."""
    import numpy as np

    from .catalog import get_model

    width = np.log(np.array([get_model(m).hidden for m in df["model"]], float) / 4096)
    run = np.array([k in TRAINING_RUN_SOURCES or kind == "pretraining-total"
                    for k, kind in zip(df["source_key"], df["kind"])], float)
    return {"log_width": width, "training_run": run}


def _level_bounds(res, src, levels, labels, coverage, score):
    """Bounds for a row whose stratum labels are ``labels`` (finest first, one per array of ``levels``): the
    first level whose label has :func:`~llmsizing.intervals.min_units` sources among ``src``, else pooled."""
    from .intervals import conformal_bounds, min_units

    for level, label in zip(levels, labels):
        mine = level == label
        if len(set(src[mine])) >= min_units(coverage):
            return conformal_bounds(res[mine], coverage, src[mine], score)
    return conformal_bounds(res, coverage, src, score)


def candidate38_check(name: str, procedure: str, *, coverage: float = 0.8):
    """The nested leave-one-source-out check of :data:`PREREGISTERED38` ``name`` (``"none"``: the procedure
    as it is; names joined by ``"+"``: those candidates together, at most one with a stratum) on
    ``procedure`` (:data:`PROCEDURES`), as :func:`~llmsizing.intervals.loso_check` (the same stand-in rule)
    but with strata that fall back level by level (the candidate's stratum crossed with the procedure's,
    then the procedure's, then pooled). Returns ``(coverage, median_width, per_run)`` over the runs
    calibrated in their fold; ``per_run`` has the residual, bounds, ``inside`` and ``calibrated``."""
    import math

    import numpy as np
    import pandas as pd

    from . import calibration as C
    from .intervals import keyed_calibration, loso_residuals

    names = () if name == "none" else tuple(name.split("+"))
    if any(n not in PREREGISTERED38 for n in names):
        raise ValueError(f"name must be 'none' or names of {', '.join(PREREGISTERED38)} joined by '+'; got "
                         f"{name!r}")
    if procedure not in PROCEDURES:
        raise ValueError(f"procedure must be one of {', '.join(PROCEDURES)}; got {procedure!r}")
    terms = tuple(t for n in names for t in PREREGISTERED38[n][0])
    weighted = any(PREREGISTERED38[n][1] for n in names)
    strata = [PREREGISTERED38[n][2] for n in names if PREREGISTERED38[n][2] is not None]
    if len(strata) > 1:
        raise ValueError(f"name combines {len(strata)} strata ({', '.join(strata)}); at most one")
    stratum = strata[0] if strata else None
    base_terms, score, base_strata = PROCEDURES[procedure]
    df = C._prepared(None)
    columns = {**_columns(df), **_columns38(df)}
    all_terms = tuple(base_terms) + tuple(terms)
    extra = np.column_stack([columns[t] for t in all_terms]) if all_terms else np.zeros((len(df), 0))
    src = df["source_key"].to_numpy(object)
    cols = C._FitColumns(df)
    predict = _extra_predictor(cols, extra, src if weighted else None)
    kind = np.where(df["kind"] == "pretraining-total", "pretraining-total", "steady-state").astype(object)
    base = kind if base_strata == "kind" else df[base_strata].astype(str).to_numpy(object)
    levels = [base]
    if stratum is not None:
        extra_label = (_columns_family(df) if stratum == "stack"
                       else np.where(columns["training_run"] > 0, "training-run", "benchmark").astype(object))
        levels = [np.array([f"{a}:{b}" for a, b in zip(base, extra_label)], dtype=object), base]
    y = np.log(df["implied_mfu"].to_numpy(float))
    calibrated = keyed_calibration(cols.keys, cols.calibration)
    res = loso_residuals(y, src, predict)
    keys = list(dict.fromkeys(src))
    cal = np.ones(len(y), bool)
    for k in keys:
        cal[src == k] = calibrated(src != k, src == k)
    lo, hi = np.empty(len(y)), np.empty(len(y))
    for k in keys:
        test, rest = src == k, src != k
        inner, inner_cal = np.full(len(y), np.nan), cal.copy()
        for j in keys:
            if j != k:
                mine = src == j
                inner[mine] = y[mine] - predict(rest & ~mine, mine)
                inner_cal[mine] = calibrated(rest & ~mine, mine)
        use = rest & inner_cal
        for i in np.flatnonzero(test):
            lo[i], hi[i] = _level_bounds(inner[use], src[use], [lv[use] for lv in levels],
                                         [lv[i] for lv in levels], coverage, score)
    inside = (res >= lo - 1e-12) & (res <= hi + 1e-12)
    per_run = pd.DataFrame({"source_key": src, "run": df["run"].to_numpy(object), "kind": kind,
                            "stratum": levels[0], "residual": res, "low_log": lo, "high_log": hi,
                            "inside": inside, "calibrated": cal})
    return (float(inside[cal].mean()), math.exp(float(np.median((hi - lo)[cal]))), per_run)
