"""Partial recomputation beyond memory and step time (issue 23's leftover): ``training_time``, ``mfu_estimate`` and
staged runs take ``recompute_layers``, and the planner searches it (``plan(partial_recompute=True)``, the
default): where only full recomputation fits, the plan recomputes the fewest layers per stage that fit.

Expected values are worked out independently of the planner's closed form: the fewest layers by direct
``training_memory`` calls at N and N - 1, the HFU by hand from the FLOPs of no and full recomputation (each
recomputed layer reruns ``1 / layers`` of what full recomputation adds), the calibrated MFU's interpolation as the
geometric mean it is in log space."""

import numpy as np
import pytest

import llmsizing as L
from llmsizing.layouts import USABLE_FRACTION
from llmsizing.parallel import Parallel
from llmsizing.planner import plan, recompute_kwargs
from llmsizing.stages import Stage
from llmsizing.time_cost import mfu_estimate, training_time

L405, L70, L8 = "llama-3.1-405b", "llama-3-70b", "llama-3-8b"
H100 = L.get_gpu("H100 SXM")
KEY = ["gpu", "n_gpus", "dp", "tp", "cp", "pp", "virtual_stages", "zero", "micro_batch", "grad_accum"]


# ----------------------------------------------------------------------------- training_time and mfu_estimate
def test_training_time_old_calls_unchanged_and_the_ends_of_recompute_layers():
    kw = dict(tokens=1e12, gpu="H100 SXM", seq=8192)
    par = Parallel(tp=8, pp=4, dp=32, zero=1, sp=True)
    full = training_time(L70, parallel=par, recompute="full", **kw)
    none = training_time(L70, parallel=par, **kw)
    # every layer of each of the 4 stages (20) is full recomputation; 0 layers is none
    every = training_time(L70, parallel=par, recompute="full", recompute_layers=20, **kw)
    zero = training_time(L70, parallel=par, recompute="full", recompute_layers=0, **kw)
    assert every.mfu == pytest.approx(full.mfu, rel=1e-12) and every.hfu == pytest.approx(full.hfu, rel=1e-12)
    assert zero.mfu == pytest.approx(none.mfu, rel=1e-12) and zero.hfu == pytest.approx(none.hfu, rel=1e-12)
    assert full.mfu < none.mfu                        # the calibration's full-recomputation term costs MFU


def test_training_time_hfu_counts_the_recomputed_layers_by_hand():
    """Llama 3 70B (80 layers) on pp = 4: 5 layers of each stage's 20 are rerun, 20 of 80 in all, so the hardware
    FLOPs are the plain count plus a quarter of what full recomputation adds."""
    par = Parallel(tp=8, pp=4, dp=32, zero=1, sp=True)
    t = training_time(L70, parallel=par, tokens=1e12, gpu="H100 SXM", seq=8192, mfu=0.4, recompute="full",
                      recompute_layers=5)
    none = L.training_flops_per_token(L70, seq=8192)
    full = L.training_flops_per_token(L70, seq=8192, recompute="full")
    assert t.hfu == pytest.approx(0.4 * (none + (full - none) * 20 / 80) / none, rel=1e-12)
    assert t.mfu == 0.4                               # a given MFU is the model's: recomputation does not move it


def test_mfu_estimate_takes_the_share_of_the_full_recomputation_term():
    """In log space the term is proportional to the share rerun: a quarter of the layers gives
    none^(3/4) x full^(1/4)."""
    par = Parallel(tp=8, pp=4, dp=32)
    none = mfu_estimate(L70, gpu="H100 SXM", seq=8192).mfu
    full = mfu_estimate(L70, gpu="H100 SXM", seq=8192, recompute="full").mfu
    part = mfu_estimate(L70, gpu="H100 SXM", seq=8192, recompute="full", recompute_layers=5, parallel=par).mfu
    assert part == pytest.approx(none ** 0.75 * full ** 0.25, rel=1e-12)
    # without a layout the model is one chunk: 20 of its 80 layers is the same share
    alone = mfu_estimate(L70, gpu="H100 SXM", seq=8192, recompute="full", recompute_layers=20).mfu
    assert alone == pytest.approx(part, rel=1e-12)


def test_recompute_layers_is_checked_naming_the_parameter():
    kw = dict(tokens=1e12, gpu="H100 SXM", seq=8192, n_gpus=256)
    with pytest.raises(ValueError, match="recompute_layers.*recompute='full'"):
        training_time(L70, recompute_layers=3, **kw)                        # only with full recomputation
    with pytest.raises(ValueError, match="recompute_layers"):
        training_time(L70, recompute="full", recompute_layers=81, **kw)     # the model has 80 layers
    with pytest.raises(ValueError, match="recompute_layers"):
        training_time(L70, recompute="full", recompute_layers=-1, **kw)
    with pytest.raises(ValueError, match="recompute_layers"):                # 20 layers per stage on pp = 4
        training_time(L70, recompute="full", recompute_layers=21, tokens=1e12, gpu="H100 SXM", seq=8192,
                      parallel=Parallel(tp=8, pp=4, dp=8))
    with pytest.raises(ValueError, match="recompute_layers"):
        mfu_estimate(L70, gpu="H100 SXM", seq=8192, recompute="selective", recompute_layers=2)
    with pytest.raises(ValueError, match="recompute_layers"):
        training_time(L70, gpu="H100 SXM", n_gpus=256, recompute_layers=2, stages=[(1e12, 8192)])


def test_a_stage_on_its_layout_takes_recompute_layers():
    par = Parallel(tp=8, pp=4, dp=32, zero=1, sp=True)
    run = training_time(L70, gpu="H100 SXM", recompute="full", recompute_layers=5,
                        stages=[Stage(1e12, 8192, global_batch=1024, parallel=par)])
    step = L.step_time(L70, "H100 SXM", par, batch=1, seq=8192, grad_accum=32, recompute="full", recompute_layers=5)
    st = run.stages[0]
    assert st.mfu == pytest.approx(step.mfu, rel=1e-12)
    full = L.step_time(L70, "H100 SXM", par, batch=1, seq=8192, grad_accum=32, recompute="full")
    assert step.mfu > full.mfu                          # fewer layers rerun: a faster step
    none = L.training_flops_per_token(L70, seq=8192)
    rerun = L.training_flops_per_token(L70, seq=8192, recompute="full") - none
    assert st.hfu == pytest.approx(st.mfu * (none + rerun / 4) / none, rel=1e-12)


# ----------------------------------------------------------------------------- the planner
@pytest.fixture(scope="module")
def at_128k():
    kw = dict(tokens=8e11, gpus=("H100 SXM",), seq=131072, global_batch=128, max_gpus=16384)
    return plan(L405, **kw), plan(L405, partial_recompute=False, **kw)


def _par(r):
    """The row's layout with its interleaving and pipeline split (issue 34)."""
    return _job_par(r)


def _job_par(r):
    from llmsizing.job import Job

    return Job.from_plan_row(r, L405, seq=131072).parallel


def _plain(frames):
    """The plans without interleaving or ZeRO-2/3 under a pipeline of both frames: each search lists all of them
    (the others only where they win in their own frame, issue 34)."""
    return tuple(f[(f["virtual_stages"] == 1) & ~((f["zero"] >= 2) & (f["pp"] > 1))] for f in frames)


def _total(r, n):
    return L.training_memory(L405, batch=int(r.micro_batch), seq=131072, grad_accum=int(r.grad_accum),
                             parallel=_par(r), recompute="full", recompute_layers=n).total_bytes


def test_the_planner_picks_the_fewest_layers_that_fit_at_128k(at_128k):
    """For the fastest plans and a sample of the rest: N layers per stage fit 90% of 80 GB by a direct
    training_memory call, and N - 1 do not (N = 1: recomputing nothing, recompute='none', does not fit)."""
    df, _ = at_128k
    # (partial recomputation is searched on Megatron-LM's even split, pp dividing the 126 layers; issue 34's
    # split that counts the embedding and the loss as layers recomputes every layer where it recomputes)
    part = df[(df["recompute"] == "full") & (126 % df["pp"] == 0)]
    rows = (part.sort_values("days").head(3).index.tolist()
            + part.sample(8, random_state=0).index.tolist())
    limit = USABLE_FRACTION * H100.memory_bytes
    for i in rows:
        r = df.loc[i]
        n = int(r.recompute_layers)
        assert 1 <= n <= max(max(c) for c in L.parallel.stage_chunks(126, _par(r)))
        assert _total(r, n) <= limit
        assert _total(r, n - 1) > limit, (i, n)
        assert r.memory_per_gpu_bytes == pytest.approx(_total(r, n), rel=1e-9)


def test_partial_recomputation_is_never_slower_than_full(at_128k):
    """The same layouts are found with and without the search (it only changes what "full" reruns), each at least
    as fast as with every layer recomputed and holding at least as much memory; most are strictly faster here."""
    df, old = _plain(at_128k)
    assert len(df) == len(old)
    both = df.merge(old, on=KEY, suffixes=("", "_all"))
    assert len(both) == len(df)
    assert (both["recompute"] == both["recompute_all"]).all()
    full = both[both["recompute"] == "full"]
    assert (full["step_time_s"] <= full["step_time_s_all"] * (1 + 1e-12)).all()
    assert (full["memory_per_gpu_bytes"] >= full["memory_per_gpu_bytes_all"] * (1 - 1e-12)).all()
    # the old search: every layer (the largest stage's, where pp does not divide the 126 layers)
    assert (full["recompute_layers_all"] == -(-126 // full["pp"])).all()
    fewer = full["recompute_layers"] < full["recompute_layers_all"]
    assert (~fewer[126 % full["pp"] != 0]).all()            # (issue 34's accounted split: every layer)
    assert fewer[126 % full["pp"] == 0].mean() > 0.5
    assert (full.loc[fewer, "step_time_s"] < full.loc[fewer, "step_time_s_all"]).all()
    assert df["days"].min() < old["days"].min()                            # the fastest plan gets faster


def test_a_plan_row_gives_its_recomputation_to_direct_calls(at_128k):
    df, _ = at_128k
    r = df.sort_values("days").iloc[0]
    kw = recompute_kwargs(r)
    assert kw["recompute"] == "full" and kw["recompute_layers"] == int(r.recompute_layers)
    st = L.step_time(L405, "H100 SXM", _par(r), batch=int(r.micro_batch), seq=131072,
                     grad_accum=int(r.grad_accum), **kw)
    assert st.step_s == pytest.approx(r.step_time_s, rel=1e-9)
    none = df[df["recompute"] == "none"].iloc[0]
    assert recompute_kwargs(none) == {"recompute": "none", "recompute_layers": None}
    assert recompute_kwargs(none.drop("recompute_layers")) == {"recompute": "none", "recompute_layers": None}


def test_nothing_changes_where_nothing_needs_full_recomputation():
    """Llama 3 8B at 2K tokens, one sequence per micro-batch, fits every layout without recomputation: the search
    of partial recomputation changes no row."""
    kw = dict(tokens=1e11, gpus=("H100 SXM",), seq=2048, global_batch=64, max_gpus=64, micro_batches=(1,),
              recomputes=("none", "full"))
    new, old = plan(L8, **kw), plan(L8, partial_recompute=False, **kw)
    assert (new["recompute"] == "none").all() and new["recompute_layers"].isna().all()
    assert new.equals(old)


def test_rows_without_full_recomputation_are_the_same(at_128k):
    df, old = _plain(at_128k)
    both = df.merge(old, on=KEY, suffixes=("", "_all"))
    light = both[both["recompute"] != "full"]
    assert len(light) and light["recompute_layers"].isna().all()
    np.testing.assert_array_equal(light["step_time_s"], light["step_time_s_all"])
    np.testing.assert_array_equal(light["memory_per_gpu_bytes"], light["memory_per_gpu_bytes_all"])


def test_a_planned_stage_carries_the_plans_partial_recomputation():
    run = training_time(L405, gpu="H100 SXM", n_gpus=16384,
                        stages=[Stage(8e11, 131072, global_batch=128)])
    df = plan(L405, tokens=8e11, gpus=("H100 SXM",), seq=131072, global_batch=128, max_gpus=16384)
    r = df.sort_values(["days", "cost_usd"]).iloc[0]
    st = run.stages[0]
    assert st.mfu == pytest.approx(r.mfu, rel=1e-12)
    n = int(r.recompute_layers)
    none = L.training_flops_per_token(L405, seq=131072)
    rerun = L.training_flops_per_token(L405, seq=131072, recompute="full") - none
    rerun_layers = n * int(r.pp)                        # n of each stage's layers, every stage
    assert st.hfu == pytest.approx(st.mfu * (none + rerun * rerun_layers / 126) / none, rel=1e-12)


def test_partial_recompute_flag_is_checked():
    with pytest.raises(TypeError, match="partial_recompute"):
        plan(L8, tokens=1e11, seq=2048, global_batch=64, max_gpus=64, partial_recompute="yes")


def test_a_mixture_of_experts_is_searched_as_before():
    kw = dict(tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=512, max_gpus=512)
    new = plan("mixtral-8x7b", **kw)
    old = plan("mixtral-8x7b", partial_recompute=False, **kw)
    assert new.equals(old)
    full = new[new["recompute"] == "full"]
    assert len(full) and full["recompute_layers"].isna().all()     # partial recomputation of one: not modelled
    r = full.iloc[0]                                                # so a row's recomputation passes on as is
    par = Parallel(tp=int(r.tp), pp=int(r.pp), dp=int(r.dp), zero=int(r.zero), sp=bool(r.sp), ep=int(r.ep))
    t = L.training_memory("mixtral-8x7b", batch=int(r.micro_batch), seq=4096, grad_accum=int(r.grad_accum),
                          parallel=par, **recompute_kwargs(r))
    assert t.total_bytes == pytest.approx(r.memory_per_gpu_bytes, rel=1e-9)


def test_recompute_label_names_the_layers(at_128k):
    from llmsizing.planner import recompute_label

    df, old = at_128k
    r = df.sort_values("days").iloc[0]
    n = int(r.recompute_layers)
    assert recompute_label(r) == f"full ({n})" and recompute_label(r, long=True) == f"full ({n} layers per stage)"
    none = df[df["recompute"] == "none"].iloc[0]
    assert recompute_label(none) == "none" and recompute_label(none.drop("recompute_layers")) == "none"
