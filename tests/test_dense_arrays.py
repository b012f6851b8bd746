"""A dense model's planner memory fit on arrays (issue 35, dense35: llmsizing.dense_arrays) against the
per-layout path it replaces: each call's pieces against plan_pricing._pieces (one _search_pieces call per
layout), a SearchMemory filled on arrays against one filled call by call, and whole searches with the array
path on and off. The expected values are the per-layout path's own: what is tested is that the arrays change
nothing (the bytes themselves are checked against measurements in test_memory.py and the chapter tests).
Issue 34 (vpp34) added interleaved pipelines (virtual_stages) and the split that counts the embedding and the
loss as a layer each (plan_pricing.pipeline_split, for a pp that does not divide the layers): both are in the
strategies and grids below, as the planner's _piece_layout builds them."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llmsizing as L
from llmsizing import dense_arrays, plan_memory, planner
from llmsizing.parallel import check_layout
from llmsizing.plan_candidates import state_chunks, state_key
from llmsizing.plan_memory import SearchMemory
from llmsizing.plan_pricing import _piece_layout, _pieces

#: Dense models with and without tied embeddings, grouped-query attention, and odd layer counts.
MODELS = ("llama-3.1-405b", "gpt3-175b", "llama-3-8b", "gpt2", "granite-3.0-2b", "tinyllama-1.1b",
          "mpt-bench-1b")
#: The recipes without autocast (dense_arrays.supports), the recomputations the planner searches.
PRECISIONS = ("bf16-mixed", "fp32", "fp16-mixed", "bf16-mixed-fp32-grads", "fp8-mixed", "bf16")
RECOMPUTES = ("none", "selective", "full")


def _kw(seq, rc="none", precision="bf16-mixed", impl="foreach", optimizer="adamw"):
    return dict(seq=seq, precision=precision, optimizer=optimizer, attention="flash", stack="fused",
                optimizer_impl=impl, recompute=rc)


def _check(got, want):
    """Bit for bit (the same float operations in the same order), hence within 1e-9 relative too. (Equal
    arrays are within 1e-9 of each other: NumPy's check of that, which says how far apart two arrays are, runs
    only when they differ; it was most of this file's comparing time, some 36,000 calls.)"""
    assert got.shape == want.shape
    if not np.array_equal(got, want):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)
        assert np.array_equal(got, want)


def _valid(model, call, seq) -> bool:
    tp, pp, zero, _, cp, _, _, _, *v = call
    try:
        check_layout(model, tp=tp, pp=pp, zero=zero, sp=tp > 1, cp=cp, seq=seq)
        if v and v[0] > 1 and pp == 1:
            return False
        # (the planner's layout: its split and chunks, as the per-layout path builds and resolves it)
        par, _ = _piece_layout(model, tp, pp, zero, cp, "p2p", 1, False, 1, v[0] if v else 1)
        L.memory._search_layouts(par, model, seq)
    except ValueError:
        return False
    return True


def _want(model, kw, call, etp=False):
    """The per-layout path's pieces of ``call`` (plan_pricing._pieces, with ``v`` if the call has one)."""
    tp, pp, zero, m, cp, comm, batch, dp, *v = call
    return _pieces(model, kw, tp, pp, zero, m, cp, comm, 1, etp, batch=batch, dp=dp, v=v[0] if v else 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(MODELS), seq=st.sampled_from((2048, 8192, 65536)), rc=st.sampled_from(RECOMPUTES),
       precision=st.sampled_from(PRECISIONS), impl=st.sampled_from(("foreach", "for-loop")),
       calls=st.lists(st.tuples(st.sampled_from((1, 2, 4, 8)), st.sampled_from((1, 2, 3, 4, 6, 8, 16)),
                                st.sampled_from((0, 1, 2, 3)), st.sampled_from((1, 2, 3, 8, 64)),
                                st.sampled_from((1, 2, 4, 8)), st.sampled_from(("p2p", "all_gather", "a2a")),
                                st.sampled_from((1, 2, 4)), st.sampled_from((1, 2, 3, 16)),
                                st.sampled_from((1, 1, 2, 3, 4, 8))),
                      min_size=1, max_size=40))
def test_each_calls_pieces_are_the_per_layout_calls(name, seq, rc, precision, impl, calls):
    """search_pieces gives each call's pieces as plan_pricing._pieces does (the per-layout path), over
    models, sequence lengths, recomputations, recipes, optimizer steps and layouts (tp, pp, ZeRO stage,
    micro-batches, cp and its exchange, micro-batch, dp, interleaved chunks; a pp that does not divide the
    layers takes the accounted split), many calls at once in any order."""
    model = L.get_model(name)
    kw = _kw(seq, rc, precision, impl)
    calls = [c for c in calls if _valid(model, c, seq)
             and (c[5] != "a2a" or model.kv_heads % (c[0] * c[4]) == 0 and model.heads % (c[0] * c[4]) == 0)]
    if not calls:
        return
    got = dense_arrays.search_pieces(model, kw, calls)
    for call, g in zip(calls, got):
        _check(g, _want(model, kw, call))


def test_a_grid_of_layouts_is_the_per_layout_calls():
    """The same on a whole grid (every tp, pipeline depth, ZeRO stage, cp, micro-batch, dp and accumulation,
    and interleaved chunks) for three models and each recomputation, with one kept dict for all of them. The
    405B's 126 layers split evenly over 2, 3, 7 and 9 stages, over 4, 8 and 16 only with the embedding and
    the loss counted (accounted: 32 places of 4, 16 of 8, 8 of 16, the first and last stage one layer
    fewer); GPT-2's 12 over 2, 3, 4 evenly, 7 accounted (14 / 7); granite's 40 over 2, 4 evenly, 3, 6 and 7
    accounted. Chunks per stage 1, 2, 4 (accumulation m below pp too: the schedule caps the warm-up)."""
    n, nv, na = 0, 0, 0
    for name, seq, pps in (("llama-3.1-405b", 131072, (1, 2, 3, 4, 7, 8, 9, 16)),
                           ("gpt2", 8192, (1, 2, 3, 4, 7)), ("granite-3.0-2b", 32768, (1, 2, 3, 4, 6, 7))):
        model = L.get_model(name)
        for rc in RECOMPUTES:
            kw, kept = _kw(seq, rc), {}
            calls = [(tp, pp, zero, m, cp, "p2p", b, dp, v) for tp in (1, 2, 8) for pp in pps
                     for zero in (0, 1, 2, 3) for cp in (1, 2) for m in (1, 2, 16) for b in (1, 2)
                     for dp in (1, 2) for v in (1, 2, 4)]
            calls = [c for c in calls if _valid(model, c, seq)]
            for call, g in zip(calls, dense_arrays.search_pieces(model, kw, calls, kept)):
                _check(g, _want(model, kw, call))
                n, nv, na = n + 1, nv + (call[8] > 1), na + (model.layers % call[1] != 0)
    assert n > 3000 and nv > 1000 and na > 1000


def _keys(model):
    """The search's keys (tp, pp, zero, ep, accumulation class, v): without interleaving the classes 1 and 2
    (pp = 1) or max(2, pp); with v > 1 chunks pp and 2 pp (plan_candidates._candidates)."""
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8):
            for zero in (0, 1, 2, 3):                 # (issue 34: ZeRO-2/3 under a pipeline too)
                for v in (1, 2, 4):
                    if not _valid(model, (tp, pp, zero, 1, 1, "p2p", 1, 1, v), 2048):
                        continue
                    for c in ((1, 2) if pp == 1 else (max(2, pp),) if v == 1 else (pp, 2 * pp)):
                        yield tp, pp, zero, 1, c, v


def _micro_key(tp, pp, rc, c, v):
    return (tp, pp, rc, c) + ((v,) if v > 1 else ())


@pytest.mark.parametrize("name, seq, cps, comm", [("llama-3.1-405b", 131072, (1, 2, 4, 8, 16, 32), "p2p"),
                                                  ("gpt3-175b", 32768, (1, 2, 4), "all_gather"),
                                                  ("gpt2", 8192, (1, 2), "p2p"),
                                                  ("llama-3-8b", 8192, (1,), "p2p")])
def test_the_prefetch_makes_the_entries_the_layouts_would(name, seq, cps, comm):
    """SearchMemory filled on arrays (dense_arrays.prefetch and prefetch_cp, recomputations asked in the
    search's order) holds, key by key, the coefficients one filled call by call holds (the per-layout path,
    with dense_arrays turned off): every ZeRO stage, pipeline, accumulation class, recomputation (with the
    reference layout read by the first one, as there), interleaved chunks (issue 34: per_micro with v on
    the reference), the accounted split (the 405B's 4 and 8 stages) and cp; and it did make them, and no
    per_micro the layouts' own calls would not have made (which partial recomputation reads)."""
    model = L.get_model(name)
    kw = {k: v for k, v in _kw(seq).items() if k != "recompute"}
    keys = list(_keys(model))
    assert any(k[5] > 1 for k in keys)
    fast, slow = SearchMemory(model, kw, cps, comm), SearchMemory(model, kw, cps, comm)
    for rc in ("none", "selective", "full"):
        fast.prefetch(keys, rc)
        fast.prefetch_cp([(tp, pp, c, v) for tp, pp, _, _, c, v in keys], rc)
        assert all(_micro_key(tp, pp, rc, c, v) in fast._micro for tp, pp, _, _, c, v in keys)
        # every cp on arrays, interleaved or not (issue 35, moe17: a key's v of 1 was missed, so per_micro
        # read cp > 1 off calls of its own)
        assert all(set(cps) <= set(fast._micro[_micro_key(tp, pp, rc, c, v)]) for tp, pp, _, _, c, v in keys)
        assert all(state_key(*k[:5], state_chunks(k[2], k[1], k[5])) in fast._states for k in keys if k[2])
        for tp, pp, zero, ep, c, v in keys:
            for cp in cps:
                got = fast.coefficients(tp, pp, zero, ep, rc, c, cp, v)
                want = slow.coefficients(tp, pp, zero, ep, rc, c, cp, v)
                for g, w in zip(got, want):
                    _check(np.asarray(g), np.asarray(w))
        assert set(fast._micro) == set(slow._micro) and set(fast._reference) == set(slow._reference)


def _plan(monkeypatch, arrays: bool, **kw):
    """plan() from scratch, with the arrays or without (and the calls the arrays weighed)."""
    if not arrays:
        monkeypatch.setattr(dense_arrays, "supports", lambda model, kw: False)
    weighed, real = [], dense_arrays.search_pieces
    monkeypatch.setattr(dense_arrays, "search_pieces", lambda m, kw, calls, *a: (weighed.extend(calls),
                                                                                 real(m, kw, calls, *a))[1])
    planner._search.cache_clear()
    plan_memory.kept_search_memory.cache_clear()
    try:
        return planner.plan(**kw), weighed
    finally:
        planner._search.cache_clear()
        plan_memory.kept_search_memory.cache_clear()
        monkeypatch.undo()


@pytest.mark.parametrize("case", [
    dict(model="llama-3.1-405b", seq=131072, global_batch=128, gpus=("H100 SXM",), max_gpus=16384),
    dict(model="llama-3.1-405b", seq=8192, global_batch=2048, gpus=("H100 SXM", "A100 80GB", "B200"),
         max_gpus=16384, shard_under_pipeline=True),
    dict(model="llama-3-70b", seq=65536, global_batch=256, gpus=("H100 SXM",), cp_comm="all_gather"),
    dict(model="gpt3-175b", seq=2048, global_batch=1536, gpus=("A100 80GB",), max_gpus=4096),
    dict(model="gpt2", seq=8192, global_batch=64, gpus=("H100 SXM", "L4")),
    dict(model="llama-3-8b", seq=32768, global_batch=512, gpus=("H100 SXM",), precision="fp8-mixed"),
    dict(model="llama-3-8b", seq=4096, global_batch=256, gpus=("H100 SXM",), precision="bf16-amp"),
    dict(model="qwen3-30b-a3b", seq=65536, global_batch=256, gpus=("H100 SXM",), max_gpus=16384),
    dict(model="deepseek-v2", seq=4096, global_batch=1024, gpus=("H100 SXM", "B200"), max_gpus=4096),
    dict(model="mixtral-8x7b", seq=32768, global_batch=128, gpus=("H100 SXM",), expert_tp=True),
])
def test_a_search_gives_the_same_plans_with_and_without_arrays(monkeypatch, case):
    """Whole searches (chapter 17's widget's and others, with partial recomputation, several GPU types, an
    FP8 recipe; an autocast one, which the arrays leave to the per-layout path; mixtures of experts, whose
    reference layouts the arrays read) give the same frame, bit for bit, with the memory fit on arrays and
    without."""
    kw = dict(tokens=8e11, **case)
    (with_arrays, weighed), (without, none) = _plan(monkeypatch, True, **kw), _plan(monkeypatch, False, **kw)
    assert len(with_arrays) > 0 and not none
    assert bool(weighed) == (case.get("precision") != "bf16-amp")
    # (a dense model's interleaved layouts, issue 34, weighed on the arrays too where the search has them)
    interleaved = (with_arrays["virtual_stages"] > 1).any() and case.get("precision") != "bf16-amp"
    assert any(len(c) > 8 and c[8] > 1 for c in weighed) == bool(interleaved)
    sharded = (with_arrays["zero"] >= 2) & (with_arrays["pp"] > 1)
    if case.get("shard_under_pipeline"):    # (issue 34, opt-in: ZeRO-2/3 under its pipelines, on the arrays)
        assert sharded.any() and any(c[2] == 3 and c[1] > 1 for c in weighed)
    else:
        assert not sharded.any() and not any(c[2] >= 2 and c[1] > 1 for c in weighed)
    pd.testing.assert_frame_equal(with_arrays, without, check_exact=True)


def test_what_the_arrays_do_not_take():
    """An autocast recipe and partial recomputation are not for search_pieces (the per-layout path weighs
    them); nor a layout that keeps its stage outputs after sending them."""
    from llmsizing.parallel import kept_parallel

    dense, moe = L.get_model("llama-3-8b"), L.get_model("mixtral-8x7b")
    assert dense_arrays.supports(dense, _kw(4096)) and dense_arrays.supports(moe, _kw(4096))
    assert not dense_arrays.supports(dense, _kw(4096, precision="bf16-amp"))
    assert not dense_arrays.supports(dense, {**_kw(4096, "full"), "recompute_layers": 1})
    with pytest.raises(ValueError, match="autocast"):
        dense_arrays.search_pieces(dense, _kw(4096, precision="bf16-amp"), [(1, 1, 0, 1, 1, "p2p", 1, 1)])

    def kept_outputs(model, tp, pp, zero, cp, comm, ep, expert_tp, dp, v=1):
        return kept_parallel(tp=tp, pp=pp, dp=dp, deallocate_pipeline_outputs=False), (0, pp - 1)

    with pytest.raises(ValueError, match="kept stage outputs"):
        dense_arrays.search_pieces(dense, _kw(4096), [(1, 4, 0, 8, 1, "p2p", 1, 1)], layout=kept_outputs)


MOE_MODELS = ("mixtral-8x7b", "deepseek-v2", "deepseek-v3", "qwen3-30b-a3b", "gpt-oss-120b",
              "granite-3.0-1b-a400m")


@pytest.mark.parametrize("name", MOE_MODELS)
@pytest.mark.parametrize("expert_tp", [False, True])
def test_a_mixture_of_experts_reference_layouts(name, expert_tp):
    """A mixture of experts' layouts at ep = 1 (the reference layouts SearchMemory reads per_micro off): each
    call's pieces (the heavy stages, a MoE layer's share of each stage) as plan_pricing._pieces gives them,
    every recomputation, pipeline depth, ZeRO stage and cp."""
    model = L.get_model(name)
    for rc in RECOMPUTES:
        kw = _kw(8192, rc)
        calls = [(tp, pp, zero, m, cp, "p2p", b, dp) for tp in (1, 4) for pp in (1, 2, 4, 3)
                 for zero in (0, 1, 3) for m in (1, 8) for cp in (1, 2) for b in (1, 2) for dp in (1, 2)]
        calls = [c for c in calls if _valid(model, c, 8192)]
        got = dense_arrays.search_pieces(model, kw, calls, None, _piece_layout, expert_tp)
        for call, g in zip(calls, got):
            _check(g, _want(model, kw, call, expert_tp))


def test_any_layout_and_stages_the_caller_gives():
    """search_pieces weighs the layout and stages its caller's layout function gives (the planner's:
    plan_pricing._piece_layout, one place for both paths): here a split that counts the embedding and the
    loss as a layer's place each (Megatron-LM's account-for flags, resolved to a written-out split) and three
    stages, with and without interleaved chunks (the first chunk of the first stage one layer fewer), each
    call against memory._search_pieces at that layout."""
    from llmsizing.memory import _search_pieces
    from llmsizing.parallel import kept_parallel

    def accounted(model, tp, pp, zero, cp, comm, ep, expert_tp, dp, v=1):
        flags = dict(account_for_embedding=True, account_for_loss=True) if pp > 1 else {}
        flags.update({"virtual_stages": v} if v > 1 else {})
        par = kept_parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=tp > 1, cp=cp, cp_comm=comm, **flags)
        return par, tuple(sorted({0, min(1, pp - 1), pp - 1}))

    model = L.get_model("llama-3.1-405b")                     # 126 layers: 16 stages of 7, 8 x 14, 7
    for rc in RECOMPUTES:
        kw = _kw(8192, rc)
        calls = [(tp, pp, zero, m, cp, "p2p", b, dp, v) for tp in (1, 8) for pp in (1, 2, 16)
                 for zero in (0, 1) for m in (1, 4, 32) for cp in (1, 2) for b in (1, 2) for dp in (1, 2)
                 for v in (1, 2, 8) if v == 1 or pp > 1]
        for call, g in zip(calls, dense_arrays.search_pieces(model, kw, calls, layout=accounted)):
            tp, pp, zero, m, cp, comm, batch, dp, v = call
            par, stages = accounted(model, tp, pp, zero, cp, comm, 1, False, dp, v)
            want = np.array(_search_pieces(model, par, stages, batch=batch, grad_accum=m, **kw), dtype=float)
            assert len(want) == 5 * len(set(stages))
            _check(g, want)


def _clear_searches() -> None:
    planner._search.cache_clear()
    plan_memory.kept_search_memory.cache_clear()
    dense_arrays._shared_kept.cache_clear()


@pytest.mark.parametrize("name", ["llama-3-8b", "granite-3.0-1b-a400m"])
def test_kept_parts_shared_across_contexts_plan_the_same_bits(name):
    """speed27 (issue 38): the searches of one model and recipe at other contexts and K/V exchanges share
    search_pieces' kept parts. Oracle: each setting planned from scratch (every kept search, SearchMemory
    and shared part cleared), compared exactly with the same settings planned one after the other, so that
    each later search takes the layouts' parts the earlier ones made."""
    settings = [dict(seq=131072, global_batch=128), dict(seq=32768, global_batch=512),
                dict(seq=32768, global_batch=512, cp_comm="all_gather"), dict(seq=8192, global_batch=2048),
                dict(seq=32768, global_batch=512, precision="fp8-mixed")]     # (another recipe: its own)
    run = dict(tokens=8e11, gpus=("H100 SXM",), max_gpus=16384)
    want = []
    for s in settings:
        _clear_searches()
        want.append(planner.plan(name, **run, **s))
    _clear_searches()
    try:
        got = [planner.plan(name, **run, **s) for s in settings]
        # (the searches' SearchMemory objects, one per context and exchange, while they are kept)
        parts = [(m.kw["precision"], m.__dict__.get("_dense_arrays")) for m in plan_memory._SIBLINGS.values()
                 if m.model.name == L.get_model(name).name]
        bf16 = [p for recipe, p in parts if recipe == "bf16-mixed"]
        fp8 = [p for recipe, p in parts if recipe == "fp8-mixed"]
        # (one dict for the contexts 128K, 32K and 8K and each exchange of one recipe, another for fp8)
        assert len(bf16) == 4 and all(p is not None for p in bf16) and len({id(p) for p in bf16}) == 1
        assert len(fp8) == 1 and fp8[0] is not None and fp8[0] is not bf16[0]
    finally:
        _clear_searches()
    for g, w in zip(got, want):
        pd.testing.assert_frame_equal(g, w, check_exact=True)


def test_a_kept_layout_is_checked_again_at_a_context_cp_does_not_split():
    """A layout kept at one context (cp = 2 splits 8,192 tokens into 2 x 2 chunks) is still refused at a
    context that 2 cp does not divide (8,190 = 4 x 2,047 + 2), as resolve_parallel refuses it: the kept
    parts, shared across contexts since speed27, never stand in for that check."""
    dense, kept, call = L.get_model("llama-3-8b"), {}, [(1, 1, 0, 1, 2, "p2p", 1, 1)]
    dense_arrays.search_pieces(dense, _kw(8192), call, kept)
    assert kept["layouts"]
    with pytest.raises(ValueError, match="multiple of 2 x cp"):
        dense_arrays.search_pieces(dense, _kw(8190), call, kept)


@pytest.mark.parametrize("name", ["llama-3.1-405b", "gpt2", "granite-3.0-2b", "qwen3-30b-a3b", "deepseek-v2"])
@pytest.mark.parametrize("first, then", [("p2p", "all_gather"), ("all_gather", "p2p")])
def test_the_other_exchange_from_the_kept_table(name, first, then):
    """lc47 (issue 38): calls asked again with the other K/V exchange, every one at cp > 1, take the table
    kept for the first with its K/V buffer columns replaced: each call's pieces are still those
    plan_pricing._pieces gives at that exchange (the per-layout path, whose K/V buffers differ: the check
    fails if the columns were left as they were), bit for bit, and no layout of the second exchange is
    resolved (the kept table was read: the check fails if it was not). One kept dict for every
    recomputation (the core's arguments in the key: another recomputation's table never stands in), and a
    list with a cp = 1 call among them is worked out as before."""
    model = L.get_model(name)
    seq, kept = 32768, {}
    for rc in RECOMPUTES:
        kw = _kw(seq, rc)
        calls = [(tp, pp, 0, m, cp, first, b, 1, v) for tp in (1, 8) for pp in (1, 2, 3) for m in (1, 8)
                 for cp in (2, 4) for b in (1, 2) for v in ((1, 2) if pp > 1 and not model.is_moe else (1,))]
        calls = [c for c in calls if _valid(model, c, seq)]
        assert len(calls) > 20
        for call, g in zip(calls, dense_arrays.search_pieces(model, kw, calls, kept)):
            _check(g, _want(model, kw, call))
        other = [c[:5] + (then,) + c[6:] for c in calls]
        for call, g in zip(other, dense_arrays.search_pieces(model, kw, other, kept)):
            _check(g, _want(model, kw, call))
        assert not any(key[4] == then for key in kept["layouts"])
    mixed = [(1, 1, 0, 1, 1, then, 1, 1)] + other                  # (a cp = 1 call: as before)
    for call, g in zip(mixed, dense_arrays.search_pieces(model, kw, mixed, kept)):
        _check(g, _want(model, kw, call))
    assert any(key[4] == then for key in kept["layouts"])
