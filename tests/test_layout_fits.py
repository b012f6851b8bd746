"""Every published layout ran, so the memory model must say that it fits (issue 38; llmsizing.layout_fits,
data/published_layout_fits.csv written by tools/layout_fits.py).

Where the model says that a run which ran does not fit, the test is an xfail(strict=True) with the reason:
it is a finding against the model or against the row, and it must start failing if either changes. The
expected bytes below are worked out by hand from model configs and datasheets. None is read off the library.
"""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from llmsizing.layout_fits import published_layout_fits

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "data" / "published_layout_fits.csv"
GiB = 2**30
RUNS = [r["run"] for r in csv.DictReader(open(CSV, newline=""))]

#: The runs the model says do not fit their GPU as the row is read today, with why (notes/fit28.md).
DOES_NOT_FIT = {
    "Llama 3.1 405B, 8,192 GPUs (TP8 PP16 DP64)":
        "zero=2 stands in for Meta's FSDP (the row's note); priced on llama3_405b_layout as Meta states it, "
        "the tensors + 1 GiB fit but not the 8% fragmentation allowance (tests/test_llama3_405b.py)",
    "GLM-130B, 768 A100 40GB (DeepSpeed PipeDream-Flush, TP4 PP8 DP24)":
        "ZeRO stage not stated, read as 0: 16 B/param of 130B / 32 is 65 GB on a 40 GB GPU; ZeRO-1 fits",
    "GPT3-1.3B 8k (FlashAttention-2 paper, 8 x A100 80GB, ZeRO-1 DDP)":
        "0.4% over: the library's loss backward holds 8 B/logit, flash-attn's CrossEntropyLoss with "
        "inplace_backward=True (its training/configs/experiment/pile/base.yaml) writes the gradient in place",
    "GPT3-2.7B 8k (FlashAttention-2 paper, 8 x A100 80GB, ZeRO-1 DDP)":
        "micro-batch 4 is the config's formula copied from the 2k config; 4 x 8K tokens of activations "
        "do not fit without recomputation by any per-layer count near 34 s b h",
    "KempnerForge 7B (llama-3-8b), 1 x H200, single GPU":
        "KempnerForge casts the model to bf16 (pure bf16 AdamW, 8 B/param), which the dtype column cannot "
        "say; priced so (gib_stated) it fits",
    "DeepSeek-V3 pre-training":
        "the generic model lacks DeepSeek's recomputed RMSNorms and MLA up-projections, FP8 caches and "
        "DualPipe; llmsizing.deepseek.deepseek_memory, which has them, fits",
    "DeepSeek-V2 pre-training":
        "'a portion of the operators are recomputed' (arXiv:2405.04434 Sec. 3.1.3) is not priced: the row "
        "recomputes nothing",
    "Llama 2 7B, 8 H100 (MaxText on 1x A3, FSDP 8 x DP 1, batch 4 a GPU)":
        "MaxText's remat_policy=minimal_flash keeps the matmul outputs and the attention output and reruns "
        "the element-wise ops (MaxText/layers/models.py at efb6d9e4a); the row prices recompute none, "
        "which keeps every activation (66.5 GiB at 4 x 4,096 tokens a GPU): a recipe the column cannot say",
    "Llama 2 7B, 16 H100 (MaxText on 2x A3, FSDP 8 x DP 2, batch 4 a GPU)":
        "MaxText's remat_policy=minimal_flash keeps the matmul outputs and the attention output and reruns "
        "the element-wise ops (MaxText/layers/models.py at efb6d9e4a); the row prices recompute none, "
        "which keeps every activation (66.5 GiB at 4 x 4,096 tokens a GPU): a recipe the column cannot say",
    "Llama 2 7B, 32 H100 (MaxText on 4x A3, FSDP 8 x DP 4, batch 4 a GPU)":
        "MaxText's remat_policy=minimal_flash keeps the matmul outputs and the attention output and reruns "
        "the element-wise ops (MaxText/layers/models.py at efb6d9e4a); the row prices recompute none, "
        "which keeps every activation (66.5 GiB at 4 x 4,096 tokens a GPU): a recipe the column cannot say",
    "Llama 4 Scout pre-training": "layout not published: the row's assumed pp 4 / ep 16 / ZeRO-1",
    "Llama 4 Maverick pre-training": "layout not published: the Scout row's assumptions kept",
}

#: Rows priced as their source states it (gib_stated) that do not fit either.
STATED_DOES_NOT_FIT = {
    "Llama 3.1 405B, 8,192 GPUs (TP8 PP16 DP64)":
        "32 micro-batches keep 141 one-layer chunks on stage 1 (Megatron's interleaved table): the tensors + "
        "1 GiB fit 80 GB, the 8% fragmentation allowance does not (tests/test_llama3_405b.py)",
}


@pytest.fixture(scope="module")
def fits():
    return published_layout_fits().set_index("run")


def test_the_file_is_what_the_tool_writes():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "layout_fits.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_run_has_its_source_and_date():
    rows = list(csv.DictReader(open(CSV, newline="")))
    assert len(rows) == len(RUNS) > 100
    assert all(r["source"] and r["as_of"] and r["method"] for r in rows)
    assert set(DOES_NOT_FIT) <= set(RUNS) and set(STATED_DOES_NOT_FIT) <= set(RUNS)


@pytest.mark.parametrize("run", [
    pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=DOES_NOT_FIT[r])) if r in DOES_NOT_FIT else r
    for r in RUNS])
def test_every_published_layout_fits(fits, run):
    row = fits.loc[run]
    assert row["gib_today"] <= row["gpu_gib"]


@pytest.mark.parametrize("run", [
    pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=STATED_DOES_NOT_FIT[r]))
    if r in STATED_DOES_NOT_FIT else r
    for r in ("Llama 3.1 405B, 8,192 GPUs (TP8 PP16 DP64)", "Llama 3.1 405B, 16,384 GPUs (TP8 PP16 DP128)",
              "Llama 3.1 405B, 16,384 GPUs, 128K context (TP8 CP16 PP16 DP4)",
              "KempnerForge 7B (llama-3-8b), 1 x H200, single GPU", "DeepSeek-V3 pre-training")])
def test_runs_priced_as_their_source_states_fit(fits, run):
    row = fits.loc[run]
    assert row["gib_stated"] <= row["gpu_gib"]


def test_gpu_memory_is_the_drivers_total(fits):
    # nvidia-smi's totals: 81,559 MiB (H100 SXM), 81,920 MiB (A100 80GB), 143,771 MiB (H200)
    for gpu, mib in (("H100 SXM", 81559), ("A100 80GB", 81920), ("H200", 143771)):
        got = fits.loc[fits["gpu"] == gpu, "gpu_gib"]
        assert len(got) and all(g == pytest.approx(mib / 1024) for g in got)


def test_single_gpu_states_by_hand(fits):
    """Llama 3 8B on one GPU, bf16-mixed: 2 B of weights and 12 B of FP32 master + Adam moments per
    parameter. Parameters from its config: 2 x 128,256 x 4,096 (embedding, head) + 32 x (2 x 4,096^2 + 2 x
    4,096 x 1,024 + 3 x 4,096 x 14,336 + 2 x 4,096) + 4,096 = 8,030,261,248."""
    n = 2 * 128256 * 4096 + 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 4096
    assert n == 8_030_261_248
    row = fits.loc["KempnerForge 7B (llama-3-8b), 1 x H200, single GPU"]
    assert row["peak_phase"] == "optimizer step"
    assert row["weights_gib"] == pytest.approx(2 * n / GiB)
    assert row["optimizer_states_gib"] == pytest.approx(12 * n / GiB)


def test_the_buffer_only_on_megatron_stacks_at_zero_0_or_1(fits):
    buf = fits["grad_buffer"]
    low_zero = fits["layout"].str.contains("zero[01] ", regex=True)
    assert (buf == ((fits["stack"] == "megatron") & low_zero)).all()
    # a persistent buffer never lowers the total, and without one nothing changes
    assert (fits.loc[buf, "gib_buffer"] >= fits.loc[buf, "gib_today"]).all()
    assert (fits.loc[~buf, "gib_buffer"] == fits.loc[~buf, "gib_today"]).all()
    # bf16 gets Megatron-LM's FP32 buffer, fp16 keeps its own dtype (accumulate_allreduce_grads_in_fp32 is
    # set by --bf16 only)
    pairs = set(zip(fits.loc[buf, "precision_today"], fits.loc[buf, "precision_buffer"]))
    assert pairs <= {("bf16-mixed", "bf16-mixed-fp32-grads"), ("fp16-mixed", "fp16-mixed")}


def test_fp32_buffer_by_hand(fits):
    """Nemotron-4 15B, TP8 DP96, ZeRO-1, 384 sequences over dp 96 = 4 micro-batches: accumulating, the bf16
    gradients are alive at every phase already, so the FP32 buffer adds 2 more bytes per parameter of the
    TP shard, and the allowance's 8% on them. Nemotron-4 15B (arXiv:2402.16819): 32 layers, hidden 6,144,
    48 heads, 8 KV heads of 128, squared-ReLU MLP of 24,576, vocabulary 256,000, untied."""
    h, f, v, layers = 6144, 24576, 256000, 32
    per_layer = h * h + 2 * h * 8 * 128 + h * h + 2 * h * f       # q, k, v, o, up and down (no gate)
    row = fits.loc["Nemotron-4 15B, 768 H100s (TP8 DP96, batch 384)"]
    n_shard = (layers * per_layer + 2 * v * h) / 8                 # the norms (kilobytes) left out
    extra = row["gib_buffer"] - row["gib_today"]
    assert extra == pytest.approx(1.08 * 2 * n_shard / GiB, rel=0.01)


# ----------------------------------------------------------------------------- chapter 5's table

def test_every_miss_has_one_cause_and_the_same_as_here(fits):
    from llmsizing.layout_fits import MISS_CAUSES, MISSES, layout_misses

    miss = layout_misses(fits.reset_index())
    assert set(miss["run"]) == set(MISSES) == set(DOES_NOT_FIT)
    assert set(miss["cause"]) <= set(MISS_CAUSES)
    assert all(len(why) <= 100 for _, why in MISSES.values())     # one line in the chapter's table


def test_the_summary_counts_every_run_once(fits):
    from llmsizing.layout_fits import layout_fit_summary, layout_misses

    table = fits.reset_index()
    summary = layout_fit_summary(table).set_index("outcome")["runs"]
    assert summary.sum() == len(table) == len(RUNS)
    assert summary["fits"] == len(RUNS) - len(DOES_NOT_FIT)
    by_cause = layout_misses(table)["cause"].value_counts()
    assert all(summary[f"does not fit: {c}"] == n for c, n in by_cause.items())


def test_a_cause_that_disagrees_with_the_table_is_an_error(fits):
    from llmsizing.layout_fits import layout_misses

    table = fits.reset_index()
    flipped = table.assign(fits_today=table["fits_today"] | (table["run"] == "DeepSeek-V3 pre-training"))
    with pytest.raises(ValueError, match="fits"):
        layout_misses(flipped)


def test_the_gradient_buffer_changes_no_miss(fits):
    miss = fits.loc[list(DOES_NOT_FIT)]
    assert not miss["grad_buffer"].any() and not miss["fits_buffer"].any()


# ----------------------------------------------------------------------------- measured memory

MEASURED = ROOT / "data" / "published_measured_memory.csv"


def test_evidence_rules_by_hand():
    from llmsizing.layout_fits import _evidence

    # reserved >= allocated: a model peak above the max reserved over-counts, one below proves nothing
    assert _evidence("max_reserved", 10.0, 9.0) == "over-counts"
    assert _evidence("max_reserved", 9.0, 10.0) == "no evidence"
    # the max allocated is the live tensors' peak: either side is evidence
    assert _evidence("max_allocated", 9.0, 10.0) == "under-counts"
    assert _evidence("max_allocated", 10.0, 9.0) == "over-counts"
    with pytest.raises(ValueError, match="statistic"):
        _evidence("max_active", 1.0, 1.0)


def test_measured_rows_name_their_run_statistic_and_source():
    rows = list(csv.DictReader(open(MEASURED, newline="")))
    framework = {r["run"]: r["framework"]
                 for r in csv.DictReader(open(ROOT / "data" / "published_runs.csv", newline=""))}
    assert rows and all(r["run"] in framework and r["source"] and r["as_of"] for r in rows)
    # torchtitan logs reserved_bytes.all.peak (torchao's README tables print that log line's maximum),
    # KempnerForge max_memory_allocated (the sources' code)
    assert all(r["statistic"] == ("max_reserved" if framework[r["run"]] == "torchtitan" else "max_allocated")
               for r in rows)
    readme = [r for r in rows if "torchao README" in r["run"]]
    assert len(readme) == 10 and all("GiB" in r["source"] and "max_reserved" in r["source"] for r in readme)
    assert all(r["micro_batch_source"] for r in rows if r["micro_batch"])


def test_measured_comparison_follows_its_rule():
    from llmsizing.layout_fits import published_measured_memory

    m = published_measured_memory()
    assert len(m) == len(list(csv.DictReader(open(MEASURED, newline=""))))
    assert (m["ratio"] == m["measured_gib"] / m["model_gib"]).all()
    over = m["model_gib"] > m["measured_gib"]
    assert (m.loc[over, "evidence"] == "over-counts").all()
    under = ~over & (m["statistic"] == "max_allocated") & (m["model_gib"] < m["measured_gib"])
    assert (m.loc[under, "evidence"] == "under-counts").all()
    assert (m.loc[~over & (m["statistic"] == "max_reserved"), "evidence"] == "no evidence").all()


def test_kempnerforge_single_gpu_measured_by_hand():
    """KempnerForge's 1-GPU run, as mfu_bench.sh ran it (micro-batch 2), pure bf16: weights, gradients and
    AdamW's two moments are 2 B each, 8 B per parameter of Llama-3-8B's 8,030,261,248 at the optimizer
    step, so the model's peak is at least that, and the measured 80.7 GiB allocated is above both."""
    from llmsizing.layout_fits import published_measured_memory

    m = published_measured_memory().set_index("run").loc["KempnerForge 7B (llama-3-8b), 1 x H200, single GPU"]
    assert m["micro_batch"] == 2
    assert 8 * 8_030_261_248 / GiB <= m["model_gib"] < m["measured_gib"] == 80.7


def test_stacks_and_stated_pricing_come_from_data_not_names(monkeypatch, tmp_path):
    """A MoE row's stack is its ``framework`` cell: JetMoE's report runs Megatron (arXiv:2404.07413
    Sec. 4.1), so the buffer applies; OLMoE's FSDP does not keep one. The "as stated" pricing is keyed by
    run in data/memory_as_stated.csv, and a run there that no table prices (a renamed run) raises."""
    from llmsizing import layout_fits, moe_runs

    runs = moe_runs.moe_published_runs().set_index("run")
    assert runs.loc["JetMoE-8B pre-training", "framework"] == "megatron"
    assert runs.loc["OLMoE-1B-7B pre-training", "framework"] == "fsdp"
    stated = list(csv.DictReader(open(layout_fits.STATED_CSV, newline="")))
    assert stated and all(r["source"] and r["as_of"] and r["text"] for r in stated)
    bad = tmp_path / "memory_as_stated.csv"
    bad.write_text("run,kind,text,source,as_of\nNo such run,recipe,t,s,2026-01-01\n")
    monkeypatch.setattr(layout_fits, "STATED_CSV", bad)
    with pytest.raises(ValueError, match="memory_as_stated.csv"):
        layout_fits.published_layout_fits()
