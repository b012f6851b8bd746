"""Paired A/B (ab_rounds) of the kept pricing (merge 98a9287): chapter 17's widget, after a pick of each
mixture of experts (kept by the widget's warm-up), moving the GPU types from H100 SXM to H100 SXM and B200
(``--move gpus``, a new search whose H100 half the pick's search priced) or the context to 32K (``--move
seq``, a new search at a new context: nothing kept applies, a control). New: ``plan_pricing.kept_price`` (each
GPU's priced block kept); base: ``plan_pricing._price`` called on all the GPUs at once, as before. Each move
is timed whole (search, render and PNG) and set back (not timed) before the next model.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_price25_ab.py [--rounds N] [--move gpus|seq]
        [--plan-only]

Prints per model the median CPU ms per move of each side and the median paired ratio. ``--plan-only``: plan()
alone, no widget: the pick's search (128K, H100 SXM) made with the searches cleared, then the two-GPU search
timed, sides alternating, for the four models whose moves were over 100 ms (bench_ch17_plan_stages.py,
2026-12-01). Does not assert.

Measured 2026-12-01 (branch price25, 2 cores shared with other sessions), median CPU ms, base -> new (median
paired ratio):

* ``--plan-only --rounds 16`` (19:14:05-19:14:21 UTC, load 1.3-1.4): plan() of the two-GPU move, Qwen3-30B-A3B
  88.0 -> 81.8 (0.887), DeepSeek-V2 57.8 -> 50.7 (0.864), granite-3.0-1b-a400m 89.2 -> 68.0 (0.796),
  gpt-oss-120b 83.5 -> 69.8 (0.873).
* whole widget moves (search, render, PNG), ``--move gpus``: ``--rounds 6`` (19:11:51-19:12:21, load 2.3-1.9)
  Qwen3 156 -> 127 (0.810), DeepSeek-V2 115 -> 114 (0.986), granite 1B 139 -> 120 (0.834), gpt-oss 124 -> 121
  (0.989), all 111 -> 99; ``--rounds 12`` (19:12:24-19:13:27, load 1.7-1.8) Qwen3 144 -> 140 (0.979),
  DeepSeek-V2 122 -> 128 (1.054), granite 1B 136 -> 130 (0.976), gpt-oss 121 -> 115 (0.929), all 110 -> 106,
  the ten models' ratios 0.93-1.05: at this machine's spread a whole move's ~10-20 ms are not resolved.
* ``--move seq --rounds 6`` (the control, 19:13:27-19:13:54, load 1.8-1.5): all 90 -> 89, ratios 0.95-1.02
  but one outlier (gpt-oss 1.30).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_rounds  # noqa: E402

from llmsizing import plan_pricing, planner  # noqa: E402

MOVES = {"gpus": ("H100 SXM", "B200"), "seq": 32768}


def main() -> None:
    import argparse
    import time

    from llmsizing.widgets import long_context_widget

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--move", choices=sorted(MOVES), default="gpus")
    ap.add_argument("--plan-only", action="store_true")
    args = ap.parse_args()
    if args.plan_only:
        plan_only(args.rounds)
        return
    move_kind = args.move

    def use(side):
        planner.kept_price = side

    def move(w, m):
        w.controls["model"].value = m                 # (the pick: kept by the warm-up, not timed)
        before = w.controls[move_kind].value
        c0 = time.process_time()
        w.controls[move_kind].value = MOVES[move_kind]
        spent = time.process_time() - c0
        w.controls[move_kind].value = before
        return spent

    got = ab_rounds.alternate(args.rounds, use, plan_pricing.kept_price, plan_pricing._price,
                              lambda: long_context_widget("llama-3-8b"), move)
    ab_rounds.report(got, title=f"move {move_kind}")


def plan_only(rounds: int) -> None:
    """plan() of the move to two GPU types after the pick's search, base and new alternating."""
    import statistics
    import time

    kw = dict(tokens=8e11, max_gpus=16384, seq=131072, global_batch=128)
    for m in ("qwen3-30b-a3b", "deepseek-v2", "granite-3.0-1b-a400m", "gpt-oss-120b"):
        res: dict = {"base": [], "new": []}
        for r in range(rounds):
            for side in (("base", "new") if r % 2 == 0 else ("new", "base")):
                planner.kept_price = plan_pricing.kept_price if side == "new" else plan_pricing._price
                planner._search.cache_clear()                 # (and the priced blocks)
                planner.plan(m, gpus=("H100 SXM",), **kw)
                c0 = time.process_time()
                planner.plan(m, gpus=("H100 SXM", "B200"), **kw)
                res[side].append(time.process_time() - c0)
        planner.kept_price = plan_pricing.kept_price
        b, n = res["base"], res["new"]
        print(f"{m:24s} base {statistics.median(b) * 1e3:6.1f} ms  new {statistics.median(n) * 1e3:6.1f} ms  "
              f"ratio {statistics.median([y / x for x, y in zip(b, n)]):.3f}")


if __name__ == "__main__":
    main()
