#!/usr/bin/env python
"""Time each chapter run top to bottom, as chapter 0 tells a reader it will run, and write the times to
``data/chapter_run_times.csv`` (chapter 0 reads the file; its prose quotes no typed time).

Usage (from the repository root, with the book's venv)::

    PYTHONPATH=src .venv/bin/python tools/chapter_times.py [--out data/chapter_run_times.csv] [NOTEBOOK ...]

Each notebook is run by ``jupyter nbconvert --to notebook --execute`` into a temporary folder (the book's
files are not touched), one after another. Recorded per notebook: the processor time of the nbconvert process
and of everything it waited for (the kernel included), from ``os.wait4``'s resource usage (user + system), and
the wall time from start to finish. Processor time hardly depends on other jobs sharing the machine; wall time
does, so the machine's load average at the start is recorded beside it. Every row carries the date and a
description of the machine (processor, cores, Python).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = ("notebook", "cpu_s", "wall_s", "load_avg_1min", "returncode", "machine", "python", "measured_on",
           "source")
SOURCE = "tools/chapter_times.py: jupyter nbconvert --execute; cpu = user + sys of nbconvert and its kernel (wait4)"


def machine() -> str:
    """Processor model, logical cores and architecture of this machine, as /proc/cpuinfo and os report them."""
    model = platform.processor() or "unknown processor"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical cores, {platform.machine()}, {platform.system()}"


def time_notebook(path: Path, out_dir: Path) -> dict:
    """Run one notebook with nbconvert; return its processor and wall seconds and the return code."""
    jupyter = Path(sys.executable).with_name("jupyter")
    cmd = [str(jupyter), "nbconvert", "--to", "notebook", "--execute", "--output-dir", str(out_dir),
           "--ExecutePreprocessor.timeout=600", str(path)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    load = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=path.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"notebook": path.name, "cpu_s": f"{usage.ru_utime + usage.ru_stime:.2f}", "wall_s": f"{wall:.2f}",
            "load_avg_1min": f"{load:.2f}", "returncode": proc.returncode}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", type=Path, help="default: every book/*.ipynb")
    p.add_argument("--out", type=Path, default=ROOT / "data" / "chapter_run_times.csv")
    args = p.parse_args(argv)
    books = args.notebooks or sorted((ROOT / "book").glob("[0-9]*.ipynb"))
    common = {"machine": machine(), "python": platform.python_version(),
              "measured_on": dt.datetime.now(dt.timezone.utc).date().isoformat(), "source": SOURCE}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for nb in books:
            row = {**time_notebook(Path(nb).resolve(), Path(tmp)), **common}
            print(f"{row['notebook']}: {row['cpu_s']} s cpu, {row['wall_s']} s wall, rc {row['returncode']}",
                  flush=True)
            rows.append(row)
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    failed = [r["notebook"] for r in rows if r["returncode"] != 0]
    if failed:
        print("failed:", ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
