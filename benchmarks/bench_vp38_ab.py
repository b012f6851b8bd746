"""Paired A/B, in ONE process, of plan() before and after vp38 (issue 34, "one answer per question": the
search prices every interleaving that splits a stage's layers evenly, not just the fewest and the most).
The library at another commit (``BASE``, main by default; its ``src`` and ``data`` as a ``git archive``,
imported as ``llmsizing_base``) against this checkout, round by round, the order alternating each round, so
both sides share the machine's load moment by moment. Three kinds of calls:

* ``scratch``: each dense case of benchmarks/bench_planner.py from scratch (every kept result cleared first);
* ``ch12``: chapter 12's planner widget (benchmarks/bench_ch12_plan_ab.py's calls): llama-3-70b at the
  widget's defaults, then its dense model picks in turn, each a first visit with what earlier picks kept
  still kept, then six moves of llama-3-70b (``_search.clear_tables()``: a new search, the model's kept parts
  stay);
* ``ch17``: chapter 17's long-context widget the same way (benchmarks/bench_ch17_plan_ab.py's calls).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_vp38_ab.py [BASE] [ROUNDS]     # default main 5

Prints per case (scratch) and per kind (widgets) the median CPU ms of each side and the median of the paired
ratios (this / base), the rows each side's frame has, then the load average before and after. Does not assert
(timings are not tests).
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

import bench_ch12_plan_ab as ch12  # noqa: E402
import bench_ch17_plan_ab as ch17  # noqa: E402
import bench_planner  # noqa: E402
from bench_widget_ab import clear, kept_names  # noqa: E402


def _widget_calls(first: str, default: dict, models, moves) -> list:
    """A widget's calls in order: ``(kind, model, keywords, clear_tables_first)``."""
    out = [("first", first, default, False)]
    out += [("picks", m, default, False) for m in models]
    out += [("moves", first, {**default, **mv}, True) for mv in moves]
    return out


def main() -> None:
    base = sys.argv[1] if len(sys.argv) > 1 else "main"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    tmp = Path(tempfile.mkdtemp(prefix="bench_vp38_ab_"))
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", base, "src", "data"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        (tmp / "src" / "llmsizing").rename(tmp / "src" / "llmsizing_base")
        sys.path.insert(0, str(tmp / "src"))
        names = kept_names()
        sides = {p: importlib.import_module(f"{p}.planner") for p in ("llmsizing_base", "llmsizing")}
        cat = importlib.import_module("llmsizing.catalog")
        for planner in sides.values():                          # (imports and catalogues warm)
            planner.plan("llama-3-8b", tokens=1e9, seq=2048, global_batch=64, max_gpus=64)
        dense = [(label, model, kw) for label, model, kw in bench_planner.CASES
                 if not cat.get_model(model).is_moe]
        ch12_models = [m for m in ch12.MODELS if not cat.get_model(m).is_moe]
        widgets = {"ch12": _widget_calls("llama-3-70b", ch12.DEFAULT, ch12_models, ch12.MOVES),
                   "ch17": _widget_calls(ch17.FIRST, ch17.DEFAULT, ch17.MODELS, ch17.MOVES)}
        before = ch12.load()
        got: dict = {}
        rows: dict = {}
        totals: dict = {}                                      # (widget, side) -> CPU s of each round
        for i in range(rounds):
            for p in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
                planner = sides[p]
                for label, model, kw in dense:
                    clear(p, names)
                    planner._search.cache_clear()
                    c0 = time.process_time()
                    df = planner.plan(model, **kw)
                    got.setdefault(("scratch", label), {}).setdefault(p, []).append(time.process_time() - c0)
                    rows.setdefault(("scratch", label), {}).setdefault(p, {})[0] = len(df)
                for w, calls in widgets.items():
                    clear(p, names)
                    planner._search.cache_clear()
                    t0 = time.process_time()
                    for j, (kind, model, kw, fresh) in enumerate(calls):
                        if fresh:
                            planner._search.clear_tables()
                        c0 = time.process_time()
                        df = planner.plan(model, **kw)
                        got.setdefault((w, kind), {}).setdefault(p, []).append(time.process_time() - c0)
                        rows.setdefault((w, kind), {}).setdefault(p, {})[j] = len(df)
                    totals.setdefault((w, p), []).append(time.process_time() - t0)
        for (kind, label), by in got.items():
            b, a = by["llmsizing_base"], by["llmsizing"]
            ratio = statistics.median(y / x for x, y in zip(b, a))
            n = {p: sum(rows[kind, label][p].values()) for p in sides}
            print(f"{kind:7s} {label:55s} median {statistics.median(b) * 1e3:7.1f} -> "
                  f"{statistics.median(a) * 1e3:7.1f} ms CPU, paired ratio {ratio:.3f}  rows "
                  f"{n['llmsizing_base']:,} -> {n['llmsizing']:,}", flush=True)
        for w in widgets:
            b, a = totals[w, "llmsizing_base"], totals[w, "llmsizing"]
            print(f"{w} widget path, all its calls per round: median {statistics.median(b) * 1e3:.1f} -> "
                  f"{statistics.median(a) * 1e3:.1f} ms CPU, paired ratio "
                  f"{statistics.median(y / x for x, y in zip(b, a)):.3f}")
        print(f"base {base}; {rounds} rounds; load average (1 min) before and after: {before}, {ch12.load()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
