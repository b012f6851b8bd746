#!/usr/bin/env python3
"""phys47 (issues 34, 35): the pre-registered ranges under a physics variant of the step model, each variant
in a fresh process (a measurement, never the book's numbers; nothing is written to data/):

    nice -n 10 .venv/bin/python tools/physics_ab.py VARIANT --out results.json [--stack]

VARIANT: ``today`` (the library as it is: single alpha-beta line, 1F1B fill and drain at each stage's
speed), ``A`` (the DP/TP/CP collectives by NCCL protocol: ``step_time(protocols=True)``), ``noB`` (the fill
and drain at the slowest stage's speed, as before session 39: the bubble ``(pp - 1) / (v m)``), ``A-noB``
(both); ``Aintra`` (exploratory, not pre-registered: A on the scale-up links only, the network's collectives
on the single line); ``N`` (net47, issue 34: the DP/TP/CP rings that leave the node with NCCL's tuner's
latency, ``ring_collective(latency="nccl")``, :mod:`llmsizing.nccl_steps`) and ``A-N`` (A with it).

Pre-registered (phys47, 2026-12-05, before any measurement): each area as tools/calibrate.py computes it,
under the variant: the per-run kernel efficiencies re-inverted, the kernel-efficiency table
(data/kernel_efficiency.csv as tools/calibrate.py's kernel_csv would write it) refit on every run and
installed in this process only (the MoE range and the checks read it), the training-layout nested
leave-one-source-out check (every fold refits its efficiencies), the moe-layout check; adopt only if the
out-of-source coverage stays >= 75% and the median width does not grow. The variants are set by changing
keyword defaults in this process only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tools"))

VARIANTS = ("today", "A", "noB", "A-noB", "Aintra", "N", "A-N")


def _apply(variant: str) -> None:
    import llmsizing.comm as comm
    import llmsizing.layouts as layouts

    if "A" in variant.split("-"):
        import inspect

        for f in (layouts.step_time, comm.communication):      # (step_time is wrapped by takes_job)
            inspect.unwrap(f).__kwdefaults__["protocols"] = True
    if variant == "Aintra":        # exploratory, NOT pre-registered: protocols inside the scale-up domain
        ring = comm.ring_collective

        def intra_only(*args, protocols=False, **kw):
            gl = args[6] if len(args) > 6 else kw["gl"]
            return ring(*args, protocols=not gl.across, **kw)

        comm.ring_collective = intra_only
    if "N" in variant.split("-"):      # net47: rings leaving the node priced as NCCL's tuner does
        comm.ring_collective.__kwdefaults__["latency"] = "nccl"
    if "noB" in variant.split("-"):
        from llmsizing.moe_time import schedule_bubble

        def slowest_stage_bubble(schedule, pp, m, virtual_stages=1, *, stage_times=None):
            if schedule == "1f1b":                  # the closed form at the slowest stage's speed
                stage_times = None
            return schedule_bubble(schedule, pp, m, virtual_stages, stage_times=stage_times)

        layouts.schedule_bubble = slowest_stage_bubble


def _install_kernel_table() -> str:
    """Refit data/kernel_efficiency.csv's rows under the variant (tools/calibrate.py's kernel_csv) and make
    this process's llmsizing.hardware read them."""
    import calibrate

    from llmsizing import hardware as H

    text = calibrate.kernel_csv()
    rows = tuple(H._kernel_rows(text))
    H._kernel_table = lambda: rows               # every reader in llmsizing.hardware goes through it
    H._kernel_row.cache_clear()
    return text


def _groups(check, df, dtype_col="dtype"):
    import numpy as np

    cal = check.calibrated_rows
    out = {}
    dt = df[dtype_col].to_numpy(object) if dtype_col in df.columns else None
    for name, mask in [("all", np.ones(len(df), bool))] + (
            [(d, dt == d) for d in ("bf16", "fp8")] if dt is not None else []):
        m = mask & cal
        if not m.any():
            continue
        out[name] = {"coverage": float(check.inside[m].mean()),
                     "median_width": float(np.exp(np.median(check.high_log[m] - check.low_log[m]))),
                     "n": int(m.sum())}
    lo, hi = check.stated(None)
    out["stated"] = [lo, hi]
    out["stand_in_n"] = int((~cal).sum())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variant", choices=VARIANTS)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stack", action="store_true", help="also the stack:* rows (twice the time)")
    args = ap.parse_args(argv)
    _apply(args.variant)
    t0, res = time.process_time(), {"variant": args.variant}
    from llmsizing.step_intervals import step_loso_check

    check, df = step_loso_check()
    res["training-layout"] = _groups(check, df)
    res["training_runs"] = [{"run": r.run, "source": r.source_key, "log_residual": float(e),
                             "inside": bool(i), "calibrated": bool(c), "implied": float(r.implied_mfu),
                             "predicted": float(r.predicted_mfu)}
                            for r, e, i, c in zip(df.itertuples(), check.residuals, check.inside,
                                                  check.calibrated_rows)]
    res["cpu_training_s"] = time.process_time() - t0
    res["kernel_csv"] = _install_kernel_table()
    from llmsizing.moe_runs import moe_loso_check

    mcheck, mdf = moe_loso_check()
    res["moe-layout"] = _groups(mcheck, mdf, dtype_col="__none__")
    res["moe_runs"] = [{"run": r.run, "source": r.source_key, "log_residual": float(e), "inside": bool(i)}
                       for r, e, i in zip(mdf.itertuples(), mcheck.residuals, mcheck.inside)]
    res["checks"] = _checks(df)
    if args.stack:
        from llmsizing.step_intervals import stack_ranges

        table, _ = stack_ranges()
        res["stack"] = table.to_dict(orient="records")
    res["cpu_total_s"] = time.process_time() - t0
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    print(json.dumps({k: res[k] for k in ("training-layout", "moe-layout", "checks", "cpu_total_s")},
                     indent=1, default=str))
    return 0


def _checks(df) -> dict:
    """Chapter 17's Llama 3 405B rows at the (refit) calibrated efficiency, and chapter 18's DeepSeek-V3."""
    from llmsizing.calibration import run_mfu_at
    from llmsizing.deepseek import deepseek_v3_check, deepseek_v3_time_terms
    from llmsizing.hardware import kernel_efficiency
    from llmsizing.time_cost import published_runs

    out = {}
    runs = published_runs()
    for name in ("Llama 3.1 405B, 8,192 GPUs (TP8 PP16 DP64)", "Llama 3.1 405B, 16,384 GPUs (TP8 PP16 DP128)",
                 "Llama 3.1 405B, 16,384 GPUs, 128K context (TP8 CP16 PP16 DP4)"):
        row = runs[runs["run"] == name].iloc[0]
        out[name] = {"mfu": run_mfu_at(row, kernel_efficiency(row["gpu"], "bf16")),
                     "published": float(df.loc[df["run"] == name, "implied_mfu"].iloc[0])}
    try:                                       # chapter 17's 128K step as Meta ran it (its statements hold?)
        from llmsizing.long_context_prose import opening_prose

        out["ch17_dp48_mfu"] = opening_prose().values["dp48_mfu"]
    except Exception as e:                     # noqa: BLE001  (a failed statement is a finding here)
        out["ch17_dp48_mfu"] = f"{type(e).__name__}: {e}"
    ds = deepseek_v3_check()
    out["deepseek_v3_check"] = {k: ds[k] for k in ("gpu_hours_exposed", "ratio_exposed", "gpu_hours_dualpipe",
                                                   "ratio_dualpipe", "mfu_exposed", "bubble_s")}
    terms = deepseek_v3_time_terms()
    out["deepseek_v3_terms"] = {"last_row": terms.index[-1], "gpu_hours": float(terms["gpu_hours"].iloc[-1]),
                                "ratio": float(terms["ratio"].iloc[-1]),
                                "published": float(terms.attrs["published_gpu_hours"])}
    return out


if __name__ == "__main__":
    sys.exit(main())
