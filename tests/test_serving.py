"""Chapter 15 (serving): hand-derived checks of llmsizing.serve, invariants, validation, the published
comparison and the widget. Expected values are worked out here from the architecture and the datasheets,
not read off the code."""

from __future__ import annotations

import math

import pytest

from llmsizing import serve as S
from llmsizing.hardware import ridge_point_flops_per_byte

H100_BW = 3.35e12            # B/s, H100 SXM datasheet
H100_PEAK = 989.4e12         # FLOP/s dense bf16
L3_8B_PARAMS = 8_030_261_248
L3_8B_EMB = 128_256 * 4096   # one embedding matrix (the LM head is another: untied)
L3_8B_NORMS = 2 * 32 * 4096 + 4096
L3_8B_KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2        # K and V x layers x KV heads x head_dim x 2 bytes = 131,072


def exact(**kw):
    """Roofline bounds with no efficiency loss: MBU = MFU = 1, no all-reduce latency."""
    return dict(mbu=1.0, mfu=1.0, allreduce_latency_s=0.0, **kw)


def test_llama3_8b_batch1_decode_is_the_weights_over_bandwidth():
    s = S.serving("llama-3-8b", "H100 SXM", batch=1, prompt=1024, output=256, **exact())
    w = 2 * L3_8B_PARAMS                                            # 16.06e9 bytes in bf16
    assert s.weights_bytes_per_gpu == w
    assert s.itl_s >= 16.06e9 / H100_BW                             # >= 4.8 ms
    ctx = 1024 + 128                                                 # mean context of the 256 output steps
    assert s.decode_context == ctx
    assert s.itl_s == pytest.approx((w + L3_8B_KV_PER_TOKEN * ctx) / H100_BW, rel=1e-12)
    assert s.decode_bound == "memory"
    assert s.output_tokens_per_s == pytest.approx(1 / s.itl_s)
    # at the default MBU of 0.8 the step is 1/0.8 as long
    assert S.serving("llama-3-8b", "H100 SXM", batch=1, prompt=1024, output=256).itl_s == pytest.approx(
        (w + L3_8B_KV_PER_TOKEN * ctx) / (0.8 * H100_BW), rel=1e-9)


def test_int4_reads_a_quarter_of_the_linear_weights():
    bf16 = S.serving("llama-3-8b", "H100 SXM", **exact())
    int4 = S.serving("llama-3-8b", "H100 SXM", weights="int4", **exact())
    linear = L3_8B_PARAMS - 2 * L3_8B_EMB - L3_8B_NORMS             # 6,979,321,856 quantised weights
    assert int4.weights_bytes_per_gpu == pytest.approx(linear * 0.5 + (2 * L3_8B_EMB + L3_8B_NORMS) * 2)
    assert bf16.decode_bytes_per_gpu - int4.decode_bytes_per_gpu == pytest.approx(1.5 * linear)
    assert int4.decode_flops_per_gpu == bf16.decode_flops_per_gpu   # same FLOPs
    assert int4.itl_s < bf16.itl_s


def test_kv_limited_max_batch_by_hand():
    s = S.serving("llama-3-8b", "H100 SXM", prompt=1024, output=256)
    room = 81_559 * 2**20 - 2**30 - 2 * L3_8B_PARAMS                 # driver-reported memory - 1 GiB - weights
    assert s.max_batch == math.floor(room / (L3_8B_KV_PER_TOKEN * 1280)) == 407
    assert S.serving("llama-3-8b", "H100 SXM", batch=407).fits
    assert not S.serving("llama-3-8b", "H100 SXM", batch=408).fits
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
    s = S.serving("llama-3-70b", "H100 SXM", tp=8, batch=4)
    msg = 4 * 8192 * 2                                               # batch x hidden x 2 bytes
    one = 2 * 7 / 8 * msg / 450e9 + 10e-6                            # ring all-reduce at 450 GB/s one way
    assert s.decode_comm_s == pytest.approx(2 * 80 * one)
    assert S.serving("llama-3-70b", "H100 SXM", tp=8, batch=4, allreduce_latency_s=0).decode_comm_s == \
        pytest.approx(2 * 80 * 2 * 7 / 8 * msg / 450e9)
    assert S.serving("llama-3-8b", "H100 SXM", tp=1).decode_comm_s == 0
    # TP splits the weights read per GPU: ITL falls from tp=2 to tp=8
    itls = [S.serving("llama-3-70b", "H100 SXM", tp=t).itl_s for t in (2, 4, 8)]
    assert itls == sorted(itls, reverse=True)


def test_cost_per_million_tokens_by_hand():
    s = S.serving("llama-3-8b", "H100 SXM", batch=16, prompt=1024, output=256)
    assert s.usd_per_million_output_tokens == pytest.approx(2.99 / 3600 * s.itl_s / 16 * 1e6)
    assert s.usd_per_million_input_tokens == pytest.approx(2.99 / 3600 * s.batch_prefill_s / (16 * 1024) * 1e6)
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
    assert r.replicas == math.ceil(20 / r.serving.requests_per_s)


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


def test_published_figures_within_tolerance():
    """data/serving_published.csv: each row has a source and a date; the default model lands within 25% on the
    vLLM batch-1 row.

    Batch 1 (vLLM, Llama-3.1-8B bf16 on an A100 40GB, 75 tokens/s): the bound with no loss is 1.555e12 /
    16.06e9 = 97 tokens/s; the published figure is 77% of it, close to the default MBU of 0.8. The 8-way
    throughput gain is over-estimated (6.6x published): the model ignores the prefills that vLLM interleaves
    with the decode steps of a concurrency sweep, and per-step overheads (scheduling, sampling)."""
    df = S.published_serving()
    assert df["source"].str.len().gt(10).all() and df["as_of"].str.len().gt(3).all()
    assert df["url"].str.startswith("https://").all()
    ceiling = 1.555e12 / (2 * L3_8B_PARAMS)
    row = df[df["metric"] == "output_tokens_per_s"].iloc[0]
    assert row["value"] < ceiling                                   # a measurement never beats the roofline
    assert 0.8 <= row["published_over_predicted"] <= 1.25


TIME_METRICS = ("ttft_s", "itl_s")


def test_every_published_row_is_below_the_roofline_and_within_a_band():
    """Every published row, as a speed (published / predicted for a rate, predicted / published for a time),
    lies in [0.25, 1.5] of the default model, and no row beats the roofline with no loss (MBU = MFU = 1, no
    all-reduce latency).

    Why the band is wide and lopsided: engines run below the roofline, by more than the default MBU/MFU allow
    when the batch is large. Static-batched Llama-2-70B at batch 480 on 4 H100s (TensorRT-LLM v0.6.1) reaches
    0.28 of the default prediction: the model calls that step compute-bound at half the fp8 peak, and whatever
    held the engine back (the page does not say) is not in the model. High-concurrency throughput also includes prefill and scheduling, which the model's
    ``batch / itl`` leaves out. The top is above 1 because prefill can beat the default MFU of 0.5: a 2,048-token
    prompt of Llama-2-7B on an A100 took 133 ms (TensorRT-LLM v0.5), an MFU near 0.68, a speed of 1.36 of
    the prediction. Bandwidth-bound rows sit near 1 (0.7-0.98)."""
    df = S.published_serving()
    for r in df.itertuples():
        ratio = r.published_over_predicted
        speed = 1 / ratio if r.metric in TIME_METRICS else ratio
        assert 0.25 <= speed <= 1.5, r
        if r.metric == "batch_gain":
            assert r.value <= r.batch                               # b sequences make at most b times the tokens
            continue
        ideal = getattr(S.serving(r.model, r.gpu, tp=int(r.tp), weights=r.weights, kv_cache=r.kv_cache,
                                  compute=r.compute, prompt=int(r.prompt), output=int(r.output), batch=int(r.batch),
                                  **exact()), r.metric)
        if r.metric in TIME_METRICS:
            assert r.value > ideal, r
        else:
            assert r.value < ideal, r
        # every row's batch fits the KV cache in the formats the engine used
        assert S.serving(r.model, r.gpu, tp=int(r.tp), weights=r.weights, kv_cache=r.kv_cache,
                         prompt=int(r.prompt), output=int(r.output), batch=int(r.batch)).fits, r


def test_trtllm_a100_llama2_7b_row_against_a_hand_roofline():
    """TensorRT-LLM v0.6.1, Llama-2-7B fp16 on one A100 80GB, batch 60, 128 in / 2,048 out: 1,928 tokens/s.
    By hand: weights 2 x 6,738,415,616 = 13.48e9 bytes; KV 2 x 32 layers x 4,096 x 2 bytes = 524,288 bytes per
    token; mean context 128 + 1,024 = 1,152; one step reads 13.48e9 + 60 x 524,288 x 1,152 = 49.72e9 bytes,
    24.4 ms at 2.039e12 B/s: 2,461 tokens/s with no loss. The published figure is 78% of that, close to the
    default MBU of 0.8."""
    df = S.published_serving()
    row = df[(df["model"] == "llama-2-7b") & (df["gpu"] == "A100 80GB")
             & (df["metric"] == "output_tokens_per_s_per_gpu")].iloc[0]
    step_bytes = 2 * 6_738_415_616 + 60 * (2 * 32 * 4096 * 2) * 1152
    ideal = 60 / (step_bytes / 2.039e12)
    assert ideal == pytest.approx(2461, rel=1e-3)
    assert row["value"] / ideal == pytest.approx(0.78, abs=0.01)
    assert row["predicted"] == pytest.approx(0.8 * ideal, rel=1e-9)


def test_widget_shows_what_the_library_computes():
    from llmsizing.widgets import serving_widget

    w = serving_widget()
    s = S.serving("llama-3-8b", "H100 SXM", batch=16, prompt=1024, output=256)
    assert f"ITL {s.itl_s * 1e3:,.2f} ms" in w.summary.value
    assert f"${s.usd_per_million_output_tokens:,.3f} per million output tokens" in w.summary.value
    w.controls["model"].value = "llama-3-70b"                       # 141 GB on one H100: the library's message
    assert "does not fit" in w.error.value and w.image.value == b""
    w.controls["tp"].value = 4
    assert w.error.value == "" and "4 x H100 SXM" in w.summary.value


def test_charts_render():
    from llmsizing.charts import render_serving_cost, render_serving_curve

    v = render_serving_curve("llama-3-8b", "H100 SXM", batch=4096)
    assert "DOES NOT FIT" in v.summary
    assert "H100 SXM" in render_serving_cost("llama-3-8b", gpus=["H100 SXM"]).summary
