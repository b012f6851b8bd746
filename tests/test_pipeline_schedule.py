"""Pipeline schedules laid out in time (chapter 8, issue 38): the layout reproduces the published bubbles.

Expected values are the papers' closed forms, written out here: 1F1B's bubble is (p - 1) / m of the ideal time
(Narayanan et al. 2021, Sec. 2.2, Eq. 1), the interleaved schedule's (p - 1) / (v m) (Sec. 2.2.2), and ZB-H1's
bubble time is (p - 1)(T_F + T_B - T_W) (Qi et al. 2024, Sec. 2.1), which with T_B = T_W = T_F (a backward of
2 T_F split in halves) is (p - 1) T_F, that is (p - 1) / (3 m) of the ideal 3 m T_F."""

import pytest

from llmsizing.pipeline_schedule import pipeline_schedule


@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 16), (8, 16), (8, 32)])
def test_1f1b_bubble_is_p_minus_1_over_m(p, m):
    s = pipeline_schedule("1f1b", pp=p, micro_batches=m)
    assert s.bubble_fraction == pytest.approx((p - 1) / m)
    assert s.makespan == pytest.approx((m + p - 1) * 3)          # forward 1 + backward 2 per slot


@pytest.mark.parametrize("p, m, v", [(4, 8, 2), (4, 16, 2), (8, 16, 2), (4, 8, 4)])
def test_interleaved_bubble_is_p_minus_1_over_v_m(p, m, v):
    s = pipeline_schedule("interleaved", pp=p, micro_batches=m, virtual_stages=v)
    assert s.bubble_fraction == pytest.approx((p - 1) / (v * m))


@pytest.mark.parametrize("p, m", [(4, 8), (4, 16), (8, 16), (8, 32)])
def test_zero_bubble_h1(p, m):
    s = pipeline_schedule("zero-bubble", pp=p, micro_batches=m)
    assert s.bubble_fraction == pytest.approx((p - 1) / (3 * m))


@pytest.mark.parametrize("p, m", [(4, 8), (4, 16), (8, 16), (8, 32)])
def test_zero_bubble_h1_holds_no_more_than_1f1b(p, m):
    """Qi et al. 2024, Sec. 2.1: ZB-H1 keeps the peak memory of 1F1B, whose first stage holds p micro-batches;
    a micro-batch is held from its forward until its W has run. Deferring every W to the cool-down (an earlier
    layout of this module) held all m on every stage."""
    s = pipeline_schedule("zero-bubble", pp=p, micro_batches=m)
    for i in range(p):
        events = sorted([(o.start, 1) for o in s.ops if o.stage == i and o.kind == "F"]
                        + [(o.end, -1) for o in s.ops if o.stage == i and o.kind == "W"])
        held = peak = 0
        for _, step in events:
            held += step
            peak = max(peak, held)
        assert peak == p


@pytest.mark.parametrize("kind", ["1f1b", "interleaved", "zero-bubble"])
def test_every_op_once_in_order_and_never_overlapping(kind):
    p, m, v = 4, 8, 2
    s = pipeline_schedule(kind, pp=p, micro_batches=m, virtual_stages=v)
    chunks = v if kind == "interleaved" else 1
    kinds = ("F", "B", "W") if kind == "zero-bubble" else ("F", "B")
    end = {(o.kind, o.stage, o.chunk, o.micro_batch): o.end for o in s.ops}
    start = {(o.kind, o.stage, o.chunk, o.micro_batch): o.start for o in s.ops}
    assert len(end) == len(s.ops) == p * m * chunks * len(kinds)
    for i in range(p):                                         # a stage runs one thing at a time
        mine = sorted((o.start, o.end) for o in s.ops if o.stage == i)
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(mine, mine[1:]))
    for c in range(chunks):                                    # data dependencies along the virtual pipeline
        for i in range(p):
            vs = c * p + i
            for mb in range(m):
                if vs > 0:
                    prev = ((vs - 1) // p, (vs - 1) % p)
                    assert start[("F", i, c, mb)] >= end[("F", prev[1], prev[0], mb)] - 1e-9
                if vs < p * chunks - 1:
                    nxt = ((vs + 1) // p, (vs + 1) % p)
                    assert start[("B", i, c, mb)] >= end[("B", nxt[1], nxt[0], mb)] - 1e-9


@pytest.mark.parametrize("kw, match", [(dict(kind="gpipe"), "kind"), (dict(pp=0), "pp"),
                                       (dict(kind="interleaved", pp=4, micro_batches=6), "multiple of pp"),
                                       (dict(forward=0), "forward")])
def test_bad_input_is_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        pipeline_schedule(**kw)


# ---------------------------------------------------------------------------------------------- DualPipe
@pytest.mark.parametrize("p, m", [(2, 4), (4, 8), (4, 20), (6, 12), (8, 16), (8, 20), (8, 32), (16, 32)])
def test_dualpipe_bubble_is_the_reports_table_2(p, m):
    """DeepSeek-V3 report, Table 2 (and the DualPipe README): DualPipe's bubble is (p/2 - 1)(F&B + B - 3W) with
    F a stage's forward, B its full backward, W the weights' half of it, F&B a forward and a backward run
    together. With F = 1, B = 2, W = 1 and F&B = F + B = 3 (overlap hides communication, not compute): 2 (p/2 -
    1) time units over the ideal 3 m, against 1F1B's 3 (p - 1)."""
    s = pipeline_schedule("dualpipe", pp=p, micro_batches=m)
    by_hand = (p / 2 - 1) * (3 + 2 - 3)
    assert s.makespan - s.ideal == pytest.approx(by_hand)
    assert s.bubble_fraction == pytest.approx(by_hand / (3 * m))
    for i in range(p):                                   # every rank idles the same: it holds two stages
        busy = sum(o.end - o.start for o in s.ops if o.stage == i)
        assert s.makespan - busy == pytest.approx(by_hand)


def test_dualpipe_runs_each_stage_of_each_micro_batch_once_in_its_direction():
    """Half the micro-batches flow from the first rank to the last (direction 0), half back (direction 1);
    rank i is stage i of direction 0 and stage p - 1 - i of direction 1. Every forward waits for the previous
    stage's, every backward (its input-gradient part) for the next stage's, and each rank does one thing at a
    time."""
    p, m = 4, 8
    s = pipeline_schedule("dualpipe", pp=p, micro_batches=m)
    stage = {(0, i): i for i in range(p)} | {(1, i): p - 1 - i for i in range(p)}
    f = {(o.chunk, stage[(o.chunk, o.stage)], o.micro_batch): o for o in s.ops if o.kind == "F"}
    b = {(o.chunk, stage[(o.chunk, o.stage)], o.micro_batch): o for o in s.ops if o.kind == "B"}
    assert len(f) == len(b) == p * m                       # each (direction, stage, micro-batch) once
    assert {mb for d, _, mb in f if d == 0} == set(range(m // 2))
    for (d, k, mb), op in f.items():
        if k > 0:
            assert op.start >= f[(d, k - 1, mb)].end - 1e-9
    for (d, k, mb), op in b.items():
        assert op.start >= (b[(d, k + 1, mb)].end if k < p - 1 else f[(d, k, mb)].end) - 1e-9
    for i in range(p):
        mine = sorted((o.start, o.end) for o in s.ops if o.stage == i)
        assert all(x[1] <= y[0] + 1e-9 for x, y in zip(mine, mine[1:]))


@pytest.mark.parametrize("p, m", [(3, 8), (4, 6), (4, 9)])
def test_dualpipe_needs_even_stages_and_enough_micro_batches(p, m):
    with pytest.raises(ValueError, match="dualpipe schedule needs an even pp"):
        pipeline_schedule("dualpipe", pp=p, micro_batches=m)


def test_dualpipe_agrees_with_the_step_models_bubble():
    from llmsizing.moe_time import schedule_bubble

    for p, m in [(4, 8), (8, 20), (16, 64)]:
        assert pipeline_schedule("dualpipe", pp=p, micro_batches=m).bubble_fraction == pytest.approx(
            schedule_bubble("dualpipe", p, m))


# ------------------------------------------------------------------------------- the papers' closed forms
@pytest.mark.parametrize("kind, pp, kw, by_hand", [
    # DeepSeek-V3 report, Table 2, with F = 1, B = 2 (full backward), W = 1, F&B = 3, at p = 4:
    ("1f1b", 4, {}, 9.0),                       # (4 - 1)(1 + 2) = 9
    ("zero-bubble", 4, {}, 3.0),                # (4 - 1)(1 + 2 - 2) = 3: a third of 1F1B's
    ("dualpipe", 4, {}, 2.0),                   # (4/2 - 1)(3 + 2 - 3) = 2
    ("dualpipe", 8, {}, 6.0),                   # (8/2 - 1)(3 + 2 - 3) = 6
    ("interleaved", 4, {"virtual_stages": 2}, 4.5),   # Narayanan Sec. 2.2.2: (4 - 1)(1 + 2) / 2 = 4.5
    # B = 3F (the module docstring's other ratio), W = 1.5, F&B = 4: (8/2 - 1)(4 + 3 - 4.5) = 7.5
    ("dualpipe", 8, {"backward": 3.0}, 7.5),
    # DeepSeek's point: F&B overlapped below F + B, e.g. 2.5: (8/2 - 1)(2.5 + 2 - 3) = 4.5
    ("dualpipe", 8, {"forward_backward": 2.5}, 4.5),
])
def test_published_bubble_is_the_papers_formula(kind, pp, kw, by_hand):
    from llmsizing.pipeline_schedule import published_bubble
    assert published_bubble(kind, pp, **kw) == pytest.approx(by_hand)


@pytest.mark.parametrize("kind, pp, m", [("1f1b", 4, 8), ("zero-bubble", 4, 8), ("dualpipe", 4, 8),
                                         ("interleaved", 4, 8), ("zero-bubble", 8, 16)])
def test_layouts_idle_as_long_as_the_published_formula(kind, pp, m):
    """Chapter 8's figure: each layout's idle time equals its paper's closed form at F = 1, B = 2."""
    from llmsizing.pipeline_schedule import published_bubble
    s = pipeline_schedule(kind, pp=pp, micro_batches=m, virtual_stages=2)
    v = 2 if kind == "interleaved" else 1
    assert s.makespan - s.ideal == pytest.approx(published_bubble(kind, pp, virtual_stages=v))


@pytest.mark.parametrize("kw, match", [({"kind": "dualpipe", "pp": 5}, "pp"),
                                       ({"kind": "zero-bubble", "pp": 4, "forward": 0.1, "weight": 2.0},
                                        "weight"),
                                       ({"kind": "gpipe", "pp": 4}, "kind")])
def test_published_bubble_refuses_what_its_formula_cannot_say(kw, match):
    from llmsizing.pipeline_schedule import published_bubble
    with pytest.raises(ValueError, match=match):
        published_bubble(**kw)


# ------------------------------------------------------------------------------- activations held, per layout
@pytest.mark.parametrize("kind, p, m, by_hand", [
    ("1f1b", 4, 8, (4, 3, 2, 1)),                  # stage i: p - i - 1 warm-up forwards + 1 (Narayanan Sec. 2.2)
    # Megatron-LM's warm-up 2(p - i - 1) + (v - 1)p chunk forwards + 1, in chunks of 1/v: (6 + 4 + 1)/2 = 5.5, ...
    ("interleaved", 4, 8, (5.5, 4.5, 3.5, 2.5)),
    ("zero-bubble", 4, 8, (4, 4, 4, 4)),           # ZB-H1: no stage above 1F1B's first stage, p (Qi Sec. 2.1)
    ("dualpipe", 4, 8, (5, 5, 5, 5)),              # DeepSeek-V3 report, Table 2: PP + 1 on every rank
    ("dualpipe", 8, 16, (9,) * 8),
])
def test_in_flight_is_the_papers_count(kind, p, m, by_hand):
    s = pipeline_schedule(kind, pp=p, micro_batches=m, virtual_stages=2)
    assert s.in_flight == pytest.approx(by_hand)


# ------------------------------------------------ interleaved counts that are not a multiple of pp (issue 34)
def test_megatron_core_runs_a_count_that_is_not_a_multiple_of_pp_at_the_same_bubble():
    """Megatron-Core (schedules.py, forward_backward_pipelining_with_interleaving, since MR !2117) runs m = 3
    micro-batches on pp = 2 stages with v = 2 in one group of N = 3 (microbatch_group_size_per_vp_stage).
    By hand, chunks of 0.5 (forward) and 1.0 (backward); order from get_schedule_table, warm-up
    2(p - i - 1) + (v - 1)N = 5 and 3 chunk forwards:
    stage 0 forwards F0c0 F1c0 F2c0 end at 1.5, stage 1's at 2.0; stage 0 runs F0c1 F1c1 F2c1 by 3.0; stage 1
    F0c1 [2, 2.5] B0c1 [2.5, 3.5] F1c1 [3.5, 4] B1c1 [4, 5] F2c1 [5, 5.5] B2c1 [5.5, 6.5]; stage 0 B0c1
    [3.5, 4.5] B1c1 [5, 6] B2c1 [6.5, 7.5]; stage 1 B0c0 [6.5, 7.5] B1c0 [7.5, 8.5] B2c0 [8.5, 9.5]; stage 0
    B0c0 [7.5, 8.5] B1c0 [8.5, 9.5] B2c0 [9.5, 10.5]. Makespan 10.5 against an ideal 3 x (1 + 2) = 9: a bubble
    of 1.5 / 9 = 1/6, which is (p - 1) / (v m) = 1 / (2 x 3)."""
    from llmsizing.parallel import pipeline_bubble

    s = pipeline_schedule("interleaved", pp=2, micro_batches=3, virtual_stages=2, microbatch_group=3)
    assert s.makespan == pytest.approx(10.5)
    assert s.bubble_fraction == pytest.approx(1 / 6)
    assert pipeline_bubble(2, 3, 2) == pytest.approx(1 / 6)                   # any group Megatron-Core runs
    assert pipeline_bubble(2, 3, 2, microbatch_group=3) == pytest.approx(1 / 6)
    by_stage = {i: [(o.kind, o.micro_batch, o.chunk, o.start) for o in s.ops if o.stage == i] for i in (0, 1)}
    assert by_stage[0][3:6] == [("F", 0, 1, 1.5), ("F", 1, 1, 2.0), ("F", 2, 1, 2.5)]
    assert by_stage[1][-3:] == [("B", 0, 0, 6.5), ("B", 1, 0, 7.5), ("B", 2, 0, 8.5)]


@pytest.mark.parametrize("p, m, group, match", [
    (2, 3, None, "microbatch_group"),            # Megatron-Core's default N = pp leaves a last group of 1
    (2, 3, 2, "last group of 1, fewer than pp=2"),
    (4, 10, 6, None),                            # 10 mod 6 = 4 >= 4: allowed
    (4, 10, 7, "last group of 3"),
    (4, 10, 11, "microbatch_group"),             # N > m
    (4, 10, 3, "microbatch_group"),              # N < pp
    (4, 3, None, "fewer than pp=4"),             # m < pp: no group can be in [pp, m]
])
def test_the_group_rule_is_megatron_cores(p, m, group, match):
    """schedules.py: N in [pp, m] (ValueError there) and m mod N either 0 or >= pp (RuntimeError there)."""
    from llmsizing.parallel import pipeline_bubble

    if match is None:
        assert pipeline_schedule("interleaved", pp=p, micro_batches=m, virtual_stages=2,
                                 microbatch_group=group).bubble_fraction == pytest.approx((p - 1) / (2 * m))
        assert pipeline_bubble(p, m, 2, microbatch_group=group) == pytest.approx((p - 1) / (2 * m))
        return
    with pytest.raises(ValueError, match=match):
        pipeline_schedule("interleaved", pp=p, micro_batches=m, virtual_stages=2, microbatch_group=group)
    if group is not None or m < p:
        with pytest.raises(ValueError, match=match.replace("micro_batches", "microbatches")):
            pipeline_bubble(p, m, 2, microbatch_group=group)


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("v", [2, 3])
def test_every_group_megatron_core_allows_idles_p_minus_1_over_v_m(p, v):
    """Every (m, N) the rule allows, laid out, idles (p - 1) / (v m); an allowed m below pp does not exist."""
    for m in range(p, 3 * p + 3):
        for n in range(p, m + 1):
            if 0 < m % n < p:
                continue
            s = pipeline_schedule("interleaved", pp=p, micro_batches=m, virtual_stages=v, microbatch_group=n)
            assert s.bubble_fraction == pytest.approx((p - 1) / (v * m), abs=1e-12), (m, n)
