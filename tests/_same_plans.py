"""One comparison for the tests that check a fast planner path against the old one it replaced
(test_plan_tables, test_moe_fast_checks): ``searched(old, **kw)`` runs :func:`llmsizing.planner.plan` on one
side; both sides give the same frame exactly, or refuse with the same message."""

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
