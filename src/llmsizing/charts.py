"""Figures for the book. Each chapter's figure is a ``render_*`` function that returns a :class:`View`
(a matplotlib figure plus a plain-text summary). The notebook's checked cell calls ``show(render_x())``; the
chapter's widget (in :mod:`llmsizing.widgets`) calls the same function on every change, so the static page,
the tests and the live widget all draw the same thing. A widget passes ``into=`` the figure it keeps, so that a
redraw empties and reuses its axes (:func:`figure_axes`) instead of building a new figure: same drawing, a
fraction of the time (``benchmarks/bench.py``).

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator

from .units import GiB

# Colours are safe for colour-blind readers (issue 12): Okabe & Ito's "Color Universal Design" set (2008:
# #0072B2 blue, #E69F00 orange, #009E73 green, #D55E00 vermillion, #CC79A7 reddish purple, #56B4E9 sky blue,
# #F0E442 yellow, black) plus two greys, and Paul Tol's "muted" scheme (#332288, #88CCEE, #44AA99, #117733, #999933,
# #DDCC77, #CC6677, #882255, #AA4499) where a figure needs more colours. tests/test_palette.py simulates protanopia,
# deuteranopia and tritanopia (Machado et al. 2009) and checks that the colours of each figure stay apart.

#: One colour per memory component, used by every chart in the book.
COLORS = {
    "weights": "#0072B2", "gradients": "#E69F00", "master copy": "#009E73", "optimizer states": "#CC79A7",
    "optimizer": "#CC79A7", "activations": "#D55E00", "KV cache": "#D55E00", "overhead": "#BBBBBB",
    # parameter components (chapter 1)
    "embedding": "#0072B2", "position": "#56B4E9", "attention": "#E69F00", "mlp": "#009E73",
    "norms": "#D55E00", "lm_head": "#CC79A7",
    # activation components (chapter 4)
    "attention_projections": "#E69F00", "attention_core": "#F0E442", "dropout_masks": "#555555",
    "residuals": "#56B4E9", "logits": "#CC79A7",
    # the peak of a step (chapter 4)
    "at the peak: gradients + temporaries": "#332288", "autocast copies": "#F0E442", "temporaries": "#882255",
}

DPI = 96


@dataclass(frozen=True)
class View:
    """What a render function returns: a figure and a short text summary of the same numbers."""

    figure: Figure
    summary: str

    def png(self, *, compress_level: int | None = None) -> bytes:
        """The figure as PNG bytes (what the widgets display). ``compress_level`` (0-9, zlib) trades file size
        for encoding time: the widgets pass 1 (same pixels, a few ms faster); ``None`` is PIL's default (6)."""
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", **_png_kwargs(compress_level))
        return buf.getvalue()


def _png_kwargs(compress_level: int | None) -> dict:
    return {} if compress_level is None else {"pil_kwargs": {"compress_level": int(compress_level)}}


def new_figure(width: float = 7.0, height: float = 3.6, ncols: int = 1):
    """A figure detached from pyplot (no global state, no leaks when widgets redraw)."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def blank_figure(width: float, height: float, into: Figure | None = None) -> Figure:
    """An empty ``width`` x ``height``-inch figure without a layout engine (its margins are set by the caller).

    ``into`` is an existing figure to clear and draw again instead of making a new one: each widget keeps one
    figure for its whole life and passes it to its ``render_*`` function as ``into=``. The figure keeps its
    canvas and renderer, so matplotlib's text-measuring caches (keyed on the renderer) stay warm between
    redraws. The drawing is the same as on a new figure."""
    if into is None:
        return Figure(figsize=(width, height), dpi=DPI)
    into.clear()
    into.set_layout_engine(None)
    into.set_size_inches(width, height, forward=False)
    into.set_dpi(DPI)
    into.llmsizing_layout = None
    return into


def figure_axes(width: float, height: float, into: Figure | None, layout: tuple, build):
    """``(figure, axes)`` for a render function: ``build(figure)`` makes the axes (and fixes the margins) of a
    :func:`blank_figure`. ``layout`` names that arrangement (with every argument that shapes it).

    When ``into`` (a widget's kept figure) already holds the axes of the same ``layout`` from the previous
    redraw, they are emptied (:func:`reset_axes`) and returned instead: a redraw then keeps the axes, their
    tick objects and the text-size caches, and only replaces what is plotted. The render function draws the
    same way on both; ``tests/test_widget_layout.py`` checks that the result equals a render on a new figure."""
    if into is not None and getattr(into, "llmsizing_layout", None) == (width, height, layout):
        for artist in [*into.legends, *into.texts]:
            artist.remove()
        axes = into.llmsizing_axes
        for ax in _flat(axes):
            reset_axes(ax)
        return into, axes
    fig = blank_figure(width, height, into)
    axes = build(fig)
    if into is not None:
        fig.llmsizing_layout, fig.llmsizing_axes = (width, height, layout), axes
    return fig, axes


def _kept_legend(ax, key, make):
    """``ax``'s legend: ``make()`` (a call of ``ax.legend``) unless the axes already shows the legend made for the
    same ``key`` at the last redraw of a widget's kept figure, which is then kept as it is (making a legend of 6-8
    entries costs a redraw 2-3 ms). ``key`` must determine everything the legend shows (its labels, and whatever
    sets its handles' styles and its placement). :func:`reset_axes` leaves such a legend in place, so a render
    function must call this for the same axes on every redraw, or its stale legend stays."""
    legend = ax.get_legend()
    if legend is not None and getattr(legend, "llmsizing_key", None) == key:
        return legend
    if legend is not None:
        legend.remove()
    legend = make()
    legend.llmsizing_key = key
    return legend


def _flat(axes) -> list:
    import numpy as np

    return list(np.ravel(axes)) if isinstance(axes, (tuple, list, np.ndarray)) else [axes]


def reset_axes(ax) -> None:
    """Empty an axes for the next redraw of the same figure (public matplotlib API only): remove what was plotted,
    the legend (unless :func:`_kept_legend` made it), titles and labels; back to linear scales, default locators and formatters, the first colour of
    the cycle, autoscaling, no grid, visible spines, upright axes and normal-weight tick labels. The tick
    objects themselves are kept."""
    from matplotlib.scale import LinearScale

    for artist in [*ax.containers, *ax.lines, *ax.patches, *ax.collections, *ax.texts, *ax.images, *ax.tables,
                   *ax.artists]:
        if artist in ax.containers or artist.axes is ax:          # a container removes its bars with it
            artist.remove()
    if ax.get_legend() is not None and not hasattr(ax.get_legend(), "llmsizing_key"):   # (see _kept_legend)
        ax.get_legend().remove()
    ticks = [*ax.xaxis.majorTicks, *ax.yaxis.majorTicks]      # (get_*ticklabels would place the ticks first)
    for tick in ticks:
        tick.label1.set_fontweight("normal")
    pinned = getattr(ax, "llmsizing_titles_pinned", False)
    for loc in ("left", "center", "right"):
        # y given: the titles stay at the top of the axes (where a new figure's automatic placement puts them
        # when no top tick labels or offset text are in the way) without re-measuring the axis on every draw.
        # Once pinned, they stay pinned (set_title without y keeps y), so an empty title needs nothing.
        if ax.get_title(loc) or not pinned:
            ax.set_title("", loc=loc, y=1.0)
    ax.llmsizing_titles_pinned = True
    ax.set_xlabel("")
    ax.set_ylabel("")
    for axis, scale, set_scale in ((ax.xaxis, ax.get_xscale(), ax.set_xscale),
                                   (ax.yaxis, ax.get_yscale(), ax.set_yscale)):
        if scale == "linear":          # the default locators and formatters back, without a new scale's cost
            LinearScale(axis).set_default_locators_and_formatters(axis)
            # ... marked as defaults, as set_xscale leaves them (a units converter, e.g. for categories, may
            # then replace them)
            axis.isDefault_majloc = axis.isDefault_minloc = axis.isDefault_majfmt = axis.isDefault_minfmt = True
        else:
            set_scale("linear")
        if axis.get_inverted():
            axis.set_inverted(False)
    if any(t.gridline.get_visible() for t in [*ticks, *ax.xaxis.minorTicks, *ax.yaxis.minorTicks]):
        ax.grid(False, which="both")                           # (costly: it restyles every tick)
    for spine in ax.spines.values():
        spine.set_visible(True)
    ax.set_prop_cycle(None)                                       # the colour cycle starts again
    ax.set_autoscale_on(True)
    ax.relim()
    ax.ignore_existing_data_limits = True


def show(view: View) -> None:
    """Print the summary and display the figure as PNG: used by the checked cell next to each widget."""
    from IPython.display import Image, display

    print(view.summary)
    display(Image(data=view.png(), format="png", alt=figure_alt_text(view)))


def capacity_line(ax, gib: float, label: str, *, horizontal: bool = True, color: str = "0.25") -> None:
    """Mark a GPU's memory capacity on a bar chart."""
    if horizontal:
        ax.axhline(gib, color=color, lw=1, ls="--")
        ax.annotate(f"{label} ({gib:.1f} GiB)", (1.0, gib), xycoords=("axes fraction", "data"),
                    ha="right", va="bottom", fontsize=8, color=color)
    else:
        ax.axvline(gib, color=color, lw=1, ls="--")
        ax.annotate(f"{label}\n{gib:.1f} GiB", (gib, 1.0), xycoords=("data", "axes fraction"),
                    ha="left", va="top", fontsize=8, color=color)


def stacked_bars(ax, labels: list[str], stacks: dict[str, list[float]], *, horizontal: bool = True,
                 unit: float = GiB) -> None:
    """Draw one stacked bar per label; ``stacks`` maps component -> values in bytes (one per label)."""
    import numpy as np

    left = np.zeros(len(labels))
    pos = np.arange(len(labels))
    for comp, vals in stacks.items():
        vals = np.asarray(vals, dtype=float) / unit
        if horizontal:
            ax.barh(pos, vals, left=left, color=COLORS.get(comp), label=comp)
        else:
            ax.bar(pos, vals, bottom=left, color=COLORS.get(comp), label=comp)
        left += vals
    if horizontal:
        ax.set_yticks(pos, labels)
        ax.invert_yaxis()
    else:
        ax.set_xticks(pos, labels)


# =========================================================================== chapter 1: parameters
def render_parameter_counts(model="llama-2-7b", *, into: Figure | None = None, **changes) -> View:
    """Parameters by component for ``model`` (a catalogue name or Model), optionally with fields changed
    (e.g. ``layers=40``). Chapter 1."""
    from .catalog import resolve_model
    from .model import COMPONENTS
    from .units import fmt_count

    m = resolve_model(model)
    if changes:
        m = m.with_(**changes)
    parts = m.param_breakdown()
    label = m.name
    if changes:  # say what was changed, so a modified model is never shown under the catalogue name alone
        label += " with " + ", ".join(f"{k}={v}" for k, v in changes.items())
    fig, ax = _inch_margins(7, 2.6, left=1.25, bottom=0.85, top=0.35, right=0.25, into=into)
    comps = [c for c in COMPONENTS if parts[c]]
    stacked_bars(ax, [m.name], {c: [parts[c]] for c in comps}, unit=1e9)
    ax.set_xlabel("parameters (billions)")
    fig.legend(*ax.get_legend_handles_labels(), ncols=len(comps), loc="lower center", bbox_to_anchor=(0.5, 0.0),
               fontsize=8, frameon=False)
    ax.set_title(f"{label}: {fmt_count(m.n_params)} parameters", fontsize=10)
    lines = [f"{label}: {m.n_params:,} parameters"]
    lines += [f"  {c:<10s} {parts[c]:>16,d}  ({parts[c] / m.n_params:6.1%})" for c in comps]
    return FixedView(fig, "\n".join(lines))


def render_parameter_shares(models=None) -> View:
    """Where the parameters live, model by model: one bar per model (catalogue names or Models; default:
    the whole catalogue), split by component as a share of that model's count. Chapter 1."""
    from .catalog import list_models, resolve_model
    from .model import COMPONENTS
    from .units import fmt_count

    from ._validate import check_sequence

    if models is None:
        models = list_models()
    ms = [resolve_model(m) for m in check_sequence("models", models, example="['gpt2', 'llama-3-8b']")]
    parts = [m.param_breakdown() for m in ms]
    comps = [c for c in COMPONENTS if any(p[c] for p in parts)]
    fig, ax = new_figure(7.5, 0.42 * len(ms) + 1.4)
    stacks = {c: [p[c] / m.n_params for p, m in zip(parts, ms)] for c in comps}
    stacked_bars(ax, [m.name for m in ms], stacks, unit=0.01)
    for i, m in enumerate(ms):
        ax.annotate(fmt_count(m.n_params), (100, i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the model's parameters (%)")
    fig.legend(*ax.get_legend_handles_labels(), ncols=len(comps), loc="outside lower center", fontsize=8,
               frameon=False)
    ax.set_title("Where the parameters are (tied embeddings are counted once, as 'embedding')", fontsize=10)
    head = f"{'model':<16s}{'params':>9s}" + "".join(f"{c:>11s}" for c in comps)
    lines = [head] + [f"{m.name:<16s}{fmt_count(m.n_params):>9s}" + "".join(f"{p[c] / m.n_params:>11.1%}"
                                                                               for c in comps)
                      for p, m in zip(parts, ms)]
    return View(fig, "\n".join(lines))


# =========================================================================== chapter 2: bytes per parameter
#: The recipe x optimizer pairs the chapter-2 figure compares (the selected pair is added if missing).
MODEL_STATES_COMPARE = (
    ("fp32", "adamw"), ("bf16-mixed", "adamw"), ("bf16-mixed-fp32-grads", "adamw"),
    ("bf16-mixed-dual-grads", "adamw"), ("bf16-mixed", "adamw-8bit"), ("bf16-mixed", "lion"),
    ("bf16-mixed", "adafactor"), ("bf16-mixed", "sgd"), ("bf16", "adamw"),
)

#: Line styles for GPU capacity lines (one per GPU type, in order).
_CAPACITY_STYLES = ("--", "-.", ":", (0, (6, 2, 1, 2, 1, 2)), (0, (1, 1)))
#: Greys and muted colours so neighbouring capacity lines differ in colour as well as dash pattern.
_CAPACITY_COLORS = ("0.15", "#882255", "#332288", "#7F7F7F", "#117733")


def _inch_margins(width: float, height: float, *, left: float, bottom: float, top: float = 0.3,
                  right: float = 0.15, into: Figure | None = None):
    """A fixed-margin figure (see ``_fixed_figure`` in the chapter-4 section) with margins given in inches, so
    that figures of variable height keep the same room for tick labels and the legend. Saved by
    ``FixedView`` without the tight-bbox pass: about half the drawing time of a constrained layout."""
    return _fixed_figure(width, height, left=left / width, right=1 - right / width, bottom=bottom / height,
                         top=1 - top / height, into=into)


def _gpu_lines(ax, gpus, count: int, *, horizontal: bool) -> list:
    """Draw one dashed capacity line per GPU type at ``count`` x its memory (GiB); return the GPU objects."""
    from .catalog import GPU, resolve_gpus

    if isinstance(gpus, (str, GPU)):
        gpus = (gpus,)
    out = []
    # (a GPU named twice, in two spellings, is refused: it would draw two lines for one GPU)
    for i, g in enumerate(resolve_gpus(gpus, example="('H100 SXM', 'H200')", allow_empty=True)):
        cap = count * g.memory_gib
        label = f"{count} × {g.name} = {cap:,.0f} GiB" if count > 1 else f"{g.name} ({cap:.1f} GiB)"
        style = dict(color=_CAPACITY_COLORS[i % len(_CAPACITY_COLORS)], lw=1.1,
                     ls=_CAPACITY_STYLES[i % len(_CAPACITY_STYLES)], label=label)
        line = (ax.axvline if horizontal else ax.axhline)(cap, **style)
        line.capacity_gib = cap           # read by _drop_offscreen_capacity_lines
        out.append(g)
    return out


def _drop_offscreen_capacity_lines(ax, *, horizontal: bool) -> None:
    """Remove the capacity lines that fall outside the axis range, so the legend never names a GPU whose line
    the reader cannot see (the text summary still lists every GPU). Call after setting the limits."""
    lo, hi = ax.get_xlim() if horizontal else ax.get_ylim()
    for line in list(ax.lines):
        cap = getattr(line, "capacity_gib", None)
        if cap is not None and not lo <= cap <= hi:
            line.remove()


def render_model_states(model="llama-3-8b", precision="bf16-mixed", optimizer="adamw",
                        gpus=("A100 40GB", "H100 SXM", "H200", "B200"), count: int = 1,
                        compare=MODEL_STATES_COMPARE, *, into: Figure | None = None) -> View:
    """Model states (weights, gradients, master copy, optimizer states) of ``model`` for several recipe x
    optimizer pairs, the selected ``precision`` x ``optimizer`` in bold, against the memory of ``count``
    GPUs of each type in ``gpus``. The summary gives the minimum GPU counts from
    :func:`llmsizing.memory.min_gpus_for_bytes`. Chapter 2."""
    from ._validate import check_int, check_sequence
    from .catalog import resolve_model
    from .memory import min_gpus_for_bytes, model_states
    from .units import GB, fmt_count

    m = resolve_model(model)
    count = check_int("count", count, maximum=4096)
    sel = model_states(m, precision=precision, optimizer=optimizer)
    pairs = check_sequence("compare", compare, example="[('bf16-mixed', 'adamw')]", allow_empty=True)
    for i, pair in enumerate(pairs):
        if isinstance(pair, str) or not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"compare[{i}] must be a (precision, optimizer) pair, got {pair!r}")
    pairs = [tuple(p) for p in pairs]
    if (precision, optimizer) not in pairs:
        pairs.insert(0, (precision, optimizer))
    states = [sel if p == (precision, optimizer) else model_states(m, precision=p[0], optimizer=p[1])
              for p in pairs]
    labels = [f"{p} + {o}: {s.bytes_per_param:.4g} B/param" for (p, o), s in zip(pairs, states)]
    stacks = {"weights": [s.weights_bytes for s in states], "gradients": [s.gradients_bytes for s in states],
              "master copy": [s.master_bytes for s in states],
              "optimizer states": [s.optimizer_state_bytes for s in states]}
    fig, ax = _inch_margins(7.5, 0.3 * len(pairs) + 1.6, left=2.9, bottom=0.95, into=into)
    stacked_bars(ax, labels, stacks)
    ax.get_yticklabels()[pairs.index((precision, optimizer))].set_fontweight("bold")
    gs = _gpu_lines(ax, gpus, count, horizontal=True)
    ax.set_xlim(0, max(max(s.total_bytes for s in states) / GiB * 1.05,
                       max((count * g.memory_gib for g in gs), default=0) * 1.05))
    ax.set_xlabel("model states (GiB, 1 GiB = 2³⁰ bytes)")
    ax.tick_params(axis="y", labelsize=8)
    ax.set_title(f"{m.name} ({fmt_count(m.n_params)} params): model states by recipe + optimizer",
                 fontsize=10)
    fig.legend(*ax.get_legend_handles_labels(), ncols=4, loc="lower center", bbox_to_anchor=(0.5, 0.0),
               fontsize=7.5, frameon=False)
    lines = [f"{m.name} ({m.n_params:,} params), {precision} + {optimizer}: {sel.bytes_per_param:.4g} B/param "
             f"= {sel.total_bytes / GiB:,.1f} GiB = {sel.total_bytes / GB:,.1f} GB of model states",
             "  " + " | ".join(f"{k} {v[pairs.index((precision, optimizer))] / GiB:,.1f} GiB"
                               for k, v in stacks.items())]
    for g in gs:
        n = min_gpus_for_bytes(sel.total_bytes, g)
        verdict = ""
        if count > 1:
            verdict = (f"; {count} of them hold {count * g.memory_gib:,.0f} GiB: "
                       + ("enough for the states" if count >= n else "NOT enough"))
        lines.append(f"  needs ≥ {n} × {g.name} ({g.memory_gib:.1f} GiB) just for the states{verdict}")
    lines.append("  (perfect sharding, before activations and overhead: a lower bound)")
    return FixedView(fig, "\n".join(lines))


# =========================================================================== chapter 3: inference memory
def render_inference_memory(model="llama-3-8b", context: int = 8192, batch: int = 1, weights="bf16",
                            kv_cache="bf16", gpus=("A10", "L40S", "H100 SXM", "H200"), *,
                            into: Figure | None = None) -> View:
    """Serving memory of ``model`` (weights + KV cache + overhead allowance, from
    :func:`llmsizing.inference.inference_memory`) next to the ``1.2 x weights`` rule of thumb, against GPU
    capacities. Chapter 3."""
    from .catalog import resolve_model
    from .inference import RULE_OF_THUMB, inference_memory
    from .memory import min_gpus_for_bytes
    from .units import fmt_count

    m = resolve_model(model)
    r = inference_memory(m, batch=batch, context=context, weights=weights, kv_cache=kv_cache)
    fig, ax = _inch_margins(7.5, 2.8, left=0.85, bottom=0.95, into=into)
    labels = ["this book", f"×{RULE_OF_THUMB:g} rule"]
    stacks = {"weights": [r.weights_bytes, r.weights_bytes], "KV cache": [r.kv_cache_bytes, 0.0],
              "overhead": [r.overhead_bytes, 0.0]}
    stacked_bars(ax, labels, stacks)
    ax.barh([1], [(r.rule_of_thumb_bytes - r.weights_bytes) / GiB], left=[r.weights_bytes / GiB],
            color="white", edgecolor="0.4", hatch="///", label=f"rule's +{RULE_OF_THUMB - 1:.0%}")
    for i, total in enumerate((r.total_bytes, r.rule_of_thumb_bytes)):
        ax.annotate(f"{total / GiB:,.1f} GiB", (total / GiB, i), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=8)
    gs = _gpu_lines(ax, gpus, 1, horizontal=True)
    top = max(r.total_bytes, r.rule_of_thumb_bytes) / GiB
    above = [g.memory_gib for g in gs if g.memory_gib >= top]  # show the first GPU that holds it, if any
    ax.set_xlim(0, max(top * 1.15, min(above, default=0) * 1.05))
    _drop_offscreen_capacity_lines(ax, horizontal=True)
    ax.set_xlabel("memory (GiB)")
    ax.set_title(f"{m.name} ({fmt_count(m.n_params)}): batch {batch} × {context:,} tokens, "
                 f"weights {weights}, KV cache {kv_cache}", fontsize=10)
    fig.legend(*ax.get_legend_handles_labels(), ncols=4, loc="lower center", bbox_to_anchor=(0.5, 0.0),
               fontsize=7.5, frameon=False)
    lines = [f"{m.name}, batch {batch} × context {context:,}, weights {weights}, KV cache {kv_cache}:",
             f"  weights {r.weights_bytes / GiB:,.2f} GiB + KV cache {r.kv_cache_bytes / GiB:,.2f} GiB "
             f"+ overhead {r.overhead_bytes / GiB:,.2f} GiB = {r.total_bytes / GiB:,.2f} GiB",
             f"  ×{RULE_OF_THUMB:g} rule: {r.rule_of_thumb_bytes / GiB:,.2f} GiB "
             f"({r.rule_of_thumb_bytes / r.total_bytes - 1:+.0%} vs this book)"]
    for g in gs:
        n, n_rule = min_gpus_for_bytes(r.total_bytes, g), min_gpus_for_bytes(r.rule_of_thumb_bytes, g)
        lines.append(f"  {g.name} ({g.memory_gib:.1f} GiB): needs ≥ {n} (rule says {n_rule})")
    return FixedView(fig, "\n".join(lines))


def render_inference_vs_context(model="llama-3-8b", batches=(1, 8, 32), weights="bf16", kv_cache="bf16",
                                contexts=tuple(2**k for k in range(9, 18)),
                                gpus=("L40S", "H100 SXM", "H200")) -> View:
    """Total serving memory (from :func:`llmsizing.inference.inference_memory`) against context length, one
    line per batch size, with the ``1.2 x weights`` rule (flat: it ignores context and batch) and GPU
    capacities. Chapter 3."""
    import matplotlib.ticker

    from .catalog import resolve_model
    from .inference import RULE_OF_THUMB, inference_memory
    from .units import fmt_count

    from ._validate import check_int, check_sequence

    m = resolve_model(model)
    batches = [check_int("batches[]", b) for b in check_sequence("batches", batches, example="(1, 8, 32)")]
    contexts = sorted({check_int("contexts[]", c)
                       for c in check_sequence("contexts", contexts, example="(4096, 8192)")})
    fig, ax = _inch_margins(7.5, 3.8, left=0.75, bottom=0.95)
    lines = [f"{m.name}: total serving memory (GiB), weights {weights}, KV cache {kv_cache}",
             f"{'context':>9s}" + "".join(f"{'batch ' + str(b):>11s}" for b in batches)]
    table = {b: [inference_memory(m, batch=b, context=c, weights=weights, kv_cache=kv_cache) for c in contexts]
             for b in batches}
    colors = ("#0072B2", "#E69F00", "#D55E00", "#009E73", "#CC79A7", "#555555")
    for i, b in enumerate(batches):
        ax.plot(contexts, [r.total_bytes / GiB for r in table[b]], marker="o", ms=3, lw=1.6,
                color=colors[i % len(colors)], label=f"batch {b}")
    rule = table[batches[0]][0].rule_of_thumb_bytes / GiB
    ax.axhline(rule, color="#CC79A7", lw=2, alpha=0.6, label=f"×{RULE_OF_THUMB:g} rule ({rule:,.1f} GiB)")
    _gpu_lines(ax, gpus, 1, horizontal=False)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(contexts, [f"{c // 1024}K" if c >= 1024 else str(c) for c in contexts])
    ax.minorticks_off()
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:,.4g}"))
    _drop_offscreen_capacity_lines(ax, horizontal=False)
    ax.set_xlabel("context per sequence (tokens)")
    ax.set_ylabel("memory (GiB, log₂ scale)")
    ax.set_title(f"{m.name} ({fmt_count(m.n_params)}): memory grows with batch × context; the rule does not",
                 fontsize=10)
    fig.legend(*ax.get_legend_handles_labels(), ncols=4, loc="lower center", bbox_to_anchor=(0.5, 0.0),
               fontsize=7.5, frameon=False)
    for j, c in enumerate(contexts):
        lines.append(f"{c:>9,d}" + "".join(f"{table[b][j].total_bytes / GiB:>11,.1f}" for b in batches))
    lines.append(f"×{RULE_OF_THUMB:g} rule: {rule:,.1f} GiB at every context and batch")
    return FixedView(fig, "\n".join(lines))


# =========================================================================== chapter 4: activation memory

#: Display names and colours of the stacks in chapter 4's figures (activation components get their own
#: names so they never share a colour with a model-state component).
ACT_LABELS = {
    "norms": "norm inputs", "attention_projections": "QKV / out-proj inputs",
    "attention_core": "attention core (Q, K, V, scores)", "mlp": "MLP", "dropout_masks": "dropout masks",
    "residuals": "layer inputs (checkpoints)", "embedding": "token ids", "logits": "logits + loss",
}
COLORS.update({
    "norm inputs": "#F0E442", "QKV / out-proj inputs": "#E69F00", "attention core (Q, K, V, scores)": "#D55E00",
    "MLP": "#117733", "dropout masks": "#882255", "layer inputs (checkpoints)": "#CC6677",
    "token ids": "#000000", "logits + loss": "#88CCEE",
})
RECOMPUTE_COLORS = {"none": "#D55E00", "selective": "#E69F00", "full": "#0072B2"}


def _mark_beyond_max_seq(ax, x0: float, x1: float, max_seq: int) -> None:
    """Hatch the sequence lengths beyond the model's trained context (``Model.max_seq``): the memory is
    computed the same way there, but running them assumes extended positions (RoPE scaling)."""
    ax.axvspan(x0, x1, facecolor="none", edgecolor="0.75", hatch="//", lw=0, zorder=0.5)
    ax.annotate(f"beyond max_seq ({_seq_label(max_seq)})", (x0, 1.0), xycoords=("data", "axes fraction"),
                xytext=(3, -3), textcoords="offset points", ha="left", va="top", fontsize=7, color="0.4")


def _seq_label(s: int) -> str:
    return f"{s // 1024}K" if s % 1024 == 0 else f"{s:,}"


class FixedView(View):
    """A :class:`View` whose figure has fixed margins (see :func:`_fixed_figure`): saved without the
    ``bbox_inches="tight"`` pass, which would draw the figure twice."""

    def png(self, *, compress_level: int | None = None) -> bytes:
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=DPI, **_png_kwargs(compress_level))
        return buf.getvalue()


def _fixed_figure(width: float, height: float, *, into: Figure | None = None, **margins):
    """Like :func:`new_figure` but with fixed margins instead of constrained layout, which would cost a widget
    redraw ~100 ms of text measuring on a 2-core machine. ``into``: see :func:`blank_figure`."""
    def build(fig):
        fig.subplots_adjust(**margins)
        return fig.subplots()

    return figure_axes(width, height, into, ("one axes", tuple(sorted(margins.items()))), build)


def _fast_stacked_columns(ax, labels: list[str], stacks: dict[str, list[float]], *, width: float = 0.8,
                          unit: float = GiB) -> None:
    """Vertical stacked bars like :func:`stacked_bars`, drawn as one PolyCollection per component (a widget
    redraw with ~100 rectangles is several times faster than one ``Rectangle`` artist per bar)."""
    import numpy as np
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    pos = np.arange(len(labels))
    bottom = np.zeros(len(labels))
    handles = []
    for comp, vals in stacks.items():
        vals = np.asarray(vals, dtype=float) / unit
        x0, x1, top = pos - width / 2, pos + width / 2, bottom + vals
        verts = np.stack([np.column_stack([x0, bottom]), np.column_stack([x1, bottom]),
                          np.column_stack([x1, top]), np.column_stack([x0, top])], axis=1)
        ax.add_collection(PolyCollection(verts, facecolors=COLORS.get(comp), edgecolors="none"))
        handles.append(Patch(facecolor=COLORS.get(comp), label=comp))
        bottom = top
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_xticks(pos, labels)
    ax.legend(handles=handles[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)


def _fast_hbars(ax, y, widths, *, left=0.0, height: float = 0.8, colors=None):
    """Horizontal bars like ``ax.barh(y, widths, left=left, height=height, color=colors)``, drawn as one
    PolyCollection (one ``Rectangle`` artist per bar costs ~1 ms more per widget redraw, making and drawing it).
    Like ``barh``, the x axis autoscales from the bars' left ends without a margin there. Returns legend proxies,
    one per bar."""
    import numpy as np
    from matplotlib.collections import PolyCollection

    y = np.asarray(y, dtype=float)
    x0 = np.broadcast_to(np.asarray(left, dtype=float), y.shape)
    x1 = x0 + np.asarray(widths, dtype=float)
    lo, hi = y - height / 2, y + height / 2
    verts = np.stack([np.column_stack([x0, lo]), np.column_stack([x0, hi]), np.column_stack([x1, hi]),
                      np.column_stack([x1, lo])], axis=1)
    bars = PolyCollection(verts, facecolors=colors, edgecolors="none")
    bars.sticky_edges.x.extend(np.unique(x0).tolist())
    ax.add_collection(bars)
    ax.autoscale_view()                     # (add_collection updates the data limits, but does not autoscale)
    return [Patch(facecolor=c, edgecolor="none") for c in np.broadcast_to(np.asarray(colors, dtype=object), y.shape)]


def _zero3(zero3_gpus: int):
    """Model states sharded ZeRO-3/FSDP-style over ``zero3_gpus`` GPUs (1 = a single GPU, nothing sharded)."""
    from ._validate import check_int
    from .parallel import Parallel

    n = check_int("zero3_gpus", zero3_gpus)
    return Parallel(dp=n, zero=3) if n > 1 else Parallel()


def render_activation_memory(model="llama-3-8b", seq: int = 8192, batch: int = 1, attention: str = "flash",
                             recompute: str = "none", gpu: str = "H100 SXM", precision: str = "bf16-mixed",
                             zero3_gpus: int = 8, dropout: bool = False, stack: str = "fused", *,
                             into: Figure | None = None) -> View:
    """Per-GPU training memory at the peak of a step (weights, optimizer states, activations by component,
    what the peak adds on top of them, overhead) against ``gpu``'s capacity, for sequence lengths 1K ...
    max(32K, ``seq``) with ``seq`` itself highlighted. Model states are sharded over ``zero3_gpus`` GPUs
    (ZeRO-3/FSDP; 1 = one GPU); ``stack`` is the software stack (``"fused"`` or ``"hf"``). Chapter 4."""
    import numpy as np

    from .activations import ACT_COMPONENTS
    from .catalog import get_gpu, resolve_model
    from .memory import max_micro_batch, training_memory
    from .units import fmt_gib

    m = resolve_model(model)
    g = get_gpu(gpu)
    par = _zero3(zero3_gpus)
    kw = dict(batch=batch, precision=precision, attention=attention, recompute=recompute, dropout=dropout,
              parallel=par, stack=stack)
    chosen = training_memory(m, seq=seq, **kw)               # validates every argument first
    seqs = [2**k for k in range(10, 18) if 2**k <= max(32768, seq)]
    seqs = sorted(set(seqs) | {seq})
    runs = [chosen if s == seq else training_memory(m, seq=s, **kw) for s in seqs]
    stacks = {"weights": [r.weights_bytes for r in runs], "optimizer": [r.optimizer_bytes for r in runs]}
    for c in ACT_COMPONENTS:
        vals = [r.activations.breakdown[c] for r in runs]
        if any(vals):
            stacks[ACT_LABELS[c]] = vals
    # the peak is at least weights + optimizer states + activations (the end of the forward); the rest of it
    # is gradients, autocast copies and the temporaries of the phase that holds the peak
    # (never negative: with recomputation the rebuilt layer counted in the activations exists only in the
    # backward, so the bar can be a little above a peak held by the loss backward)
    stacks["at the peak: gradients + temporaries"] = [max(r.peak_bytes - r.weights_bytes - r.optimizer_bytes
                                                          - r.activations_bytes, 0.0) for r in runs]
    stacks["overhead"] = [r.overhead_bytes for r in runs]
    totals = np.array([r.total_bytes for r in runs]) / GiB

    fig, ax = _fixed_figure(7.6, 3.9, left=0.08, right=0.69, bottom=0.13, top=0.92, into=into)
    _fast_stacked_columns(ax, [_seq_label(s) for s in seqs], stacks)
    capacity_line(ax, g.memory_gib, g.name)
    top = 1.12 * max(totals.max(), g.memory_gib)
    if top > 2.5 * g.memory_gib:                              # keep the capacity line readable
        top = 2.5 * g.memory_gib
    ax.set_ylim(0, top)
    for i, t in enumerate(totals):
        if t > top:                                           # off the chart: print the total instead
            ax.annotate(f"{t:,.0f}↑", (i, top), ha="center", va="top", fontsize=7, xytext=(0, -2),
                        textcoords="offset points", color="white", fontweight="bold")
    i_sel = seqs.index(seq)
    ax.get_xticklabels()[i_sel].set_fontweight("bold")
    ax.axvspan(i_sel - 0.5, i_sel + 0.5, color="0.9", zorder=0)
    beyond = [i for i, s in enumerate(seqs) if s > m.max_seq]
    if beyond:
        _mark_beyond_max_seq(ax, beyond[0] - 0.5, len(seqs) - 0.5, m.max_seq)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("GiB per GPU")
    states = "one GPU" if par.dp == 1 else f"states sharded over {par.dp} GPUs"
    ax.set_title(f"{m.name}, micro-batch {batch}, {attention} attention, recompute={recompute}, {stack} stack "
                 f"({states})", fontsize=9, loc="left")

    acts = chosen.activations
    fit = "fits" if chosen.total_bytes <= g.memory_bytes else "does NOT fit"
    bmax = max_micro_batch(m, g, seq, precision=precision, attention=attention, recompute=recompute,
                           dropout=dropout, parallel=par, stack=stack)
    lines = [f"{m.name} at {seq:,} tokens x micro-batch {batch}, {attention} attention, recompute={recompute}, "
             f"{precision}, {stack} stack, {states}:",
             f"  model states     {fmt_gib(chosen.weights_bytes + chosen.gradients_bytes + chosen.optimizer_bytes):>12s}",
             f"  activations      {fmt_gib(acts.total_bytes):>12s}"]
    lines += [f"    {ACT_LABELS[c]:<34s}{fmt_gib(acts.breakdown[c]):>12s}" for c in ACT_COMPONENTS
              if acts.breakdown[c]]
    lines += [f"  peak of the step {fmt_gib(chosen.peak_bytes):>12s}  (in the {chosen.peak_phase})",
              f"  overhead         {fmt_gib(chosen.overhead_bytes):>12s}",
              f"  total            {fmt_gib(chosen.total_bytes):>12s}  -> {fit} on {g.name} ({g.memory_gib:.1f} GiB)",
              f"  largest micro-batch that fits at {seq:,} tokens: {bmax}"]
    if seq > m.max_seq:
        lines.append(f"  ({seq:,} tokens is beyond the {m.max_seq:,} the model was trained with: "
                     "this assumes extended positions, e.g. RoPE scaling)")
    return FixedView(fig, "\n".join(lines))


def render_step_phases(model="llama-3-8b", seq: int = 8192, batch: int = 1, attention: str = "flash",
                       recompute: str = "none", gpu: str = "H100 SXM", precision: str = "bf16-mixed",
                       zero3_gpus: int = 8, stack: str = "fused", optimizer_impl: str = "foreach") -> View:
    """The four phases of one training step (:func:`llmsizing.memory.training_memory`), each a bar of what is
    alive at its peak, against ``gpu``'s capacity; the peak is marked. Chapter 4, "The peak of a step"."""
    from .catalog import get_gpu, resolve_model
    from .memory import PHASES, STEP_PARTS, training_memory
    from .units import fmt_gib

    m = resolve_model(model)
    g = get_gpu(gpu)
    par = _zero3(zero3_gpus)
    t = training_memory(m, batch=batch, seq=seq, attention=attention, recompute=recompute, precision=precision,
                        parallel=par, stack=stack, optimizer_impl=optimizer_impl)
    parts = t.phase_parts
    used = [p for p in STEP_PARTS if any(parts[ph][p] for ph in PHASES)]
    fig, ax = _fixed_figure(7.6, 3.4, left=0.08, right=0.70, bottom=0.12, top=0.90)
    _fast_stacked_columns(ax, list(PHASES), {p: [parts[ph][p] for ph in PHASES] for p in used})
    capacity_line(ax, g.memory_gib, g.name)
    peak = t.peak_bytes / GiB
    i = PHASES.index(t.peak_phase)
    ax.annotate(f"peak {peak:,.1f} GiB", (i, peak), xytext=(0, 3), textcoords="offset points", ha="center",
                va="bottom", fontsize=8, fontweight="bold")
    ax.set_ylim(0, 1.15 * max(peak, g.memory_gib))
    ax.set_ylabel("GiB per GPU")
    states = "one GPU" if par.dp == 1 else f"states over {par.dp} GPUs"
    ax.set_title(f"{m.name}, {batch} x {seq:,} tokens, {precision}, {stack} stack, AdamW {optimizer_impl}, "
                 f"{states}", fontsize=8.5, loc="left")
    lines = [f"{m.name}, micro-batch {batch} x {seq:,} tokens, {attention} attention, recompute={recompute}, "
             f"{precision}, {stack} stack, AdamW {optimizer_impl}, {states}:"]
    for ph in PHASES:
        detail = ", ".join(f"{p} {fmt_gib(parts[ph][p])}" for p in used if parts[ph][p])
        mark = "  <- peak" if ph == t.peak_phase else ""
        lines.append(f"  {ph:<15s}{fmt_gib(t.phases_bytes[ph]):>12s}{mark}   ({detail})")
    lines.append(f"  + overhead allowance {fmt_gib(t.overhead_bytes)} = {fmt_gib(t.total_bytes)}: "
                 + ("fits" if t.total_bytes <= g.memory_bytes else "does NOT fit") + f" on {g.name}")
    return FixedView(fig, "\n".join(lines))


#: Sequence lengths swept by :func:`render_max_micro_batch` (log-spaced integers, 512 ... 128K).
MMB_SEQS = (512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152, 65536,
            98304, 131072)


def render_max_micro_batch(model="llama-3-8b", gpu: str = "H100 SXM", precision: str = "bf16-mixed",
                           zero3_gpus: int = 8, dropout: bool = False, stack: str = "fused", *,
                           into: Figure | None = None) -> View:
    """The largest micro-batch that fits ``gpu`` as sequence length grows, one curve per recompute level
    (colour) and attention kernel (solid flash, dashed eager); computed by
    :func:`llmsizing.memory.max_micro_batch`. The ``"hf"`` stack has no selective recomputation. Chapter 4."""
    from ._validate import check_choice
    from .activations import STACKS
    import matplotlib.ticker
    import numpy as np

    from .catalog import get_gpu, resolve_model
    from .memory import max_micro_batch

    m = resolve_model(model)
    g = get_gpu(gpu)
    par = _zero3(zero3_gpus)
    seqs = np.array(MMB_SEQS)
    stack = check_choice("stack", stack, STACKS)
    curves = {}
    for rc in ("none", "full") if stack == "hf" else ("none", "selective", "full"):
        for att in ("flash", "eager"):
            curves[rc, att] = max_micro_batch(m, g, seqs, precision=precision, attention=att, recompute=rc,
                                              dropout=dropout, parallel=par, stack=stack)
    fig, ax = _fixed_figure(7.6, 3.6, left=0.08, right=0.70, bottom=0.14, top=0.92, into=into)
    width = {"none": 3.2, "selective": 2.0, "full": 1.2}    # curves that coincide stay visible
    for (rc, att), b in curves.items():
        y = np.where(b > 0, b, np.nan).astype(float)
        ax.plot(seqs, y, color=RECOMPUTE_COLORS[rc], ls="-" if att == "flash" else "--", lw=width[rc],
                drawstyle="steps-mid", label=f"{att}, recompute={rc}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ticks = [s for s in seqs if s & (s - 1) == 0]
    ax.set_xticks(ticks, [_seq_label(int(s)) for s in ticks])
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("largest micro-batch (sequences)")
    states = "one GPU" if par.dp == 1 else f"states sharded over {par.dp} GPUs"
    ax.set_title(f"{m.name} on {g.name} ({g.memory_gib:.1f} GiB), {precision}, {stack} stack, {states}", fontsize=9,
                 loc="left")
    ax.grid(True, which="major", lw=0.4, alpha=0.5)
    if np.all([np.all(b == 0) for b in curves.values()]):
        ax.text(0.5, 0.5, "nothing fits: the model states alone exceed the GPU", transform=ax.transAxes,
                ha="center", va="center", color="#b00020")
        ax.set_ylim(1, 2)
        ax.set_xlim(seqs[0] / 1.15, seqs[-1] * 1.15)      # (no data to autoscale from)
    if seqs[-1] > m.max_seq:
        _mark_beyond_max_seq(ax, max(m.max_seq, seqs[0]), seqs[-1] * 1.15, m.max_seq)
        ax.set_xlim(seqs[0] / 1.15, seqs[-1] * 1.15)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))

    show_seqs = [s for s in seqs if s in (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)]
    idx = [int(np.searchsorted(seqs, s)) for s in show_seqs]
    head = f"{'kernel':<6s} {'recompute':<10s}" + "".join(f"{_seq_label(int(s)):>6s}" for s in show_seqs)
    lines = [f"Largest micro-batch of {m.name} on {g.name}, {precision}, {stack} stack, {states} (0 = does not fit):",
             head]
    for (rc, att), b in curves.items():
        lines.append(f"{att:<6s} {rc:<10s}" + "".join(f"{int(b[i]):>6d}" for i in idx))
    return FixedView(fig, "\n".join(lines))


# =========================================================================== chapter 5: measure it yourself
#: Colour per precision mode and line style per attention kernel in chapter 5's figures.
MEASURE_COLORS = {"fp32": "#0072B2", "bf16": "#D55E00", "autocast-bf16": "#009E73"}
MEASURE_STYLES = {"eager": "-", "flash": "--"}
MEASURE_SWEEPS = ("seq", "batch", "recompute", "all")


def render_prediction_vs_measurement(sweep: str = "seq", style: str = "gpt", dropout: bool = False) -> View:
    """The library's activation prediction (lines / open markers) against PyTorch measurements (filled
    markers) from ``data/activation_measurements.csv``, with GPU-style 1-byte dropout masks. ``sweep``:
    ``"seq"`` (batch 2, no recomputation), ``"batch"`` (256 tokens), ``"recompute"`` (batch 2 x 256 tokens),
    or ``"all"`` (every configuration: predicted vs measured, with the +/-5% band). Chapter 5."""
    import numpy as np

    from ._validate import check_bool, check_choice
    from .measurements import TOLERANCE, compare_measurements

    check_choice("sweep", sweep, MEASURE_SWEEPS)
    check_choice("style", style, ("gpt", "llama"))
    check_bool("dropout", dropout)
    df = compare_measurements()
    df = df[(df["style"] == style)]
    MiB = 2**20
    fig, ax = new_figure(7.2, 3.6)
    lines = []
    if sweep == "all":
        for g, sub in df.groupby("group", sort=False):
            mode = sub["mode"].iloc[0]
            ax.scatter(sub["measured_bytes"] / MiB, sub["predicted_bytes"] / MiB, s=14,
                       color=MEASURE_COLORS[mode], label=g, alpha=0.8)
            worst = sub.loc[sub["error"].abs().idxmax(), "error"]
            lines.append(f"{g:<15s} {len(sub):3d} configurations, worst error {worst:+.2%}")
        lo, hi = df["measured_bytes"].min() / MiB / 1.2, df["measured_bytes"].max() / MiB * 1.2
        xs = np.geomspace(lo, hi, 50)
        ax.plot(xs, xs, color="0.2", lw=1, label="prediction = measurement")
        ax.fill_between(xs, xs * (1 - TOLERANCE), xs * (1 + TOLERANCE), color="0.85", zorder=0,
                        label=f"±{TOLERANCE:.0%}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured activations (MiB)")
        ax.set_ylabel("predicted (MiB)")
        ax.set_title(f"tiny {style.upper() if style == 'gpt' else 'Llama'}-style model: every configuration",
                     fontsize=9, loc="left")
    else:
        sub = df[df["dropout"].gt(0) == dropout]
        if sweep == "seq":
            sub, x, xlabel = sub[(sub["batch"] == 2) & (sub["recompute"] == "none")], "seq", "sequence length"
        elif sweep == "batch":
            sub, x, xlabel = sub[(sub["seq"] == 256) & (sub["recompute"] == "none")], "batch", "micro-batch"
        else:
            sub = sub[(sub["batch"] == 2) & (sub["seq"] == 256)].copy()
            sub["rc"] = sub["recompute"].map({"none": 0, "selective": 1, "full": 2})
            x, xlabel = "rc", "recomputation"
        for (mode, att), ser in sub.groupby(["mode", "attention"], sort=False):
            if len(ser) < 2:
                continue
            ser = ser.sort_values(x)
            c, ls = MEASURE_COLORS[mode], MEASURE_STYLES[att]
            if mode != "autocast-bf16":    # autocast is predicted by the bf16 line: draw only its dots
                ax.plot(ser[x], ser["predicted_bytes"] / MiB, color=c, ls=ls, lw=1.2, label=f"{mode}, {att}")
            ax.plot(ser[x], ser["measured_bytes"] / MiB, color=c, ls="none", marker="o" if att == "eager" else "s",
                    ms=4, label=f"{mode}, {att} (measured)")
            worst = ser.loc[ser["error"].abs().idxmax(), "error"]
            lines.append(f"{mode:<14s}{att:<6s} worst error {worst:+7.2%} over {len(ser)} points")
        if sweep == "recompute":
            ax.set_xticks([0, 1, 2], ["none", "selective", "full"])
        else:
            ax.set_xscale("log", base=2)
            vals = sorted(sub[x].unique())
            ax.set_xticks(vals, [str(v) for v in vals])
        ax.set_xlabel(xlabel)
        ax.set_ylabel("activations (MiB)")
        ax.set_title(f"{style}-style, dropout {'on' if dropout else 'off'}: lines = formula (autocast uses the "
                     "bf16 line), markers = PyTorch", fontsize=8, loc="left")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    head = f"Prediction vs measurement ({style}-style, sweep={sweep}" + \
        (")" if sweep == "all" else f", dropout={'on' if dropout else 'off'})") + \
        ", error = predicted/measured - 1, 1-byte masks:"
    return View(fig, "\n".join([head] + ["  " + ln for ln in lines]))


#: The measured phases of ``data/step_timeline_example.csv``, mapped onto the library's (memory.PHASES).
_TIMELINE_PHASES = {"forward": "forward", "loss_forward": "forward", "loss_backward": "loss backward",
                    "head_backward": "loss backward", "backward": "backward", "optimizer": "optimizer step"}
_PHASE_SHADES = {"forward": "#E8EEF7", "loss backward": "#F9E3E3", "backward": "#F3EBD9",
                 "optimizer step": "#E6F2E6"}


def render_step_timeline() -> View:
    """Live bytes over one measured training step (``data/step_timeline_example.csv``: a real Hugging Face
    model on the CPU, op by op), with the library's phases (:func:`llmsizing.memory.training_memory`) drawn as
    levels over the same stretches. Chapters 4 and 5."""
    import pandas as pd

    from .measurements import STEP_TIMELINE_CSV, load_steps, predict_step
    from .memory import PHASES

    tl = pd.read_csv(STEP_TIMELINE_CSV)
    cfg = tl.iloc[0]
    steps = load_steps()
    keys = ["stack", "model_class", "mode", "attention", "recompute", "optimizer_impl", "batch", "seq"]
    row = steps[(steps[keys] == cfg[keys].values).all(axis=1)].iloc[0]
    pred = predict_step(row)
    MiB = 2**20
    tl["library_phase"] = tl["phase"].map(_TIMELINE_PHASES)
    tl = tl[tl["library_phase"].notna()]
    fig, ax = new_figure(7.4, 3.4)
    spans = {}
    width = tl["op_index"].max() - tl["op_index"].min()
    for ph in PHASES:
        sub = tl[tl["library_phase"] == ph]
        if len(sub):
            spans[ph] = (sub["op_index"].min(), sub["op_index"].max())
            ax.axvspan(*spans[ph], color=_PHASE_SHADES[ph], zorder=0, lw=0)
            narrow = spans[ph][1] - spans[ph][0] < 0.1 * width     # the loss backward: a few dozen ops
            ax.annotate(ph, (sum(spans[ph]) / 2, 0.04 if narrow else 1.0), xycoords=("data", "axes fraction"),
                        ha="center", va="bottom" if narrow else "top", fontsize=7.5, color="0.3",
                        rotation=90 if narrow else 0, xytext=(0, 0 if narrow else -2), textcoords="offset points")
    ax.plot(tl["op_index"], tl["live_bytes"] / MiB, color="#D55E00", lw=1.2, label="measured live bytes")
    ax.axhline(row["baseline_bytes"] / MiB, color="#0072B2", lw=1, ls=":",
               label="weights + optimizer states (measured)")
    for i, (ph, (x0, x1)) in enumerate(spans.items()):
        ax.hlines(pred.phases_bytes[ph] / MiB, x0, x1, colors="0.15", lw=1.6, linestyles="--",
                  label="library: the phase's peak" if i == 0 else None)
    ax.set_xlabel("operation in the step (index)")
    ax.set_ylabel("MiB alive")
    ax.set_ylim(0, 1.18 * max(tl["live_bytes"].max(), pred.peak_bytes) / MiB)
    ax.set_title(f"{row['model_class']} ({int(row['n_params']) / 1e6:.0f}M params), {row['mode']}, "
                 f"{row['attention']}, batch {int(row['batch'])} x {int(row['seq'])} tokens, AdamW "
                 f"{row['optimizer_impl']} (CPU)", fontsize=8.5, loc="left")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    lines = [f"{row['model_class']}, {row['mode']}, {row['attention']}, {int(row['batch'])} x {int(row['seq'])} "
             "tokens: the peak of each phase, measured vs library (MiB)"]
    measured = {"forward": row["forward_end_bytes"],
                "loss backward": max(row["loss_backward_max_bytes"], row["head_backward_max_bytes"]),
                "backward": row["backward_max_bytes"], "optimizer step": row["optimizer_max_bytes"]}
    for ph in PHASES:
        lines.append(f"  {ph:<15s}{measured[ph] / MiB:9.1f}{pred.phases_bytes[ph] / MiB:9.1f}"
                     f"  ({pred.phases_bytes[ph] / measured[ph] - 1:+.1%})")
    return View(fig, "\n".join(lines))


# =========================================================================== Part II: the parallelism explorer
#: The step-time parts of :func:`render_parallel_explorer`, in drawing order, with their colours.
EXPLORER_TIME_COLORS = {"compute": "#0072B2", "pipeline bubble": "#BBBBBB", "dp": "#E69F00", "tp": "#009E73",
                        "pp": "#CC79A7"}


def _step_time_bars(ax, st, *, fontsize: float) -> None:
    """Where one step's time goes (:meth:`~llmsizing.layouts.StepTime.parts`): one horizontal bar per part,
    compute first; shared by the parallelism explorer and the planner's figure."""
    import numpy as np

    parts = st.parts()
    names = list(parts)
    _fast_hbars(ax, np.arange(len(names)), [parts[k] for k in names],
                colors=[EXPLORER_TIME_COLORS[k] for k in names])
    ax.set_yticks(np.arange(len(names)), [n if n in ("compute", "pipeline bubble") else f"{n} comm."
                                          for n in names], fontsize=fontsize)
    ax.invert_yaxis()


def render_parallel_explorer(model="llama-3-8b", gpu: str = "H100 SXM", tp: int = 1, pp: int = 1, dp: int = 8,
                             zero: int = 1, sp: bool = False, virtual_stages: int = 1, offload: str = "none",
                             recompute: str = "selective", batch: int = 1, seq: int = 4096, grad_accum: int = 8,
                             mfu: float = 0.4, gpus_per_node: int = 8, *, into: Figure | None = None) -> View:
    """The parallelism explorer (Part II): one layout's per-GPU memory, stage by stage, against the GPU's
    capacity, and its step time split into compute (at an assumed ``mfu``), the pipeline bubble and each
    group's communication (no overlap). ``grad_accum`` is the number of micro-batches per step (a pipeline's
    micro-batches). An impossible layout raises the library's ``ValueError``, which the widget shows."""
    import numpy as np

    from .catalog import get_gpu, resolve_model
    from .layouts import step_time
    from .memory import training_memory
    from .parallel import Parallel
    from .units import fmt_bytes, fmt_gib

    m = resolve_model(model)
    g = get_gpu(gpu)
    par = Parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=sp, virtual_stages=virtual_stages, offload=offload)
    kw = dict(batch=batch, seq=seq, grad_accum=grad_accum, recompute=recompute, parallel=par)
    tm = training_memory(m, **kw)
    st = step_time(m, g, par, batch=batch, seq=seq, grad_accum=grad_accum, mfu=mfu, recompute=recompute,
                   gpus_per_node=gpus_per_node)
    fully_hidden = step_time(m, g, par, batch=batch, seq=seq, grad_accum=grad_accum, mfu=mfu, recompute=recompute,
                             gpus_per_node=gpus_per_node, overlap=1.0)
    comm, compute, bubble = st.communication, st.compute_s, st.bubble
    rows = list(tm.stages)

    def build(fig):
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.25, top=0.9, wspace=0.45)
        return fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.25, 1]})

    fig, (ax, ax_t) = figure_axes(7.9, 3.4, into, ("parallel explorer",), build)
    stacks = {"weights": [r["weights"] for r in rows], "gradients": [r["gradients"] for r in rows],
              "optimizer": [r["optimizer"] for r in rows], "activations": [r["activations"] for r in rows]}
    stacks["temporaries"] = [max(r["peak"] - r["weights"] - r["gradients"] - r["optimizer"] - r["activations"], 0.0)
                             for r in rows]
    stacks["overhead"] = [r["total"] - r["peak"] for r in rows]
    labels = [f"stage {r['stage']}" if len(rows) > 1 else "each GPU" for r in rows]
    _fast_stacked_columns(ax, labels, stacks)
    ax.get_legend().remove()
    ax.legend(handles=[Patch(facecolor=COLORS[k], label=k) for k in stacks], fontsize=6.5, frameon=False,
              ncols=3, loc="upper center", bbox_to_anchor=(0.5, -0.1))
    capacity_line(ax, g.memory_gib, g.name)
    totals = np.array([r["total"] for r in rows]) / GiB
    ax.set_ylim(0, 1.15 * max(totals.max(), g.memory_gib))
    ax.get_xticklabels()[tm.stage].set_fontweight("bold")
    ax.set_ylabel("GiB per GPU")
    many = len(rows) > 8
    ax.tick_params(axis="x", labelrotation=90 if many else 0, labelsize=6 if many else "medium")
    ax.set_title(f"{m.name}: tp={par.tp} pp={par.pp} dp={par.dp} ZeRO-{par.zero}"
                 + (" SP" if par.sp else "") + (f" v={par.virtual_stages}" if par.virtual_stages > 1 else "")
                 + (f" offload={par.offload}" if par.offload != "none" else ""), fontsize=8.5, loc="left")

    _step_time_bars(ax_t, st, fontsize=8)
    ax_t.set_xlabel("seconds per step (no overlap)")
    ax_t.set_title(f"step time at MFU {mfu:.0%} on {g.name}", fontsize=8.5, loc="left")

    fits = tm.total_bytes <= g.memory_bytes
    comm_s = st.comm_s
    lines = [f"{m.name} on {par.gpus} x {g.name} (tp={par.tp}, pp={par.pp}, dp={par.dp}, ZeRO-{par.zero}"
             f"{', SP' if par.sp else ''}{f', {par.virtual_stages} virtual stages' if par.virtual_stages > 1 else ''}"
             f"{f', offload={par.offload}' if par.offload != 'none' else ''}), micro-batch {batch} x {seq:,} tokens,"
             f" {grad_accum} micro-batches per step, recompute={recompute}:",
             f"  most loaded GPU: stage {tm.stage}, {fmt_gib(tm.total_bytes)} (peak {fmt_gib(tm.peak_bytes)} in the "
             f"{tm.peak_phase} + allowance) -> {'fits' if fits else 'does NOT fit'} in {g.memory_gib:.1f} GiB"]
    if not fits:
        lines.append("    (to fit: raise dp with ZeRO, add tp or pp, recompute, or lower the micro-batch)")
    if par.offload != "none":
        lines.append(f"  host memory for offloaded states: {fmt_gib(tm.host_bytes)} per GPU, "
                     f"{fmt_gib(tm.host_bytes * min(gpus_per_node, par.gpus))} per node of {gpus_per_node}")
    for c in comm.collectives:
        lines.append(f"  {c.collective:<46s} {c.calls:>5d} x {fmt_bytes(c.message_bytes):>10s} over {c.link:<10s}"
                     f" {c.time_s * 1e3:>9.1f} ms")
    lines += [f"  compute {compute:.3f} s + bubble {st.bubble_s:.3f} s ({bubble:.0%} of compute) at MFU {mfu:.0%};"
              f" communication {comm_s:.3f} s",
              f"  step time between {fully_hidden.step_s:.3f} s (communication fully hidden) and {st.step_s:.3f} s"
              f" (none hidden): {st.tokens_per_s:,.0f} to {fully_hidden.tokens_per_s:,.0f} tokens/s"]
    return FixedView(fig, "\n".join(lines))


# ----------------------------------------------------------------------------- Part III: time and money
def render_published_mfu() -> View:
    """The MFU each published run implies (:func:`~llmsizing.time_cost.published_runs`), with the book's
    calibrated band (:data:`~llmsizing.time_cost.MFU_LOW` to :data:`~llmsizing.time_cost.MFU_HIGH`) and default."""
    from .time_cost import MFU_DEFAULT, MFU_HIGH, MFU_LOW, published_runs

    df = published_runs().iloc[::-1]
    fig, ax = new_figure(7.4, 3.6)
    colors = ["#0072B2" if c else "#BBBBBB" for c in df["calibration"]]
    ax.barh(range(len(df)), df["implied_mfu"] * 100, color=colors)
    ax.set_yticks(range(len(df)), [f"{r} ({g})" for r, g in zip(df["run"], df["gpu"])], fontsize=8)
    ax.axvspan(MFU_LOW * 100, MFU_HIGH * 100, color="#009E73", alpha=0.12, lw=0, zorder=0)
    ax.axvline(MFU_DEFAULT * 100, color="#009E73", lw=1.5, ls="--")
    ax.text(MFU_DEFAULT * 100, len(df) - 0.4, f" default {MFU_DEFAULT:.0%}", color="#2F6B3A", fontsize=8,
            va="bottom")
    for i, v in enumerate(df["implied_mfu"]):
        ax.text(v * 100 + 0.5, i, f"{v:.0%}", va="center", fontsize=8)
    ax.set_xlim(0, 60)
    ax.set_xlabel("model FLOPs utilisation implied by the published figures (%)")
    ax.spines[["top", "right"]].set_visible(False)
    lines = [f"{r}: {v:.1%}{'' if c else ' (not in the calibration)'}"
             for r, v, c in zip(df["run"][::-1], df["implied_mfu"][::-1], df["calibration"][::-1])]
    summary = "\n".join(lines + [f"calibrated band {MFU_LOW:.0%} to {MFU_HIGH:.0%}, default {MFU_DEFAULT:.0%}"])
    return View(fig, summary)


TIME_GPU_COUNTS = (1, 8, 64, 512, 4096, 32768)


def render_training_time(model="llama-3-70b", tokens: float = 1e12, gpu: str = "H100 SXM", seq: int = 8192,
                         mfu: float | None = None, n_gpus: int = 1024, counts=TIME_GPU_COUNTS, *,
                         into: Figure | None = None) -> View:
    """Days (left) and cost (right) of training ``model`` on ``tokens`` tokens against the GPU count, with the
    MFU range as a band (:func:`~llmsizing.time_cost.training_time`); ``n_gpus`` is marked. At a fixed MFU the
    cost does not depend on the GPU count: more GPUs buy time, not a cheaper run."""
    import numpy as np

    from ._validate import check_int, check_sequence
    from .time_cost import training_time

    counts = sorted({check_int("counts[i]", c) for c in check_sequence("counts", counts, example="(8, 64)")}
                    | {check_int("n_gpus", n_gpus)})
    runs = [training_time(model, tokens=tokens, gpu=gpu, n_gpus=n, seq=seq, mfu=mfu) for n in counts]
    t = runs[counts.index(n_gpus)]
    def build(fig):                                      # fixed margins: a widget redraw skips layout passes
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.16, top=0.95, wspace=0.32)
        return fig.subplots(1, 2)

    fig, (ax, ax2) = figure_axes(7.6, 3.2, into, ("training time",), build)
    x = np.array(counts, dtype=float)
    for a, key, label in ((ax, "days", "days of training"), (ax2, "cost_usd", "cost of the run (USD)")):
        mid = np.array([getattr(r, key) for r in runs])
        lo = np.array([getattr(r, f"{key}_low") for r in runs])
        hi = np.array([getattr(r, f"{key}_high") for r in runs])
        a.fill_between(x, lo, hi, color="#0072B2", alpha=0.18, lw=0)
        a.plot(x, mid, color="#0072B2", marker="o", ms=3)
        a.plot([n_gpus], [getattr(t, key)], marker="o", ms=8, color="#D55E00")
        _log_axis(a.xaxis, x.min(), x.max(), _short_number, pad=1.5)
        if key == "days":
            _log_axis(a.yaxis, lo.min(), hi.max(), _short_number)
        else:                                            # at a fixed MFU the cost is flat: show 3x around it
            _log_axis(a.yaxis, t.cost_usd_low / 3, t.cost_usd_high * 3, _usd, pad=1.0)
        a.set_xlabel(f"number of {t.gpu} GPUs")
        a.set_ylabel(label)
        a.spines[["top", "right"]].set_visible(False)
    summary = (f"{t.model}, {t.tokens:.3g} tokens of {t.seq:,}: {t.total_flops:.3g} model FLOPs\n"
               f"{t.n_gpus:,} x {t.gpu} at MFU {t.mfu:.0%} ({t.mfu_low:.0%}-{t.mfu_high:.0%}): "
               f"{t.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, {t.days:,.1f} days "
               f"({t.days_low:,.1f}-{t.days_high:,.1f}), {t.gpu_hours:,.0f} GPU-hours, "
               f"${t.cost_usd:,.0f} (${t.cost_usd_low:,.0f}-${t.cost_usd_high:,.0f}) "
               f"at ${t.price_usd_per_gpu_hour:.2f}/GPU-hour")
    return FixedView(fig, summary)


# =========================================================================== chapter 6: hardware
#: One colour per catalogued GPU in chapter 6's figures (vendor families share a hue).
GPU_COLORS = {"A10": "#BBBBBB", "L40S": "#555555", "RTX 4090": "#AA4499", "A100 40GB": "#88CCEE",
              "A100 80GB": "#332288", "H100 SXM": "#009E73", "H200": "#000000", "B200": "#D55E00",
              "MI300X": "#F0E442"}


#: Where a GPU's name sits next to its dot in the capacity panel (points; alignment), where the default overlaps.
_LANDSCAPE_LABEL_OFFSETS = {"A100 80GB": (-5, 4, "right"), "RTX 4090": (5, -8, "left")}


def render_gpu_landscape(gpus=None) -> View:
    """Chapter 6: the catalogue's GPUs (default: all) on two axes. Left: memory capacity (GiB, as the driver
    reports it) against HBM bandwidth (TB/s). Right: the bf16 roofline of each GPU, attainable TFLOP/s =
    min(dense peak, intensity x HBM bandwidth), with its ridge point marked, and the intensity of two matrix
    multiplies for reference (one decoding token, and a 4096-cube training matmul). Numbers come from
    :mod:`llmsizing.hardware`."""
    import numpy as np

    from .hardware import gpu_comparison, matmul_intensity_flops_per_byte

    df = gpu_comparison(gpus)
    fig, (ax1, ax2) = new_figure(9.6, 3.9, ncols=2)
    for name, r in df.iterrows():
        c = GPU_COLORS.get(name, "0.3")
        ax1.scatter(r["hbm_tbps"], r["memory_gib"], color=c, s=40, zorder=3)
        dx, dy, ha = _LANDSCAPE_LABEL_OFFSETS.get(name, (4, 3, "left"))
        ax1.annotate(name, (r["hbm_tbps"], r["memory_gib"]), xytext=(dx, dy), textcoords="offset points",
                     fontsize=7.5, color=c, ha=ha)
    ax1.set_xlabel("HBM / GDDR bandwidth (TB/s, decimal)")
    ax1.set_ylabel("memory (GiB, as reported)")
    ax1.set_xlim(0, df["hbm_tbps"].max() * 1.22)
    ax1.set_ylim(0, df["memory_gib"].max() * 1.12)
    ax1.grid(True, lw=0.4, alpha=0.5)
    ax1.set_title("capacity vs bandwidth", fontsize=9, loc="left")

    x = np.logspace(-1, 13, 300, base=2)
    for name, r in df.iterrows():
        c = GPU_COLORS.get(name, "0.3")
        ax2.plot(x, np.minimum(r["bf16_dense_tflops"], x * r["hbm_tbps"]), color=c, lw=1.4, label=name)
        ax2.scatter([r["ridge_flops_per_byte"]], [r["bf16_dense_tflops"]], color=c, s=18, zorder=3)
    marks = {"decode, 1 token\n(1 x 4096 x 4096)": matmul_intensity_flops_per_byte(1, 4096, 4096),
             "training matmul\n(4096 x 4096 x 4096)": matmul_intensity_flops_per_byte(4096, 4096, 4096)}
    for label, xi in marks.items():
        ax2.axvline(xi, color="0.35", lw=0.8, ls=":")
        ax2.annotate(label, (xi, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -3),
                     textcoords="offset points", ha="left", va="top", fontsize=7, color="0.25")
    ax2.set_xscale("log", base=2)
    ax2.set_yscale("log", base=10)
    ax2.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic)")
    ax2.set_ylabel("attainable dense bf16 TFLOP/s")
    ax2.grid(True, which="major", lw=0.4, alpha=0.5)
    ax2.set_title("bf16 rooflines; dots are the ridge points", fontsize=9, loc="left")
    ax2.legend(fontsize=6.5, frameon=False, loc="lower right", ncols=2)

    lines = [f"{'GPU':<10s} {'memory':>10s} {'HBM':>10s} {'bf16 dense':>13s} {'ridge':>14s} {'link one-way':>13s}"]
    for name, r in df.iterrows():
        lines.append(f"{name:<10s} {r['memory_gib']:>6.1f} GiB {r['hbm_tbps']:>5.2f} TB/s "
                     f"{r['bf16_dense_tflops']:>6.0f} TFLOP/s {r['ridge_flops_per_byte']:>5.0f} FLOP/byte "
                     f"{r['link_one_way_gbps']:>6.0f} GB/s")
    return View(fig, "\n".join(lines))


#: Batch sizes on the x axis of :func:`render_decode_roofline`.
DECODE_BATCHES = tuple(2**i for i in range(11))


def render_decode_roofline(model="llama-3-8b", gpu: str = "H100 SXM", context: int = 4096, batch: int = 1,
                           weights: str = "bf16", *, into: Figure | None = None) -> View:
    """Chapter 6: one decode step's two lower bounds against the batch size: the time to read the weights and
    every sequence's KV cache from HBM, and the time to do its FLOPs at the dense bf16 peak
    (:func:`llmsizing.hardware.decode_step_roofline`). The chosen ``batch`` is marked."""
    import matplotlib.ticker

    from .catalog import get_gpu
    from .hardware import decode_compute_bound_batch, decode_step_roofline

    chosen = decode_step_roofline(model, gpu, batch=batch, context=context, weights=weights)
    batches = sorted(set(DECODE_BATCHES) | {chosen.batch})
    rs = [decode_step_roofline(model, gpu, batch=b, context=context, weights=weights) for b in batches]
    flip = decode_compute_bound_batch(model, gpu, context=context, weights=weights)
    capacity = get_gpu(gpu).memory_bytes
    fig, ax = _inch_margins(7.2, 3.5, left=0.75, bottom=0.55, top=0.3, right=0.2, into=into)
    too_big = [b for b, r in zip(batches, rs) if r.bytes_read > capacity]
    if too_big:   # weights + KV cache alone exceed one GPU: the bound is moot there (chapter 3)
        ax.axvspan(too_big[0] / 2**0.5, batches[-1] * 2**0.5, color="0.9", zorder=0,
                   label="weights + KV cache exceed one GPU")
    ms = 1e3
    ax.plot(batches, [r.memory_time_s * ms for r in rs], color="#0072B2", lw=1.8, label="read weights + KV cache")
    ax.plot(batches, [r.compute_time_s * ms for r in rs], color="#D55E00", lw=1.8, label="FLOPs at dense peak")
    ax.scatter([chosen.batch], [chosen.time_s * ms], color="k", s=30, zorder=3,
               label=f"batch {chosen.batch}: {chosen.bound}-bound")
    ax.set_xscale("log", base=2)
    ax.set_xlim(batches[0] / 2**0.5, batches[-1] * 2**0.5)
    ax.set_xticks(batches, [f"{b:g}" for b in batches], fontsize=7)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    times = [t * ms for r in rs for t in (r.memory_time_s, r.compute_time_s)]
    _log_axis(ax.yaxis, min(times), max(times), _short_number)
    ax.set_xlabel("sequences decoded together (batch)")
    ax.set_ylabel("lower bound on one step (ms)")
    ax.grid(True, which="major", lw=0.4, alpha=0.5)
    ax.set_title(f"{chosen.model} on {chosen.gpu}, {weights} weights, {context:,}-token context", fontsize=9,
                 loc="left")
    ax.legend(fontsize=7.5, frameon=False, loc="upper left")
    flip_text = (f"compute-bound from a batch of about {flip:,.0f}" if flip is not None
                 else "never compute-bound: each sequence's KV cache keeps the intensity below the ridge point")
    lines = [f"{chosen.model} on {chosen.gpu}, {weights} weights, context {context:,}, batch {chosen.batch}:",
             f"  reads {chosen.bytes_read / GiB:,.2f} GiB and does {chosen.flops / 1e12:,.3f} TFLOP per step",
             f"  memory bound {chosen.memory_time_s * ms:,.3f} ms, compute bound {chosen.compute_time_s * ms:,.4f} ms"
             f" -> {chosen.bound}-bound, at most {chosen.tokens_per_s:,.0f} tokens/s",
             f"  intensity {chosen.intensity_flops_per_byte:,.1f} FLOP/byte vs ridge "
             f"{chosen.ridge_flops_per_byte:,.0f}; {flip_text}"]
    if chosen.bytes_read > capacity:
        lines.append(f"  (weights + KV cache, {chosen.bytes_read / GiB:,.1f} GiB, exceed one {chosen.gpu}: "
                     "see chapter 3)")
    return FixedView(fig, "\n".join(lines))


# =========================================================================== chapter 8: the pipeline bubble
def render_pipeline_bubble(pps=(2, 4, 8), interleaved_pp: int = 8, virtual_stages: int = 2,
                           max_microbatches: int = 64) -> View:
    """The pipeline bubble of 1F1B (:func:`~llmsizing.parallel.pipeline_bubble`, ``(p - 1) / m``) against the
    micro-batches per step ``m``, one line per ``pps``, plus the interleaved schedule with ``virtual_stages``
    chunks for ``interleaved_pp`` stages (``(p - 1) / (v m)``). Drawn as the share of the step spent idle,
    ``b / (1 + b)``. Chapter 8."""
    import numpy as np

    from ._validate import check_int, check_sequence
    from .parallel import MAX_PP, pipeline_bubble

    # (a bare int is refused naming pps, not "'int' object is not iterable")
    pps = [check_int("pps", p, maximum=MAX_PP) for p in check_sequence("pps", pps, example="(2, 4, 8)")]
    p_i = check_int("interleaved_pp", interleaved_pp, maximum=MAX_PP)
    v = check_int("virtual_stages", virtual_stages, maximum=64)
    top = check_int("max_microbatches", max_microbatches, minimum=2, maximum=4096)
    ms = np.unique(np.geomspace(1, top, 60).round().astype(int))
    fig, ax = new_figure(7.0, 3.4)
    colors = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#555555"]
    lines = [f"share of a step the pipeline sits idle, bubble/(1 + bubble), bubble = (p-1)/(v m):"]
    marks = [m for m in (4, 8, 16, 32) if m <= top]
    for i, p in enumerate(pps):
        b = np.array([pipeline_bubble(p, int(m)) for m in ms])
        ax.plot(ms, 100 * b / (1 + b), color=colors[i % len(colors)], lw=1.8, label=f"1F1B, p = {p}")
        lines.append(f"  1F1B p={p:<3d} " + ", ".join(
            f"m={m}: {pipeline_bubble(p, m) / (1 + pipeline_bubble(p, m)):.0%}" for m in marks))
    b = np.array([pipeline_bubble(p_i, int(m), v) for m in ms])
    ax.plot(ms, 100 * b / (1 + b), color="0.2", lw=1.6, ls="--", label=f"interleaved, p = {p_i}, v = {v}")
    lines.append(f"  interleaved p={p_i}, v={v}: " + ", ".join(
        f"m={m}: {pipeline_bubble(p_i, m, v) / (1 + pipeline_bubble(p_i, m, v)):.0%}" for m in marks))
    ax.set_xscale("log", base=2)
    ax.set_xlim(1, top)
    ticks = [2**k for k in range(int(np.log2(top)) + 1)]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_ylim(0, 100)
    ax.set_xlabel("micro-batches per step (m)")
    ax.set_ylabel("% of the step idle (bubble)")
    ax.grid(alpha=0.3, lw=0.5)
    ax.legend(fontsize=8, frameon=False)
    ax.set_title("Pipeline bubble: (p - 1)/m idle slots per m micro-batches of work", fontsize=9, loc="left")
    return View(fig, "\n".join(lines))


# =========================================================================== chapter 7: data parallelism, ZeRO
def render_zero_stages(model="llama-3-8b", dp: int = 8, precision: str = "bf16-mixed", optimizer: str = "adamw",
                       gpu: str = "H100 SXM", *, into: Figure | None = None) -> View:
    """Model states on each GPU for ZeRO stages 0 (DDP), 1, 2 and 3 (FSDP full-shard) over ``dp`` GPUs: weights,
    gradients and optimizer bytes (master copy included), all from :func:`~llmsizing.memory.model_states`,
    against ``gpu``'s memory. ``model`` may also be a bare parameter count (an int, as in the ZeRO paper's
    7.5B example; :func:`~llmsizing.memory.model_states_for_params`). Chapter 7."""
    import numpy as np

    from ._validate import check_int
    from .catalog import get_gpu, resolve_model
    from .memory import model_states, model_states_for_params
    from .parallel import Parallel
    from .units import GB, fmt_count

    dp = check_int("dp", dp, maximum=1 << 20)
    g = get_gpu(gpu)
    if isinstance(model, (int, np.integer)) and not isinstance(model, (bool, np.bool_)):
        n = check_int("model", model)
        name = f"{fmt_count(n)} parameters"
        states = [model_states_for_params(n, precision=precision, optimizer=optimizer,
                                          parallel=Parallel(dp=dp, zero=z)) for z in range(4)]
    else:
        m = resolve_model(model)
        name = f"{m.name} ({fmt_count(m.n_params)} params)"
        states = [model_states(m, precision=precision, optimizer=optimizer, parallel=Parallel(dp=dp, zero=z))
                  for z in range(4)]
    labels = ["ZeRO-0\n(DDP)", "ZeRO-1\n(optimizer)", "ZeRO-2\n(+ gradients)", "ZeRO-3 / FSDP\n(+ weights)"]
    stacks = {"weights": [s.weights_bytes for s in states], "gradients": [s.gradients_bytes for s in states],
              "optimizer": [s.optimizer_bytes for s in states]}
    fig, ax = _fixed_figure(7.2, 3.3, left=0.1, right=0.8, bottom=0.2, top=0.88, into=into)
    _fast_stacked_columns(ax, labels, stacks)
    ax.tick_params(axis="x", labelsize=8)
    capacity_line(ax, g.memory_gib, g.name)
    tops = [s.total_bytes / GiB for s in states]
    ax.set_ylim(0, 1.12 * max(max(tops), g.memory_gib))
    for i, t in enumerate(tops):
        ax.text(i, t, f"{t:,.1f}", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("GiB per GPU (model states)")
    ax.set_title(f"{name}, {precision} + {optimizer}, dp = {dp}", fontsize=9.5, loc="left")
    lines = [f"{name}, {precision} + {optimizer}, model states per GPU over dp = {dp}:"]
    for z, s in enumerate(states):
        fits = "fits" if s.total_bytes <= g.memory_bytes else "does NOT fit"
        lines.append(f"  ZeRO-{z}: weights {s.weights_bytes / GiB:8,.2f} + gradients {s.gradients_bytes / GiB:8,.2f}"
                     f" + optimizer {s.optimizer_bytes / GiB:8,.2f} = {s.total_bytes / GiB:8,.2f} GiB "
                     f"({s.total_bytes / GB:,.2f} GB, {s.bytes_per_param:.3g} B/param): {fits} in a {g.name}'s "
                     f"{g.memory_gib:.1f} GiB before activations")
    return FixedView(fig, "\n".join(lines))


#: The links :func:`render_dp_scaling` compares by default: (label, one-way GB/s or None for the GPU's own link,
#: whether the data-parallel group stays inside that link's domain).
DP_SCALING_LINKS = (("NVLink (the GPU's own)", None, True), ("PCIe Gen4 x16 between GPUs", 32.0, True),
                    ("network, 400 Gb/s per GPU", None, False))

_ZERO_STYLES = {0: ("DDP / ZeRO-1", "#0072B2", "-"), 2: ("ZeRO-2", "#E69F00", "--"),
                3: ("ZeRO-3 / FSDP", "#D55E00", "-")}


def render_dp_scaling(model="llama-3-8b", gpu: str = "H100 SXM", global_batch: int = 512, seq: int = 4096,
                      batch: int = 1, mfu: float = 0.4, overlap: float = 1.0, max_dp: int = 512) -> View:
    """When data parallelism stops scaling: the busy fraction (:func:`~llmsizing.comm.busy_fraction`) of each GPU
    against ``dp`` at a fixed ``global_batch`` (sequences of ``seq`` tokens, micro-batch ``batch``, the rest
    gradient accumulation), for DDP/ZeRO-1, ZeRO-2 and ZeRO-3, with the data-parallel group on NVLink, on PCIe
    Gen4 and on the network (:data:`DP_SCALING_LINKS`). Compute from
    :func:`~llmsizing.comm.step_compute_time_s` at ``mfu``, traffic from :func:`~llmsizing.comm.communication`;
    ``overlap`` is the share of the traffic hidden behind compute. Chapter 7."""
    import numpy as np

    from ._validate import check_fraction, check_int
    from .catalog import get_gpu, resolve_model
    from .comm import busy_fraction, communication, gpu_with_link, step_compute_time_s
    from .hardware import INTER_NODE_GBPS_PER_GPU, link_bandwidth_one_way_gbps
    from .parallel import Parallel

    m = resolve_model(model)
    g = get_gpu(gpu)
    gb = check_int("global_batch", global_batch, maximum=1 << 20)
    b = check_int("batch", batch)
    top = check_int("max_dp", max_dp, maximum=1 << 16)
    seq, mfu = check_int("seq", seq), check_fraction("mfu", mfu)     # (before the summary formats them)
    if b > gb:
        raise ValueError(f"batch={b} must be <= global_batch={gb}: the micro-batch is part of the global batch")
    dps = [d for d in (2 ** k for k in range(1, 17)) if d <= top and gb % (d * b) == 0]
    if not dps:
        raise ValueError(f"max_dp={top} and global_batch={gb}: no power-of-two dp >= 2 up to max_dp divides the "
                         f"global batch into micro-batches of {b}")
    busy_fraction(1.0, 0.0, overlap)                                  # validates overlap before any work
    fig = Figure(figsize=(8.4, 3.1), dpi=DPI)
    axes = fig.subplots(1, len(DP_SCALING_LINKS), sharey=True)
    fig.subplots_adjust(left=0.07, right=0.99, bottom=0.25, top=0.8, wspace=0.08)
    lines = [f"{m.name} on {g.name} at MFU {mfu:.0%}, global batch {gb} x {seq:,} tokens, micro-batch {b}, "
             f"overlap {overlap:.0%}: busy fraction by dp"]
    for ax, (label, gbps, inside) in zip(axes, DP_SCALING_LINKS):
        gg = g if gbps is None else gpu_with_link(g, label, gbps)
        bw = link_bandwidth_one_way_gbps(gg) if inside else INTER_NODE_GBPS_PER_GPU
        per_node = max(dps) if inside else 1
        lines.append(f"  {label} ({bw:g} GB/s one way):")
        for z, (name, color, style) in _ZERO_STYLES.items():
            ys = []
            for d in dps:
                acc = gb // (d * b)
                par = Parallel(dp=d, zero=z)
                comp = step_compute_time_s(m, par, batch=b, seq=seq, gpu=gg, grad_accum=acc, mfu=mfu)
                comm = communication(m, par, batch=b, seq=seq, gpu=gg, gpus_per_node=per_node,
                                     grad_accum=acc).time_s
                ys.append(busy_fraction(comp, comm, overlap))
            ax.plot(dps, ys, style, color=color, marker="o", markersize=3, label=name)
            lines.append(f"    {name:<14s}" + "  ".join(f"dp={d}: {y:.0%}" for d, y in zip(dps, ys)))
        ax.set_xscale("log", base=2)
        ax.set_xticks(dps, [str(d) for d in dps], fontsize=7, rotation=90 if len(dps) > 6 else 0)
        ax.set_ylim(0, 1.05)
        ax.axhline(0.2, color="0.6", lw=0.8, ls=":")
        ax.set_title(f"{label}\n{bw:g} GB/s one way", fontsize=8)
        ax.set_xlabel("data-parallel GPUs (dp)", fontsize=8)
    axes[0].set_ylabel("busy fraction (compute / step)", fontsize=8)
    axes[0].legend(fontsize=7, frameon=False, loc="lower left")
    fig.suptitle(f"{m.name} on {g.name}: global batch {gb} x {seq:,} tokens, micro-batch {b}, MFU {mfu:.0%}, "
                 f"overlap {overlap:.0%}", fontsize=9, x=0.07, y=0.99, ha="left")
    return FixedView(fig, "\n".join(lines))


def render_collectives_vs_prediction(world: int = 2) -> View:
    """Measured against predicted communication per GPU and step, for the runs of ``tools/measure_memory.py dist``
    on ``world`` ranks (2 or 4; TP and SP ran on 2): bytes each GPU sends at ring cost, measured (what
    ``torch.distributed`` issued) next to :func:`~llmsizing.comm.communication`. Two panels, since tensor
    parallelism moves activations (KiB here) and data parallelism the model (MiB). Chapter 9."""
    from ._validate import check_int
    from .dist_compare import compare_collectives

    world = check_int("world", world)
    cmp = compare_collectives()
    cmp = cmp[cmp["world_size"] == world]
    if cmp.empty:
        raise ValueError(f"world={world}: no measured run on that many ranks (measured: 2, 3, 4)")
    fig, axes = new_figure(8.4, 3.4, ncols=2)
    panels = ((axes[0], cmp[~cmp["layout"].isin(["tp", "sp"])], 2**20, "MiB"),
              (axes[1], cmp[cmp["layout"].isin(["tp", "sp"])], 2**10, "KiB"))
    lines = []
    for ax, part, unit, name in panels:
        labels = list(part["layout"])
        ys = range(len(labels))
        ax.barh([y + 0.2 for y in ys], part["predicted_bytes_per_gpu"] / unit, height=0.38, color="#0072B2",
                label="library (communication)")
        ax.barh([y - 0.2 for y in ys], part["measured_bytes_per_gpu"] / unit, height=0.38, color="#E69F00",
                label="torch.distributed (measured)")
        ax.set_yticks(list(ys), labels)
        ax.invert_yaxis()
        ax.set_xlabel(f"{name} sent per GPU per step (ring cost)")
        for y, (_, r) in zip(ys, part.iterrows()):
            ax.text(r["measured_bytes_per_gpu"] / unit, y - 0.2, f" {r['ratio']:.2f}x", va="center", fontsize=8)
            lines.append(f"{r['layout']} x{world}: measured {r['measured_bytes_per_gpu'] / unit:,.1f} {name}, "
                         f"library {r['predicted_bytes_per_gpu'] / unit:,.1f} {name} ({r['ratio']:.2f}x)")
        if len(labels) == 0:
            ax.set_axis_off()
        ax.margins(x=0.18)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=8)
    axes[0].set_title("data parallel (model-sized messages)", fontsize=10)
    axes[1].set_title("tensor parallel (activation-sized messages)", fontsize=10)
    return View(fig, "\n".join(lines))


# =========================================================================== chapter 11: cost
#: The GPU types chapter 11 compares by default: the training-class parts of the catalogue.
COST_GPUS = ("A100 80GB", "H100 SXM", "H200", "B200", "MI300X")


def render_cost_by_gpu(model="llama-3-70b", tokens: float = 1e11, seq: int = 8192, gpus=COST_GPUS,
                       mfu: float | None = None, prices: dict | None = None) -> View:
    """Chapter 11: the cost of the *finished job* on each GPU type (bars, with the MFU band as a range), next
    to the hourly price (right), from :func:`~llmsizing.time_cost.cost_by_gpu`: the fewest GPUs that hold a
    step, the days on them, GPU-hours x price. At the same MFU the ranking follows price / dense peak, not the
    hourly price."""
    import numpy as np

    from .time_cost import cost_by_gpu

    df = cost_by_gpu(model, tokens=tokens, seq=seq, gpus=gpus, mfu=mfu, prices=prices)
    ok = df[df["fits"]].iloc[::-1]
    if ok.empty:
        raise ValueError(f"gpus: no GPU type in {list(df['gpu'])} holds a training step of {seq:,} tokens "
                         f"({df['why'].iloc[0]})")
    fig = Figure(figsize=(8.4, 0.5 + 0.42 * max(len(df), 2)), dpi=DPI)
    ax, ax2 = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [3, 1.2]})
    fig.subplots_adjust(left=0.13, right=0.98, bottom=0.55 / fig.get_figheight() + 0.1, top=0.9, wspace=0.06)
    y = np.arange(len(ok))
    colors = [GPU_COLORS.get(g, "0.4") for g in ok["gpu"]]
    mid = ok["cost_usd"].to_numpy() / 1e3
    err = np.vstack([mid - ok["cost_usd_low"].to_numpy() / 1e3, ok["cost_usd_high"].to_numpy() / 1e3 - mid])
    ax.barh(y, mid, color=colors, xerr=err, error_kw={"ecolor": "0.3", "capsize": 3, "lw": 0.8})
    for yi, (_, r) in zip(y, ok.iterrows()):
        ax.annotate(f" {r['min_gpus']:.0f} GPUs, {r['days_on_min_gpus']:,.0f} d", (r["cost_usd_high"] / 1e3, yi),
                    va="center", fontsize=7, color="0.25")
    ax.set_yticks(y, list(ok["gpu"]), fontsize=8)
    ax.set_xlabel("cost of the finished job (thousand USD; bar: MFU band)", fontsize=8)
    ax.set_xlim(0, ok["cost_usd_high"].max() / 1e3 * 1.45)
    ax2.barh(y, ok["price_usd_per_gpu_hour"], color=colors, alpha=0.55)
    ax2.set_xlabel("price (USD per GPU-hour)", fontsize=8)
    for a in (ax, ax2):
        a.spines[["top", "right"]].set_visible(False)
        a.tick_params(labelsize=7)
    first = df.iloc[0]
    name = resolve_model_name(model)
    ax.set_title(f"{name}, {tokens:.3g} tokens of {seq:,}", fontsize=9, loc="left")
    lines = [f"{name}, {tokens:.3g} tokens of {seq:,}: cost of the job by GPU type (cheapest first)"]
    for _, r in df.iterrows():
        if not r["fits"]:
            lines.append(f"  {r['gpu']:<10s} does not fit: {r['why']}")
            continue
        lines.append(f"  {r['gpu']:<10s} ${r['price_usd_per_gpu_hour']:.2f}/h  {r['gpu_hours']:>12,.0f} GPU-h  "
                     f"${r['cost_usd']:>12,.0f} (${r['cost_usd_low']:,.0f}-${r['cost_usd_high']:,.0f})  "
                     f"min {r['min_gpus']:.0f} GPUs ({r['layout']}), {r['days_on_min_gpus']:,.0f} days on them")
    if first["fits"]:
        lines.append(f"cheapest job: {first['gpu']}")
    return FixedView(fig, "\n".join(lines))


def resolve_model_name(model) -> str:
    """A model's catalogue name (for titles)."""
    from .catalog import resolve_model

    return resolve_model(model).name


#: Price multipliers and MFUs of :func:`render_cost_sensitivity`'s grid (around the chosen price).
SENSITIVITY_PRICE_FACTORS = (0.4, 0.6, 0.8, 1.0, 1.25, 1.5)
SENSITIVITY_MFUS = (0.2, 0.3, 0.4, 0.5, 0.6)


def render_cost_sensitivity(model="llama-3-70b", tokens: float = 1e12, gpu: str = "H100 SXM", seq: int = 8192,
                            price: float | None = None, mfu: float = 0.4, n_gpus: int = 1024, *,
                            into: Figure | None = None) -> View:
    """Chapter 11: the job cost over a grid of price (USD per GPU-hour; the chosen ``price``, default the
    catalogue's on-demand one, times :data:`SENSITIVITY_PRICE_FACTORS`) x MFU (:data:`SENSITIVITY_MFUS`), from
    :func:`~llmsizing.cost.cost_sensitivity`, with the chosen (price, ``mfu``) marked; the summary gives that
    job's cost, GPU-hours and days on ``n_gpus`` GPUs (:func:`~llmsizing.time_cost.training_time`). A discount
    (reserved capacity) is a lower price: read it off the columns to the left."""
    import numpy as np

    from ._validate import check_int, check_number
    from .catalog import get_gpu
    from .cost import cost_sensitivity
    from .time_cost import training_time

    g = get_gpu(gpu)
    p0 = g.price_usd_per_gpu_hour if price is None else check_number("price", price, minimum=0.01, maximum=1e3)
    mfu = check_number("mfu", mfu, minimum=0.01, maximum=1.0)
    n = check_int("n_gpus", n_gpus)
    t = training_time(model, tokens=tokens, gpu=g, n_gpus=n, seq=seq, mfu=mfu, price_usd_per_gpu_hour=p0)
    prices = [p0 * f for f in SENSITIVITY_PRICE_FACTORS]
    mfus = sorted(set(SENSITIVITY_MFUS) | {round(mfu, 4)})
    grid = cost_sensitivity(model, tokens=tokens, gpu=g, seq=seq, prices=prices, mfus=mfus)
    def build(fig):                      # the heat map and its colour scale, side by side
        return fig.add_axes((0.1, 0.15, 0.72, 0.75)), fig.add_axes((0.835, 0.15, 0.025, 0.75))

    fig, (ax, cax) = figure_axes(7.6, 3.3, into, ("cost sensitivity",), build)
    z = grid.to_numpy() / 1e6
    norm = _log_norm(z)
    ax.imshow(z, cmap="YlOrRd", aspect="auto", origin="lower", norm=norm)
    cb_ticks = [v for v in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500) if z.min() <= v <= z.max()]
    for i in range(z.shape[0]):
        for j in range(z.shape[1]):
            ax.text(j, i, f"{z[i, j]:.2f}", ha="center", va="center", fontsize=7.5,
                    color="white" if z[i, j] > np.sqrt(z.min() * z.max()) * 1.6 else "black")
    ax.set_xticks(range(len(prices)), [f"${p:.2f}" for p in prices], fontsize=8)
    ax.set_yticks(range(len(mfus)), [f"{m:.0%}" for m in mfus], fontsize=8)
    ax.set_xlabel("price per GPU-hour (USD)", fontsize=8)
    ax.set_ylabel("MFU", fontsize=8)
    j0, i0 = SENSITIVITY_PRICE_FACTORS.index(1.0), mfus.index(round(mfu, 4))
    ax.add_patch(_rect((j0 - 0.5, i0 - 0.5), 1, 1))
    # the colour scale, drawn as a log-scaled strip (a matplotlib Colorbar cannot be emptied and redrawn in a
    # widget's kept axes: it keeps callbacks on them, and removing its axes fails on matplotlib 3.11)
    edges = np.geomspace(norm.vmin, norm.vmax, 129)
    cax.pcolormesh([0.0, 1.0], edges, np.sqrt(edges[:-1] * edges[1:])[:, None], cmap="YlOrRd", norm=norm)
    cax.set_yscale("log")
    cax.set_xlim(0, 1)
    cax.set_ylim(norm.vmin, norm.vmax)
    cax.set_xticks([])
    cax.yaxis.tick_right()
    cax.yaxis.set_label_position("right")
    cax.set_yticks(cb_ticks, [f"{v:g}" for v in cb_ticks])
    cax.yaxis.set_minor_locator(NullLocator())
    cax.set_ylabel("job cost (million USD)", fontsize=8)
    cax.tick_params(labelsize=7)
    ax.set_title(f"{t.model}, {tokens:.3g} tokens on {g.name}: cost of the job (million USD)", fontsize=9,
                 loc="left")
    summary = (f"{t.model}, {tokens:.3g} tokens of {seq:,} on {g.name} at ${p0:.2f}/GPU-hour and MFU {mfu:.0%}: "
               f"{t.gpu_hours:,.0f} GPU-hours, ${t.cost_usd:,.0f}; {t.days:,.1f} days on {n:,} GPUs\n"
               f"cost x price / MFU: halving the price or doubling the MFU halves the bill; "
               f"grid ${min(prices):.2f}-${max(prices):.2f} x MFU {min(mfus):.0%}-{max(mfus):.0%}: "
               f"${z.min():.2f}M-${z.max():.2f}M")
    return FixedView(fig, summary)


def _log_norm(z):
    from matplotlib.colors import LogNorm

    return LogNorm(vmin=float(z.min()), vmax=float(z.max()) if z.max() > z.min() else float(z.min()) * 1.01)


def _rect(xy, w, h):
    from matplotlib.patches import Rectangle

    return Rectangle(xy, w, h, fill=False, ec="#1f3b73", lw=2.2)


def render_cost_vs_gpus(model="llama-3-70b", tokens: float = 1e12, gpu: str = "H100 SXM", seq: int = 8192,
                        global_batch: int = 512, tp: int = 8, pp: int = 4, zero: int = 1,
                        micro_batch: int = 1) -> View:
    """Chapter 11: more GPUs for less time at about the same cost, and where that stops. Left: days and cost
    of the job against the GPU count at a fixed global batch (:func:`~llmsizing.cost.cost_vs_gpus`, one
    layout, data parallelism growing until the global batch caps it). Right: where each GPU's step goes
    (compute, pipeline bubble, exposed communication) and the resulting MFU."""
    import numpy as np

    from .cost import cost_vs_gpus

    df = cost_vs_gpus(model, tokens=tokens, gpu=gpu, seq=seq, global_batch=global_batch, tp=tp, pp=pp,
                      zero=zero, micro_batch=micro_batch)
    fig = Figure(figsize=(8.8, 3.6), dpi=DPI)
    ax, ax2 = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.22, top=0.8, wspace=0.42)
    x = df["n_gpus"].to_numpy(dtype=float)
    ax.fill_between(x, df["cost_usd_low"] / 1e6, df["cost_usd_high"] / 1e6, color="#D55E00", alpha=0.15, lw=0)
    ax.plot(x, df["cost_usd"] / 1e6, color="#D55E00", marker="o", ms=3, label="cost (left axis)")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, df["cost_usd_high"].max() / 1e6 * 1.1)
    ax.set_ylabel("cost of the job (million USD)", fontsize=8, color="#D55E00")
    ax.set_xlabel(f"number of GPUs (TP{tp} x PP{pp} x dp)", fontsize=8)
    axd = ax.twinx()
    axd.plot(x, df["days"], color="#0072B2", marker="s", ms=3, ls="--")
    axd.set_yscale("log")
    axd.set_ylabel("days (log)", fontsize=8, color="#0072B2")
    for a in (ax, axd):
        a.tick_params(labelsize=7)
    share = np.vstack([df["compute_s"], df["bubble_s"], df["exposed_comm_s"]]) / df["step_s"].to_numpy()
    labels = ("compute", "pipeline bubble", "exposed comm.")
    colors = ("#0072B2", "#F0E442", "#D55E00")
    xs = np.arange(len(df))
    bottom = np.zeros(len(df))
    for s, lab, c in zip(share, labels, colors):
        ax2.bar(xs, s, bottom=bottom, color=c, label=lab, width=0.8)
        bottom += s
    ax2.plot(xs, df["mfu"], color="black", marker="o", ms=3, label="MFU")
    ax2.set_xticks(xs, [f"{n:,}" for n in df["n_gpus"]], fontsize=6.5, rotation=90)
    ax2.set_ylim(0, 1.0)
    ax2.set_ylabel("share of the step / MFU", fontsize=8)
    ax2.set_xlabel("number of GPUs", fontsize=8)
    ax2.tick_params(labelsize=7)
    ax2.legend(fontsize=6.5, frameon=False, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=4,
               borderaxespad=0.2, handlelength=1.2, columnspacing=0.8)
    name = resolve_model_name(model)
    fig.suptitle(f"{name}, {tokens:.3g} tokens, global batch {global_batch} x {seq:,} on {gpu}", fontsize=9,
                 x=0.08, y=0.98, ha="left")
    lines = [f"{name}, {tokens:.3g} tokens of {seq:,} on {gpu}, TP{tp} PP{pp} ZeRO-{zero}, global batch "
             f"{global_batch}, micro-batch {micro_batch}: as dp grows"]
    for _, r in df.iterrows():
        lines.append(f"  {r['n_gpus']:>6,.0f} GPUs (dp {r['dp']:>4.0f}, {r['grad_accum']:>4.0f} micro-batches): "
                     f"MFU {r['mfu']:.0%}, {r['days']:>7,.1f} days, ${r['cost_usd']:>12,.0f}")
    return FixedView(fig, "\n".join(lines))


# =========================================================================== chapter 15: serving
#: One highlighted point drawn as a Line2D marker that looks like ``scatter(..., s=40)``: the same area (6.3 pt
#: across) and scatter's 1.5 pt edge in the face colour.
_POINT = dict(ms=40**0.5, mew=1.5, zorder=3)


def render_serving_curve(model="llama-3-8b", gpu: str = "H100 SXM", tp: int = 1, weights: str = "bf16",
                         kv_cache: str = "bf16", prompt: int = 1024, output: int = 256, batch: int = 16, *,
                         into: Figure | None = None) -> View:
    """Chapter 15: left, inter-token latency against output tokens/s per GPU as the batch grows (powers of
    two up to the KV-cache limit, :func:`llmsizing.serve.serving_sweep`), the last point being the largest
    batch the KV cache holds; right, the GPU's bf16 roofline (attainable TFLOP/s = min(peak, intensity x
    bandwidth)) with the decode step and the prefill of one prompt placed on it at their achieved rates. The
    chosen ``batch`` is marked on both (a red cross if its KV cache does not fit)."""
    import numpy as np

    from .catalog import get_gpu
    from .hardware import dense_tflops
    from .serve import serving, serving_sweep

    kw = dict(tp=tp, weights=weights, kv_cache=kv_cache, prompt=prompt, output=output)
    chosen = serving(model, gpu, batch=batch, **kw)
    if chosen.max_batch < 1:
        raise ValueError(f"tp={tp}: {chosen.model} with {weights} weights does not fit {tp} x {chosen.gpu} "
                         f"({chosen.weights_bytes_per_gpu / GiB:,.1f} GiB of weights per GPU + "
                         f"{chosen.overhead_bytes_per_gpu / GiB:.0f} GiB overhead + one sequence's KV cache > "
                         f"{chosen.capacity_bytes_per_gpu / GiB:,.1f} GiB); raise tp or quantise the weights")
    sweep = serving_sweep(model, gpu, **kw)
    def build(fig):
        fig.subplots_adjust(left=0.075, right=0.985, bottom=0.14, top=0.91, wspace=0.3)
        return fig.subplots(1, 2)

    fig, (ax, ax2) = figure_axes(7.9, 3.6, into, ("serving curve",), build)
    x = [s.output_tokens_per_s_per_gpu for s in sweep]
    y = [s.itl_s * 1e3 for s in sweep]
    ax.plot(x, y, color="#0072B2", marker="o", ms=3, lw=1.5)
    for s in sweep[:: max(1, len(sweep) // 6)] + [sweep[-1]]:
        ax.annotate(f"{s.batch}", (s.output_tokens_per_s_per_gpu, s.itl_s * 1e3), xytext=(3, -9),
                    textcoords="offset points", fontsize=7, color="0.3")
    cap = sweep[-1]
    ax.axvline(cap.output_tokens_per_s_per_gpu, color="#D55E00", lw=0.9, ls="--")
    ax.annotate(f"KV cache full\nat batch {cap.batch:,}", (cap.output_tokens_per_s_per_gpu, 0.97),
                xycoords=("data", "axes fraction"), xytext=(-4, 0), textcoords="offset points", ha="right",
                va="top", fontsize=7.5, color="#D55E00")
    marker = dict(marker="o", color="k") if chosen.fits else dict(marker="x", color="#D55E00")
    # single points as Line2D markers: scatter's PathCollection costs a widget redraw ~1 ms more each
    ax.plot([chosen.output_tokens_per_s_per_gpu], [chosen.itl_s * 1e3], ls="none", **_POINT, **marker)
    _log_axis(ax.xaxis, min(x + [chosen.output_tokens_per_s_per_gpu]),
              max(x + [chosen.output_tokens_per_s_per_gpu]), _short_number, pad=1.25)
    ax.set_xlabel("output tokens/s per GPU (batch grows to the right)")
    ax.set_ylabel("inter-token latency (ms)")
    ax.set_ylim(0, max(max(y), chosen.itl_s * 1e3) * 1.15)
    ax.grid(True, lw=0.4, alpha=0.5)
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
    ax2.axvline(peak / bw_tbps, color="0.5", lw=0.7, ls=":")
    ax2.set_xscale("log", base=2)
    ax2.set_xlim(xs[0] / 1.4, xs[-1] * 1.4)
    ax2.set_xticks([2.0**k for k in range(-1, 15, 3)], [f"{2.0**k:g}" for k in range(-1, 15, 3)])
    ax2.xaxis.set_minor_locator(NullLocator())
    _log_axis(ax2.yaxis, min(xs[0] * bw_tbps, dec_rate, pre_rate), peak, _short_number)
    ax2.set_xlabel("arithmetic intensity (FLOP per byte read)")
    ax2.set_ylabel("TFLOP/s per GPU")
    ax2.grid(True, which="major", lw=0.4, alpha=0.5)
    ax2.legend(fontsize=7, frameon=False, loc="lower right")
    ax2.set_title(f"ridge point {peak / bw_tbps:,.0f} FLOP/byte", fontsize=9, loc="left")
    fit = "fits" if chosen.fits else f"DOES NOT FIT (KV cache holds {chosen.max_batch:,})"
    lines = [f"{chosen.model} on {tp} x {chosen.gpu}, {weights} weights, {kv_cache} KV cache, prompt {prompt:,}, "
             f"output {output:,}, batch {chosen.batch:,} ({fit}; max batch {chosen.max_batch:,})",
             f"  TTFT {chosen.ttft_s * 1e3:,.1f} ms ({chosen.prefill_bound}-bound), ITL {chosen.itl_s * 1e3:,.2f} ms "
             f"({chosen.decode_bound}-bound; TP all-reduces {chosen.decode_comm_s * 1e3:,.2f} ms of it)",
             f"  {chosen.output_tokens_per_s:,.0f} output tokens/s per replica, "
             f"{chosen.output_tokens_per_s_per_gpu:,.0f} per GPU; decode intensity "
             f"{dec_i:,.1f} FLOP/byte vs ridge {peak / bw_tbps:,.0f}",
             f"  ${chosen.usd_per_million_output_tokens:,.3f} per million output tokens, "
             f"${chosen.usd_per_million_input_tokens:,.3f} per million input tokens "
             f"at ${chosen.price_usd_per_gpu_hour:.2f}/GPU-hour (MBU {chosen.mbu:.0%}, MFU {chosen.mfu:.0%})"]
    return FixedView(fig, "\n".join(lines))


def render_serving_cost(model="llama-3-70b", prompt: int = 1024, output: int = 256, itl_s: float = 0.05,
                        ttft_s: float = 1.0, weights: str = "bf16", gpus=None) -> View:
    """Chapter 15: cost per million output tokens on each GPU type at its cheapest layout meeting the latency
    targets (:func:`llmsizing.serve.serving_cost_by_gpu`), labelled with the layout (tp x batch)."""
    from .serve import serving_cost_by_gpu

    df = serving_cost_by_gpu(model, gpus=gpus, prompt=prompt, output=output, itl_s=itl_s, ttft_s=ttft_s,
                             weights=weights)
    df = df.sort_values("usd_per_million_output_tokens", na_position="first")
    fig, ax = new_figure(7.2, 0.35 * len(df) + 1.2)
    names = list(df.index)
    vals = df["usd_per_million_output_tokens"].fillna(0).tolist()
    ax.barh(names, vals, color=[GPU_COLORS.get(n, "0.4") for n in names])
    for i, (n, r) in enumerate(df.iterrows()):
        text = ("no layout meets the target" if r["note"] else
                f"${r['usd_per_million_output_tokens']:.3f}  (tp={int(r['tp'])}, batch {int(r['batch'])})")
        ax.annotate(text, (vals[i], i), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7.5)
    ax.set_xlim(0, max(vals + [1e-9]) * 1.6)
    ax.set_xlabel("USD per million output tokens (catalogue on-demand prices)")
    ax.set_title(f"{model}, {weights} weights, {prompt:,} in / {output:,} out, ITL <= {itl_s * 1e3:g} ms, "
                 f"TTFT <= {ttft_s:g} s", fontsize=9, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    lines = [f"{'GPU':<10s} {'tp':>3s} {'batch':>6s} {'ITL ms':>7s} {'tok/s/GPU':>10s} {'$/h':>6s} "
             f"{'$/M out':>8s} {'$/M in':>7s}"]
    for n, r in df.iterrows():
        if r["note"]:
            lines.append(f"{n:<10s} {r['note']}")
        else:
            lines.append(f"{n:<10s} {int(r['tp']):>3d} {int(r['batch']):>6d} {r['itl_s'] * 1e3:>7.1f} "
                         f"{r['output_tokens_per_s_per_gpu']:>10,.0f} {r['price_usd_per_gpu_hour']:>6.2f} "
                         f"{r['usd_per_million_output_tokens']:>8.3f} {r['usd_per_million_input_tokens']:>7.3f}")
    return View(fig, "\n".join(lines))


# =========================================================================== chapter 13: case studies
def render_prediction_check(rows) -> View:
    """Predicted over published GPU-hours, one row per run, on a log axis centred on 1 (a dot at the central
    estimate, a bar over its range): the "Case studies" chapter's check of the library against what was
    reported. ``rows`` is a sequence of mappings with ``label``, ``gpu_hours``, ``gpu_hours_low``,
    ``gpu_hours_high`` (from :class:`~llmsizing.time_cost.TrainingTime`, e.g. ``run_from_step(...).time``)
    and ``published_gpu_hours`` (> 0)."""
    import math

    from ._validate import check_number, check_sequence

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


# =========================================================================== chapter 14: the seeds' claims, checked
_AUDIT_STYLES = {"holds": ("#009E73", "o"), "off": ("#D55E00", "s"), "wrong in kind": ("#CC79A7", "^")}


def render_seed_audit(df=None, *, band: float | None = None, article: str = "all",
                      into: Figure | None = None) -> View:
    """Every recomputed seed claim as one point: the library's value (x) against the claimed value (y), both
    in the claim's own unit, on log axes, with the line y = x and the band of the verdict rule
    (:data:`~llmsizing.audit.BAND`). Points above the band are claims that are too high, below it too low.
    Colour and marker give the verdict (holds / off by more than the band / wrong in kind).
    ``df`` defaults to :func:`~llmsizing.audit.audit_table` judged with ``band`` (default
    :data:`~llmsizing.audit.BAND`; give either ``df`` or ``band``); ``article`` ("all", or a seed's number such as
    "000") keeps one article's claims. Taught in chapter 14."""
    import numpy as np
    from matplotlib.ticker import LogLocator, NullLocator

    from ._validate import check_choice
    from .audit import BAND, audit_table, verdict_counts

    if df is not None and band is not None:
        raise ValueError("give either df (an audit table) or band, not both")
    band = BAND if band is None else band
    df = audit_table(band) if df is None else df
    articles = ["all"] + sorted(df["article"].unique())
    if check_choice("article", article, articles) != "all":
        df = df[df["article"] == article]
    kind = df["verdict"].str.startswith("wrong")
    holds = df["verdict"].str.startswith("holds") & ~kind
    groups = {"holds": holds, "off": ~holds & ~kind, "wrong in kind": kind}
    fig, ax = _inch_margins(6.4, 4.4, left=0.7, bottom=0.5, top=0.2, right=0.2, into=into)
    x = df["library"].to_numpy(float)
    y = df["claimed"].to_numpy(float)
    lo = 10 ** np.floor(np.log10(min(x.min(), y.min())))
    hi = 10 ** np.ceil(np.log10(max(x.max(), y.max())))
    line = np.array([lo, hi])
    ax.fill_between(line, line / band, line * band, color="0.85", lw=0, zorder=0,
                    label=f"within {band - 1:.0%} (holds)")
    ax.plot(line, line, color="0.4", lw=1, zorder=1, label="claimed = library")
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
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    for axis in (ax.xaxis, ax.yaxis):                 # decades only: minor log ticks triple a redraw
        axis.set_major_locator(LogLocator(base=10, numticks=20))
        axis.set_major_formatter(_short_number)       # plain "1k", "1M": mathtext labels are slow to lay out
        axis.set_minor_locator(NullLocator())
    ax.set_xlabel("what the library computes (in the claim's unit: GB, days, USD, GPUs, tokens/s, ...)")
    ax.set_ylabel("what the seed article claims")
    ax.text(lo * 2, hi / 3, "claim too high", fontsize=8, color="0.35", va="top")
    ax.text(hi / 2, lo * 2, "claim too low", fontsize=8, color="0.35", ha="right")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(0.0, 0.9))
    ax.spines[["top", "right"]].set_visible(False)
    r = df["ratio"].to_numpy(float)
    worst = df.iloc[int(np.argmax(np.abs(np.log(r))))]
    label = "" if article == "all" else f"seed {article}, "
    summary = (f"{label}{len(df)} claims: {counts['holds']} hold (within {band - 1:.0%}), "
               f"{counts['off']} are off by more, {counts['wrong in kind']} are wrong in kind\n"
               f"claimed / library: median {np.median(r):.2f}, from {r.min():.3g} to {r.max():.3g}; "
               f"furthest: {worst['id']} ({worst['ratio']:.3g})")
    return FixedView(fig, summary)


# =========================================================================== chapter 12: the planner
#: GPU types and settings of chapter 12's worked example (and the planner widget's defaults).
PLAN_GPUS = ("H100 SXM", "H200", "B200", "A100 80GB")


def _plan_label(r) -> str:
    """A front plan in one line: GPUs and layout."""
    return (f"{int(r.n_gpus):,} x {r.gpu} (tp={r.tp}, pp={r.pp}, dp={r.dp}, ZeRO-{r.zero}"
            f"{', SP' if r.sp else ''}), micro-batch {r.micro_batch} x {r.grad_accum}, recompute={r.recompute}")


def render_plan(model="llama-3-70b", *, tokens: float = 1e12, gpus=PLAN_GPUS, seq: int = 8192,
                global_batch: int = 512, max_gpus: int | None = 4096, deadline_days: float | None = None,
                budget_usd: float | None = None, highlight=None, plans=None, compute_efficiency: float | None = None,
                overlap: float | None = None, into: Figure | None = None) -> View:
    """The planner's answer (chapter 12, "How many GPUs do you need?"): left, days against cost (log axes) of
    every plan :func:`~llmsizing.planner.plan` finds (grey), each GPU type's own front (thin line) and the
    time-vs-cost front (dots coloured by GPU type); right, the chosen plan's most loaded GPU (what is alive at
    its peak, :func:`~llmsizing.memory.training_memory`, against the capacity and the usable share) and its step
    time by part (:func:`~llmsizing.layouts.step_time`: compute, bubble, each group's communication before
    overlap). ``highlight`` is a row label of the plans (default: the first front plan, the cheapest).

    ``plans`` may pass :func:`~llmsizing.planner.plan`'s result for these arguments (the widget caches it);
    otherwise it is computed. No plan raises the planner's :class:`~llmsizing.planner.NoPlanError`."""
    import numpy as np

    from .catalog import get_gpu, resolve_model
    from .layouts import USABLE_FRACTION, step_time
    from .memory import training_memory
    from .parallel import Parallel
    from .planner import COMPUTE_EFFICIENCY, OVERLAP, _pareto, plan

    eff = COMPUTE_EFFICIENCY if compute_efficiency is None else compute_efficiency
    ovl = OVERLAP if overlap is None else overlap
    m = resolve_model(model)
    if plans is None:
        plans = plan(m, tokens=tokens, gpus=gpus, seq=seq, global_batch=global_batch, max_gpus=max_gpus,
                     deadline_days=deadline_days, budget_usd=budget_usd, compute_efficiency=eff, overlap=ovl)
    front = plans[plans["pareto"]]
    if front.empty:
        raise ValueError("plans must hold at least one plan on the front (planner.plan's result)")
    if highlight is None:
        highlight = front.index[0]
    if highlight not in plans.index:
        raise ValueError(f"highlight must be a row label of the plans (0 to {len(plans) - 1:,}) or None; "
                         f"got {highlight!r}")
    r = plans.loc[highlight]
    g = get_gpu(r.gpu)
    par = Parallel(tp=int(r.tp), pp=int(r.pp), dp=int(r.dp), zero=int(r.zero), sp=bool(r.sp))
    run = dict(batch=int(r.micro_batch), seq=seq, grad_accum=int(r.grad_accum), recompute=r.recompute)
    tm = training_memory(m, parallel=par, **run)
    st = step_time(m, g, par, mfu=eff, overlap=ovl, **run)

    def build(fig):
        gs = fig.add_gridspec(2, 2, width_ratios=[1.1, 1], height_ratios=[1, 1.3], left=0.1, right=0.965,
                              bottom=0.11, top=0.93, wspace=0.3, hspace=1.25)
        return fig.add_subplot(gs[:, 0]), fig.add_subplot(gs[0, 1]), fig.add_subplot(gs[1, 1])

    fig, (ax, ax_m, ax_t) = figure_axes(7.9, 4.4, into, ("plan",), build)

    # ---- left: every plan, each GPU type's front, the front, the chosen plan
    ax.plot(plans["days"], plans["cost_usd"], ls="none", marker=".", ms=2.5, color="0.8", zorder=1,
            label=f"{len(plans):,} plans that fit")
    groups = _plan_groups(plans)
    for name, days, cost in groups["own"]:
        ax.plot(days, cost, color=GPU_COLORS.get(name, "0.4"), lw=1.0, alpha=0.6, zorder=2,
                label=f"best on {name} alone")
    ax.plot(*groups["front"], color="0.2", lw=0.8, zorder=3)
    for name, days, cost in groups["front_by_gpu"]:
        ax.plot(days, cost, ls="none", marker="o", ms=4.5, color=GPU_COLORS.get(name, "0.4"),
                zorder=4, label=f"front: {name}")
    ax.plot([r.days], [r.cost_usd], ls="none", marker="o", ms=12, mfc="none", mec="#D55E00", mew=2, zorder=5,
            label="chosen plan")
    if deadline_days:
        ax.axvline(deadline_days, color="#D55E00", lw=0.9, ls="--")
    if budget_usd:
        ax.axhline(budget_usd, color="#D55E00", lw=0.9, ls="--")
    _log_axis(ax.xaxis, plans["days"].min(), plans["days"].max(), lambda v: f"{v:g}")
    _log_axis(ax.yaxis, plans["cost_usd"].min(), plans["cost_usd"].max(), _usd)
    ax.set_xlabel("days of training (log scale)")
    ax.set_ylabel("cost of the run, USD (log scale)")
    ax.spines[["top", "right"]].set_visible(False)
    # (the handles' styles follow from the GPU names in the labels)
    _kept_legend(ax, ("plan", *ax.get_legend_handles_labels()[1]),
                 lambda: ax.legend(fontsize=6.5, frameon=True, framealpha=0.9, edgecolor="none", loc="upper right"))
    ax.set_title(f"{m.name}, {_tokens(tokens)} tokens, global batch {global_batch:,} x {seq:,}", fontsize=8.5,
                 loc="left")

    # ---- right, top: what is alive on the most loaded GPU at its peak
    parts = {k: v for k, v in tm.phase_parts[tm.peak_phase].items() if v > 0}
    parts["overhead"] = tm.overhead_bytes
    widths = np.array(list(parts.values())) / GiB
    handles = _fast_hbars(ax_m, np.zeros(len(parts)), widths, left=np.cumsum(widths) - widths, height=0.6,
                          colors=[COLORS.get(k, "0.5") for k in parts])    # a bar per part, side by side
    left = float(widths.sum())
    ax_m.axvline(g.memory_gib, color="0.15", lw=1.1, ls="--")
    ax_m.axvline(USABLE_FRACTION * g.memory_gib, color="0.45", lw=0.9, ls=":")
    ax_m.text(g.memory_gib, 0.42, f" {g.memory_gib:.0f} GiB", fontsize=7, va="bottom", ha="right")
    ax_m.set_xlim(0, 1.05 * max(left, g.memory_gib))
    ax_m.set_ylim(-0.5, 0.6)
    ax_m.set_yticks([])
    ax_m.set_xlabel(f"GiB on the most loaded {g.name} (peak: {tm.peak_phase})", fontsize=8)
    _kept_legend(ax_m, ("plan memory", *parts),             # (the colours follow from the parts' names)
                 lambda: ax_m.legend(handles, list(parts), fontsize=6.5, frameon=False, ncols=3, loc="upper center",
                                     bbox_to_anchor=(0.5, -0.62)))
    ax_m.set_title(f"chosen: {int(r.n_gpus):,} x {r.gpu}, tp={r.tp} pp={r.pp} dp={r.dp} ZeRO-{r.zero}",
                   fontsize=8.5, loc="left")

    # ---- right, bottom: where the step's time goes
    _step_time_bars(ax_t, st, fontsize=7.5)
    ax_t.set_xlabel(f"seconds per step (communication before the {ovl:.0%} overlap)", fontsize=7.5)
    ax_t.set_title(f"step {st.step_s:.2f} s, MFU {r.mfu:.0%}: {r.days:,.1f} days, {_usd(r.cost_usd)}",
                   fontsize=8.5, loc="left")

    rank = list(front.index).index(highlight) + 1 if highlight in front.index else None
    lines = [f"{m.name}, {_tokens(tokens)} tokens of {seq:,}, global batch {global_batch:,} sequences "
             f"({global_batch * seq / 1e6:.2f}M tokens), on {', '.join(plans['gpu'].unique())}"
             + (f", at most {max_gpus:,} GPUs" if max_gpus else "")
             + (f", deadline {deadline_days:g} days" if deadline_days else "")
             + (f", budget {_usd(budget_usd)}" if budget_usd else "")
             + f": {len(plans):,} plans fit, {len(front)} on the time-vs-cost front",
             f"chosen ({f'front #{rank}' if rank else 'not on the front'}): {_plan_label(r)}",
             f"  {tm.total_bytes / GiB:.1f} GiB of {g.memory_gib:.1f} GiB on the most loaded GPU "
             f"(usable {USABLE_FRACTION:.0%}: {USABLE_FRACTION * g.memory_gib:.1f} GiB)",
             f"  step {st.step_s:.2f} s: compute {st.compute_s:.2f} + bubble {st.bubble_s:.2f} + exposed "
             f"communication {st.exposed_comm_s:.2f} (dp {st.comm_by_group_s['dp']:.2f}, tp "
             f"{st.comm_by_group_s['tp']:.2f}, pp {st.comm_by_group_s['pp']:.2f} before overlap); MFU {r.mfu:.0%}",
             f"  {r.days:,.1f} days ({r.days_low:,.1f}-{r.days_high:,.1f}), {r.gpu_hours:,.0f} GPU-hours, "
             f"{_usd(r.cost_usd)} ({_usd(r.cost_usd_low)}-{_usd(r.cost_usd_high)})",
             "the front, cheapest first:"]
    for index, line in groups["front_lines"]:
        lines.append(f"{'>' if index == highlight else ' '}{line}")
    return FixedView(fig, "\n".join(lines))


#: What :func:`_plan_groups` found for the last few plans tables, keyed by their content (a hash of every
#: value and the index): a widget redraw that moves the chosen plan, or returns to a table it saw before, reuses
#: it; a table changed in place is a new key.
_PLAN_GROUPS_KEPT: dict = {}
_PLAN_GROUPS_KEEP = 8


def _plan_groups(plans) -> dict:
    """What :func:`render_plan` draws from ``plans`` whatever plan is chosen: each GPU type's own front
    (``own``: name, days, cost, fastest first), the time-vs-cost front (``front``: days, cost, fastest first;
    ``front_by_gpu`` per GPU type) and the summary's line per front plan (``front_lines``: row label, text).
    Kept for the last few tables, by content (~1 ms to hash 3,000 plans), and computed for any other."""
    import pandas as pd

    from .planner import _pareto

    key = (tuple(plans.columns), int(pd.util.hash_pandas_object(plans, index=True).sum()))
    if key in _PLAN_GROUPS_KEPT:
        return _PLAN_GROUPS_KEPT[key]
    own = []
    for name, sub in plans.groupby("gpu", sort=False):
        best = sub[_pareto(sub["days"].to_numpy(), sub["cost_usd"].to_numpy(),
                           sub["memory_per_gpu_bytes"].to_numpy())].sort_values("days")
        own.append((name, best["days"].to_numpy(), best["cost_usd"].to_numpy()))
    front = plans[plans["pareto"]]
    fs = front.sort_values("days")
    lines = []
    for i, f in enumerate(front.itertuples(), 1):                  # (itertuples: iterrows is ~10x slower)
        lines.append((f.Index, f"{i:3d}. {int(f.n_gpus):>6,} x {f.gpu:<9s} tp={f.tp} "
                     f"pp={f.pp:<2d} dp={f.dp:<4d} ZeRO-{f.zero} mb={f.micro_batch} x{f.grad_accum:<4d} "
                     f"{f.recompute:<9s} {f.memory_per_gpu_bytes / GiB:6.1f} GiB  MFU {f.mfu:4.0%}  "
                     f"{f.days:8,.1f} days  {_usd(f.cost_usd):>8s}"))
    out = {"own": own, "front": (fs["days"].to_numpy(), fs["cost_usd"].to_numpy()),
           "front_by_gpu": [(name, sub["days"].to_numpy(), sub["cost_usd"].to_numpy())
                            for name, sub in fs.groupby("gpu", sort=False)],
           "front_lines": lines}
    if len(_PLAN_GROUPS_KEPT) >= _PLAN_GROUPS_KEEP:
        del _PLAN_GROUPS_KEPT[next(iter(_PLAN_GROUPS_KEPT))]          # the oldest
    _PLAN_GROUPS_KEPT[key] = out
    return out


def _usd(v, _=None) -> str:
    """Dollars in a short form: $850, $12k, $1.2M."""
    if v >= 1e6:
        return f"${v / 1e6:.3g}M"
    if v >= 1e3:
        return f"${v / 1e3:.3g}k"
    return f"${v:,.0f}"


def _short_number(v, _=None) -> str:
    """A tick label in plain text (no mathtext, which is slow to lay out): 0.01, 0.5, 20, 1k, 10k, 2M, 1B, 1T."""
    for unit, name in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= unit:
            return f"{v / unit:g}{name}"
    return f"{v:g}"


def _tokens(n: float) -> str:
    """A token count in a short form: 1T, 300B, 15.6T."""
    for unit, name in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if n >= unit:
            return f"{n / unit:.3g}{name}"
    return f"{n:,.0f}"


def _log_axis(axis, lo: float, hi: float, fmt, *, pad: float = 1.4) -> None:
    """A log axis from ``lo / pad`` to ``hi * pad`` with fixed 1-2-5 ticks (decades only over more than
    2.5 decades) labelled by ``fmt`` and no minor ticks: a log axis left to its default locators spends most of a
    redraw laying out minor ticks and mathtext labels."""
    import math

    from matplotlib.ticker import FixedLocator, NullLocator

    if not (lo > 0 and hi >= lo):
        raise ValueError(f"a log axis needs 0 < lo <= hi; got lo={lo!r}, hi={hi!r}")
    lo, hi = lo / pad, hi * pad
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for steps in ((1,) if hi / lo >= 300 else (), (1, 2, 5), (1, 2, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [m * 10**e for e in decades for m in steps if lo <= m * 10**e <= hi]
        if len(ticks) >= 2:
            break
    if len(ticks) < 2:             # a range narrower than two 1-9 steps: its two ends, to 3 significant digits
        def unit(x):
            return 10.0 ** (math.floor(math.log10(x)) - 2)
        ticks = [math.ceil(lo / unit(lo)) * unit(lo), math.floor(hi / unit(hi)) * unit(hi)]
    (axis.axes.set_xscale if axis is axis.axes.xaxis else axis.axes.set_yscale)("log")
    (axis.axes.set_xlim if axis is axis.axes.xaxis else axis.axes.set_ylim)(lo, hi)
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_ticks(ticks, [fmt(t) for t in ticks])


# =========================================================================== fine-tuning on a budget
FINETUNE_PARTS = ("frozen weights", "trained weights", "gradients", "optimizer", "activations, temporaries",
                  "overhead")
FINETUNE_COLORS = dict(zip(FINETUNE_PARTS, ("#0072B2", "#56B4E9", "#E69F00", "#CC79A7", "#D55E00", "#BBBBBB")))


def render_finetune_memory(model="llama-3-8b", gpu: str = "H100 SXM", batch: int = 1, seq: int = 2048,
                           rank: int = 16, targets=("q", "k", "v", "o", "gate", "up", "down"),
                           recompute: str = "full", optimizer: str = "adamw", *,
                           into: Figure | None = None) -> View:
    """Fine-tuning chapter: one GPU's memory for full fine-tuning, LoRA and QLoRA of ``model``
    (:func:`~llmsizing.finetune.finetune_memory`), stacked by part at the step's peak (full fine-tuning's weights
    are all trained; the activations and temporaries alive at the peak are the rest), against the GPU's
    capacity, with the largest batch each method fits (:func:`~llmsizing.finetune.max_batch`)."""
    from .catalog import get_gpu, resolve_model
    from .finetune import METHODS, finetune_memory, max_batch

    g = get_gpu(gpu)
    kw = dict(rank=rank, targets=targets, recompute=recompute, optimizer=optimizer)
    runs = {m: finetune_memory(model, method=m, batch=batch, seq=seq, **kw) for m in METHODS}
    stacks = {p: [] for p in FINETUNE_PARTS}
    for r in runs.values():
        for p, v in zip(FINETUNE_PARTS, (r.base_weights_bytes, r.adapter_bytes, r.gradients_bytes, r.optimizer_bytes,
                                         r.total_bytes - r.overhead_bytes - r.base_weights_bytes - r.adapter_bytes
                                         - r.gradients_bytes - r.optimizer_bytes, r.overhead_bytes)):
            stacks[p].append(max(v, 0.0))
    fig, ax = _fixed_figure(7.2, 3.4, left=0.1, right=0.72, bottom=0.12, top=0.9, into=into)
    labels = ["full", "LoRA", "QLoRA"]
    import numpy as np
    from matplotlib.collections import PolyCollection

    pos, bottom = np.arange(3), np.zeros(3)
    for p in FINETUNE_PARTS:
        vals = np.asarray(stacks[p]) / GiB
        verts = [[(x - 0.35, b0), (x + 0.35, b0), (x + 0.35, b0 + v), (x - 0.35, b0 + v)]
                 for x, b0, v in zip(pos, bottom, vals)]
        ax.add_collection(PolyCollection(verts, facecolors=FINETUNE_COLORS[p], edgecolors="none"))
        bottom = bottom + vals
    cap = g.memory_gib
    ax.axhline(cap, color="0.2", ls="--", lw=1)
    ax.text(-0.55, cap, f"{g.name}: {cap:.1f} GiB", fontsize=7, va="bottom")
    top = min(bottom.max(), 4 * cap) * 1.08
    ax.set_ylim(0, max(top, cap * 1.15))
    for x, b in zip(pos, bottom):
        if b > ax.get_ylim()[1]:
            ax.text(x, ax.get_ylim()[1] * 0.97, f"{b:,.0f} GiB ↑", ha="center", va="top", fontsize=7)
    ax.set_xlim(-0.6, 2.6)
    ax.set_xticks(pos, labels)
    ax.set_ylabel("GiB on one GPU")
    ax.set_title(f"{resolve_model(model).name}: batch {batch} x "
                 f"{seq:,} tokens, rank {rank}, recompute {recompute}", fontsize=8.5, loc="left")
    ax.legend(handles=[Patch(facecolor=FINETUNE_COLORS[p], label=p) for p in FINETUNE_PARTS[::-1]],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    lines = []
    for label, (m, r) in zip(labels, runs.items()):
        mb = max_batch(model, g, method=m, seq=seq, **kw)
        verdict = "fits" if r.total_bytes <= 0.9 * g.memory_bytes else "does not fit"
        lines.append(f"{label:6s} {r.total_bytes / GiB:8,.1f} GiB ({r.trainable_params:,} trainable) {verdict} "
                     f"in 90% of one {g.name}; largest batch that fits: {mb}")
    return FixedView(fig, "\n".join(lines))


def figure_alt_text(view: View, *, limit: int = 400) -> str:
    """Alt text for a figure (issue 12): what each panel plots, from the figure's own titles and axis labels,
    then the first line of the view's summary unless it is a table header (the numbers are printed next to
    the figure anyway).

    ``show`` attaches it to the PNG output (IPython's ``Image(alt=...)``, stored in the output's metadata);
    the site's ``_ext/nb_image_alt.py`` copies it onto the ``<img>``. Formatting only, no formula.
    """
    import re

    def clean(text: str) -> str:
        return " ".join(text.split()).rstrip(":;, ")

    fig = view.figure
    panels: list[str] = []
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        title = " ".join(t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right")) if t.strip())
        axes = " against ".join(a for a in (ax.get_ylabel().strip(), ax.get_xlabel().strip()) if a)
        text = clean("; ".join(t for t in (title, axes) if t))
        if text and text not in panels:
            panels.append(text)
    if len(panels) > 1:
        panels = [f"panel {i}: {t}" for i, t in enumerate(panels, 1)]
    sup = clean(fig.get_suptitle()) if hasattr(fig, "get_suptitle") else ""
    first = next((line for line in view.summary.splitlines() if line.strip()), "")
    first = "" if re.search(r"\S {2,}\S", first.strip()) else clean(first)  # columns: a table header/row
    parts = [p for p in (sup, "; ".join(panels), first) if p]
    alt = ". ".join(parts) if parts else "Chart (its numbers are printed above it)"
    return alt if len(alt) <= limit else alt[: limit - 1].rstrip() + "…"
