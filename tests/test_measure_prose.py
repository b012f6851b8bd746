"""Chapter 5's sentences (src/llmsizing/measure_prose.py): the numbers its prose quotes, worked by hand from
first principles or counted from the data rows, and the reading that raises when the numbers contradict it."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from llmsizing.measure_prose import (ProseOutOfDate, _op_sac_tp_texts, measured_memory_prose, step_findings_prose,
                                     step_sweep_prose)
from llmsizing.measurements import compare_measurements, compare_steps

DATA = Path(__file__).resolve().parent.parent / "data"


def test_op_sac_layer_of_llama_3_8b_by_hand():
    """torchtitan's op SAC keeps, per Llama-3-8B layer (hidden 4096, 32 heads of 128, 8 KV heads, MLP 14336),
    bf16: the layer's input, wq's output, wv's output (8 x 128), attention's output and its fp32 log-sum-exp
    (one per head and token), w1's output and w2's output. At 1 x 8192 tokens:
    2 B x 8192 x (4096 + 4096 + 1024 + 4096 + 14336 + 4096) + 4 B x 32 x 8192 = 521,142,272 B = 497.0 MiB.
    At tp = 4 with sequence parallelism every kept tensor is a quarter except w2's partial sum (whole), and the
    two reduce-scatters' outputs (a quarter each) are kept too:
    2 x 8192 x (1024 + 1024 + 256 + 1024 + 3584 + 4096 + 1024 + 1024) + 4 x 8 x 8192 = 214,171,648 B = 204.2 MiB,
    41% of the whole layer, not a quarter."""
    t = _op_sac_tp_texts()
    assert t["sac_tp1"] == "497 MiB"
    assert t["sac_tp4"] == "204 MiB"
    assert t["sac_tp4_share"] == "41%"


def test_swiglu_columns_and_the_kempnerforge_rows():
    """SwiGLU's backward needs the gate's and the up projection's outputs and the product fed to the down
    projection: 3 f-wide tensors fused; unfused code keeps silu(gate) as well, 4. And the measured-memory
    table has one row per run of data/published_measured_memory.csv, KempnerForge's counted from its rows."""
    t = step_findings_prose(compare_steps()).values
    assert (t["swiglu_fused_f"], t["swiglu_unfused_f"]) == ("3", "4")
    with open(DATA / "published_measured_memory.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    m = measured_memory_prose().values
    assert m["mm_n"] == str(len(rows))
    assert m["mm_kf_n"] == str(sum("KempnerForge" in r["run"] for r in rows))


def test_the_opening_counts_the_sweep_rows():
    """The saved-tensor sweep's count and the tiny models' shape, read from the CSV's own rows."""
    with open(DATA / "activation_measurements.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    cmp = compare_measurements()
    t = step_sweep_prose(cmp, compare_steps()).values
    assert t["n_configs"] == str(len(rows))
    gpt = next(r for r in rows if r["style"] == "gpt")
    assert t["tiny_shape"] == (f"{gpt['layers']} layers, hidden size {gpt['hidden']} and a "
                               f"{int(gpt['vocab']):,}-token vocabulary")


def test_a_reading_the_numbers_contradict_raises():
    """The prose says both tiny models share layers, width and vocabulary: a Llama with another vocabulary
    makes that false."""
    cmp = compare_measurements()
    cmp.loc[cmp["style"] == "llama", "vocab"] = 4096
    with pytest.raises(ProseOutOfDate, match="chapter 5's prose says both tiny models"):
        step_sweep_prose(cmp, compare_steps())


def test_a_step_that_leaves_bytes_behind_raises():
    """The prose says the CSV's end_residual_bytes is 0 in every row and its CUDA column is empty: one row
    with a KiB left after its step, or one with a CUDA peak, makes that false."""
    cmp, steps = compare_measurements(), compare_steps()
    left = steps.copy()
    left.loc[left.index[0], "end_residual_bytes"] = 1024
    with pytest.raises(ProseOutOfDate, match="end_residual_bytes is 0"):
        step_sweep_prose(cmp, left)
    gpu = steps.copy()
    gpu.loc[gpu.index[0], "cuda_max_memory_allocated_bytes"] = 2**30
    with pytest.raises(ProseOutOfDate, match="ran on a CPU"):
        step_sweep_prose(cmp, gpu)


def test_the_padded_batch_by_hand():
    """Llama-3-8B (32 layers, 32 heads of 128, 8 KV heads) at 1 x 8192 tokens in bf16 under Hugging Face's
    SDPA with a padding mask: every layer saves an additive bf16 copy of the 8192 x 8192 mask,
    8192^2 x 2 B = 134,217,728 B, and K and V repeated from 8 to 32 heads, 2 x 8192 x (4096 - 1024) x 2 B =
    100,663,296 B more than the 8 heads' K and V. 32 x 234,881,024 B = 7,516,192,768 B = 7.0 GiB on the
    peak of the step. The prose quotes peaks (as exercise 4 does), so the two figures are 7.0 GiB apart; the
    totals with the allowance would be 7.0 x 1.08 = 7.6 GiB apart."""
    t = step_findings_prose(compare_steps()).values
    plain, masked = (float(t[k].removesuffix(" GiB")) for k in ("mask_8b_plain", "mask_8b_masked"))
    by_hand_gib = 32 * (8192**2 * 2 + 2 * 8192 * (4096 - 1024) * 2) / 2**30
    assert masked - plain == pytest.approx(by_hand_gib, abs=0.06)
    assert t["mask_8b_pct"] == f"{7.0 / plain:.0%}"


def _printed_row(report: str, run: str) -> list[str]:
    line = next(ln for ln in report.splitlines() if ln.strip().startswith(run))
    return line.strip()[len(run):].split()


def test_the_traced_column_by_hand():
    """The printed table's ``traced`` column: measured / the peak priced as the run's code runs. torchao's
    MI300X BF16 run reserved 39.09 GiB; torchtitan's compiled loss holds 8 bytes per logit less at the loss's
    backward than the eager fp32 loss the model's 42.44 GiB peak prices: 8 B x 8192 x 128,256 (Llama-3-8B's
    vocabulary) = 8,405,385,216 B = 7.83 GiB, so 39.09 / (42.44 - 7.83) = 1.13. torchtitan's own runs have no
    traced cause: '-'."""
    from llmsizing.layout_fits import published_measured_memory

    report = measured_memory_prose().report
    run = "Llama 3 8B, 8 MI300Xs FSDP2 + compile, BF16 (torchao README)"
    model_gib = published_measured_memory().set_index("run").loc[run, "model_gib"]
    by_hand = 39.09 / (model_gib - 8 * 8192 * 128256 / 2**30)
    assert _printed_row(report, run)[-1] == f"{by_hand:.2f}" == "1.13"
    assert _printed_row(report, "Llama 3.1 8B, 8 GPUs FSDP + torch.compile (torchtitan)")[-1] == "-"


def test_the_b200_reading_raises_when_the_loss_saves_too_little(monkeypatch):
    """The prose says the torchao gap left after the rerun attention is within what the compiled loss saves
    (at most 7.0 GiB of 7.83 GiB): a loss that saved 2 bytes per logit (1.96 GiB) makes that false."""
    import llmsizing.measure_prose as mp

    monkeypatch.setattr(mp, "COMPILED_LOSS_SAVING", {"forward": 0.0, "loss backward": 2.0})
    with pytest.raises(ProseOutOfDate, match="less than the compiled loss saves"):
        mp.measured_memory_prose()
