"""Chapter 15 (serving): hand-derived checks of llmsizing.serve, invariants, validation, the published
comparison and the widget. Expected values are worked out here from the architecture and the datasheets,
not read off the code."""

from __future__ import annotations

import math

import pytest

from llmsizing import serve as S
from llmsizing.hardware import ridge_point_flops_per_byte
from llmsizing.serve_calibration import published_serving

H100_BW = 3.35e12            # B/s, H100 SXM datasheet
H100_PEAK = 989.4e12         # FLOP/s dense bf16
L3_8B_PARAMS = 8_030_261_248
L3_8B_EMB = 128_256 * 4096   # one embedding matrix (the LM head is another: untied)
L3_8B_NORMS = 2 * 32 * 4096 + 4096
L3_8B_KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2        # K and V x layers x KV heads x head_dim x 2 bytes = 131,072


def exact(**kw):
    """Roofline bounds with no efficiency loss: every efficiency 1, no step overhead, no all-reduce latency."""
    return dict(mbu=1.0, mfu=1.0, attention_bu=1.0, step_overhead_s=0.0, allreduce_latency_s=0.0, **kw)


def test_llama3_8b_batch1_decode_is_the_weights_over_bandwidth():
    s = S.serving("llama-3-8b", "H100 SXM", batch=1, prompt=1024, output=256, **exact())
    w = 2 * L3_8B_PARAMS                                            # 16.06e9 bytes in bf16
    assert s.weights_bytes_per_gpu == w
    # a step reads every weight but the untied input embedding, of which it gathers one row (4,096 x 2 B):
    # 16,060,522,496 - 1,050,673,152 + 8,192 = 15,009,857,536 B (vLLM's VocabParallelEmbedding: F.embedding)
    read = w - 2 * L3_8B_EMB + 2 * 4096
    assert read == 15_009_857_536
    assert s.itl_s >= 15.0e9 / H100_BW                              # >= 4.5 ms
    ctx = 1024 + 128                                                 # mean context of the 256 output steps
    assert s.decode_context == ctx
    assert s.itl_s == pytest.approx((read + L3_8B_KV_PER_TOKEN * ctx) / H100_BW, rel=1e-12)
    assert s.decode_bound == "memory"
    # throughput counts the prompt's prefill: 256 tokens over (prefill + 256 steps)
    assert s.output_tokens_per_s == pytest.approx(256 / (s.batch_prefill_s + 256 * s.itl_s))
    # the calibrated step: weights at MBU, KV at the attention efficiency, plus the fixed step overhead
    d = S.serving("llama-3-8b", "H100 SXM", batch=1, prompt=1024, output=256)
    assert d.itl_s == pytest.approx(read / (S.MBU_DEFAULT * H100_BW) + L3_8B_KV_PER_TOKEN * ctx
                                    / (S.ATTENTION_BU_DEFAULT * H100_BW) + S.STEP_OVERHEAD_S, rel=1e-9)


def test_int4_reads_a_quarter_of_the_linear_weights():
    bf16 = S.serving("llama-3-8b", "H100 SXM", **exact())
    int4 = S.serving("llama-3-8b", "H100 SXM", weights="int4", **exact())
    linear = L3_8B_PARAMS - 2 * L3_8B_EMB - L3_8B_NORMS             # 6,979,321,856 quantised weights
    assert int4.weights_bytes_per_gpu == pytest.approx(linear * 0.5 + (2 * L3_8B_EMB + L3_8B_NORMS) * 2)
    assert bf16.decode_bytes_per_gpu - int4.decode_bytes_per_gpu == pytest.approx(1.5 * linear)
    assert int4.decode_flops_per_gpu == bf16.decode_flops_per_gpu   # same FLOPs
    assert int4.itl_s < bf16.itl_s


def test_kv_limited_max_batch_by_hand():
    """vLLM's budget: 90% of the driver-reported memory, minus the weights, the activation peak (the larger of
    the forward over an 8,192-token chunk, 3 x 14,336 + 4 x 4,096 16-bit values per token, and the sampler's
    run after it: the chunk's hidden states and 1,024 sequences' fp32 logits twice), 1 GiB of CUDA context and
    buffers, 0.5 GiB of CUDA graphs; 16-token blocks; 80 blocks per 1,280 tokens. 8,192 and 1,024 are vLLM's
    API-server defaults on an H100 (vllm/engine/arg_utils.py, EngineArgs: at least 70 GiB and not an A100).
    With 256 sequences the forward is the peak (973,078,528 bytes against the sampler's 329,777,152): 27,811
    blocks, 347 sequences."""
    s = S.serving("llama-3-8b", "H100 SXM", prompt=1024, output=256)
    act = max(8192 * (3 * 14336 + 4 * 4096) * 2, 8192 * 4096 * 2 + 2 * 1024 * 128_256 * 4)   # the sampler's
    room = 0.9 * 81_559 * 2**20 - 2 * L3_8B_PARAMS - act - 2**30 - 2**29
    blocks = math.floor(room / (16 * L3_8B_KV_PER_TOKEN))
    assert s.kv_capacity.blocks == blocks and s.kv_capacity.tokens == 16 * blocks
    assert s.max_batch == blocks // 80 == 346
    assert S.serving("llama-3-8b", "H100 SXM", batch=346).fits
    assert not S.serving("llama-3-8b", "H100 SXM", batch=347).fits
    # at 256 sequences the KV room is 347, but the scheduler runs at most 256 of them (issue 38)
    at256 = S.serving("llama-3-8b", "H100 SXM", prompt=1024, output=256, max_num_seqs=256)
    assert at256.kv_batch == 347 and at256.max_batch == 256 and at256.batch_bound == "max_num_seqs"
    # a lower gpu_memory_utilization holds fewer sequences
    assert S.serving("llama-3-8b", "H100 SXM", gpu_memory_utilization=0.5).max_batch < 346
    # llama-3-70b in bf16 does not fit one H100 at all (141 GB of weights)
    assert S.serving("llama-3-70b", "H100 SXM").max_batch == 0


def test_ridge_point_and_prefill_by_hand():
    assert ridge_point_flops_per_byte("H100 SXM") == pytest.approx(H100_PEAK / H100_BW)      # 295 FLOP/byte
    s = S.serving("llama-3-8b", "H100 SXM", prompt=1024, **exact())
    per_token = 2 * (L3_8B_PARAMS - L3_8B_EMB) + 4 * 1024 * 32 * 128 * 32 / 2    # causal: half the s x s
    assert s.prefill_flops_per_gpu == pytest.approx(1024 * per_token)
    assert s.ttft_s == pytest.approx(1024 * per_token / H100_PEAK)                   # 15.8 ms, compute-bound
    assert s.prefill_bound == "compute"
    assert s.prefill_intensity_flops_per_byte > ridge_point_flops_per_byte("H100 SXM")


def test_tp_all_reduces_by_hand():
    """The network model (data/links.csv, NVLink) with NCCL's protocol choice (issue 22): a ring all-reduce over 8
    GPUs is the cheaper of the LL line, 14 steps of 2.3 us plus 2 x 7/8 of the message at 14.0% of 450 GB/s one
    way, and the Simple line, 14 steps of 8.0 us plus the message at 77%. A 64 KiB decode message rides LL."""
    s = S.serving("llama-3-70b", "H100 SXM", tp=8, batch=4)
    msg = 4 * 8192 * 2                                               # batch x hidden x 2 bytes
    ll = 14 * 2.3e-6 + 2 * 7 / 8 * msg / (0.140 * 450e9)             # 34.0 us
    simple = 14 * 8.0e-6 + 2 * 7 / 8 * msg / (0.77 * 450e9)          # 112.3 us
    assert s.decode_comm_s == pytest.approx(2 * 80 * ll)
    # a 128-token prefill of Llama-2-70B over 4 GPUs sends 2 MiB per all-reduce: the Simple line wins
    p = S.serving("llama-2-70b", "H100 SXM", tp=4, prompt=128, output=1)
    big = 128 * 8192 * 2
    ll = 6 * 2.3e-6 + 1.5 * big / (0.140 * 450e9)                    # 63.7 us
    simple = 6 * 8.0e-6 + 1.5 * big / (0.77 * 450e9)                 # 57.1 us
    assert p.prefill_comm_s == pytest.approx(2 * 80 * min(ll, simple)) and simple < ll
    assert s.decode_comm_s > 2 * 80 * 30e-6                          # far more than the old 10 us per call
    # the old price, on request: ring bytes at the link plus a fixed latency
    assert S.serving("llama-3-70b", "H100 SXM", tp=8, batch=4, allreduce_latency_s=0).decode_comm_s == \
        pytest.approx(2 * 80 * 2 * 7 / 8 * msg / 450e9)
    assert S.serving("llama-3-8b", "H100 SXM", tp=1).decode_comm_s == 0
    # TP splits the weights read per GPU: ITL falls from tp=2 to tp=8
    itls = [S.serving("llama-3-70b", "H100 SXM", tp=t).itl_s for t in (2, 4, 8)]
    assert itls == sorted(itls, reverse=True)


def test_cost_per_million_tokens_by_hand():
    s = S.serving("llama-3-8b", "H100 SXM", batch=16, prompt=1024, output=256)
    assert s.usd_per_million_output_tokens == pytest.approx(3.99 / 3600 * s.decode_step_s / 16 * 1e6)
    assert s.usd_per_million_input_tokens == pytest.approx(3.99 / 3600 * s.batch_prefill_s / (16 * 1024) * 1e6)
    assert S.serving("llama-3-8b", "H100 SXM", price_usd_per_gpu_hour=1.0).usd_per_hour == 1.0


@pytest.mark.parametrize("model,gpu,tp", [("llama-3-8b", "H100 SXM", 1), ("llama-3-70b", "H100 SXM", 4),
                                          ("mistral-7b", "A10", 1), ("llama-2-13b", "MI300X", 2)])
def test_invariants(model, gpu, tp):
    one = S.serving(model, gpu, tp=tp, batch=1)
    prev = one
    for b in (2, 3, 8, 17, 64, 200, 1000):
        s = S.serving(model, gpu, tp=tp, batch=b)
        assert s.itl_s >= prev.itl_s and s.ttft_s >= prev.ttft_s and s.batch_prefill_s >= prev.batch_prefill_s
        assert s.output_tokens_per_s >= one.output_tokens_per_s
        assert s.requests_per_s >= one.requests_per_s * (1 - 1e-12)
        prev = s
    for b in (1, 32):
        itl = [S.serving(model, gpu, tp=tp, batch=b, weights=w).itl_s for w in ("bf16", "fp8", "int4")]
        assert itl == sorted(itl, reverse=True)                      # fewer weight bytes never slow decode


@pytest.mark.parametrize("kwargs,exc,word", [
    (dict(tp=3), ValueError, "tp"), (dict(tp=0), ValueError, "tp"), (dict(batch=0), ValueError, "batch"),
    (dict(prompt="1"), TypeError, "prompt"), (dict(output=0), ValueError, "output"),
    (dict(weights="int3"), ValueError, "weights"), (dict(kv_cache="nf4"), ValueError, "kv_cache"),
    (dict(mbu=1.5), ValueError, "mbu"), (dict(mfu=0), ValueError, "mfu"),
    (dict(compute="fp64"), ValueError, "compute"), (dict(allreduce_latency_s=-1), ValueError, "allreduce"),
    (dict(price_usd_per_gpu_hour=float("nan")), ValueError, "price"),
])
def test_bad_input_names_the_parameter(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        S.serving("llama-3-8b", "H100 SXM", **kwargs)


def test_fp8_compute_on_a100_is_refused():
    with pytest.raises(ValueError, match="dtype"):
        S.serving("llama-3-8b", "A100 80GB", compute="fp8")


def test_replicas_for_users_and_rate():
    p = S.replicas_for("llama-3-70b", "H100 SXM", users=100, itl_s=0.05, ttft_s=1.0)
    assert p.gpus == p.tp * p.replicas and p.replicas * p.batch >= 100
    assert p.serving.itl_s <= 0.05 and p.serving.ttft_s <= 1.0 and p.serving.fits
    # one more user than a layout holds never needs fewer GPUs
    assert S.replicas_for("llama-3-70b", "H100 SXM", users=1000, itl_s=0.05).gpus >= p.gpus
    r = S.replicas_for("llama-3-8b", "H100 SXM", requests_per_s=20, itl_s=0.03, ttft_s=0.5)
    assert r.capacity_requests_per_s >= 20
    # a single replica at the found batch would not be enough unless one replica was chosen
    assert r.replicas >= math.ceil(20 / r.serving.requests_per_s)
    # Little's law: 20 requests/s each holding a slot for request_s seconds, batch slots per replica
    assert r.replicas == max(1, math.ceil(20 * r.serving.request_s / r.batch), math.ceil(20 / r.serving.requests_per_s))


def test_replicas_for_explains():
    with pytest.raises(ValueError, match="closest"):
        S.replicas_for("llama-3-70b", "A10", users=10, itl_s=0.001)
    with pytest.raises(ValueError, match="does not fit"):
        S.replicas_for("llama-3.1-405b", "A10", users=10, itl_s=1.0, ttft_s=100.0)
    with pytest.raises(ValueError, match="exactly one"):
        S.replicas_for("llama-3-8b", "H100 SXM", users=1, requests_per_s=1.0)
    with pytest.raises(ValueError, match="exactly one"):
        S.replicas_for("llama-3-8b", "H100 SXM")
    with pytest.raises(ValueError, match="tps"):
        S.replicas_for("llama-3-8b", "H100 SXM", users=1, tps=[3])


def test_cost_by_gpu_rows():
    df = S.serving_cost_by_gpu("llama-3-8b", gpus=["H100 SXM", "A10"], itl_s=0.05)
    assert list(df.index) == ["H100 SXM", "A10"]
    assert (df["itl_s"] <= 0.05).all()
    nothing = S.serving_cost_by_gpu("llama-3.1-405b", gpus=["A10"], itl_s=0.05)
    assert nothing.loc["A10", "note"] and math.isnan(nothing.loc["A10", "usd_per_million_output_tokens"])


def test_the_old_published_serving_path_still_works_and_warns():
    """``llmsizing.serve.published_serving`` (its home until issue 22) forwards to serve_calibration's for one
    release, with a DeprecationWarning naming the new home (issue 32: serve_calibration imports the step model from
    serve_step, and nothing imports back up into serve)."""
    import importlib

    from llmsizing import serve_calibration

    with pytest.warns(DeprecationWarning, match="llmsizing.serve.published_serving moved to "
                                                "llmsizing.serve_calibration.published_serving"):
        old = S.published_serving
    assert old is serve_calibration.published_serving
    with pytest.warns(DeprecationWarning):
        assert importlib.import_module("llmsizing.serve").published_serving is old
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        S.nothing_here
    assert "published_serving" not in S.__all__          # a star import does not warn


def test_published_figures_have_sources_and_a_calibration_split():
    df = published_serving()
    assert len(df) >= 20
    assert df["source"].str.len().gt(10).all() and df["as_of"].str.len().gt(3).all()
    assert df["url"].str.startswith("https://").all()
    # issue 22: the constants are fitted on at least 15 published figures, and at least a quarter are held out
    assert set(df["calibration"]) == {"yes", "no"} and (df["calibration"] == "yes").sum() >= 15
    assert (df["calibration"] == "no").mean() >= 0.25
    assert df["engine"].notna().all() and df["engine_version"].notna().all()
    ceiling = 1.555e12 / (2 * L3_8B_PARAMS)
    row = df[df["metric"] == "output_tokens_per_s"].iloc[0]
    assert row["value"] < ceiling                                   # a measurement never beats the roofline


def test_chunked_prefill_costs_running_sequences():
    """A step carrying a full chunk costs more than a plain decode step, and under load the ITL carries the
    other sequences' prefills: (batch - 1) x one prompt's prefill compute over the output."""
    s = S.serving("llama-3-8b", "H100 SXM", batch=32, prompt=4096, output=256, **exact())
    assert s.chunk_step_s > s.decode_step_s
    assert s.itl_s == pytest.approx(s.decode_step_s + 31 * s.prefill_compute_s / 256)
    long = S.serving("llama-3-8b", "H100 SXM", prompt=20_000, **exact())
    assert long.prefill_chunks == 3                                  # ceil(20,000 / 8,192)


@pytest.fixture(scope="module")
def published():
    return published_serving()


def test_within_1_5x_but_one_known_miss(published):
    """Issue 22's done-when asks for every figure within 1.5x of the central prediction. Until serve43 one
    held-out row was not: TensorRT-LLM v0.5.0's preliminary H200 launch figure for Llama-2-13B at batch 1,024
    (0.63 of the model's speed; the page itself says v0.6 improved on it). Its FP8 decode step sits at the
    ridge, and with FP8 compute priced at the MFU times the training calibration's FP8 share
    (hardware.dtype_kernel_share, 0.768) the model's step is longer: 0.68, inside 1.5x though still a known
    miss of the stated range. Any row beyond 1.5x fails this test."""
    far = published[(published["nearest_ratio"] < 1 / 1.5) | (published["nearest_ratio"] > 1.5)]
    assert far.empty, far[["engine", "model", "gpu", "batch", "nearest_ratio"]]
    h200 = published[(published["model"] == "llama-2-13b") & (published["gpu"] == "H200")
                     & (published["batch"] == 1024)]
    assert len(h200) == 1 and 1 / 1.5 < h200["nearest_ratio"].iloc[0] < 0.7
    assert h200["known_out"].str.len().gt(40).all()


def test_rejected_candidates_have_sources_and_reasons():
    """Every published figure considered and left out (data/serving_published_rejected.csv) names its source, a URL
    and why it could not be represented, so a later session does not add it back unexamined."""
    import pandas as pd
    from llmsizing.catalog import DATA_DIR

    rej = pd.read_csv(DATA_DIR / "serving_published_rejected.csv")
    assert list(rej.columns) == ["source", "url", "as_of", "reason"] and len(rej) >= 10
    assert rej["url"].str.startswith("https://").all() and rej["reason"].str.len().gt(30).all()
    kept = set(published_serving()["source"])
    assert not kept & set(rej["source"])                      # a candidate is either a row or rejected, not both


def test_known_out_rows_are_never_fitted_and_few():
    """A known miss (a row with a stated reason the model cannot explain) is never fitted on, neither as a
    calibration row nor in the leave-one-source-out folds (serve_calibration._trainable), and the misses stay a
    small share of the held-out rows: at most one in eight. Issue 34: the range is no longer widened to them;
    they count in its out-of-sample coverage like every other row."""
    from llmsizing.serve_calibration import _read, _trainable

    df = published_serving()
    out = df[df["known_out"] != ""]
    assert (out["calibration"] == "no").all()
    assert 0 < len(out) <= (df["calibration"] == "no").sum() / 8
    assert out["known_out"].str.len().gt(40).all()
    assert not any(_trainable(r) for r in _read().itertuples() if r.known_out)
    assert out["inside"].notna().all()                  # checked out of sample like every other speed


def test_no_row_beats_the_roofline():
    """No published speed is faster than the roofline with no loss (every efficiency 1, no overheads)."""
    df = published_serving()
    from llmsizing.serve_calibration import predict_row
    for r in df.itertuples():
        if r.metric in ("batch_gain", "grouped_attention_gain"):      # ratios of two runs, not speeds
            continue
        bound = predict_row(r, mbu=1.0, mfu=1.0, attention_bu=1.0, step_overhead_s=0.0)
        speed = bound / r.value if r.metric in ("ttft_s", "itl_s") else r.value / bound
        assert speed <= 1.0, (r.model, r.gpu, r.metric, speed)


def test_calibration_tool_is_current():
    # --quick: the fit on every row and the ranges from the stored held-out residuals; the whole
    # leave-one-source-out refit (a few CPU minutes) is tools/calibrate_serving.py --check without it. Run in
    # this process (the library is imported already), as `calibrate_serving.py --check --quick` runs it
    from conftest import run_tool

    code, printed = run_tool("calibrate_serving.py", "--check", "--quick")
    assert code == 0, printed


def test_users_and_rate_modes_agree():
    """Little's law: 1,000 users with no think time are a rate of users / (TTFT + output x ITL); given as that
    rate, the load needs the same GPUs; users mode never needs fewer."""
    kw = dict(prompt=1024, output=256, itl_s=0.05, ttft_s=1.0)
    u = S.replicas_for("llama-3-70b", "H100 SXM", users=1000, **kw)
    assert u.requests_per_s == pytest.approx(1000 / u.serving.request_s)
    r = S.replicas_for("llama-3-70b", "H100 SXM", requests_per_s=u.requests_per_s, **kw)
    assert r.gpus == u.gpus
    for users in (10, 200, 3000):
        u = S.replicas_for("llama-3-8b", "H100 SXM", users=users, itl_s=0.03)
        r = S.replicas_for("llama-3-8b", "H100 SXM", requests_per_s=u.requests_per_s, itl_s=0.03)
        assert u.gpus >= r.gpus
    # thinking users send fewer requests: never more GPUs
    assert S.replicas_for("llama-3-70b", "H100 SXM", users=1000, think_s=30, **kw).gpus <= \
        S.replicas_for("llama-3-70b", "H100 SXM", users=1000, **kw).gpus


def test_widget_shows_what_the_library_computes():
    from llmsizing.widgets import serving_widget

    w = serving_widget()
    s = S.serving("llama-3-8b", "H100 SXM", batch=16, prompt=1024, output=256)
    assert f"ITL {s.itl_s * 1e3:,.2f} ms" in w.summary.value
    usd = s.usd_per_million_output_tokens
    assert (f"${usd:,.3f} (${usd / S.RANGE_HIGH:,.3f}-${usd / S.RANGE_LOW:,.3f}) per million output tokens"
            in w.summary.value)
    # the default engine (vLLM) is calibrated: its 80% range, RANGE_LOW..RANGE_HIGH of the speed, as "point
    # (low-high)" (srvcurve34; tests/test_serving_curve_range.py works every figure's ends by hand)
    assert (f"ITL {s.itl_s * 1e3:,.2f} ms ({s.itl_s / S.RANGE_HIGH * 1e3:,.2f}-{s.itl_s / S.RANGE_LOW * 1e3:,.2f})"
            in w.summary.value)
    assert "vLLM/continuous" in w.summary.value
    w.controls["model"].value = "llama-3-70b"                       # 141 GB on one H100: the library's message
    assert "does not fit" in w.error.value and w.image.value == b""
    w.controls["tp"].value = 4
    assert w.error.value == "" and "4 x H100 SXM" in w.summary.value


def test_charts_render():
    from llmsizing.charts import render_serving_cost, render_serving_curve

    # 4,096 over the KV room of 346 (tests/test_serving_kv_waves.py): vLLM runs 346 at a time,
    # ceil(4,096 / 346) = 12 waves (kv30; before, priced as one step that does not fit)
    v = render_serving_curve("llama-3-8b", "H100 SXM", batch=4096)
    assert "above the KV room of 346 sequences" in v.summary and "12 waves" in v.summary
    assert "H100 SXM" in render_serving_cost("llama-3-8b", gpus=["H100 SXM"]).summary


def test_a_batch_above_max_num_seqs_is_queued_not_refused():
    """(review28b) Above vLLM's max_num_seqs the engine queues the rest: the chart's summary says so. Since
    issue 34 (queue29) the engine runs 256 at a time, so a batch beyond the KV room is queued too while its
    waves fit. Since kv30 a larger cap leaves the KV room to queue it; only a batch run at once as stated
    (``batching="static"``) beyond the room does not fit, and that names the room."""
    from llmsizing.charts.serve_tune import _fit_text

    kw = dict(prompt=1024, output=256, max_num_seqs=256)
    room = S.serving("llama-3-8b", "H100 SXM", batch=1, **kw).kv_batch
    assert room > 257                                       # (the case exists: the KV room exceeds the cap)
    queued = S.serving("llama-3-8b", "H100 SXM", batch=257, **kw)
    assert not queued.fits and queued.batch <= queued.kv_batch
    assert _fit_text(queued) == "above max_num_seqs 256: vLLM runs 256 at once and queues the rest (2 waves)"
    waves = -(-(room + 1) // 256)
    over = S.serving("llama-3-8b", "H100 SXM", batch=room + 1, **kw)
    assert _fit_text(over) == f"above max_num_seqs 256: vLLM runs 256 at once and queues the rest ({waves} waves)"
    wide = S.serving("llama-3-8b", "H100 SXM", batch=room + 1, **{**kw, "max_num_seqs": room + 1})
    assert wide.running_batch == wide.kv_batch and wide.waves == 2
    assert _fit_text(wide) == (f"above the KV room of {wide.kv_batch:,} sequences: vLLM runs "
                               f"{wide.kv_batch:,} at once and queues the rest (2 waves)")
    static = S.serving("llama-3-8b", "H100 SXM", batch=room + 1, batching="static",
                       **{**kw, "max_num_seqs": room + 1})
    assert _fit_text(static) == f"DOES NOT FIT (KV cache holds {static.kv_batch:,})"


def test_the_serving_curve_marks_a_queued_batch_apart_from_one_that_does_not_fit():
    """(lows29) The chart drew a queued batch (within the KV room, above vLLM's max_num_seqs) with the red
    "does not fit" cross. Each state now has its own marker and legend entry, read here off the artists: the
    chosen point, the left panel's legend, and the cap's note (the scheduler's cap, not a full KV cache)."""
    from matplotlib.colors import to_hex

    from llmsizing.charts import render_serving_curve

    kw = dict(prompt=128, output=64)                        # short sequences: the KV room exceeds the cap
    one = S.serving("llama-3-8b", "H100 SXM", batch=1, **kw)
    cap, room = one.max_batch, one.kv_batch
    assert cap < room and one.batch_bound == "max_num_seqs"
    one_cap = S.serving("llama-3-8b", "H100 SXM", batch=cap, **kw)
    seen = {}
    # issue 34 (queue29): beyond the KV room but in waves of the cap, each within it, a batch is queued; kv30:
    # beyond the room and within the cap too (long sequences: room under the cap), in waves of the room; it
    # does not fit where the batch run at once is beyond the room (a static batch)
    long = dict(prompt=1024, output=256)
    static = dict(long, batching="static")
    tight = S.serving("llama-3-8b", "H100 SXM", batch=1, **long)
    assert tight.kv_batch < tight.max_num_seqs and tight.batch_bound == "kv"
    for state, batch, words, at in (("fits", cap, "runs at once", kw), ("queued", cap + 1, "queued", kw),
                                    ("queued", room + 1, "queued", kw),
                                    ("queued", tight.kv_batch + 1, "queued", long),
                                    ("does not fit", tight.kv_batch + 1, "does not fit", static)):
        s = S.serving("llama-3-8b", "H100 SXM", batch=batch, **at)
        ax = render_serving_curve("llama-3-8b", "H100 SXM", batch=batch, **at).figure.axes[0]
        point, = [ln for ln in ax.lines if list(ln.get_xdata()) == [s.output_tokens_per_s_per_gpu]]
        assert list(point.get_ydata()) == [s.itl_s * 1e3]
        handles, labels = ax.get_legend_handles_labels()
        legend = ax.get_legend()
        # the chosen batch, then the stated range's band (srvcurve34)
        assert len(legend.get_texts()) == 2 and legend.get_texts()[0].get_text().startswith(f"batch {batch:,}: ")
        assert legend.get_texts()[1].get_text() == "stated 80% range (engine speed)"
        assert words in legend.get_texts()[0].get_text()
        assert legend.legend_handles[0].get_marker() == point.get_marker()
        assert to_hex(legend.legend_handles[0].get_color()) == to_hex(point.get_color())
        seen[state] = (point.get_marker(), to_hex(point.get_color()))
        notes = [t.get_text() for t in ax.texts]
        if state == "queued" and at is kw:   # priced at its running batch: the curve's last point, the cap
            assert (s.running_batch, s.itl_s) == (cap, one_cap.itl_s)
        if state == "queued" and at is long:   # kv30: at the KV room's
            full_room = S.serving("llama-3-8b", "H100 SXM", batch=tight.kv_batch, **long)
            assert (s.running_batch, s.itl_s) == (tight.kv_batch, full_room.itl_s)
        if state == "queued":
            assert f"{s.waves} waves" in legend.get_texts()[0].get_text()
        if at is kw:
            assert f"max_num_seqs reached\nat batch {cap:,}" in notes
            assert not any("KV cache full" in t for t in notes)
    assert seen["does not fit"] == ("x", "#d55e00")         # the red cross stays for what does not fit
    assert len(set(seen.values())) == 3                     # and each state looks different
    assert seen["queued"][0] != "x" and seen["queued"][1] != seen["does not fit"][1]
    # where the KV room is the cap, the note says the cache is full
    full = render_serving_curve("llama-3-8b", "H100 SXM", batch=16).figure.axes[0]
    bound = S.serving("llama-3-8b", "H100 SXM", batch=16)
    assert bound.batch_bound == "kv"
    assert f"KV cache full\nat batch {bound.max_batch:,}" in [t.get_text() for t in full.texts]


def test_per_query_head_attention_reads_each_kv_head_once_per_query_head():
    """Llama-2-70B has 64 query heads over 8 KV heads: a kernel that gives each query head its own pass reads
    the KV cache 8 times; the grouped kernel once. The weights are read once either way. Llama-2-7B (no GQA,
    32 KV heads for 32 query heads) reads the same bytes under both."""
    kw = dict(weights="fp8", kv_cache="fp8", compute="fp8", prompt=128, output=2048, batch=128, **exact())
    g = S.serving("llama-2-70b", "H200", attention_kernel="grouped", **kw)
    p = S.serving("llama-2-70b", "H200", attention_kernel="per-query-head", **kw)
    kv = 2 * 80 * 8 * 128 * 1 * 128 * (128 + 1024)                  # K and V, 80 layers, 8 heads, fp8, 128 seqs
    # the weights a step reads: all resident but the input embedding's table (bf16 under fp8: 32,000 x 8,192 x
    # 2 B), of which the 128 sequences gather 128 rows
    table = (32_000 - 128) * 8192 * 2
    assert g.decode_bytes_per_gpu - g.weights_bytes_per_gpu + table == pytest.approx(kv, rel=1e-12)
    assert p.decode_bytes_per_gpu - p.weights_bytes_per_gpu + table == pytest.approx(8 * kv, rel=1e-12)
    mha = [S.serving("llama-2-7b", "H100 SXM", batch=8, attention_kernel=k, **exact()).decode_step_s
           for k in S.ATTENTION_KERNELS]
    assert mha[0] == mha[1]
    with pytest.raises(ValueError, match="attention_kernel"):
        S.serving("llama-2-7b", "H100 SXM", attention_kernel="paged")


def test_engine_takes_its_own_step_overhead_and_the_default_is_vllm():
    """Issue 34: the overhead is fitted per engine and batching era; the default is vLLM's (continuous
    batching), the most used engine today, no longer one pooled over every engine."""
    assert {e for e in S.ENGINES if "/" not in e} >= {"vLLM", "TensorRT-LLM", "llama.cpp"}
    base = S.serving("llama-3-8b", "H100 SXM", batch=4)
    assert base.step_overhead_s == S.STEP_OVERHEAD_S == S.ENGINE_STEP_OVERHEAD_S["vLLM/continuous"]
    for key in S.ENGINE_STEP_OVERHEAD_S:
        s = S.serving("llama-3-8b", "H100 SXM", batch=4, engine=key)
        assert s.step_overhead_s == S.ENGINE_STEP_OVERHEAD_S[key] and s.engine == key
        assert s.decode_step_s - base.decode_step_s == pytest.approx(s.step_overhead_s - S.STEP_OVERHEAD_S)
    # an explicit overhead wins over the engine's
    assert S.serving("llama-3-8b", "H100 SXM", engine="vLLM", step_overhead_s=0.01).step_overhead_s == 0.01
    with pytest.raises(ValueError, match="engine"):
        S.serving("llama-3-8b", "H100 SXM", engine="Triton")


def test_tensorrt_llm_before_xqa_reads_per_query_head_and_the_xqa_gain_is_reproduced():
    """TensorRT-LLM's rows from v0.5 to v0.7 (before the XQA kernel of v0.8) are marked per-query-head and every
    other row grouped; the published XQA gain (1,227 -> 2,941 tokens/s/GPU) lies within 1.5x of the model's."""
    df = published_serving()
    old = df["engine"].eq("TensorRT-LLM") & df["engine_version"].str.match(r"0\.[567]")
    assert set(df.loc[old, "attention_kernel"]) == {"per-query-head"}
    assert set(df.loc[~old & df["metric"].ne("grouped_attention_gain"), "attention_kernel"]) == {"grouped"}
    gain = df[df["metric"] == "grouped_attention_gain"].iloc[0]
    assert gain["value"] == pytest.approx(2941 / 1227, abs=1e-3)
    assert 1 / 1.5 <= gain["speed_ratio"] <= 1.5


# ----------------------------------------------------------------------------- pipeline-parallel serving
L3_70B_PARAMS = 70_553_706_496
L3_70B_KV_PER_TOKEN = 2 * 80 * 8 * 128 * 2                 # K and V x 80 layers x 8 KV heads x 128 x 2 B = 327,680
H100_MIB = 81_559                                           # driver-reported memory (data/gpus.csv)


def _nvlink_send_s(bytes_per_gpu, tp, gathered):
    """A stage boundary inside one DGX H100 by hand: each of the tp GPUs sends its 1/tp slice point to point, the
    cheaper of LL (2.3 us + bytes / 14.0% of 450 GB/s) and Simple (8.0 us + bytes / 77%), then the next stage
    all-gathers the whole tensor over tp GPUs ((tp - 1) steps, (tp - 1) / tp of it)."""
    p2p = min(2.3e-6 + bytes_per_gpu / (0.140 * 450e9), 8.0e-6 + bytes_per_gpu / (0.77 * 450e9))
    f = (tp - 1) / tp
    gather = min((tp - 1) * 2.3e-6 + f * gathered / (0.140 * 450e9), (tp - 1) * 8.0e-6 + f * gathered / (0.77 * 450e9))
    return p2p + (gather if tp > 1 else 0.0)


def test_pp_splits_weights_and_kv_and_grows_the_batch_by_hand():
    """Two stages of four H100s: each GPU holds 40 of the 80 layers, so an eighth of the weights and half of each
    sequence's KV per GPU (a quarter of the KV heads); vLLM's budget then holds far more sequences."""
    one = S.serving("llama-3-70b", "H100 SXM", tp=4, prompt=1024, output=256)
    two = S.serving("llama-3-70b", "H100 SXM", tp=4, pp=2, prompt=1024, output=256)
    assert two.gpus == 8 and two.pp == 2 and one.gpus == 4
    assert two.weights_bytes_per_gpu == pytest.approx(2 * L3_70B_PARAMS / 8)
    assert two.kv_bytes_per_sequence_per_gpu == pytest.approx(L3_70B_KV_PER_TOKEN / 4 / 2 * 1280)
    # the larger of the forward and the sampler (vLLM's 1,024 sequences on an H100) after it
    act = max(8192 * (3 * 28672 / 4 + 4 * 8192) * 2, 8192 * 8192 * 2 + 2 * 1024 * 128_256 * 4)
    room = 0.9 * H100_MIB * 2**20 - 2 * L3_70B_PARAMS / 8 - act - 2**30 - 2**29
    blocks = math.floor(room / (16 * L3_70B_KV_PER_TOKEN / 4 / 2))
    assert two.kv_capacity.blocks == blocks
    assert two.kv_batch == blocks // 80 > 2 * one.kv_batch       # the freed weights hold more KV too
    assert two.max_batch == 1024                # but one scheduler runs at most vLLM's 1,024 (issue 38)


def test_pp_decode_step_by_hand():
    """Batch 64 over two stages runs two micro-batches of 32: a token's pass is the two stages' reads at batch 32
    (together the whole model's weights, the input embedding's 32 rows gathered rather than its table, and its
    32 sequences' KV, over the 4 GPUs of a stage's width), the
    all-reduces of 80 layers at batch 32, and one send of the hidden states and residual (2 x 32 x 8,192 x 2 B)
    between the stages. Roofline constants (no losses, old all-reduce price at no latency)."""
    s = S.serving("llama-3-70b", "H100 SXM", tp=4, pp=2, batch=64, prompt=1024, output=256, **exact())
    ctx = 1024 + 128
    read = 2 * L3_70B_PARAMS - 2 * (128_256 - 32) * 8192         # the input embedding: 32 rows gathered
    memory = (read / 4 + 32 * L3_70B_KV_PER_TOKEN / 4 * ctx) / H100_BW                   # 11.2 ms
    allreduce = 2 * 80 * (2 * 3 / 4) * (32 * 8192 * 2) / 450e9
    hidden = 2 * 32 * 8192 * 2
    send = _nvlink_send_s(hidden / 4, 4, hidden)                                         # 13.4 us
    assert s.microbatch == 32 and s.decode_bound == "memory"
    assert s.pp_send_s == pytest.approx(send)
    assert s.decode_step_s == pytest.approx(memory + allreduce + send, rel=1e-9)
    # the same as one stage of four GPUs at the micro-batch, plus the send: stages buy memory, not latency
    flat = S.serving("llama-3-70b", "H100 SXM", tp=4, batch=32, prompt=1024, output=256, **exact())
    assert s.decode_step_s == pytest.approx(flat.decode_step_s + send, rel=1e-9)
    # at batch 1 the second stage idles: one micro-batch of one, the whole model read once per token
    b1 = S.serving("llama-3-70b", "H100 SXM", tp=4, pp=2, batch=1, **exact())
    assert b1.microbatch == 1
    assert b1.decode_step_s > S.serving("llama-3-70b", "H100 SXM", tp=4, batch=1, **exact()).decode_step_s
    # rates are per replica of tp x pp GPUs
    assert s.output_tokens_per_s_per_gpu == pytest.approx(s.output_tokens_per_s / 8)
    assert s.usd_per_hour == pytest.approx(8 * 3.99)


def test_pp_prefill_chunks_flow_through_the_stages_by_hand():
    """A 32,768-token prompt is four chunks of 8,192. Through two stages they take (4 + 1) stage times of a
    chunk, each half a chunk's whole-model time, so 5/8 of the one-stage prefill, plus one send of 8,192 tokens'
    hidden states and residual and the four steps' overhead. A one-chunk prompt is not prefilled any faster."""
    kw = dict(tp=4, prompt=32768, output=256, batch=1)
    one = S.serving("llama-3-70b", "H100 SXM", **kw)
    two = S.serving("llama-3-70b", "H100 SXM", pp=2, **kw)
    t0 = one.step_overhead_s
    assert one.prefill_chunks == two.prefill_chunks == 4
    hidden = 2 * 8192 * 8192 * 2                                                         # 256 MiB
    send = _nvlink_send_s(hidden / 4, 4, hidden)                                         # 0.81 ms
    assert two.ttft_s == pytest.approx((one.ttft_s - 4 * t0) * 5 / 8 + send + 4 * t0, rel=1e-9)
    assert two.ttft_s < 0.7 * one.ttft_s
    short = dict(tp=4, prompt=1024, output=256)
    hidden = 2 * 1024 * 8192 * 2
    assert S.serving("llama-3-70b", "H100 SXM", pp=2, **short).ttft_s == pytest.approx(
        S.serving("llama-3-70b", "H100 SXM", **short).ttft_s + _nvlink_send_s(hidden / 4, 4, hidden), rel=1e-9)


def test_pp_across_nodes_sends_over_the_network_by_hand():
    """tp=8 fills a DGX H100, so the second stage is in another node: the send rides one 400 Gb/s NIC per GPU
    (50 GB/s), the cheaper of LL (4.4 us + bytes / 8.9% of it) and Simple (29.6 us + bytes / 91%); the all-gather
    stays on NVLink. data/links.csv's network row, data/nodes.csv's DGX H100."""
    s = S.serving("llama-3-70b", "H100 SXM", tp=8, pp=2, batch=2)
    hidden = 2 * 1 * 8192 * 2                                                            # micro-batch of 1
    p2p = min(4.4e-6 + hidden / 8 / (0.089 * 50e9), 29.6e-6 + hidden / 8 / (0.91 * 50e9))
    gather = min(7 * 2.3e-6 + 7 / 8 * hidden / (0.140 * 450e9), 7 * 8.0e-6 + 7 / 8 * hidden / (0.77 * 450e9))
    assert s.pp_send_s == pytest.approx(p2p + gather)
    assert s.gpus == 16


def test_pp_through_replicas_for_and_old_calls():
    plan = S.replicas_for("llama-3-70b", "H100 SXM", requests_per_s=2, prompt=32768, output=512, itl_s=0.05,
                          ttft_s=2.0, pp=2)
    assert plan.serving.pp == 2 and plan.gpus == plan.replicas * plan.tp * 2
    assert plan.to_frame().loc["pp", "value"] == 2
    # pp=1 is the default and changes nothing
    a = S.serving("llama-3-70b", "H100 SXM", tp=4, batch=16)
    b = S.serving("llama-3-70b", "H100 SXM", tp=4, batch=16, pp=1)
    assert (a.itl_s, a.ttft_s, a.max_batch, a.gpus) == (b.itl_s, b.ttft_s, b.max_batch, 4)


@pytest.mark.parametrize("kw,exc,name", [
    (dict(pp=0), ValueError, "pp"), (dict(pp=81), ValueError, "pp"), (dict(pp="2"), TypeError, "pp"),
    (dict(pp=2.5), TypeError, "pp")])
def test_pp_bad_input_is_named(kw, exc, name):
    with pytest.raises(exc, match=name):
        S.serving("llama-3-70b", "H100 SXM", tp=4, **kw)


# ------------------------------------------------------------------ the KV cache alone (reader24c, ch15 H1)
def test_kv_cache_alone_intensity_by_hand():
    # Llama-3-8B at the mean context of 1,024 + 256 tokens, 1,152: a token's FLOPs are the matmuls' 2 x
    # (parameters - the input embedding, a gather) plus attention's QK^T and AV, 2 x 2 x 1,152 x 32 heads x
    # 128 per layer: 15,009,849,344 + 603,979,776 = 15.61 GFLOP; its KV cache 131,072 B x 1,152 = 151.0 MB
    ctx = 1024 + 128
    flops = 2 * (L3_8B_PARAMS - L3_8B_EMB) + 32 * 4 * ctx * 32 * 128
    assert flops == 15_613_829_120
    kv = L3_8B_KV_PER_TOKEN * ctx
    for batch, tp in ((1, 1), (64, 1), (16, 2)):     # the same whatever the batch and the tp split
        s = S.serving("llama-3-8b", "H100 SXM", batch=batch, tp=tp, prompt=1024, output=256)
        x = S.decode_kv_intensity(s)
        assert x.flops_per_byte == pytest.approx(flops / kv, rel=1e-9)      # 103.4 FLOP/byte
        assert 103 < x.flops_per_byte < 104
        # chapter 15's formula as b grows: 2N / (M_tok s) = 16.06e9 / 151.0e6 = 106.4
        assert x.formula_flops_per_byte == pytest.approx(2 * L3_8B_PARAMS / kv, rel=1e-12)
        assert 106 < x.formula_flops_per_byte < 107
        assert x.context == ctx
        # the step's intensity climbs towards it from below and never reaches it (no batch is compute-bound)
        assert 0 < s.decode_intensity_flops_per_byte < x.flops_per_byte
        assert x.flops_per_byte < ridge_point_flops_per_byte("H100 SXM")


def test_kv_cache_alone_intensity_is_positive_where_the_weights_are_not_all_read():
    # the old arithmetic, FLOPs / (step bytes - resident weights), went negative once the input embedding
    # became a gather (step bytes < resident weights + KV): -17 FLOP/byte on chapter 15's page
    s = S.serving("llama-3-8b", "H100 SXM", batch=1, prompt=1024, output=256)
    assert s.decode_bytes_per_gpu - s.weights_bytes_per_gpu < 0
    assert S.decode_kv_intensity(s).flops_per_byte > 0


def test_kv_cache_alone_intensity_bad_input_is_named():
    with pytest.raises(TypeError, match="s must be a Serving"):
        S.decode_kv_intensity("llama-3-8b")
