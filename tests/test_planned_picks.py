"""data/planned_picks.csv read back (llmsizing.planned_picks; chapter 12's paragraph on the planner's pick,
llmsizing.plan_prose_lead.pick_prose).

Every expected value is counted by hand from the file's rows with the csv module (or from a four-row table
written out below), never through the functions under test. That the file is what
step_intervals.planned_loso_check computes is tests/test_planned_range.py's (it has that check cached)."""

import csv
import math
import statistics

import pandas as pd
import pytest

from llmsizing import planned_picks as P
from llmsizing.plan_prose_lead import pick_prose
from llmsizing.prose import ProseOutOfDate

ROWS = list(csv.DictReader(open(P.PICKS_CSV, newline="")))


def _yes(r, c):
    return r[c] == "yes"


def test_the_file_has_every_layout_run_once_with_its_date_and_method():
    runs = [r["run"] for r in ROWS]
    assert len(runs) == len(set(runs)) == 118           # step_intervals.layout_runs(): 118 runs, 21 sources
    assert len({r["source"] for r in ROWS}) == 21
    assert all(r["as_of"] == P.PICKS_AS_OF and "planned_loso_check" in r["method"] for r in ROWS)
    for r in ROWS:
        if not _yes(r, "planned"):                       # no plan: no pick, no ratio, a miss
            assert r["pick"] == r["pick_mfu"] == r["ratio"] == "" and not _yes(r, "inside")
            continue
        # the file agrees with itself, to its 4 decimals (0.1% on a quotient of two): gain = pick / published
        # layout, ratio = published MFU / pick, inside iff within the bounds
        pick, step, pub = float(r["pick_mfu"]), float(r["step_mfu"]), float(r["published_mfu"])
        assert float(r["gain"]) == pytest.approx(pick / step, rel=1e-3)
        assert float(r["ratio"]) == pytest.approx(pub / pick, rel=1e-3)
        lo, hi, ratio = float(r["low"]), float(r["high"]), float(r["ratio"])
        if min(abs(ratio - lo), abs(ratio - hi)) > 1e-4:
            assert _yes(r, "inside") == (lo <= ratio <= hi), r["run"]


def test_the_summary_counted_by_hand_from_the_file():
    s = P.planned_summary()
    cal = [r for r in ROWS if _yes(r, "calibrated")]
    with_plan = [r for r in cal if _yes(r, "planned")]
    inside = sum(_yes(r, "inside") for r in cal)
    assert (s.n, s.inside) == (len(cal), inside) == (111, 97)        # plan46's report: 97 of 111
    assert s.coverage == inside / len(cal)
    assert sorted(s.no_plan) == sorted(r["run"] for r in cal if not _yes(r, "planned"))
    assert len(s.no_plan) == 2
    assert s.median_width == pytest.approx(statistics.median(float(r["high"]) / float(r["low"])
                                                             for r in with_plan), rel=1e-12)
    assert s.median_low == statistics.median(float(r["low"]) for r in with_plan)
    assert s.median_high == statistics.median(float(r["high"]) for r in with_plan)
    gains = [float(r["gain"]) for r in with_plan]
    deciles = statistics.quantiles(gains, n=10, method="inclusive")
    assert s.gain_median == pytest.approx(statistics.median(gains), rel=1e-12)
    assert (s.gain_p10, s.gain_p90) == pytest.approx((deciles[0], deciles[-1]), rel=1e-12)
    # each source's largest gain, the three largest of those, largest first; the smallest gain of all
    best = {}
    for r in with_plan:
        if r["source"] not in best or float(r["gain"]) > float(best[r["source"]]["gain"]):
            best[r["source"]] = r
    top = sorted(best.values(), key=lambda r: -float(r["gain"]))[:3]
    assert [r["run"] for r in s.largest] == [r["run"] for r in top]
    assert s.smallest["run"] == min(with_plan, key=lambda r: float(r["gain"]))["run"]
    assert s.as_of == P.PICKS_AS_OF


def _toy():
    """Four runs of two sources, worked by hand below (the columns the summary reads)."""
    rows = [  # run, source, published, pick, gain, low, high, inside, calibrated, planned
        ("a", "S1", "TP8 PP1 DP4 mb1 ZeRO-0 full", "TP1 PP1 DP32 mb2 ZeRO-3 none", 1.5, 0.5, 1.0, True, True,
         True),
        ("b", "S1", "TP4 PP1 DP8 mb1 ZeRO-1 full", "TP2 PP1 DP16 mb2 ZeRO-1 none", 1.2, 0.6, 1.5, False, True,
         True),
        ("c", "S2", "TP8 PP16 DP8 mb1 ZeRO-2 none", "TP8 PP4 DP32 mb1 ZeRO-1 full", 0.8, 0.5, 1.25, True,
         True, True),
        ("d", "S2", "TP1 PP1 DP8 mb1 ZeRO-0 none", None, math.nan, math.nan, math.nan, False, True, False),
    ]
    t = pd.DataFrame(rows, columns=["run", "source", "published", "pick", "gain", "low", "high", "inside",
                                    "calibrated", "planned"])
    for c in P.PICK_COLUMNS:
        if c not in t:
            t[c] = "x" if c != "n_gpus" else 8
    t["model"] = ["m1", "m2", "llama-3.1-405b", "m4"]
    t["as_of"] = "2026-12-04"
    return t


def test_the_summary_of_a_table_worked_by_hand():
    s = P.planned_summary(_toy(), largest=2)
    # 4 calibrated runs, 2 inside (d, without a plan, is a miss): 50%
    assert (s.n, s.inside, s.coverage, s.no_plan) == (4, 2, 0.5, ("d",))
    # widths 2, 2.5, 2.5 -> 2.5; lows 0.5, 0.6, 0.5 -> 0.5; highs 1, 1.5, 1.25 -> 1.25
    assert (s.median_width, s.median_low, s.median_high) == pytest.approx((2.5, 0.5, 1.25))
    # gains 0.8, 1.2, 1.5: median 1.2; the 10th percentile 0.8 + 0.2 * (1.2 - 0.8) = 0.88, the 90th
    # 1.2 + 0.8 * (1.5 - 1.2) = 1.44
    assert (s.gain_median, s.gain_p10, s.gain_p90) == pytest.approx((1.2, 0.88, 1.44))
    # each source's largest: S1's a (1.5), S2's c (0.8); the smallest: c
    assert [r["run"] for r in s.largest] == ["a", "c"] and s.smallest["run"] == "c"


def test_the_prose_says_what_the_file_says():
    text = pick_prose()
    s = text.data["summary"]
    cal = [r for r in ROWS if _yes(r, "calibrated")]
    assert text.values["pick_in"] == "97" and text.values["pick_n"] == "111"
    assert text.values["pick_cov"] == f"{97 / 111:.0%}" == "87%"
    assert text.values["pick_width"] == f"{s.median_width:.2f}x"
    assert float(text.values["pick_gain"].lstrip("x")) > 1          # the prose: the pick is faster
    assert text.values["pick_no_plan"] == str(sum(not _yes(r, "planned") for r in cal))
    for r in s.largest:
        assert f"x{r['gain']:.2f}" in text.values["pick_largest"]
    assert "TP8 against the pick's TP1 ZeRO-3" in text.values["pick_largest"]


def test_the_prose_check_fails_when_the_pick_is_not_faster():
    t = P.planned_picks()
    t["gain"] = t["gain"] * 0.7                          # the pick now slower than most published layouts
    with pytest.raises(ProseOutOfDate, match="faster than the layout the team ran"):
        pick_prose(t)


@pytest.mark.parametrize("old, new, claim", [(" none", " full", "recomputed nothing"),
                                              ("ZeRO-2", "ZeRO-1", "ZeRO-2 under a pipeline")])
def test_the_prose_check_fails_when_the_slowest_teams_layout_differs(old, new, claim):
    """The prose says the team furthest ahead of the pick (Meta) recomputed nothing and ran ZeRO-2 under a
    pipeline: its published layout edited either way breaks the statement."""
    t = P.planned_picks()
    slow = t.loc[t["planned"] & t["calibrated"], "gain"].idxmin()
    t.loc[slow, "published"] = t.loc[slow, "published"].replace(old, new)
    with pytest.raises(ProseOutOfDate, match=claim):
        pick_prose(t)


def test_the_slowest_pick_is_the_memory_margins():
    """The prose: Meta's 16,384-GPU layout recomputes nothing and fits the H100 (79.6 GiB) only above the
    planner's 90% usable share (chapter 12: 90% of 79.6 = 71.7 GiB), read from published_layout_fits.csv."""
    text = pick_prose()
    lo = text.data["summary"].smallest
    assert lo["run"] == "Llama 3.1 405B, 16,384 GPUs (TP8 PP16 DP128)"
    fit = [r for r in csv.DictReader(open(P.DATA_DIR / "published_layout_fits.csv", newline=""))
           if r["run"] == lo["run"]]
    assert len(fit) == 1 and fit[0]["assumed"] == "recompute none"
    assert 0.9 * 79.65 < float(fit[0]["gib_today"]) <= 79.65 == float(fit[0]["gpu_gib"])
    assert text.values["pick_slowest_share"] == "96%"                  # 76.68 / 79.65 = 0.963
    assert text.values["pick_usable"] == "90%"


def test_bad_input(tmp_path):
    with pytest.raises(TypeError, match="table must be"):
        P.planned_summary([1, 2])
    with pytest.raises(ValueError, match="table lacks the columns"):
        P.planned_summary(_toy().drop(columns="gain"))
    with pytest.raises(ValueError, match="no calibrated run with a plan"):
        P.planned_summary(_toy().assign(calibrated=False))
    with pytest.raises(TypeError, match="largest must be a whole number"):
        P.planned_summary(_toy(), largest=True)
    with pytest.raises(ValueError, match="largest must be at least 1"):
        P.planned_summary(_toy(), largest=0)
    bad = tmp_path / "p.csv"
    bad.write_text(P.PICKS_CSV.read_text().replace(",yes,", ",maybe,", 1))
    with pytest.raises(ValueError, match="must hold yes or no"):
        P.planned_picks(bad)
    bad.write_text("run,source\nx,y\n")
    with pytest.raises(ValueError, match="lacks the columns"):
        P.planned_picks(bad)


@pytest.mark.parametrize("text, parts", [
    ("TP8 PP16x8 DP128 mb1 ZeRO-2 none", {"tp": 8, "pp": 16, "zero": 2, "recompute": "none"}),
    ("TP1 PP1 DP256 mb4 ZeRO-3 full(2)", {"tp": 1, "pp": 1, "zero": 3, "recompute": "full"}),
    ("TP8 PP1 DP128 CP16 mb1 ZeRO-3 selective", {"tp": 8, "pp": 1, "zero": 3, "recompute": "selective"}),
])
def test_layout_parts(text, parts):
    assert P.layout_parts(text) == parts


@pytest.mark.parametrize("text", ["TP8 DP128", "", None, "tp=8, pp=16, dp=128"])
def test_layout_parts_refuses_other_text(text):
    with pytest.raises(ValueError, match="layout must read like"):
        P.layout_parts(text)
