"""The house by part (issue 19): no module of the library or the tools passes 800 lines, and imports run
downwards only (the math never imports the figures or the widgets; figures never import widgets)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 800
PY_FILES = sorted([*(ROOT / "src" / "llmsizing").rglob("*.py"), *(ROOT / "tools").rglob("*.py")])


@pytest.mark.parametrize("path", PY_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_passes_800_lines(path):
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
