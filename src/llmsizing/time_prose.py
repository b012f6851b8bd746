"""Chapter 10's ("FLOPs and time") tables and numbers in sentences (issue 38: notebooks stay short, long code
belongs in the library): the kernel efficiency by generation and what it multiplies, the calibration's four
bands, the runs left out by source, the estimate's warnings, compute-optimal sizing and the seed's figures.

Each ``*_prose`` function computes a section's figures with the library's own functions, checks what the
prose says about them (:func:`~llmsizing.prose.prose_check`) and returns a
:class:`~llmsizing.prose.ChapterText`: the texts the notebook glues as ``ch10_<name>`` (``values``) and what
its cell prints (``report``). No new arithmetic beyond ratios of the library's results and the published
figures cited where they are used.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from .calibration import fit_kernel_efficiency, mfu_loso_check
from .catalog import DATA_DIR, get_gpu, get_model, list_gpu_variants
from .hardware import generation_name, kernel_efficiency_table
from .intervals import intervals_table
from .kernels import FA_FWD_BWD, LIB_FWD_BWD, attention_efficiency, best_gemm_share, gemm_efficiency
from .kernels import layer_gemm_efficiency
from .mfu_published import published_runs
from .prose import ChapterText, prose_check
from .range_candidates import MAX_WIDTH, MIN_COVERAGE
from .scaling import GOPHER_FLOPS, chinchilla_tables, compute_optimal, largest_compute_optimal, overtrained
from .time_cost import mfu_estimate, mfu_model_table, training_time

__all__ = ["kernel_table_prose", "kernel_shapes_prose", "bands_prose", "loso_prose", "estimates_prose",
           "compute_optimal_prose", "budget_prose", "seed_prose", "chinchilla_rule_n", "FOUNDRY_SOURCE"]

_says = partial(prose_check, chapter="chapter 10's prose")
#: MosaicML's llm-foundry benchmark table, the source with the most runs (data/published_runs.csv)
FOUNDRY_SOURCE = "mosaicml/llm-foundry scripts/train/benchmarking/README.md"


def _left(frame, columns):
    """to_string formatters that left-align ``columns`` of text to their widest cell."""
    return {c: (lambda w: lambda s: s.ljust(w))(frame[c].str.len().max()) for c in columns}


def chinchilla_rule_n(flops: float) -> float:
    """The rule of thumb's compute-optimal parameters, ``N = sqrt(C / 120)``: ``C = 6 N D`` with ``D = 20 N``
    (Hoffmann et al. 2022's ~20 tokens per parameter; chapter 10's takeaway). Raises ValueError for a budget
    that is not a positive finite number of FLOPs."""
    if not (isinstance(flops, (int, float)) and np.isfinite(flops) and flops > 0):
        raise ValueError(f"flops must be a positive finite number of FLOPs, got {flops!r}")
    return (flops / 120) ** 0.5


def kernel_table_prose() -> ChapterText:
    """The kernel efficiency by GPU generation and dtype
    (:func:`~llmsizing.hardware.kernel_efficiency_table`), how far a stand-in can be off (the GEMM-share
    transfer Ampere -> Hopper where both ends are fitted) and how far Hopper's held-out FP8 runs fall below
    its FP8 median. ``report``: the table. Checks the prose's list of stand-in generations and that the B200
    and MI300X runs are held out, one BF16 baseline each."""
    ke = kernel_efficiency_table()
    ke_runs = ke.set_index(["generation", "dtype"])["runs"]
    shown = ke.copy()
    shown["kernel_efficiency"] = shown["kernel_efficiency"].map("{:.1%}".format)
    shown["runs"] = [str(n) if c else "stand-in" for n, c in zip(ke["runs"], ke["calibrated"])]
    shown["generation"] = shown["generation"].map(generation_name)      # "Hopper", as the figure says
    report = shown[["generation", "dtype", "kernel_efficiency", "runs", "gpus"]].to_string(index=False)
    by_gen = ke.set_index(["generation", "dtype"])["kernel_efficiency"]
    values = {"ke_ampere": f"{by_gen['ampere', 'bf16']:.1%}", "ke_hopper": f"{by_gen['hopper', 'bf16']:.1%}",
              "ke_hopper_fp8": f"{by_gen['hopper', 'fp8']:.1%}",
              "ke_standin": f"{by_gen['ada', 'bf16']:.1%}",          # the plain stand-in
              "ke_mi300": f"{by_gen['cdna3', 'bf16']:.1%}",           # scaled by its best GEMM
              "ke_b200": f"{by_gen['blackwell', 'bf16']:.1%}",
              "ke_b200_fp8": f"{by_gen['blackwell', 'fp8']:.1%}",
              "ke_hopper_fp8_n": f"{int(ke_runs['hopper', 'fp8'])}"}
    carried = by_gen["ampere", "bf16"] * best_gemm_share(("H100 SXM",)) / best_gemm_share(("A100 80GB",))
    values["transfer_err"] = f"{abs(carried / by_gen['hopper', 'bf16'] - 1):.1%}"
    per_run, _ = fit_kernel_efficiency()
    held = per_run[(per_run["generation"] == "hopper") & (per_run["dtype"] == "fp8")
                   & ~per_run["calibration"] & (per_run["cp"].fillna(1) <= 1)]["kernel_efficiency"].dropna()
    below = 1 - held / by_gen["hopper", "fp8"]
    values.update({"fp8_held_below": f"{below.min():.0%} to {below.max():.0%}", "fp8_held_n": f"{len(held)}",
                   "ke_n_calibrated": f"{int(ke['calibrated'].sum())}", "ke_n_rows": f"{len(ke)}"})
    _says(all("torchtitan" in r or "torchao" in r for r in per_run.loc[held.index, "run"]),
          "the held-out Hopper FP8 runs are torchtitan's and torchao's")
    _says(set(ke.loc[~ke["calibrated"], "generation"]) == {"blackwell", "cdna2", "cdna3", "cdna4", "ada",
                                                          "ampere-pcie", "volta"}, "the stand-in generations")
    new = published_runs().query("gpu in ('B200', 'MI300X')")   # torchao's FP8 rows and BF16 baselines
    _says(not new["calibration"].any() and set(new["dtype"]) == {"fp8", "bf16"},
          "the B200, MI300X runs held out")
    _says(sorted(new.loc[new["dtype"] != "fp8", "gpu"]) == ["B200", "MI300X"], "one BF16 baseline each")
    return ChapterText(values=values, report=report)


def kernel_shapes_prose(a100, h100) -> ChapterText:
    """What the kernel efficiency multiplies (:mod:`llmsizing.kernels`): attention on the A100 and H100 (and
    cuDNN's), the Linear layers' GEMMs by model and tp, and the GEMM curve against what was measured on an
    H100 (data/gemm_efficiency.csv: the best GEMM a search found and XLA's measured grid, which the curve is
    not fitted on). ``report``: the efficiencies. Checks that the curve's top is above any measured GEMM and
    that it keeps the measured ratio of a small GEMM to a large one."""
    att = {(g.name, k): attention_efficiency(g, head_dim=128, seq=8192, kernel=k)
           for g, k in ((a100, None), (h100, None), (h100, "cudnn"))}
    shape = {(n, tp): layer_gemm_efficiency(n, h100, tp=tp, tokens=8192)
             for n, tp in (("mpt-bench-1b", 1), ("llama-3.1-405b", 1), ("llama-3.1-405b", 8))}
    lines = [f"attention, {g} ({k or 'FlashAttention-2'}), head dim 128, 8K: {v:.1%} of the BF16 peak"
             for (g, k), v in att.items()]
    lines += [f"Linear layers' GEMMs, {n} tp={tp}, 8,192 tokens on an H100: {v:.1%} of the peak"
              for (n, tp), v in shape.items()]
    values = {"k_att_a100": f"{att['A100 80GB', None]:.0%}", "k_att_h100": f"{att['H100 SXM', None]:.0%}",
              # a backward: 2.5 forwards (FlashAttention), 2 (the library)
              "k_att_h100_fa": f"{att['H100 SXM', None] * FA_FWD_BWD / LIB_FWD_BWD:.0%}",
              "k_att_cudnn": f"{att['H100 SXM', 'cudnn']:.0%}",
              "k_gemm_1b": f"{shape['mpt-bench-1b', 1]:.0%}",
              "k_gemm_405b": f"{shape['llama-3.1-405b', 1]:.0%}",
              "k_gemm_405b_tp8": f"{shape['llama-3.1-405b', 8]:.0%}"}
    ge = pd.read_csv(DATA_DIR / "gemm_efficiency.csv")
    xla = (ge[(ge["kind"] == "grid") & (ge["gpu"] == "H100 SXM")].set_index(["m", "n", "k"])["tflops"]
           / h100.bf16_dense_tflops)
    best_h100 = best_gemm_share(("H100 SXM",))
    _says(shape["llama-3.1-405b", 1] > best_h100 > xla.max(), "the curve's top is above any measured GEMM")
    values["k_best_h100"] = f"{best_h100:.0%}"
    # below 4,096 rows the curve keeps what XLA's measured table keeps (few_row_share): a 256-row GEMM
    kept = gemm_efficiency(h100, 256, 4096, 4096) / gemm_efficiency(h100, 4096, 4096, 4096)
    _says(abs(kept / (xla[256, 4096, 4096] / xla[4096, 4096, 4096]) - 1) < 1e-6, "the curve keeps the ratio")
    return ChapterText(values=values, report="\n".join(lines))


#: The calibration's four bands: key -> (name, intervals.csv area, group, what it is for)
BANDS = {"est": ("the estimate", "training-inputs", "all", "mfu_estimate, training_time: no layout"),
         "base": ("baseline", "training", "all", "the estimate's fit without stack and batch"),
         "lay": ("layout", "training-layout", "all", "step_time and the planner: a known layout"),
         "stack": ("layout + stack", "training-layout", "stack:all", "the same, with framework= named")}


def bands_prose() -> ChapterText:
    """The calibration's four bands in one table (data/intervals.csv, each checked leaving one source out)
    against the book's goal for a training range (range_candidates.MIN_COVERAGE inside out of source at a
    median no wider than MAX_WIDTH times). Checks the prose: coverage met by every band; both layout bands
    narrow enough, the one with the stack the narrowest; the baseline the widest, holding more."""
    iv = intervals_table().set_index(["area", "group"])
    summary = pd.DataFrame([{"band": b, "what it is for": what,
                             "inside out of source": f"{iv.loc[(a, g), 'measured_coverage']:.0%}",
                             "median width": f"{iv.loc[(a, g), 'median_width']:.2f}x",
                             "runs": int(iv.loc[(a, g), "n_rows"]),
                             "sources": int(iv.loc[(a, g), "n_sources"])}
                            for b, a, g, what in BANDS.values()])
    report = summary.to_string(index=False, justify="left",
                               formatters=_left(summary, ("band", "what it is for")))
    w = {key: iv.loc[(a, g), "median_width"] for key, (_, a, g, _what) in BANDS.items()}
    cov = {key: iv.loc[(a, g), "measured_coverage"] for key, (_, a, g, _what) in BANDS.items()}
    _says(min(cov.values()) >= MIN_COVERAGE, "coverage is met by every band")
    _says(min(w["est"], w["base"], iv.loc[("training-inputs", "ampere"), "median_width"]) > MAX_WIDTH,
          "the estimate's bands are wider than the goal")
    _says(max(w["lay"], w["stack"]) <= MAX_WIDTH and w["stack"] < w["lay"],
          "both layout bands meet the width")
    _says(w["base"] == max(w.values()) and cov["base"] > cov["est"], "the baseline: widest, holds more")
    _says(w["lay"] < min(w["est"], w["base"]), "the layout band: narrower than both")
    values = {"bar": f"{MIN_COVERAGE:.0%} of the runs inside out of source at a median width of at most "
                     f"{MAX_WIDTH:g} times"}
    return ChapterText(values=values, report=report)


def loso_prose(cov_fp8: str) -> ChapterText:
    """Each published run priced with its whole source left out of the fit
    (:func:`~llmsizing.calibration.mfu_loso_check`): by source, the lowest and highest ratio of published to
    predicted MFU and how many fall inside the range. ``cov_fp8`` is the FP8 runs' coverage as the prose
    quotes it (intervals.csv's fp8 row, :func:`~llmsizing.mfu_prose.calibration_prose`). Also the runs
    priced on a stand-in in their fold, and the runs on a part no one sells (data/gpu_variants.csv).
    ``report``: the table by source."""
    check, runs = mfu_loso_check()
    iv = intervals_table().set_index(["area", "group"])
    folds = runs.assign(ratio=np.exp(check.residuals), inside=check.inside)
    by_source = folds.groupby("source_key").agg(runs=("run", "size"), lowest=("ratio", "min"),
                                                highest=("ratio", "max"), inside=("inside", "sum"))
    by_source.index = by_source.index.str.slice(0, 48)
    report = by_source.sort_values("lowest").to_string(formatters={"lowest": "x{:.2f}".format,
                                                                  "highest": "x{:.2f}".format})
    foundry = folds.set_index("source_key").loc[FOUNDRY_SOURCE]
    values = {"foundry_n": f"{len(foundry)}", "foundry_max": f"x{foundry['ratio'].max():.2f}",
              "foundry_in": f"{int(foundry['inside'].sum())}"}
    # the FP8 runs on a calibrated GPU generation; the ones priced on a stand-in efficiency are counted apart
    fp8_rows = (folds["dtype"] == "fp8").to_numpy() & check.calibrated
    fp8_folds = folds[fp8_rows]
    for end, i in (("low", fp8_folds["ratio"].idxmin()), ("high", fp8_folds["ratio"].idxmax())):
        values[f"fp8_ratio_{end}"] = f"x{folds.loc[i, 'ratio']:.2f}"
        values[f"fp8_{end}_run"] = folds.loc[i, "run"]
    _says(f"{check.inside[fp8_rows].mean():.0%}" == cov_fp8, "intervals.csv's fp8 row is this count")
    values["n_fp8_sources"] = f"{folds.loc[fp8_rows, 'source_key'].nunique()}"
    # the runs priced on a stand-in in their fold (no calibration run of their generation and dtype elsewhere)
    si = folds[~check.calibrated]
    n_si = iv.loc[("training-layout", "stand-in"), "n_rows"]
    si_fp8 = si[si["dtype"] == "fp8"]      # the FP8 ones (the BF16: torchao's baselines, B200 and MI300X)
    _says(sorted(si.loc[si["dtype"] != "fp8", "gpu"]) == ["B200", "MI300X"], "the BF16 stand-in runs")
    values.update({
        "si_n": f"{len(si)}", "si_gpus": " and ".join(f"{g}s" for g in sorted(set(si["gpu"]), reverse=True)),
        "si_ratio": f"x{si['ratio'].min():.2f} to x{si['ratio'].max():.2f}",
        "si_held": f"{int(si['inside'].sum())} of {len(si)}",
        "si_fp8_held": f"{int(si_fp8['inside'].sum())} of {len(si_fp8)}",
        "step_n_si": f"{int(iv.loc[('training-layout', 'stand-in'), 'n_rows'])}",
        "step_n_all": f"{int(iv.loc[('training-layout', 'all'), 'n_rows'] + n_si)}",
        "goal_width": f"{MAX_WIDTH:g}"})   # the book's goal's width for a training range
    # runs on a part no one sells (data/gpu_variants.csv): priced at that part's own bandwidth
    var = folds[folds["gpu"].isin(list_gpu_variants())]
    _says(var["gpu"].nunique() == 1 and var["source_key"].str.startswith("pytorch/torchtitan").all(),
          "one variant part, torchtitan's runs")
    vg = get_gpu(var["gpu"].iloc[0])
    values.update({"variant_n": f"{len(var)}", "variant_bw": f"{vg.memory_bandwidth_gbps / 1000:.1f} TB/s",
                   "variant_mem": f"{vg.memory_marketed_gb:g} GB"})
    return ChapterText(values=values, report=report)


def estimates_prose() -> ChapterText:
    """The end-to-end estimate's range and warnings for two runs it was not fitted on: Llama 3 8B on the
    MI300X (a stand-in generation; its one held-out BF16 run sits below the band) and GPT-2 on an H100
    (smaller than any published Hopper run). ``report``: each estimate and its warnings. Checks that
    Hopper's range is the widest of any generation and the MI300X note's statement."""
    from .mfu_inputs import stand_in_note

    lines = []
    for model, gpu, seq in (("llama-3-8b", "MI300X", 8192), ("gpt2", "H100 SXM", 1024)):
        est = mfu_estimate(model, gpu=gpu, seq=seq)
        lines.append(f"{model} on {gpu}: MFU {est.mfu:.0%} ({est.low:.0%}-{est.high:.0%}), "
                     f"generation {generation_name(est.generation)}")
        lines += [f"  warning: {w}" for w in est.warnings]
    mi = mfu_estimate("llama-3-8b", gpu="MI300X", seq=8192)
    g2 = mfu_estimate("gpt2", gpu="H100 SXM", seq=1024)
    co = mfu_model_table().set_index(["generation", "dtype"])
    widths = (co["high"] / co["low"]).groupby(level="generation").max()
    _says(widths.idxmax() == "hopper" and abs(mi.high / mi.low - widths.max()) < 1e-6,
          "the widest range of any generation is Hopper's")
    mi_runs = published_runs().query("gpu == 'MI300X'")
    _says(not mi_runs["calibration"].any(), "the MI300X's runs are held out")
    tested = stand_in_note("training-inputs", "cdna3", "bf16").split("; ")[1]   # where its run sits
    _says(tested in mi.range_note, "the estimate's own note says the same")
    _says(tested.startswith("the 1 published CDNA 3 16-bit run") and "sits at 0." in tested
          and tested.endswith("outside the calibrated range"), "one run, below the band")
    values = {"mi300x_range": f"{mi.low:.0%} to {mi.high:.0%}", "mi300x_width": f"{mi.high / mi.low:.1f}",
              "gpt2_mfu": f"{g2.mfu:.0%}",
              # the smallest published Hopper BF16 run, the lower end of the size range the warning prints
              "gpt2_smaller": f"{co.loc[('hopper', 'bf16'), 'min_params'] / get_model('gpt2').n_params:.0f}",
              "mi300x_runs": f"{len(mi_runs)}", "mi300x_tested": tested}
    return ChapterText(values=values, report="\n".join(lines))


def compute_optimal_prose() -> ChapterText:
    """Compute-optimal sizing at Gopher's budget by each fit (:func:`~llmsizing.scaling.compute_optimal`),
    the rule of thumb (:func:`chinchilla_rule_n`) and Chinchilla's Table 3 against the law. ``report``: each
    fit's optimum. Checks that Table 3's printed tokens are more than C / (6N)."""
    lines, values = [], {}
    for fit in ("approach1", "approach2", "approach3", "approach3-rounded", "besiroglu"):
        c = compute_optimal(GOPHER_FLOPS, fit=fit)
        lines.append(f"{fit:18s} β = {c.a:.3f}: {c.params / 1e9:5.1f}B parameters, {c.tokens / 1e12:4.2f}T "
                     f"tokens, {c.tokens_per_param:5.1f} tokens per parameter")
        if fit != "approach1":
            key = fit.replace("-", "_")
            values[f"co_{key}"] = f"{c.params / 1e9:.0f}B"
            values[f"co_{key}_tpp"] = f"{c.tokens_per_param:.0f}"
    chin = compute_optimal(GOPHER_FLOPS)
    tables = chinchilla_tables()
    t3 = tables.query("table == 'Table 3' and params != 67e9")      # the rows the law is not anchored on
    anchor = tables.query("table == 'Table 3' and params == 67e9").iloc[0]   # the row as printed
    _says(anchor["tokens"] > 1.03 * chin.tokens, "the printed tokens are more than C / (6N)")
    values.update({"co_c": f"{GOPHER_FLOPS:.3g}", "co_n": f"{chin.params / 1e9:.0f}B",
                   "co_d": f"{chin.tokens / 1e12:.2f}T", "co_tpp": f"{chin.tokens_per_param:.0f}",
                   "sqrt_rule": f"{chinchilla_rule_n(GOPHER_FLOPS) / 1e9:.0f}B",
                   "co_d_printed": f"{anchor['tokens'] / 1e12:.1f}T",
                   "co_t3_err": f"{(t3['ratio'] - 1).abs().max():.1%}",
                   "co_range": f"{chin.params_low / 1e9:.0f}B to {chin.params_high / 1e9:.0f}B"})
    return ChapterText(values=values, report="\n".join(lines))


def budget_prose(h100) -> ChapterText:
    """The largest compute-optimal model 1,024 H100s train in 30 days
    (:func:`~llmsizing.scaling.largest_compute_optimal`), and Llama 3 8B on 15T tokens against its optimum
    (:func:`~llmsizing.scaling.overtrained`; Dubey et al. 2024), with Approach 3's surface beside it.
    ``report``: both. The longest runs behind either fit: 500B tokens (Hoffmann et al. 2022, abstract)."""
    budget = largest_compute_optimal(gpu=h100, n_gpus=1024, days=30, seq=8192)
    n8 = get_model("llama-3-8b").n_params                # Llama 3 8B on 15T tokens (Dubey et al. 2024)
    l8 = overtrained(n8, 15e12)
    l8_a3 = overtrained(n8, 15e12, fit="approach3")
    opt = budget.optimal
    report = (f"1,024 x H100 for 30 days at MFU {budget.mfu:.0%} ({budget.mfu_from}): {budget.flops:.3g} "
              f"FLOPs -> {opt.params / 1e9:.0f}B parameters on {opt.tokens / 1e12:.1f}T tokens\n"
              f"Llama 3 8B: {l8.tokens_per_param:,.0f} tokens per parameter, {l8.overtraining_factor:.0f}x "
              f"the optimum's {l8.optimal.tokens_per_param:.0f}; same loss from a compute-optimal "
              f"{l8.same_loss_params / 1e9:.0f}B model with {l8.extra_compute:.1f}x less compute "
              f"(Approach 3's surface: {l8_a3.extra_compute:.1f}x)")
    values = {"co_budget_mfu": f"{budget.mfu:.0%}", "co_budget_c": f"{budget.flops:.2g}",
              "co_budget_n": f"{budget.optimal.params / 1e9:.0f}B",
              "co_budget_d": f"{budget.optimal.tokens / 1e12:.1f}T",
              "co_budget_mfu_range": f"{budget.mfu_low:.0%} to {budget.mfu_high:.0%}",
              "co_budget_n_range": f"{budget.optimal_low_mfu.params / 1e9:.0f}B to "
                                   f"{budget.optimal_high_mfu.params / 1e9:.0f}B",
              "ot_tpp": f"{l8.tokens_per_param:,.0f}", "ot_factor": f"{l8.overtraining_factor:.0f}",
              "ot_c": f"{l8.flops:.2g}", "ot_opt_n": f"{l8.optimal.params / 1e9:.0f}B",
              "ot_opt_d": f"{l8.optimal.tokens / 1e12:.1f}T",
              "ot_same_n": f"{l8.same_loss_params / 1e9:.0f}B",
              "ot_extra": f"{l8.extra_compute:.1f}", "ot_extra_a3": f"{l8_a3.extra_compute:.1f}",
              "ot_smaller": f"{l8.same_loss_params / 8.03e9:.0f}",
              "ot_beyond": f"{15e12 / 500e9:.0f}"}
    return ChapterText(values=values, report=report)


def seed_prose(h100, a100) -> ChapterText:
    """The seed's training-time figures (data/seed_claims.csv) against the library's: tokens per second on
    one GPU at the calibrated MFU, Llama-2-70B on 1T tokens on 8 A100s and on one H100, the GPUs its model
    states need, and tokens per second against model size (7B to 70B). ``report``: the library's figures.
    Checks the prose's order: tokens per second fall less than the FLOPs grow, those less than the size."""
    from .memory import min_gpus_for_bytes, model_states

    seed = pd.read_csv(DATA_DIR / "seed_claims.csv").set_index("id")["claimed"]
    tps_h100, tps_a100 = seed["000-tps-h100"], seed["000-tps-a100"]
    days_8a100, cost_8a100 = seed["000-opt1-days"], seed["000-opt1-cost"]
    months_1h100 = seed["000-faq-one-h100"]
    values = {"seed_tps_h100": f"{tps_h100:,.0f}", "seed_tps_a100": f"{tps_a100:,.0f}",
              "seed_days": f"{days_8a100:,.0f}", "seed_cost": f"${cost_8a100:,.0f}",
              "seed_hours": f"{1e12 / (8 * tps_a100) / 3600:,.0f}",   # 1T on 8 GPUs
              "seed_months": f"{months_1h100:.0f}"}
    lines = []
    for name in ("mistral-7b", "llama-2-13b", "llama-2-70b"):
        for g in (h100, a100):
            r = training_time(name, tokens=1e11, gpu=g, n_gpus=1, seq=4096)
            lines.append(f"{name:12s} {g.name:10s} {r.tokens_per_s_per_gpu:8,.0f} tokens/s per GPU at the "
                         f"calibrated MFU {r.mfu:.0%}")
            values[f"tps_{name.replace('-', '_')}_{g.name.split()[0]}"] = f"{r.tokens_per_s_per_gpu:,.0f}"
            if (name, g) == ("llama-2-70b", h100):
                values["tps_x70"] = f"{tps_h100 / r.tokens_per_s_per_gpu:.1f}"
    seed_8a100 = training_time("llama-2-70b", tokens=1e12, gpu=a100, n_gpus=8, seq=4096)
    one_h100 = training_time("llama-2-70b", tokens=1e12, gpu=h100, n_gpus=1, seq=4096)
    states = model_states("llama-2-70b").total_bytes
    values.update({"8a100_days": f"{seed_8a100.days:,.0f}", "8a100_years": f"{seed_8a100.days / 365:.0f}",
                   "8a100_range": f"{seed_8a100.days_low:,.0f} to {seed_8a100.days_high:,.0f}",
                   "8a100_x": f"{seed_8a100.days / days_8a100:.0f}",
                   "1h100_years": f"{one_h100.days / 365:.0f}",
                   "1h100_range": f"{one_h100.days_low / 365:.0f} to {one_h100.days_high / 365:.0f}",
                   "70b_states_gpus": f"{min_gpus_for_bytes(states, a100)}",   # the planner's headroom
                   # with every byte usable
                   "70b_states_gpus_all": f"{min_gpus_for_bytes(states, a100, usable_fraction=1.0)}"})
    # tokens per second against model size, 7B to 70B on an H100: not quite inverse
    n = {m: model_states(m).n_params for m in ("mistral-7b", "llama-2-70b")}
    t = {m: training_time(m, tokens=1e11, gpu=h100, n_gpus=1, seq=4096) for m in n}
    size_x = n["llama-2-70b"] / n["mistral-7b"]
    tps_x = t["mistral-7b"].tokens_per_s_per_gpu / t["llama-2-70b"].tokens_per_s_per_gpu
    flops_x = t["llama-2-70b"].flops_per_token / t["mistral-7b"].flops_per_token
    _says(tps_x < flops_x < size_x and t["mistral-7b"].mfu < t["llama-2-70b"].mfu,
          "tokens per second fall less than the FLOPs grow, and those less than the size")
    values.update({"size_x": f"{size_x:.1f}", "tps_fall_x": f"{tps_x:.1f}",
                   "mfu_7_70": f"{t['mistral-7b'].mfu:.0%} to {t['llama-2-70b'].mfu:.0%}",
                   "8a100_mfu": f"{seed_8a100.mfu:.0%}",
                   "seed_cost_8x": f"${cost_8a100 * 8:,.0f}"})      # eight times the seed's cost
    lines += [f"Llama-2-70B, 1T tokens on 8 A100s: {seed_8a100.days:,.0f} days (seed: {days_8a100:,.0f})",
              f"Llama-2-70B, 1T tokens on 1 H100: {one_h100.days / 365:.0f} years "
              f"(seed: '{months_1h100:.0f}+ months')"]
    return ChapterText(values=values, report="\n".join(lines))


def stage_checks_prose() -> ChapterText:
    """The published stage checks (:func:`~llmsizing.stages.published_stage_checks`: DeepSeek-V3's MFU and
    Llama 3.1 405B's GPU-hours, from the layouts given and estimated) and the published figures the prose
    quotes from the same rows (data/published_stages.csv): DeepSeek-V3's GPU-hours by phase (Table 1) and
    tokens (Secs. 4.2, 4.3). ``report``: each check, library against published."""
    from .stages import published_stage_checks, published_stages

    checks = published_stage_checks()
    lines = []
    for r in checks.itertuples():
        fmt = "{:.2%}" if r.unit == "ratio" else "{:,.0f}"
        lines.append(f"{r.run:15s} {r.check:56s} library {fmt.format(r.predicted):>10s}  published "
                     f"{fmt.format(r.published):>10s}  x{r.ratio:.2f}")
    ds, ll_given, ll_est = checks.itertuples()
    values = {"ds_pub": f"{ds.published:.1%}", "ds_lib": f"{ds.predicted:.1%}", "ds_ratio": f"{ds.ratio:.2f}",
              "ll_given_ratio": f"{ll_given.ratio:.2f}", "ll_est_ratio": f"{ll_est.ratio:.2f}"}
    stages = published_stages().query("run == 'DeepSeek-V3'")
    tok, hours = stages.groupby("phase")["tokens"].sum(), stages.groupby("phase")["phase_gpu_hours"].first()
    values.update({"ds_pre_hours": f"{hours['pre-training'] / 1e3:,.0f}K",
                   "ds_ext_hours": f"{hours['context extension'] / 1e3:,.0f}K",
                   "ds_pre_tokens": f"{tok['pre-training'] / 1e12:.1f}T",
                   "ds_ext_tokens": f"{tok['context extension'] / 1e9:.1f}B",
                   "ds_token_share": f"{tok['context extension'] / tok['pre-training']:.2%}"})
    return ChapterText(values=values, report="\n".join(lines))
