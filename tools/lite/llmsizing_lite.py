"""Set-up for the in-browser (JupyterLite + Pyodide) copy of the book.

This module is packed into the ``llmsizing-lite`` wheel by ``tools/build_lite.py`` together with the
repository's ``data/`` folder, and shipped inside the lite site (``_build/html/lite/pypi/``). The hidden first
cell of every lite notebook installs that wheel with ``piplite`` (which also installs ``llmsizing``,
``ipywidgets`` and their pure-Python dependencies from the wheels shipped next to it) and calls :func:`setup`.
Outside Pyodide nothing here runs: the cell is guarded by ``sys.platform == "emscripten"``.

:func:`setup` does what the normal checkout gets for free: the library reads its CSV catalogues from
``<package dir>/../../data`` (``llmsizing.catalog.DATA_DIR``, the repository's ``data/`` in an editable install); in
Pyodide the package is installed from a wheel, so the CSVs shipped in this wheel are copied to the same relative
place. (The prose's numbers need nothing here: the chapters bind them with :mod:`llmsizing.prose`.)
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

PACKAGE_DATA = Path(__file__).resolve().parent / "data"


def library_data_dir() -> Path:
    """Where ``llmsizing`` looks for its CSVs: ``<package dir>/../../data`` (found without importing it)."""
    spec = importlib.util.find_spec("llmsizing")
    if spec is None or not spec.origin:
        raise ModuleNotFoundError("llmsizing is not installed: run piplite.install(['llmsizing-lite']) first")
    return Path(spec.origin).resolve().parents[2] / "data"


def install_data(source: Path = PACKAGE_DATA, dest: Path | None = None) -> Path:
    """Copy the shipped CSVs to where the library reads them; return that folder."""
    dest = library_data_dir() if dest is None else Path(dest)
    if not Path(source).is_dir():
        raise FileNotFoundError(f"source: no data folder at {source}")
    shutil.copytree(source, dest, dirs_exist_ok=True)
    return dest


def setup() -> None:
    """Everything the lite notebooks need before their first import of ``llmsizing``."""
    install_data()
