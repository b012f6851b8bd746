"""How long the planner takes for a mixture of experts (issue 35's targets: the whole GPU catalogue <= 0.3 s,
any plan() <= 1 s, e.g. Qwen3-30B-A3B at 64K), with the MoE time terms of llmsizing.moe_time in the search.

    .venv/bin/python benchmarks/bench_moe_planner.py        # best of 3 each, from scratch

The MoE cases of benchmarks/bench_planner.py, timed by its own loop (kept results cleared before each run).
Prints; does not assert (timings are not tests).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_planner  # noqa: E402

MOE = ("deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b")

if __name__ == "__main__":
    bench_planner.CASES[:] = [c for c in bench_planner.CASES if c[1] in MOE]
    bench_planner.main()
