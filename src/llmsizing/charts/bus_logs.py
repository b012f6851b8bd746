"""Chapter 6's bus-bandwidth figure with the model drawn at the network log's own setup (reader25b M4):
:func:`~llmsizing.charts.many_gpus.render_bus_bandwidth` draws the two-node nccl-tests log beside the model's
curves over 16 nodes; this adds the curve the log's points are to be read against, the model on the log's
own two nodes (the group filling them: 16 ranks, with the log's NICs), and labels the right panel's axis at
node level, where its points are drawn."""

from __future__ import annotations

from .base import View


def render_bus_bandwidth_with_log_setup(node: str = "DGX H100", nodes: int = 16, *,
                                        network_log_nodes: int = 2,
                                        network_log_nic_gbps: float = 25.0, **kwargs) -> View:
    """:func:`~llmsizing.charts.many_gpus.render_bus_bandwidth` (same arguments) plus, on the right, the model
    at the network log's setup: ``network_log_nodes`` nodes like ``node`` with ``network_log_nic_gbps`` GB/s
    of NIC per GPU, the group filling them (:func:`~llmsizing.network.group_link`, at node level as the log's
    points: ``wire=True``). Its summary gains that curve's line. Chapter 6."""
    import numpy as np

    from ..network import bus_bandwidth_gbps, get_node, group_link
    from .many_gpus import BUS_BANDWIDTH_SIZES, render_bus_bandwidth

    view = render_bus_bandwidth(node, nodes, network_log_nodes=network_log_nodes,
                                network_log_nic_gbps=network_log_nic_gbps, **kwargs)
    like_log = get_node(node, inter_node_gbps=network_log_nic_gbps)
    size = like_log.gpus_per_node * network_log_nodes
    link = group_link(like_log.gpu, like_log, size=size)
    sizes = np.array(BUS_BANDWIDTH_SIZES)
    label = (f"the log's setup: {network_log_nodes} such nodes, {size} GPUs, group fills them (model)")
    ax = view.figure.axes[1]
    ax.plot(sizes, bus_bandwidth_gbps("all-reduce", sizes, size, link, wire=True), ":", color="0.1", lw=1.6,
            label=label)
    ax.legend(fontsize=6, frameon=False, loc="upper left")
    ax.set_ylabel("bus bandwidth (GB/s, one way; node level)")
    ax.set_title(f"across nodes (the network): {nodes} nodes, and the log's {network_log_nodes}", fontsize=9,
                 loc="left")
    at = bus_bandwidth_gbps("all-reduce", np.array([2.0**20, 2.0**26, 2.0**30]), size, link, wire=True)
    line = (f"  {label}: {at[0]:,.1f} / {at[1]:,.1f} / {at[2]:,.1f}; ceiling {link.bandwidth_gbps:,.1f} "
            f"({link.link}, {size} GPUs)")
    return View(view.figure, view.summary + "\n" + line)
