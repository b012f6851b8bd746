"""DeepEP's NVLink forwarding leg (issue 35): the all-to-all under node-limited routing against DeepEP's
published normal-kernel figures, every expected value worked out by hand from them.

Source: DeepEP's README, legacy V1 table "Normal kernels with NVLink and RDMA forwarding" (docs/legacy.md at
0297fc8): H800 (~160 GB/s NVLink), one CX7 400 Gb/s NIC per GPU (~50 GB/s), 4,096 tokens per GPU, hidden
7,168, top-4 groups, top-8 experts, FP8 dispatch, BF16 combine. Bottleneck bandwidth, dispatch / combine: EP 8
153 / 158 GB/s (NVLink); EP 16 43 / 43, EP 32 58 / 57, EP 64 51 / 50 GB/s (RDMA).

How the figure is counted (tests/legacy/test_internode.py): 256 experts, the scores viewed as one group per
node, num_topk_groups = min(num_nodes, 4); RDMA bytes = num_rdma_token_sent x hidden x 2 (x (1 + 4/128) / 2 in
FP8: 7,392 B a token), num_rdma_token_sent = the (token, node) pairs with one of the token's experts on that
node, the token's own node included; the bandwidth is those bytes over the kernel's time. So time = tokens x
nodes reached x bytes a token / bandwidth. At EP 16 (2 nodes, both groups chosen) a token reaches both nodes
unless all its top-8 sit in one group: the 8 best of the 256 scores all in one group, 2 x (128/256) x
(127/255) x ... x (121/249) = 0.7%: 1.993 nodes, 2 to 0.4%.

The kernel (DeepSeek-V3 Sec. 3.2.2; DeepEP's internode.cu): RDMA once to the same-index GPU of each node, then
that GPU forwards the token over NVLink to the GPUs of its node holding its experts. The library's H800 node:
NVLink 154 GB/s a GPU one way, NIC 45.5 GB/s (the GroupLinks all_to_all._links reads)."""

import pytest

from llmsizing import get_gpu
from llmsizing.all_to_all import _links, all_to_all_s, inter_node_share
from llmsizing.network import get_node

T, H, K = 4096, 7168, 8
FP8_TOKEN_B, BF16_TOKEN_B = H * (1 + 4 / 128), H * 2           # 7,392 and 14,336 B a token
G = get_gpu("H800")
NODE = get_node(None, gpu=G)                                    # HGX H800, 8 GPUs on NVLink
NVL_GBPS, NIC_GBPS = 154.0, 45.5


def _deepep_s(ep: int, token_b: float, gbps: float, nodes_reached: float) -> float:
    """A published DeepEP normal-kernel time: its counted RDMA bytes (own node too) over its bandwidth."""
    return T * nodes_reached * token_b / (gbps * 1e9)


def _model_s(ep: int, token_b: float, max_nodes: int) -> float:
    return all_to_all_s(T * K * token_b, ep, G, NODE, top_k=K, max_nodes=max_nodes)


def test_the_links_are_the_ones_worked_with():
    d, _, cross, intra = _links(16, G, NODE, 1)
    assert d == 8 and cross.bandwidth_gbps == NIC_GBPS and intra.bandwidth_gbps == NVL_GBPS


def test_ep16_is_set_by_the_nvlink_forwarding_leg():
    # published: 4,096 x 1.993 nodes x 7,392 B / 43 GB/s = 1.403 ms (dispatch); x 14,336 B: 2.722 ms
    pub_d, pub_c = _deepep_s(16, FP8_TOKEN_B, 43, 1.993), _deepep_s(16, BF16_TOKEN_B, 43, 1.993)
    assert pub_d == pytest.approx(1.403e-3, rel=1e-3) and pub_c == pytest.approx(2.722e-3, rel=1e-3)
    # the NIC's share: a token crosses to the other node once (2 nodes x 1/2): 4,096 x 7,392 B / 45.5 GB/s
    nic = T * FP8_TOKEN_B / (NIC_GBPS * 1e9)
    assert nic == pytest.approx(0.665e-3, rel=1e-3)              # half the published time: not what sets it
    # the forwarding leg: each of the 8 copies forwarded over NVLink but the 1/8 that lands on the forwarder:
    # 4,096 x 8 x 7/8 x 7,392 B / 154 GB/s = 1.376 ms, 0.98x the published 1.403 ms
    nvl = T * K * 7 / 8 * FP8_TOKEN_B / (NVL_GBPS * 1e9)
    assert nvl == pytest.approx(1.376e-3, rel=1e-3)
    got = _model_s(16, FP8_TOKEN_B, 2)
    assert got == pytest.approx(nvl, rel=0.01)                   # (plus the link's latency and protocol)
    assert 0.95 < got / pub_d < 1.02                               # 0.99 (0.49 before the forwarding leg)
    assert 0.95 < _model_s(16, BF16_TOKEN_B, 2) / pub_c < 1.02     # the combine: 2.68 against 2.72 ms


def test_ep32_and_ep64_stay_set_by_the_nic():
    """With 4 or 8 nodes and the top-4 groups a token crosses the network 3 (EP 32: 4 x 3/4) or 3.5 (EP 64:
    4 x 7/8) times, above 7/8 x 8 x 45.5 / 154 = 2.07: the NIC is the slower leg and the times do not move."""
    assert 7 / 8 * K * NIC_GBPS / NVL_GBPS == pytest.approx(2.068, abs=1e-3)
    for ep, copies in ((32, 3.0), (64, 3.5)):
        assert inter_node_share(K, ep, 8, 4) * K == pytest.approx(copies)
        nic = T * copies * FP8_TOKEN_B / (NIC_GBPS * 1e9)             # 2.00 ms and 2.33 ms
        assert _model_s(ep, FP8_TOKEN_B, 4) == pytest.approx(nic, rel=0.02)
    # EP 64: a token reaches its 4 chosen nodes (8 experts over 4 groups of 32): 4,096 x 4 x 7,392 B / 51 GB/s
    # = 2.375 ms, and 4 x 14,336 B / 50 GB/s = 4.698 ms for the combine
    assert _model_s(64, FP8_TOKEN_B, 4) / _deepep_s(64, FP8_TOKEN_B, 51, 4) == pytest.approx(0.99, abs=0.02)
    assert _model_s(64, BF16_TOKEN_B, 4) / _deepep_s(64, BF16_TOKEN_B, 50, 4) == pytest.approx(0.97, abs=0.02)
    # EP 32: the fourth chosen group (of 64 experts) can miss all of a token's top-8, so a token reaches
    # between 3.5 and 4 nodes (DeepEP's routing, simulated: 3.6): 1.83-2.09 ms at 58 GB/s; the model's 2.03
    pub = (_deepep_s(32, FP8_TOKEN_B, 58, 3.5), _deepep_s(32, FP8_TOKEN_B, 58, 4))
    assert pub[0] < _model_s(32, FP8_TOKEN_B, 4) < pub[1]


def test_a_tight_node_limit_makes_nvlink_the_bottleneck_at_any_size():
    """One or two nodes a token (fewer than 2.07 crossings) and the forwarding leg sets the time: the same
    1.376 ms as two nodes, whatever the EP; three nodes a token at EP 64 cross 3 x 7/8 = 2.6 times: the
    NIC."""
    nvl = T * K * 7 / 8 * FP8_TOKEN_B / (NVL_GBPS * 1e9)
    for ep in (32, 64, 128):
        for m in (1, 2):
            assert _model_s(ep, FP8_TOKEN_B, m) == pytest.approx(nvl, rel=0.01)
    nic = T * 3 * 7 / 8 * FP8_TOKEN_B / (NIC_GBPS * 1e9)
    assert _model_s(64, FP8_TOKEN_B, 3) == pytest.approx(nic, rel=0.02)


def test_without_a_node_limit_nothing_is_forwarded():
    """Without max_nodes each copy goes straight to its GPU (NCCL's all-to-all, DeepEP's low-latency kernels):
    the own node's peers get (8 - 1) / ep of the buffer over NVLink, as before, and the NIC the rest."""
    for ep in (16, 64):
        nic = T * K * FP8_TOKEN_B * (ep - 8) / ep / (NIC_GBPS * 1e9)
        assert all_to_all_s(T * K * FP8_TOKEN_B, ep, G, NODE) == pytest.approx(nic, rel=0.02)


def test_deepep_published_times_on_its_own_counting():
    """data/deepep_normal_kernels.csv turned back into times on the bytes DeepEP's tests count (a token once
    to each GPU or node holding one of its experts, its own included), every value by hand."""
    from math import prod

    from llmsizing.all_to_all import deepep_destinations, deepep_normal_published_s

    # EP 8 (tests/test_intranode.py): 8 distinct experts of 256, 32 a GPU; a GPU misses all 8 with
    # probability (224 x 223 x ... x 217) / (256 x 255 x ... x 249) = 0.338, so a token reaches 5.29 GPUs
    miss = prod(range(217, 225)) / prod(range(249, 257))
    assert miss == pytest.approx(0.3382, abs=1e-4)
    assert deepep_destinations(8, 8, 256, 8, 4) == pytest.approx(8 * (1 - miss), rel=1e-12)
    assert deepep_normal_published_s(8) == pytest.approx(T * 8 * (1 - miss) * FP8_TOKEN_B / 153e9, rel=1e-12)
    assert deepep_normal_published_s(8) == pytest.approx(1.048e-3, rel=1e-3)
    assert deepep_normal_published_s(8, "combine") == pytest.approx(T * 8 * (1 - miss) * BF16_TOKEN_B / 158e9)
    # across nodes: the nodes among a token's experts, its own included: at EP 16 both groups are chosen, so
    # 2 (1 - C(128, 8) / C(256, 8)) = 1.993 (tests/test_deepep_ep16.py); 4 chosen of 8 at EP 64
    nodes16 = 2 * (1 - prod(range(121, 129)) / prod(range(249, 257)))
    assert deepep_normal_published_s(16) == pytest.approx(T * nodes16 * FP8_TOKEN_B / 43e9, rel=1e-12)
    assert deepep_normal_published_s(16) == pytest.approx(1.403e-3, rel=1e-3)
    assert deepep_normal_published_s(64) == pytest.approx(T * 4 * FP8_TOKEN_B / 51e9, rel=1e-12)
    assert deepep_normal_published_s(64, "combine") == pytest.approx(4.698e-3, rel=1e-3)
    # the model against them (chapter 18): over the network the times agree; in one node the model sends all
    # 8 x 7/8 = 7 copies a token where DeepEP sends 5.29 x 7/8 = 4.63, so it is the slower there
    assert 0.95 < _model_s(64, FP8_TOKEN_B, 4) / deepep_normal_published_s(64) < 1.02
    assert _model_s(8, FP8_TOKEN_B, 4) / deepep_normal_published_s(8) > 1.2


def test_deepep_published_refuses_what_it_does_not_hold():
    from llmsizing.all_to_all import deepep_destinations, deepep_normal_published_s

    with pytest.raises(ValueError, match="ep must be one of"):
        deepep_normal_published_s(128)
    with pytest.raises(ValueError, match="op"):
        deepep_normal_published_s(8, "all-gather")
    with pytest.raises(ValueError, match="ep must divide experts"):
        deepep_destinations(7, 8, 256, 8, 4)
