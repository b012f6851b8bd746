"""The runs table a calibration fit reads, checked cell by cell (chapter 10, "FLOPs, MFU and training time";
issue 21), split out of :mod:`llmsizing.calibration` (session 24: it had reached the 600-line limit): the
columns each fit reads (:data:`MFU_FIT_COLUMNS`, :data:`LAYOUT_COLUMNS`, :data:`KERNEL_FIT_COLUMNS`: those of
``data/published_runs.csv``, each row with its source and date), and the checks that a table or one run holds
what the fit reads (:func:`_check_runs`, :func:`_check_row`, :func:`_check_cell`), with errors that name the
row and the column and say what it allows. No figure of its own: :mod:`llmsizing.calibration` re-exports these
names; ``tests/test_round3_harden.py`` and ``tests/test_fuzz_round3.py`` feed the fits broken tables.
"""

from __future__ import annotations

import math


#: The columns each fit reads from a runs table (:func:`~llmsizing.time_cost.published_runs`'s columns).
MFU_FIT_COLUMNS = ("model", "gpu", "dtype", "seq", "n_gpus", "implied_mfu", "calibration", "recompute",
                   "kind", "source")
#: ... and the columns of a run's layout, which :func:`run_kernel_efficiency` reads.
LAYOUT_COLUMNS = ("model", "gpu", "dtype", "seq", "n_gpus", "implied_mfu", "tp", "pp", "dp", "cp",
                  "virtual_stages", "zero", "micro_batch", "global_batch", "recompute", "framework")
KERNEL_FIT_COLUMNS = tuple(dict.fromkeys(LAYOUT_COLUMNS + ("calibration",)))

#: The layout columns that may be blank (unpublished) or a whole number >= 1; ``zero`` is 0 to 3.
_POSITIVE_OR_BLANK = ("n_gpus", "tp", "pp", "dp", "cp", "virtual_stages", "micro_batch", "global_batch")


def _blank(value) -> bool:
    import pandas as pd

    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):          # a list or an array in a cell: not blank (and refused below)
        return False


def _check_cell(where: str, column: str, value):
    """One cell of a runs table, checked: raises ``TypeError``/``ValueError`` naming ``where`` (the row) and
    the column, with what the column allows; returns nothing (the table itself is left as it is)."""
    import numbers

    import numpy as np

    from ._validate import MAX_MEANINGFUL
    from .parallel import RECOMPUTE_MODES
    from .catalog import get_gpu, get_model

    def bad(allowed, exc=ValueError):
        raise exc(f"{where}, column {column!r}: must be {allowed}; got {type(value).__name__} {value!r}")

    def whole(minimum, maximum=MAX_MEANINGFUL):
        allowed = f"a whole number from {minimum} to {maximum:,}"
        if isinstance(value, (bool, str)) or not isinstance(value, numbers.Real) or value != value:
            bad(allowed, TypeError if not isinstance(value, numbers.Real) or isinstance(value, bool)
                else ValueError)
        if not math.isfinite(value) or value != int(value) or not minimum <= value <= maximum:
            bad(allowed)

    if column in ("model", "gpu"):
        if not isinstance(value, str):
            bad("a catalogue name (a string)", TypeError)
        try:
            (get_model if column == "model" else get_gpu)(value)
        except (KeyError, ValueError, TypeError) as e:
            raise ValueError(f"{where}, column {column!r}: {e}") from None
    elif column == "dtype":
        if not _blank(value) and value not in ("bf16", "fp16", "fp8"):
            bad("'bf16', 'fp16' or 'fp8' (blank: bf16)")
    elif column == "seq":
        whole(1)
    elif column == "implied_mfu":
        if isinstance(value, (bool, str)) or not isinstance(value, numbers.Real):
            bad("an MFU, a number in (0, 1]", TypeError)
        if not 0 < value <= 1:                      # (NaN fails this too)
            bad("an MFU, a number in (0, 1]")
    elif column == "calibration":
        if not isinstance(value, (bool, np.bool_)):
            bad("True or False (published_runs() turns the CSV's yes/no into them)", TypeError)
    elif column == "recompute":
        if not _blank(value) and value not in RECOMPUTE_MODES:
            bad(f"one of {', '.join(RECOMPUTE_MODES)} (blank: none)")
    elif column == "source":
        if not isinstance(value, str) or not value.split(" (")[0].strip(" ,;:."):
            bad("the citation of a paper or benchmark (a string)", TypeError if not isinstance(value, str)
                else ValueError)
    elif column in ("kind", "framework"):
        if not _blank(value) and not isinstance(value, str):
            bad("a string or blank", TypeError)
    elif column in _POSITIVE_OR_BLANK:
        if not _blank(value):
            whole(1)
    elif column == "zero":
        if not _blank(value):
            whole(0, 3)


def _check_runs(runs, columns):
    """``runs`` (default: :func:`~llmsizing.time_cost.published_runs`) as a copy, after checking that it is
    a non-empty DataFrame with ``columns`` whose cells each hold what the fit reads (:func:`_check_cell`);
    errors name the row (its index and ``run`` name) and the column."""
    import pandas as pd

    from .time_cost import published_runs

    if runs is None:
        return published_runs()
    if not isinstance(runs, pd.DataFrame):
        raise TypeError(f"runs must be a DataFrame like published_runs() (columns {', '.join(columns)}), got "
                        f"{type(runs).__name__}")
    missing = [c for c in columns if c not in runs.columns]
    if missing:
        raise ValueError(f"runs lacks the columns {missing} (a table like published_runs() has them)")
    if runs.empty:
        raise ValueError("runs has no rows: there is nothing to fit")
    if not runs.index.is_unique:
        raise ValueError("runs has a repeated index: give each row its own (runs.reset_index(drop=True))")
    for label, row in runs.iterrows():
        where = _row_name(label, row)
        for c in columns:
            _check_cell(where, c, row[c])
    return runs.copy()


def _row_name(label, row) -> str:
    run = row.get("run") if hasattr(row, "get") else getattr(row, "run", None)
    return f"runs row {label!r}" + (f" ({run!r})" if isinstance(run, str) else "")


def _check_row(row):
    """A single run (a row of :func:`~llmsizing.time_cost.published_runs`: a ``DataFrame.itertuples()`` tuple,
    a ``Series`` or a dict) with the fields :func:`run_kernel_efficiency` reads, as an object with attributes;
    errors name the field."""
    from types import SimpleNamespace

    import pandas as pd

    if isinstance(row, dict):
        fields = row
    elif isinstance(row, pd.Series):
        fields = row.to_dict()
    elif hasattr(row, "_asdict"):                      # itertuples()'s named tuple
        fields = row._asdict()
    else:
        raise TypeError(f"row must be one run of published_runs() (a row of itertuples(), a Series or a "
                        f"dict), got {type(row).__name__}")
    missing = [c for c in LAYOUT_COLUMNS if c not in fields]
    if missing:
        raise ValueError(f"row lacks the fields {missing} (a row of published_runs() has them)")
    run = fields.get("run")
    where = "row" + (f" ({run!r})" if isinstance(run, str) else "")
    for c in LAYOUT_COLUMNS:
        _check_cell(where, c, fields[c])
    return SimpleNamespace(**fields)
