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
* Weight formats as inference engines store them (:data:`STORED_FORMATS`): llama.cpp's GGUF blocks
  (``ggml/src/ggml-common.h``: ``block_q8_0``, ``block_q4_0``, ``block_q4_K``, ``block_q6_K``) and its
  per-tensor choices (``src/llama-quant.cpp``, ``llama_tensor_get_type``); AutoAWQ's and AutoGPTQ's packed
  int4 with group 128 (``qweight``/``qzeros`` packed eight 4-bit values to an int32, ``scales`` in fp16);
  FP8 e4m3 with one scale per tensor (vLLM's and TensorRT-LLM's default FP8 checkpoints).
* Adafactor: Shazeer & Stern 2018 (factored second moment: r + c numbers for an r x c matrix, no momentum by
  default). Lion: Chen et al. 2023 (one momentum buffer).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_choice

#: Bits per weight of the block formats inference engines store, scales included (see :data:`STORED_FORMATS`).
#: GGUF ``Q8_0``: blocks of 32 int8 values and one fp16 scale: (32 x 8 + 16) / 32 = 8.5 bits.
Q8_0_BITS = (32 * 8 + 16) / 32
#: GGUF ``Q4_0``: blocks of 32 4-bit values and one fp16 scale: (32 x 4 + 16) / 32 = 4.5 bits.
Q4_0_BITS = (32 * 4 + 16) / 32
#: GGUF ``Q4_K``: super-blocks of 256 weights (8 blocks of 32): 128 bytes of 4-bit values, an fp16 scale ``d``
#: and an fp16 ``dmin``, and 12 bytes holding a 6-bit scale and a 6-bit minimum for each of the 8 blocks:
#: (256 x 4 + 2 x 16 + 12 x 8) / 256 = 4.5 bits.
Q4_K_BITS = (256 * 4 + 2 * 16 + 12 * 8) / 256
#: GGUF ``Q6_K``: super-blocks of 256: 128 bytes of low 4 bits, 64 bytes of high 2 bits, 16 int8 block scales
#: (blocks of 16) and one fp16 ``d``: (256 x 6 + 16 x 8 + 16) / 256 = 6.5625 bits.
Q6_K_BITS = (256 * 6 + 16 * 8 + 16) / 256
#: AWQ / GPTQ int4 with group size 128: 4-bit weights, plus per group of 128 weights one fp16 scale and one
#: zero point packed in 4 bits (both AutoAWQ's and AutoGPTQ's ``qzeros``): 4 + (16 + 4) / 128 = 4.15625 bits.
#: GPTQ's optional ``g_idx`` (one int32 per input channel, with act-order) is not counted: 32 bits per column
#: of thousands of weights.
INT4_G128_BITS = 4 + (16 + 4) / 128

#: Storage bytes per element. ``tf32`` is a tensor-core compute mode: it is stored as 32 bits.
#: ``nf4`` includes its quantisation constants with QLoRA's double quantisation (block 64, then 256).
#: ``fp8`` is e4m3 with one fp32 scale per tensor: the scale is a few bytes per matrix, not counted.
#: ``int4`` is bare 4 bits, no scales; ``int4-g128`` adds AWQ/GPTQ's group scales and zero points; ``q8_0``,
#: ``q4_0``, ``q4_k`` and ``q6_k`` are llama.cpp's GGUF block types with their scales.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "nf4": (4 + 8 / 64 + 32 / (64 * 256)) / 8,
    "q8_0": Q8_0_BITS / 8,
    "q6_k": Q6_K_BITS / 8,
    "q4_0": Q4_0_BITS / 8,
    "q4_k": Q4_K_BITS / 8,
    "int4-g128": INT4_G128_BITS / 8,
}

DTYPES = tuple(DTYPE_BYTES)


@dataclass(frozen=True)
class StoredFormat:
    """Which tensors a GGUF file type stores in which block type (llama.cpp ``llama_tensor_get_type``).

    ``blocks`` is the type of the transformer blocks' matrices, ``embedding`` of the token (and position)
    embeddings, ``lm_head`` of the output matrix (with tied embeddings llama.cpp has no output tensor and gives
    the embedding the output's type). ``more_bits`` is the type Q4_K_M gives ``attn_v`` and ``ffn_down`` in the
    layers llama.cpp's ``use_more_bits`` picks (the first and last eighth of the layers and every third one in
    between: about half). Vectors (norms, biases) stay in fp32."""

    name: str
    blocks: str
    embedding: str
    lm_head: str
    more_bits: str | None = None


#: The GGUF file types the library knows, by the name :func:`llmsizing.inference.weights_bytes` takes. In
#: llama.cpp every file type below Q8_0 stores the output matrix in Q6_K; the embedding keeps the file type's
#: own block type. Other quantised formats (``fp8``, ``int8``, ``int4``, ``int4-g128``, ``nf4``) quantise the
#: blocks' matrices only and keep embeddings and LM head in 16 bits, as vLLM, bitsandbytes, AutoAWQ and
#: AutoGPTQ do by default.
STORED_FORMATS: dict[str, StoredFormat] = {f.name: f for f in (
    StoredFormat("q8_0", "q8_0", "q8_0", "q8_0"),
    StoredFormat("q6_k", "q6_k", "q6_k", "q6_k"),
    StoredFormat("q4_0", "q4_0", "q4_0", "q6_k"),
    StoredFormat("q4_k", "q4_k", "q4_k", "q6_k"),
    StoredFormat("q4_k_m", "q4_k", "q4_k", "q6_k", more_bits="q6_k"),
)}

#: Every weight format :func:`llmsizing.inference.weights_bytes` and serving take: the element types plus the
#: GGUF mixtures (``q4_k_m``).
WEIGHT_DTYPES = DTYPES + tuple(f for f in STORED_FORMATS if f not in DTYPE_BYTES)
#: Weight-only formats: they describe how matrices are stored for inference, never a KV cache or training.
#: llama.cpp's cache types include ``q8_0`` and ``q4_0``, so those two stay allowed for the KV cache.
WEIGHT_ONLY = ("q6_k", "q4_k", "q4_k_m", "int4-g128")
#: Formats a KV cache can be stored in.
KV_DTYPES = tuple(d for d in DTYPES if d not in WEIGHT_ONLY)


def use_more_bits(layer: int, layers: int) -> bool:
    """llama.cpp's rule for the layers whose ``attn_v`` and ``ffn_down`` Q4_K_M raises to Q6_K: the first and
    last eighth of the layers, and every third layer in between (integer arithmetic, as in llama.cpp)."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def check_recipe(name: str, value) -> str:
    """Check a training recipe name (:data:`RECIPES`). A weight format such as ``q4_k`` is refused with the
    reason: it stores frozen weights for inference, and no recipe trains in it."""
    quantised = isinstance(value, str) and (value in STORED_FORMATS or DTYPE_BYTES.get(value, 2.0) < 2.0)
    if quantised:
        raise ValueError(f"{name}={value!r} is a storage format for weights, not a training recipe: training keeps "
                         f"trainable weights in 16 or 32 bits. Choose one of {', '.join(RECIPES)} (quantised "
                         f"frozen weights are QLoRA's: llmsizing.finetune)")
    return check_choice(name, value, RECIPES)


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
