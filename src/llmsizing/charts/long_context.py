"""Figures of Part V, the models of 2026 (chapter 17, "Long context"): context parallelism's communication
against the attention it hides behind. No formula lives here: the numbers come from
:func:`~llmsizing.cp_sweep.cp_overlap_sweep` (itself :func:`~llmsizing.layouts.step_time`)."""

from __future__ import annotations

from matplotlib.figure import Figure

from .base import EXPLORER_TIME_COLORS, FixedView, View, _kept_legend, _log_axis, _short_number, figure_axes

#: The sequence lengths chapter 17's overlap figure sweeps: 4K to 512K tokens.
CP_OVERLAP_SEQS = tuple(2**k for k in range(12, 20))


def llama3_long_context_layout():
    """Llama 3 405B's 128K layout (Dubey et al. 2024, Table 4): TP8 CP16 PP16 DP8 with all-gathered K and V,
    and the assumptions the book makes for its 8K rows (four interleaved chunks, the 7-8...8-7 split, ZeRO-1,
    sequence parallelism). The figure's and the chapter's default."""
    from ..parallel import Parallel, uneven_stages

    return Parallel(tp=8, cp=16, pp=16, dp=8, zero=1, sp=True, virtual_stages=4,
                    stage_layers=uneven_stages(126, 16, first=7, last=7), cp_comm="all_gather")


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
