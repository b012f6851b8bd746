"""A persistent gradient buffer carried through the job spec and the command line (issue 38, grad28b).

``Job(..., grad_buffer=True)`` prices its memory and plan with ``grad_buffer=True``; ``Job.from_plan_row`` turns a
row of ``plan(..., grad_buffer=True)`` back into its job (the buffer only where the row's ZeRO stage is 0 or 1, as
the planner applies it); ``llmsizing memory --grad-buffer`` and ``llmsizing plan --grad-buffer`` ask the same.

The expected bytes are counted by hand from Llama 3 8B's config.json (hidden 4096, 32 layers, 32 query heads and
8 KV heads of 128, MLP 14336, vocabulary 128256, untied head): the buffer is every parameter's gradient, 2 bytes
each in bf16 (Megatron-Core ``param_and_grad_buffer.py``: ``grad_data`` of the whole chunk, also under ZeRO-1).
"""

import json

import pytest

import llmsizing as L
from llmsizing import cli
from llmsizing.job import Job
from llmsizing.planner import plan

HIDDEN, KV, FFN, VOCAB, LAYERS = 4096, 8 * 128, 14336, 128256, 32
PER_LAYER = 2 * HIDDEN * HIDDEN + 2 * HIDDEN * KV + 3 * HIDDEN * FFN + 2 * HIDDEN   # q, o; k, v; MLP; 2 norms
N_8B = LAYERS * PER_LAYER + 2 * VOCAB * HIDDEN + HIDDEN                            # + embedding, head, norm
SEQ = 4096


def test_hand_count_is_the_catalogue():
    assert N_8B == 8_030_261_248 == L.get_model("llama-3-8b").n_params


def test_a_job_with_the_buffer_holds_every_gradient_in_the_forward():
    """ZeRO-1 keeps the buffer whole: the forward and the loss's backward hold 2 bytes per parameter more, the
    end of the backward and the optimizer step held them already."""
    job = Job("llama-3-8b", "H100 SXM", SEQ, L.Parallel(dp=4, zero=1), grad_buffer=True)
    on, off = L.training_memory(job).pieces_bytes, L.training_memory(job.replace(grad_buffer=False)).pieces_bytes
    for piece in ("forward", "loss backward"):
        assert on[piece] - off[piece] == pytest.approx(2 * N_8B, rel=1e-12)
    for piece in ("backward (end)", "optimizer step"):
        assert on[piece] == off[piece]
    # the job is the keyword call
    direct = L.training_memory("llama-3-8b", batch=1, seq=SEQ, parallel=L.Parallel(dp=4, zero=1), grad_buffer=True)
    assert L.training_memory(job).total_bytes == direct.total_bytes


def test_old_jobs_pass_the_same_keywords():
    job = Job("llama-3-8b", "H100 SXM", SEQ, L.Parallel(dp=4, zero=1))
    assert job.grad_buffer is False
    assert all("grad_buffer" not in job.kwargs(k) for k in ("memory", "step", "time", "plan"))
    on = job.replace(grad_buffer=True)
    assert on.kwargs("memory")["grad_buffer"] is True and on.kwargs("plan")["grad_buffer"] is True
    assert "grad_buffer" not in on.kwargs("step") and "grad_buffer" not in on.kwargs("time")   # no memory there


@pytest.mark.parametrize("kw, err, match", [
    (dict(parallel=L.Parallel(dp=4, zero=2), grad_buffer=True), ValueError, "grad_buffer=True needs parallel.zero"),
    (dict(parallel=L.Parallel(dp=4, zero=3), grad_buffer=True), ValueError, "got zero=3"),
    (dict(grad_buffer=1), TypeError, "grad_buffer must be True or False"),
    (dict(grad_buffer="yes"), ValueError, "grad_buffer must be True or False or one of 'ddp-view'"),
    (dict(grad_buffer=None), TypeError, "grad_buffer must be True or False"),
])
def test_a_bad_buffer_is_refused_when_the_job_is_made(kw, err, match):
    with pytest.raises(err, match=match):
        Job("llama-3-8b", "H100 SXM", SEQ, **kw)


def test_plan_rows_with_the_buffer_reproduce_through_the_job_spec():
    df = plan("llama-3-8b", tokens=1e12, gpus=("H100 SXM",), seq=SEQ, global_batch=128, max_gpus=64,
              grad_buffer=True)
    assert (df["zero"] <= 1).any() and (df["zero"] >= 2).any()
    for r in df.sample(min(30, len(df)), random_state=0).itertuples():
        job = Job.from_plan_row(r, "llama-3-8b", seq=SEQ, grad_buffer=True)
        assert job.grad_buffer == (r.zero <= 1)                 # as the planner applies it
        assert L.training_memory(job).total_bytes == pytest.approx(r.memory_per_gpu_bytes, rel=1e-6), r
        assert L.step_time(job).step_s == pytest.approx(r.step_time_s, rel=1e-6), r
    # the buffer moved the memory of a DDP/ZeRO-1 row without accumulation (with it, the gradients of the first
    # micro-batch are alive in the later ones' forwards anyway), and from_plan_row without it leaves it out
    r = df[(df["zero"] <= 1) & (df["grad_accum"] == 1)].iloc[0]
    job = Job.from_plan_row(r, "llama-3-8b", seq=SEQ)
    assert job.grad_buffer is False
    assert L.training_memory(job).total_bytes < r["memory_per_gpu_bytes"]
    with pytest.raises(ValueError, match="grad_buffer"):
        Job.from_plan_row(r, "llama-3-8b", seq=SEQ, grad_buffer="on")
    with pytest.raises(TypeError, match="grad_buffer"):
        Job.from_plan_row(r, "llama-3-8b", seq=SEQ, grad_buffer=1)


# ----------------------------------------------------------------------------- the command line
_MEMORY = ["memory", "llama-3-8b", "--batch", "1", "--seq", str(SEQ), "--dp", "4", "--zero", "1"]


def _json(capsys, argv):
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_memory_grad_buffer_is_the_library(capsys):
    rows = {r["component"]: r["bytes"] for r in _json(capsys, _MEMORY + ["--grad-buffer", "--json"])}
    lib = L.training_memory("llama-3-8b", batch=1, seq=SEQ, parallel=L.Parallel(dp=4, zero=1), grad_buffer=True)
    assert rows["total"] == pytest.approx(lib.total_bytes, rel=1e-12)
    off = {r["component"]: r["bytes"] for r in _json(capsys, _MEMORY + ["--json"])}
    # the peak (the loss's backward, before any gradient of this step) holds the buffer: 2 bytes a parameter more
    assert rows["peak"] - off["peak"] == pytest.approx(2 * N_8B, rel=1e-12)
    assert cli.main(_MEMORY + ["--grad-buffer"]) == 0
    assert "gradients in a persistent buffer" in capsys.readouterr().out
    assert cli.main(_MEMORY) == 0
    assert "persistent buffer" not in capsys.readouterr().out


@pytest.mark.parametrize("zero", ["2", "3"])
def test_memory_grad_buffer_with_zero_2_or_3_exits_2_naming_it(zero, capsys):
    argv = ["memory", "llama-3-8b", "--batch", "1", "--seq", str(SEQ), "--dp", "4", "--zero", zero, "--grad-buffer"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "--grad-buffer needs --zero 0 or 1" in err and f"got --zero {zero}" in err and "Traceback" not in err


def test_plan_grad_buffer_is_the_planner(capsys):
    argv = ["plan", "llama-3-8b", "--tokens", "100B", "--seq", str(SEQ), "--global-batch", "128", "--max-gpus", "64",
            "--all", "--top", "100000"]
    rows = _json(capsys, argv + ["--grad-buffer", "--json"])
    df = plan("llama-3-8b", tokens=100e9, gpus=("H100 SXM",), seq=SEQ, global_batch=128, max_gpus=64,
              grad_buffer=True)
    assert [(r["n_gpus"], r["zero"], r["memory_per_gpu_bytes"]) for r in rows] == list(
        zip(df["n_gpus"], df["zero"], df["memory_per_gpu_bytes"]))
    key = ("n_gpus", "tp", "pp", "virtual_stages", "dp", "zero", "micro_batch", "recompute")
    off = {tuple(r[k] for k in key): r for r in _json(capsys, argv + ["--json"])}
    # a DDP/ZeRO-1 row without accumulation holds more with the buffer; a ZeRO-2/3 row is unchanged, and so is
    # an accumulating one (its later micro-batches' forwards hold the gradients anyway)
    grew = 0
    for r in rows:
        twin = off.get(tuple(r[k] for k in key))
        if twin is not None and twin["recompute_layers"] == r["recompute_layers"]:
            if r["zero"] >= 2 or r["grad_accum"] > 1:
                assert r["memory_per_gpu_bytes"] == pytest.approx(twin["memory_per_gpu_bytes"], rel=1e-12)
            else:
                assert r["memory_per_gpu_bytes"] > twin["memory_per_gpu_bytes"]
                grew += 1
    assert grew > 0
    assert cli.main(argv[:-2] + ["--top", "1", "--grad-buffer"]) == 0
    assert "a persistent gradient buffer (DDP, ZeRO-1)" in capsys.readouterr().out


def test_plan_stage_takes_the_grad_buffer_as_a_single_plan_does():
    from llmsizing.cli_plan import _plan_layout_options

    args = cli.parser().parse_args(["plan", "llama-3-8b", "--stage", "100B:4096:128", "--grad-buffer"])
    assert _plan_layout_options(args)["grad_buffer"] is True
    args = cli.parser().parse_args(["plan", "llama-3-8b", "--stage", "100B:4096:128"])
    assert "grad_buffer" not in _plan_layout_options(args)


def test_a_bare_grad_buffer_flag_before_the_model_still_means_true(capsys):
    """review29a: before ddp29 ``--grad-buffer`` took no value, so ``memory --grad-buffer llama-3-8b ...`` was
    a valid call; with ``--grad-buffer [KIND]`` argparse read the model as a bad KIND (exit 2). The old call
    gives the flag-after-the-model's rows again; a KIND before the model, and a bad one, are read as KINDs."""
    after = _json(capsys, _MEMORY + ["--grad-buffer", "--json"])
    before = _json(capsys, ["memory", "--grad-buffer", *_MEMORY[1:], "--json"])
    assert before == after
    kind = _json(capsys, ["memory", "--grad-buffer", "ddp-copy", *_MEMORY[1:], "--json"])
    assert kind == _json(capsys, _MEMORY + ["--grad-buffer", "ddp-copy", "--json"])
    parse = cli.parser().parse_args
    assert parse(cli.grad_buffer_argv(["memory", "--grad-buffer", "ddp-copy", *_MEMORY[1:]])).grad_buffer \
        == "ddp-copy"
    assert parse(cli.grad_buffer_argv(["memory", "--grad-buffer", *_MEMORY[1:]])).grad_buffer is True
    assert cli.main(["memory", "--grad-buffer", "ddp-cpy", *_MEMORY[1:]]) == 2
    assert "invalid choice: 'ddp-cpy'" in capsys.readouterr().err
    assert cli.grad_buffer_argv(["plan", "--grad-buffer", "llama-3-8b", "--", "--grad-buffer", "x"]) == \
        ["plan", "llama-3-8b", "--grad-buffer", "--", "--grad-buffer", "x"]
