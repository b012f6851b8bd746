"""Minimal browser fixtures for tests/browser (stand-in: the `browser` branch brings the full conftest with the
same names; keep that one at merge).

* ``chromium``: a Playwright Browser on Debian's /usr/bin/chromium (env CHROMIUM overrides); skips with the
  reason when Playwright or Chromium is missing or does not start.
* ``guard_network(page) -> list[str]``: aborts and records every request whose host is not loopback.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pytest

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]


@pytest.fixture(scope="session")
def chromium():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (make check-live installs it into .venv)")
    path = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not Path(path).exists():
        path = shutil.which("chromium") or ""
    if not path:
        pytest.skip("Chromium not found: apt-get install chromium (or set CHROMIUM)")
    pw = sync_playwright().start()
    try:
        browser = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, headless=True)
    except Exception as exc:  # pragma: no cover - depends on the machine
        pw.stop()
        pytest.skip(f"Chromium at {path} did not start: {exc}")
    yield browser
    browser.close()
    pw.stop()


def _is_local(url: str) -> bool:
    u = urlparse(url)
    if u.scheme in ("data", "blob", "about", "chrome-error", "javascript"):
        return True
    return (u.hostname or "") in LOCAL_HOSTS


def guard_network(page) -> list[str]:
    """Abort every request that would leave the machine; return the (live) list of what was blocked."""
    blocked: list[str] = []

    def route(route, request):
        if _is_local(request.url):
            route.continue_()
        else:
            blocked.append(request.url)
            route.abort()

    page.route("**/*", route)
    return blocked
