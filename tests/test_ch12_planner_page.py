"""Chapter 12's page: the planner chart (charts.render_plan) and widget (widgets.planner_widget) show what
planner.plan computes. The reference here is plan() itself (the planner's own numbers are tested against the
scalar functions in tests/test_planner.py); these tests check that the page picks, labels and filters its rows
faithfully, and that an impossible request shows plan()'s NoPlanError message rather than a traceback."""

from __future__ import annotations

import functools

import pytest
from conftest import pooled_layout_factors

from llmsizing.job import Job
from llmsizing.charts import render_plan
from llmsizing.memory import training_memory
from llmsizing.parallel import Parallel
from llmsizing.planner import NoPlanError, plan
from llmsizing.units import GiB

SMALL = dict(tokens=1e11, gpus=("H100 SXM", "A100 80GB"), seq=4096, global_batch=256, max_gpus=512)


@functools.cache
def small_plans():
    return plan("llama-3-8b", **SMALL)


def layout_text(r) -> str:
    vp = int(r.virtual_stages)                      # (issue 34: the interleaved chunks, when above one)
    return f"{int(r.n_gpus):,} x {r.gpu} (tp={r.tp}, pp={r.pp},{f' vp={vp},' if vp > 1 else ''} dp={r.dp}, ZeRO-{r.zero}"


def test_summary_names_the_plan_plan_ranks_first_on_the_front():
    df = small_plans()
    first = df[df["pareto"]].iloc[0]
    # plan() sorts cheapest first, so the first front plan is the cheapest plan of all
    assert first["cost_usd"] == df["cost_usd"].min()
    s = render_plan("llama-3-8b", **SMALL, plans=df).summary
    chosen = next(line for line in s.splitlines() if line.startswith("chosen"))
    assert "front #1" in chosen and layout_text(first) in chosen
    assert f"{first['days']:,.1f} days" in s
    # the summary lists every front plan, and only those
    assert f"{int(df['pareto'].sum())} on the time-vs-cost front" in s
    # computing the plans inside gives the same page
    assert render_plan("llama-3-8b", **SMALL).summary == s


def test_highlight_picks_that_row_and_the_memory_is_the_planners():
    df = small_plans()
    last = df[df["pareto"]].index[-1]
    r = df.loc[last]
    s = render_plan("llama-3-8b", **SMALL, plans=df, highlight=last).summary
    assert layout_text(r) in s.splitlines()[1]
    # the memory the chart stacks is training_memory's total for that layout, which plan() also reports
    par = Job.from_plan_row(r, "llama-3-8b", seq=SMALL["seq"]).parallel     # (its interleaving: issue 34)
    tm = training_memory("llama-3-8b", batch=int(r.micro_batch), seq=SMALL["seq"], grad_accum=int(r.grad_accum),
                         recompute=r.recompute, parallel=par)
    assert tm.total_bytes == pytest.approx(r.memory_per_gpu_bytes, rel=1e-9)
    assert f"{tm.total_bytes / GiB:.1f} GiB of" in s
    with pytest.raises(ValueError, match="highlight"):
        render_plan("llama-3-8b", **SMALL, plans=df, highlight=10**9)


@functools.cache
def widget():
    from llmsizing.widgets import planner_widget

    return planner_widget()


def set_controls(w, **values):
    for k, v in values.items():
        w.controls[k].value = v


def test_widget_shows_plans_numbers():
    w = widget()
    set_controls(w, model="llama-3-8b", tokens=1e11, gpus=SMALL["gpus"], seq=4096, global_batch=256, max_gpus=512,
                 deadline=0.0, budget=0.0, choice=0)
    df = small_plans()
    front = df[df["pareto"]]
    assert w.error.value == ""
    assert len(w.controls["choice"].options) == len(front)
    for k in (0, len(front) - 1):
        w.controls["choice"].value = k
        r = front.iloc[k]
        assert layout_text(r) in w.summary.value
        assert f"{r['days']:,.1f} days ({r['days_low']:,.1f}-{r['days_high']:,.1f})" in w.summary.value
        assert f"{r['gpu_hours']:,.0f} GPU-hours" in w.summary.value
    w.controls["choice"].value = 0


def test_widget_deadline_keeps_plans_front():
    """Filtering the cached plans by the deadline gives exactly the front plan() returns with that deadline."""
    w = widget()
    set_controls(w, model="llama-3-8b", tokens=1e11, gpus=SMALL["gpus"], seq=4096, global_batch=256, max_gpus=512,
                 budget=0.0, choice=0)
    w.controls["deadline"].value = 7.0
    # (the widget's rule named: plan() without one warns that its default changed, issue 34)
    want = plan("llama-3-8b", **SMALL, deadline_days=7.0, deadline_rule=w.controls["deadline_rule"].value)
    want = want[want["pareto"]]
    labels = [o[0] for o in w.controls["choice"].options]
    assert len(labels) == len(want)
    for label, r in zip(labels, want.itertuples()):
        assert label.startswith(f"#") and f"{int(r.n_gpus):,} x {r.gpu}, tp={r.tp} pp={r.pp} dp={r.dp}," in label
    w.controls["deadline"].value = 0.0


def test_front_options_name_each_front_plan_as_its_row_says():
    """The plan selector's options (widgets.time_money._front_options, read off the columns' arrays since
    speed28) name each front plan of a mixture of experts' search (ep) and of a long-context one (cp) as its
    row says, read here with itertuples."""
    from llmsizing.widgets.time_money import _front_options

    seen = set()
    for model, kw in (("mixtral-8x7b", SMALL), ("llama-3-8b", dict(SMALL, seq=131072, global_batch=16))):
        df = plan(model, **kw)
        front = df[df["pareto"]]
        options = _front_options(front)
        assert [k for _, k in options] == list(range(len(front)))
        for (label, _), r in zip(options, front.itertuples()):
            cp = f" cp={r.cp}" if r.cp > 1 else ""
            ep = f"ep={r.ep}, " if getattr(r, "ep", 1) > 1 else ""
            assert label.startswith(f"#{_ + 1}: {int(r.n_gpus):,} x {r.gpu}, tp={r.tp}{cp} pp={r.pp} "
                                    f"dp={r.dp}, {ep}{r.days:,.1f} days, ")
        seen.update(k for k in ("ep=", " cp=") if any(k in label for label, _ in options))
    assert seen == {"ep=", " cp="}                     # (both kinds of row were named)


def test_impossible_deadline_shows_the_no_plan_message():
    """The widget's default run (Llama-3-70B, 1T tokens, at most 4,096 GPUs) cannot finish in a day."""
    from llmsizing.charts import PLAN_GPUS

    w = widget()
    set_controls(w, model="llama-3-70b", tokens=1e12, gpus=PLAN_GPUS, seq=8192, global_batch=512, max_gpus=4096,
                 budget=0.0, choice=0)
    with pytest.raises(NoPlanError) as exc:
        plan("llama-3-70b", tokens=1e12, gpus=PLAN_GPUS, seq=8192, global_batch=512, max_gpus=4096,
             deadline_days=1.0)
    w.controls["deadline"].value = 1.0
    import html
    assert html.escape(str(exc.value)) in w.error.value
    assert "Traceback" not in w.error.value and w.summary.value == "" and bytes(w.image.value) == b""
    w.controls["deadline"].value = 0.0
    assert w.error.value == "" and bytes(w.image.value)[:4] == b"\x89PNG"


@pytest.mark.parametrize("bad, exc, name", [(dict(tokens=-1.0), ValueError, "tokens"),
                                            (dict(gpus=()), ValueError, "gpus"),
                                            (dict(gpus="H100 SXM"), TypeError, "gpus"),
                                            (dict(global_batch=0), ValueError, "global_batch")])
def test_bad_input_names_the_parameter(bad, exc, name):
    with pytest.raises(exc, match=name):
        render_plan("llama-3-8b", **{**SMALL, **bad})


# ---- issue 34: the deadline's rule (point estimate or slow end of the 80% range) as a control of the widget
def front_by_hand(days, cost, memory) -> list[int]:
    """Positions of the time-vs-cost front, by its definition (no other plan at least as fast and as cheap and
    better in one; of exact ties the least memory, then the first), one pair at a time: a reference written
    apart from the planner's sweep (plan_rank._pareto)."""
    out = []
    for i in range(len(days)):
        def beats(j):
            if (days[j], cost[j]) == (days[i], cost[i]):
                return (memory[j], j) < (memory[i], i)
            return days[j] <= days[i] and cost[j] <= cost[i]
        if not any(beats(j) for j in range(len(days)) if j != i):
            out.append(i)
    return out


def summary_text(w) -> str:
    import html
    import re

    body = re.sub(r"<style>.*?</style>", "", w.summary.value, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def test_widget_deadline_rule_filters_by_the_slow_end_and_says_so():
    """Llama-3-8B on 1e11 tokens (SMALL) with a one-day deadline. By the point estimate (the old default rule) the
    cheapest plan that makes it is the front's first among days <= 1; the table says that
    plan's slow end, days_high, is above one day, so it meets the day only "likely". With the slow end's rule,
    the plans left are exactly the rows with days_high <= 1 (counted from the column here), the front among
    them is the one written out by hand above, and the chosen plan meets the day even at its slow end ("yes").
    No move searches again: the rule filters the kept plans."""
    from unittest import mock

    import llmsizing.planner as planner

    w = widget()
    set_controls(w, model="llama-3-8b", tokens=1e11, gpus=SMALL["gpus"], seq=4096, global_batch=256,
                 max_gpus=512, budget=0.0, deadline_rule="estimate", choice=0)
    df = small_plans()
    days, high = df["days"].to_numpy(), df["days_high"].to_numpy()
    # by hand from the table: the cheapest plan within a day by its point estimate overshoots at its slow end
    est = df[(days <= 1.0) & df["pareto"]].iloc[0]           # the widget's front #1 (cheapest first)
    assert est["cost_usd"] == df.loc[days <= 1.0, "cost_usd"].min()
    assert est["days"] <= 1.0 < est["days_high"]
    w.controls["deadline"].value = 1.0
    text = summary_text(w)
    assert layout_text(est) in text and "kept by the point estimate (days <= 1;" in text
    assert (f"meets the deadline at the slow end of its range: likely (only its point estimate does: "
            f"{est['days']:,.1f} days, {est['days_high']:,.1f} at the slow end)") in text
    with mock.patch.object(planner, "_search", wraps=planner._search) as searched:
        w.controls["deadline_rule"].value = "slow_end"
    assert searched.call_count == 0 and w.error.value == ""
    kept = df[high <= 1.0]
    assert 0 < len(kept) < int((days <= 1.0).sum())
    text = summary_text(w)
    assert f"deadline 1 days: {len(kept):,} plans fit" in text
    assert "kept by the slow end of the 80% range (days_high <= 1)" in text
    front = kept.iloc[front_by_hand(list(kept["days"].round(9)), list(kept["cost_usd"].round(6)),
                                    list(kept["memory_per_gpu_bytes"]))]
    labels = [o[0] for o in w.controls["choice"].options]
    assert len(labels) == len(front)
    for label, r in zip(labels, front.itertuples()):
        assert f"{int(r.n_gpus):,} x {r.gpu}, tp={r.tp} pp={r.pp} dp={r.dp}," in label and r.days_high <= 1.0
    slow = front.iloc[0]                                 # the cheapest plan whose slow end makes the day
    assert slow["cost_usd"] == kept["cost_usd"].min() and slow["cost_usd"] > est["cost_usd"]
    assert layout_text(slow) in text and "slow end of its range: yes (even its slow end does" in text
    # plan() with the same rule gives the same front
    want = plan("llama-3-8b", **SMALL, deadline_days=1.0, deadline_rule="slow_end")
    want = want[want["pareto"]]
    assert [(r.gpu, r.n_gpus, r.tp, r.pp, r.dp, r.zero) for r in want.itertuples()] == \
        [(r.gpu, r.n_gpus, r.tp, r.pp, r.dp, r.zero) for r in front.itertuples()]
    set_controls(w, deadline_rule="slow_end", deadline=0.0)                 # the default rule, no deadline
    assert "limit rule" not in summary_text(w) and w.error.value == ""


def test_widget_deadline_rule_without_a_deadline_says_it_keeps_every_plan():
    """The widget's rule is the slow end by default (plan()'s since issue 34); the other rule, without a deadline,
    is said to keep every plan."""
    w = widget()
    assert w.controls["deadline_rule"].value == "slow_end"
    set_controls(w, model="llama-3-8b", tokens=1e11, gpus=SMALL["gpus"], seq=4096, global_batch=256,
                 max_gpus=512, budget=0.0, deadline=0.0, deadline_rule="slow_end", choice=0)
    before = summary_text(w)
    assert "limit rule" not in before
    w.controls["deadline_rule"].value = "estimate"
    after = summary_text(w)
    assert "limit rule: point estimate, but no deadline or budget is set: every plan is kept" in after
    assert f"{len(small_plans()):,} plans fit" in after and f"{len(small_plans()):,} plans fit" in before
    w.controls["deadline_rule"].value = "slow_end"
    assert summary_text(w) == before


def test_widget_budget_follows_the_rule():
    """The budget is kept by the same rule as the deadline (issue 34): at the slow end (the default) the widget
    keeps the plans whose cost_usd_high is within it, as plan() does; by the point estimate those whose cost_usd
    is. Llama 3 8B on 1T tokens costs from about $0.12M to $1.4M by its point estimate, so a $1M budget drops
    the dearest plans by either rule, and more at the slow end (cost / low > $1M from a point cost of $716k)."""
    w = widget()
    run = dict(SMALL, tokens=1e12)
    set_controls(w, model="llama-3-8b", tokens=1e12, gpus=SMALL["gpus"], seq=4096, global_batch=256,
                 max_gpus=512, deadline=0.0, budget=1e6, deadline_rule="slow_end", choice=0)
    text = summary_text(w)
    want = plan("llama-3-8b", **run, budget_usd=1e6, deadline_rule="slow_end")
    est = plan("llama-3-8b", **run, budget_usd=1e6, deadline_rule="estimate")
    assert (want["cost_usd_high"] <= 1e6).all() and (est["cost_usd"] <= 1e6).all() and len(est) > len(want)
    assert f"{len(want):,} plans fit" in text
    assert "budget $1M, kept by the slow end of the 80% range (cost_usd_high <= 1,000,000)" in text
    assert "within the budget at the slow end of its range: yes" in text
    w.controls["deadline_rule"].value = "estimate"
    text = summary_text(w)
    assert f"{len(est):,} plans fit" in text and "kept by the point estimate (cost_usd <= 1,000,000" in text


def test_widget_bad_deadline_rule_is_a_message_not_a_traceback():
    w = widget()
    shown = w._draw({**w.values(), "deadline_rule": "median"})
    assert shown[0] == "error" and "deadline_rule" in shown[1] and "estimate, slow_end" in shown[1]
    assert "Traceback" not in shown[1]
    with pytest.raises(ValueError, match="deadline_rule"):
        render_plan("llama-3-8b", **SMALL, deadline_days=7, deadline_rule="median")


def test_plans_where_marks_the_front_again_among_the_plans_left():
    """Two GPUs whose ranges differ in width (by hand): plan A, 10 days (slow end 12) for 100, dominates plan
    B, 11 days (slow end 11.5) for 110. A deadline of 11.6 days at the slow end drops A and keeps B: B must then
    be on the front, though it was not on the front of the whole table."""
    import pandas as pd

    from llmsizing.planner import plans_where

    df = pd.DataFrame({"gpu": ["X", "Y", "Y"], "days": [10.0, 11.0, 13.0], "days_high": [12.0, 11.5, 14.0],
                       "cost_usd": [100.0, 110.0, 120.0], "memory_per_gpu_bytes": [1.0, 1.0, 1.0],
                       "pareto": [True, False, False]})
    df.attrs["stack"] = "unknown"
    out = plans_where(df, (df["days_high"] <= 11.6).to_numpy())
    assert list(out["gpu"]) == ["Y"] and list(out["pareto"]) == [True] and out.attrs == df.attrs
    out = plans_where(df, (df["days_high"] <= 20).to_numpy())
    assert list(out["pareto"]) == [True, False, False]


def test_the_budget_line_says_which_cost_it_is_held_to():
    """Issue 34: the figure's dots are point costs, but the default rule holds the budget to each plan's slow
    end. The budget's line says so, the chosen plan's slow end is drawn, and the axes reach the line. By hand:
    Llama 3 8B on 1T tokens (SMALL's run); its cheapest plan on H100s at its point cost c, and its slow end c /
    low, the low MFU factor of the pooled training-layout row of data/intervals.csv (an H100 in BF16 without a
    stack takes it; read from the file). A budget of 1.2 c / low keeps it by either rule."""
    run = dict(SMALL, tokens=1e12)
    cheap = plan("llama-3-8b", **run).iloc[0]
    assert cheap.gpu == "H100 SXM"
    slow = cheap.cost_usd / pooled_layout_factors()[0]
    budget = round(1.2 * slow, -3)
    for rule, said in (("slow_end", "vs slow-end costs (diamond: chosen)"),
                       ("estimate", "vs point costs (the dots)")):
        view = render_plan("llama-3-8b", **run, budget_usd=budget, deadline_rule=rule)
        ax = view.figure.axes[0]
        assert f"budget ${budget / 1e3:,.0f}k {said}" in [t.get_text() for t in ax.texts]
        lo, hi = ax.get_ylim()
        assert lo < budget < hi and lo < slow < hi
        diamond = next(line for line in ax.lines if line.get_label() == "chosen plan, slow end of its range")
        assert float(diamond.get_ydata()[0]) == pytest.approx(slow, rel=1e-4)
        assert "within the budget at the slow end of its range: yes" in view.summary
    # no limit: no diamond, no text, the figure as before
    ax = render_plan("llama-3-8b", **run).figure.axes[0]
    assert not [line for line in ax.lines if "slow end" in str(line.get_label())]
    assert not [t for t in ax.texts if t.get_text().startswith("budget")]
