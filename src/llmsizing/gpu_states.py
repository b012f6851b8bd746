"""Model states (weights, gradients, optimizer) on one GPU of a layout, for any model, and chapter 2's tables
of bytes per parameter.

:func:`model_states` picks the dense split (:mod:`llmsizing.states`) or a mixture of experts'
(:func:`llmsizing.moe.moe_model_states`) for the most loaded GPU; :func:`stage_params` is each pipeline
stage's share of the parameters (Megatron-LM's placement of the embedding and LM head). Taught in chapter 2
("Bytes per parameter", "FP8: what it saves and what it does not"), the exact split in Part II; ZeRO's shards
follow Rajbhandari et al. 2020, Fig. 1, the recipes' bytes :mod:`llmsizing.precision`. Moved out of
:mod:`llmsizing.memory` (which re-exports every name, so ``from llmsizing.memory import model_states`` still
works) to keep that module under 600 lines; :func:`~llmsizing.memory.training_memory` builds on these.
"""

from __future__ import annotations

import math

from ._validate import MAX_MEANINGFUL, check_choice, check_fraction, check_number, check_sequence
from .catalog import resolve_model
from .model import Model
from .moe import gpu_params as _moe_gpu_params
from .moe import moe_model_states as _moe_model_states
from .parallel import Parallel, resolve_parallel
from .precision import OPTIMIZERS, RECIPES, check_recipe
from .states import (USABLE_FRACTION, ModelStates, _stage_linear, _stage_params, _states,
                     optimizer_state_elements)

def model_states(model: Model | str, *, precision: str = "bf16-mixed", optimizer: str = "adamw",
                 parallel: Parallel | None = None) -> ModelStates:
    """Bytes of weights, gradients and optimizer states (master copy included) for training ``model``.

    ``precision`` is a recipe from :data:`llmsizing.precision.RECIPES` (``bf16-mixed``: 2 + 2 + 12 = 16 bytes
    per parameter with AdamW), ``optimizer`` one of :data:`llmsizing.precision.OPTIMIZERS`.

    With ``parallel``, bytes are per GPU, for the most loaded GPU: :func:`stage_params` splits the model
    exactly over ``tp`` (vocabulary-parallel embedding and LM head, replicated norms and row-parallel biases)
    and ``pp`` (the first stage holds the embedding, the last the LM head), then ZeRO stage 1 shards the
    optimizer bytes over ``dp`` (with a recipe's extra fp32 gradient copy, which DeepSpeed keeps only for the
    GPU's own partition), stage 2 also the gradients, stage 3 also the weights (ZeRO paper, Fig. 1); with
    context parallelism ZeRO shards over ``dp x cp`` (:attr:`~llmsizing.parallel.Parallel.dp_cp`). Adafactor's
    factored state is scaled by the same share (an approximation). A mixture of experts:
    :func:`llmsizing.moe.moe_model_states` (experts / ep, their ZeRO over Parallel.edp). Taught in chapter 2;
    the exact split in Part II."""
    model = resolve_model(model, moe=True)
    check_recipe("precision", precision)
    elements = optimizer_state_elements(model, optimizer)
    par = resolve_parallel(parallel, model)
    on_stage = (_checked_stage_params(model, par) if par.tp * par.pp > 1 or model.is_moe else
                [float(model.n_params)])
    i = max(range(len(on_stage)), key=lambda k: (on_stage[k], -k))
    return _moe_model_states(model, elements, precision, optimizer, par, i) if model.is_moe else _states(
        model.n_params, elements, precision, optimizer, par, on_rank=on_stage[i],
        linear=_stage_linear(model, par.tp, par.pp, par.stage_layers)[i])


def stage_params(model: Model | str, parallel: Parallel | None = None) -> list[float]:
    """Parameters held by one GPU of each pipeline stage (per tensor-parallel rank), exactly: layers split as
    evenly as possible (the first stages take the remainder), the first stage also holds the embedding (and
    learned positions), the last the final norm and the LM head, or with tied embeddings and ``pp > 1`` a copy
    of the embedding for the output layer (Megatron-LM keeps one and all-reduces its gradient). Tensor
    parallelism splits each tensor as :func:`~llmsizing.states._tp_share` says. The vocabulary is not padded
    (Megatron-LM pads it to a multiple of 128 x tp; pass a padded ``vocab`` to compare on its convention).
    Taught in Part II."""
    model = resolve_model(model, moe=True)
    return _checked_stage_params(model, resolve_parallel(parallel, model))


def _checked_stage_params(model: Model, par: Parallel) -> list[float]:
    """:func:`stage_params` of arguments already checked (as
    :func:`~llmsizing.memory._optimizer_temporaries`)."""
    return list(_moe_gpu_params(model, par) if model.is_moe else _stage_params(model, par.tp, par.pp,
                                                                               par.stage_layers))


def bytes_per_param_table(model: Model | str, *, precisions=None, optimizers=None):
    """Bytes per parameter of the model states for every ``precision`` x ``optimizer`` pair (a DataFrame,
    recipes as rows, optimizers as columns), each computed by :func:`model_states` on one GPU.

    Most entries do not depend on the model (bf16-mixed + AdamW is 16 for every model). Two do a little:
    Adafactor's and Muon's states depend on the tensor shapes, and 8-bit optimizers add one fp32 constant per
    block of 256 (bitsandbytes >= 0.44). Defaults: every recipe and optimizer. Taught in chapter 2.
    """
    import pandas as pd

    model = resolve_model(model)
    precisions = (list(RECIPES) if precisions is None else
                  [check_recipe("precision", p)
                   for p in check_sequence("precisions", precisions, example="['bf16-mixed', 'fp32']")])
    optimizers = (list(OPTIMIZERS) if optimizers is None else
                  [check_choice("optimizer", o, OPTIMIZERS)
                   for o in check_sequence("optimizers", optimizers, example="['adamw', 'adamw-8bit']")])
    rows = {p: {o: model_states(model, precision=p, optimizer=o).bytes_per_param for o in optimizers}
            for p in precisions}
    df = pd.DataFrame.from_dict(rows, orient="index")[optimizers]
    df.index.name = "recipe"
    return df


def min_gpus_for_bytes(n_bytes: float, gpu, *, usable_fraction: float | None = None) -> int:
    """The smallest number of ``gpu`` (a catalogue name or :class:`~llmsizing.catalog.GPU`) whose usable
    memory, added up, holds ``n_bytes``: ``ceil(n_bytes / (usable_fraction x capacity))``. A lower bound that
    assumes the bytes shard perfectly (ZeRO-3/FSDP for model states, or tensor parallelism).
    ``usable_fraction`` (0 < f <= 1) reserves part of each GPU for what you are not counting; ``None`` is the
    planner's :data:`~llmsizing.layouts.USABLE_FRACTION` (0.9), so Parts I and II count the fewest GPUs alike
    (issue 26; it was 1 here until then). Pass 1.0 for bytes that carry their own margin (the 1.2 x weights
    rule); a serving total with the book's allowance is counted by
    :func:`~llmsizing.inference.min_serving_gpus`, which charges its fixed part on every GPU. Chapter 2."""
    from .catalog import get_gpu

    n_bytes = check_number("n_bytes", n_bytes)
    frac = check_fraction("usable_fraction", USABLE_FRACTION if usable_fraction is None else usable_fraction)
    g = get_gpu(gpu)
    cap = frac * g.memory_bytes
    if n_bytes / cap > MAX_MEANINGFUL:
        raise ValueError(f"usable_fraction={frac:g} leaves too little of each {g.name} to count GPUs for "
                         f"{n_bytes:g} bytes (more than {MAX_MEANINGFUL:,} GPUs)")
    n = math.ceil(n_bytes / cap)
    if n > 1 and n_bytes <= (n - 1) * cap:  # the quotient rounded up by floating-point noise
        n -= 1
    return n


def recipe_tensor_table(model, *, precisions=("bf16-mixed", "bf16-mixed-fp32-grads", "fp8-mixed",
                                                 "fp8-deepseek"), optimizer: str = "adamw"):
    """Bytes per parameter of each model-state tensor (rows: weights, gradients, master copy, optimizer
    states, FP8 weight copies, FP8 scaling state, total) for each recipe in ``precisions`` (columns), on one
    GPU, from :meth:`~llmsizing.memory.ModelStates.to_frame`: what an FP8 recipe saves and what it adds,
    tensor by tensor. The FP8 rows are per parameter of the whole model (only the blocks' Linear weights have
    copies: 2 bytes per Linear weight with Transformer Engine on Hopper). Taught in chapter 2, "FP8: what it
    saves and what it does not"."""
    import pandas as pd

    model = resolve_model(model)
    precisions = [check_recipe("precision", p)
                  for p in check_sequence("precisions", precisions, example="['bf16-mixed', 'fp8-mixed']")]
    cols = {p: model_states(model, precision=p,
                            optimizer=optimizer).to_frame()["bytes/param"] for p in precisions}
    rows = ["weights", "gradients", "master copy", "optimizer states", "FP8 weight copies",
            "FP8 scaling state", "total"]
    df = pd.DataFrame(cols).reindex(rows).fillna(0.0)
    df.index.name = "tensor"
    return df
