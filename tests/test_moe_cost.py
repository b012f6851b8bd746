"""Issue 24's leftovers: implied_mfu, cost_by_gpu (its chart and the CLI's ``cost``), cost_sensitivity and
run_from_step accept a mixture of experts. Expected values are worked out here from the papers and the
models' config.json, not read back from the library; the dense path of cost_by_gpu is checked to be the
composition it always was (min_gpus, then training_time) with its old columns."""

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmsizing as L
from llmsizing import cli
from llmsizing.cost import cost_sensitivity, cost_vs_gpus
from llmsizing.fewest_gpus import min_gpus
from llmsizing.layouts import step_time
from llmsizing.runs import run_from_step
from llmsizing.time_cost import _layout_label, cost_by_gpu, implied_mfu, mfu_estimate, training_time
from _price_table import csv_price

ROOT = Path(__file__).resolve().parents[1]


def _gpu_row(name: str) -> dict:
    """The GPU's row of data/gpus.csv, with its price from data/gpu_prices.csv (the price table, issue 38)."""
    with open(ROOT / "data" / "gpus.csv", newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if r["name"] == name)
    with open(ROOT / "data" / "gpu_prices.csv", newline="") as fh:
        price = next(r for r in csv.DictReader(fh) if r["name"] == name)
    return {**row, **price, "price_usd_per_gpu_hour": str(csv_price(name))}   # (an estimate by its rule)


def _deepseek_v3_run() -> dict:
    with open(ROOT / "data" / "moe_published_runs.csv", newline="") as fh:
        return next(r for r in csv.DictReader(fh) if r["run"] == "DeepSeek-V3 pre-training")


# ----------------------------------------------------------------------------- implied_mfu, by hand
def test_deepseek_v3_implied_mfu_by_hand():
    """DeepSeek-V3 (arXiv:2412.19437): 2,664K H800 GPU-hours of pre-training for 14.8T tokens of 4K (Table 1;
    the 2,788K total adds context extension and post-training, which are not those 14.8T tokens), 37B
    activated parameters (Sec. 1), FP8 training. MLA attention from its config.json: 128 heads, queries and keys
    of 128 + 64 = 192 dimensions, values of 128, 61 layers."""
    run = _deepseek_v3_run()
    tokens, hours, seq = float(run["tokens"]), float(run["gpu_hours"]), int(run["seq"])
    assert (tokens, hours, seq) == (14.8e12, 2_664_000, 4096)         # the CSV holds the paper's figures
    fp8_peak = float(_gpu_row("H800")["fp8_dense_tflops"]) * 1e12     # 1,978.9 TFLOP/s dense
    bf16_peak = float(_gpu_row("H800")["bf16_dense_tflops"]) * 1e12
    attention_fwd = 2 * seq * 128 * (192 + 128) * 61                 # QK^T (192) and attn @ V (128), per token
    per_token = 6 * 37e9 + 3 * attention_fwd                         # 2.22e11 + 6.14e10
    expected = tokens * per_token / (hours * 3600 * fp8_peak)
    assert expected == pytest.approx(0.221, abs=0.001)                # the number the report quotes
    got = implied_mfu("deepseek-v3", gpu="H800", seq=seq, tokens=tokens, gpu_hours=hours, dtype="fp8")
    # the library counts 36.6B matmul weights per token (37.6B active less the 0.93B input embedding, a lookup):
    # 0.8% below the paper's rounded 37B; the multi-token-prediction module (~2% more FLOPs) is in neither count
    assert got == pytest.approx(expected, rel=0.015)
    assert got < expected                                             # and it is the lower count, as said
    bf16 = implied_mfu("deepseek-v3", gpu="H800", seq=seq, tokens=tokens, gpu_hours=hours)
    assert bf16 == pytest.approx(got * fp8_peak / bf16_peak, rel=1e-12)
    # all 671B parameters would imply an MFU above 1: the active count is what is used
    assert tokens * 6 * 671e9 / (hours * 3600 * bf16_peak) > 1
    # the inverse of training_time, through the same FLOP count
    t = training_time("deepseek-v3", tokens=tokens, gpu="H800", n_gpus=2048, seq=seq, mfu=got, dtype="fp8")
    assert t.gpu_hours == pytest.approx(hours, rel=1e-12)


MIXTRAL_MATMUL = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024      # per layer: q, o and k, v (8 KV heads of 128)
                       + 2 * 3 * 4096 * 14336                 # two SwiGLU experts of width 14,336 (top-2 of 8)
                       + 4096 * 8 + 2 * 4096) \
    + 32000 * 4096 + 4096                                     # router and two norms; LM head, final norm


def _mixtral_per_token(seq: int) -> float:
    """Mixtral 8x7B's training FLOPs per token from its config.json (no recomputation): 3 x (2 x the weights a
    token multiplies + 4 s heads d layers)."""
    return 3 * (2 * MIXTRAL_MATMUL + 4 * seq * 32 * 128 * 32)


def test_mixtral_implied_mfu_counts_top2_not_all_eight_experts():
    seq, tokens, hours = 4096, 1e12, 1e5
    peak = float(_gpu_row("H100 SXM")["bf16_dense_tflops"]) * 1e12
    expected = tokens * _mixtral_per_token(seq) / (hours * 3600 * peak)
    assert implied_mfu("mixtral-8x7b", gpu="H100 SXM", seq=seq, tokens=tokens, gpu_hours=hours) == \
        pytest.approx(expected, rel=1e-9)


def test_mixtral_reported_hardware_flops_convert_with_the_active_blocks():
    """Full recomputation reruns the forward of the active part of each block (2 x active block weights plus
    the attention core): a reported HFU converts to MFU by 3F / (3F + rerun)."""
    seq = 4096
    attention_fwd = 4 * seq * 32 * 128 * 32
    blocks = MIXTRAL_MATMUL - 32000 * 4096 - 4096                     # the 32 blocks' active weights
    model = _mixtral_per_token(seq)
    hardware = model + 2 * blocks + attention_fwd
    peak = float(_gpu_row("H100 SXM")["bf16_dense_tflops"]) * 1e12
    got = implied_mfu("mixtral-8x7b", gpu="H100 SXM", seq=seq, tflops_per_gpu=400,
                      flops_convention="full-recompute")
    assert got == pytest.approx(400e12 * model / hardware / peak, rel=1e-9)


# ----------------------------------------------------------------------------- cost_by_gpu
GPUS = ["H100 SXM", "H200", "B200", "MI300X", "A10"]


@pytest.fixture(scope="module")
def mixtral():
    return cost_by_gpu("mixtral-8x7b", tokens=1e12, seq=4096, gpus=GPUS)


def test_mixtral_cost_by_gpu_by_hand(mixtral):
    """Each row is timed on its layout's MoE step (issue 35: one MoE path): the run's tokens over the step's
    tokens per second, on the fewest GPUs, with the global batch worked out here (2**22 tokens of 4,096 =
    1,024 sequences, rounded up to a multiple of the GPU count); the run's active FLOPs (by hand) over those
    GPU-seconds at the peak is the step's MFU."""
    from llmsizing.time_cost import moe_default_layout

    flops = 1e12 * _mixtral_per_token(4096)
    for r in mixtral[mixtral["fits"]].itertuples():
        row = _gpu_row(r.gpu)
        peak = float(row["bf16_dense_tflops"] or row["fp16_dense_tflops"]) * 1e12
        par, gb, micro = moe_default_layout("mixtral-8x7b", L.get_gpu(r.gpu), seq=4096, n_gpus=r.min_gpus,
                                            recompute="full")
        assert par.gpus == r.min_gpus and (_layout_label(par), par.ep) == (r.layout, r.ep)
        planned = r.min_gpus * -(-1024 // r.min_gpus)                 # 1,024 sequences, a multiple of the GPUs
        widened = par.dp * max(par.pp, -(-1024 // par.dp))             # (no plan on exactly that many: the
        assert gb in (planned, widened)                              # fewest-GPU layout, whole micro-batches)
        step = step_time("mixtral-8x7b", r.gpu, par, batch=micro, seq=4096,
                         grad_accum=gb // (micro * par.dp), recompute="full")
        hours = 1e12 / (gb * 4096 / step.step_s) * r.min_gpus / 3600  # steps x step seconds x GPUs
        assert r.gpu_hours == pytest.approx(hours, rel=1e-9), r.gpu
        assert flops / (r.gpu_hours * 3600 * peak) == pytest.approx(step.mfu, rel=1e-9)
        assert r.cost_usd == pytest.approx(r.gpu_hours * float(row["price_usd_per_gpu_hour"]), rel=1e-12)
        assert r.days_on_min_gpus == pytest.approx(r.gpu_hours / r.min_gpus / 24, rel=1e-12)
        assert r.cost_usd_low <= r.cost_usd <= r.cost_usd_high
    assert list(mixtral["cost_usd"]) == sorted(mixtral["cost_usd"])


def test_moe_cost_by_gpu_old_estimate_is_deprecated():
    """moe_dense_mfu=True keeps the old answer (the calibrated MFU at the active size), with a warning."""
    with pytest.warns(DeprecationWarning, match="moe_dense_mfu"):
        old = cost_by_gpu("mixtral-8x7b", tokens=1e12, seq=4096, gpus=["H100 SXM"], moe_dense_mfu=True)
    flops = 1e12 * _mixtral_per_token(4096)
    peak = float(_gpu_row("H100 SXM")["bf16_dense_tflops"]) * 1e12
    mfu = mfu_estimate("mixtral-8x7b", gpu="H100 SXM", seq=4096, recompute="full").mfu
    assert old.loc[0, "gpu_hours"] == pytest.approx(flops / (peak * mfu) / 3600, rel=1e-9)
    with pytest.warns(DeprecationWarning, match="moe_dense_mfu"):
        t = training_time("mixtral-8x7b", tokens=1e12, gpu="H100 SXM", n_gpus=14, seq=4096, recompute="full",
                          moe_dense_mfu=True)
    assert t.mfu == mfu


def test_moe_whole_run_and_stages_take_the_moe_step():
    """Issue 35: whole_run=True and stages=... time a mixture of experts on its MoE step too (the one path).
    A whole run keeps exp(whole_run) of the steady step's MFU, whole_run being data/mfu_inputs_model.csv's hopper
    bf16 row (a fitted value that moves whenever tools/calibrate.py refits, so it is read, not typed; it is
    negative: a whole run is slower than its steady state), so the GPU-hours are the steady run's x
    exp(-whole_run). A single stage is the single call; each of two stages is the single call at its own
    tokens and seq. The old estimate stays behind moe_dense_mfu=True, with a DeprecationWarning."""
    import math

    with open(Path(L.__file__).parents[2] / "data" / "mfu_inputs_model.csv", newline="") as f:
        row = next(r for r in csv.DictReader(f) if (r["generation"], r["dtype"]) == ("hopper", "bf16"))
    whole_run = float(row["whole_run"])
    assert whole_run < 0
    kw = dict(gpu="H100 SXM", n_gpus=64)
    steady = training_time("mixtral-8x7b", tokens=1e12, seq=4096, **kw)
    whole = training_time("mixtral-8x7b", tokens=1e12, seq=4096, whole_run=True, **kw)
    assert whole.gpu_hours == pytest.approx(steady.gpu_hours * math.exp(-whole_run), rel=1e-9)
    assert whole.layout == steady.layout and "MoE step" in whole.warnings[0]
    one = training_time("mixtral-8x7b", stages=[(1e12, 4096)], **kw)
    assert one.stages[0].gpu_hours == steady.gpu_hours and one.stages[0].layout == steady.layout
    two = training_time("mixtral-8x7b", stages=[(8e11, 4096), (2e11, 32768)], **kw)
    for st, (tokens, seq) in zip(two.stages, ((8e11, 4096), (2e11, 32768))):
        alone = training_time("mixtral-8x7b", tokens=tokens, seq=seq, **kw)
        assert st.gpu_hours == alone.gpu_hours and "MoE step" in st.warnings[0]
    with pytest.warns(DeprecationWarning, match="moe_dense_mfu"):
        old = training_time("mixtral-8x7b", stages=[(1e12, 4096)], moe_dense_mfu=True, **kw)
    assert old.stages[0].mfu == mfu_estimate("mixtral-8x7b", gpu="H100 SXM", seq=4096).mfu
    with pytest.warns(DeprecationWarning, match="moe_dense_mfu"):
        old = training_time("mixtral-8x7b", tokens=1e12, seq=4096, whole_run=True, moe_dense_mfu=True, **kw)
    assert old.mfu == mfu_estimate("mixtral-8x7b", gpu="H100 SXM", seq=4096, whole_run=True).mfu


def test_mixtral_cost_by_gpu_uses_min_gpus_expert_parallel_search(mixtral):
    assert mixtral["fits"].all()
    for r in mixtral.itertuples():
        p = min_gpus("mixtral-8x7b", r.gpu, batch=1, seq=4096, recompute="full")
        assert r.min_gpus == p.gpus                                  # the count: min_gpus with its ep search
        assert (f"EP{r.ep}" in r.layout) == (r.ep > 1)
        dense_only = min_gpus("mixtral-8x7b", r.gpu, batch=1, seq=4096, recompute="full", ep_degrees=(1,))
        assert r.min_gpus <= dense_only.gpus                        # searching ep never needs more GPUs
    forced = cost_by_gpu("mixtral-8x7b", tokens=1e12, seq=4096, gpus=["H100 SXM"], ep_degrees=(8,))
    assert forced.loc[0, "ep"] == 8 and "EP8" in forced.loc[0, "layout"]


def test_moe_cost_by_gpu_is_training_time_on_as_many_gpus(mixtral):
    """The same question, the same answer: a row is training_time on that many GPUs (issue 35)."""
    assert all("mixture of experts: timed on its MoE step" in w for w in mixtral["warnings"])
    row = mixtral.set_index("gpu").loc["H100 SXM"]
    t = training_time("mixtral-8x7b", tokens=1e12, gpu="H100 SXM", n_gpus=int(row["min_gpus"]), seq=4096,
                      recompute="full")
    assert row["warnings"] == " | ".join(t.warnings) and row["layout"] in t.warnings[0]
    assert (row["gpu_hours"], row["days_on_min_gpus"]) == (t.gpu_hours, t.days)


def test_deepseek_v3_cost_by_gpu_fits():
    """The whole catalogue, a plan per GPU type (issue 35). Its CPU time (about 1.1-1.5 s from scratch) is
    measured by benchmarks/bench_moved_guards.py and bench_moe_planner.py, not here (the guide's principle 6:
    this test held a 12 s CPU bound until suite40)."""
    df = cost_by_gpu("deepseek-v3", tokens=14.8e12, seq=4096)        # the whole catalogue
    assert df["fits"].any() and (df.loc[df["fits"], "min_gpus"] >= 40).all()   # 671B parameters need many GPUs


def test_dense_refuses_expert_parallel_degrees():
    with pytest.raises(ValueError, match="ep"):
        cost_by_gpu("llama-3-8b", tokens=1e10, seq=4096, gpus=["H100 SXM"], ep_degrees=(8,))


#: cost_by_gpu's columns for a dense model, as they were before mixtures of experts were accepted.
DENSE_COLUMNS = ["gpu", "price_usd_per_gpu_hour", "dtype", "fits", "why", "min_gpus", "layout",
                 "tokens_per_s_per_gpu", "days_on_min_gpus", "gpu_hours", "gpu_hours_low", "gpu_hours_high",
                 "cost_usd", "cost_usd_low", "cost_usd_high", "price_kind"]


@settings(max_examples=12, deadline=None)
@given(model=st.sampled_from(["gpt2", "llama-2-7b", "llama-3-8b", "mistral-7b"]),
       gpus=st.lists(st.sampled_from(["H100 SXM", "A100 80GB", "A10", "MI300X", "V100", "L4"]), min_size=1,
                     max_size=3, unique=True),
       seq=st.sampled_from([1024, 2048, 4096]), recompute=st.sampled_from(["full", "none"]),
       mfu=st.sampled_from([None, 0.35]))
def test_dense_cost_by_gpu_is_min_gpus_then_training_time(model, gpus, seq, recompute, mfu):
    """The dense path, exactly: min_gpus (no ep) for the count and layout, training_time for the rest; the
    same columns as before, no attrs."""
    df = cost_by_gpu(model, tokens=1e11, seq=seq, gpus=gpus, recompute=recompute, mfu=mfu)
    fits = df["fits"].all()
    assert list(df.columns) == (DENSE_COLUMNS if fits else DENSE_COLUMNS[:5] + [c for c in DENSE_COLUMNS[5:]
                                                                               if c in df.columns])
    assert df.attrs == {}
    for r in df[df["fits"]].itertuples():
        p = min_gpus(model, r.gpu, batch=1, seq=seq, recompute=recompute)
        t = training_time(model, tokens=1e11, gpu=r.gpu, n_gpus=p.gpus, seq=seq, mfu=mfu, recompute=recompute)
        assert (r.min_gpus, r.layout) == (p.gpus, _layout_label(p.parallel))
        assert (r.gpu_hours, r.gpu_hours_low, r.gpu_hours_high, r.cost_usd, r.days_on_min_gpus,
                r.tokens_per_s_per_gpu) == (t.gpu_hours, t.gpu_hours_low, t.gpu_hours_high, t.cost_usd, t.days,
                                            t.tokens_per_s_per_gpu)


def test_render_cost_by_gpu_draws_a_mixture_of_experts():
    from llmsizing.charts import render_cost_by_gpu

    view = render_cost_by_gpu("mixtral-8x7b", tokens=1e12, seq=4096, gpus=["H100 SXM", "H200"])
    df = cost_by_gpu("mixtral-8x7b", tokens=1e12, seq=4096, gpus=["H100 SXM", "H200"])
    assert "mixtral-8x7b" in view.summary and all(lay in view.summary for lay in df["layout"])
    assert "warning: mixtral-8x7b is a mixture of experts" in view.summary


# ----------------------------------------------------------------------------- the command line
def test_cli_cost_json_is_cost_by_gpu(capsys):
    assert cli.main(["cost", "mixtral-8x7b", "--tokens", "1T", "--seq", "4096", "--gpu", "H100 SXM",
                     "--gpu", "H200", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    df = cost_by_gpu("mixtral-8x7b", tokens=1e12, seq=4096, gpus=["H100 SXM", "H200"])
    assert [r["gpu"] for r in rows] == list(df["gpu"])
    assert [r["cost_usd"] for r in rows] == pytest.approx(list(df["cost_usd"]), rel=1e-12)
    assert [r["ep"] for r in rows] == list(df["ep"])


def test_cli_cost_csv_and_text(capsys):
    assert cli.main(["cost", "mixtral-8x7b", "--tokens", "1T", "--seq", "4096", "--gpu", "H200", "--csv"]) == 0
    header, first = capsys.readouterr().out.splitlines()[:2]
    layout = cost_by_gpu("mixtral-8x7b", tokens=1e12, seq=4096, gpus=["H200"]).loc[0, "layout"]
    assert "cost_usd" in header and "ep" in header.split(",") and f",{layout}," in first
    assert cli.main(["cost", "llama-3-8b", "--tokens", "100B", "--seq", "4096", "--gpu", "H100 SXM"]) == 0
    out = capsys.readouterr().out
    assert "H100 SXM" in out and "warning" not in out
    assert cli.main(["cost", "llama-3-8b", "--tokens", "100B", "--seq", "4096", "--ep", "8"]) == 2


# ----------------------------------------------------------------------------- the rest of chapter 11's helpers
def test_cost_sensitivity_prices_the_active_flops():
    df = cost_sensitivity("mixtral-8x7b", tokens=1e12, gpu="H100 SXM", seq=4096, prices=(2.0,), mfus=(0.4,))
    peak = float(_gpu_row("H100 SXM")["bf16_dense_tflops"]) * 1e12
    assert df.loc[0.4, 2.0] == pytest.approx(1e12 * _mixtral_per_token(4096) / (peak * 0.4) / 3600 * 2.0, rel=1e-9)


def test_run_from_step_of_an_expert_parallel_step():
    st_ = step_time("mixtral-8x7b", "H100 SXM", L.Parallel(dp=8, ep=8, zero=1), batch=1, seq=4096, grad_accum=16)
    run = run_from_step("mixtral-8x7b", st_, tokens=1e12, gpu="H100 SXM", seq=4096)
    assert run.time.mfu == pytest.approx(st_.mfu, rel=1e-12)       # the step's own (active) MFU
    assert run.time.gpu_hours == pytest.approx(1e12 / st_.tokens * st_.step_s * 8 / 3600, rel=1e-9)


# ----------------------------------------------------------------------------- the widgets of chapters 10 and 11
def test_time_and_cost_widgets_offer_and_draw_mixtures_of_experts():
    from llmsizing.widgets import cost_widget, training_time_widget

    board = training_time_widget()
    assert set(L.list_models(moe=True)) <= set(board.controls["model"].options)
    board.controls["mfu"].value = 0.3
    board.controls["model"].value = "mixtral-8x7b"
    t = training_time("mixtral-8x7b", tokens=1e12, gpu="H100 SXM", n_gpus=1024, seq=8192, mfu=0.3)
    assert f"{t.days:,.1f} days" in board.summary.value and not board.error.value
    w = cost_widget()
    w.controls["mfu"].value = 0.5
    w.controls["model"].value = "deepseek-v3"
    t = training_time("deepseek-v3", tokens=1e12, gpu="H100 SXM", n_gpus=1024, seq=8192, mfu=0.5)
    assert f"${t.cost_usd:,.0f}" in w.summary.value and w.error.value == ""


# ----------------------------------------------------------------------------- cost_vs_gpus with expert parallelism
def test_cost_vs_gpus_of_mixtral_with_ep8():
    df = cost_vs_gpus("mixtral-8x7b", tokens=1e12, gpu="H100 SXM", seq=4096, global_batch=512, tp=1, pp=1,
                             ep=8, zero=1)
    assert list(df["dp"]) == [8, 16, 32, 64, 128, 256, 512]           # ep = 8 divides dp (tp = 1)
    peak = float(_gpu_row("H100 SXM")["bf16_dense_tflops"]) * 1e12
    for r in df.itertuples():
        st_ = step_time("mixtral-8x7b", "H100 SXM", L.Parallel(dp=r.dp, ep=8, zero=1), batch=1, seq=4096,
                        grad_accum=512 // r.dp)
        assert r.step_s == pytest.approx(st_.step_s, rel=1e-12)
        assert r.mfu == pytest.approx(_mixtral_per_token(4096) * 512 * 4096 / (r.step_s * r.n_gpus * peak), rel=1e-9)
    with pytest.raises(ValueError, match="ep=8"):
        cost_vs_gpus("llama-3-8b", tokens=1e12, gpu="H100 SXM", seq=4096, global_batch=512, ep=8)
    with pytest.raises(ValueError, match="ep=3"):
        cost_vs_gpus("mixtral-8x7b", tokens=1e12, gpu="H100 SXM", seq=4096, global_batch=512, ep=3)
    with pytest.raises(ValueError, match="dps must be multiples of 8"):
        cost_vs_gpus("mixtral-8x7b", tokens=1e12, gpu="H100 SXM", seq=4096, global_batch=512, tp=1, ep=8,
                            dps=(4, 8))


# ----------------------------------------------------------------------------- the planner's figure and widget
def test_render_plan_and_planner_widget_draw_a_mixture_of_experts():
    from llmsizing.charts import render_plan
    from llmsizing.planner import plan
    from llmsizing.widgets import planner_widget

    run = dict(tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=512, max_gpus=1024)
    front = plan("mixtral-8x7b", **run).query("pareto")
    first = front.iloc[0]
    view = render_plan("mixtral-8x7b", **run)
    # issue 35: with the load skew of aux-loss routing (one expert per GPU at ep=8) the cheapest plan may keep
    # the experts whole; the front still splits them at its fast end
    assert f"{first.n_gpus} x H100 SXM (tp={first.tp}, pp=1, dp={first.dp}" in view.summary
    assert "expert parallelism ep in (1, 2, 4, 8)" in view.summary and (front["ep"] > 1).any()
    st_ = step_time("mixtral-8x7b", "H100 SXM", L.Parallel(tp=int(first.tp), sp=int(first.tp) > 1, dp=int(first.dp),
                                                           ep=int(first.ep), zero=int(first.zero)),
                    batch=int(first.micro_batch), seq=4096, grad_accum=int(first.grad_accum), recompute=first.recompute)
    assert f"step {st_.step_s:.2f} s" in view.summary                 # the chosen plan's own step, all-to-all included
    board = planner_widget()
    assert set(L.list_models(moe=True)) <= set(board.controls["model"].options)
    board.controls["seq"].value = 4096
    board.controls["gpus"].value = ("H100 SXM",)
    board.controls["max_gpus"].value = 1024
    board.controls["model"].value = "mixtral-8x7b"                    # the run above: its cheapest plan
    assert not board.error.value
    assert board.controls["choice"].options[0][0].startswith(f"#1: {first.n_gpus} x H100 SXM, tp={first.tp} pp=1 "
                                                             f"dp={first.dp}")


# ----------------------------------------------------------------------------- the largest micro-batch
@pytest.mark.parametrize("par", [L.Parallel(dp=8, ep=8, zero=1), L.Parallel(dp=16, ep=8, zero=2),
                                 L.Parallel(tp=2, sp=True, dp=8, ep=8, zero=1)])
def test_max_micro_batch_of_mixtral_is_the_largest_that_fits(par):
    """max_micro_batch against training_memory itself: b fits (or is 0) and b + 1 does not."""
    from llmsizing.memory import max_micro_batch, training_memory

    capacity = L.get_gpu("H100 SXM").memory_bytes
    for seq in (1024, 4096, 8192):
        b = max_micro_batch("mixtral-8x7b", "H100 SXM", seq, parallel=par, recompute="full")

        def fits(n):
            return training_memory("mixtral-8x7b", batch=n, seq=seq, parallel=par,
                                   recompute="full").total_bytes <= capacity
        assert (b == 0 or fits(b)) and not fits(b + 1), (seq, b)
    assert max_micro_batch("mixtral-8x7b", "H100 SXM", 1024, parallel=L.Parallel(tp=2, sp=True, dp=8, ep=8, zero=1),
                           recompute="full") > 0


# ----------------------------------------------------------------------------- one MoE path (issue 35)
def test_training_time_of_an_moe_is_the_fastest_plan_on_as_many_gpus():
    """The same question gets the same answer: Qwen3-30B-A3B on 64 H100s without a layout is the planner's
    fastest plan on exactly 64 of them, at 2**22 = 4,194,304 tokens per step / 4,096 = 1,024 sequences
    (16 x 64, already a multiple of the GPUs)."""
    from llmsizing.planner import plan

    t = training_time("qwen3-30b-a3b", tokens=1e12, gpu="H100 SXM", n_gpus=64, seq=4096)
    rows = plan("qwen3-30b-a3b", tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=1024, max_gpus=64,
                recomputes=("none",))
    best = rows[rows["n_gpus"] == 64].sort_values("step_time_s").iloc[0]
    assert t.days == pytest.approx(best["days"], rel=1e-9) and t.mfu == pytest.approx(best["mfu"], rel=1e-9)
    assert "1,024 sequences per step" in t.warnings[0] and t.mfu_source == "step_time of the layout"
    # without a GPU count: the fewest GPUs that hold a step, at whole micro-batches of about 2**22 tokens
    fewest = min_gpus("qwen3-30b-a3b", "H100 SXM", batch=1, seq=4096).parallel
    t0 = training_time("qwen3-30b-a3b", tokens=1e12, gpu="H100 SXM", seq=4096)
    gb = fewest.dp * max(fewest.pp, -(-1024 // fewest.dp))
    step = step_time("qwen3-30b-a3b", "H100 SXM", fewest, batch=1, seq=4096, grad_accum=gb // fewest.dp)
    assert t0.gpu_hours == pytest.approx(1e12 / (gb * 4096) * step.step_s * fewest.gpus / 3600, rel=1e-9)
    assert t0.n_gpus == fewest.gpus                                # (and the days are those on them)
    # a given MFU is taken as given (the dense arithmetic at the active FLOPs)
    assert training_time("qwen3-30b-a3b", tokens=1e12, gpu="H100 SXM", n_gpus=64, seq=4096, mfu=0.3).mfu == 0.3
