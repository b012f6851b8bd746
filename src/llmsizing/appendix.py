"""The formula summary's numbers (the appendix, ``book/90_formula_summary.ipynb``) in one call (issue 38).

The appendix quotes, beside each formula, the size of its approximation and the calibrated range it carries.
:func:`appendix_values` computes every such number as the text the page shows (``{eval}`app_...```), and
:func:`appendix_claims` the comparisons the page states in words ("the closed form is an upper end", "both
ends at 32 slots"), each ``True`` while the page is right. :func:`appendix_prose`, which the page's cell
calls, returns both as one :class:`~llmsizing.prose.ChapterText` (the texts in ``values``, the claims in
``data["claims"]``) and raises :class:`~llmsizing.prose.ProseOutOfDate` naming any claim that no longer holds.
No formula lives here: every number comes from the module the page names after "Library:", and the ranges from
``data/intervals.csv`` and ``data/serving_intervals.csv`` as the calibration tools wrote them.
"""

from __future__ import annotations

import math

from .appendix_measured import measured_checks as _measured, measured_claims as _measured_claims, \
    measured_values as _measured_values
from .prose import ChapterText, prose_check

__all__ = ["appendix_prose", "appendix_values", "appendix_claims", "allen_cunneen_errors", "QLORA_QUANTIZERS",
           "AC_CASES", "SPEC_EXAMPLE"]

#: The quantisers of ``data/finetune_published.csv``'s Q-LoRA rows, as the appendix names them.
QLORA_QUANTIZERS = {"gptq-int4": "GPTQ int4", "bnb-nf4": "bitsandbytes nf4", "bnb-fp4": "bitsandbytes fp4",
                    "torchao-nf4": "torchao nf4"}

#: Allen-Cunneen against the simulation: slots, busy share and squared coefficient of variation of the
#: service time (chapter 15's queueing entry), and the simulation's size. At ``cs2 = 1`` (M/M/c) the formula
#: is exact, so those cases measure how far the simulation itself strays from it.
AC_CASES = tuple((c, rho, cs2) for c in (8, 32) for rho in (0.8, 0.9) for cs2 in (0.0, 0.5, 1.0, 2.0))
_AC_SIM = dict(arrivals=20_000, replications=64, warmup=2_000, seed=0)


def _intervals():
    from .intervals import intervals_table

    return intervals_table().set_index(["area", "group"])


def _calibration_values() -> dict[str, str]:
    """Published runs, the training, fine-tuning and serving ranges (chapters 10, 15, 16)."""
    import pandas as pd

    from .catalog import DATA_DIR, get_gpu
    from .hardware import dtype_kernel_share, kernel_efficiency_row
    from .intervals import coverage_note, held_note, min_units, nested_min_units, source_key
    from .mfu import layout_range_factors
    from .range_candidates import MAX_WIDTH as goal_w
    from .serve_calibration import MAX_WIDTH as sv_aim_w, MIN_COVERAGE as sv_aim_cov, NESTED_GROUP
    from .time_cost import published_runs

    v = {}
    k8, k16 = (kernel_efficiency_row("H100 SXM", d) for d in ("fp8", "bf16"))
    v["app_fp8_share"] = f"{dtype_kernel_share('H100 SXM', 'fp8'):.3f}"
    v["app_fp8_share_runs"] = (f"{k8.kernel_efficiency:.3f} over {k16.kernel_efficiency:.3f}, on Hopper's "
                               f"{k8.runs} and {k16.runs} calibration runs")
    runs = published_runs()                                                        # data/published_runs.csv
    v["app_n_runs"] = f"{len(runs)}"
    v["app_n_fitted"] = f"{int(runs['calibration'].sum())}"
    v["app_n_held"] = f"{int((~runs['calibration']).sum())}"
    v["app_n_run_sources"] = f"{runs['source'].map(source_key).nunique()}"
    iv = _intervals()
    fp8 = iv.loc[("training-inputs", "fp8")]
    v["app_fp8_held"] = f"{round(fp8['measured_coverage'] * fp8['n_rows'])}"
    v["app_fp8_n"] = f"{fp8['n_rows']}"
    v["app_fp8_sources"] = f"{fp8['n_sources']}"
    v["app_fp8_cov"] = f"{fp8['measured_coverage']:.0%}"
    nominal = f"nominal {fp8['nominal_coverage']:.0%}"                            # the ranges' aim, 80%
    v["app_fp8_verdict"] = (f"fewer than the range's {nominal}, so it is too narrow for FP8, and the "
                            "estimate says so" if fp8["measured_coverage"] < fp8["nominal_coverage"]
                            else f"at least the range's {nominal}, on {fp8['n_rows']} runs from "
                                 f"{fp8['n_sources']} sources, too few to say much more")
    v["app_fp8_width"] = f"{fp8['median_width']:.2f}"
    fp8_layout = iv.loc[("training-layout", "fp8")]
    v["app_fp8_layout_held"] = f"{round(fp8_layout['measured_coverage'] * fp8_layout['n_rows'])}"
    v["app_fp8_layout_n"] = f"{fp8_layout['n_rows']}"
    v["app_fp8_layout_sources"] = f"{fp8_layout['n_sources']}"
    lay_nominal = f"nominal {fp8_layout['nominal_coverage']:.0%}"
    v["app_fp8_layout_verdict"] = (f"{fp8_layout['measured_coverage']:.0%}, "
                                   + (f"short of the range's {lay_nominal}: for FP8 it may be too narrow"
                                      if fp8_layout["measured_coverage"] < fp8_layout["nominal_coverage"]
                                      else f"at least the range's {lay_nominal}"))
    tot = iv.loc[("training-inputs", "pretraining-total")]
    v["app_whole_note"] = coverage_note("training-inputs", "pretraining-total", "whole runs")
    short = tot["measured_coverage"] < tot["nominal_coverage"]
    v["app_whole_short"] = f"{'short of' if short else 'at least'} its nominal {tot['nominal_coverage']:.0%}"
    v["app_nobatch_note"] = coverage_note("training-inputs", "batch:unpublished",
                                          "runs whose source publishes no batch")
    lo, hi = layout_range_factors(get_gpu("H100 SXM"))                         # the pooled row "all"
    v["app_layout_lo"], v["app_layout_hi"] = f"{lo:.2f}", f"{hi:.2f}"
    v["app_layout_note"] = coverage_note("training-layout", "all", "runs with a published layout")
    for gen in ("ampere", "hopper"):
        row = iv.loc[("training-inputs", gen)]
        v[f"app_inputs_{gen}"] = f"{row['low']:.2f} to {row['high']:.2f}"
    v["app_inputs_note"] = coverage_note("training-inputs", "all", "runs")
    v["app_goal_w"] = f"{goal_w:g}"
    v["app_stack_w"] = f"{iv.loc[('training-layout', 'stack:all'), 'median_width']:.2f}"
    # fine-tuning: a range per base, the pooled one, and why the rows weigh alike
    from .finetune_time import GROUP_RANGES, RESIDUAL_RANGE

    for g, k in (("quantised", "q"), ("bf16-base", "b")):
        v[f"app_ft_{k}_low"], v[f"app_ft_{k}_high"] = (f"{x:.2f}" for x in GROUP_RANGES[g])
    ft = iv.loc[("fine-tuning", "all")]
    v["app_ft_note"] = coverage_note("fine-tuning-base", "all", "published steps")
    v["app_ft_pooled"] = f"{RESIDUAL_RANGE[0]:.2f} to {RESIDUAL_RANGE[1]:.2f}"
    v["app_ft_pooled_note"] = held_note("fine-tuning", "all", "steps")
    v["app_ft_sources"] = f"{ft['n_sources']}"
    v["app_ft_min"] = f"{min_units(0.8)}"                   # sources to weigh them alike at 80%
    v["app_ft_min_check"] = f"{nested_min_units(0.8)}"      # and to check that by leaving one out
    # serving: the stated range (row "all"), its check nested as training's (serve_calibration.NESTED_GROUP)
    svt = pd.read_csv(DATA_DIR / "serving_intervals.csv").set_index("group")
    sv, svn = svt.loc["all"], svt.loc[NESTED_GROUP]
    v["app_sv_lo"], v["app_sv_hi"] = f"{sv['low']:.2f}", f"{sv['high']:.2f}"
    v["app_sv_cov"] = f"{svn['coverage_out_of_sample']:.1%}"
    v["app_sv_n"] = f"{svn['n_rows']}"
    v["app_sv_sources"] = f"{svn['n_sources']}"
    v["app_sv_width"] = f"{svn['width_out_of_sample']:.2f}"
    v["app_sv_aim_w"] = f"{sv_aim_w:g}"
    v["app_sv_verdict"] = ("within it" if svn["width_out_of_sample"] <= sv_aim_w
                           and svn["coverage_out_of_sample"] >= sv_aim_cov else "not met")
    return v


def _qlora_sources():
    """``data/finetune_published.csv`` with a short source name per row, and its Q-LoRA rows."""
    import pandas as pd

    from .catalog import DATA_DIR
    from .intervals import source_key

    pub = pd.read_csv(DATA_DIR / "finetune_published.csv")
    pub["short"] = pub["source"].map(source_key).str.split(r"[ ,]").str[0].str.split("/").str[-1]
    return pub, pub[pub["method"] == "qlora"]


def _finetune_values() -> dict[str, str]:
    """Chapter 16: QLoRA's dequantisation on one example, the launch overhead, the sources (their CSV)."""
    from .catalog import get_gpu
    from .finetune_time import DEQUANT_BANDWIDTH_FRACTION, LAYER_OVERHEAD_S, dequant_bytes, dequant_passes

    v = {"app_dequant_frac": f"{DEQUANT_BANDWIDTH_FRACTION:.3g}",              # data/finetune_model.csv
         "app_layer_ms": f"{LAYER_OVERHEAD_S * 1e3:.2f}"}
    # Llama-2-7B on an A100 40GB, one micro-batch, no recomputation
    deq_s = (dequant_passes("none") * dequant_bytes("llama-2-7b")
             / (get_gpu("A100 40GB").memory_bandwidth_gbps * 1e9 * DEQUANT_BANDWIDTH_FRACTION))
    v["app_deq_gb"] = f"{dequant_bytes('llama-2-7b') / 1e9:.1f}"
    v["app_deq_ms"] = f"{deq_s * 1e3:.0f}"
    pub, q = _qlora_sources()
    by = q.groupby("short", sort=False)["quantizer"].value_counts(sort=False)
    v["app_ft_qlora_sources"] = f"{q['short'].nunique()}"
    v["app_ft_qlora_list"] = "; ".join(
        f"{src}: " + ", ".join(f"{n} {QLORA_QUANTIZERS[qz]}" for (s, qz), n in by.items() if s == src)
        for src in q["short"].unique())
    v["app_ft_qlora_gptq"] = f"{(q['quantizer'] == 'gptq-int4').sum()} of {len(q)}"
    v["app_ft_source_list"] = ", ".join(pub["short"].unique())
    return v


def _hf_sweep_errors() -> dict[str, dict[str, float]]:
    """transformers' own counts (``data/hf_type_sweep.csv``, chapters 1 and 3) against the library's, per type
    it reads (library / transformers - 1): ``kv``, the KV numbers per token (the widths of its attention
    layers' ``k_proj`` and ``v_proj``, where it has them), and ``state``, a hybrid's state per sequence (what
    its own cache held after a forward pass)."""
    import csv
    import json

    from .hf_types import CLASS_DEFAULT_GAPS, REFUSED_TYPES, SWEEP_CSV
    from .inference import kv_cache_bytes_per_token, state_bytes_per_sequence
    from .model import Model

    out: dict[str, dict[str, float]] = {"kv": {}, "state": {}}
    skip = (*REFUSED_TYPES, *CLASS_DEFAULT_GAPS)
    with open(SWEEP_CSV, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kind"] == "full" and not r["error"]
                and r["encoder_style"] == "0" and r["model_type"] not in skip]
    for r in rows:
        m = Model.from_hf_config(json.loads(r["config_json"]))
        kv, state = r["kv_per_token"], r["state_per_sequence"]
        if int(kv):
            out["kv"][r["model_type"]] = kv_cache_bytes_per_token(m, "bf16") / (2 * int(kv)) - 1
        if state not in ("", "0"):
            out["state"][r["model_type"]] = state_bytes_per_sequence(m, "bf16") / (2 * int(state)) - 1
    return out


def _gguf_errors() -> dict[tuple[str, str], float]:
    """``inference.weights_bytes`` over each published GGUF file's size (``data/gguf_file_sizes.csv``), less
    1, per (model, format)."""
    import csv

    from .catalog import DATA_DIR
    from .inference import weights_bytes

    with open(DATA_DIR / "gguf_file_sizes.csv", newline="") as fh:
        return {(r["model"], r["format"]): weights_bytes(r["model"], r["format"])
                / (float(r["published_gb"]) * 1e9) - 1 for r in csv.DictReader(fh)}


def _paged_65b():
    """LLaMA-65B under the QLoRA paper's 65B script (chapter 16), ``{paged_optimizer: FinetuneMemory}`` with
    and without its paged optimizer, and the catalogue's 48 GB GPU (the L40S)."""
    from .catalog import get_gpu
    from .finetune import QLORA_SCRIPT, finetune_memory

    runs = {p: finetune_memory("llama-65b", **{**QLORA_SCRIPT, "paged_optimizer": p}) for p in (True, False)}
    return runs, get_gpu("L40S")


def _max_contexts():
    """``finetune.max_context`` against each row of ``data/finetune_max_context.csv`` (chapter 16):
    ``(published maximum or None, fits, out of memory, library's)``, a published 0 being an out-of-memory."""
    import csv

    from .catalog import DATA_DIR
    from .finetune import max_context

    def num(x):
        return float(x) if x != "" else None

    with open(DATA_DIR / "finetune_max_context.csv", newline="") as fh:
        return [(num(r["published_max_context"]), num(r["fits_context"]), num(r["oom_context"]),
                 max_context(r["model"], r["gpu"], method=r["method"], rank=int(r["rank"]),
                             targets=r["targets"], batch=int(r["batch"]), optimizer=r["optimizer"],
                             recompute=r["recompute"], stack=r["stack"])) for r in csv.DictReader(fh)]


def _check_values() -> dict[str, str]:
    """Chapters 3, 4, 15 and 16: what the KV cache, a hybrid's state, the allowance's 8%, the peak of a step,
    GGUF files, paged optimizers and the longest context were checked against, and how far off they are."""
    from .allocator_fragmentation import fragmentation_allowance, measured_fragmentation
    from .prose import number_word
    from .units import fmt_gib

    sweep = _hf_sweep_errors()
    v = {"app_kv_types": f"{len(sweep['kv'])}", "app_state_types": f"{len(sweep['state'])}"}
    for setting, k in (("default", "pub"), ("expandable_segments", "es")):   # allocator_fragmentation.csv
        v[f"app_frag_{k}"] = f"{fragmentation_allowance(setting):.0%}"
        n = measured_fragmentation(allocator=setting).n_sources
        v[f"app_frag_{k}_n"] = f"{n} source" + "s" * (n > 1)
    gguf = _gguf_errors()
    v["app_gguf_n"], v["app_gguf_err"] = number_word(len(gguf)), f"{max(map(abs, gguf.values())):.1%}"
    runs, gpu = _paged_65b()
    v["app_paged_peak"], v["app_unpaged_peak"] = (fmt_gib(runs[p].peak_bytes) for p in (True, False))
    v["app_paged_gpu"] = fmt_gib(gpu.memory_bytes)
    from .measurements import compare_steps

    hf = compare_steps().query("stack == 'hf'")              # data/step_measurements.csv, chapter 5
    v["app_peak_n"], v["app_peak_err"] = f"{len(hf)}", f"{hf['peak_error'].abs().max():.1%}"
    ratios = [pub / lib for pub, _, _, lib in _max_contexts() if pub]           # published over the library's
    v["app_ctx_n"] = number_word(len(ratios))
    v["app_ctx_lo"], v["app_ctx_hi"] = f"{min(ratios):.2f}", f"{max(ratios):.2f}"
    return v


def _dp_breakeven():
    """Data parallelism's break-even, closed form and the library's (Llama-3-8B, DDP over 8 H100s) at 512 and
    4,096 tokens (chapter 7)."""
    from .catalog import get_gpu
    from .comm import dp_breakeven_tokens
    from .hardware import dense_tflops, kernel_efficiency, link_bandwidth_one_way_gbps

    h100 = get_gpu("H100 SXM")
    closed = (2 / 3 * 7 / 8 * dense_tflops(h100, "bf16") * 1e12 * kernel_efficiency(h100, "bf16")
              / (link_bandwidth_one_way_gbps(h100) * 1e9))
    return closed, {s: dp_breakeven_tokens("llama-3-8b", h100, dp=8, zero=0, seq=s) for s in (512, 4096)}


def _six_n():
    """The library's training FLOPs per token over ``6 N_mm`` for Llama 3 8B at 2,048 and 8,192 tokens."""
    from .flops import matmul_params, training_flops_per_token

    return {s: training_flops_per_token("llama-3-8b", seq=s) / (6 * matmul_params("llama-3-8b"))
            for s in (2048, 8192)}


def _model_values() -> dict[str, str]:
    """Chapters 1 to 10: parameter shortcuts, KV numbers, recomputation's overstatement, FLOPs, GEMMs."""
    from .activations import activation_memory
    from .catalog import get_model, list_models
    from .flops import narayanan_eq3_flops_per_token, training_flops_per_token
    from .footprint import LOSS_BACKWARD_BYTES_PER_LOGIT
    from .inference import kv_numbers_per_token_per_layer
    from .kernels import GEMM_CEILING, GEMM_EMAX, GEMM_R_HALF, fit_gemm_curve
    from .memory import training_memory
    from .model import approx_params_12lh2
    from .parallel import llama3_long_context_layout
    from .reliability import checkpoint_bytes
    from .scaling import compute_optimal, six_nd_ratios
    from .units import fmt_gib

    v = {"app_mla_latent": f"{kv_numbers_per_token_per_layer('deepseek-v3'):,}",
         "app_mla_expanded": f"{kv_numbers_per_token_per_layer('deepseek-v3', expanded=True):,}"}
    # the 12 L h^2 shortcut against the full count, over the catalogue's dense models (chapter 1's table)
    err = {n: abs(approx_params_12lh2(get_model(n)) / get_model(n).n_params - 1)
           for n in list_models(moe=False)}
    v["app_12lh2_big"] = f"{max(e for n, e in err.items() if get_model(n).n_params >= 10e9):.1%}"
    v["app_12lh2_max"] = f"{max(err.values()):.0%}"
    # partial recomputation's overstatement: one rebuilt layer on Llama 3 405B's 128K layout, l_rc = 1
    l3 = llama3_long_context_layout()            # tp 8 with SP, cp 16, pp 16 x 4 chunks, 16 micro-batches
    total = training_memory("llama-3.1-405b", batch=1, seq=131072, grad_accum=16, parallel=l3,
                            recompute="full", recompute_layers=1).total_bytes
    rebuilt = activation_memory("llama-3.1-405b", batch=1, seq=131072, tp=l3.tp, sp=l3.sp, cp=l3.cp,
                                recompute="full").rebuilt_bytes
    v["app_pr_rebuilt"], v["app_pr_total"] = fmt_gib(rebuilt), fmt_gib(total)
    v["app_pr_share"] = f"{rebuilt / total:.1%}"
    v["app_loss_bytes"] = f"{LOSS_BACKWARD_BYTES_PER_LOGIT['fused']:g}"
    v["app_ckpt_bpp"] = f"{checkpoint_bytes('llama-3-70b') / get_model('llama-3-70b').n_params:g}"
    # FLOPs: 6ND against Chinchilla's own count, the attention term's growth, Narayanan et al.'s Eq. 3
    a4 = six_nd_ratios()["flop_ratio"]                                    # data/chinchilla_flops_ratio.csv
    v["app_a4_range"] = f"{a4.min():.2f} to {a4.max():.2f}"
    v["app_a4_low"] = f"{1 - 1 / a4.max():.0%}"
    six_n = _six_n()
    v["app_6n_2k"], v["app_6n_8k"] = f"{six_n[2048]:.2f}", f"{six_n[8192]:.2f}"
    g3 = get_model("gpt3-175b")
    eq3 = narayanan_eq3_flops_per_token(g3, seq=2048)
    v["app_eq3_diff"] = f"{abs(training_flops_per_token(g3, seq=2048, recompute='full') / eq3 - 1):.2%}"
    chin = compute_optimal(5.76e23)                               # Gopher's budget, Approach 1
    v["app_chin_a"] = f"{chin.a:.2f}"
    v["app_chin_tpp"] = f"{chin.tokens / chin.params:.0f}"
    v["app_chin_tokens"] = f"{chin.tokens / 1e12:.2f} trillion"
    v["app_gemm_ceiling"], v["app_gemm_emax"] = f"{GEMM_CEILING:.2f}", f"{GEMM_EMAX:.2f}"
    v["app_gemm_rhalf"] = f"{GEMM_R_HALF:.2f}"
    v["app_gemm_rms"] = f"{fit_gemm_curve()[2]:.1%}"                     # rms of the log residuals
    return v


def _parallel_values() -> dict[str, str]:
    """Chapters 7 and 8: offload's host figures, DP's break-even, wire counts, pipelines."""
    from .comm import CPU_ADAM_BYTES_PER_PARAM, HOST_MEMORY_GBPS
    from .hardware import CPU_ADAM_GRACE, DGX_H100_DRAM_GBPS, cpu_adam_params_per_s
    from .network import host_link_gbps, wire_factor
    from .pipeline_schedule import grad_reduce_runs, pipeline_schedule

    v = {"app_cpu_adam_bytes": f"{CPU_ADAM_BYTES_PER_PARAM}",
         "app_host_link": f"{host_link_gbps('H100 SXM'):.1f}",                  # PCIe Gen5 x16
         "app_host_link_a100": f"{host_link_gbps('A100 80GB'):.1f}",            # PCIe Gen4 x16
         "app_host_mem": f"{HOST_MEMORY_GBPS:.0f}"}
    adam_x = HOST_MEMORY_GBPS * 1e9 / CPU_ADAM_BYTES_PER_PARAM / cpu_adam_params_per_s(DGX_H100_DRAM_GBPS, 8)
    v["app_host_mem_x"] = f"{adam_x - 1:.0%}"
    g_n, g_s, g_dram = CPU_ADAM_GRACE
    v["app_adam_grace_x"] = f"{g_n / cpu_adam_params_per_s(g_dram) / g_s:.1f}"
    closed, exact = _dp_breakeven()
    v["app_dp_closed"], v["app_dp_4k"], v["app_dp_512"] = (f"{x:,.0f}"
                                                           for x in (closed, exact[4096], exact[512]))
    # two nodes of 8 GPUs: the network carries one S per node for an all-reduce, a flat ring of 16 GPUs 1.875
    v["app_wire_hier"] = f"{wire_factor('all-reduce', 16, 8):g}"
    v["app_wire_flat"] = f"{wire_factor('all-reduce', 16):g}"
    v["app_zero_runs"] = f"{grad_reduce_runs(4, 16, 2)}"                        # p = 4, m = 16, v = 2
    odd = pipeline_schedule("interleaved", pp=2, micro_batches=3, virtual_stages=2, microbatch_group=3)
    v["app_vp_odd"] = f"{odd.bubble_fraction:.1%}"
    return v


#: The speculative-decoding example: chapter 15's pair (``spec_pair``), Llama 3 70B in FP8 drafted by Llama 3
#: 8B on an H200, where the target fits (in bf16, 141 GB, it would not fit the H100 the page once named).
SPEC_EXAMPLE = dict(model="llama-3-70b", draft="llama-3-8b", gpu="H200", weights="fp8")


def _speculative():
    """:data:`SPEC_EXAMPLE` at k 4, acceptance 0.8: with SGLang's fitted step overhead (``True``) and without
    one (``False``)."""
    from .speculative import speculative_decoding

    return {t0: speculative_decoding(**SPEC_EXAMPLE, k=4, acceptance=0.8,
                                     **({"engine": "SGLang"} if t0 else {"step_overhead_s": 0.0}))
            for t0 in (True, False)}


def allen_cunneen_errors() -> dict[tuple[int, float, float], float]:
    """Allen-Cunneen's 95th-percentile wait over the simulated one, less 1, for each of :data:`AC_CASES`
    (unit mean service time; chapter 15's queueing entry)."""
    import numpy as np

    from .queueing import simulate_wait_s, wait_quantile_s

    out = {}
    for c, rho, cs2 in AC_CASES:
        sim = simulate_wait_s(c, rho * c, 1.0, cs2=cs2, **_AC_SIM)
        out[c, rho, cs2] = wait_quantile_s(c, rho * c, 1.0, 95, cs2=cs2) / np.percentile(sim, 95) - 1
    return out


def _check_ac(ac):
    """``ac`` as :func:`allen_cunneen_errors` returns it (computed when ``None``)."""
    if ac is None:
        return allen_cunneen_errors()
    if not isinstance(ac, dict):
        raise TypeError(f"ac must be a dict from allen_cunneen_errors() or None, not {type(ac).__name__}")
    if set(ac) != set(AC_CASES):
        raise ValueError(f"ac must hold one error for each of AC_CASES {AC_CASES}, got keys {sorted(ac)}")
    if not all(isinstance(e, (int, float)) and math.isfinite(e) for e in ac.values()):
        raise ValueError("ac's errors must be finite numbers")
    return ac


def _goodputs():
    from .reliability import goodput

    return {n: goodput("llama-3.1-405b", n_gpus=n, restart_min=10, storage_gb_per_s=2000)
            for n in (16384, 131072)}


def _serving_values(ac=None) -> dict[str, str]:
    """Chapters 11, 14, 15 and 19: engines, speculative decoding, queueing, goodput, RL, prices, the audit."""
    from .audit import SEQ, SEQS
    from .audit_verdict import BAND
    from .catalog import prices_as_of
    from .queueing import erlang_c
    from .rl import MAX_NUM_SEQS
    from .rl_generation import ENGINE_MEMORY_UTILIZATION
    from .rl_trainer import SLIME_SYNC_BUCKET_BYTES, SLIME_SYNC_BUCKET_S, SLIME_SYNC_QWEN3_30B_BYTES
    from .serve_engine import BLOCK_SIZE, GPU_MEMORY_UTILIZATION

    v = {"app_vllm_util": f"{GPU_MEMORY_UTILIZATION:g}", "app_vllm_block": f"{BLOCK_SIZE}",
         "app_rl_engine_util": f"{ENGINE_MEMORY_UTILIZATION}",
         "app_rl_max_seqs": f"{MAX_NUM_SEQS:,}",                                 # verl's rollout default
         "app_rl_bucket_ms": f"{SLIME_SYNC_BUCKET_S * 1e3:.0f}",                 # slime's 7 s / its buckets
         "app_rl_buckets": f"{math.ceil(SLIME_SYNC_QWEN3_30B_BYTES / SLIME_SYNC_BUCKET_BYTES)}",
         "app_prices_as_of": prices_as_of(),                                     # data/gpu_prices.csv
         "app_band": f"{BAND:g}",                                                # chapter 14's band factor
         "app_audit_seqs": " or ".join(f"{s:,}" for s in sorted(SEQS)),          # the open lengths
         "app_audit_seq": f"{SEQ:,}"}                                            # the central one
    spec = _speculative()
    v["app_spec_t0"], v["app_spec_no_t0"] = f"{spec[True].speedup:.2f}x", f"{spec[False].speedup:.2f}x"
    ac = _check_ac(ac)
    v["app_ac_small_n"], v["app_ac_big_n"] = "8", "32"
    v["app_ac_small"] = f"{math.ceil(max(abs(e) for (c, _, s), e in ac.items() if c == 8 and s != 1) * 100)}%"
    v["app_ac_exact"] = f"{max(abs(e) for (_, _, s), e in ac.items() if s == 1):.1%}"      # M/M/c: exact
    v["app_ac_big_wait"] = f"{erlang_c(32, 25.6, 1.0):.0%}"
    v["app_ac_big_lo"], v["app_ac_big_hi"] = f"{ac[32, 0.8, 0.0]:+.0%}", f"{ac[32, 0.8, 2.0]:+.0%}"
    g16, g128 = _goodputs().values()
    v["app_gp_gap_16k"] = f"{abs(g16.goodput_exponential - g16.goodput) * 100:.1f}"
    v["app_gp_mtbi_128k"] = f"{g128.mtbf_s / 60:.0f}"
    v["app_gp_first_128k"], v["app_gp_exp_128k"] = f"{g128.goodput:.0%}", f"{g128.goodput_exponential:.0%}"
    return v


def appendix_values(ac=None, *, measured=None) -> dict[str, str]:
    """Every number the appendix shows, ``{name: text}`` with ``name`` its ``{eval}`` name (``app_...``), as
    the page prints it. ``ac``: :func:`allen_cunneen_errors`' result, if already computed; ``measured``:
    :func:`~llmsizing.appendix_measured.measured_checks`' result, likewise."""
    return {**_calibration_values(), **_finetune_values(), **_model_values(), **_parallel_values(),
            **_serving_values(ac), **_check_values(),
            **_measured_values(measured or _measured())}


def _usable_fractions() -> set[float]:
    """The usable fraction of a GPU's memory that the page types ("usable = 0.9 in every part", "0.9 of its
    memory", "fits 90% of the GPU"): the states' constant and the defaults of the functions that use it."""
    import inspect

    from .fewest_gpus import min_gpus
    from .finetune import max_context
    from .planner import plan
    from .states import USABLE_FRACTION

    params = (inspect.signature(f).parameters for f in (plan, min_gpus, max_context))
    return {USABLE_FRACTION} | {p["usable_fraction"].default for p in params if "usable_fraction" in p}


def appendix_claims(ac=None, *, measured=None) -> dict[str, bool]:
    """What the appendix says in words about its numbers, each ``True`` while it holds (a sentence to change
    when one turns ``False``). ``ac``: :func:`allen_cunneen_errors`' result, if already computed;
    ``measured``: :func:`~llmsizing.appendix_measured.measured_checks`' result, likewise."""
    from .allocator_fragmentation import fragmentation_allowance
    from .catalog import get_gpu, get_model
    from .finetune_time import GROUP_RANGES, RESIDUAL_RANGE
    from .footprint import LOSS_BACKWARD_BYTES_PER_LOGIT
    from .hardware import dtype_kernel_share, kernel_efficiency_row
    from .intervals import min_units
    from .kernels import expert_padding_share
    from .mfu import mfu_range_factors
    from .precision import FP8_SCHEMES, TE_AMAX_HISTORY_LEN
    from .range_candidates import MAX_WIDTH as goal_w
    from .rl_trainer import SLIME_SYNC_QWEN3_30B_S
    from .states import FIXED_OVERHEAD_BYTES, FRAGMENTATION

    iv = _intervals()
    k8, k16 = (kernel_efficiency_row("H100 SXM", d) for d in ("fp8", "bf16"))
    h100 = get_gpu("H100 SXM")
    closed, exact = _dp_breakeven()
    six_n = _six_n()
    ft = iv.loc[("fine-tuning", "all")]
    pub, q = _qlora_sources()
    lay_all, lay_stack = iv.loc[("training-layout", "all")], iv.loc[("training-layout", "stack:all")]
    te = FP8_SCHEMES["fp8-mixed"]
    ac = _check_ac(ac)
    g128 = _goodputs()[131072]
    sweep, (paged, gpu48), ctx = _hf_sweep_errors(), _paged_65b(), _max_contexts()

    def outwards(lo, hi):
        return math.floor(lo * 100) / 100, math.ceil(hi * 100) / 100

    def active(m):
        r = m.moe_breakdown()["routed_experts"]
        return m.active_params == m.n_params - r + r * m.experts_per_token // m.experts

    return {
        "FP8's compute share is Hopper's FP8 over BF16 kernel efficiency":
            dtype_kernel_share("H100 SXM", "fp8") == k8.kernel_efficiency / k16.kernel_efficiency,
        "the FP8 share is the same on every GPU":
            dtype_kernel_share("L40S", "fp8") == dtype_kernel_share("H100 SXM", "fp8"),
        "6N's gap grows with the sequence": 1 < six_n[2048] < six_n[8192],
        "the DP break-even's closed form is an upper end": exact[512] < exact[4096] < closed,
        "slime's weight sync takes 7 s": SLIME_SYNC_QWEN3_30B_S == 7.0,
        "one MFU range per GPU generation, steady state and whole run alike":
            mfu_range_factors(h100) == mfu_range_factors(h100, whole_run=True),
        "the FP8 runs with a layout are a subset of the FP8 runs":
            iv.loc[("training-layout", "fp8"), "n_rows"] < iv.loc[("training-inputs", "fp8"), "n_rows"],
        "the pooled fine-tuning range is data/intervals.csv's, rounded outwards":
            outwards(ft["low"], ft["high"]) == RESIDUAL_RANGE,
        "each base's fine-tuning range is data/intervals.csv's, rounded outwards and holding 1": all(
            outwards(min(r["low"], 1), max(r["high"], 1)) == GROUP_RANGES[g]
            for g in GROUP_RANGES for r in [iv.loc[("fine-tuning-base", g)]]),
        "too few fine-tuning sources to weigh them alike": ft["n_sources"] < min_units(0.8) + 1,
        "the sources the fine-tuning range counts are the CSV's":
            len(pub["short"].unique()) == int(ft["n_sources"]),
        "every Q-LoRA quantiser is named": set(q["quantizer"]) <= set(QLORA_QUANTIZERS),
        "the estimate's range is wider than the goal, both layout ranges within it, the stack's narrower":
            iv.loc[("training-inputs", "all"), "median_width"] > goal_w
            and lay_stack["median_width"] < lay_all["median_width"] <= goal_w,
        "the speculative example is memory-bound":
            all(s.verify_bound == "memory" for s in _speculative().values()),
        "the loss backward keeps 8 bytes per logit on both stacks":
            set(LOSS_BACKWARD_BYTES_PER_LOGIT.values()) == {8.0},
        "TE's FP8 scaling state is 4 GEMMs x 5 tensors x 4 B x (1 + history)":
            (te.gemms_per_layer, te.tensors_per_gemm, te.amax_history_len, TE_AMAX_HISTORY_LEN)
            == (4, 5, 1, 1024) and te.meta_bytes_per_layer == 4 * 5 * 4 * (1 + 1),
        "the tile padding is rows / max(128, rows + 127/2)":
            all(expert_padding_share(r) == r / max(128, r + 127 / 2) for r in (64, 512, 1024)),
        "N_active = N - (1 - k/E) N_routed": all(map(active, map(get_model, ("deepseek-v3", "mixtral-8x7b",
                                                                             "gpt-oss-120b")))),
        "Allen-Cunneen's errors are largest at 32 slots, 80% busy, fixed and cs2 = 2":
            (min(ac, key=ac.get), max(ac, key=ac.get)) == ((32, 0.8, 0.0), (32, 0.8, 2.0)),
        "first-order goodput is pessimistic at 128K GPUs": g128.goodput_exponential > g128.goodput,
        "the KV cache per token and a hybrid's state equal transformers' on every type read":
            not any(e for errs in sweep.values() for e in errs.values()),
        "the allowance is 1 GiB + 8% of the modelled bytes":
            (FIXED_OVERHEAD_BYTES, FRAGMENTATION) == (2**30, 0.08),
        "the usable fraction is 0.9 in every part (states, planner, fewest GPUs, longest context)":
            _usable_fractions() == {0.9},
        "the 8% is below the published fragmentation, with either allocator setting":
            FRAGMENTATION < fragmentation_allowance("expandable_segments")
            < fragmentation_allowance("default"),
        "the library runs out of memory where a source did, and lands inside a published bracket":
            all(lib == 0 for pub, _, _, lib in ctx if pub == 0)
            and all(fits <= lib < oom for pub, fits, oom, lib in ctx if pub is None),
        "LLaMA-65B's QLoRA script fits the 48 GB GPU with its paged optimizer, not without":
            paged[True].peak_bytes < gpu48.memory_bytes < paged[False].peak_bytes,
        **_measured_claims(measured or _measured()),
    }


def appendix_prose(ac=None) -> ChapterText:
    """The appendix's page as its cell glues it: every number it shows (:func:`appendix_values`, in
    ``values``, keyed by ``{eval}`` name) and what it says of them in words (:func:`appendix_claims`, in
    ``data["claims"]``). Raises :class:`~llmsizing.prose.ProseOutOfDate` naming each claim that no longer
    holds. ``ac``: :func:`allen_cunneen_errors`' result, if already computed."""
    ac, measured = _check_ac(ac), _measured()
    claims = appendix_claims(ac, measured=measured)
    wrong = [claim for claim, holds in claims.items() if not holds]
    prose_check(not wrong, "; ".join(wrong), "the appendix")
    return ChapterText(values=appendix_values(ac, measured=measured), data={"claims": claims})
