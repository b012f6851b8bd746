"""Chapter 12's worked example in words: what the prose says about a :func:`~llmsizing.planner.plan` table.

The chapter's cells used to build these sentences inline (issue 38: notebooks stay short). Each function here
takes the plan the chapter made, works out the figures its prose quotes, checks what its prose says about them
(:func:`~llmsizing.prose.prose_check`) and returns a :class:`~llmsizing.prose.ChapterText`, the texts
(``values``) the notebook glues (``{eval}`ch12_<name>```). Nothing here is new arithmetic: every figure is the
planner's own row, or :func:`~llmsizing.layouts.step_time` and :func:`~llmsizing.memory.training_memory` on
that row's layout (``Job.from_plan_row``).

* :func:`layout` and :func:`front_table`: a plan row's layout, and the time-vs-cost front as a table.
* :func:`plan_row_step`: a row's step as the planner priced it, or with an option changed.
* :func:`worked_example`: the front's two ends, where their steps go, what one doubling buys, and what a
  persistent gradient buffer (Megatron-LM's, PyTorch DDP's, DeepSpeed's bucket) does to the second plan.
* :func:`limits_prose`: the cheapest plan within a deadline, the fastest within a budget, by both rules.

The GPU types' section is in :mod:`llmsizing.plan_prose_lead`, the search's in
:mod:`llmsizing.plan_prose_search`.
"""

from __future__ import annotations

from functools import partial
from dataclasses import replace

import pandas as pd

from ._validate import check_int
from .catalog import get_gpu, get_model
from .cost import front_steps
from .footprint import deepspeed_bucket_bytes
from .job import Job
from .layouts import USABLE_FRACTION, step_time
from .memory import training_memory
from .mfu_inputs import layout_range_note
from .pipeline_schedule import pipeline_bubble
from .plan_space import recompute_kwargs, recompute_label
from .planner import plan
from .prose import ChapterText, prose_check, usd
from .units import GiB

__all__ = ["layout", "front_table", "plan_row_step", "grad_sent_bytes", "worked_example", "limits_prose"]

#: Days in a month, for the prose's months (a Gregorian year over twelve).
MONTH_DAYS = 365.2425 / 12

#: Raises :class:`~llmsizing.prose.ProseOutOfDate` when the numbers no longer bear out what the prose says
_says = partial(prose_check, chapter="chapter 12's prose")


def layout(r) -> str:
    """A plan row's layout for the prose: tp, pp (and its interleaved chunks per stage, vp, above 1), dp."""
    vp = int(r["virtual_stages"])
    return f"tp={r['tp']}, pp={r['pp']}{f', vp={vp}' if vp > 1 else ''}, dp={r['dp']}"


def front_table(df) -> pd.DataFrame:
    """The time-vs-cost front of a plan() result as a printable table, cheapest first (formatting only)."""
    f = df[df["pareto"]].reset_index(drop=True)
    out = pd.DataFrame({
        "GPUs": [f"{n:,} x {g}" for n, g in zip(f["n_gpus"], f["gpu"])],
        "tp": f["tp"], "pp": f["pp"], "vp": f["virtual_stages"], "dp": f["dp"], "ZeRO": f["zero"],
        "micro x accum": [f"{b} x {m}" for b, m in zip(f["micro_batch"], f["grad_accum"])],
        "recompute": [recompute_label(r) for _, r in f.iterrows()],
        "GiB/GPU": (f["memory_per_gpu_bytes"] / GiB).map("{:.1f}".format),
        "step (s)": f["step_time_s"].map("{:.2f}".format),
        "MFU": f["mfu"].map("{:.0%}".format),
        "days": [f"{d:,.1f} ({lo:,.1f}-{hi:,.1f})"
                 for d, lo, hi in zip(f["days"], f["days_low"], f["days_high"])],
        "cost": [f"{usd(c)} ({usd(lo)}-{usd(hi)})"
                 for c, lo, hi in zip(f["cost_usd"], f["cost_usd_low"], f["cost_usd_high"])],
    })
    out.index = pd.RangeIndex(1, len(f) + 1, name="#")
    return out


def plan_row_step(row, model, *, seq: int, **kw):
    """A plan row's step as :func:`~llmsizing.planner.plan` priced it (its ``Job.from_plan_row``), or with the
    :func:`~llmsizing.layouts.step_time` options ``kw`` overridden."""
    return step_time(Job.from_plan_row(row, model, seq=seq), **kw)


def grad_sent_bytes(step) -> float:
    """Bytes one GPU sends in a step's data-parallel gradient collectives (the sum of its ``gradients`` rows).
    """
    return sum(c.bytes_per_gpu for c in step.communication.collectives if c.slot == "gradients")


def _range(r, col: str, fmt) -> str:
    return f"{fmt(r[col])} ({fmt(r[col + '_low'])} to {fmt(r[col + '_high'])})"


def _days(x) -> str:
    return f"{x:,.1f}"


def worked_example(df, run: dict, model: str = "llama-3-70b") -> ChapterText:
    """Chapter 12's worked example: the prose's figures and claims about ``df = plan(model, **run)``.

    ``run`` holds the plan's options (``tokens, gpus, seq, global_batch, max_gpus``: the persistent-buffer
    answers plan again with it). ``data`` keeps what later cells read: ``front``, ``cheap``, ``fast``,
    ``steps`` (each end's step, :func:`plan_row_step`), ``f1`` (the front's second plan) and ``buffer`` (its
    cheapest plans with a persistent gradient buffer: ``bf16``, ``fp32``, ``any`` ZeRO stage, ``ddp-copy``).
    Raises ``TypeError`` if ``df`` is not a plan table or ``run`` lacks gpus/seq/global_batch, and
    ``ValueError``
    for a front of fewer than two plans.
    """
    if not isinstance(df, pd.DataFrame) or "pareto" not in df or "range_notes" not in df.attrs:
        raise TypeError(f"df must be a plan() table, got {type(df).__name__}")
    if not isinstance(run, dict) or not {"gpus", "seq", "global_batch"} <= set(run):
        raise TypeError("run must be the dict of plan() options the table was made with "
                        "(gpus, seq, global_batch, ...)")
    seq, gb = run["seq"], run["global_batch"]
    front = df[df["pareto"]]
    if len(front) < 2:
        raise ValueError(f"df's time-vs-cost front must hold at least two plans, got {len(front)}")
    cheap, fast = front.iloc[0], front.loc[front["days"].idxmin()]
    facts = ChapterText(data={"front": front, "cheap": cheap, "fast": fast})
    text = facts.values
    text["gb_tokens"] = f"{gb * seq / 1e6:.2f}M"
    text["n_plans"] = f"{len(df):,}"
    text["n_front"] = f"{len(front)}"
    text["front_gpus"] = ", ".join(dict.fromkeys(front["gpu"]))
    notes = df.attrs["range_notes"]
    # the front's GPU has a stand-in kernel efficiency: the plan says that its range is borrowed
    _says(
        set(front["gpu"]) == {cheap["gpu"]} and set(notes) == {cheap["gpu"]}
        and notes.get(cheap["gpu"]) == layout_range_note(cheap["gpu"]) != "",
        "the front is on one GPU type, and its range is the borrowed one")
    text["range_note"] = notes.get(cheap["gpu"], "")
    steps = facts.data["steps"] = {}
    for key, r in (("cheap", cheap), ("fast", fast)):
        text[f"{key}_n"] = f"{r['n_gpus']:,}"
        text[f"{key}_gpu"] = r["gpu"]
        text[f"{key}_days"] = _days(r["days"])
        text[f"{key}_cost"] = usd(r["cost_usd"])
        text[f"{key}_mfu"] = f"{r['mfu']:.0%}"
        text[f"{key}_layout"] = layout(r)
        text[f"{key}_days_range"] = f"{r['days_low']:,.1f} to {r['days_high']:,.1f}"
        text[f"{key}_cost_range"] = f"{usd(r['cost_usd_low'])} to {usd(r['cost_usd_high'])}"
        # where its step goes (the figure's right panel): compute, and each group's traffic before overlap
        st = steps[key] = plan_row_step(r, model, seq=seq)
        _says(abs(st.step_s - r["step_time_s"]) < 1e-6 * r[
            "step_time_s"], f"the {key} plan's step is the plan's own")
        text[f"{key}_compute_s"] = f"{st.compute_s:.2f} s"
        text[f"{key}_dp_s"] = f"{st.comm_by_group_s['dp']:.2f} s"
        text[f"{key}_tp_s"] = f"{st.comm_by_group_s['tp']:.2f} s"
        text[f"{key}_exposed_s"] = f"{st.exposed_comm_s:.2f} s"
    f1 = facts.data["f1"] = front.sort_values("n_gpus").iloc[1]     # the front's second plan: a doubling
    # the days saved take the range's factors too (cost.front_steps: one GPU, dtype and stack, one factor)
    fsteps = front_steps(df)
    s1 = fsteps[0]
    _says(
        (s1.n_gpus_from, s1.n_gpus_to) == (cheap["n_gpus"],
        f1["n_gpus"]),
        "the first doubling is the cheapest plan's")
    text["first_saved"] = f"{s1.days_saved:,.1f} ({s1.days_saved_low:,.1f} to {s1.days_saved_high:,.1f})"
    text["first_more"] = f"{s1.cost_ratio - 1:.0%}"
    _grad_buffer(facts, run, model, f1)
    _deepspeed_bucket(facts, model, seq, f1)
    text["reserve"] = f"{1 - USABLE_FRACTION:.0%}"
    # the cheapest plan recomputes the fewest layers that fit, so it ends just under the usable line
    margin = USABLE_FRACTION * cheap["capacity_bytes"] - cheap["memory_per_gpu_bytes"]
    text["cheap_margin"] = f"{margin / GiB:.1f} GiB"
    text["cheap_rc_layers"] = f"{int(cheap['recompute_layers'])} of {get_model(model).layers}"
    _says(
        cheap["recompute"] == "full" and steps["cheap"].exposed_comm_s < 0.01 * steps["cheap"].step_s,
        "the cheapest plan recomputes and hides all its traffic")
    sf = steps["fast"]
    # the fastest plan's MFU against the cheapest's: the share of its step that waits for the network, and the
    # GPU-seconds its arithmetic takes (thinner GEMMs at tp=8, chapter 10) against the cheapest plan's
    text["fast_dp_exposed_s"] = f"{sf.exposed_by_group_s['dp']:.2f} s"
    text["fast_wait_share"] = f"{sf.exposed_comm_s / sf.step_s:.0%}"
    gpu_s = {k: steps[k].compute_s * r["n_gpus"] for k, r in (("cheap", cheap), ("fast", fast))}
    _says(
        gpu_s["fast"] > gpu_s["cheap"]
        and cheap["tp"] < fast["tp"],
        "the fastest plan's arithmetic is slower, at a wider tp")
    text["fast_gpu_s_ratio"] = f"{gpu_s['fast'] / gpu_s['cheap']:.2f}"
    _says(sf.bubble_s < sf.exposed_by_group_s["dp"], "the fastest plan's bubble is its smallest loss")
    _twin(facts, df, run, model)
    _fast_pipeline(facts, model, seq)
    _says(fast["tp"] == 8, "the tensor-parallel group fills a node")
    _says(cheap["tp"] == 1, "the cheapest plan shares all of a node's NICs")
    _says(bool((front["micro_batch"] == 1).all()), "micro-batches of one sequence")
    _says(front["gpu"].nunique() == 1, "every front plan on one GPU type")
    # dense BF16 peak per dollar-hour at the catalogue's prices (the prose's "per dollar"), of the GPUs
    # searched
    gpus = tuple(run["gpus"])
    per_usd = {g: get_gpu(g).bf16_dense_tflops / get_gpu(g).price_usd_per_gpu_hour
               for g in (*gpus, "MI300X")}
    _says(
        max(gpus, key=per_usd.get) == front["gpu"].iloc[0]
        and per_usd["MI300X"] > max(per_usd.values()) - 1e-9,
        "the front's GPU has the most peak per dollar of the four; the MI300X more")
    text["per_usd"] = ", ".join(f"{g} {per_usd[g]:,.0f}"
                                for g in sorted(gpus, key=per_usd.get, reverse=True))
    text["per_usd_mi300x"] = f"{per_usd['MI300X']:,.0f}"
    text["front_summary"] = "; ".join(
        f"{r.n_gpus:,} GPUs: {r.days:,.1f} days ({r.days_low:,.1f} to {r.days_high:,.1f}) "
        f"for {usd(r.cost_usd)} ({usd(r.cost_usd_low)} to {usd(r.cost_usd_high)})"
        for r in front.sort_values("days", ascending=False).itertuples())
    # along the front each doubling of the GPUs saves fewer days and adds more dollars
    _says(
        all(s.n_gpus_to == 2 * s.n_gpus_from for s in fsteps)
        and len(fsteps) == len(front) - 1,
        "the front is a chain of doublings")
    _says(fsteps[0].cost_added_usd > 0 and all(
        a.days_saved > b.days_saved and a.cost_added_usd < b.cost_added_usd
        for a, b in zip(fsteps, fsteps[1:])), "each doubling saves fewer days and adds more dollars")
    text["speedup"] = f"{cheap['days'] / fast['days']:.1f}"
    text["cost_ratio"] = f"{fast['cost_usd'] / cheap['cost_usd']:.2f}"
    text["assumes"] = df.attrs["assumes"]
    return facts


def _grad_buffer(facts: ChapterText, run: dict, model: str, f1) -> None:
    """The front's second plan with a persistent gradient buffer (Megatron-LM's DDP, PyTorch DDP's buckets).

    It fits because the memory model's step starts with the gradients freed (zero_grad(set_to_none=True),
    chapter 4): its peak is the loss's, before any gradient exists; a persistent buffer adds its gradients
    there and it no longer fits. The planner's answer with the buffer: on DDP and ZeRO-1 only, in bf16 and in
    Megatron-LM's default FP32 gradients, and with every ZeRO stage on offer.
    """
    text = facts.values
    seq = run["seq"]
    kw = dict(batch=int(f1["micro_batch"]), seq=seq, grad_accum=int(f1["grad_accum"]), **recompute_kwargs(f1),
              parallel=Job.from_plan_row(f1, model, seq=seq).parallel)
    m = get_model(model)
    mem = training_memory(m, **kw)
    usable = USABLE_FRACTION * f1["capacity_bytes"]
    _says(
        abs(mem.total_bytes - f1["memory_per_gpu_bytes"]) < 1e-6 * f1["memory_per_gpu_bytes"],
        "the second plan's memory is the plan's own")
    _says(
        mem.peak_phase == "loss backward" and f1["zero"] <= 1 and f1["pp"] == 1,
        "the second plan peaks at the loss, ZeRO-0/1, no pipeline")
    buf = training_memory(m, **kw, grad_buffer=True)
    _says(buf.total_bytes > usable, "with a persistent buffer the second plan no longer fits")
    text["f1_grads"] = f"{mem.states.gradients_bytes / GiB:.1f} GiB"
    text["f1_n"] = f"{f1['n_gpus']:,}"

    def same_gpus(d):
        """The cheapest plan of ``d`` on the front plan's GPU type and count."""
        same = d[(d["gpu"] == f1["gpu"]) & (d["n_gpus"] == f1["n_gpus"])]
        return same.sort_values("cost_usd", kind="stable").iloc[0]

    rows = facts.data["buffer"] = {
        k: same_gpus(plan(model, **run, grad_buffer=True, zero_stages=(0, 1), precision=p))
        for k, p in (("bf16", "bf16-mixed"), ("fp32", "bf16-mixed-fp32-grads"))}
    b, b32 = rows["bf16"], rows["fp32"]
    _says(
        b["cost_usd"] > f1["cost_usd"] and (b["tp"], b["pp"]) != (f1["tp"], f1["pp"]),
        "with the buffer the plan costs more, at another tp or pp")
    text["f1_buf_layout"] = f"{layout(b)}, ZeRO-{b['zero']}"
    text["f1_buf_days"] = _range(b, "days", _days)
    text["f1_buf_cost"] = _range(b, "cost_usd", usd)
    text["f1_buf_more"] = f"{b['cost_usd'] / f1['cost_usd'] - 1:.0%}"
    same = (b32["tp"], b32["pp"], b32["dp"], b32["days"]) == (b["tp"], b["pp"], b["dp"], b["days"])
    text["f1_buf32"] = ("picks the same layout" if same else
                        f"gives {layout(b32)}, {b32['days']:,.1f} days for {usd(b32['cost_usd'])}")
    bz = rows["any"] = same_gpus(plan(model, **run, grad_buffer=True))
    _says(
        bz["zero"] == 2 and (bz["tp"], bz["pp"], bz["dp"]) == (f1["tp"], f1["pp"], f1["dp"]),
        "with every ZeRO stage: ZeRO-2 on the same layout")
    _says(abs(bz["cost_usd"] / f1["cost_usd"] - 1) < 1e-9, "ZeRO-2 at the same cost")
    # PyTorch DDP's default (gradient_as_bucket_view=False: grad_buffer="ddp-copy", footprint.grad_copies)
    # keeps each .grad beside its bucket from the backward to zero_grad: on the second plan after the loss's
    # peak, which stays; on the buffer plan, which accumulates, the .grad kept under no_sync is alive in every
    # later micro-batch's forward
    copy = training_memory(m, **kw, grad_buffer="ddp-copy")
    _says(
        copy.peak_phase == "loss backward" and copy.peak_bytes == buf.peak_bytes,
        "DDP's copies leave the loss's peak where it was")
    _says(
        buf.phases_bytes["backward"] < copy.phases_bytes["backward"] < copy.peak_bytes,
        "DDP's copies raise the backward, below the peak")
    _says(copy.phases_bytes["backward"] > usable, "both over the usable line")
    text["copy_f1_bwd"] = f"{copy.phases_bytes['backward'] / GiB:.1f} GiB"
    text["copy_f1_loss"] = f"{copy.peak_bytes / GiB:.1f} GiB"
    bc = rows["ddp-copy"] = same_gpus(plan(model, **run, grad_buffer="ddp-copy", zero_stages=(0, 1)))
    key = ["tp", "pp", "virtual_stages", "dp", "zero", "micro_batch", "grad_accum", "days", "cost_usd"]
    _says(
        list(bc[key]) == list(b[key])
        and int(b["grad_accum"]) > 1,
        "DDP's copies: the same plan, accumulating")
    _says(bc["memory_per_gpu_bytes"] > b["memory_per_gpu_bytes"], "DDP's copies: more memory")
    text["copy_accum"] = f"{int(b['grad_accum'])}"
    text["copy_more"] = f"{(bc['memory_per_gpu_bytes'] - b['memory_per_gpu_bytes']) / GiB:.1f} GiB"
    text["copy_gib"] = f"{bc['memory_per_gpu_bytes'] / GiB:.1f} GiB"
    text["copy_usable"] = f"{USABLE_FRACTION * bc['capacity_bytes'] / GiB:.1f} GiB"


def _deepspeed_bucket(facts: ChapterText, model: str, seq: int, f1) -> None:
    """DeepSpeed's ZeRO-1 and 2 (stage_1_and_2.py) keep no gradients between steps either, but each
    backward holds a reduce bucket the model leaves out (footprint.deepspeed_bucket_bytes, its defaults): the
    prose says the backward stays under the loss's peak with it, under both stages, so the plan's memory does
    not move."""
    text = facts.values
    bz = facts.data["buffer"]["any"]
    ds = deepspeed_bucket_bytes()
    # the bucket lives only during the backward: true of one micro-batch a step (with accumulation DeepSpeed
    # keeps it from the first micro-batch's backward to the last)
    _says(int(f1["grad_accum"]) == 1 and int(bz["grad_accum"]) == 1, "one micro-batch a step on both plans")
    mems = {int(r["zero"]): training_memory(Job.from_plan_row(r, model, seq=seq)) for r in (f1, bz)}
    _says(
        set(mems) == {1, 2} and all(x.peak_phase == "loss backward" for x in mems.values()),
        "ZeRO-1 and ZeRO-2 both peak at the loss")
    bwd = max(x.phases_bytes["backward"] for x in mems.values()) + ds
    _says(
        bwd < min(
        x.peak_bytes for x in mems.values()),
        "the backward with DeepSpeed's bucket stays under the loss's peak")
    text["ds_bucket"] = f"{ds / GiB:.2f} GiB"
    text["ds_bwd"] = f"{bwd / GiB:.1f} GiB"
    text["ds_loss"] = f"{mems[2].peak_bytes / GiB:.1f} GiB" if 2 in mems else ""


def _twin(facts: ChapterText, df, run: dict, model: str) -> None:
    """The fastest plan's pipeline is chosen, not forced: its tp without a pipeline fits on the same GPUs
    (dp = the global batch, one sequence per replica) and is slower, because each GPU reduces all its
    stage's gradients."""
    text = facts.values
    fast, sf = facts.data["fast"], facts.data["steps"]["fast"]
    twin = df[(df["gpu"] == fast["gpu"]) & (df["n_gpus"] == fast["n_gpus"]) & (df["tp"] == fast["tp"])
              & (df["pp"] == 1)]
    if twin.empty:
        _says(False, "the fastest plan's tp without a pipeline fits")
        return
    twin = twin.loc[twin["days"].idxmin()]
    _says(
        twin["dp"] * twin["micro_batch"] == run["global_batch"] and twin["days"] > fast["days"],
        "its twin without a pipeline: one sequence per replica, slower")
    _says(
        fast["n_gpus"] // run["global_batch"] == 8 == twin["tp"],
        "eight GPUs or more per sequence, eight-way tp alone")
    st = plan_row_step(twin, model, seq=run["seq"])
    _says(
        st.exposed_by_group_s["dp"]
        > sf.exposed_by_group_s["dp"],
        "the twin waits longer for its gradients")
    text["twin_layout"] = layout(twin)
    text["twin_days"] = f"{twin['days']:,.1f} days ({twin['days_low']:,.1f} to {twin['days_high']:,.1f})"
    text["twin_rs_gb"] = f"{grad_sent_bytes(st) / 1e9:.1f} GB"
    text["fast_rs_gb"] = f"{grad_sent_bytes(sf) / 1e9:.1f} GB"
    text["twin_dp_exposed_s"] = f"{st.exposed_by_group_s['dp']:.2f} s"
    # the fastest plan's data-parallel traffic is ZeRO-1's gradient reduce-scatter and weight all-gather
    dp_slots = {c.slot for c in sf.communication.collectives if c.group == "dp"}
    _says(fast["zero"] == 1 and dp_slots == {"gradients", "weight all-gather"},
          "the fastest plan's dp traffic: ZeRO-1's two collectives")


def _fast_pipeline(facts: ChapterText, model: str, seq: int) -> None:
    """The fastest plan pipelines its layers in interleaved chunks (chapter 8): the bubble it pays, plain
    1F1B's, and its memory against its plain twin's (the Search bullet: the peak moves to the last stage)."""
    text = facts.values
    fast, sf = facts.data["fast"], facts.data["steps"]["fast"]
    vp, m_fast, pp = int(fast["virtual_stages"]), int(fast["grad_accum"]), int(fast["pp"])
    _says(pp > 1 and vp > 1 and m_fast % pp == 0, "the fastest plan's pipeline is interleaved")
    text["fast_vp"] = f"{vp}"
    par = Job.from_plan_row(fast, model, seq=seq).parallel
    m = get_model(model)
    mem = {v: training_memory(m, batch=1, seq=seq, grad_accum=m_fast, parallel=replace(par, virtual_stages=v))
           for v in (1, vp)}
    _says(
        mem[vp].stage == pp - 1 and 1 < mem[vp].total_bytes / mem[1].total_bytes < 1.05,
        "its chunks move the peak to the last stage and raise it slightly")
    text["fast_pp"] = f"{pp}"
    text["fast_m"] = f"{m_fast}"
    text["fast_chunk"] = f"{m.layers // (pp * vp)}"
    text["fast_bubble"] = f"{sf.bubble:.1%}"
    formula = pipeline_bubble(pp, m_fast, vp) if pp > 1 else 0.0
    text["fast_bubble_formula"] = f"{formula:.2%}"
    _says(sf.bubble < formula, "its bubble is less than the formula's")
    text["fast_bubble_plain"] = f"{pipeline_bubble(pp, m_fast) if pp > 1 else 0.0:.0%}"     # v = 1
    text["fast_pp_s"] = f"{sf.comm_by_group_s['pp']:.2f} s"
    comm = sum(sf.comm_by_group_s.values())
    text["fast_comm_s"] = f"{comm:.2f} s"
    _says(0.8 < comm / sf.compute_s < 1, "its traffic takes nearly as long as its arithmetic")
    _says(
        sf.comm_by_group_s["dp"] < sf.compute_s < comm + sf.exposed_comm_s,
        "its dp traffic is shorter than its arithmetic, hidden in part")


def _plan_text(r) -> str:
    """A plan's GPUs, layout, days (range) and cost, in one clause of the prose."""
    return (f"{r['n_gpus']:,} {r['gpu']} GPUs ({layout(r)}), {r['days']:,.1f} days "
            f"({r['days_low']:,.1f} to {r['days_high']:,.1f}) for {usd(r['cost_usd'])}")


def limits_prose(df, run: dict, model: str = "llama-3-70b", *, month_days: float = 30, week_days: float = 7,
                 tight_days: float = 5, budget_usd: float = 1.2e6, seed_gpus: int = 32) -> ChapterText:
    """Chapter 12's deadline and budget section: the cheapest plan within a month, within a week, on H100s
    only within a month; a deadline inside the week plan's range read by both rules (``deadline_rule``); the
    fastest plan within a budget by both rules; and the fastest on ``seed_gpus`` H100s, in months (seed 000's
    "70B+ needs 8-64 GPUs", chapter 0: months of :data:`MONTH_DAYS` days). ``df`` is ``plan(model, **run)``,
    whose cheapest plan the month's is compared with. ``data`` holds the plans (``week_plans``, the week's
    table, for its figure) and ``lines``, the cell's printed summary.
    """
    if not isinstance(df, pd.DataFrame) or "pareto" not in df:
        raise TypeError(f"df must be a plan() table, got {type(df).__name__}")
    seed_gpus = check_int("seed_gpus", seed_gpus)
    cheap = df[df["pareto"]].iloc[0]                    # the front's cheapest plan
    facts = ChapterText()
    text = facts.values

    def cheapest(days=None, budget=None, rule="slow_end", **kw):
        limits = {"deadline_days": days} if days is not None else {"budget_usd": budget}
        return plan(model, **{**run, **kw}, **limits, deadline_rule=rule)

    month = cheapest(month_days)                        # the default rule, said
    m = month.iloc[0]
    text["month_n"] = f"{m['n_gpus']:,}"
    text["month_gpu"] = m["gpu"]
    text["month_layout"] = f"{layout(m)}, ZeRO-{m['zero']}"
    text["month_days"] = f"{m['days']:,.1f}"
    text["month_range"] = f"{m['days_low']:,.1f} to {m['days_high']:,.1f}"
    text["month_cost"] = usd(m["cost_usd"])
    text["month_slack"] = f"{month_days - m['days_high']:.1f}"
    text["month_cost_range"] = f"{usd(m['cost_usd_low'])} to {usd(m['cost_usd_high'])}"
    text["month_vs_cheap"] = ("the cheapest plan of all, which already meets the deadline"
                              if m["cost_usd"] <= cheap["cost_usd"] else
                              f"{m['cost_usd'] / cheap['cost_usd'] - 1:.0%} more than the cheapest plan")
    text["month_days_high"] = f"{m['days_high']:,.1f}"
    _says(
        m["gpu"] == cheap["gpu"]
        and month.attrs["range_notes"].get(m["gpu"]) == layout_range_note(m["gpu"]) != "",
        "the month's plan is on the cheapest plan's GPU, with its borrowed range")
    _says(m["cost_usd"] == cheap["cost_usd"], "a month is not a constraint here")
    # a deadline that binds: a week rules out the cheapest plan
    week_plans = facts.data["week_plans"] = cheapest(week_days)
    week = week_plans.iloc[0]
    _says(
        week["cost_usd"] > cheap["cost_usd"] and week["days_high"] <= week_days,
        "a week binds, and the week's plan makes it at its slow end")
    text["week_n"] = f"{week['n_gpus']:,}"
    text["week_gpu"] = week["gpu"]
    text["week_layout"] = f"{layout(week)}, ZeRO-{week['zero']}"
    text["week_days"] = _range(week, "days", _days)
    text["week_cost"] = _range(week, "cost_usd", usd)
    text["week_more"] = f"{week['cost_usd'] / cheap['cost_usd'] - 1:.0%}"
    # a deadline inside the week plan's range: the two rules of plan(deadline_rule=...) part ways
    t_est, t_slow = (cheapest(tight_days, rule=r).iloc[0] for r in ("estimate", "slow_end"))
    _says(
        t_est["days"] <= tight_days < t_est["days_high"] and t_est["meets_deadline"] == "likely",
        "the estimate's plan makes the tight deadline, its slow end does not: likely")
    _says(
        t_slow["days_high"] <= tight_days
        and t_slow["cost_usd"] > t_est["cost_usd"],
        "the slow end's plan makes it, for more")
    text["tight_days"] = f"{tight_days:g}"
    text["tight_est"], text["tight_slow"] = _plan_text(t_est), _plan_text(t_slow)
    text["tight_est_meets"] = t_est["meets_deadline"]
    text["tight_more"] = f"{t_slow['cost_usd'] / t_est['cost_usd'] - 1:.0%}"
    # a budget is read by the same rule (issue 34): its slow end is the cost's, cost_usd_high
    bud_est, bud_slow = (cheapest(budget=budget_usd, rule=r) for r in ("estimate", "slow_end"))
    f_est, f_slow = (d.sort_values("days", kind="stable").iloc[0] for d in (bud_est, bud_slow))
    _says(
        f_est["cost_usd"] <= budget_usd < f_est["cost_usd_high"] and f_slow["cost_usd_high"] <= budget_usd,
        "the estimate's fastest plan is within the budget, its slow end is not; the slow end's is")
    _says(
        f_slow["days"] > f_est["days"]
        and len(bud_slow) < len(bud_est),
        "by the slow end: slower, fewer plans")
    _says((f_est["within_budget"], f_slow["within_budget"]) == (
        "likely", "yes"), "the within_budget column: likely, yes")
    text["budget_est_mark"], text["budget_slow_mark"] = f_est["within_budget"], f_slow["within_budget"]
    text["budget"] = usd(budget_usd)
    text["budget_n_est"], text["budget_n_slow"] = f"{len(bud_est):,}", f"{len(bud_slow):,}"
    for key, r in (("est", f_est), ("slow", f_slow)):
        text[f"budget_{key}"] = f"{_plan_text(r)}, {usd(r['cost_usd_high'])} at the slow end"
    h100 = cheapest(month_days, gpus=("H100 SXM",)).iloc[0]
    text["h100_n"] = f"{h100['n_gpus']:,}"
    text["h100_days"] = _range(h100, "days", _days)
    text["h100_cost"] = _range(h100, "cost_usd", usd)
    text["h100_layout"] = layout(h100)
    # seed 000's "70B+ needs 8-64 GPUs" (chapter 0) with its cost in time: the fastest plan on seed_gpus H100s
    on_seed = df[(df["gpu"] == "H100 SXM") & (df["n_gpus"] == seed_gpus)].sort_values("days", kind="stable")
    _says(len(on_seed) > 0, f"{seed_gpus} H100s hold the run")
    sd = on_seed.iloc[0]
    _says(sd["days_low"] > 2 * MONTH_DAYS, f"on {seed_gpus} H100s the run takes months, even at the fast end")
    text["seed_gpus"] = f"{seed_gpus}"
    text["seed_months"] = (f"{sd['days'] / MONTH_DAYS:.0f} months ({sd['days_low'] / MONTH_DAYS:.0f} to "
                           f"{sd['days_high'] / MONTH_DAYS:.0f})")
    text["seed_layout"] = f"{layout(sd)}, ZeRO-{sd['zero']}"
    text["seed_cost"] = usd(sd["cost_usd"])
    w = week
    facts.data["lines"] = [
        f"cheapest within {month_days:g} days: {m['n_gpus']:,} x {m['gpu']} (tp={m['tp']}, pp={m['pp']}, "
        f"dp={m['dp']}, ZeRO-{m['zero']}), {m['days']:.1f} days ({m['days_low']:.1f}-{m['days_high']:.1f}), "
        f"${m['cost_usd']:,.0f} (${m['cost_usd_low']:,.0f}-${m['cost_usd_high']:,.0f})",
        f"cheapest within {week_days:g} days: {w['n_gpus']:,} x {w['gpu']} (tp={w['tp']}, pp={w['pp']}, "
        f"dp={w['dp']}, ZeRO-{w['zero']}), {w['days']:.1f} days ({w['days_low']:.1f}-{w['days_high']:.1f}), "
        f"${w['cost_usd']:,.0f}",
        f"H100s only, within {month_days:g} days: {h100['n_gpus']:,} x H100 (tp={h100['tp']}, "
        f"pp={h100['pp']}, dp={h100['dp']}), {h100['days']:.1f} days, ${h100['cost_usd']:,.0f}",
        f"within {tight_days:g} days, point estimate: {t_est['n_gpus']:,} x {t_est['gpu']} "
        f"({t_est['days']:.1f} days, {t_est['days_low']:.1f}-{t_est['days_high']:.1f}, "
        f"{t_est['meets_deadline']}); slow end: "
        f"{t_slow['n_gpus']:,} x {t_slow['gpu']} ({t_slow['days']:.1f} days, {t_slow['days_low']:.1f}-"
        f"{t_slow['days_high']:.1f}), ${t_slow['cost_usd']:,.0f}",
        f"fastest within ${budget_usd:,.0f}, point estimate: {len(bud_est):,} plans, {f_est['n_gpus']:,} x "
        f"{f_est['gpu']} ({f_est['days']:.1f} days, ${f_est['cost_usd']:,.0f}, "
        f"${f_est['cost_usd_high']:,.0f} at the slow end, {f_est['within_budget']}"
        f"); slow end: {len(bud_slow):,} plans, {f_slow['n_gpus']:,} x "
        f"{f_slow['gpu']} ({f_slow['days']:.1f} days, ${f_slow['cost_usd']:,.0f}, "
        f"${f_slow['cost_usd_high']:,.0f} at the slow end, {f_slow['within_budget']})"]
    return facts
