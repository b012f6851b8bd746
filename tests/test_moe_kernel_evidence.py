"""Issue 35, the small MoEs trained without expert parallelism: the published kernel-level and controlled-pair
figures gathered in data/moe_kernel_evidence.csv and data/moe_layer_kernels.csv, read by hand, and what they
say about the library. No term is priced from them: the measured MoE layers of the stacks those runs used are
no slower than the library prices them (SonicMoE, Fig. 14), so the runs' ~1.5x lies elsewhere; nor is it a
cost per kernel launch, the routing kernels on HBM or load imbalance (the last two tests, session 19)."""

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
    """The control for the Granite 3.0 MoE rows (x1.34 and x1.36, above the range): the report's two dense
    runs (same cluster, recipe, 4M-token batches, 4,096-token sequences, ZeRO-1, 12T tokens; Sec. 4.3
    layouts), priced as moe_runs.run_step prices a row (micro-batches of one sequence, no recomputation,
    BF16), lie inside the stated layout range (x0.94 and x1.17, tests/test_granite_dense_control.py,
    granite40): the MoE rows' gap is specific to the MoE runs, not the cluster, the recipe or the hours'
    accounting. Where in the MoE runs it lies is not shown: their measured ScatterMoE layers are not slower
    than priced (smallmoe40)."""
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


def test_library_layer_price_by_hand():
    """moe_evidence.moe_layer_tflops against bounds derived by hand: the layer's expert FLOPs (6 T n d K
    forward) can run no faster than the H100's BF16 dense peak (989 TFLOP/s) times its kernel efficiency,
    and a layer of 256-wide experts (short GEMMs, many small experts) is priced slower than one of
    1,024-wide."""
    from llmsizing.hardware import kernel_efficiency_row
    from llmsizing.moe_evidence import moe_layer_tflops

    ceiling = 989 * kernel_efficiency_row("H100 SXM", "bf16").kernel_efficiency
    narrow = moe_layer_tflops(40960, 1536, 256, 256, 16)
    wide = moe_layer_tflops(40960, 1536, 1024, 64, 4)
    assert 0 < narrow < wide < ceiling
    with pytest.raises(ValueError, match="top_k"):
        moe_layer_tflops(40960, 1536, 1024, 64, 65)


def test_sonicmoe_fig14_read_off_as_stored():
    t = pd.read_csv(DATA.parent / "moe_layer_kernels.csv")
    assert len(t) >= 60 and t["source"].str.contains("arXiv:2512.14080").all()
    # the 7B panel (d 1,536) at n 512, E 64, K 4, forward: SonicMoE 435, ScatterMoE 235, MegaBlocks 190
    r = t[(t["hidden"] == 1536) & (t["expert_ffn"] == 512)].set_index("kernel")["fwd_tflops"]
    assert (r["SonicMoE"], r["ScatterMoE"], r["MegaBlocks"]) == (435, 235, 190)
    # every configuration keeps 6 T n d K FLOPs a layer at its model size: n K constant per panel
    for _, g in t.groupby("model"):
        assert g["expert_ffn"].mul(g["top_k"]).nunique() == 1


def test_small_expert_layers_run_no_slower_than_the_library_prices_them():
    """Issue 35's lead was that the library prices 512-1,024-wide experts too fast (DeepGEMM's grouped table
    is measured at n, k of 4,096-7,168). SonicMoE's Fig. 14 measures whole MoE layers of the stacks the small
    MoE runs used (ScatterMoE: Granite 3.0; MegaBlocks: JetMoE, OLMoE) on an H100 at hidden 768 and 1,536 and
    experts 256-1,024 wide. What chapter 18 says of them, checked: ScatterMoE's layers with 512-wide experts
    run no slower than the library's price; at 256-wide experts they run well above it (ScatterMoE 1.6-1.8x).
    So the ~1.4x the small MoE runs take over their prediction is not in their expert kernels as these run
    today (SonicMoE's ScatterMoE is xma's 2025 copy; its forward tile is the one IBM's dolomite-engine called
    in Sep 2024, data/moe_kernel_evidence.csv *_tile_rows_*: the Oct 2024 change wrapped the kernels for
    torch.compile, smallmoe40; the Triton compiler is newer)."""
    from llmsizing.moe_evidence import sonicmoe_layer_ratios

    t = sonicmoe_layer_ratios()
    assert len(t) == 12
    sc512 = t[(t["kernel"] == "ScatterMoE") & (t["expert_ffn"] == 512)]
    assert sorted(sc512["hidden"]) == [768, 1536]
    assert (sc512["fwd_ratio"] >= 1).all() and (sc512["bwd_ratio"] >= 1).all()
    assert max(t["fwd_ratio"].max(), t["bwd_ratio"].max()) > 1.5


def test_the_slowest_measured_layer_is_below_the_price_by_less_than_the_runs_gap():
    """The bound chapter 18 states (its glue ch18_layers_ratio, computed from the data): the slowest of the
    12 ScatterMoE and MegaBlocks bars at hidden <= 1,536 is MegaBlocks' forward at hidden 1,536 with
    1,024-wide experts, 218 TFLOP/s read off the bar: below the library's price (an earlier claim here,
    "never more than 15% below it", was refuted when the Hopper kernel efficiency was refitted on the runs'
    nodes: 0.842, so the book now states the measured bound, not that claim). Even at the bar's +10 TFLOP/s
    reading error it stays below the price; and its excess over the price is less than half of the Granite
    runs' ~1.4x, the bound taken from moe_run_check() as chapter 18 takes it (the smaller of the two runs'
    published / step), not a literal (review23b L3)."""
    from llmsizing.moe_evidence import sonicmoe_layer_ratios
    from llmsizing.moe_runs import moe_run_check

    t = sonicmoe_layer_ratios()
    slow = t.loc[t["fwd_ratio"].idxmin()]
    assert (slow["kernel"], slow["hidden"], slow["expert_ffn"]) == ("MegaBlocks", 1536, 1024)
    assert slow["fwd_tflops"] == 218
    assert slow["fwd_ratio"] == min(t["fwd_ratio"].min(), t["bwd_ratio"].min())
    assert (218 + 10) / slow["library_tflops"] < 1                     # below the price, whatever the reading
    chk = moe_run_check()
    granite = chk.loc[["Granite 3.0 1B-A400M pre-training", "Granite 3.0 3B-A800M pre-training"], "ratio"]
    assert granite.min() > 1                                           # both runs above the step
    assert 1 / slow["fwd_ratio"] - 1 < (granite.min() - 1) / 2     # under half the Granite runs' excess


def _granite_per_layer_call_s():
    """Published and predicted seconds per MoE layer and micro-batch (4,096 tokens) of the two Granite 3.0 MoE
    runs. Published, by hand from the report (Table 7's GPU-hours, Table 1's 10T tokens): 10e12 / (71,171 x
    3,600) = 39,030 tokens/s a GPU for the 1B-A400M (24 layers), 10e12 / (133,308 x 3,600) = 20,838 for the
    3B-A800M (32 layers), so 4,096 / 39,030 / 24 = 4.37 ms and 4,096 / 20,838 / 32 = 6.14 ms a layer call.
    Predicted: the library's step on the row's layout (moe_runs.run_step) over its layers x micro-batches."""
    from llmsizing.moe_runs import moe_published_runs, run_step

    runs = moe_published_runs().set_index("run", drop=False)
    out = {}
    for name, hours, layers in (("Granite 3.0 1B-A400M pre-training", 71_171, 24),
                                ("Granite 3.0 3B-A800M pre-training", 133_308, 32)):
        r = runs.loc[name]
        assert r["gpu_hours"] == hours and r["tokens"] == 10e12 and r["pp"] == 1 and r["ep"] == 1
        published = 4096 / (10e12 / (hours * 3600)) / layers
        calls = layers * int(r["global_batch"]) // int(r["dp"])
        out[name] = (published, run_step(r).step_s / calls)
    return out


def test_small_moe_gap_grows_with_the_work_not_with_kernel_launches():
    """Issue 35, the small-MoE gap (session 19): the Granite 3.0 MoE rows (same report, cluster, recipe and
    kernels, ScatterMoE) miss by the same factor although a layer call of the 3B does 1.4x the work of the
    1B's. A cost per kernel launch (router, top-k, index sort, the expert kernels: the same kernels in each
    layer of both) would add the same seconds to each layer call; the gap instead grows as the work does.
    So per-expert or per-kernel launch overheads do not explain it."""
    t = _granite_per_layer_call_s()
    pub1, pred1 = t["Granite 3.0 1B-A400M pre-training"]
    pub3, pred3 = t["Granite 3.0 3B-A800M pre-training"]
    assert pub1 == pytest.approx(4.37e-3, rel=0.01) and pub3 == pytest.approx(6.14e-3, rel=0.01)
    gap1, gap3 = pub1 - pred1, pub3 - pred3                        # ~1.4 ms and ~2.0 ms a layer call
    assert gap3 / gap1 > 1.25                                       # not one fixed cost a call ...
    assert gap3 / gap1 == pytest.approx(pred3 / pred1, rel=0.1)     # ... but in proportion to the work
    # a fixed cost fitted on the 1B would put the 3B at (pred3 + gap1) / pred3 = x1.34, against the x1.48 seen
    assert (pred3 + gap1) / pred3 < 0.95 * pub3 / pred3
    # 1.4 ms is 140 launches of 10 us each, per layer and micro-batch, beyond what the step already holds
    assert gap1 / 10e-6 > 100


def test_small_moe_gap_is_not_the_routing_kernels_on_hbm(ev):
    """The routing kernels (router, top-k, Megatron-Core's permute / unpermute:
    moe_time.routing_bytes_per_token, 3 forwards' bytes in a step, about 10 passes over a token's k x hidden
    bf16 copies) priced on the H100's 3.35 TB/s: to fill the Granite 1B-A400M's gap of ~1.1 ms a layer call
    (4,096 tokens) they would have to move 1.1e-3 x 3.35e12 / 4,096 = 0.91 MB a token and layer, 56 passes
    over its 8 x 1,024 x 2 = 16 KB of copies: 5.7 times what the kernels move (before the experts' tile
    padding was priced, moe38: a 1.4 ms gap, 71 passes, seven times). And with no expert
    parallelism (ep 1) there is no slowest rank: the load skew is 1, and the skew inside one GPU's grouped
    GEMM costs the grouped_gemm kernels of PR #37 at most 129.5 / 112.3 = 1.15x of their uniform rate
    (data/moe_kernel_evidence.csv, 'extreme skew')."""
    from llmsizing.catalog import get_model
    from llmsizing.moe_time import load_skew, routing_bytes_per_token

    m = get_model("granite-3.0-1b-a400m")
    pub1, pred1 = _granite_per_layer_call_s()["Granite 3.0 1B-A400M pre-training"]
    copies = m.experts_per_token * m.hidden * 2                     # 16,384 bytes
    needed = (pub1 - pred1) * 3350e9 / 4096                         # bytes a token and layer
    assert needed / copies > 50
    assert needed / routing_bytes_per_token(m) > 5
    assert routing_bytes_per_token(m) / copies == pytest.approx(3 * (3 + 2 / 8), rel=0.01)
    assert load_skew(m, 1) == 1.0
    loop = ev.loc["grouped_gemm_cublas_loop"]
    assert loop["value"] == 129.5 and "112.3" in loop["note"]
    assert loop["value"] / 112.3 < 1.16


def test_olmoe_dense_twin_pair_against_the_library(ev):
    """OLMoE's controlled pair (arXiv:2409.02060 Fig. 4: the 64-expert MoE at 23,600 tokens/s a GPU against
    its dense twin, the same 1.3B active model with one 8,192-wide SwiGLU MLP, at 37,500 on 128 H100s; FSDP):
    the library's MoE / dense ratio, priced with FSDP (ZeRO-3) and 4,096-token sequences, is above the
    measured 0.63 at one sequence a micro-batch (0.73) and at the 8 the OLMoE configurations ask for (0.79):
    the MoE runs 1.16x and 1.25x slower against its twin than the library says, the same direction as the
    small-MoE gap, whichever micro-batch Fig. 4 used. Recorded, not priced. (Until exp24, Dec 2026, the
    one-sequence ratio matched, 0.65, only because the experts' ZeRO-3 gathers were priced as collectives of
    their own, each call paying its latency again; FSDP's unit of a block gathers them with the rest, as
    comm.experts_apart says: one collective.)"""
    from dataclasses import replace

    from llmsizing.catalog import get_model

    measured = ev.loc["olmoe_fig4_moe_tps", "value"] / ev.loc["olmoe_fig4_dense_tps", "value"]
    assert measured == pytest.approx(0.629, abs=0.001)
    moe = get_model("olmoe-1b-7b")
    twin = replace(moe, name="olmoe dense twin (test)", experts=0, experts_per_token=0,
                   expert_ffn_hidden=None, ffn_hidden=8192)
    assert abs(twin.active_params / moe.active_params - 1) < 0.01       # "same config apart from the MoE"

    def ratio(micro):
        tps = [(lambda st: st.tokens / st.step_s)(step_time(m, "H100 SXM", Parallel(dp=128, zero=3),
                                                            batch=micro, seq=4096, grad_accum=8 // micro,
                                                            precision="bf16-mixed")) for m in (moe, twin)]
        return tps[0] / tps[1]

    one, eight = ratio(1), ratio(8)        # 0.73 and 0.79 (recorded, exp24, Dec 2026): 1.16x, 1.25x measured
    # the published side (Fig. 4): the MoE ran at 0.63 of its twin, slower against it than the library says at
    # either micro-batch (the small-MoE gap's direction); the margins are recorded above, not asserted
    assert measured < one and measured < eight
    # physics: the MoE does its twin's FLOPs (the same active parameters, within 1%) plus the router's and
    # gathers 5x the bytes under ZeRO-3 (6.9B parameters against 1.3B): it cannot run faster than its twin;
    # and 8 sequences a micro-batch gather once a step instead of 8 times, which spares the MoE the more
    assert one < eight < 1


# ---- session 23 (moe35s): what the small-MoE rows' sources say about their hours, and the controlled pairs
def test_granite_table7_hours_are_gpu_hours_not_node_hours(ev):
    """The Granite 3.0 report's Table 7 gives each model's GPU-hours beside its energy, and Sec. 6 the
    formula: Wh = GPU-hours x GPU power x PUE, with 700 W H100s and a PUE of 1.3. By hand: 71,171 x 0.7 kW x
    1.3 = 64.8 MWh (printed 64.5), 133,308 -> 121.3 (121.2), 192,030 -> 174.7 (174.6), 832,102 -> 757.2
    (757.0). IBM computes that energy from the hours (it is not metered), so the match says how IBM counts its
    hours, each one GPU's at its own 700 W (node-hours would carry 8 GPUs' power), not that they were
    measured.
    The independent argument is plausibility: as GPU-hours the 1B-A400M ran 10e12 / (71,171 x 3,600) = 39,030
    tokens/s a GPU; as node-hours of 8 GPUs it would be 4,879, and at 6 x 0.4B active parameters a token that
    is 11.7 TFLOP/s, 1.2% of the H100's 989: no training run is that slow. So the MoE rows read the hours
    right; the ~1.4x they take over the step is not a unit slip."""
    from llmsizing.catalog import get_model
    from llmsizing.moe_evidence import TABLE7_GPU_WATTS, TABLE7_PUE, table7_energy_mwh
    from llmsizing.moe_runs import moe_published_runs

    assert (TABLE7_GPU_WATTS, TABLE7_PUE) == (700, 1.3)                 # Sec. 6, as printed
    runs = moe_published_runs().set_index("run")
    hours = {"granite30_2b_mwh": ev.loc["granite30_2b_gpu_hours", "value"],
             "granite30_8b_mwh": ev.loc["granite30_8b_gpu_hours", "value"],
             "granite30_1b_a400m_mwh": runs.loc["Granite 3.0 1B-A400M pre-training", "gpu_hours"],
             "granite30_3b_a800m_mwh": runs.loc["Granite 3.0 3B-A800M pre-training", "gpu_hours"]}
    by_hand = {"granite30_2b_mwh": 174.7, "granite30_8b_mwh": 757.2, "granite30_1b_a400m_mwh": 64.8,
               "granite30_3b_a800m_mwh": 121.3}
    for key, gpu_hours in hours.items():
        assert table7_energy_mwh(float(gpu_hours)) == pytest.approx(by_hand[key], abs=0.05)
        assert table7_energy_mwh(float(gpu_hours)) == pytest.approx(float(ev.loc[key, "value"]), rel=0.005)
    per_gpu = 10e12 / (71_171 * 3600)
    assert per_gpu == pytest.approx(39_030, abs=1)
    as_nodes = 6 * get_model("granite-3.0-1b-a400m").active_params * per_gpu / 8 / 989e12
    assert 0.01 < as_nodes < 0.015
    with pytest.raises(ValueError, match="pue"):
        table7_energy_mwh(71_171, pue=0.9)


def test_node_hours_reading_by_hand():
    """review23b M3: chapter 18's two readings of the 1B-A400M's 71,171 hours, from the library, not the
    notebook. By hand: 10e12 / (71,171 x 3,600) = 39,030 tokens a GPU-second as GPU-hours; as node-hours of
    the 8 H100s of an IBM Blue Vela node (Granite 3.0 report, Sec. 6: the run's row names no node, so the
    H100's default 8-GPU node of data/nodes.csv) 39,030 / 8 = 4,879. The MFU as node-hours, by hand from the
    catalogue's shape (24 layers, 1,024 wide, 428.7M active parameters, 4,096-token sequences): (6 x 428.7M +
    12 x 24 x 4,096 x 1,024) = 3.780e9 FLOPs a token, x 4,879 / 989e12 = 1.86%, and the GPU-hours' MFU is 8x
    that. A node size given overrides the node's; a bad one is refused by name."""
    from llmsizing.moe_evidence import NodeHoursReading, node_hours_reading
    from llmsizing.moe_runs import moe_published_runs

    row = moe_published_runs().set_index("run").loc["Granite 3.0 1B-A400M pre-training"]
    got = node_hours_reading(row)
    assert isinstance(got, NodeHoursReading) and got.gpus_per_node == 8
    assert got.tokens_per_gpu_s == pytest.approx(39_030, abs=1)
    assert got.node_tokens_per_gpu_s == pytest.approx(4_879, abs=1)
    assert got.node_mfu == pytest.approx(3.780e9 * 4_879 / 989e12, rel=0.01)
    assert got.mfu == pytest.approx(8 * got.node_mfu, rel=1e-12)
    four = node_hours_reading(row, gpus_per_node=4)
    assert four.gpus_per_node == 4 and four.node_tokens_per_gpu_s == pytest.approx(9_757, abs=1)
    for bad, error in ((0, ValueError), (2.5, TypeError)):
        with pytest.raises(error, match="gpus_per_node"):
            node_hours_reading(row, gpus_per_node=bad)
    with pytest.raises(ValueError, match="gpu_hours"):
        node_hours_reading({**row.to_dict(), "gpu_hours": 0.0})


def test_jetmoe_hours_are_a_steady_state_of_gpu_hours(ev):
    """JetMoE-8B: 30,000 H100 GPU-hours for 1.25T tokens (arXiv:2404.07413, abstract); its steady state, by
    the transformers documentation its author contributed, is about 100B tokens a day on 96 H100s: 1.25e12 /
    100e9 days x 24 x 96 = 28,800 GPU-hours, 4% under the total. So the total is per-GPU hours of a steady
    state (as 12 nodes' hours it would be 8x that), and the run's ~1.5x over the step is in its step, not in
    restarts or accounting."""
    from llmsizing.moe_runs import moe_published_runs

    row = moe_published_runs().set_index("run").loc["JetMoE-8B pre-training"]
    per_day = float(ev.loc["jetmoe_tokens_per_day", "value"])
    steady = float(row["tokens"]) / per_day * 24 * int(row["n_gpus"])
    assert steady == pytest.approx(28_800)
    assert 1.0 < float(row["gpu_hours"]) / steady < 1.05


def _small_no_ep_runs():
    from llmsizing.moe_runs import _model, moe_published_runs

    runs = moe_published_runs().set_index("run", drop=False)
    small = [n for n, r in runs.iterrows() if int(r["ep"]) == 1 and _model(r["model"]).hidden <= 2048]
    assert sorted(small) == ["Granite 3.0 1B-A400M pre-training", "Granite 3.0 3B-A800M pre-training",
                             "JetMoE-8B pre-training", "OLMoE-1B-7B pre-training"]
    return runs


def test_compute_only_ratio_by_hand():
    """moe_evidence.compute_only_ratio: published tokens a GPU-second over the step's busy (compute and
    bubble) tokens a GPU-second. Granite 3.0 1B-A400M runs data parallelism with ZeRO-1 and no pipeline: its
    communication hides, so its ratio on compute alone is its published / predicted GPU-hours."""
    from llmsizing.moe_evidence import compute_only_ratio
    from llmsizing.moe_runs import moe_run_check, run_step

    runs = _small_no_ep_runs()
    g1 = runs.loc["Granite 3.0 1B-A400M pre-training"]
    st = run_step(g1)
    assert st.exposed_comm_s == pytest.approx(0, abs=1e-9 * st.step_s)
    assert compute_only_ratio(g1) == pytest.approx(moe_run_check().loc[g1["run"], "ratio"], rel=1e-9)
    # by hand: 10e12 / (71,171 x 3,600) = 39,030 tokens/s a GPU published
    assert st.tokens / st.busy_s / 128 / compute_only_ratio(g1) == pytest.approx(39_030, abs=1)


def test_granite_and_jetmoe_miss_on_their_compute_alone():
    """The three small MoE runs without expert parallelism that lie above the range (JetMoE-8B, Granite 3.0
    1B and 3B: two teams, two stacks, MegaBlocks in Megatron and ScatterMoE) ran slower than the step's
    compute and bubble alone by more than the range allows (published over predicted above its top, 1 / the
    bottom of the layout range's factors): their miss is no communication term the library might misprice."""
    from llmsizing.moe_evidence import compute_only_ratio

    runs = _small_no_ep_runs()
    lo, _ = layout_range_factors("H100 SXM", "bf16")
    for name in ("Granite 3.0 1B-A400M pre-training", "Granite 3.0 3B-A800M pre-training",
                 "JetMoE-8B pre-training"):
        assert compute_only_ratio(runs.loc[name]) > 1 / lo, name


def test_olmoe_is_beyond_the_top_on_its_compute_alone_and_above_it_at_two_sequences_a_micro_batch():
    """OLMoE-1B-7B (MegaBlocks in OLMo's FSDP), what chapter 18 says of it: it lies inside the range only
    through the exposed communication of its row's assumed one sequence per micro-batch (ZeRO-3 gathers the
    weights for every micro-batch, and part of its priced step waits for them: 22% recorded in Dec 2026). On
    its compute alone it is slower than the library's compute (above 1), and since rows31's refit raised the
    layout range's low (0.722 -> 0.802, its top 1.385 -> 1.247) it is beyond the range's top too (1.37), as
    Granite and JetMoE are (it was under the top before); at two sequences a micro-batch less of the step waits
    for the gathers and it lies above the range with them. So the row inside is no counter-example to the
    small-MoE gap."""
    from llmsizing.moe_evidence import compute_only_ratio
    from llmsizing.moe_runs import _model, moe_run_check, run_step

    runs = _small_no_ep_runs()
    lo, _ = layout_range_factors("H100 SXM", "bf16")
    olmoe = runs.loc["OLMoE-1B-7B pre-training"]
    assert moe_run_check().loc[olmoe["run"], "inside"]
    assert compute_only_ratio(olmoe) > 1 / lo > 1         # beyond the top on compute alone since rows31's refit
    st = run_step(olmoe)
    share = st.exposed_by_group_s["dp"] / st.step_s            # 22% (recorded: exp24, Dec 2026; 35% before)
    assert share > 0                                                 # the chapter: the step waits for them
    par = Parallel(dp=int(olmoe["dp"]), zero=int(olmoe["zero"]))
    two = step_time(_model(olmoe["model"]), olmoe["gpu"], par, batch=2, seq=int(olmoe["seq"]),
                    grad_accum=int(olmoe["global_batch"]) // par.dp // 2, precision=olmoe["precision"])
    published = float(olmoe["tokens"]) / (float(olmoe["gpu_hours"]) * 3600)   # 5.133e12 / 61,440 h: 23,207
    assert published == pytest.approx(23_207, abs=1)
    assert two.tokens / two.step_s / par.gpus / published > 1 / lo
    # twice the sequences a micro-batch: each gather's window twice as long and half as many gathers a step,
    # so less of the step waits for them (the physical reason the row leaves the range)
    assert two.exposed_by_group_s["dp"] / two.step_s < share


def test_olmoe_dense_twin_lies_inside_where_its_moe_does_not(ev):
    """OLMoE's Fig. 4 pair in absolute terms (23,600 and 37,500 tokens/s a GPU on 128 H100s), priced with FSDP
    (ZeRO-3), 4,096-token sequences and the OLMoE configurations' 8 sequences a micro-batch (1,024 / 128 = 8 a
    GPU: one micro-batch a step): the dense twin runs slower than priced but inside the range (published over
    predicted GPU-hours within [1 / 1.228, 1 / 0.727]); its MoE lies above it, and by more than 1.15x the
    twin's excess. Measured against a dense control from the same paper, cluster and stack, part of the gap
    belongs to the MoE layers as OLMo's 2024 MegaBlocks ran them. (At one sequence a micro-batch both lie
    inside: the pair's micro-batch is not published; test_olmoe_dense_twin_pair_against_the_library.)"""
    from dataclasses import replace

    from llmsizing.catalog import get_model

    moe = get_model("olmoe-1b-7b")
    twin = replace(moe, name="olmoe dense twin (test)", experts=0, experts_per_token=0,
                   expert_ffn_hidden=None, ffn_hidden=8192)
    lo, hi = layout_range_factors("H100 SXM", "bf16")
    over = {}
    for m, key in ((moe, "olmoe_fig4_moe_tps"), (twin, "olmoe_fig4_dense_tps")):
        st = step_time(m, "H100 SXM", Parallel(dp=128, zero=3), batch=8, seq=4096, grad_accum=1,
                       precision="bf16-mixed")
        # tokens a second priced over measured = published over predicted GPU-hours
        over[key] = st.tokens / st.step_s / 128 / float(ev.loc[key, "value"])
    assert 1 / hi <= over["olmoe_fig4_dense_tps"] <= 1 / lo
    assert over["olmoe_fig4_moe_tps"] > 1 / lo
    assert over["olmoe_fig4_moe_tps"] / over["olmoe_fig4_dense_tps"] > 1.15


@pytest.mark.parametrize("recompute", ["full", "none"])
def test_grin_throughput_study_runs_faster_than_priced_for_the_moe_and_its_twin_alike(ev, recompute):
    """GRIN's Table 3 in absolute terms: Phi-3.5-MoE's architecture (16 experts of 6,400, top-2, hidden 4,096)
    at 7,077 tokens/s a GPU and its 6.6B dense twin at 8,176, on 64 H100s in one parallelism setting of data
    and pipeline parallelism (Sec. 3.2; activation checkpointing in GRIN's training, not said for the study),
    priced at 16 stages (the fewest powers of two that hold the MoE's 42B parameters at 16 bytes each, ZeRO 0,
    in 80 GB) with 4M-token batches of 4K sequences: both ran faster than priced, and by the same factor
    within 10%, with recomputation or without. So where the Phi-3.5-MoE row lies below the range, the library
    prices this stack slow on a dense model as much as on the MoE: the miss is not in the MoE terms."""
    from llmsizing import moe_evidence as mev
    from llmsizing.moe_runs import PHI_35_MOE_STANDIN

    moe, twin = PHI_35_MOE_STANDIN, mev.grin_dense_twin()
    assert twin.ffn_hidden == 2 * 6400 and twin.experts == 0
    assert abs(twin.active_params / moe.active_params - 1) < 0.01
    # the stages by hand: 42B x 16 bytes at 16 stages (42 GB) fits 80 GB, at 8 (84 GB) it does not
    assert moe.n_params * 16 / 16 < 80e9 < moe.n_params * 16 / 8
    par = mev.grin_table3_layout()
    assert (par.pp, par.dp, par.gpus, par.zero) == (16, 4, 64, 0)
    assert (mev.GRIN_T3_SEQ * mev.GRIN_T3_BATCH_SEQS, mev.GRIN_T3_TOLERANCE) == (4 * 2**20, 0.10)
    moe_f, twin_f = mev.grin_table3_faster(recompute, ev)
    assert min(moe_f, twin_f) > 1.1
    assert moe_f / twin_f == pytest.approx(1.0, abs=0.1)
    assert float(ev.loc["grin_t3_moe_42b_tps", "value"]) / float(ev.loc["grin_t3_dense_6p6b_tps", "value"]) \
        == pytest.approx(float(ev.loc["grin_moe_over_dense", "value"]), abs=0.001)


def test_card_throughputs_by_hand(ev):
    """The two 512-GPU cards of Phi-3.5-MoE's architecture, by hand: GRIN MoE 4.0T tokens in 18 days,
    Phi-3.5-MoE 4.9T in 23 days (the row's 282,624 GPU-hours), per GPU-second."""
    from llmsizing import moe_evidence as mev

    assert 4.0e12 / (512 * 18 * 86400) == pytest.approx(5023.5, abs=0.1)
    assert 4.9e12 / (512 * 23 * 86400) == pytest.approx(4816.0, abs=0.1)
    assert float(ev.loc["grin_card_512_tps", "value"]) == round(mev.card_tokens_per_gpu_s(4.0e12, 512, 18))
    assert float(ev.loc["phi35_card_512_tps", "value"]) == round(mev.card_tokens_per_gpu_s(4.9e12, 512, 23))
    for bad in (dict(tokens=0.0, gpus=512, days=18), dict(tokens=4e12, gpus=0, days=18),
                dict(tokens=4e12, gpus=512, days=-1.0)):
        with pytest.raises(ValueError, match="|".join(k for k, v in bad.items() if v <= 0)):
            mev.card_tokens_per_gpu_s(**bad)


def test_card_training_reads_each_card_s_own_rows(ev):
    """The cards' 'Training' tables as printed, one row a figure with its source and date (not parsed out of
    the derived rows' setting text, as chapter 18 once did): GRIN MoE's README 4.0T tokens, 512 H100-80G, 18
    days; Phi-3.5-MoE-instruct's 4.9T, 512, 23. The derived rows are those figures per GPU-second, rounded:
    4.0e12 / (512 x 18 x 86,400) = 5,023.5 and 4.9e12 / (512 x 23 x 86,400) = 4,816.0."""
    from llmsizing import moe_evidence as mev

    grin, phi = mev.card_training("grin"), mev.card_training("phi35", ev)
    assert (grin.tokens, grin.gpus, grin.days) == (4.0e12, 512, 18)
    assert (phi.tokens, phi.gpus, phi.days) == (4.9e12, 512, 23)
    assert isinstance(grin.gpus, int) and grin.gpus == phi.gpus == mev.GRIN_PRODUCTION_GPUS
    assert grin.tokens_per_gpu_s == pytest.approx(5023.47, abs=0.01)         # 4.0e12 / 796,262,400
    assert phi.tokens_per_gpu_s == pytest.approx(4815.98, abs=0.01)          # 4.9e12 / 1,017,446,400
    for c in (grin, phi):
        assert float(ev.loc[f"{c.card}_card_512_tps", "value"]) == round(c.tokens_per_gpu_s)
        for k in ("tokens", "gpus", "days"):
            assert ev.loc[f"{c.card}_card_{k}", "source"] == ev.loc[f"{c.card}_card_512_tps", "source"]
    with pytest.raises(ValueError, match="card"):
        mev.card_training("phi-3.5")
    bad = ev.copy()
    bad.loc["grin_card_gpus", "value"] = 511.5
    with pytest.raises(ValueError, match="grin_card_gpus"):
        mev.card_training("grin", bad)
    bad.loc["grin_card_gpus", "value"], bad.loc["grin_card_days", "value"] = 512, 0.0
    with pytest.raises(ValueError, match="days"):
        mev.card_training("grin", bad)


@pytest.mark.parametrize("recompute", ["full", "none"])
def test_study_to_production_drop_is_the_bubble_of_the_rows_reading(ev, recompute):
    """Session 25. The same architecture on the same stack ran at 7,077 tokens/s a GPU on GRIN's 64 H100s
    (Table 3) and at 0.71 (GRIN MoE's card) and 0.68 (Phi-3.5-MoE's) of that on 512. The library, on the
    Phi-3.5-MoE row's reading (16 stages, ZeRO 0, the same 4M-token batch of 4K sequences on both): the batch
    spread over 8x the GPUs leaves 32 micro-batches a pipeline, not 256, and 1F1B's bubble, 15 other stages
    passed once each at their own speed (session 39), grows from 15 / (256 r) to 15 / (32 r) of the compute,
    r the last stage (two layers and the output layer) over the others: by FLOPs 1.228 with full
    recomputation (test_unbalanced_pipeline.py), (6 x 432.0M + 788M) / (6 x 432.0M) = 1.304 without. By hand
    (1 + 15/(256 r)) / (1 + 15/(32 r)) = 0.758 and 0.769, the library's within 2% (the rest is data-parallel
    traffic and the memory-bound kernels). Before session 39 (the slowest stage's speed, r = 1) it was 0.721
    and the cards agreed within 5%; now they drop 6% (GRIN) and 10% (Phi) more than the step model's bubble
    explains: the reading that pins the batch at about 4M tokens is weaker (pipe39)."""
    from llmsizing import moe_evidence as mev

    r = {"full": 1.228, "none": (6 * 432.0 + 788) / (6 * 432.0)}[recompute]
    by_hand = (1 + 15 / (256 * r)) / (1 + 15 / (32 * r))
    assert by_hand == pytest.approx({"full": 0.7583, "none": 0.7686}[recompute], abs=1e-4)
    lib = mev.grin_production_over_study(recompute=recompute)
    assert lib == pytest.approx(by_hand, rel=0.02)
    study = float(ev.loc["grin_t3_moe_42b_tps", "value"])
    for key in ("grin_card_512_tps", "phi35_card_512_tps"):        # 5,023 and 4,816 over 7,077 = 0.710, 0.681
        assert 0.85 < float(ev.loc[key, "value"]) / study / lib < 0.96
    # the dense twin's step drops the same way: nothing MoE-specific in the drop
    assert mev.grin_production_over_study(mev.grin_dense_twin(), recompute) == pytest.approx(lib, rel=0.01)
    with pytest.raises(ValueError, match="gpus"):
        mev.grin_production_over_study(gpus=520)
    with pytest.raises(ValueError, match="recompute"):
        mev.grin_production_over_study(recompute="selective")


def test_the_drop_cannot_tell_16_stages_from_8(ev):
    """review25a H1 (session 25): GRIN names data and pipeline parallelism and activation checkpointing, no
    stage count and no ZeRO stage. By hand, 8 stages with the same 4M-token batch leave 128 micro-batches a
    pipeline on 64 GPUs and 16 on 512: (1 + 7/128) / (1 + 7/16) = 0.734, against 0.721 at 16 stages; the two
    readings differ by 1.8%, less than the two cards differ from each other (4.3%), so the cards' drop cannot
    tell them apart. Against the dense layout range: at 8 stages with ZeRO-1 (each GPU then holds about 42B /
    8 x (4 + 12/64) B = 22 GB of states, so it fits in 80 GB) the Phi-3.5-MoE row lies closer to it than at
    16 (x0.81 against x0.74 since session 39; x0.78 against x0.69 before), and at 16 stages with selective
    recomputation inside it (x0.91; x0.84 before): its miss below
    the range hinges on the assumed layout, which no source settles. (Before the experts' 128-row tile padding
    was priced, moe38, the 8-stage reading lay inside too: x0.84, x0.75 at 16, x0.90 selective.)"""
    from llmsizing import moe_evidence as mev
    from llmsizing import moe_runs

    b16, b8 = (1 + 15 / 256) / (1 + 15 / 32), (1 + 7 / 128) / (1 + 7 / 16)
    assert b8 == pytest.approx(0.7337, abs=1e-4) and abs(b8 / b16 - 1) < 0.02
    cards = float(ev.loc["grin_card_512_tps", "value"]) / float(ev.loc["phi35_card_512_tps", "value"])
    assert cards == pytest.approx(5023.5 / 4816.0, rel=1e-3) and abs(b8 / b16 - 1) < cards - 1
    lib16 = mev.grin_production_over_study()
    lib8 = mev.grin_production_over_study(stages=8, zero=1)
    assert lib8 == pytest.approx(b8, rel=0.02) and lib8 == pytest.approx(lib16, rel=0.02)
    assert 42e9 / 8 * (4 + 12 / 64) < 0.3 * 80e9           # ZeRO-1's states at 8 stages: well inside 80 GB
    runs = moe_runs.moe_published_runs().set_index("run", drop=False)
    row = runs.loc["Phi-3.5-MoE pre-training"]
    lo, hi = layout_range_factors(row["gpu"], "bf16")
    alt = row.copy()
    alt["pp"], alt["dp"], alt["zero"] = 8, 512 // 8, 1
    pub = float(row["gpu_hours"])
    at16 = pub / moe_runs.predict_moe_run(row)["gpu_hours"]
    at8 = pub / moe_runs.predict_moe_run(alt)["gpu_hours"]
    assert at16 < at8 < 1 / hi                         # below the range at 16 stages and at 8 with ZeRO-1
    sel = row.copy()
    sel["recompute"] = "selective"                     # 'activation checkpointing' read as selective
    assert 1 / hi <= pub / moe_runs.predict_moe_run(sel)["gpu_hours"] <= 1 / lo
    for bad in (dict(stages=7), dict(stages=0), dict(zero=4), dict(stages=8, gpus=516)):
        with pytest.raises(ValueError, match="stages|zero|gpus"):
            mev.grin_production_over_study(**bad)


def test_phi35_rows_miss_is_the_study_s_miss(ev):
    """Session 25. The Phi-3.5-MoE row's published over predicted GPU-hours is x0.75 (below the range's bottom
    x0.83), i.e. the run went 1/0.75 = 1.33x faster a GPU than priced; GRIN's 64-GPU study of the same
    architecture went 1.4x faster than priced at the row's full recomputation, and its dense twin 1.5x. The
    row's factor lies within 10% of the study's: the row and the study share the per-GPU price of the same
    assumed layout (16 stages, full recomputation, ZeRO 0; dense and MoE alike). That does not clear the
    layout: GRIN names 'activation checkpointing' and no stage count, ZeRO stage, recomputation granularity or
    framework, and 8 stages with ZeRO-1 put the row inside the range (the test above)."""
    from llmsizing import moe_evidence as mev
    from llmsizing import moe_runs

    runs = moe_runs.moe_published_runs().set_index("run", drop=False)
    row = runs.loc["Phi-3.5-MoE pre-training"]
    assert (row["pp"], row["zero"], row["recompute"], row["global_batch"]) == (16, 0, "full", 1024)
    row_faster = moe_runs.predict_moe_run(row)["gpu_hours"] / float(row["gpu_hours"])
    _, hi = layout_range_factors(row["gpu"], "bf16")
    assert row_faster > hi                          # below the range: published < predicted / hi
    moe_f, twin_f = mev.grin_table3_faster("full", ev)
    assert row_faster == pytest.approx(moe_f, rel=0.10)
    assert row_faster < twin_f


# ---- session 34 (smallmoe34): each run's compute split into the step's terms, and what the small runs need
def test_compute_terms_sum_to_the_step_of_every_run():
    """moe_evidence.compute_terms_s splits a row's priced compute into the terms step_compute_time_s adds
    (Linear GEMMs, attention core, memory-bound kernels, routing, load skew): they must sum to the step's
    own compute_s on every published MoE run (DualPipe and the SMs kept for communication included), and the
    routed experts are a part of the Linear term, never more."""
    from llmsizing import moe_evidence as mev
    from llmsizing import moe_runs

    for _, row in moe_runs.moe_published_runs().iterrows():
        t = mev.compute_terms_s(row)
        total = t["linear"] + t["attention"] + t["pointwise"] + t["routing"] + t["skew"]
        assert total == pytest.approx(moe_runs.run_step(row).compute_s, rel=1e-12), row["run"]
        assert 0 < t["routed_experts"] < t["linear"]
        assert min(t.values()) >= 0


def test_granite_routing_seconds_by_hand():
    """Granite 3.0 1B-A400M (Table 1 of its report: hidden 1,024, 24 layers, 32 experts, top-8; dp 128, a
    1,024-sequence batch of 4,096 tokens, so 8 sequences, 32,768 tokens, a GPU a step). The routing kernels
    move, per token and MoE layer forward, 3 k h b + 2 h b + 8 E + 8 k = 3 x 8 x 1,024 x 2 + 2 x 1,024 x 2 +
    256 + 64 = 53,568 bytes, and a step three forwards' worth: 160,704. On an H100 SXM's 3.35 TB/s (NVIDIA's
    datasheet): 24 x 32,768 x 160,704 / 3.35e12 = 0.03773 s a step; no skew without expert parallelism."""
    from llmsizing import moe_evidence as mev
    from llmsizing import moe_runs

    row = moe_runs.moe_published_runs().set_index("run", drop=False).loc["Granite 3.0 1B-A400M pre-training"]
    t = mev.compute_terms_s(row)
    fwd = 3 * 8 * 1024 * 2 + 2 * 1024 * 2 + 8 * 32 + 8 * 8
    assert fwd == 53568
    assert t["routing"] == pytest.approx(24 * 32768 * 3 * fwd / 3.35e12, rel=1e-9)
    assert t["micro_batches"] == 8 and t["skew"] == 0.0


def test_small_runs_need_slower_moe_layers_than_the_named_kernels_measured_run(ev):
    """What a missing MoE-layer cost would have to be (recorded, not priced): with everything else as priced,
    Granite 3.0's two runs would need their routed experts and routing kernels about 1.6-1.7x slower than the
    step prices them, JetMoE-8B about 2.0x (moe_part_factor_needed; 1.7-1.8x and 2.1x before the experts'
    128-row tiles were priced, moe38). The report's dense runs take a small part of Granite's gap too (x0.94
    and x1.17): with that common factor out, 1.5-1.55x (tests/test_granite_dense_control.py). A what-if, not
    a finding that the layers are slow. The only measured layers of the kernels they
    name go the other way: SonicMoE's Fig. 14 (Dec 2025 kernels, Triton 3.3.1) has every ScatterMoE layer
    (Granite's kernel) at hidden 768 and 1,536 faster than the step prices it, forward and backward. Pricing
    the runs by that benchmark would move them further out; a 2024 kernel 1.8x or more slower than its 2025
    version would have to be measured before it can be priced, and none is stored."""
    from llmsizing import moe_evidence as mev
    from llmsizing import moe_runs

    runs = moe_runs.moe_published_runs().set_index("run", drop=False)
    need = {n: mev.moe_part_factor_needed(runs.loc[f"{n} pre-training"])
            for n in ("Granite 3.0 1B-A400M", "Granite 3.0 3B-A800M", "JetMoE-8B")}
    assert all(1.5 < f < 2.5 for f in need.values()), need
    scatter = mev.sonicmoe_layer_ratios(kernels=("ScatterMoE",))
    assert (scatter["fwd_ratio"] > 1.0).all() and (scatter["bwd_ratio"] > 1.0).all()


def test_ibm_example_layout_of_granite_1b_moves_it_further_out(ev):
    """IBM's dolomite-engine example pretraining config of the Granite 3.0 1B-A400M architecture
    (dolomite_granite_1b_moe_example_micro_batch: ScatterMoE, 2 sequences a micro-batch, no gradient
    checkpointing) is the only stored configuration of that model; it is an example, not the production run,
    and the row keeps its own convention (1 sequence, no recomputation). Priced at the example's micro-batch,
    the row lies further above its step than it does (bigger GEMMs run faster): the only sourced layout
    detail closes none of the gap; only an unnamed recomputation would (ch18)."""
    from llmsizing import moe_runs

    ex = ev.loc["dolomite_granite_1b_moe_example_micro_batch"]
    assert ex["value"] == 2 and "no gradient checkpointing" in ex["setting"]
    row = moe_runs.moe_published_runs().set_index("run", drop=False).loc["Granite 3.0 1B-A400M pre-training"]
    model = moe_runs.STANDINS.get(row["model"], row["model"])
    par = Parallel(dp=int(row["dp"]), zero=int(row["zero"]))
    per_gpu = int(row["global_batch"]) // par.dp                    # 1,024 / 128 = 8 sequences a GPU
    mb = int(ex["value"])
    st = step_time(model, row["gpu"], par, batch=mb, seq=int(row["seq"]), grad_accum=per_gpu // mb,
                   precision=row["precision"])
    at_example = float(row["gpu_hours"]) / (float(row["tokens"]) / st.tokens * st.step_s * par.gpus / 3600)
    as_row = float(row["gpu_hours"]) / moe_runs.predict_moe_run(row)["gpu_hours"]
    assert at_example > as_row > 1.3


@pytest.mark.parametrize("run, hours, layers, h, experts, published_ms, routing_ms", [
    # 71,171 x 3,600 x 4,096 / 10e12 / 24; routing 3 x (3 x 8 x 1,024 x 2 + 2 x 1,024 x 2 + 8 x 32 + 8 x 8)
    # = 160,704 B a token, x 4,096 / 3.35e12 B/s
    ("Granite 3.0 1B-A400M pre-training", 71171, 24, 1024, 32, 4.37275, 0.196491),
    # 133,308 x 3,600 x 4,096 / 10e12 / 32; routing 3 x (3 x 8 x 1,536 x 2 + 2 x 1,536 x 2 + 8 x 40 + 64)
    # = 240,768 B a token, x 4,096 / 3.35e12 B/s
    ("Granite 3.0 3B-A800M pre-training", 133308, 32, 1536, 40, 6.14283, 0.294384),
])
def test_layer_call_gap_of_the_granite_runs_by_hand(run, hours, layers, h, experts, published_ms, routing_ms):
    """moe_evidence.layer_call_gap, the chapter 18 Granite paragraph's per-call gap: one MoE layer on one
    4,096-token micro-batch, the published GPU-seconds of a call (Table 7's hours over the 10T tokens'
    sequences and the MoE layers) by hand; the priced call is the step's, checked here against
    predict_moe_run's GPU-hours by another path (priced x layers x sequences = predicted hours); the routing
    passes are the gap over the call's routing bytes on the H100's 3.35 TB/s (data/gpus.csv)."""
    from llmsizing import moe_evidence as mev
    from llmsizing.catalog import get_model
    from llmsizing.moe_runs import moe_published_runs, predict_moe_run

    row = moe_published_runs().set_index("run", drop=False).loc[run]
    assert (float(row["gpu_hours"]), float(row["tokens"]), int(row["seq"])) == (hours, 10e12, 4096)
    m = get_model(row["model"])
    assert (m.hidden, m.experts, m.experts_per_token, row["recompute"]) == (h, experts, 8, "none")
    c = mev.layer_call_gap(row)
    assert c.moe_layers == layers and c.published_s * 1e3 == pytest.approx(published_ms, abs=1e-5)
    predicted_hours = predict_moe_run(row)["gpu_hours"]
    assert c.priced_s * layers * 10e12 / 4096 / 3600 == pytest.approx(predicted_hours, rel=1e-9)
    assert c.gap_s == pytest.approx(c.published_s - c.priced_s) and c.gap_s > 0   # above their step
    assert c.routing_passes == pytest.approx(c.gap_s / (routing_ms * 1e-3), rel=1e-5)
    phi = moe_published_runs().set_index("run", drop=False).loc["Phi-3.5-MoE pre-training"]
    with pytest.raises(ValueError, match="pp"):
        mev.layer_call_gap(phi)
