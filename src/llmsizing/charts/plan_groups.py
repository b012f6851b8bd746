"""Part III, chapter 12's planner figure: what it draws from a plans table whatever plan is chosen (each GPU
type's front, the time-vs-cost front and the summary's line per front plan, :func:`_plan_groups`), kept for
the last few tables by their content (:func:`_groups_key`, :func:`_table_key`: issues 35 and 38, a widget's
redraw reuses them), and a plan row's ``cp`` and ``vp`` as text. Moved out of
:mod:`~llmsizing.charts.time_money_plan` unchanged (session 25), which imports and re-exports every name.

No formula lives here: the fronts are :func:`~llmsizing.planner._pareto`'s.
"""

from __future__ import annotations

import functools

from ..units import GiB
from .base import _usd


def _cp_text(r, sep: str = " ") -> str:
    """``" cp=16"`` for a plan row with context parallelism, ``""`` without (or for a table from before the
    ``cp`` column)."""
    cp = int(getattr(r, "cp", 1))
    return f"{sep}cp={cp}" if cp > 1 else ""


def _vp_text(r, sep: str = " ") -> str:
    """``" vp=20"`` for a plan with interleaved chunks per pipeline stage (issue 34), ``""`` without."""
    v = int(r.get("virtual_stages", 1)) if hasattr(r, "get") else int(getattr(r, "virtual_stages", 1))
    return f"{sep}vp={v}" if v > 1 else ""


#: What :func:`_plan_groups` found for the last few plans tables, keyed by their content (:func:`_table_key`:
#: a digest of every value and the index): a widget redraw that moves the chosen plan, or returns to a table
#: it saw before, reuses it; a table changed in place is a new key.
_PLAN_GROUPS_KEPT: dict = {}
_PLAN_GROUPS_KEEP = 8


def _plan_groups(plans) -> dict:
    """What :func:`render_plan` draws from ``plans`` whatever plan is chosen: each GPU type's own front
    (``own``: name, days, cost, fastest first), the time-vs-cost front (``front``: days, cost, fastest first;
    ``front_by_gpu`` per GPU type) and the summary's line per front plan (``front_lines``: row label, text).
    Kept for the last few tables, by content (:func:`_table_key`), and computed for any other."""
    import numpy as np
    import pandas as pd

    from ..planner import _pareto, recompute_label

    plans = _bare(plans)
    # the GPU names as integer codes, in order of first appearance (pd.unique's order; a missing name -1,
    # dropped as groupby drops it): comparing ~10,000 names as strings once per GPU type cost a redraw
    # ~1 ms (fig29); made once, for the key and the groups (draw36: :func:`_gpu_codes`)
    gpu = _gpu_codes(plans["gpu"].array) if "gpu" in plans.columns and plans.columns.is_unique else None
    key = _groups_key(plans, gpu=gpu)
    if key in _PLAN_GROUPS_KEPT:
        return _PLAN_GROUPS_KEPT[key]
    # on the columns' arrays, not on sub-tables: groupby and sort_values on the ~3,000 x 24 table cost a
    # deadline's or budget's first redraw ~8-16 ms (issue 38); the same groups (in order of first appearance,
    # as groupby(sort=False)), rows and quicksort order (as sort_values' nargsort)
    days, cost = plans["days"].to_numpy(), plans["cost_usd"].to_numpy()
    memory, on_front = plans["memory_per_gpu_bytes"].to_numpy(), plans["pareto"].to_numpy(dtype=bool)
    codes, names = gpu if gpu is not None else pd.factorize(plans["gpu"].to_numpy())
    own, by_gpu = [], []
    for k, name in enumerate(names):
        rows = np.flatnonzero(codes == k)
        best = rows[_pareto(days[rows], cost[rows], memory[rows])]
        best = best[days[best].argsort(kind="quicksort")]
        own.append((name, days[best], cost[best]))
    fs = np.flatnonzero(on_front)
    fs = fs[days[fs].argsort(kind="quicksort")]                    # the front, fastest first
    for k in pd.unique(codes[fs]):
        if k >= 0:
            rows = fs[codes[fs] == k]
            by_gpu.append((names[k], days[rows], cost[rows]))
    front = list(_front_rows(plans, np.flatnonzero(on_front)))
    # the layout padded to the longest one, so that the columns after it line up when a plan has cp= or vp=
    # (the summary's table splits its columns at the blanks every line shares: render34)
    layouts = [f"tp={f.tp}{_cp_text(f)} pp={f.pp:<2d}{_vp_text(f)} dp={f.dp:<4d} ZeRO-{f.zero} "
               f"mb={f.micro_batch} x{f.grad_accum:<4d}" for f in front]
    wide = max(map(len, layouts), default=0)
    lines = [(f.Index, f"{i:3d}. {int(f.n_gpus):>6,} x {f.gpu:<9s} {layout:<{wide}s} "
              f"{recompute_label(f):<9s} {f.memory_per_gpu_bytes / GiB:6.1f} GiB  MFU {f.mfu:4.0%}  "
              f"{f.days:8,.1f} days  {_usd(f.cost_usd):>8s}")
             for i, (f, layout) in enumerate(zip(front, layouts), 1)]
    out = {"own": own, "front": (days[fs], cost[fs]), "front_by_gpu": by_gpu, "front_lines": lines}
    if len(_PLAN_GROUPS_KEPT) >= _PLAN_GROUPS_KEEP:
        del _PLAN_GROUPS_KEPT[next(iter(_PLAN_GROUPS_KEPT))]          # the oldest
    _PLAN_GROUPS_KEPT[key] = out
    return out


def _bare(table):
    """``table`` as a frame of the same columns, index and values (shared, not copied: ~0.05 ms) without its
    ``attrs``, or ``table`` itself when it has none. pandas deep-copies a frame's ``attrs`` into every column
    it gives (``df[name]``, ``__finalize__``): plan()'s tables carry a few (``assumes``, ``range_notes``...),
    and a chapter 17 move read ~50 columns, 30-70 us each of copying instead of ~5 us (issue 35). For reading
    columns only: the attrs are read from the table itself."""
    import pandas as pd

    return pd.DataFrame(table) if table.attrs else table


def _front_rows(plans, rows):
    """The rows ``rows`` (positions) of ``plans`` as ``plans.iloc[rows].itertuples()`` gives them (a named
    tuple per row: ``Index``, then the columns; the values as iterating each column gives them), from the
    columns' arrays: ~0.1 ms for the front's ~30 rows instead of ~2-3 ms (issue 35: the sub-table, its
    columns and a new named-tuple class at every redraw)."""
    import numpy as np

    row = _row_type(tuple(plans.columns))
    columns = [plans.index[rows].tolist()]
    for values in _column_arrays(plans):
        # (a Series iterates a NumPy column as .item() of each value, which is what tolist gives, and an
        # extension array, Int64, by iterating it)
        columns.append(values[rows].tolist() if isinstance(values, np.ndarray) else list(values[rows]))
    return map(row._make, zip(*columns))


class _PlanRow:
    """One row of a plans table for reading, as :func:`_plan_row` makes it: each column's value by attribute
    (``r.days``), by ``r["days"]`` and by ``r.get("ep", 1)``, a missing column an ``AttributeError`` (for
    ``getattr``'s default) or the default."""

    __slots__ = ("_values",)

    def __init__(self, values: dict):
        self._values = values

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name):
        return self._values[name]

    def get(self, name, default=None):
        return self._values.get(name, default)


def _plan_row(table, label):
    """The row ``label`` of ``table`` (the chosen plan of :func:`render_plan`) with the values
    ``table.loc[label]`` gives for them, read off the columns' arrays (:func:`_column_arrays`): each the
    value at the row of its column (a NumPy scalar, a string, ``pd.NA``), as the ``object`` Series of a row
    of mixed columns holds it; ~0.1 ms where the Series took ~0.3 ms and each of its ~30 attributes read ~15
    us (draw36). The Series itself where the row's Series would not be ``object`` (no column of strings or
    objects: its values would be cast to one dtype) or the label is not one row's."""
    import numpy as np

    pos = table.index.get_loc(label)
    arrays = _column_arrays(table)
    mixed = any(getattr(a.dtype, "kind", "") == "O" or str(a.dtype) in ("str", "string") for a in arrays)
    if not (isinstance(pos, (int, np.integer)) and mixed and table.columns.is_unique):
        return table.loc[label]
    return _PlanRow(dict(zip(table.columns, (a[pos] for a in arrays))))


def _column_arrays(frame) -> list:
    """Each column's values, by position, as ``frame[name]`` gives them: a NumPy column as its array
    (``to_numpy()``), an extension column (Int64, strings) as its ``.array``. Read off the frame without
    making a Series per column (pandas' ``DataFrame._get_column_array``: ~2 us a column instead of ~15-20;
    fig29: ~0.4 ms for plan()'s 26 columns, read three times a planner move); through ``frame.iloc`` where
    pandas has no such method, or gives a datetime or timedelta column as an extension array."""
    import numpy as np

    get = getattr(frame, "_get_column_array", None)
    out = []
    for i in range(frame.shape[1]):
        values = get(i) if get is not None else None
        if values is None or (not isinstance(values, np.ndarray) and isinstance(values.dtype, np.dtype)):
            col = frame.iloc[:, i]
            values = col.to_numpy() if isinstance(col.dtype, np.dtype) else col.array
        out.append(values)
    return out


@functools.lru_cache(maxsize=16)
def _row_type(columns: tuple):
    """The named tuple ``DataFrame.itertuples()`` makes for a frame with ``columns`` (and its index)."""
    from collections import namedtuple

    return namedtuple("Pandas", ["Index", *columns], rename=True)


#: The columns :func:`_plan_groups` reads in full (of the other columns it reads the front's rows only).
_GROUPS_COLUMNS = ("gpu", "days", "cost_usd", "memory_per_gpu_bytes", "pareto")


def _gpu_codes(values):
    """``pd.factorize`` of a table's ``gpu`` column (its ``.array``): integer codes in order of first
    appearance (a missing name -1) and the names. Factorized as the NumPy array of objects a column of Python
    strings holds (pandas' ``str`` dtype): ~0.5 ms for a chapter 17 search's ~20,000 plans, where
    ``pd.factorize`` of the column's array took ~0.7-1.1 ms (draw36); the same codes and names."""
    import numpy as np
    import pandas as pd

    held = getattr(values, "_ndarray", None)          # (a StringArray's strings, not copied)
    if not (isinstance(held, np.ndarray) and held.dtype == object and held.ndim == 1):
        held = np.asarray(values)
    codes, names = pd.factorize(held)
    return codes, names


def _groups_key(plans, *, gpu=None) -> tuple:
    """What :func:`_plan_groups`' answer depends on, as a key: the table's shape, column names and dtypes,
    and a SHA-1 digest of the columns it reads whole (:data:`_GROUPS_COLUMNS`) and of the front's rows (their
    index labels and every value). Two tables with the same key get the same groups, and a change to any of
    these (in place too) is a new key; a change elsewhere leaves the groups as they were. ~1 ms on a chapter
    17 search's ~25,000 plans, where :func:`_table_key` of the whole table took ~4-6 ms (issue 35: a model
    move of chapter 17's widget is a new table, never found in the kept ones). A table without one of those
    columns is keyed whole. ``gpu``: :func:`_gpu_codes` of the ``gpu`` column, if made already; the column
    is then digested as its codes and names (draw36: ~0.4 ms sooner than its strings, which the codes and
    names give back exactly) where every name is a string without a NUL and none is missing."""
    import hashlib

    import numpy as np

    if not all(c in plans.columns for c in _GROUPS_COLUMNS) or not plans.columns.is_unique:
        return ("whole", _table_key(plans))
    # (a NumPy column as its array, an extension column, Int64 say, as itself)
    arrays = dict(zip(plans.columns, _column_arrays(plans)))

    digest = hashlib.sha1(usedforsecurity=False)
    for name in _GROUPS_COLUMNS:
        values = _codes_bytes(*gpu) if name == "gpu" and gpu is not None else None
        digest.update(name.encode() + b"\x00" + (_values_bytes(arrays[name]) if values is None else values)
                      + b"\x00|")
    front = np.flatnonzero(plans["pareto"].to_numpy(dtype=bool))
    digest.update(b"f" + front.astype(np.int64).tobytes() + b"\x00|")
    digest.update(_values_bytes(plans.index[front]) + b"\x00|")
    for name in plans.columns:
        digest.update(_values_bytes(arrays[name][front]) + b"\x00|")
    # (the dtypes read off the arrays already read, not through ``plans.dtypes``' Series: ~0.1 ms, draw36)
    return ("groups", plans.shape, tuple(plans.columns), tuple(str(arrays[c].dtype) for c in plans.columns),
            digest.digest())


def _codes_bytes(codes, names) -> bytes | None:
    """A factorized column (:func:`_gpu_codes`) as bytes that differ for different columns: the codes' bytes
    and the names joined by NUL, marked apart from :func:`_values_bytes`' kinds; None where a name is missing
    (code -1: NaN and None alike) or is not a string, or holds a NUL."""
    import numpy as np

    codes = np.asarray(codes)
    if (len(codes) and codes.min() < 0) or not all(type(n) is str and "\x00" not in n for n in names):
        return None
    return (b"c" + np.ascontiguousarray(codes, dtype=np.int64).tobytes() + b"\x00"
            + "\x00".join(names).encode("utf-8", "surrogatepass"))


def _table_key(table) -> tuple:
    """A key for a table's content: its shape, column names and dtypes, and a SHA-1 digest of its index and
    values, read block by block from pandas' block manager (each block: where its columns go, then its values,
    :func:`_values_bytes`). ~1.5-2.5 ms for the planner's ~3,000 plans x 24 columns, where pandas'
    ``hash_pandas_object`` takes ~3-6 ms (issue 38: most of ``_plan_groups``' time when a widget redraws a
    table it has kept); column by column through ``table.iloc`` where the blocks are not there to read."""
    import hashlib

    import numpy as np

    # (a cache key, not a signature: SHA-1 hashes the ~1-2 MB of a large table ~2.7x as fast as BLAKE2b did
    # on the book's machine, issue 35)
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(_values_bytes(table.index) + b"\x00|")
    try:
        blocks = [(np.asarray(b.mgr_locs.as_array), b.values) for b in table._mgr.blocks]
    except AttributeError:                                   # another pandas: one column at a time
        blocks = [(np.array([i]), table.iloc[:, i].array) for i in range(table.shape[1])]
    for where, values in blocks:
        digest.update(where.astype(np.int64).tobytes() + b"\x00|")
        if isinstance(values, np.ndarray) and values.ndim == 2 and _number_dtype(values.dtype):
            digest.update(b"n" + np.ascontiguousarray(values).tobytes() + b"\x00|")
        elif getattr(values, "ndim", 1) == 2:
            for row in values:
                digest.update(_values_bytes(row) + b"\x00|")
        else:
            digest.update(_values_bytes(values) + b"\x00|")
    return (table.shape, tuple(table.columns), tuple(map(str, table.dtypes)), digest.digest())


def _number_dtype(dtype) -> bool:
    import numpy as np

    return isinstance(dtype, np.dtype) and dtype.kind in "biufcmM"


def _values_bytes(values) -> bytes:
    """A column's (or an index's) values as bytes that differ for different values: numbers by their bytes,
    nullable integers and booleans by their mask and values, strings joined by NUL (when every value is a
    string without one), anything else by the ``repr`` of its values; each kind marked apart."""
    import numpy as np

    dtype = values.dtype
    if _number_dtype(dtype):
        return b"n" + np.ascontiguousarray(np.asarray(values)).tobytes()
    if getattr(dtype, "kind", "") in "iub" and hasattr(dtype, "numpy_dtype"):       # Int64, boolean
        na = np.asarray(values.isna())
        return b"m" + na.tobytes() + np.asarray(values.fillna(0), dtype=dtype.numpy_dtype).tobytes()
    objects = np.asarray(values, dtype=object)
    try:
        text = "\x00".join(objects)
    except TypeError:
        text = None
    if text is not None and text.count("\x00") == max(len(objects) - 1, 0):
        return b"s" + text.encode("utf-8", "surrogatepass")
    return b"r" + repr(list(objects)).encode("utf-8", "surrogatepass")
