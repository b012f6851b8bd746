"""What eager torchtitan saves for the backward on top of Megatron-LM's fused kernels: the ``"torchtitan"``
stack of :func:`llmsizing.activations.layer_terms` (issue 38; chapter 4, "Activation memory").

Read from torchtitan at 9dec370ad26b (the commit ``tools/measure_tp_saved.py`` cites) and measured tensor by
tensor on one Llama block split by torchtitan's own plan over gloo (``data/tp_saved.csv``: tp 1, 2, 4, with
and without sequence parallelism; :func:`~llmsizing.step_measurements.tp_saved_errors`). Per layer, beyond
the fused count (``p`` bytes per element, ``t`` = tp, ``r`` = t with SP, else 1):

* ``norms``: ``models/norms.py`` l.96-101, ``RMSNorm.forward``: ``self._norm(x.float()).type_as(x) * weight``
  keeps an fp32 copy of its input (saved by ``pow`` and ``mul``) besides the fp32 ``rsqrt`` and the
  normalised tensor cast back, where the fused kernel keeps the input: ``+4 s b h / r`` per norm (in fp32,
  where ``x.float()`` is ``x``, the normalised fp32 output instead). The Triton ``fused_rmsnorm``
  (``norm_type``) is not this stack.
* ``attention_core``: ``models/llama/model.py`` l.116-125 and l.200-209: ``repeat_kv`` expands K and V to the
  local query heads before ``F.scaled_dot_product_attention`` (flash), which saves the expanded copies:
  ``+2 p s b (a - g) d / t``.
* ``mlp``: l.252-253, ``w2(F.silu(w1(x)) * w3(x))``: the eager SiLU's output is saved by the product, which
  Megatron-LM's fused SwiGLU recomputes: ``+p s b f / t``.
* ``attention_projections`` and ``mlp`` with SP: ``parallelisms/parallelize_llama.py`` l.174-193
  (``PrepareModuleInput`` Shard(1) -> Replicate, ``ColwiseParallel`` wq/wk/wv, w1/w3): DTensor's matmuls save
  the all-gathered input, whole, where Megatron-LM keeps the shard and gathers again in the backward:
  ``+p s b h (1 - 1/t)`` each. The LM head's input likewise (l.137-142, ``ColwiseParallel(input_layouts=
  Shard(1))``; same mechanism, not in the measured block).

Once per model, not per layer: RoPE's complex64 ``freqs_cis`` (l.38-57, ``max_seq_len`` = the training
sequence, ``train.py`` l.107), which every layer's rotary multiply saves: ``8 s d / 2`` bytes
(:func:`rope_table_bytes`). What the stack does not describe is refused (:func:`check_torchtitan`).

Eager only: ``torch.compile`` fuses the norms and SiLU and may save less. KempnerForge's published steps
(built on torchtitan, compiled, full recomputation) move by at most 0.31 GiB under this stack: it does not
explain their under-count in chapter 5 (issue 38, 2026-12-05).
"""

from __future__ import annotations

from .model import Model
from .precision import DTYPE_BYTES

#: torchtitan's model code and TP plan the stack is read from.
TORCHTITAN_SOURCE = "pytorch/torchtitan at 9dec370ad26b (models/llama/model.py, models/norms.py, " \
                    "parallelisms/parallelize_llama.py)"


def check_torchtitan(model: Model, *, attention, dropout, tp, autocast, selective, cp=1) -> None:
    """Refuse what the ``"torchtitan"`` stack does not describe, naming the parameter and what it allows:
    torchtitan's Llama (RMSNorm, gated MLP, no mixture of attention heads), causal SDPA
    (``attention="flash"``), no dropout, ``tp`` dividing the KV heads (``ColwiseParallel`` splits wk/wv by
    columns), no autocast (FSDP's mixed precision casts the weights instead), no Megatron-style selective
    recomputation (torchtitan's op-level one is ``recompute="op-sac"``, priced on the fused stack) and no
    context parallelism (not measured)."""
    bad = [("attention", attention, "flash", attention != "flash"), ("dropout", dropout, False, dropout),
           ("autocast", autocast, False, autocast), ("recompute", "selective", "'none' or 'full'", selective),
           ("cp", cp, 1, cp != 1),
           ("tp", tp, f"a divisor of kv_heads={model.kv_heads}", model.kv_heads % tp != 0)]
    for name, value, allowed, wrong in bad:
        if wrong:
            raise ValueError(f"stack='torchtitan' describes eager torchtitan's Llama: {name} must be "
                             f"{allowed}, got {value!r}")
    if not model.norm.startswith("rmsnorm") or not model.gated_mlp or getattr(model, "attn_experts", 0):
        raise ValueError(f"stack='torchtitan' describes torchtitan's Llama (RMSNorm, SwiGLU): model "
                         f"{model.name!r} must have norm 'rmsnorm' and a gated MLP, got norm={model.norm!r}, "
                         f"gated_mlp={model.gated_mlp!r}")


def torchtitan_extra_terms(model: Model, *, batch, seq, dtype, tp, sp) -> dict[str, float]:
    """Bytes one layer of eager torchtitan saves beyond the fused count, by component (module docstring)."""
    p = DTYPE_BYTES[dtype]
    sb, h, d = seq * batch, model.hidden, model.head_dim
    r = tp if sp else 1
    gathered = p * sb * h * (1 - 1 / tp) if sp else 0.0          # DTensor keeps the all-gathered input
    return {"norms": 2 * 4 * sb * h / r,
            "attention_projections": gathered,
            "attention_core": 2 * p * sb * (model.heads - model.kv_heads) / tp * d,
            "mlp": p * sb * model.ffn_hidden / tp + gathered,
            "dropout_masks": 0.0}


def lm_head_gathered_bytes(model: Model, *, batch, seq, dtype, tp, sp) -> float:
    """With SP, what the LM head's ``ColwiseParallel(input_layouts=Shard(1))`` keeps beyond its shard:
    ``p s b h (1 - 1/t)``."""
    return DTYPE_BYTES[dtype] * seq * batch * model.hidden * (1 - 1 / tp) if sp else 0.0


def rope_table_bytes(model: Model, *, seq) -> float:
    """RoPE's complex64 ``freqs_cis``, ``seq`` x ``head_dim / 2``, saved by every layer's rotary multiply: one
    table per model, ``8 s d / 2`` bytes, whole on every tensor-parallel rank."""
    return 8 * seq * model.head_dim / 2
