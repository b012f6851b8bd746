"""Part III, time and money (chapters 10-14): how long a run takes, what it costs, and how right the answers
are. Chapter 10, published runs against the calibrated MFU and a run's days and cost against the GPU count
(:func:`render_mfu_calibration`, :func:`render_training_time`) and the compute-optimal model size
(:func:`render_compute_optimal`); chapter 11, the cost of the job by GPU type, over price x MFU, and against
the GPU count (:func:`render_cost_by_gpu`, :func:`render_cost_sensitivity`, :func:`render_cost_vs_gpus`), and
goodput against the GPU count (:func:`render_goodput`). Chapter 12's figure, the planner's answer
(:func:`render_plan`), lives in :mod:`~llmsizing.charts.time_money_plan`; chapter 13's, predicted against
published GPU-hours (:func:`render_prediction_check`), and chapter 14's, the seed articles' claims against the
library (:func:`render_seed_audit`), in :mod:`~llmsizing.charts.time_money_checks`. This module imports every
name of theirs and re-exports it (issue 32: each module under 600 lines).

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from ..catalog import get_model, price_note
from ..plan_space import default_cp_degrees
from .base import (DPI, GPU_COLORS, FixedView, View, _log_axis, _log_scale, _short_number, _tokens, _usd,
                   figure_axes, new_figure)
# chapter 12's figure (the planner's answer) lives in time_money_plan, chapters 13-14's (the library checked)
# in time_money_checks; every name of theirs is still here
from .time_money_plan import (FRONT_LW, OWN_FRONT_LW, PLAN_GPUS, PLAN_LEGEND_PT, plan_notes,  # noqa: F401
                              render_plan, _PLAN_GROUPS_KEEP, _PLAN_GROUPS_KEPT, _cp_text, _deadline_lines,
                              _front_rows, _number_dtype, _plan_groups, _plan_label, _range_note_lines,
                              _row_type, _table_key, _GROUPS_COLUMNS, _PointCloud, _groups_key, _values_bytes,
                              _vp_text, _bare, _first_of_each, _column_arrays, _retain, _step_time_update,
                              _PlanRow, _codes_bytes, _gpu_codes, _plan_row, _chosen_title)
from .time_money_checks import (_AUDIT_STYLES, _Same, _judged, render_prediction_check,  # noqa: F401
                                render_seed_audit)


# =========================================================================== chapter 10: FLOPs and time
#: Colours of the calibrated (generation, dtype) groups in :func:`render_mfu_calibration`.
CALIBRATION_COLORS = {("ampere", "bf16"): "#0072B2", ("hopper", "bf16"): "#D55E00",
                      ("hopper", "fp8"): "#CC79A7", ("blackwell", "fp8"): "#009E73"}
#: Smallest font of :func:`render_mfu_calibration`, in points (read38b: 150 run names at 6 pt; now none).
CALIBRATION_MIN_PT = 8


def render_mfu_calibration() -> View:
    """Every published run against the calibrated end-to-end MFU model
    (:func:`~llmsizing.time_cost.mfu_residuals`): top, the MFU each run implies against the one the model
    predicts for it (the diagonal is a perfect prediction); bottom, each run's residual (implied / predicted,
    log axis) as a dot in its GPU generation and dtype's strip, with the generation's 80% range shaded (one
    range per generation, the same for a steady state and a whole run's total). Filled dots are calibration
    runs, open ones held out. Runs are named in the summary (those outside their range) and in chapter 10's
    table, not on the axis (read38b: 150 names at 6 pt, 1,810 px tall). Chapter 10."""
    import numpy as np

    from ..hardware import generation_name as gen
    from ..mfu_inputs import range_factors
    from ..time_cost import mfu_model_table, mfu_residuals

    df = mfu_residuals()
    ranges = mfu_model_table().set_index(["generation", "dtype"])
    pt = CALIBRATION_MIN_PT

    def _steady_range(ranges, key) -> tuple:
        """The 80% range stated for group ``key``: its generation's; with no row of its own (MI300X, B200 in
        FP8), what an estimate there shows, the widest of any row (:func:`~..mfu_inputs.range_factors`)."""
        return ((ranges.loc[key, "low"], ranges.loc[key, "high"]) if key in ranges.index
                else range_factors(*key))

    groups = sorted(set(zip(df["generation"], df["dtype"])),
                    key=lambda k: (-len(df[(df["generation"] == k[0]) & (df["dtype"] == k[1])]), k))
    # fixed inches: the scatter on top, one 0.42-inch strip per group below
    w_in, top_in, strips_in = 8.6, 3.5, 0.42 * len(groups)
    h_in = 0.25 + top_in + 0.75 + strips_in + 0.6
    fig = Figure(figsize=(w_in, h_in), dpi=DPI)
    ax = fig.add_axes([1.9 / w_in, (1.35 + strips_in) / h_in, 4.4 / w_in, top_in / h_in])
    ax_r = fig.add_axes([1.9 / w_in, 0.6 / h_in, 6.55 / w_in, strips_in / h_in])

    grey = iter("s^Dv<>ph")        # top, implied against predicted; the grey groups: one marker each
    markers = {}
    for key in groups:
        sub = df[(df["generation"] == key[0]) & (df["dtype"] == key[1])]
        c = CALIBRATION_COLORS.get(key, "0.4")
        m = markers[key] = "o" if key in CALIBRATION_COLORS else next(grey, "o")
        # the legend shows the group's calibration marker (filled), or its held-out one (open) if it has none
        shown = bool(sub["calibration"].any())
        for cal, face in ((True, c), (False, "white")):
            part = sub[sub["calibration"] == cal]
            ax.plot(part["predicted_mfu"] * 100, part["implied_mfu"] * 100, ls="none", marker=m, ms=5,
                    mec=c, mfc=face, label=f"{gen(key[0])} {key[1].upper()}" if cal == shown else None)
    most = df[["implied_mfu", "predicted_mfu"]].to_numpy().max()
    top = max(65, 5 * np.ceil(most * 20 + 0.2))        # the axes hold every dot (A100 runs reach 72%)
    ax.plot([10, top], [10, top], color="0.3", lw=0.8, ls="--")
    ax.set(xlim=(10, top), ylim=(10, top))
    ax.set_xlabel("predicted MFU (%)", fontsize=pt + 1)
    ax.set_ylabel("implied MFU (%)", fontsize=pt + 1)
    ax.tick_params(labelsize=pt)
    ax.legend(fontsize=pt, frameon=False, loc="upper left", bbox_to_anchor=(1.02, 1.0),
              title="filled: calibration\nopen: held out", title_fontsize=pt)
    ax.spines[["top", "right"]].set_visible(False)

    # ---- bottom: one strip per group, its runs' residuals as dots, with the group's range shaded
    names = []
    for i, key in enumerate(groups):
        sub = df[(df["generation"] == key[0]) & (df["dtype"] == key[1])].sort_values("residual")
        c = CALIBRATION_COLORS.get(key, "0.4")
        lo, hi = _steady_range(ranges, key)        # the generation's 80% range
        ax_r.fill_betweenx([i - 0.42, i + 0.42], lo, hi, color=c, alpha=0.13, lw=0)
        # neighbours in residual order take five heights in turn, so that close dots stay apart
        dy = ((np.arange(len(sub)) % 5) - 2) * 0.13
        for yy, v, cal in zip(i + dy, sub["residual"], sub["calibration"]):
            ax_r.plot([v], [yy], ls="none", marker=markers[key], ms=5, mec=c, mfc=c if cal else "white")
        say = (f"range x{lo:.2f} to x{hi:.2f}" if key in ranges.index   # (right of every dot: x1.54)
               else f"stand-in, no calibrated range\n(shaded: x{lo:.2f} to x{hi:.2f})")
        ax_r.text(1.72, i, say, fontsize=pt, color=c, va="center")
        names.append(f"{gen(key[0])} {key[1].upper()}\n{len(sub)} run{'s' * (len(sub) != 1)}, "
                     f"{int((~sub['inside']).sum())} outside")
    ax_r.set_yticks(range(len(groups)), names, fontsize=pt)
    for label, key in zip(ax_r.get_yticklabels(), groups):
        label.set_color(CALIBRATION_COLORS.get(key, "0.3"))
    ax_r.set(ylim=(len(groups) - 0.5, -0.5), xscale="log", xlim=(0.4, 3.6))
    ax_r.xaxis.set_minor_locator(NullLocator())
    ticks = [0.5, 0.67, 0.8, 1, 1.25, 1.5]          # (right of x1.6: the ranges' column)
    ax_r.set_xticks(ticks, [f"x{t:g}" for t in ticks], fontsize=pt)
    ax_r.axvline(1, color="0.3", lw=0.8, ls="--")
    ax_r.set_xlabel("implied / predicted MFU (log scale); shaded: the generation's 80% range", size=pt + 1)
    ax_r.spines[["top", "right"]].set_visible(False)

    lines = [f"{int(df['inside'].sum())} of {len(df)} published runs inside their 80% range, in sample "
             f"({int(df['calibration'].sum())} calibration, {int((~df['calibration']).sum())} held out)"]
    for key in groups:
        sub = df[(df["generation"] == key[0]) & (df["dtype"] == key[1])]
        lo, hi = _steady_range(ranges, key)
        spread = (f"{len(sub)} runs, residuals x{sub['residual'].min():.2f} to x{sub['residual'].max():.2f}"
                  if len(sub) != 1 else f"1 run, residual x{sub['residual'].iloc[0]:.2f}")   # (B200 BF16)
        lines.append(f"{gen(key[0])} {key[1]}: {spread}, range x{lo:.2f} to x{hi:.2f} (width {hi / lo:.2f}x)")
    lines.append("outside their range (every run is in the table above):")
    for r in df[~df["inside"]].sort_values("residual").itertuples():
        lines.append(f"  {r.run}: implied {r.implied_mfu:.1%}, predicted {r.predicted_mfu:.1%}, "
                     f"x{r.residual:.2f}{'' if r.calibration else ' (held out)'}")
    return View(fig, "\n".join(lines))


TIME_GPU_COUNTS = (1, 8, 64, 512, 4096, 32768)


def _mfu_kind(t, mfu) -> str:
    """How a summary names the MFU of run ``t``: given, its layout's step (a mixture of experts, issue 35), or
    the calibrated estimate."""
    return "a given " if mfu is not None else (
        "its layout's step " if t.mfu_source == "step_time of the layout" else "the calibrated ")


def fewest_holding(model, gpu, seq: int) -> int | None:
    """Where :func:`render_training_time`'s shading ends: the fewest ``gpu`` holding a step of one sequence
    with full recomputation (:func:`~llmsizing.fewest_gpus.min_gpus`), or None (none up to its max)."""
    from ..fewest_gpus import min_gpus

    try:
        return min_gpus(model, gpu, batch=1, seq=seq, recompute="full").gpus
    except ValueError:
        return None


def _fits(model, gpu, n_gpus: int, seq: int) -> bool:
    from ..fewest_gpus import fits_on
    return fits_on(model, gpu, n_gpus, seq=seq)


def render_training_time(model="llama-3-70b", tokens: float = 1e12, gpu: str = "H100 SXM", seq: int = 8192,
                         mfu: float | None = None, n_gpus: int = 1024, counts=TIME_GPU_COUNTS, *,
                         into: Figure | None = None, fits=None, fewest=None) -> View:
    """Days (left) and cost (right) of training ``model`` on ``tokens`` tokens against the GPU count, with the
    MFU range as a band (:func:`~llmsizing.time_cost.training_time`); ``n_gpus`` is marked. At a fixed MFU the
    cost does not depend on the GPU count: more GPUs buy time, not a cheaper run. Chapter 10.

    A count on which no layout holds a step of one ``seq``-token sequence, even with full recomputation
    (:func:`~llmsizing.fewest_gpus.fits_on`), is a run that cannot run: it is drawn as a grey cross (artist
    gid ``"does-not-fit"``), outside the line and the band (gid ``"runs"``), with the counts below the fewest
    GPUs that hold a step (:func:`~llmsizing.fewest_gpus.min_gpus`) shaded, and the summary says so.
    ``fits(model, gpu, n_gpus, seq)`` and ``fewest(model, gpu, seq)`` answer those two (default
    :func:`~llmsizing.fewest_gpus.fits_on` and :func:`fewest_holding`): chapter 10's widget passes ones that
    keep their answers, which depend on memory alone, so that a move of the tokens, the MFU or the GPU count
    searches no layout again (issue 38; ``tests/test_ch10_fit_marks.py``)."""
    import numpy as np

    from .._validate import check_int, check_sequence
    from ..fewest_gpus import MIN_GPUS_MAX
    from ..time_cost import training_time

    fits = _fits if fits is None else fits
    fewest_of = fewest_holding if fewest is None else fewest

    counts = sorted({check_int("counts[i]", c) for c in check_sequence("counts", counts, example="(8, 64)")}
                    | {check_int("n_gpus", n_gpus)})
    runs = [training_time(model, tokens=tokens, gpu=gpu, n_gpus=n, seq=seq, mfu=mfu) for n in counts]
    t = runs[counts.index(n_gpus)]
    ok = np.array([fits(model, gpu, n, seq) for n in counts])
    fewest = fewest_of(model, gpu, seq)                  # where the shading ends (None: nothing up to 65,536)
    def build(fig):                                      # fixed margins: a widget redraw skips layout passes
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.16, top=0.91, wspace=0.32)
        return fig.subplots(1, 2)

    fig, (ax, ax2) = figure_axes(7.6, 3.2, into, ("training time",), build, keep_log=((0, "xy"), (1, "xy")))
    x = np.array(counts, dtype=float)
    for a, key, label in ((ax, "days", "days of training"), (ax2, "cost_usd", "cost of the run (USD)")):
        mid = np.array([getattr(r, key) for r in runs])
        lo = np.array([getattr(r, f"{key}_low") for r in runs])
        hi = np.array([getattr(r, f"{key}_high") for r in runs])
        a.fill_between(x[ok], lo[ok], hi[ok], color="#0072B2", alpha=0.18, lw=0, gid="runs")
        a.plot(x[ok], mid[ok], color="#0072B2", marker="o", ms=3, gid="runs")
        if not ok.all():                                 # runs that cannot run: crossed out, off the line
            a.axvspan(x.min() / 2, x.max() * 2 if fewest is None else fewest, color="0.5", alpha=0.12, lw=0)
            a.plot(x[~ok], mid[~ok], ls="none", marker="x", ms=6, mew=1.4, color="0.35", gid="does-not-fit")
        a.plot([n_gpus], [getattr(t, key)], marker="o" if ok[counts.index(n_gpus)] else "X", ms=8,
               color="#D55E00", mfc="#D55E00" if ok[counts.index(n_gpus)] else "white")
        _log_axis(a.xaxis, x.min(), x.max(), _short_number, pad=1.5)
        if key == "days":
            _log_axis(a.yaxis, lo.min(), hi.max(), _short_number)
        else:                                            # at a fixed MFU the cost is flat: show 3x around it
            _log_axis(a.yaxis, t.cost_usd_low / 3, t.cost_usd_high * 3, _usd, pad=1.0)
        a.set_xlabel(f"number of {t.gpu} GPUs")
        a.set_ylabel(label)
        a.spines[["top", "right"]].set_visible(False)
    # the run in the figure too (issue 25: say what moved); "1T tokens", as the prose says (read38, read38b)
    ax.set_title(f"{t.model}, {_tokens(t.tokens)} tokens of {t.seq:,}: {t.total_flops:.3g} model FLOPs",
                 fontsize=8.5, loc="left")
    cannot = [n for n, fit in zip(counts, ok) if not fit]
    if cannot:                                           # said inside the shaded counts, on both panels
        left = ax.get_xlim()[0]
        at = (left * min(fewest, x.max() * 2)) ** 0.5 if fewest is not None else (left * x.max() * 1.5) ** 0.5
        say = ("x: does not fit; shaded: " + (f"fewer than {fewest:,} GPUs" if fewest is not None
                                              else f"up to {MIN_GPUS_MAX:,} GPUs")
               + "\n(even with full recomputation)")
        for a in (ax, ax2):
            a.text(at, 0.5, say, transform=a.get_xaxis_transform(), rotation=90, ha="center", va="center",
                   fontsize=7, color="0.3")
    summary = (f"{t.model}, {t.tokens:.3g} tokens of {t.seq:,}: {t.total_flops:.3g} model FLOPs\n"
               f"{t.n_gpus:,} x {t.gpu} at {_mfu_kind(t, mfu)}MFU {t.mfu:.0%} "
               f"({t.mfu_low:.0%}-{t.mfu_high:.0%}): "
               f"{t.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, {t.days:,.1f} days "
               f"({t.days_low:,.1f}-{t.days_high:,.1f}), {t.gpu_hours:,.0f} GPU-hours, "
               f"${t.cost_usd:,.0f} (${t.cost_usd_low:,.0f}-${t.cost_usd_high:,.0f}) "
               f"at ${t.price_usd_per_gpu_hour:.2f}/GPU-hour{price_note(t.price_kind)}"
               + "".join(f"\nwarning: {w}" for w in t.warnings)
               + (f"\ndoes not fit on {', '.join(f'{n:,}' for n in cannot)} x {t.gpu} (crossed out): no "
                  "layout of that many that the fewest-GPU search tries (ZeRO, no offload, "
                  f"{'with' if len(default_cp_degrees(t.seq)) > 1 else 'no'} context parallelism) "
                  f"holds a step of one {t.seq:,}-token sequence, even with full recomputation"
                  + ("" if fewest is None else f"; the fewest that hold one: {fewest:,}") if cannot else ""))
    return FixedView(fig, summary)


#: The runs :func:`render_compute_optimal` marks (label, parameters, tokens): Hoffmann et al. 2022 (Sec. 4)
#: and Dubey et al. 2024 (Llama 3: 15T tokens; 405B on 15.6T), the Llama models' parameters the catalogue's.
SCALING_RUNS = tuple((label, get_model(n).n_params if isinstance(n, str) else n, d) for label, n, d in (
    ("Chinchilla 70B", 70e9, 1.4e12), ("Llama 3 8B", "llama-3-8b", 15e12),
    ("Llama 3 70B", "llama-3-70b", 15e12), ("Llama 3 405B", "llama-3.1-405b", 15.6e12)))
SCALING_FIT_COLORS = {"approach1": "#0072B2", "approach2": "#56B4E9", "approach3": "#E69F00",
                      "besiroglu": "#009E73"}


#: Compute-optimal points a lab published from its own scaling law (label, parameters, tokens, FLOPs as the
#: lab states them, source): Meta's IsoFLOP fit extrapolated to the flagship budget, 402B on 16.55T tokens at
#: 3.8e25 FLOPs (Dubey et al. 2024, Sec. 3.2.1; its 6ND is 4.0e25, and the paper does not say how it counts).
#: Drawn at the stated budget, so a run beside it reads as sized by that law, not by Chinchilla's.
OWN_FIT_POINTS = (("Meta's own law", 402e9, 16.55e12, 3.8e25, "Dubey et al. 2024, Sec. 3.2.1"),)


def render_compute_optimal(flops_low: float = 1e19, flops_high: float = 2e28, *, runs=SCALING_RUNS,
                           own_fits=OWN_FIT_POINTS) -> View:
    """Chapter 10: compute-optimal parameters against the budget for Hoffmann et al.'s three approaches and
    Besiroglu et al.'s refit (:func:`~llmsizing.scaling.compute_optimal`), the published Table 3 rows as dots,
    real runs (``runs``: label, parameters or a catalogue model's name, tokens) at their ``6ND`` (below the
    lines: smaller than compute-optimal, on more tokens), and the compute-optimal points labs derived from
    their own laws (``own_fits``: label, parameters, tokens, FLOPs; hollow diamonds, gid ``"own-fit"``)."""
    import numpy as np

    from ..scaling import FLOPS_PER_PARAM_TOKEN, chinchilla_tables, compute_optimal
    runs = [(name, get_model(n).n_params if isinstance(n, str) else n, d) for name, n, d in runs]
    c = np.geomspace(flops_low, flops_high, 60)
    fig, ax = new_figure(7.2, 4.0)
    names = {"approach1": "Approach 1", "approach2": "Approach 2", "approach3": "Approach 3",
             "besiroglu": "Besiroglu et al. 2024 refit"}
    for fit, colour in SCALING_FIT_COLORS.items():
        beta = compute_optimal(c[0], fit=fit).a             # the exponent of N_opt (the book's beta)
        ax.plot(c, [compute_optimal(x, fit=fit).params for x in c], color=colour, lw=1.6,
                label=rf"{names[fit]} ($\beta$ = {beta:.2f})", ls="--" if fit == "approach3" else "-")
    t3 = chinchilla_tables().query("table == 'Table 3'")
    ax.plot(t3["flops"], t3["params"], "o", color="#0072B2", ms=4, mfc="white",
            label="Hoffmann et al. Table 3")
    lines = [f"{'run':16s} {'params':>8s} {'tokens':>8s} {'C = 6ND':>9s} {'tok/param':>9s} {'optimal N':>9s}"]
    at = [(FLOPS_PER_PARAM_TOKEN * n * d, n) for _, n, d in runs]
    for name, n, d in runs:
        flops = FLOPS_PER_PARAM_TOKEN * n * d
        ax.plot([flops], [n], marker="D", ms=5, color="#D55E00", ls="none")
        # a label goes left of its marker when another run sits just to its right at a similar size
        crowded = any(flops < f < 30 * flops and 0.5 < m / n < 2 for f, m in at)
        ax.annotate(name, (flops, n), textcoords="offset points", xytext=(-6, -9) if crowded else (5, -9),
                    ha="right" if crowded else "left", fontsize=7)
        lines.append(f"{name:16s} {n / 1e9:7,.1f}B {d / 1e12:7,.1f}T {flops:9.2e} {d / n:9,.0f} "
                     f"{compute_optimal(flops).params / 1e9:8,.0f}B")
    for name, n, d, flops, source in own_fits:
        ax.plot([flops], [n], marker="D", ms=9, mfc="none", mec="#D55E00", mew=1.2, ls="none", gid="own-fit")
        ax.annotate(name, (flops, n), textcoords="offset points", xytext=(-7, 5), ha="right", fontsize=7)
        lines.append(f"{name} ({source}): {n / 1e9:,.0f}B on {d / 1e12:.2f}T tokens at {flops:.2e} FLOPs as "
                     f"stated (6ND: {FLOPS_PER_PARAM_TOKEN * n * d:.2e})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training compute C (FLOPs, C = 6ND)")
    ax.set_ylabel("parameters N")
    ax.yaxis.set_major_formatter(_short_number)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=7, frameon=False, loc="upper left")
    return View(fig,
                "Compute-optimal parameters against the budget (Hoffmann et al. 2022; Besiroglu et al. "
                "2024)\n"
                + "\n".join(lines))


# =========================================================================== chapter 11: cost
#: The GPU types chapter 11 compares by default: the training-class parts of the catalogue.
COST_GPUS = ("A100 80GB", "H100 SXM", "H200", "B200", "MI300X")


def render_cost_by_gpu(model="llama-3-70b", tokens: float = 1e11, seq: int = 8192, gpus=COST_GPUS,
                       mfu: float | None = None, prices: dict | None = None) -> View:
    """Chapter 11: the *finished job's* cost on each GPU type (bars, the MFU band as a range) by the hourly
    price (right), from :func:`~llmsizing.time_cost.cost_by_gpu` (fewest GPUs that hold a step, days,
    GPU-hours x price; the ranking follows price / dense peak). A mixture of experts too (chapter 18: EP
    layouts, its MFU warning)."""
    import numpy as np

    from ..hardware import kernel_efficiency_row
    from ..time_cost import cost_by_gpu, mfu_model_table

    df = cost_by_gpu(model, tokens=tokens, seq=seq, gpus=gpus, mfu=mfu, prices=prices)
    # a GPU generation and dtype with no calibration run borrows the median generation's MFU (chapter 10):
    # its bar and band rest on that, not on its own runs, and the figure says so next to the bar
    fitted = set(zip(*(mfu_model_table()[c] for c in ("generation", "dtype"))))
    df["borrowed"] = [mfu is None and (kernel_efficiency_row(g, d).generation,
                                       "fp8" if d in ("fp8", "fp4") else "bf16") not in fitted
                      for g, d in zip(df["gpu"], df["dtype"])]
    ok = df[df["fits"]].iloc[::-1]
    if ok.empty:
        raise ValueError(f"gpus: no GPU type in {list(df['gpu'])} holds a training step of {seq:,} tokens "
                         f"({df['why'].iloc[0]})")
    fig = Figure(figsize=(8.4, 0.5 + 0.42 * max(len(df), 2)), dpi=DPI)
    ax, ax2 = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [3, 1.2]})
    fig.subplots_adjust(left=0.13, right=0.98, bottom=0.55 / fig.get_figheight() + 0.1, top=0.9, wspace=0.06)
    y = np.arange(len(ok))
    colors = [GPU_COLORS.get(g, "0.4") for g in ok["gpu"]]
    mid = ok["cost_usd"].to_numpy() / 1e3
    err = np.vstack([mid - ok["cost_usd_low"].to_numpy() / 1e3, ok["cost_usd_high"].to_numpy() / 1e3 - mid])
    est = (ok["price_kind"] == "estimate").to_numpy()
    bars = ax.barh(y, mid, color=colors, xerr=err, error_kw={"ecolor": "0.3", "capsize": 3, "lw": 0.8})
    for bar, e in zip(bars, est):                  # an estimated price: hatched, and named so on its label
        if e:
            bar.set_hatch("///")
            bar.set_edgecolor("white")
    for yi, (_, r) in zip(y, ok.iterrows()):
        ax.annotate(f" {r['min_gpus']:.0f} GPUs, {r['days_on_min_gpus']:,.0f} d"
                    + ("; borrowed MFU" if r["borrowed"] else ""),
                    (r["cost_usd_high"] / 1e3, yi), va="center", fontsize=7, color="0.25")
    marks = {"estimate": " (est. price)", "reported": " (rep. price)"}     # a survey's price: ranked, marked
    ax.set_yticks(y, [g + marks.get(k, "") for g, k in zip(ok["gpu"], ok["price_kind"])], fontsize=8)
    ax.set_xlabel("cost of the finished job (thousand USD; bar: MFU band)", fontsize=8)
    ax.set_xlim(0, ok["cost_usd_high"].max() / 1e3 * 1.45)
    ax2.barh(y, ok["price_usd_per_gpu_hour"], color=colors, alpha=0.55)
    ax2.set_xlabel("price (USD per GPU-hour)", fontsize=8)
    for a in (ax, ax2):
        a.spines[["top", "right"]].set_visible(False)
        a.tick_params(labelsize=7)
    first = df.iloc[0]
    name = resolve_model_name(model)
    ax.set_title(f"{name}, {_tokens(tokens)} tokens of {seq:,}", fontsize=9, loc="left")
    lines = [f"{name}, {tokens:.3g} tokens of {seq:,}: cost of the job by GPU type (cheapest first)"]
    for _, r in df.iterrows():
        if not r["fits"]:
            lines.append(f"  {r['gpu']:<10s} does not fit: {r['why']}")
            continue
        lines.append(f"  {r['gpu']:<10s} ${r['price_usd_per_gpu_hour']:.2f}/h"
                     f"{' (estimated price, not ranked)' if r['price_kind'] == 'estimate' else ''}"
                     f"{' (reported price)' if r['price_kind'] == 'reported' else ''}"
                     f"{' (borrowed MFU: no calibration run)' if r['borrowed'] else ''}  "
                     f"{r['gpu_hours']:>12,.0f} GPU-h  "
                     f"${r['cost_usd']:>12,.0f} (${r['cost_usd_low']:,.0f}-${r['cost_usd_high']:,.0f})  "
                     f"min {r['min_gpus']:.0f} GPUs ({r['layout']}), "
                     f"{r['days_on_min_gpus']:,.0f} days on them")
    lines += [f"cheapest job: {first['gpu']}"] if first["fits"] else []
    # a mixture of experts' MFU warning
    lines += [f"warning: {w}" for w in df.attrs.get("warnings", ())[:1]]
    return FixedView(fig, "\n".join(lines))


def resolve_model_name(model) -> str:
    """A model's catalogue name (for titles; a mixture of experts too)."""
    from ..catalog import resolve_model

    return resolve_model(model, moe=True).name


#: Price multipliers and MFUs of :func:`render_cost_sensitivity`'s grid (around the chosen price).
SENSITIVITY_PRICE_FACTORS = (0.4, 0.6, 0.8, 1.0, 1.25, 1.5)
SENSITIVITY_MFUS = (0.2, 0.3, 0.4, 0.5, 0.6)


def render_cost_sensitivity(model="llama-3-70b", tokens: float = 1e12, gpu: str = "H100 SXM", seq: int = 8192,
                            price: float | None = None, mfu: float = 0.4, n_gpus: int = 1024, *,
                            into: Figure | None = None) -> View:
    """Chapter 11: the job cost over a grid of price (USD per GPU-hour; the chosen ``price``, default the
    catalogue's on-demand one, times :data:`SENSITIVITY_PRICE_FACTORS`) x MFU (:data:`SENSITIVITY_MFUS`), from
    :func:`~llmsizing.cost.cost_sensitivity`, with the chosen (price, ``mfu``) marked; the summary gives that
    job's cost, GPU-hours and days on ``n_gpus`` GPUs (:func:`~llmsizing.time_cost.training_time`). A discount
    (reserved capacity) is a lower price: read it off the columns to the left."""
    import numpy as np

    from .._validate import check_int, check_number
    from ..catalog import get_gpu
    from ..cost import cost_sensitivity
    from ..time_cost import training_time

    g = get_gpu(gpu)
    p0 = g.price_usd_per_gpu_hour if price is None else check_number("price", price, minimum=0.01,
                                                                     maximum=1e3)
    mfu = check_number("mfu", mfu, minimum=0.01, maximum=1.0)
    n = check_int("n_gpus", n_gpus)
    t = training_time(model, tokens=tokens, gpu=g, n_gpus=n, seq=seq, mfu=mfu, price_usd_per_gpu_hour=p0)
    prices = [p0 * f for f in SENSITIVITY_PRICE_FACTORS]
    mfus = sorted(set(SENSITIVITY_MFUS) | {round(mfu, 4)})
    grid = cost_sensitivity(model, tokens=tokens, gpu=g, seq=seq, prices=prices, mfus=mfus)
    def build(fig):                      # the heat map and its colour scale, side by side
        return fig.add_axes((0.1, 0.15, 0.72, 0.75)), fig.add_axes((0.835, 0.15, 0.025, 0.75))

    fig, (ax, cax) = figure_axes(7.6, 3.3, into, ("cost sensitivity",), build, keep_log=((1, "y"),))
    z = grid.to_numpy() / 1e6
    norm = _log_norm(z)
    # the cells as a mesh, as imshow(z, origin="lower", aspect="auto") places them: resampling an image to the
    # axes' pixels cost a widget's redraw ~10 ms (issue 38), drawing 30-36 quads ~1 ms
    ax.pcolormesh(np.arange(z.shape[1] + 1) - 0.5, np.arange(z.shape[0] + 1) - 0.5, z, cmap="YlOrRd",
                  norm=norm)
    ax.set_xlim(-0.5, z.shape[1] - 0.5)
    ax.set_ylim(-0.5, z.shape[0] - 0.5)
    cb_ticks = [v for v in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500) if z.min() <= v <= z.max()]
    for i in range(z.shape[0]):
        for j in range(z.shape[1]):
            ax.text(j, i, f"{z[i, j]:.2f}", ha="center", va="center", fontsize=7.5,
                    color="white" if z[i, j] > np.sqrt(z.min() * z.max()) * 1.6 else "black")
    ax.set_xticks(range(len(prices)), [f"${p:.2f}" for p in prices], fontsize=8)
    ax.set_yticks(range(len(mfus)), [f"{m:.0%}" for m in mfus], fontsize=8)
    # the GPU count moves the days, never the grid: the figure says so (issue 25)
    ax.set_xlabel(f"price per GPU-hour (USD)\non {n:,} GPUs the job takes {t.days:,.1f} days: the GPU count "
                  "changes the days, not the cost", fontsize=8)
    ax.set_ylabel("MFU", fontsize=8)
    j0, i0 = SENSITIVITY_PRICE_FACTORS.index(1.0), mfus.index(round(mfu, 4))
    ax.add_patch(_rect((j0 - 0.5, i0 - 0.5), 1, 1))
    # the colour scale, drawn as a log-scaled strip (a matplotlib Colorbar cannot be emptied and redrawn in a
    # widget's kept axes: it keeps callbacks on them, and removing its axes fails on matplotlib 3.11)
    edges = np.geomspace(norm.vmin, norm.vmax, 129)
    cax.pcolormesh([0.0, 1.0], edges, np.sqrt(edges[:-1] * edges[1:])[:, None], cmap="YlOrRd", norm=norm)
    _log_scale(cax.yaxis)
    cax.set_xlim(0, 1)
    cax.set_ylim(norm.vmin, norm.vmax)
    cax.set_xticks([])
    cax.yaxis.tick_right()
    cax.yaxis.set_label_position("right")
    cax.set_yticks(cb_ticks, [f"{v:g}" for v in cb_ticks])
    cax.yaxis.set_minor_locator(NullLocator())
    cax.set_ylabel("job cost (million USD)", fontsize=8)
    cax.tick_params(labelsize=7)
    ax.set_title(f"{t.model}, {_tokens(tokens)} tokens on {g.name}: cost of the job (million USD)",
                 fontsize=9, loc="left")
    summary = (f"{t.model}, {tokens:.3g} tokens of {seq:,} on {g.name} at ${p0:.2f}/GPU-hour"
               f"{price_note(t.price_kind)} and MFU "
               f"{mfu:.0%}: "
               f"{t.gpu_hours:,.0f} GPU-hours, ${t.cost_usd:,.0f}; {t.days:,.1f} days on {n:,} GPUs\n"
               f"cost x price / MFU: halving the price or doubling the MFU halves the bill; "
               f"grid ${min(prices):.2f}-${max(prices):.2f} x MFU {min(mfus):.0%}-{max(mfus):.0%}: "
               f"${z.min():.2f}M-${z.max():.2f}M")
    return FixedView(fig, summary)


def _log_norm(z):
    from matplotlib.colors import LogNorm

    return LogNorm(vmin=float(z.min()), vmax=float(z.max()) if z.max() > z.min() else float(z.min()) * 1.01)


def _rect(xy, w, h):
    from matplotlib.patches import Rectangle

    return Rectangle(xy, w, h, fill=False, ec="#1f3b73", lw=2.2)


def render_cost_vs_gpus(model="llama-3-70b", tokens: float = 1e12, gpu: str = "H100 SXM", seq: int = 8192,
                        global_batch: int = 512, tp: int = 8, pp: int = 4, zero: int = 1,
                        micro_batch: int = 1) -> View:
    """Chapter 11: more GPUs for less time at about the same cost, and where that stops. Left: days and cost
    of the job against the GPU count at a fixed global batch (:func:`~llmsizing.cost.cost_vs_gpus`, one
    layout, data parallelism growing until the global batch caps it). Right: where each GPU's step goes
    (compute, pipeline bubble, exposed communication) and the resulting MFU."""
    import numpy as np

    from ..cost import cost_vs_gpus

    df = cost_vs_gpus(model, tokens=tokens, gpu=gpu, seq=seq, global_batch=global_batch, tp=tp, pp=pp,
                      zero=zero, micro_batch=micro_batch)
    fig = Figure(figsize=(8.8, 3.6), dpi=DPI)
    ax, ax2 = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.22, top=0.8, wspace=0.42)
    x = df["n_gpus"].to_numpy(dtype=float)
    ax.fill_between(x, df["cost_usd_low"] / 1e6, df["cost_usd_high"] / 1e6, color="#D55E00", alpha=0.15, lw=0)
    ax.plot(x, df["cost_usd"] / 1e6, color="#D55E00", marker="o", ms=3, label="cost (left axis)")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, df["cost_usd_high"].max() / 1e6 * 1.1)
    ax.set_ylabel("cost of the job (million USD)", fontsize=8, color="#D55E00")
    ax.set_xlabel(f"number of GPUs (TP{tp} x PP{pp} x dp)", fontsize=8)
    axd = ax.twinx()
    axd.plot(x, df["days"], color="#0072B2", marker="s", ms=3, ls="--")
    axd.set_yscale("log")
    axd.set_ylabel("days (log)", fontsize=8, color="#0072B2")
    for a in (ax, axd):
        a.tick_params(labelsize=7)
    share = np.vstack([df["compute_s"], df["bubble_s"], df["exposed_comm_s"]]) / df["step_s"].to_numpy()
    labels = ("compute", "pipeline bubble", "exposed comm.")
    colors = ("#0072B2", "#F0E442", "#D55E00")
    xs = np.arange(len(df))
    bottom = np.zeros(len(df))
    for s, lab, c in zip(share, labels, colors):
        ax2.bar(xs, s, bottom=bottom, color=c, label=lab, width=0.8)
        bottom += s
    ax2.plot(xs, df["mfu"], color="black", marker="o", ms=3, label="MFU")
    ax2.set_xticks(xs, [f"{n:,}" for n in df["n_gpus"]], fontsize=6.5, rotation=90)
    ax2.set_ylim(0, 1.0)
    ax2.set_ylabel("share of the step / MFU", fontsize=8)
    ax2.set_xlabel("number of GPUs", fontsize=8)
    ax2.tick_params(labelsize=7)
    ax2.legend(fontsize=6.5, frameon=False, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=4,
               borderaxespad=0.2, handlelength=1.2, columnspacing=0.8)
    name = resolve_model_name(model)
    fig.suptitle(f"{name}, {_tokens(tokens)} tokens, global batch {global_batch} x {seq:,} on {gpu}",
                 fontsize=9, x=0.08, y=0.98, ha="left")
    lines = [f"{name}, {tokens:.3g} tokens of {seq:,} on {gpu}, TP{tp} PP{pp} ZeRO-{zero}, global batch "
             f"{global_batch}, micro-batch {micro_batch}: as dp grows"]
    for _, r in df.iterrows():
        lines.append(f"  {r['n_gpus']:>6,.0f} GPUs (dp {r['dp']:>4.0f}, "
                     f"{r['grad_accum']:>4.0f} micro-batches): "
                     f"MFU {r['mfu']:.0%}, {r['days']:>7,.1f} days, ${r['cost_usd']:>12,.0f}")
    return FixedView(fig, "\n".join(lines))


#: GPU counts and storage write bandwidths (GB/s) :func:`render_goodput` sweeps.
GOODPUT_GPUS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
GOODPUT_STORAGE_GB_PER_S = (100, 500, 2000)


def render_goodput(model="llama-3.1-405b", *, restart_min: float = 10.0, counts=GOODPUT_GPUS,
                   storage=GOODPUT_STORAGE_GB_PER_S) -> View:
    """Chapter 11: left, the job's mean time between interruptions against the GPU count
    (:func:`~llmsizing.reliability.interruptions`, Llama 3's rate); right, the goodput at Young's checkpoint
    interval for each storage write bandwidth (:func:`~llmsizing.reliability.goodput`, ``restart_min`` per
    restart). The goodput falls with the GPU count because the interruptions come faster while each costs the
    same."""
    import numpy as np

    from ..reliability import goodput, interruptions

    x = np.array(counts, dtype=float)
    fig, (ax, ax2) = new_figure(7.6, 3.3, ncols=2)
    ax.plot(x, [interruptions(n_gpus=int(n), days=1).mtbf_hours for n in counts], color="#D55E00", marker="o",
            ms=3)
    ax.set_yscale("log")
    ax.set_ylabel("hours between interruptions")
    ax.set_title("the job's mean time between interruptions", fontsize=8.5, loc="left")
    ax.yaxis.set_major_formatter(_short_number)
    name = getattr(model, "name", model)
    lines = [f"{name}, restart {restart_min:g} min, checkpoint at Young's interval: goodput by GPU count",
             f"{'GPUs':>8s} {'MTBF h':>7s} " + " ".join(f"{f'{bw:,} GB/s':>11s}" for bw in storage)]
    rows = {n: [f"{n:8,d} {interruptions(n_gpus=int(n), days=1).mtbf_hours:7.2f}"] for n in counts}
    for bw, colour in zip(storage, ("#CC79A7", "#E69F00", "#0072B2")):
        vals = []
        for n in counts:
            try:
                vals.append(goodput(model, n_gpus=int(n), restart_min=restart_min,
                                    storage_gb_per_s=bw).goodput)
            except ValueError:                           # no progress at all at that scale
                vals.append(0.0)
            rows[n].append(f"{vals[-1]:11.1%}")
        ax2.plot(x, 100 * np.array(vals), color=colour, marker="o", ms=3, label=f"storage {bw:,} GB/s")
    ax2.set_ylim(0, 100)
    ax2.set_ylabel("goodput (% of wall time)")
    ax2.legend(fontsize=7, frameon=False, loc="lower left")
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        a.set_xticks(x, [f"{v / 1024:g}K" if v >= 1024 else f"{v:g}" for v in x], fontsize=7)
        a.xaxis.set_minor_locator(NullLocator())
        a.set_xlabel("GPUs in the job")
        a.spines[["top", "right"]].set_visible(False)
    ax2.set_title(name, fontsize=8.5, loc="left")
    return View(fig, "\n".join(lines + [" ".join(r) for r in rows.values()]))


