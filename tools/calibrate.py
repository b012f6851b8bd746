#!/usr/bin/env python3
"""Fit the library's two calibrations on data/published_runs.csv and write them to data/ (issue 21), with the
leave-one-source-out check of every calibrated range (issue 34), the range of an MFU predicted from a layout
(llmsizing.step_intervals, area training-layout) included:

    .venv/bin/python tools/calibrate.py            # write data/kernel_efficiency.csv, data/mfu_model.csv,
                                                   # data/mfu_inputs_model.csv, data/intervals.csv and
                                                   # data/stand_in_runs.csv
    .venv/bin/python tools/calibrate.py --check    # exit 1 if the files differ from a fresh fit

The fits themselves live in llmsizing.calibration (chapter 10 shows them); this script only writes their
result, rounded, so that the library reads numbers at run time instead of fitting on import.
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from llmsizing import calibration as C  # noqa: E402
from llmsizing.hardware import _kernel_rows  # noqa: E402

AS_OF = "2026-11-30"
INTERVALS_AS_OF = "2026-11-30"


def kernel_csv() -> str:
    per_run, fit = C.fit_kernel_efficiency()
    stand_in = {d: sorted(fit.xs(d, level="dtype")["median"]) for d in ("bf16", "fp8")}
    flat_in = {d: sorted(fit.xs(d, level="dtype")["flat"]) for d in ("bf16", "fp8")}
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["generation", "gpus", "dtype", "kernel_efficiency", "runs", "source", "as_of", "note",
                "flat_efficiency", "name", "name_source", "name_as_of"])
    for r in _kernel_rows():
        key = (r.generation, r.dtype)
        named = (r.name, r.name_source, r.name_as_of)      # the generation's display name, kept as written
        if key in fit.index:
            f = fit.loc[key]
            w.writerow([r.generation, ";".join(r.gpus), r.dtype, f"{f['median']:.3f}", int(f["count"]),
                        "median over the calibration runs with a published layout (tools/calibrate.py)",
                        AS_OF, f"per-run fits {f['min']:.3f} to {f['max']:.3f}", f"{f['flat']:.3f}", *named])
        else:
            values = stand_in[r.dtype]
            i = (len(values) - 1) // 2
            scale, how = _best_share_scale(r, fit, values[i])
            note = "uncalibrated"
            if scale != 1.0:
                note += _stand_in_error(r, fit, per_run, values[i], scale)
            w.writerow([r.generation, ";".join(r.gpus), r.dtype, f"{values[i] * scale:.3f}", "",
                        "stand-in: no calibration run with a published layout; the lower median of the "
                        f"calibrated {r.dtype} generations{how}", AS_OF, note,
                        f"{flat_in[r.dtype][i] * scale:.3f}", *named])
    return out.getvalue()


def _best_share_scale(row, fit, median):
    """``(scale, words)``: a stand-in generation with a measured best GEMM (:func:`llmsizing.kernels.
    best_gemm_share`) takes the median generation's efficiency times its best share over that
    generation's; a stand-in without one keeps the median (scale 1). Blackwell FP8 is one since issue 35 took
    NVIDIA's NeMo / Megatron-Bridge tables out (its only runs): Hopper FP8's median times B200's best FP8 GEMM
    share over H100's (Bekman's search, 0.763 / 0.709). Chosen over Hopper's FP8/BF16 ratio applied to
    Blackwell's BF16 stand-in because it compares the same dtype's GEMMs; how far off it may be is written in
    the row's note (:func:`_stand_in_error`)."""
    from llmsizing.kernels import best_gemm_share

    own = best_gemm_share(row.gpus, row.dtype)
    ref_rows = _reference_rows(row.dtype, fit, median)
    theirs = best_gemm_share(ref_rows[0].gpus, row.dtype) if ref_rows else None
    if own is None or theirs is None:
        return 1.0, ""
    return own / theirs, (f", times the best measured GEMM's share of the peak over "
                          f"{ref_rows[0].generation}'s ({own:.3f} / {theirs:.3f}, data/gemm_efficiency.csv)")


def _reference_rows(dtype, fit, median):
    """The calibrated rows of ``dtype`` whose median is ``median`` (the generation a stand-in scales from)."""
    ref = [g for (g, d), f in fit.iterrows() if d == dtype and abs(f["median"] - median) < 1e-12]
    return [r for r in _kernel_rows() if r.generation in ref and r.dtype == dtype]


def _stand_in_error(row, fit, per_run, median, scale):
    """Words for a GEMM-scaled stand-in's note: how wrong it could be. (1) The same transfer checked where it
    can be, between two calibrated generations of one dtype that both have a measured best GEMM: one's median
    times the share ratio against the other's fitted median. (2) How many runs the base median rests on, their
    spread, and the spread of the base's held-out runs (``per_run``: :func:`llmsizing.calibration.
    fit_kernel_efficiency`'s, without context parallelism). (3) For FP8, what the BF16 GEMM ratio would have
    given instead (the same as Hopper's FP8/BF16 kernel ratio applied to Blackwell's BF16 stand-in)."""
    from llmsizing.kernels import best_gemm_share

    shares = {key: s for r in _kernel_rows() if (key := (r.generation, r.dtype)) in fit.index
              and (s := best_gemm_share(r.gpus, r.dtype)) is not None}
    checks = [f"{g1}->{g2} {d1} {p:.3f} vs fitted {f:.3f} ({p / f - 1:+.0%})"
              for (g1, d1), s1 in shares.items() for (g2, d2), s2 in shares.items()
              if d1 == d2 and g1 != g2
              for p, f in [(fit.loc[(g1, d1), "median"] * s2 / s1, fit.loc[(g2, d2), "median"])]]
    words = "; how wrong it may be: " + ("the same transfer between calibrated generations gives "
                                         + ", ".join(checks) if checks else "no pair of calibrated "
                                         "generations to check the transfer on")
    if checks and not any(f" {row.dtype} " in c for c in checks):
        words += f" (no such pair in {row.dtype})"
    ref = _reference_rows(row.dtype, fit, median)[0]
    base = fit.loc[(ref.generation, row.dtype)]
    words += (f"; the base, {ref.generation} {row.dtype}, rests on {int(base['count'])} runs "
              f"({base['min']:.3f} to {base['max']:.3f})")
    held = per_run[(per_run["generation"] == ref.generation) & (per_run["dtype"] == row.dtype)
                   & ~per_run["calibration"] & (per_run["cp"].fillna(1) <= C.KERNEL_FIT_MAX_CP)]
    held = held["kernel_efficiency"].dropna()
    if len(held):
        words += f", its {len(held)} held-out runs fit {held.min():.3f} to {held.max():.3f}"
    if row.dtype != "bf16":
        own, theirs = best_gemm_share(row.gpus, "bf16"), best_gemm_share(ref.gpus, "bf16")
        if own is not None and theirs is not None:
            alt = median * own / theirs
            words += (f"; the bf16 GEMM ratio ({own:.3f} / {theirs:.3f}) would give {alt:.3f} "
                      f"({alt / (median * scale) - 1:+.0%})")
    return words


def mfu_csv() -> str:
    co, _ = C.fit_mfu_model()
    out = io.StringIO()
    co.round(4).to_csv(out, index=False, lineterminator="\n")
    return out.getvalue()


#: The group of ``data/intervals.csv`` that counts, per area, the runs priced on a stand-in in their fold (no
#: calibration run of their GPU generation and dtype among the other sources: llmsizing.intervals, step 5).
STAND_IN = "stand-in"
#: What every training area's method adds (llmsizing.intervals, step 5).
STAND_IN_WORDS = ("; a run whose GPU generation and dtype has no calibration run among the other sources (a "
                  "stand-in efficiency or intercept, decided per fold) sets no bound in any fold and is "
                  "counted in group stand-in only (its coverage by the calibrated range; no range of its own "
                  "below 9 sources; per generation and dtype in data/stand_in_runs.csv); the other groups "
                  "count the calibrated runs")
INTERVAL_COLUMNS = ["area", "group", "nominal_coverage", "measured_coverage", "median_width", "low", "high",
                    "n_rows", "n_sources", "as_of", "method"]
METHOD = {
    "training": "80% conformal bounds on log(implied / predicted MFU) of leave-one-source-out fits (the "
                "calibration runs of the other sources), each source weighing the same; steady states and "
                "whole-run totals apart where a kind has 9+ sources (else pooled); coverage measured nested: "
                "each source's runs against the interval computed without it; the dtype rows count those "
                "intervals' coverage of that dtype's runs (no range of their own); the baseline without the "
                "planner's inputs, which the library no longer states (it states training-inputs)"
                + STAND_IN_WORDS,
    "fine-tuning": ("80% conformal bounds on log(published / predicted step time) of leave-one-source-out "
                    "fits (every covered row of the other sources), rows weighing the same (weighing sources "
                    "alike needs 9 sources at 80%, and checking that by leaving one source out 10; n_sources "
                    "has the count); coverage measured nested: each "
                    "source against bounds from the other sources' residuals, each from a fit that saw "
                    "neither; the pooled range, still reported (the library states fine-tuning-base's)"),
    "fine-tuning-base": ("as fine-tuning, each base its own bounds (llmsizing.finetune_time.GROUPINGS 'base': "
                         "quantised, the QLoRA rows; bf16-base, the LoRA rows; a group takes its own ranks "
                         "where a nested fold holds 9 of its rows, else the fold's pooled ones), the grouping "
                         "registered by ft39 before its check and adopted by that rule in session 43 "
                         "(coverage at least the pooled range's, median width below it, every group 75%+); "
                         "the ranges the library states (data/finetune_model.csv range_*_quantised, "
                         "range_*_bf16_base, rounded outwards)"),
    "training-layout": (
        "80% conformal bounds on log(published / step_time MFU) of every run with a published layout, at the "
        "kernel efficiency fitted without the run's source (median per generation and dtype of the other "
        "sources' per-run efficiencies), each source weighing the same, pooled (of the dtypes only BF16 has "
        "the 10 sources a stratum of its own needs); coverage measured nested; the dtype rows count the pooled range's coverage of that "
        "dtype's runs" + STAND_IN_WORDS),
    "training-layout-stack": (
        "as training-layout, with a known stack family's location (llmsizing.frameworks.stack_family of the "
        "run's framework: megatron, deepspeed, pytorch) per GPU generation, falling back to the family's "
        "location where the fold has no calibration run of that family on that generation, fitted inside "
        "each fold on the other sources' calibration runs (median log residual at the fold's efficiency) and "
        "added to the prediction; bounds pooled over all sources' stack-centred residuals; a family's (or a "
        "family:generation cell's) stated range is its location fitted on every source times those bounds; "
        "an unknown stack takes the plain pooled range (and is checked against it), and so does a family or "
        "cell whose out-of-source coverage is below 75% (no stated bounds); coverage measured "
        "nested, each run against the interval computed without its source; the all row counts each run "
        "against the interval the library gives its framework (the plain one where its cell or family states "
        "no range)" + STAND_IN_WORDS),
    "moe-layout": (
        "80% conformal bounds of the absolute out-of-source residual (Lei et al. 2018; two-tailed bounds "
        "need 9 sources, these runs have 7) of log(implied / step_time MFU) = log(predicted / published "
        "GPU-hours) of the published MoE pre-training runs (data/moe_published_runs.csv) on their layouts' "
        "MoE step (llmsizing.moe_runs.predict_moe_run; nothing fitted on them: each fold's prediction is "
        "the same), one source a publication (the Llama 4 card's and the Granite 3.0 report's two runs one "
        "source each), each source weighing the same; residual on its own (not on top of the dense "
        "training-layout range) and no explanatory term, both fixed before the coverage was measured; with "
        "7 sources the stated bound is the largest residual and each nested fold's the largest of the other"
        " 6; coverage measured nested, each source against the interval computed without it; the dtype rows"
        " count that coverage of that dtype's runs (no range of their own); dense: the training-layout "
        "range's coverage of the same runs, whose bounds saw none of them (llmsizing.moe_runs.moe_loso_check;"
        " issue 35)"),
    "training-inputs": (
        "as training, with two inputs a planner knows added to the fit (registered before it was checked, "
        "llmsizing.range_candidates.REGISTERED): a stack family offset (megatron, deepspeed, pytorch; "
        "unknown "
        "the reference) and log tokens per GPU per optimizer step (with a flag where a source publishes no "
        "batch); 80% conformal bounds of the absolute out-of-source residual (Lei et al. 2018), each source "
        "weighing the same, per GPU generation with 9+ sources (else pooled); coverage measured nested; the "
        "family, dtype, kind and batch rows count the generation ranges' coverage of those runs (no range of "
        "their own; batch:unpublished, the runs whose source publishes no global batch or GPU count, are "
        "predicted as llmsizing.mfu.mfu_estimate predicts without tokens_per_step); the model and range the "
        "library states" + STAND_IN_WORDS)}


def _interval_rows(area, check, groups, sources, ranged=None):
    """One row per ``(group, mask)``: the measured (nested) coverage and median width of ``check`` over the
    runs of ``mask`` calibrated in their fold (``check.calibrated``), and the bounds ``check`` states for the
    group (its stratum's, else the pooled ones) if the group is in ``ranged`` (``None``: every group but "all"
    of a stratified check, which has no one range). A group left out of ``ranged`` (a dtype, a stack family)
    only counts how the ranges its runs got covered them. Then one row :data:`STAND_IN` for the runs priced on
    a stand-in in their fold, if any: their coverage by the calibrated ranges. ``sources``: each run's
    source."""
    import math

    import numpy as np

    from llmsizing.intervals import conformal_bounds, min_units

    sources = np.asarray(sources, dtype=object)

    def n_sources_of(mask):
        return len(set(sources[mask]))

    def sources_of(mask):
        return sources[mask]

    cal = check.calibrated_rows
    # (a group left with no calibrated run, e.g. a generation only stand-ins ran on, has no row)
    groups = [(g, m & cal) for g, m in groups if (m & cal).any()] + [(STAND_IN, ~cal)] * bool((~cal).any())
    rows = []
    for group, mask in groups:
        stated = ["", ""]
        if group == STAND_IN:
            # priced on an uncalibrated efficiency or intercept: checked against the calibrated range, and no
            # range of its own unless it has the sources a conformal range needs
            if n_sources_of(mask) >= min_units(check.coverage):
                stated = [f"{x:.4f}" for x in map(math.exp, conformal_bounds(
                    check.residuals[mask], check.coverage, sources_of(mask)))]
            ranged_here = False
        else:
            ranged_here = None
        if ranged_here is None and (group in ranged if ranged is not None
                                    else group != "all" or len(check.bounds) == 1):
            stated = [f"{x:.4f}" for x in check.stated(None if group == "all" else group)]
        width = float(np.exp(np.median(check.high_log[mask] - check.low_log[mask])))
        rows.append([area, group, f"{check.coverage:g}", f"{check.inside[mask].mean():.4f}", f"{width:.4f}",
                     *stated, int(mask.sum()), n_sources_of(mask), INTERVALS_AS_OF, METHOD[area]])
    return rows


def _dtype_groups(dtype):
    """The dtype rows of an area (``dtype`` per run, bf16 or fp8): how its ranges cover each dtype's runs."""
    return [(d, dtype == d) for d in ("bf16", "fp8")]


STAND_IN_COLUMNS = ["area", "generation", "dtype", "n_rows", "n_sources", "inside", "min_ratio", "max_ratio",
                    "as_of", "method"]
STAND_IN_METHOD = ("runs of a GPU generation and dtype with no calibration run among the other sources "
                   "(priced on a stand-in efficiency or intercept; llmsizing.intervals, step 5): published / "
                   "predicted of each, predicted by the area's fit without the run's source, and how many "
                   "the calibrated 80% range computed without their source holds; these runs set no bound")


def _stand_in_cells(area, check, generation, dtype, sources):
    """Rows of ``data/stand_in_runs.csv`` for ``area``: per (generation, dtype) of its runs priced on a
    stand-in in their fold, their count, sources, how many the calibrated range held, and the least and
    largest ratio published / predicted (what llmsizing.mfu_inputs.stand_in_note states)."""
    import numpy as np

    stand = ~check.calibrated_rows
    gen, dt, src = (np.asarray(a, dtype=object) for a in (generation, dtype, sources))
    ratio = np.exp(check.residuals)
    out = []
    for g, d in sorted(set(zip(gen[stand], dt[stand]))):
        m = stand & (gen == g) & (dt == d)
        out.append([area, g, d, int(m.sum()), len(set(src[m])), int(check.inside[m].sum()),
                    f"{ratio[m].min():.4f}", f"{ratio[m].max():.4f}", INTERVALS_AS_OF, STAND_IN_METHOD])
    return out


def _layout_interval_rows(cells):
    """The range of an MFU predicted from a layout (llmsizing.step_intervals): pooled, and its coverage per
    dtype."""
    from llmsizing.step_intervals import AREA, step_loso_check

    check, df = step_loso_check()
    src = df["source_key"].to_numpy(object)
    dtype = df["dtype"].to_numpy(object)
    groups = [("all", dtype == dtype)] + _dtype_groups(dtype)
    rows = _interval_rows(AREA, check, groups, src)
    cells += _stand_in_cells(AREA, check, df["generation"], dtype, src)
    from llmsizing.step_intervals import stack_ranges

    table, _ = stack_ranges()
    for r in table.itertuples():
        # a stack row whose location missed the 75% out of source states no range: the library then
        # gives that stack the unknown stack's range (llmsizing.mfu.layout_range_group); the "all" row states
        # none and counts each run against the range the library gives it (stack_ranges)
        stated = [f"{r.low:.4f}", f"{r.high:.4f}"] if r.stated else ["", ""]
        rows.append([AREA, f"stack:{r.group}", "0.8", f"{r.measured_coverage:.4f}", f"{r.median_width:.4f}",
                     *stated, r.n_rows, r.n_sources, INTERVALS_AS_OF, METHOD["training-layout-stack"]])
    return rows


def _moe_interval_rows():
    """The range of a mixture of experts' step from its layout (llmsizing.moe_runs.moe_loso_check): pooled,
    its coverage per dtype, and (group dense, no range) how the dense training-layout range covers the same
    runs, as the library stated it before issue 35's MoE range."""
    import numpy as np

    from llmsizing.mfu import MOE_RANGE_AREA
    from llmsizing.moe_runs import moe_loso_check, moe_published_runs
    from llmsizing.precision import compute_dtype
    from llmsizing.step_intervals import step_loso_check

    check, df = moe_loso_check()
    runs = moe_published_runs()
    src = df["source_key"].to_numpy(object)
    dtype = np.array([compute_dtype(p) for p in runs["precision"]], dtype=object)
    rows = _interval_rows(MOE_RANGE_AREA, check, [("all", dtype == dtype)] + _dtype_groups(dtype), src,
                          ranged=("all",))
    # the dense range the MoE runs were stated before (its pooled bounds, as this run writes them: no
    # stratum of its own; its bounds saw none of these runs)
    lo, hi = step_loso_check()[0].bounds[None]
    inside = (check.residuals >= lo - 1e-12) & (check.residuals <= hi + 1e-12)
    rows.append([MOE_RANGE_AREA, "dense", f"{check.coverage:g}", f"{inside.mean():.4f}",
                 f"{float(np.exp(hi - lo)):.4f}", "", "", len(df), len(set(src)), INTERVALS_AS_OF,
                 METHOD[MOE_RANGE_AREA]])
    return rows


def _inputs_interval_rows(cells):
    """The range of the end-to-end model with the stack and tokens per GPU (llmsizing.mfu_inputs): per GPU
    generation (its stated bounds), and its coverage of every run, per stack family, dtype and kind."""
    from llmsizing.mfu_inputs import AREA
    from llmsizing.range_candidates import REPORT_BY, registered_check

    check, per_run = registered_check()
    groups = [("all", per_run.index == per_run.index)]
    for by in REPORT_BY + ("batch",):
        prefix = {"stack_family": "stack:", "batch": "batch:"}.get(by, "")
        groups += [(f"{prefix}{g}", (per_run[by] == g).to_numpy()) for g in sorted(set(per_run[by]))]
    cells += _stand_in_cells(AREA, check, per_run["generation"], per_run["dtype"], per_run["source_key"])
    return _interval_rows(AREA, check, groups, per_run["source_key"], check.bounds)


def inputs_csv() -> str:
    from llmsizing.range_candidates import inputs_model_table

    out = io.StringIO()
    inputs_model_table().to_csv(out, index=False, lineterminator="\n")
    return out.getvalue()


def intervals_csv() -> str:
    return _interval_files()[0]


def stand_in_csv() -> str:
    return _interval_files()[1]


@cache
def _interval_files() -> tuple[str, str]:
    """The text of ``data/intervals.csv`` and of ``data/stand_in_runs.csv`` (the runs each area prices on a
    stand-in, per generation and dtype)."""
    from llmsizing.finetune_time import FINETUNE_GROUPING, RANGE_GROUPS, finetune_loso_check

    cells = []
    check, df = C.mfu_loso_check()
    src = df["source_key"].to_numpy(object)
    total = (df["kind"] == "pretraining-total").to_numpy()
    groups = [("all", total | ~total), ("steady-state", ~total), ("pretraining-total", total)]
    # the dtype rows: how the kinds' ranges cover each dtype's runs, the coverage an FP8 estimate states
    # (llmsizing.mfu.mfu_estimate's range_note)
    kinds = [g for g, _ in groups if g != "all" or len(check.bounds) == 1]
    groups += _dtype_groups(df["dtype"].to_numpy(object))
    rows = _interval_rows("training", check, groups, src, kinds)
    cells += _stand_in_cells("training", check, df["generation"], df["dtype"], src)
    rows += _inputs_interval_rows(cells)
    rows += _layout_interval_rows(cells)
    rows += _moe_interval_rows()
    ft, ft_rows = finetune_loso_check()
    fsrc = ft_rows["source_key"].to_numpy(object)
    method = ft_rows["method"].to_numpy(object)
    rows += _interval_rows("fine-tuning", ft, [("all", method == method)], fsrc)
    ftg, ftg_rows = finetune_loso_check(grouping=FINETUNE_GROUPING)
    base = ftg_rows["group"].to_numpy(object)
    rows += _interval_rows("fine-tuning-base", ftg, [("all", base == base)]
                           + [(g, base == g) for g in RANGE_GROUPS], fsrc)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(INTERVAL_COLUMNS)
    w.writerows(rows)
    cells_out = io.StringIO()
    w = csv.writer(cells_out, lineterminator="\n")
    w.writerow(STAND_IN_COLUMNS)
    w.writerows(cells)
    return out.getvalue(), cells_out.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args(argv)
    kernel_path, kernel = ROOT / "data" / "kernel_efficiency.csv", kernel_csv()
    if not args.check and (not kernel_path.exists() or kernel_path.read_text() != kernel):
        # the other fits (the layout and fine-tuning intervals) price runs at the kernel efficiencies this
        # process has already read from the old file: write the new one, then fit the rest in a fresh process
        kernel_path.write_text(kernel)
        print(f"wrote {kernel_path.relative_to(ROOT)}")
        return subprocess.call([sys.executable, __file__, *(argv if argv is not None else sys.argv[1:])])
    files = {kernel_path: kernel, ROOT / "data" / "mfu_model.csv": mfu_csv(),
             ROOT / "data" / "mfu_inputs_model.csv": inputs_csv(),
             ROOT / "data" / "intervals.csv": intervals_csv(),
             ROOT / "data" / "stand_in_runs.csv": stand_in_csv()}
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for p in stale:
            print(f"{p.relative_to(ROOT)} is out of date: run tools/calibrate.py")
        return 1 if stale else 0
    for p, text in files.items():
        p.write_text(text)
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
