"""The shape of ``llmsizing.charts`` (issue "The house by part"): a package with a base module and one module per
part of the book, in book order, none over 800 lines; a part over 600 lines keeps some chapters' figures in
chapter modules of its own, and ``base`` keeps its figures-and-axes reuse and its labels in two modules below it
(issue 32); imports run only downwards (a chapter module imports ``base``, a part ``base`` and its chapter
modules, ``base`` only the two modules it is built on, ``figures`` only ``labels``, ``labels`` none, the parts
do not import each other, the package imports the parts);
every top-level name of every module is re-exported by the package as the same object, so ``charts.X`` and
``from llmsizing.charts import X`` keep working for every name the former single module had. Plus the short
numbers that the figures' tick labels and summaries share one suffix ladder for."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import llmsizing.charts as charts
from llmsizing.charts import base

PACKAGE = Path(charts.__file__).parent
PARTS = ("one_gpu", "many_gpus", "time_money", "serve_tune", "long_context", "moe", "rl")   # Parts I-VI (V: 17, 18; VI: 19)
#: The chapter modules of a part (issue 32: modules under 600 lines), which the part imports and re-exports.
CHAPTERS = {"one_gpu": ("one_gpu_activations", "one_gpu_measure"),
            "many_gpus": ("pipeline", "many_gpus_measure", "many_gpus_hardware"),
            "time_money": ("time_money_plan", "time_money_checks"),
            "serve_tune": ("serve_tune_finetune",)}
SUBS = tuple(sub for subs in CHAPTERS.values() for sub in subs)
#: The helper modules of a chapter module (session 25: modules under ~480 lines), which it imports and
#: re-exports; a helper imports ``base`` only.
HELPERS = {"time_money_plan": ("plan_groups",)}
HELPER_MODULES = tuple(h for hs in HELPERS.values() for h in hs)
#: The modules ``base`` is built on (issue 32), lowest first; it imports and re-exports every name of theirs.
BASES = ("labels", "figures")
MAX_LINES = 800


def _tree(name: str) -> ast.Module:
    return ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))


def _package_imports(name: str) -> set[str]:
    """The modules of the charts package that ``name`` imports (``from .x import ...``, at any depth)."""
    return {node.module for node in ast.walk(_tree(name))
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}


def _defined(name: str) -> set[str]:
    """Top-level names that module ``name`` defines (functions, classes, assignments)."""
    out = set()
    for node in _tree(name).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


def test_the_package_holds_base_and_one_module_per_part():
    assert sorted(p.stem for p in PACKAGE.glob("*.py")) == sorted(["__init__", "base", *BASES, *PARTS, *SUBS,
                                                                *HELPER_MODULES])


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_no_module_is_over_800_lines(path):
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{path.name} has {n} lines: split it by chapter"


def test_imports_run_only_downwards():
    assert _package_imports("labels") == set(), "labels must import no module of the package"
    assert _package_imports("figures") == {"labels"}, "figures may import labels only"
    assert _package_imports("base") == set(BASES), "base may import only the modules it is built on"
    for part in PARTS:
        chapters = set(CHAPTERS.get(part, ()))
        assert _package_imports(part) == {"base", *chapters}, f"{part} may import base and its chapters"
    for sub in SUBS:
        helpers = set(HELPERS.get(sub, ()))
        assert _package_imports(sub) == {"base", *helpers}, f"{sub} may import base and its helpers only"
    for helper in HELPER_MODULES:
        assert _package_imports(helper) == {"base"}, f"{helper} may import base only"
    assert _package_imports("__init__") == {"base", *PARTS}


@pytest.mark.parametrize("module", [*BASES, "base", *PARTS, *SUBS, *HELPER_MODULES])
def test_every_name_is_re_exported_as_the_same_object(module):
    mod = importlib.import_module(f"llmsizing.charts.{module}")
    for name in _defined(module):
        assert getattr(charts, name, None) is getattr(mod, name), f"charts.{name} is not {module}.{name}"


@pytest.mark.parametrize("part, sub", [(part, sub) for part, subs in CHAPTERS.items() for sub in subs])
def test_a_part_still_exports_its_chapter_modules_names(part, sub):
    """``from llmsizing.charts.time_money import render_plan`` keeps working after chapter 12 moved out."""
    mod, chapter = (importlib.import_module(f"llmsizing.charts.{m}") for m in (part, sub))
    for name in _defined(sub):
        assert getattr(mod, name, None) is getattr(chapter, name), f"{part}.{name} is not {sub}.{name}"


def test_shared_state_is_one_object():
    from llmsizing.charts import figures, labels, one_gpu, time_money

    assert charts.COLORS is base.COLORS
    assert charts.DPI == base.DPI == figures.DPI and charts._SUFFIXES is base._SUFFIXES is labels._SUFFIXES
    assert charts._MMB_KEPT is one_gpu._MMB_KEPT                   # chapter 4's kept curves: one dict
    assert all(charts.COLORS[label] for label in one_gpu.ACT_LABELS.values())   # chapter 4's names are coloured
    assert charts._PLAN_GROUPS_KEPT is time_money._PLAN_GROUPS_KEPT


@pytest.mark.parametrize("v, short, tokens, usd", [
    (0.01, "0.01", "0", "$0"), (850, "850", "850", "$850"), (1000, "1k", "1,000", "$1k"),
    (12_000, "12k", "12,000", "$12k"), (250_000, "250k", "250,000", "$250k"), (1.2e6, "1.2M", "1.2M", "$1.2M"),
    (2.5e9, "2.5B", "2.5B", "$2.5B"), (3e11, "300B", "300B", "$300B"),
    (15.6e12, "15.6T", "15.6T", None),       # (dollars stop at billions)
])
def test_short_numbers_share_one_ladder(v, short, tokens, usd):
    assert (base._short_number(v), base._tokens(v)) == (short, tokens)
    if usd is not None:
        assert base._usd(v) == usd


def test_beyond_max_seq_label_clears_the_column_totals():
    """Chapter 4's column chart prints off-chart totals at the top of its columns; the 'beyond max_seq' label used
    to sit there too and cover them (issue 26). It now sits in the right margin, outside the axes, and no two
    texts of the chart overlap."""
    from llmsizing.charts import render_activation_memory

    view = render_activation_memory("llama-3-8b", seq=8192, batch=1, attention="eager", zero3_gpus=8)
    fig = view.figure
    view.png()                                                     # draws the figure once
    ax = fig.axes[0]
    texts = [t for t in ax.texts if t.get_text()]
    label = [t for t in texts if "beyond max_seq" in t.get_text()]
    totals = [t for t in texts if t.get_text().endswith("↑")]
    assert len(label) == 1 and totals, [t.get_text() for t in texts]
    renderer = fig._get_renderer()
    box = label[0].get_window_extent(renderer)
    assert box.x0 >= ax.get_window_extent(renderer).x1            # outside the plotting area
    assert not any(box.overlaps(t.get_window_extent(renderer)) for t in totals)
