"""The controls the book's widgets share (issue 12, "Controls"), and how a widget wires them to its redraw.

What a control offers: :func:`_choice` (toggle buttons when they fit, else a drop-down),
:func:`_gpu_multiselect` (every catalogued GPU, with a hint on how to pick several), sequence lengths up to
the model's context (:func:`_up_to_max_seq`, :func:`_follow_max_seq`: chapters 3, 4 and 8) and the valid
divisors (chapter 1's heads). How a widget moves its own controls without a redraw per move: :func:`_reroute`,
:func:`_set_quietly` and :func:`_react_then_redraw`, so that each change the reader makes redraws once
(:class:`~.dashboard.Dashboard`).
"""

from __future__ import annotations

import contextlib

import ipywidgets as W

from ..catalog import get_model, list_gpus
from .dashboard import _CONTROL_ROOM_PX, CONTROL_MARGIN_PX, CONTROLS_WIDTH_PX, Dashboard


def _dense_models(model) -> list[str]:
    """The dense catalogue models, for a widget's model dropdown; ``model`` (the widget's starting value) is
    checked first, so that a mixture of experts is refused with the reason rather than a bare "Invalid
    selection": these widgets draw dense views with no expert-parallel control (issue 24). A mixture of
    experts has chapter 18's ``moe_layout_widget``; the training-time and cost widgets (chapters 10 and 11)
    list every model."""
    from ..catalog import get_model, list_models
    from ..model import MOE_NOT_MODELLED

    if isinstance(model, str) and model in list_models(moe=True):
        m = get_model(model)
        raise ValueError(f"model {model!r} is a mixture of experts ({m.experts} experts, "
                         f"{m.experts_per_token} per token): the widgets list dense models only, because "
                         f"{MOE_NOT_MODELLED}")
    return list_models(moe=False)


def _moe_options(options) -> tuple[str, ...]:
    """The mixtures of experts among a model drop-down's ``options``, in its order: the models a planner
    widget built with ``warm=True`` searches before any move (chapters 12 and 17). Read from the catalogue
    (``is_moe``), not from the names."""
    return tuple(m for m in options if get_model(m).is_moe)


def _style(desc_width: str = "110px") -> dict:
    """A control's description width and its width: the column's less ipywidgets' margin on both sides (so
    the column never scrolls sideways, issue 38)."""
    return dict(style={"description_width": desc_width},
                layout=W.Layout(width=f"{CONTROLS_WIDTH_PX - 2 * CONTROL_MARGIN_PX}px"))


def _button_px(label: str) -> int:
    """A button wide enough for ``label`` at JupyterLab's 13 px UI font (~7.5 px a character) plus the
    button's own padding and border, 34 px (a one-character label needs 41 px, measured in JupyterLab 4 in
    Chromium; this gives 42). ``tests/browser/test_lab.py`` checks that no toggle label is cut."""
    return round(7.5 * len(label)) + 34


def _choice(options, value, description: str) -> W.ValueWidget:
    """A few options as toggle buttons, each as wide as the longest label needs, when they fit on one line of
    the controls' column; otherwise a drop-down (so no label is ever cut or wrapped)."""
    width = max(_button_px(str(o)) for o in options)
    if len(options) * (width + 4) > _CONTROL_ROOM_PX:
        return W.Dropdown(options=options, value=value, description=description, **_style())
    w = W.ToggleButtons(options=options, value=value, description=description, **_style())
    w.style.button_width = f"{width}px"
    # ipywidgets 8 lays a ToggleButtons out as a block, so its description sits on a line of its own above the
    # buttons; as a flex row the description is beside them, aligned with the other controls' descriptions
    w.layout.display, w.layout.align_items = "flex", "center"
    return w


def _divisors_up_to(n: int, limit: int) -> list[int]:
    """The divisors of ``n`` that are at most ``limit``, ascending (the valid heads for a hidden size ``n``,
    or the valid KV heads for ``n`` heads: :class:`~llmsizing.model.Model` requires them to divide)."""
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def _nearest(options, wanted):
    """The option closest to ``wanted`` (the smaller one on a tie)."""
    return min(options, key=lambda o: (abs(o - wanted), o))


#: How to pick several GPUs in a multi-select, shown next to it and as its tooltip.
GPU_SELECT_HINT = "Ctrl-click (⌘-click on a Mac) to pick several GPUs, Shift-click for a range"


#: The most rows a GPU multi-select shows before it scrolls: with 21 catalogued GPUs, one row each would push
#: the planner's controls past the widget's height budget (tests/test_widget_layout.py).
GPU_SELECT_MAX_ROWS = 16


def _gpu_multiselect(value, description: str, max_rows: int = GPU_SELECT_MAX_ROWS) -> W.SelectMultiple:
    """A multi-select of every catalogued GPU, showing up to ``max_rows`` of them
    (:data:`GPU_SELECT_MAX_ROWS` unless a widget with more controls needs fewer; the rest scroll) and never
    hiding a default pick below the fold, with a line under it saying how to pick several (:class:`Dashboard`
    shows ``hint``; a control's label is one line that JupyterLab and thebe cut short, so the hint cannot go
    there)."""
    options = list_gpus()
    rows = min(len(options), max(max_rows, 1 + max(options.index(v) for v in value)))
    select = W.SelectMultiple(options=options, value=tuple(value), rows=rows, description=description,
                              tooltip=GPU_SELECT_HINT, **_style())
    select.hint = GPU_SELECT_HINT
    return select


#: The sequence lengths the sliders of chapters 4 (activation memory) and 8 (the parallelism explorer) offer,
#: up to the model's context (:func:`_up_to_max_seq`).
_SEQS = [512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 65536, 131072]


def _up_to_max_seq(lengths, model) -> list[int]:
    """The sequence lengths a slider offers for ``model``: those up to its trained context (``max_seq``),
    and at least the shortest one. Longer contexts are still accepted by the library (see :class:`Model`)."""
    return [n for n in lengths if n <= model.max_seq] or [lengths[0]]


def _follow_max_seq(box: Dashboard, key: str, lengths, option) -> None:
    """When the model changes, limit the ``key`` slider to the new model's ``max_seq`` (one redraw). The
    length the reader last chose is remembered, so a model with a longer context brings it back."""
    slider = box.controls[key]
    wanted = {"value": slider.value}

    def on_value(change):
        wanted["value"] = change["new"]

    def on_model(change):
        allowed = _up_to_max_seq(lengths, get_model(change["new"]))
        value = max([n for n in allowed if n <= wanted["value"]], default=allowed[0])
        _set_quietly(box, slider, on_value, options=[option(n) for n in allowed], value=value)
        box.update(change)                   # (a reader's move: a kept answer may show it)

    slider.observe(on_value, names="value")
    _reroute(box, on_model, ("model",))


# --------------------------------------------------------------------------- wiring: one redraw per change
def _reroute(box: Dashboard, handler, keys=None) -> None:
    """The controls named in ``keys`` (all of the box's by default) call ``handler`` when they change, instead
    of ``box.update``: a handler that moves other controls first, then redraws once itself."""
    for key in box.controls if keys is None else keys:
        box.controls[key].unobserve(box.update, names="value")
        box.controls[key].observe(handler, names="value")


def _set_quietly(box: Dashboard, control, *also, **traits) -> None:
    """Set ``control``'s traits in the order given (``options`` before ``value``) without a redraw: its
    observers ``box.update`` and ``also`` are off meanwhile, then observe again in that order."""
    observers = (box.update, *also)
    for observer in observers:
        control.unobserve(observer, names="value")
    with box.hold_sync():
        for name, value in traits.items():
            setattr(control, name, value)
    for observer in observers:
        control.observe(observer, names="value")


def _react_then_redraw(box: Dashboard, react):
    """Every control of the box calls ``react(change)`` when the reader changes it, then redraws once. Returns
    ``quiet``, a context manager under which the widget moves its own controls: those moves call neither
    ``react`` nor a redraw (chapter 1's heads sliders, chapter 2's "GPUs per line")."""
    busy = [False]

    @contextlib.contextmanager
    def quiet():
        busy[0] = True
        try:
            with box.hold_sync():
                yield
        finally:
            busy[0] = False

    def on_change(change):
        if busy[0]:
            return
        react(change)
        box.update(change)                   # (a reader's move: a kept answer may show it)

    _reroute(box, on_change)
    return quiet
