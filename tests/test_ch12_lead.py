"""Chapter 12 "How firm is the winner's lead?" and the front's doublings (llmsizing.cost.gpu_lead,
plan_at_kernel_efficiency, front_steps): expected values worked by hand from the prices and days, not from the
functions' output."""

import csv
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from llmsizing.charts import PLAN_GPUS
from llmsizing.cost import front_steps, gpu_lead, plan_at_kernel_efficiency
from llmsizing.planner import plan

B200_PRICE, H200_PRICE = 6.69, 4.59              # data/gpu_prices.csv: Lambda's B200, RunPod's H200 (list)

def _blackwell_bf16() -> float:
    """data/kernel_efficiency.csv's blackwell bf16 row (a stand-in tools/calibrate.py sets), read by csv."""
    with open(Path(__file__).resolve().parents[1] / "data" / "kernel_efficiency.csv", newline="") as fh:
        return next(float(r["kernel_efficiency"]) for r in csv.DictReader(fh)
                    if r["generation"] == "blackwell" and r["dtype"] == "bf16")


B200_BF16_EFF = _blackwell_bf16()
RUN = dict(tokens=1e12, gpus=PLAN_GPUS, seq=8192, global_batch=512, max_gpus=4096)     # chapter 12's run


def _by_hand_frame():
    """A plan-like table: B200 at $5/GPU-hour (cheapest $100k), H200 next ($150k), an A100 far behind; rows
    unsorted, so the winner is found by cost, not by position."""
    return pd.DataFrame({"gpu": ["H200", "B200", "A100 80GB", "B200", "H200"],
                         "cost_usd": [150_000.0, 100_000.0, 400_000.0, 130_000.0, 160_000.0],
                         "gpu_hours": [40_000.0, 20_000.0, 200_000.0, 26_000.0, 42_000.0]})


@cache
def _bf16_factors():
    """(low, high) of data/intervals.csv's training-layout bf16 row, read from the file (the range the plan
    gives its B200 rows: frame.attrs["range_rows"])."""
    with open(Path(__file__).resolve().parents[1] / "data" / "intervals.csv", newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if r["area"] == "training-layout" and r["group"] == "bf16")
    return float(row["low"]), float(row["high"])


@cache
def _chapter_plan():
    return plan("llama-3-70b", **RUN)


def test_lead_by_hand_on_a_small_table():
    lead = gpu_lead(_by_hand_frame(), kernel_efficiency=0.6)
    assert (lead.gpu, lead.runner_up) == ("B200", "H200")
    assert lead.cost_usd == 100_000 and lead.runner_up_cost_usd == 150_000
    assert lead.lead == pytest.approx(1.5)                                   # 150k / 100k
    assert lead.price_usd_per_gpu_hour == pytest.approx(5.0)                 # $100k / 20,000 GPU-hours
    assert lead.breakeven_price_usd_per_gpu_hour == pytest.approx(7.5)       # $5 x 1.5 (x 20,000 h: $150k)
    assert lead.breakeven_kernel_efficiency == pytest.approx(0.4)            # 0.6 / 1.5


def test_lead_defaults_to_the_winners_bf16_kernel_efficiency():
    lead = gpu_lead(_by_hand_frame())
    assert lead.kernel_efficiency == pytest.approx(B200_BF16_EFF)
    assert lead.breakeven_kernel_efficiency == pytest.approx(B200_BF16_EFF / 1.5)


def test_chapter_lead_from_the_prices_and_days(catalogue_prices):
    df = _chapter_plan()
    lead = gpu_lead(df)
    b = df[df["gpu"] == "B200"].sort_values("cost_usd").iloc[0]
    h = df[df["gpu"] == "H200"].sort_values("cost_usd").iloc[0]
    # a run's cost is GPUs x days x 24 h x its list price
    b_cost = b["n_gpus"] * b["days"] * 24 * B200_PRICE
    h_cost = h["n_gpus"] * h["days"] * 24 * H200_PRICE
    assert (lead.gpu, lead.runner_up) == ("B200", "H200")
    assert lead.cost_usd == pytest.approx(b_cost, rel=1e-9)
    assert lead.lead == pytest.approx(h_cost / b_cost, rel=1e-9)
    assert lead.price_usd_per_gpu_hour == pytest.approx(B200_PRICE, rel=1e-9)
    assert lead.breakeven_price_usd_per_gpu_hour == pytest.approx(B200_PRICE * h_cost / b_cost, rel=1e-9)
    assert lead.breakeven_kernel_efficiency == pytest.approx(B200_BF16_EFF * b_cost / h_cost, rel=1e-9)


def test_at_the_plans_own_efficiency_nothing_moves(catalogue_prices):
    df = _chapter_plan()
    r = plan_at_kernel_efficiency(df, "llama-3-70b", seq=RUN["seq"], kernel_efficiency=B200_BF16_EFF)
    row = df.iloc[0]                                                          # the cheapest plan, a B200 one
    low, high = _bf16_factors()
    assert r.gpu == row["gpu"] == "B200" and r.cheaper_gpus == ()
    assert r.step_scale == pytest.approx(1, rel=1e-9)
    assert r.step_s == pytest.approx(row["step_time_s"], rel=1e-9)
    assert r.days == pytest.approx(row["days"], rel=1e-9)
    assert r.cost_usd == pytest.approx(row["cost_usd"], rel=1e-9)
    assert r.days_low == pytest.approx(row["days"] / high) and r.days_high == pytest.approx(row["days"] / low)
    assert r.cost_usd_low == pytest.approx(row["cost_usd"] / high)
    assert r.cost_usd_high == pytest.approx(row["cost_usd"] / low)


def test_half_the_efficiency_less_than_doubles_the_step(catalogue_prices):
    df = _chapter_plan()
    row = df.iloc[0]
    r = plan_at_kernel_efficiency(df, "llama-3-70b", seq=RUN["seq"], kernel_efficiency=B200_BF16_EFF / 2)
    # its GEMMs take twice as long, its memory-bound kernels no longer: the step grows, by less than 2x
    assert 1 < r.step_scale < 2
    assert r.mfu == pytest.approx(row["mfu"] / r.step_scale, rel=1e-9)       # the same FLOPs, a longer step
    low, high = _bf16_factors()
    assert r.days == pytest.approx(row["days"] * r.step_scale) and r.days_high == pytest.approx(r.days / low)
    assert r.cost_usd == pytest.approx(row["cost_usd"] * r.step_scale)
    assert r.cost_usd_low == pytest.approx(r.cost_usd / high)


def test_cheaper_gpus_are_those_below_the_repriced_cost(catalogue_prices):
    df = _chapter_plan()
    r = plan_at_kernel_efficiency(df, "llama-3-70b", seq=RUN["seq"], kernel_efficiency=0.3)
    d = df.copy()
    # the other types' cheapest runs set just under and over the repriced B200 run (still above its own cost)
    for gpu, factor in (("H200", 0.99), ("A100 80GB", 0.98), ("H100 SXM", 1.01)):
        d.loc[d["gpu"] == gpu, "cost_usd"] = r.cost_usd * factor
    assert r.cost_usd * 0.98 > df.iloc[0]["cost_usd"]
    r2 = plan_at_kernel_efficiency(d, "llama-3-70b", seq=RUN["seq"], kernel_efficiency=0.3, gpu="B200")
    assert r2.cheaper_gpus == ("A100 80GB", "H200")                          # cheapest first; not the H100
    assert r2.cost_usd == pytest.approx(r.cost_usd)


@pytest.mark.parametrize("eff", [0, -0.1, 1.5, float("nan"), "0.5"])
def test_bad_kernel_efficiency_is_refused(eff, catalogue_prices):
    with pytest.raises((ValueError, TypeError), match="kernel_efficiency"):
        plan_at_kernel_efficiency(_chapter_plan(), "llama-3-70b", seq=8192, kernel_efficiency=eff)
    with pytest.raises((ValueError, TypeError), match="kernel_efficiency"):
        gpu_lead(_by_hand_frame(), kernel_efficiency=eff)


def test_bad_tables_are_refused(catalogue_prices):
    with pytest.raises(TypeError, match="gpu_hours"):
        gpu_lead(pd.DataFrame({"gpu": ["B200"], "cost_usd": [1.0]}))
    with pytest.raises(ValueError, match="empty"):
        gpu_lead(_by_hand_frame().iloc[:0])
    with pytest.raises(ValueError, match="runner-up"):
        gpu_lead(_by_hand_frame().query("gpu == 'B200'"))
    with pytest.raises(ValueError, match="gpu"):
        plan_at_kernel_efficiency(_chapter_plan(), "llama-3-70b", seq=8192, kernel_efficiency=0.5,
                                  gpu="MI300X")


# ----------------------------------------------------------------------------- the front's steps
def _front_frame():
    """A plan-like front on B200s: 512 GPUs 9 days $750k, 1,024 5 days $800k, 2,048 3 days $960k, and a plan
    off the front (slower and dearer); the range the planner gives B200 rows (data/intervals.csv, bf16)."""
    f = pd.DataFrame({"gpu": ["B200"] * 4, "n_gpus": [1024, 512, 768, 2048], "days": [5.0, 9.0, 9.5, 3.0],
                      "cost_usd": [800_000.0, 750_000.0, 900_000.0, 960_000.0],
                      "pareto": [True, True, False, True]})
    f.attrs.update(range_area="training-layout", range_rows={"B200": "bf16"})
    return f


def test_front_steps_by_hand():
    low, high = _bf16_factors()
    s1, s2 = front_steps(_front_frame())
    assert (s1.gpu, s1.n_gpus_from, s1.n_gpus_to) == ("B200", 512, 1024)
    assert (s2.n_gpus_from, s2.n_gpus_to) == (1024, 2048)
    assert s1.days_saved == pytest.approx(4.0) and s2.days_saved == pytest.approx(2.0)       # 9 - 5, 5 - 3
    assert s1.days_saved_low == pytest.approx(4.0 / high) and s1.days_saved_high == pytest.approx(4.0 / low)
    assert s2.days_saved_low == pytest.approx(2.0 / high) and s2.days_saved_high == pytest.approx(2.0 / low)
    assert s1.cost_added_usd == pytest.approx(50_000) and s2.cost_added_usd == pytest.approx(160_000)
    assert s1.cost_ratio == pytest.approx(800 / 750) and s2.cost_ratio == pytest.approx(1.2)    # 960k / 800k


def test_front_steps_of_one_plan_and_refusals():
    f = _front_frame()
    f.loc[f["n_gpus"] != 512, "pareto"] = False
    assert front_steps(f) == ()                                               # one plan: no step
    mixed = _front_frame()
    mixed.loc[mixed["n_gpus"] == 2048, "gpu"] = "H200"
    mixed.attrs["range_rows"] = {"B200": "bf16", "H200": "bf16"}
    with pytest.raises(ValueError, match="mixes GPU types"):
        front_steps(mixed)
    with pytest.raises(TypeError, match="pareto"):
        front_steps(_front_frame().drop(columns="pareto"))
    bare = _front_frame()
    bare.attrs.clear()
    with pytest.raises(TypeError, match="range"):                            # not a plan table: no range rows
        front_steps(bare)
