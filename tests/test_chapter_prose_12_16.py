"""Chapters 12's and 16's prose built in the library (issue 38): llmsizing.prose.usd/ChapterText, plan_prose,
plan_prose_lead, plan_prose_search, finetune_prose. Expected values are worked by hand from first principles,
from data/ files read with csv, or from the plan table's own rows; the prose's checks are also shown raising
ProseOutOfDate on data that contradict them."""

import csv
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from llmsizing.charts import PLAN_GPUS
from llmsizing.finetune_prose import calibration_prose, multi_gpu_prose, ratio_span
from llmsizing.finetune_time import finetune_time
from llmsizing.plan_prose import (front_table, grad_sent_bytes, layout, limits_prose, plan_row_step,
                                  worked_example)
from llmsizing.plan_prose_lead import gpu_types_prose
from llmsizing.plan_prose_search import range_verdict, search_prose
from llmsizing.planner import plan
from llmsizing.prose import ChapterText, ProseOutOfDate, usd
from llmsizing.range_candidates import MAX_WIDTH, MIN_COVERAGE
from llmsizing.step_intervals import step_loso_check

DATA = Path(__file__).resolve().parents[1] / "data"
RUN = dict(tokens=1e12, gpus=PLAN_GPUS, seq=8192, global_batch=512, max_gpus=4096)     # chapter 12's run
BUDGET = dict(tokens=100e6, seq=2048, recompute="full")                                  # chapter 16's


@cache
def _plan():
    return plan("llama-3-70b", **RUN)


@cache
def _worked():
    return worked_example(_plan(), RUN)


def _csv(name):
    with open(DATA / name, newline="") as fh:
        return list(csv.DictReader(fh))


# --------------------------------------------------------------------------- prose.usd, ChapterText
@pytest.mark.parametrize("x, text", [(682_000, "$682k"), (1_140_000, "$1.14M"), (999_000, "$999k"),
                                     (1e6, "$1.00M"), (0, "$0k"), (12_500_000, "$12.50M")])
def test_usd_by_hand(x, text):
    assert usd(x) == text


@pytest.mark.parametrize("x, err", [(-1, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
                                    (True, TypeError), ("5", TypeError), (None, TypeError)])
def test_usd_refuses_what_is_not_dollars(x, err):
    with pytest.raises(err, match="x must"):
        usd(x)


def test_chapter_text_is_frozen_and_starts_empty():
    f = ChapterText()
    assert f.values == {} and f.report == "" and f.data == {}
    assert ChapterText({"a": "1"}, "printed", {"rows": [1]}) == ChapterText(values={"a": "1"}, report="printed",
                                                                           data={"rows": [1]})
    assert ChapterText().values is not f.values                 # each its own dict, never a shared default
    with pytest.raises(AttributeError):
        f.values = {}


# --------------------------------------------------------------------------- plan_prose
def test_layout_names_vp_only_when_interleaved():
    assert layout({"tp": 2, "pp": 4, "virtual_stages": 20, "dp": 128}) == "tp=2, pp=4, vp=20, dp=128"
    assert layout({"tp": 1, "pp": 1, "virtual_stages": 1, "dp": 512}) == "tp=1, pp=1, dp=512"


def test_grad_sent_bytes_sums_only_the_gradient_rows():
    c = [SimpleNamespace(slot=s, bytes_per_gpu=b) for s, b in (("gradients", 3e9), ("weight all-gather", 5e9),
                                                               ("gradients", 1e9), ("parameters", 7e9))]
    assert grad_sent_bytes(SimpleNamespace(communication=SimpleNamespace(collectives=c))) == 4e9


def test_front_table_by_hand():
    f = pd.DataFrame({"gpu": ["B200", "B200", "H200"], "n_gpus": [512, 1024, 2048], "tp": [1, 2, 4],
                      "pp": [1, 1, 2], "virtual_stages": [1, 1, 20], "dp": [512, 512, 256], "zero": [3, 1, 1],
                      "micro_batch": [1, 1, 1], "grad_accum": [1, 1, 2],
                      "recompute": ["full", "full", "none"],
                      "recompute_layers": [19, 9, 0], "memory_per_gpu_bytes": [1.5 * 2**30, 2**31, 2**30],
                      "step_time_s": [3.3, 1.714, 1.0], "mfu": [0.53, 0.514, 0.4], "days": [9.12, 4.7, 3.0],
                      "days_low": [7.8, 4.1, 2.5], "days_high": [11.4, 5.9, 3.7],
                      "cost_usd": [747_710, 1_234_567, 2e6], "cost_usd_low": [643_191, 1e6, 1.5e6],
                      "cost_usd_high": [937_685, 1.5e6, 2.5e6], "pareto": [True, True, False]})
    t = front_table(f)
    assert list(t.index) == [1, 2] and list(t["GPUs"]) == ["512 x B200", "1,024 x B200"]   # H200: not on it
    assert list(t["GiB/GPU"]) == ["1.5", "2.0"] and list(t["step (s)"]) == ["3.30", "1.71"]
    assert list(t["MFU"]) == ["53%", "51%"] and t["days"].iloc[0] == "9.1 (7.8-11.4)"
    assert t["cost"].iloc[0] == "$748k ($643k-$938k)" and t["cost"].iloc[1] == "$1.23M ($1.00M-$1.50M)"


def test_worked_example_refuses_what_is_not_a_plan():
    with pytest.raises(TypeError, match="df must be a plan"):
        worked_example(pd.DataFrame({"x": [1]}), RUN)
    with pytest.raises(TypeError, match="run must"):
        worked_example(_plan(), {"seq": 8192})
    one = _plan().copy()
    one["pareto"] = False
    one.iloc[0, one.columns.get_loc("pareto")] = True
    with pytest.raises(ValueError, match="at least two plans"):
        worked_example(one, RUN)


def test_worked_example_figures_from_the_plans_rows():
    df, f = _plan(), _worked()
    front = df[df["pareto"]]
    cheap, fast = front.iloc[0], front.loc[front["days"].idxmin()]
    second = front.sort_values("n_gpus").iloc[1]
    assert f.values["gb_tokens"] == "4.19M"                                  # 512 x 8,192 = 4,194,304 tokens
    assert f.values["reserve"] == "10%"                                      # 90% of the memory usable
    assert f.values["n_front"] == str(int(df["pareto"].sum()))
    assert f.values["speedup"] == f"{cheap['days'] / fast['days']:.1f}"
    assert f.values["first_more"] == f"{second['cost_usd'] / cheap['cost_usd'] - 1:.0%}"   # one doubling's cost
    margin = 0.9 * cheap["capacity_bytes"] - cheap["memory_per_gpu_bytes"]
    assert f.values["cheap_margin"] == f"{margin / 2**30:.1f} GiB"
    assert f.values["cheap_rc_layers"].endswith(" of 80")                   # Llama-3-70B's 80 layers
    assert f.values["fast_chunk"] == str(80 // (int(fast["pp"]) * int(fast["virtual_stages"])))
    p, m, v = int(fast["pp"]), int(fast["grad_accum"]), int(fast["virtual_stages"])
    assert f.values["fast_bubble_plain"] == f"{(p - 1) / m:.0%}"             # 1F1B's (p-1)/m of the ideal step
    assert f.values["fast_bubble_formula"] == f"{(p - 1) / (v * m):.2%}"     # interleaved: (p-1)/(v m)
    # the per-dollar figures: BF16 dense peak over the list price, from the catalogue's rows by hand
    b200 = next(float(r["price_usd_per_gpu_hour"]) for r in _csv("gpu_prices.csv") if r["name"] == "B200")
    assert f.values["per_usd"].startswith(f"B200 {2250 / b200:,.0f}")   # 2,250 dense BF16 TFLOP/s (gpus.csv)
    assert f.data["steps"]["cheap"].step_s == pytest.approx(cheap["step_time_s"], rel=1e-6)


def test_a_statement_the_data_contradict_raises():
    df = _plan().copy()
    notes = _plan().attrs["range_notes"]                  # as if the H100's range were borrowed as well
    df.attrs = {**_plan().attrs, "range_notes": {**notes, "H100 SXM": "borrowed too"}}
    with pytest.raises(ProseOutOfDate, match="chapter 12's prose says the front is on one GPU type"):
        worked_example(df, RUN)


def test_plan_row_step_is_the_plans_own_unless_told():
    cheap = _plan()[_plan()["pareto"]].iloc[0]
    st = plan_row_step(cheap, "llama-3-70b", seq=8192)
    assert st.step_s == pytest.approx(cheap["step_time_s"], rel=1e-6)
    assert plan_row_step(cheap, "llama-3-70b", seq=8192, recompute="none",
                         recompute_layers=None).step_s < st.step_s      # no recomputation: less arithmetic


def test_limits_by_the_cheapest_plans_rows():
    df = _plan()
    cheap = df[df["pareto"]].iloc[0]
    f = limits_prose(df, RUN)
    assert f.values["month_vs_cheap"] == "the cheapest plan of all, which already meets the deadline"
    assert f.values["month_slack"] == f"{30 - cheap['days_high']:.1f}" and f.values["tight_days"] == "5"
    assert f.values["budget"] == "$1.20M" and len(f.data["lines"]) == 5
    # a "month" shorter than the cheapest plan's slow end binds: the prose's "not a constraint" fails
    with pytest.raises(ProseOutOfDate, match="a month is not a constraint here"):
        limits_prose(df, RUN, month_days=cheap["days_high"] - 1)


def test_seed_000s_32_gpus_in_months_by_hand():
    """Seed 000's "70B+ needs 8-64 GPUs" with its time (small47): the fastest 32-H100 row of the table, in
    months of 365.2425 / 12 = 30.44 days. By first principles: 6 N D = 6 x 70.55e9 x 1e12 = 4.23e23 FLOPs on
    32 x 989 TFLOP/s at the row's MFU is the row's days to within the attention's share (8% here, the row
    counting it)."""
    df = _plan()
    rows = df[(df["gpu"] == "H100 SXM") & (df["n_gpus"] == 32)].sort_values("days")
    r = rows.iloc[0]
    v = limits_prose(df, RUN).values
    assert v["seed_gpus"] == "32"
    assert v["seed_months"] == (f"{r['days'] / 30.436875:.0f} months ({r['days_low'] / 30.436875:.0f} to "
                                f"{r['days_high'] / 30.436875:.0f})")
    assert v["seed_cost"] == usd(r["cost_usd"])
    dense_days = 6 * 70.55e9 * 1e12 / (32 * 989.4e12 * r["mfu"]) / 86400
    assert 0.85 < dense_days / r["days"] < 1.0
    assert r["days_low"] > 365.2425 / 6                    # "months", even at the fast end
    # on 256 H100s it is weeks, not months: the prose's "months" would no longer hold
    with pytest.raises(ProseOutOfDate, match="takes months"):
        limits_prose(df, RUN, seed_gpus=256)
    with pytest.raises(TypeError, match="seed_gpus"):
        limits_prose(df, RUN, seed_gpus=32.0)


# --------------------------------------------------------------------------- plan_prose_lead, _search
def test_gpu_types_by_hand():
    df = _plan()
    loso, runs = step_loso_check()
    f = gpu_types_prose(df, RUN, runs)
    best = df.groupby("gpu")["cost_usd"].min().sort_values()
    lead = best.iloc[1] / best.iloc[0]
    assert f.values["runner"] == best.index[1] and f.values["lead"] == f"{lead:.2f}"
    b200 = next(float(r["price_usd_per_gpu_hour"]) for r in _csv("gpu_prices.csv") if r["name"] == "B200")
    assert f.values["breakeven_price"] == f"${b200 * lead:.2f}"          # the price at which the two tie
    assert f.values["fewest_B200"] == f"{df[df['gpu'] == 'B200']['n_gpus'].min():,}"
    assert list(f.data["table"]["GPU"]) == list(dict.fromkeys(df["gpu"]))
    with pytest.raises(TypeError, match="df must be a plan"):
        gpu_types_prose(pd.DataFrame(), RUN, runs)


def test_range_verdict_at_the_aims_edges():
    assert range_verdict(MIN_COVERAGE, MAX_WIDTH) == "both hold"                 # at the bars: they hold
    assert range_verdict(MIN_COVERAGE - 0.01, MAX_WIDTH) == "the width holds, the coverage does not"
    assert range_verdict(1.0, MAX_WIDTH + 0.01) == "the coverage holds, the width does not"
    assert range_verdict(0.0, 10.0) == "neither holds"


def test_search_prose_by_hand():
    f = search_prose(PLAN_GPUS)
    assert f.values["usable"] == "90%" and f.values["micro_batches"] == "1, 2 or 4"
    assert f.values["cp_min_seq"] == "16K"                                           # 16,384 tokens
    assert f.values["aim"] == "at least 75% inside at a median width of at most 1.6 times"
    row = next(r for r in _csv("intervals.csv") if r["area"] == "training-layout" and r["group"] == "all")
    assert f.values["step_n"] == row["n_rows"] and f.values["step_width"] == f"{float(row['median_width']):.2f}x"
    # the interleaving dropdown: chapter 11's pipeline on Llama-3-70B's 80 layers (Dubey et al. 2024,
    # Table 3), its stage cut into every count of equal chunks, one layer a chunk the most
    tp, pp, dp = (int(x.split("=")[1]) for x in f.values["vp_layout"].split(", "))
    layers = int(f.values["vp_stage_layers"])
    assert layers * pp == 80 and tp * pp * dp == 4096 and f.values["vp_most"] == str(layers)
    counts = [int(c) for c in f.values["vp_counts"].replace(" or", ",").split(", ")]
    assert counts == [c for c in range(1, layers + 1) if layers % c == 0]
    with pytest.raises(ValueError, match="gpus"):
        search_prose(())


# --------------------------------------------------------------------------- finetune_prose
@pytest.mark.parametrize("ratios, text", [([0.82, 1.02], "0.8 to 1.0"), ([1.00, 1.02], "1.02"),
                                          ([1.49], "1.49"), ([2.27, 3.12, 2.42], "2.3 to 3.1")])
def test_ratio_span_by_hand(ratios, text):
    assert ratio_span(ratios) == text


@pytest.mark.parametrize("ratios", [[], [float("nan")], [1.0, float("nan")]])
def test_ratio_span_refuses_no_numbers(ratios):
    with pytest.raises(ValueError, match="ratios"):
        ratio_span(ratios)


@cache
def _cal():
    return calibration_prose()


def test_calibration_counts_from_the_csv():
    f = _cal()
    rows = _csv("finetune_published.csv")
    assert f.values["cal_n"] == str(sum(r["known_out"] == "" for r in rows))           # 118 covered rows
    assert f.values["cal_out_n"] == str(sum(r["known_out"] != "" for r in rows))       # 9 known out
    assert f.values["cal_rejected"] == str(len(_csv("finetune_published_rejected.csv")))
    assert f.values["cal_qwen_n"] == str(sum(r["known_out"] == "" and r["source"].startswith("QwenLM")
                                           for r in rows))
    const = {r["constant"]: r["value"] for r in _csv("finetune_model.csv")}
    q_lo, q_hi = float(const["range_low_quantised"]), float(const["range_high_quantised"])
    assert f.values["cal_range"].startswith(f"{q_lo:.2f} to {q_hi:.2f} times the model's")
    assert f.values["stated_width"].startswith(f"{q_hi / q_lo:.2f} and ")


def test_multi_gpu_by_hand():
    h100 = "H100 SXM"
    cal = _cal()
    one = finetune_time("llama-3-70b", gpu=h100, method="qlora",
                        batch=3, **BUDGET)                     # one H100 at its largest micro-batch
    f = multi_gpu_prose(one, BUDGET, cal.data["covered"], cal.data["aai_h100"])
    table = f.data["table"].set_index("recipe")
    assert table.loc["DDP lora", "fits"] == "no" and table.loc["DDP lora", "hours"] == "-"
    hours = float(table.loc["DDP qlora", "hours"])
    assert float(f.values["t_8gpu_gpu_hours"].replace(",", "")) == pytest.approx(8 * hours, rel=0.02)  # 8 GPUs
    assert f.values["t_1gpu_gpu_hours"] == f"{one.gpu_hours:,.0f}"
    # at micro-batch 1 on one GPU the prose's "the larger micro-batch saves" no longer holds
    b1 = finetune_time("llama-3-70b", gpu=h100, method="qlora", batch=1, **BUDGET)
    with pytest.raises(ProseOutOfDate, match="the larger micro-batch saves"):
        multi_gpu_prose(b1, BUDGET, cal.data["covered"], cal.data["aai_h100"])
    with pytest.raises(TypeError, match="budget"):
        multi_gpu_prose(one, {"tokens": 1e8}, cal.data["covered"], cal.data["aai_h100"])


def test_l40s_ddp_fsdp_hours_carry_their_range():
    # every worked budget shows its range: the 8B QLoRA on eight L40S cards, DDP against FSDP, micro-batch 1;
    # a QLoRA step's range is range_low/high_quantised of data/finetune_model.csv (0.74 to 1.30) times hours
    cal = _cal()
    one = finetune_time("llama-3-70b", gpu="H100 SXM", method="qlora", batch=3, **BUDGET)
    f = multi_gpu_prose(one, BUDGET, cal.data["covered"], cal.data["aai_h100"])
    const = {r["constant"]: float(r["value"]) for r in _csv("finetune_model.csv")}
    lo, hi = const["range_low_quantised"], const["range_high_quantised"]
    for strategy in ("ddp", "fsdp"):
        h = finetune_time("llama-3-8b", gpu="L40S", method="qlora", strategy=strategy, n_gpus=8, batch=1,
                          **BUDGET).hours
        assert f.values[f"t_l40s_8b_{strategy}"] == f"{h:.1f} hours ({h * lo:.1f} to {h * hi:.1f})"
