"""Published mixture-of-experts training runs against the library's step time (issue 24, "calibrate on
published MoE runs"; chapter 18).

``data/moe_published_runs.csv`` holds every MoE pre-training run whose GPU-hours, GPU type, token count and
layout could be sourced, one row each with its source and date: DeepSeek-V3 (arXiv:2412.19437), DeepSeek-V2
(arXiv:2405.04434) and JetMoE-8B (arXiv:2404.07413). Searched for and left out, for want of a published
GPU-hour figure: OLMoE-1B-7B (5.1T tokens with FSDP, no GPU-hours found), DBRX (3,072 H100s and 12T tokens, no
GPU-hours or duration from Databricks), Snowflake Arctic ("less than 3,000 GPU weeks", an upper bound whose
GPU type and token count were not confirmed), Moonlight, the Qwen MoE models, DeepSeekMoE 16B and
DeepSeek-V2-Lite.

:func:`predict_moe_run` prices a row with :func:`~llmsizing.layouts.step_time` on its published layout (the
dense kernel efficiency calibrated for the GPU generation and dtype, each stage's active FLOPs, the expert
all-to-all on the network model) and turns the step into GPU-hours,
``tokens / tokens per step x step x GPUs``. The step time models none of what makes a mixture of experts
slower than a dense model of its active size: small grouped GEMMs, load imbalance, the permutation kernels.
:func:`fit_moe_factor` measures that as one factor, published / predicted GPU-hours, on the rows marked
``fit`` (DeepSeek-V3 only: three rows cannot support more), and :func:`moe_run_check` applies it to every row
with the calibrated MFU band of the GPU and dtype (:func:`~llmsizing.time_cost.mfu_range_factors`): the range
is ``factor x predicted / high`` to ``factor x predicted / low``. The rows marked ``held out`` (DeepSeek-V2,
JetMoE) take no part in the fit.
"""

from __future__ import annotations

from pathlib import Path

from ._validate import check_number
from .model import Model

#: The published MoE runs (:func:`moe_published_runs`).
MOE_PUBLISHED_RUNS_CSV = Path(__file__).resolve().parents[2] / "data" / "moe_published_runs.csv"

#: JetMoE-8B for its FLOPs per token (a stand-in: the library has no mixture of attention heads). Its
#: ``config.json`` (huggingface.co/jetmoe/jetmoe-8b-sft): 24 layers, hidden 2,048, 8 MLP experts of width
#: 5,632 (SwiGLU), top-2, vocabulary 32,000, tied embeddings; attention of 8 experts of 16 heads of 128
#: dimensions, top-2, K and V shared by the experts (``num_key_value_heads`` 16, ``num_attention_heads`` 32 =
#: 16 x top-k). Two experts' query and output projections are the projections of 32 query heads, so dense
#: attention with 32 query and 16 KV heads costs what JetMoE's costs per token: 2.33B active parameters
#: against the published 2.2B; the six unused attention experts of each layer (1.2B parameters) are missing
#: from the total (7.3B against 8.5B).
JETMOE_8B_STANDIN = Model(name="jetmoe-8b (stand-in)", layers=24, hidden=2048, heads=32, kv_heads=16,
                          head_dim=128, ffn_hidden=5632, vocab=32000, gated_mlp=True, tied_embeddings=True,
                          norm="rmsnorm", bias=False, max_seq=4096, experts=8, experts_per_token=2,
                          expert_ffn_hidden=5632)


def moe_published_runs():
    """``data/moe_published_runs.csv`` as a DataFrame: run, catalogue model (or ``"jetmoe-8b (stand-in)"``),
    GPU, GPUs (``n_gpus_published`` says whether the count is the source's or assumed), sequence length,
    tokens, GPU-hours, precision recipe, the layout (``pp``, ``ep``, ``dp``, ``zero``), the global batch in
    sequences, the share of the all-to-all the run hides (``ep_overlap``), DeepSeek's node limit
    (``max_nodes``), ``role`` (``fit`` or ``held out``), source, as-of date and note."""
    import pandas as pd

    return pd.read_csv(MOE_PUBLISHED_RUNS_CSV, keep_default_na=False, na_values=[""])


def _model(name: str):
    from .catalog import get_model

    return JETMOE_8B_STANDIN if name == JETMOE_8B_STANDIN.name else get_model(name)


def predict_moe_run(row) -> dict:
    """One row of :func:`moe_published_runs` priced by :func:`~llmsizing.layouts.step_time` on its layout with
    micro-batches of one sequence: ``gpu_hours`` (``tokens / tokens per step x step x GPUs / 3600``), the
    step's ``mfu``, ``step_s``, and the shares of the step in the pipeline bubble and the exposed
    all-to-all."""
    from .layouts import step_time
    from .parallel import Parallel

    par = Parallel(pp=int(row["pp"]), dp=int(row["dp"]), ep=int(row["ep"]), zero=int(row["zero"]))
    max_nodes = None if row["max_nodes"] != row["max_nodes"] or row["max_nodes"] in ("", None) \
        else int(row["max_nodes"])
    st = step_time(_model(row["model"]), row["gpu"], par, batch=1, seq=int(row["seq"]),
                   grad_accum=int(row["global_batch"]) // par.dp, precision=row["precision"],
                   ep_overlap=float(row["ep_overlap"]), max_nodes=max_nodes)
    hours = float(row["tokens"]) / st.tokens * st.step_s * par.gpus / 3600
    return {"gpu_hours": hours, "mfu": st.mfu, "step_s": st.step_s, "bubble_share": st.bubble_s / st.step_s,
            "all_to_all_share": st.exposed_by_group_s.get("ep", 0.0) / st.step_s}


def fit_moe_factor(runs=None) -> float:
    """The MoE efficiency factor: the geometric mean of published / predicted GPU-hours
    (:func:`predict_moe_run`) over the rows whose ``role`` is ``"fit"``. Above 1: MoE runs take longer than
    the dense-calibrated step time says."""
    import math

    runs = moe_published_runs() if runs is None else runs
    fit = runs[runs["role"] == "fit"]
    if fit.empty:
        raise ValueError("fit_moe_factor: no row has role 'fit'")
    logs = [math.log(float(r["gpu_hours"]) / predict_moe_run(r)["gpu_hours"]) for _, r in fit.iterrows()]
    return math.exp(sum(logs) / len(logs))


def moe_run_check(factor: float | None = None, runs=None):
    """Every published MoE run against the library, a DataFrame indexed by run: ``published`` GPU-hours,
    ``predicted`` (:func:`predict_moe_run`, the dense-calibrated step), ``ratio`` (published / predicted),
    ``moe`` (predicted x ``factor``, by default :func:`fit_moe_factor`), the range ``low`` / ``high`` (``moe``
    divided by the top and the bottom of the calibrated 80% MFU band of a whole run's total on the GPU and
    dtype, :func:`~llmsizing.time_cost.mfu_range_factors` with ``whole_run=True``), ``inside`` (published
    within it), ``inside_dense`` (the same without the factor), the step's ``mfu`` and the row's ``role``."""
    import pandas as pd

    from .precision import compute_dtype
    from .time_cost import mfu_range_factors

    runs = moe_published_runs() if runs is None else runs
    f = fit_moe_factor(runs) if factor is None else check_number("factor", factor, allow_equal=False)
    rows = {}
    for _, r in runs.iterrows():
        p = predict_moe_run(r)
        # every row is a whole run's GPU-hour total: the range of a total (issue 34)
        lo, hi = mfu_range_factors(r["gpu"], compute_dtype(r["precision"]), whole_run=True)
        pub, pred = float(r["gpu_hours"]), p["gpu_hours"]
        rows[r["run"]] = {"published": pub, "predicted": pred, "ratio": pub / pred, "moe": f * pred,
                          "low": f * pred / hi, "high": f * pred / lo,
                          "inside": f * pred / hi <= pub <= f * pred / lo,
                          "inside_dense": pred / hi <= pub <= pred / lo, "mfu": p["mfu"], "role": r["role"]}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "run"
    return df


__all__ = ["MOE_PUBLISHED_RUNS_CSV", "JETMOE_8B_STANDIN", "moe_published_runs", "predict_moe_run",
           "fit_moe_factor", "moe_run_check"]
