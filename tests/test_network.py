"""The network model of issue 21 (llmsizing.network, comm.group_network): node egress shared by a group's GPUs in
a node, achievable bandwidth and latency from data/links.csv, the MI300X mesh, and the done-when check that an
FSDP step across whole H100 nodes spends at most a third of the one-NIC-per-GPU time communicating."""

import csv
from pathlib import Path

import pytest

import llmsizing as L
from llmsizing import network
from llmsizing.catalog import get_gpu, list_gpu_variants, list_gpus
from llmsizing.network import get_node
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


#: What a node row's note must carry to disagree with its GPU's catalogue link: the lower figure (one way or
#: bidirectional, as its source prints it) and a word that names where it comes from.
SOURCE_WORDS = ("datasheet", "sec.", "table", "paper", "report", "guide", "page", "http", ".md", "whitepaper")


def unsourced_disagreements(rows, links):
    """The switch and PCIe rows whose ``intra_link_gbps_one_way`` differs from their GPU's catalogue link and
    whose note does not name the lower figure's source: ``(name, row figure, GPU's figure)``."""
    out = []
    for r in rows:
        if r["intra_topology"] not in ("switch", "pcie"):
            continue
        row, gpu = float(r["intra_link_gbps_one_way"]), links[r["gpu"]]
        if row == gpu:
            continue
        low, note = min(row, gpu), r.get("note", "").lower()
        figure = any(f"{x:g}" in note.replace(",", "") for x in (low, 2 * low))
        if not (figure and any(w in note for w in SOURCE_WORDS)):
            out.append((r["name"], row, gpu))
    return out


def test_every_switch_and_pcie_row_agrees_with_its_gpus_link():
    """Issue 34: a switch or PCIe node row's ``intra_link_gbps_one_way`` caps its GPU's link. Listed before
    that rule was made (session 24): no switch or PCIe row disagrees with its GPU's catalogue link, so the
    rule moved no catalogued price. Each row's figure is its own source's (DGX H100 900 GB/s per GPU
    bidirectional, DGX A100 600, HGX H800 400, DGX B200 1.8 TB/s, ...); the rows that assume an NVSwitch
    baseboard say so. A row may disagree only as a sourced exception: its note names the lower figure and
    where it comes from (an A800 reading of an A100 row: "A800 datasheet: 400 GB/s bidirectional")."""
    assert unsourced_disagreements(nodes_csv().values(), gpu_links_csv()) == []


def test_a_disagreeing_row_needs_the_lower_figures_source_in_its_note():
    """The rule above, on made-up rows of the A100 (300 GB/s one way): a row at 200 with no note fails; with
    the A800 datasheet's figure in its note (400 bidirectional, or 200 one way) it is a sourced exception; a
    note that names the figure but no source, or a source but another figure, does not do."""
    links = {"A100 80GB": 300.0}
    row = {"name": "A800 box", "gpu": "A100 80GB", "intra_topology": "switch",
           "intra_link_gbps_one_way": "200"}
    assert unsourced_disagreements([row], links) == [("A800 box", 200.0, 300.0)]
    for note in ("A800 SXM4 datasheet: NVLink 400 GB/s bidirectional", "200 GB/s one way (A800 datasheet)"):
        assert unsourced_disagreements([{**row, "note": note}], links) == []
    for note in ("the A800's 400 GB/s", "A800 datasheet: NVLink 600 GB/s"):
        assert unsourced_disagreements([{**row, "note": note}], links) == [("A800 box", 200.0, 300.0)]
    assert unsourced_disagreements([{**row, "intra_topology": "mesh"}], links) == []   # per peer: not here


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


def test_a_gpu_given_another_link_is_not_capped_by_its_names_row():
    """review24a H2: ``gpu_with_link`` keeps the catalogue name, so the default row found by that name (the
    DGX A100's 300 GB/s one way) must not cap the link the GPU now has. An A100 given a 450 GB/s NVLink: a
    TP8 group gets 450 nominal and 450 x the NVLink class's achievable fraction; an H100 given 900 gets 900
    (the DGX H100 row says 450). The row's NICs stay (the DGX A100's eight 200 Gb/s HDR ports: 25 GB/s a
    GPU), so only the link changes. An H100 given PCIe Gen4's 32 GB/s keeps the host path (no P2P)."""
    from llmsizing.comm import gpu_with_link
    frac = float(links_csv()["nvlink"]["achievable_fraction"])
    a = gpu_with_link("A100 80GB", "x", 450, "nvlink")
    node = network.get_node(gpu=a)
    tp8 = network.group_link(a, node, size=8)
    assert tp8.nominal_gbps == 450.0 and tp8.bandwidth_gbps == pytest.approx(450.0 * frac)
    assert node.nic_gbps_per_gpu == 25.0 and node.gpus_per_node == 8
    h = gpu_with_link("H100 SXM", "x", 900, "nvlink")
    tp8 = network.group_link(h, network.get_node(gpu=h), size=8)
    assert tp8.nominal_gbps == 900.0 and tp8.bandwidth_gbps == pytest.approx(900.0 * frac)
    # the catalogue's own link keeps the row itself; a row the caller names still caps (issue 34)
    same = gpu_with_link("A100 80GB", "NVLink 3", 300, "nvlink")
    row = network.get_node("DGX A100 (80GB)")
    assert network.get_node(gpu=same) == network.get_node(gpu="A100 80GB") == row
    assert network.group_link(a, network.get_node("DGX A100 (80GB)"), size=8).nominal_gbps == 300.0
    pcie = gpu_with_link("H100 SXM", "PCIe Gen4 x16", 32.0, "pcie")
    link = network.group_link(pcie, network.get_node(gpu=pcie), size=8)
    assert link.nominal_gbps == 32.0
    assert link.bandwidth_gbps == pytest.approx(32.0 * float(links_csv()["pcie"]["achievable_fraction"]))


def test_a_smaller_mesh_shares_the_gpus_links_among_fewer_peers():
    """review24a L9: an MI300X mesh resized to 4 GPUs a node wires the GPU's seven 64 GB/s links (448 one
    way) to 3 peers, 448 / 3 a peer: a pair gets 149.3 GB/s, the 4-GPU group all 448 (the 8-GPU row's 3 of 7
    links would leave it 192). The V100's hybrid cube-mesh row (25 a peer over 7, 175 > its own 150) shares
    the GPU's own 150 among 3: 50 a pair. A switch node's figure is per GPU and does not change."""
    mi = network.get_node(gpu="MI300X", gpus_per_node=4)
    assert mi.intra_link_gbps_one_way == pytest.approx(448 / 3)
    assert network.group_link("MI300X", mi, size=2).nominal_gbps == pytest.approx(448 / 3)
    assert network.group_link("MI300X", mi, size=4).nominal_gbps == pytest.approx(448.0)
    assert network.get_node(gpu="V100", gpus_per_node=4).intra_link_gbps_one_way == pytest.approx(50.0)
    assert network.get_node(gpu="MI300X", gpus_per_node=8) == network.get_node(gpu="MI300X")
    assert network.get_node(gpu="H100 SXM", gpus_per_node=4).intra_link_gbps_one_way == 450.0


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


def test_tree_levels_by_hand():
    """review25c L4: NCCL's double binary tree goes up and back down, 2 ceil(log2 n) levels (Thakur,
    Rabenseifner and Gropp 2005): 2 GPUs 2, 3 GPUs 4, 8 GPUs 6, 128 GPUs 14, 16,384 GPUs 28; the all-reduce's
    latency charges the cheaper of the ring's 2 (n - 1) steps and those levels at TREE_LEVEL_ALPHAS each."""
    import pytest

    from llmsizing.collectives import TREE_LEVEL_ALPHAS, latency_steps, tree_levels

    assert [tree_levels(n) for n in (2, 3, 8, 128, 16384)] == [2, 4, 6, 14, 28]
    assert latency_steps("all-reduce", 16384) == min(2 * 16383, TREE_LEVEL_ALPHAS * 28)
    assert latency_steps("all-reduce", 16384, across=False) == 2 * 16383
    with pytest.raises(ValueError, match="n"):
        tree_levels(0)


# ------------------------------------------------------------------- the host link (session 28, hostlink28)
def test_pcie_rates_by_hand():
    """PCI-SIG base specifications: Gen3/4/5 run 8/16/32 GT/s a lane with the 128b/130b line code, Gen1/2
    2.5/5 GT/s with 8b/10b. One way, x16: Gen5 32 x 16 x 128/130 / 8 = 63.015 GB/s, Gen4 31.508, Gen3
    15.754; Gen2 5 x 16 x 8/10 / 8 = 8.0; Gen4 x8 15.754."""
    from llmsizing.network import pcie_gbps_one_way

    assert pcie_gbps_one_way(5, 16) == pytest.approx(63.015, abs=5e-4)
    assert pcie_gbps_one_way(4, 16) == pytest.approx(31.508, abs=5e-4)
    assert pcie_gbps_one_way(3, 16) == pytest.approx(15.754, abs=5e-4)
    assert pcie_gbps_one_way(2, 16) == pytest.approx(8.0)
    assert pcie_gbps_one_way(4, 8) == pytest.approx(15.754, abs=5e-4)
    for bad, match in ((dict(generation=6), "generation"), (dict(generation=0), "generation"),
                       (dict(generation=4, lanes=12), "lanes"), (dict(generation=4, lanes=0), "lanes")):
        with pytest.raises(ValueError, match=match):
            pcie_gbps_one_way(**bad)
    with pytest.raises(TypeError, match="generation"):
        pcie_gbps_one_way(4.0)


def test_host_link_from_each_gpus_data():
    """Each GPU's host link, from its datasheet (data/gpus.csv host_link_source): H100 SXM, H200, B200 and
    MI300X hosts are PCIe Gen5 x16 (63.0 GB/s one way); A100, L40S, L4 and RTX 4090 Gen4 x16 (31.5); the
    V100 Gen3 x16 (15.75); Frontier's MI250X GCD 36 GB/s of Infinity Fabric CPU-GPU (OLCF user guide)."""
    from llmsizing.network import host_link_gbps

    gen5, gen4, gen3 = 32 * 16 * 128 / 130 / 8, 16 * 16 * 128 / 130 / 8, 8 * 16 * 128 / 130 / 8
    for name in ("H100 SXM", "H200", "B200", "MI300X"):
        assert host_link_gbps(name) == pytest.approx(gen5)
    for name in ("A100 80GB", "A100 40GB", "L40S", "L4", "RTX 4090"):
        assert host_link_gbps(name) == pytest.approx(gen4)
    assert host_link_gbps("V100") == pytest.approx(gen3)
    assert host_link_gbps("MI250X GCD") == 36.0
    assert host_link_gbps(get_node(None, "H100 SXM")) == pytest.approx(gen5)      # a node: its GPU's
    for name in list_gpus():                                                     # every row cites its source
        g = get_gpu(name)
        assert g.host_link_source and g.host_link_as_of, name
        assert (g.host_pcie_gen is None) != (g.host_link_gbps_one_way is None), name


def test_host_link_of_a_hand_made_gpu_and_bad_host_fields():
    from dataclasses import replace

    from llmsizing.network import UNKNOWN_HOST_LINK_GBPS, host_link_gbps

    h100 = get_gpu("H100 SXM")
    bare = replace(h100, name="bare", host_pcie_gen=None, host_pcie_lanes=None)
    assert host_link_gbps(bare) == UNKNOWN_HOST_LINK_GBPS == pytest.approx(16 * 16 * 128 / 130 / 8)
    assert host_link_gbps(replace(h100, host_pcie_lanes=8)) == pytest.approx(32 * 8 * 128 / 130 / 8)
    for bad, match in ((dict(host_pcie_gen=6), "host_pcie_gen"), (dict(host_pcie_lanes=None), "go together"),
                       (dict(host_pcie_lanes=12), "host_pcie_lanes"),
                       (dict(host_link_gbps_one_way=100.0), "not both"),
                       (dict(host_pcie_gen=None, host_pcie_lanes=None, host_link_gbps_one_way=0.0),
                        "host_link_gbps_one_way")):
        with pytest.raises(ValueError, match=match):
            replace(h100, **bad)
    with pytest.raises(TypeError, match="host_pcie_gen"):
        replace(h100, host_pcie_gen="5")
