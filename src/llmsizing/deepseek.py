"""DeepSeek-V3 as DeepSeek ran it (chapter 18; issue 24's done-when): its published layout, the per-GPU memory
of its own plan (DualPipe, FP8 with recomputed pieces, MTP) tensor by tensor, and the check of the library's
step and memory against the report (DeepSeek-AI 2024, arXiv 2412.19437). The MoE terms it builds on are
:mod:`llmsizing.moe`'s; this module sits above the answers it compares (memory, step time, published stages).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ._validate import check_bool, check_choice, check_int, check_number
from .model import Model
from .moe import _moe_indices, moe_model_states
from .mtp import MTP_EMBEDDING_BYTES, add_states, mtp_layout, mtp_projection_states
from .parallel import Parallel, check_ep, layers_per_stage


#: DeepSeek-V3's pre-training layout (DeepSeek-AI 2024, arXiv 2412.19437, Sec. 3.2-3.3): 2,048 H800s, 16-way
#: pipeline parallelism (DualPipe), 64-way expert parallelism over 8 nodes, ZeRO-1 data parallelism, no tensor
#: parallelism, FP8 training; a batch of 15,360 sequences of 4K tokens (Sec. 4.2) is 120 per data-parallel
#: rank.
DEEPSEEK_V3_LAYOUT = Parallel(pp=16, dp=128, ep=64, zero=1)


DEEPSEEK_V3_MICRO_BATCHES = 15360 // 128


#: Its node-limited routing: each token to at most 4 nodes (Sec. 2.1.2, 3.2.2).
DEEPSEEK_V3_MAX_NODES = 4


#: A split of DeepSeek-V3's 61 layers over its 16 pipeline stages that unloads the chunks DualPipe puts on one
#: rank with the embedding, the output head and the MTP module: one layer fewer in the first and in the last
#: chunk. Not published (the report gives no split); :func:`deepseek_v3_check` shows the library's even split
#: too.
DEEPSEEK_V3_BALANCED_SPLIT = (3,) + (4,) * 14 + (2,)


#: What DeepSeek-V3 keeps per micro-batch in the model's last pipeline chunk for its multi-token-prediction
#: (MTP) module (Sec. 2.2): one MTP depth, a MoE block with its own projection ``M`` (``2h x h``) and two
#: RMSNorms; the embedding and the output head are the main model's, on the same pipeline rank (Sec. 3.2.3).
DEEPSEEK_V3_MTP_DEPTH = 1


def deepseek_layer_bytes(model: Model, *, moe: bool = True, probs_in_swiglu: bool = True) -> dict[str, float]:
    """Bytes one layer of a multi-head-latent-attention mixture of experts saves for its backward **per
    token** under DeepSeek-V3's memory recipe (DeepSeek-AI 2024, arXiv:2412.19437; ``moe=False``: one of its
    first dense layers), by tensor. No tensor or sequence parallelism (DeepSeek ran none), uniform routing,
    dropless.

    * ``residuals``: the inputs of the layer's two RMSNorms in BF16, ``2 x 2h``. Sec. 3.2.3 "Recomputation of
      RMSNorm and MLA Up-Projection": every RMSNorm is recomputed in the backward, so its *output* is not kept
      (nor the FP8 copy a following Linear would cache of it: the QKV down-projections', the router's, the
      shared expert's and the dispatched tokens' source), only its input, the residual stream, which is needed
      anyway.
    * ``mla_latents``: the compressed query and key-value latents before their RMSNorms and the rope key, in
      BF16: ``2 (q_lora_rank + kv_lora_rank + qk_rope_head_dim)``. MLA's up-projections are recomputed (Sec.
      3.2.3), so the per-head queries, keys and values (``heads x (2 x 192 + 128)`` numbers, what a dense
      layer's flash attention keeps) are rebuilt from these in the backward.
    * ``attention_output``: the output projection's input, ``heads x v_head_dim`` in E5M6 with a 1 x 128 tile
      scale (1.5 + 4/128 bytes; Sec. 3.3.3 (1)), which the attention's backward reads too (kept once), and the
      flash kernel's fp32 log-sum-exp per head (``4 x heads``).
    * MoE layers: ``router``, the fp32 logits and scores, the routing map and the fp32 top-k weights (``9 E +
      4 k``, :func:`moe_layer_terms`'s router without its input, which is recomputed); ``dispatch``, the
      tokens the experts receive, ``k x h`` in FP8 with tile scales (Sec. 3.3.3 "Low-Precision Communication":
      quantised before the dispatch, the experts' up-projection input); ``experts`` and ``shared``, each
      expert's SwiGLU input (``2 x`` its width) in FP8 with its output recomputed (Sec. 3.3.3 (2)).
      ``combine``: with ``probs_in_swiglu`` (default) nothing: the router's weights multiply the SwiGLU output
      before the down-projection (which is linear, so the sum is the same), and the weights' gradient needs
      only that recomputed output (Megatron-Core's ``TEGroupedMLP`` does this with
      ``weighted_bias_swiglu_impl``, ``megatron/core/fusions/fused_bias_swiglu.py``, and its FP8 input store);
      with ``probs_in_swiglu=False`` the experts' BF16 outputs, ``2 k h``, kept for the combine's weighting
      (:func:`moe_layer_terms`'s rule). The report does not say which DeepSeek did.
    * dense layers: ``mlp``, the SwiGLU's two BF16 inputs and the down-projection's FP8 input (``4 f + f x (1
      + 4/128)``): Sec. 3.3.3 (2) caches the SwiGLU input in FP8 only "in MoE".

    EMA of the parameters lives in CPU memory (Sec. 3.2.3) and costs the GPU nothing; BF16 optimizer moments
    and FP32 master weights and gradients (Sec. 3.3.3) are the ``fp8-deepseek`` recipe's
    (:mod:`llmsizing.precision`). Used by :func:`deepseek_memory`."""
    from .precision import FP8_SCHEMES

    if not (model.is_moe and model.is_mla):
        raise ValueError(f"deepseek_layer_bytes: {model.name!r} is not a mixture of experts with multi-head "
                         "latent attention (DeepSeek-V2/V3's recipe needs both)")
    check_bool("moe", moe)
    check_bool("probs_in_swiglu", probs_in_swiglu)
    sch = FP8_SCHEMES["fp8-deepseek"]
    f8, p = sch.input_bytes, 2.0
    h, a, e, k = model.hidden, model.heads, model.experts, model.experts_per_token
    out = {"residuals": 2 * p * h,
           "mla_latents": p * ((model.q_lora_rank or 0) + model.kv_lora_rank + model.qk_rope_head_dim),
           "attention_output": sch.attn_out_bytes * a * model.v_head_dim + 4.0 * a}
    if not moe:
        f = model.ffn_hidden
        return out | {"mlp": 2 * p * f + f8 * f}
    fe = model.expert_ffn_hidden or model.ffn_hidden
    fs = model.shared_experts * (model.shared_expert_ffn_hidden or fe)
    return out | {"router": 9.0 * e + 4.0 * k, "dispatch": f8 * k * h, "experts": f8 * 2 * fe * k,
                  "shared": f8 * 2 * fs, "combine": 0.0 if probs_in_swiglu else p * k * h}


def deepseek_rebuilt_bytes(model: Model) -> float:
    """Bytes per token one MoE layer rebuilds during its own backward under DeepSeek-V3's recipe (alive for
    that layer only): its two RMSNorm outputs in BF16, the per-head queries, keys and values MLA's
    up-projections recompute (BF16, ``heads x (2 (nope + rope) + v)``), and the routed and shared experts'
    SwiGLU outputs (BF16)."""
    fe = model.expert_ffn_hidden or model.ffn_hidden
    fs = model.shared_experts * (model.shared_expert_ffn_hidden or fe)
    d_qk = model.qk_nope_head_dim + model.qk_rope_head_dim
    return 2.0 * (2 * model.hidden + model.heads * (2 * d_qk + model.v_head_dim)
                  + model.experts_per_token * fe + fs)


@dataclass(frozen=True)
class DeepSeekMemory:
    """:func:`deepseek_memory`'s result: ``ranks``, one dict per pipeline rank of the first half (DualPipe's
    ranks ``i`` and ``pp - 1 - i`` hold the same two chunks), with its ``chunks``, micro-batches in flight of
    each, model states, activations, peak (bytes) and ``total`` (peak + overhead allowance); ``rank`` is the
    most loaded one, :attr:`total_bytes` its total."""

    ranks: tuple
    rank: int
    schedule: str

    @property
    def total_bytes(self) -> float:
        return self.ranks[self.rank]["total"]

    @property
    def table(self):
        """A DataFrame, one row per rank, in GiB."""
        import pandas as pd

        from .units import GiB

        cols = ("states", "activations", "peak", "total")
        df = pd.DataFrame([{"rank": r["rank"], "chunks": r["chunks"], "in flight": r["in_flight"],
                            **{c + " GiB": r[c] / GiB for c in cols}} for r in self.ranks])
        return df.set_index("rank")


def deepseek_memory(model: Model | str = "deepseek-v3", parallel: Parallel | None = None, *, batch: int = 1,
                    seq: int = 4096, grad_accum: int | None = None, schedule: str = "dualpipe",
                    probs_in_swiglu: bool = True, mtp_depth: int = DEEPSEEK_V3_MTP_DEPTH,
                    overhead_bytes: float | None = None) -> DeepSeekMemory:
    """Per-GPU training memory of a DeepSeek-V2/V3-style model run as DeepSeek ran V3 (arXiv:2412.19437,
    Sec. 3.2.3 and 3.3.3): ``precision="fp8-deepseek"`` (FP8 Linear weights, FP32 master weights and
    gradients, BF16 AdamW moments), activations as :func:`deepseek_layer_bytes` (RMSNorms and MLA
    up-projections recomputed, FP8/E5M6 caches), EMA on the CPU, and the MTP module (``mtp_depth`` MoE blocks
    with their ``2h x h`` projections and two norms) in the last pipeline chunk, sharing the embedding and
    head.

    ``schedule="dualpipe"`` (Sec. 3.2.1, Table 2; ``deepseek-ai/DualPipe``): pipeline rank ``i`` holds chunks
    ``i`` and ``pp - 1 - i`` (two copies of the parameters: the embedding and the output head on the same
    rank), their weights, gradients and optimizer states each as :func:`moe_model_states` gives them on their
    own stage (each copy accumulates its own FP32 gradient; a chunk's optimizer shard is counted on both ranks
    that hold it, an upper bound: sharding it over the pair would save half of the optimizer bytes, 1.8 GiB on
    rank 0); DualPipe's schedule (``dualpipe.py``'s ``step``, rank ``i < pp/2``: ``2 (pp/2 - i - 1) + i + 1``
    forward chunks of phase 0 (chunk ``i``) and ``i + 1`` of phase 1 (chunk ``pp - 1 - i``) before the first
    backward, then each forward chunk overlapped with a backward one) holds at most ``pp - i`` micro-batches
    of chunk ``i`` and ``i + 1`` of chunk ``pp - 1 - i`` at once: ``pp + 1``, the report's Table 2.
    ``schedule="1f1b"``: one chunk per rank, ``min(pp - i, grad_accum)`` in flight
    (:func:`~llmsizing.parallel.pipeline_in_flight`). The layers are split as ``parallel`` says
    (``stage_layers``, else the library's even split); the MTP block joins the last chunk.

    The peak and its phases are :func:`~llmsizing.memory.step_phases`': the kept activations, one MoE layer
    rebuilt (:func:`deepseek_rebuilt_bytes`) plus :data:`~llmsizing.memory.LAYER_WORKING_SET` of it in its
    backward, the loss's temporaries on the rank with the output head (one head at a time), the overhead
    allowance of :func:`~llmsizing.memory.default_overhead_bytes`. ``parallel`` defaults to
    :data:`DEEPSEEK_V3_LAYOUT`, ``grad_accum`` to :data:`DEEPSEEK_V3_MICRO_BATCHES` (DualPipe needs at least
    ``2 pp`` micro-batches)."""
    from .catalog import resolve_model
    from .memory import (LAYER_WORKING_SET, LOSS_BACKWARD_BYTES_PER_LOGIT, default_overhead_bytes,
                         optimizer_state_elements, step_phases)
    from .activations import ActivationMemory
    from .parallel import pipeline_in_flight

    model = resolve_model(model, moe=True)
    par = DEEPSEEK_V3_LAYOUT if parallel is None else parallel
    if not isinstance(par, Parallel):
        raise TypeError(f"parallel must be a Parallel, got {type(par).__name__}")
    batch, seq = check_int("batch", batch), check_int("seq", seq)
    m = check_int("grad_accum", DEEPSEEK_V3_MICRO_BATCHES if grad_accum is None else grad_accum)
    schedule = check_choice("schedule", schedule, ("dualpipe", "1f1b"))
    depth = check_int("mtp_depth", mtp_depth, minimum=0, maximum=8)
    check_bool("probs_in_swiglu", probs_in_swiglu)
    if overhead_bytes is not None:
        overhead_bytes = check_number("overhead_bytes", overhead_bytes)
    if par.tp > 1 or par.cp > 1 or par.virtual_stages > 1:
        raise ValueError("deepseek_memory models DeepSeek-V3's layout: no tensor, context or interleaved "
                         f"pipeline parallelism (got tp={par.tp}, cp={par.cp}, "
                         f"virtual_stages={par.virtual_stages})")
    check_ep(model, par)
    pp = par.pp
    if schedule == "dualpipe" and (pp % 2 or m % 2 or m < 2 * pp):
        raise ValueError(f"schedule='dualpipe' needs an even pp (got {pp}) and an even grad_accum >= 2 pp "
                         f"(got {m}): DualPipe's own assertions")
    t = batch * seq
    moe_b = sum(deepseek_layer_bytes(model, probs_in_swiglu=probs_in_swiglu).values()) * t
    dense_b = sum(deepseek_layer_bytes(model, moe=False).values()) * t
    # the main model's split, the MTP block(s) appended to the last chunk as MoE layers (llmsizing.mtp)
    ext, epar = mtp_layout(model, replace(par, stage_layers=layers_per_stage(model.layers, par)), depth)
    split, moe_idx = epar.stage_layers, sorted(_moe_indices(ext))
    elements = optimizer_state_elements(ext, "adamw")
    h = model.hidden
    per_chunk, start = [], 0
    moe_set = set(moe_idx)
    for i, n in enumerate(split):
        k = sum(1 for j in range(start, start + n) if j in moe_set)
        start += n
        acts = k * moe_b + (n - k) * dense_b
        st = moe_model_states(ext, elements, "fp8-deepseek", "adamw", epar, i)
        emb = logits = 0.0
        if i == 0:
            emb = 8.0 * t                                           # int64 token ids
        if i == pp - 1:
            # main and MTP heads: the final norm's input and fp32 log-probabilities per head (the library's
            # logits rule), and the MTP block's second input, the next token's embedding (BF16)
            logits = (1 + depth) * (2.0 * h + 4.0 * model.vocab) * t + depth * MTP_EMBEDDING_BYTES * h * t
            if depth:
                st = add_states(st, mtp_projection_states(model, depth, "fp8-deepseek", "adamw", par))
        per_chunk.append(dict(acts=acts, emb=emb, logits=logits, states=st, moe=k))
    rebuilt = deepseek_rebuilt_bytes(model) * t
    loss = LOSS_BACKWARD_BYTES_PER_LOGIT["fused"] * t * model.vocab
    ranks = []
    own = range(pp // 2) if schedule == "dualpipe" else range(pp)
    for i in own:
        if schedule == "dualpipe":
            a, b = per_chunk[i], per_chunk[pp - 1 - i]
            na, nb = float(pp - i), float(i + 1)
            chunks, flight = (i, pp - 1 - i), (na, nb)
            states = add_states(a["states"], b["states"])
            kept = na * a["acts"] + nb * b["acts"]
            emb, logits = na * a["emb"] + nb * b["emb"], na * a["logits"] + nb * b["logits"]
            has_head = True if i == 0 else False
        else:
            a = per_chunk[i]
            na = pipeline_in_flight(pp, m)[i]
            chunks, flight = (i,), (na,)
            states, kept = a["states"], na * a["acts"]
            emb, logits, has_head = na * a["emb"], a["logits"], i == pp - 1
        acts = ActivationMemory(kept, kept + rebuilt, emb, logits,
                                {"layers": kept + rebuilt, "embedding": emb, "logits": logits}, 1)
        phases = step_phases(states, acts, grad_accum=m, autocast_bytes=0.0,
                             loss_bytes=loss if has_head else 0.0,
                             optimizer_bytes=states.optimizer_state_bytes / 2,   # foreach: one moment's size
                             layer_working_bytes=LAYER_WORKING_SET * moe_b, head_grad_bytes=0.0)
        peak = max(sum(v.values()) for v in phases.values())
        over = default_overhead_bytes(peak) if overhead_bytes is None else overhead_bytes
        ranks.append({"rank": i, "chunks": chunks, "in_flight": flight, "states": states.total_bytes,
                      "activations": acts.total_bytes, "peak": peak, "total": peak + over,
                      "states_detail": states})
    top = max(range(len(ranks)), key=lambda r: (ranks[r]["total"], -r))
    return DeepSeekMemory(tuple(ranks), top, schedule)


def _add_states(a, b, cls=None):
    """Two model states on one GPU, field by field (:func:`llmsizing.mtp.add_states`, for old callers)."""
    return add_states(a, b)


def deepseek_v3_check(*, gpu_memory_gib: float = 80.0) -> dict:
    """DeepSeek-V3's published pre-training run against the library (issue 24's done-when), as named numbers a
    chapter can glue: the per-GPU peak of :func:`~llmsizing.memory.training_memory` (``GiB`` at the most
    loaded stage) with no, selective and full recomputation, at micro-batches of one 4K sequence on
    :data:`DEEPSEEK_V3_LAYOUT` with ``precision="fp8-deepseek"``; the step of
    :func:`~llmsizing.layouts.step_time` with node-limited routing (:data:`DEEPSEEK_V3_MAX_NODES`) and the
    all-to-all exposed (``ep_overlap=0``) or hidden by DualPipe (``ep_overlap=1``): its MFU and the
    pre-training's GPU-hours (tokens and GPU-hours from ``data/published_stages.csv``) with the step's own
    80% range (``StepTime.range_factors``: a mixture of experts' range, measured leaving whole sources out on
    the published MoE runs, :func:`~llmsizing.moe_runs.moe_loso_check`; issue 35).

    DeepSeek's own memory recipe is :func:`deepseek_memory` (DualPipe's two chunks per rank and ``pp + 1``
    micro-batches, recomputed RMSNorms and MLA up-projections, FP8/E5M6 caches, the MTP module):
    ``memory_gib_deepseek_even`` with the library's even split of the layers, ``..._balanced`` with
    :data:`DEEPSEEK_V3_BALANCED_SPLIT`, ``..._combine`` with the balanced split and the experts' outputs kept
    for the combine (``probs_in_swiglu=False``), ``memory_gib_deepseek_1f1b`` the balanced split under 1F1B;
    each with ``fits_``, the most loaded ``rank_``, its ``states_gib_`` and ``activations_gib_`` and
    ``in_flight_``.

    These two steps price 1F1B with the library's even split and none of DeepSeek's recipe beyond the
    all-to-all; :func:`deepseek_v3_time_terms` adds the rest of what the report states, term by term
    (issue 35)."""
    from .catalog import get_model
    from .layouts import step_time
    from .memory import training_memory
    from .stages import published_stages
    from .units import GiB

    gpu_memory_gib = check_number("gpu_memory_gib", gpu_memory_gib)
    m, par = get_model("deepseek-v3"), DEEPSEEK_V3_LAYOUT
    ds = published_stages()
    row = ds[(ds["run"] == "DeepSeek-V3") & (ds["phase"] == "pre-training")].iloc[0]
    tokens, published = float(row["tokens"]), float(row["phase_gpu_hours"])
    kw = dict(batch=1, seq=int(row["seq"]), grad_accum=DEEPSEEK_V3_MICRO_BATCHES, precision="fp8-deepseek")
    out = {"gpus": par.gpus, "tokens": tokens, "published_gpu_hours": published}
    for rc in ("none", "selective", "full"):
        r = training_memory(m, parallel=par, recompute=rc, **kw)
        out[f"memory_gib_{rc}"] = r.total_bytes / GiB
        out[f"fits_{rc}"] = r.total_bytes / GiB <= gpu_memory_gib
    out["states_gib"] = training_memory(m, parallel=par, recompute="full", **kw).states.total_bytes / GiB
    # DeepSeek's own recipe (deepseek_memory): DualPipe, recomputed RMSNorms and MLA up-projections, FP8
    # caches
    balanced = replace(par, stage_layers=DEEPSEEK_V3_BALANCED_SPLIT)
    for tag, p_, swiglu in (("even", par, True), ("balanced", balanced, True), ("combine", balanced, False)):
        r = deepseek_memory(m, p_, seq=kw["seq"], grad_accum=kw["grad_accum"], probs_in_swiglu=swiglu)
        top = r.ranks[r.rank]
        out[f"memory_gib_deepseek_{tag}"] = r.total_bytes / GiB
        out[f"fits_deepseek_{tag}"] = r.total_bytes / GiB <= gpu_memory_gib
        out[f"rank_deepseek_{tag}"] = r.rank
        out[f"states_gib_deepseek_{tag}"] = top["states"] / GiB
        out[f"activations_gib_deepseek_{tag}"] = top["activations"] / GiB
        out[f"in_flight_deepseek_{tag}"] = top["in_flight"]
    out["memory_gib_deepseek_1f1b"] = deepseek_memory(m, balanced, seq=kw["seq"], grad_accum=kw["grad_accum"],
                                                      schedule="1f1b").total_bytes / GiB
    for tag, overlap in (("exposed", 0.0), ("dualpipe", 1.0)):
        st = step_time(m, "H800", par, ep_overlap=overlap, max_nodes=DEEPSEEK_V3_MAX_NODES, **kw)
        low, high = st.range_factors
        hours = tokens / st.tokens * st.step_s * par.gpus / 3600
        out[f"step_s_{tag}"] = st.step_s
        out[f"mfu_{tag}"] = st.mfu
        out[f"gpu_hours_{tag}"] = hours
        out[f"gpu_hours_{tag}_low"] = hours / high            # the band's fastest end
        out[f"gpu_hours_{tag}_high"] = hours / low
        out[f"inside_{tag}"] = hours / high <= published <= hours / low
        out[f"ratio_{tag}"] = published / hours
        if tag == "exposed":
            out["compute_s"], out["bubble_s"] = st.compute_s, st.bubble_s
            out["all_to_all_s"] = st.comm_by_group_s["ep"]
    return out


#: What DeepSeek-V3's step adds, in :func:`deepseek_v3_time_terms`' order: (label, step_time keywords).
DEEPSEEK_V3_TIME_TERMS = (
    ("1F1B, even split, all-to-all hidden", {}),
    ("+ DualPipe (its bubble; a rank does the mean of its two stages)", {"schedule": "dualpipe"}),
    ("+ the balanced split of the memory plan", {"stage_layers": True}),
    ("+ the MTP module (Sec. 2.2)", {"mtp_depth": 1}),
    ("+ 20 of 132 SMs kept for communication (Sec. 3.2.2)", {"comm_sms": 20}),
)


def deepseek_v3_time_terms():
    """DeepSeek-V3's pre-training GPU-hours explained bottom-up (issue 35), a DataFrame indexed by term
    (:data:`DEEPSEEK_V3_TIME_TERMS`), each row adding one thing the report states to the row above:
    ``step_s``, ``gpu_hours`` (14.8T tokens, 2,048 GPUs), ``ratio`` (the published 2.664M over it) and
    ``mfu``.
    Every row has the MoE terms of :mod:`llmsizing.moe_time` (grouped GEMMs by their rows, routing kernels,
    aux-loss-free load skew), FP8 (``fp8-deepseek``), node-limited routing and the all-to-all hidden
    (``ep_overlap=1``: Sec. 3.2.1, "fully hidden"). The last row is
    :func:`llmsizing.moe_runs.predict_moe_run`'s for the DeepSeek-V3 row; nothing in it is fitted."""
    import pandas as pd

    from .catalog import get_model
    from .layouts import step_time
    from .stages import published_stages

    ds = published_stages()
    row = ds[(ds["run"] == "DeepSeek-V3") & (ds["phase"] == "pre-training")].iloc[0]
    tokens, published = float(row["tokens"]), float(row["phase_gpu_hours"])
    m, kw, rows = get_model("deepseek-v3"), {}, {}
    for label, more in DEEPSEEK_V3_TIME_TERMS:
        kw |= more
        opts = {k: v for k, v in kw.items() if k != "stage_layers"}
        par = replace(DEEPSEEK_V3_LAYOUT, stage_layers=DEEPSEEK_V3_BALANCED_SPLIT) if kw.get("stage_layers") \
            else DEEPSEEK_V3_LAYOUT
        st = step_time(m, "H800", par, batch=1, seq=int(row["seq"]), grad_accum=DEEPSEEK_V3_MICRO_BATCHES,
                       precision="fp8-deepseek", ep_overlap=1.0, max_nodes=DEEPSEEK_V3_MAX_NODES, **opts)
        hours = tokens / st.tokens * st.step_s * par.gpus / 3600
        rows[label] = {"step_s": st.step_s, "compute_s": st.compute_s, "bubble_s": st.bubble_s,
                       "gpu_hours": hours, "ratio": published / hours, "mfu": st.mfu}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "term"
    df.attrs["published_gpu_hours"] = published
    return df


#: DeepSeek-V3's batch ramp (Sec. 4.2): the batch "gradually increased from 3072 to 15360" sequences "in the
#: training of the first 469B tokens": (sequences at the start, tokens of the ramp). The schedule between the
#: two ends is not published.
DEEPSEEK_V3_BATCH_RAMP = (3072, 469e9)


def deepseek_v3_batch_ramp() -> dict:
    """What DeepSeek-V3's batch ramp (:data:`DEEPSEEK_V3_BATCH_RAMP`) can add to its pre-training's GPU-hours,
    priced with every term of :func:`deepseek_v3_time_terms`' last row. A smaller batch means fewer
    micro-batches a step over which the pipeline's bubble and the step's fixed costs are spread (DualPipe's
    bubble does not shrink with them: the report's Table 2).

    Returns ``start_sequences`` and ``ramp_tokens`` (the report's), ``ramp_share`` (of the pre-training's
    tokens), ``min_sequences``, the smallest batch :data:`DEEPSEEK_V3_LAYOUT` runs under DualPipe with
    micro-batches of one sequence (``2 pp`` micro-batches per data-parallel rank), ``extra_per_token``, the
    GPU-hours per token at ``min_sequences`` over those at the full batch, minus 1, and ``run_extra_bound``,
    ``ramp_share x extra_per_token``: the most the ramp adds to the run from ``min_sequences`` up (every one
    of its tokens at ``min_sequences``). Below ``min_sequences`` the layout cannot run DualPipe, and the
    report does not say how the first steps ran: that part of the ramp is not modelled.
    :func:`~llmsizing.layouts.step_time` prices DualPipe by its closed-form bubble and does not refuse fewer
    micro-batches; :func:`~llmsizing.pipeline_schedule.pipeline_schedule` lays DualPipe out and does
    (DualPipe's own assertions)."""
    from .catalog import get_model
    from .layouts import step_time
    from .stages import published_stages

    ds = published_stages()
    row = ds[(ds["run"] == "DeepSeek-V3") & (ds["phase"] == "pre-training")].iloc[0]
    start, ramp_tokens = DEEPSEEK_V3_BATCH_RAMP
    kw: dict = {}
    for _, more in DEEPSEEK_V3_TIME_TERMS:
        kw |= more
    opts = {k: v for k, v in kw.items() if k != "stage_layers"}
    par = replace(DEEPSEEK_V3_LAYOUT, stage_layers=DEEPSEEK_V3_BALANCED_SPLIT)
    min_micro = 2 * par.pp

    def seconds_per_token(micro_batches):
        st = step_time(get_model("deepseek-v3"), "H800", par, batch=1, seq=int(row["seq"]),
                       grad_accum=micro_batches, precision="fp8-deepseek", ep_overlap=1.0,
                       max_nodes=DEEPSEEK_V3_MAX_NODES, **opts)
        return st.step_s / st.tokens

    extra = seconds_per_token(min_micro) / seconds_per_token(DEEPSEEK_V3_MICRO_BATCHES) - 1
    share = ramp_tokens / float(row["tokens"])
    return {"start_sequences": start, "ramp_tokens": ramp_tokens, "ramp_share": share,
            "min_sequences": min_micro * par.dp, "extra_per_token": extra, "run_extra_bound": share * extra}
