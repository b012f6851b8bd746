"""How long a move of the chapter 17 and chapter 18 widgets takes in Python (issue 35's target: <= 100 ms per
move), without a browser: the control's new value is set, which redraws the widget (the Dashboard's own
``update``), timed in CPU seconds of this process and wall clock. For each widget: a move to a setting it has
not seen (chapter 17: a new planner search) and a move back to one it has (its kept plans).

    .venv/bin/python benchmarks/bench_moe_widgets.py

Prints; does not assert (timings are not tests).

Measured 2026-11-29 (branch moeplan35; machine shared at a load of about 13 on 2 cores, so the wall clock was
~10x the CPU time and only the CPU column means much), CPU ms per move (superseded: see 2026-12-01 below):

    ch17: llama-3.1-405b 128K -> 64K (new search)      666
    ch17: back to 128K (kept plans)                     131
    ch17: mixtral-8x7b at 128K (new search)             987
    ch17: mixtral-8x7b at 32K (new search)              951
    ch17: qwen3-30b-a3b at 32K (new search)            2133
    ch17: back to mixtral-8x7b at 32K (kept)            205
    ch18: dp 4 -> 8                                     142
    ch18: ep -> 4                                       175
    ch18: back to dp 4                                  145
    ch18: model -> deepseek-v3                          118
    ch18: all-to-all hidden 50%                         131

On 2026-11-29 neither widget met 100 ms per move: a kept setting of chapter 17 still redrew (render_plan,
130-200 ms) and each move of chapter 18 computed and drew one layout (render_moe_layout, 120-175 ms); a new
chapter 17 setting is a whole plan() (benchmarks/bench_moe_planner.py). Chapter 10's training-time chart for a
mixture of experts (now one plan per GPU count, issue 35) took 2.2 s CPU for Mixtral the first time and 0.10 s
for a move of the tokens (time_cost.moe_default_layout keeps its last 256 answers).

Measured 2026-12-01 16:51 UTC (branch moe35x, base main 057d2ec; the machine shared with other sessions at a
load of 3.0 to 3.8 on its 2 cores by uptime before and after), this script three times in a row, CPU ms per
move (chapter 17 from the first run only):

    ch17: llama-3.1-405b 128K -> 64K (new search)       73
    ch17: back to 128K (kept plans)                      0   (a kept figure is shown, not drawn again)
    ch17: mixtral-8x7b at 128K (new search)             75
    ch17: mixtral-8x7b at 32K (new search)              61
    ch17: qwen3-30b-a3b at 32K (new search)            124
    ch17: back to mixtral-8x7b at 32K (kept)             0
    ch18: dp 4 -> 8                               13 15 13
    ch18: ep -> 4                                 19 22 20
    ch18: recompute full                           0  0  0   (the widget's default already: no move)
    ch18: back to dp 4                            12 13 12
    ch18: model -> deepseek-v3                    17 15 14
    ch18: all-to-all hidden 50%                   13 12 12

Chapter 18 meets 100 ms per move (12-22 ms; its compute, one training_memory and one step_time, is 1-2 ms in
bench_moe_planner.py, the rest is drawing). Chapter 17 does not for every model: a new setting is a
whole plan(), 124 ms for Qwen3-30B-A3B at 32K here (issue 35's open item; benchmarks/bench_ch17_models.py).

Measured 2026-12-01 (branch w100, issue 38; main = 7c21f03: three runs 19:26:22-19:26:39 UTC, load 4.6-4.7 by
uptime, beside bench_widget_moves and two other helpers; then the branch once, 19:36:42, load 1.5: the
difference is mostly the load, the branch's changes are timed in bench_widget_moves), CPU and wall ms per
move, median of the three main runs -> the branch run:

    move                                          CPU          wall
    ch17: llama-3.1-405b 128K -> 64K (search)     116 ->  84   259 ->  85
    ch17: back to 128K (kept plans)                 0 ->   0     0 ->   0
    ch17: mixtral-8x7b at 128K (search)            45 ->  37    87 ->  37
    ch17: mixtral-8x7b at 32K (search)             70 ->  69   136 ->  69
    ch17: qwen3-30b-a3b at 32K (search)           120 -> 120   343 -> 120
    ch18: dp 4 -> 8                                15 ->  17    31 ->  17
    ch18: ep -> 4                                  16 ->  17    28 ->  17
    ch18: back to dp 4                             14 ->  15    27 ->  17
    ch18: model -> deepseek-v3                     16 ->  15    28 ->  16
    ch18: all-to-all hidden 50%                    19 ->  19    35 ->  19

Chapter 18 is under 100 ms (CPU and wall). Chapter 17's searches at a new context are not, for Qwen3-30B-A3B
(plan(): left to the planner's own work) and, at a load of 4-5, for the wall clock of the others.

Measured 2026-12-01 21:05 UTC (branch fast10, base main dc37b66; load 7.2 to 7.6 by uptime before and after,
other sessions on the 2 cores), this script once, CPU / wall ms per move: ch18 dp 4 -> 8 20 / 28, ep -> 4
22 / 34, back to dp 4 19 / 31, model -> deepseek-v3 21 / 29, all-to-all hidden 50% 28 / 40; ch17 405B 128K
-> 64K 100 / 116, Mixtral at 128K 49 / 77, at 32K 69 / 74, Qwen3-30B-A3B at 32K 153 / 232. The figures of
2026-11-29 at the top (ch18 118-175 ms, "neither widget met 100 ms") are superseded (audit35 item 7):
chapter 18 meets 100 ms per move, CPU and wall; chapter 17's Qwen3-30B-A3B search does not (fast17's).
Chapter 10's chart at a move to a mixture of experts: benchmarks/bench_moe_planner.py --ch10.
"""

from __future__ import annotations

import time

import matplotlib

matplotlib.use("Agg")

from llmsizing.widgets import long_context_widget, moe_layout_widget  # noqa: E402


def timed(box, **values) -> tuple[float, float]:
    """(CPU s, wall s) of setting the controls ``values`` (each move redraws)."""
    c0, t0 = time.process_time(), time.perf_counter()
    with box.hold() if hasattr(box, "hold") else _nothing():
        for k, v in values.items():
            box.controls[k].value = v
    return time.process_time() - c0, time.perf_counter() - t0


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main() -> None:
    lc = long_context_widget()
    moves = [("ch17: llama-3.1-405b 128K -> 64K (new search)", lc, dict(seq=65536)),
             ("ch17: back to 128K (kept plans)", lc, dict(seq=131072)),
             ("ch17: mixtral-8x7b at 128K (new search)", lc, dict(model="mixtral-8x7b")),
             ("ch17: mixtral-8x7b at 32K (new search)", lc, dict(seq=32768)),
             ("ch17: qwen3-30b-a3b at 32K (new search)", lc, dict(model="qwen3-30b-a3b")),
             ("ch17: back to mixtral-8x7b at 32K (kept)", lc, dict(model="mixtral-8x7b"))]
    moe = moe_layout_widget()
    moves += [("ch18: dp 4 -> 8", moe, dict(dp=8)),
              ("ch18: ep -> 4", moe, dict(ep=4)),
              ("ch18: recompute full", moe, dict(recompute="full")),
              ("ch18: back to dp 4", moe, dict(dp=4)),
              ("ch18: model -> deepseek-v3", moe, dict(model="deepseek-v3")),
              ("ch18: all-to-all hidden 50%", moe, dict(ep_overlap=0.5))]
    for label, box, values in moves:
        cpu, wall = timed(box, **values)
        print(f"{label:48s} {cpu * 1e3:7.0f} ms CPU {wall * 1e3:7.0f} ms wall")


if __name__ == "__main__":
    main()
