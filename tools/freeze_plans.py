"""Freeze plan()'s frames for the planner's settings of tests/test_planner_speed.py (FROZEN), so that a change
meant to make the search faster, not different, can be checked against the frames of the code before it
(issue 35: same rows, same order, step times within 1e-9 relative).

    PYTHONPATH=src .venv/bin/python tools/freeze_plans.py     # writes tests/reference/plans.npz

Run it on the commit whose frames are the reference (planfast35 froze them on main at ccad0f5, before the
search was touched), never to make a failing comparison pass: a frame that moved on purpose (a model change)
is re-frozen in its own commit that says why.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from llmsizing import catalog  # noqa: E402
from llmsizing.planner import plan  # noqa: E402
from test_planner_speed import FROZEN, FROZEN_PRICES, FROZEN_SHARDED, frozen_columns  # noqa: E402

OUT = ROOT / "tests" / "reference" / "plans.npz"
#: the setting frozen with plan(shard_under_pipeline=True) (issue 34), apart so plans.npz is the default's
OUT_SHARDED = OUT.with_name("plans_sharded.npz")


def main() -> None:
    catalog.use_prices(FROZEN_PRICES)   # the prices the test compares at (its frozen_prices fixture)
    try:
        for out, settings in ((OUT, FROZEN), (OUT_SHARDED, FROZEN_SHARDED)):
            arrays = {}
            for name, kw in settings.items():
                df = plan(**kw)
                for col, a in frozen_columns(df, kw).items():
                    arrays[f"{name}|{col}"] = a
                print(f"{name}: {len(df):,} plans")
            np.savez_compressed(out, **arrays)
            print(f"wrote {out.relative_to(ROOT)} ({out.stat().st_size / 1e6:.2f} MB)")
    finally:
        catalog.use_prices(None)


if __name__ == "__main__":
    main()
