"""Chapter 18's worked cases in sentences: DeepSeek-V3's dispatch on H800 nodes, a DGX H100 and an NVL72 rack,
beside DeepEP's published training kernels, its run built up term by term and its memory plan (issue 38).

:func:`rack_dispatch_prose` times the dispatch with :func:`~llmsizing.all_to_all.all_to_all_s` on the
catalogue's nodes, sums the step's expert-parallel all-to-alls with :func:`~llmsizing.comm.communication`, and
sets the H800 times beside DeepEP's normal kernels (its README's V1 table,
``data/deepep_normal_kernels.csv``); :func:`all_to_all_evidence_prose` the gloo measurement, the load skew and
the two machines. :func:`deepseek_terms_prose` reads :func:`~llmsizing.deepseek.deepseek_v3_time_terms`,
:func:`deepseek_memory_prose` :func:`~llmsizing.deepseek.deepseek_memory`. Each returns a
:class:`~llmsizing.prose.ChapterText`: the texts the chapter quotes, keyed by name (glued as ``ch18_<name>``),
in ``values``, what the cell prints in ``report`` and the table it formats in ``data["table"]``; and each
checks each statement the chapter makes about them (:class:`~llmsizing.prose.ProseOutOfDate` names one that no
longer holds). Nothing here computes a new quantity: it formats and compares what those functions return.
"""

from __future__ import annotations

from .prose import ChapterText, number_word
from .prose import prose_check as _prose_check
from .units import GiB

__all__ = ["split_words", "rack_dispatch_prose", "deepseek_terms_prose", "dualpipe_pick_prose",
           "deepseek_memory_prose",
           "all_to_all_evidence_prose", "gloo_all_to_all_figures", "RACK_NODE", "H800_NODE", "H100_NODE",
           "DEEPSEEK_V3_NVLINK_GBPS"]

#: The three machines of the worked case (``data/nodes.csv``).
RACK_NODE, H800_NODE, H100_NODE = "GB200 NVL72 compute tray", "HGX H800 (8-GPU)", "DGX H100"
#: The NVLink bandwidth DeepSeek-V3's report says its H800s get (DeepSeek-AI 2024, Sec. 3.2.2: "160 GB/s",
#: against 50 GB/s of InfiniBand): a published figure chapter 18 quotes, not a node row's datasheet rate.
DEEPSEEK_V3_NVLINK_GBPS = 160.0


def _says(holds, what: str) -> None:
    """Raise :class:`~llmsizing.prose.ProseOutOfDate` saying ``what`` chapter 18's prose says, unless
    ``holds``."""
    _prose_check(holds, what, "chapter 18's prose")


def split_words(split) -> str:
    """A pipeline split (layers per chunk, first to last) in the prose's words, runs of equal chunks counted:
    ``(3,) + (4,) * 14 + (2,)`` -> ``3, fourteen chunks of 4, then 2``. Raises ``ValueError`` for an empty
    split or a chunk that is not a count of 1 or more (``TypeError`` for a non-integer)."""
    from itertools import groupby

    split = tuple(split)
    if not split:
        raise ValueError("split must hold at least one chunk, got none")
    for n in split:
        number_word(n)                       # TypeError for a non-integer, ValueError for a negative count
        if n < 1:
            raise ValueError(f"each chunk of split must hold 1 layer or more, got {n}")
    parts = [f"{v}" if c == 1 else f"{number_word(c)} chunks of {v}"
             for v, c in ((v, len(list(g))) for v, g in groupby(split))]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + ", then " + parts[-1]


def rack_dispatch_prose(tokens: int = 4096) -> ChapterText:
    """DeepSeek-V3's FP8 dispatch of ``tokens`` tokens a GPU (``k = 8``, node-limited routing as it ran) on
    the H800 nodes, in an NVL72 rack and on DGX H100s, against DeepEP's normal kernels: the worked case's
    texts (``values``).

    Raises :class:`~llmsizing.prose.ProseOutOfDate` where a statement of the chapter fails: equal H800
    times at ``ep`` 8 and 16, the same NIC setting the H800 and H100 curves at 64, the model long against
    DeepEP at EP 8 only, DeepEP's own count short at EP 16 by its NVLink rate."""
    from ._validate import check_int
    from .all_to_all import (all_to_all_s, deepep_destinations, deepep_normal_nvl_gbps,
                             deepep_normal_published_s, deepep_normal_rows)
    from .catalog import get_gpu
    from .comm import communication
    from .deepseek import DEEPSEEK_V3_LAYOUT, DEEPSEEK_V3_MAX_NODES, DEEPSEEK_V3_MICRO_BATCHES
    from .model_catalog import get_model
    from .moe import FP8_DISPATCH_BYTES
    from .network import get_node, group_link

    tokens = check_int("tokens", tokens, minimum=1)
    ds3 = get_model("deepseek-v3")
    k, lim = ds3.experts_per_token, DEEPSEEK_V3_MAX_NODES
    buf = tokens * k * ds3.hidden * FP8_DISPATCH_BYTES
    one = {g: all_to_all_s(buf, 64, g, node, top_k=k, max_nodes=lim)
           for g, node in (("H800", H800_NODE), ("GB200", RACK_NODE))}
    step_a2a = {}
    for g, node in (("H800", H800_NODE), ("GB200", RACK_NODE)):    # every EP all-to-all of the step, one GPU
        comm = communication(ds3, DEEPSEEK_V3_LAYOUT, batch=1, seq=tokens, gpu=g, node=node,
                             grad_accum=DEEPSEEK_V3_MICRO_BATCHES, precision="fp8-deepseek", max_nodes=lim)
        step_a2a[g] = sum(c.time_s for c in comm.collectives if c.group == "ep")
    rack, hgx = get_node(RACK_NODE), get_node(H800_NODE)
    h800_8 = all_to_all_s(buf, 8, "H800", H800_NODE)
    h800_16 = all_to_all_s(buf, 16, "H800", H800_NODE, top_k=k, max_nodes=4)
    # at 16 DeepEP's forwarding leg carries 7/8 of the copies over NVLink, as ep=8 does: the same time
    _says(abs(h800_16 / h800_8 - 1) < 0.01, "the H800's first two points are equal")
    peak = {g: get_gpu(g).fp8_dense_tflops for g in ("H800", "GB200")}     # FP8 dense peaks, the catalogue's
    # DeepEP's normal kernels as times on the bytes DeepEP counts: a token once to each GPU (EP 8) or node
    # (EP 16, 64) holding one of its experts, its own too
    rows = deepep_normal_rows("dispatch")
    gbps = {e: float(r["bandwidth_gbps"]) for e, r in rows.items()}
    dep_s = {e: deepep_normal_published_s(e) for e in (8, 16, 64)}
    model_s = {8: h800_8, 16: h800_16, 64: one["H800"]}
    dep_x = {e: model_s[e] / dep_s[e] for e in dep_s}
    _says(dep_x[8] > 1.2 and all(0.95 < dep_x[e] < 1.05 for e in (16, 64)),
          "the model leans long against DeepEP at EP 8 only")
    deep_s = {e: all_to_all_s(buf, e, "H800", H800_NODE, top_k=k, max_nodes=None if e == 8 else lim,
                              dispatcher="deepep", experts=ds3.experts) for e in (8, 16, 64)}
    deep_x = {e: deep_s[e] / dep_s[e] for e in dep_s}
    _says(0.85 < deep_x[8] < 0.9 and deep_x[16] < 0.85 and abs(deep_x[64] / dep_x[64] - 1) < 1e-9,
          "counted DeepEP's way the model is short at EP 8 and 16 and unmoved at 64")
    nvl16, nvl_link = deepep_normal_nvl_gbps(16), group_link("H800", hgx, size=8).bandwidth_gbps
    _says(abs(deep_x[16] / (7 / 8 * nvl16 / nvl_link) - 1) < 0.02,
          "the EP 16 gap is the own copies times DeepEP's NVLink rate")
    nics = {get_node(n).nic_gbits for n in (H800_NODE, H100_NODE)}
    _says(len(nics) == 1, "the H800 and H100 nodes have the same NIC per GPU")
    h100 = {e: all_to_all_s(buf, e, "H100 SXM", H100_NODE, top_k=k, max_nodes=lim) for e in (8, 16, 64)}
    _says(abs(h100[64] / one["H800"] - 1) < 0.01, "the NIC sets both curves at 64")
    rdma = [g for e, g in gbps.items() if e > 8]
    out = {
        "nvl_link": f"{rack.intra_link_gbps_one_way:,.0f} GB/s", "nvl_as_of": rack.as_of,
        "nvl_h800_ms": f"{one['H800'] * 1e3:.2f} ms", "nvl_rack_ms": f"{one['GB200'] * 1e3:.2f} ms",
        "nvl_ratio": f"{one['H800'] / one['GB200']:.1f}",
        "nvl_step_h800": f"{step_a2a['H800']:.1f} s", "nvl_step_rack": f"{step_a2a['GB200']:.1f} s",
        "nvl_h800_ep8_ms": f"{h800_8 * 1e3:.2f} ms", "nvl_h800_ep16_ms": f"{h800_16 * 1e3:.2f} ms",
        "nvl_m": f"{DEEPSEEK_V3_MICRO_BATCHES}",
        "nvl_peak_ratio": f"{peak['GB200'] / peak['H800']:.1f}",
        "nvl_rel": f"{(step_a2a['H800'] / step_a2a['GB200']) / (peak['GB200'] / peak['H800']):.1f}",
        "nvl_deepep16_ms": f"{dep_s[16] * 1e3:.2f} ms",
        "dep_gbps_8": f"{gbps[8]:.0f} GB/s", "dep_gbps_rdma": f"{min(rdma):.0f} to {max(rdma):.0f} GB/s",
        "dep_gbps_64": f"{gbps[64]:.0f}",
        "dep_nvl_16": f"{nvl16:.0f} GB/s", "dep_nvl_rel": f"{nvl16 / gbps[8]:.2f}",
        "dep_nvl_link": f"{nvl_link:.0f} GB/s", "dep_deep_ms_8": f"{deep_s[8] * 1e3:.2f} ms",
        "dep_gpus_8": f"{deepep_destinations(8, k, ds3.experts, 8, int(rows[8]['topk_groups'])):.1f}",
        "nvl_nic": f"{nics.pop():.0f} Gb/s", "nvl_dev16": f"{h800_16 / dep_s[16]:.2f}",
        "nvl_h100_link": f"{get_node(H100_NODE).intra_link_gbps_one_way:,.0f} GB/s",
        "nvl_h100_ep8_ms": f"{h100[8] * 1e3:.2f} ms", "nvl_h100_ep16_ms": f"{h100[16] * 1e3:.2f} ms",
    }
    for e in (8, 64):
        out[f"dep_ms_{e}"] = f"{dep_s[e] * 1e3:.2f} ms"
        out[f"dep_x_{e}"] = f"{dep_x[e]:.2f}"
    for e in (8, 16, 64):
        out[f"dep_dx_{e}"] = f"{deep_x[e]:.2f}"
    return ChapterText(values=out)


def deepseek_terms_prose() -> ChapterText:
    """DeepSeek-V3's run built up term by term (:func:`~llmsizing.deepseek.deepseek_v3_time_terms`): the table
    the chapter prints (formatted, in ``data["table"]``, printed as ``report``) and the texts its prose quotes
    (``values``): the MTP module's
    share of the FLOPs and of the step, the layer split, the SMs kept for communication, the sum against the
    published GPU-hours with the MoE range around it, and the memory plan's allowance rule.

    Raises :class:`~llmsizing.prose.ProseOutOfDate` where a statement of the chapter fails: the sum
    within 15% of the published figure, the split shortening the step, the MTP module's step cost (its
    memory-bound kernels aside) under its share of the FLOPs, rank 0 holding fewest layers, the SMs the
    largest term, the memory plan's split one layer off each end of the even split (both glued in words,
    :func:`split_words`), the even split's chunk 0 the three dense layers and one MoE layer and its chunk 15
    three MoE layers."""
    from dataclasses import replace

    from .catalog import get_gpu
    from .deepseek import DEEPSEEK_V3_BALANCED_SPLIT, DEEPSEEK_V3_LAYOUT, DEEPSEEK_V3_MICRO_BATCHES, \
        deepseek_v3_time_terms
    from .flops import training_flops_per_token
    from .memory import FIXED_OVERHEAD_BYTES, FRAGMENTATION
    from .mfu import layout_range_factors
    from .model_catalog import get_model
    from .moe import mtp_flops_per_token
    from .moe import stage_moe_layers
    from .moe_runs import moe_published_runs
    from .moe_time import GPU_SMS
    from .mtp import mtp_param_counts
    from .parallel import layers_per_stage
    from .pipeline_schedule import dualpipe_rank_mean
    from .pointwise import ends_pointwise_bytes_per_token, pointwise_seconds, stage_pointwise_bytes_per_token

    ds3 = get_model("deepseek-v3")
    terms = deepseek_v3_time_terms()
    table = terms.assign(gpu_hours=terms["gpu_hours"].map("{:,.0f}".format),
                         ratio=terms["ratio"].map("{:.2f}".format),
                         mfu=terms["mfu"].map("{:.1%}".format)).round(2)
    counts = mtp_param_counts(ds3)
    mtp_own = counts["block"] + counts["projection"]
    mtp_share = mtp_flops_per_token(ds3, seq=4096) / training_flops_per_token(ds3, seq=4096)
    final, hours, step = terms.iloc[-1], terms["gpu_hours"], terms["step_s"]
    _says(abs(final["ratio"] - 1) <= 0.15, "the bottom-up sum lies within 15% of the published GPU-hours")
    _says("split" in terms.index[2] and hours.iloc[2] < hours.iloc[1],
          "the third row is the memory plan's layer split, and it shortens the step")
    # the MTP row against the module's FLOPs: its memory-bound kernels (its MoE layer and a second loss, an
    # fp32 softmax over the vocabulary) on the last stage, which DualPipe's rank 0 shares
    par = replace(DEEPSEEK_V3_LAYOUT, stage_layers=DEEPSEEK_V3_BALANCED_SPLIT)
    pw_stage = [a - b for a, b in zip(stage_pointwise_bytes_per_token(ds3, par, mtp_depth=1),
                                      stage_pointwise_bytes_per_token(ds3, par, mtp_depth=0))]
    pw_bytes = pw_stage[-1]                                  # per token, the MTP module's (last stage)
    tokens, hbm = 4096 * DEEPSEEK_V3_MICRO_BATCHES, get_gpu("H800").memory_bandwidth_gbps * 1e9
    pw_rank_s = pointwise_seconds(max(dualpipe_rank_mean(pw_stage)), tokens, hbm)      # DualPipe's rank
    step_mtp = step.iloc[3] / step.iloc[2] - 1
    rest = (step.iloc[3] - step.iloc[2] - pw_rank_s) / step.iloc[2]
    _says(rest < mtp_share, "without its memory-bound kernels the MTP module costs less than its FLOPs")
    # DualPipe's rank r works stages r and pp-1-r: the layers each rank holds
    rank_layers = [a + b for a, b in zip(DEEPSEEK_V3_BALANCED_SPLIT, DEEPSEEK_V3_BALANCED_SPLIT[::-1])]
    _says(rank_layers[0] < min(rank_layers[1:-1]), "the split leaves room on rank 0")
    moves = (hours / hours.shift() - 1).abs().iloc[1:]
    _says(moves.idxmax() == terms.index[4], "the SMs kept for communication are the largest term")
    even = layers_per_stage(ds3.layers, DEEPSEEK_V3_LAYOUT)
    split = DEEPSEEK_V3_BALANCED_SPLIT
    _says((split[0], split[-1]) == (even[0] - 1, even[-1] - 1) and set(split[1:-1]) == {even[0]},
          "the memory plan's split takes one layer off each end of the even split")
    # what the even split puts on DualPipe's rank 0, as the memory section words it: chunk 0 the three dense
    # layers and one MoE layer, chunk 15 three MoE layers
    moe_even = stage_moe_layers(ds3, DEEPSEEK_V3_LAYOUT)
    _says((even[0] - moe_even[0], moe_even[0], len(even) - 1, moe_even[-1], even[-1]) == (3, 1, 15, 3, 3),
          "the even split's chunk 0 holds the three dense layers and one MoE layer, chunk 15 three MoE "
          "layers")
    v3 = moe_published_runs().query("model == 'deepseek-v3'").iloc[0]        # its report's SMs (Sec. 3.2.2)
    sms, comm_sms = GPU_SMS[v3["gpu"]], int(v3["comm_sms"])
    lo, hi = layout_range_factors("H800", "fp8", moe=True)
    texts = {
        "mtp_share": f"{mtp_share:.1%}", "mtp_flop_x": f"{mtp_share / (mtp_own / ds3.n_params):.1f}",
        "terms_first": f"{hours.iloc[0] / 1e6:.2f}M", "terms_dualpipe": f"{hours.iloc[1] / 1e6:.2f}M",
        "terms_split": f"{hours.iloc[2] / 1e6:.2f}M", "terms_mtp": f"{hours.iloc[3] / hours.iloc[2] - 1:.1%}",
        "mtp_vs": "more than" if step_mtp > mtp_share else "less than",
        "mtp_pw_s": f"{pointwise_seconds(pw_bytes, tokens, hbm):.2f} s",
        "rank0_layers": f"{rank_layers[0]}", "rank_layers": f"{max(rank_layers[1:-1])}",
        "mtp_loss_share": f"{ends_pointwise_bytes_per_token(ds3)[1] / pw_bytes:.0%}",
        "mtp_rest": f"{rest:.1%}", "terms_sms": f"{hours.iloc[4] / hours.iloc[3] - 1:.0%}",
        "comm_sms": f"{comm_sms}", "h800_sms": f"{sms}", "compute_sms": f"{sms - comm_sms}",
        "terms_final": f"{final['gpu_hours'] / 1e6:.2f}M",
        "terms_dev": f"{final['gpu_hours'] / terms.attrs['published_gpu_hours'] - 1:+.1%}",
        "terms_mfu": f"{final['mfu']:.1%}",
        "terms_range": f"{final['gpu_hours'] / hi / 1e6:.2f}M to {final['gpu_hours'] / lo / 1e6:.2f}M",
        "allow_rule": f"{FIXED_OVERHEAD_BYTES / GiB:.0f} GiB + {FRAGMENTATION:.0%}",
        "split_balanced": split_words(split), "split_even": split_words(even), "ds3_layers": f"{ds3.layers}",
    }
    return ChapterText(values=texts, report=table.to_string(), data={"table": table})


def dualpipe_pick_prose() -> ChapterText:
    """What ``plan(schedule="dualpipe")`` picks for DeepSeek-V3 on its 2,048 H800s: its batch and tokens
    (its row of ``data/moe_published_runs.csv``) and its recipe (FP8 as DeepSeek ran it, the MTP module,
    20 SMs kept for communication, the all-to-all hidden), the fastest plan on exactly that many GPUs (its
    layout, micro-batches and GPU-hours with the plan's range, glued as ``dp_pick_*``) beside the published
    layout (:data:`~llmsizing.deepseek.DEEPSEEK_V3_LAYOUT`), and the runner-up of another expert-parallel
    degree (``dp_pick_next_ep``, ``dp_pick_next_gap``: how close the choice of ``ep`` is). Raises
    :class:`~llmsizing.prose.ProseOutOfDate` unless the pick runs the published ``pp`` and ``ep`` with
    ZeRO-1, no tensor parallelism and full recomputation (the published layout does not fit without it), at
    more GPU-hours than the term-by-term sum (:func:`~llmsizing.deepseek.deepseek_v3_time_terms`), as the
    prose says."""
    from .deepseek import DEEPSEEK_V3_LAYOUT, DEEPSEEK_V3_MTP_DEPTH, deepseek_v3_time_terms
    from .moe_runs import moe_published_runs
    from .planner import plan

    lay = DEEPSEEK_V3_LAYOUT
    v3 = moe_published_runs().query("model == 'deepseek-v3'").iloc[0]
    df = plan("deepseek-v3", tokens=float(v3["tokens"]), gpus=(v3["gpu"],), seq=int(v3["seq"]),
              global_batch=int(v3["global_batch"]), gpu_counts=(lay.gpus,), schedule="dualpipe",
              precision=v3["precision"], mtp_depth=DEEPSEEK_V3_MTP_DEPTH, comm_sms=int(v3["comm_sms"]),
              ep_overlap=float(v3["ep_overlap"]))
    pick = df.iloc[0]
    _says((int(pick["pp"]), int(pick["ep"]), int(pick["zero"]), int(pick["tp"])) == (lay.pp, lay.ep, 1, 1),
          "plan(schedule='dualpipe') picks the published pp and ep, ZeRO-1, no tensor parallelism")
    same = (df["pp"] == lay.pp) & (df["ep"] == lay.ep) & (df["dp"] == lay.dp) & (df["tp"] == 1)
    _says(pick["recompute"] == "full" and set(df.loc[same, "recompute"]) == {"full"},
          "the published layout fits the search only with full recomputation")
    _says(pick["gpu_hours"] > deepseek_v3_time_terms()["gpu_hours"].iloc[-1],
          "the pick, fully recomputed, costs more GPU-hours than the term-by-term sum")
    other = df[df["ep"] != pick["ep"]].iloc[0]            # the fastest plan of another expert-parallel degree
    gap = other["gpu_hours"] / pick["gpu_hours"] - 1
    _says(gap < 0.01, "another expert-parallel degree comes within 1% of the pick")
    low, high = (pick["gpu_hours"] * pick[f"days_{e}"] / pick["days"] for e in ("low", "high"))
    texts = {"dp_pick_pp": f"{int(pick['pp'])}", "dp_pick_ep": f"{int(pick['ep'])}",
             "dp_pick_dp": f"{int(pick['dp'])}", "dp_pick_micro": f"{int(pick['micro_batch'])}",
             "dp_pick_m": f"{int(pick['grad_accum'])}", "dp_pick_rc": f"{pick['recompute']}",
             "dp_pick_gh": f"{pick['gpu_hours'] / 1e6:.2f}M", "dp_pick_n": f"{len(df):,}",
             "dp_pick_gh_range": f"{low / 1e6:.2f}M to {high / 1e6:.2f}M",
             "dp_pick_next_ep": f"{int(other['ep'])}", "dp_pick_next_gap": f"{gap:.2%}"}
    return ChapterText(values=texts, report="", data={"plans": df})


def deepseek_memory_prose(check=None) -> ChapterText:
    """DeepSeek-V3's own memory plan (:func:`~llmsizing.deepseek.deepseek_memory`) as the chapter shows it:
    the printed ``report`` (what an MoE layer keeps per token, the most loaded GPU under each recipe and
    split, the balanced split rank by rank) and the texts its prose quotes (``values``). ``check`` is
    :func:`~llmsizing.deepseek.deepseek_v3_check`'s result (computed when ``None``).

    Raises :class:`~llmsizing.prose.ProseOutOfDate` where a statement of the chapter fails: the
    experts' outputs kept for the combine ($2kh$ bytes) the largest tensor, the balanced split fitting and the
    even one and the kept outputs not, the margin under the allowance, DualPipe holding about twice 1F1B's
    states and more micro-batches in flight."""
    from dataclasses import replace

    import pandas as pd

    from .catalog import get_gpu
    from .deepseek import DEEPSEEK_V3_BALANCED_SPLIT, DEEPSEEK_V3_LAYOUT, DEEPSEEK_V3_MICRO_BATCHES, \
        deepseek_layer_bytes, deepseek_memory, deepseek_v3_check
    from .model_catalog import get_model

    ds3, chk = get_model("deepseek-v3"), deepseek_v3_check() if check is None else check
    per_token = deepseek_layer_bytes(ds3)
    kept = deepseek_layer_bytes(ds3, probs_in_swiglu=False)
    _says(max(kept, key=kept.get) == "combine" and kept["combine"] == 2 * ds3.experts_per_token * ds3.hidden,
          "the experts' outputs kept for the combine, 2kh bytes, are the largest tensor")
    h800 = get_gpu("H800").memory_bytes
    rows = {f"library 1F1B, recompute={rc}": (chk[f"memory_gib_{rc}"], chk[f"fits_{rc}"])
            for rc in ("none", "selective", "full")}
    rows |= {"DeepSeek recipe, DualPipe, even split": (chk["memory_gib_deepseek_even"],
                                                       chk["fits_deepseek_even"]),
             "DeepSeek recipe, DualPipe, balanced split": (chk["memory_gib_deepseek_balanced"],
                                                           chk["fits_deepseek_balanced"]),
             "  ... experts' outputs kept for the combine": (chk["memory_gib_deepseek_combine"],
                                                             chk["fits_deepseek_combine"]),
             "  ... balanced split under 1F1B (one copy)": (chk["memory_gib_deepseek_1f1b"],
                                                            chk["memory_gib_deepseek_1f1b"] <= h800 / GiB)}
    layout = replace(DEEPSEEK_V3_LAYOUT, stage_layers=DEEPSEEK_V3_BALANCED_SPLIT)
    balanced = deepseek_memory(ds3, layout)
    split = DEEPSEEK_V3_BALANCED_SPLIT
    report = "\n".join([
        "what one MoE layer keeps per token (bytes): "
        + ", ".join(f"{k} {v:,.0f}" for k, v in per_token.items()),
        pd.DataFrame({k: {"most loaded GPU": f"{v:.1f} GiB", "fits 80 GB": "yes" if ok else "no"}
                      for k, (v, ok) in rows.items()}).T.to_string(),
        f"\nDualPipe, layers per chunk {split[0]}, 4 x 14, {split[-1]} (+ MTP):",
        balanced.table.round(1).to_string()])
    _says(chk["fits_deepseek_balanced"] and not (chk["fits_deepseek_even"] or chk["fits_deepseek_combine"]),
          "the balanced split fits, the even split and the kept outputs do not")
    top = balanced.ranks[balanced.rank]
    _says(top["total"] / GiB == chk["memory_gib_deepseek_balanced"], "the table's row is this plan's")
    _says(h800 - top["total"] < top["total"] - top["peak"], "the margin is smaller than the allowance")
    # what DualPipe's overlap costs: the same split under 1F1B, rank by rank
    one = deepseek_memory(ds3, layout, seq=4096, grad_accum=DEEPSEEK_V3_MICRO_BATCHES, schedule="1f1b")
    _says(one.total_bytes / GiB == chk["memory_gib_deepseek_1f1b"], "the 1F1B row is this plan's")
    r1, r2 = one.ranks[one.rank], balanced.ranks[one.rank]
    _says(r2["states"] > 1.9 * r1["states"] and sum(r2["in_flight"]) > sum(r1["in_flight"]),
          "DualPipe costs memory twice: a second parameter copy and more micro-batches in flight")
    texts = {}
    for tag in ("even", "balanced", "combine"):
        texts[f"dsm_{tag}"] = f"{chk[f'memory_gib_deepseek_{tag}']:.1f}"
        texts[f"dsm_{tag}_states"] = f"{chk[f'states_gib_deepseek_{tag}']:.1f}"
        texts[f"dsm_{tag}_acts"] = f"{chk[f'activations_gib_deepseek_{tag}']:.1f}"
    texts |= {
        "dsm_1f1b": f"{chk['memory_gib_deepseek_1f1b']:.1f}", "h800_gib": f"{h800 / GiB:.1f}",
        "dsm_spare": f"{h800 / GiB - chk['memory_gib_deepseek_balanced']:.1f}",
        "dsm_over": f"{chk['memory_gib_deepseek_even'] - h800 / GiB:.1f}",
        "dsm_layer_kib": f"{sum(per_token.values()) / 1024:.0f}",
        # the rest of the most loaded GPU's total: the backward's working set (peak - kept) and the allowance
        "dsm_work": f"{(top['peak'] - top['states'] - top['activations']) / GiB:.1f}",
        "dsm_allow": f"{(top['total'] - top['peak']) / GiB:.1f}",
        "dsm_1f1b_rank": f"{one.rank}",
    }
    for tag, r in (("1f1b", r1), ("dual", r2)):
        texts[f"dsm_{tag}_r_states"] = f"{r['states'] / GiB:.1f}"
        texts[f"dsm_{tag}_r_acts"] = f"{r['activations'] / GiB:.1f}"
        texts[f"dsm_{tag}_r_flight"] = f"{sum(r['in_flight']):.0f}"
    return ChapterText(values=texts, report=report)


def gloo_all_to_all_figures(cmp=None) -> dict[str, str]:
    """How far the gloo measurement's forward dispatch lies from $S_\\text{a2a}$
    (:func:`~llmsizing.dist_compare.compare_all_to_all`, computed when ``cmp`` is ``None``), as chapter 18 and
    the appendix print it: under the near-uniform router (``hf-init``) the largest deviation of a rank's mean
    bytes (``gloo_mean_dev``) and of the busiest rank's (``gloo_busy_dev``); under skewed routing the busiest
    rank's range over the formula (``gloo_skew_min``, ``gloo_skew_max``)."""
    from .dist_compare import compare_all_to_all

    cmp = compare_all_to_all() if cmp is None else cmp
    near, skew = cmp.xs("hf-init", level="routing"), cmp.xs("skewed", level="routing")
    return {"gloo_mean_dev": f"{(near['ratio_mean'] - 1).abs().max():.1%}",
            "gloo_busy_dev": f"{(near['ratio_busiest'] - 1).max():.1%}",
            "gloo_skew_max": f"{skew['ratio_busiest'].max():.2f}",
            "gloo_skew_min": f"{skew['ratio_busiest'].min():.2f}"}


def all_to_all_evidence_prose(layout: dict) -> ChapterText:
    """The all-to-all measured and assumed, as the chapter shows it: the gloo measurement against
    $S_\\text{a2a}$ (:func:`~llmsizing.dist_compare.compare_all_to_all`, formatted, in ``data["table"]``,
    printed as ``report``) and the texts its prose quotes (``values``): how far the measured bytes lie from
    the formula, the published load skew (:func:`~llmsizing.moe_time.load_skew_table`) and what its spread
    moves in the step of ``layout`` (the "Try it" widget's Mixtral layout, ``charts.MOE_LAYOUT_DEFAULT``:
    ``dp``, ``zero``, ``batch``, ``seq``, ``grad_accum``, ``recompute``), the worked case's two machines
    (``data/nodes.csv``) and how near the network model comes to DeepEP's low-latency kernels across nodes
    (``data/deepep_all_to_all.csv``).

    Raises :class:`~llmsizing.prose.ProseOutOfDate` if the H800 node no longer has one NIC per GPU."""
    import csv

    from .all_to_all import all_to_all_s
    from .catalog import DATA_DIR, get_gpu
    from .dist_compare import compare_all_to_all
    from .layouts import step_time
    from .model_catalog import get_model
    from .moe_time import load_skew, load_skew_table
    from .network import get_node
    from .parallel import Parallel

    mix, ds3 = get_model("mixtral-8x7b"), get_model("deepseek-v3")
    cmp = compare_all_to_all()
    table = cmp.reset_index()
    table["library KiB"] = (table["library_bytes"] / 1024).map("{:,.0f}".format)
    table["measured mean KiB"] = (table["sent_mean_bytes"] / 1024).map("{:,.0f}".format)
    for col, name in (("ratio_mean", "mean / library"), ("ratio_busiest", "busiest / library"),
                      ("sigma", "1 sigma")):
        table[name] = table[col].map("{:.3f}".format)
    table = table.drop(columns=[c for c in cmp.columns if c != "ranks"])
    vio = load_skew_table().groupby("routing")["max_vio"]           # the published rows: 1B and 3B, two gates
    v_lo, v_hi = vio.min()["aux-loss"], vio.max()["aux-loss"]
    par = Parallel(ep=8, dp=layout["dp"], zero=layout["zero"])
    kw = dict(batch=layout["batch"], seq=layout["seq"], grad_accum=layout["grad_accum"],
              recompute=layout["recompute"])
    st = {v: step_time(mix, get_gpu("H100 SXM"), par, load_skew=None if v is None else 1 + v, **kw).step_s
          for v in (None, v_lo, v_hi)}                               # E / ep = 1: the skew is 1 + v
    hgx, nvl = get_node(H800_NODE), get_node(RACK_NODE)
    _says(hgx.nics_per_node == hgx.gpus_per_node, "the H800 node has one NIC per GPU")
    with open(DATA_DIR / "deepep_all_to_all.csv", newline="") as f:     # chapter 15's check of the same model
        ll = [all_to_all_s(int(r["tokens_per_gpu"]) * int(r["experts_per_token"]) * int(r["hidden"])
                           * int(r["bytes_per_number"]), int(r["ep"]), r["gpu"])
              / (float(r["latency_us"]) * 1e-6) for r in csv.DictReader(f) if int(r["ep"]) > 8]
    nic = hgx.nic_gbits / 8
    texts = {
        **gloo_all_to_all_figures(cmp),
        "skew_mix": f"{load_skew(mix, 8):.2f}", "skew_ds3": f"{load_skew(ds3, 64):.2f}",
        "skew_ds3_flat": f"{load_skew(ds3, ds3.experts):.2f}",     # one expert a rank: the skew unshrunk
        "vio_lo": f"{v_lo:.2f}", "vio_hi": f"{v_hi:.2f}", "vio_mean": f"{vio.mean()['aux-loss']:.2f}",
        "vio_free_lo": f"{vio.min()['aux-loss-free']:.3f}",
        "vio_free_hi": f"{vio.max()['aux-loss-free']:.3f}",
        "vio_free_mean": f"{vio.mean()['aux-loss-free']:.3f}",
        "skew_mix_lo": f"{1 + v_lo:.2f}", "skew_mix_hi": f"{1 + v_hi:.2f}",
        "skew_gpus": f"{par.gpus:,}", "widget_seq": f"{layout['seq']:,}",
        "skew_step_dev": f"{max(abs(st[v] / st[None] - 1) for v in (v_lo, v_hi)):.0%}",
        "h800_nic_gbit": f"{hgx.nic_gbits:.0f} Gb/s", "nic": f"{nic:,.0f} GB/s",
        "h800_link": f"{hgx.intra_link_gbps_one_way:,.0f} GB/s",
        "nvl_160": f"{DEEPSEEK_V3_NVLINK_GBPS:.0f} GB/s",
        "nvl_160_x": f"{DEEPSEEK_V3_NVLINK_GBPS / nic:.1f}",        # the report's NVLink over the NIC
        "nic_of_nvl": f"{nic / hgx.intra_link_gbps_one_way:.0%}",
        "nvl_domain": f"{nvl.scaleup_domain_gpus}",
        "nvl_trays": f"{nvl.scaleup_domain_gpus // nvl.gpus_per_node}",
        "nvl_tray_gpus": f"{nvl.gpus_per_node}",
        "ll_within": f"{max(abs(x - 1) for x in ll):.0%}",
    }
    return ChapterText(values=texts, report=table.to_string(index=False), data={"table": table})
