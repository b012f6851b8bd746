"""Zero bubble (ZB-H1) and DualPipe on stages of unequal work (issue 35, zb40): the layouts
(llmsizing.pipeline_unequal, fixed orders at each stage's own times), ZB1P's closed form and the step model's
bubble (moe_time.schedule_bubble with stage_times).

Worked by hand, ZB-H1 on 2 stages, 3 micro-batches (Qi et al. 2024, Fig. 3's order for equal stages: stage 0
F0 F1 B0 W0 F2 B1 W1 B2 W2, stage 1 F0 B0 F1 B1 W0 F2 B2 W1 W2; B the input gradient, W the weight
gradient, each half the backward).

* Slow last stage (stage 0: F 1, B 1, W 1; stage 1: F 2, B 2, W 2): stage 0 F0 [0, 1], F1 [1, 2]; stage 1
  F0 [1, 3], B0 [3, 5], F1 [5, 7], B1 [7, 9], W0 [9, 11]; stage 0 B0 [5, 6], W0 [6, 7], F2 [7, 8], B1 [9, 10],
  W1 [10, 11]; stage 1 F2 [11, 13], B2 [13, 15], W1 [15, 17], W2 [17, 19]; stage 0 B2 [15, 16], W2 [16, 17].
  The step ends at 19 = m x max + (sum - max) / 3 = 3 x 6 + 3 / 3: the closed form, exact.
* Slow first stage (stage 0: F 2, B 2, W 2; stage 1: 1, 1, 1): stage 0 F0 [0, 2], F1 [2, 4]; stage 1 F0
  [2, 3], B0 [3, 4], F1 [4, 5], B1 [5, 6], W0 [6, 7]; stage 0 B0 [4, 6], W0 [6, 8], F2 [8, 10], B1 [10, 12],
  W1 [12, 14]; stage 1 F2 [10, 11], B2 [11, 12], W1 [12, 13], W2 [13, 14]; stage 0 B2 [14, 16], W2 [16, 18].
  Stage 0 never idles: 18 = 3 x 6, below the closed form's 19 (an upper bound there).
"""

import random

import pytest

from llmsizing.moe_time import schedule_bubble
from llmsizing.pipeline_schedule import dualpipe_makespan, pipeline_schedule
from llmsizing.pipeline_unequal import fixed_order_times, unbalanced_1f1b_makespan, zb1p_makespan


def _zb(f, m):
    return pipeline_schedule("zero-bubble", pp=len(f), micro_batches=m, forward=tuple(f),
                             backward=tuple(2 * x for x in f))


def test_zb_h1_two_stages_slow_last_by_hand():
    s = _zb((1, 2), 3)
    ends = {(o.stage, o.kind, o.micro_batch): o.end for o in s.ops}
    assert ends[(1, "W", 0)] == 11 and ends[(0, "W", 1)] == 11 and ends[(1, "F", 2)] == 13
    assert ends[(0, "B", 2)] == 16 and s.makespan == 19 == zb1p_makespan((3, 6), 3)


def test_zb_h1_two_stages_slow_first_by_hand():
    s = _zb((2, 1), 3)
    ends = {(o.stage, o.kind, o.micro_batch): o.end for o in s.ops}
    assert ends[(0, "F", 2)] == 10 and ends[(1, "W", 2)] == 14 and ends[(0, "B", 2)] == 16
    assert s.makespan == 18 == s.ideal < zb1p_makespan((6, 3), 3) == 19


def test_zb_h1_equal_stages_keep_the_equal_time_layout():
    # (p - 1) F of idle: 4 stages, 8 micro-batches, F 1: 8 x 3 + 3 = 27, the (p - 1) / (3m) = 1/8 bubble
    s = _zb((1.0,) * 4, 8)
    assert s.makespan == 27 == zb1p_makespan((3,) * 4, 8) and s.bubble_fraction == pytest.approx(1 / 8)


@pytest.mark.parametrize("m", [4, 8, 9])
def test_zb_h1_slow_last_stage_is_the_fill_plus_its_work(m):
    # 4 stages, the last at F 2 (t 6), the others F 1 (t 3): the last stage cannot start before the three
    # forwards ahead of it (3) and then works m x 6, so 3 + 6m is a lower bound; the closed form
    # m x 6 + (15 - 6) / 3 is that same number, and the layout reaches it
    assert _zb((1, 1, 1, 2), m).makespan == 3 + 6 * m == zb1p_makespan((3, 3, 3, 6), m)


def test_zb_h1_closed_form_bounds_random_stage_sets():
    # the bound on 200 random stage sets (forward a third of each stage's time), never more than 1F1B's
    # m x max + (sum - max)
    rng = random.Random(40)
    for _ in range(200):
        p = rng.choice([2, 3, 4, 6, 8, 12, 16])
        m = rng.choice([p, p + 1, 2 * p, 3 * p + 1])
        f = [rng.uniform(0.5, 2.0) for _ in range(p)]
        t = [3 * x for x in f]
        s = _zb(f, m)
        lay = s.makespan
        assert m * max(t) <= lay + 1e-9 and lay <= zb1p_makespan(t, m) + 1e-9
        assert max(s.in_flight) <= p                     # the order keeps ZB-H1's memory bound, p in flight
        assert zb1p_makespan(t, m) <= m * max(t) + sum(t) - max(t)


def test_zb_h1_unequal_layout_is_continuous_in_the_times():
    # a fixed order: a stage 0.1% slower moves the step by at most m x 0.1% of its time (8 x 0.003)
    base = _zb((1.0,) * 8, 8).makespan
    for k in range(8):
        f = [1.0] * 8
        f[k] = 1.001
        assert base <= _zb(f, 8).makespan <= base + 8 * 0.003 + 1e-9


def test_dualpipe_equal_stages_are_the_reports_table():
    # 4 ranks, 8 micro-batches, t 3 a stage: (p/2 - 1)(F&B + B - 3W) = 1 x (3 + 2 - 3) = 2 over 8 x 3
    assert dualpipe_makespan((3.0,) * 4, 8) == pytest.approx(26)
    assert schedule_bubble("dualpipe", 4, 8, stage_times=(3.0,) * 4) == pytest.approx(2 / 24)


def test_dualpipe_slow_end_stage_reaches_the_slowest_ranks_work():
    # stage 3 at t 6, the others 3: rank 0 holds stages 0 and 3 and runs 4 micro-batches through each,
    # 4 x (3 + 6) = 36, a lower bound on the step; the layout reaches it, no bubble, where the table at the
    # slowest rank's speed charged 1 x 2/3 x 4.5 = 3 more
    assert dualpipe_makespan((3.0, 3.0, 3.0, 6.0), 8) == pytest.approx(36)
    assert schedule_bubble("dualpipe", 4, 8, stage_times=(3.0, 3.0, 3.0, 6.0)) == pytest.approx(0, abs=1e-12)
    assert schedule_bubble("dualpipe", 4, 8) == pytest.approx(3 / 36)


def test_zb1p_bubble_from_stage_times():
    # 4 stages, the last 6, the others 3, 8 micro-batches: (15 - 6) / (3 x 8 x 6) = 1/16, where the table at
    # the slowest stage's speed said (4 - 1) / (3 x 8) = 1/8
    assert schedule_bubble("zb1p", 4, 8, stage_times=(3.0, 3.0, 3.0, 6.0)) == pytest.approx(1 / 16)
    assert schedule_bubble("zb1p", 4, 8) == pytest.approx(1 / 8)
    with pytest.raises(ValueError, match="stage_times needs pp=4"):
        schedule_bubble("zb1p", 4, 8, stage_times=(3.0, 6.0))
    with pytest.raises(ValueError, match="virtual_stages must be 1"):
        schedule_bubble("dualpipe", 4, 8, 2, stage_times=(3.0,) * 4)


def test_bad_input_is_refused_by_name():
    with pytest.raises(TypeError, match="stage_times"):
        zb1p_makespan(3.0, 8)
    with pytest.raises(ValueError, match=r"stage_times\[1\]"):
        dualpipe_makespan((3.0, -1.0, 3.0, 3.0), 8)
    with pytest.raises(ValueError, match="micro_batches"):
        zb1p_makespan((3.0, 3.0), 0)
    with pytest.raises(TypeError, match="stage_times"):
        dualpipe_makespan(3.0, 8)
    assert unbalanced_1f1b_makespan((3, 6), 2) == 15        # (moved: still importable from both modules)
    with pytest.raises(RuntimeError, match="deadlocked"):
        fixed_order_times([[("F", 0)], [("F", 0)]], lambda i, op: [(1 - i, op)], lambda i, op: 1.0)


def _row_stage_times(schedule):
    from llmsizing.comm import stage_compute_times_s
    from llmsizing.moe_evidence import _row_skew
    from llmsizing.moe_runs import _model, moe_published_runs, run_step
    from llmsizing.precision import compute_dtype

    runs = moe_published_runs()
    row = runs[runs["schedule"] == schedule].iloc[0]
    st = run_step(row)
    par = st.communication.parallel
    m, model = int(row["global_batch"]) // par.dp, _model(row["model"])
    times = stage_compute_times_s(model, par, batch=1, seq=int(row["seq"]), gpu=row["gpu"], grad_accum=m,
                                  recompute=row["recompute"], dtype=compute_dtype(row["precision"]),
                                  mtp_depth=int(row["mtp_depth"]), comm_sms=int(row["comm_sms"]),
                                  load_skew=_row_skew(row, model, par.ep))
    return st, par.pp, m, [t / m for t in times]


def test_step_time_prices_zb1p_at_each_stages_speed():
    # DeepSeek-V2's row (ZB1P, 16 stages, 72 micro-batches, its last stage the slowest): the step's bubble is
    # (sum - max) / (3 m max) of its stages, the layout's own, below the table's 15 / (3 x 72) = 0.0694
    # charged at the slowest stage's speed before zb40
    st, p, m, t = _row_stage_times("zb1p")
    assert (p, m) == (16, 72) and t.index(max(t)) == p - 1
    assert st.bubble == pytest.approx((sum(t) - max(t)) / (3 * m * max(t)), rel=1e-12)
    lay = _zb([x / 3 for x in t], m)
    assert lay.bubble_fraction == pytest.approx(st.bubble, rel=1e-9)
    assert st.bubble < 15 / 216


def test_step_time_prices_dualpipe_from_its_layout():
    # DeepSeek-V3's row (DualPipe, 16 stages, 120 micro-batches; stage 0 three layers, the last two with the
    # output layer and the MTP module): the bubble is the layout's over m x the slowest rank's mean, below
    # the table's (8 - 1) x 2 / (3 x 120) = 0.0389 at that rank's speed
    st, p, m, t = _row_stage_times("dualpipe")
    assert (p, m) == (16, 120)
    top = max((t[i] + t[p - 1 - i]) / 2 for i in range(p))
    assert st.compute_s == pytest.approx(m * top, rel=1e-12)
    assert st.bubble == pytest.approx((dualpipe_makespan(t, m) - m * top) / (m * top), rel=1e-12)
    assert st.bubble < 7 * 2 / 360
