"""Part I, "One GPU": the widgets of chapters 1-4 (chapter 5's is in :mod:`.measure`).

* chapter 1, :func:`parameter_counts_widget`: the parameter count by component, the architecture changeable;
* chapter 2, :func:`model_states_widget`: the model states per recipe and optimizer against GPU memory;
* chapter 3, :func:`inference_memory_widget`: weights + KV cache + overhead for inference;
* chapter 4, :func:`activation_memory_widget` and :func:`max_micro_batch_widget`: training memory with the
  activations, and the largest micro-batch that fits.
"""

from __future__ import annotations

import ipywidgets as W

from .. import charts
from ..catalog import get_model, list_gpus
from .controls import (_SEQS, _choice, _dense_models, _divisors_up_to, _follow_max_seq, _gpu_multiselect,
                       _nearest, _react_then_redraw, _style, _up_to_max_seq)
from .dashboard import KEPT_ANSWERS, Dashboard

#: The heads slider of chapter 1 offers the divisors of the hidden size up to this many heads.
_MAX_HEADS = 256


def parameter_counts_widget(model: str = "llama-2-7b") -> Dashboard:
    """Chapter 1: start from a catalogued model and change its architecture; see the count by component.

    The heads slider offers only the divisors of the hidden size (up to 256) and the KV-heads slider only the
    divisors of the heads, so every position is a valid model (:class:`~llmsizing.model.Model` checks the
    same rules). Changing the hidden size or the heads re-offers the dependent slider, keeping the value the
    reader last chose when it is still valid, else the nearest valid one (one redraw per change)."""
    m = get_model(model)                     # an unknown name raises the library's error, with a suggestion
    heads_opts = _divisors_up_to(m.hidden, _MAX_HEADS)
    controls = {
        "model": W.Dropdown(options=_dense_models(model), value=model, description="start from", **_style()),
        "layers": W.IntSlider(value=m.layers, min=1, max=160, description="layers", **_style()),
        "hidden": W.IntSlider(value=m.hidden, min=256, max=32768, step=256, description="hidden", **_style()),
        "heads": W.SelectionSlider(options=heads_opts, value=m.heads, description="heads",
                                   tooltip="only the divisors of the hidden size", **_style()),
        "kv_heads": W.SelectionSlider(options=_divisors_up_to(m.heads, m.heads), value=m.kv_heads,
                                      description="KV heads", tooltip="only the divisors of the heads",
                                      **_style()),
        "ffn_hidden": W.IntSlider(value=m.ffn_hidden, min=256, max=131072, step=256, description="ffn hidden",
                                  **_style()),
        "vocab": W.IntSlider(value=m.vocab, min=1000, max=256000, step=1000, description="vocab", **_style()),
        "gated_mlp": W.Checkbox(value=m.gated_mlp, description="gated MLP (SwiGLU)", **_style()),
        "tied_embeddings": W.Checkbox(value=m.tied_embeddings, description="tied embeddings", **_style()),
    }
    box = Dashboard(_render_parameters, controls, name="parameter_counts_widget", keep=KEPT_ANSWERS)
    # the values the reader last chose for heads and KV heads: brought back when they become valid again
    wanted = {"heads": m.heads, "kv_heads": m.kv_heads}

    def offer(key, opts, value):          # re-offer a slider's options and value (inside quiet(): no redraw)
        w = controls[key]
        if list(w.options) != opts:
            if value in w.options:        # value first, so the slider never holds a value its options lack
                w.value = value
            w.options = opts
        w.value = value

    def fit_heads(hidden):                # heads, then KV heads, re-offered for this hidden size
        heads = _nearest(_divisors_up_to(hidden, _MAX_HEADS), wanted["heads"])
        offer("heads", _divisors_up_to(hidden, _MAX_HEADS), heads)
        offer("kv_heads", _divisors_up_to(heads, heads), _nearest(_divisors_up_to(heads, heads),
                                                                    wanted["kv_heads"]))

    def react(change):                    # then one redraw per change the reader makes
        key = next(k for k, w in controls.items() if w is change["owner"])
        with quiet():
            if key == "model":            # choosing a catalogue model resets the architecture controls
                preset = get_model(change["new"])
                wanted.update(heads=preset.heads, kv_heads=preset.kv_heads)
                for k in controls:
                    if k not in ("model", "heads", "kv_heads"):
                        controls[k].value = getattr(preset, k)
                fit_heads(preset.hidden)
            elif key in ("hidden", "heads", "kv_heads"):
                if key != "hidden":
                    wanted[key] = change["new"]
                fit_heads(controls["hidden"].value)

    quiet = _react_then_redraw(box, react)
    return box


def _render_parameters(model, into=None, **fields):
    base = get_model(model)
    changed = {k: v for k, v in fields.items() if getattr(base, k) != v}
    if "kv_heads" in fields and "heads" in changed:
        changed["kv_heads"] = fields["kv_heads"]
    return charts.render_parameter_counts(base, into=into, **changed)


# =========================================================================== chapter 2
#: What the chapter-2 widget compares the selected recipe + optimizer with (kept short: each redraw <=
#: 100 ms).
_WIDGET_STATES_COMPARE = (("fp32", "adamw"), ("bf16-mixed", "adamw"), ("bf16-mixed", "adamw-8bit"),
                          ("bf16", "adamw"))


def model_states_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 2: model x recipe x optimizer -> model states (weights, gradients, master copy, optimizer
    states) against the memory of ``count`` GPUs of the chosen types, and the minimum GPU count for the
    states alone (from :func:`llmsizing.gpu_states.min_gpus_for_bytes`)."""
    from ..precision import OPTIMIZERS, RECIPES

    get_model(model)
    controls = {
        "model": W.Dropdown(options=_dense_models(model), value=model, description="model", **_style()),
        "precision": W.Dropdown(options=list(RECIPES), value="bf16-mixed", description="recipe", **_style()),
        "optimizer": W.Dropdown(options=list(OPTIMIZERS), value="adamw", description="optimizer", **_style()),
        "count": W.IntSlider(value=1, min=1, max=64, description="GPUs per line",
                             tooltip="how many GPUs of each type a dashed line stands for", **_style()),
        "gpus": _gpu_multiselect(("A100 40GB", "H100 SXM", "H200", "B200"), "GPUs"),
    }
    box = Dashboard(_render_model_states, controls, name="model_states_widget", keep=KEPT_ANSWERS)
    _cap_gpus_per_line(box)
    return box


def _render_model_states(model, precision, optimizer, count, gpus, into=None):
    return charts.render_model_states(model, precision=precision, optimizer=optimizer, gpus=tuple(gpus),
                                      count=count, compare=_WIDGET_STATES_COMPARE, into=into)


#: "GPUs per line" (chapter 2) stops where the widest bar would fill less than this share of the axis, unless
#: more GPUs are needed for every chosen GPU type to hold every bar.
MIN_BAR_SHARE = 0.25


def gpus_per_line_cap(model, precision: str, optimizer: str, gpus) -> int:
    """The largest "GPUs per line" the chapter-2 widget offers for these choices: the larger of

    * the count at which the widest bar (the largest model states among the chosen recipe + optimizer and
      the widget's comparisons) still fills :data:`MIN_BAR_SHARE` of the axis next to the line of the
      largest chosen GPU, ``floor(widest / (MIN_BAR_SHARE x largest GPU memory))``, and
    * the count at which even the smallest chosen GPU type holds the widest bar,
      ``ceil(widest / smallest GPU memory)`` (so every line can cross every bar),

    and at least 1. Beyond it the axis, which spans the farthest capacity line, squeezes the bars to slivers.
    Uses :func:`llmsizing.gpu_states.model_states` (chapter 2)."""
    import math

    from ..catalog import get_gpu
    from ..memory import model_states
    from ..units import GiB

    pairs = dict.fromkeys(((precision, optimizer),) + _WIDGET_STATES_COMPARE)
    widest = max(model_states(model, precision=p, optimizer=o).total_bytes for p, o in pairs) / GiB
    mems = [get_gpu(g).memory_gib for g in gpus]
    if not mems:
        return 1
    return max(1, math.floor(widest / (MIN_BAR_SHARE * max(mems))), math.ceil(widest / min(mems)))


def _cap_gpus_per_line(box: Dashboard) -> None:
    """Keep the chapter-2 "GPUs per line" slider's maximum at :func:`gpus_per_line_cap` as the model, recipe,
    optimizer or GPUs change (one redraw per change). The count the reader last chose comes back when the cap
    allows it again."""
    count = box.controls["count"]
    wanted = {"count": count.value}

    def fit():
        v = box.values()
        try:
            cap = gpus_per_line_cap(v["model"], v["precision"], v["optimizer"], v["gpus"])
        except (ValueError, TypeError):   # the redraw shows the library's message
            return
        with quiet():
            if cap >= count.max:
                count.max = cap
                count.value = min(wanted["count"], cap)
            else:
                count.value = min(wanted["count"], cap)
                count.max = cap

    def react(change):                    # then one redraw per change the reader makes
        if change["owner"] is count:
            wanted["count"] = change["new"]
        else:
            fit()

    quiet = _react_then_redraw(box, react)
    fit()                                  # the starting cap (no redraw: the count stays in range)


# =========================================================================== chapter 3
_CONTEXTS = [2**k for k in range(7, 18)]


def inference_memory_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 3: model x context x batch x weight dtype x KV-cache dtype -> weights + KV cache + overhead,
    next to the 1.2 x weights rule of thumb and the chosen GPUs' capacities."""
    from ..precision import WEIGHT_DTYPES

    contexts = _up_to_max_seq(_CONTEXTS, get_model(model))
    controls = {
        "model": W.Dropdown(options=_dense_models(model), value=model, description="model", **_style()),
        "context": W.SelectionSlider(options=[(f"{c:,}", c) for c in contexts], value=min(8192, contexts[-1]),
                                     description="context", **_style()),
        "batch": W.IntSlider(value=1, min=1, max=256, description="batch", **_style()),
        "weights": W.Dropdown(options=list(WEIGHT_DTYPES), value="bf16", description="weights dtype",
                              **_style()),
        "kv_cache": W.Dropdown(options=["fp32", "bf16", "fp16", "fp8", "int8"], value="bf16",
                               description="KV-cache dtype", **_style()),
        "gpus": _gpu_multiselect(("A10", "L40S", "H100 SXM", "H200"), "GPUs"),
    }
    box = Dashboard(_render_inference_memory, controls, name="inference_memory_widget", keep=KEPT_ANSWERS)
    _follow_max_seq(box, "context", _CONTEXTS, lambda c: (f"{c:,}", c))
    return box


def _render_inference_memory(model, context, batch, weights, kv_cache, gpus, into=None):
    return charts.render_inference_memory(model, context=context, batch=batch, weights=weights,
                                          kv_cache=kv_cache, gpus=tuple(gpus), into=into)


# =========================================================================== chapter 4: activation memory
def activation_memory_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 4: model x sequence length x micro-batch x attention kernel x recompute (x GPU, x how many GPUs
    share the model states) -> per-GPU training memory by component against the GPU's capacity."""
    seqs = _up_to_max_seq(_SEQS, get_model(model))
    controls = {
        "model": W.Dropdown(options=_dense_models(model), value=model, description="model", **_style()),
        "seq": W.SelectionSlider(options=seqs, value=min(8192, seqs[-1]), description="sequence", **_style()),
        "batch": W.IntSlider(value=1, min=1, max=64, description="micro-batch", **_style()),
        "attention": _choice(["flash", "eager"], "flash", "attention"),
        "recompute": _choice(["none", "selective", "full"], "none", "recompute"),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "zero3_gpus": W.Dropdown(options=[1, 2, 4, 8, 16, 32, 64], value=8, description="states over",
                                 **_style()),
        "stack": _choice(["fused", "hf"], "fused", "stack"),
        "precision": W.Dropdown(options=["bf16-mixed", "bf16-amp", "bf16-mixed-fp32-grads", "fp32"],
                                value="bf16-mixed", description="recipe", **_style()),
        "dropout": W.Checkbox(value=False, description="dropout", **_style()),
    }
    box = Dashboard(charts.render_activation_memory, controls, name="activation_memory_widget",
                    keep=KEPT_ANSWERS)
    _follow_max_seq(box, "seq", _SEQS, int)
    return box


#: The loss control of :func:`max_micro_batch_widget`: a label a reader knows for each of
#: :data:`llmsizing.footprint.LOSS_KINDS` (bytes per logit kept by the forward + written by the backward).
LOSS_LABELS = {"fp32": "fp32 upcast", "bf16": "bf16 (no upcast)", "compiled": "compiled (torchtitan)"}


def max_micro_batch_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 4b: the largest micro-batch that fits a GPU as sequence length grows, for each recompute level
    and attention kernel; the ``loss`` control is :func:`llmsizing.memory.max_micro_batch`'s (the fp32 upcast,
    12 bytes a logit at the loss backward, by default; torchtitan's compiled loss, 4)."""
    from ..footprint import LOSS_KINDS
    from ..precision import RECIPES

    get_model(model)
    controls = {
        "model": W.Dropdown(options=_dense_models(model), value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "precision": W.Dropdown(options=list(RECIPES), value="bf16-mixed", description="precision",
                                **_style()),
        "zero3_gpus": W.Dropdown(options=[1, 2, 4, 8, 16, 32, 64], value=8, description="states over",
                                 **_style()),
        "stack": _choice(["fused", "hf"], "fused", "stack"),
        "dropout": W.Checkbox(value=False, description="dropout", **_style()),
        "loss": W.Dropdown(options=[(LOSS_LABELS[k], k) for k in LOSS_KINDS], value="fp32",
                           description="loss", **_style(),
                           tooltip="how the cross-entropy is computed: what its backward holds per logit"),
    }
    return Dashboard(charts.render_max_micro_batch, controls, name="max_micro_batch_widget",
                     keep=KEPT_ANSWERS)

