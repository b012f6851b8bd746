"""Gradient buckets (chapter 7): where DDP's and the distributed optimizer's buckets close, so how many
collectives a step's data-parallel reduction makes, each paying its own latency. One walk
(:func:`bucket_ends`) serves PyTorch DDP's buckets
(:func:`~llmsizing.zero_traffic.torch_ddp_bucket_assignment`) and Megatron-Core's, laid out tensor by tensor
here (:func:`megatron_buckets`): Transformer Engine's fused parameters per tensor-parallel rank, pipeline rank
0's first chunk (the only bucketed one), Megatron-Core's default bucket size (:func:`dp_bucket_params`).
Sources: megatron/core/distributed/param_and_grad_buffer.py, distributed_data_parallel.py,
megatron/core/optimizer/distrib_optimizer.py and param_layout.py, megatron/training (NVIDIA/Megatron-LM as
stored, Aug 2026). Split out of :mod:`llmsizing.zero_traffic` (session 37), which re-exports every name.
Checked by hand in tests/test_megatron_buckets.py.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ._validate import check_int, check_number
from .catalog import resolve_model
from .model import Model
from .parallel import Parallel, resolve_parallel

#: Megatron-Core's default gradient bucket, parameters: ``max(40,000,000, 1,000,000 x dp)`` with ``dp`` the
#: data-parallel size with context parallelism (``DistributedDataParallelConfig.bucket_size`` in
#: ``megatron/core/distributed/distributed_data_parallel_config.py``, core v0.7: "larger DP sizes need larger
#: buckets to ensure collectives do not become latency-bound"). DDP's all-reduce and the
#: distributed optimizer's (ZeRO-1/2) reduce-scatter and all-gather run one call per bucket.
DP_BUCKET_MIN_PARAMS = 40_000_000
DP_BUCKET_PARAMS_PER_RANK = 1_000_000


def dp_bucket_params(dp: int) -> int:
    """Parameters per gradient bucket for a data-parallel group of ``dp`` GPUs (``dp x cp`` with context
    parallelism): Megatron-Core's default ``max(40e6, 1e6 x dp)`` (:data:`DP_BUCKET_MIN_PARAMS`). Ch. 7."""
    dp = check_int("dp", dp)
    return max(DP_BUCKET_MIN_PARAMS, DP_BUCKET_PARAMS_PER_RANK * dp)


def bucket_ends(sizes, cap: float, *, first: float | None = None, align: int = 1) -> list[int]:
    """Where gradient buckets close, walking tensors in the order their gradients become ready (``sizes``,
    that order, in the unit of ``cap``): each bucket's end index (exclusive). A tensor is never split and a
    bucket closes once it holds at least ``cap`` (``first``, if given, for the first bucket), the rule of
    PyTorch DDP (``_compute_bucket_assignment_by_size``, bytes) and of Megatron-Core
    (``_compute_default_per_buffer_param_layout`` and, with ``align`` = 64, the distributed optimizer's
    ``_compute_per_buffer_param_layout``, parameters: each tensor starts at a multiple of ``align`` within its
    bucket). One walk for both (:func:`torch_ddp_bucket_assignment`, :func:`megatron_bucket_assignment`): a
    binary search per bucket on the running sums, and a tensor of at least ``cap`` closes the bucket it
    enters, so a run of them whose small tensors between never reach ``cap`` (a mixture's experts, one
    parameter each) closes one bucket each at once, as does a run of equal tensors, ``q`` a bucket."""
    return _walk(_prepare(sizes, align), cap, first)


def _prepare(sizes, align: int = 1) -> tuple:
    """What :func:`bucket_ends` reads of ``sizes`` whatever the cap: kept per chunk by
    :func:`_megatron_prepared`, so a search's many buckets (one per ``dp x cp`` past 40) walk it again."""
    s = np.asarray(sizes, dtype=float)
    padded = np.ceil(s / align) * align if align > 1 else s
    ends_at = np.cumsum(padded)                  # (a tensor's padded end; its own end is its start + size)
    own = ends_at - padded + s
    new_run = np.ones(len(s), dtype=bool)        # (runs of equal tensors: each full bucket holds q of them)
    new_run[1:] = s[1:] != s[:-1]
    run_end = np.append(np.flatnonzero(new_run)[1:], len(s))[np.cumsum(new_run) - 1] if len(s) else s
    return s, ends_at, own, s, padded, run_end.astype(np.int64), ends_at


def _walk(prep: tuple, cap: float, first: float | None = None) -> list[int]:
    s, ends_at, own, size, pad, last, ends_l = prep
    n = len(s)
    if not n:
        return []
    bigs = np.flatnonzero(s >= cap)
    loud = np.ones(len(bigs), dtype=bool)        # (the small tensors before big k reach the cap: walk them)
    if len(bigs) > 1:
        prev, cur = bigs[:-1], bigs[1:]
        loud[1:] = (cur > prev + 1) & (own[cur - 1] - ends_at[prev] >= cap)
    loud_at = np.flatnonzero(loud)
    big_set = set(bigs.tolist())
    out, start, limit = [], 0.0, cap if first is None else first
    while True:
        j = int(own.searchsorted(start + limit, side="left"))
        if j >= n - 1:
            out.append(n)
            return out
        out.append(j + 1)
        start, limit = float(ends_l[j]), cap
        if j in big_set:                          # (a big tensor closed it: the quiet ones after it too)
            k = int(bigs.searchsorted(j))
            at = int(loud_at.searchsorted(k + 1))
            stop = int(loud_at[at]) if at < len(loud_at) else len(bigs)
            if stop > k + 1:
                out += (bigs[k + 1:stop] + 1).tolist()
                j = int(bigs[stop - 1])
                if j >= n - 1:
                    return out
                start = float(ends_l[j])
        i = j + 1
        if size[i] < cap and last[i] - i > 1:     # (a bucket of q equal tensors: (q - 1) x padded + size)
            q = math.ceil((cap - float(size[i])) / float(pad[i])) + 1
            full = (int(last[i]) - i) // q
            if full:
                out += range(i + q, i + q * full + 1, q)
                j = i + q * full - 1
                if j >= n - 1:
                    return out
                start = float(ends_l[j])


#: Megatron-Core aligns each parameter's start in the distributed optimizer's buffer to 64 elements
#: (``pad_param_start``, megatron/core/optimizer/param_layout.py); DDP without it packs them.
MEGATRON_PARAM_ALIGN = 64

#: How many bucket counts :func:`megatron_calls_of`, :func:`_kept_count` and :func:`_needed_align` keep each
#: (an int per key, ~200 bytes an entry: ~3 MB each when full). plan42: at 4,096, building chapter 17's warm
#: widget (~6,500 counts) pushed out the counts its next moves read again, and a mixture of experts' move to
#: a second GPU type worked ~900 of them out anew (~4 ms of the move); at 16,384 they are read.
COUNTS_KEPT = 16384

#: The tensors Megatron-Core's transformer layer fuses into one parameter (Transformer Engine's
#: ``LayerNormLinear``/``Linear``, megatron/core/transformer/attention.py and mlp.py), in the layer's order of
#: registration: ``linear_proj`` (o), ``linear_qkv`` (its input norm, then q, k, v as one matrix and one
#: bias), ``linear_fc1`` (its norm, then gate and up as one matrix when gated) and ``linear_fc2`` (down).
_MEGATRON_FUSED = (("o_proj.weight",), ("o_proj.bias",), ("attn_norm.weight",), ("attn_norm.bias",),
                   ("q_proj.weight", "k_proj.weight", "v_proj.weight"), ("q_proj.bias", "k_proj.bias",
                                                                          "v_proj.bias"))
_MEGATRON_MLP = (("mlp_norm.weight",), ("mlp_norm.bias",), ("gate_proj.weight", "up_proj.weight"),
                 ("gate_proj.bias", "up_proj.bias"), ("down_proj.weight",), ("down_proj.bias",))


@functools.lru_cache(maxsize=256)
def _megatron_layer(model: Model, tp: int, etp: int, ep: int) -> tuple[list, list]:
    """One transformer layer's parameters on a rank as Megatron-Core registers them, ``(name, elements,
    copies, routed)`` each (``copies`` as :meth:`~llmsizing.model.Model.tensors`' and ``routed`` for a routed
    expert's), in two lists: the layer's parameters, then its MoE block's (the router, each local expert's
    fused ``linear_fc1`` and then each one's ``linear_fc2``, TEGroupedMLP's ``weight0..``, then the shared
    experts'). A tensor the table does not name stays a parameter of its own, in the library's order."""
    from .states import _tp_share

    block = {n[len("layers."):]: (s, k) for _, n, s, k in model.tensors() if n.startswith("layers.")}
    seen: set = set()
    dense: list = []

    def fuse(group, prefix=""):
        names = [prefix + g for g in group if prefix + g in block]
        if names:
            seen.update(names)
            n = sum(math.prod(block[x][0]) * _tp_share("layers." + x, model, tp) for x in names)
            return [("+".join(names), round(n), block[names[0]][1], False)]
        return []

    for group in _MEGATRON_FUSED:
        dense += fuse(group)
    rest_attn = [x for x in block if x not in seen and not x.startswith(("experts.", "shared_experts.",
                                                                          "router.", "mlp_norm.")) and
                 not any(x in g for g in _MEGATRON_MLP)]
    moe: list = []
    for x in ("router.weight", "router.bias"):
        if x in block:
            seen.add(x)
            moe.append((x, round(math.prod(block[x][0]) * _tp_share("layers." + x, model, tp)), block[x][1],
                        False))
    gate, up, down = (block.get(f"experts.{w}_proj.weight") for w in ("gate", "up", "down"))
    if down is not None:
        seen.update(f"experts.{w}_proj.weight" for w in ("gate", "up", "down"))
        local = down[0][0] // ep
        fc1 = sum(math.prod(t[0][1:]) for t in (gate, up) if t is not None) / etp
        moe += [(f"experts.linear_fc1.weight{e}", round(fc1), down[1], True) for e in range(local)]
        moe += [(f"experts.linear_fc2.weight{e}", round(math.prod(down[0][1:]) / etp), down[1], True)
                for e in range(local)]
    for group in _MEGATRON_MLP[2:]:
        moe += fuse(group, "shared_experts.")
    mlp = []
    for group in _MEGATRON_MLP:
        mlp += fuse(group)
    for x in rest_attn:
        if x not in seen:
            seen.add(x)
            dense.append((x, round(math.prod(block[x][0]) * _tp_share("layers." + x, model, tp)),
                          block[x][1], False))
    leftover = [(x, round(math.prod(block[x][0]) * _tp_share("layers." + x, model, tp)), block[x][1], False)
                for x in block if x not in seen]
    norm = [e for e in mlp if e[0].startswith("mlp_norm.")]
    return dense + norm, [e for e in mlp if not e[0].startswith("mlp_norm.")] + moe + leftover


@functools.lru_cache(maxsize=256)
def _megatron_parts(model: Model, tp: int, etp: int, ep: int, whole: bool) -> tuple:
    """What a chunk is built of, on one rank: the edges before the layers (the embeddings) and after them
    (``whole``: the final norm and the LM head), one layer's parameters (:func:`_megatron_layer`) as arrays
    (elements, routed, MoE, copies), and the first MoE layer. The MoE layers are the last ``n_moe_layers``
    of the model, its dense-MLP layers the first (DeepSeek-V3's ``first_k_dense``)."""
    from .states import _tp_share

    head, tail = [], []
    for _, n, s, _k in model.tensors():
        if n.startswith("layers."):
            continue
        e = (n, round(math.prod(s) * _tp_share(n, model, tp)))
        if n.startswith("embed_"):
            head.append(e)
        elif whole:
            tail.append(e)
    block = [e for part in _megatron_layer(model, tp, etp, ep) for e in part]
    moe_t = np.array([e[0].startswith(("experts.", "router.", "shared_experts.")) for e in block], dtype=bool)
    return (tuple(head), tuple(tail), tuple(block), np.array([e[1] for e in block], dtype=float),
            np.array([e[3] for e in block], dtype=bool), moe_t, np.array([e[2] for e in block]),
            model.layers - model.n_moe_layers if model.is_moe else model.layers)


def _layer_runs(parts: tuple, layers: int) -> list:
    """The chunk's ``layers`` as runs of alike layers, first to last: ``(which of a layer's parameters they
    hold, how many layers)``."""
    *_, moe_t, k_of, moe_from = parts
    cuts = sorted({0, layers, *(c for c in (moe_from, *k_of.tolist()) if 0 < c < layers)})
    return [(np.where(moe_t, a >= moe_from, a < k_of), b - a) for a, b in zip(cuts, cuts[1:])]


def _megatron_chunk(model: Model, tp: int, etp: int, ep: int, layers: int, whole: bool) -> tuple:
    """The parameters of pipeline rank 0's first model chunk in backward order (``whole``: the whole model,
    no pipeline): ``(names, elements, routed, shared)``, ``shared`` marking a tied embedding that
    Megatron-Core gives a bucket of its own under a pipeline (``shared_embedding``). Every parameter, for
    :func:`megatron_bucket_assignment`; the counts walk :func:`_megatron_pieces` instead."""
    parts = _megatron_parts(model, tp, etp, ep, whole)
    head, tail, block, size_b, routed_b = parts[:5]
    runs = _layer_runs(parts, layers)
    sizes = np.concatenate([[x[1] for x in head]] + [np.tile(size_b[m], c) for m, c in runs]
                           + [[x[1] for x in tail]])
    routed = np.concatenate([np.zeros(len(head), bool)] + [np.tile(routed_b[m], c) for m, c in runs]
                            + [np.zeros(len(tail), bool)])
    shared = np.zeros(len(sizes), dtype=bool)
    if not whole and model.tied_embeddings:
        shared[[i for i, x in enumerate(head) if x[0] == "embed_tokens.weight"]] = True
    names, i = [x[0] for x in head], 0
    for m, c in runs:
        for _ in range(c):
            names += [f"layers.{i}.{e[0]}" for e, held in zip(block, m) if held]
            i += 1
    names = tuple(names + [x[0] for x in tail])[::-1]
    return names, sizes[::-1].copy(), routed[::-1].copy(), shared[::-1].copy()


def _megatron_walk(model, tp, etp, ep, layers, whole, part, bucket, align) -> tuple:
    """:func:`bucket_ends` over the chunk's parameters of ``part``: ``(their indices, the buckets' ends among
    them, the shared embedding's index if any, a bucket of its own after them)``."""
    _, sizes, routed, shared = _megatron_chunk(model, tp, etp, ep, layers, whole)
    keep = np.arange(len(sizes))
    if part == "dense":
        keep = keep[~routed]
    elif part == "experts":
        keep = keep[routed]
    if align <= 1:                                      # (apart only with the distributed optimizer)
        shared = np.zeros_like(shared)
    cut = keep[shared[keep]]                            # (a shared embedding: a bucket of its own, the last)
    body = keep[~shared[keep]]
    align = _needed_align(model, tp, etp, ep, layers, whole, part, align)
    return body, (_walk(_prepare(sizes[body], align), bucket) if len(body) else []), cut


@functools.lru_cache(maxsize=1024)
def _megatron_pieces(model, tp, etp, ep, layers, whole, part, align, apart: bool = True) -> tuple:
    """The chunk's parameters of ``part`` in backward order as pieces, without repeating a layer: ``((a
    piece's walk prepared, :func:`_prepare`, its repeats), ...)`` for the edge after the layers, each run of
    alike layers (last first) and the edge before them; then the shared embeddings (a bucket each) and the
    sizes' greatest common divisor. ``apart``: a tied embedding under a pipeline has a bucket of its own
    (Megatron-Core does so with the distributed optimizer only). Kept: every bucket of a search walks them."""
    parts = _megatron_parts(model, tp, etp, ep, whole)
    head, tail, _, size_b, routed_b = parts[:5]
    shared_emb = not whole and model.tied_embeddings and apart

    def keep(routed):
        return ~routed if part == "dense" else routed if part == "experts" else np.ones(len(routed), bool)

    edge_h = np.array([x[1] for x in head if not (shared_emb and x[0] == "embed_tokens.weight")], dtype=float)
    cut = sum(1 for x in head if shared_emb and x[0] == "embed_tokens.weight") if part != "experts" else 0
    tail_s = np.array([x[1] for x in tail], dtype=float)
    if part == "experts":
        edge_h, tail_s = edge_h[:0], tail_s[:0]
    pieces = [(tail_s[::-1], 1)]
    pieces += [(size_b[m & keep(routed_b)][::-1], c) for m, c in reversed(_layer_runs(parts, layers))]
    pieces += [(edge_h[::-1], 1)]
    pieces = [(x, c) for x, c in pieces if len(x) and c]
    gcd = int(np.gcd.reduce(np.concatenate([x for x, _ in pieces]).astype(np.int64))) if pieces else 0
    return tuple((_kept_prepare(np.asarray(x, dtype=float).tobytes(), align), c) for x, c in pieces), cut, gcd


@functools.lru_cache(maxsize=1024)
def _kept_prepare(sizes: bytes, align: int) -> tuple:
    """:func:`_prepare` of the float64 sizes ``sizes`` (their bytes) with ``align`` appended, kept by the
    sizes themselves (pick49, issue 38): a chunk's pieces are the same at every pipeline depth and with the
    embedding apart or not, only their repeats differ, so a dense model's first search prepared each ~8 times
    (~100 calls, ~1.5 ms of a chapter 17 model pick). The same floats in, so the same arrays out (read-only:
    shared)."""
    prep = _prepare(np.frombuffer(sizes, dtype=float), align)
    for a in prep:
        a.flags.writeable = False
    return prep + (align,)


def _walk_from(prep: tuple, cap: float, fill: float) -> tuple[int, float]:
    """:func:`_walk` over one piece entered with an open bucket of ``fill`` elements (0: none): ``(buckets
    it closes, the open bucket's fill after it, 0 if none)``."""
    s, ends_at, own, *_, align = prep
    off = math.ceil(fill / align) * align if fill else 0.0     # (its first tensor starts aligned)
    n = len(s)
    if cap > ends_at[n - 1]:
        # (a bucket longer than the piece closes at most once in it, at the first tensor that brings it to
        # ``cap``, and what follows stays open: _walk's answer, [j + 1, n] or [n], from one search; speed38)
        j = int(own.searchsorted(cap - off, side="left"))
        if j >= n - 1:
            held = own[n - 1] - (-off)
            return (1, 0.0) if held >= cap else (0, float(held))
        held = own[n - 1] - ends_at[j]
        return (2, 0.0) if held >= cap else (1, float(held))
    ends = _walk(prep[:-1], cap, cap - off if off else None)
    start = ends[-2] if len(ends) > 1 else 0
    held = own[n - 1] - (ends_at[start - 1] if start else -off)
    if held >= cap:
        return len(ends), 0.0
    return len(ends) - 1, float(held)


@functools.lru_cache(maxsize=COUNTS_KEPT)
def _needed_align(model, tp, etp, ep, layers, whole, part, align) -> int:
    """``align``, or 1 where every parameter of the chunk's part is a multiple of it (no padding). Kept (a
    search asks it once per bucket size; speed38), so that the chunk's pieces prepared unaligned, read for
    their sizes' divisor only, do not take the place of the aligned ones the walks read."""
    if align > 1 and not _megatron_pieces(model, tp, etp, ep, layers, whole, part, 1, True)[2] % align:
        return 1
    return align


def _megatron_count(model, tp, etp, ep, layers, whole, part, bucket, align) -> int:
    """The walk's buckets, at least 1: a part that rank 0's first chunk does not hold (the routed experts of
    DeepSeek-V3's first, dense, layers) is one bucket on the stages that do, as every stage but rank 0's."""
    # (``apart`` reads only a tied embedding under a pipeline: otherwise the same pieces, one key; pick49)
    return _kept_count(model, tp, etp, ep, layers, whole, part, bucket,
                       _needed_align(model, tp, etp, ep, layers, whole, part, align),
                       align > 1 and not whole and model.tied_embeddings)


@functools.lru_cache(maxsize=COUNTS_KEPT)
def _kept_count(model, tp, etp, ep, layers, whole, part, bucket, align, apart: bool = True) -> int:
    """:func:`_megatron_pieces` walked piece by piece, a run of alike layers one layer at a time until the
    open bucket's fill at a layer's start repeats: then the layers between repeat too, and their buckets are
    counted at once (so 720,720 layers cost a cycle's walk)."""
    pieces, cut, _ = _megatron_pieces(model, tp, etp, ep, layers, whole, part, align, apart)
    count, fill = 0, 0.0
    for prep, reps in pieces:
        seen: dict = {}
        r = 0
        while r < reps:
            if fill in seen:                             # (a cycle: skip its whole repeats)
                r0, c0 = seen.pop(fill)
                period, gained = r - r0, count - c0
                k = (reps - r) // period
                count, r = count + k * gained, r + k * period
                seen.clear()
                if r >= reps:
                    break
            seen[fill] = (r, count)
            quiet, after = _quiet_repeats(prep, bucket, fill, reps - r)
            if quiet:                                    # (repeats that close no bucket: passed at once)
                fill, r = after, r + quiet
                continue
            closed, fill = _walk_from(prep, bucket, fill)
            count, r = count + closed, r + 1
    return max(1, count + (fill > 0) + cut)


def _quiet_repeats(prep: tuple, cap: float, fill: float, most: int) -> tuple[int, float]:
    """How many of the next ``most`` repeats of a piece (:func:`_walk_from`'s ``prep``) entered with an open
    bucket of ``fill`` elements close no bucket, and the open bucket's fill after them: ``(0, fill)`` if
    the next one closes one. Each repeat starts aligned, so it moves the aligned start by the piece's padded
    length ``L`` (its end is a multiple of the alignment); it closes none while the end of its last tensor,
    from that start, stays below ``cap`` (:func:`_walk_from` gives ``(0, start + that end)`` then), so the
    first ``k`` with ``start + (k - 1) L + last < cap`` are passed at once, the same integer-valued floats
    the walk of each would give (speed38: a large bucket over many layers walked layer by layer was ~0.1 ms
    a count, and a search adding a GPU type to a mixture of experts makes up to ~1,000 new counts)."""
    s, ends_at, own, *_, align = prep
    off = math.ceil(fill / align) * align if fill else 0.0
    last, length = float(own[len(s) - 1]), float(ends_at[len(s) - 1])
    if length <= 0 or last + off >= cap:               # (the next repeat closes one)
        return 0, fill
    k = max(1, min(most, math.ceil((cap - off - last) / length)))
    while k > 1 and last + (off + (k - 1) * length) >= cap:     # (the quotient's rounding, checked as the
        k -= 1                                                   # walk compares: its last repeat closes none)
    while k < most and last + (off + k * length) < cap:
        k += 1
    return k, last + (off + (k - 1) * length)


@functools.lru_cache(maxsize=COUNTS_KEPT)
def megatron_calls_of(model: Model, tp: int, pp: int, vp: int, zero: int, bucket_params: float, ep: int = 1,
                      etp: int = 1, part: str | None = None) -> int:
    """:func:`megatron_buckets` from a layout's numbers, for the planner's keys (Megatron-LM's split of the
    layers over ``pp`` stages, :func:`~llmsizing.plan_stage_terms.pipeline_split`'s rule: the embedding and
    the loss counted as layers where ``pp`` does not divide the layers). Kept per key."""
    return _megatron_count(model, tp, etp, ep, _rank0_layers(model.layers, pp, vp), pp == 1, part,
                           float(bucket_params), MEGATRON_PARAM_ALIGN if zero >= 1 else 1) + vp - 1


@functools.lru_cache(maxsize=1024)
def _rank0_layers(layers: int, pp: int, vp: int) -> int:
    """The transformer layers of pipeline rank 0's first chunk under the planner's split."""
    from .parallel import kept_parallel, split_fields
    from .pipeline_stages import stage_chunks

    split = split_fields(layers, pp)        # (a DualPipe search's uneven split too: dual48)
    return stage_chunks(layers, kept_parallel(pp=pp, virtual_stages=vp, **split))[0][0]


def _megatron_key(model: Model, parallel: Parallel, part: str | None, bucket_params):
    from .pipeline_stages import stage_chunks

    par = parallel
    if part not in (None, "dense", "experts"):
        raise ValueError(f"part must be None, 'dense' or 'experts', got {part!r}")
    bucket = dp_bucket_params(par.dp_cp) if bucket_params is None else check_number(
        "bucket_params", bucket_params, minimum=1.0)
    layers = stage_chunks(model.layers, par)[0][0]
    return (model, par.tp, par.etp, par.ep, layers, par.pp == 1, part, float(bucket),
            MEGATRON_PARAM_ALIGN if par.zero >= 1 else 1)


def megatron_bucket_assignment(model: Model | str, parallel: Parallel | None = None, *,
                               part: str | None = None,
                               bucket_params: float | None = None) -> list[list[str]]:
    """Megatron-Core's gradient buckets on pipeline rank 0's first model chunk, in the order they are reduced,
    each the names of its parameters (``layers.3.q_proj.weight+k_proj.weight+v_proj.weight`` for the fused
    ``linear_qkv``): what :func:`megatron_buckets` counts.

    Megatron-Core walks a chunk's parameters in reverse (the order the backward makes their gradients) and
    closes a bucket at the first parameter that brings it to ``bucket_params`` (default
    :func:`dp_bucket_params` of ``dp x cp``, for the routed experts' buffer too: ``DistributedDataParallel``
    sets one ``bucket_size`` for both), never splitting one
    (``_compute_default_per_buffer_param_layout`` in megatron/core/distributed/param_and_grad_buffer.py; with
    the distributed optimizer, ``zero >= 1``, ``DistributedOptimizer._compute_per_buffer_param_layout``,
    each parameter starting on a multiple of 64 elements, :data:`MEGATRON_PARAM_ALIGN`, and a tied
    embedding under a pipeline in a bucket of its own).
    Its parameters are Transformer Engine's fused ones (:data:`_MEGATRON_FUSED`), split by ``tp`` as the
    model states are (:func:`~llmsizing.states._tp_share`), the routed experts ``experts / ep`` per rank, one
    ``linear_fc1`` and one ``linear_fc2`` each, split by ``etp``. ``part``: all parameters in one buffer
    (None), or the dense ones or the routed experts' alone when they have buffers of their own
    (``group_params_for_buffers``, :func:`~llmsizing.comm.experts_apart`). Only pipeline rank 0's first chunk
    is bucketed: Megatron-Core gives every other stage and chunk a single bucket (``disable_bucketing`` or
    ``pp_rank > 0``, distributed_data_parallel.py and megatron/training: "not on the critical path").
    Chapter 7."""
    model = resolve_model(model, moe=True)
    par = resolve_parallel(parallel or Parallel(), model)
    key = _megatron_key(model, par, part, bucket_params)
    names = _megatron_chunk(*key[:6])[0]
    body, ends, cut = _megatron_walk(*key)
    return ([[names[i] for i in body[a:b]] for a, b in zip([0, *ends[:-1]], ends)]
            + [[names[i]] for i in cut])


def megatron_buckets(model: Model | str, parallel: Parallel | None = None, *, part: str | None = None,
                     bucket_params: float | None = None) -> int:
    """Calls per pass of DDP's all-reduce and the distributed optimizer's (ZeRO-1/2) reduce-scatter and
    all-gather under Megatron-Core: the gradient buckets of pipeline rank 0's first model chunk
    (:func:`megatron_bucket_assignment`), plus one for each of its other ``virtual_stages - 1`` chunks, whose
    bucketing Megatron-Core turns off. Rank 0 is the stage whose data-parallel calls the step waits for (it
    runs the step's last backward) and it has the most calls of any stage (every other has one per chunk).
    Llama-3-8B on 8 GPUs: 98 (32 layers of three buckets, the LM head and the embedding), where one per
    ``bucket_params`` gives 201. Kept per (model, layout, part, bucket). Chapter 7."""
    model = resolve_model(model, moe=True)
    par = resolve_parallel(parallel or Parallel(), model)
    return _megatron_count(*_megatron_key(model, par, part, bucket_params)) + par.virtual_stages - 1
