"""The candidate terms of the end-to-end MFU range (llmsizing.range_candidates) and the absolute conformal
score (llmsizing.intervals, score="absolute"); issue 34."""

import math

import numpy as np
import pandas as pd
import pytest

from llmsizing import calibration as C
from llmsizing import range_candidates as R
from llmsizing.intervals import conformal_bounds, loso_check

TOY = [-0.5, -0.3, -0.2, -0.1, 0.0, 0.05, 0.1, 0.2, 0.4, 0.6]


def test_the_absolute_score_by_hand():
    # 10 sources of one row, 80%: the absolute score's level is 0.8 x 11 / 10 = 0.88 of the weight; sorted
    # |r| = 0, .05, .1, .1, .2, .2, .3, .4, .5, .6 (0.1 each) passes 0.88 at the 9th, 0.5
    assert conformal_bounds(TOY, 0.8, score="absolute") == pytest.approx((-0.5, 0.5))
    # the two tails apart: 0.9 x 11 / 10 = 0.99 -> the 10th from either end
    assert conformal_bounds(TOY, 0.8) == pytest.approx((-0.5, 0.6))


def test_the_absolute_score_weighs_sources_alike():
    # 10 sources: 9 of one row (|r| = 0, .05, .1, .1, .2, .2, .3, .4, .45; 1/10 each) and "a" of three rows
    # (|r| = .5, .6, .7; 1/30 each). The level 0.8 x 11 / 10 = 0.88 is passed at the 9th single row (0.9):
    # 0.45. Rows weighed alike (12 units): 0.8 x 13 / 12 = 0.867 of 12 rows = 10.4 -> the 11th |r|, 0.6
    r = [0.0, 0.05, -0.1, 0.1, 0.2, -0.2, -0.3, 0.4, -0.45, -0.5, 0.6, 0.7]
    src = ["b", "c", "d", "e", "f", "g", "h", "i", "j", "a", "a", "a"]
    assert conformal_bounds(r, 0.8, sources=src, score="absolute") == pytest.approx((-0.45, 0.45))
    assert conformal_bounds(r, 0.8, score="absolute") == pytest.approx((-0.6, 0.6))


def test_a_score_outside_the_list_is_refused():
    with pytest.raises(ValueError, match="score must be one of tails, absolute"):
        conformal_bounds(TOY, 0.8, score="abs")
    with pytest.raises(ValueError, match="score must be one of"):
        loso_check(np.zeros(4), list("abcd"), lambda tr, te: np.zeros(int(te.sum())), score="x")
    with pytest.raises(ValueError, match="name must be one of"):
        R.candidate_check("batch")


def test_no_candidate_is_the_production_range():
    check, _ = R.candidate_check("none")
    prod, _ = C.mfu_loso_check()
    np.testing.assert_array_equal(check.residuals, prod.residuals)
    np.testing.assert_array_equal(check.inside, prod.inside)
    stored = pd.read_csv(C.__file__.rsplit("/src/", 1)[0] + "/data/intervals.csv")
    row = stored[(stored["area"] == "training") & (stored["group"] == "all")].iloc[0]
    assert check.measured_coverage == pytest.approx(row["measured_coverage"], abs=1e-4)
    assert check.median_width == pytest.approx(row["median_width"], abs=1e-4)


def _row(df, model, n_gpus, seq):
    mine = ((df["model"] == model) & (df["n_gpus"] == n_gpus) & (df["seq"] == seq)
            & (df["kind"] == "steady-state"))
    return df.index.get_loc(df[mine].index[0])


def test_the_terms_by_hand():
    df = C._prepared(None)
    cols = R._columns(df)
    # Llama 3 405B at 16,384 GPUs, 2,048 sequences of 8,192 tokens (Dubey et al. 2024, Table 4): 1,024
    # tokens per GPU per step, a quarter of the reference 4,096
    i = _row(df, "llama-3.1-405b", 16384, 8192)
    assert cols["log_tokens_per_gpu"][i] == pytest.approx(math.log(2048 * 8192 / 16384 / 4096))
    assert cols["log_gpus"][i] == pytest.approx(math.log(16384 / 256))
    assert cols["batch_unpublished"][i] == 0
    # Llama 2 7B's whole-run total (Touvron et al. 2023) publishes neither GPU count nor batch
    j = df.index.get_loc(df[(df["model"] == "llama-2-7b") & (df["kind"] == "pretraining-total")].index[0])
    assert (cols["log_tokens_per_gpu"][j], cols["batch_unpublished"][j], cols["log_gpus"][j]) == (0, 1, 0)
    # 16 bytes per parameter (bf16 weights and grads, fp32 master and Adam) of a 405B model over 16,384
    # H100s of 81,559 MiB each (nvidia-smi's total, data/gpus.csv)
    n = df["n_params"].iloc[i]
    assert cols["state_pressure"][i] == pytest.approx(math.log(16 * n / (16384 * 81559 * 2**20)))


def test_the_terms_are_known_before_the_run():
    # what a run measured (its MFU, throughput, GPU-hours) must not reach any candidate term
    df = C._prepared(None)
    blind = df.copy()
    for c in ("implied_mfu", "tokens_per_s_per_gpu", "gpu_hours", "reported_mfu", "reported_tflops_per_gpu"):
        if c in blind:
            blind[c] = np.nan
    a, b = R._columns(df), R._columns(blind)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_every_candidate_names_terms_that_exist():
    cols = R._columns(C._prepared(None))
    for name, (terms, words) in R.CANDIDATES.items():
        assert set(terms) <= cols.keys(), name
        assert words


def test_the_table_states_each_candidate_as_its_check_measures_it():
    t = R.candidate_table(names=["none", "stack"])
    assert len(t) == 4
    for r in t.itertuples():
        check, _ = R.candidate_check(r.candidate, score=r.score)
        # over the runs calibrated in their fold: pytorch/ao's five MI300X and B200 FP8 runs are not, nor
        # its B200 BF16 run (data27) and MI300X BF16 run (data27b); its H100 BF16 run (data27b) is (hopper bf16)
        cal = check.calibrated
        assert (~cal).sum() == 7
        width = math.exp(float(np.median((check.high_log - check.low_log)[cal])))
        assert r.median_width == pytest.approx(width)
        assert r.coverage == pytest.approx(float(np.mean(check.inside[cal])))
        assert r.meets == (r.coverage >= 0.75 and r.median_width <= 1.6)


def test_choosing_among_one_term_set_is_that_set_s_check():
    # with nothing to choose, the nested choice is the fixed check: the production range
    cov, width, chosen, per_run = R.selection_check([], score="tails")
    check, _ = C.mfu_loso_check()
    assert (cov, width) == pytest.approx((check.measured_coverage, check.median_width))
    assert set(chosen.values()) == {()}
    np.testing.assert_array_equal(per_run["inside"].to_numpy(bool), check.inside)
    np.testing.assert_allclose(np.log(per_run["width"]), check.high_log - check.low_log)
    with pytest.raises(ValueError, match="groups must name term groups"):
        R.selection_check(["batch_size"])
