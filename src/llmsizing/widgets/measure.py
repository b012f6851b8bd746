"""Part I, "One GPU": the widget of chapter 5 ("Measure it yourself").

* chapter 5, :func:`measured_step_widget`: pick one step of the committed sweep
  (``data/step_measurements.csv``: a real Hugging Face model or the tool's fused stand-ins, the precision, the
  attention kernel, recomputation, the AdamW implementation, batch and sequence) and see each phase measured
  against the library's; slide the backward's working set and see that phase move, here and over all the
  Hugging Face runs. A setting the sweep did not measure shows the library's message, naming the control,
  instead of a figure.

Its one top-level name is the factory (``llmsizing.widgets`` re-exports it).
"""

from __future__ import annotations

import ipywidgets as W

from .. import charts
from .controls import _choice, _style
from .dashboard import KEPT_ANSWERS, Dashboard


def measured_step_widget() -> Dashboard:
    """Chapter 5: stack x model x precision x attention x recomputation x AdamW x batch x sequence x working
    set -> one measured training step, phase by phase, against :func:`~llmsizing.memory.training_memory`
    (:func:`~llmsizing.charts.render_measured_step`, reading
    :func:`~llmsizing.measurements.measured_step`). Starts at
    :data:`~llmsizing.charts.MEASURED_STEP_DEFAULT` (the chapter's step timeline and the checked figure
    beside the widget). The choices are the values the sweep measured; a combination it did not measure (the
    for-loop and fused AdamW were run at 2 x 256 tokens only, recomputation from 256 tokens) shows
    :func:`~llmsizing.measurements.measured_step`'s message, which names the control and the values measured
    with the others."""
    from ..measurements import load_steps
    from ..memory import LAYER_WORKING_SET

    d = charts.MEASURED_STEP_DEFAULT
    steps = load_steps()

    def offered(key):                     # the values the sweep measured, in order
        return sorted(v.item() if hasattr(v, "item") else v for v in steps[key].unique())

    controls = {
        "stack": _choice(offered("stack")[::-1], d["stack"], "stack"),            # hf first
        "model": W.Dropdown(options=offered("model"), value=d["model"], description="model", **_style()),
        "mode": W.Dropdown(options=["fp32", "bf16", "autocast-bf16"], value=d["mode"],
                           description="precision", **_style()),
        "attention": _choice(offered("attention"), d["attention"], "attention"),
        "recompute": _choice(["none", "full"], d["recompute"], "recompute"),
        "optimizer_impl": _choice(["foreach", "forloop", "fused"], d["optimizer_impl"], "AdamW"),
        "batch": _choice(offered("batch"), d["batch"], "micro-batch"),
        "seq": _choice(offered("seq"), d["seq"], "sequence"),
        "working_set": W.FloatSlider(min=0.0, max=1.0, step=0.05, value=LAYER_WORKING_SET,
                                     description="working set", readout_format=".2f",
                                     tooltip="working set: the layers' worth of saved bytes the backward "
                                             "holds beside a layer's gradients (the library: "
                                             f"{LAYER_WORKING_SET:g})", **_style()),
    }
    return Dashboard(charts.render_measured_step, controls, keep=KEPT_ANSWERS)
