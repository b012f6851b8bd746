#!/usr/bin/env python3
"""Build the in-browser (JupyterLite) copy of the book into _build/html/lite/.

    python tools/build_lite.py            # run by `make book` after the Sphinx build
    python tools/build_lite.py --out DIR  # somewhere else

What it does, offline except for PyPI (wheels are downloaded once into _vendor_cache/wheels/):

1. copies every notebook of _toc.yml into a staging folder and puts a hidden set-up cell first in each COPY
   (book/*.ipynb are never changed; a new chapter in _toc.yml needs nothing else);
2. builds the wheels the Pyodide kernel cannot find on its own and ships them with the site (lite/pypi/):
   ``llmsizing`` (``pip wheel .`` of this checkout), ``llmsizing-lite`` (tools/lite/llmsizing_lite.py + data/,
   see that module), and ``ipywidgets``, ``comm`` and ``jupyterlab_widgets`` at the versions of the local venv
   (Pyodide carries numpy, pandas, matplotlib and IPython, but none of these three; the Pyodide kernel ships a
   stub ``widgetsnbextension`` itself);
3. runs ``jupyter lite build`` with the federated extensions of the venv that the lite UI needs: the Pyodide
   kernel, ``@jupyter-widgets/jupyterlab-manager`` (from jupyterlab_widgets, so widgets render) and
   ``jupyterlab-myst`` (admonitions, exercises and dropdowns render; the {eval} numbers need the kernel's
   ``user_expressions``, which could not be tried here: Pyodide comes from a CDN);
4. adds ``book-pyodide-check.js`` (tools/lite/pyodide-check.js) to the app pages: when the network blocks the
   CDN that Pyodide comes from, a box in the page says so and points to ``make lab`` (JupyterLite alone says it
   only in its hidden log console);
5. leaves out the source maps (*.map) and the apps the book does not link to, and prints the size of the
   result (29.7 MiB on 2026-11-23; book-lite.json in the output records the current figure).

At run time the lite site loads Pyodide itself (and numpy, pandas, matplotlib) from the jsDelivr CDN: that
is the one part of the published site that is not offline, and tools/check_site.py leaves lite/ out of its
no-off-site-request check for that reason (README, "Reading the site").
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from refresh_outputs import toc_notebooks  # noqa: E402

OUT = ROOT / "_build" / "html" / "lite"
STAGE = ROOT / "_build" / "lite-stage"
WHEEL_CACHE = ROOT / "_vendor_cache" / "wheels"
LITE_MODULE = ROOT / "tools" / "lite" / "llmsizing_lite.py"
DATA = ROOT / "data"

#: pure-Python wheels Pyodide's lock file does not carry (checked against pyodide-lock.json of the Pyodide
#: version jupyterlite-pyodide-kernel pins); shipped at the versions installed in the local venv.
WIDGET_WHEELS = ("ipywidgets", "comm", "jupyterlab_widgets")

#: federated JupyterLab extensions the lite UI loads (everything else in the venv is left out)
LAB_EXTENSIONS = ("@jupyterlite/pyodide-kernel-extension", "@jupyter-widgets/jupyterlab-manager", "jupyterlab-myst")

SETUP_TAG = "lite-setup"
SETUP_SOURCE = """\
# Set-up for this in-browser copy of the book (JupyterLite). Elsewhere it does nothing.
# It installs the book's library, its data and ipywidgets from wheels shipped with the site.
import sys

if sys.platform == "emscripten":
    import piplite

    await piplite.install(["llmsizing-lite"])
    import llmsizing_lite

    llmsizing_lite.setup()
"""


def setup_cell() -> nbformat.NotebookNode:
    """The hidden first cell of every lite notebook (collapsed input, tagged ``lite-setup``)."""
    cell = nbformat.v4.new_code_cell(SETUP_SOURCE)
    cell.metadata["tags"] = [SETUP_TAG, "remove-cell"]
    cell.metadata["jupyter"] = {"source_hidden": True, "outputs_hidden": True}
    cell.metadata["editable"] = False
    cell.metadata["deletable"] = False
    return cell


def lite_copy(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of a chapter with the set-up cell first (the original is not modified)."""
    out = copy.deepcopy(nb)
    out.cells = [c for c in out.cells if SETUP_TAG not in c.get("metadata", {}).get("tags", [])]
    out.cells.insert(0, setup_cell())
    # The lite UI starts the Pyodide kernel for this notebook, whatever the original kernelspec says.
    out.metadata["kernelspec"] = {"name": "python", "display_name": "Python (Pyodide)", "language": "python"}
    return out


def stage_contents(stage: Path) -> list[Path]:
    """Write the lite copies of every chapter in _toc.yml to stage/book/; return their paths."""
    book = stage / "book"
    if book.exists():
        shutil.rmtree(book)
    book.mkdir(parents=True)
    written = []
    for src in toc_notebooks():
        nb = nbformat.read(src, as_version=4)
        dest = book / src.name
        nbformat.write(lite_copy(nb), dest)
        written.append(dest)
    return written


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_lite_wheel(dest: Path, version: str) -> Path:
    """Pack tools/lite/llmsizing_lite.py and data/*.csv into llmsizing_lite-<version>-py3-none-any.whl."""
    llmsizing_version = importlib.metadata.version("llmsizing")
    ipywidgets_version = importlib.metadata.version("ipywidgets")
    files: dict[str, bytes] = {"llmsizing_lite/__init__.py": LITE_MODULE.read_bytes()}
    for csv in sorted(DATA.glob("*.csv")):
        files[f"llmsizing_lite/data/{csv.name}"] = csv.read_bytes()
    info = f"llmsizing_lite-{version}.dist-info"
    files[f"{info}/METADATA"] = (
        "Metadata-Version: 2.1\n"
        "Name: llmsizing-lite\n"
        f"Version: {version}\n"
        "Summary: Data and set-up for the in-browser (JupyterLite) copy of How Many GPUs?\n"
        f"Requires-Dist: llmsizing=={llmsizing_version}\n"
        f"Requires-Dist: ipywidgets=={ipywidgets_version}\n"
    ).encode()
    files[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: tools/build_lite.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    ).encode()
    files[f"{info}/top_level.txt"] = b"llmsizing_lite\n"
    record = [_record_line(n, d) for n, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = dest / f"llmsizing_lite-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zi = zipfile.ZipInfo(name, date_time=(2020, 2, 2, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data)
    return path


def build_wheels(dest: Path) -> list[Path]:
    """The wheels shipped in lite/pypi/: llmsizing, llmsizing-lite and the widget packages."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    had_build_dir = (ROOT / "build").exists()
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(dest), str(ROOT)], check=True)
    if not had_build_dir:  # setuptools leaves build/lib/ in the checkout
        shutil.rmtree(ROOT / "build", ignore_errors=True)
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    for name in WIDGET_WHEELS:
        version = importlib.metadata.version(name)
        norm = name.replace("-", "_")
        cached = sorted(WHEEL_CACHE.glob(f"{norm}-{version}-py*-none-any.whl"))
        if not cached:  # once, from PyPI (the only network use of the lite build)
            subprocess.run(
                [*pip, "download", "--no-deps", "--only-binary=:all:", "-d", str(WHEEL_CACHE), f"{name}=={version}"],
                check=True,
            )
            cached = sorted(WHEEL_CACHE.glob(f"{norm}-{version}-py*-none-any.whl"))
        if not cached:
            raise SystemExit(f"no pure-Python wheel of {name}=={version} on PyPI")
        shutil.copy2(cached[-1], dest)
    build_lite_wheel(dest, importlib.metadata.version("llmsizing"))
    return sorted(dest.glob("*.whl"))


def labextension_dirs() -> list[Path]:
    """The venv's copies of LAB_EXTENSIONS (share/jupyter/labextensions/<name>)."""
    base = Path(sys.prefix) / "share" / "jupyter" / "labextensions"
    found = []
    for name in LAB_EXTENSIONS:
        path = base / name
        if not (path / "package.json").exists():
            raise SystemExit(f"labextension {name} missing from {base}: is the venv complete (make venv)?")
        found.append(path)
    return found


def drop_source_maps(out: Path) -> int:
    n = 0
    for path in out.rglob("*.map"):
        path.unlink()
        n += 1
    return n


PYODIDE_CHECK = ROOT / "tools" / "lite" / "pyodide-check.js"


def pyodide_url() -> str:
    """The file the Pyodide kernel loads first, at the CDN jupyterlite-pyodide-kernel pins."""
    from jupyterlite_pyodide_kernel.constants import PYODIDE_CDN_URL

    return f"{PYODIDE_CDN_URL}/pyodide.mjs"


def add_pyodide_check(out: Path) -> list[Path]:
    """Put tools/lite/pyodide-check.js into the lite site and load it from each app page (lab/, notebooks/).

    When the network blocks the CDN Pyodide comes from, that script shows a box in the page saying so and
    what to do (another network, or ``make lab`` offline); JupyterLite alone says it only in its log console.
    Returns the pages changed."""
    script = PYODIDE_CHECK.read_text(encoding="utf-8").replace("@PYODIDE_URL@", pyodide_url())
    (out / "book-pyodide-check.js").write_text(script, encoding="utf-8")
    tag = '<script src="../book-pyodide-check.js"></script>'
    pages = []
    for page in sorted(out.glob("*/index.html")):
        html = page.read_text(encoding="utf-8")
        if 'id="jupyter-config-data"' not in html:
            continue
        if tag not in html:
            if "</body>" not in html:
                raise ValueError(f"{page}: no </body> to put the Pyodide check before")
            page.write_text(html.replace("</body>", f"  {tag}\n</body>", 1), encoding="utf-8")
        pages.append(page)
    return pages


def size_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def build(out: Path = OUT, stage: Path = STAGE) -> dict:
    stage.mkdir(parents=True, exist_ok=True)
    notebooks = stage_contents(stage / "contents")
    wheels = build_wheels(stage / "wheels")
    # a lite dir of our own: no jupyter_lite_config.json from the user or the repository root is picked up
    lite_dir = stage / "lite-dir"
    lite_dir.mkdir(exist_ok=True)
    (lite_dir / "jupyter-lite.json").write_text(
        json.dumps({"jupyter-lite-schema-version": 0, "jupyter-config-data": {"appName": "How Many GPUs? (live)"}})
    )
    # Lists go through the config file: the CLI takes only one value per list option.
    (lite_dir / "jupyter_lite_config.json").write_text(json.dumps({
        "LiteBuildConfig": {
            "contents": [str(stage / "contents")],
            "output_dir": str(out),
            "ignore_sys_prefix": True,  # only the extensions listed here, not everything in the venv
            "federated_extensions": [str(p) for p in labextension_dirs()],
            "no_sourcemaps": True,  # drops every *.map from the apps and the extensions
            "no_libarchive": True,
            # JupyterLab (the chapter links open it) and the one-document Notebook UI; no REPL/console apps
            "apps": ["lab", "notebooks"],
            "no_unused_shared_packages": True,
        },
        "PipliteAddon": {"piplite_urls": [str(p) for p in wheels]},
    }, indent=1))
    if out.exists():
        shutil.rmtree(out)
    jupyter = Path(sys.executable).with_name("jupyter")
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)
    subprocess.run([str(jupyter), "lite", "build", "--lite-dir", str(lite_dir)], check=True, cwd=lite_dir, env=env)
    maps = drop_source_maps(out)
    add_pyodide_check(out)
    result = {
        "notebooks": [p.name for p in notebooks],
        "wheels": [p.name for p in wheels],
        "source_maps_removed": maps,
        "size_mib": round(size_mib(out), 1),
    }
    (out / "book-lite.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="output folder (default: _build/html/lite)")
    args = parser.parse_args(argv)
    result = build(args.out.resolve())
    print(f"lite site: {len(result['notebooks'])} notebooks, wheels {', '.join(result['wheels'])}; "
          f"{result['source_maps_removed']} source maps removed; {result['size_mib']} MiB in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
