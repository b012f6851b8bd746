"""Numbers in the prose (issue 12, "Workshop usability in JupyterLab -> Prose").

The markdown quotes computed numbers with ``{eval}`name```; code cells bind ``name`` with
``glue = inline_glue(globals())`` (src/llmsizing/prose.py). These tests check:

* the helper: what it binds, how that displays (no quotes), and what it refuses;
* no drift, statically and fast, for every notebook: each ``{eval}`name``` names a value that a code cell
  *above* it binds (jupyter-book's inline execution and JupyterLab both evaluate a markdown cell after the cells
  above it ran, never later ones), no glued name is also assigned as an ordinary variable, and the old
  ``{glue:text}`` mechanism is gone;
* in a real kernel, that the request jupyterlab-myst sends for ``{eval}`name``` (``user_expressions``) returns
  the formatted text itself as ``text/plain``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

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
    ((69,), {}, "69"), ((20, 40, "GB"), {}, "20 to 40 GB"), ((285936, float("nan"), "USD"), {}, "285,936 USD"),
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
#: The chapters' section modules whose section functions return prose.ChapterText (chapters 1, 5-7, 9-13, 16,
#: 19). Chapter 15's serve_chapter also does; chapter 18's moe_*_prose and the appendix keep their own returns.
SECTION_MODULES = ("parameters_prose", "measure_prose", "hardware_prose", "dp_prose", "split_prose",
                   "mfu_prose", "cost_prose", "plan_prose", "plan_prose_lead", "plan_prose_search",
                   "case_study_prose", "finetune_prose", "rl_prose", "serve_chapter", "serve_chapter_check",
                   "moe_run_prose", "moe_case_prose", "long_context_prose", "appendix")


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


def bindings(source: str) -> tuple[list[re.Pattern], set[str], set[str], list[str]]:
    """Of one code cell: (patterns of the glued names, the glued names written out as strings, the names
    assigned otherwise, the glue calls whose name cannot be read)."""
    tree = ast.parse(_python(source))
    glued, literal, assigned, unreadable = [], set(), set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "glue" and node.args:
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


def check_prose(nb) -> list[str]:
    """Problems with the prose's references in one notebook (empty = fine)."""
    problems, glued, assigned = [], [], set()
    glued_literals: set[str] = set()
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            g, lit, a, unreadable = bindings(cell.source)
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
                elif not any(p.fullmatch(name) for p in glued) and name not in assigned:
                    problems.append(f"cell {i}: {{eval}}`{name}` is not bound by any code cell above it")
    for name in sorted(glued_literals & assigned):
        problems.append(f"{name!r} is glued and also assigned as a variable: the prose could show either")
    return problems


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
