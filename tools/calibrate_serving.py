#!/usr/bin/env python3
"""Fit the serving model's step constants on data/serving_published.csv and write data/serving_model.csv
(issue 22):

    .venv/bin/python tools/calibrate_serving.py            # write data/serving_model.csv
    .venv/bin/python tools/calibrate_serving.py --check    # exit 1 if the file differs from a fresh fit

The fit lives in llmsizing.serve_calibration (chapter 15 shows its residuals); this script only writes its
rounded result, so that the library reads numbers at run time instead of fitting on import.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from llmsizing.serve_calibration import fit_serving_constants  # noqa: E402

AS_OF = "2026-11-26"
UNITS = {"weights_bu": "fraction", "attention_bu": "fraction", "step_overhead_s": "s", "prefill_mfu": "fraction"}
NOTES = {"weights_bu": "share of HBM bandwidth reading the weights in a decode step (MBU)",
         "attention_bu": "share of HBM bandwidth reading the paged KV cache",
         "step_overhead_s": "fixed time per engine step: scheduling, sampling, kernel launches (pooled over the "
                            "calibration rows at the shared constants; the default for an engine not named below)",
         "prefill_mfu": "share of the dense peak in prefill and in decode's matmuls"}


def model_csv() -> str:
    constants, low, high = fit_serving_constants()
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["constant", "value", "unit", "source", "as_of", "note"])
    src = "fitted on the calibration=yes rows of data/serving_published.csv (tools/calibrate_serving.py)"
    per_engine = constants.pop("engine_step_overhead_s")
    for name, value in constants.items():
        w.writerow([name, value, UNITS[name], src, AS_OF, NOTES[name]])
    for engine, value in per_engine.items():
        w.writerow([f"step_overhead_s[{engine}]", value, "s", src, AS_OF,
                    f"fixed time per engine step fitted on {engine}'s calibration rows (serving(engine={engine!r}))"])
    src = "spread of every row of data/serving_published.csv at the fitted constants (tools/calibrate_serving.py)"
    w.writerow(["range_low", low, "ratio", src, AS_OF, "lowest engine/model speed ratio over every row (calibration and held out), rounded down to 0.05"])
    w.writerow(["range_high", high, "ratio", src, AS_OF, "highest engine/model speed ratio over every row (calibration and held out), rounded up to 0.05"])
    return out.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args()
    path, text = ROOT / "data" / "serving_model.csv", model_csv()
    if args.check:
        if not path.exists() or path.read_text() != text:
            print(f"{path.relative_to(ROOT)} is out of date: run tools/calibrate_serving.py")
            return 1
        return 0
    path.write_text(text)
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
