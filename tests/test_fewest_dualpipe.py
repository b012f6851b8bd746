"""min_gpus(schedule="dualpipe") (issue 35, dmin49: one answer per question): the fewest GPUs DeepSeek's
DualPipe runs on, searched by the planner's rules, so that min_gpus and plan(schedule="dualpipe") give one
count for one question, and what builds on it (cost_by_gpu, training_time's chosen layout, the CLI) answers
too where it refused before.

What is checked, and where the expected values come from:

* the count is the smallest ``n_gpus`` of ``plan(schedule="dualpipe")`` for the same model, GPU, recipe and
  limits (``micro_batches=(batch,)``, ``recomputes=(recompute,)``, ``cp_degrees=(1,)``, ``max_pp`` at most
  ``grad_accum / 2``, a global batch that is a multiple of ``batch x grad_accum x dp``): DualPipe's memory
  does not depend on the micro-batch count beyond the ``pp`` it allows (the DeepSeek-V3 report,
  arXiv:2412.19437, Table 2: ``PP + 1`` micro-batches of activations whatever the count), so a plan row on
  fewer GPUs would be a layout min_gpus weighs and finds; and the answer's own layout is a plan row, as the
  global batch gives it ``grad_accum`` micro-batches. Four models: DeepSeek-V3 on H800s with its recipe
  (FP8, the MTP module, 20 SMs), Qwen3-30B-A3B, a dense model (Llama 3 8B) and one where nothing fits (both
  refuse, naming the parameter);
* the answer's memory is ``training_memory(schedule="dualpipe")`` of its layout and its step
  ``step_time(schedule="dualpipe")``'s (overlap 0, as min_gpus breaks ties), to 1e-12;
* DualPipe's conditions on the answer, from the report (Sec. 3.2.1) and ``dualpipe.py``'s assertions, not
  read off the code: ``pp`` even and at least 2, ``grad_accum`` even and at least ``2 pp``;
* DeepSeek-V3's micro-batches that allow every ``pp``, by hand: 61 layers divide by no even ``pp``, and the
  uneven split (equal middle stages of ``ceil(61 / pp)``, at least 2 layers left for the first and the last)
  exists up to ``pp = 16`` (14 x 4 + 5) and for no even ``pp`` above (18: 16 x 4 = 64 > 61; 22: 20 x 3 = 60
  leaves 1; 32: 30 x 2 = 60 leaves 1): 2 x 16 = 32;
* DeepSeek-V3's count argued from the report's layout (EP 64 -> 32, DP 128 -> 32 at PP 16: the extra routed
  experts' bytes by hand, the activations unchanged, the layout fits): at most 512 H800s;
* the count at the report's own 120 micro-batches (15,360 sequences over 128 data-parallel ranks) is the count
  at 32 (Table 2: the memory does not depend on it);
* no DualPipe layout on fewer GPUs holds the step, weighed one by one with ``training_memory`` (the dense
  model and Qwen3-30B-A3B: every ``tp``, even ``pp`` with a split, ZeRO stage, ``ep`` and ``dp`` below the
  count), not through min_gpus' solved ``dp``.

On main (before dmin49) min_gpus, cost_by_gpu and training_time without a layout refused ``"dualpipe"``
(job.SEARCH_REFUSES_DUALPIPE): every test here but the hand count of micro-batches fails there.
"""

from __future__ import annotations

import json

import pytest

import llmsizing as L
from llmsizing import cli
from llmsizing.deepseek import DEEPSEEK_V3_LAYOUT
from llmsizing.fewest_gpus import dualpipe_fewest_accum, min_gpus
from llmsizing.layouts import _divisors, step_time
from llmsizing.memory import USABLE_FRACTION, training_memory
from llmsizing.moe_default import moe_default_global_batch
from llmsizing.moe_layouts import dp_unit
from llmsizing.parallel import Parallel, check_layout, pipeline_split, uneven_split
from llmsizing.time_cost import cost_by_gpu, training_time

V3_RECIPE = dict(precision="fp8-deepseek", mtp_depth=1, comm_sms=20)

#: (model, GPU, seq, recompute, the recipe, plan()'s global batch and GPU limit)
CASES = {
    "deepseek-v3": ("H800", 4096, "none", V3_RECIPE, 15360, 1024),
    "qwen3-30b-a3b": ("H100 SXM", 4096, "none", {}, 768, 64),
    "llama-3-8b": ("H100 SXM", 8192, "full", {}, 512, 64),
}


def _fewest(model, grad_accum=None, **more):
    gpu, seq, rc, recipe, _, _ = CASES[model]
    m = dualpipe_fewest_accum(model) if grad_accum is None else grad_accum
    return min_gpus(model, gpu, batch=1, seq=seq, grad_accum=m, recompute=rc, schedule="dualpipe",
                    **recipe, **more), m


def test_deepseek_v3s_micro_batches_that_allow_every_pp_by_hand():
    assert dualpipe_fewest_accum("deepseek-v3") == 32
    assert uneven_split(61, 16) == (3,) + (4,) * 14 + (2,)
    assert all(uneven_split(61, p) is None for p in range(18, 61, 2))


@pytest.mark.parametrize("model", list(CASES))
def test_the_count_is_plans_smallest_and_the_layout_is_a_plan_row(model):
    gpu, seq, rc, recipe, gb, most = CASES[model]
    best, m = _fewest(model)
    par = best.parallel
    assert gb % (m * par.dp) == 0                      # (the answer's layout has m micro-batches in the plan)
    df = L.plan(model, tokens=1e12, gpus=(gpu,), seq=seq, global_batch=gb, max_gpus=most, micro_batches=(1,),
                recomputes=(rc,), cp_degrees=(1,), max_pp=m // 2, schedule="dualpipe", **recipe)
    assert best.gpus == df["n_gpus"].min()
    keys = dict(tp=par.tp, pp=par.pp, dp=par.dp, zero=par.zero, **({"ep": par.ep} if par.ep > 1 else {}))
    row = df[(df[list(keys)] == list(keys.values())).all(axis=1)]
    assert len(row) == 1 and row["grad_accum"].iloc[0] == gb // par.dp
    assert row["memory_per_gpu_bytes"].iloc[0] == pytest.approx(best.total_bytes, rel=1e-12)


@pytest.mark.parametrize("model", list(CASES))
def test_the_memory_and_step_are_training_memory_and_step_time_of_its_layout(model):
    gpu, seq, rc, recipe, _, _ = CASES[model]
    best, m = _fewest(model)
    par = best.parallel
    assert par.pp >= 2 and par.pp % 2 == 0 and m % 2 == 0 and m >= 2 * par.pp     # (the report's conditions)
    assert par.virtual_stages == 1 and par.offload == "none" and par.zero <= 1
    assert par.stage_layers == pipeline_split(L.get_model(model), par.pp).get("stage_layers")
    mem_kw = {k: v for k, v in recipe.items() if k != "comm_sms"}
    mem = training_memory(model, parallel=par, batch=1, seq=seq, grad_accum=m, recompute=rc,
                          schedule="dualpipe", **mem_kw)
    assert best.total_bytes == pytest.approx(mem.total_bytes, rel=1e-12)
    assert mem.total_bytes <= USABLE_FRACTION * L.get_gpu(gpu).memory_bytes
    st = step_time(model, gpu, par, batch=1, seq=seq, grad_accum=m, recompute=rc, overlap=0.0,
                   schedule="dualpipe", **recipe, **({"max_nodes": "model"} if par.ep > 1 else {}))
    assert best.step_s == pytest.approx(st.step_s, rel=1e-12)
    assert best.bubble == pytest.approx(st.bubble, rel=1e-12)


def test_deepseek_v3s_count_at_the_reports_micro_batches_is_the_same():
    """The report's 15,360 sequences over 128 data-parallel ranks are 120 micro-batches; DualPipe's memory is
    the same at 120 as at 32 (Table 2: PP + 1 micro-batches of activations), so is the fewest GPUs."""
    assert 15360 // DEEPSEEK_V3_LAYOUT.dp == 120
    assert _fewest("deepseek-v3", 120)[0].gpus == _fewest("deepseek-v3")[0].gpus
    # with 4 micro-batches only pp = 2 runs (at least 2 pp): the answer has it, on no fewer GPUs
    two, _ = _fewest("llama-3-8b", 4)
    assert two.parallel.pp == 2 and two.gpus >= _fewest("llama-3-8b")[0].gpus


def test_deepseek_v3s_fewest_h800s_argued_from_the_reports_layout():
    """The report's layout (TP1 PP16 DP128 EP64 ZeRO-1, 2,048 H800s, with the planner's split 3, fourteen 4s,
    2) with half its expert parallelism and a quarter of its data parallelism, EP32 DP32 on 512 GPUs: a middle
    rank (stages i and 15 - i, four MoE layers each) holds 256 / 32 = 8 routed experts a layer instead of 4,
    so 4 x 8 x (3 x 7168 x 2048) = 1,409,286,144 more parameters: 2 bytes each of BF16 weights, 4 of FP32
    gradients, 1 of FP8 copies and an FP32 scale per 128 x 128 block (86,016 blocks); rank 0 (the 3 dense
    layers, the last 2 MoE layers and the MTP module's) 4 x 3 experts more. The activations do not move (the
    same tp, pp, micro-batch and recomputation). With full recomputation that layout holds the step, so
    DualPipe's fewest H800s are at most 512 (plan(schedule="dualpipe")'s 512-GPU rows hold it too)."""
    from dataclasses import replace

    split = pipeline_split(L.get_model("deepseek-v3"), 16)
    assert split == {"stage_layers": (3,) + (4,) * 14 + (2,)}
    report = replace(DEEPSEEK_V3_LAYOUT, **split)
    fewer = replace(report, ep=32, dp=32)
    assert (report.gpus, fewer.gpus) == (2048, 512)
    kw = dict(batch=1, seq=4096, grad_accum=32, recompute="full", schedule="dualpipe",
              precision="fp8-deepseek", mtp_depth=1, _all_stages=True)
    ranks = zip(training_memory("deepseek-v3", parallel=report, **kw),
                training_memory("deepseek-v3", parallel=fewer, **kw))
    expert = 3 * 7168 * 2048
    for a, b in ranks:
        more = 4 * (3 if a.stage == 0 else 8) * expert
        assert b.states.weights_bytes - a.states.weights_bytes == 2 * more
        assert b.states.gradients_bytes - a.states.gradients_bytes == 4 * more
        assert b.states.fp8_weights_bytes - a.states.fp8_weights_bytes == more + 4 * more // (128 * 128)
        assert b.activations.total_bytes == a.activations.total_bytes
    limit = USABLE_FRACTION * L.get_gpu("H800").memory_bytes
    assert training_memory("deepseek-v3", parallel=fewer, **{**kw, "_all_stages": False}).total_bytes <= limit
    best = min_gpus("deepseek-v3", "H800", batch=1, seq=4096, grad_accum=32, recompute="full",
                    schedule="dualpipe", **V3_RECIPE)
    assert best.gpus <= fewer.gpus and best.total_bytes <= limit


def _layouts_below(model, n, per_node=8):
    """Every DualPipe layout of fewer than ``n`` GPUs (the report's conditions: an even pp from 2 with a
    split the planner gives by default, ZeRO 0 or 1, ``ep`` any divisor of the routed experts, ``dp`` any
    multiple of what it needs), built directly. (Qwen3-30B-A3B's 48 layers on 10 stages with Megatron's
    accounted split, 4, eight 5s, 4 layers, hold it on 20 GPUs: ``plan(accounted_split=True)`` searches
    that split for a mixture of experts, as ``min_gpus(accounted_split=True)`` does; neither default does:
    ``tests/test_fewest_accounted.py``.)"""
    M = L.get_model(model)
    eps = _divisors(M.experts) if M.is_moe else (1,)
    for tp in _divisors(per_node):
        for pp in range(2, n // tp + 1, 2):
            split = {} if M.layers % pp == 0 else pipeline_split(M, pp)
            if M.layers % pp and (M.layers + 2) % pp and "stage_layers" not in split:
                continue                                       # (no split the planner gives)
            if M.is_moe and M.layers % pp and (M.layers + 2) % pp == 0:
                continue                   # (Megatron's accounted split: a mixture of experts' only with
                #                            accounted_split=True, off by default in plan and min_gpus)
            try:
                check_layout(M, tp=tp, pp=pp)
            except ValueError:
                continue
            for ep in eps:
                a = dp_unit(tp, 1, ep)
                for dp in range(a, (n - 1) // (tp * pp) + 1, a):
                    for zero in (0, 1):
                        try:
                            yield Parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=tp > 1, ep=ep, **split)
                        except ValueError:
                            continue


@pytest.mark.parametrize("model", ["llama-3-8b", "qwen3-30b-a3b"])
def test_no_dualpipe_layout_on_fewer_gpus_holds_the_step(model):
    gpu, seq, rc, recipe, _, _ = CASES[model]
    best, m = _fewest(model)
    limit = USABLE_FRACTION * L.get_gpu(gpu).memory_bytes
    weighed = 0
    for par in _layouts_below(model, best.gpus):
        if m < 2 * par.pp:
            continue
        mem = training_memory(model, parallel=par, batch=1, seq=seq, grad_accum=m, recompute=rc,
                              schedule="dualpipe")
        assert mem.total_bytes > limit, par
        weighed += 1
    assert weighed >= 5


def test_nothing_fits_both_refuse_naming_the_limit():
    """Llama 3 70B at 32K tokens without recomputation on at most 8 A100 40GB: no DualPipe layout holds it
    (its weights alone, 70B x 16 bytes of mixed-precision Adam over 8 x 40 GB, do not): min_gpus names
    max_gpus, plan says nothing fits."""
    kw = dict(seq=32768, recompute="none")
    with pytest.raises(ValueError, match=r"no layout of up to max_gpus=8 A100 40GB GPUs holds batch=1"):
        min_gpus("llama-3-70b", "A100 40GB", batch=1, grad_accum=8, max_gpus=8, schedule="dualpipe", **kw)
    with pytest.raises(ValueError, match=r"no layout holds llama-3-70b .* within max_gpus=8"):
        L.plan("llama-3-70b", tokens=1e12, gpus=("A100 40GB",), global_batch=64, max_gpus=8,
               micro_batches=(1,), recomputes=("none",), schedule="dualpipe", seq=32768)


@pytest.mark.parametrize("call, words", [
    (lambda: min_gpus("llama-3-8b", "H100 SXM", batch=1, seq=8192, schedule="dualpipe"),
     "schedule='dualpipe' needs an even grad_accum >= 2 pp >= 4"),
    (lambda: min_gpus("llama-3-8b", "H100 SXM", batch=1, seq=8192, grad_accum=7, schedule="dualpipe"),
     "got grad_accum=7"),
    (lambda: min_gpus("llama-3-8b", "H100 SXM", batch=1, seq=8192, grad_accum=8, offload=True,
                      schedule="dualpipe"), "offload=True with schedule='dualpipe'"),
])
def test_bad_dualpipe_searches_are_refused_naming_the_parameter(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_the_refusal_says_which_grad_accum_allows_every_pp():
    with pytest.raises(ValueError, match="every one of llama-3-8b's with grad_accum=64"):
        min_gpus("llama-3-8b", "H100 SXM", batch=1, seq=8192, schedule="dualpipe")


def test_cost_by_gpu_and_training_time_choose_on_dualpipes_fewest_gpus():
    """cost_by_gpu(schedule="dualpipe"): each row's count is min_gpus' at the micro-batches that allow every
    pp (plan's smallest, above), its days training_time's on that many GPUs with the same recipe."""
    recipe = dict(schedule="dualpipe", comm_sms=20)
    df = cost_by_gpu("deepseek-v3", tokens=14.8e12, seq=4096, gpus=("H800",), **recipe)
    row = df.iloc[0]
    fewest = min_gpus("deepseek-v3", "H800", batch=1, seq=4096, recompute="full", grad_accum=32, **recipe)
    assert row["fits"] and row["min_gpus"] == fewest.gpus
    t = training_time("deepseek-v3", tokens=14.8e12, gpu="H800", seq=4096, n_gpus=int(row["min_gpus"]),
                      recompute="full", **recipe)
    assert row["days_on_min_gpus"] == pytest.approx(t.days, rel=1e-9)
    assert "schedule=dualpipe" in row["warnings"]


def test_training_time_on_a_given_layout_takes_dualpipes_micro_batches():
    """The published layout (PP 16, DP 128) without a global batch: 2**22 tokens are 1,024 sequences of 4K, 8
    a data-parallel rank, fewer than 1F1B's pp = 16 and DualPipe's 2 pp = 32, so 32 x 128 = 4,096 sequences
    (1F1B: 16 x 128 = 2,048). Before dmin49 the 2,048 went to step_time, which refused 16 < 32."""
    assert moe_default_global_batch(DEEPSEEK_V3_LAYOUT, seq=4096) == 2048
    assert moe_default_global_batch(DEEPSEEK_V3_LAYOUT, seq=4096, schedule="dualpipe") == 4096
    t = training_time("deepseek-v3", tokens=14.8e12, gpu="H800", seq=4096, parallel=DEEPSEEK_V3_LAYOUT,
                      schedule="dualpipe", **V3_RECIPE)
    assert "4,096 sequences per step" in t.warnings[0]
    own = training_time("deepseek-v3", tokens=14.8e12, gpu="H800", seq=4096, parallel=DEEPSEEK_V3_LAYOUT,
                        global_batch=4096, schedule="dualpipe", **V3_RECIPE)
    assert t.days == pytest.approx(own.days, rel=1e-12)


def test_training_time_without_a_gpu_count_runs_on_dualpipes_fewest():
    t = training_time("qwen3-30b-a3b", tokens=1e12, gpu="H100 SXM", seq=4096, schedule="dualpipe")
    fewest = min_gpus("qwen3-30b-a3b", "H100 SXM", batch=1, seq=4096, grad_accum=96, schedule="dualpipe")
    assert f"on the layout {L.mfu._layout_label(fewest.parallel)}," in t.warnings[0]


def _cli(capsys, argv):
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_cost_and_time_commands_take_dualpipe(capsys):
    argv = ["cost", "qwen3-30b-a3b", "--tokens", "1T", "--seq", "4096", "--gpu", "H100 SXM", "--json",
            "--schedule", "dualpipe"]
    rc, out, err = _cli(capsys, argv)
    assert (rc, err) == (0, "")
    df = cost_by_gpu("qwen3-30b-a3b", tokens=1e12, seq=4096, gpus=["H100 SXM"], schedule="dualpipe")
    assert json.loads(out)[0]["gpu_hours"] == pytest.approx(df["gpu_hours"].iloc[0], rel=1e-9)
    argv = ["time", "qwen3-30b-a3b", "--tokens", "1T", "--seq", "4096", "--gpu", "H100 SXM", "--gpus", "64",
            "--json", "--schedule", "dualpipe"]
    rc, out, err = _cli(capsys, argv)
    assert (rc, err) == (0, "")
    t = training_time("qwen3-30b-a3b", tokens=1e12, gpu="H100 SXM", seq=4096, n_gpus=64, schedule="dualpipe")
    assert {r["case"]: r for r in json.loads(out)}["central"]["days"] == pytest.approx(t.days, rel=1e-9)
