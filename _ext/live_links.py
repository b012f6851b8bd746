"""Sphinx extension: a "Run live in your browser" link at the top of every chapter page.

The link opens the chapter's copy in the JupyterLite site that ``tools/build_lite.py`` builds into
``_build/html/lite/`` (``make book`` runs it after Sphinx). Every page built from a notebook gets it, so a new
chapter in _toc.yml needs nothing. It is a plain ``<a href>``: the page itself requests nothing more (the lite
site, opened by the reader, is the one part of the site that loads Pyodide from a CDN).

The page also gets a "Live code" button, but only when ``make serve-live`` serves it: tools/serve_live.py
injects ``window.BOOK_LIVE`` (the local Jupyter server's URL and token) into the HTML it serves, and
_assets/live-code.js adds the button only then. On the static site nothing appears.
"""

from __future__ import annotations

import posixpath

LITE_DIR = "lite"
LITE_APP = "lab/index.html"


def lite_href(pagename: str, docpath: str) -> str:
    """Relative URL from page ``pagename`` to its notebook in the lite site (``docpath``: book/07_x.ipynb)."""
    depth = pagename.count("/")
    prefix = "../" * depth
    return f"{prefix}{LITE_DIR}/{LITE_APP}?path={posixpath.normpath(docpath)}"


def _add_link(app, pagename, templatename, context, doctree):
    if doctree is None or not context.get("body"):
        return
    source = app.env.doc2path(pagename, False)
    if not str(source).endswith(".ipynb"):
        return
    href = lite_href(pagename, str(source).replace("\\", "/"))
    link = (
        '<div class="book-live-links">'
        f'<a class="book-lite-link" href="{href}" target="_blank" rel="noopener" '
        'title="Opens this chapter in JupyterLite: Python runs in your browser (it downloads Pyodide and its '
        'packages from a CDN the first time). Run all cells to use the sliders.">'
        "&#9654; Run live in your browser</a></div>\n"
    )
    context["body"] = link + context["body"]


def setup(app):
    app.connect("html-page-context", _add_link)
    app.add_js_file("live-code.js")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
