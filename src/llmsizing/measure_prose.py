"""Chapter 5's measurements in sentences: every number its prose quotes, keyed by name (issue 38).

Each function serves one section of ``book/05_measure_it_yourself.ipynb`` and returns the texts its markdown
quotes (``values`` of a :class:`~llmsizing.prose.ChapterText`, glued as ``ch5_<name>``) and, where the
section prints a table, that text too (``report``). The
chapter reads the measured CSVs in sentences ("the peak is in the loss's backward", "the published pairs do
not support 8%"); each such reading is checked here against the numbers, and :class:`ProseOutOfDate` names
the one that no longer holds, so the build fails instead of printing a sentence the data contradict. Nothing
here computes a new quantity: the sentences only format and compare what the library's functions return.
"""

from __future__ import annotations

import pandas as pd

from .activations import activation_memory
from .allocator_fragmentation import measured_fragmentation
from .footprint import LOSS_BACKWARD_BYTES_PER_LOGIT
from .layout_fits import layout_fit_summary, layout_misses, published_layout_fits, published_measured_memory
from .measured_traced import COMPILED_LOSS_SAVING, measured_memory_traced, traced_step
from .measurements import (FUSED_SWIGLU_CSV, GPT2_LOSS_PEAK_STEPS_CSV, STEP_TIMELINE_CSV, TOLERANCE,
                           fused_formula_errors, held_out_step_errors, load_steps, loss_bytes_per_logit,
                           masked_sdpa_errors, measured_model, optimizer_temporary_bytes_per_param,
                           working_set_fit, worst_step_errors)
from .memory import training_memory
from .mfu_published import PUBLISHED_RUNS_CSV
from .model_catalog import get_model
from .op_sac import OP_SAC_TP_CSV, op_sac_layer_bytes, op_sac_tp_measured
from .parallel import OP_SAC_MODES, OP_SAC_SDPA_RERUN
from .prose import ChapterText, ProseOutOfDate
from .prose import prose_check as _prose_check
from .states import FIXED_OVERHEAD_BYTES, FRAGMENTATION, fragmentation_room, peak_room_bytes
from .units import GiB, MiB, fmt_count

__all__ = ["ProseOutOfDate", "step_sweep_prose", "step_findings_prose", "layout_fits_prose",
           "measured_memory_prose", "op_sac_runs"]


def _says(holds, what: str) -> None:
    _prose_check(holds, what, "chapter 5's prose")


def _span(values, fmt: str) -> str:
    """``low to high`` of a column, each formatted with ``fmt`` (``"{:.2f}"``)."""
    return f"{fmt.format(values.min())} to {fmt.format(values.max())}"


def step_sweep_prose(cmp, steps) -> ChapterText:
    """The opening's numbers: the saved-tensor sweep (``cmp``,
    :func:`~llmsizing.measurements.compare_measurements`) and the whole-step sweep (``steps``,
    :func:`~llmsizing.measurements.compare_steps`), the fitted working set and its held-out errors. Raises
    :class:`ProseOutOfDate` where the chapter's reading fails: both tiny models share one shape, the worst
    peak is a short run's backward, the drawn timeline is a row of the sweep, Llama and Qwen2 share their
    heads, the fitted half layer is below every row's max, nothing is left after a step, and no row ran on a
    GPU."""
    gpt = measured_model(cmp[cmp["style"] == "gpt"].iloc[0])
    llama = measured_model(cmp[cmp["style"] == "llama"].iloc[0])
    pure = fused_formula_errors(cmp)["worst_error"].abs()         # models stored entirely in fp32 or bf16
    hf = steps[steps["stack"] == "hf"]
    t = {"tol": f"{TOLERANCE:.0%}", "pure_worst": f"{pure.max():.1%}",
         "pure_worst_rest": f"{pure.drop(('selective', 'eager')).max():.1%}", "n_configs": f"{len(cmp)}",
         "torch_version": cmp["torch_version"].iloc[0], "gpt_params": fmt_count(gpt.n_params),
         "llama_params": fmt_count(llama.n_params)}
    _says((gpt.layers, gpt.hidden, gpt.vocab) == (llama.layers, llama.hidden, llama.vocab),
          "both tiny models have the same layers, width and vocabulary")
    t["tiny_shape"] = f"{gpt.layers} layers, hidden size {gpt.hidden} and a {gpt.vocab:,}-token vocabulary"
    t["tiny_gqa"] = f"{llama.heads} query heads share {llama.kv_heads} key/value heads"
    t.update(step_n=f"{len(steps)}", step_n_hf=f"{len(hf)}",
             step_hf_worst=f"{hf['peak_error'].abs().max():.1%}")
    worst = hf.loc[hf["peak_error"].abs().idxmax()]
    _says(worst["peak_phase"] == "backward" and worst["batch"] * worst["seq"] <= 256,
          "the worst peak is a short run's (at most 256 tokens) whose peak is in the backward")
    t["step_hf_worst_tokens"] = f"{worst['batch'] * worst['seq']}"
    t["transformers_version"] = str(hf["transformers_version"].iloc[0])
    _says((steps["end_residual_bytes"] == 0).all(),
          "after every step only the states and the gradients remain (end_residual_bytes is 0 in every row)")
    _says(steps["cuda_max_memory_allocated_bytes"].isna().all(),
          "the sweep ran on a CPU (its cuda_max_memory_allocated_bytes column is empty)")
    timeline = pd.read_csv(STEP_TIMELINE_CSV)
    n_ops = (~timeline["op"].str.startswith("<")).sum()             # without the phases' <marker> rows
    drawn = hf[(hf["model_class"] == timeline["model_class"].iloc[0])
               & (hf["mode"] == timeline["mode"].iloc[0]) & (hf["attention"] == "sdpa")
               & (hf["recompute"] == "none") & (hf["batch"] == 2) & (hf["seq"] == 512)]
    _says(n_ops == drawn[["n_ops_forward", "n_ops_backward", "n_ops_optimizer"]].sum(axis=1).item(),
          "the timeline drawn has the operations its row of the sweep counts")
    t["step_ops"] = f"{n_ops:,}"
    t["step_bw_range"] = f"{hf['backward_error'].min():+.0%} to {hf['backward_error'].max():+.0%}"
    shapes = hf.drop_duplicates("model")
    _says(shapes["layers"].nunique() == 1 and shapes["hidden"].nunique() == 1,
          "the Hugging Face models of the step sweep share one depth and width")
    t["step_shape"] = f"{shapes['layers'].iloc[0]} layers of width {shapes['hidden'].iloc[0]}"
    t["step_vocab"] = f"{shapes['vocab'].min():,} to {shapes['vocab'].max():,}"
    gqa = shapes[shapes["model_class"] != "GPT2LMHeadModel"][["heads", "kv_heads"]].drop_duplicates()
    _says(len(gqa) == 1, "Llama and Qwen2 share their heads")
    t["step_gqa"] = f"{gqa['heads'].iloc[0]} query heads sharing {gqa['kv_heads'].iloc[0]} key/value heads"
    # how much the loss's 8 bytes per logit weigh against what the layers keep: in the sweep, in a real model
    tl_row = hf[(hf["model"] == "step-llama") & (hf["mode"] == "bf16") & (hf["attention"] == "sdpa")
                & (hf["recompute"] == "none") & (hf["batch"] == 2) & (hf["seq"] == 512)].iloc[0]
    tl_logit_bytes = tl_row["loss_backward_max_bytes"] - tl_row["forward_end_bytes"]     # measured
    tl_acts = tl_row["forward_end_bytes"] - tl_row["baseline_bytes"]
    t["step_loss_vs_acts"] = f"{tl_logit_bytes / tl_acts:.1f}"
    _says(LOSS_BACKWARD_BYTES_PER_LOGIT["hf"] == 8, "the loss's backward takes 8 bytes per logit")
    l8_model, l8_seq = get_model("llama-3-8b"), 8192
    l8 = training_memory(l8_model, batch=1, seq=l8_seq, precision="bf16", stack="hf", overhead_bytes=0.0)
    l8_loss = LOSS_BACKWARD_BYTES_PER_LOGIT["hf"] * l8_seq * l8_model.vocab
    t["l8b_loss_vs_acts"] = f"{l8_loss / l8.activations_bytes:.2f}"
    held_out = {split: held_out_step_errors(split) for split in ("model", "seq")}   # refit without some rows
    for split, h in held_out.items():
        t[f"ho_{split}_w"] = f"{h.loc['fit', 'working_set']:.2f}"
        t[f"ho_{split}_n"] = f"{h.loc['held out', 'configs']}"
        t[f"ho_{split}_peak"] = f"{abs(h.loc['held out', 'worst_peak_error']):.1%}"
        t[f"ho_{split}_bwd"] = f"{abs(h.loc['held out', 'worst_backward_error']):.1%}"
    ws = working_set_fit()                   # the half layer against what every row asks for
    _says(ws["working_set"] < 0.5 and ws["per_row_median"] < 0.5 < ws["per_row_max"],
          "the fitted working set and the median row ask for less than half a layer, the largest row more")
    t.update(ws_n=f"{ws['configs']}", ws_fit=f"{ws['working_set']:.2f}",
             ws_fit_err=f"{ws['worst_backward_error']:.1%}",
             ws_lib_err=f"{ws['library_worst_backward_error']:.1%}",
             ws_min=f"{ws['per_row_min']:.2f}", ws_median=f"{ws['per_row_median']:.2f}",
             ws_max=f"{ws['per_row_max']:.2f}")
    t["ho_peak"] = f"{max(abs(h.loc['held out', 'worst_peak_error']) for h in held_out.values()):.1%}"
    return ChapterText(t)


def step_findings_prose(steps) -> ChapterText:
    """The table of the step sweep's worst errors per group (the text the chapter prints) and the numbers of
    "what the sweep found": the loss's bytes per logit, the optimizer's temporaries, autocast's weight copies,
    the masked SDPA rows, the allowance and the published fragmentation, the loss-peak runs and Megatron-LM's
    fused SwiGLU. ``steps``: :func:`~llmsizing.measurements.compare_steps`. Raises :class:`ProseOutOfDate`
    where a reading of the prose fails (the fused stack's gap, none or a state-sized temporary per parameter,
    full recomputation no longer the worst, the published pairs against the 8% allowance)."""
    table = worst_step_errors(steps)
    printed = table.assign(worst_peak_error=table["worst_peak_error"].map("{:+.1%}".format),
                           mean_peak_error=table["mean_peak_error"].map("{:+.1%}".format)).to_string()
    hf = steps[steps["stack"] == "hf"]
    gap = steps[(steps["stack"] == "fused") & (steps["mode"] == "autocast-bf16")]
    t = {"step_gap": f"{-gap['peak_error'].min():.1%}"}
    _says(gap["peak_error"].min() < 0, "the fused stack under autocast under-counts its peak")
    loss_bpl = loss_bytes_per_logit(steps)
    bpl_lo, bpl_hi = f"{loss_bpl.min():.3f}", f"{loss_bpl.max():.3f}"
    t["step_loss_bpl"] = bpl_lo if bpl_lo == bpl_hi else f"{bpl_lo} to {bpl_hi}"
    at_loss = steps["peak_phase"] == "loss_backward"
    t["step_peak_loss_n"] = f"{at_loss.sum()}"
    t["step_peak_other_tokens"] = f"{(steps.loc[~at_loss, 'batch'] * steps.loc[~at_loss, 'seq']).max()}"
    t["step_opt_worst"] = f"{steps['optimizer_step_error'].abs().max():.2%}"
    opt_temp_bpp = optimizer_temporary_bytes_per_param(steps)
    _says((opt_temp_bpp[steps["optimizer_impl"] == "fused"] == 0).all(), "fused AdamW allocates no temporary")
    foreach = steps["optimizer_impl"] == "foreach"
    width = steps.loc[foreach, "mode"].map({"fp32": 4, "autocast-bf16": 4, "bf16": 2})   # the prose's 4 and 2
    _says((opt_temp_bpp[foreach] == width).all(),
          "foreach AdamW's temporary is one state-sized number per parameter (4 bytes in fp32, 2 in bf16)")
    amp = hf[hf["mode"] == "autocast-bf16"]
    amp_none = amp[amp["recompute"] == "none"].drop_duplicates("model_class").set_index("model_class")
    copies_bpp = amp_none["weight_copy_forward_end_bytes"] / amp_none["n_params"]
    amp_full = amp[amp["recompute"] == "full"]
    t["step_amp_full_err"] = f"{amp_full['loss_backward_error'].abs().max():.1%}"
    _says(amp_full["loss_backward_error"].abs().max() < hf["peak_error"].abs().max(),
          "autocast with full recomputation is no longer the worst")
    _says((amp_full["weight_copy_max_bytes"] > amp_full["weight_copy_forward_end_bytes"]).all(),
          "full recomputation makes autocast's weight copies again in the backward")
    short = {"LlamaForCausalLM": "Llama", "GPT2LMHeadModel": "GPT-2", "Qwen2ForCausalLM": "Qwen2"}
    t["step_copies_bpp"] = ", ".join(f"{copies_bpp[c]:.2f} ({short[c]})" for c in copies_bpp.index)
    masked = masked_sdpa_errors()
    _says((masked["error"] == 0).all(), "attention_mask=True matches each measured masked layer to the byte")
    t["mask_rows"] = f"{len(masked)}"
    m8 = {mask: training_memory("llama-3-8b", batch=1, seq=8192, precision="bf16", stack="hf",
                                attention_mask=mask) for mask in (False, True)}
    # peaks, not totals: the prose compares them with the peak of exercise 4 (no allowance)
    t["mask_8b_plain"] = f"{m8[False].peak_bytes / GiB:,.1f} GiB"
    t["mask_8b_masked"] = f"{m8[True].peak_bytes / GiB:,.1f} GiB"
    t["mask_8b_pct"] = f"{m8[True].peak_bytes / m8[False].peak_bytes - 1:.0%}"
    t["allowance"] = f"{FIXED_OVERHEAD_BYTES / GiB:.0f} GiB + {FRAGMENTATION:.0%} of the peak"
    frag = measured_fragmentation()          # published (active, reserved) pairs
    _says(frag.median > FRAGMENTATION and frag.low < FRAGMENTATION,
          f"the published pairs do not support {FRAGMENTATION:.0%}: their median above it, their low below")
    t.update(frag_med=f"{frag.median:.0%}", frag_span=f"{frag.low:.0%} to {frag.high:.0%}",
             frag_runs=f"{frag.n_rows} runs from {frag.n_sources} sources")
    frag_es = measured_fragmentation(allocator="expandable_segments")
    _says(FRAGMENTATION < frag_es.median < frag.median,
          "expandable segments' pairs show less fragmentation, though still more than the allowance")
    t.update(frag_es_med=f"{frag_es.median:.0%}", frag_es_span=f"{frag_es.low:.0%} to {frag_es.high:.0%}",
             frag_es_runs=f"{frag_es.n_rows} runs")
    lp_steps = load_steps(GPT2_LOSS_PEAK_STEPS_CSV)           # the loss's peak, below
    lp_real = lp_steps[lp_steps["model"] == "gpt2-124m"].iloc[0]
    t["lp_shape"] = f"{lp_real['layers']} layers, {lp_real['hidden']} wide, vocabulary {lp_real['vocab']:,}"
    t["lp_seqs"] = " and ".join(f"{s:,}" for s in sorted(lp_steps["seq"].unique()))
    swiglu_cols = pd.read_csv(FUSED_SWIGLU_CSV).groupby("variant")["saved_f_columns"]
    _says((swiglu_cols.nunique() == 1).all(), "each SwiGLU variant saves one count of columns at every shape")
    t["swiglu_fused_f"] = f"{swiglu_cols.first()['megatron-fused']:.0f}"
    t["swiglu_unfused_f"] = f"{swiglu_cols.first()['unfused']:.0f}"
    return ChapterText(t, printed)


def op_sac_runs() -> set:
    """The published runs (``data/mfu_published_runs.csv``'s names) that used torchtitan's op-level SAC."""
    published = pd.read_csv(PUBLISHED_RUNS_CSV)
    return set(published[published["recompute"].isin(OP_SAC_MODES)]["run"])


def layout_fits_prose() -> ChapterText:
    """The published layouts against the memory model: the summary and the misses (the text the chapter
    prints), and the numbers of its prose, with op SAC's tensor-parallel split. Raises
    :class:`ProseOutOfDate` where a reading fails: the two misses that fit as stated are KempnerForge's and
    DeepSeek-V3's, Llama 3.1 405B is over by the allowance only and ran with room for less fragmentation than
    any published pair, the remat misses are MaxText's, every op-SAC run fits, the SDPA-rerun runs are B200's,
    op SAC's tp=4 share lies between a quarter and the whole, and the measured split matches the model to the
    byte."""
    fits = published_layout_fits()
    misses = layout_misses(fits)
    lines = [layout_fit_summary(fits).to_string(index=False), ""]
    lines += [f"{r.run}: {r.gib_today:.1f} of {r.gpu_gib:.1f} GiB [{r.cause}]\n    {r.why}"
              for r in misses.itertuples()]
    t = {"lf_n": f"{len(fits)}", "lf_fit": f"{fits['fits_today'].sum()}", "lf_miss": f"{len(misses)}",
         "lf_stated_fit": f"{(misses['gib_stated'] <= misses['gpu_gib']).sum()}"}
    stated = misses[misses["gib_stated"] <= misses["gpu_gib"]]["run"]
    _says(len(stated) == 2 and "KempnerForge" in stated.iloc[0] and "DeepSeek-V3" in stated.iloc[1],
          "two misses fit as their sources state them, KempnerForge's and DeepSeek-V3's")
    t["lf_stated_names"] = " and ".join(r.split(",")[0] for r in stated)
    l405 = misses[misses["run"].str.startswith("Llama 3.1 405B")].iloc[0]
    _says(l405["gib_stated"] > l405["gpu_gib"] and "only the fragmentation allowance is over" in l405["why"],
          "Llama 3.1 405B as stated is over only by the fragmentation allowance")
    t["lf_405_stated"] = f"{l405['gib_stated']:.1f} of {l405['gpu_gib']:.1f} GiB"
    # the fragmentation this run, which ran, leaves room for: its modelled peak from the stated total
    room405 = fragmentation_room(l405["gpu_gib"] * GiB, peak_room_bytes(l405["gib_stated"] * GiB))
    _says(0 < room405 < measured_fragmentation().low,
          "Llama 3.1 405B ran with room for less fragmentation than any published pair shows")
    t["lf_405_room"] = f"{room405:.1%}"
    remat = misses[misses["why"].str.contains("minimal_flash")]
    _says(len(remat) and remat["run"].str.contains("MaxText").all(), "the minimal_flash misses are MaxText's")
    t["lf_maxtext_n"] = f"{len(remat)}"
    op_sac = op_sac_runs()
    _says(fits[fits["run"].isin(op_sac)]["fits_today"].all(), "all torchtitan and torchao op-SAC runs fit")
    t["lf_sac_n"] = f"{fits['run'].isin(op_sac).sum()}"
    published = pd.read_csv(PUBLISHED_RUNS_CSV)
    sdpa_rerun = published[published["recompute"] == OP_SAC_SDPA_RERUN]
    _says((sdpa_rerun["gpu"] == "B200").all(), "the runs that rerun attention are B200 runs")
    t["lf_sdpa_n"] = f"{len(sdpa_rerun)}"
    t.update(_op_sac_tp_texts())
    return ChapterText(t, "\n".join(lines) + "\n")


def _op_sac_tp_texts() -> dict:
    """Op SAC's tensor-parallel split: Llama-3-8B's layer at tp 1 and 4, and the measurement of the split."""
    sac_kw = dict(batch=1, seq=8192)
    tp1_bytes = op_sac_layer_bytes("llama-3-8b", **sac_kw)
    tp4_bytes = op_sac_layer_bytes("llama-3-8b", tp=4, sp=True, **sac_kw)
    _says(tp1_bytes / 4 < tp4_bytes < tp1_bytes,
          "tensor parallelism saves less under op SAC than it splits (w2's partial sum whole on every GPU)")
    t = {"sac_tp1": f"{tp1_bytes / MiB:,.0f} MiB", "sac_tp4": f"{tp4_bytes / MiB:,.0f} MiB",
         "sac_tp4_share": f"{tp4_bytes / tp1_bytes:.0%}"}
    tp_measured = op_sac_tp_measured()       # PyTorch's own checkpoint cache (tools/measure_op_sac_tp.py)
    _says((tp_measured["measured_bytes"] == tp_measured["model_bytes"]).all(),
          "in every layout the checkpoint holds exactly the bytes the library predicts")
    t["sac_tp_n"] = f"{len(tp_measured)}"
    tp_raw = pd.read_csv(OP_SAC_TP_CSV)
    cols = ["hidden", "heads", "kv_heads", "ffn_hidden", "batch", "seq"]
    _says(tp_raw["source"].str.contains("gloo CPU").all() and tp_raw["torch"].nunique() == 1
          and set(tp_measured["tp"]) == {1, 2, 4} and set(tp_measured["sp"]) == {0, 1}
          and tp_measured[cols].nunique().eq(1).all(),
          "the split was measured with one torch on CPU processes joined by gloo, one block, tp 1, 2 and 4, "
          "with and without sequence parallelism")
    s = {k: int(tp_measured[k].iloc[0]) for k in cols}
    t["sac_tp_torch"] = str(tp_raw["torch"].iloc[0]).split("+")[0]
    t["sac_tp_shape"] = (f"width {s['hidden']}, {s['heads']} query and {s['kv_heads']} key/value heads, "
                         f"an MLP {s['ffn_hidden']} wide, {s['batch']} sequences of {s['seq']} tokens")
    return t


def measured_memory_prose() -> ChapterText:
    """The published runs whose sources logged their GPU memory against the model's peak: the table the
    chapter prints (``traced``: measured / the peak priced with the run's traced cause, ``-`` where none is
    traced) and the numbers of its reading. Raises :class:`ProseOutOfDate` where the reading fails:
    every KempnerForge run under-counted, none of torchtitan's own over-counted, torchao's H100 runs not
    over-counted and all its MI300X and B200 runs over-counted, the model's B200 peak MI300X's less the rerun
    attention and the gap left below what the compiled loss saves, the rest no evidence, the largest ratio the
    405B pipeline's; and both patterns' causes traced
    (:func:`~llmsizing.measured_traced.measured_memory_traced`, the memory model's options: every multi-GPU
    KempnerForge run within 2% above its traced peak less FSDP's gathered unit, every MI300X and B200 run at
    or above it)."""
    mm = published_measured_memory()
    tr = measured_memory_traced()            # the rows whose cause is traced, priced as their code runs
    traced = mm["run"].map(tr.set_index("run")["traced_ratio"])
    printed = mm.assign(measured=mm["measured_gib"].map("{:.1f}".format),
                        model=mm["model_gib"].map("{:.1f}".format), ratio=mm["ratio"].map("{:.2f}".format),
                        traced=traced.map("{:.2f}".format).where(traced.notna(), "-"))[
        ["run", "statistic", "micro_batch", "measured", "model", "ratio", "evidence", "traced"]].to_string(
        index=False)
    op_sac = op_sac_runs()
    kf = mm[mm["statistic"] == "max_allocated"]
    tt = mm[mm["statistic"] == "max_reserved"]
    _says((kf["evidence"] == "under-counts").all() and (kf["measured_gib"] > kf["model_total_gib"]).all(),
          "every KempnerForge run allocated more than the model's peak plus the allowance")
    readme = tt["run"].str.contains("torchao README")
    tt_own, ao = tt[~readme], tt[readme]
    _says(not (tt_own["evidence"] == "over-counts").any(), "none of torchtitan's own runs is over-counted")
    sac = tt_own[tt_own["run"].isin(op_sac)]
    _says(ao["run"].isin(op_sac).all(), "torchao's runs use op SAC")
    ao_h100 = ao[ao["run"].str.contains("H100")]
    ao_over = ao[ao["evidence"] == "over-counts"]
    _says(not ao_h100["evidence"].eq("over-counts").any() and ao_over["run"].str.contains("MI300X|B200").all()
          and len(ao_over) == len(ao) - len(ao_h100),
          "torchao's H100 runs are not over-counted and every MI300X and B200 run is")
    ao_gap = ao_over["model_gib"] - ao_over["measured_gib"]
    ao_b200 = ao_over["run"].str.contains("B200")
    kw = dict(batch=1, seq=8192)              # the torchao rows' micro-batch and sequence
    sdpa_gib = (activation_memory("llama-3-8b", recompute="op-sac", **kw).total_bytes
                - activation_memory("llama-3-8b", recompute=OP_SAC_SDPA_RERUN, **kw).total_bytes) / GiB
    none = tt[~tt["run"].isin(op_sac)]
    _says((none["evidence"] == "no evidence").all() and "405B" in none.loc[none["ratio"].idxmax(), "run"],
          "the other torchtitan runs are no evidence, the 405B pipeline reserving the most over the model")
    kf_tr, ao_tr = tr[tr["cause"] == "kempnerforge"], tr[tr["cause"] == "compiled loss"]
    one = kf_tr["run"].str.contains("single GPU")
    # (FSDP's gathered unit: the model holds one in every phase, KempnerForge none around its loss)
    unit_ratio = kf_tr["measured_gib"] / (kf_tr["traced_gib"] - kf_tr["gathered_gib"])
    _says(len(kf_tr) == len(kf) and unit_ratio[~one].between(1.0, 1.02).all() and one.sum() == 1,
          "every multi-GPU KempnerForge run allocated 1.00-1.02 times its traced peak less FSDP's unit")
    _says(len(ao_tr) == len(ao_over) and (ao_tr["traced_gib"] <= ao_tr["measured_gib"]).all(),
          "with the compiled loss no MI300X or B200 run reserved less than the peak")
    one_mb4 = traced_step(kf_tr.loc[one, "run"].iloc[0], "kempnerforge", micro_batch=4).peak_bytes
    one_ratio, one_gib = kf_tr.loc[one, "traced_ratio"].iloc[0], kf_tr.loc[one, "measured_gib"].iloc[0]
    _says(one_ratio > 1.1 and 1.0 <= one_gib * GiB / one_mb4 < 1.02,
          "the single GPU's allocation fits only the report's micro-batch of 4")
    ao_loss_gib = COMPILED_LOSS_SAVING["loss backward"] * kw["batch"] * kw["seq"] * get_model(
        "llama-3-8b").vocab / GiB
    mi_model, b200_model = ao_over.loc[~ao_b200, "model_gib"], ao_over.loc[ao_b200, "model_gib"]
    rerun_gib = mi_model.min() - b200_model.max()        # the table's B200 peak already prices the rerun
    _says(mi_model.nunique() == b200_model.nunique() == 1 and abs(rerun_gib - sdpa_gib) < 0.1
          and ao_gap.max() < ao_loss_gib,
          "the model's B200 peak is MI300X's less the attention those runs rerun, and what is left of the "
          "gap is less than the compiled loss saves")
    tp = kf["run"].str.contains("TP=")
    t = {"mm_ao_n": f"{len(ao)}", "mm_ao_h100_ratio": _span(ao_h100["ratio"], "{:.2f}"),
         "mm_ao_over_n": f"{len(ao_over)}", "mm_ao_over_ratio": _span(ao_over["ratio"], "{:.2f}"),
         "mm_ao_gap_mi": _span(ao_gap[~ao_b200], "{:.1f}") + " GiB",
         "mm_ao_gap_b200": _span(ao_gap[ao_b200], "{:.1f}") + " GiB",
         "mm_sdpa_gib": f"{rerun_gib:.1f} GiB", "mm_n": f"{len(mm)}", "mm_sac_n": f"{len(sac)}",
         "mm_sac_ratio": _span(sac["ratio"], "{:.2f}"), "mm_tt_none": f"{len(none)}",
         "mm_tt_none_max": f"{none['ratio'].max():.2f}", "mm_kf_n": f"{len(kf)}",
         "mm_kf_ratio": _span(kf["ratio"], "{:.2f}"),
         "mm_kf_ratio_fsdp": _span(kf.loc[~tp, "ratio"], "{:.2f}"),
         "mm_kf_ratio_tp": _span(kf.loc[tp, "ratio"], "{:.2f}"),
         "mm_kf_traced_n": f"{(~one).sum()}", "mm_kf_traced_ratio": _span(kf_tr.loc[~one, "traced_ratio"],
                                                                         "{:.2f}"),
         "mm_kf_traced_unit_ratio": _span(unit_ratio[~one], "{:.2f}"),
         "mm_kf_one_mb2": f"{one_ratio:.2f}", "mm_kf_one_mb4": f"{one_gib * GiB / one_mb4:.2f}",
         "mm_ao_loss_gib": f"{ao_loss_gib:.1f} GiB",
         "mm_ao_traced_ratio": _span(ao_tr["traced_ratio"], "{:.2f}")}
    return ChapterText(t, printed)
