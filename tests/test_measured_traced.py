"""The causes of chapter 5's two untraced patterns, worked by hand (issue 38; llmsizing.measured_traced).

Parameter counts from the runs' dimensions (KempnerForge's mfu_bench.sh): Llama-3-8B (4096 wide, 32
layers, 32 heads of 128, 8 KV heads, FFN 14,336, vocabulary 128,256) and KempnerForge's 13B (5120, 40 layers,
40 heads, 8 KV heads, FFN 17,920 = 1.3 x 2/3 x 4 x 5120 rounded up to 256: its report prints
14.84B parameters).
"""

import pytest

from llmsizing.measured_traced import (compiled_loss_peak_bytes, kempnerforge_peak_bytes,
                                       measured_memory_traced)

GiB = 2**30
V = 128_256

# Llama-3-8B: embedding = LM head = 128,256 x 4096; per layer q, o 4096^2, k, v 4096 x 1024,
# MLP 3 x 4096 x 14,336
EMB_8B = V * 4096                                              # 525,336,576
LAYERS_8B = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14_336)   # 6,979,321,856
NORMS_8B = 65 * 4096                                           # 266,240
# 13B: per layer q, o 5120^2, k, v 5120 x 1024, MLP 3 x 5120 x 17,920
EMB_13B = V * 5120                                             # 656,670,720
LAYERS_13B = 40 * (2 * 5120**2 + 2 * 5120 * 1024 + 3 * 5120 * 17_920)  # 13,526,630,400
NORMS_13B = 81 * 5120


def test_param_counts_match_the_report():
    assert 2 * EMB_8B + LAYERS_8B + NORMS_8B == 8_030_261_248            # "8.03B"
    assert round((2 * EMB_13B + LAYERS_13B + NORMS_13B) / 1e9, 2) == 14.84


def test_13b_fsdp8_fp32_unsharded_grads():
    """Row 8 (88.5 GB = GiB logged): FSDP=8, micro-batch 4, 4 micro-batches. The unsharded FP32 gradients
    that FSDP2 accumulates under no-sync (4 B x all 14.84B parameters) are 55.3 GiB of the 87.6."""
    P = 2 * EMB_13B + LAYERS_13B + NORMS_13B
    want = {"weights": 2 * P / 8, "optimizer states": 4 * P / 8, "gradients": 4 * P,
            "activations": 2 * 40 * 4 * 4096 * 5120, "loss": 8 * 4 * 4096 * V}
    got = kempnerforge_peak_bytes("kf-llama3-13b", tp=1, dp=8, batch=4, seq=4096, grad_accum=4)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-12), k
    assert got["peak"] == pytest.approx(94_013_492_992, rel=1e-12)
    assert 1.0 <= 88.5 * GiB / got["peak"] < 1.02          # allocated: at or just above the live tensors


def test_7b_tp4_is_fsdp_of_one_with_whole_logits():
    """Row 5 (39.4 GB): TP=4 on 4 GPUs, so FSDP2 over one shard (dp_shard stays in the mesh with TP): per rank
    the layers and head split 4 ways, the embedding whole; FP32 gradients; logits and loss whole."""
    local = (LAYERS_8B + EMB_8B) / 4 + EMB_8B + NORMS_8B     # 2,401,767,424
    want = 2 * local + 4 * local + 4 * local + 2 * 32 * 4 * 4096 * 4096 / 4 + 8 * 4 * 4096 * V
    got = kempnerforge_peak_bytes("llama-3-8b", tp=4, dp=1, batch=4, seq=4096, grad_accum=2)["peak"]
    assert got == pytest.approx(want, rel=1e-12)
    assert want == pytest.approx(41_902_186_496, rel=1e-12)
    assert 1.0 <= 39.4 * GiB / got < 1.02


def test_single_gpu_keeps_bf16_grads():
    """Row 1: one GPU, no mesh, no FSDP: the .grad accumulate in bf16 (2 B), at the script's micro-batch 2
    (69.7 GiB, 1.16x below the logged 80.7) and at the report table's 4 (79.5 GiB, 1.02x)."""
    P = 2 * EMB_8B + LAYERS_8B + NORMS_8B
    for mb, accum in ((2, 4), (4, 2)):
        want = 2 * P + 4 * P + 2 * P + 2 * 32 * mb * 4096 * 4096 + 8 * mb * 4096 * V
        got = kempnerforge_peak_bytes("llama-3-8b", tp=1, dp=1, batch=mb, seq=4096, grad_accum=accum)["peak"]
        assert got == pytest.approx(want, rel=1e-12)
    assert 80.7 * GiB / kempnerforge_peak_bytes("llama-3-8b", tp=1, dp=1, batch=4, seq=4096,
                                                grad_accum=2)["peak"] == pytest.approx(1.015, abs=1e-3)


def test_no_accumulation_no_gradients_and_bad_input():
    got = kempnerforge_peak_bytes("llama-3-8b", tp=1, dp=2, batch=1, seq=4096, grad_accum=1)
    assert got["gradients"] == 0.0
    with pytest.raises(ValueError, match="tp"):
        kempnerforge_peak_bytes("llama-3-8b", tp=0, dp=1, batch=1, seq=4096, grad_accum=1)
    with pytest.raises(ValueError, match="untied"):
        kempnerforge_peak_bytes("gpt2", tp=1, dp=1, batch=1, seq=1024, grad_accum=1)


class _Step:                     # the one attribute compiled_loss_peak_bytes reads
    def __init__(self, phases):
        self.phases_bytes = phases


def test_compiled_loss_takes_8_bytes_per_logit_off_the_loss_backward():
    """1 x 8192 tokens x 128,256 logits: the loss's backward loses 8 B each (7.83 GiB), the forward 2 B; the
    peak moves to whichever phase is then largest."""
    n = 8192 * V
    step = _Step({"forward": 40.0 * GiB, "loss backward": 42.0 * GiB, "backward": 36.0 * GiB,
                  "optimizer step": 20.0 * GiB})
    assert compiled_loss_peak_bytes(step, "llama-3-8b", batch=1, seq=8192) == pytest.approx(
        max(40.0 * GiB - 2 * n, 42.0 * GiB - 8 * n, 36.0 * GiB))
    assert 8 * n / GiB == pytest.approx(7.828, abs=1e-3)


def test_traced_rows_close_both_patterns():
    """Every multi-GPU KempnerForge row allocated 1.00-1.02x its traced peak (the single GPU: see above);
    every torchao MI300X and B200 row reserved at least its traced peak (reserved >= allocated), where the
    model's eager loss put the peak above what they reserved (published: 39.07-39.32 and 33.38-33.88 GiB)."""
    t = measured_memory_traced()
    kf = t[t["cause"] == "kempnerforge"]
    assert len(kf) == 14
    multi = kf[~kf["run"].str.contains("single GPU")]
    assert multi["traced_ratio"].between(1.0, 1.02).all()
    ao = t[t["cause"] == "compiled loss"]
    assert len(ao) == 7 and (ao["model_gib"] > ao["measured_gib"]).all()
    assert (ao["traced_gib"] <= ao["measured_gib"]).all()


def test_the_traced_rows_come_from_the_data_files_column_not_the_runs_names(monkeypatch):
    """Which rows are traced is data/published_measured_memory.csv's ``code_traced`` column: 14 KempnerForge
    rows (every max_allocated row of the file) and 7 torchao MI300X/B200 rows, counted from the CSV; with the
    column blank nothing is traced (the old code picked rows by name), and an unknown cause is refused."""
    import csv

    import pandas as pd

    import llmsizing.layout_fits as lf
    from llmsizing.measured_traced import measured_memory_traced
    with open(lf.MEASURED_MEMORY_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    want = {r["run"]: r["code_traced"] for r in rows if r["code_traced"]}
    assert sum(v == "kempnerforge" for v in want.values()) == 14 == sum(
        r["statistic"] == "max_allocated" for r in rows)
    assert sum(v == "compiled loss" for v in want.values()) == 7
    got = measured_memory_traced()
    assert dict(zip(got["run"], got["cause"])) == want
    real = lf.published_measured_memory
    monkeypatch.setattr(lf, "published_measured_memory", lambda: real().assign(code_traced=""))
    assert measured_memory_traced().empty
    monkeypatch.setattr(lf, "published_measured_memory",
                        lambda: pd.DataFrame(real()).assign(code_traced="eager loss"))
    with pytest.raises(ValueError, match="code_traced"):
        measured_memory_traced()
