"""Part II, "Many GPUs": the widgets of chapters 6-8 (chapter 9's is in :mod:`.measure_split`).

* chapter 6, :func:`decode_roofline_widget`: one decode step's memory and compute bounds against the batch;
* chapter 7, :func:`zero_stages_widget`: the model states on each GPU for ZeRO stages 0-3;
* chapter 8, :func:`parallel_explorer_widget`: a whole layout (tp, pp, dp, ZeRO, ...): memory by stage and
  step time.
"""

from __future__ import annotations

import ipywidgets as W

from .. import charts
from ..catalog import get_model, list_gpus
from ..hardware import kernel_efficiency
from .controls import _SEQS, _choice, _dense_models, _follow_max_seq, _style, _up_to_max_seq
from .dashboard import KEPT_ANSWERS, Dashboard


# =========================================================================== chapter 6: the decode roofline
def decode_roofline_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 6: model x GPU x context x batch x weight format -> one decode step's memory and compute bounds
    against the batch size (:func:`llmsizing.charts.render_decode_roofline`)."""
    get_model(model)
    controls = {
        "model": W.Dropdown(options=_dense_models(model), value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "context": W.SelectionSlider(options=[128, 512, 1024, 2048, 4096, 8192, 32768, 131072], value=4096,
                                     description="context", **_style()),
        "batch": W.SelectionSlider(options=[2**i for i in range(11)], value=1, description="batch",
                                   **_style()),
        "weights": _choice(["bf16", "fp8", "int4"], "bf16", "weights"),
    }
    return Dashboard(charts.render_decode_roofline, controls, name="decode_roofline_widget",
                     keep=KEPT_ANSWERS)


# =========================================================================== chapter 7: ZeRO stages
def zero_stages_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 7: model x data-parallel degree x recipe x optimizer x GPU -> the model states on each GPU for
    ZeRO stages 0-3 (:func:`~llmsizing.charts.render_zero_stages`)."""
    from ..precision import OPTIMIZERS, RECIPES

    controls = {
        "model": W.Dropdown(options=_dense_models(model), value=model, description="model", **_style()),
        "dp": W.Dropdown(options=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], value=8,
                         description="data par. (dp)", **_style()),
        "precision": W.Dropdown(options=list(RECIPES), value="bf16-mixed", description="recipe", **_style()),
        "optimizer": W.Dropdown(options=list(OPTIMIZERS), value="adamw", description="optimizer", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
    }
    return Dashboard(charts.render_zero_stages, controls, name="zero_stages_widget", keep=KEPT_ANSWERS)


# =========================================================================== chapter 8: parallelism explorer
def parallel_explorer_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 8 (Part II): model x GPU x layout (tp, pp, dp, ZeRO stage, sequence parallelism, virtual
    stages, offload) x recompute x micro-batch x sequence x micro-batches per step -> the most loaded GPU's
    memory, stage by stage, against capacity, and the step time (compute on the slowest stage at the kernel
    efficiency, bubble, each group's communication in full and the part the step waits for; optionally async
    TP, or Megatron-LM's backward TP overlap), with the MFU that results. An impossible layout shows the
    library's message (which rule it breaks and what the engines do)."""
    from ..frameworks import TP_BACKWARD_OVERLAP, stack_family
    from ..parallel import OFFLOADS

    seqs = _up_to_max_seq(_SEQS, get_model(model))
    controls = {
        "model": W.Dropdown(options=_dense_models(model), value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "tp": W.Dropdown(options=[1, 2, 4, 8, 16], value=1, description="tensor (tp)",
                          tooltip="tensor (tp): the tensor-parallel degree, GPUs that split each layer's "
                                  "matrices",
                          **_style()),
        "pp": W.Dropdown(options=[1, 2, 4, 8, 16], value=1, description="pipeline (pp)", **_style()),
        "dp": W.Dropdown(options=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512], value=8,
                         description="data par. (dp)", **_style()),
        "zero": _choice([0, 1, 2, 3], 1, "ZeRO stage"),
        "sp": W.Checkbox(value=False, description="sequence parallel",
                          tooltip="sequence parallel: splits the norms' and dropout's activations along the "
                                  "sequence over the tensor-parallel group (needs tp > 1)", **_style()),
        "virtual_stages": W.Dropdown(options=[1, 2, 4], value=1, description="virtual stages", **_style()),
        "offload": W.Dropdown(options=list(OFFLOADS), value="none", description="offload", **_style()),
        "recompute": _choice(["none", "selective", "full"], "selective", "recompute"),
        "batch": W.IntSlider(value=1, min=1, max=32, description="micro-batch", **_style()),
        "seq": W.SelectionSlider(options=seqs, value=min(4096, seqs[-1]), description="sequence", **_style()),
        "grad_accum": W.Dropdown(options=[(f"{n} per step", n) for n in (1, 2, 4, 8, 16, 32, 64)], value=8,
                                 description="micro-batches",
                                 tooltip="micro-batches per step (gradient accumulation)",
                                 **_style()),
        "kernel_efficiency": W.FloatSlider(value=round(kernel_efficiency("H100 SXM"), 2), min=0.1, max=0.9,
                                           step=0.05, description="kernel eff.",
                                           tooltip="kernel eff.: kernel efficiency, the share of the GPU's "
                                                   "dense peak its matrix multiplies reach", **_style()),
        "async_tp": W.Checkbox(value=False, description="async TP (overlapped)",
                                tooltip="async TP (overlapped): the tensor-parallel communication hidden "
                                        "behind compute",
                                **_style()),
        "tp_backward_overlap": W.Checkbox(
            value=TP_BACKWARD_OVERLAP[stack_family(None)], description="backward TP overlap",
            tooltip="backward TP overlap: the backward's tensor-parallel collectives hidden behind the "
                    "column-parallel layers' GEMMs, as Megatron-LM and Transformer Engine do by default "
                    "(off: the library's default with no stack named)", **_style()),
    }
    box = Dashboard(charts.render_parallel_explorer, controls, name="parallel_explorer_widget",
                    keep=KEPT_ANSWERS)
    _follow_max_seq(box, "seq", _SEQS, int)
    return box

