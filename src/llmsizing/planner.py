"""The planner: how many GPUs, how long, how much (Part III, "How many GPUs do you need?").

:func:`plan` searches GPU type x layout (tp, cp, pp, dp, ZeRO stage, sequence parallelism) x micro-batch x
recomputation for the runs that fit in memory and reach a global batch, and gives each its step time, MFU,
days and cost. It adds no formula of its own:

* memory is :func:`~llmsizing.memory.training_memory`'s per-GPU peak (the most loaded GPU), the same number
  the memory chapters and :func:`~llmsizing.fewest_gpus.min_gpus` use. Within one layout it is linear in the
  micro-batch (activations) and in ``1 / (dp x cp)`` (ZeRO's shards), so a few evaluations give it for every
  micro-batch and ``dp`` at once (NumPy), and the layouts share them: the activations do not depend on the
  ZeRO stage, ``ep`` or ``dp``, nor the model states on the recomputation or the micro-batch
  (:class:`~llmsizing.plan_memory.SearchMemory`, issue 33: Qwen3-30B-A3B at 64K weighs its 676 layouts in
  about 1,200 calls instead of 7,200); ``tests/test_planner.py`` and ``tests/test_plan_memory.py`` check
  returned rows and the shared coefficients against direct calls;
* time is :func:`~llmsizing.layouts.step_time` (the slowest stage's compute at ``kernel_efficiency`` of the
  dense peak, default each GPU generation's calibrated one, the pipeline bubble, and what each group's
  communication (:func:`~llmsizing.comm.communication`, on each GPU's node) cannot hide), worked out for all
  the plans at once (:func:`~llmsizing.plan_pricing._price`: the library called once per piece that many plans
  share, NumPy for the rest; ``tests/test_planner_speed.py`` checks whole searches against one ``step_time``
  per plan), one GPU type at a time, each GPU's block kept between searches
  (:func:`~llmsizing.plan_pricing.kept_price`: a search that adds a GPU type prices that one only);
* where only full recomputation fits, the fewest layers per stage that fit (partial recomputation,
  Megatron-LM's block method; issue 23): the memory is affine in them, so
  :func:`~llmsizing.plan_pricing._least_recompute_layers` solves for them in closed form, and each per-layer
  piece of the step time is the no-recomputation one plus the recomputed share of what full recomputation adds
  (:func:`~llmsizing.plan_pricing._price`);
* days and cost follow from the step time as in :func:`~llmsizing.time_cost.training_time`, and carry the
  80% range of an MFU predicted from a layout, measured by leaving one source out
  (:func:`~llmsizing.mfu.layout_range_factors`; the frame's ``attrs["range_area"]`` names its area of
  ``data/intervals.csv``, ``attrs["range_rows"]`` its row per GPU and ``attrs["stack"]`` the stack family;
  ``attrs["range_notes"]``, per GPU whose kernel efficiency is a stand-in, that no calibrated range applies,
  :func:`~llmsizing.mfu_inputs.layout_range_note`).
"""

from __future__ import annotations

import functools

import numpy as np

from ._compat import paused_gc
from ._compat import retire as _retire
from ._validate import (check_bool, check_choice, check_fraction, check_int, check_number, check_sequence,
                        renamed)
from .activations import ATTENTION, STACKS
from .catalog import gpu_price, resolve_gpus, resolve_model, resolve_prices
from .flops import RECOMPUTE, training_flops_per_token
from .frameworks import stack_family, tp_backward_overlap_of
from .layouts import MAX_GPUS_PER_NODE, USABLE_FRACTION, _divisors
from .footprint import check_grad_buffer_kind
from .memory import OPTIMIZER_IMPLS
from .network import get_node
from .hardware import check_recipe_runs_on
from .job import check_moe_options, check_step_recipe, takes_job
from .model import Model
from .all_to_all import check_dispatcher, dispatcher_kwargs, node_limit
from .moe_layouts import ep_candidates
from .moe_time import shared_expert_params
from .parallel import MAX_PP, check_layout
from .plan_dualpipe import dualpipe_rows
from .plan_fits import fitting_plans
# from the search's table to plan()'s answer (days, cost, the limits, the front, attrs) lives in plan_frame
from .plan_frame import NoPlanError, answer_frame, nothing_fits, recipe_text  # noqa: F401
from .plan_memory import SearchMemory, kept_search_memory  # noqa: F401
# the ranking of plans (ties at 12 digits, the Pareto front) lives in plan_rank
from .plan_rank import (DEADLINE_RULES, DEFAULT_DEADLINE_RULE, _digits, _lex_orders, _pareto,  # noqa: F401
                        _ranks, _taken, budget_kept, budget_rule_text, deadline_kept, deadline_rule_text,
                        interleaving_winners,
                        meets_deadline, pipelined_zero_winners, plans_where, plans_within, within_budget)
# the interleaved chunks a stage may take live with the candidates
from .plan_candidates import (MAX_VIRTUAL_STAGES, VIRTUAL_STAGES, moe_layout_passes,  # noqa: F401
                              stage_chunk_options)
# the vectorised arithmetic lives in plan_pricing; its names stay importable from here
from .plan_pricing import (_DP_SLOTS, _cp_coefficients, _dp_exposed, _dp_slot, _groups,  # noqa: F401
                           moe_ep_coefficients, _least_recompute_layers, _memory_coefficients,
                           _one_layer_coefficients, _partial_coefficients, _price,
                           _kept_blocks, kept_price,
                           _total_bytes, pipeline_degrees, pipeline_split)
# the frame's columns, the search's bounds and defaults, and a row's recomputation live in plan_space
from .plan_space import (CP_DEGREES, CP_MIN_SEQ, CP_MIN_TOKENS_PER_RANK, MAX_GLOBAL_BATCH,  # noqa: F401
                         MAX_LAYOUTS, MAX_MOE_PLANS, MAX_PLANS, MOE_PLAN_COLUMNS, PLAN_COLUMNS,
                         SEARCH_ORDER, check_cp_search, check_global_batch, check_recomputes,
                         default_cp_degrees, recompute_kwargs, recompute_label)
from .precision import OPTIMIZERS, RECIPES, compute_dtype


@functools.lru_cache(maxsize=32)
def _search(model, gpu_list, seq, global_batch, max_gpus, micros, rcs, zeros, precision, optimizer, attention,
            stack, frac, eff, overlap, prices, nodes, max_pp, optimizer_impl="foreach", cps=(1,),
            cp_comm="p2p", eps=(1,), expert_tp=False, max_nodes=None, ep_overlap=0.0, partial=False,
            vps=(1,), shard_pp=False, shared=False, options=(), counts=None, grad_buffer=False,
            dispatcher="alltoall", recipe=(), accounted=False):
    """:func:`plan`'s search, everything that does not depend on the token budget, the deadline or the budget:
    the plans that fit, each with its step time and MFU (arguments validated by :func:`plan`; ``prices`` as
    sorted (name, price) pairs). None when nothing fits. Kept for the last 32 sets of arguments: changing only
    the tokens, the deadline or the budget (the planner widget's token drop-down) then costs milliseconds
    instead of the search's 0.1-0.5 s. The cached table is shared: :func:`plan` copies it before adding
    columns. ``options``: ``plan()``'s MTP module and token dropping as sorted pairs
    (:func:`llmsizing.job.check_moe_options`; none by default). ``counts``: ``plan(gpu_counts=)``, sorted (the
    GPU limit is then the largest count, at most ``max_gpus``). ``grad_buffer``: ``plan()``'s (in the memory
    keywords only when on: the default search's keywords as before). ``recipe``: ``plan()``'s ``schedule``
    and ``comm_sms`` as sorted pairs (:func:`llmsizing.job.check_step_recipe`; none by default), for the
    pricing only (they move no bytes)."""
    import pandas as pd

    kw = dict(seq=seq, precision=precision, optimizer=optimizer, attention=attention, stack=stack,
              optimizer_impl=optimizer_impl, **dict(options))
    if grad_buffer:
        kw["grad_buffer"] = grad_buffer
    # DualPipe (dual48): its layouts only, each rank's memory its two stages' (plan_moe.option_pieces)
    dualpipe = dict(recipe).get("schedule") == "dualpipe"
    if dualpipe:
        kw["schedule"] = "dualpipe"
    model_flops_step = training_flops_per_token(model, seq=seq) * global_batch * seq
    node_of = dict(nodes)
    domains = {g.name: node_of[g.name].scaleup_domain_gpus for g in gpu_list}

    tps = tuple(sorted({t for d in set(domains.values()) for t in _divisors(d)}))
    layouts = list(_kept_layouts(model, tps, max_pp, zeros, eps, expert_tp, shard_pp, vps, accounted,
                                 dualpipe))

    # (a mixture of experts' ep degrees multiply the layouts, and are bounded by the divisors of its experts)
    n_layouts, most_layouts = len({lay[:3] for lay in layouts}), MAX_LAYOUTS * (1 + shard_pp)
    if n_layouts * len(rcs) > most_layouts:
        raise ValueError(
            f"plan() would weigh {n_layouts:,} layouts x {len(rcs)} recomputations of {model.name}, more "
            f"than the {most_layouts:,} it searches in one call: lower max_pp={max_pp} (its {model.layers:,} "
            "layers have many divisors), or give fewer zero_stages, recomputes or gpus_per_node")

    # a mixture of experts, ZeRO-0 or ZeRO-1 without a pipeline: A + B / ep in every piece
    # (moe_ep_coefficients)
    by_ep = model.is_moe and len(eps) > 2 and optimizer_impl == "foreach"
    memory = kept_search_memory(model, tuple(sorted(kw.items())), cps, cp_comm, eps, expert_tp, by_ep)
    cols, total_bytes = fitting_plans(model, layouts, memory, gpu_list=gpu_list, domains=domains,
                                      limits=np.array([frac * g.memory_bytes for g in gpu_list]),
                                      global_batch=global_batch, max_gpus=_count_limit(max_gpus, counts),
                                      micros=micros, cps=cps, counts=counts,
                                      rcs=rcs, partial=partial, expert_tp=expert_tp,
                                      most=MAX_MOE_PLANS if model.is_moe else MAX_PLANS,
                                      in_all=4 if shard_pp else 2)
    if cols is not None and dualpipe:        # (DualPipe's own assertions: an even m >= 2 pp)
        cols, total_bytes = dualpipe_rows(cols, total_bytes)
    if cols is None:
        return None
    # (each GPU's block kept: a search that adds a GPU type prices the new one only)
    step_s, peak = kept_price(model, gpu_list, cols, seq=seq, eff=eff, overlap=overlap, precision=precision,
                              node_of=node_of, cp_comm=cp_comm, rcs=rcs, expert_tp=expert_tp,
                              max_nodes=max_nodes, ep_overlap=ep_overlap, shared=shared, **dict(options),
                              **dispatcher_kwargs(dispatcher), **dict(recipe))
    price_of = dict(prices)
    names = np.array([g.name for g in gpu_list], dtype=object)
    gi, tp, cp, pp, dp = cols["gpu"], cols["tp"], cols["cp"], cols["pp"], cols["dp"]
    n_gpus = tp * cp * pp * dp
    # (the columns built as arrays, mfu too, and the frame once: the same values as pandas' column
    # arithmetic, element by element, for a fraction of its overhead; issue 35)
    rl = cols["rl"]
    df = pd.DataFrame({
        "gpu": _strings(names, gi), "n_gpus": n_gpus, "dp": dp, "tp": tp, "cp": cp, "pp": pp,
        **({"ep": cols["ep"]} if model.is_moe else {}),
        "virtual_stages": cols["vp"], "zero": cols["zero"], "sp": tp > 1, "micro_batch": cols["micro"],
        "grad_accum": cols["m"],
        "recompute": _strings(np.array(rcs, dtype=object), cols["rc"]),
        # (what pd.Series(rl).where(rl >= 0).astype("Int64") gives, 1 under the mask too, built directly)
        "recompute_layers": pd.arrays.IntegerArray(np.where(rl >= 0, rl, 1).astype(np.int64), rl < 0),
        "memory_per_gpu_bytes": total_bytes,
        "capacity_bytes": np.array([float(g.memory_bytes) for g in gpu_list])[gi], "step_time_s": step_s,
        "price": np.array([float(price_of[g.name]) for g in gpu_list])[gi], "peak": peak,
        "mfu": model_flops_step / (step_s * n_gpus * peak),
        # (each plan's GPU as an index into gpu_list: plan_frame.answer_frame reads it instead of looking
        # the names up; not one of plan()'s columns)
        "gpu_index": gi}, copy=False)
    # (kept with the search: plan() reads it on every call)
    df["listed"] = interleaving_winners(df) & pipelined_zero_winners(df)
    return df


def _strings(values: np.ndarray, at: np.ndarray):
    """``values[at]`` (``values`` a few strings, as an object array) as the string array pandas makes of
    those strings, taken from the few (plan42: the frame's ``str`` column without checking each plan's
    string, ~0.5 ms a column of 35,000 plans)."""
    import pandas as pd

    return pd.Series(values).array.take(at)


def _check_counts(gpu_counts, max_gpus) -> tuple:
    """``plan(gpu_counts=)`` checked and sorted without repeats: a list or tuple (a set or an array also
    serves) of GPU counts of at least 1, none above ``max_gpus``: a count above it is refused, naming its
    index, not dropped (review23b L2)."""
    try:
        items = check_sequence("gpu_counts", gpu_counts, example="(512, 1024)")
    except TypeError:
        raise TypeError(f"gpu_counts must be a list or tuple of GPU counts, e.g. (512, 1024); got "
                        f"{type(gpu_counts).__name__} {gpu_counts!r}") from None
    counts = [check_int(f"gpu_counts[{i}]", n) for i, n in enumerate(items)]
    for i, n in enumerate(counts):
        if max_gpus is not None and n > max_gpus:
            raise ValueError(f"gpu_counts[{i}]: {n:,} is above max_gpus={max_gpus:,}; raise max_gpus or drop "
                             "the count")
    return tuple(sorted(set(counts)))


def _count_limit(max_gpus, counts):
    """The GPU limit of a search of ``counts`` only (``plan(gpu_counts=)``): the largest count, at most
    ``max_gpus``. Its plans on a count are the search's at ``max_gpus`` on it, bit for bit and in order
    (:func:`~llmsizing.plan_rank.plans_within`: a search's plans on at most ``n`` GPUs are its search at
    ``n``)."""
    if counts is None:
        return max_gpus
    return counts[-1] if max_gpus is None else min(max_gpus, counts[-1])


@functools.lru_cache(maxsize=64)
def _kept_layouts(model, tps, max_pp, zeros, eps, expert_tp, shard_pp, vps, accounted=False,
                  dualpipe=False) -> tuple:
    """:func:`_search`'s layouts ``(tp, pp, zero, ep, v)`` that the model and the engines allow (``v``:
    interleaved chunks per stage, dense only), in the search's order, for the tensor-parallel degrees ``tps``
    (those of the GPUs' scale-up domains). Kept (issue 35): they depend on neither the global batch, the GPU
    limit nor the GPUs' memory, and chapter 10's chart searches a mixture of experts at four global batches
    a move (~150 check_layout calls each for DeepSeek-V3). ``dualpipe`` (dual48): the even ``pp`` from 2
    up, uneven splits too (:func:`~llmsizing.plan_stage_terms.pipeline_degrees`), no interleaved chunks."""
    layouts, checked = [], {}
    for tp in tps:
        for pp in pipeline_degrees(model, max_pp, accounted, dualpipe):
            try:
                check_layout(model, tp=tp, pp=pp)
            except ValueError:
                continue
            for zero in zeros:
                if zero >= 2 and pp > 1 and (model.is_moe or not shard_pp):   # (PIPELINED_FSDP: opt-in)
                    continue
                for ep in eps:                            # (1,) for a dense model
                    # (refused: zero=3 with ep > 1, an expert width tp does not divide)
                    if model.is_moe and not moe_layout_passes(checked, model, tp=tp, pp=pp, zero=zero, ep=ep,
                                                              expert_tp=expert_tp):
                        continue
                    places = (model.layers + 2 * bool(pipeline_split(model, pp))) // pp
                    for v in stage_chunk_options(places, vps) if pp > 1 and not dualpipe else (1,):
                        layouts.append((tp, pp, zero, ep, v))
    return tuple(layouts)


def _clear_search(tables=_search.cache_clear) -> None:
    """``_search.cache_clear()``: the kept searches, the GPUs' priced blocks they kept
    (:func:`~llmsizing.plan_pricing.kept_price`) and their layouts (:func:`_kept_layouts`), so a search after
    it starts from scratch, as before the blocks were kept (``_search.clear_tables()`` clears the searches
    alone)."""
    tables()
    _kept_blocks.cache_clear()
    _kept_layouts.cache_clear()


_search.clear_tables, _search.cache_clear = _search.cache_clear, _clear_search


@takes_job("plan")
@paused_gc
def plan(model: Model | str, *, tokens: float, gpus=("H100 SXM",), seq: int, global_batch: int,
         max_gpus: int | None = None, deadline_days: float | None = None, budget_usd: float | None = None,
         micro_batches=(1, 2, 4), recomputes=RECOMPUTE, zero_stages=(0, 1, 2, 3),
         precision: str = "bf16-mixed", optimizer: str = "adamw", attention: str = "flash",
         stack: str = "fused", usable_fraction: float = USABLE_FRACTION,
         kernel_efficiency: float | None = None, overlap: float | None = None, prices: dict | None = None,
         gpus_per_node: int | None = None, inter_node_gbps: float | None = None, max_pp: int = 64,
         explain: bool = True, optimizer_impl: str = "foreach", compute_efficiency: float | None = None,
         cp_degrees=None, cp_comm: str = "p2p", ep_degrees=None, expert_tp: bool = False, max_nodes="model",
         ep_overlap: float = 0.0, partial_recompute: bool = True, framework: str | None = None,
         virtual_stages=VIRTUAL_STAGES, deadline_rule: str | None = None,
         shard_under_pipeline: bool = False, shared_expert_overlap: bool = False, mtp_depth: int = 0,
         capacity_factor: float | None = None, gpu_counts=None, grad_buffer: bool | str = False,
         dispatcher: str = "alltoall", schedule: str = "1f1b", comm_sms: int = 0,
         accounted_split: bool = False, load_skew: float | None = None,
         tp_backward_overlap: bool | None = None):
    """Every plan that trains ``model`` on ``tokens`` tokens of length ``seq`` with a global batch of
    ``global_batch`` sequences on one of ``gpus``, as a pandas DataFrame
    (:data:`~llmsizing.plan_space.PLAN_COLUMNS`), cheapest first.

    Searched: ``tp`` among the divisors of each GPU's scale-up domain (its node's, or ``gpus_per_node``) that
    the model's heads allow (sequence parallelism on whenever ``tp > 1``), ``pp`` among the divisors of the
    layer count up to ``max_pp`` (Megatron-LM's even split) and, for a dense model, those of the layers plus
    two, the embedding and the loss each counted as a layer's place (Megatron-LM's
    ``--account-for-embedding/loss-in-pipeline-split``, Llama 3 405B's 16 stages:
    :func:`~llmsizing.plan_pricing.pipeline_split`), each with ``virtual_stages`` interleaved chunks per stage
    (issue 34; :func:`~llmsizing.plan_candidates.stage_chunk_options`: 1 and, by default, every count of
    equal chunks, vp38, with ``grad_accum`` a multiple of ``pp`` as Megatron-LM's interleaved schedule needs;
    the bubble, the other stages' compute over ``v m`` (``(pp - 1) / (v m)`` of the compute for equal stages;
    session 39), the micro-batches in flight and the ``2 m v`` sends are those of
    :func:`~llmsizing.layouts.step_time` and :func:`~llmsizing.memory.training_memory`; an interleaved plan is
    listed only where no plan of the same layout, GPU, micro-batch and ``dp`` is as fast and as light:
    :func:`~llmsizing.plan_rank.interleaving_winners`; partial recomputation counts layers per model chunk and
    is searched on even splits, for an autocast recipe without interleaving only; not for a mixture of
    experts), ZeRO stages ``zero_stages`` (2 and 3 only without a pipeline, unless ``shard_under_pipeline``;
    see below), micro-batches ``micro_batches`` and, for each, ``dp`` such that
    ``global_batch = micro_batch x grad_accum x dp`` with whole numbers and ``grad_accum >= pp`` (fewer
    micro-batches than stages leave most of the pipeline idle), ``tp x pp x dp`` at most ``max_gpus``; context
    parallelism ``cp`` among ``cp_degrees`` (default :func:`~llmsizing.plan_space.default_cp_degrees`: none
    below :data:`~llmsizing.plan_space.CP_MIN_SEQ` tokens, up to 32 at long context, each leaving a rank at
    least :data:`~llmsizing.plan_space.CP_MIN_TOKENS_PER_RANK` tokens; a given tuple is searched as is, each
    degree dividing ``seq`` into ``2 cp`` chunks), with K and V exchanged as ``cp_comm`` says
    (:data:`~llmsizing.parallel.CP_COMMS`: the ring ``"p2p"``, Megatron-LM's default, or ``"all_gather"``;
    Ulysses' ``"a2a"``, limited by the heads, is not searched), ``tp x cp x pp x dp`` GPUs in all. For each
    layout and micro-batch only the lightest recomputation in ``recomputes`` that fits is kept (heavier
    recomputation costs time and buys nothing once it fits). A plan fits when its most loaded GPU's total
    (:func:`~llmsizing.memory.training_memory`) is at most ``usable_fraction`` of the GPU's memory.

    **Partial recomputation** (issue 23; ``partial_recompute=True``, the default, for a dense model): where
    only ``"full"`` fits, the plan recomputes the fewest layers of each pipeline stage that make it fit,
    Megatron-LM's ``--recompute-method block --recompute-num-layers N``
    (``recompute="full", recompute_layers=N`` in :func:`~llmsizing.memory.training_memory` and
    :func:`~llmsizing.layouts.step_time`), found in closed form for every GPU and ``dp`` at once
    (:func:`~llmsizing.plan_pricing._least_recompute_layers`: the memory is affine in ``N``). It reruns ``N``
    of the stage's layers instead of all of them, so such a plan is never slower than the same layout with
    full recomputation. The ``recompute_layers`` column holds ``N`` for ``"full"`` (the stage's layers when
    every layer is recomputed) and ``<NA>`` for ``"none"`` and ``"selective"`` (and for a mixture of experts,
    which recomputes the whole model or nothing). ``partial_recompute=False`` recomputes every layer, as
    before. Not searched: partial recomputation where ``"selective"`` already fits (a few recomputed layers
    can rerun fewer FLOPs than selective recomputation at long context; the planner keeps its lightest-first
    order), and a mixture of experts (partial recomputation of one is not modelled).

    **torchtitan's op-level selective checkpointing** (issue 34; ``recomputes`` holding ``"op-sac"`` or
    ``"op-sac-sdpa-rerun"``, :data:`~llmsizing.parallel.OP_SAC_MODES`; never in the default search) is tried
    in :data:`~llmsizing.plan_space.SEARCH_ORDER`, after selective and before full recomputation, on every
    layout whose ``tp`` divides the KV heads, with tensor, sequence and context parallelism too (sac32;
    :func:`~llmsizing.op_sac.op_sac_layer_bytes`); the layouts it cannot split try the rest of
    ``recomputes``. A model or recipe it does not price (a mixture of experts, biased projections, an
    autocast or FP8 recipe, eager attention) is refused with a ``ValueError`` naming ``recomputes``
    (:func:`~llmsizing.plan_space.check_recomputes`).

    Time: :func:`~llmsizing.layouts.step_time` on each GPU's node (``data/nodes.csv``; ``gpus_per_node`` and
    ``inter_node_gbps`` override it), at ``kernel_efficiency`` (default: each GPU generation's calibrated one;
    ``compute_efficiency=`` is its old name, deprecated), with communication hidden group by group (or a share
    ``overlap`` of it, if given). The memory assumes ``precision`` and ``optimizer_impl``; the frame's
    ``attrs["assumes"]`` says which, so that a reader can see the recipe.

    ``mfu`` is the model FLOPs over the GPUs' dense peak for the step time; ``days``/``cost_usd`` follow, with
    ``_low``/``_high`` bounds from the 80% range of an MFU predicted from a layout (that of ``framework``'s
    stack family if given, :func:`~llmsizing.mfu.layout_range_factors`; a GPU without BF16, the
    V100, runs the recipe in FP16 at its FP16 peak: :func:`~llmsizing.hardware.dense_tflops`; an FP8
    ``precision`` runs at the FP8 peak, efficiency and band, :func:`~llmsizing.precision.compute_dtype`, and
    refuses a GPU without FP8 tensor cores). ``pareto`` marks the plans on the time-vs-cost front (one per
    tie: the one with the least memory per GPU). ``deadline_days`` and ``budget_usd`` drop plans beyond
    them, both by one rule, ``deadline_rule``: a plan meets them by the slow end of its 80% range,
    ``days_high`` and ``cost_usd_high`` (``"slow_end"``, the default since issue 34:
    :data:`~llmsizing.plan_rank.DEFAULT_DEADLINE_RULE`; the two are one slow run), or by its point estimates
    ``days`` and ``cost_usd`` (``deadline_rule="estimate"``, the old default); with a deadline the frame has a
    ``meets_deadline`` column (``"yes"``: met at the slow end; ``"likely"``: by the point estimate only), with
    a budget a ``within_budget`` column (the same of ``cost_usd_high`` and ``cost_usd``), and
    ``attrs["deadline_rule"]`` / ``attrs["budget_rule"]`` name the rule, as :class:`NoPlanError`'s message
    does.
    ``price_kind`` says what each plan's price is (:func:`~llmsizing.catalog.price_kind_of`): a plan priced at
    an ``"estimate"`` is ranked by it but marked, never passed off as a list price (issue 38).

    When no plan survives, raises :class:`NoPlanError` (a ``ValueError``) saying why (nothing fits, or the
    fastest/cheapest plan misses the deadline/budget, with its figures). ``explain=False`` returns the empty
    frame instead. Taught in the "How many GPUs do you need?" chapter; the command line's ``plan`` calls it.

    **A mixture of experts** (issue 24; chapter 18) is searched over expert parallelism too: ``ep`` among the
    divisors of its routed experts (or ``ep_degrees``, each of which must divide them), for every ``dp`` with
    ``ep`` dividing ``tp x cp x dp / etp`` (the expert-parallel group made of the layout's own GPUs, inside
    the data-parallel and tensor-parallel ranks as Megatron-Core's expert grid puts it; with ``tp = cp = 1``,
    ``dp`` a multiple of ``ep``), ZeRO-3 left out with ``ep > 1`` (not modelled). The experts are not split by
    tensor parallelism unless ``expert_tp=True`` (:class:`~llmsizing.parallel.Parallel`). Memory is
    :func:`~llmsizing.memory.training_memory`'s (:func:`llmsizing.moe.moe_model_states`: the routed experts'
    ZeRO shards over the expert-data-parallel GPUs); time adds the all-to-all
    (:func:`llmsizing.moe.ep_all_to_all`) with the routing's node limit ``max_nodes`` (``"model"``: the
    model's own, :func:`llmsizing.moe_layouts.route_max_nodes`, 4 nodes for DeepSeek-V3; ``None``: no limit)
    and ``dispatcher`` (``"alltoall"``: ``k`` copies a token; ``"deepep"``), exposed but for the share
    ``ep_overlap`` (0 to 1; 0 by default, as Megatron-Core's all-to-all overlap is off by default, and 1 for
    DualPipe: :func:`~llmsizing.layouts.step_time` says why); the FLOPs and the MFU are the active
    parameters'. The frame then has an ``ep`` column (:data:`~llmsizing.plan_space.MOE_PLAN_COLUMNS`). A
    dense model refuses ``ep_degrees`` above 1 and ``expert_tp``. ``shared_expert_overlap=True`` builds every
    layout with :attr:`~llmsizing.parallel.Parallel.shared_expert_overlap` (the shared experts' GEMMs beside
    each all-to-all, :func:`llmsizing.moe_time.shared_overlap_exposed_s`; a model without shared experts is
    refused), so a row is ``step_time`` of that layout. Off by default, as in Megatron-Core
    (``moe_shared_expert_overlap=False``: the shared experts run after the routed ones): a training stack must
    be told to, of the published MoE runs only DeepSeek-V2 states it, and the all-to-all's SMs slowing the
    GEMMs beside it are not priced, so the option errs fast. ``mtp_depth`` (DeepSeek-V3's
    multi-token-prediction modules on the last stage) and ``capacity_factor`` (token dropping; ``None``:
    dropless) are priced as ``training_memory`` and ``step_time`` price them (:mod:`llmsizing.plan_moe`).

    ``accounted_split=True`` (moeapi42; off by default, a mixture of experts only: a dense search has it
    always) also searches a mixture of experts on the ``pp`` that divide ``layers + 2`` but not the layers,
    Megatron-LM's accounted split (:func:`~llmsizing.plan_pricing.pipeline_split`: the first and the last
    stage one layer fewer; Qwen3-235B's 94 layers: pp 3, 4, 6, 8, 12, 16, 24, 32, 48 besides 1, 2, 47;
    DeepSeek-V3's 61: 3, 7, 9, 21, not its own 16 stages, which no rule of Megatron's gives), each row
    ``training_memory`` and ``step_time`` of that layout (``Parallel(account_for_embedding=True,
    account_for_loss=True)``; ``tests/test_moe_recipe_paths.py``). Its cost: ``benchmarks/README.md``.

    ``schedule`` and ``comm_sms`` (moeapi42, issue 35: the recipe ``step_time`` takes, for any model): the
    pipeline schedule, ``"1f1b"`` (default) or ``"zb1p"`` (zero bubble, plain pipelines only: no interleaved
    chunks are searched), and the SMs each GPU's communication kernels keep (0 by default; DeepSeek-V3: 20 of
    132, every GPU in ``gpus`` must have a known SM count above it), priced as ``step_time`` prices them
    (:func:`~llmsizing.plan_pricing._price`; ``tests/test_moe_one_step.py``); neither changes the memory.
    ``"dualpipe"`` (dual48; DeepSeek-V3 report, arXiv:2412.19437, Sec. 3.2.1) searches only the layouts
    DualPipe runs: an even ``pp`` of at least 2 (rank ``i`` holds stages ``i`` and ``pp - 1 - i``), an even
    ``grad_accum`` of at least ``2 pp``, no interleaved chunks, no partial recomputation, and besides
    Megatron-LM's splits every even ``pp`` whose layers split into equal middle stages and lighter first and
    last ones (:func:`~llmsizing.parallel.uneven_split`: DeepSeek-V3's 16 stages of 3, fourteen 4s, 2; a
    row's split is :func:`~llmsizing.parallel.pipeline_split` of its ``pp``, as
    :meth:`~llmsizing.job.Job.from_plan_row` builds it); each row's memory is each rank's two stages
    (:mod:`llmsizing.memory_dualpipe`) and its step ``step_time(schedule="dualpipe")``'s, its bubble
    DualPipe's order laid out on the row's stage times (:mod:`llmsizing.plan_dualpipe`;
    ``tests/test_plan_dualpipe.py``). It costs more than 1F1B's search: ``benchmarks/README.md``.
    ``load_skew`` (a mixture of experts'
    measured load skew in place of :func:`~llmsizing.moe_time.load_skew`'s default, 1 to 64; not with
    ``capacity_factor``): every row's, as ``step_time(load_skew=)`` prices it.
    ``tp_backward_overlap`` (plan44): the backward's TP collectives hidden behind the column-parallel
    layers' dgrad and wgrad GEMMs, as ``step_time(tp_backward_overlap=)`` prices them (``_price``);
    ``None`` (default): as ``framework``'s stack does (:func:`~llmsizing.frameworks.tp_backward_overlap_of`:
    the Megatron family does; no stack named, exposed as before).

    ``shard_under_pipeline=True`` (issue 34; off by default) also searches ZeRO-2 and ZeRO-3 under a pipeline
    for a dense model, ZeRO-3 as Meta ran Llama 3 405B (:data:`~llmsizing.pipeline_schedule.PIPELINED_FSDP`),
    priced as :func:`~llmsizing.layouts.step_time` and :func:`~llmsizing.memory.training_memory` price it,
    listed where no plan of the same GPUs, micro-batch and ``dp`` is as fast and as light. Off because the
    default follows Megatron-Core, whose pipelines shard the optimizer only (``--use-distributed-optimizer``;
    ``--use-torch-fsdp2`` asserts ``pipeline_model_parallel_size == 1``), and because it doubles the search
    for little: 0.1 MFU point for Llama 3.1 405B on 16,384 H100s at the 90% line; over the published-layout
    runs it moves 19 of 97 planner picks (0.1-3.3 MFU points up) and the planner-layout check 86.6% -> 85.6%
    inside. torchtitan shards under a pipeline by default (FSDP2, ``reshard_after_forward=False``): turn it on
    for such stacks and memory-tight pipelines (``usable_fraction=0.99`` finds Meta's 405B layout, TP8 PP16
    DP128, no recomputation). A mixture of experts is not searched this way.

    The search itself, everything but the token budget, the deadline and the budget, is kept for the last 32
    settings (:func:`_search`): asking again with another token budget costs milliseconds.

    ``gpu_counts`` (issue 35/38; default: every count up to ``max_gpus``): the plans on these GPU counts only,
    searched up to the largest; a count above ``max_gpus`` is refused (ValueError naming its index). Each
    is, column for column and in the same order, the row the search of every count gives
    (:func:`~llmsizing.plan_rank.plans_within`;
    ``tests/test_plan_gpu_counts.py``), and only those rows are weighed and priced, so a question about a few
    cluster sizes costs a fraction of the whole search; ``pareto`` is then the front of the rows returned.
    Chapter 10's chart reads its counts so (:func:`~llmsizing.stages.moe_default_layout`).

    ``grad_buffer=True`` (issue 38; off by default): the DDP and ZeRO-1 layouts keep their gradients in a
    persistent buffer, alive at every phase's peak (:func:`~llmsizing.memory.training_memory`'s
    ``grad_buffer``: Megatron-Core's grad buffer, in FP32 with ``precision="bf16-mixed-fp32-grads"``;
    PyTorch DDP's buckets, ``"ddp-copy"`` its default with the ``.grad`` tensors apart: GRAD_BUFFERS in
    :mod:`~llmsizing.footprint`); ZeRO-2 and 3 layouts free theirs as before. ``attrs["assumes"]`` says so."""
    import pandas as pd

    model = resolve_model(model, moe=True)
    tokens = check_number("tokens", tokens, allow_equal=False)
    seq = check_int("seq", seq)
    global_batch = check_global_batch(global_batch)
    stack_fam = stack_family(framework)                  # a typo fails here, not after the search
    eps = ep_candidates(model, ep_degrees)
    expert_tp = check_bool("expert_tp", expert_tp)
    if expert_tp and not model.is_moe:
        raise ValueError(f"expert_tp=True splits routed experts, but {model.name!r} is dense (experts=0)")
    max_nodes = node_limit(max_nodes)
    ep_overlap = check_number("ep_overlap", ep_overlap, maximum=1.0)
    dispatcher = check_dispatcher(dispatcher).name
    if check_bool("shared_expert_overlap", shared_expert_overlap):
        shared_expert_params(model)                   # (refused without shared experts)
    options = check_moe_options(model, mtp_depth, capacity_factor)     # ({} by default: the search as before)
    gpu_list = [check_recipe_runs_on(precision, g) for g in resolve_gpus(gpus,
                                                                         example='("H100 SXM", "A100 80GB")')]
    # (DualPipe searched too since dual48: plan_dualpipe; searched=False, as a given layout's check)
    recipe = check_step_recipe(schedule, comm_sms, gpu_list, load_skew=load_skew, model=model,
                               capacity_factor=capacity_factor)           # ({} by default: as before)
    if tp_backward_overlap_of(framework, tp_backward_overlap):     # (Megatron's stack: plan44)
        recipe = {**recipe, "tp_backward": True}
    dualpipe = recipe.get("schedule") == "dualpipe"
    # (DualPipe: training_memory refuses partial recomputation with it, so it is not searched; dual48)
    partial = check_bool("partial_recompute", partial_recompute) and not model.is_moe and not dualpipe
    accounted = check_bool("accounted_split", accounted_split) and model.is_moe    # (a dense search has it)
    shard_pp = check_bool("shard_under_pipeline", shard_under_pipeline) and not model.is_moe
    if shard_pp and dualpipe:
        raise ValueError("shard_under_pipeline=True with schedule='dualpipe': DualPipe's ranks keep whole "
                         "stages (its ZeRO-2/3 under a pipeline is not modelled); give one of them")
    grad_buffer = check_grad_buffer_kind(grad_buffer)
    vps = None if virtual_stages is None else tuple(sorted({check_int("virtual_stages[i]", v) for v in
                                                           check_sequence("virtual_stages", virtual_stages,
                                                                          example="(1, 2, 4)")}))
    if model.is_moe:
        if vps is not None and vps != (1,):
            raise ValueError(f"virtual_stages={vps}: interleaved pipelines of a mixture of experts are not "
                             "searched (its stages' dense and MoE layers move with the chunks): give (1,) or "
                             "None")
        vps = (1,)
    if recipe.get("schedule") in ("zb1p", "dualpipe") and vps != (1,):   # (no interleaved chunks)
        if virtual_stages is not VIRTUAL_STAGES:
            raise ValueError(f"virtual_stages={vps}: schedule={recipe['schedule']!r} has no interleaved "
                             "chunks: give (1,) or leave virtual_stages out")
        vps = (1,)
    rule = None if deadline_rule is None else check_choice("deadline_rule", deadline_rule, DEADLINE_RULES)
    deadline_rule = DEFAULT_DEADLINE_RULE if rule is None else rule
    columns = MOE_PLAN_COLUMNS if model.is_moe else PLAN_COLUMNS
    columns += (() if deadline_days is None else ("meets_deadline",)) + (() if budget_usd is None else
                                                                          ("within_budget",))
    max_gpus = None if max_gpus is None else check_int("max_gpus", max_gpus)
    counts = None if gpu_counts is None else _check_counts(gpu_counts, max_gpus)
    deadline = None if deadline_days is None else check_number("deadline_days", deadline_days,
                                                               allow_equal=False)
    budget = None if budget_usd is None else check_number("budget_usd", budget_usd, allow_equal=False)
    micros = sorted({check_int("micro_batches[i]", b) for b in
                     check_sequence("micro_batches", micro_batches, example="(1, 2, 4)")})
    zeros = sorted({check_int("zero_stages[i]", z, minimum=0, maximum=3) for z in
                    check_sequence("zero_stages", zero_stages, example="(0, 1, 3)")})
    frac = check_fraction("usable_fraction", usable_fraction)
    eff = renamed("kernel_efficiency", kernel_efficiency, "compute_efficiency", compute_efficiency)
    eff = None if eff is None else check_fraction("kernel_efficiency", eff)
    overlap = None if overlap is None else check_number("overlap", overlap, maximum=1.0)
    if gpus_per_node is not None:
        check_int("gpus_per_node", gpus_per_node, maximum=MAX_GPUS_PER_NODE)
    if inter_node_gbps is not None:
        inter_node_gbps = check_number("inter_node_gbps", inter_node_gbps, allow_equal=False)
    nodes = tuple((g.name, get_node(None, g, gpus_per_node=gpus_per_node, inter_node_gbps=inter_node_gbps))
                  for g in gpu_list)
    for name, nd in nodes:
        check_int(f"the scale-up domain of {name}'s node", nd.scaleup_domain_gpus, maximum=MAX_GPUS_PER_NODE)
    optimizer_impl = check_choice("optimizer_impl", optimizer_impl, OPTIMIZER_IMPLS)
    max_pp = check_int("max_pp", max_pp, maximum=MAX_PP)
    cps, cp_comm = check_cp_search(cp_degrees, cp_comm, seq)     # (min_gpus' too; Ulysses not searched)
    check_bool("explain", explain)
    given = resolve_prices(prices, gpu_list)
    prices = {g.name: given[g.name] if g.name in given else gpu_price(g, name="prices") for g in gpu_list}
    # checked here, not only inside the search: a cached search would skip its checks (and True == 1 hits the
    # entry kept for 1)
    precision = check_choice("precision", precision, RECIPES)
    dtype = compute_dtype(precision)          # an FP8 recipe is timed and priced at the FP8 peak
    if dtype == "fp8":
        for g in gpu_list:
            if g.fp8_dense_tflops is None:
                raise ValueError(f"precision={precision!r} runs its matrix multiplies in FP8, and the "
                                 f"{g.name} in gpus has no FP8 tensor cores: leave it out of gpus or use a "
                                 "16-bit recipe")
    optimizer = check_choice("optimizer", optimizer, OPTIMIZERS)
    attention = check_choice("attention", attention, ATTENTION)
    stack = check_choice("stack", stack, STACKS)
    rcs = check_recomputes(model, recomputes, cps=cps, precision=precision, attention=attention, stack=stack)
    steps = tokens / (global_batch * seq)
    args = (model, tuple(gpu_list), seq, global_batch, max_gpus, tuple(micros), tuple(rcs), tuple(zeros),
            precision,
            optimizer, attention, stack, frac, eff, overlap, tuple(sorted(prices.items())), nodes, max_pp,
            optimizer_impl, cps, cp_comm)
    if model.is_moe:                            # (a dense model's search is called as before)
        args += (eps, expert_tp, max_nodes, ep_overlap)
    # (the default search is called as before: main's, without the keywords left off)
    more = {k: on if type(on) is str else True for k, on in (("partial", partial), ("shard_pp", shard_pp),
                                  ("shared", shared_expert_overlap), ("grad_buffer", grad_buffer)) if on}
    if vps != (1,):
        more["vps"] = vps
    if options:
        more["options"] = tuple(sorted(options.items()))
    if counts is not None:
        more["counts"] = counts
    more.update(dispatcher_kwargs(dispatcher) if model.is_moe else {})
    if recipe:
        more["recipe"] = tuple(sorted(recipe.items()))
    if accounted:
        more["accounted"] = True
    try:
        hash(args)
    # an unhashable argument: not cached; the search rejects it with its own message
    except TypeError:
        df = _search.__wrapped__(*args, **more)
    else:
        df = _search(*args, **more)
    if df is None:
        if not explain:
            return pd.DataFrame(columns=list(columns))
        raise nothing_fits(model, micros=micros, seq=seq, gpu_list=gpu_list, frac=frac, max_gpus=max_gpus,
                           counts=counts, global_batch=global_batch, cps=cps)
    assumes = recipe_text(model, precision=precision, optimizer=optimizer, optimizer_impl=optimizer_impl,
                          eff=eff, overlap=overlap, cps=cps, cp_comm=cp_comm, eps=eps, expert_tp=expert_tp,
                          ep_overlap=ep_overlap, shared_expert_overlap=shared_expert_overlap, options=options,
                          max_nodes=max_nodes, dispatcher=dispatcher, grad_buffer=grad_buffer, recipe=recipe)
    return answer_frame(df, gpu_list=gpu_list, given=given, dtype=dtype, framework=framework,
                        stack_fam=stack_fam, tokens=tokens, steps=steps, deadline=deadline, budget=budget,
                        rule=rule, deadline_rule=deadline_rule, explain=explain, columns=columns,
                        max_gpus=max_gpus, cp_comm=cp_comm, assumes=assumes, moe=model.is_moe)


# Retired (issue 21, warned since issue 32): the planner's old fixed compute efficiency and overlap share.
__getattr__ = _retire(__name__, {
    "COMPUTE_EFFICIENCY": (0.5, "hardware.kernel_efficiency(gpu, dtype), or plan(kernel_efficiency=...)"),
    "OVERLAP": (None,
                "layouts.exposed_by_group (plan hides communication group by group), or plan(overlap=...)")})
