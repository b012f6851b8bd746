"""A mixture of experts' model states for the planner's memory fit, many layouts on one set of arrays (Part
III, "How many GPUs do you need?"; chapter 17's widget, issue 35): :func:`prefetch_states` fills a
:class:`~llmsizing.plan_memory.SearchMemory` with the ``(fixed, sharded)`` entries of the layouts it is asked
for that would each read calls of their own, every ``(tp, pp, ZeRO stage, accumulation class)`` group's
``ep`` and ``dp`` as one :class:`~llmsizing.moe_arrays.EpLayouts`, and all the groups' pieces summed in one
:func:`~llmsizing.dense_arrays._phase_sums` (moestates35: one :func:`~llmsizing.memory._search_pieces` per
group, ~48 per Qwen3-30B-A3B search at 128K; a model move ~2% faster), and :func:`stored_states` reads the
entries the memory fit's table needs, a mixture of experts' ``A + B / ep`` ones on rows.

No formula here. Each group's model states come from the same kept
:func:`~llmsizing.memory._state_side` of its :class:`~llmsizing.moe_arrays.EpLayouts` (an entry per layout),
its activations from :func:`~llmsizing.dense_arrays._core_row` (the same kept
:func:`~llmsizing.memory._act_core` :func:`~llmsizing.memory._search_pieces` reads), and the five pieces of
each (layout, stage) from :func:`~llmsizing.dense_arrays._phase_sums`, which does
:func:`~llmsizing.footprint.phase_values`' float operations in its order (NumPy's float64 arithmetic is
Python's; the states only ever enter sums): bit for bit each layout's own call. A group these arrays do not
take (a layout that resolves to another, kept pipeline outputs, interleaving, partial recomputation) goes
through :func:`~llmsizing.memory._search_pieces` as before. ``tests/test_moe_prefetch.py`` compares the
entries with that path on chapter 17's mixtures of experts and a hypothesis grid.
"""

from __future__ import annotations

import numpy as np

from .dense_arrays import _DEFAULTS, _core_row, _kept, _phase_sums, supports
from .footprint import _GRAD_COPIES
from .memory import _act_layout, _kept_in_flight, _kept_state_side, _search_pieces
from .moe import EpLayouts, stage_offset_bytes
from .parallel import kept_parallel, layers_per_stage, resolve_parallel
from .plan_pricing import _heavy_stages, pipeline_split


def prefetch_states(memory, keys, rc: str, batched: bool = True) -> None:
    """:meth:`~llmsizing.plan_memory.SearchMemory.prefetch`'s mixture-of-experts part: the entries of
    :meth:`~llmsizing.plan_memory.SearchMemory.states` that the layouts ``keys`` (``(tp, pp, zero, ep, c,
    ...)``, asked for with recomputation ``rc``) would each read off calls of their own, one
    :class:`~llmsizing.moe_arrays.EpLayouts` per ``(tp, pp, zero, c)`` (its ``ep`` and ``dp``), then
    :meth:`~llmsizing.plan_memory.SearchMemory._entry` on each layout's column, in the same order: bit for
    bit the entries it would make. ``batched=False``: one :func:`~llmsizing.memory._search_pieces` per group
    (the path before moestates35, which the tests compare with)."""
    groups: dict = {}
    for tp, pp, zero, ep, c, *_ in keys:                 # (a mixture of experts: no interleaving)
        if (tp, pp, zero, ep, c) in memory._states:
            continue
        kind = memory._kind(tp, pp, zero, ep, c)
        if kind in ("reference", "affine"):
            continue
        eps = groups.setdefault((tp, pp, zero, c), {})
        eps[ep] = kind
        if kind == "one":                          # its fixed: from the first two ep's entries
            for e in memory.eps[:2]:
                if (tp, pp, zero, e, c) not in memory._states:
                    eps.setdefault(e, "two")
    jobs = []
    for (tp, pp, zero, c), eps in groups.items():
        calls = [(ep, a) for ep in eps for a in memory._dps(tp, zero, ep, eps[ep])]
        if len(calls) < 2:
            continue                                     # (one call either way)
        u = memory.per_micro(tp, pp, rc, c, 1)
        (e0, d0), etp = calls[0], memory.expert_tp      # (each (ep, dp) a layout the search checked)
        pars = EpLayouts.over(kept_parallel(tp=tp, pp=pp, dp=d0, zero=zero, sp=tp > 1, cp=1,
                                            cp_comm=memory.cp_comm, ep=e0, expert_tp=etp,
                                            **pipeline_split(memory.model, pp)), calls)
        jobs.append(((tp, pp, zero, c), eps, calls, u, pars))
    if not jobs:
        return
    kw = memory._kw(rc)
    fast = batched and supports(memory.model, kw)
    columns = _columns(memory.model, kw, jobs, _kept(memory)) if fast else [None] * len(jobs)
    for ((tp, pp, zero, c), eps, calls, u, pars), got in zip(jobs, columns):
        if got is None:                                 # (one call of the group's layouts)
            got = _search_pieces(memory.model, pars, _heavy_stages(memory.model, pp), batch=1, grad_accum=c,
                                 **kw)
            got = np.array(np.broadcast_arrays(*got), dtype=float).T       # (layout, piece)
        column = {call: got[j] for j, call in enumerate(calls)}
        for ep in sorted(eps, key=lambda e: eps[e] == "one"):            # the first two ep first
            got_ep = [column[ep, dp] for dp in memory._dps(tp, zero, ep, eps[ep])]
            memory._states[tp, pp, zero, ep, c] = memory._entry(tp, pp, zero, ep, c, rc, u, *got_ep)


def _columns(model, kw: dict, jobs: list, kept: dict) -> list:
    """Each job's pieces as a (layout, piece) table, pieces stage by stage as
    :func:`~llmsizing.memory._search_pieces` orders them; None for a job these arrays do not take. ``kept``:
    :func:`~llmsizing.dense_arrays.search_pieces`' kept parts of the search (its activations' rows)."""
    o = {**_DEFAULTS, **kw}
    seq = o["seq"]
    core_args = (seq, o["precision"], o["attention"], o["dropout"], o["recompute"], o["stack"],
                 o["attention_mask"])
    cores, resolved = kept.setdefault("cores", {}), kept.setdefault("moe_resolved", {})
    blocks, shapes = [], []
    for (tp, pp, zero, c), _, calls, _, pars in jobs:
        firsts = pars.firsts()
        act = _act_layout(firsts[0])
        if (not all(_as_is(p, model, seq, resolved, pars._key[0]) for p in firsts) or act.virtual_stages != 1
                or not (act.deallocate_pipeline_outputs or act.pp == 1) or act.pp != pars.pp):
            shapes.append(None)                          # (as _search_pieces: through it)
            continue
        stages = tuple(sorted(set(_heavy_stages(model, pp))))
        gathered, _, _, by_stage = _kept_state_side(model, o["precision"], o["optimizer"],
                                                    o["optimizer_impl"], pars, stages)
        ckey = (act.tp, act.sp, act.cp, act.cp_comm, act.expert_tp, 1, core_args)    # (dense_arrays' key)
        core = cores.get(ckey)
        if core is None:
            core = cores[ckey] = _core_row(model, 1, core_args, act)
        flight, n_pp = _kept_in_flight(act.pp, min(c, act.pp)), pp
        n_layers = layers_per_stage(model.layers, act)
        acts, n = core[-1], len(calls)
        moe = n_pp > 1 and bool(getattr(acts, "moe_layers", None))      # (stage_activations' MoE term)
        for i in stages:
            s, head, opt = by_stage[i]
            block = np.empty((n, 28))
            for j, x in enumerate((s.working_weights_bytes, s.gradients_bytes, s.optimizer_bytes, head, opt,
                                   gathered)):
                block[:, j] = x                          # (an entry per layout, or one for all)
            block[:, 6:] = (*core[:-1], n_pp == 1, i == 0, i == n_pp - 1, flight[i] * n_layers[i], flight[i],
                            *_GRAD_COPIES[o["grad_buffer"] if zero <= 1 else False, c > 1],   # (gradients)
                            model.tied_embeddings and n_pp == 1, moe,
                            stage_offset_bytes(acts, act, i) if moe else 0.0)
            blocks.append(block)
        shapes.append((len(stages), n))
    pieces = _phase_sums(np.concatenate(blocks)) if blocks else None
    out, k = [], 0
    for shape in shapes:
        if shape is None:
            out.append(None)
            continue
        ns, n = shape
        out.append(pieces[k:k + ns * n].reshape(ns, n, 5).transpose(1, 0, 2).reshape(n, ns * 5))
        k += ns * n
    return out



def _as_is(par, model, seq: int, kept: dict, shared: tuple) -> bool:
    """Whether :func:`~llmsizing.parallel.resolve_parallel` gives ``par`` (a layout the search checked) back
    as it is, field for field (else its stage split written out: :func:`~llmsizing.memory._search_pieces` then
    weighs the resolved layouts), kept in ``kept`` per ``par`` but ``dp``, which neither its checks nor what
    it writes out read (a refused layout raises each time, as there); ``shared``: its fields but ``ep`` and
    ``dp`` (:class:`~llmsizing.moe_arrays.EpLayouts`' own key)."""
    key = (shared, par.ep)
    got = kept.get(key)
    if got is None:
        got = kept[key] = resolve_parallel(par, model, seq=seq) == par
    return got


def stored_states(memory, keys, rc: str) -> list:
    """``(fixed, sharded)`` of each of ``keys`` (:meth:`~llmsizing.plan_memory.SearchMemory.states`' ``(tp,
    pp, zero, ep, c, v)``, distinct, asked for with recomputation ``rc``), in order: those kept read
    directly; those read as ``A + B / ep`` from the first two ``ep`` (``"affine"``,
    :meth:`~llmsizing.plan_memory.SearchMemory._kind`) whose two entries are kept, all at once per width of
    the pieces (:func:`~llmsizing.plan_pricing.ep_affine`'s operations on rows: entry for entry the same
    floats), after the others, which :meth:`~llmsizing.plan_memory.SearchMemory.states` makes one by one in
    order (the affine ones make no call and read no entry but those two, so the order of the others' calls
    is as before)."""
    stored, out, later = getattr(memory, "_states", {}), [], []
    e1, e2 = (tuple(memory.eps[:2]) + (None, None))[:2] if hasattr(memory, "eps") else (None, None)
    for tp, pp, zero, ep, c, v in keys:
        key = (tp, pp, zero, ep, c) if v == 1 else (tp, pp, zero, ep, c, v)
        got = stored.get(key)
        if got is None and v == 1 and getattr(memory, "by_ep", False) and ep not in (e1, e2) \
                and not (zero == 0 and ep == 1) and memory._ep_affine(pp, zero, c):
            s1, s2 = stored.get((tp, pp, zero, e1, c)), stored.get((tp, pp, zero, e2, c))
            if s1 is not None and s2 is not None:
                later.append((len(out), key, s1, s2))
                out.append(None)
                continue
        out.append(got if got is not None else memory.states(tp, pp, zero, ep, c, rc, v))
    by_width: dict = {}
    for item in later:
        by_width.setdefault(len(item[2][0]), []).append(item)
    for items in by_width.values():
        w = np.array([(1 / key[3] - 1 / e1) / (1 / e1 - 1 / e2) for _, key, _, _ in items])[:, None]
        both = []
        for j in (0, 1):                                      # fixed, sharded: at_e1 + (at_e1 - at_e2) x w
            a1 = np.array([s1[j] for _, _, s1, _ in items])
            a2 = np.array([s2[j] for _, _, _, s2 in items])
            both.append(a1 + (a1 - a2) * w)
        for k, (pos, key, _, _) in enumerate(items):
            out[pos] = stored[key] = (both[0][k], both[1][k])
    return out
