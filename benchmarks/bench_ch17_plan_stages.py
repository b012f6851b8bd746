"""Where plan()'s CPU time goes in the chapter 17 moves that stay over 100 ms (issue 35): after a pick
of a mixture of experts (its search at the widget's defaults, 128K and H100 SXM, made first and kept), a new
search at context 32K, or at 128K on H100 SXM and B200. Each round clears the planner's kept results
(benchmarks/bench_planner.kept), makes the pick's search, then times the move's search with each stage's CPU
time counted by a wrapper around the module attribute that calls it (nested stages are indented; a stage's
time includes its sub-stages').

    PYTHONPATH=src .venv/bin/python benchmarks/bench_ch17_plan_stages.py [--rounds N] [MODEL ...]

Prints the median CPU ms per stage and move. Does not assert (timings are not tests). The wrappers cost a
few microseconds a call (kept_candidates is called ~260 times a search).

Measured 2026-12-01 (branch moe24, 18:34:29-18:34:36 UTC, load 3.7 on 2 cores shared with other sessions),
--rounds 5, median CPU ms:

    stage                               qwen3 32K  qwen3 x2  dsv2 32K  dsv2 x2  gran1b 32K  gran1b x2
    plan                                     73.0      95.4      67.3     64.6        52.8       75.9
    _search (planner.py)                     64.9      77.6      64.5     56.7        44.6       59.4
    fitting_plans (plan_memory.py)           43.8      32.7      49.6     29.0        27.0       16.1
     kept_candidates (plan_tables.py)         5.6       0.3       5.8      0.5         3.6        0.2
     table_totals (plan_tables.py)           31.6      17.0      37.4     16.7        19.0        6.4
      prefetch (dense_arrays.py)              4.5       0.6       5.7      0.5         3.1        0.4
      prefetch_states (moe_prefetch.py)       7.0       0.7       7.6      0.5         5.2        0.4
      prefetch_cp (dense_arrays.py)           7.0       0.2       8.9      0.2         4.3        0.1
      stored_states (moe_prefetch.py)         2.4       0.2       2.9      0.2         1.9        0.1
    _price (plan_pricing.py)                 17.5      38.1      11.1     23.1        14.4       37.5

("x2": 128K on H100 SXM and B200.) The move to 32K is mostly the memory fit (table_totals: the model states
and activations of every layout at the new context, then the numpy table), the move to two GPU types mostly
_price (both GPUs priced again, the H100's as the pick's search priced it: its layer_terms and
moe_dp_collectives), and plan() outside _search (the table, its ranking and front, in planner.py) 8-18 ms.

Since merge 98a9287, _search prices through plan_pricing.kept_price (each GPU's block kept; its stages here:
kept_price, its _digest of each GPU's candidates and _price), and the benchmark takes a fourth model.
Measured 2026-12-01 (branch price25, 18:52:48-18:52:55 UTC, load 3.8), --rounds 3 qwen3-30b-a3b deepseek-v2
granite-3.0-1b-a400m gpt-oss-120b, median CPU ms:

    stage                 qwen3 32K  qwen3 x2  dsv2 32K  dsv2 x2  gran1b 32K  gran1b x2  gptoss 32K  gptoss x2
    plan                       76.9      85.9      68.0     57.3        60.2       71.0        60.7       55.9
    _search                    68.3      61.1      64.1     49.4        51.7       51.0        55.4       44.8
    fitting_plans              44.6      28.7      48.2     27.6        30.3       22.1        37.5       20.7
     table_totals              32.3      14.6      36.5     16.5        21.6        8.7        26.2       10.4
    kept_price                 19.4      25.6      12.0     17.2        18.0       23.5        14.8       19.6
     _digest                    1.4       2.8       0.6      1.3         1.4        2.8         0.8        1.8
     _price                    18.0      21.7      11.4     15.5        16.5       19.5        13.9       17.1

The two-GPU move now prices the B200 alone (_price 38.1 -> 21.7 ms for Qwen3, 37.5 -> 19.5 for granite 1B,
23.1 -> 15.5 for DeepSeek-V2); the SHA-1 of each GPU's candidates and the split by GPU cost 1.5-4 ms. The move
to 32K is unchanged: nothing of the pick's search is at that context.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_planner  # noqa: E402

from llmsizing import plan_memory, plan_pricing, plan_tables, planner  # noqa: E402

#: (module, attribute, label): the stages timed, outermost first.
STAGES = ((planner, "_search", "_search (planner.py)"),
          (planner, "fitting_plans", "fitting_plans (plan_memory.py)"),
          (plan_memory, "kept_candidates", " kept_candidates (plan_tables.py)"),
          (plan_memory, "table_totals", " table_totals (plan_tables.py)"),
          (plan_memory, "arrays_prefetch", "  prefetch (dense_arrays.py)"),
          (plan_memory, "prefetch_states", "  prefetch_states (moe_prefetch.py)"),
          (plan_memory, "arrays_prefetch_cp", "  prefetch_cp (dense_arrays.py)"),
          (plan_tables, "stored_states", "  stored_states (moe_prefetch.py)"),
          *(((planner, "kept_price", "kept_price (plan_pricing.py)"), (plan_pricing, "_digest", " _digest"),
              (plan_pricing, "_price", " _price (plan_pricing.py)")) if hasattr(planner, "kept_price") else
            ((planner, "_price", "_price (plan_pricing.py)"),)))
MOVES = ((32768, ("H100 SXM",)), (131072, ("H100 SXM", "B200")))


def _called(context, f, a, k):
    with context:
        return f(*a, **k)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("models", nargs="*", default=["qwen3-30b-a3b", "deepseek-v2", "granite-3.0-1b-a400m"])
    args = ap.parse_args()
    kept = list(bench_planner.kept())            # (before the wrappers hide the caches' cache_clear)
    clock: dict = {}
    real = [(mod, name, getattr(mod, name)) for mod, name, _ in STAGES]

    @contextlib.contextmanager
    def counted(label):                  # (a stage's CPU time added to its total, nested stages inside it)
        c0 = time.process_time()
        yield
        clock[label] = clock.get(label, 0.0) + time.process_time() - c0

    def timed(f, label):
        return lambda *a, **k: _called(counted(label), f, a, k)

    for (mod, name, f), (_, _, label) in zip(real, STAGES):
        setattr(mod, name, timed(f, label))
    got: dict = {}
    try:
        planner.plan("llama-3-8b", tokens=8e11, gpus=("H100 SXM",), seq=131072, global_batch=128,
                     max_gpus=16384)                                       # (imports, GPUs: a first move)
        for _ in range(args.rounds):
            for m in args.models:
                for seq, gpus in MOVES:
                    for cache in kept:
                        cache.cache_clear()
                    planner.plan(m, tokens=8e11, gpus=("H100 SXM",), seq=131072, global_batch=128,
                                 max_gpus=16384)                           # the pick (its search kept)
                    clock.clear()
                    c0 = time.process_time()
                    planner.plan(m, tokens=8e11, gpus=gpus, seq=seq, global_batch=2**24 // seq,
                                 max_gpus=16384)
                    clock["plan"] = time.process_time() - c0
                    got.setdefault((m, seq, len(gpus)), []).append(dict(clock))
    finally:
        for mod, name, f in real:
            setattr(mod, name, f)
    heads = [f"{m[:9]} {seq // 1024}K{' x2' if n > 1 else ''}" for m, seq, n in got]
    print(f"{'stage':36s}" + "".join(f" {h:>17s}" for h in heads))
    for label in ("plan", *(label for _, _, label in STAGES)):
        print(f"{label:36s}" + "".join(f"{statistics.median(r.get(label, 0.0) for r in rows) * 1e3:18.1f}"
                                       for rows in got.values()))


if __name__ == "__main__":
    main()
