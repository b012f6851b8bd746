"""PyTorch DDP's gradient copies (issue 38, ddp29): ``grad_buffer="ddp-copy"`` (DDP's default,
``gradient_as_bucket_view=False``) and ``"ddp-view"`` (``gradient_as_bucket_view=True`` accumulating under
``no_sync``).

Expected bytes are derived by hand. The measured model of ``tools/measure/grad_buffer.py`` is four blocks of
``Linear(256, 1024), GELU, Linear(1024, 256)`` and a ``Linear(256, 512)`` head, biases included; its
parameters are counted here from those shapes. The copies each phase holds are read off PyTorch's
reducer (``torch/csrc/distributed/c10d/reducer.cpp``): ``initialize_buckets`` allocates the flat bucket
once in the parameters' dtype; ``mark_variable_ready_dense`` copies each ``.grad`` into it and, with
``gradient_as_bucket_view``, points ``.grad`` at it; without, ``copy_bucket_to_grad`` writes the reduced
bucket back into a ``.grad`` that stays until ``zero_grad(set_to_none=True)``; under ``no_sync``
``autograd_hook`` returns early, so ``.grad`` accumulates apart from the bucket.

``ddp-view-keep`` (chapter 7's exercise 4): ``zero_grad(set_to_none=False)`` zeroes each ``.grad`` in place
(``torch/optim/optimizer.py`` l.1061-1069, torch 2.13.0), so it stays a view of its bucket; under ``no_sync``
autograd adds into it in place (``AccumulateGrad``, ``torch/csrc/autograd/functions/accumulate_grad.h``
l.251, "Case 2.3: In-place addition"), and ``mark_variable_ready_dense`` copies nothing when ``.grad``
already views the bucket. One copy in every phase: the library's ``grad_buffer=True``, no kind of its own.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from llmsizing import Model, Parallel, training_memory
from llmsizing.footprint import GRAD_BUFFERS, check_grad_buffer_kind, grad_copies

DATA = Path(__file__).resolve().parents[1] / "data"

# the measured stack, by hand: 4 x (256 x 1024 + 1024 and 1024 x 256 + 256) + 512 x 256 + 512
MEASURED_PARAMS = 4 * ((256 * 1024 + 1024) + (1024 * 256 + 256)) + (256 * 512 + 512)
DTYPE_BYTES = {"fp32": 4, "bf16": 2}

# Copies of the gradients alive, by hand from the reducer (see the module docstring), per (layout, accumulating,
# micro-batch, phase): the bucket (1 in every DDP phase) + the .grad tensors apart from it.
#   plain: .grad only; freed by set_to_none, so none in the first forward; kept across micro-batches.
#   ddp-copy: the bucket, and .grad apart from the backward on (the reduced bucket copied back), to zero_grad.
#   ddp-view: the bucket; .grad is a view of it after a synchronising backward; under no_sync (every micro-batch
#   but the last) .grad is autograd's own tensor, apart, until the last backward copies it in and re-points it.
#   ddp-view-keep: the bucket only, in every phase and micro-batch: .grad is never set to None, so it stays a
#   view of the bucket, zeroed and accumulated in place (set_to_none=False; the module docstring).
BY_HAND = {
    ("plain", False, 1): {"forward peak": 0, "backward end": 1, "optimizer step": 1},
    ("plain", True, 1): {"forward peak": 0, "backward end": 1},
    ("plain", True, 2): {"forward peak": 1, "backward end": 1, "optimizer step": 1},
    ("ddp-copy", False, 1): {"forward peak": 1, "backward end": 2, "optimizer step": 2},
    ("ddp-copy", True, 1): {"forward peak": 1, "backward end": 2},
    ("ddp-copy", True, 2): {"forward peak": 2, "backward end": 2, "optimizer step": 2},
    ("ddp-view", False, 1): {"forward peak": 1, "backward end": 1, "optimizer step": 1},
    ("ddp-view", True, 1): {"forward peak": 1, "backward end": 2},
    ("ddp-view", True, 2): {"forward peak": 2, "backward end": 1, "optimizer step": 1},
    ("ddp-view-keep", False, 1): {"forward peak": 1, "backward end": 1, "optimizer step": 1},
    ("ddp-view-keep", True, 1): {"forward peak": 1, "backward end": 1},
    ("ddp-view-keep", True, 2): {"forward peak": 1, "backward end": 1, "optimizer step": 1},
}

# the model's pieces for the measured phases (the forward's peak, the end of the backward, the step)
PIECES = {"forward peak": "forward", "backward end": "backward (end)", "optimizer step": "optimizer step"}
# the library's kind for each measured layout; the remedy (ddp-view-keep) has no kind of its own: one copy in
# every phase is Megatron-Core's persistent buffer, grad_buffer=True
KIND = {"plain": False, "ddp-copy": "ddp-copy", "ddp-view": "ddp-view", "ddp-view-keep": True}

# a small untied Llama shape for the library's side (its head writes no second gradient: no tied copy)
SMALL = Model("ddp-copy-llama", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=8192,
              gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=256)


def _rows():
    with open(DATA / "grad_buffer_measurements.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_measured_parameters_by_hand():
    rows = _rows()
    assert MEASURED_PARAMS == 2_233_856
    assert {int(r["params"]) for r in rows} == {MEASURED_PARAMS}
    for r in rows:
        assert int(r["param_bytes"]) == MEASURED_PARAMS * DTYPE_BYTES[r["param_dtype"]]


def test_measurement_has_every_phase_by_hand():
    """Every (layout, accumulation, micro-batch) of the table above was measured in both dtypes and both
    steady-state steps, with the optimizer step's start among the phases."""
    seen = {(r["layout"], r["grad_accum"] == "2", int(r["micro_batch"]), r["phase"], r["param_dtype"],
             r["step"]) for r in _rows()}
    for (layout, accum, micro), phases in BY_HAND.items():
        for phase in phases:
            for dtype in DTYPE_BYTES:
                for step in ("3", "4"):
                    assert (layout, accum, micro, phase, dtype, step) in seen


def test_measured_bytes_are_the_copies_by_hand():
    """The CSV's gradient bytes are the copies read off the reducer x parameters x the dtype's bytes; the
    bucket alone is one copy in every DDP row."""
    for r in _rows():
        copies = BY_HAND[r["layout"], r["grad_accum"] == "2", int(r["micro_batch"])][r["phase"]]
        one = MEASURED_PARAMS * DTYPE_BYTES[r["param_dtype"]]
        assert int(r["gradient_bytes"]) == copies * one, r
        assert int(r["bucket_bytes"]) == (0 if r["layout"] == "plain" else one)


@pytest.mark.parametrize("layout", ["plain", "ddp-copy", "ddp-view", "ddp-view-keep"])
@pytest.mark.parametrize("accum", [1, 2])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_model_holds_what_was_measured(layout, accum, dtype):
    """The library's gradient bytes in each phase, as whole copies of SMALL's gradients (its parameters x
    the recipe's gradient bytes), are the most copies the measured micro-batches of that phase held."""
    measured = {}
    for r in _rows():
        if r["layout"] == layout and r["grad_accum"] == str(accum) and r["param_dtype"] == dtype:
            ratio = int(r["gradient_bytes"]) / int(r["param_bytes"])
            measured[r["phase"]] = max(measured.get(r["phase"], 0), ratio)
    assert set(measured) == set(PIECES)
    t = training_memory(SMALL, batch=2, seq=256, precision=dtype, grad_accum=accum, grad_buffer=KIND[layout])
    one = SMALL.n_params * DTYPE_BYTES[dtype]
    for phase, piece in PIECES.items():
        assert t.pieces[piece]["gradients"] == pytest.approx(measured[phase] * one, rel=1e-12), (phase, piece)


def test_remedy_is_one_copy_in_every_phase_as_measured():
    """Chapter 7's exercise 4: gradient_as_bucket_view=True with zero_grad(set_to_none=False) holds the
    parameters x the dtype's bytes x 1 copy (the bucket, which .grad views) in every measured phase and
    micro-batch, accumulating or not (by hand: 2,233,856 x 4 = 8,935,424 B in fp32, x 2 = 4,467,712 B in
    bf16), where the default view (set_to_none=True) holds 2 copies at the second micro-batch's forward."""
    rows = [r for r in _rows() if r["layout"] == "ddp-view-keep"]
    assert len(rows) == 32         # 2 dtypes x 2 steps x (3 phases; 2 and 3 at the micro-batches of m = 2)
    one = {"fp32": 8_935_424, "bf16": 4_467_712}
    assert one == {d: MEASURED_PARAMS * b for d, b in DTYPE_BYTES.items()}
    for r in rows:
        assert int(r["gradient_bytes"]) == int(r["bucket_bytes"]) == one[r["param_dtype"]], r
        assert int(r["grad_only_bytes"]) == 0, r
    view = [r for r in _rows() if r["layout"] == "ddp-view" and r["grad_accum"] == "2"
            and r["micro_batch"] == "2" and r["phase"] == "forward peak"]
    assert view and all(int(r["gradient_bytes"]) == 2 * one[r["param_dtype"]] for r in view)
    # the library's kind for it: True (Megatron-Core's buffer) holds one copy in every phase
    assert grad_copies(True, 1) == grad_copies(True, 2) == (1, 0, 0, 0)


def test_grad_copies_by_hand():
    # (buffer, before the backward, the backward's end, the optimizer step)
    assert grad_copies(False, 1) == (0, 0, 1, 1) and grad_copies(False, 4) == (0, 1, 1, 1)
    assert grad_copies(True, 1) == grad_copies(True, 8) == (1, 0, 0, 0)
    assert grad_copies("ddp-view", 1) == (1, 0, 0, 0) and grad_copies("ddp-view", 2) == (1, 1, 1, 0)
    assert grad_copies("ddp-copy", 1) == (1, 0, 1, 1) and grad_copies("ddp-copy", 2) == (1, 1, 1, 1)
    assert GRAD_BUFFERS == (False, True, "ddp-view", "ddp-copy")


def test_a_numpy_string_kind_is_the_kind():
    # review29a: a kind read from a frame column is numpy.str_, which is a str; it was a TypeError
    import numpy as np

    kind = np.array(["ddp-copy"])[0]
    assert type(kind) is np.str_ and grad_copies(kind, 2) == (1, 1, 1, 1)
    assert type(check_grad_buffer_kind(kind)) is str
    with pytest.raises(ValueError, match="grad_buffer must be"):
        grad_copies(np.array(["copy"])[0])


@pytest.mark.parametrize("bad, err", [("copy", ValueError), ("DDP-COPY", ValueError), (None, TypeError),
                                      (1, TypeError), (2.0, TypeError)])
def test_bad_kinds_are_refused_naming_the_parameter(bad, err):
    with pytest.raises(err, match=r"grad_buffer must be True or False or one of 'ddp-view', 'ddp-copy'"):
        training_memory(SMALL, batch=1, seq=256, grad_buffer=bad)
    with pytest.raises(err, match="grad_buffer"):
        grad_copies(bad)


@pytest.mark.parametrize("kind", ["ddp-view", "ddp-copy"])
@pytest.mark.parametrize("zero", [2, 3])
def test_kinds_refused_where_gradients_are_sharded(kind, zero):
    with pytest.raises(ValueError, match=rf"grad_buffer='{kind}' needs parallel.zero <= 1"):
        training_memory(SMALL, batch=1, seq=256, parallel=Parallel(dp=2, zero=zero), grad_buffer=kind)


def test_copy_adds_one_gradient_copy_at_the_end_of_the_backward_and_in_the_step():
    """Against ``True`` (the buffer alone) the default DDP holds .grad too: + G at the backward's end and in
    the optimizer step, + the LM head's gradients at the backward's start (8192 x 256, the first written),
    nothing in the forward; under ZeRO-1 G is whole (the buckets and .grad are the full gradients)."""
    for par in (None, Parallel(dp=4, zero=1)):
        buf = training_memory(SMALL, batch=2, seq=256, parallel=par, grad_buffer=True).pieces_bytes
        cp = training_memory(SMALL, batch=2, seq=256, parallel=par, grad_buffer="ddp-copy").pieces_bytes
        g = SMALL.n_params * 2
        assert cp["forward"] == buf["forward"] and cp["loss backward"] == buf["loss backward"]
        assert cp["backward (start)"] - buf["backward (start)"] == pytest.approx(8192 * 256 * 2, rel=1e-12)
        for piece in ("backward (end)", "optimizer step"):
            assert cp[piece] - buf[piece] == pytest.approx(g, rel=1e-12)


def test_old_calls_are_unchanged_and_view_without_accumulation_is_the_buffer():
    """``True`` and ``False`` keep their meaning: ``"ddp-view"`` without accumulation is exactly ``True`` (DDP's
    .grad are views of the buckets), and ``False`` without a buffer matches the plain step's measured copies
    (test_model_holds_what_was_measured)."""
    # accumulating, the gradients were alive in every phase already: the buffer changes nothing (as before)
    on = training_memory(SMALL, batch=2, seq=256, grad_accum=2, grad_buffer=True)
    assert on.pieces_bytes == training_memory(SMALL, batch=2, seq=256, grad_accum=2).pieces_bytes
    view = training_memory(SMALL, batch=2, seq=256, grad_buffer="ddp-view")
    assert view.pieces_bytes == training_memory(SMALL, batch=2, seq=256, grad_buffer=True).pieces_bytes
    assert view.grad_buffer == "ddp-view"


def test_plan_with_the_copy_agrees_with_training_memory():
    import numpy as np

    from llmsizing.job import Job
    from llmsizing.planner import plan

    run = dict(tokens=1e11, gpus=("H100 SXM",), seq=4096, global_batch=256, max_gpus=128)
    buf = plan("llama-3-8b", **run, grad_buffer=True)
    df = plan("llama-3-8b", **run, grad_buffer="ddp-copy")
    assert "PyTorch DDP's default" in df.attrs["assumes"] and "PyTorch" not in buf.attrs["assumes"]
    assert len(df) <= len(buf) and (df["zero"] <= 1).any()
    for i in np.random.default_rng(3).choice(len(df), size=min(20, len(df)), replace=False):
        r = df.iloc[i]
        job = Job.from_plan_row(r, "llama-3-8b", seq=run["seq"], grad_buffer="ddp-copy")
        assert job.grad_buffer == ("ddp-copy" if r["zero"] <= 1 else False)
        assert training_memory(job).total_bytes == pytest.approx(r["memory_per_gpu_bytes"], rel=1e-9)


def test_a_mixture_of_experts_plan_with_the_view_agrees_with_training_memory():
    """The mixture-of-experts arrays (moe_prefetch) take the kind as the dense ones do: sampled rows of
    plan(grad_buffer="ddp-view"), accumulating ones among them, are their jobs' training_memory."""
    import numpy as np

    from llmsizing.job import Job
    from llmsizing.planner import plan

    run = dict(tokens=1e11, gpus=("H100 SXM",), seq=4096, global_batch=256, max_gpus=128)
    df = plan("mixtral-8x7b", **run, grad_buffer="ddp-view")
    assert ((df["zero"] <= 1) & (df["grad_accum"] > 1)).any()
    for i in np.random.default_rng(5).choice(len(df), size=min(15, len(df)), replace=False):
        r = df.iloc[i]
        job = Job.from_plan_row(r, "mixtral-8x7b", seq=run["seq"], grad_buffer="ddp-view")
        assert training_memory(job).total_bytes == pytest.approx(r["memory_per_gpu_bytes"], rel=1e-9)


def test_plan_with_the_copy_leaves_zero2_and_zero3_as_they_were():
    import pandas as pd

    from llmsizing.planner import plan

    run = dict(tokens=1e11, gpus=("H100 SXM",), seq=4096, global_batch=256, max_gpus=128, zero_stages=(2, 3))
    pd.testing.assert_frame_equal(plan("llama-3-8b", **run, grad_buffer="ddp-copy"), plan("llama-3-8b", **run))


def test_job_and_command_line_take_the_kind(capsys):
    import json

    from llmsizing import cli
    from llmsizing.job import Job

    job = Job("llama-3-8b", "H100 SXM", 4096, Parallel(dp=4, zero=1), grad_buffer="ddp-copy")
    assert job.kwargs("memory")["grad_buffer"] == "ddp-copy" == job.kwargs("plan")["grad_buffer"]
    argv = ["memory", "llama-3-8b", "--batch", "1", "--seq", "4096", "--dp", "4", "--zero", "1", "--json"]
    rows = {}
    for flag in ([], ["--grad-buffer"], ["--grad-buffer", "ddp-copy"]):
        assert cli.main(argv + flag) == 0
        rows[len(flag)] = {r["component"]: r["bytes"] for r in json.loads(capsys.readouterr().out)}
    assert rows[2]["total"] == pytest.approx(training_memory(job).total_bytes, rel=1e-12)
    # Llama-3-8B's parameters counted from its config (tests/test_job_grad_buffer.py): 8,030,261,248 x 2 B
    # more than without a buffer at the loss's peak (the bucket: no .grad yet), the same as the buffer alone
    assert rows[1]["peak"] - rows[0]["peak"] == pytest.approx(8_030_261_248 * 2, rel=1e-12)
    assert rows[2]["peak"] >= rows[1]["peak"]
    args = cli.parser().parse_args(["plan", "llama-3-8b", "--tokens", "1T", "--seq", "4096",
                                    "--global-batch", "256", "--grad-buffer", "ddp-view"])
    from llmsizing.cli_plan import _plan_layout_options
    assert _plan_layout_options(args)["grad_buffer"] == "ddp-view"
    assert cli.main(argv[:-1] + ["--grad-buffer", "ddp-copy"]) == 0
    assert "PyTorch DDP's default" in capsys.readouterr().out


@pytest.mark.parametrize("kind", GRAD_BUFFERS)
def test_the_planner_arrays_are_the_per_layout_path_for_every_kind(kind):
    """dense_arrays.search_pieces (the planner's arrays) gives each layout's pieces bit for bit as the
    per-layout path (plan_pricing._pieces, through footprint.phase_values) for every kind, accumulating or
    not, at every ZeRO stage (2 and 3: without the buffer)."""
    import numpy as np

    from llmsizing import dense_arrays, get_model
    from llmsizing.plan_pricing import _pieces

    model = get_model("llama-3-8b")
    kw = dict(seq=4096, precision="bf16-mixed", optimizer="adamw", attention="flash", stack="fused",
              optimizer_impl="foreach", recompute="selective", grad_buffer=kind)
    calls = [(tp, pp, zero, m, 1, "p2p", 1, 4, 1) for tp in (1, 2) for pp in (1, 2) for zero in (0, 1, 2, 3)
             for m in (1, 2, 8) if not (zero >= 2 and pp > 1)]
    got = dense_arrays.search_pieces(model, kw, calls)
    off = dense_arrays.search_pieces(model, {**kw, "grad_buffer": False}, calls)
    for call, g, o in zip(calls, got, off):
        tp, pp, zero, m, cp, comm, batch, dp, v = call
        want = _pieces(model, kw, tp, pp, zero, m, cp, comm, 1, False, batch=batch, dp=dp, v=v)
        assert np.array_equal(g, want), call
        if zero >= 2 or kind is False or (kind is True and m > 1):
            # ZeRO-2/3 free their gradients as before; Megatron's buffer holds what accumulation held already
            assert np.array_equal(g, o), call
        else:
            assert (g >= o).all() and (g > o).any(), call          # a buffer adds, never removes


def test_step_phases_names_a_bad_grad_buffer():
    """review29a: step_phases (public, re-exported by llmsizing.memory) read grad_copies' table unchecked, so
    a kind it does not know was a KeyError ('yes', False); it is the checked error naming the parameter."""
    from llmsizing import activation_memory, model_states
    from llmsizing.footprint import step_phases

    states = model_states("llama-3-8b", precision="bf16-mixed", optimizer="adamw")
    acts = activation_memory("llama-3-8b", batch=1, seq=1024)
    kw = dict(grad_accum=1, autocast_bytes=0.0, loss_bytes=0.0, optimizer_bytes=0.0, layer_working_bytes=0.0,
              head_grad_bytes=0.0)
    with pytest.raises(ValueError, match="grad_buffer must be"):
        step_phases(states, acts, **kw, grad_buffer="yes")
    with pytest.raises(TypeError, match="grad_buffer"):
        step_phases(states, acts, **kw, grad_buffer=2.5)
    # a checked kind prices as before: ddp-copy holds one more copy than True in the optimizer step
    one, two = (step_phases(states, acts, **kw, grad_buffer=k)["optimizer step"]["gradients"]
                for k in (True, "ddp-copy"))
    assert two == 2 * one == 2 * states.gradients_bytes
