"""Chapter 12's GPU types in words: how far the cheapest GPU type of a plan leads, and how firm the lead is.

The chapter's cell used to build these sentences inline (issue 38: notebooks stay short).
:func:`gpu_types_prose` takes the chapter's :func:`~llmsizing.planner.plan` table and returns a
:class:`~llmsizing.prose.ChapterText`: per GPU type its cheapest and fastest plan (a printable table), the
winner's lead and the price and kernel efficiency at which the runner-up ties
(:func:`~llmsizing.cost.gpu_lead`, :func:`~llmsizing.cost.plan_at_kernel_efficiency`), why the H200 beats the
H100 (recomputation, HBM bandwidth), and the published B200 runs against the stand-in kernel efficiency.
:func:`pick_prose` reads ``data/planned_picks.csv`` (:mod:`llmsizing.planned_picks`): how far the planner's
own pick lands from the layouts teams ran. No new arithmetic.
"""

from __future__ import annotations

import csv
from functools import partial
import pandas as pd

from .catalog import DATA_DIR, get_gpu, get_model
from .cost import gpu_lead, plan_at_kernel_efficiency
from .hardware import kernel_efficiency, kernel_efficiency_row
from .job import Job
from .kernels import layer_gemm_efficiency
from .layouts import USABLE_FRACTION, step_time
from .plan_space import recompute_kwargs
from .planned_picks import layout_parts, planned_summary
from .prose import ChapterText, prose_check, usd
from .range_candidates import MAX_WIDTH, MIN_COVERAGE

__all__ = ["gpu_types_prose", "pick_prose"]

#: Raises :class:`~llmsizing.prose.ProseOutOfDate` when the numbers no longer bear out what the prose says
_says = partial(prose_check, chapter="chapter 12's prose")


def _lo_hi(r, col: str, fmt, sep: str = " to ") -> str:
    return f"{fmt(r[col + '_low'])}{sep}{fmt(r[col + '_high'])}"


def gpu_types_prose(df, run: dict, loso_runs, model: str = "llama-3-70b") -> ChapterText:
    """Chapter 12's GPU types section, on ``df = plan(model, **run)``.

    ``loso_runs`` is the published runs' table of :func:`~llmsizing.step_intervals.step_loso_check` (each
    run's implied and predicted MFU and the kernel efficiency that reproduces it), for the published B200
    runs.
    ``data["table"]`` is the per-GPU table the cell prints and ``data["lines"]`` the lines after it.
    Raises ``TypeError`` if ``df`` is not a plan table.
    """
    if not isinstance(df, pd.DataFrame) or "pareto" not in df or "range_notes" not in df.attrs:
        raise TypeError(f"df must be a plan() table, got {type(df).__name__}")
    facts = ChapterText()
    text = facts.values
    rows = []
    for gpu, sub in df.groupby("gpu", sort=False):
        c, f = sub.loc[sub["cost_usd"].idxmin()], sub.loc[sub["days"].idxmin()]
        rows.append({"GPU": gpu, "plans that fit": f"{len(sub):,}", "fewest GPUs": f"{sub['n_gpus'].min():,}",
                     "cheapest": f"{c['n_gpus']:,} GPUs, {c['days']:,.1f} days, {usd(c['cost_usd'])} "
                                 f"({_lo_hi(c, 'cost_usd', usd, '-')})",
                     "fastest": f"{f['n_gpus']:,} GPUs, {f['days']:,.1f} days "
                                f"({_lo_hi(f, 'days', '{:,.1f}'.format, '-')}), "
                                f"{usd(f['cost_usd'])} (MFU {f['mfu']:.0%})"})
        key = gpu.split()[0]
        text[f"best_{key}_cost"] = f"{usd(c['cost_usd'])} ({_lo_hi(c, 'cost_usd', usd)})"
        text[f"fast_{key}_days"] = f"{f['days']:,.1f} ({_lo_hi(f, 'days', '{:,.1f}'.format)})"
        text[f"fewest_{key}"] = f"{sub['n_gpus'].min():,}"
    facts.data["table"] = pd.DataFrame(rows)
    # the ranges of the table that are borrowed (a stand-in efficiency)
    lines = facts.data["lines"] = [f"{gpu}: {note}" for gpu, note in df.attrs["range_notes"].items()]
    # How firm is the winner's lead? A run's cost is proportional to the price, so the lead is also the price
    # at which the two would tie; the cheapest plan's step is all compute (no exposed communication), so its
    # cost goes as one over the kernel efficiency as well
    front = df[df["pareto"]]
    cheap = front.iloc[0]
    best = df.loc[df.groupby("gpu")["cost_usd"].idxmin()].set_index("gpu")["cost_usd"]
    lead = gpu_lead(df)                         # the runner-up, the lead, the break-even price and efficiency
    win, runner = lead.gpu, lead.runner_up
    _says(win == cheap["gpu"], "the winner is the front's cheapest plan's GPU")
    wg = get_gpu(win)
    _says(
        abs(
        lead.price_usd_per_gpu_hour / wg.price_usd_per_gpu_hour - 1) < 1e-9,
        "the lead is priced at the catalogue's price")
    text["win_price"] = f"${wg.price_usd_per_gpu_hour:.2f}"
    text["win_price_as_of"] = wg.price_as_of
    text["win_price_kind"] = "list price" if wg.price_kind == "list" else "estimate"
    text["runner"] = runner
    text["lead"] = f"{lead.lead:.2f}"
    text["breakeven_price"] = f"${lead.breakeven_price_usd_per_gpu_hour:.2f}"
    text["breakeven_eff"] = f"{lead.breakeven_kernel_efficiency:.0%}"
    # at that kernel efficiency the cheapest plan still beats the runner-up (its memory-bound kernels do not
    # slow down with the efficiency, so the cost grows less than 1/efficiency): "at least down to"; its MFU
    be = plan_at_kernel_efficiency(df, model, seq=run["seq"],
                                   kernel_efficiency=lead.breakeven_kernel_efficiency)
    _says(be.cheaper_gpus == (), "at the break-even efficiency it is still the cheapest")
    text["breakeven_mfu"] = f"{be.mfu:.0%}"
    _says(win == "B200" and kernel_efficiency_row(
        win).runs == "", "the winner is the B200, on a stand-in efficiency")
    _says(wg.price_as_of in wg.price_source, "the price's date is its source's")
    _h200_vs_h100(facts, df, run, model, best)
    _says(
        best["H200"] > best[win]
        and df.loc[df["gpu"] == "H200", "days"].min() > df.loc[df["gpu"] == win, "days"].min(),
        "the winner is both cheaper and faster than the H200")
    lines.append(
        f"{win}: {usd(best[win])}; next cheapest {runner}: {usd(best[runner])} (x{lead.lead:.2f}); "
        f"the same cost at ${lead.breakeven_price_usd_per_gpu_hour:.2f}/h ({wg.price_kind}, "
        f"${wg.price_usd_per_gpu_hour:.2f} as of {wg.price_as_of})"
        f" or at a kernel efficiency of {lead.breakeven_kernel_efficiency:.1%} on its "
        "cheapest plan")
    _published_b200(facts, df, run, model, loso_runs, win, lead, cheap, best)
    return facts


def _h200_vs_h100(facts: ChapterText, df, run: dict, model: str, best) -> None:
    """The H200 against the H100: dearer by the hour, yet its cheapest run costs less, on the same layout with
    less recomputation; what the H100's longer step is made of: its recomputation, and (without it) the
    H200's faster HBM, which lowers its ridge point and so lifts its GEMM curve."""
    text = facts.values
    m = get_model(model)
    c200 = df[df["gpu"] == "H200"].loc[lambda d: d["cost_usd"].idxmin()]
    c100 = df[df["gpu"] == "H100 SXM"].loc[lambda d: d["cost_usd"].idxmin()]
    lay = ["n_gpus", "tp", "pp", "dp", "zero"]
    h200, h100 = get_gpu("H200"), get_gpu("H100 SXM")
    _says(
        h200.bf16_dense_tflops == h100.bf16_dense_tflops
        and h200.price_usd_per_gpu_hour > h100.price_usd_per_gpu_hour,
        "the H200 has the H100's compute at a higher price")
    _says(
        best["H200"] < best["H100 SXM"] and list(c200[lay]) == list(c100[lay]),
        "the H200's cheapest run costs less than the H100's, on the same layout")
    _says(c200["recompute"] == "none" != c100["recompute"], "with less recomputation")
    text["h200_vs_h100_days"] = f"{c200['days']:.1f} days against {c100['days']:.1f}"
    text["h100_recompute"] = f"{recompute_kwargs(c100)['recompute_layers']} of {m.layers}"
    # no H200 row in data/gemm_efficiency.csv: the prose says so
    measured = pd.read_csv(DATA_DIR / "gemm_efficiency.csv")["gpu"].values
    _says("H200" not in measured, "no H200 GEMM measurements")
    tp = int(c100["tp"])
    gemm = {g.name: layer_gemm_efficiency(m, g, tp=tp, tokens=run["seq"]) for g in (h200, h100)}
    _says(gemm["H200"] > gemm["H100 SXM"], "the H200's GEMM curve is higher")
    job = Job.from_plan_row(c100, model, seq=run["seq"])
    h100_rc = step_time(job)
    h100_no = step_time(job, recompute="none", recompute_layers=None)
    h200_no = step_time(job, gpu=h200, recompute="none", recompute_layers=None)
    _says(
        abs(h100_rc.step_s / c100["step_time_s"] - 1) < 1e-6
        and abs(h200_no.step_s / c200["step_time_s"] - 1) < 1e-6,
        "the steps are the plans' own")
    text["h100_rc_cost"] = f"{h100_rc.step_s / h100_no.step_s - 1:.0%}"
    text["h200_bw_gain"] = f"{h100_no.step_s / h200_no.step_s - 1:.0%}"


def _published_b200(facts: ChapterText, df, run, model, loso_runs, win, lead, cheap, best) -> None:
    """The only published B200 runs in the data (torchao's benchmarks, held out of every fit): what they ran
    at against the step model's prediction, and the kernel efficiency that reproduces each; FP8 first, then
    the one BF16 run (the same table's baseline), and its like-for-like on eight H100s."""
    text = facts.values
    b2_all = loso_runs[loso_runs["gpu"] == win]
    _says(
        not b2_all["calibration"].any() and set(b2_all["n_gpus"]) == {8}
        and set(b2_all["source_key"]) == {"pytorch/ao training benchmarks"},
        "the B200 runs: none calibrates, all on 8 GPUs, one source")
    b2, b2_bf16 = b2_all[b2_all["dtype"] == "fp8"], b2_all[b2_all["dtype"] != "fp8"]
    _says(len(b2) > 0 and len(b2_bf16) == 1, "FP8 runs and one BF16 run")
    if not (len(b2) and len(b2_bf16)):
        return
    ratio = b2["implied_mfu"] / b2["predicted_mfu"]
    text["b200_pub_n"] = f"{len(b2)}"
    text["b200_pub_ratio"] = f"{ratio.min():.2f} to {ratio.max():.2f}"
    text["b200_pub_eff"] = f"{b2['kernel_efficiency'].min():.0%} to {b2['kernel_efficiency'].max():.0%}"
    text["b200_fp8_standin"] = f"{kernel_efficiency(win, 'fp8'):.0%}"
    _says(
        b2["kernel_efficiency"].max()
        < kernel_efficiency(win, "fp8"),
        "the FP8 runs point below the stand-in")
    bf = b2_bf16.iloc[0]
    text["b200_bf16_tps"] = f"{bf['tokens_per_s_per_gpu']:,.1f}"
    text["b200_bf16_ratio"] = f"{bf['implied_mfu'] / bf['predicted_mfu']:.2f}"
    text["b200_bf16_eff"] = f"{bf['kernel_efficiency']:.0%}"
    _says(
        bf["kernel_efficiency"] < lead.breakeven_kernel_efficiency < kernel_efficiency(win),
        "the BF16 run points below the stand-in and the break-even")
    # the cheapest plan's own step at the BF16 run's kernel efficiency; days and cost scale with the step, and
    # the stated range, which sits around the step model's prediction, with them
    w = plan_at_kernel_efficiency(df, model, seq=run["seq"], kernel_efficiency=float(bf["kernel_efficiency"]))
    cheaper, slow = list(w.cheaper_gpus), w.days_high
    _says(bool(cheaper) and w.days <= 30, "there no longer the cheapest, still within a month")
    text["b200_at_bf16"] = (f"{w.days:,.1f} days ({w.days_low:,.1f} to {slow:,.1f}) for {usd(w.cost_usd)} "
                            f"({usd(w.cost_usd_low)} to {usd(w.cost_usd_high)})")
    text["b200_at_bf16_rank"] = ("more than the cheapest run on every other GPU searched"
                                 if len(cheaper) == len(best) - 1 else
                                 f"more than the cheapest run on the {' and the '.join(cheaper)}")
    _says(abs(
        slow / (cheap["days_high"] * w.step_scale) - 1) < 1e-12, "its slow end is the plan's own, rescaled")
    text["b200_at_bf16_month"] = (
        f"even the slow end of its range ({slow:,.1f} days) makes the month" if slow <= 30 else
        f"its point estimate still makes the month, the slow end of its range ({slow:,.1f} days) does not")
    # the like-for-like the same source allows: its BF16 baseline on eight H100s (same torchtitan recipe)
    ao = loso_runs[(loso_runs["source_key"] == bf["source_key"]) & (loso_runs["dtype"] == "bf16")]
    ao_h = ao[ao["gpu"] == "H100 SXM"]
    _says(
        len(ao_h) == 1 and (ao_h["n_gpus"] == bf["n_gpus"]).all() and (ao_h["model"] == bf["model"]).all(),
        "one H100 baseline, same GPUs and model")
    if len(ao_h) != 1:
        return
    tps_ratio = bf["tokens_per_s_per_gpu"] / ao_h["tokens_per_s_per_gpu"].iloc[0]
    price_ratio = get_gpu(win).price_usd_per_gpu_hour / get_gpu("H100 SXM").price_usd_per_gpu_hour
    _says(tps_ratio < price_ratio, "per dollar the H100 ahead there")
    text["ao_h100_tps"] = f"{ao_h['tokens_per_s_per_gpu'].iloc[0]:,.0f}"
    text["ao_tps_ratio"] = f"{tps_ratio:.2f}"
    text["ao_price_ratio"] = f"{price_ratio:.2f}"


def _layout_fit(run: str) -> dict:
    """``run``'s row of ``data/published_layout_fits.csv`` (tools/layout_fits.py): its layout's peak by the
    memory model against its GPU's memory."""
    with open(DATA_DIR / "published_layout_fits.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["run"] == run]
    if len(rows) != 1:
        raise ValueError(f"run {run!r} must have one row in data/published_layout_fits.csv, has {len(rows)}")
    return rows[0]


def pick_prose(table=None) -> ChapterText:
    """Chapter 12's paragraph on the planner's own pick, from ``data/planned_picks.csv`` (or ``table``, a
    :func:`~llmsizing.planned_picks.planned_picks` table; :func:`~llmsizing.planned_picks.planned_summary`):
    the coverage and width of its range, the pick's median gain over the teams' layouts and its spread, the
    largest gains (one per source) and the smallest (Meta's ZeRO-2 under a pipeline, whose layout fits its
    GPU only above the planner's usable share, ``data/published_layout_fits.csv``), each checked against what
    the prose says of them. ``data["summary"]`` is the summary; ``report`` what the cell prints."""
    s = planned_summary(table)
    text = {"pick_in": f"{s.inside}", "pick_n": f"{s.n}", "pick_cov": f"{s.coverage:.0%}",
            "pick_width": f"{s.median_width:.2f}x", "pick_low": f"{s.median_low:.2f}",
            "pick_high": f"{s.median_high:.2f}", "pick_no_plan": f"{len(s.no_plan)}",
            "pick_max_width": f"{MAX_WIDTH:g}x", "pick_gain": f"x{s.gain_median:.2f}",
            "pick_gain_p10": f"x{s.gain_p10:.2f}", "pick_gain_p90": f"x{s.gain_p90:.2f}"}
    _says(s.coverage >= MIN_COVERAGE and s.median_width > MAX_WIDTH,
          "the pick's range holds its coverage but is too wide to state")
    _says(s.gain_median > 1, "the pick is, at the median, faster than the layout the team ran")
    _says(s.gain_p10 < 1 < s.gain_p90, "the spread of the pick's gain straddles 1")
    # the largest gains: less tensor parallelism than the team ran (TP4 or TP8)
    top = [(layout_parts(r["published"]), layout_parts(r["pick"]), r) for r in s.largest]
    _says(all(p["tp"] < t["tp"] and t["tp"] in (4, 8) for t, p, _ in top),
          "the largest gains come with less tensor parallelism where teams ran TP4 or TP8")
    text["pick_largest"] = "; ".join(f"{r['model']} on {r['n_gpus']:,} GPUs, TP{t['tp']} against the pick's "
                                     f"TP{p['tp']} ZeRO-{p['zero']}: x{r['gain']:.2f}" for t, p, r in top)
    # the smallest: a team that ran ZeRO-2 under a pipeline (not in the default search) and closer to the
    # memory limit than the planner's margin allows, so the pick recomputes where the team did not
    # (data/published_layout_fits.csv: the published layout's peak by the memory model, against the GPU's
    # memory and the usable share the planner keeps to)
    lo = s.smallest
    team, pick = layout_parts(lo["published"]), layout_parts(lo["pick"])
    fit = _layout_fit(lo["run"])
    gib, gpu_gib = float(fit["gib_today"]), float(fit["gpu_gib"])
    _says(lo["gain"] < 1 and lo["model"] == "llama-3.1-405b",
          "the pick falls furthest behind on Meta's Llama 3.1 405B")
    _says(team["recompute"] == "none" != pick["recompute"],
          "the team recomputed nothing and the pick recomputes")
    _says(team["zero"] == 2 and team["pp"] > 1,
          "the team ran ZeRO-2 under a pipeline, which the default search leaves out")
    _says(USABLE_FRACTION * gpu_gib < gib <= gpu_gib,
          "the team's layout fits the GPU but not the planner's usable share of it")
    text.update(pick_slowest=f"x{lo['gain']:.2f}", pick_slowest_gpus=f"{lo['n_gpus']:,}",
                pick_slowest_share=f"{gib / gpu_gib:.0%}", pick_usable=f"{USABLE_FRACTION:.0%}")
    report = "\n".join(
        [f"the planner's pick against {s.n} published runs (measured {s.as_of}): {s.inside} inside "
         f"({s.coverage:.1%}), median width {s.median_width:.2f}x; pick / published layout at the same "
         f"efficiency: median x{s.gain_median:.2f}, 10-90% x{s.gain_p10:.2f} to x{s.gain_p90:.2f}"]
        + [f"  x{r['gain']:.2f}  {r['run']}: {r['published']} -> {r['pick']}" for r in s.largest + (lo,)])
    return ChapterText(values=text, report=report, data={"summary": s})
