"""Issue 33, "no silent wrong number", round 3: the classes outside the library's core (readers,
calibration, scaling, the HF config reader, fine-tuning and the command line). One test per defect, each
failing on the code before its fix.

Expected numbers come from a hand derivation, a published figure or an independent library call, never from
the output under test.
"""

from __future__ import annotations

import importlib.util
import json
import math
import warnings
from pathlib import Path

import pytest

import llmsizing as L
from llmsizing import cli

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "data" / "nccl_tests"
NV_LOG = LOGS / "a100_sxm4_8gpu_nvlink_oci_all_reduce.txt"


def run_cli(argv, capsys):
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


# =========================================================================== #11 from_hf_config's model_type
@pytest.mark.parametrize("value", [[], {}, ["llama"], {"a": 1}, 3, 2.5, True])
def test_a_model_type_that_is_not_a_string_is_refused_by_name(value):
    with pytest.raises(TypeError, match="model_type must be a string") as info:
        L.Model.from_hf_config({"model_type": value})
    assert "llama" in str(info.value)                  # the allowed values are listed


def test_a_model_type_list_in_a_config_file_is_refused_with_the_file_named(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": [], "hidden_size": 64}))
    code, out, err = run_cli(["memory", str(tmp_path / "config.json"), "--batch", "1", "--seq", "64"], capsys)
    assert code == 2 and not out and "model_type" in err and "config.json" in err


# =========================================================================== #15 compute_optimal's spread
@pytest.mark.parametrize("flops", [1e20, 5.76e23, 1e26])
def test_the_stated_spread_holds_the_answer_of_every_fit(flops):
    from llmsizing.scaling import FITS, compute_optimal

    for fit in FITS:
        c = compute_optimal(flops, fit=fit)
        assert c.params_low <= c.params <= c.params_high, fit
        assert c.tokens_low <= c.tokens <= c.tokens_high, fit


def test_the_rounded_fit_widens_the_spread_to_its_hand_derived_answer():
    from llmsizing.scaling import GOPHER_FLOPS, compute_optimal

    # by hand with the printed 0.34 and 0.28 (Hoffmann et al. 2022, Eq. 10): G = (0.34 x 406.4 / (0.28 x
    # 410.7))^(1/0.62), N = G (C/6)^(0.28/0.62) = 32.2B at Gopher's budget: below Approach 3's 40B
    n = (0.34 * 406.4 / (0.28 * 410.7)) ** (1 / 0.62) * (GOPHER_FLOPS / 6) ** (0.28 / 0.62)
    c = compute_optimal(GOPHER_FLOPS, fit="approach3-rounded")
    assert c.params_low == pytest.approx(n, rel=1e-9)
    # the four published fits' spread is what every other fit states, unchanged: 40B (Approach 3) to 72B
    d = compute_optimal(GOPHER_FLOPS)
    assert d.params_low == pytest.approx(compute_optimal(GOPHER_FLOPS, fit="approach3").params, rel=1e-12)
    assert c.params_high == d.params_high


# =========================================================================== #14 calibration on a bad table
def _runs():
    from llmsizing.time_cost import published_runs

    return published_runs()


def _with(df, column, value, row=0):
    df = df.copy()
    df[column] = df[column].astype(object)
    df.at[df.index[row], column] = value
    return df


@pytest.mark.parametrize("fit", ["fit_mfu_model", "fit_kernel_efficiency"])
@pytest.mark.parametrize("runs, exc, words", [
    ([1, 2], TypeError, ["runs must be a DataFrame"]),
    ({"model": ["llama-2-7b"]}, TypeError, ["runs must be a DataFrame"]),
])
def test_calibration_refuses_a_runs_table_that_is_not_one(fit, runs, exc, words):
    from llmsizing import calibration as C

    with pytest.raises(exc) as info:
        getattr(C, fit)(runs)
    assert all(w in str(info.value) for w in words)


@pytest.mark.parametrize("fit", ["fit_mfu_model", "fit_kernel_efficiency"])
@pytest.mark.parametrize("column", ["seq", "gpu", "implied_mfu", "model", "calibration"])
def test_calibration_names_a_missing_column(fit, column):
    from llmsizing import calibration as C

    with pytest.raises(ValueError, match=f"lacks the columns \\['{column}'\\]"):
        getattr(C, fit)(_runs().drop(columns=[column]))


@pytest.mark.parametrize("fit", ["fit_mfu_model", "fit_kernel_efficiency"])
@pytest.mark.parametrize("column, value, exc", [
    ("seq", "4k", TypeError), ("seq", -1, ValueError), ("seq", 4096.5, ValueError),
    ("implied_mfu", math.nan, ValueError), ("implied_mfu", 1.5, ValueError),
    ("implied_mfu", "0.4", TypeError),
    ("model", "no-such-model", ValueError), ("model", 7, TypeError), ("gpu", "Z100", ValueError),
    ("calibration", "yes", TypeError), ("dtype", "fp4", ValueError), ("recompute", "sometimes", ValueError),
    ("n_gpus", 0, ValueError),
])
def test_calibration_names_the_row_and_column_of_a_bad_cell(fit, column, value, exc):
    from llmsizing import calibration as C

    df = _with(_runs(), column, value, row=2)
    run = df["run"].iloc[2]
    with pytest.raises(exc) as info:
        getattr(C, fit)(df)
    msg = str(info.value)
    assert f"column {column!r}" in msg and run in msg and "row 2" in msg


@pytest.mark.parametrize("column, value", [("dp", 2.5), ("zero", 4), ("tp", "8"), ("global_batch", 0)])
def test_kernel_fit_names_a_bad_layout_cell(column, value):
    from llmsizing import calibration as C

    with pytest.raises((TypeError, ValueError), match=f"column {column!r}"):
        C.fit_kernel_efficiency(_with(_runs(), column, value, row=5))


def test_calibration_refuses_an_empty_table_and_one_with_nothing_to_fit():
    from llmsizing import calibration as C

    with pytest.raises(ValueError, match="no rows"):
        C.fit_mfu_model(_runs().iloc[:0])
    with pytest.raises(ValueError, match="calibration True"):
        C.fit_mfu_model(_runs().assign(calibration=False))


@pytest.mark.parametrize("row, exc, words", [
    (1, TypeError, "row must be one run"), ("llama", TypeError, "row must be one run"),
    ({"model": "llama-2-7b"}, ValueError, "lacks the fields"),
])
def test_run_kernel_efficiency_refuses_a_row_that_is_not_a_run(row, exc, words):
    from llmsizing import calibration as C

    with pytest.raises(exc, match=words):
        C.run_kernel_efficiency(row)


def test_run_kernel_efficiency_takes_a_series_or_a_dict_as_it_takes_a_tuple():
    from llmsizing import calibration as C

    df = _runs()
    i = next(i for i, r in enumerate(df.itertuples()) if C.run_kernel_efficiency(r) is not None)
    want = C.run_kernel_efficiency(next(df.iloc[[i]].itertuples()))
    assert C.run_kernel_efficiency(df.iloc[i]) == want
    assert C.run_kernel_efficiency(df.iloc[i].to_dict()) == want
    with pytest.raises(ValueError, match="column 'pp'"):
        C.run_kernel_efficiency({**df.iloc[i].to_dict(), "pp": -2})


def test_a_good_table_fits_as_before():
    from llmsizing import calibration as C

    coef, _ = C.fit_mfu_model(_runs())
    default, _ = C.fit_mfu_model()
    assert coef.equals(default)


# =========================================================================== #9 and #12 nccl-tests logs
def _log(edit=None):
    """The NVLink log's text, with ``edit(lines, at)`` applied; and the line number (from 1) of each size's
    row."""
    lines = NV_LOG.read_text().splitlines()
    at = {int(t.split()[0]): i + 1 for i, t in enumerate(lines)
          if t.split() and t.split()[0].isdigit() and len(t.split()) >= 11}
    if edit:
        edit(lines, at)
    return "\n".join(lines), at


def _set(lines, at, size, pos, value):
    toks = lines[at[size] - 1].split()
    toks[pos] = value
    lines[at[size] - 1] = "  ".join(toks)


def test_a_row_with_wrong_results_is_refused_naming_its_line_and_column():
    from llmsizing.alpha_beta import from_nccl_tests, parse_nccl_tests

    text, at = _log(lambda lines, at: _set(lines, at, 1 << 20, -5, "17"))    # 17 wrong elements, out-of-place
    for call in (parse_nccl_tests, from_nccl_tests):
        with pytest.raises(ValueError) as info:
            call(text)
        msg = str(info.value)
        assert f"line {at[1 << 20]}" in msg and "#wrong (out-of-place)" in msg and "17" in msg


def test_a_wrong_in_place_result_is_refused_too():
    from llmsizing.alpha_beta import from_nccl_tests

    text, at = _log(lambda lines, at: _set(lines, at, 1 << 30, -1, "1e+06"))   # %g of a million
    with pytest.raises(ValueError, match=f"line {at[1 << 30]}, column #wrong \\(in-place\\)"):
        from_nccl_tests(text)


def test_wrong_rows_can_be_dropped_with_a_warning_naming_each_line():
    from llmsizing.alpha_beta import fit_two_regimes, from_nccl_tests, parse_nccl_tests

    sizes = (1 << 20, 1 << 26)

    def edit(lines, at):
        for s in sizes:
            _set(lines, at, s, -5, "3")
    text, at = _log(edit)
    with pytest.warns(UserWarning) as caught:
        fit = from_nccl_tests(text, wrong_results="drop")
    said = " ".join(str(w.message) for w in caught)
    assert all(f"line {at[s]}" in said for s in sizes)
    assert not set(sizes) & set(fit.table["size_bytes"])
    # the fit is that of the clean rows alone, fitted independently
    clean = parse_nccl_tests(NV_LOG.read_text())
    clean = clean[~clean["size_bytes"].isin(sizes)]
    ref = fit_two_regimes(clean["size_bytes"].tolist(), (clean["time_us"] * 1e-6).tolist(),
                          collective="all_reduce", n=8)
    assert fit.regimes.large.busbw_gbps == ref.large.busbw_gbps


def test_validation_off_is_accepted_and_an_old_error_column_within_tolerance_too():
    from llmsizing.alpha_beta import from_nccl_tests, parse_nccl_tests

    def na(lines, at):
        for s in at:
            _set(lines, at, s, -5, "N/A")
            _set(lines, at, s, -1, "N/A")
    text, _ = _log(na)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(from_nccl_tests(text).table) == 28
    # older nccl-tests printed the largest relative error; float sums are correct up to 1e-5 (deltaMaxValue)
    head = ("# all_reduce_perf\n#   Rank  0 Pid 1 on h device 0 [0x00] V100\n#   Rank  1 Pid 1 on h device 1 "
            "[0x00] V100\n")
    row = "{:>10d} {:>10d} float sum {:.2f} 0.10 0.10 {} {:.2f} 0.10 0.10 0e+00\n"
    ok = head + row.format(1024, 256, 10.0, "4e-07", 10.1) + row.format(2048, 512, 11.0, "0e+00", 11.2)
    assert len(parse_nccl_tests(ok)) == 2
    bad = head + row.format(1024, 256, 10.0, "3e-02", 10.1) + row.format(2048, 512, 11.0, "0e+00", 11.2)
    with pytest.raises(ValueError, match="line 4, column #wrong \\(out-of-place\\).*tolerance"):
        parse_nccl_tests(bad)


def test_a_failed_footer_without_a_row_to_blame_is_refused():
    from llmsizing.alpha_beta import parse_nccl_tests

    text = NV_LOG.read_text().replace("Out of bounds values : 0 OK", "Out of bounds values : 12 FAILED")
    n = next(i + 1 for i, ln in enumerate(text.splitlines()) if "Out of bounds" in ln)
    with pytest.raises(ValueError, match=f"line {n}: nccl-tests reports 12 out-of-bounds"):
        parse_nccl_tests(text)


@pytest.mark.parametrize("pos, value, column", [
    (-8, "0.00", "time (out-of-place, us)"), (-8, "-3.1", "time (out-of-place, us)"),
    (-8, "nan", "time (out-of-place, us)"), (-8, "inf", "time (out-of-place, us)"),
    (-7, "abc", "algbw (out-of-place, GB/s)"), (-2, "-1", "busbw (in-place, GB/s)"),
    (-4, "x", "time (in-place, us)"), (-5, "ok", "#wrong (out-of-place)"),
])
def test_a_corrupt_cell_is_refused_naming_its_line_and_column(pos, value, column):
    from llmsizing.alpha_beta import from_nccl_tests

    size = 1 << 27                                       # the 28th row of the table (times_s[27] in the fit)
    text, at = _log(lambda lines, at: _set(lines, at, size, pos, value))
    with pytest.raises(ValueError) as info:
        from_nccl_tests(text)
    msg = str(info.value)
    assert f"line {at[size]}, column {column}" in msg and "times_s" not in msg


def test_fit_errors_name_the_log_not_the_fit_lists():
    from llmsizing.alpha_beta import from_nccl_tests

    lines = NV_LOG.read_text().splitlines()
    rows = [i for i, t in enumerate(lines) if t.split() and t.split()[0].isdigit() and len(t.split()) >= 11]
    few = "\n".join(lines[:rows[0]] + lines[rows[0]:rows[0] + 4])        # only 4 rows of the table
    with pytest.raises(ValueError) as info:
        from_nccl_tests(few)
    msg = str(info.value)
    assert f"lines {rows[0] + 1}-{rows[0] + 4}" in msg and "sizes_bytes" not in msg and "min_points" in msg
    flat = "\n".join(lines[:rows[0]] + [lines[r].replace(lines[r].split()[5], "50.0", 1) for r in rows[:8]])
    with pytest.raises(ValueError) as info:                # every time equal: no bandwidth to fit
        from_nccl_tests(flat)
    assert "times_s" not in str(info.value) and "sizes_bytes" not in str(info.value)


def test_the_fit_tool_names_the_file_line_and_column(tmp_path):
    spec = importlib.util.spec_from_file_location("fit_nccl_logs", ROOT / "tools" / "fit_nccl_logs.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    text, at = _log(lambda lines, at: _set(lines, at, 1 << 24, -5, "5"))
    (tmp_path / "bad_all_reduce.txt").write_text(text)
    with pytest.raises(ValueError, match=f"bad_all_reduce.txt: text line {at[1 << 24]}, column #wrong"):
        tool.fits(tmp_path)


# =========================================================================== #5 `time` on a planned stage
_PLANNED = ["time", "llama-3-8b", "--stage", "1T:8192", "--stage", "50B:32768:64", "--gpu", "H100 SXM",
            "--gpus", "64"]


@pytest.mark.parametrize("extra, flag", [
    (["--mfu", "0.3"], "--mfu"), (["--mfu-range", "0.1", "0.2"], "--mfu-range"),
    (["--whole-run"], "--whole-run"),
    (["--recompute", "full"], "--recompute"), (["--recompute", "none"], "--recompute"),
    (["--recompute", "full", "--recompute-layers", "4"], "--recompute"),
])
def test_time_refuses_a_flag_a_planned_stage_ignores(extra, flag, capsys):
    code, out, err = run_cli(_PLANNED + extra, capsys)
    assert code == 2 and not out
    assert f"{flag} does not apply to --stage number 2" in err and "GLOBAL_BATCH" in err


def test_time_on_a_planned_stage_without_those_flags_is_the_library(capsys):
    from llmsizing.stages import Stage

    rows = json.loads(run_cli(["time", "llama-3-8b", "--stage", "50B:8192:64", "--gpu", "H100 SXM", "--gpus",
                               "64", "--price", "2", "--json"], capsys)[1])
    r = L.training_time("llama-3-8b", stages=[Stage(50e9, 8192, global_batch=64)], gpu="H100 SXM", n_gpus=64,
                        price_usd_per_gpu_hour=2.0)
    assert rows[0]["days"] == pytest.approx(r.stages[0].days, rel=1e-9)            # (JSON: 10 digits)
    assert rows[0]["cost_usd"] == pytest.approx(r.stages[0].cost_usd, rel=1e-9)


def test_time_flags_still_change_an_unplanned_stage(capsys):
    base = ["time", "llama-3-8b", "--stage", "1T:8192", "--gpu", "H100 SXM", "--gpus", "64", "--json"]
    days = {}
    for label, extra in (("none", []), ("mfu", ["--mfu", "0.3"]), ("whole", ["--whole-run"]),
                         ("recompute", ["--recompute", "full"])):
        code, out, _ = run_cli(base + extra, capsys)
        assert code == 0
        days[label] = json.loads(out)[0]["days"]
    assert len(set(days.values())) == 4
    # --mfu 0.3 is exact: 6 N D / (64 x peak x 0.3), the library's own count of the stage's FLOPs
    t = L.training_time("llama-3-8b", tokens=1e12, seq=8192, gpu="H100 SXM", n_gpus=64, mfu=0.3)
    assert days["mfu"] == pytest.approx(t.days, rel=1e-9)


@pytest.mark.parametrize("rng", [["0.1", "0.2"], ["0.9", "0.95"]])
def test_time_mfu_range_is_checked_on_every_path(rng, capsys):
    # the calibrated MFU of Llama-3-8B at 8K on H100s is neither below 0.2 nor above 0.9: both refused
    for argv in (["time", "llama-3-8b", "--tokens", "1T", "--seq", "8192", "--gpu", "H100 SXM", "--gpus",
                  "64"],
                 ["time", "llama-3-8b", "--stage", "1T:8192", "--gpu", "H100 SXM", "--gpus", "64"]):
        code, out, err = run_cli(argv + ["--mfu-range", *rng], capsys)
        assert code == 2 and "--mfu-range" in err and not out
    code, _, err = run_cli(_PLANNED + ["--mfu-range", *rng], capsys)
    assert code == 2 and "--mfu-range does not apply" in err


# =========================================================================== #6 `finetune` and --grad-accum
_FT = ["finetune", "qwen-7b", "--method", "full", "--gpus", "8", "--strategy", "fsdp", "--gpu", "H100 SXM",
       "--seq", "4096", "--json"]


def test_finetune_cli_sizes_memory_batch_and_context_at_its_grad_accum(capsys):
    from llmsizing.finetune_time import finetune_memory_per_gpu, max_batch_per_gpu, max_seq

    code, out, _ = run_cli(_FT + ["--grad-accum", "8"], capsys)
    assert code == 0
    row = json.loads(out)[0]
    kw = dict(method="full", n_gpus=8, strategy="fsdp", rank=16, recompute="full")
    with8 = finetune_memory_per_gpu("qwen-7b", batch=1, seq=4096, grad_accum=8, **kw).total_bytes
    with1 = finetune_memory_per_gpu("qwen-7b", batch=1, seq=4096, grad_accum=1, **kw).total_bytes
    assert with8 > with1                     # accumulated gradients alive during the forward
    assert row["memory_per_gpu_bytes"] == pytest.approx(with8, rel=1e-9)
    assert row["max_batch"] == max_batch_per_gpu("qwen-7b", "H100 SXM", seq=4096, grad_accum=8, **kw)
    assert row["max_seq"] == max_seq("qwen-7b", "H100 SXM", batch=1, grad_accum=8, **kw)
    assert row["fits"] == (with8 <= 0.9 * L.get_gpu("H100 SXM").memory_bytes)


def test_finetune_cli_gives_the_issues_true_figure(capsys):
    # issue 33's example: FSDP full fine-tuning of qwen-7b showed 39.83 GiB where the step with accumulation
    # needs 42.63 GiB (without accumulation it is 39.83 GiB)
    argv = ["finetune", "qwen-7b", "--method", "full", "--gpus", "4", "--strategy", "fsdp", "--seq", "1024",
            "--recompute", "none", "--json"]
    one = json.loads(run_cli(argv, capsys)[1])[0]["memory_per_gpu_bytes"]
    four = json.loads(run_cli(argv + ["--grad-accum", "4"], capsys)[1])[0]["memory_per_gpu_bytes"]
    assert round(one / 2**30, 2) == 39.83 and round(four / 2**30, 2) == 42.63


def test_finetune_cli_grad_accum_moves_lora_memory_too(capsys):
    from llmsizing.finetune_time import finetune_memory_per_gpu

    base = ["finetune", "llama-3-8b", "--method", "lora", "--gpu", "A100 80GB", "--json"]
    one = json.loads(run_cli(base, capsys)[1])[0]["memory_per_gpu_bytes"]
    four = json.loads(run_cli(base + ["--grad-accum", "4"], capsys)[1])[0]["memory_per_gpu_bytes"]
    lib = finetune_memory_per_gpu("llama-3-8b", method="lora", batch=1, seq=2048, recompute="full",
                                  grad_accum=4)
    assert four == pytest.approx(lib.total_bytes, rel=1e-9) and four > one


# ========================================================================= finetune_memory's parallel=
def test_lora_with_a_layout_names_the_function_that_does_it():
    with pytest.raises(ValueError, match="finetune_memory_per_gpu"):
        L.finetune_memory("llama-3-8b", method="lora", batch=1, seq=512, parallel=L.Parallel(dp=2))


# ========================================================================= QLoRA's default: k-bit prep
def test_qlora_defaults_to_kbit_prep_and_says_so():
    m = L.get_model("llama-3-8b")
    kw = dict(method="qlora", batch=1, seq=2048, recompute="full")
    default = L.finetune_memory(m, **kw)
    assert default == L.finetune_memory(m, kbit_prep=True, **kw)
    bare = L.finetune_memory(m, kbit_prep=False, **kw)
    # by hand: every parameter outside the blocks' matrices (embedding, LM head, norms) 2 bytes more
    parts = m.param_breakdown()
    assert default.base_weights_bytes - bare.base_weights_bytes == 2 * (parts["embedding"] + parts["lm_head"]
                                                                      + parts["norms"])
    assert "kbit_prep=True" in default.assumes and "kbit_prep=False" in bare.assumes
    assert "kbit_prep" not in L.finetune_memory(m, method="lora", batch=1, seq=2048).assumes


def test_qlora_max_context_defaults_to_what_most_recipes_run():
    from llmsizing.finetune import max_context

    kw = dict(method="qlora", rank=32, recompute="full", stack="hf", optimizer="adamw-8bit")
    default = max_context("llama-3-8b", "A100 80GB", **kw)
    assert default == max_context("llama-3-8b", "A100 80GB", kbit_prep=True, **kw)
    assert default < max_context("llama-3-8b", "A100 80GB", kbit_prep=False, **kw)


def test_finetune_cli_states_its_assumptions_and_takes_no_kbit_prep(capsys):
    from llmsizing.finetune_time import finetune_memory_per_gpu

    base = ["finetune", "llama-3-8b", "--method", "qlora", "--gpu", "A100 80GB"]
    code, out, _ = run_cli(base, capsys)
    assert code == 0 and "assumes:" in out and "kbit_prep=True" in out and "loop='trainer'" in out
    row = json.loads(run_cli(base + ["--no-kbit-prep", "--json"], capsys)[1])[0]
    lib = finetune_memory_per_gpu("llama-3-8b", method="qlora", batch=1, seq=2048, recompute="full",
                                  kbit_prep=False)
    assert row["memory_per_gpu_bytes"] == pytest.approx(lib.total_bytes, rel=1e-9)
    assert "kbit_prep=False" in row["assumes"]
    code, _, err = run_cli(["finetune", "llama-3-8b", "--method", "lora", "--no-kbit-prep"], capsys)
    assert code == 2 and "--no-kbit-prep" in err


# =========================================================================== a loop that keeps the output
@pytest.mark.parametrize("method, dtype, per_logit", [("lora", "bf16", 2), ("lora", "fp32", 4),
                                                      ("qlora", "bf16", 2), ("full", "bf16", 2)])
def test_a_loop_that_keeps_the_output_holds_one_more_logits_tensor(method, dtype, per_logit):
    kw = dict(method=method, batch=1, seq=8192, recompute="full")
    if dtype != "bf16":
        kw["dtype"] = dtype
    trainer = L.finetune_memory("llama-3-8b", **kw)
    kept = L.finetune_memory("llama-3-8b", loop="keep_output", **kw)
    logits = 8192 * 128256 * per_logit       # Llama 3 at 8K tokens in bf16: 2.1 GB per micro-batch (issue 33)
    assert kept.kept_output_bytes == logits and trainer.kept_output_bytes == 0
    assert kept.peak_bytes - trainer.peak_bytes == pytest.approx(logits)
    assert trainer.loop == "trainer" and "loop='trainer'" in trainer.assumes
    assert kept.loop == "keep_output" and "loop='keep_output'" in kept.assumes
    assert "kept output" in kept.to_frame().index and "kept output" not in trainer.to_frame().index


def test_keep_output_is_refused_where_the_logits_are_split():
    with pytest.raises(ValueError, match="loop='keep_output'"):
        L.finetune_memory("llama-3-8b", method="full", batch=1, seq=2048, parallel=L.Parallel(tp=2),
                          loop="keep_output")
    with pytest.raises(ValueError, match="loop"):
        L.finetune_memory("llama-3-8b", method="lora", batch=1, seq=2048, loop="accelerate")


def test_finetune_cli_loop_is_the_library(capsys):
    from llmsizing.finetune_time import finetune_memory_per_gpu

    row = json.loads(run_cli(["finetune", "llama-3-8b", "--method", "lora", "--seq", "8192", "--loop",
                              "keep_output", "--json"], capsys)[1])[0]
    lib = finetune_memory_per_gpu("llama-3-8b", method="lora", batch=1, seq=8192, recompute="full",
                                  loop="keep_output")
    assert row["memory_per_gpu_bytes"] == pytest.approx(lib.total_bytes, rel=1e-9)
    assert row["loop"] == "keep_output" and "keep_output" in row["assumes"]


@pytest.mark.parametrize("changes", [{"virtual_stages": 4096.0}, {"tp": 3.0, "n_gpus": math.nan},
                                     {"pp": 256.0, "n_gpus": math.nan}])
def test_kernel_fit_names_the_row_whose_layout_cannot_run(changes):
    from llmsizing import calibration as C

    df = _runs()
    i = df.index[df["dp"].notna() & (df["pp"].fillna(1) > 1)][0]
    for column, value in changes.items():
        df = _with(df, column, value, row=df.index.get_loc(i))
    with pytest.raises(ValueError) as info:
        C.fit_kernel_efficiency(df)
    msg = str(info.value)
    assert f"runs row {i}" in msg and df.loc[i, "run"] in msg and "layout" in msg
