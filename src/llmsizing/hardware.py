"""Hardware arithmetic (chapter 6, "Hardware"): link bandwidths in one direction and the default network.

Units follow :mod:`llmsizing.units`: decimal GB/s, and every bandwidth says its direction.
"""

from __future__ import annotations

from ._validate import check_number

#: The network bandwidth per GPU between nodes, one way, in decimal GB/s: one 400 Gb/s InfiniBand NDR (or
#: 400 GbE) adapter per GPU, as in NVIDIA's DGX H100 (eight ConnectX-7 ports for eight GPUs): 400 / 8 = 50 GB/s
#: each way. A parameter of :func:`~llmsizing.comm.communication` (``inter_node_gbps``).
INTER_NODE_GBPS_PER_GPU = 50.0


def link_bandwidth_one_way_gbps(gpu) -> float:
    """The GPU's link to its node-mates (NVLink, Infinity Fabric or PCIe) in one direction, decimal GB/s.

    Datasheets quote NVLink and PCIe bidirectionally (an H100 SXM's "900 GB/s" NVLink is 450 GB/s each way);
    a ring collective sends and receives at the same time, so its time uses the one-way figure."""
    from .catalog import get_gpu

    g = get_gpu(gpu)
    bw = check_number("link_bandwidth_gbps", g.link_bandwidth_gbps, allow_equal=False)
    return bw / 2 if g.link_direction == "bidirectional" else bw
