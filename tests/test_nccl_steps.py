"""NCCL's ring latency by step kind (issue 34, net47): the tuner's step counts (NVIDIA/nccl
src/graph/tuning.cc lines 289-291 and 411), the published Polaris logs at 2, 8, 256 and 540 nodes
(data/nccl_node_counts.csv), the fit checked on a node count left out, and ``latency="nccl"`` behind a
keyword that leaves today's numbers alone."""

import csv
from pathlib import Path

import pytest

from llmsizing import comm, network
from llmsizing.nccl_steps import (fit_inter_node, measured_latency_us, network_fit, node_count_rows,
                                  ring_step_split)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kind,n,nodes,split", [
    ("all-gather", 32, 8, (24, 7)),          # 31 steps, 7 of them node to node
    ("reduce-scatter", 2160, 540, (1620, 539)),
    ("all-reduce", 16, 2, (28, 2)),          # 2 (16 - 1) = 30 steps, 2 (2 - 1) = 2 node to node
    ("all-reduce", 8, 1, (14, 0)),           # one node: no inter-node step
    ("all-gather", 256, 256, (0, 255)),      # one GPU a node: every step crosses
])
def test_ring_step_split_counts_as_nccls_tuner(kind, n, nodes, split):
    assert ring_step_split(kind, n, nodes) == split


def test_ring_step_split_refuses_bad_input_by_name():
    with pytest.raises(ValueError, match="nodes"):
        ring_step_split("all-gather", 4, 8)
    with pytest.raises(ValueError, match="kind"):
        ring_step_split("all-to-all", 8, 2)


def test_the_polaris_logs_as_published():
    with open(ROOT / "data" / "nccl_node_counts.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {int(r["nodes"]) for r in rows} == {2, 8, 256, 540}
    for r in rows:
        assert int(r["ranks"]) == 4 * int(r["nodes"]) and r["gpus_per_node"] == "4"
        assert r["source"].startswith("https://github.com/argonne-lcf/alcf-nccl-tests/blob/385be336")
        assert f"/n{r['nodes']}.g4." in r["source"] and r["as_of"] == "2024-04-29" and r["nccl"] == "2.21.5"
        assert float(r["time_us"]) > 0
    # the 540-node all_gather's first row, read off the log: 34,560 B (16 B a rank) in 17,165 us
    first = min((r for r in rows if r["nodes"] == "540" and r["collective"] == "all_gather"),
                key=lambda r: int(r["size_bytes"]))
    assert (first["size_bytes"], first["time_us"]) == ("34560", "17165")
    assert len(node_count_rows()) == len(rows)
    with pytest.raises(ValueError, match="cluster"):
        node_count_rows("no-such-cluster")


def test_measured_latency_is_the_median_of_the_three_smallest_messages():
    assert measured_latency_us(2) == pytest.approx(68.86)          # 69.40, 66.96, 68.86 us
    assert measured_latency_us(540) == pytest.approx(17198.0)      # 17,165, 17,198, 17,289 us


def test_fit_on_two_node_counts_predicts_the_one_left_out():
    """By hand, intra-node step 2.3 us (data/links.csv's nvlink alpha): at 8 nodes (32 ranks) 264.4 =
    b + 24 x 2.3 + 7 e; at 256 nodes (1,024 ranks) 8,022.6 = b + 768 x 2.3 + 255 e; so 248 e = 8,022.6 -
    1,766.4 - 264.4 + 55.2 = 6,047.0, e = 24.383 us, b = 209.2 - 170.68 = 38.52 us. At 540 nodes (2,160
    ranks, 1,620 intra and 539 inter steps): 38.52 + 3,726 + 13,142.4 = 16,907 us; the log's three smallest
    messages took 17,165-17,289 us: 1.7% short."""
    fit = fit_inter_node(2.3e-6, leave_out=(2, 540))
    assert fit.nodes == (8, 256)
    assert fit.inter_alpha_s * 1e6 == pytest.approx(24.383, abs=0.002)
    assert fit.base_s * 1e6 == pytest.approx(38.52, abs=0.02)
    pred = fit.latency_s("all-gather", 2160, 540) * 1e6
    assert pred == pytest.approx(16907, abs=2)
    assert 0.97 < pred / 17165 < 1.0


def test_least_squares_fit_holds_the_left_out_node_count_within_ten_percent():
    for out in (2, 8, 256, 540):
        fit = fit_inter_node(2.3e-6, leave_out=(out,))
        ratio = fit.latency_s("all-gather", 4 * out, out) * 1e6 / measured_latency_us(out)
        assert 0.9 < ratio < 1.1, (out, ratio)
    with pytest.raises(ValueError, match="two node counts"):
        fit_inter_node(2.3e-6, leave_out=(2, 8, 256))


def _h100_network_link(size):
    return network.group_link("H100-SXM", network.get_node(None, "H100-SXM"), size=size)


def test_flat_latency_stays_the_default():
    gl = _h100_network_link(256)
    for s in (1e4, 16 * 2 ** 20, 2 ** 30):
        for p in (False, True):
            assert (network.collective_time_s("all-gather", s, 256, gl, protocols=p, latency="flat")
                    == network.collective_time_s("all-gather", s, 256, gl, protocols=p))
    a = comm.ring_collective("g", "dp", 256, "all-gather", 2 ** 24, 3, gl)
    b = comm.ring_collective("g", "dp", 256, "all-gather", 2 ** 24, 3, gl, latency="flat")
    assert a == b
    with pytest.raises(ValueError, match="latency"):
        network.collective_time_s("all-gather", 1e6, 256, gl, latency="tuner")
    with pytest.raises(ValueError, match="latency"):
        comm.ring_collective("g", "dp", 256, "all-gather", 2 ** 24, 3, gl, latency="tuner")


def test_nccl_latency_on_32_h100_nodes_by_hand():
    """256 GPUs, 8 a node: 255 ring steps, 224 on NVLink at 2.3 us, 31 node to node at the fitted step,
    plus the fitted base (the flat model: 255 x 4.4 us = 1,122 us)."""
    gl = _h100_network_link(256)
    fit = network_fit("LL", network.link_class("nvlink").alpha_s)
    lat = fit.base_s + 224 * 2.3e-6 + 31 * fit.inter_alpha_s
    s = 16 * 2 ** 20
    bytes_term = network.link_wire_factor("all-gather", 256, gl) * s / (gl.bandwidth_gbps * 1e9)
    t = network.collective_time_s("all-gather", s, 256, gl, latency="nccl")
    assert t == pytest.approx(lat + bytes_term, rel=1e-12)
    assert network.collective_time_s("all-gather", s, 256, gl) == pytest.approx(255 * 4.4e-6 + bytes_term)
    c = comm.ring_collective("g", "dp", 256, "all-gather", s, 3, gl, latency="nccl")
    assert c.latency_s == pytest.approx(3 * lat, rel=1e-12)
    # with protocols the call is priced as collective_time_s prices it
    cp = comm.ring_collective("g", "dp", 256, "all-gather", s, 3, gl, latency="nccl", protocols=True)
    one = network.collective_time_s("all-gather", s, 256, gl, latency="nccl", protocols=True)
    assert cp.latency_s / 3 + cp.bytes_per_gpu / 3 / (cp.bandwidth_gbps * 1e9) == pytest.approx(one)


def test_nccl_latency_changes_nothing_inside_a_node():
    gl = _h100_network_link(8)
    assert not gl.across
    for p in (False, True):
        assert (network.collective_time_s("all-reduce", 2 ** 21, 8, gl, protocols=p, latency="nccl")
                == network.collective_time_s("all-reduce", 2 ** 21, 8, gl, protocols=p))
