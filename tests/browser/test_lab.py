"""Issue 12, "Browser tests": the workshop problems, checked in a real JupyterLab in headless Chromium.

One JupyterLab (``make lab`` on a copy of book/, see conftest.py) and one browser serve every notebook. Each
notebook listed in _toc.yml that holds widgets (cells tagged ``nbval-ignore-output``), plus a sample of the
others, is opened in the process's one 1280x720 JupyterLab page (:class:`LabPage`: loaded once, each notebook
opened from the File menu and closed with its kernel afterwards) and checked as a reader sees it on opening:
no request leaves the machine, no console or page error, no news pop-up, saving leaves the file as it was,
the prose shows its stored numbers or a note on the first screen says to run the notebook, solutions stay
hidden until clicked and come after the last exercise. At the end book/ must be exactly as it was.

Run All, and the checks that need it, only for LAB_RUN_ALL (issue 38: `make check-live` under 8 minutes on
2 cores needs about 960 CPU-s; a Run All cost about 34 CPU-s a notebook, 19 of them 641, and the moves of the
lab's widgets 231 more). Run, a notebook is checked further: no error output, the prose shows numbers rather
than glue/eval keys, no solution code shown after Run All, and each widget renders, answers every control
(timed) or says why not, fits with its figure on three screens, keeps its column, labels, tooltips, summary
and static copy right. The subset covers every fault these lab checks were written for:

* 17_long_context: the heaviest widget (its redraws took 1.7-2.9 s, the busy mark's reason, FEEDBACK_MS)
  and the one whose figure fell off screen at 1280x720 with the file browser open;
* 12_how_many_gpus: the planner, the widest controls (its plan selector stuck out with the file browser
  open), and a marked static copy of the default figure hidden under the live widget (as ch15's);
* 18_mixture_of_experts: the MoE widget, and the chapter whose prose showed 113 {eval} names before a run and
  whose last solutions' values came a moment after Run All ended;
* 13_case_studies: a plain chapter (no widget), the most glued prose and exercises of the book: prose values
  after Run All, solution code folded after Run All, no error output.

Every widget of every chapter is still run and checked in Voila (test_app_widgets.py): every control moved
and timed (redraw time per move), a refused setting says why with no broken image, the figure and controls on
screen together at 1280x720, labels and toggle buttons whole, no "null" tooltip, the column never scrolls
sideways. Every chapter's prose values and folded, un-nested solutions: test_live_routes.py (Voila).

Screenshots of each widget before and after a control is moved go to _build/screenshots/lab-*.png.
"""
from __future__ import annotations

import json
import re
import secrets
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import BOOK, POLL_MS, SHOTS, git_status, shutdown_sessions, snapshot, widget_cells
from conftest import notebook_cells as _cells

from refresh_outputs import toc_notebooks

VIEWPORT = {"width": 1280, "height": 720}
RUN_ALL_TIMEOUT_MS = 300_000


def _src(cell: dict) -> str:
    s = cell.get("source", "")
    return s if isinstance(s, str) else "".join(s)


TOC = [p.name for p in toc_notebooks()]
WIDGET_NOTEBOOKS = [n for n in TOC if widget_cells(_cells(BOOK / n))]
# Without widgets, still checked for prose, solutions, errors and network: the opening chapter and the
# case studies (the most glued prose of the book, and exercises).
SAMPLE_OTHERS = [n for n in ("00_introduction.ipynb", "13_case_studies.ipynb") if n in TOC and n not in
                 WIDGET_NOTEBOOKS]
NOTEBOOKS = [n for n in TOC if n in WIDGET_NOTEBOOKS or n in SAMPLE_OTHERS]
#: The notebooks the lab also runs (Run > Run All Cells) and checks run: the module docstring says why these.
#: Every other notebook of NOTEBOOKS is opened, saved and closed unrun (issue 38: `make check-live` under 8
#: minutes on 2 cores; a Run All cost about 34 CPU-s a notebook); its widgets are checked run in Voila.
LAB_RUN_ALL = ("12_how_many_gpus.ipynb", "13_case_studies.ipynb", "17_long_context.ipynb",
               "18_mixture_of_experts.ipynb")
RUN_NOTEBOOKS = [n for n in NOTEBOOKS if n in LAB_RUN_ALL]
RUN_WIDGET_NOTEBOOKS = [n for n in RUN_NOTEBOOKS if n in WIDGET_NOTEBOOKS]
#: The notebook a lab page loaded for test_lab_opens_with_the_file_browser_folded alone opens first.
FIRST_VISIT = "02_bytes_per_parameter.ipynb"


# ----------------------------------------------------------------------------- solutions in the source
SOL_START = re.compile(r"^\s*(`{3,}|:{3,})\s*\{solution-start\}")
SOL_END = re.compile(r"^\s*(`{3,}|:{3,})\s*\{solution-end\}")
SOL_WHOLE = re.compile(r"^\s*(`{3,}|:{3,})\s*\{solution\}")
PLAIN_RUN = re.compile(r"[A-Za-z][A-Za-z0-9 ,;()-]{23,}[A-Za-z0-9)]")


@dataclass
class Solution:
    label: str
    cells: set[int] = field(default_factory=set)       # cells holding some of the solution
    probes: list[str] = field(default_factory=list)    # text a reader would see if the solution were shown


def _prose_probes(text: str) -> list[str]:
    """Runs of plain words from solution prose (no markup, math, quotes or code), as rendered text shows
    them: the two longest, at most 60 characters each."""
    lines = [ln for ln in text.splitlines()
             if not re.match(r"^\s*(`{3,}|:{3,}|:\w)", ln)]               # fences, directives, options
    flat = re.sub(r"\s+", " ", " ".join(lines))
    flat = re.sub(r"\$[^$]*\$|`[^`]*`", " | ", flat)                       # math and code break a run
    runs = sorted((m.group(0).strip() for m in PLAIN_RUN.finditer(flat)), key=len, reverse=True)
    return [r[:60].strip() for r in runs[:2]]


def solutions(cells: list[dict]) -> list[Solution]:
    """The exercise solutions of a notebook, from its source: sphinx-exercise's gated form
    (``{solution-start}`` ... ``{solution-end}``, spanning cells) or a whole ``{solution}`` directive inside
    one markdown cell. For each: the cells involved and a few probe strings (prose runs of the markdown,
    the longest line of each code cell, the first line of its printed output)."""
    found: list[Solution] = []
    current: Solution | None = None
    for i, cell in enumerate(cells):
        src = _src(cell)
        if cell["cell_type"] == "markdown":
            buf: list[str] = []
            fence = None
            for line in src.splitlines():
                if current is None and SOL_START.match(line):
                    current = Solution(line.split("}", 1)[1].strip() or f"cell {i}")
                    current.cells.add(i)
                    buf = []
                elif current is not None and SOL_END.match(line):
                    current.probes += _prose_probes("\n".join(buf))
                    found.append(current)
                    current, buf = None, []
                elif current is None and fence is None and SOL_WHOLE.match(line):
                    fence = SOL_WHOLE.match(line).group(1)
                    current = Solution(line.split("}", 1)[1].strip() or f"cell {i}")
                    current.cells.add(i)
                    buf = []
                elif fence is not None and line.strip() == fence:
                    current.probes += _prose_probes("\n".join(buf))
                    found.append(current)
                    current, buf, fence = None, [], None
                elif current is not None:
                    current.cells.add(i)
                    buf.append(line)
            if current is not None:
                current.probes += _prose_probes("\n".join(buf))
        elif current is not None and cell["cell_type"] == "code":
            current.cells.add(i)
            lines = [ln.strip() for ln in src.splitlines() if len(ln.strip()) >= 12]
            if lines:
                current.probes.append(max(lines, key=len)[:60])
            for out in cell.get("outputs", []):
                text = out.get("text") or "".join(out.get("data", {}).get("text/plain", ""))
                text = text if isinstance(text, str) else "".join(text)
                first = next((ln.strip() for ln in text.splitlines() if len(ln.strip()) >= 12), None)
                if first:
                    current.probes.append(first[:60])
                    break
    return [s for s in found if s.probes]


SOLUTION_NOTEBOOKS = [n for n in NOTEBOOKS if solutions(_cells(BOOK / n))]
RUN_SOLUTION_NOTEBOOKS = [n for n in SOLUTION_NOTEBOOKS if n in LAB_RUN_ALL]

# ----------------------------------------------------------------------------- in the page
# The notebook's cells, in order (JupyterLab 4's default windowing keeps every cell in the DOM).
JS_CELLS = "() => Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell'))"
JS_KERNEL_READY = """() => {
  const k = document.querySelector('.jp-NotebookPanel-toolbar [class*=KernelName]');
  const i = document.querySelector('.jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator');
  return !!k && !/No Kernel/i.test(k.textContent) && !!i && i.dataset.status === 'idle';
}"""
JS_WATCH_BUSY = """() => {
  const i = document.querySelector('.jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator');
  window.__sawBusy = false;
  window.__idleSince = null;
  new MutationObserver(() => {
    if (i.dataset.status === 'busy') { window.__sawBusy = true; window.__idleSince = null; }
    else if (window.__idleSince === null) window.__idleSince = Date.now();
  }).observe(i, {attributes: true});
}"""
# Run All is done when the kernel has been idle for a second (it goes idle for a moment between two cells)
# and every code cell ran: a visible prompt shows its count, and a folded cell (a solution's code), which
# shows no prompt, has its output. Without the second condition a poll that fell between two folded cells
# at the end of a chapter read the prose before its last values came (ch15 on a slow CI machine).
JS_RUN_DONE = """() => {
  const i = document.querySelector('.jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator');
  const cells = Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell'));
  return window.__sawBusy && i.dataset.status === 'idle'
    && window.__idleSince !== null && Date.now() - window.__idleSince > 1000
    && !Array.from(document.querySelectorAll('.jp-Notebook .jp-InputPrompt')).some(p => p.textContent.includes('*'))
    && cells.filter(c => c.classList.contains('jp-CodeCell')).every(c =>
         /\\[\\d+\\]/.test((c.querySelector('.jp-InputPrompt') || {}).textContent || '')
         || c.querySelector('.jp-OutputArea-output'));
}"""
CONTROLS = ".widget-slider, .widget-dropdown, .widget-toggle-buttons, .widget-checkbox, .widget-select-multiple"
JS_HELPERS = """() => {
window.__cells = () => Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell'));
window.__root = i => { const c = __cells()[i]; return c && c.querySelector('.jp-OutputArea-output .jupyter-widgets'); };
window.__scroller = el => el.closest('.jp-WindowedPanel-outer') || document.scrollingElement;
// what a reader sees of a cell: innerText skips hidden elements and closed <details>; a collapsed cell's
// placeholder ("click to expand") is not the solution
window.__visibleText = el => {
  let t = el.innerText || '';
  for (const p of el.querySelectorAll('.jp-Placeholder')) t = t.replace(p.innerText, ' ');
  return t.replace(/\\s+/g, ' ');
};
// a markdown cell as a reader sees it: its rendered markdown (jupyterlab-myst's .myst, or JupyterLab's own)
// is there and its source editor is not shown. (Not JupyterLab's jp-mod-rendered class: under windowingMode
// "contentVisibility" jupyterlab-myst renders the cells it first met as placeholders without it; lab44.)
window.__shownRendered = c => {
  const ed = c.querySelector('.jp-InputArea-editor');
  return !!c.querySelector('.jp-InputArea .myst, .jp-InputArea .jp-RenderedMarkdown')
    && !(ed && ed.checkVisibility());
};
// rendered markdown text, never the (hidden) editor holding the source
window.__renderedText = el => {
  const out = [];
  const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    if (!n.parentElement.closest('.jp-InputArea-editor, .cm-editor')) out.push(n.textContent);
  }
  return out.join(' ');
};
}"""


@dataclass
class Opened:
    name: str
    page: object
    cells: list[dict]
    blocked: list[str]
    page_errors: list[str]
    console_errors: list[str]                 # console.error messages and failed responses, with their URL
    solutions_on_open: dict[str, list[str]]   # solution label -> probe strings readable when first opened
    saved_on_open: tuple[bool, bytes, bytes]  # (JupyterLab wrote the file, bytes before, bytes after)
    names_on_open: list[str] = field(default_factory=list)   # {eval} names readable in the prose before a run
    run_hint_on_open: dict | None = None      # the lab's "run the notebook" note when first opened (its box)
    ran: bool = False                         # Run All ran (LAB_RUN_ALL); otherwise opened, saved, left unrun

    def js(self, script: str, arg=None):
        return self.page.evaluate(script, arg)


def _click_menu(page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{re.escape(menu)}$")).first.click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^{re.escape(item)}$")).first.click()


def _save_notebook(page, path: Path) -> bool:
    """Ctrl+S, as a participant (or autosave) would; True once JupyterLab has written ``path``. (Tried up to
    three times: a save asked for while the notebook is still settling after opening can be dropped. Issue 38:
    the File menu drawn over a whole rendered notebook cost about 1 CPU-s of Chromium a save; the shortcut
    runs the same command, docmanager:save.)"""
    before = path.stat().st_mtime_ns
    for _ in range(3):
        page.keyboard.press("Control+s")
        deadline = time.time() + 10
        while path.stat().st_mtime_ns == before and time.time() < deadline:
            time.sleep(0.2)
        if path.stat().st_mtime_ns != before:
            _wait_until_written(path)
            return True
    return False


def _wait_until_written(path: Path, timeout_s: float = 10.0) -> None:
    """Wait until ``path`` holds a whole notebook: jupyter_server's atomic writing keeps a backup and rewrites the
    file in place, so a read right after the mtime changes can see it empty or half written (a large chapter
    takes longer). Returns once two reads 0.2 s apart agree and parse as JSON, or at the deadline (the test
    then reports what it read)."""
    deadline = time.time() + timeout_s
    last = None
    while time.time() < deadline:
        data = path.read_bytes()
        if data == last:
            try:
                json.loads(data)
                return
            except ValueError:
                pass
        last = data
        time.sleep(0.2)


def collect_console_errors(page) -> list[str]:
    """console.error messages and responses >= 400 (with their URL) of ``page``, as they come."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text[:300])
            if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    return errors


class _Since(Sequence):
    """What a list of the shared lab page recorded while one notebook was open, plus what it recorded while
    JupyterLab loaded (each notebook's checks see its page's load, as when every notebook had a page of its
    own): a live view, frozen when the notebook is closed."""

    def __init__(self, items: list, loaded: int):
        self._items, self._loaded, self._start, self._end = items, loaded, len(items), None

    def close(self) -> None:
        self._end = len(self._items)

    def _view(self) -> list:
        return self._items[:self._loaded] + self._items[self._start:self._end]

    def __getitem__(self, k):
        return self._view()[k]

    def __len__(self) -> int:
        return len(self._view())

    def __eq__(self, other) -> bool:
        return self._view() == list(other)

    def __repr__(self) -> str:
        return repr(self._view())


class LabPage:
    """One JupyterLab page (1280x720) for every notebook a process checks (issue 38: `make check-live` under 8
    minutes; JupyterLab's load was paid once per notebook). A notebook is opened as a reader opens another
    chapter (File > Open from Path...) and closed with its tab's × (its kernel shut down after it). Its
    blocked requests, page errors and console errors are recorded from the page's load on."""

    def __init__(self, chromium, guard_network, lab, first: str = FIRST_VISIT):
        """Load JupyterLab as a reader's first `make lab` does (a workspace never saved, no ?reset), on the
        URL of notebook ``first``, and record what the first screen shows once its kernel is ready
        (``first_visit``, for test_lab_opens_with_the_file_browser_folded; issue 38: that test loaded a
        JupyterLab page of its own, about 14 CPU-s). ``first`` stays open."""
        self.lab = lab
        self.context = chromium.new_context(viewport=VIEWPORT, service_workers="block")
        self.page = self.context.new_page()
        self.blocked = guard_network(self.page)
        self.page_errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.page_errors.append(str(exc)))
        self.console_errors = collect_console_errors(self.page)
        workspace = f"first-visit-{secrets.token_hex(4)}"            # a name no earlier page used
        self.page.goto(f"{lab.base_url}/lab/workspaces/{workspace}/tree/{first}?token={lab.token}",
                       wait_until="domcontentloaded", timeout=120_000)
        self.page.wait_for_selector(".lm-MenuBar-itemLabel", timeout=120_000)
        self.page.wait_for_function("() => !document.querySelector('#jupyterlab-splash')",
                                    timeout=120_000, polling=POLL_MS)
        self.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
        self.page.wait_for_function(JS_KERNEL_READY, timeout=120_000, polling=POLL_MS)
        # the layout is restored before the notebook of the URL opens (and its kernel starts): once that is
        # painted, what the reader sees is settled
        self.page.evaluate(JS_FRAMES)
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / "lab-first-visit.png"))
        self.first_visit = {"notebook": first, "sidebar_open": self.page.evaluate(JS_LEFT_SIDEBAR_OPEN),
                            "notebook_box": self.page.locator(".jp-NotebookPanel").first.bounding_box()}
        self.loaded = {k: len(getattr(self, k)) for k in ("blocked", "page_errors", "console_errors")}

    def since_now(self) -> tuple[_Since, _Since, _Since]:
        kinds = ("blocked", "page_errors", "console_errors")
        return tuple(_Since(getattr(self, k), self.loaded[k]) for k in kinds)

    def open(self, name: str) -> None:
        """File > Open from Path..., the notebook's name, Enter: as a reader opens the next chapter."""
        page = self.page
        page.set_viewport_size(VIEWPORT)
        set_left_sidebar(page, False)          # as a fresh workspace opens (tests that want it open it)
        _click_menu(page, "File", "Open from Path…")
        field_ = page.locator(".jp-Dialog input").first
        field_.fill(name)
        field_.press("Enter")
        page.locator(".jp-Dialog").wait_for(state="detached", timeout=30_000)

    def close(self, name: str) -> None:
        """The notebook's tab closed with its × (a notebook Run All changed: its changes discarded, as the
        file must stay as it was); the caller then shuts its kernel down (:func:`shutdown_sessions`).
        (Issue 38: File > Close and Shut Down Notebook... and its confirmation, three clicks, each repainting
        the whole rendered notebook, cost 1.5-2 CPU-s of Chromium and 3.5-5.8 s a notebook; the × is one
        click.)"""
        page = self.page
        page.keyboard.press("Escape")                 # (a menu or drop-down a test left open)
        page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabCloseIcon").click()
        page.wait_for_function("() => !document.querySelector('.jp-NotebookPanel')"
                               " || !!document.querySelector('.jp-Dialog')", timeout=30_000, polling=POLL_MS)
        if page.locator(".jp-Dialog").count():       # "Save your work": discard
            page.locator(".jp-Dialog button", has_text=re.compile("^Discard$")).click()
        page.wait_for_function("() => !document.querySelector('.jp-NotebookPanel')",
                               timeout=30_000, polling=POLL_MS)


@pytest.fixture(scope="session")
def lab_page(chromium, guard_network, lab):
    """The session's :class:`LabPage` (one per process: each pytest-xdist worker has its own lab).
    ``get(name)`` loads it, if it is not loaded yet, on notebook ``name``'s URL (left open for the caller);
    ``get()`` on FIRST_VISIT's, which is then closed and its kernel shut down."""
    holder = {"page": None}

    def get(name: str | None = None) -> LabPage:
        if holder["page"] is None:
            holder["page"] = LabPage(chromium, guard_network, lab, name or FIRST_VISIT)
            if name is None:
                holder["page"].close(FIRST_VISIT)
                shutdown_sessions(lab)
        return holder["page"]

    def drop() -> None:                        # after a notebook could not be closed: a fresh page next
        if holder["page"] is not None:
            holder["page"].context.close()
            holder["page"] = None

    yield get, drop
    drop()


@pytest.fixture(scope="module", params=NOTEBOOKS, ids=[n.removesuffix(".ipynb") for n in NOTEBOOKS])
def notebook(request, lab_page, lab, lab_book):
    """One notebook opened in the session's JupyterLab page (:class:`LabPage`), saved, and, if it is one of
    LAB_RUN_ALL, run top to bottom (Run > Run All Cells); closed, its kernel shut down, afterwards."""
    name = request.param
    ran = name in LAB_RUN_ALL
    get_page, drop_page = lab_page
    shared = get_page(name)
    page = shared.page
    blocked, page_errors, console_errors = shared.since_now()
    cells = _cells(BOOK / name)
    closed = False
    try:
        shared.open(name)
        page.wait_for_function(f"() => ({JS_CELLS})().length === {len(cells)}",
                               timeout=120_000, polling=POLL_MS)
        page.wait_for_function(JS_KERNEL_READY, timeout=120_000, polling=POLL_MS)
        page.evaluate(JS_HELPERS)
        on_open = readable_solutions(page, cells)
        names_on_open, hint_on_open = unevaluated_names(page, cells)
        # opened and saved before anything runs: the file must come back byte for byte (the pre-save hook)
        original = (lab_book / name).read_bytes()
        wrote = _save_notebook(page, lab_book / name)
        saved = (wrote, original, (lab_book / name).read_bytes())
        if ran:
            # stored outputs and execution counts go first, so everything checked below comes from this run
            _click_menu(page, "Edit", "Clear Outputs of All Cells")
            page.wait_for_function("() => !Array.from(document.querySelectorAll("
                                   "'.jp-Notebook .jp-InputPrompt')).some(p => /\\d/.test(p.textContent))",
                                   timeout=30_000, polling=POLL_MS)
            page.evaluate(JS_WATCH_BUSY)
            _click_menu(page, "Run", "Run All Cells")
            page.wait_for_function(JS_RUN_DONE, timeout=RUN_ALL_TIMEOUT_MS, polling=250)
            # widget views render after the kernel is idle: wait for each widget cell's figure
            for i in widget_cells(cells):
                page.wait_for_function(
                    "i => { const r = __root(i); const img = r && r.querySelector('img');"
                    " return (img && img.complete && img.naturalWidth > 0)"
                    " || /Error displaying widget|Model not found/.test(__cells()[i].innerText); }",
                    arg=i, timeout=60_000, polling=POLL_MS)
        yield Opened(name, page, cells, blocked, page_errors, console_errors, on_open, saved, names_on_open,
                     hint_on_open, ran)
        # everything the tests of this notebook did (resizes, control moves) stayed on the machine, error-free
        assert blocked == [], f"{name}: requests off 127.0.0.1 (blocked) during the tests: {blocked}"
        assert not page_errors, f"{name}: uncaught JavaScript errors during the tests: {page_errors}"
    finally:
        for seen in (blocked, page_errors, console_errors):
            seen.close()
        try:
            shared.close(name)
            closed = True
        except Exception as exc:  # noqa: BLE001  (a page that cannot close its notebook: a fresh one next)
            warnings.warn(f"{name} could not be closed ({type(exc).__name__}): a fresh lab page next",
                          stacklevel=1)
        shutdown_sessions(lab, background=closed)      # its kernel goes while the next notebook opens
        if not closed:
            drop_page()


def _on(names: list[str]):
    """Parametrize a test with the ``notebook`` fixture of each of ``names``."""
    return pytest.mark.parametrize("notebook", names, indirect=True,
                                   ids=[n.removesuffix(".ipynb") for n in names])


#: The checks of a widget as run in the lab (the widgets of the other notebooks: test_app_widgets.py).
widgets_only = _on(RUN_WIDGET_NOTEBOOKS)
#: The checks that need the notebook run (LAB_RUN_ALL).
ran_only = _on(RUN_NOTEBOOKS)


# ----------------------------------------------------------------------------- every opened notebook
@ran_only
def test_runs_without_errors(notebook):
    """Run All executes every code cell, with no error (or stderr) output and no uncaught page error."""
    found = notebook.js("""() => ({
      // a folded cell (a solution's code) shows no input prompt: its fresh output tells that it ran
      unrun: __cells().map((c, i) => [i, c]).filter(([i, c]) => c.classList.contains('jp-CodeCell')
               && !/\\[\\d+\\]/.test((c.querySelector('.jp-InputPrompt') || {}).textContent || '')
               && !c.querySelector('.jp-OutputArea-output')).map(([i]) => i),
      errors: Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-OutputArea-output'))
               .filter(o => /stderr|error/.test(o.dataset.mimeType || '')).map(o => o.innerText.slice(0, 300)),
    })""")
    assert not found["errors"], f"error output in {notebook.name}: {found['errors']}"
    assert not found["unrun"], f"code cells of {notebook.name} not executed by Run All: {found['unrun']}"
    assert not notebook.page_errors, f"uncaught JavaScript errors: {notebook.page_errors}"


def test_opening_and_saving_leaves_the_notebook_unchanged(notebook):
    """A participant opens a chapter and saves it (or autosave does): JupyterLab writes the file, and the
    pre-save hook (tools/lab/jupyter_server_config.py) leaves exactly the bytes the repository holds."""
    wrote, before, after = notebook.saved_on_open
    assert wrote, f"{notebook.name}: File > Save Notebook did not write the file"
    if after != before:
        old, new = json.loads(before), json.loads(after)
        diff = [k for k in ("metadata", "nbformat", "nbformat_minor") if old.get(k) != new.get(k)]
        diff += [f"cell {i}" for i, (a, b) in enumerate(zip(old["cells"], new["cells"])) if a != b]
        pytest.fail(f"{notebook.name} changed when saved: {diff[:10]}")


def test_no_console_error(notebook):
    """Issue 25: nothing in the browser console while the notebook opens, runs and is used. It logged the
    Pyodide kernel extension's "Shared module @jupyterlite/services doesn't exist" (now kept out of the lab's
    page, tools/lab/jupyter_server_config.py) and jupyterlab-myst's "Cross reference target was not found" for
    each {ref} role to another chapter (now relative links to the chapter files)."""
    assert not notebook.console_errors, f"{notebook.name}: console errors: {notebook.console_errors[:10]}"


def test_no_request_leaves_the_machine(notebook):
    assert notebook.blocked == [], f"requests off 127.0.0.1 (blocked): {notebook.blocked}"


def test_no_news_announcement(notebook):
    """JupyterLab 4 asks "Would you like to get notified about official Jupyter news?" in a toast unless its
    announcements plugin is disabled (tools/lab/config)."""
    text = notebook.js("() => document.body.innerText")
    toasts = notebook.js("() => Array.from(document.querySelectorAll('.Toastify__toast, .jp-toast-message'))"
                         ".map(t => t.innerText)")
    assert "Jupyter news" not in text, "the 'notified about official Jupyter news' toast is shown"
    assert not [t for t in toasts if re.search(r"news|update", t, re.I)], toasts


#: How long test_prose_shows_numbers_not_keys reads the page again while values are still being filled in.
PROSE_SETTLE_S = 15.0
GLUE_KEY = re.compile(r"\{glue(:\w+)?\}|\{eval\}|glue:text")
#: What jupyterlab-myst shows for an inline expression it could not evaluate: the expression's name (as code),
#: the error, or this placeholder.
UNEVALUATED = re.compile(r"Unexecuted inline expression|NameError")
EVAL_ROLE = re.compile(r"\{eval\}`([^`]+)`")


#: The reader's scroll through a run notebook (test_prose_shows_numbers_not_keys): one screen at a time from
#: the top; at each position every markdown cell on screen must show its rendered markdown (waited for up to
#: ON_SCREEN_WAIT_MS: a windowed notebook renders a cell as it comes into view) and its text is read there.
JS_READ_SCROLLING = """async waitMs => {
  const sc = document.querySelector('.jp-WindowedPanel-outer') || document.scrollingElement;
  const frames = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const md = () => __cells().map((c, i) => [i, c])
    .filter(([i, c]) => c.classList.contains('jp-MarkdownCell'));
  const seen = {}, unrendered = new Set();
  sc.scrollTop = 0;
  await frames();
  for (let k = 0; k < 2000; k++) {
    const v = sc.getBoundingClientRect();
    const on = md().filter(([i, c]) => { const b = c.getBoundingClientRect();
                                         return b.height > 0 && b.bottom > v.top && b.top < v.bottom; });
    const t0 = performance.now();
    while (on.some(([i, c]) => !__shownRendered(c)) && performance.now() - t0 < waitMs)
      await new Promise(r => setTimeout(r, 50));
    for (const [i, c] of on) {
      if (!__shownRendered(c)) unrendered.add(i);
      seen[i] = (seen[i] ? seen[i] + ' ' : '') + __renderedText(c);
    }
    const before = sc.scrollTop;
    sc.scrollTop = before + sc.clientHeight;
    await frames();
    if (sc.scrollTop === before) break;
  }
  sc.scrollTop = 0;
  return {seen, unrendered: Array.from(unrendered)};
}"""
ON_SCREEN_WAIT_MS = 5000


def _unshown(notebook, cells: list[dict]) -> dict[int, list[str]]:
    """``cells`` ({i, text}, markdown cells): what each shows instead of a number (a glue key, an eval role,
    an {eval} expression's name, an evaluation error), by cell index; only cells showing any."""
    shown = {}
    for c in cells:
        names = set(EVAL_ROLE.findall(_src(notebook.cells[c["i"]])))
        bad = ({m.group(0) for m in GLUE_KEY.finditer(c["text"])}
               | {m.group(0) for m in UNEVALUATED.finditer(c["text"])})
        bad |= {n for n in names if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w(])", c["text"])}
        if bad:
            shown[c["i"]] = sorted(bad)
    return shown


@ran_only
def test_prose_shows_numbers_not_keys(notebook):
    """Every markdown cell is rendered, and none shows a glue key, an eval role, the name of an {eval}
    expression (what jupyterlab-myst shows when it has no value for it) or an evaluation error instead of the
    number. jupyterlab-myst fills a cell's values in when the kernel's answers reach the page, the last cells'
    a moment after Run All ends (seen once in a fresh-clone run: ch18's last two solutions), so the page is
    read again for up to PROSE_SETTLE_S before the assertion. Then the notebook is read as a reader scrolls
    it (JS_READ_SCROLLING): every markdown cell holding a number must have come on screen rendered, and no
    cell may show a name there, whatever the lab's windowing renders or re-renders as cells come into view.
    A cell counts as rendered when its rendered markdown is there and its source editor is not shown (what a
    reader sees; its text is read whole, a folded solution's too)."""
    deadline = time.monotonic() + PROSE_SETTLE_S
    while True:
        cells = notebook.js("""() => __cells().map((c, i) => [i, c]).filter(([i, c]) => c.classList.contains('jp-MarkdownCell'))
            .map(([i, c]) => ({i, rendered: __shownRendered(c), text: __renderedText(c)}))""")
        unrendered = [c["i"] for c in cells if not c["rendered"]]
        shown = _unshown(notebook, cells)
        if (cells and not unrendered and not shown) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert cells, "no markdown cells found"
    assert not unrendered, f"markdown cells shown as source, not rendered: {unrendered}"
    assert not shown, f"{notebook.name}: expressions not shown as numbers, by markdown cell: {shown}"
    read = notebook.js(JS_READ_SCROLLING, ON_SCREEN_WAIT_MS)
    seen = {int(i): text for i, text in read["seen"].items()}
    with_numbers = [c["i"] for c in cells if EVAL_ROLE.search(_src(notebook.cells[c["i"]]))]
    never = [i for i in with_numbers if i not in seen]
    assert not never, (f"{notebook.name}: markdown cells with numbers never came on screen while scrolling: "
                       f"{never}")
    assert not read["unrendered"], (f"{notebook.name}: markdown cells on screen but not rendered within "
                                    f"{ON_SCREEN_WAIT_MS} ms while scrolling: {sorted(read['unrendered'])}")
    shown = _unshown(notebook, [{"i": i, "text": text} for i, text in seen.items()])
    assert not shown, (f"{notebook.name}: expressions a reader scrolling the notebook sees as names, not "
                       f"numbers, by markdown cell: {shown}")


# ----------------------------------------------------------------------------- before the first run
# The lab's note under the title (tools/lab/jupyter_server_config.py, add_run_hint): its box on screen and text.
JS_RUN_HINT = """() => {
  for (const c of __cells().filter(c => c.classList.contains('jp-MarkdownCell'))) {
    const el = Array.from(c.querySelectorAll('aside, div, section')).reverse()
      .find(e => /come from its code/.test(e.innerText || '') && /Run All Cells/.test(e.innerText || ''));
    if (el) { const b = el.getBoundingClientRect(); return {top: b.top, bottom: b.bottom, height: b.height,
                                                           text: el.innerText}; }
  }
  return null;
}"""
JS_PROSE = """() => __cells().map((c, i) => [i, c]).filter(([i, c]) => c.classList.contains('jp-MarkdownCell'))
    .map(([i, c]) => ({i, text: __renderedText(c)}))"""


def unevaluated_names(page, cells: list[dict]) -> tuple[list[str], dict | None]:
    """The {eval} names a reader can read in the rendered prose as the notebook opens (jupyterlab-myst shows a
    name in code font until the cell has run), and the run-the-notebook note's box (None if there is none).
    The note's own example name is not counted."""
    page.evaluate("() => { const s = document.querySelector('.jp-WindowedPanel-outer'); if (s) s.scrollTop = 0; }")
    hint = page.evaluate(JS_RUN_HINT)
    deadline = time.time() + 10          # the first notebook of a session can still be rendering its first cell
    # (a chapter that quotes numbers has the note: under windowingMode "contentVisibility" its first cell can
    # still be unrendered here, under load, once the cells were scrolled through; lab44)
    quotes = any(c["cell_type"] == "markdown" and EVAL_ROLE.search(_src(c)) for c in cells)
    while (hint is None and quotes or hint is not None and hint["height"] == 0) and time.time() < deadline:
        page.wait_for_timeout(200)
        hint = page.evaluate(JS_RUN_HINT)
    shown = []
    for c in page.evaluate(JS_PROSE):
        text = c["text"].replace(hint["text"], " ") if hint else c["text"]
        text = re.sub(r"\s*such as\s+\S+\)", " ", text) if hint else text
        for n in dict.fromkeys(EVAL_ROLE.findall(_src(cells[c["i"]]))):
            if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w(])", text):
                shown.append(n)
    return shown, hint


def test_unrun_notebook_shows_numbers_or_says_to_run_it(notebook):
    """Issue 38: opened in the lab, chapter 18 showed 113 names like ``ch18_mix_k`` in its text until Run All,
    and nothing said to run it. Opened and not yet run, a chapter's prose either shows no {eval} name, or a note
    on the first screen says that the names are the numbers' and to run the notebook."""
    names, hint = notebook.names_on_open, notebook.run_hint_on_open
    if not names:
        return
    assert hint is not None, (f"{notebook.name}: {len(names)} names shown before a run (e.g. {names[:3]}) and no "
                              "note saying to run the notebook")
    assert hint["height"] > 0 and 0 <= hint["top"] and hint["bottom"] <= VIEWPORT["height"], \
        f"{notebook.name}: the run-the-notebook note is not on the first screen: {hint}"


# ----------------------------------------------------------------------------- solutions
def readable_solutions(page, cells: list[dict]) -> dict[str, list[str]]:
    """The solutions whose text, code or printed output a reader can read in the page as it is now: each cell
    that holds part of a solution is scrolled into view and its visible text searched for the probe strings."""
    visible: dict[str, list[str]] = {}
    for sol in solutions(cells):
        for i in sorted(sol.cells):
            text = page.evaluate("i => { const c = __cells()[i]; c.scrollIntoView({block: 'center'});"
                                 " return __visibleText(c); }", i)
            seen = [p for p in sol.probes if re.sub(r"\s+", " ", p) in text]
            if seen:
                visible.setdefault(sol.label, []).extend(f"cell {i}: {p!r}" for p in seen)
    return visible


@_on(SOLUTION_NOTEBOOKS)
def test_solutions_are_hidden_when_opened(notebook):
    """Opened in JupyterLab, a solution's text, code and printed output are not readable before the reader
    asks for them (collapsed cells, or a closed dropdown)."""
    sols = solutions(notebook.cells)
    assert sols, "no solutions found in the source"
    visible = notebook.solutions_on_open
    assert not visible, (f"{notebook.name}: {len(visible)} of {len(sols)} solutions readable without a click: "
                         + "; ".join(f"{k} ({v[0]})" for k, v in visible.items()))


EXERCISE = re.compile(r"^\s*(`{3,}|:{3,})\s*\{exercise\}", re.M)


def _solutions_after_the_last_exercise(notebook) -> list[int]:
    """The solution cells of ``notebook`` (asserted to have exercises and solutions), after asserting that
    none comes before its last exercise."""
    exercises = [i for i, c in enumerate(notebook.cells)
                 if c["cell_type"] == "markdown" and EXERCISE.search("".join(c["source"]))]
    sol_cells = sorted(i for sol in solutions(notebook.cells) for i in sol.cells)
    assert exercises and sol_cells
    early = [i for i in sol_cells if i < exercises[-1]]
    assert not early, f"{notebook.name}: solution cells {early} come before the last exercise (cell {exercises[-1]})"
    return sol_cells


@_on(SOLUTION_NOTEBOOKS)
def test_solutions_come_after_the_last_exercise(notebook):
    """Run All makes JupyterLab show the markdown and the new outputs of every cell it runs, collapsed or not.
    So the solutions sit after the last exercise (a "Solutions" section at the chapter's end): no solution
    cell of any notebook comes between two exercises. (That Run All then keeps their code folded is
    checked on the notebooks the lab runs: the next test.)"""
    _solutions_after_the_last_exercise(notebook)


@_on(RUN_SOLUTION_NOTEBOOKS)
def test_no_solution_is_shown_under_its_exercise_after_run_all(notebook):
    """Run All makes JupyterLab show the markdown and the new outputs of every cell it runs, collapsed or not.
    So the solutions sit after the last exercise (a "Solutions" section at the chapter's end), and their code
    stays folded: after Run All, no solution cell is on screen between two exercises, and no solution code
    cell shows its source."""
    sol_cells = _solutions_after_the_last_exercise(notebook)
    code = [i for i in sol_cells if notebook.cells[i]["cell_type"] == "code"]
    shown = notebook.js("idx => idx.filter(i => { const e = __cells()[i].querySelector('.jp-InputArea');"
                        " return e && e.offsetParent !== null; })", code)
    assert not shown, f"{notebook.name}: solution code cells {shown} show their source after Run All"


# ----------------------------------------------------------------------------- widgets
@widgets_only
def test_widgets_render_as_controls(notebook):
    """Every widget cell shows live controls and a figure; no 'Error displaying widget'/'Model not found'."""
    cells = widget_cells(notebook.cells)
    report = notebook.js(f"""idx => idx.map(i => {{
        const r = __root(i), c = __cells()[i];
        return {{i, root: !!r, controls: r ? r.querySelectorAll('{CONTROLS}').length : 0,
                 image: !!(r && r.querySelector('img') && r.querySelector('img').naturalWidth > 0),
                 text: c.innerText.slice(0, 2000)}};
      }})""", cells)
    for w in report:
        assert w["root"], f"{notebook.name} cell {w['i']}: no widget view rendered"
        assert "Error displaying widget" not in w["text"] and "Model not found" not in w["text"], w["text"][:300]
        assert w["controls"] >= 1, f"{notebook.name} cell {w['i']}: no controls"
        assert w["image"], f"{notebook.name} cell {w['i']}: the figure did not render"
        assert "⚠" not in w["text"], f"{notebook.name} cell {w['i']}: the default view shows an error"


JS_LAYOUT = f"""i => {{
  const r = __root(i), s = __scroller(r);
  const ctl = Array.from(r.querySelectorAll('{CONTROLS}')), img = r.querySelector('img');
  const box = els => {{ const bs = els.map(e => e.getBoundingClientRect());
    return {{top: Math.min(...bs.map(b => b.top)), left: Math.min(...bs.map(b => b.left)),
             bottom: Math.max(...bs.map(b => b.bottom)), right: Math.max(...bs.map(b => b.right))}}; }};
  const both = box([...ctl, img]), sb = s.getBoundingClientRect();
  const off = both.top - sb.top - 4;
  s.scrollTop += off;                            // the widget scrolled to the top of the notebook's view
  return Math.abs(off);
}}"""
JS_MEASURE = f"""i => {{
  const r = __root(i), s = __scroller(r);
  const ctl = Array.from(r.querySelectorAll('{CONTROLS}')), img = r.querySelector('img');
  const rect = e => {{ const b = e.getBoundingClientRect(); return {{top: b.top, left: b.left, bottom: b.bottom, right: b.right}}; }};
  const sb = s.getBoundingClientRect();
  const view = {{top: Math.max(sb.top, 0), left: Math.max(sb.left, 0),
                bottom: Math.min(sb.bottom, window.innerHeight), right: Math.min(sb.right, window.innerWidth)}};
  return {{view, controls: ctl.map(rect), image: rect(img), natural: img.naturalWidth, shown: img.getBoundingClientRect().width,
           naturalH: img.naturalHeight, shownH: img.getBoundingClientRect().height}};
}}"""


def scroll_widget_to_top(notebook: Opened, i: int) -> None:
    """Scroll the notebook until widget cell ``i``'s controls start at the top of its view. Cells above
    render (content-visibility) as they come into view and move the widget, so repeat until it stays."""
    for _ in range(20):
        off = notebook.js(JS_LAYOUT, i)
        notebook.js(JS_FRAMES)                  # the scroll laid out and painted (not a fixed pause)
        if off < 2 and notebook.js(JS_LAYOUT, i) < 2:
            return


#: Resolves after two animation frames: whatever the page changed before is laid out and painted.
JS_FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"


def _inside(b: dict, v: dict, tol: float = 1.0) -> bool:
    return (b["top"] >= v["top"] - tol and b["left"] >= v["left"] - tol and b["bottom"] <= v["bottom"] + tol
            and b["right"] <= v["right"] + tol)


JS_LEFT_SIDEBAR_OPEN = """() => { const s = document.querySelector('#jp-left-stack');
  return !!s && !s.classList.contains('lm-mod-hidden') && s.offsetWidth > 0; }"""


def set_left_sidebar(page, open_: bool) -> None:
    """Open or fold JupyterLab's left sidebar (the file browser) by clicking its tab, as a reader would."""
    if page.evaluate(JS_LEFT_SIDEBAR_OPEN) != open_:
        tab = ".jp-SideBar.jp-mod-left .lm-TabBar-tab" + (".lm-mod-current" if not open_ else "")
        page.locator(tab).first.click()
        page.wait_for_function(f"() => ({JS_LEFT_SIDEBAR_OPEN})() === {str(open_).lower()}",
                               timeout=10_000, polling=POLL_MS)


def test_lab_opens_with_the_file_browser_folded(lab_page):
    """Issue 25: at 1280x720 the file browser took the notebook's width, so a widget's figure fell under its
    controls. `make lab` now opens a workspace the reader has not saved yet with the file browser folded
    (tools/lab/default_workspace.json); the folder tab opens it. No console error on the way. (What the
    process's lab page showed when it first loaded, on a notebook's URL in a new workspace: LabPage.)"""
    get_page, _ = lab_page
    shared = get_page()
    seen = shared.first_visit
    assert seen["sidebar_open"] is False, f"the file browser is open on a first visit ({seen['notebook']})"
    x = seen["notebook_box"]["x"]
    assert x < 60, f"the notebook starts {x:.0f} px from the left"
    on_load = {k: getattr(shared, k)[:n] for k, n in shared.loaded.items()}   # recorded while it loaded
    assert not on_load["blocked"], on_load["blocked"]
    assert not on_load["console_errors"], on_load["console_errors"]
    assert not on_load["page_errors"], on_load["page_errors"]
    set_left_sidebar(shared.page, True)                  # the reader can still open it
    try:
        assert shared.page.locator(".jp-FileBrowser").first.is_visible()
    finally:
        set_left_sidebar(shared.page, False)


# A laptop at 1280x720 with the file browser folded (README, "Running a workshop": Ctrl+B or a click on the
# folder tab gives the notebook the width), and a 1920x1080 screen with JupyterLab's default layout.
# Issue 38: and a 1280x720 laptop with the file browser open (chapter 17's figure was off screen there).
SCREENS = ((1280, 720, False), (1280, 720, True), (1920, 1080, True))
#: Known faults not yet fixed: (notebook, width, height, file browser open) -> the problem's text. The test fails
#: if one stops happening (remove the entry then) or if anything else goes off screen. (Issue 38: chapter 12's
#: plan selector, 760 px wide, stuck out of the figure's side at 1280x720 with the file browser open; it is now
#: no wider than that side.)
KNOWN_OFF_SCREEN: dict[tuple[str, int, int, bool], str] = {}


@widgets_only
def test_widget_controls_and_figure_fit_on_screen(notebook):
    """With the widget scrolled into view, all its controls and its figure are inside the visible notebook
    area at once, on each screen of SCREENS, and the figure is never enlarged beyond its natural width."""
    problems = []
    try:
        for width, height, sidebar in SCREENS:
            notebook.page.set_viewport_size({"width": width, "height": height})
            set_left_sidebar(notebook.page, sidebar)
            found = _fit_problems(notebook)
            known = KNOWN_OFF_SCREEN.get((notebook.name, width, height, sidebar))
            if known is not None:
                assert any(known in p for p in found), f"{notebook.name}: fixed, remove it from KNOWN_OFF_SCREEN"
                found = [p for p in found if known not in p]
            problems += [f"{width}x{height}, file browser {'open' if sidebar else 'folded'}: {p}" for p in found]
    finally:
        notebook.page.set_viewport_size(VIEWPORT)
    assert not problems, f"{notebook.name}: " + "; ".join(problems)


def _fit_problems(notebook) -> list[str]:
    problems = []
    for i in widget_cells(notebook.cells):
        scroll_widget_to_top(notebook, i)
        m = notebook.js(JS_MEASURE, i)
        v, img = m["view"], m["image"]
        outside = sum(not _inside(b, v) for b in m["controls"])
        if outside or not _inside(img, v):
            height = max(img["bottom"], *(b["bottom"] for b in m["controls"])) - min(
                img["top"], *(b["top"] for b in m["controls"]))
            problems.append(f"cell {i}: controls and figure do not fit on screen together ({outside} of "
                            f"{len(m['controls'])} controls off screen, figure "
                            f"{'on' if _inside(img, v) else 'partly off'} screen; widget {height:.0f} px tall, "
                            f"notebook view {v['bottom'] - v['top']:.0f} px)")
        if m["shown"] > m["natural"] + 0.5:
            problems.append(f"cell {i}: figure stretched to {m['shown']:.0f} px from {m['natural']} px")
    return problems


@widgets_only
def test_toggle_button_labels_are_not_truncated(notebook):
    cut = notebook.js("""() => Array.from(document.querySelectorAll('.jp-NotebookPanel .widget-toggle-button'))
        .filter(b => b.scrollWidth > b.clientWidth + 0.5)
        .map(b => `${b.textContent.trim()} (${b.scrollWidth} > ${b.clientWidth} px)`)""")
    assert not cut, f"{notebook.name}: truncated toggle-button labels: {cut}"


#: An img's src as the harness carries it back to Python: its length and its last 96 characters (page35: a
#: figure sent as a data: URL is ~71 KB of text, which every read of the page's state copied through the
#: DevTools protocol; a blob: URL is whole in it; a PNG's last bytes are its CRCs, which change with any pixel)
JS_SRC = "(img => img ? img.src.length + ':' + img.src.slice(-96) : '')"
JS_STATE = """i => { const r = __root(i); const img = r.querySelector('img');
  return {src: """ + JS_SRC + """(img), text: Array.from(r.querySelectorAll('.widget-html')).map(h => h.innerText).join('\\n')}; }"""


@widgets_only
def test_moving_a_control_changes_the_view(notebook):
    """Press ArrowRight (or ArrowLeft at the end) on a slider's handle, or pick another dropdown option;
    the widget's figure or summary must change. Screenshots before and after go to _build/screenshots/."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    stem = notebook.name.removesuffix(".ipynb")
    for k, i in enumerate(widget_cells(notebook.cells)):
        root = notebook.page.evaluate_handle("i => __root(i)", i).as_element()
        scroll_widget_to_top(notebook, i)
        before = notebook.js(JS_STATE, i)
        notebook.page.screenshot(path=str(SHOTS / f"lab-{stem}-{k}-before.png"))   # what the reader sees
        handle = root.query_selector(".widget-slider .noUi-handle")
        if handle is not None:
            readout = root.query_selector(".widget-slider .widget-readout")
            value = readout.inner_text() if readout else None
            handle.focus()
            handle.press("ArrowRight")
            if readout is not None and readout.inner_text() == value:
                handle.press("ArrowLeft")
            moved = f"slider {value!r} -> {readout.inner_text() if readout else '?'!r}"
        else:
            select = root.query_selector(".widget-dropdown select")
            assert select is not None, f"{notebook.name} cell {i}: neither a slider nor a dropdown to move"
            options = select.evaluate("s => Array.from(s.options).map(o => o.value)")
            current = select.evaluate("s => s.value")
            new = next(o for o in options if o != current)
            select.select_option(new)
            moved = f"dropdown {current!r} -> {new!r}"
        try:
            notebook.page.wait_for_function(
                "([i, b]) => { const s = (" + JS_STATE + ")(i); return s.src !== b.src || s.text !== b.text; }",
                arg=[i, before], timeout=30_000, polling=POLL_MS)
        except Exception:  # noqa: BLE001  (a timeout is the failure reported below)
            pass
        # the summary may arrive before the figure: let the kernel finish the redraw before looking again
        notebook.page.wait_for_function(
            "() => /\\|\\s*Idle/.test((document.querySelector('#jp-main-statusbar')"
            " || document.body).innerText)", timeout=60_000, polling=POLL_MS)
        wait_image_settled(notebook, i)
        after = notebook.js(JS_STATE, i)
        scroll_widget_to_top(notebook, i)
        notebook.page.screenshot(path=str(SHOTS / f"lab-{stem}-{k}-after.png"))
        assert after != before, f"{notebook.name} cell {i}: {moved} changed neither the figure nor the summary"
        assert "⚠" not in after["text"], f"{notebook.name} cell {i}: {moved} gave an error: {after['text'][:200]}"


# ----------------------------------------------------------------------------- after all notebooks
#: How long test_book_is_unchanged_after_closing reads book/ again while it differs from the start.
BOOK_SETTLE_S = 5.0


def test_book_is_unchanged_after_closing(lab, book_before):
    """Run last (conftest.py moves it to the end): with every notebook closed and its kernel shut
    down, book/ holds exactly the bytes it held before the browser tests (and git sees no new change)."""
    shutdown_sessions(lab)
    files, status = book_before
    # read again while it differs, up to BOOK_SETTLE_S (a kernel just shut down may still be writing;
    # issue 38: instead of a fixed second before every read); a change that stays fails
    deadline = time.monotonic() + BOOK_SETTLE_S
    while True:
        now = snapshot(BOOK)
        changed = sorted(k for k in set(files) | set(now) if files.get(k) != now.get(k))
        if not changed or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert not changed, f"book/ changed during the browser tests: {changed}"
    assert git_status(BOOK) == status, f"git status of book/ changed:\n{git_status(BOOK)}"



# ----------------------------------------------------------------------------- issue 25: what a participant reads
# The summary under each figure: words broken at the end of a line ("befor|e overlap"), rows cut at the right, a
# box that scrolls on its own; labels cut short ("global batch (s…") and tooltips reading "null"; the static copy
# of the default figure right under the live one.
JS_SUMMARY = """i => {
  const r = __root(i), s = r && r.querySelector('.llmsizing-summary');
  if (!s) return null;
  const split = [], cut = [], scroll = [];
  // a word split over two lines has client rects on two lines (tops more than half a line apart)
  const walk = document.createTreeWalker(s, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    if (n.parentElement.closest('style')) continue;
    for (const m of n.textContent.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(n, m.index); range.setEnd(n, m.index + m[0].length);
      const tops = Array.from(range.getClientRects()).filter(b => b.width > 0).map(b => b.top);
      if (tops.length > 1 && Math.max(...tops) - Math.min(...tops) > 6) split.push(m[0]);
    }
  }
  const right = s.getBoundingClientRect().right;
  for (const e of s.querySelectorAll('p, table, td')) {
    if (e.getBoundingClientRect().right > right + 1) cut.push(e.innerText.slice(0, 60));
  }
  // every box from the summary up to the widget: none scrolls its own content
  for (let e = s; e && e !== r.parentElement; e = e.parentElement) {
    const st = getComputedStyle(e);
    if (e.scrollHeight > e.clientHeight + 1 && /auto|scroll/.test(st.overflowY)) scroll.push(`${e.className} ${e.scrollHeight} > ${e.clientHeight}px`);
    if (e.scrollWidth > e.clientWidth + 1 && /auto|scroll|hidden/.test(st.overflowX)) scroll.push(`${e.className} ${e.scrollWidth} > ${e.clientWidth}px wide`);
  }
  return {split, cut, scroll, words: s.innerText.split(/\\s+/).length};
}"""


@widgets_only
def test_summary_is_readable_without_split_words_or_inner_scroll(notebook):
    """Under every widget's figure the summary wraps at spaces only (no word on two lines), nothing is cut at its
    right edge, and no box around it scrolls on its own (issue 25), at 1280x720 with the file browser folded. A
    screenshot of each summary goes to _build/screenshots/lab-<chapter>-<k>-summary.png."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    stem = notebook.name.removesuffix(".ipynb")
    set_left_sidebar(notebook.page, False)
    problems = []
    for k, i in enumerate(widget_cells(notebook.cells)):
        scroll_widget_to_top(notebook, i)
        found = notebook.js(JS_SUMMARY, i)
        summary = notebook.page.evaluate_handle("i => __root(i).querySelector('.llmsizing-summary')", i).as_element()
        if summary is not None:
            summary.scroll_into_view_if_needed()
            summary.screenshot(path=str(SHOTS / f"lab-{stem}-{k}-summary.png"))
        if found is None:
            problems.append(f"cell {i}: no summary (.llmsizing-summary) under the figure")
            continue
        assert found["words"] > 5, f"cell {i}: the summary is (almost) empty"
        problems += [f"cell {i}: {what} {found[key]}" for key, what in (
            ("split", "words split over two lines:"), ("cut", "rows cut at the right:"),
            ("scroll", "boxes that scroll inside the widget:")) if found[key]]
    assert not problems, f"{notebook.name}: " + "; ".join(problems)


JS_LABELS = f"""i => {{
  const r = __root(i);
  const out = [];
  for (const c of r.querySelectorAll('{CONTROLS}')) {{
    // the description label (and a checkbox's text after its box)
    // (ipywidgets puts the tooltip on the label, the control or its input, depending on the control)
    const tip = [c, ...c.querySelectorAll('[title]')].map(e => e.title).find(t => t && t !== 'null') || '';
    for (const l of c.querySelectorAll('.widget-label, .widget-label-basic, .widget-label-basic > span')) {{
      const text = l.textContent.replace(/\u200b/g, '').trim();       // a checkbox's indent label is a zero-width space
      if (!text) continue;
      const title = l.title || tip;
      out.push({{text, cut: l.scrollWidth > l.clientWidth + 0.5, width: l.clientWidth, need: l.scrollWidth, title}});
    }}
  }}
  return out;
}}"""


@widgets_only
def test_control_labels_are_whole_and_carry_a_tooltip(notebook):
    """Every control's label is shown whole (its text no wider than its box: scrollWidth <= clientWidth); one
    that had to be cut would need a tooltip that is not "null" (issue 25: "global batch (s…" with no tooltip).
    (ipywidgets 8 shows a drop-down's or a checkbox's ``tooltip`` only when it has no description: a label must
    say enough by itself, and units go into the options, e.g. "512 sequences".)"""
    problems = []
    for i in widget_cells(notebook.cells):
        labels = notebook.js(JS_LABELS, i)
        assert labels, f"{notebook.name} cell {i}: no control labels found"
        problems += [f"cell {i}: {lab['text']!r} cut ({lab['need']} > {lab['width']} px; tooltip "
                     f"{lab['title']!r})" for lab in labels if lab["cut"]]
        problems += [f"cell {i}: {lab['text']!r} is cut and has no tooltip" for lab in labels
                     if lab["cut"] and (not lab["title"] or lab["title"] == "null")]
    assert not problems, f"{notebook.name}: " + "; ".join(problems)


@widgets_only
def test_no_tooltip_reads_null(notebook):
    """ipywidgets 8 sets a description's title from ``tooltip``, which is None unless given: the browser then
    shows "null" on hover (issue 25). No element of any widget has the title "null" (or "undefined")."""
    bad = notebook.js("""() => Array.from(document.querySelectorAll('.jp-NotebookPanel .jupyter-widgets [title]'))
        .filter(e => /^(null|undefined)$/.test(e.title)).map(e => `${e.className}: ${e.textContent.trim().slice(0, 40)}`)""")
    assert not bad, f"{notebook.name}: tooltips reading null: {bad}"


JS_FIGURE = """i => { const r = __root(i); const img = r.querySelector('img');
  const err = Array.from(r.querySelectorAll('.widget-html')).map(h => h.innerText).find(t => t.includes('⚠')) || '';
  return {src: """ + JS_SRC + """(img), error: err}; }"""


def _move(notebook, i: int, n: int, back: bool = False) -> str | None:
    """Move the ``n``-th control of widget cell ``i`` as a reader would (a slider one step by keyboard, the next
    option of a drop-down, another toggle button, a checkbox click, one more GPU in a multi-select); with
    ``back``, undo that move. Returns what was done, or None if the control has nothing to move to."""
    root = notebook.page.evaluate_handle("i => __root(i)", i).as_element()
    ctrl = root.query_selector_all(CONTROLS)[n]
    kind = ctrl.evaluate("c => c.className")
    label = ctrl.evaluate("c => (c.querySelector('.widget-label') || {}).textContent || c.innerText.slice(0, 30)")
    if "widget-slider" in kind:
        handle = ctrl.query_selector(".noUi-handle")
        readout = ctrl.query_selector(".widget-readout")
        before = readout.inner_text() if readout else None
        handle.focus()
        handle.press("ArrowLeft" if back else "ArrowRight")
        if not back and readout is not None and readout.inner_text() == before:
            handle.press("ArrowLeft")                    # at the end: the other way
            notebook.moved_left = True
        return f"slider {label!r} {before!r} -> {readout.inner_text() if readout else '?'!r}"
    if "widget-dropdown" in kind:
        select = ctrl.query_selector("select")
        options = select.evaluate("s => Array.from(s.options).map(o => o.value)")
        current = select.evaluate("s => s.value")
        if len(options) < 2:
            return None
        k = options.index(current)
        new = notebook.dropdown_from if back else options[k + 1] if k + 1 < len(options) else options[k - 1]
        notebook.dropdown_from = current
        select.select_option(new)
        return f"drop-down {label!r} {current!r} -> {new!r}"
    if "widget-toggle-buttons" in kind:
        buttons = ctrl.query_selector_all("button")
        current = next(k for k, b in enumerate(buttons) if "mod-active" in (b.get_attribute("class") or ""))
        target = notebook.toggle_from if back else (current + 1) % len(buttons)
        notebook.toggle_from = current
        buttons[target].click()
        return f"toggle {label!r} #{current} -> #{target}"
    if "widget-checkbox" in kind:
        ctrl.query_selector("input").click()
        return f"checkbox {label!r}"
    if "widget-select-multiple" in kind:
        select = ctrl.query_selector("select")
        chosen = select.evaluate("s => Array.from(s.selectedOptions).map(o => o.value)")
        options = select.evaluate("s => Array.from(s.options).map(o => o.value)")
        if back:
            select.select_option(notebook.selected_before)
            return "multi-select back"
        notebook.selected_before = chosen
        extra = next((o for o in options if o not in chosen), None)
        select.select_option(chosen + [extra] if extra is not None else chosen[:-1])
        return f"multi-select {label!r} + {extra!r}"
    return None


def _wait_redrawn(notebook, i: int, before: dict) -> dict:
    try:
        notebook.page.wait_for_function(
            "([i, b]) => { const s = (" + JS_FIGURE + ")(i); return s.src !== b.src || s.error !== b.error; }",
            arg=[i, before], timeout=20_000, polling=POLL_MS)
    except Exception:  # noqa: BLE001  (no change: reported by the caller)
        pass
    notebook.page.wait_for_function(
        "() => /\\|\\s*Idle/.test((document.querySelector('#jp-main-statusbar') || document.body).innerText)",
        timeout=60_000, polling=POLL_MS)
    wait_image_settled(notebook, i)
    return notebook.js(JS_FIGURE, i)


#: The widget's figure has loaded (or there is none) and two frames have been painted since.
JS_IMAGE_SETTLED = """i => new Promise(done => {
  const img = __root(i) && __root(i).querySelector('img');
  const frames = () => requestAnimationFrame(() => requestAnimationFrame(() => done(true)));
  if (!img || img.complete) frames(); else { img.addEventListener('load', frames, {once: true});
                                             img.addEventListener('error', frames, {once: true}); }
})"""


def wait_image_settled(notebook, i: int) -> None:
    """Wait until widget cell ``i``'s figure has loaded and been painted (instead of a fixed pause, issue 38:
    `make check-live` under 8 minutes)."""
    notebook.page.evaluate(JS_IMAGE_SETTLED, i)


# Issue 38: the time from a move to what the reader sees change: the widget marked busy (Dashboard.update sends
# its class before the work; the page fades the figure and says "working out this setting" after 120 ms) or the
# new figure or message, whichever comes first (``feedback``); the new figure's message in the page
# (``redrawn``: the img's src, or the message, changed); and the participant's wait (``painted``): the new
# image fetched and decoded (``img.decode()``), the busy mark gone (the figure no longer faded), and the next
# frame drawn (its requestAnimationFrame, then a task after that frame: the main thread has painted it).
JS_WATCH_REDRAW = """i => {
  const cell = __cells()[i], board = cell.querySelector('.llmsizing-dashboard');
  // from the reader's own action that sets the control's value (the key press, the released click, the
  // drop-down's change), not from the harness. A press (mousedown) comes earlier: the value changes only when
  // the button is let go, and the first press in a cell also makes JupyterLab activate that cell (layout of
  // the whole notebook) and the harness has a round trip between press and release (87 ms for ch4b's toggle
  // at a load of 8, 10 ms for the checkbox after it; issue 38). It is recorded apart: pressed_ms.
  let t0 = null, tDown = null;
  cell.addEventListener('mousedown', () => { if (tDown === null) tDown = performance.now(); },
                        {capture: true, once: true});
  for (const kind of ['keydown', 'click', 'change', 'input'])
    cell.addEventListener(kind, () => {
      if (t0 !== null) return;
      t0 = performance.now();
      if (tDown !== null) window.__redraw.pressed_ms = t0 - tDown;
    }, {capture: true, once: true});
  const image = () => cell.querySelector('.llmsizing-dashboard img');
  const img = () => (image() || {}).src || '';
  // textContent, not innerText: innerText lays the page out, and this runs at every change of the cell (it
  // added forced layouts to the very moves it timed, redraw38)
  const err = () => Array.from(cell.querySelectorAll('.widget-html')).map(h => h.textContent)
    .find(t => t.includes('⚠')) || '';
  // the summary under the figure (its text): 'summarised' is a frame after it changed (page35: the figure
  // is painted before the summary arrives)
  const summ = () => { const s = cell.querySelector('.llmsizing-summary'); return s ? s.textContent : ''; };
  const src0 = img(), err0 = err(), summ0 = summ();
  let summFired = false;
  // settled: the dashboard's busy mark taken off (its redraw over), whether or not the figure changed (a
  // move whose answer looks the same, e.g. chapter 12's gradient buffer on a small model: the harness then
  // waited 30 s for a change, part29b)
  window.__redraw = {feedback: null, redrawn: null, painted: null, pressed_ms: null, settled: null,
                     summarised: null};
  // a frame drawn: its requestAnimationFrame, then a task queued from there runs after the frame's paint
  const afterFrame = done => requestAnimationFrame(() => {
    const c = new MessageChannel(); c.port1.onmessage = done; c.port2.postMessage(0); });
  // painted: the new figure (or message) ready and the busy mark gone (while it is on, past BUSY_DELAY_MS,
  // the new figure shows faded), then a frame drawn
  let ready = false, fired = false;
  // the busy mark: on the dashboard's image (lat37), or on the dashboard itself (before)
  const BUSY = /(^|\\s)llmsizing-busy(\\s|$)/;
  const busy = () => !!board && (board.classList.contains('llmsizing-busy')
                                 || !!board.querySelector('img.llmsizing-busy'));
  const marked = t => t === board || (t.tagName === 'IMG' && !!board && board.contains(t));
  const painted = () => {
    if (fired || !ready || busy()) return;
    fired = true;
    afterFrame(() => {
      if (window.__redraw.painted === null) window.__redraw.painted = performance.now() - t0; });
  };
  const seen = records => {
    if (t0 === null) return;
    const now = performance.now() - t0, src = img(), changed = src !== src0 || err() !== err0;
    if (window.__redraw.settled === null && !busy() && (records || []).some(r => marked(r.target)
        && r.attributeName === 'class' && BUSY.test(r.oldValue || ''))) {
      window.__redraw.settled = now;
      if (!changed) ready = true;
    }
    if (window.__redraw.feedback === null && (changed || busy())) window.__redraw.feedback = now;
    if (window.__redraw.redrawn === null && changed) {
      window.__redraw.redrawn = now;
      const el = image();
      // a message (the figure removed) or no new image: ready now; else once the new PNG is fetched and
      // decoded (img.decode(): ready to paint)
      if (src === src0 || !el || !src || err()) ready = true;
      else el.decode().then(() => { ready = true; painted(); }, () => { ready = true; painted(); });
    }
    painted();
    if (!summFired && summ() !== summ0) {
      summFired = true;
      afterFrame(() => { window.__redraw.summarised = performance.now() - t0; });
    }
  };
  if (window.__redrawObserver) window.__redrawObserver.disconnect();
  window.__redrawObserver = new MutationObserver(seen);
  window.__redrawObserver.observe(cell, {attributes: true, attributeOldValue: true, subtree: true,
                                         childList: true, characterData: true});
}"""
JS_IMAGE_SHOWN = """i => { const img = __root(i).querySelector('img');
  return !!img && img.offsetParent !== null && img.getBoundingClientRect().height > 0; }"""
#: The longest median wait (ms), per widget, before a reader sees a move answered (the busy mark or the redraw).
#: Measured on the shared 2-core machine under a load of 6 (issue 38): 202 ms (chapter 17, whose redraws took
#: 1.7-2.9 s there) and 249 ms (chapter 18); without the busy mark chapter 17 answered only with its redraw.
FEEDBACK_MS = 300
#: Issue 38's goal (ms) for a participant's wait: a move to its new figure painted. Recorded with every
#: widget's times (``goal_ms``) and in the bar's failure message; the bar is test_app_widgets.PAINTED_MS.
GOAL_MS = 100
REDRAW_TIMES = SHOTS / "lab-redraw-times.json"


@widgets_only
def test_every_control_changes_the_figure_or_says_why(notebook):
    """Issue 25: "moving max GPUs from 4096 to 16384 changes nothing in the figure". Each control of each
    widget, moved one step from the default view and then back, changes the figure (the PNG the reader sees:
    a control that cannot change the answer says so in the figure, which changes it) or shows the library's
    message saying why the combination is refused."""
    problems = []
    for i in widget_cells(notebook.cells):
        scroll_widget_to_top(notebook, i)
        problems += move_every_control(notebook, i, _wait_redrawn, f"{notebook.name} cell {i}", REDRAW_TIMES)
    assert not problems, f"{notebook.name}: " + "; ".join(problems)


def move_every_control(page, i: int, wait_redrawn, label: str, path,
                       painted_ms: float | None = None) -> list[str]:
    """Move each control of widget ``i`` one step from the default view and back (``page``: the lab's
    notebook or a Voila page's widgets, both with ``js`` and ``moved_left``; ``wait_redrawn(page, i,
    before)`` waits for the next figure): what a reader would see wrong, as messages. Each move's times go to
    ``path`` under ``label``; test_app_widgets.py runs the same moves on every widget in Voila. With
    ``painted_ms``, the median participant's wait (the move to the new figure painted, JS_WATCH_REDRAW's
    ``painted``) must be at most that, and a move whose new figure was never seen painted is a problem."""
    problems = []
    count = page.js(f"i => __root(i).querySelectorAll('{CONTROLS}').length", i)
    timings = []
    for n in range(count):
        before = page.js(JS_FIGURE, i)
        page.moved_left = False
        page.js(JS_WATCH_REDRAW, i)
        done = _move(page, i, n)
        if done is None:
            continue
        after = wait_redrawn(page, i, before)
        try:                      # (the painted frame comes a frame after the figure settles; none: reported)
            page.page.wait_for_function("() => window.__redraw.painted !== null", timeout=10_000,
                                        polling=POLL_MS)
        except Exception:  # noqa: BLE001
            pass
        timings.append({"move": done, **page.js("() => window.__redraw")})
        if after["src"] == before["src"] and after["error"] == before["error"]:
            problems.append(f"{label}: {done} changed nothing in the figure and said nothing")
        elif painted_ms is not None and timings[-1]["painted"] is None:
            problems.append(f"{label}: {done}: its new figure or message was never seen painted")
        if after["error"] and page.js(JS_IMAGE_SHOWN, i):
            problems.append(f"{label}: {done} is refused, and an empty image (the broken-image icon) sits "
                            "under the message")
        _move(page, i, n, back=True) if not page.moved_left else _move_right(page, i, n)
        wait_redrawn(page, i, after)
    median = lambda key: _median([t[key] for t in timings if t[key] is not None])      # noqa: E731
    feedback, painted = median("feedback"), median("painted")
    redrawn = sorted(t["redrawn"] for t in timings if t["redrawn"] is not None)
    waits = sorted(t["painted"] for t in timings if t["painted"] is not None)
    ms = lambda x: None if x is None else round(x)                                     # noqa: E731
    _record_redraw_times(label, {
        "moves": len(timings),
        "feedback_ms_median": ms(feedback), "redrawn_ms_median": ms(median("redrawn")),
        "redrawn_ms_max": round(redrawn[-1]) if redrawn else None,
        "painted_ms_median": ms(painted), "painted_ms_max": round(waits[-1]) if waits else None,
        "painted_ms_bar": painted_ms, "goal_ms": GOAL_MS, "each": timings}, path)
    if feedback is not None and feedback > FEEDBACK_MS:
        answered = sum(t["feedback"] is not None for t in timings)
        problems.append(f"{label}: a move is answered after {feedback:.0f} ms (median of "
                        f"{answered}; the busy mark or the redraw, whichever first)")
    if painted_ms is not None and painted is not None and painted > painted_ms:
        problems.append(f"{label}: a participant waits {painted:.0f} ms from a move to its new figure "
                        f"painted (median of {len(waits)} moves; the bar is {painted_ms:.0f} ms, the goal "
                        f"{GOAL_MS} ms)")
    return problems


def _median(values: list[float]) -> float | None:
    """The median (the upper one of an even count, as before); None for no values."""
    values = sorted(values)
    return values[len(values) // 2] if values else None


def _record_redraw_times(key: str, entry: dict, path=REDRAW_TIMES) -> None:
    """Add one widget's timings to ``path`` (locked: `make check-live`'s two workers both write it)."""
    import fcntl

    SHOTS.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = json.loads(path.read_text()) if path.exists() else {}
        record[key] = entry
        path.write_text(json.dumps(record, indent=1))


def _move_right(notebook, i: int, n: int) -> str:
    """Undo a slider move that went left (the slider was at its right end). Returns what was done, as
    :func:`_move` does (a timed move that returns None is not recorded: part29b)."""
    root = notebook.page.evaluate_handle("i => __root(i)", i).as_element()
    ctrl = root.query_selector_all(CONTROLS)[n]
    handle = ctrl.query_selector(".noUi-handle")
    readout = ctrl.query_selector(".widget-readout")
    before = readout.inner_text() if readout else None
    handle.focus()
    handle.press("ArrowRight")
    return f"slider back right {before!r} -> {readout.inner_text() if readout else '?'!r}"


JS_STATIC_COPY = """name => {
  const marks = Array.from(document.querySelectorAll('.jp-NotebookPanel .llmsizing-default-of-' + name));
  return {live: !!document.querySelector('.jp-NotebookPanel .llmsizing-live-' + name),
          marks: marks.length,
          // what a reader sees of the cell holding the static copy: its outputs' boxes
          shown: marks.map(m => { const a = m.closest('.jp-OutputArea');
                                  return a ? a.getBoundingClientRect().height : -1; }),
          images: marks.map(m => { const a = m.closest('.jp-OutputArea'); const img = a && a.querySelector('img');
                                   return img ? img.naturalWidth : 0; })};
}"""


@widgets_only
def test_static_default_figure_is_hidden_once_the_widget_renders(notebook):
    """Issue 25: in the lab a static copy of the default figure sat right under the live widget. Each live widget
    whose chapter shows a static copy (``charts.show(..., widget=name)``, marked) hides that copy's outputs once
    it has rendered: after Run All the marked cell still has its figure (the checked output ran again) but it
    takes no room on the page."""
    names = {}
    for i in widget_cells(notebook.cells):
        for name in re.findall(r"\b(\w+_widget)\(", _src(notebook.cells[i])):
            names[name] = i
    marked = {m for c in notebook.cells if c["cell_type"] == "code" for m in re.findall(r'widget="(\w+_widget)"', _src(c))}
    problems = []
    for name in sorted(names):
        state = notebook.js(JS_STATIC_COPY, name)
        if not state["live"]:
            problems.append(f"{name}: the live widget carries no style (.llmsizing-live-{name})")
        if name not in marked:
            continue                              # a chapter whose figure is in the text, not a copy (ch10, ch11)
        if state["marks"] != 1 or not state["images"] or not state["images"][0]:
            problems.append(f"{name}: expected one marked static copy with its figure, found {state}")
        elif state["shown"][0] != 0:
            problems.append(f"{name}: the static copy is shown under the live widget ({state['shown'][0]:.0f} px)")
    if notebook.name.startswith(("12_", "15_")):
        assert marked, f"{notebook.name}: no static copy is marked"
    assert not problems, f"{notebook.name}: " + "; ".join(problems)


JS_COLUMN = """i => { const col = __root(i).querySelector('.widget-vbox');
  return {scroll: col.scrollLeft, wide: col.scrollWidth, width: col.clientWidth}; }"""


@widgets_only
def test_controls_column_never_scrolls_sideways(notebook):
    """Issue 38: drop-downs stuck out of the controls' column by 2 px, so the column could scroll sideways, and
    after a drop-down was clicked it did, cutting the first letters of the labels (tp, ZeRO stage,
    micro-batch). Nothing sticks out of the column, and after each drop-down is clicked the column has not
    moved and every label is whole."""
    problems = []
    for i in widget_cells(notebook.cells):
        scroll_widget_to_top(notebook, i)
        problems += column_problems(notebook, i, f"cell {i}")
    assert not problems, f"{notebook.name}: " + "; ".join(problems)


def column_problems(page, i: int, label: str) -> list[str]:
    """What sticks out of widget ``i``'s controls' column, and how far the column scrolls sideways and which
    labels are cut after each of its drop-downs is clicked (``page``: the lab's notebook or a Voila page's
    widgets, both with ``js`` and ``page``); test_app_widgets.py checks every widget in Voila with it."""
    problems = []
    col = page.js(JS_COLUMN, i)
    if col["wide"] > col["width"]:
        problems.append(f"{label}: the controls are {col['wide']} px wide in a {col['width']} px column")
    root = page.page.evaluate_handle("i => __root(i)", i).as_element()
    for select in root.query_selector_all(".widget-dropdown select"):
        select.click()
        page.page.keyboard.press("Escape")
        col = page.js(JS_COLUMN, i)
        if col["scroll"]:
            problems.append(f"{label}: after a drop-down click the column scrolled {col['scroll']} px "
                            "sideways")
    cut = [lab["text"] for lab in page.js(JS_LABELS, i) if lab["cut"]]
    if cut:
        problems.append(f"{label}: labels cut after the drop-down clicks: {cut}")
    return problems
