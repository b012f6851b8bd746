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
