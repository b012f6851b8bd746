"""pytorch/ao's BF16 baselines on 8 H100s and 8 MI300Xs (data27b, issue 34): the "none (bfloat16)" rows of the
torchao float8 README's training tables that data/published_runs.csv already cites for their FP8 rows:

    H100 (commit 8c81863b, 2025-03-12): | Llama3-8b | none (bfloat16) | per op SAC | 47.65 | 6150 | - |
    MI300X (commit 853f87d1, 2025-08-11): | Llama3-8b | none (bfloat16) | 39.09 | 5376.5 | - |

Their tokens/s -> MFU is checked by hand here, and where they sit: the H100's is a held-out run of a calibrated
cell (Hopper BF16, calibrated by other sources), so it counts in the coverage; the MI300X's is a stand-in
(no CDNA3 calibration run)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).resolve().parents[1] / "data"

# Llama 3 8B (meta-llama/Meta-Llama-3-8B config.json): hidden 4096, 32 layers, 32 query heads of 128, 8 KV
# heads, SwiGLU width 14336, vocabulary 128256, untied embeddings
D, L, KV, FFN, VOCAB = 4096, 32, 8 * 128, 14336, 128256
SEQ = 8192                                   # the README: sequence length 8192
# dense BF16 peaks from the chips' units and clocks: H100 SXM5, 528 tensor cores x 1,830 MHz boost x 1,024
# dense BF16 FLOPs per clock (NVIDIA H100 whitepaper; the datasheet's 1,979 TFLOPS is with sparsity, twice);
# MI300X, 304 CUs x 2,100 MHz x 2,048 dense BF16 FLOPs per clock per CU (AMD CDNA 3 whitepaper)
H100_BF16_DENSE = 528 * 1830e6 * 1024
MI300X_BF16_DENSE = 304 * 2100e6 * 2048
RUN = {"H100 SXM": "Llama 3 8B, 8 H100s FSDP2 + compile, BF16 (torchao README)",
       "MI300X": "Llama 3 8B, 8 MI300Xs FSDP2 + compile, BF16 (torchao README)"}


def _rows(name):
    with open(DATA / name, newline="") as fh:
        return list(csv.DictReader(fh))


def _row(gpu):
    rows = [r for r in _rows("published_runs.csv") if r["gpu"] == gpu and r["dtype"] == "bf16"
            and "torchao README" in r["run"]]
    assert len(rows) == 1
    return rows[0]


@pytest.mark.parametrize("gpu, tps, words, commit, as_of", [
    ("H100 SXM", "6150", "| none (bfloat16) | per op SAC | 47.65 | 6150 |", "commit 8c81863b", "2025-03-12"),
    ("MI300X", "5376.5", "| none (bfloat16) | 39.09 | 5376.5 |", "commit 853f87d1", "2025-08-11")])
def test_the_rows_are_the_readmes(gpu, tps, words, commit, as_of):
    r = _row(gpu)
    assert r["run"] == RUN[gpu] and r["tokens_per_s_per_gpu"] == tps and words in r["source"]
    assert r["source"].startswith("pytorch/ao training benchmarks (torchao/float8/README.md")
    assert commit in r["source"] and r["as_of"] == as_of
    # the README's setup line and torchtitan's llama3_8b.toml: FSDP2 over the 8 GPUs, batch 1 per GPU, seq
    # 8192, per-op selective checkpointing
    assert (r["model"], r["n_gpus"], r["seq"], r["dp"], r["zero"]) == ("llama-3-8b", "8", str(SEQ), "8", "3")
    assert (r["micro_batch"], r["global_batch"], r["recompute"]) == ("1", "8", "op-sac")
    assert (r["framework"], r["kind"], r["calibration"]) == ("torchtitan", "steady-state", "no")
    assert r["tp"] == r["pp"] == r["cp"] == ""
    # one source with the same table's FP8 rows (llmsizing.intervals.source_key: the text before " (")
    fp8 = [x for x in _rows("published_runs.csv") if x["gpu"] == gpu and x["dtype"] == "fp8"
           and "torchao README" in x["run"]]
    assert len(fp8) == 2 and {x["source"].split(" (")[0] for x in fp8} == {r["source"].split(" (")[0]}


def test_the_h100_fp8_rows_name_the_script_their_readme_names():
    """At 8c81863b, the commit the H100 rows cite, the README's reproduce step runs float8_training_benchmark.sh
    (torchtitan_benchmark.sh is its name from 8c5eeacd, 2025-04-21, in the README from c6de9b42)."""
    for r in _rows("published_runs.csv"):
        if r["gpu"] == "H100 SXM" and "torchao README" in r["run"]:
            assert r["note"].startswith("torchao's float8_training_benchmark.sh")


def test_the_mi300x_fp8_rows_name_the_script_and_recipe_that_ran_them():
    """At 853f87d1 (2025-08-11), the commit that added the MI300X table, the README's reproduce step still names
    torchtitan_benchmark.sh, but 1c969942 (2025-08-06) had renamed it llama3.sh; each FP8 row's recipe is the
    FLOAT8_RECIPE_WITH_BEST_SETTINGS value of its README line (tensorwise: float8 all-gather; rowwise: bf16)."""
    rows = {r["run"]: r for r in _rows("published_runs.csv")
            if r["gpu"] == "MI300X" and r["dtype"] == "fp8" and "torchao README" in r["run"]}
    assert len(rows) == 2
    for run, r in rows.items():
        recipe = "tensorwise" if "float8 tensorwise" in run else "rowwise"
        assert r["note"].startswith(f"torchao's benchmarks/float8/training/llama3.sh with "
                                    f"FLOAT8_RECIPE_WITH_BEST_SETTINGS={recipe} (")
        assert "its name until 1c969942" in r["note"]
        assert ("all-gather in float8" if recipe == "tensorwise" else "all-gather in bf16") in r["note"]


@pytest.mark.parametrize("gpu, tps, peak, peak_tflops, mfu", [
    ("H100 SXM", 6150, H100_BF16_DENSE, 989.4, 0.35999), ("MI300X", 5376.5, MI300X_BF16_DENSE, 1307.4, 0.23817)])
def test_tokens_per_second_to_mfu_by_hand(gpu, tps, peak, peak_tflops, mfu):
    from llmsizing.time_cost import published_runs

    # parameters less the input embedding (a lookup, no FLOPs): per layer q and o (D x D), k and v (D x 1024),
    # the three SwiGLU matrices (D x 14336) and two RMSNorm weights; then the final norm and the output layer
    n = L * (2 * D * D + 2 * D * KV + 3 * D * FFN + 2 * D) + D + VOCAB * D
    assert n == 7_504_924_672
    # 6 N per token plus attention's 12 L d s (Chowdhery et al. 2022, PaLM, App. B: the library's convention)
    flops_per_token = 6 * n + 12 * L * D * SEQ
    assert flops_per_token == 57_914_449_920
    # the catalogue's peaks (data/gpus.csv) are these, to 0.1 TFLOP/s; the MFU is taken over its figure
    assert round(peak / 1e12, 1) == pytest.approx(peak_tflops)
    assert tps * flops_per_token / (peak_tflops * 1e12) == pytest.approx(mfu, abs=1e-5)   # e.g. 6150 x 57.9e9 /
    # 989.4e12 = 36.0% on the H100
    runs = published_runs()
    got = runs.loc[runs["run"] == RUN[gpu], "implied_mfu"]
    assert len(got) == 1 and got.iloc[0] == pytest.approx(mfu, abs=1e-5)


def test_the_h100_row_counts_in_the_coverage_and_the_mi300x_row_is_a_stand_in():
    """Hopper BF16 has calibration runs of other sources, so the H100 row is predicted by a fit that never saw
    pytorch/ao and checked against the interval made without it; CDNA3 has none, so the MI300X row lands in the
    stand-in cells (one run, one source, 0 inside, below every stated low of a steady state)."""
    from llmsizing.calibration import mfu_loso_check
    from llmsizing.step_intervals import step_loso_check

    for check, df in (mfu_loso_check(), step_loso_check()):
        runs = df["run"].to_numpy(object)
        h, m = runs == RUN["H100 SXM"], runs == RUN["MI300X"]
        assert h.sum() == m.sum() == 1
        assert check.calibrated_rows[h].all() and not check.calibrated_rows[m].any()
    cells = {(r["area"], r["generation"], r["dtype"]): r for r in _rows("stand_in_runs.csv")}
    intervals = _rows("intervals.csv")
    for area in ("training", "training-inputs", "training-layout"):
        c = cells[area, "cdna3", "bf16"]
        assert (c["n_rows"], c["n_sources"], c["inside"]) == ("1", "1", "0")
        lows = [float(r["low"]) for r in intervals if r["area"] == area and r["low"]
                and r["group"] != "pretraining-total"]
        assert float(c["min_ratio"]) < min(lows)
    # end to end, the H100 row is inside the steady-state range its fold states; from the layout it sits just
    # inside its fold's low since gemm44 priced few-row GEMMs by XLA's table (0.818 against 0.816: the fold's
    # high fell and its low with it); before, below: 0.818 against the fold's low 0.837 since the refit
    # that priced Megatron-LM's backward TP overlap (the fold's low rose with the other sources' Megatron
    # rows; before it,
    # 0.822 against 0.823, by a hair), outside since session 39
    # (its own step has no pipeline and did not move; the other sources' pipelined runs moved the fold's low
    # from 0.819, when it was inside; before rows31's refit: 0.817 against 0.821, outside; the fold without
    # pytorch/ao narrower than the stated pooled range, which it is inside either way)
    check, df = mfu_loso_check()
    h = (df["run"] == RUN["H100 SXM"]).to_numpy()
    assert check.inside[h].all()
    check, df = step_loso_check()
    h = (df["run"] == RUN["H100 SXM"]).to_numpy()
    r = float(np.exp(check.residuals[h][0]))
    assert check.inside[h].all() and 1.0 < r / float(np.exp(check.low_log[h][0])) < 1.01
    pooled = next(x for x in intervals if (x["area"], x["group"]) == ("training-layout", "all"))
    assert float(pooled["low"]) < r < float(pooled["high"])
