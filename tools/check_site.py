#!/usr/bin/env python3
"""Check the built site the way a reader sees it, in headless Chromium.

    make check-site        # after `make book`
    python tools/check_site.py --static   # no browser; run by `make book`
    python tools/check_site.py --html DIR # check another build (e.g. main's)

Serves _build/html on 127.0.0.1 (random port), opens every chapter page of
_toc.yml in Debian's Chromium (/usr/bin/chromium, installed with apt-get if
missing) driven by Playwright from PyPI (no browser download), and fails if

* any request leaves localhost (they are also blocked, so none gets out),
* any local request fails or answers >= 400 (a missing asset),
* a page with math has no MathJax output (``mjx-container``) or has a TeX
  error (``mjx-merror``) or an undefined macro (shown in red by MathJax),
* an image did not load,
* a widget view or widget control is in the DOM (widget cells must be tagged
  remove-output; the static site shows no dead controls),
* the page raised an uncaught JavaScript error, or logged an error to the
  console (``console.error``, failed resources, CSP/parse errors),
* a figure (an ``<img>`` in a notebook cell's output) has no alt text, or only
  Sphinx's fallback (the image's file name).

A full-page PNG screenshot of each page goes to _build/screenshots/.

With ``--static`` no browser is used: the built HTML and CSS are parsed for
anything fetched from off the site (script/img/iframe/stylesheet/... URLs,
CSS url()/@import), rendered widget views, images without alt text, and math
pages that do not load the vendored MathJax. `make book` runs this mode. The browser check runs in CI through
tests/browser/test_site.py (`make check-live`), which calls find_chromium(), serve() and check_page() from here.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
if "--html" in sys.argv[1:]:
    HTML = Path(sys.argv[sys.argv.index("--html") + 1]).resolve()
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
# The JupyterLite copy of the book (tools/build_lite.py, linked from every chapter as "Run live in your
# browser") is exempt from the no-off-site-request rule, and only it: its Pyodide kernel loads Python, numpy,
# pandas and matplotlib from the jsDelivr CDN when a reader opens it (real readers are online; nothing on the
# normal pages requests it). The normal pages are still checked, including that they do not embed lite/.
LITE = "lite/"


#: One apt-get at a time: the browser tests' xdist workers each look for Chromium when they start, and two
#: apt-get runs at once fail on dpkg's lock (exit 100: the tests were then skipped as "no Chromium").
APT_LOCK = Path(os.environ.get("TMPDIR", "/tmp")) / "llmsizing-apt.lock"


def _apt_install(package: str) -> None:
    """``apt-get update`` and ``apt-get install package`` (root only), one process at a time (a file lock;
    dpkg's own lock is waited for up to 10 minutes); a package another process installed meanwhile is not
    installed again. Raises CalledProcessError when apt-get fails."""
    import fcntl

    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    wait = ["-o", "DPkg::Lock::Timeout=600"]
    with open(APT_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if subprocess.run(["dpkg", "-s", package], capture_output=True).returncode == 0:
            return
        print(f"installing Debian {package} (apt-get) ...", flush=True)
        subprocess.run(["apt-get", *wait, "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", *wait, "install", "-y", "-qq", package], check=True, env=env)


def find_chromium() -> str:
    """The Chromium to drive: $CHROMIUM (default /usr/bin/chromium), else ``chromium`` on PATH, else Debian's
    package installed with apt-get (only as root). Raises RuntimeError saying why when there is none."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError(
            f"Chromium not found ({CHROMIUM} missing, no `chromium` on PATH) and it cannot be installed here "
            "(needs root and apt-get): install Debian's 'chromium' package (apt-get install chromium)"
        )
    try:
        _apt_install("chromium")
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"apt-get could not install Debian's chromium: {exc}") from exc
    found = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if not found:
        raise RuntimeError(f"apt-get installed chromium, but neither {CHROMIUM} nor `chromium` on PATH exists")
    return found


#: Debian's build of Chromium's old headless mode (package chromium-headless-shell, same version as chromium):
#: what Playwright itself drives for headless Chromium. Since Chromium 132 ``chromium --headless`` is the full
#: browser without a window, whose browser and GPU processes cost about 20 % more CPU in `make check-live`
#: (issue 38: 59 against 72 CPU-s of Chromium for the same 31 tests, measured alternately).
HEADLESS_SHELL = os.environ.get("CHROMIUM_HEADLESS_SHELL", "/usr/bin/chromium-headless-shell")


def find_headless_chromium() -> str:
    """The Chromium to drive headless: Debian's chromium-headless-shell ($CHROMIUM_HEADLESS_SHELL), installed
    with apt-get when missing and we are root; else :func:`find_chromium` (the same engine in the full
    browser's headless mode). $CHROMIUM, when set, is used as it is."""
    if "CHROMIUM" in os.environ:
        return find_chromium()
    found = HEADLESS_SHELL if Path(HEADLESS_SHELL).exists() else shutil.which("chromium-headless-shell")
    if not found and os.geteuid() == 0 and shutil.which("apt-get"):
        try:
            _apt_install("chromium-headless-shell")
        except subprocess.CalledProcessError as exc:
            print(f"apt-get could not install chromium-headless-shell ({exc}): the full chromium instead",
                  flush=True)
        found = HEADLESS_SHELL if Path(HEADLESS_SHELL).exists() else shutil.which("chromium-headless-shell")
    return found or find_chromium()


def ensure_chromium() -> str:
    """find_chromium() for the script: exits with the reason when there is no Chromium."""
    try:
        return find_chromium()
    except RuntimeError as exc:
        sys.exit(str(exc))


def chapter_pages() -> list[str]:
    sys.path.insert(0, str(ROOT / "tools"))
    from refresh_outputs import toc_notebooks

    return [nb.relative_to(ROOT).with_suffix(".html").as_posix() for nb in toc_notebooks()]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the report readable
        pass


def serve(html: Path | None = None) -> tuple[http.server.ThreadingHTTPServer, int]:
    """Serve ``html`` (default: the built site) on 127.0.0.1, on a free port, from a daemon thread."""
    handler = functools.partial(_QuietHandler, directory=str(html or HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, httpd.server_address[1]


LOCAL_SCHEMES = ("data", "blob", "about", "chrome-error", "javascript")


def is_local(url: str) -> bool:
    u = urlparse(url)
    if u.scheme in LOCAL_SCHEMES:
        return True
    return (u.hostname or "") in LOCAL_HOSTS


#: The URLs :func:`is_local` refuses, as one regular expression (Python and JavaScript read it alike). Given
#: to Playwright's ``route`` instead of a Python function, the browser driver sends only these to Python;
#: with a function every request made the round trip (issue 38: `make check-live` cheaper).
#: tests/browser/test_site.py checks that it agrees with is_local.
OFF_MACHINE = re.compile(
    r"^(?!(?:data|blob|about|chrome-error|javascript):)"
    r"(?![a-z][a-z0-9+.-]*://(?:[^/?#]*@)?(?:127\.0\.0\.1|localhost|\[::1\])(?::\d*)?(?:[/?#]|$))",
    re.IGNORECASE,
)


def _router(problems: list[str]):
    """Record and abort a request off the machine (routed for :data:`OFF_MACHINE` only)."""

    def route(route, request):
        problems.append(f"off-localhost request blocked: {request.url}")
        route.abort()

    return route


# Runs in the page: widget leftovers and broken images.
PAGE_PROBE = """() => ({
  widgetViews: document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"], .jupyter-widgets, .widget-slider, .widget-dropdown, .widget-button'
  ).length,
  brokenImages: Array.from(document.images)
    .filter(img => !(img.complete && img.naturalWidth > 0))
    .map(img => img.getAttribute('src')),
  images: document.images.length,
  figuresWithoutAlt: Array.from(document.querySelectorAll('.cell_output img'))
    .filter(img => {
      const alt = (img.getAttribute('alt') || '').trim();
      // Sphinx's fallback alt is the image's own path: no description at all
      return !alt || alt === img.getAttribute('src') || /\\.(png|jpe?g|gif|svg|webp)$/i.test(alt);
    })
    .map(img => img.getAttribute('src')),
  mathSource: document.querySelectorAll('span.math, div.math').length,
  mathRendered: document.querySelectorAll('mjx-container').length,
  mathUntypeset: Array.from(document.querySelectorAll('span.math, div.math'))
    .filter(e => !e.querySelector('mjx-container'))
    .map(e => e.textContent.trim().slice(0, 80)).slice(0, 5),
  mathErrors: Array.from(document.querySelectorAll(
      'mjx-merror, mjx-container [style*="color: red"]'))
    .map(e => e.getAttribute('data-mjx-error')
      || (e.closest('mjx-container').querySelector('mjx-assistive-mml') || e).textContent
      || 'TeX error').slice(0, 5),
})"""


def _console(msg, problems: list[str]) -> None:
    """Record console errors (console.error, failed loads, syntax errors) as problems."""
    if msg.type != "error":
        return
    loc = msg.location or {}
    where = f" ({loc.get('url', '')}:{loc.get('lineNumber', '')})" if loc.get("url") else ""
    problems.append(f"console error: {msg.text}{where}")


IMAGE_FILE = re.compile(r"\.(png|jpe?g|gif|svg|webp)$", re.I)


def _has_description(alt: str | None, src: str | None) -> bool:
    """False for a missing alt and for Sphinx's fallback alt (the image's own path)."""
    alt = (alt or "").strip()
    return bool(alt) and alt != (src or "").strip() and not IMAGE_FILE.search(alt)


class _RefCollector(HTMLParser):
    """Collects URLs the browser would fetch by itself (not plain <a href> links)."""

    FETCHING = {
        "script": ("src",),
        "img": ("src", "srcset"),
        "iframe": ("src",),
        "source": ("src", "srcset"),
        "video": ("src", "poster"),
        "audio": ("src",),
        "embed": ("src",),
        "object": ("data",),
        "input": ("src",),
    }

    def __init__(self):
        super().__init__()
        self.refs: list[str] = []
        self.widget_views = 0
        self.math = 0
        self.images_without_alt: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img" and not _has_description(a.get("alt"), a.get("src")):
            self.images_without_alt.append(a.get("src") or "?")
        for name in self.FETCHING.get(tag, ()):
            if a.get(name):
                self.refs.append(a[name])
        if tag == "link" and a.get("href"):
            rel = (a.get("rel") or "").lower()
            if any(r in rel for r in ("stylesheet", "preload", "icon", "modulepreload", "prefetch", "manifest")):
                self.refs.append(a["href"])
        if tag == "script" and a.get("type") == "application/vnd.jupyter.widget-view+json":
            self.widget_views += 1
        if tag in ("span", "div") and "math" in (a.get("class") or "").split():
            self.math += 1


EXTERNAL = re.compile(r"^\s*(https?:)?//", re.I)
CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])\s*((?:https?:)?//[^'")\s]+)""", re.I)


def static_check() -> int:
    """Browser-free check of the built HTML/CSS (run by `make book` and so by CI)."""
    problems: list[str] = []
    pages = 0
    for html in sorted(HTML.rglob("*.html")):
        rel = html.relative_to(HTML).as_posix()
        if rel.startswith("_static/"):
            continue  # vendored docs/demo pages, never linked
        if rel.startswith(LITE):
            continue  # the JupyterLite app: see LITE
        pages += 1
        parser = _RefCollector()
        parser.feed(html.read_text(encoding="utf-8", errors="replace"))
        for ref in parser.refs:
            if EXTERNAL.match(ref):
                problems.append(f"{rel}: loads {ref}")
        if parser.images_without_alt:
            problems.append(f"{rel}: images without alt text: {parser.images_without_alt}")
        if parser.widget_views:
            problems.append(f"{rel}: {parser.widget_views} widget view(s) rendered (tag widget cells remove-output)")
        mathjax = [r for r in parser.refs if "vendor/mathjax/" in r]
        if len(mathjax) > 1:  # one bundle; its components loaded again break it (console errors)
            problems.append(f"{rel}: loads {len(mathjax)} MathJax scripts (only tex-chtml.js expected)")
        if parser.math and not mathjax:
            problems.append(f"{rel}: has math but does not load the local MathJax")
    for css in sorted(HTML.rglob("*.css")):
        if css.relative_to(HTML).as_posix().startswith(LITE):
            continue
        for m in CSS_URL.finditer(css.read_text(encoding="utf-8", errors="replace")):
            problems.append(f"{css.relative_to(HTML).as_posix()}: fetches {m.group(1)}")
    for p in problems:
        print(f"  - {p}")
    print(f"static site check: {pages} pages, {len(problems)} problem(s)")
    return 1 if problems else 0


#: The network counts as idle once no request of the page has been open for QUIET_S (Playwright's
#: "networkidle" rule: 500 ms), waited for at most QUIET_TIMEOUT_S after the page's load.
QUIET_S = 0.5
QUIET_TIMEOUT_S = 30.0


def open_requests(page) -> dict[str, int]:
    """The requests of ``page`` still open (URL -> count), kept up to date by its request events."""
    pending: dict[str, int] = {}

    def done(req) -> None:
        if pending.get(req.url, 0) > 1:
            pending[req.url] -= 1
        else:
            pending.pop(req.url, None)

    page.on("request", lambda req: pending.__setitem__(req.url, pending.get(req.url, 0) + 1))
    page.on("requestfinished", done)
    page.on("requestfailed", done)
    return pending


def wait_network_quiet(page, pending: dict[str, int], timeout_s: float = QUIET_TIMEOUT_S) -> bool:
    """Wait until ``pending`` (the page's open requests: :func:`open_requests`) has been empty for QUIET_S;
    False if it has not after ``timeout_s``. (Issue 38: Playwright's own "networkidle"
    timed out under load with no request open that the page had seen, 30 s lost each time; this is the same
    rule on the requests the page makes, so a request still open names itself in the problem.)"""
    import time

    deadline = time.monotonic() + timeout_s
    quiet_since = None
    while True:
        now = time.monotonic()
        if pending:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= QUIET_S:
            return True
        if now > deadline:
            return False
        page.wait_for_timeout(50)          # the page's events are handled while Playwright waits


def check_page(browser, url: str, shot: Path | None = None, full_page: bool = True) -> tuple[list[str], dict]:
    """Open ``url`` in a fresh context of ``browser`` (a Playwright Browser) and return the problems found on
    it (empty: the page passes) and what PAGE_PROBE saw. Requests off localhost are blocked and reported.
    ``shot``: where to save a screenshot, of the whole page or (``full_page=False``) of its first screen.
    Used by main() and by tests/browser/test_site.py."""
    problems: list[str] = []
    context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    try:
        context.route(OFF_MACHINE, _router(problems))
        page = context.new_page()
        page.on("pageerror", lambda exc: problems.append(f"JavaScript error: {exc}"))
        page.on("console", lambda msg: _console(msg, problems))
        page.on(
            "response",
            lambda resp: problems.append(f"HTTP {resp.status}: {resp.url}") if resp.status >= 400 else None,
        )
        page.on(
            "requestfailed",
            lambda req: problems.append(f"request failed: {req.url} ({req.failure})") if is_local(req.url) else None,
        )
        pending = open_requests(page)
        page.goto(url, wait_until="load", timeout=60_000)
        info = page.evaluate(PAGE_PROBE)
        if info["mathSource"]:
            try:
                page.wait_for_selector("mjx-container", state="attached", timeout=30_000)
                # give MathJax time to finish every expression on the page
                page.wait_for_function(
                    "() => !window.MathJax || !MathJax.startup || !MathJax.startup.promise"
                    " || MathJax.startup.promise.then(() => true)",
                    timeout=30_000,
                )
            except Exception:
                problems.append("page has math but MathJax rendered nothing (no mjx-container)")
        if not wait_network_quiet(page, pending):
            problems.append(f"the network was not idle {QUIET_TIMEOUT_S:.0f} s after the page loaded; "
                            f"requests open: {sorted(pending)[:10]}")
        info = page.evaluate(PAGE_PROBE)
        if info["mathUntypeset"]:
            problems.append(f"math left untypeset: {info['mathUntypeset']}")
        if info["mathErrors"]:
            problems.append(f"MathJax errors: {info['mathErrors']}")
        if info["brokenImages"]:
            problems.append(f"images that did not load: {info['brokenImages']}")
        if info["figuresWithoutAlt"]:
            problems.append(f"figures without alt text: {info['figuresWithoutAlt']}")
        if info["widgetViews"]:
            problems.append(
                f"{info['widgetViews']} widget view(s)/control(s) on the static page "
                "(tag widget cells `remove-output`)"
            )
        if shot is not None:
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=full_page)
    finally:
        context.close()
    return problems, info


def main() -> int:
    if not (HTML / "index.html").exists():
        sys.exit("no _build/html: run `make book` first")
    if "--static" in sys.argv[1:]:
        return static_check()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sys.exit("playwright missing: `make check-site` installs it into .venv")
    chromium = ensure_chromium()
    pages = chapter_pages()
    SHOTS.mkdir(parents=True, exist_ok=True)
    httpd, port = serve()
    base = f"http://127.0.0.1:{port}/"
    failures: dict[str, list[str]] = {}

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        for rel in pages:
            shot = SHOTS / (Path(rel).stem + ".png")
            problems, info = check_page(browser, base + rel, shot)
            status = "FAIL" if problems else "ok  "
            print(
                f"{status} {rel}: math {info['mathRendered']}/{info['mathSource']}, "
                f"images {info['images']}, screenshot {shot.relative_to(ROOT)}"
            )
            for p in problems:
                print(f"     - {p}")
            if problems:
                failures[rel] = problems
        browser.close()
    httpd.shutdown()

    print(f"check-site: {len(pages) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
