"""serve43 (issue 34): the serving model computes FP8 at its fitted MFU times the share of its peak FP8
kernels reach over the share 16-bit kernels reach of theirs, taken from the training calibration
(``data/kernel_efficiency.csv``, read here with csv), not fitted on the serving rows.

Worked by hand: Hopper is the one generation calibrated in both FP8 (0.521, 2 runs) and BF16 (0.683, 26 runs;
0.678 over 25 before the refit that priced Megatron-LM's backward TP overlap), so every GPU's FP8 share is
0.521 / 0.683 = 0.76281 (0.76844 before). Llama-3-8B (32 layers, hidden 4,096, vocabulary 128,256,
8,030,261,248 parameters) prefilling 1,024 tokens computes 1,024 x 2 x (8,030,261,248 - 128,256 x 4,096)
matmul FLOPs plus causal attention, 4 x 32 x 4,096 x 1,024 x 1,025 / 2: 1.56450e13 in all. On an H100 SXM in
FP8 (1,978.9 TFLOP/s dense, datasheet) at an MFU of 0.5 that is 1.56450e13 / (1,978.9e12 x 0.5 x 0.76281) =
20.73 ms, where before serve43 it was 1.56450e13 / (1,978.9e12 x 0.5) = 15.81 ms (``compute_share=1.0``).
BF16 compute is unchanged: its share is 1.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from llmsizing.hardware import dtype_kernel_share
from llmsizing.serve import serving

ROOT = Path(__file__).resolve().parents[1]
FLOPS_8B_1024 = 1024 * 2 * (8_030_261_248 - 128_256 * 4096) + 4 * 32 * 4096 * 1024 * 1025 / 2


def _calibrated(generation: str, dtype: str) -> float:
    with open(ROOT / "data" / "kernel_efficiency.csv", newline="") as f:
        (row,) = [r for r in csv.DictReader(f) if r["generation"] == generation and r["dtype"] == dtype]
    assert row["runs"]                      # fitted on published runs, not a stand-in
    return float(row["kernel_efficiency"])


def test_the_fp8_share_is_the_training_calibrations_hopper_ratio():
    share = _calibrated("hopper", "fp8") / _calibrated("hopper", "bf16")
    # (0.521 / 0.678 = 0.76844 before the refit that priced Megatron-LM's backward TP overlap)
    assert share == pytest.approx(0.521 / 0.683, rel=1e-12) == pytest.approx(0.76281, abs=1e-5)
    # only Hopper is calibrated in both: every GPU takes its ratio
    for gpu in ("H100 SXM", "H200", "L40S", "B200", "A100 80GB", "MI300X"):
        assert dtype_kernel_share(gpu, "fp8") == pytest.approx(share, rel=1e-12)
        assert dtype_kernel_share(gpu, "fp4") == dtype_kernel_share(gpu, "fp8")  # FP4 takes FP8's calibration
        for dtype in ("bf16", "fp16", "fp16-acc16"):
            assert dtype_kernel_share(gpu, dtype) == 1.0
    with pytest.raises(ValueError, match="dtype"):
        dtype_kernel_share("H100 SXM", "int3")


def test_fp8_prefill_compute_at_the_mfu_times_the_share_by_hand():
    assert FLOPS_8B_1024 == pytest.approx(1.56450e13, rel=1e-4)
    kw = dict(weights="fp8", kv_cache="fp8", prompt=1024, output=256, batch=1, mfu=0.5, step_overhead_s=0.0)
    s = serving("llama-3-8b", "H100 SXM", compute="fp8", **kw)
    assert s.compute_share == pytest.approx(0.76281, abs=1e-5)
    assert s.prefill_compute_s == pytest.approx(FLOPS_8B_1024 / (1978.9e12 * 0.5 * 0.76281), rel=1e-4)
    assert s.prefill_compute_s == pytest.approx(20.73e-3, abs=1e-5)
    old = serving("llama-3-8b", "H100 SXM", compute="fp8", compute_share=1.0, **kw)      # the price before
    assert old.compute_share == 1.0
    assert old.prefill_compute_s == pytest.approx(FLOPS_8B_1024 / (1978.9e12 * 0.5), rel=1e-4)
    assert old.prefill_compute_s == pytest.approx(15.81e-3, abs=1e-5)
    assert s.decode_compute_s == pytest.approx(old.decode_compute_s / 0.76281, rel=1e-4)   # decode too
    assert s.decode_memory_s == old.decode_memory_s                   # the bytes do not move
    bf16 = serving("llama-3-8b", "H100 SXM", compute="bf16", **kw)
    assert bf16.compute_share == 1.0
    assert bf16.prefill_compute_s == pytest.approx(FLOPS_8B_1024 / (989.4e12 * 0.5), rel=1e-4)


@pytest.mark.parametrize("bad", [0.0, -0.5, 1.5, float("nan")])
def test_a_compute_share_outside_zero_to_one_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="compute_share"):
        serving("llama-3-8b", "H100 SXM", compute="fp8", compute_share=bad)
