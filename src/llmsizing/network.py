"""The network: which link a parallel group rides on, how fast it really goes, and what each collective costs
(chapter 6, "Hardware", and chapter 7; measured in chapter 9).

A hierarchical alpha-beta model (Hockney 1994; Thakur, Rabenseifner and Gropp 2005 for the collectives'
step counts):

* **Nodes** (``data/nodes.csv``, one row per system, each with its source and date): GPUs per node, the
  scale-up domain (the GPUs one NVLink/Infinity Fabric fabric joins: 8 in a DGX, 72 in a GB200 NVL72 rack),
  the intra-node topology (``switch``: NVSwitch gives every GPU its full link whoever it talks to; ``mesh``:
  AMD's MI300X reaches each of its 7 peers over its own 64 GB/s link, so a pair gets one link; ``pcie``),
  whether PCIe GPUs reach each other peer-to-peer (``peer_to_peer``: data-center cards on a bare-metal PCIe
  switch do, consumer cards and many VMs go through host memory, about a third of the share), and the NICs
  (how many per node and their line rate).
* **Node egress is shared.** NCCL spreads a collective over every NIC the group's GPUs own (one ring or tree
  per NIC, each leaving the node once), so a group with ``k`` of its GPUs in one scale-up domain gets ``k``
  NICs' worth of bandwidth per GPU (capped by the collective's phase inside the node, below). Data
  parallelism under ``tp = 8`` has ``k = 1``: one NIC per GPU, 50 GB/s on a DGX H100. An FSDP group that fills
  whole nodes has ``k = 8``: all eight NICs, about 400 GB/s, the 370-470 GB/s "bus bandwidth" nccl-tests
  report across H100 nodes.
* **Achievable bandwidth.** Links are never driven at their nominal rate: ``data/links.csv`` holds, per link
  class, the share of it nccl-tests reach at large messages and the latency per algorithm step (``alpha``),
  fitted from published nccl-tests logs (:mod:`llmsizing.alpha_beta` reads them; so can a reader, on their own
  cluster).
* **Latency.** A ring all-reduce over ``n`` GPUs takes ``2 (n - 1)`` steps, a reduce-scatter or all-gather
  ``n - 1``, each charged the link class's fitted ``alpha``. Across nodes NCCL also has a tree all-reduce with
  ``2 ceil(log2 n)`` levels, which it picks when latency dominates; a tree level costs more than a ring step
  (it crosses a node's chain and the network), :data:`TREE_LEVEL_ALPHAS` ring steps' worth, set so that the
  fitted 16-GPU log's small-message time comes out the same by either count. The model charges the cheaper of
  the two, with the ring's bandwidth term (for large messages both reach about the same bus bandwidth). A
  point-to-point send is one step.

* **Bytes on the wire** (:func:`wire_factor`, issue 34). Inside a scale-up domain, or across nodes with one
  of the group's GPUs per node, a flat ring: ``2 (n - 1) / n x S`` per GPU for an all-reduce. A group with
  ``k > 1`` GPUs per node is hierarchical: NCCL reduces inside the node first and each node sends its share
  once over its NICs, ``2 (m - 1) / m x S`` per node over its ``m`` nodes (``S`` on two nodes, where a flat
  ring of 16 GPUs would send 1.875 ``S``). The network's fraction is fitted with the same count.

So a collective of ``S`` bytes over ``n`` GPUs costs ``steps x alpha + wire_factor x S / (achievable fraction
x bandwidth)``. What it leaves out: NCCL's protocol switches (LL, LL128, Simple) and in-network reduction
(NVLS, SHARP), which make the real curve bumpier and, at the largest messages, up to about 20% faster than the
fitted line; and contention with other jobs. Every call pays its latency (issue 34): a framework's collectives
are as many calls as it issues, one per layer for tensor and context parallelism and for FSDP's per-block
gathers, one per gradient bucket for DDP and the distributed optimizer
(:func:`llmsizing.zero_traffic.dp_schedule`). Over a group of ``n`` GPUs a ring call is ``n - 1`` steps, so an
FSDP group spanning a thousand GPUs pays milliseconds per layer: latency, not bandwidth, then sets its cost.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from pathlib import Path

import numpy as np

from ._compat import keep_hash
from ._validate import check_choice, check_int, check_number
from .catalog import MIN_GPU_SPEED, _unknown, get_gpu
from .collectives import (  # noqa: F401 (the collectives' counts, still exported from here)
    COLLECTIVES, TREE_LEVEL_ALPHAS, Collective, bus_factor, latency_steps, ring_bytes, tree_levels,
    wire_factor)
from .nccl_steps import RING_KINDS, network_fit

DATA_DIR = Path(__file__).resolve().parents[2] / "data"

#: Intra-node topologies a node row may name (see the module docstring).
TOPOLOGIES = ("switch", "mesh", "pcie")

#: Link classes of ``data/links.csv``: the scale-up links and the scale-out ``network``. ``pcie`` is PCIe
#: without peer-to-peer (through host memory), ``pcie-p2p`` with it: a node row's ``peer_to_peer`` says which.
LINK_CLASSES = ("nvlink", "infinity-fabric", "pcie", "pcie-p2p", "network")

@keep_hash
@dataclass(frozen=True)
class Node:
    """One system a GPU sits in (a row of ``data/nodes.csv``). Bandwidths are one way, decimal GB/s; NIC
    line rates in Gb/s as vendors print them. ``intra_link_gbps_one_way`` is per GPU through the switch, or
    per peer for a ``mesh``; it caps the GPU's own link (:func:`group_link`), so a row can seat a cut-down
    part (an A800's 200 GB/s NVLink on an A100's row) without a GPU of its own. ``peer_to_peer``: whether
    the GPUs of a ``pcie`` node write into each other's memory (GPUDirect P2P) or go through the host's
    (consumer cards, many VMs), which sets the PCIe link's achievable share (``data/links.csv``:
    ``pcie-p2p`` or ``pcie``)."""

    name: str
    gpu: str
    gpus_per_node: int
    scaleup_domain_gpus: int
    intra_topology: str
    intra_link_gbps_one_way: float
    nics_per_node: int
    nic_gbits: float
    source: str = ""
    as_of: str = ""
    note: str = ""
    peer_to_peer: bool = False

    def __post_init__(self):
        if not isinstance(self.peer_to_peer, bool):
            raise TypeError(f"peer_to_peer of node {self.name!r} must be True or False, got "
                            f"{type(self.peer_to_peer).__name__} {self.peer_to_peer!r}")
        for f in ("gpus_per_node", "scaleup_domain_gpus", "nics_per_node"):
            object.__setattr__(self, f, check_int(f"{f} of node {self.name!r}", getattr(self, f),
                                                  maximum=65536))
        for f in ("intra_link_gbps_one_way", "nic_gbits"):
            object.__setattr__(self, f, check_number(f"{f} of node {self.name!r}", getattr(self, f),
                                                     minimum=MIN_GPU_SPEED))
        check_choice(f"intra_topology of node {self.name!r}", self.intra_topology, TOPOLOGIES)
        if self.scaleup_domain_gpus % self.gpus_per_node:
            raise ValueError(f"scaleup_domain_gpus of node {self.name!r} ({self.scaleup_domain_gpus}) must "
                             f"be a multiple of gpus_per_node ({self.gpus_per_node})")

    @property
    def egress_gbps(self) -> float:
        """All the node's NICs together, one way, GB/s: ``nics x line rate / 8``."""
        return self.nics_per_node * self.nic_gbits / 8

    @property
    def nic_gbps_per_gpu(self) -> float:
        """The node's egress per GPU, one way, GB/s (50 on a DGX H100: eight 400 Gb/s NICs for eight GPUs)."""
        return self.egress_gbps / self.gpus_per_node


@dataclass(frozen=True)
class LinkClass:
    """A row of ``data/links.csv``: the share of the nominal bandwidth a large collective reaches, and the
    latency per algorithm step, fitted from nccl-tests logs (see each row's source). The share is taken
    against the figure it is applied to: for PCIe the datasheets' one in ``data/gpus.csv`` (GT/s x lanes / 8,
    32 GB/s each way for Gen4 x16, not the 31.5 GB/s the 128b/130b line code leaves), so the two agree
    (chapter 6). A GPU's host link is priced at that line rate instead (:func:`pcie_gbps_one_way`)."""

    name: str
    achievable_fraction: float
    alpha_s: float
    source: str
    as_of: str
    #: The small-message regime's bus bandwidth / the nominal (NCCL's LL protocol), and the large-message
    #: regime's latency per step (its Simple/LL128 protocols): None where no log was fitted (issue 22).
    small_fraction: float | None = None
    large_alpha_s: float | None = None


def _rows(filename: str) -> list[dict[str, str]]:
    with open(DATA_DIR / filename, newline="") as fh:
        return list(csv.DictReader(fh))


def _yes_no(name: str, value: str) -> bool:
    """A ``yes``/``no`` cell of ``data/nodes.csv`` as a bool; anything else is refused, naming the cell."""
    v = (value or "").strip().lower()
    if v not in ("yes", "no"):
        raise ValueError(f"{name} must be 'yes' or 'no', got {value!r}")
    return v == "yes"


@cache
def _nodes() -> dict[str, tuple[Node, bool]]:
    out = {}
    for r in _rows("nodes.csv"):
        node = Node(r["name"], r["gpu"], int(r["gpus_per_node"]), int(r["scaleup_domain_gpus"]),
                    r["intra_topology"], float(r["intra_link_gbps_one_way"]), int(r["nics_per_node"]),
                    float(r["nic_gbits"]), r["source"], r["as_of"], r.get("note", ""),
                    _yes_no(f"peer_to_peer of node {r['name']!r}", r.get("peer_to_peer", "")))
        out[node.name] = (node, r["default_for_gpu"].strip().lower() == "yes")
    return out


@cache
def _links() -> dict[str, LinkClass]:
    out = {}
    for r in _rows("links.csv"):
        name = check_choice("link_class", r["link_class"], LINK_CLASSES)
        small = (r.get("small_fraction") or "").strip()
        large = (r.get("large_alpha_us") or "").strip()
        out[name] = LinkClass(name, check_number("achievable_fraction", float(r["achievable_fraction"]),
                                                 minimum=0.01, maximum=1.0),
                              float(r["alpha_us"]) * 1e-6, r["source"], r["as_of"],
                              check_number("small_fraction", float(small), minimum=1e-4, maximum=1.0) if small
                              else None,
                              check_number("large_alpha_us", float(large)) * 1e-6 if large else None)
    missing = set(LINK_CLASSES) - set(out)
    if missing:
        raise ValueError(f"data/links.csv lacks the link classes {sorted(missing)}")
    return out


@cache
def _default_nodes() -> dict[str, Node]:
    """Each GPU's default node (the first row marked ``default_for_gpu``)."""
    out: dict[str, Node] = {}
    for nd, default in _nodes().values():
        if default:
            out.setdefault(nd.gpu, nd)
    return out


def list_nodes() -> list[str]:
    """The names of the catalogued nodes (``data/nodes.csv``)."""
    return list(_nodes())


def link_class(name: str) -> LinkClass:
    """The achievable fraction and latency of one link class (:data:`LINK_CLASSES`)."""
    return _links()[check_choice("link class", name, LINK_CLASSES)]


def get_node(node=None, gpu=None, *, gpus_per_node: int | None = None,
             inter_node_gbps: float | None = None) -> Node:
    """A :class:`Node`: ``node`` (a name from ``data/nodes.csv`` or a ``Node``), or the default node of
    ``gpu``.

    The default node is the GPU's row (``default_for_gpu``) only while the GPU's link is the one that row was
    written for: the same one-way figure and link class as the catalogue GPU the row names. A GPU whose link
    differs (``comm.gpu_with_link`` keeps the catalogue name) gets the row's size, scale-up domain and NICs
    with its own link (:func:`_own_link_node`), so a faster link is never capped by a row found by the
    GPU's name; a GPU with no row gets an 8-GPU box of its own link with one 400 Gb/s NIC per GPU. Only a
    node the caller names or passes caps a GPU's link with a figure of its own (issue 34).

    Two overrides keep the book's earlier calls working: ``gpus_per_node`` changes the node's size (the
    scale-up domain follows it when it was the node, and the NICs keep their bandwidth per GPU; a ``mesh``
    shares the GPU's peer links among its new peers, :func:`_resized_per_peer`), and ``inter_node_gbps``
    sets the network bandwidth per GPU, one way (one NIC of ``8 x inter_node_gbps`` Gb/s per GPU: the old
    single-number network)."""
    if isinstance(node, Node):
        n = node
    elif node is not None:
        if not isinstance(node, str):
            raise TypeError(f"node must be a node name or a Node, got {type(node).__name__}")
        rows = _nodes()
        if node not in rows:
            raise _unknown("node", node, list(rows))
        n = rows[node][0]
    else:
        g = get_gpu(gpu)
        n = _default_node(g)
    if gpus_per_node is not None:
        per_node = check_int("gpus_per_node", gpus_per_node, maximum=65536)
        domain = (per_node if n.scaleup_domain_gpus == n.gpus_per_node
                  else max(n.scaleup_domain_gpus, per_node))
        if domain % per_node:
            domain = per_node
        n = replace(n, gpus_per_node=per_node, scaleup_domain_gpus=domain,
                    nics_per_node=per_node, nic_gbits=n.nic_gbps_per_gpu * 8,
                    intra_link_gbps_one_way=_resized_per_peer(n, per_node, gpu))
    if inter_node_gbps is not None:
        bw = check_number("inter_node_gbps", inter_node_gbps, minimum=MIN_GPU_SPEED)
        n = replace(n, nics_per_node=n.gpus_per_node, nic_gbits=8 * bw)
    return n


@lru_cache(maxsize=1024)
def _default_node(g) -> Node:
    """:func:`get_node`'s default node of the GPU ``g`` (kept: a function of the GPU's data alone)."""
    own = link_bandwidth_one_way_gbps(g)
    found = _default_nodes().get(g.name)
    if found is not None and _same_link(g, found.gpu, own):
        return found
    if found is not None:               # the catalogue's name, another link (gpu_with_link): the row's box
        return _own_link_node(found, g, own)
    # a GPU with no node row: an 8-GPU box of its own link, one 400 Gb/s NIC per GPU
    topo = _TOPOLOGY_OF_CLASS.get(g.link_class, "pcie")   # (its data, not its name)
    return Node(f"8x {g.name} (no catalogued node)", g.name, 8, 8, topo,
                own / 7 if topo == "mesh" else own, 8, 400.0,      # (a mesh: a link to each of 7 peers)
                "default for a GPU without a node row", "", "")


#: The topology a link class implies for a node built from a GPU's own link (NVLink through a switch,
#: Infinity Fabric as a full mesh, anything else over PCIe): the GPU's data, never its name.
_TOPOLOGY_OF_CLASS = {"nvlink": "switch", "infinity-fabric": "mesh"}


def _same_link(g, row_gpu: str, own: float) -> bool:
    """Whether GPU ``g`` (its one-way link ``own``) has the link of the catalogue GPU ``row_gpu`` (one-way
    figure and class; a hand-made GPU without a class takes its node's, :func:`_class_of`): the link a node
    row of that GPU was written for."""
    cls, one_way = _catalogue_link(row_gpu)
    return g.link_class in (None, cls) and own == one_way


@cache
def _catalogue_link(name: str) -> tuple[str | None, float]:
    """The link class and one-way link (GB/s) of the catalogue GPU ``name``, kept (catalogue data)."""
    c = get_gpu(name)
    return c.link_class, link_bandwidth_one_way_gbps(c)


def _own_link_node(row: Node, g, own: float) -> Node:
    """``row`` (the default node of the catalogue GPU named like ``g``) carrying ``g``'s own link instead of
    the row's: the same GPUs a node, scale-up domain and NICs, so that a comparison changes only the link
    (chapter 7). Its figure is the GPU's one-way link, through a switch or PCIe, or that link shared by the
    ``gpus_per_node - 1`` peers of a mesh. The row's topology stays when the link class is the catalogue
    GPU's; another class brings its own (:data:`_TOPOLOGY_OF_CLASS`) and the host path between PCIe GPUs
    (no GPUDirect P2P), as a PCIe link on an NVLink board has."""
    same_class = g.link_class in (None, _catalogue_link(row.gpu)[0])
    topo = row.intra_topology if same_class else _TOPOLOGY_OF_CLASS.get(g.link_class, "pcie")
    per = own / (row.gpus_per_node - 1) if topo == "mesh" and row.gpus_per_node > 1 else own
    return replace(row, name=f"{row.name} with {g.name}'s own link ({g.link})", intra_topology=topo,
                   intra_link_gbps_one_way=per, peer_to_peer=row.peer_to_peer and same_class,
                   note=f"{row.note} [the GPU's own link, {own:g} GB/s one way, replaces the row's "
                        f"{row.intra_link_gbps_one_way:g}]".lstrip())


def _resized_per_peer(n: Node, per_node: int, gpu=None) -> float:
    """A node's ``intra_link_gbps_one_way`` at ``per_node`` GPUs a node. Through a switch or PCIe it is per
    GPU and does not change. In a ``mesh`` it is per peer: the row's links per GPU, ``per peer x (n - 1)``
    (capped by the GPU's own link when the GPU is known), are shared by the ``per_node - 1`` peers, as a
    4-GPU board wires the same links to 3 peers (an MI300X's 448 GB/s one way: 64 a peer among 7, 149 among
    3). A node of one GPU keeps the row's figure (it has no peers to share with)."""
    if n.intra_topology != "mesh" or per_node == n.gpus_per_node or per_node < 2 or n.gpus_per_node < 2:
        return n.intra_link_gbps_one_way
    total = n.intra_link_gbps_one_way * (n.gpus_per_node - 1)
    if gpu is not None:
        total = min(total, link_bandwidth_one_way_gbps(gpu))
    return total / (per_node - 1)


def _class_of(gpu, node: Node) -> str:
    """The link class of the GPU's scale-up link: its ``link_class`` (a column of ``data/gpus.csv``), else,
    for a hand-made GPU without one, the class its node's topology implies; PCIe becomes ``pcie-p2p`` on a
    PCIe node whose row says ``peer_to_peer`` (issue 34). Never its name (issue 33)."""
    cls = gpu.link_class
    if cls is None:
        cls = {"switch": "nvlink", "mesh": "infinity-fabric", "pcie": "pcie"}[node.intra_topology]
    # (a PCIe node's fact: a GPU given a PCIe link on an NVLink node, gpu_with_link, keeps the host path)
    return "pcie-p2p" if cls == "pcie" and node.intra_topology == "pcie" and node.peer_to_peer else cls


@keep_hash
@dataclass(frozen=True)
class GroupLink:
    """The link one parallel group's collectives ride on (:func:`group_link`): ``bandwidth_gbps`` is what a
    ring reaches per GPU, one way (nominal x achievable fraction), ``alpha_s`` the latency per step,
    ``per_domain`` how many of the group's GPUs share one scale-up domain, ``across`` whether it leaves it."""

    link: str
    bandwidth_gbps: float
    nominal_gbps: float
    alpha_s: float
    per_domain: int
    across: bool
    #: The small-message (LL protocol) bandwidth per GPU and the large-message latency per step, for
    #: ``collective_time_s(..., protocols=True)``; None when the link class has no fitted log (issue 22).
    small_bandwidth_gbps: float | None = None
    large_alpha_s: float | None = None
    #: What sets ``bandwidth_gbps``, in words (chapter 6's bus-bandwidth summary): the scale-up link inside a
    #: domain; across domains the NICs, or, for a hierarchical collective, its phase inside the node when that
    #: is the slower (issue 38: a ceiling NVLink set was labelled "network"). Empty when not given.
    bound_by: str = field(default="", compare=False)
    #: Across domains, the scale-up link class's two latencies per step (LL, LL128/Simple), for
    #: ``collective_time_s(..., latency="nccl")``'s intra-node steps (issue 34, net47); None inside a domain.
    intra_alpha_s: float | None = field(default=None, compare=False)
    intra_large_alpha_s: float | None = field(default=None, compare=False)


def group_link(gpu, node: Node, *, size: int, stride: int = 1) -> GroupLink:
    """How fast a group of ``size`` GPUs whose ranks are ``stride`` apart talks (Megatron-LM's rank order puts
    tensor-parallel ranks next to each other, data-parallel ones ``tp`` apart, pipeline stages ``tp x dp``
    apart).

    Inside one scale-up domain (``size x stride <= domain``): the smaller of the GPU's own link and the node
    row's ``intra_link_gbps_one_way`` (per GPU through a switch or PCIe; for a ``mesh``, ``k - 1`` peer links
    for ``k`` GPUs, capped by the GPU's total): the node's figure counts for every topology (issue 34).
    Across domains: ``k`` = the group's GPUs per domain (``domain // stride``, at least 1), and each GPU gets
    ``k`` NICs' worth of the node's egress per GPU; the latency is the network's. Both at the link class's
    achievable fraction. With ``k > 1`` the collective is hierarchical (:func:`wire_factor`): its phase inside
    the node moves :func:`bus_factor` over the ``k`` GPUs on the scale-up link while the network moves it over
    the ``m`` nodes, pipelined, so the bandwidth is capped at the scale-up link's x ``bus_factor(m) /
    bus_factor(k)`` (over two DGX H100s, 346.5 x 1 / 1.75 = 198 GB/s: NVLink, not the NICs, bounds the
    all-reduce; over 16 of them the NICs' 364 GB/s do)."""
    g = get_gpu(gpu)
    size, stride = check_int("size", size), check_int("stride", stride)
    if not isinstance(node, Node):
        raise TypeError(f"node must be a Node, got {type(node).__name__}")
    return _group_link(g, node, size, stride)


@lru_cache(maxsize=4096)
def _group_link(g, node: Node, size: int, stride: int) -> GroupLink:
    """:func:`group_link` for checked arguments, kept (the planner asks for the same few links thousands of
    times in one search)."""
    cls = _class_of(g, node)
    own = link_bandwidth_one_way_gbps(g)
    domain = node.scaleup_domain_gpus
    across = size * stride > domain
    k = min(size, max(1, domain // stride)) if across else size

    def intra(k: int) -> float:
        if node.intra_topology == "mesh":        # (a node row's fact: the MI300X's and the V100's alike)
            return min(own, max(k - 1, 1) * node.intra_link_gbps_one_way)
        return min(own, node.intra_link_gbps_one_way)     # the row's link per GPU caps the GPU's (issue 34)

    scale_up = _links()[cls]
    if not across:
        nominal = intra(k)
        small = None if scale_up.small_fraction is None else nominal * scale_up.small_fraction
        return GroupLink(g.link, nominal * scale_up.achievable_fraction, nominal, scale_up.alpha_s, k, False,
                         small, scale_up.large_alpha_s,
                         f"{g.link}: {nominal:g} GB/s at {scale_up.achievable_fraction:.0%}")
    net = _links()["network"]
    out_bw = k * node.nic_gbps_per_gpu
    bw = out_bw * net.achievable_fraction
    small = None if net.small_fraction is None else out_bw * net.small_fraction
    bound = f"network: {k} x {node.nic_gbps_per_gpu:g} GB/s of NIC a GPU at {net.achievable_fraction:.0%}"
    if k > 1:
        # the hierarchical collective's phase inside the node (bus_factor over the k GPUs on the scale-up
        # link) runs pipelined with the network's (bus_factor over the m nodes: wire_factor): charged at the
        # network's count, it caps the bandwidth at the scale-up link's x m-node / k-GPU bytes
        m = -(-size // k)
        phase = bus_factor("all-reduce", m) / bus_factor("all-reduce", k)
        cap = intra(k) * scale_up.achievable_fraction * phase
        if cap < bw:
            bus_m, bus_k = bus_factor("all-reduce", m), bus_factor("all-reduce", k)
            bound = (f"{g.link} inside the node, the hierarchical all-reduce's in-node phase: "
                     f"{intra(k) * scale_up.achievable_fraction:.1f} GB/s x {bus_m:g} / {bus_k:g} "
                     f"(bus factors of {m} nodes, {k} GPUs); the NICs allow {bw:.1f}")
        bw = min(bw, cap)
        if small is not None and scale_up.small_fraction is not None:
            small = min(small, intra(k) * scale_up.small_fraction * phase)
    return GroupLink("network", bw, out_bw, net.alpha_s, k, True, small, net.large_alpha_s, bound,
                     scale_up.alpha_s, scale_up.large_alpha_s)


def nic_bound_nodes(gpu, node=None, *, max_nodes: int = 4096) -> int | None:
    """The fewest nodes from which a group that fills them (every GPU of each scale-up domain, ranks next to
    each other, as data parallelism over whole nodes is) is bound by the NICs rather than by its phase inside
    the node: the hierarchical all-reduce's in-node phase carries ``bus_factor(m) / bus_factor(k)`` of the
    network's count on the scale-up link (:func:`group_link`), which grows with the node count ``m`` towards
    ``2 / bus_factor(k)``, so past some ``m`` the NICs are the slower. ``None`` if that does not happen
    within ``max_nodes`` (a scale-up link too slow for the NICs); 2 when a domain holds one GPU (no phase
    inside it). Over DGX H100s: 13 (chapter 7)."""
    g = get_gpu(gpu)
    nd = get_node(node, g)
    domain = nd.scaleup_domain_gpus
    net = _links()["network"].achievable_fraction
    for m in range(2, check_int("max_nodes", max_nodes, minimum=2) + 1):
        gl = group_link(g, nd, size=m * domain)
        if gl.bandwidth_gbps >= gl.nominal_gbps * net * (1 - 1e-12):
            return m
    return None


def link_wire_factor(kind: str, n: int, link: GroupLink) -> float:
    """:func:`wire_factor` of a collective over ``n`` GPUs on the ``link`` of :func:`group_link`: its GPUs per
    domain when it leaves the domain, else a flat ring over the scale-up link."""
    return wire_factor(kind, n, link.per_domain if link.across else 1)


def collective_time_s(kind: str, message_bytes: float, n: int, link: GroupLink, *,
                      protocols: bool = False, latency: str = "flat") -> float:
    """One collective's seconds: ``steps x alpha + wire_factor x S / bandwidth`` (:func:`latency_steps`,
    :func:`wire_factor`, the ``link`` of :func:`group_link`: a flat ring inside a domain or with one GPU per
    node, hierarchical for a group with several GPUs in each node, issue 34).

    ``protocols=True`` (issue 22; serving uses it) prices the mid-size messages the single line gets wrong: it
    charges the cheaper of two lines, ``steps x alpha + f S / small bandwidth`` (NCCL's LL protocol: little
    latency, a fraction of the bandwidth) and ``steps x large alpha + f S / bandwidth`` (its LL128/Simple
    protocols: the full bandwidth, more latency per step), as NCCL's tuner prices each protocol and runs the
    cheapest (NVIDIA/nccl ``src/graph/tuning.cc``; Hu et al. 2025, "Demystifying NCCL", arXiv 2507.04786). The
    two lines are the small- and large-message fits of the link class's nccl-tests log (``data/links.csv``:
    ``small_fraction``, ``large_alpha_us``): on the A100 NVLink log the default line is up to 57% short
    between 256 KiB and 8 MiB (a 2 MiB all-reduce over 8 GPUs: 48 us against 112 us measured), the cheaper of
    the two within 8% at every size. It is never less than the default. A link class with no fitted log
    (infinity-fabric) keeps the single line. The default stays ``False`` for training's collectives, whose
    ranges (chapter 10) were measured with the single line; it is short of the same A100 log x1.54 and x1.39
    at 16 and 32 MiB (around PyTorch DDP's 25 MiB buckets) and within 14% from 64 MiB up (chapter 15 says so);
    the same line fitted on the two-node H100 log (:func:`~llmsizing.alpha_beta.from_nccl_tests`'s
    ``regimes.combined``) is x4.3, x3.4 and x2.5 short at 16, 32 and 64 MiB, its two protocols within 1%.

    ``latency``: ``"flat"`` (default) or ``"nccl"`` (:data:`LATENCY_MODELS`, :func:`_call_latency_s`)."""
    s = check_number("message_bytes", message_bytes)
    if not isinstance(link, GroupLink):
        raise TypeError(f"link must be a GroupLink from group_link(...), got {type(link).__name__}")
    if not isinstance(protocols, bool):
        raise TypeError(f"protocols must be True or False, got {type(protocols).__name__} {protocols!r}")
    return _collective_time_s(kind, s, n, link, protocols, check_choice("latency", latency, LATENCY_MODELS))


#: ``"flat"``: every ring step at the link's latency (:func:`latency_steps`); ``"nccl"``: NCCL's tuner's split
#: of a ring leaving the domain (:mod:`llmsizing.nccl_steps`; issue 34, net47: measured, not adopted).
LATENCY_MODELS = ("flat", "nccl")


def _call_latency_s(kind: str, n: int, link: GroupLink, large: bool, latency: str) -> float:
    """One call's latency on the LL line (``alpha_s``) or, ``large``, the LL128/Simple one. ``"nccl"``: the
    intra-node steps at the scale-up class's latency, the inter-node ones and a base as fitted on
    data/nccl_node_counts.csv (:func:`~llmsizing.nccl_steps.fit_inter_node`, Polaris's NVLink steps at the
    nvlink class's); an all-reduce keeps the tree when cheaper (:func:`latency_steps`)."""
    alpha = link.large_alpha_s if large else link.alpha_s
    intra = link.intra_large_alpha_s if large else link.intra_alpha_s
    steps = latency_steps(kind, n, link.across)
    if latency == "flat" or kind not in RING_KINDS or not link.across or intra is None:
        return steps * alpha
    nv = _links()["nvlink"]
    fit = network_fit("Simple" if large else "LL", nv.large_alpha_s if large else nv.alpha_s)
    ring = fit.latency_s(kind, n, -(-n // link.per_domain), intra_alpha_s=intra)
    return min(ring, TREE_LEVEL_ALPHAS * tree_levels(n) * alpha) if kind == "all-reduce" else ring


def _collective_time_s(kind: str, s, n: int, link: GroupLink, protocols: bool, latency: str = "flat"):
    """:func:`collective_time_s` of checked arguments, ``s`` a number or a NumPy array of message bytes (the
    same arithmetic element by element: issue 35, a planner's search prices its all-to-alls of every token
    count at once, :func:`llmsizing.moe.ep_all_to_all`)."""
    steps, f = latency_steps(kind, n, link.across), link_wire_factor(kind, n, link)
    lat = steps * link.alpha_s if latency == "flat" else _call_latency_s(kind, n, link, False, latency)
    t = lat + f * s / (link.bandwidth_gbps * 1e9)
    if not protocols or link.small_bandwidth_gbps is None or link.large_alpha_s is None:
        return t
    ll = lat + f * s / (link.small_bandwidth_gbps * 1e9)
    big = steps * link.large_alpha_s if latency == "flat" else _call_latency_s(kind, n, link, True, latency)
    simple = big + f * s / (link.bandwidth_gbps * 1e9)
    return np.minimum(ll, simple) if isinstance(ll, np.ndarray) else min(ll, simple)


def bus_bandwidth_gbps(kind: str, message_bytes, n: int, link: GroupLink, *, wire: bool = False):
    """The bus bandwidth nccl-tests would print for ``message_bytes`` (a number or a NumPy array) under the
    model: ``bus_factor x S / t``, ``t`` from :func:`wire_factor`. It rises with the message size towards
    ``link.bandwidth_gbps x bus_factor / wire_factor`` (the bandwidth itself for a flat ring; more for a group
    with several GPUs per node, as nccl-tests report across two nodes). ``wire=True``: the bytes on the wire
    instead, ``wire_factor x S / t``, which tends to ``link.bandwidth_gbps`` for every group (the node-level
    bus bandwidth ``data/links.csv``'s network fraction is fitted on). Drawn in chapter 6."""
    import numpy as np

    s = np.asarray(message_bytes, dtype=float)
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError("message_bytes must be positive finite numbers of bytes")
    if not isinstance(wire, bool):
        raise TypeError(f"wire must be True or False, got {type(wire).__name__} {wire!r}")
    w = link_wire_factor(kind, n, link)
    t = latency_steps(kind, n, link.across) * link.alpha_s + w * s / (link.bandwidth_gbps * 1e9)
    return (w if wire else bus_factor(kind, n)) * s / t / 1e9


#: The network bandwidth per GPU between nodes, one way, in decimal GB/s: one 400 Gb/s InfiniBand NDR (or
#: 400 GbE) adapter per GPU, as in NVIDIA's DGX H100 (eight ConnectX-7 ports for eight GPUs): 400 / 8 =
#: 50 GB/s each way. A parameter of :func:`~llmsizing.comm.communication` (``inter_node_gbps``).
INTER_NODE_GBPS_PER_GPU = 50.0


def link_bandwidth_one_way_gbps(gpu) -> float:
    """The GPU's link to its node-mates (NVLink, Infinity Fabric or PCIe) in one direction, decimal GB/s.

    Datasheets quote NVLink and PCIe bidirectionally (an H100 SXM's "900 GB/s" NVLink is 450 GB/s each way);
    a ring collective sends and receives at the same time, so its time uses the one-way figure."""
    g = get_gpu(gpu)
    bw = check_number("link_bandwidth_gbps", g.link_bandwidth_gbps, allow_equal=False)
    return bw / 2 if g.link_direction == "bidirectional" else bw


# ------------------------------------------------------------------- the host link (GPU <-> its CPU's memory)
#: PCIe transfer rate per lane, GT/s, by generation (PCI-SIG, PCI Express Base Specifications 1.0 to 5.0):
#: each generation doubles the last but Gen3, which moved from the 8b/10b line code to 128b/130b instead.
PCIE_GT_PER_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0}


def pcie_gbps_one_way(generation: int, lanes: int = 16) -> float:
    """One direction of a PCIe link, decimal GB/s: ``GT/s per lane x lanes x line code / 8`` (PCI-SIG base
    specifications; :data:`PCIE_GT_PER_S`), the line code 8/10 up to Gen2 and 128/130 from Gen3. Gen5 x16:
    32 x 16 x 128/130 / 8 = 63.0; Gen4 x16 31.5; Gen3 x16 15.75. The line rate: packet headers and flow
    control take part of it, and a host copy reaches less (no measured copy in data/ to fit the share on; not
    priced). Deliberately the line rate, not the catalogue's datasheet figure for a PCIe GPU-to-GPU link
    (``data/gpus.csv`` ``link_bandwidth_gbps``, 32 GB/s for Gen4 x16, times a measured fraction,
    :class:`LinkClass`): no measured share of a host copy exists to apply. Chapter 7."""
    gen = check_int("generation", generation, minimum=min(PCIE_GT_PER_S), maximum=max(PCIE_GT_PER_S))
    n = check_int("lanes", lanes, maximum=32)
    if n & (n - 1):
        raise ValueError(f"lanes must be 1, 2, 4, 8, 16 or 32 (a PCIe link's width), got {n}")
    code = 8 / 10 if gen <= 2 else 128 / 130
    return PCIE_GT_PER_S[gen] * n * code / 8


#: The host link of a GPU whose host interface is not known (a hand-made GPU without ``host_pcie_gen``): PCIe
#: Gen4 x16, 31.5 GB/s one way, the slower of the two links of today's training GPUs (the cautious figure,
#: :data:`llmsizing.zero_traffic.HOST_LINK_GBPS`).
UNKNOWN_HOST_LINK_GBPS = pcie_gbps_one_way(4, 16)


def host_link_gbps(gpu) -> float:
    """The GPU's link to its host's memory, one way, decimal GB/s: what ZeRO-Offload's copies, a CPU
    optimizer's, an RL engine's sleep and wake and a KV cache's reload from host memory ride on (chapter 7).

    From the GPU's data (``data/gpus.csv``, each row with ``host_link_source`` and ``host_link_as_of``):
    :func:`pcie_gbps_one_way` of its ``host_pcie_gen`` and ``host_pcie_lanes`` (an H100 SXM, H200, B200 or
    MI300X host: Gen5 x16, 63.0; an A100, L40S, L4 or RTX 4090: Gen4 x16, 31.5; a V100: Gen3 x16, 15.75), or
    its ``host_link_gbps_one_way`` for a link that is not PCIe (a GB200's NVLink-C2C to its Grace; Frontier's
    Infinity Fabric, 36 GB/s a GCD). ``gpu``: a catalogue name, a :class:`~llmsizing.catalog.GPU`, or a
    :class:`Node` (its GPU's link: no node row names a host link of its own). A GPU without host data
    (hand-made) gets :data:`UNKNOWN_HOST_LINK_GBPS`. The line rate: a host copy reaches only part of it, and
    GPUs that share a PCIe switch with a NIC share its uplink (neither is priced)."""
    g = get_gpu(gpu.gpu if isinstance(gpu, Node) else gpu)
    if g.host_link_gbps_one_way is not None:
        return g.host_link_gbps_one_way
    if g.host_pcie_gen is not None:
        return pcie_gbps_one_way(g.host_pcie_gen, g.host_pcie_lanes)
    return UNKNOWN_HOST_LINK_GBPS
