"""The library against the committed PyTorch measurements (data/activation_measurements.csv, written by
tools/measure_memory.py). No torch needed: a change to the formulas that breaks agreement with measurement
fails here.

The tolerances are the book's stated targets, written out here (not read back from the library):
* pure 16-bit and fp32 runs, GPT-style and Llama-style, every attention kernel and recompute level, counting
  GPU-style 1-byte dropout masks: within +/-5%;
* the same runs with the masks as CPU PyTorch stores them (and the formula told that width): within +/-5%;
* autocast (bf16 compute, fp32 weights) against the pure 16-bit formula: the formula is low, by at most 30%
  when no s^2 tensor is kept in fp32 (flash attention, or the GPT-style model whose CPU softmax stays bf16),
  and by at most 60% (at <= 512 tokens; the gap grows with s) for the Llama-style model's
  eager attention, whose scores are fp32 under autocast (6 bytes per score instead of 2);
* model states (parameters + gradients + AdamW moments) against model_states: within 0.1%.
"""

import pandas as pd
import pytest

from llmsizing.measurements import MEASUREMENTS_CSV, SAVED_TENSORS_CSV, compare_measurements, load_measurements

TARGET = 0.05            # the book's stated target for pure 16-bit / fp32 runs
AUTOCAST_BOUND = 0.30          # stated bound: the pure 16-bit formula is 0-30% below an autocast measurement
# (0.25 until issue 26: the fused count's SwiGLU keeps 3 f-wide tensors, so the same gap is a larger fraction)
AUTOCAST_FP32_SCORES_BOUND = 0.60   # ... and 0-60% when the s^2 scores are kept in fp32 (seq <= 512)
STATE_TOLERANCE = 0.001


@pytest.fixture(scope="module")
def cmp():
    return compare_measurements()


def test_csv_covers_the_sweep():
    df = load_measurements()
    assert MEASUREMENTS_CSV.exists() and SAVED_TENSORS_CSV.exists()
    assert set(df["style"]) == {"gpt", "llama"}
    assert set(df["mode"]) == {"fp32", "bf16", "autocast-bf16"}
    assert set(df["attention"]) == {"eager", "flash"}
    assert set(df["recompute"]) == {"none", "selective", "full"}
    assert set(df["dropout"]) == {0.0, 0.1}
    assert df["seq"].nunique() >= 4 and df["batch"].nunique() >= 4
    gpt_pure = df[(df["style"] == "gpt") & df["mode"].isin(["fp32", "bf16"])]
    # every attention kernel x recompute level x dropout is measured for the GPT-style model
    assert len(gpt_pure.groupby(["mode", "attention", "recompute", "dropout"])) == 2 * 2 * 3 * 2
    assert (df["act_bytes"] > 0).all() and (df["param_bytes"] > 0).all()


@pytest.mark.parametrize("group", ["GPT bf16", "GPT fp32", "Llama bf16", "Llama fp32"])
def test_pure_runs_within_target(cmp, group):
    sub = cmp[cmp["group"] == group]
    assert len(sub) > 0
    bad = sub[sub["error"].abs() > TARGET]
    assert bad.empty, bad[["attention", "dropout", "recompute", "batch", "seq", "error"]].to_string()
    bad = sub[sub["error_cpu"].abs() > TARGET]
    assert bad.empty, bad[["attention", "dropout", "recompute", "batch", "seq", "error_cpu"]].to_string()


def test_gpt_pure_every_kernel_and_recompute_level(cmp):
    sub = cmp[cmp["group"].isin(["GPT bf16", "GPT fp32"])]
    for (att, rc), part in sub.groupby(["attention", "recompute"]):
        assert part["error"].abs().max() <= TARGET, (att, rc)


@pytest.mark.parametrize("group", ["GPT autocast", "Llama autocast"])
def test_autocast_gap_is_bounded_and_explained(cmp, group):
    """Autocast saves more than the pure 16-bit formula (fp32 norm inputs, extra bf16 casts), never less."""
    sub = cmp[cmp["group"] == group]
    assert len(sub) > 0
    assert (sub["error"] < 0).all(), "autocast should save more than the pure 16-bit formula"
    # Llama eager under autocast keeps fp32 scores: for every layer (no recompute), or for the one layer being
    # rebuilt during backward (selective and full recomputation report that peak too)
    fp32_scores = (sub["style"] == "llama") & (sub["attention"] == "eager")
    assert (sub.loc[~fp32_scores, "error"] >= -AUTOCAST_BOUND).all(), sub.loc[~fp32_scores, "error"].min()
    assert (sub.loc[fp32_scores, "error"] >= -AUTOCAST_FP32_SCORES_BOUND).all()
    assert (sub["seq"] <= 512).all()
    if fp32_scores.any():   # the fp32 scores make the gap grow with sequence length
        curve = sub[fp32_scores & (sub["recompute"] == "none") & (sub["batch"] == 2)].sort_values("seq")
        assert curve["error"].is_monotonic_decreasing
    # the gap is made of fp32 tensors: the measured fp32 bytes exceed the formula's fp32 part (the logits)
    assert (sub["act_fp32_bytes"] > 0).all()


def test_cpu_dropout_mask_is_full_width(cmp):
    """Measured fact: CPU PyTorch (2.13) keeps dropout masks as wide as the activation dtype."""
    drop = cmp[(cmp["dropout"] > 0) & (cmp["mode"] != "autocast-bf16")]
    assert len(drop) > 0
    width = {"fp32": 4.0, "bf16": 2.0}
    assert (drop["cpu_mask_bytes"] == drop["mode"].map(width)).all()
    assert (cmp.loc[cmp["dropout"] == 0, "mask_elements"] == 0).all()


def test_model_states_match_measured(cmp):
    assert (cmp["state_error"].abs() <= STATE_TOLERANCE).all(), cmp["state_error"].abs().max()
    # AdamW keeps one 4-byte `step` tensor per parameter tensor, outside the formula
    assert (cmp["optimizer_step_bytes"] == 4 * cmp["n_param_tensors"]).all()


def test_measured_parameter_count_is_the_library_count(cmp):
    from llmsizing.measurements import measured_model

    for _, row in cmp.drop_duplicates("model").iterrows():
        assert measured_model(row).n_params == row["n_params"]


def test_saved_tensor_listing():
    t = pd.read_csv(SAVED_TENSORS_CSV)
    assert {"component", "producer", "shape", "dtype", "nbytes"} <= set(t.columns)
    assert (t["nbytes"] > 0).all()


# ============================================================================= the peak of a whole step
# data/step_measurements.csv: live bytes over one training step of real Hugging Face models (GPT2LMHeadModel,
# LlamaForCausalLM, Qwen2ForCausalLM from transformers, built from config objects) and of the measurement tool's
# fused-stack stand-ins, on the CPU. The issue's target, written out here: the predicted peak within +/-5% of
# the measured one for every configuration, except the one gap chapter 5 names (the fused stand-ins under
# torch.autocast, a combination no fused stack runs: up to 10% low, the CPU autocast softmax kept in fp32).
STEP_TARGET = 0.05
FUSED_AUTOCAST_GAP = 0.10


@pytest.fixture(scope="module")
def steps():
    from llmsizing.measurements import compare_steps

    return compare_steps()


def test_step_csv_covers_the_sweep():
    from llmsizing.measurements import STEP_SAVED_TENSORS_CSV, STEP_TIMELINE_CSV, load_steps

    df = load_steps()
    assert STEP_TIMELINE_CSV.exists() and STEP_SAVED_TENSORS_CSV.exists()
    hf = df[df["stack"] == "hf"]
    assert {"GPT2LMHeadModel", "LlamaForCausalLM", "Qwen2ForCausalLM"} <= set(hf["model_class"])
    assert set(df["mode"]) == {"fp32", "bf16", "autocast-bf16"}
    assert set(df["attention"]) == {"eager", "sdpa"} and set(df["recompute"]) == {"none", "full"}
    assert set(df["optimizer_impl"]) == {"foreach", "forloop", "fused"}
    assert set(df["stack"]) == {"hf", "fused"}
    assert hf["seq"].nunique() >= 3 and hf["batch"].nunique() >= 2
    # the step ends with only states and gradients alive: nothing leaked between measurements
    assert (df["end_residual_bytes"].abs() <= 64 * 1024).all()


def test_step_peak_within_target(steps):
    named_gap = (steps["stack"] == "fused") & (steps["mode"] == "autocast-bf16")
    bad = steps[~named_gap & (steps["peak_error"].abs() > STEP_TARGET)]
    cols = ["stack", "model_class", "mode", "attention", "recompute", "optimizer_impl", "batch", "seq", "peak_error"]
    assert bad.empty, bad[cols].to_string()
    gap = steps[named_gap]
    # low without recomputation (the fp32 scores), within the target with full recomputation
    assert len(gap) and (gap["peak_error"] <= STEP_TARGET).all() and (gap["peak_error"] >= -FUSED_AUTOCAST_GAP).all()


def test_step_phase_of_the_peak(steps):
    # where the library puts the peak agrees with the measurement whenever the two largest phases differ by
    # more than the target (otherwise either answer is within the error)
    from llmsizing.measurements import STEP_PHASE_COLUMNS

    name = {"forward": "forward", "loss_forward": "forward", "loss_backward": "loss backward",
            "head_backward": "loss backward", "backward": "backward", "optimizer": "optimizer step"}
    for _, r in steps.iterrows():
        measured = {ph: max(r[c] for c in cols) for ph, cols in STEP_PHASE_COLUMNS.items()}
        first, second = sorted(measured.values())[-2:][::-1]
        if first > (1 + 2 * STEP_TARGET) * second:
            assert r["predicted_peak_phase"] == name[r["peak_phase"]], r[["model_class", "mode", "seq"]].to_dict()


def test_loss_backward_is_eight_bytes_per_logit(steps):
    # nll_loss's fp32 gradient + log_softmax's fp32 gradient, both alive: measured, every configuration
    extra = (steps["loss_backward_max_bytes"] - steps["forward_end_bytes"]) / (steps["batch"] * steps["seq"]
                                                                              * steps["vocab"])
    assert extra.between(7.99, 8.01).all(), extra.describe()


def test_optimizer_temporaries_measured(steps):
    # foreach: one temporary per parameter in the state dtype; for-loop: two of the largest tensor; fused: none
    err = steps["optimizer_step_error"].abs()
    assert (err <= 0.001).all(), steps.loc[err.idxmax(), ["model_class", "mode", "optimizer_impl"]].to_dict()


def test_autocast_weight_copies_measured(steps):
    from llmsizing.memory import autocast_copies_bytes
    from llmsizing.measurements import step_model

    amp = steps[(steps["mode"] == "autocast-bf16") & (steps["stack"] == "hf")]
    for _, r in amp.drop_duplicates("model_class").iterrows():
        # GPT-2's Conv1D biases are cast outside the weight cache: within 0.2%
        assert r["weight_copy_forward_end_bytes"] == pytest.approx(autocast_copies_bytes(step_model(r)), rel=0.002)


def test_hf_layer_terms_match_the_measured_listing():
    """One decoder layer of each real Hugging Face model, every mode and attention kernel: the bytes the library's
    ``stack="hf"`` counts against what autograd saved (data/step_saved_tensors.csv, deduplicated by storage,
    parameters and autocast's weight copies excluded). Within 0.1% (CPU LayerNorm keeps its statistics in bf16)."""
    from llmsizing.activations import layer_terms
    from llmsizing.measurements import STEP_SAVED_TENSORS_CSV, load_steps, step_model

    listing = pd.read_csv(STEP_SAVED_TENSORS_CSV)
    steps = load_steps()
    hf = listing[listing["stack"] == "hf"]
    assert len(hf.groupby(["model_class", "mode", "attention"])) == 3 * 3 * 2
    for (cls, mode, att), sub in hf.groupby(["model_class", "mode", "attention"]):
        model = step_model(steps[(steps["stack"] == "hf") & (steps["model_class"] == cls)].iloc[0])
        kw = dict(batch=int(sub["batch"].iloc[0]), seq=int(sub["seq"].iloc[0]),
                  dtype="fp32" if mode == "fp32" else "bf16", attention="eager" if att == "eager" else "flash",
                  stack="hf", autocast=mode == "autocast-bf16")
        predicted = sum(layer_terms(model, **kw).values())
        measured = sub.loc[sub["kind"] == "activation", "nbytes"].sum()
        assert predicted == pytest.approx(measured, rel=0.001), (cls, mode, att, predicted, measured)


# ============================================================================= per-rank states under torch.distributed
# data/dist_measurements.csv (tools/measure_memory.py dist): a real LlamaForCausalLM (fp32, AdamW) under
# DistributedDataParallel, ZeroRedundancyOptimizer (ZeRO-1) and FSDP2 fully_shard (ZeRO-3; reshard_after_forward
# off for the ZeRO-2-like run), 2 and 4 gloo processes on the CPU, and tensor parallelism with DTensor's
# parallelize_module on 2 ranks. The library must agree rank by rank: exactly, except ZeRO-1, which hands out whole
# parameters greedily, so a rank's optimizer state may differ from the even share by at most the largest
# parameter's state.
def test_per_rank_states_match_torch_distributed():
    from llmsizing import Model, Parallel, model_states
    from llmsizing.measurements import DATA_DIR
    from llmsizing.memory import stage_params

    df = pd.read_csv(DATA_DIR / "dist_measurements.csv")
    assert set(df["layout"]) == {"ddp", "zero1", "fsdp2", "fsdp2-no-reshard", "tp"} and set(df["world_size"]) == {2, 4}
    r0 = df.iloc[0]
    m = Model("dist-llama", layers=int(r0["layers"]), hidden=int(r0["hidden"]), heads=int(r0["heads"]),
              kv_heads=int(r0["kv_heads"]), ffn_hidden=int(r0["ffn"]), vocab=int(r0["vocab"]))
    assert m.n_params == r0["n_params"]
    zero = {"ddp": 0, "zero1": 1, "fsdp2": 3, "fsdp2-no-reshard": 3}
    largest_state = 8 * m.vocab * m.hidden                     # AdamW's two fp32 moments of the embedding
    tp = df[df["layout"] == "tp"]
    # DTensor's Megatron-style plan: vocabulary-parallel embedding, column/row-parallel matrices, norms replicated
    assert len(tp) == 2 and (tp["param_bytes"] == 4 * stage_params(m, Parallel(tp=2))[0]).all()
    df = df[df["layout"] != "tp"].astype({"grad_bytes": "int64", "optimizer_state_bytes": "int64"})
    for (layout, world), ranks in df.groupby(["layout", "world_size"]):
        ms = model_states(m, precision="fp32", optimizer="adamw", parallel=Parallel(dp=world, zero=zero[layout]))
        assert (ranks["param_bytes"] == ms.weights_bytes).all(), (layout, world)
        assert (ranks["grad_bytes"] == ms.gradients_bytes).all(), (layout, world)
        if layout == "zero1":
            assert ranks["optimizer_state_bytes"].sum() == 8 * m.n_params
            assert (abs(ranks["optimizer_state_bytes"] - ms.optimizer_bytes) <= largest_state).all()
        else:
            assert (ranks["optimizer_state_bytes"] == ms.optimizer_bytes).all(), (layout, world)


# ============================================================================= issue 22: GPT-2 fp32, loss backward
# The issue read the library's loss-backward peak 6-11% under real HF GPT-2 fp32 steps at 512-1,024 tokens and
# asked for the missing tensor. `tools/measure_memory.py loss-peak` re-measures those steps (also at the real
# 124M shape: 12 layers, 768 wide, vocabulary 50,257) and lists every storage alive at the op where the loss
# backward peaks. Nothing is missing: the peak is the saved activations, the log-softmax output saved by
# cross_entropy and two more logits-sized fp32 tensors (nll_loss's gradient and log_softmax's), and the library
# counts all of them. The 6-11% is what the library says with its defaults, stack="fused" (and attention="flash"),
# for a Hugging Face eager run: HF's unfused GELU, its K/V clones and the eager softmax are not in the fused count.
LOSS_PEAK_TARGET = 0.02
_GPT2_FP32 = ["model_class", "mode", "attention", "batch", "seq"]


@pytest.fixture(scope="module")
def gpt2_peaks():
    from llmsizing.measurements import GPT2_LOSS_PEAK_STEPS_CSV, compare_steps, load_steps

    return compare_steps(load_steps(GPT2_LOSS_PEAK_STEPS_CSV))


def _gpt2_fp32_512_to_1024(steps):
    tokens = steps["batch"] * steps["seq"]
    return steps[(steps["model_class"] == "GPT2LMHeadModel") & (steps["stack"] == "hf") & (steps["mode"] == "fp32")
                 & (steps["recompute"] == "none") & (steps["optimizer_impl"] == "foreach") & tokens.between(512, 1024)]


def test_gpt2_fp32_loss_backward_within_two_percent(steps, gpt2_peaks):
    committed = _gpt2_fp32_512_to_1024(steps)
    probe = _gpt2_fp32_512_to_1024(gpt2_peaks)
    assert len(committed) == 6 and len(probe) == len(gpt2_peaks) == 10
    assert set(probe["model"]) == {"step-gpt2", "gpt2-124m"} and set(probe["attention"]) == {"eager", "sdpa"}
    assert set(probe.loc[probe["model"] == "gpt2-124m", "vocab"]) == {50257}
    rows = pd.concat([committed, probe])
    bad = rows[rows["loss_backward_error"].abs() > LOSS_PEAK_TARGET]
    assert bad.empty, bad[_GPT2_FP32 + ["model", "loss_backward_error"]].to_string()
    # and the loss backward is where these steps peak, from 1,024 tokens on (at 512 the optimizer step may be)
    big = rows[rows["batch"] * rows["seq"] == 1024]
    assert (big["peak_phase"] == "loss_backward").all() and (big["predicted_peak_phase"] == "loss backward").all()


def test_gpt2_loss_backward_peak_itemised(gpt2_peaks):
    from llmsizing.measurements import GPT2_LOSS_PEAK_TENSORS_CSV, predict_step

    tensors = pd.read_csv(GPT2_LOSS_PEAK_TENSORS_CSV)
    for _, r in gpt2_peaks.iterrows():
        key = (tensors["model"] == r["model"]) & (tensors["attention"] == r["attention"]) \
            & (tensors["batch"] == r["batch"]) & (tensors["seq"] == r["seq"])
        sub = tensors[key]
        nbytes = sub["storage_bytes"] * sub["count"]
        # the listing is everything the tracker counted at the loss backward's maximum
        assert nbytes.sum() == sub["peak_bytes"].iloc[0] == r["measured_loss_backward_bytes"]
        assert (sub["peak_op"] == "_log_softmax_backward_data").all()
        assert nbytes[sub["category"] == "baseline"].sum() == r["baseline_bytes"]
        # three fp32 logits-sized tensors, made by these three ops, one each
        logits = 4 * r["batch"] * r["seq"] * r["vocab"]
        big = sub[sub["storage_bytes"] == logits]
        assert sorted(big["op"]) == ["_log_softmax", "_log_softmax_backward_data", "nll_loss_backward"]
        assert (big["count"] == 1).all()
        # not alive: the LM head's own output (nothing saves it), a fp32 copy of it (HF's logits.float() returns
        # the same tensor in fp32), a vocab x hidden gradient (the LM head's comes after the peak)
        act = sub[sub["category"] == "activation"]
        assert act["storage_bytes"].max() == logits and "_to_copy" not in set(act["op"])
        assert not (act["module"] == "lm_head").any()
        assert (act["storage_bytes"] != 4 * r["vocab"] * r["hidden"]).all()
        # the library's split of the same peak: 8 bytes per logit of temporaries (the two gradients) and the
        # saved activations, the log-softmax output among them
        parts = predict_step(r).phase_parts["loss backward"]
        assert parts["temporaries"] == 2 * logits
        assert parts["activations"] == pytest.approx(nbytes[sub["category"] == "activation"].sum() - 2 * logits,
                                                     rel=0.001)


def test_issue22_gap_is_the_fused_default(gpt2_peaks):
    # the same rows, predicted with the library's default stack: 9-15% under, the issue's gap; with stack="hf"
    # (what these steps ran) within the target
    from llmsizing.measurements import STEP_PHASE_COLUMNS, _ATTENTION, step_model
    from llmsizing.memory import training_memory

    for _, r in gpt2_peaks.iterrows():
        measured = max(r[c] for c in STEP_PHASE_COLUMNS["loss backward"])
        err = {stack: training_memory(step_model(r), batch=int(r["batch"]), seq=int(r["seq"]), precision="fp32",
                                      attention=_ATTENTION[r["attention"]], stack=stack,
                                      overhead_bytes=0.0).phases_bytes["loss backward"] / measured - 1
               for stack in ("fused", "hf")}
        assert -0.20 < err["fused"] < -0.05 and abs(err["hf"]) <= LOSS_PEAK_TARGET, (r[_GPT2_FP32].to_dict(), err)
