"""Benchmarks for the book: how fast each widget redraws, and (optionally) how long ``make test`` and
``make book`` take.

    .venv/bin/python benchmarks/bench.py                  # widget updates only (~1 minute)
    .venv/bin/python benchmarks/bench.py --reps 40        # more repetitions
    .venv/bin/python benchmarks/bench.py --per-control    # a line per control too
    .venv/bin/python benchmarks/bench.py --make-test --make-book   # also time the two make targets
    .venv/bin/python benchmarks/bench.py --make-book --clean-copy  # ... from scratch, in a temporary copy

A widget update is what a reader waits for after moving a control: the library computes, matplotlib draws
into the figure the widget keeps (its axes emptied and reused, :func:`llmsizing.charts.base.figure_axes`), the PNG is
encoded and handed to the ``Image`` widget (``Dashboard.update()``, triggered by setting the control's value). Every public factory in :mod:`llmsizing.widgets` (``__all__`` names ending in ``_widget``)
is discovered and timed. Each repetition moves one control to a neighbouring valid value (cycling over the
controls), so the median covers every control. The target is a median <= 50 ms per update, for every widget, on
the book's 2-core machine (issue 12). This script prints; it does not assert (timings are not tests).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 50.0


def neighbour(ctrl):
    """A valid value next to the control's current one (so that the update is a real redraw)."""
    import ipywidgets as W

    v = ctrl.value
    if isinstance(ctrl, W.SelectMultiple):
        opts = list(ctrl._options_values)
        extra = next((o for o in opts if o not in v), None)
        return tuple(v[:-1]) if extra is None and len(v) > 1 else tuple(v) + ((extra,) if extra else ())
    if isinstance(v, bool):
        return not v
    if hasattr(ctrl, "_options_values"):
        opts = list(ctrl._options_values)
        i = opts.index(v)
        return opts[i + 1] if i + 1 < len(opts) else opts[i - 1]
    if isinstance(ctrl, W.FloatLogSlider):
        return v * ctrl.base ** (ctrl.step if v * ctrl.base ** ctrl.step <= ctrl.base ** ctrl.max else -ctrl.step)
    if hasattr(ctrl, "min") and hasattr(ctrl, "max") and not isinstance(v, tuple):
        step = getattr(ctrl, "step", 1) or 1
        return v + step if v + step <= ctrl.max else v - step
    return None


def find_dashboards(w):
    from llmsizing.widgets import Dashboard

    if isinstance(w, Dashboard):
        return [w]
    return [d for c in getattr(w, "children", ()) for d in find_dashboards(c)]


def time_widget(name: str, reps: int, per_control: bool) -> dict:
    import llmsizing.widgets as widgets

    t0 = time.perf_counter()
    w = getattr(widgets, name)()
    build_ms = (time.perf_counter() - t0) * 1e3
    boards = find_dashboards(w)
    # (board, key, control, default, neighbour) for every control with a neighbouring value
    moves = [(b, k, c, c.value, neighbour(c)) for b in boards for k, c in b.controls.items()]
    moves = [m for m in moves if m[4] is not None and m[4] != m[3]]
    times: list[float] = []
    cpu: list[float] = []
    by_control: dict[str, list[float]] = {}
    errors = set()
    board, key, ctrl, default, alt = moves[0]                  # warm-up (font cache, first PNG encode)
    ctrl.value = alt
    ctrl.value = default
    # first visits: each other control's first move to its neighbour, before anything for that value is cached
    # (the planner's search, the glyphs of new labels): what a reader waits the first time, reported, not judged
    first: dict[str, float] = {}
    for board, key, ctrl, default, alt in moves[1:]:
        t = time.perf_counter()
        ctrl.value = alt
        first[key] = (time.perf_counter() - t) * 1e3
        ctrl.value = default
    n = reps * len(moves) if per_control else reps
    for i in range(n):
        board, key, ctrl, default, alt = moves[i % len(moves)]
        ctrl.value = alt
        t, c = time.perf_counter(), time.process_time()
        ctrl.value = default                                 # the observer recomputes and redraws
        dt, dc = (time.perf_counter() - t) * 1e3, (time.process_time() - c) * 1e3
        # time the move away as well: both directions are what a reader sees
        t, c = time.perf_counter(), time.process_time()
        ctrl.value = alt
        dt2, dc2 = (time.perf_counter() - t) * 1e3, (time.process_time() - c) * 1e3
        ctrl.value = default
        cpu += [dc, dc2]
        if board.error.value:
            errors.add(key)
        times += [dt, dt2]
        by_control.setdefault(key, []).extend([dt, dt2])
    return {"name": name, "build_ms": build_ms, "times": times, "cpu": cpu, "by_control": by_control, "errors": errors,
            "controls": len(moves), "first": first}


def clean_copy() -> Path:
    """The committed tree (``git archive HEAD``) in a temporary folder, sharing this checkout's ``.venv`` and
    asset cache: a from-scratch build that leaves the shared ``_build/`` alone. (The editable install still
    imports ``src/`` from this checkout.)"""
    import tempfile

    dest = Path(tempfile.mkdtemp(prefix="bench-book-"))
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    for shared in (".venv", "_vendor_cache"):
        if (ROOT / shared).exists():
            (dest / shared).symlink_to(ROOT / shared)
    return dest


#: Make's stamp files for the environment and the fetched assets. In a copy they must never be remade: the
#: copy shares this checkout's .venv, and re-running ``pip install -e .`` there would point the editable
#: install at the temporary copy (and break ``import llmsizing`` for everyone once it is deleted).
STAMPS = (".venv/.requirements-stamp", "_vendor_cache/static/vendor/mathjax/.version")


def editable_points_here() -> bool:
    out = subprocess.run([str(ROOT / ".venv/bin/python"), "-c", "import llmsizing; print(llmsizing.__file__)"],
                         capture_output=True, text=True)
    return out.returncode == 0 and out.stdout.strip().startswith(str(ROOT / "src"))


def run_make(target: str, cwd: Path = ROOT) -> tuple[float, int, str]:
    cmd = ["make", target]
    if cwd != ROOT:
        cmd[1:1] = [arg for stamp in STAMPS for arg in ("-o", stamp)]   # -o: treat as up to date
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    out = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    summary = ""
    for pattern in (r"\d+ (passed|failed)", r"build (succeeded|finished)", r"error"):
        hits = [ln for ln in out.splitlines() if re.search(pattern, ln, re.I)]
        if hits:
            summary = hits[-1].strip().strip("=").strip()
            break
    return elapsed, proc.returncode, summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=20, help="timed updates per widget (default 20)")
    ap.add_argument("--per-control", action="store_true", help="time --reps updates of every control")
    ap.add_argument("--only", default="", help="comma-separated widget factory names")
    ap.add_argument("--no-widgets", action="store_true", help="skip the widget timings")
    ap.add_argument("--make-test", action="store_true", help="also time `make test`")
    ap.add_argument("--make-book", action="store_true", help="also time `make book`")
    ap.add_argument("--clean-copy", action="store_true",
                    help="run the make targets in a fresh copy of the committed tree (a from-scratch build; "
                         "without it `make book` is incremental and leaves timing of unchanged pages out)")
    args = ap.parse_args(argv)

    os.environ.pop("MPLBACKEND", None)
    sys.path.insert(0, str(ROOT / "src"))
    import llmsizing.widgets as widgets

    names = sorted(n for n in widgets.__all__ if n.endswith("_widget"))
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    if args.no_widgets:
        names = []
    import matplotlib

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# Python {platform.python_version()}, matplotlib {matplotlib.__version__} (text drawing is most of a "
          f"redraw; 3.11 draws text ~3x slower than 3.10), {os.cpu_count()} CPUs, load average {load:.1f} "
          f"(above ~1 other processes share the CPUs: compare the cpu column, or runs made side by side)")
    if names:
        print(f"# widget update latency (compute + redraw), target <= {TARGET_MS:.0f} ms; wall = what the reader "
              "waits, cpu = this process's CPU time (less sensitive to other load)")
        print("# first ms: the median over controls of a control's first move to a new value (nothing cached for it "
              "yet); slowest first: the worst of those")
        print(f"{'widget':<28s} {'median ms':>9s} {'cpu ms':>7s} {'p90 ms':>7s} {'max ms':>7s} {'build ms':>8s} "
              f"{'n':>4s}  {'slowest control (median)':<30s} ok  {'first ms':>8s}  slowest first")
    worst = 0.0
    medians: dict[str, float] = {}
    for name in names:
        r = time_widget(name, args.reps, args.per_control)
        ts = sorted(r["times"])
        med = statistics.median(ts)
        p90 = ts[min(len(ts) - 1, int(0.9 * len(ts)))]
        slow_key, slow = max(((k, statistics.median(v)) for k, v in r["by_control"].items()), key=lambda kv: kv[1])
        worst = max(worst, med)
        medians[name] = med
        first_med = statistics.median(r["first"].values()) if r["first"] else float("nan")
        first_key = max(r["first"], key=r["first"].get) if r["first"] else "-"
        ok = "yes" if med <= TARGET_MS else "NO"
        print(f"{name:<28s} {med:9.1f} {statistics.median(r['cpu']):7.1f} {p90:7.1f} {ts[-1]:7.1f} "
              f"{r['build_ms']:8.1f} {len(ts):4d}  {slow_key + f' ({slow:.0f} ms)':<30s} {ok:<3s} {first_med:8.1f}  "
              f"{first_key} ({r['first'].get(first_key, 0):.0f} ms)")
        if args.per_control:
            for k, v in r["by_control"].items():
                print(f"    {k:<24s} {statistics.median(v):9.1f}")
        if r["errors"]:
            print(f"    note: these controls' neighbouring value showed an error: {sorted(r['errors'])}")
    if names:
        over = [name for name, med in medians.items() if med > TARGET_MS]
        print(f"# per widget, median vs the {TARGET_MS:.0f} ms target:")
        for name, med in medians.items():
            print(f"#   {name:<28s} {med:6.1f} ms  {'meets the target' if med <= TARGET_MS else 'OVER the target'}")
        print(f"# worst widget median: {worst:.1f} ms ({'within' if worst <= TARGET_MS else 'OVER'} the "
              f"{TARGET_MS:.0f} ms target); {len(names) - len(over)} of {len(names)} widgets meet it")

    cwd = clean_copy() if args.clean_copy and (args.make_test or args.make_book) else ROOT
    for flag, target in ((args.make_test, "test"), (args.make_book, "book")):
        if flag:
            print(f"# make {target} in {cwd} ...", flush=True)
            elapsed, rc, summary = run_make(target, cwd)
            print(f"make {target:<5s} {elapsed:8.1f} s  exit {rc}  {summary}")
    if cwd != ROOT:
        import shutil

        if not editable_points_here():     # never leave the shared venv pointing at the copy
            print("# WARNING: the editable install moved; re-installing it from this checkout", flush=True)
            subprocess.run([str(ROOT / ".venv/bin/python"), "-m", "pip", "install", "--quiet", "--no-deps",
                            "-e", str(ROOT)], check=False)
        shutil.rmtree(cwd, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
