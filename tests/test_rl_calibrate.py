"""Issue 35: NVIDIA's NeMo / Megatron-Bridge performance-summary tables stay out of every fit, range and
calibration; NeMo RL's ``docs/about/performance-summary.md`` pages are such tables. ``data/rl_published.csv``
says which rows a fit may read (``calibrate``, with ``calibrate_why``), and every fit on it reads only those:
moving a NeMo row's published step (or split) must not move any fitted number, while moving a row a fit may
read must (so the tests can fail)."""

import pathlib
import re

import pandas as pd
import pytest

from llmsizing.rl import PUBLISHED_CSV, fit_rows, may_calibrate, published_rl, rl_interval, rl_loso
from llmsizing.rl_split import forward_split_interval, forward_splits

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _nemo_summary(df):
    # a test of the data: the rows whose source is a NeMo RL performance-summary page (a fit never matches
    # names; it reads the calibrate column)
    return df["source"].str.startswith("NeMo RL ") & df["source"].str.contains("performance-summary.md")


def test_every_nemo_performance_summary_row_says_calibrate_no_and_why():
    d = pd.read_csv(PUBLISHED_CSV)
    assert set(d["calibrate"]) == {"yes", "no"}
    nemo = _nemo_summary(d)
    assert nemo.sum() == 59 and (d.loc[nemo, "checked"] == "yes").sum() == 56
    assert (d.loc[nemo, "calibrate"] == "no").all()
    assert (d.loc[~nemo, "calibrate"] == "yes").all()
    assert d.loc[nemo, "calibrate_why"].str.contains("issue 35").all()
    assert d["calibrate_why"].notna().all()


def test_fit_rows_are_the_checked_rows_marked_yes():
    d = published_rl()
    f = fit_rows(d)
    assert len(f) == 2 and set(f["framework"]) == {"Miles (slime)", "verl"}
    assert not _nemo_summary(f).any()
    with pytest.raises(ValueError, match="calibrate"):
        fit_rows(d.drop(columns="calibrate"))
    with pytest.raises(ValueError, match="calibrate"):
        may_calibrate(d.assign(calibrate="maybe"))


def _with_made_up_sources(d):
    """The published frame plus four made-up sources a fit may read (copies of the Miles row at other
    ratios), so that rl_interval can state a range at all; only the test uses them."""
    miles = d[d["framework"] == "Miles (slime)"].iloc[[0]]
    extra = []
    for k, f in enumerate((0.8, 0.95, 1.1, 1.3)):
        r = miles.copy()
        r["source"] = f"made-up source {k} (test)"
        r["step_s"] = r["step_s"] * f
        r["ratio"] = r["ratio"] * f
        extra.append(r)
    return pd.concat([d, *extra], ignore_index=True)


def test_moving_a_nemo_row_moves_no_fit():
    d = published_rl()
    nemo = d.index[_nemo_summary(d) & (d["checked"] == "yes")]
    moved = d.copy()
    moved.loc[nemo[:10], "step_s"] *= 10.0            # ten NeMo rows ten times slower
    moved.loc[nemo[:10], "ratio"] *= 10.0
    moved.loc[nemo[-1], "ratio"] *= 0.01
    # the two-source fit (each source's factor is the other's median)
    pd.testing.assert_frame_equal(rl_loso(d)[["run", "factor", "loso_ratio", "inside_corrected"]],
                                  rl_loso(moved)[["run", "factor", "loso_ratio", "inside_corrected"]])
    # with enough sources a fit may read, the range does not move either
    assert rl_interval(published=_with_made_up_sources(d)) == rl_interval(published=_with_made_up_sources(moved))
    # ... and it does move when the same rows are marked calibrate=yes (the test can fail)
    opened = _with_made_up_sources(moved)
    opened.loc[nemo, "calibrate"] = "yes"
    assert rl_interval(published=opened) != rl_interval(published=_with_made_up_sources(d))
    # moving a row a fit may read moves the range
    miles = _with_made_up_sources(d)
    miles.loc[miles["framework"] == "verl", "ratio"] *= 3.0
    assert rl_interval(published=miles) != rl_interval(published=_with_made_up_sources(d))


def test_the_split_range_reads_no_row_marked_no():
    """No NeMo row publishes a split today; a split marked calibrate=no (here a verl row, relabelled) leaves
    the range exactly as without that row."""
    fs = forward_splits()
    assert (fs["calibrate"] == "yes").all()
    run = fs["run"].iloc[1]
    marked = fs.copy()
    marked.loc[marked["run"] == run, "calibrate"] = "no"
    marked.loc[marked["run"] == run, "ratio"] *= 5.0
    a = forward_split_interval(splits=marked)
    b = forward_split_interval(splits=fs[fs["run"] != run].reset_index(drop=True))
    assert (a.low, a.high, a.coverage, a.n_rows, a.held_out) == (b.low, b.high, b.coverage, b.n_rows, b.held_out)
    assert run not in a.held_out


def test_nothing_else_reads_the_rl_rows():
    """grep: the library's modules, tools and benchmarks that name the RL catalogue. Only the rl modules read
    it; each fit there goes through fit_rows / may_calibrate (the tests above). A new reader must be added
    here on purpose, with a test that it reads calibrate."""
    readers = set()
    for folder in ("src/llmsizing", "tools", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if re.search(r"rl_published|rl\.PUBLISHED_CSV|from \.rl import[^\n]*PUBLISHED_CSV", text):
                readers.add(path.relative_to(ROOT).as_posix())
    assert readers <= {"src/llmsizing/rl.py", "src/llmsizing/rl_split.py", "src/llmsizing/rl_phases.py",
                       "src/llmsizing/rl_generation.py", "src/llmsizing/rl_prose.py"}, readers
    # chapter 19's sentences (rl_prose, moved out of the notebook) quote rows and compare; they fit nothing
    prose = (ROOT / "src/llmsizing/rl_prose.py").read_text(encoding="utf-8")
    assert not re.search(r"\bfit_rows\(|may_calibrate\(|lstsq|polyfit|curve_fit|\.fit\(", prose)
    for name in ("rl_phases.py", "rl_generation.py"):      # named in their docstrings only
        text = (ROOT / "src/llmsizing" / name).read_text(encoding="utf-8")
        assert "PUBLISHED_CSV" not in text and "read_csv" not in text
