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

The "notified about official Jupyter news?" pop-up is switched off by ``config/labconfig/page_config.json``,
which disables JupyterLab 4's ``@jupyterlab/apputils-extension:announcements`` plugin; ``make lab`` puts
``config/`` on ``JUPYTER_CONFIG_PATH`` so that it is read without touching the user's or the venv's settings.
"""

from __future__ import annotations

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


c = get_config()  # noqa: F821  (defined by traitlets when it loads this file)
c.ContentsManager.pre_save_hook = strip_volatile_on_save
c.LabApp.app_settings_dir = str(Path(__file__).resolve().parent / "settings")
# The server and JupyterLab each load this file, so the hook is set twice; traitlets warns about that.
warnings.filterwarnings("ignore", message=r"Overriding existing pre_save_hook \(strip_volatile_on_save\)")
