"""Chapter 18's NVL72 worked case (issue 38): DeepSeek-V3's FP8 dispatch all-to-all inside one GB200 NVL72
rack against 8-GPU H800 nodes over InfiniBand. The expected times are worked out here from the catalogue's raw
rows (data/nodes.csv: NVLink 900 GB/s one way per GB200 GPU in a 72-GPU domain; H800 NVLink 200 GB/s; one 400
Gb/s NIC per GPU; data/links.csv: achievable fractions and large-message latencies), not from the library."""

import csv
from pathlib import Path

import pytest

from llmsizing.all_to_all import all_to_all_s

DATA = Path(__file__).resolve().parents[1] / "data"
T, K, H = 4096, 8, 7168                       # a 4K micro-batch, DeepSeek-V3's top-8 of hidden 7,168
BUF = T * K * H * 1.0                         # FP8: one byte per value (scales left out), 234.9 MB


def _row(name, key, value):
    with open(DATA / name, newline="") as f:
        return next(r for r in csv.DictReader(f) if r[key] == value)


def test_nvl72_keeps_64_way_expert_parallelism_on_nvlink():
    """ep = 64 fits in the rack's 72-GPU NVLink domain: 63/64 of the buffer leaves each GPU over its NVLink
    at 900 GB/s x the NVLink class's achievable fraction, plus one large-message latency."""
    node = _row("nodes.csv", "name", "GB200 NVL72 compute tray")
    link = _row("links.csv", "link_class", "nvlink")
    assert int(node["scaleup_domain_gpus"]) == 72 and node["as_of"] and node["source"]
    bw = float(node["intra_link_gbps_one_way"]) * float(link["achievable_fraction"]) * 1e9     # 693 GB/s
    by_hand = float(link["large_alpha_us"]) * 1e-6 + BUF * 63 / 64 / bw
    assert all_to_all_s(BUF, 64, "GB200", "GB200 NVL72 compute tray", top_k=K, max_nodes=4) == \
        pytest.approx(by_hand, rel=1e-9)
    assert by_hand * 1e3 == pytest.approx(0.342, abs=0.001)     # 8 us + 231 MB / 693 GB/s


def test_h800_nodes_send_the_node_limited_share_over_their_nics():
    """ep = 64 on 8 H800 nodes with DeepSeek-V3's node limit M = 4: min(k, M, n)/k x (n-1)/n = 4/8 x 7/8 of
    the buffer crosses InfiniBand through the GPU's own 400 Gb/s NIC (50 GB/s x the network class's fraction),
    while 7/64 goes to the node's own peers over the H800's 200 GB/s NVLink; the slower of the two sets the
    time. The rack is about 6.7 times faster."""
    node, net = _row("nodes.csv", "name", "HGX H800 (8-GPU)"), _row("links.csv", "link_class", "network")
    nvl = _row("links.csv", "link_class", "nvlink")
    nic = float(node["nic_gbits"]) / 8 * float(net["achievable_fraction"]) * 1e9                # 45.5 GB/s
    cross = float(net["large_alpha_us"]) * 1e-6 + BUF * (4 / 8) * (7 / 8) / nic
    intra = float(nvl["large_alpha_us"]) * 1e-6 + BUF * 7 / 64 / (
        float(node["intra_link_gbps_one_way"]) * float(nvl["achievable_fraction"]) * 1e9)
    by_hand = max(cross, intra)
    got = all_to_all_s(BUF, 64, "H800", "HGX H800 (8-GPU)", top_k=K, max_nodes=4)
    assert got == pytest.approx(by_hand, rel=1e-9)
    rack = all_to_all_s(BUF, 64, "GB200", "GB200 NVL72 compute tray", top_k=K, max_nodes=4)
    assert got / rack == pytest.approx(6.7, abs=0.1)
