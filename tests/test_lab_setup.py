"""Issue 12, "JupyterLab set-up": ``make lab`` never dirties the repository and shows no news pop-up.

No server is started: the pre-save hook is loaded from tools/lab/jupyter_server_config.py the way the server
loads it (traitlets' config loader), called directly and through a real jupyter_server FileContentsManager;
the page config that disables the announcements plugin is read with jupyterlab_server's own reader.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import nbformat
import pytest
from traitlets.config.loader import PyFileConfigLoader

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "tools" / "lab"
CONFIG = LAB / "jupyter_server_config.py"
ANNOUNCEMENTS = "@jupyterlab/apputils-extension:announcements"
NOTEBOOK = ROOT / "book" / "01_parameters.ipynb"          # a committed (normalised) notebook


@pytest.fixture(scope="module")
def config():
    return PyFileConfigLoader(CONFIG.name, path=str(LAB)).load_config()


@pytest.fixture(scope="module")
def hook(config):
    h = config.ContentsManager.pre_save_hook
    assert callable(h)
    return h


def dirtied(nb: dict) -> dict:
    """What JupyterLab's autosave sends after a workshop session: widget state, a widget view whose model
    dies with the kernel, cell timing, another kernel, the kernel's exact Python version, the prose's evaluated
    numbers and opened solutions."""
    nb = copy.deepcopy(nb)
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {"abc": {"model_name": "IntSliderModel"}}, "version_major": 2, "version_minor": 0}}
    nb["metadata"]["kernelspec"] = {"name": "workshop", "display_name": "Workshop env", "language": "python"}
    nb["metadata"].setdefault("language_info", {"name": "python"})["version"] = "3.12.99"
    for cell in nb["cells"]:
        cell["metadata"]["collapsed"] = False
        if cell["cell_type"] == "code":
            cell["metadata"]["execution"] = {"iopub.execute_input": "2026-11-23T10:00:00.000000Z",
                                             "shell.execute_reply": "2026-11-23T10:00:00.100000Z"}
    # jupyterlab-myst caches the values of the prose's {eval}`name` roles in the markdown cells it ran, and a
    # reader who opened a solution un-collapses its cells
    evals = [c for c in nb["cells"] if c["cell_type"] == "markdown" and "{eval}`" in "".join(c["source"])]
    opened = [c for c in nb["cells"] if c["metadata"].get("jupyter", {}).get("source_hidden")]
    assert evals and opened
    for cell in evals:
        name = "".join(cell["source"]).split("{eval}`", 1)[1].split("`", 1)[0]
        cell["metadata"]["user_expressions"] = [{"expression": name, "result": {
            "status": "ok", "data": {"text/plain": "1,234"}, "metadata": {}}}]
    for cell in opened:
        cell["metadata"]["jupyter"] = {"source_hidden": False}
    widget_cell = next(c for c in nb["cells"] if "parameter_counts_widget()" in "".join(c["source"]))
    widget_cell["outputs"] = [{"output_type": "display_data", "metadata": {}, "data": {
        "application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2, "version_minor": 0}}}]
    return nb


def committed() -> dict:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))


def strip_widget_outputs(nb: dict) -> dict:
    """The committed notebook as the hook should leave it: the widget cell's output is ignored by nbval and
    the hook drops a bundle that held only a widget view."""
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        if "parameter_counts_widget()" in "".join(cell.get("source", "")):
            cell["outputs"] = []
    return nb


def test_hook_restores_the_committed_notebook(hook):
    original = committed()
    model = {"type": "notebook", "format": "json", "content": dirtied(original)}
    hook(model=model, path="book/01_parameters.ipynb", contents_manager=None)
    saved = json.loads(nbformat.writes(nbformat.from_dict(model["content"])))
    assert "widgets" not in saved["metadata"]
    assert saved["metadata"]["kernelspec"]["name"] == "python3"
    assert "version" not in saved["metadata"].get("language_info", {})
    for cell in saved["cells"]:
        assert "execution" not in cell["metadata"] and "collapsed" not in cell["metadata"]
        assert "user_expressions" not in cell["metadata"]
        for out in cell.get("outputs", []):
            assert "application/vnd.jupyter.widget-view+json" not in out.get("data", {})
    assert saved == strip_widget_outputs(original)


def test_hook_reuses_refresh_outputs_normalisation():
    text = CONFIG.read_text(encoding="utf-8")
    assert re.search(r"^from refresh_outputs import normalise\b", text, re.M)    # imported, not copied


def test_hook_leaves_other_files_alone(hook):
    model = {"type": "file", "format": "text", "content": '{"metadata": {"widgets": 1}}'}
    before = copy.deepcopy(model)
    hook(model=model, path="notes.txt", contents_manager=None)
    assert model == before
    model = {"type": "notebook", "chunk": 2}          # a chunked upload carries no content to normalise
    hook(model=model, path="big.ipynb", contents_manager=None)
    assert model == {"type": "notebook", "chunk": 2}


@pytest.mark.filterwarnings("ignore:Overriding existing pre_save_hook")   # traitlets sets it twice
def test_contents_manager_save_writes_a_clean_notebook(config, tmp_path):
    from jupyter_server.services.contents.filemanager import FileContentsManager

    cm = FileContentsManager(root_dir=str(tmp_path), config=config)
    assert cm.pre_save_hook is not None
    original = committed()
    cm.save({"type": "notebook", "format": "json", "content": dirtied(original)}, "01_parameters.ipynb")
    saved = json.loads((tmp_path / "01_parameters.ipynb").read_text(encoding="utf-8"))
    assert saved == strip_widget_outputs(original)


def test_page_config_disables_the_announcements_plugin(monkeypatch):
    from jupyterlab_server.config import get_page_config

    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(LAB / "config"))
    page = get_page_config([], None)
    assert ANNOUNCEMENTS in page["disabledExtensions"]


def test_the_disabled_plugin_exists_in_this_jupyterlab():
    """A renamed plugin would silently bring the pop-up back."""
    from jupyterlab.commands import get_app_dir

    static = Path(get_app_dir()) / "static"
    if not static.is_dir():
        pytest.skip(f"JupyterLab's static assets are not at {static}")
    assert any(ANNOUNCEMENTS.encode() in p.read_bytes() for p in static.glob("*.js"))


def test_make_lab_uses_both():
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = make.split("\nlab:", 1)[1].split("\n\n", 1)[0]
    assert "tools/lab/jupyter_server_config.py" in recipe and "--config=" in recipe
    assert "JUPYTER_CONFIG_PATH=" in recipe and "tools/lab/config" in recipe
    assert "127.0.0.1" in recipe


def test_lab_renders_every_cell_so_the_prose_gets_its_numbers(config):
    """jupyterlab-myst evaluates {eval}`name` only in markdown cells that have been rendered; the lab's settings
    overrides turn JupyterLab's windowing off so that Run All evaluates every cell's roles."""
    from jupyterlab_server.settings_utils import _get_overrides

    settings_dir = config.LabApp.app_settings_dir
    assert Path(settings_dir) == LAB / "settings"
    overrides, error = _get_overrides(settings_dir)
    assert not error
    assert overrides["@jupyterlab/notebook-extension:tracker"]["windowingMode"] == "none"


# --------------------------------------------------------------------------- issue 25: layout and console
def test_a_workspace_not_saved_yet_opens_with_the_file_browser_folded(config, tmp_path):
    """JupyterLab opens the file browser on a "fresh" layout (no saved layout-restorer data); the lab's config
    gives a workspace with no file the folded layout, and leaves a saved one as the reader saved it."""
    from jupyterlab_server.workspaces_handler import WorkspacesManager

    manager = WorkspacesManager(str(tmp_path))
    layout = manager.load("default")["data"]["layout-restorer:data"]
    assert layout["left"]["collapsed"] is True and "filebrowser" in layout["left"]["widgets"]
    assert manager.load("first-visit")["metadata"]["id"] == "/first-visit"
    saved = {"data": {"layout-restorer:data": {"left": {"collapsed": False}}}, "metadata": {"id": "default"}}
    manager.save("default", json.dumps(saved))
    assert manager.load("default")["data"] == saved["data"]
    # loading the config again does not wrap the loader twice
    PyFileConfigLoader(CONFIG.name, path=str(LAB)).load_config()
    assert manager.load("other")["data"]["layout-restorer:data"]["left"]["collapsed"] is True


def test_the_lab_page_does_not_load_the_lite_kernel_extension(config):
    """@jupyterlite/pyodide-kernel-extension (installed for the lite build) logged "Shared module
    @jupyterlite/services doesn't exist" in every lab page; JupyterLab loads even disabled extensions, so the
    lab's config leaves it out of the page's extension list. The ones the workshop needs stay."""
    from jupyter_core.paths import jupyter_path
    from jupyterlab_server.config import get_page_config

    paths = jupyter_path("labextensions")
    if not any((Path(p) / "@jupyterlite" / "pyodide-kernel-extension" / "package.json").is_file() for p in paths):
        pytest.skip("jupyterlite-pyodide-kernel's lab extension is not installed here: nothing to leave out")
    names = {e["name"] for e in get_page_config(paths, None)["federated_extensions"]}
    assert "@jupyterlite/pyodide-kernel-extension" not in names
    assert {"jupyterlab-myst", "@jupyter-widgets/jupyterlab-manager"} <= names
