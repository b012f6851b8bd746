"""One comparison for the tests that check a fast planner path against the old one it replaced
(test_plan_tables, test_moe_fast_checks): ``searched(old, **kw)`` runs :func:`llmsizing.planner.plan` on one
side (:func:`searched_with` patches the old functions in); both sides give the same frame exactly, or refuse
with the same message."""

import re

import pandas as pd
import pytest


def same_plans(searched, **kw) -> None:
    try:
        new = searched(False, **kw)
    except ValueError as exc:                          # (nothing fits, or too many plans: the same refusal)
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            searched(True, **kw)
        return
    old = searched(True, **kw)
    pd.testing.assert_frame_equal(new, old, check_exact=True)
    assert new.attrs.keys() == old.attrs.keys()


def searched_with(old: bool, patches, caches, **kw):
    """:func:`llmsizing.planner.plan` of 8e11 tokens from scratch: with ``old``, each ``(module, name, value)``
    of ``patches`` set for the call; the ``caches`` (lru caches) cleared before and after it."""
    from llmsizing import planner

    with pytest.MonkeyPatch.context() as m:
        if old:
            for module, name, value in patches:
                m.setattr(module, name, value)
        for c in caches:
            c.cache_clear()
        try:
            return planner.plan(tokens=8e11, **kw)
        finally:
            for c in caches:
                c.cache_clear()
