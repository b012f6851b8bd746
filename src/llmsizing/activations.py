"""Activation memory: the tensors a training step saves for the backward pass (chapter 4, "Activation memory";
checked against PyTorch in chapter 5, "Measure it yourself").

The public entry points, for any model: :func:`activation_memory` and :func:`layer_terms` take a dense model
to :mod:`llmsizing.act_terms` (the tensor-by-tensor count of Korthikanti et al. 2022, and its sources) and a
mixture of experts to :mod:`llmsizing.moe` (whose MoE layers add their router, dispatch, experts and combine
to the dense terms); :func:`stage_activations` is one pipeline stage's share;
:func:`cp_attention_buffers_bytes` the transient buffers of context-parallel attention. Every name of
:mod:`llmsizing.act_terms` is importable from here too.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from ._validate import check_bool, check_choice, check_int, check_number
from .act_terms import (ACT_COMPONENTS, ACTIVATION_DTYPES, ATTENTION, DROPOUT_MASK_BYTES, RECOMPUTE,  # noqa: F401
                        STACKS, ActivationMemory, _check_fp8, _check_mask, _check_stack, _fp8_saved,
                        _hf_layer_terms, _int_or_array, dense_activation_memory, dense_layer_terms,
                        korthikanti_bytes_per_layer, masked_sdpa_extra_bytes, partial_recompute_activations)
from .op_sac import OP_SAC_SOURCE, op_sac_layer_bytes, op_sac_matmuls, sdpa_saved  # noqa: F401
from .catalog import resolve_model
from .model import Model
from .moe import moe_activation_memory, moe_block_terms, stage_offset_bytes
from .parallel import OP_SAC_MODES, check_layout, layers_per_stage, recomputed_layers
from .precision import DTYPE_BYTES


def _warn_approximate_layers(model: Model) -> None:
    """Warn (Python shows it once per model) when the count does not describe the model's layers tensor by
    tensor: state-space or recurrent mixers (``mixer``) and attention layers of their own widths or shared KV
    (``attention_layout``: Gemma 3n/4, Zamba) are counted as attention + MLP layers of the main width. Their
    parameters, FLOPs and KV are exact (chapter 1); the saved activations are an approximation."""
    kinds = [k for k, on in (("state-space/recurrent mixer layers", model.mixer is not None),
                             ("attention layers of their own widths or shared KV",
                              model.attention_layout is not None)) if on]
    if kinds:
        import warnings

        warnings.warn(f"activation memory of {model.name!r} counts its {' and '.join(kinds)} as standard "
                      "attention + MLP layers: an approximation (parameters and KV are exact)", stacklevel=3)


def _moe_key(model, kw: dict):
    """A cache key for a mixture of experts' activations: the model and every argument with its type (so that
    ``sp=1`` never hits the entry kept for ``sp=True`` and skips its check), or ``None`` if one is unhashable
    (a NumPy array of batches)."""
    key = (model, tuple((k, type(v), v) for k, v in kw.items()))
    try:
        hash(key)
    except TypeError:
        return None
    return key


@functools.lru_cache(maxsize=1024)
def _kept_moe_activations(key):
    """:func:`llmsizing.moe.moe_activation_memory` for ``key`` (:func:`_moe_key`), kept for the last 1,024:
    the planner's search asks for the same activations under every ZeRO stage, ``dp`` and ``ep`` (issue
    24)."""
    model, kw = key
    return moe_activation_memory(model, **{k: v for k, _, v in kw})


@functools.lru_cache(maxsize=1024)
def _kept_moe_block_terms(key):
    """:func:`llmsizing.moe.moe_block_terms` for ``key`` (:func:`_moe_key`), kept like
    :func:`_kept_moe_activations` (the step's working set asks for it on every call)."""
    model, kw = key
    return moe_block_terms(model, **{k: v for k, _, v in kw})

def layer_terms(model: Model, *, batch, seq, dtype: str = "bf16", attention: str = "flash",
                dropout: bool = False, tp: int = 1, sp: bool = False, mask_bytes: float = DROPOUT_MASK_BYTES,
                selective: bool = False, stack: str = "fused", autocast: bool = False,
                fp8: str | None = None, attention_mask: bool = False) -> dict[str, float]:
    """Bytes one layer saves for backward, by component, with no recomputation except ``selective``.

    ``attention_mask=True`` (``stack="hf"`` only): the batch is padded, so Hugging Face passes a mask to SDPA,
    which then keeps K and V at the query heads' width and a 16-bit copy of the mask per layer
    (:func:`masked_sdpa_extra_bytes`).

    ``fp8`` (an FP8 recipe's name, :data:`~llmsizing.precision.FP8_SCHEMES`) saves the Linear layers' inputs
    as that recipe does (:func:`_fp8_saved`); the norms, attention core and activation inputs stay in
    ``dtype``.

    ``stack="hf"`` counts Hugging Face ``transformers`` modules instead of fused kernels
    (:func:`_hf_layer_terms`); ``autocast=True`` (with ``dtype="bf16"``) the mix of fp32 and bf16 tensors that
    ``torch.autocast`` leaves.

    ``batch`` and ``seq`` may be NumPy arrays (the formula is plain arithmetic), which is how the widgets
    sweep sequence length without a Python loop. The arguments are checked as in :func:`activation_memory`
    (arrays must hold integers >= 1). For a mixture of experts, one MoE layer, with its router, dispatched
    tokens, experts and shared experts under ``"mlp"`` (:func:`llmsizing.moe.moe_block_terms`).
    """
    model = resolve_model(model, moe=True)
    kw = dict(batch=batch, seq=seq, dtype=dtype, attention=attention, dropout=dropout, tp=tp, sp=sp,
              mask_bytes=mask_bytes, selective=selective, stack=stack, autocast=autocast, fp8=fp8)
    if not model.is_moe:
        return dense_layer_terms(model, **kw, attention_mask=attention_mask)
    if _check_mask(attention_mask, stack):    # ---- one MoE layer (llmsizing.moe, issue 24)
        raise ValueError("attention_mask=True is modelled for dense Hugging Face models only")
    key = _moe_key(model, kw)
    return moe_block_terms(model, **kw) if key is None else dict(_kept_moe_block_terms(key))


def activation_memory(model: Model | str, *, batch: int, seq: int, dtype: str = "bf16",
                      attention: str = "flash", dropout: bool = False, recompute: str = "none",
                      tp: int = 1, sp: bool = False, mask_bytes: float = DROPOUT_MASK_BYTES,
                      logits_dtype: str = "fp32", stack: str = "fused", autocast: bool = False,
                      fp8: str | None = None, cp: int = 1, recompute_layers: int | None = None,
                      capacity_factor: float | None = None, expert_tp: bool = False,
                      attention_mask: bool = False) -> ActivationMemory:
    """Bytes saved for backward by one micro-batch of ``batch`` sequences of ``seq`` tokens, on one GPU.

    In the simple case (GPT layer, 16-bit, dropout, eager attention, no TP) the per-layer figure is exactly
    Korthikanti et al.'s ``s*b*h*(34 + 5*a*s/h)`` plus the fp32 norm statistics (``16*s*b`` bytes).
    ``logits_bytes`` counts the final norm and LM-head inputs and the loss's saved log-probabilities,
    ``b*s*V`` in ``logits_dtype`` (fp32 by default: often the largest single tensor with a 128K vocabulary).
    ``tp``/``sp``: tensor parallelism divides the per-head and MLP tensors; sequence parallelism divides the
    rest. Pipeline parallelism is not an argument: with 1F1B the first stage holds ``pp`` micro-batches of
    ``L/pp`` layers, i.e. about the same bytes as here (Korthikanti Sec. 4.2.3).

    ``stack`` chooses the software stack (:data:`STACKS`): ``"fused"`` (the default, the formula above),
    ``"hf"`` (Hugging Face ``transformers`` modules, :func:`_hf_layer_terms`; no selective recomputation) or
    ``"torchtitan"`` (eager torchtitan's Llama, :mod:`llmsizing.titan_terms`: the fused count plus its norms'
    fp32 copies, K and V repeated, SiLU's output and with SP the gathered inputs; RoPE's table once, in
    ``embedding_bytes``; flash, no dropout, autocast, selective recomputation or ``cp``).
    ``autocast=True`` (with ``dtype="bf16"``) counts ``torch.autocast``'s mix of fp32 and bf16 tensors.
    ``fp8`` (an FP8 recipe's name) saves the Linear inputs as that recipe does (:func:`_fp8_saved`).

    ``cp`` (context parallelism) splits the sequence over ``cp`` GPUs: the result is one rank's, the tensors
    of ``seq / cp`` tokens (``seq`` must be a multiple of ``2 cp``, and ``attention="flash"``: see the module
    docstring). The "Long context" chapter teaches it.

    ``recompute_layers`` (with ``recompute="full"``; ``None`` is every layer) recomputes only the first that
    many layers (Megatron-LM's ``--recompute-method block``, :func:`~llmsizing.parallel.recomputed_layers`;
    without a pipeline the model is one chunk): they keep only their input, the others what ``"none"`` keeps
    (:func:`partial_recompute_activations`). ``0`` is ``"none"``, the model's layers ``"full"``.

    A mixture of experts (issue 24) gets its MoE layers' router, dispatched tokens, experts' intermediates and
    combine inputs, and shared experts (:func:`llmsizing.moe.moe_activation_memory`; dropless, or
    ``capacity_factor``; ``expert_tp`` splits the experts' intermediates over ``tp``), in the ``"mlp"``
    component (``recompute_layers`` is not modelled for one).

    ``attention_mask=True`` (``stack="hf"``): a padded batch, whose mask makes Hugging Face's SDPA path keep K
    and V at the query heads' width and a copy of the mask per layer (:func:`masked_sdpa_extra_bytes`).
    """
    model = resolve_model(model, moe=True)
    _warn_approximate_layers(model)
    expert_tp = check_bool("expert_tp", expert_tp)
    kw = dict(batch=batch, seq=seq, dtype=dtype, attention=attention, dropout=dropout, recompute=recompute,
              tp=tp, sp=sp, mask_bytes=mask_bytes, logits_dtype=logits_dtype, stack=stack, autocast=autocast,
              fp8=fp8, cp=cp)
    if not model.is_moe:
        if capacity_factor is not None or expert_tp:
            raise ValueError(f"capacity_factor and expert_tp describe a mixture of experts; {model.name!r} "
                             "is dense")
        return dense_activation_memory(model, **kw, recompute_layers=recompute_layers,
                                       attention_mask=attention_mask)
    # ---- mixture of experts (llmsizing.moe, issue 24)
    if recompute in OP_SAC_MODES:
        op_sac_matmuls(model)             # refuses a mixture of experts, naming recompute
    if _check_mask(attention_mask, stack):
        raise ValueError("attention_mask=True is modelled for dense Hugging Face models only")
    if recompute_layers is not None:
        raise ValueError(f"recompute_layers={recompute_layers!r}: partial recomputation of a mixture of "
                         "experts is not modelled (use recompute='none', 'selective' or 'full')")
    kw = dict(capacity_factor=capacity_factor, expert_tp=expert_tp, **kw)
    key = _moe_key(model, kw)
    if key is None:                       # an unhashable argument: worked out (and refused) there, not kept
        return moe_activation_memory(model, **kw)
    out = _kept_moe_activations(key)      # each caller gets its own breakdown dict
    return replace(out, breakdown=dict(out.breakdown))


def stage_activations(acts: ActivationMemory, model: Model, par, stage: int, in_flight: float, *,
                      plain: ActivationMemory | None = None,
                      recompute_layers: int | None = None, output_bytes: float = 0.0,
                      breakdown: bool = True) -> ActivationMemory:
    """One pipeline stage's activations: ``in_flight`` micro-batches
    (:func:`~llmsizing.parallel.pipeline_in_flight`) of its own layers (and of the embedding's tensors on the
    first stage), one layer rebuilt by recomputation, and the logits (one micro-batch) on the last stage. The
    breakdown's layer components are scaled in proportion. ``acts`` is :func:`activation_memory` of the whole
    model (the only stage, returned as is, without a pipeline). With ``recompute_layers`` (partial
    recomputation, ``acts`` computed with ``recompute="full"`` and ``plain`` with ``"none"``) the stage's
    first ``recompute_layers`` layers of each model chunk keep their input, the others every tensor
    (:func:`partial_recompute_activations`, with :func:`~llmsizing.parallel.recomputed_layers`).
    ``output_bytes``: the stage outputs kept when the pipeline does not free them once sent
    (``Parallel.deallocate_pipeline_outputs=False``), counted as kept tensors (``"residuals"``). Used by
    :func:`~llmsizing.memory.training_memory`. ``breakdown=False``: no breakdown (empty; the planner's
    searches read the totals only)."""
    n_layers = layers_per_stage(model.layers, par)[stage]
    if output_bytes:
        out = stage_activations(acts, model, par, stage, in_flight, plain=plain,
                                recompute_layers=recompute_layers, breakdown=breakdown)
        bd = {**out.breakdown, "residuals": out.breakdown.get("residuals", 0.0) + output_bytes} if breakdown \
            else {}
        kept = out.layer_count + (output_bytes / out.per_layer_bytes if out.per_layer_bytes else 0.0)
        return ActivationMemory(out.per_layer_bytes, out.layers_bytes + output_bytes, out.embedding_bytes,
                                out.logits_bytes, bd, kept, out.recomputed, out.offset_bytes)
    if recompute_layers is not None:
        return partial_recompute_activations(plain, acts, layers=n_layers,
                                             recomputed=recomputed_layers(model.layers, par,
                                                                          recompute_layers)[stage],
                                             in_flight=in_flight if par.pp > 1 else 1.0, embedding=stage == 0,
                                             logits=stage == par.pp - 1)
    if par.pp == 1:
        return acts
    kept = in_flight * n_layers                       # layer x micro-batch units alive at the stage's peak
    layers = kept * acts.per_layer_bytes + acts.rebuilt_bytes
    offset = 0.0
    if getattr(acts, "moe_layers", None):     # ---- a mixture of experts: this stage's own dense / MoE mix
        offset = in_flight * stage_offset_bytes(acts, par, stage)       # kept by the forward, not rebuilt
        layers += offset
    scale = layers / acts.layers_bytes if acts.layers_bytes else 0.0
    emb = in_flight * acts.embedding_bytes if stage == 0 else 0.0
    logits = acts.logits_bytes if stage == par.pp - 1 else 0.0
    bd = {k: v * scale for k, v in acts.breakdown.items()} if breakdown else {}
    if breakdown:
        bd["embedding"], bd["logits"] = emb, logits
    recomputed = (n_layers if acts.recomputed[0] else 0, n_layers)   # (full: all of the stage's)
    return ActivationMemory(acts.per_layer_bytes, layers, emb, logits, bd, kept, recomputed, offset)


def cp_attention_buffers_bytes(model: Model | str, *, batch: int, seq: int, tp: int = 1, cp: int = 1,
                               cp_comm: str = "p2p", dtype: str = "bf16") -> tuple[float, float]:
    """``(forward, backward)``: the bytes context-parallel attention holds on one GPU, on top of the saved
    activations, while one layer's attention runs (transient: freed when that layer's attention forward or
    backward returns, so one layer's worth at a time). Counted from Transformer Engine's
    ``transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py`` (16-bit path), in units
    of one rank's K and V chunk, ``c = p x batch x (seq / cp) x 2 x kv_heads_per_tp_rank x head_dim``:

    * ``"p2p"`` (``AttnFuncWithCPAndKVP2P``): the forward keeps every block it received in a list
      (``p2p_comm_buffers``, ``cp`` entries, the first a concatenated copy of its own K, V) until it returns,
      so ``cp x c``, the whole sequence's K and V; the backward double-buffers K, V and their gradients
      (``2 x (2, *kv.shape)``: ``4 c``) plus a ``dq`` buffer the size of this rank's Q;
    * ``"all_gather"`` (``AttnFuncWithCPAndKVAllGather``): the forward gathers K and V of the whole sequence
      (``cp x c``); the backward gathers them again and builds full-length dK, dV before reduce-scattering
      them (``2 cp x c``). The reorder copies (``index_select`` of the gathered chunks) are left out;
    * ``"a2a"`` (Ulysses, ``AttnFuncWithCPAndQKVOA2A``): the all-to-alls' outputs, the same bytes as their
      inputs: Q, K, V (``c`` + this rank's Q) in the forward, dO and dQ, dK, dV in the backward (``c`` + 2 Q).

    Zero for ``cp = 1``. Both are linear in ``batch``. The K and V of grouped-query attention are small: Llama
    3 405B at 128K with ``tp=8, cp=16`` has one KV head per rank and ``c`` = 4 MiB. Taught in the "Long
    context" chapter."""
    from .parallel import CP_COMMS

    model = resolve_model(model, moe=True)      # attention only: a mixture of experts' is the same
    batch, seq = check_int("batch", batch), check_int("seq", seq)
    tp, cp = check_int("tp", tp), check_int("cp", cp)
    check_choice("cp_comm", cp_comm, CP_COMMS)
    check_choice("dtype", dtype, ACTIVATION_DTYPES)
    check_layout(model, tp=tp, cp=cp, seq=seq)
    if cp == 1:
        return 0.0, 0.0
    p = DTYPE_BYTES[dtype]
    local = seq // cp
    chunk = p * batch * local * 2 * max(model.kv_heads / tp, 1) * model.head_dim
    dq = p * batch * local * model.heads / tp * model.head_dim
    if cp_comm == "p2p":
        return cp * chunk, 4 * chunk + dq
    if cp_comm == "a2a":
        return chunk + dq, chunk + 2 * dq
    return cp * chunk, 2 * cp * chunk


def activation_coefficients(model: Model | str, *, dtype: str = "bf16", attention: str = "flash",
                            dropout: bool = False, selective: bool = False, tp: int = 1, sp: bool = False,
                            mask_bytes: float = DROPOUT_MASK_BYTES) -> tuple[float, float]:
    """One layer's saved bytes written as ``linear * s * b + quadratic * s**2 * b``: returns
    ``(linear, quadratic)``.

    Read off :func:`layer_terms` (exact, since every term there is ``s*b`` or ``s**2*b`` times a constant).
    For Korthikanti et al. 2022's GPT case (16-bit, dropout, eager attention, f = 4h, no TP) this is
    ``(34*h + 16, 5*a)``: their ``34*s*b*h + 5*a*s**2*b`` plus 16 bytes per token of fp32 LayerNorm
    statistics. The quadratic term overtakes the linear one at ``s = linear / quadratic`` tokens. Taught in
    chapter 4.
    """
    model = resolve_model(model)
    check_choice("dtype", dtype, ACTIVATION_DTYPES)
    check_choice("attention", attention, ATTENTION)
    check_bool("dropout", dropout)
    check_bool("selective", selective)
    tp = check_int("tp", tp)
    check_bool("sp", sp)
    mask_bytes = check_number("mask_bytes", mask_bytes, minimum=0.0)
    kw = dict(batch=1, dtype=dtype, attention=attention, dropout=dropout, tp=tp, sp=sp, mask_bytes=mask_bytes,
              selective=selective)
    f1 = sum(layer_terms(model, seq=1, **kw).values())
    f2 = sum(layer_terms(model, seq=2, **kw).values())
    quadratic = (f2 - 2 * f1) / 2
    return f1 - quadratic, quadratic
