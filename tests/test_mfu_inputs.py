"""The end-to-end MFU model with the planner's inputs (llmsizing.mfu_inputs; issue 34, ranges34p): the
procedure registered before it was checked, its stored coverage and bounds recomputed by hand, and the
optional arguments of mfu_estimate / training_time (without them: the fit's "batch unpublished", unknown
stack)."""

import csv
import math
from pathlib import Path

import numpy as np
import pytest

import llmsizing as L
from llmsizing import range_candidates as R
from llmsizing.catalog import get_model
from llmsizing.mfu import mfu_estimate

ROOT = Path(__file__).resolve().parents[1]
GPU, SEQ = "H100 SXM", 4096


def _csv(name):
    with open(ROOT / "data" / name, newline="") as fh:
        return list(csv.DictReader(fh))


def _inputs_row(generation, dtype="bf16"):
    return {k: (v if k in ("generation", "dtype", "range_group") else float(v))
            for r in _csv("mfu_inputs_model.csv") if (r["generation"], r["dtype"]) == (generation, dtype)
            for k, v in r.items()}


def _intervals(area):
    return {r["group"]: r for r in _csv("intervals.csv") if r["area"] == area}


def test_the_registered_procedure_is_the_one_written_down_before_the_check():
    # ranges34p's report, section 0: stack family offsets + log tokens per GPU per step (+ the flag for
    # sources without a batch), the absolute score, bounds per GPU generation
    terms, score, strata = R.REGISTERED["registered"]
    assert set(terms) == {"stack_megatron", "stack_deepspeed", "stack_pytorch", "log_tokens_per_gpu",
                          "batch_unpublished"}
    assert (score, strata) == ("absolute", "generation")
    assert set(R.REGISTERED["fallback"][0]) - set(terms) == {"hopper_size", "hopper_seq"}


def test_a_granite_like_job_by_hand():
    # IBM Granite 3.0 8B's shape of job (Granite 3.0 report): 768 H100s, a 4M-token batch (1,024 sequences
    # of 4,096), Megatron; here on the catalogue's llama-3-8b. Tokens per GPU per step: 4,194,304 / 768
    # = 5,461.3, log(5461.3 / 4096) = 0.2877
    row = _inputs_row("hopper")
    n = get_model("llama-3-8b").n_params
    log_mfu = (row["intercept"] + row["size_exponent"] * math.log(n / 1e10) + 0.0 * row["seq_exponent"]
               + row["stack_megatron"] + row["log_tokens_per_gpu"] * math.log(4_194_304 / 768 / 4096))
    est = mfu_estimate("llama-3-8b", gpu=GPU, seq=SEQ, n_gpus=768, framework="megatron-core",
                       tokens_per_step=4_194_304)
    assert est.mfu == pytest.approx(math.exp(log_mfu), rel=1e-12)
    assert (est.low, est.high) == pytest.approx((est.mfu * row["low"], est.mfu * row["high"]), rel=1e-12)
    # a whole run adds the whole-run term, deepspeed its offset and no Megatron one
    whole = mfu_estimate("llama-3-8b", gpu=GPU, seq=SEQ, n_gpus=768, framework="deepspeed",
                         tokens_per_step=4_194_304, whole_run=True)
    assert whole.mfu == pytest.approx(math.exp(log_mfu - row["stack_megatron"] + row["stack_deepspeed"]
                                               + row["whole_run"]), rel=1e-12)
    # an unknown stack is the fit's reference: no offset
    unknown = mfu_estimate("llama-3-8b", gpu=GPU, seq=SEQ, n_gpus=768, tokens_per_step=4_194_304)
    assert unknown.mfu == pytest.approx(math.exp(log_mfu - row["stack_megatron"]), rel=1e-12)


def test_the_default_is_the_fits_unpublished_batch_and_the_generations_range():
    # one estimate (issue 34): without tokens_per_step the same model, read as the fit reads a run whose source
    # publishes no batch (the tokens term at its reference, 0; the flag's term on), by hand from the CSV
    row = _inputs_row("hopper")
    plain = mfu_estimate("llama-3-8b", gpu=GPU, seq=SEQ, n_gpus=64)
    log_mfu = row["intercept"] + row["size_exponent"] * math.log(get_model("llama-3-8b").n_params / 1e10)
    assert plain.mfu == pytest.approx(math.exp(log_mfu + row["batch_unpublished"]), rel=1e-12)
    assert (plain.low, plain.high) == pytest.approx((plain.mfu * row["low"], plain.mfu * row["high"]), rel=1e-12)
    # a stack alone is used now (its offset), with no warning
    alone = mfu_estimate("llama-3-8b", gpu=GPU, seq=SEQ, n_gpus=64, framework="torchtitan")
    assert alone.mfu == pytest.approx(plain.mfu * math.exp(row["stack_pytorch"]), rel=1e-12)
    assert not any("tokens_per_step" in w for w in alone.warnings)
    # at the reference 4,096 tokens per GPU per step the two agree but for the flag's term
    ref = mfu_estimate("llama-3-8b", gpu=GPU, seq=SEQ, n_gpus=64, tokens_per_step=4096 * 64)
    assert ref.mfu == pytest.approx(math.exp(log_mfu), rel=1e-12)
    assert ref.high / ref.mfu == pytest.approx(plain.high / plain.mfu, rel=1e-12)
    t_plain = L.training_time("llama-3-8b", tokens=1e12, gpu=GPU, seq=SEQ, n_gpus=64)
    assert t_plain.mfu == plain.mfu


def _absolute_bound(res, src, coverage=0.8):
    """The absolute score's bound by hand: sources weigh 1/S each, shared by their rows; the smallest |r|
    whose cumulative weight reaches (1 - alpha)(S + 1)/S."""
    keys = sorted(set(src))
    s = len(keys)
    count = {k: sum(1 for x in src if x == k) for k in keys}
    pairs = sorted((abs(r), 1 / (s * count[k])) for r, k in zip(res, src))
    level, cum = coverage * (s + 1) / s, 0.0
    for a, w in pairs:
        cum += w
        if cum >= level - 1e-12:
            return a
    return pairs[-1][0]


@pytest.fixture(scope="module")
def registered():
    return R.registered_check()


def test_the_stated_generation_bounds_by_hand(registered):
    check, per_run = registered
    stored = _intervals("training-inputs")
    for gen in ("ampere", "hopper"):
        mine = (per_run["generation"] == gen).to_numpy()
        q = _absolute_bound(check.residuals[mine], per_run["source_key"][mine].tolist())
        assert float(stored[gen]["low"]) == pytest.approx(math.exp(-q), abs=1e-4)
        assert float(stored[gen]["high"]) == pytest.approx(math.exp(q), abs=1e-4)
        row = _inputs_row(gen)
        # rounded outwards
        assert row["low"] <= math.exp(-q) + 1e-12 and row["high"] >= math.exp(q) - 1e-12
        assert row["high"] - math.exp(q) < 1e-4 and math.exp(-q) - row["low"] < 1e-4
    # FP8 on Hopper takes Hopper's bounds (the strata are generations, not dtypes)
    assert _inputs_row("hopper", "fp8")["low"] == _inputs_row("hopper")["low"]


def test_the_stored_coverage_is_measured_and_meets_the_issue(registered):
    check, per_run = registered
    stored = _intervals("training-inputs")
    # the groups count the runs calibrated in their fold; pytorch/ao's MI300X (cdna3) and B200 (blackwell)
    # FP8 runs, whose generation and dtype no calibration run covers, are the group stand-in (strata34), and
    # since data27 its B200 BF16 row (no calibrated Blackwell BF16 run either), since data27b its MI300X BF16
    # row (no calibrated CDNA3 run at all): 4 blackwell, 3 cdna3 (its H100 BF16 row is calibrated: hopper)
    cal = per_run["calibrated"].to_numpy(bool)
    assert sorted(per_run["generation"][~cal]) == ["blackwell"] * 4 + ["cdna3"] * 3
    cases = {"all": cal,
             **{g: cal & (per_run["generation"] == g).to_numpy() for g in ("ampere", "hopper")},
             **{f"stack:{f}": cal & (per_run["stack_family"] == f).to_numpy()
                for f in set(per_run["stack_family"])},
             **{d: cal & (per_run["dtype"] == d).to_numpy() for d in ("bf16", "fp8")},
             "stand-in": ~cal}
    assert stored["stand-in"]["low"] == "" and "blackwell" not in stored
    for group, mask in cases.items():
        # inside by hand from the residuals and the bounds each run's interval was made with
        inside = (check.residuals[mask] >= check.low_log[mask] - 1e-12) & (
            check.residuals[mask] <= check.high_log[mask] + 1e-12)
        assert float(stored[group]["measured_coverage"]) == pytest.approx(inside.mean(), abs=1e-4)
        width = math.exp(float(np.median(check.high_log[mask] - check.low_log[mask])))
        assert float(stored[group]["median_width"]) == pytest.approx(width, abs=1e-4)
    # issue 34: >= 75% out of source, and each GPU generation >= 75% on its own (the width: the next test)
    assert float(stored["all"]["measured_coverage"]) >= 0.75
    for gen in ("ampere", "hopper"):
        assert float(stored[gen]["measured_coverage"]) >= 0.75


@pytest.mark.xfail(strict=True, reason=(
    "issue 34's median width <= 1.6x end to end: 1.571x on 28 sources, 1.641x on 31 (whole34 added BLOOM, "
    "GLM-130B, SmolLM3 and BloombergGPT, whose ~25% MFU run lies outside), 1.864x on 33 (rows31 added "
    "InternLM's A100 table, 1.1-1.4x above the inputs model out of source with full recomputation, 2 of 11 "
    "inside, and MaxText's A3 table, 5 of 5 inside); "
    "no source is held back for its effect on the width"))
def test_the_median_width_meets_the_issue():
    assert float(_intervals("training-inputs")["all"]["median_width"]) <= 1.6


def test_a_held_out_source_never_shapes_its_own_interval(registered):
    # the bounds a source is checked against come from the other sources' nested residuals: each is the
    # absolute bound by hand of those residuals in the run's generation (re-derived for one source here)
    from llmsizing import calibration as C
    from llmsizing.intervals import loso_check

    check, per_run = registered
    df = C._prepared(None)
    cols = R._columns(df)
    terms = R.REGISTERED["registered"][0]
    extra = np.column_stack([cols[t] for t in terms])
    y = np.log(df["implied_mfu"].to_numpy(float))
    src = df["source_key"].to_numpy(object)
    k = src[0]
    y2 = y.copy()
    y2[src == k] += 3.0                                   # the held-out source's own values move a lot
    predict = R._extra_predictor(C._FitColumns(df.assign(implied_mfu=np.exp(y2))), extra)
    moved = loso_check(y2, src, predict, strata=df["generation"].to_numpy(object), score="absolute")
    mine = src == k
    assert np.allclose(moved.low_log[mine], check.low_log[mine])
    assert np.allclose(moved.high_log[mine], check.high_log[mine])


@pytest.mark.parametrize("kw, exc, words", [
    (dict(tokens_per_step=4e6), ValueError, "n_gpus"),
    (dict(tokens_per_step=0, n_gpus=8), ValueError, "tokens_per_step must be"),
    (dict(tokens_per_step=True, n_gpus=8), TypeError, "tokens_per_step must be a number"),
    (dict(tokens_per_step=4e6, n_gpus=8, framework="jax-magic"), ValueError, "framework"),
])
def test_bad_inputs_are_refused(kw, exc, words):
    with pytest.raises(exc, match=words):
        mfu_estimate("llama-3-8b", gpu=GPU, seq=SEQ, **kw)


def test_training_time_takes_the_inputs_and_refuses_them_where_they_mean_nothing():
    kw = dict(tokens=1e12, gpu=GPU, seq=SEQ, n_gpus=768)
    est = mfu_estimate("llama-3-8b", gpu=GPU, seq=SEQ, n_gpus=768, framework="megatron-core",
                       tokens_per_step=4_194_304)
    t = L.training_time("llama-3-8b", **kw, framework="megatron-core", tokens_per_step=4_194_304)
    assert (t.mfu, t.mfu_low, t.mfu_high) == (est.mfu, est.low, est.high)
    # the same tokens and FLOPs at another MFU: GPU-hours x MFU is the same work
    t_old = L.training_time("llama-3-8b", **kw)
    assert t.gpu_hours * t.mfu == pytest.approx(t_old.gpu_hours * t_old.mfu, rel=1e-12)
    assert t.gpu_hours_low * t.mfu_high == pytest.approx(t.gpu_hours * t.mfu, rel=1e-12)
    with pytest.raises(ValueError, match="not with mfu="):
        L.training_time("llama-3-8b", **kw, mfu=0.4, tokens_per_step=4_194_304)
    with pytest.raises(ValueError, match="mixture of experts"):
        L.training_time("mixtral-8x7b", **kw, tokens_per_step=4_194_304)


def test_inputs_of_old_warnings_argument_still_works_with_a_deprecation_warning():
    """``inputs_of(..., warnings)`` was the list a framework without a batch was reported in; a framework now
    counts with or without a batch, so the list stays empty and passing it warns once."""
    from llmsizing.mfu_inputs import inputs_of

    kept = []
    with pytest.warns(DeprecationWarning, match="warnings"):
        old = inputs_of("torchtitan", None, None, kept)
    assert old == inputs_of("torchtitan", None, None) == ("pytorch", None) and kept == []
    assert inputs_of(None, 4_194_304, 1024) == ("unknown", 4096.0)
