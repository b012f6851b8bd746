"""One question, one answer (stage44, issue 34): a Stage with its own layout in a run whose plan_options name
a stack states that stack's range, as training_time(..., parallel=, global_batch=, framework=) does (range44).

Before, only a planned stage (global_batch, no layout) read plan_options["framework"]; a layout stage kept
the pooled range. The ends are worked by hand from data/intervals.csv (read with csv): a time at an MFU whose
range is (low, high) runs from time / high to time / low.
"""

import csv
import pathlib

import pytest

from llmsizing.parallel import Parallel
from llmsizing.stages import Stage
from llmsizing.time_cost import training_time

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "intervals.csv"
MODEL, GPU = "llama-3-8b", "H100 SXM"
PAR = Parallel(tp=8, dp=2, sp=True)          # (TP: where Megatron also hides the backward's collectives)
STAGES = [Stage(1e12, 4096, parallel=PAR, global_batch=256, name="short"),
          Stage(1e11, 8192, parallel=PAR, global_batch=64, micro_batch=2, name="long")]


def _csv_factors(group: str) -> tuple[float, float]:
    with open(DATA, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["area"] == "training-layout" and r["group"] == group]
    assert len(rows) == 1 and rows[0]["low"] and rows[0]["high"], group
    return float(rows[0]["low"]), float(rows[0]["high"])


def _single(st: Stage, **kw):
    return training_time(MODEL, tokens=st.tokens, gpu=GPU, seq=st.seq, parallel=st.parallel,
                         global_batch=st.global_batch, micro_batch=st.micro_batch, **kw)


def _check(t, one, low, high):
    assert t.days == pytest.approx(one.days, rel=1e-9)
    for end in ("days_low", "days_high", "gpu_hours_low", "gpu_hours_high", "cost_usd_low", "cost_usd_high",
                "mfu_low", "mfu_high"):
        assert getattr(t, end) == pytest.approx(getattr(one, end), rel=1e-9), end
    # by hand from the csv row: the fast end at mfu x high, the slow end at mfu x low
    assert (t.days_low, t.days_high) == pytest.approx((t.days / high, t.days / low), rel=1e-9)
    assert t.cost_usd_high == pytest.approx(t.cost_usd / low, rel=1e-9)
    assert (t.mfu_low, t.mfu_high) == pytest.approx((t.mfu * low, t.mfu * high), rel=1e-9)


def test_layout_stage_states_the_named_stacks_range():
    low, high = _csv_factors("stack:megatron:hopper")
    plain = _csv_factors("bf16")
    assert abs(low - plain[0]) > 0.01 and abs(high - plain[1]) > 0.01    # (else the test could not fail)
    run = training_time(MODEL, gpu=GPU, stages=STAGES, plan_options={"framework": "megatron"})
    for t, st in zip(run.stages, STAGES):
        _check(t, _single(st, framework="megatron"), low, high)
    # the stack's TP overlap too: Megatron's step is faster than the unnamed one on this TP=8 layout
    assert run.stages[0].days < _single(STAGES[0]).days


def test_mixed_run_layout_and_planned_stage_state_one_range():
    """A planned stage read the framework already; the layout stage beside it now states the same row."""
    low, high = _csv_factors("stack:megatron:hopper")
    run = training_time(MODEL, gpu=GPU, n_gpus=16, plan_options={"framework": "megatron"},
                        stages=[STAGES[0], Stage(1e11, 8192, global_batch=64)])
    _check(run.stages[0], _single(STAGES[0], framework="megatron"), low, high)
    planned = run.stages[1]
    assert (planned.days_low, planned.days_high) == pytest.approx(
        (planned.days / high, planned.days / low), rel=1e-9)


@pytest.mark.parametrize("opts", [None, {"precision": "bf16-mixed"}])    # (the second: refused before)
def test_no_stack_named_is_unchanged(opts):
    low, high = _csv_factors("bf16")
    run = training_time(MODEL, gpu=GPU, stages=STAGES, plan_options=opts)
    for t, st in zip(run.stages, STAGES):
        _check(t, _single(st), low, high)


def test_plan_options_refusals():
    # a key only plan() reads still needs a planned stage; so does any key without a stepped stage
    with pytest.raises(ValueError, match="plan_options"):
        training_time(MODEL, gpu=GPU, stages=STAGES, plan_options={"cp_comm": "p2p"})
    with pytest.raises(ValueError, match="plan_options"):
        training_time(MODEL, gpu=GPU, n_gpus=16, stages=[(1e12, 4096)],
                      plan_options={"framework": "megatron"})
    with pytest.raises(ValueError, match="framework"):
        training_time(MODEL, gpu=GPU, stages=STAGES, plan_options={"framework": "megatorn"})
