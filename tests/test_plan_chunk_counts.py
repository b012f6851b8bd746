"""Issue 34, "one answer per question" (vp38): plan() searches every count of interleaved model chunks that
splits a pipeline stage's layers evenly, so its fastest plan of a layout is the fastest step_time prices
over those counts. Before, it tried the fewest and the most chunks only, and since every chunk after the
first reduces its gradients in a call of its own (Megatron-Core's bucket layout, session 37) the most
chunks no longer always win: chapter 11's H100 pipeline (TP8 PP2 DP256) was listed with 40 chunks a stage,
slower than the 20 that step_time prices for the same layout.

The intermediate count is worked out by hand from the library's documented formulas (the bubble of
Narayanan et al. 2021, Megatron-Core's bucket size and layout); the planner's rows are checked against
step_time over every count of equal chunks, enumerated here from the divisors of the stage's layers."""

import pytest

import llmsizing as L
from llmsizing.layouts import USABLE_FRACTION
from llmsizing.planner import plan, stage_chunk_options

L70 = "llama-3-70b"
CH11 = dict(tokens=1e12, gpus=("H100 SXM",), seq=8192, global_batch=512, max_gpus=16384)   # chapter 11's
KEY = ["gpu", "tp", "cp", "pp", "zero", "micro_batch", "dp"]


@pytest.fixture(scope="module")
def p70():
    return plan(L70, **CH11)


def test_every_even_count_is_searched():
    """Every divisor of the stage's layers (at most 64 chunks), and 1."""
    assert stage_chunk_options(20) == (1, 2, 4, 5, 10, 20)     # 20 = 2^2 x 5
    assert stage_chunk_options(40) == (1, 2, 4, 5, 8, 10, 20, 40)
    assert stage_chunk_options(9) == (1, 3, 9)
    assert stage_chunk_options(7) == (1, 7)                    # a prime: one layer per chunk only
    assert stage_chunk_options(128) == (1, 2, 4, 8, 16, 32, 64)     # 128 chunks: above MAX_VIRTUAL_STAGES
    assert stage_chunk_options(1) == (1,)
    assert stage_chunk_options(40, (3, 8, 20)) == (1, 8, 20)   # given: those that divide the stage, as before


def _step(v, model=L70):
    par = L.Parallel(tp=8, pp=2, dp=256, zero=1, sp=True, virtual_stages=v)
    return L.step_time(model, "H100 SXM", par, batch=1, seq=8192, grad_accum=2)


def test_an_intermediate_count_wins_by_hand(p70):
    """Llama 3 70B on H100s, TP8 PP2 DP256, ZeRO-1, one sequence of 8,192 tokens a micro-batch, m = 2.

    With ``v`` chunks a stage the step is ``compute + other / (v m)`` plus the exposed communication: the
    bubble, the fill and drain passing a chunk of the other stage at its own speed (session 39; ``compute
    (pp - 1) / (v m)`` for equal stages, Narayanan et al. 2021, Sec. 2.2), ``other`` the first stage's
    compute (40 layers and the embedding; the last, with the output layer, is the slowest). The tensor-parallel collectives and the ``2 (pp - 1)``
    exposed sends do not depend on ``v``. The data-parallel reduction runs ``n(v) = k(v) + v - 1`` calls
    per slot (Megatron-Core: only pipeline rank 0's first chunk is cut into buckets, ``k(v)`` of them, and
    each other chunk makes one call), each paying a latency ``a``. So, while a slot stays exposed,
    ``T(v) - T(w) = other / m (1/v - 1/w) + a (n(v) - n(w))`` for each exposed slot.

    Bucket size: ``max(40e6, 1e6 x dp) = 256e6`` parameters. Per tensor-parallel rank a layer holds
    ``(2 x 8192^2 + 2 x 8192 x 1024 + 3 x 8192 x 28672) / 8 = 107e6``, the embedding
    ``128256 x 8192 / 8 = 131e6``; a 40-chunk stage's first chunk holds 1 layer, a 20-chunk stage's 2, a
    10-chunk stage's 4. Gradients arrive last layer first and the embedding last, and a bucket closes
    once it holds 256e6: 1 layer + embedding = 238e6 and 2 layers + embedding = 345e6 make one bucket
    (the second closes only with the embedding, its last tensor), 4 layers + embedding = 559e6 make two
    (the first closes inside the layers; the rest, 303e6 or less with the embedding last, closes at the
    end). So ``n(40) = 1 + 39 = 40``, ``n(20) = 1 + 19 = 20``, ``n(10) = 2 + 9 = 11``.

    Which slots show: the gradients' reduce-scatter (0.21-0.24 s) hides behind the last micro-batch's
    backward (two thirds of one micro-batch's 0.55 s), the weights' all-gather does not behind the first
    forward (one third, 0.18 s): one exposed slot. With ``a`` the latency of one call and ``other`` the
    first stage's compute (read from step_time's stages at v = 1, inputs), ``m = 2``:

    * ``T(40) - T(20) = other / 2 x (1/40 - 1/20) + 20 a``: 1.0643 / 2 x (-0.025) = -13.3 ms of bubble
      against 20 x 1.122 ms = 22.4 ms more wait: 40 chunks are 9.1 ms slower;
    * ``T(10) - T(20) = other / 2 x (1/10 - 1/20) - 9 a``: +26.6 ms of bubble against 10.1 ms less wait:
      10 chunks are 16.5 ms slower.

    So 20 chunks, neither the fewest nor the most, is the fastest of these, and plan() lists it as the
    layout's fastest (main listed 40, the most)."""
    from llmsizing.comm import stage_compute_times_s

    one = _step(1)
    first, last = stage_compute_times_s(L70, one.communication.parallel, batch=1, seq=8192, gpu="H100 SXM",
                                        grad_accum=2)
    assert last == one.compute_s > first                         # the output layer's stage is the slowest
    other = first
    ag = next(c for c in one.communication.collectives if c.group == "dp" and c.slot == "weight all-gather")
    a = ag.latency_s / ag.calls                                  # one call's latency (16 calls at v = 1)
    t = {v: _step(v).step_s for v in (10, 20, 40)}
    want_40 = other / 2 * (1 / 40 - 1 / 20) + 20 * a
    want_10 = other / 2 * (1 / 10 - 1 / 20) - 9 * a
    assert t[40] - t[20] == pytest.approx(want_40, rel=1e-6)
    assert t[10] - t[20] == pytest.approx(want_10, rel=1e-6)
    assert want_40 > 0 and want_10 > 0                            # 20 beats both its neighbours
    rows = p70[(p70["tp"] == 8) & (p70["pp"] == 2) & (p70["dp"] == 256) & (p70["zero"] == 1)]
    best = rows.loc[rows["step_time_s"].idxmin()]
    assert best["virtual_stages"] == 20 and best["recompute"] == "none"
    assert best["step_time_s"] == pytest.approx(t[20], rel=1e-9)


def _even_counts(layers, pp, m):
    """The chunk counts Megatron-LM's interleaved schedule takes on an even split, by hand: 1, and every ``v``
    above 1 that divides the stage's layers with ``m`` a multiple of ``pp`` (its micro-batch groups)."""
    stage = layers // pp
    return [1] + [v for v in range(2, min(stage, 64) + 1) if stage % v == 0 and m % pp == 0]


def test_the_planners_fastest_row_is_step_times_fastest_count(p70):
    """For pipelined layouts of the chapter 11 search whose rows recompute nothing (so every count is priced
    with the same recomputation), the fastest listed row of each layout is the fastest step_time over every
    count of equal chunks that fits the usable memory: one answer, whatever the count."""
    model = L.get_model(L70)
    cap = USABLE_FRACTION * L.get_gpu("H100 SXM").memory_bytes
    pipes = p70[(p70["pp"] > 1) & (model.layers % p70["pp"] == 0)]
    groups = [g for _, g in pipes.groupby(KEY, sort=True) if (g["recompute"] == "none").all()]
    # the chapter's TP8 PP2 DP256, and the pipelined layouts of most and fewest GPUs searched
    picked = [g for g in groups if tuple(g.iloc[0][["tp", "pp", "dp"]]) == (8, 2, 256)]
    picked += sorted(groups, key=lambda g: int(g.iloc[0]["n_gpus"]))[:2]
    picked += sorted(groups, key=lambda g: -int(g.iloc[0]["n_gpus"]))[:2]
    assert len(picked) == 5
    for g in picked:
        r = g.iloc[0]
        steps = {}
        for v in _even_counts(model.layers, int(r["pp"]), int(r["grad_accum"])):
            par = L.Parallel(tp=int(r["tp"]), pp=int(r["pp"]), dp=int(r["dp"]), zero=int(r["zero"]),
                             sp=r["tp"] > 1, virtual_stages=v)
            kw = dict(batch=int(r["micro_batch"]), seq=8192, grad_accum=int(r["grad_accum"]))
            if L.training_memory(model, parallel=par, **kw).total_bytes <= cap:
                steps[v] = L.step_time(model, "H100 SXM", par, **kw).step_s
        fastest = min(steps, key=steps.get)
        best = g.loc[g["step_time_s"].idxmin()]
        assert best["virtual_stages"] == fastest, (tuple(r[KEY]), steps)
        assert best["step_time_s"] == pytest.approx(steps[fastest], rel=1e-9)
