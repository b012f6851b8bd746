"""Input checks shared by the library: bad input raises a clear error naming the parameter (chapter 0).

This is the library's one normalisation point. Every public function passes its numbers through
:func:`check_int` / :func:`check_number` and keeps what they RETURN: a Python ``int`` or ``float``, never the
caller's NumPy scalar. That matters because NumPy integers are fixed-width: ``np.int32(4096) * np.int32(4096)
* np.int32(32000)`` wraps around silently, and a sizing tool that returns a negative parameter count is worse
than one that raises. Python integers never overflow, and Python floats that would become ``inf`` are
refused here, with the parameter named, before any arithmetic.
"""

from __future__ import annotations

import difflib
import itertools
import math
import numbers
import sys
from collections.abc import Iterable

import numpy as np

#: The largest number any argument may have unless a function says otherwise: 2**53, the largest integer a
#: float64 holds exactly (9.0e15: far beyond any real layer count, sequence, batch, or byte count per GPU).
#: Keeping every input below it keeps every product the library forms finite (it would take 19 such factors
#: to overflow a float), so no result is ever ``inf``.
MAX_MEANINGFUL = 2**53

#: The smallest non-zero magnitude a number may have: the smallest *normal* float (2.2e-308). Below it are the
#: subnormals (5e-324, 1e-311, ...), whose reciprocals overflow to ``inf``; they are refused like NaN.
SMALLEST_NORMAL = sys.float_info.min

#: The smallest share of a peak the library accepts for an efficiency or a utilisation (MFU, MBU, compute
#: efficiency, the usable share of a GPU's memory, a reservation's utilisation): 0.1%. Below it, a time or a
#: count divided by it stops meaning anything (and, far enough below, stops being finite).
MIN_FRACTION = 1e-3


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def check_int(name: str, value, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as a Python ``int`` if it is an integer in [minimum, maximum]; raise otherwise.

    NumPy integer scalars are accepted and converted; ``bool`` (Python's or NumPy's), floats (even ``2.0``)
    and strings raise ``TypeError``. Without ``maximum`` the bound is :data:`MAX_MEANINGFUL`.
    """
    if type(value) is not int:    # (a plain int skips the ABC checks: the planner makes ~10^5 of these calls)
        if _is_bool(value) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
        value = int(value)
    top = MAX_MEANINGFUL if maximum is None else maximum
    if value < minimum or value > top:
        hi = "" if maximum is None and value < minimum else f" and <= {top:,}"
        raise ValueError(f"{name} must be an integer >= {minimum:,}{hi}, got {value:,}")
    return value


def check_number(name: str, value, *, minimum: float = 0.0, allow_equal: bool = True,
                 maximum: float | None = None) -> float:
    """Return ``value`` as a Python ``float`` if it is a finite real number in range; raise otherwise.

    NumPy scalars (``np.float32``, ``np.int64``, ...) are accepted and converted; ``bool``, strings, NaN and
    infinities are refused. Without ``maximum`` the bound is :data:`MAX_MEANINGFUL` (pass ``minimum=None``
    for no lower bound, e.g. a signed difference to format).
    """
    if type(value) is not float and (_is_bool(value) or not isinstance(value, numbers.Real)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    try:
        value = float(value)
    except OverflowError:                       # a Python int beyond float range
        raise ValueError(f"{name} is too large to be meaningful: {len(str(abs(value)))} digits") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if value and abs(value) < SMALLEST_NORMAL:
        raise ValueError(f"{name}={value:g} is too close to zero to compute with: a subnormal float, below "
                         f"{SMALLEST_NORMAL:g} (its reciprocal overflows)")
    top = MAX_MEANINGFUL if maximum is None else maximum
    if minimum is None:
        if abs(value) > top:
            raise ValueError(f"{name} must be between {-top:g} and {top:g}, got {value:g}")
        return value
    low_ok = value >= minimum if allow_equal else value > minimum
    op = ">=" if allow_equal else ">"
    if not low_ok or value > top:
        hi = "" if maximum is None and not low_ok else f" and <= {top:g}"
        raise ValueError(f"{name} must be {op} {minimum:g}{hi}, got {value:g}")
    return value


def check_fraction(name: str, value, *, minimum: float = MIN_FRACTION) -> float:
    """Return ``value`` as a Python ``float`` if it is a share of a peak in [``minimum``, 1] (an MFU, an MBU,
    an efficiency, a usable share of memory: :data:`MIN_FRACTION` by default); raise naming ``name``
    otherwise."""
    value = check_number(name, value, allow_equal=False, maximum=1.0)
    if value < minimum:
        raise ValueError(f"{name} must be between {minimum:g} and 1, got {value:g}: a share below "
                         f"{minimum:g} of the peak is not a run the library can size")
    return value


def check_bool(name: str, value) -> bool:
    """Return ``value`` as a Python ``bool`` if it is one (NumPy's ``bool_`` too); raise ``TypeError`` for
    anything else, including ``0``/``1`` and the strings ``"true"``/``"false"``."""
    if value is True or value is False:         # (the common case first: the planner makes ~10^5 calls)
        return value
    if not _is_bool(value):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def check_choice(name: str, value, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``; otherwise raise, suggesting the closest choice."""
    if type(value) is str and type(choices) in (tuple, frozenset, dict) and value in choices:
        return value                             # (the common case first: the planner makes ~10^5 calls)
    choices = list(choices)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {choices}; got {type(value).__name__} {value!r}")
    if value in choices:
        return value
    close = difflib.get_close_matches(value.lower(), choices, n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown {name} {value!r}.{hint} Allowed: {', '.join(choices)}")


#: The most items a list argument may hold: every public function loops over its lists (one figure line, one
#: serving point, one search branch per item), so a longer one would take minutes, not a fraction of a second.
MAX_ITEMS = 1024


def _suggest(name, known: list[str]) -> str | None:
    """The known name closest to ``name``, compared case-, space- and hyphen-insensitively; a known name that
    starts with (or contains) what was typed wins ("H100" -> "H100 SXM")."""
    norm = lambda s: str(s).lower().replace(" ", "").replace("-", "").replace("_", "")  # noqa: E731
    by_norm = {norm(k): k for k in known}
    q = norm(name)
    if not q:
        return None
    for test in (str.startswith, str.__contains__):
        hits = [k for k in by_norm if test(k, q)]
        if hits:
            return by_norm[difflib.get_close_matches(q, hits, n=1, cutoff=0.0)[0]]
    close = difflib.get_close_matches(q, list(by_norm), n=1, cutoff=0.4)
    return by_norm[close[0]] if close else None


def _unknown(kind: str, name, known: list[str]) -> ValueError:
    """The error for an unknown catalogue name (a model, a GPU, a node): the known names, and the closest one
    (:func:`_suggest`). Moved here from :mod:`llmsizing.catalog` (session 25)."""
    close = _suggest(name, known)
    hint = f" Did you mean {close!r}?" if close else ""
    return ValueError(f"unknown {kind} {name!r}.{hint} Known: {', '.join(known)}")


def check_sequence(name: str, value, *, example: str, allow_empty: bool = False,
                   max_items: int = MAX_ITEMS) -> list:
    """Return ``value`` as a list if it is a list-like of items (a list, tuple, set or array; not a string or
    a dict, which would iterate over characters or keys) of at most ``max_items`` items; raise
    ``TypeError``/``ValueError`` naming ``name``. A longer iterable (even an endless one) is refused after
    reading ``max_items + 1`` items. The items themselves are checked by the caller."""
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a list, e.g. {example}; got {type(value).__name__} {value!r}")
    items = list(itertools.islice(value, max_items + 1))
    if len(items) > max_items:
        raise ValueError(f"{name} may hold at most {max_items:,} items, got more (e.g. {example}): each item "
                         "is computed or drawn in turn")
    if not items and not allow_empty:
        raise ValueError(f"{name} must not be empty, e.g. {example}")
    return items


def renamed(new_name: str, new_value, old_name: str, old_value, *, stacklevel: int = 3):
    """A keyword renamed in issue 21: ``old_value`` (given under ``old_name``) is taken as ``new_name`` with a
    ``DeprecationWarning``; giving both is refused. Returns the value to use (``None`` if neither was
    given)."""
    import warnings

    if old_value is None:
        return new_value
    if new_value is not None:
        raise TypeError(f"give {new_name}= only ({old_name}= is its old name), not both")
    warnings.warn(f"{old_name}= is deprecated: it is now called {new_name}= (the same number: the share of "
                  "the dense peak the GPU reaches while it computes; the end-to-end MFU is an output)",
                  DeprecationWarning, stacklevel=stacklevel)
    return old_value
