"""The multi-token-prediction (MTP) module as a model option (issue 35, "MTP: FLOPs and memory as a model
option"): training_memory, training_time, Job and the memory/time CLI take mtp_depth, with the MTP module
priced as DeepSeek-V3's report describes it (arXiv:2412.19437, Sec. 2.2, Fig. 3: one more MoE transformer
block plus its projection M from 2h to h, sharing the embedding and the output head, on the last pipeline
stage with the head, Sec. 3.2.1). plan() searches with it too: tests/test_plan_mtp.py.

The expected values are derived here by hand from DeepSeek-V3's config.json (hidden 7,168, 128 heads, MLA
ranks 1,536 / 512, rope 64, nope 128, v 128, 256 routed + 1 shared experts of 2,048, vocabulary 129,280) and
the report's parameter counts (671B for the main model, 685B with the MTP module's weights)."""

import pytest

import llmsizing as L
from llmsizing import cli
from llmsizing.deepseek import DEEPSEEK_V3_LAYOUT
from llmsizing.job import Job
from llmsizing.layouts import step_time
from llmsizing.memory import training_memory
from llmsizing.time_cost import training_time

H, V, T = 7168, 129280, 4096
# DeepSeek-V3 as the report runs it, on its own layout (PP 16, EP 64, DP 128), 1F1B here
V3 = dict(batch=1, seq=T, grad_accum=32, parallel=DEEPSEEK_V3_LAYOUT, precision="fp8-deepseek")
# a small MoE whose layouts are cheap to price: Qwen3-30B-A3B on 4 nodes of H100
QWEN = "qwen3-30b-a3b"
QPAR = L.Parallel(pp=2, dp=16, ep=8, zero=1)


def _v3_block_params():
    """One DeepSeek-V3 MoE block by hand: MLA (q down/up with its norm, kv down/up with its norm, output),
    257 experts of three 7,168 x 2,048 matrices, the router (7,168 x 256 and its 256 bias terms) and the
    block's two RMSNorms."""
    a = 128
    mla = (H * 1536 + 1536 + 1536 * a * (128 + 64) + H * (512 + 64) + 512 + 512 * a * (128 + 128)
           + a * 128 * H)
    return mla + 257 * 3 * H * 2048 + H * 256 + 256 + 2 * H


@pytest.fixture(scope="module")
def v3_stages():
    return (training_memory("deepseek-v3", _all_stages=True, **V3),
            training_memory("deepseek-v3", _all_stages=True, mtp_depth=1, **V3))


def test_the_mtp_block_adds_one_moe_blocks_parameters_and_the_report_counts_14b(v3_stages):
    base, mtp = v3_stages
    block, proj = _v3_block_params(), 2 * H * H + 2 * H
    assert mtp[-1].states.n_params - base[-1].states.n_params == block
    # 685B - 671B = 14B of MTP weights in the report (each rounded to 1B): its block, its projection and the
    # copies of the embedding and head its checkpoint stores (shared in training)
    assert block + proj + 2 * V * H == pytest.approx(14e9, abs=1e9)
    # the first stage is untouched (to rounding: the per-layer mean and the stage's offset are over 62 layers
    # now): the module sits with the head on the last one, whose saved layers grow by one MoE layer's
    assert mtp[0].total_bytes == pytest.approx(base[0].total_bytes, rel=1e-12)
    last, last0 = mtp[-1].activations, base[-1].activations
    assert last.layer_count == last0.layer_count + 1
    assert last.layers_bytes / last.layer_count == pytest.approx(last0.layers_bytes / last0.layer_count,
                                                                 rel=1e-12)


def test_the_last_stage_holds_a_second_heads_logits_and_the_next_tokens_embedding(v3_stages):
    base, mtp = v3_stages
    one_head = base[-1].activations.logits_bytes
    # fp32 log-probabilities of 4,096 tokens, plus the final norm's input (about 4 h bytes a token)
    assert one_head == pytest.approx(4 * V * T + 4 * H * T, rel=0.001)
    assert mtp[-1].activations.logits_bytes - 2 * one_head == 2 * H * T   # + the BF16 embedding input
    assert mtp[-1].total_bytes > base[-1].total_bytes


def test_the_mtp_projection_states_are_its_parameters_in_the_recipe(v3_stages):
    """The projection (2h x h, two 7,168 norms: 102.8M parameters) is priced with the recipe's bytes: the
    last stage's model states grow by the block's share on this GPU plus the projection's whole (tp 1)."""
    base, mtp = v3_stages
    grew = mtp[-1].states.total_bytes - base[-1].states.total_bytes
    proj = 2 * H * H + 2 * H
    # fp8-deepseek: BF16 weights 2 + an FP8 copy of the Linear weight 1 + FP32 gradients 4, and at least the
    # FP32 master and BF16 moments (4 + 4) sharded over dp 128: more than 7 bytes per projection parameter
    assert grew > 7 * proj


def test_training_memory_flops_grow_by_the_3_8_percent_of_the_report(v3_stages):
    base, mtp = v3_stages
    assert mtp[-1].flops_per_token / base[-1].flops_per_token == pytest.approx(1.038, abs=0.0015)


def test_depth_zero_is_the_old_call_bit_for_bit():
    kw = dict(batch=1, seq=T, parallel=QPAR, grad_accum=4)
    assert training_memory(QWEN, mtp_depth=0, **kw) == training_memory(QWEN, **kw)
    t = dict(tokens=1e12, gpu="H100 SXM", seq=T, parallel=QPAR, global_batch=512)
    assert training_time(QWEN, mtp_depth=0, **t) == training_time(QWEN, **t)


def test_training_time_on_a_layout_is_step_time_with_the_mtp_module():
    t = training_time(QWEN, tokens=1e12, gpu="H100 SXM", seq=T, parallel=QPAR, global_batch=512,
                      mtp_depth=1)
    s = step_time(QWEN, "H100 SXM", QPAR, batch=1, seq=T, grad_accum=32, mtp_depth=1)
    s0 = step_time(QWEN, "H100 SXM", QPAR, batch=1, seq=T, grad_accum=32)
    assert t.mfu == pytest.approx(s.mfu, rel=1e-12)
    assert s.step_s > s0.step_s
    kw = dict(batch=1, seq=T, parallel=QPAR, grad_accum=32, _all_stages=True)
    assert (training_memory(QWEN, mtp_depth=1, **kw)[-1].total_bytes        # the last of the two stages
            > training_memory(QWEN, **kw)[-1].total_bytes)


def test_training_time_without_a_layout_plans_it_with_the_module():
    """(issue 35, one MoE path: the layout was planned without the module before plan() searched it) the
    run is the step of plan(mtp_depth=1)'s fastest plan on exactly the GPUs given."""
    t = training_time(QWEN, tokens=1e12, gpu="H100 SXM", seq=T, n_gpus=64, mtp_depth=1)
    t0 = training_time(QWEN, tokens=1e12, gpu="H100 SXM", seq=T, n_gpus=64)
    assert t.gpu_hours > t0.gpu_hours
    assert "1 MTP module" in t.warnings[0] and "without" not in t.warnings[0]
    df = L.plan(QWEN, tokens=1e12, gpus=("H100 SXM",), seq=T, global_batch=1024, max_gpus=64,
                recomputes=("none",), mtp_depth=1)
    r = df[df["n_gpus"] == 64].sort_values("step_time_s").iloc[0]
    job = Job.from_plan_row(r, QWEN, seq=T, mtp_depth=1)
    assert t.mfu == pytest.approx(step_time(job).mfu, rel=1e-9)


@pytest.mark.parametrize("kw", [dict(mfu=0.3), dict(moe_dense_mfu=True)])
def test_training_time_refuses_mtp_off_the_moe_step(kw):
    with pytest.raises(ValueError, match="mtp_depth=1"):
        training_time(QWEN, tokens=1e12, gpu="H100 SXM", seq=T, n_gpus=64, mtp_depth=1, **kw)


@pytest.mark.parametrize("bad", [-1, 9, 1.5, True])
def test_mtp_depth_out_of_range_is_refused(bad):
    with pytest.raises((ValueError, TypeError), match="mtp_depth"):
        training_memory(QWEN, batch=1, seq=T, mtp_depth=bad)


def test_a_dense_model_has_no_mtp_module():
    for call in (lambda: training_memory("llama-3-8b", batch=1, seq=T, mtp_depth=1),
                 lambda: training_time("llama-3-8b", tokens=1e12, gpu="H100 SXM", seq=T, n_gpus=64,
                                       mtp_depth=1),
                 lambda: Job("llama-3-8b", "H100 SXM", T, mtp_depth=1)):
        with pytest.raises(ValueError, match="mtp_depth=1.*dense"):
            call()


def test_a_job_carries_mtp_depth_to_memory_step_and_time():
    job = Job(QWEN, "H100 SXM", T, QPAR, grad_accum=32, mtp_depth=1)
    assert step_time(job) == step_time(QWEN, "H100 SXM", QPAR, batch=1, seq=T, grad_accum=32, mtp_depth=1)
    assert training_memory(job) == training_memory(QWEN, batch=1, seq=T, parallel=QPAR, grad_accum=32,
                                                   mtp_depth=1)
    assert training_time(job, tokens=1e12) == training_time(QWEN, tokens=1e12, gpu="H100 SXM", seq=T,
                                                           parallel=QPAR, global_batch=512, mtp_depth=1)
    assert Job(QWEN, "H100 SXM", T, QPAR).kwargs("step") == Job(QWEN, "H100 SXM", T, QPAR,
                                                               mtp_depth=0).kwargs("step")


def test_plan_takes_mtp_from_a_job():
    """(issue 35: plan() refused mtp_depth > 0; it now prices the module, tests/test_plan_mtp.py)"""
    kw = dict(tokens=1e12, max_gpus=128, micro_batches=(1,))
    got = L.plan(Job(QWEN, "H100 SXM", T, QPAR, grad_accum=32, mtp_depth=1), **kw)
    assert got.equals(L.plan(QWEN, gpus=("H100 SXM",), seq=T, global_batch=512, mtp_depth=1, **kw))
    assert "mtp_depth=1" in got.attrs["assumes"]


def test_the_cli_takes_mtp_depth(capsys):
    assert cli.main(["time", QWEN, "--tokens", "1T", "--gpu", "H100 SXM", "--gpus", "64", "--seq", "4096",
                     "--mtp-depth", "1"]) == 0
    assert "1 MTP module" in capsys.readouterr().out
    argv = ["memory", QWEN, "--batch", "1", "--seq", "4096", "--dp", "16", "--pp", "2", "--ep", "8",
            "--zero", "1", "--grad-accum", "32", "--json"]
    assert cli.main(argv) == 0
    base = capsys.readouterr().out
    assert cli.main(argv + ["--mtp-depth", "1"]) == 0
    assert capsys.readouterr().out != base
    assert cli.main(["memory", "llama-3-8b", "--batch", "1", "--seq", "4096", "--mtp-depth", "1"]) == 2
    assert "dense" in capsys.readouterr().err


# ---- capacity_factor as a model option (issue 35's load balance: token dropping at an expert capacity)


def test_capacity_one_means_no_rank_above_its_mean_share():
    """At capacity factor 1 an expert takes at most its mean share of the tokens (Switch Transformer,
    Fedus et al. 2021, Sec. 2.2: capacity = tokens per batch / experts x capacity factor), so the slowest
    expert-parallel rank does the mean work: a load skew of exactly 1."""
    kw = dict(batch=1, seq=T, grad_accum=32)
    at_one = step_time(QWEN, "H100 SXM", QPAR, capacity_factor=1.0, **kw)
    assert at_one == step_time(QWEN, "H100 SXM", QPAR, load_skew=1.0, **kw)
    assert at_one.step_s < step_time(QWEN, "H100 SXM", QPAR, **kw).step_s      # dropless: skewed
    with pytest.raises(ValueError, match="capacity_factor"):
        step_time(QWEN, "H100 SXM", QPAR, capacity_factor=1.0, load_skew=1.1, **kw)
    with pytest.raises(ValueError, match="capacity_factor"):
        step_time("llama-3-8b", "H100 SXM", L.Parallel(dp=8), capacity_factor=1.0, **kw)


def test_capacity_sizes_the_expert_buffers_linearly_and_one_is_dropless():
    """Dropless buffers hold the tokens' k copies exactly (Megatron-Core's dropless dispatcher), a capacity
    factor c pads every expert to c times its mean share: the expert rows, so the bytes above the rest of
    the step, grow as c."""
    kw = dict(batch=1, seq=T, parallel=QPAR, grad_accum=32)
    acts = {c: training_memory(QWEN, capacity_factor=c, **kw).activations.total_bytes
            for c in (1.0, 1.5, 2.0)}
    assert acts[1.0] == training_memory(QWEN, **kw).activations.total_bytes
    assert acts[2.0] - acts[1.5] == pytest.approx(acts[1.5] - acts[1.0], rel=1e-12)
    assert acts[2.0] > acts[1.0]
    with pytest.raises(ValueError, match="capacity_factor"):
        training_memory(QWEN, capacity_factor=0.5, **kw)


def test_capacity_reaches_training_time_job_and_the_cli(capsys):
    t = training_time(QWEN, tokens=1e12, gpu="H100 SXM", seq=T, parallel=QPAR, global_batch=512,
                      capacity_factor=1.0)
    s = step_time(QWEN, "H100 SXM", QPAR, batch=1, seq=T, grad_accum=32, capacity_factor=1.0)
    assert t.mfu == pytest.approx(s.mfu, rel=1e-12)
    job = Job(QWEN, "H100 SXM", T, QPAR, grad_accum=32, capacity_factor=1.0)
    assert step_time(job) == s
    assert training_time(job, tokens=1e12) == t
    with pytest.raises(ValueError, match="capacity_factor"):
        Job("llama-3-8b", "H100 SXM", T, capacity_factor=1.0)
    with pytest.raises(ValueError, match="capacity_factor=1.0"):
        training_time(QWEN, tokens=1e12, gpu="H100 SXM", seq=T, n_gpus=64, capacity_factor=1.0, mfu=0.3)
    assert cli.main(["time", QWEN, "--tokens", "1T", "--gpu", "H100 SXM", "--gpus", "64", "--seq", "4096",
                     "--capacity-factor", "1.25"]) == 0
    assert "capacity factor 1.25" in capsys.readouterr().out
