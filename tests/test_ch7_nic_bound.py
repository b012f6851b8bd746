"""Chapter 7: from how many whole nodes a data-parallel group's bandwidth is the NICs' (session 26's read of
chapter 7, L1: the prose said "from sixteen nodes on"; the NIC phase is the slower from 13).

By hand for DGX H100s (NVIDIA DGX H100 datasheet: NVLink 4 at 900 GB/s bidirectional, 450 GB/s one way per
GPU, and eight 400 Gb/s ConnectX-7 NICs, 50 GB/s one way per GPU), at data/links.csv's achievable fractions
(nvlink 0.77, network 0.91): NVLink reaches 450 x 0.77 = 346.5 GB/s, the eight NICs of a node serve its eight
GPUs of the group at 8 x 50 x 0.91 = 364 GB/s each. The hierarchical all-reduce moves bus_factor(8) =
2 x 7 / 8 = 1.75 of the message inside the node and bus_factor(m) = 2 (m - 1) / m across m nodes, pipelined:
charged at the network's count, the NVLink phase caps the bandwidth at 346.5 x (2 (m - 1) / m) / 1.75. That
reaches 364 when (m - 1) / m >= 364 x 1.75 / (2 x 346.5) = 0.9192, m >= 12.375: 13 nodes. At 12,
346.5 x (22 / 12) / 1.75 = 363.0 GB/s, NVLink's phase still the slower.
"""

from __future__ import annotations

import pytest

from llmsizing import Parallel
from llmsizing.comm import group_network
from llmsizing.network import nic_bound_nodes

NVLINK, NICS = 450 * 0.77, 8 * 50 * 0.91          # GB/s per GPU, one way, achieved


def _nvlink_cap(m: int) -> float:
    return NVLINK * (2 * (m - 1) / m) / (2 * 7 / 8)


def test_the_nics_bind_from_13_dgx_h100s():
    first = next(m for m in range(2, 100) if _nvlink_cap(m) >= NICS)
    assert first == 13
    assert _nvlink_cap(12) == pytest.approx(363.0, abs=0.05)
    assert nic_bound_nodes("H100 SXM") == first
    at = {m: group_network(Parallel(dp=8 * m), "H100 SXM")["dp"].bandwidth_gbps for m in (2, 12, 13, 16)}
    assert at[12] == pytest.approx(_nvlink_cap(12), rel=1e-9)
    assert at[13] == at[16] == pytest.approx(NICS, rel=1e-9)
    assert at[2] == pytest.approx(NVLINK / 1.75, rel=1e-9)      # two nodes: 198 GB/s, NVLink's phase


def test_bad_max_nodes_is_refused_by_name():
    with pytest.raises((ValueError, TypeError), match="max_nodes"):
        nic_bound_nodes("H100 SXM", max_nodes=1)
    assert nic_bound_nodes("H100 SXM", max_nodes=12) is None     # not within 12 nodes
