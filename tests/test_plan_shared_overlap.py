"""plan(shared_expert_overlap=True) and `llmsizing plan --shared-expert-overlap` (issue 35, "MoE true in
time"): the planner builds every layout with Parallel(shared_expert_overlap=True), so a row, step_time of its
layout and training_time (on the row's job, and on the layout's own step) give the same step; off by default,
and an old call is the same frame as before (tests/test_plan_tables.py and the frozen plans check the default
search bit for bit).

What the shared experts hide is derived by hand in tests/test_shared_expert_overlap.py; here the planner's
vectorised copy (plan_pricing.moe_all_to_all_s with moe_time.shared_overlap_rows_s) must agree with it."""

import json

import pandas as pd
import pytest

import llmsizing as L
from llmsizing import cli
from llmsizing.job import Job
from llmsizing.layouts import step_time
from llmsizing.stages import Stage

V2, SEQ, GB, TOKENS = "deepseek-v2", 4096, 1024, 1e12
# a small search of DeepSeek-V2 on H800: EP 8 inside a node and EP 16 across two, with and without
# recomputation
KW = dict(tokens=TOKENS, gpus=("H800",), seq=SEQ, global_batch=GB, max_gpus=512, ep_degrees=(8, 16),
          micro_batches=(1, 2), zero_stages=(1,), recomputes=("none", "full"))
KEY = ["gpu", "tp", "pp", "dp", "ep", "zero", "micro_batch", "recompute"]


@pytest.fixture(scope="module")
def frames():
    return L.plan(V2, **KW), L.plan(V2, **KW, shared_expert_overlap=True)


def test_every_row_is_step_time_and_training_time_of_its_layout_with_the_option_on(frames):
    _, on = frames
    rows = pd.concat([on[on["ep"] == 16].head(6), on[on["ep"] == 8].head(6),
                      on[on["recompute"] == "full"].head(4), on.sample(10, random_state=0)])
    assert set(rows["ep"]) == {8, 16} and set(rows["recompute"]) == {"none", "full"}
    for r in rows.itertuples():
        job = Job.from_plan_row(r, V2, seq=SEQ, shared_expert_overlap=True)
        assert job.parallel.shared_expert_overlap
        st = step_time(job)
        assert st.step_s == pytest.approx(r.step_time_s, rel=1e-9), r
        assert L.training_time(job, tokens=TOKENS).days == pytest.approx(r.days, rel=1e-9), r
    # training_time on the layout's own step (no plan row): the same step
    r = on[on["ep"] == 16].iloc[0]
    job = Job.from_plan_row(r, V2, seq=SEQ, shared_expert_overlap=True)
    st = step_time(job)
    t = L.training_time(V2, tokens=TOKENS, gpu="H800", seq=SEQ, parallel=job.parallel, global_batch=GB,
                        micro_batch=int(r["micro_batch"]), recompute=r["recompute"])
    assert t.days == pytest.approx(TOKENS / st.tokens * st.step_s / 86400, rel=1e-9)


def test_the_option_hides_all_to_all_only_and_is_off_by_default(frames):
    off, on = frames
    pd.testing.assert_frame_equal(off, L.plan(V2, **KW, shared_expert_overlap=False))
    assert "shared experts" not in off.attrs["assumes"]
    assert "after the shared experts'" in on.attrs["assumes"]
    both = off.merge(on, on=KEY, suffixes=("", "_on"))
    assert len(both) == len(off) == len(on)
    assert (both["memory_per_gpu_bytes_on"] == both["memory_per_gpu_bytes"]).all()   # the memory is the same
    assert (both["step_time_s_on"] < both["step_time_s"]).all()                       # every row has ep > 1
    # each row's saving is what step_time's exposed all-to-all loses, nothing else
    r = both.iloc[0]
    par = Job.from_plan_row(r, V2, seq=SEQ).parallel
    kw = dict(batch=int(r["micro_batch"]), seq=SEQ, grad_accum=int(r["grad_accum"]), recompute=r["recompute"])
    a = step_time(V2, "H800", par, **kw)
    b = step_time(V2, "H800", Job.from_plan_row(r, V2, seq=SEQ, shared_expert_overlap=True).parallel, **kw)
    assert b.compute_s == a.compute_s
    saved = a.exposed_by_group_s["ep"] - b.exposed_by_group_s["ep"]
    assert r["step_time_s"] - r["step_time_s_on"] == pytest.approx(saved, rel=1e-9)


def test_a_model_without_shared_experts_is_refused():
    for model in ("mixtral-8x7b", "llama-3-8b"):
        with pytest.raises(ValueError, match="shared_expert_overlap"):
            L.plan(model, tokens=TOKENS, seq=SEQ, global_batch=64, shared_expert_overlap=True)
    with pytest.raises(TypeError, match="shared_expert_overlap"):
        L.plan(V2, **KW, shared_expert_overlap="yes")


def test_staged_plans_take_it_through_plan_options():
    t = L.training_time(V2, stages=[Stage(TOKENS, SEQ, global_batch=GB)], gpu="H800", n_gpus=512,
                        plan_options={k: KW[k] for k in ("ep_degrees", "micro_batches", "zero_stages")}
                        | {"shared_expert_overlap": True})
    off = L.training_time(V2, stages=[Stage(TOKENS, SEQ, global_batch=GB)], gpu="H800", n_gpus=512,
                          plan_options={k: KW[k] for k in ("ep_degrees", "micro_batches", "zero_stages")})
    assert t.days < off.days


def test_the_command_line_flag(capsys):
    argv = ["plan", V2, "--tokens", "1T", "--seq", "4096", "--global-batch", "1024", "--max-gpus", "512",
            "--gpu", "H800", "--ep", "8", "--ep", "16", "--json", "--all"]
    assert cli.main(argv) == 0
    off = pd.DataFrame(json.loads(capsys.readouterr().out))
    assert cli.main(argv + ["--shared-expert-overlap"]) == 0
    on = pd.DataFrame(json.loads(capsys.readouterr().out))
    both = off.merge(on, on=[k for k in KEY if k in on.columns], suffixes=("", "_on"))
    assert len(both) and (both["step_time_s_on"] < both["step_time_s"]).all()
