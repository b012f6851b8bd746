"""Training compute per token, including recomputation (used by chapter 4; the FLOPs/MFU chapter builds on
it).

Source: Kaplan et al. 2020 and Hoffmann et al. 2022 for C = 6N per token (forward 2N, backward 4N);
Korthikanti et al. 2022, Sec. 5 (and Narayanan et al. 2021, Eq. 3) for the attention term and for full
recomputation adding one more forward pass of the transformer layers.

The attention term's causal-mask convention: by default the library counts the whole ``s x s`` score matrix,
``QK^T`` and ``attn @ V`` at ``2 * s * heads * head_dim`` FLOPs each per token and layer, as Narayanan et al.
2021 (Eq. 3) and PaLM's ``6N + 12 L H Q T`` (Chowdhery et al. 2022, App. B) do, and as MFU figures quoted from
those papers assume. A causal kernel (FlashAttention with ``causal=True``) skips the masked upper triangle and
executes about half of it; ``causal=True`` counts that half, as some papers and tools do. Only the attention
term differs: for Llama-2-7B at ``s = 4096`` it is 14% of the forward FLOPs, so the halved count is 7% lower.

Sliding windows (:attr:`Model.sliding_window <llmsizing.model.Model.sliding_window>` ``w``, Mistral 7B v0.1:
4096): a query attends to at most the last ``w`` keys, and FlashAttention's windowed kernel (``window_size``,
which Hugging Face passes for these models) skips the key blocks outside the window, as a causal kernel skips
the upper triangle. So the same count holds in every phase, training, prefill and decode alike: ``min(s, w)``
keys per token in the full-matrix convention (a decode step at context ``c`` attends to ``min(c, w)`` cached
keys), and with ``causal=True`` the band's area over ``s``: ``s / 2`` up to ``s = w``, ``w - w^2 / (2 s)``
beyond. Below the window nothing changes; Mistral 7B v0.1 at ``s = 32768`` counts 4096 keys per token instead
of 32768.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ._validate import check_bool, check_choice, check_int, check_number
from .catalog import resolve_model
from .model import Model
from .parallel import OP_SAC_MODES, OP_SAC_SDPA_SAVED, RECOMPUTE, RECOMPUTE_MODES  # noqa: F401 (RECOMPUTE: issue 32)


def attention_keys_per_token(model: Model | str, *, seq: int, causal: bool = False) -> float:
    """How many keys one query attends to, on average over a sequence of ``seq`` tokens: ``seq`` in the
    full-matrix convention, ``seq / 2`` with ``causal=True``; with a sliding window ``w``, ``min(seq, w)``,
    and with ``causal=True`` the causal band's area over ``seq`` (``w - w^2 / (2 seq)`` beyond the window).
    See the module docstring."""
    model = resolve_model(model, moe=True)
    seq = check_int("seq", seq)
    causal = check_bool("causal", causal)
    w = model.sliding_window
    full = seq / 2 if causal else float(seq)
    if w is None or seq <= w:
        return full
    windowed = w - w * w / (2 * seq) if causal else float(w)
    if model.window_layers is None:
        return windowed
    nw, n = model.window_layers, model.n_attention_layers  # some windowed: the attention layers' mean
    return (nw * windowed + (n - nw) * full) / n


def document_mask_cp_pairs(doc_lengths, cp: int) -> tuple[int, ...]:
    """Query-key pairs each of ``cp`` context-parallel ranks computes for one packed sequence under a causal
    document mask (a token attends to itself and the earlier tokens of its own document; Dubey et al. 2024,
    Sec. 3.3.2), with Llama 3's sharding: the sequence (``sum(doc_lengths)``, a multiple of ``2 cp``) cut
    into ``2 cp`` chunks, rank ``i`` taking chunks ``i`` and ``2 cp - 1 - i``. One document of the whole
    length is the plain causal mask, ``s (s + 1) / (2 cp)`` pairs on every rank; any other packing gives every
    rank at most that (its queries attend to a subset of the same keys), unevenly (WLB-LLM, Wang et al. 2025,
    OSDI, Sec. 3.1). Chapter 17."""
    docs = [check_int(f"doc_lengths[{j}]", d) for j, d in enumerate(doc_lengths)]
    cp = check_int("cp", cp)
    seq = sum(docs)
    if not docs or seq % (2 * cp):
        raise ValueError(f"doc_lengths must add up to a positive multiple of 2 x cp = {2 * cp}, got {seq}")
    keys = [k for d in docs for k in range(1, d + 1)]        # each query's keys: its place in its document
    c = seq // (2 * cp)
    chunk = [sum(keys[j * c:(j + 1) * c]) for j in range(2 * cp)]
    return tuple(chunk[i] + chunk[2 * cp - 1 - i] for i in range(cp))


def document_length_bound(seq: int, *, share: float, shorter_than: float) -> float:
    """The longest token-weighted mean document length (``sum d^2 / sum d``, what a token's attention pays
    under a document mask: :func:`llmsizing.rl_trainer.packed_attention_seq`) that rows of ``seq`` tokens can
    have when at least ``share`` of their tokens sit in documents shorter than ``shorter_than``:
    ``share x shorter_than + (1 - share) x seq`` (those tokens' documents just under ``shorter_than``, every
    other token's the whole row). WLB-LLM (Wang et al. 2025, OSDI, Sec. 2.2) on Meta's 128K data: documents
    shorter than half the window hold over 75% of the tokens, so ``0.75 x 65,536 + 0.25 x 131,072 = 81,920``.
    Chapter 17."""
    seq = check_int("seq", seq)
    share = check_number("share", share, maximum=1.0, allow_equal=False)
    shorter_than = check_number("shorter_than", shorter_than, maximum=seq, allow_equal=False)
    return share * shorter_than + (1 - share) * seq


def attention_flops_per_token(model: Model | str, *, seq: int, causal: bool = False) -> float:
    """Forward FLOPs per token of the attention core over all layers: ``QK^T`` and ``attn @ V``,
    ``4 * keys * heads * head_dim * layers`` with ``keys`` = :func:`attention_keys_per_token`: ``seq`` (halved
    with ``causal=True``), capped by a sliding window in every phase (see the module docstring). With
    multi-head latent attention, ``2 * keys * heads * (d_qk + v_head_dim) * layers`` (``d_qk`` is its
    ``head_dim``). A hybrid counts its attention layers only; its Mamba / linear-attention layers' matmuls
    are in the parameter term, their scan (a few numbers per channel and state per token) is left out."""
    model = resolve_model(model, moe=True)
    keys = attention_keys_per_token(model, seq=seq, causal=causal)
    lay = model.attention_layout
    if lay is not None and not model.is_mla:          # full layers of their own width, a shared block's uses
        full = seq / 2 if causal else float(seq)
        n_w, n_f = model.n_window_layers, model.n_attention_layers - model.n_window_layers
        win = attention_keys_per_token(model.with_(window_layers=None, attention_layout=None), seq=seq,
                                       causal=causal) if n_w else 0.0
        hd, hd_f = model.head_dim, lay.full_head_dim or model.head_dim    # QK^T over q/k, attn @ V over v
        return 2 * model.heads * (n_w * win * (hd + (lay.v_head_dim or hd)) + n_f * full * (hd_f + (
            lay.v_head_dim or hd_f)) + lay.block_uses * full * 2 * hd)
    n = model.n_attention_layers         # a hybrid's Mamba / linear-attention layers have no QK^T (issue 36)
    if model.is_mla:
        return 2 * keys * model.heads * (model.head_dim + model.v_head_dim) * n
    return 4 * keys * model.heads * model.head_dim * n


def forward_flops_per_token(model: Model | str, *, seq: int, causal: bool = False) -> float:
    """Forward FLOPs per token: 2 per weight of the matrix multiplies (embedding lookup excluded, LM head
    included) plus attention's ``QK^T`` and ``attn @ V`` (:func:`attention_flops_per_token`; the full
    ``s x s`` matrix unless ``causal=True``, at most the sliding window's ``w`` keys per token). A decode step
    at context ``c`` is ``forward_flops_per_token(model, seq=c)``: the new token attends to ``c`` keys
    (``min(c, w)`` with a window). A mixture of experts counts its ACTIVE weights (:func:`matmul_params`;
    module docstring)."""
    model = resolve_model(model, moe=True)
    return 2 * matmul_params(model) + attention_flops_per_token(model, seq=seq, causal=causal)


def matmul_params(model: Model | str) -> int:
    """The weights one token multiplies in a forward pass: the parameters (a mixture of experts: the ACTIVE
    parameters, :attr:`~llmsizing.model.Model.active_params`, router included) less the input embedding, which
    is a lookup (with tied embeddings the same matrix is the LM head, a matmul, and stays) and learned
    positions. This is the convention of gpt-oss's "5.13B active" (OpenAI's model card counts no input
    embedding), while Mixtral's "12.9B active" and Qwen3's "3.3B activated" include it (chapter 1)."""
    model = resolve_model(model, moe=True)
    parts = model.param_breakdown()
    # the input embedding is a lookup, not a matmul; with tied embeddings the same matrix IS the LM head
    # (other lookup tables, Gemma's per-layer embeddings, are not)
    total = model.active_params if model.is_moe else model.n_params
    lookups = parts["embedding"] - (model.vocab * model.hidden if model.tied_embeddings else 0)
    lay = model.attention_layout
    if lay is not None and lay.block_uses:   # Zamba's shared block: held once, multiplied at every use
        shared = [(math.prod(s), k) for _, n, s, k in model.tensors() if n.startswith("layers.block.")]
        total += sum(p for p, _ in shared) * lay.block_uses - sum(p * k for p, k in shared)
    return total - parts["position"] - lookups


def training_flops_per_token(model: Model | str, *, seq: int, recompute: str = "none",
                             causal: bool = False, recompute_layers: int | None = None) -> float:
    """Training FLOPs per token: forward x 3 (backward costs two forwards), plus what recomputation reruns:
    ``"full"`` the forward of the transformer layers again (not the embedding lookup nor the LM head, which
    sit outside the checkpointed layers: about 8N instead of 6N), ``"selective"`` the attention core again
    (Korthikanti et al. 2022, Sec. 5), ``"op-sac"`` (torchtitan's op-level selective checkpointing,
    :func:`~llmsizing.act_terms.op_sac_matmuls`) the forward of the matmuls it does not save (``wk``, ``wo``
    and ``w3`` of a Llama layer: ``2 (h g d + a d h + h f)`` per token and layer; its pointwise ops rerun
    too, priced on HBM by the step model, and the attention core is saved). With a sliding window the
    attention term is capped as in the forward (:func:`attention_keys_per_token`): the windowed kernel's
    backward skips the same blocks. A mixture of experts counts its active weights (full recomputation reruns
    the active part of its blocks).

    ``recompute_layers`` (with ``recompute="full"`` only; ``None``: every layer) reruns the forward of that
    many layers only, the first ones of the model taken as one chunk (Megatron-LM's
    ``--recompute-method block``, :func:`~llmsizing.parallel.recomputed_layers`): the rerun is
    ``recompute_layers / layers`` of the full one. A pipeline's count is per model chunk:
    :func:`stage_flops_per_token` and the layout-aware functions (:func:`~llmsizing.memory.training_memory`,
    :func:`~llmsizing.layouts.step_time`) sum it over the stages."""
    from .parallel import check_recompute_layers

    model = resolve_model(model, moe=True)
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    seq, causal = check_int("seq", seq), check_bool("causal", causal)
    n = check_recompute_layers(recompute, recompute_layers, model.layers)
    if n is None:
        return _training_flops_per_token(model, seq, recompute, causal)
    return _partial_flops_per_token(model, seq, n, causal)


def narayanan_eq3_flops_per_token(model: Model | str, *, seq: int, vocab: int | None = None) -> float:
    """Hardware FLOPs per token by Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on
    GPU Clusters Using Megatron-LM", Eq. 3): ``96 L h^2 (1 + s / (6h) + V / (16 L h))``, the forward, the
    backward and the forward re-run by full recomputation, for a model with a 4h MLP, no biases or norms.
    ``vocab`` defaults to the model's (Megatron pads it: 51,200 for GPT-3's 50,257). The paper's count, to
    compare with :func:`training_flops_per_token` with ``recompute="full"`` (chapter 10)."""
    model = resolve_model(model)
    seq = check_int("seq", seq)
    v = model.vocab if vocab is None else check_int("vocab", vocab)
    layers, h = model.layers, model.hidden
    return 96 * layers * h**2 * (1 + seq / (6 * h) + v / (16 * layers * h))


def _partial_flops_per_token(model: Model, seq: int, rerun_layers: int, causal: bool) -> float:
    """Training FLOPs per token when ``rerun_layers`` of the model's layers are recomputed (in any stages):
    the no-recomputation count plus that share of what full recomputation reruns (each layer's forward,
    weights and attention: every layer reruns the same FLOPs, so the share is exact for a dense model and the
    average for a mixture of experts)."""
    none = _training_flops_per_token(model, seq, "none", causal)
    rerun = _training_flops_per_token(model, seq, "full", causal) - none
    return none + rerun * rerun_layers / model.layers


@functools.lru_cache(maxsize=512)
def _training_flops_per_token(model: Model, seq: int, recompute: str, causal: bool) -> float:
    """:func:`training_flops_per_token` for checked arguments, kept (the planner asks for the same model and
    sequence a few thousand times in one search)."""
    fwd = forward_flops_per_token(model, seq=seq, causal=causal)
    attention = attention_flops_per_token(model, seq=seq, causal=causal)
    if recompute in OP_SAC_MODES:             # attention's forward reruns where SDPA's output is not kept
        return (3 * fwd + model.layers * op_sac_rerun_flops_per_token(model)
                + (not OP_SAC_SDPA_SAVED[recompute]) * attention)
    extra = {"none": 0.0,
             "selective": attention,
             "full": (2 * model.active_block_params if model.is_moe else
                      2 * model.layers * model.params_per_layer) + attention}[recompute]
    return 3 * fwd + extra


def attention_flops_share(model: Model | str, *, seq: int) -> float:
    """The share of a token's training FLOPs (:func:`training_flops_per_token`, no recomputation, the
    full-matrix convention) spent in the attention core (:func:`attention_flops_per_token`, forward x 3):
    about ``seq / (6 hidden + seq)`` for a dense transformer. Attention kernels run below the matmuls'
    efficiency, so an end-to-end MFU falls as this share grows (the inputs model's ``attention_share`` term,
    :mod:`llmsizing.mfu_inputs`; issue 34, chapter 10). Llama 3 8B at 8,192 tokens: 0.2225."""
    model = resolve_model(model, moe=True)
    seq = check_int("seq", seq)
    return 3 * attention_flops_per_token(model, seq=seq) / training_flops_per_token(model, seq=seq)


def op_sac_rerun_flops_per_token(model: Model | str) -> float:
    """FLOPs per token that torchtitan's op-level selective checkpointing reruns in one layer's backward:
    ``2 x in x out`` of each matmul it does not save (:func:`~llmsizing.act_terms.op_sac_matmuls`; a mixture
    of experts or a biased projection is refused there). The attention core is not counted here: mode
    ``"op-sac"`` keeps SDPA's output, ``"op-sac-sdpa-rerun"`` adds its forward
    (:data:`~llmsizing.parallel.OP_SAC_SDPA_SAVED`)."""
    from .op_sac import op_sac_matmuls

    return float(sum(2 * i * o for _, i, o, saved in op_sac_matmuls(model) if not saved))


def stage_flops_per_token(model: Model | str, parallel=None, *, seq: int, recompute: str = "none",
                          causal: bool = False, recompute_layers: int | None = None) -> tuple[float, ...]:
    """Training FLOPs per token of each pipeline stage (all its tensor-parallel ranks together), in the
    convention of :func:`training_flops_per_token`, whose total they split: each stage's transformer layers
    (:func:`~llmsizing.parallel.layers_per_stage`) and, on the last stage, the LM head. A pipeline runs at its
    slowest stage, and with an even split that is the last one (for Llama-3-70B on 8 stages at 8K tokens, 10
    layers + the head: 9% more than the average stage). Taught in chapter 8. A mixture of experts is refused
    (:func:`~llmsizing.model.require_dense`: its pipeline layout, with expert parallelism, is not modelled
    yet)."""
    from .parallel import check_recompute_layers, layers_per_stage, recomputed_layers, resolve_parallel

    model = resolve_model(model)
    par = resolve_parallel(parallel, model)
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    n = check_recompute_layers(recompute, recompute_layers, model.layers, par)
    stages = layers_per_stage(model.layers, par)
    seq, causal = check_int("seq", seq), check_bool("causal", causal)
    if n is None:
        return _stage_flops(model, stages, seq, recompute, causal)
    return _partial_stage_flops(model, stages, recomputed_layers(model.layers, par, n), seq, causal)


def _partial_stage_flops(model: Model, stages: tuple, rerun: tuple, seq: int,
                         causal: bool) -> tuple[float, ...]:
    """:func:`stage_flops_per_token` with partial recomputation: stage ``i`` has ``stages[i]`` layers of which
    ``rerun[i]`` run their forward twice (``recompute_layers``)."""
    plain = _stage_flops(model, stages, seq, "none", causal)
    attention = attention_flops_per_token(model, seq=seq, causal=causal) / model.layers
    layer_fwd = 2 * model.params_per_layer + attention
    return tuple(f + r * layer_fwd for f, r in zip(plain, rerun))


@functools.lru_cache(maxsize=1024)
def _stage_flops(model: Model, stages: tuple, seq: int, recompute: str, causal: bool) -> tuple[float, ...]:
    """:func:`stage_flops_per_token` for checked arguments, kept (the planner's search asks a few thousand
    times)."""
    total = _training_flops_per_token(model, seq, recompute, causal)
    attention = attention_flops_per_token(model, seq=seq, causal=causal) / model.layers
    layer_fwd = 2 * model.params_per_layer + attention
    layer_extra = (op_sac_rerun_flops_per_token(model) + (not OP_SAC_SDPA_SAVED[recompute]) * attention
                   if recompute in OP_SAC_MODES else
                   {"none": 0.0, "selective": attention, "full": layer_fwd}[recompute])
    per_layer = 3 * layer_fwd + layer_extra
    head = total - model.layers * per_layer                   # the LM head (and learned positions: no matmul)
    out = [n * per_layer for n in stages]
    out[-1] += head
    return tuple(out)


def stage_attention_flops_per_token(model: Model | str, parallel=None, *, seq: int, recompute: str = "none",
                                    causal: bool = False,
                                    recompute_layers: int | None = None) -> tuple[float, ...]:
    """The attention core's part (``QK^T`` and ``attn @ V``, :func:`attention_flops_per_token`) of each
    stage's :func:`stage_flops_per_token`, in the same convention: three passes per layer (forward, and the
    backward's two), plus the forward again where recomputation reruns it (``"selective"``, ``"full"`` and
    ``"op-sac-sdpa-rerun"``, not ``"op-sac"``, which saves SDPA's output;
    with ``recompute_layers``, the recomputed layers only). FP8 training runs these in BF16: Transformer
    Engine's FP8 recipes quantise the Linear layers' GEMMs and leave the fused attention in BF16 unless
    ``fp8_dpa`` is set; torchtitan's Float8 converts ``nn.Linear`` only; DeepSeek-V3 keeps attention in BF16
    (Sec. 3.3.1). :func:`~llmsizing.comm.step_compute_time_s` times them at the BF16 peak. Taught in chapter
    10."""
    from .parallel import check_recompute_layers, layers_per_stage, recomputed_layers, resolve_parallel

    model = resolve_model(model, moe=True)       # the attention core of a mixture of experts is a dense one's
    par = resolve_parallel(parallel, model)
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    n = check_recompute_layers(recompute, recompute_layers, model.layers, par)
    stages = layers_per_stage(model.layers, par)
    seq, causal = check_int("seq", seq), check_bool("causal", causal)
    a = attention_flops_per_token(model, seq=seq, causal=causal) / model.layers
    if n is not None:
        return tuple(a * (3 * k + r) for k, r in zip(stages, recomputed_layers(model.layers, par, n)))
    rerun = recompute in ("selective", "full") or not OP_SAC_SDPA_SAVED.get(recompute, True)
    return tuple(a * k * (3 + rerun) for k in stages)   # "op-sac" keeps SDPA's output


@dataclass(frozen=True)
class MLADecodeFlops:
    """FLOPs of the attention blocks (all layers) for ONE decoded token at ``context`` cached tokens, with
    multi-head latent attention's compressed cache, computed two ways (:func:`mla_decode_flops_per_token`)."""

    context: int
    #: latent cache expanded per head every step (``kv_b_proj`` applied to every cached latent)
    decompressed: float
    #: ``W_UK`` absorbed into the query and ``W_UV`` into the output: attention runs on the latent itself
    absorbed: float
    #: the attention core alone (``QK^T`` and ``attn @ V`` over the cache) of each way, for comparison
    decompressed_core: float
    absorbed_core: float

    @property
    def ratio(self) -> float:
        """``decompressed / absorbed``: how much the absorbed path saves."""
        return self.decompressed / self.absorbed


def mla_decode_flops_per_token(model: Model | str, *, context: int) -> MLADecodeFlops:
    """Decode FLOPs per token of multi-head latent attention (DeepSeek-V2/V3), all layers, the two ways an
    engine can run it on the compressed cache (chapter 3, "Multi-head latent attention").

    Per layer, with ``N`` heads, latent ``Lkv`` (``kv_lora_rank``), rope ``R``, nope ``P``, value ``V`` dims,
    query rank ``Lq`` and hidden ``H``, for one new token at ``C`` cached tokens (the new one included):

    * shared by both ways: the query path ``2 (H Lq + Lq N (P + R))`` (or ``2 H N (P + R)`` without
      ``q_lora_rank``), ``kv_a_proj_with_mqa`` ``2 H (Lkv + R)`` and ``o_proj`` ``2 N V H``;
    * **decompressed** (DeepSeek-V2's formulas run as written): ``kv_b_proj`` re-expands every cached latent
      to per-head keys and values, ``2 C Lkv N (P + V)``, then the core ``2 C N (P + R) + 2 C N V``. The
      expansion grows with the context and dominates: for DeepSeek-V3 at 4,096 tokens it is 99% of the
      attention FLOPs;
    * **absorbed** (DeepSeek-V2 Sec. 2.1.2: ``W_UK`` folds into the query, ``W_UV`` into the output; vLLM's
      "data-movement friendly" decode, ``vllm/v1/attention/backends/mla/common.py``, and SGLang's): the
      query's nope part is mapped into the latent, ``2 N P Lkv``, attention runs over the latent and the rope
      key like multi-query attention with one ``Lkv + R`` key and one ``Lkv`` value shared by all heads,
      ``2 C N (Lkv + R) + 2 C N Lkv``, and the result is mapped to values, ``2 N Lkv V``.

    The absorbed core costs more per cached token than the expanded one (``Lkv + R + Lkv = 1,088`` against
    ``P + R + V = 320`` multiply-adds per head for DeepSeek-V3, 3.4x) but never expands the cache: overall it
    is far cheaper at any real context, and it reads 576 numbers per token and layer instead of 40,960. The
    MLP (experts) and the LM head are not included: add
    :func:`forward_flops_per_token` ``- attention_flops_per_token`` for the whole token.
    """
    model = resolve_model(model, moe=True)
    if not model.is_mla:
        raise ValueError(f"model {model.name!r} has no multi-head latent attention (kv_lora_rank is None)")
    c = check_int("context", context)
    h, n = model.hidden, model.heads
    lq, lkv, p, r, v = (model.q_lora_rank, model.kv_lora_rank, model.qk_nope_head_dim, model.qk_rope_head_dim,
                        model.v_head_dim)
    q_path = 2 * h * n * (p + r) if lq is None else 2 * (h * lq + lq * n * (p + r))
    shared = q_path + 2 * h * (lkv + r) + 2 * n * v * h
    dec_core = 2 * c * n * (p + r) + 2 * c * n * v
    decompressed = shared + 2 * c * lkv * n * (p + v) + dec_core
    abs_core = 2 * c * n * (lkv + r) + 2 * c * n * lkv
    absorbed = shared + 2 * n * p * lkv + abs_core + 2 * n * lkv * v
    L = model.layers
    return MLADecodeFlops(c, float(L * decompressed), float(L * absorbed), float(L * dec_core),
                          float(L * abs_core))
