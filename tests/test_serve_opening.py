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
