"""The GEMM curve's few-row regime (gemm44, issue 34): below ``FEW_ROWS`` rows a GEMM keeps of the rate at
``FEW_ROWS`` what XLA's measured BF16 table of the GPU keeps (``data/gemm_efficiency.csv``, ``kind ==
"grid"``: the table of the GPU's compute target, ``gemm_arch`` in ``data/gpus.csv`` (the B200's for the B200 and
GB200, sm_100, since b200gemm and gb46), else the H100's).
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


# XLA's kDefaultMatmulPTable, sm_100 (compute capability 10.0: stored as the B200), bf16, b = 1, n = k = 4,096
# (TFLOP/s as stored, to 0.1: 651394145142943 FLOP/s at 256 rows, ..., 1416867213789406 at 4,096)
XLA_B200_4096 = {256: 651.4, 512: 990.5, 1024: 1214.0, 2048: 1342.5, 4096: 1416.9}


@pytest.mark.parametrize("m", [256, 512, 1024, 2048])
def test_b200_few_row_share_is_its_own_tables_loss(m):
    # the B200 loses more to few rows than the H100: 1,214.0 / 1,416.9 = 0.857 at 1,024 rows against
    # 751.9 / 780.2 = 0.964 (b200gemm; the H100's table on every GPU before)
    assert K.few_row_share(m, 4096, 4096, "B200") == pytest.approx(XLA_B200_4096[m] / XLA_B200_4096[4096],
                                                                   rel=1e-9)
    ratio = K.gemm_efficiency("B200", m, 4096, 4096) / K.gemm_efficiency("B200", 4096, 4096, 4096)
    assert ratio == pytest.approx(XLA_B200_4096[m] / XLA_B200_4096[4096], rel=1e-9)


def test_a_gpu_without_a_table_for_its_compute_target_keeps_the_h100s():
    # sm_90 parts (the H800, H20, H200, H100 PCIe: the H100's own target), targets no grid row was measured on
    # (the A100's sm_80, the Ada cards' sm_89, the MI300X's gfx942) and no GPU at all: XLA's sm_90 table,
    # 751.9 / 780.2 (data/gpus.csv, gemm_arch; gb46)
    for gpu in ("A100 80GB", "H100 SXM", "H800", "H20", "H200", "H100 PCIe", "L40S", "MI300X", None):
        assert K.few_row_share(1024, 4096, 4096, gpu) == pytest.approx(751.9 / 780.2, rel=1e-9), gpu
    assert K.grid_gpu("B200") == "B200" and K.grid_gpu("A100 80GB") == K.GRID_STAND_IN == "H100 SXM"
    assert K.grid_gpu("H800") == "H100 SXM"


def test_the_b300_takes_its_familys_table():
    # the B300 is compute capability 10.3 (sm_103; no XLA table of its own), the B200 10.0: CUDA 12.9's
    # family-specific targets (sm_100f) run on both, so the B300 takes the B200's table, 1,214.0 / 1,416.9 =
    # 0.857 at 1,024 rows (the H100's 0.964 before); AMD's targets have no such family
    from llmsizing.gemm_grid import arch_family

    assert [arch_family(a) for a in ("sm_103", "sm_100", "sm_90")] == ["sm_10x", "sm_10x", "sm_9x"]
    assert arch_family("gfx942") is None and arch_family(None) is None
    assert K.grid_gpu("B300") == "B200"
    assert K.few_row_share(1024, 4096, 4096, "B300") == pytest.approx(1214.0 / 1416.9, rel=1e-9)


# XLA's sm_100 table (the B200's rows), bf16, b = 1, at n = 1,024, k = 2,048 (TFLOP/s as stored, to 0.1)
XLA_B200_1024_2048 = {512: 263.1, 4096: 990.3}


def test_the_gb200_is_priced_on_the_table_of_its_compute_target():
    # the GB200 is compute capability 10.0 like the B200 (NVIDIA's CUDA GPUs page: one entry for both;
    # data/gpus.csv gemm_arch sm_100), and XLA keys its table by that target: the GB200 keeps 1,214.0 / 1,416.9
    # = 0.857 at 1,024 rows (it kept the H100's 751.9 / 780.2 = 0.964 before gb46), and 263.1 / 990.3 = 0.266
    # at 512 x 1,024 x 2,048 (the H100's 231.0 / 643.7 = 0.359)
    assert K.grid_gpu("GB200") == "B200"
    assert K.few_row_share(1024, 4096, 4096, "GB200") == pytest.approx(1214.0 / 1416.9, rel=1e-9)
    assert K.few_row_share(512, 1024, 2048, "GB200") == pytest.approx(263.1 / 990.3, rel=1e-9)
    ratio = K.gemm_efficiency("GB200", 1024, 4096, 4096) / K.gemm_efficiency("GB200", 4096, 4096, 4096)
    assert ratio == pytest.approx(XLA_B200_4096[1024] / XLA_B200_4096[4096], rel=1e-9)
    few = K.layer_gemm_efficiency("llama-3.1-405b", "GB200", tp=1, tokens=1024)
    full = K.layer_gemm_efficiency("llama-3.1-405b", "GB200", tp=1, tokens=4096)
    assert few / full == pytest.approx(1214.0 / 1416.9, rel=1e-9)


def test_the_table_follows_the_gpus_data_not_its_name():
    # a hand-made GPU takes the table of its gemm_arch whatever it is called, and none without one
    from dataclasses import replace

    from llmsizing import get_gpu
    h100, gb200 = get_gpu("H100 SXM"), get_gpu("GB200")
    assert K.grid_gpu(replace(h100, name="my sm_100 part", gemm_arch="sm_100")) == "B200"
    assert K.few_row_share(512, 1024, 2048, replace(gb200, name="GB200 copy")) == \
        pytest.approx(XLA_B200_1024_2048[512] / XLA_B200_1024_2048[4096], rel=1e-9)
    assert K.grid_gpu(replace(gb200, name="no target", gemm_arch=None)) == "H100 SXM"
    with pytest.raises(TypeError, match="gemm_arch"):
        replace(h100, name="bad", gemm_arch="")


def test_a_b200_layer_at_few_tokens_keeps_its_tables_share():
    # Llama 3.1 405B at tp 1: every GEMM of a layer has n and k >= 4,096 (hidden 16,384, q/k/v 18,432, MLP
    # 53,248), so each keeps the table's share at n = k = 4,096, and so does their time-weighted mean:
    # 1,024 tokens over 4,096 tokens is 1,214.0 / 1,416.9 on the B200, 751.9 / 780.2 on the H100
    for gpu, rate in (("B200", XLA_B200_4096), ("H100 SXM", XLA_4096)):
        few = K.layer_gemm_efficiency("llama-3.1-405b", gpu, tp=1, tokens=1024)
        full = K.layer_gemm_efficiency("llama-3.1-405b", gpu, tp=1, tokens=4096)
        assert few / full == pytest.approx(rate[1024] / rate[4096], rel=1e-9), gpu


def test_the_b200_grid_holds_every_shape_once_below_bekmans_best():
    # 125 shapes (256 to 4,096 in each of m, n, k), each with its source; none beats the best BF16 GEMM
    # Bekman's search found on a B200 (1,745 TFLOP/s, a kind == "best" row): the largest is 1,416.9 at 4,096^3
    import csv
    from pathlib import Path
    with open(Path(K.DATA) / "gemm_efficiency.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kind"] == "grid" and r["gpu"] == "B200"
                and r["dtype"] == "bf16"]
    sizes = K.GRID_SIZES
    assert sorted((int(r["m"]), int(r["n"]), int(r["k"])) for r in rows) == \
        [(m, n, k) for m in sizes for n in sizes for k in sizes]
    assert all(r["source"].startswith("OpenXLA") and "sm_100" in r["source"] and r["as_of"] for r in rows)
    assert max(float(r["tflops"]) for r in rows) == 1416.9 < 1745


# XLA's kDefaultMatmulPTable, sm_100, b = 1, f8e4m3fn x f8e4m3fn -> bf16, n = k = 4,096 (TFLOP/s as stored, to
# 0.1: 930452187175043 FLOP/s at 256 rows, ..., 2764981863158106 at 4,096; gb46)
XLA_B200_FP8_4096 = {256: 930.5, 512: 1472.9, 1024: 1937.6, 2048: 2491.3, 4096: 2765.0}


@pytest.mark.parametrize("m", [256, 512, 1024, 2048])
def test_fp8_on_sm_100_is_priced_on_its_fp8_rows(m):
    # FP8 loses more to few rows than BF16 on sm_100: 1,937.6 / 2,765.0 = 0.701 at 1,024 rows against
    # 1,214.0 / 1,416.9 = 0.857; FP4 takes FP8's rows, FP16 BF16's; the GB200 shares the B200's target
    fp8 = XLA_B200_FP8_4096[m] / XLA_B200_FP8_4096[4096]
    for gpu in ("B200", "GB200"):
        assert K.few_row_share(m, 4096, 4096, gpu, "fp8") == pytest.approx(fp8, rel=1e-9)
        assert K.few_row_share(m, 4096, 4096, gpu, "fp4") == pytest.approx(fp8, rel=1e-9)
        assert K.few_row_share(m, 4096, 4096, gpu, "fp16") == \
            pytest.approx(XLA_B200_4096[m] / XLA_B200_4096[4096], rel=1e-9)
        ratio = K.gemm_efficiency(gpu, m, 4096, 4096, "fp8") / K.gemm_efficiency(gpu, 4096, 4096, 4096, "fp8")
        assert ratio == pytest.approx(fp8, rel=1e-9)
    # the default stays BF16's (few_row_share's old calls)
    assert K.few_row_share(m, 4096, 4096, "B200") == pytest.approx(XLA_B200_4096[m] / XLA_B200_4096[4096],
                                                                   rel=1e-9)


def test_fp8_on_hopper_keeps_bf16s_share_and_a_b200_fp8_layer_its_fp8_rows():
    # sm_90 has no FP8 rows in data/ (XLA's pass the H100's 1,979 TFLOP/s FP8 peak: not used), so an H100 or
    # H800 FP8 GEMM keeps the BF16 table's 751.9 / 780.2; Llama 3.1 405B at tp 1 (every n, k >= 4,096) in FP8
    # on a B200: 1,024 tokens over 4,096 is 1,937.6 / 2,765.0
    for gpu in ("H100 SXM", "H800"):
        assert K.few_row_share(1024, 4096, 4096, gpu, "fp8") == pytest.approx(751.9 / 780.2, rel=1e-9)
    assert K.grid_dtype("H100 SXM", "fp8") == "bf16" and K.grid_dtype("B200", "fp8") == "fp8"
    few = K.layer_gemm_efficiency("llama-3.1-405b", "B200", tp=1, tokens=1024, dtype="fp8")
    full = K.layer_gemm_efficiency("llama-3.1-405b", "B200", tp=1, tokens=4096, dtype="fp8")
    assert few / full == pytest.approx(1937.6 / 2765.0, rel=1e-9)
    with pytest.raises(ValueError, match="dtype"):
        K.few_row_share(1024, 4096, 4096, "B200", "int8")


def test_the_b200_fp8_grid_holds_every_shape_once_below_the_fp8_peak():
    # 125 shapes, each with its source (the sm_100 key, the FP8 entry); none reaches the B200's 4,500 dense
    # FP8 peak (data/gpus.csv), the largest 2,765.0 at 4,096^3; spot values by hand from the file:
    # (512, 512, 1024) 81616131346913, (4096, 1024, 1024) 850825534072900, (2048, 4096, 1024) 1423942742146705
    import csv
    from pathlib import Path
    with open(Path(K.DATA) / "gemm_efficiency.csv", newline="") as fh:
        rows = {(int(r["m"]), int(r["n"]), int(r["k"])): r for r in csv.DictReader(fh)
                if r["kind"] == "grid" and r["gpu"] == "B200" and r["dtype"] == "fp8"}
    sizes = K.GRID_SIZES
    assert sorted(rows) == [(m, n, k) for m in sizes for n in sizes for k in sizes]
    assert all("sm_100" in r["source"] and "f8e4m3fnxf8e4m3fn" in r["source"] for r in rows.values())
    assert max(float(r["tflops"]) for r in rows.values()) == 2765.0 < 4500
    for shape, tflops in (((512, 512, 1024), 81.6), ((4096, 1024, 1024), 850.8), ((2048, 4096, 1024), 1423.9)):
        assert float(rows[shape]["tflops"]) == tflops, shape
