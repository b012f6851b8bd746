"""Training a mixture of experts (issue 24): expert parallelism's layout rules, memory and all-to-all.

Expected values are hand arithmetic from the architectures' published shapes (Mixtral 8x7B: 32 layers, hidden
4,096, 8 experts of width 14,336, top-2, 46,702,792,704 parameters; DeepSeek-V3: 61 layers of which the first 3
are dense, 256 routed experts of width 2,048, top-8, hidden 7,168), the gloo measurement of an expert-parallel
all-to-all (data/moe_all_to_all_gloo.csv) and DeepSeek-V3's technical report (arXiv 2412.19437)."""

import pytest

from llmsizing import deepseek, moe
from llmsizing.activations import activation_memory
from llmsizing.catalog import get_model
from llmsizing.comm import communication
from llmsizing.layouts import step_time
from llmsizing.measurements import load_moe_all_to_all
from llmsizing.memory import model_states, stage_params, training_memory
from llmsizing.parallel import Parallel

GB = 1e9
MIXTRAL_TOTAL = 46_702_792_704
MIXTRAL_ROUTED = 32 * 8 * 3 * 4096 * 14336          # layers x experts x (gate, up, down) x h x f


# ----------------------------------------------------------------------------- layout
def test_ep_adds_no_gpus_and_old_calls_are_unchanged():
    assert Parallel(dp=8, ep=8).gpus == 8
    assert Parallel(tp=2, dp=4, pp=2).ep == 1 and Parallel(tp=2, dp=4, pp=2).gpus == 16
    assert Parallel(dp=4, cp=2, ep=8).gpus == 8                       # ep may use the cp ranks too
    assert Parallel(tp=8, ep=8, sp=True).gpus == 8                    # ... and the tp ranks (etp = 1)


def test_ep_comes_out_of_megatrons_expert_grid():
    # Megatron-Core: expert_data_parallel_size = world / (etp x ep x pp); etp = 1 lets ep span the tp ranks
    assert Parallel(tp=8, dp=1, ep=8, sp=True).edp == 1
    assert Parallel(tp=8, dp=4, ep=8, sp=True).edp == 4
    assert Parallel(tp=2, dp=8, ep=4, sp=True, expert_tp=True).edp == 2 * 8 // (2 * 4)
    assert Parallel(pp=16, dp=128, ep=64).edp == 2                      # DeepSeek-V3
    with pytest.raises(ValueError, match="ep=8 must divide"):
        Parallel(tp=8, dp=1, ep=8, sp=True, expert_tp=True)             # etp = 8 leaves one GPU per expert grid
    with pytest.raises(ValueError, match="needs sp=True"):
        Parallel(tp=2, dp=2, ep=2)


@pytest.mark.parametrize("kw, word", [
    (dict(dp=6, ep=4), "ep=4 must divide tp x cp x dp / etp"),
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
    off = stage_params(m, Parallel(tp=2, dp=4, ep=4, sp=True))
    on = stage_params(m, Parallel(tp=2, dp=4, ep=4, sp=True, expert_tp=True))
    assert off[0] - on[0] == pytest.approx(MIXTRAL_ROUTED / 4 - MIXTRAL_ROUTED / 8, rel=1e-12)


def test_deepseek_v3_moe_layers_per_stage():
    # 61 layers over 16 stages: 13 stages of 4, 3 of 3 (the library's split); layers 0-2 dense (stage 0)
    got = moe.stage_moe_layers(get_model("deepseek-v3"), Parallel(pp=16, dp=128, ep=64))
    assert got == (1,) + (4,) * 12 + (3,) * 3


def test_moe_layer_activations_by_hand():
    m = get_model("mixtral-8x7b")
    t, h, e, k, f = 1024, 4096, 8, 2, 14336
    terms = moe.moe_layer_terms(m, batch=1, seq=t)
    assert terms["router"] == 2 * t * h + 9 * t * e + 4 * t * k       # bf16 input, fp32 logits+scores, map, probs
    assert terms["dispatch"] == 2 * t * k * h
    assert terms["experts"] == 3 * 2 * t * k * f                      # gated: Megatron's fused SwiGLU, 3 bf16 numbers
    assert terms["combine"] == 2 * t * k * h
    assert terms["shared"] == 0
    capped = moe.moe_layer_terms(m, batch=1, seq=t, capacity_factor=1.25)
    assert capped["dispatch"] == pytest.approx(1.25 * terms["dispatch"])
    with pytest.raises(ValueError, match="capacity_factor"):
        moe.moe_layer_terms(m, batch=1, seq=t, capacity_factor=0.5)
    with pytest.raises(ValueError, match="dense"):
        moe.moe_layer_terms("llama-3-8b", batch=1, seq=t)
    # tp=2 with sequence parallelism: each rank routes t/2 tokens; with expert_tp the dispatcher gathers the two
    # ranks' rows again (2 x t/2 x k) and each rank holds half of every expert's width
    sp = moe.moe_layer_terms(m, batch=1, seq=t, tp=2, sp=True)
    etp = moe.moe_layer_terms(m, batch=1, seq=t, tp=2, sp=True, expert_tp=True)
    assert sp["dispatch"] == 2 * (t // 2) * k * h and sp["experts"] == 6 * (t // 2) * k * f
    assert etp["dispatch"] == 2 * t * k * h and etp["experts"] == 6 * t * k * f / 2


def test_moe_activations_replace_the_dense_mlp_term():
    m = get_model("mixtral-8x7b")
    twin = activation_memory(moe.dense_twin(m), batch=1, seq=1024)
    acts = activation_memory(m, batch=1, seq=1024)
    t, h, k, f = 1024, 4096, 2, 14336
    dense_mlp = 2 * t * h + 6 * t * f              # the twin's MLP: fc1 input + 3 bf16 numbers per element (fused SwiGLU)
    moe_layer = (2 * t * h + 9 * t * 8 + 4 * t * k) + 2 * t * k * h + 6 * t * k * f + 2 * t * k * h
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


def test_group_limited_routing_bounds_the_gpus_a_token_reaches():
    """DeepSeek-V2's config: 160 experts in n_group 8, topk_group 3 (arXiv:2405.04434, Sec. 2.2.2: a
    token's experts on at most M = 3 devices); DeepSeek-V3's: 256 experts, 8 groups, 4 of them (a group a
    node)."""
    from dataclasses import replace

    from llmsizing.all_to_all import route_max_ranks

    v2, v3 = get_model("deepseek-v2"), get_model("deepseek-v3")
    assert (v2.expert_groups, v2.expert_groups_per_token) == (8, 3)
    assert route_max_ranks(v2, 8) == 3            # one group (20 experts) a GPU: 3 GPUs
    assert route_max_ranks(v2, 16) == 6           # a group spans 2 GPUs: 3 groups, 6 GPUs
    assert route_max_ranks(v2, 4) == 3            # two groups a GPU: still at most 3 GPUs
    assert route_max_ranks(v2, 1) == 1
    assert route_max_ranks(v3, 64) == 32          # a group is a node of 8: 4 x 8, above top-8 (no GPU limit)
    assert route_max_ranks(v3, 8) == 4
    assert route_max_ranks(get_model("mixtral-8x7b"), 8) is None
    assert route_max_ranks(replace(v2, expert_groups_per_token=8), 8) is None   # every group: no limit


def test_device_limited_routing_sends_a_token_once_per_gpu_it_reaches():
    """DeepSeek-V2 on its 8-way expert parallelism inside one H800 node: a token's 6 experts on at most 3 of
    the 8 GPUs, sent once to each, 7/8 of them leaving the GPU: 4,096 x 3 x 5,120 x 2 bytes x 7/8 per
    all-to-all, half the 6 copies of routing without a group limit."""
    from dataclasses import replace

    v2 = get_model("deepseek-v2")
    by_hand = 4096 * 3 * 5120 * 2 * 7 / 8                       # 110,100,480 bytes
    kw = dict(batch=1, seq=4096, gpu="H800")
    ep = [x for x in communication(v2, Parallel(dp=8, ep=8), **kw).collectives if x.group == "ep"]
    assert len(ep) == 4 and all(x.message_bytes == pytest.approx(by_hand, rel=1e-12) for x in ep)
    free = replace(v2, name="deepseek-v2 without group limit (test)", expert_groups=0,
                   expert_groups_per_token=0)
    ep_free = [x for x in communication(free, Parallel(dp=8, ep=8), **kw).collectives if x.group == "ep"]
    assert all(x.message_bytes == pytest.approx(2 * by_hand, rel=1e-12) for x in ep_free)
    # the same share node-limited routing gives, with one GPU a "node"
    assert moe.inter_node_share(6, 8, 1, max_nodes=3) * 6 * 4096 * 5120 * 2 == pytest.approx(by_hand)
    # across nodes (ep 16: 2 nodes) the node limit prices the network share, as before: 6 copies a token
    ep16 = [x for x in communication(v2, Parallel(dp=16, ep=16), **kw).collectives if x.group == "ep"]
    assert ep16[0].message_bytes == pytest.approx(4096 * 6 * 5120 * 2 * 15 / 16, rel=1e-12)


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
def test_deepseek_v3_published_layout():
    # DeepSeek-AI 2024 (arXiv 2412.19437), Sec. 3.1-3.2: 2,048 H800s, PP16, EP64 over 8 nodes, ZeRO-1 DP, no TP
    par = deepseek.DEEPSEEK_V3_LAYOUT
    assert (par.gpus, par.pp, par.ep, par.tp, par.zero, par.dp) == (2048, 16, 64, 1, 1, 128)
    assert deepseek.DEEPSEEK_V3_MICRO_BATCHES * par.dp == 15360           # Sec. 4.2: batch 15,360 sequences


@pytest.fixture(scope="module")
def dsv3():
    return deepseek.deepseek_v3_check()


def test_deepseek_v3_reads_the_published_run(dsv3):
    # data/published_stages.csv, from the technical report's Table 1 and Sec. 4.2
    assert dsv3["tokens"] == 14.8e12 and dsv3["published_gpu_hours"] == 2.664e6


def test_deepseek_v3_fits_80gb_with_recomputation(dsv3):
    assert dsv3["fits_full"] and dsv3["memory_gib_full"] < 80
    # without recomputation the library's count (1F1B: 15 micro-batches of 4 MoE layers in flight on the second
    # stage, MLA's per-head Q/K/V saved) does not fit: DeepSeek recomputes its norms and MLA up-projections and
    # runs DualPipe (deepseek.deepseek_memory, tested below)
    assert not dsv3["fits_none"] and dsv3["memory_gib_none"] > 80
    # the model states alone: about 1.6-3.1B parameters per GPU, far below 80 GB
    assert 10 < dsv3["states_gib"] < 40


def test_deepseek_v3_gpu_hours_inside_the_calibrated_band(dsv3):
    # the all-to-all exposed (the library's default) and hidden by DualPipe (ep_overlap=1) bracket the run
    for tag in ("exposed", "dualpipe"):
        assert dsv3[f"gpu_hours_{tag}_low"] <= 2.664e6 <= dsv3[f"gpu_hours_{tag}_high"]
        assert dsv3[f"inside_{tag}"]
    assert dsv3["gpu_hours_dualpipe"] < 2.664e6 < dsv3["gpu_hours_exposed"]


def test_deepseek_v3_stage_flops_by_hand():
    # one MoE layer of DeepSeek-V3 per token, forward x 3 (config.json shapes; every parameter is 2 FLOPs per
    # token in the library's convention, norms included): MLA (q_a, q_b, kv_a, kv_b, o), its norms, the router
    # (weights + correction bias), the shared expert and 8 of the 256 routed experts (gate, up, down of 7168 x
    # 2048), plus QK^T and attn @ V over 4,096 keys (192- and 128-dim heads, non-causal)
    attn = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    norms = 1536 + 512 + 2 * 7168
    router = 256 * 7168 + 256
    experts = (1 + 8) * 3 * 7168 * 2048
    layer = 3 * (2 * (attn + norms + router + experts) + 2 * 128 * (192 + 128) * 4096)
    flops = moe.moe_stage_flops(get_model("deepseek-v3"), deepseek.DEEPSEEK_V3_LAYOUT, seq=4096, recompute="none")
    assert flops[1] == pytest.approx(4 * layer, rel=1e-12)              # stage 1: four MoE layers
    assert flops[-1] - flops[-2] == pytest.approx(6 * 129280 * 7168, rel=1e-5)   # the LM head on the last


def test_each_pipeline_stage_counts_its_own_dense_and_moe_layers():
    from llmsizing.activations import layer_terms

    m = get_model("deepseek-v3")
    kw = dict(batch=1, seq=4096, fp8="fp8-deepseek")
    moe_layer = sum(layer_terms(m, **kw).values())                     # one MoE layer (tested by hand above)
    dense_layer = sum(layer_terms(moe.dense_twin(m), **kw).values())   # one of the three dense layers
    assert moe_layer > dense_layer
    r = training_memory(m, parallel=deepseek.DEEPSEEK_V3_LAYOUT, batch=1, seq=4096, grad_accum=120,
                        precision="fp8-deepseek")
    acts = r.stage_table["activations"]
    # 1F1B: stage 0 holds 16 micro-batches of layers 0-3 (three dense, one MoE) and of the embedding's tensors,
    # stage 1 fifteen of layers 4-7 (all MoE)
    embedding = 16 * 8 * 4096                                          # int64 token ids (no dropout)
    assert acts.loc[0] == pytest.approx(16 * (3 * dense_layer + moe_layer) + embedding, rel=1e-9)
    assert acts.loc[1] == pytest.approx(15 * 4 * moe_layer, rel=1e-9)


# ----------------------------------------------------------------------------- fuzz (tests/test_fuzz.py's rules)
from hypothesis import strategies as st  # noqa: E402
from test_fuzz import EXAMPLES, PARALLEL_WORDS, RECOMPUTES, Arg, Spec, _run, bools, gpus, ints, models, nums  # noqa: E402

from llmsizing.catalog import list_models  # noqa: E402


def _moe_models() -> Arg:
    both = models()
    return Arg(st.one_of(st.sampled_from(list_models(moe=True)), both.valid), both.invalid)


def _ep_parallels() -> Arg:
    layouts = st.builds(lambda tp, pp, dp, ep, zero, sp, etp: dict(tp=tp, pp=pp, dp=dp, ep=ep, zero=zero,
                                                                   sp=sp and tp > 1, expert_tp=etp),
                        st.sampled_from([1, 1, 2]), st.sampled_from([1, 2]), st.sampled_from([1, 2, 4, 8, 16]),
                        st.sampled_from([1, 2, 4, 8]), st.integers(0, 2), st.booleans(), st.booleans())
    return Arg(layouts, st.sampled_from(["ep=2", 2, {"ep": 0}, {"ep": 3, "dp": 4}, {"ep": 2.0, "dp": 2},
                                        {"expert_tp": 1}, {"dp": 2, "ep": 2, "zero": 3}]))


def _with_layout(func):
    return lambda parallel, **kw: func(parallel=Parallel(**parallel) if isinstance(parallel, dict) else parallel,
                                       **kw)


EP_WORDS = PARALLEL_WORDS + ("ep", "expert_tp")
MOE_FUNCTIONS = {
    "moe_layer_terms": Spec(moe.moe_layer_terms,
                            dict(model=_moe_models(), batch=ints(1, 16), seq=ints(1, 16384), tp=ints(1, 8),
                                 sp=bools(), capacity_factor=nums(1, 4, optional=True), expert_tp=bools())),
    "all_to_all_bytes": Spec(moe.all_to_all_bytes,
                             dict(tokens=nums(0, 1e7), top_k=ints(1, 16), hidden=ints(1, 16384),
                                  bytes_per_element=nums(0, 4), ep=ints(1, 256))),
    "inter_node_share": Spec(moe.inter_node_share,
                             dict(top_k=ints(1, 16), ep=ints(1, 256), gpus_per_node=ints(1, 72),
                                  max_nodes=ints(1, 16, optional=True))),
    "training_memory (ep)": Spec(_with_layout(training_memory),
                                 dict(model=_moe_models(), parallel=_ep_parallels(), batch=ints(1, 4),
                                      seq=ints(1, 8192), grad_accum=ints(1, 16), recompute=RECOMPUTES),
                                 aliases={"parallel": EP_WORDS}),
    "step_time (ep)": Spec(_with_layout(step_time),
                           dict(model=_moe_models(), gpu=gpus(), parallel=_ep_parallels(), batch=ints(1, 4),
                                seq=ints(1, 8192), grad_accum=ints(1, 16), ep_overlap=nums(0, 1),
                                max_nodes=ints(1, 8, optional=True)),
                           aliases={"parallel": EP_WORDS}),
}


@pytest.mark.parametrize("name", sorted(MOE_FUNCTIONS))
def test_fuzz_moe_function(name):
    _run(name, MOE_FUNCTIONS[name], EXAMPLES)


def test_all_to_all_across_nodes_and_the_node_limit():
    from llmsizing.serve_moe import all_to_all_s

    m, par = get_model("deepseek-v3"), Parallel(dp=64, ep=64)
    kw = dict(batch=1, seq=4096, gpu="H800", precision="fp8-deepseek")
    base = 4096 * 8 * 7168 * (1 + 4 / 128)                            # tokens x k x hidden x FP8 with scales
    times = {}
    # bytes sent on both legs at once (lows29: they were the k-copy buffer's whatever the route): every copy
    # straight to its GPU, 56/64 over the NIC and 7/64 over NVLink; with the limit, 4 of 8 nodes x 7/8 over
    # the NIC and the forwarding leg's 7/8 over NVLink
    legs = {None: 56 / 64 + 7 / 64, 4: 4 / 8 * 7 / 8 + 7 / 8}
    for max_nodes in (None, 4):
        c = communication(m, par, max_nodes=max_nodes, **kw)
        disp = next(x for x in c.collectives if x.collective == "EP all-to-all dispatch (forward)")
        assert disp.link == "network + NVLink 4 (8 links)" and disp.calls == 58   # pp=1: all 58 MoE layers
        assert disp.bytes_per_gpu == pytest.approx(58 * base * legs[max_nodes])
        times[max_nodes] = disp.time_s / disp.calls
    # 64 GPUs in 8 nodes: the network carries 56/64 of the buffer, or 4 of 8 nodes x 7/8 with DeepSeek's limit;
    # at ~240 MB per call the NIC's bytes set the time, so it halves (within the per-call latency)
    assert times[4] / times[None] == pytest.approx((4 / 8 * 7 / 8) / (56 / 64), rel=0.01)
    # serving's all-to-all (checked against DeepEP) is the one priced: old calls give the same as before
    assert all_to_all_s(base, 64, "H800") == pytest.approx(times[None], rel=1e-12)


# ----------------------------------------------------------------------------- DeepSeek-V3's own memory recipe
F8 = 1 + 4 / 128                         # FP8 E4M3 + one fp32 scale per 1 x 128 tile (report Sec. 3.3.2)
E5M6 = 1.5 + 4 / 128                     # the attention output's 12-bit format, same tiles (Sec. 3.3.3 (1))


def test_deepseek_layer_bytes_by_hand():
    m = get_model("deepseek-v3")
    # per token, config.json shapes: residual stream x2 (bf16, the RMSNorms' inputs; their outputs recomputed),
    # MLA's latents before their norms (1536 + 512 + rope 64, bf16), 128 heads x 128 value dims in E5M6 + fp32
    # log-sum-exp per head, router 256 fp32 logits + 256 fp32 scores + 256-byte map + 8 fp32 weights,
    # the dispatched 8 x 7168 in FP8, 8 experts' SwiGLU inputs 2 x 2048 in FP8, the shared expert's 2 x 2048
    moe_layer = (2 * 2 * 7168 + 2 * (1536 + 512 + 64) + E5M6 * 128 * 128 + 4 * 128 + (4 + 4 + 1) * 256 + 4 * 8
                 + F8 * 8 * 7168 + F8 * 8 * 2 * 2048 + F8 * 2 * 2048)
    assert sum(deepseek.deepseek_layer_bytes(m).values()) == pytest.approx(moe_layer, rel=1e-12)
    assert moe_layer == pytest.approx(157984, abs=1e-6)
    # a dense layer: the MLP keeps its two 18432-wide SwiGLU inputs in bf16 and the down-projection's FP8 input
    dense_layer = 2 * 2 * 7168 + 2 * 2112 + E5M6 * 128 * 128 + 4 * 128 + 2 * 2 * 18432 + F8 * 18432
    assert sum(deepseek.deepseek_layer_bytes(m, moe=False).values()) == pytest.approx(dense_layer, rel=1e-12)
    # keeping the experts' bf16 outputs for the combine adds k x h x 2
    kept = deepseek.deepseek_layer_bytes(m, probs_in_swiglu=False)
    assert kept["combine"] == 8 * 7168 * 2
    with pytest.raises(ValueError, match="latent attention"):
        deepseek.deepseek_layer_bytes(get_model("mixtral-8x7b"))


def test_dualpipe_holds_pp_plus_one_micro_batches():
    # DeepSeek-V3 report Table 2 / deepseek-ai/DualPipe README: activations PP + 1, parameters 2x per device
    r = deepseek.deepseek_memory()
    assert len(r.ranks) == 8                                      # ranks i and 15 - i hold the same two chunks
    for row in r.ranks:
        i = row["rank"]
        assert row["chunks"] == (i, 15 - i)
        assert sum(row["in_flight"]) == 17
        assert row["in_flight"] == (16 - i, i + 1)


def _states_by_hand(moe_layers: int) -> float:
    """Model states of ``moe_layers`` DeepSeek-V3 MoE layers on one GPU of the published layout: non-expert
    parameters with ZeRO-1 over dp = 128, the 256 routed experts split over ep = 64 with ZeRO-1 over edp = 2.
    Weights bf16 (2), gradients fp32 (4), an FP8 copy of each matrix (1 + 4 / 128^2), master fp32 + two bf16
    moments (4 + 2 + 2) sharded (Sec. 3.3.3)."""
    h = 7168
    mats = h * 1536 + 1536 * 128 * 192 + h * 576 + 512 * 128 * 256 + 128 * 128 * h + 3 * h * 2048  # MLA + shared
    vecs = 1536 + 512 + 2 * h + 256                                  # MLA and layer norms, router bias
    router = 256 * h
    experts = 4 * 3 * h * 2048                                       # 256 / 64 experts of gate, up, down
    dense = mats + vecs + router
    w8 = 1 + 4 / 128 ** 2
    per_layer = dense * (2 + 4 + 8 / 128) + mats * w8 + experts * (2 + 4 + w8 + 8 / 2)
    return moe_layers * per_layer


def test_deepseek_memory_of_a_middle_rank_by_hand():
    from llmsizing.memory import FIXED_OVERHEAD_BYTES, FRAGMENTATION

    r = deepseek.deepseek_memory()
    row = r.ranks[3]                                    # chunks 3 and 12: four MoE layers each
    t = 4096
    layer = 157984 * t
    kept = (13 + 4) * 4 * layer
    assert row["activations"] - kept == pytest.approx(
        2 * (2 * 7168 + 128 * (2 * 192 + 128) + 8 * 2048 + 2048) * t, rel=1e-12)   # one layer rebuilt
    assert row["states"] == pytest.approx(_states_by_hand(8), rel=1e-9)
    # the peak is the start of the backward: states, kept activations, one layer rebuilt and half a layer's
    # working set (memory.LAYER_WORKING_SET); the gradients are alive (120 micro-batches accumulate)
    peak = row["states"] + row["activations"] + 0.5 * layer
    assert row["peak"] == pytest.approx(peak, rel=1e-12)
    assert row["total"] == pytest.approx(peak * (1 + FRAGMENTATION) + FIXED_OVERHEAD_BYTES, rel=1e-12)


def test_deepseek_v3_fits_80gb_with_its_own_recipe(dsv3):
    # with the library's split the rank holding the embedding, the output head, the MTP module and the logits
    # (chunks 0 and 15) does not fit; one layer fewer in each of those chunks does, with a few GiB to spare
    assert not dsv3["fits_deepseek_even"] and dsv3["rank_deepseek_even"] == 0
    assert dsv3["fits_deepseek_balanced"] and 70 < dsv3["memory_gib_deepseek_balanced"] < 80
    # keeping the experts' bf16 outputs for the combine does not fit, whatever the split
    assert not dsv3["fits_deepseek_combine"]
    # DualPipe's two copies of the parameters cost more than 1F1B's one
    assert dsv3["memory_gib_deepseek_1f1b"] < dsv3["memory_gib_deepseek_balanced"]
    # and the recipe sits between no recomputation and full recomputation of the library's 1F1B count
    assert dsv3["memory_gib_full"] < dsv3["memory_gib_deepseek_balanced"] < dsv3["memory_gib_none"]


def test_deepseek_memory_refuses_layouts_it_does_not_model():
    from dataclasses import replace

    with pytest.raises(ValueError, match="tensor"):
        deepseek.deepseek_memory(parallel=Parallel(tp=2, pp=16, dp=64, ep=64, sp=True, zero=1))
    with pytest.raises(ValueError, match="grad_accum"):
        deepseek.deepseek_memory(grad_accum=16)
    with pytest.raises(ValueError, match="even grad_accum"):      # dualpipe.py: num_chunks % 2 == 0 (review27 L2)
        deepseek.deepseek_memory(grad_accum=33)
    with pytest.raises(ValueError, match="schedule"):
        deepseek.deepseek_memory(schedule="gpipe")
    with pytest.raises(TypeError, match="parallel"):
        deepseek.deepseek_memory(parallel="pp16")
    with pytest.raises(ValueError, match="even pp"):
        deepseek.deepseek_memory(parallel=replace(deepseek.DEEPSEEK_V3_LAYOUT, pp=1, dp=2048))


def test_an_uneven_moe_stage_keeps_its_extra_moe_layer_through_the_forward():
    """Issue 35: a 4-layer Mixtral-shaped MoE whose layers 2 and 3 are MoE, over pp = 2, no recomputation. The
    last stage holds layers 2-3, both MoE (its share is 2 x 2/4 = 1): under 1F1B it keeps 1 micro-batch of
    them, so every phase up to the backward holds 2 MoE layers' tensors. Nothing is rebuilt; before the
    fix the extra MoE layer (m - d) was filed as "rebuilt" and left out of the forward and loss-backward
    phases."""
    from dataclasses import replace

    from llmsizing.activations import layer_terms

    m = replace(get_model("mixtral-8x7b"), layers=4, moe_layers=(2, 3))
    kw = dict(batch=1, seq=256)
    moe_layer = sum(layer_terms(m, **kw).values())                       # tested by hand above
    dense_layer = sum(layer_terms(moe.dense_twin(m), **kw).values())
    assert moe_layer > dense_layer
    stages = training_memory(m, parallel=Parallel(pp=2), grad_accum=4, _all_stages=True, **kw)
    last = stages[1]
    assert last.in_flight == 1
    acts = last.activations
    assert acts.rebuilt_bytes == 0.0                                     # no recomputation: nothing rebuilt
    assert acts.layers_bytes == pytest.approx(2 * moe_layer, rel=1e-12)
    fwd_acts = 2 * moe_layer + acts.logits_bytes
    assert acts.total_bytes - acts.rebuilt_bytes == pytest.approx(fwd_acts, rel=1e-12)
    # the forward and the loss backward hold those tensors (and the logits); the backward's start them less
    # the logits
    parts = last.phase_parts
    assert parts["forward"]["activations"] == pytest.approx(fwd_acts, rel=1e-12)
    assert parts["loss backward"]["activations"] == pytest.approx(fwd_acts, rel=1e-12)
    assert last.pieces["backward (start)"]["activations"] == pytest.approx(2 * moe_layer, rel=1e-12)
    # the first stage (layers 0-1: dense, one MoE layer less than its share) keeps 2 micro-batches of them
    first = stages[0].activations
    assert first.rebuilt_bytes == 0.0
    assert first.layers_bytes == pytest.approx(2 * 2 * dense_layer, rel=1e-12)
