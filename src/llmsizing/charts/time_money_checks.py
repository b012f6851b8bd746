"""Part III, chapters 13 and 14: the library checked against what was published. Chapter 13, predicted
against published GPU-hours (:func:`render_prediction_check`); chapter 14, the seed articles' claims against
the library (:func:`render_seed_audit`). :mod:`~llmsizing.charts.time_money` imports every name here and
re-exports it.

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

import functools

from matplotlib.figure import Figure

from .base import FixedView, View, _fixed_figure, _inch_margins, _kept_legend, _log_kept, _short_number


# =========================================================================== chapter 13: case studies
def render_prediction_check(rows) -> View:
    """Predicted over published GPU-hours, one row per run, on a log axis centred on 1 (a dot at the central
    estimate, a bar over its range): chapter 13's ("Case studies") check of the library against what was
    reported. ``rows`` is a sequence of mappings with ``label``, ``gpu_hours``, ``gpu_hours_low``,
    ``gpu_hours_high`` (from :class:`~llmsizing.time_cost.TrainingTime`, e.g. ``run_from_step(...).time``)
    and ``published_gpu_hours`` (> 0)."""
    import math

    from .._validate import check_number, check_sequence

    rows = [dict(r) for r in check_sequence("rows", rows, example='[{"label": ..., "gpu_hours": ...}]')]
    for i, r in enumerate(rows):
        missing = {"label", "gpu_hours", "gpu_hours_low", "gpu_hours_high", "published_gpu_hours"} - set(r)
        if missing:
            raise ValueError(f"rows[{i}] lacks {sorted(missing)}")
        check_number(f"rows[{i}]['published_gpu_hours']", r["published_gpu_hours"], allow_equal=False)
    height = 0.9 + 0.38 * len(rows)
    fig, ax = _fixed_figure(7.6, height, left=0.45, right=0.97, bottom=0.62 / height, top=1 - 0.12 / height)
    ys = list(range(len(rows)))[::-1]
    lines, ratios = [], [1.0]
    for y, r in zip(ys, rows):
        pub = r["published_gpu_hours"]
        lo, mid, hi = (r[k] / pub for k in ("gpu_hours_low", "gpu_hours", "gpu_hours_high"))
        ratios += [lo, hi]
        ax.plot([lo, hi], [y, y], color="#0072B2", lw=6, alpha=0.3, solid_capstyle="butt")
        ax.plot([mid], [y], "o", color="#0072B2", ms=6)
        ax.text(hi * 1.06, y, f"{mid:.2f}x", va="center", fontsize=8)
        lines.append(f"{r['label']}: predicted {r['gpu_hours']:,.3g} GPU-hours ({r['gpu_hours_low']:,.3g} to "
                     f"{r['gpu_hours_high']:,.3g}), published {pub:,.3g}: {mid:.2f}x ({lo:.2f} to {hi:.2f})")
    ax.axvline(1.0, color="#D55E00", lw=1.2, ls="--")
    ax.set_xscale("log")
    span = max(abs(math.log(x)) for x in ratios) * 1.35
    ax.set_xlim(math.exp(-span), math.exp(span))
    ticks = [t for t in (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0) if math.exp(-span) <= t <= math.exp(span)]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xticks([], minor=True)
    ax.set_yticks(ys, [r["label"] for r in rows], fontsize=8)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("predicted / published GPU-hours (dot: central, bar: MFU band; 1 = exact)", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return FixedView(fig, "\n".join(lines))


# =========================================================================== chapter 14: the seeds' claims,
# checked
_AUDIT_STYLES = {"holds": ("#009E73", "o"), "needs CPU offload": ("#0072B2", "D"), "off": ("#D55E00", "s"),
                 "wrong in kind": ("#CC79A7", "^")}


class _Same:
    """A key that is its object itself (hashed and compared by identity, and held: its id is not reused)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _Same) and other.obj is self.obj


@functools.lru_cache(maxsize=8)
def _judged(band: float, findings: _Same):
    """:func:`~llmsizing.audit.audit_table` at ``band``, kept per band and per the session's findings it
    judges (``audit._findings``): the seed-audit widget's article moves judged every claim again (issue 38:
    ~15 ms a move). Read only: the figure filters it, never changes it."""
    from ..audit import audit_table

    return audit_table(band)


def render_seed_audit(df=None, *, band: float | None = None, article: str = "all",
                      into: Figure | None = None) -> View:
    """Every recomputed seed claim as one point: the library's value at the point judged (x; the audit's
    ``library`` column) against the claimed value (y), with the central estimate (``library_central``) drawn
    beside it as a bar, joined by a grey line, wherever the two differ (read38b), both
    in the claim's own unit, on log axes, with the line y = x and the band of the verdict rule
    (:data:`~llmsizing.audit_verdict.BAND`). Points above the band are claims that are too high, below it too
    low. Colour and marker give the verdict (holds / needs CPU offload / off by more than the band / wrong in
    kind). ``df`` defaults to :func:`~llmsizing.audit.audit_table` judged with ``band`` (default
    :data:`~llmsizing.audit_verdict.BAND`; give either ``df`` or ``band``); ``article`` ("all", or a seed's
    number such as "000") keeps one article's claims. Taught in chapter 14."""
    import numpy as np
    from matplotlib.collections import LineCollection
    from matplotlib.ticker import LogLocator, NullLocator

    from .._validate import check_choice, check_number
    from ..audit import BAND, KINDS, _findings, verdict_counts, verdict_kind

    if df is not None and band is not None:
        raise ValueError("give either df (an audit table) or band, not both")
    band = BAND if band is None else band
    df = _judged(check_number("band", band, minimum=1.0), _Same(_findings())) if df is None else df
    articles = ["all"] + sorted(df["article"].unique())
    if check_choice("article", article, articles) != "all":
        df = df[df["article"] == article]
    kinds = df["verdict"].map(verdict_kind)
    holds = kinds == "holds"
    groups = {k: kinds == k for k in KINDS}
    # (the log scales are kept from the last redraw of a widget's figure: two new scales cost ~5 ms)
    fig, ax = _inch_margins(6.4, 4.4, left=0.7, bottom=0.5, top=0.2, right=0.2, into=into, keep_log="xy")
    x = df["library"].to_numpy(float)
    y = df["claimed"].to_numpy(float)
    xc = df["library_central"].to_numpy(float) if "library_central" in df else x
    moved = np.abs(np.log(xc / x)) > 1e-9           # the point judged is not the central estimate
    lo = 10 ** np.floor(np.log10(min(x.min(), y.min(), xc.min())))
    hi = 10 ** np.ceil(np.log10(max(x.max(), y.max(), xc.max())))
    line = np.array([lo, hi])
    ax.fill_between(line, line / band, line * band, color="0.85", lw=0, zorder=0,
                    label=f"within {band - 1:.0%} (holds)")
    ax.plot(line, line, color="0.4", lw=1, zorder=1, label="claimed = library")
    pairs = np.stack([np.column_stack([xc[moved], y[moved]]), np.column_stack([x[moved], y[moved]])], axis=1)
    ax.add_collection(LineCollection(pairs.reshape(-1, 2, 2), colors="0.6", lw=0.7, zorder=1.5))
    ax.scatter(xc[moved], y[moved], s=30, marker="|", color="0.15", linewidths=1.1, zorder=2.5,
               label=f"central estimate, where it is not the point judged ({int(moved.sum())})")
    counts = verdict_counts(df)
    loose = (np.abs(np.log(y / x)) > np.log(band)) & holds.to_numpy()   # holds as a bound or a range only
    for name, mask in groups.items():
        color, marker = _AUDIT_STYLES[name]
        m = mask.to_numpy() & ~loose
        ax.scatter(x[m], y[m], s=22, color=color, marker=marker, alpha=0.8, edgecolors="none", zorder=2,
                   label=f"{name} ({counts[name]})")
        if name == "holds" and loose.any():
            ax.scatter(x[loose], y[loose], s=26, facecolors="none", edgecolors=color, marker=marker, zorder=2,
                       label=f"  of which as a bound or range only ({int(loose.sum())})")
    for axis, set_scale in ((ax.xaxis, ax.set_xscale), (ax.yaxis, ax.set_yscale)):
        if not _log_kept(axis):
            set_scale("log")
            axis.llmsizing_log_transform = axis.get_transform()
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    for axis in (ax.xaxis, ax.yaxis):                 # decades only: minor log ticks triple a redraw
        axis.set_major_locator(LogLocator(base=10, numticks=20))
        axis.set_major_formatter(_short_number)       # plain "1k", "1M": mathtext labels are slow to lay out
        axis.set_minor_locator(NullLocator())
    # x is the audit's "judged at" column, the most favourable point, not its central estimate (read38b)
    ax.set_xlabel("the library at the point judged (claim's unit: GB, days, USD, GPUs, tokens/s, ...)")
    ax.set_ylabel("what the seed article claims")
    ax.text(lo * 2, hi / 3, "claim too high", fontsize=8, color="0.35", va="top")
    ax.text(hi / 2, lo * 2, "claim too low", fontsize=8, color="0.35", ha="right")
    # the legend of the last redraw is kept when only its counts differ (the styles are fixed, the labels
    # set here): a new legend costs a move ~10 ms
    labels = ax.get_legend_handles_labels()[1]
    legend = _kept_legend(ax, ("seed audit", labels[0], len(labels)), lambda: ax.legend(
        fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(0.0, 0.9)))
    for text, label in zip(legend.texts, labels):
        if text.get_text() != label:
            text.set_text(label)
    ax.spines[["top", "right"]].set_visible(False)
    r = df["ratio"].to_numpy(float)
    worst = df.iloc[int(np.argmax(np.abs(np.log(r))))]
    label = "" if article == "all" else f"seed {article}, "
    def n(k: str, one: str, many: str) -> str:                     # "1 is wrong in kind", "2 are ..."
        return f"{counts[k]} {one if counts[k] == 1 else many}"

    summary = (f"{label}{len(df)} claims: {n('holds', 'holds', 'hold')} (within {band - 1:.0%}), "
               f"{n('needs CPU offload', 'needs', 'need')} CPU offload, "
               f"{n('off', 'is', 'are')} off by more, {n('wrong in kind', 'is', 'are')} wrong in kind\n"
               f"claimed / library: median {np.median(r):.2f}, from {r.min():.3g} to {r.max():.3g}; "
               f"furthest: {worst['id']} ({worst['ratio']:.3g})\n"
               f"the central estimate is not the point judged for {int(moved.sum())} "
               f"claim{'s' * (int(moved.sum()) != 1)} (bars, joined by a grey line)")
    return FixedView(fig, summary)
