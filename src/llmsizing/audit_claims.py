"""The seed articles' claims as data, and the function that recomputes each (chapter 14, "Rules of thumb,
checked"): :data:`COMPUTE`, one function of no arguments per claim id of ``data/seed_claims.csv``, each a few
lines over :mod:`~llmsizing.audit_readings`' helpers; :class:`Claim`, a row with its function; the yardstick
of each kind of claim (:data:`YARDSTICKS`). The judging and the table are :mod:`llmsizing.audit`'s, which
still exports every name here (moved out unchanged in session 25).
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ._validate import check_choice
from . import audit_readings as _readings
from .units import GB
from .audit_verdict import BOUNDS
from .audit_readings import (
    DAYS_PER_MONTH, DAYS_PER_YEAR, Finding, RUN_GPUS_RULE, SEED_PRICES_USD,
    _A100, _COST_TABLES, _H100, _H200, _L2_13, _L2_7, _L2_70,
    _L3_70, _L3_8, _L405, _M7, _MATRIX, _activations_gb,
    _b200_speedup, _bytes, _cost, _days, _finetune, _fp8_speedup,
    _fp8_tps, _fp8_vram, _gpu, _gpu_memory_gb, _layer_activations_mb, _matrix, _memory_ratio,
    _min_gpus, _min_plan, _model, _one_gpu_gb, _one_way_gbps, _par,
    _qlora, _qlora_fits, _recompute_flops_factor, recompute_saving_pct, _run, _same_gpu_days_cost_ratio,
    _serving, _serving_factor, _stage_params_billion, _states, _suffices, ten_b_stand_in, _tps,
    _train_gb, _weights_gb,
)

SEED_CLAIMS_CSV = Path(__file__).resolve().parents[2] / "data" / "seed_claims.csv"

#: The yardstick of each kind of claim (the ``kind`` column of ``data/seed_claims.csv``): every claim of a
#: kind is judged the same way.
YARDSTICKS = {
    "training memory": "the peak of a training step on the most loaded GPU plus the allowance "
                       "(training_memory: fused AdamW, full recomputation, flash attention, sequences of "
                       "4,096 tokens (central) or 2,048 (judged there when more favourable))",
    "memory ratio": "the ratio of two such step peaks, at the batch and dtype the seed describes, with full "
                    "recomputation (central) and without",
    "model states": "weights, gradients and optimizer states only (model_states), for claims that name them",
    "weights": "the weights alone in the named dtype (weights_bytes)",
    "serving memory": "inference_memory: weights, KV cache, activations and allowance",
    "activations": "activation_memory with full recomputation (the least a step can keep)",
    "GPU count": "min_gpus for the training-memory step (fused AdamW; CPU offload when the claim's count "
                 "needs it)",
    "throughput": "training_time's tokens per second at the calibrated MFU and its band; " + RUN_GPUS_RULE,
    "time": "training_time's days at the calibrated MFU and its band (fit checked as for a GPU count; with "
            "CPU offload: its host time hidden and counted)",
    "cost": "training_time's cost at the seed's own price per GPU-hour, calibrated MFU and its band (with "
            "CPU offload: its host time hidden and counted)",
    "FLOPs": "training FLOPs per token (flops.training_flops_per_token) and what recomputation adds",
    "hardware": "the GPU catalogue (data/gpus.csv) and the precision table",
    "ratio": "a ratio of two library values of one kind (each with its own yardstick)",
    "fine-tuning memory": "finetune_memory (LoRA/QLoRA) of one 2,048-token sequence with checkpointing",
}


#: The reading named in the table when a claim's compute function names none: the yardstick of its kind,
#: short.
READINGS = {
    "training memory": "step peak, fused AdamW, full recomputation",
    "memory ratio": "step peaks, seed's setting",
    "model states": "states only, mixed-precision AdamW", "weights": "weights alone",
    "serving memory": "weights + KV cache + activations", "activations": "full recomputation",
    "GPU count": "min_gpus, fused AdamW", "throughput": "calibrated MFU", "time": "calibrated MFU",
    "cost": "calibrated MFU, seed's price",
    "FLOPs": "6N + attention (the rerun forward counted for a claim about recomputation)",
    "hardware": "catalogue", "ratio": "library values",
    "fine-tuning memory": "QLoRA r16, 2,048 tokens, checkpointing",
}


@dataclass(frozen=True)
class Claim:
    """One numeric claim from a seed article and the function that recomputes it (:data:`COMPUTE`).

    ``claimed`` is the value as written (the low end for a ``range``; ``claimed_high`` the high end), in
    ``unit``; ``bound`` is one of :data:`~llmsizing.audit_verdict.BOUNDS`. ``compute()`` returns a float or a
    :class:`Finding`. ``kind`` is a key of :data:`YARDSTICKS`, ``line`` the line of the seed file it comes
    from, ``from_image`` whether the seed gave it in an image (so the paraphrase is a reconstruction) and
    ``counted_with`` the claim it repeats or follows from (left out of the headline counts);
    ``gib_source``, when not empty, the source showing that the claim's "GB" was computed as bytes / 1024**3
    (GiB), so that the audit reads it both ways (:data:`~llmsizing.audit_inputs.OPEN_SETTINGS`, "unit")."""

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
    kind: str = ""
    line: str = ""
    from_image: bool = False
    counted_with: str = ""
    gib_source: str = ""

    @property
    def claimed_mid(self) -> float:
        """The claimed value, or the middle of a claimed range."""
        return self.claimed if self.claimed_high is None else (self.claimed + self.claimed_high) / 2



# ----------------------------------------------------------------------------- one function per claim id
#: For each claim id of ``data/seed_claims.csv`` that the library can recompute: a function of no arguments
#: returning the library's value in the claim's unit (a float, or a :class:`Finding` with a reading).
COMPUTE: dict[str, Callable[[], "float | Finding"]] = {
    # ---- seed 000: memory
    "000-rule-4x": lambda: _states(n_params=70_000_000_000).bytes_per_param,
    "000-rule-params-grads": lambda: _states(n_params=70_000_000_000).weights_bytes / 70e9,
    "000-rule-adam-state": lambda: _states(n_params=70_000_000_000).optimizer_bytes / 70e9,
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
    # ---- seed 000: single-GPU limits
    **{f"000-vram-{key}": (lambda g=g: _gpu_memory_gb(g))
       for key, g in (("rtx4090", "RTX 4090"), ("a10", "A10"), ("a100-40", "A100 40GB"), ("a100-80", _A100),
                      ("h100", _H100), ("h200", _H200))},
    "000-fit-rtx4090-mistral7b-q": lambda: _qlora_fits(_M7),
    "000-fit-a10-mistral7b-q": lambda: _qlora_fits(_M7),
    "000-fit-a100-40-llama2-7b": lambda: _one_gpu_gb(_L2_7, 2, "A100 40GB"),
    "000-fit-a100-80-mistral7b": lambda: _one_gpu_gb(_M7, 32, _A100),
    "000-fit-a100-80-llama2-13b": lambda: _one_gpu_gb(_L2_13, 8, _A100),
    "000-fit-h100-llama2-13b": lambda: _one_gpu_gb(_L2_13, 16, _H100),
    "000-fit-h100-llama2-70b-techniques": lambda: _qlora_fits(_L2_70),
    "000-fit-h200-llama2-70b": lambda: _one_gpu_gb(_L2_70, 16, _H200),
    # ---- seed 000: strategies
    "000-dp-mistral7b-days": lambda: _days(_M7, 1e11, _A100, 4),
    "000-tp-70b-params": lambda: _stage_params_billion(_L2_70, _par(tp=8)),
    "000-tp-70b-mem": lambda: _train_gb(_L2_70, 1, _par(tp=8, sp=True)),
    "000-tp-70b-days": lambda: _days(_L2_70, 1e11, _H100, 8),
    "000-pp-405b-params": lambda: _stage_params_billion(_L405, _par(pp=16)),
    "000-pp-405b-mem": lambda: _train_gb(_L405, 1, _par(pp=16)),
    "000-pp-405b-days": lambda: _days(_L405, 1e11, _H100, 16),
    "000-fsdp-405b-params": lambda: (_states(_L405, parallel=_par(dp=32, zero=3)).weights_bytes
                                     / _bytes("bf16") / 1e9),
    "000-fsdp-405b-mem": lambda: _train_gb(_L405, 1, _par(dp=32, zero=3)),
    "000-fsdp-405b-days": lambda: _days(_L405, 1e11, _H100, 32),
    # ---- seed 000: throughput and time
    "000-tps-h100": lambda: _tps_of("000-tps-h100", _L2_70, _H100),
    "000-tps-a100": lambda: _tps_of("000-tps-a100", _L2_70, _A100),
    "000-tps-h200": lambda: _tps_of("000-tps-h200", _L2_70, _H200),
    "000-tps-a10": lambda: _tps_of("000-tps-a10", _M7, "A10"),
    "000-tps-rtx4090": lambda: _tps_of("000-tps-rtx4090", _M7, "RTX 4090"),
    "000-time-formula": lambda: _run(_L2_70, 1e12, _H100, 1).flops_per_token / _states(_L2_70).n_params,
    "000-opt1-days": lambda: _days(_L2_70, 1e12, _A100, 8),
    "000-opt1-cost": lambda: _cost(_L2_70, 1e12, _A100, 8),
    "000-opt2-days": lambda: _days(_L2_70, 1e12, _H100, 8),
    "000-opt2-cost": lambda: _cost(_L2_70, 1e12, _H100, 8),
    "000-opt3-days": lambda: _days(_L2_70, 1e12, _H100, 64),
    "000-opt3-cost": lambda: _cost(_L2_70, 1e12, _H100, 64),
    # ---- seed 000: cost tables (throughput of all the GPUs, days, total cost)
    **{f"000-cost-{key}-{n}-tps": (lambda m=m, c=f"000-cost-{key}-{n}-tps": _tps_of(c, m, _H100))
       for key, m, t, ns in _COST_TABLES for n in ns},
    **{f"000-cost-{key}-{n}-days": (lambda m=m, t=t, n=n: _days(m, t, _H100, n))
       for key, m, t, ns in _COST_TABLES for n in ns},
    **{f"000-cost-{key}-{n}-usd": (lambda m=m, t=t, n=n: _cost(m, t, _H100, n))
       for key, m, t, ns in _COST_TABLES for n in ns},
    "000-cost-per-day": lambda: SEED_PRICES_USD[_H100] * 24,
    # ---- seed 000: the recommendation matrix
    **{f"000-matrix-{key}": (lambda m=m, t=t, g=g, n=n: _matrix(m, t, g, n)) for key, m, t, g, n in _MATRIX},
    # ---- seed 000: techniques
    "000-grad-accum-batch": lambda: float(8 * 32),  # sequences per optimizer step: micro-batch x accumulation
    "000-grad-accum": lambda: _memory_ratio(_M7, batch=8, base_batch=32, grad_accum=32),
    "000-grad-accum-savings": lambda: _memory_ratio(_M7, batch=8, base_batch=32, grad_accum=32, scale=-100,
                                                    offset=100),
    "000-mixed-precision-2x": lambda: _memory_ratio(_M7, batch=32, base_batch=32, precision="fp32"),
    "000-checkpointing": lambda: recompute_saving_pct(_M7, 32),
    "000-checkpointing-slowdown": _recompute_flops_factor,
    # ---- seed 000: GPU counts and the FAQ
    "000-intro-13b-one-h100": lambda: _suffices(_L2_13, _H100, 1),
    "000-intro-70b-gpus": lambda: _min_gpus(_L2_70, _H100),
    "000-faq-one-h100": lambda: _days(_L2_70, 1e12, _H100, 1, per=DAYS_PER_MONTH),
    "000-faq-8-h100": lambda: _days(_L2_70, 1e12, _H100, 8, per=DAYS_PER_MONTH),
    "000-faq-8x50-cheaper": _same_gpu_days_cost_ratio,
    "000-faq-1gpu-years": lambda: _days(_L2_70, 1e12, _H100, 1, per=DAYS_PER_YEAR),
    "000-faq-2gpu-years": lambda: _days(_L2_70, 1e12, _H100, 2, per=DAYS_PER_YEAR),
    "000-faq-4gpu-years": lambda: _days(_L2_70, 1e12, _H100, 4, per=DAYS_PER_YEAR),
    "000-faq-finetune-days": lambda: _finetune(_M7, 1e9, _H100, "days"),
    "000-faq-finetune-usd": lambda: _finetune(_M7, 1e9, _H100, "cost"),
    # ---- seed 001
    "001-1p3b-handful": lambda: _min_gpus("mpt-bench-1b", _A100),
    "001-7b-broader": lambda: float(_min_plan(_L2_7, _H100).gpus),
    # ---- seed 002
    "002-fp32-bytes": lambda: _bytes("fp32"),
    "002-bf16-bytes": lambda: _bytes("bf16"),
    "002-int8-bytes": lambda: _bytes("int8"),
    "002-int4-bytes": lambda: _bytes("int4"),
    "002-70b-serving": lambda: _serving(_L2_70, 1, _readings.SEQ).total_bytes / GB,
    "002-rule-batch32": lambda: _serving_factor(_L2_70, 32, _readings.SEQ),
    "002-rule-128k": lambda: _serving_factor("llama-3-8b", 1, 131072),
    "002-10b-weights": lambda: _states(n_params=10_000_000_000).weights_bytes / GB,
    "002-10b-gradients": lambda: _states(n_params=10_000_000_000).gradients_bytes / GB,
    "002-10b-optimizer": lambda: _states(n_params=10_000_000_000).optimizer_bytes / GB,
    "002-10b-activations": lambda: _activations_gb(ten_b_stand_in(), 32),
    "002-10b-total": lambda: _train_gb(ten_b_stand_in(), 32),
    "002-10b-width": lambda: float(_model(_L2_13).hidden),
    "002-10b-layer-activations": _layer_activations_mb,
    "002-10b-two-gpus": lambda: _train_gb(ten_b_stand_in(), 16, _par(dp=2, zero=3)),
    # ---- seed 003
    "003-70b-fp16": lambda: _weights_gb(_L2_70, "bf16"),
    "003-nvlink4": lambda: 2 * _one_way_gbps(_H100),
    "003-h200-memory": lambda: _gpu_memory_gb(_H200),
    "003-mi300x-memory": lambda: _gpu_memory_gb("MI300X"),
    "003-7b-one-a100": lambda: _suffices(_L2_7, _A100, 1),
    "003-70b-h100s": lambda: _min_gpus(_L2_70, _H100),
    "003-medium-4-8": lambda: _min_gpus("mcore-gpt-16b", _H100),
    "003-405b-gpus": lambda: _min_gpus(_L405, _H100),
    "003-dp-under-15b": lambda: _one_gpu_gb(_L2_13, 1, _H100),
    # ---- seed 004
    "004-qlora-70b-41gb": lambda: _qlora(_L3_70).peak_bytes / GB,
    "004-qlora-7-13b-l40s": lambda: _qlora_fits(_L2_13),
    "004-qlora-70b-one-gpu": lambda: _qlora_fits(_L3_70),
    "004-16-bytes": lambda: _states(_L3_70).bytes_per_param,
    "004-adamw-12-bytes": lambda: _states(_L3_70).optimizer_bytes / _states(_L3_70).n_params,
    "004-int4-bytes": lambda: _bytes("int4"),
    "004-70b-weights": lambda: _states(_L3_70).weights_bytes / GB,
    "004-70b-optimizer": lambda: _states(_L3_70).optimizer_bytes / GB,
    "004-70b-gradients": lambda: _states(_L3_70).gradients_bytes / GB,
    "004-70b-total": lambda: _states(_L3_70).total_bytes / GB,
    "004-70b-two-nodes": lambda: _min_gpus(_L3_70, _H100),
    "004-70b-8-h100": lambda: _suffices(_L3_70, _H100, 8),
    "004-13b-2-a100": lambda: _suffices(_L2_13, _A100, 2),
    "004-h100-memory": lambda: _gpu_memory_gb(_H100),
    "004-h100-bandwidth": lambda: _gpu(_H100).memory_bandwidth_gbps / 1000,
    "004-b200-memory": lambda: _gpu_memory_gb("B200"),
    "004-b200-bandwidth": lambda: _gpu("B200").memory_bandwidth_gbps / 1000,
    "004-a100-nvlink": lambda: _gpu(_A100).link_bandwidth_gbps,
    "004-b200-speedup": _b200_speedup,
    "004-fp8-faster-h100": lambda: _fp8_speedup(_L3_8, _H100),
    "004-fp8-less-vram": lambda: _fp8_vram(_L3_8),
    "004-l40s-fp8-vs-a100": lambda: (_fp8_tps(_L3_8, "L40S", "fp8-mixed")
                                     / _fp8_tps(_L3_8, _A100, "bf16-mixed")),
}


# ----------------------------------------------------------------------------- the registry and the table
@cache
def _rows() -> tuple[dict, ...]:
    with open(SEED_CLAIMS_CSV, newline="") as f:
        return tuple(csv.DictReader(f))


def _flag(value: str) -> bool:
    return value.strip().lower() in ("yes", "true", "1")


def claims() -> tuple[Claim, ...]:
    """Every claim of ``data/seed_claims.csv`` that the library recomputes (those without a
    ``not_computed`` reason), each with its :data:`COMPUTE` function. Chapter 14."""
    out = []
    for r in _rows():
        if r["not_computed"]:
            continue
        if r["id"] not in COMPUTE:
            raise KeyError(f"claim {r['id']!r} in {SEED_CLAIMS_CSV.name} has no compute function in "
                           "audit.COMPUTE")
        out.append(Claim(r["id"], r["article"], r["topic"], r["claim"], float(r["claimed"]), r["unit"],
                         COMPUTE[r["id"]], float(r["claimed_high"]) if r["claimed_high"] else None,
                         check_choice("bound", r["bound"], BOUNDS), r["source"], r["as_of"],
                         check_choice("kind", r["kind"], tuple(YARDSTICKS)), r["line"],
                         _flag(r["from_image"]), r["counted_with"], r["gib_source"]))
    return tuple(out)


def _run_gpus(claim_id: str) -> tuple[int, ...]:
    """The GPU counts of the runs a claim's seed names (its ``run_gpus``; empty for none)."""
    row = next(r for r in _rows() if r["id"] == claim_id)
    return tuple(int(k) for k in row["run_gpus"].split(";") if k)


def _tps_of(claim_id: str, model: str, gpu: str) -> Finding:
    """A throughput claim read by :data:`RUN_GPUS_RULE`: on the run its seed names, or as a per-GPU rate."""
    runs = _run_gpus(claim_id)
    return _tps(model, gpu, n_gpus=runs[0] if runs else None)


def not_computed_claims():
    """The claims the library does not recompute, with the reason (a DataFrame: id, article, topic, claim,
    claimed, unit, why, line). Chapter 14."""
    import pandas as pd

    rows = [{"id": r["id"], "article": r["article"], "topic": r["topic"], "claim": r["claim"],
             "claimed": float(r["claimed"]), "unit": r["unit"], "why": r["not_computed"], "line": r["line"]}
            for r in _rows() if r["not_computed"]]
    return pd.DataFrame(rows)
