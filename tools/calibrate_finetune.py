#!/usr/bin/env python3
"""Fit the fine-tuning step's constants on data/finetune_published.csv and write data/finetune_model.csv
(issue 22):

    .venv/bin/python tools/calibrate_finetune.py            # write data/finetune_model.csv
    .venv/bin/python tools/calibrate_finetune.py --check    # exit 1 if the file differs from a fresh fit
    .venv/bin/python tools/calibrate_finetune.py --groupings  # the groupings of the range registered by
                                                              # ft39 (issue 34), checked; writes nothing

The fit lives in llmsizing.finetune_time (chapter 16 shows its residuals); this script writes its rounded
result, so that the library reads numbers at import instead of fitting.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tools")]

from _generated import write_or_check  # noqa: E402

AS_OF = "2026-12-04"
SOURCE = ("constants fitted on every covered row (not known_out) of data/finetune_published.csv, as each "
          "leave-one-source-out fold fits the other sources; the range: 80% "
          "leave-one-source-out conformal bounds (finetune_loso_check; tools/calibrate_finetune.py)")
ROWS = (("layer_overhead_s", "s", "fixed time per transformer layer and micro-batch of a HF Trainer + PEFT step "
                                  "(LoRA, QLoRA) without recomputation (its forward and backward passes; "
                                  "full recomputation's third pass adds half as much again, "
                                  "finetune_time.launch_share): kernel launches and Python, fitted on the "
                                  "covered LoRA rows"),
        ("dequant_bandwidth_fraction", "fraction", "share of HBM bandwidth of the 4-bit dequantisation, fitted on "
                                                   "the Q-LoRA rows (GPTQ, bitsandbytes, torchao 4-bit)"),
        ("range_low", "ratio", "lower 80% bound of published/predicted step time, leave-one-source-out conformal "
                              "(data/intervals.csv has its measured coverage), rounded down to 0.01"),
        ("range_high", "ratio", "upper 80% bound of published/predicted step time, leave-one-source-out conformal "
                               "(data/intervals.csv has its measured coverage), rounded up to 0.01"),
        *((f"range_{end}_{key}", "ratio", f"{'lower' if end == 'low' else 'upper'} 80% bound of "
           f"published/predicted step time of a {step} step (group {group} of finetune_time."
           f"FINETUNE_GROUPING, adopted in session 43), leave-one-source-out conformal (data/intervals.csv, area fine-tuning-base), rounded "
           f"{'down' if end == 'low' else 'up'} to 0.01")
          for group, key, step in (("quantised", "quantised", "QLoRA"), ("bf16-base", "bf16_base", "LoRA"))
          for end in ("low", "high")))


def model_csv() -> str:
    from llmsizing.finetune_time import fit_finetune_constants

    fitted = fit_finetune_constants()
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["constant", "value", "unit", "source", "as_of", "note"])
    for name, unit, note in ROWS:
        w.writerow([name, fitted[name], unit, SOURCE, AS_OF, note])
    return out.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with data/finetune_model.csv, write nothing")
    ap.add_argument("--groupings", action="store_true",
                    help="print the registered groupings' out-of-source check "
                         "(finetune_time.GROUPINGS; base adopted)")
    args = ap.parse_args(argv)
    if args.groupings:
        from llmsizing.finetune_time import GROUPINGS, finetune_grouping_table

        for name, (_, why) in GROUPINGS.items():
            print(f"{name}: {why}")
        print(finetune_grouping_table().to_string(index=False, float_format=lambda x: f"{x:.4f}"))
        return 0
    fresh = model_csv()
    code = write_or_check(ROOT / "data" / "finetune_model.csv", fresh, check=args.check,
                          rerun="tools/calibrate_finetune.py", unit="constants")
    if not args.check:
        print(fresh, end="")
    return code


if __name__ == "__main__":
    sys.exit(main())
