"""Part V, "The models of 2026": the widget of chapter 18.

* chapter 18, :func:`moe_layout_widget`: pick a mixture of experts, a GPU and a layout with expert parallelism
  (ep, tp, pp, dp, ZeRO, recomputation, micro-batches, the token dispatcher) and see the memory per GPU and
  where the step's time goes (compute, the all-to-all, the bubble).
"""

from __future__ import annotations

import ipywidgets as W

from .. import charts
from ..all_to_all import DISPATCHERS
from ..catalog import get_model, list_gpus, list_models
from .controls import _choice, _nearest, _reroute, _set_quietly, _style
from .dashboard import KEPT_ANSWERS, Dashboard

#: The expert-parallel degrees the widget can offer: powers of two up to 256 (DeepSeek-V3's routed experts).
#: The slider shows those that divide the chosen model's routed experts (:func:`_eps_for`); one that does not
#: divide the layout's tp x dp GPUs shows the library's refusal.
MOE_EPS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def _eps_for(model) -> list[int]:
    """The degrees of :data:`MOE_EPS` that divide ``model``'s routed experts (Mixtral's 8: 1 to 8)."""
    experts = get_model(model).experts
    return [e for e in MOE_EPS if experts % e == 0]

#: The data-parallel degrees the widget offers: 1 to 4,096 (DeepSeek-V3 trained with 128).
MOE_DPS = tuple(2**k for k in range(13))


def moe_layout_widget(model: str = "mixtral-8x7b") -> Dashboard:
    """Chapter 18: mixture of experts x GPU x ep, tp, pp, dp, ZeRO stage, recomputation, micro-batch,
    micro-batches per step, the share of the all-to-all hidden (DeepSeek's DualPipe) and the token dispatcher
    (:data:`~llmsizing.all_to_all.DISPATCHERS`: Megatron-Core's ``alltoall`` or DeepEP's) -> the memory of the
    most loaded GPU of each stage and the step's time (:func:`~llmsizing.charts.render_moe_layout`). Starts at
    :data:`~llmsizing.charts.MOE_LAYOUT_DEFAULT` (the chapter's checked figure). A layout the library refuses
    (``ep`` that does not divide the experts or the layout's GPUs, ``tp`` that does not divide the heads,
    ZeRO-3 with ``ep > 1``...) shows its message instead of a figure."""
    d = charts.MOE_LAYOUT_DEFAULT
    if not get_model(model).is_moe:
        raise ValueError(f"model {model!r} is dense (experts=0): this widget draws mixtures of experts "
                         f"({', '.join(list_models(moe=True))})")
    controls = {
        "model": W.Dropdown(options=list_models(moe=True), value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value=d["gpu"], description="GPU", **_style()),
        "ep": W.SelectionSlider(options=_eps_for(model), value=_nearest(_eps_for(model), d["ep"]),
                                description="ep (experts)", **_style()),
        "tp": _choice([1, 2, 4, 8], d["tp"], "tp"),
        "pp": W.SelectionSlider(options=[1, 2, 4, 8, 16], value=d["pp"], description="pp", **_style()),
        "dp": W.SelectionSlider(options=list(MOE_DPS), value=d["dp"], description="dp", **_style()),
        "zero": _choice([0, 1, 2], d["zero"], "ZeRO stage"),
        "recompute": _choice(["none", "selective", "full"], d["recompute"], "recompute"),
        "batch": _choice([1, 2, 4], d["batch"], "micro-batch"),
        "grad_accum": W.SelectionSlider(options=[1, 2, 4, 8, 16, 32, 64, 128], value=d["grad_accum"],
                                        description="micro-batches", **_style()),
        "ep_overlap": W.FloatSlider(min=0.0, max=1.0, step=0.25, value=d["ep_overlap"],
                                    description="all-to-all hidden", readout_format=".0%", **_style()),
        "dispatcher": _choice(list(DISPATCHERS), d["dispatcher"], "dispatcher"),
    }

    def render(model, gpu, ep, tp, pp, dp, zero, recompute, batch, grad_accum, ep_overlap, dispatcher,
               into=None):
        return charts.render_moe_layout(model, gpu, tp=tp, pp=pp, dp=dp, ep=ep, zero=zero,
                                        recompute=recompute, batch=batch, seq=d["seq"], grad_accum=grad_accum,
                                        ep_overlap=ep_overlap, dispatcher=dispatcher, into=into)

    box = Dashboard(render, controls, keep=KEPT_ANSWERS)     # (a function of the controls' values)
    slider, wanted = box.controls["ep"], {"value": box.controls["ep"].value}

    def on_ep(change):
        wanted["value"] = change["new"]

    def on_model(change):
        # the ep slider offers the new model's divisors; the degree the reader chose comes back when it
        # divides
        allowed = _eps_for(change["new"])
        value = max([e for e in allowed if e <= wanted["value"]], default=allowed[0])
        _set_quietly(box, slider, on_ep, options=allowed, value=value)
        box.update()

    slider.observe(on_ep, names="value")
    _reroute(box, on_model, ("model",))
    return box
