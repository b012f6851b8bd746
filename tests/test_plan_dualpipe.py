"""plan(schedule="dualpipe") (issue 35, dual48): the planner searches DeepSeek's DualPipe, each row priced as
step_time(schedule="dualpipe") and training_memory(schedule="dualpipe") price its layout ("one path").

What is checked, and where the expected values come from:

* every row of three mixtures of experts (Qwen3-30B-A3B, Mixtral-8x7B, DeepSeek-V3 with its own recipe) and
  of a dense model (Llama 3 8B) is
  re-priced with ``step_time`` and ``training_memory`` on the row's layout (``Job.from_plan_row``): the same
  step and the same memory to 1e-12 relative (the planner lays out DualPipe's order on arrays with the same
  operations, :mod:`llmsizing.plan_dualpipe`), hence the same fit;
* DualPipe's conditions, from the DeepSeek-V3 report (arXiv:2412.19437, Sec. 3.2.1, Fig. 5: each rank holds
  two stages, the first and the last of two pipelines fed from both ends, so the ranks pair up: an even
  ``pp``; both directions' micro-batches fill the pipeline before the steady state, ``pp`` of each: at least
  ``2 pp`` micro-batches, half entering at each end: an even number), checked on every row, not read off
  the code; no interleaved chunks (DualPipe's two chunks per rank are its own);
* DeepSeek-V3's 61 layers on its 16 stages: 61 = 3 + 14 x 4 + 2, the middle stages ceil(61 / 16) = 4 each,
  the rest (5) split 3 and 2 over the first and the last, the split chapter 18 checks DeepSeek's memory on;
* the bubble on equal stages, by hand from the report's Table 2 with F = 1, B = 2, W = 1 and F&B = F + B
  (a chunk's forward, its full backward, the weights' half of it): DualPipe's idle time is
  ``(pp/2 - 1)(F&B + B - 3W) = (pp/2 - 1) x 2``, 1F1B's ``(pp - 1)(F + B) = (pp - 1) x 3``, each over the
  ``m (F + B) = 3 m`` of compute: ``(pp - 2) / (3 m)`` against ``(pp - 1) / m``; DualPipe's is smaller for
  every ``pp >= 2``. With nothing hidden (``overlap=0``: the step is compute plus bubble plus all of the
  communication, which DualPipe does not move) a DualPipe row is then no slower than the same layout's 1F1B
  row; the mixtures of experts here have unequal stages (the embedding and the head), which DualPipe's
  pairing of stage ``i`` with ``pp - 1 - i`` evens out, so the rows are checked too.

On main (before dual48) ``plan(schedule="dualpipe")`` raised ValueError (job.SEARCH_REFUSES_DUALPIPE): every
test here but the bubble's fails there.
"""

import math

import pytest

import llmsizing as L
from llmsizing.job import Job
from llmsizing.layouts import step_time
from llmsizing.memory import USABLE_FRACTION

V3_RECIPE = dict(precision="fp8-deepseek", mtp_depth=1, comm_sms=20)

#: (model, GPU, seq, global batch, plan()'s narrowing, the recipe step_time and training_memory share)
SEARCHES = {
    "qwen3-30b-a3b": ("H100 SXM", 4096, 256, dict(max_gpus=256), {}),
    "mixtral-8x7b": ("H100 SXM", 4096, 256, dict(max_gpus=256, ep_degrees=(4, 8)), {}),
    "deepseek-v3": ("H800", 4096, 15360, dict(max_gpus=2048, ep_degrees=(64,), micro_batches=(1,),
                                               zero_stages=(1,)), V3_RECIPE),
    # a dense model: its full recomputation reruns every layer (no partial recomputation with DualPipe)
    "llama-3-8b": ("H100 SXM", 8192, 512, dict(max_gpus=256), {}),
}


def _plan(model, schedule="dualpipe", **more):
    gpu, seq, gb, narrow, recipe = SEARCHES[model]
    return L.plan(model, tokens=1e12, gpus=(gpu,), seq=seq, global_batch=gb, schedule=schedule,
                  **{**narrow, **more}, **recipe)


@pytest.mark.parametrize("model", list(SEARCHES))
def test_every_dualpipe_row_is_step_time_and_training_memory_of_its_layout(model):
    gpu, seq, _, _, recipe = SEARCHES[model]
    df = _plan(model)
    assert len(df) >= 10, f"{model}: {len(df)} DualPipe plans"
    limit = USABLE_FRACTION * L.get_gpu(gpu).memory_bytes
    for r in df.itertuples():
        job = Job.from_plan_row(r, model, seq=seq, schedule="dualpipe", **recipe)
        st = step_time(job)
        mem = L.training_memory(job)
        assert r.step_time_s == pytest.approx(st.step_s, rel=1e-12), r
        assert r.memory_per_gpu_bytes == pytest.approx(mem.total_bytes, rel=1e-12), r
        assert mem.total_bytes <= limit
        assert r.mfu == pytest.approx(st.mfu, rel=1e-12)


@pytest.mark.parametrize("model", list(SEARCHES))
def test_every_dualpipe_row_meets_the_papers_conditions(model):
    df = _plan(model)
    pp, m = df["pp"].to_numpy(), df["grad_accum"].to_numpy()
    assert (pp >= 2).all() and (pp % 2 == 0).all()             # ranks pair stage i with pp - 1 - i
    assert (m % 2 == 0).all() and (m >= 2 * pp).all()           # half from each end, pp of each to fill
    assert (df["virtual_stages"] == 1).all()
    assert df["recompute_layers"].isna().all()                  # (no partial recomputation with DualPipe)
    # and the 1F1B search of the same model does give odd pp or fewer micro-batches: the filter is DualPipe's
    # (DeepSeek-V3 narrowed so: no 1F1B plan, its pp 1 or 61)
    one = _plan(model, schedule="1f1b", explain=False)
    assert model == "deepseek-v3" or (
        (one["pp"] % 2 == 1) | (one["grad_accum"] < 2 * one["pp"]) | (one["grad_accum"] % 2 == 1)).any()


def test_deepseek_v3_is_searched_on_its_16_stages_with_the_balanced_split():
    from llmsizing.parallel import pipeline_split

    model = L.get_model("deepseek-v3")
    df = _plan("deepseek-v3")
    assert 16 in set(df["pp"])                                  # 61 layers: no even split gives 16 stages
    mid = math.ceil(61 / 16)
    rest = 61 - 14 * mid
    assert (mid, rest) == (4, 5)
    assert pipeline_split(model, 16) == {"stage_layers": (3,) + (4,) * 14 + (2,)}
    # the 1F1B search keeps Megatron-LM's splits only: pp 1 or 61 for 61 layers
    assert set(_plan("deepseek-v3", schedule="1f1b", explain=False)["pp"]) <= {1, 61}


@pytest.mark.parametrize("pp, m", [(2, 4), (2, 10), (4, 8), (6, 14), (8, 16), (8, 40), (16, 32), (16, 98)])
def test_the_planners_layout_on_arrays_is_the_scalar_one_bit_for_bit(pp, m):
    """plan_dualpipe.dualpipe_makespans (levels of blocks on arrays of rows) against
    pipeline_schedule.dualpipe_makespan (DualPipe's phases run one operation at a time) on random unequal
    stages, equal stages and one stage far slower: the same floats."""
    import numpy as np

    from llmsizing.pipeline_schedule import dualpipe_makespan
    from llmsizing.plan_dualpipe import dualpipe_makespans

    rng = np.random.default_rng(pp * 1000 + m)
    times = np.vstack([rng.uniform(0.2, 3.0, (12, pp)), np.ones(pp), np.r_[np.ones(pp - 1), 9.0]])
    got = dualpipe_makespans(times, m)
    want = np.array([dualpipe_makespan(tuple(t), m) for t in times.tolist()])
    assert np.array_equal(got, want)
    assert (got >= m * ((times + times[:, ::-1]) / 2).max(axis=1) * (1 - 1e-12)).all()   # m x the top rank


@pytest.mark.parametrize("pp, m", [(2, 4), (4, 8), (8, 16), (8, 40), (16, 32)])
def test_dualpipe_bubble_on_equal_stages_is_table_2s_and_below_1f1b(pp, m):
    from llmsizing.moe_time import schedule_bubble

    equal = (1.0,) * pp
    dual = schedule_bubble("dualpipe", pp, m, stage_times=equal)
    one = schedule_bubble("1f1b", pp, m, stage_times=equal)
    assert dual == pytest.approx((pp / 2 - 1) * 2 / (3 * m), abs=1e-12)   # (pp/2 - 1)(F&B + B - 3W) / 3m
    assert one == pytest.approx((pp - 1) * 3 / (3 * m), rel=1e-12)        # (pp - 1)(F + B) / 3m
    assert dual < one


@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "mixtral-8x7b"])
def test_with_nothing_hidden_a_dualpipe_row_is_no_slower_than_1f1b_on_its_layout(model):
    keys = ["gpu", "tp", "cp", "pp", "dp", "ep", "zero", "micro_batch", "grad_accum", "recompute"]
    dual = _plan(model, overlap=0.0).set_index(keys)["step_time_s"]
    one = _plan(model, schedule="1f1b", overlap=0.0).set_index(keys)["step_time_s"]
    both = dual.index.intersection(one.index)
    assert len(both) >= 10
    assert (dual.loc[both] <= one.loc[both]).all()
    assert (dual.loc[both] < one.loc[both]).mean() > 0.9        # (strictly faster but where pp's bubble is 0)
    # the best DualPipe plan of each layout is no slower than 1F1B's best on that layout
    lay = ["gpu", "tp", "cp", "pp", "dp", "ep", "zero"]
    best_d = dual.loc[both].groupby(lay).min()
    best_1 = one.loc[both].groupby(lay).min()
    assert (best_d <= best_1).all()


def test_job_and_the_cli_plan_command_take_dualpipe(capsys):
    import json

    from llmsizing import cli

    gpu, seq, gb, narrow, _ = SEARCHES["qwen3-30b-a3b"]
    df = _plan("qwen3-30b-a3b")
    job = Job.from_plan_row(df.iloc[0], "qwen3-30b-a3b", seq=seq, schedule="dualpipe")
    got = L.plan(job, tokens=1e12, max_gpus=narrow["max_gpus"], global_batch=gb)
    assert got["step_time_s"].iloc[0] == pytest.approx(df["step_time_s"].iloc[0], rel=1e-12)
    rc = cli.main(["plan", "qwen3-30b-a3b", "--tokens", "1T", "--seq", str(seq), "--global-batch", str(gb),
                   "--gpu", gpu, "--max-gpus", str(narrow["max_gpus"]), "--schedule", "dualpipe", "--all",
                   "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    rows = json.loads(out)
    want = list(df["step_time_s"].head(len(rows)))
    assert [r["step_time_s"] for r in rows] == pytest.approx(want, rel=1e-9)
    assert all(r["pp"] % 2 == 0 for r in rows)


def test_dualpipe_refusals_name_the_parameter():
    with pytest.raises(ValueError, match="virtual_stages=.*schedule='dualpipe' has no interleaved chunks"):
        L.plan("llama-3-8b", tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=256,
               schedule="dualpipe", virtual_stages=(2,))
    with pytest.raises(ValueError, match="shard_under_pipeline=True with schedule='dualpipe'"):
        L.plan("llama-3-8b", tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=256,
               schedule="dualpipe", shard_under_pipeline=True)
