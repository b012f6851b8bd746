"""The memory fit's coefficient table on arrays (llmsizing.plan_tables, issue 35, moe17) gives what the loop
it replaced gave, bit for bit. That loop (plan_memory._table_totals as it stood at e9a9e23, before moe17) is
kept below; whole searches of mixtures of experts (and dense models) are run through both, with the candidate
columns kept between searches (plan_tables.kept_candidates) or built per search as before, and their frames
compared exactly. The numbering helper (plan_tables.first_seen) is checked against a dict's setdefault, the
numbering the loop used, on random tables (the packed int64 key and the wide-table fallback)."""


import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from _same_plans import same_plans, searched_with
from llmsizing import plan_memory, plan_tables, planner
from llmsizing.memory import FIXED_OVERHEAD_BYTES, FRAGMENTATION
from llmsizing.plan_candidates import _candidates, _pair_table, state_chunks
from llmsizing.layouts import _divisors


def _reference_table_totals(memory, parts, rc, coef_id, lay, pair_of, rows, micro, dpf, limits, kept=None):
    """:func:`~llmsizing.plan_pricing._total_bytes` of the candidates ``rows`` (of any layouts) with
    recomputation ``rc``, from one table of their coefficients (:meth:`SearchMemory.coefficients`, a row per
    (layout, pair) asked for; pieces a layout lacks padded with ``-inf``, which no peak takes). The entries
    are asked for in :meth:`SearchMemory.coefficients`' order; the table is stacked from the distinct ones
    (``fixed`` and ``sharded`` per layout, ``per_micro`` per pair), ``sharded / cp`` on the whole table (the
    same quotient entry by entry, and ``x / 1 = x``). A row whose floor exceeds every GPU's entry of
    ``limits`` keeps its floor as total (fitting_plans drops it unread). ``kept`` (the tables the fast path's
    recomputations share, moe21) is not read: each call asks for every entry itself."""
    ids, first, at = np.unique(coef_id[rows], return_index=True, return_inverse=True)
    # each row's (layout, (cp, accumulation class)); the layouts' states that take one call each, at once
    lays, pairs = (x[rows[first]].tolist() for x in (lay, pair_of))
    asked = [(parts[j][0], parts[j][2]["pairs"][p]) for j, p in zip(lays, pairs)]
    memory.prefetch([(*key[:4], cls, *key[4:]) for key, (_, cls) in asked], rc)
    # the distinct entries, each asked for once, first asked first (issue 35, dense35: thousands of asks)
    state_of, micro_of, state_at, micro_at = {}, {}, [], []
    for key, (_, c) in asked:
        sv = state_chunks(key[2], key[1], key[4])
        state_at.append(state_of.setdefault((key[:4], c, sv), len(state_of)))
    st_list = [memory.states(*key, c, rc, sv) for key, c, sv in state_of]
    fixed, sharded = (plan_tables.padded([st[i] for st in st_list], -np.inf if i == 0 else 0.0)
                      for i in (0, 1))
    at = at.reshape(-1)
    rows_state = np.array(state_at)[at]
    cp = np.array([cp for _, (cp, _) in asked], dtype=float)[at]
    fixed, sharded = fixed[rows_state], sharded[rows_state] / cp[:, None] / dpf[rows][:, None]
    # the floor (micro-batch 0: fixed + 0 + sharded / dp, the same values; pieces are finite, -inf the pads
    # of fixed). fitting_plans drops a candidate from each GPU whose limit its floor exceeds (FLOOR_MARGIN)
    # before it reads a total: an entry no candidate below some GPU's limit needs is read at cp = 1 (the
    # calls made before, SearchMemory.per_micro), its cp > 1 not asked for (two calls), its rows unread
    floor = (fixed + sharded).max(axis=1)
    live = ~(floor > limits.max() * (1 + plan_memory.FLOOR_MARGIN))          # (beyond the largest: every one)
    need = np.zeros(len(asked), dtype=bool)
    need[at[live]] = True
    memory.prefetch_cp([(*k[0][:2], k[1][1], *k[0][4:]) for k, n in zip(asked, need) if n and k[1][0] > 1],
                       rc)
    for (key, (cp, c)), n in zip(asked, need.tolist()):
        micro_at.append(micro_of.setdefault((*key[:2], c, cp if n else 1, *key[4:]), len(micro_of)))
    per_micro = plan_tables.padded(
        [memory.per_micro(tp, pp, rc, c, cp, *v) for tp, pp, c, cp, *v in micro_of], 0.0)
    # _total_bytes' sum on the rows read (``sharded / dp`` shared with the floor); the others keep their floor
    peak, micro_at = floor.copy(), np.array(micro_at)[at]
    if not live.all():
        live = np.flatnonzero(live)
        fixed, sharded, micro_at, rows = fixed[live], sharded[live], micro_at[live], rows[live]
    peak[live] = (fixed + micro[rows][:, None] * per_micro[micro_at] + sharded).max(axis=1)
    return tuple(FIXED_OVERHEAD_BYTES + (1 + FRAGMENTATION) * x for x in (peak, floor))


def test_padded_fills_the_short_rows_by_hand():
    """The padding the reference loop and the arrays share (plan_tables.padded): rows as wide as the widest
    (or ``width``), the missing pieces ``pad``; rows of one width are stacked as they are."""
    tab = plan_tables.padded([np.array([1.0, 2.0]), np.array([3.0])], -np.inf)
    assert tab.tolist() == [[1.0, 2.0], [3.0, -np.inf]]
    assert plan_tables.padded([np.array([1.0]), np.array([2.0])], 0.0, 3).tolist() == [[1.0, 0.0, 0.0],
                                                                                     [2.0, 0.0, 0.0]]
    assert plan_tables.padded([np.array([1.0, 2.0])], 0.0).tolist() == [[1.0, 2.0]]


def _direct_candidates(cps, micros, global_batch, max_gpus, pp, tp_pp, units, interleaved):
    """kept_candidates' answer built afresh, as fitting_plans built it per search before moe17."""
    divisors = {b: _divisors(global_batch // b) if global_batch % b == 0 else [] for b in micros}
    table = _pair_table(cps, divisors, global_batch)
    cp_at = np.array([cps.index(c) for c in table["cp"].tolist()], dtype=np.int64)
    unit = None if units is None else np.array(units)[cp_at]
    return _candidates(1 if tp_pp is None else tp_pp // pp, pp, 1, table=table, units=unit, max_gpus=max_gpus,
                       v=2 if interleaved else 1)


def _searched(reference: bool, **kw):
    """plan() from scratch with the arrays (``reference`` False) or the loop and per-search candidates."""
    return searched_with(reference, [(plan_memory, "_table_totals", _reference_table_totals),
                                     (plan_memory, "kept_candidates", _direct_candidates)],
                         [planner._search, plan_memory.kept_search_memory], **kw)


def _same(**kw):
    same_plans(_searched, **kw)


MOE = ("mixtral-8x7b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v2", "deepseek-v3", "gpt-oss-120b",
       "llama-4-scout", "granite-3.0-1b-a400m", "granite-3.0-3b-a800m", "olmoe-1b-7b")


@pytest.mark.parametrize("model", MOE)
def test_chapter_17_moves_give_the_loops_plans(model):
    """Every mixture of experts chapter 17's widget offers, at its default setting (128K, 16M tokens per
    batch, H100 SXM, at most 16,384 GPUs, the ring): the same frame through the arrays and the loop."""
    _same(model=model, seq=131072, global_batch=128, gpus=("H100 SXM",), max_gpus=16384)


@settings(max_examples=20)
@given(model=st.sampled_from(MOE + ("llama-3-8b", "llama-3.1-405b")),
       seq=st.sampled_from((4096, 16384, 32768, 65536)),
       batch_tokens=st.sampled_from((2**22, 2**24)),
       gpus=st.sampled_from((("H100 SXM",), ("A100 80GB", "B200"), ("H100 SXM", "L40S"))),
       max_gpus=st.sampled_from((512, 4096, 16384, None)),
       cp_comm=st.sampled_from(("p2p", "all_gather")),
       expert_tp=st.booleans())
def test_a_grid_of_searches_gives_the_loops_plans(model, seq, batch_tokens, gpus, max_gpus, cp_comm,
                                                  expert_tp):
    """A grid of mixtures of experts (and two dense models) over context lengths, global batches, GPU types,
    GPU limits, K/V exchanges and experts' tensor parallelism: the same frame (or the same refusal)."""
    from llmsizing.catalog import get_model

    kw = dict(expert_tp=expert_tp) if get_model(model).is_moe else {}
    _same(model=model, seq=seq, global_batch=max(batch_tokens // seq, 1), gpus=gpus,
          max_gpus=max_gpus, cp_comm=cp_comm, **kw)


def test_searches_in_a_row_share_candidates_and_give_the_loops_plans():
    """The candidate columns kept between searches (a widget moving its model: the same seq, batch and GPU
    limit) give each later search the frame it gives alone, and are read-only."""
    plan_tables.kept_candidates.cache_clear()
    kw = dict(seq=32768, global_batch=512, gpus=("H100 SXM",), max_gpus=16384)
    for model in ("mixtral-8x7b", "qwen3-30b-a3b", "olmoe-1b-7b", "llama-3-70b"):
        _same(model=model, **kw)
    assert plan_tables.kept_candidates.cache_info().hits > 0
    cand = next(c for c in (plan_tables.kept_candidates((1, 2), (1, 2), 512, 4096, 2, 16, None, False),)
                if c is not None)
    with pytest.raises(ValueError):
        cand["dp"][0] = 3


@settings(max_examples=60)
@given(rows=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4), st.integers(0, 3)), max_size=40),
       wide=st.booleans())
def test_first_seen_numbers_rows_as_a_dict_does(rows, wide):
    """first_seen: the distinct rows in the order they first appear and each row's number, as
    ``dict.setdefault(row, len(dict))`` numbers them (the loop's way), with one packed key or (columns whose
    spans multiply past 2**62) np.unique over rows."""
    cols = np.array(rows, dtype=np.int64).reshape(-1, 3)
    if wide:
        cols = cols * np.array([2**40, 2**30, 1], dtype=np.int64)
    seen: dict = {}
    want = [seen.setdefault(tuple(r), len(seen)) for r in cols.tolist()]
    firsts, number = plan_tables.first_seen(cols)
    assert number.tolist() == want
    assert [tuple(cols[i].tolist()) for i in firsts.tolist()] == list(seen)
