"""Chapter 10's sections (llmsizing.time_prose, issue 38: the notebook's long cells moved to the library).
Expected values are worked by hand from the book's stated goal and Hoffmann et al. 2022, not copied from the
code's output."""

import math

import pytest

from llmsizing import time_prose as tp
from llmsizing.prose import ChapterText


def test_the_rule_of_thumb_by_hand():
    # C = 6 N D with D = 20 N: C = 120 N^2. Gopher's budget, 5.76e23 FLOPs: N = sqrt(4.8e21) = 69.3B
    assert tp.chinchilla_rule_n(5.76e23) == pytest.approx(69.28e9, rel=1e-3)
    assert tp.chinchilla_rule_n(1.2e23) == pytest.approx(math.sqrt(1e21), rel=1e-12)
    n = tp.chinchilla_rule_n(3e24)
    assert 6 * n * (20 * n) == pytest.approx(3e24, rel=1e-12)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "1e23"])
def test_the_rule_of_thumb_refuses_a_budget_that_is_not_one(bad):
    with pytest.raises(ValueError, match="flops"):
        tp.chinchilla_rule_n(bad)


def test_the_bands_table_states_the_books_goal():
    """The book's goal for a training range: at least 75% of the runs inside out of source at a median width
    of at most 1.6 times (chapter 10); the four bands, one row each."""
    b = tp.bands_prose()
    assert isinstance(b, ChapterText)
    assert b.values["bar"] == "75% of the runs inside out of source at a median width of at most 1.6 times"
    rows = b.report.splitlines()
    assert len(rows) == 1 + 4 and rows[0].split()[:2] == ["band", "what"]
    names = ("the estimate", "baseline", "layout", "layout + stack")
    assert all(r.startswith(f"{n} ") for r, n in zip(rows[1:], names))


def test_the_seed_figures_are_the_seeds():
    """The seed's own figures (data/seed_claims.csv, from the seed's text): 8 A100s train Llama-2-70B on 1T
    tokens in its quoted days; the hours 1T tokens take at its quoted A100 rate on 8 GPUs."""
    from llmsizing import get_gpu

    v = tp.seed_prose(get_gpu("H100 SXM"), get_gpu("A100 80GB")).values
    rate = float(v["seed_tps_a100"].replace(",", ""))
    assert v["seed_hours"] == f"{1e12 / (8 * rate) / 3600:,.0f}"        # tokens / (tokens/s) / (s/hour)
    assert v["seed_cost_8x"] == f"${8 * float(v['seed_cost'].lstrip('$').replace(',', '')):,.0f}"
    # the days' range is the MFU's on Ampere (data/intervals.csv, training-inputs, ampere: x0.7456 to x1.3412):
    # days scale as 1 / MFU, so 3,672 days -> 3,672/1.3412 = 2,738 and 3,672/0.7456 = 4,925, to a day
    import csv
    from llmsizing.catalog import DATA_DIR
    row = next(r for r in csv.DictReader(open(DATA_DIR / "intervals.csv"))
               if (r["area"], r["group"]) == ("training-inputs", "ampere"))
    days = float(v["8a100_days"].replace(",", ""))
    lo, hi = (float(x.replace(",", "")) for x in v["8a100_range"].split(" to "))
    assert abs(lo - days / float(row["high"])) <= 1 and abs(hi - days / float(row["low"])) <= 1


def test_the_runs_left_out_refuse_a_coverage_the_table_does_not_count():
    """loso_prose checks the FP8 coverage the prose quotes (intervals.csv's row) against its own count of the
    calibrated FP8 runs inside their folds: a coverage no count of them gives stops the chapter."""
    from llmsizing.prose import ProseOutOfDate

    with pytest.raises(ProseOutOfDate, match="fp8 row"):
        tp.loso_prose("101%")
