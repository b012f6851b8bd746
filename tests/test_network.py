"""The network model of issue 21 (llmsizing.network, comm.group_network): node egress shared by a group's GPUs in
a node, achievable bandwidth and latency from data/links.csv, the MI300X mesh, and the done-when check that an
FSDP step across whole H100 nodes spends at most a third of the one-NIC-per-GPU time communicating."""

import csv
from pathlib import Path

import pytest

import llmsizing as L
from llmsizing import network
from llmsizing.catalog import list_gpu_variants
from llmsizing.comm import communication, group_network
from llmsizing.parallel import Parallel

DATA = Path(__file__).resolve().parents[1] / "data"


def links_csv():
    with open(DATA / "links.csv", newline="") as fh:
        return {r["link_class"]: r for r in csv.DictReader(fh)}


def nodes_csv():
    with open(DATA / "nodes.csv", newline="") as fh:
        return {r["name"]: r for r in csv.DictReader(fh)}


def test_every_node_row_is_sourced_and_every_gpu_has_one_default_node():
    rows = nodes_csv()
    for r in rows.values():
        assert r["source"].strip() and r["as_of"].strip(), r["name"]
    defaults = [r["gpu"] for r in rows.values() if r["default_for_gpu"] == "yes"]
    assert sorted(defaults) == sorted(L.list_gpus() + list_gpu_variants())


def test_dgx_h100_egress_by_hand():
    r = nodes_csv()["DGX H100"]
    node = network.get_node("DGX H100")
    assert node.egress_gbps == int(r["nics_per_node"]) * float(r["nic_gbits"]) / 8          # 8 x 400 Gb/s
    assert node.nic_gbps_per_gpu == node.egress_gbps / int(r["gpus_per_node"])               # 50 GB/s


def test_a_group_filling_whole_nodes_shares_all_their_nics():
    """Data parallelism under tp=8 has one GPU per node in its group: one NIC each. A data-parallel group of
    64 GPUs that fills 8 nodes has 8 per node: each gets 8 NICs' worth, capped by NVLink."""
    frac_net = float(links_csv()["network"]["achievable_fraction"])
    frac_nv = float(links_csv()["nvlink"]["achievable_fraction"])
    node = network.get_node(gpu="H100 SXM")
    one = group_network(Parallel(tp=8, dp=64), "H100 SXM")["dp"]
    full = group_network(Parallel(dp=64), "H100 SXM")["dp"]
    assert one.across and one.per_domain == 1
    assert one.bandwidth_gbps == pytest.approx(node.nic_gbps_per_gpu * frac_net)
    assert full.across and full.per_domain == 8
    assert full.bandwidth_gbps == pytest.approx(min(8 * node.nic_gbps_per_gpu * frac_net, 450 * frac_nv))
    assert full.bandwidth_gbps > 6 * one.bandwidth_gbps


def test_fsdp_across_eight_full_nodes_spends_at_most_a_third_of_one_nic_per_gpu():
    """Issue 21, done when: a 64-GPU FSDP step across 8 full H100 nodes spends at most a third of the
    one-NIC-per-GPU time in communication. The one-NIC-per-GPU network is the old model's: the same collectives
    over a node whose every GPU is its own node (a scale-up domain of one), each with one 400 Gb/s NIC."""
    kw = dict(batch=1, seq=8192, gpu="H100 SXM", grad_accum=4)
    par = Parallel(dp=64, zero=3)
    now = communication("llama-3-8b", par, **kw)
    alone = network.Node("one GPU per node", "H100 SXM", 1, 1, "switch", 450, 1, 400)
    old = communication("llama-3-8b", par, node=alone, **kw)
    assert [c.collective for c in now.collectives] == [c.collective for c in old.collectives]
    assert now.by_group()["dp"] <= old.by_group()["dp"] / 3


def gpu_links_csv():
    """Each catalogued GPU's (and variant's) link to its node-mates, one way, GB/s, read off the CSVs: a
    datasheet's bidirectional figure halved."""
    out = {}
    for f in ("gpus.csv", "gpu_variants.csv"):
        with open(DATA / f, newline="") as fh:
            for r in csv.DictReader(fh):
                bw = float(r["link_bandwidth_gbps"])
                out[r["name"]] = bw / 2 if r["link_direction"] == "bidirectional" else bw
    return out


def test_every_switch_and_pcie_row_agrees_with_its_gpus_link():
    """Issue 34: a switch or PCIe node row's ``intra_link_gbps_one_way`` caps its GPU's link. Listed before
    that rule was made (session 24): no switch or PCIe row disagrees with its GPU's catalogue link, so the
    rule moved no catalogued price. Each row's figure is its own source's (DGX H100 900 GB/s per GPU
    bidirectional, DGX A100 600, HGX H800 400, DGX B200 1.8 TB/s, ...); the rows that assume an NVSwitch
    baseboard say so. A row that disagrees must say which is right, from its source, in its note."""
    links = gpu_links_csv()
    differ = [(r["name"], float(r["intra_link_gbps_one_way"]), links[r["gpu"]]) for r in nodes_csv().values()
              if r["intra_topology"] in ("switch", "pcie")
              and float(r["intra_link_gbps_one_way"]) != links[r["gpu"]]]
    assert differ == []


def test_a_switch_rows_link_caps_the_gpus():
    """The MegaScale row read as an A800 server: NVIDIA's A800 SXM4 datasheet gives 400 GB/s of NVLink
    (bidirectional), 200 one way, against the A100's 600 / 300. The node row's 200 now counts: a TP8 group
    inside the node gets 200 x the NVLink class's achievable fraction, and a group across such nodes has its
    phase inside the node capped at 200 too. A row above the GPU's link does not raise it."""
    from dataclasses import replace
    frac = float(links_csv()["nvlink"]["achievable_fraction"])
    row = network.get_node("MegaScale Ampere server (8x 200 Gb/s)")
    a800 = replace(row, intra_link_gbps_one_way=200.0)
    tp8 = network.group_link("A100 80GB", a800, size=8)
    assert tp8.nominal_gbps == 200.0 and tp8.bandwidth_gbps == pytest.approx(200.0 * frac)
    assert network.group_link("A100 80GB", row, size=8).nominal_gbps == 300.0          # the A100's 600 / 2
    # 16 GPUs over two nodes, 8 a node: the network's 8 x 25 GB/s x its fraction, or the phase inside the
    # node, 200 x frac x bus_factor(2) / bus_factor(8) = 200 x frac x 1 / 1.75, whichever is smaller
    net = float(links_csv()["network"]["achievable_fraction"])
    wide = network.group_link("A100 80GB", a800, size=16)
    assert wide.across and wide.bandwidth_gbps == pytest.approx(min(8 * 25.0 * net, 200.0 * frac / 1.75))
    assert network.group_link("A100 80GB", replace(row, intra_link_gbps_one_way=900.0),
                              size=8).nominal_gbps == 300.0


def test_a_gpu_without_a_node_row_keeps_its_own_link():
    """A renamed catalogue GPU has no node row: its default node carries the GPU's own link (an MI300X's
    896 GB/s bidirectional as a mesh, 448 / 7 = 64 a peer; an H100's 450 through a switch), not a placeholder
    that the mesh rule (or a switch row's cap) would read as 1 GB/s."""
    from dataclasses import replace
    mi = replace(L.get_gpu("MI300X"), name="MI300X (renamed)")
    h = replace(L.get_gpu("H100 SXM"), name="H100 SXM (renamed)")
    node = network.get_node(gpu=mi)
    assert node.intra_topology == "mesh" and node.intra_link_gbps_one_way == pytest.approx(64.0)
    assert network.group_link(mi, node, size=8).nominal_gbps == pytest.approx(7 * 64.0)
    assert network.group_link(mi, node, size=2).nominal_gbps == pytest.approx(64.0)
    assert network.group_link(h, network.get_node(gpu=h), size=8).nominal_gbps == 450.0


def test_mi300x_pair_gets_one_link_and_a_node_seven():
    per_peer = float(nodes_csv()["MI300X platform (8-GPU)"]["intra_link_gbps_one_way"])   # 64 GB/s
    frac = float(links_csv()["infinity-fabric"]["achievable_fraction"])
    pair = group_network(Parallel(tp=2), "MI300X")["tp"]
    eight = group_network(Parallel(tp=8), "MI300X")["tp"]
    assert pair.nominal_gbps == per_peer and pair.bandwidth_gbps == pytest.approx(per_peer * frac)
    assert eight.nominal_gbps == 7 * per_peer


def test_latency_steps_by_hand():
    assert network.latency_steps("all-reduce", 8, across=False) == 14                 # ring: 2 (n - 1)
    assert network.latency_steps("reduce-scatter", 8) == 7
    assert network.latency_steps("send/recv", 2) == 1
    # across nodes the tree's 2 log2 n levels win once they are cheaper than the ring
    big = network.latency_steps("all-reduce", 1024)
    assert big == pytest.approx(network.TREE_LEVEL_ALPHAS * 2 * 10) and big < 2 * 1023
    assert network.latency_steps("all-reduce", 2) == 2                                 # the ring is fewer


def test_collective_time_is_latency_plus_bandwidth():
    link = group_network(Parallel(dp=16), "H100 SXM")["dp"]
    alpha = float(links_csv()["network"]["alpha_us"]) * 1e-6
    s = 2**30
    t = network.collective_time_s("all-reduce", s, 16, link)
    assert link.alpha_s == pytest.approx(alpha)
    # 16 GPUs filling two nodes: hierarchical, each node sends its reduced share once, 2 (2 - 1) / 2 S = S
    # through its eight NICs (issue 34; a flat 16-GPU ring would charge 2 x 15 / 16 S)
    assert t == pytest.approx(network.latency_steps("all-reduce", 16) * alpha + s / (link.bandwidth_gbps * 1e9))
    # one GPU per node (tp = 8 fills each node): a flat ring over the 16 nodes' NICs, 2 x 15 / 16 S per GPU
    flat = group_network(Parallel(tp=8, dp=16), "H100 SXM")["dp"]
    assert flat.per_domain == 1 and flat.across
    assert network.collective_time_s("all-reduce", s, 16, flat) == pytest.approx(
        network.latency_steps("all-reduce", 16) * alpha + 2 * 15 / 16 * s / (flat.bandwidth_gbps * 1e9))
    # nccl-tests' bus bandwidth (2 x 15 / 16 S / t) falls at small messages and, at large ones, approaches
    # 1.875 x the link's for the hierarchical group (it exceeds the NICs on two nodes, as the logs do), the
    # link's itself for the flat ring
    bus = network.bus_bandwidth_gbps("all-reduce", [2**10, 2**20, 2**34], 16, link)
    assert bus[0] < bus[1] < bus[2] < 1.875 * link.bandwidth_gbps and bus[2] > 0.99 * 1.875 * link.bandwidth_gbps
    bus = network.bus_bandwidth_gbps("all-reduce", [2**10, 2**20, 2**34], 16, flat)
    assert bus[0] < bus[1] < bus[2] < flat.bandwidth_gbps and bus[2] > 0.99 * flat.bandwidth_gbps


def test_old_overrides_still_work():
    """gpus_per_node and inter_node_gbps (the earlier single-number network) still set the node."""
    node = network.get_node(gpu="H100 SXM", gpus_per_node=4, inter_node_gbps=25)
    assert node.gpus_per_node == 4 and node.scaleup_domain_gpus == 4 and node.nic_gbps_per_gpu == 25
    links = L.comm.group_links(Parallel(tp=8), "H100 SXM", gpus_per_node=4)
    assert links["tp"][0] == "network"


@pytest.mark.parametrize("kw, name", [
    (dict(node="DGX H1000"), "node"), (dict(node=3), "node"), (dict(gpus_per_node=0), "gpus_per_node"),
    (dict(inter_node_gbps=-1), "inter_node_gbps"),
])
def test_bad_input_is_named(kw, name):
    with pytest.raises((ValueError, TypeError), match=name):
        communication("gpt2", Parallel(dp=16), batch=1, seq=128, gpu="H100 SXM", **kw)


def test_uneven_stages_and_zero3_with_pipelines():
    stages = L.parallel.uneven_stages(126, 16, first=7, last=7)
    assert stages[0] == stages[-1] == 7 and sum(stages) == 126 and set(stages[1:-1]) == {8}
    par = Parallel(tp=8, pp=16, dp=8, zero=3, sp=True, virtual_stages=4, stage_layers=stages)
    L.parallel.resolve_parallel(par, "llama-3.1-405b")                          # allowed: FSDP2 under PP
    with pytest.raises(ValueError, match="stage_layers"):
        L.parallel.resolve_parallel(Parallel(pp=2, stage_layers=(40, 41)), "llama-3-70b")
    # ZeRO-3 without resharding under a pipeline: one gather per step, the stage's 16-bit weights whole
    kw = dict(batch=1, seq=4096, gpu="H100 SXM", grad_accum=8)
    keep = Parallel(pp=4, dp=8, zero=3, reshard_after_forward=False)
    free = Parallel(pp=4, dp=8, zero=3)
    names = [c.collective for c in communication("llama-3-8b", keep, **kw).collectives]
    assert not any("backward" in n and "all-gather" in n for n in names)
    m_keep = L.training_memory("llama-3-8b", batch=1, seq=4096, grad_accum=8, parallel=keep)
    m_free = L.training_memory("llama-3-8b", batch=1, seq=4096, grad_accum=8, parallel=free)
    assert m_keep.weights_bytes == pytest.approx(8 * m_free.weights_bytes, rel=0.02)


def test_protocols_price_the_knee_the_log_measured():
    """Issue 22: NCCL runs the cheapest of its protocols per message size. With protocols=True the model charges
    the cheaper of the LL line (the small-message fit: 2.3 us per step, 14.0% of the nominal bandwidth) and the
    Simple line (the large-message fit: 8.0 us per step, 77%). Against the measured A100 NVLink log (8 GPUs, read
    from the file) it is within 10% from 64 KiB to 64 MiB, where the single line is up to 57% short."""
    from llmsizing.alpha_beta import parse_nccl_tests

    log = parse_nccl_tests((DATA / "nccl_tests" / "a100_sxm4_8gpu_nvlink_oci_all_reduce.txt").read_text())
    measured = dict(zip(log["size_bytes"], log["time_us"] * 1e-6))
    link = network.group_link("A100 40GB", network.get_node(gpu="A100 40GB"), size=8)
    assert link.small_bandwidth_gbps == pytest.approx(0.140 * 300) and link.large_alpha_s == pytest.approx(8.0e-6)
    two_mib = 2 * 2**20
    ll = 14 * 2.3e-6 + 1.75 * two_mib / (0.140 * 300e9)               # 119.6 us (measured 112.4)
    simple = 14 * 8.0e-6 + 1.75 * two_mib / (0.77 * 300e9)            # 127.9 us
    assert network.collective_time_s("all-reduce", two_mib, 8, link, protocols=True) == pytest.approx(min(ll, simple))
    assert network.collective_time_s("all-reduce", two_mib, 8, link) < 0.5 * measured[two_mib]   # the old line
    for size in (2**16 * 2**k for k in range(11)):                     # 64 KiB ... 64 MiB
        t = network.collective_time_s("all-reduce", size, 8, link, protocols=True)
        assert t == pytest.approx(measured[size], rel=0.10), size
        assert t >= network.collective_time_s("all-reduce", size, 8, link)
    # a link class with no fitted log keeps the single line; protocols must be a bool
    mi = network.group_link("MI300X", network.get_node(gpu="MI300X"), size=8)
    assert mi.small_bandwidth_gbps is None
    assert network.collective_time_s("all-reduce", two_mib, 8, mi, protocols=True) == \
        network.collective_time_s("all-reduce", two_mib, 8, mi)
    with pytest.raises(TypeError, match="protocols"):
        network.collective_time_s("all-reduce", two_mib, 8, link, protocols="yes")
