"""Issue 34 (strata34's leftover): a plan on a GPU whose step-model kernel efficiency is a stand-in (no
published run of its generation and dtype calibrates it) says that no calibrated range applies, with where the
published runs of that cell sit (data/stand_in_runs.csv), instead of showing the calibrated band alone."""

import csv
from pathlib import Path

from llmsizing import plan
from llmsizing.mfu_inputs import layout_range_note

DATA = Path(__file__).resolve().parents[1] / "data"


def _kernel_runs() -> dict:
    with open(DATA / "kernel_efficiency.csv", newline="") as fh:
        return {(r["generation"], r["dtype"]): r["runs"] for r in csv.DictReader(fh)}


def test_calibrated_cells_have_no_note_and_stand_ins_do():
    runs = _kernel_runs()
    # data/kernel_efficiency.csv: Hopper and Ampere BF16 and Hopper FP8 fitted on published runs, Blackwell not
    assert runs["hopper", "bf16"] and runs["hopper", "fp8"] and runs["ampere", "bf16"]
    assert not runs["blackwell", "fp8"] and not runs["cdna3", "fp8"]
    assert layout_range_note("H100 SXM", "bf16") == layout_range_note("A100 80GB", "bf16") == ""
    assert layout_range_note("H100 SXM", "fp8") == ""
    for gpu in ("B200", "MI300X", "L40S"):
        assert layout_range_note(gpu, "fp8").startswith("no calibrated range applies")


def test_the_note_quotes_the_published_stand_in_runs():
    with open(DATA / "stand_in_runs.csv", newline="") as fh:
        cell = next(r for r in csv.DictReader(fh)
                    if (r["area"], r["generation"], r["dtype"]) == ("training-layout", "blackwell", "fp8"))
    note = layout_range_note("B200", "fp8")
    assert f"sit at {float(cell['min_ratio']):.2f}-{float(cell['max_ratio']):.2f} of this estimate" in note
    assert f"the {cell['n_rows']} published Blackwell FP8 runs" in note
    # B200 in BF16: one run since data27 (pytorch/ao's BF16 row on the same 8 B200s), so the singular and its
    # one ratio; the calibrated range did not hold it
    with open(DATA / "stand_in_runs.csv", newline="") as fh:
        one = next(r for r in csv.DictReader(fh)
                   if (r["area"], r["generation"], r["dtype"]) == ("training-layout", "blackwell", "bf16"))
    assert (one["n_rows"], one["n_sources"], one["inside"]) == ("1", "1", "0")
    assert one["min_ratio"] == one["max_ratio"]
    assert (f"the 1 published Blackwell 16-bit run (1 source) sits at {float(one['min_ratio']):.2f} of this "
            "estimate, outside the calibrated range") in layout_range_note("B200", "bf16")
    assert "is in data/published_runs.csv" not in layout_range_note("B200", "bf16")


def test_plan_carries_the_note_per_gpu():
    plans = plan("llama-3-8b", tokens=1e10, gpus=("H100 SXM", "B200"), seq=4096, global_batch=256, max_gpus=16)
    assert set(plans.attrs["range_notes"]) == {"B200"}
    assert plans.attrs["range_notes"]["B200"] == layout_range_note("B200", "bf16")


def test_the_cli_prints_the_note():
    from llmsizing.cli import main

    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["plan", "llama-3-8b", "--gpu", "B200", "--max-gpus", "16", "--top", "1", "--tokens", "1e10",
              "--seq", "4096", "--global-batch", "256"])
    assert "on the B200: no calibrated range applies" in buf.getvalue()
