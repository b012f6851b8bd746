#!/usr/bin/env python3
"""Print what might narrow the end-to-end training range (issue 34; llmsizing.range_candidates): every
candidate term known before a run, with both conformal scores, checked leaving whole sources out (nested),
and the published layouts against the planner's own choice:

    PYTHONPATH=$PWD/src .venv/bin/python tools/range_candidates.py            # the table (about 20 s)
    PYTHONPATH=$PWD/src .venv/bin/python tools/range_candidates.py --planner  # and the planner check (+30 s)
    PYTHONPATH=$PWD/src .venv/bin/python tools/range_candidates.py --select   # and the terms chosen inside
                                                                                # each fold (about 5 min)
    PYTHONPATH=$PWD/src .venv/bin/python tools/range_candidates.py --registered  # only the pre-registered
                                                                  # procedure, overall and per generation,
                                                                  # stack family, dtype and kind
    PYTHONPATH=$PWD/src .venv/bin/python tools/range_candidates.py --s38  # session 38's pre-registered
                                                # candidates on both ranges (end-to-end E, inputs I)
    PYTHONPATH=$PWD/src .venv/bin/python tools/range_candidates.py --planned  # only the planner's own pick
                    # checked out of source (llmsizing.step_intervals.PLANNED_AREA, pre-registered by plan46;
                    # about 10 s; a dead end: 87.4% inside but 2.04x wide)
    PYTHONPATH=$PWD/src .venv/bin/python tools/range_candidates.py --planned --write  # and write its per-run
                    # table to data/planned_picks.csv (llmsizing.planned_picks; chapter 12 reads it)
    PYTHONPATH=$PWD/src .venv/bin/python tools/range_candidates.py --planned --check  # exit 1 if that file
                    # differs from a fresh run

It writes nothing else: the production range stays tools/calibrate.py's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "src"), str(Path(__file__).resolve().parent)]

from _generated import write_or_check  # noqa: E402
from llmsizing import range_candidates as R  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--planner", action="store_true", help="also price the runs at the planner's layout")
    ap.add_argument("--select", action="store_true", help="also check the choice of terms, source by source")
    ap.add_argument("--registered", action="store_true",
                    help="only the pre-registered procedure (range_candidates.REGISTERED), per group")
    ap.add_argument("--s38", action="store_true",
                    help="only session 38's pre-registered candidates (range_candidates.PREREGISTERED38)")
    ap.add_argument("--planned", action="store_true",
                    help="only the planner's own pick, out of source (step_intervals.planned_loso_check)")
    ap.add_argument("--write", action="store_true", help="with --planned: write data/planned_picks.csv")
    ap.add_argument("--check", action="store_true",
                    help="with --planned: exit 1 if data/planned_picks.csv differs from a fresh run")
    args = ap.parse_args(argv)
    if (args.write or args.check) and not args.planned:
        ap.error("--write and --check go with --planned")
    if args.write and args.check:
        ap.error("--write and --check exclude each other")
    if args.planned:
        return _picks_file(args.check) if args.write or args.check else _planned()
    if args.s38:
        for procedure in R.PROCEDURES:
            for name in ("none",) + tuple(R.PREREGISTERED38):
                cov, width, _ = R.candidate38_check(name, procedure)
                print(f"{procedure} {name:16s} coverage {cov:.3f} median width {width:.3f}")
        for procedure, name in R.COMBINED38.items():       # P6: those that passed alone, together
            cov, width, _ = R.candidate38_check(name, procedure)
            print(f"{procedure} {name} coverage {cov:.3f} median width {width:.3f}")
        return 0
    if args.registered:
        t = R.registered_table()
        gate = t[t["by"].isin(("all", "generation"))]["meets"].all()    # the registered pass rule
        for name in R.REGISTERED:
            if name == "registered" or not gate:       # the fallback only if the registered one fails
                print(f"{name}: {R.REGISTERED[name]}")
                print(R.registered_table(name).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        return 0
    t = R.candidate_table()
    print(t.drop(columns="terms").to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.planner:
        import numpy as np

        check, df = R.planner_layout_check()
        gap = df["gap"].dropna()
        print(f"\nplanner's layout vs the published one, {len(gap)} runs: log gap median {gap.median():+.3f} "
              f"(x{np.exp(gap.median()):.2f}), 10-90% {gap.quantile(.1):+.3f} to {gap.quantile(.9):+.3f}; "
              f"a range on the planner's layout: coverage {check.measured_coverage:.3f}, median width "
              f"{check.median_width:.3f}")
    if args.select:
        from collections import Counter

        for score in ("tails", "absolute"):
            cov, width, chosen, per_run = R.selection_check(score=score)
            common = ", ".join(f"{'+'.join(s) or 'none'} ({n})"
                               for s, n in Counter(chosen.values()).most_common(3))
            print(f"\nterms chosen inside each fold, score {score}: coverage {cov:.3f}, median width "
                  f"{width:.3f}; most chosen: {common}")
            for by in ("generation", "stack_family", "dtype", "kind"):
                g = per_run.groupby(by).agg(coverage=("inside", "mean"), width=("width", "median"),
                                            runs=("inside", "size"), sources=("source_key", "nunique"))
                print(g.to_string(float_format=lambda x: f"{x:.3f}"))
    return 0


def _picks_file(check: bool) -> int:
    """Write data/planned_picks.csv, or (``check``) compare it with a fresh run (llmsizing.planned_picks)."""
    from llmsizing.planned_picks import PICKS_CSV, picks_csv

    rerun = "tools/range_candidates.py --planned --write"
    return write_or_check(PICKS_CSV, picks_csv(), check=check, rerun=rerun, unit="runs")


def _planned() -> int:
    """Print the pre-registered check of the planner's pick (llmsizing.step_intervals.PLANNED_AREA)."""
    import numpy as np

    from llmsizing.step_intervals import planned_loso_check, source_table

    check, df = planned_loso_check()
    cal = df["calibrated"].to_numpy(bool)
    planned = df["planned"].to_numpy(bool)
    lo, hi = check.stated()
    print(f"training-planned: coverage {df['inside'][cal].mean():.3f} of {cal.sum()} calibrated runs "
          f"({(cal & ~planned).sum()} without a plan, counted outside; {check.measured_coverage:.3f} of "
          f"those with one), median width {check.median_width:.3f}, stated x{lo:.3f} to x{hi:.3f}; "
          f"stand-in runs {(~cal).sum()}, inside {df['inside'][~cal].mean():.3f}")
    g = df.assign(group=np.where(cal, "calibrated", "stand-in"), width=df["high"] / df["low"])
    for by in ("dtype", "generation", "stack_family", "group"):
        t = g[cal | (by == "group")].groupby(by).agg(
            coverage=("inside", "mean"), width=("width", "median"), runs=("inside", "size"),
            sources=("source_key", "nunique"))
        print(t.to_string(float_format=lambda x: f"{x:.3f}"))
    sub = df[planned].reset_index(drop=True)
    print(source_table(check, sub).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    gap = df["plan_mfu"] / df["step_mfu"]
    print(f"pick / published layout at the same efficiency: median x{gap.median():.3f}; runs whose pick "
          f"changes with the fold's efficiency: {(df['picks'] > 1).sum()} of {planned.sum()}")
    far = df.assign(gap=gap)[gap > 1.25].sort_values("gap", ascending=False)
    print(far[["run", "published", "pick", "step_mfu", "plan_mfu", "implied_mfu", "gap"]].to_string(
        index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
