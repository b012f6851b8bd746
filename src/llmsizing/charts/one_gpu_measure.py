"""Part I, chapter 5 ("Measure it yourself"): the library's activation prediction against PyTorch's
measurements (:func:`render_prediction_vs_measurement`), the live bytes of one measured training step
against the library's phases (:func:`render_step_timeline`, also in chapter 4), and any measured step's
phases against the library's at a chosen working set (:func:`render_measured_step`, the chapter's widget).
:mod:`~llmsizing.charts.one_gpu` imports every name here and re-exports it.

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from .base import FixedView, View, _fast_hbars, _line, figure_axes, new_figure


# =========================================================================== chapter 5: measure it yourself
#: Colour per precision mode and line style per attention kernel in chapter 5's figures.
MEASURE_COLORS = {"fp32": "#0072B2", "bf16": "#D55E00", "autocast-bf16": "#009E73"}
MEASURE_STYLES = {"eager": "-", "flash": "--"}
MEASURE_SWEEPS = ("seq", "batch", "recompute", "all")


def render_prediction_vs_measurement(sweep: str = "seq", style: str = "gpt", dropout: bool = False) -> View:
    """The library's activation prediction (lines / open markers) against PyTorch measurements (filled
    markers) from ``data/activation_measurements.csv``, with GPU-style 1-byte dropout masks. ``sweep``:
    ``"seq"`` (batch 2, no recomputation), ``"batch"`` (256 tokens), ``"recompute"`` (batch 2 x 256 tokens),
    or ``"all"`` (every configuration: predicted vs measured, with the +/-5% band). Chapter 5."""
    import numpy as np

    from .._validate import check_bool, check_choice
    from ..measurements import TOLERANCE, compare_measurements

    check_choice("sweep", sweep, MEASURE_SWEEPS)
    check_choice("style", style, ("gpt", "llama"))
    check_bool("dropout", dropout)
    df = compare_measurements()
    df = df[(df["style"] == style)]
    MiB = 2**20
    fig, ax = new_figure(7.2, 3.6)
    lines = []
    if sweep == "all":
        for g, sub in df.groupby("group", sort=False):
            mode = sub["mode"].iloc[0]
            ax.scatter(sub["measured_bytes"] / MiB, sub["predicted_bytes"] / MiB, s=14,
                       color=MEASURE_COLORS[mode], label=g, alpha=0.8)
            worst = sub.loc[sub["error"].abs().idxmax(), "error"]
            lines.append(f"{g:<15s} {len(sub):3d} configurations, worst error {worst:+.2%}")
        lo, hi = df["measured_bytes"].min() / MiB / 1.2, df["measured_bytes"].max() / MiB * 1.2
        xs = np.geomspace(lo, hi, 50)
        ax.plot(xs, xs, color="0.2", lw=1, label="prediction = measurement")
        ax.fill_between(xs, xs * (1 - TOLERANCE), xs * (1 + TOLERANCE), color="0.85", zorder=0,
                        label=f"±{TOLERANCE:.0%}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured activations (MiB)")
        ax.set_ylabel("predicted (MiB)")
        ax.set_title(f"tiny {style.upper() if style == 'gpt' else 'Llama'}-style model: every configuration",
                     fontsize=9, loc="left")
    else:
        sub = df[df["dropout"].gt(0) == dropout]
        if sweep == "seq":
            sub, x, xlabel = sub[(sub["batch"] == 2) & (sub["recompute"] == "none")], "seq", "sequence length"
        elif sweep == "batch":
            sub, x, xlabel = sub[(sub["seq"] == 256) & (sub["recompute"] == "none")], "batch", "micro-batch"
        else:
            sub = sub[(sub["batch"] == 2) & (sub["seq"] == 256)].copy()
            sub["rc"] = sub["recompute"].map({"none": 0, "selective": 1, "full": 2})
            x, xlabel = "rc", "recomputation"
        for (mode, att), ser in sub.groupby(["mode", "attention"], sort=False):
            if len(ser) < 2:
                continue
            ser = ser.sort_values(x)
            c, ls = MEASURE_COLORS[mode], MEASURE_STYLES[att]
            if mode != "autocast-bf16":    # autocast is predicted by the bf16 line: draw only its dots
                ax.plot(ser[x], ser["predicted_bytes"] / MiB, color=c, ls=ls, lw=1.2, label=f"{mode}, {att}")
            ax.plot(ser[x], ser["measured_bytes"] / MiB, color=c, ls="none",
                    marker="o" if att == "eager" else "s", ms=4, label=f"{mode}, {att} (measured)")
            worst = ser.loc[ser["error"].abs().idxmax(), "error"]
            lines.append(f"{mode:<14s}{att:<6s} worst error {worst:+7.2%} over {len(ser)} points")
        if sweep == "recompute":
            ax.set_xticks([0, 1, 2], ["none", "selective", "full"])
        else:
            ax.set_xscale("log", base=2)
            vals = sorted(sub[x].unique())
            ax.set_xticks(vals, [str(v) for v in vals])
        ax.set_xlabel(xlabel)
        ax.set_ylabel("activations (MiB)")
        ax.set_title(f"{style}-style, dropout {'on' if dropout else 'off'}: lines = formula (autocast uses "
                     "the bf16 line), markers = PyTorch", fontsize=8, loc="left")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    head = f"Prediction vs measurement ({style}-style, sweep={sweep}" + \
        (")" if sweep == "all" else f", dropout={'on' if dropout else 'off'})") + \
        ", error = predicted/measured - 1, 1-byte masks:"
    return View(fig, "\n".join([head] + ["  " + ln for ln in lines]))


#: The measured phases of ``data/step_timeline_example.csv``, in order, each drawn as its own stretch: the
#: library's (memory.PHASES, footprint.PHASE_KEYS) and the loss's own forward, which the library has no phase
#: for: what it keeps is in what the forward leaves, and its transient (the logits upcast to fp32, then
#: ``log_softmax``) stays below what the loss backward adds, so it never holds the peak (chapter 4b).
_TIMELINE_PHASES = {"forward": "forward", "loss_forward": "loss forward", "loss_backward": "loss backward",
                    "head_backward": "loss backward", "backward": "backward", "optimizer": "optimizer step"}
_PHASE_SHADES = {"forward": "#E8EEF7", "loss forward": "#E6D8EE", "loss backward": "#F9E3E3",
                 "backward": "#F3EBD9", "optimizer step": "#E6F2E6"}


def render_step_timeline() -> View:
    """Live bytes over one measured training step (``data/step_timeline_example.csv``: a real Hugging Face
    model on the CPU, op by op), with the library's phases (:func:`llmsizing.memory.training_memory`) over the
    same stretches: the forward's value is what the forward, the loss's included, leaves for the backward (a
    mark where the loss backward begins); each later phase's is the most it holds (a level). The loss's own
    forward has no library value (see ``_TIMELINE_PHASES``). The step's peak is marked, measured and
    predicted. Chapters 4 and 5."""
    import pandas as pd

    from ..measurements import STEP_TIMELINE_CSV, load_steps, predict_step

    tl = pd.read_csv(STEP_TIMELINE_CSV)
    cfg = tl.iloc[0]
    steps = load_steps()
    keys = ["stack", "model_class", "mode", "attention", "recompute", "optimizer_impl", "batch", "seq"]
    row = steps[(steps[keys] == cfg[keys].values).all(axis=1)].iloc[0]
    pred = predict_step(row)
    MiB = 2**20
    tl["drawn_phase"] = tl["phase"].map(_TIMELINE_PHASES)
    tl = tl[tl["drawn_phase"].notna()]
    fig, ax = new_figure(7.4, 3.4)
    spans = {}
    for ph in _PHASE_SHADES:
        sub = tl[tl["drawn_phase"] == ph]
        if len(sub):
            spans[ph] = (sub["op_index"].min(), sub["op_index"].max())
            ax.axvspan(*spans[ph], color=_PHASE_SHADES[ph], zorder=0, lw=0)
    width = tl["op_index"].max() - tl["op_index"].min()
    for ph, (x0, x1) in spans.items():
        if x1 - x0 >= 0.1 * width:
            ax.annotate(ph, ((x0 + x1) / 2, 1.0), xycoords=("data", "axes fraction"), ha="center", va="top",
                        fontsize=7.5, color="0.3", xytext=(0, -2), textcoords="offset points")
        else:        # the loss's forward and backward, a few dozen ops: their names upright,
            left = ph == "loss forward"     # on the outer side of each stripe so that they never overlap
            ax.annotate(ph, (x0 if left else x1, 0.03), xycoords=("data", "axes fraction"), rotation=90,
                        ha="right" if left else "left", va="bottom", fontsize=7.5, color="0.3")
    ax.plot(tl["op_index"], tl["live_bytes"] / MiB, color="#D55E00", lw=1.2, label="measured live bytes")
    ax.axhline(row["baseline_bytes"] / MiB, color="#0072B2", lw=1, ls=":",
               label="weights + optimizer states (measured)")
    levels = [ph for ph in spans if ph in pred.phases_bytes and ph != "forward"]
    for i, ph in enumerate(levels):
        ax.hlines(pred.phases_bytes[ph] / MiB, *spans[ph], colors="0.15", lw=1.6, linestyles="--",
                  label="library: the most the phase holds" if i == 0 else None)
    end_x = spans["loss backward"][0]                  # the forward (the loss's included) is over
    ax.plot([end_x], [pred.phases_bytes["forward"] / MiB], ls="none", marker="D", ms=5, color="0.15",
            label="library: what the forward leaves")
    top = tl.loc[tl["live_bytes"].idxmax()]
    where = top["drawn_phase"]
    ax.annotate(f"peak of the step, in the {where}:\n{top['live_bytes'] / MiB:,.1f} MiB measured, "
                f"{pred.peak_bytes / MiB:,.1f} MiB library"
                + ("" if pred.peak_phase == where else f" (in its {pred.peak_phase})"),
                (top["op_index"], top["live_bytes"] / MiB), xytext=(24, 0), textcoords="offset points",
                ha="left", va="center", fontsize=7.5, arrowprops=dict(arrowstyle="-", color="0.3", lw=0.6))
    ax.set_xlabel("operation in the step (index)")
    ax.set_ylabel("MiB alive")
    ax.set_ylim(0, 1.18 * max(tl["live_bytes"].max(), pred.peak_bytes) / MiB)
    ax.set_title(f"{row['model_class']} ({int(row['n_params']) / 1e6:.0f}M params), {row['mode']}, "
                 f"{row['attention']}, batch {int(row['batch'])} x {int(row['seq'])} tokens, AdamW "
                 f"{row['optimizer_impl']} (CPU)", fontsize=8.5, loc="left")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    lines = [f"{row['model_class']}, {row['mode']}, {row['attention']}, "
             f"{int(row['batch'])} x {int(row['seq'])} tokens, each phase measured vs library (MiB):",
             f"  {'':<16s}{'measured':>9s}{'library':>9s}"]
    measured = {"forward": row["forward_end_bytes"],
                "loss backward": max(row["loss_backward_max_bytes"], row["head_backward_max_bytes"]),
                "backward": row["backward_max_bytes"], "optimizer step": row["optimizer_max_bytes"]}
    notes = {"forward": "  <- its end, the loss's kept tensors included"}
    for ph in _PHASE_SHADES:
        if ph not in measured:
            lines.append(f"  {ph:<16s}{row['loss_forward_max_bytes'] / MiB:9.1f}{'-':>9s}"
                         "            at most (no library phase: below the loss backward)")
            continue
        mark = "  <- peak of the step" if ph == pred.peak_phase else notes.get(ph, "")
        lines.append(f"  {ph:<16s}{measured[ph] / MiB:9.1f}{pred.phases_bytes[ph] / MiB:9.1f}"
                     f"  ({pred.phases_bytes[ph] / measured[ph] - 1:+.1%}){mark}")
    return View(fig, "\n".join(lines))


# ======================================================================== chapter 5's widget: a measured step
#: Chapter 5's widget starts here: the step of ``render_step_timeline`` (Hugging Face's Llama, autocast,
#: SDPA, 2 x 512 tokens) at the library's working set (``None``:
#: :data:`~llmsizing.memory.LAYER_WORKING_SET`).
MEASURED_STEP_DEFAULT = dict(stack="hf", model="step-llama", mode="autocast-bf16", attention="sdpa",
                             recompute="none", optimizer_impl="foreach", batch=2, seq=512, working_set=None)


def render_measured_step(stack: str = "hf", model: str = "step-llama", mode: str = "autocast-bf16",
                         attention: str = "sdpa", recompute: str = "none", optimizer_impl: str = "foreach",
                         batch: int = 2, seq: int = 512, working_set: float | None = None, *,
                         into: Figure | None = None) -> View:
    """Chapter 5: one committed step of ``data/step_measurements.csv`` (the keys of
    :data:`~llmsizing.measurements.STEP_KEYS`), each phase measured against the library's
    (:func:`~llmsizing.measurements.measured_step`), with the backward's working set at ``working_set``
    layers (default: the library's); beside it, the worst backward error over the Hugging Face runs as the
    working set goes from 0 to 1 layer (:func:`~llmsizing.measurements.working_set_curve`) and this run's own
    (:func:`~llmsizing.measurements.step_backward_errors`). A configuration the sweep did not measure raises
    the library's ValueError, which names the key."""
    import numpy as np

    from ..measurements import (measured_step, step_at_working_set, step_backward_errors, working_set_curve,
                                working_set_fit)
    from ..memory import LAYER_WORKING_SET, PHASES

    r = measured_step(working_set, stack=stack, model=model, mode=mode, attention=attention,
                      recompute=recompute, optimizer_impl=optimizer_impl, batch=batch, seq=seq)
    w = float(r["working_set"])
    MiB = 2**20
    keys = [p.replace(" ", "_") for p in PHASES]
    measured = np.array([r[f"measured_{k}_bytes"] for k in keys]) / MiB
    predicted = np.array([r[f"predicted_{k}_bytes"] for k in keys]) / MiB
    errors = predicted / measured - 1

    def build(fig):
        fig.subplots_adjust(left=0.15, right=0.98, bottom=0.17, top=0.86, wspace=0.32)
        return fig.subplots(1, 2, width_ratios=(3, 2))

    fig, (ax, bx) = figure_axes(7.2, 3.0, into, ("measured step",), build)
    ys = np.arange(len(PHASES))
    _fast_hbars(ax, ys - 0.2, measured, height=0.38, colors="0.62")
    _fast_hbars(ax, ys + 0.2, predicted, height=0.38, colors="#0072B2")
    ax.set_xlim(0, 1.08 * max(measured.max(), predicted.max()))
    ax.set_yticks(ys, [f"{p}\n{e:+.2%}" for p, e in zip(PHASES, errors)], fontsize=7.5)
    ax.set_ylim(len(PHASES) - 0.5, -0.5)
    ax.set_xlabel("MiB alive at the phase's most (grey: measured, blue: library)", fontsize=7.5)
    ax.set_title(f"{r['model_class'].split('.')[-1]} ({stack}), {mode}, {attention}, recompute {recompute},\n"
                 f"{batch} x {seq} tokens, AdamW {optimizer_impl}: peak {r['peak_error']:+.2%}", fontsize=7.5,
                 loc="left")
    grid, worst = working_set_curve()
    fit = working_set_fit()
    own = np.abs(step_backward_errors(r, grid))
    _line(bx, grid, 100 * worst, color="#0072B2", lw=1.4)
    _line(bx, grid, 100 * own, color="#D55E00", lw=1.0, ls="--")
    top = 100 * max(worst.max(), own.max())
    _line(bx, [w, w], [0, top * 1.05], color="0.2", lw=0.9)
    _line(bx, [fit["working_set"]], [100 * fit["worst_backward_error"]], color="#0072B2", ls="none",
          marker="o", ms=4)
    bx.set_xlim(0, 1)
    bx.set_ylim(0, top * 1.05)
    bx.set_xlabel(f"working set (layers); library {LAYER_WORKING_SET:g}, here {w:.2f}", fontsize=7.5)
    bx.set_ylabel("backward error, in size (%)", fontsize=7.5)
    bx.set_title(f"solid: the worst of {fit['configs']} HF runs\ndashed: this run", fontsize=7.5, loc="left")
    for a in (ax, bx):
        a.tick_params(labelsize=7)
    everyone = step_at_working_set(w)
    hf = everyone[everyone["stack"] == "hf"]
    stack_name = {"hf": "Hugging Face", "fused": "fused stand-ins"}[stack]
    lines = [f"{r['model_class'].split('.')[-1]} ({stack_name}, {int(r['n_params']):,} parameters), {mode}, "
             f"{attention} attention, recompute {recompute}, AdamW {optimizer_impl}, {batch} x {seq} tokens; "
             f"working set {w:.2f} of a layer ({r['layer_bytes'] / MiB:,.2f} MiB a layer)",
             f"  {'phase':<16s}{'measured MiB':>14s}{'library MiB':>14s}{'error':>9s}"]
    for p, m, q, e in zip(PHASES, measured, predicted, errors):
        lines.append(f"  {p:<16s}{m:14,.1f}{q:14,.1f}{e:+9.2%}")
    lines.append(f"  {'peak':<16s}{r['peak_bytes'] / MiB:14,.1f}{r['predicted_peak_bytes'] / MiB:14,.1f}"
                 f"{r['peak_error']:+9.2%}")
    lines.append(f"the peak is in the {r['peak_phase'].replace('_', ' ')} (measured) and the "
                 f"{r['predicted_peak_phase']} (library)")
    lines.append(f"over the {len(hf)} Hugging Face runs at this working set: backward within "
                 f"{hf['backward_error'].abs().max():.1%}, peak within {hf['peak_error'].abs().max():.1%}; "
                 f"the working set with the smallest worst backward error is {fit['working_set']:.2f} "
                 f"({fit['worst_backward_error']:.1%})")
    return FixedView(fig, "\n".join(lines))
