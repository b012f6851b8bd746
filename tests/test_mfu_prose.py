"""Chapter 10's MFU ranges in sentences (llmsizing.mfu_prose, issue 38). Expected texts are worked by hand
from data/published_runs.csv's rows, from the conformal bound's arithmetic (``n - (1 - alpha/2)(n + 1)``
sources beyond each bound at 80%) and from 6ND FLOPs for the worked job; none is copied from the code's
output."""

import csv
import re

import pytest

from llmsizing import mfu_prose
from llmsizing.catalog import DATA_DIR
from llmsizing.mfu_prose import ProseOutOfDate, calibration_prose, inputs_range_prose, llama3_stages_prose, \
    stack_ranges_prose


def _rows():
    with open(DATA_DIR / "published_runs.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_calibration_counts_the_published_runs():
    _out = calibration_prose()
    table, texts = _out.report, _out.values
    rows = _rows()
    cal = sum(r["calibration"].strip().lower() in ("true", "yes", "1") for r in rows)
    assert texts["n_runs"] == f"{len(rows)}"
    assert (texts["n_cal"], texts["n_held"]) == (f"{cal}", f"{len(rows) - cal}")
    seqs = [int(r["seq"]) for r in rows]
    assert texts["seq_span"] == f"{min(seqs) // 1024}K to {max(seqs) // 1024}K"
    assert int(texts["n_inside"]) <= len(rows)
    assert len(table.splitlines()) == len(rows) + 1             # a header and a line a run


def test_stack_bounds_follow_the_conformal_arithmetic():
    texts = stack_ranges_prose().values
    fold = int(texts["stack_fold_sources"])
    # at 80% (alpha / 2 = 0.1) a fold of n sources leaves n - 0.9 (n + 1) beyond each bound
    assert texts["outside_fold"] == f"{max(0.0, fold - 0.9 * (fold + 1)):.1f}"
    # a whole source strays once n - 0.9 (n + 1) >= 1, from n = 19 in a fold: 20 sources
    assert texts["sources_for_one"] == "20"
    if fold - 0.9 * (fold + 1) >= 1:
        assert "from 20 sources on (19 in each fold)" in texts["stack_bound_so"]
    else:
        assert "only with 20 sources" in texts["stack_bound_so"]


def test_inputs_job_priced_near_6nd_over_the_fleet():
    texts = inputs_range_prose().values
    assert (texts["in_job_gpus"], texts["in_job_seq"], texts["in_job_step"]) == ("768", "4,096", "4M")
    # 6 x 8.03e9 x 1e12 FLOPs on 768 H100s at 989.4 TFLOP/s: 0.73 days at 100% MFU, so the days lie between
    # what 20% and 70% MFU would take
    ideal_days = 6 * 8.03e9 * 1e12 / (768 * 989.4e12) / 86_400
    for key in ("plain", "known"):
        days, lo, hi = map(float, re.fullmatch(r"([\d.]+) days \(([\d.]+) to ([\d.]+)\)",
                                               texts[f"in_days_{key}"]).groups())
        assert lo <= days <= hi and ideal_days / 0.7 < days < ideal_days / 0.2
    assert texts["in_days_w_plain"] == texts["in_days_w_known"]        # the batch keeps the range's width


def test_llama3_stages_worked_from_table_4():
    """16,384 GPUs, 16M tokens a step; 14.8T tokens at 8K, then 0.8T at 128K (Dubey et al. 2024, Table 4)."""
    texts = llama3_stages_prose().values
    assert texts["stage_long"] == "131,072"
    assert texts["long_dp"] == f"{16_384 // (8 * 16 * 16)}" == "8"          # TP8 CP16 PP16 on 16,384 GPUs
    assert texts["long_dp4_gpus"] == "8,192"                                 # Table 4's DP 4: half of them
    assert texts["long_dp4_tokens"] == f"{4 * 16 * 131_072 // 2**20}M" == "8M"  # 16 sequences a DP group
    assert texts["stage_token_share"] == f"{0.8 / 15.6:.0%}" == "5%"
    assert texts["plan_m"] == f"{16 * 2**20 // 8192 // 128}" == "16"
    # a 16-stage pipeline's bubble over m = 16 micro-batches, (p - 1) / (v m) of the step's work, idle share
    # bubble / (1 + bubble): 15/31 plain, 15/143 with 8 chunks a stage
    assert texts["plan_bubble_plain"] == f"{15 / 31:.0%}" == "48%"
    assert texts["plan_bubble_v8"] == f"{15 / 143:.0%}" == "10%"
    assert texts["usable_gib"].endswith(" GiB") and "VP" in texts["plan_layout_short"]
    # the GPU-hours' range is the layout band's (data/intervals.csv, training-layout, bf16 on Hopper with no
    # stack named: MFU x0.7974 to x1.1625): hours scale as 1 / MFU, so e.g. 30.0M -> 30.0/1.1625 = 25.8M and
    # 30.0/0.7974 = 37.6M, to the 0.1M the texts are rounded to
    import csv
    from llmsizing.catalog import DATA_DIR
    row = next(r for r in csv.DictReader(open(DATA_DIR / "intervals.csv"))
               if (r["area"], r["group"]) == ("training-layout", "bf16"))
    low_f, high_f = float(row["low"]), float(row["high"])
    for key in ("stage_hours", "plan_hours"):
        mid = float(texts[key].rstrip("M"))
        lo, hi = (float(x.rstrip("M")) for x in texts[f"{key}_range"].split(" to "))
        assert lo == pytest.approx(mid / high_f, abs=0.1) and hi == pytest.approx(mid / low_f, abs=0.1)


def test_a_false_statement_raises_prose_out_of_date(monkeypatch):
    """If naming the stack no longer narrowed the layout range, the chapter's sentence would be out of
    date."""
    iv = mfu_prose._intervals()
    iv.loc[("training-layout", "stack:all"), "median_width"] = 99.0
    monkeypatch.setattr(mfu_prose, "_intervals", lambda: iv)
    with pytest.raises(ProseOutOfDate, match="chapter 10's prose says naming the stack narrows"):
        stack_ranges_prose()


def test_llama3_constants_are_table_4s_rows():
    """LLAMA3_LONG_SEQ and LLAMA3_BATCH_TOKENS are Table 4's, as data/published_runs.csv holds its rows: the 128K
    row's sequence, and 16M tokens a step at both lengths (global batch x sequence: 2,048 x 8,192 and 128 x
    131,072 = 16 x 2^20)."""
    rows = {r["run"]: r for r in _rows()}
    steady = rows["Llama 3.1 405B, 16,384 GPUs (TP8 PP16 DP128)"]
    long = rows["Llama 3.1 405B, 16,384 GPUs, 128K context (TP8 CP16 PP16 DP4)"]
    assert mfu_prose.LLAMA3_LONG_SEQ == int(long["seq"]) == 131_072
    for r in (steady, long):
        assert mfu_prose.LLAMA3_BATCH_TOKENS == int(float(r["global_batch"])) * int(r["seq"]) == 16 * 2**20
