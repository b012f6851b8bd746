"""A dense model's memory fit over many layouts at once, for the planner's search (Part III, "How many GPUs do
you need?"; chapter 17's widget, issue 35): :func:`search_pieces` gives the pieces of many
:func:`~llmsizing.memory._search_pieces` calls as arrays, and :func:`prefetch` and :func:`prefetch_cp` fill a
:class:`~llmsizing.plan_memory.SearchMemory` with the entries its layouts would each read off calls of their
own (what :mod:`llmsizing.moe_arrays` does for a mixture of experts' ``ep`` and ``dp``).

No formula here. Each call's bytes come from the same kept parts as :func:`~llmsizing.memory._search_pieces`'s
(:func:`~llmsizing.memory._act_core`, the model states' side :func:`~llmsizing.memory._state_side`, the
micro-batches in flight): only :func:`~llmsizing.activations.stage_activations` (a stage's share of the
layers and micro-batches in flight) and :func:`~llmsizing.footprint.phase_values` (the five pieces, summed)
are worked out on arrays, one entry per (call, stage), by the same float operations in the same order
(NumPy's float64 arithmetic is Python's): bit for bit each call's own. ``tests/test_dense_arrays.py`` checks
it call by call and search by search. Interleaved pipelines (``virtual_stages``, issue 34: the micro-batches
each stage holds from :func:`~llmsizing.parallel.pipeline_in_flight` with the chunks, as
:func:`~llmsizing.memory._act_side`) and the split counting the embedding and the loss as layers are taken as
the layout gives them. Not for autocast recipes (their copies depend on what is recomputed), partial
recomputation (``recompute_layers``) or pipeline outputs kept after they are sent: those go through
:func:`~llmsizing.memory._search_pieces` as before (:func:`supports`). A mixture of
experts' calls are single layouts here (a MoE stage's share of its MoE layers included): :func:`prefetch`
reads its reference layouts (``ep = 1``) so and leaves its model states over ``ep`` to
:class:`~llmsizing.moe_arrays.EpLayouts`.
"""

from __future__ import annotations

import collections
import functools

import numpy as np

from .footprint import _GRAD_COPIES
from .memory import _kept_act_core, _kept_in_flight, _kept_state_side, _search_layouts
from .moe import stage_offset_bytes
from .parallel import layers_per_stage, pipeline_in_flight, stage_chunks
from .plan_candidates import state_chunks, state_key
from .plan_moe import has_options
from .plan_pricing import _piece_layout
from .precision import RECIPES

#: :func:`~llmsizing.memory._search_pieces`' keywords and their defaults (``seq`` has none).
_DEFAULTS = dict(precision="bf16-mixed", optimizer="adamw", attention="flash", recompute="none",
                 dropout=False, stack="fused", optimizer_impl="foreach", recompute_layers=None,
                 attention_mask=False, grad_buffer=False)


def supports(model, kw: dict) -> bool:
    """Whether :func:`search_pieces` takes calls of ``model`` with the keywords ``kw``: a recipe without
    autocast, no partial recomputation (the layouts' own limits: :func:`search_pieces`). A mixture of experts'
    layouts are single layouts here (no :class:`~llmsizing.moe_arrays.EpLayouts`): :func:`prefetch` reads
    only its reference layouts (``ep = 1``) so. Not ``plan()``'s MTP module or token dropping
    (:func:`llmsizing.plan_moe.has_options`: their pieces are :func:`llmsizing.plan_moe.option_pieces`')."""
    return (not RECIPES[kw.get("precision", "bf16-mixed")].autocast and kw.get("recompute_layers") is None
            and not has_options(kw))


def search_pieces(model, kw: dict, calls, kept: dict | None = None, layout=None,
                  expert_tp: bool = False) -> list:
    """The pieces of each call of ``calls``, ``(tp, pp, zero, grad_accum, cp, cp_comm, batch, dp)`` and
    optionally ``v`` (interleaved model chunks per stage, 1 if left out), as
    :func:`~llmsizing.plan_pricing._pieces` gives them (``_search_pieces`` of the layout and stages
    ``layout(model, tp, pp, zero, cp, cp_comm, 1, expert_tp, dp, v)`` gives, keywords ``kw``; by default
    :func:`~llmsizing.plan_pricing._piece_layout`, the planner's: one place for both paths): a list of 1-D
    arrays, five pieces per stage, each entry bit for bit that call's. ``model`` and ``kw`` as
    :func:`supports` accepts; a ``ValueError`` for a layout it does not take (kept pipeline outputs).
    ``kept``: a dict where the layouts' parts are kept between calls of the same model, ``kw`` but
    ``recompute``, and ``layout`` (:func:`prefetch`: one per search), and the tables of the latest call lists
    at ``cp > 1``: the same list asked again with the other K/V exchange of :data:`EXCHANGED` is read off
    its table, bit for bit (:func:`_exchanged`; lc47)."""
    if not supports(model, kw):
        raise ValueError("dense_arrays.search_pieces: a recipe without autocast, no recompute_layers")
    o, layout = {**_DEFAULTS, **kw}, layout or _piece_layout
    seq = o["seq"]
    core_args = (seq, o["precision"], o["attention"], o["dropout"], o["recompute"], o["stack"],
                 o["attention_mask"])
    kept = {} if kept is None else kept
    calls = list(calls)
    # (the calls of an earlier search but the K/V exchange: only the K/V buffers' columns differ; lc47)
    other = _exchanged_key(calls, core_args, layout, expert_tp, o["grad_buffer"])
    if other is not None:
        got = _exchanged(model, kept, other, calls[0][5], core_args)
        if got is not None:
            return got
    layouts, states = kept.setdefault("layouts", {}), kept.setdefault("states", {})
    flights = kept.setdefault("flights", {})
    act_parts = kept.setdefault("act_parts", {})             # (layers per stage, stages' columns by m)
    # (each call's rows as blocks of kept arrays, joined once: its stages' model states, its activations'
    # row, its stages' own columns; issue 38: the same floats as a tuple a stage, ~3x sooner)
    st_blocks, core_rows, stage_blocks, extra_blocks, widths, fields = [], [], [], [], [], []
    for tp, pp, zero, m, cp, comm, batch, dp, *v in calls:
        key = (tp, pp, zero, cp, comm, dp, *v)
        # (kept across the contexts of one model and recipe: a layout's parts read the context only in
        # resolve_parallel's check that it splits over cp, made again where it fails)
        lay = layouts.get(key) if cp == 1 or not seq % (2 * cp) else None
        if lay is None:                                  # (as _search_pieces: resolved, kept layouts)
            par, stages = layout(model, tp, pp, zero, cp, comm, 1, expert_tp, dp, *v)
            par, act, state = _search_layouts(par, model, seq)
            if not (act.deallocate_pipeline_outputs or act.pp == 1):
                raise ValueError("dense_arrays.search_pieces: no kept stage outputs")
            stages = tuple(sorted(set(stages)))
            if (state, stages) not in states:
                rows = _state_rows(model, o, state, stages)
                states[state, stages] = np.array(rows, dtype=float).reshape(len(stages), -1)
            # (the stages' columns read only the pipeline of the layout's activations side: its stages, chunks
            # and split (layers_per_stage, stage_chunks, pipeline_in_flight), the same for every tp, cp, ZeRO
            # stage and dp: kept by these, shared by those layouts; pick31)
            split = (act.pp, act.virtual_stages, act.stage_layers, act.account_for_embedding,
                     act.account_for_loss, stages)
            parts = act_parts.get(split)
            if parts is None:
                parts = act_parts[split] = (layers_per_stage(model.layers, act), {})
            lay = layouts[key] = (par.pp, act, states[state, stages], stages, *parts)
        n_pp, act, st, stages, n_layers, by_m = lay
        core = _kept_core(model, kept, (act.tp, act.sp, act.cp, act.cp_comm, act.expert_tp, batch, core_args),
                          act)
        fields.append((act.tp, act.sp, act.cp, act.expert_tp, batch))
        # (footprint.grad_copies without its checks: the gradients' whole copies, the buffer under ZeRO 0/1)
        copies = _GRAD_COPIES[o["grad_buffer"] if zero <= 1 else False, m > 1]
        own = by_m.get((m, copies))
        if own is None:                                  # (the stages' columns: the layout's and m's alone)
            if act.virtual_stages == 1:
                flight = _kept_in_flight(act.pp, min(m, act.pp))
            elif (flight := flights.get((act, m))) is None:   # (as _act_side: all m, the chunks counted)
                flight = flights[act, m] = _kept_flight(act.pp, m, act.virtual_stages,
                                                        stage_chunks(model.layers, act))
            own = by_m[m, copies] = np.array([(n_pp == 1, i == 0, i == n_pp - 1, flight[i] * n_layers[i],
                                               flight[i], *copies, model.tied_embeddings and n_pp == 1)
                                             for i in stages], dtype=float).reshape(len(stages), -1)
        acts = core[1]
        moe = n_pp > 1 and bool(getattr(acts, "moe_layers", None))      # (stage_activations' MoE term)
        st_blocks.append(st)
        core_rows.append(core[0])
        stage_blocks.append(own)
        extra_blocks.append(np.array([(moe, stage_offset_bytes(acts, act, i)) for i in stages], dtype=float)
                            if moe else None)
        widths.append(len(stages))
    if not widths:
        return []
    n = np.array(widths)
    extra = np.zeros((int(n.sum()), 2))
    if any(x is not None for x in extra_blocks):
        at = np.concatenate([[0], np.cumsum(n)[:-1]])
        for k, x in zip(at.tolist(), extra_blocks):
            if x is not None:
                extra[k:k + len(x)] = x
    table = np.concatenate([np.concatenate(st_blocks), np.repeat(np.stack(core_rows), n, axis=0),
                            np.concatenate(stage_blocks), extra], axis=1)
    if other is not None:
        _keep_exchanged(kept, other, (calls[0][5], table, tuple(widths), tuple(fields)))
    return _split(_phase_sums(table), widths)


def _split(pieces: np.ndarray, widths) -> list:
    """:func:`_phase_sums`' rows ``pieces`` as each call's 1-D array, ``widths`` (its stages) rows a call."""
    out, k = [], 0
    for n in widths:
        out.append(pieces[k:k + n].reshape(-1))
        k += n
    return out


def _kept_core(model, kept: dict, ckey: tuple, act=None) -> tuple:
    """The activations' row of ``ckey`` (``(tp, sp, cp, cp_comm, expert_tp, batch, core_args)``,
    :func:`~llmsizing.memory._act_core`'s own key) as :func:`search_pieces` reads it: ``(the row as an array
    but its last entry, the activations)``, kept in ``kept`` (``cores``: moe_prefetch's rows too, the same key
    and row). ``act``: the layout whose fields ``ckey`` holds (only its ``tp``, ``sp``, ``cp``, ``cp_comm``
    and ``expert_tp`` are read)."""
    rows_kept = kept.setdefault("core_rows", {})
    core = rows_kept.get(ckey)
    if core is None:
        cores = kept.setdefault("cores", {})
        row = cores.get(ckey)
        if row is None:
            tp, sp, cp, comm, etp, batch, core_args = ckey
            row = cores[ckey] = _core_row(model, batch, core_args, act if act is not None else _Fields(
                tp, sp, cp, comm, etp))
        core = rows_kept[ckey] = (np.array(row[:-1], dtype=float), row[-1])
    return core


class _Fields:
    """What :func:`_core_row` reads of a layout: ``tp``, ``sp``, ``cp``, ``cp_comm``, ``expert_tp``."""

    __slots__ = ("tp", "sp", "cp", "cp_comm", "expert_tp")

    def __init__(self, tp, sp, cp, cp_comm, expert_tp):
        self.tp, self.sp, self.cp, self.cp_comm, self.expert_tp = tp, sp, cp, cp_comm, expert_tp


#: The K/V exchanges whose layouts resolve alike (:func:`~llmsizing.parallel.resolve_parallel` checks only
#: Ulysses' ``a2a`` against the model) and whose pieces differ only in the K/V buffers
#: (:func:`~llmsizing.activations.cp_attention_buffers_bytes`): nothing else of a call reads ``cp_comm``.
EXCHANGED = ("p2p", "all_gather")
#: How many call lists' tables :func:`search_pieces` keeps per kept dict for :func:`_exchanged` (a dense
#: model's ~200-640 rows of 28 floats, ~50-150 kB; chapter 17's participant walk keeps 3-11 between a model's
#: pick and its K/V exchange step).
EXCHANGED_KEPT = 16
_CP_COLUMNS = slice(12, 14)                 # (the table's K/V buffers, forward and backward: _phase_sums)


def _exchanged_key(calls: list, core_args: tuple, layout, expert_tp: bool, grad_buffer) -> tuple | None:
    """The key of ``calls`` without their K/V exchange (:func:`_exchanged`), or None: calls of one exchange
    of :data:`EXCHANGED`, each with context parallelism (``cp > 1``: at ``cp = 1`` no exchange is read, and
    :meth:`~llmsizing.plan_memory.SearchMemory.share_cp1` shares those entries already)."""
    if not calls or calls[0][5] not in EXCHANGED:
        return None
    comm = calls[0][5]
    if not all(c[5] == comm and c[4] > 1 for c in calls):
        return None
    return core_args, layout, expert_tp, grad_buffer, tuple(c[:5] + c[6:] for c in calls)


def _exchanged(model, kept: dict, key: tuple, comm: str, core_args: tuple) -> list | None:
    """:func:`search_pieces` of the calls of ``key`` with exchange ``comm`` from the table kept for the same
    calls with the other exchange (issue 38, lc47: chapter 17's K/V exchange step resolved every layout again
    for its ~60-320 calls, ~2-4 ms, to build the same table but two columns): that table with its K/V buffers'
    columns those of ``comm`` (each call's activations' row, :func:`_kept_core`, as the call itself reads it),
    summed by :func:`_phase_sums`: the same floats in the same operations, bit for bit the calls' own. None
    when no table is kept for them."""
    got = kept.get("exchanged", {}).get(key)
    if got is None or got[0] == comm:
        return None
    _, table, widths, fields = got
    table = table.copy()
    rows = [_kept_core(model, kept, (tp, sp, cp, comm, etp, batch, core_args))[0][6:8]
            for tp, sp, cp, etp, batch in fields]
    table[:, _CP_COLUMNS] = np.repeat(np.stack(rows), widths, axis=0)
    return _split(_phase_sums(table), widths)


def _keep_exchanged(kept: dict, key: tuple, value: tuple) -> None:
    """Keep ``value`` (``(exchange, table, widths, each call's layout fields)``) for :func:`_exchanged`, the
    latest :data:`EXCHANGED_KEPT` of ``kept``."""
    store = kept.setdefault("exchanged", collections.OrderedDict())
    store[key] = value
    store.move_to_end(key)
    while len(store) > EXCHANGED_KEPT:
        store.popitem(last=False)


@functools.lru_cache(maxsize=4096)
def _kept_flight(pp: int, m: int, v: int, chunks: tuple) -> tuple:
    """:func:`~llmsizing.parallel.pipeline_in_flight` of an interleaved pipeline (``v`` chunks a stage of
    ``chunks`` layers, :func:`~llmsizing.parallel.stage_chunks`), kept by its arguments alone: the layouts of
    a search (any ``tp``, ``cp``, ZeRO stage or ``dp``) and of other models of as many layers ask for the same
    few (issue 38: ~50 calls a chapter 12 model pick, each checking every chunk's size again). Read-only."""
    return tuple(pipeline_in_flight(pp, m, v, chunks=chunks))


def _state_rows(model, o: dict, state, stages: tuple) -> list:
    """Per stage of ``stages``: the working weights, gradients, optimizer states, LM head's gradient, the
    optimizer's temporaries and ZeRO-3's gathered unit (:func:`~llmsizing.memory._state_side`, kept)."""
    gathered, _, _, by_stage = _kept_state_side(model, o["precision"], o["optimizer"], o["optimizer_impl"],
                                                state, stages)
    return [(s.working_weights_bytes, s.gradients_bytes, s.optimizer_bytes, head, opt, gathered)
            for s, head, opt in (by_stage[i] for i in stages)]


def _core_row(model, batch: int, args: tuple, act) -> tuple:
    """What every stage reads of :func:`~llmsizing.memory._act_core` (kept, the same call as
    :func:`~llmsizing.memory._act_side`'s): the whole model's activations (per layer, layers, layer count,
    embedding, logits, what recomputation rebuilds), the K/V buffers, the loss's temporaries, the working
    set; and the activations themselves (a mixture of experts' stage term)."""
    seq, precision, attention, dropout, recompute, stack, mask = args
    acts, (cp_fwd, cp_bwd), loss, working = _kept_act_core(model, batch, seq, precision, attention, dropout,
                                                            recompute, stack, mask, act.tp, act.sp, act.cp,
                                                            act.cp_comm, act.expert_tp)
    return (acts.per_layer_bytes, acts.layers_bytes, acts.layer_count, acts.embedding_bytes,
            acts.logits_bytes, acts.rebuilt_bytes, cp_fwd, cp_bwd, loss, working, acts)


def _phase_sums(t: np.ndarray) -> np.ndarray:
    """The five pieces of each row (a stage of a call; columns as :func:`search_pieces` builds them), summed
    as ``_search_pieces`` sums :func:`~llmsizing.footprint.phase_values`' tuples (from 0, in order), with
    :func:`~llmsizing.activations.stage_activations`' share of the stage first (the whole model's as is
    without a pipeline). No autocast: its copies are 0.0, and ``x + 0.0`` is ``x``."""
    (W, G, O, head, opt, gathered, per_layer, layers, count, emb, logits, rebuilt, cp_fwd, cp_bwd, loss,
     working, single, first, last, kept, flight, buf, before, end, step, tied, moe, offset) = t.T
    single, first, last, tied, moe = (x.astype(bool) for x in (single, first, last, tied, moe))
    # stage_activations: kept x per layer + rebuilt (+ a mixture of experts' stage term: its MoE layers'
    # share), the embedding's (first stage) and logits (last)
    stage = kept * per_layer + rebuilt
    extra = np.where(single | ~moe, 0.0, flight * offset)      # kept by the forward, not rebuilt (issue 35)
    layers = np.where(single, layers, np.where(moe, stage + extra, stage))
    count = np.where(single, count, kept)
    emb = np.where(single, emb, np.where(first, flight * emb, 0.0))
    logits = np.where(last, logits, 0.0)
    # phase_values on that stage's activations
    total = layers + emb + logits
    rebuilt = np.maximum(layers - count * per_layer - extra, 0.0)
    A = total - rebuilt
    g_fwd = G * (buf + before)                   # (footprint.grad_copies' whole copies: x 0, 1, 2 exact)
    loss = np.where(last, loss, 0.0)
    bwd_temps = working + gathered + cp_bwd
    start_grads = np.where((end > 0) & (before == 0), g_fwd + head, g_fwd)
    emb_grads = np.where(tied, 2 * head, 0.0)
    zero = 0.0
    return np.stack([W + O + g_fwd + A + zero + (gathered + cp_fwd),
                     W + O + g_fwd + A + zero + (loss + gathered),
                     W + O + start_grads + (A - logits + rebuilt) + zero + bwd_temps,
                     W + O + (G * (buf + end) + emb_grads) + emb + bwd_temps,
                     W + O + G * (buf + step) + opt], axis=1)


def prefetch(memory, keys, rc: str, layout=None) -> bool:
    """Fill ``memory`` (a :class:`~llmsizing.plan_memory.SearchMemory` of a dense model) with the entries at
    ``cp = 1`` that the layouts ``keys`` (``(tp, pp, zero, ep, c)`` and optionally ``v``, interleaved chunks
    per stage) asked for with recomputation ``rc`` would read off calls of their own
    (:meth:`~llmsizing.plan_memory.SearchMemory.per_micro`, its reference layout too, with ``v`` too, and
    :meth:`~llmsizing.plan_memory.SearchMemory.states` with ZeRO), all their calls in one
    :func:`search_pieces`, then the same arithmetic as
    :func:`~llmsizing.plan_pricing._memory_coefficients` and
    :meth:`~llmsizing.plan_memory.SearchMemory._entry` on each entry's rows: bit for bit the entries the
    layouts would make one by one, in their order (a reference layout is read with the recomputation that
    asks for it first, as there), and no other (``per_micro`` without interleaving where the layouts' calls
    would read it: the states or the reference not yet known). ``layout``: :func:`search_pieces`'. A mixture
    of experts: ``per_micro`` and its reference layouts only (``ep = 1``, ``dp = 1``), the model states left
    to :meth:`~llmsizing.plan_memory.SearchMemory.prefetch`'s own. Returns whether the model is dense (all
    done)."""
    kw, dense = memory._kw(rc), not memory.model.is_moe
    if not supports(memory.model, kw):
        return dense
    comm, micro, zeros, chunked = memory.cp_comm, {}, {}, {}
    for tp, pp, zero, ep, c, *v in keys:
        v = v[0] if v else 1
        if v > 1 and (tp, pp, rc, c, v) not in memory._micro:
            chunked.setdefault((tp, pp, c, v), None)
        sv = state_chunks(zero, pp, v)             # (the chunks the states hang on: ZeRO-3 under a pipeline)
        if (tp, pp, rc, c) not in memory._micro and (v == 1 or state_key(tp, pp, zero, ep, c, sv)
                                                     not in memory._states
                                                     or (tp, pp, c) not in memory._reference):
            micro.setdefault((tp, pp, c), (1,) if (tp, pp, c) in memory._reference else (1, 2))
        if dense and zero and state_key(tp, pp, zero, ep, c, sv) not in memory._states:
            zeros.setdefault((tp, pp, zero, c, sv), None)
    calls = [(tp, pp, 0, c, 1, comm, b, 1) for (tp, pp, c), bs in micro.items() for b in bs]
    calls += [(tp, pp, 0, c, 1, comm, 1, 1, v) for tp, pp, c, v in chunked]
    calls += [(tp, pp, zero, c, 1, comm, 1, dp, *((sv,) if sv > 1 else ())) for tp, pp, zero, c, sv in zeros
              for dp in (1, 2)]
    if not calls:
        return dense
    got = search_pieces(memory.model, kw, calls, _kept(memory), layout, memory.expert_tp)
    multi = any(d > 1 for d in memory.cps)
    # (each kind of entry worked out on the rows of all its keys at once, a table per width of the pieces:
    # the same elementwise operations, so the same bits as key by key; issue 38, speed28)
    at, coefs = 0, []
    for (tp, pp, c), bs in micro.items():
        coefs.append((len(bs), at))
        at += len(bs)
    done = {}
    for rows in _rows_by_width([i for (n, i) in coefs if n == 2], got):
        b1d1, b2d1 = _stacked(got, rows, (0, 1))
        a = 1                                        # (_memory_coefficients at zero = 0, cp = 1, a = 1)
        b1d2 = b1d1
        per_micro = b2d1 - b1d1
        sharded = 2 * a * (b1d1 - b1d2)
        fixed = b1d1 - per_micro - sharded / a
        done.update(zip(rows, zip(fixed, per_micro, sharded)))
    keys = list(micro)
    refs = {i: memory._reference[key] for key, (n, i) in zip(keys, coefs) if n == 1}
    done.update(_on_references(refs, got))
    for key, (n, i) in zip(keys, coefs):
        coef = done[i]
        if n == 2:
            memory._reference[key] = coef
        tp, pp, c = key
        memory._micro[tp, pp, rc, c] = {1: coef[1]}
        if multi:
            memory._cp_base[tp, pp, rc, c] = coef
    done = _on_references({at + j: memory._reference[tp, pp, c] for j, (tp, pp, c, v) in enumerate(chunked)},
                          got)
    for j, (tp, pp, c, v) in enumerate(chunked):     # (per_micro with v > 1: one call on the reference)
        coef = done[at + j]
        memory._micro[tp, pp, rc, c, v] = {1: coef[1]}
        if multi:
            memory._cp_base[tp, pp, rc, c, v] = coef
    at += len(chunked)
    entries = {}
    for k, (tp, pp, zero, c, sv) in enumerate(zeros):
        u = memory.per_micro(tp, pp, rc, c, 1, sv)
        kind = (memory._kind(tp, pp, zero, 1, c), memory._dps(tp, zero, 1, "one")[0], len(u),
                len(got[at + 2 * k]))
        entries.setdefault(kind, []).append((k, tp, pp, zero, c, sv, u))
    done = {}
    for (kind, *_), group in entries.items():
        if kind != "two":                            # (SearchMemory._entry key by key)
            done.update((k, memory._entry(tp, pp, zero, 1, c, rc, u, got[at + 2 * k], got[at + 2 * k + 1]))
                        for k, tp, pp, zero, c, sv, u in group)
            continue
        k, tp, pp, zero, c, sv, _ = group[0]         # (_entry reads the key only for its kind and dp: shared)
        u = np.stack([x[-1] for x in group])
        b1d1, b1d2 = _stacked(got, [at + 2 * x[0] for x in group], (0, 1))
        fixed, sharded = memory._entry(tp, pp, zero, 1, c, rc, u, b1d1, b1d2)
        done.update((x[0], (f, s)) for x, f, s in zip(group, fixed, sharded))
    for k, (tp, pp, zero, c, sv) in enumerate(zeros):
        memory._states[state_key(tp, pp, zero, 1, c, sv)] = done[k]
    return dense


def _rows_by_width(rows: list, got: list) -> list:
    """``rows`` (positions in ``got``, :func:`search_pieces`' arrays) grouped by their arrays' length."""
    groups: dict = {}
    for i in rows:
        groups.setdefault(len(got[i]), []).append(i)
    return list(groups.values())


def _stacked(got: list, rows: list, steps: tuple) -> list:
    """For each step of ``steps``, the arrays ``got[i + step]`` of ``rows`` as the rows of one table."""
    return [np.stack([got[i + step] for i in rows]) for step in steps]


def _on_references(refs: dict, got: list) -> dict:
    """:func:`_on_reference` of ``(refs[i], got[i])`` for each position ``i`` of ``refs``, on a table per
    width of the pieces (the same elementwise operations: the same bits)."""
    out = {}
    for rows in _rows_by_width(list(refs), got):
        fixed, sharded = (np.stack([refs[i][j] for i in rows]) for j in (0, 2))
        (b1d1,) = _stacked(got, rows, (0,))
        sharded = sharded / 1
        per_micro = b1d1 - fixed - sharded / 1
        out.update((i, (refs[i][0], p, s)) for i, p, s in zip(rows, per_micro, sharded))
    return out


def _on_reference(reference, b1d1) -> tuple:
    """:func:`~llmsizing.plan_pricing._memory_coefficients` with ``base`` the reference layout's
    coefficients, at ``cp = 1``, ``a = 1``, from the call's pieces ``b1d1`` (micro-batch 1, ``dp = 1``)."""
    fixed, _, sharded = reference
    sharded = sharded / 1
    return fixed, b1d1 - fixed - sharded / 1, sharded


def prefetch_cp(memory, keys, rc: str, layout=None) -> None:
    """Fill ``memory`` with ``per_micro`` at every context-parallel degree above 1 for the keys ``(tp, pp,
    c)`` and optionally ``v`` (interleaved chunks per stage) with recomputation ``rc`` whose entry at
    ``cp = 1`` is known and the others not yet: the two degrees' calls of all keys in one
    :func:`search_pieces`, then :func:`~llmsizing.plan_pricing._cp_coefficients`' arithmetic
    (``micro_only``) on each key's rows. ``layout``: :func:`search_pieces`'."""
    kw = memory._kw(rc)
    degrees = sorted(d for d in memory.cps if d > 1)
    if not degrees or not supports(memory.model, kw):
        return
    # (a key's v of 1 left out, as SearchMemory keys per_micro without interleaving)
    todo = [k for k in dict.fromkeys((tp, pp, rc, c, *(x for x in v if x > 1)) for tp, pp, c, *v in keys)
            if k in memory._cp_base]
    pair = degrees[:2]
    calls = [(tp, pp, 0, c, d, memory.cp_comm, 1, 1, *v) for tp, pp, _, c, *v in todo for d in pair]
    if not calls:
        return
    got = search_pieces(memory.model, kw, calls, _kept(memory), layout, memory.expert_tp)
    a = 1                     # (dp_unit at ep = 1)
    n = len(pair)                          # (each key's calls: one per degree of the pair)
    base = {n * k: memory._cp_base.pop(key) for k, key in enumerate(todo)}
    inverse = np.array(degrees, dtype=float)[:, None]
    # (on the rows of all keys of a width at once: the same elementwise operations as key by key, so the
    # same bits; issue 38, speed28)
    for rows in _rows_by_width(list(base), got):
        fixed, sharded = (np.stack([base[i][j] for i in rows]) for j in (0, 2))
        p = [g - fixed - (sharded / d) / a for g, d in zip(_stacked(got, rows, range(n)), pair)]
        if len(degrees) == 1:               # (_memory_coefficients with base, at d)
            for i, p0 in zip(rows, p[0]):
                memory._micro[todo[i // n]][degrees[0]] = p0
            continue
        (c1, c2), (p1, p2) = pair, p
        y = (c2 * p2 - c1 * p1) / (c2 - c1)
        x = (p1 - y) * c1
        at = x[:, None, :] / inverse[None] + y[:, None, :]            # (key, degree, piece)
        for i, by_degree in zip(rows, at):
            memory._micro[todo[i // n]].update(zip(degrees, by_degree))


def _kept(memory) -> dict:
    """What :func:`search_pieces` keeps for ``memory``'s search (its model and keywords but ``recompute``),
    held by the :class:`~llmsizing.plan_memory.SearchMemory` itself (it lives as long as that search's
    entries) and shared with the other searches of the same model, keywords but ``seq``, ``recompute`` and
    ``grad_buffer``, and ``expert_tp`` (:func:`_shared_kept`; issue 38: chapter 17's widget moving its context
    resolved every layout and read its model states' parts again; a layout's K/V exchange is in its key, so
    another exchange shares little). No part kept reads ``grad_buffer``: the gradients' copies are read per
    call, and the stages' columns kept with them are keyed by those copies (pick30: chapter 12's grad buffer
    control resolved every layout again). What it keeps of the context is keyed by it: the activations' rows
    (``cores``, ``seq`` in their key); the layouts' parts (resolved layout, model states' rows, stages,
    layers per stage) and the MoE layouts' ``resolve_parallel`` (:func:`~llmsizing.moe_prefetch._as_is`, at
    ``cp = 1``) read the context only in the check that it splits over ``cp``, made again where it fails: the
    same parts, bit for bit, whichever search made them. A keyword that cannot be hashed: kept for this search
    alone, as before."""
    kept = memory.__dict__.get("_dense_arrays")
    if kept is None:
        other = tuple(sorted((k, v) for k, v in memory.kw.items()
                             if k not in ("seq", "recompute", "grad_buffer")))
        try:
            kept = _shared_kept(memory.model, other, memory.expert_tp)
        except TypeError:                                          # (unhashable)
            kept = {}
        memory.__dict__["_dense_arrays"] = kept
    return kept


#: How many models and recipes :func:`_shared_kept` keeps parts for (plan_memory's SEARCH_MEMORIES_KEPT).
SHARED_KEPT = 16


@functools.lru_cache(maxsize=SHARED_KEPT)
def _shared_kept(model, kw_items: tuple, expert_tp: bool) -> dict:
    """The dict of :func:`search_pieces`' kept parts shared by the searches of ``model`` with the keywords
    ``kw_items`` (sorted items, without ``seq`` and ``recompute``) and ``expert_tp`` (:func:`_kept`)."""
    return {}
