"""ranges34 (issue 34, "every worked budget in the book shows its range"): a fleet plan's latencies, request
time and request rate at both ends of the engine's stated speed, ON THE POINT PLAN'S FLEET (the lead's rule:
GPU counts and costs keep their re-sized ends; a latency is what users would see on this fleet if the engine
ran at the range's fast or slow end).

Expected values are worked here from the stored bounds (``data/serving_intervals.csv``, read with csv: group
``all``, 0.772-1.309; 0.79-1.319 before the refit that priced Megatron-LM's backward TP overlap) and the plan's own steps, never from the ``_low``/``_high`` fields themselves: every
engine step is divided by the speed, so a decode step, a prefill and a request's time ``R = TTFT + output x
ITL`` are divided by 1.309 (fast) and 0.772 (slow); a closed loop of ``U`` users with no thinking sends
``U / R``; the 95th-percentile ITL ``decode_step + n_p x interleave / output`` keeps ``n_p`` (a count of
sequences, not a time) and so is divided too; the wait for a slot is Erlang C's on the plan's own slots at the
end's rate and service time; the KV transfer between two pools is the network's and keeps its time. Worked,
chapter 15's 1,000 users of Llama-3-70B on H100s (mean answer): R = 12.791 s, so 12.791 / 1.309 = 9.771 s and
12.791 / 0.772 = 16.568 s, and the users send 1,000 / 16.568 = 60.36 to 1,000 / 9.771 = 102.34 requests/s
(before that refit: R = 12.867 s, 9.755-16.287 s, 61.40-102.51 requests/s)."""

from __future__ import annotations

import math

import pytest

from _serving_bounds import stored_bounds

from llmsizing.queueing import wait_quantile_s
from llmsizing.serve import replicas_for
from llmsizing.serve_fleet import on_fleet, on_fleet_ends, tpot_p_s

LOAD = dict(users=1000, prompt=1024, output=256, itl_s=0.05, ttft_s=1.0)




def _close(a, b, rel=1e-9):
    return a == b or abs(a - b) <= rel * max(abs(a), abs(b))


def test_mean_plan_request_time_and_rate_on_this_fleet_by_hand():
    lo, hi = stored_bounds()
    p = replicas_for("llama-3-70b", "H100 SXM", **LOAD)
    s = p.serving
    r = s.ttft_s + s.output * s.itl_s                                  # R, from the steps
    assert abs(r - 12.791) < 5e-4                                       # the docstring's worked figure
    assert _close(p.request_s_low, r / hi) and _close(p.request_s_high, r / lo)
    assert abs(p.request_s_low - 9.771) < 5e-4 and abs(p.request_s_high - 16.568) < 5e-4
    # a closed loop without thinking: users / R at each end (the slow end's rate is the low)
    assert _close(p.requests_per_s_low, 1000 / (r / lo)) and _close(p.requests_per_s_high, 1000 / (r / hi))
    assert abs(p.requests_per_s_low - 60.36) < 5e-3 and abs(p.requests_per_s_high - 102.34) < 5e-3
    assert p.ttft_p_s_low is p.itl_p_s_high is None                     # the mean answer has no percentile
    # nothing re-sized: the GPU counts are the re-sized fleets' and differ from this fleet's
    assert (p.gpus_low, p.gpus, p.gpus_high) == (36, 52, 80)      # (36, 52, 76 before that refit)


def test_p95_plan_latencies_on_this_fleet_by_hand():
    lo, hi = stored_bounds()
    p = replicas_for("llama-3-70b", "H100 SXM", **LOAD, percentile=95)
    s = p.serving
    itl95 = tpot_p_s(s, 95)
    assert _close(itl95, p.itl_p_s)
    assert _close(p.itl_p_s_low, itl95 / hi) and _close(p.itl_p_s_high, itl95 / lo)
    assert p.itl_p_s_high > LOAD["itl_s"] >= p.itl_p_s         # ch15's prose: the slow end misses 50 ms
    cs2 = (s.output * s.itl_s / s.request_s) ** 2               # output_cv = 1: scale-free
    for speed, ttft in ((hi, p.ttft_p_s_low), (lo, p.ttft_p_s_high)):
        service = s.request_s / speed
        rate = 1000 / service
        wait = wait_quantile_s(p.replicas * p.batch, rate, service, 95, cs2)
        assert _close(ttft, s.ttft_s / speed + wait)


def test_split_pools_latencies_on_this_fleet_keep_the_kv_transfer():
    lo, hi = stored_bounds()
    p = replicas_for("llama-3-70b", "H100 SXM", **LOAD, percentile=95, disaggregated=True)
    d, pre = p.serving, p.prefill_serving
    assert _close(p.itl_p_s_low, d.decode_step_s / hi) and _close(p.itl_p_s_high, d.decode_step_s / lo)
    for speed, ttft in ((hi, p.ttft_p_s_low), (lo, p.ttft_p_s_high)):
        service = d.output * d.decode_step_s / speed
        rate = 1000 / (service + d.ttft_s / speed)
        wait_d = wait_quantile_s(p.replicas * p.batch, rate, service, 95, 1.0)
        wait_p = wait_quantile_s(p.prefill_replicas, rate, pre.ttft_s / speed, 95, 0.0)
        assert _close(ttft, wait_p + pre.ttft_s / speed + p.kv_transfer_s + wait_d)
    # the transfer is not divided: with both waits zero, the TTFT's ends are not the point over the speed
    assert p.ttft_p_s_high < p.ttft_p_s / lo


def test_a_rate_the_slow_end_cannot_keep_up_with_waits_without_bound():
    lo, hi = stored_bounds()
    # 220 requests/s fill 12 replicas' slots to 79.8% (under the 80% ceiling): at the slow end the same slots
    # would be 0.798 / 0.772 > 100% busy, and the queue grows without bound; 210 requests/s (76.2%) do not
    # (before the refit that priced Megatron-LM's backward TP overlap: 79.9% and 76.3% against 0.79; before
    # serve43's refit: 180 requests/s, 11 replicas at 79.8%, against 0.796)
    for rate, overloaded in ((220.0, True), (210.0, False)):
        p = replicas_for("llama-3-8b", "H100 SXM", requests_per_s=rate, prompt=1024, output=256,
                         percentile=95)
        busy = p.requests_per_s * p.serving.request_s / (p.replicas * p.batch)
        assert (busy / lo >= 1) == overloaded == math.isinf(p.ttft_p_s_high)
        assert p.requests_per_s_low == p.requests_per_s_high == rate        # a rate given stays
        assert math.isfinite(p.ttft_p_s_low)


def test_on_fleet_gives_the_plan_back_at_speed_one_and_checks_its_input():
    for kw in ({}, dict(percentile=95), dict(percentile=95, disaggregated=True)):
        p = replicas_for("llama-3-70b", "H100 SXM", **LOAD, **kw)
        o = on_fleet(p, 1.0)
        assert _close(o["requests_per_s"], p.requests_per_s) and _close(o["request_s"], p.serving.request_s)
        if kw:
            assert _close(o["ttft_p_s"], p.ttft_p_s) and _close(o["itl_p_s"], p.itl_p_s)
    with pytest.raises(ValueError, match="speed"):
        on_fleet(p, 0.0)
    with pytest.raises(TypeError, match="plan must be a ServingPlan"):
        on_fleet(p.serving, 1.0)
    with pytest.raises(ValueError, match="think_s"):
        on_fleet_ends(p, (0.8, 1.3), think_s=-1.0)
