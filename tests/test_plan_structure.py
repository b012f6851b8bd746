"""plan_tables.search_structure (plan36): the layouts' candidates and what the memory fit reads of them,
kept between searches (chapter 17's moves of the K/V exchange and of a second GPU type of the same scale-up
domain weigh the candidates of the search before). The oracle is the path without it: each setting planned
from scratch with the structure made anew (plan_tables._structure), compared exactly with the same settings
planned in a walk that keeps it, forward and reversed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from llmsizing import plan_memory, plan_tables, planner

SETTINGS = (
    dict(seq=131072, global_batch=128, gpus=("H100 SXM",)),
    dict(seq=131072, global_batch=128, gpus=("H100 SXM",), cp_comm="all_gather"),
    dict(seq=131072, global_batch=128, gpus=("H100 SXM", "A10")),
    dict(seq=131072, global_batch=64, gpus=("H100 SXM", "A10"), cp_comm="all_gather"),
    dict(seq=32768, global_batch=256, gpus=("B200",), gpu_counts=(512, 1024)),
    dict(seq=32768, global_batch=256, gpus=("B200",), gpu_counts=(512, 1024), cp_comm="all_gather"),
)
MODELS = ("granite-3.0-1b-a400m", "llama-2-7b")


def _clear_all() -> None:
    planner._search.cache_clear()            # (the searches, the priced blocks and the layouts)
    plan_memory.kept_search_memory.cache_clear()
    plan_tables._kept_structure.cache_clear()


def _plan(model, setting):
    return planner.plan(model, tokens=8e11, max_gpus=16384, **setting)


def _made(model, layouts, domain, cps, micros, global_batch, max_gpus, counts, expert_tp, per_recompute,
          candidates=None):
    return plan_tables._structure(model, tuple(layouts), tuple(domain), tuple(cps), tuple(micros),
                                  global_batch, max_gpus, counts, expert_tp, per_recompute,
                                  candidates or plan_tables.kept_candidates)


@pytest.fixture(scope="module")
def fresh():
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan_memory, "search_structure", _made)
        for model in MODELS:
            for i, s in enumerate(SETTINGS):
                _clear_all()
                out[model, i] = _plan(model, s)
    _clear_all()
    return out


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_a_walk_keeping_the_structure_plans_the_same_bits(fresh, model, order):
    at = list(range(len(SETTINGS)))
    if order == "reversed":
        at.reverse()
    _clear_all()
    for i in at:
        planner._search.clear_tables()       # (each setting searched again: the kept parts stay)
        df = _plan(model, SETTINGS[i])
        pd.testing.assert_frame_equal(df, fresh[model, i], check_exact=True)
        assert df.attrs == fresh[model, i].attrs
    assert plan_tables._kept_structure.cache_info().hits > 0         # (the walk read kept structures)
    _clear_all()


def test_structure_arrays_are_read_only_and_kept_by_their_arguments():
    model = planner.resolve_model("llama-2-7b")
    layouts = ((1, 1, 0, 1, 1), (2, 1, 0, 1, 1), (2, 2, 1, 1, 1), (4, 2, 0, 1, 1))
    args = (model, layouts, (8,), (1, 2), (1, 2), 64, 512, None, False, False)
    plan_tables._kept_structure.cache_clear()
    one = plan_tables.search_structure(*args)
    assert plan_tables.search_structure(*args) is one                 # (kept)
    other = plan_tables.search_structure(*args[:5], 128, *args[6:])   # (another global batch: its own)
    assert other is not one and len(other["lay"]) != len(one["lay"])
    for key in ("lay", "pair_of", "coef_id", "on2d", "stage_layers", "even", "keys", "plain", "seg",
                "pair_keys"):
        with pytest.raises(ValueError):
            one[key][...] = 0
    with pytest.raises(ValueError):
        one["cat"]["micro"][0] = 7
    # (what fitting_plans made itself before: the parts' keys and each candidate's segment)
    assert one["keys"].tolist() == [list(k) for k, _, _ in one["parts"]]
    assert np.array_equal(one["seg"], np.concatenate([[0], np.cumsum((np.diff(one["lay"]) != 0)
                                                                     | (np.diff(one["cat"]["block"]) != 0))]))
    plan_tables._kept_structure.cache_clear()
