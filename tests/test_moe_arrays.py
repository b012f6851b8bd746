"""llmsizing.moe_arrays.EpLayouts.over (the planner's layouts over ep and dp from one checked layout, issue 35,
moe35n) and llmsizing._compat.paused_gc (plan() without the cyclic garbage collector)."""

import gc

import numpy as np
import pytest

import llmsizing as L
from llmsizing import memory
from llmsizing._compat import paused_gc
from llmsizing.moe_arrays import EpLayouts
from llmsizing.moe_layouts import dp_unit, heavy_stages
from llmsizing.parallel import kept_parallel


def _calls(tp, eps, expert_tp):
    """(ep, dp) pairs as the search's prefetch asks them: dp = a and 2 a, a the smallest dp of the layout."""
    return [(ep, k * dp_unit(tp, 1, ep, expert_tp)) for ep in eps for k in (1, 2)]


@pytest.mark.parametrize("name, lay, expert_tp, eps", [
    ("deepseek-v2", dict(tp=2, pp=4, zero=1), False, (1, 2, 4, 8, 16)),
    ("mixtral-8x7b", dict(tp=2, pp=1, zero=2), True, (1, 2, 4, 8)),
    ("gpt-oss-120b", dict(tp=4, pp=2, zero=0), False, (4, 16, 64)),
])
def test_over_is_the_layouts_it_stands_for(name, lay, expert_tp, eps):
    """EpLayouts.over(base, pairs) holds what EpLayouts of the checked layouts holds, field by field and
    array by array (dtype too), equals it and hashes alike, and _search_pieces gives the same bytes bit for
    bit; its pars are those layouts. Fails if over took dp x cp or edp from base alone, or left a field
    out."""
    model = L.get_model(name)
    calls = _calls(lay["tp"], eps, expert_tp)
    pars = [kept_parallel(**lay, dp=dp, sp=lay["tp"] > 1, ep=ep, expert_tp=expert_tp) for ep, dp in calls]
    # base: any of the layouts (here the last), as over reads only what they share of it
    fast, slow = EpLayouts.over(pars[-1], calls), EpLayouts(pars)
    for f in EpLayouts.__slots__:
        if f in ("_kept", "_pars", "_base"):           # (caches, and over's base)
            continue
        a, b = getattr(fast, f), getattr(slow, f)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and (a == b).all(), f
        else:
            assert a == b, f
    assert fast == slow and hash(fast) == hash(slow) and fast.pars == tuple(pars)
    assert fast.firsts() == slow.firsts()
    assert [p.edp for p in pars] == fast.edp.tolist() and len(set(fast.edp.tolist())) > 1
    stages = heavy_stages(model, pars[0])
    kw = dict(batch=2, grad_accum=4, seq=4096, recompute="full", precision="bf16-mixed")
    got = np.array(np.broadcast_arrays(*memory._search_pieces(model, fast, stages, **kw)))
    want = np.array([memory._search_pieces(model, p, stages, **kw) for p in pars]).T
    assert got.shape == want.shape and (got == want).all(), name


def test_over_and_layouts_with_other_degrees_differ():
    """Two EpLayouts over other (ep, dp) pairs are not equal (the memory's kept sides key on them)."""
    base = kept_parallel(tp=1, pp=2, zero=1, dp=4, ep=4)
    a = EpLayouts.over(base, [(4, 4), (2, 4)])
    assert a != EpLayouts.over(base, [(4, 8), (2, 4)]) and a != EpLayouts.over(base, [(2, 4), (4, 4)])
    assert a != EpLayouts.over(kept_parallel(tp=1, pp=2, zero=1, dp=4, ep=4, cp=2), [(4, 4), (2, 4)])


def test_paused_gc_pauses_and_restores():
    """paused_gc: the collector is off inside, back on after a return and after an error, and left off when
    it was off already (a nested call does not turn it on under its caller)."""
    seen = []

    @paused_gc
    def f(fail=False):
        seen.append(gc.isenabled())
        if fail:
            raise ValueError("x")
        return 3

    assert gc.isenabled()
    assert f() == 3 and seen == [False] and gc.isenabled()
    with pytest.raises(ValueError):
        f(fail=True)
    assert gc.isenabled()
    gc.disable()
    try:
        f()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_plan_runs_without_the_collector():
    """plan() runs its search with the collector paused (no collection starts, though a search from scratch
    allocates far more than the young generation's threshold, here lowered to 100) and turns it back on."""
    from llmsizing import planner

    seen = []
    threshold = gc.get_threshold()
    planner._search.cache_clear()
    gc.callbacks.append(lambda phase, info: seen.append(phase))
    gc.set_threshold(100, *threshold[1:])
    try:
        L.plan("mixtral-8x7b", tokens=1e12, seq=4096, global_batch=64, gpus=("H100 SXM",), max_gpus=256)
        assert seen == [] and gc.isenabled()
    finally:
        gc.callbacks.pop()
        gc.set_threshold(*threshold)


@pytest.mark.parametrize("lay, expert_tp, eps", [
    (dict(tp=2, pp=4, zero=1, cp=1), False, (1, 2, 4, 8, 16)),
    (dict(tp=4, pp=1, zero=2, cp=2), True, (1, 2, 4, 8)),
])
def test_firsts_of_over_are_the_checked_layouts(lay, expert_tp, eps):
    """EpLayouts.over(...).firsts() (moe35p: base with each ep's first dp written in, without building and
    checking a Parallel) gives, per distinct ep in first-entry order, a layout equal to kept_parallel's of
    the same fields, hash-equal, with the same state (the kept hash left out) and the same derived degrees.
    Fails if a first took base's ep or dp, or kept base's hash."""
    def unit(ep):
        return dp_unit(lay["tp"], lay["cp"], ep, expert_tp)

    base = kept_parallel(**lay, sp=lay["tp"] > 1, ep=eps[0], dp=unit(eps[0]), expert_tp=expert_tp)
    hash(base)                                   # (its kept hash set: a copy must not carry it)
    pairs = [(ep, k * unit(ep)) for k in (2, 1) for ep in eps[::-1]]
    got = EpLayouts.over(base, pairs).firsts()
    want = [kept_parallel(**lay, sp=lay["tp"] > 1, ep=ep, dp=2 * unit(ep), expert_tp=expert_tp)
            for ep in eps[::-1]]
    assert [p.ep for p in got] == list(eps[::-1])
    for g, w in zip(got, want):
        assert g == w and hash(g) == hash(w) and g.__getstate__() == w.__getstate__()
        assert (g.edp, g.dp_cp, g.etp, g.gpus) == (w.edp, w.dp_cp, w.etp, w.gpus)
