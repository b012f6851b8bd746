"""Activation memory of dense layers: the tensors a training step saves for the backward pass (chapter 4,
"Activation memory"; checked against PyTorch in chapter 5, "Measure it yourself").

Source: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
(arXiv:2205.05198), Sec. 4. For a GPT layer in 16-bit with dropout they count, per layer,
``s*b*h*(34 + 5*a*s/h)`` bytes: attention 11sbh + 5as^2b, MLP 19sbh, two LayerNorms 4sbh. With tensor
parallelism ``t``: ``sbh(10 + 24/t + 5as/(ht))``; with sequence parallelism too: ``sbh(34 + 5as/h)/t``.

This module rebuilds that count tensor by tensor so it generalises honestly:

* grouped-query attention (K and V have ``kv_heads * head_dim`` columns, not ``h``);
* a gated MLP: the ``"fused"`` stack counts Megatron-LM's fused SwiGLU (``megatron/core/fusions/
  fused_bias_swiglu.py``: ``SwiGLUFunction`` saves only its ``[gate | up]`` input and recomputes SiLU in its
  backward; ``linear_fc2`` saves the product), ``3*s*b*f`` elements; the ``"hf"`` stack the unfused PyTorch
  code, which keeps gate, up, SiLU(gate) and the product, ``4*s*b*f`` (measured on Megatron's own function in
  ``data/fused_swiglu_saved.csv``, ``tools/measure_memory.py swiglu``; issue 26);
* LayerNorm or RMSNorm (both save their input; the fp32 per-token statistics are counted too);
* dropout masks at ``mask_bytes`` per element (1 on CUDA; pass the activation width for CPU PyTorch);
* ``attention="eager"`` saves the ``a*s^2`` softmax output (plus the dropout mask and output);
  ``"flash"`` saves only Q, K, V, the output and an fp32 log-sum-exp per row (Dao et al. 2022);
* recomputation (Korthikanti et al. Sec. 5): ``"selective"`` recomputes the attention core (keeps no
  ``s^2`` terms, but one layer's rebuilt core is alive during its backward, and a rebuilt flash kernel saves
  a fresh output), ``"full"`` keeps only each layer's input plus one layer's working set during its
  backward. Both report the peak, so ``full <= selective`` from two layers up and ``selective <= none`` for
  eager attention; with flash, selective buys nothing (it is a hair above ``none``, as measured).
* ``"op-sac"``: torchtitan's op-level selective checkpointing (:mod:`llmsizing.op_sac`,
  :func:`op_sac_layer_bytes`): each layer keeps its input, SDPA's output and log-sum-exp and every other
  matmul's output, and recomputes the rest, one layer at a time, in its backward; ``"op-sac-sdpa-rerun"``
  keeps no SDPA output (:data:`~llmsizing.parallel.OP_SAC_SDPA_SAVED`).

Context parallelism (``cp``; Liu et al. 2023, Megatron-LM with Transformer Engine, Dubey et al. 2024 Sec.
3.3.2): each rank runs its ``seq / cp`` tokens through every layer, so every saved tensor is that of
``seq / cp`` tokens, including the log-sum-exp, which is one per local query row. This holds for the flash
path only, the one context-parallel attention runs on (TE's ``AttnFuncWithCPAndKVP2P`` and ``...KVAllGather``
call flash or cuDNN fused attention): the K and V a rank saves for the backward are one chunk's (the ring's
last received block in p2p, its own in all-gather), the same size as its own. What the ring or the gather
holds on top while a layer's attention runs is transient (:func:`cp_attention_buffers_bytes`).

What it leaves out, on purpose: small int64 index tensors of the attention mask and rotary tables
(independent of batch), and allocator rounding. Chapter 5 measures how much that misses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._validate import MAX_MEANINGFUL, check_bool, check_choice, check_int, check_number
from .catalog import resolve_model
from .model import Model
from .op_sac import (OP_SAC_SOURCE, check_op_sac, op_sac_layer_bytes, op_sac_matmuls,  # noqa: F401
                     op_sac_shared_bytes)
from .parallel import OP_SAC_MODES, OP_SAC_SDPA_SAVED, RECOMPUTE, RECOMPUTE_MODES, check_layout
from .precision import ACTIVATION_DTYPES, DTYPE_BYTES  # noqa: F401 (ACTIVATION_DTYPES: re-exported)
from .titan_terms import check_torchtitan, lm_head_gathered_bytes, rope_table_bytes, torchtitan_extra_terms


ATTENTION = ("flash", "eager")


#: Software stacks (chapter 4, "The peak of a step"): ``"fused"`` counts what Megatron-style fused kernels
#: save (Korthikanti et al. 2022); ``"hf"`` what Hugging Face ``transformers`` modules save as they are
#: written; ``"torchtitan"`` what eager torchtitan's Llama saves (:mod:`llmsizing.titan_terms`).
STACKS = ("fused", "hf", "torchtitan")





#: Bytes a dropout keeps per element for its backward on a GPU: ``torch.native_dropout``'s bool mask (what
#: ``F.dropout`` calls on a CUDA tensor). PyTorch's CPU path keeps its noise in the input's dtype instead
#: (``data/dropout_saved.csv``, ``tools/measure_memory.py dropout``): pass that width as ``mask_bytes`` to
#: compare with CPU measurements. Nothing is kept where the input needs no gradient.
DROPOUT_MASK_BYTES = 1.0


#: Components of :attr:`ActivationMemory.breakdown`, in the order charts stack them. ``"residuals"``: the
#: layer inputs a checkpoint keeps (full or partial recomputation, op SAC; pipeline outputs kept after they
#: are sent); ``"op_sac_saved"``: what torchtitan's op-level selective checkpointing saves beyond them (the
#: saved matmuls' outputs, SDPA's output and log-sum-exp: :func:`~llmsizing.op_sac.op_sac_layer_bytes` less
#: the input; 0 in every other mode).
ACT_COMPONENTS = ("norms", "attention_projections", "attention_core", "mlp", "dropout_masks", "residuals",
                  "op_sac_saved", "embedding", "logits")
#: Components of :data:`ACT_COMPONENTS` that one recomputation mode alone holds:
#: :meth:`ActivationMemory.to_frame` lists them only where they are not 0.
MODE_COMPONENTS = ("op_sac_saved",)


@dataclass(frozen=True)
class ActivationMemory:
    """Activation bytes of one micro-batch on one GPU.

    ``per_layer_bytes`` is what one layer keeps until its backward (with full recomputation: only its
    input); ``layers_bytes`` is all layers plus, with recomputation, what one layer rebuilds during its
    backward (its whole working set for ``"full"``, its attention core for ``"selective"``): the peak.
    ``breakdown`` splits :attr:`total_bytes` by component (keys :data:`ACT_COMPONENTS`). ``recomputed``:
    ``(layers whose whole forward is rerun in the backward, of layers)`` on this GPU (full recomputation, or
    partial; ``(0, 0)`` without), which tells :func:`~llmsizing.footprint.phase_values` which of autocast's
    weight copies outlive the forward. ``offset_bytes``: what the forward keeps beyond ``layer_count x
    per_layer_bytes`` (counted in ``layers_bytes``): a mixture of experts' pipeline stage holding more MoE
    layers than its share (:func:`~llmsizing.moe.stage_offset_bytes`; negative with fewer), 0 otherwise. It is
    kept, not rebuilt (issue 35).
    """

    per_layer_bytes: float
    layers_bytes: float
    embedding_bytes: float
    logits_bytes: float
    breakdown: dict = field(default_factory=dict)
    layer_count: int = 0
    recomputed: tuple = (0, 0)
    offset_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        return self.layers_bytes + self.embedding_bytes + self.logits_bytes

    @property
    def rebuilt_bytes(self) -> float:
        """What recomputation adds during the backward (one layer rebuilt, or its attention core) on top of
        what the forward keeps, ``layers x per_layer_bytes`` plus ``offset_bytes``: zero without
        recomputation. The peak of a step counts it only in the backward
        (:func:`~llmsizing.memory.step_phases`)."""
        return max(self.layers_bytes - self.layer_count * self.per_layer_bytes - self.offset_bytes, 0.0)

    def to_frame(self):
        import pandas as pd

        from .units import GiB

        # (op SAC's own component is listed where it holds something: tables of other modes as before)
        bd = {k: v for k, v in self.breakdown.items() if v or k not in MODE_COMPONENTS}
        df = pd.DataFrame({"bytes": pd.Series(bd, dtype="float64")})
        df.loc["total"] = self.total_bytes
        df["GiB"] = df["bytes"] / GiB
        df.index.name = "component"
        return df


def dense_layer_terms(model: Model, *, batch, seq, dtype: str = "bf16", attention: str = "flash",
                dropout: bool = False, tp: int = 1, sp: bool = False, mask_bytes: float = DROPOUT_MASK_BYTES,
                selective: bool = False, stack: str = "fused", autocast: bool = False,
                fp8: str | None = None, attention_mask: bool = False) -> dict[str, float]:
    """:func:`llmsizing.activations.layer_terms` of a dense layer (its arguments and checks; see there). A
    mixture of experts' layer uses it for what it shares with a dense one (norms, attention, masks): nothing
    here reads the MLP experts' fields. A mixture of attention heads (``attn_experts`` ``E_a``, top-``k``,
    ``w = heads x head_dim / tp``) saves more in ``attention_projections``, per token: the ``k`` routed
    copies of the input the query experts read (``q_in k h``), the attention output gathered for the output
    experts (``p w``), their ``k`` outputs before the router's weights (``p k h``, as an MoE layer's
    ``combine``) and the router's fp32 logits and scores, routing map and top-k weights (``9 E_a + 4 k``,
    as :func:`~llmsizing.moe.moe_layer_terms`' router); with sequence parallelism these are the gathered
    tokens' (JetMoE's ``JetMoeMoA.map`` / ``reduce``)."""
    model = resolve_model(model, moe=True)
    attention_mask = _check_mask(attention_mask, stack)
    batch, seq = _int_or_array("batch", batch), _int_or_array("seq", seq)
    check_choice("dtype", dtype, ACTIVATION_DTYPES)
    check_choice("attention", attention, ATTENTION)
    check_bool("dropout", dropout)
    tp, sp = check_int("tp", tp), check_bool("sp", sp)
    check_layout(model, tp=tp, sp=sp)
    mask_bytes = check_number("mask_bytes", mask_bytes)
    check_bool("selective", selective)
    stack, autocast = _check_stack(stack, autocast, dtype, selective)
    fp8 = _check_fp8(fp8, stack, autocast)
    if stack == "hf":
        terms = _hf_layer_terms(model, batch=batch, seq=seq, dtype=dtype, attention=attention,
                                dropout=dropout, tp=tp, sp=sp, mask_bytes=mask_bytes, autocast=autocast)
        if attention_mask:
            terms["attention_core"] += masked_sdpa_extra_bytes(model, batch=batch, seq=seq, dtype=dtype,
                                                               attention=attention, tp=tp, autocast=autocast)
        return terms
    if stack == "torchtitan":     # the fused count plus what eager torchtitan keeps (llmsizing.titan_terms)
        check_torchtitan(model, attention=attention, dropout=dropout, tp=tp, autocast=autocast,
                         selective=selective)
        terms = dense_layer_terms(model, batch=batch, seq=seq, dtype=dtype, tp=tp, sp=sp)
        extra = torchtitan_extra_terms(model, batch=batch, seq=seq, dtype=dtype, tp=tp, sp=sp)
        return {k: v + extra[k] for k, v in terms.items()}
    p = DTYPE_BYTES[dtype]
    s, b = seq, batch
    h, a, g, d, f = model.hidden, model.heads, model.kv_heads, model.head_dim, model.ffn_hidden
    sb = s * b
    r = tp if sp else 1                        # divisor for tensors TP replicates and SP splits
    a_t, f_t = a / tp, f / tp                  # heads and MLP width per tensor-parallel rank
    g_t = max(g / tp, 1)                       # KV heads are replicated when tp > kv_heads
    stats = (2 if model.norm.startswith("layernorm") else 1) * 4   # fp32 mean/rstd per token
    m = mask_bytes if dropout else 0.0

    norms = 2 * (p * sb * h + stats * sb) / r
    q_in, q_out, mlp_f = _fp8_saved(fp8, p, attention, model.gated_mlp)
    projections = q_in * sb * h / r + q_out * sb * a_t * d   # QKV input + output-projection input
    ea = getattr(model, "attn_experts", 0)
    if ea:          # a mixture of attention heads: routed copies of the input, the output experts' input
        k = model.attn_experts_per_token        # gathered, their outputs before the weighted sum, the router
        projections += sb * (q_in * k * h + p * a_t * d + p * k * h + 9 * ea + 4 * k)
    core = p * sb * (a_t * d + 2 * g_t * d)                  # Q, K, V
    masks = 2 * m * sb * h / r                               # dropout after attention and after MLP
    if attention == "flash" and not selective:
        core += 4 * b * a_t * s                              # fp32 log-sum-exp per row
        # (selective recomputation reruns the whole core from Q, K, V, so it keeps no log-sum-exp either)
    elif not selective:
        probs = a_t * s * s * b                              # softmax output (eager)
        core += p * probs
        if dropout:
            core += p * probs                                # dropout output fed to attn @ V
            masks += m * probs
    mlp = q_in * sb * h / r + mlp_f * sb * f_t
    return {"norms": norms, "attention_projections": projections, "attention_core": core, "mlp": mlp,
            "dropout_masks": masks}


def _fp8_saved(fp8, p, attention, gated) -> tuple[float, float, float]:
    """Bytes per element of what one layer saves as Linear inputs: ``(q_in, q_out, mlp_f)``: the QKV and fc1
    inputs (per element of ``h``), the output projection's input (per element of ``a*d``), and the MLP's
    ``f``-wide tensors together (per element of ``f``).

    Without ``fp8``: ``p``, ``p`` and ``3p`` (gated: Megatron-LM's fused SwiGLU keeps its ``[gate | up]``
    input, ``linear_fc2`` the product; ``data/fused_swiglu_saved.csv``) or ``2p`` (the activation's input and
    output). With Transformer Engine's ``fp8-mixed``: the QKV, fc1 and fc2 inputs in FP8 (``module/linear.py``
    keeps the column-wise FP8 copy of the input; ``module/layernorm_linear.py`` the norm's FP8 output), and
    with flash attention the output projection's input twice, the kernel's own bf16 output plus the Linear's
    FP8 copy (gated: ``2p + 1`` for the MLP, the fused SwiGLU's bf16 input and fc2's FP8 input). DeepSeek-V3
    (``fp8-deepseek``): 1 x 128-tile FP8 inputs, the output projection's input in E5M6, and the activation's
    input cached in FP8 with its output recomputed (gated: gate and up in FP8, nothing else; the attention's
    backward reads the E5M6 copy, so no bf16 output is kept)."""
    if fp8 is None:
        return p, p, (3 if gated else 2) * p
    from .precision import FP8_SCHEMES

    sch = FP8_SCHEMES[fp8]
    q_out = sch.attn_out_bytes + (p if attention == "flash" and not sch.attn_out_shared else 0.0)
    if sch.cache_act_input:
        return sch.input_bytes, q_out, (2 if gated else 1) * sch.input_bytes
    return sch.input_bytes, q_out, (2 if gated else 1) * p + sch.input_bytes


def _check_fp8(fp8, stack, autocast):
    if fp8 is None:
        return None
    from .precision import FP8_SCHEMES

    fp8 = check_choice("fp8", fp8, FP8_SCHEMES)
    if stack != "fused" or autocast:
        raise ValueError(f"fp8={fp8!r} counts Transformer Engine's or DeepSeek's fused modules: use "
                         "stack='fused' and autocast=False")
    return fp8


def _check_mask(attention_mask, stack) -> bool:
    attention_mask = check_bool("attention_mask", attention_mask)
    if attention_mask and stack != "hf":
        raise ValueError("attention_mask=True models Hugging Face's SDPA path (a padded batch): use "
                         "stack='hf'; Megatron-style fused attention takes packed sequences with a causal "
                         "flag, no mask")
    return attention_mask


def masked_sdpa_extra_bytes(model: Model | str, *, batch, seq, dtype: str = "bf16", attention: str = "flash",
                            tp: int = 1, autocast: bool = False) -> float:
    """What one Hugging Face decoder layer saves on top when the batch carries a padding mask (issue 26), on
    the SDPA path (``attention="flash"``; the eager path repeats K and V and adds its causal mask either way,
    so nothing changes there: 0).

    ``transformers/integrations/sdpa_attention.py`` (5.23) calls SDPA with ``enable_gqa=True`` only when
    ``use_gqa_in_sdpa`` holds, which on CUDA and CPU needs ``attention_mask is None``. With a mask it expands
    K and V to every query head (``repeat_kv``) first, and SDPA saves the expanded copies:
    ``2 p s b (a - g) d / t`` more bytes. PyTorch's ``scaled_dot_product_attention`` also turns HF's boolean
    ``b x 1 x s x s`` mask into an additive one in the query's dtype (``convert_boolean_attn_mask`` in ATen's
    ``attention.cpp``) on every call, and the kernel saves it for its backward: ``p b s^2`` more bytes per
    layer, not divided by ``t`` (one mask for all heads). Measured on a small HF Llama (GQA 8/2) on the CPU in
    ``data/masked_sdpa.csv`` (``tools/measure_memory.py mask``): an all-ones mask is dropped by HF's mask
    builder, so only padding costs. On CUDA the mask sends SDPA to the memory-efficient kernel, which saves
    the same ``attn_bias`` input; that path is read from the source, not measured."""
    model = resolve_model(model)
    batch, seq = _int_or_array("batch", batch), _int_or_array("seq", seq)
    check_choice("dtype", dtype, ACTIVATION_DTYPES)
    check_choice("attention", attention, ATTENTION)
    tp, autocast = check_int("tp", tp), check_bool("autocast", autocast)
    if attention == "eager":
        return 0.0 * batch * seq
    p = 2.0 if autocast else DTYPE_BYTES[dtype]
    a_t, g_t = model.heads / tp, max(model.kv_heads / tp, 1)
    return 2 * p * seq * batch * (a_t - g_t) * model.head_dim + p * batch * seq * seq


def _check_stack(stack, autocast, dtype, selective) -> tuple[str, bool]:
    stack = check_choice("stack", stack, STACKS)
    autocast = check_bool("autocast", autocast)
    if autocast and dtype != "bf16":
        raise ValueError(f"autocast=True runs the matrix multiplies in bf16: use dtype='bf16', got {dtype!r}")
    if stack == "hf" and selective:
        raise ValueError("stack='hf' has no selective recomputation (Hugging Face transformers checkpoints "
                         "whole decoder layers): use recompute='none' or 'full'")
    return stack, autocast


def _hf_layer_terms(model: Model, *, batch, seq, dtype, attention, dropout, tp, sp, mask_bytes,
                    autocast) -> dict[str, float]:
    """One layer's saved bytes for Hugging Face ``transformers`` modules (``modeling_llama.py``,
    ``modeling_gpt2.py``, ``modeling_mistral.py``, ``modeling_qwen2.py``, ``activations.py``), tensor by
    tensor, as measured on the real classes in ``data/step_saved_tensors.csv`` (chapter 5). What differs
    from the fused count:

    * ``LlamaRMSNorm`` upcasts its input to fp32 and saves that copy (``pow``/``mul`` save it), the fp32
      ``rsqrt``, and the normalised tensor cast back (saved by the gain's ``mul``): ``4 + p`` bytes per
      element instead of ``p``. ``nn.LayerNorm`` (GPT-2) is one kernel: its input, mean and rstd, as fused.
    * Eager attention: Llama's ``softmax(dtype=float32)`` saves fp32 probabilities and the matmul saves
      their 16-bit copy (``4 + 2`` bytes per score in bf16); K and V are saved after ``repeat_kv``, at the
      query heads' width. GPT-2's eager path keeps the scores' dtype, except under autocast, which runs the
      softmax in fp32 (``4 + 2`` again).
    * ``gelu_new`` (GPT-2's ``NewGELUActivation``) is written in Python: its input, ``tanh(...)``,
      ``0.5 * x`` and ``1 + tanh(...)`` are saved, plus the output fed to ``c_proj``: 5 tensors of ``f``
      columns where a fused kernel keeps 2.
    * Under ``torch.autocast`` the residual stream, the norms and the rotary embedding stay fp32, and every
      ``nn.Linear`` saves its own bf16 cast of its fp32 input (q, k, v each; gate and up each).
    """
    p = 2.0 if autocast else DTYPE_BYTES[dtype]      # bytes of what the matmuls produce and save
    p_res = 4.0 if autocast else p                    # the residual stream's dtype
    s, b = seq, batch
    h, a, g, d, f = model.hidden, model.heads, model.kv_heads, model.head_dim, model.ffn_hidden
    sb = s * b
    r = tp if sp else 1
    a_t, f_t = a / tp, f / tp
    g_t = max(g / tp, 1)
    m = mask_bytes if dropout else 0.0
    llama = model.norm.startswith("rmsnorm")
    if llama:   # fp32 copy of the input + rstd + the normalised tensor in the input's dtype
        one_norm = (4 * sb * h + 4 * sb + p_res * sb * h) if p_res == 2 else (2 * 4 * sb * h + 4 * sb)
    else:       # nn.LayerNorm: input + mean + rstd (fp32 statistics on CUDA)
        one_norm = p_res * sb * h + 8 * sb
    norms = 2 * one_norm / r
    # inputs of the projections: one shared tensor, or one bf16 cast per nn.Linear under autocast
    n_qkv = (3 if llama else 1) if autocast else 1
    n_mlp_in = (2 if model.gated_mlp else 1) if autocast else 1
    projections = n_qkv * p * sb * h / r + p * sb * a_t * d
    masks = 2 * m * sb * h / r
    if attention == "flash":                    # SDPA: q, k, v, output, fp32 log-sum-exp
        core = p * sb * (a_t * d + 2 * g_t * d) + 4 * b * a_t * s
    else:
        kv = a_t if llama else g_t              # repeat_kv expands K and V to the query heads
        core = p * sb * (a_t * d + 2 * kv * d)
        probs = a_t * s * s * b
        if llama or autocast:   # fp32 softmax (Llama's dtype=float32; autocast's fp32 op list) + 16-bit copy
            core += 4 * probs + (p * probs if p == 2 else 0.0)
        else:                   # GPT-2's eager softmax stays in the scores' dtype
            core += p * probs
        if dropout:
            core += p * probs
            masks += m * probs
    if model.gated_mlp:
        act = 4 * p * sb * f_t                  # gate, up, act(gate), product
    elif model.activation == "gelu_new":
        act = 5 * p * sb * f_t                  # NewGELUActivation in Python
    else:
        act = 2 * p * sb * f_t
    mlp = n_mlp_in * p * sb * h / r + act
    return {"norms": norms, "attention_projections": projections, "attention_core": core, "mlp": mlp,
            "dropout_masks": masks}


def _int_or_array(name: str, value):
    """An int checked by :func:`check_int`, or a NumPy array of integers >= 1 (for vectorised sweeps)."""
    import numpy as np

    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iu" or value.size == 0 or (value < 1).any():
            raise ValueError(f"{name} as an array must hold integers >= 1, got {value!r}")
        if (value > MAX_MEANINGFUL).any():
            raise ValueError(f"{name} must be <= {MAX_MEANINGFUL:,}")
        return value.astype(np.int64).astype(float)   # float: products of int64 could wrap around
    return check_int(name, value)


def dense_activation_memory(model: Model | str, *, batch: int, seq: int, dtype: str = "bf16",
                      attention: str = "flash", dropout: bool = False, recompute: str = "none",
                      tp: int = 1, sp: bool = False, mask_bytes: float = DROPOUT_MASK_BYTES,
                      logits_dtype: str = "fp32", stack: str = "fused", autocast: bool = False,
                      fp8: str | None = None, cp: int = 1, recompute_layers: int | None = None,
                      attention_mask: bool = False) -> ActivationMemory:
    """:func:`llmsizing.activations.activation_memory` with every layer a dense block (its arguments and
    checks; see there). A mixture of experts' activations start from it
    (:func:`llmsizing.moe.moe_activation_memory`): nothing here reads the MoE fields, so the model itself is
    passed, not a copy with them cleared."""
    model = resolve_model(model, moe=True)
    attention_mask = _check_mask(attention_mask, stack)
    if recompute_layers is not None:
        from .parallel import check_recompute_layers

        check_choice("recompute", recompute, RECOMPUTE)
        n = check_recompute_layers(recompute, recompute_layers, model.layers)
        kw = dict(batch=batch, seq=seq, dtype=dtype, attention=attention, dropout=dropout, tp=tp, sp=sp,
                  mask_bytes=mask_bytes, logits_dtype=logits_dtype, stack=stack, autocast=autocast, fp8=fp8,
                  cp=cp, attention_mask=attention_mask)
        return partial_recompute_activations(dense_activation_memory(model, recompute="none", **kw),
                                             dense_activation_memory(model, recompute="full", **kw),
                                             layers=model.layers, recomputed=n)
    batch = check_int("batch", batch)
    seq = check_int("seq", seq)
    cp = check_int("cp", cp)
    if check_choice("recompute", recompute, RECOMPUTE_MODES) in OP_SAC_MODES:
        check_op_sac(model, recompute=recompute, tp=tp, sp=sp, cp=cp, attention=attention, stack=stack,
                     autocast=autocast, fp8=fp8, dropout=dropout)
    if cp > 1:
        check_layout(model, tp=check_int("tp", tp), cp=cp, seq=seq)
        if attention != "flash":
            raise ValueError(f"cp={cp} needs attention='flash', got attention={attention!r}: "
                             "context-parallel attention runs on flash or fused kernels (Transformer "
                             "Engine), which keep no s x s matrix")
        seq //= cp                                # this rank's tokens: everything below is theirs
    check_choice("dtype", dtype, ACTIVATION_DTYPES)
    check_choice("attention", attention, ATTENTION)
    check_bool("dropout", dropout)
    tp = check_int("tp", tp)
    check_bool("sp", sp)
    mask_bytes = check_number("mask_bytes", mask_bytes, minimum=0.0)
    check_choice("logits_dtype", logits_dtype, ACTIVATION_DTYPES)
    check_layout(model, tp=tp, sp=sp)
    stack, autocast = _check_stack(stack, autocast, dtype, recompute == "selective")
    fp8 = _check_fp8(fp8, stack, autocast)
    if stack == "torchtitan":
        check_torchtitan(model, attention=attention, dropout=dropout, tp=tp, autocast=autocast,
                         selective=recompute == "selective", cp=cp)

    p = DTYPE_BYTES[dtype]
    p_res = 4.0 if autocast else p               # the residual stream's dtype (fp32 under autocast)
    h, L, V = model.hidden, model.layers, model.vocab
    sb = seq * batch
    r = tp if sp else 1
    kw = dict(batch=batch, seq=seq, dtype=dtype, attention=attention, dropout=dropout, tp=tp, sp=sp,
              mask_bytes=mask_bytes, stack=stack, autocast=autocast, fp8=fp8, attention_mask=attention_mask)
    one_layer = dense_layer_terms(model, **kw, selective=(recompute == "selective"))
    per_layer = sum(one_layer.values())
    comps = {k: L * v for k, v in one_layer.items()}
    comps["residuals"] = comps["op_sac_saved"] = 0.0
    if recompute == "full":
        per_layer = p_res * sb * h / r                       # the checkpointed layer input
        comps = dict(dense_layer_terms(model, **kw))               # one layer's working set during backward,
        if stack == "fused" or model.norm.startswith("layernorm") or p_res == 4:
            comps["norms"] -= per_layer                      # whose first norm input IS its checkpoint
        # (Hugging Face's RMSNorm on a 16-bit input saves an fp32 copy instead, so nothing is shared)
        comps["residuals"], comps["op_sac_saved"] = L * per_layer, 0.0
        layers = sum(comps.values())
    elif recompute == "selective":
        # During backward each layer's attention core is rebuilt, one layer at a time: the peak holds the
        # kept tensors of every layer plus ONE layer's recomputed core (what selective dropped).
        rebuilt = dense_layer_terms(model, **kw)
        if attention == "flash":   # the rebuilt flash kernel saves a NEW output for its own backward
            rebuilt["attention_core"] += DTYPE_BYTES[dtype] * batch * seq * model.heads / tp * model.head_dim
        for k in one_layer:
            comps[k] += rebuilt[k] - one_layer[k]
        layers = L * per_layer + sum(rebuilt.values()) - per_layer
    elif recompute in OP_SAC_MODES:
        # every layer keeps what the op policy saves; the backward rebuilds one layer's working set at a time,
        # of which the input, V, w1's output (and SDPA's output and log-sum-exp where kept) are kept tensors
        per_layer = op_sac_layer_bytes(model, batch=batch, seq=seq, dtype=dtype, recompute=recompute, tp=tp,
                                       sp=sp)
        sdpa = OP_SAC_SDPA_SAVED[recompute]
        sb, a_d = seq * batch, model.heads * model.head_dim / tp         # (per tensor-parallel rank)
        g_d = max(model.kv_heads / tp, 1) * model.head_dim
        inputs = p * sb * h / r                              # the layer's input: the checkpoint's argument
        comps["norms"] = one_layer["norms"] - inputs
        comps["attention_projections"] = one_layer["attention_projections"] - sdpa * p * sb * a_d
        comps["attention_core"] = (one_layer["attention_core"] - p * sb * g_d
                                   - sdpa * 4 * batch * model.heads / tp * seq)
        comps["mlp"] = one_layer["mlp"] - p * sb * model.ffn_hidden / tp
        comps["dropout_masks"] = one_layer["dropout_masks"]
        comps["residuals"] = L * inputs                      # every layer's input, as full recomputation's
        comps["op_sac_saved"] = L * per_layer - comps["residuals"]     # what the op policy saves beyond it
        shared = op_sac_shared_bytes(model, batch=batch, seq=seq, dtype=dtype, recompute=recompute, tp=tp,
                                     sp=sp)
        layers = L * per_layer + sum(one_layer.values()) - shared
    else:
        layers = L * per_layer
    stats = (2 if model.norm.startswith("layernorm") else 1) * 4
    embedding = 8 * sb + (mask_bytes * sb * h / r if dropout else 0.0)   # int64 token ids + dropout mask
    logits = ((p * sb * h + stats * sb) / r                  # final norm input + statistics
              + p * sb * h / r                               # LM-head input
              + DTYPE_BYTES[logits_dtype] * sb * V / tp      # log-probabilities saved by the loss
              + 8 * sb)                                      # int64 targets
    if stack in ("hf", "torchtitan"):
        # Hugging Face and torchtitan (eager RMSNorm, F.cross_entropy on .float(), train.py l.132): the final
        # norm saves what its layers' norms save. The LM head's output itself is not kept: ForCausalLMLoss
        # upcasts it with .float() and log_softmax saves only its own fp32 output (the Trainer drops the
        # model's outputs before the backward), as measured.
        one_norm = _hf_layer_terms(model, **{k: v for k, v in kw.items()
                                             if k not in ("stack", "fp8", "attention_mask")})["norms"] / 2
        logits += one_norm - (p * sb * h + stats * sb) / r
    if stack == "torchtitan":     # SP: the LM head keeps its gathered input; RoPE's table, once per model
        logits += lm_head_gathered_bytes(model, batch=batch, seq=seq, dtype=dtype, tp=tp, sp=sp)
        embedding += rope_table_bytes(model, seq=seq)
    comps["embedding"] = embedding
    comps["logits"] = logits
    comps = {k: comps[k] for k in ACT_COMPONENTS}
    return ActivationMemory(per_layer, layers, embedding, logits, comps, L,
                            (L, L) if recompute == "full" else (0, L))


def partial_recompute_activations(none: ActivationMemory, full: ActivationMemory, *, layers: int,
                                  recomputed: int, in_flight: float = 1.0, embedding: bool = True,
                                  logits: bool = True) -> ActivationMemory:
    """The activations of ``layers`` layers of which ``recomputed`` keep only their input (full recomputation,
    ``full``: :func:`~llmsizing.activations.activation_memory` with ``recompute="full"``) and the rest every
    tensor (``none``: ``recompute="none"``), for ``in_flight`` micro-batches of them (a pipeline stage's, as
    :func:`~llmsizing.parallel.pipeline_in_flight` counts them; 1 without a pipeline); the embedding's and the
    logits' tensors are ``none``'s, each kept only if ``embedding`` / ``logits`` (the first / last stage).

    Per micro-batch: ``recomputed x`` the checkpointed input (``p s b h / t`` with sequence parallelism) ``+
    (layers - recomputed) x`` a plain layer's bytes, and while a recomputed layer is rebuilt in the backward,
    its working set on top (``full.rebuilt_bytes``; nothing if no layer is recomputed). That is the peak of
    Megatron-LM's block method if the rebuild coincided with every plain layer still alive. It does not quite:
    the backward reaches the recomputed layers (a chunk's first ones) after its plain layers of that
    micro-batch have freed their tensors, so this overstates the peak by at most the rebuilt layer's working
    set (0.47 GiB of the 51.5 GiB of Llama 3 405B's most loaded GPU at 128K, tp 8 with SP, cp 16, pp 16 x 4
    virtual stages, 16 micro-batches, ``recomputed`` 1 layer per chunk: 1%; it was 0.57 GiB before issue 26).
    Kept so that ``recomputed = layers`` is exactly ``recompute="full"`` and ``0`` exactly ``"none"``. The
    breakdown puts the checkpoints under ``"residuals"`` as full recomputation does. Taught in the "Long
    context" chapter."""
    layers = check_int("layers", layers)
    r = check_int("recomputed", recomputed, minimum=0, maximum=layers)
    in_flight = check_number("in_flight", in_flight)
    plain = layers - r
    kept = in_flight * layers
    rebuilt = full.rebuilt_bytes if r else 0.0
    units = (kept * full.per_layer_bytes if r == layers else kept * none.per_layer_bytes if r == 0
             else in_flight * (r * full.per_layer_bytes + plain * none.per_layer_bytes))
    per_layer = (full.per_layer_bytes if r == layers else none.per_layer_bytes if r == 0 else units / kept
                 if kept else 0.0)
    emb = in_flight * none.embedding_bytes if embedding else 0.0
    lg = none.logits_bytes if logits else 0.0
    share = in_flight * plain / none.layer_count if none.layer_count else 0.0
    bd = {k: none.breakdown[k] * share for k in ACT_COMPONENTS}
    if r:
        full_layer = full.layer_count * full.per_layer_bytes            # the checkpoints of full's layers
        for k in ACT_COMPONENTS:                                        # one rebuilt layer's working set
            if k not in ("embedding", "logits"):
                bd[k] += full.breakdown[k] - (full_layer if k == "residuals" else 0.0)
        bd["residuals"] += in_flight * r * full.per_layer_bytes
    bd["embedding"], bd["logits"] = emb, lg
    return ActivationMemory(per_layer, units + rebuilt, emb, lg, bd, kept, (r, layers))


def korthikanti_bytes_per_layer(model: Model | str, *, batch: int, seq: int, tp: int = 1,
                                sp: bool = False) -> float:
    """Korthikanti et al. 2022's closed form, as printed (16-bit, dropout, eager attention, f = 4h):
    ``sbh(34 + 5as/h)``; with TP ``sbh(10 + 24/t + 5as/(ht))``; with TP+SP ``sbh(34 + 5as/h)/t``.
    Kept verbatim so tests can compare the tensor-by-tensor count against the paper."""
    model = resolve_model(model)
    s, b = check_int("seq", seq), check_int("batch", batch)
    t, sp = check_int("tp", tp), check_bool("sp", sp)
    check_layout(model, tp=t, sp=sp)
    h, a = model.hidden, model.heads
    if t == 1:
        return s * b * h * (34 + 5 * a * s / h)
    if sp:
        return s * b * h * (34 + 5 * a * s / h) / t
    return s * b * h * (10 + 24 / t + 5 * a * s / (h * t))


def selective_flash_extra_bytes(model: Model | str, *, batch: int, seq: int, dtype: str = "bf16",
                                tp: int = 1) -> float:
    """What selective recomputation adds to the saved activations under flash attention, while one layer is
    rebuilt in the backward (chapter 4, "Recomputation"; measured in chapter 5): the rebuilt kernel saves a
    fresh output for its own backward, ``p b s a d / t`` bytes (``p s b h / t`` when ``a d = h``), and the
    other ``L - 1`` layers no longer keep their fp32 log-sum-exps, ``(L - 1) 4 a b s / t``. Positive for any
    real model: with flash attention selective recomputation buys no memory (Korthikanti et al. 2022, Sec. 5,
    recompute the attention core; Dao 2023, FlashAttention-2, one fp32 log-sum-exp per row and head).
    :func:`~llmsizing.activations.activation_memory`'s ``"selective"`` minus ``"none"`` with flash."""
    model = resolve_model(model)
    b, s = check_int("batch", batch), check_int("seq", seq)
    p = DTYPE_BYTES[check_choice("dtype", dtype, ACTIVATION_DTYPES)]
    t = check_int("tp", tp)
    check_layout(model, tp=t)
    a, d, L = model.heads, model.head_dim, model.layers
    return (p * b * s * a * d - (L - 1) * 4 * a * b * s) / t
