"""Where `make test`'s time goes, per pytest-xdist worker (suite43, issue 38): a pytest plugin that writes,
for each test, its worker, wall start and end and the CPU of its whole protocol (setup, call, teardown), plus
each process's collection end, unconfigure and exit; and a report read from those files.

    TIMELINE_DIR=/tmp/tl PYTHONPATH=benchmarks make test PYTEST_ARGS="-p suite_timeline"
    .venv/bin/python benchmarks/suite_timeline.py /tmp/tl [--files 40]

The report gives each worker's first and last test, its busy wall and CPU, the gaps between its tests, the
time from the last test to each process's exit, and the files by CPU (with their wall: a file whose wall is
far above its CPU waits on a subprocess, a kernel or a sleep; nbval's cells run in a kernel, whose CPU is not
the worker's). Measure CPU, not wall, on a shared machine: wall follows the load.
"""

import argparse
import collections
import glob
import os
import time
from pathlib import Path

_FH = []


def _out():
    if not _FH:
        folder = Path(os.environ.get("TIMELINE_DIR", "/tmp/suite_timeline"))
        folder.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _FH.append(open(folder / f"{worker}.tsv", "w", buffering=1))
    return _FH[0]


def _mark(what: str) -> None:
    _out().write(f"#{what}\t{time.time():.3f}\t{time.process_time():.3f}\n")


def pytest_configure(config):
    import atexit

    atexit.register(_mark, "exit")          # (registered first: runs after the other exit handlers)


def pytest_collection_finish(session):
    _mark("collected")


def pytest_unconfigure(config):
    _mark("unconfigure")


try:
    import pytest
except ImportError:                          # (the report needs no pytest)
    pytest = None

if pytest is not None:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        w0, c0 = time.time(), time.process_time()
        yield
        _out().write(f"{item.nodeid}\t{w0:.3f}\t{time.time():.3f}\t{time.process_time() - c0:.3f}\n")


def report(folder: str, files: int) -> None:
    tests, marks = [], collections.defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(folder, "*.tsv"))):
        proc = Path(path).stem
        for line in open(path):
            f = line.rstrip("\n").split("\t")
            if f[0].startswith("#"):
                marks[proc][f[0][1:]] = (float(f[1]), float(f[2]))
            else:
                tests.append((proc, f[0], float(f[1]), float(f[2]), float(f[3])))
    if not tests:
        raise SystemExit(f"no test rows in {folder}")
    t0, last = min(t[2] for t in tests), max(t[3] for t in tests)
    print(f"first test to last: {last - t0:.1f} s wall")
    for proc in sorted({t[0] for t in tests}):
        rows = sorted((t for t in tests if t[0] == proc), key=lambda t: t[2])
        gaps = sum(max(0.0, b[2] - a[3]) for a, b in zip(rows, rows[1:]))
        busy, cpu = sum(t[3] - t[2] for t in rows), sum(t[4] for t in rows)
        print(f"{proc}: {len(rows)} tests, {rows[0][2] - t0:.1f} -> {rows[-1][3] - t0:.1f} s, busy "
              f"{busy:.1f} s wall, {cpu:.1f} s CPU, gaps {gaps:.1f} s")
    for proc, m in sorted(marks.items()):
        print(f"{proc}: " + ", ".join(f"{k} {w - last:+.2f} s after the last test (CPU {c:.1f} s)"
                                      for k, (w, c) in m.items()))
    by_file = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for _, nodeid, a, b, cpu in tests:
        row = by_file[nodeid.split("::")[0]]
        row[0] += cpu
        row[1] += b - a
        row[2] += 1
    total = sum(r[0] for r in by_file.values())
    print(f"{'CPU s':>7} {'wall s':>7} {'tests':>6}  file  (total CPU {total:.1f} s)")
    for name, (cpu, wall, n) in sorted(by_file.items(), key=lambda kv: -kv[1][0])[:files]:
        print(f"{cpu:7.1f} {wall:7.1f} {n:6d}  {name}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", help="the TIMELINE_DIR of a run")
    ap.add_argument("--files", type=int, default=40, help="how many files to list, by CPU")
    a = ap.parse_args()
    report(a.folder, a.files)
