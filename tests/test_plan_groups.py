"""Issue 38: ``charts._plan_groups`` (what the planner figure draws whatever plan is chosen) works on the
columns' arrays instead of pandas' groupby and sort_values over the whole plans table, so that a deadline's,
budget's or plan selector's first redraw spends ~4 ms there instead of ~12-16. Its answer must be exactly the
one the pandas code gave (kept below as the reference, written the way it was before), and so the planner's
PNG for a no-search move must be byte-equal to one drawn with the reference groups."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import llmsizing.charts.time_money_plan as tmp  # noqa: E402
from llmsizing.planner import _pareto, plan  # noqa: E402


def reference_groups(plans) -> dict:
    """The groups as the pandas code made them (main 8678c87): one groupby per GPU type, sort_values by
    days (quicksort), the front's rows sorted the same way and grouped in order of first appearance."""
    own = []
    for name, sub in plans.groupby("gpu", sort=False):
        best = sub[_pareto(sub["days"].to_numpy(), sub["cost_usd"].to_numpy(),
                           sub["memory_per_gpu_bytes"].to_numpy())].sort_values("days")
        own.append((name, best["days"].to_numpy(), best["cost_usd"].to_numpy()))
    fs = plans[plans["pareto"]].sort_values("days")
    return {"own": own, "front": (fs["days"].to_numpy(), fs["cost_usd"].to_numpy()),
            "front_by_gpu": [(name, sub["days"].to_numpy(), sub["cost_usd"].to_numpy())
                             for name, sub in fs.groupby("gpu", sort=False)]}


def assert_same_groups(got: dict, want: dict, where: str) -> None:
    for part in ("own", "front_by_gpu"):
        assert [n for n, _, _ in got[part]] == [n for n, _, _ in want[part]], f"{where}: {part} names"
        for (name, d, c), (_, wd, wc) in zip(got[part], want[part]):
            assert d.dtype == wd.dtype and c.dtype == wc.dtype, f"{where}: {part} {name} dtypes"
            assert np.array_equal(d, wd) and np.array_equal(c, wc), f"{where}: {part} {name} differs"
    for got_a, want_a in zip(got["front"], want["front"]):
        assert np.array_equal(got_a, want_a), f"{where}: front differs"


@pytest.fixture(scope="module")
def table():
    return plan("llama-3-70b", tokens=1e12, gpus=tmp.PLAN_GPUS, seq=8192, global_batch=512, max_gpus=4096)


def variants(df):
    """The planner widget's no-search tables (a deadline or a budget filters the kept search), the rows
    shuffled, and ties in days (every plan's days rounded to 5 days, and every 7th row marked as on the
    front: many front rows share a speed, so the sort's order among ties shows; a GPU type's own front
    (``_pareto``) keeps one row per speed, so it has no ties)."""
    yield "all", df
    for d in (7.0, 14.0, 30.0, 60.0, 90.0):
        yield f"deadline {d}", df[df["days"] <= d]
    for c in (1e6, 2e6, 5e6):
        yield f"budget {c:g}", df[df["cost_usd"] <= c]
    yield "shuffled", df.sample(frac=1.0, random_state=0)
    tied = df.copy()
    tied["days"] = (tied["days"] / 5).round() * 5 + 5
    tied["pareto"] = np.arange(len(tied)) % 7 == 0
    yield "tied days", tied
    yield "tied, shuffled", tied.sample(frac=1.0, random_state=1)
    yield "one gpu", df[df["gpu"] == "H200"]


def test_plan_groups_are_the_pandas_groups(table):
    tied = 0
    for where, df in variants(table):
        tmp._PLAN_GROUPS_KEPT.clear()
        got = tmp._plan_groups(df)
        assert_same_groups(got, reference_groups(df), where)
        if where.startswith("tied"):
            tied += len(got["front"][0]) - len(np.unique(got["front"][0]))
    assert tied > 0, "the tied tables must hold ties on the front (else the order among ties is untested)"


@pytest.mark.parametrize("limit", [("deadline_days", 30.0), ("budget_usd", 2e6), ("highlight", 2)])
def test_planner_png_is_the_one_drawn_with_the_pandas_groups(table, limit, monkeypatch):
    """A no-search move's figure (a filtered table, or another plan chosen), drawn on a kept figure after
    the default, is byte-equal to a figure drawn on a new figure with the reference groups."""
    from matplotlib.figure import Figure

    key, value = limit
    df, kw = table, {}
    if key == "highlight":
        kw["highlight"] = df[df["pareto"]].index[value]
    else:
        kw[key] = value
        df = table[table["days" if key == "deadline_days" else "cost_usd"] <= value]
    args = dict(tokens=1e12, gpus=tmp.PLAN_GPUS, seq=8192, global_batch=512, max_gpus=4096)
    into = Figure()
    tmp._PLAN_GROUPS_KEPT.clear()
    tmp.render_plan("llama-3-70b", **args, plans=table, into=into, all_plans=table)
    fast = tmp.render_plan("llama-3-70b", **args, plans=df, into=into, all_plans=table, **kw)
    fast_png, fast_text = fast.png(compress_level=1), fast.summary
    real = tmp._plan_groups
    monkeypatch.setattr(tmp, "_plan_groups", lambda p: {**reference_groups(p),
                                                        "front_lines": real(p)["front_lines"]})
    ref = tmp.render_plan("llama-3-70b", **args, plans=df, all_plans=table, **kw)
    assert fast_text == ref.summary
    assert fast_png == ref.png(compress_level=1), f"{limit}: the planner's PNG differs"


def test_groupby_order_is_first_appearance():
    """The reference's premise, checked on a toy table: groupby(sort=False) gives groups in order of first
    appearance, as pd.unique does (the new code relies on it)."""
    toy = pd.DataFrame({"gpu": ["b", "a", "b", "c", "a"], "days": [5.0, 4, 3, 2, 1]})
    assert [n for n, _ in toy.groupby("gpu", sort=False)] == list(pd.unique(toy["gpu"])) == ["b", "a", "c"]


def test_front_lines_line_up_when_some_plans_have_cp_or_vp(table):
    """The summary's front is a fixed-width block (``widgets.dashboard.summary_html`` makes its columns from
    the blanks every line shares): a plan with ``cp=`` or ``vp=`` must not push its later columns right of
    the others' (render34 found 'MFU' and its value in different cells). Two front rows are given cp=16 and
    vp=4 here; every line's 'GiB', 'MFU' and 'days' then stand at one position each."""
    from llmsizing.widgets.dashboard import summary_html

    df = table.copy()
    df["pareto"] = np.arange(len(df)) % 50 == 0                 # (a front of some 100 plans, as real ones are)
    front = df.index[df["pareto"]][:3]
    df.loc[front[0], "cp"], df.loc[front[1], "virtual_stages"] = 16, 4
    tmp._PLAN_GROUPS_KEPT.clear()
    lines = [text for _, text in tmp._plan_groups(df)["front_lines"]]
    assert any(" cp=16 " in t for t in lines) and any(" vp=4 " in t for t in lines)
    for word in (" GiB  ", "  MFU ", " days  "):
        assert len({t.index(word) for t in lines}) == 1, (word, lines[:3])
    cells = [row.count("<td") for row in summary_html("\n".join(lines)).split("<tr>")[1:]]
    assert len(set(cells)) == 1 and cells[0] >= 8, cells
