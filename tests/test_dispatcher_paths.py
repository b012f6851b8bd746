"""The token dispatcher through every MoE path (issue 35: "one MoE path used by training_time, step_time,
plan, cost_by_gpu, the CLI and chapter 18"; moe28b). The same layout with ``dispatcher="deepep"`` gives the
same step through each entry point: ``step_time``, ``training_time(global_batch=)``, ``training_time`` on
the MoE step without a global batch, a ``plan`` row, a ``Job``, ``min_gpus``, ``cost_by_gpu`` and the
``plan``, ``cost`` and ``time`` commands. Relations only: no value here is copied from the library's
output. The case that moves: OLMoE-1B-7B (64 experts, top-8) at ep = 8 on one 8-GPU H100 node, where a
token reaches 8 (1 - C(56, 8) / C(64, 8)) = 5.43 GPUs, so DeepEP's one copy per GPU sends 5.43 / 8 of
Megatron-Core's alltoall bytes (tests/test_dispatcher.py derives it); the default stays byte for byte as
before.
"""

from __future__ import annotations

import json
from math import prod

import pytest

import llmsizing as L
from llmsizing import charts, cli
from llmsizing.fewest_gpus import min_gpus
from llmsizing.job import Job
from llmsizing.layouts import step_time
from llmsizing.moe_default import moe_default_layout
from llmsizing.time_cost import cost_by_gpu, training_time

M, GPU, SEQ, TOKENS, EPS = "olmoe-1b-7b", "H100 SXM", 4096, 1e12, (8,)
COST = dict(tokens=TOKENS, seq=SEQ, gpus=[GPU], ep_degrees=EPS)        # cost_by_gpu's, recompute="full"
ARGV = ["cost", M, "--tokens", "1T", "--seq", str(SEQ), "--gpu", GPU, "--ep", "8"]


@pytest.fixture(scope="module")
def rows():
    """cost_by_gpu's row for each dispatcher, and the layout, global batch and micro-batch its MoE step is
    timed on (moe_default_layout with the same options: the one chooser cost_by_gpu and training_time use)."""
    out = {}
    for d in ("alltoall", "deepep"):
        row = cost_by_gpu(M, **COST, dispatcher=d).iloc[0]
        assert row["fits"] and row["ep"] == 8
        chosen = moe_default_layout(M, GPU, seq=SEQ, n_gpus=int(row["min_gpus"]), recompute="full",
                                    ep_degrees=EPS, dispatcher=d)
        out[d] = row, chosen
    return out


def _step(par, gb, micro, dispatcher="deepep", **kw):
    return step_time(M, GPU, par, batch=micro, seq=SEQ, grad_accum=gb // (micro * par.dp), recompute="full",
                     dispatcher=dispatcher, **kw)


def test_the_case_moves_by_the_hand_count(rows):
    """The bytes of each all-to-all row scale by 5.43 / 8 (a relation: the hypergeometric by hand), so the
    deepep step is faster on the same layout; both dispatchers pick the same layout here."""
    d = 8 * (1 - prod(range(49, 57)) / prod(range(57, 65)))
    (par, gb, micro), (par0, gb0, micro0) = rows["deepep"][1], rows["alltoall"][1]
    assert (par, gb, micro) == (par0, gb0, micro0) and par.ep == 8
    deep, plain = _step(par, gb, micro), _step(par, gb, micro, "alltoall")
    a = [c for c in plain.communication.collectives if c.group == "ep"]
    b = [c for c in deep.communication.collectives if c.group == "ep"]
    assert a and len(a) == len(b)
    for x, y in zip(a, b):
        assert y.message_bytes == pytest.approx(x.message_bytes * d / 8, rel=1e-12)
    assert deep.step_s < plain.step_s
    assert rows["deepep"][0]["days_on_min_gpus"] < rows["alltoall"][0]["days_on_min_gpus"]


def test_every_entry_point_gives_the_same_deepep_step(rows):
    row, (par, gb, micro) = rows["deepep"]
    st = _step(par, gb, micro)
    # training_time on the layout's own step (global_batch=) and on the MoE step without one (n_gpus=)
    own = training_time(M, tokens=TOKENS, gpu=GPU, seq=SEQ, parallel=par, global_batch=gb, micro_batch=micro,
                        recompute="full", dispatcher="deepep")
    assert own.mfu == pytest.approx(st.mfu, rel=1e-12)
    planned = training_time(M, tokens=TOKENS, gpu=GPU, seq=SEQ, n_gpus=par.gpus, recompute="full",
                            dispatcher="deepep")
    # (training_time plans over every ep: its layout is moe_default_layout's without ep_degrees)
    par2, gb2, micro2 = moe_default_layout(M, GPU, seq=SEQ, n_gpus=par.gpus, recompute="full",
                                           dispatcher="deepep")
    on2 = training_time(M, tokens=TOKENS, gpu=GPU, seq=SEQ, parallel=par2, global_batch=gb2,
                        micro_batch=micro2, recompute="full", dispatcher="deepep")
    assert planned.days == pytest.approx(on2.days, rel=1e-12)
    assert "deepep dispatcher" in " ".join(planned.warnings)
    # cost_by_gpu's row is that run
    assert row["days_on_min_gpus"] == pytest.approx(own.days, rel=1e-12)
    assert row["gpu_hours"] == pytest.approx(own.gpu_hours, rel=1e-12)
    assert "deepep dispatcher" in row["warnings"]
    # a Job of that layout
    job = Job(M, GPU, SEQ, par, micro_batch=micro, grad_accum=gb // (micro * par.dp), recompute="full",
              dispatcher="deepep")
    assert step_time(job).step_s == pytest.approx(st.step_s, rel=1e-12)
    assert training_time(job, tokens=TOKENS).days == pytest.approx(own.days, rel=1e-12)
    # the plan row of that layout (the planner's own pricing: to 1e-6, as tests/test_job.py holds it)
    df = L.plan(M, tokens=TOKENS, gpus=(GPU,), seq=SEQ, global_batch=gb, max_gpus=par.gpus,
                recomputes=("full",), ep_degrees=EPS, dispatcher="deepep")
    hit = df[(df["n_gpus"] == par.gpus) & (df["tp"] == par.tp) & (df["pp"] == par.pp) & (df["ep"] == par.ep)
             & (df["zero"] == par.zero) & (df["micro_batch"] == micro)]
    assert len(hit) == 1
    assert hit["step_time_s"].iloc[0] == pytest.approx(st.step_s, rel=1e-6)
    assert hit["days"].iloc[0] == pytest.approx(own.days, rel=1e-6)
    from_row = Job.from_plan_row(hit.iloc[0], M, seq=SEQ, dispatcher="deepep")
    assert step_time(from_row).step_s == pytest.approx(hit["step_time_s"].iloc[0], rel=1e-6)


def test_min_gpus_breaks_ties_on_the_deepep_step():
    """The fewest GPUs are set by memory, which no dispatcher moves; the step that breaks ties is
    step_time(overlap=0) with the dispatcher."""
    kw = dict(batch=1, seq=SEQ, recompute="full", ep_degrees=EPS)
    deep, plain = min_gpus(M, GPU, dispatcher="deepep", **kw), min_gpus(M, GPU, **kw)
    assert deep.gpus == plain.gpus and deep.total_bytes == plain.total_bytes
    st = step_time(M, GPU, deep.parallel, batch=1, seq=SEQ, recompute="full", overlap=0.0,
                   dispatcher="deepep")
    assert deep.step_s == pytest.approx(st.step_s, rel=1e-12)
    assert deep.step_s < plain.step_s


def test_the_default_is_unchanged():
    """dispatcher="alltoall" given or left out: the same frame and the same layout, bit for bit."""
    import pandas as pd

    pd.testing.assert_frame_equal(cost_by_gpu(M, **COST), cost_by_gpu(M, **COST, dispatcher="alltoall"))
    kw = dict(batch=1, seq=SEQ, recompute="full", ep_degrees=EPS)
    assert min_gpus(M, GPU, **kw) == min_gpus(M, GPU, dispatcher="alltoall", **kw)
    assert (moe_default_layout(M, GPU, seq=SEQ, n_gpus=8, recompute="full") ==
            moe_default_layout(M, GPU, seq=SEQ, n_gpus=8, recompute="full", dispatcher="alltoall"))


def _cli(capsys, argv):
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_cost_command_is_cost_by_gpu_with_the_dispatcher(rows, capsys):
    rc, out, err = _cli(capsys, ARGV + ["--dispatcher", "deepep", "--json"])
    assert (rc, err) == (0, "")
    got = json.loads(out)[0]
    assert got["days_on_min_gpus"] == pytest.approx(rows["deepep"][0]["days_on_min_gpus"], rel=1e-9)
    assert got["layout"] == rows["deepep"][0]["layout"]
    rc, text, _ = _cli(capsys, ARGV + ["--dispatcher", "deepep"])
    assert rc == 0 and text.splitlines()[0].endswith("cheapest first; with --dispatcher deepep):")
    # the default: no flag and --dispatcher alltoall print the same, and the title as before
    rc, plain, _ = _cli(capsys, ARGV)
    rc2, named, _ = _cli(capsys, ARGV + ["--dispatcher", "alltoall"])
    assert rc == rc2 == 0 and plain.splitlines()[1:] == named.splitlines()[1:]
    assert plain.splitlines()[0].endswith("(its fewest GPUs; cheapest first):")


def test_the_plan_command_is_plan_with_the_dispatcher(capsys):
    argv = ["plan", M, "--tokens", "1T", "--seq", str(SEQ), "--global-batch", "256", "--gpu", GPU,
            "--max-gpus", "16", "--ep", "8", "--all", "--json"]
    rc, out, err = _cli(capsys, argv + ["--dispatcher", "deepep"])
    assert (rc, err) == (0, "")
    got = json.loads(out)
    df = L.plan(M, tokens=1e12, gpus=(GPU,), seq=SEQ, global_batch=256, max_gpus=16, ep_degrees=EPS,
                dispatcher="deepep").head(20)
    # (JSON keeps 10 significant digits)
    assert [r["step_time_s"] for r in got] == pytest.approx(list(df["step_time_s"]), rel=1e-9)
    rc, out0, _ = _cli(capsys, argv)
    base = json.loads(out0)
    assert rc == 0 and len(base) == len(got) and base != got


def test_the_choices_come_from_the_table(capsys):
    from llmsizing.all_to_all import DISPATCHERS

    for command in (ARGV, ["plan", M]):
        rc, _, err = _cli(capsys, command + ["--dispatcher", "flex"])
        assert rc == 2 and "invalid choice: 'flex'" in err
        assert all(repr(k) in err for k in DISPATCHERS)


@pytest.mark.parametrize("call, words", [
    (lambda: min_gpus(M, GPU, batch=1, seq=SEQ, dispatcher="flex"), "dispatcher must be one of"),
    (lambda: cost_by_gpu(M, **COST, dispatcher=None), "dispatcher must be one of"),
    (lambda: cost_by_gpu(M, **COST, dispatcher="deepep", mfu=0.3), "not with mfu="),
    (lambda: moe_default_layout(M, GPU, seq=SEQ, dispatcher="nccl"), "dispatcher must be one of"),
    (lambda: training_time(M, tokens=TOKENS, gpu=GPU, seq=SEQ, n_gpus=8, mfu=0.3, dispatcher="deepep"),
     "not with stages=, mfu="),
    (lambda: training_time("llama-3-8b", tokens=TOKENS, gpu=GPU, seq=SEQ, n_gpus=8, dispatcher="deepep"),
     "no MoE step"),
    (lambda: charts.render_moe_layout(dispatcher="flex"), "dispatcher must be one of"),
])
def test_bad_input_is_refused_naming_the_parameter(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_the_cost_command_refuses_the_dispatcher_with_an_mfu(capsys):
    rc, out, err = _cli(capsys, ARGV + ["--dispatcher", "deepep", "--mfu", "0.4"])
    assert rc == 2 and out == "" and "--dispatcher deepep: not with --mfu" in err


def test_a_planned_stage_takes_the_dispatcher_as_a_single_plan_does(capsys):
    """`plan --stage` takes the layout flags as a single plan does (issue 33 #2): its stage is the fastest
    row of plan(dispatcher="deepep") on at most --max-gpus GPUs."""
    argv = ["plan", M, "--gpu", GPU, "--max-gpus", "16", "--ep", "8", "--json", "--stage", "100B:4096:256"]
    rc, out, err = _cli(capsys, argv + ["--dispatcher", "deepep"])
    assert (rc, err) == (0, "")
    row = L.plan(M, tokens=100e9, gpus=(GPU,), seq=SEQ, global_batch=256, max_gpus=16, ep_degrees=EPS,
                 dispatcher="deepep").sort_values(["days", "cost_usd"]).iloc[0]
    assert json.loads(out)[0]["days"] == pytest.approx(row["days"], rel=1e-9)
    rc, out0, _ = _cli(capsys, argv)
    assert rc == 0 and json.loads(out0)[0]["days"] > json.loads(out)[0]["days"]


# `llmsizing time --dispatcher` (ui28): training_time on the MoE step without a global batch, as `cost` is
# cost_by_gpu. Qwen3-30B-A3B (128 experts, top-8) on 64 H100s: its planned layouts carry expert parallelism,
# so the flag moves the days (OLMoE's on 8 GPUs plans no EP: nothing to dispatch there).
TIME_M, TIME_N = "qwen3-30b-a3b", 64
TIME_ARGV = ["time", TIME_M, "--tokens", "1T", "--seq", str(SEQ), "--gpu", GPU, "--gpus", str(TIME_N)]


def test_the_time_command_is_training_time_with_the_dispatcher(capsys):
    kw = dict(tokens=TOKENS, gpu=GPU, seq=SEQ, n_gpus=TIME_N, recompute="none")     # (time's default: none)
    deep, plain = (training_time(TIME_M, **kw, dispatcher=d) for d in ("deepep", "alltoall"))
    assert deep.days != plain.days and "deepep dispatcher" in " ".join(deep.warnings)
    rc, out, err = _cli(capsys, TIME_ARGV + ["--dispatcher", "deepep", "--json"])
    assert (rc, err) == (0, "")
    got = {r["case"]: r for r in json.loads(out)}
    assert got["central"]["days"] == pytest.approx(deep.days, rel=1e-9)
    assert got["central"]["gpu_hours"] == pytest.approx(deep.gpu_hours, rel=1e-9)
    # the default: no flag and --dispatcher alltoall print the same, and that is training_time's default
    rc, none_given, _ = _cli(capsys, TIME_ARGV + ["--json"])
    rc2, named, _ = _cli(capsys, TIME_ARGV + ["--dispatcher", "alltoall", "--json"])
    assert rc == rc2 == 0 and none_given == named
    assert {r["case"]: r for r in json.loads(named)}["central"]["days"] == pytest.approx(plain.days, rel=1e-9)


def test_the_time_command_takes_the_choices_from_the_table(capsys):
    from llmsizing.all_to_all import DISPATCHERS

    rc, _, err = _cli(capsys, TIME_ARGV + ["--dispatcher", "flex"])
    assert rc == 2 and "invalid choice: 'flex'" in err and all(repr(k) in err for k in DISPATCHERS)
    rc, out, _ = _cli(capsys, ["time", "--help"])
    assert rc == 0 and "--dispatcher" in out


@pytest.mark.parametrize("extra, words", [
    (["--dispatcher", "deepep", "--mfu", "0.4"], "--dispatcher deepep: not with --mfu "),
    (["--dispatcher", "deepep", "--mfu-range", "0.2", "0.4"], "--dispatcher deepep: not with --mfu-range "),
])
def test_the_time_command_refuses_the_dispatcher_at_an_mfu(capsys, extra, words):
    rc, out, err = _cli(capsys, TIME_ARGV + extra)
    assert rc == 2 and out == "" and words in err


@pytest.mark.parametrize("command", [
    ["time", "llama-3-8b", "--tokens", "1T", "--seq", str(SEQ), "--gpu", GPU, "--gpus", "8"],
    ["cost", "llama-3-8b", "--tokens", "1T", "--seq", str(SEQ), "--gpu", GPU],
])
@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep"])
def test_a_dense_model_refuses_the_dispatcher(capsys, command, dispatcher):
    """A dense model has no all-to-all: `cost` used to echo the flag in its title and change nothing."""
    rc, out, err = _cli(capsys, command + ["--dispatcher", dispatcher])
    assert rc == 2 and out == "" and f"--dispatcher {dispatcher}: llama-3-8b is dense" in err


def test_the_time_command_refuses_the_dispatcher_with_stages(capsys):
    """training_time prices no dispatcher on stages; `plan --stage` does (each stage's planned layout)."""
    rc, out, err = _cli(capsys, ["time", M, "--stage", "1T:4096", "--gpu", GPU, "--gpus", "8",
                                 "--dispatcher", "deepep"])
    assert rc == 2 and out == "" and "--dispatcher deepep prices one run's MoE step" in err
