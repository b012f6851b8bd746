"""The multi-token-prediction (MTP) module in memory (issue 35): DeepSeek-V3's ``depth`` sequential modules
(DeepSeek-AI 2024, arXiv:2412.19437, Sec. 2.2, Fig. 3), each a transformer block of the model's MoE kind and a
projection ``M`` from the concatenated ``2h`` (the previous depth's hidden state and the next token's
embedding, each through its own RMSNorm) to ``h``, sharing the main model's embedding and output head, on the
last pipeline stage with the head (Sec. 3.2.1). The shared piece of :func:`~llmsizing.memory.training_memory`
(``mtp_depth=``) and :func:`~llmsizing.deepseek.deepseek_memory`; the module's FLOPs are
:func:`llmsizing.moe.mtp_flops_per_token` (``step_time(mtp_depth=)``, ``training_time(mtp_depth=)``)."""
from __future__ import annotations

from dataclasses import replace

from ._validate import check_int
from .model import Model
from .moe import _moe_indices
from .parallel import Parallel, layers_per_stage
from .precision import OPTIMIZERS
from .states import ModelStates, _states

#: Bytes per element of the MTP block's second input, the next token's embedding, kept for backward (BF16).
MTP_EMBEDDING_BYTES = 2.0


def check_mtp_depth(model: Model, depth) -> int:
    """``depth`` an integer from 0 to 8; above 0 only for a mixture of experts (the module's block is a MoE
    block, as DeepSeek-V3's: :func:`llmsizing.moe.mtp_flops_per_token`)."""
    depth = check_int("mtp_depth", depth, minimum=0, maximum=8)
    if depth and not model.is_moe:
        raise ValueError(f"mtp_depth={depth}: the multi-token-prediction module is modelled for a mixture of "
                         f"experts (DeepSeek-V3's MoE block); {model.name} is dense: give mtp_depth=0")
    return depth


def mtp_layout(model: Model, par: Parallel, depth: int) -> tuple[Model, Parallel]:
    """The model with its ``depth`` MTP blocks appended as MoE layers, and the layout with them on the last
    pipeline stage (the main model's split as ``par`` gives it, :func:`~llmsizing.parallel.layers_per_stage`).
    ``depth=0``: ``model`` and ``par`` unchanged."""
    if not depth:
        return model, par
    split = list(layers_per_stage(model.layers, par))
    split[-1] += depth
    moe_idx = sorted(_moe_indices(model)) + list(range(model.layers, model.layers + depth))
    ext = replace(model, layers=model.layers + depth, moe_layers=tuple(moe_idx),
                  name=f"{model.name} (+{depth} MTP)")
    return ext, replace(par, stage_layers=tuple(split))


def mtp_projection_states(model: Model, depth: int, precision: str, optimizer: str,
                          par: Parallel) -> ModelStates:
    """Model states of the ``depth`` projections ``M`` (``2h x h``) and their two RMSNorms (``2h``) on a GPU
    of the last stage, split over ``tp``: ``depth (2h^2 + 2h)`` parameters (0.10B for DeepSeek-V3), the
    projection a Linear layer (FP8 under the FP8 recipes), the optimizer's states at its per-parameter count
    (exact for AdamW; Muon's and Adafactor's fewer states of the matrix are not taken off: an upper bound)."""
    h = model.hidden
    proj = depth * (2 * h * h + 2 * h)
    on_rank = proj / par.tp
    return _states(proj, OPTIMIZERS[optimizer].states * proj, precision, optimizer, par, on_rank=on_rank,
                   linear=(2 * h * h * depth / par.tp, 0))


def mtp_param_counts(model: Model, mtp_depth: int = 1) -> dict[str, int]:
    """Parameters of ``mtp_depth`` multi-token-prediction modules beside the main model's :attr:`n_params`, as
    the released DeepSeek-V3 checkpoint lays each out (its ``model.layers.61.*``, README_WEIGHTS.md's "MTP
    Modules"): ``block``, the module's MoE transformer block (:func:`mtp_layout`'s extra layer: attention,
    every routed expert, the shared expert, the router and its bias, the block's norms); ``block_active``, the
    part of it one token uses (``experts_per_token`` of the routed experts); ``projection``, the rest of the
    module's own weights: its ``2h x h`` projection ``eh_proj`` and three RMSNorms of ``h`` (``enorm``,
    ``hnorm`` and the head's own ``shared_head.norm``), ``mtp_depth (2h^2 + 3h)``. The embedding and the
    output head are the main model's, shared, and counted in none of the three (the checkpoint stores one more
    copy of each per module). DeepSeek-V3, depth 1: 11,507,286,272, 585,318,656 and 102,781,952
    (tests/test_config_families.py sums them from the config by hand)."""
    depth = check_mtp_depth(model, mtp_depth)
    if not depth:
        return {"block": 0, "block_active": 0, "projection": 0}
    ext, _ = mtp_layout(model, Parallel(), depth)
    h = model.hidden
    return {"block": ext.n_params - model.n_params, "block_active": ext.active_params - model.active_params,
            "projection": depth * (2 * h * h + 3 * h)}


def add_states(a: ModelStates, b: ModelStates) -> ModelStates:
    """Two :class:`~llmsizing.states.ModelStates` on one GPU (DualPipe's two chunks, or a chunk and the MTP
    projection), field by field."""
    return ModelStates(a.n_params, a.precision, a.optimizer, a.weights_bytes + b.weights_bytes,
                       a.gradients_bytes + b.gradients_bytes, a.master_bytes + b.master_bytes,
                       a.optimizer_state_bytes + b.optimizer_state_bytes, a.parallel,
                       a.host_bytes + b.host_bytes, a.fp8_weights_bytes + b.fp8_weights_bytes,
                       a.fp8_meta_bytes + b.fp8_meta_bytes)


def mtp_sides(model: Model, par: Parallel, depth: int, acts: tuple, states: tuple, *, precision: str,
              optimizer: str, batch: int, seq: int, recompute: str) -> tuple[tuple, tuple]:
    """:func:`~llmsizing.memory.training_memory`'s activations' and model states' sides (its ``_act_side`` and
    ``_state_side`` tuples, worked out on :func:`mtp_layout`'s model and layout: the blocks' weights, states
    and saved activations) with the rest of the ``depth`` MTP modules on the last stage: the projections'
    states (:func:`mtp_projection_states`); per micro-batch in flight, each MTP head's logits as the main
    head's (the library's logits rule, the heads' losses one at a time) and the block's second input, the next
    token's embedding (:data:`MTP_EMBEDDING_BYTES`, ``batch x seq / cp`` tokens); the FLOPs per token those of
    the main model plus :func:`llmsizing.moe.mtp_flops_per_token` (DeepSeek-V3: 3.8% more)."""
    from .moe import moe_layer_flops, mtp_flops_per_token

    flops, cp_buffers, loss, working, stage_acts, in_flight = acts
    gathered, copies, head_copy, by_stage = states
    last = par.pp - 1
    if flops is not None:               # the blocks are in the extended model's FLOPs; the rest is not
        flops += (mtp_flops_per_token(model, seq=seq, depth=depth, recompute=recompute)
                  - depth * moe_layer_flops(model, seq=seq, recompute=recompute)[1])
    if last in stage_acts:
        a = stage_acts[last]
        extra = (depth * a.logits_bytes
                 + in_flight[last] * depth * MTP_EMBEDDING_BYTES * model.hidden * batch * seq / par.cp)
        brk = dict(a.breakdown)
        if "logits" in brk:
            brk["logits"] += extra
        stage_acts = {**stage_acts, last: replace(a, logits_bytes=a.logits_bytes + extra, breakdown=brk)}
    if last in by_stage:
        st, head_grads, stage_opt = by_stage[last]
        st = add_states(st, mtp_projection_states(model, depth, precision, optimizer, par))
        by_stage = {**by_stage, last: (st, head_grads, stage_opt)}
    return (flops, cp_buffers, loss, working, stage_acts, in_flight), (gathered, copies, head_copy, by_stage)


__all__ = ["MTP_EMBEDDING_BYTES", "check_mtp_depth", "mtp_layout", "mtp_param_counts",
           "mtp_projection_states", "add_states", "mtp_sides"]
