"""Same bits, whatever was computed first (issue 38, speed25): chapter 12's settings walked in a fresh
process, one line per setting with the SHA-256 of the planner's frame (benchmarks/walk_ch17_bits.frame_digest:
every column's bytes, dtypes, order and attrs) or of its error, and of the widget's PNG, summary and error.
Run it on two libraries (this one, and main as a ``git archive`` of src and data on PYTHONPATH, the same
venv), each forward and reversed, each in its own process, and compare the lines by setting: every line must
be the same in all four runs.

    PYTHONPATH=src .venv/bin/python benchmarks/walk_ch12_bits.py {forward,reversed} [--plan-only]

The settings: the picks of benchmarks/bench_ch12_models.py (dense models and mixtures of experts in turn) at
the widget's defaults (1T tokens, H100 SXM, H200, B200 and A100 80GB, 8K, 512 sequences, <= 4,096 GPUs), each
also at 4K, 1,024 sequences, <= 2,048 GPUs and on H100 SXM + B200 alone (5 settings each, 40 in all). Does
not assert: the caller compares.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ch12_models import MODELS  # noqa: E402
from walk_ch17_bits import walk  # noqa: E402

GPUS = ("H100 SXM", "H200", "B200", "A100 80GB")
DEFAULT = dict(tokens=1e12, gpus=GPUS, seq=8192, global_batch=512, max_gpus=4096)
MOVES = ({}, {"seq": 4096}, {"global_batch": 1024}, {"max_gpus": 2048}, {"gpus": ("H100 SXM", "B200")})
SETTINGS = [dict(model=m, **{**DEFAULT, **mv}) for m in MODELS for mv in MOVES]


def _key(s: dict) -> str:
    return (f"{s['model']} seq={s['seq']} gpus={'+'.join(s['gpus'])} batch={s['global_batch']} "
            f"max={s['max_gpus']}")


def main() -> None:
    settings = SETTINGS if sys.argv[1] == "forward" else SETTINGS[::-1]
    from llmsizing.widgets import planner_widget

    walk(settings, lambda planner, s: planner.plan(**s), planner_widget,
         ("model", "seq", "gpus", "global_batch", "max_gpus"), _key)


if __name__ == "__main__":
    main()
