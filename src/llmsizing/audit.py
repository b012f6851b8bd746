"""The seed articles' numeric claims, each recomputed by the library (chapter 14, "Rules of thumb, checked").

The claims themselves (a paraphrase, the claimed value, its unit, its source article and line, whether it was
read off an image) are data: ``data/seed_claims.csv``, one row per claim, dated by the audit (``as_of``). This
module holds, for each claim id, a small function that asks the library for the same quantity
(:data:`COMPUTE`). No formula lives here: every number comes from :mod:`~llmsizing.memory`,
:mod:`~llmsizing.time_cost`, :mod:`~llmsizing.layouts`, :mod:`~llmsizing.inference`,
:mod:`~llmsizing.finetune` and the catalogues.

**The most favourable reading: one rule** (issue 38). Every setting a seed leaves open is tried at each value
of one list, the same for every claim (:data:`OPEN_SETTINGS`: sequence lengths :data:`SEQS`, the optimizer
kernel, CPU offload, full fine-tuning or LoRA, the MFU band, the batch and recomputation of a memory ratio);
the claim is judged at the combination with the best verdict (then the one whose number holds), then the
smallest factor off, and the table
names that reading (the ``reading`` column) and gives the central estimate beside it (``library_central``:
the same method and layout at :data:`SEQ` tokens and the centre of the MFU band). Its instances:

* the optimizer step is PyTorch's **fused** AdamW (no ``foreach`` temporaries: Llama 2 70B's step needs 1,194
  GB instead of 1,491);
* a run "on n GPUs" whose step does not fit on n GPUs is tried with **CPU offload** (DeepSpeed's ZeRO-Offload
  layouts, :class:`~llmsizing.parallel.Parallel` with ``offload=``), as long as the host memory it needs fits
  :data:`HOST_BYTES_PER_NODE` per node: the verdict is then "needs CPU offload", not "wrong in kind";
* the time such an offloaded run spends waiting for the host (the CPU's Adam step and the copies,
  :func:`~llmsizing.runs.offload_exposed_s`) is tried both **hidden** (the delayed parameter update of Ren
  et al. 2021, ZeRO-Offload, Sec. 5.2) and **counted** (a step that waits for its host), at one stated batch
  for every such claim
  (:data:`~llmsizing.audit_inputs.OFFLOAD_TOKENS_PER_STEP` tokens per GPU per optimizer step, chapter 13's
  case 1): counting it favours a claim that is too slow, hiding it one that is too fast;
* where a seed says "fine-tuning" without saying which, both **full fine-tuning and LoRA** are computed; when
  their verdicts differ, the ``depends`` column says so (each method's verdict kind) and ``depends_verdicts``
  gives each method's verdict with its factor (:func:`readings` has them as a table);
* times, throughputs and costs use the **calibrated MFU** of chapter 10 (by GPU generation, model size and
  sequence length, :func:`~llmsizing.time_cost.mfu_estimate`) and are judged at the point of its band (the
  published runs' spread) nearest the claim: a claim holds if some MFU that runs of that size reach makes it
  hold.

**One yardstick per kind of claim** (the ``kind`` column, :data:`YARDSTICKS`): "training memory" is always the
peak of a step on the most loaded GPU plus the allowance (:func:`~llmsizing.memory.training_memory`, full
recomputation, flash attention, one sequence of :data:`SEQ` tokens per micro-batch unless the seed names a
batch, and at 2,048 tokens too, as every claim); "model states" only the weights, gradients and optimizer
states, for the claims that name them; a "GPU count" is :func:`~llmsizing.fewest_gpus.min_gpus` of that same
step; and so on. Costs use the price per GPU-hour the seed itself states (:data:`SEED_PRICES_USD`), so that a
cost measures the seed's arithmetic, not the price list. The FP8 claims dispute how much of the FP8 peak a
run reaches, so they compare the central calibrated MFU of each dtype
(:func:`~llmsizing.time_cost.mfu_estimate`) with the FP8 recipes of :data:`~llmsizing.precision.RECIPES`;
"significantly faster", which names no factor, is read at its most favourable reading as every claim: faster
at all (a direction claim, ``above`` 1). "GB" is 10**9 bytes, as the seeds use it ("140 GB" for 70B
parameters in 16 bits).

**No double counting.** A claim that only repeats another (the same run in two tables) or follows from it by
the seed's own arithmetic (a table's cost = its days x its cost per day) names that claim in ``counted_with``;
:func:`verdict_counts` leaves such rows out, and counts by seed with ``by="article"``.

**The verdict rule** (:func:`verdict`, in :mod:`llmsizing.audit_verdict` with :data:`BAND`, :data:`BOUNDS`
and :data:`KINDS`, all importable from here too). With ``r = claimed / library``:

* ``about``: the claim holds if ``1/BAND <= r <= BAND`` (within 25% either way), otherwise it is
  "off by fx (too low / too high)" with ``f = max(r, 1/r)``;
* ``at least`` (a claim written "N+" or "more than N"): holds if the library value is at least N/BAND;
* ``at most`` (a claim that something fits in N GB, or that N GPUs suffice): holds if the library value is at
  most N x BAND;
* ``above`` / ``below`` (a claim that names a direction only, "faster", "reduces", "outperforms", "costs
  less", read as a ratio bounded by 1): holds only if the library value lies strictly on the claim's side of
  1, the band widening that side alone (0.9 is off for "faster", 1.05 holds);
* ``range`` (a claim "from lo to hi"): holds if the library value lies in ``[lo/BAND, hi x BAND]``, otherwise
  it is off by the factor to the nearer end; ``ratio`` uses the middle of the range.

A claim can **need CPU offload**: its premise (a run on n GPUs) holds only with ZeRO-Offload. The verdict is
then "needs CPU offload: <how>", followed in brackets by what the number scores. A claim is **wrong in kind**
when its premise fails whatever the number and whatever the reading (a run whose step fits on its GPUs in no
layout the library knows, offload included). The compute function then returns a :class:`Finding` with a
``reason``, and the verdict is "wrong: <reason>", followed in brackets by what the number alone would have
scored.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from ._validate import check_choice, check_number
from . import audit_readings as _readings
from .units import GB
from .audit_verdict import (BAND, BOUNDS, KINDS, verdict, verdict_kind, verdict_number,  # noqa: F401
                            verdict_short)
from .audit_readings import (  # noqa: F401  (re-exported: audit.SEQ, audit.Finding, ... keep working)
    DAYS_PER_MONTH, DAYS_PER_YEAR, GPUS_PER_HOST, HOST_BYTES_PER_NODE, Finding, OFFLOAD_COUNTED,
    OFFLOAD_TOKENS_PER_STEP, OPEN_SETTINGS, RUN_GPUS_RULE, SEED_PRICES_USD, SEQ, SEQS, at_seq,
    offload_exposed_days,
    _OFFLOADS, _fit, _fit_reason, _min_offload_gpus, _offload_fit, _A100,
    _COST_TABLES, _H100, _H200, _L2_13, _L2_7, _L2_70,
    _L3_70, _L3_8, _L405, _M7, _MATRIX, _activations_gb,
    _b200_speedup, _bytes, _cost, _days, _finetune, _fp8_speedup,
    _fp8_tps, _fp8_vram, _gpu, _layer_activations_mb, _matrix, _memory_ratio,
    _min_gpus, _min_plan, _model, _one_gpu_gb, _one_way_gbps, _par,
    _qlora, _qlora_fits, _recompute_flops_factor, recompute_saving_pct, _run, _same_gpu_days_cost_ratio,
    _serving, seed_days_at_throughput, seed_gpu_days_usd,
    _serving_factor, _stage_params_billion, _states, _suffices, ten_b_stand_in, _tps,
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
    "cost": "calibrated MFU, seed's price", "FLOPs": "6N + attention, recomputation's forward",
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
    ``counted_with`` the claim it repeats or follows from (left out of the headline counts)."""

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
    **{f"000-vram-{key}": (lambda g=g: _gpu(g).memory_marketed_gb)
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
    "003-h200-memory": lambda: _gpu(_H200).memory_marketed_gb,
    "003-mi300x-memory": lambda: _gpu("MI300X").memory_marketed_gb,
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
    "004-h100-memory": lambda: _gpu(_H100).memory_marketed_gb,
    "004-h100-bandwidth": lambda: _gpu(_H100).memory_bandwidth_gbps / 1000,
    "004-b200-memory": lambda: _gpu("B200").memory_marketed_gb,
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
                         _flag(r["from_image"]), r["counted_with"]))
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


def _value(result) -> Finding:
    if isinstance(result, Finding):
        return result
    return Finding(float(result))


def _at_other_seq(f: Finding, seq: int, kind: str) -> tuple[Finding, ...]:
    """``f`` and its other readings, each named as read at ``seq`` tokens (an alternative, never central)."""
    tag = f"; {seq:,} tokens"
    return tuple(replace(g, reading=(g.reading or READINGS[kind]) + tag, others=()) for g in (f, *f.others))


def _findings() -> tuple[tuple[Claim, Finding], ...]:
    """Every claim with the library's finding, computed once per session and offload batch
    (:func:`_findings_at`)."""
    return _findings_at(_readings.SEQ, _readings._TOKENS_PER_STEP)


@cache
def _findings_at(seq: int, tokens_per_step: int) -> tuple[tuple[Claim, Finding], ...]:
    """:func:`_compute` of every claim, keyed by the sequence length and the offload batch it is computed at
    (:func:`~llmsizing.audit_readings.at_seq`, :func:`~llmsizing.audit_readings.at_offload_batch`), so that
    no result depends on what ran first (review24c L4)."""
    return _compute(claims())


def _compute(cs: tuple[Claim, ...]) -> tuple[tuple[Claim, Finding], ...]:
    """Each claim of ``cs`` with the library's finding (a few seconds for all: the GPU counts search
    layouts): the central reading at :data:`SEQ` tokens, and as other readings the same at every other length
    of :data:`SEQS` (the one rule of :data:`OPEN_SETTINGS`)."""
    out = {c.id: _value(c.compute()) for c in cs}
    for seq in SEQS:
        if seq == SEQ:
            continue
        with at_seq(seq):
            alt = {c.id: (c, _value(c.compute())) for c in cs}
        for cid, (c, g) in alt.items():
            f = out[cid]
            if g.value == f.value and g.low == f.low and g.high == f.high and g.reason == f.reason:
                continue                        # the length does not enter this claim: no second reading
            out[cid] = replace(f, others=f.others + _at_other_seq(g, seq, c.kind))
    return tuple((c, out[c.id]) for c in cs)


def _favourable(c: Claim, f: Finding) -> float:
    """The point of the finding's range (its MFU band) nearest the claim: the claim is judged there."""
    if f.low is None or f.high is None:
        return f.value
    lo, hi = min(f.low, f.high), max(f.low, f.high)
    if c.bound in ("at least", "above"):
        return hi
    if c.bound in ("at most", "below"):
        return lo
    top = c.claimed if c.claimed_high is None else c.claimed_high
    return min(max(c.claimed, lo), hi) if c.claimed >= lo else min(max(top, lo), hi)


def _judge_all(c: Claim, f: Finding, band: float) -> list[tuple]:
    """Each reading judged (its own first): ``(rank, |log factor|, value, verdict, reading)``; the rank is the
    verdict's kind, then whether its number holds (an offload verdict whose number holds beats one whose
    number is off, however near: a direction claim at 1.0 is off)."""
    judged = []
    for g in (f, *f.others):
        x = _favourable(c, g)
        v = verdict(c.claimed, x, bound=c.bound, claimed_high=c.claimed_high, reason=g.reason, band=band,
                    offload=g.offload)
        rank = 2 * KINDS.index(verdict_kind(v)) + (verdict_kind(verdict_number(v)) != "holds")
        judged.append((rank, abs(math.log(c.claimed_mid / x)), x, v, g.reading))
    return judged


def _methods(c: Claim, f: Finding, judged: list[tuple]) -> list[tuple]:
    """The judged readings that change the method (LoRA for "fine-tuning"), the finding's own first, at the
    central settings (not an open setting's other value, :data:`_SETTING`; not CPU offload, a layout whose
    verdict says so), each with its offload's host time hidden or counted, whichever is more favourable
    (:data:`OPEN_SETTINGS`)."""
    best: dict[str, tuple] = {}
    counted = f"; {_readings.offload_counted(_readings._TOKENS_PER_STEP)}"
    for g, j in zip((f, *f.others), judged):
        if g is not f and (g.reading == "CPU offload" or _SETTING.search(g.reading)):
            continue
        method = (g.reading or READINGS[c.kind]).replace(counted, "")
        if method not in best or j[:2] < best[method][:2]:
            best[method] = j
    return list(best.values())


def _best(judged):
    """The most favourable of :func:`_judge_all`'s readings: the best verdict kind, then a number that holds,
    then the smallest factor off (its first two fields); the one rule, shared by :func:`_judge` and
    :func:`~llmsizing.audit_runs.judge_run`."""
    return min(judged, key=lambda j: j[:2])


def _judge(c: Claim, f: Finding, band: float) -> tuple[float, str, str, str, str]:
    """(value judged, verdict, reading, depends, depends_verdicts) for one claim at its most favourable
    reading (the best :data:`~llmsizing.audit_verdict.KINDS`, then the smallest factor off). When the methods'
    verdicts differ in kind, ``depends`` lists their kinds and ``depends_verdicts`` their
    :func:`~llmsizing.audit_verdict.verdict_short` (else both empty)."""
    judged = _judge_all(c, f, band)
    best = _best(judged)
    methods = _methods(c, f, judged)
    if len({verdict_kind(j[3]) for j in methods}) < 2:
        return best[2], best[3], best[4], "", ""
    depends = " | ".join(f"{j[4] or 'as stated'}: {verdict_kind(j[3])}" for j in methods)
    detail = " | ".join(f"{j[4] or 'as stated'}: {verdict_short(j[3])}" for j in methods)
    return best[2], best[3], best[4], depends, detail


def readings(claim_id: str, band: float = BAND):
    """Each method of reading one claim, judged on its own at its most favourable setting (a DataFrame, the
    claim's own first): ``reading``, ``library`` (the value judged: its range's point nearest the claim),
    ``library_central``, ``verdict``, ``verdict_kind``, ``number``
    (:func:`~llmsizing.audit_verdict.verdict_number`): what ``depends`` in :func:`audit_table` sums up (seed
    000's "fine-tuning": full or LoRA). Taught in chapter 14."""
    import pandas as pd

    found = {c.id: (c, f) for c, f in _findings()}
    if not isinstance(claim_id, str) or claim_id not in found:
        raise ValueError(f"claim_id must be an id of a recomputed claim in {SEED_CLAIMS_CSV.name} (e.g. "
                         f"'000-faq-finetune-days'), got {claim_id!r}")
    c, f = found[claim_id]
    return pd.DataFrame([{"reading": j[4] or READINGS[c.kind], "library": j[2], "library_central":
                          _central(c, f, j[4]), "verdict": j[3], "verdict_kind": verdict_kind(j[3]),
                          "number": verdict_number(j[3])} for j in _methods(c, f, _judge_all(c, f, band))])


#: The tail of a reading that names an open setting's alternative value (:data:`OPEN_SETTINGS`), not a method.
_SETTING = re.compile(r"(; [\d,]+ tokens|; (micro-batch \d+, )?\w+ recomputation)+$")


def _central(c: Claim, f: Finding, reading: str) -> float:
    """The central estimate behind a judged reading: the same method and layout (offload, LoRA, ...), at the
    central sequence length :data:`SEQ` and, for a time, throughput or cost, the centre of the MFU band."""
    base = _SETTING.sub("", reading or READINGS[c.kind])
    return next((g.value for g in (f, *f.others) if (g.reading or READINGS[c.kind]) == base), f.value)


def audit_table(band: float = BAND):
    """One row per recomputed claim: ``id, article, topic, claim, claimed, library, ratio, verdict`` (then
    ``unit, bound, claimed_low, claimed_high, wrong_in_kind, kind, reading, depends, depends_verdicts,
    from_image, counted_with, line, library_central, verdict_kind``). ``claimed`` is the middle of a claimed
    range; ``library`` is the value judged, the point of the most favourable reading (:data:`OPEN_SETTINGS`)
    nearest the claim; ``library_central`` is the central estimate of the same method and layout (:data:`SEQ`
    tokens, the centre of the MFU band); ``ratio`` = claimed / library, and the verdict follows
    :func:`~llmsizing.audit_verdict.verdict` with tolerance ``band`` (default
    :data:`~llmsizing.audit_verdict.BAND`). The library values are computed once per session; a new ``band``
    only re-judges them. Taught in chapter 14."""
    import pandas as pd

    band = check_number("band", band, minimum=1.0)
    rows = []
    for c, f in _findings():
        x, v, reading, depends, detail = _judge(c, f, band)
        central = _central(c, f, reading)
        rows.append({"id": c.id, "article": c.article, "topic": c.topic, "claim": c.claim,
                     "claimed": c.claimed_mid, "library": x, "ratio": c.claimed_mid / x, "verdict": v,
                     "unit": c.unit, "bound": c.bound, "claimed_low": c.claimed,
                     "claimed_high": math.nan if c.claimed_high is None else c.claimed_high,
                     "wrong_in_kind": v.startswith("wrong"), "kind": c.kind,
                     "reading": reading or READINGS[c.kind],
                     "depends": depends, "depends_verdicts": detail, "from_image": c.from_image,
                     "counted_with": c.counted_with, "line": c.line, "library_central": central,
                     "verdict_kind": verdict_kind(v)})
    return pd.DataFrame(rows)


def verdict_counts(df=None, *, by: str | None = None, headline: bool = False):
    """How many claims hold, need CPU offload, are off by more than the band, or are wrong in kind (over
    :func:`audit_table`): a dict keyed by :data:`~llmsizing.audit_verdict.KINDS`. ``headline=True`` leaves out
    the claims that only repeat or follow from another (``counted_with``), so that no error is counted twice.
    ``by="article"`` returns a DataFrame instead: one row per seed, one column per kind, and the total."""
    df = audit_table() if df is None else df
    kinds = df["verdict"].map(verdict_kind)
    if headline:
        keep = df["counted_with"].fillna("") == ""
        df, kinds = df[keep], kinds[keep]
    if by is None:
        return {k: int((kinds == k).sum()) for k in KINDS}
    check_choice("by", by, ("article",))
    import pandas as pd

    out = pd.crosstab(df[by], kinds).reindex(columns=list(KINDS), fill_value=0)
    out["total"] = out.sum(axis=1)
    out.columns.name = None
    return out


def judged(claim_id: str, band: float = BAND):
    """One row of :func:`audit_table` (a pandas Series), for a chapter that discusses a single seed claim: so
    that every chapter gives a claim the same verdict as chapter 14 (chapter 13 does this for seed 000's
    fine-tune)."""
    t = audit_table(band).set_index("id")
    if not isinstance(claim_id, str) or claim_id not in t.index:
        raise ValueError(f"claim_id must be an id of a recomputed claim in {SEED_CLAIMS_CSV.name} (e.g. "
                         f"'000-faq-finetune-days'), got {claim_id!r}")
    return t.loc[claim_id]
