"""The GEMM curve against a measured table (issue 34, "GEMM efficiency by shape"): XLA's default GEMM table
for the H100 (OpenXLA ``matmul_interpolator_data.h``, key ``sm_90``, ``b = 1``, BF16), stored in
data/gemm_efficiency.csv as ``kind == "grid"``. Every expected value below is worked out by hand from that
table or from the other published figures named, not from the library's output.

What the table says: a 256-row GEMM on the H100 is held back by having few output tiles for 132 SMs, not by
HBM (at ``n = k = 4,096`` it moves about 228 FLOP/byte, near the ridge of 295, and reaches 0.42 of the peak),
and the intensity curve prices it at 0.19: 2.3 times too slow, 1.7 times after the calibrated level (the
curve's own 4,096^3 is 0.61 where the table says 0.79). Pricing every GEMM by the table instead was tried
again on the present step model (``tools/gemm_table_check.py``, gemm37): the range of an MFU from a layout
narrows (coverage 82.9% -> 87.4%, median width 1.652 -> 1.541) and fine-tuning's a little (2.396 -> 2.359,
78.8% either way), but the MoE range widens (2.323 -> 3.365): the small MoE runs (Granite 3.0 1B-A400M and
3B-A800M, JetMoE-8B), already below the step model, fall further (published / predicted 0.72, 0.70, 0.66 ->
0.57, 0.55, 0.57). A launch cost per layer does not close it: 40 to 200 us a layer and micro-batch (about 40
kernels at 1 to 5 us) is at most 5% of the shortest layer's compute among the runs (Nemotron-4 15B at tp 8:
4.1 ms a layer and micro-batch) and leaves the MoE range at 3.29 and 3.04; nor does pricing the experts'
grouped GEMMs at what SonicMoE's measured MoE layers reach of the table's price (x 0.724): 2.458. The test
that the curve meets the table is therefore still a strict xfail."""

import csv
from pathlib import Path

import pytest

from llmsizing import kernels as K
from llmsizing.hardware import ridge_point_flops_per_byte

DATA = Path(__file__).resolve().parents[1] / "data"
H100_BF16_PEAK = 989.4            # TFLOP/s, dense (data/gpus.csv, NVIDIA's datasheet)
SIZES = (256, 512, 1024, 2048, 4096)


def _grid() -> dict:
    with open(DATA / "gemm_efficiency.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kind"] == "grid" and r["gpu"] == "H100 SXM"]
    return {(int(r["m"]), int(r["n"]), int(r["k"])): r for r in rows}


def test_the_grid_holds_every_shape_once_with_its_source():
    g = _grid()
    assert len(g) == 125 and set(g) == {(m, n, k) for m in SIZES for n in SIZES for k in SIZES}
    for r in g.values():
        assert r["gpu"] == "H100 SXM" and r["dtype"] == "bf16" and r["source"].startswith("OpenXLA")
        assert r["as_of"] and r["note"]
    # no shape beats the best BF16 GEMM Bekman's search found on an H100 (794.5 TFLOP/s, a kind == "best" row)
    assert max(float(r["tflops"]) for r in g.values()) == 780.2 < 794.5


def test_the_grid_agrees_with_the_older_copy_of_the_table():
    # the same table as vendored earlier in tensorflow/tensorflow (third_party/xla/xla/service/gpu/model/
    # matmul_interpolator_data.h at 372d578b), measured again: TFLOP/s of b = 1 BF16 entries, copied by hand
    older = {(2048, 2048, 2048): 632.0, (4096, 4096, 4096): 783.3, (1024, 2048, 2048): 524.3,
             (256, 2048, 4096): 285.9, (256, 4096, 2048): 324.6, (512, 4096, 1024): 373.3,
             (256, 1024, 4096): 172.3, (4096, 512, 1024): 370.8, (1024, 1024, 2048): 350.0,
             (2048, 1024, 2048): 523.3, (512, 2048, 1024): 232.6, (1024, 512, 2048): 220.0,
             (4096, 4096, 256): 392.2, (4096, 2048, 512): 447.0, (2048, 256, 1024): 135.8}
    g = _grid()
    for shape, tflops in older.items():
        assert float(g[shape]["tflops"]) == pytest.approx(tflops, rel=0.08), shape


def test_the_a100_squares_follow_the_h100_table_from_1024():
    # NVIDIA's CUDA 11 figure for the A100 (kind == "curve" rows): 88, 195 and 258 of 312 TFLOP/s at 1024^3,
    # 2048^3, 4096^3 = 0.282, 0.625, 0.827; the H100 table's diagonal: 252.8, 641.0, 780.2 of 989.4 = 0.256,
    # 0.648, 0.789. Two GPUs three years apart lose about the same share to a square's size (within 12%)
    a100 = {1024: 88 / 312, 2048: 195 / 312, 4096: 258 / 312}
    g = _grid()
    for s, share in a100.items():
        assert share == pytest.approx(float(g[s, s, s]["tflops"]) / H100_BF16_PEAK, rel=0.12), s


def test_the_tables_share_follows_the_outputs_size_not_its_shape():
    # XLA's table at k = 4,096, TFLOP/s copied from data/gemm_efficiency.csv: an output of 4,096 x 1,024,
    # 2,048 x 2,048 or 1,024 x 4,096 elements runs at 751.7, 752.2 and 751.9 (0.07% apart); 4,096 x 512,
    # 2,048 x 1,024, 1,024 x 2,048 and 512 x 4,096 at 661.6 to 665.7. Over every (m x n, k) the grid holds
    # at more than one shape (35), the fastest shape beats the slowest by at most 1.19x (an output of 2^20 at
    # k = 4,096: 1,024 x 1,024 at 472.6 against 4,096 x 256 at 398.9), by 1.02x at the median: what a GEMM
    # reaches is set by its output's size (its tiles a wave) and k, which tools/gemm_table_check.py's
    # "table-product" reads
    import statistics

    g = _grid()
    by: dict = {}
    for (m, n, k), r in g.items():
        by.setdefault((m * n, k), []).append(float(r["tflops"]))
    spread = [max(v) / min(v) for v in by.values() if len(v) > 1]
    assert len(spread) == 35
    assert max(spread) == pytest.approx(472.6 / 398.9, rel=1e-9)
    assert statistics.median(spread) < 1.03
    same = [float(g[s]["tflops"]) for s in ((4096, 1024, 4096), (2048, 2048, 4096), (1024, 4096, 4096))]
    assert same == [751.7, 752.2, 751.9]


def test_the_curve_at_256_rows_by_hand():
    # 256 x 4096 x 4096 in BF16: 2mnk / (2 (mk + kn + mn)) = 8,589,934,592 / 37,748,736 = 227.6 FLOP/byte over
    # the H100's ridge 989.4 / 3.35 = 295.3: r = 0.7705, 1.10 r / (r + 3.75) = 0.1875. The table:
    # 418.4 / 989.4 = 0.423. At 4096^3: 1,365.3 FLOP/byte, r = 4.623, 0.607; the table 780.2 / 989.4 = 0.789
    ridge = ridge_point_flops_per_byte("H100 SXM", "bf16")
    assert K._curve_share(ridge, 256, 4096, 4096, "bf16") == pytest.approx(0.1875, abs=0.0005)
    assert K.gemm_efficiency("H100 SXM", 4096, 4096, 4096) == pytest.approx(0.607, abs=0.001)
    # since gemm44 the price at 256 rows is the curve's at 4,096 times the table's 418.4 / 780.2 = 0.536
    assert K.gemm_efficiency("H100 SXM", 256, 4096, 4096) == pytest.approx(0.607 * 0.536, abs=0.001)
    g = _grid()
    small, big = (float(g[s]["tflops"]) / H100_BF16_PEAK for s in ((256, 4096, 4096), (4096, 4096, 4096)))
    assert (small, big) == (pytest.approx(0.423, abs=0.001), pytest.approx(0.789, abs=0.001))
    # what survives the calibrated level (kernel_efficiency scales every GEMM alike): the 256-row GEMM against
    # the 4,096-row one, 0.536 measured, 0.309 on the curve alone (and 0.536 as priced since gemm44)
    assert (small / big) / (0.1875 / 0.607) == pytest.approx(1.73, abs=0.02)


def test_deepgemms_128_row_gemms_are_far_above_the_curve_too():
    # the DeepGEMM rows already in data/ (H800 FP8): 128 x 7168 x 16384 at 645 of 1,979 TFLOP/s = 0.326. The
    # curve: 1 byte an element, 2mnk / (mk + kn + mn) = 30,064,771,072 / 120,455,168 = 249.6 FLOP/byte over
    # the FP8 ridge 1978.9 / 3.35 = 590.7: r = 0.4225, 1.10 r / (r + 3.75) = 0.111, a third of the measured
    ridge = ridge_point_flops_per_byte("H800", "fp8")
    assert K._curve_share(ridge, 128, 7168, 16384, "fp8") == pytest.approx(0.111, abs=0.001)
    assert 645 / 1979 / 0.111 == pytest.approx(2.94, abs=0.02)
    # since gemm44: the curve at 4,096 rows (2mnk / (mk + kn + mn) = 962,072,674,304 / 213,909,504 = 4,497.6
    # FLOP/byte, r = 7.614, 0.737) times the H100 BF16 table's 128-row loss at n, k held at 4,096 (the time of
    # 256 rows: 0.5 x 418.4 / 780.2 = 0.268) = 0.198: still 1.65x under DeepGEMM's FP8 kernel at 128 rows
    assert K.gemm_efficiency("H800", 128, 7168, 16384, "fp8") == pytest.approx(0.737 * 0.268, abs=0.001)


@pytest.mark.xfail(strict=True, reason="the price is the curve's level (0.607 of the H100 BF16 peak at "
                                       "4096^3 against XLA's 0.789; the calibrated kernel efficiency carries "
                                       "the level) times the table's loss to fewer rows (gemm44), so few-row "
                                       "GEMMs sit 23-31% under the table's absolute shares; the whole table "
                                       "in place of the curve widens the MoE range (2.323 -> 3.365, gemm37)")
def test_the_curve_meets_the_measured_table_at_few_rows():
    g = _grid()
    for shape in ((256, 4096, 4096), (512, 4096, 4096), (256, 2048, 4096)):
        measured = float(g[shape]["tflops"]) / H100_BF16_PEAK
        assert K.gemm_efficiency("H100 SXM", *shape) == pytest.approx(measured, rel=0.25), shape


# vLLM pull request #19566 (2025-06-12, https://github.com/vllm-project/vllm/pull/19566), its description's
# raw log of benchmarks/kernels/bench_fp8_gemm.py on a B200 at Llama 3.1 8B's N = K = 4,096, TFLOP/s:
# column fp8-tensor-w-tensor-a-noquant (vLLM's CUTLASS FP8 GEMM, per-tensor scales) and torch-bf16 (cuBLAS)
VLLM_B200_FP8 = {128: 610.8, 256: 992.8, 512: 1832.0, 1024: 2076.7}
VLLM_B200_BF16 = {128: 561.3, 256: 892.9, 512: 1335.8, 1024: 1362.7, 2048: 1444.4}
# XLA's sm_100 rows at n = k = 4,096 (data/gemm_efficiency.csv, kind == "grid", gpu == "B200"), TFLOP/s
XLA_B200_FP8 = {256: 930.5, 512: 1472.9, 1024: 1937.6, 4096: 2765.0}
XLA_B200_BF16 = {256: 651.4, 512: 990.5, 1024: 1214.0, 2048: 1342.5, 4096: 1416.9}


def _b200_checks(dtype: str) -> dict:
    with open(DATA / "gemm_efficiency.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kind"] == "check" and r["gpu"] == "B200"
                and r["dtype"] == dtype]
    assert all("vllm/pull/19566" in r["source"] and r["as_of"] == "2025-06-12" for r in rows)
    assert {(int(r["n"]), int(r["k"])) for r in rows} == {(4096, 4096)}
    return {int(r["m"]): float(r["tflops"]) for r in rows}


def test_vllms_b200_fp8_gemms_check_the_sm100_fp8_rows_out_of_sample():
    # the rows in data/ are the published figures (kind "check": the fit reads "curve", few-row prices "grid")
    assert _b200_checks("fp8") == VLLM_B200_FP8
    # by hand at 256 rows: the curve at 4,096^3 in FP8 moves 2 x 4096^3 / (3 x 4096^2 x 1 byte) = 2,730.7
    # FLOP/byte over the B200's FP8 ridge 4,500 / 7.7 = 584.4: r = 4.6725, 1.10 r / (r + 3.75) = 0.6102; times
    # XLA's sm_100 FP8 loss to 256 rows, 930.5 / 2,765.0 = 0.3365: 0.2054 of 4,500 = 924.1 TFLOP/s against
    # vLLM's 992.8, 0.931 of it
    curve = 1.10 * (8192 / 3 / (4500 / 7.7)) / (8192 / 3 / (4500 / 7.7) + 3.75)
    assert curve == pytest.approx(0.6102, abs=1e-4)
    predicted = K.gemm_efficiency("B200", 256, 4096, 4096, "fp8")
    assert predicted == pytest.approx(curve * 930.5 / 2765.0, rel=1e-3)
    assert predicted * 4500 / 992.8 == pytest.approx(0.931, abs=0.001)
    # every row, predicted / measured (128 rows at the time of 256, the library's rule below the grid):
    # 0.5 x 924.1 / 610.8; 0.6102 x 1,472.9 / 2,765.0 x 4,500 = 1,462.8 / 1,832.0; 1,924.3 / 2,076.7
    expected = {128: 0.757, 256: 0.931, 512: 0.798, 1024: 0.927}
    ratio = {m: K.gemm_efficiency("B200", m, 4096, 4096, "fp8") * 4500 / t for m, t in VLLM_B200_FP8.items()}
    assert ratio == pytest.approx(expected, abs=0.002)
    # the library prices these GEMMs 7-24% under vLLM's kernel; the loss to fewer rows alone (against 1,024
    # rows, so no level enters) is XLA's at 256 rows (0.480 against vLLM's 992.8 / 2,076.7 = 0.478) and deeper
    # at 512 (1,472.9 / 1,937.6 = 0.760 against 1,832.0 / 2,076.7 = 0.882) and 128 (0.240 against 0.294)
    at_1024 = K.few_row_share(1024, 4096, 4096, "B200", "fp8")
    share = {m: K.few_row_share(m, 4096, 4096, "B200", "fp8") / at_1024 for m in (128, 256, 512)}
    xla = {m: XLA_B200_FP8[m] / XLA_B200_FP8[1024] for m in (256, 512)}
    assert share == pytest.approx({128: 0.5 * xla[256], 256: xla[256], 512: xla[512]})
    assert xla == pytest.approx({256: 0.480, 512: 0.760}, abs=0.001)
    measured = {m: VLLM_B200_FP8[m] / VLLM_B200_FP8[1024] for m in (128, 256, 512)}
    assert measured == pytest.approx({128: 0.294, 256: 0.478, 512: 0.882}, abs=0.001)


def test_the_same_runs_bf16_gemms_check_the_sm100_bf16_rows():
    # torch's BF16 GEMM in the same log; the curve at 4,096^3 in BF16 has the same r (twice the bytes, half
    # the ridge: 2,250 / 7.7 = 292.2), 0.6102, times XLA's sm_100 BF16 loss: at 256 rows 651.4 / 1,416.9 =
    # 0.4597, 0.2805 of 2,250 = 631.2 TFLOP/s against 892.9 (0.707): cuBLAS keeps more of few rows than XLA's
    # table
    assert _b200_checks("bf16") == VLLM_B200_BF16
    expected = {128: 0.562, 256: 0.707, 512: 0.719, 1024: 0.863, 2048: 0.901}
    ratio = {m: K.gemm_efficiency("B200", m, 4096, 4096) * 2250 / t for m, t in VLLM_B200_BF16.items()}
    assert ratio == pytest.approx(expected, abs=0.002)
    by_hand = 0.6102 * XLA_B200_BF16[256] / XLA_B200_BF16[4096] * 2250 / 892.9
    assert ratio[256] == pytest.approx(by_hand, abs=0.001)
