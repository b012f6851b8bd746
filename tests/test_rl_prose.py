"""Chapter 19's RL runs in sentences (llmsizing.rl_prose, issue 38). Expected texts are worked by hand from
the published rows (data/rl_published.csv: NeMo RL's Llama 3.1 8B row, verl's DeepSeek-V3 row) or from first
principles; none is copied from the code's output."""

import pandas as pd
import pytest

from llmsizing import rl_prose
from llmsizing.prose import ProseOutOfDate
from llmsizing.rl import PUBLISHED_CSV


@pytest.fixture(scope="module")
def default():
    return rl_prose.default_run_prose()


def test_the_default_run_is_nemo_rls_row(default):
    text = default
    results = text.data
    v = text.values
    assert v["rollouts"] == "2,048"                 # 128 prompts x 16 samples
    assert (v["mean"], v["cap"], v["l8_prompt"]) == ("932", "3,968", "128")   # the row's lengths
    assert v["l8_seq_mean"] == "1,060" and v["l8_seq_cap"] == "4,096"        # prompt + response
    assert v["default_pub"] == "97.7"                # NeMo RL v0.4's published step, seconds
    assert v["host_gbps"] == "63.0"                  # PCIe Gen5 x16: 32 GT/s * 16 * 128/130 / 8 bits
    assert v["host_gbps_a100"] == "31.5"             # Gen4: half that
    assert results["base"].train_layout is None and results["layout"].train_layout == (1, 1, 1, 1)
    assert "generation" in text.report


def test_decode_stays_memory_bound_at_the_default_runs_mean_context(default):
    # the mean context of a mean response: the 128-token prompt and half of 932 tokens
    assert default.values["dec_ctx"] == "594"
    # by hand (Llama 3 8B, H100 SXM): a decode step multiplies 2 x 7.505e9 non-embedding weights per token
    # (8,030,261,248 less the 128,256 x 4,096 input table) and reads each sequence's KV cache, 2 (K and V) x
    # 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 bytes a token. Batching shares the weights' read, so
    # the step's intensity rises towards the KV cache's alone, F / (M_tok s), below the ridge point here
    flops = 2 * (8_030_261_248 - 128_256 * 4_096)
    kv_limit = flops / (131_072 * 594)                 # ~193 FLOP/byte
    ridge = 989.4e12 / 3.35e12                         # dense BF16 peak / HBM3 bandwidth, ~295
    assert kv_limit < ridge < flops / (131_072 * 128)  # at the bare 128-token prompt a batch would turn it
    from llmsizing.hardware import decode_compute_bound_batch
    assert decode_compute_bound_batch("llama-3-8b", "H100 SXM", context=594) is None
    assert decode_compute_bound_batch("llama-3-8b", "H100 SXM", context=128) > 0


def test_the_published_check_counts_the_rows(default):
    text = rl_prose.published_check_prose(default.data)
    results = text.data
    v = text.values
    rows = pd.read_csv(PUBLISHED_CSV)
    assert v["n_rows"] == str((rows["checked"] == "yes").sum())
    assert v["verl_gh"] == "45,333"                  # verl's 1,700 s a step x 96 GPUs x 1,000 steps / 3,600
    assert len(results["checked"]) == int(v["n_rows"])
    assert "predicted_step_s" in text.report


def test_a_statement_the_numbers_no_longer_bear_out_raises(default, monkeypatch):
    # the chapter says no RL range can be measured from so few sources: a range that measures breaks it
    monkeypatch.setattr(rl_prose, "rl_interval", lambda **kw: None)
    with pytest.raises(ProseOutOfDate, match="chapter 19 says no RL range can be measured"):
        rl_prose.published_check_prose(default.data)


def test_r1_recipe_as_the_paper_gives_it():
    v = rl_prose.r1_recipe()
    # Nature SI: 64 nodes of 8 H800s for 198 hours; Methods: 16 samples of each of 32 questions a policy step,
    # 8,192 responses a round in 16 mini-batches, 10,400 steps, the cap 32,768 until step 8,200, then 65,536
    assert (v["r1z_gpus"], v["r1z_hours"], v["r1z_gh"]) == ("512", "198", "101,376")   # 64 x 8 x 198
    assert (v["r1z_samples"], v["r1z_questions"], v["r1z_policy"]) == ("16", "32", "512")   # 32 x 16
    assert (v["r1z_rollouts"], v["r1z_prompts"], v["r1z_mini"]) == ("8,192", "512", "16")   # 512 x 16
    assert (v["r1z_steps"], v["r1z_cap"], v["r1z_cap2"], v["r1z_cap_step"]) == ("10,400", "32,768", "65,536",
                                                                              "8,200")
    assert v["r1z_last"] == "2,200"                  # 10,400 - 8,200 steps at the second cap
    assert (v["r1z_mean"], v["r1z_mean2"], v["r1z_mean_half"]) == ("4,000", "8,000", "2,000")
    assert v["r1z_tp"] == "32"                       # 512 GPUs in 16 engines
    # the opening (small47): the SI's 64 eight-GPU nodes; 101,376 GPU-hours against DeepSeek-V3's published
    # 2.664M H800 GPU-hours of pre-training (arXiv:2412.19437, Table 1) = 3.81%
    assert (v["r1z_nodes"], v["r1z_node_gpus"], v["r1z_v3_share"]) == ("64", "eight", "3.8%")


def test_r1_recipe_says_when_r1_zero_is_no_longer_a_few_per_cent(monkeypatch):
    monkeypatch.setattr(rl_prose, "R1_HOURS", 198 * 2)        # 7.6% of DeepSeek-V3's pre-training
    with pytest.raises(ProseOutOfDate, match="few per cent"):
        rl_prose.r1_recipe()


def test_r1_zero_against_its_published_hours():
    text = rl_prose.r1_zero_prose()
    results = text.data
    v = text.values
    assert v["r1_rollouts"] == "8,192"               # 512 prompts x 16 samples
    assert v["r1_pub_step"] == "68.5"                # 198 h x 3,600 s / 10,400 policy steps
    assert v["r1_pub_rollout"] == "1,097"            # 16 policy steps a rollout: 712,800 s / 650
    assert results["r1"].response_max == 32768 and "mean response" in text.report
    assert v["r1_train_seq"] == "33K"                # the memory check's row: 512 + 32,768 = 33,280 tokens


def test_the_default_runs_pool_is_glued(default):
    assert default.values["pool"] == "16 H100s"      # NeMo RL v0.4's Llama 3.1 8B row: 16 H100 SXM


def test_miles_throughput_read_two_ways():
    """The blog's ~15,500 training tokens/s over its 95.30 s of training and 256 rollouts a step:
    15,500 x 95.30 / 256 = 5,770.1 tokens a rollout, 5,642.1 after the 128-token prompt; 6 x 3.3e9 x 15,500 =
    3.069e14 FLOP/s on 8 x 1,307.4 TFLOP/s (MI300X, dense BF16) = 1.0459e16: 2.93% by 6N alone. With the
    attention at a rollout's 5,770 tokens (PaLM's count, 12 L s a d: 12 x 48 x 5,770 x 32 x 128 = 13,613,137,920)
    and Qwen3-30B-A3B's active parameters without the input embedding (3,353,032,704 - 151,936 x 2,048 =
    3,041,867,776, x 6 = 18,251,206,656): 31,864,344,576 FLOPs a token x 15,500 / 1.0459e16 = 4.72%."""
    t = rl_prose.miles_throughput()
    assert t["tokens_per_rollout"] == pytest.approx(5770.1, abs=0.1)
    assert t["response_mean"] == pytest.approx(5642.1, abs=0.1)
    assert t["mfu_6n"] == pytest.approx(0.02934, abs=1e-5)
    assert t["mfu"] == pytest.approx(31_864_344_576 * 15_500 / (8 * 1307.4e12), rel=1e-3)


def test_the_typed_runs_are_their_data_rows():
    """DEFAULT_RUN and R1_ZERO (with R1_HOURS) restate rows of data/rl_published.csv: the same GPU, count,
    rollouts a step (prompts x samples), prompt and response lengths, and the R1-Zero row's GPU-hours as its
    198 hours on 512 GPUs (101,376); a revised row cannot leave the chapter's run behind."""
    rows = pd.read_csv(PUBLISHED_CSV).set_index("run")
    l8, d = rows.loc[rl_prose.L8_ROW], rl_prose.DEFAULT_RUN
    assert (d["gpu"], d["n_gpus"], d["prompt"]) == (l8["gpu"], l8["n_gpus"], l8["prompt_tokens"])
    assert d["prompts_per_step"] * d["samples_per_prompt"] == l8["rollouts_per_step"] == 2048
    assert d["response"] == (l8["response_mean"], l8["response_max"]) == (932, 3968)
    r1, z = rows.loc["DeepSeek-R1-Zero RL, 512 H800"], rl_prose.R1_ZERO
    assert (z["gpu"], z["n_gpus"]) == (r1["gpu"], r1["n_gpus"]) == ("H800", 512)
    assert z["prompts_per_step"] * z["samples_per_prompt"] == r1["rollouts_per_step"] == 8192
    assert rl_prose.R1_HOURS * z["n_gpus"] == r1["gpu_hours"] == 101_376
