"""Part II, many GPUs (chapters 6-9): the hardware, and how a run splits over GPUs. Chapter 6, the GPU
landscape (:func:`render_gpu_landscape`, in :mod:`~llmsizing.charts.many_gpus_hardware`), one decode step's
roofline (:func:`render_decode_roofline`, also in chapter 15) and the bus bandwidth of a collective against
its size (:func:`render_bus_bandwidth`); chapter 7, ZeRO's stages and when data parallelism stops scaling
(:func:`render_zero_stages`, :func:`render_dp_scaling`); chapter 8, the pipeline bubble and the parallelism
explorer (:func:`render_pipeline_bubble`, :func:`render_parallel_explorer`, also in chapter 13); chapter 9,
measured collectives against the prediction (:func:`render_collectives_vs_prediction`) and, in
:mod:`~llmsizing.charts.many_gpus_measure`, a timed collective against its alpha-beta line
(:func:`render_collective_time`, the chapter's widget).

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from ..units import GiB
from .base import (DPI, GPU_COLORS, FixedView, View, _fast_stacked_columns, _fixed_figure, _grid,
                   _inch_margins, _kept_legend, _log_axis, _log_scale, _short_number, _stage_memory_columns,
                   capacity_line, figure_axes, new_figure)
from .pipeline import _KIND_COLORS, SCHEDULE_PANELS, render_pipeline_schedules  # noqa: F401  (chapter 8)
from .many_gpus_measure import (COLLECTIVE_TIME_DEFAULT, COLLECTIVE_TIME_SIZES,  # noqa: F401  (chapter 9)
                                render_collective_time)
from .many_gpus_measure import _bytes_text, _size_axis, _time_text  # noqa: F401
from .many_gpus_hardware import (_LANDSCAPE_LABEL_OFFSETS, _ROOFLINE_NAMED,  # noqa: F401  (chapter 6)
                                 _ROOFLINE_OTHERS, _landscape_groups, render_gpu_landscape)


# =========================================================================== chapter 6: hardware
#: Message sizes (bytes) of the model curves of :func:`render_bus_bandwidth`: 8 B to 8 GiB, as nccl-tests
#: sweeps.
BUS_BANDWIDTH_SIZES = tuple(2.0 ** (k / 4) for k in range(12, 133))


def render_bus_bandwidth(node: str = "DGX H100", nodes: int = 16,
                         nvlink_log: str = "a100_sxm4_8gpu_nvlink_oci_all_reduce.txt",
                         nvlink_log_node: str = "DGX A100 (40GB)",
                         network_log: str = "h100_2x8_gcp_a3mega_tcpxo_all_reduce.txt",
                         network_log_nodes: int = 2, network_log_nic_gbps: float = 25.0) -> View:
    """Chapter 6: the bus bandwidth of an all-reduce against its message size, the model's curves
    (:func:`~llmsizing.network.bus_bandwidth_gbps` on the links of :func:`~llmsizing.network.group_link`) with
    the rows of two published nccl-tests logs on top (:func:`~llmsizing.alpha_beta.parse_nccl_tests`).

    Left, inside one node: the ``node``'s GPUs all-reducing over their scale-up link, the same for the node of
    ``nvlink_log`` (``nvlink_log_node``), and that log's busbw as nccl-tests printed it. Right, across
    ``nodes`` nodes of ``node``: an FSDP-like group filling whole nodes (all the node's NICs per GPU) and a
    data-parallel group under ``tp`` = GPUs per node (one NIC per GPU); the same FSDP-like group on nodes like
    the log's (``network_log_nic_gbps`` per GPU: GCP A3 Mega has 8 x 200 Gb/s for 8 GPUs); and
    ``network_log``'s rows at node level, :func:`~llmsizing.alpha_beta.node_level_busbw` (algbw x 2(N-1)/N
    over ``network_log_nodes``), the figure ``data/links.csv`` fitted the network's achievable fraction on;
    the model's curves there are at node level too (``wire=True``: :func:`~llmsizing.network.wire_factor`'s
    bytes, hierarchical for the groups that fill the nodes, over the time).
    Summary: each curve at 1 MiB, 64 MiB and 1 GiB and its ceiling (the link's achievable bandwidth)."""
    import numpy as np

    from .._validate import check_int, check_number
    from ..alpha_beta import node_level_busbw, parse_nccl_tests, published_log
    from ..network import bus_bandwidth_gbps, get_node, group_link

    nd = get_node(node)
    n_nodes = check_int("nodes", nodes, minimum=2, maximum=65536)
    log_nodes = check_int("network_log_nodes", network_log_nodes, minimum=2)
    check_number("network_log_nic_gbps", network_log_nic_gbps, allow_equal=False)
    nv_node = get_node(nvlink_log_node)
    nv_log = parse_nccl_tests(published_log(nvlink_log))
    net_log = parse_nccl_tests(published_log(network_log))
    like_log = get_node(node, inter_node_gbps=network_log_nic_gbps)
    per = nd.gpus_per_node
    sizes = np.array(BUS_BANDWIDTH_SIZES)
    # (panel, label, node, group size, stride, colour, style)
    curves = [(0, f"{nd.name}: {per} GPUs in the node (model)", nd, per, 1,
               GPU_COLORS.get(nd.gpu, "0.2"), "-"),
              (0, f"{nv_node.name}: {nv_node.gpus_per_node} GPUs (model)", nv_node, nv_node.gpus_per_node, 1,
               GPU_COLORS.get(nv_node.gpu, "0.5"), "--"),
              (1, f"{nd.name} x {n_nodes}: group fills the nodes, {per} NICs per GPU (model)", nd,
               per * n_nodes, 1, GPU_COLORS.get(nd.gpu, "0.2"), "-"),
              (1, f"{nd.name} x {n_nodes}: data parallel under tp={per}, 1 NIC per GPU (model)", nd,
               n_nodes, per, "#E69F00", "-"),
              (1, f"nodes like the log's ({per} x {network_log_nic_gbps * 8:g} Gb/s) x {n_nodes}, group "
                  f"fills them (model)", like_log, per * n_nodes, 1, "0.45", "--")]
    fig, axes = new_figure(9.6, 3.9, ncols=2)
    lines = ["all-reduce bus bandwidth (GB/s) at 1 MiB / 64 MiB / 1 GiB, and the ceiling:"]
    for panel, label, nd_c, size, stride, color, style in curves:
        link = group_link(nd_c.gpu, nd_c, size=size, stride=stride)
        y = bus_bandwidth_gbps("all-reduce", sizes, size, link, wire=panel == 1)
        axes[panel].plot(sizes, y, style, color=color, lw=1.5, label=label)
        at = bus_bandwidth_gbps("all-reduce", np.array([2.0**20, 2.0**26, 2.0**30]), size, link,
                                wire=panel == 1)
        where = f"{size} GPUs, {link.per_domain} a node" if link.across else f"{size} GPUs"
        lines.append(f"  {label}: {at[0]:,.1f} / {at[1]:,.1f} / {at[2]:,.1f}; ceiling "
                     f"{link.bandwidth_gbps:,.1f} ({link.bound_by or link.link}; {where})")
    nv = nv_log[nv_log["size_bytes"] > 0]
    axes[0].scatter(nv["size_bytes"], nv["busbw_gbps"], s=14, color=GPU_COLORS.get(nv_node.gpu, "0.5"),
                    edgecolor="0.15", lw=0.5, zorder=3, label=f"nccl-tests log: {nvlink_log}")
    net = net_log[net_log["size_bytes"] > 0]
    node_bus = [node_level_busbw(a, nodes=log_nodes) if a > 0 else 0.0 for a in net["algbw_gbps"]]
    axes[1].scatter(net["size_bytes"], node_bus, s=14, color="0.45", edgecolor="0.15", lw=0.5, zorder=3,
                    label=f"nccl-tests log, node level: {network_log}")
    lines.append(f"  {nvlink_log}: {len(nv)} rows, busbw {nv['busbw_gbps'].iloc[-1]:,.1f} GB/s at "
                 f"{nv['size_bytes'].iloc[-1] / 2**30:g} GiB")
    lines.append(f"  {network_log}: {len(net)} rows, node-level busbw {node_bus[-1]:,.1f} GB/s at "
                 f"{net['size_bytes'].iloc[-1] / 2**30:g} GiB (nccl-tests printed "
                 f"{net['busbw_gbps'].iloc[-1]:,.1f} over {int(net['n_ranks'].iloc[0])} ranks)")
    titles = ("inside one node (scale-up link)",
              f"across nodes (the network), {n_nodes} nodes, at node level")
    for ax, title in zip(axes, titles):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=10)
        ax.set_ylim(0.01, 1000)
        ax.set_xlim(sizes[0], sizes[-1])
        ax.set_xticks([2.0**k for k in (3, 10, 20, 30)], ["8 B", "1 KiB", "1 MiB", "1 GiB"])
        ax.set_xlabel("message size S (bytes of the all-reduced buffer)")
        _grid(ax, lw=0.4, alpha=0.5)
        ax.set_title(title, fontsize=9, loc="left")
        ax.legend(fontsize=6, frameon=False, loc="upper left")
    axes[0].set_ylabel("bus bandwidth (GB/s, one way per GPU)")
    return View(fig, "\n".join(lines))


#: Batch sizes on the x axis of :func:`render_decode_roofline`.
DECODE_BATCHES = tuple(2**i for i in range(11))


def render_decode_roofline(model="llama-3-8b", gpu: str = "H100 SXM", context: int = 4096, batch: int = 1,
                           weights: str = "bf16", *, into: Figure | None = None) -> View:
    """Chapter 6: one decode step's two lower bounds against the batch size: the time to read the weights and
    every sequence's KV cache from HBM, and the time to do its FLOPs at the dense bf16 peak
    (:func:`llmsizing.hardware.decode_step_roofline`). The chosen ``batch`` is marked."""
    import matplotlib.ticker

    from ..catalog import get_gpu
    from ..hardware import decode_compute_bound_batch, decode_resident_batch_limit, decode_step_roofline

    chosen = decode_step_roofline(model, gpu, batch=batch, context=context, weights=weights)
    batches = sorted(set(DECODE_BATCHES) | {chosen.batch})
    rs = [decode_step_roofline(model, gpu, batch=b, context=context, weights=weights) for b in batches]
    flip = decode_compute_bound_batch(model, gpu, context=context, weights=weights)
    capacity = get_gpu(gpu).memory_bytes
    fig, ax = _inch_margins(7.2, 3.5, left=0.75, bottom=0.55, top=0.3, right=0.2, into=into, keep_log="xy")
    try:
        limit = decode_resident_batch_limit(model, gpu, context=context, weights=weights)
    except ValueError:   # the weights alone exceed the GPU: every batch is shaded
        limit = 0.0
    if limit < batches[-1] * 2**0.5:   # weights + KV cache exceed one GPU: the bound is moot there (ch3)
        ax.axvspan(max(limit, batches[0] / 2**0.5), batches[-1] * 2**0.5, color="0.9", zorder=0,
                   label="weights + KV cache exceed one GPU")
    ms = 1e3
    ax.plot(batches, [r.memory_time_s * ms for r in rs], color="#0072B2", lw=1.8,
            label="read weights + KV cache")
    ax.plot(batches, [r.compute_time_s * ms for r in rs], color="#D55E00", lw=1.8,
            label="FLOPs at dense peak")
    ax.scatter([chosen.batch], [chosen.time_s * ms], color="k", s=30, zorder=3,
               label=f"batch {chosen.batch}: {chosen.bound}-bound")
    _log_scale(ax.xaxis, 2)
    ax.set_xlim(batches[0] / 2**0.5, batches[-1] * 2**0.5)
    ax.set_xticks(batches, [f"{b:g}" for b in batches], fontsize=7)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    times = [t * ms for r in rs for t in (r.memory_time_s, r.compute_time_s)]
    _log_axis(ax.yaxis, min(times), max(times), _short_number)
    ax.set_xlabel("sequences decoded together (batch)")
    ax.set_ylabel("lower bound on one step (ms)")
    _grid(ax, lw=0.4, alpha=0.5)
    ax.set_title(f"{chosen.model} on {chosen.gpu}, {weights} weights, {context:,}-token context", fontsize=9,
                 loc="left")
    # the entries' labels fix their styles
    _kept_legend(ax, ("decode roofline", *ax.get_legend_handles_labels()[1]),
                 lambda: ax.legend(fontsize=7.5, frameon=False, loc="upper left"))
    flip_text = (f"compute-bound from a batch of about {flip:,.0f}" if flip is not None
                 else "never compute-bound: each sequence's KV cache keeps the intensity below the ridge "
                      "point")
    lines = [f"{chosen.model} on {chosen.gpu}, {weights} weights, context {context:,}, batch {chosen.batch}:",
             f"  reads {chosen.bytes_read / GiB:,.2f} GiB and does {chosen.flops / 1e12:,.3f} TFLOP per step",
             f"  memory bound {chosen.memory_time_s * ms:,.3f} ms, compute bound "
             f"{chosen.compute_time_s * ms:,.4f} ms -> {chosen.bound}-bound, at most "
             f"{chosen.tokens_per_s:,.0f} tokens/s",
             f"  intensity {chosen.intensity_flops_per_byte:,.1f} FLOP/byte vs ridge "
             f"{chosen.ridge_flops_per_byte:,.0f}; {flip_text}"]
    if chosen.resident_bytes > capacity:
        lines.append(f"  (weights + KV cache, {chosen.resident_bytes / GiB:,.1f} GiB, exceed one "
                     f"{chosen.gpu}: see chapter 3)")
    return FixedView(fig, "\n".join(lines))


# ========================================================================== chapter 7: data parallelism, ZeRO
def render_zero_stages(model="llama-3-8b", dp: int = 8, precision: str = "bf16-mixed",
                       optimizer: str = "adamw", gpu: str = "H100 SXM", *,
                       into: Figure | None = None) -> View:
    """Model states on each GPU for ZeRO stages 0 (DDP), 1, 2 and 3 (FSDP full-shard) over ``dp`` GPUs:
    weights, gradients and optimizer bytes (master copy included), all from
    :func:`~llmsizing.gpu_states.model_states`, against ``gpu``'s memory. ``model`` may also be a bare
    parameter count (an int, as in the ZeRO paper's 7.5B example;
    :func:`~llmsizing.memory.model_states_for_params`). Chapter 7."""
    import numpy as np

    from .._validate import check_int
    from ..catalog import get_gpu, resolve_model
    from ..memory import model_states, model_states_for_params
    from ..parallel import Parallel
    from ..units import GB, fmt_count

    dp = check_int("dp", dp, maximum=1 << 20)
    g = get_gpu(gpu)
    if isinstance(model, (int, np.integer)) and not isinstance(model, (bool, np.bool_)):
        n = check_int("model", model)
        name = f"{fmt_count(n)} parameters"
        states = [model_states_for_params(n, precision=precision, optimizer=optimizer,
                                          parallel=Parallel(dp=dp, zero=z)) for z in range(4)]
    else:
        m = resolve_model(model)
        name = f"{m.name} ({fmt_count(m.n_params)} params)"
        states = [model_states(m, precision=precision, optimizer=optimizer, parallel=Parallel(dp=dp, zero=z))
                  for z in range(4)]
    labels = ["ZeRO-0\n(DDP)", "ZeRO-1\n(optimizer)", "ZeRO-2\n(+ gradients)", "ZeRO-3 / FSDP\n(+ weights)"]
    stacks = {"weights": [s.weights_bytes for s in states], "gradients": [s.gradients_bytes for s in states],
              "optimizer": [s.optimizer_bytes for s in states]}
    fig, ax = _fixed_figure(7.2, 3.3, left=0.1, right=0.8, bottom=0.2, top=0.88, into=into)
    _fast_stacked_columns(ax, labels, stacks)
    ax.tick_params(axis="x", labelsize=8)
    capacity_line(ax, g.memory_gib, g.name)
    tops = [s.total_bytes / GiB for s in states]
    ax.set_ylim(0, 1.12 * max(max(tops), g.memory_gib))
    for i, t in enumerate(tops):
        ax.text(i, t, f"{t:,.1f}", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("GiB per GPU (model states)")
    ax.set_title(f"{name}, {precision} + {optimizer}, dp = {dp}", fontsize=9.5, loc="left")
    lines = [f"{name}, {precision} + {optimizer}, model states per GPU over dp = {dp}:"]
    for z, s in enumerate(states):
        fits = "fits" if s.total_bytes <= g.memory_bytes else "does NOT fit"
        lines.append(f"  ZeRO-{z}: weights {s.weights_bytes / GiB:8,.2f} + gradients "
                     f"{s.gradients_bytes / GiB:8,.2f} + optimizer {s.optimizer_bytes / GiB:8,.2f} = "
                     f"{s.total_bytes / GiB:8,.2f} GiB ({s.total_bytes / GB:,.2f} GB, "
                     f"{s.bytes_per_param:.3g} B/param): {fits} in a {g.name}'s {g.memory_gib:.1f} GiB "
                     "before activations")
    return FixedView(fig, "\n".join(lines))


#: The three placements :func:`render_dp_scaling` compares: (panel title, GPUs per node to override the node
#: with, or ``None`` for the catalogued node; ``"inside"`` keeps the group in one scale-up domain, ``"fill"``
#: spreads it over whole nodes, ``"one"`` puts one of its GPUs in each node, as data parallelism under
#: ``tp = 8`` does).
DP_SCALING_PANELS = (("inside one node", "inside"), ("across nodes, group fills them", "fill"),
                     ("across nodes, one GPU per node", "one"))

# (ZeRO-1 has DDP's bytes, but its weight all-gather hides behind the next step's first forward)
_ZERO_STYLES = {0: ("DDP", "#0072B2", "-"), 1: ("ZeRO-1", "#009E73", "-."), 2: ("ZeRO-2", "#E69F00", "--"),
                3: ("ZeRO-3 / FSDP", "#D55E00", "-")}


def _coinciding(drawn: dict, tol: float = 0.005) -> list:
    """The names of the largest set of lines (``name -> ys``) within ``tol`` of each other at every point,
    if two or more coincide, else ``[]``: lines drawn over each other, which a reader cannot tell apart
    (chapter 7's data-parallel scaling figure)."""
    best = []
    for ref in drawn.values():
        same = [n for n, ys in drawn.items() if all(abs(a - b) <= tol for a, b in zip(ys, ref))]
        best = same if len(same) > len(best) else best
    return best if len(best) > 1 else []


def render_dp_scaling(model="llama-3-8b", gpu: str = "H100 SXM", global_batch: int = 512, seq: int = 4096,
                      batch: int = 1, kernel_efficiency: float | None = None, overlap: float | None = None,
                      max_dp: int = 512, node=None) -> View:
    """When data parallelism stops scaling: the busy fraction of each GPU, compute over step
    (:attr:`~llmsizing.layouts.StepTime.efficiency` of :func:`~llmsizing.layouts.step_time`), against
    ``dp`` at a fixed ``global_batch`` (sequences of ``seq`` tokens, micro-batch ``batch``, the rest gradient
    accumulation), for DDP, ZeRO-1, ZeRO-2 and ZeRO-3, in three placements on ``node``'s network (default:
    the GPU's node in ``data/nodes.csv``; :data:`DP_SCALING_PANELS`): the group inside one node (its scale-up
    link, ``dp`` up to the node's GPUs), the group filling whole nodes (``k`` = all the node's GPUs share its
    NICs: :func:`~llmsizing.network.group_link`), and one GPU per node (one NIC per GPU). The step is chapter
    8's step model at ``kernel_efficiency`` (default the calibrated one): each collective hides only behind
    its own window (:func:`~llmsizing.layouts.exposed_by_group`; DDP's all-reduce behind the last
    micro-batch's backward). A number for ``overlap`` (0 to 1) draws :func:`~llmsizing.layouts.step_time`'s
    single share instead (``1``: the whole step as the window, an upper bound). Chapter 7."""
    from dataclasses import replace

    from .._validate import check_fraction, check_int, check_number
    from ..catalog import get_gpu, resolve_model
    from ..hardware import kernel_efficiency as default_efficiency
    from ..layouts import step_time
    from ..network import get_node, group_link
    from ..parallel import Parallel

    m = resolve_model(model)
    g = get_gpu(gpu)
    gb = check_int("global_batch", global_batch, maximum=1 << 20)
    b = check_int("batch", batch)
    top = check_int("max_dp", max_dp, maximum=1 << 16)
    seq = check_int("seq", seq)
    eff = default_efficiency(g) if kernel_efficiency is None else check_fraction("kernel_efficiency",
                                                                                 kernel_efficiency)
    if b > gb:
        raise ValueError(f"batch={b} must be <= global_batch={gb}: the micro-batch is part of the global "
                         "batch")
    if overlap is not None:                                           # validated before any work
        overlap = check_number("overlap", overlap, maximum=1.0)
    how = "overlap per collective" if overlap is None else f"overlap {overlap:.0%}"
    nd = get_node(node, g)
    per_node = nd.scaleup_domain_gpus
    one = replace(nd, name=f"{nd.name}, one GPU per node", gpus_per_node=1, scaleup_domain_gpus=1,
                  nics_per_node=1, nic_gbits=nd.nic_gbps_per_gpu * 8)
    every = [d for d in (2 ** k for k in range(1, 17)) if d <= top and gb % (d * b) == 0]
    panels = []
    for title, kind in DP_SCALING_PANELS:
        if kind == "inside":
            dps = [d for d in every if d <= per_node]
        elif kind == "fill":
            dps = [d for d in every if d > per_node and d % per_node == 0]
        else:
            dps = list(every)
        panels.append((title, kind, dps, nd if kind != "one" else one))
    if not any(dps for _, _, dps, _ in panels):
        raise ValueError(f"max_dp={top} and global_batch={gb}: no power-of-two dp >= 2 up to max_dp divides "
                         f"the global batch into micro-batches of {b}")
    fig = Figure(figsize=(8.4, 3.2), dpi=DPI)
    axes = fig.subplots(1, len(panels), sharey=True)
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.24, top=0.78, wspace=0.08)
    lines = [f"{m.name} on {g.name} ({nd.name}) at kernel efficiency {eff:.0%}, global batch {gb} x {seq:,} "
             f"tokens, micro-batch {b}, " + ("each collective hidden only behind its own window (step_time)"
                                             if overlap is None else how) + ": busy fraction by dp"]
    for ax, (title, kind, dps, node_k) in zip(axes, panels):
        if not dps:
            ax.set_axis_off()
            ax.set_title(f"{title}\n(no dp in range)", fontsize=8)
            lines.append(f"  {title}: no dp in range")
            continue
        link = group_link(g, node_k, size=max(dps), stride=1)
        # filling whole nodes, the bandwidth rises with dp until the NICs, not NVLink's phase, bind
        low = group_link(g, node_k, size=min(dps), stride=1).bandwidth_gbps
        bw = (f"{link.bandwidth_gbps:,.0f}" if f"{low:,.0f}" == f"{link.bandwidth_gbps:,.0f}"
              else f"{low:,.0f} to {link.bandwidth_gbps:,.0f}")
        lines.append(f"  {title} ({link.link}, {bw} GB/s per GPU one way, achieved):")
        drawn = {}
        for z, (name, color, style) in _ZERO_STYLES.items():
            ys = []
            for d in dps:
                ys.append(step_time(m, g, Parallel(dp=d, zero=z), batch=b, seq=seq, grad_accum=gb // (d * b),
                                    kernel_efficiency=eff, overlap=overlap, node=node_k).efficiency)
            ax.plot(dps, ys, style, color=color, marker="o", markersize=3, label=name)
            drawn[name] = ys
            lines.append(f"    {name:<14s}" + "  ".join(f"dp={d}: {y:.0%}" for d, y in zip(dps, ys)))
        hidden = _coinciding(drawn)             # lines drawn over each other: say which, or they look missing
        if hidden:
            said = (f"all {len(hidden)} lines coincide" if len(hidden) == len(drawn)
                    else "one line: " + ", ".join(hidden))
            ax.text(0.5, 0.9, said, transform=ax.transAxes, ha="center", va="top", fontsize=7, color="0.3")
        ax.set_xscale("log", base=2)
        ax.set_xticks(dps, [str(d) for d in dps], fontsize=7, rotation=90 if len(dps) > 6 else 0)
        ax.minorticks_off()
        ax.set_ylim(0, 1.05)
        ax.axhline(0.2, color="0.6", lw=0.8, ls=":")
        ax.set_title(f"{title}\n{link.link}, {bw} GB/s per GPU", fontsize=8)
        ax.set_xlabel("data-parallel GPUs (dp)", fontsize=8)
    axes[0].set_ylabel("busy fraction (compute / step)", fontsize=8)
    next(ax for ax in axes if ax.axison).legend(fontsize=7, frameon=False, loc="lower left")
    fig.suptitle(f"{m.name} on {g.name}: global batch {gb} x {seq:,} tokens, micro-batch {b}, kernel "
                 f"efficiency {eff:.0%}, {how}", fontsize=9, x=0.07, y=0.99, ha="left")
    return FixedView(fig, "\n".join(lines))


# =========================================================================== chapter 8: model parallelism
def render_pipeline_bubble(pps=(2, 4, 8), interleaved_pp: int = 8, virtual_stages: int = 2,
                           max_microbatches: int = 64) -> View:
    """The pipeline bubble of 1F1B (:func:`~llmsizing.parallel.pipeline_bubble`, ``(p - 1) / m``) against the
    micro-batches per step ``m``, one line per ``pps``, plus the interleaved schedule with ``virtual_stages``
    chunks for ``interleaved_pp`` stages (``(p - 1) / (v m)``). Drawn as the share of the step spent idle,
    ``b / (1 + b)``. Chapter 8."""
    import numpy as np

    from .._validate import check_int, check_sequence
    from ..parallel import MAX_PP, pipeline_bubble

    # (a bare int is refused naming pps, not "'int' object is not iterable")
    pps = [check_int("pps", p, maximum=MAX_PP) for p in check_sequence("pps", pps, example="(2, 4, 8)")]
    p_i = check_int("interleaved_pp", interleaved_pp, maximum=MAX_PP)
    v = check_int("virtual_stages", virtual_stages, maximum=64)
    top = check_int("max_microbatches", max_microbatches, minimum=2, maximum=4096)
    ms = np.unique(np.geomspace(1, top, 60).round().astype(int))
    fig, ax = new_figure(7.0, 3.4)
    colors = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#555555"]
    lines = ["share of a step the pipeline sits idle, bubble/(1 + bubble), bubble = (p-1)/(v m):"]
    marks = [m for m in (4, 8, 16, 32) if m <= top]
    for i, p in enumerate(pps):
        b = np.array([pipeline_bubble(p, int(m)) for m in ms])
        ax.plot(ms, 100 * b / (1 + b), color=colors[i % len(colors)], lw=1.8, label=f"1F1B, p = {p}")
        lines.append(f"  1F1B p={p:<3d} " + ", ".join(
            f"m={m}: {pipeline_bubble(p, m) / (1 + pipeline_bubble(p, m)):.0%}" for m in marks))
    # the interleaved schedule runs micro-batches in groups of p (Megatron-LM; pipeline_schedule), so only
    # multiples of p are drawn and listed
    ms_i = np.arange(p_i, top + 1, p_i)
    b = np.array([pipeline_bubble(p_i, int(m), v) for m in ms_i])
    ax.plot(ms_i, 100 * b / (1 + b), color="0.2", lw=1.6, ls="--", marker="o", ms=2.5,
            label=f"interleaved, p = {p_i}, v = {v} (m a multiple of p)")
    marks_i = [m for m in marks if m % p_i == 0]
    lines.append(f"  interleaved p={p_i}, v={v}: " + (", ".join(
        f"m={m}: {pipeline_bubble(p_i, m, v) / (1 + pipeline_bubble(p_i, m, v)):.0%}" for m in marks_i)
        or f"no multiple of {p_i} up to m={top}"))
    ax.set_xscale("log", base=2)
    ax.set_xlim(1, top)
    ticks = [2**k for k in range(int(np.log2(top)) + 1)]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_ylim(0, 100)
    ax.set_xlabel("micro-batches per step (m)")
    ax.set_ylabel("% of the step idle (bubble)")
    ax.grid(alpha=0.3, lw=0.5)
    ax.legend(fontsize=8, frameon=False)
    # p - 1 idle slots against m slots of work: the bubble is their ratio (the title once said "(p - 1)/m
    # idle slots per m micro-batches", the ratio counted per micro-batch twice)
    ax.set_title("Pipeline bubble: p - 1 idle slots per m micro-batches of work", fontsize=9, loc="left")
    return View(fig, "\n".join(lines))


def render_parallel_explorer(model="llama-3-8b", gpu: str = "H100 SXM", tp: int = 1, pp: int = 1, dp: int = 8,
                             zero: int = 1, sp: bool = False, virtual_stages: int = 1, offload: str = "none",
                             recompute: str = "selective", batch: int = 1, seq: int = 4096,
                             grad_accum: int = 8, kernel_efficiency: float | None = None,
                             gpus_per_node: int | None = None, async_tp: bool = False, node=None, *,
                             tp_backward_overlap: bool = False, into: Figure | None = None) -> View:
    """The parallelism explorer (chapter 8; chapter 13 reuses it): one layout's per-GPU memory, stage by
    stage, against the GPU's capacity, and its step time (:func:`~llmsizing.layouts.step_time`): compute on
    the slowest pipeline stage at ``kernel_efficiency`` (default the calibrated one), the pipeline bubble, and
    each group's communication drawn twice, in full (pale) and the part the step waits for (solid; the
    per-group rules of :func:`~llmsizing.layouts.exposed_by_group`, ``async_tp`` hiding tensor parallelism;
    ``tp_backward_overlap`` hiding the backward's tensor-parallel collectives behind the column-parallel
    layers' GEMMs, as Megatron-LM's default path does; off by default, as ``step_time`` with no stack named).
    The title reports the MFU that results. ``grad_accum`` is the number of micro-batches per step (a
    pipeline's micro-batches). An impossible layout raises the library's ``ValueError``, which the widget
    shows."""
    import numpy as np

    from ..catalog import get_gpu, resolve_model
    from ..layouts import step_time
    from ..memory import training_memory
    from ..parallel import Parallel
    from ..units import fmt_bytes, fmt_gib
    from .base import EXPLORER_TIME_COLORS, _fast_hbars

    m = resolve_model(model)
    g = get_gpu(gpu)
    par = Parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=sp, virtual_stages=virtual_stages, offload=offload)
    kw = dict(batch=batch, seq=seq, grad_accum=grad_accum, recompute=recompute, parallel=par)
    tm = training_memory(m, **kw)
    st = step_time(m, g, par, batch=batch, seq=seq, grad_accum=grad_accum,
                   kernel_efficiency=kernel_efficiency, recompute=recompute, gpus_per_node=gpus_per_node,
                   async_tp=async_tp, node=node, tp_backward_overlap=tp_backward_overlap)
    comm, compute, bubble = st.communication, st.compute_s, st.bubble
    exposed = st.exposed_by_group_s

    def build(fig):
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.25, top=0.9, wspace=0.45)
        return fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.25, 1]})

    fig, (ax, ax_t) = figure_axes(7.9, 3.4, into, ("parallel explorer",), build)
    _stage_memory_columns(ax, tm, g)
    ax.set_title(f"{m.name}: tp={par.tp} pp={par.pp} dp={par.dp} ZeRO-{par.zero}"
                 + (" SP" if par.sp else "") + (f" v={par.virtual_stages}" if par.virtual_stages > 1 else "")
                 + (f" offload={par.offload}" if par.offload != "none" else ""), fontsize=8.5, loc="left")

    # full bars, pale for the communication; the exposed share drawn solid over them
    names = list(st.parts())
    full = [st.parts()[k] for k in names]
    colors = [EXPLORER_TIME_COLORS[k] if k in ("compute", "pipeline bubble") else "0.85" for k in names]
    ys = np.arange(len(names))
    _fast_hbars(ax_t, ys, full, colors=colors)
    groups = [k for k in names if k in exposed]
    _fast_hbars(ax_t, [names.index(k) for k in groups], [exposed[k] for k in groups], height=0.5,
                colors=[EXPLORER_TIME_COLORS[k] for k in groups])
    ax_t.set_yticks(ys, [n if n in ("compute", "pipeline bubble") else f"{n} comm." for n in names],
                    fontsize=8)
    ax_t.invert_yaxis()
    ax_t.set_xlabel("seconds per step (grey: all comm.; colour: exposed)", fontsize=8)
    switch = "async TP" if async_tp else "backward TP overlap" if tp_backward_overlap else None
    if switch and "tp" in names and not st.comm_by_group_s.get("tp"):    # the switch moves nothing: say why
        ax_t.text(0.02, names.index("tp"), f"{switch}: no tensor-parallel traffic to hide at tp={par.tp}",
                  transform=ax_t.get_yaxis_transform(), fontsize=7, va="center", color="0.25")
    ax_t.set_title(f"{g.name}: MFU {st.mfu:.0%} (kernels at {st.kernel_efficiency:.0%} of peak)",
                   fontsize=8.5, loc="left")

    fits = tm.total_bytes <= g.memory_bytes
    lines = [f"{m.name} on {par.gpus} x {g.name} (tp={par.tp}, pp={par.pp}, dp={par.dp}, ZeRO-{par.zero}"
             f"{', SP' if par.sp else ''}"
             f"{f', {par.virtual_stages} virtual stages' if par.virtual_stages > 1 else ''}"
             f"{f', offload={par.offload}' if par.offload != 'none' else ''}), micro-batch {batch} x {seq:,} "
             f"tokens, {grad_accum} micro-batches per step, recompute={recompute}:",
             f"  most loaded GPU: stage {tm.stage}, {fmt_gib(tm.total_bytes)} (peak {fmt_gib(tm.peak_bytes)} "
             f"in the {tm.peak_phase} + allowance) -> {'fits' if fits else 'does NOT fit'} in "
             f"{g.memory_gib:.1f} GiB"]
    if not fits:
        lines.append("    (to fit: raise dp with ZeRO, add tp or pp, recompute, or lower the micro-batch)")
    if par.offload != "none":
        lines.append(f"  host memory for offloaded states: {fmt_gib(tm.host_bytes)} per GPU, "
                     f"{fmt_gib(tm.host_bytes * min(comm.node.gpus_per_node, par.gpus))} per node of "
                     f"{comm.node.gpus_per_node}")
    for c in comm.collectives:
        lines.append(f"  {c.collective:<46s} {c.calls:>5d} x {fmt_bytes(c.message_bytes):>10s} over "
                     f"{c.link:<10s} {c.time_s * 1e3:>9.1f} ms")
    by = st.comm_by_group_s
    lines += [f"  compute {compute:.3f} s (slowest stage) + bubble {st.bubble_s:.3f} s ({bubble:.0%} of "
              f"compute) at kernel efficiency {st.kernel_efficiency:.0%}",
              "  communication, exposed of all: " + ", ".join(
                  f"{k} {exposed[k]:.3f} of {by[k]:.3f} s" for k in ("dp", "tp", "pp") if by[k] > 0)
              + (" (none)" if not st.comm_s else "") + (" (async TP)" if async_tp else "")
              + ("" if async_tp or not tp_backward_overlap else " (backward TP overlapped)" if by["tp"] > 0
                 else f" (backward TP overlap: no tensor-parallel traffic at tp={par.tp})"),
              f"  step time {st.step_s:.3f} s -> MFU {st.mfu:.0%}, {st.tokens_per_s:,.0f} tokens/s"]
    return FixedView(fig, "\n".join(lines))


# =========================================================================== chapter 9: measure the split
def render_collectives_vs_prediction(world: int = 2) -> View:
    """Measured against predicted communication per GPU and step, for the runs of
    ``tools/measure_memory.py dist`` on ``world`` ranks (2 or 4; TP and SP ran on 2): bytes each GPU sends at
    ring cost, measured (what ``torch.distributed`` issued) next to :func:`~llmsizing.comm.communication`. Two
    panels, since tensor parallelism moves activations (KiB here) and data parallelism the model (MiB).
    Chapter 9."""
    from .._validate import check_int
    from ..dist_compare import compare_collectives

    world = check_int("world", world)
    cmp = compare_collectives()
    cmp = cmp[cmp["world_size"] == world]
    if cmp.empty:
        raise ValueError(f"world={world}: no measured run on that many ranks (measured: 2, 3, 4)")
    fig, axes = new_figure(8.4, 3.4, ncols=2)
    panels = ((axes[0], cmp[~cmp["layout"].isin(["tp", "sp"])], 2**20, "MiB"),
              (axes[1], cmp[cmp["layout"].isin(["tp", "sp"])], 2**10, "KiB"))
    lines = []
    for ax, part, unit, name in panels:
        labels = list(part["layout"])
        ys = range(len(labels))
        ax.barh([y + 0.2 for y in ys], part["predicted_bytes_per_gpu"] / unit, height=0.38, color="#0072B2",
                label="library (communication)")
        ax.barh([y - 0.2 for y in ys], part["measured_bytes_per_gpu"] / unit, height=0.38, color="#E69F00",
                label="torch.distributed (measured)")
        ax.set_yticks(list(ys), labels)
        ax.invert_yaxis()
        ax.set_xlabel(f"{name} sent per GPU per step (ring cost)")
        for y, (_, r) in zip(ys, part.iterrows()):
            ax.text(r["measured_bytes_per_gpu"] / unit, y - 0.2, f" {r['ratio']:.2f}x", va="center",
                    fontsize=8)
            lines.append(f"{r['layout']} x{world}: measured {r['measured_bytes_per_gpu'] / unit:,.1f} "
                         f"{name}, library {r['predicted_bytes_per_gpu'] / unit:,.1f} {name} "
                         f"({r['ratio']:.2f}x)")
        if len(labels) == 0:            # a panel with no run says so under its title (TP and SP ran on 2)
            ax.set_axis_off()
            ax.text(0.5, 0.5, f"no run on {world} ranks\n(tensor and sequence parallel ran on 2)",
                    transform=ax.transAxes, ha="center", va="center", fontsize=9, color="0.35")
        ax.margins(x=0.18)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=8)
    axes[0].set_title("data parallel (model-sized messages)", fontsize=10)
    axes[1].set_title("tensor parallel (activation-sized messages)", fontsize=10)
    return View(fig, "\n".join(lines))
