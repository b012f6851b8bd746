"""A persistent gradient buffer (issue 38, grad28): ``training_memory(..., grad_buffer=True)`` and
``plan(..., grad_buffer=True)``.

Expected bytes are derived by hand: the parameters of a small Llama shape counted from its config, times the
gradient dtype's bytes (2 for bf16, 4 for fp32; Megatron-Core ``param_and_grad_buffer.py`` allocates
``grad_data`` as ``torch.zeros(numel, dtype=grad_dtype)``, the whole chunk's parameters, also under the
distributed optimizer), and the DDP buffer measured in ``data/grad_buffer_measurements.csv``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from llmsizing import Model, Parallel, get_gpu, training_memory
from llmsizing.layouts import USABLE_FRACTION
from llmsizing.memory import max_micro_batch

DATA = Path(__file__).resolve().parents[1] / "data"

# the measurement sweep's shape (tools/measure/dist.py's DIST_SHAPE): counted by hand below
SMALL = Model("grad-buffer-llama", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=8192,
              gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=256)
HEAD_DIM = 256 // 8
PER_LAYER = (256 * 256 * 2                # q and o
             + 256 * 2 * HEAD_DIM * 2     # k and v: 2 KV heads of 32
             + 3 * 256 * 688              # gate, up, down
             + 2 * 256)                   # two RMSNorm gains
N_PARAMS = 4 * PER_LAYER + 2 * 8192 * 256 + 256   # + embedding, LM head, final norm


def _forward(**kw):
    return training_memory(SMALL, batch=2, seq=256, **kw).pieces_bytes


def test_hand_count_of_the_shape():
    assert N_PARAMS == 6_965_504 == SMALL.n_params


@pytest.mark.parametrize("precision, grad_bytes", [("bf16-mixed", 2), ("bf16-mixed-fp32-grads", 4),
                                                   ("fp32", 4)])
def test_buffer_adds_the_gradients_to_the_forward_and_loss(precision, grad_bytes):
    off, on = _forward(precision=precision), _forward(precision=precision, grad_buffer=True)
    for piece in ("forward", "loss backward"):
        assert on[piece] - off[piece] == pytest.approx(N_PARAMS * grad_bytes, rel=1e-12)
    # the end of the backward and the optimizer step held them already
    for piece in ("backward (end)", "optimizer step"):
        assert on[piece] == off[piece]


@pytest.mark.parametrize("precision, grad_bytes", [("bf16-mixed", 2), ("fp32", 4)])
def test_buffer_adds_all_but_the_head_at_the_start_of_the_backward(precision, grad_bytes):
    """Without the buffer the backward starts with the LM head's gradients only (the first the backward
    writes); with it, all the gradients are alive already: the difference is G minus the head's,
    (N_PARAMS - vocab x hidden) x the gradient bytes (the head untied, 8192 x 256, counted by hand)."""
    off, on = _forward(precision=precision), _forward(precision=precision, grad_buffer=True)
    head = 8192 * 256
    assert on["backward (start)"] - off["backward (start)"] == pytest.approx(
        (N_PARAMS - head) * grad_bytes, rel=1e-12)


def test_buffer_stays_whole_under_zero1():
    """Megatron's distributed optimizer shards the optimizer, not the grad buffer (theoretical_memory_usage:
    6 + 12 / dp bytes per parameter, the 6 = bf16 weight + fp32 gradient whole)."""
    par = Parallel(dp=4, zero=1)
    off = _forward(precision="bf16-mixed-fp32-grads", parallel=par)
    on = _forward(precision="bf16-mixed-fp32-grads", parallel=par, grad_buffer=True)
    assert on["forward"] - off["forward"] == pytest.approx(N_PARAMS * 4, rel=1e-12)


@pytest.mark.parametrize("tp, pp", [(2, 1), (1, 2), (2, 2)])
def test_buffer_is_the_gpus_share_of_the_gradients(tp, pp):
    """With tensor and pipeline parallelism the buffer is this GPU's gradients: the same bytes the end of
    the backward holds, so about params / (tp x pp) x 2 (the norms are replicated over tp, the stages
    differ by the embedding and head)."""
    par = Parallel(tp=tp, pp=pp, sp=tp > 1)
    res = training_memory(SMALL, batch=2, seq=256, grad_accum=pp, parallel=par, _all_stages=True)
    buf = training_memory(SMALL, batch=2, seq=256, grad_accum=pp, parallel=par, _all_stages=True,
                          grad_buffer=True)
    total = 0.0
    for r, b in zip(res, buf):
        g = r.states.gradients_bytes
        total += g
        if pp == 1:           # one micro-batch: the forward had no gradients; the buffer adds them all
            assert b.pieces_bytes["forward"] - r.pieces_bytes["forward"] == pytest.approx(g, rel=1e-12)
        else:                 # accumulating: they were alive already
            assert b.pieces_bytes == r.pieces_bytes
    assert total / pp == pytest.approx(N_PARAMS * 2 / (tp * pp), rel=0.01)     # the stages' mean


def test_accumulation_already_counts_them():
    assert _forward(grad_accum=4, grad_buffer=True) == _forward(grad_accum=4)


def test_result_says_so_and_peak_never_falls():
    off = training_memory(SMALL, batch=2, seq=256)
    on = training_memory(SMALL, batch=2, seq=256, grad_buffer=True)
    assert on.grad_buffer and not off.grad_buffer
    assert on.peak_bytes >= off.peak_bytes


def test_max_micro_batch_honours_it():
    kw = dict(parallel=Parallel(tp=4, sp=True), recompute="selective")
    off = max_micro_batch("llama-3-8b", "H100 SXM", 4096, **kw)
    on = max_micro_batch("llama-3-8b", "H100 SXM", 4096, grad_buffer=True, **kw)
    assert 0 < on < off
    for b, fits in ((on, True), (on + 1, False)):         # the largest that fits, with the buffer
        total = training_memory("llama-3-8b", batch=b, seq=4096, grad_buffer=True, **kw).total_bytes
        assert (total <= get_gpu("H100 SXM").memory_bytes) == fits


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_grad_buffer_must_be_a_bool(bad):
    with pytest.raises((TypeError, ValueError), match="grad_buffer"):
        training_memory(SMALL, batch=1, seq=256, grad_buffer=bad)


@pytest.mark.parametrize("zero", [2, 3])
def test_refused_where_gradients_are_sharded(zero):
    with pytest.raises(ValueError, match=r"grad_buffer=True needs parallel.zero <= 1"):
        training_memory(SMALL, batch=1, seq=256, parallel=Parallel(dp=2, zero=zero), grad_buffer=True)


def _rows():
    with open(DATA / "grad_buffer_measurements.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_measured_csv_has_sources():
    rows = _rows()
    assert rows and all(r["source"].startswith("measured:") and r["as_of"] for r in rows)


def test_measured_ddp_keeps_one_buffer_of_the_gradients_dtype():
    """At the forward peak of a steady-state step with one micro-batch, PyTorch DDP (bucket view on or off)
    holds exactly the parameters x their dtype's bytes (fp32 4, bf16 2) and a plain step holds none: the
    bytes grad_buffer adds to the forward, per parameter (the recipe's gradient dtype)."""
    for r in _rows():
        if r["phase"] != "forward peak" or r["grad_accum"] != "1":
            continue
        per_param = {"fp32": 4, "bf16": 2}[r["param_dtype"]]
        expect = 0 if r["layout"] == "plain" else int(r["params"]) * per_param
        assert int(r["gradient_bytes"]) == expect
        recipe = {"fp32": "fp32", "bf16": "bf16"}[r["param_dtype"]]
        added = _forward(precision=recipe, grad_buffer=r["layout"] != "plain")["forward"] - _forward(
            precision=recipe)["forward"]
        assert added == pytest.approx(N_PARAMS * (0 if r["layout"] == "plain" else per_param), rel=1e-12)


def test_measured_accumulation_without_buffer_matches_the_model():
    """A plain step's second micro-batch holds the first's gradients, once: what training_memory adds to the
    forward with grad_accum > 1 (params x the recipe's gradient bytes, by hand). DDP under no_sync holds them
    beside its buckets, twice, unless zero_grad(set_to_none=False) kept .grad as views of the buckets
    (ddp-view-keep: once); the kinds are checked in tests/test_ddp_grad_copy.py, here only the data."""
    for r in _rows():
        if r["phase"] == "forward peak" and r["grad_accum"] == "2" and r["micro_batch"] == "2":
            ratio = int(r["gradient_bytes"]) / int(r["param_bytes"])
            assert ratio == (1 if r["layout"] in ("plain", "ddp-view-keep") else 2)
            if r["layout"] == "plain":
                per_param = {"fp32": 4, "bf16": 2}[r["param_dtype"]]
                added = (_forward(precision=r["param_dtype"], grad_accum=2)["forward"]
                         - _forward(precision=r["param_dtype"])["forward"])
                assert added == pytest.approx(N_PARAMS * per_param * ratio, rel=1e-12)


def test_plan_fits_with_the_buffer_and_agrees_with_training_memory():
    from llmsizing.job import Job
    from llmsizing.planner import plan, recompute_kwargs

    run = dict(tokens=1e11, gpus=("H100 SXM",), seq=4096, global_batch=256, max_gpus=256)
    base = plan("llama-3-8b", **run)
    df = plan("llama-3-8b", **run, grad_buffer=True)
    assert "persistent gradient buffer" in df.attrs["assumes"]
    assert "persistent gradient buffer" not in base.attrs["assumes"]
    assert len(df) <= len(base)
    for i in np.random.default_rng(1).choice(len(df), size=min(25, len(df)), replace=False):
        r = df.iloc[i]
        par = Job.from_plan_row(r, "llama-3-8b", seq=run["seq"]).parallel
        m = training_memory("llama-3-8b", batch=int(r["micro_batch"]), seq=run["seq"],
                            grad_accum=int(r["grad_accum"]), parallel=par, grad_buffer=bool(r["zero"] <= 1),
                            **recompute_kwargs(r))
        assert m.total_bytes == pytest.approx(r["memory_per_gpu_bytes"], rel=1e-9)
        assert m.total_bytes <= USABLE_FRACTION * get_gpu("H100 SXM").memory_bytes * (1 + 1e-9)


def test_plan_refuses_a_non_bool():
    from llmsizing.planner import plan

    with pytest.raises((TypeError, ValueError), match="grad_buffer"):
        plan("llama-3-8b", tokens=1e11, seq=4096, global_batch=256, max_gpus=64, grad_buffer="on")


# ------------------------------------------------------------------------- DeepSpeed ZeRO-1/2's reduce bucket
# deepspeed/runtime/zero/config.py (deepspeedai/DeepSpeed at edaa7221): reduce_bucket_size = 5e8 elements,
# overlap_comm off for stages 1 and 2; stage_1_and_2.py: the bucket in the parameters' dtype, a second with
# overlap_comm, and allreduce_bucket's flattened copy of its contents during each reduction.
@pytest.mark.parametrize("kw, expected", [
    ({}, 500_000_000 * 2 * (1 + 1)),                                   # bf16: one bucket + its flattened copy
    ({"overlap_comm": True}, 500_000_000 * 2 * (2 + 1)),               # double buffers
    ({"precision": "fp32"}, 500_000_000 * 4 * 2),                      # fp32 parameters: 4 bytes an element
    ({"precision": "bf16-mixed-fp32-grads"}, 500_000_000 * 2 * 2),     # the bucket: the parameters' dtype
    ({"reduce_bucket_size": 200_000_000}, 200_000_000 * 2 * 2),
])
def test_deepspeed_bucket_by_hand(kw, expected):
    from llmsizing.footprint import deepspeed_bucket_bytes

    assert deepspeed_bucket_bytes(**kw) == expected


@pytest.mark.parametrize("kw, err, match", [
    ({"reduce_bucket_size": -1}, ValueError, "reduce_bucket_size"),
    ({"reduce_bucket_size": 5e8}, TypeError, "reduce_bucket_size"),
    ({"overlap_comm": "yes"}, TypeError, "overlap_comm"),
    ({"precision": "fp7"}, ValueError, "precision"),
])
def test_deepspeed_bucket_refuses_bad_input(kw, err, match):
    from llmsizing.footprint import deepspeed_bucket_bytes

    with pytest.raises(err, match=match):
        deepspeed_bucket_bytes(**kw)


@pytest.mark.parametrize("model", ["llama-3-8b", "mixtral-8x7b"])
def test_plan_leaves_zero2_and_zero3_rows_as_they_were(model):
    """ZeRO-2 and 3 shard the gradients and free the shards after the step, so the buffer does not apply
    there (check_grad_buffer): a search over those stages only gives the same rows with and without it."""
    import pandas as pd

    from llmsizing.planner import plan

    run = dict(tokens=1e11, gpus=("H100 SXM", "A100 80GB"), seq=4096, global_batch=256, max_gpus=256,
               zero_stages=(2, 3))
    base, on = plan(model, **run), plan(model, **run, grad_buffer=True)
    assert len(base) > 0 and set(base["zero"]) == {2, 3}
    pd.testing.assert_frame_equal(on, base)
