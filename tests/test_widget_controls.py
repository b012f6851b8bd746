"""Issue 12, "Controls": the widgets' controls offer only what works and say how to use them.

* chapter 1's heads and KV-heads sliders hold only valid values (the divisors :class:`Model` requires), for
  every catalogued model and every hidden size the hidden slider offers, and re-offer them as the other
  controls move, never showing an error;
* the GPU multi-selects show every GPU (so the default picks are visible without scrolling) and say how to
  pick several;
* chapter 2's "GPUs per line" stops before the bars become slivers.
"""

from __future__ import annotations

import math

import ipywidgets as W
import pytest
from traitlets import TraitError

import llmsizing.widgets as widgets
from llmsizing import get_model, list_gpus, list_models
from llmsizing.catalog import get_gpu
from llmsizing.memory import model_states
from llmsizing.widgets.controls import GPU_SELECT_MAX_ROWS
from llmsizing.widgets.time_money import PLANNER_GPU_ROWS

GiB = 2**30


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def renders(board) -> list[dict]:
    """Replace the board's render with a recorder (no figure): each redraw appends the values it got."""
    calls = []
    board.render = lambda **kw: calls.append(kw) or widgets._render_parameters(**kw)
    return calls


# ----------------------------------------------------------------------------- chapter 1: heads, KV heads
@pytest.mark.parametrize("name", list_models(moe=False))      # the widgets list the dense models (issue 24)
def test_heads_sliders_offer_exactly_the_valid_values(name):
    m = get_model(name)
    board = widgets.parameter_counts_widget(name)
    heads, kv = board.controls["heads"], board.controls["kv_heads"]
    assert isinstance(heads, W.SelectionSlider) and isinstance(kv, W.SelectionSlider)
    assert list(heads.options) == [d for d in divisors(m.hidden) if d <= 256]
    assert list(kv.options) == divisors(m.heads)
    assert (heads.value, kv.value) == (m.heads, m.kv_heads)
    assert board.error.value == ""


def test_every_hidden_size_keeps_heads_and_kv_heads_valid():
    board = widgets.parameter_counts_widget("qwen2-7b")       # 28 heads, 4 KV heads: few hidden sizes fit 28
    board.update = lambda change=None: None                  # no figure: only the controls' logic
    c = board.controls
    seen_heads = set()
    for hidden in range(c["hidden"].min, c["hidden"].max + 1, c["hidden"].step):
        c["hidden"].value = hidden
        h, g = c["heads"].value, c["kv_heads"].value
        assert list(c["heads"].options) == [d for d in divisors(hidden) if d <= 256], hidden
        assert list(c["kv_heads"].options) == divisors(h), hidden
        get_model("qwen2-7b").with_(hidden=hidden, heads=h, kv_heads=g)      # the library accepts it
        seen_heads.add(h)
        # the nearest valid value to the reader's 28 heads (ties to the smaller)
        assert h == min((d for d in divisors(hidden) if d <= 256), key=lambda d: (abs(d - 28), d)), hidden
    assert 28 in seen_heads and len(seen_heads) > 3
    c["hidden"].value = 3584                                # back to qwen2-7b's own size: 28 and 4 return
    assert (c["heads"].value, c["kv_heads"].value) == (28, 4)


def test_every_heads_and_kv_position_renders_without_error():
    board = widgets.parameter_counts_widget("llama-3-8b")
    board.keep = 0              # no kept answers: every move is drawn, and the redraws are counted
    c = board.controls
    calls = renders(board)
    for h in c["heads"].options:
        c["heads"].value = h
        assert board.error.value == "", (h, board.error.value)
        assert list(c["kv_heads"].options) == divisors(h)
        assert c["kv_heads"].value in divisors(h)
    c["heads"].value = 32
    assert c["kv_heads"].value == 8                         # the chosen KV heads come back with 32 heads
    for g in c["kv_heads"].options:
        c["kv_heads"].value = g
        assert board.error.value == ""
        assert (f"kv_heads={g}" in board.summary.value) == (g != 8), g      # 8 is llama-3-8b's own
    assert len(calls) == len(c["heads"].options) + 1 + len(c["kv_heads"].options)   # one redraw per move


def test_invalid_head_counts_are_not_offered():
    board = widgets.parameter_counts_widget("llama-2-7b")
    for key, bad in (("heads", 5), ("heads", 3), ("kv_heads", 5), ("kv_heads", 64)):
        with pytest.raises(TraitError):
            board.controls[key].value = bad
    assert board.error.value == ""


def test_preset_resets_heads_options_and_one_redraw():
    board = widgets.parameter_counts_widget("llama-2-7b")
    calls = renders(board)
    board.controls["heads"].value = 64
    board.controls["model"].value = "qwen2-7b"
    c = board.controls
    assert (c["hidden"].value, c["heads"].value, c["kv_heads"].value) == (3584, 28, 4)
    assert 7 in c["heads"].options and list(c["kv_heads"].options) == [1, 2, 4, 7, 14, 28]
    assert len(calls) == 2 and board.error.value == ""
    assert "qwen2-7b: " in board.summary.value and " with " not in board.summary.value   # the preset as is


# ----------------------------------------------------------------------------- GPU multi-selects
def gpu_selects():
    out = []
    for name in ("model_states_widget", "inference_memory_widget", "planner_widget"):
        board = getattr(widgets, name)()
        out += [(name, w) for w in board.controls.values() if isinstance(w, W.SelectMultiple)]
    return out


def test_gpu_multiselects_show_every_gpu_and_say_how_to_pick_several():
    selects = gpu_selects()
    assert len(selects) == 3
    for name, sel in selects:
        assert list(sel.options) == list_gpus(), name
        # every GPU shows, or as many as GPU_SELECT_MAX_ROWS and the rest scroll, never a default pick (the
        # planner's, PLANNER_GPU_ROWS: its grad buffer control took the column past the height budget, ui29)
        most = PLANNER_GPU_ROWS if name == "planner_widget" else GPU_SELECT_MAX_ROWS
        assert sel.rows >= min(len(sel.options), most), f"{name}: only {sel.rows} rows"
        assert sel.value, name
        assert all(list(sel.options).index(v) < sel.rows for v in sel.value), f"{name}: a default pick is hidden"
        assert "Ctrl" in sel.tooltip and "several" in sel.tooltip, name
    for name in {n for n, _ in selects}:
        column = getattr(widgets, name)().children[0].children
        found = [i for i, c in enumerate(column) if isinstance(c, W.SelectMultiple)]
        assert found, f"{name}: no multi-select in the controls' column"
        for i in found:                               # the line right under it says how to pick several
            hint, label = column[i + 1], column[i].description
            assert isinstance(hint, W.HTML) and "Ctrl" in hint.value and "several" in hint.value, name
            assert label and "<" not in label, f"{name}: the label is one line of text, got {label!r}"
            assert_hint_wraps_tight(hint, name)


def assert_hint_wraps_tight(hint, name):
    """part28: the GPU picker's hint wrapped onto two lines a control's row (28 px) apart, a line's gap
    between them, because ipywidgets 8 gives an HTML widget's content ``line-height:
    var(--jp-widgets-inline-height)``. The hint's text sits in a block of its own whose line height is a
    multiple of its own font size (at most 1.5: a row's height would be 28 / 10.8 = 2.6 at JupyterLab's
    13 px UI font made smaller), and the hint's box stays within the controls' column."""
    import re

    from llmsizing.widgets.dashboard import CONTROLS_WIDTH_PX

    block = re.fullmatch(r"<div [^>]*style='([^']*)'>([^<]*)</div>", hint.value)
    assert block, f"{name}: the hint is not one block of text: {hint.value!r}"
    style = dict(part.split(":", 1) for part in block.group(1).split(";") if ":" in part)
    style = {k.strip(): v.strip() for k, v in style.items()}
    assert 1.0 <= float(style["line-height"]) <= 1.5, f"{name}: the hint's lines are {style} apart"
    assert style.get("font-size") == "smaller", name
    px = lambda v: int(v.removesuffix("px"))                                              # noqa: E731
    left = px(hint.layout.margin.split()[3])
    assert 0 < px(hint.layout.width) and left + px(hint.layout.width) <= CONTROLS_WIDTH_PX, (
        f"{name}: the hint ({hint.layout.margin}, {hint.layout.width}) is wider than the column")


# ----------------------------------------------------------------------------- "GPUs per line"
def widest_bar_gib(model, precision="bf16-mixed", optimizer="adamw") -> float:
    pairs = {(precision, optimizer), *widgets._WIDGET_STATES_COMPARE}
    return max(model_states(model, precision=p, optimizer=o).total_bytes for p, o in pairs) / GiB


@pytest.mark.parametrize("gpus", [("A100 40GB", "H100 SXM", "H200", "B200"), ("B200",), ("A10", "MI300X"),
                                  tuple(list_gpus())])
@pytest.mark.parametrize("model", list_models(moe=False))     # training memory refuses MoE (issue 24)
def test_gpus_per_line_cap_rule(model, gpus):
    cap = widgets.gpus_per_line_cap(model, "bf16-mixed", "adamw", gpus)
    widest = widest_bar_gib(model)
    mems = [get_gpu(g).memory_gib for g in gpus]
    # every chosen GPU type can hold every bar at the cap ...
    assert cap * min(mems) >= widest or cap == 1 and min(mems) >= widest
    # ... and beyond the cap, the widest bar would fill less than a quarter of the axis, unless more GPUs
    # were still needed for that
    assert (cap + 1) * max(mems) * 0.25 > widest or math.ceil(widest / min(mems)) >= cap + 1 or cap == 1
    # the bars at the cap: the axis spans the farthest line, count x the largest memory. A quarter of it, or
    # (when the smallest GPU needs more lines to hold the bar) about smallest / largest memory: 1/12.8 for an
    # A10 next to an MI355X, the catalogue's widest gap, less the rounding up of the lines (a bar 1.4 smallest
    # GPUs wide needs 2 lines: 1.4 / 2 of that ratio). The old fixed maximum of 64 left 1-2 %.
    share = widest / max(widest, cap * max(mems))
    x = widest / min(mems)                  # lines of the smallest GPU the bar needs; the cap rounds it up
    assert share >= min(0.25, x / math.ceil(x) * min(mems) / max(mems)) - 1e-12 or cap == 1, \
        (model, gpus, cap, share)
    every = [get_gpu(g).memory_gib for g in list_gpus()]
    x_all = widest / min(every)
    assert share >= x_all / math.ceil(x_all) * min(every) / max(every) - 1e-12 or cap == 1, (model, gpus, cap, share)


def test_gpus_per_line_slider_follows_the_cap_in_the_widget():
    board = widgets.model_states_widget()
    c = board.controls
    count = c["count"]
    assert count.max == widgets.gpus_per_line_cap(c["model"].value, c["precision"].value,
                                                  c["optimizer"].value, c["gpus"].value)
    assert count.max < 64                                   # llama-3-8b: no longer 64 x B200 next to 120 GiB
    count.value = count.max
    ax = board.render(**board.values()).figure.axes[0]
    bar_right = max(p.vertices[:, 0].max() for c in ax.collections for p in c.get_paths())   # (stacked_bars)
    assert bar_right / ax.get_xlim()[1] > 0.15             # the widest bar, at the cap, is no sliver
    chosen = count.value
    c["model"].value = "llama-3.1-405b"                     # a bigger model raises the cap; the count is kept
    assert count.max > chosen and count.value == chosen and board.error.value == ""
    count.value = 100
    c["model"].value = "llama-3-8b"                         # the cap falls: the count follows it down ...
    assert count.value == count.max < 100 and board.error.value == ""
    c["model"].value = "llama-3.1-405b"                     # ... and the chosen 100 comes back
    assert count.value == 100
    c["gpus"].value = ()                                    # no GPU: nothing to count, no error
    assert count.max == 1 and board.error.value == ""


@pytest.mark.parametrize("factory, key", [("finetune_widget", "seq"), ("parallel_explorer_widget", "seq"),
                                          ("activation_memory_widget", "seq")])
def test_sequence_slider_stops_at_the_models_context_and_comes_back(factory, key):
    """The fine-tuning widget offers every catalogued model since the LoRA targets mean "every linear layer it
    has"; like the other widgets with a sequence slider, it must not offer GPT-2 (trained at 1,024 tokens)
    2,048 tokens, and a model with a longer context brings back the length the reader chose."""
    from llmsizing import get_model, widgets

    box = getattr(widgets, factory)()
    c = box.controls
    c[key].value = 2048
    c["model"].value = "gpt2"
    values = [o[1] if isinstance(o, tuple) else o for o in c[key].options]
    assert max(values) <= get_model("gpt2").max_seq == 1024
    assert c[key].value == 1024
    assert "rror" not in box.summary.value                  # (a refusal would show its message here)
    c["model"].value = "llama-3-8b"
    assert c[key].value == 2048
