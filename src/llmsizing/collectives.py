"""A collective's counts: its latency steps, the bytes it puts on the wire per byte of its buffer, and the
:class:`Collective` row a step's traffic is made of (chapters 6, 7 and 9; the links they ride on and their
seconds are :mod:`llmsizing.network`'s).

The step counts are Thakur, Rabenseifner and Gropp's (2005) for ring collectives and NCCL's tree for an
all-reduce across nodes; the bytes on the wire are a flat ring's inside a scale-up domain and a hierarchical
collective's across domains (NVIDIA/nccl-tests#196, NVIDIA/nccl#946; checked in chapter 9 against the 16-GPU
H100 log of ``data/nccl_tests/``). Moved out of :mod:`llmsizing.network` unchanged (session 25), which still
exports every name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._validate import check_choice, check_int, check_number

#: A tree all-reduce level in units of the fitted per-ring-step latency: the network's ``alpha`` was fitted on
#: a 16-GPU, 2-node log as ``2 (16 - 1) = 30`` ring steps (``data/links.csv``), and a 16-GPU tree has
#: ``2 log2 16 = 8`` levels, so one level is 30 / 8 = 3.75 ring steps. An approximation from one log: NCCL's
#: own tuning model decides per message size.
TREE_LEVEL_ALPHAS = 30 / 8

#: The kinds of collective :func:`~llmsizing.network.collective_time_s` prices.
COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather", "send/recv")


def latency_steps(kind: str, n: int, across: bool = True) -> float:
    """Algorithm steps of one collective over ``n`` GPUs, in ring steps' worth of latency: ring all-reduce
    ``2 (n - 1)``, or NCCL's tree (``2 ceil(log2 n)`` levels of :data:`TREE_LEVEL_ALPHAS` each) when the group
    spans nodes and that is fewer; reduce-scatter and all-gather ``n - 1`` (ring); a point-to-point send 1."""
    kind = check_choice("kind", kind, COLLECTIVES)
    n = check_int("n", n)
    if kind == "send/recv":
        return 1
    if n == 1:
        return 0
    if kind == "all-reduce":
        ring = 2 * (n - 1)
        return min(ring, TREE_LEVEL_ALPHAS * tree_levels(n)) if across else ring
    return n - 1


def tree_levels(n: int) -> int:
    """Levels of NCCL's double binary tree for an all-reduce over ``n`` GPUs, ``2 ceil(log2 n)`` (up, then
    down; Thakur, Rabenseifner and Gropp 2005 count the steps): what :func:`latency_steps` charges at
    :data:`TREE_LEVEL_ALPHAS` ring steps each when the tree is the cheaper count. Chapter 6."""
    n = check_int("n", n)
    return 2 * math.ceil(math.log2(n))


def bus_factor(kind: str, n: int) -> float:
    """Bytes each GPU sends per byte of the collective's buffer ``S`` in a ring: ``2 (n - 1) / n`` for an
    all-reduce, ``(n - 1) / n`` for a reduce-scatter or an all-gather, 1 for a send. nccl-tests' "bus
    bandwidth" is ``bus_factor x S / t``, so that it can be compared with the link's speed for any ``n``."""
    kind = check_choice("kind", kind, COLLECTIVES)
    n = check_int("n", n)
    if kind == "send/recv":
        return 1.0
    return (2.0 if kind == "all-reduce" else 1.0) * (n - 1) / n


def wire_factor(kind: str, n: int, per_domain: int = 1) -> float:
    """Bytes a collective of ``kind`` over ``n`` GPUs puts on its link, per byte of its buffer ``S``, at the
    bandwidth :func:`~llmsizing.network.group_link` gives each GPU of the group (``k`` NICs' worth for
    ``k`` of its GPUs per scale-up domain): the one count of the library's collective times (chapters 6, 7
    and 9).

    * ``per_domain = 1`` (a group inside one domain, or one GPU per node across nodes): a flat ring,
      :func:`bus_factor` over the ``n`` GPUs, ``2 (n - 1) / n`` for an all-reduce.
    * ``per_domain = k > 1`` across ``m = ceil(n / k)`` domains: hierarchical. NCCL reduces inside the node
      over NVLink and sends each node's share once over its NICs, so the network carries ``2 (m - 1) / m x S``
      per node for an all-reduce (``(m - 1) / m x S`` for a reduce-scatter or an all-gather) through the
      group's ``k`` NICs there: :func:`bus_factor` over the ``m`` nodes. On two nodes NCCL's tree (or
      NVLS-tree) moves each byte once over the network where a flat 16-rank ring would move 1.875 of them:
      nccl-tests' bus bandwidth then exceeds the NICs' line rate (NVIDIA/nccl-tests#196, NVIDIA/nccl#946:
      "2x less traffic on the network than on the intra-node connections"; NVIDIA/nccl#919 on the tree's
      chains inside a node and its tree across nodes); NCCL's tuner prices NVLS-tree's network bandwidth with
      the same ``m / (2 (m - 1))`` (``src/graph/tuning.cc``). On many nodes both counts tend to ``2 S``.

    The data: ``data/nccl_tests/h100_2x8_gcp_a3mega_tcpxo_all_reduce.txt`` (16 H100s on 2 nodes of 8 x 200
    Gb/s NICs) reduced 8 GiB in 47.5 ms, 181 GB/s through 200 GB/s of NICs per node: one ``S`` per node, where
    a flat ring's 1.875 ``S`` would need 339 GB/s (chapter 9; ``tools/fit_nccl_logs.py`` fits the network's
    achievable fraction with this same count). The phase inside the node (reduce-scatter and all-gather over
    the scale-up link, ``2 (k - 1) / k x S`` per GPU) runs pipelined with it:
    :func:`~llmsizing.network.group_link` caps the bandwidth where it is the slower (there, 2 x 7 / 8 x 8 GiB
    / 346.5 GB/s = 43 ms < 47 ms: the NICs bound it). An approximation: NCCL picks ring or tree per message
    size and node count, and NVLink SHARP is not modelled. 0 when the whole group sits in one
    domain (``per_domain >= n``: nothing crosses)."""
    kind = check_choice("kind", kind, COLLECTIVES)
    n = check_int("n", n)
    per_domain = check_int("per_domain", per_domain, maximum=n)
    if per_domain == 1 or kind == "send/recv":
        return bus_factor(kind, n)
    return bus_factor(kind, math.ceil(n / per_domain))


def ring_bytes(kind: str, message_bytes: float, n: int) -> float:
    """Bytes each GPU sends in one flat ring ``kind`` (``"all-reduce"``, ``"reduce-scatter"``,
    ``"all-gather"``) of a ``message_bytes`` buffer over ``n`` GPUs: :func:`wire_factor` with one GPU per
    node, ``2 (n-1)/n S`` for an all-reduce, ``(n-1)/n S`` for the others (0 for one GPU). Chapter 7."""
    kind = check_choice("kind", kind, ("all-reduce", "reduce-scatter", "all-gather"))
    s = check_number("message_bytes", message_bytes)
    return wire_factor(kind, n) * s


#: The windows a data-parallel collective hides behind (issue 21's "overlap per group", chapter 8), in the
#: order :func:`~llmsizing.exposure.dp_window_exposed_s` takes them (and the planner keeps them in,
#: :mod:`llmsizing.plan_dp`): ZeRO-3's forward gathers behind each forward; its backward gathers and
#: reduce-scatters, together, behind each backward; the ZeRO-1/2 weight all-gather behind the next step's
#: first forward (Megatron-LM's ``--overlap-param-gather``); ZeRO-2's reduce-scatter behind each backward;
#: DDP's and ZeRO-1's gradients behind the last backward. A data-parallel :class:`Collective`'s ``slot`` is
#: one of them, set where :func:`~llmsizing.zero_traffic.dp_collectives` defines it.
DP_SLOTS = ("ZeRO-3 forward gather", "ZeRO-3 backward", "weight all-gather", "ZeRO-2 reduce-scatter",
            "gradients")
#: Which :data:`DP_SLOTS` run once per micro-batch (their seconds per pass: a step's over ``grad_accum``).
DP_PER_MICRO_BATCH = (True, True, False, True, False)


@dataclass(frozen=True)
class Collective:
    """One kind of collective in a step, on one GPU. ``message_bytes`` is the full buffer of one call (before
    any sharding), ``bytes_per_gpu`` what this GPU sends in all ``calls`` of the step, ``bandwidth_gbps`` the
    one-way bandwidth the ``link`` reaches (nominal x achievable fraction), ``latency_s`` the algorithm steps
    of all ``calls`` x the link's latency per step, ``time_s`` = bytes / bandwidth + latency. For a group with
    several GPUs per node across nodes the bytes are :func:`wire_factor`'s (the node's network bytes, at the
    bandwidth of the group's NICs there), not a flat ring's per GPU (issue 34). ``slot``: for a data-parallel
    collective (group ``"dp"``), the window of :data:`DP_SLOTS` it hides behind, carried from where it is
    defined (:func:`~llmsizing.zero_traffic.dp_collectives`, review24c M5: never read off its name); ``None``
    for every other group."""

    collective: str
    group: str
    group_size: int
    link: str
    calls: int
    message_bytes: float
    bytes_per_gpu: float
    bandwidth_gbps: float
    latency_s: float = 0.0
    slot: str | None = None

    def __post_init__(self):
        if self.slot is not None:
            if self.group != "dp":
                raise ValueError(f"slot is the window of a data-parallel collective (group 'dp'); "
                                 f"{self.collective!r} is in group {self.group!r}: leave slot=None")
            check_choice("slot", self.slot, DP_SLOTS)

    @property
    def time_s(self) -> float:
        return self.bytes_per_gpu / (self.bandwidth_gbps * 1e9) + self.latency_s

    @property
    def one_call_s(self) -> float:
        """One call's seconds (``time_s / calls``)."""
        return self.time_s / self.calls
