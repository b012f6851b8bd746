"""What a serving engine adds to the roofline: KV capacity as vLLM counts it, and the calibrated step
constants (chapter 15, "Serving"; issue 22).

**KV capacity.** vLLM (Kwon et al. 2023, PagedAttention; ``vllm/v1/worker/gpu_worker.py``'s
``determine_available_memory``) does not fill the whole GPU with KV cache. It budgets

    ``gpu_memory_utilization x memory - weights - activation peak - non-torch memory - CUDA graphs``

where ``gpu_memory_utilization`` defaults to 0.9 and the activation peak is what a profiling forward pass over
the largest prefill chunk (``max_num_batched_tokens`` tokens) allocates, plus the sampler's logits for
``max_num_seqs`` sequences. vLLM V1's defaults for both depend on the GPU (:func:`vllm_default_max_num_seqs`,
from ``EngineArgs`` in ``vllm/engine/arg_utils.py``: 1024 sequences and an 8,192-token chunk for the API
server at 70 GiB and more outside the A100 line, else 256 and 2,048); the library takes the GPU's
``max_num_seqs`` and keeps the 8,192-token chunk, the one its step constants were fitted with. The rest is cut
into blocks of ``block_size`` = 16 tokens; a sequence of ``s`` tokens holds ``ceil(s / 16)`` of them when
every layer keeps its whole context (with sliding-window layers, fewer: :func:`blocks_per_sequence`).
:func:`kv_capacity_tokens` does this count, :func:`kv_capacity_sequences` the sequences it holds. The
scheduler also runs at most ``max_num_seqs`` sequences at once, however much KV room is left
(``vllm/v1/core/sched/scheduler.py``: ``max_num_running_reqs``): :func:`llmsizing.serve.serving`'s
``max_batch`` is the smaller of the two (issue 38).

The activation peak is modelled, not profiled: the widest tensors of one layer's forward over ``T`` tokens
(the gated MLP's ``2 x ffn`` up-projection, its ``ffn`` product and a few ``hidden``-wide buffers, 16-bit,
``ffn`` split over the tensor-parallel GPUs), or, if larger, the sampler's run after it: ``max_num_seqs x
vocab`` fp32 logits and their softmax beside the forward's hidden states (:func:`activation_peak_bytes`).

**Step constants.** ``data/serving_model.csv`` holds the four constants the decode and prefill costs use (the
fixed step overhead per engine and batching era, ``step_overhead_s[vLLM/continuous]``, and pooled per era,
``step_overhead_s[static]``), fitted by ``tools/calibrate_serving.py`` on the published figures of
``data/serving_published.csv`` (:mod:`llmsizing.serve_calibration`); ``data/serving_intervals.csv`` holds the
80% range measured by leaving one source out at a time (issue 34).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from functools import lru_cache

from ._validate import check_choice, check_fraction, check_int, check_number
from .catalog import DATA_DIR
from .inference import (kv_cache_bytes_per_token, kv_cached_tokens, routed_expert_bytes,
                        state_bytes_per_sequence, weights_bytes)
from .precision import KV_DTYPES
from .states import FIXED_OVERHEAD_BYTES
from .model import Model
from .units import GiB

#: vLLM's default share of GPU memory the engine may use (``gpu_memory_utilization``).
GPU_MEMORY_UTILIZATION = 0.9
#: vLLM V1's largest prefill chunk (``max_num_batched_tokens``, tokens) for its API server on a GPU of at
#: least 70 GiB outside the A100 line; other GPUs get less (:func:`vllm_default_max_num_batched_tokens`).
MAX_NUM_BATCHED_TOKENS = 8192
#: vLLM V1's largest number of running sequences (``max_num_seqs``) below 70 GiB and on the A100 line; larger
#: GPUs get 1024 (:func:`vllm_default_max_num_seqs`, which the functions here use when none is given).
MAX_NUM_SEQS = 256
#: The usage contexts vLLM sets its batch defaults for: its ``LLM`` class and its OpenAI-compatible API
#: server.
VLLM_USAGES = ("llm", "api_server")
#: Tokens per KV-cache block (vLLM's ``block_size``).
BLOCK_SIZE = 16
#: Memory CUDA graphs of the decode batch sizes take per GPU: an allowance (vLLM logs 0.3-1 GiB per GPU).
CUDA_GRAPH_BYTES = 0.5 * GiB


@dataclass(frozen=True)
class KVCapacity:
    """The KV-cache budget of one GPU (:func:`kv_capacity_tokens`): bytes per term, the blocks and tokens.

    ``tokens`` is ``blocks x block_size`` with every attention layer priced for every token: the figure vLLM
    logged as "GPU KV cache size: N tokens" up to at least 0.19 (spring 2026, vLLM issue #40691:
    ``vllm/v1/core/kv_cache_utils.py`` divided its blocks by the number of KV-cache groups, each group's pages
    covering the same token slots); later releases log the maximum concurrency times ``max_model_len``
    instead, which counts each group's window. With sliding-window layers a sequence keeps only its last
    window in them, so more context fits than ``tokens`` says; whole sequences are counted by
    :func:`kv_capacity_sequences`."""

    memory_bytes: float
    usable_bytes: float
    weights_bytes: float
    activation_peak_bytes: float
    non_torch_bytes: float
    cuda_graph_bytes: float
    kv_bytes: float
    block_bytes: float
    blocks: int
    tokens: int
    #: the fixed states of a hybrid's other layers set aside for ``max_num_seqs`` sequences (0 without)
    states_bytes: float = 0.0

    @property
    def room_bytes(self) -> float:
        """What is left for the KV cache and the states together, ``usable - weights - activation peak -
        non-torch - CUDA graphs`` = ``kv_bytes + states_bytes``. 0, as ``kv_bytes`` and ``blocks`` are, when
        the rest leaves no KV room (never a negative figure). Chapter 3 ("Hybrid models")."""
        return self.kv_bytes + self.states_bytes if self.kv_bytes > 0 else 0.0


@lru_cache(maxsize=1)
def _batch_default_rows() -> tuple:
    with open(DATA_DIR / "vllm_batch_defaults.csv", newline="") as f:
        return tuple(csv.DictReader(f))


def _batch_default(gpu, usage: str) -> dict:
    """The row of ``data/vllm_batch_defaults.csv`` vLLM's rule picks for ``gpu`` and ``usage``: the first
    tier (largest memory first) whose ``min_memory_gib`` the GPU's total memory reaches and whose
    ``excluded_gpus`` do not list it."""
    from .catalog import get_gpu

    g = get_gpu(gpu)
    usage = check_choice("usage", usage, VLLM_USAGES)
    rows = sorted((r for r in _batch_default_rows() if r["usage"] == usage),
                  key=lambda r: -float(r["min_memory_gib"]))
    for r in rows:
        if g.memory_bytes >= float(r["min_memory_gib"]) * GiB and g.name not in r["excluded_gpus"].split(";"):
            return r
    raise ValueError(f"data/vllm_batch_defaults.csv has no tier for {g.name} ({usage})")   # (a 0 GiB tier)


def vllm_default_max_num_seqs(gpu, usage: str = "api_server") -> int:
    """vLLM's default ``max_num_seqs`` on ``gpu`` (V1 engine; ``usage`` one of :data:`VLLM_USAGES`): 1024 on a
    GPU whose total memory is at least 70 GiB and that is not an A100 (H100, H200, B200, MI300X...), else 256.
    The rule and its sources are data (``data/vllm_batch_defaults.csv``): ``EngineArgs`` in vLLM's
    ``vllm/engine/arg_utils.py`` tests ``device_memory >= 70 * GiB_bytes and "a100" not in device_name``; the
    A100s are listed there by catalogue name. Chapters 3 and 15."""
    return int(_batch_default(gpu, usage)["max_num_seqs"])


def vllm_default_max_num_batched_tokens(gpu, usage: str = "api_server") -> int:
    """vLLM's default ``max_num_batched_tokens`` (the largest prefill chunk) on ``gpu``, by the rule of
    :func:`vllm_default_max_num_seqs`: 8192 for the API server (16384 for the ``LLM`` class) at 70 GiB and
    more outside the A100 line, else 2048 (8192). Chapters 3 and 15."""
    return int(_batch_default(gpu, usage)["max_num_batched_tokens"])


def activation_peak_bytes(model: Model, *, tp: int = 1, chunk: int = MAX_NUM_BATCHED_TOKENS,
                          max_num_seqs: int = MAX_NUM_SEQS) -> float:
    """Peak activation bytes per GPU of vLLM's profiling run (see the module docstring): the larger of the
    forward over a ``chunk``-token prefill, ``chunk x (3 ffn / tp + 4 hidden) x 2``, and the sampler's run
    after it, ``chunk x hidden x 2 + 2 x max_num_seqs x vocab x 4`` (the forward's hidden states, still held,
    and fp32 logits for ``max_num_seqs`` sequences with their probabilities). The two do not add up: in
    ``GPUModelRunner.profile_run`` (``vllm/v1/worker/gpu_model_runner.py``) ``_dummy_run(max_num_tokens)``
    returns, freeing its layers' intermediates, before ``_dummy_sampler_run(last_hidden_states)`` computes the
    logits (before session 27 the library added them: 0.85 GiB too much for Llama-3-8B at 1,024 sequences).

    A mixture of experts runs its MoE layers in vLLM's fused MoE kernel
    (``vllm/model_executor/layers/fused_moe/ fused_moe.py``), whose three buffers hold each token once per
    chosen expert: ``(T, k, 2 f_e / tp)`` for the gate and up projections, ``(T k, f_e / tp)`` for their
    product and ``(T, k, hidden)`` for the experts' outputs. Its MLP term is then the larger of the dense
    layers' (if any) and ``k x (3 f_e / tp + hidden)``."""
    gate = 3 if model.gated_mlp else 2
    up = gate * model.ffn_hidden / tp
    if model.is_moe:
        moe_up = model.experts_per_token * (gate * (model.expert_ffn_hidden or model.ffn_hidden) / tp
                                            + model.hidden)
        up = max(up if model.n_dense_layers else 0.0, moe_up)
    forward = chunk * (up + 4 * model.hidden) * 2
    sampler = chunk * model.hidden * 2 + 2 * max_num_seqs * model.vocab * 4
    return max(forward, sampler)


def kv_split(model: Model, tp: int = 1) -> int:
    """Over how many GPUs of a ``tp`` group one token's KV cache is split: ``min(tp, kv_heads)`` (each GPU
    holds its KV heads; vLLM replicates a KV head when ``tp > kv_heads``), but 1 with multi-head latent
    attention, whose one latent vector is shared by all heads, so every tensor-parallel rank keeps the whole
    of it (vLLM's MLA backends; this is why DeepSeek-V3 serves attention data-parallel, Sec. 3.4 of its
    report)."""
    return 1 if model.is_mla else min(tp, model.kv_heads)


def weights_bytes_per_gpu(model: Model, weights: str = "bf16", *, tp: int = 1, ep: int = 1,
                          redundant_experts: int = 0) -> float:
    """Resident weight bytes per GPU: ``W / tp`` without expert parallelism; with ``ep > 1``, every weight but
    the routed experts over the ``tp`` GPUs of an attention group, ``(W - R) / tp``, plus ``R / ep`` of the
    routed experts (``R``: :func:`~llmsizing.inference.routed_expert_bytes`; ``R / experts``, one expert, when
    ``ep >= experts``, the other GPUs holding redundant copies), as DeepSeek-V3's inference layout
    (report Sec. 3.4) and vLLM's ``--enable-expert-parallel`` place them. Every expert is resident
    somewhere. With ``redundant_experts`` extra copies of busy experts (DeepSeek's EPLB; its V3/R1 service
    runs 256 + 32 experts over 144 decode GPUs, 2 per GPU), each GPU holds ``(experts + redundant) / ep``
    expert slots, at least one (issue 37)."""
    w = weights_bytes(model, weights)
    if ep == 1:
        return w / tp
    r = routed_expert_bytes(model, weights)
    slots = max(1, math.ceil((model.experts + redundant_experts) / ep))
    return (w - r) / tp + r * slots / model.experts


def stage_share(model: Model, pp: int = 1) -> float:
    """The share of the model's layers the largest of ``pp`` pipeline stages holds: ``ceil(layers / pp) /
    layers`` (1 for ``pp = 1``; ``1 / pp`` when ``pp`` divides the layers). vLLM splits the layers as evenly
    as it can (``vllm.distributed.utils.get_pp_indices``), so the largest stage sets the memory and the
    pace."""
    pp = check_int("pp", pp, maximum=model.layers)
    return math.ceil(model.layers / pp) / model.layers


def state_bytes_per_gpu(model: Model, kv_cache: str = "bf16", *, tp: int = 1) -> float:
    """One sequence's fixed state in a hybrid's Mamba / linear-attention layers on one GPU of a ``tp``-GPU
    replica (:func:`llmsizing.inference.state_bytes_per_sequence`; the mixer's heads split over
    ``min(tp, heads)`` GPUs, Mamba-1's channels over ``tp``); 0 without such layers. vLLM keeps it in the
    KV pool once per running sequence (its hybrid allocator); :func:`kv_capacity_tokens` sets it aside for
    ``max_num_seqs`` sequences. Chapter 3."""
    n = state_bytes_per_sequence(model, kv_cache)
    if not n:
        return 0.0
    return n / min(check_int("tp", tp, maximum=1024), model.mixer.heads or model.mixer.inner)


def kv_capacity_tokens(model: Model, gpu, *, tp: int = 1, weights: str = "bf16", kv_cache: str = "bf16",
                       gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
                       max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS, max_num_seqs: int | None = None,
                       cuda_graph_bytes: float = CUDA_GRAPH_BYTES,
                       overhead_bytes_per_gpu: float = FIXED_OVERHEAD_BYTES,
                       block_size: int = BLOCK_SIZE, pp: int = 1, ep: int = 1,
                       redundant_experts: int = 0, state_dtype: str | None = None) -> KVCapacity:
    """The KV cache one GPU of a ``tp``-GPU replica holds, counted as vLLM does (module docstring):
    ``usable = gpu_memory_utilization x memory``; ``kv = usable - weights / tp - activation peak -
    overhead_bytes_per_gpu (CUDA context, NCCL and cuBLAS buffers) - cuda_graph_bytes``; ``blocks =
    floor(kv / (block_size x KV bytes per token per GPU))``; ``tokens = blocks x block_size``. Negative room
    is 0 blocks (the model does not fit). The KV heads split over ``min(tp, kv_heads)`` GPUs. With ``pp``
    pipeline stages (vLLM's ``--pipeline-parallel-size``) each GPU holds the weights and the KV cache of its
    stage's layers only; the largest stage has ``ceil(layers / pp)`` of them, and both terms scale by that
    share (the embedding and LM head are spread with the layers: an approximation, under 1% of a 70B model per
    stage). The activation peak is one layer's and stays. A mixture of experts is served with every expert
    resident; with ``ep`` GPUs of expert parallelism each GPU holds :func:`weights_bytes_per_gpu` (its
    ``1 / ep`` of the routed experts). Multi-head latent attention's latent cache is not split by ``tp``
    (:func:`kv_split`). A hybrid with Mamba or linear-attention layers first sets their fixed state aside for
    ``max_num_seqs`` sequences (:func:`state_bytes_per_gpu`), the case where all of them run (vLLM V1 takes
    one state block per running request from the same pool); its tokens count the attention layers only.
    The state is kept in ``state_dtype`` (``None``: the ``kv_cache`` dtype, as vLLM keeps it by default,
    ``mamba_ssm_cache_dtype="auto"`` in ``MambaStateDtypeCalculator``; vLLM's ``--mamba-ssm-cache-dtype`` and
    Nemotron-H's ``mamba_ssm_cache_dtype`` can ask for ``"fp32"``, and transformers keeps a Gated DeltaNet's
    recurrent state in FP32).
    ``max_num_seqs`` defaults (``None``) to vLLM's default on ``g`` (:func:`vllm_default_max_num_seqs`: 1024
    on an H100, 256 on an A100; before session 27, 256 on every GPU). ``max_num_batched_tokens`` stays
    :data:`MAX_NUM_BATCHED_TOKENS` (8192) on every GPU, the chunk the serving constants were fitted with:
    vLLM's API server takes 2048 on an A100 or a GPU under 70 GiB
    (:func:`vllm_default_max_num_batched_tokens`; pass it to count that engine), an activation peak of
    ``6144 x (3 ffn / tp + 4 hidden) x 2`` bytes less, about 0.7 GiB on Llama-3-8B. Priced as the default,
    that chunk moved the serving fit (session 27: the vLLM step overhead from 0.30 to 0.63 ms, the held-out
    coverage from 0.82 to 0.79), so it is left for a refit of its own.
    Taught in chapter 15."""
    from .catalog import get_gpu, resolve_model

    m = resolve_model(model, moe=True)
    g = get_gpu(gpu)
    tp = check_int("tp", tp, maximum=1024)
    util = check_fraction("gpu_memory_utilization", gpu_memory_utilization)
    if max_num_seqs is None:
        max_num_seqs = vllm_default_max_num_seqs(g)
    chunk = check_int("max_num_batched_tokens", max_num_batched_tokens, maximum=10_000_000)
    seqs = check_int("max_num_seqs", max_num_seqs, maximum=1_000_000)
    graphs = check_number("cuda_graph_bytes", cuda_graph_bytes)
    other = check_number("overhead_bytes_per_gpu", overhead_bytes_per_gpu)
    block_size = check_int("block_size", block_size, maximum=4096)
    pp = check_int("pp", pp, maximum=m.layers)
    ep = check_int("ep", ep, maximum=65536)
    if ep > 1 and not m.is_moe:
        raise ValueError(f"ep={ep}: expert parallelism needs a mixture of experts; {m.name!r} is dense")
    share = stage_share(m, pp)
    usable = util * g.memory_bytes
    w = weights_bytes_per_gpu(m, weights, tp=tp, ep=ep, redundant_experts=redundant_experts) * share
    act = activation_peak_bytes(m, tp=tp, chunk=chunk, max_num_seqs=seqs)
    sd = kv_cache if state_dtype is None else check_choice("state_dtype", state_dtype, KV_DTYPES)
    states = seqs * state_bytes_per_gpu(m, sd, tp=tp) * share
    kv = usable - w - act - other - graphs - states
    per_token = kv_cache_bytes_per_token(m, kv_cache)
    if per_token == 0:
        raise ValueError(f"{m.name!r} has no attention layer: its cache is a fixed state per sequence "
                         f"({state_bytes_per_sequence(m, sd):,.0f} bytes, state_bytes_per_sequence), "
                         "not a number of tokens")
    block = block_size * per_token / kv_split(m, tp) * share
    blocks = max(0, math.floor(kv / block)) if kv > 0 else 0
    # kv_bytes is the room left for KV: 0 when the rest does not fit (then blocks = 0 and callers say so)
    return KVCapacity(float(g.memory_bytes), usable, w, act, other, graphs, max(0.0, kv), block, blocks,
                      blocks * block_size, states)


def blocks_per_sequence(model: Model | str, context: int, *, block_size: int = BLOCK_SIZE) -> int:
    """Blocks of :func:`kv_capacity_tokens` (``block_size`` tokens priced at every attention layer) one
    sequence of ``context`` tokens holds: ``ceil(kv_cached_tokens(context) / block_size)``, where
    :func:`~llmsizing.inference.kv_cached_tokens` averages the layers, a sliding-window layer keeping at most
    its window. vLLM's hybrid KV-cache manager does this: a sliding-window layer's KV-cache group
    (``SlidingWindowSpec`` in ``vllm/v1/kv_cache_interface.py``) has its blocks that fall wholly out of the
    window freed (``SlidingWindowManager.remove_skipped_blocks`` in
    ``vllm/v1/core/single_type_kv_cache_manager.py``), so a running sequence holds the window plus at most
    one partial block there. Approximations: that partial block (``SlidingWindowSpec.max_memory_usage_bytes``
    adds 1 block per window group) and, while a prompt is prefilled in chunks, the ``window - 1 +
    max_num_batched_tokens`` tokens a windowed layer briefly needs are left out; both are one sequence's
    transient or under one block per group. Chapters 3 and 15."""
    block_size = check_int("block_size", block_size, maximum=4096)
    return math.ceil(kv_cached_tokens(model, context) / block_size)


def kv_capacity_sequences(model: Model | str, gpu, context: int, **kwargs) -> int:
    """How many sequences of ``context`` tokens (prompt + output) the KV cache of one replica of ``tp`` GPUs
    holds at once, as vLLM allocates it: ``kv_capacity_tokens(...).blocks // blocks_per_sequence(context)``
    (:func:`blocks_per_sequence`: sliding-window layers keep only their window). ``kwargs`` are those of
    :func:`kv_capacity_tokens` (``tp``, ``weights``, ``kv_cache``, ``gpu_memory_utilization``, ...). 0 when
    not even one sequence fits. With expert parallelism (``ep > 1``) this is one attention group's count;
    :func:`llmsizing.serve.serving`'s ``kv_batch`` multiplies it by the ``ep / tp`` groups. It counts the
    steady decode state and is not capped at vLLM's ``max_num_seqs`` (``serving``'s ``max_batch`` is).
    vLLM's logged "Maximum concurrency" counts otherwise: it charges each sliding-window group
    ``cdiv(window - 1 + max_num_batched_tokens, 16) + 1`` blocks (the chunked-prefill transient), so for
    windowed models it logs fewer sequences than this count (gpt-oss-120b at 128K on one H100: the same one
    sequence, at a ratio of about 1.7-1.8 against 1.74 here, with vLLM's 1,024 sequences on an H100; 1.81
    with the 256 and the summed peak before session 27). Chapters 3 and 15."""
    per_sequence = blocks_per_sequence(model, context, block_size=kwargs.get("block_size", BLOCK_SIZE))
    return kv_capacity_tokens(model, gpu, **kwargs).blocks // per_sequence


# ----------------------------------------------------------------------------- calibrated constants
#: The engine a serving figure is priced for when the caller names none: vLLM, the most used open engine of
#: today (issue 34). Every result names its engine (:attr:`llmsizing.serve.Serving.engine`).
DEFAULT_ENGINE = "vLLM"
#: How an engine batches (``batching`` in ``data/serving_published.csv``): ``static`` runs one fixed batch
#: to completion (TensorRT-LLM's gptSessionBenchmark of v0.5/v0.6, llama-bench), ``continuous`` admits and
#: retires sequences every step (vLLM, SGLang, LMDeploy's TurboMind, TensorRT-LLM's in-flight batching).
BATCHING = ("continuous", "static")


@dataclass(frozen=True)
class ServingConstants:
    """The fitted step constants (``data/serving_model.csv``) and the stated 80% range of the default engine's
    per-token figures (``data/serving_intervals.csv``)."""

    weights_bu: float          # fraction of HBM bandwidth reading the weights in a decode step
    attention_bu: float        # fraction of HBM bandwidth reading the paged KV cache (attention kernels)
    step_overhead_s: float     # fixed time per engine step of the default engine (DEFAULT_ENGINE)
    prefill_mfu: float         # fraction of the dense peak a prefill (and a decode's matmuls) reaches
    low: float                 # engine speed / model speed, low end of the 80% range (calibrated, per token)
    high: float                # ... high end
    engine_step_overhead_s: tuple = ()   # (("vLLM/continuous", seconds), ...): fitted per engine and batching
    era_step_overhead_s: tuple = ()      # (("static", seconds), ...): pooled per batching, for other engines
    intervals: tuple = ()                # ((group, low, high), ...): the 80% range per group


#: How ``data/serving_model.csv`` names an engine's own step overhead: ``step_overhead_s[vLLM/continuous]``,
#: and a batching era's pooled one: ``step_overhead_s[static]``.
ENGINE_ROW = re.compile(r"^step_overhead_s\[(.+)\]$")


@lru_cache(maxsize=1)
def serving_constants() -> ServingConstants:
    """The constants of ``data/serving_model.csv`` and the ranges of ``data/serving_intervals.csv`` (both
    written by ``tools/calibrate_serving.py``)."""
    with open(DATA_DIR / "serving_model.csv", newline="") as f:
        values = {r["constant"]: float(r["value"]) for r in csv.DictReader(f)}
    with open(DATA_DIR / "serving_intervals.csv", newline="") as f:
        groups = tuple((r["group"], float(r["low"]), float(r["high"])) for r in csv.DictReader(f)
                       if not r["group"].startswith("overall"))   # overall, overall-nested: checks
    keyed = [(m.group(1), v) for k, v in values.items() if (m := ENGINE_ROW.match(k))]
    engines = tuple((k, v) for k, v in keyed if "/" in k)
    eras = tuple((k, v) for k, v in keyed if "/" not in k)
    by_group = {g: (lo, hi) for g, lo, hi in groups}
    low, high = next(by_group[g] for g in ("calibrated/per-token", "calibrated", "all") if g in by_group)
    return ServingConstants(values["weights_bu"], values["attention_bu"], values["step_overhead_s"],
                            values["prefill_mfu"], low, high, engines, eras, groups)


def engine_key(engine: str, fitted) -> str | None:
    """The fitted ``engine/batching`` key ``engine`` names (``"vLLM"`` or ``"vLLM/continuous"``), or None when
    ``fitted`` (keys) has none. A bare engine name takes its continuous-batching fit where it has one (today's
    engines batch continuously), else its only one."""
    if engine in fitted:
        return engine
    keys = sorted(k for k in fitted if k.split("/")[0] == engine)
    return next((k for k in keys if k.endswith("/continuous")), keys[0] if keys else None)


__all__ = ["stage_share", "kv_split", "weights_bytes_per_gpu", "GPU_MEMORY_UTILIZATION",
           "MAX_NUM_BATCHED_TOKENS", "MAX_NUM_SEQS", "BLOCK_SIZE", "CUDA_GRAPH_BYTES", "VLLM_USAGES",
           "vllm_default_max_num_seqs", "vllm_default_max_num_batched_tokens",
           "KVCapacity", "activation_peak_bytes", "kv_capacity_tokens", "state_bytes_per_gpu",
           "blocks_per_sequence", "kv_capacity_sequences",
           "ServingConstants",
           "serving_constants", "DEFAULT_ENGINE", "BATCHING", "engine_key"]
