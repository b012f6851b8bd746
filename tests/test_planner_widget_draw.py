"""moe20 (issue 35: chapter 17's widget within 100 ms a move). Four changes, each checked against the path it
replaces:

* ``plan_candidates._candidates`` numbers a few dozen rows' (cp, accumulation class) pairs with a dict: the
  same columns as ``np.unique``'s numbering (forced with ``_FEW_ROWS = -1``), on random tables (hypothesis)
  and on whole ``plan()`` frames of chapter 17's mixtures of experts;
* ``charts._PointCloud`` (the planner figure's cloud of plans, each pixel's marker stamped once): the same
  pixels covered as matplotlib's ``Line2D`` draw of every point, in the same grey, differing only on markers'
  rims by a few levels; the same PNG from one draw to the next; any other line drawn as matplotlib draws it;
* ``charts._groups_key``: the key changes when anything ``_plan_groups`` reads changes (the five columns it
  reads whole, the front's rows), and tables with one key get the groups of each; with the ``gpu`` column
  factorized once (draw36), the same codes and names as ``pd.factorize``, and a new key for any GPU name;
* ``charts._plan_row`` (draw36): the chosen plan's values as ``table.loc[label]`` gives them;
* ``charts.labels._log_axis`` (draw36) without ``set_ticks``: the same limits, labels and pixels;
* the widget canvas's kept bitmaps made from the measured layout: tests/test_widget_layout.py compares its
  pixels with a plain Agg draw; here, the bitmap kept at measuring is the one draw_text makes.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from llmsizing import plan_candidates, planner  # noqa: E402
from llmsizing.charts import time_money_plan as tmp  # noqa: E402
from llmsizing.plan_candidates import _candidates, _pair_table  # noqa: E402

CH17 = dict(tokens=8e11, seq=131072, global_batch=128, gpus=("H100 SXM",), max_gpus=16384)


def _same(got, want):
    if want is None:
        assert got is None
        return
    assert got.keys() == want.keys()
    for k, v in want.items():
        if isinstance(v, np.ndarray):
            assert got[k].dtype == v.dtype
            np.testing.assert_array_equal(got[k], v, strict=True)
        else:
            assert got[k] == v and type(got[k]) is type(v)
            assert all(type(x) is int for p in got[k] for x in p)


@settings(max_examples=150, deadline=None)
@given(cps=st.lists(st.sampled_from([1, 2, 4, 8, 16, 32, 64]), min_size=1, max_size=6, unique=True),
       gb=st.sampled_from([1, 6, 32, 96, 128, 512, 1536]),
       micros=st.sampled_from([(1,), (1, 2, 4), (1, 2, 3, 8)]),
       tp=st.sampled_from([1, 2, 4, 8]), pp=st.integers(1, 16), v=st.sampled_from([1, 2]),
       unit=st.sampled_from([None, 1, 2, 5, 16]), max_gpus=st.sampled_from([None, 64, 4096, 16384]))
def test_dict_numbering_is_uniques(cps, gb, micros, tp, pp, v, unit, max_gpus):
    from llmsizing.layouts import _divisors

    table = _pair_table(sorted(cps), {b: list(_divisors(gb // b)) if gb % b == 0 else [] for b in micros}, gb)
    units = None if unit is None else np.full(len(table["dp"]), unit)
    got = _candidates(tp, pp, 1, table=table, units=units, max_gpus=max_gpus, v=v)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(plan_candidates, "_FEW_ROWS", -1)
        want = _candidates(tp, pp, 1, table=table, units=units, max_gpus=max_gpus, v=v)
    _same(got, want)


@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "deepseek-v2", "granite-3.0-1b-a400m", "gpt-oss-120b"])
def test_ch17_frames_are_those_of_unique_numbering(model, monkeypatch):
    _clear()
    got = planner.plan(model, **CH17)
    _clear()
    monkeypatch.setattr(plan_candidates, "_FEW_ROWS", -1)
    want = planner.plan(model, **CH17)
    _clear()
    pd.testing.assert_frame_equal(got, want, check_exact=True)


def _clear():
    from llmsizing import plan_kept_candidates, plan_memory, plan_tables

    for f in (plan_tables.kept_candidates, plan_tables.kept_surviving, plan_tables.kept_pair_table,
              plan_kept_candidates._dp_values, planner._search, plan_memory.kept_search_memory):
        f.cache_clear()


def _draw(line_cls, x, y, size=(4.0, 3.0), axis=True, **style):
    """The line (``line_cls(x, y, **style)``) drawn alone on log axes: the canvas's RGBA pixels. ``axis=False``
    leaves out the axes' spines and ticks, which are the same whatever line is drawn (and which would hide
    the points under them): the log axes' minor ticks were about 95% of a draw's CPU."""
    fig = Figure(figsize=size, dpi=96)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    ax = fig.add_axes([0.12, 0.12, 0.8, 0.8])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(0.5, 300)
    ax.set_ylim(0.5, 300)
    if not axis:
        ax.set_axis_off()
    ax.add_line(line_cls(x, y, **style))
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).copy()


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 30000), seed=st.integers(0, 2**31), half=st.booleans())
def test_cloud_covers_the_pixels_every_point_does(n, seed, half):
    """Random clouds (some points on exact half pixels, some repeated, some not finite): the same pixels
    covered, every covered pixel the same grey but for a few levels, the same result drawn twice. (Drawn
    without the axes' ticks and spines, the same in every draw: every pixel of the cloud is compared, none
    hidden under a tick.)"""
    rng = np.random.default_rng(seed)
    x, y = np.exp(rng.uniform(-1, 6, n)), np.exp(rng.uniform(-1, 6, n))
    x[::7] = x[::14].repeat(2)[:len(x[::7])]
    if half:
        x[::5] = np.nan
        y[::11] = np.inf
    style = dict(ls="none", marker=".", ms=2.5, color="0.8", axis=False)
    want = _draw(Line2D, x, y, **style)
    got = _draw(tmp._PointCloud, x, y, **style)
    assert np.array_equal(got, _draw(tmp._PointCloud, x, y, **style))
    white = np.array([255, 255, 255, 255])
    assert np.array_equal((got != white).any(axis=2), (want != white).any(axis=2))
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 40


def test_cloud_with_a_line_or_markevery_is_matplotlibs():
    rng = np.random.default_rng(3)
    x, y = np.exp(rng.uniform(0, 5, 500)), np.exp(rng.uniform(0, 5, 500))
    for style in (dict(color="0.3", lw=1.0), dict(ls="none", marker="o", ms=3, color="C1", markevery=3)):
        assert np.array_equal(_draw(tmp._PointCloud, x, y, **style), _draw(Line2D, x, y, **style))


def test_cloud_draws_fewer_markers_on_the_ch17_plans():
    """Chapter 17's Qwen3-30B-A3B search: ~25,000 plans on a few thousand pixels, and the figure's PNG is the
    same from one render to the next."""
    plans = planner.plan("qwen3-30b-a3b", **CH17)
    fig = Figure()
    args = dict(tokens=CH17["tokens"], gpus=CH17["gpus"], seq=CH17["seq"], global_batch=CH17["global_batch"],
                max_gpus=CH17["max_gpus"], plans=plans)
    first = tmp.render_plan("qwen3-30b-a3b", **args, into=fig).png(compress_level=1)
    assert tmp.render_plan("qwen3-30b-a3b", **args).png(compress_level=1) == first
    cloud = fig.axes[0].lines[0]
    assert isinstance(cloud, tmp._PointCloud) and len(cloud.get_xdata()) == len(plans)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    drawn = []
    renderer = fig.canvas.get_renderer()
    real = renderer.draw_markers                      # (Agg's, bound on the renderer itself)

    def counting(gc, marker_path, marker_trans, path, *args):
        drawn.append(len(path.vertices))
        return real(gc, marker_path, marker_trans, path, *args)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(renderer, "draw_markers", counting)
        fig.canvas.draw()
    assert len(plans) > 20000 and 500 < max(drawn) < len(plans) / 5


@pytest.fixture(scope="module")
def table():
    return planner.plan("llama-3-70b", tokens=1e12, gpus=tmp.PLAN_GPUS, seq=8192, global_batch=512,
                        max_gpus=4096)


def test_groups_key_follows_what_the_groups_read(table):
    key = tmp._groups_key(table)
    assert key == tmp._groups_key(table.copy())
    front = np.flatnonzero(table["pareto"].to_numpy())
    off = np.flatnonzero(~table["pareto"].to_numpy())[0]
    for col in table.columns:                          # any column of a front row: a new key
        changed = table.copy()
        j = changed.columns.get_loc(col)
        v = changed.iat[front[0], j]
        changed.iat[front[0], j] = (not v) if isinstance(v, (bool, np.bool_)) else (
            v + 1 if isinstance(v, (int, float, np.integer, np.floating)) else f"{v}x")
        assert tmp._groups_key(changed) != key, col
    for col in tmp._GROUPS_COLUMNS:                    # the columns read whole, off the front: a new key
        changed = table.copy()
        j = changed.columns.get_loc(col)
        v = changed.iat[off, j]
        changed.iat[off, j] = (not v) if isinstance(v, (bool, np.bool_)) else (
            v * 1.5 if isinstance(v, (float, np.floating)) else f"{v}x")
        assert tmp._groups_key(changed) != key, col
    relabelled = table.rename(index={table.index[front[0]]: -1})
    assert tmp._groups_key(relabelled) != key
    other = table.copy()                              # a column not read, off the front: the same groups
    other.iat[off, other.columns.get_loc("mfu")] += 0.1
    tmp._PLAN_GROUPS_KEPT.clear()
    want = tmp._plan_groups(other)
    tmp._PLAN_GROUPS_KEPT.clear()
    tmp._plan_groups(table)
    got = tmp._plan_groups(other)                     # (found under the table's key)
    assert repr(got) == repr(want)


def test_gpu_codes_and_their_key():
    """draw36: the ``gpu`` column factorized once (``_gpu_codes``) for the key and the groups. By hand: names
    in order of first appearance, each row its name's position; a missing name -1 (keyed by its strings,
    ``_codes_bytes`` None). The key with the codes changes with any GPU name, on the front or off it."""
    from llmsizing.charts import plan_groups as pg

    codes, names = pg._gpu_codes(pd.array(["B200", "H100 SXM", "B200", "A100 80GB"], dtype="str"))
    assert codes.tolist() == [0, 1, 0, 2] and list(names) == ["B200", "H100 SXM", "A100 80GB"]
    codes, names = pg._gpu_codes(np.array(["x", None, "x"], dtype=object))
    assert codes.tolist() == [0, -1, 0] and pg._codes_bytes(codes, names) is None
    assert pg._codes_bytes(np.array([0, 1]), ["a\x00b", "c"]) is None
    # (the codes [0, 1] and the names "ab", "c" against the codes [0, 0] and the name "abc")
    assert pg._codes_bytes(np.array([0, 1]), ["ab", "c"]) != pg._codes_bytes(np.array([0, 0]), ["abc"])


def test_groups_key_with_gpu_codes_follows_the_gpu_column(table):
    from llmsizing.charts import plan_groups as pg

    bare = pg._bare(table)
    key = pg._groups_key(bare, gpu=pg._gpu_codes(bare["gpu"].array))
    assert key == pg._groups_key(bare.copy(), gpu=pg._gpu_codes(bare.copy()["gpu"].array))
    off = np.flatnonzero(~table["pareto"].to_numpy())
    for row in (off[0], off[-1]):
        changed = bare.copy()
        j = changed.columns.get_loc("gpu")
        changed.iat[row, j] = "H200" if changed.iat[row, j] != "H200" else "B200"
        assert pg._groups_key(changed, gpu=pg._gpu_codes(changed["gpu"].array)) != key
    tmp._PLAN_GROUPS_KEPT.clear()
    want = repr(tmp._plan_groups(table))
    tmp._PLAN_GROUPS_KEPT.clear()
    codes, names = pd.factorize(bare["gpu"].to_numpy())      # (what _plan_groups factorized before draw36)
    got_codes, got_names = pg._gpu_codes(bare["gpu"].array)
    assert got_codes.tolist() == codes.tolist() and list(got_names) == list(names)
    assert repr(tmp._plan_groups(table)) == want


def test_plan_row_reads_what_loc_gives(table):
    """draw36: the chosen plan's row read off the columns (``_plan_row``) against ``table.loc[label]``: every
    column's value of the same type and value (NA where NA), by attribute, ``[]`` and ``get``, on the front's
    rows and others; a missing column an AttributeError (``getattr``'s default) or ``get``'s default."""
    from llmsizing.charts import plan_groups as pg

    bare = pg._bare(table)
    front = np.flatnonzero(table["pareto"].to_numpy())
    for label in [*table.index[front], *table.index[[0, len(table) // 2, -1]]]:
        row, want = pg._plan_row(bare, label), table.loc[label]
        assert isinstance(row, pg._PlanRow)
        for col in table.columns:
            got, ref = getattr(row, col), want[col]
            assert type(got) is type(ref), (col, type(got), type(ref))
            assert (pd.isna(got) and pd.isna(ref)) if pd.isna(ref) is True else got == ref, col
            assert row[col] is got and row.get(col) is got
        assert getattr(row, "no_such_column", 7) == 7 and row.get("no_such_column", 3) == 3
    numbers = pd.DataFrame({"tp": [1, 2], "days": [1.5, 2.5]}, index=[10, 11])
    assert pg._plan_row(numbers, 11).tp == 2.0 and isinstance(pg._plan_row(numbers, 11), pd.Series)


@pytest.mark.parametrize("lo, hi", [(3.2, 3.3), (0.7, 40.0), (12.0, 9.0e4), (1.0e3, 1.0e9), (1.234, 1.236)])
def test_log_axis_draws_what_set_ticks_drew(lo, hi):
    """draw36: ``_log_axis`` sets the locator and formatter that ``axis.set_ticks(ticks, labels)`` set (and
    the view it widened to), not through set_ticks: the same limits, tick labels and pixels as an axis made
    through set_ticks with those ticks, on a narrow range (its two ends), 1-2-5 steps and decades."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from llmsizing.charts import labels

    def draw(through_set_ticks):
        fig = Figure(figsize=(4.0, 3.0), dpi=96)
        FigureCanvasAgg(fig)
        ax = fig.add_axes([0.2, 0.2, 0.7, 0.7])
        labels._log_axis(ax.xaxis, lo, hi, labels._usd)
        labels._log_axis(ax.yaxis, lo, hi, lambda v: f"{v:g}")
        if through_set_ticks:                  # (what _log_axis did before draw36, on its own ticks)
            for axis, fmt in ((ax.xaxis, labels._usd), (ax.yaxis, lambda v: f"{v:g}")):
                ticks = list(axis.get_major_locator().locs)
                axis.set_ticks(ticks, [fmt(t) for t in ticks])
        fig.canvas.draw()
        return (ax.get_xlim(), ax.get_ylim(), [t.get_text() for t in ax.get_xticklabels()],
                [t.get_text() for t in ax.get_yticklabels()], np.asarray(fig.canvas.buffer_rgba()).copy())

    got, want = draw(False), draw(True)
    assert got[:4] == want[:4] and len(got[2]) >= 2 and all(got[2])
    assert np.array_equal(got[4], want[4])


def test_cloud_in_a_vector_file_keeps_every_point():
    import io

    rng = np.random.default_rng(5)
    x, y = np.exp(rng.uniform(0, 5, 3000)), np.exp(rng.uniform(0, 5, 3000))
    svg = []
    for cls in (tmp._PointCloud, Line2D):
        fig = Figure(figsize=(4, 3), dpi=96)
        ax = fig.add_axes([0.1, 0.1, 0.8, 0.8])
        ax.add_line(cls(x, y, ls="none", marker=".", ms=2.5, color="0.8", gid="cloud"))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(0.5, 300)
        ax.set_ylim(0.5, 300)
        buf = io.StringIO()
        with matplotlib.rc_context({"svg.hashsalt": "moe20"}):
            fig.savefig(buf, format="svg", metadata={"Date": None})
        svg.append(buf.getvalue())
    assert svg[0] == svg[1] and svg[0].count("<use ") >= 3000


def test_groups_key_of_a_table_without_the_columns_is_the_whole_tables():
    df = pd.DataFrame({"gpu": ["a", "b"], "days": [1.0, 2.0]})
    assert tmp._groups_key(df) == ("whole", tmp._table_key(df))


def test_measured_bitmap_is_draw_texts():
    """A string measured then drawn on the widget canvas: the kept bitmap is the one draw_text makes afresh
    (the same array, descent and offsets)."""
    from matplotlib.font_manager import FontProperties

    from llmsizing.widgets import canvas

    fig = Figure(figsize=(3, 2), dpi=96)
    canvas._text_cache_canvas()(fig)
    r = fig.canvas.get_renderer()
    prop = FontProperties(size=8.5)
    s = "qwen3-30b-a3b, 800B tokens, global batch 128 x 131,072"
    r.get_text_width_height_descent(s, prop, False)
    (key, kept), = [(k, v) for k, v in r.text_bitmaps.items() if k[0] == s]
    r.text_bitmaps.clear()
    gc = r.new_gc()
    r.draw_text(gc, 10, 10, s, prop, 0)
    fresh = r.text_bitmaps[key]
    assert np.array_equal(kept[0], fresh[0]) and kept[1:] == fresh[1:]
