"""Same bits, whatever was computed first (issue 35, fast17c): a walk of chapter 17's settings in a fresh
process, printing one line per setting with the SHA-256 of everything a reader or a caller gets back: the
planner's frame (every column's bytes, dtypes, order and attrs) or its error for the plan() part, and the
widget's PNG, summary and error for the widget part. Run it on two libraries (this one, and main as a
``git archive`` of src and data on PYTHONPATH, the same venv), each forward and reversed, each in its own
process, and compare the lines by setting: every line must be the same in all four runs.

    PYTHONPATH=src .venv/bin/python benchmarks/walk_ch17_bits.py {forward,reversed} [--plan-only]

The settings: 5 mixtures of experts and a dense model, each at the widget's defaults (128K, H100 SXM, 16M
tokens, 16,384 GPUs, ring) and moved to 32K, 8M tokens, the all-gather exchange, H100 SXM + B200, B200 + A100
80GB, H100 SXM + B200 at 32K and 4,096 GPUs (8 settings each, 48 in all), planned by plan() as the widget
asks; the widget part walks the same settings, each control set in turn. Does not assert: the caller compares
(see the report fast17c.md for the runs).
"""

from __future__ import annotations

import hashlib
import sys

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")

MODELS = ("qwen3-30b-a3b", "deepseek-v2", "granite-3.0-1b-a400m", "gpt-oss-120b", "mixtral-8x7b",
          "llama-3-8b")
DEFAULT = dict(seq=131072, gpus=("H100 SXM",), batch_tokens=2**24, max_gpus=16384, cp_comm="p2p")
MOVES = (dict(), dict(seq=32768), dict(batch_tokens=2**23), dict(cp_comm="all_gather"),
         dict(gpus=("H100 SXM", "B200")), dict(gpus=("B200", "A100 80GB")),
         dict(gpus=("H100 SXM", "B200"), seq=32768), dict(max_gpus=4096))
SETTINGS = [dict(model=m, **{**DEFAULT, **mv}) for m in MODELS for mv in MOVES]


def frame_digest(df: pd.DataFrame) -> str:
    """SHA-256 of a frame: its columns, dtypes, index and every column's values bit for bit, and its attrs."""
    h = hashlib.sha256()
    h.update(repr((list(df.columns), [str(t) for t in df.dtypes], list(df.index[:5]), len(df))).encode())
    for c in df.columns:
        a = df[c].array
        if hasattr(a, "_data") and hasattr(a, "_mask"):              # (a masked extension: Int64)
            h.update(np.ascontiguousarray(a._data).tobytes() + np.ascontiguousarray(a._mask).tobytes())
        else:
            v = df[c].to_numpy()
            h.update(repr(v.tolist()).encode() if v.dtype == object else np.ascontiguousarray(v).tobytes())
    h.update(np.ascontiguousarray(df.index.to_numpy()).tobytes())
    h.update(repr(sorted((k, repr(v)) for k, v in df.attrs.items())).encode())
    return h.hexdigest()[:16]


def _key(s: dict) -> str:
    return (f"{s['model']} seq={s['seq']} gpus={'+'.join(s['gpus'])} tokens={s['batch_tokens']} "
            f"max={s['max_gpus']} {s['cp_comm']}")


def walk(settings, plan_call, make_widget, controls, key) -> None:
    """Print a digest of ``plan_call(s)`` for each setting, then (unless ``--plan-only``) of the widget's PNG,
    summary and error after its ``controls`` are set to each setting in turn. walk_ch12_bits.py shares it."""
    from llmsizing import planner

    for s in settings:
        try:
            got = frame_digest(plan_call(planner, s))
        except (ValueError, TypeError) as exc:
            got = "error " + hashlib.sha256(str(exc).encode()).hexdigest()[:16]
        print(f"plan   {key(s)}: {got}", flush=True)
    if "--plan-only" in sys.argv:
        return
    w = make_widget()
    for s in settings:
        for c in controls:
            w.controls[c].value = s[c]
        png = hashlib.sha256(w.image.value).hexdigest()[:16]
        summary = hashlib.sha256(w.summary.value.encode()).hexdigest()[:16]
        error = hashlib.sha256(w.error.value.encode()).hexdigest()[:16]
        print(f"widget {key(s)}: png {png} summary {summary} error {error}", flush=True)


def main() -> None:
    settings = SETTINGS if sys.argv[1] == "forward" else SETTINGS[::-1]
    from llmsizing.widgets import long_context_widget
    from llmsizing.widgets.long_context import _plan_args

    def plan_call(planner, s):
        args, kw = _plan_args(s["model"], s["seq"], s["gpus"], s["batch_tokens"], s["max_gpus"], s["cp_comm"])
        return planner.plan(*args, **kw)

    walk(settings, plan_call, lambda: long_context_widget("llama-3-8b", speculate=False),
         ("model", "seq", "gpus", "batch_tokens", "max_gpus", "cp_comm"), _key)


if __name__ == "__main__":
    main()
