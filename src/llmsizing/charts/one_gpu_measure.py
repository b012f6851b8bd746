"""Part I, chapter 5 ("Measure it yourself"): the library's activation prediction against PyTorch's
measurements (:func:`render_prediction_vs_measurement`), and the live bytes of one measured training step
against the library's phases (:func:`render_step_timeline`, also in chapter 4).
:mod:`~llmsizing.charts.one_gpu` imports every name here and re-exports it.

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

from .base import View, new_figure


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


#: The measured phases of ``data/step_timeline_example.csv``, mapped onto the library's (memory.PHASES).
_TIMELINE_PHASES = {"forward": "forward", "loss_forward": "forward", "loss_backward": "loss backward",
                    "head_backward": "loss backward", "backward": "backward", "optimizer": "optimizer step"}
_PHASE_SHADES = {"forward": "#E8EEF7", "loss backward": "#F9E3E3", "backward": "#F3EBD9",
                 "optimizer step": "#E6F2E6"}


def render_step_timeline() -> View:
    """Live bytes over one measured training step (``data/step_timeline_example.csv``: a real Hugging Face
    model on the CPU, op by op), with the library's phases (:func:`llmsizing.memory.training_memory`) drawn as
    levels over the same stretches. Chapters 4 and 5."""
    import pandas as pd

    from ..measurements import STEP_TIMELINE_CSV, load_steps, predict_step
    from ..memory import PHASES

    tl = pd.read_csv(STEP_TIMELINE_CSV)
    cfg = tl.iloc[0]
    steps = load_steps()
    keys = ["stack", "model_class", "mode", "attention", "recompute", "optimizer_impl", "batch", "seq"]
    row = steps[(steps[keys] == cfg[keys].values).all(axis=1)].iloc[0]
    pred = predict_step(row)
    MiB = 2**20
    tl["library_phase"] = tl["phase"].map(_TIMELINE_PHASES)
    tl = tl[tl["library_phase"].notna()]
    fig, ax = new_figure(7.4, 3.4)
    spans = {}
    width = tl["op_index"].max() - tl["op_index"].min()
    for ph in PHASES:
        sub = tl[tl["library_phase"] == ph]
        if len(sub):
            spans[ph] = (sub["op_index"].min(), sub["op_index"].max())
            ax.axvspan(*spans[ph], color=_PHASE_SHADES[ph], zorder=0, lw=0)
            narrow = spans[ph][1] - spans[ph][0] < 0.1 * width     # the loss backward: a few dozen ops
            ax.annotate(ph, (sum(spans[ph]) / 2, 0.04 if narrow else 1.0), xycoords=("data", "axes fraction"),
                        ha="center", va="bottom" if narrow else "top", fontsize=7.5, color="0.3",
                        rotation=90 if narrow else 0, xytext=(0, 0 if narrow else -2),
                        textcoords="offset points")
    ax.plot(tl["op_index"], tl["live_bytes"] / MiB, color="#D55E00", lw=1.2, label="measured live bytes")
    ax.axhline(row["baseline_bytes"] / MiB, color="#0072B2", lw=1, ls=":",
               label="weights + optimizer states (measured)")
    for i, (ph, (x0, x1)) in enumerate(spans.items()):
        ax.hlines(pred.phases_bytes[ph] / MiB, x0, x1, colors="0.15", lw=1.6, linestyles="--",
                  label="library: the phase's peak" if i == 0 else None)
    ax.set_xlabel("operation in the step (index)")
    ax.set_ylabel("MiB alive")
    ax.set_ylim(0, 1.18 * max(tl["live_bytes"].max(), pred.peak_bytes) / MiB)
    ax.set_title(f"{row['model_class']} ({int(row['n_params']) / 1e6:.0f}M params), {row['mode']}, "
                 f"{row['attention']}, batch {int(row['batch'])} x {int(row['seq'])} tokens, AdamW "
                 f"{row['optimizer_impl']} (CPU)", fontsize=8.5, loc="left")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    lines = [f"{row['model_class']}, {row['mode']}, {row['attention']}, "
             f"{int(row['batch'])} x {int(row['seq'])} tokens: the peak of each phase, measured vs library "
             "(MiB)"]
    measured = {"forward": row["forward_end_bytes"],
                "loss backward": max(row["loss_backward_max_bytes"], row["head_backward_max_bytes"]),
                "backward": row["backward_max_bytes"], "optimizer step": row["optimizer_max_bytes"]}
    for ph in PHASES:
        lines.append(f"  {ph:<15s}{measured[ph] / MiB:9.1f}{pred.phases_bytes[ph] / MiB:9.1f}"
                     f"  ({pred.phases_bytes[ph] / measured[ph] - 1:+.1%})")
    return View(fig, "\n".join(lines))
