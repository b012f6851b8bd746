"""Candidate columns shared by the units that keep the same rows (llmsizing.plan_kept_candidates, issue 35,
moe4) are the columns the units themselves give, bit for bit: plan_tables.kept_candidates against the columns
built afresh from the units (as fitting_plans built them before moe17, test_plan_tables' reference), on every
key the 10 mixtures of experts of chapter 17's widget ask for in a row (the kept tables shared between them,
as the widget shares them), on random units and searches (hypothesis), and whole plan() frames of the 10
models searched in a row through both."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from llmsizing import plan_kept_candidates, plan_memory, plan_tables, planner
from test_plan_tables import MOE, _direct_candidates

CH17 = dict(seq=131072, global_batch=128, gpus=("H100 SXM",), max_gpus=16384)


def _clear():
    for f in (plan_tables.kept_candidates, plan_tables.kept_surviving, plan_tables.kept_pair_table,
              plan_kept_candidates._dp_values, planner._search, plan_memory.kept_search_memory):
        f.cache_clear()


def _same_columns(got, want):
    if want is None:
        assert got is None
        return
    assert got is not None and got.keys() == want.keys()
    for k, v in want.items():
        if isinstance(v, np.ndarray):
            assert got[k].dtype == v.dtype
            np.testing.assert_array_equal(got[k], v, strict=True)
        else:
            assert got[k] == v


def _asked_keys(models, **kw):
    """Every kept_candidates key the searches of ``models`` in a row ask for (caches shared), with the answer
    each got."""
    asked, real = [], plan_tables.kept_candidates

    def recording(*key):
        got = real(*key)
        asked.append((key, got))
        return got

    _clear()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(plan_memory, "kept_candidates", recording)
        for model in models:
            planner.plan(model, tokens=8e11, **kw)
    _clear()
    return asked


@pytest.mark.parametrize("expert_tp", [False, True])
def test_every_key_of_the_ch17_moves_gives_the_units_columns(expert_tp):
    """The 10 MoE models in the widget's order: each asked key's columns are those of its own units, and
    the shared tables were used (keys of different units, the same rows)."""
    asked = _asked_keys(MOE, expert_tp=expert_tp, **CH17)
    assert len(asked) > 1000
    for key, got in asked:
        _same_columns(got, _direct_candidates(*key))
    distinct = {k for k, _ in asked}
    shared = {plan_kept_candidates.unit_survivors(*k[:3], k[6]) + (k[:6], k[7]) for k in distinct}
    assert len(shared) < len(distinct)           # (units that keep the same rows met: the path is exercised)


def _frames(direct: bool):
    _clear()
    with pytest.MonkeyPatch.context() as m:
        if direct:
            m.setattr(plan_memory, "kept_candidates", _direct_candidates)
        return [planner.plan(model, tokens=8e11, **CH17) for model in MOE]


def test_ch17_moves_in_a_row_give_the_same_plans():
    """Whole frames of the 10 models searched in a row (shared tables) against columns built afresh."""
    for fast, slow in zip(_frames(False), _frames(True)):
        pd.testing.assert_frame_equal(fast, slow, check_exact=True)
    _clear()


@settings(max_examples=200, deadline=None)
@given(cps=st.lists(st.sampled_from((1, 2, 3, 4, 8, 16)), min_size=1, max_size=4).map(tuple),
       micros=st.lists(st.sampled_from((1, 2, 3, 4, 8)), min_size=1, max_size=3, unique=True).map(tuple),
       global_batch=st.sampled_from((1, 12, 64, 96, 128, 360, 1024)),
       max_gpus=st.sampled_from((None, 64, 4096)), pp=st.sampled_from((1, 2, 3, 4, 8)),
       tp=st.sampled_from((1, 2, 4, 8)), unit_pool=st.lists(st.integers(1, 400), min_size=1, max_size=8),
       interleaved=st.booleans(), dense=st.booleans(), data=st.data())
def test_random_units_give_their_own_columns(cps, micros, global_batch, max_gpus, pp, tp, unit_pool,
                                             interleaved, dense, data):
    """Random searches (repeated cps among them) and units, two keys in a row that may share a table: each
    gets the columns of its own units."""
    _clear()
    for _ in range(2):
        units = None if dense else tuple(data.draw(st.sampled_from(unit_pool)) for _ in cps)
        key = (cps, micros, global_batch, max_gpus, pp, None if max_gpus is None else tp * pp, units,
               interleaved)
        _same_columns(plan_tables.kept_candidates(*key), _direct_candidates(*key))
    _clear()


def test_units_not_positive_ints_go_as_they_are():
    """Units that are not positive Python ints (a NumPy int) take no shared table, and give their columns."""
    key = ((1, 2), (1, 2), 64, None, 2, None, (np.int64(2), 4), False)
    assert plan_kept_candidates.unit_survivors(*key[:3], key[6]) is False
    _same_columns(plan_tables.kept_candidates(*key), _direct_candidates(*key))
    assert plan_kept_candidates.unit_survivors((1, 2), (1,), 8, (5, 2)) == ((), (2, 4, 8))
