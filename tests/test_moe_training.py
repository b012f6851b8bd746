"""Training a mixture of experts (issue 24): expert parallelism's layout rules, memory and all-to-all.

Expected values are hand arithmetic from the architectures' published shapes (Mixtral 8x7B: 32 layers, hidden
4,096, 8 experts of width 14,336, top-2, 46,702,792,704 parameters; DeepSeek-V3: 61 layers of which the first 3
are dense, 256 routed experts of width 2,048, top-8, hidden 7,168), the gloo measurement of an expert-parallel
all-to-all (data/moe_all_to_all_gloo.csv) and DeepSeek-V3's technical report (arXiv 2412.19437)."""

import pytest

from llmsizing import moe
from llmsizing.activations import activation_memory
from llmsizing.catalog import get_model
from llmsizing.comm import communication
from llmsizing.layouts import step_time
from llmsizing.measurements import load_moe_all_to_all
from llmsizing.memory import model_states, stage_params, training_memory
from llmsizing.parallel import Parallel
from llmsizing.time_cost import mfu_range_factors

GB = 1e9
MIXTRAL_TOTAL = 46_702_792_704
MIXTRAL_ROUTED = 32 * 8 * 3 * 4096 * 14336          # layers x experts x (gate, up, down) x h x f


# ----------------------------------------------------------------------------- layout
def test_ep_adds_no_gpus_and_old_calls_are_unchanged():
    assert Parallel(dp=8, ep=8).gpus == 8
    assert Parallel(tp=2, dp=4, pp=2).ep == 1 and Parallel(tp=2, dp=4, pp=2).gpus == 16
    assert Parallel(dp=4, cp=2, ep=8).gpus == 8                       # ep may use the cp ranks too


@pytest.mark.parametrize("kw, word", [
    (dict(dp=6, ep=4), "ep=4 must divide dp x cp"),
    (dict(dp=4, ep=0), "ep"),
    (dict(dp=4, ep=2.5), "ep"),
])
def test_ep_must_divide_dp_cp(kw, word):
    with pytest.raises((ValueError, TypeError), match=word):
        Parallel(**kw)


def test_ep_must_divide_the_experts_and_needs_a_moe():
    with pytest.raises(ValueError, match="ep=16 must divide the routed experts"):
        model_states("mixtral-8x7b", parallel=Parallel(dp=16, ep=16))
    with pytest.raises(ValueError, match="dense"):
        model_states("llama-3-8b", parallel=Parallel(dp=2, ep=2))


# ----------------------------------------------------------------------------- memory
def test_mixtral_model_states_divide_the_experts_by_ep():
    m = get_model("mixtral-8x7b")
    assert m.n_params == MIXTRAL_TOTAL and m.routed_expert_params == MIXTRAL_ROUTED
    dense = MIXTRAL_TOTAL - MIXTRAL_ROUTED
    # bf16-mixed AdamW, no ZeRO: 16 bytes per parameter held, the experts 1/8 of them with ep=8
    st = model_states(m, parallel=Parallel(dp=8, ep=8))
    assert st.total_bytes == pytest.approx(16 * (dense + MIXTRAL_ROUTED / 8), rel=1e-12)
    # ZeRO-1: the 12 optimizer bytes shard over dp=8 for the dense part, over dp/ep = 1 for the experts
    st1 = model_states(m, parallel=Parallel(dp=8, ep=8, zero=1))
    assert st1.total_bytes == pytest.approx(4 * (dense + MIXTRAL_ROUTED / 8) + 12 * (dense / 8 + MIXTRAL_ROUTED / 8),
                                            rel=1e-12)
    # ... and over dp/ep = 4 with dp=16, ep=4
    st2 = model_states(m, parallel=Parallel(dp=16, ep=4, zero=1))
    assert st2.total_bytes == pytest.approx(4 * (dense + MIXTRAL_ROUTED / 4) + 12 * (dense / 16 + MIXTRAL_ROUTED / 16),
                                            rel=1e-12)
    # ep=1: the whole model on the GPU, as a dense model's states would be
    assert model_states(m).total_bytes == pytest.approx(16 * MIXTRAL_TOTAL, rel=1e-12)


def test_expert_tp_splits_the_experts_over_tp_too():
    m = get_model("mixtral-8x7b")
    off = stage_params(m, Parallel(tp=2, dp=4, ep=4))
    on = stage_params(m, Parallel(tp=2, dp=4, ep=4, expert_tp=True))
    assert off[0] - on[0] == pytest.approx(MIXTRAL_ROUTED / 4 - MIXTRAL_ROUTED / 8, rel=1e-12)


def test_deepseek_v3_moe_layers_per_stage():
    # 61 layers over 16 stages: 13 stages of 4, 3 of 3 (Megatron's even split); layers 0-2 dense (stage 0)
    got = moe.stage_moe_layers(get_model("deepseek-v3"), Parallel(pp=16, dp=128, ep=64))
    assert got == (1,) + (4,) * 12 + (3,) * 3


def test_moe_layer_activations_by_hand():
    m = get_model("mixtral-8x7b")
    t, h, e, k, f = 1024, 4096, 8, 2, 14336
    terms = moe.moe_layer_terms(m, batch=1, seq=t)
    assert terms["router"] == 2 * t * h + 9 * t * e + 4 * t * k       # bf16 input, fp32 logits+scores, map, probs
    assert terms["dispatch"] == 2 * t * k * h
    assert terms["experts"] == 4 * 2 * t * k * f                      # gated: 4 bf16 numbers per intermediate
    assert terms["combine"] == 2 * t * k * h
    assert terms["shared"] == 0
    capped = moe.moe_layer_terms(m, batch=1, seq=t, capacity_factor=1.25)
    assert capped["dispatch"] == pytest.approx(1.25 * terms["dispatch"])
    with pytest.raises(ValueError, match="capacity_factor"):
        moe.moe_layer_terms(m, batch=1, seq=t, capacity_factor=0.5)


def test_moe_activations_replace_the_dense_mlp_term():
    m = get_model("mixtral-8x7b")
    twin = activation_memory(moe.dense_twin(m), batch=1, seq=1024)
    acts = activation_memory(m, batch=1, seq=1024)
    t, h, k, f = 1024, 4096, 2, 14336
    dense_mlp = 2 * t * h + 8 * t * f              # the twin's MLP: fc1 input + 4 bf16 numbers per element
    moe_layer = (2 * t * h + 9 * t * 8 + 4 * t * k) + 2 * t * k * h + 8 * t * k * f + 2 * t * k * h
    assert acts.total_bytes - twin.total_bytes == pytest.approx(32 * (moe_layer - dense_mlp), rel=1e-12)


def test_training_memory_of_a_moe_is_modelled():
    r = training_memory("mixtral-8x7b", batch=1, seq=4096, parallel=Parallel(dp=8, ep=8, zero=1))
    assert r.total_bytes > r.states.total_bytes > 0


# ----------------------------------------------------------------------------- the all-to-all
def test_all_to_all_bytes_match_the_gloo_uniform_expectation_and_measurement():
    df = load_moe_all_to_all()
    for _, r in df.iterrows():
        want = moe.all_to_all_bytes(r["tokens_per_rank"], r["top_k"], r["hidden"], r["bytes_per_element"], r["ep"])
        assert want == pytest.approx(r["uniform_expected_bytes"], rel=1e-12)
    # measured: the mean over ranks of the real router's bytes is within 3% of the uniform expectation ...
    real = df[df.routing == "hf-init"].groupby(["ep", "tokens_per_rank", "dtype", "phase"])
    for _, sub in real:
        uniform = sub["uniform_expected_bytes"].iloc[0]
        for ex in ("dispatch", "combine"):
            assert abs(sub[f"{ex}_sent_bytes"].mean() / uniform - 1) < 0.03
    # ... while a skewed router's busiest rank sends far more (load imbalance, not modelled)
    skewed = df[df.routing == "skewed"]
    assert (skewed["dispatch_sent_bytes"] / skewed["uniform_expected_bytes"]).max() > 1.15


def test_node_limited_routing_caps_the_network_share():
    # 64 GPUs in 8 nodes, top-8: 56/64 of the copies leave the node; limited to 4 nodes, 4 copies x 7/8 of 8
    assert moe.inter_node_share(8, 64, 8) == pytest.approx(56 / 64)
    assert moe.inter_node_share(8, 64, 8, max_nodes=4) == pytest.approx(4 / 8 * 7 / 8)
    assert moe.inter_node_share(8, 8, 8) == 0.0


def test_ep_collectives_of_a_step():
    c = communication("mixtral-8x7b", Parallel(dp=8, ep=8), batch=1, seq=4096, gpu="H100 SXM")
    ep = [x for x in c.collectives if x.group == "ep"]
    one = 4096 * 2 * 4096 * 2 * 7 / 8            # tokens x k x hidden x bf16 x (ep-1)/ep
    assert sum(x.bytes_per_gpu for x in ep) == pytest.approx(4 * 32 * one, rel=1e-12)
    assert all(x.link != "network" for x in ep)  # 8 GPUs: inside one node
    # expert gradients reduce over dp/ep = 1 GPU: nothing; the dense part over 8
    assert not any("(experts)" in x.collective for x in c.collectives)
    full = communication("mixtral-8x7b", Parallel(dp=8, ep=8), batch=1, seq=4096, gpu="H100 SXM", recompute="full")
    assert sum(x.bytes_per_gpu for x in full.collectives if x.group == "ep") == pytest.approx(6 * 32 * one)


def test_ep_overlap_hides_the_all_to_all():
    kw = dict(batch=1, seq=4096, grad_accum=8)
    par = Parallel(dp=16, ep=8)
    exposed = step_time("mixtral-8x7b", "H100 SXM", par, **kw)
    hidden = step_time("mixtral-8x7b", "H100 SXM", par, ep_overlap=1.0, **kw)
    assert exposed.exposed_by_group_s["ep"] == pytest.approx(exposed.comm_by_group_s["ep"])
    assert hidden.exposed_by_group_s["ep"] == 0.0
    assert exposed.step_s - hidden.step_s == pytest.approx(exposed.comm_by_group_s["ep"])
    with pytest.raises(ValueError, match="ep_overlap"):
        step_time("mixtral-8x7b", "H100 SXM", par, ep_overlap=1.5, **kw)


# ----------------------------------------------------------------------------- DeepSeek-V3 (done-when)
#: DeepSeek-AI 2024 (arXiv 2412.19437): 2,048 H800s, PP16, EP64 (8 nodes), ZeRO-1 over DP, no TP, FP8
#: (Sec. 3.1-3.3); batch 15,360 sequences of 4K (Sec. 4.2): 120 per data-parallel rank; 14.8T tokens for
#: 2.664M H800 GPU-hours of pre-training (Table 1).
DSV3 = Parallel(pp=16, dp=128, ep=64, zero=1)
DSV3_KW = dict(batch=1, seq=4096, grad_accum=120, precision="fp8-deepseek")


def test_deepseek_v3_layout_fits_80gb_with_recomputation():
    assert DSV3.gpus == 2048
    r = training_memory("deepseek-v3", parallel=DSV3, recompute="full", **DSV3_KW)
    assert r.total_bytes < 80 * 2 ** 30
    # without any recomputation the library's count (1F1B, 16 micro-batches of 4 layers in flight on the first
    # stage, MLA's per-head Q/K/V saved) does not fit: DeepSeek recomputes norms and MLA up-projections and
    # runs DualPipe, which the library does not model
    none = training_memory("deepseek-v3", parallel=DSV3, **DSV3_KW)
    assert none.total_bytes > 80 * 2 ** 30


def test_deepseek_v3_gpu_hours_inside_the_calibrated_band():
    st = step_time("deepseek-v3", "H800", DSV3, max_nodes=4, **DSV3_KW)
    low, high = mfu_range_factors("H800", "fp8")
    hours = 14.8e12 / st.tokens * st.step_s * 2048 / 3600
    # the band on the MFU: hours / high (faster) to hours / low (slower)
    assert hours / high <= 2.664e6 <= hours / low
