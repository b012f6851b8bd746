"""Part I, one GPU (chapters 1-5): what a model holds on one GPU, and the proof. Chapter 1, its parameters by
component (:func:`render_parameter_counts`, :func:`render_parameter_shares`); chapter 2, the model states of
each recipe and optimizer against GPU capacities (:func:`render_model_states`); chapter 3, serving memory
against the ``1.2 x weights`` rule (:func:`render_inference_memory`, :func:`render_inference_vs_context`);
chapter 4, activation memory, the peak of a step and the largest micro-batch
(:func:`render_activation_memory`, :func:`render_step_phases`, :func:`render_max_micro_batch`), in
:mod:`~llmsizing.charts.one_gpu_activations`. Chapter 5's figures, the library against PyTorch's measurements
(:func:`render_prediction_vs_measurement`, :func:`render_step_timeline`, also in chapter 4), live in
:mod:`~llmsizing.charts.one_gpu_measure`. This module imports every name of both chapter modules and
re-exports it (issue 32: each module under 600 lines).

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from ..units import GiB
from .base import (COLORS, FixedView, View, _bar_collection, _inch_margins, _kept_figure_legend,
                   _legend_entries, new_figure)
# chapter 4's figures (activations, the step's phases, the largest micro-batch) live in one_gpu_activations;
# every name of theirs is still here
from .one_gpu_activations import (ACT_LABELS, MMB_RIM_PT, MMB_SEQS, RECOMPUTE_COLORS,  # noqa: F401
                                  render_activation_memory, render_max_micro_batch, render_step_phases)
from .one_gpu_activations import (_MMB_KEEP, _MMB_KEPT, _mark_beyond_max_seq, _seq_label,  # noqa: F401
                                  _same_as, _widths, _zero3)
# chapter 5's figures (the measurements) live in one_gpu_measure; every name of theirs is still here
from .one_gpu_measure import (MEASURE_COLORS, MEASURE_STYLES, MEASURE_SWEEPS,  # noqa: F401
                              MEASURED_STEP_DEFAULT, render_measured_step,
                              render_prediction_vs_measurement, render_step_timeline)
from .one_gpu_measure import _PHASE_SHADES, _TIMELINE_PHASES  # noqa: F401


def stacked_bars(ax, labels: list[str], stacks: dict[str, list[float]], *, horizontal: bool = True,
                 unit: float = GiB) -> None:
    """Draw one stacked bar per label; ``stacks`` maps component -> values in bytes (one per label).

    The bars are one :func:`_bar_collection`, component after component (the pixels of one per component),
    placed and autoscaled as ``barh``/``bar`` place theirs; each component's legend entry is an empty labelled
    collection of its colour (issue 38: a collection with bars costs a move ~1 ms more to make and draw)."""
    import numpy as np
    from matplotlib.collections import PolyCollection

    left, pos, starts, colors, sticky = np.zeros(len(labels)), np.arange(len(labels)), [], [], set()
    for comp, vals in stacks.items():
        color = COLORS.get(comp)
        if color is None:                                     # as bar() does: the next colour of the cycle
            color = ax._get_patches_for_fill.get_next_color()
        starts, colors = starts + [left], colors + [color]
        sticky.update(np.unique(left).tolist())
        left = left + np.asarray(vals, dtype=float) / unit
    if stacks:                                  # (each component ends where the next starts)
        _bar_collection(ax, np.tile(pos, len(stacks)), np.concatenate(starts),
                        np.concatenate(starts[1:] + [left]), thickness=0.8, horizontal=horizontal,
                        colors=[c for c in colors for _ in labels], sticky=sorted(sticky))
    for comp, color in zip(stacks, colors):
        entry = ax.add_collection(PolyCollection([], facecolors=color, edgecolors="none", label=comp),
                                  autolim=False)
        entry.llmsizing_bars = True
    ax.autoscale_view()
    if horizontal:
        ax.set_yticks(pos, labels)
        ax.invert_yaxis()
    else:
        ax.set_xticks(pos, labels)


# =========================================================================== chapter 1: parameters
def render_parameter_counts(model="llama-2-7b", *, into: Figure | None = None, **changes) -> View:
    """Parameters by component for ``model`` (a catalogue name or Model), optionally with fields changed
    (e.g. ``layers=40``). Chapter 1."""
    from ..catalog import resolve_model
    from ..model import COMPONENTS
    from ..units import fmt_count

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
    _kept_figure_legend(fig, ("parameter counts", *comps), lambda: fig.legend(
        *ax.get_legend_handles_labels(), ncols=len(comps), loc="lower center", bbox_to_anchor=(0.5, 0.0),
        fontsize=8, frameon=False))
    ax.set_title(f"{label}: {fmt_count(m.n_params)} parameters", fontsize=10)
    lines = [f"{label}: {m.n_params:,} parameters"]
    lines += [f"  {c:<10s} {parts[c]:>16,d}  ({parts[c] / m.n_params:6.1%})" for c in comps]
    return FixedView(fig, "\n".join(lines))


def render_parameter_shares(models=None) -> View:
    """Where the parameters live, model by model: one bar per model (catalogue names or Models; default:
    the whole catalogue), split by component as a share of that model's count. Chapter 1."""
    from ..catalog import list_models, resolve_model
    from ..model import COMPONENTS
    from ..units import fmt_count

    from .._validate import check_sequence

    if models is None:
        models = list_models()
    ms = [resolve_model(m, moe=True) for m in check_sequence("models", models,
                                                             example="['gpt2', 'llama-3-8b']")]
    parts = [m.param_breakdown() for m in ms]
    comps = [c for c in COMPONENTS if any(p[c] for p in parts)]
    fig, ax = new_figure(7.5, 0.42 * len(ms) + 1.4)
    stacks = {c: [p[c] / m.n_params for p, m in zip(parts, ms)] for c in comps}
    stacked_bars(ax, [m.name for m in ms], stacks, unit=0.01)
    for i, m in enumerate(ms):
        ax.annotate(fmt_count(m.n_params), (100, i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.set_xlim(0, 100)
    ax.set_ylim(len(ms) - 0.5, -0.5)          # first model on top, no empty rows above or below (read39b)
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
    ("bf16-mixed-dual-grads", "adamw"), ("bf16-mixed", "adamw-8bit"), ("bf16-mixed", "muon"),
    ("bf16-mixed", "lion"), ("bf16-mixed", "adafactor"), ("bf16-mixed", "sgd"), ("bf16", "adamw"),
)

#: Line styles for GPU capacity lines (one per GPU type, in order).
_CAPACITY_STYLES = ("--", "-.", ":", (0, (6, 2, 1, 2, 1, 2)), (0, (1, 1)))
#: Greys and muted colours so neighbouring capacity lines differ in colour as well as dash pattern.
_CAPACITY_COLORS = ("0.15", "#882255", "#332288", "#7F7F7F", "#117733")


def _gpu_lines(ax, gpus, count: int, *, horizontal: bool) -> list:
    """Draw one dashed capacity line per GPU type at ``count`` x its memory (GiB); return the GPU objects.
    ``horizontal``: vertical lines on a horizontal bar chart, whose caller sets the x limits afterwards: the
    line is added as ``axvline`` makes it, without asking for the autoscaled bounds first (issue 38: each
    ``axvline`` works out the limits again, ~1.5 ms a line)."""
    import matplotlib as mpl
    from matplotlib.lines import Line2D

    from ..catalog import GPU, resolve_gpus

    if isinstance(gpus, (str, GPU)):
        gpus = (gpus,)
    out = []
    # (a GPU named twice, in two spellings, is refused: it would draw two lines for one GPU)
    for i, g in enumerate(resolve_gpus(gpus, example="('H100 SXM', 'H200')", allow_empty=True)):
        cap = count * g.memory_gib
        label = f"{count} × {g.name} = {cap:,.0f} GiB" if count > 1 else f"{g.name} ({cap:.1f} GiB)"
        style = dict(color=_CAPACITY_COLORS[i % len(_CAPACITY_COLORS)], lw=1.1,
                     ls=_CAPACITY_STYLES[i % len(_CAPACITY_STYLES)], label=label)
        if horizontal:
            line = ax.add_line(Line2D([cap, cap], [0, 1], transform=ax.get_xaxis_transform(which="grid"),
                                      **style))
            line.get_path()._interpolation_steps = mpl.axis.GRIDLINE_INTERPOLATION_STEPS   # (as axvline)
        else:
            line = ax.axhline(cap, **style)
        line.capacity_gib = cap           # read by _drop_offscreen_capacity_lines
        out.append(g)
    return out


def _drop_offscreen_capacity_lines(ax, *, horizontal: bool, name_them: bool = False) -> None:
    """Remove the capacity lines that fall outside the axis range, so the legend never names a GPU whose line
    the reader cannot see (the text summary still lists every GPU). Call after setting the limits. With
    ``name_them``, such a line is hidden instead, and its legend entry (without a line) says it is beyond the
    axis: a GPU the reader adds is then named in the figure, not only in the summary (issue 25)."""
    lo, hi = ax.get_xlim() if horizontal else ax.get_ylim()
    for line in list(ax.lines):
        cap = getattr(line, "capacity_gib", None)
        if cap is not None and not lo <= cap <= hi:
            if name_them:
                line.set_visible(False)
                line.set_label(f"{line.get_label()}: {'beyond' if cap > hi else 'below'} the axis")
            else:
                line.remove()


def render_model_states(model="llama-3-8b", precision="bf16-mixed", optimizer="adamw",
                        gpus=("A100 40GB", "H100 SXM", "H200", "B200"), count: int = 1,
                        compare=MODEL_STATES_COMPARE, *, into: Figure | None = None) -> View:
    """Model states (weights, gradients, master copy, optimizer states) of ``model`` for several recipe x
    optimizer pairs, the selected ``precision`` x ``optimizer`` in bold, against the memory of ``count``
    GPUs of each type in ``gpus``. The summary gives the minimum GPU counts from
    :func:`llmsizing.gpu_states.min_gpus_for_bytes`. Chapter 2."""
    from .._validate import check_int, check_sequence
    from ..catalog import resolve_model
    from ..memory import min_gpus_for_bytes, model_states
    from ..units import GB, fmt_count

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
    if any(s.fp8_weights_bytes for s in states):      # an FP8 recipe: its weight copies and scaling state
        stacks["FP8 weight copies"] = [s.fp8_weights_bytes + s.fp8_meta_bytes for s in states]
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
    # the entries' labels fix their styles (component colours, capacity lines' styles by position)
    _kept_figure_legend(fig, ("model states", *_legend_entries(ax)[1]), lambda: fig.legend(
        *_legend_entries(ax), ncols=4, loc="lower center", bbox_to_anchor=(0.5, 0.0), fontsize=7.5,
        frameon=False))
    lines = [f"{m.name} ({m.n_params:,} params), {precision} + {optimizer}: "
             f"{sel.bytes_per_param:.4g} B/param = {sel.total_bytes / GiB:,.1f} GiB = "
             f"{sel.total_bytes / GB:,.1f} GB of model states",
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
    capacities, and the fewest of each GPU that hold it (:func:`llmsizing.inference.min_serving_gpus`: every
    GPU pays the allowance's fixed part). Chapter 3."""
    from ..catalog import resolve_model
    from ..inference import RULE_OF_THUMB, inference_memory, min_serving_gpus
    from ..memory import min_gpus_for_bytes
    from ..units import fmt_count

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
    _drop_offscreen_capacity_lines(ax, horizontal=True, name_them=True)
    ax.set_xlabel("memory (GiB)")
    ax.set_title(f"{m.name} ({fmt_count(m.n_params)}): batch {batch} × {context:,} tokens, "
                 f"weights {weights}, KV cache {kv_cache}", fontsize=10)
    # the entries' labels fix their styles (component colours, capacity lines' styles and, "beyond the axis",
    # visibility)
    _kept_figure_legend(fig, ("inference memory", *_legend_entries(ax)[1]), lambda: fig.legend(
        *_legend_entries(ax), ncols=4, loc="lower center", bbox_to_anchor=(0.5, 0.0), fontsize=7.5,
        frameon=False))
    lines = [f"{m.name}, batch {batch} × context {context:,}, weights {weights}, KV cache {kv_cache}:",
             f"  weights {r.weights_bytes / GiB:,.2f} GiB + KV cache {r.kv_cache_bytes / GiB:,.2f} GiB "
             f"+ overhead {r.overhead_bytes / GiB:,.2f} GiB = {r.total_bytes / GiB:,.2f} GiB",
             f"  ×{RULE_OF_THUMB:g} rule: {r.rule_of_thumb_bytes / GiB:,.2f} GiB "
             f"({r.rule_of_thumb_bytes / r.total_bytes - 1:+.0%} vs this book)"]
    for g in gs:
        # both totals carry their own allowance (1 GiB + 8%, or the rule's 20%): the whole GPU is usable; the
        # book's 1 GiB is paid on every GPU (min_serving_gpus), the rule's 20% is the seed's, split as it is
        n = min_serving_gpus(r, g)
        n_rule = min_gpus_for_bytes(r.rule_of_thumb_bytes, g, usable_fraction=1.0)
        lines.append(f"  {g.name} ({g.memory_gib:.1f} GiB): needs ≥ {n} (rule says {n_rule})")
    return FixedView(fig, "\n".join(lines))


def render_inference_vs_context(model="llama-3-8b", batches=(1, 8, 32), weights="bf16", kv_cache="bf16",
                                contexts=tuple(2**k for k in range(9, 18)),
                                gpus=("L40S", "H100 SXM", "H200")) -> View:
    """Total serving memory (from :func:`llmsizing.inference.inference_memory`) against context length, one
    line per batch size, with the ``1.2 x weights`` rule (flat: it ignores context and batch) and GPU
    capacities. Chapter 3."""
    import matplotlib.ticker

    from ..catalog import resolve_model
    from ..inference import RULE_OF_THUMB, inference_memory
    from ..units import fmt_count

    from .._validate import check_int, check_sequence

    m = resolve_model(model)
    batches = [check_int("batches[]", b) for b in check_sequence("batches", batches, example="(1, 8, 32)")]
    contexts = sorted({check_int("contexts[]", c)
                       for c in check_sequence("contexts", contexts, example="(4096, 8192)")})
    fig, ax = _inch_margins(7.5, 3.8, left=0.75, bottom=0.95)
    lines = [f"{m.name}: total serving memory (GiB), weights {weights}, KV cache {kv_cache}",
             f"{'context':>9s}" + "".join(f"{'batch ' + str(b):>11s}" for b in batches)]
    table = {b: [inference_memory(m, batch=b, context=c, weights=weights,
                                  kv_cache=kv_cache) for c in contexts]
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
