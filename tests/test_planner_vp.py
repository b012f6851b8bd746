"""Issue 34: the planner searches interleaved (virtual) pipeline stages and Megatron-LM's split that counts the
embedding and the loss as a layer's place each (Llama 3 405B's 16 stages), and says which deadline rule it used.

Expected values are worked out by hand: the chunk options from the divisors of a stage's layers, Megatron-LM's
rule that an interleaved step's micro-batches come in groups of pp, Narayanan et al.'s bubble (pp - 1) / (v m),
the days of a plan from its step time, and the deadline rule on hand-picked numbers. The planner's rows are also
checked against direct step_time and training_memory calls on the layout built by hand."""

import numpy as np
import pandas as pd
import pytest
from conftest import pooled_layout_factors

import llmsizing as L
from llmsizing import plan_rank
from llmsizing.job import Job
from llmsizing.comm import stage_compute_times_s
from llmsizing.pipeline_schedule import pipelined_zero_fields
from llmsizing.plan_stage_terms import pipeline_split
from llmsizing.planner import (DEADLINE_RULES, NoPlanError, PLAN_COLUMNS, meets_deadline, plan,
                               recompute_kwargs, stage_chunk_options, within_budget)

L405, L70 = "llama-3.1-405b", "llama-3-70b"
K405 = dict(tokens=15.6e12, seq=8192, global_batch=2048, gpus=("H100 SXM",), max_gpus=16384)


@pytest.fixture(scope="module")
def p405():
    return plan(L405, **K405)


@pytest.fixture(scope="module")
def p70():
    return plan(L70, tokens=1e12, gpus=("H100 SXM", "A100 80GB"), seq=8192, global_batch=1024, max_gpus=4096)


def test_chunk_options_by_hand():
    # every count of equal chunks above one (vp38: not only the fewest and the most), and one (plain 1F1B)
    assert stage_chunk_options(9) == (1, 3, 9)          # 9 = 3 x 3
    assert stage_chunk_options(7) == (1, 7)             # a prime: one layer per chunk only
    assert stage_chunk_options(8) == (1, 2, 4, 8)       # Llama 3 405B's 8 places per stage
    assert stage_chunk_options(20) == (1, 2, 4, 5, 10, 20)
    assert stage_chunk_options(1) == (1,)
    assert stage_chunk_options(8, (2, 4, 3)) == (1, 2, 4)     # given: those that divide the stage
    assert stage_chunk_options(9, (2, 4)) == (1,)
    with pytest.raises(ValueError, match="stage_layers"):
        stage_chunk_options(0)


def test_columns_and_megatrons_rules(p70):
    assert tuple(p70.columns) == PLAN_COLUMNS and "virtual_stages" in PLAN_COLUMNS
    vp = p70[p70["virtual_stages"] > 1]
    assert len(vp) > 100 and set(vp["pp"]) >= {2, 4, 8}
    assert (vp["grad_accum"] % vp["pp"] == 0).all()             # micro-batches in groups of pp
    assert ((80 // vp["pp"]) % vp["virtual_stages"] == 0).all()  # equal chunks of the stage's layers
    assert (p70.loc[p70["pp"] == 1, "virtual_stages"] == 1).all()


def test_rows_are_step_time_and_training_memory_on_the_layout_built_by_hand(p405):
    """Every interleaved plan of the 405B search on 16,384 H100s priced and weighed again from a Parallel written
    out by hand (pp 16 does not divide the 126 layers: the embedding and the loss take a layer's place each)."""
    vp = p405[p405["virtual_stages"] > 1]
    assert set(vp["pp"]) >= {4, 8, 16, 32}
    for r in vp.sample(40, random_state=1).itertuples():
        even = 126 % r.pp == 0
        # (ZeRO-3 under a pipeline as Meta ran it: issue 34, pipeline_schedule.PIPELINED_FSDP)
        par = L.Parallel(tp=r.tp, pp=r.pp, dp=r.dp, zero=r.zero, sp=r.tp > 1, virtual_stages=r.virtual_stages,
                         account_for_embedding=not even, account_for_loss=not even,
                         **pipelined_zero_fields(r.zero, r.pp))
        job = Job.from_plan_row(r, L405, seq=8192).parallel             # (resolved: the split written out)
        assert (job.virtual_stages, job.account_for_embedding, job.stage_layers) == (
            r.virtual_stages, not even, None if even else L.parallel.layers_per_stage(126, par))
        assert (job.reshard_after_forward, job.grad_reduce) == (par.reshard_after_forward, par.grad_reduce)
        kw = dict(batch=r.micro_batch, seq=8192, grad_accum=r.grad_accum, **recompute_kwargs(r))
        st = L.step_time(L405, r.gpu, par, **kw)
        assert st.step_s == pytest.approx(r.step_time_s, rel=1e-9)
        assert L.training_memory(L405, parallel=par, **kw).total_bytes == pytest.approx(
            r.memory_per_gpu_bytes, rel=1e-9)
        assert r.memory_per_gpu_bytes <= 0.9 * L.get_gpu("H100 SXM").memory_bytes


def test_metas_shape_is_searched_and_priced_as_step_time(p405):
    """tp 8, pp 16 with eight one-place chunks per stage, dp 128 (Dubey et al. 2024, Sec. 3.3.2, Table 4) is
    among the plans, and its row is step_time's for that layout."""
    rows = p405[(p405["tp"] == 8) & (p405["pp"] == 16) & (p405["virtual_stages"] == 8) & (p405["dp"] == 128)]
    assert len(rows)
    r = rows.iloc[0]
    par = L.Parallel(tp=8, pp=16, dp=128, zero=int(r.zero), sp=True, virtual_stages=8, account_for_embedding=True,
                     account_for_loss=True, **pipelined_zero_fields(int(r.zero), 16))
    st = L.step_time(L405, "H100 SXM", par, batch=1, seq=8192, grad_accum=16, **recompute_kwargs(r))
    assert st.step_s == pytest.approx(r.step_time_s, rel=1e-9)


def test_the_interleaved_bubble_by_hand(p70):
    """Two plans that differ only in their chunks and recompute nothing: their steps differ by the bubble,
    (sum - max of the stages' compute) / m x (1 - 1 / v): the fill and drain pass each other stage once at its
    own speed, a chunk of it interleaved (session 39; equal stages: compute x (pp - 1) / m x (1 - 1 / v),
    Narayanan et al. 2021, Sec. 2.2): the sends the fill and drain wait for are 2 (pp - 1) either way."""
    none = p70[p70["recompute"] == "none"]
    key = ["gpu", "tp", "cp", "pp", "zero", "micro_batch", "dp"]
    both = none[none["virtual_stages"] == 1].merge(none[none["virtual_stages"] > 1], on=key, suffixes=("", "_v"))
    assert len(both) > 5
    for r in both.head(8).itertuples():
        par = L.Parallel(tp=r.tp, pp=r.pp, dp=r.dp, zero=r.zero, sp=r.tp > 1,
                         **pipeline_split(L.get_model(L70), r.pp))
        stages = stage_compute_times_s(L70, par, batch=r.micro_batch, seq=8192, gpu=r.gpu,
                                       grad_accum=r.grad_accum)
        want = (sum(stages) - max(stages)) / r.grad_accum * (1 - 1 / r.virtual_stages_v)
        assert r.step_time_s - r.step_time_s_v == pytest.approx(want, rel=1e-6)


def test_the_405b_plan_on_16384_gpus_gets_faster(p405):
    """Before issue 34 the fastest plan on 16,384 GPUs was ZeRO-3 on dp 2,048 at 11.0 s a step (MFU 0.248). With
    interleaving and the 16-stage split the planner finds a pipeline at least 20% faster."""
    fastest = p405.loc[p405["step_time_s"].idxmin()]
    assert fastest["n_gpus"] == 16384 and fastest["pp"] > 1 and fastest["virtual_stages"] > 1
    assert fastest["step_time_s"] < 11.0 / 1.2 and fastest["mfu"] > 0.30
    # days from the step by hand: 15.6e12 tokens / (2,048 x 8,192 tokens a step) steps
    steps = 15.6e12 / (2048 * 8192)
    assert fastest["days"] == pytest.approx(steps * fastest["step_time_s"] / 86400, rel=1e-12)


def test_virtual_stages_one_searches_no_interleaving():
    df = plan(L70, tokens=1e12, gpus=("H100 SXM",), seq=8192, global_batch=1024, max_gpus=1024,
              virtual_stages=(1,))
    assert (df["virtual_stages"] == 1).all()
    with pytest.raises(ValueError, match="virtual_stages"):
        plan("mixtral-8x7b", tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=512, virtual_stages=(1, 2))
    with pytest.raises(ValueError, match="virtual_stages"):
        plan(L70, tokens=1e12, seq=8192, global_batch=1024, virtual_stages=(0,))


# ---- the deadline's rule
def test_meets_deadline_by_hand():
    got = meets_deadline([10.0, 10.0, 8.0, 12.0], [12.0, 11.0, 9.0, 13.0], 11.0)
    assert list(got) == ["likely", "yes", "yes", "no"]
    assert DEADLINE_RULES == ("estimate", "slow_end")


def test_the_deadline_rule_and_its_column(p70):
    """A deadline between a plan's point estimate and the slow end of its range: kept as "likely" by the point
    estimate's rule, dropped by the slow end's (the default since issue 34); a deadline beyond its slow end: "yes"."""
    kw = dict(tokens=1e12, gpus=("H100 SXM", "A100 80GB"), seq=8192, global_batch=1024, max_gpus=4096)
    r = p70.iloc[0]
    # the days by hand from the step: 1e12 tokens / (1,024 x 8,192) steps
    days = 1e12 / (1024 * 8192) * r.step_time_s / 86400
    assert r.days == pytest.approx(days, rel=1e-12) and r.days_high > r.days
    mid = (r.days + r.days_high) / 2
    key = ["gpu", "tp", "cp", "pp", "virtual_stages", "zero", "micro_batch", "dp"]

    def row(df):
        return df[(df[key] == r[key]).all(axis=1)]

    kept = plan(L70, deadline_days=mid, deadline_rule="estimate", **kw)
    assert list(kept.columns) == list(PLAN_COLUMNS) + ["meets_deadline"]
    assert list(row(kept)["meets_deadline"]) == ["likely"]
    assert set(kept["meets_deadline"]) <= {"yes", "likely"} and (kept["days"] <= mid).all()
    assert "point estimate" in kept.attrs["deadline_rule"]
    strict = plan(L70, deadline_days=mid, deadline_rule="slow_end", **kw)
    assert not len(row(strict)) and (strict["days_high"] <= mid).all() and set(strict["meets_deadline"]) == {"yes"}
    assert "slow end" in strict.attrs["deadline_rule"]
    with pytest.warns(FutureWarning, match="deadline_rule='estimate' for the old result"):
        plan_rank._WARNED.clear()
        default = plan(L70, deadline_days=mid, **kw)
    pd.testing.assert_frame_equal(default, strict)
    loose = plan(L70, deadline_days=r.days_high * 1.01, **kw)
    assert list(row(loose)["meets_deadline"]) == ["yes"]
    assert "meets_deadline" not in p70                       # no deadline, no column
    with pytest.raises(ValueError, match="deadline_rule"):
        plan(L70, deadline_days=30, deadline_rule="median", **kw)


def test_no_plan_says_the_rule():
    kw = dict(tokens=1e12, gpus=("H100 SXM",), seq=8192, global_batch=1024, max_gpus=256, deadline_days=1)
    with pytest.raises(NoPlanError, match=r"none meets deadline_days=1: the fastest takes .* days \(.* at the "
                                          r"slow end of the 80% range\).*checked by the point estimate"):
        plan(L70, deadline_rule="estimate", **kw)
    with pytest.raises(NoPlanError, match="checked by the slow end of the 80% range"):
        plan(L70, deadline_rule="slow_end", **kw)
    with pytest.raises(NoPlanError, match="checked by the slow end of the 80% range"):
        plan(L70, **kw)                                      # the default since issue 34
    assert np.isfinite(plan(L70, **{**kw, "deadline_days": 1e4})["days"]).all()


def test_the_default_deadline_rule_is_the_slow_end_and_warns_once(monkeypatch):
    """By hand: point estimates 10, 10, 8, 12 days, slow ends 12, 11, 9, 13, a deadline of 11 days. The slow end
    keeps plans 2 and 3 (11 <= 11, 9 <= 11); the point estimate also keeps plan 1 (10 <= 11 < 12). Given no rule
    the slow end applies, and since plan 1 is lost a FutureWarning says so, once per process."""
    import warnings

    from llmsizing.plan_rank import DEFAULT_DEADLINE_RULE, deadline_kept

    assert DEFAULT_DEADLINE_RULE == "slow_end"
    days, high = [10, 10, 8, 12], [12, 11, 9, 13]
    assert list(deadline_kept("estimate", days, high, 11)) == [True, True, True, False]
    assert list(deadline_kept("slow_end", days, high, 11)) == [False, True, True, False]
    monkeypatch.setattr(plan_rank, "_WARNED", [])
    with pytest.warns(FutureWarning, match="1 plans meeting it by their point estimate only"):
        assert list(deadline_kept(None, days, high, 11)) == [False, True, True, False]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(deadline_kept(None, days, high, 11)) == [False, True, True, False]   # once
    monkeypatch.setattr(plan_rank, "_WARNED", [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # nothing lost (plan 1 not listed): no warning
        deadline_kept(None, days, high, 11, listed=np.array([False, True, True, True]))
        deadline_kept("slow_end", days, high, 11)


def test_the_rule_change_is_warned_only_for_plans_the_old_rule_keeps(monkeypatch):
    """By hand: Llama 3 70B on 1T tokens costs at least its model FLOPs at the B200's dense BF16 peak:
    1e12 x (6 x 69.5e9 non-embedding parameters + 6 x 80 layers x 8,192 x 8,192, the causal half of the score
    matrix that the step model prices, chapter 17) = 4.49e23 FLOPs over 2.25e15 FLOP/s = 55,460 GPU-hours, x
    $6.69 (data/gpu_prices.csv) = $371k at 100% MFU ($398k counting the whole matrix). A budget of $300k is
    below every plan's point cost, so the old default (point estimates) keeps nothing: the default's stricter
    30-day deadline drops no plan it would have kept, and no FutureWarning may claim one (chapter 12's second
    command line once said 160 were dropped), only the NoPlanError."""
    import warnings

    monkeypatch.setattr(plan_rank, "_WARNED", [])
    kw = dict(tokens=1e12, gpus=("B200",), seq=8192, global_batch=512, max_gpus=4096)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        with pytest.raises(NoPlanError, match="none meets deadline_days=30 and budget_usd=300,000"):
            plan(L70, deadline_days=30, budget_usd=300_000, **kw)
    assert plan_rank._WARNED == []
    # the same deadline alone does drop plans the old default keeps (point estimate within 30 days, slow end
    # beyond): then it is warned
    with pytest.warns(FutureWarning, match=r"plan\(deadline_days=30\) keeps a plan only if the slow end"):
        plan(L70, deadline_days=30, **kw)


# ---- the budget follows the deadline's rule (issue 34)
def test_budget_kept_by_hand(monkeypatch):
    """By hand: point costs $1.0M, $1.0M, $0.8M, $1.2M, slow ends $1.2M, $1.1M, $0.9M, $1.3M, a budget of
    $1.1M. The slow end keeps plans 2 and 3 (1.1 <= 1.1, 0.9 <= 1.1); the point estimate also keeps plan 1
    (1.0 <= 1.1 < 1.2). Given no rule the slow end applies and a FutureWarning says so once per process, apart
    from the deadline's warning (a process told about the deadline is not yet told about the budget)."""
    import warnings

    from llmsizing.plan_rank import budget_kept, budget_rule_text, deadline_kept

    cost, high = [1.0e6, 1.0e6, 0.8e6, 1.2e6], [1.2e6, 1.1e6, 0.9e6, 1.3e6]
    assert list(budget_kept("estimate", cost, high, 1.1e6)) == [True, True, True, False]
    assert list(budget_kept("slow_end", cost, high, 1.1e6)) == [False, True, True, False]
    monkeypatch.setattr(plan_rank, "_WARNED", [])
    with pytest.warns(FutureWarning, match="deadline_days=11"):
        deadline_kept(None, [10, 10], [12, 11], 11)
    with pytest.warns(FutureWarning, match=r"plan\(budget_usd=1,100,000\) keeps a plan only if the slow end .* "
                                           "budget .*1 plans meeting it by their point estimate only"):
        assert list(budget_kept(None, cost, high, 1.1e6)) == [False, True, True, False]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(budget_kept(None, cost, high, 1.1e6)) == [False, True, True, False]   # once
        budget_kept(None, cost, high, 1.3e6)                                               # nothing lost
    assert "cost_usd_high <= 1,100,000" in budget_rule_text("slow_end", 1.1e6)
    assert "point estimate (cost_usd <= 1,100,000" in budget_rule_text("estimate", 1.1e6)
    with pytest.raises(ValueError, match="deadline_rule"):
        budget_kept("median", cost, high, 1.1e6)


def test_a_budget_its_point_cost_fits_and_its_slow_end_does_not(p70, monkeypatch):
    """The cheapest plan of Llama 3 70B on 1T tokens (8,192-token sequences, 1,024 per batch), priced by hand:
    1e12 / (1,024 x 8,192) steps x its step time x its GPUs x the H100 SXM's list price $3.99/h
    (data/gpu_prices.csv), and its slow end that cost over the low MFU factor of the 80% range (the pooled
    training-layout row of data/intervals.csv, which an H100 in BF16 without a stack takes; read from the
    file). A budget between the two keeps it by the point estimate and drops it by the slow end, the default
    (warned once)."""
    low = pooled_layout_factors()[0]
    kw = dict(tokens=1e12, gpus=("H100 SXM", "A100 80GB"), seq=8192, global_batch=1024, max_gpus=4096)
    r = p70.iloc[0]
    assert r.gpu == "H100 SXM" and p70.attrs["range_rows"]["H100 SXM"] in ("all", "bf16")
    cost = 1e12 / (1024 * 8192) * r.step_time_s / 3600 * r.n_gpus * 3.99
    assert r.cost_usd == pytest.approx(cost, rel=1e-12)
    assert r.cost_usd_high == pytest.approx(cost / low, rel=1e-12)
    budget = (cost * cost / low) ** 0.5                    # between the point cost and the slow end's
    key = ["gpu", "tp", "cp", "pp", "virtual_stages", "zero", "micro_batch", "dp"]

    def row(df):
        return df[(df[key] == r[key]).all(axis=1)]

    kept = plan(L70, budget_usd=budget, deadline_rule="estimate", **kw)
    assert len(row(kept)) == 1 and (kept["cost_usd"] <= budget).all()
    # its column: within the budget by its point cost only
    assert list(kept.columns) == list(PLAN_COLUMNS) + ["within_budget"]
    assert list(row(kept)["within_budget"]) == ["likely"]
    assert "point estimate" in kept.attrs["budget_rule"] and "deadline_rule" not in kept.attrs
    # every GPU here takes the same range, so no plan's slow end is below the cheapest plan's: none is left
    strict = plan(L70, budget_usd=budget, deadline_rule="slow_end", explain=False, **kw)
    assert strict.empty
    monkeypatch.setattr(plan_rank, "_WARNED", [])
    with pytest.warns(FutureWarning, match="budget_usd=.*deadline_rule='estimate' for the old result"):
        with pytest.raises(NoPlanError, match=rf"the cheapest costs \${cost:,.0f} \(\${cost / low:,.0f} at the "
                                              r"slow end of the 80% range; .*budget was checked by the slow end"):
            plan(L70, budget_usd=budget, **kw)
    loose = plan(L70, budget_usd=cost / low * 1.001, **kw)     # just above its slow end: kept
    assert len(row(loose)) == 1 and (loose["cost_usd_high"] <= cost / low * 1.001).all()
    assert "slow end" in loose.attrs["budget_rule"] and "meets_deadline" not in loose
    assert list(row(loose)["within_budget"]) == ["yes"] and set(loose["within_budget"]) == {"yes"}


def test_no_plan_within_the_budget_says_the_rule():
    kw = dict(tokens=1e12, gpus=("H100 SXM",), seq=8192, global_batch=1024, max_gpus=256, budget_usd=1e3)
    with pytest.raises(NoPlanError, match=r"none meets budget_usd=1,000: .*the cheapest costs \$[\d,]+ "
                                          r"\(\$[\d,]+ at the slow end of the 80% range; .*budget was checked by the slow end"):
        plan(L70, **kw)
    with pytest.raises(NoPlanError, match="budget was checked by the point estimate"):
        plan(L70, deadline_rule="estimate", **kw)



def test_no_plan_counts_the_plans_the_table_lists():
    """reader24b's ch12 L1: chapter 12 read "5,652 plans fit in memory" in the message where its table listed
    5,055 for the same search: the message counted the search's rows, before the interleaved and pipelined
    ZeRO-2/3 twins that another plan of the same GPUs beats are dropped. The message now counts (and names
    the fastest and the cheapest of) the plans ``plan()`` lists for the same search without limits."""
    import re

    kw = dict(tokens=1e12, gpus=("H100 SXM",), seq=8192, global_batch=1024, max_gpus=256)
    listed = plan(L70, **kw)
    with pytest.raises(NoPlanError) as exc:
        plan(L70, deadline_days=1, budget_usd=1e3, **kw)
    msg = str(exc.value)
    n = int(re.match(r"([\d,]+) plans fit in memory \(those plan\(\) lists without", msg)[1].replace(",", ""))
    assert n == len(listed)
    assert f"the fastest takes {listed['days'].min():,.1f} days" in msg
    assert f"the cheapest costs ${listed['cost_usd'].min():,.0f} (" in msg


def test_within_budget_by_hand():
    """As meets_deadline for the deadline (issue 34): point costs $1.0M, $1.0M, $0.8M, $1.2M, slow ends $1.2M,
    $1.1M, $0.9M, $1.3M, a budget of $1.1M. Plan 1 is within it by its point cost only (1.0 <= 1.1 < 1.2:
    "likely"), plans 2 and 3 even at the slow end (1.1 <= 1.1, 0.9 <= 1.1: "yes"), plan 4 by neither (1.2 and
    1.3 > 1.1: "no")."""
    got = within_budget([1.0e6, 1.0e6, 0.8e6, 1.2e6], [1.2e6, 1.1e6, 0.9e6, 1.3e6], 1.1e6)
    assert list(got) == ["likely", "yes", "yes", "no"]


def test_the_budget_column_only_with_a_budget(p70):
    """A budget adds ``within_budget`` after ``meets_deadline``; without one the columns are as before. Llama
    3 70B's cheapest plan here (2,048 H100s) costs about $1.19M by its point estimate and $1.66M at its slow
    end (priced by hand in the test above), in about 6 days, 8.4 at the slow end: a $1.4M budget and a 30-day
    deadline under the point-estimate rule mark it "likely" within the budget and "yes" for the deadline.
    Every row's mark follows the rule's definition."""
    kw = dict(tokens=1e12, gpus=("H100 SXM", "A100 80GB"), seq=8192, global_batch=1024, max_gpus=4096)
    r = p70.iloc[0]
    assert list(p70.columns) == list(PLAN_COLUMNS)                          # no limit, no column
    assert r.cost_usd < 1.4e6 < r.cost_usd_high and r.days_high < 30
    both = plan(L70, deadline_days=30, budget_usd=1.4e6, deadline_rule="estimate", **kw)
    assert list(both.columns) == list(PLAN_COLUMNS) + ["meets_deadline", "within_budget"]
    first = both.iloc[0]
    assert (first.gpu, first.n_gpus, first.tp, first.pp, first.dp) == (r.gpu, r.n_gpus, r.tp, r.pp, r.dp)
    assert (first.meets_deadline, first.within_budget) == ("yes", "likely")
    yes, likely = both["cost_usd_high"] <= 1.4e6, both["cost_usd"] <= 1.4e6
    assert (both["within_budget"] == np.where(yes, "yes", np.where(likely, "likely", "no"))).all()
    # the estimate keeps no "no", and no "yes": both GPUs take the same range, so no plan's slow end is below
    # the cheapest plan's $1.66M
    assert set(both["within_budget"]) == {"likely"}
    # the command line's table shows both marks, in the frame's order
    from llmsizing.cli_args import plan_table

    shown = plan_table(both, 80)
    assert list(shown.columns[-2:]) == ["deadline", "budget"]
    assert list(shown["budget"]) == list(both["within_budget"])
    assert "budget" not in plan_table(p70, 80)
