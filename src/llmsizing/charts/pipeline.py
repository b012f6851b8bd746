"""Chapter 8's pipeline schedules, slot by slot: one Gantt chart per schedule, from
:func:`llmsizing.pipeline_schedule.pipeline_schedule` (which lays each schedule out in time). Imported and
re-exported by :mod:`~llmsizing.charts.many_gpus`."""

from __future__ import annotations

from .base import FixedView, blank_figure

#: The schedules chapter 8 draws, top to bottom.
SCHEDULE_PANELS = ("1f1b", "interleaved", "zero-bubble", "dualpipe")
#: Forward blue, backward green, weight gradient orange (the Okabe-Ito colours of the book's palette).
_KIND_COLORS = {"F": "#0072B2", "B": "#009E73", "W": "#E69F00"}


def render_pipeline_schedules(pp: int = 4, micro_batches: int = 8, virtual_stages: int = 2,
                              schedules=SCHEDULE_PANELS) -> FixedView:
    """Chapter 8: each schedule of ``schedules`` (:data:`~llmsizing.pipeline_schedule.SCHEDULES`) on ``pp``
    stages with ``micro_batches`` micro-batches, one row per stage, forwards, backwards and (zero bubble)
    weight gradients as bars numbered by micro-batch; the white gaps are the bubble. DualPipe's rows are
    ranks, each holding a stage of each direction (pale: the micro-batches entering at the last rank). On one
    time axis (units of one stage's forward), each panel titled with its bubble fraction."""
    from ..pipeline_schedule import pipeline_schedule

    laid = [pipeline_schedule(k, pp=pp, micro_batches=micro_batches, virtual_stages=virtual_stages)
            for k in schedules]
    height = 0.7 + len(laid) * (0.3 * pp + 0.55)
    fig = blank_figure(8.4, height)
    fig.subplots_adjust(left=0.75 / 8.4, right=1 - 0.15 / 8.4, bottom=0.7 / height, top=1 - 0.25 / height,
                        hspace=0.55)
    axes = fig.subplots(len(laid), 1, sharex=True, squeeze=False)[:, 0]
    span = max(s.makespan for s in laid)
    lines = [f"{pp} stages, {micro_batches} micro-batches (forward 1, backward 2 time units per stage):"]
    for ax, s in zip(axes, laid):
        for o in s.ops:
            shade = 1.0 if o.chunk == 0 else 0.6
            ax.barh(o.stage, o.end - o.start, left=o.start, height=0.8, color=_KIND_COLORS[o.kind],
                    alpha=shade, edgecolor="white", linewidth=0.5)
            if o.end - o.start >= 0.45:
                ax.text((o.start + o.end) / 2, o.stage, str(o.micro_batch + 1), ha="center", va="center",
                        fontsize=6, color="white")
        row = "rank" if s.name == "DualPipe" else "stage"          # a DualPipe rank holds two stages
        ax.set_yticks(range(pp), [f"{row} {i}" for i in range(pp)], fontsize=7)   # i as in the prose
        ax.set_ylim(pp - 0.5, -0.5)
        ax.set_title(f"{s.name}: step {s.makespan:g}, bubble {s.bubble_fraction:.1%} of the ideal "
                     f"{s.ideal:g}", fontsize=8, loc="left")
        ax.spines[["top", "right"]].set_visible(False)
        ax.tick_params(labelsize=7)
        lines.append(f"  {s.name:28s} step {s.makespan:6.2f}  bubble {s.bubble_fraction:6.1%}")
    axes[-1].set_xlim(0, span * 1.01)
    axes[-1].set_xlabel("time (1 = one stage's forward of one micro-batch); numbers: micro-batch\nblue "
                        "forward, green backward (B), orange weight grad (W); pale: 2nd chunk (DualPipe: "
                        "2nd direction)", fontsize=7)
    return FixedView(fig, "\n".join(lines))
