"""The peak of a whole training step, measured: the library's step model
(:func:`~llmsizing.memory.training_memory`, its phases and peak) against the live bytes PyTorch held over one
training step of real Hugging Face models and of the measurement tool's fused stand-ins, committed in
``data/step_measurements.csv`` (chapter 5, "Measure it yourself"; the step's phases in chapter 4), and the one
constant fitted on them, the backward's working set (:data:`~llmsizing.memory.LAYER_WORKING_SET`), refitted on
held-out families and lengths and swept for chapter 5's widget.

The CSVs are written by ``tools/measure_memory.py step`` (and its ``mask``, ``swiglu`` and ``loss-peak``
probes; needs torch, an optional extra). This module only reads them, so the book and the tests run without
torch. :mod:`llmsizing.measurements` (the per-layer activation measurements) re-exports every name here.
Errors are ``(predicted - measured) / measured``: positive means the library over-estimates.
"""

from __future__ import annotations

import functools

from ._validate import check_int, check_number
from .catalog import DATA_DIR
from .model import Model

_BOOL = {"True": True, "False": False, True: True, False: False}


# ============================================================================= the peak of a whole step
#: Written by ``tools/measure_memory.py step``: live bytes over one training step of real Hugging Face models
#: (``stack == "hf"``) and of the measurement tool's own fused-stack stand-ins (``stack == "fused"``).
STEP_CSV = DATA_DIR / "step_measurements.csv"
STEP_TIMELINE_CSV = DATA_DIR / "step_timeline_example.csv"
STEP_SAVED_TENSORS_CSV = DATA_DIR / "step_saved_tensors.csv"
#: Issue 26 (``tools/measure_memory.py mask``): the storages one decoder layer of a small HF Llama saves
#: without an attention mask, with an all-ones one and with a padded batch's
#: (:func:`~llmsizing.activations.masked_sdpa_extra_bytes`).
MASKED_SDPA_CSV = DATA_DIR / "masked_sdpa.csv"
#: Issue 26 (``tools/measure_memory.py swiglu``): what Megatron-LM's own fused ``SwiGLUFunction`` saves, run
#: from a checkout between two matrix multiplies, against the unfused ``F.silu(gate) * up``.
FUSED_SWIGLU_CSV = DATA_DIR / "fused_swiglu_saved.csv"
#: Issue 38 (``tools/measure_tp_saved.py``): what autograd saves on one rank for a torchtitan Llama block
#: split by torchtitan's tensor-parallel plan over gloo (tp 1, 2, 4, with and without sequence parallelism),
#: no recomputation; one row per kind of saved storage (module, producer, dtype, local shape).
TP_SAVED_CSV = DATA_DIR / "tp_saved.csv"
#: Issue 22's probe (``tools/measure_memory.py loss-peak``): HF GPT-2 fp32 steps at 512 and 1,024 tokens, at
#: the sweep's shape and at the real 124M shape (the ``step`` columns), and every storage alive at the op
#: where each step's loss backward peaks (op, module, size, count).
GPT2_LOSS_PEAK_STEPS_CSV = DATA_DIR / "gpt2_loss_peak_steps.csv"
GPT2_LOSS_PEAK_TENSORS_CSV = DATA_DIR / "gpt2_loss_peak_tensors.csv"

#: The recipe each measured mode is: pure bf16 keeps AdamW's moments in bf16 (PyTorch keeps a parameter's
#: state in its dtype); autocast trains fp32 weights.
STEP_RECIPES = {"fp32": "fp32", "bf16": "bf16", "autocast-bf16": "bf16-amp"}
_ATTENTION = {"eager": "eager", "sdpa": "flash"}
_IMPL = {"foreach": "foreach", "forloop": "for-loop", "for-loop": "for-loop", "fused": "fused"}
_ACTIVATION = {"gelu_tanh": "gelu_pytorch_tanh"}

#: The measured phases compared with the library's (:data:`llmsizing.memory.PHASES`): the measurement splits
#: the loss backward in two (until the logits' gradient exists, then the LM head and final norm).
STEP_PHASE_COLUMNS = {"forward": ["forward_end_bytes"],
                      "loss backward": ["loss_backward_max_bytes", "head_backward_max_bytes"],
                      "backward": ["backward_max_bytes"], "optimizer step": ["optimizer_max_bytes"]}


def load_steps(path=None):
    """The committed whole-step measurements as a DataFrame (one row per configuration)."""
    import pandas as pd

    df = pd.read_csv(path or STEP_CSV)
    for c in ("gated_mlp", "bias", "qkv_bias", "learned_pos", "tied_embeddings"):
        df[c] = df[c].map(_BOOL)
    return df


#: The loss's two moments above what the forward left (:func:`loss_bytes_per_logit`): its forward's peak (the
#: logits upcast to fp32, ``log_softmax``) and its backward's (the gradients of the log-probabilities and of
#: the logits).
LOSS_MOMENTS = {"forward": "loss_forward_max_bytes", "backward": "loss_backward_max_bytes"}


def loss_bytes_per_logit(df=None, moment: str = "backward"):
    """Each measured step's (:func:`load_steps`, or ``df``) bytes per logit the loss adds on top of what the
    forward left, at its ``moment`` (:data:`LOSS_MOMENTS`): ``(peak - forward_end_bytes) / (batch x seq x
    vocab)``, a pandas Series. The library counts 8 bytes per logit for the backward
    (:data:`~llmsizing.memory.LOSS_BACKWARD_BYTES_PER_LOGIT`, chapter 4b); the forward's peak never sets the
    step's (chapter 5)."""
    from ._validate import check_choice

    col = LOSS_MOMENTS[check_choice("moment", moment, tuple(LOSS_MOMENTS))]
    df = load_steps() if df is None else df
    return (df[col] - df["forward_end_bytes"]) / (df["batch"] * df["seq"] * df["vocab"])


def optimizer_temporary_bytes_per_param(df=None):
    """Each measured step's (:func:`load_steps`, or ``df``) bytes per parameter that the optimizer step holds
    above what it leaves: ``(optimizer_max_bytes - optimizer_end_bytes) / n_params``, a pandas Series. The
    library counts one state-sized temporary per parameter for ``foreach`` AdamW, two copies of the largest
    tensor for the for-loop and none for ``fused`` (:func:`~llmsizing.memory.training_memory`'s
    ``optimizer_impl``; chapters 4b and 5)."""
    df = load_steps() if df is None else df
    return (df["optimizer_max_bytes"] - df["optimizer_end_bytes"]) / df["n_params"]


def step_model(row) -> Model:
    """The :class:`~llmsizing.model.Model` a step row was measured on (the tool builds the HF config and the
    fused stand-in from the same shape)."""
    act = str(row["activation"])
    return Model(str(row["model"]), layers=int(row["layers"]), hidden=int(row["hidden"]),
                 heads=int(row["heads"]), kv_heads=int(row["kv_heads"]), head_dim=int(row["head_dim"]),
                 ffn_hidden=int(row["ffn"]), vocab=int(row["vocab"]), gated_mlp=bool(row["gated_mlp"]),
                 tied_embeddings=bool(row["tied_embeddings"]), norm=str(row["norm"]), bias=bool(row["bias"]),
                 qkv_bias=bool(row["qkv_bias"]), learned_pos=bool(row["learned_pos"]),
                 max_seq=int(row["max_seq"]), activation=_ACTIVATION.get(act, act))


def predict_step(row):
    """The library's :func:`~llmsizing.memory.training_memory` for a measured row (no overhead allowance: the
    measurement counts tensors only)."""
    from .memory import training_memory

    return training_memory(step_model(row), batch=int(row["batch"]), seq=int(row["seq"]),
                           precision=STEP_RECIPES[row["mode"]], optimizer="adamw",
                           attention=_ATTENTION[row["attention"]], recompute=str(row["recompute"]),
                           stack=str(row["stack"]), optimizer_impl=_IMPL[str(row["optimizer_impl"])],
                           overhead_bytes=0.0)


def step_group(row) -> str:
    """``"<stack> <mode> <attention> <recompute>"``, the grouping of the closing table."""
    return f"{row['stack']} {row['mode']} {row['attention']} {row['recompute']}"


def compare_steps(df=None):
    """Each measured step with the library's phases and peak, and the relative errors
    (``(predicted - measured) / measured``): ``peak_error`` and ``<phase>_error`` for each of
    :data:`STEP_PHASE_COLUMNS`. Adds ``predicted_peak_bytes``, ``predicted_peak_phase``, ``group``."""
    df = load_steps() if df is None else df.copy()
    preds = [predict_step(r) for _, r in df.iterrows()]
    df["group"] = [step_group(r) for _, r in df.iterrows()]
    df["predicted_peak_bytes"] = [t.peak_bytes for t in preds]
    df["predicted_peak_phase"] = [t.peak_phase for t in preds]
    df["peak_error"] = df["predicted_peak_bytes"] / df["peak_bytes"] - 1
    for phase, cols in STEP_PHASE_COLUMNS.items():
        key = phase.replace(" ", "_")
        measured = df[cols].max(axis=1)
        df[f"measured_{key}_bytes"] = measured
        df[f"predicted_{key}_bytes"] = [t.phases_bytes[phase] for t in preds]
        df[f"{key}_error"] = df[f"predicted_{key}_bytes"] / measured - 1
    return df


def worst_step_errors(df=None, by=("stack", "mode", "attention", "recompute")):
    """The worst (largest absolute, signed) peak error per group, with the number of configurations."""
    import pandas as pd

    df = compare_steps() if df is None else df
    rows = []
    for key, sub in df.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        i = sub["peak_error"].abs().idxmax()
        rows.append({**dict(zip(by, key)), "configs": len(sub), "worst_peak_error": sub.loc[i, "peak_error"],
                     "mean_peak_error": sub["peak_error"].mean()})
    return pd.DataFrame(rows).set_index(list(by))



#: The splits :func:`held_out_step_errors` knows: a whole model family kept out of the fit, or the longest
#: sequences (extrapolation in ``s``).
HELD_OUT_SPLITS = {"model": ("model_class", "Qwen2ForCausalLM"), "seq": ("seq", 512)}


def _working_set_terms(df=None):
    """The Hugging Face step rows with what the working-set fits need: one layer's saved bytes, the predicted
    and measured backward phases, and the highest other predicted phase (shared by
    :func:`held_out_step_errors` and :func:`working_set_fit`)."""
    import numpy as np

    from .activations import layer_terms
    from .precision import RECIPES

    df = compare_steps(df if df is not None else load_steps()[lambda d: d["stack"] == "hf"])
    layer = []
    for _, r in df.iterrows():
        recipe = RECIPES[STEP_RECIPES[r["mode"]]]
        layer.append(sum(layer_terms(step_model(r), batch=int(r["batch"]), seq=int(r["seq"]),
                                     dtype="bf16" if recipe.autocast else recipe.weights,
                                     attention=_ATTENTION[r["attention"]], stack="hf",
                                     autocast=recipe.autocast).values()))
    other = df[[f"predicted_{k.replace(' ', '_')}_bytes" for k in STEP_PHASE_COLUMNS
                if k != "backward"]].max(axis=1)
    return (df, np.array(layer), df["predicted_backward_bytes"].to_numpy(),
            df["measured_backward_bytes"].to_numpy(), other.to_numpy())


#: The working sets a refit tries: 0 to 1 layer in steps of 0.005.
WORKING_SET_GRID_STEPS = 200


def _minimax_working_set(layer, bwd_pred, bwd_meas):
    """The grid value of the working set whose largest backward-phase error (in size) over the rows is
    smallest, and that error. The prediction moves by ``(w - LAYER_WORKING_SET) x`` one layer's saved
    bytes."""
    import numpy as np

    from .memory import LAYER_WORKING_SET

    grid = np.linspace(0.0, 1.0, WORKING_SET_GRID_STEPS + 1)
    errs = (bwd_pred[None, :] + (grid[:, None] - LAYER_WORKING_SET) * layer[None, :]) / bwd_meas[None, :] - 1
    worst = np.abs(errs).max(axis=1)
    return float(grid[worst.argmin()]), float(worst.min())


def held_out_step_errors(split: str = "model", df=None):
    """The Hugging Face model's errors on configurations its fitted constant never saw (issue 26).

    One constant of :func:`~llmsizing.memory.training_memory` is fitted to ``data/step_measurements.csv``: the
    backward's working set, :data:`~llmsizing.memory.LAYER_WORKING_SET` layers. This refits it on part of the
    ``stack == "hf"`` rows only and scores the rest: ``split="model"`` keeps Qwen2 out (fitted on Llama and
    GPT-2), ``split="seq"`` the 512-token rows (fitted on 128 and 256). The refit is the value in 0..1 (steps
    of 0.005) that makes the largest backward-phase error on the fitted rows smallest; the predicted backward
    moves by ``(w - 0.5) x`` one layer's saved bytes (the working set sits on both ends of the backward). The
    8 bytes per logit of the loss's backward are not refitted: they are read off the tensors, not tuned.

    Returns a DataFrame indexed by ``part`` (``"fit"``, ``"held out"``) with ``configs``, ``working_set`` (the
    refitted value), ``worst_backward_error`` and ``worst_peak_error`` (signed, largest in size)."""
    import numpy as np
    import pandas as pd

    from .memory import LAYER_WORKING_SET

    if split not in HELD_OUT_SPLITS:
        raise ValueError(f"split must be one of {sorted(HELD_OUT_SPLITS)}, got {split!r}")
    col, value = HELD_OUT_SPLITS[split]
    df, layer, bwd_pred, bwd_meas, other = _working_set_terms(df)
    held = (df[col] == value).to_numpy()
    w, _ = _minimax_working_set(layer[~held], bwd_pred[~held], bwd_meas[~held])
    bwd = bwd_pred + (w - LAYER_WORKING_SET) * layer
    peak_err = np.maximum(bwd, other) / df["peak_bytes"].to_numpy() - 1
    bwd_err = bwd / bwd_meas - 1
    rows = []
    for part, mask in (("fit", ~held), ("held out", held)):
        rows.append({"part": part, "configs": int(mask.sum()), "working_set": w,
                     "worst_backward_error": bwd_err[mask][np.abs(bwd_err[mask]).argmax()],
                     "worst_peak_error": peak_err[mask][np.abs(peak_err[mask]).argmax()]})
    return pd.DataFrame(rows).set_index("part")


def working_set_fit(df=None) -> dict:
    """:data:`~llmsizing.memory.LAYER_WORKING_SET` against every Hugging Face row of
    ``data/step_measurements.csv`` (issue 38, chapter 5): the library takes half a layer; this says what the
    rows themselves ask for.

    Returns a dict: ``configs``; ``working_set``, the minimax refit on all rows (the grid of
    :func:`held_out_step_errors`) and ``worst_backward_error`` there (in size);
    ``library_worst_backward_error``, the same at the library's value; and ``per_row_min``,
    ``per_row_median``, ``per_row_max``: the working set that makes one row's backward phase exact,
    ``LAYER_WORKING_SET + (measured - predicted) / layer``. Without ``df`` the committed CSV's terms are
    worked out once per process (chapter 5's widget asks at every move)."""
    import numpy as np

    from .memory import LAYER_WORKING_SET

    df, layer, bwd_pred, bwd_meas, _ = _kept_working_set_terms() if df is None else _working_set_terms(df)
    w, worst = _minimax_working_set(layer, bwd_pred, bwd_meas)
    per_row = LAYER_WORKING_SET + (bwd_meas - bwd_pred) / layer
    return {"configs": len(df), "working_set": w, "worst_backward_error": worst,
            "library_worst_backward_error": float(np.abs(bwd_pred / bwd_meas - 1).max()),
            "per_row_min": float(per_row.min()), "per_row_median": float(np.median(per_row)),
            "per_row_max": float(per_row.max())}



# ========================================================================= one measured step at a working set
#: What :func:`measured_step` matches, in the order it narrows ``data/step_measurements.csv`` down to one row
#: (chapter 5's widget offers them as its controls).
STEP_KEYS = ("stack", "model", "mode", "attention", "recompute", "optimizer_impl", "batch", "seq")


@functools.cache
def _kept_step_layers():
    """:func:`compare_steps` on the committed CSV, with ``layer_bytes``: what one layer saves as
    :func:`~llmsizing.memory.training_memory` counts its working set (the row's stack and recipe), kept for
    the process: the CSV does not change while it runs (~1 s of predictions, then each
    :func:`step_at_working_set` is arithmetic)."""
    import numpy as np

    from .activations import layer_terms
    from .precision import RECIPES

    df = compare_steps()
    layer = []
    for _, r in df.iterrows():
        recipe = RECIPES[STEP_RECIPES[r["mode"]]]
        layer.append(sum(layer_terms(step_model(r), batch=int(r["batch"]), seq=int(r["seq"]),
                                     dtype="bf16" if recipe.autocast else recipe.weights,
                                     attention=_ATTENTION[r["attention"]], stack=str(r["stack"]),
                                     autocast=recipe.autocast).values()))
    df["layer_bytes"] = np.array(layer)
    return df


def step_at_working_set(working_set: float | None = None):
    """Every committed step (:func:`compare_steps`) with the backward's working set at ``working_set`` layers
    instead of :data:`~llmsizing.memory.LAYER_WORKING_SET` (default: the library's). The predicted backward
    moves by ``(working_set - LAYER_WORKING_SET) x layer_bytes``, as :func:`held_out_step_errors` moves it;
    ``predicted_peak_bytes``, ``predicted_peak_phase``, ``backward_error`` and ``peak_error`` follow.
    Chapter 5's widget: slide the working set and watch the backward phases, and the peaks they hold, move. A
    copy: the caller may change it."""
    import numpy as np

    from .memory import LAYER_WORKING_SET, PHASES

    w = LAYER_WORKING_SET if working_set is None else check_number("working_set", working_set, maximum=1.0)
    df = _kept_step_layers().copy()
    df["working_set"] = w
    df["predicted_backward_bytes"] += (w - LAYER_WORKING_SET) * df["layer_bytes"]
    df["backward_error"] = df["predicted_backward_bytes"] / df["measured_backward_bytes"] - 1
    phases = np.column_stack([df[f"predicted_{p.replace(' ', '_')}_bytes"].to_numpy() for p in PHASES])
    df["predicted_peak_bytes"] = phases.max(axis=1)
    df["predicted_peak_phase"] = [PHASES[i] for i in phases.argmax(axis=1)]    # (the first of two equal)
    df["peak_error"] = df["predicted_peak_bytes"] / df["peak_bytes"] - 1
    return df


def measured_step(working_set: float | None = None, **config):
    """The one committed step matching ``config`` (every key of :data:`STEP_KEYS`: e.g. ``stack="hf",
    model="step-llama", mode="autocast-bf16", attention="sdpa", recompute="none", optimizer_impl="foreach",
    batch=2, seq=512``), as a row of :func:`step_at_working_set` (the library's phases, the measured ones and
    their errors). A configuration the sweep did not measure raises ValueError naming the first key, in the
    order of :data:`STEP_KEYS`, whose value was not measured with the keys before it, and the values that
    were."""
    missing = [k for k in STEP_KEYS if k not in config]
    unknown = sorted(set(config) - set(STEP_KEYS))
    if missing or unknown:
        raise TypeError(f"measured_step needs exactly the keys {', '.join(STEP_KEYS)}; "
                        + (f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(unknown)}"))
    df = step_at_working_set(working_set)
    sel, given = df, []
    for key in STEP_KEYS:
        value = config[key]
        there = sel[sel[key] == value]
        if there.empty:
            offered = ", ".join(repr(getattr(v, "item", lambda v=v: v)()) for v in sorted(sel[key].unique()))
            where = f" with {', '.join(given)}" if given else ""
            raise ValueError(f"{key}={value!r} was not measured{where}: the sweep measured {key} = {offered} "
                             "(data/step_measurements.csv)")
        sel, given = there, given + [f"{key}={value!r}"]
    return sel.iloc[0]


def working_set_curve(points: int = WORKING_SET_GRID_STEPS):
    """The worst backward-phase error (in size) over the Hugging Face rows of ``data/step_measurements.csv``
    for working sets from 0 to 1 layer (``points`` + 1 values): the curve whose lowest point
    :func:`working_set_fit` finds (on its grid). Returns ``(working_sets, worst_errors)``, two arrays."""
    import numpy as np

    points = check_int("points", points, minimum=1, maximum=10_000)
    df, layer, bwd_pred, bwd_meas, _ = _kept_working_set_terms()
    from .memory import LAYER_WORKING_SET

    grid = np.linspace(0.0, 1.0, points + 1)
    errs = (bwd_pred[None, :] + (grid[:, None] - LAYER_WORKING_SET) * layer[None, :]) / bwd_meas[None, :] - 1
    return grid, np.abs(errs).max(axis=1)


def step_backward_errors(row, working_sets):
    """One step's backward-phase error (signed, ``predicted / measured - 1``) at each of ``working_sets``
    (layers): ``row`` is a row of :func:`step_at_working_set` (or :func:`measured_step`), whose prediction
    moves by one layer's saved bytes (``layer_bytes``) per layer of working set. The working set that makes
    this row exact is where the error crosses zero (:func:`working_set_fit`'s ``per_row_*``)."""
    import numpy as np

    w = np.asarray(working_sets, dtype=float)
    if w.size and (not np.isfinite(w).all() or w.min() < 0 or w.max() > 1):
        raise ValueError(f"working_sets must lie in 0 to 1 layer, got {w.min():g} to {w.max():g}")
    bwd = row["predicted_backward_bytes"] + (w - row["working_set"]) * row["layer_bytes"]
    return bwd / row["measured_backward_bytes"] - 1


#: :func:`_working_set_terms` of the committed CSV, kept for the process (chapter 5's widget reads it).
_kept_working_set_terms = functools.cache(_working_set_terms)


# ========================================================================== the appendix's checks (issue 38)
def hf_layer_errors(listing=None, steps=None):
    """One decoder layer of each real Hugging Face model, per ``(model_class, mode, attention)``: the bytes
    :func:`~llmsizing.activations.layer_terms` counts with ``stack="hf"`` against what autograd saved
    (``data/step_saved_tensors.csv``'s ``activation`` rows, deduplicated by storage; parameters and autocast's
    weight copies apart), with ``predicted_bytes``, ``measured_bytes`` and ``error`` (chapters 4 and 5)."""
    import pandas as pd

    from .activations import layer_terms

    listing = pd.read_csv(STEP_SAVED_TENSORS_CSV) if listing is None else listing
    steps = load_steps() if steps is None else steps
    rows = []
    hf = listing[listing["stack"] == "hf"]
    for (cls, mode, att), sub in hf.groupby(["model_class", "mode", "attention"]):
        model = step_model(steps[(steps["stack"] == "hf") & (steps["model_class"] == cls)].iloc[0])
        predicted = sum(layer_terms(model, batch=int(sub["batch"].iloc[0]), seq=int(sub["seq"].iloc[0]),
                                    dtype="fp32" if mode == "fp32" else "bf16", attention=_ATTENTION[att],
                                    stack="hf", autocast=mode == "autocast-bf16").values())
        measured = float(sub.loc[sub["kind"] == "activation", "nbytes"].sum())
        rows.append({"model_class": cls, "mode": mode, "attention": att, "predicted_bytes": predicted,
                     "measured_bytes": measured, "error": predicted / measured - 1})
    return pd.DataFrame(rows)


def autocast_copy_errors(steps=None):
    """The Hugging Face autocast steps of ``data/step_measurements.csv`` with
    :func:`~llmsizing.memory.autocast_copies_bytes` (``predicted_copy_bytes``) against the largest copies
    held over the step (``max_error``, against ``weight_copy_max_bytes``) and those held at the forward's
    end without recomputation (``forward_end_error``; NaN with full recomputation, which frees them:
    chapter 5)."""
    from .memory import autocast_copies_bytes

    steps = load_steps() if steps is None else steps
    amp = steps[(steps["stack"] == "hf") & (steps["mode"] == "autocast-bf16")].copy()
    amp["predicted_copy_bytes"] = [autocast_copies_bytes(step_model(r)) for _, r in amp.iterrows()]
    amp["max_error"] = amp["predicted_copy_bytes"] / amp["weight_copy_max_bytes"] - 1
    amp["forward_end_error"] = (amp["predicted_copy_bytes"] / amp["weight_copy_forward_end_bytes"] - 1).where(
        amp["recompute"] == "none")
    return amp


def masked_sdpa_errors(df=None):
    """Each configuration of ``data/masked_sdpa.csv`` (one decoder layer of a small HF Llama on the SDPA path:
    no mask, an all-ones one, a padded batch's; fp32, bf16, autocast) with
    :func:`~llmsizing.activations.layer_terms` (``stack="hf"``, ``attention_mask`` where HF passed the mask
    on) as ``predicted_bytes`` against the storages the layer saved (``saved_layer_bytes``), and ``error``
    (chapter 5; the appendix's padded-batch entry)."""
    import pandas as pd

    from .activations import layer_terms

    df = pd.read_csv(MASKED_SDPA_CSV) if df is None else df.copy()
    df["mask_passed"] = df["mask_passed"].map(_BOOL)
    df["predicted_bytes"] = [sum(layer_terms(
        Model(str(r["model"]), layers=int(r["layers"]), hidden=int(r["hidden"]), heads=int(r["heads"]),
              kv_heads=int(r["kv_heads"]), head_dim=int(r["head_dim"]), ffn_hidden=int(r["ffn"]),
              vocab=int(r["vocab"]), gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=512),
        batch=int(r["batch"]), seq=int(r["seq"]), dtype="fp32" if r["mode"] == "fp32" else "bf16",
        attention="flash", stack="hf", autocast=r["mode"] == "autocast-bf16",
        attention_mask=bool(r["mask_passed"])).values()) for _, r in df.iterrows()]
    df["error"] = df["predicted_bytes"] / df["saved_layer_bytes"] - 1
    return df


def tp_saved_errors(df=None):
    """Korthikanti et al. 2022's count under tensor and sequence parallelism
    (:func:`~llmsizing.activations.activation_memory`'s ``per_layer_bytes``, ``tp``, ``sp``) against the bytes
    one rank of a torchtitan Llama block saved without recomputation (``data/tp_saved.csv``; the appendix's
    "Tensor/sequence parallelism" entry): one row per ``(tp, sp)`` with ``measured_bytes``,
    ``predicted_bytes``, ``error`` and the gap's parts, by hand from the block's code (``p`` = 2 bytes,
    ``t`` = tp, ``r`` = t with sp, else 1):

    * ``norm_copies``: each eager RMSNorm keeps an fp32 copy of its input and the normalised tensor cast back
      where the fused kernel keeps its input: ``2 x 4 s b h / r``;
    * ``repeat_kv``: K and V repeated to the query heads before SDPA: ``2 p s b (a - g) d / t``;
    * ``silu_out``: the eager SwiGLU's SiLU output, which the fused kernel recomputes: ``p s b f / t``;
    * ``rope_table``: the complex64 ``freqs_cis`` the rotary multiply saves, ``8 s d / 2``, whole on every
      rank (one table for all of a model's layers);
    * ``sp_gathered``: with sp, the all-gathered inputs of the attention's and MLP's matmuls, which DTensor
      keeps (Megatron-LM keeps the shard and gathers again in the backward): ``2 p s b h (1 - 1/t)``.

    ``untraced_bytes`` is what is left. None of the parts is the CPU's: the CPU flash kernel saves what CUDA's
    does (Q, K, V, output, fp32 log-sum-exp). ``torchtitan_bytes``: ``stack="torchtitan"``'s count of the
    block, its ``per_layer_bytes`` plus RoPE's table (:mod:`llmsizing.titan_terms`), adding these parts."""
    import pandas as pd

    from .activations import activation_memory
    from .titan_terms import rope_table_bytes

    df = pd.read_csv(TP_SAVED_CSV) if df is None else df.copy()
    keys = ["tp", "sp", "batch", "seq", "hidden", "heads", "kv_heads", "ffn_hidden"]
    out = df.groupby(keys, as_index=False, sort=False)["bytes"].sum()
    out = out.rename(columns={"bytes": "measured_bytes"})
    rows = []
    for r in out.itertuples():
        m = Model("tiny-titan", layers=1, hidden=r.hidden, heads=r.heads, kv_heads=r.kv_heads,
                  ffn_hidden=r.ffn_hidden, vocab=2048, gated_mlp=True, tied_embeddings=False, norm="rmsnorm",
                  max_seq=r.seq)
        t, sp, sb, p, d = int(r.tp), bool(r.sp), r.batch * r.seq, 2, m.head_dim
        parts = dict(norm_copies=2 * 4 * sb * r.hidden // (t if sp else 1),
                     repeat_kv=2 * p * sb * (r.heads // t - max(r.kv_heads // t, 1)) * d,
                     silu_out=p * sb * r.ffn_hidden // t, rope_table=8 * r.seq * d // 2,
                     sp_gathered=2 * p * sb * r.hidden * (t - 1) // t if sp else 0)
        pred = activation_memory(m, batch=int(r.batch), seq=int(r.seq), tp=t, sp=sp).per_layer_bytes
        titan = (activation_memory(m, batch=int(r.batch), seq=int(r.seq), tp=t, sp=sp, stack="torchtitan")
                 .per_layer_bytes + rope_table_bytes(m, seq=int(r.seq)))
        rows.append(dict(predicted_bytes=pred, **parts, traced_bytes=sum(parts.values()),
                         torchtitan_bytes=titan))
    out = pd.concat([out, pd.DataFrame(rows)], axis=1)
    out["error"] = out["predicted_bytes"] / out["measured_bytes"] - 1
    out["untraced_bytes"] = out["measured_bytes"] - out["predicted_bytes"] - out["traced_bytes"]
    return out
