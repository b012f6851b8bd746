"""plan(mtp_depth=, capacity_factor=) (issue 35, "one MoE path used by training_time, step_time, plan,
cost_by_gpu, the CLI and chapter 18"): the planner searches with DeepSeek-V3's multi-token-prediction module
(llmsizing.mtp) and with token dropping at an expert capacity, priced as training_memory and step_time price
them (llmsizing.plan_moe). Every plan checked here is re-priced with step_time(...) and training_memory(...)
on the same arguments: the same step (1e-9 relative, the tolerance of the other "a row is step_time of its
layout" tests, tests/test_planner_moe.py) and the same memory, hence the same fit verdict, both ways (a plan
the option pushes out of memory is one training_memory says does not fit). The defaults leave every search
bit for bit as it was (tests/test_planner_speed.py and tests/test_plan_tables.py against the frozen plans).

The MTP FLOPs are derived here from DeepSeek-V3's config.json (hidden 7,168, 61 layers of which the first 3
dense with an MLP of 18,432, 128 heads, MLA ranks 1,536 / 512, rope 64, nope 128, v 128, 8 of 256 routed + 1
shared experts of 2,048, vocabulary 129,280, untied head), not read off the code."""

import pandas as pd
import pytest

import llmsizing as L
from llmsizing import cli
from llmsizing.catalog import resolve_model
from llmsizing.flops import training_flops_per_token
from llmsizing.job import Job
from llmsizing.fewest_gpus import min_gpus
from llmsizing.layouts import step_time
from llmsizing.moe import moe_stage_flops
from llmsizing.states import USABLE_FRACTION
from llmsizing.time_cost import cost_by_gpu

T = 4096
QWEN, V3 = "qwen3-30b-a3b", "deepseek-v3"
KEY = ["gpu", "tp", "cp", "pp", "dp", "ep", "zero", "micro_batch", "recompute"]
# two small searches: Qwen3-30B-A3B (48 layers: pipelines of 2 to 48 stages, the MTP block on the last) on
# H100s, and DeepSeek-V3 (61 layers: pp 1 or 61) on H800s at the expert-parallel degrees it ran
SEARCHES = {
    QWEN: dict(tokens=1e12, gpus=("H100 SXM",), seq=T, global_batch=512, max_gpus=256, micro_batches=(1, 2)),
    V3: dict(tokens=1e12, gpus=("H800",), seq=T, global_batch=3904, max_gpus=4096, ep_degrees=(8, 32, 64),
             zero_stages=(0, 1), micro_batches=(1,)),
}
OPTIONS = [dict(mtp_depth=1), dict(capacity_factor=1.0), dict(mtp_depth=1, capacity_factor=1.25)]


@pytest.fixture(scope="module")
def frames():
    out = {}
    for model, kw in SEARCHES.items():
        out[model, ()] = L.plan(model, **kw)
        for opts in OPTIONS:
            out[model, tuple(sorted(opts.items()))] = L.plan(model, **kw, **opts)
    return out


def _par(r):
    return L.Parallel(tp=int(r.tp), pp=int(r.pp), dp=int(r.dp), zero=int(r.zero), sp=bool(r.sp), cp=int(r.cp),
                      ep=int(r.ep))


def _repriced(model, r, opts):
    kw = dict(batch=int(r.micro_batch), seq=T, grad_accum=int(r.grad_accum), recompute=r.recompute, **opts)
    return L.training_memory(model, parallel=_par(r), **kw), step_time(model, r.gpu, _par(r), **kw)


def _fits(model, r, opts):
    mem = L.training_memory(model, batch=int(r.micro_batch), seq=T, grad_accum=int(r.grad_accum),
                            recompute=r.recompute, parallel=_par(r), **opts)
    return mem.total_bytes <= USABLE_FRACTION * L.get_gpu(r.gpu).memory_bytes


@pytest.mark.parametrize("model", list(SEARCHES))
@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_every_plan_is_step_time_and_training_memory_with_the_same_options(frames, model, opts):
    df = frames[model, tuple(sorted(opts.items()))]
    assert len(df)
    # the chosen plans (cheapest, fastest), the last stage's heaviest cases (pipelines, few stages, many), and
    # a sample
    rows = pd.concat([df.head(3), df.nsmallest(3, "step_time_s"), df[df["pp"] > 1].head(4),
                      df[df["pp"] == df["pp"].max()].head(3), df[df["recompute"] == "full"].head(3),
                      df.sample(min(15, len(df)), random_state=1)])
    if "mtp_depth" in opts:
        assert (df["pp"] > 1).any() and (df["ep"] > 1).any()
    for r in rows.itertuples():
        mem, st = _repriced(model, r, opts)
        assert r.step_time_s == pytest.approx(st.step_s, rel=1e-9), (r.gpu, _par(r))
        assert r.mfu == pytest.approx(st.mfu, rel=1e-9)
        assert r.memory_per_gpu_bytes == pytest.approx(mem.total_bytes, rel=1e-9), (r.gpu, _par(r))
        assert mem.total_bytes <= USABLE_FRACTION * L.get_gpu(r.gpu).memory_bytes      # it fits there too
    # the option is priced: the module is more work (the steps of the same plans are longer, but where ZeRO-3's
    # exposed gathers hide behind the longer compute) and more memory on the last stage (the first may stay
    # the most loaded); capacity caps the skew (never longer) and sizes the expert buffers (never smaller)
    base = frames[model, ()]
    both = base.merge(df, on=KEY, suffixes=("", "_opt"))
    assert len(both)
    step, step0 = both["step_time_s_opt"], both["step_time_s"]
    longer = step > step0 * (1 + 1e-12)
    assert (both["memory_per_gpu_bytes_opt"] >= both["memory_per_gpu_bytes"] * (1 - 1e-12)).all()
    if "mtp_depth" in opts:
        assert (both["memory_per_gpu_bytes_opt"] > both["memory_per_gpu_bytes"] * (1 + 1e-9)).any()
    if opts == {"mtp_depth": 1}:
        assert (step >= step0 * (1 - 1e-12)).all()
        assert (longer | (both["zero"] == 3)).all() and longer.mean() > 0.9
    elif "mtp_depth" not in opts:
        assert not longer.any()
    assert all(f"{k}={v:g}" in df.attrs["assumes"] for k, v in opts.items())


@pytest.mark.parametrize("model", list(SEARCHES))
def test_a_plan_the_module_pushes_out_is_one_training_memory_says_does_not_fit(frames, model):
    """The fit verdict both ways: a (layout, micro-batch, recomputation) of the default search that the
    search with the MTP module and a capacity of 1.25 leaves out holds more than the usable memory in
    training_memory with them, and one it keeps fits there (the first test)."""
    opts = dict(mtp_depth=1, capacity_factor=1.25)
    base, df = frames[model, ()], frames[model, tuple(sorted(opts.items()))]
    gone = base.merge(df[KEY], on=KEY, how="left", indicator=True)
    gone = gone[gone["_merge"] == "left_only"]
    assert len(gone), "the module should push some plan out of memory"
    for r in pd.concat([gone.head(5), gone.sample(min(10, len(gone)), random_state=2)]).itertuples():
        assert _fits(model, r, {}) and not _fits(model, r, opts), (r.gpu, _par(r), r.recompute)


def test_the_job_carries_the_options_into_plan_and_back(frames):
    df = frames[QWEN, (("mtp_depth", 1),)]
    kw = SEARCHES[QWEN]
    job = Job(QWEN, "H100 SXM", T, L.Parallel(pp=2, dp=16, ep=8, zero=1), grad_accum=32, mtp_depth=1)
    got = L.plan(job, tokens=kw["tokens"], max_gpus=kw["max_gpus"], micro_batches=kw["micro_batches"])
    pd.testing.assert_frame_equal(got, df)
    r = df.iloc[0]
    back = Job.from_plan_row(r, QWEN, seq=T, mtp_depth=1)
    assert step_time(back).step_s == pytest.approx(r["step_time_s"], rel=1e-9)
    assert L.training_memory(back).total_bytes == pytest.approx(r["memory_per_gpu_bytes"], rel=1e-9)
    assert L.training_time(back, tokens=kw["tokens"]).days == pytest.approx(r["days"], rel=1e-9)


def test_the_defaults_are_the_old_search():
    kw = dict(SEARCHES[QWEN], gpus=("A100 80GB",))
    pd.testing.assert_frame_equal(L.plan(QWEN, **kw, mtp_depth=0, capacity_factor=None), L.plan(QWEN, **kw),
                                  check_exact=True)


def test_bad_options_are_refused_naming_them():
    kw = dict(tokens=1e12, seq=T, global_batch=64)
    for bad in (-1, 9):
        with pytest.raises(ValueError, match="mtp_depth"):
            L.plan(QWEN, mtp_depth=bad, **kw)
    for bad in (1.5, "1"):
        with pytest.raises(TypeError, match="mtp_depth"):
            L.plan(QWEN, mtp_depth=bad, **kw)
    for bad in (0.5, 65.0):
        with pytest.raises(ValueError, match="capacity_factor"):
            L.plan(QWEN, capacity_factor=bad, **kw)
    with pytest.raises(ValueError, match="mtp_depth=1.*dense"):
        L.plan("llama-3-8b", mtp_depth=1, **kw)
    with pytest.raises(ValueError, match="capacity_factor=1.0.*dense"):
        L.plan("llama-3-8b", capacity_factor=1.0, **kw)


def test_deepseek_v3_mtp_adds_the_flops_its_config_gives():
    """One MTP module of DeepSeek-V3 (arXiv:2412.19437, Sec. 2.2): a MoE block, its projection M (2h x h)
    and a pass through the shared output head (h x vocab), x 3 for training (forward + backward), against
    the main model's 61 layers and head: about 3.8% more FLOPs per token (issue 35), which the planner puts
    on the last stage."""
    H, V, a = 7168, 129280, 128
    mla = (H * 1536 + 1536 + 1536 * a * (128 + 64) + H * (512 + 64) + 512 + 512 * a * (128 + 128)
           + a * 128 * H)
    moe_active = mla + (8 + 1) * 3 * H * 2048 + H * 256 + 256 + 2 * H          # 8 routed + 1 shared, router
    dense = mla + 3 * H * 18432 + 2 * H
    # the attention core per layer and token, forward: Q K^T over 192 dims and the values' 128, T keys
    core = 2 * T * a * (128 + 64) + 2 * T * a * 128
    mtp = 3 * (2 * moe_active + core) + 3 * 2 * (2 * H * H + H * V)
    main = 3 * (2 * (3 * dense + 58 * moe_active + H * V + H) + 61 * core)
    assert mtp / main == pytest.approx(0.038, abs=0.0005)
    assert training_flops_per_token(V3, seq=T) == pytest.approx(main, rel=1e-6)
    # what the planner prices: the last stage's FLOPs per token grow by exactly the module's
    v3 = resolve_model(V3, moe=True)
    for pp in (1, 61):
        par = L.Parallel(pp=pp, dp=64, ep=64)
        with_mtp, without = (moe_stage_flops(v3, par, seq=T, recompute="none", mtp_depth=d) for d in (1, 0))
        assert with_mtp[:-1] == without[:-1]
        assert with_mtp[-1] - without[-1] == pytest.approx(mtp, rel=1e-6)


def test_the_cli_plan_takes_the_options(capsys):
    argv = ["plan", QWEN, "--tokens", "1T", "--gpu", "H100 SXM", "--seq", "4096", "--global-batch", "512",
            "--max-gpus", "256", "--json"]
    assert cli.main(argv) == 0
    base = capsys.readouterr().out
    assert cli.main(argv + ["--mtp-depth", "1", "--capacity-factor", "1.25"]) == 0
    assert capsys.readouterr().out != base
    assert cli.main(argv[:-1] + ["--mtp-depth", "1", "--capacity-factor", "1.25"]) == 0
    assert "mtp_depth=1, capacity_factor=1.25" in capsys.readouterr().out        # the plan's assumptions
    assert cli.main(["plan", "llama-3-8b", "--tokens", "1T", "--seq", "4096", "--global-batch", "64",
                     "--mtp-depth", "1"]) == 2
    assert "dense" in capsys.readouterr().err


def test_cost_by_gpu_plans_and_times_with_the_options():
    """cost_by_gpu's fewest GPUs (min_gpus), its plan on that many and its step all take the options (one
    MoE path): each row is training_time on that many GPUs with them, and the fewest GPUs hold a step of the
    row's layout in training_memory with them."""
    opts = dict(mtp_depth=1, capacity_factor=1.25)
    kw = dict(tokens=1e12, seq=T, gpus=("H100 SXM", "A100 80GB"))
    base, df = cost_by_gpu(QWEN, **kw), cost_by_gpu(QWEN, **kw, **opts)
    assert list(df["fits"]) == [True, True]
    for r in df.itertuples():
        fewest = min_gpus(QWEN, r.gpu, batch=1, seq=T, recompute="full", **opts)
        assert r.min_gpus == fewest.gpus
        assert L.training_memory(QWEN, batch=1, seq=T, recompute="full", parallel=fewest.parallel,
                                 **opts).total_bytes <= USABLE_FRACTION * L.get_gpu(r.gpu).memory_bytes
        t = L.training_time(QWEN, tokens=1e12, gpu=r.gpu, seq=T, n_gpus=r.min_gpus, recompute="full", **opts)
        assert r.gpu_hours == pytest.approx(t.gpu_hours, rel=1e-9)
        assert "1 MTP module" in r.warnings and "capacity factor 1.25" in r.warnings
        assert r.gpu_hours > base.set_index("gpu").loc[r.gpu, "gpu_hours"]
    with pytest.raises(ValueError, match="mtp_depth=1"):
        cost_by_gpu(QWEN, **kw, mtp_depth=1, mfu=0.3)
    with pytest.raises(ValueError, match="mtp_depth=1.*dense"):
        cost_by_gpu("llama-3-8b", **kw, mtp_depth=1)
