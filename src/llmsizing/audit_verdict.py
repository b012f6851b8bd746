"""The verdict rule of chapter 14 ("Rules of thumb, checked"): how a seed article's claimed value is judged
against the library's, with the band of tolerance :data:`BAND`, the ways a claim bounds its value
(:data:`BOUNDS`) and the kinds of verdict (:data:`KINDS`).

The rule is stated in full in :mod:`llmsizing.audit`'s docstring; that module applies it to every claim of
``data/seed_claims.csv``: a point claim holds within a factor :data:`BAND` either way, a lower or upper bound
on its side of the band, a direction claim only strictly on its side (the band widens that side alone),
a range when the library lies within it widened by the band; a premise that needs
CPU offload or fails whatever the number is said before the number's own score. No formula of the library
lives here, only the comparison. Moved out of :mod:`llmsizing.audit` (which re-exports every name, so ``from
llmsizing.audit import verdict`` still works) to keep that module under 600 lines.
"""

from __future__ import annotations

from ._validate import check_choice, check_number


#: The tolerance of the verdict rule: a claim within a factor 1.25 of the library (25% either way) holds.
BAND = 1.25

#: How a claimed value is meant: a point, a lower bound, an upper bound (a capacity), a range, or a direction
#: only: "above" / "below" for a claim that names no factor, only a direction ("faster", "reduces",
#: "outperforms", "costs less"), read as a ratio bounded by 1. A direction claim holds only on its side of
#: the claimed value (the band applies above it for "above", below it for "below"); on the other side it is
#: off, however close: "FP8 trains faster" does not hold with FP8 slower.
BOUNDS = ("about", "at least", "at most", "range", "above", "below")

#: How a verdict is counted (:func:`verdict_kind`), from best to worst.
KINDS = ("holds", "needs CPU offload", "off", "wrong in kind")


def _factor(f: float) -> str:
    return f"{f:.1f}x" if f < 9.95 else f"{f:,.0f}x"


def verdict(claimed: float, library: float, *, bound: str = "about", claimed_high: float | None = None,
            reason: str = "", band: float = BAND, offload: str = "") -> str:
    """The verdict on one claim (the rule is in :mod:`llmsizing.audit`): ``"holds"``, ``"off by 4.1x (too
    low)"``, ``"holds as a lower bound (library 9.3x higher)"``, ``"needs CPU offload: <how> (the number:
    ...)"`` or ``"wrong: <reason> (the number alone: ...)"``. A direction claim (``bound="above"`` or
    ``"below"``, :data:`BOUNDS`) holds only when the library lies strictly on its side of ``claimed``: the
    band widens that side, never the other (``verdict(1, 0.9, bound="above")`` is off, ``verdict(1, 1.05,
    bound="above")`` holds).

    ``claimed`` and ``library`` are in the same unit (``library`` > 0); ``claimed_high`` is the top of a
    ``range``; ``band`` > 1 is the tolerance factor (default :data:`BAND`); ``offload`` says how the claim's
    premise holds with CPU offload (a ``reason`` wins over it). Taught in chapter 14."""
    claimed = check_number("claimed", claimed, allow_equal=False)
    library = check_number("library", library, allow_equal=False)
    band = check_number("band", band, minimum=1.0)
    check_choice("bound", bound, BOUNDS)
    if bound == "range":
        if claimed_high is None:
            raise ValueError("claimed_high must be given (a number >= claimed) when bound='range'")
        high = check_number("claimed_high", claimed_high, allow_equal=False)
        if high < claimed:
            raise ValueError(f"claimed_high must be >= claimed ({claimed:g}), got {high:g}")
    elif claimed_high is not None:
        raise ValueError(f"claimed_high is only for bound='range', got bound={bound!r}")
    for name, text in (("reason", reason), ("offload", offload)):
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a string, got {type(text).__name__}")
    if not 1e-300 <= claimed / library <= 1e300:      # (a factor that overflows is no verdict: "off by infx")
        raise ValueError(f"claimed={claimed:g} and library={library:g} are too far apart to compare: their "
                         "ratio overflows (the same unit for both?)")

    if bound == "about":
        r = claimed / library
        alone = "holds" if 1 / band <= r <= band else \
            f"off by {_factor(max(r, 1 / r))} ({'too low' if r < 1 else 'too high'})"
    elif bound == "at least":
        if library >= claimed / band:
            alone = "holds" if library <= claimed * band else \
                f"holds as a lower bound (library {_factor(library / claimed)} higher)"
        else:
            alone = f"off by {_factor(claimed / library)} (too high)"
    elif bound == "at most":
        alone = "holds" if library <= claimed * band else f"off by {_factor(library / claimed)} (too low)"
    elif bound == "above":
        if library > claimed:
            alone = "holds" if library <= claimed * band else \
                f"holds as a lower bound (library {_factor(library / claimed)} higher)"
        else:
            alone = f"off by {_factor(claimed / library)} (too high)"
    elif bound == "below":
        if library < claimed:
            alone = "holds" if library >= claimed / band else \
                f"holds as an upper bound (library {_factor(claimed / library)} lower)"
        else:
            alone = f"off by {_factor(library / claimed)} (too low)"
    else:
        if claimed / band <= library <= high * band:
            alone = "holds"
        elif library > high:
            alone = f"off by {_factor(library / high)} (too low)"
        else:
            alone = f"off by {_factor(claimed / library)} (too high)"
    if reason:
        return f"wrong: {reason} (the number alone: {alone})"
    if offload:
        return f"needs CPU offload: {offload} (the number: {alone})"
    return alone


def verdict_kind(v: str) -> str:
    """Which of :data:`KINDS` a verdict string is."""
    if v.startswith("wrong"):
        return "wrong in kind"
    if v.startswith("needs CPU offload"):
        return "needs CPU offload"
    return "holds" if v.startswith("holds") else "off"


def verdict_number(v: str) -> str:
    """What the number alone scores in a verdict: the bracket of an offload or wrong-in-kind verdict ("off by
    1.5x (too high)"), else the verdict itself ("holds", "off by 2.0x (too low)")."""
    return v.rsplit("(the number", 1)[1].split(": ", 1)[1][:-1] if "(the number" in v else v


def verdict_short(v: str) -> str:
    """A verdict's kind and factor without the layout or reason: "off by 2.0x (too high)", "needs CPU offload
    (the number: off by 1.5x (too high))"."""
    kind = verdict_kind(v)
    return v if kind in ("holds", "off") else f"{kind} (the number: {verdict_number(v)})"
