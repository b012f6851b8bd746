"""The nodes (and GPUs) one token reaches under group-limited routing, for a given expert-parallel degree,
GPUs a node and group layout (issue 35, :func:`llmsizing.all_to_all.route_max_nodes`), derived by hand.

DeepSeek-V3's config: 256 routed experts in ``n_group = 8`` groups of 32, ``topk_group = 4``, top-8
(arXiv:2412.19437, Sec. 2.1.2: "each token will be sent to at most M nodes", M = 4, on the 64-way expert
parallelism over 8 nodes of Sec. 3.2.2). Experts sit contiguously on ranks (expert x on rank x // (E / ep),
as DeepEP's tests/legacy/test_internode.py places them), ranks contiguously on nodes; DeepEP sends a token
once to each node among its experts' ranks (``rank // num_local_ranks``, deduplicated)."""

import warnings
from dataclasses import replace

import pytest

from llmsizing import Parallel, get_gpu, get_model, step_time
from llmsizing.all_to_all import inter_node_share, node_limit, route_max_nodes, route_max_ranks
from llmsizing.comm import communication
from llmsizing.moe import ep_all_to_all
from llmsizing.network import get_node

V3, V2 = get_model("deepseek-v3"), get_model("deepseek-v2")


@pytest.mark.parametrize("ep, nodes", [
    (64, 4),     # 8 nodes of 8 GPUs, 4 experts a GPU, 32 a node = one group a node: 4 groups, 4 nodes
    (128, 8),    # 16 nodes, 2 experts a GPU, 16 a node: a group of 32 spans 2 nodes, 4 groups 8 nodes
    (256, 16),   # 32 nodes, 1 expert a GPU, 8 a node: a group spans 4 nodes, 4 groups 16 (top-8 caps at 8)
    (32, 4),     # 4 nodes, 8 experts a GPU, 64 a node = two groups a node: every one of the 4 nodes
    (16, 2),     # 2 nodes: both
    (8, 1),      # one node
])
def test_deepseek_v3_nodes_reached(ep, nodes):
    assert route_max_nodes(V3, ep, 8) == nodes


@pytest.mark.parametrize("ep, nodes", [
    (8, 1),      # one node holds every group
    (32, 3),     # 5 experts a GPU, 40 a node: a group of 20 in one node, 3 groups 3 nodes
    (80, 6),     # 2 experts a GPU, 16 a node: group 0 (experts 0-19) on nodes 0-1, every group 2 nodes
    (160, 9),    # 1 expert a GPU, 8 a node: group 0 on nodes 0-2 (experts 0-19), group 1 on 2-4: 3 each
])
def test_deepseek_v2_nodes_reached(ep, nodes):
    """DeepSeek-V2's config: 160 experts, n_group 8 (groups of 20), topk_group 3, top-6."""
    assert route_max_nodes(V2, ep, 8) == nodes


def test_a_group_wider_than_a_node_doubles_the_network_share():
    # EP 128 on 16 nodes: a token's 8 experts on up to 8 nodes (min(k 8, 8 nodes, 16)), 15/16 of them
    # elsewhere: 8/8 x 15/16 of the k copies; the old count (topk_group = 4 nodes) gave half of it
    assert inter_node_share(8, 128, 8, route_max_nodes(V3, 128, 8)) == pytest.approx(15 / 16)
    assert inter_node_share(8, 128, 8, 4) == pytest.approx(4 / 8 * 15 / 16)
    # EP 256 on 32 nodes: 16 nodes by the groups, 8 by top-8: 31/32 of every copy crosses
    assert inter_node_share(8, 256, 8, route_max_nodes(V3, 256, 8)) == pytest.approx(31 / 32)
    # EP 64 on 8 nodes: unchanged, 4 nodes x 7/8
    assert inter_node_share(8, 64, 8, route_max_nodes(V3, 64, 8)) == pytest.approx(4 / 8 * 7 / 8)


def test_the_gpus_a_token_reaches_by_the_same_spans():
    # unchanged from the closed form (moegap35): V3 at EP 64 a group spans 8 GPUs (32 by 4 groups), V2 at
    # EP 16 2 GPUs (6), at EP 4 two groups share a GPU (3)
    assert (route_max_ranks(V3, 64), route_max_ranks(V2, 16), route_max_ranks(V2, 4)) == (32, 6, 3)
    # EP 40 for V2: 4 experts a GPU, a group of 20 on 5 GPUs (experts 0-19: GPUs 0-4), 3 groups 15
    assert route_max_ranks(V2, 40) == 15


def test_the_ranks_of_an_expert_tensor_parallel_group_count_per_node():
    # with etp 2 a node of 8 holds 4 ranks of an EP group (Megatron-Core's grid puts EP ranks etp apart):
    # V3 at EP 64 then spans 16 nodes, 8 ranks (32 experts) of a group = 2 nodes, 4 groups 8 nodes
    assert route_max_nodes(V3, 64, 4) == 8


def test_no_group_limit_and_the_old_form():
    assert route_max_nodes(get_model("mixtral-8x7b"), 8, 8) is None
    assert route_max_nodes(replace(V3, expert_groups_per_token=8), 128, 8) is None
    with pytest.warns(DeprecationWarning, match="route_max_nodes"):
        assert route_max_nodes(V3) == 4
    with pytest.raises(ValueError, match="max_nodes"):
        node_limit("deepseek")
    with pytest.raises(ValueError, match="max_nodes"):
        node_limit(0)
    with pytest.raises(ValueError, match="gpus_per_node"):
        route_max_nodes(V3, 64, 0)


def _ep_seconds(par, max_nodes):
    g = get_gpu("H800")
    return [c.time_s for c in ep_all_to_all(V3, par, batch=1, seq=4096, gpu=g, node=get_node(None, gpu=g),
                                            grad_accum=1, precision="fp8-deepseek", recompute="none",
                                            max_nodes=max_nodes)]


@pytest.mark.parametrize("ep, nodes", [(64, 4), (128, 8), (256, 8)])
def test_every_caller_prices_the_layouts_own_count(ep, nodes):
    """ep_all_to_all with max_nodes="model" prices the count above for its layout; step_time (training_time's
    MoE path and cost_by_gpu call it with "model") and communication agree with it, and at EP 128/256 the
    network time exceeds the old 4-node price."""
    par = Parallel(dp=ep, ep=ep)
    own = _ep_seconds(par, "model")
    assert own == _ep_seconds(par, nodes)
    if ep > 64:
        assert all(a > b for a, b in zip(own, _ep_seconds(par, 4)))
    kw = dict(batch=1, seq=4096, precision="fp8-deepseek")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        comm = communication(V3, par, gpu="H800", max_nodes="model", **kw)
        st = step_time(V3, "H800", par, **kw)
    assert [c.time_s for c in comm.collectives if c.group == "ep"] == own
    assert st.comm_by_group_s["ep"] == pytest.approx(
        step_time(V3, "H800", par, max_nodes=nodes, **kw).comm_by_group_s["ep"], rel=1e-12)


def test_the_reports_node_limit_is_what_the_config_gives_on_its_layout():
    # DeepSeek-V3's report states M = 4 nodes on 64-way EP over 8-GPU nodes (Sec. 2.1.2, 3.2.2); its config
    # states groups (n_group 8, topk_group 4): the two agree on that layout
    from llmsizing.deepseek import DEEPSEEK_V3_MAX_NODES

    assert route_max_nodes(V3, 64, 8) == DEEPSEEK_V3_MAX_NODES == 4
