"""A Job's days from its own step (jobtime42, issue 35 "one answer per question").

``kernel_efficiency``, ``overlap`` and ``node`` are step_time's knobs. A Job that set them used to get its
step from step_time with them and its days from training_time without them. Here the days are worked by
hand from step_time's step: tokens / (global_batch x seq) optimizer steps of ``step_s`` seconds each. Each
knob also has to move the days, or the test could not tell the old path from the new one.
"""

import pytest

import llmsizing as L
from llmsizing.job import Job
from llmsizing.layouts import step_time

TOKENS, SEQ = 1e12, 4096
#: Kempner's node holds 4 H200s, so tp=8 crosses a node boundary and the node changes the dense step.
DENSE = Job("llama-3-8b", "H200", SEQ, L.Parallel(tp=8, dp=2, zero=1, sp=True), micro_batch=2, grad_accum=4)
MOE = Job("mixtral-8x7b", "H100 SXM", SEQ, L.Parallel(tp=2, dp=8, ep=8, sp=True), micro_batch=1, grad_accum=8)
KNOBS = {DENSE: [dict(kernel_efficiency=0.5), dict(overlap=0.3), dict(node="Kempner H200 node (4x H200)"),
                 dict(kernel_efficiency=0.5, overlap=0.0, node="Kempner H200 node (4x H200)")],
         MOE: [dict(kernel_efficiency=0.5), dict(overlap=0.3), dict(node="IBM H100 cluster node (800 Gb/s)"),
               dict(kernel_efficiency=0.5, overlap=0.3, node="IBM H100 cluster node (800 Gb/s)")]}
CASES = [(job, kw) for job, kws in KNOBS.items() for kw in kws]


def _hand_days(job):
    steps = TOKENS / (job.global_batch * job.seq)          # optimizer steps in the run
    return steps * step_time(job).step_s / 86400.0


@pytest.mark.parametrize("job, kw", CASES, ids=[f"{j.model.name}-{'+'.join(k)}" for j, k in CASES])
def test_a_jobs_days_are_its_steps(job, kw):
    knobbed = job.replace(**kw)
    days = L.training_time(knobbed, tokens=TOKENS).days
    assert days == pytest.approx(_hand_days(knobbed), rel=1e-9)
    # the knob reached the days: without the fix they were the plain job's
    assert abs(days / L.training_time(job, tokens=TOKENS).days - 1) > 1e-3


def test_a_plain_jobs_time_keywords_are_unchanged():
    assert not {"kernel_efficiency", "overlap", "node"} & set(DENSE.kwargs("time"))
    assert DENSE.replace(overlap=0.3).kwargs("time")["overlap"] == 0.3


@pytest.mark.parametrize("kw, match", [(dict(kernel_efficiency=1.5), "kernel_efficiency"),
                                       (dict(kernel_efficiency=0.0), "kernel_efficiency"),
                                       (dict(overlap=-0.1), "overlap"),
                                       (dict(overlap=float("nan")), "overlap"),
                                       (dict(node="no such node"), "no such node")])
def test_bad_knobs_are_refused_by_step_times_checks(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        L.training_time("llama-3-8b", tokens=TOKENS, gpu="H200", seq=SEQ, parallel=DENSE.parallel,
                        global_batch=DENSE.global_batch, micro_batch=2, **kw)


@pytest.mark.parametrize("kw", [dict(kernel_efficiency=0.5), dict(overlap=0.3), dict(node="DGX H100")])
def test_without_a_given_layouts_step_the_knobs_are_refused(kw):
    name = next(iter(kw))
    with pytest.raises(ValueError, match=f"{name}=.*global_batch= with parallel="):  # the calibrated MFU
        L.training_time("llama-3-8b", tokens=TOKENS, gpu="H100 SXM", seq=SEQ, n_gpus=8, **kw)
    with pytest.raises(ValueError, match=f"{name}=.*global_batch= with parallel="):  # a planned MoE layout
        L.training_time("mixtral-8x7b", tokens=TOKENS, gpu="H100 SXM", seq=SEQ, n_gpus=16, **kw)
