"""Part IV, "Serving and fine-tuning": the widgets of chapters 15 and 16.

* chapter 15, :func:`serving_widget`: TTFT, ITL, throughput and cost per million tokens of a served model;
  :func:`fleet_widget`: the GPUs a load needs at a percentile SLO, co-located or disaggregated (issue 37);
* chapter 16, :func:`finetune_widget`: will a (LoRA) fine-tune fit on the GPU I have, and with what batch?
"""

from __future__ import annotations

import ipywidgets as W

from .. import charts
from ..catalog import get_model, list_gpus
from .controls import _choice, _dense_models, _follow_max_seq, _style, _up_to_max_seq
from .dashboard import KEPT_ANSWERS, Dashboard


# =========================================================================== chapter 15: serving
def serving_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 15: model x GPU x weight format x tensor parallelism x prompt/output lengths x batch -> TTFT,
    ITL, throughput and cost per million tokens, with the latency/throughput curve and the roofline point
    (:func:`llmsizing.charts.render_serving_curve`). Each figure of the summary is "point (low-high)" and the
    curve carries a shaded band: the stated 80% range (:func:`llmsizing.serve.serving_ends`; issue 34). A
    layout that does not fit shows the library's message."""
    from ..serve import WEIGHT_FORMATS

    get_model(model)
    controls = {
        "model": W.Dropdown(options=_dense_models(model), value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "weights": _choice([w for w in WEIGHT_FORMATS if w != "fp16"], "bf16", "weights"),
        "tp": W.Dropdown(options=[1, 2, 4, 8], value=1, description="tensor (tp)",
                          tooltip="tensor (tp): the tensor-parallel degree, GPUs that split each layer's "
                                  "matrices",
                          **_style()),
        "prompt": W.SelectionSlider(options=[128, 256, 512, 1024, 2048, 4096, 8192, 32768], value=1024,
                                    description="prompt", **_style()),
        "output": W.SelectionSlider(options=[16, 64, 128, 256, 512, 1024, 4096], value=256,
                                    description="output", **_style()),
        "batch": W.SelectionSlider(options=[2**i for i in range(12)], value=16, description="batch",
                                   **_style()),
    }
    return Dashboard(charts.render_serving_curve, controls, name="serving_widget", keep=KEPT_ANSWERS)


#: The fleet widget's loads (concurrent users) and percentiles.
FLEET_USERS = [10, 100, 300, 1000, 3000, 10000]
FLEET_PERCENTILES = [50, 90, 95, 99]
#: How many of its fleet answers (one plan of one setting) a fleet widget keeps.
FLEET_CACHED = 96


def fleet_widget(model: str = "llama-3-70b") -> Dashboard:
    """Chapter 15: model x GPU x weights x users x prompt/output x ITL and TTFT targets x percentile x prefix
    hit rate -> GPUs at the mean, at the percentile, and with prefill and decode apart
    (:func:`llmsizing.charts.render_fleet`). A target no layout meets shows the library's message.

    Each of the three plans is kept per setting (the last :data:`FLEET_CACHED`, as the planner widgets keep
    theirs): going back to a setting, or moving only the percentile (the mean plan stays), searches no layout
    again (issue 38). Prices are those in force when a plan was first computed (:func:`~llmsizing.use_prices`
    applies to what is computed after it)."""
    import functools

    from ..serve import WEIGHT_FORMATS, replicas_for

    @functools.lru_cache(maxsize=FLEET_CACHED)
    def ask(model, gpu, **kw):
        try:
            return replicas_for(model, gpu, **kw)
        except ValueError as e:            # kept too; raised again as a new error each time
            return e

    def cached(model, gpu, **kw):
        answer = ask(model, gpu, **kw)
        if isinstance(answer, ValueError):
            raise type(answer)(*answer.args)
        return answer

    def render(model, gpu, users, prompt, output, itl_ms, ttft_ms, percentile, prefix_hit, weights, *,
               into=None):
        return charts.render_fleet(model, gpu, users, prompt, output, itl_ms, ttft_ms, percentile, prefix_hit,
                                   weights, into=into, ask=cached)

    controls = {
        "model": W.Dropdown(options=_dense_models(model), value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "users": W.SelectionSlider(options=FLEET_USERS, value=1000, description="users", **_style()),
        "prompt": W.SelectionSlider(options=[256, 1024, 4096, 16384], value=1024, description="prompt",
                                    **_style()),
        "output": W.SelectionSlider(options=[64, 256, 1024, 4096, 16384], value=256, description="output",
                                    **_style()),
        "itl_ms": W.SelectionSlider(options=[20, 30, 50, 100], value=50, description="ITL ms", **_style()),
        "ttft_ms": W.SelectionSlider(options=[250, 500, 1000, 2000, 5000], value=1000, description="TTFT ms",
                                     **_style()),
        "percentile": W.SelectionSlider(options=FLEET_PERCENTILES, value=95, description="percentile",
                                        **_style()),
        "prefix_hit": W.SelectionSlider(options=[0.0, 0.25, 0.5, 0.75], value=0.0, description="prefix hit",
                                        **_style()),
        "weights": _choice([w for w in WEIGHT_FORMATS if w in ("bf16", "fp8", "int4")], "bf16", "weights"),
    }
    return Dashboard(render, controls, name="fleet_widget")


# =========================================================================== chapter 16: fine-tuning
#: The fine-tuning widget's sequence lengths (up to each model's context).
_FINETUNE_SEQS = [512, 1024, 2048, 4096, 8192]


def finetune_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 16: will my fine-tune fit on the GPU I have, and with what batch?
    (:func:`~llmsizing.charts.render_finetune_memory`)."""
    targets = {"attention (q, k, v, o)": ("q", "k", "v", "o"),
               "all linear": "all-linear"}     # every linear layer the model has, as PEFT's all-linear

    def render(model, gpu, batch, seq, rank, targets, recompute, optimizer, into=None):
        return charts.render_finetune_memory(model, gpu=gpu, batch=batch, seq=seq, rank=rank, targets=targets,
                                             recompute=recompute, optimizer=optimizer, into=into)

    # every catalogued model (gpt2's 1,024 tokens too): the sequence slider follows the model's context
    seqs = _up_to_max_seq(_FINETUNE_SEQS, get_model(model))
    controls = {
        "model": W.Dropdown(options=_dense_models(model), value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "batch": W.SelectionSlider(options=[1, 2, 4, 8, 16, 32], value=1, description="batch", **_style()),
        "seq": W.SelectionSlider(options=seqs, value=max(n for n in seqs if n <= 2048),
                                 description="sequence", **_style()),
        "rank": W.SelectionSlider(options=[4, 8, 16, 32, 64, 128], value=16, description="LoRA rank",
                                  **_style()),
        "targets": W.Dropdown(options=list(targets.items()), value=targets["all linear"],
                              description="targets", **_style()),
        "recompute": W.Dropdown(options=["none", "selective", "full"], value="full", description="recompute",
                                **_style()),
        "optimizer": W.Dropdown(options=["adamw", "adamw-8bit"], value="adamw", description="optimizer",
                                **_style()),
    }
    box = Dashboard(render, controls, name="finetune_widget", keep=KEPT_ANSWERS)
    _follow_max_seq(box, "seq", _FINETUNE_SEQS, int)
    return box

