"""cost_by_gpu, training_time and the CLI's cost/time/plan take ``accounted_split`` as plan() and min_gpus do
(cost49), and the layout a mixture of experts is timed on keeps the planner's split of its ``pp``.

What is checked, and where the expected values come from:

* Qwen3-30B-A3B (48 layers) under DualPipe on H100s: with Megatron-LM's accounted split the embedding and the
  loss each take a layer's place, 48 + 2 = 50 = 10 x 5, so 10 stages of 4, eight 5s, 4 (the first and the last
  one layer fewer); 10 is even, as DualPipe needs, and divides neither 48 nor any even split DualPipe's
  default search tries, so only ``accounted_split=True`` reaches it. min_gpus finds 20 GPUs on it, 24 without
  (one49, dmin49). cost_by_gpu's count is min_gpus', its layout the fastest plan on that many (pp 10 too),
  and the days on it x 24 x 20 are its GPU-hours.
* training_time on exactly 20 H100s: the default global batch is 2**22 tokens rounded up to a multiple of 20
  sequences of 4,096: 20 x ceil(1,024 / 20) = 1,040; the fastest plan of plan(accounted_split=True) on 20 GPUs
  at 1,040 sequences is the layout, so the days are that plan row's. Without accounted_split there is no
  DualPipe plan on 20 GPUs (the even DualPipe splits of 48 layers give pp in 2, 4, 6, 8, 12, 16, 24: a 20-GPU
  layout would be pp 2 or 4 with tp x dp 10 or 5, and none holds it), so the call is refused.
* DeepSeek-V3 (61 layers) under DualPipe on H800s, pp 16: the planner splits 61 as 3, fourteen 4s, 2
  (uneven_split), and a plan row names only pp; before cost49 the layout timed was Parallel(pp=16) with the
  default split (61 = 16 x 3 + 13: thirteen 4s, then three 3s), so training_time's days on a count were not
  the days of plan()'s row it took the layout from.
* Every test above that passes ``accounted_split`` fails on the old code (TypeError: unexpected keyword); the
  V3 one fails on the old code by its days.
"""

from __future__ import annotations

import json

import pytest

import llmsizing as L
from llmsizing import cli
from llmsizing.fewest_gpus import dualpipe_fewest_accum, min_gpus
from llmsizing.parallel import Parallel, layers_per_stage
from llmsizing.time_cost import cost_by_gpu, training_time

H100 = "H100 SXM"
QWEN = "qwen3-30b-a3b"
DP = dict(schedule="dualpipe")


def test_cost_by_gpu_takes_the_accounted_split_20_h100s_not_24():
    plain = cost_by_gpu(QWEN, tokens=1e12, seq=4096, gpus=[H100], **DP).iloc[0]
    acc = cost_by_gpu(QWEN, tokens=1e12, seq=4096, gpus=[H100], accounted_split=True, **DP).iloc[0]
    assert plain["min_gpus"] == 24 and acc["min_gpus"] == 20
    fewest = min_gpus(QWEN, H100, batch=1, seq=4096, recompute="full", grad_accum=dualpipe_fewest_accum(QWEN),
                      accounted_split=True, **DP)
    p = fewest.parallel
    assert p.tp * p.pp * p.dp == 20 and p.pp == 10
    assert list(layers_per_stage(48, p)) == [4] + [5] * 8 + [4]            # 50 places = 10 x 5, by hand
    assert fewest.gpus == 20 and "PP10" in acc["layout"]     # (the layout: the fastest plan on those 20)
    assert acc["days_on_min_gpus"] * 24 * 20 == pytest.approx(acc["gpu_hours"], rel=1e-12)
    assert "PP10" in acc["warnings"] and "PP10" not in plain["warnings"]


def test_training_time_without_a_count_runs_on_the_accounted_fewest():
    plain = training_time(QWEN, tokens=1e12, gpu=H100, seq=4096, **DP)
    acc = training_time(QWEN, tokens=1e12, gpu=H100, seq=4096, accounted_split=True, **DP)
    assert (plain.n_gpus, acc.n_gpus) == (24, 20)
    assert "PP10" in acc.warnings[0]


def test_training_time_on_20_h100s_is_the_accounted_plan_rows():
    with pytest.raises(ValueError, match="schedule='dualpipe'"):      # no even DualPipe split on 20
        training_time(QWEN, tokens=1e12, gpu=H100, seq=4096, n_gpus=20, **DP)
    t = training_time(QWEN, tokens=1e12, gpu=H100, seq=4096, n_gpus=20, accounted_split=True, **DP)
    gb = 20 * -(-1024 // 20)
    assert gb == 1040 and "1,040 sequences per step" in t.warnings[0]
    df = L.plan(QWEN, tokens=1e12, gpus=(H100,), seq=4096, global_batch=gb, gpu_counts=(20,), max_gpus=20,
                recomputes=("none",), accounted_split=True, explain=False, **DP)
    row = df.loc[df["step_time_s"].idxmin()]
    assert (row["n_gpus"], row["pp"]) == (20, 10)
    assert t.days == pytest.approx(row["days"], rel=1e-12)


def test_deepseek_v3_dualpipe_on_a_count_is_timed_on_the_plans_uneven_split():
    n, gb = 512, 1024                               # 512 x ceil(1,024 / 512) sequences of 4,096
    t = training_time("deepseek-v3", tokens=14.8e12, gpu="H800", seq=4096, n_gpus=n, recompute="full", **DP)
    df = L.plan("deepseek-v3", tokens=14.8e12, gpus=("H800",), seq=4096, global_batch=gb, gpu_counts=(n,),
                max_gpus=n, recomputes=("full",), explain=False, **DP)
    row = df.loc[df["step_time_s"].idxmin()]
    assert row["pp"] == 16 and f"PP16 DP{int(row['dp'])}" in t.warnings[0]
    assert t.days == pytest.approx(row["days"], rel=1e-12)
    default = Parallel(pp=16)                # what the row's pp alone gave before: not the plan's split
    assert layers_per_stage(61, default) == (4,) * 13 + (3,) * 3


@pytest.mark.parametrize("call", [
    lambda: cost_by_gpu(QWEN, tokens=1e12, seq=4096, gpus=[H100], accounted_split="yes"),
    lambda: training_time(QWEN, tokens=1e12, gpu=H100, seq=4096, accounted_split=1)])
def test_accounted_split_is_a_bool(call):
    with pytest.raises((TypeError, ValueError), match="accounted_split"):
        call()


@pytest.mark.parametrize("kw", [dict(model="llama-3-8b", n_gpus=8),
                                dict(model=QWEN, parallel=Parallel(tp=2, sp=True, pp=12, ep=2)),
                                dict(model=QWEN, n_gpus=24, mfu=0.3)])
def test_training_time_refuses_accounted_split_where_it_plans_no_layout(kw):
    with pytest.raises(ValueError, match="accounted_split=True"):
        training_time(kw.pop("model"), tokens=1e12, gpu=H100, seq=4096, accounted_split=True, **kw)


def test_the_default_is_unchanged():
    a = cost_by_gpu(QWEN, tokens=1e12, seq=4096, gpus=[H100])
    b = cost_by_gpu(QWEN, tokens=1e12, seq=4096, gpus=[H100], accounted_split=False)
    assert a.equals(b)


def _cli(capsys, argv):
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_commands_take_accounted_split(capsys):
    base = [QWEN, "--tokens", "1T", "--seq", "4096", "--gpu", H100, "--json", "--schedule", "dualpipe"]
    rc, out, err = _cli(capsys, ["cost", *base, "--accounted-split"])
    assert (rc, err) == (0, "") and json.loads(out)[0]["min_gpus"] == 20
    rc, out, err = _cli(capsys, ["time", *base, "--gpus", "20", "--accounted-split"])
    assert (rc, err) == (0, "")
    t = training_time(QWEN, tokens=1e12, gpu=H100, seq=4096, n_gpus=20, accounted_split=True, **DP)
    assert {r["case"]: r for r in json.loads(out)}["central"]["days"] == pytest.approx(t.days, rel=1e-9)
    rc, out, err = _cli(capsys, ["plan", QWEN, "--tokens", "1T", "--seq", "4096", "--gpu", H100, "--json",
                                 "--global-batch", "1040", "--max-gpus", "20", "--schedule", "dualpipe",
                                 "--recompute", "none", "--accounted-split"])
    assert rc == 0 and min(r["n_gpus"] for r in json.loads(out)) == 20
    rc, out, err = _cli(capsys, ["time", QWEN, "--stage", "1T:4096", "--gpu", H100, "--gpus", "20",
                                 "--accounted-split"])
    assert rc != 0 and "--accounted-split" in err
