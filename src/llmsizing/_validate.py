"""Input checks shared by the library: bad input raises a clear error naming the parameter (chapter 0)."""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable


def check_int(name: str, value, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` if it is an integer in [minimum, maximum]; raise TypeError/ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    hi = "" if maximum is None else f" and <= {maximum:,}"
    if value < minimum or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer >= {minimum:,}{hi}, got {value:,}")
    return value


def check_number(name: str, value, *, minimum: float = 0.0, allow_equal: bool = True,
                 maximum: float | None = None) -> float:
    """Return ``value`` as a float if it is a finite real number in range; raise otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    low_ok = value >= minimum if allow_equal else value > minimum
    op = ">=" if allow_equal else ">"
    hi = "" if maximum is None else f" and <= {maximum:g}"
    if not low_ok or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be {op} {minimum:g}{hi}, got {value:g}")
    return value


def check_bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return value


def check_choice(name: str, value, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``; otherwise raise, suggesting the closest choice."""
    choices = list(choices)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {choices}; got {type(value).__name__} {value!r}")
    if value in choices:
        return value
    close = difflib.get_close_matches(value.lower(), choices, n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown {name} {value!r}.{hint} Allowed: {', '.join(choices)}")
