"""Paired A/B, in ONE process, of ``plan()`` as chapter 12's planner widget calls it (issue 38; speed29b): the
library at another commit (``BASE``, main by default; its ``src`` and ``data`` as a ``git archive``, imported
as ``llmsizing_base``) against this checkout, side by side round by round, order alternating. Each round and
side starts with every kept result cleared (benchmarks/bench_planner.kept(), by module and name on each side)
and the widget's default search made, then times:

* model picks: 16 catalogue models in turn at the widget's defaults (1T tokens, H100 SXM, H200, B200 and A100
  80GB, 8K, 512 sequences, <= 4,096 GPUs), each a first visit with what earlier picks kept still kept, as in
  the widget;
* MoE picks (speed29c): every mixture of experts of the catalogue (``is_moe``) in turn, the same way;
* moves of one model (llama-3-70b): six (sequence, global batch) settings, each a new search
  (``_search.clear_tables()``: the searched tables only, the model's kept parts stay, as in the widget).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_ch12_plan_ab.py [BASE] [ROUNDS]    # default main 5

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

GPUS = ("H100 SXM", "H200", "B200", "A100 80GB")
DEFAULT = dict(tokens=1e12, gpus=GPUS, seq=8192, global_batch=512, max_gpus=4096)
MODELS = ("gpt2", "llama-2-7b", "llama-2-70b", "llama-3.1-405b", "gpt-39b", "qwen-72b", "mpt-bench-13b",
          "bloom-176b", "mixtral-8x7b", "granite-3.0-8b", "mistral-7b", "gpt-145b", "llama-3-8b", "qwen-7b",
          "nemotron-4-15b", "olmoe-1b-7b")
MOVES = tuple(dict(seq=s, global_batch=b) for s in (2048, 4096) for b in (128, 512, 2048))


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def paired(first: str, default: dict, picks: dict, moves: tuple, prefix: str) -> None:
    """The paired A/B itself (bench_ch17_plan_ab.py shares it): ``picks`` maps a kind to its models in turn
    (or to a function of the imported package giving them), ``moves`` are settings of ``first`` searched
    anew; command line ``[BASE] [ROUNDS]``."""
    base = sys.argv[1] if len(sys.argv) > 1 else "main"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", base, "src", "data"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        (tmp / "src" / "llmsizing").rename(tmp / "src" / "llmsizing_base")
        sys.path.insert(0, str(tmp / "src"))
        names = kept_names()
        sides = {p: importlib.import_module(f"{p}.planner") for p in ("llmsizing_base", "llmsizing")}
        for planner in sides.values():                          # (imports and catalogues warm)
            planner.plan("llama-3-8b", **default)
        package = importlib.import_module("llmsizing")
        picks = {kind: (models(package) if callable(models) else models) for kind, models in picks.items()}
        before, got = load(), {kind: {p: [] for p in sides} for kind in (*picks, "moves")}
        for i in range(rounds):
            for p in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
                planner = sides[p]
                clear(p, names)
                planner._search.cache_clear()
                planner.plan(first, **default)
                for kind, models in picks.items():
                    for model in models:
                        c0 = time.process_time()
                        planner.plan(model, **default)
                        got[kind][p].append(time.process_time() - c0)
                for move in moves:
                    planner._search.clear_tables()
                    c0 = time.process_time()
                    planner.plan(first, **{**default, **move})
                    got["moves"][p].append(time.process_time() - c0)
        for kind, by in got.items():
            b, a = by["llmsizing_base"], by["llmsizing"]
            ratio = statistics.median(y / x for x, y in zip(b, a))
            print(f"{kind:12s} {len(b):4d} searches a side: median {statistics.median(b) * 1e3:.1f} -> "
                  f"{statistics.median(a) * 1e3:.1f} ms CPU, paired ratio {ratio:.3f}")
        print(f"base {base}; {rounds} rounds; load average (1 min) before and after: {before}, {load()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    def moes(L):
        return [m for m in L.list_models() if L.get_model(m).is_moe]

    paired("llama-3-70b", DEFAULT, {"model picks": MODELS, "MoE picks": moes}, MOVES, "bench_ch12_plan_ab_")


if __name__ == "__main__":
    main()
