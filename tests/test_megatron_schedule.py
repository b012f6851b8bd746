"""Megatron-Core's own pipeline schedules, timed with stages of unequal work (issue 35; meg40, session 40).

``data/megatron_schedule_measured.csv`` (tools/measure/megatron_schedule.py) ran megatron-core's
``forward_backward_pipelining_without_interleaving`` and ``..._with_interleaving`` (schedules.py) under gloo,
pp = 2..4 processes on one machine, each stage one autograd function sleeping ``u`` forward and ``2u``
backward (u = 30 ms; a slow stage 2u and 4u), the whole call timed on one clock, the median of 5 runs.

Worked by hand, with ``t = 3u`` an ordinary stage's forward + backward and ``2t`` the slow stage's:

* equal stages: ``(m + (pp - 1) / v) t`` (Narayanan et al. 2021; Megatron's order, stage i running
  pp - i - 1 warm-up forwards);
* slow last stage: it runs its ``m`` micro-batches back to back after a fill of ``pp - 1`` forwards ``u``
  and before a drain of ``pp - 1`` backwards ``2u`` (one chunk's, ``/ v``, interleaved):
  ``2 t m + (pp - 1) t / v``;
  the step model before session 39 charged the fill and drain at the slow stage's speed:
  ``(m + (pp - 1) / v) 2t``;
* slow first stage, m >= pp: its ``pp`` forwards (warm-up and the first steady one) end at ``2u pp``; the
  first backward's gradient comes back at ``2u + (pp - 1) u + (pp - 1) 2u``, so it waits ``(pp - 1) u`` once
  and is busy otherwise, its last backward ending the step: ``2 t m + (pp - 1) u``. The closed form
  ``2 t m + (pp - 1) t`` is an upper bound by ``2 (pp - 1) u`` (60 ms at pp = 4).

What each row measures beyond the ideal layout is the run's overhead: a sleep's wake-up, gloo's
send/recv over loopback and the schedule's Python, paid once per operation on the critical path, which holds
``n = 2 (m v + pp - 1)`` operations. In the equal-stage rows (where every formula above is exact) it came
to 1.1-2.4 ms per operation for 1F1B and 2.3-3.3 ms interleaved (more sends and receives per operation); the
same per operation as in a first run with u = 10 ms (0.9-1.9, 1.3-2.3), so a cost per operation, not a
share of the stage time. The median spread of one row's 5 runs was 0.65 and 1.07 ms per operation (a shared
2-core machine). The band is ``0 <= measured - ideal <= TOL x n``, TOL the largest equal-row excess plus
that spread: 3.0 ms (1F1B) and 4.3 ms (interleaved). With u = 30 ms, charging one stage's fill or drain at
the wrong speed (>= u) falls outside it for every row.
"""

import csv
from pathlib import Path

import pytest

from llmsizing.moe_time import schedule_bubble
from llmsizing.pipeline_schedule import pipeline_schedule, unbalanced_1f1b_makespan

CSV = Path(__file__).resolve().parents[1] / "data" / "megatron_schedule_measured.csv"
TOL_MS_PER_OP = {1: 3.0, 2: 4.3}                     # by virtual_stages
ROWS = list(csv.DictReader(CSV.open()))
#: The first run, u = 10 ms (``--unit-ms 10``): the same cases, the same overhead per operation.
ROWS_U10 = list(csv.DictReader((CSV.parent / "megatron_schedule_measured_u10.csv").open()))


def _row(r):
    f = tuple(float(x) for x in r["stage_forward_ms"].split(";"))
    b = tuple(float(x) for x in r["stage_backward_ms"].split(";"))
    p, m, v = int(r["pp"]), int(r["micro_batches"]), int(r["virtual_stages"])
    return f, b, p, m, v, float(r["makespan_ms"]), 2 * (m * v + p - 1)


def _library(f, b, p, m, v):
    """The closed form and the simulated layout, for the stage times of a row."""
    closed = unbalanced_1f1b_makespan(tuple(x + y for x, y in zip(f, b)), m, v)
    kind = "interleaved" if v > 1 else "1f1b"
    sim = pipeline_schedule(kind, pp=p, micro_batches=m, virtual_stages=v, forward=f, backward=b).makespan
    return closed, sim


def _in_band(measured, ideal, n, v):
    return 0 <= measured - ideal <= TOL_MS_PER_OP[v] * n


def test_the_csv_says_what_ran():
    assert len(ROWS) == 104
    for r in ROWS:
        assert r["megatron_core_version"] and r["torch_version"] and r["as_of"]
        assert "megatron-core" in r["source"]
        assert float(r["makespan_min_ms"]) <= float(r["makespan_ms"]) <= float(r["makespan_max_ms"])
    u = {float(x) for r in ROWS for x in r["stage_forward_ms"].split(";")}
    assert u == {30.0, 60.0}                           # u and a slow stage's 2u, per the docstring


@pytest.mark.parametrize("r", [r for r in ROWS if r["slow_stage"] == "equal"], ids=lambda r: r["case"])
def test_equal_stages(r):
    f, b, p, m, v, measured, n = _row(r)
    t = 90.0
    hand = (m + (p - 1) / v) * t
    closed, sim = _library(f, b, p, m, v)
    assert closed == pytest.approx(hand) and sim == pytest.approx(hand)
    assert _in_band(measured, hand, n, v), (measured, hand, n)


@pytest.mark.parametrize("r", [r for r in ROWS if r["slow_stage"] == "last" and r["slow_extra_in"] == "even"],
                         ids=lambda r: f"{r['case']} pp{r['pp']} m{r['micro_batches']}")
def test_a_slow_last_stage_is_priced_exactly(r):
    """Session 39's pricing, checked against Megatron: within the band of ``2 t m + (pp - 1) t / v``, and
    below the pre-session-39 ``(m + (pp - 1) / v) 2t`` by more than the run's overhead."""
    f, b, p, m, v, measured, n = _row(r)
    t = 90.0
    hand = 2 * t * m + (p - 1) * t / v
    closed, sim = _library(f, b, p, m, v)
    assert closed == pytest.approx(hand) and sim == pytest.approx(hand)
    top = 2 * t                                        # the step model's bubble over m x the slowest stage
    stages = tuple(x + y for x, y in zip(f, b))
    assert m * top * (1 + schedule_bubble("1f1b", p, m, v, stage_times=stages)) == pytest.approx(hand)
    assert _in_band(measured, hand, n, v), (measured, hand, n)
    assert measured < (m + (p - 1) / v) * 2 * t


@pytest.mark.parametrize("r", [r for r in ROWS if r["slow_stage"] in ("first", "middle")],
                         ids=lambda r: f"{r['case']} pp{r['pp']} m{r['micro_batches']}")
def test_a_slow_stage_elsewhere_the_layout_tracks_megatron(r):
    """The simulated layout is Megatron's to within the band; the closed form bounds it above."""
    f, b, p, m, v, measured, n = _row(r)
    closed, sim = _library(f, b, p, m, v)
    assert closed >= sim - 1e-9
    assert _in_band(measured, sim, n, v), (measured, sim, n)


FIRST = [r for r in ROWS if r["case"] == "1f1b first" and int(r["micro_batches"]) >= int(r["pp"])]


@pytest.mark.parametrize("r", FIRST, ids=lambda r: f"pp{r['pp']} m{r['micro_batches']}")
def test_a_slow_first_stage_beats_the_closed_form(r):
    """By hand (docstring): ``2 t m + (pp - 1) u`` where the closed form says ``2 t m + (pp - 1) t``; Megatron
    comes in under the closed form on every such row."""
    f, b, p, m, v, measured, n = _row(r)
    u, t = 30.0, 90.0
    closed, sim = _library(f, b, p, m, v)
    assert sim == pytest.approx(2 * t * m + (p - 1) * u)
    assert closed == pytest.approx(2 * t * m + (p - 1) * t)
    assert _in_band(measured, sim, n, v) and measured < closed


@pytest.mark.parametrize("r", [r for r in ROWS if r["slow_extra_in"] == "last-chunk"],
                         ids=lambda r: f"pp{r['pp']} m{r['micro_batches']}")
def test_the_head_in_the_last_chunk_is_not_resolved(r):
    """Interleaved, the slow stage's extra all in its last chunk (where Megatron puts the output layer): the
    library splits a stage's time evenly over its chunks, and an ideal layout with per-chunk times gives the
    same makespan here (the last stage never idles either way: a one-off replay of pipeline_schedule's loop,
    session 40); measured, it is inside the same band as the even split."""
    f, b, p, m, v, measured, n = _row(r)
    t = 90.0
    closed, sim = _library(f, b, p, m, v)
    assert closed == pytest.approx(2 * t * m + (p - 1) * t / v) == pytest.approx(sim)
    assert _in_band(measured, sim, n, v), (measured, sim, n)


@pytest.mark.parametrize("r", ROWS_U10, ids=lambda r: f"{r['case']} pp{r['pp']} m{r['micro_batches']}")
def test_the_u10_run_sits_in_the_same_band(r):
    """At u = 10 ms the overhead per operation is the same, so the same band holds around the layout, and
    with a slow last stage the pre-session-39 price is above the measurement under 1F1B. Interleaved, the old
    price's excess ((pp - 1) t / v = 15-45 ms at u = 10) is inside the overhead: hence u = 30 in the main
    run."""
    f, b, p, m, v, measured, n = _row(r)
    assert {float(x) for x in r["stage_forward_ms"].split(";")} <= {10.0, 20.0}
    closed, sim = _library(f, b, p, m, v)
    assert _in_band(measured, sim, n, v), (measured, sim, n)
    if r["slow_stage"] == "last" and v == 1:
        assert measured < (m + (p - 1) / v) * max(x + y for x, y in zip(f, b))
