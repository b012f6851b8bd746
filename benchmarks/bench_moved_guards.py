"""The two CPU bounds that tests held until suite40 (issue 38), measured here instead (the guide's
principle 6: speed is proven by a benchmark script, not by a timed test).
The tests keep their behaviour checks:

- ``cost_by_gpu("deepseek-v3", tokens=14.8e12, seq=4096)`` over the whole catalogue, from scratch (every kept
  result cleared, :func:`bench_moe_planner.clear`; the first call of the process also reads the data files, as
  the test's did): tests/test_moe_cost.py held ``< 12`` CPU s;
- a list argument refused at its bound (``serving_sweep(batches=range(1, 10**7))`` and ``check_sequence``
  of an endless iterable): tests/test_hardening.py held ``< 1.0`` s; it now counts the items read (1,025).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_moved_guards.py [repeats]

Prints each measurement's CPU (``time.process_time``): the first call in the process, then the best and
median of ``repeats`` more (default 3), beside the old bound; never asserts.

Measured 2026-12-04 03:42 UTC (branch suite40 on main 6cbd9f35; load average 0.4 on the 2 shared cores), two
runs of 3 repeats:

    cost_by_gpu deepseek-v3, whole catalogue, from scratch   first 0.52 / 0.63 s, then best 0.29 / 0.35 s
    the two refusals of a too-long list                      first 0.61 / 0.94 ms, then best 0.15 / 0.21 ms

Both far inside the bounds the tests held (12 s and 1 s).
"""

import itertools
import statistics
import sys
import time

from bench_moe_planner import clear

import llmsizing as L
from llmsizing._validate import check_sequence


def _cost() -> float:
    clear()
    t = time.process_time()
    df = L.cost_by_gpu("deepseek-v3", tokens=14.8e12, seq=4096)
    spent = time.process_time() - t
    assert df["fits"].any()
    return spent


def _refusals() -> float:
    t = time.process_time()
    for call in (lambda: L.serving_sweep("llama-3-8b", "H100 SXM", batches=range(1, 10**7)),
                 lambda: check_sequence("counts", itertools.count(1), example="(8, 64)")):
        try:
            call()
        except ValueError:
            pass
        else:
            raise SystemExit("a too-long list was not refused")
    return time.process_time() - t


def main(argv: list[str]) -> int:
    repeats = int(argv[0]) if argv else 3
    for label, fn, unit, scale, bound in (
            ("cost_by_gpu deepseek-v3, whole catalogue, from scratch", _cost, "s", 1, "12 s"),
            ("the two refusals of a too-long list", _refusals, "ms", 1e3, "1 s")):
        first = fn() * scale
        runs = [fn() * scale for _ in range(repeats)]
        print(f"{label:56s} first {first:.2f} {unit}  then best {min(runs):.2f} {unit}  median "
              f"{statistics.median(runs):.2f} {unit}   (old bound {bound})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
