"""Jupyter server configuration for workshops (``make lab`` passes it with ``--config``).

A pre-save hook normalises every notebook the contents manager saves exactly as
``tools/refresh_outputs.py`` does (its :func:`normalise` is imported, not copied): widget state
(``metadata.widgets``), the widget-view mime bundles whose model ids die with the kernel (the "model not found"
seen on reopening), per-cell timing (``metadata.execution``) and the kernel's exact Python version are
stripped, and the kernelspec is set back to ``python3``. Opening a notebook, moving sliders and letting
autosave run therefore writes nothing that the committed notebooks do not already have.

``settings/overrides.json`` (``LabApp.app_settings_dir``, set below) changes one JupyterLab default for these
notebooks: the notebook's windowing mode is "none", so every cell is rendered, not only those near the
viewport. jupyterlab-myst evaluates a markdown cell's ``{eval}`name``` roles when the cell is run, from the
cell's rendered content; with JupyterLab 4's default windowing, "Run All" leaves the roles of the cells far
below the viewport unevaluated, and the prose shows key names instead of numbers (seen with jupyterlab-myst
2.7.0 and JupyterLab 4.6).

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

The "notified about official Jupyter news?" pop-up is switched off by ``config/labconfig/page_config.json``,
which disables JupyterLab 4's ``@jupyterlab/apputils-extension:announcements`` plugin; ``make lab`` puts
``config/`` on ``JUPYTER_CONFIG_PATH`` so that it is read without touching the user's or the venv's settings.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

from refresh_outputs import normalise  # noqa: E402  (tools/ is not a package)


def strip_volatile_on_save(model, path=None, contents_manager=None, **kwargs):
    """Contents-manager pre-save hook: normalise a notebook model's content in place (other files as they
    are). The signature is jupyter_server's ``pre_save_hook(model=..., path=..., contents_manager=...)``."""
    import nbformat

    if model.get("type") != "notebook" or not isinstance(model.get("content"), dict):
        return
    nb = nbformat.from_dict(model["content"])
    normalise(nb)
    model["content"] = nb


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

c = get_config()  # noqa: F821  (defined by traitlets when it loads this file)
c.ContentsManager.pre_save_hook = strip_volatile_on_save
c.LabApp.app_settings_dir = str(Path(__file__).resolve().parent / "settings")
# The server and JupyterLab each load this file, so the hook is set twice; traitlets warns about that.
warnings.filterwarnings("ignore", message=r"Overriding existing pre_save_hook \(strip_volatile_on_save\)")
