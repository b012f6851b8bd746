"""Model states (weights, gradients, optimizer) and the total training footprint per GPU, for any model and
layout.

``model_states`` is taught in chapter 2 ("Bytes per parameter"); ``training_memory`` in chapter 4
("Activation memory"). The pieces live below: the dense model states in :mod:`llmsizing.states`, a mixture of
experts' in :mod:`llmsizing.moe`, the activations in :mod:`llmsizing.activations`, the step's peak from its
parts in :mod:`llmsizing.footprint`, ``model_states``, ``stage_params`` and chapter 2's tables of bytes per
parameter in :mod:`llmsizing.gpu_states`, ZeRO-3's gathered unit (``zero3_gathered_bytes``) in
:mod:`llmsizing.zero_traffic`; their names are importable from here too. Sources are listed in
:mod:`llmsizing.precision` and :mod:`llmsizing.activations`; the options for what a run's own code does
(``loss``, ``tp_vocab``, ``no_sync_grads``) cite theirs in :mod:`llmsizing.footprint`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

from ._validate import MAX_MEANINGFUL, check_choice, check_int, check_number
from .moe import foreach_temporary_bytes as _moe_foreach_temporary_bytes
from .moe import largest_tensor as _moe_largest_tensor
from .moe import moe_model_states as _moe_model_states
from .moe import _most
from .moe_arrays import EpLayouts
from .mtp import check_mtp_depth, mtp_layout, mtp_sides
from .memory_dualpipe import check_dualpipe, dualpipe_ranks, rank_params
from .moe_time import SCHEDULES
from .activations import (STACKS, activation_memory, cp_attention_buffers_bytes, layer_terms,
                          stage_activations)
from .catalog import resolve_model
from .flops import _partial_flops_per_token, training_flops_per_token
from .hardware import check_recipe_runs_on
from .job import takes_job
from .model import Model
from .parallel import (Parallel, check_recompute_layers, derived_layout, pipeline_in_flight,
                       recomputed_layers, resolve_parallel, stage_chunks)
from .precision import DTYPE_BYTES, OPTIMIZERS, RECIPES, check_recipe
# ZeRO-3's gathered unit lives with FSDP's root in zero_traffic (re-exported: memory.zero3_gathered_bytes)
from .zero_traffic import _zero3_gathered, zero3_gathered_bytes  # noqa: F401
from .states import (FIXED_OVERHEAD_BYTES, FRAGMENTATION, USABLE_FRACTION, ModelStates, _frame, _stage_linear,  # noqa: F401
                     _kept_state_elements, _layer_params, _stage_params, _states, _tp_share,
                     default_overhead_bytes,
                     edge_params, model_states_for_params, optimizer_state_elements, peak_room_bytes,
                     total_with_allowance_bytes)
from .footprint import (LAYER_WORKING_SET, LOSS_BACKWARD_BYTES_PER_LOGIT, OPTIMIZER_IMPLS, PHASES,  # noqa: F401
                        STEP_PARTS, TrainingMemory, check_code_options, check_grad_buffer, loss_option_bytes,
                        phase_values, step_phases, zero_grad_buffer)
from .gpu_states import (_checked_stage_params, bytes_per_param_table, min_gpus_for_bytes,  # noqa: F401
                         model_states, recipe_tensor_table, stage_params)


# ----------------------------------------------------------------------------- the peak of a step


def optimizer_temporaries_bytes(model: Model | str, *, precision: str = "bf16-mixed",
                                optimizer: str = "adamw", optimizer_impl: str = "foreach",
                                parallel: Parallel | None = None) -> float:
    """Bytes the optimizer step allocates on top of the model states, per GPU (chapter 4, "The peak of a
    step").

    PyTorch's Adam/AdamW (``torch/optim/adamw.py``, ``_multi_tensor_adamw`` / ``_single_tensor_adamw``): the
    update divides by ``sqrt(v) + eps``. The ``foreach`` path computes ``torch._foreach_sqrt`` of every second
    moment of the group at once, a temporary the size of the whole state buffer (4 bytes per parameter in
    fp32); the ``for-loop`` path builds the same denominator one tensor at a time (two temporaries of the
    largest tensor alive together); ``fused`` does it inside the kernel (nothing). Optimizers other than
    Adam/AdamW are counted with no temporaries (an approximation: their updates are in place except for small
    scalars). Measured in ``data/step_measurements.csv`` (chapter 5).
    """
    model = resolve_model(model, moe=True)
    impl = check_choice("optimizer_impl", optimizer_impl, OPTIMIZER_IMPLS)
    check_recipe("precision", precision)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    return _optimizer_temporaries(model, precision, optimizer, impl, resolve_parallel(parallel, model))


def _optimizer_temporaries(model: Model, precision: str, optimizer: str, impl: str, par: Parallel) -> float:
    """:func:`optimizer_temporaries_bytes` of arguments already checked (``par`` resolved for ``model``):
    :func:`training_memory` checks them once (issue 35: the planner makes thousands of calls)."""
    if optimizer not in ("adam", "adamw") or impl == "fused":
        return 0.0
    recipe = RECIPES[precision]
    state = DTYPE_BYTES[recipe.states]
    shard = par.tp * par.pp * (par.dp_cp if par.zero >= 1 else 1)
    if impl == "foreach":
        return (_moe_foreach_temporary_bytes(model, state, par) if model.is_moe else
                model.n_params * state / shard)
    largest = _moe_largest_tensor(model, par) if model.is_moe else max(math.prod(s) for _, _, s,
                                                                       _ in model.tensors())
    return 2 * largest * state / par.tp          # the largest tensor, split by tensor parallelism


def autocast_copies_bytes(model: Model | str, *, parallel: Parallel | None = None) -> float:
    """Bytes of the 16-bit weight copies ``torch.autocast`` keeps during a step (recipe ``"bf16-amp"``).

    Autocast casts every fp32 weight that enters a matrix multiply to bf16 once per forward and caches the
    copy (``torch/csrc/autograd/autocast_mode.cpp``, the weight-cast cache); the linear layers then save the
    copy for their backward, so it lives until that layer's backward is done. That is 2 bytes per
    matrix-multiply weight and bias (not the embedding lookup, nor the norms' gains), about 2 bytes per
    parameter. Per GPU: divided by ``tp * pp``. Measured in ``data/step_measurements.csv`` (chapter 5).
    """
    model = resolve_model(model)
    par, parts = resolve_parallel(parallel, model), model.param_breakdown()
    matmul = (parts["attention"] + parts["mlp"]
              + (parts["embedding"] if model.tied_embeddings else parts["lm_head"]))
    return 2.0 * matmul / (par.tp * par.pp)


@takes_job("memory")
def training_memory(model: Model | str, *, batch: int, seq: int, precision: str = "bf16-mixed",
                    optimizer: str = "adamw", attention: str = "flash", recompute: str = "none",
                    dropout: bool = False, grad_accum: int = 1, parallel: Parallel | None = None,
                    overhead_bytes: float | None = None, stack: str = "fused",
                    optimizer_impl: str = "foreach", _all_stages: bool = False, _stages=None,
                    recompute_layers: int | None = None, attention_mask: bool = False,
                    mtp_depth: int = 0, capacity_factor: float | None = None,
                    grad_buffer: bool | str = False, schedule: str = "1f1b", loss: str = "fp32",
                    tp_vocab: str = "split", no_sync_grads: str = "none") -> TrainingMemory:
    """Per-GPU memory of one training step: the peak over its phases (:func:`step_phases`) + an overhead
    allowance (:func:`default_overhead_bytes` of the peak, unless ``overhead_bytes`` is given).

    The parts: :func:`~llmsizing.gpu_states.model_states`; :func:`~llmsizing.activations.activation_memory` of
    one micro-batch of ``batch`` sequences of ``seq`` tokens, on the software ``stack`` (``"fused"``:
    Megatron-style kernels; ``"hf"``: Hugging Face ``transformers`` modules as they are; ``"torchtitan"``:
    eager torchtitan, :mod:`~llmsizing.titan_terms`); the loss's
    temporaries (:data:`LOSS_BACKWARD_BYTES_PER_LOGIT`); the optimizer's temporaries
    (:func:`optimizer_temporaries_bytes`, ``optimizer_impl`` one of :data:`OPTIMIZER_IMPLS`); and with
    ``precision="bf16-amp"`` (fp32 weights, grads and AdamW states under ``torch.autocast(bf16)``, what the
    Hugging Face Trainer's ``bf16=True`` runs) the cached 16-bit weight copies
    (:func:`autocast_copies_bytes`).

    Activations are saved in the recipe's working dtype (fp32 for ``fp32``, 16-bit for the mixed recipes,
    autocast's mix for ``bf16-amp``); an FP8 recipe (``fp8-mixed``, ``fp8-deepseek``) saves its Linear inputs
    in FP8 (:func:`~llmsizing.activations.layer_terms` with ``fp8=``, ``stack="fused"`` only) and keeps its
    FP8 weight copies alive with the weights (:class:`ModelStates`). ``grad_accum`` changes the global batch
    (``batch * grad_accum * dp``), and from the second micro-batch on the gradients are alive during the
    forward. With ``parallel``, the result is per GPU, for the most loaded one: each pipeline stage gets its
    own parameters (:func:`~llmsizing.gpu_states.stage_params`), its own activations (1F1B keeps up to ``pp``
    micro-batches in flight on the first stage, more when interleaved; the logits and the loss on the last
    stage), ZeRO-3's gathered unit, and ``offload`` moves states to the host; the pipeline's micro-batches are
    the ``grad_accum`` steps. ``flops_per_token``: one token's compute, recomputation included
    (:func:`~llmsizing.flops.training_flops_per_token`). With context parallelism (``parallel.cp``) each GPU
    holds the activations, logits and loss temporaries of ``seq / cp`` tokens (``seq`` a multiple of ``2 cp``,
    flash attention), ZeRO shards over ``dp x cp``, and one layer's attention holds the K and V it exchanges
    (:func:`~llmsizing.activations.cp_attention_buffers_bytes`, by ``parallel.cp_comm``).
    ``recompute_layers=N`` with ``recompute="full"`` (``None``: every layer) recomputes the first ``N`` layers
    of each model chunk only, Megatron-LM's ``--recompute-method block``
    (:func:`~llmsizing.activations.stage_activations`). ``attention_mask=True`` (``stack="hf"``): a padded
    batch, on which Hugging Face's SDPA path keeps K and V at the query heads' width and a copy of the mask
    per layer (:func:`~llmsizing.activations.masked_sdpa_extra_bytes`). A mixture of experts' ``mtp_depth``
    (DeepSeek-V3's MTP modules on the last stage, :mod:`llmsizing.mtp`) and ``capacity_factor`` (expert
    buffers at that capacity, :func:`~llmsizing.moe.moe_layer_terms`; ``None``: dropless): issue 35.
    ``grad_buffer=True`` (issue 38): the gradients live in a persistent buffer, alive in every phase (not
    freed by ``zero_grad(set_to_none=True)``), as Megatron-Core's ``DistributedDataParallel`` keeps them
    (``param_and_grad_buffer.py``: one ``grad_data`` of all the chunk's parameters, zeroed by ``reset()``
    each step, never freed; FP32 unless ``--grad-reduce-in-bf16``, so with ``precision=
    "bf16-mixed-fp32-grads"``, Megatron-LM's default) and PyTorch DDP's buckets (the parameters' dtype;
    ``data/grad_buffer_measurements.csv``). The buffer is the recipe's gradients, full size with ZeRO-1 (the
    distributed optimizer shards the optimizer only); ZeRO-2 and 3 free their sharded gradients: refused
    there. DeepSpeed's ZeRO-1 and 2 keep no such buffer (``stage_1_and_2.py``: the gradients are freed by
    the reduction and the optimizer step; their reduce bucket,
    :func:`~llmsizing.footprint.deepspeed_bucket_bytes`, is not counted), but its bf16 ZeRO-1 with
    ``grad_accum_dtype`` fp32 runs ``BF16_Optimizer``, whose whole-model FP32 buffer is ``grad_buffer=True``
    with ``"bf16-mixed-fp32-grads"``. ``grad_buffer="ddp-copy"``, PyTorch DDP's default
    (``gradient_as_bucket_view=False``), also counts the ``.grad`` tensors it keeps apart from its buckets,
    from the backward to ``zero_grad`` (twice the gradients at the end of the backward and in the optimizer
    step, measured), and ``"ddp-view"`` those that accumulate apart under ``no_sync`` until the last
    micro-batch (:func:`~llmsizing.footprint.grad_copies`). ``schedule``: ``"1f1b"`` and ``"zb1p"`` as 1F1B,
    ``"dualpipe"`` per rank (:mod:`llmsizing.memory_dualpipe`, arXiv:2412.19437 Table 2). What a run's own
    code does (issue 38, chapter 5's traced runs, :mod:`llmsizing.measured_traced`): ``loss`` how it computes
    the cross-entropy (:data:`~llmsizing.footprint.LOSS_KINDS`: eager fp32, eager bf16, compiled),
    ``tp_vocab`` whether tensor parallelism splits the embedding and the logits
    (:data:`~llmsizing.footprint.TP_VOCABS`) and ``no_sync_grads`` FSDP2's unsharded gradients between
    micro-batches (:data:`~llmsizing.footprint.NO_SYNC_GRADS`); the defaults price what it always did.
    Taught in chapter 4; checked against measured steps in chapter 5; context parallelism and partial
    recomputation in "Long context"; the buffer in chapter 12.
    """
    model = resolve_model(model, moe=True)
    batch, seq = check_int("batch", batch), check_int("seq", seq)
    grad_accum = check_int("grad_accum", grad_accum)
    stack = check_choice("stack", stack, STACKS)
    impl = check_choice("optimizer_impl", optimizer_impl, OPTIMIZER_IMPLS)
    check_recipe("precision", precision)
    depth, base = check_mtp_depth(model, mtp_depth), model
    cap = {} if capacity_factor is None else {"capacity_factor": capacity_factor}
    model, par = mtp_layout(model, resolve_parallel(parallel, model, seq=seq), depth)   # its blocks: layers
    grad_buffer = check_grad_buffer(grad_buffer, par.zero)
    loss, tp_vocab, no_sync = check_code_options(model, par, loss=loss, tp_vocab=tp_vocab,
                                                 no_sync_grads=no_sync_grads, grad_buffer=grad_buffer)
    vocab = {} if tp_vocab == "split" else {"tp_vocab": tp_vocab}      # (the defaults: the same cache keys)
    overhead_bytes = None if overhead_bytes is None else check_number("overhead_bytes", overhead_bytes)
    schedule = check_choice("schedule", schedule, SCHEDULES)
    if schedule == "dualpipe":
        check_dualpipe(par, grad_accum, recompute_layers)
        if _stages is not None:
            raise ValueError("schedule='dualpipe' counts every stage: _stages must be None")
    stages = tuple(range(par.pp) if _stages is None else sorted(set(_stages)))
    # the activations' side (no ZeRO stage, dp or ep in it) and the model states' side (no micro-batch,
    # recomputation or sequence): kept for the planner's searches (_stages: issue 35), else afresh
    kept = _all_stages and _stages is not None
    acts = (_kept_act_side if kept else _act_side)(
        model, batch, seq, precision, attention, dropout, recompute, recompute_layers, grad_accum, stack,
        attention_mask, _act_layout(par) if kept else par, stages, **cap,
        **vocab, **({} if loss == "fp32" else {"loss": loss}))
    check_choice("optimizer", optimizer, OPTIMIZERS)
    states = (_kept_state_side if kept else _state_side)(model, precision, optimizer, impl, par, stages,
                                                         **vocab)
    if depth:
        acts, states = mtp_sides(base, par, depth, acts, states, precision=precision, optimizer=optimizer,
                                 batch=batch, seq=seq, recompute=recompute)
    flops, cp_buffers, loss_b, working, stage_acts, in_flight = acts
    gathered, copies, head_copy, by_stage = states
    results = []
    if schedule == "dualpipe":       # (each rank: two stages' 1F1B sides, memory_dualpipe)
        core = _act_core(model, batch, seq, precision, attention, dropout, recompute, stack, attention_mask,
                         par.tp, par.sp, par.cp, par.cp_comm, par.expert_tp, **cap)[0]
        results, stages = dualpipe_ranks(par, grad_accum, acts, states, core.rebuilt_bytes, overhead_bytes,
                                         grad_buffer, (batch, seq, stack, impl)), ()
    # FSDP2's no-sync: each stage's parameters on this GPU, unsharded, in the reduce dtype (footprint)
    unsharded = ([DTYPE_BYTES[no_sync] * n for n in _stage_params_of(model, par, tp_vocab)]
                 if no_sync != "none" else [0.0] * par.pp)
    # _stages: only these stages (the planner asks for the first, with the most micro-batches in flight and
    # the embedding, and the last, with the logits and head: tests/test_planner.py checks it on every stage)
    for i in stages:
        last = i == par.pp - 1
        st, head_grads, stage_opt = by_stage[i]
        phases = _stage_phases(model, par, i, grad_accum, acts, states, grad_buffer=grad_buffer,
                               no_sync_bytes=unsharded[i])
        overhead = (default_overhead_bytes(max(sum(v.values()) for v in phases.values()))  # of the peak
                    if overhead_bytes is None else overhead_bytes)
        results.append(TrainingMemory(st, stage_acts[i], overhead, batch, grad_accum, seq, flops, phases,
                                      stack, impl, copies, loss_b if last else 0.0, stage_opt, i,
                                      in_flight[i], gathered, grad_buffer=grad_buffer))
    if _all_stages and _stages is not None:     # (the searches read only their stages' pieces: no table)
        return results
    on_stage = _stage_params_of(model, par, tp_vocab)
    on_stage = rank_params(on_stage) if schedule == "dualpipe" else on_stage
    rows = tuple(_stage_row(r, on_stage[r.stage]) for r in results)
    if _all_stages:
        return [replace(r, stages=rows) for r in results]
    return replace(max(results, key=lambda r: (r.total_bytes, -r.stage)), stages=rows)


def _stage_phases(model: Model, par: Parallel, i: int, grad_accum: int, acts: tuple, states: tuple,
                  phases=step_phases, grad_buffer: bool | str = False, no_sync_bytes: float = 0.0) -> dict:
    """:func:`step_phases` of stage ``i`` from :func:`_act_side`'s ``acts`` and :func:`_state_side`'s
    ``states`` (shared by :func:`training_memory` and :func:`_search_pieces`, which reads them as tuples:
    ``phases=phase_values``). ``grad_buffer`` counts for ZeRO 0 and 1 only (:func:`check_grad_buffer`)."""
    _, cp_buffers, loss, working, stage_acts, _ = acts
    gathered, copies, head_copy, by_stage = states
    last = i == par.pp - 1
    st, head_grads, stage_opt = by_stage[i]
    return phases(st, stage_acts[i], grad_accum=grad_accum, autocast_bytes=copies,
                       loss_bytes=loss if last else 0.0, optimizer_bytes=stage_opt,
                       layer_working_bytes=working, head_grad_bytes=head_grads,
                       head_copy_bytes=head_copy if last else 0.0,
                       embedding_grad_bytes=(2 * head_grads if model.tied_embeddings and par.pp == 1
                                             else 0.0),
                       gathered_bytes=gathered, cp_buffers_bytes=cp_buffers,
                       grad_buffer=zero_grad_buffer(grad_buffer, par.zero), no_sync_bytes=no_sync_bytes)


def _search_pieces(model: Model, par: Parallel, stages, *, batch: int, grad_accum: int, seq: int,
                   precision: str = "bf16-mixed", optimizer: str = "adamw", attention: str = "flash",
                   recompute: str = "none", dropout: bool = False, stack: str = "fused",
                   optimizer_impl: str = "foreach", recompute_layers: int | None = None,
                   attention_mask: bool = False, grad_buffer: bool | str = False) -> list[float]:
    """The bytes of every piece (:func:`step_phases`, each summed) of the stages ``stages``, stage by
    stage: what ``training_memory(..., _all_stages=True, _stages=stages)``'s ``pieces_bytes`` hold, without
    its other checks nor its result objects (issue 35: the planner's searches make hundreds of calls with
    arguments :func:`~llmsizing.planner.plan` already checked, ``par`` a
    :func:`~llmsizing.parallel.kept_parallel` layout). The same kept sides and :func:`_stage_phases` as
    :func:`training_memory`: the same bytes. ``par`` a :class:`~llmsizing.moe.EpLayouts` (layouts that
    differ in ``ep`` and ``dp`` only, no offloading, no autocast): each piece an array, an entry per layout,
    each entry bit for bit that layout's own call's."""
    if type(par) is EpLayouts:
        if RECIPES[precision].autocast or optimizer_impl == "for-loop":
            raise ValueError("EpLayouts: neither autocast nor the for-loop optimizer step")
        # (their checks: resolve_parallel's read no dp, so one layout per ep; one that resolves to another
        # layout, its stage split written out, sends all of them through it)
        firsts = par.firsts()
        if any(resolve_parallel(p, model, seq=seq) is not p for p in firsts):
            par = EpLayouts(resolve_parallel(p, model, seq=seq) for p in par.pars)
        act_par, state_par = _act_layout(firsts[0]), par
    else:                                  # (kept: resolve_parallel's checks, as training_memory's)
        par, act_par, state_par = _search_layouts(par, model, seq)
    stages = tuple(sorted(set(stages)))
    # (1F1B's in flight, min(pp - i, m), is the same for any m >= pp: the act side is keyed on min(m, pp))
    acts = _kept_search_acts(model, batch, seq, precision, attention, dropout, recompute, recompute_layers,
                             grad_accum if act_par.virtual_stages > 1 else min(grad_accum, act_par.pp), stack,
                             attention_mask, act_par, stages)
    states = _kept_state_side(model, precision, optimizer, optimizer_impl, state_par, stages)
    # (grad_buffer: ZeRO-2 and 3 layouts of a search free their gradients as before, _stage_phases)
    return [sum(v) for i in stages for v in _stage_phases(model, par, i, grad_accum, acts, states,
                                                           phase_values, grad_buffer=grad_buffer)]


def _stage_params_of(model: Model, par: Parallel, tp_vocab: str = "split") -> list[float]:
    """Each stage's parameters on one GPU, as :func:`training_memory` weighs them (the whole model without
    tensor or pipeline parallelism; ``tp_vocab="replicated"``: the embedding whole on each tensor-parallel
    rank), ``model`` and ``par`` checked by the caller."""
    if par.tp * par.pp > 1 or model.is_moe:
        out = _checked_stage_params(model, par)
        if tp_vocab == "replicated":
            out[0] += model.param_breakdown()["embedding"] * (1 - 1 / par.tp)
        return out
    return [float(model.n_params)]


def _act_side(model: Model, batch: int, seq: int, precision: str, attention: str, dropout: bool,
              recompute: str, recompute_layers, grad_accum: int, stack: str, attention_mask: bool,
              par: Parallel, stages: tuple, core=None, flops: bool = True, loss: str = "fp32",
              tp_vocab: str = "split", **cap) -> tuple:
    """:func:`training_memory`'s activations' side for checked arguments: the FLOPs per token, context
    parallelism's K and V buffers, the loss's temporaries, one layer's working set, each stage of ``stages``'
    activations (:func:`~llmsizing.activations.stage_activations`) and each stage's micro-batches in flight.
    None depends on the ZeRO stage, ``dp`` or ``ep`` (:func:`_act_layout`). ``core``: :func:`_act_core` or
    the planner's kept one (``cap``: its ``capacity_factor=``). ``flops=False``: no FLOPs (searches).
    ``loss``, ``tp_vocab``: :func:`~llmsizing.footprint.loss_option_bytes`."""
    acts, cp_buffers, loss_b, working = (core or _act_core)(model, batch, seq, precision, attention, dropout,
                                                            recompute, stack, attention_mask, par.tp, par.sp,
                                                            par.cp, par.cp_comm, par.expert_tp, **cap)
    acts, loss_b = loss_option_bytes(acts, loss_b, model, batch=batch, local_seq=seq // par.cp, tp=par.tp,
                                     stack=stack, loss=loss, tp_vocab=tp_vocab)
    act_kw = _act_kwargs(batch, seq, precision, attention, dropout, stack, attention_mask, par.tp, par.sp,
                         par.cp, par.expert_tp)
    n_rc = check_recompute_layers(recompute, recompute_layers, model.layers, par)
    plain = None if n_rc is None else activation_memory(model, recompute="none", **act_kw)
    act_dtype, local = act_kw["dtype"], seq // par.cp            # this GPU's tokens of each sequence
    flops = (None if not flops else training_flops_per_token(model, seq=seq, recompute=recompute)
             if n_rc is None else
             _partial_flops_per_token(model, seq, sum(recomputed_layers(model.layers, par, n_rc)), False))
    if par.virtual_stages > 1:
        in_flight = pipeline_in_flight(par.pp, grad_accum, par.virtual_stages,
                                       chunks=stage_chunks(model.layers, par))
    else:                                          # (kept: a search asks for the same few again and again)
        in_flight = _kept_in_flight(par.pp, grad_accum)
    # each stage's output, kept per model chunk and micro-batch in flight unless freed once sent
    # (Megatron-LM's deallocate_output_tensor; Llama 3, Sec. 3.3.2): 16-bit, the stage's share of the tokens
    out_bytes = (0.0 if par.deallocate_pipeline_outputs or par.pp == 1 else
                 DTYPE_BYTES[act_dtype] * batch * local * model.hidden / (par.tp if par.sp else 1))
    stage_acts = {i: stage_activations(acts, model, par, i, in_flight[i], plain=plain, recompute_layers=n_rc,
                                       output_bytes=out_bytes * in_flight[i] * par.virtual_stages,
                                       breakdown=flops is not None) for i in stages}   # (a search's: none)
    return flops, cp_buffers, loss_b, working, stage_acts, in_flight


def _act_kwargs(batch: int, seq: int, precision: str, attention: str, dropout: bool, stack: str,
                attention_mask: bool, tp: int, sp: bool, cp: int, expert_tp: bool) -> dict:
    """The keywords :func:`_act_side` and :func:`_act_core` give
    :func:`~llmsizing.activations.activation_memory`: activations are saved in the recipe's working dtype
    (autocast: bf16 matmuls, fp32 parts via ``autocast=True``)."""
    recipe = RECIPES[precision]
    return dict(batch=batch, seq=seq, dtype="bf16" if recipe.autocast else recipe.weights,
                attention=attention, dropout=dropout, tp=tp, sp=sp, stack=stack, autocast=recipe.autocast,
                fp8=recipe.fp8, cp=cp, expert_tp=expert_tp, attention_mask=attention_mask)


def _act_core(model: Model, batch: int, seq: int, precision: str, attention: str, dropout: bool,
              recompute: str, stack: str, attention_mask: bool, tp: int, sp: bool, cp: int, cp_comm: str,
              expert_tp: bool, capacity_factor: float | None = None) -> tuple:
    """What :func:`_act_side` reads of the layout's ``tp``, ``sp``, ``cp`` alone (not of ``pp``, the
    micro-batches or the stages): :func:`~llmsizing.activations.activation_memory` with ``recompute``, context
    parallelism's K and V buffers, the loss's temporaries and one layer's working set (experts' buffers at
    ``capacity_factor``)."""
    act_kw = _act_kwargs(batch, seq, precision, attention, dropout, stack, attention_mask, tp, sp, cp,
                         expert_tp)
    acts = activation_memory(model, recompute=recompute, capacity_factor=capacity_factor, **act_kw)
    local = seq // cp                                  # this GPU's tokens of each sequence
    cp_buffers = cp_attention_buffers_bytes(model, batch=batch, seq=seq, tp=tp, cp=cp, cp_comm=cp_comm,
                                            dtype=act_kw["dtype"])
    loss = LOSS_BACKWARD_BYTES_PER_LOGIT[stack] * batch * local * model.vocab / tp
    working = LAYER_WORKING_SET * sum(layer_terms(model, batch=batch, seq=local, dtype=act_kw["dtype"],
                                                  attention=attention, dropout=dropout, tp=tp, sp=sp,
                                                  stack=stack, autocast=act_kw["autocast"],
                                                  fp8=act_kw["fp8"], attention_mask=attention_mask).values())
    return acts, cp_buffers, loss, working


def _state_side(model: Model, precision: str, optimizer: str, impl: str, par: Parallel,
                stages: tuple, tp_vocab: str = "split") -> tuple:
    """:func:`training_memory`'s model states' side for checked arguments: ZeRO-3's gathered unit, autocast's
    copies (all and the LM head's), and for each stage of ``stages`` its
    :class:`~llmsizing.states.ModelStates`, its LM head's gradient (the last stage) and its optimizer
    temporaries. None depends on the micro-batch, the recomputation or the sequence."""
    recipe = RECIPES[precision]
    amp = recipe.autocast
    copies = autocast_copies_bytes(model, parallel=par) if amp else 0.0
    opt_tmp = _optimizer_temporaries(model, precision, optimizer, impl, par)     # (checked by the caller)
    parts = model.param_breakdown()
    head = parts["embedding"] if model.tied_embeddings else parts["lm_head"]
    head_copy = 2.0 * head / (par.tp * par.pp) if amp else 0.0    # the LM head's share of the copies
    gathered = _zero3_gathered(model, precision, par)
    elements = _kept_state_elements(model, optimizer)
    on_stage = _stage_params_of(model, par, tp_vocab)
    by_stage = {}
    for i in stages:
        states = (_moe_model_states(model, elements, precision, optimizer, par, i) if model.is_moe else
                  _states(model.n_params, elements, precision, optimizer, par, on_rank=on_stage[i],
                          linear=_stage_linear(model, par.tp, par.pp, par.stage_layers)[i]))
        grad_per_param = states.gradients_bytes / on_stage[i]
        head_grads = grad_per_param * head / par.tp if i == par.pp - 1 else 0.0
        stage_opt = opt_tmp * on_stage[i] / _most(on_stage, par) if impl == "foreach" else opt_tmp
        if par.offload != "none":
            stage_opt = 0.0                   # the optimizer steps on the host (DeepSpeed's CPU Adam)
        by_stage[i] = (states, head_grads, stage_opt)
    return gathered, copies, head_copy, by_stage


#: :func:`_act_side` and :func:`_state_side` kept for the planner's searches (:func:`training_memory` with
#: ``_stages``, whose callers read the pieces only and never change what they get).
@functools.lru_cache(maxsize=1024)
def _kept_act_core(model: Model, batch: int, seq: int, precision: str, attention: str, dropout: bool,
                   recompute: str, stack: str, attention_mask: bool, tp: int, sp: bool, cp: int, cp_comm: str,
                   expert_tp: bool, capacity_factor: float | None = None) -> tuple:
    """:func:`_act_core`, kept, with its parts that do not read ``cp_comm`` (all but the K/V buffers) kept
    apart (:func:`_kept_act_no_comm`): the same calls with the same arguments, so the same numbers (plan36:
    chapter 17's move of its K/V exchange read every layout's activations again)."""
    acts, loss, working, dtype = _kept_act_no_comm(model, batch, seq, precision, attention, dropout,
                                                   recompute, stack, attention_mask, tp, sp, cp, expert_tp,
                                                   capacity_factor)
    cp_buffers = cp_attention_buffers_bytes(model, batch=batch, seq=seq, tp=tp, cp=cp, cp_comm=cp_comm,
                                            dtype=dtype)
    return acts, cp_buffers, loss, working


@functools.lru_cache(maxsize=1024)
def _kept_act_no_comm(model: Model, batch: int, seq: int, precision: str, attention: str, dropout: bool,
                      recompute: str, stack: str, attention_mask: bool, tp: int, sp: bool, cp: int,
                      expert_tp: bool, capacity_factor: float | None) -> tuple:
    """:func:`_act_core`'s activations, loss temporaries and working set (and the activations' dtype): what it
    works out without ``cp_comm``, by the same calls."""
    act_kw = _act_kwargs(batch, seq, precision, attention, dropout, stack, attention_mask, tp, sp, cp,
                         expert_tp)
    acts = activation_memory(model, recompute=recompute, capacity_factor=capacity_factor, **act_kw)
    local = seq // cp
    loss = LOSS_BACKWARD_BYTES_PER_LOGIT[stack] * batch * local * model.vocab / tp
    working = LAYER_WORKING_SET * sum(layer_terms(model, batch=batch, seq=local, dtype=act_kw["dtype"],
                                                  attention=attention, dropout=dropout, tp=tp, sp=sp,
                                                  stack=stack, autocast=act_kw["autocast"],
                                                  fp8=act_kw["fp8"], attention_mask=attention_mask).values())
    return acts, loss, working, act_kw["dtype"]


_kept_act_side = functools.lru_cache(maxsize=4096)(functools.partial(_act_side, core=_kept_act_core))
#: :func:`_search_pieces`' own: without the FLOPs per token, which no search reads.
_kept_search_acts = functools.lru_cache(maxsize=4096)(functools.partial(_act_side, core=_kept_act_core,
                                                                        flops=False))
#: :func:`~llmsizing.parallel.pipeline_in_flight` without interleaving (its callers only read it).
_kept_in_flight = functools.lru_cache(maxsize=1024)(pipeline_in_flight)
_kept_state_side = functools.lru_cache(maxsize=4096)(_state_side)


@functools.lru_cache(maxsize=4096)
def _act_layout(par: Parallel) -> Parallel:
    """``par`` without what the activations never read (ZeRO stage, ``dp``, ``ep``, offload, FSDP's
    settings), so that the layouts a search weighs share :func:`_kept_act_side`'s entries."""
    # (derived without the checks par passed: parallel.derived_layout says why they hold; plan36)
    return derived_layout(par, dp=1, zero=0, ep=1, offload="none", reshard_after_forward=True,
                          grad_reduce="micro_batch")


@functools.lru_cache(maxsize=4096)
def _search_layouts(par: Parallel, model: Model, seq: int) -> tuple:
    """``resolve_parallel(par, model, seq)``, its :func:`_act_layout` and the layout :func:`_state_side`
    reads: without ZeRO, offloading or ``ep`` neither ``dp`` nor ``cp`` (only ZeRO's shards read them), so
    layouts differing in these alone share an entry (issue 32). One lookup per :func:`_search_pieces`."""
    par = resolve_parallel(par, model, seq=seq)
    as_is = par.zero or par.offload != "none" or par.ep > 1 or par.dp * par.cp == 1
    return par, _act_layout(par), par if as_is else derived_layout(par, dp=1, cp=1, cp_comm="p2p")


def _stage_row(r: "TrainingMemory", params: float) -> dict:
    return {"stage": r.stage, "params": params, "micro-batches in flight": r.in_flight,
            "weights": r.weights_bytes, "gradients": r.gradients_bytes, "optimizer": r.optimizer_bytes,
            "activations": r.activations_bytes, "peak": r.peak_bytes, "peak phase": r.peak_phase,
            "total": r.total_bytes, "host": r.states.host_bytes}


def activation_room_bytes(model: Model | str, gpu, *, parallel: Parallel | None = None,
                          precision: str = "bf16-mixed", optimizer: str = "adamw",
                          usable_fraction: float = USABLE_FRACTION) -> float:
    """Bytes of activations one GPU can still hold under the book's memory rule, the one the planner applies
    (chapter 12): the step's peak, model states + ZeRO-3's gathered unit (:func:`zero3_gathered_bytes`) +
    activations, plus the overhead allowance on that peak (:func:`default_overhead_bytes`: 1 GiB + 8%), must
    stay within ``usable_fraction`` (:data:`USABLE_FRACTION`, 90%) of the GPU's memory. So the room is
    ``(usable_fraction x capacity - FIXED_OVERHEAD_BYTES) / (1 + FRAGMENTATION) - states - gathered``
    (:func:`~llmsizing.states.peak_room_bytes` of the usable memory);
    negative when the states alone do not fit. A bound that counts no loss or optimizer temporaries
    (:func:`training_memory` does). ``gpu`` is a catalogue name or :class:`~llmsizing.catalog.GPU`.
    Chapter 7 (Exercise 7.1)."""
    from ._validate import check_fraction
    from .catalog import get_gpu

    model = resolve_model(model, moe=True)
    check_recipe("precision", precision)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    frac = check_fraction("usable_fraction", usable_fraction)
    par = resolve_parallel(parallel, model)
    states = model_states(model, precision=precision, optimizer=optimizer, parallel=par).total_bytes
    gathered = _zero3_gathered(model, precision, par)
    usable = frac * get_gpu(gpu).memory_bytes
    return peak_room_bytes(usable) - states - gathered


# ----------------------------------------------------------------------------- largest micro-batch
def max_micro_batch(model: Model | str, gpu, seq, *, precision: str = "bf16-mixed", optimizer: str = "adamw",
                    attention: str = "flash", recompute: str = "none", dropout: bool = False,
                    parallel: Parallel | None = None, overhead_bytes: float | None = None,
                    stack: str = "fused", optimizer_impl: str = "foreach", grad_accum: int = 1,
                    recompute_layers: int | None = None, attention_mask: bool = False,
                    grad_buffer: bool | str = False, loss: str = "fp32", tp_vocab: str = "split",
                    no_sync_grads: str = "none"):
    """The largest micro-batch (sequences) whose :func:`training_memory` (``attention_mask``,
    ``grad_buffer``, ``loss``, ``tp_vocab`` and ``no_sync_grads`` too) fits
    ``gpu``, for one sequence length ``seq`` (an int; returns an int) or many (a 1-D array of ints; returns an
    int array).

    0 means not even one sequence fits (the model states alone may already be too large). ``grad_accum`` is
    the number of micro-batches per step (with pipeline parallelism it sets how many are in flight, and from
    two on the gradients are alive during the forward). Exact, not a
    search: activation memory is linear in the micro-batch (Korthikanti et al. 2022, Sec. 4: every saved
    tensor has a factor ``b``) and the default overhead allowance is linear in the bytes it covers. The
    peak is the largest of a few pieces (:func:`step_phases`), each ``A(s) + b * B(s)`` with ``A``, ``B``
    quadratics in ``s``: the peak fits iff every piece fits. The pieces are read off six calls of
    :func:`training_memory`, which makes the sweep over sequence lengths a NumPy expression (no loop) that
    agrees with :func:`training_memory` by construction (``recompute_layers`` too: partial recomputation is
    linear in the micro-batch as well). Taught in chapter 4. A mixture of experts (``parallel`` with ``ep``)
    too: chapter 18.
    """
    import numpy as np

    model = resolve_model(model, moe=True)
    capacity = check_recipe_runs_on(precision, gpu).memory_bytes
    seqs = np.asarray(seq)
    if seqs.ndim > 1 or seqs.size == 0 or seqs.dtype.kind not in "iu":
        raise TypeError(f"seq must be an integer or a 1-D array of integers, got {seq!r}")
    if (seqs < 1).any() or (seqs > MAX_MEANINGFUL).any():
        bad = seqs.min() if (seqs < 1).any() else seqs.max()
        raise ValueError(f"seq must be >= 1 and <= {MAX_MEANINGFUL:,}, got {bad:,}")
    kw = dict(precision=precision, optimizer=optimizer, attention=attention, recompute=recompute,
              dropout=dropout, parallel=parallel, overhead_bytes=overhead_bytes, stack=stack,
              optimizer_impl=optimizer_impl, grad_accum=grad_accum, recompute_layers=recompute_layers,
              attention_mask=attention_mask, grad_buffer=grad_buffer, loss=loss, tp_vocab=tp_vocab,
              no_sync_grads=no_sync_grads)
    cp = resolve_parallel(parallel).cp
    if cp > 1 and (seqs % (2 * cp)).any():
        bad = int(seqs[seqs % (2 * cp) != 0].flat[0])
        resolve_parallel(parallel, seq=bad)               # raises, naming seq and the rule
    # three sequence lengths the layout accepts (a multiple of 2 cp with context parallelism)
    points = np.array([1024.0, 2048.0, 3072.0]) * (1 if cp == 1 else 2 * cp // math.gcd(1024, 2 * cp))
    # every pipeline stage's pieces: the most loaded stage may change with the micro-batch
    runs = [[training_memory(model, batch=b, seq=int(s), _all_stages=True,
                             **kw) for s in points] for b in (1, 2)]
    if overhead_bytes is None:   # total = FIXED + (1 + FRAGMENTATION) x peak (states.peak_room_bytes)
        limit = peak_room_bytes(capacity)
    else:
        limit = capacity - runs[0][0][0].overhead_bytes
    s = seqs.astype(float)
    b = np.full(s.shape, np.inf)
    pieces = [(i, k) for i, r in enumerate(runs[0][0]) for k in r.pieces_bytes]
    for i, piece in pieces:   # the peak fits iff every piece of every stage fits
        tot = np.array([[r[i].pieces_bytes[piece] for r in row] for row in runs])
        per_seq = np.polyval(np.polyfit(points, tot[1] - tot[0], 2), s)           # B(s): one more sequence
        fixed = np.polyval(np.polyfit(points, tot[0] - (tot[1] - tot[0]), 2), s)  # A(s): at b = 0
        room = limit - fixed
        grows = per_seq > 0.5                      # a piece that does not grow with b (the optimizer step)
        with np.errstate(divide="ignore", invalid="ignore"):
            # round before flooring so that an exact fit is not lost to floating-point noise
            fit = np.where(grows, np.floor(np.round(room / np.where(grows, per_seq, 1.0), 6)),
                           np.where(room >= 0, np.inf, -1.0))
        b = np.minimum(b, fit)
    b = np.maximum(b, 0).astype(np.int64)
    return int(b) if seqs.ndim == 0 else b
