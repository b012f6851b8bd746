"""What headless Chromium spends its CPU on while a participant moves a chapter's widget in Voila (lat37,
issues 35 and 38). Not a test (the name does not start with test_); run it by hand, one at a time:

    PYTHONPATH=$PWD/src .venv/bin/python tests/browser/trace_moves.py --chapter 17 --out /tmp/trace17.json

It opens the chapter in ``make app``'s Voila at 1280x900 with reduced motion (as conftest.voila_page does),
then, on the chapter's first widget, with measure_participant's moves (every control one step and back, a
model pick between):

* ``idle``: the CPU Chromium's processes use in 5 s with nothing moving (the page's own timers);
* ``probe``: the CPU of the harness's own kind of work without a move: the calls measure_participant makes
  around a move (JS_FIGURE, JS_WATCH_REDRAW, the move's look-ups, its waits polling every POLL_MS), timed
  against a control that is not moved;
* ``moves``: each move's CPU per Chromium process (browser, renderer, GPU, utility: from /proc, by the
  ``--type=`` of each process's command line), with the kernel's messages to the page over the move (a
  WebSocket wrapper put in the page before it loads: count, bytes, message type, the widget state keys each
  ``comm_msg`` changes);
* ``--trace``: a Chromium trace (all processes) around ``--trace-moves`` moves, summarised as self time per
  process, thread and event, and the ``Paint`` events by the node painted (:func:`trace_summary`, in the
  ``--out`` JSON as ``trace_summary`` and printed; draw42); per script for the renderer's JavaScript:
  ``--profile`` (the V8 CPU profile).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "tools")]

import check_site  # noqa: E402
import serve_live  # noqa: E402
from conftest import (BOOK, JS_WIDGETS_DRAWN, POLL_MS, VOILA_MOTION, VOILA_VIEWPORT, VoilaPage,  # noqa: E402
                      VoilaServer, _guard, process_age_s)

#: A WebSocket wrapper put in the page before its scripts run: every frame in and out, with its size and, for
#: the kernel protocol (JSON text, or jupyter_server's v1 binary framing), the channel, message type and, for
#: a comm message, its method and the widget state keys it carries (window.__ws, read and emptied per move).
JS_WS_LOG = r"""(() => {
  const Orig = window.WebSocket;
  window.__ws = [];
  const dec = new TextDecoder();
  function parse(data) {
    try {
      if (typeof data === 'string') {
        const m = JSON.parse(data);
        return {ch: m.channel, type: (m.header || {}).msg_type, content: m.content || {},
                nbuf: (m.buffers || []).length};
      }
      const dv = new DataView(data), n = Number(dv.getBigUint64(0, true)), off = [];
      for (let k = 0; k < n; k++) off.push(Number(dv.getBigUint64(8 * (k + 1), true)));
      const part = k => dec.decode(new Uint8Array(data, off[k], (k + 1 < n ? off[k + 1] : data.byteLength)
                                                   - off[k]));
      return {ch: part(0), type: JSON.parse(part(1)).msg_type, content: JSON.parse(part(4)),
              nbuf: Math.max(0, n - 5)};
    } catch (e) { return {err: String(e)}; }
  }
  function what(p) {
    const c = p.content || {};
    if (p.type === 'status') return c.execution_state;
    if (p.type === 'comm_msg' && c.data) {
      const st = c.data.state ? Object.keys(c.data.state).join(',') : '';
      return (c.data.method || '') + (st ? ':' + st : '') + (c.data.event ? ' ' + c.data.event : '');
    }
    return '';
  }
  function log(dir, data) {
    const size = typeof data === 'string' ? data.length : data.byteLength;
    const p = parse(data);
    window.__ws.push({t: performance.now(), dir: dir, size: size, ch: p.ch, type: p.type, what: what(p),
                      nbuf: p.nbuf, err: p.err});
  }
  function Wrapped(...args) {
    const ws = new Orig(...args);
    ws.addEventListener('message', ev => log('in', ev.data));
    const send = ws.send.bind(ws);
    ws.send = d => { log('out', d); return send(d); };
    return ws;
  }
  Wrapped.prototype = Orig.prototype;
  for (const k of ['CONNECTING', 'OPEN', 'CLOSING', 'CLOSED']) Wrapped[k] = Orig[k];
  window.WebSocket = Wrapped;
})();"""


def chromium_procs(root: int) -> dict[int, str]:
    """Chromium's processes under ``root`` (this script), by pid: 'browser', 'renderer', 'gpu-process',
    'utility' (the network service), 'zygote' ... (the ``--type=`` of the command line)."""
    import measure_participant as mp

    found = {}
    for p in mp._tree(root)[1:]:
        try:
            # (a zygote's child has its whole command line, spaces and all, in argv[0])
            argv = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").split()
        except OSError:
            continue
        if b"run-driver" in argv[:3]:
            found[p] = "playwright driver"      # (not Chromium: the harness's relay, reported apart)
            continue
        if not argv or b"chrom" not in argv[0].lower():
            continue
        kind = next((a.split(b"=", 1)[1].decode() for a in argv if a.startswith(b"--type=")), "browser")
        sub = next((a.split(b"=", 1)[1].decode() for a in argv if a.startswith(b"--utility-sub-type=")), "")
        found[p] = kind + (f" ({sub.split('.')[-2] if '.' in sub else sub})" if sub else "")
    return found


def cpu_by_kind(procs: dict[int, str]) -> dict[str, float]:
    """On-CPU ms of each kind of Chromium process (all threads), now."""
    import measure_participant as mp

    out: dict[str, float] = collections.defaultdict(float)
    for p, kind in procs.items():
        out[kind] += mp._task_ns(p) / 1e6
    return dict(out)


def diff(a: dict, b: dict) -> dict:
    return {k: round(b.get(k, 0) - a.get(k, 0), 1) for k in sorted(set(a) | set(b))}


def open_page(browser, voila, name: str, ws_log: bool):
    page = browser.new_page(viewport=VOILA_VIEWPORT, reduced_motion=VOILA_MOTION)
    blocked = _guard(page)
    if ws_log:
        page.add_init_script(JS_WS_LOG)
    page.goto(voila.url(name), wait_until="load", timeout=240_000)
    page.wait_for_selector("#rendered_cells", state="visible", timeout=240_000)
    import test_app_widgets as taw

    count = len(taw.widget_cells(taw._cells(BOOK / name)))
    page.wait_for_function(JS_WIDGETS_DRAWN, arg=count, timeout=240_000, polling=POLL_MS)
    return VoilaPage(name, page, blocked, [], voila)


def ws_summary(frames: list[dict]) -> dict:
    """The frames of one move: counts and bytes in each direction, and the inbound ones by type/what."""
    inn = [f for f in frames if f["dir"] == "in"]
    out = [f for f in frames if f["dir"] == "out"]
    kinds = collections.Counter(f"{f['ch']} {f['type']} {f['what']}".strip() for f in inn)
    return {"in": len(inn), "in_bytes": sum(f["size"] for f in inn), "out": len(out),
            "out_bytes": sum(f["size"] for f in out), "in_kinds": dict(kinds),
            "out_kinds": dict(collections.Counter(f"{f['ch']} {f['type']} {f['what']}".strip() for f in out))}


def trace_summary(path: Path, moves: int, top: int = 40) -> dict:
    """A Chromium trace written by ``--trace`` summarised per move (draw42): the self time (ms) of each
    (process, thread, event) over its complete events, nested events taken out of their parent's time, the
    ``top`` largest; and the ``Paint`` events by the node they painted (count and self ms per move: which part
    of the page each frame recorded again). Wall time on each thread, under tracing (which adds its own)."""
    data = json.loads(path.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    meta = {(e["pid"], e.get("tid")) if e["name"] == "thread_name" else e["pid"]: e["args"]["name"]
            for e in events if e.get("ph") == "M" and e.get("name") in ("thread_name", "process_name")}
    by_thread: dict = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and "dur" in e:
            by_thread[e["pid"], e["tid"]].append(e)
    self_ms: dict = collections.Counter()
    paints: dict = collections.defaultdict(lambda: [0, 0.0])
    for (pid, tid), es in by_thread.items():
        es.sort(key=lambda e: (e["ts"], -e["dur"]))
        own = [e["dur"] for e in es]
        stack: list[int] = []
        for i, e in enumerate(es):
            while stack and es[stack[-1]]["ts"] + es[stack[-1]]["dur"] <= e["ts"]:
                stack.pop()
            if stack:
                own[stack[-1]] -= e["dur"]
            stack.append(i)
        where = (str(meta.get(pid, pid)), str(meta.get((pid, tid), tid)))
        for e, t in zip(es, own):
            self_ms[(*where, e["name"])] += t / 1e3
            if e["name"] == "Paint":
                node = ((e.get("args") or {}).get("data") or {}).get("nodeName", "?")[:70]
                paints[node][0] += 1
                paints[node][1] += t / 1e3
    n = max(moves, 1)
    return {"self_ms_per_move": [[*k, round(v / n, 2)] for k, v in self_ms.most_common(top)],
            "paint_by_node_per_move": {k: [round(c / n, 1), round(t / n, 2)]
                                       for k, (c, t) in sorted(paints.items(), key=lambda x: -x[1][1])}}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chapter", default="17")
    ap.add_argument("--moves", type=int, default=30)
    ap.add_argument("--out", type=Path, default=Path("/tmp/trace_moves.json"))
    ap.add_argument("--no-ws", action="store_true", help="no WebSocket wrapper in the page")
    ap.add_argument("--trace", type=Path, default=None, help="write a Chromium trace of --trace-moves moves")
    ap.add_argument("--trace-moves", type=int, default=12)
    ap.add_argument("--profile", action="store_true", help="a V8 CPU profile of the renderer over the moves")
    args = ap.parse_args(argv)

    import measure_participant as mp
    from playwright.sync_api import sync_playwright
    from test_app_widgets import Widgets
    from test_app_widgets import _wait_redrawn as voila_wait

    name = next(p.name for p in BOOK.glob(f"{args.chapter}_*.ipynb"))
    log = open("/tmp/trace_moves_voila.log", "wb")
    url, proc = serve_live.start_voila(serve_live.chapter_notebook("00"), log=log, timeout_s=120)
    voila = VoilaServer(url.split("/voila/render/")[0], proc, Path(log.name))
    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=check_site.find_headless_chromium(),
                                 args=check_site.CHROMIUM_ARGS, headless=True)
    result: dict = {"chapter": name, "load_before": os.getloadavg()}
    try:
        vp = open_page(browser, voila, name, ws_log=not args.no_ws)
        w = Widgets(vp)
        w.to_top(0)
        kernels = voila.kernels()
        ages = {k: process_age_s(k) for k in kernels}
        kpid = min((k for k in kernels if ages[k] is not None), key=ages.get, default=None)
        procs = chromium_procs(os.getpid())
        result["procs"] = sorted(set(procs.values()))
        mp._BROWSER[:] = [p for p, k in procs.items() if k != "playwright driver"]
        time.sleep(2)
        # idle: 5 s with nothing moving
        c0, t0 = cpu_by_kind(procs), time.perf_counter()
        time.sleep(5)
        result["idle_ms_per_s"] = {k: round(v / (time.perf_counter() - t0), 2)
                                   for k, v in diff(c0, cpu_by_kind(procs)).items()}
        if not args.no_ws:
            w.js("() => { window.__ws.length = 0; }")
        # probe: the harness's per-move calls with no move (the same look-ups, a wait that polls for 100 ms)
        probes = []
        for _ in range(10):
            c0 = cpu_by_kind(procs)
            t = time.perf_counter()
            before = w.js(mp.JS_FIGURE, 0)
            w.js(mp.JS_WATCH_REDRAW, 0)
            root = w.page.evaluate_handle("i => __root(i)", 0).as_element()
            ctrl = root.query_selector_all(mp.CONTROLS)[1]
            ctrl.evaluate("c => c.className")
            ctrl.evaluate("c => (c.querySelector('.widget-label') || {}).textContent")
            try:
                w.page.wait_for_function("() => false", timeout=100, polling=POLL_MS)
            except Exception:  # noqa: BLE001
                pass
            w.js(mp.JS_FIGURE, 0)
            w.js("() => window.__redraw")
            assert before is not None
            probes.append({"wall_ms": round((time.perf_counter() - t) * 1000),
                           **diff(c0, cpu_by_kind(procs))})
        result["probe"] = probes

        # the moves, each with its CPU per kind of process and the kernel's messages
        per_move = []
        orig_timed = mp._timed

        def timed(w_, i, act, wait, kernel_pid, kind):
            if not args.no_ws:
                w_.js("() => { window.__ws.length = 0; }")
            c0 = cpu_by_kind(procs)
            r = orig_timed(w_, i, act, wait, kernel_pid, kind)
            if r is None:
                return None
            r["cpu_by_kind"] = diff(c0, cpu_by_kind(procs))
            if not args.no_ws:
                frames = w_.js("() => window.__ws.splice(0)")
                r["ws"] = ws_summary(frames)
                r["ws_frames"] = [{k: f[k] for k in ("t", "dir", "size", "ch", "type", "what")}
                                  for f in frames]
            per_move.append(r)
            return r

        mp._timed = timed
        mp.MOVES = args.moves
        if args.profile:
            cdp = w.page.context.new_cdp_session(w.page)
            cdp.send("Profiler.enable")
            cdp.send("Profiler.setSamplingInterval", {"interval": 200})
            cdp.send("Profiler.start")
        if args.trace:
            browser.start_tracing(page=None, path=str(args.trace), categories=[
                "toplevel", "devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute",
                "blink", "cc", "gpu", "viz", "renderer.scheduler", "input", "loading", "benchmark",
                "disabled-by-default-devtools.timeline.frame", "ipc", "mojom", "netlog", "net"])
            mp.MOVES = args.trace_moves
        mp.participant(w, 0, voila_wait, kpid)
        if args.trace:
            browser.stop_tracing()
        if args.profile:
            prof = cdp.send("Profiler.stop")["profile"]
            Path(str(args.out) + ".cpuprofile").write_text(json.dumps(prof))
        result["moves"] = per_move
        if args.trace:
            result["trace_summary"] = trace_summary(args.trace, args.trace_moves)
    finally:
        result["load_after"] = os.getloadavg()
        args.out.write_text(json.dumps(result, indent=1))
        browser.close()
        pw.stop()
        serve_live._stop(proc)
        log.close()
    print(json.dumps({k: result[k] for k in ("idle_ms_per_s", "load_before", "load_after") if k in result}))
    for proc_name, thread, event, ms in result.get("trace_summary", {}).get("self_ms_per_move", [])[:25]:
        print(f"{ms:8.2f} ms a move  {proc_name[:12]:12s} {thread[:24]:24s} {event}")


if __name__ == "__main__":
    main()
