#!/usr/bin/env python3
"""Print issue 34's closing-note tables as markdown: per area, the nominal and measured out-of-source coverage
and the median width, then per area the residual table of the held-out folds (per source: runs, the median,
least and largest held-out ratio published / predicted, how many runs its fold's range held):

    PYTHONPATH=src .venv/bin/python tools/held_out_tables.py > tables.md
    PYTHONPATH=src .venv/bin/python tools/held_out_tables.py --serving-nested   # about a minute more

Nothing is fitted or re-implemented here: every number comes from the library's own checks, the ones
``tools/calibrate.py`` and ``tools/calibrate_serving.py`` write to ``data/intervals.csv`` and
``data/serving_intervals.csv`` (training: ``calibration.mfu_loso_check``; training-inputs:
``range_candidates.registered_check``; training-layout: ``step_intervals.step_loso_check`` and, with the
stack named, ``step_intervals.stack_ranges``; moe-layout: ``moe_runs.moe_loso_check``; fine-tuning:
``finetune_time.finetune_loso_check``; serving: the nested check ``serve_calibration.nested_table``
stored in ``data/serving_intervals.csv`` (row ``overall-nested``) and ``data/serving_loso.csv``
(``nested_*``), and, not nested, ``serve_calibration.interval_table`` of the stored held-out residuals;
``tools/calibrate_serving.py --check`` compares both with a fresh cross-validation). Every area's median
width is that of the ranges each held-out run was judged by (issue 34's bars: 1.6x training, 1.8x
serving). This script only groups their per-run results by source (audit34, session 41).

In the training areas a run priced on a stand-in efficiency (a GPU generation and dtype no other source
calibrates) is counted apart (``intervals`` step 5): the summary's coverage and width are over the calibrated
runs, and the per-source tables list the stand-in runs in their own column (their ``inside`` counts them too).
Serving counts every held-out speed; its ``uncalibrated`` column counts the speeds whose engine and way of
batching had no overhead of its own in the fold (priced at the era's pooled overhead).

``--serving-nested`` recomputes serving's nested check (``serve_calibration.nested_check``, which runs
``intervals.loso_check``; since ranges42 the figures the library stores and the book states) beside the
plain one.
``serve_calibration.interval_table`` judges a held-out source ``k`` by the order statistics of the other
sources' residuals, each from a refit that left out its own source but saw ``k``; nested, each of those comes
from a refit that saw neither (``S (S - 1)`` refits). Its first lines reproduce the stored check.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def per_source(src, log_ratio, inside, calibrated, low_log, high_log):
    """One row per source: its runs, how many of them are uncalibrated in their fold, the median, least and
    largest held-out ratio, how many its fold's range held, and the median held-out range as factors."""
    import numpy as np
    import pandas as pd

    d = pd.DataFrame({"source": src, "r": log_ratio, "inside": inside, "cal": calibrated, "lo": low_log,
                      "hi": high_log})
    rows = [{"source": s, "runs": len(p), "uncalibrated": int((~p["cal"]).sum()),
             "median ratio": math.exp(float(np.median(p["r"]))), "least": math.exp(p["r"].min()),
             "largest": math.exp(p["r"].max()), "inside": f"{int(p['inside'].sum())} of {len(p)}",
             "fold's range": f"x{math.exp(np.median(p['lo'])):.3f}-{math.exp(np.median(p['hi'])):.3f}"}
            for s, p in d.groupby("source", sort=False)]
    return pd.DataFrame(rows).sort_values("median ratio", kind="stable").reset_index(drop=True)


def _check_row(area, check, stated):
    cal = check.calibrated_rows
    return {"area": area, "nominal": f"{check.coverage:.0%}", "measured": f"{check.measured_coverage:.1%}",
            "inside": f"{int(check.inside[cal].sum())} of {int(cal.sum())}",
            "median width": f"{check.median_width:.3f}x", "uncalibrated (apart)": int((~cal).sum()),
            "stated range": stated}


def _of_check(check, src):
    return per_source(src, check.residuals, check.inside, check.calibrated_rows, check.low_log,
                      check.high_log)


def tables():
    """``(summary, {area: per-source table})`` as DataFrames."""
    import numpy as np
    import pandas as pd

    from llmsizing import calibration as C
    from llmsizing import serve_calibration as S
    from llmsizing.finetune_time import finetune_loso_check
    from llmsizing.moe_runs import moe_loso_check
    from llmsizing.range_candidates import registered_check
    from llmsizing.step_intervals import stack_ranges, step_loso_check

    summary, out = [], {}
    check, df = C.mfu_loso_check()
    summary.append(_check_row("training (baseline)", check, "per kind (steady state, whole run)"))
    out["training (baseline)"] = _of_check(check, df["source_key"].to_numpy(object))
    check, per = registered_check()
    summary.append(_check_row("training-inputs", check, "per GPU generation"))
    out["training-inputs"] = _of_check(check, per["source_key"].to_numpy(object))
    check, df = step_loso_check()
    lo, hi = check.stated()
    summary.append(_check_row("training-layout", check, f"x{lo:.3f}-{hi:.3f}"))
    out["training-layout"] = _of_check(check, df["source_key"].to_numpy(object))
    table, per = stack_ranges()
    cal = per["calibrated"].to_numpy(bool)
    width = (per["high"] / per["low"]).to_numpy(float)
    summary.append({"area": "training-layout, stack named", "nominal": "80%",
                    "measured": f"{per['inside'][cal].mean():.1%}",
                    "inside": f"{int(per['inside'][cal].sum())} of {int(cal.sum())}",
                    "median width": f"{float(np.median(width[cal])):.3f}x",
                    "uncalibrated (apart)": int((~cal).sum()),
                    "stated range": "per stack family (and generation)"})
    out["training-layout, stack named"] = per_source(
        per["source_key"].to_numpy(object), np.log(per["ratio"].to_numpy(float)),
        per["inside"].to_numpy(bool), cal, np.log(per["low"].to_numpy(float)),
        np.log(per["high"].to_numpy(float)))
    out["training-layout, stack named: per family"] = table
    check, df = moe_loso_check()
    lo, hi = check.stated()
    summary.append(_check_row("moe-layout", check, f"x{lo:.3f}-{hi:.3f}"))
    out["moe-layout"] = _of_check(check, df["source_key"].to_numpy(object))
    check, rows = finetune_loso_check()
    lo, hi = check.stated()
    summary.append(_check_row("fine-tuning, one range (before session 43)", check, f"x{lo:.3f}-{hi:.3f}"))
    out["fine-tuning, one range (before session 43)"] = _of_check(check, rows["source_key"].to_numpy(object))
    # the ranges stated since session 43: one per base (finetune_time.FINETUNE_GROUPING, area fine-tuning-base)
    from llmsizing.finetune_time import FINETUNE_GROUPING, RANGE_GROUPS

    check, rows = finetune_loso_check(grouping=FINETUNE_GROUPING)
    summary.append(_check_row("fine-tuning", check, "; ".join(
        "{}: x{:.3f}-{:.3f}".format(g, *check.stated(g)) for g in RANGE_GROUPS)))
    out["fine-tuning"] = _of_check(check, rows["source_key"].to_numpy(object))
    res = pd.read_csv(ROOT / "data" / "serving_loso.csv")
    table, checked = S.interval_table(res[["row", "source", "engine", "batching", "metric", "kind",
                                           "calibrated", "log_ratio"]])
    t = table.set_index("group")
    ranged = t.drop(index="overall").iloc[0]
    # the coverage and median width stated and judged are the nested check's (serve_calibration.NESTED_GROUP,
    # its per-speed bounds the nested_* columns of data/serving_loso.csv; ranges42), as in the training areas
    nested = pd.read_csv(ROOT / "data" / "serving_intervals.csv").set_index("group").loc[S.NESTED_GROUP]
    summary.append({"area": "serving", "nominal": f"{S.COVERAGE:.0%}",
                    "measured": f"{nested['coverage_out_of_sample']:.1%}",
                    "inside": f"{int(res['nested_inside'].sum())} of {len(res)}",
                    "median width": f"{nested['width_out_of_sample']:.3f}x",
                    "uncalibrated (apart)": "0 (counted in)",
                    "stated range": f"x{ranged['low']:.3f}-{ranged['high']:.3f} ({ranged['width']:.3f}x)"})
    summary.append({"area": "serving, not nested (before ranges42)", "nominal": f"{S.COVERAGE:.0%}",
                    "measured": f"{t.loc['overall', 'coverage_out_of_sample']:.1%}",
                    "inside": f"{int(checked['inside'].sum())} of {len(checked)}",
                    "median width": f"{t.loc['overall', 'width_out_of_sample']:.3f}x",
                    "uncalibrated (apart)": "0 (counted in)", "stated range": "the same"})
    out["serving"] = per_source(
        res["source"].to_numpy(object), res["log_ratio"].to_numpy(float),
        res["nested_inside"].to_numpy(bool), res["calibrated"].to_numpy(bool),
        np.log(res["nested_low"].to_numpy(float)), np.log(res["nested_high"].to_numpy(float)))
    return pd.DataFrame(summary), out


def serving_nested():
    """Serving's held-out check, plain (as ``data/serving_intervals.csv``) and nested (module docstring), both
    from ``serve_calibration.nested_check``: ``(per_source, plain, nested)``, each of the last two
    ``(inside, rows, median width)``."""
    import numpy as np
    import pandas as pd

    from llmsizing.serve_calibration import nested_check

    checks = {name: nested_check(nested=name == "nested") for name in ("plain", "nested")}
    urls = checks["plain"][1]
    table = []
    for k in dict.fromkeys(urls):
        mine = urls == k
        row = {"source": k, "speeds": int(mine.sum())}
        for name, (check, _) in checks.items():
            row[f"inside {name}"] = f"{int(check.inside[mine].sum())} of {int(mine.sum())}"
            lo, hi = float(np.median(check.low_log[mine])), float(np.median(check.high_log[mine]))
            row[f"{name} range"] = f"x{math.exp(lo):.3f}-{math.exp(hi):.3f}"
        table.append(row)
    done = {name: (int(c.inside.sum()), len(c.inside), c.median_width) for name, (c, _) in checks.items()}
    return pd.DataFrame(table), done["plain"], done["nested"]


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--serving-nested", action="store_true",
                    help="add serving's check nested (about a minute)")
    args = ap.parse_args(argv)
    summary, out = tables()
    print("## Per area: nominal and out-of-source coverage, median width\n")
    print(summary.to_markdown(index=False))
    for area, t in out.items():
        print(f"\n## {area}\n")
        print(t.to_markdown(index=False, floatfmt=".3f"))
    if args.serving_nested:
        table, plain, nested = serving_nested()
        print("\n## serving, nested as the training checks are (recomputed; the stored figures are these)\n")
        for name, (n_in, n, width) in (("plain (data/serving_intervals.csv)", plain), ("nested", nested)):
            print(f"- {name}: {n_in} of {n} inside ({n_in / n:.1%}), median width {width:.3f}x")
        print()
        print(table.to_markdown(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
