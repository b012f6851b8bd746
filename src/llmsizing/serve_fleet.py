"""A fleet for a load (chapter 15, "Queueing and headroom", "Prefill and decode apart"; issue 37): the GPU
count :func:`llmsizing.serve.replicas_for` gives when asked for a percentile, an occupancy ceiling or separate
prefill and decode pools.

**Percentiles and headroom.** Requests arrive as a Poisson stream (rate ``lambda``) and each holds a batch
slot for a service time ``S = TTFT + L x ITL``, ``L`` its output length: gamma-distributed with mean
``output`` and coefficient of variation ``output_cv`` (1, the exponential, by default), so ``S``'s squared
coefficient of variation is ``cs2 = (output_cv x output x ITL / E[S])^2``. A router that hands each request to
any free slot of the fleet (llm-d's and NVIDIA Dynamo's routers do, with KV-aware scoring) makes the ``R x
batch`` slots one M/G/c queue (:mod:`llmsizing.queueing`):

* the time to first token at percentile ``p`` is the wait for a slot at ``p``
  (:func:`~llmsizing.queueing.wait_quantile_s`, Erlang C with the Allen-Cunneen factor) plus the prefill;
* the inter-token latency at ``p`` is a request's mean ITL (DistServe's TPOT, Zhong et al. 2024, sized at
  P90) when ``n_p`` other prompts' prefills ride along with its decode steps instead of the mean
  ``batch - 1``:
  ``decode_step + n_p x interleave / output``, with ``n_p`` the ``p``-th percentile of a Poisson count of mean
  ``batch - 1`` (each other slot turns over about once while it decodes);
* the slots are filled to no more than an occupancy ceiling, :data:`OCCUPANCY_CEILING` (a stated planning
  default: past it Erlang C's wait climbs steeply, and the plan keeps room for bursts and a failed replica).

``percentile=50`` with no ceiling is the mean answer (Little's law, :func:`llmsizing.serve.replicas_for`). The
plan carries the GPU count at both ends of the stated 80% range of the engine's per-token speed
(``gpus_low``, ``gpus_high``; :func:`llmsizing.serve.replicas_range`), and its latencies, request time and
rate on its own fleet at both ends (:func:`on_fleet`: nothing sized again; issue 34).

**Disaggregated prefill and decode** (DistServe, Zhong et al. 2024; Splitwise, Patel et al. 2024; DeepSeek's
V3/R1 service): a prefill pool of ``tp_p``-GPU replicas each prefilling one prompt at a time (compute-bound:
batching prompts does not raise its rate), and a decode pool whose steps carry no prefill, so its ITL is the
bare decode step at its batch. Each request's KV cache crosses from one pool to the other once
(:func:`kv_transfer_s`: the network model's send, every GPU of the prefill replica sending its share over its
own NIC). TTFT at ``p`` = prefill queue wait at ``p`` + prefill + KV transfer + the wait for a decode slot at
``p`` (a sum of percentiles: an upper bound). The pools' sizes, and so their ratio, are each the fewest GPUs
for the load; the tp of each pool is chosen separately.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from ._validate import check_bool, check_number
from .inference import kv_cache_bytes_per_token, kv_cached_tokens
from .network import collective_time_s, get_node, group_link, host_link_gbps
from .queueing import wait_quantile_s
from .serve_engine import kv_split
from .serve_search import ServingPlan, _cut, _explain, adjusted, at_speed, largest_batch, with_ends

#: The occupancy ceiling a percentile plan fills its batch slots to (a stated default, not a fit: issue 37).
OCCUPANCY_CEILING = 0.8
#: The output lengths' coefficient of variation (gamma-distributed; 1 = exponential).
OUTPUT_CV = 1.0


def poisson_quantile(mean: float, percentile: float) -> int:
    """The smallest ``n`` with ``P(N <= n) >= percentile / 100`` for ``N`` Poisson of ``mean`` (summed in log
    space: stable for means in the thousands)."""
    mean = check_number("mean", mean)
    p = check_number("percentile", percentile, maximum=99.99) / 100
    return _poisson_quantile(mean, p)


@functools.lru_cache(maxsize=4096)
def _poisson_quantile(mean: float, p: float) -> int:
    """:func:`poisson_quantile` of checked arguments, ``p`` a fraction. Kept (issue 38: a fleet search asks
    for the same few dozen batches' quantiles over and over, each a sum of thousands of terms for a large
    batch: 124 calls, 56 distinct, ~60 ms of a move of chapter 15's fleet widget to GPT-2)."""
    if mean == 0:
        return 0
    log_term, n = -mean, 0
    total = math.exp(log_term)
    while total < p:
        n += 1
        log_term += math.log(mean / n)
        total += math.exp(log_term)
    return n


def tpot_p_s(s, percentile: float) -> float:
    """A request's mean ITL at ``percentile``: ``decode_step + n_p x interleave / output`` (module docstring);
    at 50 about the mean :attr:`~llmsizing.serve.Serving.itl_s`. ``n_p`` counts the other sequences the engine
    runs beside the request (``running_batch - 1``: a batch over ``max_num_seqs`` queues the rest)."""
    return s.decode_step_s + poisson_quantile(s.running_batch - 1, percentile) * s.interleave_s / s.output


def kv_transfer_s(s, node=None, model=None) -> float:
    """Seconds to move one request's prompt KV cache from a prefill replica to a decode replica on another
    node: each of the replica's GPUs sends its share (``1 / kv_split`` of every layer's cache) at once, over
    its own NIC (:func:`~llmsizing.network.group_link` across nodes,
    :func:`~llmsizing.network.collective_time_s` of a ``send/recv``). Mooncake and NVIDIA Dynamo (NIXL) move
    KV caches this way, over RDMA. Not overlapped with the prefill (an upper bound: engines that send layer by
    layer hide most of it)."""
    from .catalog import get_gpu, resolve_model

    m, g = resolve_model(s.model if model is None else model, moe=True), get_gpu(s.gpu)
    n = get_node(node, gpu=g)
    kv = kv_cache_bytes_per_token(m, s.kv_cache) * kv_cached_tokens(m, s.prompt) / kv_split(m, s.tp)
    link = group_link(g, n, size=2, stride=n.scaleup_domain_gpus)
    return collective_time_s("send/recv", kv, 2, link, protocols=True)


def _service(s, output_cv):
    """(mean service s, squared coefficient of variation) of a slot held for TTFT + L x ITL."""
    mean = s.request_s
    return mean, (output_cv * s.output * s.itl_s / mean) ** 2


def _replicas(rate, slots, service_s, cs2, occupancy, budget_s, percentile, floor):
    """(fewest replicas of ``slots`` slots keeping occupancy <= ``occupancy`` and the wait at ``percentile``
    within ``budget_s``, the wait) or (None, inf) when no count up to 64x the floor does."""
    r = max(floor, 1, math.ceil(_cut(rate * service_s / (slots * occupancy))))
    if percentile <= 50 and occupancy >= 1.0:
        return r, 0.0
    for _ in range(4096):
        if rate * service_s < r * slots:
            wait = wait_quantile_s(r * slots, rate, service_s, percentile, cs2)
            if wait <= budget_s:
                return r, wait
        r = max(r + 1, math.ceil(r * 1.05)) if r > 200 else r + 1
    return None, math.inf


def _colocated(m, g, rps, users, think, kwargs, ttft_s, itl_s, tps, p, occ, cv, hit):
    best, firsts = None, []
    def itl_p(s):      # at 50: the mean ITL, so that percentile=50 is the mean answer
        return s.itl_s if p <= 50 else tpot_p_s(s, p)

    for t in tps:
        def ok(s):
            return s.ttft_s <= ttft_s and itl_p(s) <= itl_s
        s, one = largest_batch(m, g, t, ok, kwargs)
        firsts.append(one)
        if s is None:
            continue
        service, cs2 = _service(s, cv)
        rate = rps if users is None else users / (service + think)
        floor = math.ceil(_cut(rate / (occ * s.requests_per_s)))
        r, wait = _replicas(rate, s.batch, service, cs2, occ, ttft_s - s.ttft_s, p, floor)
        if r is None:
            continue
        plan = ServingPlan(r * s.gpus, t, s.batch, r, s, rate, users, percentile=p,
                           occupancy=rate * service / (r * s.batch), occupancy_ceiling=occ,
                           ttft_p_s=s.ttft_s + wait, itl_p_s=itl_p(s), wait_p_s=wait, prefix_hit=hit)
        if best is None or (plan.gpus, plan.itl_p_s) < (best.gpus, best.itl_p_s):
            best = plan
    return best, firsts


def _disaggregated(m, g, rps, users, think, kwargs, ttft_s, itl_s, tps, p, occ, cv, hit):
    """Decode pool first (its slot wait is part of the TTFT budget), then the prefill pool."""
    serving, kw = adjusted(kwargs)
    node = kw.get("node")
    best_d, firsts = None, []
    for t in tps:
        s, one = largest_batch(m, g, t, lambda s: s.decode_step_s <= itl_s, kwargs)
        firsts.append(one)
        if s is None:
            continue
        service = s.output * s.decode_step_s
        cs2 = cv ** 2
        rate = rps if users is None else users / (service + s.ttft_s + think)
        r, wait = _replicas(rate, s.batch, service, cs2, occ, itl_s, p, 1)
        if r is not None and (best_d is None or r * s.gpus < best_d[0] * best_d[1].gpus):
            best_d = (r, s, wait, rate)
    if best_d is None:
        return None, firsts
    r_d, s_d, wait_d, rate = best_d
    # a decode replica carries no prefill: its ITL is the bare step, its cycle the output's steps
    s_d = replace(s_d, interleave_s=0.0, chunk_extra_s=0.0, batch_prefill_s=0.0)
    best_p = None
    for t in tps:
        s = serving(m, g, tp=t, batch=1, **kw)
        if s.max_batch < 1:
            continue
        move = kv_transfer_s(s, node, m)
        budget = ttft_s - s.ttft_s - move - wait_d
        if budget < 0:
            continue
        r, wait = _replicas(rate, 1, s.ttft_s, 0.0, occ, budget, p, 1)
        if r is not None and (best_p is None or r * s.gpus < best_p[0] * best_p[1].gpus):
            best_p = (r, s, wait, move)
    if best_p is None:
        return None, firsts
    r_p, s_p, wait_p, move = best_p
    gp, gd = r_p * s_p.gpus, r_d * s_d.gpus
    service_d = s_d.output * s_d.decode_step_s
    return ServingPlan(gp + gd, s_d.tp, s_d.batch, r_d, s_d, rate, users, percentile=p,
                       occupancy=rate * service_d / (r_d * s_d.batch), occupancy_ceiling=occ,
                       ttft_p_s=wait_p + s_p.ttft_s + move + wait_d, itl_p_s=s_d.decode_step_s,
                       wait_p_s=wait_p + wait_d, prefix_hit=hit, prefill_gpus=gp, decode_gpus=gd,
                       prefill_replicas=r_p, prefill_serving=s_p, kv_transfer_s=move), firsts


def _wait_on(slots, rate, service_s, p, cs2, mean) -> float:
    """The wait for a slot at ``p`` on a fixed fleet of ``slots`` slots: 0 for the mean answer (``mean``: no
    ceiling, as :func:`_replicas` sizes it), ``math.inf`` when the slots cannot keep up with the rate."""
    if mean:
        return 0.0
    if rate * service_s >= slots:
        return math.inf
    return wait_quantile_s(slots, rate, service_s, p, cs2)


def on_fleet(plan: ServingPlan, speed: float, *, think_s: float = 0.0, output_cv: float = OUTPUT_CV) -> dict:
    """What users see on ``plan``'s own fleet (its replicas, layout and batch, and for a disaggregated plan
    its two pools) when the engine runs ``speed`` times as fast as the model (:func:`at_speed`: every engine
    step divided by ``speed``): ``{"request_s", "requests_per_s", "ttft_p_s", "itl_p_s"}`` (the last two
    None for the mean answer, ``plan.percentile`` None). The same formulas that sized the plan (the module
    docstring), with nothing searched again: a closed loop of ``plan.users`` sends ``users / (R + think_s)``
    (so a slower engine is asked less often), a rate given stays, and the wait for a slot is Erlang C's at
    the plan's percentile on the plan's slots (``math.inf`` if they cannot keep up). The KV transfer of a
    disaggregated plan is the network's, not the engine's: it keeps its time. ``speed=1`` gives the plan's
    own figures back. Issue 34 (the lead's rule for ranged latencies of a fleet: shown on the point plan's
    fleet, not on the fleets re-sized at each end); chapter 15."""
    speed = check_number("speed", speed, allow_equal=False, maximum=100.0)
    think = check_number("think_s", think_s)
    cv = check_number("output_cv", output_cv, maximum=10.0)
    if not isinstance(plan, ServingPlan):
        raise TypeError(f"plan must be a ServingPlan (llmsizing.serve.replicas_for(...)), got "
                        f"{type(plan).__name__}")
    p = plan.percentile
    mean = p is None or (p <= 50 and (plan.occupancy_ceiling or 1.0) >= 1.0)
    s = at_speed(plan.serving, speed)
    out = {"request_s": s.request_s}
    if plan.prefill_serving is None:                                     # one pool (_colocated)
        service, cs2 = _service(s, cv)
        rate = plan.requests_per_s if plan.users is None else plan.users / (service + think)
        out["requests_per_s"] = rate
        if p is None:
            return dict(out, ttft_p_s=None, itl_p_s=None)
        wait = _wait_on(plan.replicas * plan.batch, rate, service, p, cs2, mean)
        return dict(out, ttft_p_s=s.ttft_s + wait, itl_p_s=s.itl_s if p <= 50 else tpot_p_s(s, p))
    # two pools (_disaggregated): the decode pool's slots, then the prefill pool's one prompt at a time
    service = s.output * s.decode_step_s
    rate = plan.requests_per_s if plan.users is None else plan.users / (service + s.ttft_s + think)
    wait_d = _wait_on(plan.replicas * plan.batch, rate, service, p, cv ** 2, mean)
    sp = at_speed(plan.prefill_serving, speed)
    wait_p = _wait_on(plan.prefill_replicas, rate, sp.ttft_s, p, 0.0, mean)
    return dict(out, requests_per_s=rate, ttft_p_s=wait_p + sp.ttft_s + plan.kv_transfer_s + wait_d,
                itl_p_s=s.decode_step_s)


def on_fleet_ends(plan: ServingPlan, speeds, *, think_s: float = 0.0, output_cv: float = OUTPUT_CV) -> dict:
    """:func:`on_fleet` at the two ends ``speeds = (low, high)`` of the stated range of the engine's speed, as
    :class:`ServingPlan`'s ``<figure>_low`` / ``_high`` fields (numeric order: a time's low is the fast
    end's, the rate's low the slow end's; the percentile figures left None for the mean answer)."""
    lo, hi = speeds
    slow, fast = (on_fleet(plan, v, think_s=think_s, output_cv=output_cv) for v in (lo, hi))
    out = {}
    for k in ("request_s", "requests_per_s", "ttft_p_s", "itl_p_s"):
        if slow[k] is not None:
            out[f"{k}_low"], out[f"{k}_high"] = sorted((fast[k], slow[k]))
    return out


def fleet_plan(m, g, rps, users, think, kwargs, ttft_s, itl_s, tps, *, percentile=None, occupancy=None,
               disaggregated=False, output_cv=OUTPUT_CV, prefix_hit=0.0, with_range=True) -> ServingPlan:
    """:func:`llmsizing.serve.replicas_for` at a percentile, an occupancy ceiling or with disaggregated pools
    (the module docstring), with ``gpus_low``/``gpus_high`` at both ends of the stated range when
    ``with_range``. Checked arguments come from ``replicas_for``."""
    p = 50.0 if percentile is None else check_number("percentile", percentile, minimum=50.0, maximum=99.9)
    default = OCCUPANCY_CEILING if p > 50 else 1.0
    occ = default if occupancy is None else check_number("occupancy", occupancy, allow_equal=False,
                                                         maximum=1.0)
    if p > 50 and occ >= 1.0:
        raise ValueError(f"occupancy={occ:g} with percentile={p:g}: a queue filled to 100% waits without "
                         "bound; give occupancy < 1")
    disaggregated = check_bool("disaggregated", disaggregated)
    cv = check_number("output_cv", output_cv, maximum=10.0)
    how = _disaggregated if disaggregated else _colocated

    def plan(speed):
        kw = dict(kwargs, _speed=speed) if speed != 1.0 else kwargs
        return how(m, g, rps, users, think, kw, ttft_s, itl_s, tps, p, occ, cv, prefix_hit)

    best, firsts = plan(1.0)
    if best is None:
        raise ValueError(_explain(m, g, ttft_s, itl_s, firsts) + (
            f" (sized at p{p:g} with slots at most {occ:.0%} full"
            + ("; prefill and decode pools apart" if disaggregated else "") + ")"))
    if not with_range:
        return best
    from .serve_calibration import _range_of

    lo, hi = _range_of(True, "itl_s")
    return with_ends(best, plan(hi)[0], plan(lo)[0],
                     on_fleet_ends(best, (lo, hi), think_s=think, output_cv=cv))


# ----------------------------------------------------------------------------- KV cache offload to CPU memory
#: Host memory per GPU a KV offload can use by default, bytes: a DGX H100's 2 TB of system memory over its 8
#: GPUs (NVIDIA DGX H100 datasheet).
CPU_BYTES_PER_GPU = 2e12 / 8
#: PCIe Gen5 x16 rounded, GB/s one way (32 GT/s x 16 lanes, 128b/130b: 63.0 GB/s, PCI-SIG). Until session 28
#: every GPU's host link in :func:`kv_offload`; now each GPU's comes from its data
#: (:func:`~llmsizing.network.host_link_gbps`: 63.015 on an H100, 31.5 on an A100). Kept importable.
PCIE_GBPS = 63.0


@dataclass(frozen=True)
class KVOffload:
    """What :func:`kv_offload` found for one replica: KV tokens in GPU memory and in host memory, and the time
    to bring one prompt's cache back from the host against the time to prefill it again."""

    gpu_tokens: int
    cpu_tokens: int
    kv_bytes_per_token_per_gpu: float
    reload_s: float
    recompute_s: float

    @property
    def capacity_gain(self) -> float:
        """Tokens held with the offload over tokens in GPU memory alone."""
        return (self.gpu_tokens + self.cpu_tokens) / self.gpu_tokens

    @property
    def reload_pays(self) -> bool:
        """Whether reloading a cached prompt beats prefilling it again."""
        return self.reload_s < self.recompute_s


def kv_offload(s, *, cpu_bytes_per_gpu: float = CPU_BYTES_PER_GPU, pcie_gbps: float | None = None,
               model=None, gpu=None) -> KVOffload:
    """KV cache offloaded to host memory for a replica ``s`` (a :class:`~llmsizing.serve.Serving`), as vLLM's
    CPU offloading and LMCache keep evicted prefix blocks: ``cpu_bytes_per_gpu / K`` more tokens per GPU
    (``K`` the KV bytes per token on one GPU), and a hit on them costs the prompt's KV bytes per GPU over the
    host link (``pcie_gbps``, one way, every GPU of the replica on its own link; None: the GPU's,
    :func:`~llmsizing.network.host_link_gbps`, PCIe Gen5 x16 on an H100) instead of its prefill
    (``s.ttft_s``). A hit in host memory pays when its reload is shorter than the prefill (``reload_pays``).
    Left out: the reload sharing the link with other traffic, and the engine overlapping it with compute.
    ``gpu``: the replica's GPU when it is not in the catalogue (``s.gpu`` names it otherwise)."""
    cpu = check_number("cpu_bytes_per_gpu", cpu_bytes_per_gpu)
    if pcie_gbps is None:
        pcie_gbps = host_link_gbps(s.gpu if gpu is None else gpu)
    bw = check_number("pcie_gbps", pcie_gbps, allow_equal=False, maximum=1e5) * 1e9
    from .catalog import resolve_model

    m = resolve_model(s.model if model is None else model, moe=True)   # (model: a Model not in the catalogue)
    per_tok = kv_cache_bytes_per_token(m, s.kv_cache) / kv_split(m, s.tp)
    gpu_tokens = s.kv_capacity.tokens if s.kv_capacity is not None else 0
    reload = per_tok * kv_cached_tokens(m, s.prompt) / bw
    return KVOffload(gpu_tokens, int(cpu // per_tok), per_tok, reload, s.ttft_s)


__all__ = ["CPU_BYTES_PER_GPU", "PCIE_GBPS", "KVOffload", "kv_offload", "OCCUPANCY_CEILING", "OUTPUT_CV",
           "fleet_plan", "on_fleet", "on_fleet_ends", "kv_transfer_s", "poisson_quantile", "tpot_p_s"]
