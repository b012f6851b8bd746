"""The range notes name a GPU generation as its vendor does ("Blackwell", "CDNA 3"), not by the key the data
files group rows by ("blackwell", "cdna3"): session 49, from issue 38's reads. The names are the vendors'
own (NVIDIA's Blackwell architecture technical brief, AMD's CDNA 3 architecture whitepaper), typed here;
data/kernel_efficiency.csv's column ``name`` carries them with their source."""
import csv
import re
from pathlib import Path

import pytest

from llmsizing.hardware import generation_name
from llmsizing.planner import plan

DATA = Path(__file__).resolve().parents[1] / "data"
#: the keys of data/kernel_efficiency.csv, as a reader must never see them in a sentence
KEYS = re.compile(r"\b(ampere|ampere-pcie|hopper|blackwell|ada|volta|cdna2|cdna3|cdna4)\b")


def test_every_generation_has_a_name_with_its_source():
    with open(DATA / "kernel_efficiency.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        assert r["name"] and r["name"] != r["generation"], r["generation"]
        assert r["name_source"] and re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["name_as_of"]), r["generation"]
    # one name per generation, whatever the dtype row
    keys = {r["generation"] for r in rows}
    assert all(len({r["name"] for r in rows if r["generation"] == g}) == 1 for g in keys)


@pytest.mark.parametrize("key,name", [("blackwell", "Blackwell"), ("cdna3", "CDNA 3"), ("hopper", "Hopper"),
                                      ("ampere", "Ampere"), ("ada", "Ada Lovelace"), ("cdna4", "CDNA 4")])
def test_generation_name(key, name):
    assert generation_name(key) == name


def test_a_generation_no_row_names_keeps_its_key():
    assert generation_name("uncalibrated") == "uncalibrated"


@pytest.mark.parametrize("gpu,name", [("B200", "Blackwell"), ("MI300X", "CDNA 3")])
def test_the_plan_notes_name_the_generation(gpu, name):
    """A BF16 plan on a B200 and on an MI300X: each GPU's kernel efficiency is a stand-in (no calibration
    run), and one published 16-bit run of each (pytorch/ao's float8 README baselines, held out) sits below the
    estimate, so the note says, by hand: no calibrated range, no <name> 16-bit run calibrates it, the 1
    published <name> 16-bit run sits below, outside the calibrated range."""
    df = plan("llama-3-8b", tokens=1e12, gpus=(gpu,), seq=8192, global_batch=512, max_gpus=64)
    note = df.attrs["range_notes"][gpu]
    assert note.startswith(f"no calibrated range applies: no {name} 16-bit run calibrates it; the 1 "
                           f"published {name} 16-bit run (1 source) sits at 0.")
    assert "outside the calibrated range" in note
    assert not KEYS.search(note), note


def test_chapter_10s_tables_name_generations_and_stacks():
    """Chapter 10's four tables (kernel efficiency; the runs against the model; the layout range by stack;
    the range from a planner's inputs) print a generation by its name, as the chapter's figure and warnings
    do, and a stack row of data/intervals.csv ("stack:pytorch:hopper") with its family's name
    (frameworks.STACK_FAMILY_NAMES): "PyTorch stack, Hopper". No key is printed; the numbers stay on their
    rows (read from the CSV here)."""
    from llmsizing.mfu_prose import calibration_prose, inputs_range_prose, stack_ranges_prose
    from llmsizing.time_prose import kernel_table_prose

    ke, runs = kernel_table_prose().report, calibration_prose().report
    stacks, inputs = stack_ranges_prose().report, inputs_range_prose().report
    for text in (ke, runs, stacks, inputs):
        assert not KEYS.search(text) and "stack:" not in text, text
    for name in ("Ampere", "Hopper", "Blackwell", "CDNA 3", "Ada Lovelace", "Ampere (A10)", "Volta"):
        assert re.search(rf"^ *{re.escape(name)} +bf16 ", ke, re.M), name
    assert re.search(r"^ *Llama 3 8B pre-training +Hopper +bf16 ", runs, re.M)
    with open(DATA / "intervals.csv", newline="") as fh:
        rows = {(r["area"], r["group"]): r for r in csv.DictReader(fh)}
    for area, group, shown, text in (
            ("training-layout", "stack:pytorch:hopper", "PyTorch stack, Hopper", stacks),
            ("training-layout", "stack:megatron:ampere", "Megatron stack, Ampere", stacks),
            ("training-layout", "stack:all", "all stacks", stacks),
            ("training-layout", "stack:unknown", "unknown stack", stacks),
            ("training-inputs", "hopper", "Hopper", inputs),
            ("training-inputs", "stack:pytorch", "PyTorch stack", inputs),
            ("training-inputs", "fp8", "fp8", inputs)):
        line = next(x for x in text.splitlines() if x.startswith(shown + "  "))
        r = rows[area, group]
        assert line.split()[-6:-4] == [r["measured_coverage"], r["median_width"]], (group, line)
