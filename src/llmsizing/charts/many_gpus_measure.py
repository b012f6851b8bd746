"""Part II, chapter 9 ("Measure the split yourself"): the chapter's widget figure, one timed collective
against its alpha-beta line (:func:`render_collective_time`). :mod:`~llmsizing.charts.many_gpus` imports
every name here and re-exports it.

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from ..units import fmt_size
from .base import FixedView, _line, _log_axis, figure_axes

#: Chapter 9's widget starts here: the gloo all-reduce on 2 ranks of the chapter's table, at 1 MiB, priced
#: by the one line that ``alpha_beta.gloo_fits`` fits (the chapter's numbers).
COLLECTIVE_TIME_DEFAULT = dict(sweep="gloo, this CPU", collective="all_reduce", n_ranks=2,
                               size_bytes=2**20, line="one line")

#: The powers of two chapter 9's widget offers as message sizes: 8 B to 8 GiB, nccl-tests' usual sweep.
COLLECTIVE_TIME_SIZES = tuple(2**k for k in range(3, 34))


_bytes_text = fmt_size          # (the name the chapter's widget and charts/__init__ use)


def _size_axis(axis, lo: float, hi: float, most: int, pad: float = 1.4) -> None:
    """A log axis of message sizes from ``lo / pad`` to ``hi * pad``, ticked at powers of two (every 2nd,
    4th, 5th or 10th, the first of those that gives at most ``most`` ticks: 1 KiB, 32 KiB, 1 MiB...)."""
    import math

    from matplotlib.ticker import FixedLocator, NullLocator

    from .base import _log_scale

    lo, hi = lo / pad, hi * pad
    exps = range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)
    for step in (2, 4, 5, 10):
        ticks = [2.0**e for e in exps if e % step == 0]
        if len(ticks) <= most:
            break
    _log_scale(axis, base=2)
    axis.axes.set_xlim(lo, hi)
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_ticks(ticks, [_bytes_text(t) for t in ticks])


def _time_text(t_s: float) -> str:
    if t_s < 1e-3:
        return f"{t_s * 1e6:,.3g} µs"
    if t_s < 1.0:
        return f"{t_s * 1e3:,.3g} ms"
    return f"{t_s:,.3g} s"


def render_collective_time(sweep: str = "gloo, this CPU", collective: str = "all_reduce", n_ranks: int = 2,
                           size_bytes: float = 2**20, line: str = "one line", *,
                           into: Figure | None = None) -> FixedView:
    """Chapter 9: one timed sweep of :func:`~llmsizing.dist_compare.collective_time_sweeps` (the gloo sweep
    on this CPU or a published nccl-tests log) with the alpha-beta ``line`` fitted on it (one of
    :data:`~llmsizing.dist_compare.TIME_LINES`). Left: time against size, the measured rows as dots, the line,
    the split between the two regimes, the asked ``size_bytes`` on the line and its nearest measured row
    ringed. Right: the line's relative error at every row. The summary gives the prediction, the nearest row,
    the gap and its cause (:func:`~llmsizing.dist_compare.collective_time_at`). A collective or rank count the
    sweep did not time raises the library's ValueError, which names it."""
    import numpy as np

    from ..dist_compare import collective_time_at, collective_time_line, collective_time_sweeps

    r = collective_time_at(sweep, collective, n_ranks, size_bytes, line)
    df = collective_time_sweeps()
    sub = df[(df["sweep"] == sweep) & (df["collective"] == collective) & (df["n_ranks"] == n_ranks)]
    sub = sub.sort_values("size_bytes")
    s = sub["size_bytes"].to_numpy(dtype=float)
    t = sub["time_s"].to_numpy(dtype=float)
    lo, hi = min(s.min(), size_bytes), max(s.max(), size_bytes)
    grid = np.geomspace(lo, hi, 60)
    model = collective_time_line(sweep, collective, n_ranks, grid, line)
    at_rows = collective_time_line(sweep, collective, n_ranks, s, line)
    errors = 100 * (at_rows / t - 1)

    def build(f):
        f.subplots_adjust(left=0.10, right=0.98, bottom=0.17, top=0.86, wspace=0.30)
        return f.subplots(1, 2, width_ratios=(3, 2))

    fig, (ax, bx) = figure_axes(7.2, 3.0, into, ("collective time",), build, keep_log=((0, "x"), (0, "y"),
                                                                                     (1, "x")))
    tmin, tmax = min(t.min(), model.min()), max(t.max(), model.max())
    _size_axis(ax.xaxis, lo, hi, 6)
    _log_axis(ax.yaxis, tmin, tmax, _time_text)
    _line(ax, grid, model, color="#0072B2", lw=1.4)
    _line(ax, s, t, color="0.35", ls="none", marker="o", ms=3.5)
    _line(ax, [r["split_bytes"]] * 2, [tmin / 1.4, tmax * 1.4], color="0.6", lw=0.8, ls=":")
    _line(ax, [r["row_size_bytes"]], [r["measured_s"]], color="#D55E00", ls="none", marker="o", ms=9,
          mfc="none", mew=1.3)
    _line(ax, [size_bytes], [r["predicted_s"]], color="#D55E00", ls="none", marker="D", ms=5)
    ax.set_xlabel("message size (nccl-tests' S)", fontsize=7.5)
    ax.set_ylabel("time of one call", fontsize=7.5)
    ax.set_title(f"{sweep}: {collective}, {n_ranks} ranks\ndots: measured, blue: {line}, dotted: the split",
                 fontsize=7.5, loc="left")
    top = max(5.0, float(np.abs(errors).max()))
    _size_axis(bx.xaxis, s.min(), s.max(), 4)
    bx.set_ylim(-1.1 * top, 1.1 * top)
    _line(bx, [s.min() / 1.4, s.max() * 1.4], [0, 0], color="0.6", lw=0.8)
    _line(bx, s, errors, color="#0072B2", lw=1.0, marker="o", ms=3)
    _line(bx, [r["row_size_bytes"]], [100 * r["gap"]], color="#D55E00", ls="none", marker="o", ms=9,
          mfc="none", mew=1.3)
    bx.set_xlabel("measured size", fontsize=7.5)
    bx.set_ylabel("line / measured - 1 (%)", fontsize=7.5)
    bx.set_title(f"{line}: worst {np.abs(errors).max():.0f}% over {len(s)} sizes", fontsize=7.5, loc="left")
    for a in (ax, bx):
        a.tick_params(labelsize=6.5)
    lines = [f"{sweep}: {collective} over {n_ranks} ranks, {r['rows']} sizes timed "
             f"({_bytes_text(r['min_size_bytes'])} to {_bytes_text(r['max_size_bytes'])}); "
             f"{line} ({r['line_words']}): "
             f"alpha {r['alpha_s'] * 1e6:,.2f} µs a step, bus bandwidth {r['busbw_gbps']:,.2f} GB/s",
             f"  the line at {_bytes_text(size_bytes)}: {_time_text(r['predicted_s'])}"
             + ("" if r["inside"] else " (outside the sizes timed: extrapolated)"),
             f"  nearest measured size {_bytes_text(r['row_size_bytes'])}: {_time_text(r['measured_s'])} "
             f"measured, {_time_text(r['row_predicted_s'])} on the line, gap {r['gap']:+.1%}",
             f"  why: {r['cause']}",
             "  every line at that size: " + ", ".join(f"{k} {v:+.0%}" for k, v in r["errors"].items())]
    return FixedView(fig, "\n".join(lines))
