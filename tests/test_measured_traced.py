"""The causes of chapter 5's two traced patterns as options of the memory model, worked by hand (issue 38;
llmsizing.measured_traced, training_memory's ``loss``, ``tp_vocab`` and ``no_sync_grads``).

Parameter counts from the runs' dimensions (KempnerForge's mfu_bench.sh): Llama-3-8B (4096 wide, 32
layers, 32 heads of 128, 8 KV heads, FFN 14,336, vocabulary 128,256) and KempnerForge's 13B (5120, 40 layers,
40 heads, 8 KV heads, FFN 17,920 = 1.3 x 2/3 x 4 x 5120 rounded up to 256: its report prints
14.84B parameters). Each option's test fails on the code before it (the keyword did not exist: TypeError).
"""

import warnings

import pytest

from llmsizing.measured_traced import (COMPILED_LOSS_SAVING, KF_LOSS_BYTES_PER_LOGIT, compiled_loss_peak_bytes,
                                       kempnerforge_peak_bytes, measured_memory_traced, traced_options)
from llmsizing.memory import training_memory
from llmsizing.parallel import Parallel

GiB = 2**30
V = 128_256

# Llama-3-8B: embedding = LM head = 128,256 x 4096; per layer q, o 4096^2, k, v 4096 x 1024,
# MLP 3 x 4096 x 14,336
EMB_8B = V * 4096                                              # 525,336,576
LAYERS_8B = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14_336)   # 6,979,321,856
NORMS_8B = 65 * 4096                                           # 266,240
# 13B: per layer q, o 5120^2, k, v 5120 x 1024, MLP 3 x 5120 x 17,920
EMB_13B = V * 5120                                             # 656,670,720
LAYERS_13B = 40 * (2 * 5120**2 + 2 * 5120 * 1024 + 3 * 5120 * 17_920)  # 13,526,630,400
NORMS_13B = 81 * 5120

KF = dict(precision="bf16", optimizer_impl="fused", recompute="full")    # its stated recipe (memory_as_stated)


def test_param_counts_match_the_report():
    assert 2 * EMB_8B + LAYERS_8B + NORMS_8B == 8_030_261_248            # "8.03B"
    assert round((2 * EMB_13B + LAYERS_13B + NORMS_13B) / 1e9, 2) == 14.84


def test_13b_fsdp8_whole_peak_by_hand():
    """Row 8 (88.5 GiB allocated): FSDP=8, micro-batch 4, 4 micro-batches, priced with KempnerForge's options.
    At the last micro-batch's loss backward: bf16 weights and AdamW moments over 8; FP32 *unsharded* gradients
    of all 14.84B parameters (no_sync_grads); each layer's bf16 input (full recomputation), the int64 token ids
    and targets, the final norm's input and fp32 statistics, the LM head's input and 4 B/logit kept by the bf16
    loss; temporaries: the bf16 loss's two gradients (4 B/logit) and ZeRO-3's unit, the LM head's weights and
    gradient (4 B x 128,256 x 5120, larger than a block)."""
    P, b, s, h = 2 * EMB_13B + LAYERS_13B + NORMS_13B, 4, 4096, 5120
    sb = b * s
    acts = 40 * 2 * sb * h + 8 * sb + (2 * sb * h + 4 * sb) + 2 * sb * h + 4 * sb * V + 8 * sb
    want = {"weights": 2 * P / 8, "optimizer states": 4 * P / 8, "gradients": 4 * P, "activations": acts,
            "temporaries": 4 * sb * V + 4 * EMB_13B}
    step = training_memory("kf-llama3-13b", batch=b, seq=s, grad_accum=4, parallel=Parallel(dp=8, zero=3),
                           loss="bf16", tp_vocab="replicated", no_sync_grads="fp32", **KF)
    assert step.peak_phase == "loss backward"
    got = step.phase_parts["loss backward"]
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-12), k
    assert step.peak_bytes == pytest.approx(96_976_047_872, rel=1e-12)
    # allocated is the live tensors' peak: 1.00-1.02 of it without the unit the model holds and KF does not
    assert 0.97 < 88.5 * GiB / step.peak_bytes < 1.0 <= 88.5 * GiB / (step.peak_bytes - 4 * EMB_13B) < 1.02


def test_no_sync_grads_keeps_unsharded_fp32_gradients():
    """FSDP2 without the sync (KempnerForge's maybe_no_sync, reduce_dtype fp32): 4 B x every parameter before
    the last micro-batch's backward, not 2 B / 8; "bf16" 2 B; nothing with one micro-batch; the backward's end
    and the optimizer step keep the sharded bf16 gradients."""
    P = 2 * EMB_13B + LAYERS_13B + NORMS_13B
    kw = dict(batch=1, seq=4096, parallel=Parallel(dp=8, zero=3), **KF)
    plain = training_memory("kf-llama3-13b", grad_accum=4, **kw)
    for dtype, per in (("fp32", 4), ("bf16", 2)):
        got = training_memory("kf-llama3-13b", grad_accum=4, no_sync_grads=dtype, **kw)
        assert got.phase_parts["forward"]["gradients"] == pytest.approx(per * P, rel=1e-12)
        assert got.phase_parts["optimizer step"]["gradients"] == pytest.approx(2 * P / 8, rel=1e-12)
    assert plain.phase_parts["forward"]["gradients"] == pytest.approx(2 * P / 8, rel=1e-12)
    one = training_memory("kf-llama3-13b", grad_accum=1, no_sync_grads="fp32", **kw)
    assert one.peak_bytes == training_memory("kf-llama3-13b", grad_accum=1, **kw).peak_bytes


def test_tp_vocab_replicated_keeps_the_embedding_and_logits_whole():
    """Row 5 (39.4 GiB): TP=4, one shard. Per rank the layers and the head split 4 ways, the embedding and
    norms whole (KempnerForge's apply_tensor_parallel); the loss's 4 B/logit (bf16) over the whole vocabulary,
    and the kept log-probabilities whole too (4 x b s V x 3/4 more than split)."""
    local = (LAYERS_8B + EMB_8B) / 4 + EMB_8B + NORMS_8B     # 2,401,767,424
    b, s = 4, 4096
    kw = dict(batch=b, seq=s, grad_accum=2, parallel=Parallel(tp=4, sp=True), loss="bf16",
              no_sync_grads="fp32", **KF)
    rep = training_memory("llama-3-8b", tp_vocab="replicated", **kw)
    split = training_memory("llama-3-8b", **kw)
    got = rep.phase_parts["loss backward"]
    want = {"weights": 2 * local, "optimizer states": 4 * local, "gradients": 4 * local,
            "temporaries": 4 * b * s * V}
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-12), k
    assert split.phase_parts["loss backward"]["temporaries"] == pytest.approx(4 * b * s * V / 4, rel=1e-12)
    assert rep.activations_bytes - split.activations_bytes == pytest.approx(4 * b * s * V * 3 / 4, rel=1e-12)
    assert 1.0 <= 39.4 * GiB / rep.peak_bytes < 1.02


def test_compiled_loss_on_a_torchao_mi300x_row():
    """torchao's MI300X BF16 row (39.09 GiB reserved): FSDP over 8, 1 x 8192 tokens, op SAC. Compiled, the
    loss keeps 2 B/logit (the bf16 logits, not 4 of fp32 log-probabilities) and its backward writes 2 (one
    bf16 gradient, not 8): 8 B x 8192 x 128,256 = 7.83 GiB off the loss backward, which stays the peak."""
    n = 1 * 8192 * V
    kw = dict(batch=1, seq=8192, parallel=Parallel(dp=8, zero=3), recompute="op-sac")
    eager, comp = training_memory("llama-3-8b", **kw), training_memory("llama-3-8b", loss="compiled", **kw)
    assert comp.peak_phase == eager.peak_phase == "loss backward"
    assert eager.peak_bytes - comp.peak_bytes == pytest.approx(8 * n, rel=1e-9)
    assert 8 * n / GiB == pytest.approx(7.828, abs=1e-3)
    assert comp.phase_parts["loss backward"]["temporaries"] == pytest.approx(2 * n + 4 * EMB_8B, rel=1e-12)
    assert eager.activations_bytes - comp.activations_bytes == pytest.approx(2 * n, rel=1e-12)
    assert 39.09 * GiB / comp.peak_bytes == pytest.approx(1.129, abs=1e-3)   # >= 1: reserved >= allocated


def test_bf16_loss_holds_8_bytes_per_logit_at_its_backward():
    """KempnerForge's eager bf16 loss: 4 kept (the logits and bf16 log-probabilities) + 4 (two bf16
    gradients) = 8 B/logit, against the default fp32 loss's 4 + 8."""
    n = 2 * 4096 * V
    kw = dict(batch=2, seq=4096, **KF)
    eager, bf16 = training_memory("llama-3-8b", **kw), training_memory("llama-3-8b", loss="bf16", **kw)
    assert bf16.activations_bytes == eager.activations_bytes
    assert bf16.loss_temporaries_bytes == pytest.approx(4 * n, rel=1e-12)
    assert eager.loss_temporaries_bytes == pytest.approx(8 * n, rel=1e-12)
    assert KF_LOSS_BYTES_PER_LOGIT == 8.0 and COMPILED_LOSS_SAVING == {"forward": 2.0, "loss backward": 8.0}


def test_the_defaults_price_as_before_and_bad_options_are_refused():
    kw = dict(batch=2, seq=4096, grad_accum=2, parallel=Parallel(tp=2, dp=2, zero=3, sp=True))
    assert (training_memory("llama-3-8b", loss="fp32", tp_vocab="split", no_sync_grads="none", **kw).phases_bytes
            == training_memory("llama-3-8b", **kw).phases_bytes)
    for name, bad, allowed in (("loss", "fused", "fp32, bf16, compiled"), ("tp_vocab", "whole", "split"),
                               ("no_sync_grads", "fp16", "none, fp32, bf16")):
        with pytest.raises(ValueError, match=f"{name}.*Allowed: {allowed}"):
            training_memory("llama-3-8b", **{name: bad}, **kw)
    with pytest.raises(ValueError, match="tp_vocab='replicated'.*untied"):
        training_memory("gpt2", batch=1, seq=1024, tp_vocab="replicated")
    with pytest.raises(ValueError, match="no_sync_grads='fp32'.*grad_buffer"):
        training_memory("llama-3-8b", batch=1, seq=4096, grad_accum=2, no_sync_grads="fp32", grad_buffer=True)
    with pytest.raises(ValueError, match="no_sync_grads='fp32'.*pp=2"):
        training_memory("llama-3-8b", batch=1, seq=4096, grad_accum=2, no_sync_grads="fp32",
                        parallel=Parallel(pp=2))
    with pytest.raises(ValueError, match="code_traced"):
        traced_options("eager loss", Parallel())


def test_the_old_sums_are_deprecated_wrappers():
    with pytest.warns(DeprecationWarning, match="kempnerforge_peak_bytes"):
        got = kempnerforge_peak_bytes("llama-3-8b", tp=4, dp=1, batch=4, seq=4096, grad_accum=2)
    local = (LAYERS_8B + EMB_8B) / 4 + EMB_8B + NORMS_8B
    assert got["gradients"] == pytest.approx(4 * local, rel=1e-12)
    assert got["loss"] == pytest.approx(4 * 4 * 4096 * V, rel=1e-12)

    class _Step:                     # the one attribute compiled_loss_peak_bytes reads
        phases_bytes = {"forward": 40.0 * GiB, "loss backward": 42.0 * GiB, "backward": 36.0 * GiB}
    with pytest.warns(DeprecationWarning, match="compiled_loss_peak_bytes"):
        peak = compiled_loss_peak_bytes(_Step(), "llama-3-8b", batch=1, seq=8192)
    n = 8192 * V
    assert peak == pytest.approx(max(40.0 * GiB - 2 * n, 42.0 * GiB - 8 * n, 36.0 * GiB))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        measured_memory_traced()                       # prices with training_memory: no deprecated call


def test_traced_rows_close_both_patterns():
    """Every multi-GPU KempnerForge row allocated 1.00-1.02x its traced peak less FSDP's gathered unit (the
    model holds one in every phase; KempnerForge reshards its whole model after the forward), 0.97-1.01x with
    it; the single GPU 1.16x at its script's micro-batch 2. Every torchao MI300X and B200 row reserved at least
    its traced peak, where the model's eager loss put the peak above what they reserved."""
    t = measured_memory_traced()
    kf = t[t["cause"] == "kempnerforge"]
    assert len(kf) == 14
    one = kf["run"].str.contains("single GPU")
    multi = kf[~one]
    assert (multi["measured_gib"] / (multi["traced_gib"] - multi["gathered_gib"])).between(1.0, 1.02).all()
    assert multi["traced_ratio"].between(0.969, 1.01).all()
    assert ((multi["gathered_gib"] > 0) == multi["run"].str.contains("FSDP")).all()
    assert kf.loc[one, "traced_ratio"].iloc[0] == pytest.approx(1.16, abs=0.005)
    ao = t[t["cause"] == "compiled loss"]
    assert len(ao) == 7 and (ao["model_gib"] > ao["measured_gib"]).all()
    assert (ao["traced_gib"] <= ao["measured_gib"]).all()


def test_the_traced_rows_come_from_the_data_files_column_not_the_runs_names(monkeypatch):
    """Which rows are traced is data/published_measured_memory.csv's ``code_traced`` column: 14 KempnerForge
    rows (every max_allocated row of the file) and 7 torchao MI300X/B200 rows, counted from the CSV; with the
    column blank nothing is traced (the old code picked rows by name), and an unknown cause is refused."""
    import csv

    import pandas as pd

    import llmsizing.layout_fits as lf
    with open(lf.MEASURED_MEMORY_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    want = {r["run"]: r["code_traced"] for r in rows if r["code_traced"]}
    assert sum(v == "kempnerforge" for v in want.values()) == 14 == sum(
        r["statistic"] == "max_allocated" for r in rows)
    assert sum(v == "compiled loss" for v in want.values()) == 7
    got = measured_memory_traced()
    assert dict(zip(got["run"], got["cause"])) == want
    real = lf.published_measured_memory
    monkeypatch.setattr(lf, "published_measured_memory", lambda: real().assign(code_traced=""))
    assert measured_memory_traced().empty
    monkeypatch.setattr(lf, "published_measured_memory",
                        lambda: pd.DataFrame(real()).assign(code_traced="eager loss"))
    with pytest.raises(ValueError, match="code_traced"):
        measured_memory_traced()


def test_max_micro_batch_takes_the_options():
    """The largest micro-batch that fits is exact with the options too (each is linear in the micro-batch:
    the loss's bytes per logit, or constant in it: the unsharded gradients), and KempnerForge's options fit
    fewer sequences of the 13B on an H200 than the model's defaults (the FP32 unsharded gradients alone are
    55 GiB). With full recomputation a sequence of 8192 tokens costs the eager fp32 loss 12 B x 8192 x 128,256
    = 12.6 GB and its layers' inputs 2 x 32 x 8192 x 4096 = 2.1 GB, the compiled loss 4.2 GB instead of 12.6:
    at least twice the sequences fit."""
    from llmsizing.catalog import get_gpu
    from llmsizing.memory import max_micro_batch

    h200 = get_gpu("H200")
    kf = dict(loss="bf16", tp_vocab="replicated", no_sync_grads="fp32")
    kw = dict(parallel=Parallel(dp=8, zero=3), grad_accum=4, **KF)
    b = max_micro_batch("kf-llama3-13b", "H200", 4096, **kw, **kf)
    assert 1 <= b < max_micro_batch("kf-llama3-13b", "H200", 4096, **kw)
    for mb, fits in ((b, True), (b + 1, False)):
        t = training_memory("kf-llama3-13b", batch=mb, seq=4096, **kw, **kf).total_bytes
        assert (t <= h200.memory_bytes) is fits, mb
    full = dict(parallel=Parallel(dp=8, zero=3), recompute="full")
    eager = max_micro_batch("llama-3-8b", "H100 SXM", 8192, **full)
    assert eager >= 1 and max_micro_batch("llama-3-8b", "H100 SXM", 8192, loss="compiled", **full) >= 2 * eager
