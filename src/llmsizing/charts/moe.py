"""Figures of Part V, the models of 2026 (chapter 18, "Mixture of experts"): one expert-parallel layout's
memory per GPU and where its step's time goes. No formula lives here: the numbers come from
:func:`~llmsizing.memory.training_memory` and :func:`~llmsizing.layouts.step_time` (with
:mod:`llmsizing.moe` behind both)."""

from __future__ import annotations

from matplotlib.figure import Figure

from .base import EXPLORER_TIME_COLORS, FixedView, View, blank_figure, figure_axes

#: The step-time colours of chapter 18's figure: the parallelism explorer's, and the expert-parallel
#: all-to-all.
MOE_TIME_COLORS = {**EXPLORER_TIME_COLORS, "ep": "#D55E00"}

#: Chapter 18's default layout: Mixtral-8x7B on 32 H100s, the experts split eight ways (one expert of each
#: layer per GPU), ZeRO-1 over the 32 data-parallel GPUs (the experts' shards over the 4 that hold the same
#: expert), full recomputation, micro-batches of one 4K sequence, 8 per step (a global batch of 256
#: sequences), Megatron-Core's default ``alltoall`` token dispatcher.
MOE_LAYOUT_DEFAULT = dict(model="mixtral-8x7b", gpu="H100 SXM", tp=1, pp=1, dp=32, ep=8, zero=1,
                          recompute="full", batch=1, seq=4096, grad_accum=8, ep_overlap=0.0,
                          dispatcher="alltoall")


def render_moe_layout(model: str = "mixtral-8x7b", gpu: str = "H100 SXM", tp: int = 1, pp: int = 1,
                      dp: int = 32, ep: int = 8, zero: int = 1, recompute: str = "full", batch: int = 1,
                      seq: int = 4096, grad_accum: int = 8, ep_overlap: float = 0.0,
                      precision: str = "bf16-mixed", max_nodes="model", dispatcher: str = "alltoall", *,
                      into: Figure | None = None) -> View:
    """Chapter 18: one layout of a mixture of experts with ``ep``-way expert parallelism (inside the layout's
    ``tp x dp`` GPUs; sequence parallelism on whenever ``tp > 1``). Left, the most loaded GPU of each pipeline
    stage (:func:`~llmsizing.memory.training_memory`): weights, gradients, optimizer states, activations,
    temporaries and the allowance against the GPU's memory. Right, the step
    (:func:`~llmsizing.layouts.step_time`): compute, the pipeline bubble and each group's communication in
    full (pale) with the part the step waits for drawn over it (the expert-parallel all-to-all exposed but for
    ``ep_overlap``, with the routing's node limit: ``max_nodes="model"`` is the model's own,
    :func:`llmsizing.all_to_all.route_max_nodes` of the layout, and the token ``dispatcher``,
    :data:`~llmsizing.all_to_all.DISPATCHERS`: another than ``"alltoall"`` labels the all-to-all's bar and the
    summary gives ``"alltoall"``'s all-to-all beside it). A layout the library refuses (``ep`` not
    dividing the experts or ``tp x dp``, a dense model with ``ep > 1``...) raises its ``ValueError``, which
    the widget shows."""
    import numpy as np

    from ..all_to_all import DEFAULT_DISPATCHER, check_dispatcher, dispatcher_kwargs, route_max_nodes
    from ..catalog import get_gpu, resolve_model
    from ..layouts import step_time
    from ..memory import training_memory
    from ..parallel import Parallel
    from ..units import fmt_gib
    from .base import _fast_hbars, _stage_memory_columns

    m = resolve_model(model, moe=True)
    g = get_gpu(gpu)
    par = Parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=tp > 1, ep=ep)
    kw = dict(batch=batch, seq=seq, grad_accum=grad_accum, recompute=recompute, precision=precision)
    tm = training_memory(m, parallel=par, **kw)
    disp = check_dispatcher(dispatcher).name
    st = step_time(m, g, par, ep_overlap=ep_overlap, max_nodes=max_nodes, **kw,
                   **dispatcher_kwargs(disp))
    d = max(1, st.communication.node.scaleup_domain_gpus // par.etp)      # the EP ranks a node holds
    nodes = None if ep <= d else route_max_nodes(m, ep, d) if max_nodes == "model" else max_nodes

    def build(fig):
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.25, top=0.9, wspace=0.5)
        return fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.1, 1]})

    fig, (ax, ax_t) = figure_axes(7.9, 3.4, into, ("moe layout",), build)
    _stage_memory_columns(ax, tm, g)
    ax.set_title(f"{m.name}: tp={par.tp} pp={par.pp} dp={par.dp} ep={par.ep} ZeRO-{par.zero}", fontsize=8.5,
                 loc="left")

    parts = st.parts()
    names = [k for k in parts if k in ("compute", "pipeline bubble") or parts[k] > 0]
    exposed = st.exposed_by_group_s
    ys = np.arange(len(names))
    _fast_hbars(ax_t, ys, [parts[k] for k in names],
                colors=[MOE_TIME_COLORS[k] if k in ("compute", "pipeline bubble") else "0.85" for k in names])
    groups = [k for k in names if k in exposed]
    _fast_hbars(ax_t, [names.index(k) for k in groups], [exposed[k] for k in groups], height=0.5,
                colors=[MOE_TIME_COLORS[k] for k in groups])
    a2a_label = "all-to-all (ep)" if disp == DEFAULT_DISPATCHER else f"all-to-all (ep, {disp})"
    ax_t.set_yticks(ys, [{"ep": a2a_label}.get(n, n if n in ("compute", "pipeline bubble")
                                                          else f"{n} comm.")
                         for n in names], fontsize=8)
    ax_t.invert_yaxis()
    ax_t.set_xlabel("seconds per step (grey: all comm.; colour: exposed)", fontsize=8)
    ax_t.set_title(f"{par.gpus} x {g.name}: MFU {st.mfu:.0%} (active parameters)", fontsize=8.5, loc="left")

    fits = tm.total_bytes <= g.memory_bytes
    by = st.comm_by_group_s
    a2a = by.get("ep", 0.0)
    plain = a2a if disp == DEFAULT_DISPATCHER else step_time(
        m, g, par, ep_overlap=ep_overlap, max_nodes=max_nodes, **kw).comm_by_group_s.get("ep", 0.0)
    lines = [f"{m.name} on {par.gpus} x {g.name}: tp={par.tp}, pp={par.pp}, dp={par.dp}, ep={par.ep} "
             f"({m.experts // par.ep} of {m.experts} experts per GPU in each MoE layer), ZeRO-{par.zero}"
             f"{' (experts sharded over edp=' + str(par.edp) + ')' if par.zero else ''}, micro-batch {batch} "
             f"x {seq:,} tokens, {grad_accum} per step, recompute={recompute}:",
             f"  most loaded GPU: stage {tm.stage}, {fmt_gib(tm.total_bytes)} (peak {fmt_gib(tm.peak_bytes)} "
             f"in the {tm.peak_phase} + allowance) -> {'fits' if fits else 'does NOT fit'} in "
             f"{g.memory_gib:.1f} GiB",
             f"  compute {st.compute_s:.3f} s + bubble {st.bubble_s:.3f} s; all-to-all {a2a:.3f} s, exposed "
             f"{exposed.get('ep', 0.0):.3f} s ({ep_overlap:.0%} hidden"
             + (f", each token to at most {nodes} nodes" if nodes else "") + ")"
             + ("" if disp == DEFAULT_DISPATCHER else
                f"; the {disp} dispatcher (alltoall's all-to-all {plain:.3f} s)"),
             "  other communication, exposed of all: " + (", ".join(
                 f"{k} {exposed[k]:.3f} of {by[k]:.3f} s" for k in ("dp", "tp", "pp")
                 if by[k] > 0) or "none"),
             f"  step time {st.step_s:.3f} s -> MFU {st.mfu:.0%} of the active parameters' FLOPs, "
             f"{st.tokens_per_s:,.0f} tokens/s"]
    if not fits:
        lines.append("    (to fit: more data-parallel GPUs with ZeRO, a larger ep, pp, recompute, or a "
                     "smaller micro-batch)")
    return FixedView(fig, "\n".join(lines))


#: The machines chapter 18's NVL72 case compares: (GPU, node in ``data/nodes.csv``, colour).
A2A_MACHINES = (("H800", "HGX H800 (8-GPU)", "#0072B2"), ("H100 SXM", "DGX H100", "#56B4E9"),
                ("GB200", "GB200 NVL72 compute tray", "#D55E00"))


def render_a2a_domains(model: str = "deepseek-v3", *, tokens: int = 4096, eps=(8, 16, 32, 64, 128),
                       max_nodes: int | None = 4, bytes_per_element: float = 1.0,
                       machines=A2A_MACHINES) -> FixedView:
    """Chapter 18: one MoE dispatch all-to-all of ``tokens`` tokens (``k`` copies of ``hidden`` values of
    ``bytes_per_element`` bytes; FP8 by default, as DeepSeek-V3 dispatches) against the expert-parallel size,
    on 8-GPU nodes over InfiniBand and inside a GB200 NVL72 rack's 72-GPU NVLink domain
    (:func:`~llmsizing.all_to_all.all_to_all_s`, the nodes and links of ``data/nodes.csv``), with
    DeepSeek-V3's node limit ``max_nodes``. Milliseconds per all-to-all."""
    from ..all_to_all import all_to_all_s
    from ..catalog import get_model
    from ..network import get_node

    m = get_model(model)
    buf = tokens * m.experts_per_token * m.hidden * bytes_per_element
    fig = blank_figure(6.4, 3.2)
    fig.subplots_adjust(left=0.11, right=0.98, bottom=0.16, top=0.88)
    ax = fig.subplots()
    lines = [f"{model}: one dispatch of {tokens:,} tokens x top-{m.experts_per_token} x {m.hidden:,} x "
             f"{bytes_per_element:g} B = {buf / 1e6:,.0f} MB per GPU, max_nodes={max_nodes}; ms per call"]
    for gpu, node, colour in machines:
        ms = [all_to_all_s(buf, ep, gpu, node, top_k=m.experts_per_token, max_nodes=max_nodes) * 1e3
              for ep in eps]
        domain = get_node(node).scaleup_domain_gpus
        ax.plot(eps, ms, marker="o", ms=4, color=colour, label=f"{gpu}: {node} ({domain} GPUs on NVLink)")
        lines.append(f"  {node:26s}" + "".join(f" ep={ep}: {t:5.2f}" for ep, t in zip(eps, ms)))
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, None)
    ax.set_xticks(list(eps), [str(e) for e in eps], fontsize=8)
    ax.minorticks_off()
    ax.tick_params(labelsize=8)
    ax.set_xlabel("expert-parallel GPUs (ep)", fontsize=8)
    ax.set_ylabel("ms per dispatch all-to-all", fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    ax.set_title(f"{model}: {tokens:,} tokens per GPU, node limit {max_nodes}", fontsize=8.5, loc="left")
    return FixedView(fig, "\n".join(lines))
