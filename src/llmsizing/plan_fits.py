"""The planner's memory fit on several GPU types, one GPU type at a time (Part III, "How many GPUs do you
need?"; chapter 17's widget, issues 35 and 38): :func:`fitting_plans` gives what
:func:`llmsizing.plan_memory.fitting_plans` gives for a list of GPUs, from each GPU type's own fit, kept.

No formula here. Chapter 17's widget moves from one GPU type (its pick's search, H100 SXM) to two (H100 SXM
and B200): the search of the two weighed every candidate of both again (~35 ms of a ~130 ms move for
Qwen3-30B-A3B at 128K), though the H100's rows are those of the search before. What it relies on, read off
:func:`llmsizing.plan_memory.fitting_plans`:

* the GPUs enter the fit only through each one's memory limit and its scale-up domain (which layouts it can
  hold): every test of a candidate compares its totals with one GPU's limit, and a candidate's totals are
  read off the search's :class:`~llmsizing.plan_memory.SearchMemory` entry by entry, whatever other
  candidates are weighed beside it (each entry the same whoever asks for it first). A candidate some GPU has
  no plan for yet is weighed on the next recomputation for every GPU at once, but what is kept for a GPU is
  its own comparison only; a candidate whose floor exceeds the largest limit keeps its floor, which exceeds
  every limit, so no GPU keeps it either way. So each GPU's rows of a search of several are that GPU's search
  alone, row for row and bit for bit, when every GPU type has the same scale-up domain (the same layouts, so
  the same candidates in the same order: the rows' segments, their layout and (cp, micro-batch) block,
  numbered alike);
* the search's order is its layouts, then (cp, micro-batch), GPU, recomputation and ``dp``: a stable sort of
  the GPUs' rows, taken GPU after GPU, on (segment, GPU) gives it, as each GPU's own rows are in that order
  within a segment.

A search of one GPU type keeps its fit too (the pick's, for the move to two), and each fit keeps its
candidates' totals for the next GPU type of the same candidates
(:func:`llmsizing.plan_memory._kept_totals`: the B200 weighs only what its larger memory brings in). GPU
types of different scale-up domains go through :func:`llmsizing.plan_memory.fitting_plans` as before. The
limit on the plans priced in one call is checked on the rows of all GPUs, with the same message.
``tests/test_plan_fits.py`` compares the two paths.

Session 25 (speed25, issue 38: chapter 12's model pick, four GPU types of one domain and a new model): a
search of several GPU types none of whose fits is kept is fitted all at once (one pass over the candidates,
~35% less CPU than one per type) and each type's rows are kept as its fit, the same rows by the argument
above; the GPU types' own fits run largest memory first, so the smaller ones reuse its totals (and its floors
beyond it: :func:`llmsizing.plan_memory._kept_totals`).
"""

from __future__ import annotations

import numpy as np

from .plan_memory import fitting_plans as _one_fit

#: How many single-GPU fits each :class:`~llmsizing.plan_memory.SearchMemory` keeps (they go with it: the
#: planner keeps 16, :func:`~llmsizing.plan_memory.kept_search_memory`).
FITS_KEPT = 6

#: How many candidate sets' kept totals each :class:`~llmsizing.plan_memory.SearchMemory` keeps (~2 MB each
#: for Qwen3-30B-A3B at 128K: three recomputations' totals and floors of ~40,000 candidates).
TOTALS_KEPT = 2

#: The columns of a fit, in :func:`llmsizing.plan_memory.fitting_plans`' order.
COLUMNS = ("gpu", "tp", "cp", "pp", "zero", "micro", "dp", "m", "rc", "ep", "vp", "rl")


def fitting_plans(model, layouts, memory, *, gpu_list, domains: dict, limits: np.ndarray, global_batch: int,
                  max_gpus, micros, cps, rcs, partial: bool, expert_tp: bool, most: int, in_all: int = 2,
                  counts=None):
    """:func:`llmsizing.plan_memory.fitting_plans`' answer (the same arguments), from each GPU type's fit
    alone, kept on ``memory`` (:data:`FITS_KEPT` a memory), when ``gpu_list`` holds GPU types of one
    scale-up domain (one GPU type too: its fit is kept for a later search of several); otherwise that
    function's own."""
    args = dict(model=model, layouts=layouts, memory=memory, global_batch=global_batch, max_gpus=max_gpus,
                micros=micros, cps=cps, rcs=rcs, partial=partial, expert_tp=expert_tp, most=most,
                in_all=in_all, counts=counts)
    if len({domains[g.name] for g in gpu_list}) > 1 or not hasattr(memory, "__dict__"):
        return _one_fit(gpu_list=gpu_list, domains=domains, limits=limits, **args)
    if len(gpu_list) == 1:                  # (one GPU type: its fit as made, its narrowed copy kept)
        got = _kept_fit(gpu_list[0], domains[gpu_list[0].name], float(limits[0]), args, made=True)
        if got is None:
            return None, None
        cols, totals = got
        _check(cols, most, in_all, global_batch, 1, max_gpus)
        return cols, totals
    keys = [_fit_key(domains[g.name], float(limit), args) for g, limit in zip(gpu_list, limits)]
    kept = memory.__dict__.setdefault("_plan_fits", {})
    if None not in keys and not any(k in kept for k in keys):
        return _all_at_once(gpu_list, domains, limits, keys, args)
    # (the largest memory first, issue 38: its totals are then reused by the others, and a candidate found
    # beyond it is beyond them too, so each recomputation is weighed about once; the order of the fits changes
    # no fit, each its own)
    got = [None] * len(gpu_list)
    for k in sorted(range(len(gpu_list)), key=lambda k: -float(limits[k])):
        got[k] = _kept_fit(gpu_list[k], domains[gpu_list[k].name], float(limits[k]), args)
    got = [(k, x) for k, x in enumerate(got) if x is not None]
    if not got:
        return None, None
    n = [len(x["seg"]) for _, x in got]
    seg = np.concatenate([x["seg"] for _, x in got]).astype(np.int64)
    gpu = np.repeat(np.array([k for k, _ in got], dtype=np.int64), n)
    # (one GPU type: its rows are in order already)
    order = np.arange(len(seg)) if len(got) == 1 else np.argsort(seg * len(gpu_list) + gpu, kind="stable")
    cols = {c: gpu[order] if c == "gpu" else np.concatenate([x[c] for _, x in got])[order].astype(np.int64)
            for c in COLUMNS}
    totals = np.concatenate([x["totals"] for _, x in got])[order]
    _check(cols, most, in_all, global_batch, len(gpu_list), max_gpus)
    return cols, totals


def _check(cols: dict, most: int, in_all: int, global_batch: int, n_gpus: int, max_gpus) -> None:
    """:func:`llmsizing.plan_memory.fitting_plans`' check of the number of plans, with its message."""
    plain = (cols["vp"] == 1) & ~((cols["zero"] >= 2) & (cols["pp"] > 1))
    if plain.sum() > most or len(plain) > in_all * most:
        raise ValueError(
            f"more than {most:,} plans fit (global_batch={global_batch:,} on {n_gpus} GPU "
            f"type(s){'' if max_gpus is None else f' within max_gpus={max_gpus:,}'}), more than plan() "
            "prices in one call: give a smaller max_gpus, fewer gpus, micro_batches or zero_stages, or a "
            "global_batch with fewer divisors (a power of two)")


def _kept_fit(gpu, domain: int, limit: float, args: dict, made: bool = False):
    """One GPU type's fit (``gpu``, its scale-up domain and memory limit) with :func:`fitting_plans`'
    ``args``: its columns but ``gpu`` in the narrowest integer type that holds them, its totals and each
    row's segment; None if nothing fits. Kept on the search's memory, by everything the fit reads but the
    memory: the GPU's domain and limit (not its name), the layouts and the search's arguments."""
    memory = args["memory"]
    key = _fit_key(domain, limit, args)
    kept = memory.__dict__.setdefault("_plan_fits", {})
    if key is not None and key in kept:
        kept[key] = kept.pop(key)                       # (the most recently used last)
        got = kept[key]
        return got if not made or got is None else _widened(got)
    one = {k: v for k, v in args.items() if k not in ("most", "in_all")}
    cols, totals, seg = _one_fit(gpu_list=[gpu], domains={gpu.name: domain}, limits=np.array([limit]),
                                 most=0, in_all=0, segments=True, kept_totals=_kept_totals(memory, key),
                                 **one)
    got = None if cols is None else {**{c: _narrow(cols[c]) for c in COLUMNS if c != "gpu"},
                                     "totals": totals.copy(), "seg": _narrow(seg)}
    _keep(kept, key, got)
    if made:                                            # (the fit as made: ``(columns, totals)``)
        return None if cols is None else (cols, totals)
    return got


def _fit_key(domain: int, limit: float, args: dict):
    """What one GPU type's fit is kept by (:func:`_kept_fit`): everything the fit reads but the memory, the
    GPU's domain and limit (not its name), the layouts and the search's arguments; None if unhashable."""
    key = (domain, limit, tuple(args["layouts"]),
           *(args[k] for k in ("global_batch", "max_gpus", "micros", "cps", "rcs", "partial", "expert_tp",
                               "counts")))
    try:
        hash(key)
    except TypeError:                                   # (an unhashable argument: not kept)
        return None
    return key


def _keep(kept: dict, key, got) -> None:
    """Keep one GPU type's fit ``got`` under ``key`` (the last :data:`FITS_KEPT`)."""
    if key is not None:
        kept[key] = got
        while len(kept) > FITS_KEPT:
            kept.pop(next(iter(kept)))


def _all_at_once(gpu_list, domains: dict, limits: np.ndarray, keys: list, args: dict) -> tuple:
    """A search of several GPU types none of whose fits is kept (chapter 12's model pick: four GPU types of
    one domain, a new model): :func:`llmsizing.plan_memory.fitting_plans` of all of them at once (one pass
    over the candidates, ~35% less CPU than four), its totals kept for later fits, and each GPU type's rows
    kept as its own fit (the module docstring: a GPU's rows of a search of several are its search alone, row
    for row and bit for bit; issue 38)."""
    memory = args["memory"]
    one = {k: v for k, v in args.items() if k not in ("most", "in_all")}
    totals_key = max(keys, key=lambda k: k[1])          # (any of them: the totals' key leaves out the limit)
    cols, totals, seg = _one_fit(gpu_list=gpu_list, domains=domains, limits=limits, most=0, in_all=0,
                                 segments=True, kept_totals=_kept_totals(memory, totals_key), **one)
    kept = memory.__dict__.setdefault("_plan_fits", {})
    for k, key in enumerate(keys):
        rows = None if cols is None else np.flatnonzero(cols["gpu"] == k)
        _keep(kept, key, None if rows is None or not len(rows) else
              {**{c: _narrow(cols[c][rows]) for c in COLUMNS if c != "gpu"},
               "totals": totals[rows], "seg": _narrow(seg[rows])})
    if cols is None:
        return None, None
    _check(cols, args["most"], args["in_all"], args["global_batch"], len(gpu_list), args["max_gpus"])
    return cols, totals


def _widened(got: dict) -> tuple:
    """A kept fit of one GPU type (the first of the search) as :func:`fitting_plans` returns it."""
    cols = {c: np.zeros(len(got["seg"]), dtype=np.int64) if c == "gpu" else got[c].astype(np.int64)
            for c in COLUMNS}
    return cols, got["totals"].copy()


def _kept_totals(memory, key) -> dict | None:
    """The dict where :func:`llmsizing.plan_memory.fitting_plans` keeps each recomputation's totals of the
    candidates of the fits ``key`` names but for the limit (the same candidates on any GPU type of that
    scale-up domain), on ``memory``: the last :data:`TOTALS_KEPT`. None for no key."""
    if key is None:
        return None
    kept = memory.__dict__.setdefault("_plan_totals", {})
    k = key[:1] + key[2:]
    got = kept.pop(k, None)
    kept[k] = {} if got is None else got                  # (the most recently used last)
    while len(kept) > TOTALS_KEPT:
        kept.pop(next(iter(kept)))
    return kept[k]


def _narrow(x: np.ndarray) -> np.ndarray:
    """The integers ``x`` in the narrowest of int8, int16, int32 and int64 that holds them (the same values:
    :func:`fitting_plans` widens them back to int64)."""
    if not len(x):
        return x
    lo, hi = int(x.min()), int(x.max())
    for t in (np.int8, np.int16, np.int32):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return x.astype(t)
    return x
