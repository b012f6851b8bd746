"""Chapter 15's opening numbers (serve_chapter.opening): vLLM's defaults from its own rule, the plan's parts
multiplied out, the calibration's row counts added up, and a reading that raises when the numbers contradict it."""

from __future__ import annotations

import re

import pytest

import llmsizing.serve_chapter as sc
from llmsizing.prose import ProseOutOfDate

LOAD = dict(users=1000, prompt=1024, output=256, itl_s=0.05, ttft_s=1.0)


@pytest.fixture(scope="module")
def v():
    return sc.opening(LOAD).values


def test_vllm_defaults_and_the_plan(v):
    """vLLM's API server (EngineArgs in vllm/engine/arg_utils.py): on 70 GiB and more outside the A100
    line, chunks of 8,192 tokens and 1,024 sequences; on an A100 80GB 2,048 and 256. The plan: replicas x tp
    GPUs; the mean plan needs fewer than the 95th percentile's."""
    assert (v["chunk"], v["seqs"]) == ("8,192", "1,024")
    assert (v["chunk_a100"], v["seqs_a100"]) == ("2,048", "256")
    assert v["large_gib"] == "70 GiB"     # vLLM's `device_memory >= 70 * GiB_bytes`
    replicas, tp = map(int, re.fullmatch(r"(\d+) replicas of tp=(\d+)", v["head_layout"]).groups())
    assert replicas * tp == int(v["head_gpus"])
    assert int(v["head_mean"]) < int(v["head_gpus"])
    low, high = map(int, v["head_range"].split("-"))
    assert low <= int(v["head_gpus"]) <= high


def test_the_calibration_groups_add_up(v):
    """The FP8 rows and the 16-bit rows are all the rows; the pooled MFU lies between the two groups'."""
    assert int(v["mfu_n_fp8"]) + int(v["mfu_n_16"]) == int(v["mfu_n_all"])
    lo, hi = sorted((float(v["mfu_fp8"]), float(v["mfu_16"])))
    assert lo <= float(v["mfu_all"]) <= hi


def test_a_reading_the_numbers_contradict_raises(monkeypatch):
    """Were the engine's chunk the A100's 2,048, "the engine keeps vLLM's chunk on an H100" would be false."""
    monkeypatch.setattr(sc, "MAX_NUM_BATCHED_TOKENS", 2048)
    with pytest.raises(ProseOutOfDate, match="chapter 15 says the engine keeps vLLM's chunk"):
        sc.opening(LOAD)


def test_the_fp8_rows_own_share_multiplied_out(v):
    """The FP8 rows fitted alone compute at their MFU times Hopper's FP8 share of BF16's (0.521 / 0.683 =
    0.763, data/kernel_efficiency.csv), and that over the 16-bit rows' MFU: the serving rows' counterpart of
    the training factor, which the prose says bears it out (within 7% of 0.763)."""
    own = float(v["mfu_fp8"]) * 0.521 / 0.683
    assert float(v["fp8_own"]) == pytest.approx(own, abs=0.006)          # both printed to 2 decimals
    # the two MFUs are printed to 2 decimals, so the ratio of the printed figures is good to about 0.02
    assert float(v["fp8_of_16"]) == pytest.approx(own / float(v["mfu_16"]), abs=0.02)
    assert abs(float(v["fp8_of_16"]) / (0.521 / 0.683) - 1) < 0.08
