"""The range of an MFU predicted from a layout (llmsizing.step_intervals; issue 34): a fold's kernel
efficiency never sees its own source, the stored coverage and width are a recount, and step_time,
run_from_step and plan() report that range."""

import csv
import math
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llmsizing import step_intervals as S
from llmsizing.layouts import step_time
from llmsizing.parallel import Parallel

ROOT = Path(__file__).resolve().parents[1]


def _stored():
    with open(ROOT / "data" / "intervals.csv", newline="") as fh:
        return {r["group"]: r for r in csv.DictReader(fh) if r["area"] == "training-layout"}


# =========================================================================== a fold by hand
def _fake():
    # four sources; A's efficiencies are far below everyone's, B has a run the production fit leaves out
    # (kernel_fit False: held out or context-parallel) at 0.99 and a run no efficiency reaches (NaN)
    return pd.DataFrame({
        "source_key": ["A", "A", "B", "B", "B", "C", "C", "D", "D"],
        "generation": ["hopper", "hopper", "hopper", "hopper", "ampere", "hopper", "ampere", "ampere",
                       "hopper"],
        "dtype": ["bf16", "bf16", "bf16", "bf16", "bf16", "bf16", "bf16", "bf16", "fp8"],
        "kernel_fit": [True, True, True, False, True, True, True, True, True],
        "kernel_efficiency": [0.10, 0.20, 0.60, 0.99, math.nan, 0.70, 0.50, 0.64, 0.30]})


def test_a_fold_excludes_its_source():
    df = _fake()
    src = df["source_key"].to_numpy(object)
    # leave A out: Hopper BF16 from B's 0.60 and C's 0.70 (B's 0.99 is not a kernel_fit run) -> 0.65; Ampere
    # BF16 from C's 0.50 and D's 0.64 (B's NaN is no run) -> 0.57; Hopper FP8 from D's 0.30
    assert S.fold_efficiencies(df, src != "A") == pytest.approx(
        {("hopper", "bf16"): 0.65, ("ampere", "bf16"): 0.57, ("hopper", "fp8"): 0.30})
    # with A: Hopper BF16 is the median of 0.10, 0.20, 0.60, 0.70 = 0.40 (A pulls it down)
    assert S.fold_efficiencies(df, src == src)[("hopper", "bf16")] == pytest.approx(0.40)
    # leave D out: no FP8 run is left, so FP8 takes the lower median of the fold's keys of any dtype
    # (Ampere BF16 0.50, Hopper BF16 median(0.1, 0.2, 0.6, 0.7) = 0.40): sorted 0.40, 0.50 -> 0.40
    eff = S.fold_efficiencies(df, src != "D")
    assert eff[("hopper", "fp8")] == pytest.approx(0.40) and eff[("ampere", "bf16")] == pytest.approx(0.50)
    # rounded to the 3 decimals of data/kernel_efficiency.csv: median(0.1234, 0.5678) = 0.3456
    two = pd.DataFrame({"source_key": ["x", "y"], "generation": ["hopper"] * 2, "dtype": ["bf16"] * 2,
                        "kernel_fit": [True, True], "kernel_efficiency": [0.1234, 0.5678]})
    assert S.fold_efficiencies(two, [True, True]) == {("hopper", "bf16"): 0.346}


def test_an_outlier_source_moves_every_prediction_but_its_own(check):
    # Narayanan et al. 2021's published MFUs x 0.8: their per-run efficiencies fall, which moves the Ampere
    # BF16 efficiency of every fold that holds them (MT-NLG's, BLOOM's, llm-foundry's), but not the fold
    # that predicts Narayanan's own runs. (``a``: the check of the published runs as they are, the module's
    # ``check``, which is step_loso_check(published_runs()).)
    from llmsizing.time_cost import published_runs

    runs = published_runs()
    mine = runs["source"].str.startswith("Narayanan et al. 2021")
    low = runs.copy()
    low.loc[mine, "implied_mfu"] *= 0.8
    _, a = check
    _, b = S.step_loso_check(low)
    own = a["source_key"] == "Narayanan et al. 2021"
    assert own.sum() == 8
    assert np.allclose(a.loc[own, "predicted_mfu"], b.loc[own, "predicted_mfu"], rtol=1e-12)
    mt = a["source_key"] == "Smith et al. 2022, MT-NLG"
    assert (b.loc[mt, "predicted_mfu"] < a.loc[mt, "predicted_mfu"] - 1e-3).all()


# =========================================================================== the stored numbers, recounted
@pytest.fixture(scope="module")
def check():
    return S.step_loso_check()


def test_the_step_model_reproduces_each_runs_efficiency(check):
    # guard against step_intervals and calibration.run_kernel_efficiency calling step_time differently: at a
    # run's own efficiency the step model gives its published MFU
    _, df = check
    for r in df[df["kernel_efficiency"].notna()].itertuples():
        assert S._mfu_at(r, r.kernel_efficiency) == pytest.approx(r.implied_mfu, rel=1e-6)


def _hand_efficiencies(df, keep):
    """Median per (generation, dtype) of the kernel_fit runs in keep, 3 decimals; else the lower median of
    the same dtype's fitted keys (written again here, apart from step_intervals)."""
    fit = {}
    for r in df[keep].itertuples():
        if r.kernel_fit and not math.isnan(r.kernel_efficiency):
            fit.setdefault((r.generation, r.dtype), []).append(r.kernel_efficiency)
    med = {k: round(statistics.median(v), 3) for k, v in fit.items()}
    out = {}
    for k in zip(df["generation"], df["dtype"]):
        same = sorted(v for kk, v in med.items() if kk[1] == k[1]) or sorted(med.values())
        out[k] = med.get(k, same[(len(same) - 1) // 2])
    return out


def _fitted_keys(df, keep):
    """The (generation, dtype) keys with a kernel_fit run in keep: the rest are priced on a stand-in, and
    their runs set no bound (issue 34, strata34)."""
    return {(r.generation, r.dtype) for r in df[keep].itertuples()
            if r.kernel_fit and not math.isnan(r.kernel_efficiency)}


def _calibrated(df):
    src = df["source_key"].to_numpy(object)
    return np.array([(r.generation, r.dtype) in _fitted_keys(df, src != r.source_key)
                     for r in df.itertuples()])


def test_one_sources_interval_by_hand(check):
    c, df = check
    src = df["source_key"].to_numpy(object)
    k = "mosaicml/llm-foundry scripts/train/benchmarking/README.md"
    keys = sorted(set(src))
    # every source with a runnable published layout, recounted from the CSV (sources are added over time, so
    # the count is the data's, not a typed number)
    from llmsizing.calibration import _layout_of
    from llmsizing.intervals import source_key
    from llmsizing.time_cost import published_runs

    expected = {source_key(r.source) for r in published_runs().itertuples() if _layout_of(r) is not None}
    assert set(keys) == expected and len(keys) >= 10 and k in expected
    # out-of-source residual of each llm-foundry run: step_time at the efficiency fitted without llm-foundry
    eff = _hand_efficiencies(df, src != k)
    rows = list(df.itertuples())
    for i in np.flatnonzero(src == k):
        pred = S._mfu_at(rows[i], eff[(rows[i].generation, rows[i].dtype)])
        assert c.residuals[i] == pytest.approx(math.log(rows[i].implied_mfu / pred), abs=1e-12)
    # its interval: with llm-foundry out, S - 1 sources remain, each weighing 1/(S - 1) over its runs; the
    # upper bound is the first residual (ascending) where the weight reaches (1 - 0.1) S / (S - 1), the lower
    # the same descending (_hand_bounds), each residual predicted by a fit without its source and llm-foundry;
    # a run whose (generation, dtype) that fit has no run of (a stand-in efficiency) sets no bound
    inner, inner_src = [], []
    for j in keys:
        if j != k:
            e2 = _hand_efficiencies(df, (src != k) & (src != j))
            fitted = _fitted_keys(df, (src != k) & (src != j))
            mine = [i for i in np.flatnonzero(src == j) if (rows[i].generation, rows[i].dtype) in fitted]
            inner += [math.log(rows[i].implied_mfu
                               / S._mfu_at(rows[i], e2[(rows[i].generation, rows[i].dtype)]))
                      for i in mine]
            inner_src += [j] * len(mine)
    lo, hi = _hand_bounds(inner, inner_src)
    # each bound leaves at most 1 - 0.9 S / (S - 1) of the weight outside it: inside the residuals' span
    assert min(inner) <= lo < hi <= max(inner)
    for i in np.flatnonzero(src == k):
        assert (c.low_log[i], c.high_log[i]) == pytest.approx((lo, hi), abs=1e-12)


def _hand_bounds(res, src):
    # source-weighted bounds at 80%, S sources: each weighs 1/S over its rows; the upper bound is the first
    # residual (ascending) where the cumulative weight reaches 0.9 (S + 1) / S; the lower the same descending
    n = len(set(src))
    count = {s: list(src).count(s) for s in set(src)}
    level = 0.9 * (n + 1) / n

    def first(order):
        cum = 0.0
        for i in order:
            cum += 1 / (n * count[src[i]])
            if cum >= level - 1e-12:
                return res[i]
        return res[order[-1]]

    up = sorted(range(len(res)), key=lambda i: res[i])
    return first(up[::-1]), first(up)


def test_stored_coverage_width_and_range_are_a_recount(check):
    c, df = check
    stored = _stored()
    dtype = df["dtype"].to_numpy(object)
    src = df["source_key"].to_numpy(object)
    cal = _calibrated(df)
    assert (cal == c.calibrated).all()
    # the stand-in runs today: pytorch/ao's MI300X and B200 FP8 runs (no calibrated FP8 run on either GPU) and,
    # since data27, its B200 BF16 run (no calibrated Blackwell BF16 run either), since data27b its MI300X BF16
    # run (no calibrated CDNA3 run); its H100 BF16 run (data27b) is calibrated by the other Hopper BF16 sources
    assert sorted(df["gpu"][~cal]) == ["B200"] * 4 + ["MI300X"] * 3
    assert sorted(dtype[~cal]) == ["bf16"] * 2 + ["fp8"] * 5
    assert stored["stand-in"]["low"] == "" and int(stored["stand-in"]["n_rows"]) == 7
    for group, mask in (("all", cal), ("bf16", cal & (dtype == "bf16")), ("fp8", cal & (dtype == "fp8")),
                        ("stand-in", ~cal)):
        row = stored[group]
        inside = [lo <= r <= hi for r, lo, hi in zip(c.residuals[mask], c.low_log[mask], c.high_log[mask])]
        assert float(row["measured_coverage"]) == pytest.approx(sum(inside) / len(inside), abs=1e-4)
        # the median of the log widths, back in x (with an even count, the geometric middle of the two)
        widths = sorted(h - lo for lo, h in zip(c.low_log[mask], c.high_log[mask]))
        assert float(row["median_width"]) == pytest.approx(math.exp(statistics.median(widths)), abs=1e-4)
        assert (int(row["n_rows"]), int(row["n_sources"])) == (int(mask.sum()), len(set(src[mask])))
        if group == "stand-in":
            continue
        # the stated range: pooled (no stratum of its own), the source-weighted bounds of every calibrated
        # run's residual
        lo, hi = _hand_bounds(list(c.residuals[cal]), list(src[cal]))
        assert (float(row["low"]), float(row["high"])) == pytest.approx((math.exp(lo), math.exp(hi)),
                                                                          abs=5e-5)
    assert float(stored["all"]["nominal_coverage"]) == 0.8


# =========================================================================== what the library reports
def test_step_time_run_from_step_and_plan_report_the_layout_range():
    from llmsizing.planner import plan
    from llmsizing.runs import run_from_step

    row = _stored()["bf16"]
    low, high = float(row["low"]), float(row["high"])
    st = step_time("llama-3-70b", "H100 SXM", Parallel(tp=8, pp=4, dp=8), batch=1, seq=8192, grad_accum=16)
    assert st.range_factors == (low, high) and st.range_area == "training-layout"
    assert st.mfu_range == pytest.approx((st.mfu * low, min(1.0, st.mfu * high)))
    r = run_from_step("llama-3-70b", st, tokens=1e12, gpu="H100 SXM", seq=8192)
    assert r.range_area == "training-layout"
    assert (r.time.mfu_low, r.time.mfu_high) == pytest.approx(st.mfu_range)
    assert r.time.days_low == pytest.approx(r.time.days / high)
    df = plan("llama-3-8b", tokens=1e11, gpus=("H100 SXM",), seq=4096, global_batch=256, max_gpus=64)
    assert df.attrs["range_area"] == "training-layout"
    assert np.allclose(df["days_low"], df["days"] / high) and np.allclose(df["days_high"], df["days"] / low)
    # the FP8 row (pooled today: the same factors)
    fp8 = _stored()["fp8"]
    st8 = step_time("llama-3-8b", "H100 SXM", Parallel(dp=8), batch=1, seq=8192, precision="fp8-mixed")
    assert st8.range_factors == (float(fp8["low"]), float(fp8["high"]))


def test_a_step_built_without_a_range_says_so():
    # a StepTime made by hand (not by step_time) has no range: NaN, not a made-up one; run_from_step then
    # reads the layout range itself
    from dataclasses import replace

    from llmsizing.runs import run_from_step

    st = step_time("llama-2-7b", "A100 80GB", None, batch=1, seq=2048)
    bare = replace(st, range_factors=None, range_area="")
    assert all(math.isnan(x) for x in bare.mfu_range)
    a = run_from_step("llama-2-7b", st, tokens=1e9, gpu="A100 80GB", seq=2048)
    b = run_from_step("llama-2-7b", bare, tokens=1e9, gpu="A100 80GB", seq=2048)
    assert (a.time.days_low, a.time.days_high) == (b.time.days_low, b.time.days_high)


# =========================================================================== bad input
@pytest.mark.parametrize("call, exc, words", [
    (lambda: S.fold_efficiencies(_fake(), [True] * 3), ValueError, "train must be one True/False per run"),
    (lambda: S.fold_efficiencies(_fake(), [False] * 9), ValueError, "no calibration run"),
    (lambda: S.step_loso_check("runs"), TypeError, "runs must be a DataFrame"),
    (lambda: S.step_loso_check(coverage=1.5), ValueError, "coverage must be in"),
    (lambda: S.step_loso_check(strata="colour"), ValueError, "strata must be a column"),
    (lambda: S.layout_runs(pd.DataFrame({"x": [1]})), ValueError, "lacks the columns"),
])
def test_bad_input(call, exc, words):
    with pytest.raises(exc, match=words.replace("(", r"\(")):
        call()


def test_runs_without_a_layout_are_refused():
    from llmsizing.time_cost import published_runs

    runs = published_runs()
    runs = runs[runs["dp"].isna()]
    with pytest.raises(ValueError, match="no run with a published layout"):
        S.step_loso_check(runs)


def test_layout_range_factors_checks_its_dtype():
    from llmsizing.mfu import layout_range_factors

    with pytest.raises(ValueError, match="dtype"):
        layout_range_factors("H100 SXM", "int4")
