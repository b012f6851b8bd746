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
