"""torchtitan's op-level SAC (recompute="op-sac", "op-sac-sdpa-rerun") as an explicit choice of the planner,
the job spec and the command line (issue 34, sac30). The planner's rows are what training_memory and step_time
say of the same layout (as test_planner.py holds the other modes), op SAC sits on layouts with and without
tensor, sequence and context parallelism (sac32; before, on one GPU's data shard only), the default search
never tries it, and
what no layout can price is refused naming ``recomputes``. The activations' breakdown keeps op SAC's saved
tensors under their own key. Expected values are worked out by hand from Llama-3-8B's config (hidden 4,096, 32
heads of 128, 8 KV heads, FFN 14,336, 32 layers) and torchtitan's policy (op_sac.OP_SAC_SOURCE: wq, wv, w1, w2
saved; wk, wo, w3 rerun)."""

import inspect
import json

import pandas as pd
import pytest

import llmsizing as L
from llmsizing import cli
from llmsizing.job import Job
from llmsizing.layouts import step_time
from llmsizing.parallel import OP_SAC_MODES, RECOMPUTE
from llmsizing.planner import SEARCH_ORDER, plan, recompute_kwargs

SEQ, GB, TOKENS = 8192, 256, 1e12
MODES = ("full", "op-sac-sdpa-rerun", "none", "op-sac")          # (any order: the planner sorts them)
H, KV, FFN, LAYERS = 4096, 8 * 128, 14336, 32


@pytest.fixture(scope="module")
def p8():
    return plan("llama-3-8b", tokens=TOKENS, gpus=("H100 SXM", "A100 80GB"), seq=SEQ, global_batch=GB,
                max_gpus=256, recomputes=MODES)


def _par(r):
    return Job.from_plan_row(r, "llama-3-8b", seq=SEQ).parallel


def _memory(r, recompute=None):
    kw = recompute_kwargs(r) if recompute is None else {"recompute": recompute}
    return L.training_memory("llama-3-8b", batch=int(r.micro_batch), seq=SEQ, grad_accum=int(r.grad_accum),
                             parallel=_par(r), **kw).total_bytes


def _sample(df, n=4):
    """At least three rows of each op SAC mode (fewer only if the search has fewer)."""
    rows = [df[df["recompute"] == m].sample(min(n, (df["recompute"] == m).sum()), random_state=0)
            for m in OP_SAC_MODES]
    assert all(len(r) >= 3 for r in rows)
    return pd.concat(rows)


def test_the_search_order_reruns_more_at_each_step():
    """Lightest first: each recomputation of SEARCH_ORDER reruns more FLOPs than the one before at 8K. op SAC
    reruns wk, wo and w3's forward: 32 x 2 x (4096 x 1024 + 4096 x 4096 + 4096 x 14336) per token."""
    flops = [L.training_flops_per_token("llama-3-8b", seq=SEQ, recompute=r) for r in SEARCH_ORDER]
    assert flops == sorted(flops) and len(set(flops)) == len(flops)
    none, op = (L.training_flops_per_token("llama-3-8b", seq=SEQ, recompute=r) for r in ("none", "op-sac"))
    assert op - none == pytest.approx(LAYERS * 2 * (H * KV + H * H + H * FFN), rel=1e-12)
    assert set(SEARCH_ORDER) == set(RECOMPUTE) | set(OP_SAC_MODES)
    assert SEARCH_ORDER[0] == "none" and SEARCH_ORDER[-1] == "full"


def test_the_default_search_never_tries_op_sac():
    assert inspect.signature(plan).parameters["recomputes"].default == RECOMPUTE
    df = plan("llama-3-8b", tokens=TOKENS, gpus=("H100 SXM",), seq=SEQ, global_batch=GB, max_gpus=64)
    assert len(df) and not df["recompute"].isin(OP_SAC_MODES).any()


def test_op_sac_rows_span_tensor_and_sequence_parallelism(p8):
    """sac32: op SAC is searched on every layout whose tp divides the 8 KV heads (torchtitan's TP is always
    with SP, as the planner's), and those rows are training_memory's and step_time's too."""
    op = p8[p8["recompute"].isin(OP_SAC_MODES)]
    assert set(op["recompute"]) == set(OP_SAC_MODES)
    assert op["recompute_layers"].isna().all() and (op["pp"] > 1).any()
    tp = op[op["tp"] > 1]
    assert len(tp) and tp["sp"].all()
    for r in tp.sample(min(6, len(tp)), random_state=0).itertuples():
        assert r.memory_per_gpu_bytes == pytest.approx(_memory(r), rel=1e-9)
        st = step_time("llama-3-8b", r.gpu, _par(r), batch=int(r.micro_batch), seq=SEQ,
                       grad_accum=int(r.grad_accum), **recompute_kwargs(r))
        assert r.step_time_s == pytest.approx(st.step_s, rel=1e-12)


def test_op_sac_rows_with_context_parallelism_are_direct_calls():
    df = plan("llama-3-8b", tokens=TOKENS, gpus=("H100 SXM",), seq=4 * SEQ, global_batch=64, max_gpus=64,
              recomputes=("op-sac", "full"), cp_degrees=(1, 2, 4))
    cp = df[(df["cp"] > 1) & (df["recompute"] == "op-sac")]
    assert len(cp) and (cp["tp"] > 1).any()
    for r in cp.sample(min(6, len(cp)), random_state=0).itertuples():
        par = Job.from_plan_row(r, "llama-3-8b", seq=4 * SEQ).parallel
        m = L.training_memory("llama-3-8b", batch=int(r.micro_batch), seq=4 * SEQ, grad_accum=int(r.grad_accum),
                              parallel=par, recompute="op-sac").total_bytes
        assert r.memory_per_gpu_bytes == pytest.approx(m, rel=1e-9)
        st = step_time("llama-3-8b", r.gpu, par, batch=int(r.micro_batch), seq=4 * SEQ,
                       grad_accum=int(r.grad_accum), recompute="op-sac")
        assert r.step_time_s == pytest.approx(st.step_s, rel=1e-12)


def test_op_sac_rows_are_training_memory_and_step_time(p8):
    """As test_planner.py holds the other modes: memory to 1e-9 (the planner's affine coefficients differ in
    the last bit), the step to 1e-12, and the row fits."""
    for r in _sample(p8).itertuples():
        assert r.memory_per_gpu_bytes == pytest.approx(_memory(r), rel=1e-9)
        assert r.memory_per_gpu_bytes <= 0.9 * L.get_gpu(r.gpu).memory_bytes
        st = step_time("llama-3-8b", r.gpu, _par(r), batch=int(r.micro_batch), seq=SEQ,
                       grad_accum=int(r.grad_accum), **recompute_kwargs(r))
        assert r.step_time_s == pytest.approx(st.step_s, rel=1e-12)


@pytest.mark.parametrize("op", OP_SAC_MODES)
def test_op_sac_before_full_alone_prices_every_layout_as_direct_calls(op):
    """torchtitan's own two choices, ``recomputes=(op, "full")``: op SAC, the lightest asked, weighs only the
    tp = cp = 1 layouts first. The full rows of tp > 1 layouts are still training_memory's and step_time's
    (review30a: they read the op-SAC call's kept model states, up to 2.4x off, and the step pricing gave
    partial recomputation's "none" pieces op SAC's terms: communication() refused it at tp = 2)."""
    df = plan("llama-3-8b", tokens=TOKENS, gpus=("H100 SXM",), seq=SEQ, global_batch=GB, max_gpus=64,
              recomputes=(op, "full"))
    assert set(df["recompute"]) == {op, "full"} and set(df["tp"]) == {1, 2, 4, 8}
    for r in pd.concat([df[df["tp"] == t].sample(3, random_state=0) for t in (1, 2, 4, 8)]).itertuples():
        assert r.memory_per_gpu_bytes == pytest.approx(_memory(r), rel=1e-9)
        st = step_time("llama-3-8b", r.gpu, _par(r), batch=int(r.micro_batch), seq=SEQ,
                       grad_accum=int(r.grad_accum), **recompute_kwargs(r))
        assert r.step_time_s == pytest.approx(st.step_s, rel=1e-12)


def test_a_heavier_recomputation_only_where_the_lighter_does_not_fit(p8):
    order = [m for m in SEARCH_ORDER if m in MODES]
    full = p8[(p8["recompute"] == "full") & (p8["tp"] == 1) & (p8["cp"] == 1)]
    for r in pd.concat([_sample(p8), full.sample(min(4, len(full)), random_state=0)]).itertuples():
        lighter = order[order.index(r.recompute) - 1]
        assert _memory(r, lighter) > 0.9 * L.get_gpu(r.gpu).memory_bytes, (r.recompute, lighter)


def test_a_job_that_runs_op_sac_plans_it_beside_the_default_recomputations():
    job = Job("llama-3-8b", "H100 SXM", SEQ, L.Parallel(dp=8), recompute="op-sac")
    assert job.kwargs("plan")["recomputes"] == RECOMPUTE + ("op-sac",)
    assert "recomputes" not in Job("llama-3-8b", "H100 SXM", SEQ, recompute="full").kwargs("plan")
    df = plan(job, tokens=TOKENS, max_gpus=64)
    assert (df["recompute"] == "op-sac").any()


def test_a_job_runs_op_sac_with_tp_sp_and_cp_and_refuses_what_torchtitan_cannot_split():
    for layout in (dict(tp=2, dp=4, sp=True), dict(tp=2, dp=4), dict(cp=2, dp=4), dict(tp=2, sp=True, cp=2)):
        Job("llama-3-8b", "H100 SXM", SEQ, L.Parallel(**layout), recompute="op-sac")
    with pytest.raises(ValueError, match="tp=16"):              # 8 KV heads over 16 ranks
        Job("llama-3-8b", "H100 SXM", SEQ, L.Parallel(tp=16, sp=True), recompute="op-sac")
    with pytest.raises(ValueError, match="recompute"):
        Job("llama-3-8b", "H100 SXM", SEQ, recompute="op_sac")
    with pytest.raises(ValueError, match="mixture of experts"):
        Job("mixtral-8x7b", "H100 SXM", 4096, recompute="op-sac")


@pytest.mark.parametrize("kw, words", [({"attention": "bogus"}, "unknown attention .bogus.. Allowed: flash"),
                                       ({"stack": "bogus"}, "unknown stack .bogus.. Allowed: fused")])
def test_a_job_names_a_bad_attention_or_stack_before_op_sac(kw, words):
    # review30a: these were refused as "recompute='op-sac' is modelled with attention='flash' only"
    with pytest.raises(ValueError, match=words):
        Job("llama-3-8b", "H100 SXM", recompute="op-sac", seq=SEQ, **kw)


@pytest.mark.parametrize("kw", [{}, {"stages": [(1e12, 8192)]}])
def test_training_time_off_a_layout_names_op_sac_and_what_to_give(kw):
    # the calibrated MFU has no op-SAC term: refused as such (review30a: "unknown recompute 'op-sac'")
    at = {"tokens": TOKENS, "seq": SEQ} if not kw else kw
    with pytest.raises(ValueError, match=r"recompute='op-sac'.*global_batch= with parallel="):
        L.training_time("llama-3-8b", gpu="H100 SXM", n_gpus=8, recompute="op-sac", **at)


@pytest.mark.parametrize("model, kw, words", [
    ("mixtral-8x7b", {}, "mixture of experts"),
    ("llama-3-8b", {"precision": "fp8-mixed"}, "fp8"),
    ("llama-3-8b", {"attention": "eager"}, "attention"),
    ("llama-3-8b", {"stack": "hf"}, "stack"),
])
def test_plan_refuses_op_sac_that_no_layout_can_price(model, kw, words):
    with pytest.raises(ValueError, match="recomputes holds 'op-sac'") as e:
        plan(model, tokens=TOKENS, seq=SEQ, global_batch=GB, max_gpus=64, recomputes=("none", "op-sac"), **kw)
    assert words in str(e.value)


def test_plan_names_a_bad_recomputation():
    with pytest.raises(ValueError, match=r"recomputes\[i\]"):
        plan("llama-3-8b", tokens=TOKENS, seq=SEQ, global_batch=GB, recomputes=("op_sac",))


def test_op_sac_breakdown_has_its_own_key():
    """Per layer op SAC keeps the input, p s b h, and saves wq (h), wv (8 x 128), w1 (14,336), w2 (h), SDPA's
    output (h) and its fp32 log-sum-exp (4 x 32 heads per token): residuals are the inputs alone, as under
    full recomputation, and op_sac_saved the rest."""
    b, p = 2, 2
    acts = L.training_memory("llama-3-8b", batch=b, seq=SEQ, recompute="op-sac").activations
    full = L.training_memory("llama-3-8b", batch=b, seq=SEQ, recompute="full").activations
    assert acts.breakdown["residuals"] == LAYERS * p * SEQ * b * H == full.breakdown["residuals"]
    saved = LAYERS * (p * SEQ * b * (H + KV + FFN + H + H) + 4 * 32 * b * SEQ)
    assert acts.breakdown["op_sac_saved"] == pytest.approx(saved, rel=1e-12)
    assert sum(acts.breakdown.values()) == pytest.approx(acts.total_bytes, rel=1e-12)
    assert full.breakdown["op_sac_saved"] == 0.0
    # a table lists op SAC's own component where it holds something (chapter 2's table as before)
    assert "op_sac_saved" in acts.to_frame().index and "op_sac_saved" not in full.to_frame().index
    assert acts.to_frame().loc["total", "bytes"] == acts.total_bytes


def test_the_command_line_passes_op_sac_through(capsys):
    base = ["plan", "llama-3-8b", "--tokens", "1T", "--seq", str(SEQ), "--global-batch", str(GB),
            "--max-gpus", "64", "--all", "--json"]
    assert cli.main(base + ["--recompute", "op-sac"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["recompute"] == "op-sac" for r in rows)
    lib = plan("llama-3-8b", tokens=TOKENS, seq=SEQ, global_batch=GB, max_gpus=64, recomputes=("op-sac",))
    assert len(rows) == min(20, len(lib))                               # (--top 20: the cheapest 20)
    assert [r["memory_per_gpu_bytes"] for r in rows] == lib["memory_per_gpu_bytes"].head(20).tolist()
    argv = ["memory", "llama-3-8b", "--batch", "2", "--seq", str(SEQ), "--recompute", "op-sac", "--json"]
    assert cli.main(argv) == 0
    total = {r["component"]: r["bytes"] for r in json.loads(capsys.readouterr().out)}["total"]
    assert total == L.training_memory("llama-3-8b", batch=2, seq=SEQ, recompute="op-sac").total_bytes
    for argv, words in ((["memory", "llama-3-8b", "--batch", "1", "--seq", "4096", "--tp", "16", "--recompute",
                          "op-sac"], "tp=16"),
                        (["plan", "mixtral-8x7b", "--tokens", "1T", "--seq", "4096", "--global-batch", "256",
                          "--recompute", "op-sac"], "recomputes holds 'op-sac'"),
                        (base + ["--recompute", "op_sac"], "--recompute")):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err
