"""The pieces of the live routes that run without a browser: the lite set-up module, the lite notebook copies,
the chapter links, the chapter lookup of `make app`, and Pyodide's package versions against the library's
requirements (the README's table)."""

from __future__ import annotations

import ast
import asyncio
import functools
import importlib.util
import inspect
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "_ext"))

import build_lite  # noqa: E402
import serve_live  # noqa: E402
from live_links import lite_href  # noqa: E402

_spec = importlib.util.spec_from_file_location("llmsizing_lite", ROOT / "tools" / "lite" / "llmsizing_lite.py")
llmsizing_lite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llmsizing_lite)

PYODIDE = json.loads((ROOT / "tools" / "lite" / "pyodide_packages.json").read_text())


def test_lite_copy_puts_a_hidden_guarded_setup_cell_first_and_leaves_the_original_alone():
    nb = nbformat.read(ROOT / "book" / "03_inference_memory.ipynb", as_version=4)
    before = nbformat.writes(nb)
    lite = build_lite.lite_copy(nb)
    assert nbformat.writes(nb) == before
    assert len(lite.cells) == len(nb.cells) + 1
    first = lite.cells[0]
    assert first.cell_type == "code"
    assert first.metadata["jupyter"]["source_hidden"] is True
    assert "lite-setup" in first.metadata["tags"]
    assert 'if sys.platform == "emscripten":' in first.source
    # a second pass does not stack set-up cells
    assert len(build_lite.lite_copy(lite).cells) == len(lite.cells)
    # outside Pyodide the cell does nothing: compile it as IPython would (top-level await allowed) and run it
    code = compile(first.source, "<setup>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict = {}
    result = eval(code, namespace)  # a coroutine, because the cell has a top-level await
    if inspect.iscoroutine(result):
        asyncio.run(result)
    assert namespace["sys"] is sys  # it ran ...
    assert "piplite" not in namespace and "llmsizing_lite" not in namespace  # ... and installed nothing


def test_install_data_copies_every_csv_and_rejects_a_missing_source(tmp_path):
    dest = llmsizing_lite.install_data(ROOT / "data", tmp_path / "data")
    expected = sorted(p.name for p in (ROOT / "data").glob("*.csv"))
    assert expected and sorted(p.name for p in dest.glob("*.csv")) == expected
    with pytest.raises(FileNotFoundError, match="source"):
        llmsizing_lite.install_data(tmp_path / "nowhere", tmp_path / "x")


def test_library_data_dir_is_where_the_catalogue_reads():
    from llmsizing import catalog

    assert llmsizing_lite.library_data_dir() == catalog.DATA_DIR.resolve()


def test_lite_wheel_is_a_valid_wheel_with_its_requirements(tmp_path):
    import zipfile

    path = build_lite.build_lite_wheel(tmp_path, "0.1.0")
    assert path.name == "llmsizing_lite-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(path) as zf:
        meta = zf.read("llmsizing_lite-0.1.0.dist-info/METADATA").decode()
        record = zf.read("llmsizing_lite-0.1.0.dist-info/RECORD").decode()
        names = zf.namelist()
    assert re.search(r"^Requires-Dist: llmsizing==", meta, re.M)
    assert re.search(r"^Requires-Dist: ipywidgets==", meta, re.M)
    assert "llmsizing_lite/__init__.py" in names
    # every file but RECORD itself is listed with its hash
    assert {line.split(",")[0] for line in record.splitlines()} == set(names)


@pytest.mark.parametrize(
    "pagename, docpath, expected",
    [
        ("book/07_data_parallelism", "book/07_data_parallelism.ipynb",
         "../lite/lab/index.html?path=book/07_data_parallelism.ipynb"),
        ("index", "index.ipynb", "lite/lab/index.html?path=index.ipynb"),
    ],
)
def test_lite_href_is_relative_to_the_page(pagename, docpath, expected):
    assert lite_href(pagename, docpath) == expected


@pytest.mark.parametrize("spec", ["07", "07_data_parallelism", "book/07_data_parallelism.ipynb"])
def test_make_app_finds_the_chapter(spec):
    assert serve_live.chapter_notebook(spec) == ROOT / "book" / "07_data_parallelism.ipynb"


@pytest.mark.parametrize("spec", ["", "0", "99", "no_such_chapter"])
def test_make_app_rejects_an_unknown_or_ambiguous_chapter(spec):
    with pytest.raises(ValueError, match="CH"):
        serve_live.chapter_notebook(spec)


def test_one_reader_routes_speculate_and_a_shared_server_does_not():
    """Session 30: `make lab`, `make app` and `make serve-live` (each one reader on 127.0.0.1) start chapters
    12 and 17's speculation unless the reader sets LLMSIZING_SPECULATE=0; the hub and Binder files do not."""
    make = (ROOT / "Makefile").read_text()
    for target in ("lab", "serve-live", "app"):
        recipe = re.search(rf"^{re.escape(target)}:.*?\n((?:\t.*\n)+)", make, re.M)[1]
        assert "LLMSIZING_SPECULATE=$${LLMSIZING_SPECULATE-1}" in recipe, target
    for name in ("postBuild", "binder/postBuild", "environment.yml", "binder/environment.yml"):
        if (ROOT / name).exists():
            assert "LLMSIZING_SPECULATE=1" not in (ROOT / name).read_text(), name


def test_the_test_and_build_recipes_never_speculate():
    """A terminal of `make lab` has LLMSIZING_SPECULATE=1; since the speculating widgets start their worker
    when built, `make test`, `make book` and `make outputs` unset it, or their kernels would start workers."""
    make = (ROOT / "Makefile").read_text()
    for target in ("test", "book", "outputs"):
        recipe = re.search(rf"^{re.escape(target)}:.*?\n((?:\t.*\n)+)", make, re.M)[1]
        first = recipe.splitlines()[0]
        assert first.lstrip().startswith("env -u") and "-u LLMSIZING_SPECULATE" in first, target


def test_jupyter_server_refuses_a_non_loopback_origin():
    with pytest.raises(ValueError, match="site_origin"):
        serve_live.start_jupyter("http://0.0.0.0:8000")


def test_recorded_pyodide_is_the_one_the_kernel_pins():
    """tools/lite/pyodide_packages.json was read from that Pyodide's pyodide-lock.json; a kernel upgrade that
    moves Pyodide makes this fail, so the versions (and the README table) get re-checked."""
    constants = pytest.importorskip("jupyterlite_pyodide_kernel.constants")
    assert constants.PYODIDE_VERSION == PYODIDE["pyodide"]


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def test_pyodide_carries_what_the_library_requires():
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        name, floor = re.match(r"([A-Za-z0-9_.-]+)>=([\d.]+)", dep).groups()
        assert name in PYODIDE["packages"], f"{name} is not in Pyodide {PYODIDE['pyodide']}"
        assert _version(PYODIDE["packages"][name]) >= _version(floor), (name, PYODIDE["packages"][name], floor)
    # the wheels the lite build ships are exactly what Pyodide lacks
    for name in build_lite.WIDGET_WHEELS:
        assert name.replace("_", "-") not in PYODIDE["packages"], f"Pyodide now carries {name}: drop its wheel"


def test_readme_table_matches_the_recorded_versions():
    readme = (ROOT / "README.md").read_text()
    for name in ("numpy", "pandas", "matplotlib"):
        row = re.search(rf"^\| {name} \| ([^|]+) \|", readme, re.M)
        assert row, f"README: no version row for {name}"
        assert row.group(1).strip() == PYODIDE["packages"][name], name


# --------------------------------------------------------------------------- serve-live's Jupyter server (issue 25)
_kspec = importlib.util.spec_from_file_location("live_kernels", ROOT / "tools" / "live" / "live_kernels.py")
live_kernels = importlib.util.module_from_spec(_kspec)
_kspec.loader.exec_module(live_kernels)


def test_serve_live_passes_its_token_in_the_environment_not_the_command_line():
    token = "f00d" * 12
    cmd, env = serve_live.jupyter_command("http://127.0.0.1:8000", port=8888, token=token)
    assert not [a for a in cmd if token in a or "token" in a.lower()], cmd
    assert env["JUPYTER_TOKEN"] == token
    assert "MPLBACKEND" not in env
    assert f"--config={serve_live.LIVE_SERVER_CONFIG}" in cmd and serve_live.LIVE_SERVER_CONFIG.is_file()
    with pytest.raises(ValueError, match="site_origin"):
        serve_live.jupyter_command("http://192.168.1.5:8000", port=8888, token=token)


def test_serve_live_config_culls_idle_kernels():
    from jupyter_server.services.kernels.kernelmanager import MappingKernelManager
    from traitlets.config.loader import PyFileConfigLoader

    path = serve_live.LIVE_SERVER_CONFIG
    config = PyFileConfigLoader(path.name, str(path.parent)).load_config()
    mkm = config.MappingKernelManager
    assert mkm.cull_idle_timeout == 600 and mkm.cull_interval == 60          # 10 minutes, checked each minute
    assert mkm.cull_connected is True and mkm.cull_busy is False
    assert config.LiveKernelManager.cull_connected_idle_timeout == 2 * 3600
    cls = config.ServerApp.kernel_manager_class
    assert issubclass(cls, MappingKernelManager) and cls.__name__ == "LiveKernelManager"


@pytest.mark.parametrize("idle_s, connections, busy, culled", [
    (599, 0, False, False),     # a page left 9 min 59 s ago: kept
    (601, 0, False, True),      # 10 minutes without a page: culled
    (601, 1, False, False),     # the page is still open: kept ...
    (7199, 2, False, False),
    (7201, 1, False, True),     # ... until 2 hours without activity
    (99999, 0, True, False),    # a running cell is never culled
])
def test_kernels_are_culled_on_the_two_timeouts(idle_s, connections, busy, culled):
    assert live_kernels.should_cull(idle_s, connections, busy, 600, 7200) is culled


async def _orphan(grace_s, events):
    """A LiveKernelManager with kernel "k" registered (no process) and ``shutdown_after_last_close_s =
    grace_s``: ``events`` ("connect", "disconnect", or a pause in seconds) happen in order, then the test
    waits 0.3 s past the grace; returns the kernels it shut down."""
    shut = []

    class Manager(live_kernels.LiveKernelManager):
        async def shutdown_kernel(self, kernel_id, *args, **kwargs):
            shut.append(kernel_id)
            self._kernels.pop(kernel_id, None)

    mkm = Manager(shutdown_after_last_close_s=grace_s)
    mkm._kernels["k"] = object()
    mkm._kernel_connections["k"] = 0
    for event in events:
        if isinstance(event, str):
            getattr(mkm, f"notify_{event}")("k")
        else:
            await asyncio.sleep(event)
    await asyncio.sleep(grace_s + 0.3)
    return shut


ORPHAN_CASES = [
    (["connect", "disconnect"], ["k"]),                          # the page went: shut down after the grace
    (["connect", "disconnect", 0.1, "connect"], []),             # its WebSocket dropped and came back: kept
    (["connect", "connect", "disconnect"], []),                  # another page is still connected: kept
    (["connect", "disconnect", 0.1, "connect", "disconnect"], ["k"]),   # came back, then went for good
    ([], []),                                                    # never connected (page still loading): kept
    # voila45: a WebSocket closed while still being prepared (no connect counted) leaves the count at 0 once
    # jupyter_server's disconnect is over, so the page's real connection, once closed, still arms the timer
    # (before: -1, then 0 while connected, then -1 again when the page went: held as connected for good)
    (["disconnect", 0.05, "connect", "disconnect"], ["k"]),
    (["disconnect", 0.05, "connect"], []),                      # ... and a page connected is still kept
]
#: (grace, events) of every run below: the cases above with a grace of 0.3 s, and one with none (off).
_ORPHAN_RUNS = [(0.3, tuple(events)) for events, _ in ORPHAN_CASES] + [(0, ("connect", "disconnect"))]


@functools.cache
def _orphan_runs() -> dict:
    """What :func:`_orphan` gives for each of :data:`_ORPHAN_RUNS`, run side by side in one event loop, each
    with a manager of its own (they share nothing but the loop, whose timers fire in deadline order): their
    waits overlap, about 0.6 s in all instead of 0.6 s each (3.3 s of a worker waiting idle, suite43)."""
    async def every():
        return await asyncio.gather(*(_orphan(grace, list(events)) for grace, events in _ORPHAN_RUNS))

    return dict(zip(_ORPHAN_RUNS, asyncio.run(every())))


@pytest.mark.parametrize("events, shut", ORPHAN_CASES)
def test_a_kernel_whose_last_page_closed_is_shut_down_after_the_grace(events, shut):
    """Issue 38 (voila38e): the kernel manager shuts a kernel down ``shutdown_after_last_close_s`` after its
    last WebSocket closed, unless a page connected again meanwhile."""
    assert _orphan_runs()[(0.3, tuple(events))] == shut


def test_a_websocket_closed_before_it_connected_is_uncounted_after_its_disconnect():
    """voila45: jupyter_server's disconnect of a WebSocket that closed before connect() counted it takes the
    count to -1; it stays -1 while that disconnect runs (at 0 jupyter_server would buffer channels that
    connection never opened), arms no timer, and is back at 0 right after (it stayed -1 for good)."""
    async def run():
        mkm = live_kernels.LiveKernelManager(shutdown_after_last_close_s=0.3)
        mkm._kernels["k"] = object()
        mkm._kernel_connections["k"] = 0
        mkm.notify_disconnect("k")
        during, timers = mkm._kernel_connections["k"], dict(mkm._orphan_timers)
        await asyncio.sleep(0.05)
        return during, timers, mkm._kernel_connections["k"]

    assert asyncio.run(run()) == (-1, {}, 0)


@pytest.mark.parametrize("idle_s, busy, wait_s", [
    (0.0, True, 10.0), (50.0, True, 10.0),       # running its chapter (busy): look again a grace later
    (3.0, False, 7.0),                           # idle 3 s of 10: look again when the 10 s are up
    (10.0, False, 0.0), (12.5, False, 0.0),      # idle the whole grace: shut it down now
])
def test_an_unconnected_kernel_is_shut_down_only_after_a_grace_idle(idle_s, busy, wait_s):
    assert live_kernels.unconnected_wait_s(idle_s, busy, 10.0) == wait_s


@pytest.mark.parametrize("grace_s", [0, -1.0])
def test_unconnected_grace_must_be_positive(grace_s):
    with pytest.raises(ValueError, match="grace_s"):
        live_kernels.unconnected_wait_s(1.0, False, grace_s)


async def _unconnected(grace_s, state, idle_s, events):
    """A LiveKernelManager with kernel "k" (no process; ``execution_state`` ``state``, last activity
    ``idle_s`` ago) that no page has connected to, watched as start_kernel watches a new kernel with
    ``shutdown_unconnected_after_s = grace_s``; ``events`` as in :func:`_orphan`; then the test waits 0.3 s
    past the grace. Returns the kernels it shut down."""
    from datetime import timedelta
    from types import SimpleNamespace

    from jupyter_server._tz import utcnow

    shut = []

    class Manager(live_kernels.LiveKernelManager):
        async def shutdown_kernel(self, kernel_id, *args, **kwargs):
            shut.append(kernel_id)
            self._kernels.pop(kernel_id, None)

    mkm = Manager(shutdown_unconnected_after_s=grace_s)
    mkm._kernels["k"] = SimpleNamespace(execution_state=state,
                                        last_activity=utcnow() - timedelta(seconds=idle_s))
    mkm._kernel_connections["k"] = 0
    mkm._look_unconnected_in("k", grace_s)
    for event in events:
        if isinstance(event, str):
            getattr(mkm, f"notify_{event}")("k")
        else:
            await asyncio.sleep(event)
    await asyncio.sleep(grace_s + 0.3)
    return shut


UNCONNECTED_CASES = [
    (("idle", 0.0, ()), ["k"]),                 # its page went before its WebSocket opened: shut down
    (("idle", 0.0, ("connect",)), []),          # its page connected: kept (the close timer's business)
    (("busy", 5.0, ()), []),                    # still running its page's chapter: kept
]


def test_a_kernel_no_page_connected_to_is_shut_down_after_the_grace_idle():
    """voila45: a Voila page left before its kernel WebSocket opened (at its load event, or while its chapter
    ran) never closed a WebSocket, so the close timer never ran and the kernel stayed until the culler
    (2 minutes idle): now it is shut down after ``shutdown_unconnected_after_s`` idle; not while busy, not
    once a page connected."""
    async def every():
        return await asyncio.gather(*(_unconnected(0.3, state, idle, events)
                                      for (state, idle, events), _ in UNCONNECTED_CASES))

    assert asyncio.run(every()) == [shut for _, shut in UNCONNECTED_CASES]


def test_shutdown_after_last_close_is_off_by_default():
    """serve-live's JupyterLab kernels stay (a reader may come back to the tab); only Voila turns it on."""
    assert live_kernels.LiveKernelManager().shutdown_after_last_close_s == 0
    assert live_kernels.LiveKernelManager().shutdown_unconnected_after_s == 0
    assert _orphan_runs()[(0, ("connect", "disconnect"))] == []


def test_serve_live_server_hides_its_token_and_culls_a_kernel(tmp_path):
    """A real server from jupyter_command (with the timeouts shortened on its command line): /proc shows no
    token, the token in the environment is the one it accepts, and an idle kernel with no page is shut down."""
    import os
    import subprocess
    import time
    import urllib.error
    import urllib.request

    port, token = serve_live.free_port(), "c0ffee" * 8
    cmd, env = serve_live.jupyter_command("http://127.0.0.1:8000", root_dir=tmp_path, port=port, token=token)
    cmd += ["--MappingKernelManager.cull_idle_timeout=3", "--MappingKernelManager.cull_interval=1"]
    # the command line is serve-live's own; the server process also builds jsonschema's IRI parsers on first
    # use, as the pytest processes do (tests/lazy_iri.py, through a sitecustomize on PYTHONPATH): ~2.5 s CPU
    site, lazy_iri = tmp_path / "site", str(Path(__file__).with_name("lazy_iri.py"))
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import importlib.util\n"
        f"_spec = importlib.util.spec_from_file_location('lazy_iri', {lazy_iri!r})\n"
        "_spec.loader.exec_module(importlib.util.module_from_spec(_spec))\n")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def api(path, method="GET", auth=True):
        headers = {"Authorization": f"token {token}"} if auth else {}
        req = urllib.request.Request(url + path, method=method, headers=headers, data=b"{}" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"null")

    try:
        serve_live._wait_http(f"{url}/api/status?token={token}", proc, 60, "jupyter server")
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode() if os.path.exists("/proc") else " ".join(cmd)
        assert token not in cmdline
        with pytest.raises(urllib.error.HTTPError):
            api("/api/kernels", auth=False)
        kernel = api("/api/kernels", method="POST")
        assert [k["id"] for k in api("/api/kernels")] == [kernel["id"]]
        deadline = time.monotonic() + 60
        while api("/api/kernels") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert api("/api/kernels") == [], "the idle kernel was not culled"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_lite_app_pages_load_the_pyodide_check(tmp_path):
    """tools/build_lite.py puts the "Pyodide could not be downloaded" check on each app page, once."""
    page = '<html><head><script id="jupyter-config-data" type="application/json">{}</script></head>\n<body></body></html>'
    for app in ("lab", "notebooks"):
        (tmp_path / app).mkdir()
        (tmp_path / app / "index.html").write_text(page)
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "index.html").write_text("<html><body>not an app</body></html>")
    assert [p.parent.name for p in build_lite.add_pyodide_check(tmp_path)] == ["lab", "notebooks"]
    build_lite.add_pyodide_check(tmp_path)                                      # a second pass adds nothing
    html = (tmp_path / "lab" / "index.html").read_text()
    assert html.count('<script src="../book-pyodide-check.js"></script>') == 1
    assert html.index("book-pyodide-check.js") < html.index("</body>")
    assert "book-pyodide-check" not in (tmp_path / "api" / "index.html").read_text()
    script = (tmp_path / "book-pyodide-check.js").read_text()
    constants = pytest.importorskip("jupyterlite_pyodide_kernel.constants")
    assert f"https://cdn.jsdelivr.net/pyodide/v{constants.PYODIDE_VERSION}/full/pyodide.mjs" in script
    assert "make lab" in script and "@PYODIDE_URL@" not in script


def _lab_config():
    import builtins

    class _Config:                      # what traitlets' get_config() gives a config file, enough for it
        def __getattr__(self, name):
            return type(name, (), {})()

    builtins.get_config = _Config       # the file calls get_config() at import
    try:
        spec = importlib.util.spec_from_file_location("book_lab_config",
                                                      ROOT / "tools" / "lab" / "jupyter_server_config.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        del builtins.get_config
    return module


def test_the_lab_and_serve_live_send_kernel_messages_without_delay(monkeypatch):
    """page30: Nagle's algorithm held a widget's small messages behind its figure now and then (~40 ms);
    Voila's kernel WebSocket sets TCP_NODELAY, and so do the lab's (``make lab``) and serve-live's servers."""
    import builtins

    from jupyter_server.services.kernels.websocket import KernelWebsocketHandler

    async def plain(self, kernel_id):                  # (each config file checked from an unpatched handler)
        return None

    monkeypatch.setattr(KernelWebsocketHandler, "open", plain)
    _lab_config()
    assert getattr(KernelWebsocketHandler.open, "book_nodelay", False)
    monkeypatch.setattr(KernelWebsocketHandler, "open", plain)
    builtins.get_config = lambda: type("C", (), {"__getattr__": lambda self, n: type(n, (), {})()})()
    try:
        spec = importlib.util.spec_from_file_location("book_live_config",
                                                      ROOT / "tools" / "live" / "jupyter_server_config.py")
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    finally:
        del builtins.get_config
    assert getattr(KernelWebsocketHandler.open, "book_nodelay", False)


def test_the_lab_notes_to_run_an_unrun_chapter_and_saves_without_the_note():
    """Issue 38: the lab showed chapter 18's {eval} names until Run All, with nothing saying to run it. The
    lab's contents manager adds a note under the title of a chapter that quotes numbers (never to one that
    does not), once; the pre-save hook takes it out, so the saved notebook is the file's own."""
    cfg = _lab_config()
    nb = nbformat.read(ROOT / "book" / "18_mixture_of_experts.ipynb", as_version=4)
    before = nbformat.writes(nb)
    cfg.add_run_hint(nb)
    cfg.add_run_hint(nb)
    first = nb.cells[0].source
    assert first.startswith("# ") and first.count("Run > Run All Cells") == 1
    name = re.search(r"\{eval\}`([^`]+)`", "".join(c.source for c in nb.cells if c.cell_type == "markdown"))[1]
    assert f"such as `{name}`" in first
    model = {"type": "notebook", "content": nb}
    cfg.strip_volatile_on_save(model)
    assert nbformat.writes(cfg.normalise(nbformat.reads(before, as_version=4))) == nbformat.writes(model["content"])
    plain = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title\n\nNo numbers quoted.")])
    assert cfg.add_run_hint(plain).cells[0].source == "# Title\n\nNo numbers quoted."


def test_voila_config_frees_kernels():
    """Issue 38: Voila's notebook page sets the _xsrf cookie its shutdown beacon needs, and idle kernels are
    culled (a page gone: 2 minutes; a page open: 1 hour; never a busy one) by serve-live's kernel manager, and
    a kernel whose page's WebSocket closed and did not come back is shut down after CLOSE_GRACE_S."""
    import builtins

    from traitlets.config import Config

    builtins.get_config = Config
    try:
        spec = importlib.util.spec_from_file_location("book_voila_config", ROOT / "tools" / "voila" / "config" /
                                                      "voila.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        del builtins.get_config
    from voila.handler import VoilaHandler

    config = module.c
    assert config.LiveKernelManager.shutdown_after_last_close_s == module.CLOSE_GRACE_S
    # longer than the page's first three reconnect delays (0-0, 0-1, 0-3 s: @jupyterlab/services'
    # KernelConnection waits random(0, 2**attempt - 1) s), shorter than the culler's timeout for a kernel
    # without a page
    assert 0 + 1 + 3 < module.CLOSE_GRACE_S < module.CULL_IDLE_TIMEOUT_S
    # voila45: a kernel no page connected to goes after UNCONNECTED_GRACE_S idle; longer than the close grace
    # (a page connects within seconds of its chapter's last cell, slower on a loaded machine), shorter than
    # the culler's timeout
    assert config.LiveKernelManager.shutdown_unconnected_after_s == module.UNCONNECTED_GRACE_S
    assert module.CLOSE_GRACE_S <= module.UNCONNECTED_GRACE_S < module.CULL_IDLE_TIMEOUT_S
    assert getattr(VoilaHandler.prepare, "book_xsrf", False)
    # (page30: the kernel WebSocket sends small messages at once, not held by Nagle's algorithm)
    from voila.tornado.kernel_websocket_handler import VoilaKernelWebsocketHandler

    assert getattr(VoilaKernelWebsocketHandler.open, "book_nodelay", False)
    assert (module.CULL_IDLE_TIMEOUT_S, module.CULL_CONNECTED_IDLE_TIMEOUT_S) == (120, 3600)
    assert module.CULL_INTERVAL_S <= module.CULL_IDLE_TIMEOUT_S


def test_send_without_delay_sets_the_flag_before_the_handler_opens_once():
    """Issue 38 (page30): the kernel WebSocket handler sets TCP_NODELAY when its connection opens, then runs
    its own ``open`` (awaited when it is a coroutine); patching twice wraps once."""
    import asyncio

    calls = []

    class Handler:
        def set_nodelay(self, value):
            calls.append(("nodelay", value))

        async def open(self, kernel_id):
            calls.append(("open", kernel_id))
            return "opened"

    live_kernels.send_without_delay(Handler)
    wrapped = Handler.open
    live_kernels.send_without_delay(Handler)
    assert Handler.open is wrapped
    assert asyncio.run(Handler().open("k1")) == "opened"
    assert calls == [("nodelay", True), ("open", "k1")]


@pytest.mark.parametrize("code, said", [
    (-9, "signal 9 (SIGKILL)"),     # killed: the out-of-memory killer, or someone's kill
    (-11, "signal 11 (SIGSEGV)"),   # a crash in native code
    (-6, "signal 6 (SIGABRT)"),     # an abort (a failed assertion in libzmq, say)
    (1, "status 1"),                # Python exited with an error
    (None, "an unknown status"),
])
def test_exit_reason_names_the_signal(code, said):
    assert live_kernels.exit_reason(code) == said


def test_a_kernel_process_that_exits_is_logged_with_its_status(tmp_path):
    """Issue 38 (voila38): a Voila kernel whose process exited was restarted by jupyter_client, empty, under the
    same id, and the log said only "restarting kernel (1/5)". Now it says which process exited and how, so the
    next such exit in a test run or a workshop names its cause (a signal from outside, a crash, Python's own
    exit). A real kernel, killed."""
    import io
    import logging
    import os
    import signal

    from traitlets.config import Config

    async def run():
        config = Config()
        config.KernelRestarter.time_to_dead = 0.5           # the restarter looks every 3 s otherwise
        config.MultiKernelManager.connection_dir = str(tmp_path)  # a killed kernel leaves its file
        out = io.StringIO()
        log = logging.getLogger("test_live_setup.kernel_exit")
        log.addHandler(logging.StreamHandler(out))
        log.setLevel(logging.INFO)
        mkm = live_kernels.LiveKernelManager(config=config, log=log, root_dir=str(tmp_path))
        kernel_id = await mkm.start_kernel(kernel_name="python3")
        km = mkm.get_kernel(kernel_id)
        pid = km.provisioner.pid
        try:
            os.kill(pid, signal.SIGKILL)
            for _ in range(300):
                await asyncio.sleep(0.1)
                if "exited with" in out.getvalue() and km.ready.done() and km.provisioner.pid != pid:
                    break
            await km.ready
        finally:
            await mkm.shutdown_all()
        return pid, out.getvalue()

    pid, logged = asyncio.run(run())
    assert f"its process {pid} exited with signal 9 (SIGKILL)" in logged, logged
