"""The package llmsizing.widgets ("The house by part"): the dashboard machinery, then one module per part of the
book. Its modules stay small and import only downwards, and the package still offers every name its modules
define, so that ``from llmsizing.widgets import ...`` (notebooks, tests, benchmarks, tools) works as it did when
the widgets were one module.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

widgets = pytest.importorskip("llmsizing.widgets")

PACKAGE = Path(widgets.__file__).parent
MACHINERY = ("speculate", "pixels", "png", "canvas", "dashboard", "controls")          # lowest first
PARTS = ("one_gpu", "measure", "many_gpus", "measure_split", "time_money", "serve_tune", "long_context", "moe", "rl")  # V: 17, 18; VI: 19
MAX_LINES = 800


def sibling_imports(name: str) -> set[str]:
    """The modules of the package that ``name`` imports (``from .x import ...``), wherever the import stands."""
    tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
    return {node.module.split(".")[0] for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}


def defined(name: str) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments; not its imports)."""
    tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out - {"__all__"}


def test_the_modules_are_the_machinery_and_the_parts():
    assert {p.stem for p in PACKAGE.glob("*.py")} == {"__init__", *MACHINERY, *PARTS}


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_no_module_is_too_long(path):
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{path.name}: {n} lines (at most {MAX_LINES})"


def test_imports_go_only_downwards():
    assert sibling_imports("speculate") == set()
    assert sibling_imports("pixels") == set()
    assert sibling_imports("png") == set()
    assert sibling_imports("canvas") <= {"pixels"}
    assert sibling_imports("dashboard") <= {"pixels", "png", "canvas"}
    assert sibling_imports("controls") <= {"pixels", "png", "canvas", "dashboard"}
    for part in PARTS:
        assert sibling_imports(part) <= set(MACHINERY), f"{part} imports another part"


@pytest.mark.parametrize("module", MACHINERY + PARTS)
def test_the_package_offers_every_name_its_modules_define(module):
    mod = importlib.import_module(f"llmsizing.widgets.{module}")
    for name in defined(module):
        assert getattr(widgets, name, None) is getattr(mod, name), f"llmsizing.widgets.{name} (from {module})"


def test_every_factory_is_in_all_once():
    factories = [n for part in PARTS for n in defined(part) if n.endswith("_widget") and not n.startswith("_")]
    assert sorted(widgets.__all__) == sorted(factories) and len(set(widgets.__all__)) == len(widgets.__all__)


def test_the_wheel_carries_the_package():
    """tools/build_lite.py ships ``pip wheel .`` of this checkout to JupyterLite: pyproject.toml finds packages
    under src/, so the widgets' folder must be one (an ``__init__.py``) to be in the wheel."""
    setuptools = pytest.importorskip("setuptools")
    assert "llmsizing.widgets" in setuptools.find_packages(where=str(PACKAGE.parents[1]))
