"""Calibration on published runs (chapter 10, "FLOPs, MFU and training time"; issue 21).

Two fits, both on the rows of ``data/published_runs.csv`` marked ``calibration`` (the others are held out to
check them), both written to ``data/`` by ``tools/calibrate.py`` so that the library reads numbers, not a fit,
when it runs (``tests/test_calibration.py`` re-fits and compares):

1. **Kernel efficiency** (``data/kernel_efficiency.csv``), for :func:`~llmsizing.layouts.step_time`: for every
   run whose layout was published, the share of the dense peak its kernels must reach for the step model
   (slowest stage, bubble, exposed communication on the network model) to give the published MFU
   (:func:`run_kernel_efficiency`, by bisection). The generation's value is the median over its runs. Runs
   with context parallelism (``cp > 1``) get a layout and a per-run value too, but stay out of the median
   (:data:`KERNEL_FIT_MAX_CP`): they are the held-out check of the context-parallel step model (issue 23;
   Llama 3 405B's 128K stage must come out within 20% of its published MFU, which fitting on it would make
   circular), and keeping them out leaves every generation's default where the cp = 1 runs put it.
2. **End-to-end MFU** (``data/mfu_model.csv``), the baseline of :func:`~llmsizing.time_cost.training_time`'s
   estimate, which knows no layout (the library states this fit with a stack offset and a term in tokens per
   GPU per step added, :mod:`llmsizing.mfu_inputs`, issue 34; this one stays as the baseline it is compared
   with): ``ln MFU = c[generation, dtype] + a ln(N / 10^10) + b ln(seq / 4096) + r [full recomputation] + w
   [whole-run total]``, least squares over every calibration run. ``r`` is what full recomputation costs (its
   extra forward is work the model does not need); ``w`` what a whole run's GPU-hour total loses against a
   measured steady state (restarts, evaluation, stragglers). The range (issue 34) is an 80% conformal
   interval on the log residuals of leave-one-source-out fits (:func:`mfu_loso_check`,
   :mod:`llmsizing.intervals`): each paper or benchmark is left out in turn, the model refitted on the
   calibration runs of the others predicts all its runs, and the stated factors ``low``/``high`` are the
   conformal bounds of those residuals (each source weighing the same), for steady-state figures and for
   whole-run totals apart where a kind has enough sources (:data:`INTERVAL_STRATA`). Its coverage is measured
   the same way, nested: each source's runs against the interval computed without that source. The region the
   runs cover (parameters, sequence lengths, GPU counts) is kept too:
   :func:`~llmsizing.time_cost.training_time` warns outside it.

The columns each fit reads and the checks of a runs table (:func:`_check_runs`, :func:`_check_row`) live in
:mod:`llmsizing.calibration_checks` (session 24); their names stay importable from here.
"""

from __future__ import annotations

import math
from functools import cache

# the columns each fit reads and the checks of a runs table live in calibration_checks; their names stay
# importable from here
from .calibration_checks import (_POSITIVE_OR_BLANK, KERNEL_FIT_COLUMNS, LAYOUT_COLUMNS,  # noqa: F401
                                 MFU_FIT_COLUMNS, _blank, _check_cell, _check_row, _check_runs, _row_name)


#: Runs with a context-parallel degree above this stay out of the kernel-efficiency median (held out).
KERNEL_FIT_MAX_CP = 1

#: How each framework's context parallelism exchanges K and V (:data:`~llmsizing.parallel.CP_COMMS`), by the
#: start of ``data/published_runs.csv``'s ``framework``: Llama 3 all-gathers K and V (Dubey et al. 2024, Sec.
#: 3.3.2); NeMo and Megatron-LM default to the ring (``--cp-comm-type p2p``), which any other framework is
#: assumed to use.
CP_COMM_BY_FRAMEWORK = {"Meta internal": "all_gather"}


def cp_comm_of(framework) -> str:
    """The ``cp_comm`` a published run's ``framework`` uses (:data:`CP_COMM_BY_FRAMEWORK`, else ``"p2p"``)."""
    name = framework if isinstance(framework, str) else ""
    return next((v for k, v in CP_COMM_BY_FRAMEWORK.items() if name.startswith(k)), "p2p")


#: The attention kernel a published run's ``framework`` ran on Hopper (:func:`attention_kernel_of`):
#: Megatron-Core and NeMo call Transformer Engine, whose fused attention is cuDNN's. Every other framework
#: gets the generation's default (llm-foundry and torchtitan call flash-attn 2 or PyTorch SDPA's
#: FlashAttention-2 backend; Meta does not say what its Llama 3 stack ran).
ATTENTION_KERNEL_BY_FRAMEWORK = {"megatron-core": "cudnn", "nemo": "cudnn"}
#: ... and the runs that predate FlashAttention (Dao et al. 2022), by their exact ``framework`` cell: the
#: Megatron-LM runs of 2021-22 (Narayanan et al. 2021, Korthikanti et al. 2022) ran ``CoreAttention``
#: unfused with Megatron's default attention dropout of 0.1; Megatron-DeepSpeed's (MT-NLG 2021, BLOOM
#: 2022) the same code, taken without dropout (not stated for both: the fewer passes, a lower bound)
#: (:func:`~llmsizing.kernels.unfused_attention_efficiency`)
UNFUSED_ATTENTION_BY_FRAMEWORK = {"megatron": "unfused-dropout", "megatron-deepspeed": "unfused"}


def attention_kernel_of(framework, gpu) -> str | None:
    """The attention kernel of a run's ``framework`` (:data:`UNFUSED_ATTENTION_BY_FRAMEWORK`, else
    :data:`ATTENTION_KERNEL_BY_FRAMEWORK`) if ``gpu``'s generation has it, else ``None`` (the generation's
    default)."""
    from .kernels import attention_kernels

    name = framework if isinstance(framework, str) else ""
    kernel = UNFUSED_ATTENTION_BY_FRAMEWORK.get(name.strip().lower()) or \
        next((v for k, v in ATTENTION_KERNEL_BY_FRAMEWORK.items() if name.startswith(k)), None)
    return kernel if kernel in attention_kernels(gpu) else None


def tp_overlap_of(row) -> bool:
    """Whether ``row``'s run hid its tensor-parallel collectives behind compute (``async_tp`` of
    :func:`~llmsizing.layouts.step_time`): its ``tp_comm_overlap`` cell of ``data/published_runs.csv`` says
    "yes" where the run's source or its framework's published recipe states it (Megatron-LM's
    ``--tp-comm-overlap`` in the README's benchmark configuration; torchtitan's AsyncTP rows). Blank (not
    stated) is no overlap."""
    v = getattr(row, "tp_comm_overlap", None)
    return isinstance(v, str) and v.strip().lower() == "yes"


def tp_backward_overlap_of(row) -> bool:
    """Whether ``row``'s run hid the backward's tensor-parallel collectives that Megatron-LM's column-parallel
    Linear layers launch beside their dgrad and wgrad GEMMs (``tp_backward_overlap`` of
    :func:`~llmsizing.layouts.step_time`; :data:`~llmsizing.exposure.TP_BACKWARD_ASYNC`): its
    ``tp_comm_overlap`` cell says "backward" where the run's framework is Megatron-LM (or NeMo on it) of a
    version that does it on its default path (Megatron-LM since 2022; the row's note names what it stands on).
    A run marked "yes" hides all of its TP collectives (:func:`tp_overlap_of`) and needs no more."""
    v = getattr(row, "tp_comm_overlap", None)
    return isinstance(v, str) and v.strip().lower() == "backward"


def _layout_of(row):
    """``(Parallel, micro_batch, grad_accum, recompute)`` of a published run, or ``None`` when its layout
    was not published or does not add up (``tp x cp x pp x dp`` must be its GPU count). A blank micro-batch is
    taken as 1, a blank ZeRO stage as 0, a blank context-parallel degree as 1, a blank recomputation as none;
    with interleaving over a layer count the chunks do not divide, the embedding and the loss each take a
    layer's place where that makes them divide (``account_for_embedding``, ``account_for_loss``), as Llama 3
    did, else the first and last stages are made shorter (:func:`~llmsizing.parallel.uneven_stages`).
    Context parallelism exchanges K and V as the run's framework does (:func:`cp_comm_of`)."""
    import pandas as pd

    from .catalog import get_model
    from .parallel import Parallel, uneven_stages

    def num(x, default):
        return default if pd.isna(x) else int(x)

    if pd.isna(row.dp) or pd.isna(row.global_batch):
        return None
    tp, pp, dp, cp = num(row.tp, 1), num(row.pp, 1), int(row.dp), num(row.cp, 1)
    if pd.notna(row.n_gpus) and tp * cp * pp * dp != int(row.n_gpus):
        return None
    if cp > 1 and int(row.seq) % (2 * cp):
        return None
    micro = num(row.micro_batch, 1)
    accum, rest = divmod(int(row.global_batch), micro * dp)
    if rest or accum < 1:
        return None
    zero = num(row.zero, 0)
    v = num(row.virtual_stages, 1)
    stages, edges = None, {}
    layers = get_model(row.model).layers
    if v > 1 and (layers + 2) % (pp * v) == 0 and layers % (pp * v):
        # the embedding and the loss each take a layer's place (Megatron-LM's --account-for-embedding- and
        # --account-for-loss-in-pipeline-split; Llama 3's first and last stages, Dubey et al. Sec. 3.3.2)
        edges = dict(account_for_embedding=True, account_for_loss=True)
    elif v > 1 and layers % (pp * v):         # else the first and last stages a layer or so short
        base = -(-layers // pp)
        short = base * pp - layers
        stages = uneven_stages(layers, pp, first=base - short + short // 2, last=base - short // 2)
    par = Parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=tp > 1, virtual_stages=v, stage_layers=stages, cp=cp,
                   cp_comm=cp_comm_of(row.framework) if cp > 1 else "p2p", **edges)
    recompute = "none" if pd.isna(row.recompute) else str(row.recompute)
    return par, micro, accum, recompute


def run_mfu_at(row, efficiency: float) -> float:
    """The MFU :func:`~llmsizing.layouts.step_time` gives ``row``'s published layout (:func:`_layout_of`,
    which must not be ``None``) at kernel efficiency ``efficiency``, with the attention kernel of the row's
    framework (:func:`attention_kernel_of`), its TP overlap (:func:`tp_overlap_of`) and its node
    (:func:`~llmsizing.run_nodes.run_node`): the one call :func:`run_kernel_efficiency` inverts and
    :mod:`llmsizing.step_intervals` predicts with. ``row`` may be a row of ``itertuples()``, a ``Series`` or a
    dict (a ``Series``' own ``dtype`` attribute would otherwise shadow the run's ``dtype`` field and price an
    FP8 run in BF16)."""
    import pandas as pd

    from .layouts import step_time
    from .run_nodes import run_node

    if isinstance(row, (pd.Series, dict)):
        row = _check_row(row)
    par, micro, accum, recompute = _layout_of(row)
    return step_time(row.model, row.gpu, par, batch=micro, seq=int(row.seq), grad_accum=accum,
                     kernel_efficiency=efficiency, recompute=recompute, node=run_node(row),
                     dtype="fp8" if row.dtype == "fp8" else "bf16", async_tp=tp_overlap_of(row),
                     tp_backward_overlap=tp_backward_overlap_of(row),
                     attention_kernel=attention_kernel_of(getattr(row, "framework", None), row.gpu)).mfu


def run_kernel_efficiency(row) -> float | None:
    """The kernel efficiency at which :func:`~llmsizing.layouts.step_time` (with the attention kernel of the
    row's framework, :func:`attention_kernel_of`) gives ``row``'s published MFU
    (``row.implied_mfu``, a row of :func:`~llmsizing.time_cost.published_runs`), or ``None`` when the layout
    is unknown or even kernels at 100% of peak would not reach it."""
    row = _check_row(row)
    run = getattr(row, "run", None)
    where = "row" + (f" ({run!r})" if isinstance(run, str) else "")
    try:      # each cell is valid; together they may still be no layout the model can run
        if _layout_of(row) is None:
            return None

        def mfu(e):
            return run_mfu_at(row, e)

        top = mfu(1.0)
    except (ValueError, TypeError) as e:
        raise type(e)(f"{where}: its layout (columns tp, pp, dp, cp, virtual_stages, zero, micro_batch, "
                      f"global_batch, seq, recompute) cannot run {row.model} on {row.gpu}: {e}") from None
    lo, hi = 0.01, 1.0
    if top < row.implied_mfu:
        return None
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mfu(mid) < row.implied_mfu else (lo, mid)
    return (lo + hi) / 2


def run_flat_efficiency(row, kernel_efficiency: float) -> float:
    """The one share of the dense peak at which the hardware FLOPs of ``row``'s stage with the most FLOPs
    (the stage a flat rate makes the slowest) take the step's compute time that
    :func:`~llmsizing.layouts.step_time` gives at ``kernel_efficiency`` (its slowest stage by time, with
    its attention, GEMM and memory-bound terms, folded into one number): the flat efficiency the step model
    charged before issue 34 (:func:`~llmsizing.hardware.flat_kernel_efficiency`; fine-tuning charged it
    until round 4)."""
    from .catalog import get_model
    from .flops import stage_flops_per_token
    from .layouts import step_time
    from .run_nodes import run_node

    row = _check_row(row)
    par, micro, accum, recompute = _layout_of(row)
    dtype = "fp8" if row.dtype == "fp8" else "bf16"
    st = step_time(row.model, row.gpu, par, batch=micro, seq=int(row.seq), grad_accum=accum,
                   kernel_efficiency=kernel_efficiency, recompute=recompute, dtype=dtype, node=run_node(row),
                   async_tp=tp_overlap_of(row), tp_backward_overlap=tp_backward_overlap_of(row),
                   attention_kernel=attention_kernel_of(getattr(row, "framework", None), row.gpu))
    stage = max(stage_flops_per_token(get_model(row.model), par, seq=int(row.seq), recompute=recompute))
    return stage * micro * int(row.seq) * accum / (par.tp * par.cp) / (st.peak_flops * st.compute_s)


def generation_of(gpu: str, dtype: str) -> str:
    """The generation row of ``data/kernel_efficiency.csv`` that names ``gpu`` (``"uncalibrated"`` if
    none)."""
    from .hardware import kernel_efficiency_row

    return kernel_efficiency_row(gpu, dtype).generation


def fit_kernel_efficiency(runs=None):
    """Per run (``runs``: :func:`~llmsizing.time_cost.published_runs`, default all of them): the generation,
    dtype and fitted kernel efficiency (NaN where the layout is unknown), and ``kernel_fit``, whether the run
    enters the median (a calibration run with ``cp <=`` :data:`KERNEL_FIT_MAX_CP`), as a DataFrame; and per
    (generation, dtype) the median over those runs: ``(per_run, per_generation)``; ``flat_efficiency`` and
    ``flat`` are the same runs' :func:`run_flat_efficiency`. On the default table the per-run bisections run
    once per process (tools/calibrate.py and :func:`~llmsizing.step_intervals.layout_runs` both ask for them);
    each caller gets its own copies."""
    if runs is None:
        df, fit = _default_kernel_efficiency()
        return df.copy(), fit.copy()
    return _fit_kernel_efficiency(runs)


@cache
def _default_kernel_efficiency():
    return _fit_kernel_efficiency(None)


def _fit_kernel_efficiency(runs):
    import numpy as np

    df = _check_runs(runs, KERNEL_FIT_COLUMNS)
    df["dtype"] = np.where(df["dtype"] == "fp8", "fp8", "bf16")
    df["generation"] = [generation_of(g, d) for g, d in zip(df["gpu"], df["dtype"])]
    effs = []
    for r in df.itertuples():
        try:
            e = run_kernel_efficiency(r)
        except (ValueError, TypeError) as exc:      # (the row's layout: name the table's row)
            msg = str(exc)
            raise type(exc)(f"runs row {r.Index!r}{msg[3:]}" if msg.startswith("row") else
                            f"runs row {r.Index!r}: {msg}") from None
        effs.append(np.nan if e is None else e)
    df["kernel_efficiency"] = effs
    df["flat_efficiency"] = [np.nan if np.isnan(e) else run_flat_efficiency(r, e)
                             for r, e in zip(df.itertuples(), effs)]
    df["kernel_fit"] = df["calibration"] & (df["cp"].fillna(1) <= KERNEL_FIT_MAX_CP)
    kept = df[df["kernel_fit"] & df["kernel_efficiency"].notna()].groupby(["generation", "dtype"])
    fit = kept["kernel_efficiency"].agg(["median", "count", "min", "max"])
    fit["flat"] = kept["flat_efficiency"].median()
    return df, fit


#: The reference point of the end-to-end model's terms: 10B parameters, 4,096 tokens.
N_REF, SEQ_REF = 1e10, 4096

#: What the width of the training MFU range may depend on (:func:`~llmsizing.intervals.loso_check`'s
#: ``strata``): the ``kind`` of figure, a measured steady state or a whole run's GPU-hour total, whose
#: restarts, evaluation and stragglers vary from run to run; a kind with too few sources for bounds of its
#: own (:func:`~llmsizing.intervals.min_units`) takes the pooled range.
INTERVAL_STRATA = "kind"

#: The shared terms of the end-to-end model, in the order of ``data/mfu_model.csv``'s columns.
TERMS = ("size_exponent", "seq_exponent", "full_recompute", "whole_run")


def _design(df, groups):
    return _design_of(_FitColumns(df), groups)


def _design_of(cols, groups, keys=None):
    """The design matrix of the rows ``cols`` (:class:`_FitColumns`): one indicator column per group of
    ``groups`` (a row's group is its (generation, dtype), or its entry of ``keys``), then :data:`TERMS`."""
    import numpy as np

    x = np.zeros((len(cols.keys), len(groups) + len(TERMS)))
    for i, key in enumerate(cols.keys if keys is None else keys):
        x[i, groups.index(key)] = 1.0
    x[:, -4] = np.log(cols.n_params / N_REF)
    x[:, -3] = np.log(cols.seq / SEQ_REF)
    x[:, -2] = cols.full_recompute
    x[:, -1] = cols.whole_run
    return x


class _FitColumns:
    """What the MFU fit reads of each row of a prepared table (:func:`_prepared`), as arrays in the table's
    order; :meth:`rows` selects some of them. A leave-one-source-out check reads the table once and each
    fold selects its rows from these arrays, not from the table: the same values in the same order, so the
    same fit, bit for bit, for a fraction of the time."""

    def __init__(self, df=None):
        if df is None:
            return
        self.keys = list(zip(df["generation"], df["dtype"]))
        self.n_params = df["n_params"].to_numpy(float)
        self.seq = df["seq"].to_numpy(float)
        self.full_recompute = (df["recompute"] == "full").to_numpy(float)
        self.whole_run = (df["kind"] == "pretraining-total").to_numpy(float)
        self.calibration = df["calibration"].astype(bool).to_numpy(bool)
        self.implied_mfu = df["implied_mfu"].to_numpy(float)

    def rows(self, index):
        """The rows at ``index`` (positions, ascending)."""
        out = _FitColumns()
        out.keys = [self.keys[i] for i in index]
        for name in ("n_params", "seq", "full_recompute", "whole_run", "calibration", "implied_mfu"):
            setattr(out, name, getattr(self, name)[index])
        return out


def _prepared(runs):
    """``runs`` checked (:func:`_check_runs`) with the fit's columns added: ``generation``, ``n_params`` and
    ``source_key`` (:func:`~llmsizing.intervals.source_key`)."""
    import numpy as np

    from .catalog import get_model
    from .intervals import source_key

    df = _check_runs(runs, MFU_FIT_COLUMNS)
    df["dtype"] = np.where(df["dtype"] == "fp8", "fp8", "bf16")
    df["generation"] = [generation_of(g, d) for g, d in zip(df["gpu"], df["dtype"])]
    df["n_params"] = [get_model(m).n_params for m in df["model"]]
    df["source_key"] = [source_key(s) for s in df["source"]]
    return df


def _fit_beta(df, where: str = ""):
    """``(groups, beta)``: least squares over the calibration rows of ``df`` (a table or its
    :class:`_FitColumns`), coefficients rounded to the 4
    decimals ``data/mfu_model.csv`` stores."""
    import numpy as np

    cols = df if isinstance(df, _FitColumns) else _FitColumns(df)
    cal = cols.rows(np.flatnonzero(cols.calibration))
    if not cal.keys:
        raise ValueError(f"runs has no row with calibration True{where}: there is nothing to fit the MFU "
                         "model on")
    groups = sorted(set(cal.keys))
    beta, *_ = np.linalg.lstsq(_design_of(cal, groups), np.log(cal.implied_mfu), rcond=None)
    return groups, np.round(beta, 4)


def _predict_log(df, groups, beta):
    """Log MFU of each row of ``df`` (a table or its :class:`_FitColumns`) by a fit ``(groups, beta)``; a
    (generation, dtype) the fit has not seen takes the lower median intercept of the fit's groups of its
    dtype, as :func:`~llmsizing.mfu.mfu_estimate` does for a GPU generation without published runs."""

    cols = df if isinstance(df, _FitColumns) else _FitColumns(df)
    intercepts = dict(zip(groups, beta[:len(groups)]))
    x = _design_of(cols, [("", "")], keys=[("", "")] * len(cols.keys))
    out = x[:, 1:] @ beta[len(groups):]
    for i, key in enumerate(cols.keys):
        if key in intercepts:
            c = intercepts[key]
        else:
            same = sorted(v for k, v in intercepts.items() if k[1] == key[1]) or sorted(intercepts.values())
            c = same[(len(same) - 1) // 2]
        out[i] += c
    return out


def mfu_loso_check(runs=None, *, coverage: float = 0.8, strata: str | None = INTERVAL_STRATA):
    """The end-to-end MFU model checked by leaving one source out (module docstring, fit 2;
    :func:`~llmsizing.intervals.loso_check`, nested): ``(check, runs)``, ``runs`` with the columns the fit
    adds. Each source's runs are predicted by the model refitted on the calibration runs of the other
    sources; ``strata`` (a column of ``runs``, default :data:`INTERVAL_STRATA`, or ``None``) lets the width
    differ between its values. On the default table the refits run once per process (tools/calibrate.py
    and :func:`fit_mfu_model` both ask for them); each caller gets its own copy."""
    from .intervals import copied_check

    if runs is None and isinstance(coverage, float) and (strata is None or isinstance(strata, str)):
        check, df = _default_mfu_loso_check(coverage, strata)
        return copied_check(check), df.copy()
    return _mfu_loso_check(runs, coverage, strata)


@cache
def _default_mfu_loso_check(coverage, strata):
    return _mfu_loso_check(None, coverage, strata)


def _mfu_loso_check(runs, coverage, strata):
    import numpy as np

    from .intervals import keyed_calibration, loso_check

    df = _prepared(runs)
    src = df["source_key"].to_numpy(object)
    cols = _FitColumns(df)          # (read once: each fold selects its rows from these arrays)

    def fit_predict(train, test):
        left_out = ", ".join(dict.fromkeys(src[~train]))
        groups, beta = _fit_beta(cols.rows(np.flatnonzero(train)), f" outside {left_out}")
        return _predict_log(cols.rows(np.flatnonzero(test)), groups, beta)

    if strata is not None and strata not in df.columns:
        raise ValueError(f"strata must be a column of runs or None, got {strata!r}")
    try:
        labels = None
        if strata == "kind":         # as the fit's whole-run term reads it: a total, or else a steady state
            labels = np.where(df["kind"] == "pretraining-total", "pretraining-total", "steady-state")
        elif strata is not None:
            labels = df[strata].astype(str).to_numpy(object)
        check = loso_check(np.log(df["implied_mfu"].to_numpy(float)), src, fit_predict, coverage=coverage,
                           strata=labels, calibrated=keyed_calibration(cols.keys, cols.calibration))
    except ValueError as e:
        msg = str(e)
        raise ValueError(msg if msg.startswith("runs") else f"runs: {msg}") from None
    return check, df


def fit_mfu_model(runs=None):
    """The end-to-end MFU model (module docstring, fit 2): ``(coefficients, per_run)``. ``coefficients`` has
    one row per (generation, dtype) with its intercept, the shared size and sequence exponents, the range's
    factors ``low``/``high`` for a steady state and ``low_whole_run``/``high_whole_run`` for a whole run's
    total (80% leave-one-source-out conformal bounds, :func:`mfu_loso_check`, widened to hold the central
    estimate itself and rounded outwards; the same for every generation) and the region
    of that generation's runs; ``per_run`` has each run's predicted MFU and residual ``implied / predicted``
    (in-sample), and ``loso_residual``, the same ratio for the model fitted without the run's source."""
    import numpy as np
    import pandas as pd

    check, df = mfu_loso_check(runs)
    groups, beta = _fit_beta(df)
    df["loso_residual"] = np.exp(check.residuals)
    known = df[[k in groups for k in zip(df["generation"], df["dtype"])]].copy()
    known["predicted_mfu"] = np.exp(_design(known, groups) @ beta)
    known["residual"] = known["implied_mfu"] / known["predicted_mfu"]
    rows = []
    for i, (gen, dtype) in enumerate(groups):
        mine = df[(df["generation"] == gen) & (df["dtype"] == dtype)]
        low, high = check.stated("steady-state")
        low_w, high_w = check.stated("pretraining-total")
        rows.append({"generation": gen, "dtype": dtype, "intercept": beta[i],
                     **{t: beta[len(groups) + j] for j, t in enumerate(TERMS)},
                     "low": math.floor(min(low, 1.0) * 1e4) / 1e4,
                     "high": math.ceil(max(high, 1.0) * 1e4) / 1e4, "runs": len(mine),
                     "calibration_runs": int(mine["calibration"].sum()),
                     "min_params": float(mine["n_params"].min()), "max_params": float(mine["n_params"].max()),
                     "min_seq": int(mine["seq"].min()), "max_seq": int(mine["seq"].max()),
                     "min_gpus": float(mine["n_gpus"].min()) if mine["n_gpus"].notna().any() else math.nan,
                     "max_gpus": float(mine["n_gpus"].max()) if mine["n_gpus"].notna().any() else math.nan,
                     "low_whole_run": math.floor(min(low_w, 1.0) * 1e4) / 1e4,
                     "high_whole_run": math.ceil(max(high_w, 1.0) * 1e4) / 1e4})
    return pd.DataFrame(rows), known


from ._compat import retire as _retire  # noqa: E402

#: ``MIN_GROUP_RUNS`` (a group with fewer runs took its range from all runs) set the old envelope ranges.
__getattr__ = _retire(__name__, {"MIN_GROUP_RUNS": (4, "INTERVAL_STRATA and llmsizing.intervals.min_units")})
