"""moe21 (issue 35): the memory fit's coefficient table held piece by candidate, its candidates' ids numbered
without a sort, and the state tables and pair keys one search's recomputations share
(:func:`llmsizing.plan_tables.table_totals`). Each is the same numbers as before: the ids against
``np.unique`` on a grid, whole searches with the sharing on and off (chapter 17's mixtures of experts at its
defaults and an autocast recipe, which shares nothing), and with the table of rows as it was
(benchmarks/bench_moe21_ab.table_totals_rows, main 057d2ec), frames compared exactly."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from _same_plans import same_plans
from llmsizing import plan_memory, planner
from llmsizing.plan_tables import _distinct_ids

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_moe21_ab  # noqa: E402

#: chapter 17's widget at its defaults (long_context_widget: 128K, 16M tokens a step, H100 SXM, 16,384 GPUs).
CH17 = dict(tokens=1e12, gpus=("H100 SXM",), seq=131072, global_batch=128, max_gpus=16384, cp_comm="p2p")


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 300), ids=st.lists(st.integers(0, 299), max_size=400))
def test_distinct_ids_are_uniques(n, ids):
    x = np.array([i % n for i in ids], dtype=np.int64)
    want, inverse = np.unique(x, return_inverse=True)
    got, at = _distinct_ids(x, n)
    assert got.dtype == want.dtype and at.dtype == inverse.dtype
    assert got.tolist() == want.tolist() and at.tolist() == inverse.reshape(-1).tolist()


def _searched(side: str):
    def searched(old: bool, **kw):
        real = plan_memory._table_totals

        def unshared(*a, kept=None):                   # each recomputation reads its entries itself
            return real(*a, None)

        planner._search.cache_clear()
        plan_memory.kept_search_memory.cache_clear()
        with pytest.MonkeyPatch.context() as m:
            if old and side == "unshared":
                m.setattr(plan_memory, "_table_totals", lambda *a: unshared(*a[:10]))
            if old and side == "rows":
                m.setattr(plan_memory, "table_totals", bench_moe21_ab.table_totals_rows)
            try:
                return planner.plan(**kw)
            finally:
                planner._search.cache_clear()
                plan_memory.kept_search_memory.cache_clear()
    return searched


@pytest.mark.parametrize("side", ["unshared", "rows"])
@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "deepseek-v2", "granite-3.0-1b-a400m", "mixtral-8x7b"])
def test_ch17_searches_are_the_same(model, side):
    same_plans(_searched(side), model=model, **CH17)


@pytest.mark.parametrize("side", ["unshared", "rows"])
@pytest.mark.parametrize("kw", [dict(model="llama-3-8b", tokens=1e12, seq=8192, global_batch=512,
                                     gpus=("H100 SXM", "A100 80GB"), max_gpus=1024),
                                dict(model="llama-3-8b", tokens=1e12, seq=4096, global_batch=256,
                                     gpus=("H100 SXM",), max_gpus=512, precision="bf16-amp"),
                                dict(model="mixtral-8x7b", tokens=1e12, seq=4096, global_batch=128,
                                     gpus=("RTX 4090", "L40S", "A100 40GB", "H100 SXM", "B200"))])
def test_other_searches_are_the_same(kw, side):
    same_plans(_searched(side), **kw)
