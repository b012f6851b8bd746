"""The dashboard machinery every widget of the book is built on (issue 12: layout and speed).

:class:`Dashboard` lays out a widget's controls, figure and summary, and redraws into the one figure it keeps;
its canvas keeps the bitmap and the layout of every text it draws (:func:`.canvas._text_cache_canvas`) and
:func:`encode_png` encodes the pixels. The chapters' widgets are in :mod:`.one_gpu` (chapters 1-4),
:mod:`.measure` (5), :mod:`.many_gpus` (6-9), :mod:`.time_money` (10-14) and :mod:`.serve_tune` (15-16); the
controls they share in :mod:`.controls`.

Layout (issue 12): the controls in a column of :data:`CONTROLS_WIDTH_PX` on the left, the figure beside them
at its own pixel size (at most :data:`FIGURE_MAX_PX`, never stretched): about 1100 x 620 px in all, so
controls and figure are on a 1280 x 720 screen together. The summary under the figure (issue 25) is wrapped
text and tables (:func:`summary_html`), as tall as it needs: no inner scroll, no word split. Every control
carries a tooltip (its full label, or more), so that no label is cut without a way to read it, and no tooltip
reads "null".

A live widget hides the static copy of its default view in the same notebook (issue 25): the chapters show
that copy with ``charts.show(view, widget="planner_widget")`` for the static site, where no widget runs, and
the widget's own output carries a style that hides it once the widget has rendered (:func:`live_style`).
"""

from __future__ import annotations

import functools
import html

import ipywidgets as W
from ipywidgets.widgets.trait_types import CByteMemoryView
from traitlets import Unicode

from .. import charts
from .._validate import check_int
from .canvas import _text_cache_canvas
from .png import _deflate, encode_png, png_size  # noqa: F401 (kept here: benchmarks wrap dashboard.encode_png)

#: The widget layout budget (issue 12: controls and figure visible together on a 1280x720 laptop screen, where
#: JupyterLab's notebook panel is about 1100 px wide with the file browser folded, and 600 px tall): the
#: controls' column, the largest figure (PNG pixels, shown at its own size, never stretched) and the height of
#: the scrolling summary below it.
CONTROLS_WIDTH_PX = 330
FIGURE_MAX_PX = (760, 430)
#: Deprecated (issue 25): the summary no longer scrolls inside a box of this height; kept for code that
#: imported it.
SUMMARY_HEIGHT_PX = 150
#: Room for a control's widget part next to its 110 px description, in the controls' column.
_CONTROL_ROOM_PX = CONTROLS_WIDTH_PX - 110 - 12
#: ipywidgets' margin on each side of a control (``--jp-widgets-margin``, 2 px): a control is this much
#: narrower than the column twice over, or the column scrolls sideways (issue 38: drop-downs stuck out 2 px,
#: and after a click the column scrolled and cut the first letters of the toggles' labels).
CONTROL_MARGIN_PX = 2
#: The narrowest the figure's side gets (its flex basis) before it wraps under the controls: where the page is
#: narrower than controls plus figure (Voila's margins, the lab with its file browser open at 1280 px), the
#: figure shrinks beside the controls, on screen, instead of dropping under them (issue 38).
FIGURE_MIN_PX = 480
#: How many settings' answers (PNG and summary) a widget whose render is a function of its controls' values
#: alone keeps (``Dashboard(keep=...)``; issue 38: a move back to a setting shown before, the most common
#: move, is shown in ~1 ms instead of a new render and draw of 30-150 ms). ~60 KB a setting.
KEPT_ANSWERS = 32
#: The CSS class a dashboard's image carries while the dashboard draws a view (lat37; before, the dashboard).
#: It shows at once as a progress cursor and a thin bar along the top of the figure (issue 38: a participant
#: sees the move answered as soon as the class arrives, not 120 ms later), and after :data:`BUSY_DELAY_MS` as
#: a faded figure with a "working" note over it and the bar moving (delayed so that a quick redraw does not
#: flicker, and does not pay for an animation: an endless one on every redraw cost the browser about 60 CPU-s
#: over ``make check-live``, live38f). The bar moves by ``transform``, on a layer of its own 48 px wider than
#: the figure and clipped to it: the same stripes, moving as the ``background-position`` it used to animate
#: did, but moved by the compositor, so a frame of its motion no longer repaints the page on the main thread
#: while the kernel works (redraw38).
BUSY_CLASS = "llmsizing-busy"
BUSY_DELAY_MS = 120
#: The figure's side while the mark is on: the mark is on its image (lat37, :meth:`Dashboard._show`), found
#: with ``:has()``; a dashboard that carries the class itself (as before) shows it too.
_BUSY_SIDE = (".%s .llmsizing-figure-side, .llmsizing-figure-side:has(> img.%s)" % (BUSY_CLASS, BUSY_CLASS))
_BUSY_CSS = (
    "<style>.llmsizing-figure-side {position: relative}"
    " .%s, .llmsizing-dashboard:has(img.%s) {cursor: progress}" % (BUSY_CLASS, BUSY_CLASS)
    + " :is(%s) {overflow-x: clip}" % _BUSY_SIDE
    + " :is(%s)::before {content: ''; position: absolute; top: 0; left: -48px; right: 0;"
    " height: 3px; z-index: 3; pointer-events: none; will-change: transform;"
    " background: repeating-linear-gradient(90deg, #0072B2 0 24px, transparent 24px 48px);"
    " animation: llmsizing-busy-bar 0.6s linear %dms infinite}" % (_BUSY_SIDE, BUSY_DELAY_MS)
    + " @keyframes llmsizing-busy-bar {to {transform: translateX(48px)}}"
    " .llmsizing-busy-note {position: absolute; top: 6px; left: 8px; z-index: 2; padding: 2px 8px;"
    " border-radius: 4px; background: rgba(255, 255, 255, 0.92); color: #333; font-size: 12px;"
    " box-shadow: 0 1px 3px rgba(0, 0, 0, 0.25); opacity: 0; pointer-events: none}"
    " @keyframes llmsizing-busy-show {to {opacity: 1}}"
    " @keyframes llmsizing-busy-fade {to {opacity: 0.45}}"
    " :is(%s) > .llmsizing-busy-note {animation: llmsizing-busy-show 0s linear %dms forwards}"
    % (_BUSY_SIDE, BUSY_DELAY_MS)
    + " :is(%s) > img {animation: llmsizing-busy-fade 0s linear %dms forwards}</style>"
    % (_BUSY_SIDE, BUSY_DELAY_MS))


def _data_url(value, image) -> memoryview:
    """An image widget's bytes as the page receives them from a :class:`PageImage`: a ``data:`` URL of its
    format (empty stays empty)."""
    import base64

    if not len(value):
        return memoryview(b"")
    return memoryview(f"data:image/{image.format};base64,".encode() + base64.b64encode(value))


class PageImage(W.Image):
    """An ``ipywidgets.Image`` whose page gets its picture as a ``data:`` URL (page35). In Python it is an
    Image like any other (``value``: the PNG's bytes, ``format``: ``"png"``); only what goes to the page
    differs: ``format`` ``"url"`` and ``value`` the bytes of ``data:image/png;base64,...``, which ipywidgets
    8's ImageView sets as the ``<img>``'s ``src`` as they are (its documented use of ``format="url"``).

    An ordinary Image's view wraps the bytes in a Blob and gives the ``<img>`` a ``blob:`` URL, which
    Chromium fetches through its browser process (blob registry and URL loader, in other processes than the
    page's); a ``data:`` URL is read in the page's own process. The base64 text is a third larger (71 KB a
    move for chapter 17's 53 KB PNGs) and costs the kernel ~0.1 ms to write.

    Measured (page35), chapter 17's widget in Voila, Chromium traces of 10 moves back and 10 steps each: from
    the figure's message to the img's new ``src`` 2.3 -> 1.2 ms (no Blob and object URL), from the ``src`` to
    the decode's start 5.2 -> 0.8 ms, the page's main thread 33 -> 20 ms a move back. Whole moves, with this
    dashboard's other page35 changes (:meth:`Dashboard.update`, :meth:`Dashboard._show`), in interleaved
    runs of ``tests/browser/measure_participant.py`` against main's code (chapter 17: 6 + 6 runs, chapter 12:
    3 + 3; 25-30 moves of a kind a run; the machine's 1-minute load 2.1-4.4 from other work), medians main
    -> this: chapter 17 a move back painted 44 -> 35 ms (to the page 16 -> 12, in the browser 23 -> 18, the
    browser's CPU 90 -> 81 ms), a step 130 -> 116 ms; chapter 12 a move back 48 -> 31 ms (19 -> 11, 22 ->
    16; CPU 103 -> 65), a step 124 -> 92 ms."""

    value = CByteMemoryView(help="The image's bytes (the page gets them as a data: URL)").tag(
        sync=True, to_json=_data_url)
    format = Unicode("png", help="The image's format (the page gets 'url')").tag(
        sync=True, to_json=lambda value, image: "url")


class Dashboard(W.HBox):
    """Controls in a column on the left; on the right an error line (hidden when empty), the figure at its own
    pixel size and the text summary (scrolling when long). Where the page is narrower than both (a chapter
    page under ``make serve-live``), the figure wraps under the controls and shrinks to the width, never
    beyond its own size. ``update()`` redraws.

    The dashboard keeps one matplotlib figure for its whole life: when ``render`` takes an ``into`` argument
    (every ``render_*`` of :mod:`llmsizing.charts` that a widget uses does), each update draws into that
    figure again instead of building a new one (:func:`llmsizing.charts.blank_figure`). ``above`` names
    controls shown above the figure instead of in the column (wide ones, like the planner's plan selector).
    ``name`` (the widget factory's name, e.g. ``"planner_widget"``; by default the name of the function that
    builds the dashboard, if it ends in ``_widget``) makes the widget hide the static copy of its default view
    once it renders live (:func:`live_style`).

    ``keep`` (issue 38): how many settings' answers (PNG and summary) the dashboard keeps, for a render that
    is a function of the controls' values alone (and the rcParams): a move back to one of them shows it
    without a render or a draw; the figure (:attr:`figure`) is brought up to that setting when read.
    ``prepare``: what must still run at every move before the kept answers are looked up (the planner's plan
    selector's options, which its render sets)."""

    def __init__(self, render, controls: dict[str, W.ValueWidget], *, above: tuple[str, ...] = (),
                 name: str | None = None, keep: int = 0, prepare=None):
        import inspect
        from collections import OrderedDict

        from matplotlib.figure import Figure

        self.render = render
        self.controls = controls
        self.keep = check_int("keep", keep, minimum=0, maximum=1024)
        if prepare is not None and not callable(prepare):
            raise TypeError(f"prepare must be a function of the controls' values or None, got "
                            f"{type(prepare).__name__}")
        self.prepare = prepare
        self._kept: OrderedDict = OrderedDict()
        self._behind = None              # the values the figure has not been drawn for (a kept answer shown)
        self._again = True               # the next _draw draws, kept or not (update() without a change)
        self._shown = None               # the answer the page shows (_show)
        try:
            self._takes_into = "into" in inspect.signature(render).parameters
        except (TypeError, ValueError):
            self._takes_into = False
        self._figure = Figure(dpi=charts.DPI)
        # its own canvas: every redraw reuses it, its renderer and its glyphs
        _text_cache_canvas()(self._figure)
        # (tooltip="": ipywidgets 8 would set the empty description label's title to "null" on hover)
        self.error = W.HTML(layout=W.Layout(display="none", max_width=f"{FIGURE_MAX_PX[0]}px"), tooltip="")
        self.summary = W.HTML(layout=W.Layout(max_width=f"{FIGURE_MAX_PX[0]}px"), tooltip="")
        if name is None:          # the factory that built it (a widget added later hides its copy too)
            import sys

            caller = sys._getframe(1).f_code.co_name
            name = caller if caller.endswith("_widget") and caller.isidentifier() else None
        self.name = name
        for w in controls.values():     # the full label on hover (ipywidgets 8 shows "null" when it is unset)
            tip = getattr(w, "tooltip", None) or ""
            if w.description.lower() not in tip.lower():
                w.tooltip = f"{w.description}: {tip}" if tip else w.description
        self.image = PageImage(format="png", layout=W.Layout(flex="0 0 auto", max_width="100%", height="auto",
                                                             object_fit="contain"))
        column = W.VBox([c for k, w in controls.items() if k not in above for c in (w, *_hint(w))],
                        layout=W.Layout(width=f"{CONTROLS_WIDTH_PX}px", flex=f"0 0 {CONTROLS_WIDTH_PX}px"))
        # "working..." over the figure while a setting is worked out (shown after BUSY_DELAY_MS: _BUSY_CSS)
        self.busy_note = W.HTML("⏳ working out this setting…", tooltip="")
        self.busy_note.add_class("llmsizing-busy-note")
        # (the summary's rules too: once here, not in every summary, page30)
        style = _BUSY_CSS + _SUMMARY_CSS + (live_style(name) if name else "")
        hidden_style = W.HTML(style, layout=W.Layout(display="none"), tooltip="")
        right = W.VBox([controls[k] for k in above] + [self.busy_note, self.error, self.image, self.summary,
                                                        hidden_style],
                       layout=W.Layout(flex=f"1 1 {FIGURE_MIN_PX}px", align_items="flex-start", min_width="0",
                                       max_width="100%"))
        right.add_class("llmsizing-figure-side")
        super().__init__([column, right], layout=W.Layout(align_items="flex-start", flex_flow="row wrap"))
        self.add_class("llmsizing-dashboard")
        for w in controls.values():
            w.observe(self.update, names="value")
            if isinstance(getattr(w, "continuous_update", None), bool):
                # a slider sends its value when let go, not at every pixel of a drag: each value is a
                # redraw (0.1-1 s), and a drag queued dozens of them, answered long after the reader
                # stopped (issue 38); a keyboard step is sent at once
                w.continuous_update = False
        self.update()
        _freeze_once()

    @property
    def figure(self):
        """The matplotlib figure the dashboard draws into, showing the controls' current setting. After a move
        answered from the kept answers (``keep``) the figure is brought up to date here, when it is read (the
        page needs only the kept PNG)."""
        behind, self._behind = self._behind, None
        if behind is not None:
            kw = dict(into=self._figure) if self._takes_into else {}
            view = self.render(**behind, **kw)
            if view.figure is not self._figure:
                self._figure = view.figure
        return self._figure

    @figure.setter
    def figure(self, figure) -> None:
        self._figure, self._behind = figure, None

    def values(self) -> dict:
        return {k: w.value for k, w in self.controls.items()}

    def update(self, change=None) -> None:
        """Draw the view of the controls' values. The dashboard's image carries :data:`BUSY_CLASS` meanwhile
        (the whole dashboard shows it: :data:`_BUSY_CSS`): the class goes to the page before the work
        starts, and the page fades the figure and shows "working out this setting" if the work takes longer
        than :data:`BUSY_DELAY_MS` (issue 38: chapter 17's widget took 0.4-1 s per new setting with no sign
        that anything was happening). A control's move (``change``) may be answered from the kept answers
        (``keep``); ``update()`` called without one draws again.

        A move answered from the kept answers, in a dashboard without ``prepare``, is shown without the busy
        mark (page35): there is no work to show (the kernel answers it in ~3-5 ms of CPU), and the mark's two
        messages (on, off) and the page's work on them (style, layout and paint for the dashboard's class,
        twice) were in the way of every such move, the most common one. A kept answer that is the one already
        shown carries the mark, on and off, as before (the page sees the move answered). With ``prepare``
        (which may search) the mark goes on first, as before."""
        self._again = change is None              # update() itself: draw again, even a kept setting
        if self.prepare is None and self.keep and not self._again:
            values = self.values()
            kept = self._kept.get(_setting(values))
            if kept is not None and kept[1] != self._shown and kept[0] == _rc_snapshot():
                self._kept.move_to_end(_setting(values))
                self._behind = values
                self._show(kept[1], busy=False)
                return
        self.image.add_class(BUSY_CLASS)
        shown = ("error", "")
        try:
            shown = self._draw(self.values())
        finally:
            self._show(shown)                     # (it takes the busy mark off, before the summary)

    def _draw(self, values: dict) -> tuple:
        """``("ok", png, summary_html)`` for the values, or ``("error", message_html)`` if the library refuses
        them (its message, shown instead of a traceback).

        With ``keep`` > 0 the dashboard keeps the answers (PNG and summary) of the last ``keep`` settings it
        drew (issue 38: a move back to a setting shown before is answered in a few ms, not by a new render and
        draw), each with the rcParams it was drawn under: a setting comes back only under the same rcParams,
        else it is drawn again. ``prepare(**values)``, if given, runs first on every move (a widget's own
        work that must follow each move, such as the planner's plan selector's options) and the values are
        read again after it. After ``update()`` called without a change, the setting is drawn again even if
        its answer is kept."""
        try:
            if self.prepare is not None:
                self.prepare(**values)
                values = self.values()
            key = _setting(values) if self.keep else None
            rc = _rc_snapshot() if self.keep else None
            kept = self._kept.get(key) if self.keep and not self._again else None
            if kept is not None and kept[0] == rc:
                self._kept.move_to_end(key)
                self._behind = values
                return kept[1]
            kw = dict(into=self._figure) if self._takes_into else {}
            view = self.render(**values, **kw)
            self._behind = None
        except (ValueError, TypeError) as exc:
            return ("error", f"<b style='color:#b00020'>⚠ {html.escape(str(exc))}</b>")
        shown = ("ok", _figure_png(view), summary_html(view.summary))
        if self.keep:
            self._kept[key] = (rc, shown)
            self._kept.move_to_end(key)
            while len(self._kept) > self.keep:
                self._kept.popitem(last=False)
        return shown

    def _show(self, shown: tuple, busy: bool = True) -> None:
        """Put ``shown`` (:meth:`_draw`'s answer) in the page: the figure or the library's message first, then
        the busy mark off, then the summary. Each change is a message of its own, which the page handles in
        order (issue 38: the summary's table used to come before the figure).

        The busy mark comes off as soon as the figure is in, not after the summary (page35): the page paints
        the new figure once its PNG is decoded and the mark is gone (while the mark is on, past
        :data:`BUSY_DELAY_MS`, the figure shows faded), and the mark's message came after the summary's, a
        median 5-6 ms after the figure's in chapter 17 in Voila (up to 20 ms): the figure was painted that
        much later for a summary under it. The summary follows in the next frame (measured with
        :class:`PageImage`: a move back's summary was painted a median 43-44 ms after the move before, 28-35
        ms after, chapters 12 and 17). ``busy=False``: no
        mark to take off (a kept answer, :meth:`update`).

        The mark is on the image and comes off in the image's message with the new figure (lat37): as a
        message of its own the page handled it 7-20 ms after the figure's (chapter 17 in Voila), a frame
        later, and drew one frame more (~10 ms of renderer CPU, 3 ms of compositor; trace_moves.py)."""
        with self.image.hold_sync():          # the new figure and the mark's end: one message (lat37)
            try:
                if shown[0] == "error":
                    # the library's message; the old figure goes (it can't be read as the answer) and so does
                    # the image element, which would otherwise show the browser's broken-image icon under it
                    # (issue 38)
                    self.error.value = shown[1]
                    self.error.layout.display = None
                    self.image.value = b""
                    with self.image.layout.hold_sync():       # (one message for both)
                        self.image.layout.width = None
                        self.image.layout.display = "none"
                    summary = ""
                else:
                    _, png, summary = shown
                    width, _ = png_size(png)
                    with self.image.layout.hold_sync():     # its own size (height follows), never stretched
                        self.image.layout.width = f"{width}px"
                        self.image.layout.display = None
                    self.image.value = png
                    self.error.value = ""
                    self.error.layout.display = "none"
                self._shown = shown
            finally:
                if busy:
                    self.image.remove_class(BUSY_CLASS)
        self.summary.value = summary


@functools.cache
def _freeze_once() -> None:
    """Once per process (kept: its body runs on the first call only), when the first dashboard has drawn: a
    full collection, then every object alive (the library's modules, catalogues and kept results, pandas',
    matplotlib's and the kernel's own) moved into the garbage collector's permanent generation
    (:func:`gc.freeze`; CPython's ``gc`` documentation), which no later collection walks. Issue 38 (dense35):
    a full collection of a widget kernel walked ~130,000 such objects, 40-60 ms added to whichever move
    crossed its threshold (one move in 20 to 40); after the freeze it takes ~1 ms. Reference counting frees
    frozen objects as before; only reference cycles among them wait for the end of the process."""
    import gc

    gc.collect()
    gc.freeze()


def _setting(values: dict) -> tuple:
    """A dashboard's control values as a hashable key (a multi-select's list as a tuple)."""
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in values.items())


def _rc_snapshot() -> dict:
    """The rcParams as they are now (lists copied as tuples, so that a list changed in place counts), to
    compare with the rcParams a kept answer was drawn under (~0.1 ms)."""
    import matplotlib as mpl

    return {k: (tuple(v) if isinstance(v, list) else v) for k, v in dict.items(mpl.rcParams)}


# --------------------------------------------------------------------------- the summary, as a reader sees it
#: The summary's font size (px): the size of JupyterLab's output text, a little smaller than the prose.
SUMMARY_FONT_PX = 12
#: Consecutive lines with columns at least this many spaces apart are laid out as a table.
_GUTTER = 2


def summary_html(text: str, *, style: bool = False) -> str:
    """A render function's text summary as HTML that wraps instead of scrolling (issue 25: the summary box is
    readable). The summary is plain text laid out for a monospace font; widgets used to show it as it is in a
    ``<pre>`` inside a 150 px box, where long lines were cut at the right or broke mid-word. Here:

    * consecutive lines that hold columns (text separated by at least two spaces at the same positions on
      every line: the planner's front, a breakdown with right-aligned numbers) become a ``<table>``, one cell
      per column, numbers right-aligned where every row ends at the column's edge; a cell wraps at spaces
      only;
    * every other line is a paragraph of its own that wraps at spaces, indented as in the text, with a
      hanging indent for its continuation lines.

    No word is ever split (``word-break: normal; overflow-wrap: normal`` on every element, whatever the page's
    style says) and there is no inner scroll: the box is as tall as its text. Formatting only: the text is the
    view's ``summary``, every character of it escaped (``tests/test_widget_layout.py`` reads the text
    back).

    The rules for all this (:data:`_SUMMARY_CSS`) are not in the HTML: a :class:`Dashboard` puts them in the
    page once, with its other style. A ``<style>`` element in each summary was parsed again at every move,
    and each new style sheet made Chromium match its rules against the whole page again before the next frame
    (issue 38, page30: ~3-5 ms of style work per move, in the frame that shows the new figure). ``style=True``
    puts them in, for a summary shown without a dashboard."""
    import re

    if not isinstance(style, bool):
        raise TypeError(f"style must be True or False, got {type(style).__name__}")

    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and re.search(r"\S {%d,}\S" % _GUTTER, lines[j]):
            j += 1
        # the longest run of such lines (two at least) that lines up in columns: a line of prose that happens
        # to hold a double space next to a table does not spoil it
        columns = None
        while j - i >= 2 and not (columns := _columns(lines[i:j])):
            j -= 1
        if columns:
            out.append(_table_html(lines[i:j], columns))
            i = j
        else:
            out.append(_line_html(lines[i]))
            i += 1
    return f"<div class='llmsizing-summary'>{_SUMMARY_CSS if style else ''}" + "".join(out) + "</div>"


#: The summary's style, in the dashboard's own (hidden) style element, put in the page once (so it holds in
#: JupyterLab, Voila and thebe alike, whatever the page's own rules for ``pre``, ``td`` or the widget's label
#: line height say).
_SUMMARY_CSS = (
    "<style>.llmsizing-summary {font-size: %dpx; line-height: 1.35; white-space: normal; word-break: normal; "
    "overflow-wrap: normal; hyphens: none; font-variant-numeric: tabular-nums}"
    " .llmsizing-summary p {margin: 0; padding-left: calc(var(--i) + 1.5em); text-indent: -1.5em}"
    " .llmsizing-summary table {border-collapse: collapse; margin: 1px 0 1px var(--i); font-size: inherit;"
    " line-height: inherit}"
    " .llmsizing-summary td {padding: 0 0 0 1.1em; text-align: left; vertical-align: top;"
    " white-space: pre-wrap; word-break: normal; overflow-wrap: normal; border: 0}"
    " .llmsizing-summary td:first-child {padding-left: 0} .llmsizing-summary td.r {text-align: right}</style>"
    % SUMMARY_FONT_PX)


def _columns(rows: list[str]) -> list[tuple[int, int, str]] | None:
    """The columns of a block of fixed-width rows: (start, end, "left"/"right") per column, where the columns
    are separated by runs of at least :data:`_GUTTER` positions that are blank on every row (the indentation
    is not a column). None if the block has fewer than two columns."""
    width = max(len(r) for r in rows)
    blank = [all(p >= len(r) or r[p] == " " for r in rows) for p in range(width)]
    spans, p = [], 0
    while p < width and blank[p]:                      # the common indentation
        p += 1
    while p < width:
        start = p
        while p < width:
            if blank[p]:
                run = p
                while run < width and blank[run]:
                    run += 1
                if run - p >= _GUTTER or run == width:
                    break
                p = run
            else:
                p += 1
        spans.append((start, p))
        while p < width and blank[p]:
            p += 1
    if len(spans) < 2:
        return None
    out = []
    for start, end in spans:
        cells = [r[start:end] for r in rows if r[start:end].strip()]
        flush_right = all(len(c.rstrip()) == end - start for c in cells)
        ragged_left = len({len(c) - len(c.lstrip()) for c in cells}) > 1
        out.append((start, end, "right" if flush_right and ragged_left else "left"))
    return out


def _table_html(rows: list[str], columns) -> str:
    import html

    indent = min(len(r) - len(r.lstrip(" ")) for r in rows if r.strip())
    body = "".join("<tr>" + "".join(f"<td{' class=r' if align == 'right' else ''}>"
                                    f"{html.escape(r[a:b].strip())}</td>"
                                    for a, b, align in columns) + "</tr>" for r in rows)
    return f"<table style='--i: {indent * 0.6:.1f}em'>{body}</table>"


def _line_html(line: str) -> str:
    import html

    indent = len(line) - len(line.lstrip(" "))
    return f"<p style='--i: {indent * 0.6:.1f}em'>{html.escape(line.strip()) or '&nbsp;'}</p>"


# ------------------------------------------------------------------------ the static copy of the default view
#: The class of the (empty) marker that ``charts.show(view, widget=name)`` puts next to a static default view.
DEFAULT_MARKER = "llmsizing-default-of-"
#: The class of a live widget's hidden style element (what the CSS rule of :func:`live_style` looks for).
LIVE_MARKER = "llmsizing-live-"


def live_style(name: str) -> str:
    """A ``<style>`` element, put in a live widget's own (hidden) output, that hides the outputs of the cell
    showing the static copy of this widget's default view (its marker, ``charts.show(..., widget=name)``), in
    the same notebook only: in JupyterLab and Voila (both lay cells out as ``.jp-Notebook .jp-Cell``) and on a
    page whose cells run under thebe (``make serve-live``, no ``.jp-Notebook``). Standard CSS (``:has()``:
    Chromium 105, Firefox 121, Safari 15.4) and no lab extension: the rule exists only while the widget's view
    is in the page, so the static site (where no widget runs) and a notebook opened but not run keep the
    static copy."""
    import re

    if not isinstance(name, str):
        raise TypeError(f"name must be a widget factory's name (a str), got {type(name).__name__}")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
        raise ValueError(f"name must be a widget factory's name (letters, digits, _ and -), got {name!r}")
    live, static = f".{LIVE_MARKER}{name}", f".{DEFAULT_MARKER}{name}"
    hide = f":is(.jp-OutputArea, .cell_output):has({static})"
    return (f"<style class='{LIVE_MARKER}{name}'>"
            f".jp-Notebook:has({live}) {hide}, body:not(:has(.jp-Notebook)):has({live}) {hide} "
            "{ display: none !important; }</style>")


def _figure_png(view) -> bytes:
    """The view's PNG for the widget. A :class:`~llmsizing.charts.FixedView` (fixed margins, no tight crop) is
    drawn once on its figure's own Agg canvas and encoded by :func:`encode_png`; any other view is saved the
    usual way (``View.png``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = view.figure
    if not isinstance(view, charts.FixedView) or not isinstance(fig.canvas, FigureCanvasAgg):
        return view.png(compress_level=1)
    fig.canvas.draw()
    return encode_png(fig.canvas.buffer_rgba())


#: The line height of a control's hint (:func:`_hint`), a multiple of its font size. The HTML widget's
#: content box sets ``line-height`` to a control's row height (ipywidgets 8: ``--jp-widgets-inline-height``,
#: 28 px) for one-line labels, so a hint that wraps kept a row's height per line: a gap of about a line
#: between its two lines under chapters 12 and 17's GPU picker (part28). Its own block sets it back.
HINT_LINE_HEIGHT = 1.3
#: The hint's left margin (px): under the control's own box, past its margin, its description (``_style``'s
#: 110 px) and the description's right margin (ipywidgets 8: twice ``--jp-widgets-inline-margin``, 8 px).
HINT_INDENT_PX = CONTROL_MARGIN_PX + 110 + 8


def _hint(control) -> tuple[W.HTML, ...]:
    """The small line of help a control carries in its ``hint`` attribute, placed under it (else nothing); it
    wraps under the control's box, its lines :data:`HINT_LINE_HEIGHT` apart (part28)."""
    hint = getattr(control, "hint", None)
    if not hint:
        return ()
    text = (f"<div class='llmsizing-hint' style='font-size: smaller; line-height: {HINT_LINE_HEIGHT}; "
            f"white-space: normal'>{html.escape(hint)}</div>")
    width = CONTROLS_WIDTH_PX - HINT_INDENT_PX - CONTROL_MARGIN_PX      # (it ends where the control ends)
    return (W.HTML(text, tooltip="",
                   layout=W.Layout(margin=f"0 0 4px {HINT_INDENT_PX}px", width=f"{width}px")),)
