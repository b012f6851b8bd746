"""Numbers in the prose (issue 12, "Workshop usability in JupyterLab -> Prose").

The markdown quotes computed numbers with ``{eval}`name```; code cells bind ``name`` with
``glue = inline_glue(globals())`` (src/llmsizing/prose.py). These tests check:

* the helper: what it binds, how that displays (no quotes), and what it refuses;
* no drift, statically and fast, for every notebook: each ``{eval}`name``` names a value that a code cell
  *above* it binds (jupyter-book's inline execution and JupyterLab both evaluate a markdown cell after the cells
  above it ran, never later ones), no glued name is also assigned as an ordinary variable, and the old
  ``{glue:text}`` mechanism is gone; a name glued in a loop over a section function's values
  (``glue(f"chN_{name}", text)``) must be a key that function produces (a static map of its source,
  :func:`section_keys`), not just any name with the chapter's prefix (issue 38, rev46);
* in a real kernel, that the request jupyterlab-myst sends for ``{eval}`name``` (``user_expressions``) returns
  the formatted text itself as ``text/plain``.
"""

from __future__ import annotations

import ast
import functools
import inspect
import math
import re
import textwrap
from pathlib import Path
from types import MappingProxyType

import nbformat
import numpy as np
import pytest

from llmsizing.prose import PROSE_NAME, ProseText, claimed_text, inline_glue, three_figures

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
EVAL_ROLE = re.compile(r"\{eval\}`([^`]*)`")


# --------------------------------------------------------------------------- the helper
def test_glue_binds_plain_text_in_the_namespace():
    ns: dict = {}
    glue = inline_glue(ns)
    assert glue("ch0_x", "1,234 GiB", display=False) is None         # a cell ending in glue(...) prints nothing
    assert ns["ch0_x"] == "1,234 GiB" and isinstance(ns["ch0_x"], ProseText)
    assert repr(ns["ch0_x"]) == "1,234 GiB"                            # no quotes
    for n in (512, 1024):                                              # keys built in loops
        glue(f"ch11_sweep_cost_{n}", f"${n / 100:.2f} million")
    assert ns["ch11_sweep_cost_1024"] == "$10.24 million"


def test_ipython_shows_the_text_without_quotes():
    from IPython.core.formatters import PlainTextFormatter

    text = "it's \"1.2\" GiB"          # quotes inside the text stay; none are added around it
    assert PlainTextFormatter()(ProseText(text)) == text
    assert PlainTextFormatter()(text) != text   # what a plain str would show: its repr


def test_display_true_shows_the_text(capsys):
    glue = inline_glue({})
    glue("shown", "42 GiB", display=True)
    assert capsys.readouterr().out.strip() == "42 GiB"


@pytest.mark.parametrize("name", ["ch3_be_llama-2-7b", "2x", "a.b", "", "x y", "class", "naïve", "ch7+off"])
def test_rejects_names_the_prose_cannot_show(name):
    with pytest.raises(ValueError, match="name") as err:
        inline_glue({})(name, "1")
    assert repr(name) in str(err.value)


def test_rejects_non_text_values_and_names():
    glue = inline_glue({})
    with pytest.raises(TypeError, match="value for 'x' must be a str"):
        glue("x", 3.5)
    with pytest.raises(TypeError, match="name must be a str"):
        glue(3, "1")
    with pytest.raises(TypeError, match="display"):
        glue("x", "1", display="yes")
    with pytest.raises(TypeError, match="namespace"):
        inline_glue(["not", "a", "mapping"])


def test_refuses_to_overwrite_a_variable_it_did_not_glue():
    ns = {"h100": object(), "count": "a plain str is not glued either"}
    glue = inline_glue(ns)
    for name in ("h100", "count"):
        with pytest.raises(ValueError, match=f"'{name}' is already a"):
            glue(name, "80 GB")
    assert not isinstance(ns["count"], ProseText)


def test_regluing_a_glued_name_replaces_it():
    """Re-running a cell in JupyterLab glues the same names again, even through a new glue function."""
    ns: dict = {}
    inline_glue(ns)("x", "1")
    inline_glue(ns)("x", "2")
    assert ns["x"] == "2"


@pytest.mark.parametrize("x, text", [
    (1.8951, "1.90"),        # rounded: the trailing zero is a significant figure (review27 L6: not "1.9")
    (11.9657, "12.0"), (35.0456, "35.0"), (7.5041, "7.50"), (2.5247, "2.52"), (0.2563, "0.256"),
    (16.0, "16"), (0.5, "0.5"), (80, "80"), (7.7, "7.7"),      # exact in fewer figures: as it is
    (99.96, "100"), (283.4, "283"), (1194.3, "1,194"), (-1.8951, "-1.90")])
def test_three_figures_keeps_the_zeros_it_rounded_to(x, text):
    assert three_figures(x) == text


@pytest.mark.parametrize("bad, err", [("1.9", TypeError), (True, TypeError), (None, TypeError),
                                      (np.True_, TypeError), (np.bool_(False), TypeError),   # review28a #12
                                      (float("nan"), ValueError), (float("inf"), ValueError)])
def test_three_figures_refuses_what_is_not_a_finite_number(bad, err):
    with pytest.raises(err, match="x must be"):
        three_figures(bad)


@pytest.mark.parametrize("x, text", [
    (0.0001, "0.0001"), (0.00012345, "0.000123"),   # fixed point down to 1e-4
    (9.996e-5, "0.000100"),                         # rounds up to 1.00e-4: still fixed point, zeros kept
    (0.0, "0"), (-0.0, "0"), (np.float64(7.5041), "7.50"), (np.int64(80), "80")])
def test_three_figures_small_values_zero_and_numpy_numbers(x, text):
    assert three_figures(x) == text


@pytest.mark.parametrize("x", [1.23e-5, -1.23e-5, 9.994e-5])      # 9.994e-5 rounds to 9.99e-5, below 1e-4
def test_three_figures_refuses_values_it_would_print_in_exponent_form(x):
    with pytest.raises(ValueError, match=r"x must be 0 or at least 1e-4 .*smaller unit"):
        three_figures(x)


def test_three_figures_float_noise_is_not_exact():
    """0.1 + 0.2 is 0.30000000000000004 in binary floating point: not exact, so its rounded digits print
    (the docstring says so, and to round such a value first)."""
    assert three_figures(0.1 + 0.2) == "0.300"
    assert three_figures(0.3) == "0.3"
    assert three_figures(round(0.1 + 0.2, 9)) == "0.3"


@pytest.mark.parametrize("args, kw, text", [
    ((69,), {}, "69"), ((20, 40, "GB"), {}, "20 to 40 GB"),
    ((285936, float("nan"), "USD"), {}, "285,936 USD"),
    ((80, 100, "GB per GPU"), {"sep": "-"}, "80-100 GB per GPU"),        # chapter 7's table
    ((35.0, np.nan, "GB per GPU"), {"sep": "-"}, "35 GB per GPU"),
    ((30, 40, "%"), {"style": "%"}, "30 to 40%"), ((1.2, None, "x"), {"style": "pct"}, "20%"),
    ((1.1, 1.25), {"style": "pct"}, "10% to 25%"), ((1.8951, None, "GB"), {}, "1.90 GB")])
def test_claimed_text_one_rule_for_a_seed_figure(args, kw, text):
    """A seed's figure or range as the seed_claims.csv row holds it: three figures, the unit after a space,
    "%" glued, "pct" a factor's gain (1.2 adds 20%, 1.25 25%)."""
    assert claimed_text(*args, **kw) == text


def test_claimed_text_refuses_another_style():
    with pytest.raises(ValueError, match="style must be '', '%' or 'pct', got 'percent'"):
        claimed_text(30, style="percent")


def test_the_name_rule_is_myst_nb_s():
    from myst_nb.core.config import NbParserConfig

    default = NbParserConfig().eval_name_regex
    for name in ("a", "_a1", "ch1_x", "A_B_9", "1a", "a-b", "a.b", "é"):
        assert bool(PROSE_NAME.fullmatch(name)) == bool(re.match(default, name)), name


# --------------------------------------------------------------------------- one container (session 45)
#: The chapters' section modules whose section functions return prose.ChapterText (chapters 0, 1, 5-7, 9-13, 16,
#: 19). Chapter 15's serve_chapter also does; chapter 18's moe_*_prose and the appendix keep their own returns.
SECTION_MODULES = ("parameters_prose", "measure_prose", "hardware_prose", "dp_prose", "split_prose",
                   "mfu_prose", "cost_prose", "plan_prose", "plan_prose_lead", "plan_prose_search",
                   "case_study_prose", "finetune_prose", "rl_prose", "serve_chapter", "serve_chapter_check",
                   "moe_run_prose", "moe_case_prose", "long_context_prose", "long_context_prose_plan", "time_prose",
                   "appendix", "intro_prose")


def test_one_container_for_a_sections_prose():
    """Every section function (a public ``*_prose`` function, or one that chapter 12's or 15's cells call) of
    the section modules returns the one :class:`ChapterText`, not a tuple, a dict or a second class; and
    ``serve_chapter.ChapterText`` is that class."""
    import importlib
    import inspect

    from llmsizing import serve_chapter
    from llmsizing.prose import ChapterText

    assert serve_chapter.ChapterText is ChapterText
    sections = {"worked_example", "kv_room_queue", "expert_parallel", "cost_ranking", "opening",
                "published_check"}
    seen = []
    for name in SECTION_MODULES:
        mod = importlib.import_module(f"llmsizing.{name}")
        for fname, fn in vars(mod).items():
            if inspect.isfunction(fn) and fn.__module__ == mod.__name__ and not fname.startswith("_") \
                    and (fname.endswith("_prose") or fname in sections):
                ann = inspect.signature(fn).return_annotation
                assert eval(ann, vars(mod)) is ChapterText, f"{name}.{fname} returns {ann}"
                seen.append(fname)
    assert len(seen) >= 38 and {"breakeven_prose", "step_sweep_prose", "worked_example", "published_runs_prose",
                                "ranges_prose", "rack_dispatch_prose", "deepseek_memory_prose",
                                "opening_prose", "appendix_prose"} <= set(seen)
    from llmsizing import moe_run_prose
    assert not hasattr(moe_run_prose, "RunsProse")       # chapter 18's second container is gone


# --------------------------------------------------------------------------- no drift, statically
def _python(source: str) -> str:
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def _key_pattern(node: ast.expr) -> re.Pattern | None:
    """A regex for the names a glue call's first argument can produce (f-string fields match any name part)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):   # f"...".replace(".", "_")
        node = node.func.value
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.compile(re.escape(node.value))
    if isinstance(node, ast.JoinedStr):
        parts = [re.escape(v.value) if isinstance(v, ast.Constant) else r"[A-Za-z0-9_]+" for v in node.values]
        return re.compile("".join(parts))
    return None


def bindings(source: str, skip=frozenset()) -> tuple[list[re.Pattern], set[str], set[str], list[str]]:
    """Of one code cell: (patterns of the glued names, the glued names written out as strings, the names
    assigned otherwise, the glue calls whose name cannot be read). ``skip``: the (line, column) of glue calls
    left out (a section's loop, which :func:`section_loops` reads instead)."""
    tree = ast.parse(_python(source))
    glued, literal, assigned, unreadable = [], set(), set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "glue" and node.args:
            if (node.lineno, node.col_offset) in skip:
                continue
            pattern = _key_pattern(node.args[0])
            if pattern is None:
                unreadable.append(ast.unparse(node.args[0]))
            else:
                glued.append(pattern)
            if isinstance(node.args[0], ast.Constant):
                literal.add(node.args[0].value)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            assigned.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            assigned.update((a.asname or a.name).split(".")[0] for a in node.names)
    return glued, literal, assigned, unreadable


#: The modules whose functions a section function's keys may come from (helpers: ``t.update(_texts(...))``).
PROSE_MODULE = re.compile(r"llmsizing\.(\w+_prose\w*|serve_chapter\w*|audit_text|audit_quotes|appendix)")
_FIELD = r"[A-Za-z0-9_]+"


def _strings_in(value, out: set[str], depth: int = 0) -> None:
    """The strings of a module constant (a dict's keys and values, a tuple's items, ...)."""
    if isinstance(value, str):
        out.add(value)
    elif depth < 4 and isinstance(value, (dict, MappingProxyType)):
        for k, v in value.items():
            _strings_in(k, out, depth + 1)
            _strings_in(v, out, depth + 1)
    elif depth < 4 and isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            _strings_in(v, out, depth + 1)


_UNKNOWN = object()       # a loop value the source does not say (a computed one)


def _iter_values(node: ast.expr, g: dict) -> list | None:
    """What a loop's iterable yields where the source says it: a literal (computed items ``_UNKNOWN``), a
    module constant or its ``.items()``, ``.keys()``, ``.values()``, ``range`` of constants, ``zip`` (of which
    an unsaid part ``_UNKNOWN``) or ``enumerate`` of those; else None."""
    def leaf(n):
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, (ast.Tuple, ast.List)):
            return tuple(leaf(e) for e in n.elts)
        return _UNKNOWN
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [leaf(e) for e in node.elts]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args \
            and node.func.attr in ("items", "keys", "values") and isinstance(node.func.value, ast.Name) \
            and isinstance(g.get(node.func.value.id), (dict, MappingProxyType)):
        return list(getattr(g[node.func.value.id], node.func.attr)())
    if isinstance(node, ast.Name) and isinstance(g.get(node.id), (dict, MappingProxyType, tuple, list)):
        return list(g[node.id])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
            and all(isinstance(a, ast.Constant) for a in node.args):
        return list(range(*(a.value for a in node.args)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in ("zip", "enumerate") and node.args and not node.keywords:
        parts = [_iter_values(a, g) for a in node.args]
        if node.func.id == "enumerate":
            return None if parts[0] is None or len(parts) > 1 else list(enumerate(parts[0]))
        n = min((len(v) for v in parts if v is not None), default=None)
        return None if n is None else list(zip(*(v if v is not None else [_UNKNOWN] * n for v in parts)))
    return None


def _bind(target: ast.expr, value, env: dict) -> None:
    """Bind a loop target to one value: each name to the set of its values, ``_UNKNOWN`` if not said."""
    if isinstance(target, ast.Name):
        env.setdefault(target.id, set()).add(value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        parts = value if isinstance(value, tuple) and len(value) == len(target.elts) else \
            [_UNKNOWN] * len(target.elts)
        for t, v in zip(target.elts, parts):
            _bind(t, v, env)


def _loop_env(tree: ast.AST, g: dict):
    """A function giving, for a node of ``tree``, its enclosing loops' variables -> their values (the values
    of a name also assigned otherwise in the function are not known)."""
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    targets = {id(n) for loop in ast.walk(tree) if isinstance(loop, (ast.For, ast.comprehension))
               for n in ast.walk(loop.target)}
    reassigned = {n.id for n in ast.walk(tree)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and id(n) not in targets}

    def loops_binding(loop) -> list[tuple[ast.expr, ast.expr]]:
        if isinstance(loop, ast.For):
            return [(loop.target, loop.iter)]
        return [(c.target, c.iter) for c in loop.generators]

    def env_of(node) -> dict:
        env: dict = {}
        child, p = node, parents.get(node)
        while p is not None:
            inside = isinstance(p, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)) or \
                isinstance(p, ast.For) and child is not p.iter and child is not p.target
            if inside:
                for target, it in loops_binding(p):
                    values = _iter_values(it, g)
                    for v in (values if values is not None else [_UNKNOWN]):
                        _bind(target, v, env)
            child, p = p, parents.get(p)
        return {k: v for k, v in env.items() if k not in reassigned and _UNKNOWN not in v}
    return env_of


def _fstring_keys(node: ast.JoinedStr, env: dict) -> tuple[set[str], set[str]]:
    """An f-string's possible texts: written out when every field is a plain loop variable of ``env`` (at most
    a few thousand), else a pattern (a field of known values their alternatives, any other a name part);
    nothing for an f-string of fields only that are not known."""
    fields = [v for v in node.values if isinstance(v, ast.FormattedValue)]
    known = [isinstance(v.value, ast.Name) and v.value.id in env and v.format_spec is None
             and v.conversion == -1 for v in fields]
    if all(known) and math.prod(len(env[v.value.id]) for v in fields) <= 5000:
        import itertools

        texts = {""}
        for v in node.values:
            options = [v.value] if isinstance(v, ast.Constant) else [str(x) for x in env[v.value.id]]
            texts = {t + o for t, o in itertools.product(texts, options)}
        return texts, set()
    if not any(isinstance(v, ast.Constant) for v in node.values) and not any(known):
        return set(), set()
    parts, i = [], 0
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append(re.escape(v.value))
        else:
            parts.append("(?:" + "|".join(re.escape(str(x)) for x in env[v.value.id]) + ")" if known[i]
                         else _FIELD)
            i += 1
    return set(), {"".join(parts)}


@functools.cache
def section_keys(fn) -> tuple[frozenset[str], tuple[re.Pattern, ...]]:
    """A cheap static map of the keys a section function can put in its ChapterText's ``values`` (or the dict
    it returns): every string constant and keyword name in its source and in the prose-module functions it
    calls, the strings of the module constants it names, and each f-string: written out where its fields are
    loop variables over values the source names (``for key in ("a", "b")``, ``for g, key in
    JOB_GPUS.items()``), else a pattern (``f"job_{x}"``: ``job_`` and any name part). More than its keys,
    never fewer: a name the markdown quotes that none of them matches is a key the function does not
    produce."""
    strings: set[str] = set()
    patterns: set[str] = set()
    todo, seen = [fn], set()
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        g = f.__globals__
        tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
        env_of = _loop_env(tree, g)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.add(node.value)
            elif isinstance(node, ast.JoinedStr):
                exact, pattern = _fstring_keys(node, env_of(node))
                strings |= exact
                patterns |= pattern
            elif isinstance(node, ast.keyword) and node.arg:
                strings.add(node.arg)
            elif isinstance(node, ast.Name) and node.id in g:
                obj = g[node.id]
                if inspect.isfunction(obj) and PROSE_MODULE.fullmatch(obj.__module__ or ""):
                    todo.append(obj)
                elif not callable(obj) and not inspect.ismodule(obj):
                    _strings_in(obj, strings)
    return frozenset(strings), tuple(re.compile(p) for p in sorted(patterns))


def section_loops(source: str, imports: dict, made_by: dict) -> list[tuple[tuple[int, int], str, object]]:
    """The glue calls of one code cell that glue a section's values in a loop, ``for name, text in
    x.values.items(): glue(f"chN_{name}", text)`` (or over ``f(...).items()``), where ``x = f(...)`` and ``f``
    was imported from llmsizing: ((line, column) of the call, the name's prefix, ``f``). ``imports`` (name ->
    (module, attribute)) and ``made_by`` (variable -> the function whose call made it) carry over from the
    cells above and are updated in place, statement by statement."""
    import importlib

    found = []
    for stmt in ast.parse(_python(source)).body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("llmsizing"):
                imports.update({a.asname or a.name: (node.module, a.name) for a in node.names})
            elif isinstance(node, ast.For) and isinstance(node.iter, ast.Call) \
                    and isinstance(node.iter.func, ast.Attribute) and node.iter.func.attr == "items":
                src = node.iter.func.value
                src = src.value if isinstance(src, ast.Attribute) and src.attr == "values" else src
                fname = made_by.get(src.id) if isinstance(src, ast.Name) else \
                    src.func.id if isinstance(src, ast.Call) and isinstance(src.func, ast.Name) else None
                key = node.target.elts[0] if isinstance(node.target, ast.Tuple) else node.target
                if fname not in imports or not isinstance(key, ast.Name):
                    continue
                fn = getattr(importlib.import_module(imports[fname][0]), imports[fname][1])
                for call in ast.walk(node):
                    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.args
                            and call.func.id == "glue" and isinstance(call.args[0], ast.JoinedStr)):
                        continue
                    *head, last = call.args[0].values
                    if isinstance(last, ast.FormattedValue) and isinstance(last.value, ast.Name) \
                            and last.value.id == key.id and all(isinstance(v, ast.Constant) for v in head):
                        found.append(((call.lineno, call.col_offset), "".join(v.value for v in head), fn))
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) \
                and isinstance(stmt.value.func, ast.Name):
            made_by.update({t.id: stmt.value.func.id for t in stmt.targets if isinstance(t, ast.Name)})
    return found


def check_prose(nb) -> list[str]:
    """Problems with the prose's references in one notebook (empty = fine). A name glued in a section's loop
    (:func:`section_loops`) must be one its section function produces (:func:`section_keys`), not merely
    any name with the chapter's prefix."""
    problems, glued, assigned = [], [], set()
    glued_literals: set[str] = set()
    sections: list[tuple[str, object]] = []
    imports: dict = {}
    made_by: dict = {}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            loops = section_loops(cell.source, imports, made_by)
            sections += [(prefix, fn) for _, prefix, fn in loops]
            g, lit, a, unreadable = bindings(cell.source, skip={at for at, _, _ in loops})
            glued += g
            glued_literals |= lit
            assigned |= a
            problems += [f"cell {i}: glue name {u} cannot be checked: use a string or an f-string" for u in unreadable]
            if "myst_nb" in cell.source:
                problems.append(f"cell {i} uses myst_nb's glue: use llmsizing.prose.inline_glue")
        elif cell.cell_type == "markdown":
            if "{glue" in cell.source:
                problems.append(f"cell {i} uses a {{glue}} role: use {{eval}}`name`")
            for name in EVAL_ROLE.findall(cell.source):
                if not PROSE_NAME.fullmatch(name):
                    problems.append(f"cell {i}: {{eval}}`{name}` is not a plain name (jupyter-book shows nothing)")
                elif not any(p.fullmatch(name) for p in glued) and name not in assigned \
                        and not any(_produces(fn, name[len(prefix):]) for prefix, fn in sections
                                    if name.startswith(prefix)):
                    near = [f"{fn.__module__}.{fn.__name__}" for prefix, fn in sections
                            if name.startswith(prefix)]
                    problems.append(f"cell {i}: {{eval}}`{name}` is not bound by any code cell above it"
                                    + (f" (no key of {', '.join(sorted(set(near)))})" if near else ""))
    for name in sorted(glued_literals & assigned):
        problems.append(f"{name!r} is glued and also assigned as a variable: the prose could show either")
    return problems


def _produces(fn, key: str) -> bool:
    strings, patterns = section_keys(fn)
    return key in strings or any(p.fullmatch(key) for p in patterns)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_prose_reference_is_bound_above_it(path):
    problems = check_prose(nbformat.read(path, as_version=4))
    assert not problems, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


def test_the_book_quotes_numbers_from_code():
    refs = sum(len(EVAL_ROLE.findall(c.source)) for p in NOTEBOOKS
               for c in nbformat.read(p, as_version=4).cells if c.cell_type == "markdown")
    assert refs > 1000


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(c[3:]) if c.startswith("md:") else nbformat.v4.new_code_cell(c)
                for c in cells]
    return nb


def test_the_static_check_can_fail():
    head = "from llmsizing.prose import inline_glue\nglue = inline_glue(globals())"
    ok = _nb(head + '\nglue("a_1", "1")\nfor n in (1, 2):\n    glue(f"b_{n}_x", "2")\nc = 3',
             "md:{eval}`a_1`, {eval}`b_2_x` and {eval}`c`")
    assert check_prose(ok) == []
    assert check_prose(_nb("md:{eval}`a_1`", head + '\nglue("a_1", "1")'))                  # bound only below
    assert check_prose(_nb(head + '\nglue("a_1", "1")', "md:{eval}`a_2`"))                   # never bound
    assert check_prose(_nb(head + '\nglue("a_1", "1")', "md:{eval}`a-1`"))                   # not a name
    assert check_prose(_nb(head + '\nglue(f"b_{n}", "1")', "md:{eval}`c_1`"))                # pattern mismatch
    assert check_prose(_nb(head + '\nglue("a_1", "1")\na_1 = 2', "md:{eval}`a_1`"))         # glued and assigned
    assert check_prose(_nb("from myst_nb import glue\nglue('a', '1', display=False)", "md:{glue:text}`a`"))
    assert check_prose(_nb(head + "\nk = 'a'\nglue(k, '1')", "md:x"))                       # unreadable name



def test_a_section_loop_binds_only_its_function_s_keys():
    """A loop that glues a section's values (``for name, text in x.values.items(): glue(f"ch11_{name}",
    ...)``) binds the keys ``x``'s function produces, not every ``ch11_`` name (session 45's check let any
    through): chapter 11's jobs_by_gpu_prose writes ``mi300x_price_month`` and ``job_<key>`` for each of
    JOB_GPUS's keys (h100, b200, a100, h200, mi300x), so ``job_tpu`` and ``mi300x_price_week`` are unbound,
    and so is ``front_cheap_n`` once the cell that calls pareto_front_prose is gone. Directly too, the
    function called in the loop's iterable (chapter 14's ``chapter_values(table).items()``)."""
    head = ("from llmsizing.prose import inline_glue\nglue = inline_glue(globals())\n"
            "from llmsizing.cost_prose import jobs_by_gpu_prose, pareto_front_prose\n")
    front = "front_text = pareto_front_prose(plans)\nfor name, text in front_text.values.items():\n" \
            "    glue(f'ch11_{name}', text, display=False)"
    jobs = "jobs_text = jobs_by_gpu_prose(jobs, t)\nfor name, text in jobs_text.values.items():\n" \
           "    glue(f'ch11_{name}', text, display=False)"
    quoted = "md:{eval}`ch11_mi300x_price_month`, {eval}`ch11_job_h100`, {eval}`ch11_job_mi300x`"
    assert check_prose(_nb(head + front, jobs, quoted + " and {eval}`ch11_front_cheap_n`")) == []
    for name in ("ch11_job_tpu", "ch11_mi300x_price_week", "ch11_front_cheap_n"):
        problems = check_prose(_nb(head + jobs, quoted + f" and {{eval}}`{name}`"))
        assert len(problems) == 1 and f"`{name}` is not bound" in problems[0], problems
        assert "no key of llmsizing.cost_prose.jobs_by_gpu_prose" in problems[0]
    ch14 = ("from llmsizing.prose import inline_glue\nglue = inline_glue(globals())\n"
            "from llmsizing.audit_text import chapter_values\n"
            "for _key, _text in chapter_values(table).items():\n"
            "    glue(f'ch14_{_key}', _text, display=False)")
    assert check_prose(_nb(ch14, "md:{eval}`ch14_said_mem70` and {eval}`ch14_n_holds`")) == []
    assert check_prose(_nb(ch14, "md:{eval}`ch14_said_mem71`"))


#: A module constant a toy section function loops over (as cost_prose's JOB_GPUS).
_TOY_GPUS = MappingProxyType({"H100 SXM": "h100", "MI300X": "mi300x"})


def _toy_section(rows):
    t = {"plain": "1"}
    t["set"] = "2"
    t.update(kw="3")
    for g, key in _TOY_GPUS.items():                     # a module constant's values: written out
        t[f"job_{key}"] = g
    for z, word in zip(range(2), ("zero", "one")):
        t[f"z{z}_{word}"] = word
    for r in rows:                                       # computed: a pattern
        t[f"row_{r}_n"] = r
    return t


def test_the_static_map_of_a_section_s_keys():
    """section_keys reads the keys a function writes: literal ones, keyword ones, f-strings over values the
    source says (a module constant's ``.items()``, ``zip(range(2), ...)``) written out, others a pattern.
    Deleting a key's line deletes the key: ``set`` is no key of a function without ``t["set"] = ...``."""
    strings, patterns = section_keys(_toy_section)
    assert {"plain", "set", "kw", "job_h100", "job_mi300x", "z0_zero", "z1_one"} <= strings
    assert [p.pattern for p in patterns] == ["row_[A-Za-z0-9_]+_n"]
    for key in ("plain", "set", "job_mi300x", "z1_one", "row_7_n"):
        assert _produces(_toy_section, key), key
    for key in ("job_b200", "z2_two", "row_7", "sett"):
        assert not _produces(_toy_section, key), key

    def without_set(rows):
        t = {"plain": "1"}
        t.update(kw="3")
        return t
    assert _produces(_toy_section, "set") and not _produces(without_set, "set")


# --------------------------------------------------------------------------- in a real kernel
def test_kernel_answers_jupyterlab_myst_with_the_text(tmp_path):
    """jupyterlab-myst evaluates {eval}`name` as an execute request with user_expressions; the result's
    text/plain is what it shows. It must be the formatted text, quotes and all as written, nothing added."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        kc.execute_interactive(
            "from llmsizing.prose import inline_glue\nglue = inline_glue(globals())\n"
            "glue('ch0_cost', f\"${1234567 / 1e6:,.2f} million\", display=False)\nplain = 'quoted'",
            timeout=60)
        reply = kc.execute_interactive("", user_expressions={"0": "ch0_cost", "1": "plain", "2": "missing"},
                                       timeout=60)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    results = reply["content"]["user_expressions"]
    assert results["0"]["status"] == "ok"
    assert results["0"]["data"]["text/plain"] == "$1.23 million"
    assert results["1"]["data"]["text/plain"] == "'quoted'"          # a plain str would carry quotes
    assert results["2"]["status"] == "error" and results["2"]["ename"] == "NameError"


# --------------------------------------------------------------------------- no negative intensity (reader24c)
#: A printed arithmetic intensity below zero ("-17 FLOP/byte"): chapter 15 printed one when a step's bytes
#: less the resident weights went negative (the input embedding had become a gather).
NEGATIVE_INTENSITY = re.compile(r"(?<![\w.])[-−]\s?\d[\d,]*(?:\.\d+)?\s*FLOPs?\s*(?:/|per)\s*byte", re.I)


def test_a_negative_intensity_is_caught():
    assert NEGATIVE_INTENSITY.search("vs ridge 295; the KV cache alone: -17 FLOP/byte")
    assert NEGATIVE_INTENSITY.search("yields only −17 FLOP per byte")
    assert not NEGATIVE_INTENSITY.search("intensity 14.3 FLOP/byte vs ridge 295")
    assert not NEGATIVE_INTENSITY.search("ratio 2-17 FLOP/byte")


def test_no_printed_intensity_is_negative():
    bad = []
    for path in NOTEBOOKS:
        for i, c in enumerate(nbformat.read(path, as_version=4).cells):
            texts = [c.source] + [o.get("text", "") + "".join(o.get("data", {}).get("text/plain", ""))
                                  for o in (c.get("outputs", []) if c.cell_type == "code" else ())]
            bad += [(path.name, i, m[0]) for t in texts for m in NEGATIVE_INTENSITY.finditer(t)]
    assert not bad, bad


def test_prose_check_names_the_sentence_and_runs_under_python_O():
    """One check for every chapter module (audit_quotes, serve_chapter, moe_run_prose use it): a statement the
    numbers no longer bear out raises ProseOutOfDate (an AssertionError, so nbval and pytest fail) naming the
    chapter and the statement; a true one passes. It is a raise, not an ``assert``: under ``python -O`` too."""
    import subprocess
    import sys

    from llmsizing.prose import ProseOutOfDate, prose_check
    prose_check(True, "anything")
    with pytest.raises(ProseOutOfDate, match="chapter 15 says two waves, which"):
        prose_check(False, "two waves", "chapter 15")
    assert issubclass(ProseOutOfDate, AssertionError)
    code = ("from llmsizing.prose import prose_check\n"
            "try:\n prose_check(False, 'x')\nexcept AssertionError:\n print('raised')")
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "raised"
