"""Part III, time and money (chapters 10-14): how long a run takes, what it costs, and how right the answers are.
Chapter 10, published runs against the calibrated MFU and a run's days and cost against the GPU count
(:func:`render_mfu_calibration`, :func:`render_training_time`) and the compute-optimal model size
(:func:`render_compute_optimal`); chapter 11, the cost of the job by GPU type, over price x MFU, and against the
GPU count (:func:`render_cost_by_gpu`, :func:`render_cost_sensitivity`, :func:`render_cost_vs_gpus`), and goodput
against the GPU count (:func:`render_goodput`); chapter 12, the planner's answer (:func:`render_plan`); chapter 13, predicted
against published GPU-hours (:func:`render_prediction_check`); chapter 14, the seed articles' claims against the
library (:func:`render_seed_audit`).

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from ..units import GiB
from .base import (COLORS, DPI, GPU_COLORS, FixedView, View, _fast_hbars, _fixed_figure, _inch_margins, _kept_legend,
                   _log_axis, _short_number, _step_time_bars, _tokens, _usd, figure_axes, new_figure)


# =========================================================================== chapter 10: FLOPs and time
#: Colours of the calibrated (generation, dtype) groups in :func:`render_mfu_calibration`.
CALIBRATION_COLORS = {("ampere", "bf16"): "#0072B2", ("hopper", "bf16"): "#D55E00", ("hopper", "fp8"): "#CC79A7",
                      ("blackwell", "fp8"): "#009E73"}


def render_mfu_calibration() -> View:
    """Every published run against the calibrated end-to-end MFU model (:func:`~llmsizing.time_cost.mfu_residuals`):
    left, the MFU each run implies against the one the model predicts for it (the diagonal is a perfect
    prediction); right, each run's residual (implied / predicted, log axis), grouped by GPU generation and dtype,
    with that group's range shaded. Filled dots are calibration runs, open ones held out. Chapter 10."""
    import numpy as np

    from ..time_cost import mfu_residuals

    df = mfu_residuals()
    groups = sorted(set(zip(df["generation"], df["dtype"])), key=lambda k: (-len(df[(df["generation"] == k[0])
                                                                                   & (df["dtype"] == k[1])]), k))
    fig = Figure(figsize=(8.6, 9.2), dpi=DPI)
    gs = fig.add_gridspec(2, 1, height_ratios=[1, 3.1], left=0.43, right=0.975, bottom=0.05, top=0.975, hspace=0.17)
    ax, ax_r = fig.add_subplot(gs[0]), fig.add_subplot(gs[1])

    # ---- top: implied against predicted
    for key in groups:
        sub = df[(df["generation"] == key[0]) & (df["dtype"] == key[1])]
        c = CALIBRATION_COLORS.get(key, "0.4")
        for cal, face in ((True, c), (False, "white")):
            part = sub[sub["calibration"] == cal]
            ax.plot(part["predicted_mfu"] * 100, part["implied_mfu"] * 100, ls="none", marker="o", ms=5, mec=c,
                    mfc=face, label=f"{key[0]} {key[1].upper()}" if cal else None)
    ax.plot([10, 65], [10, 65], color="0.3", lw=0.8, ls="--")
    ax.set_xlim(10, 65)
    ax.set_ylim(10, 65)
    ax.set_xlabel("predicted MFU (%)", fontsize=8)
    ax.set_ylabel("implied MFU (%)", fontsize=8)
    ax.tick_params(labelsize=7.5)
    ax.legend(fontsize=7, frameon=False, loc="upper left", title="filled: calibration, open: held out",
              title_fontsize=7)
    ax.spines[["top", "right"]].set_visible(False)

    # ---- bottom: the residual per run, group by group, with the group's range
    y, labels = 0, []
    for key in groups:
        sub = df[(df["generation"] == key[0]) & (df["dtype"] == key[1])].sort_values("residual")
        c = CALIBRATION_COLORS.get(key, "0.4")
        lo, hi = (sub["low"] / sub["predicted_mfu"]).iloc[0], (sub["high"] / sub["predicted_mfu"]).iloc[0]
        ys = np.arange(y, y + len(sub))
        ax_r.fill_betweenx([y - 0.5, y + len(sub) - 0.5], lo, hi, color=c, alpha=0.12, lw=0)
        for yy, v, cal in zip(ys, sub["residual"], sub["calibration"]):
            ax_r.plot([v], [yy], ls="none", marker="o", ms=4.5, mec=c, mfc=c if cal else "white")
        ax_r.text(hi, y + len(sub) - 0.9, f" {key[0]} {key[1].upper()}: x{lo:.2f} to x{hi:.2f}", fontsize=7,
                  color=c, va="top")
        labels += [r if len(r) <= 62 else r[:60] + "..." for r in sub["run"]]
        y += len(sub) + 1
        labels.append("")
    ax_r.set_yticks(range(len(labels)), labels, fontsize=6.2)
    ax_r.set_ylim(len(labels) - 1, -1)
    ax_r.set_xscale("log")
    ax_r.set_xlim(0.4, 2.6)
    ax_r.xaxis.set_minor_locator(NullLocator())
    ticks = [0.5, 0.67, 0.8, 1, 1.25, 1.5, 2]
    ax_r.set_xticks(ticks, [f"x{t:g}" for t in ticks], fontsize=7.5)
    ax_r.axvline(1, color="0.3", lw=0.8, ls="--")
    ax_r.set_xlabel("implied / predicted MFU (log scale); shaded: the generation's range", fontsize=8)
    ax_r.spines[["top", "right"]].set_visible(False)

    inside = int(df["inside"].sum())
    lines = [f"{inside} of {len(df)} published runs inside their generation's range "
             f"({int(df['calibration'].sum())} calibration, {int((~df['calibration']).sum())} held out)"]
    for key in groups:
        sub = df[(df["generation"] == key[0]) & (df["dtype"] == key[1])]
        lo, hi = (sub["low"] / sub["predicted_mfu"]).iloc[0], (sub["high"] / sub["predicted_mfu"]).iloc[0]
        lines.append(f"{key[0]} {key[1]}: {len(sub)} runs, residuals x{sub['residual'].min():.2f} to "
                     f"x{sub['residual'].max():.2f}, range x{lo:.2f} to x{hi:.2f} (width {hi / lo:.2f}x)")
    for r in df.itertuples():
        lines.append(f"{r.run}: implied {r.implied_mfu:.1%}, predicted {r.predicted_mfu:.1%}, "
                     f"x{r.residual:.2f}{'' if r.calibration else ' (held out)'}")
    return View(fig, "\n".join(lines))


TIME_GPU_COUNTS = (1, 8, 64, 512, 4096, 32768)


def render_training_time(model="llama-3-70b", tokens: float = 1e12, gpu: str = "H100 SXM", seq: int = 8192,
                         mfu: float | None = None, n_gpus: int = 1024, counts=TIME_GPU_COUNTS, *,
                         into: Figure | None = None) -> View:
    """Days (left) and cost (right) of training ``model`` on ``tokens`` tokens against the GPU count, with the
    MFU range as a band (:func:`~llmsizing.time_cost.training_time`); ``n_gpus`` is marked. At a fixed MFU the
    cost does not depend on the GPU count: more GPUs buy time, not a cheaper run. Chapter 10."""
    import numpy as np

    from .._validate import check_int, check_sequence
    from ..time_cost import training_time

    counts = sorted({check_int("counts[i]", c) for c in check_sequence("counts", counts, example="(8, 64)")}
                    | {check_int("n_gpus", n_gpus)})
    runs = [training_time(model, tokens=tokens, gpu=gpu, n_gpus=n, seq=seq, mfu=mfu) for n in counts]
    t = runs[counts.index(n_gpus)]
    def build(fig):                                      # fixed margins: a widget redraw skips layout passes
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.16, top=0.91, wspace=0.32)
        return fig.subplots(1, 2)

    fig, (ax, ax2) = figure_axes(7.6, 3.2, into, ("training time",), build)
    x = np.array(counts, dtype=float)
    for a, key, label in ((ax, "days", "days of training"), (ax2, "cost_usd", "cost of the run (USD)")):
        mid = np.array([getattr(r, key) for r in runs])
        lo = np.array([getattr(r, f"{key}_low") for r in runs])
        hi = np.array([getattr(r, f"{key}_high") for r in runs])
        a.fill_between(x, lo, hi, color="#0072B2", alpha=0.18, lw=0)
        a.plot(x, mid, color="#0072B2", marker="o", ms=3)
        a.plot([n_gpus], [getattr(t, key)], marker="o", ms=8, color="#D55E00")
        _log_axis(a.xaxis, x.min(), x.max(), _short_number, pad=1.5)
        if key == "days":
            _log_axis(a.yaxis, lo.min(), hi.max(), _short_number)
        else:                                            # at a fixed MFU the cost is flat: show 3x around it
            _log_axis(a.yaxis, t.cost_usd_low / 3, t.cost_usd_high * 3, _usd, pad=1.0)
        a.set_xlabel(f"number of {t.gpu} GPUs")
        a.set_ylabel(label)
        a.spines[["top", "right"]].set_visible(False)
    # the run in the figure too: two models of the same size draw the same curves (issue 25: say what moved)
    ax.set_title(f"{t.model}, {t.tokens:.3g} tokens of {t.seq:,}: {t.total_flops:.3g} model FLOPs", fontsize=8.5,
                 loc="left")
    summary = (f"{t.model}, {t.tokens:.3g} tokens of {t.seq:,}: {t.total_flops:.3g} model FLOPs\n"
               f"{t.n_gpus:,} x {t.gpu} at {'the calibrated ' if mfu is None else 'a given '}MFU {t.mfu:.0%} "
               f"({t.mfu_low:.0%}-{t.mfu_high:.0%}): "
               f"{t.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, {t.days:,.1f} days "
               f"({t.days_low:,.1f}-{t.days_high:,.1f}), {t.gpu_hours:,.0f} GPU-hours, "
               f"${t.cost_usd:,.0f} (${t.cost_usd_low:,.0f}-${t.cost_usd_high:,.0f}) "
               f"at ${t.price_usd_per_gpu_hour:.2f}/GPU-hour"
               + "".join(f"\nwarning: {w}" for w in t.warnings))
    return FixedView(fig, summary)


#: The runs :func:`render_compute_optimal` marks against the frontier: (label, parameters, tokens), from
#: Hoffmann et al. 2022 (Chinchilla, Sec. 4) and Dubey et al. 2024 (Llama 3: 15T tokens; 405B on 15.6T).
SCALING_RUNS = (("Chinchilla 70B", 70e9, 1.4e12), ("Llama 3 8B", 8.03e9, 15e12), ("Llama 3 70B", 70.6e9, 15e12),
                ("Llama 3 405B", 405.9e9, 15.6e12))
SCALING_FIT_COLORS = {"approach1": "#0072B2", "approach2": "#56B4E9", "approach3": "#E69F00",
                      "besiroglu": "#009E73"}


def render_compute_optimal(flops_low: float = 1e19, flops_high: float = 2e28, *, runs=SCALING_RUNS) -> View:
    """Chapter 10: the compute-optimal parameter count against the training budget for Hoffmann et al.'s three
    approaches and Besiroglu et al.'s refit (:func:`~llmsizing.scaling.compute_optimal`), the published Table 3
    rows as dots, and real runs (``runs``: label, parameters, tokens) at their ``6ND``: below the lines means
    smaller than compute-optimal, trained on more tokens."""
    import numpy as np

    from ..scaling import FLOPS_PER_PARAM_TOKEN, chinchilla_tables, compute_optimal

    c = np.geomspace(flops_low, flops_high, 60)
    fig, ax = new_figure(7.2, 4.0)
    labels = {"approach1": "Approach 1 (a = 0.50)", "approach2": "Approach 2 (a = 0.49)",
              "approach3": "Approach 3 (a = 0.46)", "besiroglu": "Besiroglu et al. 2024 refit (a = 0.51)"}
    for fit, colour in SCALING_FIT_COLORS.items():
        ax.plot(c, [compute_optimal(x, fit=fit).params for x in c], color=colour, lw=1.6, label=labels[fit],
                ls="--" if fit == "approach3" else "-")
    t3 = chinchilla_tables().query("table == 'Table 3'")
    ax.plot(t3["flops"], t3["params"], "o", color="#0072B2", ms=4, mfc="white", label="Hoffmann et al. Table 3")
    lines = [f"{'run':16s} {'params':>8s} {'tokens':>8s} {'C = 6ND':>9s} {'tok/param':>9s} {'optimal N':>9s}"]
    for name, n, d in runs:
        flops = FLOPS_PER_PARAM_TOKEN * n * d
        ax.plot([flops], [n], marker="D", ms=5, color="#D55E00", ls="none")
        ax.annotate(name, (flops, n), textcoords="offset points", xytext=(5, -9), fontsize=7)
        lines.append(f"{name:16s} {n / 1e9:7,.1f}B {d / 1e12:7,.1f}T {flops:9.2e} {d / n:9,.0f} "
                     f"{compute_optimal(flops).params / 1e9:8,.0f}B")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training compute C (FLOPs, C = 6ND)")
    ax.set_ylabel("parameters N")
    ax.yaxis.set_major_formatter(_short_number)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=7, frameon=False, loc="upper left")
    return View(fig, "Compute-optimal parameters against the budget (Hoffmann et al. 2022; Besiroglu et al. 2024)\n"
                + "\n".join(lines))


# =========================================================================== chapter 11: cost
#: The GPU types chapter 11 compares by default: the training-class parts of the catalogue.
COST_GPUS = ("A100 80GB", "H100 SXM", "H200", "B200", "MI300X")


def render_cost_by_gpu(model="llama-3-70b", tokens: float = 1e11, seq: int = 8192, gpus=COST_GPUS,
                       mfu: float | None = None, prices: dict | None = None) -> View:
    """Chapter 11: the *finished job's* cost on each GPU type (bars, the MFU band as a range) by the hourly price
    (right), from :func:`~llmsizing.time_cost.cost_by_gpu` (fewest GPUs that hold a step, days, GPU-hours x price;
    the ranking follows price / dense peak). A mixture of experts too (chapter 18: EP layouts, its MFU warning)."""
    import numpy as np

    from ..time_cost import cost_by_gpu

    df = cost_by_gpu(model, tokens=tokens, seq=seq, gpus=gpus, mfu=mfu, prices=prices)
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
    ax.barh(y, mid, color=colors, xerr=err, error_kw={"ecolor": "0.3", "capsize": 3, "lw": 0.8})
    for yi, (_, r) in zip(y, ok.iterrows()):
        ax.annotate(f" {r['min_gpus']:.0f} GPUs, {r['days_on_min_gpus']:,.0f} d", (r["cost_usd_high"] / 1e3, yi),
                    va="center", fontsize=7, color="0.25")
    ax.set_yticks(y, list(ok["gpu"]), fontsize=8)
    ax.set_xlabel("cost of the finished job (thousand USD; bar: MFU band)", fontsize=8)
    ax.set_xlim(0, ok["cost_usd_high"].max() / 1e3 * 1.45)
    ax2.barh(y, ok["price_usd_per_gpu_hour"], color=colors, alpha=0.55)
    ax2.set_xlabel("price (USD per GPU-hour)", fontsize=8)
    for a in (ax, ax2):
        a.spines[["top", "right"]].set_visible(False)
        a.tick_params(labelsize=7)
    first = df.iloc[0]
    name = resolve_model_name(model)
    ax.set_title(f"{name}, {tokens:.3g} tokens of {seq:,}", fontsize=9, loc="left")
    lines = [f"{name}, {tokens:.3g} tokens of {seq:,}: cost of the job by GPU type (cheapest first)"]
    for _, r in df.iterrows():
        if not r["fits"]:
            lines.append(f"  {r['gpu']:<10s} does not fit: {r['why']}")
            continue
        lines.append(f"  {r['gpu']:<10s} ${r['price_usd_per_gpu_hour']:.2f}/h  {r['gpu_hours']:>12,.0f} GPU-h  "
                     f"${r['cost_usd']:>12,.0f} (${r['cost_usd_low']:,.0f}-${r['cost_usd_high']:,.0f})  "
                     f"min {r['min_gpus']:.0f} GPUs ({r['layout']}), {r['days_on_min_gpus']:,.0f} days on them")
    lines += [f"cheapest job: {first['gpu']}"] if first["fits"] else []
    lines += [f"warning: {w}" for w in df.attrs.get("warnings", ())[:1]]     # a mixture of experts' MFU warning
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
    p0 = g.price_usd_per_gpu_hour if price is None else check_number("price", price, minimum=0.01, maximum=1e3)
    mfu = check_number("mfu", mfu, minimum=0.01, maximum=1.0)
    n = check_int("n_gpus", n_gpus)
    t = training_time(model, tokens=tokens, gpu=g, n_gpus=n, seq=seq, mfu=mfu, price_usd_per_gpu_hour=p0)
    prices = [p0 * f for f in SENSITIVITY_PRICE_FACTORS]
    mfus = sorted(set(SENSITIVITY_MFUS) | {round(mfu, 4)})
    grid = cost_sensitivity(model, tokens=tokens, gpu=g, seq=seq, prices=prices, mfus=mfus)
    def build(fig):                      # the heat map and its colour scale, side by side
        return fig.add_axes((0.1, 0.15, 0.72, 0.75)), fig.add_axes((0.835, 0.15, 0.025, 0.75))

    fig, (ax, cax) = figure_axes(7.6, 3.3, into, ("cost sensitivity",), build)
    z = grid.to_numpy() / 1e6
    norm = _log_norm(z)
    ax.imshow(z, cmap="YlOrRd", aspect="auto", origin="lower", norm=norm)
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
    cax.set_yscale("log")
    cax.set_xlim(0, 1)
    cax.set_ylim(norm.vmin, norm.vmax)
    cax.set_xticks([])
    cax.yaxis.tick_right()
    cax.yaxis.set_label_position("right")
    cax.set_yticks(cb_ticks, [f"{v:g}" for v in cb_ticks])
    cax.yaxis.set_minor_locator(NullLocator())
    cax.set_ylabel("job cost (million USD)", fontsize=8)
    cax.tick_params(labelsize=7)
    ax.set_title(f"{t.model}, {tokens:.3g} tokens on {g.name}: cost of the job (million USD)", fontsize=9,
                 loc="left")
    summary = (f"{t.model}, {tokens:.3g} tokens of {seq:,} on {g.name} at ${p0:.2f}/GPU-hour and MFU {mfu:.0%}: "
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
    fig.suptitle(f"{name}, {tokens:.3g} tokens, global batch {global_batch} x {seq:,} on {gpu}", fontsize=9,
                 x=0.08, y=0.98, ha="left")
    lines = [f"{name}, {tokens:.3g} tokens of {seq:,} on {gpu}, TP{tp} PP{pp} ZeRO-{zero}, global batch "
             f"{global_batch}, micro-batch {micro_batch}: as dp grows"]
    for _, r in df.iterrows():
        lines.append(f"  {r['n_gpus']:>6,.0f} GPUs (dp {r['dp']:>4.0f}, {r['grad_accum']:>4.0f} micro-batches): "
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
                vals.append(goodput(model, n_gpus=int(n), restart_min=restart_min, storage_gb_per_s=bw).goodput)
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


# =========================================================================== chapter 12: the planner
#: GPU types and settings of chapter 12's worked example (and the planner widget's defaults).
PLAN_GPUS = ("H100 SXM", "H200", "B200", "A100 80GB")


def _cp_text(r, sep: str = " ") -> str:
    """``" cp=16"`` for a plan row with context parallelism, ``""`` without (or for a table from before the
    ``cp`` column)."""
    cp = int(getattr(r, "cp", 1))
    return f"{sep}cp={cp}" if cp > 1 else ""


def _plan_label(r) -> str:
    """A front plan in one line: GPUs, layout and recomputation."""
    from ..planner import recompute_label
    return (f"{int(r.n_gpus):,} x {r.gpu} (tp={r.tp},{_cp_text(r, ' ')}{',' if _cp_text(r) else ''} pp={r.pp}, "
            f"dp={r.dp}{f', ep={r.ep}' if r.get('ep', 1) > 1 else ''}, ZeRO-{r.zero}"
            f"{', SP' if r.sp else ''}), micro-batch {r.micro_batch} x {r.grad_accum}, recompute={recompute_label(r, True)}")


def render_plan(model="llama-3-70b", *, tokens: float = 1e12, gpus=PLAN_GPUS, seq: int = 8192,
                global_batch: int = 512, max_gpus: int | None = 4096, deadline_days: float | None = None,
                budget_usd: float | None = None, highlight=None, plans=None, kernel_efficiency: float | None = None,
                overlap: float | None = None, into: Figure | None = None, all_plans=None) -> View:
    """The planner's answer (chapter 12, "How many GPUs do you need?"): left, days against cost (log axes) of
    every plan :func:`~llmsizing.planner.plan` finds (grey), each GPU type's own front (thin line) and the
    time-vs-cost front (dots coloured by GPU type); right, the chosen plan's most loaded GPU (what is alive at
    its peak, :func:`~llmsizing.memory.training_memory`, against the capacity and the usable share) and its step
    time by part (:func:`~llmsizing.layouts.step_time`: compute, bubble, each group's communication before
    overlap). ``highlight`` is a row label of the plans (default: the first front plan, the cheapest).

    ``plans`` may pass :func:`~llmsizing.planner.plan`'s result for these arguments (the widget caches it);
    otherwise it is computed. No plan raises the planner's :class:`~llmsizing.planner.NoPlanError`.

    A limit that shapes nothing is said in the figure and the summary (:func:`plan_notes`; ``all_plans``: the
    table before the deadline and budget)."""
    import numpy as np

    from ..catalog import get_gpu, resolve_model
    from ..layouts import USABLE_FRACTION, step_time
    from ..memory import training_memory
    from ..moe_layouts import route_max_nodes
    from ..parallel import Parallel
    from ..planner import _pareto, plan, recompute_kwargs

    eff, ovl, m = kernel_efficiency, overlap, resolve_model(model, moe=True)   # a mixture of experts: chapter 18
    if plans is None:
        plans = plan(m, tokens=tokens, gpus=gpus, seq=seq, global_batch=global_batch, max_gpus=max_gpus,
                     deadline_days=deadline_days, budget_usd=budget_usd, kernel_efficiency=eff, overlap=ovl)
    front = plans[plans["pareto"]]
    if front.empty:
        raise ValueError("plans must hold at least one plan on the front (planner.plan's result)")
    if highlight is None:
        highlight = front.index[0]
    if highlight not in plans.index:
        raise ValueError(f"highlight must be a row label of the plans (0 to {len(plans) - 1:,}) or None; "
                         f"got {highlight!r}")
    r = plans.loc[highlight]
    g = get_gpu(r.gpu)
    par = Parallel(tp=int(r.tp), pp=int(r.pp), dp=int(r.dp), zero=int(r.zero), sp=bool(r.sp), ep=int(r.get("ep", 1)),
                   cp=int(r.get("cp", 1)), cp_comm=plans.attrs.get("cp_comm", "p2p"))
    run = dict(batch=int(r.micro_batch), seq=seq, grad_accum=int(r.grad_accum), **recompute_kwargs(r))
    tm = training_memory(m, parallel=par, **run)
    st = step_time(m, g, par, kernel_efficiency=eff, overlap=ovl, max_nodes=route_max_nodes(m), **run)

    def build(fig):
        gs = fig.add_gridspec(2, 2, width_ratios=[1.1, 1], height_ratios=[1, 1.3], left=0.1, right=0.965,
                              bottom=0.11, top=0.93, wspace=0.3, hspace=1.25)
        return fig.add_subplot(gs[:, 0]), fig.add_subplot(gs[0, 1]), fig.add_subplot(gs[1, 1])

    fig, (ax, ax_m, ax_t) = figure_axes(7.9, 4.4, into, ("plan",), build)

    # ---- left: every plan, each GPU type's front, the front, the chosen plan
    ax.plot(plans["days"], plans["cost_usd"], ls="none", marker=".", ms=2.5, color="0.8", zorder=1,
            label=f"{len(plans):,} plans that fit")
    groups = _plan_groups(plans)
    for name, days, cost in groups["own"]:
        ax.plot(days, cost, color=GPU_COLORS.get(name, "0.4"), lw=1.0, alpha=0.6, zorder=2,
                label=f"best on {name} alone")
    ax.plot(*groups["front"], color="0.2", lw=0.8, zorder=3)
    for name, days, cost in groups["front_by_gpu"]:
        ax.plot(days, cost, ls="none", marker="o", ms=4.5, color=GPU_COLORS.get(name, "0.4"),
                zorder=4, label=f"front: {name}")
    ax.plot([r.days], [r.cost_usd], ls="none", marker="o", ms=12, mfc="none", mec="#D55E00", mew=2, zorder=5,
            label="chosen plan")
    if deadline_days:
        ax.axvline(deadline_days, color="#D55E00", lw=0.9, ls="--")
    if budget_usd:
        ax.axhline(budget_usd, color="#D55E00", lw=0.9, ls="--")
    _log_axis(ax.xaxis, plans["days"].min(), plans["days"].max(), lambda v: f"{v:g}")
    _log_axis(ax.yaxis, plans["cost_usd"].min(), plans["cost_usd"].max(), _usd)
    ax.set_xlabel("days of training (log scale)")
    ax.set_ylabel("cost of the run, USD (log scale)")
    ax.spines[["top", "right"]].set_visible(False)
    # (the handles' styles follow from the GPU names in the labels)
    _kept_legend(ax, ("plan", *ax.get_legend_handles_labels()[1]),
                 lambda: ax.legend(fontsize=6.5, frameon=True, framealpha=0.9, edgecolor="none", loc="upper right"))
    ax.set_title(f"{m.name}, {_tokens(tokens)} tokens, global batch {global_batch:,} x {seq:,}", fontsize=8.5,
                 loc="left")

    # ---- right, top: what is alive on the most loaded GPU at its peak
    parts = {k: v for k, v in tm.phase_parts[tm.peak_phase].items() if v > 0}
    parts["overhead"] = tm.overhead_bytes
    widths = np.array(list(parts.values())) / GiB
    handles = _fast_hbars(ax_m, np.zeros(len(parts)), widths, left=np.cumsum(widths) - widths, height=0.6,
                          colors=[COLORS.get(k, "0.5") for k in parts])    # a bar per part, side by side
    left = float(widths.sum())
    ax_m.axvline(g.memory_gib, color="0.15", lw=1.1, ls="--")
    ax_m.axvline(USABLE_FRACTION * g.memory_gib, color="0.45", lw=0.9, ls=":")
    ax_m.text(g.memory_gib, 0.42, f" {g.memory_gib:.0f} GiB", fontsize=7, va="bottom", ha="right")
    ax_m.set_xlim(0, 1.05 * max(left, g.memory_gib))
    ax_m.set_ylim(-0.5, 0.6)
    ax_m.set_yticks([])
    ax_m.set_xlabel(f"GiB on the most loaded {g.name} (peak: {tm.peak_phase})", fontsize=8)
    _kept_legend(ax_m, ("plan memory", *parts),             # (the colours follow from the parts' names)
                 lambda: ax_m.legend(handles, list(parts), fontsize=6.5, frameon=False, ncols=3, loc="upper center",
                                     bbox_to_anchor=(0.5, -0.62)))
    if _cp_text(r):                   # one more degree: the GPU's name is in the summary, not the title
        ax_m.set_title(f"chosen: {int(r.n_gpus):,} GPUs, tp={r.tp}{_cp_text(r)} pp={r.pp} dp={r.dp} ZeRO-{r.zero}",
                       fontsize=7.5, loc="left")
    else:
        ax_m.set_title(f"chosen: {int(r.n_gpus):,} x {r.gpu}, tp={r.tp} pp={r.pp} dp={r.dp} ZeRO-{r.zero}",
                       fontsize=8.5, loc="left")

    # ---- right, bottom: where the step's time goes
    _step_time_bars(ax_t, st, fontsize=7.5)
    ax_t.set_xlabel("seconds per step (communication before overlap, "
                    + ("hidden group by group)" if ovl is None else f"{ovl:.0%} of it hidden)"), fontsize=7.5)
    ax_t.set_title(f"step {st.step_s:.2f} s, MFU {r.mfu:.0%}: {r.days:,.1f} days, {_usd(r.cost_usd)}",
                   fontsize=8.5, loc="left")

    notes = plan_notes(plans, global_batch=global_batch, max_gpus=max_gpus, deadline_days=deadline_days,
                       budget_usd=budget_usd, all_plans=all_plans)
    if notes:                 # bottom right of the left panel: below the cloud of plans, away from the front
        import textwrap
        ax.text(0.985, 0.015, "\n".join(textwrap.fill(n, 40) for n in notes), transform=ax.transAxes, ha="right",
                va="bottom", multialignment="left", fontsize=6.5,
                color="0.1", bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="#D55E00", lw=0.6, alpha=0.95),
                zorder=6)

    rank = list(front.index).index(highlight) + 1 if highlight in front.index else None
    lines = [f"{m.name}, {_tokens(tokens)} tokens of {seq:,}, global batch {global_batch:,} sequences "
             f"({global_batch * seq / 1e6:.2f}M tokens), on {', '.join(plans['gpu'].unique())}"
             + (f", at most {max_gpus:,} GPUs" if max_gpus else "")
             + (f", deadline {deadline_days:g} days" if deadline_days else "")
             + (f", budget {_usd(budget_usd)}" if budget_usd else "")
             + f": {len(plans):,} plans fit, {len(front)} on the time-vs-cost front",
             *(f"note: {n}" for n in notes),
             f"chosen ({f'front #{rank}' if rank else 'not on the front'}): {_plan_label(r)}",
             f"  {tm.total_bytes / GiB:.1f} GiB of {g.memory_gib:.1f} GiB on the most loaded GPU "
             f"(usable {USABLE_FRACTION:.0%}: {USABLE_FRACTION * g.memory_gib:.1f} GiB)",
             f"  step {st.step_s:.2f} s: compute {st.compute_s:.2f} + bubble {st.bubble_s:.2f} + exposed "
             f"communication {st.exposed_comm_s:.2f} (dp {st.comm_by_group_s['dp']:.2f}, tp "
             f"{st.comm_by_group_s['tp']:.2f}, pp {st.comm_by_group_s['pp']:.2f}"
             + (f", cp {st.comm_by_group_s['cp']:.2f}" if "cp" in st.comm_by_group_s else "")
             + f" before overlap); MFU {r.mfu:.0%}",
             f"  {r.days:,.1f} days ({r.days_low:,.1f}-{r.days_high:,.1f}), {r.gpu_hours:,.0f} GPU-hours, "
             f"{_usd(r.cost_usd)} ({_usd(r.cost_usd_low)}-{_usd(r.cost_usd_high)})",
             *([f"assumes: {plans.attrs['assumes']}"] if plans.attrs.get("assumes") else []),
             "the front, cheapest first:"]
    for index, line in groups["front_lines"]:
        lines.append(f"{'>' if index == highlight else ' '}{line}")
    return FixedView(fig, "\n".join(lines))


def plan_notes(plans, *, global_batch: int, max_gpus: int | None = None, deadline_days: float | None = None,
               budget_usd: float | None = None, all_plans=None) -> list[str]:
    """Why a planner limit changes nothing in its figure (issue 25), from :func:`~llmsizing.planner.plan`'s table
    ``plans`` (and ``all_plans``, the same search before the deadline and budget, if known): a ``max_gpus`` above
    the front's largest GPU count (either no plan that fits uses more GPUs at this global batch, since each has
    ``dp x pp <= global_batch / micro-batch`` and ``tp`` within a node, or those that do are all slower than the
    front's fastest), and a deadline or budget that drops no plan. One sentence per limit. Formatting only."""
    from ..planner import check_global_batch

    global_batch, notes = check_global_batch(global_batch), []
    front, searched = plans[plans["pareto"]], plans if all_plans is None else all_plans
    if max_gpus is not None and len(front) and int(front["n_gpus"].max()) < max_gpus:
        end, largest = int(front["n_gpus"].max()), int(searched["n_gpus"].max())
        why = (f"no plan that fits uses more than {largest:,}" if largest < max_gpus else
               f"plans with up to {largest:,} GPUs fit, but none is faster")
        notes.append(f"the front ends at {end:,} GPUs (limit {max_gpus:,}): more does not help at this global "
                     f"batch ({global_batch:,} sequences): {why}")
    if all_plans is not None and len(all_plans) and deadline_days and all_plans["days"].max() <= deadline_days:
        notes.append(f"deadline {deadline_days:g} days: every plan meets it (the slowest takes "
                     f"{all_plans['days'].max():,.1f} days)")
    if all_plans is not None and len(all_plans) and budget_usd and all_plans["cost_usd"].max() <= budget_usd:
        notes.append(f"budget {_usd(budget_usd)}: every plan is within it (the dearest costs "
                     f"{_usd(all_plans['cost_usd'].max())})")
    return notes


#: What :func:`_plan_groups` found for the last few plans tables, keyed by their content (a hash of every
#: value and the index): a widget redraw that moves the chosen plan, or returns to a table it saw before, reuses
#: it; a table changed in place is a new key.
_PLAN_GROUPS_KEPT: dict = {}
_PLAN_GROUPS_KEEP = 8


def _plan_groups(plans) -> dict:
    """What :func:`render_plan` draws from ``plans`` whatever plan is chosen: each GPU type's own front
    (``own``: name, days, cost, fastest first), the time-vs-cost front (``front``: days, cost, fastest first;
    ``front_by_gpu`` per GPU type) and the summary's line per front plan (``front_lines``: row label, text).
    Kept for the last few tables, by content (~1 ms to hash 3,000 plans), and computed for any other."""
    import pandas as pd

    from ..planner import _pareto, recompute_label

    key = (tuple(plans.columns), int(pd.util.hash_pandas_object(plans, index=True).sum()))
    if key in _PLAN_GROUPS_KEPT:
        return _PLAN_GROUPS_KEPT[key]
    own = []
    for name, sub in plans.groupby("gpu", sort=False):
        best = sub[_pareto(sub["days"].to_numpy(), sub["cost_usd"].to_numpy(),
                           sub["memory_per_gpu_bytes"].to_numpy())].sort_values("days")
        own.append((name, best["days"].to_numpy(), best["cost_usd"].to_numpy()))
    front = plans[plans["pareto"]]
    fs = front.sort_values("days")
    lines = []
    for i, f in enumerate(front.itertuples(), 1):                  # (itertuples: iterrows is ~10x slower)
        lines.append((f.Index, f"{i:3d}. {int(f.n_gpus):>6,} x {f.gpu:<9s} tp={f.tp}{_cp_text(f)} "
                     f"pp={f.pp:<2d} dp={f.dp:<4d} ZeRO-{f.zero} mb={f.micro_batch} x{f.grad_accum:<4d} "
                     f"{recompute_label(f):<9s} {f.memory_per_gpu_bytes / GiB:6.1f} GiB  MFU {f.mfu:4.0%}  "
                     f"{f.days:8,.1f} days  {_usd(f.cost_usd):>8s}"))
    out = {"own": own, "front": (fs["days"].to_numpy(), fs["cost_usd"].to_numpy()),
           "front_by_gpu": [(name, sub["days"].to_numpy(), sub["cost_usd"].to_numpy())
                            for name, sub in fs.groupby("gpu", sort=False)],
           "front_lines": lines}
    if len(_PLAN_GROUPS_KEPT) >= _PLAN_GROUPS_KEEP:
        del _PLAN_GROUPS_KEPT[next(iter(_PLAN_GROUPS_KEPT))]          # the oldest
    _PLAN_GROUPS_KEPT[key] = out
    return out


# =========================================================================== chapter 13: case studies
def render_prediction_check(rows) -> View:
    """Predicted over published GPU-hours, one row per run, on a log axis centred on 1 (a dot at the central
    estimate, a bar over its range): chapter 13's ("Case studies") check of the library against what was
    reported. ``rows`` is a sequence of mappings with ``label``, ``gpu_hours``, ``gpu_hours_low``,
    ``gpu_hours_high`` (from :class:`~llmsizing.time_cost.TrainingTime`, e.g. ``run_from_step(...).time``)
    and ``published_gpu_hours`` (> 0)."""
    import math

    from .._validate import check_number, check_sequence

    rows = [dict(r) for r in check_sequence("rows", rows, example='[{"label": ..., "gpu_hours": ...}]')]
    for i, r in enumerate(rows):
        missing = {"label", "gpu_hours", "gpu_hours_low", "gpu_hours_high", "published_gpu_hours"} - set(r)
        if missing:
            raise ValueError(f"rows[{i}] lacks {sorted(missing)}")
        check_number(f"rows[{i}]['published_gpu_hours']", r["published_gpu_hours"], allow_equal=False)
    height = 0.9 + 0.38 * len(rows)
    fig, ax = _fixed_figure(7.6, height, left=0.45, right=0.97, bottom=0.62 / height, top=1 - 0.12 / height)
    ys = list(range(len(rows)))[::-1]
    lines, ratios = [], [1.0]
    for y, r in zip(ys, rows):
        pub = r["published_gpu_hours"]
        lo, mid, hi = (r[k] / pub for k in ("gpu_hours_low", "gpu_hours", "gpu_hours_high"))
        ratios += [lo, hi]
        ax.plot([lo, hi], [y, y], color="#0072B2", lw=6, alpha=0.3, solid_capstyle="butt")
        ax.plot([mid], [y], "o", color="#0072B2", ms=6)
        ax.text(hi * 1.06, y, f"{mid:.2f}x", va="center", fontsize=8)
        lines.append(f"{r['label']}: predicted {r['gpu_hours']:,.3g} GPU-hours ({r['gpu_hours_low']:,.3g} to "
                     f"{r['gpu_hours_high']:,.3g}), published {pub:,.3g}: {mid:.2f}x ({lo:.2f} to {hi:.2f})")
    ax.axvline(1.0, color="#D55E00", lw=1.2, ls="--")
    ax.set_xscale("log")
    span = max(abs(math.log(x)) for x in ratios) * 1.35
    ax.set_xlim(math.exp(-span), math.exp(span))
    ticks = [t for t in (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0) if math.exp(-span) <= t <= math.exp(span)]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xticks([], minor=True)
    ax.set_yticks(ys, [r["label"] for r in rows], fontsize=8)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("predicted / published GPU-hours (dot: central, bar: MFU band; 1 = exact)", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return FixedView(fig, "\n".join(lines))


# =========================================================================== chapter 14: the seeds' claims, checked
_AUDIT_STYLES = {"holds": ("#009E73", "o"), "needs CPU offload": ("#0072B2", "D"), "off": ("#D55E00", "s"),
                 "wrong in kind": ("#CC79A7", "^")}


def render_seed_audit(df=None, *, band: float | None = None, article: str = "all",
                      into: Figure | None = None) -> View:
    """Every recomputed seed claim as one point: the library's value (x) against the claimed value (y), both
    in the claim's own unit, on log axes, with the line y = x and the band of the verdict rule
    (:data:`~llmsizing.audit.BAND`). Points above the band are claims that are too high, below it too low.
    Colour and marker give the verdict (holds / needs CPU offload / off by more than the band / wrong in kind).
    ``df`` defaults to :func:`~llmsizing.audit.audit_table` judged with ``band`` (default
    :data:`~llmsizing.audit.BAND`; give either ``df`` or ``band``); ``article`` ("all", or a seed's number such as
    "000") keeps one article's claims. Taught in chapter 14."""
    import numpy as np
    from matplotlib.ticker import LogLocator, NullLocator

    from .._validate import check_choice
    from ..audit import BAND, KINDS, audit_table, verdict_counts, verdict_kind

    if df is not None and band is not None:
        raise ValueError("give either df (an audit table) or band, not both")
    band = BAND if band is None else band
    df = audit_table(band) if df is None else df
    articles = ["all"] + sorted(df["article"].unique())
    if check_choice("article", article, articles) != "all":
        df = df[df["article"] == article]
    kinds = df["verdict"].map(verdict_kind)
    holds = kinds == "holds"
    groups = {k: kinds == k for k in KINDS}
    fig, ax = _inch_margins(6.4, 4.4, left=0.7, bottom=0.5, top=0.2, right=0.2, into=into)
    x = df["library"].to_numpy(float)
    y = df["claimed"].to_numpy(float)
    lo = 10 ** np.floor(np.log10(min(x.min(), y.min())))
    hi = 10 ** np.ceil(np.log10(max(x.max(), y.max())))
    line = np.array([lo, hi])
    ax.fill_between(line, line / band, line * band, color="0.85", lw=0, zorder=0,
                    label=f"within {band - 1:.0%} (holds)")
    ax.plot(line, line, color="0.4", lw=1, zorder=1, label="claimed = library")
    counts = verdict_counts(df)
    loose = (np.abs(np.log(y / x)) > np.log(band)) & holds.to_numpy()   # holds as a bound or a range only
    for name, mask in groups.items():
        color, marker = _AUDIT_STYLES[name]
        m = mask.to_numpy() & ~loose
        ax.scatter(x[m], y[m], s=22, color=color, marker=marker, alpha=0.8, edgecolors="none", zorder=2,
                   label=f"{name} ({counts[name]})")
        if name == "holds" and loose.any():
            ax.scatter(x[loose], y[loose], s=26, facecolors="none", edgecolors=color, marker=marker, zorder=2,
                       label=f"  of which as a bound or range only ({int(loose.sum())})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    for axis in (ax.xaxis, ax.yaxis):                 # decades only: minor log ticks triple a redraw
        axis.set_major_locator(LogLocator(base=10, numticks=20))
        axis.set_major_formatter(_short_number)       # plain "1k", "1M": mathtext labels are slow to lay out
        axis.set_minor_locator(NullLocator())
    ax.set_xlabel("what the library computes (in the claim's unit: GB, days, USD, GPUs, tokens/s, ...)")
    ax.set_ylabel("what the seed article claims")
    ax.text(lo * 2, hi / 3, "claim too high", fontsize=8, color="0.35", va="top")
    ax.text(hi / 2, lo * 2, "claim too low", fontsize=8, color="0.35", ha="right")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(0.0, 0.9))
    ax.spines[["top", "right"]].set_visible(False)
    r = df["ratio"].to_numpy(float)
    worst = df.iloc[int(np.argmax(np.abs(np.log(r))))]
    label = "" if article == "all" else f"seed {article}, "
    summary = (f"{label}{len(df)} claims: {counts['holds']} hold (within {band - 1:.0%}), "
               f"{counts['needs CPU offload']} need CPU offload, "
               f"{counts['off']} are off by more, {counts['wrong in kind']} are wrong in kind\n"
               f"claimed / library: median {np.median(r):.2f}, from {r.min():.3g} to {r.max():.3g}; "
               f"furthest: {worst['id']} ({worst['ratio']:.3g})")
    return FixedView(fig, summary)
