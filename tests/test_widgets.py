"""Every public widget factory in :mod:`llmsizing.widgets`, discovered from ``__all__`` (names ending in
``_widget``): it builds with no arguments, and every control, pushed to its extremes (sliders: min then max;
selections: first then last option; checkboxes: toggled), either changes the rendered output or shows a
clear error message (a ValueError/TypeError message, never a traceback). Restoring the default brings the
default view back.
"""

from __future__ import annotations

import functools
import html

import ipywidgets as W
import pytest

import llmsizing.widgets as widgets
from llmsizing import Model, get_model
from llmsizing.widgets import Dashboard

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def factory_names() -> list[str]:
    return sorted(n for n in widgets.__all__ if n.endswith("_widget"))


def find_dashboards(w) -> list[Dashboard]:
    """The Dashboards in a widget tree (a factory may return one, or a container of several)."""
    if isinstance(w, Dashboard):
        return [w]
    out = []
    for child in getattr(w, "children", ()):
        out += find_dashboards(child)
    return out


def extremes(ctrl) -> list[tuple[str, object]]:
    """(label, value) pairs to try for one control; empty if the control type has no natural extremes."""
    if isinstance(ctrl, W.SelectMultiple):
        opts = ctrl._options_values
        return [("first", (opts[0],)), ("last", (opts[-1],))]
    if isinstance(ctrl.value, bool):
        return [("toggled", not ctrl.value)]
    if hasattr(ctrl, "_options_values"):           # Dropdown, SelectionSlider, ToggleButtons, RadioButtons...
        opts = ctrl._options_values
        return [("first", opts[0]), ("last", opts[-1])]
    if isinstance(ctrl, W.FloatLogSlider):
        return [("min", ctrl.base ** ctrl.min), ("max", ctrl.base ** ctrl.max)]
    if hasattr(ctrl, "min") and hasattr(ctrl, "max"):
        if isinstance(ctrl.value, tuple):          # range sliders
            lo, hi = ctrl.value
            return [("min", (ctrl.min, hi)), ("max", (lo, ctrl.max))]
        return [("min", ctrl.min), ("max", ctrl.max)]
    return []


@functools.cache
def built(name: str):
    """One instance per factory, shared by the tests below (each test restores what it changes)."""
    w = getattr(widgets, name)()
    return w, find_dashboards(w)


def control_cases() -> list[tuple[str, int, str]]:
    cases = []
    for name in factory_names():
        try:
            _, boards = built(name)
        except Exception:      # reported by test_factory_builds_with_defaults, not as a collection error
            continue
        for i, board in enumerate(boards):
            cases += [(name, i, key) for key in board.controls]
    return cases


def png(board: Dashboard) -> bytes:
    return bytes(board.image.value)        # ipywidgets stores the image as a memoryview


def snapshot(board: Dashboard) -> tuple[bytes, str]:
    return png(board), board.summary.value


def assert_clean_error(board: Dashboard, where: str) -> None:
    msg = board.error.value
    text = html.unescape(msg)
    assert "Traceback" not in text and 'File "' not in text, f"{where}: traceback shown: {text}"
    assert len(text.strip()) > 10, f"{where}: empty error message {msg!r}"


# ----------------------------------------------------------------------------- discovery and defaults
def test_factories_are_discovered():
    names = factory_names()
    assert "parameter_counts_widget" in names
    for n in names:
        assert callable(getattr(widgets, n)), n


@pytest.mark.parametrize("name", factory_names())
def test_factory_builds_with_defaults(name):
    w, boards = built(name)
    assert isinstance(w, W.Widget)
    assert boards, f"{name} contains no Dashboard"
    for board in boards:
        assert board.error.value == "", f"{name}: default view shows an error: {board.error.value}"
        assert png(board).startswith(PNG_MAGIC), f"{name}: default view has no PNG"
        assert board.summary.value.strip(), f"{name}: default view has no summary"
        assert board.controls, f"{name}: no controls"
        for key, ctrl in board.controls.items():
            assert isinstance(ctrl, W.ValueWidget), (name, key)


# ----------------------------------------------------------------------------- every control, both extremes
@pytest.mark.parametrize("name,board_index,key", control_cases(),
                         ids=[f"{n}-{b}-{k}" for n, b, k in control_cases()])
def test_control_extremes(name, board_index, key):
    _, boards = built(name)
    board = boards[board_index]
    ctrl = board.controls[key]
    default_value = ctrl.value
    default_view = snapshot(board)
    tries = [(label, v) for label, v in extremes(ctrl) if v != default_value]
    if not extremes(ctrl):
        pytest.skip(f"{type(ctrl).__name__} has no extremes to try")
    try:
        for label, value in tries:
            ctrl.value = value                       # the observer redraws; any other exception fails here
            where = f"{name}.{key} = {value!r} ({label})"
            if board.error.value:
                assert_clean_error(board, where)
                assert snapshot(board) == (b"", ""), f"{where}: a stale figure is shown next to the error"
            else:
                assert snapshot(board) != default_view, f"{where}: the output did not change"
                assert png(board).startswith(PNG_MAGIC), where
    finally:
        ctrl.value = default_value
    assert board.error.value == "", f"{name}.{key}: error persists after restoring the default"
    assert board.summary.value == default_view[1], f"{name}.{key}: restoring the default changed the summary"


# ----------------------------------------------------------------------------- errors reach the reader
def test_invalid_combination_shows_the_library_message():
    from llmsizing import Parallel, training_memory

    board = widgets.parallel_explorer_widget()
    with pytest.raises(ValueError) as e:           # sequence parallelism splits along a tensor-parallel group
        training_memory(board.controls["model"].value, batch=1, seq=4096, parallel=Parallel(tp=1, sp=True))
    before = snapshot(board)
    board.controls["sp"].value = True              # tp is 1 by default
    assert "sp=True" in board.error.value
    assert html.escape(str(e.value)) in board.error.value
    assert_clean_error(board, "sp=True with tp=1")
    assert snapshot(board) == (b"", "")            # the stale view is cleared: it is not the answer
    board.controls["sp"].value = False             # a valid value clears the error
    assert board.error.value == ""
    assert snapshot(board) == before


def test_dashboard_only_swallows_value_and_type_errors():
    calls = []

    def render(x):
        calls.append(x)
        if x == 1:
            raise ValueError("x must be even, got 1")
        if x == 2:
            raise TypeError("x must be an integer")
        if x == 3:
            raise RuntimeError("a bug")
        from llmsizing.charts import render_parameter_counts
        return render_parameter_counts("gpt2")

    ctrl = W.IntSlider(value=0, min=0, max=3)
    board = Dashboard(render, {"x": ctrl})
    assert board.error.value == "" and png(board).startswith(PNG_MAGIC)
    ctrl.value = 1
    assert "x must be even, got 1" in board.error.value
    ctrl.value = 2
    assert "x must be an integer" in board.error.value
    with pytest.raises(RuntimeError):
        ctrl.value = 3
    assert calls == [0, 1, 2, 3]
