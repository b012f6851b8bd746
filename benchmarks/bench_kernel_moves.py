"""A widget's moves in a real ipykernel, no browser (issue 38, kern30): the kernel's CPU per move, all its
threads, split into what the dashboard spends (``plan()``, the rest of the render, the PNG) and what the
kernel spends around it (message handling, the widgets' state syncs, the IOPub and shell threads).

The kernel is started by jupyter_client as Voila starts one (``PYTHONPATH`` the tree's ``src``, cwd its
``book``, no ``LLMSIZING_SPECULATE``); the chapter's code cells run in it; then the participant's moves of
tests/browser/measure_participant.py (a model pick, mixture of experts and dense in turn, then every other
control one step and back), each sent as the ipywidgets 8 frontend sends it: one ``comm_msg`` "update" with
the control's new ``index``. A move's CPU is read from /proc/PID/task/*/schedstat (as the participant does)
from before the message to 0.25 s after the kernel's idle status; inside the kernel, wrappers add up the CPU
(``time.thread_time``) of the comm handler, ``Dashboard._draw`` (which holds the render), ``plan()`` and
``dashboard._figure_png``. The column ``draw+png`` is ``_figure_png``: the canvas's draw of the figure AND its
PNG encode (draw42: it was headed ``png``, and read as 5x the in-process encode of
bench_ch17_participant_walk.py, whose ``draw`` and ``encode`` it is the sum of: 18-20 ms against 13-17 + 3-4).

    .venv/bin/python benchmarks/bench_kernel_moves.py 17 [--rounds 6] [--base TREE] [--pairs 2] [--out F]
        [--pause S] [--speculate] [--add-gpu NAME] [--per-move] [--first-pause S]

``--pause``: seconds between moves (a reader's pace; 0.1 by default, back to back). ``--speculate``: the
kernel gets ``LLMSIZING_SPECULATE=1`` (as ``make lab`` sets it), and the CPU of its worker processes during
each move and the pause before it is counted apart (``workers``).

With ``--base`` (another checkout, e.g. /work/main): A/B, this tree and ``--base`` in turn (odd pairs this
tree first), each a fresh kernel; prints each side's table and the paired ratio (this / base) of the summed
CPU of the moves to new settings, per pair and pooled. Does not assert (timings are not tests).

Measured (plan36, 2026-12-03, ``--pairs 3``, branch plan36 against /work/main, whose planner is a9d92b3b's;
the step moves' kernel CPU, median ms base -> this (of it plan()), per pair): chapter 17 at 82aa043f, load
1.0-1.4: 72.4 -> 64.9 (35.3 -> 32.5), 72.9 -> 81.7 (34.9 -> 37.7), 71.4 -> 67.4 (35.4 -> 31.7); at 0537c000,
load 1.9-3.3: 70.6 -> 71.1 (34.6 -> 32.6), 74.0 -> 69.0 (36.8 -> 34.5), 73.3 -> 83.3 (34.0 -> 39.1); move by
move (the same walk on both sides), plan()'s median ratio 0.914 and 0.965 (the K/V exchange 0.85 and 0.95, a
second GPU type 0.90 and 0.90, tokens a batch 0.92 and 0.92, the context 1.08 and 1.04), the whole move's
0.951 and 1.013. Chapter 12 at 82aa043f, load 1.2-1.7: 52.9 -> 59.5 (12.9 -> 14.4), 41.6 -> 39.5 (9.2 ->
11.5), 51.3 -> 44.1 (12.5 -> 9.6); move by move plan() 0.957, the whole move 0.968. A gain of ~3 ms of
plan() a step is within what render and PNG (untouched) vary between kernels; the in-process A/B
(benchmarks/bench_plan36_steps_ab.py) measures it. See /work/notes/s36/plan36.md.

Measured (draw36, 2026-12-03, branch draw36 against /work/main 96db8823, ``--pairs 3 --rounds 3``; medians
of the moves to new settings per pair, this / base, of the render side: the render plus the draw and PNG).
Chapter 17, 15:33 UTC (load 1.1-1.6): 34.2/38.5, 35.2/36.1, 25.6/26.9 ms, the render alone 11.3/13.7,
11.3/12.8, 9.0/9.9; 16:00 (load 0.5-1.3): 32.0/34.6, 29.2/36.2, 39.1/38.4, render 10.9/12.3, 11.1/12.8,
13.1/13.5. Chapter 12, ``--pairs 4`` at 16:08 (load 0.0-0.3): 36.0/38.2, 41.9/34.5, 33.6/40.5, 46.3/45.3
(pooled CPU of whole moves 0.975); two runs of 3 pairs at load 1.3-2.8 gave 0.82-1.18. The same tree's
side moves by up to 35% from one kernel to the next (plan(), the same code on both sides, by 0.78-1.35),
so a 1-2 ms change of the render side is not resolved here; benchmarks/bench_render_replay.py, one process
with the sides alternated call by call, resolves it (render 0.85-0.89, render side 0.94-0.96).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = {"17": "17_long_context.ipynb", "12": "12_how_many_gpus.ipynb",
             "18": "18_mixture_of_experts.ipynb"}
#: measure_participant.MOE: the mixtures of experts picked in turn with dense models.
MOE = ["qwen3-30b-a3b", "granite-3.0-1b-a400m", "granite-3.0-3b-a800m", "deepseek-v2", "gpt-oss-120b",
       "qwen3-235b-a22b", "deepseek-v3", "mixtral-8x7b", "olmoe-1b-7b", "llama-4-scout"]
SETTLE_S = 0.25

#: Run first in the kernel (before the chapter builds its widget, which imports plan by name).
HOOKS = r'''
import functools as _ft, gc as _gc, json as _j, time as _t
import llmsizing.planner as _pl
_K = {"cur": None, "moves": []}
def _k_new():
    _K["cur"] = dict(handler=0.0, draw=0.0, plan=0.0, plans=0, png=0.0, gc=0.0)
_k_new()
_k_real_plan = _pl.plan
@_ft.wraps(_k_real_plan)
def _k_plan(*a, **k):
    c = _t.thread_time()
    try:
        return _k_real_plan(*a, **k)
    finally:
        _K["cur"]["plan"] += _t.thread_time() - c
        _K["cur"]["plans"] += 1
_pl.plan = _k_plan
_k_gc0 = [0.0]
def _k_gccb(phase, info):
    if phase == "start":
        _k_gc0[0] = _t.thread_time()
    else:
        _K["cur"]["gc"] += _t.thread_time() - _k_gc0[0]
_gc.callbacks.append(_k_gccb)
'''

#: Run after the chapter: wrap the widget's dashboard (Out[N], the widget cell's value) and the comm handler.
AFTER = r'''
import llmsizing.widgets.dashboard as _dm
_B = Out[%d]
_B = _B if isinstance(_B, _dm.Dashboard) else [d for d in _B.children if isinstance(d, _dm.Dashboard)][0]
def _k_timed(fn, key):
    def timed(*a, **k):
        c = _t.thread_time()
        try:
            return fn(*a, **k)
        finally:
            _K["cur"][key] += _t.thread_time() - c
    return timed
_B._draw = _k_timed(_B._draw, "draw")
_dm._figure_png = _k_timed(_dm._figure_png, "png")
_k_kernel = get_ipython().kernel
_k_h = _k_timed(_k_kernel.shell_handlers["comm_msg"], "handler")
def _k_handler(*a, **k):
    try:
        return _k_h(*a, **k)
    finally:
        _K["moves"].append(_K["cur"])
        _k_new()
_k_kernel.shell_handlers["comm_msg"] = _k_handler
_k_column = _B.children[0].children
print("KINFO" + _j.dumps(dict(
    pid=__import__("os").getpid(), image=_B.image.model_id,
    above=[k for k, w in _B.controls.items() if w not in _k_column],
    controls={k: dict(kind=type(w).__name__, id=w.model_id, labels=list(getattr(w, "_options_labels", ())),
                      index=getattr(w, "index", None)) for k, w in _B.controls.items()})))
_k_new()
'''


def schedstat(pid: int) -> dict:
    """{thread id: (name, on-CPU ns)} of every thread of process ``pid``."""
    out = {}
    for task in Path(f"/proc/{pid}/task").glob("[0-9]*"):
        try:
            out[int(task.name)] = ((task / "comm").read_text().strip(),
                                   int((task / "schedstat").read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
    return out


def run_cell(kc, code: str, timeout: float = 900) -> tuple[int | None, str]:
    """Execute ``code``; (its execution count, its printed text). Raises on an error."""
    mid = kc.execute(code, store_history=True)
    text = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != mid:
            continue
        if msg["msg_type"] == "stream":
            text.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            raise RuntimeError("\n".join(msg["content"]["traceback"])[-3000:])
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != mid:
        reply = kc.get_shell_msg(timeout=timeout)
    return reply["content"].get("execution_count"), "".join(text)


def moves(info: dict, rounds: int, add_gpu: str | None = None):
    """The participant's moves: (kind, label, control, new index). A multi-select (the GPU types) adds its
    first option not chosen, as the participant does, or ``add_gpu`` where it is one not chosen."""
    c = info["controls"]
    labels = c["model"]["labels"]
    start = labels[c["model"]["index"]]
    others = [o for o in labels if o != start and o not in MOE]
    others = [others[(j * 7) % len(others)] for j in range(len(others))]
    moe = [o for o in MOE if o in labels and o != start]
    picks = [x for pair in zip(moe, others) for x in pair] + moe[len(others):] + others[len(moe):]
    order = [k for k in c if k not in info["above"] and k != "model"] + list(info["above"])
    at = {k: d["index"] for k, d in c.items()}
    for r in range(rounds):
        m = picks[r % len(picks)]
        yield "model pick", f"model -> {m}", "model", labels.index(m)
        for k in order:
            d, cur = c[k], at[k]
            if d["kind"] == "SelectMultiple":
                extra = next(i for i in range(len(d["labels"])) if i not in cur)
                if add_gpu in d["labels"] and d["labels"].index(add_gpu) not in cur:
                    extra = d["labels"].index(add_gpu)
                yield "step", f"{k} + {d['labels'][extra]}", k, sorted([*cur, extra])
            elif len(d["labels"]) >= 2:
                new = cur + 1 if cur + 1 < len(d["labels"]) else cur - 1
                yield "step", f"{k} {d['labels'][cur]} -> {d['labels'][new]}", k, new
            else:
                continue
            yield "back", f"{k} back", k, cur


def children_ns(pid: int) -> int:
    """On-CPU ns of every thread of ``pid``'s descendants (a speculation worker), from /proc."""
    return sum(ns for k in descendants(pid) for _, ns in schedstat(k).values())


def descendants(pid: int) -> list[int]:
    """The process ids of ``pid``'s descendants (a speculation worker, multiprocessing's resource tracker)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("[0-9]*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except (OSError, ValueError):
                kids = []
            out += kids
            todo += kids
    return out


def rss_bytes(pid: int) -> int:
    """Process ``pid``'s resident memory (VmRSS), 0 if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class MemorySampler:
    """Every ``every_s`` (a thread of this process, not the kernel's): the kernel's RSS, its descendants'
    (the worker's) and the bytes of its hand-off files (``/dev/shm/llmsizing-speculate-PID-*``); the peak of
    each and of their sum (spec50: what a second GPU type asked of the worker costs in memory)."""

    def __init__(self, pid: int, every_s: float = 0.05):
        import threading

        self.pid, self.every_s, self.stop = pid, every_s, threading.Event()
        self.peak = dict(kernel=0, workers=0, shm=0, shm_files=0, total=0)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        import glob

        kernel = rss_bytes(self.pid)
        workers = sum(rss_bytes(k) for k in descendants(self.pid))
        files = [f for d in glob.glob(f"/dev/shm/llmsizing-speculate-{self.pid}-*")
                 for f in glob.glob(os.path.join(d, "*"))]
        shm = 0
        for f in files:
            try:
                shm += os.stat(f).st_size
            except OSError:
                pass
        now = dict(kernel=kernel, workers=workers, shm=shm, shm_files=len(files),
                   total=kernel + workers + shm)
        for k, v in now.items():
            self.peak[k] = max(self.peak[k], v)

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            self.sample()

    def done(self) -> dict:
        self.stop.set()
        self.thread.join()
        return dict(self.peak)


def one_kernel(tree: Path, chapter: str, rounds: int, pause_s: float = 0.1, speculate: bool = False,
               add_gpu: str | None = None, first_pause_s: float = 0.0) -> dict:
    """Start a kernel on ``tree``, run the chapter, wait ``first_pause_s`` (a reader reading before the first
    move), make the moves; the record of every move."""
    from jupyter_client import KernelManager

    env = {k: v for k, v in os.environ.items() if k not in ("LLMSIZING_SPECULATE", "PYTHONPATH")}
    env["PYTHONPATH"] = str(tree / "src")
    if speculate:
        env["LLMSIZING_SPECULATE"] = "1"
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env, cwd=str(tree / "book"))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        run_cell(kc, HOOKS)
        widget_n = None
        for cell in json.loads((tree / "book" / NOTEBOOKS[chapter]).read_text())["cells"]:
            if cell["cell_type"] == "code":
                src = "".join(cell["source"])
                n, _ = run_cell(kc, src)
                if widget_n is None and "_widget(" in src and "import" in src:
                    widget_n = n
        info = json.loads(run_cell(kc, AFTER % widget_n)[1].split("KINFO", 1)[1])
        pid, out = info["pid"], []
        w0 = children_ns(pid)
        mem0 = dict(kernel=rss_bytes(pid), workers=sum(rss_bytes(k) for k in descendants(pid)))
        sampler = MemorySampler(pid)
        time.sleep(first_pause_s)
        w_first, w0 = w0, children_ns(pid)
        first_workers_ms = (w0 - w_first) / 1e6          # (the workers' CPU while the reader reads)
        for kind, label, key, index in moves(info, rounds, add_gpu):
            msg = kc.session.msg("comm_msg", {"comm_id": info["controls"][key]["id"], "data": {
                "method": "update", "state": {"index": index}, "buffer_paths": []}})
            s0, t0 = schedstat(pid), time.perf_counter()
            kc.shell_channel.send(msg)
            while True:
                m = kc.get_iopub_msg(timeout=120)
                if (m["parent_header"].get("msg_id") == msg["header"]["msg_id"] and m["msg_type"] == "status"
                        and m["content"]["execution_state"] == "idle"):
                    break
            wall = time.perf_counter() - t0
            time.sleep(SETTLE_S)
            s1, w1 = schedstat(pid), children_ns(pid)
            threads: dict = {}
            for tid, (name, ns) in s1.items():
                name = "main" if tid == pid else name
                threads[name] = threads.get(name, 0.0) + (ns - s0.get(tid, (name, 0))[1]) / 1e6
            out.append(dict(kind=kind, move=label, cpu_ms=sum(threads.values()), threads=threads,
                            wall_ms=wall * 1e3, workers_ms=(w1 - w0) / 1e6, load1=os.getloadavg()[0]))
            w0 = w1                  # (the workers' next count takes in the pause before the next move)
            time.sleep(pause_s)
        peak = sampler.done()
        inner = json.loads(run_cell(kc, "print('KMOVES' + _j.dumps(_K['moves']))")[1].split("KMOVES", 1)[1])
        for m, i in zip(out, inner):
            m["inner"] = {k: v * 1e3 if isinstance(v, float) else v for k, v in i.items()}
        return dict(tree=str(tree), chapter=chapter, moves=out, memory=dict(before=mem0, peak=peak),
                    first_pause=dict(s=first_pause_s, workers_ms=first_workers_ms))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def split(m: dict) -> dict:
    """A move's CPU (ms) split: plan(), the rest of the render, the PNG, and around the dashboard's draw."""
    i = m["inner"]
    return dict(cpu=m["cpu_ms"], plan=i["plan"], render=i["draw"] - i["plan"] - i["png"], png=i["png"],
                around=m["cpu_ms"] - i["draw"], main_around=m["threads"].get("main", 0.0) - i["draw"],
                other_threads=m["cpu_ms"] - m["threads"].get("main", 0.0), gc=i["gc"], wall=m["wall_ms"],
                workers=m.get("workers_ms", 0.0))


def table(rec: dict) -> None:
    keys = ["cpu", "plan", "render", "png", "around", "main_around", "other_threads", "gc", "wall", "workers"]
    heads = ["draw+png" if k == "png" else k for k in keys]      # (_figure_png: the draw and the encode)
    print(f"{'kind':11s} {'n':>3s} " + " ".join(f"{k:>13s}" for k in heads)
          + "  cpu p90 >100 ms  (medians, ms)")
    for kind in ("model pick", "step", "back"):
        rows = [split(m) for m in rec["moves"] if m["kind"] == kind]
        if not rows:
            continue
        cpu = sorted(r["cpu"] for r in rows)
        p90 = cpu[min(len(cpu) - 1, round(0.9 * (len(cpu) - 1)))]
        print(f"{kind:11s} {len(rows):3d} " + " ".join(f"{statistics.median(r[k] for r in rows):13.1f}"
                                                       for k in keys)
              + f"  {p90:7.1f} {sum(c > 100 for c in cpu) / len(cpu):7.0%}")


def per_move(rec: dict) -> None:
    """Each kind of move apart (a step's label without its values, e.g. ``gpus + A10``, ``seq``): how many,
    how many the kernel answered without a plan() call (``no plan``: a hit of the worker's table, or a
    cached or cut table: every move back is one), and the medians of its CPU and plan() (ms)."""
    groups: dict = {}
    for m in rec["moves"]:
        label = m["move"] if m["kind"] == "step" and " + " in m["move"] else m["move"].split(" ")[0]
        if m["kind"] == "model pick":            # (pick50: the mixtures of experts apart)
            label = "model MoE" if m["move"].split(" -> ")[-1] in MOE else "model dense"
        groups.setdefault((m["kind"], label), []).append(m)
    print(f"  {'kind':11s} {'move':22s} {'n':>3s} {'no plan':>7s} {'cpu':>7s} {'plan':>7s} {'max cpu':>8s}")
    for (kind, label), ms in groups.items():
        cpu = [m["cpu_ms"] for m in ms]
        print(f"  {kind:11s} {label:22s} {len(ms):3d} {sum(m['inner']['plans'] == 0 for m in ms):7d} "
              f"{statistics.median(cpu):7.1f} {statistics.median(m['inner']['plan'] for m in ms):7.1f} "
              f"{max(cpu):8.1f}")
    first = rec.get("first_pause") or dict(s=0.0, workers_ms=0.0)
    print(f"  workers' CPU: {sum(m.get('workers_ms', 0.0) for m in rec['moves']) / 1e3:.2f} s over the walk "
          f"(each move and the pause before it), {first['workers_ms'] / 1e3:.2f} s in the {first['s']:g} s "
          f"before its first move")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chapter", choices=sorted(NOTEBOOKS))
    ap.add_argument("--rounds", type=int, default=6,
                    help="model picks, each followed by every control's step and back")
    ap.add_argument("--base", type=Path, help="another checkout: A/B against it, fresh kernels in turn")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--out", type=Path, help="write every move's record here (JSON)")
    ap.add_argument("--pause", type=float, default=0.1, help="seconds between moves")
    ap.add_argument("--speculate", action="store_true", help="LLMSIZING_SPECULATE=1 in the kernel")
    ap.add_argument("--add-gpu", help="the GPU type the GPU types' step adds (default: the first not chosen, "
                    "as measure_participant.py; e.g. MI300X)")
    ap.add_argument("--first-pause", type=float, default=0.0,
                    help="seconds between the chapter's build and the first move (a reader reading first; "
                    "the worker's time for what it asks ahead of the default view)")
    ap.add_argument("--per-move", action="store_true",
                    help="also each kind of move apart (e.g. 'gpus + A10'), with the moves without a plan()")
    a = ap.parse_args()
    sides = [("this", ROOT)] + ([("base", a.base.resolve())] if a.base else [])
    runs: list = []
    for p in range(a.pairs if a.base else 1):
        for name, tree in (sides if p % 2 == 0 else sides[::-1]):
            load0 = os.getloadavg()[0]
            rec = one_kernel(tree, a.chapter, a.rounds, a.pause, a.speculate, a.add_gpu, a.first_pause)
            rec.update(side=name, pair=p + 1, load=(load0, os.getloadavg()[0]))
            runs.append(rec)
            print(f"\n== {name} ({tree}), chapter {a.chapter}, pair {p + 1}, load {load0:.2f} -> "
                  f"{rec['load'][1]:.2f}")
            table(rec)
            mem = rec["memory"]
            print("memory (MB): before the moves kernel {:.0f}, workers {:.0f}; peaks kernel {:.0f}, "
                  "workers {:.0f}, hand-off files {:.0f} ({} files), all three at once {:.0f}".format(
                      mem["before"]["kernel"] / 1e6, mem["before"]["workers"] / 1e6,
                      *(mem["peak"][k] / 1e6 for k in ("kernel", "workers", "shm")), mem["peak"]["shm_files"],
                      mem["peak"]["total"] / 1e6))
            if a.per_move:
                per_move(rec)
    if a.out:
        a.out.write_text(json.dumps(runs, indent=1))
    if a.base:
        print("\npaired ratio this / base, summed CPU of the moves to new settings (picks and steps):")
        ratios = []
        for p in range(1, a.pairs + 1):
            got = {r["side"]: sum(m["cpu_ms"] for m in r["moves"] if m["kind"] != "back")
                   for r in runs if r["pair"] == p}
            ratios.append(got["this"] / got["base"])
            print(f"  pair {p}: {got['this']:.0f} / {got['base']:.0f} ms = {ratios[-1]:.3f}")
        tot = {s: sum(m["cpu_ms"] for r in runs if r["side"] == s for m in r["moves"] if m["kind"] != "back")
               for s in ("this", "base")}
        print(f"  pooled: {tot['this'] / tot['base']:.3f}")


if __name__ == "__main__":
    main()
