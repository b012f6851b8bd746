"""Runs in stages (issue 23, "Staged context"): training_time(stages=...), the CLI's --stage, and the published
staged runs (DeepSeek-V3's context extension, Llama 3.1 405B's 128K stage).

Expected values are worked out by hand here (Llama 3 8B's shape, the H100's dense BF16 peak, the published
figures), not read back from the library's output."""

import csv
import json
from pathlib import Path

import pytest

import llmsizing as L
from llmsizing import cli
from llmsizing.flops import attention_flops_per_token
from llmsizing.layouts import step_time
from llmsizing.planner import NoPlanError, plan
from llmsizing.stages import (Stage, StagedTrainingTime, deepseek_v3_standin, published_stage_checks,
                              published_stages)
from llmsizing.time_cost import training_time

DATA = Path(__file__).resolve().parents[1] / "data"

# Llama 3 8B by hand (Dubey et al. 2024, Table 3; config.json): 32 layers, hidden 4096, 32 heads of 128, 8 KV heads,
# SwiGLU 14,336, vocab 128,256, untied embeddings. Matmul weights = everything but the input embedding lookup.
EMBED = 128_256 * 4096
LAYER = (4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096) + 3 * 4096 * 14_336 + 2 * 4096
N_PARAMS = 32 * LAYER + 4096 + 2 * EMBED
MATMUL = N_PARAMS - EMBED
H100_BF16 = 989.4e12                                   # dense BF16 peak, FLOP/s (NVIDIA H100 SXM datasheet)


def flops_per_token_8b(seq: int) -> float:
    """Training FLOPs per token of Llama 3 8B: 3 x (2 x matmul weights + 4 x seq x heads x head_dim x layers)."""
    return 3 * (2 * MATMUL + 4 * seq * 32 * 128 * 32)


def test_hand_count_of_llama_3_8b_is_the_catalogue_count():
    assert N_PARAMS == 8_030_261_248 == L.get_model("llama-3-8b").n_params


def test_totals_are_the_stages_summed_by_hand():
    stages = [Stage(1e12, 8192, mfu=0.40), Stage(5e10, 32768, mfu=0.30)]
    r = training_time("llama-3-8b", gpu="H100 SXM", n_gpus=64, stages=stages, price_usd_per_gpu_hour=2.0)
    assert isinstance(r, StagedTrainingTime) and len(r.stages) == 2
    hours = [t * flops_per_token_8b(s) / (H100_BF16 * m) / 3600 for t, s, m in ((1e12, 8192, 0.40),
                                                                              (5e10, 32768, 0.30))]
    for st, h in zip(r.stages, hours):
        assert st.gpu_hours == pytest.approx(h, rel=1e-12)
        assert st.days == pytest.approx(h / 64 / 24, rel=1e-12)
        assert st.cost_usd == pytest.approx(2.0 * h, rel=1e-12)
    assert r.gpu_hours == pytest.approx(sum(hours), rel=1e-12)
    assert r.days == pytest.approx(sum(hours) / 64 / 24, rel=1e-12)
    assert r.cost_usd == pytest.approx(2.0 * sum(hours), rel=1e-12)
    assert r.tokens == 1.05e12
    # the whole run's MFU: its FLOPs over what its GPU-hours could do at the peak
    flops = 1e12 * flops_per_token_8b(8192) + 5e10 * flops_per_token_8b(32768)
    assert r.mfu == pytest.approx(flops / (sum(hours) * 3600 * H100_BF16), rel=1e-12)
    assert 0.30 < r.mfu < 0.40
    df = r.to_frame()
    assert list(df.index) == ["stage 1", "stage 2", "total"]
    assert df.loc["total", "gpu_hours"] == pytest.approx(sum(hours), rel=1e-12)
    assert df.loc["stage 2", "seq"] == 32768


def test_bounds_add_up_and_contain_the_central_figure():
    r = training_time("llama-3-70b", gpu="H100 SXM", n_gpus=512, stages=[(1e12, 8192), (1e11, 65536)])
    assert r.gpu_hours_low == pytest.approx(sum(s.gpu_hours_low for s in r.stages))
    assert r.days_high == pytest.approx(sum(s.days_high for s in r.stages))
    assert r.gpu_hours_low < r.gpu_hours < r.gpu_hours_high
    assert r.cost_usd_low < r.cost_usd < r.cost_usd_high


@pytest.mark.parametrize("model, kw", [
    ("llama-3-8b", dict(gpu="H100 SXM", n_gpus=8, tokens=1e11, seq=8192)),
    ("llama-3-70b", dict(gpu="A100 80GB", n_gpus=512, tokens=2e12, seq=4096, whole_run=True)),
    ("llama-3-8b", dict(gpu="H100 SXM", n_gpus=8, tokens=1e11, seq=8192, mfu=0.35, price_usd_per_gpu_hour=1.5)),
    ("llama-3-70b", dict(gpu="H100 SXM", tokens=1e12, seq=8192, parallel=L.Parallel(tp=8, pp=2, dp=16),
                         recompute="full", causal=True)),
    ("llama-3-8b", dict(gpu="H100 SXM", n_gpus=8, tokens=1e11, seq=8192, dtype="fp8", mfu_range=(0.15, 0.5))),
])
def test_one_stage_is_the_old_call(model, kw):
    old = training_time(model, **kw)
    staged_kw = {k: v for k, v in kw.items() if k not in ("tokens", "seq")}
    r = training_time(model, stages=[(kw["tokens"], kw["seq"])], **staged_kw)
    assert r.stages[0] == old                    # every field: MFU, range, days, GPU-hours, cost, warnings...
    for field in ("days", "days_low", "days_high", "gpu_hours", "gpu_hours_high", "cost_usd", "cost_usd_low"):
        assert getattr(r, field) == getattr(old, field)
    assert r.mfu == pytest.approx(old.mfu, rel=1e-12)
    assert r.stages[0].mfu_source == ("given" if "mfu" in kw else "calibrated estimate")


def test_each_stage_gets_the_calibrated_mfu_of_its_own_seq():
    """The calibrated MFU goes as seq**seq_exponent (data/mfu_inputs_model.csv, fitted on the published runs): a
    stage at 32K gets (32768 / 8192)**exponent of the 8K stage's MFU, by hand."""
    with open(DATA / "mfu_inputs_model.csv", newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if (r["generation"], r["dtype"]) == ("hopper", "bf16"))
    exponent = float(row["seq_exponent"])
    assert exponent < 0                          # longer sequences: lower MFU in the published runs
    r = training_time("llama-3-70b", gpu="H100 SXM", n_gpus=1024, stages=[(1e12, 8192), (1e11, 32768)])
    assert r.stages[1].mfu / r.stages[0].mfu == pytest.approx(4 ** exponent, rel=1e-9)
    # and its FLOPs per token follow its own seq (the attention term, by hand for the 70B: 80 layers of 64 x 128)
    extra = 3 * 4 * (32768 - 8192) * 64 * 128 * 80
    assert r.stages[1].flops_per_token - r.stages[0].flops_per_token == pytest.approx(extra, rel=1e-12)


def test_a_stage_with_a_layout_takes_the_mfu_of_its_step():
    par = L.Parallel(tp=8, pp=4, dp=8, zero=1, sp=True)
    st = Stage(2e11, 32768, parallel=par, global_batch=256, micro_batch=1)
    r = training_time("llama-3-70b", gpu="H100 SXM", stages=[(1e12, 8192), st], n_gpus=256, recompute="full")
    step = step_time("llama-3-70b", "H100 SXM", par, batch=1, seq=32768, grad_accum=256 // 8, recompute="full")
    s2 = r.stages[1]
    assert s2.mfu == pytest.approx(step.mfu, rel=1e-12)
    assert s2.n_gpus == 256 and s2.layout == "TP8+SP PP4 DP8 ZeRO-1"
    assert s2.mfu_source == "step_time of the layout"
    assert s2.mfu_low < s2.mfu < s2.mfu_high
    # days from the step time itself: steps x seconds per step
    steps = 2e11 / (256 * 32768)
    assert s2.days == pytest.approx(steps * step.step_s / 86400, rel=1e-9)


def test_a_layout_stage_counted_causal_takes_the_same_time():
    """causal=True counts fewer FLOPs for the same step: the days stay, the MFU falls by the FLOP ratio (by hand:
    the attention term halves)."""
    par = L.Parallel(tp=8, pp=2, dp=4, zero=1, sp=True)
    kw = dict(gpu="H100 SXM", stages=[Stage(1e11, 32768, parallel=par, global_batch=64)])
    full, causal = training_time("llama-3-70b", **kw), training_time("llama-3-70b", causal=True, **kw)
    assert causal.days == pytest.approx(full.days, rel=1e-12)
    attn = 4 * 32768 * 64 * 128 * 80
    matmul_fwd = full.stages[0].flops_per_token / 3 - attn
    assert causal.mfu / full.mfu == pytest.approx((matmul_fwd + attn / 2) / (matmul_fwd + attn), rel=1e-12)


def test_a_layout_that_does_not_fit_is_warned_about():
    par = L.Parallel(tp=1, pp=1, dp=8)                  # 70B unsharded on each GPU: far beyond 80 GB
    r = training_time("llama-3-70b", gpu="H100 SXM", stages=[Stage(1e10, 8192, parallel=par, global_batch=64)])
    assert any("GiB per GPU" in w and "stage 1" in w for w in r.warnings)


def test_a_stage_with_only_a_global_batch_is_planned():
    r = training_time("llama-3-8b", gpu="H100 SXM", n_gpus=64,
                      stages=[Stage(1e11, 8192, global_batch=256), Stage(1e10, 32768, global_batch=64)])
    for st, (seq, gb) in zip(r.stages, ((8192, 256), (32768, 64))):
        df = plan("llama-3-8b", tokens=st.tokens, gpus=("H100 SXM",), seq=seq, global_batch=gb, max_gpus=64)
        assert st.days == pytest.approx(df["days"].min(), rel=1e-9)        # the fastest on at most 64 GPUs
        assert st.n_gpus <= 64
        assert st.mfu_source.startswith("plan()")
    # without a GPU count: the cheapest plan
    r = training_time("llama-3-8b", gpu="H100 SXM", stages=[Stage(1e11, 8192, global_batch=256)])
    df = plan("llama-3-8b", tokens=1e11, gpus=("H100 SXM",), seq=8192, global_batch=256)
    assert r.cost_usd == pytest.approx(df["cost_usd"].min(), rel=1e-9)


def test_a_stage_no_layout_holds_names_the_stage():
    with pytest.raises(NoPlanError, match=r"stages\[1\] \(long, .*seq=131,072\)"):
        training_time("llama-3.1-405b", gpu="H100 SXM", n_gpus=8,
                      stages=[Stage(1e9, 8192, mfu=0.4), Stage(1e9, 131072, global_batch=8, name="long")])


@pytest.mark.parametrize("kw, exc, match", [
    (dict(stages=[]), ValueError, "stages must not be empty"),
    (dict(stages="8192"), TypeError, "stages must be a list"),
    (dict(stages=[(1e12,)]), TypeError, r"stages\[0\] must be a Stage"),
    (dict(stages=[(1e12, 8192), (1e11, 0)]), ValueError, r"stages\[1\]: seq must be an integer >= 1"),
    (dict(stages=[(-1, 8192)]), ValueError, r"stages\[0\]: tokens must be > 0"),
    (dict(stages=[(1e12, 8192.0)]), TypeError, r"stages\[0\]: seq must be an integer"),
    (dict(stages=[(1e12, 8192)], tokens=1e12), ValueError, "not both"),
    (dict(stages=[(1e12, 8192)], seq=8192), ValueError, "not both"),
    (dict(tokens=1e12), ValueError, "seq="),
    (dict(seq=8192), ValueError, "tokens="),
    (dict(stages=[(1e12, 8192)], plan_options={"precision": "bf16-mixed"}), ValueError, "plan_options"),
    (dict(tokens=1e12, seq=8192, plan_options={}), ValueError, "plan_options"),
    (dict(stages=[Stage(1e12, 8192, global_batch=64)], plan_options={"seq": 4}), ValueError, "may not set 'seq'"),
    (dict(stages=[Stage(1e12, 8192, global_batch=64)], plan_options={"explain": False}), ValueError,
     "may not set 'explain'"),
    (dict(stages=[(1e12, 8192)], n_gpus=None), ValueError, r"stages\[0\].*give n_gpus"),
    (dict(stages=[Stage(1e12, 8192, parallel=L.Parallel(tp=8, dp=4), global_batch=6)]), ValueError,
     "not a multiple of micro_batch x dp"),
    (dict(stages=[(1e12, 8192)], mfu=1.5), ValueError, "mfu must be"),
])
def test_bad_stages_are_refused_by_name(kw, exc, match):
    kw = {"n_gpus": 8, **kw}
    with pytest.raises(exc, match=match):
        training_time("llama-3-8b", gpu="H100 SXM", **kw)


@pytest.mark.parametrize("kw, exc, match", [
    (dict(tokens=0, seq=8192), ValueError, "tokens must be > 0"),
    (dict(tokens=1e9, seq=0), ValueError, "seq must be an integer >= 1"),
    (dict(tokens=1e9, seq=8192, global_batch=0), ValueError, "global_batch"),
    (dict(tokens=1e9, seq=8192, mfu=0), ValueError, "mfu must be"),
    (dict(tokens=1e9, seq=8192, micro_batch=0), ValueError, "micro_batch"),
    (dict(tokens=1e9, seq=8192, n_gpus=4, parallel=L.Parallel(tp=8)), ValueError, "n_gpus=4 but"),
    (dict(tokens=1e9, seq=8192, parallel=(8, 1, 1)), TypeError, "parallel must be a Parallel"),
    (dict(tokens=1e9, seq=8192, name=3), TypeError, "name must be a string"),
])
def test_bad_stage_fields_are_refused_by_name(kw, exc, match):
    with pytest.raises(exc, match=match):
        Stage(**kw)


# --------------------------------------------------------------------------------------------- published runs
def test_published_stage_rows_are_sourced_and_add_up():
    df = published_stages()
    assert df["source"].str.len().min() > 40 and df["as_of"].notna().all()
    ds = df[df["run"] == "DeepSeek-V3"].set_index("stage")
    assert ds.loc["YaRN 32K", "tokens"] == 1000 * 1920 * 32768           # steps x batch x seq, by hand
    assert ds.loc["YaRN 128K", "tokens"] == 1000 * 480 * 131072
    assert ds.loc["pre-training at 4K", "phase_gpu_hours"] == 180_000 * 14.8   # 180K GPU-hours per trillion tokens
    ll = df[df["run"] == "Llama 3.1 405B"]
    assert ll["tokens"].sum() == pytest.approx(15.6e12)
    assert ll.loc[ll["seq"] == 131072, "global_batch"].item() * 131072 == pytest.approx(16 * 2**20)  # 16M tokens


def test_deepseek_standin_has_the_flops_it_stands_in_for():
    m = deepseek_v3_standin()
    assert m.n_params == pytest.approx(37e9, rel=0.02)                     # 37B activated (arXiv:2412.19437)
    for s in (4096, 32768, 131072):                                        # MLA: QK^T at 192 dims, AV at 128
        assert attention_flops_per_token(m, seq=s) == pytest.approx(61 * 128 * 2 * s * (192 + 128), rel=1e-12)


def test_deepseek_v3_context_extension_share_within_25_percent():
    """DeepSeek-V3 (Table 1): 119K GPU-hours for its 32K and 128K phases against 2,664K for 14.8T tokens at 4K, a
    ratio of 4.47%, for 0.85% of the tokens. The library, at the calibrated MFU of each stage's seq on the dense
    stand-in, must land within 25% of that ratio (it gives 5.1%: ~15% high; counting causal attention as half
    the matrix would give 3.3%, ~26% low: the convention is worth about that much here)."""
    published = 119_000 / 2_664_000
    ds = published_stages().query("run == 'DeepSeek-V3'")
    r = training_time(deepseek_v3_standin(), gpu="H800", n_gpus=2048, dtype="fp8",
                      stages=[(t, s) for t, s in zip(ds["tokens"], ds["seq"])])
    ratio = (r.stages[1].gpu_hours + r.stages[2].gpu_hours) / r.stages[0].gpu_hours
    assert 0.75 * published <= ratio <= 1.25 * published
    # the tokens alone would say 0.85%: the staged model must explain most of the 5x per-token premium
    token_share = (ds["tokens"].iloc[1] + ds["tokens"].iloc[2]) / ds["tokens"].iloc[0]
    assert token_share == pytest.approx(0.0085, abs=0.0001)
    assert ratio / token_share > 4


def test_llama_405b_staged_gpu_hours_against_the_model_card():
    """Llama 3.1 405B: 30.84M H100 GPU-hours in all (model card), 14.8T tokens at 8K then ~800B at 128K. At the
    paper's own steady-state MFUs (Table 4: 41% at 8K on 16,384 GPUs, 38% at 128K) the staged run must take 85% to
    100% of the published GPU-hours (the published figure also holds interruptions, ~90% effective time, and the
    annealing); at the calibrated whole-run MFU, 80% to 125%, with the published figure inside its range."""
    published = 30.84e6
    given = training_time("llama-3.1-405b", gpu="H100 SXM", n_gpus=16384,
                          stages=[Stage(14.8e12, 8192, mfu=0.41), Stage(0.8e12, 131072, mfu=0.38)])
    assert 0.85 * published <= given.gpu_hours <= published
    est = training_time("llama-3.1-405b", gpu="H100 SXM", n_gpus=16384, whole_run=True,
                        stages=[(14.8e12, 8192), (0.8e12, 131072)])
    assert 0.80 * published <= est.gpu_hours <= 1.25 * published
    assert est.gpu_hours_low <= published <= est.gpu_hours_high
    # the 128K stage is 5% of the tokens but costs more than twice its share per token (attention at 128K)
    share = est.stages[1].gpu_hours / est.gpu_hours
    assert share > 2 * 0.8 / 15.6


def test_published_stage_checks_table_matches_the_direct_calls():
    df = published_stage_checks().set_index("check")
    assert df["published"].iloc[0] == pytest.approx(119 / 2664)
    assert (df["ratio"] == df["predicted"] / df["published"]).all()
    assert 0.75 <= df["ratio"].iloc[0] <= 1.25 and 0.85 <= df["ratio"].iloc[1] <= 1.0


# ------------------------------------------------------------------------------------------------------ CLI
_TIME = ["time", "llama-3-8b", "--gpu", "H100 SXM", "--gpus", "64"]


def test_cli_time_stages_json_has_each_stage_and_the_total(capsys):
    assert cli.main(_TIME + ["--stage", "1T:8192", "--stage", "50B:32768", "--mfu", "0.4", "--price", "2",
                             "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["stage"] for r in rows] == ["stage 1", "stage 2", "total"]
    hours = [1e12 * flops_per_token_8b(8192), 5e10 * flops_per_token_8b(32768)]
    hours = [f / (H100_BF16 * 0.4) / 3600 for f in hours]
    assert rows[0]["gpu_hours"] == pytest.approx(hours[0], rel=1e-9)
    assert rows[1]["seq"] == 32768
    assert rows[2]["gpu_hours"] == pytest.approx(sum(hours), rel=1e-9)
    assert rows[2]["cost_usd"] == pytest.approx(2 * sum(hours), rel=1e-9)


def test_cli_time_stages_csv_and_table(capsys):
    assert cli.main(_TIME + ["--stage", "1T:8192", "--stage", "50B:32768", "--csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("stage,tokens,seq") and len(lines) == 4 and lines[3].startswith("total,")
    assert cli.main(_TIME + ["--stage", "1T:8192", "--stage", "50B:32768"]) == 0
    out = capsys.readouterr().out
    assert "2 stages" in out and "total" in out and "32,768" in out


def test_cli_plan_stages(capsys):
    argv = ["plan", "llama-3-8b", "--gpu", "H100 SXM", "--max-gpus", "64", "--stage", "100B:8192:256",
            "--stage", "10B:32768", "--global-batch", "64", "--json"]
    assert cli.main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 3 and all(r["n_gpus"] <= 64 for r in rows)
    df = plan("llama-3-8b", tokens=1e10, gpus=("H100 SXM",), seq=32768, global_batch=64, max_gpus=64)
    assert rows[1]["days"] == pytest.approx(df["days"].min(), rel=1e-9)
    # the JSON rounds each day count to 10 decimals: the sum of two rounded values is within 1e-10 of the
    # rounded total
    assert rows[2]["days"] == pytest.approx(rows[0]["days"] + rows[1]["days"], rel=0, abs=1.01e-10)


@pytest.mark.parametrize("argv, words", [
    (_TIME + ["--stage", "1T"], ["--stage", "TOKENS:SEQ"]),
    (_TIME + ["--stage", "1T:8192:64:2"], ["--stage", "TOKENS:SEQ"]),
    (_TIME + ["--stage", "1T:0"], ["--stage", "SEQ must be an integer >= 1"]),
    (_TIME + ["--stage", "x:8192"], ["--stage", "TOKENS", "not a count"]),
    (_TIME + ["--stage", "1T:8192:0"], ["--stage", "GLOBAL_BATCH"]),
    (_TIME + ["--stage", "1,5T:8192"], ["--stage", "thousands separator"]),
    (_TIME + ["--stage", "1T:8192", "--tokens", "1T"], ["--stage", "--tokens", "not both"]),
    (_TIME + ["--stage", "1T:8192", "--seq", "8192"], ["--stage", "--seq", "not both"]),
    (_TIME + ["--tokens", "1T"], ["--seq", "--stage"]),
    (["plan", "llama-3-8b", "--stage", "1T:8192"], ["--stage", "GLOBAL_BATCH", "--global-batch"]),
    (["plan", "llama-3-8b", "--stage", "1T:8192:64", "--gpu", "H100 SXM", "--gpu", "B200"], ["one --gpu"]),
    (["plan", "llama-3-8b", "--stage", "1T:8192:64", "--deadline-days", "3"], ["--deadline-days"]),
    (["plan", "llama-3-8b", "--tokens", "1T", "--seq", "8192"], ["--global-batch"]),
])
def test_cli_stage_errors_name_the_flag_and_the_form(argv, words, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    for w in words:
        assert w in err, (w, err)
