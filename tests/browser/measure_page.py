"""Issue 38 (page30): what a widget move costs outside the kernel, in Voila. The participant of
measure_participant.py (the same moves, ``$PART_MOVES`` of them), each move also recording:

* every kernel WebSocket frame the page received and sent during the move (time since the participant's input
  event, bytes, channel, message type, and for a widget's ``comm_msg`` its state keys), from a hook on the
  page's ``WebSocket`` put in before the page loads;
* the CPU the Voila server process (the Jupyter server that relays the kernel's messages) used over the move
  (its threads' on-CPU time, /proc), beside the kernel's;
* the page's main-thread time over the move from Chromium's DevTools Protocol (``Performance.getMetrics``:
  task, script, style recalculation and layout durations and counts).

Optional: ``$PAGE_TRACE`` (a file: Chromium's trace of the moves, which slows them) and ``$PAGE_STRACE`` (a
path prefix: the server's and the kernel's socket system calls with times, strace). Not collected by `make
check-live` (its name does not start with test_); one process, no -n:

    PART_MOVES=20 PAGE_OUT=/tmp/page.json .venv/bin/python -m pytest tests/browser/measure_page.py \
        -p no:cacheprovider -k 17
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import measure_participant as mp
import pytest
from conftest import _guard
from test_app_widgets import Widgets, _voila
from test_app_widgets import _wait_redrawn as voila_wait

OUT = Path(os.environ.get("PAGE_OUT", "/tmp/page-moves.json"))
RUN = os.environ.get("PART_RUN", "1")
CHAPTERS = ["17_long_context.ipynb", "12_how_many_gpus.ipynb"]

#: Before the page loads: every WebSocket the page opens logs its frames into window.__wslog (time, bytes,
#: direction, channel, msg_type, the comm's method and state keys), and how long the page's own handler
#: (ws.onmessage) ran on each. Both of Jupyter's wire forms are read: JSON text, and binary
#: (v1.kernel.websocket.jupyter.org: uint64 count and offsets, then channel, header, parent header,
#: metadata, content, buffers; or the legacy uint32 offsets with a JSON message first).
JS_HOOK = r"""(() => {
  window.__wslog = [];
  const dec = new TextDecoder();
  const describe = (data, proto) => {
    let msg = null, channel = null, size = 0;
    try {
      if (typeof data === 'string') { size = data.length; msg = JSON.parse(data); channel = msg.channel; }
      else {
        const buf = data instanceof ArrayBuffer ? data : data.buffer; size = buf.byteLength;
        const dv = new DataView(buf);
        if (proto && proto.startsWith('v1')) {
          const n = Number(dv.getBigUint64(0, true)), off = [];
          for (let k = 0; k < n; k++) off.push(Number(dv.getBigUint64(8 * (k + 1), true)));
          const end = k => k + 1 < n ? off[k + 1] : size;
          const part = k => dec.decode(new Uint8Array(buf, off[k], end(k) - off[k]));
          channel = part(0);
          msg = {header: JSON.parse(part(1)), content: JSON.parse(part(4))};
        } else {
          const n = dv.getUint32(0), o0 = dv.getUint32(4), o1 = n > 1 ? dv.getUint32(8) : size;
          msg = JSON.parse(dec.decode(new Uint8Array(buf, o0, o1 - o0))); channel = msg.channel;
        }
      }
    } catch (e) { return {size, err: String(e)}; }
    const h = (msg && msg.header) || {}, c = (msg && msg.content) || {}, d = c.data || {};
    return {size, channel, type: h.msg_type, method: d.method,
            keys: d.state ? Object.keys(d.state) : undefined,
            comm: c.comm_id ? c.comm_id.slice(0, 8) : undefined, state: c.execution_state};
  };
  const Orig = window.WebSocket;
  window.WebSocket = function (url, protocols) {
    const ws = protocols === undefined ? new Orig(url) : new Orig(url, protocols);
    ws.addEventListener('message', e => window.__wslog.push(
      Object.assign({t: performance.now(), dir: 'in'}, describe(e.data, ws.protocol))));
    // the page's own handler (JupyterLab's services set ws.onmessage): how long it runs per message
    let handler = null;
    const setOwn = Object.getOwnPropertyDescriptor(Orig.prototype, 'onmessage').set;
    Object.defineProperty(ws, 'onmessage', {get: () => handler, set: h => {
      handler = h;
      setOwn.call(ws, h && (e => {
        const a = performance.now(), out = h.call(ws, e);
        window.__wslog.push({t: a, dir: 'handled', ms: performance.now() - a,
                             size: typeof e.data === 'string' ? e.data.length : e.data.byteLength});
        return out; }));
    }});
    const send = ws.send.bind(ws);
    ws.send = data => { window.__wslog.push(Object.assign({t: performance.now(), dir: 'out'},
                                                          describe(data, ws.protocol)));
                        return send(data); };
    return ws;
  };
  window.WebSocket.prototype = Orig.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})();"""

#: The participant's input event, as JS_WATCH_REDRAW takes it (its t0), in window.__pg_t0.
JS_T0 = """i => { const cell = __cells()[i]; window.__pg_t0 = null; window.__wslog = [];
  for (const kind of ['keydown', 'click', 'change', 'input'])
    cell.addEventListener(kind, () => { if (window.__pg_t0 === null) window.__pg_t0 = performance.now(); },
                          {capture: true, once: true}); }"""

METRICS = ("TaskDuration", "ScriptDuration", "RecalcStyleDuration", "LayoutDuration", "RecalcStyleCount",
           "LayoutCount", "Nodes", "JSHeapUsedSize")


@pytest.fixture(scope="session")
def guard_network():
    """conftest's guard, plus the WebSocket hook (JS_HOOK) added before the page loads."""
    def guard(page):
        page.add_init_script(JS_HOOK)
        return _guard(page)
    return guard


def _metrics(cdp) -> dict:
    got = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return {k: got.get(k) for k in METRICS}


@_voila(CHAPTERS)
def test_page_voila(voila_page):
    w = Widgets(voila_page)
    w.to_top(0)
    cdp = voila_page.page.context.new_cdp_session(voila_page.page)
    cdp.send("Performance.enable", {"timeDomain": "threadTicks"})
    kernels = voila_page.server.kernels()
    ages = {k: mp.process_age_s(k) for k in kernels}
    pid = min((k for k in kernels if ages[k] is not None), key=ages.get, default=None)
    server_pid = voila_page.server.proc.pid
    original = mp._timed
    net = []                  # (the network side: CDP's frame times, seconds on its monotonic clock)
    cdp.send("Network.enable")
    cdp.on("Network.webSocketFrameReceived",
           lambda e: net.append(("in", e["timestamp"], len(e["response"]["payloadData"]))))
    cdp.on("Network.webSocketFrameSent",
           lambda e: net.append(("out", e["timestamp"], len(e["response"]["payloadData"]))))

    def timed(w, i, act, wait, kernel_pid, kind):
        m0, s0 = _metrics(cdp), mp._task_ns(server_pid)

        def act2():
            net.clear()
            w.js(JS_T0, i)
            return act()
        r = original(w, i, act2, wait, kernel_pid, kind)
        if r is None:
            return None
        time.sleep(0.25)                         # (the kernel's last status message of the move)
        m1, s1 = _metrics(cdp), mp._task_ns(server_pid)
        t0 = w.js("() => window.__pg_t0")
        origin = w.js("() => performance.timeOrigin")
        log = w.js("() => window.__wslog")
        # the network clock against the page's: the move's first frame sent (the page's send, then the
        # network's, within a fraction of a ms)
        sent = [f for f in log if f["dir"] == "out"]
        nsent = [n for n in net if n[0] == "out"]
        off = (nsent[0][1] * 1000 - sent[0]["t"]) if sent and nsent else None
        for f in log:
            f["t"] = None if t0 is None else round(f["t"] - t0, 1)
        arrivals = [None if off is None or t0 is None else round(n[1] * 1000 - off - t0, 1)
                    for n in net if n[0] == "in"]
        for f, a in zip([f for f in log if f["dir"] == "in"], arrivals):
            f["net_t"] = a
        scale = {k: 1000 if "Duration" in k else 1 for k in METRICS}          # (durations: s -> ms)
        r.update(t0_epoch_ms=None if t0 is None else origin + t0, server_cpu_ms=round((s1 - s0) / 1e6, 1),
                 frames=log, page={k: None if m0[k] is None else round((m1[k] - m0[k]) * scale[k], 1)
                                   for k in METRICS})
        return r

    mp._timed = timed
    trace = os.environ.get("PAGE_TRACE")
    browser = voila_page.page.context.browser
    if trace:        # (Chromium's trace of the moves: its main thread's tasks by name; it costs time itself)
        cats = os.environ.get("PAGE_TRACE_CATEGORIES",
                              "devtools.timeline,disabled-by-default-devtools.timeline,toplevel,blink,v8")
        browser.start_tracing(page=voila_page.page, categories=cats.split(","))
    traced = []
    if os.environ.get("PAGE_STRACE"):     # (syscall times of the server and the kernel: where a move's ms go)
        import subprocess
        for name, p in (("server", server_pid), ("kernel", pid)):
            out = f"{os.environ['PAGE_STRACE']}-{name}.txt"
            traced.append(subprocess.Popen(
                ["strace", "-f", "-ttt", "-e", "trace=sendto,recvfrom,sendmsg,recvmsg,write,writev,read",
                 "-e", "signal=none", "-s", "0", "-o", out, "-p", str(p)]))
        time.sleep(1)
    try:
        load0 = os.getloadavg()
        moves = mp.participant(w, 0, voila_wait, pid)
    finally:
        mp._timed = original
        for proc in traced:
            proc.terminate()
            proc.wait(timeout=10)
        if trace:
            Path(trace).write_bytes(browser.stop_tracing())
    rec = json.loads(OUT.read_text()) if OUT.exists() else {}
    rec[f"voila {w.name[:2]} run {RUN}"] = {"load_before": load0, "load_after": os.getloadavg(),
                                            "moves": moves}
    OUT.write_text(json.dumps(rec, indent=1))
