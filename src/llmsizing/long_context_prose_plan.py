"""Chapter 17's sections in sentences after the opening (:mod:`llmsizing.long_context_prose`): Meta's 128K
step and the known gap to Table 4, the same degrees read as a Megatron-LM run with partial recomputation, the
GB200 NVL72 racks, the CPU measurement of the exchanges and the planner's answer (issue 38: notebooks stay
short, long code belongs in the library).

Each ``*_prose`` function takes what the chapter's cell computed (the layouts, steps and plans the reader
sees), checks what the prose says about them (:func:`~llmsizing.prose.prose_check`) and returns a
:class:`~llmsizing.prose.ChapterText`: the texts glued as ``ch17_<name>`` (``values``), what the cell prints
(``report``) and what later cells read (``data``). No new arithmetic: every figure is the library's own.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import pandas as pd

from .calibration import KERNEL_FIT_MAX_CP, fit_kernel_efficiency, generation_of, run_mfu_at
from .catalog import get_gpu
from .comm import communication
from .cp_sweep import WLB_LLM_SHORT_DOC_SHARE, cp_overlap_sweep, document_mask_check
from .flops import training_flops_per_token
from .layouts import USABLE_FRACTION, least_recompute_layers, recompute_layer_sweep, step_time
from .long_context_prose import LONG_SEQ, SHORT_SEQ
from .memory import training_memory
from .mfu_published import published_runs
from .network import get_node
from .parallel import LLAMA3_RECIPE, chunk_layers, recomputed_layers
from .prose import ChapterText, prose_check
from .units import fmt_gib

__all__ = ["meta_prose", "gap_prose", "zero1_prose", "partial_prose", "nvl_prose", "gloo_setup_prose",
           "gloo_prose", "planner_prose"]

_says = partial(prose_check, chapter="chapter 17's prose")
#: Table 4's 8K row of ``data/published_runs.csv``
LLAMA3_8K_ROW = "Llama 3.1 405B, 16,384 GPUs (TP8 PP16 DP128)"


def meta_prose(t_meta, s_meta, s_meta8, t_8k, gpu, published: float) -> ChapterText:
    """Llama 3's 128K layout as Meta describes it (``t_meta``/``s_meta``: its memory and step; ``s_meta8``
    the 8K step, ``t_8k`` the 8K memory), against Table 4's ``published`` MFU. Checks that it fits without
    recomputation with the 8K run's activations, more than the planner's USABLE_FRACTION, that the layout
    range holds Table 4 and that 128K's MFU is above 8K's (not Meta's direction)."""
    _says(t_meta.total_bytes <= gpu.memory_bytes, "Meta's 128K layout fits without recomputation")
    _says(t_meta.activations_bytes == t_8k.activations_bytes, "its activations are the 8K run's")
    _says(USABLE_FRACTION * gpu.memory_bytes < min(t_meta.total_bytes, t_8k.total_bytes),
          "both steps fit with little room, more than the planner's USABLE_FRACTION allows")
    lo, hi = s_meta.mfu_range                                  # the layout range (chapter 11)
    _says(not s_meta.range_note and lo <= published <= hi, "the layout range is calibrated and holds Table 4")
    _says(s_meta.mfu > s_meta8.mfu, "the direction against 8K is not Meta's")
    values = {"meta_gib": fmt_gib(t_meta.total_bytes),
              "meta_margin": fmt_gib(gpu.memory_bytes - t_meta.total_bytes),
              "margin_8k": fmt_gib(gpu.memory_bytes - t_8k.total_bytes),
              "pr_usable_frac": f"{USABLE_FRACTION:.0%}", "meta_grads": fmt_gib(t_meta.gradients_bytes),
              "meta_mfu": f"{s_meta.mfu:.1%}", "meta_ratio": f"{s_meta.mfu / published:.2f}",
              "meta_mfu_range": f"{lo:.1%} to {hi:.1%}", "meta8_mfu": f"{s_meta8.mfu:.1%}",
              "meta_act": fmt_gib(t_meta.activations_bytes), "meta_bubble": f"{s_meta.bubble:.0%}"}
    return ChapterText(values=values)


def gap_prose(model, gpu, meta128, m: int, s_meta, s_meta8, row, published: float) -> ChapterText:
    """The known gap: 128K against 8K in Table 4 and in the library, each published run with context
    parallelism against a run of its source at 8K (the library's MFU at the calibrated kernel efficiency
    over the published one: ``data["over"]``), and what each way of counting the FLOPs gives (WLB-LLM's
    documents, :func:`~llmsizing.cp_sweep.document_mask_check`; counted causally). Checks the prose's
    directions on them."""
    long, short = LONG_SEQ, SHORT_SEQ
    runs = published_runs()
    tflops = runs.set_index("run")["reported_tflops_per_gpu"]      # Llama 3 paper, Table 4
    gap_lib = s_meta.mfu / s_meta8.mfu                              # the library: 128K over 8K
    gap_pub = row["reported_tflops_per_gpu"] / tflops[LLAMA3_8K_ROW]   # Table 4: 380 / 400
    values = {"gap_lib": f"{gap_lib:.3f}", "gap_pub": f"{gap_pub:.2f}",   # 0.95 exact: 380 / 400
              "gap_rel": f"{gap_lib / gap_pub - 1:.1%}",          # so a reader's gap_lib / 0.95 gives it
              "pub8_tflops": f"{tflops[LLAMA3_8K_ROW]:.0f}",
              "cp_runs": f"{int((runs['cp'].fillna(1) > 1).sum())}"}
    _, medians = fit_kernel_efficiency()
    by_run = {r.run: r for r in runs.itertuples(index=False)}
    over = {}
    for key, name in (("l3_128k", row.name), ("l3_8k", LLAMA3_8K_ROW),
                      ("tt_128k", "Llama 3.1 8B, 8 GPUs FSDP2 CP4, 128K context, Float8 (torchtitan)"),
                      ("tt_8k", "Llama 3.1 8B, 8 GPUs FSDP + torch.compile (torchtitan)")):
        r = by_run[name]
        eff = medians.loc[(generation_of(r.gpu, r.dtype), r.dtype), "median"]
        over[key] = run_mfu_at(r, eff) / r.implied_mfu
        values[f"over_{key}"] = f"{over[key]:.2f}"
    _says(over["l3_128k"] > over["l3_8k"] and over["tt_128k"] > over["tt_8k"],
          "both sources err the same way")
    meta_runs = runs.set_index("run")["reported_mfu"]
    values["meta_pub8"] = f"{meta_runs[LLAMA3_8K_ROW]:.0%}"
    values["meta_pub128"] = f"{meta_runs[row.name]:.0%}"
    # WLB-LLM's documents (Sec. 2.2: over 75% of the tokens in documents shorter than half the window) bound
    # the token-weighted mean document; Table 4's 128K MFU counted over the window or over each document
    doc = document_mask_check(model, gpu, meta128, seq=long, mfu=s_meta8.mfu, share=WLB_LLM_SHORT_DOC_SHARE,
                              shorter_than=long // 2, grad_accum=m, precision=LLAMA3_RECIPE)
    _says(doc.mfu_over_window > 1.25 * published, "counted over the window, far above Table 4")
    _says(abs(doc.mfu_per_document / s_meta8.mfu - 1) < 0.01 and doc.mfu_half_window < s_meta8.mfu,
          "counted per document it turns")
    _says(all(step_time(model, gpu, meta128, batch=1, seq=long, grad_accum=m, precision=LLAMA3_RECIPE,
                        attention_seq=a).mfu < s_meta8.mfu for a in (2048, 8192, 32768)),
          "below the 8K MFU all the way down")
    values.update({"doc_bound": f"{doc.mean_bound:,.0f}", "doc_share": f"{WLB_LLM_SHORT_DOC_SHARE:.0%}",
                   "window_mfu": f"{doc.mfu_over_window:.0%}",
                   "window_ratio": f"{doc.mfu_over_window / published:.2f}",
                   "doc_mfu": f"{doc.mfu_per_document:.1%}", "half_mfu": f"{doc.mfu_half_window:.1%}",
                   "doc_cross": f"{doc.crossing:,}"})   # the longest mean still below 8K, to the token
    # counted causally over the whole window (half the matrix, as the kernels run it), at 128K and at 8K
    flops = training_flops_per_token
    causal, causal8 = (flops(model, seq=q, causal=True) / flops(model, seq=q) for q in (long, short))
    _says(s_meta8.mfu * causal8 > s_meta.mfu * causal, "counted causally, 128K falls below 8K")
    values.update({"k_mfu_causal": f"{s_meta.mfu * causal:.1%}",
                   "k_ratio_causal": f"{s_meta.mfu * causal / published:.2f}",
                   "k_mfu8_causal": f"{s_meta8.mfu * causal8:.1%}"})
    return ChapterText(values=values, data={"over": over})


def zero1_prose(model, gpu, l3, m: int, row, published: float, t_meta,
                res: dict | None = None) -> ChapterText:
    """Meta's degrees read as a Megatron-LM run (``l3``: ZeRO-1, 4 chunks), without and with full
    recomputation (:func:`~llmsizing.memory.training_memory`, :func:`~llmsizing.layouts.step_time`).
    ``res``: recompute -> (memory, step) as the chapter's cell computed them (computed here when None).
    ``report``: each one's memory and step, and Table 4's figure; ``data["res"]``: ``res``. Raises
    ValueError if ``res`` lacks "none" or "full"."""
    if res is None:
        res = {rc: (training_memory(model, batch=1, seq=LONG_SEQ, grad_accum=m, parallel=l3, recompute=rc),
                    step_time(model, gpu, l3, batch=1, seq=LONG_SEQ, grad_accum=m, recompute=rc))
               for rc in ("none", "full")}
    if not {"none", "full"} <= set(res):
        raise ValueError(f"res must hold the runs with recompute 'none' and 'full', got {sorted(res)}")
    values, lines = {}, []
    for rc in ("none", "full"):
        t, s = res[rc]
        values[f"l3_{rc}_gib"] = fmt_gib(t.total_bytes)
        values[f"l3_{rc}_mfu"] = f"{s.mfu:.1%}"
        values[f"l3_{rc}_ratio"] = f"{s.mfu / published:.2f}"
        lines.append(f"recompute={rc:4s}: {fmt_gib(t.total_bytes)} on the most loaded GPU (stage {t.stage}, "
                     f"peak in the {t.peak_phase}), step {s.step_s:.1f} s = compute {s.compute_s:.1f} + "
                     f"bubble {s.bubble_s:.1f} + exposed "
                     + ", ".join(f"{k} {v:.2f}" for k, v in s.exposed.items()) + f" s, MFU {s.mfu:.1%}")
    lines.append(f"published: {row['reported_tflops_per_gpu']:.0f} TFLOP/s per GPU = {published:.1%} of the "
                 "H100's dense BF16 peak")
    values.update({"pr_rebuilt": f"{res['full'][0].activations.rebuilt_bytes / 2**20:,.0f} MiB",   # one layer
                   "pr_usable": fmt_gib(USABLE_FRACTION * gpu.memory_bytes),   # what the planner may fill
                   "zero1_grads": fmt_gib(res["none"][0].gradients_bytes),
                   # FSDP without resharding: the weights stay gathered with the stage's; on top one chunk's
                   # full fp32 gradient before its reduce-scatter (memory.zero3_gathered_bytes)
                   "meta_gathered": fmt_gib(t_meta.gathered_bytes),
                   "chunks7": ", ".join(map(str, chunk_layers(7, l3.virtual_stages)))})   # a 7-layer stage
    return ChapterText(values=values, report="\n".join(lines), data={"res": res})


def partial_prose(model, gpu, l3, m: int, published: float) -> ChapterText:
    """Partial recomputation of Llama 3's 128K layout (``l3``): ``l_rc`` layers of every model chunk
    (Megatron-LM's block method), for every ``l_rc`` a chunk allows, and the least that fits the planner's
    share of the GPU (:func:`~llmsizing.layouts.least_recompute_layers`; the rows are
    :func:`~llmsizing.layouts.recompute_layer_sweep`'s). ``report``: the table. Checks that
    ``l_rc`` can only be 0, 1 or 2."""
    top = max(max(chunk_layers(n, l3.virtual_stages)) for n in l3.stage_layers)
    usable = USABLE_FRACTION * gpu.memory_bytes
    _says(top == 2, "l_rc can only be 0, 1 or 2")
    n_fit = least_recompute_layers(model, gpu, l3, batch=1, seq=LONG_SEQ, grad_accum=m)   # the book's N
    rows, part = {}, {}
    for n, t, s in recompute_layer_sweep(model, gpu, l3, batch=1, seq=LONG_SEQ, grad_accum=m):
        r = recomputed_layers(model.layers, l3, n)
        part[n] = (t, s)
        rows[n] = {"recomputed (7- / 8-layer stage)": f"{r[0]} / {r[1]}",
                   "of the model": f"{sum(r) / model.layers:.0%}",
                   "most loaded GPU": fmt_gib(t.total_bytes),
                   f"fits {USABLE_FRACTION:.0%}": "yes" if t.total_bytes <= usable else "no",
                   "step": f"{s.step_s:.1f} s", "MFU": f"{s.mfu:.1%}",
                   "/ published": f"{s.mfu / published:.2f}"}
    report = "\n".join([
        f"{model.name} at {LONG_SEQ:,} tokens, tp={l3.tp} cp={l3.cp} pp={l3.pp} dp={l3.dp} "
        f"v={l3.virtual_stages}; recompute='full', recompute_layers=l_rc:",
        pd.DataFrame(rows).T.rename_axis("l_rc").to_string(),
        f"least l_rc that fits {USABLE_FRACTION:.0%} of {fmt_gib(gpu.memory_bytes)}: {n_fit}"])
    t_fit, s_fit = part[n_fit]
    r_fit = recomputed_layers(model.layers, l3, n_fit)
    _says(not s_fit.range_note, "the layout range is calibrated for the H100")
    values = {"pr_n": f"{n_fit}", "pr_r8": f"{r_fit[1]}", "pr_r7": f"{r_fit[0]}",
              "pr_share": f"{sum(r_fit) / model.layers:.0%}", "pr_gib": fmt_gib(t_fit.total_bytes),
              "pr_stage": f"{t_fit.stage}", "pr_mfu": f"{s_fit.mfu:.1%}",
              "pr_mfu_range": "{:.1%} to {:.1%}".format(*s_fit.mfu_range),    # the layout range (chapter 11)
              "pr_ratio": f"{s_fit.mfu / published:.2f}",
              "pr_bubble": f"{s_fit.bubble:.0%}", "pr_cp_exposed": f"{s_fit.exposed['cp']:.2f} s",
              "pr_step": f"{s_fit.step_s:.1f} s"}
    return ChapterText(values=values, report=report, data={"part": part})


def nvl_prose(model, h100, nvl, rack: int, m: int, meta128, run: dict, s_meta, l3, t_nvl=None,
              ag=None) -> ChapterText:
    """Llama 3's 128K stage on GB200 NVL72 racks (``nvl``: tp=8 x cp=8 GPUs of a pipeline stage in one NVLink
    domain of ``rack`` GPUs) against Meta's cp=16 on H100s (``s_meta``). ``t_nvl``/``ag``: its memory and
    all-gather step on GB200s as the chapter's cell computed them (computed here when None). ``report``: its
    memory, link and step; ``data``: ``gb`` (the GB200), ``ag`` (its all-gather step) and ``share_nvl`` (the
    exposed all-gather's share of it). Checks the prose: one rack holds cp=8, not 16; it fits a GB200, not an
    H100; the same 128 sequences; Blackwell's efficiency a stand-in with the one published run outside the
    range; the GPU-seconds falling by more than the peak ratio."""
    from .hardware import kernel_efficiency_row

    gb = get_gpu("GB200")
    _says(nvl.tp * nvl.cp <= rack < 2 * nvl.tp * nvl.cp, "one rack holds cp=8, not cp=16")
    if t_nvl is None:
        t_nvl = training_memory(model, batch=1, seq=LONG_SEQ, grad_accum=m, parallel=nvl,
                                precision=LLAMA3_RECIPE)
    s_nvl = {k: step_time(model, gb, replace(nvl, cp_comm=k), batch=1, seq=LONG_SEQ, grad_accum=m,
                          precision=LLAMA3_RECIPE) if k != "all_gather" or ag is None else ag
             for k in ("all_gather", "p2p")}
    cp_nvl = communication(model, nvl, batch=1, seq=LONG_SEQ, gpu=gb, grad_accum=m).to_frame()
    cp_nvl = cp_nvl.query("group == 'cp'")
    ag = s_nvl["all_gather"]
    share_nvl, share_h100 = ag.exposed["cp"] / ag.step_s, s_meta.exposed["cp"] / s_meta.step_s
    report = (f"tp={nvl.tp} cp={nvl.cp} on {nvl.gpus:,} GB200s: {fmt_gib(t_nvl.total_bytes)} on the most "
              "loaded GPU "
              f"(GB200 {fmt_gib(gb.memory_bytes)}, H100 {fmt_gib(h100.memory_bytes)}); CP link "
              f"{cp_nvl['link'].iloc[0]} at {cp_nvl['bandwidth_gbps'].iloc[0]:,.0f} GB/s; step "
              f"{ag.step_s:.2f} s, MFU {ag.mfu:.1%}, all-gather exposed {ag.exposed['cp']:.3f} s "
              f"({share_nvl:.1%}); Meta's cp=16 on {l3.gpus:,} H100s: step "
              f"{s_meta.step_s:.1f} s, all-gather {share_h100:.1%}")
    _says(h100.memory_bytes < t_nvl.total_bytes <= gb.memory_bytes
          and cp_nvl["link"].iloc[0].startswith("NVLink"),
          "it fits a GB200, not an H100, and the CP group talks over NVLink")
    _says(nvl.dp * m == meta128.dp * m == run["global_batch"], "both steps carry the same 128 sequences")
    eff = kernel_efficiency_row(gb)
    _says(not eff.runs, "Blackwell's efficiency is a stand-in")
    _says(gb.memory_bytes > 2 * h100.memory_bytes, "more than twice the memory")
    sw_nvl = cp_overlap_sweep(model, gb, nvl, seqs=[2**k for k in range(12, 20)], grad_accum=16)   # figure's
    nominal = get_node(gpu="GB200").intra_link_gbps_one_way        # NVLink 5, one way per GPU
    _says(cp_nvl["bandwidth_gbps"].iloc[0] < nominal, "the all-gather reaches less than NVLink's rate")
    _says(ag.mfu > s_meta.mfu, "a higher MFU than on H100s")
    gpu_s = (l3.gpus * s_meta.step_s) / (nvl.gpus * ag.step_s)
    _says(gpu_s > gb.bf16_dense_tflops / h100.bf16_dense_tflops,
          "the GPU-seconds fall by more than the peaks")
    # no calibrated range; the one published Blackwell 16-bit run (torchao's BF16 row on 8 B200s, held out)
    # against the step model's prediction for it, as the library's range note states it
    _says("the 1 published Blackwell 16-bit run" in ag.range_note
          and "outside the calibrated range" in ag.range_note,
          "the one published Blackwell 16-bit run sits outside the calibrated range")
    racks = nvl.gpus // (nvl.tp * nvl.cp)
    values = {"nvl_ag_max": f"{(sw_nvl['all_gather_s'] / sw_nvl['compute_s']).max():.1%}",
              "nvl_spare": f"{rack - nvl.tp * nvl.cp}",
              "nvl_spare_share": f"{1 - nvl.tp * nvl.cp / rack:.0%}",
              "nvl_racks": f"{racks:,}", "nvl_rack_gpus": f"{racks * rack:,}", "nvl_gpus": f"{nvl.gpus:,}",
              "nvl_gib": fmt_gib(t_nvl.total_bytes),
              "nvl_tok": f"{LONG_SEQ // nvl.cp:,}",                   # tokens of a sequence per GPU
              "nvl_gb_gib": fmt_gib(gb.memory_bytes), "nvl_link_nominal": f"{nominal:,.0f} GB/s",
              "nvl_link": f"{cp_nvl['bandwidth_gbps'].iloc[0]:,.0f} GB/s", "nvl_share": f"{share_nvl:.1%}",
              "nvl_share_h100": f"{share_h100:.1%}", "nvl_gain": f"{1 - s_nvl['p2p'].step_s / ag.step_s:.1%}",
              "nvl_step": f"{ag.step_s:.1f} s", "nvl_mfu": f"{ag.mfu:.0%}",
              "meta_step": f"{s_meta.step_s:.1f} s",
              "meta_mfu0": f"{s_meta.mfu:.0%}", "nvl_gpu_s": f"{gpu_s:.1f}",
              "nvl_peak": f"{gb.bf16_dense_tflops / h100.bf16_dense_tflops:.1f}",
              "nvl_eff": f"{eff.kernel_efficiency:.1%}",
              "bw_ratio": ag.range_note.split("sits at ")[1].split(" of")[0]}
    return ChapterText(values=values, report=report, data={"gb": gb, "ag": ag, "share_nvl": share_nvl})


def gloo_setup_prose(meas) -> ChapterText:
    """The CPU measurement of context parallelism (``meas``: :func:`~llmsizing.measurements.cp_measurements`,
    tools/measure_memory.py cp): its toy model, lengths and degrees, and how far the ranks' losses and
    gradients are from one GPU's. Checks that every row runs one shape."""
    toy = meas.iloc[0]
    _says(len(meas[["layers", "hidden", "heads", "kv_heads", "dtype"]].drop_duplicates()) == 1,
          "the measurement runs one toy model")
    cps = sorted(meas["cp"].unique())
    values = {"gloo_loss_diff": f"{meas['max_abs_loss_diff'].max():.0e}",
              "gloo_grad_diff": f"{meas['max_abs_grad_diff'].max():.0e}",
              "gloo_shape": f"{toy['layers']} layers, hidden {toy['hidden']}, {toy['heads']} heads, "
                            f"{toy['kv_heads']} KV heads, {toy['dtype'].replace('float', 'fp')}",
              "gloo_seqs": f"{meas['seq'].min():,} to {meas['seq'].max():,}",
              "gloo_cps": ", ".join(map(str, cps[:-1])) + f" and {cps[-1]}"}
    return ChapterText(values=values)


def gloo_prose(cmp) -> ChapterText:
    """The measured exchanges against the library (``cmp``: :func:`~llmsizing.dist_compare.compare_cp`).
    ``report``: one 1,024-token sequence per rank, measured / library. Checks that the saved memory is within
    0.5% and the bytes sent exact."""
    table = cmp.xs(1024, level="seq").reset_index()
    table["saved MiB (measured / library)"] = [
        f"{a / 2**20:6.2f} / {b / 2**20:6.2f}"
        for a, b in zip(table["saved_measured_bytes"], table["saved_library_bytes"])]
    for col, name in (("forward_sent", "fwd KiB sent"), ("backward_sent", "bwd KiB sent")):
        table[name] = [f"{a / 1024:,.0f} / {b / 1024:,.0f}" for a, b in
                       zip(table[f"{col}_measured_bytes"], table[f"{col}_library_bytes"])]
    report = ("one 1,024-token sequence, per rank (measured / library)\n"
              + table[["variant", "cp", "saved MiB (measured / library)", "fwd KiB sent",
                       "bwd KiB sent"]].to_string(index=False))
    gap = (1 - cmp["saved_ratio"]).abs().max()
    exact = all((cmp[f"{c}_measured_bytes"] == cmp[f"{c}_library_bytes"]).all()
                for c in ("forward_sent", "backward_sent", "grad_sync"))
    _says(gap < 0.005 and exact, "the saved memory within 0.5%, the bytes sent exact")
    g4 = cmp.loc[("ring", 4, 1024)]
    attn = g4["forward_sent_measured_bytes"] + g4["backward_sent_measured_bytes"]
    values = {"gloo_gap": f"{gap:.2%}", "gloo_grad_mb": f"{g4['grad_sync_measured_bytes'] / 1e6:.1f} MB",
              "gloo_attn_mb": f"{attn / 1e6:.1f} MB"}
    return ChapterText(values=values, report=report)


def _layout(r) -> str:
    vp = int(r["virtual_stages"])                   # interleaved chunks per stage, when above one
    return (f"tp={r['tp']}, cp={r['cp']}, pp={r['pp']}{f', vp={vp}' if vp > 1 else ''}, "
            f"dp={r['dp']}, ZeRO-{r['zero']}")


def planner_prose(model, gpu, plans, every, fast, old, *, published: float, over: dict, meta128, l3,
                  seq: int) -> ChapterText:
    """The planner's answer for the long-context stage: ``plans`` (:func:`~llmsizing.planner.plan`), ``every``
    (the same with ``partial_recompute=False``), ``fast`` (the front's fastest plan) and ``old`` (the fastest
    of ``every``); the plan's own step (its ZeRO-3 traffic against its compute), its range and how many of the
    published CP runs (``over``: :func:`gap_prose`'s) fall inside it; the degree that wins and the attention
    kernel's share there; Meta's degrees on the planner's terms. Checks the prose's statements on them."""
    from .intervals import intervals_table
    from .job import Job
    from .kernels import attention_efficiency

    front = plans[plans["pareto"]]
    _says(front.iloc[0].name == fast.name and fast["recompute"] == "full",
          "the cheapest plan is the fastest, with full recomputation")
    _says(fast["cp"] < plans["cp"].max(), "the largest cp tried no longer wins")
    values = {"n_plans": f"{len(plans):,}"}
    for key, r in (("fast", fast), ("old", old)):
        values.update({f"{key}_n": f"{r['n_gpus']:,}", f"{key}_layout": _layout(r),
                       f"{key}_days": f"{r['days']:,.1f}", f"{key}_mfu": f"{r['mfu']:.0%}",
                       f"{key}_cost": f"${r['cost_usd'] / 1e6:,.1f}M"})
    values["fast_rl"] = f"{int(fast['recompute_layers'])}"
    values["fast_vs_meta"] = f"{fast['mfu'] / published:.2f}"     # over Meta's measured 128K MFU
    # the plan's own step: how much ZeRO-3 traffic its compute has to hide (the prose: hidden, just)
    st = step_time(Job.from_plan_row(fast, model, seq=seq))      # the plan's layout and recipe, as a Job
    _says(abs(st.step_s / fast["step_time_s"] - 1) < 1e-9 and st.comm_by_group_s["dp"] < st.compute_s,
          "the plan's ZeRO-3 traffic is less than its compute")
    values.update({"fast_dp_s": f"{st.comm_by_group_s['dp']:.1f} s",
                   "fast_compute_s": f"{st.compute_s:.1f} s",
                   "fast_dp_exposed": f"{st.exposed_by_group_s['dp']:.1f} s",
                   "fast_days_range": f"{fast['days_low']:,.1f} to {fast['days_high']:,.1f}",
                   "fast_cost_range": f"${fast['cost_usd_low'] / 1e6:.3g}M to "
                                      f"${fast['cost_usd_high'] / 1e6:.3g}M"})
    _says(not plans.attrs.get("range_notes"), "the H100 range is calibrated, not borrowed")
    # its efficiency fitted without CP runs, its width scored with them: how many of the CP runs fall inside
    # the band just quoted (published over predicted MFU between days / days_high and days / days_low; the
    # layout range is pooled, one band for every GPU and format, so the FP8 run is held to the same one)
    _says(KERNEL_FIT_MAX_CP == 1, "the efficiency's median leaves every CP run out")
    lo, hi = fast["days"] / fast["days_high"], fast["days"] / fast["days_low"]
    band = intervals_table().set_index(["area", "group"]).loc[(plans.attrs["range_area"],
                                                              plans.attrs["range_rows"]["H100 SXM"])]
    _says(plans.attrs["range_rows"]["H100 SXM"] == "bf16" and abs(lo / band["low"] - 1) < 1e-3,
          "the band quoted is the BF16 layout band")
    cp_in = sum(lo <= 1 / over[key] <= hi for key in ("l3_128k", "tt_128k"))
    values.update({"range_cov": f"{band['measured_coverage']:.0%}",   # measured leaving each source out
                   "range_n": f"{int(band['n_rows'])}",
                   "cp_in_range": {0: "neither falls", 1: "one falls", 2: "both fall"}[cp_in],
                   "fast_stage_layers": f"{model.layers // int(fast['pp'])}"})
    # the degree that wins, and the plan that wins without partial recomputation (its tokens a GPU fit, none)
    cp_max = int(plans["cp"].max())
    _says(old["cp"] == cp_max > fast["cp"] and old["recompute"] == "none",
          "without partial recomputation the largest cp wins, with none")
    _says((every.loc[every["cp"] == fast["cp"], "recompute"] == "full").all(),
          "at the winning cp every layer reruns")
    values.update({"old_cheap_cost": f"${every['cost_usd'].min() / 1e6:,.1f}M",
                   "q_max": f"{seq // cp_max:,}",                  # tokens per GPU at the largest cp
                   "q_meta": f"{seq // meta128.cp:,}",             # at Meta's cp
                   "fast_cp": f"{int(fast['cp'])}", "cp_max": f"{cp_max}"})
    for key, cp in (("qmax", cp_max), ("qmeta", meta128.cp)):   # the attention kernel's share at seq / cp
        values[f"k_att_{key}"] = f"{attention_efficiency(gpu, head_dim=model.head_dim, seq=seq // cp):.0%}"
    # Meta's degrees on the planner's terms (ZeRO-1): sixteen stages with the embedding and the loss as a
    # layer each, eight chunks per stage (the planner searches them); the prose: they need full recomputation
    meta = plans[(plans["tp"] == meta128.tp) & (plans["cp"] == meta128.cp) & (plans["pp"] == meta128.pp)
                 & (plans["virtual_stages"] == meta128.virtual_stages)]
    _says(len(meta) and (meta["recompute"] == "full").all(), "Meta's degrees need full recomputation here")
    meta16 = meta[meta["n_gpus"] == l3.gpus]       # on Meta's GPU count (dp=8), not the best of every count
    _says(len(meta16) and meta16["mfu"].max() < meta["mfu"].max()
          and meta.loc[meta["mfu"].idxmax(), "dp"] == 1,
          "on Meta's GPU count they do worse than on one replica")
    mrl = meta16.loc[meta16["mfu"].idxmax(), "recompute_layers"]   # how much of each chunk is rerun
    values.update({"meta_shape_mfu": f"{meta16['mfu'].max():.0%}",
                   "meta_shape_rc": "full recomputation" if pd.isna(mrl) else "the first "
                   + {1: "layer", 2: "two layers"}.get(int(mrl), f"{int(mrl)} layers")
                   + " of every chunk recomputed",
                   "meta_shape_best": f"{meta['mfu'].max():.0%}",
                   "meta_shape_best_n": f"{int(meta.loc[meta['mfu'].idxmax(), 'n_gpus']):,}",
                   "l405_layers": f"{model.layers}"})
    return ChapterText(values=values)
