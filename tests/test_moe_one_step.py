"""Issue 35's "Done when": ``training_time``, ``step_time`` and ``plan`` give the same step for the same MoE
layout, on several mixtures of experts and every MoE option the three share (audit35).

Each case is a layout written here by hand, not one read off a search. The three public calls are asked the
same question: ``step_time`` with keyword arguments, ``training_time`` with ``parallel=`` and
``global_batch=``, and the row of ``plan()`` with exactly that layout (the search narrowed to its ``ep``,
micro-batch, recomputation and ZeRO stage). Nothing is compared with a stored number: the days must be the
step's own arithmetic, ``tokens / (global_batch x seq) x step / 86,400``, and the three answers must agree
with each other.
tests/test_job.py re-checks plan rows through ``Job``; tests/test_moe_time.py does one model directly.
"""

import pytest

import llmsizing as L
from llmsizing.layouts import step_time

TOKENS = 1e12

#: (model, gpu, layout, seq, global batch, micro-batch, recomputation, options the three calls share).
#: The options: the recipe (precision), DeepSeek-V3's MTP module, DeepSeek-V2's token dropping at
#: capacity 1.0, DeepEP's dispatcher; the layouts: expert parallelism with tensor, sequence and pipeline
#: parallelism, ZeRO 1 and 2, micro-batches of 1 to 4. Only layouts plan() searches for a mixture of
#: experts: its ``pp`` divides the layers (DeepSeek-V3's 61: 1 or 61), no interleaving, the 1F1B schedule,
#: no SMs kept for communication (the published DeepSeek-V3 layout, 16 uneven stages under DualPipe, is
#: step_time's alone: tests/test_moe_runs.py).
CASES = [
    ("mixtral-8x7b", "H100 SXM", L.Parallel(tp=2, sp=True, pp=2, dp=8, ep=8, zero=1), 4096, 256, 1, "full",
     {}),
    ("mixtral-8x7b", "A100 80GB", L.Parallel(pp=4, dp=16, ep=8, zero=1), 4096, 256, 1, "full", {}),
    ("qwen3-30b-a3b", "H100 SXM", L.Parallel(tp=2, sp=True, dp=16, ep=16, zero=2), 4096, 256, 2, "selective",
     {}),
    ("qwen3-235b-a22b", "H100 SXM", L.Parallel(pp=2, dp=64, ep=32, zero=1), 4096, 512, 1, "full", {}),
    ("deepseek-v3", "H800", L.Parallel(tp=4, sp=True, dp=128, ep=256, zero=1), 4096, 1920, 1, "full",
     {"precision": "fp8-deepseek", "mtp_depth": 1}),
    ("deepseek-v2", "H800", L.Parallel(tp=2, sp=True, pp=4, dp=16, ep=8, zero=1), 4096, 512, 1, "full",
     {"capacity_factor": 1.0}),
    ("olmoe-1b-7b", "H100 SXM", L.Parallel(dp=16, ep=8, zero=1), 4096, 256, 4, "none",
     {"dispatcher": "deepep"}),
    ("gpt-oss-120b", "H100 SXM", L.Parallel(pp=2, dp=32, ep=16, zero=1), 4096, 256, 1, "full", {}),
    ("llama-4-scout", "H100 SXM", L.Parallel(tp=2, sp=True, pp=4, dp=8, ep=16, zero=1), 8192, 128, 1, "full",
     {"precision": "fp8-mixed"}),
    ("granite-3.0-3b-a800m", "H100 SXM", L.Parallel(dp=32, ep=8, zero=1), 4096, 1024, 4, "selective", {}),
    # moeapi42: the step recipe plan() now takes as well (comm_sms, zero bubble) and the all-to-all's hidden
    # share and node limit training_time now takes: DeepSeek-V3's 20 of 132 SMs with its all-to-all hidden,
    # DeepSeek-V2 under zero bubble with the shared experts beside the all-to-all (their window on the SMs
    # left), and Qwen3-235B's all-to-all routed to at most 2 nodes
    ("deepseek-v3", "H800", L.Parallel(tp=4, sp=True, dp=128, ep=256, zero=1), 4096, 1920, 1, "full",
     {"precision": "fp8-deepseek", "mtp_depth": 1, "comm_sms": 20, "ep_overlap": 1.0}),
    ("deepseek-v2", "H800", L.Parallel(tp=2, sp=True, pp=4, dp=16, ep=8, zero=1, shared_expert_overlap=True),
     4096, 512, 1, "full", {"capacity_factor": 1.0, "schedule": "zb1p", "comm_sms": 20}),
    ("qwen3-235b-a22b", "H100 SXM", L.Parallel(pp=2, dp=64, ep=32, zero=1), 4096, 512, 1, "full",
     {"schedule": "zb1p", "max_nodes": 2, "ep_overlap": 0.5}),
    # and a measured load skew in place of the default (gpt-oss-120b, 16 of the H100's 132 SMs kept)
    ("gpt-oss-120b", "H100 SXM", L.Parallel(pp=2, dp=32, ep=16, zero=1), 4096, 256, 1, "full",
     {"load_skew": 1.5, "comm_sms": 16}),
]


def _ids(case):
    m, g, p, *_, opts = case
    return f"{m}-{g}-tp{p.tp}pp{p.pp}v{p.virtual_stages}dp{p.dp}ep{p.ep}z{p.zero}" + "".join(
        f"-{k}" for k in sorted(opts) if k in RECIPE_KEYS)


RECIPE_KEYS = ("schedule", "comm_sms", "ep_overlap", "max_nodes", "load_skew")      # (moeapi42)


def _plan_row(model, gpu, par, seq, gb, mb, rc, opts):
    shared = {"shared_expert_overlap": True} if par.shared_expert_overlap else {}
    df = L.plan(model, tokens=TOKENS, gpus=(gpu,), seq=seq, global_batch=gb, max_gpus=par.gpus,
                ep_degrees=(par.ep,), micro_batches=(mb,), recomputes=(rc,), zero_stages=(par.zero,), **opts,
                **shared)
    hit = df[(df["n_gpus"] == par.gpus) & (df["tp"] == par.tp) & (df["pp"] == par.pp) & (df["dp"] == par.dp)
             & (df["cp"] == par.cp) & (df["ep"] == par.ep) & (df["virtual_stages"] == par.virtual_stages)
             & (df["zero"] == par.zero) & (df["micro_batch"] == mb) & (df["recompute"] == rc)
             & df["recompute_layers"].isna()]
    assert len(hit) == 1, f"plan() has {len(hit)} rows of the layout {par} ({len(df)} plans)"
    return hit.iloc[0]


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_training_time_step_time_and_plan_give_one_step(case):
    model, gpu, par, seq, gb, mb, rc, opts = case
    assert gb % (par.dp * mb) == 0
    accum = gb // (par.dp * mb)
    st = step_time(model, gpu, par, batch=mb, seq=seq, grad_accum=accum, recompute=rc, **opts)
    assert st.tokens == gb * seq                                  # the step is one global batch
    days = TOKENS / (gb * seq) * st.step_s / 86400                # by hand from the step
    t = L.training_time(model, tokens=TOKENS, gpu=gpu, seq=seq, parallel=par, global_batch=gb, micro_batch=mb,
                        recompute=rc, **opts)
    assert t.n_gpus == par.gpus
    assert t.days == pytest.approx(days, rel=1e-9)
    assert t.gpu_hours == pytest.approx(days * 24 * par.gpus, rel=1e-9)
    assert t.mfu == pytest.approx(st.mfu, rel=1e-9)
    row = _plan_row(model, gpu, par, seq, gb, mb, rc, opts)
    assert row["grad_accum"] == accum
    assert row["step_time_s"] == pytest.approx(st.step_s, rel=1e-6)
    assert row["days"] == pytest.approx(days, rel=1e-6)
    assert row["gpu_hours"] == pytest.approx(t.gpu_hours, rel=1e-6)
    assert row["mfu"] == pytest.approx(st.mfu, rel=1e-6)


def test_the_options_move_the_step_so_the_cases_test_them():
    """Each shared option of CASES changes the step (else agreeing on it would prove nothing)."""
    for model, gpu, par, seq, gb, mb, rc, opts in CASES:
        for key in set(opts) - {"precision"}:
            base = {k: v for k, v in opts.items() if k != key}
            kw = dict(batch=mb, seq=seq, grad_accum=gb // (par.dp * mb), recompute=rc)
            assert step_time(model, gpu, par, **kw, **opts).step_s \
                != pytest.approx(step_time(model, gpu, par, **kw, **base).step_s, rel=1e-6), (model, key)


# ---- DeepSeek-V3's own recipe through every entry point (moeapi42; issue 35: "one MoE path")
#: DeepSeek-V3 as its report states it (arXiv:2412.19437): 2,048 H800s, PP 16 under DualPipe, EP 64, DP 128,
#: ZeRO-1 (Sec. 3.1-3.2), 4K sequences in batches of 15,360 (Sec. 4.2), FP8 (Sec. 3.3), one MTP module
#: (Sec. 2.2), 20 of each H800's 132 SMs running the communication kernels (Sec. 3.2.2), the all-to-all fully
#: hidden (Sec. 3.2.1), routing to at most 4 nodes (Sec. 2.1.2), DeepEP's dispatch; the 61 layers split as the
#: memory plan splits them (16 stages, so uneven: llmsizing.deepseek.DEEPSEEK_V3_BALANCED_SPLIT).
V3_RECIPE = dict(precision="fp8-deepseek", mtp_depth=1, schedule="dualpipe", comm_sms=20, ep_overlap=1.0,
                 max_nodes=4, dispatcher="deepep")
V3_GB, V3_SEQ, V3_TOKENS = 15360, 4096, 14.8e12


def _v3_layout():
    from dataclasses import replace

    from llmsizing.deepseek import DEEPSEEK_V3_BALANCED_SPLIT, DEEPSEEK_V3_LAYOUT

    return replace(DEEPSEEK_V3_LAYOUT, stage_layers=DEEPSEEK_V3_BALANCED_SPLIT)


def test_deepseek_v3_with_dualpipe_and_20_sms_gives_one_step_through_every_entry_point():
    """step_time, training_time(parallel=, global_batch=), step_time(job) and training_time(job): the same
    step to 1e-9, and the days ``tokens / (global batch x seq) x step`` by hand. Before moeapi42 only
    step_time took ``schedule`` and ``comm_sms``, and neither training_time nor a Job's time took
    ``ep_overlap`` or ``max_nodes``."""
    from llmsizing.job import Job

    par = _v3_layout()
    assert (par.gpus, par.pp, par.ep, sum(par.stage_layers)) == (2048, 16, 64, 61)
    accum = V3_GB // par.dp                                       # 120 micro-batches of one sequence
    st = step_time("deepseek-v3", "H800", par, batch=1, seq=V3_SEQ, grad_accum=accum, **V3_RECIPE)
    days = V3_TOKENS / (V3_GB * V3_SEQ) * st.step_s / 86400       # by hand from the step
    t = L.training_time("deepseek-v3", tokens=V3_TOKENS, gpu="H800", seq=V3_SEQ, parallel=par,
                        global_batch=V3_GB, **V3_RECIPE)
    assert t.days == pytest.approx(days, rel=1e-9)
    assert t.gpu_hours == pytest.approx(days * 24 * 2048, rel=1e-9)
    assert t.mfu == pytest.approx(st.mfu, rel=1e-9)
    job = Job("deepseek-v3", "H800", V3_SEQ, par, micro_batch=1, grad_accum=accum, **V3_RECIPE)
    assert step_time(job).step_s == pytest.approx(st.step_s, rel=1e-9)
    assert L.training_time(job, tokens=V3_TOKENS).days == pytest.approx(days, rel=1e-9)
    # each part of the recipe moves the step (so agreeing on it tests it), in training_time too; the node
    # limit only where the all-to-all is not hidden
    exposed = {**V3_RECIPE, "ep_overlap": 0.0}
    for base, key, plain in ((V3_RECIPE, "schedule", "1f1b"), (V3_RECIPE, "comm_sms", 0),
                             (V3_RECIPE, "ep_overlap", 0.0), (exposed, "max_nodes", None)):
        one, other = (L.training_time("deepseek-v3", tokens=V3_TOKENS, gpu="H800", seq=V3_SEQ, parallel=par,
                                      global_batch=V3_GB, **kw) for kw in (base, {**base, key: plain}))
        assert other.days != pytest.approx(one.days, rel=1e-6), key
        j = job.replace(**base)
        assert step_time(j.replace(**{key: plain})).step_s != pytest.approx(step_time(j).step_s,
                                                                            rel=1e-6), key
        assert L.training_time(j.replace(**{key: plain}), tokens=V3_TOKENS).days == pytest.approx(
            other.days, rel=1e-9), key


def test_the_v3_recipes_sms_slow_the_compute_by_132_over_112_by_hand():
    """20 of 132 SMs kept: every stage's compute takes 132 / 112 as long (DeepSeek-V3 Sec. 3.2.2), through
    training_time's layout as through step_time; DualPipe's bubble scales with it (a share of the compute)."""
    par, accum = _v3_layout(), V3_GB // 128
    rest = {k: v for k, v in V3_RECIPE.items() if k != "comm_sms"}
    kw = dict(batch=1, seq=V3_SEQ, grad_accum=accum, **rest)
    with_sms = step_time("deepseek-v3", "H800", par, comm_sms=20, **kw)
    without = step_time("deepseek-v3", "H800", par, **kw)
    assert with_sms.compute_s == pytest.approx(without.compute_s * 132 / 112, rel=1e-12)
    assert with_sms.bubble_s == pytest.approx(without.bubble_s * 132 / 112, rel=1e-12)


def test_dualpipe_where_the_fewest_gpus_choose_the_layout_is_plans_dualpipe_step():
    """plan() searches DualPipe (dual48: tests/test_plan_dualpipe.py), and since dmin49 so do the fewest GPUs
    (min_gpus) through which training_time without a layout chooses one (they refused it before, naming
    plan(schedule='dualpipe')): on 2,048 H800s the layout is plan(schedule="dualpipe")'s fastest on exactly
    that many at the default global batch (moe_default_layout), one DualPipe runs (an even pp, an even number
    of micro-batches of at least 2 pp), and the days are that layout's DualPipe step."""
    from llmsizing.moe_default import moe_default_layout

    t = L.training_time("deepseek-v3", tokens=V3_TOKENS, gpu="H800", seq=V3_SEQ, n_gpus=2048,
                        schedule="dualpipe")
    par, gb, micro = moe_default_layout("deepseek-v3", "H800", seq=V3_SEQ, n_gpus=2048, schedule="dualpipe")
    m = gb // (micro * par.dp)
    assert par.gpus == 2048 and par.pp % 2 == 0 and m % 2 == 0 and m >= 2 * par.pp
    st = step_time("deepseek-v3", "H800", par, batch=micro, seq=V3_SEQ, grad_accum=m, schedule="dualpipe")
    assert t.days == pytest.approx(V3_TOKENS / (gb * V3_SEQ) * st.step_s / 86400, rel=1e-9)
    # ... and that step is the plan row's: its layout with the row's uneven split (61 layers on an even pp
    # that divides neither 61 nor 63), not the layout rebuilt without it (rev49: 7.059 days against 7.005)
    rows = L.plan("deepseek-v3", tokens=V3_TOKENS, gpus=("H800",), seq=V3_SEQ, global_batch=gb, max_gpus=2048,
                  gpu_counts=(2048,), recomputes=("none",), schedule="dualpipe", explain=False)
    best = rows.loc[rows.loc[rows["n_gpus"] == 2048, "step_time_s"].idxmin()]
    assert (best["tp"], best["pp"], best["ep"], best["dp"]) == (par.tp, par.pp, par.ep, par.dp)
    assert par.stage_layers is not None and sum(par.stage_layers) == 61
    assert st.step_s == pytest.approx(float(best["step_time_s"]), rel=1e-9)


def test_a_dense_plan_row_is_step_time_under_zero_bubble_and_kept_sms():
    """The recipe is step_time's for any model: a dense pipeline (Llama 3 8B, PP 4 of its 32 layers) under
    zero bubble with 20 SMs kept, plan() row = step_time, and the bubble a third of 1F1B's fill and drain."""
    par = L.Parallel(tp=2, sp=True, pp=4, dp=4, zero=1)
    kw = dict(batch=1, seq=4096, grad_accum=16, recompute="selective")
    df = L.plan("llama-3-8b", tokens=TOKENS, gpus=("H100 SXM",), seq=4096, global_batch=64, max_gpus=32,
                micro_batches=(1,), recomputes=("selective",), zero_stages=(1,), schedule="zb1p", comm_sms=20)
    row = df[(df["tp"] == 2) & (df["pp"] == 4) & (df["dp"] == 4) & (df["cp"] == 1)
             & (df["virtual_stages"] == 1)]
    assert len(row) == 1 and set(df["virtual_stages"]) == {1}          # (zero bubble: no interleaving)
    zb = step_time("llama-3-8b", "H100 SXM", par, schedule="zb1p", comm_sms=20, **kw)
    assert row["step_time_s"].iloc[0] == pytest.approx(zb.step_s, rel=1e-9)
    one = step_time("llama-3-8b", "H100 SXM", par, comm_sms=20, **kw)
    assert zb.compute_s == pytest.approx(one.compute_s, rel=1e-12)
    assert zb.bubble_s == pytest.approx(one.bubble_s / 3, rel=1e-9)         # (sum - max)/(3m) vs /m
    assert "the zb1p schedule, 20 SMs kept for communication" in df.attrs["assumes"]
