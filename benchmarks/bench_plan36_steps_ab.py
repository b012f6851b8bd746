"""Paired A/B, in ONE process, of ``plan()`` for the step moves of chapter 17's widget as the participant
makes them (plan36; tests/browser/measure_participant.py's walk, as benchmarks/bench_kernel_moves.py replays
it): the library at another commit (``BASE``, main by default; its ``src`` and ``data`` as a ``git
archive``, imported as ``llmsizing_base``, benchmarks/bench_ch12_plan_ab.py's way) against this checkout,
each search of the walk made by both sides back to back, order alternating. Each round and side starts with
every kept result cleared (benchmarks/bench_planner.kept(), by module and name on each side) and the
widget's default search made
(llama-3.1-405b at 128K on H100 SXM, 16M tokens a batch, <= 16,384 GPUs, ring); then for each model picked
in the walk's order (mixtures of experts and dense models in turn) its search at those defaults (a pick,
timed as ``pick``), then each control one step from it, a new setting each, timed by the control: the
context 128K -> 256K (``seq``), a second GPU type (``gpus``: + A10, the first in the catalogue), 16M -> 8M
tokens a batch (``batch``), the all-gather K/V exchange (``kv``). What the earlier searches kept stays kept,
as in the widget (the GPU limit's step is a cut of the search, no plan() call: left out).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_plan36_steps_ab.py [BASE] [ROUNDS]    # default main 3

Prints per kind the median CPU ms of each side and the median of the paired ratios (this / base), then the
load average before and after. Does not assert (timings are not tests).

Measured (plan36, 2026-12-03, branch plan36 at 0537c000 against main 96db8823, whose planner is a9d92b3b's;
5 rounds, 40 searches a side per kind, load 2.2-2.4 on the 2 shared cores; CPU ms medians, base -> this,
paired ratio): the steps 36.5 -> 32.6 (0.926; summed 6.11 -> 5.62 s): the K/V exchange 43.7 -> 37.9
(0.897), a second GPU type 32.9 -> 30.8 (0.941), tokens a batch 24.5 -> 23.0 (0.938), the context 42.5 ->
41.4 (0.990); the picks 63.8 -> 62.2 (0.978). An earlier run at 82aa043f (load 2.4-3.8): 0.929 (0.899,
0.921, 0.935, 0.979). See /work/notes/s36/plan36.md.
"""

from __future__ import annotations

import importlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_ch12_plan_ab import load  # noqa: E402
from bench_widget_ab import clear, kept_names  # noqa: E402

TOKENS = 2 ** 24
DEFAULT = dict(tokens=8e11, gpus=("H100 SXM",), seq=131072, global_batch=TOKENS // 131072, max_gpus=16384,
               cp_comm="p2p")
FIRST = "llama-3.1-405b"
#: The walk's picks (bench_kernel_moves.moves: MOE and the other models in turn), eight of them.
PICKS = ("qwen3-30b-a3b", "gpt2", "granite-3.0-1b-a400m", "mistral-7b", "granite-3.0-3b-a800m", "llama-2-13b",
         "mixtral-8x7b", "llama-3-8b")
STEPS = (("seq", dict(seq=262144, global_batch=TOKENS // 262144)), ("gpus", dict(gpus=("H100 SXM", "A10"))),
         ("batch", dict(global_batch=2 ** 23 // 131072)), ("kv", dict(cp_comm="all_gather")))


def main() -> None:
    base = sys.argv[1] if len(sys.argv) > 1 else "main"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    tmp = Path(tempfile.mkdtemp(prefix="bench_plan36_"))
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", base, "src", "data"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        (tmp / "src" / "llmsizing").rename(tmp / "src" / "llmsizing_base")
        sys.path.insert(0, str(tmp / "src"))
        names = kept_names()
        sides = {p: importlib.import_module(f"{p}.planner") for p in ("llmsizing_base", "llmsizing")}
        for planner in sides.values():                          # (imports and catalogues warm)
            planner.plan("llama-3-8b", **DEFAULT)
        kinds = ("pick", *(k for k, _ in STEPS))
        before, got = load(), {kind: {p: [] for p in sides} for kind in kinds}
        for i in range(rounds):
            for p, planner in sides.items():
                clear(p, names)
                planner._search.cache_clear()
                planner.plan(FIRST, **DEFAULT)
            # (each search of the walk made by both sides back to back, the order alternating, so that the
            # load of a shared machine falls on both alike; each side's kept results are its own walk's)
            k = 0
            for model in PICKS:
                for kind, step in (("pick", {}), *STEPS):
                    for p in (list(sides) if (i + k) % 2 == 0 else list(sides)[::-1]):
                        c0 = time.process_time()
                        try:
                            sides[p].plan(model, **{**DEFAULT, **step})
                        except ValueError:                   # (nothing fits: the widget shows the message)
                            pass
                        got[kind][p].append(time.process_time() - c0)
                    k += 1
        every = {p: [] for p in sides}
        for kind, by in got.items():
            b, a = by["llmsizing_base"], by["llmsizing"]
            if kind != "pick":
                for p in sides:
                    every[p] += by[p]
            ratio = statistics.median(y / x for x, y in zip(b, a))
            print(f"{kind:6s} {len(b):4d} searches a side: median {statistics.median(b) * 1e3:.1f} -> "
                  f"{statistics.median(a) * 1e3:.1f} ms CPU, paired ratio {ratio:.3f}")
        b, a = every["llmsizing_base"], every["llmsizing"]
        print(f"steps  {len(b):4d} searches a side: median {statistics.median(b) * 1e3:.1f} -> "
              f"{statistics.median(a) * 1e3:.1f} ms CPU, summed {sum(b):.2f} -> {sum(a):.2f} s, paired ratio "
              f"{statistics.median(y / x for x, y in zip(b, a)):.3f}")
        print(f"base {base}; {rounds} rounds; load average (1 min) before and after: {before}, {load()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
