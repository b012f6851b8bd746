"""RL post-training step model (issue 39, chapter 19): phases by hand, published runs, bad inputs."""

import math
import statistics

import pandas as pd
import pytest

from llmsizing.catalog import get_gpu, resolve_model
from llmsizing.rl import PUBLISHED_CSV, published_rl, response_lengths, rl_loso, rl_run
from llmsizing.serve import serving

#: PCIe Gen4 x16 one way, by hand: 16 GT/s x 16 lanes x 128/130 (128b/130b line code) / 8 bits = 31.5 GB/s
PCIE4 = 16e9 * 16 * 128 / 130 / 8
#: PCIe Gen5 x16, an H100 SXM's host link (NVIDIA H100 datasheet): 32 GT/s x 16 x 128/130 / 8 = 63.0 GB/s
PCIE5 = 32e9 * 16 * 128 / 130 / 8

H100 = "H100 SXM"


def test_generation_of_one_response_from_a_published_decode_rate():
    """InferenceBench measured vLLM's ITL for Llama-3.1-8B on one H100 at batch 1: 6.48 ms per token
    (data/serving_published.csv). One rollout of 1,000 tokens is then 1,000 x 6.48 ms = 6.48 s of decode;
    the prompt's prefill (128 tokens) adds milliseconds. The generation phase must land within the serving
    model's stated range of that (0.76x to 1.38x of the speed, ch15), widened by nothing."""
    r = rl_run("llama-3-8b", gpu=H100, n_gpus=1, prompts_per_step=1, samples_per_prompt=1, prompt=128,
               response=1000, steps=1, gen_tp=1, reference=False)
    published_s = 1000 * 6.48e-3
    assert r.engine_batch == 1 and r.decode_steps == 1000
    assert published_s / 1.4 < r.phases["generation"] < published_s * 1.4
    assert r.phases_low["generation"] <= published_s <= r.phases_high["generation"]


def test_the_longest_response_sets_the_decode_steps_unless_the_engine_rebatches():
    """64 rollouts of mean 500 and longest 4,000 tokens on one engine holding all 64: continuous batching
    decodes max(64 x 500 / 64, 4000) = 4,000 steps (the longest); static waves the same (one wave). With
    512 rollouts and a cap of 64 sequences in flight: continuous max(512 x 500 / 64, 4000) = 4,000 steps;
    static waves ceil(512 / 64) = 8 waves of 4,000 = 32,000."""
    kw = dict(gpu=H100, n_gpus=1, samples_per_prompt=1, prompt=128, response=(500, 4000), steps=1, gen_tp=1,
              max_num_seqs=64)
    assert rl_run("llama-3-8b", prompts_per_step=64, **kw).decode_steps == 4000
    cont = rl_run("llama-3-8b", prompts_per_step=512, **kw)
    static = rl_run("llama-3-8b", prompts_per_step=512, rebatch=False, **kw)
    assert cont.engine_batch == 64 and cont.decode_steps == 4000
    assert static.decode_steps == 8 * 4000
    assert static.phases["generation"] > 7 * cont.phases["generation"]


def test_generation_phase_is_waves_of_prefill_plus_decode_steps():
    """Composition written out: ``ceil(n / b) x batch_prefill_s + steps x decode_step_s`` of the engine's
    own serving() at batch ``b`` (2,048 rollouts on 16 engines: n = 128 each)."""
    r = rl_run("llama-3-8b", gpu=H100, n_gpus=16, prompts_per_step=128, samples_per_prompt=16, prompt=128,
               response=(932, 3968), steps=1, gen_tp=1)
    n = math.ceil(2048 / 16)
    assert r.engines == 16 and r.engine_batch == n
    s = serving("llama-3-8b", H100, tp=1, prompt=128, output=932, batch=n)
    expected = s.batch_prefill_s + max(n * 932 / n, 3968) * s.decode_step_s
    assert r.phases["generation"] == pytest.approx(expected, rel=1e-9)


def test_update_and_forward_passes_from_the_flops_by_hand():
    """Update: tokens x 6 N-ish FLOPs at the calibrated MFU. Written out for measured responses of 896, 1,920
    and 3,968 tokens after a 128-token prompt: sequences of 1,024, 2,048 and 4,096, packed (each attends
    to itself): per token the attention of one sequence of (1,024^2 + 2,048^2 + 4,096^2) / 7,168 = 3,072
    tokens, not the row's 4,096. 2,048 rollouts, 7,168 / 3 tokens each; the forward passes (old policy,
    reference) cost the forward's share, ~1/3 of the update."""
    from llmsizing.flops import training_flops_per_token
    from llmsizing.time_cost import training_time

    r = rl_run("llama-3-8b", gpu=H100, n_gpus=16, prompts_per_step=2048, samples_per_prompt=1, prompt=128,
               response=[896, 1920, 3968], steps=1, gen_tp=1)
    assert r.attention_seq == 3072
    tokens = 2048 * 7168 / 3
    t = training_time("llama-3-8b", tokens=tokens, gpu=H100, n_gpus=16, seq=3072)
    flops = tokens * training_flops_per_token("llama-3-8b", seq=3072)
    by_hand = flops / (16 * get_gpu(H100).bf16_dense_tflops * 1e12 * t.mfu)
    assert r.phases["update"] == pytest.approx(by_hand, rel=1e-6)
    assert 0.30 < r.phases["log_probs"] / r.phases["update"] < 0.36
    assert r.phases["reference"] == r.phases["log_probs"]
    assert r.phases["values"] == 0
    padded = rl_run("llama-3-8b", gpu=H100, n_gpus=16, prompts_per_step=2048, samples_per_prompt=1,
                    prompt=128, response=[896, 1920, 3968], steps=1, gen_tp=1, packing=False)
    assert padded.attention_seq == 4096 and padded.phases["update"] > r.phases["update"]


def test_ppo_adds_a_critic_and_a_reward_model_adds_its_forward():
    kw = dict(gpu=H100, n_gpus=8, prompts_per_step=64, samples_per_prompt=4, prompt=256, response=1024,
              steps=1, gen_tp=1)
    g = rl_run("llama-3-8b", **kw)
    p = rl_run("llama-3-8b", algorithm="ppo", **kw)
    assert p.phases["values"] == pytest.approx(g.phases["log_probs"])
    assert p.phases["update"] == pytest.approx(2 * g.phases["update"])
    rm = rl_run("llama-3-8b", reward_model="llama-3-8b", **kw)
    assert rm.phases["reward"] == pytest.approx(g.phases["log_probs"])
    no_ref = rl_run("llama-3-8b", reference=False, reward_s=3.0, **kw)
    assert no_ref.phases["reference"] == 0 and no_ref.phases["reward"] == 3.0


def test_ppo_sends_the_critic_to_the_host_too():
    """Colocated PPO offloads the critic's model states as it does the policy's (``offload`` applies to both;
    verl's and OpenRLHF's offload options are per model). FSDP over 16
    GPUs: 16 bytes x 8,030,261,248 parameters / 16 = 8.03e9 bytes per GPU per model; GRPO's trip there and
    back over the H100's PCIe Gen5 x16 is 2 x 8.03e9 / 63.0e9 B/s = 0.255 s, PPO's (two models) 0.510 s. Without offload the states kept
    beside the engine double too (7.48 -> 14.96 GiB)."""
    kw = dict(gpu=H100, n_gpus=16, prompts_per_step=128, samples_per_prompt=16, prompt=128,
              response=(932, 3968), steps=1)
    per_model = 16 * 8_030_261_248 / 16
    g, p = rl_run("llama-3-8b", **kw), rl_run("llama-3-8b", algorithm="ppo", **kw)
    assert g.moves["trainer_offload"] == pytest.approx(2 * per_model / PCIE5, rel=1e-9)
    assert p.moves["trainer_offload"] == pytest.approx(2 * 2 * per_model / PCIE5, rel=1e-9)
    assert p.state_bytes_per_gpu == pytest.approx(2 * per_model, rel=1e-9)
    assert p.moves["sync"] == g.moves["sync"]     # the engines still get one model's weights
    kept = rl_run("llama-3-8b", algorithm="ppo", offload=False, **kw)
    assert kept.state_bytes_per_gpu == pytest.approx(2 * per_model, rel=1e-9)
    assert kept.engine_max_batch < rl_run("llama-3-8b", offload=False, **kw).engine_max_batch


def test_ppo_trainer_peak_holds_the_critic_where_it_stays_on_the_gpu():
    """review26 M2: while the policy trains, a critic that is not offloaded holds its model states on the same
    GPUs (verl's PPO colocates actor and critic workers; their FSDP offload is off by default). Mixed-precision
    AdamW keeps 2 (bf16 weights) + 2 (bf16 gradients) + 4 (fp32 master) + 8 (two fp32 moments) = 16 bytes per
    parameter, sharded by FSDP over the trainer's GPUs: Llama-3-8B's 8,030,261,248 parameters give
    16 x 8,030,261,248 / 16 = 8.03e9 bytes per GPU on 16 GPUs, 16 x 8,030,261,248 / tg on a trainer pool of tg.
    The critic's activations are freed (the two models train one after the other), so the peak grows by its
    states alone: colocated without offload by 8.03e9, on split pools by 1.285e11 / tg; colocated with
    offload not at all (the critic waits on the host)."""
    n_params = 8_030_261_248
    kw = dict(gpu=H100, n_gpus=16, prompts_per_step=128, samples_per_prompt=16, prompt=128,
              response=(932, 3968), steps=1)
    for extra in (dict(offload=False), dict(colocated=False, gen_tp=1, gen_gpus=4),
                  dict(colocated=False)):
        g, p = rl_run("llama-3-8b", **kw, **extra), rl_run("llama-3-8b", algorithm="ppo", **kw, **extra)
        assert p.train_gpus == g.train_gpus
        critic = 16 * n_params / p.train_gpus
        assert p.train_bytes_per_gpu - g.train_bytes_per_gpu == pytest.approx(critic, rel=1e-9)
        assert p.fits == (p.train_bytes_per_gpu <= p.memory_bytes_per_gpu and p.engine_max_batch >= 1)
    assert rl_run("llama-3-8b", colocated=False, gen_tp=1, gen_gpus=4, **kw).train_gpus == 12
    off = dict(offload=True)
    assert (rl_run("llama-3-8b", algorithm="ppo", **kw, **off).train_bytes_per_gpu
            == rl_run("llama-3-8b", **kw, **off).train_bytes_per_gpu)


def test_split_pools_broadcast_the_weights_and_async_overlaps():
    """Split: the 16-bit weights (2 bytes x 8.03e9 parameters = 16.1 GB) cross one 400 Gb/s NIC
    (50 GB/s one way; at most 1/0.4 slower at the link's achievable share), so the sync takes 0.32-0.8 s.
    Asynchronous: the step is the longer side plus the sync."""
    m = resolve_model("llama-3-8b")
    w = 2 * m.n_params
    kw = dict(gpu=H100, n_gpus=16, prompts_per_step=128, samples_per_prompt=16, prompt=128,
              response=(932, 3968), steps=1, colocated=False, gen_tp=1, gen_gpus=8)
    on = rl_run("llama-3-8b", **kw)
    off = rl_run("llama-3-8b", off_policy_steps=1, **kw)
    sync = on.phases["weight_sync"]
    assert w / 50e9 <= sync <= w / 20e9
    train_side = sum(v for k, v in off.phases.items() if k not in ("generation", "weight_sync"))
    assert off.step_s == pytest.approx(max(off.phases["generation"], train_side) + sync)
    assert on.step_s == pytest.approx(sum(on.phases.values()))
    assert off.step_s < on.step_s
    assert on.gen_gpus == 8 and on.train_gpus == 8


def test_gpu_hours_and_range_order():
    r = rl_run("llama-3-8b", gpu=H100, n_gpus=16, prompts_per_step=128, samples_per_prompt=16, prompt=128,
               response=(932, 3968), steps=500)
    assert r.gpu_hours == pytest.approx(r.step_s * 500 * 16 / 3600)
    assert r.gpu_hours_low < r.gpu_hours < r.gpu_hours_high
    assert r.fits and r.cost_usd == pytest.approx(r.gpu_hours * r.price_usd_per_gpu_hour)
    frame = r.to_frame()
    assert list(frame.index) == list(r.phases) and frame["share"].sum() == pytest.approx(1.0)


def test_memory_does_not_fit_a_405b_trainer_on_eight_gpus():
    """405e9 parameters x 16 bytes of mixed-precision AdamW states / 8 GPUs = 810 GB per GPU > 80 GB."""
    r = rl_run("llama-3.1-405b", gpu=H100, n_gpus=8, prompts_per_step=8, samples_per_prompt=2, prompt=128,
               response=256, steps=1, gen_tp=8)
    assert not r.fits and r.train_bytes_per_gpu > 405e9 * 16 / 8 * 0.95


def test_response_lengths():
    assert response_lengths(1000) == (1000.0, 1000)
    assert response_lengths((600.5, 4096)) == (600.5, 4096)
    assert response_lengths([100, 200, 600]) == (300.0, 600)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_gpus=0), "n_gpus"),
    (dict(algorithm="dpo"), "algorithm"),
    (dict(response=(5000, 100)), "mean <= longest"),
    (dict(response=[1]), "response"),
    (dict(off_policy_steps=1), "off_policy_steps"),
    (dict(gen_gpus=4), "gen_gpus"),
    (dict(prompts_per_step=0), "prompts_per_step"),
    (dict(gen_tp=64), "gen_tp"),
    (dict(gen_tp=3), "gen_tp=3"),
    (dict(colocated=False, gen_gpus=8, gen_tp=1), "gen_gpus"),
])
def test_bad_inputs_name_the_parameter(kwargs, match):
    base = dict(gpu=H100, n_gpus=8, prompts_per_step=16, samples_per_prompt=4, prompt=128, response=512)
    with pytest.raises(ValueError, match=match):
        rl_run("llama-3-8b", **(base | kwargs))


def test_bad_types():
    with pytest.raises(TypeError, match="response"):
        response_lengths(True)
    with pytest.raises(TypeError, match="response"):
        response_lengths(12.5)


def test_published_rows_carry_source_and_as_of_and_the_r1_hours():
    d = pd.read_csv(PUBLISHED_CSV)
    assert d["source"].notna().all() and d["as_of"].notna().all()
    checked = d[d["checked"] == "yes"]
    cols = ["rollouts_per_step", "prompt_tokens", "response_mean", "response_max", "step_s", "reference"]
    assert checked[cols].notna().all().all()
    r1 = d[d["run"].str.startswith("DeepSeek-R1-Zero")].iloc[0]
    assert r1["gpu_hours"] == 64 * 8 * 198          # 64 eight-GPU H800 nodes for about 198 hours



def test_r1_zero_recipe_bounds_its_lengths():
    """DeepSeek-R1 (Nature 2025), Methods: 16 responses to each of 32 questions per policy step; each rollout
    writes 8,192 responses and trains on them in 16 mini-batches; 10,400 steps; responses capped at 32,768
    tokens until step 8,200. By hand: 198 h x 3,600 / 10,400 = 68.5 s per policy step, x 16 = 1,096.6 s per
    rollout. Chapter 19 says that at the cap the rollout's generation alone, even at the fast end of the serving
    range, is longer than that; this fails when the serving model moves enough to make the sentence false."""
    d = pd.read_csv(PUBLISHED_CSV)
    r1 = d[d["run"].str.startswith("DeepSeek-R1-Zero")].iloc[0]
    assert (r1["rollouts_per_step"], r1["response_max"], r1["checked"]) == (8192, 32768, "no")
    per_rollout_s = 198 * 3600 / (10_400 / 16)
    assert per_rollout_s == pytest.approx(1096.6, abs=0.05)
    assert 198 * 3600 / 10_400 == pytest.approx(68.5, abs=0.05)
    r = rl_run("deepseek-v3", gpu="H800", n_gpus=512, prompts_per_step=512, samples_per_prompt=16, prompt=512,
               response=(4000, 32768), steps=1, gen_tp=32)
    assert r.rollouts == 8192 and r.decode_steps == 32768          # the tail, not the mean, sets the steps
    assert r.phases_low["generation"] > per_rollout_s

def test_leave_one_source_out_factor_is_the_other_sources_median():
    d = rl_loso()
    for key, rows in d.groupby("source_key"):
        others = d[d["source_key"] != key]["ratio"]
        expected = math.exp(statistics.median([math.log(x) for x in others]))
        assert rows["factor"].to_numpy() == pytest.approx(expected)
        assert rows["loso_ratio"].to_numpy() == pytest.approx(rows["ratio"].to_numpy() / expected)
    p = published_rl()
    assert p.loc[p["checked"] == "yes", "predicted_step_s"].notna().all()


def test_cli_rl_prints_the_library_and_refuses_bad_input(capsys):
    from llmsizing.cli import main

    argv = ["rl", "llama-3-8b", "--gpus", "16", "--prompts", "128", "--prompt", "128", "--response", "932",
            "--max-response", "3968", "--steps", "1000"]
    assert main(argv) == 0
    r = rl_run("llama-3-8b", gpu=H100, n_gpus=16, prompts_per_step=128, prompt=128, response=(932, 3968),
               steps=1000)
    out = capsys.readouterr().out
    assert f"{r.gpu_hours:,.0f} GPU-hours" in out and "generation" in out
    assert main([*argv[:-4], "--max-response", "100"]) == 2
    assert "mean <= longest" in capsys.readouterr().err



def test_the_published_phase_split_of_miles_on_mi300x():
    """LMSYS's Miles blog (Figure 5): Qwen3-30B-A3B GRPO on 8 MI300X, 256 rollouts capped at 8k tokens, mean
    step 388.50 s of which rollout 152.79 s. The phases it lists add up to 152.79 + 31.53 + 95.30 + 33.85 =
    313.47 s, so 75.03 s are not broken down. The generation phase lands inside the serving model's range;
    the trainer's phases do not (recorded here so that a change of either shows)."""
    d = published_rl()
    m = d[d["run"].str.contains("Miles")].iloc[0]
    assert m["published_generation_s"] + m["published_log_probs_s"] + m["published_update_s"] + \
        m["published_sync_s"] == pytest.approx(313.47)
    assert m["low_generation_s"] <= 152.79 <= m["high_generation_s"]
    assert m["high_update_s"] < 95.30 and m["high_log_probs_s"] < 31.53
