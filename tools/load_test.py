#!/usr/bin/env python3
"""A workshop on one machine: N simulated participants against ONE Jupyter server (issue 38).

    .venv/bin/python tools/load_test.py                          # chapter 12, 1, 2 and 4 participants
    .venv/bin/python tools/load_test.py --chapter 17 -n 1 2 4 8 --moves 12 --json out.json
    .venv/bin/python tools/load_test.py --chapter 7 -n 8 --think-s 3   # a move every 3 s or so

For each N it starts one Jupyter server on 127.0.0.1 (the command and config of ``make serve-live``:
tools/serve_live.py, kernels culled as there), then N participants at once, each as a reader's browser does it
through the server's REST and kernel WebSocket API: start a kernel (``POST /api/kernels``), run the chapter's
code cells top to bottom (``execute_request`` on the kernel's channels), then move the controls of the
chapter's first widget one after another (``--moves`` moves: the next option of a drop-down, toggle or
selection slider, one step of a number slider), each move a request that returns once the widget has redrawn.
By default every participant moves again as soon as the last redraw came back, the worst case: N people
dragging sliders without a pause. ``--think-s S`` waits between a participant's moves (a reader who looks at
the figure first, the first move too): each pause drawn uniformly from 0 to 2S (mean S; participant i's draws
seeded with i, so a run repeats), so that N participants do not move in lockstep. It reports, as N grows:

* the kernels' memory (resident set, read from /proc for the server's child processes) after the run, and the
  server's own;
* how long starting a kernel (``POST /api/kernels`` and its WebSocket) and running the chapter took each
  participant;
* the redraw time per move as the client sees it (request sent -> reply received: the kernel's redraw plus the
  server's and the socket's share), median and 90th percentile (nearest rank) over every participant's moves;
* the CPU time each participant's kernel used (the chapter and its moves), and the cores busy on average
  while this N ran: ours (server, kernels, this client) and everything else on the machine (/proc/stat's
  busy time less ours); with the 1-minute load average before and after (``os.getloadavg``, which lags and
  counts our own previous N). On a shared machine the other work matters as much as N.

With ``--as-installed`` the server is ``jupyter lab`` with no ``--config``: it reads the configuration its
environment holds, as a JupyterHub or Binder image started from this repository does (postBuild writes it;
tools/check_binder.py runs this test that way), instead of serve-live's (no kernel culling then: the server is
stopped after each N anyway).

The server and its kernels are stopped after each N. Only 127.0.0.1 is used; nothing leaves the machine. On a
shared machine keep N small: every participant is a kernel of about 140 MiB running the chapter's code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import secrets
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

import serve_live  # noqa: E402

BOOK = serve_live.BOOK

#: Moves one control of the widget ``_book_w`` (the k-th control, in turn) and says which; the redraw happens
#: in the same request, as it does when a reader moves it (Dashboard.update is the control's observer).
MOVE_HELPER = r'''
def __book_move(k):
    keys = [key for key, c in _book_w.controls.items() if not isinstance(getattr(c, "index", None), tuple)]
    c = _book_w.controls[keys[k % len(keys)]]
    if getattr(c, "options", None):
        c.index = (c.index + 1) % len(c.options)
    elif hasattr(c, "max"):
        c.value = c.value + c.step if c.value + c.step <= c.max else c.min
    return keys[k % len(keys)]
'''


def widget_setup(widget: str, execution_count: int | None) -> str:
    """Code that names the widget to move ``_book_w``: the one the chapter's run displayed (``Out[n]``, the
    widget cell's result), so the moves redraw what a reader sees and the kernel holds no second copy; a new
    one from the widget cell's last line only if that result is not there."""
    make = widget.strip().splitlines()[-1]
    return (f"_book_w = Out.get({execution_count!r})\n"
            f"if not hasattr(_book_w, 'controls'):\n    _book_w = {make}\n" + MOVE_HELPER)


def code_cells(notebook: Path) -> tuple[list[str], str | None]:
    """The notebook's code cells in order, and the source of its first widget cell (nbval-ignore-output)."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cells, widget = [], None
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        src = "".join(cell["source"])
        cells.append(src)
        if widget is None and "nbval-ignore-output" in cell.get("metadata", {}).get("tags", []):
            widget = src
    return cells, widget


def chapter_notebook(spec: str) -> Path:
    """``--chapter``: as for ``make app CH=`` (``07``, ``07_data_parallelism``, a path), and a bare number
    too: ``7`` is ``07``, ``4b`` is ``04b``. ValueError naming the option when no chapter or several match."""
    spec = (spec or "").strip()
    if re.fullmatch(r"\d[a-z]?", spec):
        spec = "0" + spec
    try:
        return serve_live.chapter_notebook(spec)
    except ValueError as e:
        raise ValueError(f"--chapter: {e}".replace("CH: ", "")) from None


def nearest_rank(sorted_values: list[float], p: float) -> float:
    """The p-quantile (0 < p <= 1) of ascending ``sorted_values`` by the nearest-rank rule: the smallest value
    with at least a fraction p of the values at or below it (of 10 values, p = 0.9 gives the 9th)."""
    if not sorted_values:
        raise ValueError("sorted_values: need at least one value")
    if not 0 < p <= 1:
        raise ValueError(f"p: must be in (0, 1], got {p}")
    rank = math.ceil(round(p * len(sorted_values), 9))     # round first: 0.9 * 10 is 9.000000000000002
    return sorted_values[max(rank, 1) - 1]


def rss_mib(pid: int) -> float | None:
    """Resident memory (MiB) of one process, or None once it has gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def kernel_pids(server_pid: int) -> list[int]:
    """The ipykernel processes whose parent is the server."""
    out = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == server_pid and b"ipykernel" in (entry / "cmdline").read_bytes():
                out.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (children, their children, ...): a kernel's worker processes, e.g. the
    one chapter 17's widget starts to work out a reader's next searches."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    out, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        out.append(child)
        todo.extend(children.get(child, []))
    return out


def kernel_rss_mib(server_pid: int) -> list[float]:
    """Resident memory (MiB) of each ipykernel process whose parent is the server, with its own worker
    processes (what a participant's kernel costs the machine)."""
    out = []
    for pid in kernel_pids(server_pid):
        mine = [m for m in (rss_mib(p) for p in [pid, *descendants(pid)]) if m is not None]
        if mine:
            out.append(sum(mine))
    return out


CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_s(pid: int, children: bool = False) -> float:
    """CPU time (user + system, s) one process has used so far; 0 once it has gone. With ``children``, add
    its live descendants' and the children it has already waited for (cutime + cstime)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    except (OSError, ValueError, IndexError):
        return 0.0
    return total / CLK_TCK + (sum(cpu_s(c) for c in descendants(pid)) if children else 0.0)


def machine_busy_s() -> float:
    """CPU time (s, summed over every core) the whole machine has spent busy since boot: /proc/stat's
    ``cpu`` line less idle and iowait. Its growth over a window, less our own processes', is other work."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
        user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in first[1:9])
        return (user + nice + system + irq + softirq + steal) / CLK_TCK
    except (OSError, ValueError, IndexError):
        return 0.0


class Participant:
    """One simulated participant: a kernel on the server and its WebSocket."""

    def __init__(self, base: str, token: str):
        self.base, self.token, self.session = base, token, uuid.uuid4().hex
        self.ws = None

    async def start(self) -> None:
        from tornado.httpclient import AsyncHTTPClient, HTTPRequest
        from tornado.websocket import websocket_connect

        req = HTTPRequest(f"{self.base}/api/kernels", method="POST", body="{}",
                          headers={"Authorization": f"token {self.token}"}, request_timeout=120)
        kernel = json.loads((await AsyncHTTPClient().fetch(req)).body)
        ws_url = self.base.replace("http://", "ws://") + f"/api/kernels/{kernel['id']}/channels"
        auth = {"Authorization": f"token {self.token}"}
        # the server answers the handshake once the kernel replies to kernel_info (jupyter_server waits up to
        # its kernel_info_timeout, 60 s): tornado's own 20 s would give up first on a busy machine
        ws_req = HTTPRequest(ws_url, headers=auth, connect_timeout=120, request_timeout=120)
        self.ws = await websocket_connect(ws_req, max_message_size=64 * 2**20)

    async def execute(self, code: str, timeout_s: float = 600, store_history: bool = False) -> dict:
        """Run ``code``; return the execute_reply's content once it comes."""
        msg_id = uuid.uuid4().hex
        msg = {"header": {"msg_id": msg_id, "msg_type": "execute_request", "session": self.session,
                          "username": "load-test", "date": "", "version": "5.3"},
               "parent_header": {}, "metadata": {}, "channel": "shell",
               "content": {"code": code, "silent": False, "store_history": store_history,
                           "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}
        await self.ws.write_message(json.dumps(msg))
        deadline = time.monotonic() + timeout_s
        while True:
            raw = await asyncio.wait_for(self.ws.read_message(), timeout=max(deadline - time.monotonic(), 1))
            if raw is None:
                raise RuntimeError("the kernel's WebSocket closed")
            if isinstance(raw, bytes):          # a binary frame (widget buffers): not the reply
                continue
            reply = json.loads(raw)
            mine = reply.get("parent_header", {}).get("msg_id") == msg_id
            if mine and reply.get("msg_type") == "execute_reply":
                return reply["content"]


async def participant(base: str, token: str, cells: list[str], widget: str | None, moves: int,
                      think_s: float = 0.0, seed: int = 0) -> dict:
    """One participant from start to last move. A failure (a timeout, a closed socket, a cell's error) is this
    participant's error, named by the phase it happened in; the others go on."""
    p = Participant(base, token)
    pauses = random.Random(seed)
    out: dict = {"start_s": None, "run_s": None, "run_end_at": None, "move_s": [], "move_at": [],
                 "errors": []}
    phase, t = "start", time.monotonic()
    try:
        await p.start()
        out["start_s"] = time.monotonic() - t
        phase, t = "run", time.monotonic()
        widget_count = None
        for src in cells:
            reply = await p.execute(src, store_history=True)        # as a notebook's Run All sends it
            if src is widget:
                widget_count = reply.get("execution_count")
            if reply.get("status") != "ok":
                out["errors"].append(f"run: {reply.get('ename')}: {reply.get('evalue')}")
                return out
        out["run_end_at"] = time.monotonic()
        out["run_s"] = out["run_end_at"] - t
        if widget and moves:
            phase = "widget"
            reply = await p.execute(widget_setup(widget, widget_count))
            if reply.get("status") != "ok":
                out["errors"].append(f"widget: {reply.get('ename')}: {reply.get('evalue')}")
                return out
            for k in range(moves):
                if think_s:         # before the first move too: no one moves the moment the run ends
                    await asyncio.sleep(pauses.uniform(0, 2 * think_s))
                phase, t = f"move {k}", time.monotonic()
                out["move_at"].append(t)
                reply = await p.execute(f"__book_move({k})")
                out["move_s"].append(time.monotonic() - t)
                if reply.get("status") != "ok":
                    out["errors"].append(f"move {k}: {reply.get('ename')}: {reply.get('evalue')}")
                    return out
    except Exception as e:      # noqa: BLE001 -- a failure is this participant's, not the run's end
        out["errors"].append(f"{phase}: {type(e).__name__}: {e}")
    finally:
        if p.ws is not None:
            p.ws.close()
    return out


def installed_command(port: int, token: str) -> tuple[list[str], dict]:
    """``jupyter lab`` as an image's environment starts it: no ``--config``, so it reads the
    ``jupyter_server_config.py`` of its config path (``{sys.prefix}/etc/jupyter``, where postBuild puts the
    book's lab configuration). Bound to 127.0.0.1, the token in its environment as for serve-live."""
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.ip={serve_live.HOST}",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--ServerApp.open_browser=False",
           f"--ServerApp.root_dir={BOOK}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    env = serve_live._kernel_env()
    env.pop("JUPYTER_TOKEN_FILE", None)
    env["JUPYTER_TOKEN"] = token
    return cmd, env


def run_n(notebook: Path, n: int, moves: int, as_installed: bool = False, think_s: float = 0.0) -> dict:
    """One server, ``n`` participants at once: the numbers for this N."""
    load_before = os.getloadavg()[0]
    cells, widget = code_cells(notebook)
    port, token = serve_live.free_port(), secrets.token_hex(16)
    if as_installed:
        cmd, env = installed_command(port, token)
    else:
        cmd, env = serve_live.jupyter_command("http://127.0.0.1:1", port=port, token=token)
    t_a, busy_a, self_a = time.monotonic(), machine_busy_s(), time.process_time()
    proc = subprocess.Popen(cmd, cwd=BOOK, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        serve_live._wait_http(f"{base}/api/status?token={token}", proc, 120, "jupyter server")

        from tornado.httpclient import AsyncHTTPClient

        AsyncHTTPClient.configure(None, max_clients=max(10, n))    # each participant a browser: no queue

        async def everyone():
            return await asyncio.gather(*(participant(base, token, cells, widget, moves, think_s, seed=i)
                                          for i in range(n)))

        t0 = time.monotonic()
        results = asyncio.run(everyone())
        wall = time.monotonic() - t0
        rss = kernel_rss_mib(proc.pid)
        server_rss = rss_mib(proc.pid)
        kernel_cpu = [cpu_s(pid, children=True) for pid in kernel_pids(proc.pid)]
        ours = cpu_s(proc.pid) + sum(kernel_cpu) + time.process_time() - self_a
        window = time.monotonic() - t_a
        other_cores = max(machine_busy_s() - busy_a - ours, 0.0) / window
    finally:
        serve_live._stop(proc)
    moves_ms = sorted(1000 * t for r in results for t in r["move_s"])
    started = [r["start_s"] for r in results if r["start_s"] is not None]
    ran = [r["run_s"] for r in results if r["run_s"] is not None]
    return {"participants": n, "chapter": notebook.name, "think_s": think_s, "wall_s": round(wall, 1),
            "kernels": len(rss), "kernel_rss_mib_median": round(statistics.median(rss), 1) if rss else None,
            "kernel_rss_mib_total": round(sum(rss), 1),
            "server_rss_mib": round(server_rss, 1) if server_rss is not None else None,
            "kernel_cpu_s_median": round(statistics.median(kernel_cpu), 1) if kernel_cpu else None,
            "our_cores": round(ours / window, 2), "other_cores": round(other_cores, 2),
            "started": len(started), "ran": len(ran),
            "start_s_median": round(statistics.median(started), 1) if started else None,
            "start_s_max": round(max(started), 1) if started else None,
            "run_s_median": round(statistics.median(ran), 1) if ran else None,
            "run_s_max": round(max(ran), 1) if ran else None,
            "moves": len(moves_ms),
            "redraw_ms_median": round(nearest_rank(moves_ms, 0.5)) if moves_ms else None,
            "redraw_ms_p90": round(nearest_rank(moves_ms, 0.9)) if moves_ms else None,
            "load_before": round(load_before, 1), "load_after": round(os.getloadavg()[0], 1),
            "errors": [e for r in results for e in r["errors"]],
            # each participant's timeline, seconds from the moment all started: when its chapter run ended,
            # when each move was sent and how long it took (ms)
            "timelines": [{"run_end_s": round(r["run_end_at"] - t0, 2) if r["run_end_at"] else None,
                           "move_sent_s": [round(a - t0, 2) for a in r["move_at"]],
                           "move_ms": [round(1000 * m) for m in r["move_s"]]} for r in results]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chapter", default="12",
                    help="a chapter as for `make app CH=`, or its number: 7, 07, 4b (default 12)")
    ap.add_argument("-n", "--participants", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--moves", type=int, default=8, help="control moves per participant (default 8)")
    ap.add_argument("--think-s", type=float, default=0.0,
                    help="mean seconds a participant waits between two moves, each pause uniform on "
                         "[0, 2S] (default 0: back to back)")
    ap.add_argument("--json", type=Path, help="also write the rows to this file")
    ap.add_argument("--as-installed", action="store_true",
                    help="start `jupyter lab` with the configuration its environment holds (postBuild's), "
                         "not serve-live's")
    args = ap.parse_args(argv)
    if any(n < 1 for n in args.participants):
        print(f"--participants: each N must be at least 1, got {args.participants}", file=sys.stderr)
        return 2
    if args.moves < 0:
        print(f"--moves: must be 0 or more, got {args.moves}", file=sys.stderr)
        return 2
    if not 0 <= args.think_s <= 600:
        print(f"--think-s: must be between 0 and 600 seconds, got {args.think_s}", file=sys.stderr)
        return 2
    try:
        notebook = chapter_notebook(args.chapter)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    os.environ.pop("MPLBACKEND", None)
    rows = []
    print(f"{notebook.name}, {args.moves} moves each, {args.think_s:g} s between moves; "
          f"{os.cpu_count()} CPUs", flush=True)
    print(f"{'N':>3} {'kernels':>7} {'MiB/kernel':>10} {'MiB total':>9} {'server':>6} {'start s':>9} "
          f"{'run s (med/max)':>16} {'redraw ms (med/p90)':>20} {'CPU s':>5} {'cores us/other':>14} "
          f"{'load':>9}  errors", flush=True)
    for n in args.participants:
        row = run_n(notebook, n, args.moves, args.as_installed, args.think_s)
        rows.append(row)
        print(f"{n:>3} {row['kernels']:>7} {row['kernel_rss_mib_median']!s:>10} "
              f"{row['kernel_rss_mib_total']:>9} {row['server_rss_mib']!s:>6} "
              f"{row['start_s_median']!s:>4}/{row['start_s_max']!s:<4} "
              f"{row['run_s_median']!s:>8}/{row['run_s_max']!s:<7} {row['redraw_ms_median']!s:>10}/"
              f"{row['redraw_ms_p90']!s:<9} {row['kernel_cpu_s_median']!s:>5} "
              f"{row['our_cores']:>7}/{row['other_cores']:<6} "
              f"{row['load_before']:>4}/{row['load_after']:<4}  "
              f"{len(row['errors'])}", flush=True)
        for e in row["errors"][:3]:
            print(f"      {e}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if not any(r["errors"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
