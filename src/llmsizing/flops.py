"""Training compute per token, including recomputation (used by chapter 4; the FLOPs/MFU chapter builds on it).

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
which Hugging Face passes for these models) skips the key blocks outside the window, as a causal kernel skips the
upper triangle. So the same count holds in every phase, training, prefill and decode alike: ``min(s, w)`` keys per
token in the full-matrix convention (a decode step at context ``c`` attends to ``min(c, w)`` cached keys), and
with ``causal=True`` the band's area over ``s``: ``s / 2`` up to ``s = w``, ``w - w^2 / (2 s)`` beyond. Below the
window nothing changes; Mistral 7B v0.1 at ``s = 32768`` counts 4096 keys per token instead of 32768.
"""

from __future__ import annotations

import functools

from ._validate import check_bool, check_choice, check_int
from .catalog import resolve_model
from .model import Model

RECOMPUTE = ("none", "selective", "full")


def attention_keys_per_token(model: Model | str, *, seq: int, causal: bool = False) -> float:
    """How many keys one query attends to, on average over a sequence of ``seq`` tokens: ``seq`` in the
    full-matrix convention, ``seq / 2`` with ``causal=True``; with a sliding window ``w``, ``min(seq, w)``, and
    with ``causal=True`` the causal band's area over ``seq`` (``w - w^2 / (2 seq)`` beyond the window). See the
    module docstring."""
    model = resolve_model(model)
    seq = check_int("seq", seq)
    causal = check_bool("causal", causal)
    w = model.sliding_window
    if w is None or seq <= w:
        return seq / 2 if causal else float(seq)
    return w - w * w / (2 * seq) if causal else float(w)


def attention_flops_per_token(model: Model | str, *, seq: int, causal: bool = False) -> float:
    """Forward FLOPs per token of the attention core over all layers: ``QK^T`` and ``attn @ V``,
    ``4 * keys * heads * head_dim * layers`` with ``keys`` = :func:`attention_keys_per_token`: ``seq`` (halved
    with ``causal=True``), capped by a sliding window in every phase (see the module docstring)."""
    model = resolve_model(model)
    keys = attention_keys_per_token(model, seq=seq, causal=causal)
    return 4 * keys * model.heads * model.head_dim * model.layers


def forward_flops_per_token(model: Model | str, *, seq: int, causal: bool = False) -> float:
    """Forward FLOPs per token: 2 per weight of the matrix multiplies (embedding lookup excluded, LM head
    included) plus attention's ``QK^T`` and ``attn @ V`` (:func:`attention_flops_per_token`; the full
    ``s x s`` matrix unless ``causal=True``, at most the sliding window's ``w`` keys per token). A decode step at
    context ``c`` is ``forward_flops_per_token(model, seq=c)``: the new token attends to ``c`` keys (``min(c, w)``
    with a window)."""
    model = resolve_model(model)
    parts = model.param_breakdown()
    # the input embedding is a lookup, not a matmul; with tied embeddings the same matrix IS the LM head
    matmul_params = model.n_params - parts["position"] - (0 if model.tied_embeddings else parts["embedding"])
    return 2 * matmul_params + attention_flops_per_token(model, seq=seq, causal=causal)


def training_flops_per_token(model: Model | str, *, seq: int, recompute: str = "none",
                             causal: bool = False) -> float:
    """Training FLOPs per token: forward x 3 (backward costs two forwards), plus what recomputation reruns:
    ``"full"`` the forward of the transformer layers again (not the embedding lookup nor the LM head, which
    sit outside the checkpointed layers: about 8N instead of 6N), ``"selective"`` the attention core again
    (Korthikanti et al. 2022, Sec. 5). With a sliding window the attention term is capped as in the forward
    (:func:`attention_keys_per_token`): the windowed kernel's backward skips the same blocks."""
    model = resolve_model(model)
    check_choice("recompute", recompute, RECOMPUTE)
    return _training_flops_per_token(model, check_int("seq", seq), recompute, check_bool("causal", causal))


@functools.lru_cache(maxsize=512)
def _training_flops_per_token(model: Model, seq: int, recompute: str, causal: bool) -> float:
    """:func:`training_flops_per_token` for checked arguments, kept (the planner asks for the same model and
    sequence a few thousand times in one search)."""
    fwd = forward_flops_per_token(model, seq=seq, causal=causal)
    attention = attention_flops_per_token(model, seq=seq, causal=causal)
    extra = {"none": 0.0,
             "selective": attention,
             "full": 2 * model.layers * model.params_per_layer + attention}[recompute]
    return 3 * fwd + extra


def stage_flops_per_token(model: Model | str, parallel=None, *, seq: int, recompute: str = "none",
                          causal: bool = False) -> tuple[float, ...]:
    """Training FLOPs per token of each pipeline stage (all its tensor-parallel ranks together), in the
    convention of :func:`training_flops_per_token`, whose total they split: each stage's transformer layers
    (:func:`~llmsizing.parallel.layers_per_stage`) and, on the last stage, the LM head. A pipeline runs at its
    slowest stage, and with an even split that is the last one (for Llama-3-70B on 8 stages at 8K tokens, 10
    layers + the head: 9% more than the average stage). Taught in chapter 8."""
    from .parallel import layers_per_stage, resolve_parallel

    model = resolve_model(model)
    par = resolve_parallel(parallel, model)
    check_choice("recompute", recompute, RECOMPUTE)
    return _stage_flops(model, layers_per_stage(model.layers, par), check_int("seq", seq), recompute,
                        check_bool("causal", causal))


@functools.lru_cache(maxsize=1024)
def _stage_flops(model: Model, stages: tuple, seq: int, recompute: str, causal: bool) -> tuple[float, ...]:
    """:func:`stage_flops_per_token` for checked arguments, kept (the planner's search asks a few thousand
    times)."""
    total = _training_flops_per_token(model, seq, recompute, causal)
    attention = attention_flops_per_token(model, seq=seq, causal=causal) / model.layers
    layer_fwd = 2 * model.params_per_layer + attention
    layer_extra = {"none": 0.0, "selective": attention, "full": layer_fwd}[recompute]
    per_layer = 3 * layer_fwd + layer_extra
    head = total - model.layers * per_layer                   # the LM head (and learned positions: no matmul)
    out = [n * per_layer for n in stages]
    out[-1] += head
    return tuple(out)
