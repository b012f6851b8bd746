"""fig29's ``charts.plan_groups._column_arrays`` reads each column off the frame with pandas' private
``DataFrame._get_column_array`` and falls back to ``frame.iloc`` where pandas lacks it (the project allows
pandas >= 2.1, pyproject.toml). Both paths must give what iterating the frame gives (``itertuples``, the
reference written the way pandas does it), on the dtypes a plans table holds and on extension columns; the
fallback is exercised by removing the private method (review29b)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import llmsizing.charts.plan_groups as pg  # noqa: E402


def toy() -> pd.DataFrame:
    """One column per kind of storage: NumPy int, float (with a NaN), bool, object strings (with a None),
    and the extension kinds Int64 (with NA), string and category."""
    return pd.DataFrame({
        "n_gpus": np.array([8, 64, 512, 4096], dtype=np.int64),
        "days": [1.5, np.nan, 30.0, 2.25],
        "pareto": [True, False, True, True],
        "gpu": np.array(["H100 SXM", None, "B200", "H200"], dtype=object),
        "vp": pd.array([1, pd.NA, 2, 4], dtype="Int64"),
        "note": pd.array(["a", "b", None, "d"], dtype="string"),
        "zero": pd.Categorical(["0", "1", "3", "1"]),
    }, index=[10, 3, 7, 42])


def same(a, b) -> bool:
    """Equal value by value, a missing value equal to a missing one (NaN, None, NA)."""
    return len(a) == len(b) and all((pd.isna(x) and pd.isna(y)) or x == y for x, y in zip(a, b))


@pytest.fixture(params=["pandas method", "fallback"])
def path(request, monkeypatch):
    if request.param == "fallback":
        monkeypatch.delattr(pd.DataFrame, "_get_column_array", raising=False)
        assert not hasattr(toy(), "_get_column_array")
    else:
        assert hasattr(toy(), "_get_column_array"), "this pandas has no _get_column_array: only the fallback"
    return request.param


def test_each_column_is_what_the_frame_holds(path):
    df = toy()
    arrays = pg._column_arrays(df)
    assert len(arrays) == df.shape[1]
    for name, values in zip(df.columns, arrays):
        col = df[name]
        if isinstance(col.dtype, np.dtype):                 # a NumPy column: its ndarray, same dtype
            assert isinstance(values, np.ndarray) and values.dtype == col.dtype, (path, name)
        else:                                               # an extension column: its extension array
            assert values.dtype == col.dtype and not isinstance(values, np.ndarray), (path, name)
        assert same(list(values), list(col)), (path, name)


def test_front_rows_are_itertuples(path):
    df = toy()
    rows = np.array([3, 0, 2])
    got = list(pg._front_rows(df, rows))
    want = list(df.iloc[rows].itertuples())
    assert [r._fields for r in got] == [r._fields for r in want]
    for g, w in zip(got, want):
        assert same(tuple(g), tuple(w)), (path, g, w)
        assert [type(x) for x in g if not pd.isna(x)] == [type(x) for x in w if not pd.isna(x)], path


def test_both_paths_key_a_plans_table_alike(monkeypatch):
    """The planner's own table: _groups_key and the front's rows are the same by either path."""
    from llmsizing.planner import plan

    df = plan("llama-3-8b", tokens=1e12, gpus=["H100 SXM", "B200"], seq=8192, global_batch=512,
              max_gpus=512)
    front = np.flatnonzero(df["pareto"].to_numpy(dtype=bool))
    assert len(front) > 0
    fast_key, fast_rows = pg._groups_key(df), list(pg._front_rows(df, front))
    monkeypatch.delattr(pd.DataFrame, "_get_column_array", raising=False)
    assert pg._groups_key(df) == fast_key
    slow_rows = list(pg._front_rows(df, front))
    want = list(df.iloc[front].itertuples())
    assert len(slow_rows) == len(fast_rows) == len(want)
    for s, f, w in zip(slow_rows, fast_rows, want):
        assert same(tuple(s), tuple(f)) and same(tuple(s), tuple(w)), (s, w)
