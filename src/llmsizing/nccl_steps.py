"""NCCL's ring latency by step kind, intra- or inter-node (issue 34): the tuner's formulas, and the latency of
an inter-node step fitted on published nccl-tests logs of one cluster at several node counts. Chapter 6.

NCCL's tuner (NVIDIA/nccl ``src/graph/tuning.cc`` at commit 5067397c, 2026-06-11, ``ncclTopoTuneModel``)
prices a ring collective's latency, for each protocol ``p``, as (lines 384-412)::

    base[Ring][p] + (nsteps - nInterSteps) x intraLat[p] + nInterSteps x interLat[p]

* ``nsteps`` (lines 289-291): ``2 (nRanks - 1)`` for an all-reduce, ``nRanks - 1`` for an all-gather or a
  reduce-scatter; ``nInterSteps`` (line 411): 0 on one node, ``2 (nNodes - 1)`` for an all-reduce,
  ``nNodes - 1`` otherwise: only the hops from one node to the next are charged the network's latency.
* The constants (lines 149-177), us, LL / LL128 / Simple: ``base[Ring]`` 6.6 / 14.0 / 8.4;
  ``intraLat = hwLat[NVLINK][Ring]`` 0.6 / 1.9 / 3.4 (PCI: 1.0 / 2.5 / 5.7); ``interLat = hwLat[NET][Ring]``
  2.7 / 4.0 / 14.0 (``hwLat[NET][Tree]``, 5.0 / 8.5 / 14, with one GPU per node), plus the network's own
  latency ``graph->latencyInter``, twice for Simple (the flush) (lines 385-391).
* On several nodes ``intraLat`` is at least ``netOverhead`` (lines 403-410; ``getNetOverhead``, lines
  228-233): 1 us on Intel hosts, 2 us on AMD ones, three times that for Simple.

The library's default (:func:`llmsizing.collectives.latency_steps`) charges all ``nsteps`` at one fitted
network latency per step, fitted on a two-node log (``data/links.csv``), which cannot separate the two.
:func:`fit_inter_node` fits ``base + intra x intra_alpha + inter x inter_alpha`` on the smallest messages
(LL) or the large-message intercepts (Simple) of ``data/nccl_node_counts.csv``, one cluster (ALCF Polaris,
4 A100 a node, Slingshot 11) at 2, 8, 256 and 540 nodes, with ``intra_alpha`` given (a one-node log's:
every run there has 4 GPUs a node, so intra and inter steps grow together, ``3 N`` and ``N - 1``, and the
logs alone fix only ``base - e`` and ``3 i + e``). ``network.collective_time_s(latency="nccl")`` uses it.

Pre-registered (net47, before any measurement): behind a keyword defaulting to today's flat model; measured
with ``tools/physics_ab.py`` on training-layout and moe-layout; adopt only if the out-of-source coverage
stays >= 75% and the median width does not grow.

Fitted (intra-node step 2.3 us LL, 8.0 us Simple: data/links.csv's nvlink row): LL base 30.5 us, inter-node
step 24.9 us, each node count left out predicted within 9% (2 nodes x1.09, 8 x0.98, 256 x1.02, 540 x1.00);
Simple (the base held at 0) 75 us a step, left out x1.09, x1.24, x0.78, x0.87: a poor fit. The two-node
TCPXO log of data/links.csv, its 30-step LL intercept (132 us) moved onto its 2 inter-node steps, gives 34
us: the same size. On Polaris the flat model needs 7.9 us a step (every step alike), above the network row's
4.4 us (4.5 ms against 8.0 ms logged at 1,024 ranks).
Measured (2026-12-05, load 2.3, each variant ~1.3 s CPU): ``N`` (rings leaving the node at this latency, one
line) training-layout coverage 87.4% -> 87.4%, median width 1.529 -> 1.572 (Nemotron-4 15B's DP over 288
nodes, one GPU a node, x1.11), moe-layout 88.9%, 1.952 -> 1.940; ``A-N`` (with the protocols of
``comm.ring_collective``) 87.4%, 1.636 (FP8 62.5%), moe-layout 3.30 (``A``: 1.570, 7.88; OLMoE x1.91 of
today): the width grows in both, so neither is adopted.
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from ._validate import check_choice, check_int, check_number

DATA_DIR = Path(__file__).resolve().parents[2] / "data"
NODE_COUNTS_CSV = "nccl_node_counts.csv"
RING_KINDS = ("all-reduce", "all-gather", "reduce-scatter")
PROTOCOLS = ("LL", "Simple")
#: The large-message rows a Simple intercept is fitted on (32 MiB and up: every row past NCCL's switch).
SIMPLE_FROM_BYTES = 2 ** 25


def ring_step_split(kind: str, n: int, nodes: int) -> tuple[int, int]:
    """``(intra, inter)``: the ring steps of one collective over ``n`` ranks on ``nodes`` nodes that stay in a
    node and those that cross to the next, as NCCL's tuner counts them (module docstring): all-reduce
    ``2 (n - 1)`` steps of which ``2 (nodes - 1)`` inter-node, all-gather and reduce-scatter ``n - 1`` and
    ``nodes - 1``."""
    kind = check_choice("kind", kind, RING_KINDS)
    n, nodes = check_int("n", n), check_int("nodes", nodes)
    if nodes > n:
        raise ValueError(f"nodes must be at most n (every node holds a rank), got nodes={nodes} > n={n}")
    nsteps = 2 * (n - 1) if kind == "all-reduce" else n - 1
    inter = 0 if nodes == 1 else (2 * (nodes - 1) if kind == "all-reduce" else nodes - 1)
    return nsteps - inter, inter


@cache
def node_count_rows(cluster: str = "alcf-polaris") -> tuple[dict, ...]:
    """The rows of ``data/nccl_node_counts.csv`` for ``cluster`` (a ValueError names the clusters there)."""
    with open(DATA_DIR / NODE_COUNTS_CSV, newline="") as fh:
        rows = list(csv.DictReader(fh))
    names = sorted({r["cluster"] for r in rows})
    check_choice("cluster", cluster, tuple(names))
    return tuple(r for r in rows if r["cluster"] == cluster)


def _sweep(rows, nodes: int, collective: str):
    r = sorted((x for x in rows if int(x["nodes"]) == nodes and x["collective"] == collective),
               key=lambda x: int(x["size_bytes"]))
    if not r:
        raise ValueError(f"no {collective} rows at {nodes} nodes")
    return r


def measured_latency_us(nodes: int, protocol: str = "LL", *, cluster: str = "alcf-polaris",
                        collective: str = "all_gather") -> float:
    """One node count's measured latency: ``LL``, the median time of the three smallest messages (16 bytes a
    rank and up: no bandwidth term to speak of); ``Simple``, the intercept of ``t = L + f S / B`` fitted on
    the rows from :data:`SIMPLE_FROM_BYTES` by least squares on relative errors (``f`` = the ring's
    :func:`~llmsizing.collectives.bus_factor`)."""
    protocol = check_choice("protocol", protocol, PROTOCOLS)
    r = _sweep(node_count_rows(cluster), check_int("nodes", nodes), collective)
    if protocol == "LL":
        return statistics.median(float(x["time_us"]) for x in r[:3])
    big = [x for x in r if int(x["size_bytes"]) >= SIMPLE_FROM_BYTES]
    ranks = int(big[0]["ranks"])
    f = (2 if collective == "all_reduce" else 1) * (ranks - 1) / ranks
    s = np.array([float(x["size_bytes"]) for x in big])
    t = np.array([float(x["time_us"]) for x in big])
    (lat, _), *_ = np.linalg.lstsq(np.vstack([np.ones_like(s), f * s]).T / t[:, None], np.ones_like(t),
                                   rcond=None)
    return float(lat)


@dataclass(frozen=True)
class InterNodeFit:
    """``base_s + intra x intra_alpha_s + inter x inter_alpha_s`` (:func:`ring_step_split`) for one
    protocol, fitted on ``nodes`` of ``cluster``'s logs; ``intra_alpha_s`` was given, not fitted."""

    cluster: str
    protocol: str
    intra_alpha_s: float
    base_s: float
    inter_alpha_s: float
    nodes: tuple[int, ...]

    def latency_s(self, kind: str, n: int, nodes: int, *, intra_alpha_s: float | None = None) -> float:
        """The fitted latency of one ring collective over ``n`` ranks on ``nodes`` nodes, its intra-node steps
        at ``intra_alpha_s`` (default: the one the fit was given)."""
        intra, inter = ring_step_split(kind, n, nodes)
        i = self.intra_alpha_s if intra_alpha_s is None else check_number("intra_alpha_s", intra_alpha_s)
        return self.base_s + intra * i + inter * self.inter_alpha_s


def fit_inter_node(intra_alpha_s: float, protocol: str = "LL", *, cluster: str = "alcf-polaris",
                   leave_out: tuple[int, ...] = ()) -> InterNodeFit:
    """Fit ``base`` and the inter-node step latency on ``cluster``'s ring all-gather logs at every node count
    but ``leave_out`` (:func:`measured_latency_us`), least squares on relative errors, with the intra-node
    step at ``intra_alpha_s`` (a one-node log's: the logs have one GPU count a node, see the module
    docstring). A negative base is held at 0 and the step refit alone (bounded least squares: the Simple
    intercepts of data/nccl_node_counts.csv give -8 to -206 us free). Needs two node counts at least; a
    negative inter-node latency is refused (ValueError)."""
    intra_alpha_s = check_number("intra_alpha_s", intra_alpha_s)
    protocol = check_choice("protocol", protocol, PROTOCOLS)
    rows = node_count_rows(cluster)
    counts = sorted({int(r["nodes"]) for r in rows} - {check_int("leave_out", k) for k in leave_out})
    if len(counts) < 2:
        raise ValueError(f"fitting base and inter-node latency needs two node counts, got {counts}")
    a, y = [], []
    for nodes in counts:
        ranks = int(_sweep(rows, nodes, "all_gather")[0]["ranks"])
        intra, inter = ring_step_split("all-gather", ranks, nodes)
        t = measured_latency_us(nodes, protocol, cluster=cluster) * 1e-6
        a.append([1 / t, inter / t])
        y.append(1 - intra * intra_alpha_s / t)
    a, y = np.array(a), np.array(y)
    (base, inter_alpha), *_ = np.linalg.lstsq(a, y, rcond=None)
    if base < 0:        # bounded least squares: the base at its bound, 0, and the inter-node step refit alone
        base, inter_alpha = 0.0, float(a[:, 1] @ y / (a[:, 1] @ a[:, 1]))
    if base < 0 or inter_alpha < 0 or not math.isfinite(base + inter_alpha):
        raise ValueError(f"{cluster} {protocol}: the fit gives base {base * 1e6:.1f} us, inter-node step "
                         f"{inter_alpha * 1e6:.1f} us with intra_alpha_s={intra_alpha_s}: not a latency")
    return InterNodeFit(cluster, protocol, intra_alpha_s, float(base), float(inter_alpha), tuple(counts))


@cache
def network_fit(protocol: str, intra_alpha_s: float) -> InterNodeFit:
    """:func:`fit_inter_node` on every node count, kept (``network.collective_time_s(latency="nccl")``)."""
    return fit_inter_node(intra_alpha_s, protocol)
