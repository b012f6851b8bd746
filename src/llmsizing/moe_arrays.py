"""A mixture of experts' layouts on arrays, for the planner's memory fit (Part III, "How many GPUs do you
need?"; chapter 18): :class:`EpLayouts`, many layouts that differ only in expert parallelism ``ep`` and
``dp``, which :mod:`llmsizing.moe`'s model-state functions and :func:`llmsizing.memory._search_pieces` take
in place of one :class:`~llmsizing.parallel.Parallel` and answer with an array, one entry per layout, each
bit for bit that layout's own answer (issue 35: a search weighs ZeRO-1 with a pipeline at every ``ep``).

The expert grid they describe is Megatron-Core's (``megatron/core/parallel_state.py``,
``initialize_model_parallel``): ``ep`` ranks carved out of ``tp x cp x dp / etp`` GPUs, the routed experts'
ZeRO shards over ``edp = tp x cp x dp / (etp x ep)`` (:mod:`llmsizing.moe` says more). No formula here: only
which fields the layouts share and which are arrays. Moved out of :mod:`llmsizing.moe` (issue 35, moe35n),
which re-exports the names.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, fields

import numpy as np

from .parallel import Parallel, kept_parallel, layers_per_stage

#: :class:`~llmsizing.parallel.Parallel`'s fields but ``ep`` and ``dp``: what the layouts share.
_SHARED = tuple(f.name for f in fields(Parallel) if f.name not in ("ep", "dp"))

#: A layout's fields but ``ep`` and ``dp``, as a tuple.
_BUT_EP_DP = operator.attrgetter(*_SHARED)


class EpLayouts:
    """Layouts that differ only in ``ep`` and ``dp`` (``pars``, checked
    :class:`~llmsizing.parallel.Parallel` objects), for the model states' side of many of them at once (issue
    35: a planner's search weighs ZeRO-1 with a pipeline at every ``ep``, one call each): the fields they
    share as they are, ``ep``, ``dp``, :attr:`dp_cp` and :attr:`edp` as arrays, one entry per layout. The same
    functions take it (:func:`llmsizing.moe._rows`, :func:`llmsizing.moe.moe_model_states`,
    :func:`llmsizing.moe.foreach_temporary_bytes`, :func:`llmsizing.states._states`) and give each layout's
    bytes as an entry of an array, worked out by the same operations in the same order (NumPy's float64
    arithmetic is Python's): bit for bit each layout's own. Not for offloading (its branches read the bytes)
    nor the ``for-loop`` optimizer step (a max over tensors). :meth:`over` builds one from a single layout
    and the degrees, without a checked layout per entry."""

    __slots__ = ("_key", "_pars", "_base", "etp", "ep", "dp", "dp_cp", "edp", "_kept", *_SHARED)

    def __init__(self, pars):
        pars = tuple(pars)
        first = pars[0]
        if len({_BUT_EP_DP(p) for p in pars}) > 1:
            raise ValueError("EpLayouts: layouts that differ in more than ep and dp")
        self._set(first, [p.ep for p in pars], [p.dp for p in pars])
        self._pars, self._base = pars, None

    @classmethod
    def over(cls, base: Parallel, ep_dp) -> "EpLayouts":
        """The layouts of ``base`` (a checked layout) at each ``(ep, dp)`` of ``ep_dp``, each entry what
        ``EpLayouts`` of ``kept_parallel(**base's fields, ep=ep, dp=dp)`` holds, without building and
        checking a layout per entry (issue 35, moe35n: ~440 layouts per DeepSeek-V2 search). For the planner's
        search only, whose layouts are checked already: each ``(tp, pp, ZeRO stage, ep)`` against the model
        (:func:`~llmsizing.planner._search`) and ``dp`` a multiple of
        :func:`~llmsizing.moe_layouts.dp_unit`, which is what ``Parallel`` asks of ``ep`` and ``dp``
        (``ep`` divides ``tp x cp x dp / etp``). :attr:`pars` builds the layouts when asked."""
        self = cls.__new__(cls)
        eps, dps = zip(*ep_dp)
        self._set(base, eps, dps)
        self._pars, self._base = None, base
        return self

    def _set(self, first: Parallel, eps, dps) -> None:
        if first.offload != "none":
            raise ValueError("EpLayouts: not for offloading layouts")
        for name in _SHARED:
            setattr(self, name, getattr(first, name))         # (what they share, as it is)
        self.etp = first.etp
        self.ep, self.dp = np.array(eps), np.array(dps)
        # Parallel's own properties, on arrays: dp x cp, and tp x dp_cp // (etp x ep)
        self.dp_cp = self.dp * first.cp
        self.edp = first.tp * self.dp_cp // (first.etp * self.ep)
        self._key = (_BUT_EP_DP(first), tuple(int(e) for e in eps), tuple(int(d) for d in dps))
        self._kept = {}

    @property
    def pars(self) -> tuple:
        """The layouts, one :class:`~llmsizing.parallel.Parallel` per entry."""
        if self._pars is None:
            shared = {name: getattr(self, name) for name in _SHARED}
            self._pars = tuple(kept_parallel(**shared, ep=e, dp=d) for e, d in zip(*self._key[1:]))
        return self._pars

    def firsts(self) -> tuple:
        """One layout per distinct ``ep`` (its first entry's): what a check that reads no ``dp`` needs. Of
        :meth:`over`'s layouts, ``base`` with that entry's ``ep`` and ``dp`` written in, without
        :class:`~llmsizing.parallel.Parallel`'s own checks, which the search's checks imply (:meth:`over`;
        issue 35, moe35p: ~300 layouts built and checked per DeepSeek-V2 search, one per (tp, pp, ZeRO
        stage, ep) and used once); equal, field by field and in hash, to the checked layout."""
        eps, dps = self._key[1:]
        seen = {}
        for i, e in enumerate(eps):
            seen.setdefault(e, i)
        if self._pars is not None:
            return tuple(self._pars[i] for i in seen.values())
        return tuple(_with_ep_dp(self._base, eps[i], dps[i]) for i in seen.values())

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other) -> bool:
        return type(other) is EpLayouts and other._key == self._key

    def experts(self) -> "_ExpertLayouts":
        """What :func:`llmsizing.states._states` reads of the routed experts' layout: ZeRO over ``edp``."""
        return _ExpertLayouts(self.edp, self.zero, self.offload, self.reshard_after_forward)

    def split_keys(self) -> list:
        """``(tp, pp, stage_layers, ep, expert_tp)`` of each entry: the key of
        :func:`llmsizing.moe._split`."""
        return [(self.tp, self.pp, self.stage_layers, e, self.expert_tp) for e in self._key[1]]


def _with_ep_dp(base: Parallel, ep: int, dp: int) -> Parallel:
    """``base`` (a checked layout) at ``ep`` and ``dp``, Python ints the caller vouches for
    (:meth:`EpLayouts.firsts`): its fields copied, its kept hash left out (``_compat.keep_hash``)."""
    if base.ep == ep and base.dp == dp:
        return base
    out = object.__new__(Parallel)
    out.__dict__.update(base.__getstate__(), ep=ep, dp=dp)
    return out


@dataclass(frozen=True, eq=False)
class _ExpertLayouts:
    """The routed experts' layout of :class:`EpLayouts` as :func:`llmsizing.moe.moe_model_states` builds one
    for a layout (``Parallel(dp=edp, zero, offload, reshard_after_forward)``): ``dp_cp`` an array."""
    dp_cp: np.ndarray
    zero: int
    offload: str
    reshard_after_forward: bool


def frame_layers(model, par) -> tuple | None:
    """:func:`llmsizing.moe._split`'s ``stage_layers`` of ``par`` (a layout or :class:`EpLayouts`): its own,
    or with Megatron-LM's accounted split (``account_for_embedding``/``account_for_loss``, no
    ``stage_layers``) the layers each stage holds (:func:`~llmsizing.parallel.layers_per_stage`), as the step
    prices them. Before moeapi42 the split of the parameters dropped the two flags (Qwen3-235B on 8 stages:
    12, ..., 12, 11, 11 held, 11, 12, ..., 12, 11 computed)."""
    if par.stage_layers is None and (par.account_for_embedding or par.account_for_loss):
        return tuple(layers_per_stage(model.layers, par))
    return par.stage_layers
