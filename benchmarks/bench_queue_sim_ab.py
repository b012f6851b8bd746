"""Paired A/B of :func:`llmsizing.queueing.simulate_wait_s` (fast31): the step loop as it stood on main before
(``base``, copied below: fancy indexing ``v[rows, j]`` and a new array for ``max(v - gap, 0)`` each step)
against the library's (``new``: a flat view with take/put, ``v`` updated in place). Both run in one process in
alternating rounds (base-new, then new-base), so both see the same machine load; each case's waits must be
equal bit for bit. The cases are the book's calls (chapter 15's two, the appendix's twelve: 8 and 32 slots at
occupancy 0.8 and 0.9, cs2 0, 0.5 and 2) and tests/test_fleet.py's (50,000 arrivals, 64 replications).
Prints per case the median CPU ms of each side and the median paired ratio new / base.

    .venv/bin/python benchmarks/bench_queue_sim_ab.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from llmsizing.queueing import _check_load, simulate_wait_s  # noqa: E402


def base(servers, rate, service_s, *, cs2=1.0, arrivals=20_000, replications=32, warmup=2_000, seed=0):
    """simulate_wait_s's loop as on main (b9436596), its checks left to the library's _check_load."""
    c, lam, s = _check_load(servers, rate, service_s)
    n, reps, warm = arrivals, replications, warmup
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1 / lam, size=(n, reps))
    if cs2 == 0:
        work = np.full((n, reps), s)
    else:
        shape = 1 / cs2
        work = rng.gamma(shape, s / shape, size=(n, reps))
    v = np.zeros((reps, c))
    rows = np.arange(reps)
    waits = np.empty((n, reps))
    for i in range(n):
        j = v.argmin(axis=1)
        w = v[rows, j]
        waits[i] = w
        v[rows, j] = w + work[i]
        np.maximum(v - gaps[i][:, None], 0.0, out=v)
    return waits[warm:].ravel()


CASES = {
    "ch15 8 slots, rho 0.8": ((8, 6.4, 1.0), dict(replications=16)),
    "ch15 8 slots, cs2 0.5": ((8, 6.4, 1.0), dict(cs2=0.5, replications=16)),
    **{f"appendix {c} slots, rho {rho}, cs2 {cs2}": ((c, rho * c, 1.0), dict(cs2=cs2, replications=64))
       for c in (8, 32) for rho in (0.8, 0.9) for cs2 in (0.0, 0.5, 2.0)},
    "test_fleet 32 slots, 50k arrivals": ((32, 25.6, 1.0), dict(arrivals=50_000, replications=64,
                                                                warmup=5_000)),
    "256 slots (larger than the book's)": ((256, 230.0, 1.0), dict(replications=64)),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    sides = {"base": base, "new": simulate_wait_s}
    got = {(name, side): [] for name in CASES for side in sides}
    for name, (pos, kw) in CASES.items():
        if not np.array_equal(base(*pos, **kw), simulate_wait_s(*pos, **kw)):
            print(f"{name}: the waits differ")
            return 1
    for r in range(args.rounds):
        for side in (("base", "new") if r % 2 == 0 else ("new", "base")):
            for name, (pos, kw) in CASES.items():
                c0 = time.process_time()
                sides[side](*pos, **kw)
                got[name, side].append(time.process_time() - c0)
    print(f"{'case':40s} {'base ms':>8s} {'new ms':>7s} {'new/base':>9s}")
    for name in CASES:
        b, n = got[name, "base"], got[name, "new"]
        ratio = statistics.median([y / x for x, y in zip(b, n)])
        print(f"{name:40s} {statistics.median(b) * 1e3:8.0f} {statistics.median(n) * 1e3:7.0f} {ratio:9.3f}")
    tb = sum(statistics.median(got[k, "base"]) for k in CASES if not k.startswith(("test", "256")))
    tn = sum(statistics.median(got[k, "new"]) for k in CASES if not k.startswith(("test", "256")))
    print(f"the book's 14 calls: {tb:.2f} s -> {tn:.2f} s CPU (medians summed); every case equal bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
