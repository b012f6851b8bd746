"""Before/after CPU seconds of plan() from scratch, both sides in ONE process, alternating run by run (issue
35, arrays35h): the library at another commit is imported as ``llmsizing_base`` from a copy of that commit's
``src/`` and ``data/`` (git archive, the package renamed), so that both sides share the machine's load moment
by moment. Each run clears the kept results bench_planner.kept() and bench_moe_planner.clear() name (by module
and name, on each side where they exist).

    .venv/bin/python benchmarks/bench_ab.py BASE_COMMIT [RUNS] [CASE_PREFIX ...]   # default 9 runs a side

Prints per case the median and best of each side and the median of the paired ratios (this side over
BASE_COMMIT's, run by run: the figure to read on a shared machine), then the load average before and after.
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
sys.path.insert(0, str(ROOT / "src"))

#: The kept results cleared before each run: bench_planner.kept()'s and bench_moe_planner.clear()'s.
KEPT = (("planner", "_search"), ("memory", "_stage_params"), ("flops", "_training_flops_per_token"),
        ("moe", "_split"), ("activations", "_kept_moe_activations"), ("activations", "_kept_moe_block_terms"),
        ("moe", "dense_twin"), ("moe", "_layer_split"), ("moe", "_moe_layer_counts"),
        ("parallel", "_kept_parallel"), ("fewest_gpus", "_kept_stage_runs"), ("layouts", "_kept_stage_runs"),
        ("plan_memory", "kept_search_memory"),
        ("kernels", "_attention_efficiency"), ("parallel", "_kept_resolved"), ("states", "_kept_edge_params"),
        ("moe_time", "_mean_max_vio"), ("memory", "_kept_act_side"), ("memory", "_kept_state_side"),
        ("memory", "_act_layout"), ("plan_pricing", "_heavy_stages"), ("time_cost", "_kept_moe_layout"),
        ("memory", "_kept_act_core"), ("moe", "_stage_frame"), ("states", "_kept_state_elements"),
        ("moe", "_moe_in_stage"), ("states", "_edge_tensors"), ("kernels", "_grouped_points"),
        ("kernels", "_grouped_xy"), ("kernels", "layer_gemm_efficiency"), ("memory", "_kept_search_acts"),
        ("memory", "_kept_in_flight"), ("memory", "_search_layouts"),
        ("plan_terms", "_kept_dp_rows"), ("plan_moe", "_kept_dp_rows"), ("dense_arrays", "_shared_kept"),
        ("dense_arrays", "_kept_flight"), ("states", "_layer_params"),
        ("plan_stage_terms", "_kept_pointwise"), ("plan_terms", "_kept_layer_rows"),
        ("charts.serve_tune", "_sweep_points"), ("charts.time_money_checks", "_judged"),
        ("charts.time_money_plan", "_row_type"))


def side(package: str):
    """``(kept results, plan, catalogue)`` of ``package``."""
    fs = []
    for mod, name in KEPT:
        try:
            m = importlib.import_module(f"{package}.{mod}")
        except ImportError:                    # (a module of a later commit: fewest_gpus, session 23)
            continue
        if name in vars(m):                    # (not a forward's DeprecationWarning)
            fs.append(getattr(m, name))
    planner, catalog = (importlib.import_module(f"{package}.{m}") for m in ("planner", "catalog"))
    return fs, planner.plan, catalog


def main() -> None:
    import bench_planner

    base, args = sys.argv[1], sys.argv[2:]
    runs = int(args.pop(0)) if args and args[0].isdigit() else 9
    tmp = Path(tempfile.mkdtemp(prefix="bench_ab_"))
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", base, "src", "data"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        (tmp / "src" / "llmsizing").rename(tmp / "src" / "llmsizing_base")
        sys.path.insert(0, str(tmp / "src"))
        sides = {p: side(p) for p in ("llmsizing_base", "llmsizing")}
        for _, plan, _ in sides.values():                      # warm imports and the catalogues
            plan("llama-3-8b", tokens=1e9, seq=2048, global_batch=64, max_gpus=64)
        loads = [Path("/proc/loadavg").read_text().split()[0]]
        for label, model, kw in bench_planner.CASES:
            if args and not any(label.startswith(a) for a in args):
                continue
            times = {p: [] for p in sides}
            for i in range(runs):
                for p in (sides if i % 2 == 0 else reversed(list(sides))):
                    fs, plan, cat = sides[p]
                    for f in fs:
                        f.cache_clear()
                    gpus = (tuple(cat.get_gpu(getattr(g, "name", g)) for g in kw["gpus"]) if "gpus" in kw
                            else None)
                    c0 = time.process_time()
                    try:
                        plan(model, **{**kw, **({"gpus": gpus} if gpus else {})})
                    except ValueError:                          # (a refusal is timed too)
                        pass
                    times[p].append(time.process_time() - c0)
            b, a = times["llmsizing_base"], times["llmsizing"]
            ratio = statistics.median(y / x for x, y in zip(b, a))
            print(f"{label:50s} median {statistics.median(b):.3f} -> {statistics.median(a):.3f}  best "
                  f"{min(b):.3f} -> {min(a):.3f}  paired ratio {ratio:.2f}", flush=True)
        loads.append(Path("/proc/loadavg").read_text().split()[0])
        print(f"load average (1 min) before and after: {', '.join(loads)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
