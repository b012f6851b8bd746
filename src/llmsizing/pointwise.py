"""The memory-bound kernels of every layer (issue 35's "the smaller the experts, the larger the gap", issue
34's small GEMMs): the norms, the residual adds, the MLP's activation, the rotary embedding and the loss's
softmax over the vocabulary, priced by the bytes they move through HBM, as the MoE routing kernels are
(:func:`llmsizing.moe_time.routing_bytes_per_token`). Their bytes grow like the hidden size while a layer's
GEMM FLOPs grow like its square, so they weigh most in narrow models.

**Counted** per token, in the kernels of Megatron-Core with Transformer Engine (the stack of most runs with a
published layout in ``data/published_runs.csv``), ``b`` bytes per activation (2: BF16), ``h`` the hidden
size, ``w`` the MLP width a token passes through (a dense layer's ``ffn_hidden``; a MoE layer's
``k x expert_ffn_hidden`` plus its shared experts' widths), ``r`` the rotated query and key widths:

* **Norms** (``norms_per_layer``; TE's ``LayerNormLinear`` writes the normalised input to HBM for the GEMM
  after it, ``transformer_engine/pytorch/module/layernorm_linear.py``): forward reads ``h b`` and writes
  ``h b`` plus its fp32 statistics (RMSNorm's ``rstd``, 4 bytes; LayerNorm's mean too, 8); backward reads
  the input, the output's gradient and the statistics and writes the input's gradient: ``3 h b`` + stats.
* **Residual adds** (two per layer, Megatron-Core's ``bias_dropout_add``,
  ``megatron/core/fusions/fused_bias_dropout.py``, without bias and dropout as Llama-style models train):
  forward reads two ``h b`` and writes one, ``3 h b`` each; backward adds the two gradients that meet at the
  residual's fork, ``3 h b`` each. A parallel block (``parallel_block``: GPT-J, GPT-NeoX, Falcon) adds its
  two branches and the residual as two binary adds as well (Hugging Face's ``modeling_falcon.py``:
  ``mlp_output += attention_output``, then ``dropout_add(mlp_output, residual)``; GPT-NeoX's
  ``gpt_j_residual``: ``bias_dropout_fn(mlp_output, residual=attention_output)``, then ``residual + ...``),
  and its backward meets two forks too (the residual and the norm, the norm's output feeding both
  branches), so it is counted as two adds, like the sequential block.
* **Activation** (``megatron/core/fusions/fused_bias_swiglu.py``: ``swiglu`` reads ``[gate | up]`` and
  writes their product; ``swiglu_back`` reads ``[gate | up]`` and the gradient, writes both gradients):
  gated ``3 w b`` forward and ``5 w b`` backward; GeLU (``fused_bias_gelu.py``) ``2 w b`` and ``3 w b``.
* **Rotary embedding** (TE's ``fused_apply_rotary_pos_emb``: reads the query and key heads and writes them
  rotated; its backward the same on the gradients): ``2 r b`` each way; ``r`` is ``(heads + kv_heads) x
  head_dim`` (MLA: ``(heads + 1) x qk_rope_head_dim``), the whole head even with partial rotary (the kernel
  copies the unrotated part), times the share of the layers that rotate (``rope_layers``: SmolLM3's NoPE
  layers, spread evenly over the stages); none with ALiBi (its bias is added to the scores inside the
  attention kernel), learned positions or none (:mod:`llmsizing.positions`, read from the catalogue's
  ``positions`` column, never from a name). A query and key norm (``qk_norm``; Megatron-Core's
  ``q_layernorm``/``k_layernorm`` are TE norms over the last dimension, ``megatron/core/transformer/
  attention.py``) reads and writes ``q_k = (heads + kv_heads) x head_dim`` numbers: ``2 q_k b`` forward and
  ``3 q_k b`` backward, plus one fp32 statistic per normalised row each way (a row per head with
  ``"head"``, per projection with ``"proj"``; 4 bytes for RMSNorm, 8 for LayerNorm's ``"head_ln"``).
  Llama 4's weightless L2 norm (``"head_l2"``: ``use_qk_norm`` in its config; transformers'
  ``modeling_llama4.py``, ``Llama4TextL2Norm``, ``x * rsqrt(mean(x^2) + eps)`` over each head) moves the
  same bytes as ``"head"`` but runs only on the layers that rotate (``if config.use_qk_norm and
  self.use_rope``): times ``rope_layers / layers``, 36 of Scout's 48.
* **Latent norms** of multi-head latent attention (transformers' ``modeling_deepseek_v3.py``:
  ``q_a_layernorm``, an RMSNorm over ``q_lora_rank``, none without it, and ``kv_a_layernorm`` over
  ``kv_lora_rank``; Megatron-Core's ``multi_latent_attention.py``: ``q_layernorm`` and ``kv_layernorm`` on
  the down-projections' outputs, which are duplicated over tensor parallelism and hold ``s / tp`` tokens
  with sequence parallelism): as a block norm over ``d = q_lora_rank + kv_lora_rank`` numbers, ``2 d b``
  forward and ``3 d b`` backward plus a statistic per norm each way, with the norms that repeat on every
  token without sequence parallelism. DeepSeek-V3: ``d = 1,536 + 512``, 8,200 and 12,296 bytes a layer.
* **Loss** (the last stage; Megatron-Core's ``tensor_parallel/cross_entropy.py``,
  ``_VocabParallelCrossEntropy``, on ``V`` logits): ``.float()`` (read 2, write 4 bytes per logit), the
  max (read 4), the in-place subtraction (4 + 4), ``exp`` (4 + 4), the sum (4), the division into the
  softmax kept for the backward (4 + 4): 38 bytes per logit forward; backward the in-place product with the
  loss's gradient (4 + 4) and the cast of the fp32 gradient back to the logits' BF16 (4 + 2): 14. With the
  final norm and the embedding's gather (``2 h b`` forward; backward reading the gradient and updating an
  fp32 gradient row, ``h b + 8 h``); with a learned position table (``positions="learned"``) a second
  gather and the add of the two rows (Megatron-LM's ``Embedding``: ``words_embeddings +
  position_embeddings``): ``2 h b + 3 h b`` forward, ``h b + 8 h`` backward.
* **Multi-token prediction** (``mtp_depth`` modules on the last stage; DeepSeek-V3, arXiv:2412.19437 Sec.
  2.2, ``h' = M [RMSNorm(h); RMSNorm(Emb(t))]``; Megatron-Core's ``multi_token_prediction.py``,
  ``_concat_embeddings``: ``enorm``, ``hnorm``, ``torch.cat``, ``eh_proj``): a transformer layer (a MoE
  layer's bytes) and a second final norm and loss, and its join: two norms over ``h`` (``2 h b`` + stat
  forward, ``3 h b`` + stat backward each), the concatenation's copy (read and write ``2 h b``, forward;
  its backward hands each norm a slice of the gradient, a view), all on the sequence-parallel shard, and
  the next token's embedding gathered as on the first stage (:func:`mtp_pointwise_bytes_per_token`).

A step moves each layer's forward and backward bytes, the forward again with full recomputation
(Megatron-LM's selective recomputation reruns the attention core only: no pointwise kernel). Under tensor
parallelism with sequence parallelism each GPU runs the norms and residual adds on ``1 / tp`` of the tokens
and the activation and the rotary embedding on ``1 / tp`` of the widths; without sequence parallelism the
norms and residual adds run on every token on each of the ``tp`` GPUs (:func:`stage_pointwise_bytes_per_token`
counts them ``tp`` times).

**Where it is an approximation.** Every pass at the full HBM bandwidth (the MoE routing kernels' convention;
torchao's roofline takes 92% for its pointwise kernels, :data:`llmsizing.fp8_cast.CAST_BANDWIDTH_SHARE`).
Measured kernels fall short of it (review22 M4; Liger-Kernel's published benchmark table,
``benchmark/data/all_benchmark_data.csv``, H100 80GB HBM3, 8,192 BF16 tokens, ``tests/test_pointwise.py``):
Megatron-Core's own ``vocab_parallel_cross_entropy``, the chain counted under "Loss", moves its 38 bytes a
logit at 0.77 of the 3.35 TB/s and its 52 forward and backward at 0.78 (15.8 and 21.2 ms at 131,072
logits); Megatron's fused SwiGLU forward reaches 0.56; Liger's own fused Triton RMSNorm and SwiGLU forwards,
which move the bytes counted here, 0.84 and 0.91. So this term is about 1.1 to 1.8 times short, 1.3 on the
loss; the calibrated kernel efficiency absorbs the rest of a step (a share of 0.77 on every pass, refitted,
moves Ampere's 0.752 to 0.767 and Hopper's 0.676 to 0.682, and leaves the ranges' coverage as it is). No
dropout (modern pre-training runs use none; GPT-3-era runs with hidden dropout move one byte of mask more per
element each way); FP8 recipes' norms writing FP8 outputs (one byte, not two) are not told apart; PyTorch
eager stacks (Hugging Face's ``LlamaRMSNorm`` upcasts to fp32 in several kernels) move more than the fused
kernels counted here; state-space mixer layers are counted as attention layers; the optimizer step (about
30 bytes per parameter once per step) is not a per-token term and is not priced here. Should a norm's
backward copy its strided slice of the concatenation's gradient, the multi-token-prediction join moves ``4 h
b`` more a token (57 kB on DeepSeek-V3's 7.8 MB, 0.7%).
"""

from __future__ import annotations

import numpy as np

from ._validate import check_choice, check_number
from .catalog import resolve_model
from .positions import position_encoding, rotary_layers

#: Bytes per logit the loss's kernels move forward and backward (module docstring, "Loss").
LOSS_BYTES_PER_LOGIT = (38.0, 14.0)


def _rotary_width(model) -> float:
    """The query and key widths the rotary embedding reads and writes, averaged over the layers (0 without
    rotary positions; :func:`llmsizing.positions.rotary_layers` of the layers rotate)."""
    share = rotary_layers(model) / model.layers
    if getattr(model, "qk_rope_head_dim", None):
        return share * (model.heads + 1) * model.qk_rope_head_dim
    return share * (model.heads + (model.kv_heads or model.heads)) * model.head_dim


def _qk_norm_rows(model) -> tuple[int, int]:
    """``(rows, stat_bytes)`` of the query and key norm per token: a statistic per head (``"head"``,
    ``"head_ln"``, ``"head_l2"``) or per projection (``"proj"``), 4 bytes (RMSNorm's ``rstd``) or 8
    (LayerNorm's mean too)."""
    rows = 2 if model.qk_norm == "proj" else model.heads + (model.kv_heads or model.heads)
    return rows, (8 if model.qk_norm == "head_ln" else 4)


def _qk_norm_share(model) -> float:
    """The share of the layers that run the query and key norm: those that rotate for ``"head_l2"`` (Llama
    4's ``Llama4TextL2Norm`` is built only where the layer's ``use_rope``), every layer otherwise. The share
    is spread evenly over every layer and pipeline stage: exact for the model in total and for stages that
    hold whole periods of the rotating pattern (Scout's 12-layer stages, three of every four layers
    rotating), off by up to one layer's norm bytes a stage on other splits (a stage of 5 Scout layers holds
    one or two that do not rotate)."""
    return rotary_layers(model) / model.layers if model.qk_norm == "head_l2" else 1


def _latent_norms(model) -> tuple[int, int]:
    """``(norms, width)`` of multi-head latent attention's two latent norms per token (``q_a_layernorm``
    over ``q_lora_rank``, none without it; ``kv_a_layernorm`` over ``kv_lora_rank``); ``(0, 0)`` without
    MLA."""
    if not model.kv_lora_rank:
        return 0, 0
    q = model.q_lora_rank or 0
    return (2 if q else 1), q + model.kv_lora_rank


def mtp_pointwise_bytes_per_token(model, *, act_bytes: float = 2.0) -> tuple[float, float]:
    """``(rep, once)``: the bytes per token of one multi-token-prediction module's join, forward and backward,
    beyond its transformer layer and its loss (module docstring): the norms of the previous depth's hidden
    state and of the next token's embedding and their concatenation (``rep``: on ``1 / tp`` of the tokens with
    sequence parallelism, like the block's norms), and the embedding's gather (``once``: the first stage's
    :func:`ends_pointwise_bytes_per_token`)."""
    model = resolve_model(model, moe=True)
    b = check_number("act_bytes", act_bytes, allow_equal=False)
    h = model.hidden
    stat = 8 if model.norm.startswith("layernorm") else 4
    rep = 2 * (2 * h * b + stat) + 2 * (3 * h * b + stat) + 2 * 2 * h * b
    return rep, ends_pointwise_bytes_per_token(model, act_bytes=b)[0]


def _mlp_width(model, moe_layer: bool) -> int:
    """The MLP width one token passes through in a dense layer, or a MoE layer's routed and shared experts."""
    if not moe_layer:
        return model.ffn_hidden
    fe = model.expert_ffn_hidden or model.ffn_hidden
    fs = model.shared_expert_ffn_hidden or fe
    return model.experts_per_token * fe + model.shared_experts * fs


def layer_pointwise_bytes_per_token(model, *, moe_layer: bool = False, act_bytes: float = 2.0):
    """``((fwd_rep, bwd_rep), (fwd_split, bwd_split))``: HBM bytes one layer's memory-bound kernels move per
    token (module docstring), forward and backward, in two parts: the norms and residual adds, which run on
    every token of each GPU of a tensor-parallel group without sequence parallelism (``rep``), and the
    activation and rotary embedding, split over the group (``split``). ``moe_layer``: the layer's MLP is its
    routed experts (``k`` of them) and shared experts."""
    model = resolve_model(model, moe=True)
    b = check_number("act_bytes", act_bytes, allow_equal=False)
    h, n = model.hidden, model.norms_per_layer
    stat = 8 if model.norm.startswith("layernorm") else 4
    # two residual adds each way, a parallel block's too (module docstring)
    fwd_rep = n * (2 * h * b + stat) + 2 * 3 * h * b
    bwd_rep = n * (3 * h * b + stat) + 2 * 3 * h * b
    n_lat, d_lat = _latent_norms(model)       # MLA's latent norms, on the down-projections' tokens
    fwd_rep += 2 * d_lat * b + n_lat * stat
    bwd_rep += 3 * d_lat * b + n_lat * stat
    w, r = _mlp_width(model, moe_layer), _rotary_width(model)
    gated = model.gated_mlp
    fwd_split = (3 if gated else 2) * w * b + 2 * r * b
    bwd_split = (5 if gated else 3) * w * b + 2 * r * b
    if model.qk_norm:
        q_k = (model.heads + (model.kv_heads or model.heads)) * model.head_dim
        rows, q_stat = _qk_norm_rows(model)
        share = _qk_norm_share(model)
        fwd_split += share * (2 * q_k * b + rows * q_stat)
        bwd_split += share * (3 * q_k * b + rows * q_stat)
    return (fwd_rep, bwd_rep), (fwd_split, bwd_split)


def ends_pointwise_bytes_per_token(model, *, act_bytes: float = 2.0):
    """``(first, last)``: the bytes per token of a step (forward and backward) of the embedding's gather on
    the first stage and of the final norm and the loss over the vocabulary on the last (module docstring);
    the loss's logits are split over tensor parallelism (vocabulary-parallel), so each GPU's share is its
    tokens' (``tokens / (tp cp)`` of them, a full vocabulary each)."""
    model = resolve_model(model, moe=True)
    b = check_number("act_bytes", act_bytes, allow_equal=False)
    h = model.hidden
    first = 2 * h * b + (h * b + 8 * h)
    if position_encoding(model) == "learned":          # the position row's gather, the add, its gradient
        first += 5 * h * b + (h * b + 8 * h)
    last = (2 * h * b + 4) + (3 * h * b + 4) + sum(LOSS_BYTES_PER_LOGIT) * model.vocab
    return first, last


def stage_pointwise_bytes_per_token(model, par, *, recompute: str = "none",
                                    recompute_layers: int | None = None, mtp_depth: int = 0,
                                    act_bytes: float = 2.0) -> tuple[float, ...]:
    """Per pipeline stage: the HBM bytes of its memory-bound kernels per token of one GPU's share
    (``tokens / (tp cp)``), forward, backward and a recomputed forward (``recompute="full"``, all layers or
    ``recompute_layers`` of each chunk; ``"op-sac"`` reruns every layer's pointwise kernels too): its
    layers' (:func:`layer_pointwise_bytes_per_token`; a mixture of experts' MoE layers with their experts'
    widths, ``mtp_depth`` multi-token-prediction blocks counted as MoE layers with a loss each on the last
    stage), the embedding on the first stage and the loss on the last
    (:func:`ends_pointwise_bytes_per_token`). The norms and residual adds count ``tp`` times without sequence
    parallelism. Seconds: these bytes x the GPU's tokens / its HBM bandwidth
    (:func:`~llmsizing.comm.step_compute_time_s`; the planner's copy reads this same function)."""
    from .parallel import (OP_SAC_MODES, RECOMPUTE_MODES, check_recompute_layers, layers_per_stage,
                           recomputed_layers)

    model = resolve_model(model, moe=True)
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    stages = layers_per_stage(model.layers, par)
    n_rc = check_recompute_layers(recompute, recompute_layers, model.layers, par)
    if recompute in OP_SAC_MODES:          # torchtitan's op policy saves no pointwise op: all of them rerun
        rerun = stages
    elif recompute != "full":
        rerun = (0,) * len(stages)
    elif n_rc is None:
        rerun = stages
    else:
        rerun = recomputed_layers(model.layers, par, n_rc)
    if model.is_moe:
        from .moe import stage_moe_layers

        moe = stage_moe_layers(model, par)
    else:
        moe = (0,) * len(stages)
    rep_factor = par.tp if par.tp > 1 and not par.sp else 1
    # (the same for every stage: made once, issue 38; the same values and sums as per stage before)
    per = {}
    for kind in (False, True):
        (fr, br), (fs, bs) = layer_pointwise_bytes_per_token(model, moe_layer=kind, act_bytes=act_bytes)
        per[kind] = (rep_factor * fr + fs, rep_factor * br + bs)
    first, last = ends_pointwise_bytes_per_token(model, act_bytes=act_bytes)
    out = []
    for i, (n, n_moe, n_rerun) in enumerate(zip(stages, moe, rerun)):
        dense = n - n_moe
        total = dense * sum(per[False]) + n_moe * sum(per[True])
        # a recomputed layer's forward again (MoE layers taken first: an upper bound for mixed stages)
        moe_rc = min(n_rerun, n_moe)
        total += moe_rc * per[True][0] + (n_rerun - moe_rc) * per[False][0]
        if i == 0:
            total += first
        if i == len(stages) - 1:
            total += last
            if mtp_depth:
                join, gather = mtp_pointwise_bytes_per_token(model, act_bytes=act_bytes)
                total += mtp_depth * (sum(per[True]) + last + rep_factor * join + gather)
        out.append(float(total))
    return tuple(out)


def stage_candidates(pieces) -> tuple[int, ...]:
    """The stages that can be the slowest: the indices of the rows of ``pieces`` (one a stage, one column a
    piece of its time that a non-negative rate turns into seconds: GEMM FLOPs, causal attention FLOPs, MoE
    layers, memory-bound bytes) that no other row matches or exceeds in every column (of equal rows the
    first). Whatever the rates, the slowest stage is one of them (review22 M6: a stage is picked by its whole
    time, not by its FLOPs; :mod:`llmsizing.plan_pricing` prices these few per layout)."""
    if not len(pieces):
        return ()
    # (an array as it is, in float64: the values float() gives each entry; issue 38: the planner's call, ~1 ms
    # a search as a list of lists)
    rows = (pieces.astype(float).reshape(len(pieces), -1) if isinstance(pieces, np.ndarray) else
            np.array([[float(v) for v in r] for r in pieces], dtype=float).reshape(len(pieces), -1))
    # covers[j, i]: stage j is at least as heavy as stage i in every piece, and differs from it or comes first
    # (one comparison of all pairs at once, issue 38: the same test as pair by pair)
    ge = (rows[:, None, :] >= rows[None, :, :]).all(axis=2)
    same = (rows[:, None, :] == rows[None, :, :]).all(axis=2)
    order = np.arange(len(rows))
    covers = ge & (~same | (order[:, None] < order[None, :]))
    np.fill_diagonal(covers, False)
    return tuple(int(i) for i in np.flatnonzero(~covers.any(axis=0)))


def pointwise_seconds(stage_bytes, tokens, hbm_bytes_per_s):
    """Seconds one GPU spends on its stage's memory-bound kernels: ``stage_bytes`` per token (of
    :func:`stage_pointwise_bytes_per_token`) for ``tokens`` tokens at ``hbm_bytes_per_s``. Scalars or NumPy
    arrays (the planner's copy, :mod:`llmsizing.plan_pricing`, uses the same expression)."""
    return stage_bytes * tokens / hbm_bytes_per_s


__all__ = ["LOSS_BYTES_PER_LOGIT", "layer_pointwise_bytes_per_token", "ends_pointwise_bytes_per_token",
           "mtp_pointwise_bytes_per_token", "stage_pointwise_bytes_per_token", "stage_candidates",
           "pointwise_seconds"]
