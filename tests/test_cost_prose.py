"""Chapter 11's sentences (src/llmsizing/cost_prose.py): the numbers its prose quotes, worked by hand from
first principles (a layout's GPUs are tp x pp x dp; a job's cost is proportional to price / (peak x MFU)) and
a reading that raises when the numbers contradict it."""

from __future__ import annotations

import re

import pytest

from llmsizing import get_gpu
from llmsizing.cost_prose import JOB_GPUS, ProseOutOfDate, jobs_by_gpu_prose, pareto_front_prose
from llmsizing.planner import plan
from llmsizing.time_cost import cost_by_gpu, training_time

GPUS = ["A100 80GB", "H100 SXM", "H200", "B200", "MI300X"]


@pytest.fixture(scope="module")
def jobs():
    return cost_by_gpu("llama-3-70b", tokens=1e11, seq=8192, gpus=GPUS)


@pytest.fixture(scope="module")
def reference():
    return training_time("llama-3-70b", tokens=1e12, gpu=get_gpu("H100 SXM"), n_gpus=1024, seq=8192)


def test_the_front_layouts_multiply_to_their_gpus():
    """Each quoted layout's TP x PP x DP is its GPU count, and DP x micro-batches <= the global batch, 512."""
    t = pareto_front_prose(plan("llama-3-70b", tokens=1e12, gpus=("H100 SXM",), seq=8192, global_batch=512,
                                max_gpus=16384)).values
    for key in ("cheap", "fast"):
        tp, pp, dp = map(int, re.fullmatch(r"TP(\d+) PP(\d+) DP(\d+)", t[f"front_{key}_layout"]).groups())
        assert f"{tp * pp * dp:,}" == t[f"front_{key}_n"]
        assert dp == 512                                   # one sequence per replica: the batch's cap
    tp, pp, dp = map(int, re.fullmatch(r"TP(\d+) PP(\d+) DP(\d+)", t["front_vp_layout"]).groups())
    assert f"{tp * pp * dp:,}" == t["front_fast_n"] and dp * int(t["front_fast_m"]) == 512


def test_job_costs_scale_as_price_over_peak(jobs, reference):
    """At one borrowed MFU the cost goes as price / dense peak: the B200 against the H100,
    (6.69 / 3.99) x (989.4 / 2,250) = 0.737; the MI300X (1.85 / 3.99) x (989.4 / 1,307.4) = 0.351 (the datasheets'
    dense bf16 peaks, the prices of the catalogue's rows). Without recomputation the H100's job costs its MFU
    ratio less: $165k x 32.7 / 44.3 = $122k."""
    t = jobs_by_gpu_prose(jobs, reference).values
    price = {g: get_gpu(g).price_usd_per_gpu_hour for g in ("H100 SXM", "B200", "MI300X")}
    assert t["tab_b200"] == f"{price['B200'] / price['H100 SXM'] * 989.4 / 2250:.2f}"
    assert t["tab_mi300x"] == f"{price['MI300X'] / price['H100 SXM'] * 989.4 / 1307.4:.2f}"
    job = float(t["job_h100"].strip("$k"))
    mfu, mfu_plain = float(t["mfu_h100"].rstrip("%")), float(t["mfu_h100_norecompute"].rstrip("%"))
    assert abs(float(t["job_h100_norecompute"].strip("$k")) - job * mfu / mfu_plain) < 1.0
    assert set(f"job_{k}" for k in JOB_GPUS.values()) <= set(t)


def test_a_reading_the_numbers_contradict_raises(jobs, reference):
    """Were the H200's job as many GPUs as the H100's and more, "the H200's memory buys a smaller job" is false."""
    bigger = jobs.copy()
    bigger.loc[bigger["gpu"] == "H200", "min_gpus"] = 64
    with pytest.raises(ProseOutOfDate, match="chapter 11's prose says the H200's memory buys a smaller job"):
        jobs_by_gpu_prose(bigger, reference)


def test_the_readings_time_the_chapter_s_one_job(monkeypatch, jobs, reference):
    """jobs_by_gpu_prose times the job cost_prose.JOB names (review45: it typed "llama-3-70b", 1e11, 8192
    again). The job at twice the tokens (200B) is another job: its costs fail the check "cost_by_gpu times each
    job with every layer recomputed" until JOB names it; then it holds, and each GPU's job costs twice as much
    (the same fewest GPUs, MFU and price: the cost goes as the tokens)."""
    import llmsizing.cost_prose as cp

    assert dict(cp.JOB) == {"model": "llama-3-70b", "tokens": 1e11, "seq": 8192}    # the job the prose names
    twice = {**cp.JOB, "tokens": 2 * cp.JOB["tokens"]}
    jobs2 = cost_by_gpu(**twice, gpus=GPUS)
    with pytest.raises(ProseOutOfDate, match="cost_by_gpu times each job with every layer recomputed"):
        jobs_by_gpu_prose(jobs2, reference)
    monkeypatch.setattr(cp, "JOB", twice)
    t = jobs_by_gpu_prose(jobs2, reference).values
    one = jobs.set_index("gpu")["cost_usd"]
    for g, key in JOB_GPUS.items():
        assert float(t[f"job_{key}"].strip("$k").replace(",", "")) == pytest.approx(2 * one[g] / 1e3, abs=0.5)


def test_the_fewest_gpus_are_not_the_cheapest(monkeypatch, jobs, reference):
    """The fewest H100s that hold a step recompute every layer (22: TP2, ZeRO-3); a few more hold it without
    recomputation, and then the 100B-token job costs a tenth of the 1T-token one at the same MFU (GPU-hours
    = tokens x FLOPs / (peak x MFU), whatever the GPU count): $1,216k / 10 = $122k. Were the count without
    recomputation no larger, the prose's "a few more H100s" would be false, and the reading raises."""
    import llmsizing.cost_prose as cp

    t = jobs_by_gpu_prose(jobs, reference).values
    assert int(t["min_h100_norecompute"]) > int(t["min_h100"])
    tenth_k = reference.cost_usd / 10 / 1e3
    assert float(t["job_h100_norecompute"].strip("$k")) == pytest.approx(tenth_k, abs=0.5)
    real = cp.min_gpus
    monkeypatch.setattr(cp, "min_gpus", lambda *a, **k: real(*a, **{**k, "recompute": "full"}))
    with pytest.raises(ProseOutOfDate, match="a few more H100s hold the step without recomputation"):
        jobs_by_gpu_prose(jobs, reference)


def test_the_interruption_figures_are_read_from_the_data():
    """The figures the interruption section quotes, worked by hand from the sources the data cites: Llama 3's
    snapshot (Dubey et al. 2024, Sec. 3.3.4) had 466 interruptions on 16,384 H100s over 54 days, 419 of them
    unexpected, so 466 - 419 = 47 planned; OPT-175B ran on 992 A100s; the research clusters' 1,024-GPU jobs
    failed every 7.9 hours (0.3291667 days x 24 = 7.90); the Llama 3.1 card gives 30.84M H100-hours for the
    405B model. A Table 5 that no longer counts the 419 (148 + 72 + ... = 419) makes the reading raise."""
    from llmsizing.cost_prose import interruptions_prose
    from llmsizing.reliability import interruption_causes, interruption_logs

    logs, causes = interruption_logs(), interruption_causes()
    text = interruptions_prose(logs, causes)
    assert text.values == {"int_all": "466", "int_unexpected": "419", "int_planned": "47", "int_days": "54",
                           "int_gpus": "16,384", "int_opt_gpus": "992", "int_rsc_gpus": "1,024",
                           "int_rsc_mttf": "7.9", "card_mgpuh": "30.84M"}
    assert text.data["card_gpu_hours"] == 30.84e6
    with pytest.raises(ProseOutOfDate, match="Table 5"):
        interruptions_prose(logs, causes.iloc[1:])            # the 148 faulty GPUs dropped: 271, not 419
    opt_exact = logs.assign(count_is=logs["count_is"].replace("lower bound", "exact"))
    with pytest.raises(ProseOutOfDate, match="lower bound"):
        interruptions_prose(opt_exact, causes)


def test_the_seed_cost_tables_audit_quotes_the_seed_and_its_own_arithmetic():
    """Seed 000's tables, worked by hand: one H100 at $2.69 costs 2.69 x 24 = $64.56 a day; Mistral 7B's
    100B tokens at 3,500 tokens/s take 1e11 / 3,500 / 86,400 = 330.7 days (the table says 262, $16,768), at
    $64.56 a day $21,349; Llama 2 13B's at 3,200 take 361.7 (the table: 283); the 70B table's 8 H100s at
    28,000 tokens/s take 1e12 / 28,000 / 86,400 = 413.4 days, 3,500 a GPU; the two 4-GPU rows both say 73 days
    and $18,907; the small tables are 1 - 262/330.7 = 20.8% (Mistral, 2 GPUs: 1 - 142/178.1 = 20.3%) to
    1 - 73/105.2 = 30.6% short. A table whose two 4-GPU rows differ makes the reading raise."""
    from llmsizing.cost import audit_cost_table
    from llmsizing.cost_prose import seed_cost_tables_prose

    audit = audit_cost_table()
    v = seed_cost_tables_prose(audit).values
    assert (v["a_price"], v["a_perday"], v["a_m1_tps"], v["a_m1_said_days"], v["a_m1_said_cost"]) == (
        "$2.69", "$64.56", "3,500", "262", "$16,768")
    assert (v["a_m1_days"], v["a_m1_cost"], v["a_13_tps"], v["a_13_said_days"], v["a_13_days"]) == (
        "331", "$21,349", "3,200", "283", "362")
    assert (v["a_70_tps8"], v["a_70_said_tps_gpu"], v["a_70_days"], v["a_4x_days"], v["a_4x_cost"]) == (
        "28,000", "3,500", "413", "73", "$18,907")
    assert v["a_short"] == "20% to 31%" and v["a_13_verdict"] == "inside"
    changed = audit.copy()
    changed.loc[(changed["gpus"] == 4) & (changed["model"] == "mistral-7b"), "days"] = 72
    changed["total_cost_usd"] = changed["days"] * changed["cost_per_day_usd"]
    with pytest.raises(ProseOutOfDate, match="4xH100"):
        seed_cost_tables_prose(changed)
