#!/usr/bin/env python3
"""Write data/published_layout_fits.csv: every published run with a layout, priced by the library's memory
model against its GPU's memory (issue 38; llmsizing.layout_fits):

    .venv/bin/python tools/layout_fits.py            # write data/published_layout_fits.csv
    .venv/bin/python tools/layout_fits.py --check    # exit 1 if the file differs from a fresh run

Each row's source and as_of are the run's own (data/published_runs.csv, data/moe_published_runs.csv); the
method column names the library's function that priced it. The computation lives in llmsizing.layout_fits;
this script only writes its result, rounded to 0.01 GiB.
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
from llmsizing.layout_fits import FIT_COLUMNS, published_layout_fits  # noqa: E402

OUT = ROOT / "data" / "published_layout_fits.csv"


def _cell(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "" if value != value else f"{value:.2f}"
    return str(value)


def fits_csv() -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(FIT_COLUMNS)
    for row in published_layout_fits().itertuples(index=False):
        w.writerow([_cell(v.item() if hasattr(v, "item") else v) for v in row])
    return out.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the file differs from a fresh run")
    args = ap.parse_args(argv)
    return write_or_check(OUT, fits_csv(), check=args.check, rerun="tools/layout_fits.py", unit="runs")


if __name__ == "__main__":
    sys.exit(main())
