"""The seed articles' numeric claims, each recomputed by the library (chapter 14, "Rules of thumb, checked").

The claims themselves (a paraphrase, the claimed value, its unit, its source article) are data:
``data/seed_claims.csv``, one row per claim, dated by the audit (``as_of``). This module holds, for each claim
id, a small function that asks the library for the same quantity (:data:`COMPUTE`). No formula lives here:
every number comes from :mod:`~llmsizing.memory`, :mod:`~llmsizing.time_cost`, :mod:`~llmsizing.layouts`,
:mod:`~llmsizing.inference` and the catalogues.

**Conventions**, so that the library gives each seed the benefit of the doubt:

* training memory is :func:`~llmsizing.memory.training_memory` with full activation recomputation, flash
  attention and sequences of :data:`SEQ` tokens (the seeds give no sequence length): the most lenient setting;
* GPU counts are :func:`~llmsizing.layouts.min_gpus` for one such sequence per micro-batch: the fewest GPUs
  whose most loaded rank holds a step in any TP x PP x DP x ZeRO layout;
* times use :func:`~llmsizing.time_cost.training_time` at the book's earlier fixed MFU
  (:data:`~llmsizing.time_cost.MFU_DEFAULT`, 0.40; the calibrated estimate of chapter 10 replaces it when the
  audit is read again), and costs the price per GPU-hour the seed itself states
  (:data:`SEED_PRICES_USD`), so that a cost ratio measures the seed's arithmetic, not the price list. The FP8
  claims are the exception: they dispute how much of the FP8 peak a run reaches, so they are judged at the
  calibrated MFU of each dtype (:func:`~llmsizing.time_cost.mfu_estimate`) with the FP8 recipes of
  :data:`~llmsizing.precision.RECIPES`;
* "GB" is 10**9 bytes, as the seeds use it ("140 GB" for 70B parameters in 16 bits).

**The verdict rule** (:func:`verdict`). With ``r = claimed / library``:

* ``about``: the claim holds if ``1/BAND <= r <= BAND`` (within 25% either way), otherwise it is
  "off by fx (too low / too high)" with ``f = max(r, 1/r)``;
* ``at least`` (a claim written "N+" or "more than N"): holds if the library value is at least N/BAND;
* ``at most`` (a claim that something fits in N GB): holds if the library value is at most N x BAND;
* ``range`` (a claim "from lo to hi"): holds if the library value lies in ``[lo/BAND, hi x BAND]``, otherwise
  it is off by the factor to the nearer end; ``ratio`` uses the middle of the range.

A claim can also be **wrong in kind**: its premise fails whatever the number (a run "on 8 GPUs" whose training
step does not fit on 8 GPUs). The compute function then returns a :class:`Finding` with a ``reason``, and the
verdict is "wrong: <reason>", followed in brackets by what the number alone would have scored.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ._validate import check_choice, check_number
from .units import GB

SEED_CLAIMS_CSV = Path(__file__).resolve().parents[2] / "data" / "seed_claims.csv"

#: The tolerance of the verdict rule: a claim within a factor 1.25 of the library (25% either way) holds.
BAND = 1.25

#: How a claimed value is meant: a point, a lower bound, an upper bound (a capacity), or a range.
BOUNDS = ("about", "at least", "at most", "range")

#: Sequence length of every training claim (the seeds give none; 4,096 is Llama 2's training length).
SEQ = 4096

#: Prices per GPU-hour that seed 000 states (RunPod, as quoted there): costs are recomputed at these.
SEED_PRICES_USD = {"H100 SXM": 2.69, "A100 80GB": 1.39}

#: Days per month and per year, to express a time claim in the seed's own unit.
DAYS_PER_YEAR = 365.25
DAYS_PER_MONTH = DAYS_PER_YEAR / 12


@dataclass(frozen=True)
class Finding:
    """A library value together with a reason that makes the claim wrong in kind (empty when there is none)."""

    value: float
    reason: str = ""


@dataclass(frozen=True)
class Claim:
    """One numeric claim from a seed article and the function that recomputes it (:data:`COMPUTE`).

    ``claimed`` is the value as written (the low end for a ``range``; ``claimed_high`` the high end), in
    ``unit``; ``bound`` is one of :data:`BOUNDS`. ``compute()`` returns a float or a :class:`Finding`."""

    id: str
    article: str
    topic: str
    claim: str
    claimed: float
    unit: str
    compute: Callable[[], "float | Finding"]
    claimed_high: float | None = None
    bound: str = "about"
    source: str = ""
    as_of: str = ""

    @property
    def claimed_mid(self) -> float:
        """The claimed value, or the middle of a claimed range."""
        return self.claimed if self.claimed_high is None else (self.claimed + self.claimed_high) / 2


# ----------------------------------------------------------------------------- library look-ups (no formulas)
@cache
def _min_plan(model: str, gpu: str):
    """The fewest GPUs that hold one training sequence of :data:`SEQ` tokens with full recomputation."""
    from .layouts import min_gpus

    return min_gpus(model, gpu, batch=1, seq=SEQ, recompute="full")


def _min_gpus(model: str, gpu: str) -> float:
    return float(_min_plan(model, gpu).gpus)


def _fit_reason(model: str, gpu: str, n_gpus: int) -> str:
    """Why a run of ``model`` on ``n_gpus`` x ``gpu`` cannot happen, or "" if a training step fits."""
    from .time_cost import _layout_label

    plan = _min_plan(model, gpu)
    if n_gpus >= plan.gpus:
        return ""
    what = "one GPU" if n_gpus == 1 else f"{n_gpus} GPUs"
    return (f"a {model} training step does not fit on {what}; it needs at least {plan.gpus} {gpu} "
            f"({_layout_label(plan.parallel)})")


def _train_gb(model: str, batch: int = 1, parallel=None) -> float:
    """Per-GPU training memory (peak + allowance, most loaded GPU) in GB."""
    from .memory import training_memory

    return training_memory(model, batch=batch, seq=SEQ, recompute="full", parallel=parallel).total_bytes / GB


def _run(model: str, tokens: float, gpu: str, n_gpus: int):
    from .time_cost import MFU_DEFAULT, MFU_HIGH, MFU_LOW, training_time

    # the audit keeps the book's earlier fixed MFU (0.40, range 0.30-0.50) until issue 26 re-reads it with the
    # calibrated, size-dependent estimate: its verdicts stay those chapter 14 explains
    return training_time(model, tokens=tokens, gpu=gpu, n_gpus=n_gpus, seq=SEQ, mfu=MFU_DEFAULT,
                         mfu_range=(MFU_LOW, MFU_HIGH), price_usd_per_gpu_hour=SEED_PRICES_USD.get(gpu))


def _days(model: str, tokens: float, gpu: str, n_gpus: int, *, per: float = 1.0) -> Finding:
    """Days (divided by ``per``: 30.4 for months, 365.25 for years) of the run, with the fit check."""
    return Finding(_run(model, tokens, gpu, n_gpus).days / per, _fit_reason(model, gpu, n_gpus))


def _cost(model: str, tokens: float, gpu: str, n_gpus: int) -> Finding:
    """USD of the run at the seed's own price, with the fit check."""
    return Finding(_run(model, tokens, gpu, n_gpus).cost_usd, _fit_reason(model, gpu, n_gpus))


def _tps(model: str, gpu: str, *, fit: bool = False) -> Finding:
    """Tokens per second per GPU at the default MFU; with ``fit``, also whether one GPU holds a step."""
    return Finding(_run(model, 1e12, gpu, 1).tokens_per_s_per_gpu, _fit_reason(model, gpu, 1) if fit else "")


def _weights_gb(model: str, dtype: str) -> float:
    from .inference import weights_bytes

    return weights_bytes(model, dtype) / GB


def _states(model: str | None = None, n_params: int | None = None, parallel=None):
    from .memory import model_states, model_states_for_params

    if model is not None:
        return model_states(model, parallel=parallel)
    return model_states_for_params(n_params, parallel=parallel)


def _stage_params_billion(model: str, parallel) -> float:
    from .memory import stage_params

    return max(stage_params(model, parallel)) / 1e9


def _serving(model: str, batch: int, context: int):
    from .inference import inference_memory

    return inference_memory(model, batch=batch, context=context)


def _gpu(name: str):
    from .catalog import get_gpu

    return get_gpu(name)


def _model(name: str):
    from .catalog import get_model

    return get_model(name)


def _one_way_gbps(gpu: str) -> float:
    from .hardware import link_bandwidth_one_way_gbps

    return link_bandwidth_one_way_gbps(gpu)


def _bytes(dtype: str) -> float:
    from .precision import bytes_per_element

    return bytes_per_element(dtype)


def _par(**kw):
    from .parallel import Parallel

    return Parallel(**kw)


def _b200_speedup() -> float:
    """Days on H100 / days on B200 for the same run at the same MFU."""
    return _run("llama-3-70b", 1e12, "H100 SXM", 8).days / _run("llama-3-70b", 1e12, "B200", 8).days


def _one_p3b_gpus() -> float:
    """GPUs whose memory holds a 1.3B model's training states (activations come on top)."""
    from .memory import min_gpus_for_bytes

    return float(min_gpus_for_bytes(_states(n_params=1_300_000_000).total_bytes, "A100 80GB"))


def _layer_activations_mb() -> float:
    """One layer's saved activations at batch 32 with full recomputation (the least a layer can keep) for the
    catalogue model nearest 10B."""
    from .activations import activation_memory

    return activation_memory("llama-2-13b", batch=32, seq=SEQ, recompute="full").per_layer_bytes / 1e6


def _serving_factor(model: str, batch: int, context: int) -> float:
    r = _serving(model, batch, context)
    return r.total_bytes / r.weights_bytes


def _fp8_tps(model: str, gpu: str, precision: str) -> float:
    """Tokens per second per GPU at the calibrated MFU of ``precision`` (:func:`~llmsizing.time_cost.mfu_estimate`
    by GPU generation and dtype): the FP8 claims are judged at the calibrated estimate, not the fixed 0.40,
    because what they dispute is how much of the FP8 peak a run reaches (chapter 10)."""
    from .time_cost import training_time

    return training_time(model, tokens=1e12, gpu=gpu, n_gpus=8, seq=SEQ, precision=precision).tokens_per_s_per_gpu


def _fp8_speedup(model: str, gpu: str) -> float:
    """Tokens/s per GPU with Transformer Engine's FP8 (``fp8-mixed``) over BF16 on the same GPU."""
    return _fp8_tps(model, gpu, "fp8-mixed") / _fp8_tps(model, gpu, "bf16-mixed")


def _fp8_vram(model: str) -> Finding:
    """Training memory without FP8 over memory with Transformer Engine's FP8, both on the same stack (fp32
    gradients, as Megatron-LM keeps them: ``bf16-mixed-fp32-grads`` against ``fp8-mixed``), one sequence of
    :data:`SEQ` tokens with no recomputation (where FP8's smaller saved activations count most: the seed's best
    case). Wrong in kind when the FP8 step needs more memory."""
    from .memory import training_memory

    kw = dict(batch=1, seq=SEQ, recompute="none")
    base = training_memory(model, precision="bf16-mixed-fp32-grads", **kw).total_bytes
    fp8 = training_memory(model, precision="fp8-mixed", **kw).total_bytes
    reason = "" if fp8 < base else (
        f"FP8 training keeps the 16-bit weights and adds FP8 copies of the Linear weights (Transformer Engine: "
        f"2 bytes per weight, with the transpose): a {model} step needs {fp8 / GB:,.0f} GB with FP8 against "
        f"{base / GB:,.0f} GB without")
    return Finding(base / fp8, reason)


# ----------------------------------------------------------------------------- one function per claim id
_L2_70, _L3_70, _L405, _M7, _L2_13, _L2_7 = ("llama-2-70b", "llama-3-70b", "llama-3.1-405b", "mistral-7b",
                                             "llama-2-13b", "llama-2-7b")
_L3_8 = "llama-3-8b"
_H100, _A100, _H200 = "H100 SXM", "A100 80GB", "H200"

def _qlora(model: str):
    """QLoRA (rank 16, all linear layers) of one 2,048-token sequence with gradient checkpointing: the
    configuration of the seed's quoted benchmark (chapter 16)."""
    from .finetune import finetune_memory

    return finetune_memory(model, method="qlora", batch=1, seq=2048, recompute="full")


#: For each claim id of ``data/seed_claims.csv`` that the library can recompute: a function of no arguments
#: returning the library's value in the claim's unit (a float, or a :class:`Finding` with a reason).
COMPUTE: dict[str, Callable[[], "float | Finding"]] = {
    # ---- seed 000: memory
    "000-rule-4x": lambda: _states(n_params=70_000_000_000).bytes_per_param,
    "000-mem-mistral7b-b1": lambda: _train_gb(_M7, 1),
    "000-mem-mistral7b-b32": lambda: _train_gb(_M7, 32),
    "000-mem-llama2-13b-b1": lambda: _train_gb(_L2_13, 1),
    "000-mem-llama2-13b-b32": lambda: _train_gb(_L2_13, 32),
    "000-mem-llama2-70b-b1": lambda: _train_gb(_L2_70, 1),
    "000-mem-llama2-70b-b32": lambda: _train_gb(_L2_70, 32),
    "000-mem-405b-b1": lambda: _train_gb(_L405, 1),
    "000-mem-405b-b32": lambda: _train_gb(_L405, 32),
    "000-q8-mistral7b": lambda: _weights_gb(_M7, "int8"),
    "000-q4-mistral7b": lambda: _weights_gb(_M7, "int4"),
    "000-q8-llama2-13b": lambda: _weights_gb(_L2_13, "int8"),
    "000-q4-llama2-13b": lambda: _weights_gb(_L2_13, "int4"),
    "000-q8-llama2-70b": lambda: _weights_gb(_L2_70, "int8"),
    "000-q4-llama2-70b": lambda: _weights_gb(_L2_70, "int4"),
    "000-q8-405b": lambda: _weights_gb(_L405, "int8"),
    "000-q4-405b": lambda: _weights_gb(_L405, "int4"),
    "000-fit-a100-40-llama2-7b": lambda: _train_gb(_L2_7, 2),
    "000-fit-a100-80-mistral7b": lambda: _train_gb(_M7, 32),
    "000-fit-a100-80-llama2-13b": lambda: _train_gb(_L2_13, 8),
    "000-fit-h100-llama2-13b": lambda: _train_gb(_L2_13, 16),
    "000-fit-h200-llama2-70b": lambda: _train_gb(_L2_70, 16),
    # ---- seed 000: strategies
    "000-dp-mistral7b-days": lambda: _days(_M7, 1e11, _A100, 4),
    "000-tp-70b-params": lambda: _stage_params_billion(_L2_70, _par(tp=8)),
    "000-tp-70b-mem": lambda: _train_gb(_L2_70, 1, _par(tp=8, sp=True)),
    "000-tp-70b-days": lambda: _days(_L2_70, 1e11, _H100, 8),
    "000-pp-405b-params": lambda: _stage_params_billion(_L405, _par(pp=16)),
    "000-pp-405b-mem": lambda: _train_gb(_L405, 1, _par(pp=16)),
    "000-pp-405b-days": lambda: _days(_L405, 1e11, _H100, 16),
    "000-fsdp-405b-params": lambda: _states(_L405, parallel=_par(dp=32, zero=3)).weights_bytes / _bytes("bf16") / 1e9,
    "000-fsdp-405b-mem": lambda: _train_gb(_L405, 1, _par(dp=32, zero=3)),
    "000-fsdp-405b-days": lambda: _days(_L405, 1e11, _H100, 32),
    # ---- seed 000: throughput and time
    "000-tps-h100": lambda: _tps(_L2_70, _H100),
    "000-tps-a100": lambda: _tps(_L2_70, _A100),
    "000-tps-h200": lambda: _tps(_L2_70, _H200),
    "000-tps-a10": lambda: _tps(_M7, "A10", fit=True),
    "000-tps-rtx4090": lambda: _tps(_M7, "RTX 4090", fit=True),
    "000-time-formula": lambda: _run(_L2_70, 1e12, _H100, 1).flops_per_token / _states(_L2_70).n_params,
    "000-opt1-days": lambda: _days(_L2_70, 1e12, _A100, 8),
    "000-opt1-cost": lambda: _cost(_L2_70, 1e12, _A100, 8),
    "000-opt2-days": lambda: _days(_L2_70, 1e12, _H100, 8),
    "000-opt2-cost": lambda: _cost(_L2_70, 1e12, _H100, 8),
    "000-opt3-days": lambda: _days(_L2_70, 1e12, _H100, 64),
    "000-opt3-cost": lambda: _cost(_L2_70, 1e12, _H100, 64),
    # ---- seed 000: cost tables
    **{f"000-cost-{key}-{n}-days": (lambda m=m, t=t, n=n: _days(m, t, _H100, n))
       for key, m, t, ns in (("mistral7b", _M7, 1e11, (1, 2, 4)), ("llama2-13b", _L2_13, 1e11, (1, 4, 8)),
                             ("llama2-70b", _L2_70, 1e12, (8, 16, 32, 64))) for n in ns},
    **{f"000-cost-{key}-{n}-usd": (lambda m=m, t=t, n=n: _cost(m, t, _H100, n))
       for key, m, t, ns in (("mistral7b", _M7, 1e11, (1, 2, 4)), ("llama2-13b", _L2_13, 1e11, (1, 4, 8)),
                             ("llama2-70b", _L2_70, 1e12, (8, 16, 32, 64))) for n in ns},
    "000-cost-per-day": lambda: _gpu(_H100).price_usd_per_gpu_hour * 24,
    # ---- seed 000: GPU counts and the FAQ
    "000-intro-13b-one-h100": lambda: _min_gpus(_L2_13, _H100),
    "000-intro-70b-gpus": lambda: _min_gpus(_L2_70, _H100),
    "000-faq-one-h100": lambda: _days(_L2_70, 1e12, _H100, 1, per=DAYS_PER_MONTH),
    "000-faq-8-h100": lambda: _days(_L2_70, 1e12, _H100, 8, per=DAYS_PER_MONTH),
    "000-faq-1gpu-years": lambda: _days(_L2_70, 1e12, _H100, 1, per=DAYS_PER_YEAR),
    "000-faq-2gpu-years": lambda: _days(_L2_70, 1e12, _H100, 2, per=DAYS_PER_YEAR),
    "000-faq-4gpu-years": lambda: _days(_L2_70, 1e12, _H100, 4, per=DAYS_PER_YEAR),
    "000-faq-finetune-days": lambda: _days(_M7, 1e9, _H100, 1),
    "000-faq-finetune-usd": lambda: _cost(_M7, 1e9, _H100, 1),
    # ---- seed 001
    "001-1p3b-handful": _one_p3b_gpus,
    # ---- seed 002
    "002-fp32-bytes": lambda: _bytes("fp32"),
    "002-bf16-bytes": lambda: _bytes("bf16"),
    "002-int8-bytes": lambda: _bytes("int8"),
    "002-int4-bytes": lambda: _bytes("int4"),
    "002-70b-serving": lambda: _serving(_L2_70, 1, SEQ).total_bytes / GB,
    "002-rule-batch32": lambda: _serving_factor(_L2_70, 32, SEQ),
    "002-rule-128k": lambda: _serving_factor("llama-3-8b", 1, 131072),
    "002-10b-weights": lambda: _states(n_params=10_000_000_000).weights_bytes / GB,
    "002-10b-gradients": lambda: _states(n_params=10_000_000_000).gradients_bytes / GB,
    "002-10b-optimizer": lambda: _states(n_params=10_000_000_000).optimizer_bytes / GB,
    "002-10b-total": lambda: _states(n_params=10_000_000_000).total_bytes / GB,
    "002-10b-width": lambda: float(_model(_L2_13).hidden),
    "002-10b-layer-activations": _layer_activations_mb,
    "002-10b-two-gpus": lambda: _states(n_params=10_000_000_000, parallel=_par(dp=2, zero=3)).total_bytes / GB,
    # ---- seed 003
    "003-70b-fp16": lambda: _weights_gb(_L2_70, "bf16"),
    "003-nvlink4": lambda: 2 * _one_way_gbps(_H100),
    "003-h200-memory": lambda: _gpu(_H200).memory_marketed_gb,
    "003-mi300x-memory": lambda: _gpu("MI300X").memory_marketed_gb,
    "003-7b-one-a100": lambda: _min_gpus(_L2_7, _A100),
    "003-70b-h100s": lambda: _min_gpus(_L2_70, _H100),
    "003-405b-gpus": lambda: _min_gpus(_L405, _H100),
    "003-dp-under-15b": lambda: _states(n_params=15_000_000_000).total_bytes / GB,
    # ---- seed 004
    "004-qlora-70b-41gb": lambda: _qlora(_L3_70).peak_bytes / GB,
    "004-qlora-7-13b-l40s": lambda: _qlora(_L2_13).total_bytes / GB,
    "004-qlora-70b-one-gpu": lambda: _qlora(_L3_70).total_bytes / GB,
    "004-16-bytes": lambda: _states(_L3_70).bytes_per_param,
    "004-adamw-12-bytes": lambda: _states(_L3_70).optimizer_bytes / _states(_L3_70).n_params,
    "004-int4-bytes": lambda: _bytes("int4"),
    "004-70b-weights": lambda: _states(_L3_70).weights_bytes / GB,
    "004-70b-optimizer": lambda: _states(_L3_70).optimizer_bytes / GB,
    "004-70b-gradients": lambda: _states(_L3_70).gradients_bytes / GB,
    "004-70b-total": lambda: _states(_L3_70).total_bytes / GB,
    "004-70b-two-nodes": lambda: _min_gpus(_L3_70, _H100),
    "004-70b-8-h100": lambda: _min_gpus(_L3_70, _H100),
    "004-13b-2-a100": lambda: _min_gpus(_L2_13, _A100),
    "004-h100-memory": lambda: _gpu(_H100).memory_marketed_gb,
    "004-h100-bandwidth": lambda: _gpu(_H100).memory_bandwidth_gbps / 1000,
    "004-b200-memory": lambda: _gpu("B200").memory_marketed_gb,
    "004-b200-bandwidth": lambda: _gpu("B200").memory_bandwidth_gbps / 1000,
    "004-a100-nvlink": lambda: _gpu(_A100).link_bandwidth_gbps,
    "004-b200-speedup": _b200_speedup,
    "004-fp8-faster-h100": lambda: _fp8_speedup(_L3_8, _H100),
    "004-fp8-less-vram": lambda: _fp8_vram(_L3_8),
    "004-l40s-fp8-vs-a100": lambda: _fp8_tps(_L3_8, "L40S", "fp8-mixed") / _fp8_tps(_L3_8, _A100, "bf16-mixed"),
}


# ----------------------------------------------------------------------------- the registry and the table
@cache
def _rows() -> tuple[dict, ...]:
    with open(SEED_CLAIMS_CSV, newline="") as f:
        return tuple(csv.DictReader(f))


def claims() -> tuple[Claim, ...]:
    """Every claim of ``data/seed_claims.csv`` that the library recomputes (those without a
    ``not_computed`` reason), each with its :data:`COMPUTE` function. Chapter 14."""
    out = []
    for r in _rows():
        if r["not_computed"]:
            continue
        if r["id"] not in COMPUTE:
            raise KeyError(f"claim {r['id']!r} in {SEED_CLAIMS_CSV.name} has no compute function in audit.COMPUTE")
        out.append(Claim(r["id"], r["article"], r["topic"], r["claim"], float(r["claimed"]), r["unit"],
                         COMPUTE[r["id"]], float(r["claimed_high"]) if r["claimed_high"] else None,
                         check_choice("bound", r["bound"], BOUNDS), r["source"], r["as_of"]))
    return tuple(out)


def not_computed_claims():
    """The claims the library does not recompute, with the reason (a DataFrame: id, article, topic, claim,
    claimed, unit, why). Chapter 14."""
    import pandas as pd

    rows = [{"id": r["id"], "article": r["article"], "topic": r["topic"], "claim": r["claim"],
             "claimed": float(r["claimed"]), "unit": r["unit"], "why": r["not_computed"]}
            for r in _rows() if r["not_computed"]]
    return pd.DataFrame(rows)


def _factor(f: float) -> str:
    return f"{f:.1f}x" if f < 9.95 else f"{f:,.0f}x"


def verdict(claimed: float, library: float, *, bound: str = "about", claimed_high: float | None = None,
            reason: str = "", band: float = BAND) -> str:
    """The verdict on one claim (the rule is in this module's docstring): ``"holds"``, ``"off by 4.1x (too
    low)"``, ``"holds as a lower bound (library 9.3x higher)"`` or ``"wrong: <reason> (the number alone: ...)"``.

    ``claimed`` and ``library`` are in the same unit (``library`` > 0); ``claimed_high`` is the top of a
    ``range``; ``band`` > 1 is the tolerance factor (default :data:`BAND`). Taught in chapter 14."""
    claimed = check_number("claimed", claimed, allow_equal=False)
    library = check_number("library", library, allow_equal=False)
    band = check_number("band", band, minimum=1.0)
    check_choice("bound", bound, BOUNDS)
    if bound == "range":
        if claimed_high is None:
            raise ValueError("claimed_high must be given (a number >= claimed) when bound='range'")
        high = check_number("claimed_high", claimed_high, allow_equal=False)
        if high < claimed:
            raise ValueError(f"claimed_high must be >= claimed ({claimed:g}), got {high:g}")
    elif claimed_high is not None:
        raise ValueError(f"claimed_high is only for bound='range', got bound={bound!r}")
    if not isinstance(reason, str):
        raise TypeError(f"reason must be a string, got {type(reason).__name__}")
    if not 1e-300 <= claimed / library <= 1e300:        # (a factor that overflows is no verdict: "off by infx")
        raise ValueError(f"claimed={claimed:g} and library={library:g} are too far apart to compare: their ratio "
                         "overflows (the same unit for both?)")

    if bound == "about":
        r = claimed / library
        alone = "holds" if 1 / band <= r <= band else \
            f"off by {_factor(max(r, 1 / r))} ({'too low' if r < 1 else 'too high'})"
    elif bound == "at least":
        if library >= claimed / band:
            alone = "holds" if library <= claimed * band else \
                f"holds as a lower bound (library {_factor(library / claimed)} higher)"
        else:
            alone = f"off by {_factor(claimed / library)} (too high)"
    elif bound == "at most":
        alone = "holds" if library <= claimed * band else f"off by {_factor(library / claimed)} (too low)"
    else:
        if claimed / band <= library <= high * band:
            alone = "holds"
        elif library > high:
            alone = f"off by {_factor(library / high)} (too low)"
        else:
            alone = f"off by {_factor(claimed / library)} (too high)"
    if reason:
        return f"wrong: {reason} (the number alone: {alone})"
    return alone


def _value(result) -> Finding:
    if isinstance(result, Finding):
        return result
    return Finding(float(result))


@cache
def _findings() -> tuple[tuple[Claim, Finding], ...]:
    """Every claim with the library's finding, computed once per session (a few seconds: the GPU counts
    search layouts)."""
    return tuple((c, _value(c.compute())) for c in claims())


def audit_table(band: float = BAND):
    """One row per recomputed claim: ``id, article, topic, claim, claimed, library, ratio, verdict`` (then
    ``unit, bound, claimed_low, claimed_high, wrong_in_kind``). ``claimed`` is the middle of a claimed range,
    ``ratio`` = claimed / library, and the verdict follows :func:`verdict` with tolerance ``band`` (default
    :data:`BAND`). The library values are computed once per session; a new ``band`` only re-judges them. Taught
    in chapter 14."""
    import pandas as pd

    band = check_number("band", band, minimum=1.0)
    rows = []
    for c, f in _findings():
        rows.append({"id": c.id, "article": c.article, "topic": c.topic, "claim": c.claim,
                     "claimed": c.claimed_mid, "library": f.value, "ratio": c.claimed_mid / f.value,
                     "verdict": verdict(c.claimed, f.value, bound=c.bound, claimed_high=c.claimed_high,
                                        reason=f.reason, band=band),
                     "unit": c.unit, "bound": c.bound, "claimed_low": c.claimed,
                     "claimed_high": math.nan if c.claimed_high is None else c.claimed_high,
                     "wrong_in_kind": bool(f.reason)})
    return pd.DataFrame(rows)


def verdict_counts(df=None) -> dict[str, int]:
    """How many claims hold, are off by more than the band, or are wrong in kind (over :func:`audit_table`)."""
    df = audit_table() if df is None else df
    kind = df["verdict"].str.startswith("wrong")
    holds = df["verdict"].str.startswith("holds") & ~kind
    return {"holds": int(holds.sum()), "off": int((~holds & ~kind).sum()), "wrong in kind": int(kind.sum())}
