"""What a GEMM of few rows keeps of the rate of one of ``FEW_ROWS`` rows at the same ``n`` and ``k``, read
from XLA's measured GEMM tables (``data/gemm_efficiency.csv``, ``kind == "grid"``: OpenXLA's
``matmul_interpolator_data.h``, ``kDefaultMatmulPTable``, 256 to 4,096 in each of ``m``, ``n``, ``k``; gemm44,
b200gemm), chosen by the GPU's compute target (``gemm_arch`` in ``data/gpus.csv``) and by dtype (gb46).
:mod:`llmsizing.kernels` prices a GEMM of fewer rows with it and re-exports every name here (chapter 10).

**FP8** (gb46). The same file measures FP8 GEMMs (``f8e4m3fn x f8e4m3fn -> bf16``) at the same shapes. On
``sm_100`` (B200, GB200) they lose more to few rows than BF16: at ``n = k = 4,096`` the FP8 rows keep 0.34,
0.53, 0.70 and 0.90 of their 4,096-row rate at 256 to 2,048 rows (930.5, 1,472.9, 1,937.6 and 2,491.3 of
2,765.0 TFLOP/s), the BF16 rows 0.46, 0.70, 0.86 and 0.95; 2,765.0 is 0.61 of the B200's 4,500 dense FP8 peak.
So an FP8 or FP4 GEMM on an ``sm_100`` GPU is priced on those rows (FP4 as FP8, as
:func:`~llmsizing.hardware.kernel_efficiency_row` does). One published table checks them out of sample (``kind
== "check"``, fitted by nothing; tests/test_gemm_table.py): vLLM's CUTLASS FP8 GEMM on a B200 at ``n = k =
4,096`` (vLLM pull request #19566, 2025-06-12, 4 rows) is priced at 0.76, 0.93, 0.80 and 0.93 of its 610.8,
992.8, 1,832.0 and 2,076.7 TFLOP/s at 128 to 1,024 rows; against 1,024 rows (no level) it keeps XLA's share at
256 (0.48) but more at 512 (0.88, XLA 0.76). Torch's BF16 GEMM in the same log is priced at 0.56-0.90 of it
(128 to 2,048 rows, 5 rows): cuBLAS keeps more of few rows than XLA's BF16 table. The file's ``sm_90`` FP8
entries are not used: from 1,024 rows up at ``n = k = 4,096`` they pass the H100's 1,979 TFLOP/s dense FP8
peak (2,112.6 at 2,048 rows, 2,423.8 at 4,096, 3.1x the BF16 entry where the peaks differ 2x), not a rate the
GPU can reach, so not a rate to divide by (they would keep 0.22, 0.40, 0.63 and 0.87 of it). Hopper's FP8
GEMMs keep BF16's share; DeepGEMM's H800 FP8 kernel, written for few rows, keeps 533 of 1,304 TFLOP/s at 128
rows (0.41; BF16's table, 0.27) and stays a check (tests/test_gemm_table.py). Searched for other FP8 GEMM
rates by ``m`` (gb46, 2026-12-05): DeepGEMM's README (128 rows against 4,096, H800: the check; its SM100
README, 2025-07 to 2026-04, has no rates), Transformer Engine's "GEMM Speedups Across Precisions" page and
GEMM profiling tutorial (no rates by ``m``), single-size cuBLASLt FP8 benchmarks and torchao's B200
bench_matmul (squares only), vLLM #20071 (B200 FP8 to 256 rows), FlashInfer #2146 and SGLang #13528 (B200
block-scaled FP8 times, not read)."""

from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path

from ._validate import check_choice, check_int
from .catalog import get_gpu

DATA = Path(__file__).resolve().parents[2] / "data"

#: Below this many rows a GEMM is priced by what XLA's measured table loses to fewer rows (gemm44).
FEW_ROWS = 4096
#: The sizes XLA's table measured in each of ``m``, ``n``, ``k`` (``data/gemm_efficiency.csv``, ``grid``).
GRID_SIZES = (256, 512, 1024, 2048, 4096)
#: The measured table a GPU without its own prices few rows by: XLA's H100 one (gemm44).
GRID_STAND_IN = "H100 SXM"


@lru_cache(maxsize=1)
def _grids() -> dict:
    """``{(gpu, dtype): {(m, n, k): TFLOP/s}}``: ``data/gemm_efficiency.csv``'s ``grid`` rows."""
    tables: dict = {}
    with open(DATA / "gemm_efficiency.csv", newline="") as fh:
        for r in (r for r in csv.DictReader(fh) if r["kind"] == "grid"):
            tables.setdefault((r["gpu"], r["dtype"]), {})[int(r["m"]), int(r["n"]), int(r["k"])] = \
                float(r["tflops"])
    return tables


@lru_cache(maxsize=1)
def _grid_tables() -> dict:
    """``{gpu: {(m, n, k): TFLOP/s}}``: the BF16 ``grid`` rows (XLA sm_90, sm_100), a table a GPU."""
    return {g: t for (g, d), t in _grids().items() if d == "bf16"}


def grid_gpu(gpu) -> str:
    """The GPU whose measured table (``data/gemm_efficiency.csv``, ``kind == "grid"``) prices ``gpu``'s
    few-row GEMMs: its own, else one of its ``gemm_arch`` (``data/gpus.csv``: the B200's for the GB200, both
    ``sm_100``), else one of its NVIDIA family (:func:`arch_family`: the B200's for the B300, ``sm_103``),
    else :data:`GRID_STAND_IN` (none for the A100's ``sm_80``, the Ada cards' ``sm_89``, AMD's)."""
    g, t = get_gpu(gpu), _grid_tables()
    if g.name in t:
        return g.name
    archs = {get_gpu(x).gemm_arch: x for x in t}
    if g.gemm_arch in archs:
        return archs[g.gemm_arch]
    family = {arch_family(a): x for a, x in archs.items() if arch_family(a) is not None}
    return family.get(arch_family(g.gemm_arch), GRID_STAND_IN)


def arch_family(arch) -> str | None:
    """The family of an NVIDIA compute target, ``"sm_10x"`` for ``sm_100`` and ``sm_103``: CUDA 12.9's
    family-specific targets (``sm_100f``) run on every target of the same major version, the B200's and the
    B300's alike (NVIDIA, CUDA 12.9 release notes and "Blackwell family-specific architecture features");
    ``None`` for a target that is not ``sm_<major><minor>`` (AMD's ``gfx942``) or none. A stand-in, not a
    check: no few-row rate of a B300 is published, so how far its shares differ from the B200's is not known
    (the B200's keep 0.75-0.93 of the H100's at 256-2,048 rows, medians: :func:`few_row_share`)."""
    import re

    m = re.fullmatch(r"sm_(\d+)(\d)", arch) if isinstance(arch, str) else None
    return None if m is None else f"sm_{m.group(1)}x"


def grid_dtype(table: str, dtype: str = "bf16") -> str:
    """The rows of ``table`` (:func:`grid_gpu`) that price a GEMM in ``dtype``: ``"fp8"`` for FP8 and FP4
    where it has FP8 rows (the B200's, ``sm_100``), else ``"bf16"`` (module docstring)."""
    return "fp8" if dtype in ("fp8", "fp4") and (table, "fp8") in _grids() else "bf16"


@lru_cache(maxsize=65536)
def _grid_rate(m: int, n: int, k: int, table: str = GRID_STAND_IN, dtype: str = "bf16") -> float:
    """The measured ``dtype`` table of ``table`` at ``(m, n, k)``: interpolated in ``log2`` of each dimension,
    held at 4,096 above and at the time of 256 below (the rate times ``dim / 256``)."""
    grid, rate, axes = _grids()[table, dtype], 1.0, []
    for d in (m, n, k):
        rate *= min(1.0, d / GRID_SIZES[0])
        x = math.log2(min(max(d, GRID_SIZES[0]), GRID_SIZES[-1]) / GRID_SIZES[0])
        i = min(len(GRID_SIZES) - 2, int(x))
        axes.append(((GRID_SIZES[i], 1 - (x - i)), (GRID_SIZES[i + 1], x - i)))
    return rate * sum(wm * wn * wk * grid[dm, dn, dk] for dm, wm in axes[0] for dn, wn in axes[1]
                      for dk, wk in axes[2] if wm * wn * wk)


def few_row_share(m: int, n: int, k: int, gpu=None, dtype: str = "bf16") -> float:
    """What a GEMM of ``m < FEW_ROWS`` rows keeps of the rate of one of ``FEW_ROWS`` rows at the same ``n``
    and ``k``, as XLA's measured table for ``gpu`` (:func:`grid_gpu`; the H100's when None) has it in
    ``dtype`` (:func:`grid_dtype`: BF16's but for FP8 and FP4 on ``sm_100``); 1 at ``m >= FEW_ROWS``. H100 at
    ``n = k = 4,096``: 0.96 at 1,024 and 2,048 rows (751.9 and 752.3 of 780.2 TFLOP/s; the curve keeps 0.69
    and 0.87: gemm44). ``sm_100`` (B200, GB200) loses more: 0.86 and 0.95 (1,214.0 and 1,342.5 of 1,416.9),
    0.70 at 512 rows (H100 0.85); over the 25 ``(n, k)`` 0.75, 0.82, 0.87, 0.93 of the H100's share at 256 to
    2,048 rows (medians), beyond the H100 table's re-measurement (7%); in FP8 0.70 and 0.90 at 1,024 and
    2,048 rows."""
    m, n, k = check_int("m", m), check_int("n", n), check_int("k", k)
    dtype = check_choice("dtype", dtype, ("bf16", "fp16", "fp8", "fp4"))
    table = GRID_STAND_IN if gpu is None else grid_gpu(gpu)
    d = grid_dtype(table, dtype)
    return 1.0 if m >= FEW_ROWS else _grid_rate(m, n, k, table, d) / _grid_rate(FEW_ROWS, n, k, table, d)
