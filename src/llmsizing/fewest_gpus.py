"""The fewest GPUs that hold a training step, and the layout that does it (:func:`min_gpus`; chapter 8, "3D
layouts"; chapter 11's cost per GPU type; chapter 18). Moved out of :mod:`llmsizing.layouts` (which forwards
``min_gpus``, ``MIN_GPUS_MAX`` and ``STAGE_RUNS_KEPT`` with a :class:`DeprecationWarning`, session 23): a
mixture of experts' layouts are weighed on the planner's arrays (:mod:`llmsizing.fewest_arrays`), which sit
above the step model, so the search sits above them too and :mod:`llmsizing.layouts` imports none of it.
"""

from __future__ import annotations

import functools
import math

from ._validate import check_bool, check_choice, check_fraction, check_int, renamed
from .all_to_all import check_dispatcher, dispatcher_kwargs
from .catalog import resolve_model
from .fewest_arrays import smallest_dps, supports
from .hardware import check_recipe_runs_on
from .job import check_moe_options, check_step_recipe
from .layouts import MAX_GPUS_PER_NODE, Plan, _divisors, step_time
from .model import Model
from .moe_layouts import dp_unit, ep_candidates, heavy_stages
from .network import get_node
from .parallel import MAX_PP, check_layout, kept_parallel, pipeline_split
from .plan_moe import dualpipe_rank_memory
from .plan_space import check_cp_search, default_cp_degrees
from .plan_stage_terms import pipeline_degrees, search_stages
from .states import USABLE_FRACTION


#: How many stage evaluations :func:`_stage_runs` keeps.
STAGE_RUNS_KEPT = 8192


def _stage_runs(model, par, stages, kw: dict) -> tuple:
    """:func:`~llmsizing.memory.training_memory` of the pipeline ``stages`` of layout ``par`` (``kw``: its
    other arguments), kept (issue 35): the memory does not depend on the GPU, so :func:`min_gpus` on each GPU
    type of :func:`~llmsizing.time_cost.cost_by_gpu` weighs a layout once, not once per GPU type."""
    return _kept_stage_runs(model, par, tuple(stages), tuple(sorted(kw.items())))


@functools.lru_cache(maxsize=STAGE_RUNS_KEPT)
def _kept_stage_runs(model, par, stages: tuple, kw_items: tuple) -> tuple:
    from .memory import training_memory

    kw = dict(kw_items)
    if kw.get("schedule") == "dualpipe":      # (DualPipe's memory counts every rank, its two stages each)
        # (training_memory's ranks from the planner's kept sides, bit for bit: dual50)
        return tuple(dualpipe_rank_memory(model, par, **kw))
    return tuple(training_memory(model, parallel=par, _all_stages=True, _stages=stages, **kw))


def _smallest_dp(par, limit: float, kw: dict, model, unit: int = 1, stages=None, first=None) -> int | None:
    """The smallest ``dp`` for which every piece of the first and last pipeline stages' steps
    (:func:`~llmsizing.memory.step_phases`) fits ``limit`` with the default allowance, or ``None`` if no
    ``dp`` does. Each piece is ``fixed + sharded / dp`` (ZeRO divides the sharded states by ``dp``), read off
    ``dp = 1`` and ``dp = 2``. With Megatron-LM's even split the first stage (the embedding, the most
    micro-batches in flight) or the last (the LM head, the logits) is the most loaded, as the planner also
    assumes (``tests/test_planner.py`` checks it against every stage): two stages, not ``pp``, per evaluation.
    With Megatron-LM's accounted split the second stage too (``stages``:
    :func:`~llmsizing.plan_stage_terms.search_stages`, the planner's; GPT-3 175B's second of 7 outweighs the
    first).

    A mixture of experts with expert parallelism: every ``dp`` is a multiple of ``unit``
    (:func:`llmsizing.moe_layouts.dp_unit`), the pieces are read off ``dp = unit`` and ``2 unit`` (the
    experts' ZeRO shards over ``edp``, proportional to ``dp``), the answer is a multiple of ``unit``, and
    ``stages`` are :func:`llmsizing.moe_layouts.heavy_stages`. ``first``: ``par(unit)`` when the caller has
    it."""
    from .memory import peak_room_bytes

    room = peak_room_bytes(limit)                # total = FIXED + (1 + F) x peak (states.peak_room_bytes)
    a = unit
    first = par(a) if first is None else first          # (one checked layout, not three)
    stages = (0, first.pp - 1) if stages is None else stages
    if first.zero == 0:
        return a if _dp_terms(model, first, None, stages, kw) <= room else None
    dp = 1
    for t1, fixed, sharded in _dp_terms(model, first, par(2 * a), stages, kw):
        if t1 <= room:
            continue
        if fixed >= room or sharded <= 0:
            return None
        dp = max(dp, math.ceil(sharded / (room - fixed) - 1e-9))
    return dp if a == 1 else a * math.ceil(dp / a)


def _dp_terms(model, first, second, stages, kw: dict):
    """What :func:`_smallest_dp` reads of the pipeline ``stages`` of layouts ``first`` (``dp = a``) and
    ``second`` (``dp = 2 a``; ``None`` without ZeRO: then the largest piece), each piece's ``(bytes at dp =
    a, fixed, sharded)``. It does not depend on the GPU, only the room it is compared with does, so it is
    kept (cost49: :func:`~llmsizing.time_cost.cost_by_gpu` asks the same layouts on every GPU type)."""
    return _kept_dp_terms(model, first, second, tuple(stages), tuple(sorted(kw.items())))


@functools.lru_cache(maxsize=STAGE_RUNS_KEPT)
def _kept_dp_terms(model, first, second, stages: tuple, kw_items: tuple):
    kw = dict(kw_items)
    one = _stage_runs(model, first, stages, kw)
    if second is None:
        return max(v for r in one for v in r.pieces_bytes.values())
    a = first.dp
    out = []
    for r1, r2 in zip(one, _stage_runs(model, second, stages, kw)):
        p2 = r2.pieces_bytes
        for k, t1 in r1.pieces_bytes.items():
            t2 = p2[k]
            out.append((t1, 2 * t2 - t1, 2 * a * (t1 - t2)))        # a piece is fixed + sharded / dp
    return tuple(out)


def _fits_from(dp: int, top: int, fits) -> int | None:
    """The smallest ``d`` in ``[dp, top]`` with ``fits(d)`` (memory only falls as ``dp`` grows), or ``None``:
    ``dp`` itself almost always (it was solved for); otherwise doubling, then bisection, so that a
    floating-point edge costs a few evaluations, never one per GPU up to ``max_gpus``."""
    if dp > top:
        return None
    if fits(dp):
        return dp
    lo, hi = dp, dp                               # not fits(lo)
    while True:
        hi = min(2 * hi, top)
        if fits(hi):
            break
        if hi == top:
            return None
        lo = hi
    while hi - lo > 1:                            # not fits(lo), fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def dualpipe_fewest_accum(model: Model | str) -> int:
    """The fewest micro-batches per step with which DualPipe runs every pipeline degree
    :func:`min_gpus` searches for ``model`` with ``schedule="dualpipe"``: twice the largest of them
    (``dualpipe.py`` asserts ``num_chunks >= num_ranks * 2``; DeepSeek-V3's 61 layers: pp up to 16, 32).
    DualPipe's memory is the same for every even count of at least ``2 pp``
    (:mod:`llmsizing.memory_dualpipe`: each rank's ``pp + 1`` micro-batches in flight), so the fewest GPUs at
    this count are the fewest at any: the count :func:`~llmsizing.time_cost.cost_by_gpu` and
    :func:`~llmsizing.moe_default.moe_default_layout` ask with (dmin49). ``accounted_split`` does not move
    it: the even divisors of an odd ``layers + 2`` are none, and of an even one at most the layers."""
    model = resolve_model(model, moe=True)
    return 2 * max(pipeline_degrees(model, MAX_PP, dualpipe=True), default=1)


def _dualpipe_degrees(model, grad_accum: int, offload: bool, accounted: bool = False) -> list[int]:
    """The pipeline degrees :func:`min_gpus` searches with ``schedule="dualpipe"`` (dmin49), the planner's
    (:func:`~llmsizing.plan_stage_terms.pipeline_degrees` with ``dualpipe``: even, from 2, uneven splits
    too, as :func:`~llmsizing.plan_dualpipe.dualpipe_rows` keeps them) up to ``grad_accum / 2``
    (DualPipe's own assertions: ``grad_accum`` even and at least ``2 pp``); a ``ValueError`` naming
    ``grad_accum`` (at least 4) or ``offload`` (not searched with DualPipe, as ``plan()`` does not).
    ``accounted``: a mixture of experts' accounted splits too (:func:`min_gpus`'s ``accounted_split``)."""
    if offload:
        raise ValueError("offload=True with schedule='dualpipe': ZeRO-Offload under DualPipe is not searched "
                         "(plan(schedule='dualpipe') does not either); give offload=False")
    if grad_accum % 2 or grad_accum < 4:
        raise ValueError(f"schedule='dualpipe' needs an even grad_accum >= 2 pp >= 4 (DualPipe's own "
                         f"assertions; the pp searched are those up to grad_accum / 2, every one of "
                         f"{model.name}'s with grad_accum={dualpipe_fewest_accum(model)}), got "
                         f"grad_accum={grad_accum}")
    return [p for p in pipeline_degrees(model, MAX_PP, accounted, dualpipe=True) if 2 * p <= grad_accum]


#: The GPUs :func:`min_gpus` searches up to by default (its ``max_gpus``).
MIN_GPUS_MAX = 65536


def min_gpus(model: Model | str, gpu, *, batch: int, seq: int, grad_accum: int = 1,
             precision: str = "bf16-mixed", optimizer: str = "adamw", attention: str = "flash",
             recompute: str = "none", stack: str = "fused", usable_fraction: float = USABLE_FRACTION,
             gpus_per_node: int | None = None, inter_node_gbps: float | None = None,
             kernel_efficiency: float | None = None, max_gpus: int = MIN_GPUS_MAX, offload: bool = False,
             optimizer_impl: str = "foreach", node=None, mfu: float | None = None, ep_degrees=None,
             expert_tp: bool = False, mtp_depth: int = 0, capacity_factor: float | None = None,
             dispatcher: str = "alltoall", schedule: str = "1f1b", comm_sms: int = 0,
             load_skew: float | None = None, accounted_split: bool = False, cp_degrees=None,
             cp_comm: str = "p2p", _count_only: bool = False) -> Plan:
    """The smallest number of ``gpu`` whose most loaded GPU holds a training step of micro-batch ``batch``
    (sequences of ``seq`` tokens, ``grad_accum`` micro-batches per step) within ``usable_fraction`` of its
    memory, and a layout that does it (a :class:`Plan`).

    Layouts tried: ``tp`` from the divisors of the node's scale-up domain (``node``, default the GPU's in
    ``data/nodes.csv``, or ``gpus_per_node``, at most :data:`MAX_GPUS_PER_NODE`) that the
    model allows (tensor parallelism stays inside a node), with sequence parallelism whenever ``tp > 1``;
    ``pp`` up to :data:`~llmsizing.parallel.MAX_PP` among those :func:`~llmsizing.planner.plan` searches
    (:func:`~llmsizing.plan_stage_terms.pipeline_degrees`): the divisors of the layer count (Megatron-LM's
    even split) and, for a dense model, those of the layers plus two, each split as the planner splits it
    (:func:`~llmsizing.parallel.pipeline_split`: Megatron-LM's accounted split, the embedding and the loss
    each a layer's place, Llama 3 405B's 7, fourteen 8s, 7; its first full stage weighed too,
    :func:`~llmsizing.plan_stage_terms.search_stages`), so that the count is never above the fewest GPUs of
    ``plan()``'s rows at the same micro-batch (``tests/test_fewest_accounted.py``; before issue 35's one
    answer per question it tried the even split only: GPT-3 175B on 64 H100s where 56 hold it); context
    parallelism ``cp`` as :func:`~llmsizing.planner.plan` searches it (issue 35): among ``cp_degrees``
    (default :func:`~llmsizing.plan_space.default_cp_degrees`: none below 16,384 tokens, so nothing changes
    there; up to 32 at long context, each rank keeping at least 4,096 tokens; a given tuple searched as is),
    K and V exchanged as ``cp_comm`` says (the ring ``"p2p"`` or ``"all_gather"``; both checked by
    :func:`~llmsizing.plan_space.check_cp_search`, ``plan()``'s check), with any ``tp``, ``pp`` and ZeRO
    stage, ``tp x cp x pp x dp`` GPUs (``tests/test_fewest_cp.py``: Llama 3.1 405B at 128K on 128 H100s, tp 4,
    cp 32, ZeRO-3, where ``cp = 1`` needs 168 to 1,008 by the micro-batches in flight); ZeRO stages
    0-3 (2 and 3 only without a pipeline; sharded over ``dp x cp``); with ``offload=True`` (a bool) also
    ZeRO-Offload's layouts. For each, :func:`~llmsizing.memory.training_memory` is
    linear in ``1 / dp`` (ZeRO divides the sharded states by ``dp``; nothing else depends on it), so the
    smallest ``dp`` is solved for from two evaluations and then checked. Among the layouts with the fewest
    GPUs, the one with the shortest pessimistic step (:attr:`Plan.step_s`, from :func:`step_time` with no
    overlap, at ``kernel_efficiency``: default the calibrated one; ``mfu=`` is its old name) wins; ties go to
    the simpler layout (smaller ``tp``, ``pp``, ZeRO stage, ``cp``). ``optimizer_impl`` is the optimizer
    step's implementation (:data:`~llmsizing.memory.OPTIMIZER_IMPLS`: PyTorch's default ``"foreach"`` or the
    smaller ``"fused"``).

    A mixture of experts (issue 24; chapter 18) also tries expert parallelism: ``ep`` among the divisors of
    its routed experts (or ``ep_degrees``), ``dp`` a multiple of what ``ep`` needs (``ep`` divides
    ``tp x cp x dp / etp``: :class:`~llmsizing.parallel.Parallel`), no ZeRO-3 with ``ep > 1``, the routed
    experts split by tensor parallelism only with ``expert_tp`` (as :func:`~llmsizing.planner.plan` searches
    them); the step time that breaks ties includes the all-to-all with the model's node limit
    (:func:`llmsizing.all_to_all.route_max_nodes` of each layout). ``accounted_split=True`` (a bool; off by
    default and read for a mixture of experts only, as :func:`~llmsizing.planner.plan` takes it: a dense
    search has it always) also tries a mixture of experts' accounted splits (Qwen3-30B-A3B's 48 layers on 10
    stages of 4, eight 5s, 4). A dense model refuses ``ep_degrees``
    above 1 and ``expert_tp``. ``mtp_depth`` and ``capacity_factor`` (issue 35) go to every
    ``training_memory`` and ``step_time`` call, as :func:`~llmsizing.planner.plan` takes them; ``dispatcher``
    (the MoE token dispatcher, :data:`~llmsizing.all_to_all.DISPATCHERS`) to the ``step_time`` that breaks
    ties (it moves no bytes of memory); ``schedule`` (``"1f1b"``, ``"zb1p"`` or ``"dualpipe"``), ``comm_sms``
    (the SMs communication kernels keep) and ``load_skew`` likewise (moeapi42:
    :func:`~llmsizing.job.check_step_recipe`).

    ``schedule="dualpipe"`` (dmin49, issue 35: one answer per question) searches only what DualPipe runs, by
    :func:`~llmsizing.planner.plan`'s rules (:mod:`llmsizing.plan_dualpipe`): ``pp`` from
    :func:`~llmsizing.plan_stage_terms.pipeline_degrees` with ``dualpipe`` (even, from 2, DeepSeek-V3's 16
    stages of 3, fourteen 4s, 2 among them: :func:`~llmsizing.parallel.uneven_split`) up to ``grad_accum / 2``
    (``grad_accum`` even and at least 4, else a ``ValueError`` naming it; :func:`dualpipe_fewest_accum` lets
    every ``pp``), ZeRO 0 or 1, no offloading (refused), no interleaving or partial recomputation; each
    layout's memory ``training_memory(schedule="dualpipe")``'s, every rank's two stages, its tie-breaking step
    ``step_time(schedule="dualpipe")``'s. DualPipe's memory does not depend on ``grad_accum`` beyond which
    ``pp`` it allows (each rank holds ``pp + 1`` micro-batches, arXiv:2412.19437 Table 2), so the count is the
    smallest ``n_gpus`` of ``plan(schedule="dualpipe")`` on the same model, GPU and recipe with
    ``micro_batches=(batch,)``, ``recomputes=(recompute,)``, the same ``cp_degrees``, ``max_pp`` at most
    ``grad_accum / 2`` and a ``global_batch`` that is a multiple of the answer's
    ``batch x grad_accum x dp`` (``tests/test_fewest_dualpipe.py``). Its cost: ``benchmarks/README.md``.

    Raises ``ValueError`` if no layout fits within ``max_gpus`` (for example when one layer's activations
    alone outgrow the GPU: lower ``batch`` or ``seq``, or recompute). Taught in chapter 8.

    ``_count_only=True`` (private; dual50): the count alone, an ``int``, the answer's ``gpus``, without the
    tie-break's ``step_time`` calls (:func:`~llmsizing.time_cost.cost_by_gpu` times a mixture of experts on
    the fastest plan of that many GPUs and reads nothing else of the answer); the same refusals.
    """
    from .memory import peak_room_bytes, training_memory
    model = resolve_model(model, moe=True)
    eps = ep_candidates(model, ep_degrees)
    expert_tp = check_bool("expert_tp", expert_tp)
    if expert_tp and not model.is_moe:
        raise ValueError(f"expert_tp=True splits routed experts, but {model.name!r} is dense (experts=0)")
    g = check_recipe_runs_on(precision, gpu)
    batch, seq, m = check_int("batch", batch), check_int("seq", seq), check_int("grad_accum", grad_accum)
    cps, cp_comm = check_cp_search(cp_degrees, cp_comm, seq)        # (plan()'s: (1,) below 16K by default)
    frac = check_fraction("usable_fraction", usable_fraction)
    if gpus_per_node is not None:
        check_int("gpus_per_node", gpus_per_node, maximum=MAX_GPUS_PER_NODE)
    nd = get_node(node, g, gpus_per_node=gpus_per_node, inter_node_gbps=inter_node_gbps)
    per_node = check_int("the node's scale-up domain", nd.scaleup_domain_gpus, maximum=MAX_GPUS_PER_NODE)
    eff = renamed("kernel_efficiency", kernel_efficiency, "mfu", mfu)
    max_gpus = check_int("max_gpus", max_gpus)
    offload = check_bool("offload", offload)
    limit = frac * g.memory_bytes
    kw = dict(batch=batch, seq=seq, grad_accum=m, precision=precision, optimizer=optimizer,
              attention=attention, recompute=recompute, stack=stack, optimizer_impl=optimizer_impl)
    options = check_moe_options(model, mtp_depth, capacity_factor)          # ({} by default: as before)
    kw.update(options)
    disp = check_dispatcher(dispatcher).name                                # (the step's only: not memory)
    step_kw = {**options, **dispatcher_kwargs(disp),
               **check_step_recipe(schedule, comm_sms, (g,), searched=True, load_skew=load_skew, model=model,
                                   capacity_factor=capacity_factor)}      # (moeapi42)
    accounted = check_bool("accounted_split", accounted_split) and model.is_moe     # (a dense search has it)
    pps = pipeline_degrees(model, MAX_PP, accounted)          # (plan()'s: its accounted splits too)
    if step_kw.get("schedule") == "dualpipe":       # (DualPipe's layouts only: _dualpipe_degrees, dmin49)
        pps = _dualpipe_degrees(model, m, offload, accounted)
        kw["schedule"] = "dualpipe"
    fast = supports(model, kw, "none")              # (not with DualPipe: a rank's two stages, every rank)

    candidates, passes, weighed = [], {}, {}          # (weighed: each candidate's stages, as fits weighed it)

    def moe_passes(tp, pp, zero, ep):
        # (refused: zero=3 with ep > 1, an expert width tp does not divide). Past the (tp, pp) check no rule
        # of check_layout reads pp, so the first pp's verdict is every pp's, as the planner keeps it
        # (plan_candidates.moe_layout_passes)
        if (tp, zero, ep) not in passes:
            try:
                check_layout(model, tp=tp, pp=pp, zero=zero, sp=tp > 1, ep=ep, expert_tp=expert_tp)
                passes[tp, zero, ep] = True
            except ValueError:
                passes[tp, zero, ep] = False
        return passes[tp, zero, ep]

    # a mixture of experts' layouts of one (tp, pp, ZeRO stage) solved together (fewest_arrays: the same dp)
    group, solved, kept, room = None, {}, {}, peak_room_bytes(limit)
    fewest = max_gpus                 # no layout of more GPUs than the fewest found so far can be the answer
    for tp, cp, pp in sorted(((t, c, p) for t in _divisors(per_node) for c in cps for p in pps),
                             key=lambda t_c_p: t_c_p[0] * t_c_p[1] * t_c_p[2]):
        if tp * cp * pp > fewest:     # (sorted by tp x cp x pp: neither can any layout after it)
            break
        cpf = {} if cp == 1 else {"cp": cp, "cp_comm": cp_comm}     # (cp = 1: the layouts as before)
        try:
            check_layout(model, tp=tp, pp=pp)
        except ValueError:
            continue
        for zero, ep in ((z, e) for z in (0, 1, 2, 3) for e in eps):
            if zero >= 2 and pp > 1:
                continue
            if model.is_moe and not moe_passes(tp, pp, zero, ep):
                continue
            offloads = ["none"] + (["optimizer"] if offload and zero >= 1 else []) \
                + (["optimizer+params"] if offload and zero == 3 else [])
            for off in offloads:
                if not model.is_moe:
                    def par(dp, tp=tp, pp=pp, zero=zero, off=off, cpf=cpf):
                        # (kept_parallel: the same fields give an equal layout, checked once; fits_on and
                        # chapter 10's figure ask the same layouts on every GPU count)
                        return kept_parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=tp > 1, offload=off,
                                             **pipeline_split(model, pp), **cpf)

                    stages = search_stages(model, pp)       # (the planner's: stage 1 too, accounted)

                    def fits(dp, par=par, stages=stages):
                        runs = _stage_runs(model, par(dp), stages, kw)
                        return max(r.total_bytes for r in runs) <= limit
                    dp = _smallest_dp(par, limit, kw, model, stages=stages)
                    if dp is None:
                        continue
                    # floating-point edge: step up until it fits
                    dp = _fits_from(dp, fewest // (tp * cp * pp), fits)
                else:                              # ---- a mixture of experts: dp in multiples of a
                    a = dp_unit(tp, cp, ep, expert_tp)
                    if tp * cp * pp * a > fewest:  # (its fewest GPUs, a tp cp pp, already beaten: skipped
                        continue                   # unweighed, as _fits_from's limit below would refuse it)

                    def par(dp, tp=tp, pp=pp, zero=zero, off=off, ep=ep, cpf=cpf):
                        # (kept_parallel: the same fields give an equal layout, checked once)
                        return kept_parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=tp > 1, offload=off, ep=ep,
                                             expert_tp=expert_tp, **pipeline_split(model, pp), **cpf)

                    if fast and group != (tp, cp, pp) and off == "none":  # (every ZeRO stage's groups)
                        group, groups = (tp, cp, pp), []
                        for z in (0, 1, 2, 3) if pp == 1 else (0, 1):
                            calls = [(e, u) for e in eps if moe_passes(tp, pp, z, e)
                                     and tp * cp * pp * (u := dp_unit(tp, cp, e, expert_tp)) <= fewest]
                            if calls:
                                groups.append((par(calls[0][1], zero=z, ep=calls[0][0]), calls))
                        group_stages = heavy_stages(model, groups[0][0])     # (pp's: the same for every ep)
                        solved = {(b.zero, e): dp for (b, calls), dps in zip(groups, smallest_dps(
                            model, groups, group_stages, kw, room, kept)) for (e, _), dp in zip(calls, dps)}
                    if fast and off == "none" and (zero, ep) in solved:
                        dp = solved[zero, ep]
                        if dp is None or dp // a > fewest // (tp * cp * pp * a):
                            continue               # (_fits_from's refusal, without a layout built)
                        first, stages = par(a), group_stages
                    else:
                        first = par(a)
                        stages = heavy_stages(model, first)
                        dp = _smallest_dp(par, limit, kw, model, unit=a, stages=stages, first=first)
                        if dp is None:
                            continue

                    def fits(k, par=par, a=a, stages=stages, first=first):
                        runs = _stage_runs(model, first if k == 1 else par(a * k), stages, kw)
                        return max(r.total_bytes for r in runs) <= limit
                    k = _fits_from(dp // a, fewest // (tp * cp * pp * a), fits)
                    dp = None if k is None else a * k
                if dp is not None:
                    candidates.append(par(dp))
                    weighed[candidates[-1]] = stages
                    fewest = min(fewest, tp * cp * pp * dp)
    if not candidates:
        raise ValueError(f"no layout of up to max_gpus={max_gpus:,} {g.name} GPUs holds batch={batch}, "
                         f"seq={seq:,} within usable_fraction={frac:g} of their memory: lower batch or seq, "
                         "or set recompute='full'")
    fewest = min(c.gpus for c in candidates)

    def total_of(c):
        if kw.get("schedule") == "dualpipe":        # (every rank's, weighed already: fits' runs are all)
            return max(r.total_bytes for r in _stage_runs(model, c, weighed[c], kw))
        return training_memory(model, parallel=c, **kw).total_bytes      # every stage, this time

    plans = []
    for c in candidates:
        if c.gpus != fewest:
            continue
        if _count_only:                 # (the first that holds every stage: the count, no step priced)
            if total_of(c) <= limit:
                return fewest
            continue
        st = step_time(model, g, c, batch=batch, seq=seq, grad_accum=m, kernel_efficiency=eff, overlap=0.0,
                       recompute=recompute, precision=precision, node=nd, **step_kw,
                       **({"max_nodes": "model"} if model.is_moe else {}))
        total = total_of(c)
        if total <= limit:
            plans.append(Plan(c, total, float(g.memory_bytes), st.comm_s, st.compute_s, st.bubble))
    # (a middle pipeline stage heavier than the first and the last: never seen)
    if not plans:
        raise ValueError(f"no layout of {fewest:,} {g.name} GPUs holds batch={batch}, seq={seq:,} on every "
                         "pipeline stage: raise max_gpus or lower batch or seq")
    return min(plans, key=lambda p: (round(p.step_s, 9), p.parallel.tp, p.parallel.pp, p.parallel.zero,
                                     p.parallel.offload != "none", p.parallel.ep, p.parallel.cp))


def fits_on(model: Model | str, gpu, n_gpus: int, *, seq: int, batch: int = 1, recompute: str = "full",
            precision: str = "bf16-mixed", usable_fraction: float = USABLE_FRACTION) -> bool:
    """Whether a layout of exactly ``n_gpus`` ``gpu`` holds a training step of micro-batch ``batch``
    (sequences of ``seq`` tokens) within ``usable_fraction`` of each GPU's memory, by the test
    :func:`min_gpus` applies (:func:`~llmsizing.memory.training_memory` of every pipeline stage), with
    ``recompute`` (default ``"full"``, the least memory) and without offloading to the host. A run on a
    count where this is False cannot run at any MFU: chapter 10's time and cost figure marks such counts
    (:func:`~llmsizing.charts.render_training_time`).

    Fewer than :func:`min_gpus`'s fewest: False. Otherwise the fewest's layout with ``dp`` grown to fill
    ``n_gpus`` (when its ``tp x cp x pp`` divides ``n_gpus``; ZeRO's shards only shrink as ``dp`` grows),
    then, for a dense model, every ``tp`` (divisors of the node's scale-up domain), ``cp`` (those
    :func:`min_gpus` tries by default: none below 16K tokens) and ``pp`` (those :func:`min_gpus` tries, the
    planner's, up to :data:`~llmsizing.parallel.MAX_PP`, each with the planner's split) whose product divides
    ``n_gpus``, at the largest
    ZeRO stage :func:`min_gpus` pairs with it (3 without a pipeline, 1 with one). False when none of those
    holds the step: "not shown to fit", never a fit claimed unchecked."""
    from dataclasses import replace

    from .memory import training_memory

    model = resolve_model(model, moe=True)
    n = check_int("n_gpus", n_gpus)
    from .flops import RECOMPUTE

    recompute = check_choice("recompute", recompute, RECOMPUTE)     # (refused here, never read as "no fit")
    kw = dict(batch=check_int("batch", batch), seq=check_int("seq", seq), grad_accum=1, precision=precision,
              optimizer="adamw", attention="flash", recompute=recompute, stack="fused",
              optimizer_impl="foreach")
    g = check_recipe_runs_on(precision, gpu)
    limit = check_fraction("usable_fraction", usable_fraction) * g.memory_bytes
    try:
        best = min_gpus(model, g, usable_fraction=usable_fraction, max_gpus=n,
                        **{k: kw[k] for k in ("batch", "seq", "precision", "recompute")})
    except ValueError:                       # no layout of up to n GPUs holds it (arguments checked above)
        return False
    if best.gpus == n:
        return True
    p = best.parallel
    tries = [replace(p, dp=n // (p.tp * p.cp * p.pp))] if n % (p.tp * p.cp * p.pp) == 0 else []
    if not model.is_moe:
        per_node = min(get_node(None, g).scaleup_domain_gpus, MAX_GPUS_PER_NODE)
        tries += [kept_parallel(tp=t, pp=pp, dp=n // (t * c * pp), zero=3 if pp == 1 else 1, sp=t > 1,
                                **pipeline_split(model, pp), **({} if c == 1 else {"cp": c}))
                  for c in default_cp_degrees(kw["seq"]) for t in _divisors(per_node)    # (cp = 1 first)
                  for pp in pipeline_degrees(model, MAX_PP) if n % (t * c * pp) == 0]
    for par in tries:
        try:
            check_layout(model, tp=par.tp, pp=par.pp)
            # the first and last stages first (the most loaded: min_gpus's test), then every stage
            stages = search_stages(model, par.pp) if not model.is_moe else (0, par.pp - 1)
            if (max(r.total_bytes for r in _stage_runs(model, par, stages, kw)) <= limit
                    and training_memory(model, parallel=par, **kw).total_bytes <= limit):
                return True
        except ValueError:                   # a layout the model refuses (e.g. heads tp does not divide)
            continue
    return False
