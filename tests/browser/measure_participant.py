"""Issue 38 (part24): one participant in a real browser, 50+ moves of a chapter's widget, each timed from the
input event to the new figure painted (test_lab.JS_WATCH_REDRAW), with the CPU time the kernel's processes
used over the move (its threads' on-CPU time from /proc, the kernel process and its worker processes apart:
the widget does not report its own). Not collected by `make check-live`
(the file name does not start with test_); run it by name, one process (no -n: the kernel's CPU is read from
this machine's /proc):

    .venv/bin/python -m pytest tests/browser/measure_participant.py -p no:cacheprovider -k voila
    PART_RUN=2 .venv/bin/python -m pytest tests/browser/measure_participant.py -p no:cacheprovider -k lab

The moves, for the chapter's first widget: a model picked in the model drop-down (a new model each time, from
the one picked before, mixture-of-experts and dense in turn: never a kept answer), then every other control
moved one step (``step``: a new setting) and back (``back``: the setting shown before, answered from the
dashboard's kept answers), for several models until at least $PART_MOVES (55) moves, $PART_PAUSE_S (0)
seconds apart. Times go to $PART_OUT
(_build/screenshots/participant-moves.json) under "<route> <chapter> run <PART_RUN>", with the 1-minute load
before and after; tools/participant_stats.py summarises them (median / p90 / max, and the wait split into
kernel CPU, the rest up to the page, browser).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from conftest import POLL_MS, SHOTS, _api, process_age_s
from test_app_widgets import Widgets, _voila
from test_app_widgets import _wait_redrawn as voila_wait
from test_lab import (CONTROLS, JS_FIGURE, JS_WATCH_REDRAW, _move, _move_right, _on, lab_page,  # noqa: F401
                      notebook)
from test_lab import _wait_redrawn as lab_wait
from test_lab import scroll_widget_to_top, widget_cells

OUT = Path(os.environ.get("PART_OUT", str(SHOTS / "participant-moves.json")))
RUN = os.environ.get("PART_RUN", "1")
MOVES = int(os.environ.get("PART_MOVES", "55"))
#: Seconds the participant waits before each move (default 0: back to back), as a reader looks at an answer
#: (spec30: chapter 12's speculation in the lab is measured with the pauses a reader makes). The pause is in
#: none of a move's times; the CPU used during it is recorded apart (``pause_kernel_cpu_ms``,
#: ``pause_workers_cpu_ms``: the worker's searches run then, and the kernel's threads take their results).
PAUSE_S = float(os.environ.get("PART_PAUSE_S", "0"))
CHAPTERS = ["17_long_context.ipynb", "18_mixture_of_experts.ipynb", "12_how_many_gpus.ipynb"]
#: The mixture-of-experts models picked in turn with dense ones (measure_painted.MOE; fast17c made their
#: first pick in chapter 17 faster)
MOE = ["qwen3-30b-a3b", "granite-3.0-1b-a400m", "granite-3.0-3b-a800m", "deepseek-v2", "gpt-oss-120b",
       "qwen3-235b-a22b", "deepseek-v3", "mixtral-8x7b", "olmoe-1b-7b", "llama-4-scout"]
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _tree(root: int) -> list[int]:
    """``root`` and its descendants (the kernel's worker processes), from /proc."""
    parent = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            pass
    found, todo = [root], [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        found += kids
        todo += kids
    return found


def _task_ns(pid: int) -> int:
    """On-CPU time (ns) of every thread of process ``pid`` (/proc/PID/task/TID/schedstat's first field: ns,
    not the 10 ms ticks of /proc/PID/stat); 0 if it is gone."""
    total = 0
    for task in Path(f"/proc/{pid}/task").glob("[0-9]*"):
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def cpu_ms(root: int | None) -> tuple[float | None, float | None]:
    """CPU time (ms) of the kernel process ``root`` (all its threads), and of its descendants (the worker
    processes: chapter 17's speculative searches, LLMSIZING_SPECULATE=1 under `make lab`)."""
    if root is None:
        return None, None
    return _task_ns(root) / 1e6, sum(_task_ns(p) for p in _tree(root)[1:]) / 1e6


def browser_pids() -> list[int]:
    """This test process's Chromium processes (its descendants whose command line names chrome or chromium:
    the page's renderer, the GPU and network processes and the browser itself)."""
    found = []
    for p in _tree(os.getpid())[1:]:
        try:
            if b"chrom" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0].lower():
                found.append(p)
        except OSError:
            pass
    return found


#: Chromium's processes (browser_pids), looked up once per test: a move's ``browser_cpu_ms`` is their CPU time
#: over the move (page35: the page side's work, which a loaded machine's waits do not inflate as they do the
#: wall times)
_BROWSER: list[int] = []


def _record(key: str, entry) -> None:
    rec = json.loads(OUT.read_text()) if OUT.exists() else {}
    rec[key] = entry
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(rec, indent=1))


def _model_select(w, i):
    sel = w.page.evaluate_handle(
        "i => Array.from(__root(i).querySelectorAll('.widget-dropdown')).find(d => "
        "/model/i.test((d.querySelector('.widget-label')||{}).textContent||''))", i).as_element()
    return sel.query_selector("select") if sel else None


def _move_over(w, i: int) -> None:
    """Wait (20 s at most) for the move's figure or message to change, or for the dashboard's redraw to end
    without a change (JS_WATCH_REDRAW's ``settled``): a move whose answer looks the same is timed to its
    busy mark taken off, not to the 20 s + 10 s timeouts (part29b: 24 of 36 gradient-buffer moves in
    chapter 12)."""
    try:
        w.page.wait_for_function("() => window.__redraw.redrawn !== null || window.__redraw.settled !== null",
                                 timeout=20_000, polling=POLL_MS)
    except Exception:  # noqa: BLE001  (neither: the route's own wait below reports it)
        pass


def _timed(w, i, act, wait, kernel_pid, kind):
    """Do ``act()`` (one move by the participant) and time it: JS_WATCH_REDRAW's times, the kernel's CPU."""
    cp = cpu_ms(kernel_pid)
    if PAUSE_S > 0:
        time.sleep(PAUSE_S)
    before = w.js(JS_FIGURE, i)
    w.js(JS_WATCH_REDRAW, i)
    c0 = cpu_ms(kernel_pid)
    b0 = sum(_task_ns(p) for p in _BROWSER)
    t = time.perf_counter()
    what = act()
    if what is None:
        return None
    _move_over(w, i)
    if w.js("() => window.__redraw.redrawn !== null || window.__redraw.settled === null"):
        wait(w, i, before)                 # (a changed figure: its busy mark gone and the image settled)
    try:
        w.page.wait_for_function("() => window.__redraw.painted !== null", timeout=10_000, polling=POLL_MS)
    except Exception:  # noqa: BLE001  (never painted: recorded as None)
        pass
    r = w.js("() => window.__redraw")
    c1 = cpu_ms(kernel_pid)
    b1 = sum(_task_ns(p) for p in _BROWSER)
    r.update(browser_cpu_ms=round((b1 - b0) / 1e6, 1) if _BROWSER else None)
    r.update(kind=kind, move=what, harness_ms=round((time.perf_counter() - t) * 1000),
             kernel_cpu_ms=None if c0[0] is None or c1[0] is None else round(c1[0] - c0[0], 1),
             workers_cpu_ms=None if c0[1] is None or c1[1] is None else round(c1[1] - c0[1], 1),
             load1=os.getloadavg()[0])
    if PAUSE_S > 0:
        r.update(pause_kernel_cpu_ms=None if cp[0] is None or c0[0] is None else round(c0[0] - cp[0], 1),
                 pause_workers_cpu_ms=None if cp[1] is None or c0[1] is None else round(c0[1] - cp[1], 1))
    return r


def participant(w, i, wait, kernel_pid) -> list[dict]:
    """A model pick, then every other control one step and back; again with the next model, to MOVES moves."""
    select = _model_select(w, i)
    options = select.evaluate("s => Array.from(s.options).map(o => o.value)") if select else []
    start = select.evaluate("s => s.value") if select else None
    others = [o for o in options if o != start and o not in MOE]
    others = [others[(j * 7) % len(others)] for j in range(len(others))] if others else []
    moe = [o for o in MOE if o in options and o != start]
    picks = [x for pair in zip(moe, others) for x in pair] + moe[len(others):] + others[len(moe):]
    count = w.js(f"i => __root(i).querySelectorAll('{CONTROLS}').length", i)
    model_ctrl = (w.js(f"i => Array.from(__root(i).querySelectorAll('{CONTROLS}')).findIndex(c => "
                       "/model/i.test((c.querySelector('.widget-label')||{}).textContent||''))", i)
                  if select else -1)
    moves, k = [], 0
    while len(moves) < MOVES:
        if picks:
            m = picks[k % len(picks)]      # mixture-of-experts and dense in turn (never a kept answer)
            k += 1

            def pick(m=m):
                _model_select(w, i).select_option(m)
                return f"model -> {m}"
            r = _timed(w, i, pick, wait, kernel_pid, "model pick")
            if r is not None:
                moves.append(r)
        elif k:
            break
        else:
            k = 1
        for n in range(count):
            if n == model_ctrl:
                continue
            w.moved_left = False
            r = _timed(w, i, lambda n=n: _move(w, i, n), wait, kernel_pid, "step")
            if r is None:
                continue
            moves.append(r)
            # (a slider at its right end went left: back is to the right; part29)
            back = ((lambda n=n: _move_right(w, i, n)) if w.moved_left
                    else (lambda n=n: _move(w, i, n, back=True)))
            r = _timed(w, i, back, wait, kernel_pid, "back")
            if r is not None:
                moves.append(r)
        if not picks and len(moves) >= MOVES:
            break
    return moves


@_voila(CHAPTERS)
def test_part_voila(voila_page):
    w = Widgets(voila_page)
    w.to_top(0)
    kernels = voila_page.server.kernels()        # this page's: the youngest (an earlier page's may linger)
    ages = {k: process_age_s(k) for k in kernels}
    pid = min((k for k in kernels if ages[k] is not None), key=ages.get, default=None)
    _BROWSER[:] = browser_pids()
    load0 = os.getloadavg()
    moves = participant(w, 0, voila_wait, pid)
    _record(f"voila {w.name[:2]} run {RUN}", {"load_before": load0, "load_after": os.getloadavg(),
                                             "kernels_seen": len(kernels), "moves": moves})


def _lab_kernel_pid(lab, name: str) -> int | None:
    sessions = _api(lab.base_url, lab.token, "/api/sessions")
    ids = [s["kernel"]["id"] for s in sessions if s["path"].endswith(name)]
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"ipykernel" in cmd and any(f"kernel-{k}".encode() in cmd for k in ids):
            return int(entry.name)
    return None


@_on(CHAPTERS)
def test_part_lab(notebook, lab):
    i = widget_cells(notebook.cells)[0]
    scroll_widget_to_top(notebook, i)
    pid = _lab_kernel_pid(lab, notebook.name)
    _BROWSER[:] = browser_pids()                 # (lab44: the lab's moves' browser CPU too, as Voila's)
    load0 = os.getloadavg()
    moves = participant(notebook, i, lab_wait, pid)
    _record(f"lab {notebook.name[:2]} run {RUN}", {"load_before": load0, "load_after": os.getloadavg(),
                                                  "kernel_found": pid is not None, "moves": moves})

