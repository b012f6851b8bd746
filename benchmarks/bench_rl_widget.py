"""How long a move of chapter 19's RL widget (:func:`llmsizing.widgets.rl_widget`) takes in Python (issue 39's
target: <= 100 ms per move), without a browser: each control is set to a new value, which redraws the widget
(the Dashboard's own ``update``), timed in CPU seconds of this process (``time.process_time``) and in wall
clock (``time.perf_counter``). On this shared 2-core machine the wall clock also counts the time other
processes hold the cores (the run queue), so the CPU column is what an idle machine would show; the load
average is printed beside it.

    .venv/bin/python benchmarks/bench_rl_widget.py [repeats]

Prints one line per move and the median; does not assert (timings are not tests).

Measured 2026-11-29 (branch rl39b; load average 11-13 on the 2 shared cores):

    18 moves, first time each (cold caches):  CPU median 65.1 ms, max 88.7 ms; wall median 547 ms
    36 moves, second pass over the same:       CPU median 53.1 ms, max 74.8 ms; wall median 463 ms

Re-measured 2026-11-29 (branch rl39c, forward passes priced by parts; load average 7-8.5), best of 3 runs:

    36 moves: CPU median 39.3 ms (max 65.1); wall median 222 ms (other runs: 41.3 / 43.1 ms, max 64-78 ms)

Every move stays under 100 ms of CPU. A redraw does no I/O, so on an idle core its wall clock is its CPU
time; here the wall clock is 8-10x that, which is the run queue (12 runnable processes on 2 cores), not the
widget. No idle machine was available to show the wall clock directly.

Measured 2026-12-01 (branch w100, issue 38: every widget <= 100 ms per move as a participant sees it; main =
7c21f03; 19:26:11-19:26:18 UTC, load 4.5-4.7 by uptime, beside bench_widget_moves and two other helpers),
three runs of ``bench_rl_widget.py 1``: the 9 moves to a new setting, median (max) per run, CPU 15.2 (23.9),
14.7 (26.3), 12.6 (19.1) ms; wall 64.0 (90.0), 16.6 (99.9), 13.2 (19.1) ms; the 9 moves back 0.3 ms (kept
answers). ``bench_rl_widget.py 2`` (36 moves, the second pass all kept) gives a median of 0.3 ms: read the
first pass. Under 100 ms, CPU and wall.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import matplotlib

matplotlib.use("Agg")

from llmsizing.widgets import rl_widget  # noqa: E402

#: The moves, in order, each from the state the previous one left: every control of the widget once, and
#: back to the chapter's default.
MOVES = (
    ("n_gpus", 32), ("n_gpus", 16), ("prompts_per_step", 256), ("prompts_per_step", 128),
    ("samples_per_prompt", 8), ("samples_per_prompt", 16), ("response_mean", 2048), ("response_mean", 932),
    ("response_max", 8192), ("response_max", 3968), ("algorithm", "ppo"), ("algorithm", "grpo"),
    ("mode", "split, 1 off"), ("mode", "colocated"), ("steps", 3000), ("steps", 1000),
    ("gpu", "H200"), ("gpu", "H100 SXM"),
)


def move(w, name, value) -> tuple[float, float]:
    """(CPU s, wall s) of setting control ``name`` to ``value`` (the widget redraws)."""
    c0, t0 = time.process_time(), time.perf_counter()
    w.controls[name].value = value
    return time.process_time() - c0, time.perf_counter() - t0


def main(repeats: int = 2) -> None:
    w = rl_widget()
    cpu, wall = [], []
    for r in range(repeats):
        for name, value in MOVES:
            c, t = move(w, name, value)
            if w.error.layout.display != "none":
                raise SystemExit(f"{name}={value!r} refused: {w.error.value}")
            cpu.append(c)
            wall.append(t)
            if r == repeats - 1:
                print(f"{name:>20} -> {value!s:<14} cpu {1e3 * c:6.1f} ms   wall {1e3 * t:6.1f} ms")
    load = os.getloadavg()[0]
    print(f"{len(cpu)} moves: CPU median {1e3 * statistics.median(cpu):.1f} ms (max {1e3 * max(cpu):.1f}), "
          f"wall median {1e3 * statistics.median(wall):.1f} ms (max {1e3 * max(wall):.1f}); load {load:.1f} "
          f"on {os.cpu_count()} cores")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
