"""Chapter 19's checked-runs comparison (issue 38): rl.rl_checked and rl.row_host_trip, worked by hand from
the published rows of data/rl_published.csv (read with csv) and from small frames counted here."""

import csv
import math

import pandas as pd
import pytest

from llmsizing.rl import PUBLISHED_CSV, published_rl, rl_checked, row_host_trip

LLAMA = "Llama 3.1 8B on-policy, 16 H100"


def _csv_rows():
    with open(PUBLISHED_CSV, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def pub():
    return published_rl()


def _frame(rows):
    """A published_rl-like frame: (run, checked, calibrate, as_of, step_s, low, high, ratio)."""
    cols = ["run", "checked", "calibrate", "as_of", "step_s", "low", "high", "ratio"]
    d = pd.DataFrame(rows, columns=cols)
    d["inside"] = (d["step_s"] >= d["low"]) & (d["step_s"] <= d["high"])
    return d


#: Six rows, counted by hand. Range 80..120 s everywhere; 3% over the top is 123.6 s.
#: A inside; B 123 s (2.5% above: near, a v0.4 row named without its release); C 60 s (below);
#: D 130 s (8.3% above; its as_of holds no release); E not checked; F 121.2 s (1% above, named with v0.7).
SIX = [("A", "yes", "no", "2025-10 (NeMo RL v0.4)", 100.0, 80.0, 120.0, 1.00),
       ("B", "yes", "no", "2025-10 (NeMo RL v0.4)", 123.0, 80.0, 120.0, 1.23),
       ("C", "yes", "no", "2026 (NeMo RL v0.7)", 60.0, 80.0, 120.0, 0.60),
       ("D", "yes", "yes", "2025-08-13 (verl commit 65c59c719)", 130.0, 80.0, 120.0, 1.30),
       ("E", "no", "yes", "2025-01-30", 999.0, 80.0, 120.0, 9.00),
       ("F (v0.7)", "yes", "yes", "2026 (NeMo RL v0.7)", 121.2, 80.0, 120.0, 1.01)]


def test_counts_and_ratios_of_a_frame_counted_by_hand():
    ck = rl_checked(_frame(SIX), near=0.03)
    assert (ck.n_rows, ck.inside) == (5, 1)                       # E is not checked; only A is inside
    # ratios of A, B, C, D, F sorted: 0.60, 1.00, 1.01, 1.23, 1.30
    assert (ck.ratio_median, ck.ratio_min, ck.ratio_max) == (1.01, 0.60, 1.30)
    # NeMo RL's check-only rows A, B, C: A inside, B above, C below; their ratios' median 1.00
    assert (ck.check_rows, ck.check_inside, ck.check_above, ck.check_below) == (3, 1, 1, 1)
    assert ck.check_median == 1.00
    assert (ck.fit_rows, ck.fit_inside) == (2, 0)                 # D and F, both above
    assert ck.near_runs == ("B (v0.4)", "F (v0.7)")               # D is 8.3% above: not near at 3%
    assert ck.near_sentence() == ("Two rows miss only just, by less than 3% above the slow end of the range: "
                                  "B (v0.4) and F (v0.7). They stay outside")


def test_near_share_moves_the_near_misses():
    six = _frame(SIX)
    # D at 8.3% is within 10%; its as_of names no release, so its name stays as it is
    assert rl_checked(six, near=0.10).near_runs == ("B (v0.4)", "D", "F (v0.7)")
    one = rl_checked(six, near=0.02)                               # only F's 1% is within 2% (B is 2.5%)
    assert one.near_sentence() == ("One row misses only just, by less than 2% above the slow end of the "
                                   "range: F (v0.7). It stays outside")
    none = rl_checked(six, near=0.0)
    assert none.near_runs == () and none.near_sentence() == ("No row misses only just, by less than 0% above "
                                                             "the slow end of the range")


def test_shipped_rows_counted_from_the_csv(pub):
    rows = _csv_rows()
    checked = [r for r in rows if r["checked"] == "yes"]
    ck = rl_checked(pub)
    assert ck.n_rows == len(checked)
    assert ck.check_rows == sum(r["calibrate"] == "no" for r in checked)
    assert ck.fit_rows == sum(r["calibrate"] == "yes" for r in checked)
    # every check-only row is inside, above or below its range, and nowhere else
    assert ck.check_inside + ck.check_above + ck.check_below == ck.check_rows
    assert ck.inside == ck.check_inside + ck.fit_inside
    assert ck.ratio_min <= ck.ratio_median <= ck.ratio_max
    # each near miss's name says its release: the v0.4 rows' names carry none, so it is taken from as_of
    by_run = {r["run"]: r for r in rows}
    for name in ck.near_runs:
        run = name if name in by_run else name.rsplit(" (", 1)[0]
        assert by_run[run]["checked"] == "yes" and "(v0." in name


def test_llama_row_host_trip_by_hand(pub):
    """The Llama row runs data parallel only (train_tp = cp = pp = 1 on its 16 GPUs, so dp = 16) with the
    distributed optimizer: 2 bytes of bf16 weights + 2 of gradients + 12 of optimizer states over 16 ranks =
    4.75 bytes per parameter. Counting the optimizer's bytes 4 more or fewer (16 or 8 instead of 12) moves
    4 / 16 = 0.25 of those 4.75 bytes: 1/19 of the trainer's trip. One more weight copy of the reference's
    two is half its trip. The row lies above its range by more than that 1/19, so it stays outside on
    either count."""
    r = next(x for x in _csv_rows() if x["run"] == LLAMA)
    dp = int(r["n_gpus"]) // (int(r["train_tp"]) * int(r["train_cp"]) * int(r["train_pp"]))
    assert dp == 16
    row = next(pub[pub["run"] == LLAMA].itertuples())
    ht = row_host_trip(row)
    assert ht.bytes_per_param == pytest.approx(2 + 2 + 12 / dp, rel=1e-12)
    assert ht.optimizer_count_s == pytest.approx(ht.trainer_offload_s * (4 / dp) / 4.75, rel=1e-12)
    assert ht.optimizer_count_s / ht.trainer_offload_s == pytest.approx(1 / 19, rel=1e-12)
    assert ht.third_copy_s == pytest.approx(ht.reference_offload_s / 2, rel=1e-12)
    step_s = float(r["step_s"])                                   # 97.7 s published
    assert step_s - row.high > ht.optimizer_count_s               # above by more than the count moves it
    assert ht.inside_counted == (False, False)
    assert ht.inside_third is (row.low + ht.third_copy_s <= step_s <= row.high + ht.third_copy_s)


def test_bad_inputs(pub):
    six = _frame(SIX)
    for bad in (-0.01, 1.5, math.nan):
        with pytest.raises(ValueError, match="near"):
            rl_checked(six, near=bad)
    with pytest.raises(TypeError, match="near"):
        rl_checked(six, near="3%")
    with pytest.raises(ValueError, match="no checked rows"):
        rl_checked(_frame([SIX[4]]))
    twin = _frame(SIX + [("B", "yes", "no", "2025-10 (NeMo RL v0.4)", 122.0, 80.0, 120.0, 1.22)])
    with pytest.raises(ValueError, match="same name"):
        rl_checked(twin)
    with pytest.raises(ValueError, match="calibrate"):
        rl_checked(_frame(SIX).drop(columns="calibrate"))
    row = next(pub[pub["run"] == LLAMA].itertuples())
    with pytest.raises(ValueError, match="trainer layout"):
        row_host_trip(row._replace(train_tp=math.nan))
