"""plan(gpu_counts=) (issue 35/38, fast10b): the plans on the GPU counts asked, and only those. A search's
plans on n GPUs do not depend on the other counts it weighs (plan_rank.plans_within), so each row must be,
column for column and bit for bit, the row of the search of every count, and in the same order; only
``pareto``, a front over the rows returned, may differ. Chapter 10's chart (stages.moe_default_layout) reads
the counts that share a global batch this way."""

import pandas as pd
import pytest

from llmsizing import plan_memory, planner, stages
from llmsizing.planner import NoPlanError, plan


def _clear():
    planner._search.cache_clear()
    plan_memory.kept_search_memory.cache_clear()

CASES = [("mixtral-8x7b", dict(gpus=("H100 SXM",), seq=4096, global_batch=1024, max_gpus=1024),
          (64, 256, 1024)),
         ("deepseek-v3", dict(gpus=("H100 SXM",), seq=8192, global_batch=512, max_gpus=512), (256, 512)),
         ("qwen3-30b-a3b", dict(gpus=("H100 SXM", "A100 80GB"), seq=4096, global_batch=1024, max_gpus=1024),
          (8, 48, 96, 1024)),
         ("llama-3-8b", dict(gpus=("H100 SXM", "A100 80GB"), seq=8192, global_batch=256, max_gpus=256),
          (1, 3, 16, 24, 256)),
         ("llama-3-70b", dict(gpus=("H100 SXM",), seq=8192, global_batch=512, max_gpus=512,
                              recomputes=("none", "full")), (16, 64, 384))]


@pytest.mark.parametrize("model, kw, counts", CASES, ids=[c[0] for c in CASES])
def test_rows_are_those_of_the_search_of_every_count(model, kw, counts):
    _clear()                                   # (each from scratch: the memory entries of its own layouts)
    got = plan(model, tokens=1e12, gpu_counts=counts, **kw)
    _clear()
    full = plan(model, tokens=1e12, **kw)
    want = full[full["n_gpus"].isin(counts)].drop(columns="pareto").reset_index(drop=True)
    assert len(want) and len(want) < len(full)
    assert set(got["n_gpus"]) <= set(counts)
    pd.testing.assert_frame_equal(got.drop(columns="pareto").reset_index(drop=True), want, check_exact=True)
    # the limit is the largest count: the same rows searched with a larger max_gpus
    again = plan(model, tokens=1e12, gpu_counts=counts, **{**kw, "max_gpus": 4 * kw["max_gpus"]})
    pd.testing.assert_frame_equal(again, got, check_exact=True)


def test_no_plan_on_the_counts_says_which():
    with pytest.raises(ValueError, match=r"gpu_counts=\(1, 2\)"):
        plan("deepseek-v3", tokens=1e12, seq=8192, global_batch=512, gpu_counts=(2, 1))


@pytest.mark.parametrize("counts, index, count", [((64, 1024), 1, "1,024"), ([2048], 0, "2,048"),
                                                   ((64, 32, 129), 2, "129")])
def test_a_count_beyond_max_gpus_is_refused(counts, index, count):
    """review23b L2: a count above max_gpus is a bad argument (ValueError naming its index, the value and the
    limit), neither dropped in silence nor a NoPlanError about memory; with explain=False as well."""
    for explain in (True, False):
        with pytest.raises(ValueError, match=rf"gpu_counts\[{index}\]: {count} is above max_gpus=128") as e:
            plan("mixtral-8x7b", tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=1024, max_gpus=128,
                 gpu_counts=counts, explain=explain)
        assert not isinstance(e.value, NoPlanError)


def test_a_count_at_max_gpus_is_kept():
    got = plan("mixtral-8x7b", tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=1024, max_gpus=128,
               gpu_counts=(64, 128), explain=False)
    assert set(got["n_gpus"]) <= {64, 128} and 64 in set(got["n_gpus"])


@pytest.mark.parametrize("bad, error, says", [((64, -8), ValueError, r"gpu_counts\[1\]"),
                                              ((64.5,), TypeError, r"gpu_counts\[0\]"),
                                              ((8, 16, 0), ValueError, r"gpu_counts\[2\]"),
                                              ("64", TypeError, "gpu_counts must be a list or tuple"),
                                              (64, TypeError, "gpu_counts must be a list or tuple")])
def test_bad_counts_name_the_index(bad, error, says):
    with pytest.raises(error, match=says):
        plan("mixtral-8x7b", tokens=1e12, seq=4096, global_batch=1024, gpu_counts=bad)


@pytest.mark.parametrize("bad, error", [((0,), ValueError), ((64, -8), ValueError), ((64.5,), TypeError),
                                        ("64", TypeError), ((), ValueError)])
def test_bad_counts_name_the_parameter(bad, error):
    with pytest.raises(error, match="gpu_counts"):
        plan("mixtral-8x7b", tokens=1e12, seq=4096, global_batch=1024, gpu_counts=bad)


def test_the_counts_sharing_a_global_batch():
    """stages._sharing: the counts d whose default global batch (d x ceil(4M tokens / (seq d))) is gb, by
    hand: at 8,192 tokens 4M tokens are 512 sequences, so every divisor of 512 asks for 512 (1,024: 1,024
    alone, as 512 x ceil(512 / 512) = 512); at 4,096 tokens, 1,024 sequences."""
    assert stages._sharing(512, 8192) == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    assert stages._sharing(1024, 8192) == (1024,)
    assert stages._sharing(4096, 4096) == (4096,)
    assert stages._sharing(1024, 4096) == tuple(2 ** k for k in range(11))
    # 1,026 = 2 x 3^3 x 19: 3 x ceil(1024 / 3) = 3 x 342 = 1,026, and so for every divisor but 1 and 2
    # (1 x 1,024 and 2 x 512 are 1,024)
    assert stages._sharing(1026, 4096) == (3, 6, 9, 18, 19, 27, 38, 54, 57, 114, 171, 342, 513, 1026)
