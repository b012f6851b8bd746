"""The token dispatcher (issue 35, moe28): Megatron-Core's "alltoall" sends a token once per expert (k
copies), its "flex" dispatcher on DeepEP ("deepep") once to each GPU holding one of its experts and once to
each node. Every expected value is worked out here by hand (math.prod over the hypergeometric's factors, the
H800 node's links) or is a relation; none is copied from the library's output.

Sources: Megatron-Core megatron/core/transformer/moe/token_dispatcher.py
(MoEAlltoAllTokenDispatcher.preprocess: input_splits sum routing_map over each rank's experts, num_out_tokens
= tokens x topk; _DeepepManager.dispatch sends the unpermuted tokens and permutes them after they arrive).
DeepEP's README V1 table (data/deepep_normal_kernels.csv): H800, 4,096 tokens a GPU, hidden 7,168, 256
experts, top-8, FP8 dispatch (7,392 B a token), 153 GB/s at EP 8 (NVLink), 43 at EP 16 and 51 at EP 64 (RDMA),
counted over the tokens a GPU or node receives, its own included. The library's H800 node: NVLink 154 GB/s a
GPU one way, NIC 45.5 GB/s.
"""

from math import prod

import pytest

from llmsizing import get_gpu
from llmsizing.all_to_all import (DEFAULT_DISPATCHER, DISPATCHERS, all_to_all_s, check_dispatcher,
                                  deepep_normal_published_s, dispatcher_kwargs, distinct_reached)
from llmsizing.network import get_node

T, H, K, E = 4096, 7168, 8, 256
B = H * (1 + 4 / 128)                                      # 7,392 B a token in FP8 with its scales
G = get_gpu("H800")
NODE = get_node(None, gpu=G)
NVL, NIC = 154e9, 45.5e9


def _miss(units_experts: int, per_unit: int) -> float:
    """P(a unit of per_unit experts holds none of a token's 8 distinct experts of units_experts): by hand."""
    n = units_experts
    return prod(range(n - per_unit - K + 1, n - per_unit + 1)) / prod(range(n - K + 1, n + 1))


def _model(ep, max_nodes=None, dispatcher="alltoall", experts=E):
    return all_to_all_s(T * K * B, ep, G, NODE, top_k=K, max_nodes=max_nodes, dispatcher=dispatcher,
                        experts=experts if dispatcher == "deepep" else None)


def test_distinct_gpus_a_token_reaches_by_hand():
    # EP 8, 32 experts a GPU: a GPU misses all 8 with probability (224 ... 217) / (256 ... 249) = 0.3382
    miss8 = _miss(256, 32)
    assert miss8 == pytest.approx(0.3382, abs=1e-4)
    assert distinct_reached(K, 8, 32) == pytest.approx(8 * (1 - miss8), rel=1e-12)         # 5.29 GPUs
    # with replacement (no expert count): 8 (1 - (7/8)^8) = 5.251, 0.8% under the exact 5.295
    assert distinct_reached(K, 8) == pytest.approx(8 * (1 - (7 / 8) ** 8), rel=1e-12)
    assert 8 * (1 - (7 / 8) ** 8) == pytest.approx(5.251, abs=1e-3)
    # one expert a GPU (Mixtral: 8 experts, top-2 on 8 GPUs): 2 distinct experts are 2 distinct GPUs
    assert distinct_reached(2, 8, 1) == pytest.approx(2.0, rel=1e-12)
    # never more than k nor the units; a fractional unit count works (128 GPUs over 72-GPU racks)
    assert distinct_reached(K, 1.0) == 1.0 and distinct_reached(K, 1000, 1) <= K
    assert 1 < distinct_reached(K, 128 / 72) < 128 / 72


def test_deepep_in_a_node_sends_the_distinct_gpus_and_sits_under_deepep_by_its_own_gpu():
    """EP 8: DeepEP sends a token to 5.29 GPUs, 5.29 x 7/8 of them another GPU, over NVLink: 4,096 x 5.29 x
    7/8 x 7,392 B / 154 GB/s = 0.911 ms; the alltoall dispatcher's 8 x 7/8 copies take 1.377 ms. DeepEP
    publishes 153 GB/s over 4,096 x 5.29 x 7,392 B (its own GPU's copy counted: 1.048 ms). The model is then
    (7/8) x (153/154) = 0.869 of it, plus the link's latency: DeepEP's kernel moves the remote copies at 134
    GB/s."""
    d = 8 * (1 - _miss(256, 32))
    by_hand = T * d * 7 / 8 * B / NVL
    assert by_hand == pytest.approx(0.911e-3, rel=2e-3)
    got = _model(8, dispatcher="deepep")
    assert got == pytest.approx(by_hand, rel=0.02)
    assert got / _model(8) == pytest.approx(d / 8, rel=0.005)         # (but the link's latency, paid once)
    published = deepep_normal_published_s(8)
    assert published == pytest.approx(T * d * B / 153e9, rel=1e-12)
    assert 7 / 8 * 153 / 154 == pytest.approx(0.869, abs=1e-3)
    assert 0.86 < got / published < 0.89                                # 0.88: within ~12%, under it
    assert _model(8) / published > 1.3                                  # the k-copy count: 1.32x


def test_deepep_across_nodes_forwards_once_a_gpu():
    """EP 16 (2 nodes, the model's group limit reaches both): over the network a token crosses once (2 nodes x
    1/2), 4,096 x 7,392 B / 45.5 GB/s = 0.665 ms; the forwarding leg sends it to each distinct GPU of the 16
    (16 experts a GPU) but the forwarder: 16 (1 - C(240, 8) / C(256, 8)) = 6.52 x 7/8 of the copies, 1.122 ms
    over NVLink, which sets the time: 0.80x DeepEP's published 1.403 ms (the alltoall's 7 copies: 0.99x; why
    the gap: tests/test_deepep_ep16.py)."""
    dg = 16 * (1 - _miss(256, 16))
    assert dg == pytest.approx(6.52, abs=0.01)
    nvl, nic = T * dg * 7 / 8 * B / NVL, T * 1 * B / NIC
    assert nic < nvl == pytest.approx(1.122e-3, rel=2e-3)
    got = _model(16, max_nodes=2, dispatcher="deepep")
    assert got == pytest.approx(nvl, rel=0.02)
    assert got / deepep_normal_published_s(16) == pytest.approx(nvl / 1.403e-3, rel=0.02)     # 0.80
    # without a node limit the nodes are drawn too: 2 (1 - C(128, 8) / C(256, 8)) = 1.993 of 2
    dn = 2 * (1 - _miss(256, 128))
    assert dn == pytest.approx(1.993, abs=1e-3)
    assert _model(16, dispatcher="deepep") == pytest.approx(nvl, rel=0.02)    # still NVLink-bound


def test_deepep_at_ep64_is_set_by_the_nic_as_before():
    """EP 64, 4 nodes a token (DeepSeek-V3's limit): 4 x 7/8 crossings, NIC-bound, 2.33 ms either way; the
    forwarding leg's distinct GPUs (32 of the 4 nodes, 4 experts each) only shorten the slower-hidden leg."""
    nic = T * 4 * 7 / 8 * B / NIC
    for disp in DISPATCHERS:
        assert _model(64, max_nodes=4, dispatcher=disp) == pytest.approx(nic, rel=0.02)
    assert _model(64, 4, "deepep") == pytest.approx(_model(64, 4), rel=1e-12)
    assert _model(64, 4, "deepep") / deepep_normal_published_s(64) == pytest.approx(0.99, abs=0.02)


def test_the_default_is_megatrons_alltoall_unchanged():
    for ep, m in ((8, None), (16, 2), (64, 4), (64, None)):
        assert all_to_all_s(T * K * B, ep, G, NODE, top_k=K, max_nodes=m) == _model(ep, m, "alltoall")
    assert not DISPATCHERS["alltoall"].once_per_gpu and DISPATCHERS["deepep"].once_per_gpu
    assert "token_dispatcher.py" in DISPATCHERS["alltoall"].source
    assert "DeepEP" in DISPATCHERS["deepep"].source


def test_step_time_carries_the_dispatcher():
    """OLMoE (64 experts, top-8) at EP 8 in one HGX node, 8 experts a GPU: a token reaches
    8 (1 - C(56, 8) / C(64, 8)) = 5.43 GPUs, so each all-to-all row's bytes are 5.43 / 8 of the alltoall's.
    Mixtral (8 experts, top-2, one a GPU) reaches 2 GPUs with 2 experts: nothing moves."""
    from llmsizing.layouts import step_time
    from llmsizing.parallel import Parallel

    d = 8 * (1 - prod(range(49, 57)) / prod(range(57, 65)))
    assert d == pytest.approx(5.43, abs=0.01)
    par = Parallel(dp=8, ep=8)
    kw = dict(batch=1, seq=4096, grad_accum=4)
    steps = {disp: step_time("olmoe-1b-7b", "H100 SXM", par, dispatcher=disp, **kw) for disp in DISPATCHERS}
    rows = {disp: [c for c in st.communication.collectives if c.group == "ep"] for disp, st in steps.items()}
    assert len(rows["deepep"]) == 4
    for a, b in zip(rows["alltoall"], rows["deepep"]):
        assert b.message_bytes == pytest.approx(a.message_bytes * d / 8, rel=1e-12)
        assert b.time_s < a.time_s
    default = step_time("olmoe-1b-7b", "H100 SXM", par, **kw)
    assert default.step_s == step_time("olmoe-1b-7b", "H100 SXM", par, dispatcher="alltoall", **kw).step_s
    mix = {disp: step_time("mixtral-8x7b", "H100 SXM", par, dispatcher=disp, **kw).step_s
           for disp in DISPATCHERS}
    assert mix["deepep"] == pytest.approx(mix["alltoall"], rel=1e-12)


def test_deepseek_v3_row_takes_deepep_and_does_not_move():
    """The run's row says deepep (its report's Sec. 3.2.2); at EP 64 with 4 nodes a token the NIC sets the
    all-to-all either way, and DualPipe hides it: the GPU-hours are the same to the last digit."""
    import llmsizing.moe_runs as mr

    row = mr.moe_published_runs().set_index("run").loc["DeepSeek-V3 pre-training"].to_dict()
    assert row["dispatcher"] == "deepep"
    as_alltoall = dict(row, dispatcher="alltoall")
    assert mr.predict_moe_run(row)["gpu_hours"] == pytest.approx(mr.predict_moe_run(as_alltoall)["gpu_hours"],
                                                                  rel=1e-12)
    exposed = dict(row, ep_overlap=0.0)
    assert mr.run_step(exposed).exposed["ep"] == pytest.approx(
        mr.run_step(dict(exposed, dispatcher="alltoall")).exposed["ep"], rel=1e-12)


def test_plan_rows_with_deepep_reproduce_through_the_job():
    import llmsizing as L
    from llmsizing.job import Job
    from llmsizing.layouts import step_time

    kw = dict(tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=256, max_gpus=64)
    deep, base = L.plan("olmoe-1b-7b", dispatcher="deepep", **kw), L.plan("olmoe-1b-7b", **kw)
    assert "deepep dispatcher" in deep.attrs["assumes"] and "dispatcher" not in base.attrs["assumes"]
    moe = deep[deep["ep"] > 1]
    assert len(moe) > 0
    for r in moe.head(4).itertuples():
        job = Job.from_plan_row(r, "olmoe-1b-7b", seq=4096, dispatcher="deepep")
        assert step_time(job).step_s == pytest.approx(r.step_time_s, rel=1e-6)
        assert L.training_time(job, tokens=1e12).days == pytest.approx(r.days, rel=1e-6)
    key = ["tp", "pp", "dp", "ep", "zero", "micro_batch", "recompute"]
    both = moe.merge(base, on=key, suffixes=("_d", "_a"))
    assert len(both) > 0 and (both["step_time_s_d"] <= both["step_time_s_a"]).all()
    assert (both["step_time_s_d"] < both["step_time_s_a"]).any()


@pytest.mark.parametrize("call, match", [
    (lambda: check_dispatcher("flex"), "dispatcher must be one of"),
    (lambda: check_dispatcher(None), "dispatcher must be one of"),
    (lambda: all_to_all_s(1e6, 8, G, NODE, dispatcher="deepep"), "dispatcher='deepep' needs top_k"),
    (lambda: all_to_all_s(1e6, 8, G, NODE, top_k=8, dispatcher="deepep", experts=4), "experts"),
    (lambda: distinct_reached(8, 2, 2), "top_k=8 exceeds"),
])
def test_bad_dispatcher_input_is_refused(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_a_job_and_training_time_check_the_dispatcher():
    import llmsizing as L
    from llmsizing.job import Job
    from llmsizing.parallel import Parallel

    with pytest.raises(ValueError, match="dispatcher"):
        Job("olmoe-1b-7b", "H100 SXM", 4096, Parallel(dp=8, ep=8), dispatcher="nccl")
    # (moe28b: without a global batch it is carried to the MoE step; refused where no MoE step is priced)
    with pytest.raises(ValueError, match="global_batch"):
        L.training_time("llama-3-8b", tokens=1e12, gpu="H100 SXM", n_gpus=8, seq=4096, dispatcher="deepep")
    with pytest.raises(ValueError, match="not with stages=, mfu="):
        L.training_time("olmoe-1b-7b", tokens=1e12, gpu="H100 SXM", n_gpus=8, seq=4096, mfu=0.3,
                        dispatcher="deepep")
    job = Job("olmoe-1b-7b", "H100 SXM", 4096, Parallel(dp=8, ep=8), dispatcher="deepep")
    assert job.kwargs("step")["dispatcher"] == "deepep"
    assert "dispatcher" not in job.replace(dispatcher="alltoall").kwargs("step")
    assert "dispatcher" not in job.kwargs("memory")
    # (fix28b) a dense model has no tokens to dispatch: refused as training_time refuses it, by name
    with pytest.raises(ValueError, match="dispatcher='deepep'.*dense"):
        Job("llama-3-8b", "H100 SXM", 4096, Parallel(dp=8), dispatcher="deepep")
    assert Job("llama-3-8b", "H100 SXM", 4096, Parallel(dp=8)).dispatcher == DEFAULT_DISPATCHER


def test_one_default_dispatcher_omits_its_keyword():
    """An old call's keywords stay as they were: only a non-default dispatcher is passed on."""
    assert DEFAULT_DISPATCHER in DISPATCHERS and not DISPATCHERS[DEFAULT_DISPATCHER].once_per_gpu
    assert dispatcher_kwargs(DEFAULT_DISPATCHER) == {}
    assert dispatcher_kwargs("deepep") == {"dispatcher": "deepep"}
    with pytest.raises(ValueError, match="dispatcher must be one of"):
        dispatcher_kwargs("flex")


def test_the_old_cli_default_name_still_works_with_a_warning():
    import llmsizing.cli_args as cli_args

    with pytest.warns(DeprecationWarning, match="all_to_all.DEFAULT_DISPATCHER"):
        assert cli_args.DEFAULT_DISPATCHER == DEFAULT_DISPATCHER


def _miss_f(n: float, per: float) -> float:
    """``_miss`` for a fractional expert count (the forwarding leg's reached nodes), the same product."""
    return prod(n - per - i for i in range(K)) / prod(n - i for i in range(K))


@pytest.mark.parametrize("dispatcher, max_nodes", [("alltoall", None), ("alltoall", 4), ("deepep", 4),
                                                   ("deepep", None)])
def test_an_ep_row_across_nodes_reports_the_bytes_its_time_counts(dispatcher, max_nodes):
    """(review28b L13, lows29) DeepSeek-V3's EP 64 over 8 H800 nodes, 4,096 tokens a GPU, FP8 dispatch.
    Across nodes a GPU sends on two legs at once, the NIC and NVLink. A row's bytes were the k-copy buffer's
    while its time was deduplicated (a node limit, DeepEP), so its bandwidth could exceed both links'. Now the
    bytes are both legs', worked out by hand: every copy straight to its GPU, 56/64 over the NIC and 7/64 over
    NVLink; with the limit of 4 nodes, 4 x 7/8 crossings of 8 copies and the forwarding leg's 7/8; with DeepEP
    the reached nodes (4, or 8 (1 - C(224, 8) / C(256, 8)) without the limit) and the distinct GPUs among
    their experts (4 a GPU), 7/8 of them another node's or GPU. bytes / bandwidth = the time, which is
    all_to_all_s's; the link names both legs, and the bandwidth stays under their sum."""
    from llmsizing.deepseek import DEEPSEEK_V3_LAYOUT
    from llmsizing.moe import ep_all_to_all

    m = __import__("llmsizing").get_model("deepseek-v3")
    rows = ep_all_to_all(m, DEEPSEEK_V3_LAYOUT, batch=1, seq=T, gpu=G, node=NODE, grad_accum=1,
                         precision="fp8-deepseek", recompute="none", dispatcher=dispatcher,
                         max_nodes=max_nodes)
    row = rows[0]
    assert row.collective == "EP all-to-all dispatch (forward)" and DEEPSEEK_V3_LAYOUT.ep == 64
    s = T * K * B
    if dispatcher == "alltoall":
        share, near = (56 / 64, 7 / 64) if max_nodes is None else (4 / 8 * 7 / 8, 7 / 8)
    else:
        nodes = 4 if max_nodes else 8 * (1 - _miss(256, 32))
        gpus = nodes * 8 * (1 - _miss_f(nodes * 8 * 4, 4))       # distinct GPUs of the reached nodes
        share, near = nodes * 7 / 8 / K, gpus * 7 / 8 / K
    assert row.message_bytes == pytest.approx(s * (share + near), rel=1e-9)
    one_call = all_to_all_s(s, 64, G, NODE, top_k=K, max_nodes=max_nodes, dispatcher=dispatcher,
                            experts=E if dispatcher == "deepep" else None)
    assert row.time_s == pytest.approx(row.calls * one_call, rel=1e-12)          # the time as before
    assert row.message_bytes / (row.bandwidth_gbps * 1e9) == pytest.approx(one_call, rel=1e-12)
    assert row.link == f"network + {G.link}" and row.bandwidth_gbps < (NIC + NVL) / 1e9
    if dispatcher == "deepep":                    # fewer network bytes than every copy straight to its GPU
        assert share < 56 / 64
