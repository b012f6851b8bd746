"""The GEMM curve's few-row regime (gemm44, issue 34): below ``FEW_ROWS`` rows a GEMM keeps of the rate at
``FEW_ROWS`` what XLA's measured H100 BF16 table keeps (``data/gemm_efficiency.csv``, ``kind == "grid"``).
Expected values worked by hand from the published tables, not from the code."""

import pytest

from llmsizing import kernels as K

# XLA's kDefaultMatmulPTable, sm_90, bf16, n = k = 4,096 (TFLOP/s as stored, to 0.1)
XLA_4096 = {256: 418.4, 512: 661.6, 1024: 751.9, 2048: 752.3, 4096: 780.2}


@pytest.mark.parametrize("m", [256, 512, 1024, 2048])
def test_few_row_share_is_xlas_loss_to_fewer_rows(m):
    assert K.few_row_share(m, 4096, 4096) == pytest.approx(XLA_4096[m] / XLA_4096[4096], rel=1e-9)


def test_few_row_share_interpolates_in_log2_and_holds_time_below_256():
    # 1,448 rows is half way from 1,024 to 2,048 in log2 (2^10.5 = 1,448.2)
    mid = 2 ** 10.5
    assert K.few_row_share(round(mid), 4096, 4096) == pytest.approx(
        (751.9 + 752.3) / 2 / 780.2, rel=1e-3)
    # below 256 rows the table's time of 256: the rate scales with the rows
    assert K.few_row_share(128, 4096, 4096) == pytest.approx(0.5 * 418.4 / 780.2, rel=1e-9)
    # held at 4,096 in n and k: n = 16,384, k = 8,192 read as 4,096
    assert K.few_row_share(1024, 16384, 8192) == pytest.approx(751.9 / 780.2, rel=1e-9)
    assert K.few_row_share(4096, 512, 512) == 1.0 and K.few_row_share(65536, 4096, 4096) == 1.0


def test_h100_few_row_gemm_keeps_the_measured_share_of_4096_rows():
    # the curve alone kept 0.419 / 0.607 = 0.69 of the 4,096-row share at 1,024 rows; XLA measured 0.964
    ratio = K.gemm_efficiency("H100 SXM", 1024, 4096, 4096) / K.gemm_efficiency("H100 SXM", 4096, 4096, 4096)
    assert ratio == pytest.approx(751.9 / 780.2, rel=1e-9)


def test_bekmans_a100_few_row_shape_is_priced_near_its_measured_share():
    # Bekman, ML Engineering, MAMF table: A100 BF16 best shape 1,024 x 10,240 x 5,120 at 271.2 of 312 TFLOP/s
    # = 0.869; a best-of-search ceiling, so the price should sit at most 10% under it, not above it.
    # (The curve alone gave 0.636.)
    measured = 271.2 / 312
    share = K.gemm_efficiency("A100 80GB", 1024, 10240, 5120)
    assert 0.9 * measured <= share <= measured


def test_few_row_share_refuses_bad_rows():
    with pytest.raises((ValueError, TypeError)):
        K.few_row_share(0, 4096, 4096)
    with pytest.raises((ValueError, TypeError)):
        K.few_row_share(1024.5, 4096, 4096)


def test_a100_squares_lose_to_fewer_rows_as_the_h100_table_says():
    # a check on data the rule does not read: NVIDIA's CUDA 11 figure (cuBLAS, A100 BF16, read off the
    # figure): 1,024^3 at 88 and 4,096^3 at 258 TFLOP/s, 0.341 of it; 1,536^3 at 150, 0.581. The priced
    # ratio (the curve at 4,096 rows times the H100 table's loss) within 10%; the curve alone: 0.53 and 0.67
    for size, tflops in ((1024, 88), (1536, 150)):
        top = K.gemm_efficiency("A100 80GB", 4096, 4096, 4096)
        priced = K.gemm_efficiency("A100 80GB", size, size, size) / top
        assert priced == pytest.approx(tflops / 258, rel=0.10), size
