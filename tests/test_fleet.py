"""A fleet for a load (issue 37): queueing (Erlang C against a simulation and hand arithmetic), percentile
plans with headroom and a range, disaggregated pools, prefix caching, KV offload, reasoning lengths, and
DeepSeek's published per-node throughput inside the stated range."""

import math

import numpy as np
import pytest

from llmsizing.queueing import erlang_b, erlang_c, mean_wait_s, simulate_wait_s, wait_quantile_s
from llmsizing.serve import replicas_for, serving
from llmsizing.serve_fleet import OCCUPANCY_CEILING, kv_offload, kv_transfer_s, poisson_quantile, tpot_p_s

TARGET = dict(prompt=1024, output=256, itl_s=0.05, ttft_s=1.0)


# ------------------------------------------------------------------ Erlang by hand
def test_erlang_c_by_hand():
    # M/M/1: an arrival waits with probability rho, and its p95 wait is ln(rho / 0.05) / (mu - lambda)
    assert erlang_c(1, 0.8, 1.0) == pytest.approx(0.8, rel=1e-12)
    assert wait_quantile_s(1, 0.8, 1.0, 95) == pytest.approx(math.log(0.8 / 0.05) / 0.2, rel=1e-12)
    assert mean_wait_s(1, 0.8, 1.0) == pytest.approx(0.8 / 0.2, rel=1e-12)     # rho / (mu - lambda)
    # M/M/2 at a = 1 Erlang: P0 = 1 / (1 + 1 + 1 / (2 x 0.5)) = 1/3, C = a^2 / (2! (1 - rho)) P0 = 1/3
    assert erlang_c(2, 1.0, 1.0) == pytest.approx(1 / 3, rel=1e-12)
    # Erlang B(2, 1) = (1/2) / (1 + 1 + 1/2) = 0.2
    assert erlang_b(2, 1.0) == pytest.approx(0.2, rel=1e-12)
    # few waiters: the p95 wait is 0 when fewer than 5% wait
    assert wait_quantile_s(2, 0.2, 1.0, 95) == 0.0
    # a general service time scales the wait by (1 + cs2) / 2: deterministic service halves it
    assert mean_wait_s(4, 3.0, 1.0, cs2=0.0) == pytest.approx(mean_wait_s(4, 3.0, 1.0) / 2, rel=1e-12)


@pytest.mark.parametrize("servers, rho", [(2, 0.7), (8, 0.75), (32, 0.8)])
def test_simulation_agrees_with_erlang_c_within_5_percent(servers, rho):
    """The vectorised discrete-event simulation and the closed form on M/M/c: probability of waiting, mean
    wait and p95 wait within 5% (a few seconds of simulation, fixed seed)."""
    rate = rho * servers
    w = simulate_wait_s(servers, rate, 1.0, arrivals=50_000, replications=64, warmup=5_000, seed=0)
    assert (w > 0).mean() == pytest.approx(erlang_c(servers, rate, 1.0), rel=0.05)
    assert w.mean() == pytest.approx(mean_wait_s(servers, rate, 1.0), rel=0.05)
    assert np.percentile(w, 95) == pytest.approx(wait_quantile_s(servers, rate, 1.0, 95), rel=0.05)


def test_simulation_is_deterministic_and_refuses_an_overloaded_queue():
    a = simulate_wait_s(4, 3.0, 1.0, arrivals=2_000, replications=2, warmup=100, seed=7)
    b = simulate_wait_s(4, 3.0, 1.0, arrivals=2_000, replications=2, warmup=100, seed=7)
    assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="servers"):
        erlang_c(4, 4.0, 1.0)
    with pytest.raises(ValueError, match="percentile"):
        wait_quantile_s(4, 3.0, 1.0, 100)


def test_poisson_quantile_by_hand():
    # Poisson(1): P(<=0) = 0.368, P(<=1) = 0.736, P(<=2) = 0.920, P(<=3) = 0.981
    assert poisson_quantile(1.0, 95) == 3
    assert poisson_quantile(1.0, 90) == 2
    assert poisson_quantile(0.0, 99) == 0
    # large means: about mean + 1.645 sqrt(mean) at p95
    assert abs(poisson_quantile(400.0, 95) - (400 + 1.645 * 20)) <= 2


# ------------------------------------------------------------------ percentile plans
@pytest.mark.parametrize("load", [dict(users=1000), dict(requests_per_s=20.0), dict(users=50)])
def test_percentile_plan_needs_at_least_the_mean_answer(load):
    mean = replicas_for("llama-3-70b", "H100 SXM", **load, **TARGET)
    p50 = replicas_for("llama-3-70b", "H100 SXM", **load, **TARGET, percentile=50)
    p95 = replicas_for("llama-3-70b", "H100 SXM", **load, **TARGET, percentile=95)
    p99 = replicas_for("llama-3-70b", "H100 SXM", **load, **TARGET, percentile=99, with_range=False)
    assert p50.gpus == mean.gpus                      # 50 is today's mean answer
    assert mean.gpus <= p95.gpus <= p99.gpus
    assert p95.occupancy <= OCCUPANCY_CEILING + 1e-12
    assert p95.ttft_p_s <= 1.0 and p95.itl_p_s <= 0.05
    assert p95.gpus_low <= p95.gpus <= p95.gpus_high
    assert p99.gpus_low is None                        # with_range=False


def test_percentile_plan_latencies_by_hand():
    """The p95 ITL is the decode step plus n_p other prefills spread over the output, n_p the Poisson(batch - 1)
    p95; the occupancy is lambda x E[S] over the slots; with lambda = users / E[S] (no thinking) it is users
    over the slots."""
    p = replicas_for("llama-3-70b", "H100 SXM", users=1000, **TARGET, percentile=95, with_range=False)
    s = p.serving
    n = poisson_quantile(s.batch - 1, 95)
    assert p.itl_p_s == pytest.approx(s.decode_step_s + n * s.interleave_s / s.output, rel=1e-12)
    assert p.occupancy == pytest.approx(1000 / (p.replicas * p.batch), rel=1e-9)
    assert p.ttft_p_s == pytest.approx(s.ttft_s + p.wait_p_s, rel=1e-12)


def test_occupancy_and_percentile_are_checked():
    with pytest.raises(ValueError, match="percentile"):
        replicas_for("llama-3-8b", "H100 SXM", users=10, percentile=40)
    with pytest.raises(ValueError, match="occupancy"):
        replicas_for("llama-3-8b", "H100 SXM", users=10, percentile=95, occupancy=1.0)
    with pytest.raises(TypeError, match="disaggregated"):
        replicas_for("llama-3-8b", "H100 SXM", users=10, disaggregated="yes")


# ------------------------------------------------------------------ disaggregated pools
def test_disaggregated_plan_splits_the_pools_and_decodes_without_prefill():
    d = replicas_for("llama-3-70b", "H100 SXM", users=1000, **TARGET, percentile=95, disaggregated=True,
                     with_range=False)
    assert d.gpus == d.prefill_gpus + d.decode_gpus
    assert d.prefill_gpus == d.prefill_replicas * d.prefill_serving.gpus
    assert d.itl_p_s == d.serving.decode_step_s <= 0.05          # no prefill rides along with decode
    assert d.ttft_p_s <= 1.0
    assert d.ttft_p_s >= d.prefill_serving.ttft_s + d.kv_transfer_s
    # the prefill pool carries lambda x prefill seconds of work at no more than the ceiling
    assert d.requests_per_s * d.prefill_serving.ttft_s <= OCCUPANCY_CEILING * d.prefill_replicas + 1e-9


def test_kv_transfer_by_hand():
    """Llama-3-70B's KV cache: 80 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes = 327,680 bytes per token;
    a 1,024-token prompt is 335.5 MB, a quarter of it per GPU at tp=4, over a 400 Gb/s NIC (50 GB/s) at
    best: >= 1.68 ms, and not more than a few times that."""
    s = serving("llama-3-70b", "H100 SXM", tp=4, prompt=1024)
    t = kv_transfer_s(s)
    by_hand = 327_680 * 1024 / 4 / 50e9
    assert by_hand <= t < 3 * by_hand


# ------------------------------------------------------------------ prefix caching and KV offload
def test_prefix_cache_saves_prefill_and_gpus():
    base = replicas_for("llama-3-70b", "H100 SXM", users=1000, **TARGET, percentile=95, with_range=False)
    hit = replicas_for("llama-3-70b", "H100 SXM", users=1000, **TARGET, percentile=95, with_range=False,
                       prefix_hit=0.5)
    assert hit.serving.ttft_s < base.serving.ttft_s
    assert hit.gpus <= base.gpus
    # the causal prefill of the uncached half costs 1 - H F(H) / (P F(P)): a little more than half
    from llmsizing.flops import forward_flops_per_token
    from llmsizing.serve import prefill_share

    f = forward_flops_per_token
    share = prefill_share("llama-3-70b", 1024, 0.5)
    by_hand = 1 - 512 * f("llama-3-70b", seq=512, causal=True) / (1024 * f("llama-3-70b", seq=1024, causal=True))
    assert share == pytest.approx(by_hand, rel=1e-12) and 0.5 < share < 0.52


def test_kv_offload_by_hand():
    """Llama-3-8B on one H100: 32 layers x 8 KV heads x 128 x 2 x 2 bytes = 131,072 bytes per token; 250 GB of
    host memory holds 250e9 / 131,072 = 1,907,348 tokens, and a 1,024-token prompt's cache (134 MB) takes
    2.13 ms over the H100's PCIe Gen5 x16 (32 GT/s x 16 x 128/130 / 8 = 63.0 GB/s one way); on an A100
    (PCIe Gen4 x16, 31.5 GB/s) twice that."""
    o = kv_offload(serving("llama-3-8b", "H100 SXM", prompt=1024))
    assert o.cpu_tokens == 1_907_348
    assert o.reload_s == pytest.approx(131_072 * 1024 / (32e9 * 16 * 128 / 130 / 8), rel=1e-12)
    a100 = kv_offload(serving("llama-3-8b", "A100 80GB", prompt=1024))
    assert a100.reload_s == pytest.approx(131_072 * 1024 / (16e9 * 16 * 128 / 130 / 8), rel=1e-12)
    assert kv_offload(serving("llama-3-8b", "H100 SXM", prompt=1024), pcie_gbps=63.0).reload_s == pytest.approx(
        131_072 * 1024 / 63e9, rel=1e-12)
    assert o.reload_pays and o.capacity_gain > 2


# ------------------------------------------------------------------ reasoning lengths
def test_reasoning_outputs_cost_more_per_token():
    from llmsizing.serve import reasoning_cost

    r = reasoning_cost("llama-3-8b", "H100 SXM", outputs=(4096, 32768))
    assert r.loc[32768, "usd_per_million_output_tokens"] > r.loc[4096, "usd_per_million_output_tokens"]
    assert r.loc[32768, "usd_per_answer"] == pytest.approx(
        r.loc[32768, "usd_per_million_output_tokens"] * 32768 / 1e6, rel=1e-12)


# ------------------------------------------------------------------ DeepSeek's V3/R1 service
def test_deepseek_published_per_node_throughput_inside_the_stated_range():
    """DeepSeek's Day-6 overview: ~73.7K input tokens/s per H800 node in prefill (cache hits included) and
    ~14.8K output tokens/s in decode (the published figures are read from the CSV, not from the model). The
    decode lies inside the 80% range stated for the model's prediction. The prefill did until serve43 (1.31x
    the model, under the top 1.338); since FP8 compute is priced at the MFU times the training calibration's
    FP8 share and the range was refitted, it is 1.35x the model, just above the top 1.309: the model's
    prefill is slower, mostly its all-to-all (over 80% of the prefill), which leaves out DeepSeek's
    two-micro-batch overlap and FP8 dispatch, both of which would speed it. A miss, kept: never widened."""
    from llmsizing.serve_wide_ep import deepseek_service

    d = deepseek_service()
    assert d.loc["prefill", "published"] == 73_700 and d.loc["decode", "published"] == 14_800
    assert d.loc["decode", "inside"] and not d.loc["prefill", "inside"]
    assert d.loc["prefill", "high"] < d.loc["prefill", "published"] < 1.05 * d.loc["prefill", "high"]
    assert d.loc["prefill", "comm_share"] > 0.8
    # decode at 21 tokens/s per user: a step within 1/21 s, 32 redundant experts let EP144 divide 288 slots
    assert d.loc["decode", "time_s"] <= 1 / 21 and d.loc["decode", "ep"] == 144


# ------------------------------------------------------------------ the command line
def test_cli_serve_takes_the_fleet_options(capsys):
    import json

    from llmsizing import cli

    base = ["serve", "llama-3-70b", "--gpu", "H100 SXM", "--users", "1000", "--itl-ms", "50"]
    assert cli.main(base + ["--workload", "chat", "--percentile", "95", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    plan = replicas_for("llama-3-70b", "H100 SXM", users=1000, **TARGET, percentile=95)
    assert (row["gpus"], row["gpus_low"], row["gpus_high"]) == (plan.gpus, plan.gpus_low, plan.gpus_high)
    assert row["percentile"] == 95 and row["occupancy_ceiling"] == OCCUPANCY_CEILING
    assert cli.main(base + ["--prompt", "1024", "--output", "256", "--disaggregated", "--prefix-hit", "0.5",
                            "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["gpus"] == row["prefill_gpus"] + row["decode_gpus"]
    assert cli.main(base) == 2                 # no lengths and no --workload
    assert "--prompt is required (or give --workload" in capsys.readouterr().err


# ------------------------------------------------------------------ the widget
def test_fleet_widget_shows_what_the_library_computes():
    from llmsizing.widgets import fleet_widget

    w = fleet_widget()
    p95 = replicas_for("llama-3-70b", "H100 SXM", users=1000, **TARGET, percentile=95)
    text = w.summary.value
    assert f"{p95.gpus_low}-{p95.gpus_high}" in text and f"{p95.replicas} x tp={p95.tp}" in text
    w.controls["users"].value = 100
    p = replicas_for("llama-3-70b", "H100 SXM", users=100, **TARGET, percentile=95, disaggregated=True)
    assert f"{p.prefill_gpus}+{p.decode_gpus}" in w.summary.value
    w.controls["itl_ms"].value = 20          # a target only some plans meet: the others show the library's message
    for kw in (dict(percentile=95), dict(percentile=95, disaggregated=True)):
        try:
            p = replicas_for("llama-3-70b", "H100 SXM", users=100, **dict(TARGET, itl_s=0.02), **kw)
        except ValueError:
            assert "no layout" in w.summary.value
        else:
            assert f">{p.gpus:,}<" in w.summary.value
