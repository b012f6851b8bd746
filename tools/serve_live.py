#!/usr/bin/env python3
"""Serve the built site with live code (``make serve-live``) or one chapter as a Voila app (``make app``).

    python tools/serve_live.py              # site on 127.0.0.1 + a Jupyter server on 127.0.0.1
    python tools/serve_live.py app 07       # chapter 07 as a Voila app on 127.0.0.1 (CH=07_data_parallelism,
                                            # or a path to a notebook, work too)

serve-live starts two local servers and makes no off-machine request:

* a Jupyter server (``jupyter server``) bound to 127.0.0.1 on a free port, with a random token (passed in its
  environment, so ``ps`` does not show it), root folder book/ (so kernels start with cwd book/, as for
  ``make lab`` and nbval), CORS (``allow_origin``) set to the site's origin only (the only origin whose pages
  may talk to it), and idle kernels culled (tools/live/live_kernels.py: 10 minutes after the reader left the
  page, 2 hours if the page is still open);
* an HTTP server for _build/html on 127.0.0.1 that injects ``window.BOOK_LIVE`` (server URL and token) into
  every HTML page it sends. _assets/live-code.js shows its "Live code" button only when that object exists,
  so the static site (and ``make check-site``) never shows a dead control.

Both are meant for ONE reader on their own machine. Never bind them to 0.0.0.0 and never hand the URL with
the token to a room: the token is the right to run any code as your user (README, "Running a workshop").

The functions :func:`start_jupyter`, :func:`serve_site` and :func:`start_voila` are reused by
tests/browser/test_live_routes.py.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
BOOK = ROOT / "book"
VOILA_DIR = ROOT / "tools" / "voila"
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _kernel_env() -> dict:
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # a non-inline backend silently drops every figure
    return env


def _wait_http(url: str, proc: subprocess.Popen, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status < 400:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    proc.terminate()
    raise RuntimeError(f"{what} not ready after {timeout_s:.0f} s ({url})")


#: serve-live's Jupyter server configuration: kernel culling (tools/live/live_kernels.py)
LIVE_SERVER_CONFIG = ROOT / "tools" / "live" / "jupyter_server_config.py"


def jupyter_command(site_origin: str, *, root_dir: Path = BOOK, port: int, token: str) -> tuple[list[str], dict]:
    """The command line and the environment of serve-live's Jupyter server: ``(cmd, env)``.

    The token goes in the environment (``JUPYTER_TOKEN``, which jupyter_server's IdentityProvider reads), never
    on the command line, where ``ps`` would show it to every user of the machine. Kernels are culled when idle
    (``--config``: tools/live/jupyter_server_config.py)."""
    if not site_origin.startswith(("http://127.0.0.1:", "http://localhost:")):
        raise ValueError(f"site_origin: must be a loopback origin such as http://127.0.0.1:8000, got {site_origin!r}")
    cmd = [
        sys.executable, "-m", "jupyter_server",
        f"--config={LIVE_SERVER_CONFIG}",
        f"--ServerApp.ip={HOST}", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        "--ServerApp.open_browser=False",
        f"--ServerApp.root_dir={root_dir}",
        f"--ServerApp.allow_origin={site_origin}",
        "--ServerApp.terminals_enabled=False",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    env = _kernel_env()
    env.pop("JUPYTER_TOKEN_FILE", None)
    env["JUPYTER_TOKEN"] = token
    return cmd, env


def start_jupyter(site_origin: str, *, root_dir: Path = BOOK, port: int | None = None,
                  token: str | None = None, timeout_s: float = 60, log=subprocess.DEVNULL
                  ) -> tuple[str, str, subprocess.Popen]:
    """Start a Jupyter server on 127.0.0.1 for pages from ``site_origin`` (e.g. http://127.0.0.1:8000).

    Returns ``(url, token, process)``; the caller terminates the process. Kernels start in ``root_dir``
    (book/). Only ``site_origin`` passes the server's CORS and websocket origin checks. See
    :func:`jupyter_command` for the token and the culling of idle kernels."""
    port = port or free_port()
    token = token or secrets.token_hex(24)
    cmd, env = jupyter_command(site_origin, root_dir=root_dir, port=port, token=token)
    proc = subprocess.Popen(cmd, cwd=root_dir, env=env, stdout=log, stderr=log)
    url = f"http://{HOST}:{port}"
    _wait_http(f"{url}/api/status?token={token}", proc, timeout_s, "jupyter server")
    return url, token, proc


class _LiveHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the built site; HTML pages get ``window.BOOK_LIVE`` when the server has a live config."""

    live_config: dict | None = None

    def log_message(self, *args):  # quiet
        pass

    def send_head(self):
        path = self.translate_path(self.path)
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")
        config = getattr(self.server, "live_config", None)
        if not config or not path.endswith(".html") or not os.path.isfile(path):
            return super().send_head()
        body = Path(path).read_bytes()
        script = f"<script>window.BOOK_LIVE = {json.dumps(config)};</script>".encode()
        body = body.replace(b"</head>", script + b"</head>", 1)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        import io

        return io.BytesIO(body)


def serve_site(html_dir: Path = HTML, *, port: int = 0, live_config: dict | None = None
               ) -> tuple[str, http.server.ThreadingHTTPServer]:
    """Serve ``html_dir`` on 127.0.0.1 in a daemon thread; returns ``(url, server)``.

    Set ``server.live_config`` (``{"serverUrl", "token", ...}``) to make its pages show "Live code"."""
    if not (Path(html_dir) / "index.html").exists():
        raise FileNotFoundError(f"html_dir: no index.html in {html_dir} (run `make book` first)")
    handler = functools.partial(_LiveHandler, directory=str(html_dir))
    httpd = http.server.ThreadingHTTPServer((HOST, port), handler)
    httpd.live_config = live_config
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://{HOST}:{httpd.server_address[1]}", httpd


def live_config(server_url: str, token: str, root_dir: Path = BOOK, html_dir: Path = HTML) -> dict:
    """What live-code.js needs: the server, its token, and the page folder that maps to the server's root."""
    try:
        notebook_dir = Path(root_dir).resolve().relative_to(ROOT).as_posix() + "/"
    except ValueError:
        notebook_dir = ""
    return {"serverUrl": server_url, "token": token, "kernelName": "python3", "notebookDir": notebook_dir}


def chapter_notebook(spec: str) -> Path:
    """``07``, ``07_data_parallelism``, ``book/07_data_parallelism.ipynb`` or a path -> the notebook."""
    spec = (spec or "").strip()
    if not spec:
        raise ValueError("CH: give a chapter, e.g. CH=07, CH=07_data_parallelism or CH=book/07_data_parallelism.ipynb")
    path = Path(spec)
    if path.suffix == ".ipynb" and (path.exists() or (ROOT / path).exists()):
        return (path if path.exists() else ROOT / path).resolve()
    matches = sorted(BOOK.glob(f"{path.stem}*.ipynb")) if path.stem else []
    exact = [m for m in matches if m.stem == path.stem]
    if exact:
        return exact[0]
    if len(matches) == 1:
        return matches[0]
    names = ", ".join(p.stem for p in sorted(BOOK.glob("*.ipynb")))
    raise ValueError(f"CH: {spec!r} matches {len(matches)} chapters; one of: {names}")


def start_voila(notebook: Path, *, port: int | None = None, timeout_s: float = 60, log=subprocess.DEVNULL
                ) -> tuple[str, subprocess.Popen]:
    """Start Voila on 127.0.0.1 on the notebook's folder; returns ``(url of the notebook's app, process)``.

    Voila serves the whole folder (book/), so a link from one chapter to another (``07_data_parallelism.ipynb``)
    opens that chapter as an app too; kernels start in that folder. tools/voila/config/voila.py turns the
    chapters' MyST prose into Markdown with the kernel's numbers (tools/voila/myst_voila.py) and loads only
    the widgets' extension into the page."""
    notebook = Path(notebook).resolve()
    if not notebook.is_file():
        raise FileNotFoundError(f"notebook: {notebook} does not exist")
    port = port or free_port()
    voila = Path(sys.executable).with_name("voila")
    cmd = [
        str(voila), str(notebook.parent), f"--Voila.ip={HOST}", f"--port={port}", "--no-browser",
        "--show_tracebacks=False",
        f"--Voila.config_file_paths={VOILA_DIR / 'config'}",
        # tools/voila/voila/templates/book: Voila's lab template minus its Font Awesome CDN stylesheets
        "--template=book",
        "--VoilaConfiguration.show_margins=True",
    ]
    env = _kernel_env()
    env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(VOILA_DIR), env.get("JUPYTER_PATH")]))
    proc = subprocess.Popen(cmd, cwd=notebook.parent, env=env, stdout=log, stderr=log)
    url = f"http://{HOST}:{port}/voila/render/{urllib.parse.quote(notebook.name)}"
    # Voila has no unauthenticated status endpoint; its own static files answer once it is up
    _wait_http(f"http://{HOST}:{port}/voila/static/voila.js", proc, timeout_s, "voila")
    return url, proc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _serve_until_interrupted(proc: subprocess.Popen, *also_stop) -> int:
    """Wait for ``proc`` (a Jupyter or Voila server) until it exits or Ctrl-C; then stop it and call each of
    ``also_stop`` (e.g. the site server's shutdown)."""
    try:
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        _stop(proc)
        for stop in also_stop:
            stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["app"]:
        try:
            notebook = chapter_notebook(argv[1] if len(argv) > 1 else "")
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        url, proc = start_voila(notebook, log=None)
        print(f"Voila: {notebook.relative_to(ROOT)} at {url}  (127.0.0.1 only; Ctrl-C to stop)", flush=True)
        return _serve_until_interrupted(proc)
    port = int(os.environ.get("PORT", "8000"))
    try:
        site_url, httpd = serve_site(HTML, port=port)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    server_url, token, proc = start_jupyter(site_url, log=None)
    httpd.live_config = live_config(server_url, token)
    print(f"Site with live code: {site_url}/  (Jupyter server {server_url}, kernels in book/; Ctrl-C to stop)",
          flush=True)
    return _serve_until_interrupted(proc, httpd.shutdown)


if __name__ == "__main__":
    sys.exit(main())
