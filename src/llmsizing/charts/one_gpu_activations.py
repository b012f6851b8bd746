"""Part I, chapter 4 ("Activations"): activation memory by component at the peak of a step against a GPU's
capacity over sequence lengths (:func:`render_activation_memory`), the four phases of one training step
(:func:`render_step_phases`), and the largest micro-batch that fits as the sequence grows
(:func:`render_max_micro_batch`), each drawn from :func:`llmsizing.memory.training_memory` and
:func:`llmsizing.memory.max_micro_batch` (Korthikanti et al. 2022's activation terms, chapter 4).
:mod:`~llmsizing.charts.one_gpu` imports every name here and re-exports it.

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from ..units import GiB
from .base import (FixedView, View, _CAPTION_LINESPACING, _CAPTION_PAD_IN, _CAPTION_PT, _caption_room,
                   _fast_stacked_columns, _fixed_figure, _grid, _kept_legend, _log_scale, capacity_line)


# =========================================================================== chapter 4: activation memory
#: Display names of the stacks in chapter 4's figures (activation components get their own names, coloured in
#: :data:`~llmsizing.charts.base.COLORS`, so they never share a colour with a model-state component).
ACT_LABELS = {
    "norms": "norm inputs", "attention_projections": "QKV / out-proj inputs",
    "attention_core": "attention core (Q, K, V, scores)", "mlp": "MLP", "dropout_masks": "dropout masks",
    "residuals": "layer inputs (checkpoints)", "op_sac_saved": "saved by op SAC (matmuls, SDPA)",
    "embedding": "token ids", "logits": "logits + loss",
}
RECOMPUTE_COLORS = {"none": "#D55E00", "selective": "#E69F00", "full": "#0072B2"}


def _mark_beyond_max_seq(ax, x0: float, x1: float, max_seq: int, *, in_margin: bool = False) -> None:
    """Hatch the sequence lengths beyond the model's trained context (``Model.max_seq``): the memory is
    computed the same way there, but running them assumes extended positions (RoPE scaling). The label goes at
    the top of the hatched span, or with ``in_margin`` in the right margin at the axes' foot, where it cannot
    cover the totals a column chart prints at its top (issue 26)."""
    ax.axvspan(x0, x1, facecolor="none", edgecolor="0.75", hatch="//", lw=0, zorder=0.5)
    if in_margin:
        ax.annotate(f"hatched: beyond max_seq ({_seq_label(max_seq)}),\nthe positions extrapolated",
                    (1.0, 0.0), xycoords="axes fraction", xytext=(8, 0), textcoords="offset points",
                    ha="left", va="bottom", fontsize=7, color="0.4")
        return
    ax.annotate(f"beyond max_seq ({_seq_label(max_seq)})", (x0, 1.0), xycoords=("data", "axes fraction"),
                xytext=(3, -3), textcoords="offset points", ha="left", va="top", fontsize=7, color="0.4")


def _seq_label(s: int) -> str:
    return f"{s // 1024}K" if s % 1024 == 0 else f"{s:,}"


def _zero3(zero3_gpus: int):
    """Model states sharded ZeRO-3/FSDP-style over ``zero3_gpus`` GPUs (1 = a single GPU, nothing sharded)."""
    from .._validate import check_int
    from ..parallel import Parallel

    n = check_int("zero3_gpus", zero3_gpus)
    return Parallel(dp=n, zero=3) if n > 1 else Parallel()


def render_activation_memory(model="llama-3-8b", seq: int = 8192, batch: int = 1, attention: str = "flash",
                             recompute: str = "none", gpu: str = "H100 SXM", precision: str = "bf16-mixed",
                             zero3_gpus: int = 8, dropout: bool = False, stack: str = "fused", *,
                             caption: str = "", into: Figure | None = None) -> View:
    """Per-GPU training memory at the peak of a step (weights, optimizer states, activations by component,
    what the peak adds on top of them, overhead) against ``gpu``'s capacity, for sequence lengths 1K ...
    max(32K, ``seq``) with ``seq`` itself highlighted. Model states are sharded over ``zero3_gpus`` GPUs
    (ZeRO-3/FSDP; 1 = one GPU); ``stack`` is the software stack (``"fused"`` or ``"hf"``). ``caption``: text
    drawn under the axes, inside the PNG (:func:`_caption_room`; ``""``, the widget's, draws none). Chapter
    4."""
    import numpy as np

    from ..activations import ACT_COMPONENTS
    from ..catalog import get_gpu, resolve_model
    from ..memory import max_micro_batch, training_memory
    from ..units import fmt_gib

    m = resolve_model(model)
    g = get_gpu(gpu)
    par = _zero3(zero3_gpus)
    kw = dict(batch=batch, precision=precision, attention=attention, recompute=recompute, dropout=dropout,
              parallel=par, stack=stack)
    chosen = training_memory(m, seq=seq, **kw)               # validates every argument first
    seqs = [2**k for k in range(10, 18) if 2**k <= max(32768, seq)]
    seqs = sorted(set(seqs) | {seq})
    runs = [chosen if s == seq else training_memory(m, seq=s, **kw) for s in seqs]
    stacks = {"weights": [r.weights_bytes for r in runs], "optimizer": [r.optimizer_bytes for r in runs]}
    for c in ACT_COMPONENTS:
        vals = [r.activations.breakdown[c] for r in runs]
        if any(vals):
            stacks[ACT_LABELS[c]] = vals
    # the peak is at least weights + optimizer states + activations (the end of the forward); the rest of it
    # is gradients, autocast copies and the temporaries of the phase that holds the peak
    # (never negative: with recomputation the rebuilt layer counted in the activations exists only in the
    # backward, so the bar can be a little above a peak held by the loss backward)
    stacks["at the peak: gradients + temporaries"] = [max(r.peak_bytes - r.weights_bytes - r.optimizer_bytes
                                                          - r.activations_bytes, 0.0) for r in runs]
    stacks["overhead"] = [r.overhead_bytes for r in runs]
    totals = np.array([r.total_bytes for r in runs]) / GiB

    text, extra = _caption_room(caption, 7.6 - 0.08 * 7.6)
    if text:                                    # the axes keep their size in inches; the figure grows
        height = 3.9 + extra
        fig, ax = _fixed_figure(7.6, height, left=0.08, right=0.69, bottom=(0.13 * 3.9 + extra) / height,
                                top=1 - 0.08 * 3.9 / height, into=into)
        fig.text(0.08, _CAPTION_PAD_IN / height, text, ha="left", va="bottom", fontsize=_CAPTION_PT,
                 color="0.2", linespacing=_CAPTION_LINESPACING, gid="caption")    # (the alt text's)
    else:
        fig, ax = _fixed_figure(7.6, 3.9, left=0.08, right=0.69, bottom=0.13, top=0.92, into=into)
    _fast_stacked_columns(ax, [_seq_label(s) for s in seqs], stacks)
    capacity_line(ax, g.memory_gib, g.name, left=True)      # over the short sequences' bars, left
    top = 1.12 * max(totals.max(), g.memory_gib)
    if top > 2.5 * g.memory_gib:                              # keep the capacity line readable
        top = 2.5 * g.memory_gib
    ax.set_ylim(0, top)
    for i, t in enumerate(totals):
        if t > top:                                           # off the chart: print the total instead
            ax.annotate(f"{t:,.0f}↑", (i, top), ha="center", va="top", fontsize=7, xytext=(0, -2),
                        textcoords="offset points", color="white", fontweight="bold")
    i_sel = seqs.index(seq)
    ax.get_xticklabels()[i_sel].set_fontweight("bold")
    ax.axvspan(i_sel - 0.5, i_sel + 0.5, color="0.9", zorder=0)
    beyond = [i for i, s in enumerate(seqs) if s > m.max_seq]
    if beyond:
        _mark_beyond_max_seq(ax, beyond[0] - 0.5, len(seqs) - 0.5, m.max_seq, in_margin=True)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("GiB per GPU")
    states = "one GPU" if par.dp == 1 else f"states sharded over {par.dp} GPUs"
    ax.set_title(f"{m.name}, micro-batch {batch}, {attention} attention, recompute={recompute}, "
                 f"{stack} stack ({states})", fontsize=9, loc="left")

    acts = chosen.activations
    fit = "fits" if chosen.total_bytes <= g.memory_bytes else "does NOT fit"
    bmax = max_micro_batch(m, g, seq, precision=precision, attention=attention, recompute=recompute,
                           dropout=dropout, parallel=par, stack=stack)
    lines = [f"{m.name} at {seq:,} tokens x micro-batch {batch}, {attention} attention, "
             f"recompute={recompute}, {precision}, {stack} stack, {states}:",
             f"  model states     "
             f"{fmt_gib(chosen.weights_bytes + chosen.gradients_bytes + chosen.optimizer_bytes):>12s}",
             f"  activations      {fmt_gib(acts.total_bytes):>12s}"]
    lines += [f"    {ACT_LABELS[c]:<34s}{fmt_gib(acts.breakdown[c]):>12s}" for c in ACT_COMPONENTS
              if acts.breakdown[c]]
    lines += [f"  peak of the step {fmt_gib(chosen.peak_bytes):>12s}  (in the {chosen.peak_phase})",
              f"  overhead         {fmt_gib(chosen.overhead_bytes):>12s}",
              f"  total            {fmt_gib(chosen.total_bytes):>12s}  -> {fit} on {g.name} "
              f"({g.memory_gib:.1f} GiB)",
              f"  largest micro-batch that fits at {seq:,} tokens: {bmax}"]
    if seq > m.max_seq:
        lines.append(f"  ({seq:,} tokens is beyond the {m.max_seq:,} the model was trained with: "
                     "this assumes extended positions, e.g. RoPE scaling)")
    return FixedView(fig, "\n".join(lines))


def render_step_phases(model="llama-3-8b", seq: int = 8192, batch: int = 1, attention: str = "flash",
                       recompute: str = "none", gpu: str = "H100 SXM", precision: str = "bf16-mixed",
                       zero3_gpus: int = 8, stack: str = "fused", optimizer_impl: str = "foreach", *,
                       reshard_after_forward: bool | None = True) -> View:
    """The four phases of one training step (:func:`llmsizing.memory.training_memory`), each a bar of what is
    alive at its peak, against ``gpu``'s capacity; the peak is marked. ``reshard_after_forward``: FSDP's, with
    the states over ``zero3_gpus`` > 1 GPUs (None: ``fully_shard``'s default, the root unit held, as chapter
    4b's Trainer and autocast rows, :mod:`llmsizing.step_stacks`). Chapter 4, "The peak of a step"."""
    from ..catalog import get_gpu, resolve_model
    from ..memory import PHASES, STEP_PARTS, training_memory
    from ..parallel import Parallel
    from ..units import fmt_gib

    m = resolve_model(model)
    g = get_gpu(gpu)
    par = _zero3(zero3_gpus)
    if par.zero == 3 and reshard_after_forward is not True:
        par = Parallel(dp=par.dp, zero=3, reshard_after_forward=reshard_after_forward)
    t = training_memory(m, batch=batch, seq=seq, attention=attention, recompute=recompute,
                        precision=precision, parallel=par, stack=stack, optimizer_impl=optimizer_impl)
    parts = t.phase_parts
    used = [p for p in STEP_PARTS if any(parts[ph][p] for ph in PHASES)]
    fig, ax = _fixed_figure(7.6, 3.4, left=0.08, right=0.70, bottom=0.12, top=0.90)
    _fast_stacked_columns(ax, list(PHASES), {p: [parts[ph][p] for ph in PHASES] for p in used})
    capacity_line(ax, g.memory_gib, g.name)
    peak = t.peak_bytes / GiB
    i = PHASES.index(t.peak_phase)
    ax.annotate(f"peak {peak:,.1f} GiB", (i, peak), xytext=(0, 3), textcoords="offset points", ha="center",
                va="bottom", fontsize=8, fontweight="bold")
    ax.set_ylim(0, 1.15 * max(peak, g.memory_gib))
    ax.set_ylabel("GiB per GPU")
    states = "one GPU" if par.dp == 1 else f"states over {par.dp} GPUs" + (
        ", root unit held" if par.reshard_after_forward is None else "")
    ax.set_title(f"{m.name}, {batch} x {seq:,} tokens, {precision}, {stack} stack, AdamW {optimizer_impl}, "
                 f"{states}", fontsize=8.5, loc="left")
    lines = [f"{m.name}, micro-batch {batch} x {seq:,} tokens, {attention} attention, recompute={recompute}, "
             f"{precision}, {stack} stack, AdamW {optimizer_impl}, {states}:"]
    for ph in PHASES:
        detail = ", ".join(f"{p} {fmt_gib(parts[ph][p])}" for p in used if parts[ph][p])
        mark = "  <- peak" if ph == t.peak_phase else ""
        lines.append(f"  {ph:<15s}{fmt_gib(t.phases_bytes[ph]):>12s}{mark}   ({detail})")
    lines.append(f"  + overhead allowance {fmt_gib(t.overhead_bytes)} = {fmt_gib(t.total_bytes)}: "
                 + ("fits" if t.total_bytes <= g.memory_bytes else "does NOT fit") + f" on {g.name}")
    return FixedView(fig, "\n".join(lines))


#: Sequence lengths swept by :func:`render_max_micro_batch` (log-spaced integers, 512 ... 128K).
MMB_SEQS = (512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152, 65536,
            98304, 131072)


#: :func:`render_max_micro_batch`'s curves for the last few settings (model, GPU, precision, dropout, states'
#: sharding, stack, loss; read-only arrays), so that a widget going back to a setting it drew does not work
#: them out again (six calls of ``max_micro_batch``, ~8 ms; issue 38). Model, GPU and Parallel are frozen
#: dataclasses.
_MMB_KEPT: dict = {}
_MMB_KEEP = 8


def _same_as(curves: dict, rc: str, att: str) -> str:
    """What the legend adds to curve ``(rc, att)`` of :func:`render_max_micro_batch` when a curve drawn after
    it (on top) has the same values at every length, so that only its rim shows: a second line naming the
    curves on top, "= flash/selective = eager/selective". Empty otherwise. Issue 38: chapter 4b's flash/none
    lay exactly under flash/selective (and eager/selective, dashed, on it) and read as missing curves."""
    import numpy as np

    keys = list(curves)
    later = keys[keys.index((rc, att)) + 1:]
    same = [f"{a}/{r}" for r, a in later if np.array_equal(curves[r, a], curves[rc, att])]
    return "\n= " + " = ".join(same) if same else ""


#: How much wider, points, a curve of :func:`render_max_micro_batch` is drawn than one on top of it with the
#: same values at every length: 0.75 pt a side, 1 px at 96 dpi (issue 38).
MMB_RIM_PT = 1.5


def _widths(curves: dict, base: dict) -> dict:
    """Line widths of :func:`render_max_micro_batch`'s curves: ``base[recompute]``, widened where a curve
    drawn later (on top) has the same values at every length, to :data:`MMB_RIM_PT` more than the widest of
    those, so its rim shows round them."""
    import numpy as np

    keys, width = list(curves), {}
    for i in range(len(keys) - 1, -1, -1):                 # the last drawn first: the curves on top are set
        on_top = [width[k] for k in keys[i + 1:] if np.array_equal(curves[k], curves[keys[i]])]
        width[keys[i]] = max([base[keys[i][0]], *(w + MMB_RIM_PT for w in on_top)])
    return width


def render_max_micro_batch(model="llama-3-8b", gpu: str = "H100 SXM", precision: str = "bf16-mixed",
                           zero3_gpus: int = 8, dropout: bool = False, stack: str = "fused", *,
                           loss: str = "fp32", into: Figure | None = None) -> View:
    """The largest micro-batch that fits ``gpu`` as sequence length grows, one curve per recompute level
    (colour) and attention kernel (solid flash, dashed eager); computed by
    :func:`llmsizing.memory.max_micro_batch`. The ``"hf"`` stack has no selective recomputation. ``loss``:
    how the cross-entropy is computed (:data:`llmsizing.footprint.LOSS_KINDS`: ``"fp32"``, the default, the
    fp32 upcast, 12 bytes a logit at the loss backward; ``"bf16"``; ``"compiled"``, torchtitan's, 4), named
    in the legend's title and the summary when it is not the default. Chapter 4b."""
    from .._validate import check_choice
    import matplotlib.ticker
    import numpy as np

    from ..catalog import get_gpu, resolve_model
    from ..footprint import LOSS_KINDS
    from ..memory import max_micro_batch

    m = resolve_model(model)
    g = get_gpu(gpu)
    par = _zero3(zero3_gpus)
    seqs = np.array(MMB_SEQS)
    stack = check_choice("stack", stack, ("fused", "hf"))   # (torchtitan's stack: no eager attention)
    loss = check_choice("loss", loss, tuple(LOSS_KINDS))     # (before the key: a list is no dict key)
    key = (m, g, precision, dropout, par, stack, loss)
    curves = _MMB_KEPT.pop(key, None)          # (popped and put back: the most recent last)
    if curves is None:
        curves = {}
        for rc in ("none", "full") if stack == "hf" else ("none", "selective", "full"):
            for att in ("flash", "eager"):
                curves[rc, att] = max_micro_batch(m, g, seqs, precision=precision, attention=att,
                                                  recompute=rc, dropout=dropout, parallel=par, stack=stack,
                                                  loss=loss)
                curves[rc, att].setflags(write=False)
    _MMB_KEPT[key] = curves
    while len(_MMB_KEPT) > _MMB_KEEP:
        del _MMB_KEPT[next(iter(_MMB_KEPT))]
    fig, ax = _fixed_figure(7.6, 3.6, left=0.08, right=0.70, bottom=0.14, top=0.92, into=into, keep_log="xy")
    width = _widths(curves, {"none": 3.2, "selective": 2.0, "full": 1.2})     # curves that coincide: a rim
    for (rc, att), b in curves.items():
        y = np.where(b > 0, b, np.nan).astype(float)
        ax.plot(seqs, y, color=RECOMPUTE_COLORS[rc], ls="-" if att == "flash" else "--", lw=width[rc, att],
                drawstyle="steps-mid", label=f"{att}, recompute={rc}{_same_as(curves, rc, att)}")
    _log_scale(ax.xaxis, 2)
    _log_scale(ax.yaxis, 2)
    ticks = [s for s in seqs if s & (s - 1) == 0]
    ax.set_xticks(ticks, [_seq_label(int(s)) for s in ticks])
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("largest micro-batch (sequences)")
    states = "one GPU" if par.dp == 1 else f"states sharded over {par.dp} GPUs"
    title = ax.set_title(f"{m.name} on {g.name} ({g.memory_gib:.1f} GiB), {precision}, {stack} stack, "
                         f"{states}", fontsize=9, loc="left")
    box = title.get_window_extent()          # (the longest names ran ~30 px past the figure: smaller, to fit)
    if box.x1 > fig.bbox.width - 4:
        title.set_fontsize(max(6.5, 9 * (fig.bbox.width - 4 - box.x0) / box.width))
    _grid(ax, lw=0.4, alpha=0.5)
    none_fit = np.all([np.all(b == 0) for b in curves.values()])
    if none_fit:
        ax.text(0.5, 0.5, "nothing fits: the model states alone exceed the GPU", transform=ax.transAxes,
                ha="center", va="center", color="#b00020")
        ax.set_ylim(1, 2)
        ax.set_xlim(seqs[0] / 1.15, seqs[-1] * 1.15)      # (no data to autoscale from)
    if seqs[-1] > m.max_seq:
        _mark_beyond_max_seq(ax, max(m.max_seq, seqs[0]), seqs[-1] * 1.15, m.max_seq)
        ax.set_xlim(seqs[0] / 1.15, seqs[-1] * 1.15)
    # a loss other than the default is the legend's title (the title line has no room left for it); the legend
    # is kept from the last redraw of a widget's figure when its labels are the same (they set the styles)
    named = None if loss == "fp32" else f"{loss} loss"
    if none_fit and ax.get_legend() is not None:     # (no curve to name: every one "equal", past the edge)
        ax.get_legend().remove()
    elif not none_fit:
        _kept_legend(ax, ("max micro-batch", named, *ax.get_legend_handles_labels()[1]),
                     lambda: ax.legend(fontsize=7, frameon=False, loc="upper left",
                                       bbox_to_anchor=(1.01, 1.0),
                                       title=named, title_fontsize=7.5, alignment="left"))

    show_seqs = [s for s in seqs if s in (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)]
    idx = [int(np.searchsorted(seqs, s)) for s in show_seqs]
    head = f"{'kernel':<6s} {'recompute':<10s}" + "".join(f"{_seq_label(int(s)):>6s}" for s in show_seqs)
    lines = [f"Largest micro-batch of {m.name} on {g.name}, {precision}, {stack} stack"
             + ("" if named is None else f", {named}") + f", {states} "
             "(0 = does not fit):",
             head]
    for (rc, att), b in curves.items():
        lines.append(f"{att:<6s} {rc:<10s}" + "".join(f"{int(b[i]):>6d}" for i in idx))
    return FixedView(fig, "\n".join(lines))
