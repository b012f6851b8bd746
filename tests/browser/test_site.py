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
        })""")
        page.wait_for_timeout(300)
    finally:
        context.close()
    assert "http://198.51.100.7/x.png" in blocked
    assert "https://example.invalid/y.js" in blocked
    assert not [u for u in blocked if not u.startswith(("http://198.51.100.7/", "https://example.invalid/"))]


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
