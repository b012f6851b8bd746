"""Leave-one-source-out prediction intervals (llmsizing.intervals; issue 34): the conformal bounds by hand,
the check's folds really leave their source out, and what data/ states is what the check measures."""

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from llmsizing import intervals as I

ROOT = Path(__file__).resolve().parents[1]


# =========================================================================== the bounds, by hand
def test_conformal_bounds_by_rank():
    # 19 residuals 1..19 at 80%: alpha/2 = 0.1, lower rank floor(20 x 0.1) = 2, upper rank ceil(20 x 0.9) = 18
    assert I.conformal_bounds(list(range(1, 20)), 0.8) == (2.0, 18.0)
    # 9 residuals: ranks floor(10 x 0.1) = 1 and ceil(10 x 0.9) = 9, the extremes; 8 are too few
    assert I.conformal_bounds([5, 3, 9, 1, 7, 2, 8, 4, 6], 0.8) == (1.0, 9.0)
    with pytest.raises(ValueError, match="at least 9"):
        I.conformal_bounds(range(8), 0.8)
    # 90%: ranks floor(20 x 0.05) = 1 and ceil(20 x 0.95) = 19
    assert I.conformal_bounds(list(range(1, 20)), 0.9) == (1.0, 19.0)
    assert (I.min_units(0.8), I.min_units(0.9)) == (9, 19)          # (2 - alpha) / alpha


def test_each_source_weighs_one_draw():
    # 19 one-row sources with residuals 1..19 and one source with five rows at 100: S = 20 sources of weight
    # 1/20 each (the five rows share theirs). The upper bound is the first residual where the weighted share
    # reaches 0.9 x 21/20 = 0.945: k/20 >= 0.945 at k = 19. From below: the 100s hold 1/20, then 19, 18, ...:
    # (21 - k)/20 >= 0.945 at k = 2. Counted by row (n = 24) the upper rank is ceil(25 x 0.9) = 23: a 100.
    r = list(range(1, 20)) + [100] * 5
    src = [f"s{i}" for i in range(1, 20)] + ["big"] * 5
    assert I.conformal_bounds(r, 0.8, src) == (2.0, 19.0)
    assert I.conformal_bounds(r, 0.8) == (2.0, 100.0)
    with pytest.raises(ValueError, match="8 sources"):
        I.conformal_bounds(range(20), 0.8, [i % 8 for i in range(20)])


def test_loso_interval_api():
    # what serving calls: {source: out-of-source log residuals}; ten sources with one residual each, the
    # textbook ranks 1 and 10 of ceil(11 x 0.9) = 10
    by_source = {f"paper {i}": [math.log(1 + i / 10)] for i in range(10)}
    iv = I.loso_interval(by_source, 0.8)
    assert (iv.low, iv.high) == pytest.approx((1.0, 1.9))
    assert iv.width == pytest.approx(1.9) and (iv.n_rows, iv.n_sources, iv.coverage) == (10, 10, 0.8)
    rows = I.loso_interval({"a": [0.0, 0.1], "b": [0.2] * 8}, 0.8, unit="row")
    assert (math.log(rows.low), math.log(rows.high)) == pytest.approx((0.0, 0.2))


@pytest.mark.parametrize("call, exc, words", [
    (lambda: I.conformal_bounds([1.0] * 10, 1.0), ValueError, "coverage must be in (0, 1)"),
    (lambda: I.conformal_bounds([1.0] * 10, True), TypeError, "coverage must be a number"),
    (lambda: I.conformal_bounds([1.0] * 9 + [math.nan], 0.8), ValueError, "finite"),
    (lambda: I.conformal_bounds("abc", 0.8), TypeError, "log_residuals must be a sequence of numbers"),
    (lambda: I.conformal_bounds([1.0] * 10, 0.8, ["a"] * 9), ValueError, "one entry per row"),
    (lambda: I.loso_interval([1, 2], 0.8), TypeError, "must be a mapping"),
    (lambda: I.loso_interval({"a": [1.0] * 20}, 0.8), ValueError, "at least 2 sources"),
    (lambda: I.loso_interval({"a": [1.0] * 20, "b": []}, 0.8), ValueError, "no residual"),
    (lambda: I.loso_interval({"a": [1.0], "b": [2.0]}, 0.8, unit="paper"), ValueError, "unit must be"),
    (lambda: I.source_key(3), TypeError, "source must be a string"),
    (lambda: I.source_key(" (no name)"), ValueError, "source must name"),
    (lambda: I.loso_check([0.0] * 4, ["a", "a", "b", "b"], lambda tr, te: [0.0] * te.sum()), ValueError,
     "at least 3 sources"),
    (lambda: I.loso_check([0.0] * 3, ["a", "b", "c"], "mean"), TypeError, "fit_predict must be a function"),
    (lambda: I.loso_check([0.0] * 6, list("aabbcc"), lambda tr, te: [0.0]), ValueError,
     "1 predictions for 2 test rows"),
    (lambda: I.loso_check([0.0] * 6, list("aabbcc"), lambda tr, te: [0.0] * te.sum()), ValueError,
     "need at least 9"),
])
def test_bad_inputs_raise(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    assert words in str(info.value)


def test_source_key_keeps_the_paper_and_drops_the_details():
    assert I.source_key("Narayanan et al. 2021 (arXiv:2104.04473), Table 1 (weak scaling)") == \
        "Narayanan et al. 2021"
    assert I.source_key("NVIDIA/Megatron-LM README.md (commit 841f789f)") == "NVIDIA/Megatron-LM README.md"


# =========================================================================== the folds leave their source out
def _synthetic(outlier: float):
    """Ten sources of two rows each around 0, source "x" far above; the model predicts the training rows'
    mean."""
    src = np.array([f"s{i}" for i in range(9) for _ in range(2)] + ["x", "x"], dtype=object)
    y = np.array([(-1) ** i * 0.05 * (i % 7) for i in range(18)] + [outlier, outlier + 0.1])
    calls = []

    def fit_predict(train, test):
        assert not (train & test).any()                       # never fitted on a row it predicts
        assert set(src[test]).isdisjoint(src[train])           # nor on any row of the sources it predicts
        calls.append(frozenset(src[~train]))
        return np.full(int(test.sum()), y[train].mean())

    return y, src, fit_predict, calls


def test_a_source_is_predicted_without_itself():
    y1, src, fp1, _ = _synthetic(10.0)
    y2, _, fp2, _ = _synthetic(20.0)
    r1, r2 = I.loso_residuals(y1, src, fp1), I.loso_residuals(y2, src, fp2)
    x = src == "x"
    # x's prediction (y - residual) does not move with x's own value; every other source's does
    assert np.allclose((y1 - r1)[x], (y2 - r2)[x])
    assert not np.isclose((y1 - r1)[~x], (y2 - r2)[~x]).any()


def test_nested_check_judges_each_source_by_an_interval_made_without_it():
    y1, src, fp1, calls = _synthetic(10.0)
    c1 = I.loso_check(y1, src, fp1)
    y2, _, fp2, _ = _synthetic(20.0)
    c2 = I.loso_check(y2, src, fp2)
    x = src == "x"
    # 10 outer folds and 10 x 9 inner ones, each leaving out one or two sources
    assert len(calls) == 10 + 90 and {len(c) for c in calls} == {1, 2}
    # x's interval is made without x: it does not move with x's value; the others' intervals (which hold x's
    # residual, an extreme at the upper rank of 10 sources) do
    assert np.allclose(c1.low_log[x], c2.low_log[x]) and np.allclose(c1.high_log[x], c2.high_log[x])
    assert (c2.high_log[~x] > c1.high_log[~x] + 5).all()
    assert not c1.inside[x].any()                              # x lies far above what the others allow
    assert c1.measured_coverage == pytest.approx(c1.inside.mean())


# ======================================================================= data/ states what the check measures
def _stored():
    with open(ROOT / "data" / "intervals.csv", newline="") as fh:
        return {(r["area"], r["group"]): r for r in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def training_check():
    from llmsizing.calibration import mfu_loso_check

    return mfu_loso_check()


def _calibrated_by_hand(df, fits):
    """Per run: whether a calibration run of another source (``fits``: the rows a fit learns from) has its
    (generation, dtype): the runs whose prediction in their fold is not a stand-in (issue 34)."""
    keys = list(zip(df["generation"], df["dtype"]))
    src = list(df["source_key"])
    return np.array([any(fits[j] and keys[j] == keys[i] and src[j] != src[i] for j in range(len(df)))
                     for i in range(len(df))])


def test_training_coverage_and_width_stored_are_measured(training_check):
    check, df = training_check
    stored = _stored()
    total = (df["kind"] == "pretraining-total").to_numpy()
    cal = _calibrated_by_hand(df, df["calibration"].astype(bool).to_numpy())
    assert (check.calibrated == cal).all()
    # the stand-in runs today: pytorch/ao's MI300X and B200 FP8 rows (no calibrated FP8 run on either) and,
    # since data27, its BF16 B200 row (no calibrated Blackwell BF16 run either), and since data27b its BF16
    # MI300X row (no calibrated CDNA3 run at all): 4 B200s, 3 MI300Xs. Its BF16 H100 row (data27b) is not one:
    # Hopper BF16 is calibrated by other sources, so that row counts in the coverage
    assert sorted(df["gpu"][~cal]) == ["B200"] * 4 + ["MI300X"] * 3
    assert sorted(df["dtype"][~cal & (df["gpu"] == "B200").to_numpy()]) == ["bf16", "fp8", "fp8", "fp8"]
    assert sorted(df["dtype"][~cal & (df["gpu"] == "MI300X").to_numpy()]) == ["bf16", "fp8", "fp8"]
    groups = (("all", cal), ("steady-state", ~total & cal), ("pretraining-total", total & cal),
              ("stand-in", ~cal))
    assert stored[("training", "stand-in")]["low"] == ""      # one source: no conformal range of its own
    for group, mask in groups:
        row = stored[("training", group)]
        # coverage: the share of runs inside the interval made without their source, counted here
        inside = [lo <= r <= hi for r, lo, hi in zip(check.residuals[mask], check.low_log[mask],
                                                     check.high_log[mask])]
        assert float(row["measured_coverage"]) == pytest.approx(sum(inside) / len(inside), abs=1e-4)
        widths = sorted(math.exp(h - lo) for lo, h in zip(check.low_log[mask], check.high_log[mask]))
        n = len(widths)
        # the median of a ratio, taken on its log: with an even count, the geometric mean of the middle two
        median = math.sqrt(widths[(n - 1) // 2] * widths[n // 2])
        assert float(row["median_width"]) == pytest.approx(median, abs=1e-4)
        assert int(row["n_rows"]) == mask.sum()
        assert int(row["n_sources"]) == len(set(df["source_key"][mask]))
        assert float(row["nominal_coverage"]) == 0.8
    # issue 34's done-when for training coverage: at least 75% of runs inside the range made without them
    assert float(stored[("training", "all")]["measured_coverage"]) >= 0.75


def test_mfu_model_ranges_are_the_stated_bounds(training_check):
    check, _ = training_check
    with open(ROOT / "data" / "mfu_model.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    steady = [math.exp(b) for b in check.bounds["steady-state"]]
    whole = [math.exp(b) for b in check.bounds.get("pretraining-total", check.bounds[None])]
    for r in rows:        # rounded outwards to 4 decimals, and never excluding the central estimate
        assert float(r["low"]) == math.floor(min(steady[0], 1) * 1e4) / 1e4
        assert float(r["high"]) == math.ceil(max(steady[1], 1) * 1e4) / 1e4
        assert float(r["low_whole_run"]) == math.floor(min(whole[0], 1) * 1e4) / 1e4
        assert float(r["high_whole_run"]) == math.ceil(max(whole[1], 1) * 1e4) / 1e4


def test_training_folds_leave_whole_sources_out(training_check):
    # every source is one paper or benchmark: Narayanan et al.'s nine runs are one, llm-foundry's 13 one
    _, df = training_check
    counts = df["source_key"].value_counts()
    assert counts["Narayanan et al. 2021"] == 9
    assert counts["mosaicml/llm-foundry scripts/train/benchmarking/README.md"] == 13
    assert len(counts) == int(_stored()[("training", "all")]["n_sources"])


def _ranks_by_hand(values):
    """The 80% split-conformal pair with every value its own unit: ranks floor((n + 1) 0.1) and
    ceil((n + 1) 0.9) of the sorted values (1-based)."""
    v = sorted(values)
    n = len(v)
    return v[math.floor(round((n + 1) * 0.1, 9)) - 1], v[math.ceil(round((n + 1) * 0.9, 9)) - 1]


def test_finetuning_coverage_stored_is_measured():
    """The fine-tuning row of data/intervals.csv recomputed without llmsizing.intervals: three sources or
    more, so the check is nested (rows weigh alike, whatever the count). For each held-out source k, every
    other source j is predicted by constants fitted on the rows of neither k nor j; k's rows are inside when
    their residual (constants fitted without k) lies between the ranks of those residuals."""
    import pandas as pd

    from llmsizing import finetune_time as ft

    df = pd.read_csv(ROOT / "data" / "finetune_published.csv")
    rows = df[df["known_out"].isna()].reset_index(drop=True)
    key = rows["source"].map(lambda s: s.split(" (")[0])
    sources = list(dict.fromkeys(key))
    assert len(sources) >= 3
    fits = {}

    def resid(train_out, test_src):
        out = frozenset(train_out)
        if out not in fits:
            fits[out] = ft._fit_on(rows[~key.isin(out)], refine=True)
        o, f = fits[out]
        test = rows[key == test_src]
        return [math.log(r.s_per_step / ft._predict(r, layer_overhead_s=o, dequant_bandwidth_fraction=f))
                for r in test.itertuples()]

    inside, widths, outer = 0, [], []
    for k in sources:
        inner = [x for j in sources if j != k for x in resid({k, j}, j)]
        lo, hi = _ranks_by_hand(inner)
        mine = resid({k}, k)
        outer += mine
        inside += sum(lo - 1e-12 <= x <= hi + 1e-12 for x in mine)
        widths += [math.exp(hi - lo)] * len(mine)
    row = _stored()[("fine-tuning", "all")]
    assert (int(row["n_rows"]), int(row["n_sources"])) == (len(rows), len(sources))
    assert float(row["measured_coverage"]) == pytest.approx(inside / len(rows), abs=1e-4)
    assert float(row["median_width"]) == pytest.approx(float(np.median(widths)), abs=1e-4)
    # the stated range: the same ranks over every source's out-of-source residual, rounded outwards
    lo, hi = _ranks_by_hand(outer)
    assert ft.RESIDUAL_RANGE == (math.floor(min(math.exp(lo), 1) * 100) / 100,
                                 math.ceil(max(math.exp(hi), 1) * 100) / 100)


def test_finetuning_by_source_check_needs_a_tenth_source():
    """Bounds that weigh sources alike need 9 sources at 80% (the smallest S with 0.9 (S + 1) / S <= 1), and
    the nested check bounds a held-out source with the others alone: S - 1 of them. With the table's 9
    sources (counted here by hand) unit="source" refuses, naming the 8 a fold has; from 10 sources it runs,
    and its coverage is a share of the rows. A unit other than row or source is refused by name."""
    import pandas as pd

    from llmsizing import finetune_time as ft

    df = pd.read_csv(ROOT / "data" / "finetune_published.csv")
    n_sources = df.loc[df["known_out"].isna(), "source"].map(lambda s: s.split(" (")[0]).nunique()
    assert (0.9 * (8 + 1) / 8 <= 1, 0.9 * (9 + 1) / 9 <= 1) == (False, True)
    if n_sources <= 9:
        with pytest.raises(ValueError, match=f"come from {n_sources - 1} sources"):
            ft.finetune_loso_check(unit="source")
    else:
        check, rows = ft.finetune_loso_check(unit="source")
        assert len(check.inside) == len(rows) and 0 < check.inside.mean() <= 1
    with pytest.raises(ValueError, match="unit must be one of"):
        ft.finetune_loso_check(unit="sources")


def test_the_old_group_minimum_is_retired_with_a_warning():
    from llmsizing import calibration as C

    with pytest.warns(DeprecationWarning, match="MIN_GROUP_RUNS is retired"):
        assert C.MIN_GROUP_RUNS == 4


def test_sources_outside_each_bound_by_hand():
    # 80%: alpha/2 = 0.1; the bound is where the weighted share reaches 0.9 (S + 1) / S, so S - 0.9 (S + 1)
    # sources' weight lies beyond it: 9 sources -> 9 - 9.0 = 0 (the extremes), 10 -> 10 - 9.9 = 0.1,
    # 19 -> 19 - 18.0 = 1 (one whole source may stray), 5 -> below zero, so 0
    assert I.sources_outside(9) == pytest.approx(0.0, abs=1e-12)
    assert I.sources_outside(10) == pytest.approx(0.1)
    assert I.sources_outside(19) == pytest.approx(1.0)
    assert I.sources_outside(5) == 0.0
    # 90%: alpha/2 = 0.05; 39 - 0.95 x 40 = 1
    assert I.sources_outside(39, 0.9) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="n_sources"):
        I.sources_outside(0)


def test_coverage_note_says_the_row_in_words():
    """The words an estimate states with its range are the row of data/intervals.csv, counted back to runs:
    measured coverage x runs, and the sources; a row that is not there is refused, naming the tool."""
    with open(Path(__file__).resolve().parents[1] / "data" / "intervals.csv", newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if (r["area"], r["group"]) == ("training", "steady-state"))
    n = int(row["n_rows"])
    held = round(float(row["measured_coverage"]) * n)
    assert abs(held / n - float(row["measured_coverage"])) < 1e-4           # a whole count of runs
    assert I.coverage_note("training", "steady-state", "steady states") == (
        f"80% range; out of source it held {held} of {n} steady states ({row['n_sources']} sources), "
        f"{float(row['median_width']):.2f}x wide at the median")
    with pytest.raises(ValueError, match="tools/calibrate.py"):
        I.coverage_note("training", "fp4", "FP4 runs")


def test_only_a_calibrated_range_states_a_coverage():
    from llmsizing.time_cost import training_time

    kw = dict(tokens=1e12, gpu="H100 SXM", n_gpus=64, seq=8192)
    assert "Hopper runs" in training_time("llama-3-70b", **kw).range_note          # the generation's range
    assert "whole-run totals" in training_time("llama-3-70b", whole_run=True, **kw).range_note
    assert training_time("llama-3-70b", mfu=0.4, **kw).range_note == ""
    assert training_time("llama-3-70b", mfu_range=(0.2, 0.6), **kw).range_note == ""   # the caller's range


def test_a_whole_run_with_the_inputs_states_the_whole_run_totals_count():
    """A whole-run estimate with tokens_per_step states the inputs model's whole-run totals' coverage, not
    its GPU generation's. By hand from data/intervals.csv (2026-11-30): training-inputs,pretraining-total
    held 0.7895 x 19 = 15 of 19 runs from 10 sources (median width 1.8637; 1.6413 before rows31 added the
    InternLM and MaxText sources; 11 of 15 from 6 sources before whole34 added BLOOM's, GLM-130B's, SmolLM3's
    and BloombergGPT's totals), below the hopper row's 0.8571 x 63 = 54 of 63 from 17 sources (1.9822; 47 of
    58 from 16 at 1.9129 before rows31's five MaxText H100 rows; 46 of 57 before data27b added pytorch/ao's
    BF16 H100 row, held out and inside its fold's range; 47 of 56 before SmolLM3; 44 of 51 before issue 34's
    FP8 sources of Dec 2026), which a steady-state estimate on an H100 with the same inputs states."""
    from llmsizing.time_cost import mfu_estimate

    kw = dict(gpu="H100 SXM", seq=8192, n_gpus=1024, tokens_per_step=16 * 2**20, framework="megatron-core")
    assert mfu_estimate("llama-3-70b", whole_run=True, **kw).range_note == (
        "80% range; out of source it held 15 of 19 whole-run totals (10 sources), 1.86x wide at the median")
    assert mfu_estimate("llama-3-70b", **kw).range_note == (
        "80% range; out of source it held 54 of 63 Hopper runs (17 sources), 1.98x wide at the median")


def test_a_generation_with_no_run_says_none_was_among_the_measured_runs():
    """data/mfu_inputs_model.csv calibrates three rows (ampere bf16, hopper bf16, hopper fp8). Any other generation
    and dtype is priced on a stand-in intercept, so no calibrated range applies to it, and the note says so
    first (issue 34). An L40S in FP8 (Ada) has no published run at all. MI300X and B200 in FP8 have
    pytorch/ao's held-out runs (Llama 3 8B on 8 GPUs), and in BF16 one BF16 row each (the same README tables'
    baselines, added by data27 for the B200 and data27b for the MI300X): the note states where they sit against
    this very estimate,
    recounted here from their implied MFU over mfu_estimate of each run, and that the calibrated range held
    none of them. An H100 is calibrated, so its note is the coverage alone."""
    from llmsizing.time_cost import mfu_estimate, published_runs

    from llmsizing.frameworks import stack_family

    runs = published_runs()
    for gpu, gen in (("MI300X", "CDNA 3"), ("B200", "Blackwell")):       # by the vendors' names (s49)
        mine = runs[(runs["gpu"] == gpu) & (runs["dtype"] == "fp8")]
        # each run estimated with its own published stack and batch, as the fit reads it
        ratios = [r.implied_mfu / mfu_estimate(r.model, gpu=gpu, seq=int(r.seq), dtype="fp8", n_gpus=int(r.n_gpus),
                                               framework=stack_family(r.framework, lenient=True),
                                               tokens_per_step=r.global_batch * r.seq).mfu
                  for r in mine.itertuples()]
        note = mfu_estimate("llama-3-8b", gpu=gpu, seq=8192, precision="fp8-mixed").range_note
        assert note.startswith(
            f"no calibrated range applies: no {gen} FP8 run calibrates it; the {len(mine)} published {gen} "
            f"FP8 runs (1 source) sit at {min(ratios):.2f}-{max(ratios):.2f} of this estimate, 0 of them "
            "inside the calibrated range (the band shown is the calibrated cells': 80% range;")
    assert mfu_estimate("llama-3-8b", gpu="MI300X", seq=8192, precision="fp8-mixed").range_note.startswith(
        "no calibrated range applies: no CDNA 3 FP8 run calibrates it; the 2 published CDNA 3 FP8 runs (1 "
        "source) sit at 0.55-0.57 of this estimate")           # pytorch/ao's MI300X rows: 0.1305 and 0.1366
    # implied over 0.2376 estimated = 0.549, 0.575 (0.529, 0.554 over 0.2466 before rows31's refit; 0.542,
    # 0.567 before whole34's refit moved the stack offsets)
    # B200 and MI300X in BF16: pytorch/ao's one BF16 row each (data27: 8,307.5 tokens/s, implied 0.2138, see
    # test_published_b200_bf16.py; data27b: 5,376.5 tokens/s on MI300X, see test_published_h100_mi300x_bf16.py),
    # each over its own estimate (the torchtitan stack, 8 sequences of 8,192 on 8 GPUs), recounted here
    for gpu, gen in (("B200", "Blackwell"), ("MI300X", "CDNA 3")):
        bf = runs[(runs["gpu"] == gpu) & (runs["dtype"] == "bf16")]
        assert len(bf) == 1
        r = next(bf.itertuples())
        ratio = r.implied_mfu / mfu_estimate(r.model, gpu=gpu, seq=int(r.seq), n_gpus=int(r.n_gpus),
                                             framework=stack_family(r.framework, lenient=True),
                                             tokens_per_step=r.global_batch * r.seq).mfu
        # the calibrated cells' band: training-inputs,all 0.8429 x 140 = 118 of 140 from 33 sources, 1.8637
        # (107 of 124 from 31, 1.6413, before rows31's InternLM and MaxText rows; 106 of 123 before data27b's
        # H100 BF16 row, inside its fold's range) and batch:unpublished 0.8636 x 22 = 19 of 22, 1.8637 (18 of
        # 22, 1.6305, before rows31)
        assert mfu_estimate("llama-3-8b", gpu=gpu, seq=8192).range_note == (
            f"no calibrated range applies: no {gen} 16-bit run calibrates it; the 1 published {gen} 16-bit "
            f"run (1 source) sits at {ratio:.2f} of this estimate, outside the calibrated range (the band shown "
            "is the calibrated cells': 80% range; out of source it held 118 of 140 published runs (33 sources), "
            "1.86x wide at the median; and 19 of 22 runs without a published batch, estimated as this one "
            "(9 sources), 1.86x wide at the median)")
    assert mfu_estimate("llama-3-8b", gpu="L40S", seq=8192, precision="fp8-mixed").range_note == (
        "no calibrated range applies: no Ada Lovelace FP8 run calibrates it; no Ada Lovelace FP8 run is in "
        "data/published_runs.csv "
        "(the band shown is the calibrated cells': 80% range; out of source it held 9 of 11 FP8 runs (5 sources), "
        "2.01x wide at the median; and 19 of 22 runs without a published batch, estimated as this one (9 sources), "
        "1.86x wide at the median)")
    h100 = mfu_estimate("llama-3-8b", gpu="H100 SXM", seq=8192).range_note
    # training-inputs rows hopper (0.8571 x 63, 1.9822; 0.8103 x 58, 1.9129 before rows31's MaxText rows;
    # 0.8070 x 57 before data27b's H100 BF16 row, inside) and batch:unpublished (0.8636 x 22, 1.8637), by hand
    assert h100 == ("80% range; out of source it held 54 of 63 Hopper runs (17 sources), 1.98x wide at "
                    "the median; and 19 of 22 runs without a published batch, estimated as this one (9 sources), "
                    "1.86x wide at the median")
    with_batch = mfu_estimate("llama-3-8b", gpu="H100 SXM", seq=8192, n_gpus=64, tokens_per_step=2**22).range_note
    assert with_batch == h100.split("; and")[0]


def test_a_row_priced_on_a_stand_in_sets_no_bound():
    """Issue 34 (strata34): a row whose key (GPU generation, dtype) no other source's fitting row has is
    priced on a stand-in in its fold; it is checked against the calibrated interval but sets no bound. By
    hand: ten sources of one key with residuals 0.00, 0.01, ..., 0.09 (a constant fit at 0: the residual is
    the value), and an eleventh source of another key at -2.0, with no fitting row of its key anywhere. With
    the rule the stated bounds are those of the ten alone: at 80% and S = 10 sources the upper bound is the
    first value whose cumulative weight reaches 0.9 x 11 / 10 = 0.99, i.e. the largest, 0.09, and the lower
    bound the smallest, 0.00. Without the rule the eleventh source pulls the lower bound down to -2.0."""
    from llmsizing.intervals import keyed_calibration, loso_check

    y = np.array([i / 100 for i in range(10)] + [-2.0])
    src = np.array([f"s{i}" for i in range(11)], dtype=object)
    keys = ["a"] * 10 + ["b"]
    fits = np.array([True] * 10 + [False])

    def fit_predict(train, test):
        return np.zeros(int(np.sum(test)))

    rule = keyed_calibration(keys, fits)
    with_rule = loso_check(y, src, fit_predict, calibrated=rule)
    assert with_rule.bounds[None] == pytest.approx((0.0, 0.09))
    assert list(with_rule.calibrated) == [True] * 10 + [False]
    assert not with_rule.inside[10]                          # checked against the calibrated range: a miss
    assert with_rule.measured_coverage == with_rule.inside[:10].mean()
    without = loso_check(y, src, fit_predict)
    assert without.bounds[None][0] == pytest.approx(-2.0)
    # per fold: a key with a fitting row only in the held-out source is a stand-in in that source's fold
    one = keyed_calibration(["a", "b", "b"], [True, True, False])
    assert list(one(np.array([False, True, True]), np.array([True, False, False]))) == [False]
    assert list(one(np.array([True, True, False]), np.array([False, False, True]))) == [True]
    with pytest.raises(ValueError, match="fits must be one True/False per key"):
        keyed_calibration(["a"], [True, False])
