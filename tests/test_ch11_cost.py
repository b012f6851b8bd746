"""Chapter 11 "Cost" (llmsizing.cost and its charts and widget): expected values derived by hand."""

import pytest
from conftest import pooled_layout_factors
from hypothesis import strategies as st

from llmsizing import charts, cost, get_model
from llmsizing.flops import training_flops_per_token
from llmsizing.planner import plan
from llmsizing.time_cost import cost_by_gpu, training_time

H100_PEAK, B200_PEAK = 989.4e12, 2250e12         # data/gpus.csv, dense BF16 (datasheets)
H100_PRICE, B200_PRICE = 3.99, 6.69              # data/gpu_prices.csv: Lambda's 8-GPU list prices of 2026-09-20


# ----------------------------------------------------------------------------- reserved vs on-demand
def test_effective_price_by_hand():
    # a 30% discount used 60% of the time: 2.99 x 0.7 / 0.6
    assert cost.effective_price_usd_per_gpu_hour(2.99, discount=0.3, utilisation=0.6) == pytest.approx(3.488333333)
    assert cost.effective_price_usd_per_gpu_hour(2.99) == 2.99                    # on-demand: pay what you use
    assert cost.reserved_breakeven_utilisation(0.3) == pytest.approx(0.7)
    # at the break-even utilisation the reserved hour costs exactly the on-demand hour
    assert cost.effective_price_usd_per_gpu_hour(4.0, discount=0.25, utilisation=0.75) == pytest.approx(4.0)


@pytest.mark.parametrize("kw, word", [(dict(discount=1.5), "discount"), (dict(utilisation=0), "utilisation"),
                                      (dict(utilisation=1.2), "utilisation"), (dict(discount=-0.1), "discount")])
def test_effective_price_refuses_bad_input(kw, word):
    with pytest.raises(ValueError, match=word):
        cost.effective_price_usd_per_gpu_hour(2.0, **kw)


# ----------------------------------------------------------------------------- GPU types: cost per job
def test_b200_vs_h100_at_the_same_mfu():
    c = cost.compare_gpus("H100 SXM", "B200")
    assert c.price_ratio == pytest.approx(6.69 / 3.99)
    assert c.speedup == pytest.approx(2250 / 989.4)
    assert c.cost_ratio == pytest.approx((6.69 / 3.99) / (2250 / 989.4))           # 0.737: B200 ~26% cheaper
    assert 0.73 < c.cost_ratio < 0.74
    assert c.breakeven_speedup == pytest.approx(1.6767, abs=1e-4)
    # B200 at 29.5% MFU costs what an H100 at 40% does: 0.4 x (6.69 / 2250) / (3.99 / 989.4)
    assert c.breakeven_mfu(0.4) == pytest.approx(0.4 * (6.69 / 2250) / (3.99 / 989.4))
    assert (c.price_kind_a, c.price_kind_b) == ("list", "list")


def test_seed_004_speedups():
    # MLPerf's 2.2x per server: 1.6767 / 2.2 = 0.7621; "57% faster": 1.6767 / 1.57 = 1.0680 (B200 dearer)
    assert cost.compare_gpus("H100 SXM", "B200", speedup=2.2).cost_ratio == pytest.approx(0.76213, abs=1e-4)
    assert cost.compare_gpus("H100 SXM", "B200", speedup=1.57).cost_ratio == pytest.approx(1.06796, abs=1e-4)
    # "half the time" (2x) at those prices: 0.838
    assert cost.compare_gpus("H100 SXM", "B200", speedup=2.0).cost_ratio == pytest.approx(0.83835, abs=1e-4)


def test_compare_gpus_uses_given_prices():
    c = cost.compare_gpus("H100 SXM", "B200", prices={"B200": 7.98})           # twice the H100's price
    assert c.price_ratio == pytest.approx(2.0)
    with pytest.raises(ValueError, match="speedup"):
        cost.compare_gpus("H100 SXM", "B200", speedup=0)


def test_cost_by_gpu_ranks_by_price_over_peak():
    # at one MFU, GPU-hours x price is FLOPs / (peak x MFU) x price: the ranking is price / peak
    df = cost_by_gpu("llama-3-8b", tokens=1e10, seq=4096, gpus=["H100 SXM", "B200"]).set_index("gpu")
    assert df.loc["B200", "cost_usd"] / df.loc["H100 SXM", "cost_usd"] == pytest.approx(
        (B200_PRICE / B200_PEAK) / (H100_PRICE / H100_PEAK), rel=1e-9)


def test_cost_by_gpu_when_nothing_fits():
    df = cost_by_gpu("llama-3.1-405b", tokens=1e12, seq=131072, gpus=["A10"], max_gpus=8, recompute="none")
    assert not df["fits"].any() and "max_gpus" in df["why"].iloc[0]
    # (at 131,072 tokens 512 A10s hold it since min_gpus searches context parallelism as plan() does: tp 8,
    # cp 32, ZeRO-3; at 4,194,304 no layout of up to 65,536 does, cp 32 leaving each rank 131,072 tokens)
    with pytest.raises(ValueError, match="gpus"):
        charts.render_cost_by_gpu("llama-3.1-405b", seq=4194304, gpus=["A10"])


def test_cost_by_gpu_chart_marks_a_borrowed_mfu():
    """data/published_runs.csv has no calibration run on a Blackwell or CDNA3 part (checked by hand: its B200 and
    MI300X rows, torchao's, are all held out), so the B200 and the MI300X borrow the median generation's MFU
    (chapter 10) and the figure says so on their bars and lines only; the A100, H100 and H200 have their own
    runs. A reader's ``mfu=`` borrows nothing."""
    view = charts.render_cost_by_gpu("llama-3-70b", tokens=1e11, seq=8192)
    lines = {ln.split()[0]: ln for ln in view.summary.splitlines()[1:-1]}
    assert {g for g, ln in lines.items() if "borrowed MFU" in ln} == {"B200", "MI300X"}
    labels = [t.get_text() for t in view.figure.axes[0].texts]
    assert sum(t.endswith("; borrowed MFU") for t in labels) == 2 and len(labels) == 5
    given = charts.render_cost_by_gpu("llama-3-70b", tokens=1e11, seq=8192, mfu=0.4)
    assert "borrowed" not in given.summary
    assert not any("borrowed" in t.get_text() for t in given.figure.axes[0].texts)


# ----------------------------------------------------------------------------- price x MFU
def test_cost_sensitivity_by_hand():
    F = training_flops_per_token("llama-3-70b", seq=8192)
    grid = cost.cost_sensitivity("llama-3-70b", tokens=1e12, gpu="H100 SXM", seq=8192, prices=[2.0, 4.0],
                                 mfus=[0.25, 0.5])
    assert grid.loc[0.5, 2.0] == pytest.approx(1e12 * F / (H100_PEAK * 0.5) / 3600 * 2.0, rel=1e-12)
    assert grid.loc[0.25, 2.0] == pytest.approx(2 * grid.loc[0.5, 2.0])        # half the MFU: twice the bill
    assert grid.loc[0.5, 4.0] == pytest.approx(2 * grid.loc[0.5, 2.0])         # twice the price: twice the bill
    assert grid.loc[0.25, 4.0] == pytest.approx(4 * grid.loc[0.5, 2.0])


# ----------------------------------------------------------------------------- more GPUs for the same job
def test_cost_vs_gpus_arithmetic():
    df = cost.cost_vs_gpus("llama-3-70b", tokens=1e12, gpu="H100 SXM", seq=8192, global_batch=512, tp=8, pp=4)
    assert list(df["dp"]) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]          # the global batch caps dp at 512
    assert list(df["n_gpus"]) == [32 * d for d in df["dp"]]
    assert list(df["grad_accum"]) == [512 // d for d in df["dp"]]
    # the 1F1B bubble (session 39): the fill and drain pass the three other stages once at their own speed,
    # (pp - 1) / m of the compute only if the stages were equal (Narayanan et al. 2021, Sec. 2.2). By FLOPs a
    # token: a layer 2 x 856.4M + 4 x 8,192 x 64 x 128 = 1,979.7M, the output layer on the last stage
    # 2 x 128,256 x 8,192 = 2,101.3M: the others are 3 x 20 / (20 + 1.061) = 2.849 slowest stages' worth
    # (the memory-bound kernels, the loss's among them, not counted by hand: 1%)
    others = 3 * 20 / (20 + 2101.3 / 1979.7)
    bubble = df["bubble_s"].to_numpy()
    assert bubble == pytest.approx(others / df["grad_accum"].to_numpy() * df["compute_s"].to_numpy(), rel=0.01)
    assert (bubble < 3 / df["grad_accum"].to_numpy() * df["compute_s"].to_numpy()).all()
    # compute per GPU halves as dp doubles (the same step's FLOPs over twice the GPUs)
    assert df["compute_s"].iloc[0] / df["compute_s"].iloc[1] == pytest.approx(2.0)
    # MFU = the step's model FLOPs over (step time x GPUs x peak); GPU-hours = steps x step x GPUs
    F = training_flops_per_token("llama-3-70b", seq=8192)
    step_flops = F * 512 * 8192
    steps = 1e12 / (512 * 8192)
    for r in df.itertuples():
        assert r.mfu == pytest.approx(step_flops / (r.step_s * r.n_gpus * H100_PEAK))
        assert r.gpu_hours == pytest.approx(steps * r.step_s * r.n_gpus / 3600)
        assert r.cost_usd == pytest.approx(r.gpu_hours * H100_PRICE)
        # the same job through training_time at the MFU this layout reaches costs the same
        assert r.cost_usd == pytest.approx(training_time("llama-3-70b", tokens=1e12, gpu="H100 SXM", n_gpus=r.n_gpus,
                                                         seq=8192, mfu=r.mfu).cost_usd, rel=1e-9)
    # more GPUs: fewer days, never a cheaper job; the MFU falls
    assert df["days"].is_monotonic_decreasing and df["cost_usd"].is_monotonic_increasing
    assert df["mfu"].is_monotonic_decreasing
    assert df["mfu"].iloc[0] <= 0.5                                              # compute at 50% of the peak


def test_cost_vs_gpus_carries_the_layout_range():
    # each row is a step-model prediction from a layout, so its 80% range is the one data/intervals.csv states
    # for an MFU predicted from a layout (area training-layout, the pooled row an H100 in BF16 takes: 0.7222 to
    # 1.2044 since data27b's held-out H100 BF16 row of pytorch/ao, 0.7187 to 1.2044 before it, 0.7187 to 1.2032
    # once the runs were priced on their nodes, 0.7273 to 1.2280 before; 0.8164 before issue
    # 34's FP8 sources of Dec 2026, 0.6981 with them until strata34 left the runs on stand-in efficiencies out
    # of the bounds), not the range of an MFU predicted from a run's inputs (0.7289 to 1.4409 on Hopper).
    # Days and dollars go the other way: a low MFU means more days, so low = days / high, high = days / low
    low, high = pooled_layout_factors()
    df = cost.cost_vs_gpus("llama-3-70b", tokens=1e12, gpu="H100 SXM", seq=8192, global_batch=512, tp=8, pp=4)
    assert (df["days_low"] / df["days"]).to_numpy() == pytest.approx(1 / high, rel=1e-4)
    assert (df["days_high"] / df["days"]).to_numpy() == pytest.approx(1 / low, rel=1e-4)
    assert (df["cost_usd_high"] / df["cost_usd"]).to_numpy() == pytest.approx(1 / low, rel=1e-4)
    # the planner's range for the same job is the same multiple (chapter 11 quotes both side by side)
    best = plan("llama-3-70b", tokens=1e12, gpus=("H100 SXM",), seq=8192, global_batch=512).iloc[0]
    assert best["cost_usd_high"] / best["cost_usd"] == pytest.approx(1 / low, rel=1e-4)


def test_cost_vs_gpus_refuses_a_dp_beyond_the_global_batch():
    with pytest.raises(ValueError, match="dps"):
        cost.cost_vs_gpus("llama-3-8b", tokens=1e10, gpu="H100 SXM", seq=4096, global_batch=64, dps=[128])
    with pytest.raises(ValueError, match="micro_batch"):
        cost.cost_vs_gpus("llama-3-8b", tokens=1e10, gpu="H100 SXM", seq=4096, global_batch=64, micro_batch=3)


# ----------------------------------------------------------------------------- seed 000's cost tables
def test_seed_table_arithmetic_by_hand():
    a = cost.audit_cost_table().set_index(["model", "gpus"])
    mistral = a.loc[("mistral-7b", 1)]
    assert mistral["days_from_own_tps"] == pytest.approx(1e11 / 3500 / 86400)    # 330.7, not the table's 262
    assert mistral["cost_per_day_from_price"] == pytest.approx(2.69 * 24)        # $64.56: the "$64/day" is right
    assert mistral["days"] == 262 and mistral["total_cost_usd"] == 262 * 64     # the table multiplies its own days
    big = a.loc[("llama-2-70b", 8)]
    assert big["days_from_own_tps"] == pytest.approx(1e12 / 28000 / 86400)       # 413.4: close to its 417
    # the library: GPU-hours do not depend on the count, so days x GPUs is one number per model
    for model in ("mistral-7b", "llama-2-13b", "llama-2-70b"):
        rows = a.loc[model]
        assert (rows["library_days"] * rows.index).round(6).nunique() == 1
        assert rows["library_cost_usd"].round(6).nunique() == 1


def test_seed_throughput_vs_six_n_d():
    # the calibrated MFU of 989.4 TFLOP/s over 6N + 12 L a d s FLOPs per token (PaLM, App. B); N without the
    # input embedding
    from llmsizing.time_cost import mfu_estimate

    m = get_model("llama-2-70b")
    per_token = 6 * (m.n_params - 32000 * 8192) + 12 * 80 * 64 * 128 * 4096
    mfu = mfu_estimate("llama-2-70b", gpu="H100 SXM", seq=4096).mfu
    assert 0.35 < mfu < 0.55
    by_hand = mfu * H100_PEAK / per_token                                        # ~1,000 tokens/s per GPU
    a = cost.audit_cost_table().set_index(["model", "gpus"])
    per_gpu = a.loc[("llama-2-70b", 8), "library_tokens_per_s"] / 8
    assert per_gpu == pytest.approx(by_hand, rel=1e-3)
    assert per_gpu < 1200 < 3500                                                 # the seed's 3,500 is ~3x too high


def test_audit_refuses_a_table_without_its_columns():
    with pytest.raises(ValueError, match="missing columns"):
        cost.audit_cost_table([{"model": "llama-2-7b", "tokens": 1e9}])


# ----------------------------------------------------------------------------- charts and widget
def test_sensitivity_chart_summary_is_the_library_number():
    v = charts.render_cost_sensitivity("llama-3-70b", tokens=1e12, gpu="H100 SXM", seq=8192, price=2.0, mfu=0.35,
                                       n_gpus=512)
    t = training_time("llama-3-70b", tokens=1e12, gpu="H100 SXM", n_gpus=512, seq=8192, mfu=0.35,
                      price_usd_per_gpu_hour=2.0)
    assert f"${t.cost_usd:,.0f}" in v.summary and f"{t.days:,.1f} days on 512 GPUs" in v.summary


def test_cost_widget_shows_what_the_library_computes():
    from llmsizing.widgets import cost_widget

    w = cost_widget()
    w.controls["gpu"].value = "B200"
    assert w.controls["price"].value == pytest.approx(B200_PRICE)               # the GPU brings its own price
    w.controls["mfu"].value = 0.5
    t = training_time("llama-3-70b", tokens=1e12, gpu="B200", n_gpus=1024, seq=8192, mfu=0.5)
    assert f"${t.cost_usd:,.0f}" in w.summary.value and w.error.value == ""


def test_cost_vs_gpus_chart_lists_each_count():
    v = charts.render_cost_vs_gpus("llama-3-8b", tokens=1e11, gpu="H100 SXM", seq=4096, global_batch=64, tp=2, pp=1)
    assert "128 GPUs (dp   64" in v.summary


# ----------------------------------------------------------------------------- fuzz (the harness of test_fuzz.py)
def _fuzz_specs():
    from test_fuzz import Arg, Spec, gpus, ints, lists_of, models, nums, st_ints_from

    mfu = Arg(st.floats(0.05, 1.0), st.sampled_from([0, 1.5, -0.1, "0.4", float("nan")]))
    return {
        "effective_price_usd_per_gpu_hour": Spec(cost.effective_price_usd_per_gpu_hour,
                                                 dict(price_usd_per_gpu_hour=nums(0, 100), discount=nums(0, 1),
                                                      utilisation=Arg(st.floats(0.01, 1.0),
                                                                      st.sampled_from([0, 1.5, "1", None])))),
        "compare_gpus": Spec(cost.compare_gpus, dict(gpu_a=gpus(), gpu_b=gpus(),
                                                     speedup=Arg(st.one_of(st.none(), st.floats(0.1, 10)),
                                                                 st.sampled_from([0, -1, "2", float("nan")]))),
                             aliases={"gpu_a": ("gpu",), "gpu_b": ("gpu",)}),
        "cost_sensitivity": Spec(cost.cost_sensitivity,
                                 dict(model=models(), tokens=nums(1e6, 1e14), gpu=gpus(), seq=ints(1, 131072),
                                      prices=lists_of(nums(0, 50)), mfus=lists_of(mfu))),
        "cost_vs_gpus": Spec(cost.cost_vs_gpus,
                             dict(model=models(), tokens=nums(1e6, 1e13), gpu=gpus(), seq=ints(128, 8192),
                                  global_batch=st_ints_from([8, 16, 64]), tp=st_ints_from([1, 2, 8]),
                                  pp=st_ints_from([1, 2]),     # (zero=0 is valid: not st_ints_from's invalid 0)
                                  zero=Arg(st.sampled_from([1, 3]), st.sampled_from([-1, 4, 2.0, "2", None])))),
        "render_cost_vs_gpus": Spec(charts.render_cost_vs_gpus,
                                    dict(model=models(), tokens=nums(1e6, 1e13), gpu=gpus(), seq=ints(128, 8192),
                                         global_batch=st_ints_from([8, 64]), tp=st_ints_from([1, 8]),
                                         pp=st_ints_from([1, 2]))),
        "render_cost_sensitivity": Spec(charts.render_cost_sensitivity,
                                        dict(model=models(), tokens=nums(1e6, 1e14), gpu=gpus(), seq=ints(1, 131072),
                                             mfu=mfu, n_gpus=ints(1, 65536))),
    }


@pytest.mark.parametrize("name", ["effective_price_usd_per_gpu_hour", "compare_gpus", "cost_sensitivity",
                                  "cost_vs_gpus", "render_cost_vs_gpus", "render_cost_sensitivity"])
def test_fuzz_ch11(name):
    from test_fuzz import EXAMPLES, _run

    spec = _fuzz_specs()[name]
    _run(name, spec, EXAMPLES if not name.startswith(("render", "cost_vs")) else max(5, EXAMPLES // 5))


def test_cost_figures_title_the_tokens_as_the_prose_does():
    """Chapter 11's three cost figures titled their token budgets '1e+12 tokens' and '1e+11 tokens' (read38);
    the planner's figure and the prose say 1T and 100B: 10**12 tokens is 1T, 10**11 is 100B."""
    from llmsizing.charts import render_cost_by_gpu, render_cost_sensitivity, render_cost_vs_gpus

    by_gpu = render_cost_by_gpu("llama-3-70b", tokens=1e11, seq=8192)
    grid = render_cost_sensitivity("llama-3-70b", tokens=1e12, gpu="H100 SXM", seq=8192)
    sweep = render_cost_vs_gpus("llama-3-70b", tokens=1e12, gpu="H100 SXM", seq=8192, global_batch=512, tp=8,
                                pp=4)
    titles = [ax.get_title(loc="left") for v in (by_gpu, grid) for ax in v.figure.axes]
    titles.append(sweep.figure._suptitle.get_text())
    assert any("100B tokens" in t for t in titles) and sum("1T tokens" in t for t in titles) == 2
    assert not any("e+1" in t for t in titles)
