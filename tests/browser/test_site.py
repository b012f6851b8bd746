"""The built site (_build/html) in headless Chromium: the checks of tools/check_site.py, as tests.

Each chapter page of _toc.yml is loaded by ``check_site.check_page`` (called, not copied): math typeset by
the vendored MathJax (``mjx-container``, no ``mjx-merror``), every image loaded and every figure described
(alt text), no console or JavaScript error, no failed local request, no request off 127.0.0.1 (blocked and
reported), no widget view or control on the static page. A screenshot of each page's first screen goes to
_build/screenshots/site-<page>.png (issue 38: a full-page one, of the whole chapter, doubled the CPU of
each page's check, about 4.5 CPU-s a page; `make check-site` still saves full-page screenshots).
The browser-free static check (run by `make book`) is repeated here so a stale build cannot pass.
"""

from __future__ import annotations

from pathlib import Path

import check_site
import pytest
from conftest import SHOTS

PAGES = check_site.chapter_pages()


@pytest.mark.parametrize("rel", PAGES, ids=[Path(p).stem for p in PAGES])
def test_page_renders_offline(chromium, built_site, rel):
    if not (built_site.html / rel).is_file():
        pytest.fail(f"{rel} is in _toc.yml but not in the built site: rebuild with `make book`")
    problems, info = check_site.check_page(chromium, built_site.base_url + rel, SHOTS / f"site-{Path(rel).stem}.png",
                                           full_page=False)
    assert not problems, f"{rel}:\n  " + "\n  ".join(problems)
    assert info["mathSource"] == 0 or info["mathRendered"] > 0, f"{rel}: math not typeset"


def test_guard_blocks_and_records_off_machine_requests(chromium, guard_network, built_site):
    """The guard the other browser tests rely on: a page asking for an outside image and script gets neither,
    and both URLs are recorded; the local page itself loads."""
    context = chromium.new_context()
    try:
        page = context.new_page()
        blocked = guard_network(page)
        page.goto(built_site.base_url + PAGES[0], wait_until="load")
        page.evaluate("""() => new Promise(done => {
            const img = new Image(); img.onerror = img.onload = () => done(); img.src = 'http://198.51.100.7/x.png';
            fetch('https://example.invalid/y.js').catch(() => {});
            new WebSocket('ws://198.51.100.7/api/kernels');
        })""")
        # the fetch and the WebSocket are not awaited: wait until the guard has seen all three (5 s at most;
        # issue 38: instead of a fixed 300 ms)
        for _ in range(100):
            if len(blocked) >= 3:
                break
            page.wait_for_timeout(50)
    finally:
        context.close()
    assert "http://198.51.100.7/x.png" in blocked
    assert "https://example.invalid/y.js" in blocked
    assert "ws://198.51.100.7/api/kernels" in blocked
    assert not [u for u in blocked if not u.startswith(("http://198.51.100.7/", "https://example.invalid/",
                                                        "ws://198.51.100.7/"))]


def test_network_quiet_waits_while_a_request_is_open(chromium, built_site):
    """check_page's wait for an idle network (check_site.wait_network_quiet, instead of Playwright's
    networkidle): not idle while a request of the page is held open, idle once it is answered and nothing
    else is open for QUIET_S."""
    page = chromium.new_page()
    held = []
    try:
        pending = check_site.open_requests(page)
        page.route("**/held.txt", lambda route: held.append(route))  # never answered until released
        page.goto(built_site.base_url + PAGES[0], wait_until="load")
        page.evaluate("() => { fetch('held.txt').catch(() => {}); }")
        assert not check_site.wait_network_quiet(page, pending, timeout_s=1.5)
        assert any(u.endswith("/held.txt") for u in pending), pending
        held[0].fulfill(status=200, body="ok")
        assert check_site.wait_network_quiet(page, pending, timeout_s=10)
        assert not pending
    finally:
        page.close()


#: URLs the guard must tell apart (check_site.is_local decides): local servers, data and about pages, and
#: outside hosts dressed up as local ones.
URLS = ["http://127.0.0.1:8888/lab?token=x", "ws://127.0.0.1:4321/api/kernels/k/channels",
        "http://localhost/", "HTTP://LOCALHOST:80/a", "http://[::1]:9/x", "http://localhost",
        "http://127.0.0.1?x", "http://127.0.0.1#f", "http://evil.example@127.0.0.1/",
        "data:image/png;base64,AA", "blob:http://127.0.0.1:1/u", "about:blank",
        "chrome-error://chromewebdata/", "javascript:void(0)", "https://cdn.jsdelivr.net/npm/x.js",
        "wss://example.org/ws",
        "http://127.0.0.1.evil.example/",
        "http://127.0.0.1@evil.example/", "http://a@127.0.0.1@evil.example/", "http://localhost.:1/",
        "http://127.0.0.2/", "http://[::2]/", "https://fonts.googleapis.com/css?family=x"]


def test_off_machine_pattern_agrees_with_is_local(chromium):
    """The guard hands Playwright check_site.OFF_MACHINE (a regular expression the driver matches in
    JavaScript; the Python client matches it too): on every URL of URLS both readings of it say "off the
    machine" exactly when is_local says "not local"."""
    expected = [not check_site.is_local(u) for u in URLS]
    assert expected.count(True) >= 8 and expected.count(False) >= 8
    assert [bool(check_site.OFF_MACHINE.search(u)) for u in URLS] == expected
    page = chromium.new_page()
    try:
        in_js = page.evaluate("([src, urls]) => urls.map(u => new RegExp(src, 'i').test(u))",
                              [check_site.OFF_MACHINE.pattern, URLS])
    finally:
        page.close()
    assert in_js == expected


def test_static_check_passes(built_site, capsys):
    """tools/check_site.py --static on the same build (no browser)."""
    assert check_site.HTML == built_site.html
    status = check_site.static_check()
    out = capsys.readouterr().out
    assert status == 0, out


@pytest.mark.parametrize("rel", PAGES, ids=[Path(p).stem for p in PAGES])
def test_page_declares_a_favicon_that_exists(built_site, rel):
    """Issue 25: a browser asks every page for an icon; with none declared it requests /favicon.ico, a 404 in
    the console (headless Chromium does not ask, so test_page_renders_offline cannot see it). The site declares
    _assets/favicon.svg (_config.yml html.favicon)."""
    import re

    page = built_site.html / rel
    if not page.is_file():
        pytest.fail(f"{rel} is in _toc.yml but not in the built site: rebuild with `make book`")
    icons = re.findall(r'<link[^>]*rel="(?:shortcut )?icon"[^>]*href="([^"]+)"', page.read_text(encoding="utf-8"))
    assert icons, f"{rel}: no <link rel=\"icon\"> (rebuild with `make book` after _config.yml's html.favicon)"
    for href in icons:
        assert (page.parent / href.split("?")[0]).resolve().is_file(), f"{rel}: icon {href} is not in the build"
