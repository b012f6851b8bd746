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
4. A run whose (generation, dtype) takes a stand-in in its fold (step 1: no calibration run of that
   generation and dtype among the other sources) is priced on an uncalibrated efficiency: it sets no bound,
   in no fold, and its coverage by the calibrated range is reported apart (group ``stand-in`` of
   ``data/intervals.csv``; :func:`~llmsizing.intervals.loso_check`, step 5). Decided per fold from the data.

**The stack** (``by_stack=True``): the software stack that ran a run explains part of its residual (issue 34):
Megatron's engine beats the step model, PyTorch FSDP stacks fall short of it. Each run's family is
:func:`~llmsizing.frameworks.stack_family` of its ``framework`` cell, a rule fixed from what the stacks do
before any width was measured. Inside each fold (never on the held-out source) a known family's location on
a GPU generation is the median of its calibration runs' log residuals on that generation at the fold's
efficiency, or the median over all its calibration runs where the fold has none on that generation
(:func:`stack_locations`, :func:`stack_location`), and is added to the prediction; an ``"unknown"`` stack gets
none. Per generation because the fold's kernel efficiency of a generation is a median over a different mix of
stacks on Ampere (Megatron, DeepSpeed) and on Hopper (mostly FSDP), so one offset per family would be
confounded with the generation (decided before measuring, ranges34e). The spread stays pooled over all sources
(no family has the 9 sources a range of its own needs), so a family's range is its location times the pooled
bounds of the stack-centred residuals, and an unknown stack's range is the pooled one of the plain check.

Every step model change (attention kernels, GEMM shapes, latency) moves these numbers: ``tools/calibrate.py``
recomputes them into ``data/intervals.csv`` (area :data:`AREA`), which
:func:`~llmsizing.mfu.layout_range_factors` reads for ``step_time``, ``run_from_step`` and ``plan``.
"""

from __future__ import annotations

from functools import cache

from .mfu import LAYOUT_RANGE_AREA

#: The area of ``data/intervals.csv`` that holds the range of an MFU predicted from a layout.
AREA = LAYOUT_RANGE_AREA

#: What the width may depend on (a column of the per-run table, or ``None``: pooled). Pooled: a stratum needs
#: 10 sources (its nested folds 9, :func:`~llmsizing.intervals.min_units` at 80%); of the dtypes only BF16 has
#: them (17 of the 19 sources; FP8 4), so a stratum by dtype would leave FP8 on the pooled bounds and give
#: BF16, most of the runs, nearly the pooled bounds (read26h).
STEP_INTERVAL_STRATA = None
#: The least out-of-source coverage of the 80% range at which a stack family (or a family:generation cell)
#: states a range of its own (issue 34's bar for every area); below it the stack's location is not known well
#: enough and ``tools/calibrate.py`` states none (the stack then gets the unknown stack's range)
MIN_STACK_COVERAGE = 0.75


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


class _FoldColumns:
    """What the folds read of each run of a per-run table (:func:`layout_runs`), as arrays read once, in the
    table's order: each fold of a check selects its rows from these instead of from the table (the same
    values in the same order, so the same fit, bit for bit, for a fraction of the time). ``stack``: also the
    columns :func:`stack_locations` reads."""

    def __init__(self, per_run, stack: bool = False):
        import numpy as np
        import pandas as pd

        self.n = len(per_run)
        self.keys = list(zip(per_run["generation"], per_run["dtype"]))
        # (a key with a missing part is no group of its own, as in DataFrame.groupby)
        self.grouped = np.array([not (pd.isna(g) or pd.isna(d)) for g, d in self.keys], dtype=bool)
        self.fits = per_run["kernel_fit"].to_numpy(bool) & per_run["kernel_efficiency"].notna().to_numpy()
        self.efficiency = per_run["kernel_efficiency"].to_numpy(float)
        if stack:
            self.family = per_run["stack_family"].to_numpy(object)
            self.generation = per_run["generation"].to_numpy(object)
            self.log_implied = np.log(per_run["implied_mfu"].to_numpy(float))


def _median(values: list) -> float:
    """The median as ``DataFrame.groupby(...).median()`` computes it: the middle value, or the two middle
    values' sum halved."""
    v = sorted(values)
    m = len(v) // 2
    return v[m] if len(v) % 2 else (v[m] + v[m - 1]) / 2


def fold_efficiencies(per_run, train) -> dict:
    """``{(generation, dtype): efficiency}`` fitted on the rows of ``per_run`` (:func:`layout_runs`) where
    ``train`` (a boolean mask) is true, for every (generation, dtype) of ``per_run``: the median of the
    ``kernel_fit`` rows' ``kernel_efficiency`` (module docstring, step 1), rounded to 3 decimals; a key
    without such a row takes the lower median of the fitted keys of its dtype (of all keys if none)."""
    import numpy as np

    cols = per_run if isinstance(per_run, _FoldColumns) else _FoldColumns(per_run)
    train = np.asarray(train, dtype=bool)
    if train.shape != (cols.n,):
        raise ValueError(f"train must be one True/False per run ({cols.n}), got shape {train.shape}")
    fit = np.flatnonzero(train & cols.fits)
    if not len(fit):
        raise ValueError("train leaves no calibration run with a fitted kernel efficiency: nothing to fit")
    by: dict = {}
    for i in fit[cols.grouped[fit]]:
        by.setdefault(cols.keys[i], []).append(cols.efficiency[i])
    med = {k: round(float(_median(v)), 3) for k, v in by.items()}
    out = {}
    for key in dict.fromkeys(cols.keys):
        if key in med:
            out[key] = med[key]
        else:
            same = sorted(v for k, v in med.items() if k[1] == key[1]) or sorted(med.values())
            out[key] = same[(len(same) - 1) // 2]
    return out


def stack_locations(per_run, train, log_mfu_at) -> dict:
    """The log locations of the known stack families (:data:`~llmsizing.frameworks.STACK_FAMILIES` but
    ``"unknown"``) fitted on the rows of ``per_run`` where ``train`` is true: ``{family: loc}`` over each
    family's calibration runs and ``{(family, generation): loc}`` over those of one GPU generation, each
    the median of the runs' ``log(published / predicted MFU)`` predicted at :func:`fold_efficiencies` of
    ``train``; ``log_mfu_at(i, efficiency)`` is row ``i``'s log MFU at an efficiency (module docstring).
    :func:`stack_location` reads it."""
    import numpy as np

    cols = per_run if isinstance(per_run, _FoldColumns) else _FoldColumns(per_run, stack=True)
    eff = fold_efficiencies(cols, train)
    fam, gen, y, keys = cols.family, cols.generation, cols.log_implied, cols.keys
    fit = np.asarray(train, dtype=bool) & cols.fits
    res = {i: y[i] - log_mfu_at(i, eff[keys[i]]) for i in np.flatnonzero(fit & (fam != "unknown"))}
    out = {}
    for f in dict.fromkeys(fam[list(res)]):
        mine = [i for i in res if fam[i] == f]
        out[f] = float(np.median([res[i] for i in mine]))
        for g in dict.fromkeys(gen[mine]):
            out[f, g] = float(np.median([res[i] for i in mine if gen[i] == g]))
    return out


def stack_location(locations, family: str, generation: str) -> float:
    """The log location of a run of ``family`` on a GPU of ``generation`` in ``locations``
    (:func:`stack_locations`): its (family, generation) cell, else its family's, else 0 (an unknown stack or a
    family without a calibration run: the pooled prediction). Module docstring, "The stack"."""
    return locations.get((family, generation), locations.get(family, 0.0))


def step_loso_check(runs=None, *, coverage: float = 0.8, strata: str | None = STEP_INTERVAL_STRATA,
                    by_stack: bool = False):
    """The step model's MFU checked by leaving one source out (module docstring): ``(check, per_run)``, a
    :class:`~llmsizing.intervals.LosoCheck` over the runs with a published layout and those runs
    (:func:`layout_runs`) with ``stack_family`` and ``predicted_mfu`` (at the efficiency fitted without the
    run's source, times its family's location with ``by_stack``) added. ``strata``: a column of the runs
    whose values may get bounds of their own, or ``None``; ``by_stack``: add each known stack family's
    location fitted in the fold (module docstring, "The stack"). On the default table each setting's refits
    run once per process (tools/calibrate.py asks twice); each caller gets its own copy."""
    from .intervals import copied_check

    if not isinstance(by_stack, bool):
        raise TypeError(f"by_stack must be True or False, got {type(by_stack).__name__}")
    if runs is None and isinstance(coverage, float) and (strata is None or isinstance(strata, str)):
        check, df = _default_step_loso_check(coverage, strata, by_stack)
        return copied_check(check), df.copy()
    return _step_loso_check(runs, coverage, strata, by_stack)


@cache
def _default_step_loso_check(coverage, strata, by_stack):
    return _step_loso_check(None, coverage, strata, by_stack)


def _step_loso_check(runs, coverage, strata, by_stack):
    import numpy as np

    from .frameworks import stack_family
    from .intervals import keyed_calibration, loso_check

    df = layout_runs(runs)
    df["stack_family"] = [stack_family(f, lenient=True) for f in df.get("framework", [None] * len(df))]
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

    fam = df["stack_family"].to_numpy(object)
    gen = df["generation"].to_numpy(object)
    cols = _FoldColumns(df, stack=True)      # (read once: each fold selects its rows from these arrays)

    def fit_predict(train, test):
        eff = fold_efficiencies(cols, train)
        loc = stack_locations(cols, train, log_mfu) if by_stack else {}
        return [log_mfu(i, eff[keys[i]]) + stack_location(loc, fam[i], gen[i]) for i in np.flatnonzero(test)]

    labels = None if strata is None else df[strata].astype(str).to_numpy(object)
    # a run whose (generation, dtype) has no fitted efficiency among the other sources is priced on a
    # stand-in: it sets no bound (module docstring, step 4)
    calibrated = keyed_calibration(cols.keys, cols.fits & cols.grouped)
    try:
        check = loso_check(np.log(df["implied_mfu"].to_numpy(float)), src, fit_predict, coverage=coverage,
                           strata=labels, calibrated=calibrated)
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


def stack_ranges(runs=None, *, coverage: float = 0.8):
    """The range of an MFU from a layout per stack family and GPU generation (module docstring, "The stack"):
    ``(table, per_run)``.
    ``table`` has one ``"all"`` row, one row per family of :data:`~llmsizing.frameworks.STACK_FAMILIES` and
    one ``"<family>:<generation>"`` row per (family, generation) with a calibration run. A family's or a
    cell's ``measured_coverage`` and ``median_width`` are over its runs against the stack-centred interval
    computed without their source (``"unknown"``: against the plain pooled one); ``stated`` is whether the
    row states a range (its coverage not below :data:`MIN_STACK_COVERAGE`; never ``"all"``); ``low``/``high``
    are the factors on the step model's MFU it would state (the location of the family, or of the cell,
    fitted on every source times the pooled stack-centred bounds; ``"unknown"``: the plain pooled bounds;
    ``"all"``: none). The ``"all"`` row counts every run **as a user gets it** (audit34, ranges42): against
    the interval :func:`~llmsizing.mfu.layout_range_group` gives its framework, i.e. the stack-centred one
    where the run's cell (else its family, where the cell has no row) states a range, the plain pooled one
    where it states none or the stack is unknown. ``n_rows`` and ``n_sources`` count the runs calibrated in
    their fold (module docstring, step 4).
    ``per_run``: :func:`step_loso_check`'s runs as a user gets them (as the ``"all"`` row): ``ratio``
    (published / predicted, stack-centred where the stack's range is used), ``low``/``high`` (the held-out
    bounds as ratios), ``inside``, ``calibrated`` and ``range_row`` (the row of ``table`` whose range the run
    gets, or ``"plain"``)."""
    import math

    import numpy as np
    import pandas as pd

    from .frameworks import STACK_FAMILIES

    plain, df = step_loso_check(runs, coverage=coverage)
    stacked, _ = step_loso_check(runs, coverage=coverage, by_stack=True)
    rows = list(df.itertuples())
    loc = stack_locations(df, np.ones(len(df), bool), lambda i, e: math.log(_mfu_at(rows[i], e)))
    unk = (df["stack_family"] == "unknown").to_numpy()
    keys = ("residuals", "low_log", "high_log", "inside")
    pick = {k: np.where(unk, getattr(plain, k), getattr(stacked, k)) for k in keys}
    cal = plain.calibrated_rows
    fam, gen = df["stack_family"].to_numpy(object), df["generation"].to_numpy(object)
    # the groups count calibrated runs only (a run priced on a stand-in is reported apart: module docstring)
    groups = []
    for f in STACK_FAMILIES:
        groups.append((f, cal & (fam == f), loc.get(f)))
        groups += [(f"{f}:{k[1]}", cal & (fam == f) & (gen == k[1]), v) for k, v in loc.items()
                   if isinstance(k, tuple) and k[0] == f]
    lo, hi = stacked.bounds[None]
    out = []
    for name, mine, where in groups:
        if where is None:
            low, high = plain.stated()
        else:
            low, high = math.exp(where + lo), math.exp(where + hi)
        n = int(mine.sum())
        cov = float(pick["inside"][mine].mean()) if n else math.nan
        out.append({"group": name, "measured_coverage": cov,
                    "median_width": float(np.exp(np.median(pick["high_log"][mine] - pick["low_log"][mine])))
                    if n else math.nan, "low": low, "high": high, "n_rows": n,
                    "n_sources": len(set(df["source_key"][mine])),
                    "stated": not cov < MIN_STACK_COVERAGE})
    stated = {r["group"]: r["stated"] for r in out}
    # the row each run's range comes from, in mfu.layout_range_group's order: the (family, generation) cell
    # if the table has one, else the family's; a row stating no range, or an unknown stack, gives the plain
    # one
    row = [next((g for g in (f"{f}:{g_}", f) if g in stated), None) if f != "unknown" else None
           for f, g_ in zip(fam, gen)]
    use = np.array([r is not None and stated[r] for r in row])
    user = {k: np.where(use, getattr(stacked, k), getattr(plain, k)) for k in keys}
    n = int(cal.sum())
    out.insert(0, {"group": "all", "measured_coverage": float(user["inside"][cal].mean()) if n else math.nan,
                   "median_width": float(np.exp(np.median(user["high_log"][cal] - user["low_log"][cal])))
                   if n else math.nan, "low": math.nan, "high": math.nan, "n_rows": n,
                   "n_sources": len(set(df["source_key"][cal])), "stated": False})
    per = df.assign(ratio=np.exp(user["residuals"]), low=np.exp(user["low_log"]),
                    high=np.exp(user["high_log"]), inside=user["inside"], calibrated=cal,
                    range_row=[r if u else "plain" for r, u in zip(row, use)])
    return pd.DataFrame(out), per


#: The area of the planner's own pick (issue 34, plan46): the range of the MFU of the layout
#: :func:`~llmsizing.planner.plan` picks, which is what a reader reads end to end (chapters 11, 12, 17).
PLANNED_AREA = "training-planned"
#: PRE-REGISTERED (plan46, 2026-12-04, committed before any coverage was computed; nothing below is tuned
#: on the result, and any variant computed afterwards is exploratory and never adopted):
#: runs: those of :data:`AREA` (:func:`layout_runs`: 118 runs, 21 sources; the same source keys, the same
#: fold efficiencies, the same stand-in rule, step 4); the planner is given per run its model, GPU, GPU count
#: as published (``gpu_counts=(n,)``, ``max_gpus=n``), sequence, global batch, precision (``"fp8-mixed"``
#: for an FP8 row, else ``"bf16-mixed"``), the stack family of its ``framework`` cell
#: (:func:`~llmsizing.frameworks.stack_family`, lenient) as ``framework``, its node's network
#: (:func:`~llmsizing.run_nodes.plan_network`) and, as ``kernel_efficiency``, the fold's efficiency of its
#: (generation, dtype) (:func:`fold_efficiencies` of the other sources, refit inside every nested fold);
#: everything else is plan()'s default (micro-batches, recomputation, ZeRO, interleaving, context
#: parallelism); never its published tp, pp, dp, cp, micro-batch, ZeRO, recomputation or interleaving, nor
#: its ``tp_comm_overlap`` cell or attention kernel (plan() takes no argument for them). Predicted: the MFU
#: of the pick, the fastest plan on exactly n GPUs (one GPU type and count: also the cheapest). Score:
#: ``log(published / pick MFU)``, two-tailed (``"tails"``, as :data:`AREA`), each source weighing the same,
#: pooled, nested leave-one-source-out at 80%; no location fitted (a two-tailed bound moves with a constant
#: offset: the planner's optimism shows as a low bound below 1). A run plan() finds no plan for on its GPU
#: count (or refuses) has no residual, sets no bound and counts as outside in the coverage. Reported: the
#: coverage per dtype, generation, stack family and stand-in (no ranges of their own), the per-source
#: residuals, the runs whose pick beats the published layout at the same efficiency by more than x1.25, and
#: how many runs' pick changes with the fold's efficiency. Adoption: state the area (data/intervals.csv via
#: tools/calibrate.py; plan()'s range of its pick) only if the coverage of the calibrated runs is at least
#: 75% (issue 34's bar; 80% nominal) and the median width below 1.6x; else it is a dead end, recorded.
#: Clarified before any coverage (a feasibility pass found plan() refusing the "H100 HBM2e (Meta)" rows
#: for want of a catalogued price): a GPU without a price gets ``prices={gpu: 1.0}``, which moves neither
#: the pick (one GPU type and count) nor its MFU; the median width is over the runs with a plan.
#: MEASURED (plan46, tools/range_candidates.py --planned, 10 s CPU): a dead end, not stated. Coverage 87.4%
#: of the 111 calibrated runs (97 inside; the 2 without a plan, MPT 30B on 8 H100s at 8K and KempnerForge
#: 7B on one H200, counted outside; 89.0% of the 109 with one), but median width 2.04x (x0.586 to x1.189)
#: against training-layout's 1.53x: the pick beats the published layout at the same efficiency by x1.24
#: (median; 10-90% x0.98 to x1.65), most on Megatron-LM 2021 (TP1 or TP2 ZeRO-3 against TP8: up to x1.94),
#: KempnerForge's TP4 runs (x1.74) and Nemotron-4 15B (TP2 against TP8, x1.56); the spread of that gain,
#: not its median, makes the width. Stand-in runs 0 of 7 inside. The pick changes with the fold's
#: efficiency for 3 of 116 runs. Kept per run in data/planned_picks.csv (llmsizing.planned_picks; chapter 12).
#: Read afterwards (2026-12-04, no change to the procedure): the pick is furthest behind on Llama 3.1 405B
#: at 16,384 GPUs (x0.79) for two reasons together: Meta's ZeRO-2 under a pipeline is not in the default
#: search, and without recomputation its layout fills 96% of the H100 by the memory model, above
#: USABLE_FRACTION; with ``shard_under_pipeline=True`` alone the pick is x0.80, with ``usable_fraction=0.97``
#: alone x0.91, with both it is Meta's layout (chapter 12, exercise 4). Of Megatron-LM 2021's gains (up to
#: x1.94) about x1.04-1.05 is the attention kernel: the published layout is priced with that stack's unfused
#: attention (calibration.attention_kernel_of), the pick with plan()'s flash attention.


#: The columns of a plan that make its layout (:func:`planned_pick`), in :func:`_layout_text`'s order.
_PICK = ("tp", "pp", "virtual_stages", "dp", "cp", "micro_batch", "zero", "recompute", "recompute_layers")


def _layout_text(tp, pp, v, dp, cp, micro, zero, recompute, layers=None) -> str:
    """``"TP8 PP16x8 DP64 mb1 ZeRO-1 full(3)"``: interleaving ``x v``, context parallelism and the layers a
    stage recomputes where given (a partial recomputation)."""
    import pandas as pd

    return (f"TP{tp} PP{pp}" + (f"x{v}" if v > 1 else "") + f" DP{dp}" + (f" CP{cp}" if cp > 1 else "")
            + f" mb{micro} ZeRO-{zero} {recompute}" + ("" if layers is None or pd.isna(layers) else
                                                       f"({int(layers)})"))


def planned_request(row, efficiency: float) -> dict:
    """The arguments :func:`planned_pick` gives :func:`~llmsizing.planner.plan` for ``row``'s run at kernel
    efficiency ``efficiency`` (``model`` included: ``plan(**planned_request(row, e))``), what
    :data:`PLANNED_AREA`'s pre-registration gives it and nothing of the run's layout: a reader can re-plan the
    run with a setting changed (chapter 12's exercise 4). ``row`` as :func:`planned_pick` reads it."""
    from .calibration import _check_row
    from .catalog import get_gpu
    from .frameworks import stack_family
    from .run_nodes import plan_network

    row = _check_row(row)              # (TypeError for anything but a run; ValueError naming a bad cell)
    n = int(row.n_gpus)
    gpu = get_gpu(row.gpu)
    prices = None if gpu.price_usd_per_gpu_hour is not None else {gpu.name: 1.0}   # (moves no pick)
    return dict(model=row.model, tokens=1e10, gpus=(gpu.name,), seq=int(row.seq),
                global_batch=int(row.global_batch), max_gpus=n, gpu_counts=(n,),
                precision="fp8-mixed" if row.dtype == "fp8" else "bf16-mixed",
                framework=stack_family(getattr(row, "framework", None), lenient=True),
                kernel_efficiency=efficiency, prices=prices, explain=False, **plan_network(row))


def planned_pick(row, efficiency: float):
    """The layout :func:`~llmsizing.planner.plan` picks for ``row``'s run (a row of :func:`layout_runs`) at
    kernel efficiency ``efficiency``, given what :data:`PLANNED_AREA`'s pre-registration gives it
    (:func:`planned_request`): the row of plan()'s frame (a ``Series``) with the largest MFU on exactly the
    run's GPU count, or ``None`` when no plan fits on that count. ``row`` may be a row of ``itertuples()``, a
    ``Series`` or a dict (read as :func:`~llmsizing.calibration.run_mfu_at` reads it: a ``Series``' ``dtype``
    would shadow the run's)."""
    from .planner import plan

    ask = planned_request(row, efficiency)
    frame = plan(ask.pop("model"), **ask)
    frame = frame[frame["n_gpus"] == ask["gpu_counts"][0]]
    return None if frame.empty else frame.loc[frame["mfu"].astype(float).idxmax()]


def planned_loso_check(runs=None, *, coverage: float = 0.8):
    """The planner's own pick checked by leaving one source out (:data:`PLANNED_AREA`, pre-registered):
    ``(check, per_run)``. ``check`` (:func:`~llmsizing.intervals.loso_check`, two-tailed, pooled, nested) is
    over the runs of :func:`layout_runs` plan() finds a plan for, each predicted at :func:`planned_pick`'s
    MFU at the efficiency fitted without its source (:func:`fold_efficiencies` over **all** the runs of the
    other sources, as :func:`step_loso_check`). ``per_run`` (every run of :func:`layout_runs`): ``planned``,
    ``plan_mfu`` and ``step_mfu`` (the pick's and the published layout's MFU at the held-out efficiency),
    ``pick`` and ``published`` (the two layouts), ``picks`` (distinct picks over every efficiency a fold met),
    ``ratio`` (published / pick MFU), ``low``/``high``, ``inside`` (False where no plan: a miss) and
    ``calibrated`` (module docstring, step 4). The coverage the pre-registration reads is ``inside`` over the
    calibrated runs."""
    if runs is None and isinstance(coverage, float):
        check, df = _default_planned_check(coverage)
        from .intervals import copied_check
        return copied_check(check), df.copy()
    return _planned_loso_check(runs, coverage)


@cache
def _default_planned_check(coverage):
    return _planned_loso_check(None, coverage)


def _planned_loso_check(runs, coverage):
    import numpy as np

    from .calibration import _layout_of, run_mfu_at
    from .frameworks import stack_family
    from .intervals import keyed_calibration, loso_check

    df = layout_runs(runs)
    df["stack_family"] = [stack_family(f, lenient=True) for f in df.get("framework", [None] * len(df))]
    rows, keys = list(df.itertuples()), list(zip(df["generation"], df["dtype"]))
    src, cols = df["source_key"].to_numpy(object), _FoldColumns(df)
    memo = {}

    def pick(i, e):
        if (i, e) not in memo:
            memo[i, e] = planned_pick(rows[i], e)
        return memo[i, e]

    def left_in(train, sub):
        # the rows of every source the fold keeps (a source whose runs have no plan stays in the fit)
        return ~np.isin(src, list(set(src[sub][~np.asarray(train, bool)])))

    # whether a plan fits does not depend on the efficiency (memory only): asked once, at the default
    planned = np.array([pick(i, e) is not None for i, e in
                        enumerate(fold_efficiencies(cols, np.ones(len(df), bool))[k] for k in keys)])
    sub = np.flatnonzero(planned)
    known = keyed_calibration(cols.keys, cols.fits & cols.grouped)

    def fit_predict(train, test):
        eff = fold_efficiencies(cols, left_in(train, sub))
        return [float(np.log(pick(i, eff[keys[i]])["mfu"])) for i in sub[np.asarray(test, bool)]]

    def calibrated(train, test):
        mask = np.zeros(len(df), bool)
        mask[sub[np.asarray(test, bool)]] = True
        return known(left_in(train, sub), mask)

    check = loso_check(np.log(df["implied_mfu"].to_numpy(float)[sub]), src[sub], fit_predict,
                       coverage=coverage, calibrated=calibrated)
    held = {k: fold_efficiencies(cols, src != k) for k in dict.fromkeys(src)}
    eff = [held[s][k] for s, k in zip(src, keys)]
    cal = np.array([known(src != s, np.arange(len(df)) == i)[0] for i, s in enumerate(src)])
    out = {c: np.full(len(df), np.nan) for c in ("plan_mfu", "ratio", "low", "high")}
    out["inside"] = np.zeros(len(df), bool)
    out["calibrated"] = cal
    out["ratio"][sub] = np.exp(check.residuals)
    out["low"][sub], out["high"][sub] = np.exp(check.low_log), np.exp(check.high_log)
    out["inside"][sub] = check.inside
    picks, texts = [], []
    for i in range(len(df)):
        p = pick(i, eff[i])
        out["plan_mfu"][i] = np.nan if p is None else float(p["mfu"])
        texts.append(None if p is None else _layout_text(*(p[c] for c in _PICK)))
        picks.append(len({tuple(memo[j, e][c] for c in _PICK) for j, e in memo
                          if j == i and memo[j, e] is not None}))
    pub = []
    for r in rows:
        par, micro, _, rc = _layout_of(r)
        pub.append(_layout_text(par.tp, par.pp, par.virtual_stages, par.dp, par.cp, micro, par.zero, rc))
    return check, df.assign(planned=planned, efficiency=eff, step_mfu=[run_mfu_at(r, e) for r, e in
                                                                       zip(rows, eff)],
                            pick=texts, published=pub, picks=picks, **out)
