"""Chapter 7's data parallelism in sentences: DDP's copies of the gradients, where the traffic hides, the
seeds' memory figures (issue 38).

Each function builds what one section of the chapter prints and the texts its markdown quotes, keyed by name
(a :class:`~llmsizing.prose.ChapterText`: ``values``, glued as ``ch7_<name>``; ``report``, printed), for
Llama-3-8B on H100s unless it says otherwise. Every statement the chapter makes about those numbers is checked
here, and :class:`~llmsizing.prose.ProseOutOfDate` names the one that no longer holds, so the build fails
instead of printing a sentence the numbers contradict. Nothing here computes a new quantity: it formats and
compares what :func:`~llmsizing.memory.training_memory`, :func:`~llmsizing.comm.communication`,
:func:`~llmsizing.comm.dp_breakeven_tokens`, :func:`~llmsizing.layouts.step_time` and
:func:`~llmsizing.memory.model_states` return.
"""

from __future__ import annotations

import math

import pandas as pd

from .catalog import DATA_DIR, get_gpu
from .comm import communication, dp_breakeven_tokens, gpu_with_link, group_network
from .footprint import grad_copies
from .hardware import link_bandwidth_one_way_gbps
from .layouts import USABLE_FRACTION, step_time
from .memory import activation_room_bytes, min_gpus_for_bytes, model_states, model_states_for_params, \
    training_memory
from .model_catalog import get_model
from .parallel import Parallel
from .prose import ChapterText, ProseOutOfDate, claimed_text
from .prose import prose_check as _prose_check
from .units import GB, GiB, fmt_gib

__all__ = ["ProseOutOfDate", "DDP_KINDS", "ddp_measured_copies", "ddp_copy_checks", "ddp_copies_prose",
           "pcie_rates_gbps", "closed_form_tokens", "breakeven_prose", "pcie_zero3_prose", "zero_states",
           "seed_memory_prose"]

_H100, _LLAMA8 = "H100 SXM", "llama-3-8b"


def _says(holds, what: str) -> None:
    _prose_check(holds, what, "chapter 7's prose")


def ddp_measured_copies():
    """``data/grad_buffer_measurements.csv`` (two gloo ranks, ``tools/measure/grad_buffer.py``) with a column
    ``copies``: the gradients' storage in copies of the parameters' bytes."""
    meas = pd.read_csv(DATA_DIR / "grad_buffer_measurements.csv")
    meas["copies"] = meas["gradient_bytes"] / meas["param_bytes"]
    return meas


def ddp_copy_checks():
    """:func:`ddp_measured_copies` against :func:`~llmsizing.footprint.grad_copies`, one row per measured
    layout, parameter dtype, micro-batches ``m`` and phase: ``measured`` (the most copies of any step and
    micro-batch, the worst one being what ``grad_copies`` counts) and ``counted`` (the buffer's plus the
    ``.grad`` tensors' in that phase). The layout ``ddp-view-keep`` (the view with ``set_to_none=False``) is
    the kind ``True``, ``plain`` the kind ``False``."""
    meas = ddp_measured_copies()
    most = meas.groupby(["layout", "param_dtype", "grad_accum", "phase"])["copies"].max().reset_index()
    kind_of = {"plain": False, "ddp-view-keep": True}   # the view with set_to_none=False: one buffer (ex. 4)
    col = {"forward peak": 1, "backward end": 2, "optimizer step": 3}

    def counted(r):
        c = grad_copies(kind_of.get(r.layout, r.layout), r.grad_accum)
        return c[0] + c[col[r.phase]]
    most["counted"] = [counted(r) for r in most.itertuples()]
    return most.rename(columns={"copies": "measured"})


#: The chapter's four kinds of gradient buffer: the table's column -> ``training_memory(grad_buffer=...)``.
DDP_KINDS = {"no buffer": False, "True": True, "ddp-view": "ddp-view", "ddp-copy": "ddp-copy"}


def ddp_copies_prose() -> ChapterText:
    """PyTorch DDP's copies of the gradients (:func:`~llmsizing.footprint.grad_copies`), checked against the
    measured storages, and Llama-3-8B's peak on 8 H100s under each kind of buffer: the tables the section
    prints and its texts.

    Raises :class:`~llmsizing.prose.ProseOutOfDate` where a statement fails: the measured copies equal the
    counted ones; under ZeRO-0 the optimizer step peaks and holds the second copy; under ZeRO-1 the loss's
    backward peaks, above the copy's phases; with 4 micro-batches both DDP modes add a whole copy, past the
    H100, while one buffer fits."""
    llama8, h100 = get_model(_LLAMA8), get_gpu(_H100)
    lines = ["copies of the gradients (buffer, .grad before the backward, at its end, in the optimizer step)",
             pd.DataFrame({k: {f"m = {m}": grad_copies(v, m) for m in (1, 4)}
                           for k, v in DDP_KINDS.items()}).to_string()]
    meas = ddp_measured_copies()
    _says(set(meas["param_dtype"]) == {"fp32", "bf16"} and set(meas["grad_accum"]) == {1, 2},
          "the gloo runs measured fp32 and bf16 parameters with 1 and 2 micro-batches")
    _says(set(meas["layout"]) == {"plain", "ddp-copy", "ddp-view", "ddp-view-keep"},
          "the gloo runs measured the plain step, DDP's two modes and the view kept")
    for r in ddp_copy_checks().itertuples():          # the worst step and micro-batch of each phase
        _says(r.measured == r.counted,
              f"the measured copies of {r.layout} in the {r.phase} are the counted ones")

    short = {"forward": "fwd", "loss backward": "loss", "backward": "bwd", "optimizer step": "opt"}
    mem, rows = {}, {}
    for z in (0, 1):
        for m_acc in (1, 4):
            for label, k in DDP_KINDS.items():
                tm = training_memory(llama8, batch=1, seq=4096, grad_accum=m_acc,
                                     parallel=Parallel(dp=8, zero=z), grad_buffer=k)
                mem[z, m_acc, k] = tm
                rows.setdefault(f"ZeRO-{z}, m = {m_acc}", {})[label] = \
                    f"{tm.peak_bytes / GiB:,.1f} GiB {short[tm.peak_phase]}"
    lines += ["\nLlama-3-8B, dp = 8, 1 x 4,096 tokens per micro-batch: the step's peak per GPU and its phase",
              pd.DataFrame(rows).T.to_string()]
    g = mem[1, 1, True].gradients_bytes       # one whole copy: the gradients, unsharded under ZeRO-1
    _says(g == mem[0, 1, True].gradients_bytes == llama8.n_params * 2, "one copy is 2N bytes")
    # ZeRO-0, one micro-batch: the peak is the optimizer step, which holds the second copy
    z0_buf, z0_copy = mem[0, 1, True], mem[0, 1, "ddp-copy"]
    _says(z0_buf.peak_phase == z0_copy.peak_phase == "optimizer step", "under DDP the optimizer step peaks")
    _says(abs(z0_copy.peak_bytes - z0_buf.peak_bytes - g) < 1e-6 * g, "PyTorch's default adds a whole copy")
    _says(mem[0, 1, "ddp-view"].peak_bytes == z0_buf.peak_bytes, "gradient_as_bucket_view gives it back")
    # ZeRO-1, one micro-batch: the copy comes after the loss's peak
    z1_buf, z1_copy = mem[1, 1, True], mem[1, 1, "ddp-copy"]
    _says(z1_copy.peak_phase == "loss backward" and z1_copy.peak_bytes == z1_buf.peak_bytes,
          "under ZeRO-1 the loss's backward peaks and PyTorch's default costs nothing")
    _says(max(z1_copy.phases_bytes["backward"], z1_copy.phases_bytes["optimizer step"]) < z1_copy.peak_bytes,
          "the second copy's phases are below the loss's peak")
    # ZeRO-1 with 4 micro-batches: under no_sync the .grad tensors sit beside the buckets, views or not
    z1a_buf, z1a_view, z1a_copy = (mem[1, 4, k] for k in (True, "ddp-view", "ddp-copy"))
    _says(z1a_view.peak_bytes == z1a_copy.peak_bytes, "with accumulation both DDP modes peak alike")
    _says(abs(z1a_view.peak_bytes - z1a_buf.peak_bytes - g) < 1e-6 * g, "accumulation adds a whole copy")
    _says(z1a_buf.peak_bytes == z1_buf.peak_bytes, "with one buffer, accumulating costs nothing more")
    usable = USABLE_FRACTION * h100.memory_bytes
    _says(z1a_buf.total_bytes <= usable < h100.memory_bytes < z1a_view.total_bytes,
          "with accumulation DDP overflows the H100 and one buffer fits its usable memory")
    texts = {
        "ddpc_g": fmt_gib(g),
        "ddpc_z0_buf": fmt_gib(z0_buf.peak_bytes),
        "ddpc_z0_copy": fmt_gib(z0_copy.peak_bytes),
        "ddpc_z1_loss": fmt_gib(z1_copy.peak_bytes),
        "ddpc_z1_bwd": fmt_gib(z1_copy.phases_bytes["backward"]),
        "ddpc_z1_opt": fmt_gib(z1_copy.phases_bytes["optimizer step"]),
        "ddpc_z1_none": fmt_gib(mem[1, 1, False].peak_bytes),
        "ddpc_acc_view": fmt_gib(z1a_view.peak_bytes),
        "ddpc_acc_view_tot": fmt_gib(z1a_view.total_bytes),
        "ddpc_acc_buf_tot": fmt_gib(z1a_buf.total_bytes),
        "ddpc_usable": fmt_gib(usable),
        "ddpc_h100": fmt_gib(h100.memory_bytes),
    }
    return ChapterText(texts, "\n".join(lines))


def pcie_rates_gbps() -> tuple[float, float]:
    """PCIe Gen5 x16 and Gen4 x16 one way, GB/s: the catalogue's PCIe cards' datasheet figures
    (``data/gpus.csv``: 128 and 64 GB/s, both directions added), which ``data/links.csv``'s achievable share
    was fitted against."""
    pcie5 = link_bandwidth_one_way_gbps(get_gpu("H100 PCIe"))
    pcie4 = link_bandwidth_one_way_gbps(get_gpu("A100 PCIe 80GB"))
    _says((pcie5, pcie4) == (64.0, 32.0), "PCIe Gen5 x16 moves 64 GB/s each way and Gen4 x16 32 GB/s")
    return pcie5, pcie4


def closed_form_tokens() -> tuple[float, float]:
    """The DP break-even's closed form on one H100 node: ``(w_nv, n_tok)``, NVLink's achieved one-way GB/s
    for a group of 8 and ``2/3 * 7/8 * P * eta / BW`` tokens (6N FLOPs a token at the calibrated kernel
    efficiency, chapter 7's formula)."""
    from .hardware import kernel_efficiency

    h100 = get_gpu(_H100)
    w_nv = group_network(Parallel(dp=8), h100)["dp"].bandwidth_gbps
    return w_nv, 2 / 3 * 7 / 8 * h100.bf16_dense_tflops * 1e12 * kernel_efficiency(h100) / (w_nv * 1e9)


def _one_per_node(dp, zero=0, **kw):
    """Llama-3-8B's step on H100s, one GPU per node, the figure's global batch of 512 x 4,096 tokens."""
    return step_time(get_model(_LLAMA8), get_gpu(_H100), Parallel(dp=dp, zero=zero), batch=1, seq=4096,
                     grad_accum=512 // dp, gpus_per_node=1, **kw)


def breakeven_prose() -> ChapterText:
    """The tokens per GPU per step above which data-parallel traffic hides behind compute, by link and
    placement (:func:`~llmsizing.comm.dp_breakeven_tokens`), and what the step model makes of one GPU per
    node: the table the section prints, its texts and the busy fraction of DDP at ``dp`` 64 and 256 (the
    figure draws them).

    Raises :class:`~llmsizing.prose.ProseOutOfDate` where a statement fails: two filled nodes move DDP's
    bytes as fast as one node and add only latency; ZeRO-3's calls are larger and pay half an all-reduce's
    latency each; the NICs bound a group from the named node count; accumulation's window leaves DDP waiting
    where the whole step would hide it; ZeRO-1 beats DDP at 256, ZeRO-2 loses at 16 and equals ZeRO-1 at 512;
    ZeRO-2's reduce-scatter needs 3/4 of DDP's tokens."""
    from .hardware import kernel_efficiency
    from .mfu import layout_range_factors
    from .network import TREE_LEVEL_ALPHAS, nic_bound_nodes

    llama8, h100 = get_model(_LLAMA8), get_gpu(_H100)
    eff = kernel_efficiency(h100)
    w_nv, closed = closed_form_tokens()
    pcie5_gbps, pcie4_gbps = pcie_rates_gbps()
    texts = {"pcie5_gbps": f"{pcie5_gbps:g} GB/s", "pcie4_gbps": f"{pcie4_gbps:g} GB/s"}
    links = {"NVLink": h100,
             "PCIe Gen5 x16": gpu_with_link(h100, "PCIe Gen5 x16", pcie5_gbps, "pcie"),
             "PCIe Gen4 x16": gpu_with_link(h100, "PCIe Gen4 x16", pcie4_gbps, "pcie")}
    models = ("llama-3-8b", "llama-3-70b")
    rows = {}
    for label, g in links.items():
        for z in (0, 3):
            k = f"{label}, {'DDP/ZeRO-1/2' if z == 0 else 'ZeRO-3'}"
            rows[k] = {name: f"{dp_breakeven_tokens(name, g, dp=8, zero=z):,.0f}" for name in models}
        key = f"be_{label.split()[0].lower()}{'5' if 'Gen5' in label else '4' if 'Gen4' in label else ''}"
        texts[key] = f"{dp_breakeven_tokens(llama8, g, dp=8, zero=0):,.0f}"
    # across nodes: 16 replicas filling two nodes (8 NICs per GPU), or one per node (tp = 8: one NIC per GPU)
    for key, kw in {"fill": dict(), "one": dict(gpus_per_node=1)}.items():
        label = "network, group fills 2 nodes" if key == "fill" else "network, one GPU per node"
        for z in (0, 3):
            rows[f"{label}, {'DDP/ZeRO-1/2' if z == 0 else 'ZeRO-3'}"] = {
                name: f"{dp_breakeven_tokens(name, h100, dp=16, zero=z, **kw):,.0f}" for name in models}
            texts[f"be_{key}_z{z}"] = f"{dp_breakeven_tokens(llama8, h100, dp=16, zero=z, **kw):,.0f}"
        bw = group_network(Parallel(dp=16), h100, **kw)["dp"].bandwidth_gbps
        texts[f"bw_{key}"] = f"{bw:,.0f} GB/s"
        z3_over_ddp = (dp_breakeven_tokens(llama8, h100, dp=16, zero=3, **kw)
                       / dp_breakeven_tokens(llama8, h100, dp=16, zero=0, **kw))
        texts[f"be_{key}_z3_x"] = f"{z3_over_ddp:.2f}"
    # two full nodes: the bandwidth is counted against the hierarchical bytes (one gradient per node over the
    # NICs), so DDP's bytes take as long as inside one node; what crossing adds is its buckets' latency
    ddp_nv = communication(llama8, Parallel(dp=8), batch=1, seq=4096, gpu=h100).collectives[0]
    ddp_fill = communication(llama8, Parallel(dp=16), batch=1, seq=4096, gpu=h100).collectives[0]
    _says(abs((ddp_fill.time_s - ddp_fill.latency_s) / (ddp_nv.time_s - ddp_nv.latency_s) - 1) < 0.01,
          "two filled nodes move DDP's bytes as fast as one node")
    _says(ddp_fill.calls == ddp_nv.calls and ddp_fill.latency_s > 2 * ddp_nv.latency_s,
          "crossing nodes adds the same buckets' latency")
    texts["fill_bytes_ms"] = f"{(ddp_fill.time_s - ddp_fill.latency_s) * 1e3:,.0f} ms"
    texts["fill_lat_ms"] = f"{ddp_fill.latency_s * 1e3:,.1f} ms"
    texts["nv_lat_ms"] = f"{ddp_nv.latency_s * 1e3:,.1f} ms"
    z3_fill = communication(llama8, Parallel(dp=16, zero=3), batch=1, seq=4096, gpu=h100).collectives
    _says(all(x.message_bytes > ddp_fill.message_bytes for x in z3_fill), "ZeRO-3 makes larger calls")
    texts["z3_calls16"] = f"{sum(x.calls for x in z3_fill)}"
    # the dropdown: about as many calls as DDP's buckets, each an all-gather or a reduce-scatter, half an
    # all-reduce's ring steps, so half the latency per call and less in all
    z3_lat16 = sum(x.latency_s for x in z3_fill)
    per_call = ddp_fill.latency_s / ddp_fill.calls
    _says(all(abs(x.latency_s / x.calls / per_call - 0.5) < 0.01 for x in z3_fill),
          "each ZeRO-3 call pays half an all-reduce's latency")
    _says(z3_lat16 < ddp_fill.latency_s, "ZeRO-3's calls pay less latency in all than DDP's")
    texts["z3_lat16"] = f"{z3_lat16 * 1e3:,.1f} ms"
    texts["bw_fill_max"] = f"{group_network(Parallel(dp=128), h100)['dp'].bandwidth_gbps:,.0f} GB/s"
    # from how many whole nodes the NICs, not NVLink's phase inside the node, bound the group
    nic_m = nic_bound_nodes(h100)
    _says(group_network(Parallel(dp=8 * nic_m), h100)["dp"].bandwidth_gbps
          == group_network(Parallel(dp=128), h100)["dp"].bandwidth_gbps, "the NICs bound the group from "
          f"{nic_m} nodes on")
    texts["nic_nodes"] = f"{nic_m}"
    texts["bw_nvlink"] = f"{group_network(Parallel(dp=8), h100)['dp'].bandwidth_gbps:,.0f} GB/s"
    texts["be_nvlink_bwd"] = f"{dp_breakeven_tokens(llama8, h100, dp=8, zero=0, window=2 / 3):,.0f}"
    texts["be_fill_bwd"] = f"{dp_breakeven_tokens(llama8, h100, dp=16, zero=0, window=2 / 3):,.0f}"
    one_x = (dp_breakeven_tokens(llama8, h100, dp=16, zero=0, gpus_per_node=1)
             / dp_breakeven_tokens(llama8, h100, dp=16, zero=0))
    texts["be_one_x"] = f"{one_x:.1f}"
    # one GPU per node, the figure's global batch: chapter 8's step model (step_time), which the figure draws,
    # hides DDP's all-reduce only behind the last micro-batch's backward
    acc_busy = {}
    for dp_acc in (64, 256):
        st_acc = _one_per_node(dp_acc)
        acc_busy[dp_acc] = st_acc.efficiency
        texts[f"acc_busy_{dp_acc}"] = f"{st_acc.efficiency:.0%}"
        texts[f"acc_m_{dp_acc}"] = f"{512 // dp_acc}"
        texts[f"acc_comp_{dp_acc}"] = f"{st_acc.compute_s:.2f} s"
        texts[f"acc_wait_{dp_acc}"] = f"{st_acc.exposed_comm_s:.2f} s"
        # the whole step as the window (overlap=1, the closed form's assumption) hides it all
        texts[f"acc_bound_{dp_acc}"] = f"{_one_per_node(dp_acc, overlap=1.0).efficiency:.0%}"
        _says(st_acc.efficiency < 0.995 <= _one_per_node(dp_acc, overlap=1.0).efficiency,
              f"at dp = {dp_acc} DDP waits behind the last backward but the whole step would hide it")
    z1_256, z2_16, z2_512, z1_512 = (_one_per_node(d, z).efficiency
                                     for d, z in ((256, 1), (16, 2), (512, 2), (512, 1)))
    ddp_16 = _one_per_node(16).efficiency
    texts.update(z1_busy_256=f"{z1_256:.0%}", z2_busy_16=f"{z2_16:.0%}", ddp_busy_16=f"{ddp_16:.0%}",
                 z12_busy_512=f"{z2_512:.0%}")
    _says(z1_256 > acc_busy[256], "ZeRO-1 beats DDP at 256 replicas")
    _says(z2_16 < ddp_16, "ZeRO-2 loses to DDP at 16 replicas")
    _says(abs(z2_512 - z1_512) < 1e-9, "ZeRO-1 and ZeRO-2 are equal at 512 replicas")
    # latency per call at scale: one GPU per node, 512 replicas
    for z in (0, 3):
        c512 = [x for x in communication(llama8, Parallel(dp=512, zero=z), batch=1, seq=4096, gpu=h100,
                                         gpus_per_node=1).collectives if x.group == "dp"]
        lat = sum(x.latency_s for x in c512)
        texts[f"lat512_z{z}"] = f"{lat * 1e3:,.0f} ms"
        texts[f"bytes512_z{z}"] = f"{(sum(x.time_s for x in c512) - lat) * 1e3:,.0f} ms"
        texts[f"calls512_z{z}"] = f"{sum(x.calls for x in c512):,}"
    # the takeaway's per-micro-batch window for ZeRO-2: its reduce-scatter (half of its step's bytes) behind
    # one backward (2/3 of the compute) needs 3/4 of the whole-step n_tok* of DDP
    z2_rs = dp_breakeven_tokens(llama8, h100, dp=8, zero=2, window=2 / 3) / 2
    _says(abs(z2_rs / dp_breakeven_tokens(llama8, h100, dp=8, zero=0) - 3 / 4) < 0.01,
          "ZeRO-2's reduce-scatter behind one backward needs 3/4 of DDP's tokens")
    # NCCL's PAT (2.23+; one GPU per node): a binomial schedule of about log2(n) steps in place of the ring's
    texts["pat_steps"] = f"{math.ceil(math.log2(512))}"
    texts["ring_steps"] = f"{512 - 1}"
    texts["pat_share"] = f"{math.ceil(math.log2(512)) / (512 - 1):.0%}"
    texts["tree_level"] = f"{TREE_LEVEL_ALPHAS:.2f}"    # the tree level's latency, in ring steps (one log)
    # n_tok* goes as the compute's speed: the step model's stated 80% range (data/intervals.csv), whole steps
    # applied to the compute, moves the NVLink threshold by the same factors
    be_lo, be_hi = (f * dp_breakeven_tokens(llama8, h100, dp=8, zero=0) for f in layout_range_factors(h100))
    texts["be_nvlink_range"] = f"{be_lo:,.0f}–{be_hi:,.0f}"
    text = "\n".join([
        "tokens per GPU per step (per micro-batch for ZeRO-3) above which DP traffic hides behind compute",
        f"H100, kernel efficiency {eff:.0%}, 4,096-token sequences, dp = 8 (16 for the network rows); "
        "PCIe through host memory",
        pd.DataFrame(rows).T.to_string(),
        f"closed form on NVLink ({w_nv:,.0f} GB/s achieved), 6N FLOPs per token: {closed:,.0f} tokens"])
    return ChapterText(texts, text, {"acc_busy": acc_busy})


def _p2p_node(g):
    """The same eight GPUs on a PCIe node whose cards reach each other peer-to-peer (data/links.csv:
    pcie-p2p)."""
    from dataclasses import replace

    from .network import get_node

    return replace(get_node(gpu=g), intra_topology="pcie", peer_to_peer=True,
                   intra_link_gbps_one_way=link_bandwidth_one_way_gbps(g))


def pcie_zero3_prose() -> ChapterText:
    """Seed 004's claim, ZeRO-3 on GPUs without NVLink below 20% busy: Llama-3-8B over 8 GPUs linked only
    by PCIe (an A100 and an H100 on their PCIe generation, an L40S at a stand-in efficiency), by tokens per
    micro-batch, and the thresholds below which it holds: the table the section prints and its texts.

    Raises :class:`~llmsizing.prose.ProseOutOfDate` where a statement fails: the step model's busy fraction
    is the perfect-overlap column; the H100's compute outruns the A100's by more than its link and less than
    its peak; the A100 and H100 are calibrated and the L40S a stand-in; the L40S crosses 20% first, then the
    A100, then the H100. ``s4_<gpu>_range``: the threshold's two ends stretched by the step model's stated
    80% range (:func:`~llmsizing.mfu.layout_range_factors`), since it goes as the compute's speed; the table
    gives each end's range on its own row."""
    from .comm import busy_fraction, step_compute_time_s
    from .hardware import kernel_efficiency, kernel_efficiency_row
    from .mfu import layout_range_factors
    from .network import link_class

    llama8, h100 = get_model(_LLAMA8), get_gpu(_H100)
    pcie5_gbps, pcie4_gbps = pcie_rates_gbps()
    cases = {"A100, PCIe Gen4": gpu_with_link("A100 80GB", "PCIe Gen4 x16", pcie4_gbps, "pcie"),
             "H100, PCIe Gen5": gpu_with_link(h100, "PCIe Gen5 x16", pcie5_gbps, "pcie"),
             "L40S, PCIe Gen4": get_gpu("L40S")}
    z3 = Parallel(dp=8, zero=3)
    rows, thresholds, texts = {}, {}, {}
    for label, g in cases.items():
        key = label.split(",")[0].lower()
        for tok in (512, 1024, 2048, 4096, 8192):
            comp = step_compute_time_s(llama8, z3, batch=1, seq=tok, gpu=g)
            comm = communication(llama8, z3, batch=1, seq=tok, gpu=g).time_s
            # chapter 8's step model gives the perfect-overlap column: the traffic outlasts both windows
            busy = step_time(llama8, g, z3, batch=1, seq=tok).efficiency
            _says(abs(busy - busy_fraction(comp, comm)) < 1e-9,
                  "the step model's busy fraction is the perfect-overlap column")
            lo_hi = [f"{busy_fraction(comp, comm, overlap=o):.0%}" for o in (0.0, 1.0)]
            rows[(label, f"{tok:,}")] = {"no overlap": lo_hi[0], "perfect overlap": lo_hi[1]}
            texts[f"s4_{key}_{tok}_0"], texts[f"s4_{key}_{tok}_1"] = lo_hi
            texts[f"s4_{key}_{tok}_range"] = lo_hi[0] if lo_hi[0] == lo_hi[1] else "–".join(lo_hi)
        t3 = dp_breakeven_tokens(llama8, g, dp=8, zero=3)
        rows[(label, "below 20% under")] = {"no overlap": f"{t3 / 4:,.0f} tokens",
                                            "perfect overlap": f"{t3 / 5:,.0f} tokens"}
        # the threshold goes as the compute's speed (chapter 7's n_tok*): the step model's stated 80% range
        # (data/intervals.csv), applied to the compute, stretches it by its factors
        f_lo, f_hi = layout_range_factors(g)
        rows[(label, "  its 80% range")] = {o: f"{f_lo * t3 / d:,.0f}–{f_hi * t3 / d:,.0f}"
                                            for o, d in (("no overlap", 4), ("perfect overlap", 5))}
        t3p = dp_breakeven_tokens(llama8, g, dp=8, zero=3, node=_p2p_node(g))
        rows[(label, "below 20% under, peer-to-peer")] = {"no overlap": f"{t3p / 4:,.0f} tokens",
                                                          "perfect overlap": f"{t3p / 5:,.0f} tokens"}
        texts[f"s4_{key}_p2p_lo"] = f"{t3p / 5:,.0f}"
        texts[f"s4_{key}_p2p_hi"] = f"{t3p / 4:,.0f}"
        texts[f"s4_{key}_p2p_full"] = f"{t3p:,.0f}"
        texts[f"s4_{key}_eff"] = f"{kernel_efficiency(g):.0%}"
        thresholds[key] = t3
        texts[f"s4_{key}_lo"] = f"{t3 / 5:,.0f}"
        texts[f"s4_{key}_hi"] = f"{t3 / 4:,.0f}"
        texts[f"s4_{key}_range"] = f"{f_lo * t3 / 5:,.0f}–{f_hi * t3 / 4:,.0f}"
    text = "\n".join([
        "Llama-3-8B, ZeRO-3 over 8 GPUs linked only by PCIe, data through host memory (no peer-to-peer), "
        "each GPU at its\nkernel efficiency (L40S: a stand-in): busy fraction by tokens per micro-batch; "
        "the 20% thresholds, their 80% range\n(the step model's stated range applied to the compute) and "
        "with peer-to-peer",
        pd.DataFrame(rows).T.rename_axis(["GPUs and link", "tokens per micro-batch"]).to_string()])
    ga, gh = cases["A100, PCIe Gen4"], cases["H100, PCIe Gen5"]
    link_x = link_bandwidth_one_way_gbps(gh) / link_bandwidth_one_way_gbps(ga)
    texts["h_over_a_flops"] = f"{gh.bf16_dense_tflops / ga.bf16_dense_tflops:.1f}"
    texts["h_over_a_link"] = f"{link_x:.1f}"
    # what the table uses: each card's compute time for a 4,096-token micro-batch at its own kernel
    # efficiency and GEMM shapes (the peaks' ratio overstates it), against the link's ratio: faster compute on
    # a link not as much faster
    comp_x = (step_compute_time_s(llama8, z3, batch=1, seq=4096, gpu=ga)
              / step_compute_time_s(llama8, z3, batch=1, seq=4096, gpu=gh))
    _says(link_x < comp_x < gh.bf16_dense_tflops / ga.bf16_dense_tflops,
          "the H100's compute outruns the A100's by more than its link and less than its peak")
    texts["h_over_a_comp"] = f"{comp_x:.1f}"
    texts["pcie_frac"] = f"{link_class('pcie').achievable_fraction:.0%}"
    texts["pcie_p2p_frac"] = f"{link_class('pcie-p2p').achievable_fraction:.0%}"
    _says(all(kernel_efficiency_row(g).runs for g in (ga, gh)), "the A100 and the H100 are calibrated")
    _says(not kernel_efficiency_row(cases["L40S, PCIe Gen4"]).runs, "the L40S runs at a stand-in efficiency")
    _says(thresholds["l40s"] < thresholds["a100"] < thresholds["h100"],
          "the L40S crosses 20% first, then the A100, then the H100")
    return ChapterText(texts, text)


def zero_states(model, dp: int, zero: int, offload: str = "none"):
    """:func:`~llmsizing.memory.model_states` of ``model`` over ``dp`` replicas at ZeRO stage ``zero``."""
    return model_states(model, parallel=Parallel(dp=dp, zero=zero, offload=offload))


def seed_memory_prose() -> ChapterText:
    """The seeds' memory figures for data parallelism (``data/seed_claims.csv``, chapter 14) against the model
    states per GPU: the table the section prints and its texts.

    Raises :class:`~llmsizing.prose.ProseOutOfDate` where the verdict on a seed figure fails (none survives):
    405B under FSDP on 32 or 16 H100s, Mistral 7B under DDP on A100s (ZeRO-1 fits), Llama 2 70B's 35 GB,
    Llama 3 70B under ZeRO-3 on 8 H100s (a B200 fits), Llama 2 13B and 7B on two A100s, 10B on two GPUs."""
    h100, a100, b200 = get_gpu(_H100), get_gpu("A100 80GB"), get_gpu("B200")
    llama70 = get_model("llama-3-70b")
    s405, s405_16 = zero_states("llama-3.1-405b", 32, 3), zero_states("llama-3.1-405b", 16, 3)
    m7_0, m7_1 = zero_states("mistral-7b", 4, 0), zero_states("mistral-7b", 4, 1)
    s70_8, s70_tp = zero_states(llama70, 8, 3), zero_states("llama-2-70b", 8, 3)
    s13 = zero_states("llama-2-13b", 2, 3)
    s7_3, s7_0 = zero_states("llama-2-7b", 2, 3), zero_states("llama-2-7b", 2, 0)
    s10 = model_states_for_params(10_000_000_000, parallel=Parallel(dp=2, zero=3))
    seed10_bytes = s10.total_bytes * 2 - model_states_for_params(10_000_000_000).master_bytes   # no master
    claims = pd.read_csv(DATA_DIR / "seed_claims.csv", index_col="id")      # the seeds' figures (chapter 14)

    def said(claim_id):            # chapter 14's rule (audit_quotes.said), with the CSV's unit and a dash
        r = claims.loc[claim_id]
        return claimed_text(r.claimed, r.claimed_high, r.unit, sep="-")

    tp_bytes = claims.loc["000-tp-70b-mem", "claimed"] * GB         # the seed's 35 GB for Llama 2 70B on 8
    tp_bytes_per_param = tp_bytes / (s70_tp.total_bytes / 16)         # over 16 bytes of states a parameter
    two_gpus_low_bytes = claims.loc["002-10b-two-gpus", "claimed"] * GB   # the low end of its 80 to 100 GB

    def gb(st):
        return f"{st.total_bytes / GB:,.0f} GB ({fmt_gib(st.total_bytes)})"

    rows = [
        ("000", "405B, FSDP, 32 H100", said("000-fsdp-405b-mem"), gb(s405),
         f"no: {s405.total_bytes / h100.memory_bytes:.1f}x an H100"),
        ("000", "405B, 16 H100, any split", said("000-pp-405b-mem"), gb(s405_16),
         f"no: {s405_16.total_bytes / h100.memory_bytes:.1f}x an H100"),
        ("000", "Mistral 7B, DDP, 4 A100", "as on one GPU",
         f"{fmt_gib(m7_0.total_bytes)}; ZeRO-1 {fmt_gib(m7_1.total_bytes)}", "no; ZeRO-1 fits"),
        ("000", "Llama 2 70B, 8 H100, any split", said("000-tp-70b-mem"), gb(s70_tp),
         f"no: {tp_bytes / GB:g} GB is {tp_bytes_per_param:.0f} B/param"),
        ("004", "Llama 3 70B, ZeRO-3, 8 H100", "fits", gb(s70_8), "no; fits a B200"),
        ("004", "Llama 2 13B, ZeRO-3, 2 A100", "fits", gb(s13), "no"),
        ("004", "Llama 2 7B, 2 A100", "fits",
         f"ZeRO-3 {fmt_gib(s7_3.total_bytes)}; DDP {fmt_gib(s7_0.total_bytes)}", "ZeRO-3 only"),
        ("002", "10B, split over 2 GPUs", said("002-10b-two-gpus") + " with act.", gb(s10),
         f"no: {s10.total_bytes / GB:,.0f} GB before act."),
    ]
    text = pd.DataFrame(rows, columns=["seed", "setting", "seed says", "model states per GPU", "fits?"]) \
        .to_string(index=False)

    def room(model, gpu, dp, zero):
        return activation_room_bytes(model, gpu, parallel=Parallel(dp=dp, zero=zero))

    # the prose's verdict on each seed figure (none survives)
    _says(s405.total_bytes > 2 * h100.memory_bytes and s405_16.total_bytes > s405.total_bytes,
          "405B's states overflow an H100 at 32 and more so at 16 GPUs")
    _says(m7_0.total_bytes > a100.memory_bytes and room("mistral-7b", a100, 4, 1) > 0,
          "Mistral 7B under DDP overflows an A100 and fits under ZeRO-1")
    _says(s70_tp.total_bytes > tp_bytes and tp_bytes_per_param < 5,
          "the seed's 35 GB for Llama 2 70B on 8 GPUs counts 4 bytes per parameter")
    _says(s70_8.total_bytes > h100.memory_bytes and room(llama70, b200, 8, 3) > 0,
          "Llama 3 70B under ZeRO-3 overflows 8 H100s and fits 8 B200s")
    _says(s13.total_bytes > a100.memory_bytes, "Llama 2 13B under ZeRO-3 overflows two A100s")
    _says(s7_0.total_bytes > a100.memory_bytes and room("llama-2-7b", a100, 2, 3) > 0,
          "Llama 2 7B on two A100s fits under ZeRO-3 only")
    _says(s10.total_bytes >= two_gpus_low_bytes and s10.total_bytes > USABLE_FRACTION * a100.memory_bytes,
          "10B over two GPUs needs 80 GB each before activations")
    all405 = model_states("llama-3.1-405b").total_bytes
    texts = {
        # the seed's 35 GB for Llama 2 70B on 8 GPUs: 4 bytes for each GPU's eighth of the parameters
        "seed70_share": f"{70e9 / 8 / 1e9:.2f}B",
        "seed405_min": f"{min_gpus_for_bytes(all405, h100)}",
        "seed405_min_all": f"{min_gpus_for_bytes(all405, h100, usable_fraction=1.0)}",
        "usable": f"{USABLE_FRACTION:.0%}",
        "seed405_bpp": f"{80e9 / (405e9 / 32):.1f}",
        "a100_gib": f"{a100.memory_gib:.1f} GiB",
        "h100_gib": f"{h100.memory_gib:.1f} GiB",
        "b200_gib": f"{b200.memory_gib:.1f} GiB",
        "b200_left": fmt_gib(room(llama70, b200, 8, 3)),
        "seed10": f"{s10.total_bytes / GB:,.0f} GB",
        "seed10_12": f"{seed10_bytes / 10_000_000_000:g}",
        "seed10_12half": f"{seed10_bytes / 2 / GB:,.0f} GB",
    }
    return ChapterText(texts, text)
