"""Interruptions, checkpoints and goodput (issue 26), against the published logs and hand arithmetic: Llama 3's
466 / 419 interruptions in 54 days on 16,384 H100s (Dubey et al. 2024, Sec. 3.3.4, Table 5), OPT-175B's logbook
held out (Zhang et al. 2022, Sec. 2.5), Young's interval and Daly's first-order goodput worked by hand."""

import math

import pytest

from llmsizing import training_time
from llmsizing.reliability import (Goodput, checkpoint_bytes, checkpoint_write_s, failure_rate_per_gpu_day,
                                   goodput, interruption_causes, interruption_logs, interruptions,
                                   optimal_checkpoint_interval_s)


def test_llama3_run_gets_the_order_of_its_published_count():
    # calibrated on it, so it gives back 419 unexpected and 466 in all; the order is what the issue asks for
    i = interruptions(n_gpus=16384, days=54)
    assert 100 < i.expected < 1000
    assert i.expected == pytest.approx(419, rel=1e-9)
    assert interruptions(n_gpus=16384, days=54, include_planned=True).expected == pytest.approx(466, rel=1e-9)
    # 419 / (16,384 x 54) per GPU-day; the job sees one every 24 / (rate x 16,384) = 3.09 hours
    assert failure_rate_per_gpu_day() == pytest.approx(419 / (16384 * 54), rel=1e-12)
    assert i.mtbf_hours == pytest.approx(54 * 24 / 419, rel=1e-9)


def test_held_out_opt_log_is_within_an_order_of_magnitude():
    # OPT-175B: at least 35 manual + an estimated 70+ automatic restarts, 992 A100s, 2 months (taken as 60 days).
    # Llama 3's rate predicts 419 / (16,384 x 54) x 992 x 60 = 28.2: OPT's older cluster failed ~4x as often.
    predicted = interruptions(n_gpus=992, days=60).expected
    assert predicted == pytest.approx(419 / (16384 * 54) * 992 * 60, rel=1e-9)
    assert 105 / 10 < predicted < 105                       # same order; the published count is a lower bound
    logs = interruption_logs().set_index("run")
    assert logs.loc["OPT-175B pre-training", "ratio"] == pytest.approx(105 / predicted, rel=1e-9)
    assert logs.query("role == 'calibration'")["ratio"].tolist() == pytest.approx([1.0])


def test_held_out_research_cluster_mttf_is_within_an_order_of_magnitude():
    # Kokolis et al. 2024: 7.9 hours mean time to failure for 1,024-GPU jobs on Meta's A100 research clusters.
    # Llama 3's rate predicts 24 / (419 / (16,384 x 54) x 1,024) = 49.5 hours: research clusters fail ~6x as often
    predicted_h = interruptions(n_gpus=1024, days=1).mtbf_hours
    assert predicted_h == pytest.approx(24 / (419 / (16384 * 54) * 1024), rel=1e-9)
    assert 7.9 < predicted_h < 79
    row = interruption_logs().query("n_gpus == 1024").iloc[0]
    assert row["ratio"] == pytest.approx(predicted_h / 7.9, rel=1e-5)


def test_causes_table_is_table_5():
    causes = interruption_causes()
    assert causes["interruptions"].sum() == 419
    top = causes.iloc[0]
    assert (top["component"], top["interruptions"]) == ("Faulty GPU", 148)
    gpu = causes.query("category == 'GPU'")["interruptions"].sum()
    assert gpu == 148 + 72 + 19 + 17 + 6 + 6


def test_checkpoint_is_weights_and_optimizer_states():
    # bf16-mixed AdamW: 2 (bf16 weights) + 4 (fp32 master) + 8 (two fp32 moments) = 14 bytes per parameter
    from llmsizing import get_model

    n = get_model("llama-3.1-405b").n_params
    assert checkpoint_bytes("llama-3.1-405b") == pytest.approx(14 * n, rel=1e-9)
    # at Llama 3's sustained 2 TB/s (Sec. 3.3.1): 14 x 405.9e9 / 2e12 = 2.84 s
    assert checkpoint_write_s("llama-3.1-405b", storage_gb_per_s=2000) == pytest.approx(14 * n / 2e12, rel=1e-9)


def test_young_interval_by_hand():
    # sqrt(2 x 60 s x 3 h) = sqrt(2 x 60 x 10,800) = 1,138.4 s
    assert optimal_checkpoint_interval_s(60, 3 * 3600) == pytest.approx(1138.42, rel=1e-4)


def test_goodput_by_hand():
    # 1,024 GPUs: M = 24 h / (rate x 1024); write 60 s, interval 30 min, restart 10 min
    g = goodput("llama-3-70b", n_gpus=1024, restart_min=10, write_s=60, interval_min=30)
    m = 86400 / (419 / (16384 * 54) * 1024)
    want = (1 - (600 + (1800 + 60) / 2) / m) / (1 + 60 / 1800)
    assert g.goodput == pytest.approx(want, rel=1e-12)
    assert g.lost_per_interruption_s == pytest.approx(600 + 930)
    # Young's interval is the optimum of that expression: moving it either way loses goodput
    best = goodput("llama-3-70b", n_gpus=1024, restart_min=10, write_s=60)
    for minutes in (best.interval_s / 60 * 0.5, best.interval_s / 60 * 2):
        assert goodput("llama-3-70b", n_gpus=1024, restart_min=10, write_s=60, interval_min=minutes).goodput \
            < best.goodput


def test_goodput_exponential_by_hand():
    # Daly (2006), complete model: goodput = tau / (M e^(R/M) (e^((tau + delta)/M) - 1)).
    # M = 1,000 s, tau = 100 s, delta = 10 s: e^0.11 - 1 = 0.116278; no restart: 100 / 116.278 = 0.86001,
    # against first order (1 - 55/1000) / 1.1 = 0.85909; a 100 s restart multiplies by e^0.1 = 1.105171:
    # 100 / 128.507 = 0.77817, against first order (1 - 155/1000) / 1.1 = 0.76818
    for restart_s, want, first in ((0.0, 0.86001, 0.85909), (100.0, 0.77817, 0.76818)):
        g = Goodput(first, 1, 1000.0, 10.0, 100.0, restart_s, 1.0)
        assert g.goodput_exponential == pytest.approx(want, abs=2e-5)
        assert (1 - (restart_s + 55) / 1000) / 1.1 == pytest.approx(first, abs=2e-5)
    # where M is long against R and tau the two agree: Llama 3's run at 2 TB/s differs in the 3rd decimal
    g = goodput("llama-3.1-405b", n_gpus=16384, restart_min=10, storage_gb_per_s=2000)
    assert g.goodput_exponential == pytest.approx(g.goodput, abs=0.01)


def test_llama3_goodput_is_near_its_published_effective_training_time():
    # "higher than 90% effective training time" (Sec. 3.3.4); at its 2 TB/s and a 10-minute restart (an
    # assumption: the paper gives none) the model lands in the 0.85-0.97 band around it
    g = goodput("llama-3.1-405b", n_gpus=16384, restart_min=10, storage_gb_per_s=2000)
    assert 0.85 < g.goodput < 0.97


def test_goodput_stretches_training_time_and_old_calls_are_unchanged():
    base = training_time("llama-3-70b", tokens=1e12, gpu="H100 SXM", n_gpus=1024, seq=8192)
    slowed = training_time("llama-3-70b", tokens=1e12, gpu="H100 SXM", n_gpus=1024, seq=8192, goodput=0.8)
    assert base.goodput == 1.0
    assert slowed.days == pytest.approx(base.days / 0.8, rel=1e-12)
    assert slowed.gpu_hours_high == pytest.approx(base.gpu_hours_high / 0.8, rel=1e-12)
    assert slowed.cost_usd == pytest.approx(base.cost_usd / 0.8, rel=1e-12)
    assert slowed.tokens_per_s_per_gpu == pytest.approx(base.tokens_per_s_per_gpu)   # the steady state's


def test_goodput_refuses_double_counting_and_bad_input():
    with pytest.raises(ValueError, match="whole_run"):
        training_time("llama-3-70b", tokens=1e12, gpu="H100 SXM", n_gpus=1024, seq=8192, whole_run=True,
                      goodput=0.9)
    with pytest.raises(ValueError, match="goodput"):
        training_time("llama-3-70b", tokens=1e12, gpu="H100 SXM", n_gpus=1024, seq=8192, goodput=0)
    with pytest.raises(ValueError, match="goodput"):
        training_time("llama-3-70b", gpu="H100 SXM", n_gpus=1024, stages=[(1e12, 8192)], goodput=0.9)
    with pytest.raises(ValueError, match="no progress"):
        goodput("llama-3.1-405b", n_gpus=1_000_000, restart_min=60, storage_gb_per_s=10)
    with pytest.raises(ValueError, match="storage_gb_per_s"):
        goodput("llama-3-8b", n_gpus=8, restart_min=5)
    with pytest.raises(ValueError, match="n_gpus"):
        interruptions(n_gpus=0, days=1)
    with pytest.raises(ValueError, match="days"):
        interruptions(n_gpus=8, days=-1)
    with pytest.raises(TypeError, match="include_planned"):
        interruptions(n_gpus=8, days=1, include_planned="yes")
    with pytest.raises(ValueError, match="restart_min"):
        goodput("llama-3-8b", n_gpus=8, restart_min=-5, write_s=1)
    assert not math.isnan(interruptions(n_gpus=1, days=1e-3).expected)


@pytest.mark.parametrize("name", ["interruption_logs.csv", "llama3_interruption_causes.csv", "scaling_fits.csv",
                                  "chinchilla_tables.csv", "chinchilla_flops_ratio.csv"])
def test_every_row_has_a_source_and_a_date(name):
    import pandas as pd

    from llmsizing.reliability import DATA

    df = pd.read_csv(DATA / name)
    assert len(df) > 0
    assert df["source"].fillna("").str.len().gt(20).all(), f"{name}: a row without a source"
    assert pd.to_datetime(df["as_of"], format="%Y-%m-%d").notna().all(), f"{name}: a row without an as-of date"
