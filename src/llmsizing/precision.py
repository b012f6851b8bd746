"""Bytes per element, training recipes and optimizers (chapter 2, "Bytes per parameter").

Sources:

* Mixed precision with an fp32 master copy: Micikevicius et al. 2018, "Mixed Precision Training".
* 16 bytes/param for mixed-precision Adam: Rajbhandari et al. 2020, "ZeRO" (Sec. 3.1: 2 + 2 + K with K = 12).
* 18 bytes/param with fp32 gradient accumulation: Megatron-LM
  ``megatron/training/theoretical_memory_usage.py`` (6 bytes weights+grads, 12 optimizer, without the
  distributed optimizer).
* nf4 with double quantisation: Dettmers et al. 2023, "QLoRA" (Sec. 3: 4 + 8/64 + 32/(64*256) bits).
* 8-bit Adam: Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization" (blocks of 2048 with one
  fp32 absmax each).
* Adafactor: Shazeer & Stern 2018 (factored second moment: r + c numbers for an r x c matrix, no momentum by
  default). Lion: Chen et al. 2023 (one momentum buffer).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_choice

#: Storage bytes per element. ``tf32`` is a tensor-core compute mode: it is stored as 32 bits.
#: ``nf4`` includes its quantisation constants with QLoRA's double quantisation (block 64, then 256).
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "nf4": (4 + 8 / 64 + 32 / (64 * 256)) / 8,
}

DTYPES = tuple(DTYPE_BYTES)


def bytes_per_element(dtype: str) -> float:
    """Bytes one element of ``dtype`` occupies in memory (see :data:`DTYPE_BYTES`)."""
    return DTYPE_BYTES[check_choice("dtype", dtype, DTYPES)]


@dataclass(frozen=True)
class Recipe:
    """How a training recipe stores the model states.

    ``weights`` and ``grads`` are the dtypes of the working weights and gradients; ``master`` the dtype of an
    optimizer-owned master copy (``None`` if the working weights are the master); ``extra_grads`` the dtype of a
    second gradient buffer if the recipe keeps one; ``states`` the dtype the optimizer keeps its moments in.
    ``autocast`` marks a recipe that runs the forward under ``torch.autocast``: fp32 weights, 16-bit matrix
    multiplies on cached 16-bit weight copies, and a mix of fp32 and 16-bit activations.
    """

    name: str
    weights: str
    grads: str
    master: str | None
    states: str
    extra_grads: str | None = None
    description: str = ""
    autocast: bool = False


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe("fp32", "fp32", "fp32", None, "fp32",
           description="Everything in fp32: 4 + 4 + optimizer states (8 for Adam) = 16 B/param."),
    Recipe("bf16-mixed", "bf16", "bf16", "fp32", "fp32",
           description="bf16 weights and grads, fp32 master + Adam moments: 2 + 2 + 12 = 16 B/param (ZeRO paper)."),
    Recipe("fp16-mixed", "fp16", "fp16", "fp32", "fp32",
           description="As bf16-mixed with fp16 (plus a loss scale, a few bytes in total): 16 B/param."),
    Recipe("bf16-mixed-fp32-grads", "bf16", "fp32", "fp32", "fp32",
           description="Megatron-LM's default: gradients accumulated in fp32: 2 + 4 + 12 = 18 B/param."),
    Recipe("bf16-mixed-dual-grads", "bf16", "bf16", "fp32", "fp32", extra_grads="fp32",
           description="16-bit grads plus an fp32 copy for the optimizer step (DeepSpeed ZeRO-1/2 style): "
                       "2 + 2 + 4 + 12 = 20 B/param, the top of EleutherAI's 16-20 range."),
    Recipe("bf16", "bf16", "bf16", None, "bf16",
           description="Pure bf16, no master copy: 2 + 2 + 4 = 8 B/param for Adam (risky: small updates round away)."),
    Recipe("bf16-amp", "fp32", "fp32", None, "fp32", autocast=True,
           description="fp32 weights, gradients and Adam moments under torch.autocast(bf16), what the Hugging Face "
                       "Trainer's bf16=True runs: 4 + 4 + 8 = 16 B/param, plus about 2 B/param of cached bf16 "
                       "weight copies during forward and backward."),
)}


@dataclass(frozen=True)
class Optimizer:
    """An optimizer's per-parameter state. ``states`` is the number of full-size buffers; ``factored`` marks
    Adafactor's factored second moment (r + c numbers per r x c matrix); ``dtype`` forces the state dtype
    (8-bit optimizers) and ``block`` is the quantisation block (one fp32 constant per block)."""

    name: str
    states: int
    factored: bool = False
    dtype: str | None = None
    block: int | None = None
    description: str = ""


OPTIMIZERS: dict[str, Optimizer] = {o.name: o for o in (
    Optimizer("sgd", 0, description="Plain SGD keeps no state."),
    Optimizer("sgd-momentum", 1, description="One momentum buffer."),
    Optimizer("adam", 2, description="First and second moments."),
    Optimizer("adamw", 2, description="Adam with decoupled weight decay: same state as Adam."),
    Optimizer("adamw-8bit", 2, dtype="int8", block=2048,
              description="Both moments block-wise quantised to 8 bits (bitsandbytes, block 2048)."),
    Optimizer("adafactor", 0, factored=True,
              description="Factored second moment, no momentum (Adafactor defaults)."),
    Optimizer("lion", 1, description="One momentum buffer (sign-based update)."),
)}
