"""Issue 38 (live38): a participant's wait, the move to its new figure painted (test_lab.JS_WATCH_REDRAW's
``painted``), measured where `make check-live` does not measure it. Not collected by `make check-live` (the
file name does not start with test_); run it by name, with the browser tests' fixtures:

    .venv/bin/python -m pytest tests/browser/measure_painted.py -p no:cacheprovider -n 2 --dist loadgroup

* ``test_m38_serve_live``: every widget of every chapter under `make serve-live` (the built site's "Live
  code"), each control moved one step and back as test_app_widgets does in Voila (needs `make book`); times
  to $M38_LIVE (default _build/screenshots/live-redraw-times.json);
* ``test_m38_moe_models``: chapters 17 and 18 in Voila, each mixture-of-experts model picked in the model
  drop-down (the one-step moves of the tests never pick most of them), then a few picked again (kept
  answers); chapter 17 and 18 under serve-live too, the first five. Times to $M38_OUT
  (default _build/screenshots/moe-pick-times.json).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from conftest import POLL_MS, SHOTS
from test_app_widgets import Widgets, _voila, _wait_redrawn
from test_lab import BOOK, JS_FIGURE, JS_WATCH_REDRAW, TOC, _cells, move_every_control, widget_cells
from test_live_routes import live_site  # noqa: F401  (fixture)

OUT = Path(os.environ.get("M38_OUT", str(SHOTS / "moe-pick-times.json")))
LIVE_TIMES = Path(os.environ.get("M38_LIVE", str(SHOTS / "live-redraw-times.json")))
MOE = ["qwen3-30b-a3b", "granite-3.0-1b-a400m", "granite-3.0-3b-a800m", "deepseek-v2", "gpt-oss-120b",
       "qwen3-235b-a22b", "deepseek-v3", "mixtral-8x7b", "olmoe-1b-7b", "llama-4-scout"]


def _record(key, entry):
    import fcntl
    with open(str(OUT) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rec = json.loads(OUT.read_text()) if OUT.exists() else {}
        rec[key] = entry
        OUT.write_text(json.dumps(rec, indent=1))


def _pick(w, i, value, wait):
    before = w.js(JS_FIGURE, i)
    w.js(JS_WATCH_REDRAW, i)
    sel = w.page.evaluate_handle(
        "i => Array.from(__root(i).querySelectorAll('.widget-dropdown')).find(d => "
        "/model/.test((d.querySelector('.widget-label')||{}).textContent||''))", i).as_element()
    select = sel.query_selector("select")
    if select.evaluate("s => s.value") == value:
        return None
    if value not in select.evaluate("s => Array.from(s.options).map(o => o.value)"):
        return "absent"
    t = time.perf_counter()
    select.select_option(value)
    wait(w, i, before)
    try:
        w.page.wait_for_function("() => window.__redraw.painted !== null", timeout=10_000, polling=POLL_MS)
    except Exception:
        pass
    r = w.js("() => window.__redraw")
    r["harness_ms"] = round((time.perf_counter() - t) * 1000)
    r["load1"] = os.getloadavg()[0]
    return r


@_voila(["17_long_context.ipynb", "18_mixture_of_experts.ipynb"])
def test_m38_moe_models(voila_page):
    w = Widgets(voila_page)
    default = "llama-3.1-405b" if "17_" in w.name else "mixtral-8x7b"
    w.to_top(0)
    res = {}
    for m in MOE + MOE[:3]:                     # (the first three again: their answers are kept)
        r = _pick(w, 0, m, _wait_redrawn)
        key = m if m not in res else m + " (again, cached)"
        res[key] = r
        _pick(w, 0, default, _wait_redrawn)
    _record(f"voila {w.name}", res)


# ------------------------------------------------------------------ serve-live: every widget, every control
JS_THEBE_HELPERS = """() => {
window.__cells = () => Array.from(document.querySelectorAll('.cell.tag_nbval-ignore-output'))
  .filter(c => c.querySelector('.llmsizing-dashboard'));
window.__root = i => { const c = __cells()[i]; return c && c.querySelector('.jupyter-widgets'); };
}"""
WIDGET_CHAPTERS = [n for n in TOC if widget_cells(_cells(BOOK / n))]


class Thebe:
    def __init__(self, name, page):
        self.name, self.page = name, page
        self.moved_left = False
        self.dropdown_from = self.toggle_from = self.selected_before = None

    def js(self, script, arg=None):
        return self.page.evaluate(script, arg)


@pytest.mark.parametrize("name", [n.removesuffix(".ipynb") for n in WIDGET_CHAPTERS])
def test_m38_serve_live(chromium, live_site, guard_network, name):  # noqa: F811
    site_url, _ = live_site
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
    page = context.new_page()
    guard_network(page)
    page.goto(f"{site_url}/book/{name}.html", wait_until="load")
    page.locator("button.book-live-button").click()
    page.wait_for_selector("body[data-live=ready], body[data-live=error]", timeout=300_000)
    assert page.get_attribute("body", "data-live") == "ready"
    t = Thebe(name, page)
    page.evaluate(JS_THEBE_HELPERS)
    n = len(widget_cells(_cells(BOOK / f"{name}.ipynb")))
    page.wait_for_function("n => __cells().length >= n && __cells().every(c => { const i = c.querySelector("
                           "'.llmsizing-dashboard img'); return (i && i.complete && i.naturalWidth > 0) "
                           "|| /⚠/.test(c.innerText); })", arg=n, timeout=300_000, polling=POLL_MS)

    def wait(w, i, before):
        try:
            w.page.wait_for_function(
                "([i, b]) => { const s = (" + JS_FIGURE + ")(i);"
                " return s.src !== b.src || s.error !== b.error; }",
                arg=[i, before], timeout=20_000, polling=POLL_MS)
        except Exception:
            pass
        w.page.wait_for_function("i => !__cells()[i].querySelector('.llmsizing-busy')", arg=i,
                                 timeout=60_000, polling=POLL_MS)
        return w.js(JS_FIGURE, i)

    problems = []
    for i in range(n):
        page.evaluate("i => __root(i).scrollIntoView({block: 'start'})", i)
        problems += move_every_control(t, i, wait, f"{name} widget {i}", LIVE_TIMES, painted_ms=600)
    if "17_" in name or "18_" in name:
        res = {}
        default = "llama-3.1-405b" if "17_" in name else "mixtral-8x7b"
        for m in MOE[:5]:
            res[m] = _pick(t, 0, m, wait)
            _pick(t, 0, default, wait)
        _record(f"serve-live {name}", res)
    context.close()
    assert not problems, problems
