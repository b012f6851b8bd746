"""The matplotlib canvas every widget draws on (issue 12, "Speed"; issue 38: a move within 100 ms).

A widget keeps one figure for its life and redraws it on this canvas (:class:`~.dashboard.Dashboard`). Most of
a redraw is matplotlib's Python work on texts and axes, most of it done again for what did not change. The
canvas keeps three things, each keyed by everything it depends on, so a draw gives the pixels a plain Agg draw
gives (``tests/test_widget_layout.py`` compares them):

* each text's bitmap (its renderer's ``draw_text``), across redraws (and, with the layouts, across a change of
  the figure's size, which brings a new renderer);
* each text's layout (``Text._get_layout``: its extent and line offsets, measured 2-3 times a draw for a tick
  label: for the label bboxes, for where the axis label goes, to draw it), across redraws;
* each axis's ticks (``Axis._update_ticks``: locator, formatter, tick positions and label strings, which
  matplotlib works out again for the axis label's and the spine's extents), within one draw only;
* each packed box's layout (a legend's boxes: ``_get_bbox_and_child_offsets``, asked again at every level of
  the nesting), within one draw only (issue 38: ~40% of the planner's draw);
* each axis's tick label extents (``Axis._get_ticklabel_bboxes``, asked again for the axis label's place),
  within one draw only;
* no minor ticks worked out for an axis without them (``Axis.get_minorticklocs`` with a ``NullLocator``,
  which asked the major locator again);
* each tick where it is: a tick already at the place the locator gives is not placed again
  (``Tick.update_position`` would mark its lines' paths invalid, to be computed again at the draw);
* each legend's pixels, before and after its draw, across redraws: the same legend (texts, handles, frame,
  place) on the same pixels is copied in, not drawn again (:func:`_legends_kept_as_pixels`);
* a union of boxes worked out in one array, not box by box (``Bbox.union``);
* and it skips ``Text.draw``'s set-and-restore of a text's string when that is the string it holds (issue 38:
  a no-op that cost a third of a tick label's draw).

All but the first are matplotlib 3.10 methods, replaced on their classes by versions that keep their answers
or skip their no-ops only while this canvas draws (:data:`_DRAWING`); any other draw (a plain Agg canvas, a
saved figure, another backend) calls matplotlib's own code unchanged.
"""

from __future__ import annotations

import functools

from .pixels import _DRAWING, _font_key, _legends_kept_as_pixels, _line_style_key

#: The rcParams that name the fonts of each generic family (matplotlib's findfont keys its cache by them).
_FAMILY_RC = ("font.serif", "font.sans-serif", "font.cursive", "font.fantasy", "font.monospace")


def _kept_layouts(text_cls, renderer_cls) -> None:
    """Replace ``text_cls._get_layout`` by one that, for draws by a ``renderer_cls`` renderer, keeps the
    layouts in that renderer's ``text_layouts`` (bounded, least recently used first out). A layout depends on
    the string, the font's properties, rotation, alignment, line spacing, TeX/math parsing, the figure's DPI,
    the renderer (its metrics) and the rcParams that shape a text (``renderer.text_settings()``: hinting,
    kerning, font families), all in the key, not on where the text is: texts made again at each redraw
    (the annotations, a legend's labels) find the layout of the same string. Wrapped texts (whose lines depend
    on their position) are laid out each time."""
    original = text_cls._get_layout
    if getattr(original, "llmsizing_kept", False):
        return

    def _get_layout(self, renderer):
        if not isinstance(renderer, renderer_cls) or self._wrap:
            return original(self, renderer)
        key = (self.get_figure(root=True).dpi, self._text, self.get_rotation(), self._rotation_mode,
               self._horizontalalignment, self._verticalalignment, self._multialignment, self._linespacing,
               self._usetex, self._parse_math, _font_key(self._fontproperties), renderer.text_settings())
        kept = renderer.text_layouts
        layout = kept.get(key)
        if layout is None:
            layout = kept[key] = original(self, renderer)
            if len(kept) > renderer.limit:
                kept.popitem(last=False)
        else:
            kept.move_to_end(key)
        return layout

    _get_layout.llmsizing_kept = True
    text_cls._get_layout = _get_layout


def _ticks_kept_per_draw(axis_cls) -> None:
    """Replace ``axis_cls._update_ticks`` by one that, while this module's canvas draws, works an axis's ticks
    out once per draw (the view limits, locators and formatters do not change during a draw)."""
    original = axis_cls._update_ticks
    if getattr(original, "llmsizing_kept", False):
        return

    def _update_ticks(self):
        draw = _DRAWING[0]
        if draw is None:
            return original(self)
        kept = self.__dict__.get("_llmsizing_ticks")
        if kept is not None and kept[0] == draw:
            return list(kept[1])
        ticks = original(self)
        self.__dict__["_llmsizing_ticks"] = (draw, list(ticks))
        return ticks

    _update_ticks.llmsizing_kept = True
    axis_cls._update_ticks = _update_ticks


class _Joined:
    """Stands in for a line's ``TransformedPath`` for one draw: the non-affine-transformed points (or path) of
    several lines joined into one path, with their shared affine part."""

    def __init__(self, path, affine):
        self.path, self.affine = path, affine

    def get_transformed_points_and_affine(self):
        return self.path, self.affine

    def get_transformed_path_and_affine(self):
        return self.path, self.affine


def _draw_lines_as_one(lines, renderer, axes=None) -> bool:
    """Draw ``lines`` (one kind of line of an axis's ticks: grid lines, or the tick marks on one side) with
    one ``draw_path`` or ``draw_markers`` call instead of one each, if they can be: all visible, drawn alike
    (:func:`_line_style_key`), either markers only or solid lines only, and the same affine part of their
    transform. Agg draws each marker, and each of the lines' non-touching segments, on its own either way (a
    marker is stamped at each vertex; a solid path of vertical or horizontal segments is snapped vertex by
    vertex), so the pixels are the same. Returns False (nothing drawn) otherwise. ``axes``: the lines' axes
    (a tick's lines do not name it)."""
    import numpy as np
    from matplotlib.path import Path

    if len(lines) < 2:
        return False
    first = lines[0]
    key = _line_style_key(first)
    no_line = first._lineStyles[first._linestyle] == "_draw_nothing"
    has_marker = bool(first._marker) and first._markersize > 0
    if no_line == (not has_marker) or (not no_line and first.is_dashed()):
        return False                            # (nothing to draw; or both a line and markers; or dashes)
    if any(not line.get_visible() or _line_style_key(line) != key for line in lines[1:]):
        return False
    # lines that share one transform of a rectilinear axes (an axis's grid lines, or its tick marks on one
    # side) are transformed together: the non-affine part (a log scale's) is element by element, so one call
    # on the joined points gives each line's own result, without a TransformedPath a line (~0.1 ms each)
    transform = first.get_transform()
    together = (getattr(axes, "name", None) == "rectilinear"
                and all(line.get_transform() is transform for line in lines))
    parts, matrix = [], None
    for line in lines:
        if line._invalidy or line._invalidx:
            line.recache()
        if together:
            if not no_line and (line._path.codes is not None or len(line._path.vertices) != 2):
                return False
            parts.append(line._path.vertices)
            continue
        tp = line._get_transformed_path()
        path, affine = (tp.get_transformed_points_and_affine() if no_line
                        else tp.get_transformed_path_and_affine())
        if matrix is None:
            matrix, shared = affine.get_matrix(), affine
        elif not np.array_equal(matrix, affine.get_matrix()):
            return False
        if not no_line and (path.codes is not None or len(path.vertices) != 2):
            return False                        # (a grid line is one straight segment)
        parts.append(path.vertices)
    vertices = np.concatenate(parts)
    if together:                                # (as TransformedPath: the points, or the path, non-affine)
        shared = transform.get_affine()
        vertices = (transform.transform_non_affine(vertices) if no_line else
                    transform.transform_path_non_affine(Path(vertices)).vertices)
    if no_line:
        joined = Path(vertices)
    else:
        codes = np.tile(np.array([Path.MOVETO, Path.LINETO], dtype=Path.code_type), len(parts))
        joined = Path(vertices, codes)
    joined.should_simplify = False
    from matplotlib import cbook

    with cbook._setattr_cm(first, _transformed_path=_Joined(joined, shared)):
        first.draw(renderer)
    for line in lines[1:]:
        line.stale = False
    return True


def _ticks_drawn_together(axis_cls) -> None:
    """Replace ``axis_cls.draw`` by one that, while this module's canvas draws, draws an axis's grid lines
    with one call, then its tick marks on each side with one call each (:func:`_draw_lines_as_one`), then
    the tick labels, instead of each tick's five artists in turn (issue 38: 0.2-0.3 ms a line, ~15 ms a
    figure with a grid). The parts of different ticks do not overlap, so the order does not show. Where
    the lines cannot be joined, each tick is drawn as matplotlib draws it."""
    original = axis_cls.draw
    if getattr(original, "llmsizing_kept", False):
        return

    def draw(self, renderer, *args, **kwargs):
        if _DRAWING[0] is None or args or kwargs or not self.get_visible():
            return original(self, renderer, *args, **kwargs)
        renderer.open_group("matplotlib.axis", gid=self.get_gid())
        ticks_to_draw = self._update_ticks()
        tlb1, tlb2 = self._get_ticklabel_bboxes(ticks_to_draw, renderer)
        shown = [tick for tick in ticks_to_draw if tick.get_visible()]
        for name in ("gridline", "tick1line", "tick2line"):
            lines = [getattr(tick, name) for tick in shown if getattr(tick, name).get_visible()]
            if not _draw_lines_as_one(lines, renderer, self.axes):
                for line in lines:
                    line.draw(renderer)
        for tick in shown:
            tick.label1.draw(renderer)
            tick.label2.draw(renderer)
        for tick in ticks_to_draw:
            tick.stale = False
        self._update_label_position(renderer)
        self.label.draw(renderer)
        self._update_offset_text_position(tlb1, tlb2)
        self.offsetText.set_text(self.major.formatter.get_offset())
        self.offsetText.draw(renderer)
        renderer.close_group("matplotlib.axis")
        self.stale = False

    draw.llmsizing_kept = True
    draw._supports_rasterization = getattr(original, "_supports_rasterization", False)
    axis_cls.draw = draw


def _boxes_kept_per_draw(*box_classes) -> None:
    """Replace each class's ``_get_bbox_and_child_offsets`` (a packed box's extent and its children's offsets)
    by one that, while this module's canvas draws, works a box's layout out once per draw and renderer.
    matplotlib asks a legend's nested boxes for it again at every level of the nesting (the legend's extent,
    then each box's draw, then each child's: ~30 times a legend per draw, ~40% of the planner's draw); it
    depends only on the children's texts, fonts and sizes and the renderer, which do not change during a
    draw."""
    for cls in box_classes:
        original = cls.__dict__.get("_get_bbox_and_child_offsets")
        if original is None or getattr(original, "llmsizing_kept", False):
            continue

        def _get_bbox_and_child_offsets(self, renderer, _original=original):
            draw = _DRAWING[0]
            if draw is None:
                return _original(self, renderer)
            kept = self.__dict__.get("_llmsizing_layout")
            if kept is not None and kept[0] == draw and kept[1] is renderer:
                bbox, offsets = kept[2]
                return bbox.frozen(), list(offsets)
            bbox, offsets = _original(self, renderer)
            self.__dict__["_llmsizing_layout"] = (draw, renderer, (bbox.frozen(), list(offsets)))
            return bbox, offsets

        _get_bbox_and_child_offsets.llmsizing_kept = True
        cls._get_bbox_and_child_offsets = _get_bbox_and_child_offsets


def _text_sets_skipped_in_draws(text_cls) -> None:
    """Replace ``text_cls._cm_set`` by one that, while this module's canvas draws, skips matplotlib's
    set-and-restore of a text's string when it sets the string the text already holds. ``Text.draw`` wraps
    every draw in ``self._cm_set(text=self._get_wrapped_text())``, which for an unwrapped text is its own
    string: two ``Artist.set`` calls (keyword normalisation, the setter, ``stale`` up to the figure) that
    change nothing, ~80 us a text (issue 38: a third of a tick label's draw). The figure's draw ends with
    every artist's ``stale`` False either way; any other use of ``_cm_set`` runs matplotlib's own."""
    original = text_cls._cm_set
    if getattr(original, "llmsizing_kept", False):
        return
    import contextlib

    def _cm_set(self, **kwargs):
        if _DRAWING[0] is not None and len(kwargs) == 1 and kwargs.get("text", None) is self._text:
            return contextlib.nullcontext()
        return original(self, **kwargs)

    _cm_set.llmsizing_kept = True
    text_cls._cm_set = _cm_set


def _tick_positions_kept(*tick_classes) -> None:
    """Replace each tick class's ``update_position`` by one that, while this module's canvas draws, leaves a
    tick alone when it is already at that place. ``Axis._update_ticks`` places every tick again at each draw
    (``set_xdata``/``set_ydata`` on its three lines), which marks their paths invalid even when the place has
    not changed: each tick mark is then converted and transformed again (~150 us of a ~250 us tick mark draw,
    issue 38). A tick counts as in place when its ``_loc``, its lines' data and its labels' coordinate are
    all that value already (what ``update_position`` would set them to)."""
    for cls in tick_classes:
        original = cls.__dict__.get("update_position")
        if original is None or getattr(original, "llmsizing_kept", False):
            continue
        coord = "_x" if cls.__name__ == "XTick" else "_y"
        data = "_xorig" if coord == "_x" else "_yorig"

        def update_position(self, loc, _original=original, _coord=coord, _data=data):
            if _DRAWING[0] is not None and _in_place(self, loc, _coord, _data):
                return None
            return _original(self, loc)

        update_position.llmsizing_kept = True
        cls.update_position = update_position


def _in_place(tick, loc, coord: str, data: str) -> bool:
    """True if ``tick`` is where ``update_position(loc)`` would put it (lines' data exactly ``(loc,)``)."""
    if getattr(tick, "_loc", None) is None or not tick._loc == loc:
        return False
    for line in (tick.tick1line, tick.tick2line, tick.gridline):
        d = getattr(line, data, None)
        if type(d) is not tuple or len(d) != 1 or not d[0] == loc:
            return False
    return all(getattr(label, coord, None) == loc for label in (tick.label1, tick.label2))


def _tick_label_boxes_kept_per_draw(axis_cls) -> None:
    """Replace ``axis_cls._get_ticklabel_bboxes`` by one that, while this module's canvas draws, measures an
    axis's tick labels once per draw and renderer: ``Axis.draw`` asks for them, then again for where the
    axis label goes (``_get_tick_boxes_siblings``), with the same ticks, placed once per draw."""
    original = axis_cls._get_ticklabel_bboxes
    if getattr(original, "llmsizing_kept", False):
        return

    def _get_ticklabel_bboxes(self, ticks, renderer=None):
        draw = _DRAWING[0]
        if draw is None or renderer is None:
            return original(self, ticks, renderer)
        key = (draw, renderer, tuple(map(id, ticks)))
        kept = self.__dict__.get("_llmsizing_label_boxes")
        if kept is not None and kept[0] == key:
            return list(kept[1]), list(kept[2])
        boxes1, boxes2 = original(self, ticks, renderer)
        self.__dict__["_llmsizing_label_boxes"] = (key, list(boxes1), list(boxes2))
        return boxes1, boxes2

    _get_ticklabel_bboxes.llmsizing_kept = True
    axis_cls._get_ticklabel_bboxes = _get_ticklabel_bboxes


def _null_minor_ticks_in_draws(axis_cls) -> None:
    """Replace ``axis_cls.get_minorticklocs`` by one that, while this module's canvas draws, gives an axis
    whose minor locator is a ``NullLocator`` its (no) minor ticks at once: matplotlib's asks the major locator
    again (a ``MaxNLocator`` works its ticks out a second time per draw) and transforms both to drop the minor
    ticks that fall on major ones, of which there are none (issue 35: ~0.3 ms an axis)."""
    from matplotlib.ticker import NullLocator

    original = axis_cls.get_minorticklocs
    if getattr(original, "llmsizing_kept", False):
        return

    def get_minorticklocs(self):
        locator = self.minor.locator
        if _DRAWING[0] is None or type(locator) is not NullLocator:
            return original(self)
        import numpy as np

        return np.asarray(locator())               # (empty: as matplotlib's own, with nothing to drop)

    get_minorticklocs.llmsizing_kept = True
    axis_cls.get_minorticklocs = get_minorticklocs


def _bbox_unions_in_one(base_cls, bbox_cls) -> None:
    """Replace ``base_cls.union`` (a static method, ``Bbox.union``; its result a ``bbox_cls``) by one that,
    while this module's canvas draws, takes the least and greatest x and y of all the boxes' corners in four
    reductions of one array: matplotlib's asks each box for its ``xmin``, ``xmax``, ``ymin`` and ``ymax`` (a
    NumPy reduction each, four per box; an axis label's place unions every tick label's box, ~13 unions and
    ~450 reductions a planner draw, fig29). The same corners and the same least and greatest values (a NaN
    among them gives NaN either way)."""
    original = base_cls.__dict__["union"].__func__
    if getattr(original, "llmsizing_kept", False):
        return
    import numpy as np

    def union(bboxes):
        if _DRAWING[0] is None or not len(bboxes):
            return original(bboxes)
        corners = np.array([b.get_points() for b in bboxes], dtype=float)    # (n, 2 corners, x y)
        x, y = corners[:, :, 0], corners[:, :, 1]
        return bbox_cls([[x.min(), y.min()], [x.max(), y.max()]])

    union.llmsizing_kept = True
    base_cls.union = staticmethod(union)


@functools.cache
def _text_cache_canvas():
    """A matplotlib Agg canvas whose renderer keeps the bitmap of every text it draws (issue 12, "Speed").

    Most of a widget redraw is text: tick labels, legends, titles, ~80 of them in the planner's figure, and
    Agg lays out and rasterises each one again on every draw (``RendererAgg.draw_text``: FreeType's
    ``set_text`` and ``draw_glyphs_to_bitmap``), although from one redraw to the next almost all of them are
    the same strings in the same fonts. This renderer keeps each string's bitmap, keyed by everything the
    bitmap depends on (the string, the font files and size, the DPI, antialiasing and the rcParams for hinting
    and kerning), and composites the kept bitmap with the same call and the same rounding as matplotlib's own
    ``draw_text``: the pixels are identical (``tests/test_widget_layout.py`` compares them with a plain Agg
    draw), ~10 ms sooner per planner redraw. It follows matplotlib 3.10's ``RendererAgg.draw_text``
    (matplotlib is pinned below 3.11); where that method's helpers are missing, or on another matplotlib, it
    is the plain Agg canvas. On 3.10 it also keeps texts' layouts and, within a draw, axes' ticks and legends'
    box layouts (see the module's docstring)."""
    import itertools
    from collections import OrderedDict
    from math import cos, radians, sin

    import matplotlib as mpl
    import numpy as np
    from matplotlib import font_manager
    from matplotlib.axis import Axis
    from matplotlib.backends import backend_agg
    from matplotlib.text import Text

    # only on the matplotlib whose draw_text this copies (requirements.txt pins 3.10; an install from
    # pyproject.toml or the JupyterLite copy may bring another): anywhere else, the plain Agg canvas
    if mpl.__version_info__[:2] != (3, 10) or not (
            hasattr(backend_agg, "get_hinting_flag") and hasattr(backend_agg.RendererAgg, "_prepare_font")
            and hasattr(font_manager.fontManager, "_find_fonts_by_props")):
        return backend_agg.FigureCanvasAgg
    draws = itertools.count()

    class TextCacheRendererAgg(backend_agg.RendererAgg):
        limit = 4096                 # bitmaps and layouts kept (a few hundred bytes to a few KiB each)
        legend_limit = 16            # legends' pixels kept (two copies of a legend's region each)

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.text_bitmaps: OrderedDict = OrderedDict()
            self.text_layouts: OrderedDict = OrderedDict()
            self.legend_pixels: OrderedDict = OrderedDict()     # (_legends_kept_as_pixels)
            self.rc_key: tuple = (None, None)        # (draw, what the rcParams say for draw_text's key)

        def text_settings(self) -> tuple:
            """What the rcParams and the font manager say for every text's bitmap and extent: the font
            families' lists, the font manager and its fonts (findfont's own cache key), hinting and
            kerning. Read once per draw of this module's canvas (issue 38: ten rcParams lookups a text),
            at every call otherwise."""
            draw = _DRAWING[0]
            if draw is None or self.rc_key[0] != draw:
                manager = font_manager.fontManager
                rc = (tuple(tuple(mpl.rcParams[k]) for k in _FAMILY_RC), id(manager), len(manager.ttflist),
                      len(manager.afmlist), backend_agg.get_hinting_flag(),
                      mpl.rcParams["text.hinting_factor"], mpl.rcParams["text.kerning_factor"])
                self.rc_key = (draw, rc)
            return self.rc_key[1]

        def get_text_width_height_descent(self, s, prop, ismath):
            # matplotlib 3.10's own, which lays the string out (FreeType's set_text, ~0.3 ms a string) to
            # measure it; the bitmap that draw_text would lay the same string out again for (issue 35: each
            # new string of a move, the title, the count of plans, the step's line, twice) is made from that
            # layout and kept for it, anti-aliased as texts are drawn unless told otherwise
            if ismath:
                return super().get_text_width_height_descent(s, prop, ismath)
            rc = self.text_settings()
            font = self._prepare_font(prop)
            font.set_text(s, 0.0, flags=rc[4])
            w, h = font.get_width_height()  # width and height of unrotated string
            d = font.get_descent()
            key = (s, _font_key(prop), rc, prop.get_size_in_points(), self.dpi, True)
            if key not in self.text_bitmaps:
                self._keep_bitmap(key, font, True)
            return w / 64.0, h / 64.0, d / 64.0

        def _keep_bitmap(self, key, font, antialiased: bool) -> tuple:
            """The bitmap of the string ``font`` holds (set by ``set_text``), drawn and kept as ``key``."""
            font.draw_glyphs_to_bitmap(antialiased=antialiased)
            xo, yo = font.get_bitmap_offset()
            hit = self.text_bitmaps[key] = (np.array(font), font.get_descent() / 64.0, xo / 64.0, yo / 64.0)
            if len(self.text_bitmaps) > self.limit:
                self.text_bitmaps.popitem(last=False)
            return hit

        def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
            if ismath:
                return self.draw_mathtext(gc, x, y, s, prop, angle)
            # what decides the font files the properties resolve to (findfont's own cache key: the
            # properties, the rcParams' family lists, the font manager and its fonts), and the size asked
            rc = self.text_settings()
            flags = rc[4]
            key = (s, _font_key(prop), rc, prop.get_size_in_points(), self.dpi, bool(gc.get_antialiased()))
            hit = self.text_bitmaps.get(key)
            if hit is None:
                font = self._prepare_font(prop)
                font.set_text(s, 0, flags=flags)
                hit = self._keep_bitmap(key, font, gc.get_antialiased())
            else:
                self.text_bitmaps.move_to_end(key)
            bitmap, d, xo, yo = hit
            x = round(x + xo + d * sin(radians(angle)))
            y = round(y + yo + d * cos(radians(angle)))
            self._renderer.draw_text_image(bitmap, x, y + 1, angle, gc)

    class TextCacheCanvasAgg(backend_agg.FigureCanvasAgg):
        def draw(self):
            _DRAWING[0] = next(draws)
            try:
                super().draw()
            finally:
                _DRAWING[0] = None

        def get_renderer(self):
            key = (*self.figure.bbox.size, self.figure.dpi)
            if self._lastKey != key:
                old = getattr(self, "renderer", None)
                self.renderer = TextCacheRendererAgg(*self.figure.bbox.size, self.figure.dpi)
                self._lastKey = key
                if isinstance(old, TextCacheRendererAgg):
                    # the kept bitmaps and layouts go on to the new size's renderer: their keys hold all
                    # they depend on (the DPI among them), nothing of the canvas's size (issue 38: a move
                    # that changes a figure's height, a recipe added to the model-states figure, drew every
                    # text afresh)
                    self.renderer.text_bitmaps = old.text_bitmaps
                    self.renderer.text_layouts = old.text_layouts
            return self.renderer

    if hasattr(Text, "_get_layout") and hasattr(Axis, "_update_ticks"):
        _kept_layouts(Text, TextCacheRendererAgg)
        _ticks_kept_per_draw(Axis)
    if hasattr(Text, "_cm_set") and hasattr(Text, "_get_wrapped_text"):
        _text_sets_skipped_in_draws(Text)
    if hasattr(Axis, "_get_ticklabel_bboxes"):
        _tick_label_boxes_kept_per_draw(Axis)
    if hasattr(Axis, "get_minorticklocs"):
        _null_minor_ticks_in_draws(Axis)
    from matplotlib.axis import XTick, YTick

    _tick_positions_kept(XTick, YTick)
    if hasattr(Axis, "_update_label_position") and hasattr(Axis, "_update_offset_text_position"):
        _ticks_drawn_together(Axis)
    from matplotlib import offsetbox

    _boxes_kept_per_draw(offsetbox.VPacker, offsetbox.HPacker, offsetbox.PaddedBox)
    from matplotlib.legend import Legend

    _legends_kept_as_pixels(Legend, TextCacheRendererAgg)
    from matplotlib.transforms import Bbox, BboxBase

    if isinstance(BboxBase.__dict__.get("union"), staticmethod) and hasattr(Bbox, "get_points"):
        _bbox_unions_in_one(BboxBase, Bbox)
    return TextCacheCanvasAgg


