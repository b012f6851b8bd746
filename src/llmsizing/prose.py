"""Numbers in the prose: one mechanism for the built site and for JupyterLab.

The book's markdown quotes computed numbers with the MyST role ``{eval}`name```. It shows the value of the
notebook variable ``name``: jupyter-book evaluates it while it executes the notebook
(``nb_execution_mode: inline``), and JupyterLab with ``jupyterlab-myst`` evaluates it in the kernel when the
markdown cell is run. Either way the prose shows what the code computed, and a name the code never binds fails
the build (``-W``) instead of showing a stale number.

A notebook's code cells make those variables with a ``glue`` function bound to the notebook's namespace::

    from llmsizing.prose import inline_glue
    glue = inline_glue(globals())

    glue("ch11_cost70", f"${cost / 1e6:.1f} million", display=False)    # markdown: {eval}`ch11_cost70`
    for n in (512, 1024):
        glue(f"ch11_sweep_cost_{n}", usd(costs[n]), display=False)

Each glued value is a :class:`ProseText`: a ``str`` that displays as its own text, without the quotes that
``repr`` would add, so the role renders ``$1.2 million`` and not ``'$1.2 million'``.

A chapter whose sentences take many figures builds them in the library (issue 38: notebooks stay short): a
function checks the prose's statements (:func:`prose_check`) and returns a :class:`ChapterText`, whose texts
(``values``) the cell glues, beside what it prints (``report``) and what later cells read (``data``)::

    ex = worked_example(df, RUN)                         # llmsizing.plan_prose, chapter 12
    for name, text in ex.values.items():
        glue(f"ch12_{name}", text)
"""

from __future__ import annotations

import keyword
import math
import numbers
import re
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field

from ._validate import _is_bool

__all__ = ["ProseText", "ChapterText", "inline_glue", "PROSE_NAME", "three_figures", "claimed_text", "usd",
           "and_list", "number_word", "ProseOutOfDate", "prose_check"]

#: What a prose reference may be: myst-nb's default ``nb_eval_name_regex`` (a plain ASCII identifier). Names
#: outside it are refused when glued, rather than failing later in the build.
PROSE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ProseOutOfDate(AssertionError):
    """A statement of a chapter's prose that the numbers (data, fit or model) no longer bear out: the prose or
    the data must change. The library's chapter modules raise it, so the notebook, the tests and the build
    fail instead of printing a sentence the numbers contradict."""


def prose_check(holds, what: str, chapter: str = "the chapter") -> None:
    """Raise :class:`ProseOutOfDate` saying what ``chapter`` says (``what``), unless ``holds`` (a check that,
    unlike ``assert``, runs under ``python -O`` too)."""
    if not holds:
        raise ProseOutOfDate(f"{chapter} says {what}, which the numbers no longer bear out")


class ProseText(str):
    """A ``str`` whose display (``repr``, IPython's ``text/plain``) is the text itself, with no quotes."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str.__str__(self)

    def _repr_pretty_(self, p, cycle) -> None:   # IPython's pretty printer (the kernel's text/plain)
        p.text(str.__str__(self))


def inline_glue(namespace: MutableMapping[str, object]) -> Callable[..., None]:
    """Return ``glue(name, value, display=False)``, which binds ``namespace[name] = ProseText(value)``.

    ``namespace`` is the notebook's ``globals()``. ``name`` must be an ASCII identifier (not a Python keyword)
    so that ``{eval}`name``` can show it; ``value`` must be a ``str``: the prose shows exactly the text the
    code formatted. Gluing a name again replaces the earlier glued value (re-running a cell in JupyterLab does
    that), but a name the notebook already uses for anything else is never overwritten. ``display=True`` also
    shows the text as the cell's output. It returns None, so a cell ending in ``glue(...)`` prints nothing.

    Raises ``ValueError`` for a bad or already-taken name and ``TypeError`` for a value that is not a string.
    """
    if not isinstance(namespace, MutableMapping):
        raise TypeError("namespace must be a mutable mapping such as globals(), got "
                        f"{type(namespace).__name__}")

    def glue(name: str, value: str, display: bool = False) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__} {name!r}")
        if not PROSE_NAME.fullmatch(name) or keyword.iskeyword(name):
            raise ValueError(
                f"name {name!r} cannot be shown in prose: it must be an ASCII identifier "
                "(letters, digits and '_', not starting with a digit, not a Python keyword)")
        if not isinstance(value, str):
            raise TypeError(
                f"value for {name!r} must be a str formatted for the prose (e.g. f\"{{x:,.1f}} GiB\"), "
                f"got {type(value).__name__} {value!r}")
        if not isinstance(display, bool):
            raise TypeError(f"display must be True or False, got {type(display).__name__} {display!r}")
        current = namespace.get(name, None)
        if name in namespace and not isinstance(current, ProseText):
            raise ValueError(
                f"name {name!r} is already a {type(current).__name__} in this notebook: gluing it would "
                "overwrite that variable; choose another name")
        text = ProseText(value)
        namespace[name] = text
        if display:
            from IPython.display import display as show

            show(text)

    return glue


def usd(x: float) -> str:
    """Dollars for the prose: ``$682k`` below a million, ``$1.14M`` from it (chapter 12).

    Raises ``TypeError`` for a non-number (or a bool) and ``ValueError`` for a value that is negative or not
    finite.
    """
    if _is_bool(x) or not isinstance(x, (int, float)) and not hasattr(x, "__float__"):
        raise TypeError(f"x must be a number of dollars, got {type(x).__name__} {x!r}")
    x = float(x)
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"x must be a finite number of dollars >= 0, got {x!r}")
    return f"${x / 1e6:.2f}M" if x >= 1e6 else f"${x / 1e3:,.0f}k"


@dataclass(frozen=True)
class ChapterText:
    """What a section of a chapter's prose is built from, made in the library for its cell (issue 38):
    ``values``, name -> formatted text (the cell glues each under its chapter's prefix, ``{eval}`` names);
    ``report``, what the cell prints; and ``data``, the rows, tables and results later cells read. The
    function that builds it checks the prose's statements about the numbers as it goes (:func:`prose_check`),
    so a ``ChapterText`` exists only for prose the numbers bear out. One type for every chapter's sections.
    """

    values: dict[str, str] = field(default_factory=dict)
    report: str = ""
    data: dict[str, object] = field(default_factory=dict)


def three_figures(x: float) -> str:
    """``x`` to three significant figures for the prose, one rule for a chapter (chapter 14's audit).

    Rounded digits keep their trailing zeros, so the printed digits say how precise the value is: 1.8951
    prints ``1.90`` and 11.97 ``12.0``. A value exact in three figures or fewer prints as it is (16 bytes,
    0.5, 80 GB), and from 100 on a value prints as a whole number with thousands separated (1,194).

    "Exact" is exact in binary floating point: a computed value off by float noise (``0.1 + 0.2`` is
    0.30000000000000004) is not, and prints its rounded digits (``0.300``, where ``0.3`` prints ``0.3``), so
    one column can mix ``7`` and ``7.00``. Round such a value first (``round(x, 9)``) if it should count as
    exact.

    Raises ``TypeError`` for a non-number (or a bool, Python's or NumPy's) and ``ValueError`` for a value that
    is not finite, or nonzero and below 1e-4 in magnitude once rounded to three figures (Python would print
    it in exponent form, ``1.23e-05``: give it in a smaller unit instead).
    """
    if _is_bool(x) or not isinstance(x, (int, float)) and not hasattr(x, "__float__"):
        raise TypeError(f"x must be a real number, got {type(x).__name__} {x!r}")
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"x must be finite, got {x!r}")
    if x == 0:
        return "0"                             # -0.0 too
    if abs(x) >= 99.95:                        # 99.96 would round to 100 at three figures: a whole number
        return f"{x:,.0f}"
    short = f"{x:.3g}"
    if "e" in short:                           # below 1e-4 once rounded: exponent form
        raise ValueError(f"x must be 0 or at least 1e-4 in magnitude at three figures, got {x!r}: "
                         "give it in a smaller unit")
    return short if float(short) == x else f"{x:#.3g}"


#: The styles :func:`claimed_text` writes: "" (number, unit), "%" (the unit glued on), "pct" (a gain).
CLAIM_STYLES = ("", "%", "pct")


def claimed_text(low: float, high: float | None = None, unit: str = "", style: str = "",
                 sep: str = " to ") -> str:
    """A seed's figure for the prose as ``data/seed_claims.csv`` holds it: ``low``, or the range ``low`` to
    ``high`` (``high`` None or NaN: one figure) in :func:`three_figures`, the two joined by ``sep``, then
    ``unit`` after a space ('69', '20 to 40 GB', '285,936 USD'; chapter 7's table: '80-100 GB per GPU'). Style
    "%" glues the unit to the number ('30 to 40%'); style "pct" writes a factor as the share it adds (1.2 ->
    '20%', no unit). One rule for every quotation of a seed figure (chapters 7 and 14).

    Raises ``ValueError`` naming ``style`` for another style, and :func:`three_figures`' errors for a
    value that is not a finite number."""
    if style not in CLAIM_STYLES:
        raise ValueError(f"style must be '', '%' or 'pct', got {style!r}")
    one = high is None or isinstance(high, numbers.Real) and math.isnan(high)
    if style == "pct":
        return f"{low - 1:.0%}" + ("" if one else f"{sep}{high - 1:.0%}")
    text = three_figures(low) if one else f"{three_figures(low)}{sep}{three_figures(high)}"
    return text + (unit if style == "%" else f" {unit}" if unit else "")


_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
          "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
          "twenty")


def number_word(n: int) -> str:
    """A whole count for the prose: in words up to twenty (``7`` -> ``seven``), in figures above (``1,024``).

    Raises ``TypeError`` for a non-integer (or a bool) and ``ValueError`` for a negative count."""
    if _is_bool(n) or not isinstance(n, numbers.Integral):
        raise TypeError(f"n must be a whole number, got {type(n).__name__} {n!r}")
    n = int(n)
    if n < 0:
        raise ValueError(f"n must be a count, 0 or more, got {n}")
    return _WORDS[n] if n < len(_WORDS) else f"{n:,}"


def and_list(items) -> str:
    """Items joined for the prose: ``a``, ``a and b``, ``a, b and c`` (no serial comma, the book's style).

    Raises ``ValueError`` for no items and ``TypeError`` for an item that is not a ``str``."""
    items = list(items)
    if not items:
        raise ValueError("items must hold at least one name, got none")
    for x in items:
        if not isinstance(x, str):
            raise TypeError(f"each item must be a str, got {type(x).__name__} {x!r}")
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
