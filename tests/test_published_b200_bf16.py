"""pytorch/ao's BF16 row on 8 power-limited B200s (data27, issue 34): the only published BF16 Blackwell figure in
the book's sources, read from the torchao mx_formats README that data/published_runs.csv already cites for the
same table's FP8 and MXFP8 rows (commit d8bb51f6, 2025-08-15):

    | Llama3-8b | none (bfloat16) | 33.71 | 8307.5 | - |

(model, scaling, peak memory GB, median tokens/second, speedup over baseline). Its tokens/s -> MFU is checked
by hand here, and where it sits against the three calibrated ranges (held out, a stand-in cell)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"

# Llama 3 8B (meta-llama/Meta-Llama-3-8B config.json): hidden 4096, 32 layers, 32 query heads of 128, 8 KV
# heads, SwiGLU width 14336, vocabulary 128256, untied embeddings
D, L, KV, FFN, VOCAB = 4096, 32, 8 * 128, 14336, 128256
SEQ = 8192                       # the README: sequence length 8192
TOKENS_PER_S_PER_GPU = 8307.5    # the README's "Median tokens/second", torchtitan's tps (per GPU)
B200_BF16_DENSE = 2250e12        # NVIDIA HGX B200: 4.5 PFLOPS BF16 with sparsity, half of it dense


def _rows(name):
    with open(DATA / name, newline="") as fh:
        return list(csv.DictReader(fh))


def _the_row():
    rows = [r for r in _rows("published_runs.csv") if r["gpu"] == "B200" and r["dtype"] == "bf16"]
    assert len(rows) == 1
    return rows[0]


def test_the_row_is_the_readmes():
    r = _the_row()
    assert float(r["tokens_per_s_per_gpu"]) == TOKENS_PER_S_PER_GPU
    assert "none (bfloat16)" in r["source"] and "8307.5" in r["source"]
    assert r["source"].startswith("pytorch/ao training benchmarks (torchao/prototype/mx_formats/README.md")
    assert "commit d8bb51f6" in r["source"] and r["as_of"] == "2025-08-15"
    # the README's words for the GPUs (from 9e3758d1 on), not a figure of the book's
    assert "8x power limited B200 GPUs" in r["source"]
    # the layout the README and torchtitan's llama3_8b.toml at 6fc499f6 give: FSDP2 over the 8 GPUs, batch 1
    # per GPU, per-op selective checkpointing, torchtitan
    assert (r["model"], r["n_gpus"], r["seq"], r["dp"], r["zero"]) == ("llama-3-8b", "8", str(SEQ), "8", "3")
    # on B200 SDPA ran cuDNN's kernel, which that commit's _save_list lacks (torchtitan models/attention.py
    # l.209-211, models/llama3/infra/parallelize.py l.234-243 at 6fc499f6): SDPA's output was not kept
    assert (r["micro_batch"], r["global_batch"], r["recompute"]) == ("1", "8", "op-sac-sdpa-rerun")
    assert (r["framework"], r["kind"], r["calibration"]) == ("torchtitan", "steady-state", "no")
    assert r["tp"] == r["pp"] == r["cp"] == ""
    # one source with the same table's FP8 rows: the text before the first " (" (llmsizing.intervals.source_key)
    fp8 = [x for x in _rows("published_runs.csv") if x["gpu"] == "B200" and x["dtype"] == "fp8"]
    assert len(fp8) == 3
    assert {x["source"].split(" (")[0] for x in fp8} == {r["source"].split(" (")[0]}


def test_tokens_per_second_to_mfu_by_hand():
    from llmsizing.time_cost import published_runs

    # parameters less the input embedding (a lookup, no FLOPs): per layer q and o (D x D), k and v (D x 1024),
    # the three SwiGLU matrices (D x 14336) and two RMSNorm weights; then the final norm and the output layer
    per_layer = 2 * D * D + 2 * D * KV + 3 * D * FFN + 2 * D
    assert per_layer == 218_112_000
    n = L * per_layer + D + VOCAB * D
    assert n == 7_504_924_672
    assert n + VOCAB * D == 8_030_261_248               # Meta's 8.03B with the input embedding
    # 6 N per token (forward and backward), plus attention's scores and values, 12 L d s with every key
    # counted (Chowdhery et al. 2022, PaLM, App. B, the MFU convention the library uses)
    flops_per_token = 6 * n + 12 * L * D * SEQ
    assert flops_per_token == 57_914_449_920
    mfu = TOKENS_PER_S_PER_GPU * flops_per_token / B200_BF16_DENSE
    assert mfu == pytest.approx(0.21383, abs=1e-5)       # 21.4% of the catalogue's (unlimited) peak
    runs = published_runs()
    got = runs.loc[(runs["gpu"] == "B200") & (runs["dtype"] == "bf16"), "implied_mfu"]
    assert len(got) == 1 and got.iloc[0] == pytest.approx(mfu, rel=1e-9)


def test_it_is_held_out_and_counted_as_a_stand_in_outside_every_range():
    """Blackwell BF16 has no calibration run (data/kernel_efficiency.csv: a stand-in efficiency, no runs), so
    the row sets no fit and each area counts it in its group stand-in: one run, one source, 0 inside. Its
    ratio published / predicted lies below the lowest bound each area states (the prediction is the full fit's,
    since its source has no calibration run to leave out)."""
    eff = {(r["generation"], r["dtype"]): r for r in _rows("kernel_efficiency.csv")}
    assert eff["blackwell", "bf16"]["runs"] == "" and eff["blackwell", "bf16"]["source"].startswith("stand-in")
    cells = {(r["area"], r["generation"], r["dtype"]): r for r in _rows("stand_in_runs.csv")}
    intervals = _rows("intervals.csv")
    for area in ("training", "training-inputs", "training-layout"):
        c = cells[area, "blackwell", "bf16"]
        assert (c["n_rows"], c["n_sources"], c["inside"]) == ("1", "1", "0")
        assert c["min_ratio"] == c["max_ratio"]
        lows = [float(r["low"]) for r in intervals if r["area"] == area and r["low"]]
        assert lows and float(c["min_ratio"]) < min(lows)
        # the group stand-in: the FP8 rows on B200 (3) and MI300X (2), this one and (data27b) the MI300X's
        # BF16 row of the float8 README's table
        group = next(r for r in intervals if (r["area"], r["group"]) == (area, "stand-in"))
        assert (group["n_rows"], group["n_sources"], group["measured_coverage"]) == ("7", "1", "0.0000")
    # end to end with the stack and batch (training-inputs): implied over mfu_estimate of the run as published
    from llmsizing.time_cost import mfu_estimate

    est = mfu_estimate("llama-3-8b", gpu="B200", seq=SEQ, n_gpus=8, framework="pytorch",
                       tokens_per_step=8 * SEQ)
    ratio = 0.2138332 / est.mfu
    assert float(cells["training-inputs", "blackwell", "bf16"]["min_ratio"]) == pytest.approx(ratio, abs=1e-4)
