"""Part III, chapter 12 ("How many GPUs do you need?"): the planner's answer (:func:`render_plan`: days
against cost of every plan, the chosen plans' layouts, memory and step time) and the notes under it
(:func:`plan_notes`). :mod:`~llmsizing.charts.time_money` imports every name here and re-exports it.

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..units import GiB
from .base import (COLORS, EXPLORER_TIME_COLORS, GPU_COLORS, FixedView, View, _fast_hbars, _kept_legend,
                   _line, _log_axis, _set_hbars, _step_time_bars, _tokens, _usd, figure_axes, reset_axes)
# what the figure draws whatever plan is chosen, kept by table (moved out in session 25; every name here)
from .plan_groups import (_GROUPS_COLUMNS, _PLAN_GROUPS_KEEP, _PLAN_GROUPS_KEPT, _PlanRow, _bare,  # noqa: F401
                          _codes_bytes, _column_arrays, _cp_text, _front_rows, _gpu_codes, _groups_key,
                          _number_dtype, _plan_groups, _plan_row, _row_type, _table_key, _values_bytes,
                          _vp_text)


# =========================================================================== chapter 12: the planner
#: GPU types and settings of chapter 12's worked example (and the planner widget's defaults).
PLAN_GPUS = ("H100 SXM", "H200", "B200", "A100 80GB")


def _plan_label(r) -> str:
    """A front plan in one line: GPUs, layout and recomputation."""
    from ..planner import recompute_label
    return (f"{int(r.n_gpus):,} x {r.gpu} (tp={r.tp},{_cp_text(r, ' ')}{',' if _cp_text(r) else ''} "
            f"pp={r.pp},{_vp_text(r, ' ')}{',' if _vp_text(r) else ''} dp={r.dp}"
            f"{f', ep={r.ep}' if r.get('ep', 1) > 1 else ''}, ZeRO-{r.zero}"
            f"{', SP' if r.sp else ''}), micro-batch {r.micro_batch} x {r.grad_accum}, "
            f"recompute={recompute_label(r, True)}")


def _chosen_title(r) -> str:
    """The memory panel's title for the chosen plan ``r``: its GPU count and layout, in one form whatever the
    plan (issue 38)."""
    return (f"chosen: {int(r.n_gpus):,} GPUs, tp={r.tp}{_cp_text(r)} pp={r.pp}{_vp_text(r)} dp={r.dp} "
            f"ZeRO-{r.zero}")


#: Line widths, points, of the planner figure's front (thin, dark) and of each GPU type's own front (a wide
#: pale band under it, so a GPU's own front that is the front shows round it: issue 38).
FRONT_LW, OWN_FRONT_LW = 0.8, 3.2


class _PointCloud(Line2D):
    """The grey cloud of every plan that fits: a line of markers only, each pixel's marker drawn once. Agg
    stamps a marker at its point's position rounded to the pixel (``RendererAgg.draw_markers``), so the
    ~25,000 plans of a chapter 17 search land on ~2,000 distinct pixels; drawing each of those once instead
    of every plan (about 7 ms of a widget's move, issue 35) covers the same pixels in the same grey. Only the
    anti-aliased rim of a pixel's marker differs a little (a few levels of 255: a marker stamped again over
    itself darkens its rim). Points within 1e-6 pixel of a rounding boundary, and any not finite, are drawn
    as they are. Kept markers and the drawing order are the data's (the first point of each pixel), so the
    figure is the same from one draw to the next. Any other renderer (SVG, PDF: no pixels) gets every
    point."""

    def draw(self, renderer):
        import numpy as np
        from matplotlib.backends.backend_agg import RendererAgg

        if self._invalidy or self._invalidx:
            self.recache()
        if (not isinstance(renderer, RendererAgg) or not self.get_visible() or self._subslice
                or self._markevery is not None or self._linestyle not in ("None", "none", "", " ")):
            return super().draw(renderer)
        tpath, affine = self._get_transformed_path().get_transformed_points_and_affine()
        xy = affine.transform(tpath.vertices)
        if len(xy) < 2:
            return super().draw(renderer)
        with np.errstate(invalid="ignore"):                 # (inf - inf: NaN, not sure)
            at = np.floor(xy + 0.5)
            ok = np.isfinite(xy) & (np.abs(xy - np.floor(xy) - 0.5) > 1e-6) & (np.abs(at) < 2.0 ** 30)
        sure = ok[:, 0] & ok[:, 1]           # (both coordinates; all(axis=1) on two columns: ~0.3 ms, fig29)
        keep = ~sure
        if sure.all():                     # (as usual: every point, without picking the rows first)
            keep[_first_of_each(at[:, 0].astype(np.int64), at[:, 1].astype(np.int64))] = True
        else:
            rows = np.flatnonzero(sure)
            keep[rows[_first_of_each(at[rows, 0].astype(np.int64), at[rows, 1].astype(np.int64))]] = True
        self._markevery = np.flatnonzero(keep)
        try:
            return super().draw(renderer)
        finally:
            self._markevery = None


def _first_of_each(x, y):
    """The positions of the first point on each distinct pixel ``(x, y)`` (integer arrays), in no particular
    order: what ``np.unique(code, return_index=True)[1]`` gives, from a table of the pixels the points span
    (no sort; issue 35: ~2 ms instead of ~5 for a chapter 17 cloud of 59,000 plans), or from that sort where
    the points span more than a few pixels per point."""
    import numpy as np

    n = len(x)
    if not n:
        return np.zeros(0, dtype=np.intp)
    x0, y0 = int(x.min()), int(y.min())
    w, h = int(x.max()) - x0 + 1, int(y.max()) - y0 + 1
    if w * h > 16 * n + 2**20:                                      # (a sparse span: sort the codes)
        return np.unique((x << 31) + y, return_index=True)[1]
    first = np.full(w * h, n, dtype=np.intp)
    np.minimum.at(first, (x - x0) * h + (y - y0), np.arange(n, dtype=np.intp))
    return first[first < n]


#: The planner figure's legend size, points: 9 pt is 12 px at the figure's 96 dpi, about 11 px on the book's
#: page, whose reading column (sphinx-book-theme at a 1,280 px window: about 690 px) shows the 758 px figure
#: at ~0.91 (issue 38: at 6.5 pt the legend read as 6-7 px; at 8 pt, as ~9.7 px).
PLAN_LEGEND_PT = 9.0


def render_plan(model="llama-3-70b", *, tokens: float = 1e12, gpus=PLAN_GPUS, seq: int = 8192,
                global_batch: int = 512, max_gpus: int | None = 4096, deadline_days: float | None = None,
                budget_usd: float | None = None, highlight=None, plans=None,
                kernel_efficiency: float | None = None, overlap: float | None = None,
                into: Figure | None = None, all_plans=None, deadline_rule: str | None = None,
                grad_buffer: bool | str = False) -> View:
    """The planner's answer (chapter 12, "How many GPUs do you need?"): left, days against cost (log axes) of
    every plan :func:`~llmsizing.planner.plan` finds (grey), each GPU type's own front (thin line) and the
    time-vs-cost front (dots coloured by GPU type); right, the chosen plan's most loaded GPU (what is alive at
    its peak, :func:`~llmsizing.memory.training_memory`, against the capacity and the usable share) and its
    step time by part (:func:`~llmsizing.layouts.step_time`: compute, bubble, each group's communication
    before overlap). ``highlight`` is a row label of the plans (default: the first front plan, the cheapest).

    ``plans`` may pass :func:`~llmsizing.planner.plan`'s result for these arguments (the widget caches it);
    otherwise it is computed. No plan raises the planner's :class:`~llmsizing.planner.NoPlanError`.

    A limit that shapes nothing is said in the figure and the summary (:func:`plan_notes`; ``all_plans``: the
    table before the deadline and budget).

    ``deadline_rule`` (issue 34, :data:`~llmsizing.planner.DEADLINE_RULES`): how the plans met
    ``deadline_days`` and ``budget_usd``, ``"estimate"`` (their point estimates) or ``"slow_end"`` (the slow
    end of their 80% range, ``days_high`` and ``cost_usd_high``; ``plans`` then filtered by it, as
    ``plan(deadline_rule=...)`` does). Given, the summary names the rule and says whether the chosen plan
    meets the deadline and the budget at the slow end (``"yes"``/``"likely"``, as ``plan()``'s
    ``meets_deadline`` and ``within_budget``), and a rule other than the default without a limit is noted as
    keeping every plan. None (the default): ``plan()``'s default, the slow end since issue 34, stated where a
    limit is set. The dots are point estimates; with a limit the chosen plan's slow end (``days_high``,
    ``cost_usd_high`` of ``plan()``'s table) is drawn as well (a hollow diamond, joined to it), the axes reach
    the dashed limits, and the budget's line says what it is held to: the slow-end costs or the point costs
    (the dots).

    ``grad_buffer`` (issue 38, :func:`~llmsizing.planner.plan`'s): the plans' gradient buffer; the chosen
    plan's memory holds it where its ZeRO stage is 0 or 1, as plan() weighed it.

    ``into`` (a widget's kept figure, issue 38, wid33): the panels' artists drawn at the previous redraw are
    kept and given the new data (the left panel's lines while the same lines are drawn, the memory bar and
    the step-time bars always) instead of being removed and made again: ~5-8 ms of CPU a move;
    ``tests/test_widget_layout.py`` checks the widget's figure equals a render on a new figure."""
    import numpy as np

    from ..catalog import get_gpu, resolve_model
    from ..layouts import USABLE_FRACTION, step_time
    from ..memory import training_memory
    from ..job import Job
    from .._validate import check_choice
    from ..footprint import check_grad_buffer_kind, zero_grad_buffer
    from ..planner import DEADLINE_RULES, DEFAULT_DEADLINE_RULE, plan, recompute_kwargs

    # a mixture of experts: chapter 18
    eff, ovl, m = kernel_efficiency, overlap, resolve_model(model, moe=True)
    if deadline_rule is not None:
        deadline_rule = check_choice("deadline_rule", deadline_rule, DEADLINE_RULES)
    if plans is None:                  # no rule given: plan()'s default (the slow end since issue 34)
        plans = plan(m, tokens=tokens, gpus=gpus, seq=seq, global_batch=global_batch, max_gpus=max_gpus,
                     deadline_days=deadline_days, budget_usd=budget_usd, kernel_efficiency=eff, overlap=ovl,
                     deadline_rule=deadline_rule, grad_buffer=grad_buffer)
    if deadline_rule is None and (deadline_days or budget_usd):
        deadline_rule = DEFAULT_DEADLINE_RULE               # stated in the summary, as plan() applied it
    table = _bare(plans)             # (its columns read without a copy of plan()'s attrs each time, issue 35)
    front = table.index[table["pareto"].to_numpy(dtype=bool)]     # the front's row labels (no sub-table)
    if front.empty:
        raise ValueError("plans must hold at least one plan on the front (planner.plan's result)")
    if highlight is None:
        highlight = front[0]
    if highlight not in plans.index:
        raise ValueError(f"highlight must be a row label of the plans (0 to {len(plans) - 1:,}) or None; "
                         f"got {highlight!r}")
    r = _plan_row(table, highlight)        # (table.loc[highlight]'s values, read sooner: draw36)
    g = get_gpu(r.gpu)
    # (the row's layout with its interleaved chunks and pipeline split: issue 34)
    par = Job.from_plan_row(r, m, seq=seq, cp_comm=plans.attrs.get("cp_comm", "p2p")).parallel
    run = dict(batch=int(r.micro_batch), seq=seq, grad_accum=int(r.grad_accum), **recompute_kwargs(r))
    buffer = zero_grad_buffer(check_grad_buffer_kind(grad_buffer), int(r.zero))   # (as plan() weighed it)
    tm = training_memory(m, parallel=par, **run, **({"grad_buffer": buffer} if buffer is not False else {}))
    st = step_time(m, g, par, kernel_efficiency=eff, overlap=ovl, max_nodes="model", **run)

    def build(fig):
        gs = fig.add_gridspec(2, 2, width_ratios=[1.1, 1], height_ratios=[1, 1.3], left=0.1, right=0.94,
                              bottom=0.11, top=0.93, wspace=0.3, hspace=1.25)
        return fig.add_subplot(gs[:, 0]), fig.add_subplot(gs[0, 1]), fig.add_subplot(gs[1, 1])

    # (on a widget's kept figure the panels' artists are kept and updated in place, wid33)
    fig, (ax, ax_m, ax_t) = figure_axes(7.9, 4.4, into, ("plan",), build, keep_log=((0, "x"), (0, "y")),
                                        retained=(0, 1, 2))
    kept_l, kept_m, kept_t = (getattr(a, "llmsizing_panel", None) if into is not None else None
                              for a in (ax, ax_m, ax_t))

    # ---- left: every plan, each GPU type's front, the front, the chosen plan (_log_axis sets the limits)
    groups = _plan_groups(table)
    # the dots are point estimates, and a limit is checked by the rule (issue 34): with a limit, the chosen
    # plan's slow end of its range (plan()'s days_high, cost_usd_high) is drawn, and the budget's line says
    # which cost it is held to
    slow = deadline_rule is not None and bool(deadline_days or budget_usd)
    # (the lines the panel draws, in order: kept while the same; another set: each role's kept line added
    # again, pick33)
    left_key = (tuple(n for n, *_ in groups["own"]), tuple(n for n, *_ in groups["front_by_gpu"]), slow,
                bool(deadline_days), bool(budget_usd))
    if kept_l is not None and kept_l["key"] != left_key:
        reset_axes(ax, keep_log="xy")                           # (what figure_axes does to an axes it keeps)
        kept_l = None
    if kept_l is None:
        cloud = _PointCloud(table["days"].to_numpy(dtype=float), table["cost_usd"].to_numpy(dtype=float),
                            ls="none", marker=".", ms=2.5, color="0.8", zorder=1,
                            label=f"{len(plans):,} plans that fit")
        lines = [ax.add_line(cloud)]
        # each GPU type's own front a wide pale band under the front's thin dark line: where the two meet
        # (chapter 12: the B200's own front is the front) the band still shows round it (issue 38, nits39)
        for name, days, cost in groups["own"]:                  # (as _line: nothing autoscaled)
            lines.append(_line(ax, days, cost, color=GPU_COLORS.get(name, "0.4"), lw=OWN_FRONT_LW, alpha=0.45,
                               zorder=2, solid_capstyle="round", label=f"best on {name} alone"))
        lines.append(_line(ax, *groups["front"], color="0.2", lw=FRONT_LW, zorder=3))
        for name, days, cost in groups["front_by_gpu"]:
            lines.append(_line(ax, days, cost, ls="none", marker="o", ms=4.5,
                               color=GPU_COLORS.get(name, "0.4"), zorder=4, label=f"front: {name}"))
        lines.append(_line(ax, [r.days], [r.cost_usd], ls="none", marker="o", ms=12, mfc="none",
                           mec="#D55E00", mew=2, zorder=5, label="chosen plan",
                           color="C0"))     # (the cycle's first colour, as plot gave it; unseen)
        if slow:
            lines.append(_line(ax, [r.days, r.days_high], [r.cost_usd, r.cost_usd_high], ls=":", lw=0.9,
                               color="#D55E00", zorder=5))
            lines.append(_line(ax, [r.days_high], [r.cost_usd_high], ls="none", marker="D", ms=5, mfc="white",
                               mec="#D55E00", mew=1.2, color="#D55E00", zorder=5,
                               label="chosen plan, slow end of its range"))
        if deadline_days:
            lines.append(ax.axvline(deadline_days, color="#D55E00", lw=0.9, ls="--"))
        if budget_usd:
            lines.append(ax.axhline(budget_usd, color="#D55E00", lw=0.9, ls="--"))
        if into is not None:
            _retain(ax, dict(key=left_key, lines=lines))
    else:
        for text in [*ax.texts]:                  # (the budget's and the notes' texts are made again)
            text.remove()
        data = [(table["days"].to_numpy(dtype=float), table["cost_usd"].to_numpy(dtype=float)),
                *((days, cost) for _, days, cost in groups["own"]), groups["front"],
                *((days, cost) for _, days, cost in groups["front_by_gpu"]), ([r.days], [r.cost_usd])]
        if slow:
            data += [([r.days, r.days_high], [r.cost_usd, r.cost_usd_high]),
                     ([r.days_high], [r.cost_usd_high])]
        if deadline_days:
            data.append(([deadline_days] * 2, [0, 1]))
        if budget_usd:
            data.append(([0, 1], [budget_usd] * 2))
        for line, (x, y) in zip(kept_l["lines"], data, strict=True):
            line.set_data(np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel())
        kept_l["lines"][0].set_label(f"{len(plans):,} plans that fit")
    x_hi, y_hi = table["days"].max(), table["cost_usd"].max()
    if slow:
        x_hi, y_hi = max(x_hi, r.days_high, deadline_days or 0), max(y_hi, r.cost_usd_high, budget_usd or 0)
    if budget_usd:           # (the text under the legend where they meet: the legend names the diamond)
        held = ("slow-end costs (diamond: chosen)" if deadline_rule == "slow_end"
                else "point costs (the dots)")
        ax.text(0.015, budget_usd, f"budget {_usd(budget_usd)} vs {held}", ha="left", va="bottom",
                transform=ax.get_yaxis_transform(), fontsize=6.5, color="#D55E00", zorder=4)
    _log_axis(ax.xaxis, min(table["days"].min(), deadline_days or np.inf), x_hi, lambda v: f"{v:g}")
    _log_axis(ax.yaxis, min(table["cost_usd"].min(), budget_usd or np.inf), y_hi, _usd)
    ax.set_xlabel("days of training (log scale)")
    ax.set_ylabel("cost of the run, USD (log scale)")
    ax.spines[["top", "right"]].set_visible(False)
    # (the handles' styles follow from the GPU names in the labels). The count of plans changes with nearly
    # every table: the legend is kept without it and given the new count (its layout is worked out at each
    # draw), instead of being made again (~5 ms a redraw, issue 38)
    count = f"{len(plans):,} plans that fit"
    legend = _kept_legend(ax, ("plan", *("(count)" if label == count else label
                                         for label in ax.get_legend_handles_labels()[1])),
                          lambda: ax.legend(fontsize=PLAN_LEGEND_PT, frameon=True, framealpha=0.9,
                                            edgecolor="none", loc="upper right", borderaxespad=0.2,
                                            handlelength=1.4, labelspacing=0.3))
    legend.texts[0].set_text(count)
    ax.set_title(f"{m.name}, {_tokens(tokens)} tokens, global batch {global_batch:,} x {seq:,}", fontsize=8.5,
                 loc="left")

    # ---- right, top: what is alive on the most loaded GPU at its peak
    parts = {k: v for k, v in tm.phase_parts[tm.peak_phase].items() if v > 0}
    parts["overhead"] = tm.overhead_bytes
    widths = np.array(list(parts.values())) / GiB
    colors, capacity = [COLORS.get(k, "0.5") for k in parts], f" {g.memory_gib:.0f} GiB"
    bars = dict(left=np.cumsum(widths) - widths, height=0.6, colors=colors)     # a bar per part
    if kept_m is None:
        _fast_hbars(ax_m, np.zeros(len(parts)), widths, **bars, autoscale=False)
    else:
        _set_hbars(kept_m["bars"], np.zeros(len(parts)), widths, **bars)
    left = float(widths.sum())
    ax_m.set_xlim(0, 1.05 * max(left, g.memory_gib))    # (before the lines: they then autoscale nothing)
    if kept_m is None:
        panel = dict(bars=ax_m.collections[-1])
        ax_m.set_ylim(-0.5, 0.6)
        panel["full"] = ax_m.axvline(g.memory_gib, color="0.15", lw=1.1, ls="--")
        panel["usable"] = ax_m.axvline(USABLE_FRACTION * g.memory_gib, color="0.45", lw=0.9, ls=":")
        panel["capacity"] = ax_m.text(g.memory_gib, 0.42, capacity, fontsize=7, va="bottom", ha="right")
        ax_m.set_yticks([])
        if into is not None:
            _retain(ax_m, panel)
    else:
        kept_m["full"].set_xdata([g.memory_gib, g.memory_gib])
        kept_m["usable"].set_xdata([USABLE_FRACTION * g.memory_gib] * 2)
        kept_m["capacity"].set_x(g.memory_gib)
        kept_m["capacity"].set_text(capacity)
    ax_m.set_xlabel(f"GiB on the most loaded {g.name} (peak: {tm.peak_phase})", fontsize=8)
    _kept_legend(ax_m, ("plan memory", *parts),             # (the colours follow from the parts' names)
                 lambda: ax_m.legend([Patch(facecolor=c, edgecolor="none") for c in colors], list(parts),
                                     fontsize=PLAN_LEGEND_PT, frameon=False, ncols=3,
                                     loc="upper center", bbox_to_anchor=(0.5, -0.58), handlelength=1.2,
                                     columnspacing=0.9, labelspacing=0.3))
    # one form for every plan (issue 38: "4,096 GPUs, ..." and "512 x B200, ..." side by side in chapter 12):
    # the GPU count and layout; the GPU's name is in the axis label under it and in the summary
    title = ax_m.set_title(_chosen_title(r), fontsize=8.5, loc="left")
    if title.get_window_extent().x1 > fig.bbox.width:      # (chapter 12's fastest plan, vp=20: read27d)
        title.set_fontsize(7.5)

    # ---- right, bottom: where the step's time goes
    if kept_t is None:
        _step_time_bars(ax_t, st, fontsize=7.5)
        if into is not None:
            _retain(ax_t, dict(bars=ax_t.collections[-1], names=list(st.parts())))
    else:
        _step_time_update(ax_t, kept_t, st, fontsize=7.5)
    ax_t.set_xlabel("seconds per step (communication before overlap, "
                    + ("hidden group by group)" if ovl is None else f"{ovl:.0%} of it hidden)"), fontsize=7.5)
    # ends at the axis' right end and runs left, where there is room: centred, it ran 22 px past the PNG's
    # right edge (issue 38); as high as the tick labels usually put it
    ax_t.xaxis.label.set_horizontalalignment("right")
    ax_t.xaxis.set_label_coords(1.0, -0.22)
    ax_t.set_title(f"step {st.step_s:.2f} s, MFU {r.mfu:.0%}: {r.days:,.1f} days, {_usd(r.cost_usd)}",
                   fontsize=8.5, loc="left")

    notes = plan_notes(table, global_batch=global_batch, max_gpus=max_gpus, deadline_days=deadline_days,
                       budget_usd=budget_usd, all_plans=all_plans, deadline_rule=deadline_rule)
    if notes:                 # bottom right of the left panel: below the cloud of plans, away from the front
        import textwrap
        ax.text(0.985, 0.015, "\n".join(textwrap.fill(n, 40) for n in notes), transform=ax.transAxes,
                ha="right", va="bottom", multialignment="left", fontsize=6.5,
                color="0.1",
                bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="#D55E00", lw=0.6, alpha=0.95), zorder=6)

    rank = list(front).index(highlight) + 1 if highlight in front else None
    lines = [f"{m.name}, {_tokens(tokens)} tokens of {seq:,}, global batch {global_batch:,} sequences "
             f"({global_batch * seq / 1e6:.2f}M tokens), on {', '.join(name for name, *_ in groups['own'])}"
             + (f", at most {max_gpus:,} GPUs" if max_gpus else "")
             + (f", deadline {deadline_days:g} days" if deadline_days else "")
             + (f", budget {_usd(budget_usd)}" if budget_usd else "")
             + f": {len(plans):,} plans fit, {len(front)} on the time-vs-cost front",
             *_deadline_lines(r, deadline_days, deadline_rule, budget_usd),
             *(f"note: {n}" for n in notes),
             f"chosen ({f'front #{rank}' if rank else 'not on the front'}): {_plan_label(r)}",
             f"  {tm.total_bytes / GiB:.1f} GiB of {g.memory_gib:.1f} GiB on the most loaded GPU "
             f"(usable {USABLE_FRACTION:.0%}: {USABLE_FRACTION * g.memory_gib:.1f} GiB)",
             f"  step {st.step_s:.2f} s: compute {st.compute_s:.2f} + bubble {st.bubble_s:.2f} + exposed "
             f"communication {st.exposed_comm_s:.2f} (dp {st.comm_by_group_s['dp']:.2f}, tp "
             f"{st.comm_by_group_s['tp']:.2f}, pp {st.comm_by_group_s['pp']:.2f}"
             + (f", cp {st.comm_by_group_s['cp']:.2f}" if "cp" in st.comm_by_group_s else "")
             + f" before overlap); MFU {r.mfu:.0%}",
             f"  {r.days:,.1f} days ({r.days_low:,.1f}-{r.days_high:,.1f}), {r.gpu_hours:,.0f} GPU-hours, "
             f"{_usd(r.cost_usd)} ({_usd(r.cost_usd_low)}-{_usd(r.cost_usd_high)})",
             *_range_note_lines(plans, r, st),
             *([f"assumes: {plans.attrs['assumes']}"] if plans.attrs.get("assumes") else []),
             "the front, cheapest first:"]
    for index, line in groups["front_lines"]:
        lines.append(f"{'>' if index == highlight else ' '}{line}")
    return FixedView(fig, "\n".join(lines))


def _retain(ax, panel: dict) -> None:
    """Keep ``panel`` (the artists a render updates in place) on ``ax`` of a widget's kept figure, and mark
    the axes for :func:`~llmsizing.charts.figures.figure_axes` (``retained``) not to empty it at the next
    redraw. Its titles are pinned at the top as :func:`~llmsizing.charts.figures.reset_axes` pins those of
    the axes it empties (they are not measured again at every draw)."""
    for loc in ("left", "center", "right"):          # (none set yet: the render sets its title after this)
        ax.set_title("", loc=loc, y=1.0)
    ax.llmsizing_titles_pinned = True
    ax.llmsizing_panel, ax.llmsizing_retained = panel, True


def _step_time_update(ax, panel: dict, st, *, fontsize: float) -> None:
    """:func:`~llmsizing.charts.base._step_time_bars` on axes it drew before (``panel``: its bars and part
    names), updated in place: the bars' corners and colours, the data limits as a new collection sets them
    (after :func:`~llmsizing.charts.figures.reset_axes`' ``relim``), the autoscaled limits (the y axis is
    already inverted; ``set_ybound`` keeps it so, at the limits the new axes would get), and the tick labels
    when the parts change."""
    import numpy as np

    parts = st.parts()
    names = list(parts)
    bars = panel["bars"]
    _set_hbars(bars, np.arange(len(names)), [parts[k] for k in names],
               colors=[{**EXPLORER_TIME_COLORS, "ep": "#D55E00"}[k] for k in names])
    ax.relim()
    ax.ignore_existing_data_limits = True
    bars.remove()                            # (added again: the data limits as for a new collection)
    ax.add_collection(bars)
    ax.autoscale_view()
    if names != panel["names"]:
        ax.set_yticks(np.arange(len(names)), [n if n in ("compute", "pipeline bubble") else f"{n} comm."
                                              for n in names], fontsize=fontsize)
        panel["names"] = names


def _range_note_lines(plans, r, st) -> list[str]:
    """The summary's lines saying, when the chosen plan ``r`` runs on a GPU whose kernel efficiency is a
    stand-in (no published run of its generation and dtype calibrates it), that no calibrated range applies
    and the range shown is borrowed (issue 34): the plans' ``attrs["range_notes"]``
    (:func:`~llmsizing.planner.plan`), else the chosen step's ``range_note``
    (:func:`~llmsizing.mfu_inputs.layout_range_note`). None on a calibrated cell. Formatting only."""
    notes = plans.attrs.get("range_notes")
    note = notes.get(r.gpu, "") if notes is not None else st.range_note
    return [f"  range on the {r.gpu}: {note}"] if note else []


def _deadline_lines(r, deadline_days: float | None, deadline_rule: str | None,
                    budget_usd: float | None = None) -> list[str]:
    """The summary's lines on the rule of the deadline and the budget (issue 34), for the chosen plan ``r`` (a
    row of :func:`~llmsizing.planner.plan`'s table): the rule in words and whether the plan meets the deadline
    and the budget at the slow end of its 80% range (:func:`~llmsizing.planner.meets_deadline`,
    :func:`~llmsizing.planner.within_budget`). None without
    a limit or a rule (the summary as before). Formatting only."""
    from ..planner import budget_rule_text, deadline_rule_text, meets_deadline, within_budget

    if deadline_rule is None:
        return []
    lines = []
    if budget_usd:
        meets = within_budget([float(r.cost_usd)], [float(r.cost_usd_high)], float(budget_usd))[0]
        why = {"yes": "even its slow end is", "likely": "only its point estimate is",
               "no": "neither its point estimate nor its slow end is"}[meets]
        lines = [f"budget {_usd(budget_usd)}, kept by the {budget_rule_text(deadline_rule, budget_usd)}",
                 f"chosen plan within the budget at the slow end of its range: {meets} ({why}: "
                 f"{_usd(r.cost_usd)}, {_usd(r.cost_usd_high)} at the slow end)"]
    if not deadline_days:
        return lines
    meets = meets_deadline([float(r.days)], [float(r.days_high)], float(deadline_days))[0]
    why = {"yes": "even its slow end does", "likely": "only its point estimate does",
           "no": "neither its point estimate nor its slow end does"}[meets]
    rule = deadline_rule_text(deadline_rule, deadline_days)
    return [f"deadline {deadline_days:g} days, kept by the {rule}",
            f"chosen plan meets the deadline at the slow end of its range: {meets} ({why}: "
            f"{r.days:,.1f} days, {r.days_high:,.1f} at the slow end)", *lines]


def plan_notes(plans, *, global_batch: int, max_gpus: int | None = None, deadline_days: float | None = None,
               budget_usd: float | None = None, all_plans=None,
               deadline_rule: str | None = None) -> list[str]:
    """Why a planner limit changes nothing in its figure (issue 25), from :func:`~llmsizing.planner.plan`'s
    table ``plans`` (and ``all_plans``, the same search before the deadline and budget, if known): a
    ``max_gpus`` above the front's largest GPU count (either no plan that fits uses more GPUs at this global
    batch, since each has ``dp x pp <= global_batch / micro-batch`` and ``tp`` within a node, or those that do
    are all slower than the front's fastest), and a deadline or budget that drops no plan. One sentence per
    limit. ``deadline_rule`` (issue 34): ``"slow_end"`` judges the deadline by ``days_high``, the budget by
    ``cost_usd_high``; a rule other than plan()'s default is noted, without a deadline or a budget, as keeping
    every plan. Formatting only."""
    from ..planner import DEFAULT_DEADLINE_RULE, check_global_batch

    global_batch, notes = check_global_batch(global_batch), []
    searched = plans if all_plans is None else all_plans
    front = plans["n_gpus"].to_numpy()[plans["pareto"].to_numpy(dtype=bool)]       # the front's GPU counts
    if max_gpus is not None and len(front) and int(front.max()) < max_gpus:
        end, largest = int(front.max()), int(searched["n_gpus"].max())
        why = (f"no plan that fits uses more than {largest:,}" if largest < max_gpus else
               f"plans with up to {largest:,} GPUs fit, but none is faster")
        notes.append(f"the front ends at {end:,} GPUs (limit {max_gpus:,}): more does not help at this "
                     f"global batch ({global_batch:,} sequences): {why}")
    slow_end = deadline_rule == "slow_end"
    if deadline_rule not in (None, DEFAULT_DEADLINE_RULE) and not (deadline_days or budget_usd):
        name = "slow end of the range" if slow_end else "point estimate"
        notes.append(f"limit rule: {name}, but no deadline or budget is set: every plan is kept")
    days = "days_high" if slow_end else "days"
    if (all_plans is not None and len(all_plans) and deadline_days
            and all_plans[days].max() <= deadline_days):
        at = " at the slow end of its range" if slow_end else ""
        notes.append(f"deadline {deadline_days:g} days: every plan meets it (the slowest takes "
                     f"{all_plans[days].max():,.1f} days{at})")
    cost = "cost_usd_high" if slow_end else "cost_usd"
    if all_plans is not None and len(all_plans) and budget_usd and all_plans[cost].max() <= budget_usd:
        at = " at the slow end of its range" if slow_end else ""
        notes.append(f"budget {_usd(budget_usd)}: every plan is within it (the dearest costs "
                     f"{_usd(all_plans[cost].max())}{at})")
    return notes
