"""Chapter 13's case studies in sentences (llmsizing.case_study_prose, issue 38). Expected texts are worked by
hand from published figures (data/published_runs.csv, the Llama 3 paper's Table 4 and model card, seed 000's
claim) or from first principles; none is copied from the code's output."""

from types import SimpleNamespace

import pytest

from llmsizing import case_study_prose as csp
from llmsizing.catalog import get_gpu
from llmsizing.prose import ProseOutOfDate


@pytest.fixture(scope="module")
def case1():
    return csp.case1_time_prose()


@pytest.fixture(scope="module")
def case3():
    return csp.case3_step_prose()


def test_plan_layout_names_chunks_only_above_one():
    row = SimpleNamespace(tp=8, pp=16, virtual_stages=8, dp=128, zero=1)
    assert csp.plan_layout(row) == "TP8 PP16 VP8 DP128 ZeRO-1"
    row = SimpleNamespace(tp=4, pp=1, virtual_stages=1, dp=64, zero=3)
    assert csp.plan_layout(row) == "TP4 PP1 DP64 ZeRO-3"


def test_case1_reads_the_seed_as_written(case1):
    text = case1
    results = text.data
    v = text.values
    assert v["c1_seed_price"] == "$2.67"            # "$64 x 3 days": 64 / 24 = 2.667 per GPU-hour
    assert v["c1_tok_per_example"] == "10,000"       # 1B tokens / 100K examples
    # 3 days on one H100 for 1B tokens: Mistral-7B's 7.24e9 parameters at 6N = 43.5 GFLOP a token, plus the
    # attention's 12 * 32 layers * 4,096 hidden * 4,096 tokens = 6.4 GFLOP, 49.9e18 FLOPs in all over
    # 3 * 86,400 s * 989 TFLOP/s = 256e18: 19.5%
    assert v["c1_seed_mfu"] == "19%"
    assert v["c1_link"] == "63.0 GB/s"               # PCIe Gen5 x16: 32 GT/s * 16 lanes * 128/130 / 8
    # the library's step is faster than the seed's 3 days, and the cell prints both layouts
    assert results["run"].time.days < 3
    assert "ZeRO-1 + offload" in text.report and "ZeRO-2 + offload" in text.report


def test_case1_lora_judged_at_its_ranges_slow_end(case1):
    """Read as LoRA the run takes finetune_time's central days, and the audit judges it, as every time, at
    the slow end of the stated range (hours_range[1] / 24), where 3 days are off by 3 / that."""
    from llmsizing.finetune_time import finetune_time

    t = finetune_time("mistral-7b", gpu="H100 SXM", method="lora", tokens=1e9, seq=4096, batch=1)
    v = case1.values
    assert v["c1_lora_days"] == f"{t.days:.2f}" and v["c1_lora_slow"] == f"{t.hours_range[1] / 24:.2f}"
    assert v["c1_audit_lora"] == f"off by {3 / (t.hours_range[1] / 24):.1f}x (too high)"


def test_case3_quotes_the_paper(case3):
    text = case3
    results = text.data
    v = text.values
    assert v["c3_meta_tflops"] == "400"               # Table 4, 16,384 GPUs
    assert v["c3_meta_printed"] == "41%"              # the table's own MFU column
    assert v["c3_meta_mfu"] == "40%"                  # 400 / 989 = 40.4% of the H100's dense BF16 peak
    assert v["c3_bubble_eq"] == "0.117"               # (p - 1) / (v m) = 15 / (8 * 16)
    assert v["c3_inflight"] == "16"                   # 16 micro-batches, all in flight on the early stages
    assert results["memory"].total_bytes <= get_gpu("H100 SXM").memory_bytes   # it ran without recomputing
    assert results["meta_mfu"] == pytest.approx(400 / 989, rel=2e-3)


def test_case3_against_the_model_card(case3):
    text = csp.case3_published_prose(case3.data)
    results = text.data
    v = text.values
    assert v["c3_card"] == "30.84M"                   # the model card's H100 GPU-hours
    assert v["c3_steady_mfu"] == "40%"
    # the steady state at Meta's 400 TFLOP/s: the GPU-hours scale as one over the MFU
    assert results["at_steady"].gpu_hours < results["card"].gpu_hours
    assert v["c3_99"].startswith("TP8 PP16 VP8 DP128")   # Meta's degrees once the margin goes


def test_a_statement_the_numbers_no_longer_bear_out_raises(monkeypatch):
    # "3 days" is "off" only while the audit's ratio exceeds the band; a band wider than any ratio breaks it
    monkeypatch.setattr(csp, "BAND", 1e9)
    with pytest.raises(ProseOutOfDate, match="chapter 13 says the seed's 3 days are below the band"):
        csp.case1_time_prose()


def test_case3_constants_are_the_model_card_s_row():
    """CASE3_MODEL, CASE3_SEQ and CASE3_TOKENS are Llama 3.1 405B's model-card row of data/published_runs.csv
    (15.6T tokens of 8,192, Sec. 3.1 and 3.3), and META_STEADY names Table 4's steady row on 16,384 GPUs at a
    batch of 2,048 sequences (16M tokens), whose GPUs and batch case 3's planner and runs now read."""
    import csv

    from llmsizing.catalog import DATA_DIR

    with open(DATA_DIR / "published_runs.csv", newline="") as f:
        rows = {r["run"]: r for r in csv.DictReader(f)}
    card = rows["Llama 3.1 405B pre-training"]
    assert (csp.CASE3_MODEL, csp.CASE3_SEQ, csp.CASE3_TOKENS) == (card["model"], int(card["seq"]),
                                                                   float(card["tokens"]))
    assert csp.CASE3_TOKENS == 15.6e12 and csp.CASE3_SEQ == 8192
    steady = rows[csp.META_STEADY]
    assert (int(steady["n_gpus"]), int(float(steady["global_batch"])), int(steady["seq"])) == (16_384, 2048, 8192)


def test_case3_micro_batch_is_a_reading(case3):
    """Table 4 gives 16 sequences per pipeline, not the micro-batch. Read as eight micro-batches of two, the
    interleaved bubble (p - 1) / (v m) = 15 / (8 * 8) = 0.234 for equal stages, twice the 15 / 128 = 0.117 of
    sixteen; the lighter end stages take it a little under, to 0.23. The step still holds the same tokens in
    flight (8 x 2 sequences instead of 16 x 1), so it fits the whole 79.6 GiB as the run of sixteen does, and
    the longer bubble lowers the MFU below the 40% of the book's reading."""
    v = case3.values
    assert v["c3_b2_bubble"] == "0.23"
    assert float(v["c3_b2_mfu"].rstrip("%")) < float(v["c3_mfu"].rstrip("%"))
    assert float(v["c3_b2_gib"].split()[0]) <= 79.6
