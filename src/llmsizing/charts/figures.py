"""Figures and axes that a widget redraws into (:mod:`llmsizing.charts`; :mod:`~llmsizing.charts.base` imports
every name here and re-exports it): figures detached from pyplot (:func:`new_figure`, :func:`blank_figure`),
the axes of a kept figure emptied and reused when the layout is the same (:func:`figure_axes`,
:func:`reset_axes`), legends and grids kept from the last redraw when they show the same thing
(:func:`_kept_legend`, :func:`_kept_figure_legend`, :func:`_grid`), and fixed margins instead of a layout
engine (:func:`_fixed_figure`, :func:`_inch_margins`). Issue 38 measured what each saves a redraw (1-100 ms);
``tests/test_widget_layout.py`` checks that a redraw equals a render on a new figure. Used by every chapter's
figures. Imports only :mod:`~llmsizing.charts.labels` (a log axis kept across redraws).

No formula lives here: these helpers only build and empty figures.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from .labels import _log_kept

#: The resolution of every figure of the book (dots per inch), on screen and in its PNG.
DPI = 96


def new_figure(width: float = 7.0, height: float = 3.6, ncols: int = 1):
    """A figure detached from pyplot (no global state, no leaks when widgets redraw)."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def blank_figure(width: float, height: float, into: Figure | None = None) -> Figure:
    """An empty ``width`` x ``height``-inch figure without a layout engine (the caller sets its margins).
    ``into``: a widget's kept figure, cleared and drawn again (it keeps its canvas, renderer and text caches;
    the drawing is the same as on a new figure)."""
    if into is None:
        return Figure(figsize=(width, height), dpi=DPI)
    into.clear()
    into.set_layout_engine(None)
    into.set_size_inches(width, height, forward=False)
    into.set_dpi(DPI)
    into.llmsizing_layout = None
    return into


def figure_axes(width: float, height: float, into: Figure | None, layout: tuple, build, *, keep_log=(),
                resize=None, retained=()):
    """``(figure, axes)`` for a render function: ``build(figure)`` makes the axes (and fixes the margins) of a
    :func:`blank_figure`. ``layout`` names that arrangement (with every argument that shapes it).

    When ``into`` (a widget's kept figure) already holds the axes of the same ``layout`` from the previous
    redraw, they are emptied (:func:`reset_axes`) and returned instead, with their ticks and text caches
    (``tests/test_widget_layout.py`` checks the result equals a render on a new figure).

    ``keep_log``: ``(i, "x")``/``(i, "y")`` pairs naming the axes (``i``: position in the flattened axes)
    that the render makes log with :func:`_log_axis` or :func:`_log_scale` on every redraw: such a scale
    is kept instead of going back to linear and to log again (~5 ms a planner redraw, issue 38).

    ``resize``: ``(kind, adjust)``, where the axes of every layout of that ``kind`` are the same but for the
    figure's size and their place in it: a kept figure of the same kind but another size (the model-states
    figure grows a bar per recipe) is resized and ``adjust(figure)`` places its axes again (a
    ``subplots_adjust``), instead of new axes being built (issue 38: ~40 ms).

    ``retained``: positions (in the flattened axes) of axes whose artists the render keeps and updates in
    place from one redraw to the next (wid33: the planner's right-hand panels). A kept axes there that the
    render has marked ``llmsizing_retained`` is returned as it is, not emptied: the render then sets again
    all that the axes shows (``tests/test_widget_layout.py`` checks the result equals a render on a new
    figure)."""
    kept = getattr(into, "llmsizing_layout", None) if into is not None else None
    if (kept is not None and kept != (width, height, layout) and resize is not None
            and getattr(into, "llmsizing_resize_kind", None) == resize[0]):
        into.set_size_inches(width, height, forward=False)
        resize[1](into)
        into.llmsizing_layout = kept = (width, height, layout)
    if kept is not None and kept == (width, height, layout):
        for artist in [*into.legends, *into.texts]:
            if not hasattr(artist, "llmsizing_key"):            # (a legend of _kept_figure_legend stays)
                artist.remove()
        axes = into.llmsizing_axes
        for i, ax in enumerate(_flat(axes)):
            if i in retained and getattr(ax, "llmsizing_retained", False):
                continue
            reset_axes(ax, keep_log="".join(xy for j, xy in keep_log if j == i))
        return into, axes
    fig = blank_figure(width, height, into)
    axes = build(fig)
    if into is not None:
        fig.llmsizing_layout, fig.llmsizing_axes = (width, height, layout), axes
        fig.llmsizing_resize_kind = None if resize is None else resize[0]
    return fig, axes


#: How many legends :func:`_kept_legend` keeps per axes besides the one shown (by key, the least recently
#: shown dropped first).
KEPT_LEGENDS = 4


def _kept_legend(ax, key, make):
    """``ax``'s legend: ``make()`` (a call of ``ax.legend``) unless the axes already shows the legend made for
    the same ``key`` at the last redraw of a widget's kept figure, which is then kept as it is (making a
    legend of 6-8 entries costs a redraw 2-3 ms). ``key`` must determine everything the legend shows (its
    labels, and whatever sets its handles' styles and its placement). :func:`reset_axes` leaves such a legend
    in place, so a render function must call this for the same axes on every redraw, or its stale legend
    stays. A legend this replaces is kept too (the last :data:`KEPT_LEGENDS` of the axes), and shown again,
    the same object, when its key comes back (speed29a: chapter 17's memory legend, with or without
    gradients at the peak, was made anew on most steps of the context slider)."""
    legend = ax.get_legend()
    if legend is not None and getattr(legend, "llmsizing_key", None) == key:
        return legend
    kept = ax.__dict__.setdefault("llmsizing_legends", {})
    if legend is not None:
        legend.remove()
        if hasattr(legend, "llmsizing_key"):
            kept.pop(legend.llmsizing_key, None)
            kept[legend.llmsizing_key] = legend
            while len(kept) > KEPT_LEGENDS:
                del kept[next(iter(kept))]                         # (the least recently shown)
    again = kept.pop(key, None)
    if again is not None:          # (as Axes.legend attaches a new one; Artist.remove detached this one)
        again.axes = ax
        again.set_figure(ax.get_figure(root=False))
        again._remove_method = ax._remove_legend
        ax.legend_ = again
        again.stale = True
        return again
    legend = make()
    legend.llmsizing_key = key
    return legend


def _grid(ax, which: str = "major", **style) -> None:
    """``ax.grid(True, which=which, **style)``, unless the axes shows that very grid from the last redraw of
    a widget's kept figure (:func:`reset_axes` leaves a grid made here in place, and the view turns it off,
    :func:`_settle_grids`, if the render does not ask for it again): turning a grid off and on restyles every
    tick twice (~5 ms a widget's move, issue 38)."""
    key = (which, tuple(sorted(style.items())))
    if getattr(ax, "llmsizing_grid_pending", False):
        ax.llmsizing_grid_pending = False
        if ax.llmsizing_grid == key:
            return
        ax.grid(False, which="both")
    ax.grid(True, which=which, **style)
    ax.llmsizing_grid = key


def _settle_grids(fig) -> None:
    """Turn off the grids that :func:`reset_axes` left for :func:`_grid` and the render did not ask for."""
    for ax in fig.axes:
        if getattr(ax, "llmsizing_grid_pending", False):
            ax.grid(False, which="both")
            ax.llmsizing_grid_pending, ax.llmsizing_grid = False, None


def _kept_figure_legend(fig, key, make):
    """``fig``'s legend (a figure legend, ``fig.legend``): ``make()`` unless the figure already shows the one
    made for the same ``key`` at the last redraw of a widget's kept figure, which is then kept as it is (as
    :func:`_kept_legend` does for an axes' legend; issue 38: 5-7 ms a redraw). Any other figure legend made
    by this function goes. :func:`figure_axes` leaves such a legend in place, so a render function must call
    this on every redraw of the same layout, or its stale legend stays."""
    kept = None
    for legend in list(fig.legends):
        if kept is None and getattr(legend, "llmsizing_key", None) == key:
            kept = legend
        elif hasattr(legend, "llmsizing_key"):
            legend.remove()
    if kept is not None:
        return kept
    legend = make()
    legend.llmsizing_key = key
    return legend


def _flat(axes) -> list:
    import numpy as np

    return list(np.ravel(axes)) if isinstance(axes, (tuple, list, np.ndarray)) else [axes]


def reset_axes(ax, keep_log: str = "") -> None:
    """Empty an axes for the next redraw of the same figure (public matplotlib API only): remove what was
    plotted, the legend (unless :func:`_kept_legend` made it), titles and labels; back to linear scales,
    default locators and formatters, the first colour of the cycle, autoscaling, no grid, visible spines,
    upright axes and normal-weight tick labels. The tick objects themselves are kept.

    ``keep_log`` (``"x"``, ``"y"``, ``"xy"``): an axis named there that is still the log scale
    :func:`_log_axis` made keeps it (the caller makes it a log axis again with :func:`_log_axis`, which then
    does not set a new scale)."""
    from matplotlib.scale import LinearScale

    for artist in [*ax.containers, *ax.lines, *ax.patches, *ax.collections, *ax.texts, *ax.images, *ax.tables,
                   *ax.artists]:
        if artist in ax.containers or artist.axes is ax:          # a container removes its bars with it
            artist.remove()
    if ax.get_legend() is not None and not hasattr(ax.get_legend(), "llmsizing_key"):   # (see _kept_legend)
        ax.get_legend().remove()
    ticks = [*ax.xaxis.majorTicks, *ax.yaxis.majorTicks]      # (get_*ticklabels would place the ticks first)
    for tick in ticks:
        tick.label1.set_fontweight("normal")
    pinned = getattr(ax, "llmsizing_titles_pinned", False)
    for loc in ("left", "center", "right"):
        # y given: the titles stay at the top of the axes (where a new figure's automatic placement puts them
        # when no top tick labels or offset text are in the way) without re-measuring the axis on every draw.
        # Once pinned, they stay pinned (set_title without y keeps y), so an empty title needs nothing.
        if ax.get_title(loc) or not pinned:
            ax.set_title("", loc=loc, y=1.0)
    ax.llmsizing_titles_pinned = True
    ax.set_xlabel("")
    ax.set_ylabel("")
    for name, axis, scale, set_scale in (("x", ax.xaxis, ax.get_xscale(), ax.set_xscale),
                                         ("y", ax.yaxis, ax.get_yscale(), ax.set_yscale)):
        if name in keep_log and _log_kept(axis):
            pass
        elif scale == "linear":        # the default locators and formatters back, without a new scale's cost
            LinearScale(axis).set_default_locators_and_formatters(axis)
            # ... marked as defaults, as set_xscale leaves them (a units converter, e.g. for categories, may
            # then replace them)
            axis.isDefault_majloc = axis.isDefault_minloc = \
                axis.isDefault_majfmt = axis.isDefault_minfmt = True
        else:
            set_scale("linear")
        if axis.get_inverted():
            axis.set_inverted(False)
    if getattr(ax, "llmsizing_grid", None) is not None:
        ax.llmsizing_grid_pending = True       # left on for _grid to keep, else turned off by _settle_grids
    elif any(t.gridline.get_visible() for t in [*ticks, *ax.xaxis.minorTicks, *ax.yaxis.minorTicks]):
        ax.grid(False, which="both")                           # (costly: it restyles every tick)
    for spine in ax.spines.values():
        spine.set_visible(True)
    ax.set_prop_cycle(None)                                       # the colour cycle starts again
    ax.set_autoscale_on(True)
    ax.relim()
    ax.ignore_existing_data_limits = True


def _fixed_figure(width: float, height: float, *, into: Figure | None = None, keep_log: str = "", **margins):
    """Like :func:`new_figure` but with fixed margins instead of constrained layout, which would cost a widget
    redraw ~100 ms of text measuring on a 2-core machine. ``into``, ``keep_log``: :func:`figure_axes`."""
    def build(fig):
        fig.subplots_adjust(**margins)
        return fig.subplots()

    return figure_axes(width, height, into, ("one axes", tuple(sorted(margins.items()))), build,
                       resize=(("one axes",), lambda fig: fig.subplots_adjust(**margins)),
                       keep_log=[(0, xy) for xy in keep_log])


def _inch_margins(width: float, height: float, *, left: float, bottom: float, top: float = 0.3,
                  right: float = 0.15, into: Figure | None = None, keep_log: str = ""):
    """A fixed-margin figure (:func:`_fixed_figure`) with margins in inches: figures of variable height keep
    the room for tick labels and legend (``FixedView`` saves it without the tight-bbox pass: half the time)"""
    return _fixed_figure(width, height, left=left / width, right=1 - right / width, bottom=bottom / height,
                         top=1 - top / height, into=into, keep_log=keep_log)
