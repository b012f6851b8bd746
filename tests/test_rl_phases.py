"""Issue 39, third pass: the RL step's phases as the frameworks run them (slime's bucketed weight update, the
evaluation inside slime's step timer, the CPU optimizer of its MoE recipes) and the RL range measured by
leaving whole sources out. Expected values are derived by hand from published figures, written out below."""

import math

import pytest

from llmsizing.intervals import min_units
from llmsizing.rl import published_rl, rl_interval, rl_run
from llmsizing.rl_trainer import (SLIME_SYNC_BUCKET_BYTES, SLIME_SYNC_BUCKET_S, bucketed_sync_s, cpu_adam_s,
                                  layout_parallel)
from llmsizing.catalog import resolve_model

#: PCIe Gen4 x16 one way, by hand: 16 GT/s x 16 lanes x 128/130 (128b/130b line code) / 8 bits = 31.5 GB/s
PCIE4 = 16e9 * 16 * 128 / 130 / 8
PCIE5 = 32e9 * 16 * 128 / 130 / 8        # an MI300X's host link: PCIe Gen5 x16 (AMD MI300X datasheet)

MILES = dict(gpu="MI300X", n_gpus=8, prompts_per_step=256, samples_per_prompt=1, prompt=128,
             response=(5642.0, 8192), steps=1, reference=False, train_layout=(4, 1, 8, 1))


def test_slime_bucket_cost_from_its_authors_figure():
    """He, Zhu and Li (2025): slime updates Qwen3-30B-A3B (BF16, 30.53e9 x 2 = 61.06e9 bytes) in 7 s after
    their optimisations. Its 512 MiB buckets: ceil(61.06e9 / 536,870,912) = ceil(113.7) = 114, so 7 / 114 =
    0.0614 s per bucket."""
    assert SLIME_SYNC_BUCKET_BYTES == 512 * 1024 * 1024
    assert SLIME_SYNC_BUCKET_S == pytest.approx(7.0 / 114, rel=1e-9)
    assert bucketed_sync_s(61.064e9, SLIME_SYNC_BUCKET_S) == pytest.approx(7.0, rel=1e-9)
    assert bucketed_sync_s(61.064e9, 0.0) == 0.0


def test_slime_bucket_cost_against_glm45_not_used_to_derive_it():
    """slime v0.1.0's release note: GLM-4.5 355B-A32B in BF16 updates in 48 s. 355e9 x 2 = 710e9 bytes ->
    ceil(710e9 / 536,870,912) = 1,323 buckets x 7/114 s = 81.2 s: 1.7x the published 48 s (recorded: the
    bucket rate of a one-node 30B run overstates a many-node update, whose engines load in parallel)."""
    t = bucketed_sync_s(355e9 * 2, SLIME_SYNC_BUCKET_S)
    assert t == pytest.approx(1323 * 7.0 / 114, rel=1e-9)
    assert 48.0 < t < 2 * 48.0


def test_cpu_adam_by_hand_for_the_miles_layout():
    """Qwen3-30B-A3B on TP4/EP8 over 8 GPUs, by hand from its config (48 layers, hidden 2048, 128 experts of
    FFN 768, 32 query and 4 KV heads of 128, vocabulary 151,936, untied):
    experts 48 x 128 x 3 x 2048 x 768 / EP8 = 3.624e9; attention 48 x (2 x 2048 x 4096 + 2 x 2048 x 512)
    / TP4 = 0.226e9; embedding and head 2 x 151,936 x 2048 / TP4 = 0.156e9; router 48 x 2048 x 128 =
    0.0126e9 -> about 4.02e9 parameters per GPU, all of them in its optimizer partition (expert-data-parallel
    group 8 / (8 x 1) = 1). CPU Adam over an MI300X's PCIe Gen5 x16 (63.0 GB/s one way): 2 x 4.02e9 x 2 B /
    63.0 GB/s (gradients down, weights up) + 4.02e9 x 30 B / 40 GB/s = 0.26 + 3.01 = 3.27 s; over Gen4 x16
    (31.5 GB/s) 0.51 + 3.01 = 3.52 s."""
    m = resolve_model("qwen3-30b-a3b", moe=True)
    par = layout_parallel(m, (4, 1, 8, 1), 8)
    local = 48 * 128 * 3 * 2048 * 768 / 8 + 48 * (2 * 2048 * 4096 + 2 * 2048 * 512) / 4 \
        + 2 * 151936 * 2048 / 4 + 48 * 2048 * 128
    by_hand = 2 * local * 2 / PCIE5 + local * 30 / 40e9
    assert by_hand == pytest.approx(3.27, abs=0.03)
    assert cpu_adam_s(m, par, 8, gpu="MI300X") == pytest.approx(by_hand, rel=0.03)
    gen4 = 2 * local * 2 / PCIE4 + local * 30 / 40e9
    assert gen4 == pytest.approx(3.52, abs=0.03)
    assert cpu_adam_s(m, par, 8, host_link_gbps=PCIE4 / 1e9) == pytest.approx(gen4, rel=0.03)
    with pytest.warns(DeprecationWarning, match="gpu="):          # the old call, naming no GPU: Gen4 still
        assert cpu_adam_s(m, par, 8) == cpu_adam_s(m, par, 8, host_link_gbps=PCIE4 / 1e9)
    assert cpu_adam_s(m, par, 8, gpu="A100 80GB") == pytest.approx(gen4, rel=0.03)    # an A100's host: Gen4
    plain = rl_run("qwen3-30b-a3b", **MILES)
    cpu = rl_run("qwen3-30b-a3b", cpu_optimizer=True, **MILES)
    assert cpu.phases["update"] - plain.phases["update"] == pytest.approx(cpu_adam_s(m, par, 8, gpu="MI300X"),
                                                                          rel=1e-9)
    assert cpu.phases["log_probs"] == pytest.approx(plain.phases["log_probs"], rel=1e-9)


def test_evaluation_is_its_generation_spread_over_the_steps():
    """An evaluation of 480 rollouts (30 AIME problems x 16) every 20 steps costs what generating 480 such
    rollouts costs on the same engines, divided by 20; it adds to the step."""
    ev = rl_run("qwen3-30b-a3b", evaluation=(480, (10253.5, 16384), 20), **MILES)
    base = rl_run("qwen3-30b-a3b", **MILES)
    gen480 = rl_run("qwen3-30b-a3b", **{**MILES, "prompts_per_step": 480, "response": (10253.5, 16384)})
    assert ev.gen_tp == gen480.gen_tp
    assert ev.phases["evaluation"] == pytest.approx(gen480.phases["generation"] / 20, rel=1e-9)
    assert ev.step_s == pytest.approx(base.step_s + ev.phases["evaluation"], rel=1e-9)
    assert "evaluation" not in base.phases


def test_miles_phase_split_with_the_sync_apart_from_the_offload_moves():
    """slime's step timer is train_wait + train (slime/observability/train_metric_utils.py); its
    update_weights timer holds the bucketed update only, the engines' release/resume and the trainer's
    sleep/wake fall in the 75.0 s the blog does not break down (388.50 - 152.79 - 95.30 - 33.85 - 31.53).
    Recorded: the sync is the 114 buckets' 7.0 s plus a gather of 7/8 x 61.06e9 B / 336 GB/s = 0.16 s, a
    fifth of the published 33.85 s; offload moves + evaluation (20-step AIME runs) are predicted well short
    of the 75 s; the step rises from 188 s (first pass) toward the published 388.5 s."""
    d = published_rl()
    m = d[d["run"].str.contains("Miles")].iloc[0]
    rest = 388.50 - 152.79 - 95.30 - 33.85 - 31.53
    assert rest == pytest.approx(75.03, abs=0.01)
    gather = 7 / 8 * 61.064e9 / 336e9
    assert m["predicted_sync_only_s"] == pytest.approx(7.0 + gather, rel=0.01)
    assert m["published_sync_s"] / m["predicted_sync_only_s"] == pytest.approx(4.7, abs=0.2)
    # the rest also holds the reference pass (slime loads a reference with the KL loss on at coefficient 0)
    unexplained = m["predicted_offload_s"] + m["predicted_evaluation_s"] + m["predicted_reference_s"]
    assert 10 < unexplained < rest
    assert 200 < m["predicted_step_s"] < 388.5


def test_rl_range_cannot_be_measured_on_the_two_sources_a_fit_may_read():
    """Issue 35: NeMo RL's performance-summary pages (v0.4-v0.7, 56 checked rows) are NVIDIA NeMo
    performance-summary tables and say calibrate=no; the checked rows a fit may read are Miles' and verl's
    DeepSeek page, two sources. Nested, each fold keeps one, and a finite bound needs min_units: 9 at 80%,
    6 at 70%, 4 at 60%, 3 at 50%, so rl_interval has no coverage it can state and says so."""
    assert (min_units(0.8), min_units(0.7), min_units(0.6), min_units(0.5)) == (9, 6, 4, 3)
    d = published_rl()
    fit = d[(d["checked"] == "yes") & (d["calibrate"] == "yes")]
    assert sorted(fit["framework"]) == ["Miles (slime)", "verl"]
    with pytest.raises(ValueError, match="2 sources: a nested check needs 4"):
        rl_interval()
    with pytest.raises(ValueError, match="coverage"):
        rl_interval(coverage=1.5)


@pytest.mark.parametrize("kw, err, name", [
    (dict(evaluation="often"), TypeError, "evaluation"),
    (dict(evaluation=(0, 1000, 20)), ValueError, "evaluation\\[0\\]"),
    (dict(evaluation=(480, 1000, 0)), ValueError, "evaluation\\[2\\]"),
    (dict(sync_bucket_s=-1.0), ValueError, "sync_bucket_s"),
    (dict(cpu_optimizer="yes"), TypeError, "cpu_optimizer"),

])
def test_bad_new_inputs_name_the_parameter(kw, err, name):
    with pytest.raises(err, match=name):
        rl_run("llama-3-8b", gpu="H100 SXM", n_gpus=16, prompts_per_step=128, response=(932.0, 3968), **kw)
