"""Why the "deepep" dispatcher is 0.80x DeepEP's published EP 16 time (issue 35, deepep29): every expected
value is worked out here by hand from DeepEP's README table and tests, or is a relation.

Sources. DeepEP's README, legacy V1 table (docs/legacy.md; data/deepep_normal_kernels.csv): H800, one CX7
400 Gb/s NIC a GPU, 4,096 tokens, hidden 7,168, 256 experts, top-8, FP8 dispatch (7,392 B a token): 153 GB/s
(NVLink) at EP 8, 43 / 58 / 51 GB/s (RDMA) at EP 16 / 32 / 64. tests/legacy/test_internode.py: the scores
viewed as one group a node, num_topk_groups = min(nodes, 4), so at EP 16 (2 of 2) and EP 32 (4 of 4) no
group limits the plain top-8; it counts num_rdma_token_sent (the nodes among a token's experts, its own too)
for the RDMA figure and recv_x (every token a GPU receives, its own too) for the NVLink one. DeepEP issue
#285, its maintainer: "in our EP16 test case, when the RDMA bandwidth reaches 43 GB/s, the NVLink bandwidth
will exceeds 140 GB/s, making NVLink the bottleneck". The library's H800 node: NVLink 154 GB/s one way, NIC
45.5 GB/s.
"""

import numpy as np
import pytest
# the benchmark's shape, the H800 node and the hypergeometric miss, by hand (as the dispatcher's tests)
from test_dispatcher import B, E, G, H, K, NIC, NODE, NVL, T, _miss  # noqa: F401

from llmsizing.all_to_all import (all_to_all_s, deepep_destinations, deepep_normal_nvl_gbps,
                                  deepep_normal_published_s)


NODES_16 = 2 * (1 - _miss(256, 128))                       # 1.993
NODES_32 = 4 * (1 - _miss(256, 64))                        # 3.614
GPUS_16 = 16 * (1 - _miss(256, 16))                        # 6.523


def _model(ep, max_nodes=None):
    return all_to_all_s(T * K * B, ep, G, NODE, top_k=K, max_nodes=max_nodes, dispatcher="deepep", experts=E)


def test_the_nodes_a_token_reaches_in_deepeps_test():
    assert NODES_16 == pytest.approx(1.993, abs=1e-3) and NODES_32 == pytest.approx(3.614, abs=1e-3)
    assert deepep_destinations(16, K, E, 8, 2) == pytest.approx(NODES_16, rel=1e-12)
    assert deepep_destinations(32, K, E, 8, 4) == pytest.approx(NODES_32, rel=1e-12)
    assert deepep_destinations(64, K, E, 8, 4) == 4.0          # 4 of 8 groups chosen: each taken as reached


def test_deepeps_routing_simulated_agrees():
    """test_internode.py's routing, done here with numpy: |randn| + 1 scores, the top min(nodes, 4) groups
    by their best score, the top-8 among them; the distinct nodes counted as num_rdma_token_sent does."""
    rng = np.random.default_rng(35)
    for ep, expected in ((16, NODES_16), (32, NODES_32), (64, 4.0)):
        nodes = ep // 8
        s = np.abs(rng.standard_normal((T, E))) + 1
        best = np.argsort(-s.reshape(T, nodes, -1).max(-1), axis=1)[:, :min(nodes, 4)]
        chosen = np.zeros((T, nodes), bool)
        np.put_along_axis(chosen, best, True, 1)
        masked = np.where(np.repeat(chosen, E // nodes, 1), s, -1.0)
        node = np.argsort(-masked, axis=1)[:, :K] // (E // nodes)
        reached = np.mean([len(set(r)) for r in node])
        assert reached == pytest.approx(expected, rel=0.01)     # EP 64: 3.98 of the 4 taken


def test_published_times_on_the_nodes_reached():
    # 4,096 x 1.993 x 7,392 B / 43 GB/s = 1.403 ms; 4,096 x 3.614 x 7,392 B / 58 GB/s = 1.887 ms
    assert deepep_normal_published_s(16) == pytest.approx(T * NODES_16 * B / 43e9, rel=1e-12)
    assert deepep_normal_published_s(16) == pytest.approx(1.403e-3, rel=1e-3)
    assert deepep_normal_published_s(32) == pytest.approx(T * NODES_32 * B / 58e9, rel=1e-12)
    assert deepep_normal_published_s(32) == pytest.approx(1.887e-3, rel=1e-3)


def test_deepeps_nvlink_bandwidth_at_ep16_is_its_maintainers():
    """A GPU receives 4,096 x 6.52 tokens while 4,096 x 1.993 are counted for its node's RDMA: 43 x 6.523 /
    1.993 = 140.7 GB/s of counted NVLink, the maintainer's "exceeds 140 GB/s"; in one node the row itself."""
    assert GPUS_16 == pytest.approx(6.523, abs=1e-3)
    assert deepep_normal_nvl_gbps(16) == pytest.approx(43 * GPUS_16 / NODES_16, rel=1e-12)
    assert 140 < deepep_normal_nvl_gbps(16) < 141
    assert deepep_normal_nvl_gbps(16, "combine") == pytest.approx(43 * GPUS_16 / NODES_16, rel=1e-12)
    assert deepep_normal_nvl_gbps(8) == 153.0 and deepep_normal_nvl_gbps(8, "combine") == 158.0
    # EP 32: 58 x 32 (1 - C(248, 8) / C(256, 8)) / 3.614 = 116.6 GB/s, well under NVLink: the NIC's row
    assert deepep_normal_nvl_gbps(32) == pytest.approx(58 * 32 * (1 - _miss(256, 8)) / NODES_32, rel=1e-12)
    assert deepep_normal_nvl_gbps(64) < deepep_normal_nvl_gbps(32) < deepep_normal_nvl_gbps(16)


def test_the_ep16_gap_is_deepeps_nvlink_rate_not_a_missing_byte():
    """The model's forwarding leg carries DeepEP's counted NVLink tokens but the 1 in 8 a GPU forwards to
    itself, at 154 GB/s: (7/8) x 153/154 = 0.869 of DeepEP's time at EP 8, (7/8) x 140.7/154 = 0.80 at EP 16.
    What is left between the two, 140.7 / 153 = 0.92, is the internode kernel's own NVLink rate."""
    nvl16 = deepep_normal_nvl_gbps(16)
    assert _model(16) == pytest.approx(T * GPUS_16 * 7 / 8 * B / NVL, rel=0.02)       # 1.12 ms over NVLink
    assert _model(16) / deepep_normal_published_s(16) == pytest.approx(7 / 8 * nvl16 / 154, rel=0.02)
    assert _model(8) / deepep_normal_published_s(8) == pytest.approx(7 / 8 * 153 / 154, rel=0.02)
    assert 7 / 8 * nvl16 / 154 == pytest.approx(0.80, abs=0.005)
    assert nvl16 / 153 == pytest.approx(0.92, abs=0.005)
    # the NIC carries a token's one crossing (1.993 x 1/2 of it): 0.66 ms, under half DeepEP's time
    assert T * NODES_16 / 2 * B / NIC < 0.5 * deepep_normal_published_s(16)


def test_ep32_is_set_by_the_nic_and_matches_with_the_nodes_drawn():
    """DeepEP's EP 32 test limits nothing (4 of 4 groups): the model draws 3.614 nodes, 3.614 x 3/4 crossings,
    4,096 x 2.71 x 7,392 B / 45.5 GB/s = 1.80 ms, 0.96x of 1.887 ms; the bound of 4 nodes would be 1.07x."""
    nic = T * NODES_32 * 3 / 4 * B / NIC
    assert nic == pytest.approx(1.804e-3, rel=1e-3)
    assert _model(32) == pytest.approx(nic, rel=0.02)
    assert 0.95 < _model(32) / deepep_normal_published_s(32) < 1.0
    assert _model(32, max_nodes=4) / deepep_normal_published_s(32) > 1.05


def test_nvl_gbps_refuses_what_deepep_does_not_publish():
    with pytest.raises(ValueError, match="ep must be one of"):
        deepep_normal_nvl_gbps(128)
    with pytest.raises(ValueError, match="op"):
        deepep_normal_nvl_gbps(16, "all-gather")
