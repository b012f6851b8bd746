"""What is left to cut in one new-setting move of chapter 17's widget (issues 35, 38; speed40), in one process
(``time.process_time``), and how much each idea of the speed40 brief could give at most, without changing a
plan or a pixel.

The walk is benchmarks/split_widget_move.py's: each model of ``MODELS17``, then each other control of
``CONTROL_MOVES`` to a new setting (a step, timed) and back (a kept answer, not timed); no speculation (as on
Voila). Per step:

* ``plan`` (``planner.plan``/``plans_within``), ``render`` (``charts.render_plan``), ``draw`` (the widget
  canvas's draw) and ``encode`` (``dashboard.encode_png``), as the move runs them;
* inside them, ``text layouts``: FreeType's layout of each new string (the canvas's
  ``get_text_width_height_descent``), and of it ``title 8.5 pt unused``: the memory panel's title laid out at
  8.5 pt to find it too wide, then laid out again at 7.5 pt (render_plan's fit check);
* after the move (not part of it, the same figure): ``redraw`` (the canvas drawn again with nothing changed:
  the floor of a draw, every kept bitmap, layout and legend used) and the encode's pieces on the same RGBA
  (``alpha check``, ``to RGB``, ``zlib``: level 1 as the widget uses it), with ``zlib level 0`` (no
  compression) and its PNG's size beside level 1's; and ``image message``: the dashboard image's state as
  ipywidgets sends it (``get_state``, ``_remove_buffers``, ``json.dumps``).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_speed40_parts.py [--rounds N]

Prints the median and mean CPU ms of each part over the steps, and the PNG sizes. Does not assert (timings
are not tests).

Measured 2026-12-04 03:56 UTC (main 6cbd9f35, 2 cores shared with other sessions, load 3.0), ``--rounds 2``,
60 steps, CPU ms median / mean:

    plan 45.4 / 38.4, render 8.4 / 9.3, draw 20.1 / 20.2, encode 4.2 / 4.3
    inside them: text layouts 3.3 / 3.4, of which the title's unused 8.5 pt layout 0.90 / 0.66
    redraw of the same figure 12.7 / 13.2 (so a new setting's draw costs 7.0 / 7.0 more than the floor)
    encode's pieces: alpha check 0.19, to RGB 0.43, zlib level 1 2.33 (level 0: 0.36)
    image message 0.11; PNG 56,079 bytes at level 1, 960,193 at level 0

So without changing a plan or a pixel, the render side of a new setting (render + draw + encode, ~33 ms) has
at most ~2 ms left to give this way (the unused title layout, level 0's zlib saving, which sends a 17x larger
image); the 12.7 ms floor is matplotlib's per-artist work, and plan() is the rest (speed40.md).
"""
from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ch17_models import CONTROL_MOVES  # noqa: E402
from split_widget_move import MODELS17  # noqa: E402


def _timed(owner, name, part, now, state):
    real = getattr(owner, name)

    def timed(*a, **k):
        if not state["on"]:
            return real(*a, **k)
        c0 = time.process_time()
        try:
            return real(*a, **k)
        finally:
            now[part] += time.process_time() - c0
    setattr(owner, name, timed)


def _cpu_ms(fn, n: int = 3) -> float:
    """The least CPU ms of ``n`` calls of ``fn`` (its result thrown away)."""
    best = float("inf")
    for _ in range(n):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return best * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1, help="walks (a new widget each)")
    args = ap.parse_args()

    import zlib

    import numpy as np
    from ipywidgets.widgets.widget import _remove_buffers
    from PIL import Image

    import llmsizing.planner as planner
    from llmsizing import charts
    from llmsizing.widgets import dashboard, long_context_widget

    now: dict = collections.defaultdict(float)
    state = {"on": False}
    _timed(planner, "plan", "plan", now, state)
    _timed(planner, "plans_within", "plan", now, state)
    _timed(charts, "render_plan", "render", now, state)
    _timed(dashboard, "encode_png", "encode", now, state)
    steps: list[dict] = []
    sizes: dict = collections.defaultdict(list)
    for _ in range(args.rounds):
        w = long_context_widget(MODELS17[0], speculate=False)
        canvas_cls = type(w.figure.canvas)
        if not hasattr(canvas_cls, "_s40"):
            _timed(canvas_cls, "draw", "draw", now, state)
            canvas_cls._s40 = True
        renderer_cls = type(w.figure.canvas.get_renderer())
        if not hasattr(renderer_cls, "_s40"):
            real_layout = renderer_cls.get_text_width_height_descent

            def layout(self, s, prop, ismath, real_layout=real_layout):
                if not state["on"]:
                    return real_layout(self, s, prop, ismath)
                c0 = time.process_time()
                try:
                    return real_layout(self, s, prop, ismath)
                finally:
                    dt = time.process_time() - c0
                    now["text layouts"] += dt
                    state["laid"].append((s, prop.get_size_in_points(), dt))
            renderer_cls.get_text_width_height_descent = layout
            renderer_cls._s40 = True
        for m in MODELS17:
            if m != w.controls["model"].value:
                w.controls["model"].value = m
            defaults = {c: w.controls[c].value for c, _ in CONTROL_MOVES}
            for c, value in CONTROL_MOVES:
                now.clear()
                state.update(on=True, laid=[])
                try:
                    w.controls[c].value = value
                finally:
                    state["on"] = False
                move = dict(now)
                laid = state["laid"]
                shrunk = {s for s, pt, _ in laid if pt == 7.5 and s.startswith("chosen:")}
                move["title 8.5 pt unused"] = sum(dt for s, pt, dt in laid if pt == 8.5 and s in shrunk)
                fig = w.figure
                move["redraw"] = _cpu_ms(fig.canvas.draw, 1)
                rgba = np.asarray(fig.canvas.buffer_rgba())
                move["alpha check"] = _cpu_ms(lambda: bool((rgba[:, :, 3] == 255).all()))
                a = np.ascontiguousarray(rgba)
                px = np.asarray(Image.frombuffer("RGBA", (a.shape[1], a.shape[0]), a, "raw", "RGBA", 0, 1)
                                .convert("RGB"))
                move["to RGB"] = _cpu_ms(lambda: Image.frombuffer("RGBA", (a.shape[1], a.shape[0]), a, "raw",
                                                                  "RGBA", 0, 1).convert("RGB"))
                rows = np.zeros((px.shape[0], 1 + px.shape[1] * 3), dtype=np.uint8)
                rows[:, 1:] = px.reshape(px.shape[0], -1)
                move["zlib level 1"] = _cpu_ms(lambda: zlib.compress(rows, 1))
                move["zlib level 0"] = _cpu_ms(lambda: zlib.compress(rows, 0))
                sizes["level 1"].append(len(dashboard.encode_png(rgba, 1)))
                sizes["level 0"].append(len(dashboard.encode_png(rgba, 0)))

                def message():
                    st = w.image.get_state()
                    st, paths, buffers = _remove_buffers(st)
                    return json.dumps({"method": "update", "state": st, "buffer_paths": paths}), buffers
                move["image message"] = _cpu_ms(message)
                steps.append(move)
            for c, _ in CONTROL_MOVES[::-1]:
                w.controls[c].value = defaults[c]
    order = ("plan", "render", "draw", "encode", "text layouts", "title 8.5 pt unused", "redraw",
             "alpha check", "to RGB", "zlib level 1", "zlib level 0", "image message")
    print(f"chapter 17: {len(steps)} steps; CPU ms, median / mean")
    for k in order:
        xs = [d.get(k, 0.0) * (1 if k in order[6:] else 1e3) for d in steps]
        print(f"  {k:24s} {statistics.median(xs):7.2f} {statistics.mean(xs):7.2f}")
    prem = [d.get("draw", 0.0) * 1e3 - d["redraw"] for d in steps]
    print(f"  {'draw - redraw':24s} {statistics.median(prem):7.2f} {statistics.mean(prem):7.2f}")
    for k, v in sizes.items():
        print(f"PNG bytes, {k}: median {statistics.median(v):,.0f}")


if __name__ == "__main__":
    main()
