"""Chapter 12's page: the planner chart (charts.render_plan) and widget (widgets.planner_widget) show what
planner.plan computes. The reference here is plan() itself (the planner's own numbers are tested against the
scalar functions in tests/test_planner.py); these tests check that the page picks, labels and filters its rows
faithfully, and that an impossible request shows plan()'s NoPlanError message rather than a traceback."""

from __future__ import annotations

import functools

import pytest

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
    want = plan("llama-3-8b", **SMALL, deadline_days=7.0)
    want = want[want["pareto"]]
    labels = [o[0] for o in w.controls["choice"].options]
    assert len(labels) == len(want)
    for label, r in zip(labels, want.itertuples()):
        assert label.startswith(f"#") and f"{int(r.n_gpus):,} x {r.gpu}, tp={r.tp} pp={r.pp} dp={r.dp}," in label
    w.controls["deadline"].value = 0.0


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
