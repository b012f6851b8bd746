"""Pipeline schedules laid out in time (chapter 8, issue 38): the layout reproduces the published bubbles.

Expected values are the papers' closed forms, written out here: 1F1B's bubble is (p - 1) / m of the ideal time
(Narayanan et al. 2021, Sec. 2.2, Eq. 1), the interleaved schedule's (p - 1) / (v m) (Sec. 2.2.2), and ZB-H1's
bubble time is (p - 1)(T_F + T_B - T_W) (Qi et al. 2024, Sec. 3), which with T_B = T_W = T_F (a backward of
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
