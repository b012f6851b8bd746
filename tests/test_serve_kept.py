"""Each distinct replica priced once inside a fleet search (issue 38: widget moves <= 100 ms;
llmsizing.serve_search.kept_servings). The expected values are the reference path's: the same search with
every replica priced anew (serve_search._kept_serving swapped for serve_step.serving), computed here on a
grid, never typed in. Equal means equal to the last digit (the repr of every field)."""

import itertools

import pytest

from llmsizing import serve_search, serve_step
from llmsizing.catalog import use_prices
from llmsizing.charts.serve_tune import fleet_plans
from llmsizing.serve import replicas_for

#: dense (GQA, small and large), a mixture of experts and an MLA model; two GPU generations
MODELS = ("llama-3-8b", "llama-3-70b", "mixtral-8x7b", "deepseek-v2")
GPUS = ("H100 SXM", "A100 80GB")
#: the mean answer, a percentile, a ceiling, disaggregated pools; by users and by rate; a prefix cache
ASKS = (dict(users=1000), dict(requests_per_s=20.0, percentile=95.0),
        dict(users=300, percentile=90.0, occupancy=0.7, prefix_hit=0.5),
        dict(users=1000, percentile=95.0, disaggregated=True),
        dict(users=50, with_range=False, prefix_hit=0.3))


def _reference(monkeypatch, fn):
    """``fn()`` with every replica priced anew (the path before kept_servings)."""
    with monkeypatch.context() as mp:
        mp.setattr(serve_search, "_kept_serving", serve_step.serving)
        return _outcome(fn)


def _outcome(fn):
    try:
        return repr(fn())
    except ValueError as e:                       # a load no layout meets: the same message
        return f"ValueError: {e}"


@pytest.mark.parametrize("model, gpu", list(itertools.product(MODELS, GPUS)))
def test_replicas_for_equals_the_reference_path(monkeypatch, model, gpu):
    for ask in ASKS:
        def fn():
            return replicas_for(model, gpu, ttft_s=1.0, itl_s=0.05, **ask)
        ref = _reference(monkeypatch, fn)
        assert _outcome(fn) == ref, ask


@pytest.mark.parametrize("model, gpu, users, prompt, itl_ms", [
    ("llama-3-70b", "H100 SXM", 1000, 1024, 50.0), ("llama-3-8b", "A100 80GB", 300, 4096, 30.0),
    ("mixtral-8x7b", "H100 SXM", 3000, 512, 80.0), ("llama-3-70b", "A100 80GB", 10, 8192, 20.0)])
def test_the_fleet_widgets_three_plans_equal_the_reference_path(monkeypatch, model, gpu, users, prompt,
                                                                itl_ms):
    def fn():
        return fleet_plans(model, gpu, users=users, prompt=prompt, itl_ms=itl_ms)
    assert _outcome(fn) == _reference(monkeypatch, fn)


def test_a_replica_is_priced_once_per_block_and_kept_only_inside_it(monkeypatch):
    calls = []

    def counted(*a, **kw):
        calls.append(1)
        return serve_step.serving(*a, **kw)
    monkeypatch.setattr(serve_search, "_serving", counted)
    replicas_for("llama-3-70b", "H100 SXM", users=1000, percentile=95.0)
    once = len(calls)
    # the same search again: nothing is kept between calls (a block per call), so it prices as many again
    replicas_for("llama-3-70b", "H100 SXM", users=1000, percentile=95.0)
    assert len(calls) == 2 * once
    assert serve_search._KEPT.get() is None
    # inside one block the second search prices nothing new
    calls.clear()
    with serve_search.kept_servings():
        replicas_for("llama-3-70b", "H100 SXM", users=1000, percentile=95.0)
        first = len(calls)
        replicas_for("llama-3-70b", "H100 SXM", users=1000, percentile=95.0)
        assert len(calls) == first
    assert serve_search._KEPT.get() is None
    # and the search asks for fewer distinct replicas than it did calls: three speeds share their probes
    calls.clear()
    monkeypatch.setattr(serve_search, "_kept_serving", counted)
    replicas_for("llama-3-70b", "H100 SXM", users=1000, percentile=95.0)
    assert len(calls) > first


def test_a_price_set_between_two_searches_is_used():
    before = replicas_for("llama-3-70b", "H100 SXM", users=1000)
    try:
        use_prices({"H100 SXM": 2 * before.serving.price_usd_per_gpu_hour})
        after = replicas_for("llama-3-70b", "H100 SXM", users=1000)
    finally:
        use_prices(None)
    assert after.serving.price_usd_per_gpu_hour == 2 * before.serving.price_usd_per_gpu_hour
    assert after.gpus == before.gpus
