"""Seed 000's worked "Options" for Llama 2 70B on 1T tokens (data/seed000_options.csv) and its FAQ's "8 GPUs
for 50 days": chapter 11's figures, once typed in its code cell (session 49), now from the library
(:func:`llmsizing.cost.audit_seed_options`, :func:`llmsizing.cost_prose.seed_options_prose`). Every expected
value is worked by hand from the seed's own figures (seed 000 lines 140-157 and 269)."""
import csv
import math
import re
from pathlib import Path

import pytest

from llmsizing import cost
from llmsizing.cost import audit_seed_options, gpu_days_cost_usd
from llmsizing.cost_prose import ProseOutOfDate, seed_options_prose

DATA = Path(__file__).resolve().parents[1] / "data"
SEED_000 = Path("/work/shared/seeds/000_d6a575a5f6cf2fc5.txt")


def test_the_options_arithmetic_by_hand():
    o = audit_seed_options().set_index("option")
    # Option 1: 8 A100s x 2,500 tokens/s = 20,000 tokens/s; 1e12 / 20,000 = 5e7 s = 13,888.9 h (seed: 13,889);
    # 13,889 h x $1.39 = $19,305.71, one GPU's bill (seed: $19,304); x 8 = $154,445.68
    assert o.loc[1, "hours_from_own_tps"] == pytest.approx(13888.89, abs=0.01)
    assert o.loc[1, "one_gpu_cost_usd"] == pytest.approx(19305.71, abs=0.01)
    assert o.loc[1, "all_gpus_cost_usd"] == pytest.approx(154445.68, abs=0.01)
    assert o.loc[1, "gpus_billed"] == pytest.approx(19304 / 19305.71, rel=1e-6)
    assert math.isnan(o.loc[1, "table_cost_usd"])                 # the tables price H100s only
    # Option 2: 8 x 3,500 = 28,000 tokens/s; 1e12 / 28,000 / 3,600 = 9,920.6 h (seed: "36 million seconds =
    # 10,000 hours"); 10,000 x $2.69 = $26,900 = the seed's cost: one GPU; x 8 = $215,200; the table's 8xH100
    # row (1T tokens): $216,006
    assert o.loc[2, "hours_from_own_tps"] == pytest.approx(9920.63, abs=0.01)
    assert o.loc[2, "gpus_billed"] == pytest.approx(1.0, abs=1e-12)
    assert o.loc[2, "all_gpus_cost_usd"] == pytest.approx(215200, abs=1e-6)
    assert o.loc[2, "table_cost_usd"] == 216006
    # Option 3: 64 x 3,500 x 0.75 = 168,000 tokens/s; 1e12 / 168,000 / 3,600 = 1,653.4 h (seed: 1,667);
    # 1,667 x $2.69 = $4,484.23 per GPU; $44,863 / $4,484.23 = 10.005 GPUs; x 64 = $286,990.72; the table's
    # 64xH100 row: $285,936
    assert o.loc[3, "hours_from_own_tps"] == pytest.approx(1653.44, abs=0.01)
    assert o.loc[3, "gpus_billed"] == pytest.approx(10.0046, abs=1e-4)
    assert o.loc[3, "all_gpus_cost_usd"] == pytest.approx(286990.72, abs=0.01)
    assert o.loc[3, "table_cost_usd"] == 285936


def test_the_texts_chapter_11_quotes():
    t = seed_options_prose().values
    assert (t["option1_gpus"], t["option1_hours"], t["option1_price"], t["option1_said"]) == (
        "8", "13,889", "$1.39", "$19,304")
    assert (t["option2_gpus"], t["option2_hours"], t["option2_price"], t["option2_said"]) == (
        "8", "10,000", "$2.69", "$26,900")
    assert (t["option3_gpus"], t["option3_hours"], t["option3_price"], t["option3_said"]) == (
        "64", "1,667", "$2.69", "$44,863")
    assert t["option1_gpus_word"] == "eight"
    # by hand as above; 216,006 / 26,900 = 8.03; 286,990.72 / 44,863 = 6.40; 44,863 / 4,484.23 = 10.0
    assert (t["option1_fixed"], t["option2_fixed"], t["option3_fixed"]) == (
        "$154,446", "$215,200", "$286,991")
    assert (t["option2_table"], t["option2_x"], t["option3_x"], t["option3_n"]) == (
        "$216,006", "8.0", "6.4", "10")
    # FAQ: 8 GPUs x 50 days x 24 h x $2.69 (the tables' RunPod price) = $25,824, as 1 GPU x 400 days
    assert t["faq_same"] == "$25,824"


def test_the_options_agree_with_the_seed_claims():
    """data/seed_claims.csv holds the same Options' costs and days (000-opt<k>-cost, -days)."""
    with open(DATA / "seed_claims.csv", newline="") as fh:
        claims = {r["id"]: float(r["claimed"]) for r in csv.DictReader(fh)}
    o = audit_seed_options().set_index("option")
    for k in (1, 2, 3):
        assert claims[f"000-opt{k}-cost"] == o.loc[k, "cost_usd"]
        assert claims[f"000-opt{k}-days"] == o.loc[k, "days"]
        assert o.loc[k, "days"] == round(o.loc[k, "hours"] / 24)       # 578.7, 416.7, 69.5 -> 69 (seed)


def test_a_reading_that_no_longer_holds_is_named():
    o = audit_seed_options()
    fixed = o.copy()
    fixed.loc[fixed["option"] == 2, "gpus_billed"] = 8.0             # had the seed billed eight GPUs
    with pytest.raises(ProseOutOfDate, match="Options 1 and 2 cost one GPU's bill"):
        seed_options_prose(fixed)
    whole = o.copy()
    whole.loc[whole["option"] == 3, "gpus_billed"] = 64.0            # had Option 3 billed its 64 GPUs
    with pytest.raises(ProseOutOfDate, match="Option 3 bills a whole number of GPUs"):
        seed_options_prose(whole)


def test_gpu_days_cost():
    assert gpu_days_cost_usd(8, 50, 2.69) == pytest.approx(25824)     # 8 x 50 x 24 x 2.69
    assert gpu_days_cost_usd(1, 400, 2.69) == pytest.approx(25824)
    with pytest.raises(TypeError, match="gpus"):
        gpu_days_cost_usd(True, 50, 2.69)
    with pytest.raises(ValueError, match="days"):
        gpu_days_cost_usd(8, -1, 2.69)
    with pytest.raises(ValueError, match="price_usd_per_gpu_hour"):
        gpu_days_cost_usd(8, 50, float("nan"))


def _seed_line(n: int) -> str:
    return SEED_000.read_text().split("\n")[n - 1]


@pytest.mark.skipif(not SEED_000.is_file(), reason="the seed articles are not on this machine")
def test_the_faq_runs_are_the_seed_s_own_text():
    """Seed 000, line 269: "8 GPUs for 50 days is cheaper than 1 GPU for 400 days"; line 279: "$64 x 3 days =
    $192" on a single H100. The pairs are read off the seed's sentence here, not from the library."""
    said = re.search(r"(\d+) GPUs? for (\d+) days is cheaper than (\d+) GPUs? for (\d+) days",
                     _seed_line(269))
    g1, d1, g2, d2 = (int(x) for x in said.groups())
    assert ((g1, d1), (g2, d2)) == ((8, 50), (1, 400))
    assert cost.SEED_FAQ_RUNS == ((g1, d1), (g2, d2))
    runs = cost.SEED_FAQ_RUNS
    assert isinstance(runs, tuple) and all(isinstance(x, int) for r in runs for x in r)
    with open(DATA / "seed_claims.csv", newline="") as fh:
        rows = {r["id"]: r for r in csv.DictReader(fh)}
    assert (rows["000-faq-8x50-cheaper"]["run_gpus"], rows["000-faq-8x50-cheaper"]["run_days"]) == (
        f"{g1};{g2}", f"{d1};{d2}")
    assert rows["000-faq-8x50-cheaper"]["line"] == "269"
    assert re.search(r"single H100: \$64 x 3 days = \$192", _seed_line(279))
    assert (rows["000-faq-finetune-usd"]["run_gpus"], rows["000-faq-finetune-usd"]["run_days"]) == ("1", "3")
    # the two rows whose claim names its runs' days beside a figure that is not those days; a claim OF days
    # (000-opt1-days, ...) holds them in claimed, and "12 months", "2 years" are not days: no run_days
    assert {k for k, r in rows.items() if r["run_days"]} == {"000-faq-8x50-cheaper", "000-faq-finetune-usd"}


def test_the_faq_runs_follow_the_data(tmp_path, monkeypatch):
    """SEED_FAQ_RUNS is read from data/seed_claims.csv (it was typed in cost.py): other days there, other
    pairs; a row whose days do not pair with its GPUs is refused, naming the columns."""
    text = (DATA / "seed_claims.csv").read_text()
    moved = tmp_path / "seed_claims.csv"
    moved.write_text(text.replace(",8;1,50;400,", ",8;1,60;480,"))
    monkeypatch.setattr(cost, "_SEED_CLAIMS_CSV", moved)
    cost._seed_faq_runs.cache_clear()
    try:
        assert cost.SEED_FAQ_RUNS == ((8, 60), (1, 480))
        moved.write_text(text.replace(",8;1,50;400,", ",8;1,50,"))
        cost._seed_faq_runs.cache_clear()
        with pytest.raises(ValueError, match="run_days per run_gpus"):
            cost.SEED_FAQ_RUNS
    finally:
        monkeypatch.undo()
        cost._seed_faq_runs.cache_clear()
    assert cost.SEED_FAQ_RUNS == ((8, 50), (1, 400))
    with pytest.raises(AttributeError, match="NO_SUCH_NAME"):
        cost.NO_SUCH_NAME
