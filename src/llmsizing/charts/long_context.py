"""Figures of Part V, the models of 2026 (chapter 17, "Long context"): context parallelism's communication
against the attention it hides behind, and the keys a query attends to under full, sliding-window and hybrid
attention. No formula lives here: the numbers come from :func:`~llmsizing.cp_sweep.cp_overlap_sweep` (itself
:func:`~llmsizing.layouts.step_time`), :func:`~llmsizing.comm.communication` and
:func:`~llmsizing.flops.attention_keys_per_token`."""

from __future__ import annotations

from matplotlib.figure import Figure

from ..parallel import llama3_long_context_layout  # noqa: F401  (re-exported: moved to llmsizing.parallel)
from .base import (_CAPTION_LINESPACING, _CAPTION_PAD_IN, _CAPTION_PT, EXPLORER_TIME_COLORS, FixedView, View,
                   _caption_room, _kept_legend, _log_axis, _short_number, blank_figure, figure_axes)

#: The sequence lengths chapter 17's overlap figure sweeps: 4K to 512K tokens.
CP_OVERLAP_SEQS = tuple(2**k for k in range(12, 20))


def render_cp_overlap(model="llama-3.1-405b", gpu: str = "H100 SXM", parallel=None, *, seqs=CP_OVERLAP_SEQS,
                      batch: int = 1, grad_accum: int = 16, into: Figure | None = None) -> View:
    """Context parallelism's traffic against the sequence length (chapter 17): left, seconds per step of the
    attention core on one GPU (what the ring hides behind), the ring's traffic (``cp_comm="p2p"``) and the
    part the step waits for, and the all-gather variant (exposed in full); right, the exposed part as a share
    of the step's compute. ``parallel`` defaults to Llama 3 405B's 128K layout
    (:func:`llama3_long_context_layout`); its ``cp_comm`` does not matter (both are drawn)."""
    import numpy as np
    from matplotlib.ticker import FixedLocator, NullLocator

    from ..cp_sweep import cp_overlap_sweep

    par = llama3_long_context_layout() if parallel is None else parallel
    df = cp_overlap_sweep(model, gpu, par, seqs=seqs, batch=batch, grad_accum=grad_accum)
    x = df.index.to_numpy(dtype=float)

    def build(fig):
        fig.subplots_adjust(left=0.085, right=0.985, bottom=0.16, top=0.9, wspace=0.3)
        return fig.subplots(1, 2)

    fig, (ax, ax2) = figure_axes(7.6, 3.3, into, ("cp overlap",), build)
    cp_colour = EXPLORER_TIME_COLORS["cp"]
    ax.plot(x, df["attention_s"], color=EXPLORER_TIME_COLORS["compute"], marker="o", ms=3,
            label="attention core (the ring hides behind it)")
    ax.plot(x, df["cp_comm_s"], color=cp_colour, marker="o", ms=3, label="ring traffic (p2p), in full")
    ax.plot(x, np.maximum(df["exposed_s"], 1e-9), color="#D55E00", marker="s", ms=3,
            label="ring: exposed part")
    ax.plot(x, df["all_gather_s"], color="0.3", ls="--", marker="^", ms=3,
            label="all-gather: exposed in full")
    top = float(df[["attention_s", "cp_comm_s", "all_gather_s"]].to_numpy().max())
    low = float(df[["attention_s", "cp_comm_s", "all_gather_s"]].to_numpy().min())
    _log_axis(ax.yaxis, low, top, _short_number, pad=2.0)
    ax.set_ylabel("seconds per step, one GPU")
    ax2.plot(x, 100 * df["exposed_s"] / df["compute_s"], color="#D55E00", marker="s", ms=3,
             label="ring (p2p)")
    ax2.plot(x, 100 * df["all_gather_s"] / df["compute_s"], color="0.3", ls="--", marker="^", ms=3,
             label="all-gather")
    ax2.set_ylim(0, None)
    ax2.set_ylabel("exposed CP comm., % of compute")
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        a.set_xlim(x.min() / 1.3, x.max() * 1.3)
        a.xaxis.set_major_locator(FixedLocator(x))
        a.xaxis.set_minor_locator(NullLocator())
        a.set_xticks(x, [f"{v / 1024:g}K" for v in x], fontsize=7)
        a.set_xlabel("sequence length (tokens)")
        a.spines[["top", "right"]].set_visible(False)
    _kept_legend(ax, ("cp overlap",), lambda: ax.legend(fontsize=6.5, frameon=False, loc="upper left"))
    _kept_legend(ax2, ("cp share",), lambda: ax2.legend(fontsize=7, frameon=False, loc="upper right"))
    name = getattr(model, "name", model)
    ax.set_title(f"{name}, tp={par.tp} cp={par.cp} pp={par.pp}, {gpu}", fontsize=8.5, loc="left")
    ax2.set_title("what the step waits for", fontsize=8.5, loc="left")
    lines = [f"{name} on {gpu}, tp={par.tp} cp={par.cp} pp={par.pp} dp={par.dp}: context-parallel traffic "
             "per step (seconds on one GPU)",
             f"{'seq':>8s} {'compute':>9s} {'attention':>10s} {'ring':>8s} {'exposed':>8s} "
             f"{'all-gather':>11s}"]
    for s, r in df.iterrows():
        lines.append(f"{s:>8,d} {r.compute_s:9.3f} {r.attention_s:10.3f} {r.cp_comm_s:8.3f} "
                     f"{r.exposed_s:8.3f} {r.all_gather_s:11.3f}")
    return FixedView(fig, "\n".join(lines))


#: The context-parallel exchanges chapter 17 compares, with their labels and colours (Okabe-Ito).
CP_KINDS = (("p2p", "ring (p2p)", "#0072B2"), ("all_gather", "all-gather", "#555555"),
            ("a2a", "Ulysses (all-to-all)", "#D55E00"))


def render_cp_kinds(model="llama-3-8b", gpu: str = "H100 SXM", *, seq: int = 131072, cps=(2, 4, 8),
                    batch: int = 1) -> FixedView:
    """Chapter 17: ring, all-gather and Ulysses context parallelism side by side for ``model`` at ``seq``
    tokens on ``cp`` GPUs of one node (``tp=1``, one micro-batch): left, the bytes one GPU sends per step over
    the ``cp`` group (:func:`~llmsizing.comm.communication`); right, the seconds of it the step waits for
    (:func:`~llmsizing.layouts.step_time`: the ring hides behind the attention, the others are exposed). A
    degree Ulysses cannot take (more ranks than KV heads) is left out of its bars."""
    import numpy as np

    from ..comm import communication
    from ..layouts import step_time
    from ..parallel import Parallel

    sent, waited = {}, {}
    for kind, _, _ in CP_KINDS:
        for cp in cps:
            par = Parallel(cp=cp, cp_comm=kind)
            try:
                comm = communication(model, par, batch=batch, seq=seq, gpu=gpu)
            except ValueError:                       # Ulysses past the KV heads
                sent[kind, cp] = waited[kind, cp] = np.nan
                continue
            sent[kind, cp] = sum(c.bytes_per_gpu for c in comm.collectives if c.group == "cp")
            waited[kind, cp] = step_time(model, gpu, par, batch=batch, seq=seq).exposed["cp"]
    fig = blank_figure(7.6, 3.2)
    fig.subplots_adjust(left=0.08, right=0.985, bottom=0.16, top=0.86, wspace=0.28)
    ax, ax2 = fig.subplots(1, 2)
    x = np.arange(len(cps))
    w = 0.8 / len(CP_KINDS)
    for j, (kind, label, colour) in enumerate(CP_KINDS):
        ax.bar(x + (j - 1) * w, [sent[kind, c] / 1e9 for c in cps], w, color=colour, label=label)
        ax2.bar(x + (j - 1) * w, [waited[kind, c] * 1e3 for c in cps], w, color=colour, label=label)
    for a, unit in ((ax, "GB sent per GPU per step"), (ax2, "ms the step waits for")):
        a.set_xticks(x, [f"cp = {c}" for c in cps], fontsize=8)
        a.set_ylabel(unit, fontsize=8)
        a.tick_params(labelsize=8)
        a.spines[["top", "right"]].set_visible(False)
    ax.set_ylim(0, 1.5 * np.nanmax(list(sent.values())) / 1e9)          # room for the legend above the bars
    ax.legend(fontsize=8, frameon=False, loc="upper left", ncol=2)
    name = getattr(model, "name", model)
    ax.set_title(f"{name}, {seq // 1024}K tokens, {gpu}: traffic", fontsize=8.5, loc="left")
    ax2.set_title("exposed (the ring hides behind the attention: 0)", fontsize=8.5, loc="left")
    lines = [f"{name} at {seq:,} tokens on {gpu} (tp=1): context-parallel traffic per step, GB sent per GPU "
             "/ ms exposed"]
    for kind, label, _ in CP_KINDS:
        lines.append(f"  {label:22s}" + "".join(f"  cp={c}: {sent[kind, c] / 1e9:6.2f} GB "
                                                f"{waited[kind, c] * 1e3:7.1f} ms" for c in cps))
    return FixedView(fig, "\n".join(lines))


#: The context lengths of chapter 17's attention-pattern figure: 1K to 512K tokens.
KEYS_SEQS = tuple(2**k for k in range(10, 20))

#: The models it compares by default: full causal attention, a sliding window in every layer, a hybrid.
KEYS_MODELS = ("llama-3.1-405b", "mistral-7b", "gpt-oss-120b")

#: Colour, marker, line style and width per attention pattern (Okabe-Ito), keyed by what the model's fields
#: say it is; the full line is the widest, so that a window's line drawn over it below ``w`` leaves it seen.
_KEYS_STYLES = {"full": ("#0072B2", "o", "-", 2.6), "window": ("#D55E00", "s", "-", 1.4),
                "hybrid": ("#009E73", "^", "--", 1.4)}


def _attention_pattern(m) -> tuple[str, str]:
    """``(kind, label)`` of a model's attention pattern, from its fields (``sliding_window``,
    ``window_layers``, ``n_attention_layers``), never from its name."""
    if m.sliding_window is None:
        return "full", f"{m.name}: full causal attention"
    if m.window_layers is None:
        return "window", f"{m.name}: sliding window w = {m.sliding_window:,} in every layer"
    return "hybrid", (f"{m.name}: hybrid, {m.window_layers} of {m.n_attention_layers} layers windowed "
                      f"at w = {m.sliding_window:,}")


def render_attention_keys(models=KEYS_MODELS, *, seqs=KEYS_SEQS, caption: str = "",
                          into: Figure | None = None) -> FixedView:
    """Chapter 17: how many keys a query attends to, on average over a sequence and over the attention layers
    (causal, :func:`~llmsizing.flops.attention_keys_per_token`), against the context length, for each of
    ``models``: full causal attention grows as ``s / 2`` (the attention FLOPs per token with it), a sliding
    window levels off at its width ``w``, and a hybrid that windows some layers keeps the full layers' growth
    at a smaller constant. Log axes. ``caption``: text drawn under the axes, inside the PNG
    (:func:`~llmsizing.charts.base._caption_room`; ``""`` draws none)."""
    import numpy as np
    from matplotlib.ticker import FixedLocator, NullLocator

    from ..catalog import resolve_model
    from ..flops import attention_keys_per_token

    if isinstance(models, str) or not models:
        raise ValueError(f"models must be a non-empty sequence of models or catalogue names, got {models!r}")
    ms = [resolve_model(m, moe=True) for m in models]
    x = np.array(sorted({int(s) for s in seqs}), dtype=float)
    if len(x) < 2:
        raise ValueError(f"seqs must hold at least two context lengths, got {seqs!r}")
    keys = {m.name: np.array([attention_keys_per_token(m, seq=int(s), causal=True) for s in x]) for m in ms}
    text, extra = _caption_room(caption, 7.6 - 0.09 * 7.6)
    height = 3.3 + extra
    fig = blank_figure(7.6, height, into)
    fig.subplots_adjust(left=0.09, right=0.985, bottom=(0.15 * 3.3 + extra) / height,
                        top=1 - 0.1 * 3.3 / height)
    ax = fig.subplots()
    if text:
        fig.text(0.09, _CAPTION_PAD_IN / height, text, ha="left", va="bottom", fontsize=_CAPTION_PT,
                 color="0.2", linespacing=_CAPTION_LINESPACING, gid="caption")     # (the alt text's)
    lines = ["keys a query attends to, causal, averaged over the sequence and the attention layers",
             f"{'tokens':>9s}" + "".join(f" {m.name:>16s}" for m in ms)]
    for m in ms:
        kind, label = _attention_pattern(m)
        colour, marker, ls, lw = _KEYS_STYLES[kind]
        ax.plot(x, keys[m.name], color=colour, marker=marker, ms=3.5, ls=ls, lw=lw, label=label)
    for i, s in enumerate(x):
        lines.append(f"{s:>9,.0f}" + "".join(f" {keys[m.name][i]:>16,.0f}" for m in ms))
    ax.set_xscale("log", base=2)
    ax.set_xlim(x.min() / 1.3, x.max() * 1.3)
    ax.xaxis.set_major_locator(FixedLocator(x))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(x, [f"{v / 1024:g}K" for v in x], fontsize=8)
    low = min(float(k.min()) for k in keys.values())
    top = max(float(k.max()) for k in keys.values())
    _log_axis(ax.yaxis, low, top, _short_number, pad=2.0)
    ax.tick_params(labelsize=8)
    ax.set_xlabel("context length (tokens)", fontsize=8.5)
    ax.set_ylabel("keys attended per token", fontsize=8.5)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    ax.set_title("attention per token as the context grows (causal, mean over layers)", fontsize=8.5,
                 loc="left")
    return FixedView(fig, "\n".join(lines))
