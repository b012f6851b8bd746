"""What every figure of the book shares (:mod:`llmsizing.charts`'s base; the part modules import it, it
imports none of them): the palette, the :class:`View` a render function returns and :func:`show`, which prints
its summary and displays its PNG with alt text (:func:`figure_alt_text`); figures and axes a widget redraws
into (:func:`new_figure`, :func:`blank_figure`, :func:`figure_axes`, :func:`reset_axes`, :func:`_kept_legend`,
:func:`_kept_figure_legend`, fixed margins with :class:`FixedView`); bars (the fast PolyCollection bars of
:func:`_bar_collection`, :func:`capacity_line`); captions drawn inside a PNG (:func:`_caption_room`); and
plain-text numbers on log axes (:func:`_log_axis`, :func:`_short_number`, :func:`_tokens`, :func:`_usd`).

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..units import GiB

# Colours are safe for colour-blind readers (issue 12): Okabe & Ito's "Color Universal Design" set (2008:
# #0072B2 blue, #E69F00 orange, #009E73 green, #D55E00 vermillion, #CC79A7 reddish purple, #56B4E9 sky blue,
# #F0E442 yellow, black) plus two greys, and Paul Tol's "muted" scheme (#332288, #88CCEE, #44AA99, #117733,
# #999933, #DDCC77, #CC6677, #882255, #AA4499) where a figure needs more colours. tests/test_palette.py
# simulates protanopia, deuteranopia and tritanopia (Machado et al. 2009) and checks that the colours of each
# figure stay apart.

#: One colour per memory component, used by every chart in the book.
COLORS = {
    "weights": "#0072B2", "gradients": "#E69F00", "master copy": "#009E73", "optimizer states": "#CC79A7",
    "optimizer": "#CC79A7", "activations": "#D55E00", "KV cache": "#D55E00", "overhead": "#BBBBBB",
    "FP8 weight copies": "#56B4E9",
    # parameter components (chapter 1)
    "embedding": "#0072B2", "position": "#56B4E9", "attention": "#E69F00", "mlp": "#009E73",
    "norms": "#D55E00", "lm_head": "#CC79A7",
    # activation components (chapter 4)
    "attention_projections": "#E69F00", "attention_core": "#F0E442", "dropout_masks": "#555555",
    "residuals": "#56B4E9", "logits": "#CC79A7",
    # the peak of a step (chapter 4)
    "at the peak: gradients + temporaries": "#332288", "autocast copies": "#F0E442", "temporaries": "#882255",
    # activation components as chapter 4's figures name them (one_gpu.ACT_LABELS: their own names, so they
    # never share a colour with a model-state component)
    "norm inputs": "#F0E442", "QKV / out-proj inputs": "#E69F00",
    "attention core (Q, K, V, scores)": "#D55E00",
    "MLP": "#117733", "dropout masks": "#882255", "layer inputs (checkpoints)": "#CC6677",
    "token ids": "#000000", "logits + loss": "#88CCEE",
}

#: One colour per catalogued GPU in the figures of chapters 6, 11, 12 and 15 (vendor families share a hue).
GPU_COLORS = {"A10": "#BBBBBB", "L40S": "#555555", "RTX 4090": "#AA4499", "A100 40GB": "#88CCEE",
              "A100 80GB": "#332288", "H100 SXM": "#009E73", "H200": "#000000", "B200": "#D55E00",
              "MI300X": "#F0E442"}

#: The step-time parts of :func:`_step_time_bars` (the parallelism explorer, chapter 8, and the planner,
#: chapter 12), in drawing order, with their colours.
EXPLORER_TIME_COLORS = {"compute": "#0072B2", "pipeline bubble": "#BBBBBB", "dp": "#E69F00", "tp": "#009E73",
                        "pp": "#CC79A7", "cp": "#56B4E9"}

DPI = 96


# =========================================================================== what a render function returns
@dataclass(frozen=True)
class View:
    """What a render function returns: a figure and a short text summary of the same numbers."""

    figure: Figure
    summary: str

    def __post_init__(self):
        _settle_grids(self.figure)

    def png(self, *, compress_level: int | None = None) -> bytes:
        """The figure as PNG bytes. ``compress_level`` (0-9, zlib) trades file size for encoding time (same
        pixels); ``None`` is PIL's default (6)."""
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", **_png_kwargs(compress_level))
        return buf.getvalue()


def _png_kwargs(compress_level: int | None) -> dict:
    return {} if compress_level is None else {"pil_kwargs": {"compress_level": int(compress_level)}}


class FixedView(View):
    """A :class:`View` whose figure has fixed margins (see :func:`_fixed_figure`): saved without the
    ``bbox_inches="tight"`` pass, which would draw the figure twice."""

    def png(self, *, compress_level: int | None = None) -> bytes:
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=DPI, **_png_kwargs(compress_level))
        return buf.getvalue()


def show(view: View, *, widget: str | None = None) -> None:
    """Print the summary and display the figure as PNG: used by the checked cell next to each widget.
    ``widget`` (a factory's name, e.g. ``"planner_widget"``): this is the static copy of that widget's default
    view; a marker goes out first, by which the live widget hides it (``widgets.dashboard.live_style``; issue
    25). The static site, where no widget runs, keeps it."""
    from IPython.display import HTML, Image, display

    if widget is not None:
        import re

        if not isinstance(widget, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", widget):
            raise ValueError("widget must be a widget factory's name, like 'planner_widget', or None; got "
                             f"{widget!r}")
        display(HTML(f"<span class='llmsizing-default-of-{widget}' hidden></span>"))
    print(view.summary)
    display(Image(data=view.png(), format="png", alt=figure_alt_text(view)))


def figure_alt_text(view: View, *, limit: int = 400) -> str:
    """Alt text for a figure (issue 12): what each panel plots, from the figure's own titles and axis labels,
    then its caption (a figure text with gid ``"caption"``), else the summary's first line unless it is a
    table header (the numbers are printed next to the figure anyway).

    ``show`` attaches it to the PNG output (``Image(alt=...)``); the site's ``_ext/nb_image_alt.py`` copies
    it onto the ``<img>``."""
    import re

    def clean(text: str) -> str:
        return " ".join(text.split()).rstrip(":;, ")

    fig = view.figure
    panels: list[str] = []
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        title = " ".join(t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right"))
                         if t.strip())
        axes = " against ".join(a for a in (ax.get_ylabel().strip(), ax.get_xlabel().strip()) if a)
        text = clean("; ".join(t for t in (title, axes) if t))
        if text and text not in panels:
            panels.append(text)
    if len(panels) > 1:
        panels = [f"panel {i}: {t}" for i, t in enumerate(panels, 1)]
    sup = clean(fig.get_suptitle()) if hasattr(fig, "get_suptitle") else ""
    first = next((line for line in view.summary.splitlines() if line.strip()), "")
    first = "" if re.search(r"\S {2,}\S", first.strip()) else clean(first)  # columns: a table header/row
    caption = clean(" ".join(t.get_text() for t in fig.texts if t.get_gid() == "caption"))
    parts = [p for p in (sup, "; ".join(panels), caption or first) if p]
    alt = ". ".join(parts) if parts else "Chart (its numbers are printed above it)"
    return alt if len(alt) <= limit else alt[: limit - 1].rstrip() + "…"


# =========================================================================== figures and axes, reused
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
                resize=None):
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
    ``subplots_adjust``), instead of new axes being built (issue 38: ~40 ms)."""
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
            reset_axes(ax, keep_log="".join(xy for j, xy in keep_log if j == i))
        return into, axes
    fig = blank_figure(width, height, into)
    axes = build(fig)
    if into is not None:
        fig.llmsizing_layout, fig.llmsizing_axes = (width, height, layout), axes
        fig.llmsizing_resize_kind = None if resize is None else resize[0]
    return fig, axes


def _kept_legend(ax, key, make):
    """``ax``'s legend: ``make()`` (a call of ``ax.legend``) unless the axes already shows the legend made for
    the same ``key`` at the last redraw of a widget's kept figure, which is then kept as it is (making a
    legend of 6-8 entries costs a redraw 2-3 ms). ``key`` must determine everything the legend shows (its
    labels, and whatever sets its handles' styles and its placement). :func:`reset_axes` leaves such a legend
    in place, so a render function must call this for the same axes on every redraw, or its stale legend
    stays."""
    legend = ax.get_legend()
    if legend is not None and getattr(legend, "llmsizing_key", None) == key:
        return legend
    if legend is not None:
        legend.remove()
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


# =========================================================================== bars
def capacity_line(ax, gib: float, label: str, *, horizontal: bool = True, color: str = "0.25") -> None:
    """Mark a GPU's memory capacity on a bar chart."""
    if horizontal:
        ax.axhline(gib, color=color, lw=1, ls="--")
        ax.annotate(f"{label} ({gib:.1f} GiB)", (1.0, gib), xycoords=("axes fraction", "data"),
                    ha="right", va="bottom", fontsize=8, color=color)
    else:
        ax.axvline(gib, color=color, lw=1, ls="--")
        ax.annotate(f"{label}\n{gib:.1f} GiB", (gib, 1.0), xycoords=("data", "axes fraction"),
                    ha="left", va="top", fontsize=8, color=color)


def _legend_entries(ax) -> tuple[list, list]:
    """``ax.get_legend_handles_labels()`` in the order it gave when :func:`stacked_bars` drew bar containers
    (listed after every other artist, in the order drawn): the stacked bars' collections with the
    containers."""
    from matplotlib.container import Container

    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(handles)), key=lambda i: getattr(handles[i], "llmsizing_bars", False)
                   or isinstance(handles[i], Container))
    return [handles[i] for i in order], [labels[i] for i in order]


def _bar_collection(ax, pos, start, end, *, thickness: float, colors, horizontal: bool, sticky=()):
    """Bars from ``start`` to ``end`` along the value axis (x if ``horizontal``, else y), each ``thickness``
    wide across it and centred on ``pos``, added to ``ax`` as one PolyCollection without edges: one
    ``Rectangle`` artist per bar, as ``bar`` and ``barh`` make, costs a widget redraw ~1 ms more per bar,
    making and drawing it (several times slower with ~100 rectangles). ``sticky``: values along the value axis
    that autoscaling adds no margin beyond (``barh``'s left ends). Returns the collection. Shared by
    :func:`_fast_stacked_columns` and :func:`_fast_hbars`."""
    import numpy as np
    from matplotlib.collections import PolyCollection

    lo, hi = pos - thickness / 2, pos + thickness / 2
    verts = np.stack([np.column_stack([lo, start]), np.column_stack([hi, start]), np.column_stack([hi, end]),
                      np.column_stack([lo, end])], axis=1)            # corners as (across, along)
    if horizontal:
        verts = verts[..., ::-1]                                       # (x, y) = (along, across)
    bars = PolyCollection(verts, facecolors=colors, edgecolors="none")
    (bars.sticky_edges.x if horizontal else bars.sticky_edges.y).extend(sticky)
    ax.add_collection(bars)
    return bars


def _fast_stacked_columns(ax, labels: list[str], stacks: dict[str, list[float]], *, width: float = 0.8,
                          unit: float = GiB, colors: dict | None = None, legend: bool = True):
    """Vertical stacked bars like :func:`stacked_bars` in one :func:`_bar_collection`, component by component
    (the pixels of one per component; issue 38: ~1 ms a collection), with a :func:`_kept_legend` beside the
    axes (``legend=False``: none). ``colors``: component -> colour (default :data:`COLORS`). Returns tops."""
    import numpy as np

    colors = COLORS if colors is None else colors
    pos = np.arange(len(labels))
    ends = np.cumsum([np.zeros(len(labels))] + [np.asarray(v, dtype=float) / unit for v in stacks.values()],
                     axis=0)
    faces = [colors.get(comp) for comp in stacks]
    for g in ([list(range(len(stacks)))] if None not in faces else [[i] for i in range(len(stacks))]):
        if g:
            _bar_collection(ax, np.tile(pos, len(g)), ends[g].ravel(), ends[[i + 1 for i in g]].ravel(),
                            thickness=width, colors=[faces[i] for i in g for _ in labels] if len(g) > 1
                            else faces[g[0]], horizontal=False)
    bottom = ends[-1]
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_xticks(pos, labels)
    if legend:
        entries = tuple((comp, colors.get(comp)) for comp in reversed(stacks))
        _kept_legend(ax, ("stacked columns", entries), lambda: ax.legend(
            handles=[Patch(facecolor=c, label=comp) for comp, c in entries], loc="upper left",
            bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False))
    return bottom


def _line(ax, x, y, **style):
    """``ax.plot(x, y, **style)`` (one line, ``style`` naming its colour) without asking the axes to
    autoscale: for a caller that sets both limits itself. ``Axes.plot``'s argument parsing and the
    autoscaling that the next limit set then runs cost the planner's redraw ~5 ms (issue 38). Returns the
    line."""
    import numpy as np
    from matplotlib.lines import Line2D

    if "color" not in style:
        raise ValueError("_line needs a color= (it does not take one from the colour cycle)")
    line = Line2D(np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel(), **style)
    ax.add_line(line)
    return line


def _fast_hbars(ax, y, widths, *, left=0.0, height: float = 0.8, colors=None, autoscale: bool = True):
    """Horizontal bars like ``ax.barh(y, widths, left=left, height=height, color=colors)``, drawn as one
    :func:`_bar_collection`. Like ``barh``, the x axis autoscales from the bars' left ends without a margin
    there (``autoscale=False``: not now, for a caller that sets both limits next). Returns legend proxies, one
    per bar."""
    import numpy as np

    y = np.asarray(y, dtype=float)
    x0 = np.broadcast_to(np.asarray(left, dtype=float), y.shape)
    _bar_collection(ax, y, x0, x0 + np.asarray(widths, dtype=float), thickness=height, colors=colors,
                    horizontal=True, sticky=np.unique(x0).tolist())
    if autoscale:                           # (add_collection updates the data limits, but does not autoscale)
        ax.autoscale_view()
    return [Patch(facecolor=c, edgecolor="none")
            for c in np.broadcast_to(np.asarray(colors, dtype=object), y.shape)]


def _stage_memory_columns(ax, tm, g) -> None:
    """One stacked column per pipeline stage of ``tm`` (a :class:`~llmsizing.memory.TrainingMemory`): weights,
    gradients, optimizer, activations, temporaries and overhead, with ``g``'s capacity line and the most
    loaded stage in bold. Shared by the parallel explorer (chapter 8) and the MoE layout (chapter 18)."""
    import numpy as np

    rows = list(tm.stages)
    stacks = {"weights": [r["weights"] for r in rows], "gradients": [r["gradients"] for r in rows],
              "optimizer": [r["optimizer"] for r in rows], "activations": [r["activations"] for r in rows]}
    stacks["temporaries"] = [max(r["peak"] - r["weights"] - r["gradients"] - r["optimizer"]
                                 - r["activations"], 0.0)
                             for r in rows]
    stacks["overhead"] = [r["total"] - r["peak"] for r in rows]
    labels = [f"stage {r['stage']}" if len(rows) > 1 else "each GPU" for r in rows]
    _fast_stacked_columns(ax, labels, stacks, legend=False)
    _kept_legend(ax, ("stage memory", tuple(stacks)), lambda: ax.legend(
        handles=[Patch(facecolor=COLORS[k], label=k) for k in stacks], fontsize=6.5, frameon=False, ncols=3,
        loc="upper center", bbox_to_anchor=(0.5, -0.1)))
    capacity_line(ax, g.memory_gib, g.name)
    totals = np.array([r["total"] for r in rows]) / GiB
    ax.set_ylim(0, 1.15 * max(totals.max(), g.memory_gib))
    ax.get_xticklabels()[tm.stage].set_fontweight("bold")
    ax.set_ylabel("GiB per GPU")
    many = len(rows) > 8
    ax.tick_params(axis="x", labelrotation=90 if many else 0, labelsize=6 if many else "medium")


def _step_time_bars(ax, st, *, fontsize: float) -> None:
    """Where one step's time goes (:meth:`~llmsizing.layouts.StepTime.parts`): one horizontal bar per part,
    compute first; shared by the parallelism explorer and the planner's figure (a mixture of experts'
    all-to-all, ``ep``, in the colour chapter 18's figures give it)."""
    import numpy as np

    parts = st.parts()
    names = list(parts)
    _fast_hbars(ax, np.arange(len(names)), [parts[k] for k in names],
                colors=[{**EXPLORER_TIME_COLORS, "ep": "#D55E00"}[k] for k in names])
    ax.set_yticks(np.arange(len(names)), [n if n in ("compute", "pipeline bubble") else f"{n} comm."
                                          for n in names], fontsize=fontsize)
    ax.invert_yaxis()


# =========================================================================== numbers and log axes
#: A caption's font size (pt), line spacing (in font sizes) and the room left under it (inches).
_CAPTION_PT, _CAPTION_LINESPACING, _CAPTION_PAD_IN = 8.0, 1.25, 0.06


def _caption_room(caption: str, width_in: float) -> tuple[str, float]:
    """A render function's ``caption`` wrapped to ``width_in`` inches of text (each line measured in the
    caption's font) and the height (inches) it adds under the axes (0.0 for ``""``), for the render function
    to grow its figure by: the words travel inside the PNG, so the static site, Voila and the lab show the
    same caption (issue 38: chapter 4's figure had no caption argument). A caption is a ``str``; anything
    else is a TypeError."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    if not isinstance(caption, str):
        raise TypeError(f"caption must be a str (the text under the figure; '' for none), got "
                        f"{type(caption).__name__}")
    if not caption.split():
        return "", 0.0
    font, measure = FontProperties(size=_CAPTION_PT), TextToPath().get_text_width_height_descent
    lines, line = [], ""
    for word in caption.split():
        longer = f"{line} {word}" if line else word
        if line and measure(longer, font, ismath=False)[0] > 0.98 * width_in * 72:   # (points)
            lines, line = [*lines, line], word
        else:
            line = longer
    lines.append(line)
    return "\n".join(lines), len(lines) * _CAPTION_LINESPACING * _CAPTION_PT / 72 + 2 * _CAPTION_PAD_IN


#: The suffix ladder of every short number in the book's figures: trillion, billion, million, thousand.
_SUFFIXES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def _suffixed(v, spec: str, *, below: str, ladder=_SUFFIXES) -> str:
    """``v`` in the largest unit of ``ladder`` (a slice of :data:`_SUFFIXES`) that its size reaches, formatted
    with ``spec`` and followed by the unit's letter; ``v`` formatted with ``below`` when it reaches none."""
    for unit, name in ladder:
        if abs(v) >= unit:
            return f"{v / unit:{spec}}{name}"
    return f"{v:{below}}"


def _short_number(v, _=None) -> str:
    """A tick label in plain text (no mathtext, which is slow to lay out): 0.01, 0.5, 20, 1k, 10k, 2M, 1B,
    1T."""
    return _suffixed(v, "g", below="g")


def _log_kept(axis) -> bool:
    """Whether ``axis`` still has the log scale :func:`_log_scale` set last (no other scale since)."""
    kept = getattr(axis, "llmsizing_log_transform", None)
    return axis.get_scale() == "log" and axis.get_transform() is kept


def _log_scale(axis, base: float = 10) -> None:
    """``set_xscale("log", base=base)`` (or y), unless ``axis`` still has that scale from the last redraw of
    a widget's kept figure (``keep_log`` of :func:`figure_axes`): a new scale costs a redraw ~1 ms."""
    if not (_log_kept(axis) and axis.get_transform().base == base):
        (axis.axes.set_xscale if axis is axis.axes.xaxis else axis.axes.set_yscale)("log", base=base)
        axis.llmsizing_log_transform = axis.get_transform()


def _tokens(n: float) -> str:
    """A token count in a short form: 1T, 300B, 15.6T (below a million: 250,000)."""
    return _suffixed(n, ".3g", below=",.0f", ladder=_SUFFIXES[:3])


def _usd(v, _=None) -> str:
    """Dollars in a short form: $850, $12k, $1.2M, $2.5B."""
    return "$" + _suffixed(v, ".3g", below=",.0f", ladder=_SUFFIXES[1:])


def _log_axis(axis, lo: float, hi: float, fmt, *, pad: float = 1.4) -> None:
    """A log axis from ``lo / pad`` to ``hi * pad`` with fixed 1-2-5 ticks (decades only over more than
    2.5 decades) labelled by ``fmt`` and no minor ticks: a log axis left to its default locators spends most
    of a redraw laying out minor ticks and mathtext labels."""
    import math

    from matplotlib.ticker import FixedLocator, NullLocator

    if not (lo > 0 and hi >= lo):
        raise ValueError(f"a log axis needs 0 < lo <= hi; got lo={lo!r}, hi={hi!r}")
    lo, hi = lo / pad, hi * pad
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for steps in ((1,) if hi / lo >= 300 else (), (1, 2, 5), (1, 2, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [m * 10**e for e in decades for m in steps if lo <= m * 10**e <= hi]
        if len(ticks) >= 2:
            break
    if len(ticks) < 2:            # a range narrower than two 1-9 steps: its two ends, to 3 significant digits
        def unit(x):
            return 10.0 ** (math.floor(math.log10(x)) - 2)
        ticks = [math.ceil(lo / unit(lo)) * unit(lo), math.floor(hi / unit(hi)) * unit(hi)]
    _log_scale(axis)
    (axis.axes.set_xlim if axis is axis.axes.xaxis else axis.axes.set_ylim)(lo, hi)
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_ticks(ticks, [fmt(t) for t in ticks])
