"""Issue 38 (ui29): chapter 12's planner widget has a ``grad_buffer`` control, plan()'s ``grad_buffer``
(:data:`~llmsizing.footprint.GRAD_BUFFERS`). Its default draws what the widget drew before; each choice shows
plan()'s table for it; the choices move the plans the way the memory model says (a copy of the gradients more
never lets more layouts fit); ZeRO-2/3 plans take no buffer; and the widget's kept tables and answers are
keyed on it, so a walk of moves shows what a fresh plan() gives at each setting, forward and reversed."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from llmsizing import charts, planner  # noqa: E402
from llmsizing.footprint import GRAD_BUFFERS, grad_copies  # noqa: E402
from llmsizing.widgets import planner_widget, summary_html  # noqa: E402
from llmsizing.widgets.dashboard import CONTROL_MARGIN_PX, CONTROLS_WIDTH_PX  # noqa: E402
from llmsizing.widgets.time_money import PLAN_GRAD_BUFFERS  # noqa: E402

MODEL = "llama-3-8b"              # (a small dense model: its searches take a fraction of a second)
#: A layout (its GPU type, degrees, ZeRO stage and micro-batch): the planner picks its recomputation and
#: interleaving per kind (the least that fits, the plain twin unless interleaving wins), so those are not part
#: of it.
LAYOUT = ["gpu", "tp", "cp", "pp", "dp", "zero", "micro_batch"]
#: A row's full key: a layout with its recomputation and interleaved chunks.
KEY = LAYOUT + ["virtual_stages", "recompute", "recompute_layers"]


@pytest.fixture(scope="module")
def board():
    return planner_widget(MODEL)


def _plan(values, grad_buffer):
    return planner.plan(values["model"], tokens=values["tokens"], gpus=tuple(values["gpus"]),
                        seq=values["seq"], global_batch=values["global_batch"], max_gpus=values["max_gpus"],
                        grad_buffer=grad_buffer)


def _layouts(df) -> set:
    return set(df[LAYOUT].itertuples(index=False, name=None))


def test_the_control_offers_every_buffer_kind_with_the_default_freed(board):
    ctrl = board.controls["grad_buffer"]
    assert ctrl.value is False                                  # plan()'s default: the figure as before
    assert list(ctrl._options_values) == [False, True, "ddp-copy", "ddp-view"]
    assert set(ctrl._options_values) == set(GRAD_BUFFERS)
    labels = dict((v, k) for k, v in PLAN_GRAD_BUFFERS)
    assert "DeepSpeed" in labels[False] and "Megatron" in labels[True]
    assert "DDP" in labels["ddp-copy"] and "bucket view" in labels["ddp-view"]
    # the hint says that the ZeRO-2/3 plans take no buffer (plan() applies it to ZeRO-0/1 only)
    assert "ZeRO-2" in ctrl.tooltip and "ZeRO-1" in ctrl.tooltip and "grad buffer" in ctrl.tooltip


def test_each_option_label_fits_the_drop_down():
    """Each option's label fits the drop-down beside the 110 px description at JupyterLab's 13 px UI font
    (tests/test_widget_layout.py's measure: 3.6 px a narrow character, 8.3 px any other), less the select's
    8 px left padding and the ~20 px of its arrow, so that no label is cut."""
    from test_widget_layout import label_fits_px

    room = CONTROLS_WIDTH_PX - 2 * CONTROL_MARGIN_PX - 110 - 4 - 8 - 20
    for label, _ in PLAN_GRAD_BUFFERS:
        assert label_fits_px(label) <= room, (label, label_fits_px(label), room)


def test_the_copies_the_checks_below_rely_on():
    """The memory model's order of the kinds, read from grad_copies (each a whole copy of the gradients per
    phase): "ddp-copy" holds at least as much as False and as "ddp-view" in every phase, "ddp-view" at least
    as much as True; so the plans that fit shrink (or stay) along those pairs."""
    for accum in (1, 4):
        c = {k: grad_copies(k, accum) for k in GRAD_BUFFERS}
        holds = {k: [v[0] + v[i] for i in (1, 2, 3)] for k, v in c.items()}   # buffer + .grad, a phase
        for more, less in (("ddp-copy", False), ("ddp-copy", "ddp-view"), ("ddp-view", True)):
            assert all(a >= b for a, b in zip(holds[more], holds[less])), (more, less, accum)


def test_each_move_shows_plans_table_and_moves_the_plans_as_the_memory_model_says(board):
    """Each choice of the control shows plan()'s table for it (the summary's count and front, the selector's
    options: what render_plan says of a fresh plan() call); the layouts that fit under a kind that holds more
    copies are a subset of those under one that holds fewer, and a row found under both holds at least as
    much memory; the ZeRO-2/3 rows are the same under every kind; at least one kind changes the plans (the
    control does something at these settings)."""
    ctrl = board.controls["grad_buffer"]
    values = board.values()
    layouts, counts, tables = {}, {}, {}
    try:
        for kind in (True, "ddp-copy", "ddp-view", False):
            ctrl.value = kind
            assert board.error.value == "", (kind, board.error.value)
            df = _plan(values, kind)
            fresh = charts.render_plan(MODEL, **{k: values[k] for k in ("tokens", "seq", "global_batch",
                                                                          "max_gpus")},
                                       gpus=tuple(values["gpus"]), plans=df, deadline_rule="slow_end",
                                       grad_buffer=kind)
            assert board.summary.value == summary_html(fresh.summary), kind
            assert f"{len(df):,} plans fit" in fresh.summary
            layouts[kind], counts[kind], tables[kind] = _layouts(df), len(df), df
            if kind is not False:
                assert "(DDP, ZeRO-1)" in df.attrs["assumes"]
    finally:
        ctrl.value = False
    for more, less in (("ddp-copy", False), ("ddp-copy", "ddp-view"), ("ddp-view", True)):
        assert layouts[more] <= layouts[less], (more, less, len(layouts[more] - layouts[less]))
        both = tables[more].merge(tables[less], on=KEY, suffixes=("_more", "_less"))
        assert len(both)
        assert (both["memory_per_gpu_bytes_more"] >= both["memory_per_gpu_bytes_less"]).all(), (more, less)
    cols = [c for c in tables[False].columns if c != "pareto"]
    zero23 = {k: t.loc[t["zero"] >= 2, cols].sort_values(KEY).reset_index(drop=True)
              for k, t in tables.items()}
    assert len(zero23[False])
    for kind, rows in zero23.items():       # (the memory summed along another path: equal to rounding)
        mem = "memory_per_gpu_bytes"
        assert rows.drop(columns=mem).equals(zero23[False].drop(columns=mem)), kind
        assert np.allclose(rows[mem], zero23[False][mem], rtol=1e-12, atol=0), kind
    assert len(set(counts.values())) > 1, counts


def test_the_chosen_plans_memory_holds_the_buffer_under_zero_1_only():
    """render_plan draws the chosen plan's memory with the buffer where its ZeRO stage is 0 or 1 (plan()'s
    rule): a ZeRO-0/1 plan under "ddp-copy" (a buffer and a .grad copy, grad_copies) holds more than under
    False; a ZeRO-2/3 plan holds the same."""
    import re

    df = planner.plan(MODEL, tokens=1e11, gpus=("H100 SXM",), seq=8192, global_batch=512, max_gpus=256)
    args = dict(tokens=1e11, gpus=("H100 SXM",), seq=8192, global_batch=512, max_gpus=256)
    copy = planner.plan(MODEL, **args, grad_buffer="ddp-copy")
    both = df.reset_index().merge(copy.reset_index(), on=KEY, suffixes=("", "_copy"))

    def gib(plans, label, kind):
        s = charts.render_plan(MODEL, **args, plans=plans, highlight=label, grad_buffer=kind).summary
        return float(re.search(r"([\d.]+) GiB of [\d.]+ GiB on the most loaded GPU", s).group(1))

    low = both[both["zero"] <= 1].iloc[0]
    high = both[both["zero"] >= 2].iloc[0]
    assert gib(copy, low["index_copy"], "ddp-copy") > gib(df, low["index"], False)
    assert gib(copy, high["index_copy"], "ddp-copy") == gib(df, high["index"], False)


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_a_walk_keeps_its_tables_apart_per_buffer_kind(order):
    """The widget's kept tables (plan()'s per setting, the cut of a higher GPU limit, the kept answers) are
    keyed on the buffer: a walk of moves that goes back and forth between kinds and GPU limits (a lower
    limit is cut from a table searched at a higher one: only that kind's) shows at each step the summary and
    plan selector of a fresh plan() at that setting (tests/test_kept_between_moves.py's oracle)."""
    from llmsizing.widgets.time_money import _front_options

    walk = [(False, 4096), (True, 4096), ("ddp-copy", 4096), (True, 256), (False, 256), ("ddp-copy", 64),
            ("ddp-view", 64), (False, 4096), ("ddp-view", 4096), (True, 64)]
    if order == "reversed":
        walk.reverse()
    w = planner_widget(MODEL)
    for kind, limit in walk:
        w.controls["max_gpus"].value = limit             # (each move drawn: the kept tables in between)
        w.controls["grad_buffer"].value = kind
        assert w.error.value == "", (kind, limit, w.error.value)
        values = w.values()
        planner._search.cache_clear()                       # (the oracle: searched afresh)
        df = _plan(values, kind)
        fresh = charts.render_plan(MODEL, tokens=values["tokens"], gpus=tuple(values["gpus"]),
                                   seq=values["seq"], global_batch=values["global_batch"], max_gpus=limit,
                                   plans=df, deadline_rule="slow_end", grad_buffer=kind)
        assert w.summary.value == summary_html(fresh.summary), (kind, limit)
        assert list(w.controls["choice"].options) == _front_options(df[df["pareto"]]), (kind, limit)

