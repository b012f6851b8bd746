"""``all_to_all.inter_node_share_distinct``: the network share of node-limited routing when a token's experts
may share a node (chapter 18, exercise 2). Expected values by hand from the expected number of distinct nodes
``m (1 - (1 - 1/m)^k)`` that ``k`` uniform draws over ``m`` nodes reach."""

import pytest

from llmsizing.all_to_all import inter_node_share, inter_node_share_distinct


def test_deepseek_v3_layout_by_hand():
    # k = 8 experts, ep = 64 GPUs in 8 nodes of 8: without a limit the 8 draws reach 8 x (1 - 0.875^8)
    # = 8 x (1 - 0.343608916) = 5.251128674 nodes, 7/8 of them remote: 4.594737590 / 8 = 0.574342199
    assert inter_node_share_distinct(8, 64, 8) == pytest.approx(0.574342199, rel=1e-9)
    # at most 4 nodes: 4 x (1 - 0.75^8) = 4 x (1 - 0.100112915) = 3.599548340 nodes, x 7/8 / 8 = 0.393700600
    assert inter_node_share_distinct(8, 64, 8, 4) == pytest.approx(0.393700600, rel=1e-9)
    # one node: the draws all land on it, as in the bound (1 x 7/8 / 8)
    assert inter_node_share_distinct(8, 64, 8, 1) == pytest.approx(0.109375, rel=1e-12)
    assert inter_node_share_distinct(8, 64, 8, 1) == pytest.approx(inter_node_share(8, 64, 8, 1), rel=1e-12)


def test_never_above_the_bound_and_zero_inside_a_node():
    for k in (1, 2, 6, 8):
        for ep, g in ((16, 8), (64, 8), (256, 8), (128, 72)):
            for m in (None, 1, 2, 3, 4, 8):
                assert inter_node_share_distinct(k, ep, g, m) <= inter_node_share(k, ep, g, m) + 1e-12
    assert inter_node_share_distinct(8, 8, 8) == 0.0
    # one expert a token: one node, the bound is exact (1 x 7/8 / 1 at 8 nodes)
    assert inter_node_share_distinct(1, 64, 8) == pytest.approx(0.875, rel=1e-12)


def test_bad_input_names_the_parameter():
    with pytest.raises((ValueError, TypeError), match="top_k"):
        inter_node_share_distinct(0, 64, 8)
    with pytest.raises((ValueError, TypeError), match="max_nodes"):
        inter_node_share_distinct(8, 64, 8, 0)


def test_against_a_top_k_router_counted_as_deepep_counts():
    """The formula draws with replacement; a router takes k distinct experts (the top-k of its scores). Counted
    as DeepEP counts a token's nodes (expert -> rank ``topk_idx // (num_experts // num_ranks)``, rank -> node
    ``rank // num_local_ranks``, each node once), 20,000 tokens with uniform random scores over DeepSeek-V3's
    256 experts on 64 ranks in 8 nodes reach 8 (1 - C(224, 8) / C(256, 8)) = 5.2947 nodes on average; the
    library's share is within 1% of that expectation's (0.8% low, as its docstring says), which the count
    matches to 0.5%."""
    import math

    import numpy as np

    rng = np.random.default_rng(0)
    top = np.argsort(rng.random((20_000, 256)), axis=1)[:, :8]          # 8 distinct experts a token
    nodes = (top // (256 // 64)) // 8
    distinct = np.array([len(set(r)) for r in nodes.tolist()]).mean()
    exact = 8 * (1 - math.comb(224, 8) / math.comb(256, 8))
    assert distinct == pytest.approx(exact, rel=0.005)          # the count agrees with the exact expectation
    assert inter_node_share_distinct(8, 64, 8) == pytest.approx(exact * 7 / 8 / 8, rel=0.01)
    assert inter_node_share_distinct(8, 64, 8) < exact * 7 / 8 / 8
