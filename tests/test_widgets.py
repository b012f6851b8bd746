"""Every public widget factory in :mod:`llmsizing.widgets`, discovered from ``__all__`` (names ending in
``_widget``): it builds with no arguments, and every control, pushed to its extremes (sliders: min then max;
selections: first then last option; checkboxes: toggled), either changes the rendered output or shows a
clear error message (a ValueError/TypeError message, never a traceback). Restoring the default brings the
default view back.
"""

from __future__ import annotations

import dataclasses
import functools
import html

import ipywidgets as W
import pytest
from conftest import controls_of, undrawn, widget

import llmsizing.widgets as widgets
from llmsizing import Model, get_model, list_models
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
    if isinstance(ctrl.value, bool) and not hasattr(ctrl, "_options_values"):      # (a checkbox; a selection
        return [("toggled", not ctrl.value)]                  # whose value is a bool has its options: ui29)
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
    """One instance per factory, shared by the tests below and tests/test_widget_layout.py (each test restores
    what it changes; conftest.widget)."""
    w = widget(name)
    return w, find_dashboards(w)


def control_cases() -> list[tuple[str, int, str]]:
    """(factory, dashboard, control) for every control, listed from the undrawn copies (conftest.controls_of)."""
    cases = []
    for name in factory_names():
        try:
            boards = find_dashboards(controls_of(name))
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


def test_explorer_switches_megatrons_backward_tp_overlap():
    """Chapter 8's explorer ticks Megatron-LM's default backward TP overlap (small47): off by default, as
    step_time prices a step with no stack named (frameworks.TP_BACKWARD_OVERLAP["unknown"] is False). Ticked
    at tp = 8 (Llama-3-8B on one node, SP), the same TP traffic is less exposed and the step shorter by
    exactly what it hides, as step_time(..., tp_backward_overlap=True) says; a move costs at most 50 ms CPU."""
    import re
    import time

    from llmsizing import Parallel
    from llmsizing.frameworks import TP_BACKWARD_OVERLAP
    from llmsizing.layouts import step_time

    board = widgets.parallel_explorer_widget()
    c = board.controls
    assert c["tp_backward_overlap"].value is False is TP_BACKWARD_OVERLAP["unknown"]
    c["dp"].value, c["tp"].value = 1, 8
    c["sp"].value = True

    def exposed_and_step():
        text = html.unescape(board.summary.value)
        tp = re.search(r"tp (\d+\.\d+) of (\d+\.\d+) s", text)
        return float(tp[1]), float(tp[2]), float(re.search(r"step time (\d+\.\d+) s", text)[1]), text

    e_off, all_off, s_off, _ = exposed_and_step()
    t0 = time.process_time()
    c["tp_backward_overlap"].value = True
    cpu_s = time.process_time() - t0
    e_on, all_on, s_on, text = exposed_and_step()
    assert "(backward TP overlapped)" in text and not board.error.value
    assert all_on == all_off and e_on < e_off == all_off            # all exposed before, part hidden after
    assert s_off - s_on == pytest.approx(e_off - e_on, abs=0.0015)  # (three decimals each)
    st = step_time("llama-3-8b", "H100 SXM", Parallel(tp=8, sp=True), batch=1, seq=4096, grad_accum=8,
                   recompute="selective", kernel_efficiency=c["kernel_efficiency"].value,
                   tp_backward_overlap=True)
    assert f"step time {st.step_s:.3f} s" in text
    assert cpu_s < 0.05, f"the checkbox's move took {cpu_s * 1e3:.0f} ms CPU"
    # at tp = 1 it has nothing to hide, and says so
    c["sp"].value, c["tp"].value = False, 1
    assert "no tensor-parallel traffic at tp=1" in html.unescape(board.summary.value)


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


# ----------------------------------------------------------------------------- issue 25: every move shows
def every_other_value(ctrl) -> list:
    """Every value a reader can move ``ctrl`` to from where it is: each other option, the toggled checkbox, one
    more (or one fewer) GPU in a multi-select, and a slider's neighbours and ends."""
    v = ctrl.value
    if isinstance(ctrl, W.SelectMultiple):
        opts = ctrl._options_values
        extra = next((o for o in opts if o not in v), None)
        return [tuple(v) + (extra,)] if extra is not None else [tuple(v[:-1])]
    if isinstance(v, bool) and not hasattr(ctrl, "_options_values"):   # (a checkbox; a drop-down: each)
        return [not v]
    if hasattr(ctrl, "_options_values"):
        return [o for o in ctrl._options_values if o != v]
    step = getattr(ctrl, "step", 1) or 1
    return [x for x in dict.fromkeys((v - step, v + step, ctrl.min, ctrl.max)) if ctrl.min <= x <= ctrl.max and x != v]


def config_signature(model: Model) -> tuple:
    """What sets a model's code path, read from its config fields (never its name): every flag, string and
    optional field as it is, every count as zero or not, every tuple as empty or not, and the attention's
    kind (MHA, GQA, MQA). Sizes are left out: they move the numbers, not the path."""
    out = []
    for f in dataclasses.fields(model):
        v = getattr(model, f.name)
        if f.name == "name":
            continue
        if v is None or isinstance(v, (bool, str)):
            out.append(v)
        elif isinstance(v, int):
            out.append(v > 0)
        else:
            out.append((type(v).__name__, bool(v)))
    kv = model.kv_heads
    return (*out, "mha" if kv == model.heads else "mqa" if kv == 1 else "gqa")


def model_moves(ctrl) -> list:
    """A model drop-down's moves: the first model of each configuration (:func:`config_signature`) in the
    drop-down's order, and its first and last option. Every catalogue model in every widget was 40 s of CPU,
    a sixth of the suite (testfast34); the 65 models have 22 configurations, and each model's numbers are
    checked one by one by the library's own tests (test_catalog, test_model, test_fuzz)."""
    opts = [o for o in ctrl._options_values if o != ctrl.value]
    if not all(isinstance(o, str) and o in CATALOGUE for o in opts):
        return opts
    first = {}
    for o in opts:
        first.setdefault(config_signature(get_model(o)), o)
    keep = set(first.values()) | {opts[0], opts[-1]}
    return [o for o in opts if o in keep]


CATALOGUE = frozenset(list_models())


@pytest.mark.parametrize("name,board_index,key", control_cases(),
                         ids=[f"{n}-{b}-{k}" for n, b, k in control_cases()])
def test_every_move_from_the_default_changes_the_figure_or_says_why(name, board_index, key):
    """Issue 25: "moving max GPUs from 4096 to 16384 changes nothing in the figure, only the summary". From the
    default view, every value a control offers changes the figure (the PNG), or the widget shows the library's
    message saying why it refuses it. (A model drop-down offers the first model of each configuration and
    its ends: :func:`model_moves`.) A limit that changes nothing must say so in the figure, which is then a
    change (the planner's front that ends below the GPU limit, the cost grid that does not depend on the GPU
    count, async TP with nothing to hide, a GPU beyond the axis).

    The same moves try each control's extremes (sliders: min then max; selections: first then last option, a
    multi-select's first and last alone; checkboxes: toggled): each draws a PNG that differs from the default
    view (its figure or its summary), or shows a clean error (a ValueError/TypeError message, never a
    traceback) with no stale figure next to it. Restoring the default brings the default view back, figure and
    summary.

    Each move starts from the default: the control goes back to its default in between, through its observers
    (so dependent controls follow), but that default view is not drawn again each time (:func:`undrawn`: the
    dashboard draws from the controls' values alone, and tests/test_widget_layout.py checks that a redraw
    equals a fresh render); it is drawn, and compared, once at the end."""
    _, boards = built(name)
    board = boards[board_index]
    ctrl = board.controls[key]
    default_value, default_view = ctrl.value, snapshot(board)
    default_png = default_view[0]
    moves = model_moves(ctrl) if key == "model" else every_other_value(ctrl)
    # the extremes not among those moves (a multi-select's single first or last option): a change of figure or
    # summary is asked of them, as of every extreme
    extreme_only = [v for _, v in extremes(ctrl) if v != default_value and v not in moves]
    same = []
    try:
        for value in moves + extreme_only:
            ctrl.value = value
            where = f"{name}.{key} = {value!r}"
            if board.error.value:
                assert_clean_error(board, where)
                assert snapshot(board) == (b"", ""), f"{where}: a stale figure is shown next to the error"
            else:
                assert png(board).startswith(PNG_MAGIC), where
                if value in moves:
                    if png(board) == default_png:
                        same.append(value)
                else:
                    assert snapshot(board) != default_view, f"{where}: the output did not change"
            with undrawn(board):
                ctrl.value = default_value
    finally:
        ctrl.value = default_value
        board.update()                               # the default view, drawn again with the real render
    assert not same, f"{name}.{key}: moving from {default_value!r} to {same} leaves the figure as it was"
    assert board.error.value == "", f"{name}.{key}: error persists after restoring the default"
    assert snapshot(board) == default_view, f"{name}.{key}: restoring the default changed the view"


def test_planner_says_where_the_front_ends_when_the_gpu_limit_is_above_it():
    """Chapter 12's widget at its defaults (Llama-3-70B, global batch 512 sequences of 8,192): a plan has
    dp x pp <= 512 (grad_accum >= pp, micro-batch >= 1) and tp <= 8 (one node's NVLink domain), so no plan
    uses more than 8 x 512 = 4,096 GPUs. With max GPUs at 4,096 the figure has no note; at 8,192 and 16,384
    it says that the front ends at 4,096 GPUs and that more does not help, naming the limit (so 8,192 and
    16,384 draw different figures)."""
    board = widgets.planner_widget()
    c = board.controls
    assert (c["global_batch"].value, c["max_gpus"].value) == (512, 4096)

    def texts():
        return [t.get_text() for ax in board.figure.axes for t in ax.texts]

    assert not any("front ends" in t for t in texts())
    pngs = {}
    for limit in (8192, 16384):
        c["max_gpus"].value = limit
        note = " ".join(t for t in texts() if "front ends" in t).replace("\n", " ")
        assert f"the front ends at 4,096 GPUs (limit {limit:,})" in note, note
        assert "more does not help at this global batch" in note and "more than 4,096" in note, note
        assert f"note: the front ends at 4,096 GPUs (limit {limit:,})" in board.summary.value
        pngs[limit] = png(board)
    assert pngs[8192] != pngs[16384]
    c["max_gpus"].value = 4096


def test_planner_says_when_a_budget_drops_no_plan():
    """The dearest plan at the defaults costs less than 10 million USD (the planner's own table, computed here):
    that budget drops nothing, and the figure says so; a budget below the dearest plan drops plans (no note)."""
    from llmsizing.planner import plan

    board = widgets.planner_widget()
    v = board.values()
    df = plan(v["model"], tokens=v["tokens"], gpus=tuple(v["gpus"]), seq=v["seq"], global_batch=v["global_batch"],
              max_gpus=v["max_gpus"])
    assert df["cost_usd"].max() < 1e7
    board.controls["budget"].value = 1e7
    assert any("every plan is within it" in t.get_text() for t in board.figure.axes[0].texts)
    board.controls["budget"].value = 5e6 if df["cost_usd"].max() > 5e6 else 2e6
    assert not any("every plan is within it" in t.get_text() for t in board.figure.axes[0].texts)
    board.controls["budget"].value = 0.0


def test_fleet_widget_keeps_its_plans_per_setting():
    """The fleet widget keeps each of its three plans per setting (issue 38): moving the percentile searches
    only the two percentile plans again (the mean plan, at the 50th percentile, is the same), going back to a
    setting searches nothing, and what it shows is what render_fleet computes afresh for that setting."""
    from unittest import mock

    from llmsizing import charts, serve

    with mock.patch.object(serve, "replicas_for", wraps=serve.replicas_for) as calls:
        b = widgets.fleet_widget()
        assert calls.call_count == 3                     # mean, percentile co-located, disaggregated
        b.controls["percentile"].value = 99
        assert calls.call_count == 3 + 2
        b.controls["percentile"].value = 95
        assert calls.call_count == 3 + 2
    assert b.error.value == ""
    fresh = charts.render_fleet(**b.values())
    assert b.summary.value == widgets.dashboard.summary_html(fresh.summary)


# ----------------------------------------------------------------------------- issue 38: a sign of work
@pytest.mark.parametrize("name,key", [("planner_widget", "seq"), ("long_context_widget", "seq")])
def test_a_slow_move_shows_the_busy_sign_before_the_search_and_the_new_figure_after(name, key):
    """Issue 38: chapter 17's widget took 0.4-1 s per new setting "with no sign that work is happening". A
    move of the two widgets that search (plan()) marks the dashboard busy (``BUSY_CLASS``: a progress cursor
    and a bar at once; the faded figure, the "working out this setting" note and the bar's motion after
    ``BUSY_DELAY_MS``) before the render starts, replaces the figure and the summary after it, and only then
    takes the mark away: in that order, as the page receives the changes."""
    from llmsizing.widgets import BUSY_CLASS, BUSY_DELAY_MS
    from llmsizing.widgets.dashboard import _BUSY_CSS

    board = built(name)[1][0]
    board._kept.clear()        # a new setting (an earlier test may have drawn the target: its answer is kept)
    ctrl = board.controls[key]
    default, target = ctrl.value, next(v for v in ctrl._options_values if v != ctrl.value)
    events, real = [], board.render

    def render(**kw):
        events.append(("render starts, busy", BUSY_CLASS in board.image._dom_classes))
        out = real(**kw)
        events.append(("render ends, figure unchanged", bytes(board.image.value) == before))
        return out

    def on_class(change):
        events.append(("busy", BUSY_CLASS in change["new"]))

    def on_image(change):
        events.append(("new figure", bool(change["new"])))

    before = bytes(board.image.value)
    board.image.observe(on_class, names="_dom_classes")
    board.image.observe(on_image, names="value")
    board.render = render
    try:
        ctrl.value = target
    finally:
        board.image.unobserve(on_class, names="_dom_classes")
        board.image.unobserve(on_image, names="value")
        board.render = real
    assert board.error.value == "", board.error.value
    assert events == [("busy", True), ("render starts, busy", True), ("render ends, figure unchanged", True),
                      ("new figure", True), ("busy", False)], events
    assert bytes(board.image.value) != before and BUSY_CLASS not in board.image._dom_classes
    # what the page shows while the mark is on: the note sits over the figure, shown after the delay (the
    # mark is on the image, a child of the figure's side beside the note; lat37)
    assert board.busy_note in board.children[1].children and board.image in board.children[1].children
    assert "working out this setting" in board.busy_note.value
    shown = (f".llmsizing-figure-side:has(> img.{BUSY_CLASS})) > .llmsizing-busy-note {{animation: "
             f"llmsizing-busy-show 0s linear {BUSY_DELAY_MS}ms")
    assert shown in _BUSY_CSS
    assert f".llmsizing-dashboard:has(img.{BUSY_CLASS}) {{cursor: progress}}" in _BUSY_CSS
    # the bar moves only once the delay is over (a quick redraw pays for no animation frames)
    assert f"animation: llmsizing-busy-bar 0.6s linear {BUSY_DELAY_MS}ms infinite" in _BUSY_CSS
    # and it moves by a transform, which the browser's compositor animates without repainting the page at each
    # frame (a background-position did, on the main thread, while the kernel worked: redraw38)
    assert "@keyframes llmsizing-busy-bar {to {transform: translateX(48px)}}" in _BUSY_CSS
    assert "background-position" not in _BUSY_CSS
    ctrl.value = default


def _toy_board(answer_of, *, prepare=None):
    """A dashboard over one slider ``n`` (1-5) whose render gives ``answer_of(n)`` as a 1x1 PNG of that grey
    and the summary "answer <that>", keeping 8 answers; and the list its page messages go to, in order:
    ("busy", on?), ("figure", grey), ("summary", text)."""
    from types import SimpleNamespace

    import numpy as np

    def render(n):
        a = answer_of(n)
        png = widgets.encode_png(np.full((1, 1, 4), (a, a, a, 255), dtype=np.uint8))
        return SimpleNamespace(summary=f"answer {a}", figure=None, png=lambda compress_level: png)

    slider = W.IntSlider(value=1, min=1, max=5)
    board = Dashboard(render, {"n": slider}, keep=8, prepare=prepare)
    seen = []
    board.image.observe(lambda c: seen.append(("busy", widgets.BUSY_CLASS in c["new"])), names="_dom_classes")
    board.image.observe(lambda c: seen.append(("figure", bytes(c["new"])[-20:])), names="value")
    board.summary.observe(lambda c: seen.append(("summary", c["new"])), names="value")
    return board, slider, seen


def test_a_move_back_to_a_kept_answer_carries_no_busy_mark_and_the_summary_comes_last():
    """page35: a new setting's messages reach the page in the order busy mark on, figure, busy mark off,
    summary (the figure is painted once the mark is off, without waiting for the summary under it); a move
    back to a kept answer that differs from the one shown sends only its figure and its summary (no work to
    show: no mark on and off); a kept answer equal to the one shown still sends the mark on and off (the
    page's only sign that the move was answered); and with ``prepare`` (which may search) the mark goes on
    for a kept answer too. Expected orders from the rule above, not from a run."""
    board, slider, seen = _toy_board(lambda n: 40 * n)        # every setting its own answer
    first = bytes(board.image.value)[-20:]
    slider.value = 2                                           # new: drawn
    fig2 = bytes(board.image.value)[-20:]
    assert fig2 != first
    assert [k for k, _ in seen] == ["busy", "figure", "busy", "summary"], seen
    assert [v for k, v in seen if k == "busy"] == [True, False]
    assert seen[-1] == ("summary", widgets.summary_html("answer 80"))
    del seen[:]
    slider.value = 1                                           # kept (drawn at the build), not the one shown
    assert seen == [("figure", first), ("summary", widgets.summary_html("answer 40"))], seen
    del seen[:]
    slider.value = 2                                           # kept again
    assert seen == [("figure", fig2), ("summary", widgets.summary_html("answer 80"))], seen

    board, slider, seen = _toy_board(lambda n: 40 * (n // 2))  # 2 and 3 give the same answer
    slider.value = 2
    slider.value = 3                                           # new, the same answer: only the mark
    del seen[:]
    slider.value = 2                                           # kept, equal to the one shown
    assert seen == [("busy", True), ("busy", False)], seen

    prepared = []
    board, slider, seen = _toy_board(lambda n: 40 * n, prepare=lambda n: prepared.append(n))
    slider.value = 2
    del seen[:]
    slider.value = 1                                           # kept, but prepare runs first: the mark on
    assert [k for k, _ in seen] == ["busy", "figure", "busy", "summary"], seen
    assert prepared == [1, 2, 1], prepared


def test_the_busy_mark_comes_off_in_the_new_figures_own_message():
    """lat37: the page handled the mark's end as a message of its own, after the figure's (7-20 ms later in
    chapter 17 in Voila, a frame drawn between), and painted the new figure only then. The image carries the
    mark, and the message that brings the new figure takes it off. The page's messages of the image for a new
    setting, by the rule: the mark on (alone), then the figure and the mark off together; for a refused one,
    the mark off with the emptied image; for a kept answer, the figure alone (no mark)."""
    from llmsizing.widgets import BUSY_CLASS

    board, slider, seen = _toy_board(lambda n: 40 * n)
    sent = []
    board.image._send = lambda msg, buffers=None: sent.append(
        (sorted(msg["state"]), [p[0] for p in msg.get("buffer_paths", [])], msg["state"].get("_dom_classes")))
    slider.value = 2                                           # new: drawn
    assert sent == [(["_dom_classes"], [], (BUSY_CLASS,)), (["_dom_classes"], ["value"], ())], sent
    del sent[:]
    slider.value = 1                                           # kept: no mark, the figure alone
    assert sent == [([], ["value"], None)], sent
    assert BUSY_CLASS not in board._dom_classes                # (the dashboard itself is never marked)


def test_the_busy_mark_goes_when_the_library_refuses_or_fails():
    """The busy mark comes off after a refused setting (its message shown) and after a bug (re-raised)."""
    from llmsizing.widgets import BUSY_CLASS

    seen = []

    def render(x):
        if x:                                            # (x = 0: the first draw, as the board is built)
            seen.append(BUSY_CLASS in board.image._dom_classes)
        if x == 1:
            raise ValueError("x must be even, got 1")
        if x == 2:
            raise RuntimeError("a bug")
        from llmsizing.charts import render_parameter_counts
        return render_parameter_counts("gpt2")

    ctrl = W.IntSlider(value=0, min=0, max=2)
    board = Dashboard(render, {"x": ctrl})
    ctrl.value = 1
    assert "x must be even" in board.error.value and BUSY_CLASS not in board.image._dom_classes
    with pytest.raises(RuntimeError):
        ctrl.value = 2
    assert BUSY_CLASS not in board.image._dom_classes and seen == [True, True]


def test_the_page_gets_the_figure_as_a_data_url_and_python_keeps_the_png():
    """page35: the dashboard's image (``PageImage``) sends the page ``format`` "url" and, as ``value``, the
    bytes of a data: URL (RFC 2397: ``data:image/png;base64,`` then the PNG in base64), which ipywidgets 8's
    ImageView sets as the img's src as they are; in Python it is an Image of PNG bytes as before. The decoded
    URL must give back the very bytes; an empty image stays empty (a refused setting: no src to load)."""
    import base64

    board = widgets.long_context_widget(speculate=False)
    png = bytes(board.image.value)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and board.image.format == "png"
    state = board.image.get_state()
    assert state["format"] == "url"
    url = bytes(state["value"]).decode("ascii")
    head, _, body = url.partition(",")
    assert head == "data:image/png;base64"
    assert base64.b64decode(body, validate=True) == png
    assert isinstance(board.image, W.Image)
    board.image.value = b""
    assert bytes(board.image.get_state()["value"]) == b""
