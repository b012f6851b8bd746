"""Figures for the book. Each chapter's figure is a ``render_*`` function that returns a :class:`View`
(a matplotlib figure plus a plain-text summary). The notebook's checked cell calls ``show(render_x())``; the
chapter's widget (in :mod:`llmsizing.widgets`) calls the same function on every change, so the static page,
the tests and the live widget all draw the same thing.

No formula lives here: render functions only call the library and draw.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import matplotlib
from matplotlib.figure import Figure

from .units import GiB

#: One colour per memory component, used by every chart in the book.
COLORS = {
    "weights": "#4C72B0", "gradients": "#DD8452", "master copy": "#55A868", "optimizer states": "#8172B3",
    "optimizer": "#8172B3", "activations": "#C44E52", "KV cache": "#C44E52", "overhead": "#9B9B9B",
    # parameter components (chapter 1)
    "embedding": "#4C72B0", "position": "#64B5CD", "attention": "#DD8452", "mlp": "#55A868",
    "norms": "#C44E52", "lm_head": "#8172B3",
    # activation components (chapter 4)
    "attention_projections": "#DD8452", "attention_core": "#E5AE38", "dropout_masks": "#937860",
    "residuals": "#DA8BC3", "logits": "#8172B3",
}

DPI = 96


@dataclass(frozen=True)
class View:
    """What a render function returns: a figure and a short text summary of the same numbers."""

    figure: Figure
    summary: str

    def png(self) -> bytes:
        """The figure as PNG bytes (what the widgets display)."""
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
        return buf.getvalue()


def new_figure(width: float = 7.0, height: float = 3.6, ncols: int = 1):
    """A figure detached from pyplot (no global state, no leaks when widgets redraw)."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def show(view: View) -> None:
    """Print the summary and display the figure as PNG: used by the checked cell next to each widget."""
    from IPython.display import Image, display

    print(view.summary)
    display(Image(data=view.png(), format="png"))


def capacity_line(ax, gib: float, label: str, *, horizontal: bool = True, color: str = "0.25") -> None:
    """Mark a GPU's memory capacity on a bar chart."""
    if horizontal:
        ax.axhline(gib, color=color, lw=1, ls="--")
        ax.annotate(f"{label} ({gib:g} GiB)", (1.0, gib), xycoords=("axes fraction", "data"),
                    ha="right", va="bottom", fontsize=8, color=color)
    else:
        ax.axvline(gib, color=color, lw=1, ls="--")
        ax.annotate(f"{label}\n{gib:g} GiB", (gib, 1.0), xycoords=("data", "axes fraction"),
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
def render_parameter_counts(model="llama-2-7b", **changes) -> View:
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
    fig, ax = new_figure(7, 2.6)
    comps = [c for c in COMPONENTS if parts[c]]
    stacked_bars(ax, [m.name], {c: [parts[c]] for c in comps}, unit=1e9)
    ax.set_xlabel("parameters (billions)")
    fig.legend(*ax.get_legend_handles_labels(), ncols=len(comps), loc="outside lower center", fontsize=8,
               frameon=False)
    ax.set_title(f"{label}: {fmt_count(m.n_params)} parameters", fontsize=10)
    lines = [f"{label}: {m.n_params:,} parameters"]
    lines += [f"  {c:<10s} {parts[c]:>16,d}  ({parts[c] / m.n_params:6.1%})" for c in comps]
    return View(fig, "\n".join(lines))


def render_parameter_shares(models=None) -> View:
    """Where the parameters live, model by model: one bar per model (catalogue names or Models; default:
    the whole catalogue), split by component as a share of that model's count. Chapter 1."""
    from .catalog import list_models, resolve_model
    from .model import COMPONENTS
    from .units import fmt_count

    if models is None:
        models = list_models()
    if isinstance(models, (str,)) or not hasattr(models, "__iter__"):
        raise TypeError("models must be a list of catalogue names or Models")
    ms = [resolve_model(m) for m in models]
    if not ms:
        raise ValueError("models must name at least one model")
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
# (render_model_states and friends go here)


# =========================================================================== chapter 3: inference memory
# (render_inference_memory and friends go here)


# =========================================================================== chapter 4: activation memory
# (render_activation_memory and friends go here)
