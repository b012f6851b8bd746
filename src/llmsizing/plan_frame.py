"""From a search's table to :func:`~llmsizing.planner.plan`'s answer (Part III, "How many GPUs do you
need?"), split out of :mod:`llmsizing.planner` (issue 34: the module had reached 600 lines), which re-exports
every name: each plan's days, GPU-hours and cost with the 80% range of an MFU predicted from a layout
(:func:`~llmsizing.mfu.layout_range_factors`), the deadline and the budget applied by their rule, the
time-vs-cost front, the frame's ``attrs`` that say what it assumes, and :class:`NoPlanError`'s messages. No
formula of the model: the step times, memory and MFU are the search's (:mod:`llmsizing.planner`).
"""

from __future__ import annotations

import numpy as np

from .all_to_all import DEFAULT_DISPATCHER, routing_note
from .catalog import price_kind_of
from .footprint import grad_buffer_note
from .mfu import layout_range_area, layout_range_factors, layout_range_group
from .mfu_inputs import layout_range_note
from .plan_rank import (_by_cost, _digits, _pareto, _taken, budget_kept, budget_rule_text, deadline_kept,
                        deadline_rule_text, interleaving_winners, meets_deadline, pipelined_zero_winners,
                        within_budget)


class NoPlanError(ValueError):
    """Nothing fits, or nothing meets the deadline or budget: the message says which and what came closest."""


def nothing_fits(model, *, micros, seq, gpu_list, frac, max_gpus, counts, global_batch, cps) -> NoPlanError:
    """The :class:`NoPlanError` of a search in which no layout holds ``model``: what was searched and what
    could make a plan fit."""
    limit = ", ".join(f"{g.name} ({frac:.0%} of {g.memory_gib:.1f} GiB)" for g in gpu_list)
    return NoPlanError(
        f"no layout holds {model.name} with micro-batches {micros} of {seq:,} tokens on {limit}"
        + (f" within max_gpus={max_gpus:,}" if max_gpus is not None else "")
        + ("" if counts is None else f" on gpu_counts={counts}")
        + f" at global_batch={global_batch:,}" + ("" if cps == (1,) else f", context parallelism {cps}")
        + ": allow more GPUs, a larger global batch (more data-parallel ranks), recomputation, "
        + ("context parallelism (cp_degrees=...), " if cps == (1,) else "")
        + "or a GPU with more memory")


def recipe_text(model, *, precision, optimizer, optimizer_impl, eff, overlap, cps, cp_comm, eps, expert_tp,
                ep_overlap, shared_expert_overlap, options, max_nodes, dispatcher, grad_buffer,
                recipe=None) -> str:
    """The start of the frame's ``attrs["assumes"]``: the recipe, the step model's settings and, for a mixture
    of experts, its expert parallelism and routing (:func:`answer_frame` adds the range's stack)."""
    return (f"precision={precision}, optimizer={optimizer} ({optimizer_impl} step), "
            f"kernel efficiency {'calibrated per GPU' if eff is None else f'{eff:g}'}, "
            f"overlap {'per group' if overlap is None else f'{overlap:g}'}"
            + ("" if cps == (1,) else f", context parallelism {cp_comm}")
            + ("" if not model.is_moe else
               f", expert parallelism ep in {eps}{' with expert_tp' if expert_tp else ''}, "
               f"all-to-all {ep_overlap:.0%} hidden"
               + (" after the shared experts'" if shared_expert_overlap else "")
               + "".join(f", {k}={v:g}" for k, v in options.items())
               + ", routing " + routing_note(model, max_nodes)
               + ("" if dispatcher == DEFAULT_DISPATCHER
                  else f", the {dispatcher} dispatcher"))
            + (f", {grad_buffer_note(grad_buffer)} (DDP, ZeRO-1)" if grad_buffer else "")
            + (f", the {recipe['schedule']} schedule" if recipe and "schedule" in recipe else "")
            + (f", {recipe['comm_sms']} SMs kept for communication"
               if recipe and "comm_sms" in recipe else "")
            + (", the backward's TP collectives behind the column-parallel GEMMs (Megatron)"
               if recipe and recipe.get("tp_backward") else ""))


def answer_frame(df, *, gpu_list, given, dtype, framework, stack_fam, tokens, steps, deadline, budget, rule,
                 deadline_rule, explain, columns, max_gpus, cp_comm, assumes, moe=False):
    """:func:`~llmsizing.planner.plan`'s frame from the search's table ``df`` (never changed: it is kept):
    days, GPU-hours and cost for ``steps`` optimizer steps (``tokens`` tokens) with their 80% range, the plans
    the deadline and the budget keep by ``rule`` (:class:`NoPlanError` when none is left, unless ``explain``
    is False: then the empty frame of ``columns``), ranked cheapest first with the time-vs-cost front, and its
    ``attrs`` (``assumes``: :func:`recipe_text`). ``moe``: the model is a mixture of experts, whose plans
    take the MoE range (:func:`~llmsizing.mfu.layout_range_factors` with ``moe=True``; issue 35)."""
    import pandas as pd

    # (the search's table is kept: never change it) the new columns on arrays, and the frame built once, in
    # its final order, from the search's columns and these (issue 35: no copy of the whole table per step)
    factors = np.array([layout_range_factors(g, dtype, framework, moe=moe) for g in gpu_list], dtype=float)
    # each plan's GPU, as an index (the search's own column; a table without it: its names looked up)
    at = (df["gpu_index"].to_numpy() if "gpu_index" in df
          else pd.Index([g.name for g in gpu_list]).get_indexer(df["gpu"]))
    low, high = factors[at, 0], factors[at, 1]
    days = steps * df["step_time_s"].to_numpy() / 86400
    gpu_hours = days * 24 * df["n_gpus"].to_numpy()
    cost = gpu_hours * df["price"].to_numpy()
    added = {"days": days, "days_low": days / high, "days_high": days / low, "gpu_hours": gpu_hours,
             "cost_usd": cost, "cost_usd_low": cost / high, "cost_usd_high": cost / low}
    # (each GPU's kind made a string column once and taken per plan listed, in the frame's order below: the
    # frame's str dtype as it would infer it from the plans' strings, without checking every plan's string:
    # ~1 ms of a table of 59,000 plans, issue 38)
    kinds = pd.Series(np.array([price_kind_of(g, given.get(g.name)) for g in gpu_list])).array
    if not (np.isfinite(days).all() and np.isfinite(cost).all()):     # (bounded inputs keep them finite)
        raise ValueError(f"tokens={tokens:g} gives a plan whose days or cost is not a finite number: check "
                         "tokens, kernel_efficiency and prices")
    # (an interleaved plan another one beats is not listed)
    keep = (df["listed"].to_numpy().copy() if "listed" in df
            else interleaving_winners(df) & pipelined_zero_winners(df))
    listed = keep.copy()                  # (what the table lists without limits: the message counts these)
    # what the old default (point estimates, both limits) keeps: the rule change is warned only for those
    old = (listed & (True if deadline is None else days <= deadline)
           & (True if budget is None else cost <= budget))
    if deadline is not None:
        added["meets_deadline"] = meets_deadline(days, added["days_high"], deadline)
        keep &= deadline_kept(rule, days, added["days_high"], deadline, old)
    if budget is not None:
        added["within_budget"] = within_budget(cost, added["cost_usd_high"], budget)
        keep &= budget_kept(rule, cost, added["cost_usd_high"], budget, old)
    sel = np.flatnonzero(keep)
    if not len(sel):
        if not explain:
            return pd.DataFrame(columns=list(columns))
        # the fastest and the cheapest of the plans the table would list (an interleaved or pipelined-ZeRO
        # twin another plan beats is neither counted nor named: reader24b's ch12 L1)
        at_listed = np.flatnonzero(listed)
        f, c = (int(at_listed[np.argmin(x[at_listed])]) for x in (days, cost))
        n_gpus, gpu = df["n_gpus"].to_numpy(), df["gpu"].to_numpy()
        raise NoPlanError(
            f"{len(at_listed):,} plans fit in memory (those plan() lists without deadline_days and "
            "budget_usd), but none meets "
            + " and ".join(x for x in (f"deadline_days={deadline:g}" if deadline else "",
                                       f"budget_usd={budget:,.0f}" if budget else "") if x)
            + f": the fastest takes {days[f]:,.1f} days"
            + (f" ({days[f] / low[f]:,.1f} at the slow end of the 80% range)" if deadline else "")
            + f" (${cost[f]:,.0f}, "
            f"{n_gpus[f]:,} x {gpu[f]}), the cheapest costs ${cost[c]:,.0f} ("
            + (f"${cost[c] / low[c]:,.0f} at the slow end of the 80% range; " if budget else "")
            + f"{days[c]:,.1f} days, {n_gpus[c]:,} x {gpu[c]})"
            + ("" if max_gpus is None else f"; max_gpus={max_gpus:,} may be what limits the speed")
            + ("" if deadline is None else f"; the deadline was checked by the "
               f"{deadline_rule_text(deadline_rule, deadline)}")
            + ("" if budget is None else f"; the budget was checked by the "
               f"{budget_rule_text(deadline_rule, budget)}"))
    # plans that split the same work differently tie to the last bits of a float: compare at 12 digits, so
    # ties keep the search's order whatever the rounding (the step's compute is a sum: llmsizing.kernels)
    days_d, cost_d = _digits(days[sel]), _digits(cost[sel])
    added["pareto"] = np.empty(len(df), dtype=bool)
    memory_d = df["memory_per_gpu_bytes"].to_numpy()[sel]
    # (the front from the rows no faster, cheaper bin rules out, sorted alone: plan_rank._pareto's own path,
    # the same front; speed38: the full (memory, cost, days) order of a mixture of experts' ~45,000 plans on
    # two GPU types was ~5-10 ms of chapter 17's move, for a front of a few rows)
    by_cost = _by_cost(days_d, cost_d)
    added["pareto"][sel] = _pareto(days_d, cost_d, memory_d)
    rows = sel[by_cost]
    # (every column a fresh array: copy=False keeps them as they are instead of stacking them into blocks)
    added["price_kind"] = kinds.take(at[rows])
    out = pd.DataFrame({c: added[c] if c == "price_kind" else added[c][rows] if c in added
                        else _taken(df[c], rows) for c in columns}, copy=False)
    range_rows = {g.name: layout_range_group(g, dtype, framework, moe=moe) for g in gpu_list}
    # a known stack whose row states no range (under 75% out of source) gets the pooled one: say so
    pooled = stack_fam != "unknown" and not all(r.startswith("stack:") for r in range_rows.values())
    stack_words = f", range of the {stack_fam} stack" + (" where it states one, else the pooled range"
                                                         if pooled else "")
    moe_words = ", the range of published MoE runs (every stack)"
    out.attrs["assumes"] = assumes + (moe_words if moe else stack_words)
    out.attrs["cp_comm"] = cp_comm
    if deadline is not None:
        out.attrs["deadline_rule"] = deadline_rule_text(deadline_rule, deadline)
    if budget is not None:
        out.attrs["budget_rule"] = budget_rule_text(deadline_rule, budget)
    out.attrs["range_area"] = layout_range_area(moe)
    out.attrs["stack"] = stack_fam                      # the stack named (its range where it states one)
    out.attrs["range_rows"] = range_rows
    notes = {g.name: layout_range_note(g, dtype) for g in gpu_list}   # a stand-in kernel efficiency: say so
    out.attrs["range_notes"] = {name: note for name, note in notes.items() if note}
    return out
