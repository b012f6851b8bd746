"""Issue 34, serving: the step overhead per engine and batching era, and the 80% range checked by leaving one
source out at a time (llmsizing.serve_calibration). Expected values are derived here from published figures
and datasheets, or from the definition of the conformal order statistics, never read off the code."""

from __future__ import annotations

import math
import statistics

import pandas as pd
import pytest

from llmsizing import serve as S
from llmsizing import serve_calibration as C
from llmsizing.catalog import DATA_DIR

H100_BW = 3.35e12                            # B/s, H100 SXM datasheet
L3_8B_BYTES = 2 * 8_030_261_248              # Llama-3-8B in bf16
L3_8B_KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2    # K and V x layers x KV heads x head_dim x 2 bytes


def test_vllm_overhead_derived_by_hand_from_a_published_itl():
    """InferenceBench's concurrency sweep (vLLM 0.21.0, Llama-3.1-8B, one H100 SXM, one request): median time
    per output token 6.48 ms. At batch 1 a step reads the 16.06 GB of weights at u_w of 3.35 TB/s and the KV
    cache of the mean context (256 + 128 tokens) at u_kv, then pays the engine's fixed step time:
    ITL = W / (B u_w) + K c / (B u_kv) + t0, so t0 = 6.48 ms - 16.06e9 / (3.35e12 u_w) - 50.3e6 / (3.35e12
    u_kv) at the shared fitted u_w and u_kv (the fit bounds t0 at 0 from below). The overhead fitted for vLLM
    (continuous batching) must be that size to within 1 ms (it also fits vLLM's A100 figures), at least 2 ms
    below TensorRT-LLM v0.5/v0.6's static-batching overhead, and the default prediction (vLLM, named in the
    result) must land within 15% of the published 6.48 ms: the old pooled default (u_w 0.855, 3.22 ms per
    step) gave 8.8 ms, 36% slow."""
    itl_pub, ctx = 6.48e-3, 256 + 128
    t0_hand = itl_pub - L3_8B_BYTES / (H100_BW * S.MBU_DEFAULT) - L3_8B_KV_PER_TOKEN * ctx / (
        H100_BW * S.ATTENTION_BU_DEFAULT)
    t0 = S.ENGINE_STEP_OVERHEAD_S
    assert t0["vLLM/continuous"] == pytest.approx(max(t0_hand, 0.0), abs=1e-3)
    assert t0["TensorRT-LLM/static"] > t0["vLLM/continuous"] + 2e-3
    s = S.serving("llama-3-8b", "H100 SXM", batch=1, prompt=256, output=256)
    assert s.engine == "vLLM/continuous" and s.step_overhead_s == t0["vLLM/continuous"]
    assert s.itl_s == pytest.approx(itl_pub, rel=0.15)
    old_pooled = L3_8B_BYTES / (H100_BW * 0.855) + L3_8B_KV_PER_TOKEN * ctx / H100_BW + 3.22e-3
    assert old_pooled / itl_pub > 1.3


def test_engine_names_and_eras():
    """A bare engine name takes its continuous-batching fit where it has one (TensorRT-LLM: Baseten's in-flight
    row), else its only era (llama.cpp: llama-bench's static runs); an engine/era key is taken as is; every
    result names its engine; an unknown engine is refused by serving()."""
    assert S.serving("llama-3-8b", "H100 SXM", engine="TensorRT-LLM").engine == "TensorRT-LLM/continuous"
    assert S.serving("llama-3-8b", "H100 SXM", engine="TensorRT-LLM/static").engine == "TensorRT-LLM/static"
    assert S.serving("llama-3-8b", "H100 SXM", engine="llama.cpp").engine == "llama.cpp/static"
    assert S.serving("llama-3-8b", "H100 SXM", engine="vLLM/continuous").engine == "vLLM/continuous"
    assert S.serving("llama-3-8b", "H100 SXM", step_overhead_s=0.002).engine == "given"
    assert S.STEP_OVERHEAD_S == S.ENGINE_STEP_OVERHEAD_S["vLLM/continuous"]
    assert S.serving("llama-3-8b", "H100 SXM").to_frame().loc["engine", "value"] == "vLLM/continuous"
    with pytest.raises(ValueError, match="engine"):
        S.serving("llama-3-8b", "H100 SXM", engine="Triton")
    df = pd.read_csv(DATA_DIR / "serving_published.csv")
    assert set(df["batching"]) == {"static", "continuous"}
    # the static-batching benchmarks named in the rows' sources: gptSessionBenchmark and llama-bench
    static = df[df["batching"] == "static"]
    assert static["engine"].isin(["TensorRT-LLM", "llama.cpp"]).all()


def test_conformal_quantiles_are_the_order_statistics():
    """n = 9 residuals at 80%: the floor(10 x 0.1) = 1st and ceil(10 x 0.9) = 9th smallest; n = 19: the 2nd
    and the 18th; n = 8 cannot give a finite 80% interval (ceil(9 x 0.9) = 9 > 8)."""
    assert C.conformal_quantiles([5, 1, 3, 2, 4, 9, 7, 8, 6]) == (1, 9)
    assert C.conformal_quantiles(range(1, 20)) == (2, 18)
    with pytest.raises(ValueError, match="log_residuals"):
        C.conformal_quantiles(range(8))
    with pytest.raises(ValueError, match="coverage"):
        C.conformal_quantiles(range(20), coverage=1.5)


def test_loso_never_fits_on_the_source_it_predicts(monkeypatch):
    """Each source's figures are predicted by a fit that did not see that source: the fit is replaced by a
    stand-in that records its rows (and returns fixed constants), and every fold's rows must lack exactly the
    held-out source."""
    calls = []
    fixed = dict(weights_bu=0.8, attention_bu=0.9, prefill_mfu=0.5, engines={"vLLM/continuous": 1e-3},
                 eras={"continuous": 1e-3, "static": 4e-3}, any=2e-3)

    def fake(rows):
        calls.append({r.url for r in rows})
        return fixed

    monkeypatch.setattr(C, "fit_constants", fake)
    full, res = C.loso_residuals()
    df = C._read()
    trainable = {r.url for r in df.itertuples() if C._trainable(r)}
    assert calls[0] == trainable                            # the full fit
    assert len(calls) == 1 + len(trainable)                 # one refit per source the full fit learnt from
    assert all(len(trainable - c) == 1 for c in calls[1:])
    assert {frozenset(trainable - c) for c in calls[1:]} == {frozenset({u}) for u in trainable}
    # every speed of every source is predicted once; ratios of two runs are not speeds
    speeds = df[~df["metric"].isin(C.RATIO_METRICS)]
    assert sorted(res["row"]) == sorted(speeds.index) and set(res["source"]) == set(speeds["url"])


def test_stored_coverage_equals_the_cross_validation():
    """data/serving_intervals.csv states what interval_table finds from the stored held-out residuals
    (data/serving_loso.csv; tools/calibrate_serving.py --check keeps those current): the overall coverage is
    the share of held-out rows inside the range built without their own source, and the stated widths are
    high / low."""
    loso = pd.read_csv(DATA_DIR / "serving_loso.csv")
    stored = pd.read_csv(DATA_DIR / "serving_intervals.csv").set_index("group")
    table, checked = C.interval_table(loso[["row", "source", "engine", "batching", "metric", "kind",
                                            "calibrated", "log_ratio"]])
    table = table.set_index("group")
    cov = "coverage_out_of_sample"
    assert stored.loc["overall", cov] == pytest.approx(checked["inside"].mean(), abs=1e-3)
    assert stored.loc["overall", cov] == pytest.approx(loso["inside"].mean(), abs=1e-3)
    for g in table.index:
        assert stored.loc[g, cov] == pytest.approx(table.loc[g, cov], nan_ok=True)
        if g != "overall":
            width = stored.loc[g, "high"] / stored.loc[g, "low"]
            assert stored.loc[g, "width"] == pytest.approx(width, rel=2e-3)
    assert stored.loc["overall", "n_rows"] == len(loso) and stored.loc["overall", "n_sources"] == \
        loso["source"].nunique()
    # each row was checked against a range built without its source: a range from the other sources' residuals
    for r in checked.sample(5, random_state=0).itertuples():
        others = loso[loso["source"] != r.source]
        q = C._group_quantiles(others)
        g = next(g for g in C._chain(r.calibrated, r.metric) if g in q)
        assert (r.low, r.high) == pytest.approx((math.exp(q[g][0]), math.exp(q[g][1])), abs=1e-4)


def test_serving_range_takes_its_group_and_names_the_engine():
    """The default engine (vLLM) is calibrated: its ITL runs from central / high to central / low of the
    calibrated range; an engine the fit has not seen is priced at its era's pooled overhead with the range
    measured on engines the fit had not seen."""
    lo, hi = C._range_of(True, "itl_s")
    assert (lo, hi) == (S.RANGE_LOW, S.RANGE_HIGH)
    kw = dict(batch=1, prompt=1024, output=256)
    r = C.serving_range("llama-3-8b", "H100 SXM", **kw)
    c = r.central
    assert r.engine == "vLLM/continuous" and r.engine_overhead_known and r.coverage == 0.8
    assert r.itl_s == pytest.approx((c.itl_s / hi, c.itl_s / lo))
    assert r.output_tokens_per_s == pytest.approx((c.output_tokens_per_s * lo, c.output_tokens_per_s * hi))
    other = C.serving_range("llama-3-8b", "H100 SXM", engine="DeepSpeed-FastGen", **kw)
    assert not other.engine_overhead_known and other.engine.startswith("DeepSpeed-FastGen/continuous")
    assert other.central.step_overhead_s == S.ERA_STEP_OVERHEAD_S["continuous"]
    u_lo, u_hi = C._range_of(False, "itl_s")
    assert other.itl_s == pytest.approx((other.central.itl_s / u_hi, other.central.itl_s / u_lo))
    with pytest.raises(TypeError, match="engine"):
        C.serving_range("llama-3-8b", "H100 SXM", engine=3)
    with pytest.raises(ValueError, match="batching"):
        C.serving_range("llama-3-8b", "H100 SXM", engine="DeepSpeed-FastGen", batching="dynamic")


def test_gpu_count_at_both_ends_of_the_range():
    """at_speed divides every time by the engine's speed ratio (half the speed: twice the ITL and TTFT); the
    GPU count for 1,000 users of Llama-3-70B at ITL <= 50 ms rises at the slow end and falls at the fast
    end."""
    s = S.serving("llama-3-70b", "H100 SXM", tp=4, batch=16)
    slow = S.at_speed(s, 0.5)
    assert slow.itl_s == pytest.approx(2 * s.itl_s) and slow.ttft_s == pytest.approx(2 * s.ttft_s)
    assert slow.output_tokens_per_s == pytest.approx(s.output_tokens_per_s / 2)
    with pytest.raises(ValueError, match="speed"):
        S.at_speed(s, 0)
    r = S.replicas_range("llama-3-70b", "H100 SXM", users=1000, prompt=1024, output=256, itl_s=0.05,
                         ttft_s=1.0)
    assert r.gpus == S.replicas_for("llama-3-70b", "H100 SXM", users=1000, prompt=1024, output=256,
    itl_s=0.05,
                                    ttft_s=1.0).gpus
    assert r.gpus_low <= r.gpus <= r.gpus_high and r.gpus_low < r.gpus_high
    assert r.engine == "vLLM/continuous" and (r.speed_low, r.speed_high) == (S.RANGE_LOW, S.RANGE_HIGH)
    assert r.slow.serving.itl_s <= 0.05 and r.fast.serving.itl_s <= 0.05


def test_the_mean_answer_carries_the_stated_range():
    """Issue 38: replicas_for without a percentile gave no range (chapter 15 called replicas_range for its
    counts). Now the mean answer carries gpus_low/gpus_high: replicas_range's, and the percentile path's at
    p50 with no occupancy ceiling (the same mean answer). Each end is Little's law by hand on that end's
    layout: ceil(rate x R / batch) replicas of tp GPUs, with R the end's request time."""
    load = dict(requests_per_s=10, prompt=1024, output=256, itl_s=0.05, ttft_s=1.0)
    plan = S.replicas_for("llama-3-70b", "H100 SXM", **load)
    r = S.replicas_range("llama-3-70b", "H100 SXM", **load)
    assert (plan.gpus_low, plan.gpus, plan.gpus_high) == (r.gpus_low, r.gpus, r.gpus_high)
    assert plan.gpus_low <= plan.gpus < plan.gpus_high
    p50 = S.replicas_for("llama-3-70b", "H100 SXM", **load, percentile=50, occupancy=1.0)
    assert (p50.gpus_low, p50.gpus, p50.gpus_high) == (plan.gpus_low, plan.gpus, plan.gpus_high)
    for end, gpus in ((r.fast, plan.gpus_low), (r.slow, plan.gpus_high)):
        s = end.serving
        by_hand = max(1, math.ceil(10 * s.request_s / s.batch - 1e-9), math.ceil(10 / s.requests_per_s - 1e-9))
        assert gpus == by_hand * s.gpus
    # old calls: the same plan otherwise, and with_range=False leaves the range out as before
    bare = S.replicas_for("llama-3-70b", "H100 SXM", **load, with_range=False)
    assert (bare.gpus_low, bare.gpus_high) == (None, None)
    assert (bare.gpus, bare.tp, bare.batch, bare.replicas) == (plan.gpus, plan.tp, plan.batch, plan.replicas)
    assert {"gpus_low", "gpus_high"} <= set(plan.to_frame().index)


def _order_statistic_bounds(values, coverage=0.8):
    """The split-conformal pair written out (Lei et al. 2018, Sec. 2.2): with n residuals sorted and
    a = 1 - coverage, the floor((n + 1) a / 2)-th and the ceil((n + 1)(1 - a / 2))-th smallest (1-based)."""
    v = sorted(values)
    n, a = len(v), 1 - coverage
    lo_rank = math.floor(round((n + 1) * a / 2, 9))
    hi_rank = math.ceil(round((n + 1) * (1 - a / 2), 9))
    return v[lo_rank - 1], v[hi_rank - 1]


def test_pooled_range_and_its_coverage_recomputed_by_hand():
    """The stated serving range is pooled (serve_calibration.SERVING_GROUPING, issue 34): recompute it and its
    coverage from the stored held-out residuals without the module's interval code. Each source's speeds are
    checked against the order statistics of every other source's held-out log ratios."""
    assert C.SERVING_GROUPING == "pooled"
    loso = pd.read_csv(DATA_DIR / "serving_loso.csv")
    stored = pd.read_csv(DATA_DIR / "serving_intervals.csv").set_index("group")
    inside, widths = 0, []
    for src, part in loso.groupby("source"):
        lo, hi = _order_statistic_bounds(loso.loc[loso["source"] != src, "log_ratio"])
        inside += int(((part["log_ratio"] >= lo) & (part["log_ratio"] <= hi)).sum())
        widths += [math.exp(hi - lo)] * len(part)
    n = len(loso)
    assert stored.loc["overall", "coverage_out_of_sample"] == pytest.approx(inside / n, abs=1e-3)
    assert stored.loc["overall", "width_out_of_sample"] == pytest.approx(statistics.median(widths), abs=1e-3)
    lo, hi = _order_statistic_bounds(loso["log_ratio"])
    assert (stored.loc["all", "low"], stored.loc["all", "high"]) == pytest.approx((math.exp(lo), math.exp(hi)),
                                                                                  abs=6e-4)
    # issue 34's bar is judged by the median held-out width, nested as the training checks are (ranges42):
    # test_nested_check_recomputed_by_hand_from_the_stored_bounds; the plain check's width is not the bar's
    assert inside / n >= 0.75


def test_nested_check_recomputed_by_hand_from_the_stored_bounds():
    """audit34 finding 2 (ranges42): serving's coverage and median width are stated from the check nested as
    training's (serve_calibration.NESTED_GROUP, tools/calibrate_serving.py; the refits take about a minute, so
    the tool's --check recomputes them, not this test). Recount them here from data/serving_loso.csv's
    per-speed bounds: inside when low <= exp(log_ratio) <= high; the width is high / low; each speed one
    unit."""
    loso = pd.read_csv(DATA_DIR / "serving_loso.csv")
    stored = pd.read_csv(DATA_DIR / "serving_intervals.csv").set_index("group")
    row = stored.loc[C.NESTED_GROUP]
    ratio = loso["log_ratio"].map(math.exp)
    inside = (ratio >= loso["nested_low"] - 1e-4) & (ratio <= loso["nested_high"] + 1e-4)
    assert (inside == loso["nested_inside"]).all()
    assert int(inside.sum()) == 57 and len(loso) == int(row["n_rows"]) == 66      # 57 of 66 (serve43: 58)
    assert row["coverage_out_of_sample"] == pytest.approx(inside.mean(), abs=1e-3)
    width = statistics.median(loso["nested_high"] / loso["nested_low"])
    assert row["width_out_of_sample"] == pytest.approx(width, abs=1e-3)
    assert row["n_sources"] == loso["source"].nunique()
    # one range per held-out source (its speeds judged by the same bounds), and the nested bounds are not the
    # plain ones copied: a source's nested bounds come from other refits than its plain bounds do
    per_src = loso.groupby("source")[["nested_low", "nested_high"]].nunique()
    assert (per_src == 1).all().all()
    assert ((loso["nested_low"] - loso["low"]).abs() > 1e-3).any()
    # the stated range does not change (it is built from every held-out residual): its row keeps no bounds
    assert math.isnan(row["low"]) and math.isnan(row["high"])
    assert row["width"] == stored.loc["overall", "width"]
    # issue 34's bar for serving, judged as training's (the median width of the ranges each held-out speed was
    # judged by): since serve43 (FP8 compute at the MFU x the training calibration's FP8 share) both hold,
    # 86.4% at 1.74x (87.9% before the refit that priced Megatron-LM's backward TP overlap moved Hopper's
    # BF16 kernel efficiency; before serve43: 83.3% at 1.98x, the width missed); chapters 15 and the appendix
    # glue that verdict, so a refit that misses it again must change their prose too
    assert C.MIN_COVERAGE == 0.75 and C.MAX_WIDTH == 1.8
    assert inside.mean() >= C.MIN_COVERAGE and width <= C.MAX_WIDTH


def test_chapter_15s_out_of_source_figures_read_the_nested_check():
    """issue 34 (nest42): published_serving carries the stored nested bounds (no refit), which chapter 15's
    table, held-out count, AWQ and H200 sentences, Mixtral row and worst source read. Recounted by hand from
    data/serving_loso.csv: TensorRT-LLM v0.5.0's H200 page (7 speeds) has 4 inside its plain range and 5
    inside its nested one (0.7842-1.3381; 0.7699 before the refit that priced Megatron-LM's backward TP
    overlap);
    LMDeploy's W4A16 page, 2 speeds at 1.415 and 1.376 (1.414 and 1.377 before), is outside both (its nested top 1.2818; 1.2847 before): the worst source, 0 of 2; of the 49 ranged rows outside the first
    calibration set, 42 land inside nested (39 plain). (Before serve43: 3 and 5, 0.722-1.3077; 1.501 and
    1.354 under 1.3502; 40 and 38.)"""
    loso = pd.read_csv(DATA_DIR / "serving_loso.csv").set_index("row")
    pub = C.published_serving()
    for col in ("nested_low", "nested_high", "nested_inside"):
        assert (pub.loc[loso.index, col] == loso[col]).all()
    assert pub.loc[~pub.index.isin(loso.index), "nested_inside"].isna().all()   # ratios of two runs: no range
    h200 = loso[loso["source"].str.contains("1555478c")]
    assert len(h200) == 7 and int(h200["inside"].sum()) == 4 and int(h200["nested_inside"].sum()) == 5
    assert set(h200["nested_low"]) == {0.7842} and set(h200["nested_high"]) == {1.3381}
    awq = loso[loso["source"].str.contains("w4a16")]
    assert len(awq) == 2 and not awq["nested_inside"].any() and not awq["inside"].any()
    assert sorted(round(math.exp(x), 3) for x in awq["log_ratio"]) == [1.376, 1.415]
    assert set(awq["nested_high"]) == {1.2818}
    worst = loso.groupby("source")["nested_inside"].mean()
    assert worst.min() == 0 and worst.idxmin() == awq["source"].iloc[0] and sum(worst > 0) == len(worst) - 1
    held = pub[(pub["calibration"] == "no") & pub["nested_inside"].notna()]
    assert len(held) == 49 and int((held["nested_inside"] == True).sum()) == 42     # noqa: E712
    assert int((held["inside"] == True).sum()) == 39                                # noqa: E712


def test_the_grouping_used_is_one_the_rule_accepts():
    """issue 34: a grouping of the range is used only where it narrows the median range at 75% measured coverage
    or more. data/serving_groupings.csv holds every grouping measured; the one used covers 75% or more, and no
    grouping that covers 75% is narrower out of sample; the grouping used before (calibrated engine x ttft or
    per-token) was wider on both counts. These are the plain check's figures; since grp43 the rule reads the
    nested ones (tests/test_serving_grouping_nested.py), and pooled passes both readings."""
    g = pd.read_csv(DATA_DIR / "serving_groupings.csv").set_index("grouping")
    assert set(g.index) == set(C.GROUPINGS) and g["used"].sum() == 1
    used = g[g["used"]].iloc[0]
    assert used.name == C.SERVING_GROUPING and used["coverage_out_of_sample"] >= 0.75
    ok = g[g["coverage_out_of_sample"] >= 0.75]
    assert used["median_width_out_of_sample"] <= ok["median_width_out_of_sample"].min() + 1e-9
    before = g.loc["calibrated-kind"]
    assert before["median_width"] > used["median_width"]
    assert before["median_width_out_of_sample"] > used["median_width_out_of_sample"]
    assert g["source"].notna().all() and g["as_of"].notna().all()


def _row(**kw):
    """One row of data/serving_published.csv's shape (a namedtuple, as the fit reads rows)."""
    base = dict(engine="vLLM", batching="continuous", model="llama-3-8b", gpu="H100 SXM", tp=1,
                weights="bf16", kv_cache="bf16", compute="bf16", prompt=1024, output=1, batch=1,
                metric="ttft_s", value=0.0, attention_kernel="grouped", calibration="no", known_out="")
    return next(pd.DataFrame([{**base, **kw}]).itertuples())


def test_fit_mfu_recovers_an_mfu_set_by_hand():
    """A time to first token built by hand at an MFU of 0.5 must fit back to 0.5. Llama-3-8B (config: 32
    layers, hidden 4,096, vocabulary 128,256, 8,030,261,248 parameters), a 1,024-token prompt on one H100 SXM
    (989.4 TFLOP/s bf16 dense, datasheet): 2 FLOPs per matmul weight per token, the input embedding being a
    lookup, plus causal attention, 4 x layers x hidden FLOPs per key with (n + 1) / 2 keys on average. One
    chunk, no tensor parallelism: TTFT = FLOPs / (peak x 0.5) + vLLM's step overhead (the prefill is
    compute-bound: its 15 GB of weights take under 7 ms at any fitted u_w, the FLOPs about 30 ms)."""
    n, layers, hidden, vocab, params = 1024, 32, 4096, 128_256, 8_030_261_248
    flops = n * 2 * (params - vocab * hidden) + 4 * layers * hidden * n * (n + 1) / 2
    t0 = S.ENGINE_STEP_OVERHEAD_S["vLLM/continuous"]
    ttft = flops / (989.4e12 * 0.5) + t0
    held = dict(weights_bu=S.MBU_DEFAULT, attention_bu=S.ATTENTION_BU_DEFAULT,
                step_overhead_s={"vLLM/continuous": t0})
    assert C.fit_mfu([_row(value=ttft)], **held) == pytest.approx(0.5, abs=2e-3)
    assert C.fit_mfu([_row(value=ttft * 0.5 / 0.7)], **held) > 0.6    # a faster engine fits a higher MFU
    with pytest.raises(ValueError, match="rows"):
        C.fit_mfu([], **held)
    with pytest.raises(KeyError, match="SGLang/continuous"):
        C.fit_mfu([_row(value=ttft, engine="SGLang")], **held)


def test_mfu_by_compute_brackets_the_shared_mfu():
    """Fitted alone, the FP8 and the 16-bit rows bracket the shared MFU, and, FP8 compute being priced at the
    MFU times the training calibration's FP8 share (serve43: hardware.dtype_kernel_share, 0.521 / 0.683),
    they agree within 7% of it (0.655 and 0.615 about 0.638, 6.3%; 0.648 and 0.615 about 0.636 at 0.521 /
    0.678, before the refit that priced Megatron-LM's backward TP overlap; with one MFU for both, before serve43, the FP8
    rows set 0.500 and the 16-bit ones 0.609, 18% apart: FP8 kernels reach a smaller share of their doubled
    peak); the groups must partition the rows the fit learns from, and every such row together must give
    back the stored MFU (the joint fit's optimum, to the search's rounding)."""
    t = C.mfu_by_compute()
    lo, hi = sorted((t.loc["fp8", "prefill_mfu"], t.loc["16-bit", "prefill_mfu"]))
    assert lo < S.MFU_DEFAULT < hi
    assert (hi - lo) / S.MFU_DEFAULT < 0.07
    assert t.loc["fp8", "n_rows"] + t.loc["16-bit", "n_rows"] == t.loc["all", "n_rows"]
    # (the joint search and this one-dimensional one stop 0.002 apart since serve43: 0.634 against 0.636)
    assert t.loc["all", "prefill_mfu"] == pytest.approx(S.MFU_DEFAULT, abs=2.5e-3)
    with pytest.raises(ValueError, match="groups\\['fp4'\\]"):
        C.mfu_by_compute({"fp4": ("fp4",)})


def _stored_range():
    """The pooled 80% range as ``tools/calibrate_serving.py`` stored it (data/serving_intervals.csv)."""
    iv = pd.read_csv(DATA_DIR / "serving_intervals.csv").set_index("group")
    return iv.loc["all", "low"], iv.loc["all", "high"], iv.loc["all", "width"]


def test_cost_by_gpu_range_derived_by_hand_from_the_stored_range():
    """srv33 (issue 34, "every worked budget shows its range"): the H100 row of chapter 15's cost table
    (Llama-3-70B bf16, 1,024 in / 256 out, ITL <= 50 ms, TTFT <= 1 s). Its point estimate is re-priced here
    from the layout the row names (serving() at its tp and batch: the replica's $/h x decode step / batch),
    and the range from the stored bounds (0.772, 1.309 today): a cost per token is the price over the speed,
    so low = usd / 1.309 and high = usd / 0.772 ($1.449 -> $1.107-$1.877); an ITL is a time, divided the same
    way (49.7 ms -> 37.9-64.3 ms); tokens/s are a rate, multiplied (418 -> 323-547). The cost's range must be
    exactly as wide as the stored range (1.309 / 0.772 = 1.695x): no range of its own, none widened."""
    lo, hi, width = _stored_range()
    df = S.serving_cost_by_gpu("llama-3-70b", gpus=["H100 SXM"], prompt=1024, output=256, itl_s=0.05, ttft_s=1.0)
    r = df.loc["H100 SXM"]
    s = S.serving("llama-3-70b", "H100 SXM", tp=int(r["tp"]), batch=int(r["batch"]), prompt=1024, output=256)
    usd = 3.99 * s.tp * s.decode_step_s / s.running_batch / 3600 * 1e6    # the catalogue's $3.99/h per H100
    assert s.price_usd_per_gpu_hour == 3.99 and r["usd_per_million_output_tokens"] == pytest.approx(usd, rel=1e-12)
    assert r["usd_per_million_output_tokens_low"] == pytest.approx(usd / hi, rel=1e-12)
    assert r["usd_per_million_output_tokens_high"] == pytest.approx(usd / lo, rel=1e-12)
    assert r["usd_per_million_output_tokens_low"] == pytest.approx(1.449 / 1.309, abs=2e-3)   # the docstring's
    assert r["usd_per_million_output_tokens_high"] == pytest.approx(1.449 / 0.772, abs=2e-3)
    assert r["itl_s_low"] == pytest.approx(s.itl_s / hi, rel=1e-12)
    assert r["itl_s_high"] == pytest.approx(s.itl_s / lo, rel=1e-12)
    assert r["output_tokens_per_s_per_gpu_low"] == pytest.approx(s.output_tokens_per_s_per_gpu * lo, rel=1e-12)
    assert r["output_tokens_per_s_per_gpu_high"] == pytest.approx(s.output_tokens_per_s_per_gpu * hi, rel=1e-12)
    # the input price is the prefill's time (the TTFT's range; pooled, the same bounds today)
    assert r["usd_per_million_input_tokens_low"] == pytest.approx(s.usd_per_million_input_tokens / hi, rel=1e-12)
    ratio = r["usd_per_million_output_tokens_high"] / r["usd_per_million_output_tokens_low"]
    assert ratio == pytest.approx(width, abs=1e-3) and ratio == pytest.approx(hi / lo, rel=1e-12)
    # the same bounds serving_range states for this layout's speed (one range, two views of it)
    sr = C.serving_range("llama-3-70b", "H100 SXM", tp=int(r["tp"]), batch=int(r["batch"]), prompt=1024,
                         output=256)
    assert (r["itl_s_low"], r["itl_s_high"]) == pytest.approx(sr.itl_s, rel=1e-12)


def test_reasoning_cost_range_derived_by_hand_from_the_stored_range():
    """reasoning_cost's 4,096-token row (Llama-3-70B fp8, H100 SXM): low = usd / 1.309 and high = usd / 0.772
    ($0.9373 -> $0.716-$1.214 per million); an answer's price the same over its 4,096 tokens; its minutes are
    (TTFT + 4,096 x ITL) / 60 with each time divided by the speed's end."""
    lo, hi, _ = _stored_range()
    r = S.reasoning_cost("llama-3-70b", "H100 SXM", weights="fp8", outputs=(4096,)).loc[4096]
    s = S.serving("llama-3-70b", "H100 SXM", tp=int(r["tp"]), batch=int(r["batch"]), weights="fp8",
                  prompt=1024, output=4096)
    usd = s.usd_per_million_output_tokens
    assert r["usd_per_million_output_tokens"] == pytest.approx(usd, rel=1e-12)
    assert r["usd_per_million_output_tokens_low"] == pytest.approx(usd / hi, rel=1e-12)
    assert r["usd_per_million_output_tokens_high"] == pytest.approx(usd / lo, rel=1e-12)
    assert r["usd_per_million_output_tokens_low"] == pytest.approx(0.9373 / 1.309, abs=1e-3)   # the docstring's
    assert r["usd_per_answer_high"] == pytest.approx(usd / lo * 4096 / 1e6, rel=1e-12)
    assert r["answer_min_low"] == pytest.approx((s.ttft_s + 4096 * s.itl_s) / hi / 60, rel=1e-12)
    assert r["answer_min_high"] == pytest.approx((s.ttft_s + 4096 * s.itl_s) / lo / 60, rel=1e-12)
    assert r["itl_s_low"] < r["itl_s"] < r["itl_s_high"]


def test_cost_tables_still_refuse_bad_input_and_keep_their_columns():
    """The range columns are added, none renamed, and bad input raises as before, naming the parameter; a GPU
    where no layout meets the target has NaN at both ends too (never a number without a layout)."""
    df = S.serving_cost_by_gpu("llama-3-8b", gpus=["A10"], itl_s=0.05, prompt=1024, output=256)
    for col in ("tp", "batch", "itl_s", "ttft_s", "output_tokens_per_s_per_gpu", "price_usd_per_gpu_hour",
                "price_kind", "price_as_of", "usd_per_million_output_tokens", "usd_per_million_input_tokens",
                "note"):
        assert col in df.columns
    none = S.serving_cost_by_gpu("llama-3.1-405b", gpus=["A10"], itl_s=0.05)
    assert none.loc["A10", "note"]
    assert math.isnan(none.loc["A10", "usd_per_million_output_tokens_low"])
    assert math.isnan(none.loc["A10", "usd_per_million_output_tokens_high"])
    with pytest.raises(ValueError, match="itl_s"):
        S.serving_cost_by_gpu("llama-3-8b", gpus=["H100 SXM"], itl_s=-0.05)
    with pytest.raises(ValueError, match="ttft_s"):
        S.serving_cost_by_gpu("llama-3-8b", gpus=["H100 SXM"], ttft_s=0.0)
    with pytest.raises((ValueError, TypeError), match="tps"):
        S.serving_cost_by_gpu("llama-3-8b", gpus=["H100 SXM"], tps=[0])
    with pytest.raises((ValueError, TypeError), match="outputs"):
        S.reasoning_cost("llama-3-8b", "H100 SXM", outputs=(0,))
    with pytest.raises((ValueError, TypeError), match="outputs"):
        S.reasoning_cost("llama-3-8b", "H100 SXM", outputs=4096)
    r = S.reasoning_cost("llama-3-8b", "H100 SXM", outputs=(4096,))
    for col in ("tp", "batch", "max_batch", "itl_s", "answer_min", "usd_per_million_output_tokens",
                "usd_per_answer"):
        assert col in r.columns


def test_serving_ends_derived_by_hand_from_the_stored_range():
    """srv33b (issue 34): serving_ends on chapter 15's Llama-3-8B on one H100 (1,024 + 256 tokens). At batch
    1 the ITL 7.205 ms is a time, so its ends are 7.205 / 1.309 = 5.504 ms and 7.205 / 0.772 = 9.333 ms
    (the docstring's); tokens/s are a rate, times the ends. At the KV room's batch the cost per million output
    tokens, re-priced here by hand as $3.99/h x 1 GPU x decode step / batch, has low = usd / 1.309 and high =
    usd / 0.772, exactly the stored width apart (the cheap end is the fast engine's). The input price takes
    the TTFT's pair (the same pooled bounds today)."""
    lo, hi, width = _stored_range()
    one = S.serving("llama-3-8b", "H100 SXM", batch=1, prompt=1024, output=256)
    e = S.serving_ends(one)
    assert e["itl_s_low"] == pytest.approx(one.itl_s / hi, rel=1e-12)
    assert e["itl_s_high"] == pytest.approx(one.itl_s / lo, rel=1e-12)
    assert (e["itl_s_low"], e["itl_s_high"]) == pytest.approx((7.205e-3 / 1.309, 7.205e-3 / 0.772), abs=2e-6)
    assert e["decode_step_s_high"] == pytest.approx(one.decode_step_s / lo, rel=1e-12)   # a time too
    assert e["output_tokens_per_s_low"] == pytest.approx(one.output_tokens_per_s * lo, rel=1e-12)
    assert e["output_tokens_per_s_high"] == pytest.approx(one.output_tokens_per_s * hi, rel=1e-12)
    cap = S.serving_sweep("llama-3-8b", "H100 SXM", prompt=1024, output=256)[-1]
    usd = 3.99 * 1 * cap.decode_step_s / cap.running_batch / 3600 * 1e6    # the catalogue's $3.99/h
    assert cap.gpus == 1 and cap.usd_per_million_output_tokens == pytest.approx(usd, rel=1e-12)
    c = S.serving_ends(cap, ("usd_per_million_output_tokens", "usd_per_million_input_tokens"))
    assert c["usd_per_million_output_tokens_low"] == pytest.approx(usd / hi, rel=1e-12)
    assert c["usd_per_million_output_tokens_high"] == pytest.approx(usd / lo, rel=1e-12)
    assert c["usd_per_million_output_tokens_high"] / c["usd_per_million_output_tokens_low"] == pytest.approx(
        width, abs=1e-3)
    assert c["usd_per_million_input_tokens_low"] == pytest.approx(cap.usd_per_million_input_tokens / hi, rel=1e-12)
    assert set(c) == {f"{n}_{x}" for n in ("usd_per_million_output_tokens", "usd_per_million_input_tokens")
                      for x in ("low", "high")}
    # no layout: NaN at both ends; a figure with no range (a memory, a batch) is refused, naming `names`
    assert all(math.isnan(v) for v in S.serving_ends(None).values())
    with pytest.raises(ValueError, match="names"):
        S.serving_ends(one, ("kv_batch",))
    with pytest.raises(TypeError, match="s must be"):
        S.serving_ends("llama-3-8b")


def test_fleet_cost_range_derived_by_hand_at_both_ends_of_the_stored_range():
    """srv33b (issue 34): chapter 15's mean answer for 1,000 users of Llama-3-70B on H100s (1,024 + 256 tokens,
    ITL <= 50 ms, TTFT <= 1 s). Each end is the fleet sized again at the stored bound's speed (replicas_for at
    ``_speed`` = 1.309 and 0.772, read here from the CSV); its cost is GPUs x $3.99/h over the tokens it serves,
    requests/s x 256 x 3600 an hour: the docstring's 36 x 3.99 / (77.97 x 256 x 3600) x 1e6 = $2.00 at the
    fast end. The low is the fast end's, and ``with_range=False`` leaves both None."""
    lo, hi, _ = _stored_range()
    load = dict(users=1000, prompt=1024, output=256, itl_s=0.05, ttft_s=1.0)
    plan = S.replicas_for("llama-3-70b", "H100 SXM", **load)
    for end, speed in (("low", hi), ("high", lo)):
        p = S.replicas_for("llama-3-70b", "H100 SXM", with_range=False, _speed=speed, **load)
        by_hand = p.gpus * 3.99 / (p.requests_per_s * 256 * 3600) * 1e6
        assert getattr(plan, f"fleet_usd_per_million_output_tokens_{end}") == pytest.approx(by_hand, rel=1e-12)
        assert getattr(plan, f"gpus_{end}") == p.gpus
    assert plan.fleet_usd_per_million_output_tokens_low == pytest.approx(36 * 3.99 / (77.97 * 256 * 3600) * 1e6,
                                                                          rel=1e-3)
    assert (plan.fleet_usd_per_million_output_tokens_low < plan.fleet_usd_per_million_output_tokens
            < plan.fleet_usd_per_million_output_tokens_high)
    p95 = S.replicas_for("llama-3-70b", "H100 SXM", percentile=95, **load)       # the fleet module's path too
    assert p95.fleet_usd_per_million_output_tokens_low < p95.fleet_usd_per_million_output_tokens
    bare = S.replicas_for("llama-3-70b", "H100 SXM", with_range=False, **load)
    assert bare.fleet_usd_per_million_output_tokens_low is None is bare.fleet_usd_per_million_output_tokens_high
