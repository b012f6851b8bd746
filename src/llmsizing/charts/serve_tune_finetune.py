"""Part IV, chapter 16, fine-tuning on a budget: one GPU's memory for full fine-tuning, LoRA and QLoRA
(:func:`render_finetune_memory`) and the fitted step-time model against published runs
(:func:`render_finetune_calibration`). Split from :mod:`~llmsizing.charts.serve_tune` (which re-exports
these names) to keep each module under 600 lines.

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from ..units import GiB
from .base import FixedView, View, _fast_stacked_columns, _fixed_figure, _log_axis


# ======================================================================== chapter 16: fine-tuning on a budget
#: The parts of chapter 16's stacked columns, bottom up, and their colours.
FINETUNE_PARTS = ("frozen weights", "trained weights", "gradients", "optimizer", "activations, temporaries",
                  "overhead")
FINETUNE_COLORS = dict(zip(FINETUNE_PARTS, ("#0072B2", "#56B4E9", "#E69F00", "#CC79A7", "#D55E00",
                                            "#BBBBBB")))
#: The calibration figure's dot markers, one per source and GPU in order of appearance (issue 38).
FINETUNE_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", "h", ">")


def render_finetune_memory(model="llama-3-8b", gpu: str = "H100 SXM", batch: int = 1, seq: int = 2048,
                           rank: int = 16, targets="all-linear",
                           recompute: str = "full", optimizer: str = "adamw", *,
                           into: Figure | None = None) -> View:
    """Chapter 16: one GPU's memory for full fine-tuning, LoRA and QLoRA of ``model``
    (:func:`~llmsizing.finetune.finetune_memory`), stacked by part at the step's peak (full fine-tuning's
    weights are all trained; the activations and temporaries alive at the peak are the rest), against the
    GPU's capacity, with the largest batch each method fits (:func:`~llmsizing.finetune.max_batch`)."""
    import numpy as np

    from ..catalog import get_gpu, resolve_model
    from ..finetune import METHODS, finetune_memory, max_batch

    g = get_gpu(gpu)
    kw = dict(rank=rank, targets=targets, recompute=recompute, optimizer=optimizer)
    runs = {m: finetune_memory(model, method=m, batch=batch, seq=seq, **kw) for m in METHODS}
    stacks = {p: [] for p in FINETUNE_PARTS}
    for r in runs.values():
        for p, v in zip(FINETUNE_PARTS, (r.base_weights_bytes, r.adapter_bytes, r.gradients_bytes,
                                         r.optimizer_bytes,
                                         r.total_bytes - r.overhead_bytes - r.base_weights_bytes
                                         - r.adapter_bytes - r.gradients_bytes - r.optimizer_bytes,
                                         r.overhead_bytes)):
            stacks[p].append(max(v, 0.0))
    fig, ax = _fixed_figure(7.2, 3.4, left=0.1, right=0.72, bottom=0.12, top=0.9, into=into)
    labels = ["full", "LoRA", "QLoRA"]
    bottom = _fast_stacked_columns(ax, labels, stacks, width=0.7, colors=FINETUNE_COLORS)  # the columns' tops
    pos = np.arange(3)
    cap = g.memory_gib
    ax.axhline(cap, color="0.2", ls="--", lw=1)
    ax.text(-0.55, cap, f"{g.name}: {cap:.1f} GiB", fontsize=7, va="bottom")
    top = min(bottom.max(), 4 * cap) * 1.08
    ax.set_ylim(0, max(top, cap * 1.15))
    for x, b in zip(pos, bottom):
        if b > ax.get_ylim()[1]:
            ax.text(x, ax.get_ylim()[1] * 0.97, f"{b:,.0f} GiB ↑", ha="center", va="top", fontsize=7)
    ax.set_ylabel("GiB on one GPU")
    ax.set_title(f"{resolve_model(model).name}: batch {batch} x "
                 f"{seq:,} tokens, rank {rank}, recompute {recompute}", fontsize=8.5, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    lines = []
    for label, (m, r) in zip(labels, runs.items()):
        mb = max_batch(model, g, method=m, seq=seq, **kw)
        verdict = "fits" if r.total_bytes <= 0.9 * g.memory_bytes else "does not fit"
        lines.append(f"{label:6s} {r.total_bytes / GiB:8,.1f} GiB ({r.trainable_params:,} trainable) "
                     f"{verdict} in 90% of one {g.name}; largest batch that fits: {mb}")
    return FixedView(fig, "\n".join(lines))


def render_finetune_calibration(*, into: Figure | None = None) -> View:
    """Chapter 16: published LoRA and Q-LoRA step times on one GPU (``data/finetune_published.csv``: Qwen's
    table on one A100 80GB, and the other sources' one-GPU rows, labelled with their GPU) against the sequence
    length, with :func:`~llmsizing.finetune_time.finetune_time`'s prediction at the constants fitted on every
    source's covered rows as lines (dots: the published rows), one series per source (no line joins two
    sources' rows; the legend names a model, method and GPU once). The text lists each series' published/
    predicted ratios with its source, the multi-GPU ones included, and marks the ``known_out`` series (full
    fine-tuning), which the stated range does not cover.

    Colour is the model, the line's dash the method, and the dots' marker the source and GPU (issue 38: two
    sources' series of one model shared a colour and a dot, and the 256-token rows piled up): the largest
    table's dots filled, the others' hollow, so a pile shows each; two legends, one for each key."""
    from ..finetune_time import GROUP_RANGES, finetune_residuals

    everything = finetune_residuals()
    one_gpu = (everything["n_gpus"] == 1) & everything["method"].isin(["lora", "qlora"])
    df = everything[one_gpu]
    fig, ax = _fixed_figure(7.2, 3.9, left=0.1, right=0.7, bottom=0.13, top=0.92, into=into)
    styles = {"lora": "-", "qlora": "--"}
    colors = {"qwen-1.8b": "#009E73", "qwen-7b": "#0072B2", "qwen-14b": "#D55E00", "qwen-72b": "#CC79A7"}
    spare = iter(["#E69F00", "#56B4E9", "0.2", "0.55"])         # the other models, in order of appearance
    lines, keys, marks = [], {}, {}
    tag = df["source"].str.split().str[0].str.split("/").str[-1].str.strip(",")    # "QwenLM/Qwen ..." -> Qwen
    main = tag.value_counts().idxmax()                          # the source with the most rows (Qwen's)
    for (model, method, gpu, source), sub in df.assign(tag=tag).groupby(["model", "method", "gpu", "tag"],
                                                                          sort=False):
        sub = sub.sort_values(["seq", "batch"])                   # one series per source: no line joins two
        c = colors[model] if model in colors else colors.setdefault(model, next(spare, "0.3"))
        key = f"{model} {'Q-LoRA' if method == 'qlora' else 'LoRA'}"
        keys.setdefault(key, (c, styles[method]))
        mark = marks.setdefault((source, gpu), FINETUNE_MARKERS[len(marks) % len(FINETUNE_MARKERS)])
        face = c if source == main else "white"                   # the largest table's dots filled
        ax.plot(sub["seq"], sub["predicted_s"], styles[method], color=c, lw=1.2,
                marker="_" if len(sub) == 1 else None, ms=12)   # a one-row series: the model as a tick
        ax.plot(sub["seq"], sub["s_per_step"], ls="none", marker=mark, color=c, mfc=face, mew=1.1, ms=5.5,
                alpha=0.9)
        label = key + (f", {gpu}" if gpu != "A100 80GB" else "") + (f" ({source})" if source != main else "")
        lines.append(f"{label:44s} published/model {sub['ratio'].min():.2f} to {sub['ratio'].max():.2f}")
    from matplotlib.ticker import FixedLocator

    ax.set_xscale("log")
    seqs = sorted(df["seq"].unique())
    ax.set_xlim(seqs[0] / 1.3, seqs[-1] * 1.3)
    ax.xaxis.set_major_locator(FixedLocator(seqs))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(seqs, [f"{s:,}" for s in seqs])
    times = list(df["s_per_step"]) + list(df["predicted_s"])
    _log_axis(ax.yaxis, min(times), max(times), lambda t: f"{t:g}", pad=1.2)
    ax.set_xlabel("tokens per sequence (each source's micro-batch and accumulation)")
    ax.set_ylabel("seconds per optimizer step")
    ax.set_title("One GPU: published step times (dots) and the model (lines)",
                 fontsize=8.5, loc="left")
    from matplotlib.lines import Line2D

    series = ax.legend([Line2D([], [], color=c, ls=ls, lw=1.2) for c, ls in keys.values()], list(keys),
                       fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.03),
                       labelspacing=0.25, title="model, method (lines)", title_fontsize=7, alignment="left")
    ax.add_artist(series)
    ax.legend([Line2D([], [], ls="none", marker=mk, color="0.2", mfc="0.2" if s == main else "white",
                      mew=1.1, ms=5.5) for (s, _), mk in marks.items()],
              [f"{s}, {g}" for s, g in marks], fontsize=7, frameon=False, loc="lower left",
              bbox_to_anchor=(1.01, -0.02), labelspacing=0.25, title="source, GPU (dots)", title_fontsize=7,
              alignment="left")
    ax.spines[["top", "right"]].set_visible(False)
    for (model, method, gpu, n, strategy), sub in everything[~one_gpu].groupby(
            ["model", "method", "gpu", "n_gpus", "strategy"], sort=False):
        label = f"{model} {method} {n}x {gpu} {strategy}"
        out = " (known out)" if (sub["known_out"] != "").all() else ""
        lines.append(f"{label:40s} published/model {sub['ratio'].min():.2f} to {sub['ratio'].max():.2f}{out}")
    covered = everything[everything["known_out"] == ""]
    ranges = ", ".join(f"{g} ({'QLoRA' if g == 'quantised' else 'LoRA'}) {lo:.2f} to {hi:.2f}"
                       for g, (lo, hi) in GROUP_RANGES.items())
    lines.append(f"stated range of published/model per base: {ranges}; covered rows inside their own: "
                 f"{int(covered['in_range'].sum())} of {len(covered)} (known out: "
                 f"{len(everything) - len(covered)})")
    return FixedView(fig, "\n".join(lines))
