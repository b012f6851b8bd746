"""Alpha-beta fits of collective timings: read nccl-tests logs, fit latency and bus bandwidth (issue 21).

The network model of the book prices one collective over ``n`` ranks as::

    t = steps(n) x alpha + bus_factor(n) x S / busbw

with ``S`` the message size as nccl-tests counts it and ``busbw`` the per-rank bandwidth of the bottleneck
link. A ring all-reduce takes ``2(n-1)`` steps and moves ``2(n-1)/n x S`` bytes per rank; a ring all-gather or
reduce-scatter ``n-1`` steps and ``(n-1)/n x S``. nccl-tests (NVIDIA, ``doc/PERFORMANCE.md``) reports
``algbw = S / t`` and ``busbw = algbw x 2(n-1)/n`` for all-reduce, ``x (n-1)/n`` for all-gather,
reduce-scatter and all-to-all, ``x 1`` for broadcast and reduce. Its ``S`` is the size of the whole array: for
all-gather the gathered output (``sendcount x sizeof(type) x n``), for reduce-scatter the input
(``recvcount x sizeof(type) x n``); the ``count`` column of its table is the per-rank count for those two, so
``size = count x 4 x n`` for floats. The same convention is used here, so ``bus_factor(n) x S / busbw`` is
exactly nccl-tests' busbw.

NCCL switches algorithm (ring, tree, NVLS, ...) and protocol (LL, LL128, Simple) with the message size, so one
straight line through a whole sweep is an approximation: :func:`fit_alpha_beta` reports its worst relative
error over the rows it used, and :func:`fit_two_regimes` fits a small-message and a large-message line on
either side of the split that fits best. :func:`from_nccl_tests` does both on a log and combines them as the
model uses them: alpha from the small-message regime, bus bandwidth from the large-message one.

Functions: :func:`parse_nccl_tests`, :func:`steps`, :func:`bus_factor`, :func:`fit_alpha_beta`,
:func:`fit_two_regimes`, :func:`from_nccl_tests`, :func:`predict_time`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._validate import check_choice, check_int, check_number, check_sequence

#: The collectives nccl-tests times, by the name of its binary without ``_perf``.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")

#: The longest text :func:`parse_nccl_tests` reads (a whole sweep with NCCL_DEBUG=INFO is well under this).
MAX_LOG_CHARS = 20_000_000


def steps(collective: str, n: int) -> int:
    """Latency steps of the ring algorithm for ``collective`` over ``n`` ranks: ``2(n-1)`` for all-reduce,
    ``n-1`` for all-gather, reduce-scatter and all-to-all, 1 for broadcast, reduce and send/receive."""
    collective = check_choice("collective", collective, COLLECTIVES)
    n = check_int("n", n, minimum=2)
    if collective == "all_reduce":
        return 2 * (n - 1)
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return n - 1
    return 1


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests' busbw / algbw for ``collective`` over ``n`` ranks (``doc/PERFORMANCE.md``): ``2(n-1)/n``
    for all-reduce, ``(n-1)/n`` for all-gather, reduce-scatter and all-to-all, 1 for broadcast, reduce,
    send/recv."""
    collective = check_choice("collective", collective, COLLECTIVES)
    n = check_int("n", n, minimum=2)
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


# ============================================================================ parsing
_PREFIX = re.compile(r"^\s*(\[\d+,\d+\]<std(out|err)>:)")          # mpirun --tag-output
_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s")
_BINARY = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv)_perf")
_INT = re.compile(r"^\d+$")


def _num(tok: str) -> float:
    try:
        return float(tok)
    except ValueError:
        return math.nan


#: The columns of a table row, named as nccl-tests' header names them, by position from the end of the row.
_ROW_COLUMNS = {-8: "time (out-of-place, us)", -7: "algbw (out-of-place, GB/s)",
                -6: "busbw (out-of-place, GB/s)", -5: "#wrong (out-of-place)", -4: "time (in-place, us)",
                -3: "algbw (in-place, GB/s)", -2: "busbw (in-place, GB/s)", -1: "#wrong (in-place)"}

#: What to do with rows whose results nccl-tests found wrong (:func:`parse_nccl_tests`'s ``wrong_results``).
WRONG_RESULTS = ("refuse", "drop")

#: The largest relative error the older nccl-tests ``error`` column (before the ``#wrong`` count) shows for a
#: correct result: its ``deltaMaxValue`` in ``src/common.cu``, for reductions in half 5e-2, float 1e-5, double
#: 1e-12; anything else (copies, integer types) must be exact.
OLD_ERROR_TOLERANCE = {"half": 5e-2, "float": 1e-5, "double": 1e-12}
_REDUCTIONS = ("all_reduce", "reduce_scatter", "reduce")
_FOOTER = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(\w+)?")


def _wrong(tok: str, dtype: str, collective: str) -> str | None:
    """Why the ``#wrong`` (or older ``error``) cell ``tok`` says the results are wrong, or ``None`` if it does
    not (0, or ``N/A``: validation off, ``-c 0``). Current nccl-tests print the count of wrong elements
    (``%g``: an integer, ``1e+06`` beyond a million); older ones printed the largest relative error
    (``%.0e``, e.g. ``4e-07``), wrong above :data:`OLD_ERROR_TOLERANCE`."""
    if tok.upper() == "N/A":
        return None
    value = _num(tok)
    if value == 0:
        return None
    if 0 < value < 1:                               # the older max-error column: within its tolerance?
        tol = OLD_ERROR_TOLERANCE.get(dtype, 0.0) if collective in _REDUCTIONS else 0.0
        return None if value <= tol else (f"a largest error of {tok} (nccl-tests' tolerance for {collective} "
                                          f"in {dtype}: {tol:g})")
    return f"{tok} wrong elements"


def parse_nccl_tests(text, *, collective: str | None = None, n_ranks: int | None = None,
                     wrong_results: str = "refuse") -> pd.DataFrame:
    """The result table of one nccl-tests run (``all_reduce_perf``, ``all_gather_perf``, ...) as a DataFrame.

    ``text`` is the program's standard output, possibly with lines around it (the shell command, NCCL_DEBUG
    lines, ``mpirun --tag-output`` prefixes, comment lines starting ``##``). Columns: ``size_bytes``,
    ``count``, ``type``, ``time_us`` / ``algbw_gbps`` / ``busbw_gbps`` (out-of-place), ``time_us_inplace``,
    ``algbw_gbps_inplace``, ``busbw_gbps_inplace``, ``wrong`` and ``wrong_inplace`` (the #wrong or error
    columns, as text), ``line`` (the row's line number in ``text``, from 1), ``n_ranks`` and ``collective``.

    Each cell is checked: a time, algbw or busbw that is not a finite number >= 0 (a time of a non-empty
    message > 0) is refused with the line and the column named. A row whose ``#wrong`` column (either) says
    nccl-tests found the results wrong (a count above 0; in older logs an ``error`` above its tolerance,
    :data:`OLD_ERROR_TOLERANCE`) is timed on corrupt data: ``wrong_results="refuse"`` (the default) raises
    naming its line and column, ``"drop"`` leaves it out with a ``UserWarning`` naming each such line. ``N/A``
    (validation off, ``-c 0``) is accepted. A footer ``Out of bounds values : N FAILED`` with ``N > 0`` and no
    row to blame is refused too.

    The number of ranks is counted from the ``#  Rank  k ...`` device lines (given as ``n_ranks`` it must
    agree); the collective is read from the ``Collective test starting: X_perf`` line or the first ``X_perf``
    the text names, unless given. Both the current layout
    (``size count type redop root time algbw busbw #wrong ...``) and older ones (no ``root``, or no ``redop``,
    ``error`` instead of ``#wrong``) are read: a row's first three fields are size, count and type, and its
    last eight the out-of-place and in-place time, algbw, busbw, wrong. Raises ``TypeError``/``ValueError``
    naming ``text`` when it holds no such table, two runs, or rows out of order; ``collective`` and
    ``n_ranks`` when they are missing or contradict the log.
    """
    if not isinstance(text, str):
        raise TypeError("text must be a string (the stdout of an nccl-tests binary), got "
                        f"{type(text).__name__}")
    if len(text) > MAX_LOG_CHARS:
        raise ValueError(f"text is {len(text):,} characters; at most {MAX_LOG_CHARS:,} are read")
    if collective is not None:
        collective = check_choice("collective", collective, COLLECTIVES)
    if n_ranks is not None:
        n_ranks = check_int("n_ranks", n_ranks, minimum=2)
    wrong_results = check_choice("wrong_results", wrong_results, WRONG_RESULTS)
    ranks, rows, named, started, footer = set(), [], [], None, None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _PREFIX.sub("", raw).rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        f = _FOOTER.search(stripped) if stripped.startswith("#") else None
        if f:
            footer = (number, int(f.group(1)), f.group(2) or "")
            continue
        m = _RANK.match(stripped)
        if m:
            ranks.add(int(m.group(1)))
            continue
        if "Collective test starting:" in stripped:
            b = _BINARY.search(stripped)
            if b and started is None:
                started = b.group(1)
            continue
        if stripped.startswith("#"):
            b = _BINARY.search(stripped)
            if b:
                named.append(b.group(1))
            continue
        toks = stripped.split()
        if len(toks) >= 11 and _INT.match(toks[0]) and _INT.match(toks[1]) and not _INT.match(toks[2]):
            size = int(toks[0])
            cells = {}
            for pos in (-8, -7, -6, -4, -3, -2):
                v = _num(toks[pos])
                is_time = pos in (-8, -4)
                if not math.isfinite(v) or v < 0 or (is_time and size > 0 and v == 0):
                    need = "> 0" if is_time and size > 0 else ">= 0"
                    raise ValueError(f"text line {number}, column {_ROW_COLUMNS[pos]}: {toks[pos]!r} is "
                                     f"not a finite number {need} (the row: {stripped[:120]!r})")
                cells[pos] = v
            for pos in (-5, -1):
                if toks[pos].upper() != "N/A" and math.isnan(_num(toks[pos])):
                    raise ValueError(f"text line {number}, column {_ROW_COLUMNS[pos]}: {toks[pos]!r} is "
                                     f"neither a count nor N/A (the row: {stripped[:120]!r})")
            rows.append({"size_bytes": size, "count": int(toks[1]), "type": toks[2],
                         "time_us": cells[-8], "algbw_gbps": cells[-7], "busbw_gbps": cells[-6],
                         "wrong": toks[-5], "time_us_inplace": cells[-4], "algbw_gbps_inplace": cells[-3],
                         "busbw_gbps_inplace": cells[-2], "wrong_inplace": toks[-1], "line": number})
        else:
            b = _BINARY.search(stripped)
            if b:
                named.append(b.group(1))
    if not rows:
        raise ValueError("text does not look like nccl-tests output: no table row of the form "
                         "'size count type [redop [root]] time algbw busbw #wrong time algbw busbw #wrong'")
    for a, b in zip(rows, rows[1:]):
        if b["size_bytes"] < a["size_bytes"]:
            raise ValueError(f"text holds rows whose sizes go down again (line {b['line']}: "
                             f"{b['size_bytes']:,} B after {a['size_bytes']:,} B on line {a['line']}): two "
                             "nccl-tests runs in one text? Pass one run at a time")
    found = started or (named[0] if named else None)
    if collective is None:
        if found is None:
            raise ValueError("collective could not be read from text (no 'X_perf' named in it); pass "
                             "collective=")
        collective = found
    elif found is not None and found != collective:
        raise ValueError(f"collective={collective!r} but text is the output of {found}_perf")
    if ranks:
        counted = max(ranks) + 1
        if n_ranks is not None and n_ranks != counted:
            raise ValueError(f"n_ranks={n_ranks} but text lists {counted} ranks")
        n_ranks = counted
    if n_ranks is None:
        raise ValueError("n_ranks could not be read from text (no '#  Rank k ...' lines); pass n_ranks=")
    if n_ranks < 2:
        raise ValueError("text lists a single rank: a collective over one rank moves no data")
    rows = _drop_wrong(rows, collective, wrong_results, footer)
    df = pd.DataFrame(rows)
    df["n_ranks"] = n_ranks
    df["collective"] = collective
    return df


def _drop_wrong(rows: list, collective: str, wrong_results: str, footer) -> list:
    """The rows whose results nccl-tests did not find wrong; a wrong one refused (``"refuse"``) or left out
    with a warning naming its line (``"drop"``)."""
    import warnings

    bad = []
    for r in rows:
        for key, pos in (("wrong", -5), ("wrong_inplace", -1)):
            why = _wrong(r[key], r["type"], collective)
            if why is not None:
                bad.append((r, pos, why))
                break
    if footer is not None and footer[1] > 0 and not bad:
        raise ValueError(f"text line {footer[0]}: nccl-tests reports {footer[1]} out-of-bounds values "
                         f"({footer[2] or 'FAILED'}), but no row says which: its times are of wrong results")
    if not bad:
        return rows
    if wrong_results == "refuse":
        r, pos, why = bad[0]
        more = f" (and {len(bad) - 1} more rows)" if len(bad) > 1 else ""
        raise ValueError(f"text line {r['line']}, column {_ROW_COLUMNS[pos]}: nccl-tests found the results "
                         f"of the {r['size_bytes']:,} B row wrong ({why}){more}: a time measured on corrupt "
                         "data is not a bandwidth. Fix the run, or pass wrong_results='drop' to leave such "
                         "rows out")
    for r, pos, why in bad:
        warnings.warn(f"nccl-tests log line {r['line']} ({r['size_bytes']:,} B) left out: column "
                      f"{_ROW_COLUMNS[pos]} reports {why}", UserWarning, stacklevel=4)
    kept = [r for r in rows if all(r is not b[0] for b in bad)]
    if not kept:
        raise ValueError("text: every row of the table reports wrong results; nothing is left to read")
    return kept


# ============================================================================ fitting
@dataclass(frozen=True)
class AlphaBeta:
    """One fitted line ``t = steps(n) x alpha_s + bus_factor(n) x S / (busbw_gbps x 1e9)``.

    ``residuals`` are the relative errors ``(model - measured) / measured`` of the rows used
    (``sizes_bytes``), ``worst_rel_error`` the largest of their magnitudes."""
    collective: str
    n: int
    alpha_s: float
    busbw_gbps: float
    sizes_bytes: tuple
    residuals: tuple

    @property
    def worst_rel_error(self) -> float:
        return float(max(abs(r) for r in self.residuals))

    @property
    def latency_s(self) -> float:
        """The constant term: ``steps(n) x alpha_s``."""
        return steps(self.collective, self.n) * self.alpha_s

    def predict(self, size_bytes) -> float:
        """Modelled time in seconds of one call on ``size_bytes``."""
        return predict_time(size_bytes, alpha_s=self.alpha_s, busbw_gbps=self.busbw_gbps,
                            collective=self.collective, n=self.n)


def predict_time(size_bytes, *, alpha_s, busbw_gbps, collective: str, n: int) -> float:
    """``steps(n) x alpha_s + bus_factor(n) x size_bytes / (busbw_gbps x 1e9)``, in seconds."""
    size_bytes = check_number("size_bytes", size_bytes)
    alpha_s = check_number("alpha_s", alpha_s)
    busbw_gbps = check_number("busbw_gbps", busbw_gbps, allow_equal=False)
    return steps(collective, n) * alpha_s + bus_factor(collective, n) * size_bytes / (busbw_gbps * 1e9)


def _columns(sizes_bytes, times_s, *, collective, n):
    sizes = check_sequence("sizes_bytes", sizes_bytes, example="[1024, 2048, 4096]")
    times = check_sequence("times_s", times_s, example="[3.1e-05, 3.2e-05, 3.4e-05]")
    if len(sizes) != len(times):
        raise ValueError(f"sizes_bytes and times_s must have the same length, got {len(sizes)} and "
                         f"{len(times)}")
    s = np.array([check_number(f"sizes_bytes[{i}]", v) for i, v in enumerate(sizes)], dtype=float)
    t = np.array([check_number(f"times_s[{i}]", v, allow_equal=False) for i, v in enumerate(times)],
                 dtype=float)
    return s, t, steps(collective, n), bus_factor(collective, n)


def _solve(s, t, k, c):
    """Least squares of the relative errors, both coefficients >= 0: x = (alpha, 1/busbw)."""
    a = np.column_stack([np.full_like(s, k) / t, c * s / t])
    y = np.ones_like(t)
    x, *_ = np.linalg.lstsq(a, y, rcond=None)
    if x[0] >= 0 and x[1] > 0:
        return x
    # one coefficient came out negative: the best fit with it at zero (a pure-latency or pure-bandwidth line)
    best = None
    for j in (0, 1):
        col = a[:, j]
        xj = float(col @ y / (col @ col))
        cand = np.zeros(2)
        cand[j] = max(xj, 0.0)
        err = float(np.sum((a @ cand - y) ** 2))
        if best is None or err < best[0]:
            best = (err, cand)
    return best[1]


def fit_alpha_beta(sizes_bytes, times_s, *, collective: str, n: int, min_points: int = 2) -> AlphaBeta:
    """Fit ``t = steps(n) x alpha + bus_factor(n) x S / busbw`` to measured times, by least squares on the
    relative errors (each row weighted by 1/t, so an 8 B call at 30 us counts as much as an 8 GiB one at
    60 ms).

    ``sizes_bytes`` are nccl-tests sizes (the whole array, see the module docstring), ``times_s`` seconds.
    Rows of size 0 are dropped. Both coefficients are kept >= 0. The result's ``worst_rel_error`` says how far
    one line is from the worst row: NCCL changes algorithm and protocol across a sweep, so over 8 B..8 GiB it
    is often tens of percent; :func:`fit_two_regimes` fits the two ends separately."""
    collective = check_choice("collective", collective, COLLECTIVES)
    n = check_int("n", n, minimum=2)
    s, t, k, c = _columns(sizes_bytes, times_s, collective=collective, n=n)
    keep = s > 0
    s, t = s[keep], t[keep]
    if len(s) < max(2, min_points):
        raise ValueError(f"sizes_bytes must hold at least {max(2, min_points)} non-zero sizes to fit a line, "
                         f"got {len(s)}")
    if len(set(s.tolist())) < 2:
        raise ValueError("sizes_bytes must hold at least two different sizes to separate latency from "
                         "bandwidth")
    x = _solve(s, t, k, c)
    if x[1] <= 0:
        raise ValueError("times_s do not grow with sizes_bytes: no bandwidth can be fitted (a latency-only "
                         "range)")
    model = k * x[0] + c * s * x[1]
    return AlphaBeta(collective=collective, n=n, alpha_s=float(x[0]), busbw_gbps=float(1.0 / x[1] / 1e9),
                     sizes_bytes=tuple(int(v) for v in s), residuals=tuple(float(v) for v in model / t - 1.0))


@dataclass(frozen=True)
class TwoRegimes:
    """A small-message and a large-message line, split at ``split_bytes`` (the first size of ``large``).

    ``combined`` is the line the model uses: ``alpha_s`` of ``small``, ``busbw_gbps`` of ``large``, with its
    residuals over every row; ``single`` the one line through all rows, for comparison."""
    small: AlphaBeta
    large: AlphaBeta
    split_bytes: int
    combined: AlphaBeta
    single: AlphaBeta

    def predict_protocols(self, size_bytes) -> float:
        """The cheaper of the two lines at ``size_bytes``: NCCL's tuner prices each protocol (LL: little
        latency, a fraction of the bandwidth; LL128/Simple: full bandwidth, more latency per step) as
        latency + size / bandwidth and runs the cheapest (NVIDIA/nccl ``src/graph/tuning.cc``; Hu et al. 2025,
        "Demystifying NCCL", arXiv 2507.04786). Issue 22."""
        return min(self.small.predict(size_bytes), self.large.predict(size_bytes))

    @property
    def protocols_worst_rel_error(self) -> float:
        """The worst relative error of :meth:`predict_protocols` over the rows the two lines were fitted on
        (about 8% on the A100 NVLink log, against 57% for ``combined``)."""
        sizes = self.combined.sizes_bytes
        times = [self.combined.predict(float(s)) / (1.0 + r) for s, r in zip(sizes, self.combined.residuals)]
        return max(abs(self.predict_protocols(float(s)) / t - 1.0) for s, t in zip(sizes, times))


def _combined(small: AlphaBeta, large: AlphaBeta, s, t) -> AlphaBeta:
    k, c = steps(small.collective, small.n), bus_factor(small.collective, small.n)
    model = k * small.alpha_s + c * s / (large.busbw_gbps * 1e9)
    return AlphaBeta(collective=small.collective, n=small.n, alpha_s=small.alpha_s,
                     busbw_gbps=large.busbw_gbps, sizes_bytes=tuple(int(v) for v in s),
                     residuals=tuple(float(v) for v in model / t - 1.0))


def fit_two_regimes(sizes_bytes, times_s, *, collective: str, n: int, min_points: int = 3) -> TwoRegimes:
    """Fit a small-message line and a large-message line, choosing the split (each side at least
    ``min_points`` rows) that gives the smallest sum of squared relative errors; also the single line, for
    comparison.

    The large-message line's bus bandwidth is the one to compare with a link's nominal bandwidth; the
    small-message line's alpha is the per-step latency (its bandwidth term is usually loose: LL protocols)."""
    collective = check_choice("collective", collective, COLLECTIVES)
    n = check_int("n", n, minimum=2)
    min_points = check_int("min_points", min_points, minimum=2)
    s, t, _, _ = _columns(sizes_bytes, times_s, collective=collective, n=n)
    keep = s > 0
    s, t = s[keep], t[keep]
    order = np.argsort(s, kind="stable")
    s, t = s[order], t[order]
    if len(s) < 2 * min_points:
        raise ValueError(f"sizes_bytes must hold at least {2 * min_points} non-zero sizes for two regimes of "
                         f"{min_points} rows, got {len(s)}")
    single = fit_alpha_beta(s, t, collective=collective, n=n)
    best = None
    for i in range(min_points, len(s) - min_points + 1):
        if s[i] == s[i - 1]:
            continue
        try:
            small = fit_alpha_beta(s[:i], t[:i], collective=collective, n=n)
            large = fit_alpha_beta(s[i:], t[i:], collective=collective, n=n)
        except ValueError:
            continue
        sse = sum(r * r for r in small.residuals) + sum(r * r for r in large.residuals)
        if best is None or sse < best[0]:
            best = (sse, small, large, int(s[i]))
    if best is None:
        raise ValueError("no split of sizes_bytes gives two fittable regimes")
    _, small, large, split = best
    return TwoRegimes(small=small, large=large, split_bytes=split, combined=_combined(small, large, s, t),
                      single=single)


@dataclass(frozen=True)
class LogFit:
    """What :func:`from_nccl_tests` finds in one log: the parsed ``table``, the ``regimes`` fit (whose
    ``single`` line and ``combined`` line are the two summaries) and the busbw the log itself reports at its
    largest size (``peak_busbw_gbps``)."""
    table: pd.DataFrame
    regimes: TwoRegimes

    @property
    def collective(self) -> str:
        return self.regimes.single.collective

    @property
    def n_ranks(self) -> int:
        return self.regimes.single.n

    @property
    def peak_busbw_gbps(self) -> float:
        return float(self.table.sort_values("size_bytes")["busbw_gbps"].iloc[-1])


def from_nccl_tests(text, *, collective: str | None = None, n_ranks: int | None = None,
                    min_points: int = 3, wrong_results: str = "refuse") -> LogFit:
    """Parse one nccl-tests run (:func:`parse_nccl_tests`, which refuses corrupt cells and, unless
    ``wrong_results="drop"``, rows whose results nccl-tests found wrong) and fit it (:func:`fit_two_regimes`
    on the out-of-place times; rows of size 0 are dropped). A table that cannot be fitted is refused naming
    its lines and columns, not the fit's internal lists."""
    min_points = check_int("min_points", min_points, minimum=2)
    table = parse_nccl_tests(text, collective=collective, n_ranks=n_ranks, wrong_results=wrong_results)
    coll, n = str(table["collective"].iloc[0]), int(table["n_ranks"].iloc[0])
    lines = table["line"].tolist()
    span = f"text lines {lines[0]}-{lines[-1]} (the table)"
    used = table[table["size_bytes"] > 0]
    if len(used) < 2 * min_points:
        raise ValueError(f"{span}: {len(used)} rows of non-zero size; two regimes of min_points={min_points} "
                         f"rows need at least {2 * min_points} (a sweep such as -b 8 -e 8G -f 2 gives 31)")
    if used["size_bytes"].nunique() < 2:
        raise ValueError(f"{span}: every row has the same size ({int(used['size_bytes'].iloc[0]):,} B): "
                         "latency cannot be told from bandwidth")
    try:
        regimes = fit_two_regimes(table["size_bytes"].tolist(), (table["time_us"] * 1e-6).tolist(),
                                  collective=coll, n=n, min_points=min_points)
    except ValueError as e:                 # name the log's lines and columns, not the fit's lists
        msg = re.sub(r"(times_s|sizes_bytes)\[(\d+)\]",
                     lambda m: f"line {lines[int(m.group(2))]}'s "
                               f"{'time (out-of-place, us)' if m.group(1) == 'times_s' else 'size'}", str(e))
        msg = msg.replace("times_s", "the time (out-of-place, us) column")
        msg = msg.replace("sizes_bytes", "the size column")
        raise ValueError(f"{span}: {msg}") from None
    return LogFit(table=table, regimes=regimes)


def node_level_busbw(algbw_gbps, *, nodes: int, collective: str = "all_reduce") -> float:
    """Bus bandwidth with each node counted as one rank: ``algbw x bus_factor(nodes)``.

    For a multi-node log this is what the hierarchical model's network step sees: NCCL reduces inside a node
    over NVLink first, so each byte of the array crosses the network ``bus_factor(nodes)`` times per node, not
    ``bus_factor(ranks)`` times per GPU. Compared with the node's egress (NICs x line rate), it gives the
    network's achievable fraction; nccl-tests' own busbw (``x 2(n-1)/n`` over all ranks) can exceed the NICs'
    line rate on two nodes (a tree there sends each byte once, not 2(n-1)/n times)."""
    algbw_gbps = check_number("algbw_gbps", algbw_gbps, allow_equal=False)
    nodes = check_int("nodes", nodes, minimum=2)
    return algbw_gbps * bus_factor(collective, nodes)


# ========================================================================== the saved data (chapters 6 and 9)
def _data_dir():
    from pathlib import Path

    return Path(__file__).resolve().parents[2] / "data"


def published_logs() -> list[str]:
    """The file names of the published nccl-tests logs saved in ``data/nccl_tests/`` (its README gives each
    one's source and hardware), sorted."""
    return sorted(p.name for p in (_data_dir() / "nccl_tests").glob("*.txt"))


def published_log(name: str) -> str:
    """The text of one saved nccl-tests log, ``name`` one of :func:`published_logs` (for
    :func:`parse_nccl_tests` or :func:`from_nccl_tests`). Drawn in chapter 6, fitted in chapter 9."""
    logs = published_logs()
    if not isinstance(name, str):
        raise TypeError(f"name must be a log's file name (one of {logs}), got {type(name).__name__}")
    if name not in logs:
        raise ValueError(f"name {name!r} is not a saved nccl-tests log; choose one of {logs}")
    return (_data_dir() / "nccl_tests" / name).read_text()


#: Columns of :func:`gloo_fits`, units in the names.
GLOO_FIT_COLUMNS = ("collective", "n_ranks", "rows", "alpha_us", "latency_us", "busbw_gbps",
                    "worst_rel_error")


def gloo_fits(times=None) -> pd.DataFrame:
    """One :func:`fit_alpha_beta` line per (collective, ranks) of a gloo timing sweep: ``times`` is a
    DataFrame with the columns of ``data/gloo_collective_times.csv`` (``collective``, ``n_ranks``,
    ``size_bytes``, ``time_s_median``), by default that file (``tools/measure_memory.py collectives``, on this
    book's 2-CPU machine). Columns :data:`GLOO_FIT_COLUMNS`: ``alpha_us`` per step, ``latency_us`` = steps x
    alpha, the bus bandwidth in GB/s and the worst relative error of the line over the sweep. Chapter 9."""
    if times is None:
        times = pd.read_csv(_data_dir() / "gloo_collective_times.csv")
    if not isinstance(times, pd.DataFrame):
        raise TypeError("times must be a DataFrame like data/gloo_collective_times.csv, got "
                        f"{type(times).__name__}")
    missing = {"collective", "n_ranks", "size_bytes", "time_s_median"} - set(times.columns)
    if missing:
        raise ValueError(f"times lacks the columns {sorted(missing)}")
    rows = []
    for (coll, n), g in times.groupby(["collective", "n_ranks"], sort=True):
        ab = fit_alpha_beta(g["size_bytes"].tolist(), g["time_s_median"].tolist(), collective=str(coll),
                            n=int(n))
        rows.append({"collective": str(coll), "n_ranks": int(n), "rows": len(ab.sizes_bytes),
                     "alpha_us": ab.alpha_s * 1e6, "latency_us": ab.latency_s * 1e6,
                     "busbw_gbps": ab.busbw_gbps, "worst_rel_error": ab.worst_rel_error})
    return pd.DataFrame(rows, columns=list(GLOO_FIT_COLUMNS))
