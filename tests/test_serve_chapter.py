"""Chapter 15's sentences built in the library (serve_chapter, serve_chapter_check; issue 38): each quoted
figure worked again by hand from the data row it comes from, not from the functions' own arithmetic."""

from __future__ import annotations

import csv
import re
from functools import lru_cache

import pytest

from llmsizing.catalog import DATA_DIR
from llmsizing.serve import RANGE_HIGH, RANGE_LOW, serving
from llmsizing.serve_chapter import (ChapterText, _holds, cost_ranking, engine_versions, expert_parallel,
                                     kv_room_queue, stated)
from llmsizing.serve_chapter_check import published_check


def _rows(name):
    with open(DATA_DIR / name, newline="") as f:
        return list(csv.DictReader(f))


@lru_cache(maxsize=None)
def _check() -> ChapterText:
    return published_check()


@lru_cache(maxsize=None)
def _queue() -> ChapterText:
    return kv_room_queue()


def test_published_check_counts_the_rows_of_the_csv():
    rows = _rows("serving_published.csv")
    v = _check().values
    assert v["n"] == str(len(rows))
    assert v["engines"] == str(len({r["engine"] for r in rows}))
    assert v["rejected"] == str(len(_rows("serving_published_rejected.csv")))


def test_single_line_short_of_the_a100_log_at_ddp_bucket_sizes_by_hand():
    """Training's single alpha-beta line on eight A100s over NVLink 3 (data/links.csv: 300 GB/s at 77% =
    231 GB/s, alpha 2.3 us), a ring all-reduce: 2 (n - 1) = 14 steps and 2 (n - 1) / n = 1.75 of the message
    on the wire. 16 MiB: 14 x 2.3 + 1.75 x 16,777,216 / 231e3 = 32.2 + 127.1 = 159.3 us against the log's
    245.1 us (x1.54); 32 MiB: 32.2 + 254.2 = 286.4 us against 398.2 (x1.39), either side of PyTorch DDP's
    25 MiB bucket."""
    v = _check().values
    line16 = 14 * 2.3 + 1.75 * 16 * 2**20 / 231e3
    line32 = 14 * 2.3 + 1.75 * 32 * 2**20 / 231e3
    assert v["ar_line_short"] == f"{245.1 / line16:.2f} and {398.2 / line32:.2f}" == "1.54 and 1.39"
    assert v["ddp_bucket"] == "25 MiB"


def test_vllm_batch1_share_of_bandwidth_by_hand():
    """vLLM's Llama-3-8B at batch 1 on an A100 40GB: its rate x the bytes per token over 1,555 GB/s (the A100
    40GB datasheet). All bf16 weights: 8,030,261,248 x 2 B; read a step: less the input embedding's table but
    one row, (128,256 - 1) x 4,096 x 2 B."""
    row = next(r for r in _rows("serving_published.csv") if r["model"] == "llama-3-8b"
               and r["gpu"] == "A100 40GB" and r["metric"] == "output_tokens_per_s")
    rate, bw = float(row["value"]), 1555e9
    all_bytes = 8_030_261_248 * 2
    read_bytes = all_bytes - (128_256 - 1) * 4_096 * 2
    v = _check().values
    assert v["b1"] == f"{rate:.0f}"
    assert v["share"] == f"{rate * all_bytes / bw:.0%}"
    assert v["share_read"] == f"{rate * read_bytes / bw:.0%}"


def test_tensorrt_llm_step_from_its_published_rate():
    """Llama-2-70B at batch 480 on four H100s: a step is the batch over the replica's tokens per second."""
    row = next(r for r in _rows("serving_published.csv") if r["model"] == "llama-2-70b"
               and r["gpu"] == "H100 SXM" and r["batch"] == "480"
               and r["metric"] == "output_tokens_per_s_per_gpu")
    v = _check().values
    assert (v["trt70_b"], v["trt70_tp"]) == ("480", "4")
    assert v["trt70_step"] == f"{480 / (float(row['value']) * 4) * 1e3:.0f} ms"


def test_llama2_70b_shapes_and_the_jackknife_bound():
    """Llama-2-70B: 64 query heads over 8 KV heads, 80 layers (two all-reduces each), hidden 8,192, so a
    128-token prompt's all-reduce carries 128 x 8,192 x 2 B = 2 MiB; Barber et al.'s 1 - 2 x 0.2 = 60%."""
    v = _check().values
    assert (v["l2_heads"], v["l2_kv_heads"], v["l2_group"]) == ("64", "8", "8")
    assert (v["ttft70_calls"], v["ttft70_msg"]) == ("160", "2 MiB")
    assert v["cv_worst"] == "60%"
    iv = {r["group"]: r for r in _rows("serving_intervals.csv")}
    assert v["iv_all"] == f"{float(iv['all']['low']):.2f}-{float(iv['all']['high']):.2f}"


def test_published_check_report_is_the_table():
    report = _check().report
    assert report.startswith(f"80% range of a calibrated engine's per-token speed: {RANGE_LOW:.2f}-")
    assert len(re.findall(r"\bvLLM\b", report)) >= 3


def test_kv_room_queue_sweep_gap_from_the_csv():
    """The sweep's largest gap in recomputed tokens per finished request, as a share of one sequence's tokens,
    worked from data/serve_churn_sweep.csv's columns."""
    rows = _rows("serve_churn_sweep.csv")
    gap = max(abs(float(r["churn_recomputed_tokens"]) - float(r["replay_recomputed_tokens"]))
              / float(r["batch"]) / (float(r["prompt"]) + float(r["output"])) for r in rows)
    v = _queue().values
    assert v["sweep_n"] == str(len(rows))
    assert v["sweep_gap"] == f"{gap:.1%}"


def test_kv_room_queue_is_twice_the_room_in_two_waves():
    room = serving("llama-3-8b", "H100 SXM", prompt=1024, output=256).kv_batch
    v = _queue().values
    assert v["batch"] == f"{2 * room:,}" and v["waves"] == "2"
    assert v["chunk"] == "8,192"                    # vLLM's max_num_batched_tokens on an H100 (EngineArgs)
    assert "preemptions" in _queue().report


def test_stated_carries_the_speed_range():
    """A time's ends are the time over the speed's ends: low = t / RANGE_HIGH, high = t / RANGE_LOW."""
    s = serving("llama-3-8b", "H100 SXM", batch=1, prompt=1024, output=256)
    text = stated(s, "itl_s", ".4f", 1e3, suffix=" ms")
    m = re.fullmatch(r"([\d.]+) ms \(([\d.]+)-([\d.]+)\)", text)
    assert m, text
    v, lo, hi = map(float, m.groups())
    assert v == pytest.approx(s.itl_s * 1e3, abs=1e-4)
    assert lo == pytest.approx(v / RANGE_HIGH, abs=2e-4) and hi == pytest.approx(v / RANGE_LOW, abs=2e-4)


def test_engine_versions_from_the_rows():
    assert engine_versions("vLLM") == "0.6.0, 0.21.0 and 0.23.0"     # the rows the fit learns from (CSV)
    assert engine_versions("SGLang") == "0.3.0"
    with pytest.raises(ValueError, match="engine 'nope'"):
        engine_versions("nope")
    with pytest.raises(TypeError, match="engine and batching"):
        engine_versions(3)


def test_a_broken_claim_names_itself():
    _holds(True, "anything")
    with pytest.raises(AssertionError, match="chapter 15 says two waves"):
        _holds(False, "two waves")


def test_expert_parallel_from_the_report_and_the_day6_page():
    """DeepSeek-V3: 61 layers, the first 3 dense, so 58 MoE layers; 8 expert groups, a token's experts in 4
    (config n_group, topk_group); the report's decoding unit, 320 GPUs, is 40 nodes of 8. The Day-6 figures
    come from data/deepseek_serving.csv's two rows as the page states them (73.7k and 14.8k a node, 56.3% of
    input tokens from the cache, 4,989 tokens of KV per output token, 32 redundant experts, 21 tokens/s)."""
    v = expert_parallel().values
    assert (v["layers"], v["groups"], v["dec_nodes"]) == ("58", "4 of its 8", "40")
    d6 = {r["phase"]: r for r in _rows("deepseek_serving.csv")}
    assert (v["d6_prefill_pub"], v["d6_decode_pub"]) == ("73.7K", "14.8K")
    assert (v["d6_prefill_nodes"], v["d6_decode_nodes"]) == (d6["prefill"]["nodes_per_unit"], "18")
    assert (v["d6_hit"], v["d6_ctx"], v["d6_redundant"], v["d6_user_tps"]) == ("56.3%", "4,989", "32", "21")
    assert float(v["a2a_lo"]) <= float(v["a2a_hi"]) < 1


def test_cost_ranking_never_ranks_an_estimate():
    """The hatched GPUs are exactly those the price table marks as estimates (and that the chart can price);
    none of them is named cheapest or dearest."""
    estimates = {r["name"] for r in _rows("gpu_prices.csv") if r["price_kind"] == "estimate"}
    v = cost_ranking().values
    named = re.search(r"\(([^)]*)\) are priced at estimates", v["estimates"])
    assert named, v["estimates"]
    hatched = set(named.group(1).split(", "))
    assert hatched and hatched <= estimates
    assert v["cheapest"].split(" (")[0] not in estimates and v["dearest"] not in estimates
    cheapest = float(v["cheapest_cost"].split()[0].strip("$"))
    assert cheapest < float(v["h100"].split()[0].strip("$"))
    assert all(v[f"rho_{k}"].startswith("\u2212") for k in ("batch", "memory"))     # costs fall as they grow


def test_published_rows_are_speeds_or_times_and_two_gains():
    """By hand from the CSV: two rows are ratios of two published speeds (the vLLM sweep's batch-8 gain and
    the XQA kernel's gain); the others are speeds or times, each held out once, and the fit learns from those
    less the known misses."""
    rows = _rows("serving_published.csv")
    gains = [r for r in rows if r["metric"] in ("batch_gain", "grouped_attention_gain")]
    assert len(gains) == 2
    misses = sum(1 for r in rows if r["known_out"])
    v = _check().values
    assert (v["n_speeds"], v["n_gains"]) == (str(len(rows) - 2), "2")
    assert v["iv_rows"] == v["n_speeds"]
    assert v["ntrain"] == str(len(rows) - 2 - misses)


def test_awq_row_at_the_static_pooled_overhead_by_hand():
    """LMDeploy's Llama-2-7B AWQ row (206.4 tokens/s at batch 1 on an RTX 4090, 1,008 GB/s). A step reads the
    quantised matrices, 6,738,415,616 - 2 x 32,000 x 4,096 = 6,476,271,616 weights at 4 + 16/128 + 4/128 =
    4.15625 bits, the 16-bit LM head (32,000 x 4,096 x 2 B) and one embedding row: 3,627 MB, at u_w = 0.626:
    5.748 ms; the fp16 KV cache of the mean context, 1 + 512 / 2 = 257 tokens x 524,288 B, at u_kv = 0.95:
    0.141 ms. So 5.889 ms a token with no overhead (ratio 206.4 x 5.889 ms = 1.22) and 8.759 ms at the static
    benchmarks' pooled 2.87 ms (ratio 1.81): outside the stated range, where the row's own overhead is not."""
    consts = {r["constant"]: float(r["value"]) for r in _rows("serving_model.csv")}
    rate = 206.4
    weights = (6_738_415_616 - 2 * 32_000 * 4_096) * 4.15625 / 8 + 32_000 * 4_096 * 2 + 4_096 * 2
    bare_s = weights / (1008e9 * consts["weights_bu"]) + 257 * 524_288 / (1008e9 * consts["attention_bu"])
    static_s = bare_s + consts["step_overhead_s[static]"]
    v = _check().values
    assert v["awq"] == "206.4" and v["awq_ratio0"] == f"{rate * bare_s:.2f}" == "1.22"
    assert v["awq_static"].split(" and ")[0] == f"{rate * static_s:.1f}" == "1.8"
    assert float(v["awq_static"].split(" and ")[1]) > RANGE_HIGH
