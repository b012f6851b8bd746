"""What the book's figures write (:mod:`llmsizing.charts`; :mod:`~llmsizing.charts.base` imports every name
here and re-exports it): a caption wrapped to the figure's width and drawn inside its PNG
(:func:`_caption_room`, issue 38), short numbers on one suffix ladder (:func:`_short_number`,
:func:`_tokens`, :func:`_usd`: 1k, 2.5M, $1.2B), and log axes with fixed 1-2-5 ticks and plain-text labels
(:func:`_log_axis`, :func:`_log_scale`), which a widget's redraw keeps instead of setting a new scale (issue
38: a log axis left to matplotlib's default locators spends most of a redraw on minor ticks and mathtext).
Used by every chapter's figures. Imports no module of the package.

No formula lives here: these helpers only format and place text.
"""

from __future__ import annotations


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
    import functools
    import math

    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

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
    # the locator and formatter ``axis.set_ticks(ticks, labels)`` sets (a FixedLocator, and the FuncFormatter
    # of matplotlib's ``_format_with_dict`` that ``set_ticklabels`` makes for one), set directly: set_ticks
    # also places each tick and sets its labels' texts, which the next draw does again (``_update_ticks``),
    # and widens the view to the ticks, which lie inside it but for a rounding (~0.1-0.2 ms an axis, draw36)
    if min(ticks) < lo or max(ticks) > hi:
        for each in axis._get_shared_axis():
            each.set_view_interval(min(ticks), max(ticks))
    locator = FixedLocator(ticks)
    axis.set_major_locator(locator)
    axis.set_minor_locator(NullLocator())
    labels = {loc: fmt(t) for loc, t in zip(locator.locs, ticks)}
    axis.set_major_formatter(FuncFormatter(functools.partial(axis._format_with_dict, labels)))
