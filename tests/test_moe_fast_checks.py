"""moefast35's two kept answers give what the paths before them gave, bit for bit (issue 35): the search's MoE
layout check kept per (tp, ZeRO stage, ep, expert_tp) (``plan_candidates.moe_layout_passes``, before: one
``check_layout`` per (tp, pp, ZeRO stage, ep)) and the pricing's GEMM efficiencies kept per (model, GPU, tp,
tokens, dtype, eps) (``kernels._kept_gemm_efficiencies``, before: ``layer_gemm_efficiencies`` on every
ask). Whole searches go through both paths on chapter 17's ten mixtures of experts and on a grid of settings;
their frames are compared exactly, and the kept verdicts with ``check_layout``'s at every pp."""

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from _same_plans import same_plans, searched_with
from llmsizing import kernels, plan_candidates, planner
from llmsizing.catalog import get_model
from llmsizing.layouts import _divisors
from llmsizing.parallel import check_layout
from llmsizing.plan_pricing import pipeline_degrees

MOE = ("mixtral-8x7b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v2", "deepseek-v3", "gpt-oss-120b",
       "llama-4-scout", "granite-3.0-1b-a400m", "granite-3.0-3b-a800m", "olmoe-1b-7b")


def _old_check(kept, model, *, tp, pp, zero, ep, expert_tp):
    """The search's check before moefast35: check_layout at each (tp, pp, ZeRO stage, ep)."""
    try:
        check_layout(model, tp=tp, pp=pp, zero=zero, sp=tp > 1, ep=ep, expert_tp=expert_tp)
    except ValueError:
        return False
    return True


def _old_rates(model, gpu, tp, tokens, dtype, eps):
    return kernels.layer_gemm_efficiencies(model, gpu, tp=tp, tokens=tokens, dtype=dtype, eps=eps)


def _searched(old: bool, **kw):
    return searched_with(old, [(planner, "moe_layout_passes", _old_check),
                               (kernels, "_kept_gemm_efficiencies", _old_rates)],
                         [planner._search, kernels._gemm_efficiencies_of], **kw)


def _same(**kw):
    same_plans(_searched, **kw)


@pytest.mark.parametrize("model", MOE)
def test_chapter_17_models_give_the_old_frames(model):
    """Each mixture of experts of chapter 17's widget at its default setting (128K, 16M tokens per batch,
    H100 SXM, at most 16,384 GPUs): the same frame through the kept answers and the old paths."""
    _same(model=model, seq=131072, global_batch=128, gpus=("H100 SXM",), max_gpus=16384)


@settings(max_examples=12, deadline=None)
@given(model=st.sampled_from(MOE), seq=st.sampled_from((4096, 32768, 65536)),
       gpus=st.sampled_from((("H100 SXM",), ("A100 80GB", "B200"), ("H100 SXM", "L40S"))),
       max_gpus=st.sampled_from((512, 16384, None)), expert_tp=st.booleans(),
       precision=st.sampled_from(("bf16-mixed", "fp8-mixed")))
def test_a_grid_of_searches_gives_the_old_frames(model, seq, gpus, max_gpus, expert_tp, precision):
    _same(model=model, seq=seq, global_batch=max(2**24 // seq, 1), gpus=gpus, max_gpus=max_gpus,
          expert_tp=expert_tp, precision=precision)


@pytest.mark.parametrize("model", MOE)
@pytest.mark.parametrize("expert_tp", (False, True))
def test_kept_verdicts_are_check_layout_at_every_pp(model, expert_tp):
    """For every (tp, pp, ZeRO stage, ep) a search may weigh (tp up to 64, every pipeline degree, ZeRO 0-3,
    every divisor of the experts up to 1,024), where check_layout(model, tp, pp) lets (tp, pp) through: the
    kept verdict, asked in the search's order, is check_layout's own at that pp."""
    m = get_model(model)
    kept, n_refused = {}, 0
    for tp in (1, 2, 4, 8, 16, 32, 64):
        for pp in pipeline_degrees(m, 64):
            try:
                check_layout(m, tp=tp, pp=pp)
            except ValueError:
                continue
            for zero, ep in itertools.product(range(4), _divisors(m.experts, 1024)):
                want = _old_check(None, m, tp=tp, pp=pp, zero=zero, ep=ep, expert_tp=expert_tp)
                n_refused += not want
                assert plan_candidates.moe_layout_passes(kept, m, tp=tp, pp=pp, zero=zero, ep=ep,
                                                         expert_tp=expert_tp) is want, (tp, pp, zero, ep)
    assert n_refused                                   # (zero=3 with ep > 1 at least: both answers met)


def test_kept_gemm_efficiencies_are_the_function_bit_for_bit():
    """The kept rates are layer_gemm_efficiencies' values, and an unhashable eps is worked out as given."""
    g = kernels.get_gpu("H100 SXM")
    for model, tp, tokens, eps in (("qwen3-30b-a3b", 1, 4096, (1, 8, 128)),
                                   ("deepseek-v2", 8, 65536, (1, 160)), ("gpt-oss-120b", 4, 131072, (2, 4))):
        m = get_model(model)
        want = kernels.layer_gemm_efficiencies(m, g, tp=tp, tokens=tokens, dtype="bf16", eps=eps)
        for _ in range(2):
            assert kernels._kept_gemm_efficiencies(m, g, tp, tokens, "bf16", eps) == want
        assert kernels._kept_gemm_efficiencies(m, g, tp, tokens, "bf16", list(eps)) == want


def _old_pareto(days, cost, memory, order=None):
    """plan_rank._pareto before moefast35: without ``order``, the order from np.lexsort."""
    import numpy as np

    from llmsizing.plan_rank import _pareto

    if order is None and len(days):
        ok = np.isfinite(days) & np.isfinite(cost)
        d, c = np.where(ok, days, np.inf), np.where(ok, cost, np.inf)
        order = np.lexsort((memory, c, d))
    return _pareto(days, cost, memory, order=order)


@pytest.mark.parametrize("model", MOE)
def test_pareto_orders_as_lexsort_did_on_chapter_17_tables(model):
    """The chart's per-GPU front (plan_rank._pareto without an order, now ordered by _lex_orders): the same
    rows as with np.lexsort's order, on each ch17 MoE model's whole table and on its first 997 rows with days
    and costs rounded to force ties, an infinite and a NaN cost."""
    import numpy as np

    from llmsizing.plan_rank import _pareto

    df = planner.plan(model=model, tokens=8e11, seq=131072, global_batch=128, gpus=("H100 SXM",),
                      max_gpus=16384)
    days, cost, memory = (df[c].to_numpy() for c in ("days", "cost_usd", "memory_per_gpu_bytes"))
    assert np.array_equal(_pareto(days, cost, memory), _old_pareto(days, cost, memory))
    d, c, m = np.round(days[:997], 1), np.round(cost[:997], -4), memory[:997].copy()
    c[3], c[5] = np.inf, np.nan
    assert np.array_equal(_pareto(d, c, m), _old_pareto(d, c, m))
