"""The planner prices Megatron's backward TP overlap when the named stack does it (plan44, issue 34).

Megatron-LM's column-parallel Linear layers hide the backward's re-gathers behind their dgrad GEMMs and the
dgrad's reduce-scatter behind their wgrad GEMMs on their default path (``exposure.TP_BACKWARD_ASYNC``); the
calibration prices the 17 published runs marked ``tp_comm_overlap = backward`` with it. ``plan(framework=
"megatron")`` must price its rows the same way, an unnamed stack as before, and ``tp_backward_overlap``
says so explicitly. Expected values by hand from Nemotron-4 15B's published layout (Parmar et al. 2024,
Tables 1-2: TP8, SP, micro-batch 1, seq 4,096; see tests/test_tp_backward_overlap.py)."""

from __future__ import annotations

import warnings

import pytest

from llmsizing.frameworks import TP_BACKWARD_OVERLAP, tp_backward_overlap_of
from llmsizing.job import Job
from llmsizing.layouts import step_time
from llmsizing.parallel import Parallel
from llmsizing.planner import plan

MODEL = "nemotron-4-15b"
# 32 layers: 16 sequences of 4,096 tokens a step on up to 16 H100s (TP8 x DP2 among the plans)
KW = dict(gpus=("H100 SXM",), seq=4096, global_batch=16, tokens=1e9, micro_batches=(1,),
          recomputes=("none",), zero_stages=(1,), max_gpus=16, explain=False)


def _tp8(df):
    rows = df[(df.tp == 8) & (df.pp == 1) & (df.micro_batch == 1)]
    assert len(rows) >= 1, "the TP8 layout of Nemotron-4 15B must fit one node"
    return rows.iloc[0]


@pytest.fixture(scope="module")
def plans():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {k: plan(MODEL, **KW, **kw) for k, kw in
                (("none", {}), ("megatron", {"framework": "megatron"}),
                 ("megatron_off", {"framework": "megatron", "tp_backward_overlap": False}),
                 ("none_on", {"tp_backward_overlap": True}), ("torchtitan", {"framework": "torchtitan"}))}


def test_megatron_row_is_step_time_with_the_overlap_and_faster(plans):
    """The TP8 row with the Megatron stack named is step_time(..., tp_backward_overlap=True) of its layout
    (1e-9), and faster than the same row with no stack named by the hidden seconds: per micro-batch and
    layer, 2 of the backward's 4 SP all-gathers and both its reduce-scatters (4 of 10 equal SP calls),
    less what exceeds the QKV and MLP-up GEMMs' dgrad and wgrad windows."""
    on, off = _tp8(plans["megatron"]), _tp8(plans["none"])
    job = Job.from_plan_row(on, MODEL, seq=4096, framework="megatron")
    st_on = step_time(job)
    assert on.step_time_s == pytest.approx(st_on.step_s, rel=1e-9)
    base = dict(batch=1, seq=4096, grad_accum=int(on.grad_accum), recompute="none")
    explicit = step_time(MODEL, "H100 SXM", job.parallel, tp_backward_overlap=True, **base)
    plain = step_time(MODEL, "H100 SXM", job.parallel, **base)
    assert on.step_time_s == pytest.approx(explicit.step_s, rel=1e-9)
    assert off.step_time_s == pytest.approx(plain.step_s, rel=1e-9)
    # the hidden seconds, from the collectives by hand: 4 of the 10 SP calls of a layer and micro-batch
    sp = [c for c in plain.communication.collectives if c.collective.startswith("SP ")]
    assert len({round(c.time_s / c.calls, 15) for c in sp}) == 1        # equal calls (same message)
    one = sp[0].time_s / sp[0].calls
    calls = sum(c.calls for c in sp)
    hidden = 0.4 * calls * one
    dgrad, wgrad = 0.1 * calls * one, 0.3 * calls * one
    assert dgrad + wgrad == pytest.approx(hidden)
    assert off.step_time_s - on.step_time_s == pytest.approx(
        plain.exposed_by_group_s["tp"] - explicit.exposed_by_group_s["tp"], rel=1e-9)
    assert 0 < off.step_time_s - on.step_time_s <= hidden * (1 + 1e-12)


def test_explicit_keyword_wins_over_the_stack(plans):
    assert _tp8(plans["megatron_off"]).step_time_s == pytest.approx(_tp8(plans["none"]).step_time_s,
                                                                   rel=1e-12)
    assert _tp8(plans["none_on"]).step_time_s == pytest.approx(_tp8(plans["megatron"]).step_time_s,
                                                              rel=1e-12)
    assert _tp8(plans["torchtitan"]).step_time_s == pytest.approx(_tp8(plans["none"]).step_time_s,
                                                                 rel=1e-12)
    assert "column-parallel" in plans["megatron"].attrs["assumes"]
    assert "column-parallel" not in plans["none"].attrs["assumes"]


def test_stack_table_and_bad_input():
    assert TP_BACKWARD_OVERLAP == {"megatron": True, "deepspeed": False, "pytorch": False, "unknown": False}
    assert tp_backward_overlap_of("megatron-core") and tp_backward_overlap_of("NeMo")
    assert not tp_backward_overlap_of(None) and not tp_backward_overlap_of("megatron-deepspeed")
    assert tp_backward_overlap_of(None, True) and not tp_backward_overlap_of("megatron", False)
    with pytest.raises(TypeError, match="tp_backward_overlap"):
        plan(MODEL, **KW, framework="megatron", tp_backward_overlap="yes")
    with pytest.raises(ValueError, match="framework"):
        plan(MODEL, **KW, framework="megatorn")
    with pytest.raises(TypeError, match="tp_backward_overlap"):
        Job(MODEL, "H100 SXM", 4096, Parallel(tp=8), tp_backward_overlap=1)


def test_job_and_step_time_follow_the_stack():
    par = Parallel(tp=8, sp=True)
    kw = dict(batch=1, seq=4096, grad_accum=16)
    on = step_time(MODEL, "H100 SXM", par, tp_backward_overlap=True, **kw)
    off = step_time(MODEL, "H100 SXM", par, **kw)
    assert on.step_s < off.step_s
    assert step_time(MODEL, "H100 SXM", par, framework="megatron-lm", **kw).step_s == on.step_s
    assert step_time(MODEL, "H100 SXM", par, framework="fsdp", **kw).step_s == off.step_s
    assert step_time(MODEL, "H100 SXM", par, framework="megatron", tp_backward_overlap=False,
                     **kw).step_s == off.step_s
    job = Job(MODEL, "H100 SXM", 4096, par, micro_batch=1, grad_accum=16, framework="megatron")
    assert step_time(job).step_s == on.step_s
    assert step_time(job.replace(tp_backward_overlap=False)).step_s == off.step_s


def test_training_time_of_the_job_is_the_rows_days(plans):
    """training_time(job) of the Megatron row: its days (1e-9) and its steps' seconds are the plan's, so
    faster than the same layout with no stack named; training_time takes the keyword on a layout only."""
    from llmsizing.time_cost import training_time

    on, off = _tp8(plans["megatron"]), _tp8(plans["none"])
    job = Job.from_plan_row(on, MODEL, seq=4096, framework="megatron")
    t_on = training_time(job, tokens=1e9)
    t_off = training_time(Job.from_plan_row(off, MODEL, seq=4096), tokens=1e9)
    assert t_on.days == pytest.approx(on.days, rel=1e-9)
    assert t_off.days == pytest.approx(off.days, rel=1e-9)
    assert t_on.days < t_off.days
    assert t_on.days / t_off.days == pytest.approx(on.step_time_s / off.step_time_s, rel=1e-9)
    with pytest.raises(ValueError, match="tp_backward_overlap"):
        training_time(MODEL, tokens=1e9, gpu="H100 SXM", seq=4096, n_gpus=16, tp_backward_overlap=True)


def test_cli_plan_follows_the_stack_and_the_flag(capsys):
    import json

    from llmsizing import cli

    argv = ["plan", MODEL, "--tokens", "1B", "--seq", "4096", "--global-batch", "16", "--max-gpus", "16",
            "--all", "--top", "1000", "--json"]

    def fastest(extra):
        assert cli.main(argv + extra) == 0
        rows = json.loads(capsys.readouterr().out)
        return min(r["step_time_s"] for r in rows if r["tp"] == 8 and r["pp"] == 1 and r["micro_batch"] == 1)

    plain, meg = fastest([]), fastest(["--framework", "megatron-core"])
    assert meg < plain
    assert fastest(["--framework", "megatron-core", "--tp-backward-overlap", "off"]) == pytest.approx(plain,
                                                                                                    rel=1e-12)
    assert fastest(["--tp-backward-overlap", "on"]) == pytest.approx(meg, rel=1e-12)


@pytest.mark.parametrize("model, kw", [
    ("llama-3-70b", dict(gpus=("H100 SXM", "A100 80GB"), seq=8192, global_batch=512, max_gpus=512)),
    ("mixtral-8x7b", dict(gpus=("H100 SXM",), seq=4096, global_batch=256, max_gpus=256))])
def test_every_kind_of_row_is_its_step_time(model, kw):
    """Pipelines (interleaved, uneven), partial recomputation, two GPU types, a mixture of experts with ep:
    each sampled row of plan(framework="megatron") is step_time(job) of its own job at 1e-9, and the rows
    with tp > 1 are not all priced as with no stack named."""
    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = plan(model, tokens=1e12, framework="megatron", explain=False, **kw)
        rows = df.iloc[np.linspace(0, len(df) - 1, 40).astype(int)]
        assert (rows.tp > 1).sum() >= 20 and (rows.pp > 1).sum() >= 5
        moved = 0
        for _, r in rows.iterrows():
            job = Job.from_plan_row(r, model, seq=kw["seq"], framework="megatron")
            assert step_time(job).step_s == pytest.approx(r.step_time_s, rel=1e-9), r
            moved += r.tp > 1 and step_time(job.replace(framework=None)).step_s > r.step_time_s
        assert moved >= 20
