"""The house by part (issue 19; 600 lines since issue 32): no module of the library or the tools passes 600 lines, and imports run
downwards only (the math never imports the figures or the widgets; figures never import widgets)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 600
PY_FILES = sorted([*(ROOT / "src" / "llmsizing").rglob("*.py"), *(ROOT / "tools").rglob("*.py")])


@pytest.mark.parametrize("path", PY_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_passes_600_lines(path):
    n = len(path.read_text().splitlines())
    assert n <= LIMIT, f"{path.relative_to(ROOT)} has {n} lines: split it by meaning (one module per topic or part)"


def _imported_packages(path: Path) -> set[str]:
    """The llmsizing subpackages (``charts``, ``widgets``) a module imports, whatever the import's form."""
    seen = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            parts = [*(node.module or "").split("."), *(a.name for a in node.names)]
        elif isinstance(node, ast.Import):
            parts = [p for a in node.names for p in a.name.split(".")]
        else:
            continue
        seen |= {"charts", "widgets"} & set(parts)
    return seen


MATH = sorted(p for p in (ROOT / "src" / "llmsizing").glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", MATH, ids=lambda p: p.name)
def test_the_math_imports_neither_figures_nor_widgets(path):
    assert not _imported_packages(path), f"{path.name} imports {_imported_packages(path)}: imports run downwards"


def test_figures_never_import_widgets():
    for path in (ROOT / "src" / "llmsizing" / "charts").glob("*.py"):
        assert "widgets" not in _imported_packages(path), f"charts/{path.name} imports the widgets"


def test_the_checks_see_the_packages():
    # a check that reads no file would pass whatever the tree looks like
    names = {p.relative_to(ROOT / "src" / "llmsizing").as_posix() for p in PY_FILES if "src" in p.parts}
    assert {"charts/base.py", "widgets/dashboard.py", "serve.py", "planner.py"} <= names
    assert any(p.parts[-2:] == ("tools", "measure_memory.py") for p in PY_FILES)


def _chapter_row(*paths: Path) -> tuple[str, str, str]:
    """What a chapter's code cells use (all its notebooks: chapter 4 has two, 04 and 04b): the library modules they
    import from (not the figures, widgets or glued prose), the charts modules that define the figures they draw, the
    widgets modules of their widgets."""
    import json
    import re

    from llmsizing import charts, widgets

    src = "".join("".join(c["source"]) for path in paths for c in json.loads(path.read_text())["cells"]
                  if c["cell_type"] == "code")

    def where(package, names, prefix):
        mods = {getattr(package, n).__module__.rsplit(".", 1)[-1] for n in names if hasattr(package, n)}
        return ", ".join(f"`{prefix}.{m}`" for m in sorted(mods)) or "—"
    mods = sorted(set(re.findall(r"from llmsizing\.(\w+) import", src)) - {"charts", "widgets", "prose"})
    return (", ".join(f"`{m}`" for m in mods) or "(top level)",
            where(charts, re.findall(r"\b(render_\w+)\(", src), "charts"),
            where(widgets, re.findall(r"\b(\w+_widget)\(", src), "widgets"))


def test_the_appendix_table_of_where_each_chapter_lives_is_true():
    import json

    appendix = json.loads((ROOT / "book" / "90_formula_summary.ipynb").read_text())
    text = "".join("".join(c["source"]) for c in appendix["cells"] if c["cell_type"] == "markdown")
    rows = {}
    for line in text.split("## Where each chapter lives in the library", 1)[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0][:1].isdigit():
            rows[int(cells[0].split()[0])] = tuple(cells[1:])
    chapters = {}
    for p in sorted((ROOT / "book").glob("[0-8]*.ipynb")):    # 04_... and 04b_... are chapter 4
        chapters.setdefault(int(p.name[:2]), []).append(p)
    assert sorted(rows) == sorted(chapters), "the table lists every chapter once"
    for n, paths in chapters.items():
        assert rows[n] == _chapter_row(*paths), f"the appendix's row for chapter {n} is out of date"
