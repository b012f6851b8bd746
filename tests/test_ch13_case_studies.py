"""Chapter 13 (case studies): run_from_step and offload_exposed_s, checked by hand arithmetic and against
training_time, which computes the same quantities from an MFU instead of a step."""

import pytest

import llmsizing as L
from llmsizing.comm import OffloadTime, offload_time
from llmsizing.layouts import step_time
from llmsizing.runs import StepRun, offload_exposed_s, run_from_step
from llmsizing.time_cost import training_time

import _kernels_by_hand as KH

#: PCIe Gen4 x16 one way, by hand: 16 GT/s x 16 lanes x 128/130 (128b/130b line code) / 8 bits = 31.5 GB/s
PCIE4 = 16e9 * 16 * 128 / 130 / 8
PCIE5 = 32e9 * 16 * 128 / 130 / 8        # an H100 SXM's host link (NVIDIA H100 datasheet)

SEQ = 4096


def _single_gpu_step(batch=1, grad_accum=8, mfu=0.4):
    # one GPU, no pipeline, no data parallelism: no communication at all, so the step is pure compute
    return step_time("llama-2-7b", "H100 SXM", None, batch=batch, seq=SEQ, grad_accum=grad_accum, kernel_efficiency=mfu)


def _single_gpu_mfu_by_hand(batch=1):
    """The step's MFU on one GPU: the model's FLOPs over the peak x the compute time (issue 34,
    tests/_kernels_by_hand.py): Linear layers at 0.4 x their GEMMs' efficiency (``batch`` x 4,096 tokens,
    Llama-2-7B's widths), the attention core's causal half at FlashAttention-2's 294 TFLOP/s x 3 / 3.5 (H100, 4K),
    the memory-bound kernels at the HBM bandwidth."""
    m = L.get_model("llama-2-7b")
    attention = 3 * 4 * SEQ * m.heads * m.head_dim * m.layers          # the whole matrix, 3 passes
    model = L.training_flops_per_token(m, seq=SEQ)
    g = KH.layer_gemm_eff(m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn_hidden, tp=1, tokens=batch * SEQ,
                          ridge=989.4 / 3.35)
    # and the memory-bound kernels (llmsizing.pointwise) at 3.35 TB/s: 32 layers (MLP 11,008, no GQA), the
    # embedding and the loss over 32,000 logits
    pw = (m.layers * KH.pointwise_layer_bytes(m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn_hidden)
          + sum(KH.pointwise_end_bytes(m.hidden, m.vocab)))
    seconds_per_token = ((model - attention) / (989.4e12 * 0.4 * g) + attention / 2 / (294e12 * 3 / 3.5)
                         + pw / KH.H100_HBM)
    return model / (989.4e12 * seconds_per_token)


def test_single_gpu_step_gives_back_its_mfu_and_training_time_days():
    st = _single_gpu_step()
    assert st.comm_s == 0 and st.bubble == 0
    r = run_from_step("llama-2-7b", st, tokens=1e9, gpu="H100 SXM", seq=SEQ)
    assert isinstance(r, StepRun)
    mfu = _single_gpu_mfu_by_hand()
    assert r.mfu == pytest.approx(mfu, rel=1e-9)
    ref = training_time("llama-2-7b", tokens=1e9, gpu="H100 SXM", n_gpus=1, seq=SEQ, mfu=r.mfu)
    assert r.time.days == pytest.approx(ref.days, rel=1e-12)
    assert r.time.cost_usd == pytest.approx(ref.cost_usd, rel=1e-12)


def test_days_are_steps_times_step_seconds_by_hand():
    st = _single_gpu_step(batch=2, grad_accum=4)
    tokens = 3e9
    r = run_from_step("llama-2-7b", st, tokens=tokens, gpu="H100 SXM", seq=SEQ, extra_s=1.5)
    per_step = 2 * SEQ * 4                              # micro-batch x seq x micro-batches x dp(1)
    assert r.tokens_per_step == per_step
    assert r.steps == pytest.approx(tokens / per_step)
    assert r.time.days == pytest.approx(tokens / per_step * (st.step_s + 1.5) / 86400, rel=1e-12)
    # the MFU falls in proportion to the longer step
    assert r.mfu == pytest.approx(_single_gpu_mfu_by_hand(2) * st.step_s / (st.step_s + 1.5), rel=1e-9)


def test_band_is_the_calibrated_relative_spread():
    # the range of an MFU predicted from a layout (issue 34), read from data/intervals.csv by hand: the BF16 row
    # of area training-layout
    import csv
    from pathlib import Path

    with open(Path(__file__).resolve().parents[1] / "data" / "intervals.csv", newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if (r["area"], r["group"]) == ("training-layout", "bf16"))
    low, high = float(row["low"]), float(row["high"])
    assert low < 1 < high
    r = run_from_step("llama-2-7b", _single_gpu_step(), tokens=1e9, gpu="H100 SXM", seq=SEQ)
    assert r.time.days_low == pytest.approx(r.time.days / high)
    assert r.time.days_high == pytest.approx(r.time.days / low)


def test_gpu_count_comes_from_the_layout():
    par = L.Parallel(tp=8, pp=16, dp=128, zero=1, sp=True)
    st = step_time("llama-3.1-405b", "H100 SXM", par, batch=1, seq=8192, grad_accum=16, kernel_efficiency=0.5, overlap=0.5,
                   recompute="full")
    r = run_from_step("llama-3.1-405b", st, tokens=15.6e12, gpu="H100 SXM", seq=8192, recompute="full")
    assert r.time.n_gpus == 16384
    assert r.tokens_per_step == 16 * 8192 * 128          # 16M-token batch of the Llama 3 paper
    # the step's busy time includes a 1F1B bubble: 126 layers on 16 stages, 8 on fourteen, 7 on the last two,
    # the last with the output layer, 0.608 of a layer by FLOPs a token (4,202.7M / 6,912.3M,
    # test_llama3_405b_step.py), x 3/4 with full recomputation (the layers' forward runs twice, the output
    # layer's once): the fill and drain pass the 15 other stages once each at their own speed (session 39),
    # (13 x 8 + 7 + 7 + 0.456) / 8 / 16 = 0.925 of the compute, not (pp - 1) / m = 15/16
    h = 4202.7 / 6912.3 * 3 / 4
    assert st.bubble == pytest.approx((13 * 8 + 7 + 7 + h) / 8 / 16, rel=0.005) and st.bubble < 15 / 16
    # a bubble and recomputation can only lower the MFU below the compute efficiency
    assert r.mfu < 0.5 * 6 / 8


def _fake_offload(down, adam, up):
    return OffloadTime(1.0, 1.0, 1.0, down, up, adam)


def test_offload_exposed_by_hand():
    st = _single_gpu_step()                             # busy time = compute
    busy = st.busy_s
    # copies shorter than the busy time hide; the host step does not
    assert offload_exposed_s(_fake_offload(busy / 2, 3.0, 0.5), st) == pytest.approx(3.5)
    # copies longer than the busy time leak out
    assert offload_exposed_s(_fake_offload(busy + 2.0, 3.0, 0.5), st) == pytest.approx(5.5)
    # delayed update hides everything that fits behind the busy time
    assert offload_exposed_s(_fake_offload(busy / 4, busy / 4, busy / 4), st, delayed_update=True) == 0.0
    assert offload_exposed_s(_fake_offload(busy, 3.0, 0.5), st, delayed_update=True) == pytest.approx(3.5)


def test_offload_real_zero1_mistral():
    par = L.Parallel(dp=1, zero=1, offload="optimizer")
    st = step_time("mistral-7b", "H100 SXM", par, batch=1, seq=SEQ, grad_accum=64, kernel_efficiency=0.5)
    o = offload_time("mistral-7b", par, grad_accum=64, gpu="H100 SXM")
    n = L.get_model("mistral-7b").n_params
    # by hand: 2 bytes per parameter each way over the H100's PCIe Gen5 x16, 63.0 GB/s; CPU Adam 30 bytes per
    # parameter at 40 GB/s
    assert o.grads_down_s == pytest.approx(2 * n / PCIE5)
    assert offload_exposed_s(o, st) == pytest.approx(30 * n / 40e9 + 2 * n / PCIE5)
    gen4 = offload_time("mistral-7b", par, grad_accum=64, host_link_gbps=PCIE4 / 1e9)
    assert gen4.grads_down_s == pytest.approx(2 * n / PCIE4)


def test_validation():
    st = _single_gpu_step()
    with pytest.raises(TypeError, match="step"):
        run_from_step("llama-2-7b", "fast", tokens=1e9, gpu="H100 SXM", seq=SEQ)
    with pytest.raises(ValueError, match="tokens"):
        run_from_step("llama-2-7b", st, tokens=-1, gpu="H100 SXM", seq=SEQ)
    with pytest.raises(ValueError, match="extra_s"):
        run_from_step("llama-2-7b", st, tokens=1e9, gpu="H100 SXM", seq=SEQ, extra_s=-1)
    with pytest.raises(ValueError, match="MFU"):                 # a step of another model: MFU > 1
        run_from_step("llama-3.1-405b", st, tokens=1e9, gpu="H100 SXM", seq=SEQ)
    with pytest.raises(TypeError, match="offload"):
        offload_exposed_s(None, st)
    with pytest.raises(TypeError, match="step"):
        offload_exposed_s(_fake_offload(1, 1, 1), None)


def test_render_prediction_check_shows_the_ratio():
    from llmsizing.charts import render_prediction_check

    rows = [dict(label="a run", gpu_hours=300.0, gpu_hours_low=240.0, gpu_hours_high=400.0, published_gpu_hours=200.0)]
    view = render_prediction_check(rows)
    assert "1.50x (1.20 to 2.00)" in view.summary          # 300/200, 240/200, 400/200
    assert view.png()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="lacks"):
        render_prediction_check([dict(label="x", gpu_hours=1.0)])
    with pytest.raises(ValueError, match="published_gpu_hours"):
        render_prediction_check([{**rows[0], "published_gpu_hours": 0}])


from hypothesis import given, settings, strategies as st_  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(batch=st_.integers(1, 8), accum=st_.integers(1, 64), eff=st_.floats(0.05, 1.0),
       extra=st_.floats(0.0, 1e3, allow_subnormal=False), tokens=st_.floats(1e6, 1e13))

def test_run_from_step_fuzz(batch, accum, eff, extra, tokens):
    st = step_time("llama-2-7b", "A100 80GB", None, batch=batch, seq=2048, grad_accum=accum, kernel_efficiency=eff)
    # no communication and no bubble on one GPU: the MFU is the step's own (its compute's; issue 34: no longer
    # the kernel efficiency itself, tests/test_kernels.py), diluted by the extra seconds
    mfu = st.mfu * st.step_s / (st.step_s + extra)
    from llmsizing._validate import MIN_FRACTION
    from llmsizing.mfu import layout_range_factors
    low_end = mfu * layout_range_factors("A100 80GB", "bf16")[0]
    if abs(low_end / MIN_FRACTION - 1) < 1e-9:
        return                          # on the refusal's edge to rounding: either answer is right
    if low_end < MIN_FRACTION:
        # so diluted that the range's low end is an MFU training_time refuses: said, not clamped
        with pytest.raises(ValueError, match="implies an MFU"):
            run_from_step("llama-2-7b", st, tokens=tokens, gpu="A100 80GB", seq=2048, extra_s=extra)
        return
    r = run_from_step("llama-2-7b", st, tokens=tokens, gpu="A100 80GB", seq=2048, extra_s=extra)
    assert r.mfu == pytest.approx(mfu, rel=1e-9)
    assert 0 < r.time.days_low <= r.time.days <= r.time.days_high
    assert r.time.mfu_high <= 1.0
    assert r.time.cost_usd == pytest.approx(r.time.gpu_hours * r.time.price_usd_per_gpu_hour)
