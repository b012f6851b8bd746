"""Chapter 6's exercise 1 in sentences (src/llmsizing/hardware_prose.py): the numbers its solution quotes,
worked by hand from the parts' published figures, and a reading that raises when the numbers contradict it."""

from __future__ import annotations

import pandas as pd
import pytest

import llmsizing.hardware_prose as hp
from llmsizing import get_gpu
from llmsizing.catalog import DATA_DIR


@pytest.fixture(scope="module")
def best_shape():
    """Bekman's best bf16 shape on the H100 SXM, data/gemm_efficiency.csv's "best" row (as the chapter reads it)."""
    gemm = pd.read_csv(DATA_DIR / "gemm_efficiency.csv")
    best = gemm[(gemm.gpu == "H100 SXM") & (gemm.dtype == "bf16") & (gemm.kind == "best")].iloc[0]
    return int(best.m), int(best.n), int(best.k)


@pytest.fixture(scope="module")
def texts(best_shape):
    return hp.h200_exercise_prose(best_shape).values


def test_ratios_from_the_datasheets(texts):
    """HBM3e 4.8 TB/s against HBM3 3.35 TB/s: 1.43 times, and the ridge point 989 TFLOP/s over each: 295 and
    206 FLOP/byte. Bekman's FP8 search, 1,453.4 against 1,402.6 TFLOP/s: 3.6%, printed 4%."""
    assert texts["ex1_bw_x"] == "1.43" and texts["ex1_dec_x"] == "1.43"
    assert (texts["ex1_ridge_h100"], texts["ex1_ridge"]) == ("295", "206")
    assert texts["ex1_fp8_gain"] == "4%"
    assert texts["ex1_train_x"] == "1.00"


def test_sequences_that_fill_a_card_by_hand(texts):
    """Llama-3-8B's KV cache: 2 (K, V) x 32 layers x 8 heads x 128 x 2 B x 4,096 tokens = 536,870,912 B a
    sequence; its weights 8,030,261,248 x 2 B. H100 SXM (85,520,809,984 B usable):
    (85,520,809,984 - 16,060,522,496) / 536,870,912 = 129.4 -> 129; H200 (150,754,820,096 B): 250.9 -> 250.
    Llama-3-70B: weights 70,553,706,496 x 2 B = 131.4 GiB, more than an H100 holds; 80 layers, so
    1,342,177,280 B a sequence, and (150,754,820,096 - 141,107,412,992) / 1,342,177,280 = 7.2 -> 7 on an H200."""
    assert (texts["ex1_fit_h100"], texts["ex1_fit_h200"]) == ("129", "250")
    assert texts["ex1_w70"] == "131.4 GiB" and texts["ex1_fit70_h200"] == "7"
    b, r = hp.decode_fill("llama-3-70b", get_gpu("H100 SXM"))
    assert b == 0 and r is None


def test_a_reading_the_numbers_contradict_raises(monkeypatch, best_shape):
    """Were NVIDIA's MLPerf gain 30%, below the bandwidth's 43%, the solution's "more than the bandwidth ratio"
    would be false."""
    monkeypatch.setattr(hp, "NVIDIA_MLPERF_H200_GAIN", 0.30)
    with pytest.raises(hp.ProseOutOfDate, match="chapter 6's exercise 1 says NVIDIA's 'up to 47%'"):
        hp.h200_exercise_prose(best_shape)


def test_mamf_fp8_h100_is_the_data_row():
    """The H100's FP8 MAMF the exercise quotes is Bekman's "best" fp8 row of data/gemm_efficiency.csv (the
    H200's 1,453.4 has no row there), so a revised row cannot leave the prose's figure behind."""
    gemm = pd.read_csv(DATA_DIR / "gemm_efficiency.csv")
    row = gemm[(gemm.gpu == "H100 SXM") & (gemm.dtype == "fp8") & (gemm.kind == "best")]
    assert len(row) == 1
    assert hp.MAMF_FP8_TFLOPS["H100 SXM"] == row.tflops.iloc[0] == 1402.6


def test_decode_bound_against_engines_by_hand():
    """Llama-3-8B decoding one sequence at 4,096 tokens on an H100 SXM (3.35 TB/s). A step reads the weights
    but the input embedding, (8,030,261,248 - 128,256 x 4,096) x 2 B = 15,009,849,344 B, and the cache,
    131,072 B a token x 4,096 = 536,870,912 B. The roofline: 15,546,720,256 B / 3.35e12 B/s = 4.641 ms,
    215 tokens/s. Chapter 15's engines (data/serving_model.csv) read the weights at 0.626 of the bandwidth and
    the cache at 0.95, with no step overhead: 15,009,849,344 / (3.35e12 x 0.626) + 536,870,912 / (3.35e12 x
    0.95) = 7.1574 + 0.1687 = 7.3261 ms, 136.50 tokens/s (printed 136); the stated range
    (data/serving_intervals.csv, speed 0.772-1.309 of the model's) gives 136.50 x 0.772 = 105.4 to
    136.50 x 1.309 = 178.7 tokens/s."""
    t = hp.decode_bound_against_engines()
    assert t.values == {"dec_mbu": "63%", "dec_engine_tps": "136", "dec_engine_low": "105",
                        "dec_engine_high": "179"}
    assert "roofline <= 215 tokens/s" in t.report


def test_decode_bound_against_engines_refuses_a_context_with_no_prompt():
    with pytest.raises(ValueError, match="context"):
        hp.decode_bound_against_engines(context=128)
