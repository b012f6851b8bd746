"""One question, one answer (range44, issue 34): a plan row that names a stack and training_time of the job
it prices state the same range.

plan(framework=...) puts its days, GPU-hours and cost ends at the stack family's training-layout range
(data/intervals.csv, group "stack:<family>:<generation>"); training_time(Job.from_plan_row(row, ...,
framework=...)) stated the pooled range's ends before. The ends here are worked by hand from the csv row (read
with csv): a time at an MFU whose range is (low, high) runs from time / high to time / low.
"""

import csv
import pathlib

import pytest

import llmsizing as L
from llmsizing.job import Job
from llmsizing.layouts import step_time
from llmsizing.parallel import Parallel
from llmsizing.time_cost import training_time

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "intervals.csv"
MODEL, SEQ, TOKENS = "llama-3-8b", 4096, 1e12


def _csv_factors(group: str) -> tuple[float, float]:
    with open(DATA, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["area"] == "training-layout" and r["group"] == group]
    assert len(rows) == 1 and rows[0]["low"] and rows[0]["high"], group
    return float(rows[0]["low"]), float(rows[0]["high"])


def _rows(gpu, framework):
    df = L.plan(MODEL, tokens=TOKENS, gpus=(gpu,), seq=SEQ, global_batch=256, max_gpus=64, framework=framework)
    # the fastest rows and some with TP (where Megatron's stack also hides the backward's TP collectives)
    return df, [df.iloc[0], df[df["tp"] > 1].iloc[0]]


@pytest.mark.parametrize("framework, gpu, group", [("megatron", "H100 SXM", "stack:megatron:hopper"),
                                                   ("pytorch", "A100 80GB", "stack:pytorch:ampere")])
def test_job_of_a_stack_row_states_the_rows_range(framework, gpu, group):
    low, high = _csv_factors(group)
    plain = _csv_factors("bf16")                    # the range with no stack named (H100 and A100, BF16)
    assert abs(low - plain[0]) > 0.01 and abs(high - plain[1]) > 0.01    # (else the test could not fail)
    df, rows = _rows(gpu, framework)
    assert df.attrs["range_rows"] == {gpu: group}
    for r in rows:
        job = Job.from_plan_row(r, MODEL, seq=SEQ, framework=framework)
        t = training_time(job, tokens=TOKENS)
        assert t.days == pytest.approx(r.days, rel=1e-9)
        for end in ("days_low", "days_high", "cost_usd_low", "cost_usd_high"):
            assert getattr(t, end) == pytest.approx(r[end], rel=1e-9), end
        # by hand from the csv row: the fast end at mfu x high, the slow end at mfu x low
        assert t.days_low == pytest.approx(t.days / high, rel=1e-9)
        assert t.days_high == pytest.approx(t.days / low, rel=1e-9)
        assert t.gpu_hours_low == pytest.approx(t.gpu_hours / high, rel=1e-9)
        assert t.cost_usd_high == pytest.approx(t.cost_usd / low, rel=1e-9)
        assert (t.mfu_low, t.mfu_high) == pytest.approx((t.mfu * low, t.mfu * high), rel=1e-9)
        st = step_time(job)                                          # (step_time(job) stated it already)
        assert st.mfu_range == pytest.approx((st.mfu * low, st.mfu * high), rel=1e-9)
        # the direct call with the same keywords: the same answer
        direct = training_time(MODEL, tokens=TOKENS, gpu=gpu, seq=SEQ, parallel=job.parallel,
                               global_batch=256, micro_batch=job.micro_batch, recompute=job.recompute,
                               recompute_layers=job.recompute_layers, framework=framework)
        assert (direct.days, direct.days_low, direct.days_high) == pytest.approx(
            (t.days, t.days_low, t.days_high), rel=1e-12)


def test_no_stack_named_is_unchanged():
    """With no stack named the job's ends are the pooled row's (H100, BF16: group "bf16"), as before."""
    low, high = _csv_factors("bf16")
    df, rows = _rows("H100 SXM", None)
    assert df.attrs["range_rows"] == {"H100 SXM": "bf16"}
    for r in rows:
        t = training_time(Job.from_plan_row(r, MODEL, seq=SEQ), tokens=TOKENS)
        assert (t.days_low, t.days_high) == pytest.approx((r.days_low, r.days_high), rel=1e-9)
        assert (t.days_low, t.days_high) == pytest.approx((t.days / high, t.days / low), rel=1e-9)
    assert "framework" not in Job(MODEL, "H100 SXM", SEQ).kwargs("time")


def test_stack_with_its_overlap_turned_off_keeps_it_off():
    """framework="megatron" with tp_backward_overlap=False: the step without the overlap (as the job's
    step_time), the Megatron range around it."""
    par = Parallel(tp=8, dp=2, sp=True)
    on = Job(MODEL, "H100 SXM", SEQ, par, grad_accum=16, framework="megatron")
    off = on.replace(tp_backward_overlap=False)
    t_on, t_off = (training_time(j, tokens=TOKENS) for j in (on, off))
    t_plain = training_time(off.replace(framework=None), tokens=TOKENS)
    assert t_on.days < t_off.days
    assert t_off.days == pytest.approx(t_plain.days, rel=1e-12)
    assert t_off.mfu == pytest.approx(step_time(off).mfu, rel=1e-12)
    low, high = _csv_factors("stack:megatron:hopper")
    assert (t_off.days_low, t_off.days_high) == pytest.approx((t_off.days / high, t_off.days / low), rel=1e-9)


def test_framework_still_refused_where_no_step_names_it():
    with pytest.raises(ValueError, match="framework"):
        training_time(MODEL, gpu="H100 SXM", framework="megatron", stages=[(TOKENS, SEQ)])
    with pytest.raises(ValueError, match="framework"):
        training_time("mixtral-8x7b", tokens=TOKENS, gpu="H100 SXM", seq=SEQ, n_gpus=64,
                      framework="megatron")
    with pytest.raises(ValueError, match="framework"):
        training_time(MODEL, tokens=TOKENS, gpu="H100 SXM", seq=SEQ, parallel=Parallel(dp=8),
                      global_batch=64, framework="megatorn")
