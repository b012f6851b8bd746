"""A mixture of experts' model states on arrays (llmsizing.moe_prefetch, issue 35, moestates35) give what the
per-group path gave, bit for bit. The path before moestates35 is kept as the reference: one
``memory._search_pieces`` per (tp, pp, ZeRO stage, accumulation class) group (``prefetch_states(...,
batched=False)``) and each layout's ``A + B / ep`` entry made by ``SearchMemory.states`` one at a time (the
loop below, as plan_tables.table_totals had it). Whole searches go through both: their frames are compared
exactly, and so is every entry their SearchMemory made (``fixed``, ``sharded`` and ``per_micro``), on
chapter 17's ten mixtures of experts at the widget's setting and on a hypothesis grid of settings."""

import functools
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from llmsizing import moe_prefetch, plan_memory, plan_tables, planner

MOE = ("mixtral-8x7b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v2", "deepseek-v3", "gpt-oss-120b",
       "llama-4-scout", "granite-3.0-1b-a400m", "granite-3.0-3b-a800m", "olmoe-1b-7b")


def _reference_stored_states(memory, keys, rc):
    """plan_tables.table_totals' loop before moestates35: each entry kept or made by SearchMemory.states."""
    stored, out = getattr(memory, "_states", {}), []
    for tp, pp, zero, ep, c, v in keys:
        got = stored.get((tp, pp, zero, ep, c) if v == 1 else (tp, pp, zero, ep, c, v))
        out.append(got if got is not None else memory.states(tp, pp, zero, ep, c, rc, v))
    return out


def _searched(reference: bool, strict: bool = False, **kw):
    """plan() from scratch through the arrays (``reference`` False; ``strict``: no group may go through
    ``_search_pieces``) or the per-group path, and the SearchMemory objects it used."""
    memories = []
    kept = plan_memory.kept_search_memory

    def keep(*a, **k):
        memories.append(kept(*a, **k))
        return memories[-1]

    def refused(*a, **k):
        raise AssertionError("a group went through _search_pieces")

    with pytest.MonkeyPatch.context() as m:
        m.setattr(planner, "kept_search_memory", keep)
        if reference:
            m.setattr(plan_memory, "prefetch_states",
                      functools.partial(moe_prefetch.prefetch_states, batched=False))
            m.setattr(plan_tables, "stored_states", _reference_stored_states)
        elif strict:
            m.setattr(moe_prefetch, "_search_pieces", refused)
        planner._search.cache_clear()
        kept.cache_clear()
        try:
            return planner.plan(tokens=8e11, **kw), memories
        finally:
            planner._search.cache_clear()
            kept.cache_clear()


def _entries(memories) -> dict:
    """Every entry the searches' SearchMemory objects hold, by kind and key."""
    out = {}
    for memory in memories:
        for sub in getattr(memory, "_each", {None: memory}).values():
            out.update({("states", k): v for k, v in sub._states.items()})
            out.update({("micro", k, cp): (v,) for k, d in sub._micro.items() for cp, v in d.items()})
    return out


def _same(strict: bool = False, **kw):
    try:
        fast, fast_mem = _searched(False, strict=strict, **kw)
    except ValueError as exc:                          # (nothing fits, or too many plans: the same refusal)
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            _searched(True, **kw)
        return
    slow, slow_mem = _searched(True, **kw)
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)
    a, b = _entries(fast_mem), _entries(slow_mem)
    assert a.keys() == b.keys()
    for key in a:
        for x, y in zip(a[key], b[key], strict=True):
            np.testing.assert_array_equal(x, y, err_msg=str(key), strict=True)


@pytest.mark.parametrize("model", MOE)
def test_chapter_17_models_give_the_per_group_entries(model):
    """Each mixture of experts chapter 17's widget offers, at its default setting (128K, 16M tokens per
    batch, H100 SXM, at most 16,384 GPUs, the ring): the same frame and the same entries, every group on the
    arrays (none through ``_search_pieces``)."""
    _same(strict=True, model=model, seq=131072, global_batch=128, gpus=("H100 SXM",), max_gpus=16384)


@settings(max_examples=20, deadline=None)
@given(model=st.sampled_from(MOE + ("llama-3-8b",)),
       seq=st.sampled_from((4096, 16384, 32768, 65536)),
       batch_tokens=st.sampled_from((2**22, 2**24)),
       gpus=st.sampled_from((("H100 SXM",), ("A100 80GB", "B200"), ("H100 SXM", "L40S"))),
       max_gpus=st.sampled_from((512, 4096, 16384, None)),
       cp_comm=st.sampled_from(("p2p", "all_gather")),
       expert_tp=st.booleans(),
       precision=st.sampled_from(("bf16-mixed", "bf16-mixed", "bf16-amp", "fp8-mixed")))
def test_a_grid_of_searches_gives_the_per_group_entries(model, seq, batch_tokens, gpus, max_gpus, cp_comm,
                                                        expert_tp, precision):
    """A grid of mixtures of experts (and a dense model) over context lengths, global batches, GPU types,
    GPU limits, K/V exchanges, experts' tensor parallelism and recipes (an autocast one: no arrays): the same
    frame and entries (or the same refusal)."""
    from llmsizing.catalog import get_model

    kw = dict(expert_tp=expert_tp) if get_model(model).is_moe else {}
    _same(model=model, seq=seq, global_batch=max(batch_tokens // seq, 1), gpus=gpus, max_gpus=max_gpus,
          cp_comm=cp_comm, precision=precision, **kw)


def test_affine_states_on_rows_are_the_states_one_by_one():
    """stored_states' ``A + B / ep`` rows (ZeRO-0 at every ep beyond the first two) against
    SearchMemory.states one entry at a time, on a fresh memory each."""
    from llmsizing.catalog import get_model

    model = get_model("qwen3-30b-a3b")
    args = (model, {"seq": 4096}, (1,), "p2p", (1, 2, 4, 8, 16, 32, 64, 128), False, True)
    keys = [(tp, 1, 0, ep, c, 1) for tp in (1, 2) for c in (1, 2) for ep in (1, 2, 4, 8, 16, 32)]
    rows = moe_prefetch.stored_states(plan_memory.SearchMemory(*args), keys, "none")
    one = plan_memory.SearchMemory(*args)
    for key, got in zip(keys, rows, strict=True):
        want = one.states(*key[:5], "none")
        for x, y in zip(got, want, strict=True):
            np.testing.assert_array_equal(x, y, strict=True)
