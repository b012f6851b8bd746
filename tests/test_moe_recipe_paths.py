"""The step recipe through every entry point (moeapi42, issue 35: "one MoE path"): ``schedule`` and
``comm_sms`` (DeepSeek-V3's DualPipe and 20 of 132 SMs), ``ep_overlap`` and ``max_nodes``, which only
``step_time`` took before, through ``training_time``, ``cost_by_gpu``, ``min_gpus``, the layout chosen for a
mixture of experts without one, :class:`~llmsizing.job.Job` and the CLI (``time``, ``cost``, ``plan``); and
bad values refused naming the parameter and its range.

Nothing is compared with a stored number: each answer is compared with the direct call it must equal (the
same step, days or plan rows), and each option is shown to move it. tests/test_moe_one_step.py compares the
steps of step_time, training_time and plan() on hand-written layouts; tests/test_fuzz.py draws the recipe.
"""

from __future__ import annotations

import json
import re

import pytest

import llmsizing as L
from llmsizing import cli
from llmsizing.fewest_gpus import min_gpus
from llmsizing.job import Job
from llmsizing.layouts import step_time
from llmsizing.moe_default import moe_default_layout
from llmsizing.time_cost import cost_by_gpu, training_time

#: Qwen3-30B-A3B (128 experts, top 8) on 64 H100s: its planned layouts carry expert parallelism and a
#: pipeline-free and a pipelined candidate, so every option moves the days (tests/test_dispatcher_paths.py).
M, GPU, SEQ, TOKENS, N = "qwen3-30b-a3b", "H100 SXM", 4096, 1e12, 64
RECIPE = dict(schedule="zb1p", comm_sms=20, ep_overlap=0.5)


def _cli(capsys, argv):
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_training_time_without_a_layout_plans_and_times_with_the_recipe():
    """training_time(n_gpus=) of a mixture of experts: its layout is plan()'s fastest on exactly that many
    GPUs, planned with the recipe (moe_default_layout), and the days are that layout's step with it."""
    t = training_time(M, tokens=TOKENS, gpu=GPU, seq=SEQ, n_gpus=N, **RECIPE)
    par, gb, micro = moe_default_layout(M, GPU, seq=SEQ, n_gpus=N, **RECIPE)
    assert par.gpus == N
    st = step_time(M, GPU, par, batch=micro, seq=SEQ, grad_accum=gb // (micro * par.dp), **RECIPE)
    assert t.days == pytest.approx(TOKENS / (gb * SEQ) * st.step_s / 86400, rel=1e-9)
    assert "schedule=zb1p" in " ".join(t.warnings) and "comm_sms=20" in " ".join(t.warnings)
    plain = training_time(M, tokens=TOKENS, gpu=GPU, seq=SEQ, n_gpus=N)
    assert plain.days != pytest.approx(t.days, rel=1e-6)
    # each one moves the days, but the schedule: the fastest layout on 64 GPUs has no pipeline (pipelined
    # rows under zero bubble: test_a_job_from_a_plan_row_reproduces_the_row_under_the_recipe)
    assert par.pp == 1
    for key in ("comm_sms", "ep_overlap"):
        one = {k: v for k, v in RECIPE.items() if k != key}
        assert training_time(M, tokens=TOKENS, gpu=GPU, seq=SEQ, n_gpus=N, **one).days \
            != pytest.approx(t.days, rel=1e-6), key


def test_cost_by_gpu_is_training_time_on_its_fewest_gpus_with_the_recipe():
    """cost_by_gpu's row: training_time on the row's GPU count with the same recipe (recompute "full", its
    default), the layout it names; a GPU whose SM count is not known gets fits False naming comm_sms."""
    df = cost_by_gpu(M, tokens=TOKENS, seq=SEQ, gpus=[GPU, "B200"], **RECIPE)
    row = df[df["gpu"] == GPU].iloc[0]
    t = training_time(M, tokens=TOKENS, gpu=GPU, seq=SEQ, n_gpus=int(row["min_gpus"]), recompute="full",
                      **RECIPE)
    assert row["gpu_hours"] == pytest.approx(t.gpu_hours, rel=1e-9)
    assert row["days_on_min_gpus"] == pytest.approx(t.days, rel=1e-9)
    base = cost_by_gpu(M, tokens=TOKENS, seq=SEQ, gpus=[GPU])
    assert base["gpu_hours"].iloc[0] != pytest.approx(row["gpu_hours"], rel=1e-6)
    b200 = df[df["gpu"] == "B200"].iloc[0]
    assert not b200["fits"] and "comm_sms=20" in b200["why"] and "SM count" in b200["why"]


def test_min_gpus_breaks_its_ties_with_the_recipe():
    """The fewest GPUs do not move (the recipe moves no bytes); the step of the layout chosen is step_time's
    with the recipe, pessimistic (no overlap), as min_gpus prices it."""
    kw = dict(batch=1, seq=SEQ, recompute="full")
    a, b = min_gpus(M, GPU, **kw), min_gpus(M, GPU, **kw, schedule="zb1p", comm_sms=20)
    assert a.gpus == b.gpus
    st = step_time(M, GPU, b.parallel, **kw, overlap=0.0, schedule="zb1p", comm_sms=20)
    assert b.step_s == pytest.approx(st.step_s, rel=1e-9)


def test_a_job_from_a_plan_row_reproduces_the_row_under_the_recipe():
    """Job.from_plan_row with the plan's recipe: step_time(job) and training_time(job) give the row."""
    df = L.plan(M, tokens=TOKENS, gpus=(GPU,), seq=SEQ, global_batch=256, max_gpus=N, ep_degrees=(8,),
                micro_batches=(1,), recomputes=("full",), zero_stages=(1,), **RECIPE)
    row = df[df["pp"] > 1].iloc[0]                        # (a pipelined row: the schedule matters)
    job = Job.from_plan_row(row, M, seq=SEQ, **RECIPE)
    assert (job.schedule, job.comm_sms, job.ep_overlap) == ("zb1p", 20, 0.5)
    assert step_time(job).step_s == pytest.approx(row["step_time_s"], rel=1e-9)
    assert training_time(job, tokens=TOKENS).days == pytest.approx(row["days"], rel=1e-9)
    assert L.plan(job, tokens=TOKENS, ep_degrees=(8,), micro_batches=(1,), recomputes=("full",),
                  zero_stages=(1,), max_gpus=N)["step_time_s"].tolist() == df["step_time_s"].tolist()


def test_an_old_job_passes_its_old_keywords():
    """A job at the defaults hands each answer the keywords it did before moeapi42 (no new ones)."""
    job = Job(M, GPU, SEQ, L.Parallel(dp=8, ep=8))
    for kind in ("step", "time", "plan"):
        assert not {"schedule", "comm_sms"} & set(job.kwargs(kind)), kind
    assert not {"ep_overlap", "max_nodes"} & set(job.kwargs("time"))


TIME_ARGV = ["time", M, "--tokens", "1T", "--seq", str(SEQ), "--gpu", GPU, "--gpus", str(N), "--json"]
FLAGS = ["--schedule", "zb1p", "--comm-sms", "20", "--ep-overlap", "0.5"]


def test_the_time_command_is_training_time_with_the_recipe(capsys):
    rc, out, err = _cli(capsys, TIME_ARGV + FLAGS)
    assert (rc, err) == (0, "")
    got = {r["case"]: r for r in json.loads(out)}["central"]
    t = training_time(M, tokens=TOKENS, gpu=GPU, seq=SEQ, n_gpus=N, recompute="none", **RECIPE)
    assert got["days"] == pytest.approx(t.days, rel=1e-9)
    rc, plain, _ = _cli(capsys, TIME_ARGV)
    assert rc == 0 and json.loads(plain) != json.loads(out)


def test_the_cost_command_is_cost_by_gpu_with_the_recipe(capsys):
    argv = ["cost", M, "--tokens", "1T", "--seq", str(SEQ), "--gpu", GPU, "--json"]
    rc, out, err = _cli(capsys, argv + FLAGS)
    assert (rc, err) == (0, "")
    df = cost_by_gpu(M, tokens=TOKENS, seq=SEQ, gpus=[GPU], **RECIPE)
    assert json.loads(out)[0]["gpu_hours"] == pytest.approx(df["gpu_hours"].iloc[0], rel=1e-9)


def test_the_plan_command_is_plan_with_the_recipe(capsys):
    argv = ["plan", M, "--tokens", "1T", "--seq", str(SEQ), "--global-batch", "256", "--gpu", GPU,
            "--max-gpus", str(N), "--ep", "8", "--all", "--json"]
    rc, out, err = _cli(capsys, argv + FLAGS)
    assert (rc, err) == (0, "")
    df = L.plan(M, tokens=TOKENS, gpus=(GPU,), seq=SEQ, global_batch=256, max_gpus=N, ep_degrees=(8,),
                **RECIPE).head(20)
    assert [r["step_time_s"] for r in json.loads(out)] == pytest.approx(list(df["step_time_s"]), rel=1e-9)


@pytest.mark.parametrize("extra, words", [
    (["--schedule", "gpipe"], "invalid choice: 'gpipe'"),   # (dualpipe offered since dmin49)
    (["--comm-sms", "-1"], "--comm-sms"),
    (["--comm-sms", "132"], "comm_sms=132 must be below H100 SXM's 132 SMs"),
    (["--ep-overlap", "1.5"], "--ep-overlap"),
    (["--comm-sms", "20", "--mfu", "0.4"], "not with stages=, mfu="),
])
def test_the_time_command_refuses_bad_recipes(capsys, extra, words):
    rc, out, err = _cli(capsys, TIME_ARGV + extra)
    assert rc == 2 and out == "" and words in err


H800 = "H800"
V2 = "deepseek-v2"
V2_PAR = L.Parallel(tp=2, sp=True, pp=4, dp=16, ep=8, zero=1)
LAYOUT = dict(tokens=TOKENS, gpu=H800, seq=SEQ, parallel=V2_PAR, global_batch=512)
PLAN = dict(tokens=TOKENS, gpus=(H800,), seq=SEQ, global_batch=512, max_gpus=128)


@pytest.mark.parametrize("call, error, words", [
    # schedule: one of three names, a string
    (lambda: training_time(V2, **LAYOUT, schedule="DualPipe"), ValueError, "unknown schedule 'DualPipe'"),
    (lambda: training_time(V2, **LAYOUT, schedule=None), TypeError, "schedule must be a string"),
    (lambda: L.plan(V2, **PLAN, schedule="zb"), ValueError, "unknown schedule"),
    (lambda: Job(V2, H800, SEQ, V2_PAR, schedule=1), TypeError, "schedule must be a string"),
    # comm_sms: an integer from 0 to below the GPU's SMs, on a GPU whose SMs are known
    (lambda: training_time(V2, **LAYOUT, comm_sms=-1), ValueError, "comm_sms must be an integer >= 0"),
    (lambda: training_time(V2, **LAYOUT, comm_sms=20.0), TypeError, "comm_sms must be an integer"),
    (lambda: training_time(V2, **LAYOUT, comm_sms=True), TypeError, "comm_sms must be an integer"),
    (lambda: training_time(V2, **LAYOUT, comm_sms=132), ValueError, "must be below H800's 132 SMs"),
    (lambda: L.plan(V2, **{**PLAN, "gpus": (H800, "B200")}, comm_sms=20), ValueError,
     "comm_sms=20: the SM count of 'B200' is not known"),
    (lambda: Job(V2, H800, SEQ, V2_PAR, comm_sms=2000), ValueError,
     "comm_sms must be an integer >= 0 and <="),
    (lambda: cost_by_gpu(V2, tokens=TOKENS, seq=SEQ, gpus=[H800], comm_sms="20"), TypeError,
     "comm_sms must be an integer"),
    # ep_overlap and max_nodes, now training_time's and cost_by_gpu's too
    (lambda: training_time(V2, **LAYOUT, ep_overlap=1.5), ValueError, "ep_overlap"),
    (lambda: training_time(V2, **LAYOUT, ep_overlap=float("nan")), ValueError, "ep_overlap"),
    (lambda: training_time(V2, **LAYOUT, max_nodes="all"), ValueError, "max_nodes='all'"),
    (lambda: cost_by_gpu(V2, tokens=TOKENS, seq=SEQ, gpus=[H800], max_nodes=0), ValueError, "max_nodes"),
    # where nothing would price them: an MFU, stages, a dense model's calibrated MFU
    (lambda: training_time(V2, tokens=TOKENS, gpu=H800, seq=SEQ, n_gpus=128, mfu=0.3, comm_sms=20),
     ValueError, "comm_sms=20 price a layout's step: not with stages=, mfu="),
    (lambda: training_time("llama-3-8b", tokens=TOKENS, gpu=H800, seq=SEQ, n_gpus=8, schedule="zb1p"),
     ValueError, "schedule='zb1p': no step to price them on"),
    (lambda: cost_by_gpu("llama-3-8b", tokens=TOKENS, seq=SEQ, gpus=[H800], comm_sms=20), ValueError,
     "comm_sms=20: cost_by_gpu prices a dense model at the calibrated MFU"),
    (lambda: cost_by_gpu(V2, tokens=TOKENS, seq=SEQ, gpus=[H800], ep_overlap=1.0, mfu=0.3), ValueError,
     "not with mfu="),
    # load_skew: 1 to 64, a mixture of experts', not with the capacity factor that sets it
    (lambda: training_time(V2, **LAYOUT, load_skew=0.9), ValueError, "load_skew must be"),
    (lambda: L.plan(V2, **PLAN, load_skew=1.2, capacity_factor=1.0), ValueError,
     "load_skew=1.2 with capacity_factor=1.0: the capacity sets the load skew"),
    (lambda: Job(V2, H800, SEQ, V2_PAR, load_skew="1.2"), TypeError, "load_skew must be"),
    (lambda: training_time("llama-3-8b", **{**LAYOUT, "parallel": L.Parallel(tp=2, sp=True, pp=4, dp=16)},
                           load_skew=1.2), ValueError, "llama-3-8b is dense"),
    # DualPipe's fewest GPUs without the micro-batches it needs (searched since dmin49:
    # tests/test_fewest_dualpipe.py), and zero bubble with interleaved chunks
    (lambda: min_gpus(V2, H800, batch=1, seq=SEQ, schedule="dualpipe"), ValueError,
     "schedule='dualpipe' needs an even grad_accum >= 2 pp >= 4"),
    (lambda: L.plan("llama-3-8b", **PLAN, schedule="zb1p", virtual_stages=(2,)), ValueError,
     "schedule='zb1p' has no interleaved chunks"),
    # a layout DualPipe cannot run: step_time's own refusal, through training_time
    (lambda: training_time(V2, **{**LAYOUT, "global_batch": 48}, schedule="dualpipe"), ValueError,
     "schedule='dualpipe' needs an even pp and an even number of micro-batches >= 2 pp"),
])
def test_bad_recipes_are_refused_naming_the_parameter(call, error, words):
    with pytest.raises(error, match=re.escape(words)):
        call()


def test_an_accounted_split_holds_the_layers_it_computes():
    """Megatron-LM's accounted split (``--account-for-embedding/loss-in-pipeline-split``) of Qwen3-235B's 94
    layers on 8 stages: (94 + 2) / 8 = 12 places a stage, the first and the last one layer fewer, 11, six 12s,
    11 (by hand). The memory's split of the parameters now holds those layers (it dropped the two flags and
    held 12, ..., 12, 11, 11 while the step computed 11, 12, ..., 12, 11); every layer is a MoE layer, so
    the first stage holds 11/12 of a middle stage's routed experts."""
    from llmsizing import moe
    from llmsizing.parallel import layers_per_stage

    m = L.get_model("qwen3-235b-a22b")
    par = L.Parallel(pp=8, dp=8, ep=8, account_for_embedding=True, account_for_loss=True)
    hand = (11, 12, 12, 12, 12, 12, 12, 11)
    assert tuple(layers_per_stage(m.layers, par)) == hand
    split = moe.stage_split(m, par)
    assert tuple(r["layers"] for r in split) == hand
    assert split[0]["experts"] / split[1]["experts"] == pytest.approx(11 / 12, rel=1e-12)
    assert split[-1]["experts"] == pytest.approx(split[0]["experts"], rel=1e-12)


def _accounted(r):
    return L.Parallel(tp=int(r.tp), pp=int(r.pp), dp=int(r.dp), zero=int(r.zero), sp=bool(r.sp), cp=int(r.cp),
                      ep=int(r.ep), account_for_embedding=True, account_for_loss=True)


@pytest.mark.parametrize("model, gpu, gb, opts, new_pps", [
    # 94 + 2 = 96: its divisors up to 94 that do not divide 94 (by hand)
    ("qwen3-235b-a22b", "H100 SXM", 512, {"ep_overlap": 0.5}, {3, 4, 6, 8, 12, 16, 24, 32, 48}),
    # 61 + 2 = 63: 3, 7, 9, 21 (63 > 61); its three dense layers on the first stage, MTP on the last
    ("deepseek-v3", "H800", 1920, {"precision": "fp8-deepseek", "mtp_depth": 1, "comm_sms": 20},
     {3, 7, 9, 21}),
])
def test_plan_searches_the_accounted_split_of_a_mixture_of_experts_when_asked(model, gpu, gb, opts, new_pps):
    """plan(accounted_split=True): the pp Megatron-LM's accounted split allows besides the divisors, each row
    the memory and step of ``Parallel(account_for_embedding=True, account_for_loss=True)`` at 1e-9 (sampled
    rows); the default search is as before (no such pp), and its rows are among the wider search's."""
    kw = dict(tokens=TOKENS, gpus=(gpu,), seq=SEQ, global_batch=gb, max_gpus=512, **opts)
    wide, plain = L.plan(model, **kw, accounted_split=True), L.plan(model, **kw)
    layers = L.get_model(model).layers
    assert set(plain["pp"]) <= {p for p in range(1, layers + 1) if layers % p == 0}
    new = wide[layers % wide["pp"] != 0]
    assert set(new["pp"]) == new_pps
    assert len(wide) == len(plain) + len(new)
    memory_kw = {k: v for k, v in opts.items() if k in ("precision", "mtp_depth")}
    for r in new.sample(8, random_state=0).itertuples():
        par = _accounted(r)
        mem = L.training_memory(model, batch=int(r.micro_batch), seq=SEQ, grad_accum=int(r.grad_accum),
                                recompute=r.recompute, parallel=par, **memory_kw)
        assert r.memory_per_gpu_bytes == pytest.approx(mem.total_bytes, rel=1e-9), par
        st = step_time(model, gpu, par, batch=int(r.micro_batch), seq=SEQ, grad_accum=int(r.grad_accum),
                       recompute=r.recompute, **opts)
        assert r.step_time_s == pytest.approx(st.step_s, rel=1e-9), par
        job = Job.from_plan_row(r, model, seq=SEQ, **opts)         # (accounted where pp does not divide)
        assert step_time(job).step_s == pytest.approx(st.step_s, rel=1e-9)
