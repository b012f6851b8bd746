"""The planner's memory fit weighs its candidates a block at a time (moefast34,
:func:`llmsizing.plan_tables.table_totals`, :data:`~llmsizing.plan_tables.BLOCK_ENTRIES`): every plan must be
the very one the whole-table arithmetic gives. The reference is the same search with one block holding every
candidate (the whole (pieces, candidates) tables at once, as before the blocks); the fast side takes blocks
of 256 candidates, so that each search spans many blocks and a last, partial one. Both run from scratch in
the test, on a grid of models (dense and mixtures of experts) x contexts x GPU types; the expected frames
are the reference's, compared bit for bit (``check_exact``)."""

from __future__ import annotations

import pytest
from _same_plans import same_plans, searched_with

import llmsizing.plan_tables as plan_tables
from llmsizing import plan_memory, planner

#: Models named by hand: two mixtures of experts of different shapes (Qwen3-30B-A3B: 128 experts, top-8;
#: Mixtral 8x7B: 8 experts, top-2) and two dense ones (Llama 3.1 8B; GPT-2, a small one).
MODELS = ("qwen3-30b-a3b", "mixtral-8x7b", "llama-3.1-8b", "gpt2")
SEQS = (8192, 65536)
GPUS = (("H100 SXM",), ("H100 SXM", "B200"))
CACHES = [planner._search, plan_memory.kept_search_memory, plan_tables.kept_candidates]


def _whole(n, width):
    return [slice(0, n)]


def _searched(whole: bool, **kw):
    """plan() from scratch with one block for all (``whole``) or blocks of 256 candidates."""
    if whole:
        return searched_with(True, [(plan_tables, "_blocks", _whole)], CACHES, **kw)
    return searched_with(True, [(plan_tables, "BLOCK_ENTRIES", 256)], CACHES, **kw)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("seq", SEQS)
@pytest.mark.parametrize("gpus", GPUS)
def test_blocks_give_the_whole_tables_plans(model, seq, gpus):
    kw = dict(model=model, seq=seq, gpus=gpus, global_batch=max(2**24 // seq, 1), max_gpus=16384)
    same_plans(_searched, **kw)


def test_the_grid_spans_many_blocks():
    """(So that the comparison above checks blocks at all.)"""
    df = _searched(True, model="qwen3-30b-a3b", seq=8192, gpus=("H100 SXM",), global_batch=2048,
                   max_gpus=16384)
    assert len(df) > 10 * 256


def test_the_blocks_cover_every_candidate_once():
    for n in (0, 1, 255, 256, 257, 40_000):
        for width in (1, 10, 15, 10_000):
            blocks = plan_tables._blocks(n, width)
            assert [i for b in blocks for i in range(n)[b]] == list(range(n)), (n, width)


def test_the_comparison_can_fail():
    """Blocks that skip each block's last candidate (its total left unweighed) are caught."""
    real = plan_tables._blocks

    def short(n, width):
        return [slice(b.start, max(b.start, b.stop - 1)) for b in real(n, width)]

    kw = dict(model="mixtral-8x7b", seq=8192, gpus=("H100 SXM",), global_batch=2048, max_gpus=16384)

    def searched(whole, **kw):
        if whole:
            return _searched(True, **kw)
        return searched_with(True, [(plan_tables, "_blocks", short)], CACHES, **kw)

    with pytest.raises(AssertionError):
        same_plans(searched, **kw)
