"""What every GPU count for a load is built on (chapter 15, "How many GPUs for a load"; issue 37): the plan
:func:`llmsizing.serve.replicas_for` returns (:class:`ServingPlan`), a replica priced at another engine speed
(:func:`at_speed`), or with part of each prompt found in a prefix cache (:func:`with_prefix_cache`), and the
search for the largest batch that meets a latency target. :mod:`llmsizing.serve` (the mean answer) and
:mod:`llmsizing.serve_fleet` (percentiles, headroom, disaggregated pools) both build on it; every name here
still imports from :mod:`llmsizing.serve`.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, replace

from ._validate import check_fraction, check_int, check_number, check_sequence
from .flops import forward_flops_per_token
from .parallel import check_layout
from .serve_moe import check_ep
from .serve_step import Serving
from .serve_step import serving as _serving

@dataclass(frozen=True)
class ServingPlan:
    """What :func:`replicas_for` found: ``replicas`` copies of a ``tp``-GPU replica, each at ``batch``."""

    gpus: int
    tp: int
    batch: int
    replicas: int
    serving: Serving
    requests_per_s: float | None
    users: int | None
    # issue 37 (None unless asked for): the percentile sized for, the slot occupancy reached and its ceiling,
    # the predicted percentile latencies and wait for a slot, the GPU count at both ends of the stated range
    # (set by default, for the mean answer too since issue 38; None with with_range=False or where an end
    # meets no target), and the two pools of a disaggregated plan with the KV transfer between them
    percentile: float | None = None
    occupancy: float | None = None
    occupancy_ceiling: float | None = None
    ttft_p_s: float | None = None
    itl_p_s: float | None = None
    wait_p_s: float | None = None
    gpus_low: int | None = None
    gpus_high: int | None = None
    prefix_hit: float = 0.0
    prefill_gpus: int | None = None
    decode_gpus: int | None = None
    prefill_replicas: int | None = None
    prefill_serving: Serving | None = None
    kv_transfer_s: float | None = None
    # issue 34: what the fleets at the two ends of the stated range (gpus_low, gpus_high) cost per million
    # output tokens; the low is the fast end's (with_ends). None where gpus_low / gpus_high is.
    fleet_usd_per_million_output_tokens_low: float | None = None
    fleet_usd_per_million_output_tokens_high: float | None = None
    # issue 34 (ranges34): what users see on THIS fleet (the same replicas, layout and batch) when the
    # engine runs at the fast or the slow end of the stated range (serve_fleet.on_fleet_ends): the percentile
    # TTFT and ITL (None for the mean answer, which has none), a request's time and the request rate (a
    # closed loop's users ask less often from a slower engine; a rate given stays). low/high in numeric
    # order: the fast end's times and the slow end's rate are the lows. math.inf where that end's queue grows
    # without bound.
    ttft_p_s_low: float | None = None
    ttft_p_s_high: float | None = None
    itl_p_s_low: float | None = None
    itl_p_s_high: float | None = None
    request_s_low: float | None = None
    request_s_high: float | None = None
    requests_per_s_low: float | None = None
    requests_per_s_high: float | None = None

    @property
    def capacity_requests_per_s(self) -> float:
        return self.replicas * self.serving.requests_per_s

    @property
    def usd_per_hour(self) -> float:
        return self.gpus * self.serving.price_usd_per_gpu_hour

    @property
    def fleet_usd_per_million_output_tokens(self) -> float:
        """What the whole fleet (both pools of a disaggregated plan) costs per million output tokens at the
        load it was sized for: ``usd_per_hour / (requests_per_s x output x 3600) x 1e6``."""
        return self.usd_per_hour / (self.requests_per_s * self.serving.output * 3600) * 1e6

    def to_frame(self):
        import pandas as pd

        s = self.serving
        rows = {"engine": s.engine, "gpu": s.gpu, "gpus": self.gpus, "tp": self.tp, "pp": s.pp, "ep": s.ep,
                "replicas": self.replicas, "batch": self.batch,
                "requests_per_s": self.requests_per_s, "ttft_s": s.ttft_s, "itl_s": s.itl_s,
                "output_tokens_per_s_per_gpu": s.output_tokens_per_s_per_gpu,
                "capacity_requests_per_s": self.capacity_requests_per_s, "usd_per_hour": self.usd_per_hour,
                "usd_per_million_output_tokens": s.usd_per_million_output_tokens,
                "fleet_usd_per_million_output_tokens": self.fleet_usd_per_million_output_tokens}
        for k in ("percentile", "occupancy", "occupancy_ceiling", "ttft_p_s", "itl_p_s", "wait_p_s",
                  "gpus_low", "gpus_high", "prefill_gpus", "decode_gpus", "prefill_replicas",
                  "kv_transfer_s"):
            if getattr(self, k) is not None:
                rows[k] = getattr(self, k)
        if self.prefix_hit:
            rows["prefix_hit"] = self.prefix_hit
        # issue 34 (fleetsum34): the stated range's ends, after every older column (their order kept): the
        # costs of the fleets sized again at each end, and what users see on this fleet at each end
        for k in _ENDS:
            if getattr(self, k) is not None:
                rows[k] = getattr(self, k)
        return pd.DataFrame({"value": pd.Series(rows, dtype=object)})


#: :class:`ServingPlan`'s ``_low``/``_high`` fields (:func:`with_ends`), in the order
#: :meth:`ServingPlan.to_frame` lists them.
_ENDS = tuple(f"{k}_{end}" for k in ("fleet_usd_per_million_output_tokens", "ttft_p_s", "itl_p_s",
                                     "request_s", "requests_per_s") for end in ("low", "high"))


#: The time fields of :class:`Serving`: every latency and throughput it reports is a sum or max of them.
_TIMES = ("prefill_compute_s", "prefill_memory_s", "prefill_comm_s", "batch_prefill_s", "decode_compute_s",
          "decode_memory_s", "decode_comm_s", "step_overhead_s", "chunk_extra_s", "interleave_s", "pp_send_s",
          "all_to_all_s")


def at_speed(s: Serving, speed: float) -> Serving:
    """``s`` with every time divided by ``speed`` (engine speed over the model's): an engine at the low end
    of the stated range (``speed`` < 1) takes ``1 / speed`` times as long for every step. Used to price a GPU
    count at the two ends of the range (:func:`replicas_range`)."""
    speed = check_number("speed", speed, allow_equal=False, maximum=100.0)
    if speed == 1.0:
        return s
    last = None if s.last_wave is None else at_speed(s.last_wave, speed)     # a queued batch's last wave
    return replace(s, last_wave=last, **{f: getattr(s, f) / speed for f in _TIMES})


def with_ends(plan: ServingPlan, fast: ServingPlan | None, slow: ServingPlan | None,
              on_fleet: dict | None = None) -> ServingPlan:
    """``plan`` with the fleets sized again at the fast and slow ends of the stated 80% range of the engine's
    speed (:func:`at_speed` at ``RANGE_HIGH`` and ``RANGE_LOW``, :func:`~llmsizing.serve.replicas_for`):
    their GPU counts (``gpus_low``, ``gpus_high``) and what each costs per million output tokens
    (``fleet_usd_per_million_output_tokens_low`` and ``_high``). A fleet's cost is its hourly price over the
    tokens it serves, so the low is the fast end's: fewer GPUs, and for users who ask again when an answer
    ends, more requests. Each end meets the latency target, searched again (unlike
    :func:`~llmsizing.serve.serving_ends`, which keeps one layout); an end that meets none gives None.
    Worked, chapter 15's 1,000 users of Llama-3-70B on H100s ($3.99 an hour, 256-token answers, mean
    answer): the fast end's 36 GPUs serve 78.02 requests/s, 36 x 3.99 / (78.02 x 256 x 3600) x 1e6 = $2.00
    per million, against $3.11 for the central 56 and $4.43 for the slow end's 80. ``on_fleet``: the point
    fleet's own figures at the two ends (:func:`~llmsizing.serve_fleet.on_fleet_ends`: ``ttft_p_s_low``,
    ``itl_p_s_high``, ``request_s_low``, ...), kept as given. Issue 34; chapter 15."""

    def cost(p):
        return None if p is None else p.fleet_usd_per_million_output_tokens

    return replace(plan, gpus_low=None if fast is None else fast.gpus,
                   gpus_high=None if slow is None else slow.gpus,
                   fleet_usd_per_million_output_tokens_low=cost(fast),
                   fleet_usd_per_million_output_tokens_high=cost(slow), **(on_fleet or {}))


def prefill_share(m, prompt: int, hit: float) -> float:
    """The share of a prompt's prefill FLOPs left when the first ``hit x prompt`` tokens' KV cache is found in
    a prefix cache (vLLM's automatic prefix caching, SGLang's RadixAttention): a causal prefill of ``P``
    tokens does ``P F(P)`` FLOPs (:func:`~llmsizing.flops.forward_flops_per_token`, causal), and the cached
    ``H`` tokens' rows of it are skipped, so ``1 - H F(H) / (P F(P))``. The new tokens still attend to the
    cached ones (their rows are kept), so the saving is a little under ``hit``."""
    hit = check_number("prefix_hit", hit, maximum=0.999)
    cached = int(prompt * hit)
    if cached == 0:
        return 1.0
    return 1 - (cached * forward_flops_per_token(m, seq=cached, causal=True)
                / (prompt * forward_flops_per_token(m, seq=prompt, causal=True)))


def with_prefix_cache(s: Serving, share: float) -> Serving:
    """``s`` with every prefill time scaled by ``share`` (:func:`prefill_share`): the TTFT, the batch's
    prefill, and the prefills that ride along with decode steps. The step overheads are kept (a chunk is still
    a step); the KV cache still holds the whole prompt."""
    share = check_fraction("share", share)
    if share == 1.0:
        return s
    last = None if s.last_wave is None else with_prefix_cache(s.last_wave, share)   # a queued batch's
    return replace(s, last_wave=last, prefill_compute_s=s.prefill_compute_s * share,
                   prefill_memory_s=s.prefill_memory_s * share,
                   prefill_comm_s=s.prefill_comm_s * share,
                   batch_prefill_s=(s.batch_prefill_s - s.step_overhead_s) * share + s.step_overhead_s,
                   interleave_s=s.interleave_s * share, chunk_extra_s=s.chunk_extra_s * share)


#: The replicas priced so far inside :func:`kept_servings` (None outside it).
_KEPT = contextvars.ContextVar("llmsizing_kept_servings", default=None)


@contextlib.contextmanager
def kept_servings():
    """Inside this block each distinct replica (:func:`~llmsizing.serve_step.serving` with the same arguments)
    is priced once: a fleet search asks for the same replica again and again (the batch-1 probe and the
    first bisection steps of :func:`largest_batch` at each end of the engine's speed, which rescales a
    replica's times after pricing it: :func:`at_speed`; chapter 15's three plans for one load). A
    :class:`~llmsizing.serve_step.Serving` is a frozen dataclass and a function of its arguments, so the
    answers are the same objects' values as without the block (``tests/test_serve_kept.py``); kept for the
    block only, so a price set with :func:`~llmsizing.use_prices` between two searches is never missed.
    Nested blocks share the outermost's. Issue 38 (widget moves <= 100 ms)."""
    if _KEPT.get() is not None:
        yield
        return
    token = _KEPT.set({})
    try:
        yield
    finally:
        _KEPT.reset(token)


def within_kept_servings(fn):
    """``fn`` run inside :func:`kept_servings` (a decorator)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        with kept_servings():
            return fn(*a, **kw)
    return wrapper


def _kept_serving(*a, **kw) -> Serving:
    """:func:`~llmsizing.serve_step.serving`, kept per argument values (and types) inside
    :func:`kept_servings`."""
    kept = _KEPT.get()
    if kept is None:
        return _serving(*a, **kw)
    try:
        key = (a, tuple(sorted((k, type(v), v) for k, v in kw.items())))
        s = kept.get(key)
    except TypeError:                                   # an argument that cannot be hashed: priced anew
        return _serving(*a, **kw)
    if s is None:
        s = kept[key] = _serving(*a, **kw)
    return s


def adjusted(kwargs):
    """(``serving`` priced at ``kwargs``' private ``_speed`` and ``_prefill_share``, kwargs without them)."""
    kwargs = dict(kwargs)
    speed = kwargs.pop("_speed", 1.0)
    share = kwargs.pop("_prefill_share", 1.0)

    def serving(*a, **kw):
        return with_prefix_cache(at_speed(_kept_serving(*a, **kw), speed), share)

    return serving, kwargs


def largest_batch(m, g, tp, ok, kwargs):
    """(Serving at the largest batch for which ``ok(serving)`` holds and within ``max_batch`` (the KV room,
    capped at ``max_num_seqs``), or None; Serving at batch 1). ``ok`` must only turn false as the batch
    grows: bisection."""
    serving, kwargs = adjusted(kwargs)
    one = serving(m, g, tp=tp, batch=1, **kwargs)
    if one.max_batch < 1 or not ok(one):
        return None, one
    lo, hi = 1, one.max_batch
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(serving(m, g, tp=tp, batch=mid, **kwargs)):
            lo = mid
        else:
            hi = mid - 1
    return serving(m, g, tp=tp, batch=lo, **kwargs), one


def _largest_batch(m, g, tp, ttft_s, itl_s, kwargs):
    """(Serving at the largest batch meeting both mean targets, or None; Serving at batch 1, for
    explanations). ``kwargs`` may hold ``_speed`` (:func:`at_speed`) and ``_prefill_share``."""
    return largest_batch(m, g, tp, lambda s: s.itl_s <= itl_s and s.ttft_s <= ttft_s, kwargs)


def valid_tps(m, tps, kwargs) -> tuple[list[int], int, int]:
    """(the tensor-parallel degrees of ``tps`` that ``m`` allows, pp, ep): with ``ep``, those dividing it."""
    tps = sorted({check_int("tps[i]", t, maximum=1024) for t in check_sequence("tps", tps,
                                                                               example="(1, 2, 4, 8)")})
    pp = check_int("pp", kwargs.get("pp", 1), maximum=1024)
    # a stage needs a layer: say so before blaming the tensor-parallel degrees
    check_layout(m, pp=pp)
    ep = check_ep(m, kwargs.get("ep", 1), 1, pp, kwargs.get("redundant_experts", 0))
    valid = []
    for t in tps:
        try:
            check_layout(m, tp=t, pp=pp)
        except ValueError:
            continue
        if ep > 1 and ep % t:             # attention groups of t GPUs must tile the ep GPUs
            continue
        valid.append(t)
    if not valid:
        raise ValueError(f"tps={tps}: none is a valid tensor-parallel degree for {m.name} "
                         f"({m.heads} heads, {m.kv_heads} KV heads"
                         + (f"; tp must divide ep={ep}" if ep > 1 else "") + ")")
    return valid, pp, ep


def load_of(requests_per_s, users, think_s):
    """(rate or None, users or None, think_s), checked: exactly one of the two loads."""
    if (requests_per_s is None) == (users is None):
        raise ValueError("give exactly one of requests_per_s (a request rate) or users (concurrent streams)")
    rps = None if requests_per_s is None else check_number("requests_per_s", requests_per_s,
                                                           allow_equal=False)
    users = None if users is None else check_int("users", users)
    return rps, users, check_number("think_s", think_s)


def _explain(m, g, ttft_s, itl_s, firsts) -> str:
    from .units import GiB

    parts = []
    fitting = [s for s in firsts if s.max_batch >= 1]
    for s in firsts:
        if s.max_batch < 1:
            c = s.kv_capacity
            parts.append(f"tp={s.tp}: does not fit ({s.weights_bytes_per_gpu / GiB:,.1f} GiB of weights per "
                         f"GPU + {c.activation_peak_bytes / GiB:.1f} GiB activation peak + "
                         f"{(c.non_torch_bytes + c.cuda_graph_bytes) / GiB:.1f} GiB overhead and CUDA "
                         f"graphs + one sequence's KV cache > {c.usable_bytes / GiB:,.1f} GiB usable)")
    if fitting:
        best = min(fitting, key=lambda s: (max(s.itl_s / itl_s, s.ttft_s / ttft_s)))
        parts.append(f"closest: tp={best.tp} at batch 1, ITL {best.itl_s * 1e3:,.2f} ms (target "
                     f"{itl_s * 1e3:,.2f}), TTFT {best.ttft_s * 1e3:,.1f} ms (target {ttft_s * 1e3:,.1f})")
    return (f"no layout of {m.name} on {g.name} (tp in {[s.tp for s in firsts]}) meets itl_s={itl_s:g} and "
            f"ttft_s={ttft_s:g}: " + "; ".join(parts) +
            ". Try quantised weights, a faster GPU, a shorter prompt or looser targets.")


def _cut(x: float) -> float:
    """``x`` rounded to 9 significant digits, so that a load given as users and the same load given as its
    rate
    (which went through a division and back) land on the same side of a whole number of replicas."""
    return float(f"{x:.9g}")



__all__ = ["ServingPlan", "at_speed", "with_ends", "prefill_share", "with_prefix_cache", "largest_batch",
           "valid_tps", "kept_servings"]
