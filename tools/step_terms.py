#!/usr/bin/env python3
"""Print the step model's terms for published runs with a layout (issue 34, Llama 3 405B term by term):

    .venv/bin/python tools/step_terms.py "405B, "          # rows of data/published_runs.csv whose run matches
    .venv/bin/python tools/step_terms.py --all             # every row with a layout: published / predicted
    .venv/bin/python tools/step_terms.py --moe Granite     # rows of data/moe_published_runs.csv, term by term

For each run it prices the published layout as tools/calibrate.py does (llmsizing.calibration.run_mfu_at: the
same Parallel, micro-batches, recomputation, TP overlap, attention kernel and node), at the calibrated kernel
efficiency of the run's GPU generation and dtype (data/kernel_efficiency.csv), and prints the compute, the
bubble, every collective in full and what the step waits for of each group. ``--meta`` adds the layout Meta
describes for Llama 3 405B (llmsizing.parallel.llama3_405b_layout: FSDP without resharding after the forward,
eight one-layer chunks per stage, fp32 gradients), at the micro-batches of the matching rows. ``--moe`` prices
the matching published MoE runs as llmsizing.moe_runs.run_step does and prints each one's compute split into
the step's terms (llmsizing.moe_evidence.compute_terms_s: Linear GEMMs and their routed experts, attention,
memory-bound kernels, routing, load skew), the rest of the step, published / predicted GPU-hours and how much
slower than priced its MoE layers would have to run to give the published hours (moe_part_factor_needed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from llmsizing.calibration import _layout_of, attention_kernel_of, tp_backward_overlap_of  # noqa: E402
from llmsizing.calibration import tp_overlap_of  # noqa: E402
from llmsizing.hardware import kernel_efficiency  # noqa: E402
from llmsizing.layouts import step_time  # noqa: E402
from llmsizing.run_nodes import run_node  # noqa: E402
from llmsizing.time_cost import published_runs  # noqa: E402


def _dtype(row) -> str:
    return "fp8" if row.dtype == "fp8" else "bf16"


def row_step(row, **over):
    """The :class:`~llmsizing.layouts.StepTime` of ``row``'s published layout (``over`` replaces
    arguments)."""
    par, micro, accum, recompute = _layout_of(row)
    par = over.pop("parallel", par)
    kw = dict(batch=micro, seq=int(row.seq), grad_accum=accum, recompute=recompute, dtype=_dtype(row),
              kernel_efficiency=kernel_efficiency(row.gpu, _dtype(row)), async_tp=tp_overlap_of(row),
              tp_backward_overlap=tp_backward_overlap_of(row),
              attention_kernel=attention_kernel_of(getattr(row, "framework", None), row.gpu),
              node=run_node(row))
    kw.update(over)
    return step_time(row.model, row.gpu, par, **kw)


def describe(name: str, st, published: float | None) -> str:
    par = st.communication.parallel
    lines = [f"== {name}",
             f"   tp={par.tp} cp={par.cp} pp={par.pp} dp={par.dp} v={par.virtual_stages} zero={par.zero} "
             f"reshard_after_forward={par.reshard_after_forward} stages={par.stage_layers}",
             f"   MFU {st.mfu:.3f}" + (f"  published {published:.3f}  published/predicted "
                                      f"{published / st.mfu:.3f}" if published else ""),
             f"   kernel efficiency {st.kernel_efficiency:.3f}; step {st.step_s:.3f} s = compute "
             f"{st.compute_s:.3f} + bubble {st.bubble_s:.3f} ({st.bubble:.2%}) + exposed "
             + ", ".join(f"{k} {v:.3f}" for k, v in st.exposed_by_group_s.items())]
    for c in st.communication.collectives:
        lines.append(f"     {c.group:3s} {c.collective:55s} {c.time_s:8.4f} s  "
                     f"one call {c.one_call_s * 1e3:.3f} ms")
    return "\n".join(lines)


def moe_terms(pattern: str) -> int:
    """Print the published MoE runs whose name contains ``pattern``, term by term (``--moe``)."""
    from llmsizing.moe_evidence import compute_terms_s, moe_part_factor_needed
    from llmsizing.moe_runs import moe_published_runs, predict_moe_run, run_step

    runs = moe_published_runs()
    for _, row in runs[runs["run"].str.contains(pattern, regex=False)].iterrows():
        st, p, t = run_step(row), predict_moe_run(row), compute_terms_s(row)
        ratio = float(row["gpu_hours"]) / p["gpu_hours"]
        print(f"== {row['run']}: published / predicted GPU-hours {ratio:.3f}; MFU {st.mfu:.3f}; "
              f"{t['micro_batches']} micro-batches a step")
        print(f"   step {st.step_s:.3f} s = compute {st.compute_s:.3f} + bubble {st.bubble_s:.3f} + exposed "
              + ", ".join(f"{k} {v:.3f}" for k, v in st.exposed_by_group_s.items()))
        for k in ("linear", "routed_experts", "attention", "pointwise", "routing", "skew"):
            part = "  (of linear)" if k == "routed_experts" else ""
            print(f"     {k:15s} {t[k]:8.4f} s  {t[k] / st.step_s:6.1%} of the step{part}")
        print(f"   the published hours need the MoE layers (routed experts, routing, skew) at "
              f"x{moe_part_factor_needed(row):.2f} their priced seconds, the rest as priced")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pattern", nargs="?", default="405B, ", help="a substring of the run names")
    ap.add_argument("--all", action="store_true", help="one line per run with a layout")
    ap.add_argument("--meta", action="store_true", help="also price llama3_405b_layout at the rows' batch")
    ap.add_argument("--moe", action="store_true",
                    help="the published MoE runs matching the pattern (all: '')")
    args = ap.parse_args(argv)
    if args.moe:
        return moe_terms(args.pattern if args.pattern != "405B, " else "")
    runs = published_runs()
    if args.all:
        for row in runs.itertuples():
            if _layout_of(row) is None:
                continue
            st = row_step(row)
            print(f"{row.implied_mfu / st.mfu:6.3f}  {st.mfu:.3f}  {row.implied_mfu:.3f}  {row.run}")
        return 0
    for row in runs[runs["run"].str.contains(args.pattern, regex=False)].itertuples():
        if _layout_of(row) is None:
            continue
        print(describe(row.run, row_step(row), row.implied_mfu))
        if args.meta and row.model == "llama-3.1-405b" and _dtype(row) == "bf16":
            from llmsizing.parallel import LLAMA3_RECIPE, llama3_405b_layout

            par = llama3_405b_layout(int(row.dp), cp=int(1 if row.cp != row.cp else row.cp))
            st = row_step(row, parallel=par, precision=LLAMA3_RECIPE, dtype=None, async_tp=False)
            print(describe(f"{row.run}: llama3_405b_layout", st, row.implied_mfu))
    return 0


if __name__ == "__main__":
    sys.exit(main())
