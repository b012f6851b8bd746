"""Session 38's pre-registered candidates for the training ranges (llmsizing.range_candidates.PREREGISTERED38,
issue 34): the attention share by hand, the level-by-level strata by hand, and the check reproducing both
stated ranges when no candidate is added (so that what it measured for each candidate is measured as
tools/calibrate.py measures the ranges)."""

import csv
from pathlib import Path

import numpy as np
import pytest

from llmsizing import range_candidates as R
from llmsizing.flops import attention_flops_share
from llmsizing.intervals import conformal_bounds

ROOT = Path(__file__).resolve().parents[1]

# Llama 3 8B (Meta's config.json): 32 layers, 32 heads of 128, hidden 4,096, vocab 128,256 (untied),
# 8,030,261,248 parameters. Matmul weights: 8,030,261,248 - 128,256 x 4,096 (the input embedding, a lookup)
# = 7,504,924,672, 2 FLOPs each forward; the attention core per token, forward: 4 x seq x 32 x 128 x 32
# (QK^T and attn @ V over the full matrix). The backward's x 3 is on both sides of the share.
_MATMUL_FWD = 2 * 7_504_924_672


def _share_by_hand(seq):
    attention_fwd = 4 * seq * 32 * 128 * 32
    return attention_fwd / (_MATMUL_FWD + attention_fwd)


def test_attention_flops_share_by_hand():
    # 8,192 tokens: 4,294,967,296 / (15,009,849,344 + 4,294,967,296) = 0.22248; 4,096 tokens: 0.12516
    assert attention_flops_share("llama-3-8b", seq=8192) == pytest.approx(0.222482, abs=1e-6)
    assert attention_flops_share("llama-3-8b", seq=4096) == pytest.approx(_share_by_hand(4096), rel=1e-12)
    assert _share_by_hand(4096) == pytest.approx(0.125164, abs=1e-6)
    with pytest.raises(ValueError, match="seq"):
        attention_flops_share("llama-3-8b", seq=0)


def test_level_bounds_fall_back_by_hand():
    # ten sources of one row each, residuals -0.5 ... 0.6; nine labelled "x" at the fine level, one "y"
    r = np.array([-0.5, -0.3, -0.2, -0.1, 0.0, 0.05, 0.1, 0.2, 0.4, 0.6])
    src = np.array(list("abcdefghij"), dtype=object)
    fine = np.array(["x"] * 9 + ["y"], dtype=object)
    coarse = np.array(["all"] * 10, dtype=object)
    # "x" has 9 sources (min_units at 80%): its own two-tailed bounds, level 0.9 x 10 / 9 = 1: its extremes
    assert R._level_bounds(r, src, [fine, coarse], ["x", "all"], 0.8, "tails") == pytest.approx((-0.5, 0.4))
    # "y" has one: the coarse level's (10 sources, level 0.9 x 11 / 10 = 0.99: the 10th from either end)
    assert R._level_bounds(r, src, [fine, coarse], ["y", "all"], 0.8, "tails") == pytest.approx((-0.5, 0.6))
    # a coarse label no row has: pooled, the same here
    assert R._level_bounds(r, src, [fine, coarse], ["y", "z"], 0.8, "tails") == pytest.approx(
        conformal_bounds(r, 0.8, src))


def _stored(area):
    with open(ROOT / "data" / "intervals.csv", newline="") as fh:
        return {r["group"]: r for r in csv.DictReader(fh) if r["area"] == area}


@pytest.mark.parametrize("procedure, area", [("E", "training"), ("I", "training-inputs")])
def test_with_no_candidate_the_check_is_the_stated_ranges(procedure, area):
    cov, width, per_run = R.candidate38_check("none", procedure)
    stored = _stored(area)["all"]
    assert cov == pytest.approx(float(stored["measured_coverage"]), abs=1e-4)
    assert width == pytest.approx(float(stored["median_width"]), abs=1e-4)
    assert int(per_run["calibrated"].sum()) == int(stored["n_rows"])


def test_the_training_run_flag_reads_what_the_figure_measures():
    from llmsizing import calibration as C

    df = C._prepared(None)
    flag = R._columns38(df)["training_run"]
    # every whole-run total is a training run; a framework's benchmark page is not; a model's paper is
    assert (flag[(df["kind"] == "pretraining-total").to_numpy()] == 1).all()
    assert (flag[df["source_key"].str.startswith("mosaicml/llm-foundry").to_numpy()] == 0).all()
    assert (flag[(df["source_key"] == "Smith et al. 2022, MT-NLG").to_numpy()] == 1).all()
    assert set(R.TRAINING_RUN_SOURCES) <= set(df["source_key"])      # no name that matches nothing


@pytest.mark.parametrize("name, procedure, words", [
    ("nope", "E", "name must be"), ("none", "X", "procedure must be"),
    ("training_run+stack_strata", "I", "at most one"),
])
def test_bad_names_are_refused(name, procedure, words):
    with pytest.raises(ValueError, match=words):
        R.candidate38_check(name, procedure)
