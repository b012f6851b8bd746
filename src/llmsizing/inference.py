"""Inference memory: weights + KV cache + an overhead allowance (chapter 3, "Inference memory").

Sources: the KV cache holds K and V for every layer, KV head and position (Pope et al. 2022, "Efficiently
Scaling Transformer Inference"; grouped-query attention, Ainslie et al. 2023, divides it by
``heads / kv_heads``). The rule of thumb it is compared with, memory = 1.2 x weights, is EleutherAI's
"Transformer Math 101" and seed article 002.

Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434, Sec. 2.1.2; DeepSeek-V3) caches one latent vector
of ``kv_lora_rank`` numbers and one rotary key of ``qk_rope_head_dim`` numbers per layer and token, shared by
all heads: (512 + 64) = 576 numbers for DeepSeek-V3, against ``2 x kv_heads x head_dim`` for grouped-query
attention. This is the compressed cache vLLM and SGLang keep (vLLM
``vllm/v1/attention/backends/mla/common.py``: "a single latent vector to represent the per-token entry of the
KV cache"); Hugging Face's ``DeepseekV3Attention`` (any backend) instead caches the expanded per-head keys and
values (``heads x (qk_nope + qk_rope + v_head_dim)`` numbers: 40,960 for DeepSeek-V3, 71 times more), which
this module does not model. A mixture of experts keeps every expert resident: its weights are
:attr:`Model.n_params <llmsizing.model.Model.n_params>`, not its active parameters. Taught in chapter 3
("Multi-head latent attention: a smaller cache").
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ._validate import MAX_MEANINGFUL, check_bool, check_choice, check_int, check_number, check_sequence
from .catalog import get_gpu, resolve_model
from .layer_kinds import kv_groups
from .states import FIXED_OVERHEAD_BYTES, _frame, default_overhead_bytes, peak_room_bytes
from .model import Model
from .precision import DTYPE_BYTES, EXPERT_FORMATS, KV_DTYPES, STORED_FORMATS, WEIGHT_DTYPES, use_more_bits

#: The rule of thumb the chapter checks: total = RULE_OF_THUMB x weights.
RULE_OF_THUMB = 1.2


def weights_bytes(model: Model | str, dtype: str = "bf16", *, quantize_all: bool = False) -> float:
    """Bytes of the weights stored in ``dtype`` (any of :data:`llmsizing.precision.WEIGHT_DTYPES`).

    Quantised formats (below 2 bytes) apply to the transformer blocks' linear layers only; embeddings,
    LM head, norms and biases stay in bf16, as vLLM's FP8, bitsandbytes, GPTQ and AWQ leave them by default.
    ``int4`` is exactly half a byte (no scales); ``int4-g128`` adds AWQ/GPTQ's fp16 scale and 4-bit zero point
    per group of 128 (4.156 bits); ``nf4`` includes its quantisation constants (QLoRA).
    The GGUF file types (:data:`llmsizing.precision.STORED_FORMATS`: ``q8_0``, ``q6_k``, ``q4_0``, ``q4_k``,
    ``q4_k_m``) follow llama.cpp's per-tensor choices instead: the embedding in the file type's block type,
    the output matrix in Q6_K below Q8_0 (with tied embeddings, the embedding takes the output's type),
    Q4_K_M's ``attn_v`` and ``ffn_down`` in Q6_K in the layers of :func:`llmsizing.precision.use_more_bits`,
    and vectors in fp32.
    ``mxfp4-moe``/``nvfp4-moe`` store the routed experts' matrices in MXFP4/NVFP4 (4.25/4.5 bits with their
    block scales) and the rest, the experts' biases included, in bf16, as gpt-oss is released
    (:data:`llmsizing.precision.EXPERT_FORMATS`);
    ``mxfp4``, ``nvfp4``, ``mxfp8`` alone quantise every block matrix.
    ``quantize_all=True`` gives the naive figure ``n_params x bytes`` instead (every tensor in ``dtype``; a
    GGUF mixture in its blocks' type), to show how much the 16-bit embeddings cost. Taught in chapter 3 and
    chapter 15 ("Weight formats as engines store them").
    """
    model = resolve_model(model, moe=True)     # every expert is resident
    check_bool("quantize_all", quantize_all)
    dtype = check_choice("dtype", dtype, WEIGHT_DTYPES)
    if dtype in EXPERT_FORMATS:              # routed experts in a block format, the rest bf16 (gpt-oss)
        if not model.is_moe:
            raise ValueError(f"dtype={dtype!r} stores a mixture of experts' routed experts; "
                             f"{model.name!r} has none: use the element format alone")
        routed = model.routed_expert_params
        return _expert_format_bytes(model, dtype) + (model.n_params - routed) * DTYPE_BYTES["bf16"]
    gguf = STORED_FORMATS.get(dtype)
    bpe = DTYPE_BYTES[gguf.blocks if gguf else dtype]
    if quantize_all or (bpe >= 2 and not gguf):
        return model.n_params * bpe
    return _mixed_bytes(model, dtype)


def _expert_format_bytes(model: Model, dtype: str) -> float:
    """Bytes of the routed experts in an expert-only block format (:data:`EXPERT_FORMATS`), as gpt-oss is
    released: the expert matrices (``(experts, out, in)`` tensors) in the block format with its scales, the
    experts' biases (``(experts, out)``) in bf16. gpt-oss's checkpoint stores ``*_blocks`` and ``*_scales``
    (uint8) for the matrices and ``gate_up_proj_bias`` / ``down_proj_bias`` in BF16; for gpt-oss-120b the
    biases are 39.8M numbers, 0.05 GiB more than in MXFP4, which brings the checkpoint to the model card's
    60.8 GiB."""
    matrices = sum(math.prod(s) * k for _, n, s, k in model.tensors()
                   if n.startswith("layers.experts.") and len(s) >= 3)
    return (matrices * DTYPE_BYTES[EXPERT_FORMATS[dtype]]
            + (model.routed_expert_params - matrices) * DTYPE_BYTES["bf16"])


@functools.lru_cache(maxsize=512)
def _mixed_bytes(model: Model, dtype: str) -> float:
    """:func:`weights_bytes` of a quantised or GGUF ``dtype`` (checked), tensor by tensor. Kept per (Model,
    dtype): a serving search prices hundreds of steps of one model (issue 38: chapter 15's fleet widget
    called this ~2,000 times a move)."""
    gguf = STORED_FORMATS.get(dtype)
    bpe = DTYPE_BYTES[gguf.blocks if gguf else dtype]
    total = 0.0
    for comp, name, shape, k in model.tensors():
        n = math.prod(shape) * k
        # a matrix: 2-D, or 3-D for a mixture of experts' routed experts ((experts, out, in)); their biases,
        # (experts, out), stay as the other vectors do (as _expert_format_bytes reads gpt-oss's checkpoint)
        matrix = len(shape) >= (3 if name.startswith("layers.experts.") else 2)
        if not gguf:
            total += n * (bpe if comp in ("attention", "mlp") and matrix else DTYPE_BYTES["bf16"])
            continue
        if not matrix:
            total += n * DTYPE_BYTES["fp32"]
        elif comp == "lm_head" or (comp == "embedding" and model.tied_embeddings):
            total += n * DTYPE_BYTES[gguf.lm_head]
        elif comp in ("embedding", "position"):
            total += n * DTYPE_BYTES[gguf.embedding]
        elif gguf.more_bits and name in ("layers.v_proj.weight", "layers.down_proj.weight"):
            bumped = sum(use_more_bits(i, k) for i in range(k))
            per = n // k
            total += per * (bumped * DTYPE_BYTES[gguf.more_bits] + (k - bumped) * bpe)
        else:
            total += n * bpe
    return total


def moe_experts_touched(model: Model | str, batch: int) -> float:
    """Expected number of DISTINCT routed experts a decode step over ``batch`` tokens reads in ONE MoE layer:
    ``E (1 - (1 - k / E)^B)`` for ``E`` routed experts, ``k`` per token and ``B`` tokens.

    Each token picks ``k`` of ``E`` experts; under uniform routing a given expert escapes one token with
    probability ``1 - k / E`` and all ``B`` tokens with ``(1 - k / E)^B`` (tokens independent), so the
    expected count touched is ``E`` times the complement. Mixtral (``E = 8``, ``k = 2``): 2 at ``B = 1``,
    5.47 at ``B = 4``, 7.999 at ``B = 64``. This is an assumption: real routers are skewed (some experts are
    popular, and a sequence's consecutive tokens tend to pick the same ones), which concentrates a batch on
    FEWER distinct experts than uniform routing, so for a given batch the formula is an UPPER bound on the
    expert bytes a step reads (the bound is exact at ``B = 1``, ``k`` experts, and as ``B`` grows, all ``E``).
    Chapter 15, "Serving a mixture of experts". A dense model touches 0 experts (it has none)."""
    model = resolve_model(model, moe=True)
    batch = check_int("batch", batch)
    if not model.is_moe:
        return 0.0
    e, k = model.experts, model.experts_per_token
    return e * (1.0 - (1.0 - k / e) ** batch)


def routed_expert_bytes(model: Model | str, dtype: str = "bf16") -> float:
    """Bytes of ALL routed experts of all MoE layers in ``dtype`` (the matrices of
    :attr:`Model.routed_expert_params <llmsizing.model.Model.routed_expert_params>`; 0 for a dense model).
    Routed experts are linear layers, so a quantised format applies to them at its block type's bytes per
    number (as :func:`weights_bytes` does); a GGUF file's Q6_K ``ffn_down`` layers are not singled out here
    (an approximation under 5% of the experts' bytes for Q4_K_M)."""
    model = resolve_model(model, moe=True)
    dtype = check_choice("dtype", dtype, WEIGHT_DTYPES)
    if dtype in EXPERT_FORMATS:         # mxfp4-moe: matrices in MXFP4, biases in bf16 (gpt-oss as released)
        return _expert_format_bytes(model, dtype)
    gguf = STORED_FORMATS.get(dtype)
    return model.routed_expert_params * DTYPE_BYTES[gguf.blocks if gguf else dtype]


def moe_expert_bytes_read(model: Model | str, batch: int, dtype: str = "bf16") -> float:
    """Routed-expert bytes one decode step over ``batch`` tokens reads, all MoE layers together:
    :func:`routed_expert_bytes` ``x`` :func:`moe_experts_touched` ``/ E``, that is ``routed bytes x (1 - (1 -
    k/E)^B)`` (uniform routing: an upper bound for a real, skewed router; see :func:`moe_experts_touched`).
    The one place the serving model prices experts (:func:`decode_weight_bytes_read`). 0 for a dense model."""
    model = resolve_model(model, moe=True)
    routed = routed_expert_bytes(model, dtype)       # (checks dtype, for a dense model too)
    touched = moe_experts_touched(model, batch)
    return routed * touched / model.experts if model.is_moe else 0.0


@functools.lru_cache(maxsize=512)
def _lookup_tables(model: Model, dtype: str) -> tuple[tuple[int, int, float], ...]:
    """The weight matrices a forward pass GATHERS rows of instead of reading: ``(rows, numbers per row,
    bytes per number)`` for the input embedding when it is untied, learned positions and any other table of
    the ``embedding`` component (segment, prompt, Gemma 3n's per-layer embeddings). Bytes per number as
    :func:`weights_bytes` stores them (16-bit under a linear-layer format, the file's embedding type in a
    GGUF file). Kept per (Model, dtype), as a tuple (issue 38: a serving search reads them per step)."""
    gguf = STORED_FORMATS.get(dtype)
    if dtype in EXPERT_FORMATS:
        per = DTYPE_BYTES["bf16"]
    elif not gguf:
        per = max(DTYPE_BYTES[dtype], DTYPE_BYTES["bf16"])
    tables = []
    for comp, name, shape, k in model.tensors():
        if comp not in ("embedding", "position") or len(shape) < 2:
            continue
        if comp == "embedding" and model.tied_embeddings and name == "embed_tokens.weight":
            continue                        # the same matrix is the LM head: read in full
        if gguf:        # (a tied model's other tables take the output's type, as in weights_bytes)
            tied = comp == "embedding" and model.tied_embeddings
            per = DTYPE_BYTES[gguf.lm_head if tied else gguf.embedding]
        tables.append((shape[0] * k, math.prod(shape[1:]), per))
    return tuple(tables)


def lookup_table_rows(model: Model | str, dtype: str = "bf16") -> list[tuple[int, float]]:
    """The tables a forward step gathers rows of (:func:`dense_weight_bytes_read`): ``(rows, bytes per
    row)`` for each, in ``dtype`` as :func:`weights_bytes` stores them; empty for a tied model with no other
    table. Chapter 6's roofline solves its ridge batch with them (:func:`llmsizing.hardware.
    decode_compute_bound_batch`)."""
    model = resolve_model(model, moe=True)
    dtype = check_choice("dtype", dtype, WEIGHT_DTYPES)
    return [(rows, width * per) for rows, width, per in _lookup_tables(model, dtype)]


def dense_weight_bytes_read(model: Model | str, batch: int, dtype: str = "bf16") -> float:
    """Weight bytes one forward step over ``batch`` tokens reads, routed experts left out (whole model, one
    GPU's worth before any split): :func:`weights_bytes` less the routed experts
    (:func:`routed_expert_bytes`), with every lookup table charged only the rows the step gathers,
    ``min(batch, rows) x numbers per row x bytes``, instead of the whole table.

    The input embedding is a gather, not a matmul: vLLM's ``VocabParallelEmbedding.forward``
    (``vllm/model_executor/layers/vocab_parallel_embedding.py``) masks the token ids to its shard and calls
    ``quant_method.embedding``, which for unquantised weights is ``F.embedding(input_, layer.weight)``
    (``UnquantizedEmbeddingMethod``), and PyTorch's embedding kernel reads only the indexed rows; llama.cpp
    builds the same step as ``ggml_get_rows(ctx0, tok_embd, inp->tokens)``. So an untied embedding costs a
    step ``batch x hidden x bytes`` (8 KB per token for Llama 3 8B, against its 1.05 GB table), as do
    learned positions (GPT-2) and the other tables of the ``embedding`` component. With tied embeddings the
    same matrix is the LM head, a matmul over the whole vocabulary, and stays read in full; an untied LM head
    is read in full too. The same convention as :func:`llmsizing.flops.matmul_params`. Chapter 15."""
    model = resolve_model(model, moe=True)
    batch = check_int("batch", batch)
    dtype = check_choice("dtype", dtype, WEIGHT_DTYPES)
    total = weights_bytes(model, dtype) - routed_expert_bytes(model, dtype)
    for rows, width, per in _lookup_tables(model, dtype):
        total -= (rows - min(batch, rows)) * width * per
    return total


def decode_weight_bytes_read(model: Model | str, batch: int, dtype: str = "bf16") -> float:
    """Weight bytes one decode step over ``batch`` tokens reads (whole model, one GPU's worth before any
    split): every weight but the routed experts and the lookup tables once (attention, LM head, dense layers,
    the router, shared experts, which every token uses), the ``batch`` rows the step gathers from the input
    embedding (untied) and any other lookup table (:func:`dense_weight_bytes_read`), plus the routed experts
    the batch touches (:func:`moe_expert_bytes_read`).

    Llama 3 8B in bf16 (untied, vocabulary 128,256, hidden 4,096) at batch 1: its 16.06 GB less the
    128,256 x 4,096 x 2 B = 1.051 GB table plus one 8,192-byte row, 15.01 GB. Mixtral-8x7B in bf16 (untied,
    vocabulary 32,000, hidden 4,096) at batch 1: the 12,879,925,248 "active" parameters of its model card
    (input embedding included) as 2-byte numbers, 25.76 GB, less the 32,000 x 4,096 x 2 B = 0.262 GB table,
    plus one row: 25.50 GB; 93.1 GB by batch 64 (all 46.7B, less the same table). Chapter 15."""
    model = resolve_model(model, moe=True)
    return dense_weight_bytes_read(model, batch, dtype) + moe_expert_bytes_read(model, batch, dtype)


def kv_numbers_per_token_per_layer(model: Model | str, *, expanded: bool = False) -> int:
    """Numbers one token adds to ONE layer's KV cache: ``2 (K and V) x kv_heads x head_dim``, or with
    multi-head latent attention the compressed latent plus the shared rotary key,
    ``kv_lora_rank + qk_rope_head_dim`` (576 for DeepSeek-V3; see the module docstring). ``expanded=True``
    gives, for multi-head latent attention, the per-head keys and values Hugging Face's attention caches
    instead, ``heads x (qk_nope_head_dim + qk_rope_head_dim + v_head_dim)`` (40,960 for DeepSeek-V3); it
    changes nothing for other models. Chapter 3."""
    model = resolve_model(model, moe=True)
    if model.is_mla:
        if check_bool("expanded", expanded):
            return model.heads * (model.head_dim + model.v_head_dim)
        return model.kv_lora_rank + model.qk_rope_head_dim
    check_bool("expanded", expanded)
    return 2 * model.kv_heads * model.head_dim


def kv_cache_bytes_per_token(model: Model | str, dtype: str = "bf16") -> float:
    """KV-cache bytes one token adds: ``2 (K and V) x layers x kv_heads x head_dim x bytes``, over the
    attention layers only (:attr:`~llmsizing.model.Model.n_attention_layers`; a hybrid's Mamba layers keep a
    fixed state instead, :func:`state_bytes_per_sequence`).

    With multi-head latent attention, ``layers x (kv_lora_rank + qk_rope_head_dim) x bytes``
    (:func:`kv_numbers_per_token_per_layer`). A sparse-attention indexer (DeepSeek-V3.2) adds its key,
    ``head_dim`` numbers, in every layer that runs one, in the same ``dtype`` (transformers'
    ``update_indexer``; vLLM keeps it in FP8 with a scale)."""
    model = resolve_model(model, moe=True)
    n = model.n_attention_layers                        # state-space (Mamba) layers hold no KV cache
    idx = getattr(model, "indexer", None)               # a sparse-attention indexer caches one key per layer
    extra = 0 if idx is None else (n if idx.layers is None else idx.layers) * idx.head_dim
    if model.is_mla:
        return (n * kv_numbers_per_token_per_layer(model) + extra) \
            * DTYPE_BYTES[check_choice("dtype", dtype, KV_DTYPES)]
    return ((sum(k * w for k, w, _ in kv_groups(model)) + extra)   # windowed and full layers (Gemma 4)
            * DTYPE_BYTES[check_choice("dtype", dtype, KV_DTYPES)])


def state_bytes_per_sequence(model: Model | str, dtype: str = "bf16") -> float:
    """Bytes one sequence keeps in a model's state-space (Mamba) layers whatever its length: the
    convolution's last inputs and the SSM state of every mixer layer
    (:attr:`~llmsizing.model.Model.state_numbers_per_sequence`, as transformers' ``LinearAttentionLayer``
    cache holds them) in the cache's ``dtype``; 0 for a model without them. It is added once per sequence to
    the KV cache of the attention layers. Chapter 3."""
    model = resolve_model(model, moe=True)
    return model.state_numbers_per_sequence * DTYPE_BYTES[check_choice("dtype", dtype, KV_DTYPES)]


def kv_cached_tokens(model: Model | str, context: int) -> int:
    """Tokens one sequence keeps in the KV cache at ``context`` tokens: all of them, or at most the model's
    ``sliding_window``. A windowed layer never attends further back, so the reference implementation keeps a
    rolling buffer of ``window`` positions (Mistral's ``RotatingBufferCache``, Jiang et al. 2023, Sec. 2;
    Hugging Face's sliding-window cache). vLLM's KV-cache manager also reserves slots only for the last window
    of a sliding-window layer (vLLM docs, "Hybrid KV Cache Manager"), except in models that mix full and
    windowed layers when its hybrid allocator is off: there every layer gets blocks for every token, the
    uncapped figure (``model.with_(sliding_window=None)``). Taught in chapter 3.

    A model whose layers mix windowed and full attention (``window_layers``: Gemma 2 and gpt-oss alternate,
    Gemma 3 windows five layers in six) gets the average over its layers, a float:
    ``(window_layers x min(context, window) + other layers x context) / layers``, so that
    :func:`kv_cache_bytes_per_token` times it is the sequence's cache (vLLM's hybrid allocator keeps each
    group's own blocks)."""
    model = resolve_model(model, moe=True)
    context = check_int("context", context)
    if model.sliding_window is None:
        return context
    if model.window_layers is None:
        return min(context, model.sliding_window)
    if model.attention_layout is not None and not model.is_mla:    # layers of their own widths: weighted
        g = kv_groups(model)
        return sum(k * w * (min(context, model.sliding_window) if win else context) for k, w, win in g) \
            / sum(k * w for k, w, _ in g)
    nw, n = model.window_layers, model.n_attention_layers
    return (nw * min(context, model.sliding_window) + (n - nw) * context) / n


@dataclass(frozen=True)
class InferenceMemory:
    n_params: int
    batch: int
    context: int
    weights_bytes: float
    kv_cache_bytes: float
    overhead_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes + self.overhead_bytes

    @property
    def rule_of_thumb_bytes(self) -> float:
        """What the ``1.2 x weights`` rule predicts for the same weights."""
        return RULE_OF_THUMB * self.weights_bytes

    def to_frame(self):
        return _frame({"weights": self.weights_bytes, "KV cache": self.kv_cache_bytes,
                       "overhead": self.overhead_bytes, "total": self.total_bytes}, self.n_params)


def inference_memory(model: Model | str, *, batch: int = 1, context: int = 4096, weights: str = "bf16",
                     kv_cache: str = "bf16", overhead_bytes: float | None = None) -> InferenceMemory:
    """Memory to serve ``model`` to ``batch`` sequences of ``context`` tokens (prompt + generated).

    ``weights`` is a format of :data:`llmsizing.precision.WEIGHT_DTYPES` (GGUF and AWQ/GPTQ included),
    ``kv_cache`` one of :data:`llmsizing.precision.KV_DTYPES`. With a ``sliding_window``
    model the cache holds at most the window per sequence (:func:`kv_cached_tokens`). ``overhead_bytes``
    defaults to :func:`llmsizing.memory.default_overhead_bytes` of weights + cache (1 GiB + 8%): CUDA context,
    workspaces, the transient activations of a forward pass and fragmentation. A mixture of experts holds
    every expert (:func:`weights_bytes` of :attr:`~llmsizing.model.Model.n_params`); a multi-head latent
    attention model its compressed cache (:func:`kv_cache_bytes_per_token`). Taught in chapter 3.
    """
    model = resolve_model(model, moe=True)
    batch = check_int("batch", batch)
    context = check_int("context", context)
    check_choice("weights", weights, WEIGHT_DTYPES)    # checked here: an error names this function's argument
    check_choice("kv_cache", kv_cache, KV_DTYPES)
    w = weights_bytes(model, weights)
    kv = kv_cache_bytes_per_token(model, kv_cache) * batch * kv_cached_tokens(model, context) \
        + state_bytes_per_sequence(model, kv_cache) * batch
    if overhead_bytes is None:
        overhead = default_overhead_bytes(w + kv)
    else:
        overhead = check_number("overhead_bytes", overhead_bytes)
    return InferenceMemory(model.n_params, batch, context, w, kv, overhead)


def min_serving_gpus(memory: InferenceMemory, gpu, *,
                     fixed_bytes_per_gpu: float = FIXED_OVERHEAD_BYTES) -> int:
    """The fewest ``gpu`` (a catalogue name or GPU) that hold one serving replica of ``memory`` (an
    :class:`InferenceMemory` from :func:`inference_memory`), weights and KV cache split evenly over them
    (tensor parallelism: a lower bound), each GPU paying the fixed part of the allowance itself, its own CUDA
    context, workspaces and buffers. The smallest ``n`` with ``n x capacity >= (total - fixed) + n x fixed``:
    ``ceil((total - fixed) / (capacity - fixed))``, the whole capacity usable (``total`` carries its
    allowance). With the default allowance (1 GiB + 8%) that is ``ceil(1.08 (W + KV) / (capacity - 1 GiB))``,
    the count chapter 0 makes with :func:`~llmsizing.states.peak_room_bytes` and the per-GPU charge of chapter
    15's :func:`~llmsizing.serve_engine.kv_capacity_tokens` (``overhead_bytes_per_gpu``); dividing ``total``
    by the capacity counts the fixed part once per replica instead (chapter 3 did so before session 29: one
    GPU short for Llama 3 70B, 6 x 8,192 tokens, on H100s). ``fixed_bytes_per_gpu`` is capped at
    ``memory.overhead_bytes`` (a smaller ``overhead_bytes=`` holds no more per GPU). Chapter 3."""
    if not isinstance(memory, InferenceMemory):
        raise TypeError("memory must be an InferenceMemory (from inference_memory), got "
                        f"{type(memory).__name__}")
    g = get_gpu(gpu)
    fixed = min(check_number("fixed_bytes_per_gpu", fixed_bytes_per_gpu), memory.overhead_bytes)
    room = g.memory_bytes - fixed
    if room <= 0:
        raise ValueError(f"fixed_bytes_per_gpu={fixed_bytes_per_gpu:g} leaves no room on a {g.name} "
                         f"({g.memory_bytes:,.0f} bytes): it must be below the GPU's memory")
    rest = memory.total_bytes - fixed
    if rest / room > MAX_MEANINGFUL:
        raise ValueError(f"{memory.total_bytes:g} bytes need more than {MAX_MEANINGFUL:,} {g.name} GPUs")
    n = max(1, math.ceil(rest / room))
    if n > 1 and rest <= (n - 1) * room:   # the quotient rounded up by floating-point noise
        n -= 1
    return n


# ----------------------------------------------------------------------------- the x1.2 rule, checked
def rule_of_thumb_breakeven_tokens(model: Model | str, *, weights: str = "bf16", kv_cache: str = "bf16",
                                   with_overhead: bool = False) -> float:
    """Cached tokens (``batch x context``, summed over sequences) at which the ``1.2 x weights`` rule stops
    being enough.

    With ``with_overhead=False`` (default): the token count at which the KV cache ALONE equals the rule's 20%
    allowance, ``0.2 x weights / kv_bytes_per_token``. Beyond it the rule under-estimates whatever the
    overhead is. With ``with_overhead=True``: the count at which the book's full estimate (weights + KV +
    :func:`~llmsizing.memory.default_overhead_bytes`) equals the rule, solving
    ``W + KV + 1 GiB + 0.08 (W + KV) = 1.2 W`` for KV: the allowance rule's inverse,
    ``KV = peak_room_bytes(1.2 W) - W`` (:func:`~llmsizing.states.peak_room_bytes`). That can be 0.0 when
    the allowance alone (1 GiB + 8% of
    the weights) exceeds the rule's margin (small or heavily quantised models): the rule then under-estimates
    at any context.
    Returns a float (a token count; compare it with ``batch * context``). Taught in chapter 3.
    """
    model = resolve_model(model, moe=True)
    check_choice("weights", weights, WEIGHT_DTYPES)
    check_choice("kv_cache", kv_cache, KV_DTYPES)
    w = weights_bytes(model, weights)
    per_token = kv_cache_bytes_per_token(model, kv_cache)
    margin = (RULE_OF_THUMB - 1) * w
    if not check_bool("with_overhead", with_overhead):
        return margin / per_token
    kv = peak_room_bytes(RULE_OF_THUMB * w) - w    # total_with_allowance(W + KV) = 1.2 W, solved for KV
    return max(kv, 0.0) / per_token


def rule_of_thumb_table(cases, *, weights: str = "bf16", kv_cache: str = "bf16"):
    """Compare :func:`inference_memory` with the ``1.2 x weights`` rule for each ``(model, batch, context)``
    in ``cases``. Returns a DataFrame in GiB with ``rule / book`` (below 1: the rule under-estimates). Chapter
    3.
    """
    import pandas as pd

    from .units import GiB

    rows = []
    for i, case in enumerate(check_sequence("cases", cases, example="[('llama-3-8b', 1, 8192)]")):
        if isinstance(case, (str, bytes)) or not hasattr(case, "__len__") or len(case) != 3:
            raise TypeError(f"cases[{i}] must be a (model, batch, context) triple, got {case!r}")
        model, batch, context = case
        m = resolve_model(model, moe=True)
        r = inference_memory(m, batch=batch, context=context, weights=weights, kv_cache=kv_cache)
        rows.append({"model": m.name, "batch": r.batch, "context": r.context,
                     "weights GiB": r.weights_bytes / GiB, "KV cache GiB": r.kv_cache_bytes / GiB,
                     "overhead GiB": r.overhead_bytes / GiB, "book GiB": r.total_bytes / GiB,
                     "rule x1.2 GiB": r.rule_of_thumb_bytes / GiB,
                     "rule / book": r.rule_of_thumb_bytes / r.total_bytes})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- what one GPU holds
@dataclass(frozen=True)
class KVRoom:
    """One GPU's memory beside a model's weights alone, no allowance (:func:`kv_room_beside_weights`):
    ``free_bytes`` = memory - weights, and the KV-cache ``tokens`` it holds, ``free_bytes / KV bytes per
    token``. Chapter 3, exercise 2."""

    free_bytes: float
    tokens: float


def kv_room_beside_weights(model: Model | str, gpu, *, weights: str = "bf16",
                           kv_cache: str = "bf16") -> KVRoom:
    """The memory of one ``gpu`` (a catalogue name or GPU) left beside ``model``'s weights and the KV-cache
    tokens it holds, counting nothing else (no allowance: the exercise's first, rough count). Raises
    ValueError when the weights alone fill the GPU. Chapter 3, exercise 2."""
    m = resolve_model(model, moe=True)
    g = get_gpu(gpu)
    check_choice("weights", weights, WEIGHT_DTYPES)
    check_choice("kv_cache", kv_cache, KV_DTYPES)
    free = g.memory_bytes - weights_bytes(m, weights)
    if free <= 0:
        raise ValueError(f"weights={weights!r}: {m.name}'s weights ({weights_bytes(m, weights):,.0f} bytes) "
                         f"fill a {g.name} ({g.memory_bytes:,.0f} bytes): no room for a KV cache")
    return KVRoom(free, free / kv_cache_bytes_per_token(m, kv_cache))


def max_inference_batch(model: Model | str, gpu, context: int, *, weights: str = "bf16",
                        kv_cache: str = "bf16", fragmentation: float | None = None) -> int:
    """The largest batch of ``context``-token sequences whose :func:`inference_memory` (weights, cache and
    the default allowance, 1 GiB + 8%) fits one ``gpu``'s whole memory, as chapter 3 counts it: the cache
    room is the allowance rule's inverse, :func:`~llmsizing.states.peak_room_bytes` of the memory less the
    weights, and the batch ``floor(room / one sequence's cache)`` (its state too, for a hybrid). 0 when not
    even one sequence fits. ``fragmentation`` (a fraction, 0 to 10) replaces the allowance's 8%, its fixed
    1 GiB kept: e.g. :func:`~llmsizing.allocator_fragmentation.fragmentation_allowance`, the published
    median. Chapter 3, exercise 5 (vLLM's own count is
    :func:`~llmsizing.serve_engine.kv_capacity_sequences`)."""
    m = resolve_model(model, moe=True)
    g = get_gpu(gpu)
    frag = None if fragmentation is None else check_number("fragmentation", fragmentation, maximum=10.0)

    def memory(n):
        mem = inference_memory(m, batch=n, context=context, weights=weights, kv_cache=kv_cache)
        if frag is None:
            return mem
        allowance = FIXED_OVERHEAD_BYTES + frag * (mem.weights_bytes + mem.kv_cache_bytes)
        return inference_memory(m, batch=n, context=context, weights=weights, kv_cache=kv_cache,
                                overhead_bytes=allowance)
    one = memory(1)
    if frag is None:
        cap = peak_room_bytes(g.memory_bytes)
    else:
        cap = (g.memory_bytes - FIXED_OVERHEAD_BYTES) / (1 + frag)
    room = cap - one.weights_bytes
    if room < one.kv_cache_bytes:
        return 0
    b = min(math.floor(room / one.kv_cache_bytes), MAX_MEANINGFUL)

    def fits(n):
        return memory(n).total_bytes <= g.memory_bytes
    while b > 0 and not fits(b):              # the quotient rounded by floating-point noise, either way
        b -= 1
    while b < MAX_MEANINGFUL and fits(b + 1):
        b += 1
    return b
