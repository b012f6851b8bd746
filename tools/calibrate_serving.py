#!/usr/bin/env python3
"""Fit the serving model's step constants on data/serving_published.csv, check its range by leaving one source
out at a time, and write data/serving_model.csv, data/serving_intervals.csv, data/serving_groupings.csv,
data/serving_loso.csv and data/serving_nested_loso.csv
(issues 22, 34):

    .venv/bin/python tools/calibrate_serving.py            # write the five files
    .venv/bin/python tools/calibrate_serving.py --check    # exit 1 if a file differs from a fresh fit
    .venv/bin/python tools/calibrate_serving.py --check --quick   # one fit on every row, no
        # cross-validation; the ranges recomputed from the stored held-out residuals (the test's check);
        # the nested check's row and columns (serve_calibration.NESTED_GROUP) and its residuals
        # (data/serving_nested_loso.csv) are carried over as stored, the groupings' nested figures
        # recomputed from those residuals

The fit and the cross-validation live in llmsizing.serve_calibration (chapter 15 shows their residuals); this
script only writes their rounded results, so that the library reads numbers at run time instead of fitting on
import. It refits once per source with calibration rows, and once per pair of sources for the nested check
(serve_calibration.nested_table), each refit once: the nested check of every grouping of the range
(serve_calibration.nested_residuals, grouping_table, grouping_choice: the grouping is chosen on it, grp43)
reuses them (about 20 s CPU in all; 25 s before grp43, when the nested check refitted the plain one's folds).
The tool never changes serve_calibration.SERVING_GROUPING: it says so when the rule picks another.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from llmsizing.serve_calibration import (METHOD, NESTED_GROUP, SERVING_GROUPING, _read,  # noqa: E402
                                         _trainable, fit_constants, fit_serving_constants, grouping_choice,
                                         grouping_table, interval_table, nested_residuals, nested_table)
from llmsizing.serve_engine import DEFAULT_ENGINE  # noqa: E402

AS_OF = "2026-12-04"
SRC = "fitted on the calibration=yes rows of data/serving_published.csv (tools/calibrate_serving.py)"
NOTES = {"weights_bu": "share of HBM bandwidth reading the weights in a decode step (MBU)",
         "attention_bu": "share of HBM bandwidth reading the paged KV cache",
         "step_overhead_s": f"fixed time per engine step of the default engine ({DEFAULT_ENGINE}, continuous "
                            "batching): scheduling, sampling, kernel launches",
         "prefill_mfu": "share of the dense peak in prefill and in decode's matmuls, in 16 bits (FP8 "
                        "compute: times hardware.dtype_kernel_share, the training calibration's FP8 over "
                        "BF16 kernel efficiency)"}
UNITS = {"weights_bu": "fraction", "attention_bu": "fraction", "step_overhead_s": "s",
         "prefill_mfu": "fraction"}


def _text(rows) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerows(rows)
    return out.getvalue()


def outputs(quick: bool = False) -> dict:
    if quick:   # the full fit alone, and the ranges from the stored held-out residuals
        import pandas as pd

        full = fit_constants([r for r in _read().itertuples() if _trainable(r)])
        full["step_overhead_s"] = full["engines"][f"{DEFAULT_ENGINE}/continuous"]
        stored = pd.read_csv(ROOT / "data" / "serving_loso.csv")
        table, checked = interval_table(stored[["row", "source", "engine", "batching", "metric", "kind",
                                                "calibrated", "log_ratio"]])
        # the nested check needs its S (S - 1) refits: --quick carries the stored row and columns over
        stored_iv = pd.read_csv(ROOT / "data" / "serving_intervals.csv")
        nested_row = stored_iv[stored_iv["group"] == NESTED_GROUP].iloc[0][
            ["group", "coverage_nominal", "low", "high", "n_rows", "n_sources", "coverage_out_of_sample",
             "width_out_of_sample"]].to_dict()
        nested_rows = stored[["row", "nested_low", "nested_high", "nested_inside"]]
        inner = pd.read_csv(ROOT / "data" / "serving_nested_loso.csv").merge(
            stored[["row", "source", "engine", "batching", "metric", "kind"]], on="row",
            validate="many_to_one")
    else:
        fits = {}     # each refit once, shared by the plain check, the nested one and the groupings'
        full, table, checked = fit_serving_constants(fits)
        nested_rows, nested_row = nested_table(fits=fits)
        inner = nested_residuals(fits)
    import pandas as pd

    # the check nested as training's (serve_calibration.nested_check): the coverage and width the book states
    # (issue 34, ranges42); the stated range itself is the "all" row's, unchanged
    overall = table.set_index("group").loc["overall"]
    nested_row = {**nested_row, "width": overall["width"]}
    table = pd.concat([table, pd.DataFrame([nested_row])[table.columns]], ignore_index=True)
    checked = checked.merge(nested_rows, on="row", how="left", validate="one_to_one")
    model = [["constant", "value", "unit", "source", "as_of", "note"]]
    model += [[k, full[k], UNITS[k], SRC, AS_OF, NOTES[k]] for k in NOTES]
    for key, value in full["engines"].items():
        model.append([f"step_overhead_s[{key}]", value, "s", SRC, AS_OF,
                      f"fixed time per engine step fitted on the {key} calibration rows "
                      f"(serving(engine={key!r}))"])
    for era, value in full["eras"].items():
        model.append([f"step_overhead_s[{era}]", value, "s", SRC, AS_OF,
                      f"pooled over the {era}-batching rows at the shared constants: the overhead of an "
                      "engine without its own"])
    table = table.assign(method=METHOD, source="leave-one-source-out cross-validation of "
                         "data/serving_published.csv (tools/calibrate_serving.py)", as_of=AS_OF)
    table.loc[table["group"] == NESTED_GROUP, "method"] = (
        "the stated range's check nested as the training checks are (serve_calibration.nested_check): each "
        "held-out source judged by the order statistics of the other sources' held-out log speed ratios, "
        "each from a refit that saw neither the judged source nor its own; every held-out speed one unit; "
        "low/high blank: the stated range is row 'all'; the coverage and median width the book states")
    res = checked[["row", "source", "engine", "batching", "metric", "kind", "calibrated", "log_ratio"]]
    variants = grouping_table(res, inner).assign(
        source="leave-one-source-out cross-validation of data/serving_published.csv "
               "(tools/calibrate_serving.py; serve_calibration.grouping_table; the *_nested columns nested "
               "as the book's check: serve_calibration.nested_grouped)", as_of=AS_OF)
    choice = grouping_choice(variants)
    if choice != SERVING_GROUPING:
        print(f"NOTE: on the nested check the rule picks grouping {choice!r}, not serve_calibration."
              f"SERVING_GROUPING = {SERVING_GROUPING!r} (data/serving_groupings.csv); not switched: the "
              "chapters glue the grouping", file=sys.stderr)
    inner = inner[["judged_source", "row", "calibrated", "log_ratio"]].sort_values(["judged_source", "row"])
    return {"serving_model.csv": _text(model),
            "serving_intervals.csv": table.to_csv(index=False, lineterminator="\n"),
            "serving_groupings.csv": variants.to_csv(index=False, lineterminator="\n"),
            "serving_loso.csv": checked.to_csv(index=False, lineterminator="\n"),
            "serving_nested_loso.csv": inner.to_csv(index=False, lineterminator="\n")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    ap.add_argument("--quick", action="store_true", help="with --check: no cross-validation (see above)")
    args = ap.parse_args(argv)
    if args.quick and not args.check:
        ap.error("--quick only checks: writing needs the whole cross-validation")
    stale = []
    for name, text in outputs(args.quick).items():
        path = ROOT / "data" / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print(f"wrote data/{name}")
    if stale:
        print(f"{', '.join('data/' + n for n in stale)} out of date: run tools/calibrate_serving.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
