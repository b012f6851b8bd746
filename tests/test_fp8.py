"""FP8 training recipes (issue 23): memory per tensor, saved activations, time at the FP8 peak, the planner.

Expected values are written out here from the sources, not read off the library:

* Transformer Engine 2.20.0.dev0 with Megatron-LM (``fp8-mixed``), per Linear weight element: bf16 weight 2,
  fp32 main_grad 4, fp32 master 4, fp32 Adam m 4 and v 4, FP8 ``_data`` 1 and FP8 ``_transpose`` 1 (Hopper);
  per other parameter (embeddings, norms) the same without the 2 FP8 bytes. Scaling state: per Linear module
  3 + 2 FP8 tensors, each an fp32 scale and an fp32 amax history of Megatron-LM's default length, 1
  (``--fp8-amax-history-len`` in ``megatron/training/arguments.py``, passed to TE's ``DelayedScaling``, whose
  own default of 1,024 it overrides); 4 modules per block.
* DeepSeek-V3 (``fp8-deepseek``): bf16 weight 2, fp32 gradient 4, fp32 master 4, bf16 m 2 and v 2, one FP8 copy
  1 + one fp32 scale per 128 x 128 block.
* Saved activations: a Linear's input in FP8 is 1 byte per element (+ one fp32 scale per tensor for TE, not
  counted; + 4 bytes per 1 x 128 tile for DeepSeek-V3).

Llama 3 8B by hand: hidden 4096, 32 heads of 128, 8 KV heads, MLP 14,336 (gated), 32 layers, vocabulary 128,256.
"""

import csv
import math
from pathlib import Path

import pytest

from llmsizing import Parallel
from llmsizing.activations import activation_memory, layer_terms
from llmsizing.audit import audit_table
from llmsizing.layouts import step_time
from llmsizing.memory import bytes_per_param_table, model_states, training_memory
from llmsizing.planner import plan
from llmsizing.precision import FP8_SCHEMES, RECIPES, check_recipe, compute_dtype
from llmsizing.time_cost import mfu_estimate, published_runs, training_time

import _kernels_by_hand as KH

DATA = Path(__file__).resolve().parents[1] / "data"

H, HEADS, KV, D, F, L, V = 4096, 32, 8, 128, 14336, 32, 128256
# one block's matrices: q and o (h x h), k and v (h x 1024), gate, up and down (h x f)
LINEAR_PER_LAYER = 2 * H * H + 2 * H * KV * D + 3 * H * F          # 218,103,808
LINEAR = L * LINEAR_PER_LAYER                                       # 6,979,321,856
N = 8_030_261_248                                                   # Llama 3 8B (chapter 1)
AMAX_PER_LAYER = 4 * 5 * 4 * (1 + 1)                                # 160 bytes: 4 modules x 5 tensors x fp32

TE_PER_LINEAR = {"weights": 2, "gradients": 4, "master": 4, "moments": 4 + 4, "fp8 copies": 1 + 1}
DS_PER_LINEAR = {"weights": 2, "gradients": 4, "master": 4, "moments": 2 + 2, "fp8 copies": 1 + 4 / (128 * 128)}


def test_hand_counts_of_llama_3_8b():
    assert LINEAR_PER_LAYER == 218_103_808
    assert N - LINEAR == 2 * V * H + (2 * L + 1) * H                 # untied embedding + head, norms


def test_fp8_mixed_states_per_tensor():
    ms = model_states("llama-3-8b", precision="fp8-mixed")
    assert ms.n_params == N
    assert ms.weights_bytes == 2 * N
    assert ms.gradients_bytes == 4 * N
    assert ms.master_bytes == 4 * N
    assert ms.optimizer_state_bytes == 8 * N
    assert ms.fp8_weights_bytes == 2 * LINEAR
    assert ms.fp8_meta_bytes == L * AMAX_PER_LAYER == 5_120          # (amax + scale) x 5 x 4 x 4 B x 32
    assert ms.total_bytes == 18 * N + 2 * LINEAR + L * AMAX_PER_LAYER
    # per Linear weight: 20 bytes; the whole model: a little under (embeddings have no FP8 copy)
    assert sum(TE_PER_LINEAR.values()) == 20
    assert ms.bytes_per_param == pytest.approx((18 * N + 2 * LINEAR + L * AMAX_PER_LAYER) / N, rel=1e-12)
    assert 19.5 < ms.bytes_per_param < 20                            # 86.9% of the parameters are Linear weights


def test_fp8_deepseek_states_per_tensor():
    ms = model_states("llama-3-8b", precision="fp8-deepseek")
    assert ms.weights_bytes == 2 * N and ms.gradients_bytes == 4 * N and ms.master_bytes == 4 * N
    assert ms.optimizer_state_bytes == 4 * N                         # bf16 moments
    assert ms.fp8_weights_bytes == pytest.approx(LINEAR * (1 + 4 / 16384), rel=1e-12)
    assert ms.fp8_meta_bytes == 0                                    # no amax history: online tile scaling
    assert sum(DS_PER_LINEAR.values()) == pytest.approx(15 + 4 / 128**2, rel=1e-12)   # one fp32 scale per 128x128 block


def test_fp8_against_16_bit_recipes():
    """What FP8 saves and what it does not: against Megatron's bf16 recipe (fp32 gradients, 18 B/param), TE's
    FP8 adds exactly its copies and scaling state; DeepSeek's saves 4 B/param of moments and adds 1 of copies."""
    base = model_states("llama-3-8b", precision="bf16-mixed-fp32-grads")
    te = model_states("llama-3-8b", precision="fp8-mixed")
    ds = model_states("llama-3-8b", precision="fp8-deepseek")
    assert te.total_bytes - base.total_bytes == 2 * LINEAR + L * AMAX_PER_LAYER
    assert base.total_bytes - ds.total_bytes == pytest.approx(4 * N - LINEAR * (1 + 4 / 16384), rel=1e-12)


def test_table_and_frame_show_the_fp8_rows():
    df = bytes_per_param_table("llama-3-8b", optimizers=["adamw"])
    assert df.loc["fp8-mixed", "adamw"] == pytest.approx((18 * N + 2 * LINEAR + L * AMAX_PER_LAYER) / N, rel=1e-12)
    assert df.loc["bf16-mixed", "adamw"] == 16
    frame = model_states("llama-3-8b", precision="fp8-mixed").to_frame()
    assert frame.loc["FP8 weight copies", "bytes"] == 2 * LINEAR
    assert "FP8 weight copies" not in model_states("llama-3-8b").to_frame().index     # old tables unchanged


def test_fp8_copies_split_like_the_weights():
    tp = model_states("llama-3-8b", precision="fp8-mixed", parallel=Parallel(tp=8))
    assert tp.fp8_weights_bytes == 2 * LINEAR / 8                   # 8 KV heads over 8 ranks: all split
    assert tp.fp8_meta_bytes == L * AMAX_PER_LAYER                  # scaling state is per module, replicated
    pp = model_states("llama-3-8b", precision="fp8-mixed", parallel=Parallel(pp=4))
    assert pp.fp8_weights_bytes == 2 * 8 * LINEAR_PER_LAYER and pp.fp8_meta_bytes == 8 * AMAX_PER_LAYER
    z3 = model_states("llama-3-8b", precision="fp8-mixed", parallel=Parallel(dp=8, zero=3))
    assert z3.fp8_weights_bytes == 2 * LINEAR / 8
    z1 = model_states("llama-3-8b", precision="fp8-mixed", parallel=Parallel(dp=8, zero=1))
    assert z1.fp8_weights_bytes == 2 * LINEAR                        # the distributed optimizer shards states only


# ----------------------------------------------------------------------------- saved activations
SB = 4096 * 1   # seq x batch


def test_saved_linear_inputs_fp8_mixed():
    """Per layer, flash attention, no TP: the QKV input (h), fc1 input (h) and fc2 input (f) go from 2 bytes to
    1; the output projection's input (h = 32 x 128) is kept in bf16 by the attention kernel and in FP8 by the
    Linear: 2 -> 3. Net: -(h + f) bytes per token."""
    kw = dict(batch=1, seq=4096)
    bf = layer_terms("llama-3-8b", **kw)
    f8 = layer_terms("llama-3-8b", **kw, fp8="fp8-mixed")
    assert bf["attention_projections"] - f8["attention_projections"] == SB * (H * (2 - 1) + H * (2 - 3))
    assert bf["mlp"] - f8["mlp"] == SB * (H * (2 - 1) + F * (2 - 1))
    assert bf["norms"] == f8["norms"] and bf["attention_core"] == f8["attention_core"]
    assert sum(bf.values()) - sum(f8.values()) == SB * (H + F) == 75_497_472
    whole = activation_memory("llama-3-8b", **kw), activation_memory("llama-3-8b", **kw, fp8="fp8-mixed")
    assert whole[0].total_bytes - whole[1].total_bytes == L * SB * (H + F)     # the LM head stays bf16


def test_saved_linear_inputs_fp8_mixed_eager():
    """Eager attention: the output projection's input is only the Linear's: 2 -> 1 byte."""
    bf = layer_terms("llama-3-8b", batch=1, seq=4096, attention="eager")
    f8 = layer_terms("llama-3-8b", batch=1, seq=4096, attention="eager", fp8="fp8-mixed")
    assert bf["attention_projections"] - f8["attention_projections"] == SB * (H + H)


def test_saved_linear_inputs_fp8_deepseek():
    """1 x 128 tiles: 1 + 4/128 bytes; E5M6 output-projection input: 1.5 + 4/128, the one copy the attention's
    backward reads too (no bf16 output kept); gated MLP: gate and up cached in FP8 (2f), SiLU(gate) and the product recomputed."""
    q, q_attn = 1 + 4 / 128, 1.5 + 4 / 128
    bf = layer_terms("llama-3-8b", batch=1, seq=4096)
    ds = layer_terms("llama-3-8b", batch=1, seq=4096, fp8="fp8-deepseek")
    assert ds["attention_projections"] == pytest.approx(SB * (q * H + q_attn * H), rel=1e-12)
    assert ds["mlp"] == pytest.approx(SB * (q * H + 2 * q * F), rel=1e-12)
    assert bf["mlp"] == SB * (2 * H + 3 * 2 * F)      # Megatron's fused SwiGLU: [gate | up] + product


def test_training_memory_uses_the_recipe():
    kw = dict(batch=1, seq=4096)
    base = training_memory("llama-3-8b", precision="bf16-mixed-fp32-grads", **kw)
    te = training_memory("llama-3-8b", precision="fp8-mixed", **kw)
    assert base.activations_bytes - te.activations_bytes == L * SB * (H + F)
    assert te.states.total_bytes - base.states.total_bytes == 2 * LINEAR + L * AMAX_PER_LAYER
    # the FP8 copies are alive in every phase, with the weights (TE keeps them in _fp8_workspaces)
    assert te.phase_parts["optimizer step"]["weights"] == 2 * N + 2 * LINEAR + L * AMAX_PER_LAYER


def test_bad_fp8_input():
    with pytest.raises(ValueError, match="stack='fused'"):
        training_memory("llama-3-8b", batch=1, seq=512, precision="fp8-mixed", stack="hf")
    with pytest.raises(ValueError, match="fp8"):
        layer_terms("llama-3-8b", batch=1, seq=512, fp8="fp4")
    with pytest.raises(ValueError, match="fp8-mixed"):
        check_recipe("precision", "fp8")
    with pytest.raises(ValueError, match="dtype='bf16' with precision='fp8-mixed'"):
        compute_dtype("fp8-mixed", "bf16")


# ----------------------------------------------------------------------------- time
def _csv_row(name, **match):
    with open(DATA / name, newline="") as fh:
        return next(r for r in csv.DictReader(fh) if all(r[k] == v for k, v in match.items()))


def test_one_place_decides_the_compute_dtype():
    assert compute_dtype("fp8-mixed") == compute_dtype("fp8-deepseek") == "fp8"
    assert {compute_dtype(p) for p in RECIPES if not RECIPES[p].fp8} == {"bf16"}
    assert compute_dtype("bf16-mixed", "fp8") == "fp8"            # the old dtype="fp8" call keeps working
    assert set(FP8_SCHEMES) == {p for p in RECIPES if RECIPES[p].fp8}


def test_training_time_with_fp8_recipe_is_the_fp8_peak_and_band():
    kw = dict(tokens=1e12, gpu="H100 SXM", n_gpus=64, seq=8192)
    t = training_time("llama-3-70b", precision="fp8-mixed", **kw)
    old = training_time("llama-3-70b", dtype="fp8", **kw)
    assert (t.mfu, t.mfu_low, t.mfu_high, t.days) == (old.mfu, old.mfu_low, old.mfu_high, old.days)
    row = _csv_row("mfu_inputs_model.csv", generation="hopper", dtype="fp8")
    assert t.mfu_low == pytest.approx(t.mfu * float(row["low"]), rel=1e-12)
    assert t.mfu_high == pytest.approx(t.mfu * float(row["high"]), rel=1e-12)
    # the H100 SXM's dense FP8 peak is 1,978.9 TFLOP/s (NVIDIA datasheet: 3,958 with sparsity)
    assert t.tokens_per_s_per_gpu == pytest.approx(1978.9e12 * t.mfu / t.flops_per_token, rel=1e-12)
    bf = training_time("llama-3-70b", **kw)
    assert bf.tokens_per_s_per_gpu == pytest.approx(989.4e12 * bf.mfu / bf.flops_per_token, rel=1e-12)
    with pytest.raises(ValueError, match="FP8 recipe"):
        training_time("llama-3-70b", precision="fp8-mixed", dtype="bf16", **kw)


def test_step_time_with_fp8_recipe_uses_the_fp8_kernel_efficiency():
    eff = float(_csv_row("kernel_efficiency.csv", generation="hopper", dtype="fp8")["kernel_efficiency"])
    bf_eff = float(_csv_row("kernel_efficiency.csv", generation="hopper", dtype="bf16")["kernel_efficiency"])
    assert 0.2 < eff < 0.6 and 0.4 < bf_eff < 0.7        # the calibrated values (tools/calibrate.py)
    par = Parallel(tp=8, pp=4, dp=2, zero=1, sp=True)
    kw = dict(batch=1, seq=8192, grad_accum=8)
    st = step_time("llama-3-70b", "H100 SXM", par, precision="fp8-mixed", **kw)
    assert st.kernel_efficiency == eff and st.peak_flops == 1978.9e12
    old = step_time("llama-3-70b", "H100 SXM", par, **kw)
    assert old.kernel_efficiency == bf_eff and old.peak_flops == 989.4e12
    # the compute by hand (issue 34, tests/_kernels_by_hand.py): the attention core (QK^T and attn @ V: 4 x s x
    # heads x head_dim per token and layer, three passes, 20 layers on the last stage) runs in BF16, its causal
    # half at FlashAttention-2's 308 TFLOP/s x 3 / 3.5 (H100, 8K); the Linear layers at the dtype's peak x its
    # calibrated efficiency x their GEMMs' efficiency at 8,192 tokens (1 byte an element in FP8, 2 in BF16)
    from llmsizing.flops import stage_flops_per_token

    tokens = 8192 * 8 / 8                                   # per tensor-parallel GPU
    attention = 3 * 20 * 4 * 8192 * 64 * 128
    linear = stage_flops_per_token("llama-3-70b", par, seq=8192)[-1] - attention
    att_s = attention / 2 * tokens / (308e12 * 3 / 3.5)
    g8 = KH.layer_gemm_eff(*KH.LLAMA3_70B, tp=8, tokens=8192, ridge=1978.9 / 3.35, nbytes=1)
    g16 = KH.layer_gemm_eff(*KH.LLAMA3_70B, tp=8, tokens=8192, ridge=989.4 / 3.35)
    # FP8 also pays its cast kernels (llmsizing.fp8_cast, fp8l34), at 0.92 x 3.35 TB/s: per layer and
    # micro-batch of 8,192 tokens, the GEMMs (m, n, k) QKV (8192, 1280, 8192), output (8192, 8192, 1024), gate
    # and up (8192, 7168, 8192), down (8192, 8192, 3584) do 6 x 8192 x 8192 x 13,056 FLOPs and cast
    # 6 x 8192 x (9472 + 9216 + 15360 + 11776) + 8 x 8192 x 13,056 bytes
    layer_flops = 6 * 8192 * 8192 * 13056
    cast_s = (6 * 8192 * 45824 + 8 * 8192 * 13056) / (0.92 * 3.35e12)
    fp8_rate = layer_flops / (layer_flops / (1978.9e12 * eff * g8) + cast_s)
    # and the memory-bound kernels (llmsizing.pointwise) at 3.35 TB/s, the same in both recipes (activations
    # stay BF16): the last stage's 20 layers and the loss over 128,256 logits
    pw_s = (20 * KH.pointwise_layer_bytes(*KH.LLAMA3_70B) + KH.pointwise_end_bytes(8192, 128256)[1]) * tokens \
        / KH.H100_HBM
    assert st.compute_s == pytest.approx(linear * tokens / fp8_rate + att_s + pw_s, rel=1e-9)
    assert old.compute_s == pytest.approx(linear * tokens / (989.4e12 * bf_eff * g16) + att_s + pw_s, rel=1e-9)
    assert old.step_s == step_time("llama-3-70b", "H100 SXM", par, dtype="bf16", **kw).step_s


def test_blackwell_fp8_stand_in_by_hand():
    """Issue 35 took NVIDIA's NeMo / Megatron-Bridge tables out, and with them every Blackwell FP8 run. The
    step model's B200 FP8 kernel efficiency is then a stand-in: Hopper FP8's calibrated median times the best
    FP8 GEMM's share of the peak on B200 over H100 (Bekman's search: 3,432.5 of 4,500 TFLOP/s = 0.7628 and
    1,402.6 of 1,978.9 = 0.7088). End to end, B200 FP8 takes Hopper FP8's row of data/mfu_inputs_model.csv (the
    only FP8 generation fitted; no batch given: the fit's "batch unpublished" term) with a warning."""
    from llmsizing.catalog import get_model
    from llmsizing.hardware import kernel_efficiency_row

    hopper = float(_csv_row("kernel_efficiency.csv", generation="hopper", dtype="fp8")["kernel_efficiency"])
    for gpu in ("B200", "GB200", "B300"):
        row = kernel_efficiency_row(gpu, "fp8")
        assert row.runs == "" and row.generation == "blackwell"
        assert row.kernel_efficiency == pytest.approx(hopper * (3432.5 / 4500) / (1402.6 / 1978.9), abs=6e-4)
    note = _csv_row("kernel_efficiency.csv", generation="blackwell", dtype="fp8")["note"]
    assert note.startswith("uncalibrated; how wrong it may be") and "held-out runs" in note
    m = _csv_row("mfu_inputs_model.csv", generation="hopper", dtype="fp8")
    with open(DATA / "mfu_inputs_model.csv", newline="") as fh:
        assert "blackwell" not in {r["generation"] for r in csv.DictReader(fh)}
    est = mfu_estimate("llama-3-70b", gpu="B200", seq=8192, precision="fp8-mixed")
    by_hand = math.exp(float(m["intercept"]) + float(m["size_exponent"]) * math.log(
        get_model("llama-3-70b").n_params / 1e10) + float(m["seq_exponent"]) * math.log(2)
                       + float(m["batch_unpublished"]))
    assert est.mfu == pytest.approx(by_hand, rel=1e-12)
    assert any("no published fp8 run" in w for w in est.warnings)


def _binomial_at_most(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p): how often a range holding each run with probability p holds k or
    fewer of n runs."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k + 1))


def test_fp8_runs_are_covered_out_of_source_as_stated():
    """MosaicML's llm-foundry MPT 3B on 8 H100s in FP8: 27.7% of the FP8 peak (their table). An 80% range
    misses about one run in five, so no test asks every FP8 run to lie inside it; what is checked is the
    coverage leaving each run's source out, recomputed here from the leave-one-source-out residuals and
    bounds, against what data/intervals.csv and the library state for FP8.

    With a layout (step model) it is the FP8 row of the area training-layout. It reached the 75% bar (5 of 6)
    until issue 34 added two FP8 sources (Dec 2026), and fell to 5 of 13: pytorch/ao's 8-GPU Llama 3 8B runs
    come in at 0.70-0.80 of the step model on H100 and 0.34-0.40 on MI300X and B200 (750 W). Those five
    MI300X and B200 runs are priced on stand-in FP8 efficiencies (no calibrated FP8 run on either GPU), so
    since strata34 they are counted in the group stand-in (0 of 5 inside) and set no bound; the FP8 row holds
    the calibrated FP8 runs, 5 of 8 (4 sources). This is measured and stated, not asserted to pass. End to
    end (no layout) 9 of the 11 calibrated-cell FP8 runs (5 sources) lie inside (3 of 6 before the new
    sources; 4 of 6 in Nov 2026): torchtitan's 128K context-parallel run and Trainy's H200 run are out. 3 of 6
    was not plausible under the steady states' 85.7% (one-sided binomial 0.042 < 5%), so the library does not
    imply it for FP8: the area training's FP8 row holds the FP8 runs' own coverage, and an FP8 estimate states
    it (``range_note``; on MI300X or B200 after saying that no calibrated range applies).
    Checked: the row equals the recomputed count, and the coverage the
    library states for FP8 is one the FP8 runs' count makes plausible (the same binomial, 5%), so this fails
    if the library ever claims more for FP8 than the runs support."""
    import re

    import numpy as np

    from llmsizing.calibration import mfu_loso_check
    from llmsizing.range_candidates import registered_check
    from llmsizing.step_intervals import step_loso_check

    runs = published_runs()
    fp8 = runs[runs["dtype"] == "fp8"]
    assert len(fp8) >= 5
    mosaic = fp8[fp8["model"] == "mpt-bench-3b"].iloc[0]
    assert mosaic["implied_mfu"] == pytest.approx(0.277, abs=0.002)
    with open(Path(__file__).resolve().parents[1] / "data" / "intervals.csv", newline="") as fh:
        rows = {(r["area"], r["group"]): r for r in csv.DictReader(fh)}
    # with a layout: each run against the bounds computed without its source
    # (the FP8 rows count the calibrated runs; pytorch/ao's MI300X and B200 runs, priced on stand-in
    # efficiencies, are counted in the group stand-in: none of the five is inside)
    stand_in = (per_gpu := fp8["gpu"].isin(["MI300X", "B200"])).sum()
    assert stand_in == 5
    check, per = step_loso_check()
    mine = (per["dtype"] == "fp8").to_numpy() & check.calibrated
    inside = (check.residuals >= check.low_log - 1e-12) & (check.residuals <= check.high_log + 1e-12)
    row = rows["training-layout", "fp8"]
    assert int(row["n_rows"]) == mine.sum() >= 5
    assert float(row["measured_coverage"]) == pytest.approx(inside[mine].mean(), abs=1e-4)
    assert rows["training-layout", "stand-in"]["measured_coverage"] == "0.0000"
    # the group stand-in also holds pytorch/ao's BF16 rows on the B200 (data27: no calibrated Blackwell BF16
    # run) and on the MI300X (data27b: no calibrated CDNA3 run); its BF16 H100 row (data27b) is calibrated
    bf16_stand_in = (runs["gpu"].isin(["B200", "MI300X"]) & (runs["dtype"] != "fp8")).sum()
    assert bf16_stand_in == 2
    assert int(rows["training-layout", "stand-in"]["n_rows"]) == stand_in + bf16_stand_in
    # end to end: the same, with the whole-run model refitted without each source
    check, per = mfu_loso_check()
    mine = (per["dtype"] == "fp8").to_numpy() & check.calibrated
    inside = (check.residuals >= check.low_log - 1e-12) & (check.residuals <= check.high_log + 1e-12)
    held, n = int(inside[mine].sum()), int(mine.sum())
    assert n == len(fp8) - stand_in
    assert not inside[~check.calibrated].any()
    row = rows["training", "fp8"]
    assert (int(row["n_rows"]), int(row["n_sources"])) == (n, per["source_key"][mine].nunique())
    assert float(row["measured_coverage"]) == pytest.approx(held / n, abs=1e-4)
    # with the stack and the batch (training-inputs): its FP8 row is its own check's count
    _, per_run = registered_check()
    inputs_fp8 = per_run[(per_run["dtype"] == "fp8") & per_run["calibrated"]]
    row = rows["training-inputs", "fp8"]
    assert float(row["measured_coverage"]) == pytest.approx(inputs_fp8["inside"].mean(), abs=1e-4)

    def stated(note):
        """The coverage the library states, read off its words: ("FP8 runs", held / of)."""
        # (a stand-in cell's note first says no calibrated range applies, then the band's coverage)
        m = re.fullmatch(r"(?:no calibrated range applies: .+ \(the band shown is the calibrated cells': )?"
                         r"80% range; out of source it held (\d+) of (\d+) (.+?) \((\d+) sources\), "
                         r"\d+\.\d\dx wide at the median(?:; and \d+ of \d+ runs without a published batch, "
                         r"estimated as this one \(\d+ sources\), \d+\.\d\dx wide at the median)?\)?", note)
        assert m, note
        return m[3], int(m[1]) / int(m[2])

    # what the library states with each FP8 estimate, and the band it gives around it
    for r in fp8.itertuples():
        kw = dict(gpu=r.gpu, seq=int(r.seq), precision="fp8-mixed", whole_run=r.kind == "pretraining-total",
                  recompute="full" if r.recompute == "full" else "none")
        est = mfu_estimate(r.model, **kw)
        assert est.low < est.mfu < est.high and np.isfinite(est.high), r.run
        runs_named, coverage = stated(est.range_note)
        assert runs_named == "FP8 runs"
        assert est.range_note.startswith("no calibrated range applies") == per_gpu[r.Index]
        assert _binomial_at_most(held, n, coverage) >= 0.05, est.range_note
        # (a GPU variant a run used, Meta's H100 HBM2e, has no price: the note does not depend on one)
        assert training_time(r.model, tokens=1e12, n_gpus=8, price_usd_per_gpu_hour=2.0,
                             **kw).range_note == est.range_note
        with_inputs = mfu_estimate(r.model, **kw, n_gpus=8, tokens_per_step=2**22).range_note
        assert stated(with_inputs) == ("FP8 runs", pytest.approx(inputs_fp8["inside"].mean(), abs=1e-4))
        assert _binomial_at_most(int(inputs_fp8["inside"].sum()), len(inputs_fp8),
                                 stated(with_inputs)[1]) >= 0.05


def test_planner_prices_fp8_at_the_fp8_peak():
    df = plan("llama-3-8b", tokens=1e11, seq=4096, global_batch=256, precision="fp8-mixed", max_gpus=16,
              zero_stages=(1,), micro_batches=(1,))
    assert len(df) > 0
    row = df.iloc[0]
    model_flops = 256 * 4096 * training_time("llama-3-8b", tokens=1e9, gpu="H100 SXM", n_gpus=1,
                                             seq=4096).flops_per_token
    assert row["mfu"] == pytest.approx(model_flops / (row["step_time_s"] * row["n_gpus"] * 1978.9e12), rel=1e-9)
    with pytest.raises(ValueError, match="no FP8 tensor cores"):
        plan("llama-3-8b", tokens=1e11, seq=4096, global_batch=256, precision="fp8-mixed",
             gpus=("A100 80GB",))


# ----------------------------------------------------------------------------- the audit of seed 004
def test_seed_004_fp8_verdicts():
    t = audit_table().set_index("id")
    faster = t.loc["004-fp8-faster-h100"]
    # throughput ratio = (FP8 peak x FP8 MFU) / (BF16 peak x BF16 MFU), both calibrated (no warnings here)
    f8 = mfu_estimate("llama-3-8b", gpu="H100 SXM", seq=4096, precision="fp8-mixed").mfu
    bf = mfu_estimate("llama-3-8b", gpu="H100 SXM", seq=4096).mfu
    assert faster["library"] == pytest.approx(1978.9 * f8 / (989.4 * bf), rel=1e-9)
    assert 1.0 < faster["library"] < 2.0
    # "significantly faster" names no factor: read at its most favourable reading as every claim (issue 38),
    # faster at all, a direction claim above 1 (review24a M1: FP8 slower would be off, however close); the
    # library's ratio is above 1 and within the band of it, so it holds
    assert (faster["bound"], faster["claimed"]) == ("above", 1.0)
    assert faster["verdict"] == "holds"
    vram = t.loc["004-fp8-less-vram"]
    # one sequence with full recomputation (the central reading): the FP8 weight copies outweigh the activations
    assert vram["library_central"] < 1
    # issue 38's one rule: the seed names no batch, so 8 sequences without recomputation are tried too, and there
    # the FP8 activations win (memory without FP8 over memory with it, both from training_memory directly)
    kw = dict(batch=8, seq=4096, recompute="none", optimizer_impl="fused")
    ratio = (training_memory("llama-3-8b", precision="bf16-mixed-fp32-grads", **kw).total_bytes
             / training_memory("llama-3-8b", precision="fp8-mixed", **kw).total_bytes)
    assert vram["reading"] == "fused AdamW; micro-batch 8, no recomputation" and vram["library"] == pytest.approx(ratio)
    assert (vram["verdict"] == "holds") == (ratio >= 1 / 1.25)
    assert math.isfinite(t.loc["004-l40s-fp8-vs-a100", "library"])


def test_recipe_tensor_table():
    from llmsizing import recipe_tensor_table

    df = recipe_tensor_table("llama-3-8b")
    assert list(df.columns) == ["bf16-mixed", "bf16-mixed-fp32-grads", "fp8-mixed", "fp8-deepseek"]
    assert df["bf16-mixed"].tolist() == [2, 2, 4, 8, 0, 0, 16]
    assert df.loc["FP8 weight copies", "fp8-mixed"] == pytest.approx(2 * LINEAR / N, rel=1e-12)
    assert df.loc["optimizer states", "fp8-deepseek"] == 4
    assert df.loc["total"].tolist() == pytest.approx(df.drop("total").sum().tolist(), rel=1e-12)
