"""ranges34 (issue 34, "every worked budget in the book shows its range"): the training and fine-tuning range
helpers chapters 12 and 16 glue their remaining figures through.

Expected ends are worked here from the stored bounds, read from ``data/intervals.csv`` with csv (not through
the library):

* training, area ``training-layout``, group ``bf16``: 0.7974-1.1625 (0.7974-1.1972 before gemm44 priced
  few-row GEMMs by XLA's measured table, 0.8031-1.2287 before Megatron-LM's backward TP overlap was priced,
  0.8021-1.2350 before session 39 priced 1F1B's fill and drain at each stage's own speed). A time predicted at
  an MFU goes as ``1 / MFU``, so its ends are ``t / 1.1625`` and ``t / 0.7974``. Worked, chapter 12: a saving
  of 4.357 days (the front's first doubling of Llama-3-70B on B200s before gemm44, 9.145 - 4.788) gives 4.357
  / 1.1625 = 3.748 to 4.357 / 0.7974 = 5.464 (a difference of two times on the one range scales by the same
  factors: a / f - b / f = (a - b) / f).
* fine-tuning, area ``fine-tuning``, group ``all``: 0.7997-1.6420 (0.8010-1.6310 before the backward TP
  overlap moved Hopper's kernel efficiency, 0.7664-1.8622 before ft43 counted the launch floor's passes,
  0.7816-1.8989 before session 39), which the library states rounded outwards to 0.01
  (``data/finetune_model.csv``): 0.79-1.65, multiplying a step time (published / predicted)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pandas as pd
import pytest

from llmsizing.finetune_time import finetune_time
from llmsizing.mfu import plan_range_factors, time_range_ends
from llmsizing.planner import plan

INTERVALS = Path(__file__).resolve().parents[1] / "data" / "intervals.csv"


def _row(area: str, group: str) -> tuple[float, float]:
    with open(INTERVALS, newline="") as f:
        (r,) = [r for r in csv.DictReader(f) if r["area"] == area and r["group"] == group]
    return float(r["low"]), float(r["high"])


def test_time_range_ends_by_hand_on_the_stored_training_range():
    lo, hi = _row("training-layout", "bf16")
    assert (lo, hi) == (0.7974, 1.1625)                       # the worked figures above use these
    a, b = time_range_ends(4.357, (lo, hi))
    assert abs(a - 3.748) < 5e-4 and abs(b - 5.464) < 5e-4
    # a difference is the difference of the ends, on one range
    d = time_range_ends(9.145 - 4.788, (lo, hi))
    e9, e4 = time_range_ends(9.145, (lo, hi)), time_range_ends(4.788, (lo, hi))
    assert math.isclose(d[0], e9[0] - e4[0]) and math.isclose(d[1], e9[1] - e4[1])
    assert time_range_ends(-1.0, (lo, hi)) == (-1.0 / hi, -1.0 / lo)      # a signed difference is allowed


def test_time_range_ends_checks_its_input():
    for bad, err in (((1.1, 1.3), ValueError), ((0.8, 0.9), ValueError), ((0.8,), ValueError),
                     ((0.8, 1.2, 1.3), ValueError), ((0.0, 1.2), ValueError), ("0.8,1.2", TypeError)):
        with pytest.raises(err, match="factors"):
            time_range_ends(1.0, bad)
    with pytest.raises(ValueError, match="value"):
        time_range_ends(math.nan, (0.8, 1.2))


def test_plan_range_factors_read_the_plans_own_row():
    lo, hi = _row("training-layout", "bf16")
    df = plan("llama-3-8b", tokens=1e10, gpus=("H100 SXM",), seq=4096, global_batch=64, max_gpus=64)
    assert df.attrs["range_rows"] == {"H100 SXM": "bf16"}
    assert plan_range_factors(df, "H100 SXM") == (lo, hi)
    r = df.iloc[0]
    assert math.isclose(r["days_low"], r["days"] / hi) and math.isclose(r["days_high"], r["days"] / lo)
    # two plans on the one range: the days saved take its factors
    a, b = df.iloc[0], df.iloc[-1]
    d_lo, d_hi = time_range_ends(a["days"] - b["days"], plan_range_factors(df, "H100 SXM"))
    assert math.isclose(d_lo, a["days_low"] - b["days_low"])
    assert math.isclose(d_hi, a["days_high"] - b["days_high"])
    with pytest.raises(ValueError, match="gpu: 'B200' is not one of the plan's GPUs"):
        plan_range_factors(df, "B200")
    with pytest.raises(TypeError, match="frame"):
        plan_range_factors(pd.DataFrame(), "H100 SXM")


def test_finetune_step_and_exposed_comm_ranges_by_hand():
    lo, hi = _row("fine-tuning-base", "quantised")                          # a QLoRA step's (session 43)
    assert (lo, hi) == (0.7441, 1.2925)        # 0.7180-1.4340 before gemm44; pooled 0.8164-1.8453
    f_lo, f_hi = math.floor(lo * 100) / 100, math.ceil(hi * 100) / 100       # rounded outwards: 0.74, 1.30
    # chapter 16's eight L40S cards: FSDP-QLoRA of Llama-3-70B waits for its gathers
    t = finetune_time("llama-3-70b", gpu="L40S", method="qlora", strategy="fsdp", n_gpus=8, batch=1, seq=2048,
                      tokens=100e6, recompute="full")
    assert t.exposed_comm_s > 0
    assert t.step_s_range == pytest.approx((t.step_s * f_lo, t.step_s * f_hi), rel=1e-12)
    assert t.exposed_comm_s_range == pytest.approx((t.exposed_comm_s * f_lo, t.exposed_comm_s * f_hi),
                                                   rel=1e-12)
    # the same factors as the run's hours (a fixed number of steps)
    assert t.hours_range[0] / t.hours == pytest.approx(t.step_s_range[0] / t.step_s, rel=1e-12)
    full = finetune_time("llama-3-8b", gpu="H100 SXM", method="full", seq=2048, tokens=1e6, n_gpus=8,
                         strategy="zero3")
    assert full.step_s_range is None and full.exposed_comm_s_range is None
