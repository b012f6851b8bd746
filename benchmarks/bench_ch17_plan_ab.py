"""Paired A/B, in ONE process, of ``plan()`` as chapter 17's long-context widget calls it (issue 38; pick30),
the twin of benchmarks/bench_ch12_plan_ab.py: the library at another commit (``BASE``, main by default; its
``src`` and ``data`` as a ``git archive``, imported as ``llmsizing_base``) against this checkout, side by side
round by round, order alternating. Each round and side starts with every kept result cleared
(benchmarks/bench_planner.kept(), by module and name on each side) and the widget's default search made
(llama-3.1-405b at 128K on H100 SXM, 16M tokens a batch, <= 16,384 GPUs, ring), then times:

* model picks: 12 dense catalogue models in turn at those defaults, each a first visit with what earlier
  picks kept still kept, as in the widget (the mixtures of experts are searched when the widget is built);
* moves of the default model: the other context lengths (16M tokens a batch), 8M and 4M tokens a batch, the
  all-gather K/V exchange, each a new search (``_search.clear_tables()``: the searched tables only, the
  model's kept parts stay, as in the widget).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_ch17_plan_ab.py [BASE] [ROUNDS]    # default main 5

Prints per kind the median CPU ms of each side and the median of the paired ratios (this / base), then the
load average before and after. Does not assert (timings are not tests).
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

from bench_widget_ab import clear, kept_names  # noqa: E402

TOKENS = 2 ** 24
DEFAULT = dict(tokens=8e11, gpus=("H100 SXM",), seq=131072, global_batch=TOKENS // 131072, max_gpus=16384,
               cp_comm="p2p")
FIRST = "llama-3.1-405b"
MODELS = ("gpt2", "llama-2-7b", "llama-2-70b", "gpt-39b", "qwen-72b", "mpt-bench-13b", "bloom-176b",
          "granite-3.0-8b", "mistral-7b", "gpt-145b", "llama-3-8b", "nemotron-4-15b")
MOVES = (tuple(dict(seq=s, global_batch=TOKENS // s) for s in (8192, 32768, 65536, 262144))
         + (dict(global_batch=2 ** 23 // 131072), dict(global_batch=2 ** 22 // 131072),
            dict(cp_comm="all_gather")))


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def main() -> None:
    base = sys.argv[1] if len(sys.argv) > 1 else "main"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    tmp = Path(tempfile.mkdtemp(prefix="bench_ch17_plan_ab_"))
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
        kinds = ("model picks", "moves")
        before, got = load(), {kind: {p: [] for p in sides} for kind in kinds}
        for i in range(rounds):
            for p in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
                planner = sides[p]
                clear(p, names)
                planner._search.cache_clear()
                planner.plan(FIRST, **DEFAULT)
                for model in MODELS:
                    c0 = time.process_time()
                    planner.plan(model, **DEFAULT)
                    got["model picks"][p].append(time.process_time() - c0)
                for move in MOVES:
                    planner._search.clear_tables()
                    c0 = time.process_time()
                    planner.plan(FIRST, **{**DEFAULT, **move})
                    got["moves"][p].append(time.process_time() - c0)
        for kind, by in got.items():
            b, a = by["llmsizing_base"], by["llmsizing"]
            ratio = statistics.median(y / x for x, y in zip(b, a))
            print(f"{kind:12s} {len(b):4d} searches a side: median {statistics.median(b) * 1e3:.1f} -> "
                  f"{statistics.median(a) * 1e3:.1f} ms CPU, paired ratio {ratio:.3f}")
        print(f"base {base}; {rounds} rounds; load average (1 min) before and after: {before}, {load()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
