"""Chapter 9's measured collectives in sentences: every number its prose quotes, keyed by name (issue 38).

:func:`collectives_prose` reads the collectives that one training step issued under each layout
(``data/dist_collectives.csv``) against the library's prediction; :func:`nccl_fits_prose` fits the published
``nccl-tests`` logs and sets the library's links and step time against them. Each returns a
:class:`~llmsizing.prose.ChapterText`: the table the chapter prints (``report``) and the texts its prose
quotes (``values``, glued as ``ch9_<name>``). The counts the prose explains ("3 collectives per FSDP unit",
"2L + 1 all-reduces forward", "NCCL cannot have run a flat ring") are checked against the numbers, and
:class:`ProseOutOfDate` names the one that no longer holds. Nothing here computes a new quantity: the
sentences only format and compare what the library's functions return.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from .alpha_beta import bus_factor, from_nccl_tests, node_level_busbw, published_log, published_logs, steps
from .comm import communication
from .dist_compare import dist_model, fsdp_unit_prices, fsdp_unit_relation, predicted_collectives, \
    torch_zero1_time_ratio
from .hardware import link_bandwidth_one_way_gbps
from .model_catalog import get_model
from .network import collective_time_s, get_node, group_link, link_class, wire_factor
from .parallel import Parallel
from .prose import ChapterText, ProseOutOfDate
from .prose import prose_check as _prose_check
from .units import GiB, KiB, MiB
from .zero_traffic import TORCH_DDP_BUCKET_BYTES, TORCH_DDP_FIRST_BUCKET_BYTES, dp_bucket_params, \
    fsdp_root_params, torch_ddp_buckets

__all__ = ["ProseOutOfDate", "collectives_prose", "nccl_fits_prose", "A3_MEGA_EGRESS_GBPS", "A3_MEGA_NICS",
           "A3_MEGA_NIC_GBITS", "NCCL_H100_RING_BUSBW", "NCCL_H100_NVLS_BUSBW"]

#: 8 NICs x 200 Gb/s per a3-megagpu-8g VM (the header of
#: data/nccl_tests/h100_2x8_gcp_a3mega_tcpxo_all_reduce.txt), and its egress in GB/s
A3_MEGA_NICS, A3_MEGA_NIC_GBITS = 8, 200.0
A3_MEGA_EGRESS_GBPS = A3_MEGA_NICS * A3_MEGA_NIC_GBITS / 8
#: NCCL's quoted all-reduce bus bandwidth on an H100 node (NVIDIA/nccl-tests#212): about 370 GB/s for a ring,
#: about 480 with NVLink SHARP, of NVLink 4's 450 one way.
NCCL_H100_RING_BUSBW, NCCL_H100_NVLS_BUSBW = 370, 480


def _says(holds, what: str) -> None:
    _prose_check(holds, what, "chapter 9's prose")


def _mib_table(cmp) -> str:
    table = cmp.reset_index()[["layout", "world_size", "measured_calls", "predicted_calls",
                               "measured_message_bytes", "predicted_message_bytes", "measured_bytes_per_gpu",
                               "predicted_bytes_per_gpu", "ratio"]].copy()
    names = {"measured_message_bytes": "measured messages MiB",
             "predicted_message_bytes": "predicted messages MiB",
             "measured_bytes_per_gpu": "measured MiB/GPU", "predicted_bytes_per_gpu": "predicted MiB/GPU"}
    for c, name in names.items():
        table[name] = (table.pop(c) / MiB).map("{:,.3f}".format)
    table["ratio"] = table["ratio"].map("{:.4f}".format)
    return table


def collectives_prose(coll, cmp) -> ChapterText:
    """The collectives measured against the library's, per layout: the table the chapter prints and the texts
    of its prose. ``coll``: :func:`~llmsizing.dist_compare.load_collectives`; ``cmp``:
    :func:`~llmsizing.dist_compare.compare_collectives` of it indexed by (layout, world_size). Raises
    :class:`ProseOutOfDate` where a count the prose explains no longer matches what was measured."""
    m = dist_model(coll.iloc[0])
    b, s = int(coll.iloc[0]["batch"]), int(coll.iloc[0]["seq"])
    table = _mib_table(cmp)
    fsdp_row = table[(table["layout"] == "fsdp2") & (table["world_size"] == 2)].iloc[0]
    t = {"fsdp_calls": f"{int(fsdp_row['measured_calls'])}",
         "fsdp_pred_calls": f"{int(fsdp_row['predicted_calls'])}"}
    _says(int(fsdp_row["predicted_calls"]) == int(fsdp_row["measured_calls"]) == 3 * (m.layers + 1),
          "FSDP2 issues 3 collectives per unit, each layer and the root, as the library counts")
    rel = fsdp_unit_relation().set_index(["wrapping", "phase", "kind"])["k"]
    _says(rel["layers+root", "backward", "all-gather"] == 0, "the backward all-gathers only the layers' L")
    t["titan_fwd_k"] = f"{rel['torchtitan', 'forward', 'all-gather']}"
    t["titan_bwd_k"] = f"{rel['torchtitan', 'backward', 'all-gather']}"
    prices = fsdp_unit_prices()     # torch's default (None: the root kept) priced with True and False
    _says((prices["measured_calls"] == prices["predicted_calls"]).all()
          and (prices["measured_bytes"] == prices["predicted_bytes"]).all(),
          "the library prices every FSDP unit run's calls and bytes exactly")
    t["unit_runs"] = f"{len(prices.groupby(['wrapping', 'world_size', 'layers']))}"
    t["8b_root_share"] = f"{fsdp_root_params('llama-3-8b') / get_model('llama-3-8b').n_params:.0%}"
    ddp = coll[(coll["layout"] == "ddp") & (coll["world_size"] == 2) & (coll["rank"] == 0)]
    ar = ddp[ddp["kind"] == "all-reduce"]
    t["ddp_mib"] = f"{(ar['message_bytes'] * ar['calls']).sum() / MiB:,.2f} MiB"
    t["ddp_calls"] = f"{int(ar['calls'].sum())}"
    t["ddp_cap"] = f"{TORCH_DDP_BUCKET_BYTES / MiB:.0f} MiB"
    t["ddp_first"] = f"{TORCH_DDP_FIRST_BUCKET_BYTES / MiB:.0f} MiB"
    _says(torch_ddp_buckets(m, precision="fp32") == int(ar["calls"].sum()),
          "DDP's bucket rule gives the all-reduces measured")
    z1 = coll[(coll["layout"] == "zero1") & (coll["world_size"] == 2) & (coll["rank"] == 0)
              & (coll["phase"] == "optimizer")]
    t.update(zero1_bcasts=f"{int(z1['calls'].sum())}", vocab=f"{m.vocab:,}", ffn=f"{m.ffn_hidden:,}")
    tp = coll[(coll["layout"] == "tp") & (coll["rank"] == 0)]
    tp_ar = tp[tp["kind"] == "all-reduce"]
    tp_fwd_calls = int(tp_ar.loc[tp_ar["phase"] == "forward", "calls"].sum())
    tp_bwd_calls = int(tp_ar.loc[tp_ar["phase"] == "backward", "calls"].sum())
    t.update(tp_msg_kib=f"{tp_ar['message_bytes'].iloc[0] / KiB:,.0f} KiB", tp_fwd=f"{tp_fwd_calls}",
             tp_bwd=f"{tp_bwd_calls}")
    _says((tp_fwd_calls, tp_bwd_calls) == (2 * m.layers + 1, 5 * m.layers + 1),
          "tensor parallelism on HF modules all-reduces 2L + 1 times forward and 5L + 1 backward")
    # the embedding's and the LM head's all-reduces, which the library leaves out, against 4L + 2 at 80 layers
    t["tp_outside_80"] = f"{2 / (4 * 80 + 2):.1%}"
    pred_tp = predicted_collectives("tp", 2, m, batch=b, seq=s).set_index("collective")["calls"]
    _says(pred_tp["TP all-reduce (forward)"] == pred_tp["TP all-reduce (backward)"] == 2 * m.layers,
          "the library counts Megatron-LM's 2L all-reduces in each direction")
    t["tp_pred_dir"] = f"{int(pred_tp['TP all-reduce (forward)'])}"
    t["logits_kib"] = f"{tp.loc[tp['kind'] == 'all-gather', 'message_bytes'].iloc[0] / KiB:,.0f} KiB"
    sp = coll[(coll["layout"] == "sp") & (coll["rank"] == 0)]
    sp_bwd_ag = sp.loc[(sp["phase"] == "backward") & (sp["kind"] == "all-gather"), "calls"].sum()
    t["sp_bwd_ag"] = f"{int(sp_bwd_ag)}"
    act = sp[sp["message_bytes"] == tp_ar["message_bytes"].iloc[0]]     # b x s x h buffers, not the logits
    per_kind = act.groupby(["phase", "kind"])["calls"].sum()
    _says(len(per_kind) == 4 and (per_kind == 2 * m.layers + 1).all(),
          "sequence parallelism all-gathers and reduce-scatters 2L + 1 times in each direction")
    t["sp_fwd_ag"] = f"{int(per_kind['forward', 'all-gather'])}"
    pred_sp = predicted_collectives("sp", 2, m, batch=b, seq=s).set_index("collective")
    t["sp_pred_bwd_ag"] = f"{int(pred_sp.loc['SP all-gather (backward)', 'calls'])}"
    t["sp_opt"] = f"{int(sp.loc[sp['phase'] == 'optimizer', 'calls'].sum())}"
    # at one bus bandwidth: a broadcast's factor is 1
    t.update(zero1_time2=f"{torch_zero1_time_ratio(2):.2f}×", zero1_time4=f"{torch_zero1_time_ratio(4):.2f}×")
    # ZeRO-2's traffic: PyTorch issues one all-gather and one reduce-scatter per FSDP unit (layers and root)
    nr = table[(table["layout"] == "fsdp2-no-reshard") & (table["world_size"] == 2)].iloc[0]
    _says(int(nr["measured_calls"]) == 2 * (m.layers + 1),
          "FSDP2 without resharding issues one all-gather and one reduce-scatter per unit")
    t.update(nr_calls=f"{int(nr['measured_calls'])}", nr_pred_calls=f"{int(nr['predicted_calls'])}",
             units=f"{m.layers + 1}")
    t.update(_bucket_texts(m, b, s))
    return ChapterText(t, table.to_string(index=False))


def _bucket_texts(m, b: int, s: int) -> dict:
    """The library's ZeRO-2 (Megatron-Core's distributed optimizer) calls once per bucket of max(40M, 1M x dp)
    parameters: the measured model fits one bucket; Llama-3-8B on 8 GPUs needs many, FSDP2 one per layer."""
    _says(m.n_params < dp_bucket_params(2), "the measured model fits one ZeRO-2 bucket")
    z2_small = communication(m, Parallel(dp=2, zero=2), batch=b, seq=s, gpu="H100 SXM", precision="fp32")
    _says(sum(c.calls for c in z2_small.collectives) == 2, "one bucket: a reduce-scatter and an all-gather")
    big = {z: communication("llama-3-8b", Parallel(dp=8, **kw), batch=1, seq=8192, gpu="H100 SXM",
                            precision="bf16")
           for z, kw in (("z2", dict(zero=2)), ("nr", dict(zero=3, reshard_after_forward=False)))}
    _says(all(len(r.collectives) == 2 and r.collectives[0].calls == r.collectives[1].calls
              for r in big.values()),
          "Llama-3-8B's ZeRO-2 and no-reshard FSDP issue as many all-gathers as reduce-scatters")
    return {"bucket_m": f"{dp_bucket_params(2) / 1e6:.0f}M", "small_m": f"{m.n_params / 1e6:.0f}M",
            "8b_z2_calls": f"{big['z2'].collectives[0].calls}",
            "8b_nr_calls": f"{big['nr'].collectives[0].calls}"}


def _fits_table() -> str:
    rows = {}
    for name in published_logs():
        fit = from_nccl_tests(published_log(name))
        r = fit.regimes
        rows[name.removesuffix(".txt")] = {
            "ranks": fit.n_ranks, "one line: alpha (us)": f"{r.single.alpha_s * 1e6:.2f}",
            "busbw (GB/s)": f"{r.single.busbw_gbps:.1f}", "worst": f"{r.single.worst_rel_error:.0%}",
            "split": f"{r.split_bytes / 2**10:,.0f} KiB", "small: alpha (us)": f"{r.small.alpha_s * 1e6:.2f}",
            "large: busbw (GB/s)": f"{r.large.busbw_gbps:.1f}",
            "model line, worst": f"{r.combined.worst_rel_error:.0%}",
            "cheaper of two, worst": f"{r.protocols_worst_rel_error:.0%}"}
    return pd.DataFrame(rows).T.rename_axis("log").to_string()


def nccl_fits_prose() -> ChapterText:
    """The published nccl-tests logs fitted (the table the chapter prints, then ``data/links.csv``'s classes)
    and the texts of the prose: NVLink's and the two-node network's fits, the library's step time on the
    network log's setup, PCIe 3 and the H100 ring against NCCL's quoted figures. Raises
    :class:`ProseOutOfDate` where a reading fails (NCCL cannot have run a flat ring across the nodes, the
    library's hierarchical all-reduce within 5% of the log and the flat ring over 1.5 times it, PCIe's
    16 GB/s, NVLink 4's 450 GB/s inside the node)."""
    lines = [_fits_table()]
    nv = from_nccl_tests(published_log("a100_sxm4_8gpu_nvlink_oci_all_reduce.txt")).regimes
    net_fit = from_nccl_tests(published_log("h100_2x8_gcp_a3mega_tcpxo_all_reduce.txt"))
    net, n_ranks = net_fit.regimes, net_fit.n_ranks
    net_algbw = net.large.busbw_gbps / bus_factor("all_reduce", n_ranks)   # nccl-tests' busbw back to algbw
    t = {"nv_alpha": f"{nv.small.alpha_s * 1e6:.1f} µs", "nv_busbw": f"{nv.large.busbw_gbps:.0f} GB/s",
         "net_alpha": f"{net.small.alpha_s * 1e6:.1f} µs", "net_busbw": f"{net.large.busbw_gbps:.0f} GB/s",
         "net_node_busbw": f"{node_level_busbw(net_algbw, nodes=2):.0f} GB/s",
         "one_line_worst": f"{nv.single.worst_rel_error:.0%}",
         "nv_combined_worst": f"{nv.combined.worst_rel_error:.0%}",
         "nv_protocols_worst": f"{nv.protocols_worst_rel_error:.0%}",
         "net_protocols_worst": f"{net.protocols_worst_rel_error:.0%}"}
    # the nominal bandwidths the fractions are taken of, and the NICs of the network log's VMs
    nv_nominal = link_bandwidth_one_way_gbps("A100 40GB")       # NVLink 3, the NVLink log's A100 SXM4
    _says(abs(nv.large.busbw_gbps / nv_nominal - link_class("nvlink").achievable_fraction) < 0.005,
          "NVLink's achievable share is the A100 log's bus bandwidth over NVLink 3's one-way rate")
    t.update(nv_nominal=f"{nv_nominal:.0f} GB/s", net_nics=f"{A3_MEGA_NICS} x {A3_MEGA_NIC_GBITS:.0f} Gb/s",
             net_egress=f"{A3_MEGA_EGRESS_GBPS:.0f} GB/s")
    ring_egress = net_algbw * bus_factor("all_reduce", n_ranks)   # a flat ring: 2(n-1)/n x S leaves each node
    _says(ring_egress > A3_MEGA_EGRESS_GBPS, "NCCL cannot have run a flat ring across the two nodes")
    t["net_ring_factor"] = f"{bus_factor('all_reduce', n_ranks):.3f}"
    t["net_steps"] = f"{steps('all_reduce', n_ranks)}"
    # with the alpha data/links.csv keeps (the one the prose names), as chapter 6's latency does
    t["net_latency"] = f"{steps('all_reduce', n_ranks) * link_class('network').alpha_s * 1e6:,.0f} µs"
    small_rows = net_fit.table[net_fit.table["size_bytes"] <= 256]
    # the library's own step time on the log's setup: DGX H100's row with the a3-megagpu-8g's 8 x 200 Gb/s
    a3 = replace(get_node(gpu="H100 SXM"), nics_per_node=A3_MEGA_NICS, nic_gbits=A3_MEGA_NIC_GBITS)
    big_row = net_fit.table.sort_values("size_bytes").iloc[-1]
    a3_link = group_link("H100 SXM", a3, size=n_ranks)     # 8 of the group's GPUs per node: hierarchical
    t_lib = collective_time_s("all-reduce", float(big_row["size_bytes"]), n_ranks, a3_link)
    t_log = big_row["time_us"] * 1e-6
    # the count before issue 34: a flat ring's 2(n-1)/n S through the same NICs (per_domain=1: wire_factor)
    t_flat = collective_time_s("all-reduce", float(big_row["size_bytes"]), n_ranks,
                               replace(a3_link, per_domain=1))
    _says(abs(t_lib / t_log - 1) < 0.05 and t_flat > 1.5 * t_log,
          "the library's all-reduce is within 5% of the log, a flat ring over 1.5 times it")
    t.update(net_wire=f"{wire_factor('all-reduce', n_ranks, a3_link.per_domain):g}",
             net_flat_ms=f"{t_flat * 1e3:.1f} ms", net_big_gib=f"{big_row['size_bytes'] / GiB:.0f} GiB",
             net_busbw_last=f"{big_row['busbw_gbps']:.0f} GB/s", net_lib_ms=f"{t_lib * 1e3:.1f} ms",
             net_log_ms=f"{t_log * 1e3:.1f} ms", net_lib_ratio=f"{t_lib / t_log - 1:+.1%}".replace("-", "−"),
             net_ranks=f"{n_ranks}",
             net_log_small=f"{small_rows['time_us'].min():,.0f}–{small_rows['time_us'].max():,.0f} µs")
    pc = from_nccl_tests(published_log("rtx2080ti_2gpu_pcie3_all_reduce.txt")).regimes
    t["pcie3_line"] = f"{8 * 16 * 128 / 130 / 8:.2f} GB/s"   # 8 GT/s x 16 lanes, 128b/130b
    t["pcie3_nominal"] = f"{8 * 16 / 8:.0f} GB/s"             # 8 GT/s x 16 lanes / 8, the datasheets'
    t["pcie_busbw"] = f"{pc.large.busbw_gbps:.2f} GB/s"
    _says(abs(pc.large.busbw_gbps / (8 * 16 / 8) - link_class("pcie").achievable_fraction) < 0.005,
          "PCIe's achievable share is the log's bus bandwidth over 16 GB/s")
    # the A100's NVLink share on an H100 node: the ring the library prices against NCCL's quoted figures
    h100_ring = group_link("H100 SXM", get_node(gpu="H100 SXM"), size=8)
    _says(h100_ring.nominal_gbps == 450 and not h100_ring.across, "NVLink 4: 450 GB/s one way, in the node")
    t.update(h100_lib_busbw=f"{h100_ring.bandwidth_gbps:.0f} GB/s",
             h100_nominal=f"{h100_ring.nominal_gbps:.0f} GB/s",
             h100_quote_ring=f"{NCCL_H100_RING_BUSBW}", h100_quote_nvls=f"{NCCL_H100_NVLS_BUSBW} GB/s",
             h100_ring_share=f"{NCCL_H100_RING_BUSBW / h100_ring.nominal_gbps:.2f}",
             h100_ring_gap=f"{NCCL_H100_RING_BUSBW / h100_ring.bandwidth_gbps - 1:.0%}",
             h100_nvls_gap=f"{NCCL_H100_NVLS_BUSBW / h100_ring.bandwidth_gbps - 1:.0%}")
    for cls in ("nvlink", "network", "pcie", "infinity-fabric"):
        lc = link_class(cls)
        lines.append(f"links.csv {cls:<16s} achievable {lc.achievable_fraction:.2f} of nominal, alpha "
                     f"{lc.alpha_s * 1e6:.1f} us  <- {lc.source.split(':')[0]}")
        t[f"frac_{cls.replace('-', '_')}"] = f"{lc.achievable_fraction:.2f}"
        t[f"alpha_{cls.replace('-', '_')}"] = f"{lc.alpha_s * 1e6:.1f} µs"
    return ChapterText(t, "\n".join(lines) + "\n")
