"""Part IV, serving and tuning (chapters 15-16). Chapter 15, serving: latency against throughput as the batch
grows, in a band of the stated 80% range (issue 34), with the decode step and the prefill on the GPU's
roofline (:func:`render_serving_curve`), the cost per million output tokens on each GPU type
(:func:`render_serving_cost`), and speculative decoding's speed-up against the acceptance rate
(:func:`render_speculative_speedup`), and the GPUs a fleet needs for a load at the mean, at a percentile and
with prefill and decode apart (:func:`render_fleet`, issue 37); the decode roofline chapter 15 also shows is
chapter 6's (:func:`llmsizing.charts.many_gpus.render_decode_roofline`). Chapter 16, fine-tuning on a budget:
one GPU's memory for full fine-tuning, LoRA and QLoRA (:func:`render_finetune_memory`), in
:mod:`~llmsizing.charts.serve_tune_finetune`, re-exported here.

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

import functools
import math

from matplotlib.figure import Figure
from matplotlib.patches import Polygon
from matplotlib.ticker import NullLocator

from ..catalog import price_note
from ..units import GiB
from .base import (COLORS, GPU_COLORS, FixedView, View, _fixed_figure, _kept_legend,
                   _grid, _log_axis, _log_scale, _short_number, figure_axes, new_figure)
from .serve_tune_finetune import (FINETUNE_COLORS, FINETUNE_PARTS, render_finetune_calibration,  # noqa: F401
                                  render_finetune_memory, FINETUNE_MARKERS)


# =========================================================================== chapter 15: serving
#: One highlighted point drawn as a Line2D marker that looks like ``scatter(..., s=40)``: the same area
#: (6.3 pt across) and scatter's 1.5 pt edge in the face colour.
_POINT = dict(ms=40**0.5, mew=1.5, zorder=3)
#: The chosen batch's marker on chapter 15's curve, by :func:`_batch_state`: it runs at once, it is queued
#: (above the scheduler's ``max_num_seqs`` or the KV room: vLLM runs ``running_batch`` at once, in waves,
#: each within the KV room; issue 34, kv30), or it does not fit (the batch run at once is beyond the KV room:
#: a static batch). Each with its own legend entry (lows29); a queued batch sits where it is priced, at its
#: running batch.
_BATCH_MARKS = {"fits": dict(marker="o", color="#000000"), "queued": dict(marker="D", color="#CC79A7"),
                "does not fit": dict(marker="x", color="#D55E00")}


@functools.lru_cache(maxsize=64)
def _sweep_points(model, gpu, **kw) -> tuple:
    """``(batch, output tokens/s per GPU, ITL s, tokens/s low, tokens/s high, ITL low, ITL high)`` of each
    point of :func:`llmsizing.serve.serving_sweep`, the ends being the stated 80% range of each figure
    (:func:`llmsizing.serve.serving_ends`: the fast end has the high tokens/s and the low ITL), kept per
    catalogue model and GPU objects and settings: the curve does not depend on the chosen batch, and a batch
    move worked it out again (issue 38: ~5 ms a move)."""
    from ..serve import serving_ends, serving_sweep

    names = ("output_tokens_per_s_per_gpu", "itl_s")
    out = []
    for s in serving_sweep(model, gpu, **kw):
        e = serving_ends(s, names)
        out.append((s.batch, s.output_tokens_per_s_per_gpu, s.itl_s,
                    *(e[f"{n}_{x}"] for n in names for x in ("low", "high"))))
    return tuple(out)


def _vline(ax, x: float, **style):
    """A vertical line across ``ax`` at data ``x``, as ``axvline`` makes it, for a render that sets the x
    limits afterwards: ``axvline`` first works out the autoscaled limits (issue 38: ~1.5 ms a line)."""
    import matplotlib as mpl
    from matplotlib.lines import Line2D

    line = ax.add_line(Line2D([x, x], [0, 1], transform=ax.get_xaxis_transform(which="grid"), **style))
    line.get_path()._interpolation_steps = mpl.axis.GRIDLINE_INTERPOLATION_STEPS
    return line


def render_serving_curve(model="llama-3-8b", gpu: str = "H100 SXM", tp: int = 1, weights: str = "bf16",
                         kv_cache: str = "bf16", prompt: int = 1024, output: int = 256, batch: int = 16, *,
                         into: Figure | None = None, batching: str = "continuous") -> View:
    """Chapter 15: left, inter-token latency against output tokens/s per GPU as the batch grows (powers of
    two up to the largest batch, :func:`llmsizing.serve.serving_sweep`), the last point being the largest
    batch the engine runs (the KV room, capped at vLLM's ``max_num_seqs``); right, the GPU's bf16 roofline
    (attainable TFLOP/s = min(peak, intensity x bandwidth)) with the decode step and the prefill of one
    prompt placed on it at their achieved rates. The chosen ``batch`` is marked on both; on the left its
    marker and legend entry say whether it runs at once, is queued (above ``max_num_seqs`` or the KV room) or
    does not fit (:data:`_BATCH_MARKS`). ``batching="static"`` prices the chosen batch at once as stated
    (kv30: beyond the KV room it does not fit); the curve is the same.

    Issue 34: the shaded band around the curve is the stated 80% range of its points
    (:func:`llmsizing.serve.serving_ends`, the engine's speed over the model's, never a range of its own):
    an engine at the fast end of the range runs every batch at the high tokens/s and the low ITL, one at the
    slow end at the low tokens/s and the high ITL, so the band runs from the fast engine's curve (right and
    below) to the slow one's (left and above), closed at the first and the last batch by straight edges
    between the two ends. The summary gives each figure as "point (low-high)", the same range."""
    import numpy as np

    from ..catalog import get_gpu, resolve_model
    from ..hardware import dense_tflops
    from ..serve import serving, serving_ends
    from ..serve_calibration import COVERAGE

    kw = dict(tp=tp, weights=weights, kv_cache=kv_cache, prompt=prompt, output=output)
    chosen = serving(model, gpu, batch=batch, batching=batching, **kw)
    if chosen.max_batch < 1:
        raise ValueError(f"tp={tp}: {chosen.model} with {weights} weights does not fit {tp} x {chosen.gpu} "
                         f"({chosen.weights_bytes_per_gpu / GiB:,.1f} GiB of weights per GPU + "
                         f"{chosen.overhead_bytes_per_gpu / GiB:.0f} GiB overhead + one sequence's KV cache "
                         f"> {chosen.capacity_bytes_per_gpu / GiB:,.1f} GiB); raise tp or quantise the "
                         "weights")
    # (batch, tokens/s per GPU, ITL s) of each point
    sweep = _sweep_points(resolve_model(model, moe=True), get_gpu(gpu), **kw)

    def build(fig):
        fig.subplots_adjust(left=0.075, right=0.975, bottom=0.14, top=0.91, wspace=0.3)
        return fig.subplots(1, 2)

    fig, (ax, ax2) = figure_axes(7.9, 3.6, into, ("serving curve",), build, keep_log=((0, "x"), (1, "xy")))
    x = [s[1] for s in sweep]
    y = [s[2] * 1e3 for s in sweep]
    # the stated range (issue 34): the fast engine's curve (high tokens/s, low ITL), then the slow one's back
    band_x = [s[4] for s in sweep] + [s[3] for s in sweep[::-1]]
    band_y = [s[5] * 1e3 for s in sweep] + [s[6] * 1e3 for s in sweep[::-1]]
    band = ax.add_patch(Polygon(np.column_stack([band_x, band_y]), closed=True, facecolor="#0072B2",
                                alpha=0.15, lw=0, zorder=1))
    ax.plot(x, y, color="#0072B2", marker="o", ms=3, lw=1.5)
    for batch_s, tokens_s, itl_s, *_ in sweep[:: max(1, len(sweep) // 6)] + (sweep[-1],):
        ax.annotate(f"{batch_s}", (tokens_s, itl_s * 1e3), xytext=(3, -9),
                    textcoords="offset points", fontsize=7, color="0.3")
    cap_batch, cap_tokens_s = sweep[-1][:2]
    _vline(ax, cap_tokens_s, color="#D55E00", lw=0.9, ls="--")
    full = "KV cache full" if chosen.batch_bound == "kv" else "max_num_seqs reached"
    ax.annotate(f"{full}\nat batch {cap_batch:,}", (cap_tokens_s, 0.97),
                xycoords=("data", "axes fraction"), xytext=(-4, 0), textcoords="offset points", ha="right",
                va="top", fontsize=7.5, color="#D55E00")
    state = _batch_state(chosen)
    # single points as Line2D markers: scatter's PathCollection costs a widget redraw ~1 ms more each
    point, = ax.plot([chosen.output_tokens_per_s_per_gpu], [chosen.itl_s * 1e3], ls="none", **_POINT,
                     **_BATCH_MARKS[state])
    said = {"fits": "runs at once",
            "queued": f"queued, {chosen.waves:,} waves\n(vLLM runs {chosen.running_batch:,} at once)",
            "does not fit": f"does not fit\n(KV room {chosen.kv_batch:,})"}[state]
    label = f"batch {chosen.batch:,}: {said}"
    band_label = f"stated {COVERAGE:.0%} range (engine speed)"
    # the marker's style is fixed by the state: that legend is kept, and only its label changes. Left of the
    # middle: the curve runs along the bottom and the cap's note sits top right
    legend = _kept_legend(ax, ("serving batch", state, band_label),
                          lambda: ax.legend([point, band], [label, band_label], fontsize=7, frameon=False,
                                            loc="center left"))
    if legend.get_texts()[0].get_text() != label:
        legend.get_texts()[0].set_text(label)
    _log_axis(ax.xaxis, min(band_x + [chosen.output_tokens_per_s_per_gpu]),
              max(band_x + [chosen.output_tokens_per_s_per_gpu]), _short_number, pad=1.25)
    ax.set_xlabel("output tokens/s per GPU (batch grows to the right)")
    ax.set_ylabel("inter-token latency (ms)")
    ax.set_ylim(0, max(max(band_y), chosen.itl_s * 1e3) * 1.15)
    _grid(ax, lw=0.4, alpha=0.5)
    ax.set_title(f"{chosen.model}, {weights} weights, tp={tp} x {chosen.gpu}", fontsize=9, loc="left")

    g = get_gpu(gpu)
    peak = dense_tflops(g, "bf16")
    bw_tbps = g.memory_bandwidth_gbps / 1e3
    xs = np.logspace(-1, 14, 200, base=2)
    ax2.plot(xs, np.minimum(peak, xs * bw_tbps), color="0.3", lw=1.4, label=f"{g.name} bf16 roofline")
    dec_i = chosen.decode_intensity_flops_per_byte
    dec_rate = chosen.decode_flops_per_gpu / max(chosen.decode_memory_s, chosen.decode_compute_s) / 1e12
    pre_i = chosen.prefill_intensity_flops_per_byte
    pre_rate = chosen.prefill_flops_per_gpu / max(chosen.prefill_compute_s, chosen.prefill_memory_s) / 1e12
    ax2.plot([dec_i], [dec_rate], ls="none", marker="o", color="#0072B2", **_POINT,
             label=f"decode, batch {chosen.batch}")
    ax2.plot([pre_i], [pre_rate], ls="none", marker="s", color="#E69F00", **_POINT,
             label=f"prefill, one {prompt:,}-token prompt")
    _vline(ax2, peak / bw_tbps, color="0.5", lw=0.7, ls=":")
    _log_scale(ax2.xaxis, 2)
    ax2.set_xlim(xs[0] / 1.4, xs[-1] * 1.4)
    ax2.set_xticks([2.0**k for k in range(-1, 15, 3)], [f"{2.0**k:g}" for k in range(-1, 15, 3)])
    ax2.xaxis.set_minor_locator(NullLocator())
    _log_axis(ax2.yaxis, min(xs[0] * bw_tbps, dec_rate, pre_rate), peak, _short_number)
    ax2.set_xlabel("arithmetic intensity (FLOP per byte read)")
    ax2.set_ylabel("TFLOP/s per GPU")
    _grid(ax2, lw=0.4, alpha=0.5)
    # the entries' styles are fixed: a legend is kept, and only its labels (GPU, batch, prompt) change
    labels = ax2.get_legend_handles_labels()[1]
    legend = _kept_legend(ax2, ("serving roofline", len(labels)),
                          lambda: ax2.legend(fontsize=7, frameon=False, loc="lower right"))
    for text, label in zip(legend.get_texts(), labels):
        if text.get_text() != label:
            text.set_text(label)
    ax2.set_title(f"ridge point {peak / bw_tbps:,.0f} FLOP/byte", fontsize=9, loc="left")
    fit = _fit_text(chosen)
    # the stated range of each figure (issue 34): "point (low-high)". Over the KV room cycle_s and last_ttft_s
    # run vLLM's preemptions and admissions, up to 1.5 s a setting (churn35, ttft35): this summary gives the
    # waves' figures there (waves_s, waves_last_ttft_s) and says so; queued by max_num_seqs they agree
    counted = chosen.running_bound != "kv"
    whole, last = ("cycle_s", "last_ttft_s") if counted else ("waves_s", "waves_last_ttft_s")
    ends = serving_ends(chosen, _SUMMARY_RANGED + (whole, last))

    def ranged(name, fmt, scale=1.0, unit="", suffix=""):
        v, lo, hi = (f"{unit}{x * scale:{fmt}}" for x in (getattr(chosen, name), ends[f"{name}_low"],
                                                          ends[f"{name}_high"]))
        return f"{v}{suffix} ({lo}-{hi})"

    lines = [f"{chosen.model} on {tp} x {chosen.gpu}, {weights} weights, {kv_cache} KV cache, prompt "
             f"{prompt:,}, output {output:,}, batch {chosen.batch:,} ({fit}; max batch {chosen.max_batch:,})",
             f"  TTFT {ranged('ttft_s', ',.1f', 1e3, suffix=' ms')}, {chosen.prefill_bound}-bound; ITL "
             f"{ranged('itl_s', ',.2f', 1e3, suffix=' ms')}, {chosen.decode_bound}-bound (TP all-reduces "
             f"{chosen.decode_comm_s * 1e3:,.2f} ms of it)",
             f"  {ranged('output_tokens_per_s', ',.0f')} output tokens/s per replica, "
             f"{ranged('output_tokens_per_s_per_gpu', ',.0f')} per GPU; decode intensity "
             f"{dec_i:,.1f} FLOP/byte vs ridge {peak / bw_tbps:,.0f}",
             f"  {ranged('usd_per_million_output_tokens', ',.3f', unit='$')} per million output tokens, "
             f"{ranged('usd_per_million_input_tokens', ',.3f', unit='$')} per million input tokens "
             f"at ${chosen.price_usd_per_gpu_hour:.2f}/GPU-hour{price_note(chosen.price_kind)} "
             f"(MBU {chosen.mbu:.0%}, MFU {chosen.mfu:.0%})"]
    if chosen.waves > 1:      # issue 34, kv30: the requests over the cap or the KV room wait
        w, t = (ranged(n, ',.1f', suffix=' s') for n in (whole, last))
        took = (f"the whole batch takes {w}, its last request's first token comes after {t}" if counted else
                f"the waves take {w} and would give the last request its first token after {t}; vLLM's "
                "admissions as blocks fit and its KV preemptions are not counted here (Serving.cycle_s and "
                "Serving.last_ttft_s count them, chapter 15)")
        lines.append(f"  queued: {chosen.waves:,} waves of up to {chosen.running_batch:,}; {took}")
    lines.append(f"  (in parentheses: the stated {COVERAGE:.0%} range of a published figure, the engine's "
                 f"speed over the model's; engine {chosen.engine}: chapter 15)")
    return FixedView(fig, "\n".join(lines))


#: The figures of chapter 15's summary that carry the stated range, but the whole batch's time and its last
#: first token (which ones depends on the batch: :func:`render_serving_curve`).
_SUMMARY_RANGED = ("ttft_s", "itl_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
                   "usd_per_million_output_tokens", "usd_per_million_input_tokens")


def _batch_state(s) -> str:
    """A :class:`~llmsizing.serve.Serving`'s batch as chapter 15's curve marks it (:data:`_BATCH_MARKS`):
    ``"fits"`` (``batch <= max_batch``, run at once), ``"queued"`` (above the scheduler's cap or the KV room,
    its running batch within the KV room ``kv_batch``: vLLM runs ``running_batch`` at once and queues the
    rest, issue 34 and kv30) or ``"does not fit"`` (the running batch is beyond the KV room: a batch run at
    once as stated, ``batching="static"``). A static batch over ``max_num_seqs`` but within the KV room runs
    at once: ``"fits"`` (``fits`` is False, as vLLM's cap would queue it; review30a)."""
    if s.fits:
        return "fits"
    if s.running_batch > s.kv_batch:
        return "does not fit"
    return "queued" if s.waves > 1 else "fits"


def _fit_text(s) -> str:
    """Whether a :class:`~llmsizing.serve.Serving`'s batch runs at once: above the scheduler's
    ``max_num_seqs`` (review28b) or the KV room (kv30) vLLM runs what the bound allows and queues the rest,
    and the text names the bound (``running_bound``); a batch run at once beyond the KV room does not fit."""
    state = _batch_state(s)
    if state == "fits":       # (a static batch over vLLM's cap runs at once too: say so, review30a)
        if s.fits:
            return "fits"
        return (f"fits: a static batch, run at once within the KV room of {s.kv_batch:,} (vLLM's "
                f"max_num_seqs {s.max_num_seqs:,} would queue it)")
    over_seqs = s.batch > s.max_batch and s.max_batch < s.kv_batch
    cap = (f"above max_num_seqs {s.max_num_seqs:,}" + (f" x {s.attention_dp} groups" if s.attention_dp > 1
                                                       else "")) if over_seqs and s.max_num_seqs else ""
    if state == "does not fit":
        return f"DOES NOT FIT (KV cache holds {s.kv_batch:,}" + (f"; {cap}" if cap else "") + ")"
    if s.running_bound == "kv":
        cap = f"above the KV room of {s.kv_batch:,} sequences"
    return (f"{cap or 'above max_num_seqs'}: vLLM runs {s.running_batch:,} at once and queues the rest "
            f"({s.waves:,} waves)")


def render_serving_cost(model="llama-3-70b", prompt: int = 1024, output: int = 256, itl_s: float = 0.05,
                        ttft_s: float = 1.0, weights: str = "bf16", gpus=None) -> View:
    """Chapter 15: cost per million output tokens on each GPU type at its cheapest layout meeting the latency
    targets (:func:`llmsizing.serve.serving_cost_by_gpu`), labelled with the layout (tp x batch), whiskers
    at the stated 80% range of the cost (the serving speed's range); the summary's table gives each figure's
    range and each price's as-of date."""
    from ..serve import serving_cost_by_gpu

    df = serving_cost_by_gpu(model, gpus=gpus, prompt=prompt, output=output, itl_s=itl_s, ttft_s=ttft_s,
                             weights=weights)
    # an estimated price is hatched, named and kept out of the ranking (issue 38): those bars go on top, after
    # the ranked ones; a price a survey reports is ranked and named
    df = df.assign(_est=df["price_kind"] == "estimate").sort_values(
        ["_est", "usd_per_million_output_tokens"], na_position="first").drop(columns="_est")
    fig, ax = new_figure(7.2, 0.35 * len(df) + 1.2)
    est = (df["price_kind"] == "estimate").tolist()
    marks = {"estimate": " (est. price, not ranked)", "reported": " (rep. price)"}
    names = [n + marks.get(k, "") for n, k in zip(df.index, df["price_kind"])]
    usd = df["usd_per_million_output_tokens"]
    # the stated 80% range of each cost (serving_cost_by_gpu's _low/_high: the serving speed's range)
    low, high = df["usd_per_million_output_tokens_low"], df["usd_per_million_output_tokens_high"]
    # issue 38: the costs span two orders of magnitude and more (llama-3-70b: $0.40 to $55), and on a linear
    # axis the cheap GPUs' bars were 2 px long: a log axis from the decade below the lowest range end, every
    # bar drawn from that edge, and room on the right (a third of the axis) for the labels
    edge, top = _cost_axis_ends(low.min(), high.max())
    vals = usd.tolist()
    lows, highs = (usd - low).fillna(0).tolist(), (high - usd).fillna(0).tolist()
    bars = ax.barh(names, [v - edge for v in vals], left=edge,
                   color=[GPU_COLORS.get(n, "0.4") for n in df.index], xerr=[lows, highs],
                   error_kw=dict(ecolor="0.25", lw=0.8, capsize=2))
    for bar, e in zip(bars, est):
        if e:
            bar.set_hatch("///")
            bar.set_edgecolor("white")
    for i, (n, r) in enumerate(df.iterrows()):
        no_layout = vals[i] != vals[i]                                                   # NaN
        text = ("no layout meets the target" if no_layout else
                f"${vals[i]:.3f}  (tp={int(r['tp'])}, batch {int(r['batch'])})")
        ax.annotate(text, (edge if no_layout else vals[i] + highs[i], i), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=7.5)
    _log_axis(ax.xaxis, edge, top, lambda v: f"${v:g}", pad=1.0)
    ax.set_ylim(-0.6, len(df) - 0.4)                # (a row without a layout has no bar to widen the view)
    ax.set_xlabel("USD per million output tokens (log scale),\nat catalogue on-demand prices;"
                  + ("\nhatched: an estimated price, not a list price;" if any(est) else "")
                  + "\nwhiskers: the stated 80% range of the engine's speed", fontsize=9)
    ax.set_title(f"{model}, {weights} weights, {prompt:,} in / {output:,} out,\n"
                 f"ITL <= {itl_s * 1e3:g} ms, TTFT <= {ttft_s:g} s", fontsize=9, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    # each price with its own date: providers and days differ down the ranking (reader24c)
    # and each figure with its stated 80% range, point (low-high), as serving_cost_by_gpu gives it (srv33)
    def ranged(r, col, fmt, scale=1.0):
        return (f"{format(r[col] * scale, fmt)} ({format(r[col + '_low'] * scale, fmt)}-"
                f"{format(r[col + '_high'] * scale, fmt)})")

    lines = [f"{'GPU':<10s} {'tp':>3s} {'batch':>6s} {'ITL ms (80% range)':>19s} {'tok/s/GPU':>10s} "
             f"{'$/h':>6s} {'$/M out (80% range)':>23s} {'$/M in (80% range)':>20s}  price as of"]
    for n, r in df.iterrows():
        if r["usd_per_million_output_tokens"] != r["usd_per_million_output_tokens"]:   # NaN: no layout
            lines.append(f"{n:<10s} {r['note']}{price_note(r['price_kind'])}")
        else:
            lines.append(f"{n:<10s} {int(r['tp']):>3d} {int(r['batch']):>6d} "
                         f"{ranged(r, 'itl_s', '.1f', 1e3):>19s} "
                         f"{r['output_tokens_per_s_per_gpu']:>10,.0f} {r['price_usd_per_gpu_hour']:>6.2f} "
                         f"{ranged(r, 'usd_per_million_output_tokens', '.3f'):>23s} "
                         f"{ranged(r, 'usd_per_million_input_tokens', '.3f'):>20s}  {r['price_as_of']}"
                         f"{price_note(r['price_kind'])}" + (f"; {r['note']}" if r["note"] else ""))
    return View(fig, "\n".join(lines))


#: The share of the cost figure's log axis left of the dearest whisker's end; the rest holds its label.
_COST_AXIS_SHARE = 0.62


def _cost_axis_ends(lowest: float, highest: float) -> tuple[float, float]:
    """The ends of chapter 15's log cost axis (:func:`render_serving_cost`) for range ends from ``lowest``
    to ``highest`` USD: the power of ten at or below ``lowest / 1.1`` (the bars' common left edge) and the
    point that leaves ``highest`` at :data:`_COST_AXIS_SHARE` of the axis (the labels' room). No cost at
    all (no GPU meets the target): $0.1 to $1."""
    if not (lowest > 0 and highest >= lowest):          # NaN: nothing priced
        return 0.1, 1.0
    edge = 10.0 ** math.floor(math.log10(lowest / 1.1))
    return edge, edge * (highest / edge) ** (1 / _COST_AXIS_SHARE)


#: The draft lengths chapter 15's speculative-decoding figure draws, and their colours.
SPECULATIVE_KS = (2, 4, 8)
SPECULATIVE_COLORS = dict(zip(SPECULATIVE_KS, ("#56B4E9", "#0072B2", "#D55E00")))


def render_speculative_speedup(model="llama-3-70b", draft="llama-3-8b", gpu: str = "H200",
                               weights: str = "fp8", batch: int = 1, context: int = 1024,
                               ks=SPECULATIVE_KS) -> View:
    """Chapter 15: speculative decoding's speed-up over plain decoding against the per-token acceptance rate,
    one line per draft length ``k`` (:func:`llmsizing.speculative.speculative_decoding`), with 1 (no gain)
    marked. The summary lists the speed-up at a few acceptance rates."""
    import numpy as np

    from ..speculative import speculative_decoding

    rates = np.linspace(0.0, 0.95, 39)
    fig, ax = new_figure(6.4, 3.4)
    rows = {}
    for k in ks:
        ups = [speculative_decoding(model, draft, gpu, k=k, acceptance=float(a), batch=batch, context=context,
                                    weights=weights).speedup for a in rates]
        rows[k] = dict(zip(np.round(rates, 3), ups))
        ax.plot(rates, ups, color=SPECULATIVE_COLORS.get(k, "0.4"), lw=1.8,
                label=f"$k_\\mathrm{{draft}}$ = {k}")         # k is the experts per token (chapter 15)
    ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
    ax.set_xlabel("per-token acceptance rate ρ")
    ax.set_ylabel("speed-up over plain decoding")
    ax.set_xlim(0, 0.95)
    ax.set_ylim(0, None)
    ax.legend(frameon=False, fontsize=8, loc="upper left")
    ax.set_title(f"{model} checked by itself, {draft} drafting, {weights}, one {gpu} each, batch {batch}",
                 fontsize=9, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    shown = (0.5, 0.7, 0.8, 0.9)
    lines = ["k_draft " + " ".join(f"ρ={a:<5g}" for a in shown)]
    for k in ks:
        lines.append(f"{k:<7d} " + " ".join(f"{rows[k][a]:>7.2f}" for a in shown))
    return View(fig, "\n".join(lines))


# =========================================================================== chapter 15: a fleet for a load
#: The colours of the fleet figure's bars: one replica type, and the two pools of a disaggregated plan.
FLEET_COLORS = {"replicas": "#009E73", "prefill": "#E69F00", "decode": COLORS["weights"]}


def fleet_plans(model="llama-3-70b", gpu: str = "H100 SXM", users: int = 1000, prompt: int = 1024,
                output: int = 256, itl_ms: float = 50.0, ttft_ms: float = 1000.0, percentile: float = 95.0,
                prefix_hit: float = 0.0, weights: str = "bf16", *, ask=None):
    """{label: ServingPlan} of the three plans :func:`render_fleet` draws (mean, percentile co-located,
    percentile disaggregated); a plan no layout meets is the library's message (a str). ``ask`` (default
    :func:`llmsizing.serve.replicas_for`) answers each: a widget passes one that keeps its answers per setting
    (:func:`llmsizing.widgets.fleet_widget`)."""
    from ..serve import replicas_for
    from ..serve_search import kept_servings

    ask = replicas_for if ask is None else ask
    kw = dict(users=users, prompt=prompt, output=output, itl_s=itl_ms / 1e3, ttft_s=ttft_ms / 1e3,
              weights=weights, prefix_hit=prefix_hit)
    p = f"p{percentile:g}"
    asks = {"mean, co-located": dict(percentile=50.0), f"{p}, co-located": dict(percentile=percentile),
            f"{p}, disaggregated": dict(percentile=percentile, disaggregated=True)}
    out = {}
    with kept_servings():                  # (the three share their replicas: each priced once)
        for label, extra in asks.items():
            try:
                out[label] = ask(model, gpu, **kw, **extra)
            except ValueError as e:
                out[label] = str(e)
    return out


def render_fleet(model="llama-3-70b", gpu: str = "H100 SXM", users: int = 1000, prompt: int = 1024,
                 output: int = 256, itl_ms: float = 50.0, ttft_ms: float = 1000.0, percentile: float = 95.0,
                 prefix_hit: float = 0.0, weights: str = "bf16", *, into: Figure | None = None,
                 ask=None) -> FixedView:
    """Chapter 15: GPUs for ``users`` concurrent users within the ITL and TTFT targets, three ways: the mean
    answer (Little's law), the ``percentile`` answer with slots at most 80% full, and the same with separate
    prefill and decode pools (stacked); each bar carries the stated 80% range of the count
    (``gpus_low``-``gpus_high``). The summary lists layout, latencies at the percentile and cost, with
    the cost of the fleets sized again at both ends of the range
    (``fleet_usd_per_million_output_tokens_low``/``_high``), and the percentile TTFT and ITL with what users
    would see on the same fleet at both ends (``ttft_p_s_low``/``_high``, ``itl_p_s_low``/``_high``:
    :func:`llmsizing.serve_fleet.on_fleet_ends`, nothing sized again; issue 34). ``ask``: see
    :func:`fleet_plans`."""
    from ..serve_calibration import COVERAGE

    plans = fleet_plans(model, gpu, users, prompt, output, itl_ms, ttft_ms, percentile, prefix_hit, weights,
                        ask=ask)
    fig, ax = _fixed_figure(7.2, 2.6, into=into, left=0.24, right=0.97, top=0.86, bottom=0.2)
    if ax.get_legend() is not None:          # a kept figure's legend from the previous redraw
        ax.get_legend().remove()
    labels = list(plans)
    top = 1.0
    for i, label in enumerate(labels):
        y = len(labels) - 1 - i
        p = plans[label]
        if isinstance(p, str):
            ax.annotate("no layout meets the target", (0, y), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=8)
            continue
        if p.prefill_gpus is not None:
            ax.barh(y, p.prefill_gpus, color=FLEET_COLORS["prefill"], label="prefill pool")
            ax.barh(y, p.decode_gpus, left=p.prefill_gpus, color=FLEET_COLORS["decode"], label="decode pool")
        else:
            ax.barh(y, p.gpus, color=FLEET_COLORS["replicas"] if i else "0.6")
        hi = p.gpus_high if p.gpus_high is not None else p.gpus
        lo = p.gpus_low if p.gpus_low is not None else p.gpus
        ax.errorbar(p.gpus, y, xerr=[[p.gpus - lo], [hi - p.gpus]], color="0.15", capsize=3, lw=1)
        ax.annotate(f"{p.gpus:,} ({lo:,}-{hi:,})", (max(hi, p.gpus), y), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=8)
        top = max(top, hi)
    ax.set_yticks(range(len(labels)), labels[::-1], fontsize=8)
    ax.set_ylim(-0.6, len(labels) - 0.4)
    if any(not isinstance(p, str) and p.prefill_gpus is not None for p in plans.values()):
        ax.legend(*ax.get_legend_handles_labels(), fontsize=7, loc="lower right", frameon=False)
    ax.set_xlim(0, top * 1.3)
    ax.set_xlabel(f"{gpu} GPUs (bars: central; whiskers: the stated 80% range)", fontsize=8)
    ax.set_title(f"{model}, {users:,} users, {prompt:,} in / {output:,} out, ITL <= {itl_ms:g} ms, "
                 f"TTFT <= {ttft_ms:g} ms" + (f", prefix hit {prefix_hit:.0%}" if prefix_hit else ""),
                 fontsize=8.5, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    lines = [f"{'plan':<20s} {'GPUs':>6s} {'range':>10s} {'layout':>24s} {'TTFT ms (on this fleet)':>25s} "
             f"{'ITL ms (on this fleet)':>24s} {'$/M out (80% range)':>21s}"]
    for label, p in plans.items():
        if isinstance(p, str):
            lines.append(f"{label:<20s} {p}")
            continue
        rng = f"{p.gpus_low}-{p.gpus_high}" if p.gpus_low is not None else "-"
        layout = (f"{p.prefill_gpus}+{p.decode_gpus} (P tp={p.prefill_serving.tp}, D tp={p.tp})"
                  if p.prefill_gpus is not None else f"{p.replicas} x tp={p.tp}, batch {p.batch}")
        # the fleet's cost and the costs of the fleets sized again at both ends of the stated speed
        ends = (p.fleet_usd_per_million_output_tokens_low, p.fleet_usd_per_million_output_tokens_high)
        usd = f"{p.fleet_usd_per_million_output_tokens:.3f}" + (
            "" if None in ends else f" ({ends[0]:.3f}-{ends[1]:.3f})")
        # the percentile latencies on this fleet (the same GPUs, layout and batch) with the engine at both
        # ends of its stated speed (serve_fleet.on_fleet_ends, issue 34: nothing sized again)
        ttft = _on_this_fleet(p, "ttft_p_s", ",.0f")
        itl = _on_this_fleet(p, "itl_p_s", ",.1f")
        lines.append(f"{label:<20s} {p.gpus:>6,d} {rng:>10s} {layout:>24s} {ttft:>25s} {itl:>24s} {usd:>21s}")
    lines.append(f"(TTFT and ITL at each plan's percentile; in parentheses, on this fleet: the same GPUs, "
                 "layout and batch with the engine at the fast and the slow end of its stated "
                 f"{COVERAGE:.0%} speed. The GPU and $ ranges are fleets sized again at each end: "
                 "chapter 15)")
    return FixedView(fig, "\n".join(lines))


def _on_this_fleet(p, name: str, fmt: str) -> str:
    """``p``'s ``name`` in ms with, in parentheses, its ``name_low``-``name_high`` (:class:`ServingPlan`'s
    fields from :func:`llmsizing.serve_fleet.on_fleet_ends`): "87 (65-109)"; an end whose queue grows without
    bound reads "unbounded"; no parentheses where the plan carries no ends (``with_range=False``)."""
    v, lo, hi = getattr(p, name), getattr(p, f"{name}_low"), getattr(p, f"{name}_high")
    if lo is None or hi is None:
        return f"{v * 1e3:{fmt}}"

    def ms(x):
        return "unbounded" if math.isinf(x) else f"{x * 1e3:{fmt}}"
    return f"{ms(v)} ({ms(lo)}-{ms(hi)})"
