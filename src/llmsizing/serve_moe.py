"""Serving a mixture of experts: the pieces :func:`llmsizing.serve.serving` adds for expert parallelism
(chapter 15, "Serving a mixture of experts"; issue 24).

* :func:`check_ep`: which ``ep`` a model and layout allow (a divisor of the routed experts, or at least as many
  GPUs as experts with the rest holding redundant copies, as DeepSeek-V3's 320-GPU decode unit does; a multiple
  of ``tp``; no pipeline stages);
* :func:`all_to_all_s`: an MoE layer's dispatch or combine all-to-all on the network model, checked against
  DeepEP's published latencies (``data/deepep_all_to_all.csv``).

The decode step's expert reads are :func:`llmsizing.inference.moe_expert_bytes_read` (``E (1 - (1 - k/E)^B)``
experts per layer under uniform routing) and the resident weights per GPU
:func:`llmsizing.serve_engine.weights_bytes_per_gpu`.
"""

from __future__ import annotations

from ._validate import check_int, check_number
from .inference import moe_experts_touched
from .model import Model
from .network import Node, collective_time_s, get_node, group_link


def experts_touched(m: Model, tokens: int) -> float:
    """Expected distinct routed experts per MoE layer (:func:`~llmsizing.inference.moe_experts_touched`); 0 dense."""
    return moe_experts_touched(m, tokens) if m.is_moe else 0.0


def check_ep(m: Model, ep, tp: int, pp: int) -> int:
    """``ep`` checked against the model and layout: 1 for a dense model; a divisor of the routed experts and a
    multiple of ``tp`` for a mixture of experts; no pipeline stages with it."""
    ep = check_int("ep", ep, maximum=65536)
    if ep == 1:
        return ep
    if not m.is_moe:
        raise ValueError(f"ep={ep}: expert parallelism needs a mixture of experts; {m.name!r} is dense (ep must be 1)")
    if ep < m.experts and m.experts % ep:
        raise ValueError(f"ep={ep} must divide the {m.experts} routed experts of {m.name!r} (each GPU holds "
                         f"experts / ep of them), or be at least {m.experts} (one expert per GPU, the rest "
                         "holding redundant copies)")
    if ep % tp:
        raise ValueError(f"ep={ep} must be a multiple of tp={tp}: the ep GPUs are ep / tp attention groups of tp")
    if pp > 1:
        raise ValueError(f"ep={ep} with pp={pp}: expert parallelism with pipeline stages is not modelled; "
                         "give pp=1")
    return ep


def all_to_all_s(message_bytes: float, ep: int, gpu, node=None, *, top_k: int | None = None,
                 max_nodes: int | None = None, stride: int = 1) -> float:
    """One all-to-all (an MoE layer's dispatch, or its combine) over ``ep`` GPUs of ``message_bytes`` per GPU
    (its tokens x ``k`` hidden vectors), priced on the network model (:mod:`llmsizing.network`).

    Each GPU keeps ``1 / ep`` of its buffer and sends ``1 / ep`` to each peer, all at once (NCCL runs an
    all-to-all as grouped sends that progress together; DeepSeek's DeepEP kernels likewise), so the latency is
    charged once, not ``ep - 1`` times. Inside one scale-up domain (``ep <= domain``: 8 GPUs of an HGX node)
    the ``(ep - 1) / ep`` that leaves rides the GPU's own link. Across domains the peers in the GPU's own domain
    (``domain - 1`` of them) are reached over NVLink while the other ``(ep - domain) / ep`` of the buffer leaves
    through the GPU's own share of its node's NICs (every GPU of a node sends across at once, so each gets one
    NIC: :func:`~llmsizing.network.group_link` with ranks a domain apart); the two go in parallel and the slower
    sets the time: ``alpha + max(cross bytes / NIC bandwidth, intra bytes / NVLink bandwidth)``, each with
    NCCL's protocol choice (:func:`~llmsizing.network.collective_time_s` of a ``send/recv``).

    Checked against DeepEP's published low-latency kernels on H800 with one 400 Gb/s CX7 NIC per GPU
    (``data/deepep_all_to_all.csv``: 128 tokens, hidden 7,168, top-8, FP8 dispatch, BF16 combine, EP 16 to 256):
    0.90x-0.99x of every internode row (EP 16-256; tests/test_moe_serving.py). At EP 8 the model is 0.65x
    (dispatch) and 0.80x (combine): those kernels sent even a node's own peers through the NIC ("pure RDMA",
    before DeepEP's PR #173), where the model prices NVLink. Chapter 15.

    Training (issue 24, :func:`llmsizing.moe.ep_all_to_all`) adds two keywords, old calls unchanged:
    ``max_nodes`` (with ``top_k``) is DeepSeek-V3's node-limited routing, each token sent to at most that many
    nodes, once per node (the cross-node share becomes :func:`llmsizing.moe.inter_node_share` instead of
    ``(ep - domain) / ep``); ``stride`` places the ``ep`` ranks that far apart (Megatron-Core's expert grid puts
    them ``etp`` apart), so that ``domain / stride`` of them share a scale-up domain."""
    from .catalog import get_gpu

    s = check_number("message_bytes", message_bytes)
    ep = check_int("ep", ep, maximum=65536)
    stride = check_int("stride", stride, maximum=65536)
    if max_nodes is not None:
        max_nodes, top_k = check_int("max_nodes", max_nodes), check_int("top_k", top_k)
    g = get_gpu(gpu)
    n = node if isinstance(node, Node) else get_node(node, gpu=g)
    if ep == 1:
        return 0.0
    d = max(1, n.scaleup_domain_gpus // stride)           # the ep group's GPUs in one scale-up domain
    if ep <= d:
        return collective_time_s("send/recv", s * (ep - 1) / ep, 2, group_link(g, n, size=ep, stride=stride),
                                 protocols=True)
    if max_nodes is None:
        share = (ep - d) / ep
    else:                                                 # ---- node-limited routing (llmsizing.moe)
        from .moe import inter_node_share

        share = inter_node_share(top_k, ep, d, max_nodes)
    cross = collective_time_s("send/recv", s * share, 2, group_link(g, n, size=ep, stride=n.scaleup_domain_gpus),
                              protocols=True)
    intra = collective_time_s("send/recv", s * (d - 1) / ep, 2, group_link(g, n, size=d, stride=stride),
                              protocols=True) if d > 1 else 0.0
    return max(cross, intra)


__all__ = ["all_to_all_s", "check_ep", "experts_touched"]
