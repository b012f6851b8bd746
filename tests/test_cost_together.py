"""cost_by_gpu over the catalogue with DualPipe, faster (dual50), the same answers. Three changes, each a
speed change only, so each test's expected values are the reference path's, the code as it was, computed
here and never typed in (the old code as the oracle), compared to the last bit:

* the fastest plans of the GPU types that share a global batch come from one plan() (moe_default.
  planned_together), not one per GPU type: each GPU's rows, and so its fastest plan per count, are those of
  its own search;
* cost_by_gpu asks min_gpus for the count alone (min_gpus(_count_only=True): no tie-break step_time);
* min_gpus weighs a DualPipe layout's ranks from the planner's kept sides (plan_moe.dualpipe_rank_memory),
  not a fresh training_memory: the same pieces and totals.

On the code before dual50 these fail: planned_together, _count_only and dualpipe_rank_memory do not exist,
and cost_by_gpu made one plan() per GPU type (21 for DeepSeek-V3), not the 4 counted by hand below."""

from __future__ import annotations

import contextlib

import pytest

from llmsizing import catalog, fewest_gpus, moe_default, planner, stages, time_cost
from llmsizing.fewest_gpus import dualpipe_fewest_accum, min_gpus
from llmsizing.memory import training_memory

#: cost_by_gpu cases: DeepSeek-V3 and Qwen3-30B-A3B under DualPipe with and without the accounted split,
#: V3 with its own recipe (some GPU types refused by their SMs: rows with fits False), 1F1B and ZB1P, and
#: the paths that read min_gpus' whole answer (a given MFU, a dense model).
COST_CASES = (
    ("deepseek-v3", dict(tokens=14.8e12, seq=4096, schedule="dualpipe")),
    ("deepseek-v3", dict(tokens=14.8e12, seq=4096, schedule="dualpipe", accounted_split=True)),
    ("deepseek-v3", dict(tokens=14.8e12, seq=4096, schedule="dualpipe", comm_sms=20, mtp_depth=1)),
    ("qwen3-30b-a3b", dict(tokens=1e12, seq=4096, schedule="dualpipe")),
    ("qwen3-30b-a3b", dict(tokens=1e12, seq=4096, schedule="dualpipe", accounted_split=True)),
    ("deepseek-v3", dict(tokens=14.8e12, seq=4096)),
    ("mixtral-8x7b", dict(tokens=1e12, seq=8192, batch=2, schedule="zb1p")),
    ("mixtral-8x7b", dict(tokens=1e12, seq=4096, mfu=0.3)),             # (the calibrated path: no MoE step)
    ("llama-3-70b", dict(tokens=1e12, seq=8192, gpus=("H100 SXM", "A100 40GB", "L4"))),
)


def _clear():
    for f in (stages._kept_moe_layout, stages._kept_fewest, stages._kept_fastest, planner._search,
              fewest_gpus._kept_stage_runs, fewest_gpus._kept_dp_terms):
        if hasattr(f, "cache_clear"):                   # (old_paths' _kept_stage_runs keeps nothing)
            f.cache_clear()


def _old_stage_runs(model, par, stages_, kw_items):
    """fewest_gpus._kept_stage_runs before dual50, as it was (unkept)."""
    kw = dict(kw_items)
    if kw.get("schedule") == "dualpipe":
        return tuple(training_memory(model, parallel=par, _all_stages=True, **kw))
    return tuple(training_memory(model, parallel=par, _all_stages=True, _stages=stages_, **kw))


@pytest.fixture
def old_paths(monkeypatch):
    """cost_by_gpu as it was before dual50: each GPU type's own plan() (no planned_together), min_gpus'
    whole answer asked for its count (no _count_only), DualPipe layouts weighed by training_memory."""
    real = fewest_gpus.min_gpus

    def whole_min_gpus(*args, _count_only=False, **kw):
        got = real(*args, **kw)
        return got.gpus if _count_only else got

    monkeypatch.setattr(time_cost, "planned_together", lambda *a, **k: contextlib.nullcontext())
    monkeypatch.setattr(time_cost, "min_gpus", whole_min_gpus)
    monkeypatch.setattr(fewest_gpus, "_kept_stage_runs", _old_stage_runs)


def _frame(model, kw):
    _clear()
    return time_cost.cost_by_gpu(model, **kw)


@pytest.mark.parametrize("model,kw", COST_CASES)
def test_cost_by_gpu_frame_is_the_old_paths(model, kw, request):
    new = _frame(model, kw)
    request.getfixturevalue("old_paths")
    old = _frame(model, kw)
    _clear()
    assert list(new.columns) == list(old.columns) and len(new) == len(old)
    for col in new.columns:             # every row, every column, bit for bit (NaN where the old has NaN)
        assert [x if x == x else "nan" for x in new[col].tolist()] == \
            [x if x == x else "nan" for x in old[col].tolist()], col
    assert new.attrs == old.attrs
    assert new["fits"].any()


def test_one_search_per_global_batch(monkeypatch):
    """DeepSeek-V3 with DualPipe over the catalogue: the fewest GPUs per type (the frame's min_gpus) give the
    global batches n ceil(1,024 / n) sequences of 4K tokens (2**22 tokens, moe_default): 128, 256, 512 and
    1,024 GPUs -> 1,024; 192 and 384 -> 1,152; 640 and 1,280 -> 1,280; 2,048 -> 2,048. Four global batches,
    four plan() calls, not one per GPU type (21)."""
    df = _frame("deepseek-v3", COST_CASES[0][1])
    batches = {n * -(-1024 // n) for n in df["min_gpus"].astype(int)}
    assert batches == {1024, 1152, 1280, 2048}
    calls = []
    real = planner.plan

    def counted(*a, **k):
        calls.append(k["gpus"])
        return real(*a, **k)

    monkeypatch.setattr(planner, "plan", counted)
    again = _frame("deepseek-v3", COST_CASES[0][1])
    assert len(calls) == len(batches) == 4
    assert sorted(len(g) for g in calls) == sorted(
        sum(n * -(-1024 // n) == b for n in df["min_gpus"].astype(int)) for b in batches)
    assert again["days_on_min_gpus"].tolist() == df["days_on_min_gpus"].tolist()
    assert not moe_default._together                     # (nothing left once cost_by_gpu returns)


def test_together_rows_are_each_gpus_own():
    """planned_together's fastest plan per count, and the rows it is read from, equal each GPU type's own
    search's (its _Fastest: the first least step time per count, its layout's columns)."""
    model = catalog.resolve_model("deepseek-v3", moe=True)
    gpus = [catalog.get_gpu(g) for g in ("H100 SXM", "H800", "B200", "MI300X", "A100 80GB")]
    pairs = [(g, 512) for g in gpus[:3]] + [(gpus[3], 256), (gpus[4], 1024)]     # gb 1,024 for all five
    kw = dict(recompute="full", precision="bf16-mixed", schedule="dualpipe")
    _clear()
    own = {}
    for g, n in pairs:
        args = moe_default._layout_args(model, g, 4096, n, **kw)
        key = moe_default._fastest_key(*args[:7], dict(args[7]))
        own[g.name] = (key, moe_default._kept_fastest(*key))
    _clear()
    with moe_default.planned_together(model, pairs, seq=4096, **kw):
        assert len(moe_default._together) == len(pairs)
        for g, n in pairs:
            key, mine = own[g.name]
            got = moe_default._together[key]
            assert got._row == mine._row and got._cols == mine._cols
            assert got.get(n) == mine.get(n) is not None
    assert not moe_default._together
    _clear()


@pytest.mark.parametrize("model,gpu,kw", (
    ("deepseek-v3", "H800", dict(schedule="dualpipe", precision="fp8-deepseek", comm_sms=20, mtp_depth=1)),
    ("deepseek-v3", "A100 80GB", dict(recompute="full")),
    ("qwen3-30b-a3b", "H100 SXM", dict(schedule="dualpipe", accounted_split=True)),
    ("mixtral-8x7b", "MI300X", dict(seq=32768, batch=2)),
    ("llama-3-70b", "H100 SXM", dict(offload=True)),
))
def test_count_only_is_min_gpus_count(model, gpu, kw):
    kw = {"batch": 1, "seq": 4096, **kw}
    if kw.get("schedule") == "dualpipe":
        kw["grad_accum"] = dualpipe_fewest_accum(model)
    count = min_gpus(model, gpu, **kw, _count_only=True)
    assert type(count) is int and count == min_gpus(model, gpu, **kw).gpus


def test_count_only_refuses_as_min_gpus():
    kw = dict(batch=1, seq=32768, max_gpus=8)
    with pytest.raises(ValueError) as whole:
        min_gpus("llama-3-70b", "A100 40GB", **kw)
    with pytest.raises(ValueError) as count:
        min_gpus("llama-3-70b", "A100 40GB", **kw, _count_only=True)
    assert str(count.value) == str(whole.value) and "max_gpus=8" in str(count.value)


@pytest.mark.parametrize("model,gpu,kw", (
    ("deepseek-v3", "A10", dict(recompute="full")),        # (2,048 GPUs: every layout the catalogue weighs)
    ("deepseek-v3", "H800", dict(recompute="full", precision="fp8-deepseek", mtp_depth=1)),
    ("qwen3-30b-a3b", "H100 SXM", dict(accounted_split=True, capacity_factor=1.25)),
))
def test_dualpipe_ranks_are_training_memorys(model, gpu, kw, monkeypatch):
    """Every DualPipe layout min_gpus weighs: each rank's pieces and total from the kept sides equal
    training_memory(schedule="dualpipe", _all_stages=True)'s, bit for bit."""
    real = fewest_gpus.dualpipe_rank_memory
    seen = []

    def both(m, par, **k):
        got = real(m, par, **k)
        ref = training_memory(m, parallel=par, _all_stages=True, **k)
        assert [r.pieces_bytes for r in got] == [r.pieces_bytes for r in ref]
        assert [r.total_bytes for r in got] == [r.total_bytes for r in ref]
        assert [r.stage for r in got] == [r.stage for r in ref] == list(range(par.pp // 2))
        seen.append(par)
        return got

    monkeypatch.setattr(fewest_gpus, "dualpipe_rank_memory", both)
    _clear()
    min_gpus(model, gpu, batch=1, seq=4096, schedule="dualpipe", grad_accum=dualpipe_fewest_accum(model),
             **kw)
    _clear()
    assert len(seen) >= 20 and len({(p.pp, p.zero, p.ep) for p in seen}) >= 10
