"""Serving: latency, throughput and cost per million tokens from the roofline (chapter 15, "Serving").

A request has two phases (Pope et al. 2022, "Efficiently Scaling Transformer Inference"; the jax-ml scaling
book's "All About Transformer Inference" chapter; LLM-Viewer, Yuan et al. 2024, "LLM Inference Unveiled"):

* **prefill** runs the whole prompt through the model at once. It does ``2 N`` FLOPs per prompt token (plus
  attention) and reads every weight once (the untied input embedding only in the rows its tokens gather), so
  its arithmetic intensity is about the number of prompt tokens: compute-bound on every catalogued GPU for
  prompts of a few hundred tokens. Its time is the time to first token (TTFT).
* **decode** produces one token per sequence per step. Each step reads every weight but the untied input
  embedding, of which it gathers one row per sequence (:func:`~llmsizing.inference.decode_weight_bytes_read`;
  vLLM's ``VocabParallelEmbedding`` is ``F.embedding``), and every cached K and V of the batch, and does
  ``2 N`` FLOPs per sequence: the intensity is about the batch size, far below the ridge point
  (:func:`llmsizing.hardware.ridge_point_flops_per_byte`) until the batch is in the hundreds. Its time per
  step is the inter-token latency (ITL).

Each phase's time is the larger of its two roofline bounds, each at an achieved fraction of the peak:
``bytes / (HBM bandwidth x MBU)`` and ``FLOPs / (dense peak x MFU)``, plus the tensor-parallel all-reduces
(Shoeybi et al. 2019: two per layer in the forward, each of the ``tokens x hidden`` activations in 16 bits)
at the link's one-way bandwidth plus a fixed latency per call. The library builds on chapter 3
(:func:`~llmsizing.inference.weights_bytes`, :func:`~llmsizing.inference.kv_cache_bytes_per_token`,
:func:`~llmsizing.inference.kv_cached_tokens`), chapter 6 (:func:`~llmsizing.hardware.dense_tflops`, the
decode roofline) and chapter 7 (:func:`~llmsizing.comm.ring_bytes`).

What an engine adds (issue 22; :mod:`llmsizing.serve_engine`):

* **KV capacity** as vLLM counts it (:func:`~llmsizing.serve_engine.kv_capacity_tokens`): 90% of the memory,
  minus the weights, the profiled activation peak of the largest prefill chunk, CUDA graphs and buffers, cut
  into 16-token blocks. It caps the batch (``kv_batch``), and so does the scheduler's ``max_num_seqs``
  (``max_batch`` is the smaller; issue 38). Before issue 22 all memory but 1 GiB held KV. A batch over
  ``max_batch`` runs that many at a time and queues the rest, in waves (issue 34: ``running_batch``,
  ``waves``, ``cycle_s``, ``last_ttft_s``; kv30: over the KV room too, ``running_bound`` naming the bound;
  :mod:`llmsizing.serve_replay` replays vLLM's preemptions against those waves).
* **Decode step**: the weights it reads (as above) once at ``mbu`` of the HBM bandwidth, each sequence's
  cached KV read at its own ``attention_bu``, the matmuls' FLOPs at ``mfu`` (the larger of memory and
  compute), a fixed ``step_overhead_s`` (scheduling, sampling, launches) and the tensor-parallel all-reduces
  priced by the network model (:func:`llmsizing.network.collective_time_s` on
  :func:`~llmsizing.network.group_link`), two per layer of ``batch x hidden x 2`` bytes, with NCCL's choice of
  protocol per message size (``collective_time_s(..., protocols=True)``: a 128-token prefill's 2 MiB
  all-reduces sit at the knee the single alpha-beta line misses). Before, the step was
  ``max(bytes / (B x 0.8), FLOPs / (P x 0.5))`` and each all-reduce cost a fixed 10 us.
* **Chunked prefill**: a prompt is prefilled in chunks of ``max_num_batched_tokens`` tokens that ride along
  with the decode steps, so under load each running sequence's ITL carries the other sequences' prefills
  (``itl_s``), and a step that carries a full chunk costs more (``chunk_step_s``).
* The four constants (``mbu``, ``attention_bu``, ``step_overhead_s``, ``mfu``) are fitted on published figures
  (``data/serving_model.csv``, ``tools/calibrate_serving.py``, :mod:`llmsizing.serve_calibration`), and the
  80% range stated for a prediction (:func:`~llmsizing.serve_calibration.serving_range`) is measured by
  leaving one source out at a time (issue 34). The step overhead is fitted per engine and batching era
  (``engine=``); the default engine is vLLM, and every result names its engine. :func:`replicas_range` gives
  the GPU count at both ends of the range.
* **Grouped-query attention in decode**: a kernel that reads each KV head once for its group of query heads
  (``attention_kernel="grouped"``, the default), or once per query head (``"per-query-head"``: ``heads /
  kv_heads`` times the KV bytes, as TensorRT-LLM 0.5 and 0.6.1 did before its XQA kernel).

* **Pipeline-parallel serving** (``pp=``, vLLM's ``--pipeline-parallel-size``): stages of ``tp`` GPUs each
  hold their layers' weights and KV cache; decode keeps ``pp`` micro-batches in flight and a token's pass
  crosses the ``pp - 1`` stage boundaries; a long prompt's prefill chunks flow through the stages (see
  :func:`serving`).

The replica's step model (:class:`Serving`, :func:`serving` and the calibrated constants) lives in
:mod:`llmsizing.serve_step`, and every name of it still imports from here; this module adds what a load needs:
:func:`serving_sweep`, :func:`replicas_for` and :func:`serving_cost_by_gpu`.

Queueing, percentiles, headroom, prefix caching and disaggregated pools: :mod:`llmsizing.serve_fleet` (issue
37), through :func:`replicas_for`'s keywords. Speculative decoding: :mod:`llmsizing.speculative`. Taught in
chapter 15.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._compat import retire as _retire
from ._validate import check_bool, check_int, check_number, check_sequence
from .all_to_all import all_to_all_s  # noqa: F401 (in __all__)
from .catalog import get_gpu, list_gpus, resolve_gpus, resolve_model
from .model import Model
from .parallel import check_layout
from .serve_engine import kv_capacity_tokens  # noqa: F401 (in __all__)
from .serve_moe import check_ep
from .serve_search import (_TIMES, ServingPlan, _cut, _explain, _largest_batch, at_speed,  # noqa: F401
                           load_of, prefill_share, valid_tps, with_ends, with_prefix_cache,
                           within_kept_servings)
# The step model lives one level down, in serve_step (issue 32); every name it had here still imports
# from here.
from .serve_step import (ACTIVATION_BYTES, ALLREDUCE_LATENCY_S, ATTENTION_BU_DEFAULT,  # noqa: F401
                         ATTENTION_KERNELS, ENGINE_STEP_OVERHEAD_S, ENGINES, ERA_STEP_OVERHEAD_S, KV_FORMATS,
                         MBU_DEFAULT, MFU_DEFAULT, RANGE_HIGH, RANGE_LOW, RETIRED, STEP_OVERHEAD_S,
                         WEIGHT_FORMATS, _FIT, Serving, _allreduce_s, _kv_reads, serving)

_serving = serving

#: The tensor-parallel degrees :func:`replicas_for` tries: within one 8-GPU node.
TP_CHOICES = (1, 2, 4, 8)


def serving_sweep(model: Model | str, gpu, *, batches=None, **kwargs) -> list[Serving]:
    """:func:`serving` at each batch in ``batches`` (default: powers of two up to ``max_batch``, the KV room
    capped at ``max_num_seqs``, and that limit itself). Used by the chapter's latency/throughput curve.
    Taught in chapter 15."""
    first = serving(model, gpu, batch=1, **kwargs)
    if batches is None:
        top = max(first.max_batch, 1)
        batches = sorted({2**i for i in range(int(math.log2(top)) + 1)} | {top})
    else:
        batches = sorted({check_int("batches[i]", b) for b in check_sequence("batches", batches,
                                                                          example="[1, 8, 64]")})
    return [serving(model, gpu, batch=b, **kwargs) for b in batches]


@dataclass(frozen=True)
class DecodeKVIntensity:
    """What a decode step's KV cache alone gives in FLOPs per byte (:func:`decode_kv_intensity`)."""

    model: str
    context: int                   # the step's mean context, tokens
    flops_per_byte: float          # the step's FLOPs over the KV bytes it reads, per GPU
    formula_flops_per_byte: float  # 2N / (M_tok s): chapter 15's I_decode as the batch grows without end


def decode_kv_intensity(s: Serving, model: Model | str | None = None) -> DecodeKVIntensity:
    """The arithmetic intensity a decode step's KV cache allows: each sequence adds its FLOPs and its own
    cache to the step, so however large the batch the step's intensity stays below the FLOPs per KV byte.

    ``flops_per_byte`` is ``s``'s decode FLOPs per GPU over the KV-cache bytes the step reads per GPU
    (``decode_kv_bytes_per_gpu``: the cache at the step's mean context, and a hybrid's state; the weights
    excluded). ``formula_flops_per_byte`` is the limit of chapter 15's roofline formula
    ``I = 2 N b / (2 N + b M_tok s)`` as ``b`` grows: ``2 N / (M_tok s)``, ``N`` the parameters a token uses
    (:attr:`~llmsizing.model.Model.active_params`), ``M_tok`` the KV bytes per cached token of the whole
    model (:func:`~llmsizing.inference.kv_cache_bytes_per_token`) and ``s`` the cached tokens at the mean
    context (:func:`~llmsizing.inference.kv_cached_tokens`). The formula counts the embedding table as
    multiplied and leaves out attention's FLOPs, so it differs from the step's figure by a few percent
    (Llama-3-8B at 1,152 tokens: 106 against 103). Per GPU, a latent cache that tensor parallelism does not
    split (multi-head latent attention) or expert parallelism moves the step's figure away from the whole
    model's formula. Pope et al. (2022), Sec. 3; jax-ml scaling book,
    "All About Transformer Inference". ``model`` defaults to the catalogue's model of ``s.model``; pass it for
    a model made by hand. Chapter 15."""
    from .inference import kv_cache_bytes_per_token, kv_cached_tokens

    if not isinstance(s, Serving):
        raise TypeError(f"s must be a Serving result (llmsizing.serve.serving(...)), got {type(s).__name__}")
    m = resolve_model(s.model if model is None else model, moe=True)
    kv_seq = kv_cache_bytes_per_token(m, s.kv_cache) * kv_cached_tokens(m, s.decode_context)
    if s.decode_kv_bytes_per_gpu <= 0 or kv_seq <= 0:
        raise ValueError(f"model: {m.name} keeps no KV cache a decode step reads, so no intensity of the KV "
                         "cache alone exists")
    return DecodeKVIntensity(m.name, s.decode_context, s.decode_flops_per_gpu / s.decode_kv_bytes_per_gpu,
                             2 * m.active_params / kv_seq)


@within_kept_servings        # (each distinct replica priced once per search: serve_search.kept_servings)
def replicas_for(model: Model | str, gpu, *, requests_per_s: float | None = None, users: int | None = None,
                 prompt: int = 1024, output: int = 256, ttft_s: float = 1.0, itl_s: float = 0.05,
                 tps=TP_CHOICES, think_s: float = 0.0, percentile: float | None = None,
                 occupancy: float | None = None, disaggregated: bool = False, prefix_hit: float = 0.0,
                 output_cv: float = 1.0, with_range: bool = True, **kwargs) -> ServingPlan:
    """The fewest GPUs that serve a load within a latency target, and the layout that does it.

    The load is either ``users`` or ``requests_per_s``, and both go through Little's law (issue 22). A request
    holds a batch slot for ``R = ttft_s + output x itl_s`` seconds of the layout (:attr:`Serving.request_s`:
    ITL under load carries the other sequences' chunked prefills), so a rate ``lambda`` keeps ``lambda x R``
    requests running, and each replica runs at most ``batch`` of them: ``replicas = ceil(lambda x R / batch)``
    (never fewer than ``lambda`` over what a replica completes per second, :attr:`Serving.requests_per_s`).
    ``users`` who each send a request as soon as the last one ends, after ``think_s`` seconds of thinking, are
    the rate ``lambda = users / (R + think_s)`` (so with no thinking, ``users`` running requests). The plan
    reports that rate, and the same rate given as ``requests_per_s`` needs no more GPUs. Before issue 22 users
    were ``ceil(users / batch)`` replicas with no prefill budgeted.

    For each ``tp`` in ``tps`` that the model allows, the largest batch meeting ``ttft_s`` and ``itl_s`` and
    within :attr:`Serving.max_batch` (the KV room, capped at the engine's ``max_num_seqs``: keyword
    ``max_num_seqs``, default vLLM's on the GPU; issue 38) is found by bisection (both latencies never fall
    as the batch grows); the layout with the fewest GPUs wins, ties going to the lower ITL. Other keywords
    go to :func:`serving` (``weights``, ``kv_cache``, ``mbu``, ``mfu``, ``pp``, ``max_num_seqs``, ...); with
    ``pp`` pipeline stages each replica is ``tp x pp`` GPUs. When no layout meets the target, raises
    ``ValueError`` saying which tp does not fit and what came closest. A mixture of experts is served with
    every expert resident (:func:`serving`); with ``ep=`` each replica is ``ep`` GPUs and only the ``tps``
    that divide ``ep`` are tried.

    The mean answer carries ``gpus_low``/``gpus_high`` (unless ``with_range=False``): the GPUs the same load
    needs at the fast and slow ends of the stated 80% range of the engine's speed, exactly the ``gpus_low``
    and ``gpus_high`` of :func:`replicas_range` (issue 38; before, only a percentile answer had them), and
    ``fleet_usd_per_million_output_tokens_low``/``_high``, what those two fleets cost per million output
    tokens (:func:`~llmsizing.serve_search.with_ends`: the low is the fast end's). Latencies are stated on
    this fleet instead (issue 34): ``request_s_low``/``_high`` and ``requests_per_s_low``/``_high`` (and a
    percentile plan's ``ttft_p_s_...`` and ``itl_p_s_...``) are what users would see on the plan's own fleet
    with the engine at either end of the range (:func:`~llmsizing.serve_fleet.on_fleet`).

    Issue 37 (:mod:`llmsizing.serve_fleet`; old calls unchanged): ``percentile=95`` sizes for the 95th
    percentile TTFT and ITL under Poisson arrivals, with the slots filled to at most ``occupancy`` (default
    :data:`~llmsizing.serve_fleet.OCCUPANCY_CEILING`, 0.8; ``percentile=50`` with no ceiling is the mean
    answer above), output lengths of coefficient of variation ``output_cv``; the plan then carries
    ``ttft_p_s``, ``itl_p_s``, ``wait_p_s``, ``occupancy`` and the range as above. ``disaggregated=True``
    sizes separate prefill and decode pools (``prefill_gpus``, ``decode_gpus``, ``kv_transfer_s``).
    ``prefix_hit`` is the share of each prompt found in a prefix cache (its prefill skipped:
    :func:`prefill_share`). Taught in chapter 15.
    """
    m = resolve_model(model, moe=True)
    g = get_gpu(gpu)
    rps, users, think = load_of(requests_per_s, users, think_s)
    ttft_s = check_number("ttft_s", ttft_s, allow_equal=False)
    itl_s = check_number("itl_s", itl_s, allow_equal=False)
    disaggregated = check_bool("disaggregated", disaggregated)
    with_range = check_bool("with_range", with_range)
    valid, pp, ep = valid_tps(m, tps, kwargs)
    if prefix_hit:
        kwargs = dict(kwargs, _prefill_share=prefill_share(m, prompt, prefix_hit))
    if percentile is not None or disaggregated or occupancy is not None:
        from .serve_fleet import fleet_plan
        return fleet_plan(m, g, rps, users, think, dict(kwargs, prompt=prompt, output=output), ttft_s, itl_s,
                          valid, percentile=percentile, occupancy=occupancy, disaggregated=disaggregated,
                          output_cv=output_cv, prefix_hit=prefix_hit, with_range=with_range)
    kwargs = dict(kwargs, prompt=prompt, output=output)

    def search(kw):
        best, firsts = None, []
        for t in valid:
            s, one = _largest_batch(m, g, t, ttft_s, itl_s, kw)
            firsts.append(one)
            if s is None:
                continue
            rate = rps if users is None else users / (s.request_s + think)
            # Little's law: rate x R requests in flight, batch per replica; and no more than a replica
            # completes. Any load, however small, needs one replica (it rounds up to 1, never 0).
            replicas = max(1, math.ceil(_cut(rate * s.request_s / s.batch)),
                           math.ceil(_cut(rate / s.requests_per_s)))
            plan = ServingPlan(replicas * s.gpus, t, s.batch, replicas, s, rate, users)
            if best is None or (plan.gpus, s.itl_s) < (best.gpus, best.serving.itl_s):
                best = plan
        return best, firsts

    best, firsts = search(kwargs)
    if best is None:
        raise ValueError(_explain(m, g, ttft_s, itl_s, firsts))
    if not with_range or "_speed" in kwargs:        # (an end of the range itself: no range of its own)
        return best
    # the stated 80% range of the engine's speed, as replicas_range and the percentile answer give it
    from .serve_calibration import _range_of

    speeds = _range_of(True, "itl_s")
    ends = [search(dict(kwargs, _speed=speed))[0] for speed in speeds[::-1]]
    # and what users would see on this fleet at each end (issue 34: request time and rate, on this fleet)
    from .serve_fleet import on_fleet_ends
    return with_ends(best, *ends, on_fleet_ends(best, speeds, think_s=think, output_cv=output_cv))


@dataclass(frozen=True)
class ServingPlanRange:
    """What :func:`replicas_range` found: the central plan and the plans at the fast and slow ends of the
    stated 80% range of the engine's speed (``gpus_low``, ``gpus_high``); ``engine`` names the engine."""

    central: ServingPlan
    fast: ServingPlan
    slow: ServingPlan
    speed_low: float
    speed_high: float
    engine: str
    coverage: float

    @property
    def gpus(self) -> int:
        return self.central.gpus

    @property
    def gpus_low(self) -> int:
        return self.fast.gpus

    @property
    def gpus_high(self) -> int:
        return self.slow.gpus


def replicas_range(model: Model | str, gpu, **kwargs) -> ServingPlanRange:
    """:func:`replicas_for` at the central prediction and at both ends of the stated 80% range of a per-token
    figure (:func:`~llmsizing.serve_calibration.serving_range`): an engine ``speed_low`` times as fast as the
    model (every step ``1 / speed_low`` times as long, :func:`at_speed`) needs ``gpus_high`` GPUs, one
    ``speed_high`` times as fast ``gpus_low``. The range is the calibrated engines' (the default engine,
    vLLM, or ``engine=``). Raises like :func:`replicas_for` when even the central plan cannot meet the
    target; an end that cannot gives None. Chapter 15."""
    from .serve_calibration import COVERAGE, _range_of

    lo, hi = _range_of(True, "itl_s")
    central = replicas_for(model, gpu, **kwargs)
    ends = []
    for speed in (hi, lo):
        try:
            ends.append(replicas_for(model, gpu, **dict(kwargs, with_range=False, _speed=speed)))
        except ValueError:
            ends.append(None)
    return ServingPlanRange(central, ends[0], ends[1], lo, hi, central.serving.engine, COVERAGE)


def _dtype_note(g, kwargs) -> str:
    """"" or, for a GPU without BF16 asked to compute in bf16, a note that it computes in fp16."""
    compute = kwargs.get("compute", "bf16")
    if compute == "bf16" and not g.has_bf16:
        return f"computes in fp16 (the {g.name} has no bf16)"
    return ""


def _speed_ends() -> tuple[tuple[float, float], tuple[float, float]]:
    """The stated 80% range of a calibrated engine's speed over the model's, ``(low, high)``, for per-token
    figures and for the TTFT (:func:`~llmsizing.serve_calibration.serving_range`'s own pairs,
    ``data/serving_intervals.csv``). Every engine :func:`serving` accepts by name is calibrated."""
    from .serve_calibration import _range_of

    return _range_of(True, "itl_s"), _range_of(True, "ttft_s")


#: The figures of a :class:`Serving` that carry the stated range (:func:`serving_ends`), each with the range
#: it takes ("itl": the per-token figures', "ttft": the TTFT's) and how the speed enters it ("time": divided
#: by the speed, "rate": multiplied, "cost": a price over a rate, divided, so its low is at the speed's high).
RANGED_FIGURES = {"itl_s": ("itl", "time"), "decode_step_s": ("itl", "time"), "ttft_s": ("ttft", "time"),
                  # a decode step that carries a prefill chunk: the worst ITL a running sequence sees
                  # (srvcurve34: chapter 15's prose quotes it beside the loaded ITL)
                  "chunk_step_s": ("itl", "time"),
                  # a queued batch's whole time and its last request's first token (issue 34,
                  # srvqueue34): sums of whole engine steps, prefill and decode, each of which the speed
                  # divides, so a sum takes the steps' range, as replicas_range's whole plan does; the cap and
                  # the KV room set the waves, not the speed, so both ends keep them (the TTFT's pair is the
                  # same pooled row today)
                  "cycle_s": ("itl", "time"), "last_ttft_s": ("itl", "time"),
                  # churn35: the waves alone (cycle_s before the churn) and the churn itself, the tokens
                  # vLLM's preemptions compute twice, priced as prefill riding along decode steps
                  # (interleave_s, as itl_s carries the others' prefills): the same steps' range. cohort36:
                  # cycle_s over the KV room is the cohort run's steps (not waves_s + churn_s), the same
                  # steps' range again. None (not counted) stays None at both ends
                  "waves_s": ("itl", "time"), "churn_s": ("itl", "time"),
                  # ttft35: the waves' last first token (last_ttft_s over the KV room is vLLM's admission,
                  # from the churn's cohort run): sums of the same steps
                  "waves_last_ttft_s": ("itl", "time"),
                  "output_tokens_per_s": ("itl", "rate"), "output_tokens_per_s_per_gpu": ("itl", "rate"),
                  "usd_per_million_output_tokens": ("itl", "cost"),
                  # the prompt's prefill is the TTFT's time, so the input price takes the TTFT's range
                  "usd_per_million_input_tokens": ("ttft", "cost")}


def serving_ends(s: Serving | None, names=None) -> dict:
    """The stated 80% range of each figure of ``s`` named in ``names`` (default: every one of
    :data:`RANGED_FIGURES`), as ``{"<name>_low": ..., "<name>_high": ...}``: the same layout and batch at both
    ends of the range :func:`~llmsizing.serve_calibration.serving_range` states for a calibrated engine's
    speed over the model's, ``RANGE_LOW``-``RANGE_HIGH`` (``data/serving_intervals.csv``; the TTFT's own pair
    for ``ttft_s`` and the input price), never a range of its own. A time is divided by the speed and a rate
    multiplied; a cost per token is the price over the speed, so its low is the price over the speed's
    high: ``usd_low = usd / RANGE_HIGH``, ``usd_high = usd / RANGE_LOW``. Worked, Llama-3-8B on one H100 at
    batch 1 (1,024 + 256 tokens, ITL 7.205 ms) with the stored 0.772-1.309: 7.205 / 1.309 = 5.504 ms and
    7.205 / 0.772 = 9.333 ms. The slow end keeps the layout, so its ITL may miss a latency target the point
    met (a GPU count searched again at each end: :func:`replicas_range`). NaN at both ends when ``s`` is None
    (no layout); None at both ends of a figure that is None (``churn_s`` where the churn cannot be counted).
    ``cycle_s`` and ``churn_s`` count the KV preemptions' churn (up to 1.5 s on first use, churn35): a caller
    that must stay fast names the figures it needs (``waves_s`` never counts it).

    ``s`` may also be a speculative-decoding result (:class:`~llmsizing.speculative.Speculative`, issue 34):
    its figures are :data:`llmsizing.speculative.RANGED_FIGURES` (the steps, the round, the ITL and tokens/s,
    speculative and plain), which the same speed divides alike because every one of its steps is priced with
    this model's fitted constants and no fitted term of its own (that table's comment says where the two
    models differ and by how much). Its speed-up, cost ratio and tokens per round are refused: the speed
    cancels in the first two, and the third is the acceptance rate's. Issue 34; chapter 15."""
    figures = RANGED_FIGURES
    if s is not None and not isinstance(s, Serving):
        figures = getattr(s, "ranged_figures", None)        # (a Speculative result names its own figures)
        if not isinstance(figures, dict):
            raise TypeError("s must be a Serving result (llmsizing.serve.serving(...)), a Speculative one "
                            "(llmsizing.speculative.speculative_decoding(...)) or None, got "
                            f"{type(s).__name__}")
    names = tuple(figures) if names is None else names
    bad = [n for n in names if n not in figures]
    if bad:
        raise ValueError(f"names: {bad[0]!r} carries no stated range; allowed: {', '.join(figures)}")
    if s is None:
        return {f"{n}_{end}": math.nan for n in names for end in ("low", "high")}
    ends = dict(zip(("itl", "ttft"), _speed_ends()))
    out = {}
    for n in names:
        (lo, hi), how = ends[figures[n][0]], figures[n][1]
        v = getattr(s, n)
        if v is None:                          # (a churn that cannot be counted: Serving.churn_s None)
            out[f"{n}_low"] = out[f"{n}_high"] = None
            continue
        out[f"{n}_low"], out[f"{n}_high"] = (v * lo, v * hi) if how == "rate" else (v / hi, v / lo)
    return out


#: The columns of :func:`serving_cost_by_gpu` that carry a stated range (``_low``/``_high``).
_COST_RANGED = ("itl_s", "ttft_s", "output_tokens_per_s_per_gpu", "usd_per_million_output_tokens",
                "usd_per_million_input_tokens")


def _range_columns(s: Serving | None) -> dict:
    """The low/high columns of :func:`serving_cost_by_gpu` for the layout ``s`` (NaN when there is none):
    :func:`serving_ends` on its five ranged columns."""
    return serving_ends(s, _COST_RANGED)


def serving_cost_by_gpu(model: Model | str, *, gpus=None, prompt: int = 1024, output: int = 256,
                        ttft_s: float = 1.0, itl_s: float = 0.05, tps=TP_CHOICES, **kwargs):
    """Cost per million output and input tokens on each GPU type (default: the catalogue), at the cheapest
    layout (tp, batch) that meets ``ttft_s`` and ``itl_s``: for each tp the largest batch that meets them
    (:func:`replicas_for`'s search), then the lowest cost per output token. A GPU where no layout meets the
    target gets NaN figures and the reason. Prices are the catalogue's (on-demand, dated: ``price_as_of``, a
    GPU's own date, since providers and days differ; ``price_kind`` says which are estimates, not to be ranked
    as list prices: issue 38). A GPU without BF16
    (the V100) computes in FP16 at its FP16 rate when ``compute`` is ``"bf16"``
    (:func:`~llmsizing.hardware.dense_tflops`),
    and its ``note`` says so. A mixture of experts is accepted (:func:`serving`; ``ep=`` too).

    Each figure's stated 80% range (issue 34) is in ``<column>_low`` and ``<column>_high`` (``itl_s``,
    ``ttft_s``, ``output_tokens_per_s_per_gpu``, ``usd_per_million_output_tokens``,
    ``usd_per_million_input_tokens``): the same layout and batch at both ends of the range
    :func:`~llmsizing.serve_calibration.serving_range` states for the engine's speed over the model's,
    ``RANGE_LOW``-``RANGE_HIGH`` (``data/serving_intervals.csv``, measured by leaving one source out), never a
    range of its own. A cost per token is the price over the speed, so its low is the price over the speed's
    high: ``usd_low = usd / RANGE_HIGH`` and ``usd_high = usd / RANGE_LOW``; a time the same way, a rate
    times the speed's ends. The input price takes the TTFT's range (the prefill is its time). Worked, for
    Llama-3-70B at 1,024 in / 256 out, ITL <= 50 ms on H100 SXM (tp=4, batch 81, $1.449 per million output
    tokens) with the stored range 0.772-1.309: $1.449 / 1.309 = $1.107 and $1.449 / 0.772 = $1.877. At the
    slow end the ITL is ``itl_s / RANGE_LOW``, which may exceed ``itl_s``: the range is the stated spread of
    this layout's figures, not the cost of another layout that would still meet the target (for a GPU count
    that does search again at each end, see :func:`replicas_range`). Chapter 15."""
    import pandas as pd

    m = resolve_model(model, moe=True)
    gpu_list = resolve_gpus(list_gpus() if gpus is None else gpus, example='["H100 SXM", "B200"]')
    ttft_s = check_number("ttft_s", ttft_s, allow_equal=False)
    itl_s = check_number("itl_s", itl_s, allow_equal=False)
    tps = sorted({check_int("tps[i]", t, maximum=1024) for t in check_sequence("tps", tps, example="(1, 8)")})
    ep = check_ep(m, kwargs.get("ep", 1), 1, kwargs.get("pp", 1))
    kwargs = dict(kwargs, prompt=prompt, output=output)
    rows = []
    for g in gpu_list:
        found = []
        for t in tps:
            try:
                check_layout(m, tp=t)
            except ValueError:
                continue
            if ep > 1 and ep % t:
                continue
            s, _ = _largest_batch(m, g, t, ttft_s, itl_s, kwargs)
            if s is not None:
                found.append(s)
        if found:
            s = min(found, key=lambda s: s.usd_per_million_output_tokens)
            rows.append({"gpu": g.name, "tp": s.tp, "batch": s.batch, "itl_s": s.itl_s, "ttft_s": s.ttft_s,
                         "output_tokens_per_s_per_gpu": s.output_tokens_per_s_per_gpu,
                         "price_usd_per_gpu_hour": s.price_usd_per_gpu_hour, "price_kind": g.price_kind,
                         "price_as_of": g.price_as_of or g.as_of,
                         "usd_per_million_output_tokens": s.usd_per_million_output_tokens,
                         "usd_per_million_input_tokens": s.usd_per_million_input_tokens,
                         "note": _dtype_note(g, kwargs), **_range_columns(s)})
        else:
            rows.append({"gpu": g.name, "tp": None, "batch": None, "itl_s": math.nan, "ttft_s": math.nan,
                         "output_tokens_per_s_per_gpu": math.nan,
                         "price_usd_per_gpu_hour": g.price_usd_per_gpu_hour, "price_kind": g.price_kind,
                         "price_as_of": g.price_as_of or g.as_of,
                         "usd_per_million_output_tokens": math.nan, "usd_per_million_input_tokens": math.nan,
                         "note": "; ".join(x for x in ("no layout meets the target",
                                                       _dtype_note(g, kwargs)) if x),
                         **_range_columns(None)})
    return pd.DataFrame(rows).set_index("gpu")


#: Workload presets (issue 37): prompt and output tokens. ``reasoning`` is a reasoning model's long answer:
#: DeepSeek-R1 (arXiv:2501.12948) reports responses that grow past 10,000 tokens during its RL training and
#: evaluates with a 32,768-token generation limit; :data:`REASONING_OUTPUTS` spans 4K to 32K.
WORKLOADS = {"chat": dict(prompt=1024, output=256), "reasoning": dict(prompt=1024, output=8192),
             "reasoning-long": dict(prompt=1024, output=32768)}
#: The columns of :func:`reasoning_cost` that carry a stated range (``_low``/``_high``).
_REASONING_RANGED = ("itl_s", "answer_min", "usd_per_million_output_tokens", "usd_per_answer")
#: Output lengths :func:`reasoning_cost` prices by default.
REASONING_OUTPUTS = (4096, 8192, 16384, 32768)


def reasoning_cost(model: Model | str, gpu, *, outputs=REASONING_OUTPUTS, prompt: int = 1024,
                   ttft_s: float = 2.0, itl_s: float = 0.05, tps=TP_CHOICES, **kwargs):
    """Cost per million output tokens of a reasoning workload at each output length in ``outputs``: the
    cheapest layout meeting ``itl_s`` and ``ttft_s`` (:func:`serving_cost_by_gpu`'s search on one GPU type),
    with the batch it reaches, ``max_batch`` (the KV room, capped at ``max_num_seqs``), the minutes an answer
    takes and its price. Long answers hold their KV cache for thousands of steps: the batch falls with the
    output, and the cost per token rises.

    ``itl_s``, ``answer_min``, ``usd_per_million_output_tokens`` and ``usd_per_answer`` each carry their
    stated 80% range in ``_low`` and ``_high`` columns, from the same range of the engine's speed as
    :func:`serving_cost_by_gpu`'s (``RANGE_LOW``-``RANGE_HIGH``,
    :func:`~llmsizing.serve_calibration.serving_range`): the cost per token is the price over the speed, so
    its low is ``usd / RANGE_HIGH`` and its high ``usd / RANGE_LOW``; an answer's minutes are its TTFT and its
    ``output x itl_s`` at their ends of the range (the TTFT's and the per-token figures'), added. Worked, for
    Llama-3-70B in fp8 on H100 SXM at 4,096 output tokens ($0.9373 per million): $0.9373 / 1.309 = $0.716
    and $0.9373 / 0.772 = $1.214. Chapter 15."""
    import pandas as pd

    outs = [check_int("outputs[i]", o) for o in check_sequence("outputs", outputs, example="(4096, 32768)")]
    g = get_gpu(gpu)
    rows = []
    for o in outs:
        r = serving_cost_by_gpu(model, gpus=[g], prompt=prompt, output=o, ttft_s=ttft_s, itl_s=itl_s, tps=tps,
                                **kwargs).iloc[0]
        if r["tp"] is None or r["tp"] != r["tp"]:
            rows.append({"output": o, "tp": None, "batch": None, "max_batch": None, "itl_s": math.nan,
                         "answer_min": math.nan, "usd_per_million_output_tokens": math.nan,
                         "usd_per_answer": math.nan,
                         **{f"{n}_{end}": math.nan for n in _REASONING_RANGED for end in ("low", "high")}})
            continue
        s = serving(model, g, tp=int(r["tp"]), batch=int(r["batch"]), prompt=prompt, output=o, **kwargs)
        usd = s.usd_per_million_output_tokens
        e = serving_ends(s, ("itl_s", "ttft_s", "usd_per_million_output_tokens"))
        rows.append({"output": o, "tp": s.tp, "batch": s.batch, "max_batch": s.max_batch, "itl_s": s.itl_s,
                     "answer_min": s.request_s / 60, "usd_per_million_output_tokens": usd,
                     "usd_per_answer": usd * o / 1e6,
                     # the stated range (serving_range's, through serving_ends): an answer's minutes and
                     # price at the ends of its TTFT, ITL and price per token
                     **{f"{n}_{x}": e[f"{n}_{x}"] for n in ("itl_s", "usd_per_million_output_tokens")
                        for x in ("low", "high")},
                     **{f"answer_min_{x}": (e[f"ttft_s_{x}"] + o * e[f"itl_s_{x}"]) / 60
                        for x in ("low", "high")},
                     **{f"usd_per_answer_{x}": e[f"usd_per_million_output_tokens_{x}"] * o / 1e6
                        for x in ("low", "high")}})
    return pd.DataFrame(rows).set_index("output")


# Issue 22 moved published_serving to serve_calibration, which imports the step model from serve_step; the old
# name still works for one release, with a DeprecationWarning (issue 32: no import runs back up to it).
__getattr__ = _retire(__name__, RETIRED, moved={"published_serving": "llmsizing.serve_calibration"})

__all__ = ["all_to_all_s", "Serving", "serving", "serving_sweep", "DecodeKVIntensity", "decode_kv_intensity",
           "ServingPlan", "replicas_for",
           "prefill_share", "with_prefix_cache", "WORKLOADS", "REASONING_OUTPUTS", "reasoning_cost",
           "ServingPlanRange", "replicas_range", "at_speed", "serving_cost_by_gpu", "serving_ends",
           "RANGED_FIGURES", "MBU_DEFAULT",
           "MFU_DEFAULT",
           "ALLREDUCE_LATENCY_S", "WEIGHT_FORMATS", "KV_FORMATS", "ATTENTION_BU_DEFAULT", "STEP_OVERHEAD_S",
           "ENGINE_STEP_OVERHEAD_S", "ERA_STEP_OVERHEAD_S", "ENGINES", "ATTENTION_KERNELS",
           "RANGE_LOW", "RANGE_HIGH", "kv_capacity_tokens"]
