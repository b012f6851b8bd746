"""Issue 35 (fast17b): what chapter 17's moves ask again is kept between searches, with the same bits.

* ``plan_moe._kept_key_rows``: a mixture of experts' data-parallel rows per (model, GPU, node, precision,
  expert_tp) and key, and ``plan_moe.kept_unit_rows``: the unit-link rows per key, across GPUs;
* ``plan_pricing._digest``: the SHA-1 of a GPU's candidates over narrowed integer columns;
* ``charts.time_money_plan._first_of_each``: the point cloud's first point per pixel, without a sort.

The oracle of each is the path without it: every setting planned with every kept table cleared, compared
exactly (``check_exact``) with the same settings planned in a walk that keeps them, forward and reversed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from llmsizing import plan_moe, plan_pricing, planner
from llmsizing.charts.time_money_plan import _first_of_each

MODEL = "granite-3.0-1b-a400m"           # (a small mixture of experts: its searches take ~0.1-0.3 s)
SETTINGS = (
    dict(seq=131072, global_batch=128, gpus=("H100 SXM",)),
    dict(seq=32768, global_batch=512, gpus=("H100 SXM",)),
    dict(seq=32768, global_batch=256, gpus=("H100 SXM",)),
    dict(seq=32768, global_batch=256, gpus=("H100 SXM",), cp_comm="all_gather"),
    dict(seq=32768, global_batch=256, gpus=("H100 SXM", "B200"), cp_comm="all_gather"),
    dict(seq=131072, global_batch=128, gpus=("B200", "A100 80GB"), expert_tp=True),
)


def _clear_all() -> None:
    planner._search.cache_clear()            # (the searches, the priced blocks and the layouts)
    plan_moe._kept_dp_rows.cache_clear()
    plan_moe._kept_units.clear()


def _plan(setting):
    return planner.plan(MODEL, tokens=8e11, max_gpus=16384, **setting)


@pytest.fixture(scope="module")
def fresh():
    """Each setting planned from scratch, without the kept data-parallel rows (nothing kept from another
    search; the rows worked out by the code they stand for)."""
    out = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan_moe, "_kept_key_rows", plan_moe._key_rows)
        mp.setattr(plan_moe, "kept_unit_rows", lambda model, keys, part, **kw: plan_moe.dp_unit_rows(
            model, keys, part, dp_calls=plan_moe._dp_calls, **kw))
        for s in SETTINGS:
            _clear_all()
            out.append(_plan(s))
    _clear_all()
    return out


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_a_walk_keeping_the_rows_plans_the_same_bits(fresh, order):
    at = list(range(len(SETTINGS)))
    if order == "reversed":
        at.reverse()
    _clear_all()
    for i in at:
        planner._search.cache_clear()        # (each search priced again: only this change's tables kept)
        df = _plan(SETTINGS[i])
        pd.testing.assert_frame_equal(df, fresh[i], check_exact=True)
        assert df.attrs == fresh[i].attrs
    # the walk used them: each GPU type's rows were kept
    assert {k[1].name for k in plan_moe._kept_dp_rows} >= {"H100 SXM", "B200", "A100 80GB"}
    _clear_all()


def _random_keys(rng, n: int):
    """``n`` random (tp, pp, zero, ep, dp x cp) layout keys, unique and sorted, with ep dividing dp x cp."""
    cols = dict(tp=rng.choice([1, 2, 4, 8], n), pp=rng.choice([1, 2, 4], n), zero=rng.choice([0, 1, 2], n),
                ep=rng.choice([1, 2, 4, 8], n), dpcp=rng.choice([1, 2, 8, 64, 512, 4096], n))
    cols["dpcp"] = np.lcm(cols["dpcp"], cols["ep"])                  # (ep divides tp x dp x cp)
    return np.unique(np.stack([cols[k] for k in ("tp", "pp", "zero", "ep", "dpcp")], axis=1), axis=0)


def test_kept_key_rows_are_the_rows_of_each_key_alone():
    """The kept rows of keys asked in two searches are those of the keys asked together in one."""
    from llmsizing.catalog import get_gpu, get_model
    from llmsizing.network import get_node

    m, g = get_model(MODEL), get_gpu("H100 SXM")
    node_of = {g.name: get_node(None, g)}
    keys = _random_keys(np.random.default_rng(35), 400)
    gi = np.zeros(len(keys), dtype=int)
    args = (m, [g], node_of, "bf16-mixed", False)
    whole = plan_moe._key_rows(*args, gi, *keys.T)
    plan_moe._kept_dp_rows.cache_clear()
    half = len(keys) // 2
    plan_moe._kept_key_rows(*args, gi[:half], *keys[:half].T)       # (the first half kept)
    got = plan_moe._kept_key_rows(*args, gi, *keys.T)               # (the rest worked out, then all read)
    for a, b in zip(got, whole):
        assert np.array_equal(a, b)
    codes, rows = plan_moe._kept_dp_rows[(m, g, node_of[g.name], "bf16-mixed", False)]
    assert len(codes) == len(keys) and not rows.flags.writeable
    plan_moe._kept_dp_rows.cache_clear()


def test_kept_key_rows_of_several_gpus_are_each_gpus_own():
    """speed26: the keys no GPU type keeps are worked out in one call for all of them, rows of GPUs in any
    order; each row is the one the GPU's own call (that GPU alone, its keys alone) gives, whether its GPU kept
    some keys before or none."""
    from llmsizing.catalog import get_gpu, get_model
    from llmsizing.network import get_node

    m = get_model(MODEL)
    gpus = [get_gpu(x) for x in ("H100 SXM", "B200", "A100 80GB")]
    node_of = {g.name: get_node(None, g) for g in gpus}
    rng = np.random.default_rng(26)
    keys = _random_keys(rng, 600)
    gi = rng.integers(0, len(gpus), len(keys))                       # (the GPUs' rows interleaved)
    own = [np.empty((len(keys), len(plan_moe._DP_SLOTS))) for _ in range(2)]
    for g, gpu in enumerate(gpus):                                  # (the oracle: one GPU's keys alone)
        sel = np.flatnonzero(gi == g)
        got = plan_moe._key_rows(m, [gpu], {gpu.name: node_of[gpu.name]}, "bf16-mixed", False,
                                 np.zeros(len(sel), dtype=int), *keys[sel].T)
        for a, b in zip(own, got):
            a[sel] = b
    plan_moe._kept_dp_rows.cache_clear()
    args = (m, gpus, node_of, "bf16-mixed", False)
    first = np.flatnonzero(gi == 1)[::2]                             # (the B200 keeps half its keys first)
    plan_moe._kept_key_rows(*args, gi[first], *keys[first].T)
    for _ in range(2):                                              # (then all: worked out, then all kept)
        got = plan_moe._kept_key_rows(*args, gi, *keys.T)
        for a, b in zip(got, own):
            assert np.array_equal(a, b)
    assert {k[1].name for k in plan_moe._kept_dp_rows} == {g.name for g in gpus}
    for g, gpu in enumerate(gpus):
        codes, _ = plan_moe._kept_dp_rows[(m, gpu, node_of[gpu.name], "bf16-mixed", False)]
        assert len(codes) == (gi == g).sum()
    plan_moe._kept_dp_rows.cache_clear()


def test_a_degree_beyond_the_packed_bits_is_worked_out_not_kept():
    assert plan_moe._key_code(np.array([1]), np.array([1]), np.array([0]), np.array([1]),
                              np.array([2**28])) is None
    assert plan_moe._key_code(np.array([8]), np.array([4]), np.array([3]), np.array([64]),
                              np.array([2**28 - 1])) is not None


def test_digest_names_the_narrowed_type():
    """Equal candidates, equal digests; other values, dtypes or shapes, other digests (a narrowed int16 256
    has the bytes of an int8 [0, 1]: the dtype and the shape keep them apart)."""
    one = {"tp": np.array([1, 2, 8], dtype=np.int64), "dp": np.array([3, 70000, 5], dtype=np.int64)}
    same = {k: v.copy() for k, v in one.items()}
    assert plan_pricing._digest(one) == plan_pricing._digest(same)
    other = dict(one, dp=np.array([3, 70001, 5], dtype=np.int64))
    assert plan_pricing._digest(one) != plan_pricing._digest(other)
    assert plan_pricing._digest({"a": np.array([256])}) != plan_pricing._digest({"a": np.array([0, 1])})
    assert (plan_pricing._digest({"a": np.array([1, 2], dtype=np.int32)})
            != plan_pricing._digest({"a": np.array([1, 2], dtype=np.int64)}))
    assert plan_pricing._digest({"a": np.array([-129, 5])}) != plan_pricing._digest({"a": np.array([127, 5])})


@pytest.mark.parametrize("case", ["dense", "negative", "sparse", "one", "empty"])
def test_first_of_each_is_numpys_first_occurrence(case):
    rng = np.random.default_rng(17)
    n = {"one": 1, "empty": 0}.get(case, 5000)
    span = {"dense": 60, "negative": 60, "sparse": 2**29}.get(case, 10)
    x, y = rng.integers(0, span, n), rng.integers(0, span, n)
    if case == "negative":
        x, y = x - 100, y - 2**20
    want = np.unique((x << 31) + y, return_index=True)[1]
    assert np.array_equal(np.sort(_first_of_each(x, y)), np.sort(want))


@pytest.mark.parametrize("kind", ["ties", "near_front", "not_finite", "all_on_front"])
def test_pareto_of_the_rows_no_bin_rules_out_is_the_sorted_one(kind):
    """``plan_rank._pareto`` without an order (the chart's front of each GPU type) keeps only the rows that no
    strictly faster and strictly cheaper bin rules out before it sorts (``_undominated``): the same front as
    the sort of every row."""
    from llmsizing import plan_rank

    rng = np.random.default_rng(len(kind))
    for _ in range(20):
        n = int(rng.integers(4097, 9000))
        if kind == "ties":
            days = rng.choice(np.round(rng.random(150) * 50, 2), n)
            cost = rng.choice(np.round(rng.random(80) * 1e6), n)
        elif kind == "near_front":
            days = rng.random(n) * 1e3
            cost = 1e9 / days * (1 + 0.01 * rng.random(n))
        elif kind == "not_finite":
            days = rng.choice([1.0, 2.0, np.inf, np.nan, 0.0, 3.0, 1e-300], n)
            cost = rng.choice([5.0, 4.0, np.nan, np.inf, 1.0, 0.0], n)
        else:
            x = rng.random(n)
            days, cost = np.exp(x * 10), np.exp((1 - x) * 10)
        memory = rng.integers(0, 5, n) if n % 2 else rng.choice([1.0, 2.0, -0.0, 0.0], n)
        ok = np.isfinite(days) & np.isfinite(cost)
        d, c = np.where(ok, days, np.inf), np.where(ok, cost, np.inf)
        sorted_front = plan_rank._pareto(days, cost, memory,
                                         order=plan_rank._lex_orders((np.asarray(memory), c, d))[0])
        assert np.array_equal(plan_rank._pareto(days, cost, memory), sorted_front)
