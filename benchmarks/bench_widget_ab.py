"""Paired A/B of widget moves (issue 38): the library at another commit (``BASE``, main by default) against
this checkout, both in ONE process, side by side round by round, so that the load of a shared machine falls
on both alike (as benchmarks/bench_ab.py does for ``plan()``). Each round builds each side's widget anew,
with every kept search cleared (bench_planner.kept(), by module and name on each side), and moves its
controls as benchmarks/bench_widget_moves.py does (each control to up to ``--moves`` other values and back);
the moves to a setting not drawn before in the round are timed (CPU, ``time.process_time``) and paired move
by move. The base side is ``BASE``'s ``src`` and ``data`` (``git archive``) imported as ``llmsizing_base``;
the widgets' canvas (``widgets/canvas.py``, ``widgets/pixels.py``: matplotlib's classes patched once per
process) must be the same on both sides and is shared.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_widget_ab.py [BASE] [--rounds N] [--moves N]
        [--only WIDGET ...] [--controls CONTROL ...] [--participant PICKS] [--warm] [--kinds] [--freeze]

``--participant PICKS`` walks each widget as tests/browser/measure_participant.py's participant does in the
page instead (pick33): a model pick (its mixtures of experts and dense models in turn, never a kept answer),
then every other control one step and back, PICKS times; the picks are the ``model`` row.

Prints per widget and control the number of moves, the median CPU ms base -> this checkout and the median of
the paired ratios (this / base, move by move: the figure to read on a shared machine), then per widget and in
all, and the load average before and after. ``--parts MODULE.NAME ...`` (names of the package, e.g.
``planner.fitting_plans``, wrapped on each side where a caller looks them up) also times the CPU spent inside
them during each move, printed the same way below. Does not assert (timings are not tests).

Measured (wid33, 2026-12-03, against main b90918cc, --moves 4, the two planner widgets; medians of the moves
to new settings, base -> branch, and the median paired ratio):

* right-hand panels kept (7a911538), 4 rounds, load 2.8: long_context 38.6 -> 37.1 ms (1.007), planner
  50.3 -> 43.7 (0.904); 10 rounds, long_context only, load 2.7: 38.7 -> 31.4 (0.831); 8 rounds, load
  5.6-6.8: long_context 55.8 -> 48.6 (0.919), planner 66.0 -> 60.2 (0.883), all 400 moves 0.891;
* and the left panel's lines kept (87ee5cba), 8 rounds, load 2.7 -> 1.8: long_context 41.8 -> 36.6 (0.903),
  planner 52.5 -> 42.8 (0.851), all 400 moves 48.6 -> 40.4 ms (0.864); every control's ratio below 1;
  again, 8 rounds, load 1.6 -> 1.2: long_context 42.8 -> 37.1 (0.882), planner 53.5 -> 45.2 (0.812), all
  50.2 -> 43.2 ms (0.831).

Measured (pick33, 2026-12-03, against main 556b0e98, ``--only planner_widget --participant 8 --rounds 8``,
load 1.1 -> 1.0): render_plan's left panel adding its kept lines again when the set of lines changes (most
model picks: another model's fronts fall on other GPU types) instead of making them anew: model picks 122.8
-> 117.5 ms (paired ratio 0.981, 64 picks), deadline 48.0 -> 44.0 (0.916), deadline rule 41.9 -> 38.7
(0.936), every control's ratio below 1; all 704 moves 53.6 -> 50.9 ms (0.979). Whole moves are within this
machine's noise, though: again, 6 rounds, load 0.8-0.9, picks 94.6 -> 92.3 (1.036), all 528 moves 1.005,
while inside render_plan (``--parts charts.render_plan``) every run cuts it: all 10.8 -> 9.8 ms (0.939),
deadline 0.843, budget 0.832, picks 0.959; picks and deadline alone, 10 rounds: render 15.5 -> 12.5 (0.845)
on picks, 0.876 in all; chapter 17's widget (5 picks, 4 rounds): render 9.1 -> 8.7 (0.918), whole 0.961.
That change (pick33's 64c81160) was not merged: whole moves did not move beyond the noise, and the
lead kept render_plan simpler (session 33's closing note).

Measured (srvcurve34, 2026-12-03, against main b4841c33, ``--only serving_widget --moves 4``): chapter 15's
curve with its band of the stated range and the summary's "point (low-high)" (serving_ends instead of a
second serving() through serving_range): 6 rounds, load 7.9 -> 8.6, all 162 moves 26.5 -> 29.3 ms (paired
ratio 1.070); 8 rounds, load 9.1 -> 9.8, all 216 moves 27.6 -> 30.4 ms (1.098); batch moves (the sweep
kept) 1.035-1.053. About 3 ms a move more, far under the 100 ms a move may take.

Measured (srvqueue34, 2026-12-03, against main cafced21, ``--only serving_widget --moves 4``): the summary's
queued line as "point (low-high)" (two more figures through serving_ends, two property reads): 6 rounds,
load 3.5 -> 3.3, all 162 moves 30.1 -> 32.0 ms (1.032); 8 rounds, load 3.2 -> 3.1, 35.6 -> 36.0 ms (0.991);
the same 8 rounds against this checkout itself (``HEAD``, an A/A) gave 1.032: within the machine's noise.

Measured (moefast34, 2026-12-03, against main b4841c33, ``--participant 10 --rounds 6 --warm --kinds
--freeze --parts planner.plan``, one widget a run; CPU ms, medians, paired ratio). Chapter 12 built warm
(``planner_widget(warm=True)``, as its page builds it), load 1.2: MoE picks 153.5 -> 47.6 (0.304; inside
plan() 85.7 -> 0), dense picks 85.6 -> 84.7 (0.989), other moves on a MoE 50.6 -> 50.5 (1.008), on a dense
model 40.6 -> 41.8 (1.056; the GPU types 1.092: a move after a warm pick finds fewer of that model's kept
fits than after the pick's own search). Chapter 17 (plan_tables.table_totals a block of candidates at a
time), load 1.1-1.7: all 360 moves 61.0 -> 57.4 (0.931), other moves on a MoE 72.4 -> 69.1 (0.896), dense
picks 90.6 -> 82.3 (0.856), MoE picks (warm on both sides) 34.6 -> 32.4 (0.966); without ``--freeze``,
load 2-2.7: 0.918 and 1.019 in two runs, so the blocks are worth 0-10% of a move, within this machine's
noise in one run of two. Both widgets in one run (5 rounds, load 2.0-2.9), CPU then wall: chapter 12's MoE
picks 87.2 -> 42.4 (0.457) and 88.8 -> 43.3 ms wall; chapter 17 all 0.857 CPU, 0.782 wall; but chapter 17's
MoE picks, which search on neither side, moved by 0.836 too: a ratio of 0.85-0.95 here is partly this
tool's own drift, not the change.

Measured (ranges34, 2026-12-03, against the tip of main then, up to e8279b71, ``--only fleet_widget
--moves 3``): every fleet plan also carries its latencies, request time and rate on its own fleet at both
ends of the engine's speed (serve_fleet.on_fleet_ends: 0.03-0.25 ms a plan, timed alone, against 9-11 ms a
replicas_for): 4 rounds, load 1.6 -> 2.1, all 116 moves 62.9 -> 67.3 ms (1.056); 8 rounds, load 1.8 ->
1.9, all 232 moves 59.1 -> 58.2 ms (1.012). Within the machine's noise.

Measured (fleetsum34, 2026-12-03, against main 8a95f98f, ``--only fleet_widget --moves 3``): the fleet
summary's percentile TTFT and ITL as "point (low-high)" on this fleet (six more numbers formatted from fields
already computed): 4 rounds, load 2.6 -> 2.8, all 116 moves 56.3 -> 55.2 ms CPU (paired ratio 0.960), wall
58.6 -> 57.3 ms. Within the machine's noise.

Measured (hot34, 2026-12-03, against main 8a95f98f, ``--moves 3``; CPU ms, medians, paired ratio): the fleet
widget with each distinct replica priced once per search (serve_search.kept_servings: 281 serving() calls
-> 113 for chapter 15's three plans), 4 rounds, load 4.5 -> 4.4: all 116 moves 56.2 -> 37.7 (0.686), every
control below 0.81. Chapter 10's widget keeping which counts hold a step and the fewest that do (and
min_gpus's dense layouts through kept_parallel), 6 rounds, load 1.8 -> 1.6: all 102 moves 34.8 -> 24.0
(0.622); tokens 0.468, MFU 0.482, GPU count 0.577 (no search left), model 0.897, GPU 0.841, sequence 0.822.

Measured (churn35, 2026-12-03, against main 8d2943c4, ``--only serving_widget --moves 4 --rounds 6``, load
4.0 -> 4.4): ``Serving.cycle_s`` now counts vLLM's KV preemption churn (up to 1.5 s a setting: Llama-3-8B on
an H100 at 8,192 + 4,096 tokens, batch 2,048; 98 of the 228 settings over the KV room of the widget's
prompt x output x batch grid take over 50 ms, median 34 ms), so the summary states the waves alone
(``waves_s``) over the KV room and ``cycle_s`` (no churn to count) only for a batch queued by the cap: all
162 moves 40.2 -> 39.6 ms CPU (paired ratio 0.984), every control 0.92-1.03. Six settings over the KV room
rendered cold (render_serving_curve, sweep cache cleared; one process a side, 7 rounds alternated): 28-59
ms a render on either side, no render counting the churn.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_planner  # noqa: E402
from bench_widget_moves import other_values  # noqa: E402

import llmsizing  # noqa: E402
import llmsizing.widgets  # noqa: E402

#: The widgets' canvas modules, shared by both sides (they patch matplotlib's classes once per process).
SHARED = ("widgets.pixels", "widgets.canvas")


def kept_names() -> list[tuple[str, str]]:
    """bench_planner.kept()'s kept results as (module under the package, name)."""
    out = []
    for f in bench_planner.kept():
        for name, mod in list(sys.modules.items()):
            if name.startswith("llmsizing.") and mod is not None:
                hit = next((a for a, v in vars(mod).items() if v is f), None)
                if hit is not None:
                    out.append((name.split(".", 1)[1], hit))
                    break
    return out


def clear(package: str, names) -> None:
    for mod, name in names:
        f = getattr(sys.modules.get(f"{package}.{mod}"), name, None)
        if f is not None and hasattr(f, "cache_clear"):
            f.cache_clear()


def boards(w) -> list:
    """The dashboards in a widget (either side's Dashboard class: by its controls)."""
    if hasattr(w, "controls") and hasattr(w, "render"):
        return [w]
    return [d for child in getattr(w, "children", ()) for d in boards(child)]


def state(board) -> tuple:
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in board.values().items())


#: CPU seconds spent inside the wrapped parts (--parts) since the move began.
INSIDE = [0.0]


def wrap_parts(package: str, parts) -> None:
    """Wrap each ``module.name`` of ``parts`` in ``package`` to add its CPU time to :data:`INSIDE` (outermost
    calls only)."""
    depth = [0]
    for spec in parts:
        mod, name = spec.rsplit(".", 1)
        module = importlib.import_module(f"{package}.{mod}")
        real = getattr(module, name)

        def timed(*a, _real=real, **k):
            depth[0] += 1
            c0 = time.process_time()
            try:
                return _real(*a, **k)
            finally:
                depth[0] -= 1
                if not depth[0]:
                    INSIDE[0] += time.process_time() - c0

        if hasattr(real, "cache_clear"):
            timed.cache_clear = real.cache_clear
        setattr(module, name, timed)


def one_round(widgets, name: str, n: int, controls) -> dict:
    """``{(board, control, value, k): (CPU s, CPU s inside the parts)}`` of a new widget's moves to settings
    not drawn before."""
    w = build(widgets, name)
    got = {}
    for b, board in enumerate(boards(w)):
        seen = {state(board)}
        for key, ctrl in board.controls.items():
            if controls and key not in controls:
                continue
            default = ctrl.value
            for k, value in enumerate(other_values(ctrl, n)):
                for target in (value, default):
                    if target == ctrl.value:
                        continue
                    _timed_move(board, seen, got, (b, key, repr(target), k), ctrl, target)
    return got


#: Keywords each widget factory is built with (``--warm``: ``warm=True`` where a side's factory takes it, as
#: chapter 12's page builds its widget since moefast34; chapter 17's is warm by default).
BUILD_KW: dict = {}


def build(widgets, name: str):
    """The widget ``name`` of ``widgets`` (either side's package), built with the :data:`BUILD_KW` its factory
    takes (not timed)."""
    import inspect

    factory = getattr(widgets, name)
    taken = inspect.signature(factory).parameters
    w = factory(**{k: v for k, v in BUILD_KW.items() if k in taken})
    if FREEZE:          # (--freeze: as a page's kernel, where the first draw freezes what the build made)
        import gc

        gc.collect()
        gc.freeze()
    return w


#: ``--freeze``: after each widget's build, a full collection and :func:`gc.freeze`, as a page's kernel does
#: once, at its first dashboard's draw (widgets/dashboard.py ``_freeze_once``: there the build's objects,
#: a warm widget's tables too, are frozen before any move; here the first widget of the process alone was).
FREEZE: list = []


def _timed_move(board, seen: set, got: dict, label: tuple, ctrl, target) -> None:
    """Set ``ctrl`` to ``target`` and, when the board's setting was not drawn before (not in ``seen``), keep
    ``got[label] = (CPU s of the move, CPU s inside the parts, wall s of the move)``."""
    INSIDE[0], c0, w0 = 0.0, time.process_time(), time.perf_counter()
    ctrl.value = target
    t, wall = time.process_time() - c0, time.perf_counter() - w0
    if state(board) not in seen:
        seen.add(state(board))
        got[label] = (t, INSIDE[0], wall)


def _participant_moe() -> tuple:
    """The mixture-of-experts models a participant picks in turn with dense ones: tests/browser/
    measure_participant.py's ``MOE``, read from its source (importing it needs Playwright)."""
    import ast

    path = Path(__file__).resolve().parents[1] / "tests" / "browser" / "measure_participant.py"
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MOE" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise LookupError(f"{path}: no MOE list")


PARTICIPANT_MOE = _participant_moe()


def participant_round(widgets, name: str, picks: int, controls) -> dict:
    """A new widget walked as measure_participant.participant walks it in the page (``--participant``):
    a model pick (mixture of experts and dense in turn, in its order: never a kept answer), then every
    other control one step (:func:`other_values`, one) and back, for ``picks`` picks. ``{(board, control,
    value, k): (CPU s, CPU s inside the parts)}`` of the moves to settings not drawn before (the picks
    under ``model``)."""
    w = build(widgets, name)
    got = {}
    for b, board in enumerate(boards(w)):
        seen = {state(board)}
        model = board.controls.get("model")
        if model is None:
            continue
        options = [o[1] if isinstance(o, tuple) else o for o in model.options]
        others = [o for o in options if o != model.value and o not in PARTICIPANT_MOE]
        others = [others[(j * 7) % len(others)] for j in range(len(others))]
        moe = [o for o in PARTICIPANT_MOE if o in options and o != model.value]
        order = [x for pair in zip(moe, others) for x in pair] + moe[len(others):] + others[len(moe):]

        def timed(key, ctrl, target, k):
            at = target if key == "model" else model.value              # (the model the move is made on)
            _timed_move(board, seen, got, (b, key, repr(target), k, at), ctrl, target)

        for k, m in enumerate(order[:picks]):
            timed("model", model, m, k)
            for key, ctrl in board.controls.items():
                if key == "model" or (controls and key not in controls):
                    continue
                default = ctrl.value
                for value in other_values(ctrl, 1):
                    timed(key, ctrl, value, k)
                    ctrl.value = default
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", nargs="?", default="main")
    ap.add_argument("--rounds", type=int, default=4,
                    help="rounds (each side once a round, order alternating)")
    ap.add_argument("--moves", type=int, default=4)
    ap.add_argument("--only", nargs="*", default=["long_context_widget", "planner_widget"])
    ap.add_argument("--controls", nargs="*", default=None)
    ap.add_argument("--parts", nargs="*", default=[], help="module.name of the package, timed inside moves")
    ap.add_argument("--participant", type=int, default=0, metavar="PICKS",
                    help="walk each widget as the page's participant does, PICKS model picks (pick33)")
    ap.add_argument("--kinds", action="store_true",
                    help="with --participant: also by kind of move (pick or other; MoE or dense model)")
    ap.add_argument("--freeze", action="store_true",
                    help="gc.freeze() after each widget's build, as a page's first draw does (see FREEZE)")
    ap.add_argument("--warm", action="store_true",
                    help="build each widget with warm=True where its factory takes it (the pages' calls)")
    args = ap.parse_args()
    if args.warm:
        BUILD_KW["warm"] = True
    if args.kinds:
        KINDS.append(True)
    if args.freeze:
        FREEZE.append(True)
    diff = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", args.base, "--",
                           *(f"src/llmsizing/{m.replace('.', '/')}.py" for m in SHARED)])
    if diff.returncode:
        raise SystemExit(f"{', '.join(SHARED)} differ from {args.base}'s: both sides share them, so this "
                         "tool cannot compare them")
    tmp = Path(tempfile.mkdtemp(prefix="bench_widget_ab_"))
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, "src", "data"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        (tmp / "src" / "llmsizing").rename(tmp / "src" / "llmsizing_base")
        sys.path.insert(0, str(tmp / "src"))
        for m in SHARED:
            sys.modules[f"llmsizing_base.{m}"] = importlib.import_module(f"llmsizing.{m}")
        sides = {"base": importlib.import_module("llmsizing_base.widgets"), "new": llmsizing.widgets}
        names = kept_names()
        for package in ("llmsizing_base", "llmsizing"):
            wrap_parts(package, args.parts)
        for side, widgets in sides.items():                 # (warm: imports, catalogues, first draws)
            for name in args.only:
                one_round(widgets, name, 1, args.controls)
        loads = [Path("/proc/loadavg").read_text().split()[0]]
        times = {s: [] for s in sides}
        for r in range(args.rounds):
            for side in (sides if r % 2 == 0 else reversed(list(sides))):
                clear("llmsizing_base" if side == "base" else "llmsizing", names)
                got = {}
                for name in args.only:
                    walked = (participant_round(sides[side], name, args.participant, args.controls)
                              if args.participant
                              else one_round(sides[side], name, args.moves, args.controls))
                    got.update(((name, *k), t) for k, t in walked.items())
                times[side].append(got)
        loads.append(Path("/proc/loadavg").read_text().split()[0])
        report(times, args.only, 0)
        if args.parts:
            print(f"inside {', '.join(args.parts)}:")
            report(times, args.only, 1)
        print("wall (ms, the same moves; other processes' load falls on it too):")
        report(times, args.only, 2)
        print(f"base {args.base}; {args.rounds} rounds; load average (1 min) before and after: "
              f"{', '.join(loads)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(times: dict, only, which: int) -> None:
    """Per widget.control, per widget and in all: moves, median CPU ms base -> new, median paired ratio, of
    the whole moves (``which`` 0), of the parts inside them (1) or the whole moves' wall time (2)."""
    pairs = [(k, a[k][which], b[k][which]) for a, b in zip(times["base"], times["new"]) for k in a if k in b]

    def row(label, sel):
        if not sel:
            return
        x, y = [p[1] for p in sel], [p[2] for p in sel]
        ratios = [q / p for p, q in zip(x, y) if p > 0]           # (none where the parts never ran)
        ratio = statistics.median(ratios) if ratios else float("nan")
        print(f"{label:42s} {len(sel):5d} {statistics.median(x) * 1e3:8.1f} -> "
              f"{statistics.median(y) * 1e3:6.1f}   {ratio:6.3f}")

    print(f"{'widget.control':42s} {'moves':>5s} {'base ms':>8s}    {'new':>6s}   {'ratio':>6s}")
    for name in only:
        mine = [p for p in pairs if p[0][0] == name]
        for control in dict.fromkeys(p[0][2] for p in mine):
            row(f"{name}.{control}", [p for p in mine if p[0][2] == control])
        row(f"{name} (all new settings)", mine)
    row("all", pairs)
    if KINDS:                     # (--kinds: the participant's moves by kind, on a mixture of experts or not)
        from llmsizing.catalog import get_model

        for name in only:
            for kind in ("model", "other"):
                for moe in (True, False):
                    row(f"{name} {kind} {'moe' if moe else 'dense'}",
                        [p for p in pairs if p[0][0] == name and len(p[0]) > 5
                         and (p[0][2] == "model") == (kind == "model") and get_model(p[0][5]).is_moe == moe])


#: ``--kinds``: report the participant's moves by kind too (a pick or another control; on a mixture of experts
#: or a dense model).
KINDS: list = []


if __name__ == "__main__":
    main()
