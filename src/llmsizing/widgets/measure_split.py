"""Part II, "Many GPUs": the widget of chapter 9 ("Measure the split yourself").

* chapter 9, :func:`collective_time_widget`: pick a timed sweep (the gloo sweep on this book's CPU,
  ``data/gloo_collective_times.csv``, or a published nccl-tests log of ``data/nccl_tests/``), the collective,
  the number of ranks, a message size and the alpha-beta line to price it with, and see the line's time next
  to the nearest measured size, the gap and its cause. Choosing a sweep moves the collective and the ranks to
  what it timed; a collective or rank count it did not time shows the library's message, naming the control,
  instead of a figure.

Its one top-level name is the factory (``llmsizing.widgets`` re-exports it).
"""

from __future__ import annotations

import ipywidgets as W

from .. import charts
from .controls import _choice, _react_then_redraw, _style
from .dashboard import KEPT_ANSWERS, Dashboard


def collective_time_widget() -> Dashboard:
    """Chapter 9: sweep x collective x ranks x message size x line -> the time of one collective, the line
    against the measured sizes (:func:`~llmsizing.charts.render_collective_time`, reading
    :func:`~llmsizing.dist_compare.collective_time_at`). Starts at
    :data:`~llmsizing.charts.COLLECTIVE_TIME_DEFAULT` (the gloo all-reduce on 2 ranks of the chapter's
    table, and the checked figure beside the widget). The sweeps, collectives and rank counts offered are
    those timed; a new sweep brings the collective and the ranks to its own when the ones shown were not
    timed in it."""
    from ..alpha_beta import COLLECTIVES
    from ..dist_compare import GLOO_SWEEP, TIME_LINES, collective_time_sweeps

    d = charts.COLLECTIVE_TIME_DEFAULT
    df = collective_time_sweeps()
    sweeps = [GLOO_SWEEP] + sorted(set(df["sweep"]) - {GLOO_SWEEP})
    timed = {s: sorted({(c, int(n)) for c, n in zip(g["collective"], g["n_ranks"])})
             for s, g in df.groupby("sweep", sort=False)}
    sizes = [(charts._bytes_text(s), s) for s in charts.COLLECTIVE_TIME_SIZES]
    controls = {
        "sweep": W.Dropdown(options=sweeps, value=d["sweep"], description="sweep",
                            tooltip="sweep: the gloo timings on this book's 2-CPU machine, or a "
                                    "published nccl-tests log (data/nccl_tests/README.md names each source)",
                            **_style()),
        "collective": _choice([c for c in COLLECTIVES if c in set(df["collective"])], d["collective"],
                              "collective"),
        "n_ranks": _choice(sorted({int(n) for n in df["n_ranks"]}), d["n_ranks"], "ranks"),
        "size_bytes": W.SelectionSlider(options=sizes, value=d["size_bytes"], description="message size",
                                        tooltip="message size: S as nccl-tests counts it (for an all-gather "
                                                "the gathered output)", **_style()),
        "line": _choice(list(TIME_LINES), d["line"], "line"),
    }
    box = Dashboard(charts.render_collective_time, controls, keep=KEPT_ANSWERS)

    def react(change):
        if change["owner"] is not controls["sweep"]:
            return
        pairs = timed[change["new"]]
        if (controls["collective"].value, controls["n_ranks"].value) in pairs:
            return
        same = [p for p in pairs if p[0] == controls["collective"].value]
        collective, n = (same or pairs)[0]
        with quiet():
            controls["collective"].value = collective
            controls["n_ranks"].value = n

    quiet = _react_then_redraw(box, react)
    return box
