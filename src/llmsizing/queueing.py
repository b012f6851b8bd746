"""Queueing for a serving fleet (chapter 15, "Queueing and headroom"; issue 37): how long a request waits
for a free batch slot when requests arrive at random.

A fleet of ``c`` batch slots (replicas x batch) fed by Poisson arrivals at ``rate`` per second, each request
holding its slot for a random service time of mean ``service_s``, is the M/G/c queue. For exponential service
(M/M/c) the probability that an arrival waits is Erlang's C formula and the wait, given that it waits, is
exponential with rate ``c mu - lambda`` (Kleinrock 1975, "Queueing Systems" vol. 1, Sec. 3.5; Harchol-Balter
2013, "Performance Modeling and Design of Computer Systems", Ch. 14):

    C(c, a) = B(c, a) / (1 - rho (1 - B(c, a))),   P(W > t) = C(c, a) exp(-(c mu - lambda) t),

with ``a = lambda / mu`` the offered load in Erlangs, ``rho = a / c`` and ``B`` Erlang's B formula by its
stable recursion ``B(k) = a B(k-1) / (k + a B(k-1))``. For a general service time of squared coefficient of
variation ``cs2`` the Allen-Cunneen approximation scales the waiting time by ``(1 + cs2) / 2`` (Allen 1990,
"Probability, Statistics and Queueing Theory", Sec. 6.3; exact for M/G/1's mean by Pollaczek-Khinchine);
:func:`wait_quantile_s` applies it to the tail's decay. :func:`simulate_wait_s` checks both with a small
discrete-event simulation (the Kiefer-Wolfowitz workload recursion, vectorised over independent replications
with numpy, fixed seed).
"""

from __future__ import annotations

import math

from ._validate import check_int, check_number


def _check_load(servers, rate, service_s) -> tuple[int, float, float]:
    c = check_int("servers", servers, maximum=10_000_000)
    lam = check_number("rate", rate, allow_equal=False)
    s = check_number("service_s", service_s, allow_equal=False)
    if lam * s >= c:
        raise ValueError(f"rate x service_s = {lam * s:,.4g} Erlangs must be below servers = {c:,}: the "
                         "queue grows without bound (occupancy >= 100%)")
    return c, lam, s


def erlang_b(servers: int, offered_erlangs: float) -> float:
    """Erlang's B formula (blocking probability of ``servers`` with no queue) by the recursion
    ``B(k) = a B(k-1) / (k + a B(k-1))``, ``B(0) = 1``: stable for thousands of servers."""
    c = check_int("servers", servers, maximum=10_000_000)
    a = check_number("offered_erlangs", offered_erlangs)
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


def erlang_c(servers: int, rate: float, service_s: float) -> float:
    """Probability that an arrival waits for a slot in M/M/c: ``B / (1 - rho (1 - B))`` (see the module)."""
    c, lam, s = _check_load(servers, rate, service_s)
    a = lam * s
    b = erlang_b(c, a)
    return b / (1 - a / c * (1 - b))


def mean_wait_s(servers: int, rate: float, service_s: float, cs2: float = 1.0) -> float:
    """Mean wait in the queue: ``C / (c mu - lambda)`` for M/M/c, times ``(1 + cs2) / 2`` (Allen-Cunneen)."""
    c, lam, s = _check_load(servers, rate, service_s)
    cs2 = check_number("cs2", cs2, maximum=100.0)
    return erlang_c(c, lam, s) / (c / s - lam) * (1 + cs2) / 2


def wait_quantile_s(servers: int, rate: float, service_s: float, percentile: float = 95.0,
                    cs2: float = 1.0) -> float:
    """The ``percentile``-th percentile of the wait for a slot: 0 when fewer than ``100 - percentile`` % of
    arrivals wait (``C <= 1 - p``), else ``ln(C / (1 - p)) / (c mu - lambda)``, times ``(1 + cs2) / 2`` for a
    general service time (Allen-Cunneen applied to the exponential tail; exact for M/M/c)."""
    c, lam, s = _check_load(servers, rate, service_s)
    p = check_number("percentile", percentile, maximum=99.99) / 100
    cs2 = check_number("cs2", cs2, maximum=100.0)
    wait = erlang_c(c, lam, s)
    if wait <= 1 - p:
        return 0.0
    return math.log(wait / (1 - p)) / (c / s - lam) * (1 + cs2) / 2


def simulate_wait_s(servers: int, rate: float, service_s: float, *, cs2: float = 1.0, arrivals: int = 20_000,
                    replications: int = 32, warmup: int = 2_000, seed: int = 0):
    """Waits of a simulated FCFS M/G/c queue: an array of ``replications x (arrivals - warmup)`` seconds.

    Poisson arrivals at ``rate``; service times gamma-distributed with mean ``service_s`` and squared
    coefficient of variation ``cs2`` (1: exponential, M/M/c; 0: deterministic). The Kiefer-Wolfowitz
    recursion keeps each server's remaining work ``V``: an arrival waits ``min V``, adds its service to that
    server, and every ``V`` falls by the next gap (floored at 0). Vectorised over ``replications`` independent
    runs (numpy arrays of ``replications x servers``); the first ``warmup`` arrivals of each are dropped.
    Deterministic for a given ``seed``. A few seconds for a few hundred servers. Each step updates ``V`` in
    place through a flat view (the chosen servers by ``take``/``put``): the same floating-point operations in
    the same order as ``V[rows, j] = w + work`` and ``V = max(V - gap, 0)``, so the same waits, bit for bit
    (fast31: 1.3-1.9x faster below 64 servers; benchmarks/bench_queue_sim_ab.py)."""
    import numpy as np

    c, lam, s = _check_load(servers, rate, service_s)
    cs2 = check_number("cs2", cs2, maximum=100.0)
    n = check_int("arrivals", arrivals, maximum=10_000_000)
    reps = check_int("replications", replications, maximum=100_000)
    warm = check_int("warmup", warmup, minimum=0, maximum=n - 1)
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1 / lam, size=(n, reps))
    if cs2 == 0:
        work = np.full((n, reps), s)
    else:
        shape = 1 / cs2
        work = rng.gamma(shape, s / shape, size=(n, reps))
    v = np.zeros((reps, c))
    flat, first = v.reshape(-1), np.arange(reps) * c      # (a view of v; each row's first index in it)
    gaps = gaps[:, :, None]                               # (each step's gap per row, against every server)
    waits = np.empty((n, reps))
    for i in range(n):
        j = v.argmin(axis=1)
        j += first
        w = flat.take(j)
        waits[i] = w
        w += work[i]
        flat.put(j, w)
        v -= gaps[i]
        np.maximum(v, 0.0, out=v)
    return waits[warm:].ravel()


__all__ = ["erlang_b", "erlang_c", "mean_wait_s", "wait_quantile_s", "simulate_wait_s"]
