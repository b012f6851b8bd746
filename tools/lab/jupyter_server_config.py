"""Jupyter server configuration for workshops (``make lab`` passes it with ``--config``).

A pre-save hook normalises every notebook the contents manager saves exactly as
``tools/refresh_outputs.py`` does (its :func:`normalise` is imported, not copied): widget state
(``metadata.widgets``), the widget-view mime bundles whose model ids die with the kernel (the "model not found"
seen on reopening), per-cell timing (``metadata.execution``) and the kernel's exact Python version are
stripped, and the kernelspec is set back to ``python3``. Opening a notebook, moving sliders and letting
autosave run therefore writes nothing that the committed notebooks do not already have.

``settings/overrides.json`` (``LabApp.app_settings_dir``, set below) changes one JupyterLab default for these
notebooks: the notebook's windowing mode is "none", so every cell is rendered at once, not only those near the
viewport. jupyterlab-myst evaluates a markdown cell's ``{eval}`name``` roles when the cell is run, from the
cell's rendered content; with JupyterLab 4's default windowing, "Run All" was seen to leave the roles of the
cells far below the viewport unevaluated, the prose showing key names instead of numbers (2026-11-23,
jupyterlab-myst 2.7.0 and JupyterLab 4.6; jupyterlab-myst renders only cells attached to the page, and "full"
takes the cells off screen out of it). JupyterLab 4.6.6's default, "contentVisibility", keeps every cell in
the page, and lab44 could not see that: it showed every number after Run All at every scroll position (lab44:
chapters 12, 13, 17 and 18, also with Run All clicked as the notebook opened on a CPU slowed 6x), but it
renders the cells one after another while the browser is idle, and jupyterlab-myst, resolving each cell's
cross-references against the cells rendered so far, then logs "No target for internal reference" for each
reference to a cell not rendered yet (#ch17-ex7, #ch16-ex3; test_lab.py's test_no_console_error fails; the
final prose is the same text as with "none"). Its gain in chapter 17 was the browser's share of a move, ~31 ->
~25 ms, with the painted time inside the noise (12 interleaved pairs, benchmarks/README.md), so "none" stays.

``default_workspace.json`` is the layout of a workspace the reader has not saved yet (the first ``make lab``):
the file browser is folded, so at 1280x720 the notebook gets the width and a widget's figure sits beside its
controls. JupyterLab opens the file browser on a "fresh" layout (one with no saved ``layout-restorer:data``)
and has no setting for that, so :func:`_folded_by_default` gives jupyterlab_server's workspace manager this
layout for a workspace that has no file yet. Once the reader opens or folds anything, their own saved layout
is used; ``?reset`` in the URL still starts from JupyterLab's default (file browser open).

JupyterLite's Pyodide kernel extension (``@jupyterlite/pyodide-kernel-extension``) is installed in the venv for
the lite build (tools/build_lite.py), but it cannot load in JupyterLab itself: it logged "Shared module
@jupyterlite/services doesn't exist in shared scope default" in the console of every page. JupyterLab loads
every federated extension it finds, even a disabled one, so :func:`_lab_extensions` leaves it out of the
list the lab's page is given (``LAB_HIDDEN_EXTENSIONS``).

Until a chapter is run, jupyterlab-myst has no value for its prose's ``{eval}`name``` roles and shows each name in
code font (``ch18_mix_k``: 113 of them in chapter 18), with nothing saying why (issue 38). ``BookContentsManager``
adds a note under the title of every chapter whose prose quotes numbers, in the copy the lab opens (never in the
file): the names are the numbers' names, and Run > Run All Cells shows the numbers. The pre-save hook takes the
note out again, so saving writes the file's own bytes (:func:`add_run_hint`, :func:`strip_run_hint`).

The "notified about official Jupyter news?" pop-up is switched off by ``config/labconfig/page_config.json``,
which disables JupyterLab 4's ``@jupyterlab/apputils-extension:announcements`` plugin; ``make lab`` puts
``config/`` on ``JUPYTER_CONFIG_PATH`` so that it is read without touching the user's or the venv's settings.
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

from refresh_outputs import normalise  # noqa: E402  (tools/ is not a package)


def strip_volatile_on_save(model, path=None, contents_manager=None, **kwargs):
    """Contents-manager pre-save hook: normalise a notebook model's content in place (other files as they
    are), the run-the-notebook note (:func:`add_run_hint`) taken out. The signature is jupyter_server's
    ``pre_save_hook(model=..., path=..., contents_manager=...)``."""
    import nbformat

    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    nb = nbformat.from_dict(model["content"])
    strip_run_hint(nb)
    normalise(nb)
    model["content"] = nb


EVAL_ROLE = re.compile(r"\{eval\}`([^`]+)`")
#: The note :func:`add_run_hint` puts under a chapter's title ({name}: the chapter's first quoted number).
RUN_HINT = ("\n\n:::{{note}} The numbers in this chapter's text come from its code\n"
            "Until the notebook has run, the text shows each number's name in code font (such as `{name}`). "
            "**Run > Run All Cells** (or Shift+Enter through the cells) and the names become the numbers.\n:::")
_RUN_HINT = re.compile(re.escape(RUN_HINT).replace(re.escape("{name}"), "[^`]*").replace(r"\{\{", r"\{")
                       .replace(r"\}\}", r"\}"))


def _source(cell) -> str:
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def add_run_hint(nb: dict) -> dict:
    """Put :data:`RUN_HINT` after the first heading of the first markdown cell of a notebook whose markdown
    quotes numbers (``{eval}`` roles); a notebook without them, or with the note already, is left as it is."""
    cells = nb.get("cells", [])
    names = [n for c in cells if c.get("cell_type") == "markdown" for n in EVAL_ROLE.findall(_source(c))]
    first = next((c for c in cells if c.get("cell_type") == "markdown"), None)
    if not names or first is None or _RUN_HINT.search(_source(first)):
        return nb
    src = _source(first)
    heading = re.search(r"^#[^\n]*", src, re.M)
    at = heading.end() if heading else 0
    first["source"] = src[:at] + RUN_HINT.format(name=names[0]) + src[at:]
    return nb


def strip_run_hint(nb: dict) -> dict:
    """Take :func:`add_run_hint`'s note out of a notebook (in place)."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown" and _RUN_HINT.search(_source(cell)):
            cell["source"] = _RUN_HINT.sub("", _source(cell), count=1)
    return nb


def book_contents_manager(base):
    """A subclass of ``base`` (jupyter_server's contents manager) whose notebooks open with the note."""
    import inspect

    class BookContentsManager(base):
        async def get(self, path, content=True, type=None, format=None, **kwargs):
            model = super().get(path, content=content, type=type, format=format, **kwargs)
            if inspect.isawaitable(model):
                model = await model
            if content and model.get("type") == "notebook" and isinstance(model.get("content"), dict):
                add_run_hint(model["content"])
            return model

    return BookContentsManager


HERE = Path(__file__).resolve().parent
DEFAULT_WORKSPACE = json.loads((HERE / "default_workspace.json").read_text(encoding="utf-8"))
LAB_HIDDEN_EXTENSIONS = frozenset({"@jupyterlite/pyodide-kernel-extension"})


def _folded_by_default(load):
    """Wrap ``WorkspacesManager.load``: a workspace with no saved file gets DEFAULT_WORKSPACE's layout."""
    if getattr(load, "book_default", False):
        return load

    def wrapped(self, space_name):
        workspace = load(self, space_name)
        if not workspace.get("data"):
            workspace["data"] = json.loads(json.dumps(DEFAULT_WORKSPACE))
        return workspace

    wrapped.book_default = True
    return wrapped


def _lab_extensions(get_federated_extensions):
    """Wrap jupyterlab_server's ``get_federated_extensions``: drop LAB_HIDDEN_EXTENSIONS."""
    if getattr(get_federated_extensions, "book_hidden", False):
        return get_federated_extensions

    def wrapped(labextensions_path):
        found = get_federated_extensions(labextensions_path)
        return {name: data for name, data in found.items() if name not in LAB_HIDDEN_EXTENSIONS}

    wrapped.book_hidden = True
    return wrapped


import jupyterlab_server.config as _jls_config  # noqa: E402
from jupyterlab_server.workspaces_handler import WorkspacesManager  # noqa: E402

WorkspacesManager.load = _folded_by_default(WorkspacesManager.load)
_jls_config.get_federated_extensions = _lab_extensions(_jls_config.get_federated_extensions)

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager  # noqa: E402

BookContentsManager = book_contents_manager(AsyncLargeFileManager)

# The kernel WebSocket sends each message at once (TCP_NODELAY), as in Voila (page30: a widget's small
# messages right behind its figure were now and then held ~40 ms by Nagle's algorithm; live_kernels.py)
import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location("live_kernels", TOOLS / "live" / "live_kernels.py")
_live_kernels = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_live_kernels)

from jupyter_server.services.kernels.websocket import KernelWebsocketHandler  # noqa: E402

_live_kernels.send_without_delay(KernelWebsocketHandler)

c = get_config()  # noqa: F821  (defined by traitlets when it loads this file)
c.ServerApp.contents_manager_class = BookContentsManager
c.ContentsManager.pre_save_hook = strip_volatile_on_save
c.LabApp.app_settings_dir = str(Path(__file__).resolve().parent / "settings")
# The server and JupyterLab each load this file, so the hook is set twice; traitlets warns about that.
warnings.filterwarnings("ignore", message=r"Overriding existing pre_save_hook \(strip_volatile_on_save\)")
