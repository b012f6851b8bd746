"""Repository hygiene for the book's notebooks.

Checks, for every notebook (each check also has a self-test below that feeds
it a broken notebook, so a check that can no longer fail is caught too):

* every _toc.yml entry exists, and every notebook under book/ is in _toc.yml;
* no widget state (``metadata.widgets``) and no timing metadata (cell
  ``metadata.execution`` / ``ExecuteTime``) is stored;
* the kernelspec is ``python3``;
* stored outputs come from one clean top-to-bottom run (``make outputs``):
  every non-empty code cell has an execution count, counting 1, 2, 3, ...;
  the notebook has stored outputs at all; no stored error output; no memory
  addresses (``at 0x7f...``) in outputs that nbval compares;
* widget cells -- cells that call a factory from ``llmsizing.widgets`` or use
  ipywidgets directly -- carry both ``nbval-ignore-output`` and
  ``remove-output``; no other cell carries ``nbval-ignore-output``;
* each notebook starts with a markdown cell holding a ``# Title``;
* every cell of an exercise's solution (``refresh_outputs.solution_cells``: from ``{solution-start}`` to
  ``{solution-end}``, and ``{solution}`` blocks) is collapsed in JupyterLab (``metadata.jupyter.source_hidden``
  and ``outputs_hidden``), holds nothing but solution, and no other cell is collapsed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import importlib.util

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
TOC = ROOT / "_toc.yml"
#: llmsizing.widgets: a package (its modules, by part of the book), or one module
WIDGETS_PKG = ROOT / "src" / "llmsizing" / "widgets"

IGNORE_TAG = "nbval-ignore-output"
REMOVE_TAG = "remove-output"
MEMORY_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]{6,}")

# tools/ is not a package: load the toc reader that `make outputs` uses, so both read _toc.yml the same way
_spec = importlib.util.spec_from_file_location("refresh_outputs", ROOT / "tools" / "refresh_outputs.py")
refresh_outputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(refresh_outputs)


# --------------------------------------------------------------------------- helpers
def toc_entries() -> list[str]:
    return refresh_outputs.toc_entries(TOC)


def resolve(entry: str) -> Path | None:
    p = ROOT / entry
    if p.suffix in (".ipynb", ".md") and p.exists():
        return p
    for suffix in (".ipynb", ".md"):
        if p.with_suffix(suffix).exists():
            return p.with_suffix(suffix)
    return None


def book_notebooks() -> list[Path]:
    return sorted(p for p in BOOK.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def widget_factories() -> set[str]:
    """Public factory names of llmsizing.widgets: everything put in ``__all__`` (``=``, ``+=``,
    ``.append``/``.extend``) plus every public top-level function named ``*_widget``, in every module of the
    package."""
    names: set[str] = set()
    for path in widget_sources():
        names |= _factories_in(ast.parse(path.read_text(encoding="utf-8")))
    return names


def widget_sources() -> list[Path]:
    """The source files of llmsizing.widgets: the package's modules, or the single ``widgets.py``."""
    if WIDGETS_PKG.is_dir():
        return sorted(WIDGETS_PKG.glob("*.py"))
    single = WIDGETS_PKG.with_suffix(".py")
    return [single] if single.exists() else []


def _factories_in(tree: ast.Module) -> set[str]:
    names: set[str] = set()

    def add(value):
        try:
            v = ast.literal_eval(value)
        except ValueError:
            return
        names.update([v] if isinstance(v, str) else v)

    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            add(node.value)
        elif isinstance(node, ast.AugAssign) and getattr(node.target, "id", None) == "__all__":
            add(node.value)
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and getattr(node.value.func.value, "id", None) == "__all__"
            and node.value.func.attr in ("append", "extend")
            and node.value.args
        ):
            add(node.value.args[0])
        elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and node.name.endswith("_widget"):
            names.add(node.name)
    return names


def _python_source(source: str) -> str:
    # IPython magics / shell escapes are not Python: blank them out
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def creates_widget(source: str, factories: set[str]) -> bool:
    """True if the cell calls a llmsizing.widgets factory or uses ipywidgets directly."""
    try:
        tree = ast.parse(_python_source(source))
    except SyntaxError:
        return "ipywidgets" in source or any(re.search(rf"\b{f}\s*\(", source) for f in factories)
    # names bound in this cell by `from llmsizing.widgets import x [as y]` count as factories too
    factories = set(factories)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "llmsizing.widgets":
            factories.update(a.asname or a.name for a in node.names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in factories or name in ("interact", "interactive", "interact_manual"):
                return True
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "ipywidgets" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ipywidgets":
            return True
    return False


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


# --------------------------------------------------------------------------- checks
# Each check takes a notebook and returns a list of problems (empty = fine).
def check_metadata(nb) -> list[str]:
    problems = []
    if "widgets" in nb.metadata:
        problems.append("notebook stores widget state (metadata.widgets): run `make outputs`")
    name = nb.metadata.get("kernelspec", {}).get("name")
    if name != "python3":
        problems.append(f"kernelspec name is {name!r}, not 'python3': run `make outputs`")
    for i, cell in enumerate(nb.cells):
        for key in ("execution", "ExecuteTime"):
            if key in cell.get("metadata", {}):
                problems.append(f"cell {i} stores timing metadata ({key}): run `make outputs`")
    return problems


def check_outputs(nb) -> list[str]:
    problems = []
    code = [
        (i, c)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and c.source.strip() and "skip-execution" not in tags(c)
    ]
    if not code:
        return problems
    counts = [c.get("execution_count") for _, c in code]
    if any(n is None for n in counts):
        missing = [i for (i, _), n in zip(code, counts) if n is None]
        problems.append(f"code cells {missing} were never executed: run `make outputs`")
    elif counts != list(range(1, len(counts) + 1)):
        problems.append(
            f"execution counts {counts} are not 1..{len(counts)} (not one clean top-to-bottom run): "
            "run `make outputs`"
        )
    if not any(c.get("outputs") for _, c in code):
        problems.append("no stored outputs at all: run `make outputs`")
    for i, cell in code:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"cell {i} stores an error output ({out.get('ename')}: {out.get('evalue')})")
        if IGNORE_TAG in tags(cell):
            continue
        for out in cell.get("outputs", []):
            text = out.get("text", "") if out.get("output_type") == "stream" else out.get("data", {}).get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            if MEMORY_ADDRESS.search(text):
                problems.append(
                    f"cell {i} output contains a memory address ({MEMORY_ADDRESS.search(text).group()}), "
                    "which changes every run and fails nbval: end the line with ';' or print something stable"
                )
    return problems


def check_widget_tags(nb, factories: set[str]) -> list[str]:
    problems = []
    for i, cell in enumerate(nb.cells):
        t = tags(cell)
        if cell.cell_type != "code":
            if IGNORE_TAG in t:
                problems.append(f"cell {i} is {cell.cell_type} but tagged {IGNORE_TAG}")
            continue
        if creates_widget(cell.source, factories):
            missing = [tag for tag in (IGNORE_TAG, REMOVE_TAG) if tag not in t]
            if missing:
                problems.append(f"widget cell {i} lacks tag(s) {missing}")
        elif IGNORE_TAG in t:
            problems.append(
                f"cell {i} is tagged {IGNORE_TAG} but creates no widget: only widget cells may skip "
                "nbval's output comparison (make its output deterministic instead)"
            )
    return problems


def check_title(nb) -> list[str]:
    """First cell is markdown whose first line (after MyST targets ``(label)=`` and comments) is ``# Title``."""
    if nb.cells and nb.cells[0].cell_type == "markdown":
        lines = [ln for ln in nb.cells[0].source.splitlines() if ln.strip()]
        lines = [ln for ln in lines if not re.match(r"^\s*(\(.+\)=|%)", ln)]
        if lines and re.match(r"#\s+\S", lines[0]):
            return []
    return ["the first cell must be markdown starting with a '# Title' heading"]


def check_solutions(nb) -> list[str]:
    """Solution cells are collapsed and hold only solution text; nothing else is collapsed."""
    problems = []
    solutions = set(refresh_outputs.solution_cells(nb))
    opened = None                                   # a {solution-start} must be closed by a {solution-end}
    for i, cell in enumerate(nb.cells):
        src = cell.source if cell.cell_type == "markdown" else ""
        for m in sorted([(m.start(), "start") for m in refresh_outputs.SOLUTION_START.finditer(src)]
                        + [(m.start(), "end") for m in refresh_outputs.SOLUTION_END.finditer(src)]):
            if m[1] == "start" and opened is not None:
                problems.append(f"cell {i} opens a solution while the one opened in cell {opened} is still open")
            opened = i if m[1] == "start" else None
    if opened is not None:
        problems.append(f"cell {opened} opens a solution that no {{solution-end}} closes: every later cell "
                        "would be folded with it")
    for i, cell in enumerate(nb.cells):
        jupyter = cell.get("metadata", {}).get("jupyter", {})
        collapsed = bool(jupyter.get("source_hidden")) and bool(jupyter.get("outputs_hidden"))
        if i in solutions and not collapsed:
            problems.append(f"solution cell {i} is not collapsed in JupyterLab: run `make outputs` "
                            "(or tools/refresh_outputs.py --no-execute)")
        if i not in solutions and (jupyter.get("source_hidden") or jupyter.get("outputs_hidden")):
            problems.append(f"cell {i} is collapsed but is not part of a solution")
        if i not in solutions or cell.cell_type != "markdown":
            continue
        src = cell.source.strip()
        lines = src.splitlines()
        opens = refresh_outputs.SOLUTION_START.match(src) or refresh_outputs.SOLUTION_BLOCK.match(src)
        previous_inside = i - 1 in solutions and not refresh_outputs.SOLUTION_END.search(nb.cells[i - 1].source) \
            and not refresh_outputs.SOLUTION_BLOCK.search(nb.cells[i - 1].source)
        if not opens and not previous_inside:
            problems.append(f"cell {i} holds text before its solution starts: split it so the solution has "
                            "cells of its own")
        block = refresh_outputs.SOLUTION_BLOCK.match(src)
        ends = list(refresh_outputs.SOLUTION_END.finditer(src))
        fence = block.group(1) if block else ends[-1].group(1) if ends else None
        if fence is not None and lines[-1].strip() != fence:
            problems.append(f"cell {i} holds text after its solution ends: split it so the solution has "
                            "cells of its own")
    return problems


# --------------------------------------------------------------------------- tests on the book
def test_toc_entries_exist():
    entries = toc_entries()
    assert entries, "_toc.yml lists nothing"
    missing = [e for e in entries if resolve(e) is None]
    assert not missing, f"_toc.yml entries with no file: {missing}"


def test_every_notebook_is_in_toc():
    listed = {resolve(e) for e in toc_entries()}
    orphans = [p.relative_to(ROOT).as_posix() for p in book_notebooks() if p not in listed]
    assert not orphans, f"notebooks not in _toc.yml (jupyter-book would skip them): {orphans}"


NOTEBOOKS = book_notebooks()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_hygiene(path: Path):
    nb = nbformat.read(path, as_version=4)
    problems = (check_title(nb) + check_metadata(nb) + check_outputs(nb) + check_widget_tags(nb, widget_factories())
                + check_solutions(nb))
    assert not problems, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


# --------------------------------------------------------------------------- the checks can fail
def _nb(*cells, **metadata):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata.update(metadata)
    nb.cells = [nbformat.v4.new_markdown_cell("# Title")] + list(cells)
    return nb


def _code(source, n, outputs=(), tags=(), **metadata):
    cell = nbformat.v4.new_code_cell(source, execution_count=n, outputs=list(outputs))
    if tags:
        cell.metadata["tags"] = list(tags)
    cell.metadata.update(metadata)
    return cell


OUT = nbformat.v4.new_output("stream", text="42\n")


def test_clean_notebook_passes():
    nb = _nb(
        _code("print(42)", 1, [OUT]),
        _code("x = 1", 2),
        _code("from llmsizing.widgets import foo_widget\nfoo_widget()", 3, tags=[IGNORE_TAG, REMOVE_TAG]),
    )
    assert check_title(nb) + check_metadata(nb) + check_outputs(nb) + check_widget_tags(nb, {"foo_widget"}) == []


def test_detects_widget_state_kernel_and_timing():
    nb = _nb(_code("print(42)", 1, [OUT], execution={"iopub.status.busy": "2024"}), widgets={"state": {}})
    nb.metadata["kernelspec"]["name"] = "my-env"
    problems = " ".join(check_metadata(nb))
    assert "metadata.widgets" in problems and "kernelspec" in problems and "timing" in problems


def test_detects_unexecuted_and_out_of_order_and_errors():
    assert check_outputs(_nb(_code("print(42)", None)))
    assert check_outputs(_nb(_code("print(42)", 2, [OUT]), _code("print(1)", 1, [OUT])))
    err = nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="division by zero", traceback=[])
    assert check_outputs(_nb(_code("1/0", 1, [err])))
    assert check_outputs(_nb(_code("x = 1", 1)))  # no outputs at all
    addr = nbformat.v4.new_output("execute_result", data={"text/plain": "<Line2D at 0x7f3a2b1c9d90>"}, execution_count=1)
    assert check_outputs(_nb(_code("ax.plot([1])", 1, [addr])))


def test_detects_widget_tag_problems():
    f = {"foo_widget"}
    assert check_widget_tags(_nb(_code("foo_widget()", 1)), f)
    assert check_widget_tags(_nb(_code("w.foo_widget()", 1, tags=[IGNORE_TAG])), f)
    assert check_widget_tags(_nb(_code("import ipywidgets as W\nW.IntSlider()", 1, tags=[REMOVE_TAG])), f)
    assert check_widget_tags(_nb(_code("print(42)", 1, [OUT], tags=[IGNORE_TAG])), f)
    assert not check_widget_tags(_nb(_code("%matplotlib inline\nfoo_widget(model='x')", 1, tags=[REMOVE_TAG, IGNORE_TAG])), f)
    # a factory unknown to the scan but imported from llmsizing.widgets in the cell still counts
    assert check_widget_tags(_nb(_code("from llmsizing.widgets import bar_widget as b\nb()", 1)), f)


def test_detects_missing_title():
    nb = _nb(_code("print(42)", 1, [OUT]))
    nb.cells[0].source = "Some text"
    assert check_title(nb)
    nb.cells[0].source = "## Subtitle first"
    assert check_title(nb)
    nb.cells[0].source = "(ch1)=\n% a comment\n# Title"
    assert not check_title(nb)


def test_widget_factories_are_found():
    if not widget_sources():
        pytest.skip("src/llmsizing/widgets not written yet")
    assert widget_factories(), "no factory found in llmsizing.widgets (__all__ or *_widget functions)"
    # the scan of the sources finds every factory the package exports (they may live in its modules)
    widgets = pytest.importorskip("llmsizing.widgets")
    assert {n for n in widgets.__all__ if n.endswith("_widget")} <= widget_factories()


def _md(source, collapsed=False):
    cell = nbformat.v4.new_markdown_cell(source)
    if collapsed:
        cell.metadata["jupyter"] = {"source_hidden": True, "outputs_hidden": True}
    return cell


START, END = "```{solution-start} ex1\n:class: dropdown\n```", "```{solution-end}\n```"
EXERCISE = "```{exercise}\n:label: ex1\nWhy?\n```"


def test_solution_checks():
    good = _nb(_md(EXERCISE), _md(START + "\nBecause:", True),
               _code("print(42)", 1, [OUT], jupyter={"source_hidden": True, "outputs_hidden": True}), _md("So.\n\n" + END, True),
               _md("````{solution} ex2\n:class: dropdown\nNo.\n````", True), _md("## Next"))
    assert refresh_outputs.solution_cells(good) == [2, 3, 4, 5]
    assert check_solutions(good) == []
    # normalise collapses exactly those cells
    bare = nbformat.from_dict(good)
    for cell in bare.cells:
        cell.metadata.pop("jupyter", None)
    assert check_solutions(bare)
    refresh_outputs.normalise(bare)
    assert check_solutions(bare) == [] and bare == good
    # an exercise sharing a cell with its solution would be hidden with it; a section after its end too
    assert check_solutions(_nb(_md(EXERCISE + "\n\n" + START + "\nBecause.\n\n" + END, True)))
    assert check_solutions(_nb(_md(START + "\nBecause.\n\n" + END + "\n\n## Next", True)))
    # a collapsed cell that is no solution
    assert check_solutions(_nb(_md("## Section", True)))
    # a solution that is never closed would fold the rest of the chapter
    unclosed = check_solutions(_nb(_md(EXERCISE), _md(START + "\nBecause:", True), _md("## Next", True)))
    assert any("no {solution-end} closes" in p for p in unclosed), unclosed
    # normalise strips what jupyterlab-myst caches in markdown cells
    cached = _nb(_md("{eval}`x`"))
    cached.cells[1].metadata["user_expressions"] = [{"expression": "x", "result": {"status": "ok"}}]
    assert "user_expressions" not in refresh_outputs.normalise(cached).cells[1].metadata


def test_normalise_merges_consecutive_stream_outputs():
    """JupyterLab saves consecutive prints to one stream as one output; normalise stores them the same way, so a
    workshop's save does not rewrite stored outputs."""
    a, b = nbformat.v4.new_output("stream", text="x"), nbformat.v4.new_output("stream", text="\n")
    err = nbformat.v4.new_output("stream", name="stderr", text="warn\n")
    nb = refresh_outputs.normalise(_nb(_code("print('x')", 1, [a, b, err, nbformat.v4.new_output("stream", text="y\n")])))
    assert [(o["name"], o["text"]) for o in nb.cells[1].outputs] == [("stdout", "x\n"), ("stderr", "warn\n"),
                                                                     ("stdout", "y\n")]
