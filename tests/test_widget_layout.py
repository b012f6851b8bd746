"""Issue 12, "Speed" and "Layout": the widgets redraw into the figure they keep, and fit a laptop screen.

* no drift: after any control moves, the widget shows exactly what a fresh call of its ``render_*`` function
  with the same arguments gives (same summary text; same figure content: axes, scales, limits, ticks and their
  labels, plotted data, texts, legends), although the widget redrew into its kept figure (``into=``);
* the figure has a fixed pixel size within the budget, read from the PNG header, and the ``Image`` is shown at
  exactly that size (never stretched); the controls sit in a column of fixed width beside it;
* bad input shows the library's message and clears the figure; the next valid value draws it right again;
* chapter 4's (and every other) toggle buttons are wide enough for their longest label.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import ipywidgets as W
import numpy as np
import pytest
from conftest import controls_of, undrawn, widget

import llmsizing.charts as charts
import llmsizing.widgets as widgets
from llmsizing.widgets import CONTROLS_WIDTH_PX, FIGURE_MAX_PX, Dashboard, png_size

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench import neighbour  # noqa: E402  (the move make bench times: a valid value next to the current one)

NAMES = sorted(n for n in widgets.__all__ if n.endswith("_widget"))


def board(name: str) -> Dashboard:
    """The widget at its defaults, one instance shared with tests/test_widgets.py (conftest.widget)."""
    return widget(name)


def _text(t) -> tuple:
    return (t.get_text(), tuple(np.round(np.asarray(t.get_position(), dtype=float), 6)), t.get_fontweight(),
            t.get_visible())


def _artist(a) -> tuple:
    """What a plotted artist shows: its type, data and style, as plain numbers and strings."""
    out: list = [type(a).__name__, a.get_visible(), a.get_label() if not a.get_label().startswith("_") else ""]
    if hasattr(a, "get_xydata"):                                  # Line2D
        out += [np.round(a.get_xydata(), 9).tolist(), a.get_linestyle(), a.get_color(), a.get_marker()]
    elif hasattr(a, "get_paths") and hasattr(a, "get_offsets"):   # collections
        out += [[np.round(p.vertices, 9).tolist() for p in a.get_paths()],
                np.round(np.asarray(a.get_offsets()), 9).tolist(),
                np.round(np.asarray(a.get_facecolor()), 6).tolist()]
    elif hasattr(a, "get_path"):                                 # patches
        out += [np.round(a.get_patch_transform().transform(a.get_path().vertices), 9).tolist()
                if hasattr(a, "get_patch_transform") else None, np.round(a.get_facecolor(), 6).tolist()]
    if hasattr(a, "get_text"):
        out.append(_text(a))
    if hasattr(a, "get_array") and a.get_array() is not None:    # images, meshes
        out.append(np.round(np.asarray(a.get_array(), dtype=float), 9).tolist())
    return tuple(map(repr, out))


def figure_content(fig, *, drawn: bool = False) -> dict:
    """Everything a reader can see in a figure, drawn or not yet drawn. ``drawn``: the figure has just been
    drawn (saved to PNG) and not changed since, so it is not drawn again (a figure made by a render function
    stays marked ``stale`` after a draw)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    # tick positions, labels and colours are settled by a draw; a figure not changed since its last draw
    # (matplotlib marks any change ``stale``: the widget's figure just drawn for its PNG) is settled already
    if fig.stale and not drawn:
        fig.canvas.draw()
    axes = []
    for ax in fig.axes:
        axes.append({
            "position": tuple(np.round(ax.get_position().bounds, 6)),
            "titles": [ax.get_title(loc) for loc in ("left", "center", "right")],
            "title_positions": [tuple(np.round(t.get_position(), 6)) for t in (ax.title, ax._left_title,
                                                                               ax._right_title)],
            "labels": (ax.get_xlabel(), ax.get_ylabel()),
            "scales": (ax.get_xscale(), ax.get_yscale()),
            "limits": (tuple(np.round(ax.get_xlim(), 9)), tuple(np.round(ax.get_ylim(), 9))),
            "xticks": [(round(float(t), 9), lab.get_text(), lab.get_fontweight(), lab.get_rotation(),
                        lab.get_fontsize()) for t, lab in zip(ax.get_xticks(), ax.get_xticklabels())],
            "yticks": [(round(float(t), 9), lab.get_text(), lab.get_fontweight(), lab.get_rotation(),
                        lab.get_fontsize()) for t, lab in zip(ax.get_yticks(), ax.get_yticklabels())],
            "grid": [[t.gridline.get_visible() for t in axis.get_major_ticks()] for axis in (ax.xaxis, ax.yaxis)],
            "minor": (len(ax.get_xticks(minor=True)), len(ax.get_yticks(minor=True))),
            "artists": sorted(_artist(a) for a in [*ax.lines, *ax.patches, *ax.collections, *ax.images]),
            "texts": sorted(_text(t) for t in ax.texts),
            "legend": [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else None,
            "spines": {k: s.get_visible() for k, s in ax.spines.items()},
        })
    return {"size": tuple(fig.get_size_inches()), "axes": axes,
            "legends": [[t.get_text() for t in leg.get_texts()] for leg in fig.legends],
            "texts": [t.get_text() for t in fig.texts]}


def _pixels(png: bytes) -> np.ndarray:
    import io

    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(bytes(png))).convert("RGB"))


def fresh_render(b: Dashboard) -> tuple:
    """What a fresh call of the widget's render function gives for the widget's current values (no into=: a new
    figure, as the notebooks draw it): its summary as the widget shows it, its figure content, and the pixels of
    its PNG. Kept for the last few sets of values: every test of a widget's controls ends by comparing the
    widget, back at its defaults, with the same fresh render, worked out once."""
    return _fresh_render(b, repr(sorted(b.values().items())))


@functools.lru_cache(maxsize=8)
def _fresh_render(b: Dashboard, values: str) -> tuple:
    fresh = rendered(b)
    pixels = _pixels(fresh.png(compress_level=1))     # (saving it draws it: figure_content reads that draw)
    return widgets.summary_html(fresh.summary), figure_content(fresh.figure, drawn=True), pixels


def rendered(b: Dashboard):
    """A fresh call of the widget's render function with the widget's current values (what
    :func:`fresh_render` reads), kept for the last few sets of values: the summary test of a widget at its
    defaults reads the render its controls' tests made."""
    return _rendered(b, repr(sorted(b.values().items())))


@functools.lru_cache(maxsize=8)
def _rendered(b: Dashboard, values: str):
    return b.render(**b.values())


def assert_no_drift(b: Dashboard, where: str) -> None:
    """The widget shows what a fresh render gives: the same summary, the same figure content, and the image the
    reader sees has the same pixels as the fresh figure saved to PNG. (For the planner, ``b.render`` shares the
    widget's caches of plan(); tests/test_ch12_planner_page.py compares the widget's plans with plan() itself.)"""
    assert b.error.value == "", f"{where}: {b.error.value}"
    summary, content, pixels = fresh_render(b)
    assert b.summary.value == summary, where
    # the widget's figure as drawn for the PNG it shows, as the fresh one is read (drawn=True), unless the
    # move was answered from the kept answers: then reading it renders it behind, and figure_content draws it
    drawn = b._behind is None                       # (read before b.figure, which renders what is behind)
    assert figure_content(b.figure, drawn=drawn) == content, where
    assert np.array_equal(_pixels(b.image.value), pixels), f"{where}: image differs"


def move_to_another_valid_value(b: Dashboard, ctrl):
    """Move the control to a value next to its current one that the library accepts (the neighbour first, then
    the other options in turn, or further steps of a slider) and return it; a value the library refuses is
    undone before the next is tried. None (the control back where it was) if none is accepted."""
    current = ctrl.value
    candidates = [neighbour(ctrl)]
    if hasattr(ctrl, "_options_values") and not isinstance(ctrl, W.SelectMultiple):
        candidates += [o for o in ctrl._options_values if o != current]
    elif hasattr(ctrl, "max") and not isinstance(current, (bool, tuple)):
        step = getattr(ctrl, "step", 1) or 1
        candidates += [current + k * step for k in range(-10, 11) if k and ctrl.min <= current + k * step <= ctrl.max]
    for value in candidates:
        if value is None or value == current:
            continue
        ctrl.value = value
        if not b.error.value:
            return value
        ctrl.value = current
    return None


def control_cases():
    """(widget, control) for every control, listed from the undrawn copies (conftest.controls_of)."""
    return [(n, k) for n in NAMES for k in controls_of(n).controls]


#: Controls that have no valid value beside their default until another control moves: sequence parallelism
#: needs tp > 1, interleaved stages need a pipeline.
NEEDS = {("parallel_explorer_widget", "sp"): {"tp": 2}, ("parallel_explorer_widget", "virtual_stages"): {"pp": 2}}
NEEDS[("measured_step_widget", "optimizer_impl")] = {"seq": 256}     # for-loop and fused AdamW: 2 x 256 only


# ----------------------------------------------------------------------------- the kept figure draws like a new one
@pytest.mark.parametrize("name,key", control_cases(), ids=[f"{n}-{k}" for n, k in control_cases()])
def test_update_equals_a_fresh_render(name, key):
    b = board(name)
    ctrl = b.controls[key]
    default = ctrl.value
    assert b._takes_into, f"{name}: the widget's render does not take into= (it would rebuild every time)"
    partners = {k: b.controls[k].value for k in NEEDS.get((name, key), {})}
    try:
        for k, v in NEEDS.get((name, key), {}).items():      # a control that is only valid with another one
            b.controls[k].value = v
        other = move_to_another_valid_value(b, ctrl)
        assert other is not None, f"{name}.{key}: no value next to {default!r} draws"
        assert ctrl.value == other
        assert_no_drift(b, f"{name}.{key} = {ctrl.value!r}")
    finally:
        ctrl.value = default
        for k, v in partners.items():
            b.controls[k].value = v
    assert_no_drift(b, f"{name}.{key} back to {default!r}")
    assert b.figure.axes and b.image.value, name


def test_a_long_walk_does_not_accumulate_artists():
    b = widgets.parameter_counts_widget()
    layers = b.controls["layers"]
    start = layers.value
    for v in range(start + 1, start + 30):
        layers.value = v
    ax = b.figure.axes[0]
    # the bars (one collection) and one empty legend entry per component (stacked_bars)
    assert len(ax.collections) == len(ax.get_legend_handles_labels()[0]) + 1 == 6
    assert not ax.containers and not ax.patches
    assert len(b.figure.axes) == 1 and len(b.figure.legends) == 1
    assert_no_drift(b, "after 29 redraws")
    layers.value = start


# ----------------------------------------------------------------------------- errors, then recovery
@pytest.mark.parametrize("name,key,bad", [
    ("parallel_explorer_widget", "sp", True),          # sequence parallelism needs tp > 1
    ("serving_widget", "model", "llama-3.1-405b"),      # 405B in bf16 on one H100 does not fit
])
def test_error_clears_then_valid_value_draws_again(name, key, bad):
    b = getattr(widgets, name)()
    ctrl = b.controls[key]
    good = ctrl.value
    ctrl.value = bad
    assert b.error.value and "Traceback" not in b.error.value
    assert b.error.layout.display is None                    # the message is shown
    assert bytes(b.image.value) == b"" and b.summary.value == ""
    ctrl.value = good
    assert b.error.value == "" and b.error.layout.display == "none"
    assert bytes(b.image.value).startswith(b"\x89PNG")
    assert_no_drift(b, f"{name}: {key} back to {good!r} after an error")


# ----------------------------------------------------------------------------- layout
@functools.cache
def walked(name: str) -> frozenset:
    """The pixel sizes of the widget's PNG after each of its first four controls moved to a neighbouring value
    (each back to its default undrawn): once per widget and process. The size test reads them; the kept-text
    test needs only that the widget has drawn other strings before (a warm cache), which this walk does, so
    the two tests share one walk instead of making seven moves."""
    b = board(name)
    sizes = set()
    for key, ctrl in list(b.controls.items())[:4]:       # the size does not follow the data
        default = ctrl.value
        ctrl.value = neighbour(ctrl)
        if not b.error.value:
            sizes.add(png_size(bytes(b.image.value)))
        with undrawn(b):                                  # back to the default, drawn after the walk
            ctrl.value = default
    return frozenset(sizes)


@pytest.mark.parametrize("name", NAMES)
def test_figure_has_a_fixed_size_within_the_budget_and_is_not_stretched(name):
    b = board(name)
    sizes = set(walked(name))
    b.update()
    w, h = png_size(bytes(b.image.value))
    sizes.add((w, h))
    assert w <= FIGURE_MAX_PX[0] and h <= FIGURE_MAX_PX[1], f"{name}: {w}x{h} px"
    assert len(sizes) == 1 or name == "model_states_widget", f"{name}: the figure changes size: {sizes}"
    # its own pixel width (the height follows the aspect), shrinking on a narrow page but never stretched
    assert (b.image.layout.width, b.image.layout.height) == (f"{w}px", "auto")
    assert b.image.layout.max_width == "100%" and b.image.layout.flex == "0 0 auto"
    assert b.layout.flex_flow == "row wrap"
    column, right = b.children
    assert column.layout.width == f"{CONTROLS_WIDTH_PX}px"
    for ctrl in column.children:                                  # every control fits the column
        width = ctrl.layout.width or "0px"
        assert width.endswith("px") and int(width[:-2]) <= CONTROLS_WIDTH_PX, (name, ctrl.description)
    assert b.image in right.children and b.summary in right.children
    # issue 25: the summary is as tall as its text (no box that scrolls) and as wide as the largest figure
    assert b.summary.layout.overflow is None and b.summary.layout.max_height is None
    assert b.summary.layout.max_width == f"{FIGURE_MAX_PX[0]}px"


@pytest.mark.parametrize("name", NAMES)
def test_the_whole_widget_fits_the_screen_budget(name):
    """Width: the controls' column plus the widest figure stays within ~1100 px. Height: the figure (and the
    planner's selector above it) within ~620 px; the tallest controls' column too. (The summary follows below the
    figure, as tall as its text: issue 25.) One case per widget (each runs where the widget's other tests run:
    conftest.widget_of)."""
    assert CONTROLS_WIDTH_PX + FIGURE_MAX_PX[0] + 10 <= 1100
    assert FIGURE_MAX_PX[1] + 32 <= 620
    column = board(name).children[0]
    # ~34 px a row; a multi-select shows every GPU (~19 px a row)
    height = sum(19 * c.rows + 10 if isinstance(c, W.SelectMultiple) else 20 if isinstance(c, W.HTML)
                 else 34 for c in column.children)
    assert height <= 620, f"{name}: the controls' column is ~{height} px tall"


# ----------------------------------------------------------------------------- toggle buttons
def label_px(label: str) -> int:
    """A generous width for a button label at JupyterLab's 13 px UI font (~7.5 px a character) plus padding."""
    return round(7.5 * len(label)) + 20


def toggle_cases():
    return [(n, k) for n in NAMES for k, c in controls_of(n).controls.items() if isinstance(c, W.ToggleButtons)]


def test_toggle_cases_include_chapter_4s():
    assert ("activation_memory_widget", "attention") in toggle_cases()


@pytest.mark.parametrize("name,key", toggle_cases(), ids=[f"{n}-{k}" for n, k in toggle_cases()])
def test_toggle_button_labels_fit(name, key):
    ctrl = board(name).controls[key]
    if True:
        width = int(ctrl.style.button_width.removesuffix("px"))
        longest = max(ctrl._options_labels, key=len)
        assert width >= label_px(longest), f"{name}.{key}: {width} px buttons cut {longest!r}"
        room = CONTROLS_WIDTH_PX - 110 - 12
        assert len(ctrl.options) * (width + 4) <= room, f"{name}.{key}: the buttons wrap onto two lines"
        # the description beside the buttons (ipywidgets 8 would put it on a line of its own above them)
        assert (ctrl.layout.display, ctrl.layout.align_items) == ("flex", "center"), f"{name}.{key}"


# ----------------------------------------------------------------------------- the text-caching canvas
@pytest.mark.parametrize("name", NAMES)
def test_kept_text_bitmaps_give_the_pixels_of_a_plain_agg_draw(name):
    """The widgets' canvas keeps each text's bitmap and layout between redraws, and each axis's ticks within a
    draw (widgets._text_cache_canvas, widgets.canvas); what it draws must be exactly what matplotlib's own Agg
    canvas draws for the same figure, pixel for pixel."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    b = board(name)
    walked(name)                                            # redraws with other strings first: a warm cache
    b.update()
    canvas = b.figure.canvas
    assert type(canvas) is widgets._text_cache_canvas() and type(canvas) is not FigureCanvasAgg
    kept_before = dict(canvas.get_renderer().text_bitmaps)
    layouts_before = dict(canvas.get_renderer().text_layouts)
    canvas.draw()                                            # the same figure again: every text a kept bitmap
    kept = np.array(canvas.buffer_rgba())
    after = canvas.get_renderer().text_bitmaps
    assert len(kept_before) > 5 and after.keys() == kept_before.keys(), "texts were rasterised again"
    assert all(after[k] is kept_before[k] for k in after), "a kept bitmap was replaced"
    # ... and a kept layout (widgets.canvas): none measured again
    layouts = canvas.get_renderer().text_layouts
    assert len(layouts_before) > 5 and layouts.keys() == layouts_before.keys(), "texts were laid out again"
    assert all(layouts[k] is layouts_before[k] for k in layouts), "a kept layout was replaced"
    try:
        plain = FigureCanvasAgg(b.figure)
        plain.draw()
        assert np.array_equal(kept, np.asarray(plain.buffer_rgba())), name
    finally:
        widgets._text_cache_canvas()(b.figure)              # the widget's own canvas back


def test_kept_ticks_and_layouts_follow_the_limits_and_stay_in_their_canvas():
    """widgets.canvas keeps an axis's ticks for one draw only: new limits give new ticks at the next draw, drawn
    as a plain Agg canvas draws them; between draws (and in any other canvas's draw) matplotlib's own code
    runs."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from llmsizing.widgets import canvas as kept

    fig = Figure(figsize=(4, 3), dpi=96)
    widgets._text_cache_canvas()(fig)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1])
    fig.canvas.draw()
    assert kept._DRAWING[0] is None
    ax.set_xlim(0, 250)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert "250" in labels and "1.0" not in labels, labels
    mine = np.array(fig.canvas.buffer_rgba())
    plain = FigureCanvasAgg(fig)
    plain.draw()
    assert np.array_equal(mine, np.asarray(plain.buffer_rgba()))


def test_kept_legend_boxes_follow_new_labels_and_stay_in_their_canvas():
    """widgets.canvas keeps a legend's packed boxes' layout for one draw only: a legend whose labels grow
    between two draws is laid out again at the next draw, and both draws equal a plain Agg canvas's."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from llmsizing.widgets import canvas as kept

    fig = Figure(figsize=(4, 3), dpi=96)
    widgets._text_cache_canvas()(fig)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], label="a")
    ax.plot([0, 1], [1, 0], label="b")
    legend = ax.legend(title="t", ncols=2, frameon=True)
    fig.canvas.draw()
    first = legend.get_window_extent(fig.canvas.get_renderer())
    for text, label in zip(legend.get_texts(), ("a much longer label", "and a second, longer still")):
        text.set_text(label)
    fig.canvas.draw()
    assert kept._DRAWING[0] is None
    box = legend._legend_box
    assert box.__dict__["_llmsizing_layout"][0] is not None            # the layout was kept, for that draw
    mine = np.array(fig.canvas.buffer_rgba())
    plain = FigureCanvasAgg(fig)
    plain.draw()
    assert np.array_equal(mine, np.asarray(plain.buffer_rgba()))
    assert legend.get_window_extent(plain.get_renderer()).width > first.width * 2


def test_a_kept_legend_replaced_comes_back_when_its_key_does():
    """charts.figures._kept_legend keeps the legends it replaced (speed29a; chapter 17's memory legend, with
    or without gradients, was made anew at most steps of the context): asked again for a key it showed
    before, the axes shows that very legend again, attached as Axes.legend attaches a new one (removable,
    drawn), and the draw equals a fresh figure's with a legend made anew, pixel for pixel; at most
    KEPT_LEGENDS are kept besides the one shown."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from llmsizing.charts.figures import KEPT_LEGENDS, _kept_legend

    made = []

    def legend_of(fig, labels):
        ax = fig.axes[0]

        def make():
            made.append(labels)
            return ax.legend(handles=[Patch(facecolor=f"C{i}") for i in range(len(labels))], labels=list(labels),
                             loc="upper left", fontsize=7)
        return _kept_legend(ax, ("test", *labels), make)

    fig = Figure(figsize=(4, 3), dpi=96)
    widgets._text_cache_canvas()(fig)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="k")
    first = legend_of(fig, ("weights", "gradients"))
    fig.canvas.draw()
    second = legend_of(fig, ("weights",))
    fig.canvas.draw()
    again = legend_of(fig, ("weights", "gradients"))
    assert again is first and made == [("weights", "gradients"), ("weights",)]
    assert ax.get_legend() is first and first.axes is ax and first.get_figure(root=False) is fig
    assert second.axes is None                                   # (detached, kept aside)
    fig.canvas.draw()
    fresh = Figure(figsize=(4, 3), dpi=96)
    fresh_ax = fresh.subplots()
    fresh_ax.plot([0, 1], [0, 1], color="k")
    fresh_ax.legend(handles=[Patch(facecolor=f"C{i}") for i in range(2)], labels=["weights", "gradients"],
                    loc="upper left", fontsize=7)
    plain = FigureCanvasAgg(fresh)
    plain.draw()
    assert np.array_equal(np.asarray(fig.canvas.buffer_rgba()), np.asarray(plain.buffer_rgba()))
    first.remove()                                               # (a legend shown again is removable too)
    assert ax.get_legend() is None
    for k in range(KEPT_LEGENDS + 2):
        legend_of(fig, (f"part {k}",))
    assert len(ax.__dict__["llmsizing_legends"]) == KEPT_LEGENDS


def test_kept_legend_pixels_follow_the_legend_and_what_lies_under_it():
    """widgets.canvas copies in a legend's kept pixels, instead of drawing it, only when the same legend
    (texts, handles, frame, place) comes back onto the same pixels (issue 38): a redraw with nothing changed
    does not draw the legend's boxes again; a line moved under it, a new label, a new frame colour and a
    scatter's handle are drawn afresh, and every draw equals a plain Agg canvas's, pixel for pixel; a legend
    at the "best" spot (placed by the data) is never kept."""
    from matplotlib.figure import Figure

    from llmsizing.widgets import pixels as kept

    fig = Figure(figsize=(4, 3), dpi=96)
    widgets._text_cache_canvas()(fig)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], label="a")
    ax.bar([0.5], [0.3], width=0.2, label="bars")
    legend = ax.legend(loc="upper left", frameon=True, title="t")
    drawn = []
    box_draw = legend._legend_box.draw
    legend._legend_box.draw = lambda renderer: (drawn.append(1), box_draw(renderer))
    assert _kept_equals_plain(fig) and len(drawn) == 2               # (the kept canvas's draw, the plain one)
    renderer = fig.canvas.get_renderer()
    assert len(renderer.legend_pixels) == 1
    fig.canvas.draw()
    assert len(drawn) == 2, "the same legend on the same pixels was drawn again"
    assert _kept_equals_plain(fig)
    ax.plot([0, 0.3], [1, 0.8], color="red", lw=4)                   # through the legend's corner
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    n = len(drawn)
    assert _kept_equals_plain(fig) and len(drawn) == n + 2
    legend.get_texts()[0].set_text("a longer label now")
    assert _kept_equals_plain(fig) and len(drawn) == n + 4
    legend.get_frame().set_facecolor("yellow")
    assert _kept_equals_plain(fig) and len(drawn) == n + 6
    ax.scatter([0.2, 0.4], [0.5, 0.6], marker="s", label="points")
    legend = ax.legend(loc="lower right", frameon=False)
    assert kept._legend_key(legend, renderer) is not None             # (its scatter handle is keyed too)
    assert _kept_equals_plain(fig)
    fig.canvas.draw()
    assert _kept_equals_plain(fig)
    assert kept._legend_key(ax.legend(loc="best"), renderer) is None
    assert _kept_equals_plain(fig)


#: (marker, legend loc, handle first): a handle's marker 80 px long that spills over one edge of the legend's
#: region only (the axes fill the figure, the legend touches its edge, where the region is cut by the canvas).
SPILLS = {"bottom": ("|", "upper center", True), "top": ("|", "lower center", True),
          "left": ("_", "center", True), "right": ("_", "center", False)}


@pytest.mark.parametrize("edge", SPILLS)
def test_a_legend_that_draws_beyond_its_region_is_not_kept(edge):
    """widgets.pixels keeps a legend's pixels only when its draw left the edges of its region (its box and
    20 px around) as they were (issue 38: it checks the four edges alone): a handle's marker that spills
    over any one edge is drawn afresh at every draw, and every draw equals a plain Agg canvas's; the same
    legend with a small marker is kept."""
    from matplotlib.figure import Figure

    marker, loc, first = SPILLS[edge]
    for size, kept in ((60, 0), (6, 1)):
        fig = Figure(figsize=(4, 3), dpi=96)
        widgets._text_cache_canvas()(fig)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.plot([0.2, 0.8], [0.2, 0.8], ls="none", marker=marker, ms=size, mew=2, label="points")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.legend(loc=loc, frameon=True, borderaxespad=0, markerfirst=first)
        assert _kept_equals_plain(fig)
        assert len(fig.canvas.get_renderer().legend_pixels) == kept, (edge, size)
        assert _kept_equals_plain(fig)


def _kept_equals_plain(fig) -> bool:
    """Draw ``fig`` on its (kept-cache) canvas and on a plain Agg canvas: the same pixels? The figure gets its
    kept canvas back, caches and all, for the next draw."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from llmsizing.widgets import canvas as kept

    mine = fig.canvas
    mine.draw()
    assert kept._DRAWING[0] is None
    pixels = np.array(mine.buffer_rgba())
    plain = FigureCanvasAgg(fig)
    plain.draw()
    same = np.array_equal(pixels, np.asarray(plain.buffer_rgba()))
    fig.set_canvas(mine)
    return same


def test_ticks_left_in_place_follow_new_limits_scales_and_labels():
    """widgets.canvas leaves a tick alone at a draw when it is already where the locator puts it (issue 38: no
    path recomputed), measures tick labels once per draw, and skips a text's no-op set of its own string:
    after new limits (some tick values the same, at new places), a log scale, longer tick labels that push
    the axis label down, and a wrapped text, each draw equals a plain Agg canvas's, pixel for pixel; a redraw
    with nothing changed leaves the ticks' paths as they were."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 3), dpi=96)
    widgets._text_cache_canvas()(fig)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("x label")
    assert _kept_equals_plain(fig)
    fig.canvas.draw()
    ticks = ax.xaxis.get_major_ticks()
    paths = [t.tick1line._path for t in ticks]
    fig.canvas.draw()                                               # nothing changed: the ticks left alone
    assert all(t.tick1line._path is p for t, p in zip(ticks, paths)) and any(p is not None for p in paths)
    ax.set_xlim(0, 2)                      # 0 stays a tick value, at the same place; 1.0 moves to the middle
    assert _kept_equals_plain(fig)
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == "2.0"
    ax.set_xlim(0, 250)
    assert _kept_equals_plain(fig)
    ax.set_xscale("log")
    ax.set_xlim(0.5, 300)
    assert _kept_equals_plain(fig)
    ax.set_xticks([1, 10, 100], ["one", "ten\nand a\nsecond line", "a hundred"])   # taller: the label moves
    assert _kept_equals_plain(fig)
    ax.set_xticks([1, 10, 100], ["1", "10", "100"])
    fig.text(0.05, 0.5, "a long note that matplotlib wraps at the figure's edge " * 3, wrap=True)
    assert _kept_equals_plain(fig)
    assert fig.texts[0].get_text().startswith("a long note") and not fig.stale


def test_kept_text_bitmaps_follow_the_rcparams_of_each_draw():
    """widgets.canvas reads the rcParams that shape a text's bitmap (hinting, kerning, the font families) once
    per draw, not once for good: a draw under other settings, and the next one back under the defaults, each
    equal a plain Agg canvas's draw under the same settings. (A left-aligned text: its extent does not place
    it. matplotlib's own text-metrics cache, per renderer, does not follow these settings either, so a kept
    renderer, ours or Agg's own, would place a centred text by its first extent.)"""
    import matplotlib as mpl
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 1.5), dpi=96)
    widgets._text_cache_canvas()(fig)
    fig.text(0.05, 0.4, "AV To Wa kerning 0.125", fontsize=15)
    mine = fig.canvas
    assert _kept_equals_plain(fig)
    other = {"text.hinting": "no_hinting", "text.hinting_factor": 1, "text.kerning_factor": 6}
    with mpl.rc_context(other):
        assert _kept_equals_plain(fig)
        changed = np.array(mine.buffer_rgba())
    assert _kept_equals_plain(fig) and fig.canvas is mine
    assert not np.array_equal(changed, np.asarray(mine.buffer_rgba()))        # the settings show


def test_text_sets_outside_a_draw_are_matplotlibs_own():
    """Outside the widgets' canvas draw, ``_cm_set`` still sets and restores (the skip is for a draw only)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2), dpi=96)
    widgets._text_cache_canvas()(fig)
    t = fig.text(0.1, 0.1, "before")
    with t._cm_set(text="before"):
        assert t.get_text() == "before" and t.stale
    with t._cm_set(text="during"):
        assert t.get_text() == "during"
    assert t.get_text() == "before"


def test_nothing_fits_after_a_fitting_layout_draws_like_a_fresh_render():
    """A state the neighbour moves never reach: every curve empty ("nothing fits"), reached after a layout that
    fits, so that the kept axes start from the old view (no data to autoscale the new one from)."""
    b = widgets.max_micro_batch_widget()
    c = b.controls
    for key, value in (("model", "llama-3.1-405b"), ("gpu", "MI300X"), ("precision", "fp32"), ("zero3_gpus", 16)):
        c[key].value = value
    assert b.error.value == ""
    assert_no_drift(b, "max micro-batch: nothing fits after a layout that fits")


def test_plan_summary_follows_a_table_changed_in_place():
    """render_plan keeps what it summarised per plans table by content: a table a caller changes in place is
    summarised again, not served from what was kept for it."""
    from llmsizing.planner import plan

    kw = dict(tokens=1e11, seq=2048, global_batch=64, max_gpus=64)
    df = plan("llama-3-8b", **kw)
    before = charts.render_plan("llama-3-8b", **kw, plans=df).summary
    df["cost_usd"] *= 10
    after = charts.render_plan("llama-3-8b", **kw, plans=df).summary
    assert after != before
    assert after == charts.render_plan("llama-3-8b", **kw, plans=df.copy()).summary


# ----------------------------------------------------------------------------- issue 25: a readable summary
def _shown_text(value: str) -> str:
    """The text a reader sees in a summary's HTML: no style element, no tags, entities decoded."""
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", " ", value, flags=re.S)))


def _summary_rules(b) -> str:
    """The CSS rules for ``.llmsizing-summary`` that dashboard ``b`` puts in the page: its widgets' style
    elements, each rule whose selector names the summary."""
    import re

    import ipywidgets as W

    found, todo = [], [b]
    while todo:
        w = todo.pop()
        todo += list(getattr(w, "children", ()))
        if isinstance(w, W.HTML):
            found += re.findall(r"<style[^>]*>(.*?)</style>", w.value, flags=re.S)
    return " ".join(r for css in found for r in re.findall(r"[^{}]*\{[^}]*\}", css) if "llmsizing-summary" in r)


@pytest.mark.parametrize("name", NAMES)
def test_summary_shows_every_word_of_the_text_in_order_without_pre_or_scroll(name):
    """Issue 25 ("befor|e overlap", rows cut at the right, a 150 px box that scrolls): the summary is HTML that
    wraps at spaces only. Every word of the view's text is shown, in order; no <pre> (which does not wrap) and
    every rule that could split a word is set to normal."""
    b = board(name)
    fresh = rendered(b)
    assert _shown_text(b.summary.value).split() == fresh.summary.split(), name
    assert "<pre" not in b.summary.value
    # the rules are in the dashboard's own style element, put in the page once (page30: a style element in
    # each summary made the browser match the page's rules again at every move)
    assert "<style" not in b.summary.value
    css = _summary_rules(b)
    assert "word-break: normal" in css and "overflow-wrap: normal" in css and "white-space: normal" in css
    assert "break-all" not in b.summary.value and "anywhere" not in b.summary.value


def test_summary_lays_aligned_columns_out_as_a_table():
    """A hand-made block: two rows whose columns are 2+ spaces apart become one table row each, the numbers
    right-aligned (they end at the same column and start at different ones); a line of prose stays a paragraph,
    and a single space never splits a cell."""
    text = ("the front, cheapest first:\n"
            ">  1.    1,024 x B200   4.6 days\n"
            "   2.   16,384 x H100  12.0 days\n"
            "done: with one  double space")
    body = widgets.summary_html(text)
    assert body.count("<table") == 1 and body.count("<tr>") == 2
    import re

    cells = [[_shown_text(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in body.split("<tr>")[1:]]
    assert cells[0][:4] == [">", "1.", "1,024 x B200", "4.6 days"], cells
    assert cells[1][:4] == ["", "2.", "16,384 x H100", "12.0 days"], cells
    assert "<td class=r>1,024 x B200" in body                 # right-aligned: ragged left, flush right
    assert "<p style='--i: 0.0em'>the front, cheapest first:</p>" in body
    assert "done: with one  double space" in body             # one line alone is a paragraph, never a table


def test_planner_front_is_a_table_with_one_row_per_front_plan():
    from llmsizing.planner import plan

    b = board("planner_widget")
    v = b.values()
    df = plan(v["model"], tokens=v["tokens"], gpus=tuple(v["gpus"]), seq=v["seq"], global_batch=v["global_batch"],
              max_gpus=v["max_gpus"])
    body = b.summary.value
    assert body.count("<table") == 1 and body.count("<tr>") == int(df["pareto"].sum())


# ----------------------------------------------------------------------------- issue 25: labels and tooltips
def control_widgets():
    return [(n, k) for n in NAMES for k in controls_of(n).controls]


@pytest.mark.parametrize("name,key", control_widgets(), ids=[f"{n}-{k}" for n, k in control_widgets()])
def test_every_control_has_a_tooltip_holding_its_label(name, key):
    """ipywidgets 8 sets the label's title from ``tooltip`` and shows "null" when it is None (DescriptionView's
    updateTooltip: ``label.title = model.get("tooltip")``); ``description_tooltip`` is only its deprecated alias.
    So every control has a tooltip, and it holds the full label or says more than it (issue 25)."""
    ctrl = board(name).controls[key]
    assert isinstance(ctrl.tooltip, str) and ctrl.tooltip.strip() and ctrl.tooltip != "null", (name, key)
    assert ctrl.description.lower() in ctrl.tooltip.lower(), (ctrl.description, ctrl.tooltip)


def label_fits_px(label: str) -> int:
    """A control label's width at JupyterLab's 13 px UI font, fitted to what Chromium measured in the lab
    (DejaVu Sans): 3.6 px for a narrow character (i, l, t, f, r, j, punctuation, space), 8.3 px for any other.
    There "micro-batches/step" needed 125 px and "global batch (seqs)" was cut in 110 px (this gives 121 and
    125), while "tensor par. (tp)", "kernel efficiency" and "all-to-all hidden" fitted (90, 108 and 99).
    ``tests/browser/test_lab.py`` measures the real widths."""
    return round(sum(3.6 if c in "iltfrj.,:;'|!()-/ " else 8.3 for c in label))


@pytest.mark.parametrize("name,key", control_widgets(), ids=[f"{n}-{k}" for n, k in control_widgets()])
def test_control_labels_fit_their_description_width(name, key):
    """A label beside a control fits the description column (110 px), so it is never cut ("global batch (s…"):
    a longer meaning goes to the tooltip. (A checkbox's label sits after the box, in the column's width.)"""
    ctrl = board(name).controls[key]
    if isinstance(ctrl, W.Checkbox):
        room = CONTROLS_WIDTH_PX - 20 - (110 if ctrl.indent else 0)
    else:
        room = int(ctrl.style.description_width.removesuffix("px"))
    assert label_fits_px(ctrl.description) <= room, f"{name}.{key}: {ctrl.description!r} needs more than {room} px"


# ----------------------------------------------------------------------------- issue 25: the static copy
@pytest.mark.parametrize("name", NAMES)
def test_a_live_widget_carries_the_style_that_hides_its_static_copy(name):
    """Each widget's own output holds a hidden style element whose rule hides the outputs of the cell that shows
    ``charts.show(..., widget=name)``'s marker, in the same notebook (JupyterLab, Voila) or page (thebe)."""
    b = board(name)
    styles = [c for c in b.children[1].children if isinstance(c, W.HTML) and widgets.LIVE_MARKER in c.value]
    assert len(styles) == 1 and styles[0].layout.display == "none", name
    css = styles[0].value
    assert f"class='{widgets.LIVE_MARKER}{name}'" in css
    assert f".jp-Notebook:has(.{widgets.LIVE_MARKER}{name})" in css
    assert f":has(.{widgets.DEFAULT_MARKER}{name})" in css and "display: none" in css


def test_show_puts_the_marker_before_the_static_copy(capsys):
    """``charts.show(view, widget=...)`` displays the (hidden, empty) marker, then prints the summary and shows
    the PNG as before; without ``widget`` nothing else changes. A name that is not a factory's is refused."""
    from unittest import mock

    view = charts.render_parameter_counts("gpt2")
    shown = []
    with mock.patch("IPython.display.display", side_effect=lambda obj: shown.append(obj)):
        charts.show(view, widget="parameter_counts_widget")
        charts.show(view)
    assert [type(o).__name__ for o in shown] == ["HTML", "Image", "Image"]
    assert shown[0].data == f"<span class='{widgets.DEFAULT_MARKER}parameter_counts_widget' hidden></span>"
    assert capsys.readouterr().out == view.summary + "\n" + view.summary + "\n"
    with pytest.raises(ValueError, match="widget must be"):
        charts.show(view, widget="x'><script>")


def _book_cells():
    import json

    book = Path(__file__).resolve().parents[1] / "book"
    for path in sorted(book.glob("[0-9]*.ipynb")):
        yield path.name, json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_every_widget_chapter_marks_the_static_copy_of_each_widget():
    """Every widget a chapter shows live (a cell tagged nbval-ignore-output calling ``name_widget(...)``) has its
    static copy in a checked cell of the same chapter, shown with ``widget="name_widget"`` (except where the
    chapter has none: in chapters 10, 11 and 14 the default figure is part of the text, well before the widget)."""
    import re

    missing = []
    for nb, cells in _book_cells():
        src = ["".join(c["source"]) for c in cells]
        live = {m for c, s in zip(cells, src) if "nbval-ignore-output" in c["metadata"].get("tags", [])
                for m in re.findall(r"\b(\w+_widget)\(", s)}
        marked = {m for c, s in zip(cells, src) if c["cell_type"] == "code"
                  and "nbval-ignore-output" not in c["metadata"].get("tags", [])
                  for m in re.findall(r"widget=\"(\w+_widget)\"", s)}
        assert marked <= live, f"{nb}: marks a static copy of {marked - live}, which it does not show live"
        missing += [f"{nb}: {w}" for w in sorted(live - marked) if w not in NO_STATIC_COPY]
    assert not missing, f"live widgets without a marked static copy: {missing}"


#: The widgets whose chapter has no static copy of their default view next to them.
NO_STATIC_COPY = {"training_time_widget", "cost_widget", "seed_audit_widget"}


def test_a_kept_log_scale_draws_like_a_new_one():
    """figure_axes(keep_log=...) keeps a log scale _log_axis made (issue 38: no linear-then-log again at each
    redraw): a kept figure redrawn over new ranges, then linear, then log again, then after another log scale
    was set by hand (nonpositive="mask", which drops a zero's segment where _log_axis's clips it), between
    draws or before _log_axis, equals a new figure drawn the same way, pixel for pixel; the scale of the
    second draw is the first one's."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from llmsizing.charts.base import _log_axis, figure_axes

    def render(into, lo, hi, log=True):
        fig, ax = figure_axes(4, 3, into, ("log test",), lambda f: f.add_subplot(),
                              keep_log=((0, "x"),) if log else ())
        ax.plot([0, lo, hi], [1, 2, 3], marker="o")
        if log == "premask":
            ax.set_xscale("log", nonpositive="mask")
        if log:
            _log_axis(ax.xaxis, lo, hi, lambda v: f"{v:g}")
        else:
            ax.set_xlim(0, hi)
        FigureCanvasAgg(fig).draw()
        return fig, np.array(fig.canvas.buffer_rgba())

    kept = Figure(figsize=(4, 3), dpi=96)
    first = None
    for step, (lo, hi, log) in enumerate([(1, 100, True), (3, 3000, True), (2, 50, False), (0.5, 40, True),
                                          ("mask", 0, 0), (2, 900, True), (2, 900, "premask"),
                                          (2, 900, "premask")]):
        if lo == "mask":
            kept.axes[0].set_xscale("log", nonpositive="mask")
            continue
        kept, pixels = render(kept, lo, hi, log)
        assert np.array_equal(pixels, render(None, lo, hi, log)[1]), f"step {step}: ({lo}, {hi}, log={log})"
        if step == 0:
            first = kept.axes[0].xaxis.get_transform()
        if step == 1:
            assert kept.axes[0].xaxis.get_transform() is first          # the same scale, kept
        if log == "premask":                                  # _log_axis's own scale, not the one set by hand
            assert np.array_equal(pixels, render(None, lo, hi)[1])
    assert kept.axes[0].get_xscale() == "log" and kept.axes[0].xaxis.get_transform() is not first


def test_kept_micro_batch_curves_follow_every_setting():
    """render_max_micro_batch keeps its curves per setting (issue 38): going through settings that each
    change one argument, and back, every summary equals the one worked out with nothing kept."""
    from llmsizing.charts import one_gpu

    settings = [{}, {"zero3_gpus": 1}, {"dropout": True}, {"precision": "fp32"}, {"stack": "hf"},
                {"gpu": "A100 80GB"}, {"model": "llama-2-7b"}, {}]
    kept = [charts.render_max_micro_batch(**s).summary for s in settings]
    fresh = []
    for s in settings:
        one_gpu._MMB_KEPT.clear()
        fresh.append(charts.render_max_micro_batch(**s).summary)
    assert kept == fresh and len(set(fresh)) == len(settings) - 1


def test_lines_without_autoscaling_draw_like_plot():
    """charts.base._line (issue 38) draws what ``Axes.plot`` draws, legend included, once both limits are set
    (log axes, markers without a line, hollow markers, a pandas column), pixel for pixel."""
    import pandas as pd
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from llmsizing.charts.base import _line, _log_axis

    df = pd.DataFrame({"days": [3.0, 10, 40, 200], "cost": [9e6, 2e6, 8e5, 3e5]})

    def draw(line):
        fig = Figure(figsize=(4, 3), dpi=96)
        ax = fig.add_subplot()
        line(ax, df["days"], df["cost"], ls="none", marker=".", ms=2.5, color="0.8", zorder=1, label="all")
        line(ax, [3, 40], [9e6, 8e5], color="#0072B2", lw=1.0, alpha=0.6, label="a front")
        line(ax, [10], [2e6], ls="none", marker="o", ms=12, mfc="none", mec="#D55E00", mew=2, label="chosen",
             **({"color": "C0"} if line is _line else {}))            # (plot: the cycle's first colour)
        ax.axvline(20, color="#D55E00", lw=0.9, ls="--")
        _log_axis(ax.xaxis, 3, 200, lambda v: f"{v:g}")
        _log_axis(ax.yaxis, 3e5, 9e6, charts._usd)
        ax.legend(fontsize=7)
        FigureCanvasAgg(fig).draw()
        return np.array(fig.canvas.buffer_rgba())

    assert np.array_equal(draw(_line), draw(lambda ax, x, y, **kw: ax.plot(x, y, **kw)))
    with pytest.raises(ValueError, match="color"):
        _line(Figure().add_subplot(), [1], [1])


# ----------------------------------------------------------------------------- issue 38: settings shown again
@pytest.mark.parametrize("name", ["planner_widget", "long_context_widget"])
def test_a_setting_shown_again_is_its_kept_answer_with_the_pixels_of_a_fresh_render(name):
    """Issue 38: the planner and chapter 17's widget keep the PNG and summary of the settings they drew
    (``Dashboard(keep=...)``). A move back to one is answered without calling the render (no plan filter, no
    draw), and shows what a fresh render gives: the same summary, the same pixels, the figure brought up to
    date when read (assert_no_drift) and, for the planner, the plan selector's options of that setting. A
    setting shown again under other rcParams (text hinting, read at each draw) is drawn again: its pixels are
    not the kept ones."""
    import matplotlib as mpl

    b = board(name)
    ctrl = b.controls["seq"]
    default, other = ctrl.value, neighbour(ctrl)
    options = list(b.controls["choice"].options) if "choice" in b.controls else None
    calls, real = [], b.render

    def render(**kw):
        calls.append(kw.get("seq"))
        return real(**kw)

    b._kept.clear()
    b.render = render
    try:
        ctrl.value = other                                   # a new setting: rendered and drawn
        assert calls == [other] and b.error.value == ""
        moved_png = bytes(b.image.value)
        moved_options = list(b.controls["choice"].options) if options is not None else None
        assert moved_options != options or options is None, "the test needs a setting with another front"
        ctrl.value = default                                 # drawn at the build, then cleared: drawn again
        ctrl.value = other                                   # kept: no render
        if options is not None:
            assert list(b.controls["choice"].options) == moved_options
        assert bytes(b.image.value) == moved_png
        ctrl.value = default                                 # kept: no render
        assert calls == [other, default], calls
        if options is not None:
            assert list(b.controls["choice"].options) == options
        with mpl.rc_context({"text.hinting": "none", "text.hinting_factor": 1}):      # read at each draw
            ctrl.value = other                               # kept, but under other rcParams: drawn again
            assert calls == [other, default, other], calls
            assert not np.array_equal(_pixels(b.image.value), _pixels(moved_png)), "the kept image came back"
        del calls[:]
        ctrl.value = default                                 # kept, under the rcParams it was drawn with
        assert calls == [], calls
    finally:
        b.render = real
        ctrl.value = default
    assert_no_drift(b, f"{name}: back to the default from its kept answer")
    b.update()                                               # update() itself draws again
    assert_no_drift(b, f"{name}: drawn again by update()")


def test_kept_answers_are_bounded_and_the_arguments_checked():
    """``Dashboard(keep=n)`` keeps the answers of the last n settings drawn (least recently shown out first),
    keeps none with keep=0 (the default), and names a bad ``keep`` or ``prepare``."""
    from types import SimpleNamespace

    calls = []

    def render(n):
        calls.append(n)
        return SimpleNamespace(summary=f"n = {n}", figure=None, png=lambda compress_level: _PNG_1PX)

    slider = W.IntSlider(value=1, min=1, max=5)
    b = Dashboard(render, {"n": slider}, keep=2)
    for v in (2, 3, 2, 1, 3, 1):       # kept after each: {1}, {1, 2}, {2, 3}, {3, 2}, {2, 1}, {1, 3}, {3, 1}
        slider.value = v
    assert calls == [1, 2, 3, 1, 3], calls
    assert b.summary.value == widgets.summary_html("n = 1")
    plain = Dashboard(render, {"n": W.IntSlider(value=1, min=1, max=5)})
    del calls[:]
    for v in (2, 1, 2):
        plain.controls["n"].value = v
    assert calls == [2, 1, 2] and not plain._kept
    with pytest.raises(ValueError, match="keep"):
        Dashboard(render, {"n": W.IntSlider()}, keep=-1)
    with pytest.raises(TypeError, match="prepare"):
        Dashboard(render, {"n": W.IntSlider()}, keep=2, prepare="choice")


#: A 1x1 white PNG (what the toy render of the test above shows).
_PNG_1PX = widgets.encode_png(np.full((1, 1, 4), 255, dtype=np.uint8))
