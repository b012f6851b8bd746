"""Fixtures for the browser tests (``make check-live``; ``make test`` does not collect tests/browser).

* ``chromium``: one Playwright Browser for the whole session, on Debian's chromium-headless-shell (Chromium's
  old headless mode, as Playwright drives it; issue 38: less CPU than ``chromium --headless``), else Debian's
  /usr/bin/chromium ($CHROMIUM overrides; each installed with apt-get when missing and we are root). Never a
  downloaded browser build. When Playwright, Chromium or its launch is missing, every test that needs it is
  skipped with the reason.
* ``guard_network``: ``guard_network(page) -> list[str]`` aborts every request of ``page`` whose host is not
  127.0.0.1, localhost or [::1] (WebSockets too) and records its URL in the returned list.
* ``lab``: JupyterLab started by ``make lab`` itself (same flags, same config, same pre-save hook), on a copy
  of book/ (``lab_book``), with --no-browser, a free port and a known token. Yields ``(base_url, token)``.
* ``built_site``: the built site _build/html served on 127.0.0.1 (skips when `make book` has not run).
* ``voila``: one ``make app`` Voila server on book/ for the whole session (every chapter is a page of it:
  ``voila.url(name)``), instead of one server per test (issue 38: `make check-live` under 8 minutes). Each test
  closes its page with the page's unload (``close_voila_page``), which shuts its kernel down;
  ``voila.kernels()`` lists the server's kernel processes.

The chromium path, its flags, the apt-get fallback, the "is this URL local" rule and the static server come
from tools/check_site.py (imported, not copied).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
SHOTS = ROOT / "_build" / "screenshots"
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))

import check_site  # noqa: E402  (tools/ is not a package)

LAB_START_TIMEOUT_S = 180          # a cold JupyterLab on a busy 2-core machine
#: How often (ms) a test's ``wait_for_function`` looks again. Playwright's default looks at every animation frame,
#: which keeps the page painting 60 frames a second while a kernel works: in JupyterLab that cost about 2.5
#: times the browser's idle CPU (issue 38, `make check-live` cheaper). Every wait is for a kernel or a server.
POLL_MS = 50


# ----------------------------------------------------------------------------- the browser
@pytest.fixture(scope="session")
def chromium():
    """A headless Chromium (Playwright ``Browser``) on Debian's binary; skip, saying why, if there is none."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright is not installed in this venv (`make check-live` installs it)")
    try:
        executable = check_site.find_headless_chromium()
    except RuntimeError as exc:
        pytest.skip(f"no Chromium: {exc}")
    pw = sync_playwright().start()
    try:
        browser = pw.chromium.launch(executable_path=executable, args=check_site.CHROMIUM_ARGS, headless=True)
    except Exception as exc:  # noqa: BLE001  (any launch failure means: no browser here)
        pw.stop()
        pytest.skip(f"Chromium ({executable}) could not be launched: {str(exc).splitlines()[0]}")
    yield browser
    browser.close()
    pw.stop()


def _guard(page) -> list[str]:
    blocked: list[str] = []

    def abort(route, request):
        blocked.append(request.url)
        route.abort()

    def close_ws(ws):
        blocked.append(ws.url)
        ws.close()

    # Requests: only off-machine URLs are routed, matched by the driver (a regular expression, not a Python
    # function: a local request no longer makes a round trip to Python; issue 38, `make check-live` cheaper).
    page.route(check_site.OFF_MACHINE, abort)
    # WebSockets: the same regular expression, so only off-machine ones are routed (closed and recorded); a
    # local one (a kernel's) is the page's own, passed through, not relayed through the driver as a Python
    # function made Playwright do. Under that relay test_voila_frees_the_kernel_of_a_page_that_goes passed
    # where a reader's browser kept the kernel until the culler (issue 38: live38d, voila38e).
    page.route_web_socket(check_site.OFF_MACHINE, close_ws)
    return blocked


@pytest.fixture(scope="session")
def guard_network():
    """``guard_network(page) -> list[str]``: block and record every request that would leave the machine."""
    return _guard


# ----------------------------------------------------------------------------- JupyterLab
class LabServer(NamedTuple):
    base_url: str        # http://127.0.0.1:PORT (no trailing slash)
    token: str


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(base_url: str, token: str, path: str, method: str = "GET", timeout: float = 10):
    req = urllib.request.Request(f"{base_url}{path}", method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        body = resp.read()
    return json.loads(body) if body else None


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (relative path -> digest): compared before and after a run."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and ".ipynb_checkpoints" not in p.parts}


def git_status(path: Path) -> str:
    out = subprocess.run(["git", "status", "--porcelain", "--", str(path)], cwd=ROOT, capture_output=True,
                         text=True)
    return out.stdout if out.returncode == 0 else f"(git status failed: {out.stderr.strip()})"


@pytest.fixture(scope="session")
def book_before():
    """book/ as it was before any browser test ran: file digests and git status."""
    return snapshot(BOOK), git_status(BOOK)


@pytest.fixture(scope="session")
def lab_book(tmp_path_factory, book_before) -> Path:
    """A copy of book/ for JupyterLab to open: running and saving notebooks there never touches book/."""
    copy = tmp_path_factory.mktemp("lab") / "book"
    shutil.copytree(BOOK, copy, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "_build", "__pycache__"))
    return copy


@pytest.fixture(scope="session")
def lab(lab_book, tmp_path_factory):
    """JupyterLab as the workshop runs it: ``make lab`` with LAB_DIR=<copy of book/> and LAB_ARGS for a
    headless, known-port, known-token server whose workspace and user settings live in a temporary folder
    (so neither the user's ~/.jupyter nor earlier runs change what the test sees). Yields (base_url, token);
    at the end the server is shut down through its API (kernels with it), or terminated."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("`make` is not installed: the lab fixture starts JupyterLab through `make lab`")
    state = tmp_path_factory.mktemp("lab-state")
    port, token = _free_port(), secrets.token_hex(16)
    lab_args = " ".join([
        "--no-browser", f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
        f"--LabApp.workspaces_dir={state / 'workspaces'}", f"--LabApp.user_settings_dir={state / 'settings'}",
    ])
    log_path = state / "lab.log"
    log = open(log_path, "wb")
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    # -o: the venv counts as current (`make check-live` has made it so). Without it, a checkout whose
    # requirements.txt is newer than .venv's stamp (a fresh git worktree sharing a venv) had each worker's
    # `make lab` re-run pip, editable install included, pointing the shared venv at that checkout (live38d).
    proc = subprocess.Popen(
        [make, "--no-print-directory", "-C", str(ROOT), "-o", ".venv/.requirements-stamp", "lab",
         f"LAB_DIR={lab_book}", f"LAB_ARGS={lab_args}"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    base_url = f"http://127.0.0.1:{port}"

    def tail() -> str:
        return log_path.read_text(errors="replace")[-3000:]

    deadline = time.monotonic() + LAB_START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            log.close()
            pytest.fail(f"`make lab` exited with {proc.returncode} before JupyterLab was ready:\n{tail()}")
        try:
            _api(base_url, token, "/api/status", timeout=2)
            urllib.request.urlopen(f"{base_url}/lab?token={token}", timeout=10).read()
            break
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            if time.monotonic() > deadline:
                _stop(proc)
                log.close()
                pytest.fail(f"JupyterLab did not answer within {LAB_START_TIMEOUT_S} s:\n{tail()}")
            time.sleep(0.5)
    try:
        yield LabServer(base_url, token)
    finally:
        try:
            _api(base_url, token, "/api/shutdown", method="POST")
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        stop_later(lambda: (_stop(proc), log.close()))


#: The session's servers being stopped (threads), waited for together at the end of the session: JupyterLab
#: and Voila shut down side by side, not one after the other (issue 38: `make check-live` spent about 6.6 s
#: of an idle machine's wall time, lab 2.7 and Voila 3.6, stopping them in turn at the end of each worker).
_STOPPING: list = []


def stop_later(stop) -> None:
    """Run ``stop()`` (it waits for a server to exit) in a thread now; pytest_sessionfinish waits for it."""
    import threading

    thread = threading.Thread(target=stop, daemon=True)
    thread.start()
    _STOPPING.append(thread)


def _stop(proc: subprocess.Popen) -> None:
    """Wait for our `make lab` process group to exit; terminate it (then kill it) if it does not."""
    for sig, wait_s in ((None, 30), (signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        if sig is not None:
            try:
                os.killpg(proc.pid, sig)        # the group make leads (start_new_session): our processes only
            except ProcessLookupError:
                return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def session_ids(server: LabServer) -> set[str]:
    """The ids of ``server``'s kernel sessions now."""
    return {s["id"] for s in _api(server.base_url, server.token, "/api/sessions") or []}


#: Kernel sessions being closed in the background (shutdown_sessions(..., background=True)): threads.
_CLOSING: list = []


def shutdown_sessions(server: LabServer, keep: set[str] = frozenset(), background: bool = False) -> None:
    """Close every kernel session of ``server`` but those in ``keep`` (what closing a notebook and its kernel
    does). With ``background``, the sessions open now are closed in a thread while the caller goes on (issue
    38: the server answers once the kernel is down, about 1 s a notebook); a later call waits for it first."""
    while _CLOSING:
        _CLOSING.pop().join()
    ids = [s["id"] for s in _api(server.base_url, server.token, "/api/sessions") or [] if s["id"] not in keep]

    def close() -> None:
        for sid in ids:
            try:
                _api(server.base_url, server.token, f"/api/sessions/{sid}", method="DELETE", timeout=60)
            except urllib.error.HTTPError as exc:
                if exc.code != 404 or not background:           # (404: gone already)
                    raise

    if background:
        import threading

        thread = threading.Thread(target=close, daemon=True)
        thread.start()
        _CLOSING.append(thread)
    else:
        close()


LAST = "test_book_is_unchanged_after_closing"
_BOOK_AT_START = pytest.StashKey[tuple]()


def _xdist_controller(config) -> bool:
    """True in the process that hands tests to pytest-xdist workers (and runs none itself)."""
    return not hasattr(config, "workerinput") and (config.getoption("numprocesses", None) or 0) != 0


def pytest_sessionstart(session):
    if _xdist_controller(session.config):
        session.config.stash[_BOOK_AT_START] = (snapshot(BOOK), git_status(BOOK))


def pytest_sessionfinish(session, exitstatus):
    """Wait for the servers being stopped (:func:`stop_later`). Under pytest-xdist (`make check-live` runs two
    workers) :data:`LAST` runs last on its worker only, while the other may still be running: so the
    controller checks book/ once more after every worker has finished, and fails the run if it changed."""
    while _CLOSING or _STOPPING:
        (_CLOSING or _STOPPING).pop().join()
    if not _xdist_controller(session.config) or _BOOK_AT_START not in session.config.stash:
        return
    files, status = session.config.stash[_BOOK_AT_START]
    now = snapshot(BOOK)
    changed = sorted(k for k in set(files) | set(now) if files.get(k) != now.get(k))
    if changed or git_status(BOOK) != status:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("FAILED: book/ changed during the browser tests: "
                                f"{changed or git_status(BOOK)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED



@pytest.hookimpl(trylast=True)                 # after pytest has grouped the tests by notebook
def pytest_collection_modifyitems(items):
    """The check that book/ is unchanged runs after every other browser test."""
    items.sort(key=lambda item: item.name == LAST)       # stable: everything else keeps its order


# ----------------------------------------------------------------------------- the built site
class BuiltSite(NamedTuple):
    html: Path           # _build/html
    base_url: str        # http://127.0.0.1:PORT/ (with the trailing slash)


@pytest.fixture(scope="session")
def built_site():
    """_build/html served on 127.0.0.1 for the session; skip when the book has not been built."""
    html = ROOT / "_build" / "html"
    if not (html / "index.html").is_file():
        pytest.skip("no _build/html/index.html: run `make book` first")
    httpd, port = check_site.serve(html)
    yield BuiltSite(html, f"http://127.0.0.1:{port}/")
    httpd.shutdown()


# ----------------------------------------------------------------------------- Voila (make app)
def child_kernels(pid: int) -> list[int]:
    """Process ids of the ipykernel processes whose parent is ``pid`` (read from /proc; [] elsewhere)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"ipykernel" in cmd:
            found.append(int(entry.name))
    return found


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB (VmRSS), 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def process_age_s(pid: int) -> float | None:
    """Seconds since process ``pid`` started (from /proc; None if it is gone or there is no /proc)."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return uptime_s - ticks / os.sysconf("SC_CLK_TCK")


class VoilaServer(NamedTuple):
    base_url: str        # http://127.0.0.1:PORT
    proc: subprocess.Popen
    log_path: Path       # what the server prints (voila_diagnosis reads it)

    def url(self, name: str) -> str:
        import serve_live

        return f"{self.base_url}/voila/render/{serve_live.chapter_notebook(name).name}"

    def kernels(self) -> list[int]:
        return child_kernels(self.proc.pid)

    def kernel_pids(self, kernel_id: str) -> set[int]:
        """The server's kernel processes for ``kernel_id`` (its connection file, kernel-<id>.json, is on the
        process's command line; a kernel jupyter_client restarted keeps its id, in a new process)."""
        found = set()
        for pid in self.kernels():
            try:
                if f"kernel-{kernel_id}".encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.add(pid)
            except OSError:
                pass
        return found


@pytest.fixture(scope="session")
def voila():
    """``make app``'s Voila (tools/serve_live.start_voila) on book/, for the whole session."""
    import serve_live

    # in _build/screenshots (one log per xdist worker), not under pytest's temporary folder: on a machine
    # where other pytest runs go on, they remove older runs' temporary folders, and the log with them (live38:
    # a run's Voila logs were gone minutes after it ended)
    SHOTS.mkdir(parents=True, exist_ok=True)
    log_path = SHOTS / f"voila-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.log"
    log = open(log_path, "wb")
    url, proc = serve_live.start_voila(serve_live.chapter_notebook("00"), log=log, timeout_s=120)
    try:
        yield VoilaServer(url.split("/voila/render/")[0], proc, log_path)
    finally:
        stop_later(lambda: (serve_live._stop(proc), log.close()))


def console_errors(page) -> list[str]:
    """Console errors, uncaught page errors and failed local responses (each with its URL) of ``page``, as
    they come. The browser's "Failed to load resource" console line is left out because the response itself
    is recorded with its URL. Nothing is exempt: a missing favicon is a 404 like any other."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text)
            if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    return errors


def unmended_errors(page, errors: list[str]) -> list[str]:
    """``errors`` (:func:`console_errors`) without Voila's "widget model not found" where the book's page
    mended those widgets (``document.body.dataset.bookWidgetsMended``, set by
    tools/voila/voila/templates/book/index.html.j2 when a widget that gave up on its model is shown from the
    page's widget manager; :func:`voila_page` warns with a :class:`VoilaMendWarning`). The error is Voila's
    race, which the page recovers from (test_live_routes tests the mend itself); any other error stays."""
    if not page.evaluate("() => document.body.dataset.bookWidgetsMended"):
        return list(errors)
    return [e for e in errors if "model not found" not in e]


class VoilaPage(NamedTuple):
    name: str            # the notebook's file name, e.g. 17_long_context.ipynb
    page: object         # the Playwright page, 1280x900, every cell run
    blocked: list[str]   # requests that would have left the machine (guard_network)
    errors: list[str]    # console_errors(page)
    server: object       # the VoilaServer (its log: voila_diagnosis)


#: The viewport a Voila chapter is opened at (a test that needs another resizes the page, then sets it back).
VOILA_VIEWPORT = {"width": 1280, "height": 900}
#: A Voila chapter is opened as by a reader whose system asks for reduced motion: the book's template then
#: keeps Voila's loading spinner still (tools/voila/voila/templates/book). Spinning, it made headless Chromium
#: draw 60 frames a second while the chapter ran, about 5 of the 7.5 CPU-s Chromium spent on loading chapter 8
#: (issue 38: `make check-live` under 8 minutes). No check reads the spinner; the widgets' own busy marks do
#: not depend on the setting. test_live_routes checks the rule works and that the spinner spins otherwise.
VOILA_MOTION = "reduce"


def notebook_cells(path: Path) -> list[dict]:
    """The cells of the notebook at ``path``."""
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def widget_cells(cells: list[dict]) -> list[int]:
    """Indices of the widget cells: the house rule tags them (and only them) nbval-ignore-output."""
    return [i for i, c in enumerate(cells) if "nbval-ignore-output" in c.get("metadata", {}).get("tags", [])]


#: Every widget of a Voila page shows its figure (or its message), n of them: each output that holds one of
#: the book's dashboards has a loaded image in it, or the library's "⚠" message.
JS_WIDGETS_DRAWN = """n => { const cells = Array.from(document.querySelectorAll('#rendered_cells .jp-OutputArea-output'))
  .filter(o => o.querySelector('.llmsizing-dashboard'));
  return cells.length >= n && cells.every(c => {
  const img = c.querySelector('.llmsizing-dashboard img');
  return (img && img.complete && img.naturalWidth > 0) || /⚠/.test(c.innerText); }); }"""
#: Seconds a chapter's Voila page gets to show all its widgets before it is reloaded once (see voila_page)
VOILA_DRAWN_S = 120
#: The Voila server's log lines that tell what happened to a kernel
_KERNEL_LOG = re.compile(r"Shutting down|Culling kernel |Culling '|[Rr]estart|died|dead|Traceback|ERROR|Kernel started")
#: The lines of jupyter_client's restarter (they carry no kernel id), of jupyter_server about a restart, and
#: tools/live/live_kernels.py's line with the exit status of the kernel process that was replaced
_RESTART_LOG = re.compile(r"KernelRestarter|restarted|died|exited with")


class VoilaReloadWarning(UserWarning):
    """A chapter's Voila page did not show its widgets and was reloaded once (reported in the run's summary)."""


class VoilaMendWarning(UserWarning):
    """A chapter's Voila page showed a widget whose output had given up on its model ("model not found") from
    the model its widget manager held (the book template's mend; reported in the run's summary)."""


#: What a Voila page's widget manager holds (``window.jupyterapp.widgetManager``; ``_models`` is its private
#: table of models) and what its kernel holds: the number of widget comms the kernel reports (``comm_info``,
#: 10 s at most).
JS_WIDGET_STATE = """async () => {
  const m = window.jupyterapp && window.jupyterapp.widgetManager;
  if (!m) return {manager: false};
  const k = m.kernel;
  const out = {manager: true, restored: m.restoredStatus, models: Object.keys(m._models || {}).length,
               kernel: k ? k.id : null, status: k ? k.status : null,
               connection: k ? k.connectionStatus : null, kernel_widgets: null};
  if (k && k.connectionStatus === 'connected') {
    try {
      const reply = await Promise.race([k.requestCommInfo({target_name: 'jupyter.widget'}),
        new Promise((_, no) => setTimeout(() => no(new Error('no comm_info reply in 10 s')), 10000))]);
      out.kernel_widgets = Object.keys(reply.content.comms || {}).length;
    } catch (e) { out.kernel_widgets = String(e); }
  }
  return out;
}"""


def widget_verdict(state: dict) -> str:
    """What :data:`JS_WIDGET_STATE`'s answer means. A manager that finished restoring with no model, from a
    kernel that holds no widget either, talks to a kernel that never ran the chapter: one that died and that
    jupyter_client's restarter replaced, empty, under the same id (voila38n reproduced the page's "Error
    displaying widget: model not found" and its one console error exactly so). A kernel that holds more
    widgets than the manager restored points at the page's restore instead."""
    if not state.get("manager"):
        return "no widget manager on the page"
    kernel_widgets = state.get("kernel_widgets")
    if not isinstance(kernel_widgets, int):
        return f"the kernel was not asked ({kernel_widgets or state.get('connection')})"
    if state.get("restored") and kernel_widgets == 0:
        return ("the kernel holds no widget: it is not the kernel that ran the chapter (a kernel that died, "
                "restarted empty under the same id)")
    if kernel_widgets > state.get("models", 0):
        return "the kernel holds widgets the page's manager did not restore (the page's restore)"
    return "the manager holds the kernel's widgets"


def voila_diagnosis(page, errors: list[str], voila, asked_at: float | None = None) -> str:
    """What a Voila page whose widgets did not show says about why: the text of its outputs that show no
    widget ("Error displaying widget: model not found", "Loading widget..."), its last console errors, what
    its widget manager and its kernel hold (:func:`widget_verdict`), how long ago the page's kernel process
    started (against ``asked_at``, the ``time.time()`` the page was asked for: a kernel restarted after it ran
    the chapter started later than the page), and the server's log lines about kernels (every restart, then
    the last lines about kernels started, shut down, culled or dead)."""
    try:
        shown = page.evaluate("""() => Array.from(document.querySelectorAll('#rendered_cells .jp-OutputArea-output'))
          .map(o => o.innerText).filter(t => /Error displaying|Loading widget/.test(t)).map(t => t.slice(0, 120))""")
    except Exception as exc:                       # (a page that crashed says so)
        shown = [f"page not readable: {exc}"]
    try:
        state = page.evaluate(JS_WIDGET_STATE)
        kernel = f"widget manager and kernel: {state}, so {widget_verdict(state)}"
    except Exception as exc:
        state, kernel = {}, f"widget manager not readable: {exc}"
    if state.get("kernel"):
        ages = sorted(a for a in map(process_age_s, voila.kernel_pids(state["kernel"])) if a is not None)
        asked = f", the page asked for {time.time() - asked_at:.0f} s ago" if asked_at else ""
        kernel += f"; its kernel process started {[round(a) for a in ages]} s ago{asked}"
    try:
        lines = voila.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        restarts = [line[:200] for line in lines if _RESTART_LOG.search(line)][-4:]
        log = restarts + [line[:200] for line in lines if _KERNEL_LOG.search(line)
                          and line[:200] not in restarts][-8:]
    except OSError as exc:
        log = [str(exc)]
    return (f"outputs without their widget: {shown}; last console errors: {[e[:300] for e in errors[-4:]]}; "
            f"{kernel}; Voila's log about kernels: {log}")


@pytest.fixture(scope="session")
def voila_page(request, chromium, guard_network, voila):
    """Chapter ``request.param`` (its notebook's file name; parametrize indirectly) opened once in the
    session's Voila and shared by every Voila test of that chapter (issue 38: each chapter's cells run once,
    not once per test). pytest runs the tests of one chapter together; the page is left (its kernel freed)
    when the next chapter is asked for, or at the end.

    A chapter page whose widgets do not all show within :data:`VOILA_DRAWN_S` is reloaded once, as a reader
    would, and the run says so (a :class:`VoilaReloadWarning` in the warnings summary, with
    :func:`voila_diagnosis`); the tests then fail if the reloaded page does not show them either. Three times
    in about a dozen loaded runs of `make check-live` (chapters 11, 15 and 17; CI once) one page load never
    showed its widgets: the page said "Error displaying widget: model not found" (Voila's widget manager found
    no model for an output the kernel had displayed) and stayed so for minutes; the next load of the same
    chapter worked. No idle run has shown it; the diagnosis is there to find its cause."""
    page = chromium.new_page(viewport=VOILA_VIEWPORT, reduced_motion=VOILA_MOTION)
    blocked = guard_network(page)
    errors = console_errors(page)
    count = len(widget_cells(notebook_cells(BOOK / request.param)))
    try:
        for attempt in (1, 2):
            asked_at = time.time()
            page.goto(voila.url(request.param), wait_until="load", timeout=240_000)
            page.wait_for_selector("#rendered_cells", state="visible", timeout=240_000)
            if not count or attempt == 2:
                break
            try:
                page.wait_for_function(JS_WIDGETS_DRAWN, arg=count, timeout=VOILA_DRAWN_S * 1000,
                                       polling=POLL_MS)
                mended = page.evaluate("() => document.body.dataset.bookWidgetsMended")
                if mended:
                    warnings.warn(VoilaMendWarning(
                        f"{request.param}: {mended} widget(s) had given up on their model and were shown from "
                        f"the page's widget manager. {voila_diagnosis(page, errors, voila, asked_at)}"))
                break
            except Exception:
                warnings.warn(VoilaReloadWarning(
                    f"{request.param}: {count} widget(s) not shown {VOILA_DRAWN_S} s after the page loaded; "
                    f"reloaded once. {voila_diagnosis(page, errors, voila, asked_at)}"))
                errors.clear()                     # (the reloaded page's own errors are what the tests read)
        yield VoilaPage(request.param, page, blocked, errors, voila)
    finally:
        close_voila_page(page)


def close_voila_page(page) -> None:
    """Leave a Voila page as a reader does, then close it. The page unloads: its beacon asks Voila to shut its
    kernel down, and its kernel WebSocket closes, after which Voila shuts the kernel down within CLOSE_GRACE_S
    (tools/voila/config/voila.py; a page left before its WebSocket opened: UNCONNECTED_GRACE_S after the
    kernel's last activity). Under the guard's request interception headless Chromium drops the beacon
    (voila38e), so here the WebSocket's close is what frees the kernel."""
    try:
        page.goto("about:blank", wait_until="load", timeout=30_000)
    finally:
        page.close()
