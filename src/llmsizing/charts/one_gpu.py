"""Part I, one GPU (chapters 1-5): what a model holds on one GPU, and the proof. Chapter 1, its parameters by
component (:func:`render_parameter_counts`, :func:`render_parameter_shares`); chapter 2, the model states of
each recipe and optimizer against GPU capacities (:func:`render_model_states`); chapter 3, serving memory
against the ``1.2 x weights`` rule (:func:`render_inference_memory`, :func:`render_inference_vs_context`);
chapter 4, activation memory, the peak of a step and the largest micro-batch
(:func:`render_activation_memory`, :func:`render_step_phases`, :func:`render_max_micro_batch`). Chapter 5's
figures, the library against PyTorch's measurements (:func:`render_prediction_vs_measurement`,
:func:`render_step_timeline`, also in chapter 4), live in :mod:`~llmsizing.charts.one_gpu_measure`; this
module imports every name of theirs and re-exports it (issue 32: each module under 600 lines).

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from ..units import GiB
from .base import (COLORS, FixedView, View, _bar_collection, _fast_stacked_columns, _fixed_figure,
                   _inch_margins, _kept_figure_legend, _grid, _kept_legend, _legend_entries, _log_scale,
                   capacity_line, new_figure)
from .base import _CAPTION_LINESPACING, _CAPTION_PAD_IN, _CAPTION_PT, _caption_room  # noqa: F401
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
    capacities. Chapter 3."""
    from ..catalog import resolve_model
    from ..inference import RULE_OF_THUMB, inference_memory
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
        # both totals carry their own allowance (1 GiB + 8%, or the rule's 20%): the whole GPU is usable
        n, n_rule = (min_gpus_for_bytes(x, g, usable_fraction=1.0) for x in (r.total_bytes,
                                                                             r.rule_of_thumb_bytes))
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


# =========================================================================== chapter 4: activation memory
#: Display names of the stacks in chapter 4's figures (activation components get their own names, coloured in
#: :data:`~llmsizing.charts.base.COLORS`, so they never share a colour with a model-state component).
ACT_LABELS = {
    "norms": "norm inputs", "attention_projections": "QKV / out-proj inputs",
    "attention_core": "attention core (Q, K, V, scores)", "mlp": "MLP", "dropout_masks": "dropout masks",
    "residuals": "layer inputs (checkpoints)", "embedding": "token ids", "logits": "logits + loss",
}
RECOMPUTE_COLORS = {"none": "#D55E00", "selective": "#E69F00", "full": "#0072B2"}


def _mark_beyond_max_seq(ax, x0: float, x1: float, max_seq: int, *, in_margin: bool = False) -> None:
    """Hatch the sequence lengths beyond the model's trained context (``Model.max_seq``): the memory is
    computed the same way there, but running them assumes extended positions (RoPE scaling). The label goes at
    the top of the hatched span, or with ``in_margin`` in the right margin at the axes' foot, where it cannot
    cover the totals a column chart prints at its top (issue 26)."""
    ax.axvspan(x0, x1, facecolor="none", edgecolor="0.75", hatch="//", lw=0, zorder=0.5)
    if in_margin:
        ax.annotate(f"hatched: beyond max_seq ({_seq_label(max_seq)}),\nthe positions extrapolated",
                    (1.0, 0.0), xycoords="axes fraction", xytext=(8, 0), textcoords="offset points",
                    ha="left", va="bottom", fontsize=7, color="0.4")
        return
    ax.annotate(f"beyond max_seq ({_seq_label(max_seq)})", (x0, 1.0), xycoords=("data", "axes fraction"),
                xytext=(3, -3), textcoords="offset points", ha="left", va="top", fontsize=7, color="0.4")


def _seq_label(s: int) -> str:
    return f"{s // 1024}K" if s % 1024 == 0 else f"{s:,}"


def _zero3(zero3_gpus: int):
    """Model states sharded ZeRO-3/FSDP-style over ``zero3_gpus`` GPUs (1 = a single GPU, nothing sharded)."""
    from .._validate import check_int
    from ..parallel import Parallel

    n = check_int("zero3_gpus", zero3_gpus)
    return Parallel(dp=n, zero=3) if n > 1 else Parallel()


def render_activation_memory(model="llama-3-8b", seq: int = 8192, batch: int = 1, attention: str = "flash",
                             recompute: str = "none", gpu: str = "H100 SXM", precision: str = "bf16-mixed",
                             zero3_gpus: int = 8, dropout: bool = False, stack: str = "fused", *,
                             caption: str = "", into: Figure | None = None) -> View:
    """Per-GPU training memory at the peak of a step (weights, optimizer states, activations by component,
    what the peak adds on top of them, overhead) against ``gpu``'s capacity, for sequence lengths 1K ...
    max(32K, ``seq``) with ``seq`` itself highlighted. Model states are sharded over ``zero3_gpus`` GPUs
    (ZeRO-3/FSDP; 1 = one GPU); ``stack`` is the software stack (``"fused"`` or ``"hf"``). ``caption``: text
    drawn under the axes, inside the PNG (:func:`_caption_room`; ``""``, the widget's, draws none). Chapter
    4."""
    import numpy as np

    from ..activations import ACT_COMPONENTS
    from ..catalog import get_gpu, resolve_model
    from ..memory import max_micro_batch, training_memory
    from ..units import fmt_gib

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

    text, extra = _caption_room(caption, 7.6 - 0.08 * 7.6)
    if text:                                    # the axes keep their size in inches; the figure grows
        height = 3.9 + extra
        fig, ax = _fixed_figure(7.6, height, left=0.08, right=0.69, bottom=(0.13 * 3.9 + extra) / height,
                                top=1 - 0.08 * 3.9 / height, into=into)
        fig.text(0.08, _CAPTION_PAD_IN / height, text, ha="left", va="bottom", fontsize=_CAPTION_PT,
                 color="0.2", linespacing=_CAPTION_LINESPACING, gid="caption")    # (the alt text's)
    else:
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
        _mark_beyond_max_seq(ax, beyond[0] - 0.5, len(seqs) - 0.5, m.max_seq, in_margin=True)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("GiB per GPU")
    states = "one GPU" if par.dp == 1 else f"states sharded over {par.dp} GPUs"
    ax.set_title(f"{m.name}, micro-batch {batch}, {attention} attention, recompute={recompute}, "
                 f"{stack} stack ({states})", fontsize=9, loc="left")

    acts = chosen.activations
    fit = "fits" if chosen.total_bytes <= g.memory_bytes else "does NOT fit"
    bmax = max_micro_batch(m, g, seq, precision=precision, attention=attention, recompute=recompute,
                           dropout=dropout, parallel=par, stack=stack)
    lines = [f"{m.name} at {seq:,} tokens x micro-batch {batch}, {attention} attention, "
             f"recompute={recompute}, {precision}, {stack} stack, {states}:",
             f"  model states     "
             f"{fmt_gib(chosen.weights_bytes + chosen.gradients_bytes + chosen.optimizer_bytes):>12s}",
             f"  activations      {fmt_gib(acts.total_bytes):>12s}"]
    lines += [f"    {ACT_LABELS[c]:<34s}{fmt_gib(acts.breakdown[c]):>12s}" for c in ACT_COMPONENTS
              if acts.breakdown[c]]
    lines += [f"  peak of the step {fmt_gib(chosen.peak_bytes):>12s}  (in the {chosen.peak_phase})",
              f"  overhead         {fmt_gib(chosen.overhead_bytes):>12s}",
              f"  total            {fmt_gib(chosen.total_bytes):>12s}  -> {fit} on {g.name} "
              f"({g.memory_gib:.1f} GiB)",
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
    from ..catalog import get_gpu, resolve_model
    from ..memory import PHASES, STEP_PARTS, training_memory
    from ..units import fmt_gib

    m = resolve_model(model)
    g = get_gpu(gpu)
    par = _zero3(zero3_gpus)
    t = training_memory(m, batch=batch, seq=seq, attention=attention, recompute=recompute,
                        precision=precision, parallel=par, stack=stack, optimizer_impl=optimizer_impl)
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


#: :func:`render_max_micro_batch`'s curves for the last few settings (model, GPU, precision, dropout, states'
#: sharding, stack; read-only arrays), so that a widget going back to a setting it drew does not work them out
#: again (six calls of ``max_micro_batch``, ~8 ms; issue 38). Model, GPU and Parallel are frozen dataclasses.
_MMB_KEPT: dict = {}
_MMB_KEEP = 8


def render_max_micro_batch(model="llama-3-8b", gpu: str = "H100 SXM", precision: str = "bf16-mixed",
                           zero3_gpus: int = 8, dropout: bool = False, stack: str = "fused", *,
                           into: Figure | None = None) -> View:
    """The largest micro-batch that fits ``gpu`` as sequence length grows, one curve per recompute level
    (colour) and attention kernel (solid flash, dashed eager); computed by
    :func:`llmsizing.memory.max_micro_batch`. The ``"hf"`` stack has no selective recomputation. Chapter 4."""
    from .._validate import check_choice
    from ..activations import STACKS
    import matplotlib.ticker
    import numpy as np

    from ..catalog import get_gpu, resolve_model
    from ..memory import max_micro_batch

    m = resolve_model(model)
    g = get_gpu(gpu)
    par = _zero3(zero3_gpus)
    seqs = np.array(MMB_SEQS)
    stack = check_choice("stack", stack, STACKS)
    key = (m, g, precision, dropout, par, stack)
    curves = _MMB_KEPT.pop(key, None)          # (popped and put back: the most recent last)
    if curves is None:
        curves = {}
        for rc in ("none", "full") if stack == "hf" else ("none", "selective", "full"):
            for att in ("flash", "eager"):
                curves[rc, att] = max_micro_batch(m, g, seqs, precision=precision, attention=att,
                                                  recompute=rc, dropout=dropout, parallel=par, stack=stack)
                curves[rc, att].setflags(write=False)
    _MMB_KEPT[key] = curves
    while len(_MMB_KEPT) > _MMB_KEEP:
        del _MMB_KEPT[next(iter(_MMB_KEPT))]
    fig, ax = _fixed_figure(7.6, 3.6, left=0.08, right=0.70, bottom=0.14, top=0.92, into=into, keep_log="xy")
    width = {"none": 3.2, "selective": 2.0, "full": 1.2}    # curves that coincide stay visible
    for (rc, att), b in curves.items():
        y = np.where(b > 0, b, np.nan).astype(float)
        ax.plot(seqs, y, color=RECOMPUTE_COLORS[rc], ls="-" if att == "flash" else "--", lw=width[rc],
                drawstyle="steps-mid", label=f"{att}, recompute={rc}")
    _log_scale(ax.xaxis, 2)
    _log_scale(ax.yaxis, 2)
    ticks = [s for s in seqs if s & (s - 1) == 0]
    ax.set_xticks(ticks, [_seq_label(int(s)) for s in ticks])
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("largest micro-batch (sequences)")
    states = "one GPU" if par.dp == 1 else f"states sharded over {par.dp} GPUs"
    ax.set_title(f"{m.name} on {g.name} ({g.memory_gib:.1f} GiB), {precision}, {stack} stack, {states}",
                 fontsize=9, loc="left")
    _grid(ax, lw=0.4, alpha=0.5)
    if np.all([np.all(b == 0) for b in curves.values()]):
        ax.text(0.5, 0.5, "nothing fits: the model states alone exceed the GPU", transform=ax.transAxes,
                ha="center", va="center", color="#b00020")
        ax.set_ylim(1, 2)
        ax.set_xlim(seqs[0] / 1.15, seqs[-1] * 1.15)      # (no data to autoscale from)
    if seqs[-1] > m.max_seq:
        _mark_beyond_max_seq(ax, max(m.max_seq, seqs[0]), seqs[-1] * 1.15, m.max_seq)
        ax.set_xlim(seqs[0] / 1.15, seqs[-1] * 1.15)
    # kept from the last redraw of a widget's figure when its labels are the same (they set the styles)
    _kept_legend(ax, ("max micro-batch", *ax.get_legend_handles_labels()[1]),
                 lambda: ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0)))

    show_seqs = [s for s in seqs if s in (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)]
    idx = [int(np.searchsorted(seqs, s)) for s in show_seqs]
    head = f"{'kernel':<6s} {'recompute':<10s}" + "".join(f"{_seq_label(int(s)):>6s}" for s in show_seqs)
    lines = [f"Largest micro-batch of {m.name} on {g.name}, {precision}, {stack} stack, {states} "
             "(0 = does not fit):",
             head]
    for (rc, att), b in curves.items():
        lines.append(f"{att:<6s} {rc:<10s}" + "".join(f"{int(b[i]):>6d}" for i in idx))
    return FixedView(fig, "\n".join(lines))


