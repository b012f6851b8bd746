"""Issue 34: the bytes a collective puts on the network (llmsizing.network.wire_factor), checked against the
stored nccl-tests log and the published algorithms, not against the code's own output.

The log, data/nccl_tests/h100_2x8_gcp_a3mega_tcpxo_all_reduce.txt: 16 H100s on two GCP a3-megagpu-8g VMs, each
with 8 x 200 Gb/s NICs (200 GB/s of egress per node). Its last row: an all-reduce of 8,589,934,592 bytes
(8 GiB) in 47,535 us out of place, algbw 180.71 GB/s, busbw 338.82 GB/s (= 180.71 x 2 x 15 / 16).

By hand:
* a flat 16-rank ring sends 2 x 15 / 16 = 1.875 S out of each node (one ring crossing per node and channel);
  at 338.82 GB/s that is more than the node's 200 GB/s of NICs, so NCCL cannot have run one;
* NCCL's tree on two nodes (NVIDIA/nccl-tests#196, NVIDIA/nccl#946) reduces inside the node and sends each
  byte once across: 2 (m - 1) / m S per node with m = 2 nodes, = S; 8 GiB / 200 GB/s = 42.9 ms at the line
  rate, 47.5 ms measured (90% of it);
* data/links.csv's network row (fitted on this log at node level): 0.91 of the egress, 4.4 us per ring step;
  30 steps (a 16-rank ring all-reduce has 2 x 15; the tree's 2 ceil(log2 16) = 8 levels at 3.75 steps each is
  the same 30), so t = 30 x 4.4 us + S / (0.91 x 200 GB/s) = 0.132 ms + 47.197 ms = 47.33 ms, against
  0.132 ms + 1.875 S / 182 GB/s = 88.63 ms with the flat ring's count (chapter 9's disclosure before).
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from llmsizing import catalog
from llmsizing.comm import communication, ring_collective
from llmsizing.network import (GroupLink, bus_bandwidth_gbps, collective_time_s, get_node, group_link,
                               wire_factor)
from llmsizing.parallel import Parallel

DATA = Path(__file__).resolve().parents[1] / "data"
LOG = DATA / "nccl_tests" / "h100_2x8_gcp_a3mega_tcpxo_all_reduce.txt"
S = 8_589_934_592                                   # 8 GiB, the log's last row
LOG_TIME_S = 47_535e-6                              # its out-of-place time
LOG_BUSBW = 338.82                                  # its busbw column (nccl-tests: algbw x 2 (n - 1) / n)


def network_row():
    with open(DATA / "links.csv", newline="") as fh:
        return next(r for r in csv.DictReader(fh) if r["link_class"] == "network")


@pytest.fixture(scope="module")
def a3_link():
    """The log's setup: a DGX H100 row with the a3-megagpu-8g's NICs (8 x 200 Gb/s), a 16-GPU group."""
    a3 = replace(get_node(gpu="H100 SXM"), nics_per_node=8, nic_gbits=200.0)
    return group_link("H100 SXM", a3, size=16)


def test_the_log_row_is_what_the_test_says():
    row = next(ln.split() for ln in LOG.read_text().splitlines() if ln.strip().startswith("8589934592"))
    assert int(row[0]) == S and float(row[5]) * 1e-6 == LOG_TIME_S and float(row[7]) == LOG_BUSBW
    assert float(row[6]) * 2 * 15 / 16 == pytest.approx(LOG_BUSBW, abs=0.02)       # (both printed rounded)
    # a flat ring would push 1.875 S out of each node: more than its 200 GB/s of NICs can carry
    assert S * 2 * 15 / 16 / LOG_TIME_S / 1e9 > 200


def test_wire_factor_by_hand():
    # flat rings (one GPU per node, or inside one node): 2 (n - 1) / n, (n - 1) / n
    assert wire_factor("all-reduce", 16) == 1.875
    assert wire_factor("all-reduce", 16, 1) == 1.875
    assert wire_factor("reduce-scatter", 8) == 0.875
    # hierarchical: 2 (m - 1) / m over m nodes
    assert wire_factor("all-reduce", 16, 8) == 1.0                       # 2 nodes
    assert wire_factor("all-reduce", 64, 8) == 1.75                      # 8 nodes: 2 x 7 / 8
    assert wire_factor("all-gather", 32, 4) == 0.875                     # 8 nodes: 7 / 8
    assert wire_factor("reduce-scatter", 1024, 8) == 127 / 128          # 128 nodes
    assert wire_factor("send/recv", 2, 1) == 1.0
    assert wire_factor("all-reduce", 8, 8) == 0.0                        # one node: nothing crosses
    # many nodes: both counts tend to 2 S per node
    assert abs(wire_factor("all-reduce", 8192, 8) - wire_factor("all-reduce", 8192)) < 0.002


@pytest.mark.parametrize("args, error, match", [
    (("all-reduce", 16, 0), ValueError, "per_domain"),
    (("all-reduce", 16, 17), ValueError, "per_domain"),
    (("all-reduce", 16, 2.5), TypeError, "per_domain"),
    (("all-to-all", 16, 8), ValueError, "kind"),
    (("all-reduce", 0, 1), ValueError, "n"),
])
def test_wire_factor_refuses_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        wire_factor(*args)


def test_the_logs_8_gib_all_reduce(a3_link):
    row = network_row()
    fraction, alpha = float(row["achievable_fraction"]), float(row["alpha_us"]) * 1e-6
    assert (fraction, alpha) == (0.91, 4.4e-6)
    assert a3_link.per_domain == 8 and a3_link.across
    t = collective_time_s("all-reduce", S, 16, a3_link)
    assert t == pytest.approx(30 * 4.4e-6 + S / (0.91 * 200e9), rel=1e-9)           # 47.33 ms
    assert t == pytest.approx(LOG_TIME_S, rel=0.01)                                # the log: 47.535 ms
    # the flat ring's count, the library's before issue 34: 88.6 ms, 1.86x the log
    flat = collective_time_s("all-reduce", S, 16, replace(a3_link, per_domain=1))
    assert flat == pytest.approx(30 * 4.4e-6 + 1.875 * S / (0.91 * 200e9), rel=1e-9)
    assert flat * 1e3 == pytest.approx(88.6, abs=0.05) and flat > 1.8 * LOG_TIME_S


def test_the_logs_bus_bandwidth_column(a3_link):
    """nccl-tests' busbw (2 x 15 / 16 S / t) exceeds the NICs on two nodes, in the log and in the model."""
    bus = bus_bandwidth_gbps("all-reduce", [S], 16, a3_link)[0]
    assert bus == pytest.approx(LOG_BUSBW, rel=0.01) and bus > 200
    wire = bus_bandwidth_gbps("all-reduce", [S], 16, a3_link, wire=True)[0]
    assert wire == pytest.approx(180.71, rel=0.01) and wire < 200                  # the log's algbw x 1


def test_one_gpu_per_node_is_a_flat_ring():
    """Data parallelism under tp = 8 on DGX H100s: one GPU per node, one NIC each, 2 (n - 1) / n S per GPU."""
    dgx = get_node("DGX H100")
    gl = group_link("H100 SXM", dgx, size=16, stride=8)
    assert gl.per_domain == 1 and gl.across
    t = collective_time_s("all-reduce", 2**30, 16, gl)
    assert t == pytest.approx(30 * 4.4e-6 + 1.875 * 2**30 / (0.91 * 50e9), rel=1e-9)


def test_an_nvl72_rack_is_one_domain():
    """GB200 NVL72: 72 GPUs per NVLink domain; 144 GPUs over 2 racks are hierarchical over the 2 racks."""
    gb = catalog.get_gpu("GB200")
    gl = group_link(gb, get_node(gpu=gb), size=144)
    assert gl.per_domain == 72 and gl.across
    t = collective_time_s("all-reduce", 2**30, 144, gl)
    steps = min(2 * 143, 3.75 * 2 * 8)                                # ceil(log2 144) = 8 levels
    assert t == pytest.approx(steps * gl.alpha_s + 1.0 * 2**30 / (gl.bandwidth_gbps * 1e9), rel=1e-9)


@pytest.mark.parametrize("tp, factor", [(1, 1.0), (8, 1.875)])
def test_communication_counts_the_same_bytes(tp, factor):
    """comm.communication's data-parallel rows over 16 GPUs of DGX H100s: two whole nodes (tp = 1, S per call)
    or one GPU per node (tp = 8, a flat ring's 1.875 S per call)."""
    comm = communication("llama-3-8b", Parallel(tp=tp, dp=16, sp=tp > 1), batch=1, seq=4096, gpu="H100 SXM")
    rows = [c for c in comm.collectives if c.group == "dp"]
    assert rows
    for c in rows:
        assert c.bytes_per_gpu == pytest.approx(factor * c.message_bytes * c.calls, rel=1e-12)
    # ring_collective on a hand-made link of 8 GPUs per domain: the same count
    unit = GroupLink("unit", 1.0, 1.0, 0.0, 8, True)
    assert ring_collective("x", "dp", 64, "all-reduce", 100.0, 3, unit).bytes_per_gpu == 3 * 1.75 * 100.0


def test_the_phase_inside_the_node_caps_the_bandwidth():
    """The hierarchical all-reduce also moves 2 (k - 1) / k S per GPU over NVLink inside each node, pipelined
    with the network's 2 (m - 1) / m S per node: the slower phase sets the time. DGX H100 (NVLink 450 GB/s one
    way at links.csv's 0.77: 346.5 GB/s; 8 x 400 Gb/s NICs at 0.91: 364 GB/s per GPU's share of the node)."""
    dgx = get_node("DGX H100")
    two = group_link("H100 SXM", dgx, size=16)          # m = 2: NVLink's 1.75 S / 346.5 > the NICs' S / 364
    assert two.bandwidth_gbps == pytest.approx(346.5 / 1.75)
    t = collective_time_s("all-reduce", 2**30, 16, two)
    assert t == pytest.approx(30 * 4.4e-6 + 1.75 * 2**30 / 346.5e9, rel=1e-9)
    many = group_link("H100 SXM", dgx, size=128)        # m = 16: the NICs' 1.875 S / 364 > NVLink's 1.75 S
    assert many.bandwidth_gbps == pytest.approx(364.0)
    # on the log's nodes (8 x 200 Gb/s) the NICs bound it over two nodes: 8 GiB, S / 182 GB/s = 47.2 ms
    # against NVLink's 1.75 S / 346.5 GB/s = 43.4 ms
    a3 = replace(dgx, nics_per_node=8, nic_gbits=200.0)
    assert group_link("H100 SXM", a3, size=16).bandwidth_gbps == pytest.approx(182.0)
    # tp = 16 over two 8-GPU nodes costs a little less than a flat ring of 16 in one NVLink domain, not half
    domain = group_link("H100 SXM", get_node("DGX H100", gpus_per_node=16), size=16)
    assert not domain.across
    inside = collective_time_s("all-reduce", 2**30, 16, domain)
    assert inside == pytest.approx(30 * 2.3e-6 + 1.875 * 2**30 / 346.5e9, rel=1e-9)
    assert 0.9 * inside < t < inside
