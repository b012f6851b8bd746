"""The planner (llmsizing.planner.plan): every row it returns is what the scalar functions say, fits, and
the Pareto front is the front."""

import numpy as np
import pytest

import llmsizing as L
from llmsizing.layouts import step_time
from llmsizing.planner import NoPlanError, PLAN_COLUMNS, plan, recompute_kwargs

SEQ = 4096


@pytest.fixture(scope="module")
def p70():
    return plan("llama-3-70b", tokens=1e12, gpus=("H100 SXM", "A100 80GB"), seq=SEQ, global_batch=512,
                max_gpus=2048)


def _row_par(r):
    """The row's layout, interleaving and the pipeline split included (issue 34: Job.from_plan_row)."""
    from llmsizing.job import Job

    return Job.from_plan_row(r, "llama-3-70b", seq=SEQ).parallel


def test_columns_and_shape(p70):
    assert tuple(p70.columns) == PLAN_COLUMNS and len(p70) > 50
    assert (p70["micro_batch"] * p70["grad_accum"] * p70["dp"] == 512).all()
    assert (p70["tp"] * p70["pp"] * p70["dp"] == p70["n_gpus"]).all() and (p70["n_gpus"] <= 2048).all()
    assert ((p70["pp"] == 1) | (p70["grad_accum"] >= p70["pp"])).all()
    assert p70["cost_usd"].is_monotonic_increasing


def test_memory_is_training_memory_exactly(p70):
    rows = p70.sample(25, random_state=0)
    for r in rows.itertuples():
        t = L.training_memory("llama-3-70b", batch=int(r.micro_batch), seq=SEQ, grad_accum=int(r.grad_accum),
                              parallel=_row_par(r), **recompute_kwargs(r))
        assert r.memory_per_gpu_bytes == pytest.approx(t.total_bytes, rel=1e-9)
        assert r.memory_per_gpu_bytes <= 0.9 * L.get_gpu(r.gpu).memory_bytes


def test_heavier_recompute_only_when_lighter_does_not_fit(p70):
    order = ["none", "selective", "full"]
    for r in p70[p70["recompute"] != "none"].sample(10, random_state=1).itertuples():
        lighter = order[order.index(r.recompute) - 1]
        t = L.training_memory("llama-3-70b", batch=int(r.micro_batch), seq=SEQ, grad_accum=int(r.grad_accum),
                              recompute=lighter, parallel=_row_par(r))
        assert t.total_bytes > 0.9 * L.get_gpu(r.gpu).memory_bytes


def test_first_and_last_stage_hold_the_peak():
    for par in (L.Parallel(tp=2, pp=4, dp=2, zero=1, sp=True), L.Parallel(pp=8, dp=1), L.Parallel(tp=4, pp=5)):
        for m in (1, 2, 8, 16):
            full = L.training_memory("llama-3-70b", batch=2, seq=2048, grad_accum=m, parallel=par)
            ends = L.training_memory("llama-3-70b", batch=2, seq=2048, grad_accum=m, parallel=par,
                                     _stages=(0, par.pp - 1))
            assert ends.total_bytes == full.total_bytes


def test_time_and_money_follow_step_time(p70):
    for r in p70.sample(10, random_state=2).itertuples():
        st = step_time("llama-3-70b", r.gpu, _row_par(r), batch=int(r.micro_batch), seq=SEQ,
                       grad_accum=int(r.grad_accum), **recompute_kwargs(r))
        assert r.step_time_s == pytest.approx(st.step_s, rel=1e-12)
        steps = 1e12 / (512 * SEQ)
        assert r.days == pytest.approx(steps * st.step_s / 86400)
        assert r.cost_usd == pytest.approx(r.days * 24 * r.n_gpus * L.get_gpu(r.gpu).price_usd_per_gpu_hour)
        low, high = L.mfu.layout_range_factors(r.gpu)         # the range of an MFU from a layout (issue 34)
        assert r.days_low == pytest.approx(r.days / high) and r.days_high == pytest.approx(r.days / low)
        assert r.days_low < r.days < r.days_high
        flops = L.training_flops_per_token("llama-3-70b", seq=SEQ) * 512 * SEQ
        assert r.mfu == pytest.approx(flops / (st.step_s * r.n_gpus * L.get_gpu(r.gpu).bf16_dense_tflops * 1e12))


def test_pareto_front(p70):
    d, c, mem = (p70[k].to_numpy() for k in ("days", "cost_usd", "memory_per_gpu_bytes"))
    front = p70["pareto"].to_numpy()
    for i in range(len(p70)):
        dominated = ((d <= d[i]) & (c <= c[i]) & ((d < d[i]) | (c < c[i]))).any()
        tie_with_less_memory = ((d == d[i]) & (c == c[i]) & (mem < mem[i])).any()
        if dominated:
            assert not front[i]
        elif not tie_with_less_memory:          # an exact tie on all three: one of the group is on the front
            group = (d == d[i]) & (c == c[i]) & (mem == mem[i])
            assert front[group].sum() == 1
    # one plan per (days, cost) on the front, and along it every faster plan costs more
    on = p70[p70["pareto"]].sort_values("days")
    assert not on.duplicated(["days", "cost_usd"]).any() and len(on) >= 1
    assert (on["cost_usd"].to_numpy()[1:] < on["cost_usd"].to_numpy()[:-1]).all()


def test_best_plans_land_in_the_calibrated_range(p70):
    """The planner's MFU comes from the step model (kernel efficiency, bubble, exposed communication); the
    end-to-end calibration (fitted on published runs without layouts too) must not contradict it: every front
    plan's MFU lies inside that GPU generation's calibrated range."""
    for r in p70[p70["pareto"]].itertuples():
        est = L.time_cost.mfu_estimate("llama-3-70b", gpu=r.gpu, seq=SEQ, recompute=r.recompute)
        assert est.low <= r.mfu <= est.high, (r.gpu, r.n_gpus, r.mfu, est)


def test_deadline_and_budget_filter(p70):
    fast = plan("llama-3-70b", tokens=1e12, gpus=("H100 SXM", "A100 80GB"), seq=SEQ, global_batch=512,
                max_gpus=2048, deadline_days=30, budget_usd=2e6, deadline_rule="slow_end")
    assert len(fast) and (fast["days_high"] <= 30).all() and (fast["cost_usd_high"] <= 2e6).all()
    assert len(fast) < len(p70)
    est = plan("llama-3-70b", tokens=1e12, gpus=("H100 SXM", "A100 80GB"), seq=SEQ, global_batch=512,
               max_gpus=2048, deadline_days=30, budget_usd=2e6, deadline_rule="estimate")
    assert (est["days"] <= 30).all() and (est["cost_usd"] <= 2e6).all() and len(est) > len(fast)


def test_nothing_fits_is_explained():
    with pytest.raises(NoPlanError, match="no layout holds llama-3.1-405b.*max_gpus=8"):
        plan("llama-3.1-405b", tokens=1e12, seq=8192, global_batch=64, max_gpus=8)
    empty = plan("llama-3.1-405b", tokens=1e12, seq=8192, global_batch=64, max_gpus=8, explain=False)
    assert empty.empty and tuple(empty.columns) == PLAN_COLUMNS


def test_impossible_deadline_names_the_fastest():
    with pytest.raises(NoPlanError, match=r"none meets deadline_days=1: the fastest takes"):
        plan("llama-3-70b", tokens=1e12, seq=SEQ, global_batch=256, max_gpus=256, deadline_days=1)


@pytest.mark.parametrize("kw, exc, msg", [
    (dict(tokens=0), ValueError, "tokens"), (dict(global_batch=0), ValueError, "global_batch"),
    (dict(gpus="H100 SXM"), TypeError, "gpus"), (dict(gpus=["H1000"]), ValueError, "GPU"),
    (dict(micro_batches=[0]), ValueError, "micro_batches"), (dict(recomputes=["some"]), ValueError, "recomputes"),
    (dict(zero_stages=[4]), ValueError, "zero_stages"), (dict(overlap=1.5), ValueError, "overlap"),
    (dict(deadline_days=-1), ValueError, "deadline_days"), (dict(prices={"H100 SXM": -2}), ValueError, "prices"),
    (dict(kernel_efficiency=0), ValueError, "kernel_efficiency"),
    (dict(inter_node_gbps=True), TypeError, "inter_node_gbps"), (dict(stack="megatron"), ValueError, "stack"),
])
def test_bad_input_is_named(kw, exc, msg):
    base = dict(tokens=1e9, seq=2048, global_batch=64, max_gpus=64)
    with pytest.raises(exc, match=msg):
        plan("llama-3-8b", **{**base, **kw})


def test_prices_parameter_scales_cost():
    a = plan("llama-3-8b", tokens=1e11, seq=2048, global_batch=64, max_gpus=64)
    b = plan("llama-3-8b", tokens=1e11, seq=2048, global_batch=64, max_gpus=64, prices={"H100 SXM": 1.0})
    price = L.get_gpu("H100 SXM").price_usd_per_gpu_hour
    assert np.allclose(np.sort(b["cost_usd"].to_numpy()) * price, np.sort(a["cost_usd"].to_numpy()))


def test_the_kept_search_gives_what_a_fresh_search_gives(monkeypatch):
    """plan() keeps its token-independent search (planner._search): another token budget, deadline or budget
    reuses it. The result must equal a search from scratch, bit for bit, and a caller changing the returned table
    must not change what later calls get."""
    from llmsizing import planner

    import pandas as pd

    kw = dict(gpus=("H100 SXM", "A100 80GB"), seq=4096, global_batch=256, max_gpus=512)
    search, returned = planner._search, []
    monkeypatch.setattr(planner, "_search", lambda *args, **kw: returned.append(search(*args, **kw))
                        or returned[-1])
    first = plan("llama-3-8b", tokens=1e11, **kw)
    first.loc[:, "gpu"] = "nonsense"                          # a caller scribbling on what it got
    table = returned[-1]                                      # the table the search keeps
    columns, digest = list(table.columns), int(pd.util.hash_pandas_object(table).sum())
    hits = search.cache_info().hits
    kept = plan("llama-3-8b", tokens=3e11, deadline_days=40, deadline_rule="slow_end", **kw)
    assert search.cache_info().hits == hits + 1 and returned[-1] is table   # the search was reused ...
    # ... and plan() added its columns to a copy: the kept table is as the search left it
    assert list(table.columns) == columns and int(pd.util.hash_pandas_object(table).sum()) == digest
    search.cache_clear()
    fresh = plan("llama-3-8b", tokens=3e11, deadline_days=40, deadline_rule="slow_end", **kw)
    assert search.cache_info().misses == 1                    # this one searched again
    assert kept.equals(fresh) and "nonsense" not in set(kept["gpu"])
    # the token budget scales days and cost, nothing else
    key = ["gpu", "n_gpus", "dp", "tp", "pp", "zero", "micro_batch", "grad_accum", "recompute"]
    one = plan("llama-3-8b", tokens=1e11, **kw).set_index(key).sort_index()
    three = plan("llama-3-8b", tokens=3e11, **kw).set_index(key).sort_index()
    assert one.index.equals(three.index)
    for col in ("days", "gpu_hours", "cost_usd", "cost_usd_high"):
        assert np.allclose(three[col], 3 * one[col], rtol=1e-12, atol=0), col
    assert three["step_time_s"].equals(one["step_time_s"]) and three["pareto"].equals(one["pareto"])



def test_a_kept_search_does_not_skip_the_input_checks():
    """True == 1 and hash(True) == hash(1): a search kept for inter_node_gbps=1 must not answer for True."""
    kw = dict(tokens=1e11, seq=2048, global_batch=64, max_gpus=64)
    plan("llama-3-8b", inter_node_gbps=1, **kw)
    with pytest.raises(TypeError, match="inter_node_gbps"):
        plan("llama-3-8b", inter_node_gbps=True, **kw)


@pytest.mark.parametrize("model, kw, limits", [
    ("llama-3.1-405b", dict(seq=131072, global_batch=128, gpus=("H100 SXM",)), (64, 512, 1024, 2048, 4096)),
    ("llama-3-70b", dict(seq=32768, global_batch=256, gpus=("H100 SXM", "B200"), cp_comm="all_gather"),
     (16, 128, 256, 1024)),
    ("mixtral-8x7b", dict(seq=32768, global_batch=64, gpus=("H100 SXM",)), (8, 64, 256)),
])
def test_plans_within_is_the_search_at_that_limit(model, kw, limits):
    """planner.plans_within (chapter 17's widget lowers its GPU limit without a new search): the plans of a
    search with a large limit that a lower one allows are, bit for bit and in order, the search at that lower
    limit, with the front marked among them alone; none left: an empty table where the search refuses."""
    import pandas as pd

    from llmsizing.planner import plans_within

    wide = plan(model, tokens=8e11, max_gpus=16384, **kw)
    for limit in limits:
        got = plans_within(wide, limit)
        try:
            direct = plan(model, tokens=8e11, max_gpus=limit, **kw)
        except NoPlanError:
            assert got.empty and list(got.columns) == list(wide.columns)
            continue
        assert len(direct) < len(wide)                # the limit drops plans (else this checks nothing)
        pd.testing.assert_frame_equal(got, direct, check_exact=True)
        assert got.attrs == direct.attrs
    with pytest.raises(ValueError, match="max_gpus"):
        plans_within(wide, 0)
