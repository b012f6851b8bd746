"""A mixture of experts' parts of the planner's pricing (Part III, "How many GPUs do you need?"; chapter 18),
split out of :mod:`llmsizing.plan_pricing` (issue 35: ``plan()`` takes the MTP module and token dropping,
which would have pushed it past 600 lines): its data-parallel collectives (:func:`moe_dp_collectives`) and
all-to-alls (:func:`moe_all_to_all_s`) on arrays, and what ``plan(mtp_depth=, capacity_factor=)`` adds to the
search.

**The MTP module and token dropping in the search** (issue 35, "one MoE path"). No formula of its own:

* memory: with either option the search's pieces are read by :func:`option_pieces`, which follows
  :func:`~llmsizing.memory.training_memory`'s own steps with ``mtp_depth=`` and ``capacity_factor=`` (the
  MTP blocks appended to the last stage as MoE layers, :func:`~llmsizing.mtp.mtp_layout`; their projections'
  states, the extra heads' logits and the next tokens' embeddings, :func:`~llmsizing.mtp.mtp_sides`; the
  experts' buffers at that capacity, :func:`~llmsizing.moe.moe_layer_terms`) instead of the default path's
  :func:`~llmsizing.memory._search_pieces`, and the search's arrays shortcuts
  (:mod:`llmsizing.dense_arrays`, :mod:`llmsizing.moe_prefetch`) step aside (:func:`has_options`); the
  coefficients' forms still hold (the MTP block is one more MoE layer, its projection one more dense matrix,
  the logits and buffers grow with the micro-batch);
* time: the last stage's FLOPs with the module's (:func:`llmsizing.moe.moe_stage_flops` with ``mtp_depth``),
  its routing and load-skew kernels on ``mtp_depth`` more MoE layers (:func:`stage_moe_layer_counts`), and the
  skew capped at the capacity (:func:`llmsizing.moe_time.load_skew`), as
  :func:`~llmsizing.comm.step_compute_time_s` and :func:`~llmsizing.layouts.step_time` take them. Neither
  option moves the communication :func:`~llmsizing.comm.communication` prices.

``tests/test_plan_mtp.py`` re-prices the chosen plans with ``step_time`` and ``training_memory`` (the same
arguments) and checks DeepSeek-V3's MTP FLOPs by hand from its config. The defaults (``mtp_depth=0``,
``capacity_factor=None``) never reach this module's option path: their searches are bit for bit as before.
"""

from __future__ import annotations

import collections

import numpy as np

from .all_to_all import _links as a2a_links
from .comm import experts_apart_of
from .footprint import phase_values
from .memory import _act_layout, _kept_act_core, _kept_act_side, _kept_state_side, _stage_phases
from .memory_dualpipe import dualpipe_ranks
from .moe import _split, ep_all_to_all, stage_moe_layers
from .moe_arrays import frame_layers
from .moe_time import shared_overlap_rows_s
from .mtp import mtp_layout, mtp_sides
from .parallel import kept_parallel, layers_per_stage, pipeline_split, resolve_parallel
from .plan_dp import (_DP_SLOTS, _dp_calls, _dp_exposed, _dp_slot, _megatron_calls,  # noqa: F401 (_dp_slot: old)
                      _row_links)
from .plan_terms import _group_columns, _groups, dp_unit_rows
from .precision import DTYPE_BYTES, RECIPES

#: The keywords of :func:`~llmsizing.planner.plan` this module adds to the search's memory keywords when they
#: are not their defaults (``mtp_depth=0``, ``capacity_factor=None``), as
#: :func:`~llmsizing.job.check_moe_options` gives them.
OPTION_KEYS = ("mtp_depth", "capacity_factor", "schedule")


def has_options(kw: dict) -> bool:
    """Whether the search's memory keywords ``kw`` hold an option of :data:`OPTION_KEYS` (then its pieces are
    :func:`option_pieces`', and the arrays shortcuts step aside)."""
    return any(k in kw for k in OPTION_KEYS)


def option_pieces(model, par, stages, *, batch: int, grad_accum: int, seq: int, precision: str = "bf16-mixed",
                  optimizer: str = "adamw", attention: str = "flash", recompute: str = "none",
                  dropout: bool = False, stack: str = "fused", optimizer_impl: str = "foreach",
                  recompute_layers: int | None = None, attention_mask: bool = False, mtp_depth: int = 0,
                  capacity_factor: float | None = None, grad_buffer: bool | str = False,
                  schedule: str = "1f1b", _ranks: bool = False) -> list[float]:
    """The bytes of every piece (:func:`~llmsizing.footprint.phase_values`, each summed) of the stages
    ``stages``, stage by stage, as ``training_memory(..., mtp_depth=, capacity_factor=, _all_stages=True,
    _stages=stages)`` works them out: the same kept sides (``_kept_act_side`` with the capacity,
    ``_kept_state_side``) of :func:`~llmsizing.mtp.mtp_layout`'s model and layout, the same
    :func:`~llmsizing.mtp.mtp_sides` and the same phases, in the same order (arguments checked by
    :func:`~llmsizing.planner.plan`). ``schedule="dualpipe"`` (dual48; any model): every DualPipe rank's
    pieces, ranks ``0 .. pp/2 - 1`` (``stages`` unread), each its two stages' sides as
    ``training_memory(..., schedule="dualpipe")`` adds them
    (:func:`~llmsizing.memory_dualpipe.dualpipe_ranks`);
    ``grad_accum`` the search's accumulation class (``pp``: 1F1B's in flight on a stage ``j``, ``pp - j``,
    are those of any ``m >= pp``, so of DualPipe's ``m >= 2 pp``)."""
    cap = {} if capacity_factor is None else {"capacity_factor": capacity_factor}
    ext, epar = mtp_layout(model, resolve_parallel(par, model, seq=seq), mtp_depth)
    dual = schedule == "dualpipe"
    stages = tuple(range(epar.pp)) if dual else tuple(sorted(set(stages)))
    acts = _kept_act_side(ext, batch, seq, precision, attention, dropout, recompute, recompute_layers,
                          grad_accum, stack, attention_mask, _act_layout(epar), stages, **cap)
    states = _kept_state_side(ext, precision, optimizer, optimizer_impl, epar, stages)
    if mtp_depth:
        acts, states = mtp_sides(model, epar, mtp_depth, acts, states, precision=precision,
                                 optimizer=optimizer, batch=batch, seq=seq, recompute=recompute)
    if dual:
        # (_act_core's, kept: the same calls, the same numbers)
        core = _kept_act_core(ext, batch, seq, precision, attention, dropout, recompute, stack,
                              attention_mask, epar.tp, epar.sp, epar.cp, epar.cp_comm, epar.expert_tp,
                              **cap)[0]
        ranks = dualpipe_ranks(epar, grad_accum, acts, states, core.rebuilt_bytes, None, grad_buffer,
                               (batch, seq, stack, optimizer_impl))
        return ranks if _ranks else [v for r in ranks for v in r.pieces_bytes.values()]
    return [sum(v) for i in stages for v in _stage_phases(ext, epar, i, grad_accum, acts, states,
                                                           phase_values, grad_buffer=grad_buffer)]


def dualpipe_rank_memory(model, par, **kw) -> list:
    """Every DualPipe rank's :class:`~llmsizing.footprint.TrainingMemory` (ranks ``0 .. pp/2 - 1``), the
    results of ``training_memory(..., schedule="dualpipe", _all_stages=True)`` without its stage rows
    (``kw``: its keywords, checked by the caller; ``schedule`` read as ``"dualpipe"``), from
    :func:`option_pieces`' kept sides: the activations' side shared by the layouts that differ in ZeRO stage,
    ``dp`` and ``ep`` alone. The same pieces and totals, bit for bit (dual50:
    :func:`~llmsizing.fewest_gpus.min_gpus` weighs DeepSeek-V3's ~640 DualPipe layouts over the catalogue
    with it; ``tests/test_cost_together.py``)."""
    return option_pieces(model, par, (), **{**kw, "schedule": "dualpipe"}, _ranks=True)


def stage_moe_layer_counts(model, par, mtp_depth: int = 0) -> tuple:
    """Each stage's MoE layers whose routing and load skew the step pays
    (:func:`~llmsizing.comm.step_compute_time_s`): :func:`llmsizing.moe.stage_moe_layers`, the last stage's
    with the ``mtp_depth`` MTP blocks."""
    counts = stage_moe_layers(model, par)
    return counts if not mtp_depth else counts[:-1] + (counts[-1] + mtp_depth,)


def moe_dp_collectives(model, gpu_list, cols, dpcp, fwd, bwd, mf, *, seq, precision, node_of, expert_tp):
    """A mixture of experts' data-parallel collectives for the planner's pricing
    (:func:`~llmsizing.plan_pricing._price`): ``(exposed, total)`` seconds per plan,
    the dense part over ``dp x cp`` (``tp`` apart) and the routed experts' over ``edp`` (``etp x ep`` apart),
    on one link, so their times add in each window (:func:`~llmsizing.exposure.dp_window_exposed_s`). Each
    part's collectives (:func:`~llmsizing.zero_traffic.dp_schedule`, priced by
    :func:`~llmsizing.comm.ring_collective` as :func:`~llmsizing.comm.communication` prices them) are worked
    out once per (tp, ZeRO stage, group size, ep, the group leaving the scale-up domain) on a unit link
    (bytes do not depend on the link, latency steps only on leaving the domain), for one stage's parameters
    without a pipeline, then scaled by each row's link and the most loaded stage's parameters (issue 35:
    1,800 schedules for DeepSeek-V3 over the catalogue instead of 8,300, worked out on arrays of them by
    :func:`llmsizing.plan_terms.dp_unit_rows`). One call's seconds per slot, per (GPU, tp, pp, ZeRO stage, ep,
    ``dp x cp``), are kept between searches (:func:`_kept_key_rows`)."""

    # one call's seconds per slot depend on (GPU, tp, pp, ZeRO stage, ep, dp x cp) only: worked out once per
    # distinct key (Mixtral-8x7B over the catalogue: 17,685 of 43,567 plans), the same numbers row by row
    (gi, tp, pp, zero, ep, dpcp_k), _, at = _group_columns(*(cols[k] for k in ("gpu", "tp", "pp", "zero",
                                                                                  "ep")), dpcp)
    dense, experts = _kept_key_rows(model, gpu_list, node_of, precision, expert_tp, gi, tp, pp, zero, ep,
                                    dpcp_k)
    dense, experts = dense.take(at, axis=0), experts.take(at, axis=0)     # (x[at]; take: sooner, plan42)
    # the two parts ride one link (both groups span the same tp x cp x dp ranks: exposure.exposed_by_group),
    # so each window's collectives add up before it is taken off, once (exposure.dp_window_exposed_s)
    exposed = _dp_exposed(dense + experts, fwd, bwd, mf)
    both = dense[:, 1] + experts[:, 1]
    dense[:, 1] = experts[:, 1] = 0.0
    total = sum(mf * (c[:, 0] + c[:, 1] + c[:, 3]) + c[:, 2] + c[:, 4] for c in (dense, experts)) + mf * both
    return exposed, total


def _key_rows(model, gpu_list, node_of, precision, expert_tp, gi, tp, pp, zero, ep, dpcp_k):
    """:func:`moe_dp_collectives`' one call's seconds per slot of the dense part and of the experts' (two
    arrays, one row per key) for the keys ``(GPU index, tp, pp, ZeRO stage, ep, dp x cp)`` given as columns.
    Each key's row is worked out from that key alone (its link, its unit rows, its stage's parameters), so
    a row is the same, bit for bit, whichever other keys are asked with it."""
    recipe = RECIPES[precision]
    w_b, g_b = DTYPE_BYTES[recipe.weights], DTYPE_BYTES[recipe.grads]
    etp = tp if expert_tp else np.ones_like(tp)
    edp = tp * dpcp_k // (etp * ep)
    n_slots = len(_DP_SLOTS)
    unit = []                 # each part's (traffic, latency, seconds per byte): the dense part, the experts
    for part, (n_col, e_col) in ((0, (dpcp_k, np.ones_like(ep))), (1, (edp, ep))):
        bw, alpha, across, per = _row_links(gpu_list, node_of, gi, n_col, tp if part == 0 else etp * ep)
        keys, idx = _groups(tp, zero, n_col, e_col, across, per)
        # bytes of a pass, latency steps per call (kept by key: they depend on no GPU)
        rows = kept_unit_rows(model, keys, part, w_b=w_b, g_b=g_b, expert_tp=expert_tp, n_slots=n_slots)
        unit.append((rows[:, 0].take(idx, axis=0), rows[:, 1].take(idx, axis=0) * alpha[:, None],
                     (1 / (bw * 1e9))[:, None]))
    # the most loaded stage's dense and expert parameters, relative to one stage's (the messages scale)
    held_keys, held_idx = _groups(tp, pp, ep)
    share = np.zeros((len(held_keys), 2))
    held = np.zeros((len(held_keys), 3))                 # the stage's dense and expert parameters, its layers

    ones = {k: _split(model, k[0], 1, None, k[1], expert_tp)[0] for k in {(t, e) for t, _, e in held_keys}}
    split = {p_: kept_parallel(pp=p_, **pipeline_split(model, p_)) for p_ in {k[1] for k in held_keys}}
    most = {p_: max(layers_per_stage(model.layers, s_)) for p_, s_ in split.items()}
    for k, (t_, p_, e_) in enumerate(held_keys):
        # (the first stage of the most parameters; stages of equal rows share one row object: each once)
        row = max(dict.fromkeys(_split(model, t_, p_, frame_layers(model, split[p_]), e_, expert_tp)),
                  key=lambda r: r[0] + r[1])
        one = ones[t_, e_]
        share[k] = (row[0] / one[0], row[1] / one[1])
        held[k] = (row[0], row[1], most[p_])
    share, held = share.take(held_idx, axis=0), held.take(held_idx, axis=0)
    one = ~experts_apart_of(ep, etp, tp)       # the experts in the dense buffer, one collective
    dense, experts = (share[:, part, None] * traffic * per_byte
                      + _dp_calls(zero, held[:, part], held[:, 2], n_, pp, buckets=_megatron_calls(
                          model, tp, pp, zero, dpcp_k, ep=ep, etp=etp, part=("dense", "experts")[part],
                          need=~one & (zero < 3))) * latency
                      for part, (traffic, latency, per_byte), n_ in zip((0, 1), unit, (dpcp_k, edp)))
    if one.any():
        (t_d, lat_d, pb_d), (t_e, _, _) = unit        # (the same group and link: the dense part's latency)
        both = ((share[:, 0, None] * t_d + share[:, 1, None] * t_e) * pb_d
                + _dp_calls(zero, held[:, 0] + held[:, 1], held[:, 2], dpcp_k, pp,
                            buckets=_megatron_calls(model, tp, pp, zero, dpcp_k, ep=ep, etp=etp,
                                                    need=one & (zero < 3))) * lat_d)
        dense, experts = np.where(one[:, None], both, dense), np.where(one[:, None], 0.0, experts)
    return dense, experts


#: How many (model, part, bytes per weight and gradient, expert_tp) dictionaries of
#: :func:`~llmsizing.plan_terms.dp_unit_rows`' rows :func:`kept_unit_rows` keeps, and at most how many keys
#: they hold in all (a model's part ~100-1,000; ~200 bytes a key).
KEPT_UNIT_TABLES = 64
KEPT_UNIT_KEYS = 2**16
_kept_units: collections.OrderedDict = collections.OrderedDict()


def kept_unit_rows(model, keys, part: int, *, w_b: float, g_b: float, expert_tp: bool, n_slots: int):
    """:func:`~llmsizing.plan_terms.dp_unit_rows` of ``keys`` (with the planner's slots and calls per pass),
    each key's row kept between searches (issue 35: on a unit link they depend on no GPU, so chapter 17's
    move to a second GPU type asks the rows the first one's search worked out). A key's row reads that key
    alone, so it is the same, bit for bit, asked with any others."""
    at = (model, part, w_b, g_b, expert_tp, n_slots)
    try:
        table = _kept_units.setdefault(at, {})
    except TypeError:                                            # (an unhashable model: not kept)
        return dp_unit_rows(model, keys, part, w_b=w_b, g_b=g_b, expert_tp=expert_tp, n_slots=n_slots,
                            dp_calls=_dp_calls)
    _kept_units.move_to_end(at)
    new = [k for k in dict.fromkeys(keys) if k not in table]
    if len(table) + len(new) > KEPT_UNIT_KEYS:                 # (full: start again from these keys)
        table.clear()
        new = list(dict.fromkeys(keys))
    if new:
        rows = dp_unit_rows(model, new, part, w_b=w_b, g_b=g_b, expert_tp=expert_tp, n_slots=n_slots,
                            dp_calls=_dp_calls)
        rows.flags.writeable = False
        table.update(zip(new, rows))
    while len(_kept_units) > 1 and (len(_kept_units) > KEPT_UNIT_TABLES
                                    or sum(map(len, _kept_units.values())) > KEPT_UNIT_KEYS):
        _kept_units.popitem(last=False)
    return np.array([table[k] for k in keys]).reshape(len(keys), 2, n_slots)


kept_unit_rows.cache_clear = _kept_units.clear


#: How many (model, GPU, node, precision, expert_tp) tables of :func:`_key_rows` :func:`_kept_key_rows` keeps
#: (least recently used dropped first), and at most how many keys they hold in all (88 bytes a key: a
#: mixture of experts' search on one GPU asks ~300-5,000; chapter 17's widget, its ten mixtures of experts
#: on two GPU types, ~50,000; 2**18 keys, ~23 MB).
KEPT_DP_TABLES = 64
KEPT_DP_KEYS = 2**18
#: The bits of each key column in :func:`_key_code` (tp, pp, ZeRO stage, ep, dp x cp): 62 in all.
_KEY_BITS = (10, 10, 2, 12, 28)


def _key_code(*columns):
    """The keys ``(tp, pp, ZeRO stage, ep, dp x cp)`` packed one int64 each (in :data:`_KEY_BITS`), or None
    when a value does not fit its bits (the caller then works every key out)."""
    code = np.zeros(len(columns[0]), dtype=np.int64)
    for c, bits in zip(columns, _KEY_BITS):
        c = np.asarray(c, dtype=np.int64)
        if len(c) and (int(c.min()) < 0 or int(c.max()) >= 1 << bits):
            return None
        code = (code << bits) | c
    return code


class _KeptTables(collections.OrderedDict):
    """Kept tables, least recently used first, at most :data:`KEPT_DP_TABLES`; with ``cache_clear`` as the
    library's other kept results have."""

    def cache_clear(self):
        self.clear()


_kept_dp_rows = _KeptTables()


def _kept_key_rows(model, gpu_list, node_of, precision, expert_tp, gi, tp, pp, zero, ep, dpcp_k):
    """:func:`_key_rows`, with each GPU's rows kept between searches by (model, GPU, its node, precision,
    expert_tp) and key (issue 35: chapter 17's move to a new context length asks ~97% of the keys the search
    before it asked, a data-parallel group's collectives do not depend on the context; 6-10 ms of a
    mixture of experts' pricing). The same numbers, bit for bit: each key's row is worked out from that key
    alone (:func:`_key_rows`); a key not kept is worked out as before."""
    code = _key_code(tp, pp, zero, ep, dpcp_k)
    try:
        hash((model, tuple(gpu_list), tuple(node_of[g.name] for g in gpu_list), precision, expert_tp))
    except TypeError:
        code = None
    if code is None:                             # (an unhashable argument, or a degree beyond the bits)
        return _key_rows(model, gpu_list, node_of, precision, expert_tp, gi, tp, pp, zero, ep, dpcp_k)
    n_slots = len(_DP_SLOTS)
    dense, experts = np.empty((len(gi), n_slots)), np.empty((len(gi), n_slots))
    found, misses = [], []
    for g, gpu in enumerate(gpu_list):
        sel = np.flatnonzero(gi == g)
        if not len(sel):
            continue
        key = (model, gpu, node_of[gpu.name], precision, expert_tp)
        codes, rows = _kept_dp_rows.get(key, (np.zeros(0, dtype=np.int64), np.zeros((0, 2, n_slots))))
        pos = np.minimum(np.searchsorted(codes, code[sel]), max(len(codes) - 1, 0))
        miss = sel[codes[pos] != code[sel]] if len(codes) else sel
        if len(codes) + len(miss) > KEPT_DP_KEYS:                   # (full: start again from these keys)
            codes, rows, miss = codes[:0], rows[:0], sel
        found.append((key, sel, codes, rows, pos, miss))
        misses.append(miss)
    # every GPU's keys not kept in one call (speed26: a new model's four GPU types, one call instead of four;
    # each key's row is its own, so the same bits)
    every = np.concatenate(misses) if misses else np.zeros(0, dtype=np.int64)
    if len(every):
        got = np.stack(_key_rows(model, gpu_list, node_of, precision, expert_tp, gi[every], tp[every],
                                 pp[every], zero[every], ep[every], dpcp_k[every]), axis=1)
    start = 0
    for key, sel, codes, rows, pos, miss in found:
        if len(miss):
            new = got[start:start + len(miss)]
            start += len(miss)
            codes = np.concatenate([codes, code[miss]])
            order = np.argsort(codes, kind="stable")
            codes, rows = codes[order], np.concatenate([rows, new])[order]
            codes.flags.writeable = rows.flags.writeable = False
            pos = np.searchsorted(codes, code[sel])
        _kept_dp_rows[key] = (codes, rows)
        _kept_dp_rows.move_to_end(key)
        while len(_kept_dp_rows) > 1 and (len(_kept_dp_rows) > KEPT_DP_TABLES or sum(
                len(c) for c, _ in _kept_dp_rows.values()) > KEPT_DP_KEYS):
            _kept_dp_rows.popitem(last=False)
        dense[sel], experts[sel] = rows[:, 0].take(pos, axis=0), rows[:, 1].take(pos, axis=0)
    return dense, experts


def moe_all_to_all_s(model, gpu_list, cols, mf, *, seq, precision, node_of, cp_comm, rcs, expert_tp,
                     max_nodes, window=None, dispatcher="alltoall"):
    """Seconds per plan of a mixture of experts' expert-parallel all-to-alls
    (:func:`llmsizing.moe.ep_all_to_all`) for :func:`~llmsizing.plan_pricing._price`: all the MoE layers' of
    one micro-batch without a pipeline, scaled by the most loaded stage's MoE layers over all of them, times
    the micro-batches. With ``window`` (plans x 2, the shared experts' windows), ``(all, left)``: ``left``
    what the shared experts do not hide (:func:`llmsizing.moe_time.shared_overlap_rows_s`)."""
    gi, tp, cp, pp, b, ep, ri = (cols[k] for k in ("gpu", "tp", "cp", "pp", "micro", "ep", "rc"))
    out = np.zeros(len(gi))
    on = np.flatnonzero(ep > 1)
    if not len(on):
        return out if window is None else (out, out.copy())
    # ep_all_to_all sees (tp, cp, micro) only as the tokens a GPU routes, micro x (seq // cp) / tp (SP when
    # tp > 1), and the ranks' stride etp: one call per (GPU, tokens, etp, ep), on the first plan with them
    t_on, c_on, b_on = tp[on], cp[on], b[on]
    _, tok = np.unique(b_on * (seq // c_on) / t_on, return_inverse=True)
    etp = t_on if expert_tp else np.ones_like(t_on)
    key = np.ravel_multi_index((gi[on], tok.reshape(-1), etp, ep[on]),
                               (len(gpu_list), int(tok.max()) + 1, int(etp.max()) + 1, int(ep[on].max()) + 1))
    _, first, idx = np.unique(key, return_index=True, return_inverse=True)
    # the forward's two all-to-alls and the backward's, without recomputation; full recomputation repeats the
    # forward's (ep_all_to_all); one call per (the links all_to_all_s reads, tokens, etp, ep), shared by the
    # GPUs whose all-to-all rides equal links (all_to_all._links; the node's domain sets what crosses)
    seen, links_of, groups, order = {}, {}, {}, []
    firsts = (np.asarray(a)[first].tolist() for a in (gi[on], t_on, c_on, b_on, ep[on], tok.reshape(-1), etp))
    for g_, t_, c_, b_, e_, k_, s_ in zip(*firsts):
        g, node = gpu_list[g_], node_of[gpu_list[g_].name]
        if (g_, s_, e_) not in links_of:
            links_of[g_, s_, e_] = (node.scaleup_domain_gpus, a2a_links(e_, g, node, s_))
        shared = (links_of[g_, s_, e_], k_, s_, e_)
        if shared not in seen:     # the tokens a GPU routes, as ep_all_to_all works them out of the layout
            seen[shared] = b_ * (seq // c_) / (t_ if t_ > 1 else 1)
            groups.setdefault((links_of[g_, s_, e_], s_, e_), (g, node, t_, c_, b_, e_, []))[6].append(shared)
        order.append(shared)
    # one ep_all_to_all per (links, etp, ep), every token count of the group at once (its _tokens)
    for g, node, t_, c_, b_, e_, keys in groups.values():
        times = [c.time_s for c in ep_all_to_all(
            model, kept_parallel(tp=t_, sp=t_ > 1, cp=c_, cp_comm=cp_comm, dp=e_, ep=e_, expert_tp=expert_tp),
            batch=b_, seq=seq, gpu=g, node=node, grad_accum=1, precision=precision, recompute="none",
            max_nodes=max_nodes, dispatcher=dispatcher,
            _tokens=np.array([seen[k] for k in keys], dtype=float))]
        for j, k in enumerate(keys):
            seen[k] = [float(x[j]) for x in times]
    # (each row: n_moe_layers calls, the full recomputation's forward twice that)
    rows = np.array([seen[k] for k in order])[idx.reshape(-1)]
    full = np.array([r == "full" for r in rcs])[ri[on]]
    pp_keys, pp_idx = _groups(pp[on])

    most = np.array([max(stage_moe_layers(model, kept_parallel(pp=p_, **pipeline_split(model, p_))))
                     for (p_,) in pp_keys]) / model.n_moe_layers

    def per_plan(rows):                     # (the backward's combine and dispatch, rows 2 and 3)
        back, got = rows[:, 2] + rows[:, 3], np.zeros(len(gi))
        got[on] = np.where(full, 2 * rows[:, 0] + 2 * rows[:, 1] + back, rows[:, 0] + rows[:, 1] + back
                           ) * most[pp_idx] * mf[on]
        return got
    return per_plan(rows) if window is None else (
        per_plan(rows), per_plan(shared_overlap_rows_s(rows, window[on], model.n_moe_layers)))


__all__ = ["OPTION_KEYS", "has_options", "option_pieces", "stage_moe_layer_counts",
           "moe_dp_collectives", "moe_all_to_all_s"]
