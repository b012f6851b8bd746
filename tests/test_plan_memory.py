"""The planner's memory from few training_memory calls (issue 33, llmsizing.plan_memory.SearchMemory): what
one more sequence adds, read off a reference layout without ZeRO or expert parallelism; the model states per
(tp, pp, ZeRO stage, ep); every context-parallel degree from two. Each key's coefficients equal the direct
evaluation (plan_pricing._memory_coefficients at that layout, three training_memory calls) to rounding, for
dense models and mixtures of experts, every ZeRO stage, recomputation, accumulation class and cp; the issue's
long-context searches are checked row by row against training_memory and step_time, and make a few hundred
calls, not thousands."""

import numpy as np
import pytest

import llmsizing as L
from llmsizing import dense_arrays, plan_memory, plan_pricing, planner
from llmsizing.layouts import step_time
from llmsizing.moe_layouts import ep_candidates
from llmsizing.parallel import check_layout
from llmsizing.plan_memory import SearchMemory
from llmsizing.plan_pricing import _memory_coefficients


def _kw(seq, optimizer_impl="foreach"):
    return dict(seq=seq, precision="bf16-mixed", optimizer="adamw", attention="flash", stack="fused",
                optimizer_impl=optimizer_impl)


def _direct(model, kw, tp, pp, zero, ep, rc, c, cp, cp_comm, expert_tp):
    """Three training_memory calls at the layout itself, no shortcut."""
    kw = {**kw, "recompute": "full", "recompute_layers": 1} if rc == "full1" else {**kw, "recompute": rc}
    return _memory_coefficients(model, kw, tp, pp, zero, c, cp, cp_comm, ep=ep, expert_tp=expert_tp)


def _same(got, want):
    """Equal to rounding: within 1e-12 of the largest coefficient (bytes of order 1e10 to 1e12: under a
    byte)."""
    scale = max(max(float(np.abs(w).max()) for w in want), 1.0)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * scale)


def _keys(model, tps, pps, zeros, eps, expert_tp=False):
    """The (tp, pp, zero, ep, accumulation class) the search would weigh: ZeRO-2/3 without a pipeline, ZeRO-3
    with ep = 1, the classes 1 (one micro-batch, pp = 1 only) and max(2, pp)."""
    for tp in tps:
        for pp in pps:
            for zero in zeros:
                for ep in eps:
                    if zero >= 2 and pp > 1:
                        continue
                    try:
                        check_layout(model, tp=tp, pp=pp, zero=zero, sp=tp > 1, ep=ep, expert_tp=expert_tp)
                    except ValueError:
                        continue
                    for c in ((1, 2) if pp == 1 else (max(2, pp),)):
                        yield tp, pp, zero, ep, c


CASES = {
    "mixtral at 32K, every ZeRO stage and ep, the ring": dict(
        model="mixtral-8x7b", seq=32768, tps=(1, 2), pps=(1, 4), cps=(1, 2, 4, 8), cp_comm="p2p"),
    "mixtral at 32K, experts split by tp, all-gather": dict(
        model="mixtral-8x7b", seq=32768, tps=(2,), pps=(1, 2), cps=(1, 2, 4), cp_comm="all_gather",
        expert_tp=True),
    "qwen3-30b-a3b at 64K, eps (1, 8, 32, 128)": dict(
        model="qwen3-30b-a3b", seq=65536, tps=(1, 4), pps=(1, 6), cps=(1, 4, 16), cp_comm="p2p",
        eps=(1, 8, 32, 128)),
    "deepseek-v3 (dense layers first) at 16K": dict(
        model="deepseek-v3", seq=16384, tps=(1,), pps=(1, 61), cps=(1, 2, 4), cp_comm="p2p", eps=(1, 8, 64),
        zeros=(0, 1), rcs=("none", "full")),
    "deepseek-v3, ZeRO-2 over many ep (A + B / ep with more than one micro-batch)": dict(
        model="deepseek-v3", seq=4096, tps=(1, 2), pps=(1,), cps=(1, 2), cp_comm="p2p", eps=(1, 8, 64, 256),
        zeros=(2,), rcs=("none", "full")),
    "mixtral, the for-loop optimizer step (no ep shortcut)": dict(
        model="mixtral-8x7b", seq=32768, tps=(1,), pps=(1, 4), cps=(1, 2, 4), cp_comm="p2p",
        optimizer_impl="for-loop", rcs=("none",)),
    "llama-3-8b at 16K (dense), partial recomputation": dict(
        model="llama-3-8b", seq=16384, tps=(1, 2), pps=(1, 4), cps=(1, 2, 4), cp_comm="p2p",
        rcs=("none", "selective", "full", "full1")),
}


@pytest.mark.parametrize("name", list(CASES))
def test_search_memory_equals_direct_evaluation(name):
    case = CASES[name]
    model = L.get_model(case["model"])
    expert_tp = case.get("expert_tp", False)
    eps = case.get("eps") or ep_candidates(model)
    impl = case.get("optimizer_impl", "foreach")
    kw = _kw(case["seq"], impl)
    memory = SearchMemory(model, kw, case["cps"], case["cp_comm"], eps, expert_tp,
                          by_ep=model.is_moe and len(eps) > 2 and impl == "foreach")
    checked = 0
    for tp, pp, zero, ep, c in _keys(model, case["tps"], case["pps"], case.get("zeros", (0, 1, 2, 3)), eps,
                                     expert_tp):
        for rc in case.get("rcs", ("none", "selective", "full")):
            for cp in case["cps"]:
                if rc == "full1":
                    got = memory.one_layer(tp, pp, zero, ep, c, cp, model.layers // pp)
                else:
                    got = memory.coefficients(tp, pp, zero, ep, rc, c, cp)
                _same(got, _direct(model, kw, tp, pp, zero, ep, rc, c, cp, case["cp_comm"], expert_tp))
                checked += 1
    assert checked >= 40


def test_the_comparison_can_fail():
    """A per-micro-batch term read off the wrong layout is caught: ZeRO-3's states are not ZeRO-0's."""
    model = L.get_model("llama-3-8b")
    kw = _kw(16384)
    memory = SearchMemory(model, kw, (1, 2, 4), "p2p")
    got = memory.coefficients(1, 1, 0, 1, "none", 2, 1)
    with pytest.raises(AssertionError):
        _same(got, _direct(model, kw, 1, 1, 3, 1, "none", 2, 1, "p2p", False))
    fixed, per_micro, sharded = got
    with pytest.raises(AssertionError):
        _same((fixed, per_micro * (1 + 1e-9), sharded),
              _direct(model, kw, 1, 1, 0, 1, "none", 2, 1, "p2p", False))


def _one_per_kind(df, keys, seed=0):
    return df.groupby(keys, sort=False, dropna=False).sample(1, random_state=seed)


@pytest.mark.parametrize("model, seq, kw", [
    ("mixtral-8x7b", 32768, dict(gpus=("H100 SXM",), global_batch=64)),
    ("qwen3-30b-a3b", 65536, dict(gpus=("H100 SXM",), global_batch=64, max_gpus=512)),
])
def test_long_context_moe_rows_are_the_scalar_functions(model, seq, kw):
    """The issue's searches: one row of each (ZeRO stage, cp, ep, recomputation, pipeline or not) against one
    training_memory and one step_time, at 1e-9 relative."""
    df = planner.plan(model, tokens=1e12, seq=seq, **kw)
    rows = _one_per_kind(df.assign(piped=df["pp"] > 1), ["zero", "cp", "ep", "recompute", "piped"])
    assert len(rows) >= 50
    for r in rows.itertuples():
        par = L.Parallel(tp=int(r.tp), pp=int(r.pp), dp=int(r.dp), zero=int(r.zero), sp=bool(r.sp),
                         cp=int(r.cp), ep=int(r.ep))
        mem = L.training_memory(model, batch=int(r.micro_batch), seq=seq, grad_accum=int(r.grad_accum),
                                recompute=r.recompute, parallel=par)
        assert r.memory_per_gpu_bytes == pytest.approx(mem.total_bytes, rel=1e-9), r
        st = step_time(model, r.gpu, par, batch=int(r.micro_batch), seq=seq, grad_accum=int(r.grad_accum),
                       recompute=r.recompute)
        assert r.step_time_s == pytest.approx(st.step_s, rel=1e-9), r


def _count_search_pieces(monkeypatch) -> list:
    """A list that gains one item per call of the planner's memory evaluation (plan_pricing._search_pieces,
    training_memory's bytes without its checks) for the rest of the test, and one per layout a dense model's
    evaluation on arrays weighs (dense_arrays.search_pieces: its calls, all at once)."""
    calls = []
    real, real_arrays = plan_pricing._search_pieces, dense_arrays.search_pieces

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    def counted_arrays(model, kw, layouts, *args):
        calls.extend([1] * len(layouts))
        return real_arrays(model, kw, layouts, *args)

    monkeypatch.setattr(plan_pricing, "_search_pieces", counted)
    monkeypatch.setattr(dense_arrays, "search_pieces", counted_arrays)
    return calls


def test_the_issue_search_makes_few_training_memory_calls(monkeypatch):
    """Qwen3-30B-A3B at 64K on H100s weighs 676 layouts x 5 cp degrees x 3 recomputations: one set of
    coefficients per layout took 7,213 training_memory calls (issue 33); SearchMemory takes about 1,200
    (issue 35, arrays35i: each is now memory._search_pieces, training_memory's bytes without its checks)."""
    calls = _count_search_pieces(monkeypatch)
    planner._search.cache_clear()
    plan_memory.kept_search_memory.cache_clear()       # (searches share their coefficients: issue 35)
    df = planner.plan("qwen3-30b-a3b", tokens=1e12, gpus=("H100 SXM",), seq=65536, global_batch=64)
    planner._search.cache_clear()
    assert len(df) == 15_665
    assert 0 < len(calls) <= 1_500


# ---- issue 35 (arrays35h): what the memory fit skips and keeps must not change a plan ----
def _fresh_plan(**kw):
    planner._search.cache_clear()
    plan_memory.kept_search_memory.cache_clear()
    try:
        return planner.plan(**kw)
    finally:
        planner._search.cache_clear()


def test_the_floor_skips_gpus_and_changes_no_plan(monkeypatch):
    """fitting_plans weighs no heavier recomputation on a GPU whose limit the model states alone exceed. With
    the floor turned off (an infinite margin) the search weighs more coefficient rows and gives the same
    frame, bit for bit: Mixtral on small and large GPUs, where the small ones never hold its states."""
    import pandas as pd

    kw = dict(model="mixtral-8x7b", tokens=1e12, seq=4096, global_batch=128,
              gpus=("RTX 4090", "L40S", "A100 40GB", "H100 SXM", "B200"))
    rows = []
    real = plan_memory._table_totals

    def counted(memory, parts, rc, coef_id, lay, pair_of, picked, *rest):
        rows.append(len(picked))
        return real(memory, parts, rc, coef_id, lay, pair_of, picked, *rest)

    monkeypatch.setattr(plan_memory, "_table_totals", counted)
    # (all GPU types weighed at once, as this function does: plan() otherwise fits each type alone and keeps
    # the totals between them, plan_fits, whose rows tests/test_plan_fits.py compares with these)
    monkeypatch.setattr(planner, "fitting_plans", plan_memory.fitting_plans)
    with_floor = _fresh_plan(**kw)
    weighed = sum(rows)
    rows.clear()
    monkeypatch.setattr(plan_memory, "FLOOR_MARGIN", float("inf"))
    without = _fresh_plan(**kw)
    assert sum(rows) > weighed                          # the floor does skip candidates here
    pd.testing.assert_frame_equal(with_floor, without, check_exact=True)


def test_kept_memory_sides_give_the_direct_pieces():
    """training_memory's private path for the searches (_stages) keeps its activations' and model states'
    sides between calls; every piece equals the public call's, which works them out afresh, for layouts that
    share one side and not the other (a mixture of experts and a dense model, pipelines, ZeRO stages, ep)."""
    from llmsizing import memory

    moe = [dict(tp=2, pp=4, dp=4, zero=1, ep=2), dict(tp=2, pp=4, dp=8, zero=1, ep=4),
           dict(tp=1, pp=1, dp=8, zero=2, ep=8), dict(tp=1, pp=1, dp=8, zero=3)]
    dense = [dict(tp=2, pp=2, dp=2, zero=1), dict(tp=2, pp=2, dp=4, zero=0)]
    for name, layouts in (("mixtral-8x7b", moe), ("llama-3-8b", dense)):
        model = L.get_model(name)
        for lay in layouts:
            par = L.Parallel(sp=lay["tp"] > 1, **lay)
            for batch, rc, m in ((1, "none", 4), (2, "none", 4), (1, "full", 1), (1, "selective", 8)):
                kw = dict(batch=batch, seq=4096, grad_accum=m, recompute=rc, parallel=par)
                direct = L.training_memory(model, _all_stages=True, **kw)
                stages = (0, par.pp - 1)
                kept = [L.training_memory(model, _all_stages=True, _stages=stages, **kw) for _ in range(2)][1]
                for r in kept:
                    assert r.pieces_bytes == direct[r.stage].pieces_bytes, (name, lay, batch, rc, r.stage)
                # the planner's path without the checks and result objects (memory._search_pieces): the same
                # bytes, stage by stage, piece by piece
                flat = memory._search_pieces(model, L.parallel.kept_parallel(sp=lay["tp"] > 1, **lay), stages,
                                             batch=batch, grad_accum=m, seq=4096, recompute=rc)
                assert flat == [v for s in sorted(set(stages)) for v in direct[s].pieces_bytes.values()]
    assert memory._kept_act_side.cache_info().hits > 0 and memory._kept_state_side.cache_info().hits > 0
    assert memory._kept_act_core.cache_info().hits > 0


def test_kept_hashes_are_the_dataclass_hashes():
    """GPU, Node, GroupLink and Parallel keep their hash (_compat.keep_hash): the same value as the tuple of
    their fields' (the dataclass's), not pickled, and never a column of the GPU table."""
    import dataclasses
    import pickle

    from llmsizing.network import get_node, group_link

    g = L.get_gpu("H100 SXM")
    node = get_node(None, g)
    for obj in (g, node, group_link(g, node, size=8), L.Parallel(tp=8, dp=4, zero=1, sp=True, ep=2)):
        # the fields the dataclass's own hash takes (compare=True): GroupLink.bound_by is a label, not a value
        want = hash(tuple(getattr(obj, f.name) for f in dataclasses.fields(obj) if f.compare))
        assert hash(obj) == want and hash(obj) == want                  # worked out, then kept
        back = pickle.loads(pickle.dumps(obj))
        assert back == obj and "_hash" not in back.__dict__ and hash(back) == want
    assert "_hash" not in L.catalog.gpu_table().columns


def test_the_all_to_all_of_many_token_counts_is_each_ones():
    """moe.ep_all_to_all with ``_tokens`` (an array, the planner's pricing) gives each token count the seconds
    of its own call from the layout, exactly: inside a domain, across (with and without a node limit) and with
    expert_tp. A change of the array path's arithmetic (order of operations, min/max) shows here."""
    from llmsizing.moe import ep_all_to_all
    from llmsizing.network import get_node

    seq = 4096
    for name, gpu, ep, tp, etp, max_nodes, precision in (
            ("mixtral-8x7b", "H100 SXM", 8, 1, False, None, "bf16-mixed"),
            ("deepseek-v3", "H100 SXM", 64, 2, False, 4, "fp8-deepseek"),
            ("deepseek-v3", "B200", 32, 1, False, None, "bf16-mixed"),
            ("qwen3-30b-a3b", "A100 80GB", 16, 2, True, None, "bf16-mixed")):
        model, g = L.get_model(name), L.get_gpu(gpu)
        node = get_node(None, gpu=g)
        layouts = [(b, cp) for b in (1, 2, 3, 8) for cp in (1, 2, 4)]
        want, tokens = [], []
        for b, cp in layouts:
            par = L.Parallel(tp=tp, sp=tp > 1, cp=cp, dp=ep, ep=ep, expert_tp=etp)
            want.append([c.time_s for c in ep_all_to_all(model, par, batch=b, seq=seq, gpu=g, node=node,
                                                         grad_accum=1, precision=precision, recompute="none",
                                                         max_nodes=max_nodes)])
            tokens.append(b * (seq // cp) / (tp if tp > 1 else 1))
        par = L.Parallel(tp=tp, sp=tp > 1, dp=ep, ep=ep, expert_tp=etp)
        got = ep_all_to_all(model, par, batch=1, seq=seq, gpu=g, node=node, grad_accum=1, precision=precision,
                            recompute="none", max_nodes=max_nodes, _tokens=np.array(tokens))
        assert len(got) == 4 and all(w > 0 for row in want for w in row)
        assert np.array_equal(np.array([c.time_s for c in got]).T, np.array(want)), name


@pytest.mark.parametrize("name, lay, precision, expert_tp, eps", [
    ("deepseek-v2", dict(tp=2, pp=4, zero=1), "bf16-mixed", False, (1, 2, 4, 8, 16)),
    ("mixtral-8x7b", dict(tp=2, pp=1, zero=2), "fp8-mixed", True, (1, 2, 4, 8)),
    ("qwen3-30b-a3b", dict(tp=1, pp=2, zero=1), "bf16-mixed", False, (1, 4, 16, 128)),
])
def test_layouts_over_ep_give_each_layouts_own_pieces(name, lay, precision, expert_tp, eps):
    """memory._search_pieces over moe.EpLayouts (layouts that differ in ep and dp only, each at dp = a and
    2 a as the search asks) gives each layout's pieces bit for bit as its own call: the same functions on
    arrays (a pipeline's foreach temporary split by stage, ZeRO-2, an FP8 recipe, experts split by tp)."""
    from llmsizing import memory
    from llmsizing.moe import EpLayouts
    from llmsizing.moe_layouts import dp_unit, heavy_stages
    from llmsizing.parallel import kept_parallel

    model = L.get_model(name)
    pars = [kept_parallel(**lay, dp=k * dp_unit(lay["tp"], 1, ep, expert_tp), sp=lay["tp"] > 1, ep=ep,
                          expert_tp=expert_tp) for ep in eps for k in (1, 2)]
    stages = heavy_stages(model, pars[0])
    for batch, m, rc in ((1, 1, "none"), (2, 8, "full"), (1, 4, "selective")):
        kw = dict(batch=batch, grad_accum=m, seq=4096, recompute=rc, precision=precision)
        got = np.array(np.broadcast_arrays(*memory._search_pieces(model, EpLayouts(pars), stages, **kw)))
        want = np.array([memory._search_pieces(model, p, stages, **kw) for p in pars]).T
        assert got.shape == want.shape and (got == want).all(), (name, batch, rc)


def test_the_prefetch_makes_the_entries_states_would():
    """SearchMemory.prefetch (one call per (tp, pp, zero, c) over all ep) leaves exactly the coefficients
    SearchMemory.states reads off one call per layout, for every ZeRO stage, ep, pipeline and
    recomputation; and it does make entries (ZeRO-1 with a pipeline beyond the first two ep)."""
    model = L.get_model("deepseek-v2")
    eps, kw = (1, 2, 4, 8, 16), _kw(4096)
    keys = list(_keys(model, (1, 2), (1, 4), (0, 1, 2, 3), eps))
    fast, slow = (SearchMemory(model, kw, (1,), "p2p", eps, False, True) for _ in range(2))
    for rc in ("none", "full"):
        fast.prefetch(keys, rc)
        if rc == "none":
            assert (1, 4, 1, 16, 4) in fast._states and (1, 4, 1, 16, 4) not in slow._states
        for tp, pp, zero, ep, c in keys:
            got = fast.coefficients(tp, pp, zero, ep, rc, c, 1)
            want = slow.coefficients(tp, pp, zero, ep, rc, c, 1)
            assert all((g == w).all() for g, w in zip(got, want)), (tp, pp, zero, ep, c, rc)


@pytest.mark.parametrize("model, seq, cps", [("llama-3-70b", 65536, None), ("mixtral-8x7b", 32768, None),
                                             ("llama-3-8b", 8192, (1,))])
def test_a_search_at_the_other_kv_exchange_shares_cp1_and_changes_no_plan(monkeypatch, model, seq, cps):
    """A search whose K/V exchange (cp_comm) differs from a kept one's alone starts with that one's entries
    at cp = 1 (SearchMemory.share_cp1: nothing reads cp_comm there; issue 35, chapter 17's widget): it makes
    fewer training_memory calls and gives the frame a search from scratch gives, bit for bit, either way
    round; a SearchMemory of another setting is refused."""
    import pandas as pd

    kw = dict(model=model, tokens=1e12, seq=seq, global_batch=64, gpus=("H100 SXM",), cp_degrees=cps)
    calls = _count_search_pieces(monkeypatch)
    for first, second in (("p2p", "all_gather"), ("all_gather", "p2p")):
        calls.clear()
        fresh = _fresh_plan(cp_comm=second, **kw)
        alone = len(calls)
        planner._search.cache_clear()
        plan_memory.kept_search_memory.cache_clear()
        try:
            planner.plan(cp_comm=first, **kw)                  # the kept sibling
            calls.clear()
            shared = planner.plan(cp_comm=second, **kw)
        finally:
            planner._search.cache_clear()
        assert len(calls) < alone
        pd.testing.assert_frame_equal(fresh, shared, check_exact=True)
    memory = SearchMemory(L.get_model(model), _kw(seq), (1,), "p2p")
    with pytest.raises(ValueError, match="same model"):
        memory.share_cp1(SearchMemory(L.get_model(model), _kw(2 * seq), (1,), "all_gather"))
