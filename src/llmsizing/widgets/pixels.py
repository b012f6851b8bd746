"""Pixels a widget's canvas keeps across redraws (issue 38: a move within 100 ms), and the keys they are kept
by: what a legend draws onto the same pixels is the same, so it is copied in instead of drawn again
(:func:`_legends_kept_as_pixels`). The lowest module of the widgets' machinery: :mod:`.canvas` builds its
canvas with it, and the draw counter (:data:`_DRAWING`) and the font and line keys it shares live here.
(Texts kept the same way gained nothing: a kept text's key and place cost about what its draw costs with the
bitmaps and layouts :mod:`.canvas` keeps.)
"""

from __future__ import annotations

#: The number of the draw this module's canvas is making, or None between draws (ticks are kept per draw).
_DRAWING: list = [None]


def _font_key(prop) -> tuple:
    """What a ``FontProperties`` says (what its hash is made of), as a tuple to key a cache by."""
    return (tuple(prop.get_family()), prop.get_slant(), prop.get_variant(), prop.get_weight(),
            prop.get_stretch(), prop.get_size(), prop.get_file(), prop.get_math_fontfamily())


def _line_style_key(line) -> str:
    """Everything but the data that decides how matplotlib's ``Line2D.draw`` draws ``line`` (style, marker,
    clip, effects), as a string: lines with the same key are drawn alike."""
    marker = line._marker
    return repr((type(line), marker.get_marker(), marker.get_fillstyle(), line._markersize,
                 line._markeredgewidth, line._markeredgecolor, line._markerfacecolor,
                 line._markerfacecoloralt, line._alpha, line._antialiased, line._linestyle, line._linewidth,
                 line._color, line._dash_pattern, line._gapcolor, line._solidcapstyle, line._solidjoinstyle,
                 line._dashcapstyle, line._dashjoinstyle, line.get_snap(), line._clipon, id(line.clipbox),
                 id(line._clippath), line.get_sketch_params(), line.get_path_effects(), line.get_url(),
                 line.get_gid(), line.get_rasterized(), line.get_agg_filter(), line.get_drawstyle(),
                 line.get_markevery(), line._subslice))


def _text_key(text) -> tuple | None:
    """All but its place that decides how a text draws; None for a box around it, path effects, wrapping or
    TeX."""
    if text._bbox_patch is not None or text.get_path_effects() or text._wrap or text._usetex:
        return None
    return (type(text), text._text, text._color, text._alpha, text.get_visible(),
            _font_key(text._fontproperties), text._rotation, text._rotation_mode, text._horizontalalignment,
            text._verticalalignment, text._multialignment, text._linespacing, text._parse_math,
            text._antialiased, text._x, text._y, *_common_key(text))


def _common_key(a) -> tuple:
    return (a.get_visible(), a.get_agg_filter(), a.get_rasterized(), a.get_clip_on(), a.clipbox is None,
            a._clippath is None, a.get_url(), a.get_gid(), a.get_sketch_params(), a.get_snap())


def _handle_key(a, area) -> tuple | None:
    """How a legend handle in the DrawingArea ``area`` (in its coordinates) draws: a Rectangle, a Line2D, or
    a scatter's PathCollection placed by offsets; None for any other."""
    import numpy as np
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle
    from matplotlib.transforms import IdentityTransform

    def of_area(tr):
        return getattr(tr, "_a", None) is area.dpi_transform and getattr(tr, "_b", 0) is area.offset_transform

    if a._clippath is not None or a.clipbox is not None or a.get_path_effects():
        return None
    if type(a) is Rectangle and of_area(a._transform):
        return (Rectangle, a._x0, a._y0, a._width, a._height, a.angle, a._facecolor, a._edgecolor,
                a._linewidth, a._linestyle, a._dash_pattern, a._hatch, a._hatch_color, a._fill, a._alpha,
                a._antialiased, a._capstyle, a._joinstyle, *_common_key(a))
    if type(a) is Line2D and of_area(a._transform):
        return (Line2D, _line_style_key(a), a.get_visible(), np.asarray(a._xorig, dtype=float).tobytes(),
                np.asarray(a._yorig, dtype=float).tobytes())
    if (type(a) is PathCollection and type(a._transform) is IdentityTransform and of_area(a._offset_transform)
            and a.get_array() is None):
        arrays = (a.get_sizes(), a._offsets, a.get_facecolor(), a.get_edgecolor(), a._linewidths)
        return (PathCollection, tuple((p.vertices.tobytes(), p.codes is None or p.codes.tobytes())
                                      for p in a.get_paths()),
                tuple(np.asarray(x, dtype=float).tobytes() for x in arrays), repr(a._linestyles),
                np.asarray(a._antialiaseds).tobytes(), a._alpha, a._hatch, a._capstyle, a._joinstyle,
                a.get_urls() == [None], *_common_key(a))
    return None


def _box_key(box) -> tuple | None:
    """A legend's offset box (packers, text areas, drawing areas of handles): all but its offset that decides
    its layout and drawing; None if it holds something not keyed here."""
    from matplotlib import offsetbox

    kind = type(box)
    if not box.get_visible():
        return (kind, False)
    if kind is offsetbox.TextArea:
        text = _text_key(box._text)
        return None if text is None else (kind, box._multilinebaseline, text)
    drawing = kind is offsetbox.DrawingArea
    if not drawing and kind not in (offsetbox.VPacker, offsetbox.HPacker):
        return None
    children = tuple(_handle_key(c, box) if drawing else _box_key(c) for c in box._children)
    if None in children:
        return None
    if drawing:
        return (kind, box.width, box.height, box.xdescent, box.ydescent, box._clip_children, children)
    return (kind, box.pad, box.sep, box.width, box.height, box.mode, box.align, children)


def _legend_key(legend, renderer) -> tuple | None:
    """All that decides what ``legend`` draws, and where, on ``renderer``: a fixed ``loc`` in its anchor box
    (pixels), font size, pads, frame and boxes (:func:`_box_key`); None for a legend at the "best" spot (it
    depends on the data), with a shadow, a filter or any part not keyed here."""
    from matplotlib.legend import Legend

    box, patch = legend._legend_box, legend.legendPatch
    if (type(legend) is not Legend or legend._loc == 0 or legend.shadow or legend.get_agg_filter() is not None
            or legend.get_rasterized() or getattr(box._offset, "__func__", None) is not Legend._findoffset
            or getattr(box._offset, "__self__", None) is not legend or patch.get_path_effects()):
        return None
    boxes = _box_key(box)
    frame = (False,) if not patch.get_visible() else (
        repr(vars(patch.get_boxstyle())), type(patch.get_boxstyle()), patch._facecolor, patch._edgecolor,
        patch._linewidth, patch._linestyle, patch._dash_pattern, patch._hatch, patch._fill, patch._alpha,
        patch._antialiased, patch._mutation_aspect, patch._capstyle, patch._joinstyle)
    key = (legend._loc, tuple(legend.get_bbox_to_anchor().bounds), legend._fontsize, legend.borderaxespad,
           legend._mode, renderer.dpi, renderer.width, renderer.height, renderer.text_settings(), frame,
           boxes)
    try:
        return None if boxes is None else (hash(key), key)[1]
    except TypeError:               # (a colour given as an array, say): not kept
        return None


def _changed(now, before) -> bool:
    """Whether any pixel of a line of pixels (RGBA) differs from what it was."""
    import numpy as np

    return not np.array_equal(now, before)


def _legends_kept_as_pixels(legend_cls, renderer_cls) -> None:
    """Replace ``legend_cls.draw`` by one that, while this module's canvas draws on a ``renderer_cls``
    renderer, keeps what a legend's draw did to the pixels of its box and 20 px around, before and after (a
    draw that changed a pixel on that region's edge, and may have drawn beyond it, is not kept). At the next
    draw of a legend with the same key (:func:`_legend_key`), if that region holds the same pixels as it did
    before, the pixels after are copied in instead of drawing it again: Agg draws the same calls onto the
    same pixels alike, so the pixels are the plain draw's (issue 38: 5-18 ms of a move, mostly the same
    legend on the same margin)."""
    import numpy as np

    original = legend_cls.draw
    if getattr(original, "llmsizing_kept", False):
        return

    def draw(self, renderer):
        key = None
        if _DRAWING[0] is not None and isinstance(renderer, renderer_cls) and self.get_visible():
            key = _legend_key(self, renderer)
        if key is None:
            return original(self, renderer)
        pixels, kept = np.asarray(renderer.buffer_rgba()), renderer.legend_pixels.get(key)
        if kept is not None and np.array_equal(pixels[kept[0]], kept[1]):
            pixels[kept[0]] = kept[2]
            renderer.legend_pixels.move_to_end(key)
            self.legendPatch.set_bounds(kept[3])          # (what the draw sets, for anyone who reads them)
            self.legendPatch.set_mutation_scale(kept[4])
            self.stale = False
            return None
        ext = self.get_window_extent(renderer)      # (the layout the draw makes: kept for this draw)
        h, w = pixels.shape[:2]
        y0, y1 = max(int(h - ext.y1) - 20, 0), min(int(h - ext.y0) + 21, h)
        x0, x1 = max(int(ext.x0) - 20, 0), min(int(ext.x1) + 21, w)
        region = np.s_[y0:y1, x0:x1]
        old = pixels[region].copy()
        original(self, renderer)
        # (its four edges only, not the whole region: ~0.3 ms a legend drawn afresh, issue 38)
        if ((y0 > 0 and _changed(pixels[y0, x0:x1], old[0]))
                or (y1 < h and _changed(pixels[y1 - 1, x0:x1], old[-1]))
                or (x0 > 0 and _changed(pixels[y0:y1, x0], old[:, 0]))
                or (x1 < w and _changed(pixels[y0:y1, x1 - 1], old[:, -1]))):
            return None                  # (it drew on the region's edge, maybe beyond it: not kept)
        patch = self.legendPatch
        renderer.legend_pixels[key] = (region, old, pixels[region].copy(), patch.get_bbox().bounds,
                                       patch.get_mutation_scale())
        if len(renderer.legend_pixels) > renderer.legend_limit:
            renderer.legend_pixels.popitem(last=False)
        return None

    draw.llmsizing_kept = True
    draw._supports_rasterization = getattr(original, "_supports_rasterization", False)
    legend_cls.draw = draw

