"""Chapter 15's "Checked against published figures" as the prose quotes it (issue 38: long code belongs in the
library): ``data/serving_published.csv`` run through the fitted model, the rows the prose quotes one by one,
the known misses and the out-of-sample check stored in ``data/serving_intervals.csv`` and
``data/serving_loso.csv``. :func:`published_check` returns a :class:`~llmsizing.prose.ChapterText`
and raises :class:`~llmsizing.prose.ProseOutOfDate` (an AssertionError) naming a claim of the prose that the
data or a refit no longer bear out. Nothing here computes a new quantity: it formats and compares what
:func:`~llmsizing.serve.serving` and the stored checks return.
"""

from __future__ import annotations

import math

from .catalog import DATA_DIR, get_gpu, resolve_model
from .serve import serving
from .prose import ChapterText, prose_check
from .serve_chapter import _holds

__all__ = ["published_check"]


def _pub_row(pub, model, gpu, metric, **match):
    rows = pub[(pub["model"] == model) & (pub["gpu"] == gpu) & (pub["metric"] == metric)]
    for k, val in match.items():
        rows = rows[rows[k] == val]
    if rows.empty:
        raise ValueError(f"serving_published.csv has no {metric} row of {model} on {gpu} with {match}")
    return rows.iloc[0]


def _published_rows(pub, v, out) -> None:
    """The table, the sources' counts, and the rows the prose quotes one by one (vLLM's batch 1 and batch
    gain, TensorRT-LLM's grouped-query read, its all-reduces, LMDeploy's AWQ rows, the known misses)."""
    from . import alpha_beta, network
    from .inference import decode_weight_bytes_read, weights_bytes
    from .serve import (
        ATTENTION_BU_DEFAULT,
        ENGINE_STEP_OVERHEAD_S,
        ERA_STEP_OVERHEAD_S,
        RANGE_HIGH,
        RANGE_LOW,
    )
    from .serve_calibration import predict_row
    from .serve_fit import FITTED

    # low, high, inside: the range each speed was judged by in the nested check (stored; what the book states)
    table = pub.assign(
        set=pub["calibration"].map({"yes": "calibration", "no": "other"}),
        low=pub["nested_low"],
        high=pub["nested_high"],
        inside=pub["nested_inside"].map({True: "yes", False: "NO"}).fillna("-"),
        # (a version's long note, e.g. an unpinned release's, stays in the CSV: the table shows the release)
        engine_version=pub["engine_version"].map(lambda v: str(v).split(" (")[0] if len(str(v)) > 20 else v),
    )
    out.append(
        f"80% range of a calibrated engine's per-token speed: {RANGE_LOW:.2f}-{RANGE_HIGH:.2f} x the model"
    )
    out.append(
        table[
            [
                "engine",
                "engine_version",
                "model",
                "gpu",
                "tp",
                "weights",
                "batch",
                "prompt",
                "output",
                "metric",
                "value",
                "predicted",
                "speed_ratio",
                "loso_ratio",
                "low",
                "high",
                "inside",
            ]
        ].to_string(
            index=False,
            na_rep="-",  # (a gain, a ratio of two speeds, is judged by no range)
            formatters={
                "value": "{:g}".format,
                "predicted": "{:.4g}".format,
                "speed_ratio": "{:.2f}".format,
                "loso_ratio": "{:.2f}".format,
                "low": "{:.2f}".format,
                "high": "{:.2f}".format,
            },
        )
    )
    far = pub[(pub["nearest_ratio"] < 1 / 1.5) | (pub["nearest_ratio"] > 1.5)]
    v["n"] = f"{len(pub)}"
    # two rows are ratios of two published speeds (the vLLM sweep's batch-8 gain, the XQA kernel's gain): the
    # fit and the range count only the others, the speeds and times, which the prose says
    gains = pub["metric"].isin(["batch_gain", "grouped_attention_gain"])
    v["n_speeds"], v["n_gains"] = f"{(~gains).sum()}", f"{gains.sum()}"
    v["near"] = f"{len(pub) - len(far)}"
    v["engines"] = f"{pub['engine'].nunique()}"
    rest = pub[pub["known_out"] == ""]  # every row but the known misses
    v["nout"] = f"{(pub['known_out'] != '').sum()}"
    v["rest_lo"] = f"{rest['nearest_ratio'].min():.2f}"
    v["rest_hi"] = f"{rest['nearest_ratio'].max():.2f}"
    v["ntrain"] = (
        f"{((pub['calibration'] == 'yes') | ((pub['known_out'] == '') & ~pub['metric'].isin(['batch_gain', 'grouped_attention_gain']))).sum()}"  # noqa: E501
    )
    # vLLM's single request on an A100 40GB: its rate as a share of the bandwidth, over all the weights (as
    # source counts) and over the bytes a step reads (all but the input embedding's table: what u_w counts)
    b1 = _pub_row(pub, "llama-3-8b", "A100 40GB", "output_tokens_per_s")
    gain = _pub_row(pub, "llama-3-8b", "A100 40GB", "batch_gain")
    bw = get_gpu("A100 40GB").memory_bandwidth_gbps * 1e9
    v["b1"] = f"{b1['value']:.0f}"
    v["pred_b1"] = f"{b1['predicted']:.0f}"
    v["b1_ratio"] = f"{b1['speed_ratio']:.2f}"
    v["share"] = f"{b1['value'] * weights_bytes('llama-3-8b') / bw:.0%}"
    v["share_read"] = f"{b1['value'] * decode_weight_bytes_read('llama-3-8b', 1) / bw:.0%}"
    v["gain"] = f"{gain['value']:.1f}"
    v["pred_gain"] = f"{gain['predicted']:.1f}"
    # Llama-2-70B at batch 480 on 4 H100s (TensorRT-LLM 0.6.1): the KV cache read once per query head, or once
    # per KV head
    per_gpu = "output_tokens_per_s_per_gpu"
    trt70 = _pub_row(pub, "llama-2-70b", "H100 SXM", per_gpu, batch=480)
    kw70 = dict(
        tp=4,
        weights="fp8",
        kv_cache="fp8",
        compute="fp8",
        prompt=128,
        output=2048,
        batch=480,
        engine="TensorRT-LLM",
    )
    per_head = serving("llama-2-70b", "H100 SXM", attention_kernel="per-query-head", **kw70)
    grouped = serving("llama-2-70b", "H100 SXM", attention_kernel="grouped", **kw70)
    v["trt70_b"] = f"{trt70['batch']}"
    v["trt70_tp"] = f"{trt70['tp']}"
    v["trt70_ratio"] = f"{trt70['speed_ratio']:.2f}"
    v["trt70_grouped_ratio"] = f"{trt70['value'] / grouped.output_tokens_per_s_per_gpu:.2f}"
    v["trt70_step"] = f"{trt70['batch'] / (trt70['value'] * trt70['tp']) * 1e3:.0f} ms"
    v["trt70_step_model"] = f"{per_head.decode_step_s * 1e3:.0f} ms"
    v["trt70_step_grouped"] = f"{grouped.decode_step_s * 1e3:.0f} ms"
    xqa = pub[pub["metric"] == "grouped_attention_gain"].iloc[0]
    v["xqa"] = f"{xqa['value']:.1f}"
    v["pred_xqa"] = f"{xqa['predicted']:.1f}"
    v["xqa_b"] = f"{xqa['batch']}"
    m70 = resolve_model("llama-2-70b")
    v["l2_heads"] = f"{m70.heads}"
    v["l2_kv_heads"] = f"{m70.kv_heads}"
    v["l2_group"] = f"{m70.heads // m70.kv_heads}"
    # the attention share's search box (serve_fit.FITTED): the fitted value is inside it, not at a bound
    attn_box = next((lo, hi) for name, lo, hi in FITTED if name == "attention_bu")
    _holds(attn_box[0] < ATTENTION_BU_DEFAULT < attn_box[1], "the attention share is inside its search box")
    v["attn_box"] = f"{attn_box[0]:g} to {attn_box[1]:g}"
    # the step overhead, fitted per engine and way of batching; the search's floor is 0
    for key, e in (
        ("trt", "TensorRT-LLM/static"),
        ("trt_ifb", "TensorRT-LLM/continuous"),
        ("vllm", "vLLM/continuous"),
        ("lcpp", "llama.cpp/static"),
        ("lmd", "LMDeploy/continuous"),
        ("sgl", "SGLang/continuous"),
    ):
        v[f"t0_{key}"] = f"{ENGINE_STEP_OVERHEAD_S[e] * 1e3:.2f} ms"
    at_bound = [e.split("/")[0] for e, t in ENGINE_STEP_OVERHEAD_S.items() if t < 1e-5]
    v["t0_bound"] = (
        f"{' and '.join(at_bound)} at the bound: {'its' if len(at_bound) == 1 else 'their'} rows "
        "need nothing beyond the reads"
        if at_bound
        else "no engine at the bound of 0"
    )
    v["t0_era_cont"] = f"{ERA_STEP_OVERHEAD_S['continuous'] * 1e3:.2f} ms"
    v["t0_era_static"] = f"{ERA_STEP_OVERHEAD_S['static'] * 1e3:.2f} ms"
    # a first-token latency at the knee of NCCL's curve: a 2 MiB all-reduce, protocols against one line
    ttft70 = _pub_row(pub, "llama-2-70b", "H100 SXM", "ttft_s", prompt=128)
    v["ttft70"] = f"{ttft70['value'] * 1e3:.0f} ms"
    v["pred_ttft70"] = f"{ttft70['predicted'] * 1e3:.0f} ms"
    v["ttft70_ratio"] = f"{ttft70['speed_ratio']:.2f}"
    v["ttft70_long_ratio"] = (
        f"{_pub_row(pub, 'llama-2-70b', 'H100 SXM', 'ttft_s', prompt=2048)['speed_ratio']:.2f}"
    )
    v["ttft70_a100_ratio"] = (
        f"{_pub_row(pub, 'llama-2-70b', 'A100 80GB', 'ttft_s', prompt=128)['speed_ratio']:.2f}"
    )
    nccl_log = alpha_beta.parse_nccl_tests(
        alpha_beta.published_log("a100_sxm4_8gpu_nvlink_oci_all_reduce.txt")
    )
    two_mib = 2 * 2**20
    link8 = network.group_link("A100 40GB", network.get_node(gpu="A100 40GB"), size=8)
    v["ar_meas"] = f"{nccl_log.set_index('size_bytes').loc[two_mib, 'time_us']:.0f} us"
    v["ar_line"] = f"{network.collective_time_s('all-reduce', two_mib, 8, link8) * 1e6:.0f} us"
    v["ar_proto"] = (
        f"{network.collective_time_s('all-reduce', two_mib, 8, link8, protocols=True) * 1e6:.0f} us"
    )
    # training keeps the single line: how far short it is at PyTorch DDP's bucket sizes, and where it agrees
    from .zero_traffic import TORCH_DDP_BUCKET_BYTES

    def short_by(size):
        return nccl_log.set_index("size_bytes").loc[size, "time_us"] / (
            network.collective_time_s("all-reduce", size, 8, link8) * 1e6)

    mids, bigs = (16 * 2**20, 32 * 2**20), [s for s in nccl_log["size_bytes"] if s >= 64 * 2**20]
    v["ar_line_short"] = f"{short_by(mids[0]):.2f} and {short_by(mids[1]):.2f}"
    v["ar_line_big"] = f"{max(abs(short_by(s) - 1) for s in bigs):.0%}"
    v["ddp_bucket"] = f"{TORCH_DDP_BUCKET_BYTES / 2**20:.0f} MiB"
    _holds(min(short_by(s) for s in mids) > 1.2 and mids[0] < TORCH_DDP_BUCKET_BYTES < mids[1],
           "the single line is short of the log at 16 and 32 MiB, either side of DDP's bucket")
    ttft70_s = serving(
        "llama-2-70b",
        "H100 SXM",
        tp=4,
        weights="fp8",
        kv_cache="fp8",
        compute="fp8",
        prompt=128,
        output=1,
        attention_kernel="per-query-head",
        engine="TensorRT-LLM",
    )
    v["ttft70_comm"] = f"{ttft70_s.prefill_comm_s * 1e3:.1f} ms"
    v["ttft70_msg"] = f"{128 * m70.hidden * 2 / 2**20:g} MiB"
    v["ttft70_calls"] = f"{2 * m70.layers}"
    # LMDeploy's AWQ rows: at its own overhead, with none, and at the static benchmarks' pooled overhead
    awq7 = _pub_row(pub, "llama-2-7b", "RTX 4090", "output_tokens_per_s", weights="int4-g128")
    awq13 = _pub_row(pub, "llama-2-13b", "RTX 4090", "output_tokens_per_s", weights="int4-g128")
    awq_kw = dict(weights="int4-g128", kv_cache="fp16", compute="fp16", prompt=1, output=512)
    awq_s0 = serving("llama-2-7b", "RTX 4090", step_overhead_s=0.0, **awq_kw)
    v["awq"] = f"{awq7['value']:g}"
    v["awq_ratio"] = f"{awq7['speed_ratio']:.2f}"
    v["awq13_ratio"] = f"{awq13['speed_ratio']:.2f}"
    v["awq_ratio0"] = f"{awq7['value'] / awq_s0.output_tokens_per_s:.2f}"
    awq_static = [
        r["value"] / predict_row(r, step_overhead_s=ERA_STEP_OVERHEAD_S["static"]) for r in (awq7, awq13)
    ]
    v["awq_static"] = " and ".join(f"{x:.1f}" for x in awq_static)
    _holds(
        min(awq_static) > RANGE_HIGH > max(awq7["speed_ratio"], awq13["speed_ratio"]),
        "the AWQ rows would be outside the range at the static pooled overhead, inside at their own",
    )
    _holds(
        all(RANGE_LOW <= r["speed_ratio"] <= RANGE_HIGH and not r["nested_inside"] for r in (awq7, awq13)),
        "the AWQ rows are inside the stated range but outside the range built without their page",
    )
    # three decimals: the two ratios and the nested range's top are read side by side in the prose
    v["awq_loso"] = f"{awq7['loso_ratio']:.3f} and {awq13['loso_ratio']:.3f}"
    v["awq_high"] = f"{awq7['nested_high']:.3f}"
    _known_misses(pub, per_gpu, v)


def _known_misses(pub, per_gpu, v) -> None:
    """The A100 prefill miss and the H200 launch table's two misses."""
    import pandas as pd

    pre70 = _pub_row(pub, "llama-2-70b", "A100 80GB", per_gpu, batch=120)
    kw = dict(
        tp=4,
        weights="fp16",
        kv_cache="fp16",
        compute="fp16",
        prompt=2048,
        output=128,
        batch=120,
        attention_kernel="per-query-head",
        engine="TensorRT-LLM",
    )
    pre70_s = serving("llama-2-70b", "A100 80GB", **kw)
    left = (
        pre70["batch"] * pre70["output"] / (pre70["value"] * pre70["tp"])
        - pre70_s.output * pre70_s.decode_step_s
    )
    v["pre70_ratio"] = f"{pre70['speed_ratio']:.2f}"
    v["pre70_share"] = f"{pre70_s.batch_prefill_s / pre70_s.cycle_s:.0%}"
    v["pre70_left"] = f"{left:.0f} s"
    v["pre70_model"] = f"{pre70_s.batch_prefill_s:.0f} s"
    rejected = pd.read_csv(DATA_DIR / "serving_published_rejected.csv")
    v["rejected"] = f"{len(rejected)}"
    h200 = pub[(pub["gpu"] == "H200") & (pub["metric"] == per_gpu)]
    h200_rest = h200[h200["known_out"] == ""]  # the launch table's rows other than its two known misses
    h200_out = (h200_rest["nested_inside"] == False).sum()  # noqa: E712 (NaN is not a miss)
    v["h200_rest"] = (
        f"{len(h200_rest)} rows land at {h200_rest['speed_ratio'].min():.2f} to "
        f"{h200_rest['speed_ratio'].max():.2f}"
        + (
            f", {h200_out} of them just outside the range built without the page "
            f"({h200_rest['nested_low'].iloc[0]:.2f}-{h200_rest['nested_high'].iloc[0]:.2f})"
            if h200_out
            else ", all inside"
        )
    )
    v["h200_13b"] = f"{_pub_row(pub, 'llama-2-13b', 'H200', per_gpu, batch=1024)['speed_ratio']:.2f}"
    v["h200_70b"] = f"{_pub_row(pub, 'llama-2-70b', 'H200', per_gpu, batch=512, tp=2)['speed_ratio']:.2f}"


def _out_of_sample(v, out) -> None:
    """The 80% range checked by leaving one source out at a time, plain and nested (serving_intervals.csv,
    data/serving_loso.csv), and ``serving_range`` for a calibrated engine and one the fit has not seen."""
    import pandas as pd

    from .serve_calibration import COVERAGE, MAX_WIDTH, MIN_COVERAGE, NESTED_GROUP, serving_range

    sr_kw = dict(batch=1, prompt=1024, output=256)
    sr_vllm = serving_range("llama-3-8b", "H100 SXM", **sr_kw)
    sr_unseen = serving_range("llama-3-8b", "H100 SXM", engine="DeepSpeed-FastGen", **sr_kw)
    for key, sr in (("vllm", sr_vllm), ("unseen", sr_unseen)):
        v[f"sr_{key}_c"] = f"{sr.central.itl_s * 1e3:.2f} ms"
        v[f"sr_{key}"] = f"{sr.itl_s[0] * 1e3:.2f}-{sr.itl_s[1] * 1e3:.2f} ms"
    out.append(
        f"Llama-3-8B, H100, batch 1, 1,024 + 256 tokens: ITL {sr_vllm.central.itl_s * 1e3:.2f} ms on vLLM "
        f"(stated {sr_vllm.itl_s[0] * 1e3:.2f}-{sr_vllm.itl_s[1] * 1e3:.2f} ms); an engine not calibrated: "
        f"{sr_unseen.central.itl_s * 1e3:.2f} ms (stated {sr_unseen.itl_s[0] * 1e3:.2f}-"
        f"{sr_unseen.itl_s[1] * 1e3:.2f} ms)"
    )
    iv = pd.read_csv(DATA_DIR / "serving_intervals.csv").set_index("group")
    loso = pd.read_csv(DATA_DIR / "serving_loso.csv")
    overall = iv.loc["overall"]
    v["width"] = f"{overall['width']:.2f}"
    v["iv_rows"] = f"{overall['n_rows']}"
    prose_check(v["iv_rows"] == v["n_speeds"],
                "that every published speed or time, and no gain, is held out once")
    v["iv_sources"] = f"{overall['n_sources']}"
    v["iv_all"] = f"{iv.loc['all', 'low']:.2f}-{iv.loc['all', 'high']:.2f}"
    v["iv_all_n"] = f"{iv.loc['all', 'n_rows']}"
    by_src = loso.assign(src=loso["source"].str.replace("https://", "").str.slice(0, 48)).groupby("src")
    # per source: rows inside the range it was judged by, nested (what the book states) and plain
    out.append(
        by_src.agg(
            rows=("nested_inside", "size"),
            inside=("nested_inside", "sum"),
            inside_plain=("inside", "sum"),
            median_ratio=("log_ratio", lambda s: math.exp(s.median())),
        ).to_string()
    )
    v["cv_worst"] = f"{1 - 2 * (1 - COVERAGE):.0%}"  # CV+ / jackknife+: 1 - 2 alpha
    v["iv_worst"] = f"{by_src['nested_inside'].mean().min():.0%}"  # nested, as stated
    # the nested check (serve_calibration.nested_check, stored by tools/calibrate_serving.py): what the book
    # states, and what the aim is judged by: the median width of the ranges each held-out speed was judged by
    nested = iv.loc[NESTED_GROUP]
    cov, width = nested["coverage_out_of_sample"], nested["width_out_of_sample"]
    v["cov_nested"] = f"{cov:.0%}"
    v["nested_w"] = f"{width:.2f}"
    v["nested_in"] = f"{round(cov * nested['n_rows'])}"
    v["plain_in"] = f"{round(overall['coverage_out_of_sample'] * overall['n_rows'])}"
    v["aim_cov"] = f"{MIN_COVERAGE:.0%}"
    v["aim_w"] = f"{MAX_WIDTH:g}"
    v["iv_verdict"] = (
        "both hold, the width narrowly (the chapter's opening says on what it rests)"
        if cov >= MIN_COVERAGE and width <= MAX_WIDTH
        else "the coverage holds, the width does not: not met"
        if cov >= MIN_COVERAGE
        else "the width holds, the coverage does not: not met"
        if width <= MAX_WIDTH
        else "neither holds"
    )


def published_check() -> ChapterText:
    """Chapter 15's "Checked against published figures": ``data/serving_published.csv`` run through the fitted
    model (:func:`serve_calibration.published_serving`), the rows the prose quotes, the known misses and the
    stored out-of-sample check. Value names follow the chapter's ``ch15_pub_``; the report is the table, the
    ``serving_range`` line and the per-source coverage."""
    from .serve_calibration import published_serving

    v, out = {}, []
    pub = published_serving()
    _published_rows(pub, v, out)
    _out_of_sample(v, out)
    return ChapterText(v, "\n".join(out))
