#!/usr/bin/env python3
"""Summaries of one participant's moves in a real browser (issue 38; tests/browser/measure_participant.py
writes the moves, this reads them).

    .venv/bin/python tools/participant_stats.py _build/screenshots/participant-moves.json

Each move is a dict with the page's times in ms since the participant's input event
(test_lab.JS_WATCH_REDRAW: ``feedback`` the busy mark or the new figure first seen in the page, ``redrawn``
the new figure's message in the page, ``painted`` the new figure decoded and a frame drawn) and
``kernel_cpu_ms``, the CPU time the kernel process used over the move (its threads' on-CPU time, read from
/proc). The split of a move's wait:

* ``kernel_cpu_ms``: what the kernel process computed (its threads' CPU time; on a loaded machine its wall
  time is longer); its worker processes' CPU (``workers_cpu_ms``, the speculative searches of chapters 12
  and 17) runs beside it and is reported apart;
* ``to_page_ms`` = ``redrawn`` - ``kernel_cpu_ms``: the rest of the time to the new figure in the page:
  transport (browser -> server -> kernel and back), the kernel waiting for a core, the page handling messages;
* ``browser_ms`` = ``painted`` - ``redrawn``: fetching/decoding the PNG and painting it;
* ``browser_cpu_ms``, the CPU time Chromium's processes used over the move, and ``summarised``, ms from the
  input event to a frame after the summary under the figure changed (page35), as the harness records them.

Percentiles are nearest rank (tools/load_test.nearest_rank): p90 of 10 values is the 9th smallest.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_test import nearest_rank as _nearest_rank_sorted  # noqa: E402

GOAL_MS = 100


def nearest_rank(values: list[float], p: float) -> float:
    """The ``p``-quantile (0 < p <= 1) of ``values`` (any order) by nearest rank: the ceil(p*n)-th smallest,
    :func:`load_test.nearest_rank` of the sorted values (one rule for both tools)."""
    if not values:
        raise ValueError("values: at least one value needed")
    return _nearest_rank_sorted(sorted(values), p)


def split(move: dict) -> dict:
    """A move's wait split into kernel CPU, the rest up to the page, and the browser (ms; None if unknown)."""
    red, pnt, cpu = move.get("redrawn"), move.get("painted"), move.get("kernel_cpu_ms")
    return {"painted": pnt, "kernel_cpu_ms": cpu, "workers_cpu_ms": move.get("workers_cpu_ms"),
            "to_page_ms": None if red is None or cpu is None else red - cpu,
            "browser_ms": None if red is None or pnt is None else pnt - red,
            "browser_cpu_ms": move.get("browser_cpu_ms"), "summarised": move.get("summarised")}


def summary(moves: list[dict]) -> dict:
    """Median / p90 / max of each part of the wait over ``moves``, the count, and how many were over the
    goal (a move never seen painted counts as over)."""
    out = {"moves": len(moves),
           "over_goal": sum(1 for m in moves if m.get("painted") is None or m["painted"] > GOAL_MS)}
    parts = [split(m) for m in moves]
    for key in ("painted", "kernel_cpu_ms", "to_page_ms", "browser_ms", "workers_cpu_ms", "browser_cpu_ms",
                "summarised"):
        vals = [p[key] for p in parts if p[key] is not None]
        out[key] = ({"median": round(nearest_rank(vals, 0.5)), "p90": round(nearest_rank(vals, 0.9)),
                     "max": round(max(vals))} if vals else None)
    return out


def table(record: dict) -> str:
    """A markdown table: one row per run and kind of move (``record``: run label -> list of moves)."""
    rows = ["| run | kind | moves | painted med / p90 / max ms | kernel CPU med / p90 / max | "
            "to page (rest) med / p90 | browser med / p90 | workers CPU med / p90 | browser CPU med / p90 | "
            "summary painted med / p90 | over 100 ms |",
            "|" + "---|" * 11]
    for run, moves in record.items():
        kinds = sorted({m.get("kind", "move") for m in moves})
        for kind in ["all"] + kinds:
            sel = moves if kind == "all" else [m for m in moves if m.get("kind", "move") == kind]
            s = summary(sel)

            def f(key, n=3):
                d = s[key]
                return "-" if d is None else " / ".join(str(d[k]) for k in ("median", "p90", "max")[:n])
            rows.append(f"| {run} | {kind} | {s['moves']} | {f('painted')} | {f('kernel_cpu_ms')} | "
                        f"{f('to_page_ms', 2)} | {f('browser_ms', 2)} | {f('workers_cpu_ms', 2)} | "
                        f"{f('browser_cpu_ms', 2)} | {f('summarised', 2)} | {s['over_goal']} |")
    return "\n".join(rows)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path)
    args = ap.parse_args(argv)
    record = json.loads(args.path.read_text())
    print(table({k: v["moves"] if isinstance(v, dict) else v for k, v in record.items()}))


if __name__ == "__main__":
    main()
