"""Before/after CPU seconds of the planner's cases, one case per process, for comparing two commits on a shared
machine (issue 35): run it alternately with PYTHONPATH at each commit's src, so both see the same load.

    PYTHONPATH=<commit>/src .venv/bin/python benchmarks/bench_compare.py CASE     # best of 3, CPU s

CASE: a label prefix of bench_planner.CASES, "cost_by_gpu", "ch10 MODEL GPU SEQ" (chapter 10's chart at a
move to MODEL, after the dense chart it leaves; GPU with "_" for spaces, "H100_SXM"), "ch17 MODEL SEQ" (the
chapter 17 widget's plan() for a new setting), or "ch17kept MODEL SEQ limit|tokens" (its move of the GPU limit to 4,096 or of the
tokens per batch to 8M, after the setting it leaves). Every kept result is cleared before each run (bench_moe_planner.clear). Prints
"CASE<tab>seconds<tab>training_memory calls<tab>group_link calls" of the best run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_moe_planner  # noqa: E402
import bench_planner  # noqa: E402


def job(case: str):
    from llmsizing.planner import plan
    from llmsizing.time_cost import cost_by_gpu

    if case == "cost_by_gpu":
        return lambda: cost_by_gpu("deepseek-v3", tokens=14.8e12, seq=4096)
    if case.startswith("ch10 "):                # chapter 10's chart, after the dense one (not timed)
        import matplotlib

        matplotlib.use("Agg")
        from llmsizing.charts import render_training_time

        _, model, gpu, seq = case.split()

        def move():
            render_training_time(model, tokens=1e12, gpu=gpu.replace("_", " "), seq=int(seq), n_gpus=1024)

        move.before = lambda: render_training_time("llama-3-70b", tokens=1e12, gpu="H100 SXM", seq=8192,
                                                   n_gpus=1024)
        return move
    if case.startswith("ch17kept "):             # a move of the GPU limit or the tokens per batch, after
        _, model, seq, what = case.split()       # the setting it leaves was searched (not timed)
        seq = int(seq)
        gb = 2**24 // seq
        kw = dict(global_batch=gb, max_gpus=4096) if what == "limit" else dict(global_batch=gb // 2,
                                                                                max_gpus=16384)

        def move():
            plan(model, tokens=8e11, gpus=("H100 SXM",), seq=seq, **kw)

        move.before = lambda: plan(model, tokens=8e11, gpus=("H100 SXM",), seq=seq, global_batch=gb,
                                   max_gpus=16384)
        return move
    if case.startswith("ch17 "):
        _, model, seq = case.split()
        seq = int(seq)
        return lambda: plan(model, tokens=8e11, gpus=("H100 SXM",), seq=seq, global_batch=max(2**24 // seq, 1),
                            max_gpus=16384)
    label, model, kw = next(c for c in bench_planner.CASES if c[0].startswith(case))
    return lambda: plan(model, **kw)


def counted():
    """Wrap training_memory and group_link to count calls (where the modules call them)."""
    from llmsizing import layouts, memory, network, plan_pricing

    n = {"tm": 0, "gl": 0}
    real_tm, real_gl = memory.training_memory, network.group_link

    def tm(*a, **k):
        n["tm"] += 1
        return real_tm(*a, **k)

    def gl(*a, **k):
        n["gl"] += 1
        return real_gl(*a, **k)

    memory.training_memory = tm
    plan_pricing.training_memory = tm
    plan_pricing.group_link = gl
    network.group_link = gl
    return n


def main() -> None:
    case = sys.argv[1]
    f = job(case)
    from llmsizing.planner import plan

    plan("llama-3-8b", tokens=1e9, seq=2048, global_batch=64, max_gpus=64)        # warm imports
    best = []
    for _ in range(3):
        bench_moe_planner.clear()
        if hasattr(f, "before"):
            f.before()
        c0 = time.process_time()
        f()
        best.append(time.process_time() - c0)
    bench_moe_planner.clear()
    if hasattr(f, "before"):
        f.before()
    n = counted()
    f()
    print(f"{case}\t{min(best):.3f}\t{n['tm']}\t{n['gl']}")


if __name__ == "__main__":
    main()
