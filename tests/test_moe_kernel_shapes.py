"""Issue 35 (smallmoe40): the small-MoE runs' own MoE kernels (ScatterMoE for Granite 3.0, MegaBlocks for
JetMoE-8B) at the runs' own layer shapes, against the library's price of the same layer.

PRE-REGISTERED (Dec 4 2026, written and committed before any range was looked at):
- Evidence: published throughput of whole MoE layers or expert GEMMs (ScatterMoE, Tan et al. 2024,
  arXiv:2403.08245; MegaBlocks, Gale et al. 2022, arXiv:2211.15841; SonicMoE, Guo et al. 2025,
  arXiv:2512.14080, Fig. 14, already in data/moe_layer_kernels.csv), each with shape, GPU, dtype, source and
  as-of, compared with llmsizing.moe_evidence.moe_layer_tflops at the same shape. NVIDIA NeMo /
  Megatron-Bridge tables stay out.
- "Slower than priced" means: at a shape near a run's (same expert width, hidden within 0.5-2x of the run's,
  same GPU generation), the measured TFLOP/s plus its reading error (+10 TFLOP/s for a bar read off a figure)
  is below the library's price, in the forward or the backward.
- If so, and only then, I adopt: a column `moe_kernel` in data/moe_published_runs.csv (the stack's MoE kernel
  as its source names it) and a per-kernel table in data/ of measured/priced at the measured shapes; the
  routed experts' GEMM seconds of a run are divided by that ratio (the nearest measured shape, no fit, never >
  1 as a speed-up), for every row whose kernel has a measured row, never by a model's name. Then calibrate.py
  (+ --check) and freeze_plans.py are run and every area is reported before -> after; no re-fit on a miss, no
  row dropped.
- If the measured layers run at or above the price at the runs' shapes, nothing is priced: the data and a test
  that holds the library against them are committed, and the gap is said to lie elsewhere.

Outcome (smallmoe40): the ScatterMoE and MegaBlocks papers' own tables and figures could not be read here
(their text is not in the stored pages beyond the abstract; arXiv is out of reach), so the measured layers are
SonicMoE's Fig. 14 bars already stored, tied to the 2024 kernels by their source: ScatterMoE's forward tile is
the same in its March 2024 release, in the copy IBM's dolomite-engine called in Sep 2024 and in the copy
SonicMoE benchmarks (data/moe_kernel_evidence.csv, *_tile_rows_*). At the Granite runs' own shapes those
layers run at or above the library's price, so nothing is adopted: the runs' gap is elsewhere. JetMoE-8B's
experts (5,632 wide) have no measured layer of their width, so the rule adopts nothing for it either.
"""

import pandas as pd
import pytest

from llmsizing.moe_evidence import (BAR_READ_TFLOPS, kernel_bars_near_run, moe_kernel_evidence,
                                    moe_layer_tflops, moe_part_factor_needed, run_layer_shape,
                                    tile_padding_share)
from llmsizing.moe_runs import moe_published_runs


@pytest.fixture(scope="module")
def runs():
    return moe_published_runs().set_index("run", drop=False)


G1, G3, JET = ("Granite 3.0 1B-A400M pre-training", "Granite 3.0 3B-A800M pre-training",
               "JetMoE-8B pre-training")


def test_tile_padding_by_hand():
    # Granite 1B-A400M: 4,096 tokens x top-8 / 32 experts = 1,024 rows an expert = 8 blocks of 128: no padding
    assert tile_padding_share(4096, 32, 8) == 1.0
    # Granite 3B-A800M: 4,096 x 8 / 40 = 819.2 rows -> 7 blocks = 896 rows: 896 / 819.2 = 1.09375
    assert tile_padding_share(4096, 40, 8) == pytest.approx(1.09375, rel=1e-12)
    # SonicMoE's d 1,536 bar: 24,576 x 4 / 64 = 1,536 = 12 blocks exactly
    assert tile_padding_share(24576, 64, 4) == 1.0
    with pytest.raises(ValueError, match="top_k"):
        tile_padding_share(4096, 8, 9)
    with pytest.raises(ValueError, match="tile_rows"):
        tile_padding_share(4096, 8, 2, tile_rows=0)


def test_run_layer_shapes_as_published(runs):
    # Granite 3.0 report Table 1 / the models' config.json: hidden 1,024 and 1,536, 32 and 40 experts of 512,
    # top-8; JetMoE-8B config.json: hidden 2,048, 8 experts of 5,632, top-2; one 4,096-token sequence a
    # micro-batch (moe_runs.run_step)
    shape = dict(tokens=4096, expert_ffn=512, top_k=8)
    assert run_layer_shape(runs.loc[G1]) == dict(shape, hidden=1024, experts=32)
    assert run_layer_shape(runs.loc[G3]) == dict(shape, hidden=1536, experts=40)
    assert run_layer_shape(runs.loc[JET]) == dict(tokens=4096, hidden=2048, expert_ffn=5632, experts=8,
                                                  top_k=2)


def test_the_2024_scattermoe_forward_tile_is_the_benchmarked_one():
    ev = moe_kernel_evidence()
    ids = ["scattermoe_tile_rows_2024", "dolomite_scattermoe_tile_rows_2024", "xma_scatter_tile_rows_2025"]
    assert [float(ev.loc[i, "value"]) for i in ids] == [128.0] * 3
    for i in ids:   # the same whole tile, not only its rows
        assert "BLOCK_N 128, BLOCK_K 32" in ev.loc[i, "setting"]


@pytest.mark.parametrize("run, hand_fwd_low, hand_bwd_low", [
    # SonicMoE Fig. 14, ScatterMoE, 512-wide experts at d 768 (205 fwd, 245 bwd) and d 1,536 (235, 248), less
    # the +-10 TFLOP/s reading error, over the run's padding (1 and 1.09375, test_tile_padding_by_hand)
    (G1, [195.0, 225.0], [235.0, 238.0]),
    (G3, [195 / 1.09375, 225 / 1.09375], [235 / 1.09375, 238 / 1.09375]),
])
def test_granite_scattermoe_layers_run_no_slower_than_priced(runs, run, hand_fwd_low, hand_bwd_low):
    """At each Granite run's own layer shape the ScatterMoE layer's lower bound (the measured bar less its
    reading error, over the run's tile padding) is at least 0.9 of the library's price, forward and backward.
    Tolerance 0.9: the run's shape has fewer tiles than the bar's, so its last partial wave costs more: by
    hand the up-projection has 32 x 8 x 8 = 2,048 (1B) and 40 x 7 x 8 = 2,240 (3B) tiles, over 15 waves of an
    H100's 132 SMs, so at most 1/16 (6%) is lost to the last wave. The run needs its MoE layers 1.6x slower
    than priced (moe_part_factor_needed); the kernel can account for at most 1/0.9 = 1.11x of it, and the
    layer rate the run would need is below two thirds of the measured lower bound."""
    row = runs.loc[run]
    t = kernel_bars_near_run(row, "ScatterMoE").sort_values("hidden")
    assert list(t["hidden"]) == [768, 1536] and (t["expert_ffn"] == 512).all()
    assert list(t["fwd_low"]) == pytest.approx(hand_fwd_low)
    assert list(t["bwd_low"]) == pytest.approx(hand_bwd_low)
    assert (t["fwd_low_over_price"] >= 0.9).all() and (t["bwd_low_over_price"] >= 0.9).all()
    need = moe_part_factor_needed(row)
    assert need > 1.5
    needed_rate = t["library_tflops"].iloc[0] / need
    assert needed_rate < 2 / 3 * min(t["fwd_low"].min(), t["bwd_low"].min())


def test_jetmoe_experts_have_no_measured_layer_of_their_width(runs):
    """JetMoE-8B's MegaBlocks experts are 5,632 wide; the widest measured MegaBlocks layer (SonicMoE Fig. 14,
    d 4,096, 64 experts of 2,048, top-4, 32,768 tokens: 367 fwd, 385 bwd) runs slightly below the library's
    price of that layer, 0.90-0.95 (fwd) and 0.94-1.00 (bwd) within the +-10 reading error, far from the
    1/1.77 = 0.56 JetMoE would need. By the pre-registered rule (same expert width) nothing is adopted."""
    row = runs.loc[JET]
    assert kernel_bars_near_run(row, "MegaBlocks").empty and kernel_bars_near_run(row, "ScatterMoE").empty
    price = moe_layer_tflops(32768, 4096, 2048, 64, 4)
    for bar in (367, 385):
        assert 0.85 < (bar - BAR_READ_TFLOPS) / price and (bar + BAR_READ_TFLOPS) / price <= 1.0
    assert moe_part_factor_needed(row) > 1.5
    lk = pd.read_csv(__import__("llmsizing.moe_evidence", fromlist=["x"]).MOE_LAYER_KERNELS_CSV)
    assert lk[lk["kernel"] == "MegaBlocks"]["expert_ffn"].max() == 2048
