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
* strips per-cell timing metadata (``metadata.execution``) and other volatile
  metadata (``collapsed``/``scrolled``/``ExecuteTime``);
* normalises the kernelspec to ``python3`` / "Python 3 (ipykernel)";
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


def toc_entries(toc: Path = TOC) -> list[str]:
    """Every ``root``/``file`` entry of _toc.yml, as written (root first). tests/test_hygiene.py uses it too."""
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


def normalise(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Strip volatile metadata in place; return the notebook."""
    nb.metadata.pop("widgets", None)
    nb.metadata.pop("execution", None)
    nb.metadata["kernelspec"] = nbformat.from_dict(dict(KERNELSPEC))
    li = nb.metadata.get("language_info")
    if isinstance(li, dict):
        # keep name etc. but drop the exact interpreter version, which differs
        # between machines and means nothing for the book
        li.pop("version", None)
    for cell in nb.cells:
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data")
            if isinstance(data, dict) and WIDGET_VIEW_MIME in data:
                data.pop(WIDGET_VIEW_MIME)
                if not data:
                    continue
            kept.append(out)
        cell.outputs = kept
    return nb


def execute(nb: nbformat.NotebookNode, cwd: Path, timeout: int) -> None:
    from nbclient import NotebookClient

    # The kernel inherits os.environ; MPLBACKEND=Agg would drop every figure.
    os.environ.pop("MPLBACKEND", None)
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
