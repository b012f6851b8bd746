"""plan()'s frame in its final order (Part III, "How many GPUs do you need?"; chapter 17's widget, issue 35):
:func:`taken_columns` takes every column of the search's table at the rows plan() returns, in the order it
returns them. No formula here: the same values as each column's own take (:func:`llmsizing.plan_rank._taken`),
bit for bit, with the same dtypes; ``tests/test_plan_fits.py`` compares them.
"""

from __future__ import annotations

import numpy as np


def taken_columns(df, added: dict, rows: np.ndarray, columns) -> dict:
    """Each column of ``columns`` at the positions ``rows``: ``added``'s (arrays) where it has one, else the
    frame ``df``'s (as :func:`llmsizing.plan_rank._taken`). The int64 and float64 ones are taken together,
    by one gather of the rows of a table of them (float64 read as int64: the same bits) instead of one
    gather per column (issue 35: ~3 of ~17 ms of plan()'s 59,000 rows for two GPU types, the random reads of
    ~20 columns made one); each column is then a view of that table, its values bit for bit, and its dtype
    that of its own take."""
    from pandas.api.extensions import ExtensionDtype

    out, plain = {}, []
    for c in columns:
        col = added[c] if c in added else df[c]
        if isinstance(col, np.ndarray) or not isinstance(col.dtype, ExtensionDtype):
            a = col if isinstance(col, np.ndarray) else col.to_numpy()
            if a.ndim == 1 and a.dtype in (np.int64, np.float64):
                plain.append((c, a))
                continue
            out[c] = a[rows]
        else:
            out[c] = col.array[rows]
    if plain:
        table = np.empty((len(plain[0][1]), len(plain)), dtype=np.int64)
        for j, (_, a) in enumerate(plain):
            table[:, j] = a.view(np.int64)
        table = table.take(rows, axis=0)
        out.update((c, table[:, j].view(a.dtype)) for j, (c, a) in enumerate(plain))
    return {c: out[c] for c in columns}
