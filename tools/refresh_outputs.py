#!/usr/bin/env python3
"""Re-execute the book's notebooks in place and normalise them.

Usage (from the repository root, with the project venv):

    .venv/bin/python tools/refresh_outputs.py                 # every notebook in _toc.yml
    .venv/bin/python tools/refresh_outputs.py book/01_parameters.ipynb ...
    .venv/bin/python tools/refresh_outputs.py --no-execute    # only normalise metadata

What it does to each notebook:

* executes it top to bottom with nbclient, kernel ``python3`` whatever the
  notebook's own kernelspec says, working directory ``book/`` (the same as
  ``jupyter-book build`` and ``pytest --nbval``);
* strips widget state (``metadata.widgets``) and the dangling widget-view
  mime bundles (``application/vnd.jupyter.widget-view+json``, which carry a
  random model id) from outputs, keeping their ``text/plain`` fallback;
* merges consecutive outputs of one stream (stdout, stderr) into one, as JupyterLab saves them;
* strips per-cell timing metadata (``metadata.execution``) and other volatile
  metadata (``collapsed``/``scrolled``/``ExecuteTime``);
* normalises the kernelspec to ``python3`` / "Python 3 (ipykernel)";
* strips the inline-expression results that jupyterlab-myst stores in markdown cells
  (``metadata.user_expressions``: the values of the prose's {eval}`name` roles from the last run);
* collapses every cell of an exercise's solution in JupyterLab
  (``metadata.jupyter.source_hidden`` / ``outputs_hidden``, see :func:`solution_cells`), so a reader sees
  a clickable placeholder under the exercise instead of its answer (the built site uses dropdowns);
* writes the file only if its content changed (so it is idempotent and does
  not touch mtimes needlessly).

A notebook whose execution raises is NOT rewritten; the error is reported and
the script exits non-zero after trying the remaining notebooks.

Never run this with MPLBACKEND=Agg: the inline backend would then be bypassed
and every figure silently dropped. The variable is removed from the kernel's
environment here for that reason.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
TOC = ROOT / "_toc.yml"

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
VOLATILE_CELL_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled")
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
USER_EXPRESSIONS = "user_expressions"          # jupyterlab-myst's cache of {eval} results in markdown cells
COLLAPSED = {"source_hidden": True, "outputs_hidden": True}

# sphinx-exercise's solutions: gated (```{solution-start} id ... ```{solution-end}, over several cells) or one
# ```{solution} block. Fences may be longer than three backticks, or colons.
_FENCE = r"(`{3,}|:{3,})"
SOLUTION_START = re.compile(rf"^{_FENCE}\{{solution-start\}}", re.M)
SOLUTION_END = re.compile(rf"^{_FENCE}\{{solution-end\}}", re.M)
SOLUTION_BLOCK = re.compile(rf"^{_FENCE}\{{solution\}}", re.M)


def toc_entries(toc: Path = TOC) -> list[str]:
    """Every ``root``/``file`` entry of _toc.yml, as written (root first); tests/test_hygiene.py uses it."""
    import yaml  # PyYAML ships with jupyter-book

    data = yaml.safe_load(toc.read_text(encoding="utf-8"))
    files: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if isinstance(node.get(key), str):
                    files.append(node[key])
            for value in node.values():
                if isinstance(value, (list, dict)):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(data)
    return files


def toc_notebooks(toc: Path = TOC) -> list[Path]:
    """Notebooks listed in _toc.yml (root first), in order."""
    out = []
    for f in toc_entries(toc):
        p = ROOT / f
        if p.suffix == "":
            p = p.with_suffix(".ipynb")
        if p.suffix == ".ipynb":
            out.append(p)
    return out


def default_notebooks() -> list[Path]:
    if TOC.exists():
        return toc_notebooks()
    return sorted(BOOK.glob("*.ipynb"))


def solution_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of the cells that belong to an exercise's solution.

    That is every cell from a markdown cell opening a gated ``{solution-start}`` to the markdown cell holding
    its ``{solution-end}``, both included, and every markdown cell holding a ``{solution}`` block. A cell
    that holds solution text must hold nothing else (the exercise, the next section): tests/test_hygiene.py
    checks that, so collapsing these cells hides exactly the solutions.
    """
    out, inside = [], False
    for i, cell in enumerate(nb.cells):
        src = cell.source if cell.cell_type == "markdown" else ""
        src = "".join(src) if isinstance(src, list) else src      # a model from JSON may hold lines
        events = sorted([(m.start(), "start") for m in SOLUTION_START.finditer(src)]
                        + [(m.start(), "end") for m in SOLUTION_END.finditer(src)])
        member = inside or bool(events) or bool(SOLUTION_BLOCK.search(src))
        for _, kind in events:
            inside = kind == "start"
        if member:
            out.append(i)
    return out


def _text(text) -> str:
    return "".join(text) if isinstance(text, list) else text


def normalise(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Strip volatile metadata in place, collapse the solutions' cells; return the notebook."""
    nb.metadata.pop("widgets", None)
    nb.metadata.pop("execution", None)
    nb.metadata["kernelspec"] = nbformat.from_dict(dict(KERNELSPEC))
    li = nb.metadata.get("language_info")
    if isinstance(li, dict):
        # keep name etc. but drop the exact interpreter version, which differs
        # between machines and means nothing for the book
        li.pop("version", None)
    for i in solution_cells(nb):
        jupyter = nb.cells[i].metadata.get("jupyter")
        nb.cells[i].metadata["jupyter"] = {**(jupyter if isinstance(jupyter, dict) else {}), **COLLAPSED}
    for cell in nb.cells:
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
        if cell.cell_type == "markdown":
            cell.metadata.pop(USER_EXPRESSIONS, None)
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data")
            if isinstance(data, dict) and WIDGET_VIEW_MIME in data:
                data.pop(WIDGET_VIEW_MIME)
                if not data:
                    continue
            if (out.get("output_type") == "stream" and kept and kept[-1].get("output_type") == "stream"
                    and kept[-1].get("name") == out.get("name")):
                # JupyterLab saves consecutive prints to one stream as one output: store them that way too
                kept[-1]["text"] = _text(kept[-1]["text"]) + _text(out["text"])
                continue
            kept.append(out)
        cell.outputs = kept
    return nb


def kernel_pythonpath(pythonpath: str) -> str:
    """The kernel's PYTHONPATH: this checkout's ``src`` first, then the caller's entries made absolute. The
    kernel starts in ``book/``, so a relative ``PYTHONPATH=src`` would point nowhere and the kernel would
    import whichever ``llmsizing`` the venv's editable install names (in a shared venv, another tree's)."""
    entries = [str(ROOT / "src")] + [str(Path(p).resolve()) for p in pythonpath.split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(entries))


def execute(nb: nbformat.NotebookNode, cwd: Path, timeout: int) -> None:
    from nbclient import NotebookClient

    # The kernel inherits os.environ; MPLBACKEND=Agg would drop every figure.
    os.environ.pop("MPLBACKEND", None)
    os.environ["PYTHONPATH"] = kernel_pythonpath(os.environ.get("PYTHONPATH", ""))
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=timeout,
        resources={"metadata": {"path": str(cwd)}},
        record_timing=False,
        store_widget_state=False,
        allow_errors=False,
    )
    client.execute()


def refresh(path: Path, *, run: bool, timeout: int) -> tuple[bool, str]:
    """Return (changed, message). Raises on execution error."""
    original = path.read_text(encoding="utf-8")
    nb = nbformat.reads(original, as_version=4)
    if run:
        nb.metadata["kernelspec"] = nbformat.from_dict(dict(KERNELSPEC))
        execute(nb, BOOK if path.resolve().is_relative_to(BOOK) else path.parent, timeout)
    normalise(nb)
    text = nbformat.writes(nb, version=4)
    if not text.endswith("\n"):
        text += "\n"
    if text == original:
        return False, "unchanged"
    path.write_text(text, encoding="utf-8")
    return True, "updated"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook in _toc.yml")
    ap.add_argument("--no-execute", action="store_true", help="only normalise metadata, do not run")
    ap.add_argument("--timeout", type=int, default=120, help="per-cell timeout in seconds (default 120)")
    args = ap.parse_args(argv)

    paths = [p if p.is_absolute() else Path.cwd() / p for p in args.notebooks] or default_notebooks()
    failures = 0
    for path in paths:
        rel = os.path.relpath(path, Path.cwd())
        if not path.exists():
            print(f"MISSING  {rel}", file=sys.stderr)
            failures += 1
            continue
        t0 = time.monotonic()
        try:
            changed, msg = refresh(path, run=not args.no_execute, timeout=args.timeout)
        except Exception as exc:  # CellExecutionError, timeout, dead kernel, bad JSON
            failures += 1
            print(f"FAILED   {rel}  (not rewritten)\n{str(exc).strip()}", file=sys.stderr)
            continue
        print(f"{msg:8} {rel}  ({time.monotonic() - t0:.1f} s)")
    if failures:
        print(f"{failures} notebook(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
