"""Voila configuration for ``make app`` (tools/serve_live.py passes ``--Voila.config_file_paths`` to this folder).

* ``prelaunch_hook``: the chapter's MyST prose as Markdown with the kernel's numbers (tools/voila/myst_voila.py).
* ``extension_denylist``: the venv holds jupyterlab-myst, jupytext's and JupyterLite's Pyodide kernel
  extensions (for ``make lab`` and the lite build). Voila's page cannot load them (each logged an error in the
  browser console: a missing shared module ``@jupyterlab/markdownviewer``, a missing ``@jupyterlab/docmanager``,
  a missing ``LicensesClient``) and the app needs none of them. (An allowlist of the widgets' extension alone
  drops the provider of its widget registry, so it is a denylist.)
"""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("myst_voila", Path(__file__).resolve().parent.parent / "myst_voila.py")
myst_voila = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(myst_voila)

c = get_config()  # noqa: F821  (defined by traitlets when it loads this file)
c.VoilaConfiguration.prelaunch_hook = myst_voila.prelaunch_hook
c.VoilaConfiguration.extension_denylist = ["jupyterlab-myst", "jupyterlab-jupytext", "@jupyterlite/pyodide-kernel-extension"]
