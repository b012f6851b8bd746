"""The all-to-all of a mixture of experts on the network model (chapters 15 and 18; issue 24): the bytes an
expert-parallel dispatch or combine sends, the share of them that leaves a node under DeepSeek-V3's
node-limited routing, and one all-to-all's seconds. Training's per-step all-to-alls
(:func:`llmsizing.moe.ep_all_to_all`) and serving's decode step (:mod:`llmsizing.serve_moe`) both price theirs
here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import check_int, check_number
from .catalog import get_gpu
from .network import Node, _collective_time_s, get_node, group_link


@dataclass(frozen=True)
class Dispatcher:
    """What an MoE token dispatcher sends (issue 35): ``once_per_gpu`` (a token goes once to each GPU
    holding one of its experts, and once to each node, forwarded inside it over NVLink) or ``k`` copies a
    token, one per expert. ``source``: where that is read."""

    name: str
    once_per_gpu: bool
    source: str


#: The token dispatchers :func:`all_to_all_s` prices: Megatron-Core's ``alltoall``, and its ``flex`` on DeepEP
#: as ``deepep`` (chapter 18). ``alltoall`` sends ``k`` copies a token only where the routing is not limited:
#: under a model's group-limited routing inside one domain (:func:`route_max_ranks`, DeepSeek-V2's ``M``) it
#: sends a token once to each GPU reached, and with ``max_nodes`` once to each node over the network (every
#: copy forwarded over NVLink), as DeepSeek's kernels do, whichever dispatcher is named.
DISPATCHERS = {
    "alltoall": Dispatcher("alltoall", False, (
        "Megatron-Core MoEAlltoAllTokenDispatcher (--moe-token-dispatcher-type alltoall), "
        "megatron/core/transformer/moe/token_dispatcher.py: input_splits sum routing_map per expert over "
        "each rank's experts, num_out_tokens = tokens x moe_router_topk (dropless): a token once per "
        "expert; priced so only without a group or node limit: with route_max_ranks < k a token goes once "
        "per GPU reached, with max_nodes once per node over the network, as DeepSeek's kernels send it "
        "(DeepSeek-V2, arXiv:2405.04434, Sec. 2.2.2; DeepSeek-V3, arXiv:2412.19437, Sec. 3.2.2)")),
    "deepep": Dispatcher("deepep", True, (
        "Megatron-Core MoEFlexTokenDispatcher with DeepEP (--moe-token-dispatcher-type flex "
        "--moe-enable-deepep), token_dispatcher.py: _DeepepManager.dispatch sends the unpermuted tokens "
        "(fused_dispatch on topk_idx) and permutes them by local expert after they arrive; DeepEP's "
        "get_dispatch_layout counts num_tokens_per_rank and num_tokens_per_rdma_rank, a token once per "
        "rank and once per node (README, docs/legacy.md: normal kernels with NVLink and RDMA forwarding; "
        "DeepSeek-V3, arXiv:2412.19437, Sec. 3.2.2)")),
}


#: The dispatcher a call without ``dispatcher`` prices (every function's default; chapter 18).
DEFAULT_DISPATCHER = "alltoall"


def dispatcher_kwargs(dispatcher) -> dict:
    """``{"dispatcher": name}`` for a dispatcher other than :data:`DEFAULT_DISPATCHER`, else ``{}``: an old
    call's keywords unchanged (the name is checked by :func:`check_dispatcher`)."""
    name = check_dispatcher(dispatcher).name
    return {} if name == DEFAULT_DISPATCHER else {"dispatcher": name}


def check_dispatcher(dispatcher) -> Dispatcher:
    """A :data:`DISPATCHERS` entry from its name (or the entry itself); a ``ValueError`` naming
    ``dispatcher`` and the choices else."""
    if isinstance(dispatcher, Dispatcher):
        return dispatcher
    if not isinstance(dispatcher, str) or dispatcher not in DISPATCHERS:
        raise ValueError(f"dispatcher must be one of {sorted(DISPATCHERS)}, got {dispatcher!r}")
    return DISPATCHERS[dispatcher]


def distinct_reached(top_k: int, units: float, per_unit: float | None = None) -> float:
    """The expected number of distinct units (GPUs, or nodes) a token's ``k`` experts sit on, drawn
    uniformly over ``units`` units: ``units x (1 - P(a unit holds none))``. With ``per_unit`` experts a
    unit the ``k`` distinct experts are drawn without replacement from ``units x per_unit``:
    ``P = C(N - per_unit, k) / C(N, k)`` (the hypergeometric, as a product so that ``units`` may be
    fractional: 128 GPUs over 72-GPU racks); without it, with replacement: ``(1 - 1 / units)^k`` (many
    experts a unit). DeepSeek-V3 at EP 8 (256 experts, 32 a GPU, top-8): ``8 (1 - C(224, 8) / C(256, 8))
    = 5.29``, against ``8 (1 - (7/8)^8) = 5.25``. Never more than ``k`` nor ``units``."""
    k = check_int("top_k", top_k)
    units = check_number("units", units)
    if units <= 1:
        return min(1.0, units)
    if per_unit is None:
        miss = (1 - 1 / units) ** k
    else:
        per, n = check_number("per_unit", per_unit), units * per_unit
        if k > n:
            raise ValueError(f"distinct_reached: top_k={k} exceeds the {n:g} experts on the units")
        miss = 1.0
        for i in range(k):
            miss *= max(0.0, (n - per - i) / (n - i))
    return min(units * (1 - miss), float(k))               # (k when every pick is its own unit, to rounding)


def all_to_all_bytes(tokens: float, top_k: int, hidden: int, bytes_per_element: float, ep: int) -> float:
    """Bytes one GPU sends in one dispatch (or combine) all-to-all under uniform routing:
    ``tokens x k x hidden x bytes x (ep - 1) / ep`` (each of a token's ``k`` copies lands on another GPU with
    probability ``(ep - 1) / ep``; dropless top-k, experts spread evenly over the ``ep`` GPUs)."""
    tokens = check_number("tokens", tokens)
    k = check_int("top_k", top_k)
    h = check_int("hidden", hidden)
    b = check_number("bytes_per_element", bytes_per_element, minimum=0.0)
    ep = check_int("ep", ep)
    return _all_to_all_bytes(tokens, k, h, b, ep)


def _all_to_all_bytes(tokens, k: int, h: int, b: float, ep: int):
    """:func:`all_to_all_bytes` of checked arguments, ``tokens`` a number or a NumPy array."""
    return tokens * k * h * b * (ep - 1) / ep


def inter_node_share(top_k: int, ep: int, gpus_per_node: int, max_nodes: int | None = None) -> float:
    """The bytes that cross the network per byte of ``tokens x k x hidden x bytes``, with the ``ep`` GPUs in
    groups of ``gpus_per_node`` per node (``n = ep / gpus_per_node`` nodes; 0 when ``ep`` fits in a node).

    Without node limit: ``(ep - g) / ep`` of a token's ``k`` copies go to another node. With DeepSeek-V3's
    node-limited routing (``max_nodes = M``; Sec. 2.1.2) a token goes to at most ``M`` nodes and is sent once
    per node over InfiniBand, then forwarded to the right GPUs over NVLink (Sec. 3.2.2):
    ``min(k, M, n) x (n - 1) / n`` copies cross the network (its chosen nodes taken as uniform over the ``n``,
    its own among them with probability ``M / n``), i.e. ``min(k, M, n) / k x (n - 1) / n`` per byte of the
    formula. An approximation: routing is not uniform, and a token whose ``k`` experts sit on fewer than ``M``
    nodes sends fewer copies."""
    k, ep, g = check_int("top_k", top_k), check_int("ep", ep), check_int("gpus_per_node", gpus_per_node)
    m = None if max_nodes is None else check_int("max_nodes", max_nodes)
    if ep <= g:
        return 0.0
    n = ep / g
    if m is None:
        return (ep - g) / ep
    return min(k, m, n) / k * (n - 1) / n


def inter_node_share_distinct(top_k: int, ep: int, gpus_per_node: int, max_nodes: int | None = None) -> float:
    """:func:`inter_node_share` without its upper-bound step: a token's ``k`` experts drawn uniformly over
    the ``m = min(M, n)`` nodes it may reach (``n = ep / gpus_per_node``; ``M`` = ``max_nodes``, none:
    ``n``) land on ``D = m (1 - (1 - 1/m)^k)`` distinct nodes on average, not ``min(k, m)``, and each is
    sent the token once (DeepSeek-V3 Sec. 3.2.2; DeepEP's normal kernels), so ``D x (n - 1) / n / k``
    crosses the network per byte of ``tokens x k x hidden x bytes``. DeepSeek-V3's layout (``k = 8``, 8
    nodes): ``8 (1 - (7/8)^8) x 7/8 / 8 = 0.574`` without a limit against :func:`inter_node_share`'s
    0.875, and ``4 (1 - (3/4)^8) x 7/8 / 8 = 0.394`` at ``M = 4`` against 0.438. What
    :func:`inter_node_share` overstates by (chapter 18, exercise 2); the library prices with the bound.
    An approximation twice over: the draw is with replacement (``k`` distinct experts of 256, 32 a node, reach
    ``8 (1 - C(224, 8) / C(256, 8)) = 5.29`` nodes, not 5.25: 0.8% more), and a trained router's picks are
    not uniform (picks that cluster on a node reach fewer nodes). ``n`` may be fractional, as
    :func:`inter_node_share`'s (128 GPUs over 72-GPU racks: ``n = 1.78``)."""
    k, ep, g = check_int("top_k", top_k), check_int("ep", ep), check_int("gpus_per_node", gpus_per_node)
    mn = None if max_nodes is None else check_int("max_nodes", max_nodes)
    if ep <= g:
        return 0.0
    n = ep / g
    m = n if mn is None else min(mn, n)
    return m * (1 - (1 - 1 / m) ** k) * (n - 1) / n / k


def _group_spans(model, ep: int, per_unit: int) -> tuple[int, int] | None:
    """``(T, the units the T widest groups span together)`` of ``model``'s group-limited routing over
    ``ep`` ranks in units of ``per_unit`` consecutive ranks (a GPU: 1; a node: its ranks), or ``None`` without
    a group limit (``0 < T < G`` false). Expert ``x`` of ``E`` sits on rank ``floor(x ep / E)``
    (contiguous experts a rank, as Megatron-Core and DeepEP's ``topk_idx // (num_experts // num_ranks)``
    place them), rank ``r`` in unit ``floor(r / per_unit)``; group ``i`` holds experts ``i E / G`` to
    ``(i + 1) E / G - 1`` (DeepSeek's router views the scores as ``n_group`` contiguous blocks)."""
    g = int(getattr(model, "expert_groups", 0) or 0)
    t = int(getattr(model, "expert_groups_per_token", 0) or 0)
    if not 0 < t < g:
        return None
    e = model.experts
    spans = sorted((((i + 1) * e // g - 1) * ep // e) // per_unit - (i * e // g * ep // e) // per_unit + 1
                   for i in range(g))
    return t, sum(spans[-t:])


def route_max_ranks(model, ep: int) -> int | None:
    """The expert-parallel ranks one token's routed experts can sit on under group-limited routing, from
    ``model``'s own fields (its config's ``n_group`` / ``topk_group``: ``expert_groups`` ``G``,
    ``expert_groups_per_token`` ``T``), or ``None`` when its routing has no group limit (``T`` of ``G`` with
    ``0 < T < G`` false). Each of ``ep`` ranks holds ``E / ep`` contiguous experts and a group ``E / G``, so a
    group spans ``ep / G`` ranks when ``G`` divides ``ep``, shares one rank with others when ``ep`` divides
    ``G``, and else the ranks its experts straddle (:func:`_group_spans`); a token reaches at most ``T``
    groups: ``min(ep, the ranks its T widest groups span)``. DeepSeek-V2 (arXiv:2405.04434, Sec. 2.2.2,
    "device-limited routing": ``G = 8``, ``T = 3`` on its 8-way expert parallelism) places one group per GPU:
    a token's 6 experts lie on at most 3 GPUs; DeepSeek-V3 (``T = 4`` of 8, EP 64) one group per node, 8 GPUs
    each (:func:`route_max_nodes`): no limit below its top-8 at the level of GPUs."""
    ep = check_int("ep", ep)
    spans = _group_spans(model, ep, 1)
    return None if spans is None else min(ep, spans[1])


def route_max_nodes(model, ep: int | None = None, gpus_per_node: int | None = None) -> int | None:
    """The most nodes one token's routed experts can sit on under group-limited routing with ``ep``
    expert-parallel ranks, ``gpus_per_node`` of them a node (a node's GPUs over the experts' ``etp``), from
    ``model``'s own fields (config's ``n_group`` ``G`` / ``topk_group`` ``T``); ``None`` without a group
    limit. The one count every caller prices DeepSeek's node-limited routing with (``max_nodes="model"``:
    :func:`llmsizing.moe.ep_all_to_all` works it out for the layout it prices).

    A group's ``E / G`` experts span ``ep / (G x gpus_per_node)`` nodes when that divides, one node when a
    node holds whole groups, else the nodes they straddle (:func:`_group_spans`); a token reaches at most
    ``T`` groups, so at most ``min(nodes, the nodes its T widest groups span)`` nodes, and never more than its
    ``k`` experts (:func:`inter_node_share` takes ``min(k, M, n)``). DeepSeek-V3 (arXiv:2412.19437,
    Sec. 2.1.2: "each token will be sent to at most M nodes", M = 4; Sec. 3.2.2: 64-way EP over 8 nodes)
    has ``G = 8`` groups of 32 experts, one a node at EP 64: 4 nodes. At EP 128 (16 nodes) a group spans 2
    nodes and a token's 4 groups up to 8; at EP 256 (32 nodes) 4 nodes a group, 16 by the groups, 8 by
    its top-8. DeepEP counts the same thing: a token is sent once to each node among its experts' ranks
    (``rank // num_local_ranks``, deduplicated: ``num_tokens_per_rdma_rank``, ``tests/legacy/
    test_internode.py``), over InfiniBand to the same-index GPU and then over NVLink.

    Called with ``model`` alone (the form before issue 35) it returns ``T`` with a ``DeprecationWarning``:
    right only where one group fills at most one node, up to 2x too few nodes past that."""
    if ep is None:
        import warnings

        warnings.warn("route_max_nodes(model) is the node limit only where a group fits in one node; "
                      "give route_max_nodes(model, ep, gpus_per_node) (issue 35)", DeprecationWarning,
                      stacklevel=2)
        g, t = model.expert_groups, model.expert_groups_per_token
        return t if 0 < t < g else None
    ep = check_int("ep", ep)
    d = check_int("gpus_per_node", gpus_per_node)
    spans = _group_spans(model, ep, d)
    return None if spans is None else min(-(-ep // d), spans[1])


def node_limit(max_nodes):
    """A checked ``max_nodes`` argument: ``"model"`` (the model's own routing, :func:`route_max_nodes` of the
    layout priced), ``None`` (no limit) or a positive int; a ``ValueError`` naming ``max_nodes`` else."""
    if isinstance(max_nodes, str):
        if max_nodes != "model":
            raise ValueError(f"max_nodes={max_nodes!r}: give 'model' (the routing's own groups), None (no "
                             "limit) or a positive int")
        return max_nodes
    return None if max_nodes is None else check_int("max_nodes", max_nodes)


def routing_note(model, max_nodes) -> str:
    """How a plan's all-to-all routes, in words, for a checked ``max_nodes`` (:func:`node_limit`)."""
    if max_nodes == "model":
        g, t = model.expert_groups, model.expert_groups_per_token
        return f"to the nodes {t} of its {g} expert groups span" if 0 < t < g else "to any node"
    return "to any node" if max_nodes is None else f"to at most {max_nodes} nodes"


def all_to_all_s(message_bytes: float, ep: int, gpu, node=None, *, top_k: int | None = None,
                 max_nodes: int | None = None, stride: int = 1, dispatcher: str = "alltoall",
                 experts: int | None = None) -> float:
    """One all-to-all (an MoE layer's dispatch, or its combine) over ``ep`` GPUs of ``message_bytes`` per GPU
    (its tokens x ``k`` hidden vectors), priced on the network model (:mod:`llmsizing.network`).

    Each GPU keeps ``1 / ep`` of its buffer and sends ``1 / ep`` to each peer, all at once (NCCL runs an
    all-to-all as grouped sends that progress together; DeepSeek's DeepEP kernels likewise), so the latency is
    charged once, not ``ep - 1`` times. Inside one scale-up domain (``ep <= domain``: 8 GPUs of an HGX node)
    the ``(ep - 1) / ep`` that leaves rides the GPU's own link. Across domains (without ``max_nodes``: see
    the forwarding leg below for node-limited routing) the peers in the GPU's own domain (``domain - 1`` of
    them) are reached over NVLink while the other ``(ep - domain) / ep`` of the
    buffer leaves through the GPU's own share of its node's NICs (every GPU of a node sends across at once, so
    each gets one NIC: :func:`~llmsizing.network.group_link` with ranks a domain apart); the two go in
    parallel and the slower sets the time:
    ``alpha + max(cross bytes / NIC bandwidth, intra bytes / NVLink bandwidth)``, each with NCCL's protocol
    choice (:func:`~llmsizing.network.collective_time_s` of a ``send/recv``).

    Checked against DeepEP's published low-latency kernels on H800 with one 400 Gb/s CX7 NIC per GPU
    (``data/deepep_all_to_all.csv``: 128 tokens, hidden 7,168, top-8, FP8 dispatch, BF16 combine, EP 16 to
    256): 0.90x-0.99x of every internode row (EP 16-256; tests/test_moe_serving.py). At EP 8 the model is
    0.65x (dispatch) and 0.80x (combine): those kernels sent even a node's own peers through the NIC ("pure
    RDMA", before DeepEP's PR #173), where the model prices NVLink. Chapter 15.

    Training (issue 24, :func:`llmsizing.moe.ep_all_to_all`) adds two keywords, old calls unchanged:
    ``max_nodes`` (with ``top_k``) is DeepSeek-V3's node-limited routing, each token sent to at most that many
    nodes, once per node (the cross-node share becomes :func:`llmsizing.moe.inter_node_share` instead of
    ``(ep - domain) / ep``); ``stride`` places the ``ep`` ranks that far apart (Megatron-Core's expert grid
    puts them ``etp`` apart), so that ``domain / stride`` of them share a scale-up domain.

    **The NVLink forwarding leg** (issue 35). With ``max_nodes`` the all-to-all runs as DeepEP's normal
    (training and prefill) kernels run it (DeepSeek-V3 Sec. 3.2.2; DeepEP V1 ``internode.cu``): a token
    goes over RDMA once to the same-index GPU of each node it reaches, and that GPU forwards it over NVLink
    to every GPU of its node that holds one of its experts, its own node's tokens too. So the NVLink leg
    carries each of a token's ``k`` copies but the ``1 / domain`` that lands on the forwarding GPU itself,
    ``(domain - 1) / domain`` of the buffer, not the ``(domain - 1) / ep`` sent straight to the own node's
    peers (an upper bound, like the network share: a GPU holding two of a token's experts receives it once).
    The kernel's RDMA senders, NVLink forwarders and receivers are separate warps working through chunked
    buffers at once, so the two legs overlap and the slower sets the time, as above. With an 8-GPU H800 node
    (NVLink 154 GB/s, a 45.5 GB/s NIC) and top-8 the NVLink leg is the slower when a token crosses the
    network fewer than ``7 x 45.5 / 154 = 2.07`` times: two or three nodes, or a node limit of 1 or 2.
    DeepEP's README (legacy V1 table, H800 with CX7, 4,096 tokens, hidden 7,168, top-8, FP8 dispatch, a group
    a node, top-``min(nodes, 4)`` groups) gives 43 GB/s at EP 16, counted over the tokens each node gets
    including its own (``tests/legacy/test_internode.py``'s ``num_rdma_token_sent``, 1.993 nodes a token):
    1.40 ms, where the NIC's share alone would take 0.67 ms (0.47x); the forwarding leg's 1.38 ms is 0.99x
    of it, and the RDMA-bound EP 64 (0.99x) does not move (``tests/test_deepep_forwarding.py``). DeepEP's
    maintainers name NVLink the bottleneck there too (issue #285: "the NVLink bandwidth will exceeds 140 GB/s,
    making NVLink the bottleneck"; :func:`deepep_normal_nvl_gbps`).

    **The dispatcher** (``dispatcher``, a :data:`DISPATCHERS` name; issue 35). ``"alltoall"`` (the
    default, all of the above) sends a token once per expert, ``k`` copies, as Megatron-Core's
    ``MoEAlltoAllTokenDispatcher`` does, except that with ``max_nodes`` the network carries it once per
    node (above; and :func:`llmsizing.moe.ep_all_to_all` sends it once per GPU under group-limited
    routing). ``"deepep"`` (Megatron-Core's ``flex`` dispatcher on DeepEP's normal kernels) sends it once
    to each GPU holding one of its experts and, across nodes, once to each node and on over NVLink (the
    forwarding leg above, also without ``max_nodes``). It needs ``top_k``; ``experts`` (the routed experts
    over the ``ep`` GPUs) makes the draw exact, without replacement (:func:`distinct_reached`). Inside a
    domain ``(ep - 1) / ep x D / k`` of the buffer leaves, ``D`` the GPUs a token reaches: ``8 (1 - C(224,
    8) / C(256, 8)) = 5.29`` of 8 for top-8 of 256 experts at EP 8, 0.66 of the ``alltoall``'s bytes.
    Across domains the network carries ``D_n x (n - 1) / n / k`` and the NVLink leg ``D_g x (d - 1) / d /
    k``: ``D_n`` the nodes (with ``max_nodes`` its bound ``min(k, M, n)``, as DeepSeek's group-limited
    router picks groups by their best experts, so a chosen group is nearly always reached; else the
    distinct nodes of ``k`` uniform draws), ``D_g`` the distinct GPUs among the reached nodes' ``D_n x
    d``. Uniform routing is the approximation: a trained router's picks cluster, so they reach fewer GPUs.
    Against DeepEP's published normal kernels (:func:`deepep_normal_published_s`): 0.88x at EP 8 (the
    ``alltoall`` count 1.32x), 0.81x at EP 16, 0.97x at EP 32 (no group limit in DeepEP's test: the nodes
    drawn), 0.99x at EP 64 (``tests/test_dispatcher.py``, ``tests/test_deepep_ep16.py``). Where the NIC sets
    the time (EP 32, 64) the model matches; where NVLink does (EP 8, 16) it is short by DeepEP's own NVLink
    rate, not by a byte it leaves out: its kernels count a GPU's copies to itself (no link carries them, 1 in
    8 of the counted bytes) and move the counted bytes at 153 GB/s in one node and 141 at EP 16
    (:func:`deepep_normal_nvl_gbps`), against the model's 154 GB/s link: ``(7/8) x 153/154 = 0.87`` and
    ``(7/8) x 141/154 = 0.80``. The internode kernel's slower rate (0.92 of the one-node kernel's) is its
    own, through one more buffer on the way (``internode.cu``: RDMA buffer, then the forwarder's NVLink
    buffer, then the output); the model prices links and does not fit it."""
    s = check_number("message_bytes", message_bytes)
    ep = check_int("ep", ep, maximum=65536)
    stride = check_int("stride", stride, maximum=65536)
    disp = check_dispatcher(dispatcher)
    if disp.once_per_gpu and top_k is None:
        raise ValueError(f"dispatcher={disp.name!r} needs top_k (the experts a token picks, an integer >= 1)")
    if max_nodes is not None or disp.once_per_gpu:
        top_k = check_int("top_k", top_k)
    if max_nodes is not None:
        max_nodes = check_int("max_nodes", max_nodes)
    if experts is not None:
        experts = check_int("experts", experts, minimum=top_k or 1)
    g = get_gpu(gpu)
    n = node if isinstance(node, Node) else get_node(node, gpu=g)
    return _all_to_all_s(s, ep, g, n, top_k, max_nodes, stride, disp, experts)


def _all_to_all_s(s, ep: int, g, n: Node, top_k, max_nodes, stride: int, disp: Dispatcher | None = None,
                  experts: int | None = None, max_ranks: int | None = None):
    """:func:`all_to_all_s` of checked arguments (a GPU and a :class:`~llmsizing.network.Node`): training's
    per-step all-to-alls call it with their layout's own (issue 35: a planner's search prices ~500), ``s`` a
    number or a NumPy array of message bytes (element by element, the same arithmetic). ``disp``: a
    :class:`Dispatcher` (``None``: ``"alltoall"``); ``max_ranks``: with ``"deepep"``, the GPUs a token's
    group-limited routing may reach inside one domain (:func:`route_max_ranks`)."""
    if ep == 1:
        return 0.0
    d, inside, cross_link, intra_link = _links(ep, g, n, stride)
    per = None if experts is None else experts / ep                   # (routed experts a GPU)
    once = disp is not None and disp.once_per_gpu
    if ep <= d:
        reach = 1.0 if not once else (min(top_k, max_ranks) if max_ranks is not None and max_ranks < top_k
                                      else distinct_reached(top_k, ep, per)) / top_k
        return _collective_time_s("send/recv", s * reach * (ep - 1) / ep, 2, inside, True)
    share, near = _across_shares(ep, d, top_k, max_nodes, once, per)
    cross = _collective_time_s("send/recv", s * share, 2, cross_link, True)
    intra = _collective_time_s("send/recv", s * near, 2, intra_link, True) if d > 1 else 0.0
    return np.maximum(cross, intra) if isinstance(cross, np.ndarray) else max(cross, intra)


def _across_shares(ep: int, d: int, top_k, max_nodes, once: bool, per=None) -> tuple[float, float]:
    """Across scale-up domains (``ep > d``, ``d`` of the ``ep`` GPUs a domain), the shares of a GPU's ``tokens
    x k x hidden`` buffer that :func:`all_to_all_s` sends on its two legs at once, ``(network, NVLink)``:
    every copy straight to its GPU, ``(ep - d) / ep`` and ``(d - 1) / ep``; with a node limit,
    :func:`~llmsizing.moe.inter_node_share` and the forwarding leg's ``(d - 1) / d``; with ``once``
    (``"deepep"``) a token once a node and once a GPU (``per``: routed experts a GPU, for the exact draw).
    The sum is what the GPU sends in one call (:func:`llmsizing.moe.ep_all_to_all`'s rows; lows29)."""
    if once:        # ---- DeepEP: once a node over the network, once a GPU over NVLink (forwarded)
        nodes = ep / d
        reach_n = (min(top_k, max_nodes, nodes) if max_nodes is not None
                   else distinct_reached(top_k, nodes, None if per is None else per * d))
        reach_g = distinct_reached(top_k, reach_n * d, per)
        return reach_n * (nodes - 1) / nodes / top_k, reach_g * (d - 1) / d / top_k
    if max_nodes is None:                  # every copy straight to its GPU: the own node's peers over NVLink
        return (ep - d) / ep, (d - 1) / ep
    # ---- node-limited routing (llmsizing.moe): DeepEP's NVLink leg forwards every copy
    return inter_node_share(top_k, ep, d, max_nodes), (d - 1) / d


def _links(ep: int, g, n: Node, stride: int) -> tuple:
    """All :func:`all_to_all_s` reads of the GPU ``g`` and its node ``n`` for ``ep > 1`` ranks ``stride``
    apart: ``d``, the group's GPUs in one scale-up domain, and the links
    (:func:`~llmsizing.network.group_link`) it prices on: inside one domain; else across domains (ranks a
    domain apart) and inside the GPU's own (``None`` when unused). Two GPUs with equal tuples take the same
    seconds for any message (the planner shares them, :func:`llmsizing.plan_moe.moe_all_to_all_s`)."""
    d = max(1, n.scaleup_domain_gpus // stride)           # the ep group's GPUs in one scale-up domain
    if ep <= d:
        return d, group_link(g, n, size=ep, stride=stride), None, None
    return (d, None, group_link(g, n, size=ep, stride=n.scaleup_domain_gpus),
            group_link(g, n, size=d, stride=stride) if d > 1 else None)


#: DeepEP's published normal-kernel bottleneck bandwidths (its README's legacy V1 table), a row per op and EP
DEEPEP_NORMAL_CSV = "deepep_normal_kernels.csv"


def deepep_normal_rows(op: str = "dispatch") -> dict[int, dict]:
    """The rows of ``data/deepep_normal_kernels.csv`` for ``op`` (``"dispatch"`` or ``"combine"``), by EP:
    DeepEP's README, legacy V1 table (H800, 4,096 tokens a GPU, hidden 7,168, 256 experts, top-8, top-4
    groups, FP8 dispatch, BF16 combine), each with its bottleneck ``bandwidth_gbps`` and ``link``."""
    import csv

    from ._validate import check_choice
    from .catalog import DATA_DIR

    op = check_choice("op", op, ("dispatch", "combine"))
    with open(DATA_DIR / DEEPEP_NORMAL_CSV, newline="") as fh:
        return {int(r["ep"]): r for r in csv.DictReader(fh) if r["op"] == op}


def deepep_destinations(ep: int, top_k: int, experts: int, gpus_per_node: int, topk_groups: int) -> float:
    """What DeepEP's tests count a token sent to, its own GPU or node included, under uniform routing: in one
    node (``ep <= gpus_per_node``, ``tests/test_intranode.py``'s received tokens) the GPUs holding any of
    its ``k`` distinct experts of ``E``, ``E / ep`` a GPU: ``ep (1 - C(E - E/ep, k) / C(E, k))`` (8 (1 -
    C(224, 8) / C(256, 8)) = 5.29 of 8 at EP 8: a GPU holding two of a token's experts receives it once);
    across nodes (``tests/legacy/test_internode.py``'s ``num_rdma_token_sent``) the nodes among its experts,
    a routing group a node, ``topk_groups = min(nodes, 4)`` of them chosen. Where every group is chosen (2
    nodes at EP 16, 4 at EP 32) nothing limits the plain top-``k``, so the nodes are drawn as the GPUs are:
    ``n (1 - C(E - E/n, k) / C(E, k))``, 1.993 at EP 16 and 3.61 at EP 32 (until issue 35's deepep29 the
    bound 2 and 4: 11% too many at EP 32). Where fewer are (EP 64: 4 of 8) each chosen group is taken as
    reached, ``topk_groups`` (its best expert leads the group into the top-``k`` nearly always: DeepEP's
    routing simulated gives 3.98 of 4). Used by :func:`deepep_normal_published_s`."""
    ep, k, e = check_int("ep", ep), check_int("top_k", top_k), check_int("experts", experts)
    g, t = check_int("gpus_per_node", gpus_per_node), check_int("topk_groups", topk_groups)
    if e % ep or k > e:
        raise ValueError(f"deepep_destinations: ep must divide experts={e} and top_k <= experts, got "
                         f"ep={ep}, top_k={k}")
    if ep <= g:
        return distinct_reached(k, ep, e // ep)          # (the draw all_to_all_s prices "deepep" on)
    nodes = -(-ep // g)
    if t >= nodes:                                       # every group chosen: no limit, the nodes drawn
        return distinct_reached(k, nodes, e / nodes)
    return float(t)


def _deepep_gpus_reached(ep: int, k: int, e: int, g: int, t: int) -> float:
    """The GPUs a token reaches in DeepEP's normal-kernel tests (its own included): ``k`` of the ``E``
    experts drawn over the GPUs of the nodes it may reach (all, or its ``t`` chosen nodes when ``t`` is
    fewer: an approximation there, the top-``k`` of the chosen groups taken as uniform over them)."""
    nodes = -(-ep // g)
    return distinct_reached(k, ep if ep <= g or t >= nodes else t * g, e / ep)


def deepep_normal_nvl_gbps(ep: int, op: str = "dispatch", gpus_per_node: int = 8) -> float:
    """The NVLink bandwidth DeepEP's normal-kernel test prints beside a row's bottleneck bandwidth
    (``tests/legacy/test_internode.py``: ``nvl_recv_bytes``, every token a GPU receives, its own copies too,
    over the same kernel time), from the row (:func:`deepep_normal_rows`). In one node the row is that
    count already (153 GB/s at EP 8). Across nodes a GPU receives ``T x`` the GPUs a token reaches while
    its node is sent ``T x`` the nodes (:func:`deepep_destinations`; the same per GPU by symmetry), so the
    row's bandwidth times their ratio: EP 16 ``43 x 6.52 / 1.993 = 140.7 GB/s``, which DeepEP's maintainer
    gives as the bottleneck (issue #285: "when the RDMA bandwidth reaches 43 GB/s, the NVLink bandwidth will
    exceeds 140 GB/s, making NVLink the bottleneck"); 117 at EP 32 and about 94 at EP 64, where the NIC sets
    the time. 1 in 8 of these bytes is a GPU's own (a token from its forwarder on its own GPU): no link
    carries it. Why :func:`all_to_all_s`'s ``"deepep"`` time is 0.87x DeepEP's at EP 8 and 0.80x at EP 16
    (chapter 18)."""
    rows = deepep_normal_rows(op)
    ep, d = check_int("ep", ep), check_int("gpus_per_node", gpus_per_node)
    if ep not in rows:
        raise ValueError(f"deepep_normal_nvl_gbps: ep must be one of DeepEP's published {sorted(rows)}, "
                         f"got {ep}")
    r = rows[ep]
    gbps = float(r["bandwidth_gbps"])
    if ep <= d:
        return gbps
    k, e, t = int(r["experts_per_token"]), int(r["experts"]), int(r["topk_groups"])
    return gbps * _deepep_gpus_reached(ep, k, e, d, t) / deepep_destinations(ep, k, e, d, t)


def deepep_normal_published_s(ep: int, op: str = "dispatch", gpus_per_node: int = 8) -> float:
    """One DeepEP normal-kernel dispatch (or combine) as its README's legacy V1 table publishes it
    (:func:`deepep_normal_rows`), in seconds: its bottleneck bandwidth turned back into time on the bytes
    DeepEP counts for it, ``tokens x`` :func:`deepep_destinations` ``x hidden x bytes``. DeepEP sends a
    token once to each GPU (in one node) or node (across nodes) holding one of its experts and counts its
    own among them, so its bandwidths are not the model's (:func:`all_to_all_s` prices ``k`` copies a token
    in one node, the remote share across nodes): compare times. EP 8: ``4,096 x 5.29 x 7,392 B / 153 GB/s
    = 1.05 ms``; EP 16: ``4,096 x 1.993 x 7,392 / 43 = 1.40 ms``; EP 32: ``4,096 x 3.61 x 7,392 / 58 = 1.89
    ms``; EP 64: ``4,096 x 4 x 7,392 / 51 = 2.37 ms``. All rows share the test's basis (24 SMs, the best
    chunk sizes, one dispatch call timed with CUDA events, FP8 bytes ``(1 + 4/128) / 2`` of BF16's); the
    EP 16 row keeps DeepEP's first-release value, which its README restored on 2025-04-22 when PR #130
    (IBGDA, a QP a channel) re-measured EP 32 and 64 (its maintainer on the PR: EP 16 "almost the same").
    ``gpus_per_node``: the H800 nodes' 8. ``ep`` must be one of the table's (8, 16, 32, 64). Chapter 18."""
    rows = deepep_normal_rows(op)
    ep = check_int("ep", ep)
    if ep not in rows:
        raise ValueError(f"deepep_normal_published_s: ep must be one of DeepEP's published {sorted(rows)}, "
                         f"got {ep}")
    r = rows[ep]
    dest = deepep_destinations(ep, int(r["experts_per_token"]), int(r["experts"]), gpus_per_node,
                               int(r["topk_groups"]))
    return (int(r["tokens_per_gpu"]) * dest * int(r["hidden"]) * float(r["bytes_per_number"])
            / (float(r["bandwidth_gbps"]) * 1e9))


def ulysses_collectives(model, par, *, batch: int, seq: int, gpu, node, fwd_layers: int, layers: int,
                        grad_accum: int, act_bytes: float) -> list:
    """Ulysses-style context parallelism (``cp_comm="a2a"``; Jacobs et al. 2023, DeepSpeed-Ulysses, Sec. 3.1;
    Transformer Engine's ``AttnFuncWithCPAndQKVOA2A``) as :class:`~llmsizing.network.Collective` rows of group
    ``"cp"``: before the attention one all-to-all turns each rank's ``s / cp`` tokens x all its heads of Q, K,
    V into all ``s`` tokens x ``1 / cp`` of the heads, and after it a second one turns the output back; the
    backward runs the two in reverse (dO out, dQ, dK, dV back). The paper's count for multi-head attention:
    aggregate messages of ``3 N h`` and ``N h`` per layer, ``4 N h / P`` per link; with grouped-query
    attention K and V carry ``kv_heads / heads`` of that. A GPU keeps ``1 / cp`` of its buffer, so it sends
    ``(cp - 1) / cp`` of it (:func:`all_to_all_s`, ranks ``tp`` apart). Exposed in full
    (:func:`~llmsizing.layouts.exposed_by_group`). Chapter "Long context"."""
    from .network import Collective

    cp, tp, local = par.cp, par.tp, seq // par.cp
    q = act_bytes * batch * local * model.heads / tp * model.head_dim           # this rank's Q (and O)
    kv = act_bytes * batch * local * 2 * max(model.kv_heads / tp, 1) * model.head_dim
    out = []
    for name, buf, calls in (("CP all-to-all Q,K,V (forward)", q + kv, fwd_layers),
                             ("CP all-to-all output (forward)", q, fwd_layers),
                             ("CP all-to-all dO (backward)", q, layers),
                             ("CP all-to-all dQ,dK,dV (backward)", q + kv, layers)):
        n = calls * grad_accum
        sent = buf * (cp - 1) / cp
        t = all_to_all_s(buf, cp, gpu, node, stride=tp)
        out.append(Collective(name, "cp", cp, "network" if cp * tp > node.scaleup_domain_gpus else gpu.link,
                              n, buf, n * sent, sent / t / 1e9, 0.0))
    return out
