"""How the planner ranks its plans (Part III, "How many GPUs do you need?"), split out of
:mod:`llmsizing.planner` (issue 34: interleaved pipelines and the deadline's rule pushed it past 600 lines):
numbers compared at 12 significant digits (:func:`_digits`), sort orders shared between keys
(:func:`_lex_orders`) and the time-vs-cost Pareto front (:func:`_pareto`). NumPy only; no formula of the
model. :mod:`llmsizing.planner` re-exports these names.
"""

from __future__ import annotations

import warnings

import numpy as np

from ._validate import check_choice, check_int


def _digits(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to 12 significant digits (non-finite ones kept)."""
    out = np.asarray(values, dtype=float).copy()
    ok = np.isfinite(out) & (out != 0)
    scale = 10.0 ** (11 - np.floor(np.log10(np.abs(out[ok]))))
    out[ok] = np.round(out[ok] * scale) / scale
    return out


def _taken(col, rows: np.ndarray):
    """The values of the column ``col`` (a Series) at the positions ``rows``, keeping its dtype."""
    from pandas.api.extensions import ExtensionDtype

    return col.array[rows] if isinstance(col.dtype, ExtensionDtype) else col.to_numpy()[rows]


def _ranks(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Each value's rank among the distinct values of ``x`` (equal values share one; ``x`` has >= 2 values and
    no NaN), and how many distinct values there are."""
    o = np.argsort(x)
    s = x[o]
    steps = np.cumsum(s[1:] != s[:-1])
    r = np.empty(len(x), dtype=np.int64)
    r[o[0]] = 0
    r[o[1:]] = steps
    return r, int(steps[-1]) + 1 if len(steps) else 1


def _lex_orders(*keys: tuple[np.ndarray, ...]):
    """``np.lexsort(k)`` for each tuple ``k`` of ``keys`` (the same order: the last key sorts first, ties keep
    the rows' order), from one integer sort each: every key's values are ranked once and shared, and each
    order packs (ranks, row) into one int64. Falls back to np.lexsort on a NaN, a non-numeric key, fewer than
    two rows or a packed key that would not fit in 63 bits. (Issue 35: np.lexsort's indirect merge sort takes
    ~10 ms for two float keys of Mixtral's 43k plans.)"""
    arrays = {id(a): a for k in keys for a in k}
    if any(len(a) < 2 or a.dtype.kind not in "fiub" or (a.dtype.kind == "f" and np.isnan(a).any())
           for a in arrays.values()):
        return [np.lexsort(k) for k in keys]
    ranked = {i: _ranks(a) for i, a in arrays.items()}
    out = []
    for k in keys:
        n = len(k[0])
        packed, span = np.arange(n, dtype=np.int64), n
        for a in k:
            r, distinct = ranked[id(a)]
            if span * distinct >= 2**63:
                packed = None
                break
            packed += r * span
            span *= distinct
        out.append(np.lexsort(k) if packed is None else np.sort(packed) % n)
    return out


def _by_cost(days: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """``np.lexsort((days, cost))`` (by cost, then days, then row) of plans' ``days`` and ``cost`` at 12
    significant digits (:func:`_digits`), from two sorts of integers instead of :func:`_lex_orders`' three
    (plan42: two of them indirect; ~2 ms of chapter 17's 35,000-48,000 plans a move). Each value is its 12
    digits and its power of ten packed into one integer, in the values' order; the rows are sorted by days
    (and row), then by cost and that place. The order is checked pair by pair against the rule (each row's
    cost below the next's, or equal with days below, or both equal with the row before): where it fails (a
    value not at 12 digits, not positive, too many rows to pack), :func:`_lex_orders`' answer."""
    n = len(cost)
    bits = max(n - 1, 1).bit_length()
    kd, kc = _digit_keys(days, 63 - bits), _digit_keys(cost, 63 - bits)
    if n < 2 or kd is None or kc is None:
        return _lex_orders((days, cost))[0]
    row, mask = np.arange(n, dtype=np.int64), (1 << bits) - 1
    by_days = np.sort((kd << bits) | row) & mask                  # (the rows by days, then row)
    place = np.empty(n, dtype=np.int64)
    place[by_days] = row
    order = by_days[np.sort((kc << bits) | place) & mask]
    c, d = cost[order], days[order]
    ok = (c[:-1] < c[1:]) | ((c[:-1] == c[1:]) & ((d[:-1] < d[1:]) | ((d[:-1] == d[1:])
                                                                       & (order[:-1] < order[1:]))))
    return order if ok.all() else _lex_orders((days, cost))[0]


def _digit_keys(x: np.ndarray, most_bits: int):
    """Integers in the order of ``x``'s values (positive, finite, at 12 significant digits): its 12 digits
    plus its power of ten times 10**12; None where a value is not positive and finite or the keys would
    take more than ``most_bits`` bits."""
    if not len(x) or not (np.isfinite(x).all() and (x > 0).all()):
        return None
    power = np.floor(np.log10(x))
    m = np.round(x * 10.0 ** (11 - power))                         # (its 12 digits, 1e11 to 1e12)
    power -= power.min()
    if (float(power.max()) + 2) * 1e12 >= 2.0 ** most_bits:
        return None
    return power.astype(np.int64) * 10**12 + m.astype(np.int64)


def _pareto(days: np.ndarray, cost: np.ndarray, memory: np.ndarray,
            order: np.ndarray | None = None) -> np.ndarray:
    """True where no other row is at least as fast and as cheap and better in one. Of plans that tie on both
    (say ZeRO-0 and ZeRO-1, which move the same bytes), only the one with the least memory per GPU is marked.
    A row whose days or cost is not a finite number is never marked (and never stalls the sweep). ``order``:
    np.lexsort((memory, cost, days)) when already known (every days and cost finite)."""
    front = np.zeros(len(days), dtype=bool)
    if not len(days):
        return front
    ok = np.isfinite(days) & np.isfinite(cost)
    if order is None and len(days) > 4096:      # (only the rows no strictly faster, cheaper bin rules out)
        rows = np.flatnonzero(_undominated(days, cost, ok))
        d, c, m = days[rows], cost[rows], np.asarray(memory)[rows]
        front[rows[_pareto(d, c, m, order=_lex_orders((m, c, d))[0])]] = True
        return front
    days, cost = np.where(ok, days, np.inf), np.where(ok, cost, np.inf)
    if order is None:           # (np.lexsort's order from integer sorts: ~1 ms for 25k plans, not ~3 ms)
        order = _lex_orders((np.asarray(memory), cost, days))[0]
    d = days[order]
    firsts = order[np.flatnonzero(np.concatenate(([True], d[1:] != d[:-1])))]   # each speed's cheapest
    c = cost[firsts]
    # the cheapest cost among strictly faster rows (inf before the fastest: an infinite cost never passes)
    best = np.minimum.accumulate(np.concatenate(([np.inf], c[:-1])))
    front[firsts[c < best]] = True
    return front


def _undominated(days: np.ndarray, cost: np.ndarray, ok: np.ndarray, bins: int = 512) -> np.ndarray:
    """True for the finite rows (``ok``) that no row of a strictly faster bin of ``days`` beats on cost (the
    bins: ``bins`` equal steps of ``log(days)``): a superset of :func:`_pareto`'s front, found without a sort.
    A row ruled out is strictly slower and strictly dearer than another, so it is on no front and takes no
    front row's place (that row beats whatever it beats, and is faster than its speed's other rows): the
    front of the rows kept is the front of all (issue 35: the chart's front of each GPU type, ~50,000 plans
    in chapter 17, sorted as a few thousand)."""
    keep = ok.copy()
    at = np.flatnonzero(ok)
    if not len(at):
        return keep
    d = np.log(np.maximum(days[at], np.finfo(float).tiny))
    lo, hi = float(d.min()), float(d.max())
    b = np.zeros(len(at), dtype=np.intp) if hi <= lo else np.minimum(
        ((d - lo) * (bins / (hi - lo))).astype(np.intp), bins - 1)
    least = np.full(bins + 1, np.inf)
    np.minimum.at(least, b + 1, cost[at])
    before = np.minimum.accumulate(least)[:-1]              # (the least cost of the bins before each bin)
    keep[at] = ~(before[b] < cost[at])
    return keep


def _group_codes(df, columns: tuple) -> np.ndarray:
    """Each row's group: its codes in ``columns`` of ``df`` packed into one integer (equal rows, equal codes;
    the codes' order is no sort's: only the groups matter). ``pd.factorize`` hashes the columns (issue 38:
    ``np.unique`` sorted the GPU names' strings, ~2 ms of a planner search); more distinct rows than an int64
    packs: ``np.unique`` on the packed rows' codes, step by step."""
    import pandas as pd

    group, span = np.zeros(len(df), dtype=np.int64), 1
    for c in columns:
        codes, uniques = pd.factorize(df[c].to_numpy())
        if span * max(len(uniques), 1) >= 2**62:                  # (re-pack the groups so far)
            group = np.unique(group, return_inverse=True)[1].reshape(-1).astype(np.int64)
            span = int(group.max()) + 1 if len(group) else 1
        group = group * max(len(uniques), 1) + codes
        span *= max(len(uniques), 1)
    return group


def interleaving_winners(df) -> np.ndarray:
    """True for the rows of a planner table (:func:`~llmsizing.planner.plan`'s search) worth listing: every
    plan without interleaving, and a plan with ``virtual_stages > 1`` unless another of the same layout,
    GPU, micro-batch and ``dp`` (so the same GPUs and cost per second), differing only in its chunks and the
    recomputation they need, is at least as fast and at most as heavy (both at 12 digits, :func:`_digits`; of
    exact ties the first in the search's order stays). Issue 34: the interleaved options are added only where
    they can win, on time or on memory; the plans the search listed before stay."""
    v = df["virtual_stages"].to_numpy()
    keep = np.ones(len(v), dtype=bool)
    if not (v > 1).any() or len(v) < 2:
        return keep
    # each row's group: its codes in the columns that define it, packed into one integer
    group = _group_codes(df, ("gpu", "tp", "cp", "pp", "zero", "micro_batch", "dp"))
    step, memory = (_digits(df[c].to_numpy()) for c in ("step_time_s", "memory_per_gpu_bytes"))
    # each group by speed, then memory, stably (np.lexsort's order; the memory's ranks sorted with it)
    mem_rank, distinct = _ranks(memory)
    order = _lex_orders((memory, step, group))[0]
    mem_rank, g = mem_rank[order], group[order]
    # each row's memory rank, lifted by its group's place from the end: a running minimum then never reaches
    # back into an earlier group (whose values all lie above), and a row is dominated if an earlier row of
    # its own group is no heavier
    lifted = mem_rank + (g.max() - g) * (distinct + 1)
    before = np.concatenate(([np.iinfo(np.int64).max], np.minimum.accumulate(lifted)[:-1]))
    keep[order[before <= lifted]] = False
    return keep | (v == 1)


def pipelined_zero_winners(df) -> np.ndarray:
    """True for the rows of a planner table worth listing as far as ZeRO-2/3 under a pipeline goes (issue 34:
    ZeRO-3 as :data:`~llmsizing.parallel.PIPELINED_FSDP`): every other plan, and one with ``zero >= 2`` and
    ``pp > 1`` unless another plan of the same GPU, ``tp``, ``cp``, ``pp``, micro-batch and ``dp`` (the same
    GPUs and cost per second), of any ZeRO stage and chunks, is at least as fast and at most as heavy (12
    digits, :func:`_digits`; of exact ties a plan the search listed before stays, then the first in the
    search's order). So these options are added only where they can win, on time or on memory, and the plans
    listed before stay."""
    new = (df["zero"].to_numpy() >= 2) & (df["pp"].to_numpy() > 1)
    keep = np.ones(len(new), dtype=bool)
    if not new.any() or len(new) < 2:
        return keep
    group = _group_codes(df, ("gpu", "tp", "cp", "pp", "micro_batch", "dp"))
    step, memory = (_digits(df[c].to_numpy()) for c in ("step_time_s", "memory_per_gpu_bytes"))
    order = np.lexsort((new, memory, step, group))         # each group by speed, memory, the old plans first
    mem_rank, distinct = _ranks(memory[order])
    g = group[order]
    lifted = mem_rank + (g.max() - g) * (distinct + 1)     # (as interleaving_winners)
    before = np.concatenate(([np.iinfo(np.int64).max], np.minimum.accumulate(lifted)[:-1]))
    keep[order[before <= lifted]] = False
    return keep | ~new


#: How ``plan(deadline_days=..., budget_usd=...)`` keeps plans (``deadline_rule``, one rule for both limits):
#: ``"estimate"`` keeps a plan whose point estimates ``days`` and ``cost_usd`` meet them; ``"slow_end"`` (the
#: default since issue 34) one whose slow ends of the 80% range, ``days_high`` and ``cost_usd_high``, do. The
#: two slow ends are one run (the same slow step time: ``cost_usd_high = cost_usd x days_high / days``), so
#: one rule judges a plan's time and money at the same speed. Either way the frame's ``meets_deadline`` column
#: says, per plan, ``"yes"`` (``days_high <= deadline``: met even at the slow end of the range) or
#: ``"likely"`` (only the point estimate meets it: at the slow end the run overshoots), its
#: ``within_budget`` column the same of ``cost_usd_high`` and ``cost_usd`` against the budget
#: (:func:`within_budget`), and ``attrs["deadline_rule"]`` / ``attrs["budget_rule"]`` name the rule.
DEADLINE_RULES = ("estimate", "slow_end")

#: The rule ``plan()`` applies when none is given. A deadline or a budget is a constraint: "finish by" and
#: "within $X" are met at the slow end of the range (one run in ten slower and dearer, if the 80% range holds
#: its coverage), not at a point estimate that about half of the runs like it overshoot. Until issue 34 the
#: default was ``"estimate"``; a call that gives no rule and loses plans by the change is warned once per
#: limit (:func:`deadline_kept`, :func:`budget_kept`).
DEFAULT_DEADLINE_RULE = "slow_end"
_WARNED: list = []             # the limits ("deadline", "budget") whose change of default was warned


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside the library, for a warning raised by this module's
    caller (``plan()`` and its decorators sit between)."""
    import os
    import sys

    here, frame, level = os.path.dirname(os.path.abspath(__file__)), sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame, level = frame.f_back, level + 1
    return level


def _kept(rule, point, high, limit: float, listed, what: str, call: str) -> np.ndarray:
    """:func:`deadline_kept` and :func:`budget_kept`: ``point``/``high`` against ``limit`` by ``rule``, and
    the change of default warned once per process for ``what``."""
    point, high = np.asarray(point, dtype=float), np.asarray(high, dtype=float)
    if rule is None:
        lost = (point <= limit) & (high > limit) & (True if listed is None else listed)
        if lost.any() and what not in _WARNED:
            _WARNED.append(what)
            warnings.warn(f"plan({call}) keeps a plan only if the slow end of its 80% range meets the {what} "
                          f"(deadline_rule='slow_end', the default since issue 34); {int(lost.sum()):,} "
                          "plans meeting it by their point estimate only were dropped. Pass "
                          "deadline_rule='estimate' for the old result, or 'slow_end' to silence this.",
                          FutureWarning, stacklevel=_caller_level())
    rule = DEFAULT_DEADLINE_RULE if rule is None else check_choice("deadline_rule", rule, DEADLINE_RULES)
    return (point if rule == "estimate" else high) <= limit


def deadline_kept(rule: str | None, days, days_high, deadline: float, listed=None) -> np.ndarray:
    """Which plans meet ``deadline`` by ``rule`` (:data:`DEADLINE_RULES`; ``None``:
    :data:`DEFAULT_DEADLINE_RULE`). With ``None``, where a ``listed`` plan meets it by its point estimate
    only, and so the default before issue 34 would have kept it, a :class:`FutureWarning` says so once per
    process and names ``deadline_rule="estimate"`` for the old result."""
    return _kept(rule, days, days_high, deadline, listed, "deadline", f"deadline_days={deadline:g}")


def budget_kept(rule: str | None, cost_usd, cost_usd_high, budget: float, listed=None) -> np.ndarray:
    """Which plans stay within ``budget`` USD by ``rule`` (the deadline's).
    ``rule`` is one of :data:`DEADLINE_RULES` (``None``: :data:`DEFAULT_DEADLINE_RULE`): ``"slow_end"`` by
    ``cost_usd_high``, the cost at the slow end of the 80% range, ``"estimate"`` by ``cost_usd``. With
    ``None``, where a ``listed`` plan is within it by its point cost only, a :class:`FutureWarning` says so
    once per process (apart from the deadline's) and names ``deadline_rule="estimate"`` for the old result.
    Chapter 12."""
    return _kept(rule, cost_usd, cost_usd_high, budget, listed, "budget", f"budget_usd={budget:,.0f}")


def deadline_rule_text(rule: str, deadline: float) -> str:
    """The rule ``rule`` (:data:`DEADLINE_RULES`) for ``deadline`` days in words, for messages and tables."""
    if check_choice("deadline_rule", rule, DEADLINE_RULES) == "estimate":
        return f"point estimate (days <= {deadline:g}; the slow end of the 80% range may overshoot)"
    return f"slow end of the 80% range (days_high <= {deadline:g})"


def budget_rule_text(rule: str, budget: float) -> str:
    """The rule ``rule`` (:data:`DEADLINE_RULES`) for a budget of ``budget`` USD in words (chapter 12)."""
    if check_choice("deadline_rule", rule, DEADLINE_RULES) == "estimate":
        return f"point estimate (cost_usd <= {budget:,.0f}; the slow end of the 80% range may overshoot)"
    return f"slow end of the 80% range (cost_usd_high <= {budget:,.0f})"


def meets_deadline(days, days_high, deadline: float) -> np.ndarray:
    """Per plan, ``"yes"`` where ``days_high <= deadline`` (met at the slow end of the 80% range),
    ``"likely"`` where only ``days <= deadline`` (the point estimate), ``"no"`` otherwise
    (:data:`DEADLINE_RULES`)."""
    days, days_high = np.asarray(days, dtype=float), np.asarray(days_high, dtype=float)
    return np.where(days_high <= deadline, "yes", np.where(days <= deadline, "likely", "no")).astype(object)


def within_budget(cost_usd, cost_usd_high, budget: float) -> np.ndarray:
    """Per plan, as :func:`meets_deadline` for the deadline: ``"yes"`` where ``cost_usd_high <= budget``
    (within it at the slow end of the 80% range), ``"likely"`` where only ``cost_usd <= budget`` (the point
    estimate), ``"no"`` otherwise (:data:`DEADLINE_RULES`). Chapter 12."""
    return meets_deadline(cost_usd, cost_usd_high, budget)


def plans_within(plans, max_gpus: int):
    """:func:`~llmsizing.planner.plan`'s table ``plans`` cut to the plans on at most ``max_gpus`` GPUs, as
    :func:`~llmsizing.planner.plan` with ``max_gpus`` gives it (issue 35: chapter 17's widget moves its GPU
    limit without a new search): the rows with ``n_gpus <= max_gpus`` in their order (the search meets its
    candidates in the same order whatever the limit, and :func:`plan` sorts them stably), their index
    renumbered and ``pareto`` marked again among them alone, as :func:`plan` marks it. For a table searched
    with a larger limit (or none) and no deadline or budget; ``tests/test_planner.py`` compares it with
    searches. An empty table when no plan is left."""
    max_gpus = check_int("max_gpus", max_gpus)
    return plans_where(plans, plans["n_gpus"].to_numpy() <= max_gpus)


def plans_where(plans, keep):
    """The rows of :func:`~llmsizing.planner.plan`'s table ``plans`` where the boolean array ``keep`` holds,
    in their order, their index renumbered and ``pareto`` marked again among them alone as :func:`plan` marks
    it (times and costs at 12 digits, ties in the table's order: plan sorts stably). For a filter that a
    dominated plan can pass while the plan dominating it does not: a GPU limit (:func:`plans_within`), or a
    deadline at the slow end of the range, whose width differs by GPU (chapter 12's widget, issue 34). Arrays
    only, no new search."""
    import copy

    import pandas as pd

    rows = np.flatnonzero(keep)
    # (its columns read off a frame without the attrs, which pandas deep-copies into every column it gives:
    # ~30 columns a cut of chapter 12's table, issue 38)
    bare = pd.DataFrame(plans) if plans.attrs else plans
    days_d, cost_d = _digits(bare["days"].to_numpy()[rows]), _digits(bare["cost_usd"].to_numpy()[rows])
    memory_d = bare["memory_per_gpu_bytes"].to_numpy()[rows]
    # (rows that tie on days, cost and memory are in the search's order here too: plan sorts stably)
    pareto = _pareto(days_d, cost_d, memory_d, order=_lex_orders((memory_d, cost_d, days_d))[0])
    out = pd.DataFrame({c: pareto if c == "pareto" else _taken(bare[c], rows) for c in bare.columns},
                       copy=False)
    out.attrs = copy.deepcopy(plans.attrs)
    return out
