"""The library's layers (issue 32): the import-linter contract in pyproject.toml holds, no two modules import each
other however indirectly (imports inside functions count), and every name that moved to a higher module or was
retired still works for one release, with a DeprecationWarning naming its new home. (The 600-line rule is
tests/test_house.py's.)"""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "llmsizing"


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = p.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _imports(name: str, path: Path, mods, packages: bool = False) -> set[str]:
    """Every llmsizing module ``name`` imports, at module level or inside a function; ``packages``: also the
    package a ``from <package> import x`` runs first (its ``__init__``)."""
    pkg = path.name == "__init__.py"
    base = name.split(".") if pkg else name.split(".")[:-1]
    out = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom):
            stem = base[: len(base) - (n.level - 1)] if n.level else []
            target = ".".join(stem + ([n.module] if n.module else [])) if n.level else n.module or ""
            for a in n.names:
                full = f"{target}.{a.name}"
                out.add(full if full in mods else target)
            if packages:
                out.add(target)
        elif isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
    return {m for m in out if m in mods and m != name}


def _cycles(packages: bool = False) -> list[list[str]]:
    mods = _modules()
    graph = {m: _imports(m, p, mods, packages) for m, p in mods.items()}
    if not packages:
        # a package's __init__ gathers its children's names for the reader: its own edges to them are not
        # circles (unless a child imports the package back: ``packages=True``)
        graph = {m: {t for t in ts if not t.startswith(m + ".")} for m, ts in graph.items()}
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    assert _cycles() == []


def test_no_module_imports_back_through_the_package():
    """``from . import x`` runs ``llmsizing/__init__`` first, which imports most of the library: a module the
    package imports must not do that (``plan_memory``'s ``from . import dense_arrays`` closed a circle through
    the package, planner, stages and time_cost; it imports the names instead)."""
    assert _cycles(packages=True) == []


def test_cycle_finder_finds_a_planted_circle(tmp_path, monkeypatch):
    """The check above can fail: two modules that import each other inside functions are found."""
    pkg = tmp_path / "llmsizing"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .b import g\n")
    (pkg / "b.py").write_text("def g():\n    from . import a\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", pkg)
    assert _cycles() == [["llmsizing.a", "llmsizing.b"]]


def test_import_linter_contract():
    exe = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(exe), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "1 kept, 0 broken" in r.stdout


MOVED = [("llmsizing.moe", "deepseek_memory", "llmsizing.deepseek"),
         ("llmsizing.moe", "DEEPSEEK_V3_LAYOUT", "llmsizing.deepseek"),
         ("llmsizing.precision", "recipe_tensor_table", "llmsizing.memory"),
         ("llmsizing.moe_layouts", "moe_all_to_all_s", "llmsizing.plan_pricing")]


@pytest.mark.parametrize("old, name, new", MOVED)
def test_moved_names_still_work_and_warn(old, name, new):
    with pytest.warns(DeprecationWarning, match=f"{old}.{name} moved to {new}"):
        got = getattr(importlib.import_module(old), name)
    assert got is getattr(importlib.import_module(new), name)


@pytest.mark.parametrize("module, name, value", [("llmsizing.time_cost", "MFU_DEFAULT", 0.40),
                                                 ("llmsizing.time_cost", "MFU_LOW", 0.30),
                                                 ("llmsizing.time_cost", "MFU_HIGH", 0.50),
                                                 ("llmsizing.planner", "COMPUTE_EFFICIENCY", 0.5)])
def test_retired_constants_warn_and_name_the_replacement(module, name, value):
    with pytest.warns(DeprecationWarning, match=f"{name} is retired.*use "):
        assert getattr(importlib.import_module(module), name) == value


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        importlib.import_module("llmsizing.moe").nothing_here


def test_the_library_itself_uses_no_forward():
    """Importing every module (in a fresh interpreter) raises no DeprecationWarning: the library imports each name
    from its home."""
    names = [m for m in sorted(_modules()) if not m.endswith("__main__")]
    code = "import importlib\nfor m in %r:\n    importlib.import_module(m)\n" % names
    r = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


def test_the_moe_path_from_a_chart_never_returns_to_a_module_it_left():
    """Issue 32's walk: chapter 18's layout chart on Mixtral, traced call by call. Before the layers, the MoE
    memory path went back from moe into activations 11 times, into memory 3 times and into comm 3 times (a
    "dense twin" run through the dense code). Now a module below the chart is never entered again while one of
    its callees runs; the re-entries left are charts.figures (figures and axes reused, split out of charts.base,
    issue 32) calling back the function its caller handed it: the chart's own draw function (``figure_axes``'s
    ``build``), or base's legend-making lambda (``_kept_legend``'s ``make``)."""
    from llmsizing import activations
    from llmsizing.charts.moe import render_moe_layout

    render_moe_layout("mixtral-8x7b")                    # the catalogues read once, outside the trace
    activations._kept_moe_activations.cache_clear()
    activations._kept_moe_block_terms.cache_clear()
    stack, reentries = [], []

    def profile(frame, event, arg):
        module = frame.f_globals.get("__name__", "")
        if event == "call":
            mods = [m for m in stack if m]
            if module.startswith("llmsizing") and mods and module in mods and mods[-1] != module:
                reentries.append((module, mods[-1]))
            stack.append(module if module.startswith("llmsizing") else None)
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        render_moe_layout("mixtral-8x7b", recompute="none")
    finally:
        sys.setprofile(None)
    assert set(reentries) <= {("llmsizing.charts.moe", "llmsizing.charts.figures"),
                              ("llmsizing.charts.base", "llmsizing.charts.figures")}, reentries


@pytest.mark.parametrize("module", ["llmsizing.serve", "llmsizing.serve_step"])
@pytest.mark.parametrize("name, value", [("MBU_LOW", 0.6), ("MBU_HIGH", 0.9), ("MFU_LOW", 0.4), ("MFU_HIGH", 0.7)])
def test_serving_what_if_bands_are_retired(module, name, value):
    with pytest.warns(DeprecationWarning, match=f"{name} is retired.*serving_range"):
        assert getattr(importlib.import_module(module), name) == value


def test_the_readme_layer_table_names_every_module_of_the_contract():
    """README's "The library's layers" table and pyproject's import-linter contract list the same modules: a
    module added to the contract and not to the table (five were, in session 19) fails here."""
    import re
    import tomllib

    root = Path(__file__).resolve().parents[1]
    with open(root / "pyproject.toml", "rb") as fh:
        contracts = tomllib.load(fh)["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c.get("type") == "layers")
    in_contract = {m.strip() for line in layers for m in re.split(r"[|:]", line)}
    readme = (root / "README.md").read_text()
    table = readme[readme.index("## The library's layers"):]
    table = table[:table.index("\n\n", table.index("| 7. presentation"))]
    rows = [line.split("|")[2] for line in table.splitlines() if re.match(r"\| \d\. ", line)]
    in_table = {m.rstrip("/") for row in rows for m in re.findall(r"`([a-z_0-9]+/?)`", row)}
    assert in_contract == in_table, (sorted(in_contract - in_table), sorted(in_table - in_contract))


def test_min_gpus_forwards_from_layouts_with_a_warning():
    """min_gpus moved up to fewest_gpus (session 23: it weighs an MoE's layouts on the planner's arrays, which
    import layouts); the old path still gives the same function for one release, and says where it went."""
    from llmsizing import fewest_gpus, layouts

    with pytest.warns(DeprecationWarning, match="fewest_gpus"):
        assert layouts.min_gpus is fewest_gpus.min_gpus
