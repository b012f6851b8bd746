"""What every figure of the book shares (:mod:`llmsizing.charts`'s base; the part modules import it, it
imports none of them): the palette, the :class:`View` a render function returns and :func:`show`, which prints
its summary and displays its PNG with alt text (:func:`figure_alt_text`), fixed margins with
:class:`FixedView`; and bars (the fast PolyCollection bars of :func:`_bar_collection`,
:func:`capacity_line`). It is built on two modules of its own, whose every name it imports and re-exports
(issue 32: modules under 600 lines): :mod:`~llmsizing.charts.figures`, figures and axes a widget redraws into
(:func:`new_figure`, :func:`blank_figure`, :func:`figure_axes`, :func:`reset_axes`, :func:`_kept_legend`,
:func:`_kept_figure_legend`), and :mod:`~llmsizing.charts.labels`, captions drawn inside a PNG
(:func:`_caption_room`) and plain-text numbers on log axes (:func:`_log_axis`, :func:`_short_number`,
:func:`_tokens`, :func:`_usd`).

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..units import GiB
# figures and axes reused, and what the figures write: every name of these two modules is still here
from .figures import (DPI, KEPT_LEGENDS, _fixed_figure, _flat, _grid, _inch_margins,  # noqa: F401
                      _kept_figure_legend, _kept_legend, _settle_grids, blank_figure, figure_axes, new_figure,
                      reset_axes)
from .labels import (_CAPTION_LINESPACING, _CAPTION_PAD_IN, _CAPTION_PT, _SUFFIXES,  # noqa: F401
                     _caption_room, _log_axis, _log_kept, _log_scale, _short_number, _suffixed, _tokens, _usd)

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
    "token ids": "#000000", "logits + loss": "#88CCEE", "saved by op SAC (matmuls, SDPA)": "#999933",
}

#: One colour per catalogued GPU in the figures of chapters 6, 11, 12 and 15 (vendor families share a hue).
#: The GPUs chapter 6 names in its roofline stand out from the white figure by a WCAG contrast ratio of at
#: least 3 (their names are written in these colours; tests/test_palette.py): the MI300X's Okabe-Ito yellow
#: (#F0E442, 1.3:1) became Tol's olive (#999933, 3.0:1; issue 38).
GPU_COLORS = {"A10": "#BBBBBB", "L40S": "#555555", "RTX 4090": "#AA4499", "A100 40GB": "#88CCEE",
              "A100 80GB": "#332288", "H100 SXM": "#009E73", "H200": "#000000", "B200": "#D55E00",
              "MI300X": "#999933"}

#: The least WCAG 2.1 contrast ratio a GPU's name written in its own colour keeps against the white figure
#: (success criterion 1.4.11 for graphics, 1.4.3 for large text: 3:1); a lighter colour writes it in dark
#: grey.
MIN_LABEL_CONTRAST = 3.0


def _contrast_ratio(colour, background="white") -> float:
    """WCAG 2.1's contrast ratio (L1 + 0.05) / (L2 + 0.05) of two matplotlib colours, L the relative luminance
    of their linearised sRGB channels (21 for black on white, 1 for a colour on itself)."""
    from matplotlib.colors import to_rgb

    def luminance(c) -> float:
        lin = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in to_rgb(c)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    lo, hi = sorted((luminance(colour), luminance(background)))
    return (hi + 0.05) / (lo + 0.05)


def _label_colour(colour, background="white"):
    """``colour`` for a label's text if it reaches :data:`MIN_LABEL_CONTRAST` against ``background``, else
    dark grey (0.25: 10:1 on white): chapter 6's A10 (#BBBBBB, 1.9:1) and A100 40GB (#88CCEE, 1.8:1)
    (issue 38)."""
    return colour if _contrast_ratio(colour, background) >= MIN_LABEL_CONTRAST else "0.25"


#: The step-time parts of :func:`_step_time_bars` (the parallelism explorer, chapter 8, and the planner,
#: chapter 12), in drawing order, with their colours.
EXPLORER_TIME_COLORS = {"compute": "#0072B2", "pipeline bubble": "#BBBBBB", "dp": "#E69F00", "tp": "#009E73",
                        "pp": "#CC79A7", "cp": "#56B4E9"}


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


# =========================================================================== bars
def capacity_line(ax, gib: float, label: str, *, horizontal: bool = True, color: str = "0.25",
                  left: bool = False) -> None:
    """Mark a GPU's memory capacity on a bar chart (a horizontal line's label at the right end, or at the left
    end if ``left``: over the short bars of a chart whose tall ones are on the right). The label stands 2
    points clear of its dashed line, so the line never runs through the text."""
    if horizontal:
        ax.axhline(gib, color=color, lw=1, ls="--")
        ax.annotate(f"{label} ({gib:.1f} GiB)", (0.01 if left else 1.0, gib),
                    xycoords=("axes fraction", "data"), xytext=(0, 2), textcoords="offset points",
                    ha="left" if left else "right", va="bottom", fontsize=8, color=color)
    else:
        ax.axvline(gib, color=color, lw=1, ls="--")
        ax.annotate(f"{label}\n{gib:.1f} GiB", (gib, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(2, -2), textcoords="offset points", ha="left", va="top", fontsize=8, color=color)


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
    from matplotlib.collections import PolyCollection

    bars = PolyCollection(_bar_verts(pos, start, end, thickness=thickness, horizontal=horizontal),
                          facecolors=colors, edgecolors="none")
    (bars.sticky_edges.x if horizontal else bars.sticky_edges.y).extend(sticky)
    ax.add_collection(bars)
    return bars


def _bar_verts(pos, start, end, *, thickness: float, horizontal: bool):
    """The corners of :func:`_bar_collection`'s bars, ``(n, 4, 2)`` as ``(x, y)``."""
    import numpy as np

    lo, hi = pos - thickness / 2, pos + thickness / 2
    verts = np.stack([np.column_stack([lo, start]), np.column_stack([hi, start]), np.column_stack([hi, end]),
                      np.column_stack([lo, end])], axis=1)            # corners as (across, along)
    return verts[..., ::-1] if horizontal else verts                   # (x, y) = (along, across)


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


def _set_hbars(bars, y, widths, *, left=0.0, height: float = 0.8, colors=None) -> None:
    """Make ``bars``, a collection :func:`_fast_hbars` made, the bars ``_fast_hbars(ax, y, widths, left=left,
    height=height, colors=colors)`` would make now (wid33: a widget's kept panel updated in place instead of a
    new collection). The data limits and the autoscaling are the caller's (a new collection's are updated by
    ``ax.add_collection``)."""
    import numpy as np

    y = np.asarray(y, dtype=float)
    x0 = np.broadcast_to(np.asarray(left, dtype=float), y.shape)
    bars.set_verts(_bar_verts(y, x0, x0 + np.asarray(widths, dtype=float), thickness=height, horizontal=True))
    bars.set_facecolor(colors)
    bars.sticky_edges.x[:] = np.unique(x0).tolist()


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
