"""Part III, "Time and money": the widgets of chapters 10-14 (chapter 13's case studies have none).

* chapter 10, :func:`training_time_widget`: days and cost of a run against the GPU count;
* chapter 11, :func:`cost_widget`: the job's cost and days on a price x MFU grid;
* chapter 12, :func:`planner_widget`: the planner's plans and a chosen plan of its front;
* chapter 14, :func:`seed_audit_widget`: every recomputed seed claim, claimed against computed.
"""

from __future__ import annotations

import functools
import math

import ipywidgets as W

from .. import charts
from .._validate import check_bool, check_choice
from ..catalog import get_model, list_gpus, list_models
from ..footprint import check_grad_buffer_kind
from .controls import _gpu_multiselect, _moe_options, _reroute, _set_quietly, _style
from .dashboard import FIGURE_MAX_PX, KEPT_ANSWERS, Dashboard
from .speculate import Speculation, nearest, wanted_by_environment, watch

#: The token budgets the widgets of chapters 10-12 offer.
TOKEN_BUDGETS = (("1B", 1e9), ("10B", 1e10), ("100B", 1e11), ("1T", 1e12), ("2T", 2e12), ("15T", 15e12))


#: The MFU choices of the chapter 10 widget: "calibrated" (0.0) is the library's estimate for the run, with
#: its generation's range (:func:`~llmsizing.time_cost.mfu_estimate`); a number is taken as exact.
TIME_MFUS = (("calibrated", 0.0),) + tuple((f"{m / 100:.2f}", m / 100) for m in range(5, 75, 5))


#: How many answers of each kind (does a count hold a step; the fewest that do) chapter 10's widget keeps.
FITS_KEPT = 1024


def training_time_widget(model: str = "llama-3-70b") -> Dashboard:
    """Chapter 10: days and cost of a run against the GPU count
    (:func:`~llmsizing.charts.render_training_time`), at the calibrated MFU (default) or one chosen
    exactly."""
    from ..charts.time_money import _fits, fewest_holding

    # which counts hold a step, and the fewest that do, depend on the model, GPU and sequence alone (memory,
    # no price): kept per question, so that moving the tokens, the MFU or the GPU count searches no layout
    fits = functools.lru_cache(maxsize=FITS_KEPT)(_fits)
    fewest = functools.lru_cache(maxsize=FITS_KEPT)(fewest_holding)

    def render(model, tokens, gpu, seq, n_gpus, mfu, into=None):
        return charts.render_training_time(model, tokens=tokens, gpu=gpu, seq=seq, n_gpus=n_gpus,
                                           mfu=mfu or None, into=into, fits=fits, fewest=fewest)

    controls = {                              # every model: a mixture of experts is timed on its active FLOPs
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "tokens": W.Dropdown(options=TOKEN_BUDGETS, value=1e12, description="tokens", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "seq": W.Dropdown(options=[2048, 4096, 8192], value=8192, description="sequence", **_style()),
        "n_gpus": W.SelectionSlider(options=[2**k for k in range(16)], value=1024, description="GPUs",
                                    **_style()),
        "mfu": W.Dropdown(options=TIME_MFUS, value=0.0, description="MFU", **_style()),
    }
    return Dashboard(render, controls, name="training_time_widget", keep=KEPT_ANSWERS)


# =========================================================================== chapter 11: cost
def cost_widget(model: str = "llama-3-70b") -> Dashboard:
    """Chapter 11: model x tokens x GPU x price x MFU x GPU count -> the job's cost and days, on a price x MFU
    grid around the chosen point (:func:`~llmsizing.charts.render_cost_sensitivity`). Choosing a GPU resets
    the price to its catalogue on-demand price; a reserved discount is a lower price."""
    from ..catalog import get_gpu

    get_model(model)
    start = get_gpu("H100 SXM")
    # the slider reaches every catalogued price (GB200 $10.50): a FloatSlider clamps a value past its max
    top = max([10.0] + [g.price_usd_per_gpu_hour for g in map(get_gpu, list_gpus())
                        if g.price_usd_per_gpu_hour])
    controls = {                              # every model (cost_sensitivity prices a mixture of experts too)
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "tokens": W.Dropdown(options=TOKEN_BUDGETS, value=1e12, description="tokens", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value=start.name, description="GPU", **_style()),
        "seq": W.Dropdown(options=[2048, 4096, 8192], value=8192, description="sequence", **_style()),
        "price": W.FloatSlider(value=start.price_usd_per_gpu_hour, min=0.10, max=math.ceil(top), step=0.01,
                               description="USD/GPU-hour", readout_format=".2f", **_style()),
        "mfu": W.FloatSlider(value=0.40, min=0.05, max=0.70, step=0.05, description="MFU",
                             readout_format=".2f", **_style()),
        "n_gpus": W.SelectionSlider(options=[2**k for k in range(16)], value=1024, description="GPUs",
                                    **_style()),
    }
    box = Dashboard(charts.render_cost_sensitivity, controls, name="cost_widget", keep=KEPT_ANSWERS)

    def on_gpu(change):                      # a new GPU brings its own on-demand price (one redraw)
        _set_quietly(box, controls["price"], value=get_gpu(change["new"]).price_usd_per_gpu_hour)
        box.update(change)

    _reroute(box, on_gpu, ("gpu",))
    return box


# =========================================================================== chapter 12: the planner
#: Deadlines and budgets the planner widget offers (0 = none).
PLAN_DEADLINES = (("none", 0.0), ("7 days", 7.0), ("14 days", 14.0), ("30 days", 30.0), ("60 days", 60.0),
                  ("90 days", 90.0), ("1 day", 1.0))
PLAN_BUDGETS = (("none", 0.0), ("$500k", 5e5), ("$750k", 7.5e5), ("$1M", 1e6), ("$2M", 2e6), ("$5M", 5e6),
                ("$10M", 1e7))
#: How the planner widget keeps plans against the deadline and the budget (issue 34:
#: ``plan(deadline_rule=...)``, one rule for both): by the slow end of their 80% range (the default, plan()'s
#: since issue 34) or by the point estimate of their days and cost.
PLAN_DEADLINE_RULES = (("slow end of range", "slow_end"), ("point estimate", "estimate"))
#: Where the planner widget's DDP and ZeRO-1 plans keep their gradients (issue 38, ``plan(grad_buffer=...)``,
#: :data:`~llmsizing.footprint.GRAD_BUFFERS`, chapter 12's "A gradient buffer that stays"): freed after each
#: step (``zero_grad(set_to_none=True)``, the default), Megatron-Core's persistent buffer, PyTorch DDP's
#: buckets with the ``.grad`` tensors apart (its default, ``gradient_as_bucket_view=False``) or as views of
#: them. ZeRO-2 and 3 plans free theirs whatever is chosen (``plan()``'s ``attrs["assumes"]``).
PLAN_GRAD_BUFFERS = (("freed at step (DeepSpeed)", False), ("kept (Megatron-Core)", True),
                     ("PyTorch DDP default", "ddp-copy"), ("PyTorch DDP bucket view", "ddp-view"))
#: The grad buffer control's tooltip: what each choice means and that ZeRO-2/3 plans take no buffer.
PLAN_GRAD_BUFFER_HINT = ("grad buffer: where the gradients of the DDP and ZeRO-1 plans live between steps: "
                         "freed after each optimizer step (DeepSpeed), kept in a persistent buffer "
                         "(Megatron-Core), PyTorch DDP's buckets with the .grad tensors apart (its default) "
                         "or as views of the buckets (gradient_as_bucket_view=True). ZeRO-2 and ZeRO-3 plans "
                         "free their sharded gradients whatever is chosen here")
#: Settings whose answers (PNG and summary) the planner widget keeps: a move back to one of them is shown
#: without a new render and draw (issue 38).
PLANNER_KEPT = 64
#: How many GPU types the planner widget's multi-select shows before it scrolls (issue 38: with the grad
#: buffer control, 16 rows took the controls' column past the widget's height budget).
PLANNER_GPU_ROWS = 14
#: How many of plan()'s searched tables the planner widget keeps to cut a lower GPU limit from (issue 38).
PLANNER_SEARCHED = 16
#: The sequence lengths, global batches (sequences) and GPU limits the planner widget offers.
PLAN_SEQS = (2048, 4096, 8192)
PLAN_GLOBAL_BATCHES = (64, 128, 256, 512, 1024, 2048)
PLAN_MAX_GPUS = tuple(2**k for k in range(3, 15))


def planner_ahead(values: dict, searched=(), in_kernel=()) -> list[tuple]:
    """The settings a reader of chapter 12's planner widget at ``values`` (its controls' values) is likely to
    ask for next that would be a new :func:`~llmsizing.planner.plan` search, most likely first, as the
    widget's search keys ``(model, tokens, gpus, seq, global_batch, max_gpus, grad_buffer)``: the nearest
    other token budgets when the shown table's search was not made in this kernel (``in_kernel``: keys
    without the tokens; the kernel's kept search makes another budget cost milliseconds, the worker's does
    not), the other sequence lengths, the next global batches, the next GPU limit up, the other grad
    buffers, then the global batches two steps away and the GPU limit two steps up (each control's nearest
    first). Left out: a key of ``searched``, a lower GPU limit than one of ``searched`` at the other settings
    (a cut of it, no search) and a setting of ``in_kernel``. The filters (deadline, budget, rule, plan choice)
    search nothing."""
    from ..footprint import check_grad_buffer_kind

    v = dict(values, gpus=tuple(values["gpus"]), grad_buffer=check_grad_buffer_kind(values["grad_buffer"]))
    names = ("model", "tokens", "gpus", "seq", "global_batch", "max_gpus", "grad_buffer")

    def at(**change) -> tuple:
        return tuple(change.get(k, v[k]) for k in names)

    near_b = nearest(PLAN_GLOBAL_BATCHES, v["global_batch"])
    up = [m for m in PLAN_MAX_GPUS if m > v["max_gpus"]]
    out = []
    if at()[:1] + at()[2:] not in in_kernel:
        out += [at(tokens=t) for t in nearest([t for _, t in TOKEN_BUDGETS], v["tokens"])[:2]]
    out += [at(seq=s) for s in nearest(PLAN_SEQS, v["seq"])]
    out += [at(global_batch=b) for b in near_b[:2]]
    out += [at(max_gpus=m) for m in up[:1]]
    out += [at(grad_buffer=g) for g in nearest([g for _, g in PLAN_GRAD_BUFFERS], v["grad_buffer"])]
    out += [at(global_batch=b) for b in near_b[2:4]] + [at(max_gpus=m) for m in up[1:2]]

    def kept(k) -> bool:     # (searched, a cut of a search at a higher GPU limit, or kept by plan() here)
        return (k[:1] + k[2:] in in_kernel
                or any(s[:5] + s[6:] == k[:5] + k[6:] and s[5] >= k[5] for s in searched))

    return [k for k in dict.fromkeys(out) if not kept(k)]


def planner_widget(model: str = "llama-3-70b", *, speculate: bool | None = None,
                   warm: bool = False) -> Dashboard:
    """Chapter 12: model x token budget x GPU types x sequence x global batch x GPU limit x deadline x budget
    -> the planner's plans (:func:`~llmsizing.planner.plan`) and a chosen front plan
    (:func:`~llmsizing.charts.render_plan`). ``plan()``'s table is cached per (model, tokens, GPU types,
    sequence, global batch, max GPUs), and its search (0.1-0.3 s, ``planner._search``) per the same without
    the tokens, so a new token budget costs milliseconds: the deadline, the budget and the plan selector only
    filter and redraw. A lower GPU limit than a table searched at the other settings is a cut of it
    (:func:`~llmsizing.planner.plans_within`, bit for bit plan()'s; issue 38), no new search.
    Filtering the cached plans by deadline and budget keeps exactly ``plan()``'s front (a plan dominated by
    one beyond the deadline or budget is beyond it too); when nothing is left, ``plan()`` is called with them
    to show its :class:`~llmsizing.planner.NoPlanError` message. The last :data:`PLANNER_KEPT` settings' PNGs
    and summaries are kept: a move back to one of them is answered without a render or a draw (issue 38).

    The rule of the deadline and the budget (issue 34, :data:`~llmsizing.planner.DEADLINE_RULES`, the ``rule``
    control, ``plan()``'s ``deadline_rule``): the slow end of the 80% range, ``days_high`` and
    ``cost_usd_high`` (the default, ``plan()``'s since issue 34) or the point estimate. The slow end also only
    filters the cached plans (no new search); its front is marked again among the plans left
    (:func:`~llmsizing.planner.plans_where`), since the range's width differs by GPU and a plan dominated by
    one beyond the slow end need not be beyond it itself. The summary names the rule and says whether the
    chosen plan meets the deadline and the budget at the slow end of its range (``plan()``'s
    ``meets_deadline``).

    The ``grad_buffer`` control (issue 38, :data:`PLAN_GRAD_BUFFERS`) is ``plan()``'s ``grad_buffer``: every
    table, search and kept answer is keyed on it; the DDP and ZeRO-1 plans hold the buffer, ZeRO-2/3 ones
    not (``attrs["assumes"]``, in the summary), and the chosen plan's memory is drawn with it.

    ``speculate`` (spec30, as chapter 17's :func:`~.long_context.long_context_widget`): after each move, the
    new searches the reader is likely to ask for next (:func:`planner_ahead`) are worked out by the
    process's worker at the lowest priority (:class:`~.speculate.Speculation`); a move whose search is done
    there takes its table (plan()'s own, the same bits) and any other searches in the kernel as before.
    ``None`` (the default) speculates only where ``LLMSIZING_SPECULATE=1`` (``make lab``, ``app`` and
    ``serve-live``); ``True`` always, ``False`` never. It changes how soon an answer comes, never the
    answer.

    ``warm`` (moefast34, issue 38; chapter 12's page builds it with ``warm=True``): the searches of the
    drop-down's mixtures of experts (:func:`planner_warm_models`) at the other controls' defaults are made
    when the widget is built, before its first view, and kept by the widget (one table each, ~30 MB and
    ~0.8 s of CPU for the ten, once per kernel); a reader's pick of one of them at those settings is then
    its render and PNG instead of a new search as well (a mixture of experts' search, 45-110 ms of CPU;
    benchmarks/bench_widget_ab.py: MoE picks 154 -> 48 ms of CPU, other moves within 1-6%). The
    tables are :func:`~llmsizing.planner.plan`'s own, made in the building cell: no move waits for them,
    and a pick at any other setting searches as before. A setting where nothing fits is left to the pick.
    ``False`` (the default): built cold."""
    import numpy as np

    from collections import OrderedDict

    from ..planner import DEADLINE_RULES, budget_kept, deadline_kept, plan, plans_where, plans_within

    get_model(model)
    warm = check_bool("warm", warm)
    on = wanted_by_environment() if speculate is None else check_bool("speculate", speculate)
    spec = Speculation(plan) if on else None
    searched: OrderedDict = OrderedDict()   # plan()'s tables by (model, tokens, gpus, seq, batch, max_gpus)
    warmed: dict = {}                       # plan()'s tables made at build (warm), by cached()'s arguments
    in_kernel: OrderedDict = OrderedDict()  # the settings (no tokens) whose search plan() made in the kernel

    @functools.lru_cache(maxsize=16)
    def cached(model, tokens, gpus, seq, global_batch, max_gpus, grad_buffer=False):
        # a lower GPU limit than a table searched at the other settings: its plans within the limit, bit for
        # bit plan()'s at that limit (planner.plans_within, tests/test_planner.py), no new search (issue 38,
        # as chapter 17's widget); none left: plan() says why
        key = (model, tokens, gpus, seq, global_batch, grad_buffer)
        above = [m for k, m in searched if k == key and max_gpus is not None and (m is None or m > max_gpus)]
        if above:
            within = plans_within(searched[key, min(above, key=lambda m: math.inf if m is None else m)],
                                  max_gpus)
            if len(within):
                return within
        got = None if spec is None else spec.take((model, tokens, gpus, seq, global_batch, max_gpus,
                                                     grad_buffer))
        if got is not None:                 # (the worker's search: plan()'s table, pickled bit for bit)
            df = got[1]
        elif (model, tokens, gpus, seq, global_batch, max_gpus, grad_buffer) in warmed:
            df = warmed[model, tokens, gpus, seq, global_batch, max_gpus, grad_buffer]   # (plan()'s, built)
        else:
            df = plan(model, tokens=tokens, gpus=gpus, seq=seq, global_batch=global_batch, max_gpus=max_gpus,
                      **_buffer(grad_buffer))
            in_kernel[model, gpus, seq, global_batch, max_gpus, grad_buffer] = None
            while len(in_kernel) > 32:      # (plan()'s kept searches: planner._search, the last 32)
                in_kernel.popitem(last=False)
        searched[key, max_gpus] = df
        while len(searched) > PLANNER_SEARCHED:
            searched.popitem(last=False)
        return df

    @functools.lru_cache(maxsize=16)
    def explain(model, tokens, gpus, seq, global_batch, max_gpus, deadline, budget, rule, grad_buffer=False):
        """plan()'s error for these limits (None if it finds plans), computed once per set of arguments."""
        try:
            plan(model, tokens=tokens, gpus=gpus, seq=seq, global_batch=global_batch, max_gpus=max_gpus,
                 deadline_days=deadline or None, budget_usd=budget or None, deadline_rule=rule,
                 **_buffer(grad_buffer))
        except (ValueError, TypeError) as exc:
            return exc
        return None

    @functools.lru_cache(maxsize=16)
    def filtered(model, tokens, gpus, seq, global_batch, max_gpus, deadline, budget, rule, grad_buffer=False):
        """The cached plans within the deadline (by the rule ``rule``) and budget (the same table object for
        the same arguments, so that render_plan's summary of it is reused), with its front."""
        args = dict(tokens=tokens, gpus=gpus, seq=seq, global_batch=global_batch, max_gpus=max_gpus,
                    **_buffer(grad_buffer))
        df = cached(model, **args)
        slow_end = bool(deadline or budget) and rule == "slow_end"
        keep = np.ones(len(df), dtype=bool)            # plan()'s own rule (the rule is given: never warned)
        if deadline:
            keep &= deadline_kept(rule, df["days"], df["days_high"], deadline)
        if budget:
            keep &= budget_kept(rule, df["cost_usd"], df["cost_usd_high"], budget)
        df = plans_where(df, keep) if slow_end else df[keep]
        if df.empty:                                   # plan() explains why (raises NoPlanError)
            why = explain(model, deadline=deadline, budget=budget, rule=rule, **args)
            if why is not None:
                raise type(why)(*why.args)   # a new exception each time (the kept one's traceback would grow)
            df = plan(model, **args, deadline_days=deadline or None, budget_usd=budget or None,
                      deadline_rule=rule)
        front = df[df["pareto"]]
        return df, front, _front_options(front), cached(model, **args)

    holder: dict = {}

    def prepare(model, tokens, gpus, seq, global_batch, max_gpus, deadline, deadline_rule, budget, choice,
                grad_buffer=False):
        """The plan selector's options for the setting (before the dashboard looks for a kept answer)."""
        rule = check_choice("deadline_rule", deadline_rule, DEADLINE_RULES)
        args = dict(tokens=tokens, gpus=tuple(gpus), seq=seq, global_batch=global_batch, max_gpus=max_gpus,
                    **_buffer(check_grad_buffer_kind(grad_buffer)))
        df, front, options, searched = filtered(model, deadline=deadline, budget=budget, rule=rule, **args)
        _set_front_options(holder["box"], front, choice, options)
        return args, df, front, searched

    def render(model, tokens, gpus, seq, global_batch, max_gpus, deadline, deadline_rule, budget, choice,
               grad_buffer=False, into=None):
        args, df, front, searched = prepare(model, tokens, gpus, seq, global_batch, max_gpus, deadline,
                                            deadline_rule, budget, choice, grad_buffer)
        k = holder["box"].controls["choice"].value
        return charts.render_plan(model, **args, deadline_days=deadline or None, budget_usd=budget or None,
                                  plans=df, highlight=front.index[k], into=into, all_plans=searched,
                                  deadline_rule=deadline_rule)

    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),   # MoE too
        "tokens": W.Dropdown(options=TOKEN_BUDGETS, value=1e12, description="tokens", **_style()),
        # (two rows fewer than the other multi-selects: the grad buffer control keeps the column within the
        # widget's height budget, tests/test_widget_layout.py; the rest scroll, the defaults stay in view)
        "gpus": _gpu_multiselect(charts.PLAN_GPUS, "GPU types", max_rows=PLANNER_GPU_ROWS),
        "seq": W.Dropdown(options=list(PLAN_SEQS), value=8192, description="sequence", **_style()),
        "global_batch": W.Dropdown(options=[(f"{n:,} sequences", n) for n in PLAN_GLOBAL_BATCHES],
                                   value=512,
                                   description="global batch",
                                   tooltip="global batch: sequences per optimizer step", **_style()),
        "max_gpus": W.SelectionSlider(options=list(PLAN_MAX_GPUS), value=4096,
                                      description="max GPUs", **_style()),
        "deadline": W.Dropdown(options=PLAN_DEADLINES, value=0.0, description="deadline", **_style()),
        "deadline_rule": W.Dropdown(options=PLAN_DEADLINE_RULES, value="slow_end",
                                    description="limit rule",
                                    tooltip="limit rule: a plan meets the deadline and the budget by its "
                                            "point estimates of days and cost, or by the slow end of its "
                                            "80% range", **_style()),
        "budget": W.Dropdown(options=PLAN_BUDGETS, value=0.0, description="budget", **_style()),
        "grad_buffer": W.Dropdown(options=PLAN_GRAD_BUFFERS, value=False, description="grad buffer",
                                  tooltip=PLAN_GRAD_BUFFER_HINT, **_style()),
        "choice": W.Dropdown(options=[("#1", 0)], value=0, description="front plan", **_style()),
    }
    # as wide as the figure, but never wider than the figure's side: at 1280x720 with the lab's file browser
    # open that side is narrower than the figure's 760 px, and a fixed width left the selector off screen
    # (issue 38)
    controls["choice"].layout.width = f"{FIGURE_MAX_PX[0]}px"
    controls["choice"].layout.max_width = "100%"
    if warm:                                    # (before the first view: plan()'s tables, kept by the widget)
        at = {k: w.value for k, w in controls.items()}
        gpus, buffer = tuple(at["gpus"]), check_grad_buffer_kind(at["grad_buffer"])
        for other in planner_warm_models(controls["model"].options):
            if other == at["model"]:
                continue                        # (drawn when the widget is built)
            key = (other, at["tokens"], gpus, at["seq"], at["global_batch"], at["max_gpus"], buffer)
            try:
                warmed[key] = plan(other, tokens=at["tokens"], gpus=gpus, seq=at["seq"],
                                   global_batch=at["global_batch"], max_gpus=at["max_gpus"],
                                   **_buffer(buffer))
            except ValueError:                  # (nothing fits: the pick shows the planner's message)
                continue
            in_kernel[other, gpus, at["seq"], at["global_batch"], at["max_gpus"], buffer] = None
    holder["box"] = box = Dashboard.__new__(Dashboard)
    box.__init__(render, controls, above=("choice",), name="planner_widget", keep=PLANNER_KEPT,
                 prepare=prepare)
    if spec is not None:
        def wanted() -> list:
            done = [(k[0], k[1], k[2], k[3], k[4], m, k[5]) for k, m in searched]
            return [(k, (k[0],), dict(tokens=k[1], gpus=k[2], seq=k[3], global_batch=k[4], max_gpus=k[5],
                                      **_buffer(k[6])))
                    for k in planner_ahead(box.values(), done, in_kernel)]

        watch(box, spec, wanted)
    return box


def planner_warm_models(options) -> tuple[str, ...]:
    """The models of the drop-down ``options`` whose searches :func:`planner_widget` makes when it is built
    with ``warm=True``: the mixtures of experts (a pick of one was a new search of 45-110 ms of CPU, a dense
    model's 10-50 ms). Read from the catalogue (``is_moe``), not from the names."""
    return _moe_options(options)


def _buffer(grad_buffer) -> dict:
    """``grad_buffer`` as plan()'s keyword where set (``{}`` at the default: the calls as before issue 38)."""
    return {"grad_buffer": grad_buffer} if grad_buffer is not False else {}


def _front_options(front) -> list[tuple[str, int]]:
    """The plan selector's options: one per front plan (cheapest first). Its rows as ``front.itertuples()``
    gives them, from the columns' arrays (:func:`~llmsizing.charts.plan_groups._front_rows`; issue 38: ~1 ms
    of a planner move, each of plan()'s ~30 columns copied with its attrs)."""
    import numpy as np

    from ..charts.plan_groups import _bare, _front_rows

    rows = _front_rows(_bare(front), np.arange(len(front)))
    return [(f"#{i}: {int(r.n_gpus):,} x {r.gpu}, tp={r.tp}{charts.time_money._cp_text(r)} "
             f"pp={r.pp} dp={r.dp}, "
             + (f"ep={r.ep}, " if getattr(r, "ep", 1) > 1 else "") + f"{r.days:,.1f} days, "
             f"{charts._usd(r.cost_usd)}", i - 1) for i, r in enumerate(rows, 1)]


def _set_front_options(box: Dashboard, front, choice: int, options=None) -> None:
    """Give the plan selector one option per front plan (cheapest first; ``options``: :func:`_front_options`
    already computed), keeping the chosen position (or the last one, if the front got shorter) without
    triggering another redraw."""
    sel = box.controls["choice"]
    options = _front_options(front) if options is None else options
    if list(sel.options) == options:
        return
    _set_quietly(box, sel, options=options, value=min(choice, len(options) - 1))


# ===================================================================== chapter 14: the seeds' claims, checked
def seed_audit_widget(article: str = "all") -> Dashboard:
    """Chapter 14: every recomputed seed claim, claimed against computed, with the verdict band and the
    article as controls (:func:`~llmsizing.charts.render_seed_audit`). The library values are computed once;
    moving the band only re-judges them."""
    from ..audit import BAND, audit_table

    articles = ["all"] + sorted(audit_table()["article"].unique())
    controls = {
        "band": W.FloatSlider(value=BAND, min=1.05, max=3.0, step=0.05, description="band (factor)",
                              readout_format=".2f", **_style()),
        "article": W.Dropdown(options=articles, value=article, description="article", **_style()),
    }
    return Dashboard(lambda band, article, into=None:
                     charts.render_seed_audit(band=band, article=article, into=into),
                     controls, name="seed_audit_widget", keep=KEPT_ANSWERS)

