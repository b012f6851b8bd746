"""Which of the planner's candidate plans fit in memory (Part III, "How many GPUs do you need?"), split out
of :mod:`llmsizing.planner` (issue 33: a mixture of experts at long context took seconds to search).

No formula of its own: every byte is read off :func:`~llmsizing.memory.training_memory` (through
:func:`~llmsizing.plan_pricing._pieces` and :func:`~llmsizing.plan_pricing._memory_coefficients`), with far
fewer calls than one set of coefficients per layout (:class:`SearchMemory`; :meth:`SearchMemory.prefetch`:
a mixture of experts' layouts that differ in ``ep`` and ``dp`` only in one call, a dense model's layouts all
on arrays, :mod:`llmsizing.dense_arrays`), each recomputation weighed on all layouts' candidates at once
(:func:`fitting_plans`). ``tests/test_planner_speed.py`` compares whole searches with the direct one;
``tests/test_plan_memory.py`` and ``tests/test_dense_arrays.py`` check them key by key.
"""

from __future__ import annotations

import functools
import weakref

import numpy as np

from .dense_arrays import prefetch as arrays_prefetch, prefetch_cp as arrays_prefetch_cp
from .moe_layouts import dp_unit
from .moe_prefetch import prefetch_states
from .parallel import OP_SAC_MODES
from .plan_candidates import _candidates, _pair_table, state_chunks, state_key  # noqa: F401
from .plan_moe import has_options
from .plan_pricing import (_cp_coefficients, _least_recompute_layers, _memory_coefficients,
                           _one_layer_coefficients, _pieces, _total_bytes, chunk_top, ep_affine)  # noqa: F401
from .plan_tables import kept_candidates, least_fit, pair_keys, search_structure, table_totals  # noqa: F401
from .precision import RECIPES


class SearchMemory:
    """The memory coefficients of one search: :func:`~llmsizing.plan_pricing._memory_coefficients`' ``(fixed,
    per_micro, sharded)``, a GPU's pieces being ``fixed + micro x per_micro + sharded / dp``, for any layout
    ``(tp, pp, zero, ep)``, recomputation ``rc`` (``"full1"``: the first layer of each stage only),
    accumulation class ``c`` and context-parallel degree ``cp``.

    What it relies on: :func:`~llmsizing.memory.training_memory` builds each piece
    (:func:`~llmsizing.footprint.step_phases`) as the model states' bytes (weights, gradients, optimizer
    states and temporaries, autocast copies, ZeRO-3's gathered unit, the LM head's gradient: none depends on
    the micro-batch or the recomputation, nor on ``cp`` but through ZeRO's ``dp x cp`` shards) plus bytes
    proportional to the micro-batch (the activations, the loss's temporaries, the layer's working set, context
    parallelism's K and V buffers: none depends on the ZeRO stage, ``ep`` or ``dp``); and the stages weighed
    depend on ``pp`` only (:func:`~llmsizing.moe_layouts.heavy_stages`). Hence two kinds of entries, each
    worked out once from few calls:

    * ``per_micro`` per ``(tp, pp, rc, c)``, read off the reference layout ``zero = 0, ep = 1, dp = 1``:
      micro-batches 1 and 2 at ``cp = 1`` (one call once the reference's states are known, as
      :func:`~llmsizing.plan_pricing._partial_coefficients` reads a recomputation), and every other ``cp``
      from two degrees (``X / cp + Y``, :func:`~llmsizing.plan_pricing._cp_coefficients`) when one is first
      asked for;
    * ``fixed`` and ``sharded`` per ``(tp, pp, zero, ep, c)`` (``sharded / cp`` at ``cp``): the reference's
      for ``zero = 0, ep = 1``; else one call at ``dp = a``, the smallest ``dp`` the layout allows
      (:func:`~llmsizing.moe_layouts.dp_unit`), and with ZeRO one at ``2 a``, less ``per_micro`` of the
      recomputation they ran with; with ``by_ep`` (a mixture of experts, ``foreach`` optimizer step), for
      ZeRO-0, ZeRO-1 without a pipeline and ZeRO-2 with more than one micro-batch (:meth:`_ep_affine`),
      every ``ep`` beyond the first two of ``eps`` as ``A + B / ep`` from those two
      (:func:`~llmsizing.plan_pricing.moe_ep_coefficients` says why).

    Equal to the direct coefficients to floating-point rounding (within 1e-12 of the largest):
    ``tests/test_plan_memory.py`` compares them for dense models and mixtures of experts, every ZeRO stage,
    ``ep``, recomputation, accumulation class and ``cp``."""

    def __init__(self, model, kw: dict, cps, cp_comm: str, eps=(1,), expert_tp: bool = False,
                 by_ep: bool = False):
        self.model, self.kw, self.cps, self.cp_comm = model, kw, tuple(cps), cp_comm
        self.eps, self.expert_tp, self.by_ep = tuple(eps), expert_tp, by_ep
        self._micro: dict = {}         # (tp, pp, rc, c) -> {cp: per_micro}
        self._cp_base: dict = {}       # (tp, pp, rc, c) -> its coefficients at cp = 1, until cp > 1 is asked
        self._reference: dict = {}     # (tp, pp, c) -> the reference layout's coefficients at cp = 1
        self._states: dict = {}        # (tp, pp, zero, ep, c) -> (fixed, sharded) at cp = 1

    def _kw(self, rc: str) -> dict:
        if rc == "full1":
            return {**self.kw, "recompute": "full", "recompute_layers": 1}
        return {**self.kw, "recompute": rc}

    def per_micro(self, tp: int, pp: int, rc: str, c: int, cp: int, v: int = 1) -> np.ndarray:
        """What one more sequence in the micro-batch adds to each piece (any ZeRO stage, ``ep``, ``dp``), with
        ``v`` interleaved model chunks per stage (issue 34: the states are those without interleaving, only
        the micro-batches in flight move, so one call reads it once the reference is known)."""
        key = (tp, pp, rc, c) if v == 1 else (tp, pp, rc, c, v)
        if key not in self._micro:
            model, kw, cp_comm, etp = self.model, self._kw(rc), self.cp_comm, self.expert_tp
            if v > 1 and (tp, pp, c) not in self._reference:
                self.per_micro(tp, pp, rc, c, 1)
            ref = self._reference.get((tp, pp, c))
            if v > 1:
                coef = _memory_coefficients(model, kw, tp, pp, 0, c, 1, cp_comm, ref, expert_tp=etp, v=v)
            elif ref is None:                            # micro-batches 1 and 2: two calls
                coef = _memory_coefficients(model, kw, tp, pp, 0, c, 1, cp_comm, expert_tp=etp)
                self._reference[tp, pp, c] = coef
            else:                                        # the states are known: one call
                coef = _memory_coefficients(model, kw, tp, pp, 0, c, 1, cp_comm, ref, expert_tp=etp)
            self._micro[key] = {1: coef[1]}
            if any(d > 1 for d in self.cps):
                self._cp_base[key] = coef
        out = self._micro[key]
        if cp not in out:          # every cp above 1 at once, when one is first asked for (issue 32)
            out.update(_cp_coefficients(self.model, self._kw(rc), tp, pp, 0, c, self.cps, self.cp_comm,
                                        self._cp_base.pop(key), expert_tp=self.expert_tp, micro_only=True,
                                        v=v))
        return out[cp]

    def states(self, tp: int, pp: int, zero: int, ep: int, c: int, rc: str, v: int = 1) -> tuple:
        """``(fixed, sharded)`` of the layout at ``cp = 1``; ``rc``: a recomputation its calls may use; ``v``
        interleaved chunks per stage, which only ZeRO-3 under a pipeline's states depend on
        (:func:`state_chunks`)."""
        v = state_chunks(zero, pp, v)
        key = state_key(tp, pp, zero, ep, c, v)
        if key not in self._states:
            if zero == 0 and ep == 1:                      # the reference layout itself
                self.per_micro(tp, pp, rc, c, 1)
                fixed, _, sharded = self._reference[tp, pp, c]
            elif self.by_ep and ep not in self.eps[:2] and self._ep_affine(pp, zero, c):
                e1, e2 = self.eps[:2]
                s1, s2 = (self.states(tp, pp, zero, e, c, rc) for e in (e1, e2))
                fixed, sharded = (ep_affine(x1, x2, e1, e2, ep) for x1, x2 in zip(s1, s2))
            else:                                          # as _memory_coefficients, per_micro known
                u = self.per_micro(tp, pp, rc, c, 1, v)
                dps = self._dps(tp, zero, ep, self._kind(tp, pp, zero, ep, c))
                got = [_pieces(self.model, self._kw(rc), tp, pp, zero, c, 1, self.cp_comm, ep, self.expert_tp,
                               batch=1, dp=dp, v=v) for dp in dps]
                fixed, sharded = self._entry(tp, pp, zero, ep, c, rc, u, *got)
            self._states[key] = (fixed, sharded)
        return self._states[key]

    def _entry(self, tp: int, pp: int, zero: int, ep: int, c: int, rc: str, u, b1d1, b1d2=None) -> tuple:
        """``(fixed, sharded)`` of a layout :meth:`states` reads off calls, from ``per_micro`` (``u``) and the
        pieces at ``dp = a`` (``b1d1``) and, with ZeRO and kind ``"two"`` (:meth:`_kind`), ``2 a``."""
        a = self._dps(tp, zero, ep, "one")[0]
        if self._kind(tp, pp, zero, ep, c) == "one":
            # what ZeRO-1/2 keep whole is A + B / ep (what they shard may not be): the fixed part from the
            # first two ep, the sharded one from this call alone (_ep_affine says why)
            e1, e2 = self.eps[:2]
            fixed = ep_affine(*(self.states(tp, pp, zero, e, c, rc)[0] for e in (e1, e2)), e1, e2, ep)
            return fixed, a * (b1d1 - u - fixed)
        sharded = 2 * a * (b1d1 - b1d2) if zero else np.zeros_like(b1d1)
        return b1d1 - u - sharded / a, sharded

    def _kind(self, tp: int, pp: int, zero: int, ep: int, c: int) -> str:
        """How :meth:`states` reads the layout's entry: ``"reference"`` (``zero = 0, ep = 1``), ``"affine"``
        (every piece ``A + B / ep``, from the first two ``ep``), ``"one"`` (``sharded`` off one call at
        ``dp = a``, ``fixed`` from the first two ``ep``) or ``"two"`` (calls at ``dp = a`` and, with ZeRO,
        ``2 a``)."""
        if zero == 0 and ep == 1:
            return "reference"
        if self.by_ep and ep not in self.eps[:2]:
            return "affine" if self._ep_affine(pp, zero, c) else "one" if zero in (1, 2) else "two"
        return "two"

    def prefetch(self, keys, rc: str) -> None:
        """Work out at once the entries of :meth:`states` that the layouts ``keys`` (``(tp, pp, zero, ep,
        c, v)``, asked for with recomputation ``rc``) would each read off calls of their own: one call per
        ``(tp, pp, zero, c)`` of a mixture of experts, all its ``ep`` and ``dp`` together
        (:class:`~llmsizing.moe.EpLayouts`; issue 35: ZeRO-1 with a pipeline took one or two calls per
        ``ep``), then :meth:`states`' own arithmetic on each layout's column, in its order: bit for bit the
        entries it would make."""
        if arrays_prefetch(self, keys, rc):     # a dense model's all on arrays (interleaved too), a MoE's
            return                              # per_micro (issue 35, dense35)
        recipe = RECIPES[self.kw.get("precision", "bf16-mixed")]
        # (plan()'s MTP module or token dropping: every entry off its own calls, plan_moe.option_pieces)
        if (recipe.autocast or has_options(self.kw)
                or self.kw.get("optimizer_impl", "foreach") != "foreach"):
            return
        prefetch_states(self, keys, rc)       # (one EpLayouts per (tp, pp, zero, c), summed on arrays)

    def prefetch_cp(self, keys, rc: str) -> None:
        """:meth:`per_micro` above ``cp = 1`` of ``keys`` (``(tp, pp, c, v)``) on arrays (dense_arrays)."""
        arrays_prefetch_cp(self, keys, rc)

    def _dps(self, tp: int, zero: int, ep: int, kind: str) -> tuple:
        """The ``dp`` of the calls :meth:`states` makes for a layout of ``kind`` (:meth:`_kind`)."""
        a = dp_unit(tp, 1, ep, self.expert_tp) if self.model.is_moe else 1
        return (a, 2 * a) if kind == "two" and zero else (a,)

    def _ep_affine(self, pp: int, zero: int, c: int) -> bool:
        """Whether every piece of the states is ``A + B / ep`` (:func:`~llmsizing.plan_pricing.ep_affine`):
        ZeRO-0; ZeRO-1 without a pipeline; ZeRO-2 (no pipeline) with more than one micro-batch and an LM head
        of its own (the gradients of the previous micro-batch are alive: the LM head's gradient of a single
        micro-batch, which is not of that form, never counts;
        :func:`~llmsizing.plan_pricing.moe_ep_coefficients` says why). Otherwise, with ZeRO-1 or 2, only
        what is not sharded (``fixed``: the weights, ZeRO-1's gradients, the activations) is: what is
        sharded over ``dp`` (``sharded``) holds the terms that are not of that form (ZeRO-1's ``foreach``
        temporary split by each stage's share of the parameters, ZeRO-2's LM head gradient), all
        ``1 / dp``."""
        return (zero == 0 or pp == 1 and zero == 1
                or pp == 1 and zero == 2 and c > 1 and not self.model.tied_embeddings)

    def share_cp1(self, other: "SearchMemory") -> None:
        """Take the entries at ``cp = 1`` that ``other`` holds and this one lacks: ``other`` weighs the same
        model, recipe and degrees with context parallelism exchanging K and V another way (``cp_comm``), which
        nothing at ``cp = 1`` reads (no exchange: :func:`~llmsizing.activations.cp_attention_buffers_bytes`
        is 0, and no model state reads it), so they are the entries this one would make (issue 35: chapter
        17's widget moving its K/V exchange). Each ``per_micro`` taken keeps its coefficients at ``cp = 1``
        for the degrees above 1: the reference's ``fixed`` and ``sharded`` (which every one of them was read
        with) and its own ``per_micro``."""
        if (other.model, other.kw, other.cps, other.eps, other.expert_tp, other.by_ep) != (
                self.model, self.kw, self.cps, self.eps, self.expert_tp, self.by_ep):
            raise ValueError("share_cp1: other must weigh the same model, recipe and degrees")
        for key, ref in other._reference.items():
            self._reference.setdefault(key, ref)
        for key, st in other._states.items():
            self._states.setdefault(key, st)
        multi = any(d > 1 for d in self.cps)
        for key, out in other._micro.items():
            if key not in self._micro:
                self._micro[key] = {1: out[1]}
                if multi:
                    fixed, _, sharded = self._reference[key[0], key[1], key[3]]
                    self._cp_base[key] = (fixed, out[1], sharded)

    def coefficients(self, tp: int, pp: int, zero: int, ep: int, rc: str, c: int, cp: int,
                     v: int = 1) -> tuple:
        """``(fixed, per_micro, sharded)`` of the layout with ``cp`` context parallelism (ZeRO over
        ``dp x cp``) and ``v`` interleaved model chunks per stage."""
        fixed, sharded = self.states(tp, pp, zero, ep, c, rc, v)
        # (x / 1 = x)
        return fixed, self.per_micro(tp, pp, rc, c, cp, v), sharded if cp == 1 else sharded / cp

    def one_layer(self, tp: int, pp: int, zero: int, ep: int, c: int, cp: int, layers: int,
                  v: int = 1) -> tuple:
        """The coefficients of partial recomputation with one layer of each stage (of ``layers`` layers)
        recomputed: from those without recomputation and with every layer recomputed when the first are known
        (:func:`~llmsizing.plan_pricing._one_layer_coefficients`, no call), else read off calls. With ``v``
        interleaved chunks, one layer of each chunk (``layers``: a chunk's)."""
        if (tp, pp, "none", c) + ((v,) if v > 1 else ()) in self._micro:
            return _one_layer_coefficients(self.coefficients(tp, pp, zero, ep, "none", c, cp, v),
                                           self.coefficients(tp, pp, zero, ep, "full", c, cp, v), layers)
        return self.coefficients(tp, pp, zero, ep, "full1", c, cp, v)


class _PerRecompute:
    """:class:`SearchMemory` for an autocast recipe: one per recomputation. Full recomputation frees a
    rerun layer's autocast weight copies once the forward leaves autocast
    (:func:`~llmsizing.footprint.phase_values`), so the model states' pieces depend on what is recomputed and
    :class:`SearchMemory` may not share them across recomputations; partial recomputation is read off calls
    (``"full1"``), not off those of ``"none"`` and ``"full"``."""

    def __init__(self, *args):
        self._args, self._each, self._micro = args, {}, {}        # (_micro: none to read one layer off)

    def _of(self, rc: str) -> SearchMemory:
        return self._each.setdefault(rc, SearchMemory(*self._args))

    def per_micro(self, tp, pp, rc, c, cp, v=1):
        return self._of(rc).per_micro(tp, pp, rc, c, cp, v)

    def states(self, tp, pp, zero, ep, c, rc, v=1):
        return self._of(rc).states(tp, pp, zero, ep, c, rc, v)

    def coefficients(self, tp, pp, zero, ep, rc, c, cp, v=1):
        return self._of(rc).coefficients(tp, pp, zero, ep, rc, c, cp, v)

    def one_layer(self, tp, pp, zero, ep, c, cp, layers, v=1):
        return self.coefficients(tp, pp, zero, ep, "full1", c, cp, v)

    def prefetch(self, keys, rc) -> None:
        """(:meth:`SearchMemory.prefetch` reads no autocast recipe, nor its ``prefetch_cp``.)"""
    prefetch_cp = prefetch

    def share_cp1(self, other: "_PerRecompute") -> None:
        for rc, sub in other._each.items():
            self._of(rc).share_cp1(sub)


#: The relative margin by which the model states alone (a candidate's total at a micro-batch of 0) must exceed
#: a GPU's limit for :func:`fitting_plans` to weigh no heavier recomputation of it on that GPU: what a
#: micro-batch adds is bytes of activations, never negative, so such a total is a floor under every
#: recomputation's (floating-point addition is monotone); the margin only covers rounding in coefficients
#: that are extrapolated (``cp``, ``ep``) instead of read off a call.
FLOOR_MARGIN = 1e-9

#: How many :class:`SearchMemory` objects :func:`kept_search_memory` keeps: chapter 17's widget warms the ten
#: mixtures of experts and eight neighbours of its default at build, so 16 overflowed after a reader's model
#: pick (part29: +25-35 ms a move); 32 cost ~13 MiB more after 30 model picks in chapters 12 and 17.
SEARCH_MEMORIES_KEPT = 32


@functools.lru_cache(maxsize=SEARCH_MEMORIES_KEPT)
def kept_search_memory(model, kw_items: tuple, cps, cp_comm: str, eps=(1,), expert_tp: bool = False,
                       by_ep: bool = False) -> SearchMemory:
    """One :class:`SearchMemory` per setting (``kw_items``: its ``kw`` as sorted items), shared by the
    searches that weigh the same model with the same recipe and degrees (issue 35): its coefficients depend
    on neither the GPUs, nor the global batch, nor ``max_gpus``, so that
    :func:`~llmsizing.time_cost.cost_by_gpu`'s search per GPU type and chapter 17's widget moving the GPUs,
    the tokens per batch or the GPU limit reuse what an earlier search read off
    :func:`~llmsizing.memory.training_memory`. Its entries are only ever added, each the same whoever asks
    first. A new one starts with the entries at ``cp = 1`` of a kept one that differs in ``cp_comm`` alone
    (:meth:`SearchMemory.share_cp1`)."""
    kind = _PerRecompute if RECIPES[dict(kw_items).get("precision", "bf16-mixed")].autocast else SearchMemory
    memory = kind(model, dict(kw_items), cps, cp_comm, eps, expert_tp, by_ep)
    setting = (model, kw_items, tuple(cps), tuple(eps), expert_tp, by_ep)
    if cp_comm in _SHARED_COMMS:
        for other in _SHARED_COMMS:
            sibling = _SIBLINGS.get((setting, other)) if other != cp_comm else None
            if sibling is not None:
                memory.share_cp1(sibling)
        _SIBLINGS[setting, cp_comm] = memory
    return memory


#: The K/V exchanges whose searches share their entries at ``cp = 1`` (:meth:`SearchMemory.share_cp1`): the
#: two the planner searches.
_SHARED_COMMS = ("p2p", "all_gather")
#: The :class:`SearchMemory` objects by setting and exchange, while :func:`kept_search_memory` keeps them.
_SIBLINGS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def fitting_plans(model, layouts, memory: SearchMemory, *, gpu_list, domains: dict, limits: np.ndarray,
                  global_batch: int, max_gpus, micros, cps, rcs, partial: bool, expert_tp: bool, most: int,
                  in_all: int = 2, counts=None, segments: bool = False, kept_totals: dict | None = None):
    """The plans of :func:`~llmsizing.planner.plan`'s search that fit, as ``(columns, total bytes)``, or
    ``(None, None)``: for every layout ``(tp, pp, zero, ep, v)`` of ``layouts`` (``v`` interleaved chunks),
    every GPU of ``gpu_list`` whose scale-up domain (``domains``) ``tp`` divides and every candidate
    (:func:`_candidates`), the lightest recomputation of ``rcs`` whose per-GPU total is at most the GPU's
    entry of ``limits``; with ``partial``, partial recomputation in place of full (the fewest layers per
    stage, :func:`~llmsizing.plan_pricing._least_recompute_layers`). ZeRO over one data-parallel rank (``dp =
    cp = 1``) is no ZeRO and left out. A ``ValueError`` when more than ``most`` plans without interleaving
    or ZeRO-2/3 under a pipeline fit, or more than ``in_all x most`` in all (2; 4 with
    ``plan(shard_under_pipeline=True)``, whose ZeRO-2/3 pipelines double the layouts).

    The columns: ``gpu`` (an index into ``gpu_list``), ``tp``, ``cp``, ``pp``, ``zero``, ``micro``, ``dp``,
    ``m``, ``rc`` (an index into ``rcs``), ``ep``, ``vp`` (interleaved chunks per stage), ``rl`` (layers
    recomputed per model chunk, a stage without interleaving, -1: none), rows in the
    order of the layouts, then (cp, micro-batch), GPU, recomputation and ``dp``. Each recomputation is weighed
    only on the candidates some GPU has none for yet (a heavier one is never kept), all layouts' candidates at
    once (issue 35: one :func:`~llmsizing.plan_pricing._total_bytes` per recomputation, each candidate's
    coefficients a row of one table per recomputation, pieces the other layouts lack padded with
    ``-inf``). ``counts``: ``plan(gpu_counts=)``, sorted (None: every count), a layout whose ``tp x pp``
    divides none of them left out and a candidate on another count never a plan, so that the rows are those of
    the search of every count, in the same order (each candidate keeps its place). ``segments``
    (:mod:`llmsizing.plan_fits`): no check of ``most``, and a third array, each row's segment (its layout and
    (cp, micro-batch) block, numbered in the search's order). ``kept_totals``: a dict kept between searches
    of the same memory, layouts and candidates (:mod:`llmsizing.plan_fits`), where each recomputation's
    totals and floors of the candidates are kept (:func:`_kept_totals`)."""
    # (the layouts' candidates and what the fit reads of them, kept for the next searches of the same ones:
    # plan_tables.search_structure; plan36)
    st = search_structure(model, layouts, tuple(domains[g.name] for g in gpu_list), tuple(cps), tuple(micros),
                          global_batch, max_gpus, counts, expert_tp, isinstance(memory, _PerRecompute),
                          kept_candidates)
    if st is None:
        return (None,) * (2 + segments)
    parts, lay, cat, pair_of, coef_id, on2d = (st[k] for k in ("parts", "lay", "cat", "pair_of", "coef_id",
                                                               "on2d"))
    stage_layers, even, part_keys = st["stage_layers"], st["even"], st["keys"]
    chosen = ~on2d                                                  # (a GPU off the layout: never a plan)
    if counts is not None:                                          # (a count not asked for: never a plan)
        tp_pp = (part_keys[:, 0] * part_keys[:, 1])[lay]
        chosen |= ~np.isin(tp_pp * cat["cp"] * cat["dp"], counts)[None, :]
    # (what the recomputations share of the table: its pairs' keys, and the model states, the same for all
    # but an autocast recipe's)
    kept = {"share_states": not isinstance(memory, _PerRecompute), "pair_keys": st["pair_keys"]}
    fits, totals, layers = [], [], []
    for r, rc in enumerate(rcs):
        rows = np.flatnonzero(~chosen.all(axis=0))                  # the candidates some GPU has nothing for
        if rc in OP_SAC_MODES:            # (op SAC where tp divides the KV heads: op_sac.check_op_sac)
            rows = rows[model.kv_heads % part_keys[:, 0][lay[rows]] == 0]
        t = np.full(chosen.shape, np.inf)
        n = np.full(chosen.shape, -1, dtype=np.int64)
        if len(rows):
            least = (rc == "full" and partial) & (stage_layers[rows] > 1) & even[rows]
            plain = rows[~least]
            if len(plain):
                def weigh(sub, kp, rc=rc):
                    return _table_totals(memory, parts, rc, coef_id, lay, pair_of, sub, cat["micro"],
                                         cat["dpf"], limits, kp)
                total, floor = (weigh(plain, kept) if kept_totals is None else
                                _kept_totals(kept_totals, rc, plain, len(lay), weigh, kept,
                                             float(limits.max())))
                t[:, plain] = total[None, :]
                # a GPU whose limit the model states alone exceed fits no recomputation: weighed no further
                chosen[:, plain] |= floor[None, :] > limits[:, None] * (1 + FLOOR_MARGIN)
                if rc == "full" and not model.is_moe:          # (a mixture of experts: whole model or none)
                    n[:, plain] = stage_layers[plain]
            sel = rows[least]
            if len(sel):                                     # partial recomputation, all layouts at once
                n_l, t_l = _least(memory, parts, sel, keys=st["pair_keys"], lay=lay, pair_of=pair_of,
                                  coef_id=coef_id,
                                  micro=cat["micro"], dpf=cat["dpf"], stage_layers=stage_layers,
                                  limits=limits, on=on2d[:, sel])
                n[:, sel] = np.where(on2d[:, sel], n_l, n[:, sel])
                t[:, sel] = np.where(on2d[:, sel], t_l, t[:, sel])
            f = t <= limits[:, None]
            f[:, rows[least]] = n[:, rows[least]] > 0
            f &= ~chosen
        else:
            f = np.zeros(chosen.shape, dtype=bool)
        fits.append(f)
        totals.append(t)
        layers.append(n)
        chosen |= f
    fit = np.stack(fits, axis=1)                                    # (GPU, recomputation, candidate)
    zeros = part_keys[:, 2][lay]
    fit[:, :, (zeros > 0) & (cat["cp"] == 1) & (cat["dp"] == 1)] = False   # ZeRO over one rank is no ZeRO
    g_, r_, j_ = np.nonzero(fit)
    if not len(g_):
        return (None,) * (2 + segments)
    # (at most ``most`` plans without interleaving or ZeRO-2/3 under a pipeline, ``in_all`` times as many in
    # all: MAX_PLANS)
    plain = st["plain"][lay[j_]]
    if not segments and (plain.sum() > most or len(g_) > in_all * most):
        raise ValueError(
            f"more than {most:,} plans fit (global_batch={global_batch:,} on {len(gpu_list)} GPU "
            f"type(s){'' if max_gpus is None else f' within max_gpus={max_gpus:,}'}), more than plan() "
            "prices in one call: give a smaller max_gpus, fewer gpus, micro_batches or zero_stages, or a "
            "global_batch with fewer divisors (a power of two)")
    # the search's order: layouts, then (cp, micro-batch), GPU, recomputation and dp (candidates are in the
    # order of layouts and, within one, of (cp, micro-batch): numbered in that order by `seg`; np.nonzero
    # gives each (GPU, recomputation)'s candidates in order, which a stable sort keeps)
    seg = st["seg"]
    n_r = len(rcs)
    order = np.argsort((seg[j_] * len(gpu_list) + g_) * n_r + r_, kind="stable")
    g_, r_, j_ = g_[order], r_[order], j_[order]
    keys = part_keys[lay[j_]]
    cols = dict(gpu=g_, tp=keys[:, 0], cp=cat["cp"][j_], pp=keys[:, 1], zero=keys[:, 2],
                micro=cat["micro"][j_], dp=cat["dp"][j_], m=cat["m"][j_], rc=r_, ep=keys[:, 3], vp=keys[:, 4],
                rl=np.stack(layers)[r_, g_, j_])
    cols = {k: np.asarray(v).astype(np.int64) for k, v in cols.items()}
    if segments:                                    # (plan_fits: unchecked, with each row's segment)
        return cols, np.stack(totals)[r_, g_, j_], seg[j_]
    return cols, np.stack(totals)[r_, g_, j_]


def _kept_totals(totals: dict, rc: str, rows, n: int, weigh, kept: dict, limit: float = np.inf) -> tuple:
    """``weigh(rows, kept)`` (:func:`_table_totals` of the candidates ``rows`` of a search of ``n``
    candidates, with recomputation ``rc``), from the totals and floors kept in
    ``totals`` by earlier searches of the same memory, layouts and candidates (other GPU types: chapter 17's
    move to two GPU types weighs the B200 on the H100's totals). Each candidate's total and floor are its own
    (elementwise from the memory's entries, whichever candidates are weighed beside it). A total weighed
    (its floor within the largest limit then, ``live``) is kept and reused as it is; any other candidate (its
    floor kept as total, beyond that limit) is weighed again, unless the largest limit now, ``limit``, is at
    most the one it was found beyond (issue 38): its floor is then beyond ``limit`` too (``x (1 + margin)``
    is monotonic), and :func:`_table_totals` would give its floor as its total again, the same bits. A total
    reused where :func:`_table_totals` would give the floor (a floor beyond the largest limit now, weighed
    under a larger one before) is at least that floor, so it fits no GPU either (no such row is a plan, and
    only plans' totals are returned).
    ``kept``: the search's shared tables (:func:`~llmsizing.plan_tables.table_totals`' ``kept``), given only
    to a call on all of ``rows`` (whose pairs hold every later recomputation's), else a dict of its own."""
    if rc not in totals and len(rows) == n:            # (every candidate, none kept: kept as weighed)
        t_, f_ = weigh(rows, kept)
        said = "live" in kept
        live = _weighed(kept, n)
        totals[rc] = (t_, f_, live, np.where(live | (not said), -np.inf, limit))
        return t_, f_
    if rc not in totals:
        totals[rc] = (np.zeros(n), np.zeros(n), np.zeros(n, dtype=bool), np.full(n, -np.inf))
    total, floor, live, beyond = totals[rc]
    need = ~live[rows] & ~(beyond[rows] >= limit)
    if need.any():
        sub = rows[need] if not need.all() else rows
        own = kept if sub is rows else {k: v for k, v in kept.items() if k in ("share_states", "pair_keys")}
        t_, f_ = weigh(sub, own)
        said = "live" in own
        total[sub], floor[sub], live[sub] = t_, f_, _weighed(own, len(sub))
        beyond[sub] = np.where(live[sub] | (not said), -np.inf, limit)   # (not said: weighed again later)
    return total[rows], floor[rows]


def _weighed(kept: dict, n: int) -> np.ndarray:
    """Which of the ``n`` rows :func:`~llmsizing.plan_tables.table_totals` just weighed (``kept["live"]``,
    taken); none if it did not say (another implementation in its place, as tests put one): they are then
    weighed again by any later search."""
    got = kept.pop("live", None)
    return np.zeros(n, dtype=bool) if got is None else got


def _table_totals(memory, parts, rc, coef_id, lay, pair_of, rows, micro, dpf, limits, kept=None):
    """:func:`~llmsizing.plan_tables.table_totals` of the candidates ``rows`` (of any layouts of ``parts``)
    with recomputation ``rc``: their totals and floors, from one table of their coefficients, the floor
    margin :data:`FLOOR_MARGIN` (``lay`` and ``pair_of``: each candidate's layout and pair, which
    ``coef_id`` numbers). ``kept``: what one search's recomputations share (table_totals'), and the
    :func:`~llmsizing.plan_tables.pair_keys` of ``parts``, made once (~1 ms for a MoE search's ~700
    layouts)."""
    keys = None if kept is None else kept.get("pair_keys")
    if keys is None:
        keys = pair_keys(parts)
        if kept is not None:
            kept["pair_keys"] = keys
    return table_totals(memory, keys, rc, coef_id, rows, micro, dpf, limits, FLOOR_MARGIN, kept)


def _least(memory, parts, rows, *, keys=None, lay, pair_of, coef_id, micro, dpf, stage_layers, limits, on):
    """:func:`_least_scalar`'s answer; with ``keys`` (the search's :func:`~llmsizing.plan_tables.pair_keys`)
    and a :class:`SearchMemory` (or :class:`_PerRecompute`), from
    :func:`~llmsizing.plan_tables.least_fit`'s tables (the same calls on ``memory``, the same bits; fit39:
    ~7 ms a dense search's, most of it one ``coefficients`` call and one stacked array per (layout, pair))."""
    if keys is not None and type(memory) in (SearchMemory, _PerRecompute):
        return least_fit(memory, keys, rows, coef_id=coef_id, micro=micro, dpf=dpf, stage_layers=stage_layers,
                         limits=limits, on=on)
    return _least_scalar(memory, parts, rows, lay=lay, pair_of=pair_of, coef_id=coef_id, micro=micro,
                         dpf=dpf, stage_layers=stage_layers, limits=limits, on=on)


def _least_scalar(memory, parts, rows, *, lay, pair_of, coef_id, micro, dpf, stage_layers, limits, on):
    """Partial recomputation of the candidates ``rows`` (of any layouts): per GPU (``limits``) and candidate
    the fewest layers per stage that fit (0: none do), and the totals there; entries of GPUs off a
    candidate's layout (``on`` False, GPU x candidate) are 0 and ``inf``, for the caller to drop.
    Issue 35: one :func:`~llmsizing.plan_pricing._least_recompute_layers` per width of the pieces for all
    layouts' candidates (a row of coefficients per candidate, from :meth:`SearchMemory.coefficients` and
    :meth:`SearchMemory.one_layer` once per (layout, pair), the one-layer ones only where every layer
    recomputed fits on some GPU), each entry the same numbers as one call per layout and pair gave."""
    _, first, at = np.unique(coef_id[rows], return_index=True, return_inverse=True)
    at = at.reshape(-1)
    keys = []
    for row in rows[first].tolist():
        (tp, pp, zero, ep, v), _, cand = parts[lay[row]]
        cp, c = cand["pairs"][pair_of[row]]
        keys.append((tp, pp, zero, ep, c, cp, int(stage_layers[row]), v))
    memory.prefetch([(*k[:5], k[7]) for k in keys], "full")      # (a dense model's calls on arrays)
    memory.prefetch_cp([(k[0], k[1], k[4], k[7]) for k in keys if k[5] > 1], "full")
    full = [memory.coefficients(tp, pp, zero, ep, "full", c, cp, v) for tp, pp, zero, ep, c, cp, _, v in keys]
    b, dp, layers = micro[rows], dpf[rows], stage_layers[rows]
    width = np.array([len(x[0]) for x in full])
    every, can, one = {}, {}, {}
    for w in np.unique(width).tolist():                       # (pieces: 5 per stage weighed, 1 or 2 stages)
        ids = np.flatnonzero(width == w)
        cols = np.flatnonzero(width[at] == w)
        pos = np.searchsorted(ids, at[cols])
        every[w] = (cols, [np.stack([full[i][j] for i in ids.tolist()])[pos] for j in range(3)])
        fits = _total_bytes(every[w][1], b[cols], dp[cols])[None, :] <= limits[:, None]
        can[w] = fits & on[:, cols]
        # the one-layer coefficients of the (layout, pair)s where every layer recomputed fits on some GPU
        some = np.zeros(len(full), dtype=bool)
        some[at[cols][can[w].any(axis=0)]] = True
        _one_layers(memory, keys, ids[some[ids]].tolist(), full, one)
    n, t = np.zeros((len(limits), len(rows)), dtype=np.int64), np.full((len(limits), len(rows)), np.inf)
    for w, (cols, tab) in every.items():
        if not can[w].any():                       # not even every layer recomputed fits
            continue
        ids = np.flatnonzero(width == w)
        pos = np.searchsorted(ids, at[cols])
        ones = [np.stack([(one[i] if i in one else full[i])[j] for i in ids.tolist()])[pos] for j in range(3)]
        n[:, cols], t[:, cols] = _least_recompute_layers(ones, tab, layers[cols], b[cols], dp[cols], limits,
                                                         can=can[w])
    return n, t


def _one_layers(memory, keys, todo, full, one) -> None:
    """:meth:`SearchMemory.one_layer` of ``keys[i]`` for each ``i`` of ``todo`` (of one width) into ``one``:
    those read off the coefficients without recomputation and ``full[i]`` (its coefficients with every layer
    recomputed) in one :func:`~llmsizing.plan_pricing._one_layer_coefficients` on rows, the others (no
    coefficients without recomputation yet) off :meth:`SearchMemory.coefficients` one by one."""
    known = []
    for i in todo:
        tp, pp, zero, ep, c, cp, _, v = keys[i]
        if (tp, pp, "none", c) + ((v,) if v > 1 else ()) in memory._micro:
            known.append(i)
        else:
            one[i] = memory.coefficients(tp, pp, zero, ep, "full1", c, cp, v)
    if not known:
        return
    none = [memory.coefficients(tp, pp, zero, ep, "none", c, cp, v)
            for tp, pp, zero, ep, c, cp, _, v in (keys[i] for i in known)]
    rows = [np.stack([x[j] for x in none]) for j in range(3)], [np.stack([full[i][j] for i in known])
                                                                 for j in range(3)]
    layers = np.array([keys[i][6] for i in known])
    per_micro = _one_layer_coefficients(*rows, layers)[1]
    for k, i in enumerate(known):
        one[i] = (full[i][0], per_micro[k], full[i][2])
