"""The layout and global batch a mixture of experts is timed on when none is given (chapters 10 and 18; issue
35), split out of :mod:`llmsizing.stages` (session 24: it had reached the 600-line limit): the default global
batch of about 4M tokens (:data:`MOE_DEFAULT_BATCH_TOKENS`, Llama 2's: Touvron et al. 2023, Sec. 2.2) rounded
to whole micro-batches (:func:`moe_default_global_batch`), and the layout: the fastest plan of
:func:`~llmsizing.planner.plan` on the GPU count asked, else the fewest GPUs that hold a step
(:func:`~llmsizing.fewest_gpus.min_gpus`) widened by data parallelism (:func:`moe_default_layout`, its answers
kept: :func:`_kept_moe_layout`, :func:`_kept_fewest`, :func:`_kept_fastest`; several GPU types' plans in one
search: :func:`planned_together`). No formula of its own: it only
chooses among the planner's and ``min_gpus``' answers. :mod:`llmsizing.stages` (and
:mod:`llmsizing.time_cost`) re-export these names; ``tests/test_stages_moe_counts.py`` checks the kept answers
against a search per count.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math

import numpy as np

from ._validate import check_bool, check_choice, check_number
from .all_to_all import check_dispatcher, dispatcher_kwargs, node_limit
from .catalog import get_gpu, resolve_model
from .fewest_gpus import MIN_GPUS_MAX, dualpipe_fewest_accum, min_gpus
from .flops import RECOMPUTE
from .job import check_moe_options, check_step_recipe
from .layouts import _divisors
from .moe_time import SCHEDULES
from .parallel import Parallel, split_fields
from .plan_space import cp_search_kwargs
from .precision import RECIPES


#: The default global batch of a mixture of experts timed without one (:func:`moe_default_global_batch`):
#: about 4M tokens, Llama 2's (Touvron et al. 2023, arXiv:2307.09288, Sec. 2.2: "a global batch-size of 4M
#: tokens"), 2**22 so that it is 1,024 sequences of 4,096 tokens.
MOE_DEFAULT_BATCH_TOKENS = 2**22


def moe_default_global_batch(par: Parallel, *, seq: int, micro_batch: int = 1,
                             schedule: str = "1f1b") -> int:
    """Sequences per optimizer step for a mixture of experts timed without a global batch
    (:func:`training_time`, :func:`cost_by_gpu`): :data:`MOE_DEFAULT_BATCH_TOKENS` tokens rounded up to whole
    micro-batches of ``micro_batch`` on every data-parallel rank, and at least ``pp`` micro-batches (1F1B
    needs as many to fill the pipeline); with ``schedule="dualpipe"`` an even number of at least ``2 pp``
    (DualPipe's own assertions, ``dualpipe.py``; dmin49). Chapter 18."""
    per_step = micro_batch * par.dp
    m = max(par.pp, math.ceil(MOE_DEFAULT_BATCH_TOKENS / (seq * per_step)))
    if check_choice("schedule", schedule, SCHEDULES) == "dualpipe":
        m = max(m, 2 * par.pp)
        m += m % 2
    return m * per_step


def moe_default_layout(model, gpu, *, seq: int, n_gpus: int | None = None, recompute: str = "none",
                       precision: str = "bf16-mixed", ep_degrees=None, mtp_depth: int = 0,
                       capacity_factor: float | None = None, dispatcher: str = "alltoall",
                       schedule: str = "1f1b", comm_sms: int = 0, ep_overlap: float = 0.0,
                       max_nodes="model", load_skew: float | None = None, accounted_split: bool = False,
                       cp_degrees=None, cp_comm: str = "p2p"):
    """The layout a mixture of experts is timed on when none is given (:func:`_moe_default_layout`), kept
    for the last :data:`MOE_LAYOUTS_KEPT` questions (a widget that moves the tokens or the price asks the same
    one again). ``mtp_depth``, ``capacity_factor`` and ``dispatcher`` (the token dispatcher,
    :data:`~llmsizing.all_to_all.DISPATCHERS`): planned with them (issue 35, one MoE path); so are the step
    recipe's ``schedule``, ``comm_sms`` and ``load_skew`` (DualPipe too since dmin49: the plan and the
    fewest GPUs search it, at :func:`~llmsizing.fewest_gpus.dualpipe_fewest_accum` micro-batches) and the
    all-to-all's ``ep_overlap`` and ``max_nodes``
    (moeapi42; the fewest-GPU layout's tie-break, :func:`~llmsizing.fewest_gpus.min_gpus`, takes the recipe
    only: it hides nothing, and routes as the model does). ``accounted_split=True`` (cost49): a mixture of
    experts' accounted pipeline splits too, to both, as ``plan(accounted_split=True)`` searches them.
    ``cp_degrees`` and ``cp_comm``: the context-parallel degrees and K/V exchange both search (default
    :func:`~llmsizing.plan_space.default_cp_degrees`, the ring), as ``plan()`` takes them."""
    return _kept_moe_layout(*_layout_args(
        model, gpu, seq, n_gpus, recompute=recompute, precision=precision, ep_degrees=ep_degrees,
        mtp_depth=mtp_depth, capacity_factor=capacity_factor, dispatcher=dispatcher, schedule=schedule,
        comm_sms=comm_sms, ep_overlap=ep_overlap, max_nodes=max_nodes, load_skew=load_skew,
        accounted_split=accounted_split, cp_degrees=cp_degrees, cp_comm=cp_comm))


def _layout_args(model, gpu, seq, n_gpus, *, recompute="none", precision="bf16-mixed", ep_degrees=None,
                 mtp_depth=0, capacity_factor=None, dispatcher="alltoall", schedule="1f1b", comm_sms=0,
                 ep_overlap=0.0, max_nodes="model", load_skew=None, accounted_split=False, cp_degrees=None,
                 cp_comm="p2p") -> tuple:
    """:func:`moe_default_layout`'s arguments checked, as :func:`_kept_moe_layout`'s key (also
    :func:`planned_together`'s)."""
    model, gpu = resolve_model(model, moe=True), get_gpu(gpu)
    recompute = check_choice("recompute", recompute, RECOMPUTE)
    precision = check_choice("precision", precision, RECIPES)
    eps = None if ep_degrees is None else tuple(ep_degrees)
    disp = check_dispatcher(dispatcher).name                 # (only when not the default: old keys unchanged)
    options = tuple(sorted({**check_moe_options(model, mtp_depth, capacity_factor),
                            **dispatcher_kwargs(disp),
                            **check_step_recipe(schedule, comm_sms, (gpu,), searched=True,
                                                load_skew=load_skew, model=model,
                                                capacity_factor=capacity_factor),
                            **routing_kwargs(ep_overlap, max_nodes),
                            # (plan()'s and min_gpus' accounted splits; only when asked: old keys unchanged)
                            **({"accounted_split": True} if check_bool("accounted_split", accounted_split)
                               else {}),
                            **cp_search_kwargs(cp_degrees, cp_comm, seq)}.items()))     # (likewise)
    return model, gpu, seq, n_gpus, recompute, precision, eps, options


#: The all-to-all's keywords :func:`routing_kwargs` gives (plan's, step_time's; not min_gpus').
ROUTING_KEYS = ("ep_overlap", "max_nodes")


def routing_kwargs(ep_overlap=0.0, max_nodes="model") -> dict:
    """``ep_overlap`` (0 to 1) and ``max_nodes`` (``"model"``, ``None`` or a node count) checked as
    :func:`~llmsizing.layouts.step_time` and :func:`~llmsizing.planner.plan` check them, as keywords: only
    those not at their defaults (``{}`` for 0 and ``"model"``: an old call's keywords; moeapi42)."""
    share = check_number("ep_overlap", ep_overlap, maximum=1.0)
    nodes = node_limit(max_nodes)
    return {**({"ep_overlap": share} if share else {}), **({"max_nodes": nodes} if nodes != "model" else {})}


#: How many of :func:`moe_default_layout`'s answers are kept.
MOE_LAYOUTS_KEPT = 256


@functools.lru_cache(maxsize=MOE_LAYOUTS_KEPT)
def _kept_moe_layout(model, gpu, seq, n_gpus, recompute, precision, ep_degrees, options=()):
    return _moe_default_layout(model, gpu, seq=seq, n_gpus=n_gpus, recompute=recompute, precision=precision,
                               ep_degrees=ep_degrees, **dict(options))


@functools.lru_cache(maxsize=MOE_LAYOUTS_KEPT)
def _kept_fewest(model, gpu, seq, recompute, precision, moe_items=(), max_gpus=None):
    """:func:`_moe_default_layout`'s fewest-GPU layout of one sequence
    (:func:`~llmsizing.fewest_gpus.min_gpus`'s ``parallel``), or ``None`` when no layout holds it (with
    ``max_gpus``: none of at most that many GPUs). Kept: the same question comes once per GPU count that
    ``plan()`` leaves without an exact fit (issue 38: chapter 10's chart asked it three times a move for
    DeepSeek-V3 on the H100, ~70 ms each)."""
    items = dict(moe_items)
    # (DualPipe: the micro-batches that let every pp it runs, its memory the same for all: dmin49)
    accum = {"grad_accum": dualpipe_fewest_accum(model)} if items.get("schedule") == "dualpipe" else {}
    try:
        return min_gpus(model, gpu, batch=1, seq=seq, recompute=recompute, precision=precision, **items,
                        **accum, **({} if max_gpus is None else {"max_gpus": max_gpus})).parallel
    except ValueError:
        return None


@functools.lru_cache(maxsize=MOE_LAYOUTS_KEPT)
def _kept_fastest(model, gpu, seq, gb, recompute, precision, moe_items, counts) -> _Fastest:
    """:func:`_moe_default_layout`'s search: the fastest plan (the least ``step_time_s``, the first in the
    table's order on a tie, as ``idxmin``) on each GPU count of ``plan()``'s table at global batch ``gb`` on
    the GPU ``counts`` only (``gpu_counts``, up to the largest; a :class:`_Fastest`); a ``ValueError`` when
    ``plan()`` refuses. Kept: each count of the search asks again."""
    got = _together.get((model, gpu, seq, gb, recompute, precision, moe_items, counts))
    if got is not None:                      # (planned with other GPU types: planned_together)
        return got
    return _Fastest(_fastest_rows(model, (gpu,), seq, gb, recompute, precision, moe_items, counts),
                    model.layers, dict(moe_items).get("cp_comm", "p2p"))


def _fastest_rows(model, gpus: tuple, seq, gb, recompute, precision, moe_items, counts):
    """:func:`_kept_fastest`'s ``plan()`` table, of the GPU types ``gpus`` (one, or
    :func:`planned_together`'s several)."""
    from .planner import plan

    return plan(model, tokens=1e12, gpus=tuple(g.name for g in gpus), seq=seq, global_batch=gb,
                max_gpus=max(counts), gpu_counts=counts, recomputes=(recompute,), precision=precision,
                explain=False, **dict(moe_items))


#: :func:`planned_together`'s answers while it lasts: :func:`_kept_fastest`'s key to its :class:`_Fastest`.
_together: dict = {}


@contextlib.contextmanager
def planned_together(model, gpu_counts, *, seq: int, **layout_kw):
    """Within it, the fastest plans :func:`moe_default_layout` reads for the GPU types and counts
    ``gpu_counts`` (``(gpu, n_gpus)`` pairs; ``layout_kw``: the rest of its keywords, the same for all) come
    from one ``plan()`` per global batch for all the GPU types that share it (and its counts), not one per
    GPU type: :func:`~llmsizing.time_cost.cost_by_gpu` on DeepSeek-V3 with DualPipe over the catalogue makes
    4 searches instead of 21 (dual50). The same answers bit for bit: a plan's rows, step times and order
    are its GPU's own whichever GPU types are searched beside it (each GPU's block priced alone,
    :func:`~llmsizing.plan_pricing.kept_price`; ``tests/test_cost_together.py``). A group that ``plan()``
    refuses, and a GPU type with no row in it, are left to their own search, as before."""
    _together.clear()
    try:                                     # (interrupted while planning: nothing left kept)
        groups = {}
        for gpu, n in gpu_counts:
            try:
                model_, gpu_, seq_, n_, recompute, precision, eps, options = _layout_args(
                    model, gpu, seq, n, **layout_kw)
            except ValueError:               # (refused for this GPU: moe_default_layout says so itself)
                continue
            key = _fastest_key(model_, gpu_, seq_, n_, recompute, precision, eps, dict(options))
            if key is not None:
                groups.setdefault(key[:1] + key[2:], []).append(gpu_)
        for (model_, *rest), gpus in groups.items():
            if len(gpus) < 2:
                continue
            try:
                rows = _fastest_rows(model_, tuple(gpus), *rest)
            except ValueError:               # (e.g. more plans than one call weighs: each GPU's own, then)
                continue
            names = rows["gpu"].to_numpy()
            for g in gpus:
                mine = rows[names == g.name]
                if len(mine):
                    _together[(model_, g, *rest)] = _Fastest(mine, model_.layers,
                                                             dict(rest[4]).get("cp_comm", "p2p"))
        yield
    finally:
        _together.clear()


def _sharing(gb: int, seq: int) -> tuple:
    """The GPU counts whose :func:`_moe_default_layout` global batch is ``gb`` at ``seq`` tokens: the divisors
    ``d`` of ``gb`` with ``d x ceil(MOE_DEFAULT_BATCH_TOKENS / (seq d)) = gb``."""
    return tuple(d for d in _divisors(gb) if d * math.ceil(MOE_DEFAULT_BATCH_TOKENS / (seq * d)) == gb)


class _Fastest:
    """:func:`_kept_fastest`'s answer: ``fastest.get(n)`` is ``(parallel, micro_batch)`` of the fastest plan
    on ``n`` GPUs of the table (``rows[rows["n_gpus"] == n]``'s ``step_time_s.idxmin()``: the least, NaN
    skipped, the first in the table's order on a tie), or ``None``. Those rows are kept, not the table. With
    ``layers`` (the model's), the layout has the planner's split of them
    (:func:`~llmsizing.parallel.split_fields`: a ``pp`` alone names it, as in
    :meth:`~llmsizing.job.Job.from_plan_row`): an accounted or a DualPipe uneven split was timed as an even
    split with the remainder on the first stages before cost49. ``cp_comm``: the search's K/V exchange
    (plan() has no column of it), the layout's wherever ``cp > 1`` (an all-gather search was timed as the
    ring before)."""

    COLUMNS = ("tp", "cp", "pp", "dp", "zero", "sp", "ep", "micro_batch")

    def __init__(self, rows, layers: int | None = None, cp_comm: str = "p2p"):
        self._row, self._cols, self._layers, self._cp_comm = {}, {}, layers, cp_comm
        if not len(rows):                                    # (plan()'s empty table: object columns)
            return
        n, step = rows["n_gpus"].to_numpy(), rows["step_time_s"].to_numpy(dtype=float)
        order = np.lexsort((np.where(np.isnan(step), np.inf, step), n))     # (stable: ties in table order)
        first = order[np.r_[True, n[order][1:] != n[order][:-1]]]
        self._row = {int(k): j for j, k in enumerate(n[first].tolist())}
        self._cols = {c: rows[c].to_numpy()[first].tolist() for c in self.COLUMNS}

    def get(self, n: int):
        if n not in self._row:
            return None
        tp, cp, pp, dp, zero, sp, ep, micro = (self._cols[c][self._row[n]] for c in self.COLUMNS)
        split = {} if self._layers is None else split_fields(self._layers, int(pp))
        exchange = {"cp_comm": self._cp_comm} if int(cp) > 1 else {}
        return (Parallel(tp=int(tp), cp=int(cp), pp=int(pp), dp=int(dp), zero=int(zero), sp=bool(sp),
                         ep=int(ep), **split, **exchange), int(micro))


def _fastest_key(model, gpu, seq, n_gpus, recompute, precision, ep_degrees, options: dict):
    """:func:`_kept_fastest`'s arguments for ``n_gpus`` GPUs (:func:`_moe_default_layout`'s search): its
    global batch and the GPU counts that share it, or ``None`` above
    :data:`~llmsizing.planner.MAX_GLOBAL_BATCH`."""
    from .planner import MAX_GLOBAL_BATCH

    gb = n_gpus * math.ceil(MOE_DEFAULT_BATCH_TOKENS / (seq * n_gpus))
    if gb > MAX_GLOBAL_BATCH:
        return None
    moe_kw = {**({} if ep_degrees is None else {"ep_degrees": ep_degrees}), **options}
    return model, gpu, seq, gb, recompute, precision, tuple(sorted(moe_kw.items())), _sharing(gb, seq)


def _moe_default_layout(model, gpu, *, seq: int, n_gpus: int | None = None, recompute: str = "none",
                        precision: str = "bf16-mixed", ep_degrees=None, **options):
    """The layout a mixture of experts is timed on when none is given (:func:`training_time`), as
    ``(parallel, global_batch, micro_batch)``, or ``None`` when there is none. With ``n_gpus``: the fastest
    plan of :func:`~llmsizing.planner.plan` (one GPU type, ``recompute`` only) that uses exactly ``n_gpus``,
    at a global batch of :data:`MOE_DEFAULT_BATCH_TOKENS` tokens rounded up to a multiple of ``n_gpus``
    sequences (so that every data-parallel degree the GPUs allow divides it); if none does, the fewest-GPU
    layout below widened by data parallelism when ``n_gpus`` is a multiple of its GPUs. Without: the fewest
    GPUs that hold a step of one sequence (:func:`~llmsizing.fewest_gpus.min_gpus`, its own expert-parallel
    search), at :func:`moe_default_global_batch`. ``ep_degrees``: the expert-parallel degrees searched
    (default: every divisor of the routed experts). ``options``: ``mtp_depth``, ``capacity_factor`` and
    ``dispatcher``, given to both; ``schedule``, ``comm_sms`` (both) and ``ep_overlap``, ``max_nodes`` (the
    plan only). Chapter 18."""
    moe_kw = {**({} if ep_degrees is None else {"ep_degrees": ep_degrees}), **options}
    few_kw = {k: v for k, v in moe_kw.items() if k not in ROUTING_KEYS}      # (min_gpus: not these two)

    def fewest(limit=None):
        return _kept_fewest(model, gpu, seq, recompute, precision, tuple(sorted(few_kw.items())), limit)

    schedule = options.get("schedule", "1f1b")
    if n_gpus is None:
        par = fewest()
        return None if par is None else (par, moe_default_global_batch(par, seq=seq, schedule=schedule), 1)
    if (key := _fastest_key(model, gpu, seq, n_gpus, recompute, precision, ep_degrees, options)) is not None:
        # One search answers every GPU count of this global batch (issue 35: chapter 10's chart asks seven
        # counts), of those counts alone (plan(gpu_counts=), issue 35/38: a count d asks for gb only if d
        # divides gb and d x ceil(tokens / (seq d)) = gb, so the search up to gb's 4,096 GPUs priced ~12x the
        # plans any count reads): plan()'s plans on n GPUs are, bit for bit and in order, those of its search
        # up to n or any larger limit (:func:`~llmsizing.plan_rank.plans_within`, tests/test_planner.py), so
        # their fastest is the same, and the counts and limit are a function of gb alone. Where it refuses
        # (more plans than one call weighs), the search of n_gpus alone.
        try:
            fastest = _kept_fastest(*key)
        except ValueError:
            fastest = _kept_fastest(*key[:-1], (n_gpus,))
        if (best := fastest.get(n_gpus)) is not None:
            return best[0], key[3], best[1]
    # (only a fewest-GPU layout of at most n_gpus GPUs can divide n_gpus: min_gpus searched up to n_gpus finds
    # the same layout when it has at most n_gpus GPUs, and none otherwise, weighing fewer layouts; issue 35,
    # chapter 10's chart: 35 -> ~20 ms for DeepSeek-V3's three counts below its 244 GPUs on the H100)
    one = fewest(min(n_gpus, MIN_GPUS_MAX))
    if one is None or n_gpus % one.gpus:
        return None
    par = dataclasses.replace(one, dp=one.dp * (n_gpus // one.gpus))
    return par, moe_default_global_batch(par, seq=seq, schedule=schedule), 1
