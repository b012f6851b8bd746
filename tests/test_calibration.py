"""The kernel-efficiency calibration of issue 21 (llmsizing.calibration, tools/calibrate.py): each published run
with a layout gets the kernel efficiency at which the step model reproduces its published MFU; each GPU
generation's default is the median over its calibration runs; the files in data/ are what a fresh fit gives."""

from pathlib import Path

import numpy as np
import pytest
from conftest import calibrate_check

import llmsizing as L
from llmsizing import calibration as C
from llmsizing.hardware import kernel_efficiency_row
from llmsizing.run_nodes import run_node

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fitted():
    return C.fit_kernel_efficiency()


def test_the_fitted_files_are_up_to_date():
    # tools/calibrate.py --check, run once per process for this test and tests/test_time_cost.py's
    code, printed = calibrate_check()
    assert code == 0, printed


def test_each_runs_kernel_efficiency_gives_back_its_published_mfu(fitted):
    per_run, _ = fitted
    with_layout = per_run[per_run["kernel_efficiency"].notna()]
    assert len(with_layout) >= 25
    for r in with_layout.itertuples():
        par, micro, accum, recompute = C._layout_of(r)
        st = L.step_time(r.model, r.gpu, par, batch=micro, seq=int(r.seq), grad_accum=accum, recompute=recompute,
                         kernel_efficiency=r.kernel_efficiency, dtype=r.dtype,
                         attention_kernel=C.attention_kernel_of(r.framework, r.gpu),
                         async_tp=r.tp_comm_overlap == "yes",     # the run's published TP overlap
                         tp_backward_overlap=r.tp_comm_overlap == "backward",   # (Megatron-LM's backward)
                         node=run_node(r))                        # and its node (blank: the GPU's default)
        assert st.mfu == pytest.approx(r.implied_mfu, rel=1e-6), r.run
        # the losses only take away: the MFU is at most what the kernels reach. The Linear layers reach at most the
        # kernel efficiency (their GEMMs' share is below 1); the attention core, counted as the whole s x s matrix
        # but run as its causal half, at most twice its kernels' best share (16K and beyond) of the BF16 peak,
        # over the peak of the run's dtype (FP8 recipes leave attention in BF16)
        from llmsizing.hardware import dense_tflops
        from llmsizing.kernels import attention_efficiency

        att = attention_efficiency(r.gpu, head_dim=L.get_model(r.model).head_dim, seq=1 << 20,
                                   kernel=C.attention_kernel_of(r.framework, r.gpu))
        ceiling = max(st.kernel_efficiency, 2 * att * dense_tflops(r.gpu, "bf16") / dense_tflops(r.gpu, r.dtype))
        assert st.mfu <= ceiling * (1 + 1e-12), r.run


def test_the_default_is_the_median_of_the_calibration_runs(fitted):
    per_run, fit = fitted
    for (gen, dtype), row in fit.iterrows():
        runs = per_run[(per_run["generation"] == gen) & (per_run["dtype"] == dtype) & per_run["kernel_fit"]]
        values = runs["kernel_efficiency"].dropna()
        # two runs at least (Hopper FP8 has two since issue 35 took NVIDIA's NeMo tables out: llm-foundry's
        # MPT 3B and Trainy's H200 8B; its other FP8 runs are held out or context-parallel)
        assert row["count"] == len(values) >= 2
        gpu = runs["gpu"].iloc[0]
        assert kernel_efficiency_row(gpu, dtype).kernel_efficiency == pytest.approx(np.median(values), abs=5e-4)


def test_held_out_runs_are_predicted_within_the_generations_spread(fitted):
    """Runs left out of the fit: the step model at the generation's default predicts their MFU within the
    spread the calibration runs themselves show around that default. (The context-parallel calibration runs,
    also out of the kernel fit, are checked by tests/test_context_parallel.py: torchtitan's FP8 8B at 128K,
    whose attention runs in BF16 under Float8 training, is outside what the step model's FP8 time covers.)

    One held-out run misses, and is named here so that the test fails if it ever comes back inside: torchao's
    Llama 3 8B on 8 H100s with float8 rowwise scaling (pytorch/ao torchao/float8/README.md, added in issue 34,
    Dec 2026) runs at 0.70 of the step model, below 0.75 x the Hopper FP8 calibration runs' lowest (0.471 /
    0.473 with the FP8 cast priced, fp8l34; 0.421 / 0.432 before). Rowwise scaling costs more per GEMM than
    the tensorwise recipe the two calibration runs used (the same table: +10% over BF16 against +25%), and the
    step model prices one recipe's casts (llmsizing.fp8_cast). The same table's BF16 row (6,150 tokens/s) runs
    at 0.78 of the step model too: most of the shortfall is not FP8's."""
    per_run, fit = fitted
    held = per_run[~per_run["calibration"] & per_run["kernel_efficiency"].notna()]
    assert len(held) >= 8
    known_out = {"Llama 3 8B, 8 H100s FSDP2 + compile + float8 rowwise (torchao README)"}
    for r in held.itertuples():
        row = fit.loc[(r.generation, r.dtype)] if (r.generation, r.dtype) in fit.index else None
        if row is None:
            continue
        # the run's published layout as the fit prices it (its async TP and attention kernel included: the
        # 70B Float8 run names AsyncTP, and on its own GPU, H100 HBM2e (Meta), it is within 3% of the median)
        mfu = C.run_mfu_at(r, row["median"])
        spread_low, spread_high = row["min"] / row["median"], row["max"] / row["median"]
        # MFU moves no faster than the kernel efficiency (communication does not speed up with it)
        inside = spread_low * 0.75 <= r.implied_mfu / mfu <= spread_high / 0.75
        assert inside != (r.run in known_out), (r.run, r.implied_mfu, mfu)


def test_a_generation_without_runs_says_so():
    row = kernel_efficiency_row("MI300X")
    assert row.runs == "" and "stand-in" in row.source
    assert L.time_cost.mfu_estimate("llama-3-8b", gpu="MI300X", seq=4096).warnings


def test_context_parallel_runs_are_held_out_of_the_kernel_fit(fitted):
    """Runs with cp > 1 now get a layout (and a per-run kernel efficiency) but stay out of the median: they are
    the held-out check of the context-parallel step model (issue 23)."""
    per_run, _ = fitted
    cp_runs = per_run[per_run["cp"].fillna(1) > 1]
    assert len(cp_runs) >= 2 and not cp_runs["kernel_fit"].any()
    l3 = cp_runs[cp_runs["run"].str.startswith("Llama 3.1 405B, 16,384 GPUs, 128K")].iloc[0]
    par, micro, accum, recompute = C._layout_of(l3)
    # 16,384 GPUs = 8 x 16 x 16 x 8 and 128 sequences = 1 x 16 micro-batches x 8 replicas
    assert (par.tp, par.cp, par.pp, par.dp, par.gpus, micro * accum * par.dp) == (8, 16, 16, 8, 16384, 128)
    assert par.cp_comm == "all_gather"                        # Llama 3, Sec. 3.3.2
    assert not np.isnan(l3["kernel_efficiency"])


def test_run_mfu_at_reads_a_series_dtype_field_not_its_own_dtype():
    """read17: a pandas Series has a ``dtype`` attribute of its own (``object`` for a run's row), which
    shadowed the run's ``dtype`` column in ``run_mfu_at``, so an FP8 run given as a Series was priced in BF16.
    A run is the same run whether it comes as a Series, a dict or a row of ``itertuples()``; torchtitan's
    Llama 3.1 8B at 128K (cp=4) trained in Float8, so its price must differ from the same layout in BF16."""
    from llmsizing.time_cost import published_runs

    df = published_runs()
    series = df[df["run"].str.contains("FSDP2 CP4, 128K context, Float8", regex=False)].iloc[0]
    assert series["dtype"] == "fp8" and series.dtype == object       # the shadowing attribute
    tuple_row = next(df.loc[[series.name]].itertuples(index=False))
    e = 0.5
    mfu = C.run_mfu_at(tuple_row, e)
    assert C.run_mfu_at(series, e) == pytest.approx(mfu, rel=1e-12)
    assert C.run_mfu_at(series.to_dict(), e) == pytest.approx(mfu, rel=1e-12)
    as_bf16 = C.run_mfu_at(tuple_row._replace(dtype="bf16"), e)
    assert abs(mfu / as_bf16 - 1) > 0.05                               # the dtype is read, not defaulted
