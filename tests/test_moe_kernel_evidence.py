"""Issue 35, the small MoEs trained without expert parallelism: the published kernel-level and controlled-pair
figures gathered in data/moe_kernel_evidence.csv, read by hand, and what they say about the library. No term
is priced from them (not enough evidence yet: see the strict xfail below and /work/notes/moephys35q.md)."""

from pathlib import Path

import pandas as pd
import pytest

from llmsizing.hardware import dense_tflops
from llmsizing.layouts import step_time
from llmsizing.mfu import layout_range_factors
from llmsizing.model import Model
from llmsizing.parallel import Parallel

DATA = Path(__file__).resolve().parents[1] / "data" / "moe_kernel_evidence.csv"


@pytest.fixture(scope="module")
def ev():
    return pd.read_csv(DATA).set_index("id", drop=False)


def test_every_figure_names_its_source_place_and_date(ev):
    assert ev.index.is_unique and len(ev) >= 10
    for _, r in ev.iterrows():
        assert r["source"].strip() and r["where"].strip() and r["setting"].strip()
        assert len(r["as_of"]) == 10 and r["as_of"][4] == "-" and r["as_of"][7] == "-"
        assert float(r["value"]) > 0


def test_megablocks_flops_convention_by_hand(ev):
    # MegaBlocks Table 1: GFLOPs a 1,024-token sequence, 72 B s L h^2 (1 + s / 6h + V / 12 L h) (3 passes,
    # full attention matrix, logits) with V = 51,200: XS (h 512, 6 layers) 316, XL (h 2,048, 24 layers) 8,684
    def gflops(h, layers):
        return 72 * 1024 * layers * h * h * (1 + 1024 / (6 * h) + 51200 / (12 * layers * h)) / 1e9

    assert gflops(512, 6) == pytest.approx(316, abs=1)
    assert gflops(2048, 24) == pytest.approx(8684, abs=1)
    # the figures the shares refer to: 8 A100s, 2.5 PFLOP/s (8 x 312)
    assert 8 * 312 == pytest.approx(2500, rel=0.01)
    assert ev.loc["megatron_dense_xs_mfu", "value"] < ev.loc["megatron_dense_xl_mfu", "value"]


def _granite_dense(h, heads, head_dim, ffn):
    # Granite 3.0 report, Table 1: 40 layers, 8 KV heads, SwiGLU, RoPE, vocabulary 49,155, tied embeddings
    return Model(name=f"granite-3.0 dense h{h} (test)", layers=40, hidden=h, heads=heads, kv_heads=8,
                 head_dim=head_dim, ffn_hidden=ffn, vocab=49155, gated_mlp=True, tied_embeddings=True,
                 norm="rmsnorm", bias=False, max_seq=4096)


@pytest.mark.parametrize("key, h, heads, head_dim, ffn, par", [
    ("granite30_2b_gpu_hours", 2048, 32, 64, 8192, dict(tp=2, dp=128, zero=1)),
    ("granite30_8b_gpu_hours", 4096, 32, 128, 12800, dict(tp=4, pp=4, dp=48, zero=1)),
])
def test_granite_dense_runs_of_the_same_report_lie_inside_the_range(ev, key, h, heads, head_dim, ffn, par):
    """The control for the Granite 3.0 MoE rows (x1.48 each, above the range): the report's two dense runs
    (same cluster, recipe, 4M-token batches, 4,096-token sequences, ZeRO-1, 12T tokens; Sec. 4.3 layouts),
    priced as moe_runs.run_step prices a row (micro-batches of one sequence, no recomputation, BF16), lie
    inside the stated layout range: the MoE rows' gap is in their MoE layers, not in the cluster or recipe."""
    par = Parallel(**par)
    st = step_time(_granite_dense(h, heads, head_dim, ffn), "H100 SXM", par, batch=1, seq=4096,
                   grad_accum=1024 // par.dp, precision="bf16-mixed")
    predicted = 12e12 / st.tokens * st.step_s * par.gpus / 3600
    lo, hi = layout_range_factors("H100 SXM", "bf16")
    published = float(ev.loc[key, "value"])
    assert predicted / hi <= published <= predicted / lo


def test_grouped_gemm_figures_as_read(ev):
    # grouped_gemm PR #37 on an H100 at Qwen3-30B-A3B's up_proj: the cuBLAS loop (the package default) and the
    # Ampere CUTLASS kernel below the Hopper kernel the PR adds; every one below a fifth of the BF16 peak
    loop, sm80 = ev.loc["grouped_gemm_cublas_loop", "value"], ev.loc["grouped_gemm_cutlass_sm80", "value"]
    coop = ev.loc["grouped_gemm_cutlass_sm90_coop", "value"]
    assert sm80 < loop < coop == pytest.approx(1.37 * sm80, rel=0.01)   # the PR's "1.37x over CUTLASS SM80"
    assert coop / dense_tflops("H100 SXM", "bf16") < 0.2
    # OLMoE: expert choice "around 20% faster" than token choice; MoE / dense twin 0.63
    assert ev.loc["olmoe_ec_tps", "value"] / ev.loc["olmoe_tc_tps", "value"] == pytest.approx(1.20, abs=0.01)
    assert ev.loc["olmoe_fig4_moe_tps", "value"] / ev.loc["olmoe_fig4_dense_tps", "value"] == pytest.approx(
        0.63, abs=0.005)


@pytest.mark.xfail(strict=True, reason=(
    "issue 35, Nov 2026: the library prices a fine-grained grouped GEMM on H100 BF16 at 3.1-3.7x what "
    "tgale96/grouped_gemm reaches at Qwen3-30B-A3B's up_proj (PR #37: 129.5 TFLOP/s in its default cuBLAS "
    "mode, 0.131 of the peak); no term is priced from it: one shape, its rows per expert unstated, and "
    "GRIN's Table 3 (MoE at 0.866 of its dense twin at 6,400-wide experts) holds the current grouped "
    "pricing at large shapes. Strict: it fails the suite once a term prices this shape within 30%"))
def test_the_library_prices_the_measured_grouped_gemm_within_30_percent(ev):
    from llmsizing import kernels

    peak = dense_tflops("H100 SXM", "bf16")
    measured = ev.loc["grouped_gemm_cublas_loop", "value"]
    # 128 experts, N 1,536, K 2,048; "65,536 tokens" read both ways: 512 or 4,096 rows an expert
    for rows in (512, 4096):
        share = kernels.gemm_efficiency("H100 SXM", rows * 128, 1536, 2048) * kernels.grouped_gemm_share(rows)
        assert share * peak / measured < 1.3
