"""Published MoE training runs against the library (llmsizing.moe_runs, data/moe_published_runs.csv)."""

import math

import pytest

from llmsizing import moe_runs
from llmsizing.catalog import get_model


@pytest.fixture(scope="module")
def runs():
    return moe_runs.moe_published_runs().set_index("run", drop=False)


@pytest.fixture(scope="module")
def check():
    return moe_runs.moe_run_check()


def test_rows_are_sourced_dated_and_say_their_role(runs):
    for _, r in runs.iterrows():
        assert r["source"].strip() and r["note"].strip()
        assert len(r["as_of"]) == 10 and r["as_of"][4] == "-"
        assert r["role"] in ("fit", "held out")
        assert int(r["pp"]) * int(r["dp"]) == int(r["n_gpus"])          # no tensor parallelism in any of them
        assert int(r["dp"]) % int(r["ep"]) == 0                        # experts split inside data parallelism
    assert (runs["role"] == "held out").sum() >= 2


def test_published_gpu_hours_from_the_reports_rules(runs):
    # DeepSeek-V3 Table 1: 180K H800 GPU-hours per trillion tokens x 14.8T; DeepSeek-V2 Sec. 3.2.3: 172.8K x 8.1T
    assert runs.loc["DeepSeek-V3 pre-training", "gpu_hours"] == pytest.approx(180e3 * 14.8)
    assert runs.loc["DeepSeek-V2 pre-training", "gpu_hours"] == pytest.approx(172.8e3 * 8.1)
    # JetMoE: 30,000 H100 GPU-hours (abstract); "96 H100s for 2 weeks" is 32,256, within 8%
    jet = runs.loc["JetMoE-8B pre-training"]
    assert jet["gpu_hours"] == 30000 and abs(96 * 14 * 24 / jet["gpu_hours"] - 1) < 0.08
    # the published batches: DeepSeek-V3 15,360 sequences over dp 128 is 120 micro-batches of one sequence
    assert runs.loc["DeepSeek-V3 pre-training", "global_batch"] / 128 == 120


def test_deepseek_v2_catalogue_row_matches_the_meta_device_count():
    m = get_model("deepseek-v2")
    assert m.n_params == 235_741_434_880                 # data/hf_meta_param_counts.csv, transformers 5.23
    assert 20.5e9 < m.active_params < 22.5e9             # "21B activated" (arXiv:2405.04434, abstract)


def test_jetmoe_standin_costs_jetmoes_flops():
    m = moe_runs.JETMOE_8B_STANDIN
    h, f = 2048, 5632
    # per layer and token, two attention experts: each a 2048 -> 16 x 128 query and the inverse output
    # projection, plus the shared K and V (16 heads x 128); two of eight SwiGLU experts; two RMSNorms; router
    attn = 2 * (h * 16 * 128 + 16 * 128 * h) + 2 * h * 16 * 128
    mlp = 2 * 3 * h * f + 8 * h
    per_layer = attn + mlp + 2 * h
    assert m.active_params == pytest.approx(24 * per_layer + 32000 * h + h, rel=1e-9)
    assert abs(m.active_params / 2.2e9 - 1) < 0.07                   # "2.2B active parameters" (myshell.ai)


def test_the_factor_is_fitted_on_the_fit_rows_only(runs):
    f = moe_runs.fit_moe_factor()
    v3 = runs.loc["DeepSeek-V3 pre-training"]
    assert f == pytest.approx(v3["gpu_hours"] / moe_runs.predict_moe_run(v3)["gpu_hours"], rel=1e-12)
    moved = runs.copy()
    moved.loc[moved["role"] == "held out", "gpu_hours"] *= 10           # held-out rows cannot move the fit
    assert moe_runs.fit_moe_factor(moved) == pytest.approx(f, rel=1e-12)
    with pytest.raises(ValueError, match="fit"):
        moe_runs.fit_moe_factor(runs[runs["role"] != "fit"])


def test_every_published_run_falls_inside_the_range(check):
    assert check["inside"].all(), check
    # held out: chapter 18 says the smallest model (JetMoE-8B, hidden 2,048) is the furthest off the dense step;
    # no tolerance on DeepSeek-V2's own deviation (11.7% since issue 34's kernel terms): the range above is the claim
    v2, jet = check.loc["DeepSeek-V2 pre-training"], check.loc["JetMoE-8B pre-training"]
    assert jet["ratio"] > v2["ratio"]
    # the dense-calibrated step alone is optimistic for every MoE run (issue 35 prices what it leaves out)
    assert (check["ratio"] > 1).all()


def test_range_is_the_calibrated_band_times_the_factor(check):
    from llmsizing.time_cost import mfu_range_factors

    lo, hi = mfu_range_factors("H800", "fp8", whole_run=True)         # the rows are GPU-hour totals
    v3 = check.loc["DeepSeek-V3 pre-training"]
    assert v3["low"] == pytest.approx(v3["moe"] / hi) and v3["high"] == pytest.approx(v3["moe"] / lo)
    assert math.isclose(v3["moe"], v3["published"], rel_tol=1e-12)     # the fit row, by construction


def test_bad_factor():
    with pytest.raises(ValueError, match="factor"):
        moe_runs.moe_run_check(factor=0.0)
    with pytest.raises(TypeError, match="factor"):
        moe_runs.moe_run_check(factor="1.3")
