"""Chapter 18's published MoE runs in sentences: the table and every number its prose quotes (issue 38).

:func:`published_runs_prose` prices the runs of ``data/moe_published_runs.csv`` (:mod:`llmsizing.moe_runs`),
reads the evidence beside them (:mod:`llmsizing.moe_evidence`) and returns one
:class:`~llmsizing.prose.ChapterText`: the texts its markdown quotes, keyed by name, in ``values`` (the
chapter glues each as ``ch18_<name>``), the table the chapter prints in ``report``, and in ``data`` what later
cells read. The chapter says which runs lie above, below or inside the ranges, and why; each of those
statements is checked here against the numbers, and :class:`ProseOutOfDate` names the one that no longer
holds, so the build fails instead of printing a sentence the data contradict. Nothing here computes a new
quantity: the sentences only format and compare what the library's functions return.
"""

from __future__ import annotations

from dataclasses import replace

from .moe_runs import JETMOE_8B, moe_loso_check, moe_published_runs, moe_run_check, predict_moe_run, \
    run_step, run_variant
from .prose import ChapterText, ProseOutOfDate, and_list, number_word
from .prose import prose_check as _prose_check

__all__ = ["ProseOutOfDate", "published_runs_prose", "ranges_prose", "GRANITE_1B",
           "GRANITE_3B"]

_SUFFIX = " pre-training"
GRANITE_1B, GRANITE_3B = "Granite 3.0 1B-A400M", "Granite 3.0 3B-A800M"
_SMALL = (GRANITE_1B, GRANITE_3B, "JetMoE-8B")        # the small runs the prose reads together


def _says(holds, what: str) -> None:
    """Raise :class:`ProseOutOfDate` saying ``what`` chapter 18's prose says, unless ``holds``."""
    _prose_check(holds, what, "chapter 18's prose")


def _short(run: str) -> str:
    return run.replace(_SUFFIX, "")


def _names(runs) -> str:
    """Run names for a sentence, the two Granite runs named once."""
    runs = ["the two Granite runs" if r == GRANITE_1B else r for r in runs if r != GRANITE_3B]
    return and_list(runs)


def ranges_prose(chk, runs) -> ChapterText:
    """The sentences on which runs miss the dense range and which lie inside it (``values``).

    ``chk``: :func:`~llmsizing.moe_runs.moe_run_check` with ``range_area="training-layout"``; ``runs``: the
    rows of :func:`~llmsizing.moe_runs.moe_published_runs` indexed by run. Raises :class:`ProseOutOfDate`
    where the chapter's reading fails: the small runs (JetMoE-8B and the two Granite runs) above the range
    with DeepSeek-V2 the only other run that may join them, Phi-3.5-MoE alone below, DeepSeek-V3 inside,
    and the runs above without expert parallelism."""
    inside = chk["inside"]
    published = chk["layout_published"] == "yes"
    laid_out = [_short(r) for r in chk.index[published]]
    laid_in = [_short(r) for r in chk.index[published & inside]]
    laid_miss = [r for r in laid_out if r not in laid_in]
    above = [_short(r) for r in chk.index[chk["published"] > chk["high"]]]
    below = [_short(r) for r in chk.index[chk["published"] < chk["low"]]]
    _says(set(above) - {"DeepSeek-V2"} == {"JetMoE-8B", GRANITE_1B, GRANITE_3B},
          "JetMoE-8B and the two Granite runs are above the dense range, and only DeepSeek-V2 may join them")
    _says(below == ["Phi-3.5-MoE"], "Phi-3.5-MoE alone is below the dense range")
    _says("DeepSeek-V3" in laid_in, "DeepSeek-V3 is inside the dense range")
    _says(all(int(runs.loc[r + _SUFFIX, "ep"]) == 1 for r in above + ["OLMoE-1B-7B"] if r != "DeepSeek-V2"),
          "the runs above the range and OLMoE ran without expert parallelism")
    verb = "is" if len(laid_miss) == 1 and "Granite" not in _names(laid_miss) else "are"
    range_lo = float((chk["low"] / chk["predicted"]).iloc[0])
    range_hi = float((chk["high"] / chk["predicted"]).iloc[0])
    _says((((chk["ratio"] >= range_lo) & (chk["ratio"] <= range_hi)) == inside).all(),
          "a run is inside when its published / step ratio lies in the range")
    _says(chk.loc["Phi-3.5-MoE" + _SUFFIX, "ratio"] < range_lo, "Phi-3.5-MoE is below the range")
    _says(chk.loc["JetMoE-8B" + _SUFFIX, "ratio"] > range_hi, "JetMoE-8B is above the range")
    ins = chk[inside]
    n = number_word
    return ChapterText(values={
        "miss_says": f"{n(len(above) + len(below)).capitalize()} runs miss, {n(len(above))} above and "
                     f"{n(len(below))} below, and the misses include {n(len(laid_miss))} of the "
                     f"{n(len(laid_out))} runs whose layout is published: {_names(laid_in)} "
                     f"{'is' if len(laid_in) == 1 else 'are'} inside; {_names(laid_miss)} {verb} not",
        "other_above": "other three" if "DeepSeek-V2" in above else "three",
        "n_inside": f"{int(inside.sum())} of {len(chk)}",
        "inside_list": ", ".join(f"{_short(r)} {x:.2f}" for r, x in zip(ins.index, ins["ratio"])),
        "ratio_min": f"{chk['ratio'].min():.2f}",
        "ratio_max": f"{chk['ratio'].max():.2f}",
        "range_lo": f"{range_lo:.2f}",
        "range_hi": f"{range_hi:.2f}",
        "v2_where": "above" if "DeepSeek-V2" in above else "inside",
    })


def _range_factors(chk) -> tuple[float, float]:
    return float((chk["low"] / chk["predicted"]).iloc[0]), float((chk["high"] / chk["predicted"]).iloc[0])


def _table(chk, moe_chk):
    import pandas as pd

    return pd.DataFrame({
        "layout published": chk["layout_published"],
        "published": chk["published"].map(lambda x: f"{x:,.0f}"),
        "MoE step": chk["predicted"].map(lambda x: f"{x:,.0f}"),
        "published / step": chk["ratio"].map("x{:.2f}".format),
        "dense range": [f"{lo:,.0f} - {hi:,.0f}" for lo, hi in zip(chk["low"], chk["high"])],
        "inside dense": chk["inside"].map({True: "yes", False: "no"}),
        "MoE range": [f"{lo:,.0f} - {hi:,.0f}" for lo, hi in zip(moe_chk["low"], moe_chk["high"])],
    })


def _deepseek_v2(chk, runs) -> dict:
    """DeepSeek-V2 as its report describes it, without the shared-expert overlap, and without the group
    limit."""
    from .catalog import get_model
    from .intervals import intervals_table, nested_min_units

    range_lo, range_hi = _range_factors(chk)
    v2, row = chk.loc["DeepSeek-V2" + _SUFFIX], runs.loc["DeepSeek-V2" + _SUFFIX]
    out_of_range = bool(v2["published"] > v2["high"])
    _says(row["shared_expert_overlap"] == "yes", "DeepSeek-V2's row overlaps its shared experts")
    free = replace(get_model("deepseek-v2"), name="deepseek-v2 (no group limit)", expert_groups=0,
                   expert_groups_per_token=0)
    off, free_p = (run_variant(row, m, shared_expert_overlap="no") for m in (None, free))
    _says(free_p["ratio"] < off["ratio"] <= range_hi,
          "V2 without the overlap lies inside, lower without groups")
    _says(v2["ratio"] > 1 and off["ratio"] < v2["ratio"], "V2 took longer than its step predicts")
    top_nearer = range_hi / v2["ratio"] < v2["ratio"] / (range_lo * range_hi) ** 0.5
    near = "nearer the top than the centre" if top_nearer else "nearer the centre than the top"
    sources = intervals_table().set_index(["area", "group"])["n_sources"]
    fp8_sources = int(sources[("training-layout", "fp8")])
    _says(fp8_sources < nested_min_units() <= int(sources[("training-layout", "bf16")]),
          "the FP8 runs' sources are too few for a range of their own, BF16's are not")
    miss = ("It is a miss, and the range is not widened to take it in." if out_of_range else
            f"Its published {v2['published']:,.0f} GPU-hours are {1 - v2['published'] / v2['high']:.1%} "
            f"below the range's top of {v2['high']:,.0f}. That range is pooled over the BF16 and FP8 runs "
            f"with a published layout: the FP8 runs, from {fp8_sources} sources, are too few for a range of "
            f"their own (a leave-one-source-out check needs {nested_min_units()}), so V2, a BF16 run, is "
            "judged with the FP8 runs' residuals in it.")
    return {
        "v2_ratio": f"{v2['ratio']:.2f}",
        "v2_end": "outside the range: V2 took longer than its step predicts, by more than the range allows"
                  if out_of_range else
                  f"inside, {near}: V2 took longer than its step predicts, by less than the range allows",
        "v2_miss_says": miss,
        "v2_off_where": "just inside" if off["ratio"] > range_hi / 1.05 else "inside",
        "v2_free_ratio": f"{free_p['ratio']:.2f}",
        "v2_off_ratio": f"{off['ratio']:.2f}",
        "v2_a2a_share": f"{predict_moe_run(row)['all_to_all_share']:.1%}",
        "v2_off_a2a_share": f"{off['all_to_all_share']:.1%}",
        "v2_free_a2a_share": f"{free_p['all_to_all_share']:.1%}",
    }


def _small_runs(chk, runs, ev) -> dict:
    """JetMoE-8B, the Granite runs and OLMoE: their ratios, what their MoE layers would need, their
    compute."""
    from . import moe_evidence as mev
    from .catalog import get_model
    from .kernels import DATA, expert_padding_share

    _, range_hi = _range_factors(chk)
    row = {r: runs.loc[r + _SUFFIX] for r in _SMALL + ("OLMoE-1B-7B",)}
    jet, g1, g3, olm = (chk.loc[r + _SUFFIX] for r in ("JetMoE-8B", GRANITE_1B, GRANITE_3B, "OLMoE-1B-7B"))
    per_day = float(ev.loc["jetmoe_tokens_per_day", "value"])
    c1, c3 = (mev.layer_call_gap(row[r]) for r in (GRANITE_1B, GRANITE_3B))
    work, grow = c3.priced_s / c1.priced_s, c3.gap_s / c1.gap_s
    _says(abs(grow / work - 1) < 0.1, "the Granite gap grows as the work of a layer call does")
    need = {r: mev.moe_part_factor_needed(row[r]) for r in _SMALL}
    full = {r: run_variant(row[r], recompute="full")["ratio"] for r in _SMALL}
    _says(all(1.5 < v < 2.5 for v in need.values()), "the small runs' MoE layers would need 1.5 to 2.5 times")
    _says(all(v < chk.loc[r + _SUFFIX, "ratio"] for r, v in full.items()),
          "full recomputation brings them down")
    olm_row = row["OLMoE-1B-7B"]
    per_gpu = int(olm_row["global_batch"]) // int(olm_row["dp"])
    olm_mb = run_variant(olm_row, micro_batch_seqs=per_gpu)
    _says(olm_mb["ratio"] > olm["high"] / olm["predicted"], "OLMoE on its own micro-batch is above the range")
    _says(bool(olm["inside"]), "OLMoE on one sequence a micro-batch is inside the range")
    g1_hours = mev.node_hours_reading(row[GRANITE_1B])                  # GPU- or node-hours
    _says(f"{g1_hours.mfu:.0%}" == f"{g1['mfu'] / g1['ratio']:.0%}", "the per-GPU hours give Granite's MFU")
    busy = mev.compute_only_ratio(olm_row)
    small_busy = {r: mev.compute_only_ratio(row[r]) for r in _SMALL}
    _says(busy > 1, "OLMoE is slower than its compute alone")
    _says(min(small_busy.values()) > range_hi,
          "the Granite and JetMoE runs lie beyond the top on compute alone")
    olm_step = run_step(olm_row)
    import pandas as pd

    lk = pd.read_csv(DATA / "moe_layer_kernels.csv")      # SonicMoE Fig. 14: ScatterMoE, 512-wide experts
    sc = lk[(lk["kernel"] == "ScatterMoE") & (lk["expert_ffn"] == 512) & (lk["hidden"] < 2048)]
    _says(sorted(sc["hidden"]) == [768, 1536], "SonicMoE's ScatterMoE layers have hidden sizes 768 and 1,536")
    tf = pd.concat([sc["fwd_tflops"], sc["bwd_tflops"]])
    m1 = get_model("granite-3.0-1b-a400m")
    pad_rows = 4096 * m1.experts_per_token / m1.experts      # one 4,096-token sequence's rows an expert
    lr = mev.sonicmoe_layer_ratios()
    sc512 = lr[(lr["kernel"] == "ScatterMoE") & (lr["expert_ffn"] == 512)]
    _says(min(sc512["fwd_ratio"].min(), sc512["bwd_ratio"].min()) >= 1, "ScatterMoE is no slower than priced")
    ratios = pd.concat([lr["fwd_ratio"], lr["bwd_ratio"]])
    slow = lr.loc[lr["fwd_ratio"].idxmin()]
    _says(ratios.min() == slow["fwd_ratio"] and slow["kernel"] == "MegaBlocks",
          "MegaBlocks' forward is slowest")
    _says(1 / ratios.min() - 1 < (min(g1["ratio"], g3["ratio"]) - 1) / 2, "under half of Granite's excess")
    return {
        "jet_ratio": f"{jet['ratio']:.2f}", "jet_mfu": f"{jet['mfu']:.0%}",
        "jet_implied": f"{jet['mfu'] / jet['ratio']:.0%}",
        "jet_per_day": f"{per_day / 1e9:.0f}B",
        "olmoe_fig4_tps": f"{float(ev.loc['olmoe_fig4_moe_tps', 'value']):,.0f}",
        "jet_steady_gpuh": f"{row['JetMoE-8B']['tokens'] / per_day * row['JetMoE-8B']['n_gpus'] * 24:,.0f}",
        "jet_gpuh": f"{row['JetMoE-8B']['gpu_hours']:,.0f}",
        "granite1_ratio": f"{g1['ratio']:.2f}", "granite3_ratio": f"{g3['ratio']:.2f}",
        "granite1_mfu": f"{g1['mfu']:.0%}", "granite1_implied": f"{g1['mfu'] / g1['ratio']:.0%}",
        "granite_gap_ms": f"{c1.gap_s * 1e3:.1f} and {c3.gap_s * 1e3:.1f}",
        "granite_work_ratio": f"{work:.1f}", "granite_gap_ratio": f"{grow:.1f}",
        "route_needed": f"{c1.routing_passes:.0f}",
        "moe_need_granite": f"{need[GRANITE_1B]:.1f} and {need[GRANITE_3B]:.1f}",
        "moe_need_jet": f"{need['JetMoE-8B']:.1f}",
        "full_rc_granite": f"{full[GRANITE_1B]:.2f} and {full[GRANITE_3B]:.2f}",
        "full_rc_jet": f"{full['JetMoE-8B']:.2f}",
        "olmoe_tps": f"{olm_row['tokens'] / (olm_row['gpu_hours'] * 3600):,.0f}",
        "olmoe_ratio_mb": f"{olm_mb['ratio']:.2f}", "olmoe_per_gpu": f"{per_gpu}",
        "n_inside_mb": f"{int(chk['inside'].sum()) - 1} of {len(chk)}",
        "scatter_tflops": f"{tf.min():.0f} to {tf.max():.0f}",
        "table7_watts": f"{mev.TABLE7_GPU_WATTS:.0f} W", "table7_pue": f"{mev.TABLE7_PUE}",
        "granite1_mwh": f"{mev.table7_energy_mwh(g1['published']):.1f}",
        "granite1_mwh_printed": f"{ev.loc['granite30_1b_a400m_mwh', 'value']:.1f}",
        "granite1_tps": f"{g1_hours.tokens_per_gpu_s:,.0f}",
        "granite1_node_gpus": number_word(g1_hours.gpus_per_node),
        "granite1_node_tps": f"{g1_hours.node_tokens_per_gpu_s:,.0f}",
        "granite1_node_mfu": f"{g1_hours.node_mfu:.1%}",
        "olmoe_busy": f"{busy:.2f}",
        "olmoe_busy_where": f"{1 - busy / range_hi:.1%} under the range's top, where the Granite and JetMoE "
                            "runs, on theirs, lie beyond it" if busy < range_hi else
                            "beyond the range's top too, as the Granite and JetMoE runs are on theirs",
        "small_busy": f"{min(small_busy.values()):.2f} to {max(small_busy.values()):.2f}",
        "olmoe_dp_share": f"{olm_step.exposed_by_group_s['dp'] / olm_step.step_s:.0%}",
        "pad_rows": f"{pad_rows:,.0f}", "pad_extra": f"{1 / expert_padding_share(pad_rows) - 1:.0%}",
        "layers_ratio": f"{ratios.min():.2f} to {ratios.max():.2f}",
        "layers_slowest": f"{slow['expert_ffn']:,}-wide experts at hidden {slow['hidden']:,}",
    }


def _jetmoe_dense_attention(chk, runs) -> dict:
    """JetMoE-8B's attention experts against dense attention of the same heads (how the row was once
    priced)."""
    jet, row = chk.loc["JetMoE-8B" + _SUFFIX], runs.loc["JetMoE-8B" + _SUFFIX]
    _says(row["model"] == JETMOE_8B.name, "the JetMoE-8B row is priced on JETMOE_8B")
    dense = replace(JETMOE_8B, name="jetmoe-8b (dense attention)", attn_experts=0, attn_experts_per_token=0,
                    o_bias=False, extra_layer_tensors=())
    dense_h = predict_moe_run(row, dense)["gpu_hours"]
    _says(jet["predicted"] > dense_h and jet["ratio"] > 1, "JetMoE's attention experts cost more than dense")
    return {"jet_moa_cost": f"{jet['predicted'] / dense_h - 1:.1%}", "jet_hidden": f"{JETMOE_8B.hidden:,}",
            "jet_attn_k": f"{JETMOE_8B.attn_experts_per_token} of {JETMOE_8B.attn_experts}",
            "jet_dense_ratio": f"{row['gpu_hours'] / dense_h:.2f}"}


def _phi_and_grin(chk, runs, ev) -> dict:
    """Phi-3.5-MoE's row and GRIN's throughput study (Table 3). Chapter 18 no longer quotes the two 512-GPU
    model cards against the study (``moe_evidence.grin_production_over_study``; keys removed 2026-12-05)."""
    from . import moe_evidence as mev

    range_lo, range_hi = _range_factors(chk)
    row = runs.loc["Phi-3.5-MoE" + _SUFFIX]
    step = run_step(row)
    grin = {rc: mev.grin_table3_faster(rc, ev) for rc in ("none", "full")}
    _says(all(abs(moe / twin - 1) < mev.GRIN_T3_TOLERANCE for moe, twin in grin.values()),
          "GRIN's MoE and its dense twin are faster by the same factor")
    grin_all = [x for pair in grin.values() for x in pair]
    r8 = run_variant(row, pp=8, dp=int(row["n_gpus"]) // 8, zero=1)["ratio"]
    r_sel = run_variant(row, recompute="selective")["ratio"]
    _says(run_variant(row)["ratio"] < min(r8, r_sel), "either other reading moves Phi-3.5-MoE up")

    def where(r):
        return "inside" if range_lo <= r <= range_hi else ("still below it" if r < range_lo else "above it")

    return {
        "phi_ratio": f"{chk.loc['Phi-3.5-MoE' + _SUFFIX, 'ratio']:.2f}",
        "phi_bubble": f"{step.bubble_s / step.step_s:.0%}",
        "phi_micro": f"{int(row['global_batch']) // int(row['dp'])}",
        "grin_faster": f"{min(grin_all):.1f} to {max(grin_all):.1f}",
        "grin_stages": f"{mev.GRIN_T3_STAGES}", "grin_gpus": f"{mev.GRIN_T3_GPUS}",
        "grin_tol": f"{mev.GRIN_T3_TOLERANCE:.0%}",
        "phi_8_ratio": f"{r8:.2f}", "phi_sel_ratio": f"{r_sel:.2f}",
        "phi_8_where": where(r8), "phi_sel_where": where(r_sel),
    }


def _coverage(chk, moe_chk, runs) -> dict:
    """The two ranges' measured coverage: the dense range's rows of ``data/intervals.csv`` that price these
    runs, and the MoE range measured on them leaving whole sources out."""
    import numpy as np
    import pandas as pd

    from .intervals import NOMINAL_COVERAGE, held_note, intervals_table
    from .mfu import MOE_RANGE_AREA, layout_range_factors, layout_range_group
    from .precision import compute_dtype

    iv = intervals_table().set_index(["area", "group"])
    group = {r: layout_range_group(x["gpu"], compute_dtype(x["precision"])) for r, x in runs.iterrows()}
    _says(set(group.values()) == {"bf16", "fp8"}, "the runs fall in the dense range's BF16 and FP8 rows")
    cov = {g: iv.loc[("training-layout", g)] for g in sorted(set(group.values()))}
    out = {}
    for g, r in cov.items():
        out[f"range_cov_{g}"] = f"{r['measured_coverage']:.0%}"
        out[f"range_n_{g}"] = f"{int(r['n_rows'])} runs from {int(r['n_sources'])} sources"
    fp8 = [_short(r) for r, g in group.items() if g == "fp8"]
    fp8_in = all(chk.loc[r + _SUFFIX, "inside"] for r in fp8)
    out["fp8_cov_says"] = (
        f": short of {NOMINAL_COVERAGE:.0%} for FP8, so the range is if anything narrow for the "
        f"{number_word(len(fp8))} FP8 runs here ({and_list(fp8)}), {'all' if fp8_in else 'not all'} inside it"
        if cov["fp8"]["measured_coverage"] < NOMINAL_COVERAGE else "")
    mc, mdf = moe_loso_check()
    moe_lo, moe_hi = layout_range_factors("H100 SXM", moe=True)
    src_in = pd.Series(mc.inside).groupby(mdf["source_key"].to_numpy()).all()
    edge = _short(mdf["run"].iloc[int(np.argmax(np.abs(mc.residuals)))])
    missed = [_short(r) for r in mdf["run"][~mc.inside]]
    _says(set(_short(r) for r in moe_chk.index[~moe_chk["inside"]]) <= {edge},
          "in sample the MoE range holds every run but possibly its own edge run")
    out.update({
        "n_runs": f"{len(chk)}",
        "range_width": f"{float(iv.loc[('training-layout', 'all'), 'median_width']):.2f}",
        "nominal": f"{NOMINAL_COVERAGE:.0%}",
        "range_miss": f"{len(chk) * (1 - NOMINAL_COVERAGE):.1f}",
        "moe_lo": f"{1 / moe_hi:.2f}", "moe_hi": f"{1 / moe_lo:.2f}",    # as published / step, as the ratios
        "moe_held": held_note(MOE_RANGE_AREA, "all", "runs"),
        "moe_src_held": f"{int(src_in.sum())} of {len(src_in)}",
        "moe_n_src": number_word(len(src_in)),
        "moe_edge": edge, "moe_out": and_list(missed) if missed else "none",
        "dense_held": f"{int(chk['inside'].sum())} of {len(chk)}",
        "moe_in_sample": f"{int(moe_chk['inside'].sum())} of {len(moe_chk)}",
    })
    return out


def published_runs_prose() -> ChapterText:
    """Chapter 18's section "Other published MoE runs": every text its prose quotes (``values``), the table of
    every published run against the dense and the MoE range under its title (``report``), and in ``data``:
    ``check``, :func:`~llmsizing.moe_runs.moe_run_check` on the dense range; ``table``, the chapter's table
    (formatted text); ``moe_low``/``moe_high``, the MoE range's factors on the H100
    (:func:`~llmsizing.mfu.layout_range_factors` with ``moe=True``), which the planner's days use. Raises
    :class:`ProseOutOfDate` where a statement of the prose no longer holds."""
    from . import moe_evidence as mev
    from .mfu import layout_range_factors

    chk = moe_run_check(range_area="training-layout")
    moe_chk = moe_run_check()
    runs = moe_published_runs().set_index("run")
    ev = mev.moe_kernel_evidence()
    texts = {}
    for part in (ranges_prose(chk, runs).values, _deepseek_v2(chk, runs), _small_runs(chk, runs, ev),
                 _jetmoe_dense_attention(chk, runs), _phi_and_grin(chk, runs, ev),
                 _coverage(chk, moe_chk, runs)):
        _says(not set(part) & set(texts), "each name once")
        texts.update(part)
    moe_lo, moe_hi = layout_range_factors("H100 SXM", moe=True)
    table = _table(chk, moe_chk)
    title = "GPU-hours of published MoE pre-training runs against the library"
    return ChapterText(values=texts, report=f"{title}\n{table.to_string()}",
                       data={"check": chk, "table": table, "moe_low": moe_lo, "moe_high": moe_hi})
