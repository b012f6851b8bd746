"""Bytes per element, training recipes and optimizers (chapter 2, "Bytes per parameter").

Sources:

* Mixed precision with an fp32 master copy: Micikevicius et al. 2018, "Mixed Precision Training".
* 16 bytes/param for mixed-precision Adam: Rajbhandari et al. 2020, "ZeRO" (Sec. 3.1: 2 + 2 + K with K = 12).
* 18 bytes/param with fp32 gradient accumulation: Megatron-LM
  ``megatron/training/theoretical_memory_usage.py`` (6 bytes weights+grads, 12 optimizer, without the
  distributed optimizer).
* nf4 with double quantisation: Dettmers et al. 2023, "QLoRA" (Sec. 3: 4 + 8/64 + 32/(64*256) bits).
* 8-bit Adam: Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization" (the paper's blocks of
  2048 values, one fp32 absmax each); bitsandbytes uses blocks of 256 since 0.44.0 (2024-09, PR #1365,
  "Change 8bit optimizer blocksize 2048->256"; ``optim/optimizer.py``, ``Optimizer2State.init_state``).
* Weight formats as inference engines store them (:data:`STORED_FORMATS`): llama.cpp's GGUF blocks
  (``ggml/src/ggml-common.h``: ``block_q8_0``, ``block_q4_0``, ``block_q4_K``, ``block_q6_K``) and its
  per-tensor choices (``src/llama-quant.cpp``, ``llama_tensor_get_type``); AutoAWQ's and AutoGPTQ's packed
  int4 with group 128 (``qweight``/``qzeros`` packed eight 4-bit values to an int32, ``scales`` in fp16);
  FP8 e4m3 with one scale per tensor (vLLM's and TensorRT-LLM's default FP8 checkpoints).
* Adafactor: Shazeer & Stern 2018 (factored second moment: r + c numbers for an r x c matrix, no momentum by
  default). Lion: Chen et al. 2023 (one momentum buffer).
* Muon: Jordan et al. 2024, "Muon: An optimizer for hidden layers in neural networks" (one momentum buffer per
  hidden 2-D matrix, orthogonalised by Newton-Schulz; the embedding, the output layer and the vectors go to
  AdamW); Liu et al. 2025, "Muon is Scalable for LLM Training" (arXiv:2502.16982, Moonlight), and Kimi K2
  (arXiv:2507.20534) train with it; ``torch.optim.Muon`` takes 2-D parameters only.
* FP8 training (:data:`FP8_SCHEMES`, recipes ``fp8-mixed`` and ``fp8-deepseek``): NVIDIA Transformer Engine
  2.20.0.dev0 (commit d0067d0d, 2026-08-22) as Megatron-LM's
  ``megatron/core/extensions/transformer_engine.py`` drives it, and the DeepSeek-V3 technical report
  (DeepSeek-AI 2024, arXiv:2412.19437, Sec. 3.3). What each counts, and from which lines, is written at
  :data:`FP8_SCHEMES`. Transformer Engine needs a CUDA GPU: it cannot run on the CPU-only machine the book is
  built on, so these counts are read from its source, not measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._compat import forward as _forward
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

#: Microscaling block formats (issue 36). OCP "Microscaling Formats (MX) Specification" v1.0 (2023), Sec. 5
#: and Table 1: a block of 32 elements shares one 8-bit E8M0 scale: MXFP4 (E2M1 elements) is
#: (32 x 4 + 8) / 32 = 4.25 bits, MXFP8 (E4M3/E5M2) 8.25 bits, MXFP6 (E2M3/E3M2) 6.25 bits. gpt-oss ships its
#: MoE weights in MXFP4 (OpenAI, gpt-oss model card 2025, Sec. 2.1: "4.25 bits per parameter").
MX_BLOCK = 32
MXFP4_BITS = (MX_BLOCK * 4 + 8) / MX_BLOCK
MXFP6_BITS = (MX_BLOCK * 6 + 8) / MX_BLOCK
MXFP8_BITS = (MX_BLOCK * 8 + 8) / MX_BLOCK
#: NVFP4 (NVIDIA Blackwell; NVIDIA technical blog "Introducing NVFP4 for efficient and accurate low-precision
#: inference", 2025, and Transformer Engine's ``NVFP4BlockScaling``): E2M1 elements, one FP8 (E4M3) scale per
#: block of 16, plus one FP32 scale per tensor (a few bytes per matrix, not counted): (16 x 4 + 8) / 16 = 4.5
#: bits.
NVFP4_BLOCK = 16
NVFP4_BITS = (NVFP4_BLOCK * 4 + 8) / NVFP4_BLOCK

#: Storage bytes per element. ``tf32`` is a tensor-core compute mode: it is stored as 32 bits.
#: ``nf4`` includes its quantisation constants with QLoRA's double quantisation (block 64, then 256).
#: ``fp8`` is e4m3 with one fp32 scale per tensor: the scale is a few bytes per matrix, not counted.
#: ``int4`` is bare 4 bits, no scales; ``int4-g128`` adds AWQ/GPTQ's group scales and zero points; ``q8_0``,
#: ``q4_0``, ``q4_k`` and ``q6_k`` are llama.cpp's GGUF block types with their scales. ``mxfp8``, ``mxfp6``,
#: ``mxfp4`` and ``nvfp4`` are the microscaling block formats with their block scales (above); ``fp6`` and
#: ``fp4`` are bare 6-bit and 4-bit elements with a per-tensor scale only (a 6-bit or FP4 KV cache).
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
    "mxfp8": MXFP8_BITS / 8,
    "mxfp6": MXFP6_BITS / 8,
    "fp6": 6 / 8,
    "mxfp4": MXFP4_BITS / 8,
    "nvfp4": NVFP4_BITS / 8,
    "fp4": 0.5,
}

#: Activation dtypes the activation models take (chapter 4; :mod:`llmsizing.act_terms`).
ACTIVATION_DTYPES = ("bf16", "fp16", "fp32")

DTYPES = tuple(DTYPE_BYTES)


@dataclass(frozen=True)
class StoredFormat:
    """Which tensors a GGUF file type stores in which block type (llama.cpp ``llama_tensor_get_type``).

    ``blocks`` is the type of the transformer blocks' matrices, ``embedding`` of the token (and position)
    embeddings, ``lm_head`` of the output matrix (with tied embeddings llama.cpp has no output tensor and
    gives the embedding the output's type). ``more_bits`` is the type Q4_K_M gives ``attn_v`` and ``ffn_down``
    in the layers llama.cpp's ``use_more_bits`` picks (the first and last eighth of the layers and every third
    one in between: about half). Vectors (norms, biases) stay in fp32."""

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

#: Checkpoints that store only the routed experts' matrices in a block format and keep everything else in
#: bf16: ``mxfp4-moe`` is gpt-oss as released (OpenAI 2025, gpt-oss model card Sec. 2.1: the MoE weights,
#: over 90% of the parameters, in MXFP4, the rest in BF16; Hugging Face ``quantization_config``
#: ``{"quant_method": "mxfp4", "modules_to_not_convert": [attention, router, embeddings, lm_head]}``).
EXPERT_FORMATS = {"mxfp4-moe": "mxfp4", "nvfp4-moe": "nvfp4"}

#: Every weight format :func:`llmsizing.inference.weights_bytes` and serving take: the element types plus the
#: GGUF mixtures (``q4_k_m``) and the expert-only block formats (:data:`EXPERT_FORMATS`).
WEIGHT_DTYPES = DTYPES + tuple(f for f in STORED_FORMATS if f not in DTYPE_BYTES) + tuple(EXPERT_FORMATS)
#: Weight-only formats: they describe how matrices are stored for inference, never a KV cache or training.
#: llama.cpp's cache types include ``q8_0`` and ``q4_0``, so those two stay allowed for the KV cache.
WEIGHT_ONLY = ("q6_k", "q4_k", "q4_k_m", "int4-g128") + tuple(EXPERT_FORMATS)
#: Formats a KV cache can be stored in.
KV_DTYPES = tuple(d for d in DTYPES if d not in WEIGHT_ONLY)


def use_more_bits(layer: int, layers: int) -> bool:
    """llama.cpp's rule for the layers whose ``attn_v`` and ``ffn_down`` Q4_K_M raises to Q6_K: the first and
    last eighth of the layers, and every third layer in between (integer arithmetic, as in llama.cpp)."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def check_recipe(name: str, value) -> str:
    """Check a training recipe name (:data:`RECIPES`). A weight format such as ``q4_k`` is refused with the
    reason: it stores frozen weights for inference, and no recipe trains in it."""
    quantised = isinstance(value, str) and value not in RECIPES and (value in STORED_FORMATS
                                                                      or DTYPE_BYTES.get(value, 2.0) < 2.0)
    if quantised:
        raise ValueError(f"{name}={value!r} is a storage format for weights, not a training recipe: training "
                         f"keeps trainable weights in 16 or 32 bits. Choose one of {', '.join(RECIPES)} "
                         f"(quantised frozen weights are QLoRA's: llmsizing.finetune"
                         + ("; FP8 training is the recipe 'fp8-mixed' or 'fp8-deepseek')" if value == "fp8"
                            else ")"))
    return check_choice(name, value, RECIPES)


def bytes_per_element(dtype: str) -> float:
    """Bytes one element of ``dtype`` occupies in memory (see :data:`DTYPE_BYTES`)."""
    return DTYPE_BYTES[check_choice("dtype", dtype, DTYPES)]


@dataclass(frozen=True)
class Fp8Scheme:
    """What an FP8 training recipe adds to, and changes in, a bf16 step: the FP8 copies of the Linear weights,
    the bytes of the Linear inputs it saves for the backward, and its scaling state. Bytes are per element,
    scales included (see :data:`FP8_SCHEMES` for the source of each number).

    ``weight_copy_bytes``: the FP8 copies of one Linear weight element that live through a step (and between
    steps when cached). ``input_bytes``: one element of a Linear's input saved for its backward.
    ``attn_out_bytes``: one element of the attention output projection's input (DeepSeek-V3 keeps it in a
    12-bit format); ``attn_out_shared``: the attention's own backward reads that same copy (DeepSeek-V3),
    instead of keeping its own 16-bit output as a flash kernel does. ``cache_act_input``: the MLP's activation
    (SwiGLU/GeLU) input is saved in FP8 and its output recomputed in the backward (DeepSeek-V3) instead of
    saving the activation's output as the next Linear's input. ``amax_history_len``: rows of the per-tensor
    amax history of delayed scaling (0: no history); ``tensors_per_gemm``: FP8 tensors with a scale per GEMM
    (3 forward + 2 backward in TE); ``gemms_per_layer``: the FP8 Linear modules of one transformer block
    (fused QKV, output projection, fused gate/up, down). ``gemm_dtype``: the tensor-core format its GEMMs
    run in, ``"fp8"`` or ``"fp4"`` (NVFP4), whose peak the run is timed at."""

    name: str
    weight_copy_bytes: float
    input_bytes: float
    attn_out_bytes: float
    cache_act_input: bool = False
    attn_out_shared: bool = False
    amax_history_len: int = 0
    tensors_per_gemm: int = 0
    gemms_per_layer: int = 4
    source: str = ""
    gemm_dtype: str = "fp8"

    @property
    def meta_bytes_per_layer(self) -> float:
        """Bytes of one block's scaling state: per FP8 tensor an fp32 amax history of ``amax_history_len``
        rows and one fp32 scale (TE ``quantization.py``, ``DelayedScalingRecipeState``: ``scale`` of shape
        ``(n,)`` and ``amax_history`` of shape ``(amax_history_len, n)``, fp32)."""
        return self.gemms_per_layer * self.tensors_per_gemm * 4.0 * (self.amax_history_len + 1)


#: TE's delayed scaling keeps 1,024 amax values per FP8 tensor by default (``common/recipe/__init__.py``,
#: ``DelayedScaling.amax_history_len: int = 1024``).
TE_AMAX_HISTORY_LEN = 1024
#: Megatron-LM overrides that default: ``--fp8-amax-history-len`` defaults to 1 (``megatron/training/
#: arguments.py``; ``TransformerConfig.fp8_amax_history_len = 1``) and ``TEDelayedScaling`` passes it to TE's
#: ``DelayedScaling``, so a Megatron run keeps one amax per FP8 tensor unless told otherwise.
MEGATRON_AMAX_HISTORY_LEN = 1
#: MXFP8 (Blackwell) and DeepSeek-V3 scale blocks: one scale per 32 elements (E8M0, 1 byte: TE
#: ``constants.py`` ``MXFP8_BLOCK_SCALING_SIZE = 32``), DeepSeek-V3's per 1 x 128 activation tile and per
#: 128 x 128 weight block (fp32, 4 bytes; report Sec. 3.3.2).
MXFP8_BLOCK = 32  # (= MX_BLOCK)
DEEPSEEK_TILE = 128

#: The FP8 recipes' schemes, by recipe name.
#:
#: ``fp8-mixed``: Transformer Engine's per-tensor FP8 (``DelayedScaling``, Megatron-LM's default
#: ``--fp8-recipe delayed``; ``Float8CurrentScaling`` stores the same tensors without the amax history) on
#: Hopper, whose FP8 GEMMs take only the "TN" layout:
#:
#: * weights: ``module/linear.py`` ``_linear_forward_impl`` asks the weight quantizer for row-wise and
#:   column-wise data whenever the input needs a gradient (``weight_quantizer.set_usage(rowwise=True,
#:   columnwise=columnwise_usage)``); ``tensor/float8_tensor.py`` ``inner_tensor_specs`` allocates ``_data``
#:   for row-wise and a separate ``_transpose`` for column-wise use on a GPU without non-TN FP8 GEMMs: 1 + 1
#:   = 2 bytes per weight element (one fp32 ``_scale_inv`` per tensor: not counted). ``Linear.forward`` keeps
#:   the result in ``self._fp8_workspaces["weight"]`` whenever ``is_first_microbatch`` is not ``None``, and
#:   Megatron-LM passes it unless ``disable_parameter_transpose_cache``: the copies persist across
#:   micro-batches and steps (without the cache they are remade each forward and saved for the backward: alive
#:   at the same peak);
#: * saved inputs: the input is quantized, then "Discard row-wise data since it is not needed in backward
#:   pass" (``inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)``) leaves one FP8 copy: 1 byte
#:   per element; ``module/layernorm_linear.py`` saves the norm's input in bf16, its fp32 statistics and its
#:   FP8 output (QKV and fc1 inputs); the attention kernel (not FP8 by default) saves its own bf16 output, so
#:   the output projection's input is kept twice (bf16 + FP8);
#: * scaling state: 3 forward + 2 backward FP8 tensors per GEMM (``module/base.py``: "Max. number of fp8
#:   tensors per GEMM = 3 (input, weight, output) for fwd and 2 (grad_output and grad_input) for bwd"), each
#:   with Megatron-LM's one fp32 amax value (:data:`MEGATRON_AMAX_HISTORY_LEN`; TE alone keeps 1,024) and a
#:   scale.
#:
#: On Blackwell TE's default is MXFP8 (``quantization.py`` ``get_default_fp8_recipe``): row-wise and
#: column-wise copies each with an E8M0 scale per 32 elements, 2 x (1 + 1/32) = 2.0625 bytes per weight
#: element; not a recipe here (0.06 bytes from ``fp8-mixed``).
#:
#: ``fp8-deepseek``: DeepSeek-V3 (Sec. 3.3): FP8 (E4M3) GEMMs with one fp32 scale per 128 x 128 weight block
#: (the same blocks serve the transposed GEMM of the backward: one copy, 1 + 4/128^2 bytes) and per 1 x 128
#: activation tile (1 + 4/128 bytes per saved input); the attention output projection's input in E5M6
#: (12 bits, 1.5 + 4/128 bytes), which the attention operator's backward also reads ("these activations are
#: also used in the backward pass of the attention operator"), so it is kept once; the SwiGLU input cached in
#: FP8 and its output recomputed (the report says so for the MoE experts; applied here to every gated MLP). No
#: delayed scaling: no amax history. Its recomputation of every RMSNorm and of MLA's up-projections (Sec.
#: 3.2.3) is a recomputation choice, not part of the recipe: :func:`llmsizing.moe.deepseek_memory` models the
#: whole of DeepSeek's memory plan.
FP8_SCHEMES: dict[str, Fp8Scheme] = {s.name: s for s in (
    Fp8Scheme("fp8-mixed", weight_copy_bytes=2.0, input_bytes=1.0, attn_out_bytes=1.0,
              amax_history_len=MEGATRON_AMAX_HISTORY_LEN, tensors_per_gemm=5,
              source="Transformer Engine 2.20.0.dev0 (d0067d0d) DelayedScaling with Megatron-LM, Hopper"),
    Fp8Scheme("fp8-deepseek", weight_copy_bytes=1.0 + 4 / DEEPSEEK_TILE ** 2,
              input_bytes=1.0 + 4 / DEEPSEEK_TILE, attn_out_bytes=1.5 + 4 / DEEPSEEK_TILE,
              cache_act_input=True, attn_out_shared=True,
              source="DeepSeek-V3 technical report (arXiv:2412.19437), Sec. 3.3"),
    # MXFP8 (TE MXFP8BlockScaling, Blackwell's default): row-wise and column-wise copies, each with an E8M0
    # scale per 32 elements (OCP MX v1.0); no amax history
    Fp8Scheme("mxfp8", weight_copy_bytes=2 * MXFP8_BITS / 8, input_bytes=MXFP8_BITS / 8,
              attn_out_bytes=MXFP8_BITS / 8,
              source="Transformer Engine MXFP8BlockScaling (MXFP8_BLOCK_SCALING_SIZE = 32); OCP MX v1.0"),
    # NVFP4 (TE NVFP4BlockScaling; NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv:2509.25149,
    # Sec. 4): E2M1 with an E4M3 scale per 16 elements (16 x 16 blocks for weights, so one copy serves both
    # GEMM layouts is NOT assumed: row- and column-wise copies as TE stores them) and a per-tensor fp32 scale
    Fp8Scheme("nvfp4", weight_copy_bytes=2 * NVFP4_BITS / 8, input_bytes=NVFP4_BITS / 8,
              attn_out_bytes=NVFP4_BITS / 8, gemm_dtype="fp4",
              source="Transformer Engine NVFP4BlockScaling; arXiv:2509.25149 Sec. 4 (blocks of 16, E4M3 "
                     "scales)"),
)}


@dataclass(frozen=True)
class Recipe:
    """How a training recipe stores the model states.

    ``weights`` and ``grads`` are the dtypes of the working weights and gradients; ``master`` the dtype of an
    optimizer-owned master copy (``None`` if the working weights are the master); ``extra_grads`` the dtype of
    a second gradient buffer if the recipe keeps one; ``states`` the dtype the optimizer keeps its moments in.
    ``autocast`` marks a recipe that runs the forward under ``torch.autocast``: fp32 weights, 16-bit matrix
    multiplies on cached 16-bit weight copies, and a mix of fp32 and 16-bit activations. ``fp8`` names the
    recipe's FP8 scheme (:data:`FP8_SCHEMES`): its matrix multiplies run on FP8 tensor cores.
    """

    name: str
    weights: str
    grads: str
    master: str | None
    states: str
    extra_grads: str | None = None
    description: str = ""
    autocast: bool = False
    fp8: str | None = None

    @property
    def scheme(self) -> Fp8Scheme | None:
        """The recipe's :class:`Fp8Scheme`, or ``None`` for a 16/32-bit recipe."""
        return FP8_SCHEMES[self.fp8] if self.fp8 else None

    @property
    def compute_dtype(self) -> str:
        """The tensor-core format of the recipe's matrix multiplies: ``"fp8"`` for an FP8 recipe (``"fp4"``
        for ``nvfp4``), else
        ``"bf16"`` (whose peak an fp16 or fp32 recipe is priced at, as the book always has)."""
        return FP8_SCHEMES[self.fp8].gemm_dtype if self.fp8 else "bf16"


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe("fp32", "fp32", "fp32", None, "fp32",
           description="Everything in fp32: 4 + 4 + optimizer states (8 for Adam) = 16 B/param."),
    Recipe("bf16-mixed", "bf16", "bf16", "fp32", "fp32",
           description="bf16 weights and grads, fp32 master + Adam moments: 2 + 2 + 12 = 16 B/param (ZeRO "
                       "paper)."),
    Recipe("fp16-mixed", "fp16", "fp16", "fp32", "fp32",
           description="As bf16-mixed with fp16 (plus a loss scale, a few bytes in total): 16 B/param."),
    Recipe("bf16-mixed-fp32-grads", "bf16", "fp32", "fp32", "fp32",
           description="Megatron-LM's default: gradients accumulated in fp32: 2 + 4 + 12 = 18 B/param."),
    Recipe("bf16-mixed-dual-grads", "bf16", "bf16", "fp32", "fp32", extra_grads="fp32",
           description="16-bit grads plus an fp32 copy for the optimizer step (DeepSpeed ZeRO-1/2 style): "
                       "2 + 2 + 4 + 12 = 20 B/param, two more than Transformer Math 101's fp32-gradient 18."),
    Recipe("bf16", "bf16", "bf16", None, "bf16",
           description="Pure bf16, no master copy: 2 + 2 + 4 = 8 B/param for Adam (risky: small updates "
                       "round away)."),
    Recipe("bf16-amp", "fp32", "fp32", None, "fp32", autocast=True,
           description="fp32 weights, gradients and Adam moments under torch.autocast(bf16), what the "
                       "Hugging Face Trainer's bf16=True runs on a model loaded in fp32, on one GPU or "
                       "under DDP: 4 + 4 + 8 = 16 B/param, plus about 2 B/param of cached bf16 weight copies "
                       "during forward and backward (with FSDP, Accelerate sets a bf16 MixedPrecision "
                       "policy: no copies, closer to bf16-mixed)."),
    Recipe("fp8-mixed", "bf16", "fp32", "fp32", "fp32", fp8="fp8-mixed",
           description="Transformer Engine FP8 with Megatron-LM: bf16 weights, fp32 gradients (main_grad), "
                       "fp32 master + Adam moments, plus FP8 copies of every Linear weight and its "
                       "transpose: 2 + 4 + 12 + 2 = 20 B per Linear parameter."),
    Recipe("fp8-deepseek", "bf16", "fp32", "fp32", "bf16", fp8="fp8-deepseek",
           description="DeepSeek-V3's FP8: bf16 weights, fp32 gradients and master, bf16 Adam moments, one "
                       "FP8 copy per Linear weight (128 x 128 blocks): 2 + 4 + 4 + 4 + 1 = 15 B per Linear "
                       "parameter."),
    Recipe("mxfp8", "bf16", "fp32", "fp32", "fp32", fp8="mxfp8",
           description="Blackwell MXFP8 (Transformer Engine MXFP8BlockScaling): bf16 weights, fp32 "
                       "gradients, fp32 master + Adam moments, plus row- and column-wise MXFP8 copies of "
                       "every Linear weight (8.25 bits each): 2 + 4 + 12 + 2.06 = 20.06 B per Linear "
                       "parameter; GEMMs at the FP8 peak."),
    Recipe("nvfp4", "bf16", "fp32", "fp32", "fp32", fp8="nvfp4",
           description="NVFP4 pretraining (arXiv:2509.25149): bf16 weights, fp32 gradients, master and Adam "
                       "moments, row- and column-wise NVFP4 copies of every Linear weight (4.5 bits each): "
                       "2 + 4 + 12 + 1.125 = 19.125 B per Linear parameter; GEMMs at the FP4 peak."),
)}


def compute_dtype(precision: str = "bf16-mixed", dtype: str | None = None) -> str:
    """The one place that decides which dense peak (and calibrated efficiency and MFU band) a run is timed at.

    ``dtype=None``: the recipe's own (:attr:`Recipe.compute_dtype`: ``"fp8"`` for ``fp8-mixed`` and
    ``fp8-deepseek``, ``"bf16"`` otherwise). An explicit ``dtype`` is kept, as before FP8 recipes existed
    (``dtype="fp8"`` with a 16-bit recipe: FP8 matrix multiplies with that recipe's memory, as torchtitan's
    Float8 without weight caching), except that an FP8 recipe at a 16-bit rate is refused: its GEMMs are
    FP8."""
    recipe = RECIPES[check_recipe("precision", precision)]
    if dtype is None:
        return recipe.compute_dtype
    dtype = check_choice("dtype", dtype, ("bf16", "fp16", "fp8", "fp4"))
    if recipe.fp8 and dtype != recipe.compute_dtype:
        raise ValueError(f"dtype={dtype!r} with precision={precision!r}: an {recipe.compute_dtype.upper()} "
                         f"recipe runs its matrix multiplies in {recipe.compute_dtype.upper()}; use "
                         f"dtype={recipe.compute_dtype!r} or leave dtype out")
    return dtype


@dataclass(frozen=True)
class Optimizer:
    """An optimizer's per-parameter state. ``states`` is the number of full-size buffers; ``factored`` marks
    Adafactor's factored second moment (r + c numbers per r x c matrix); ``dtype`` forces the state dtype
    (8-bit optimizers) and ``block`` is the quantisation block (one fp32 constant per block).
    ``matrix_states``: the buffers of the hidden matrices (the blocks' tensors of two or more dimensions) when
    they differ from the rest, as with Muon, whose hidden matrices keep one momentum buffer while the
    embedding, the output layer and the vectors keep AdamW's two (``states``)."""

    name: str
    states: int
    factored: bool = False
    dtype: str | None = None
    block: int | None = None
    description: str = ""
    matrix_states: int | None = None

    @property
    def shape_dependent(self) -> bool:
        """Whether the state depends on the tensors' shapes (Adafactor, Muon): it needs a model, not a bare
        parameter count."""
        return self.factored or self.matrix_states is not None


OPTIMIZERS: dict[str, Optimizer] = {o.name: o for o in (
    Optimizer("sgd", 0, description="Plain SGD keeps no state."),
    Optimizer("sgd-momentum", 1, description="One momentum buffer."),
    Optimizer("adam", 2, description="First and second moments."),
    Optimizer("adamw", 2, description="Adam with decoupled weight decay: same state as Adam."),
    # bitsandbytes keeps fp32 states for tensors under min_8bit_size = 4,096 elements (norms and biases of
    # small models: under 0.1% of GPT-2's parameters, none of Llama 3 8B, whose norms have 4,096): not counted
    Optimizer("adamw-8bit", 2, dtype="int8", block=256,
              description="Both moments block-wise quantised to 8 bits (bitsandbytes >= 0.44, block 256)."),
    Optimizer("adafactor", 0, factored=True,
              description="Factored second moment, no momentum (Adafactor defaults)."),
    Optimizer("lion", 1, description="One momentum buffer (sign-based update)."),
    Optimizer("muon", 2, matrix_states=1,
              description="One momentum buffer per hidden matrix (Muon), AdamW's two moments for the "
                          "embedding, the output layer and the vectors."),
)}


# recipe_tensor_table reads the model states of llmsizing.memory, above this module (issue 32).
__getattr__ = _forward(__name__, {"recipe_tensor_table": "llmsizing.memory"})
