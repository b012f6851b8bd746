"""Issue 34 (honest ranges), the step model and the widgets: a step (:func:`llmsizing.layouts.step_time`),
a run priced from it (:func:`llmsizing.runs.run_from_step`) and the planner widgets of chapters 12 and 17
say, on a GPU whose step-model kernel efficiency is a stand-in (``runs`` blank in
data/kernel_efficiency.csv), that no calibrated range applies, and not on a calibrated cell. The expected
words are built from the data files (kernel_efficiency.csv's cells and GPUs, stand_in_runs.csv's published
ratios), not copied from the output."""

import csv
import html
import re
from pathlib import Path

import pytest

from llmsizing import Parallel
from llmsizing.layouts import StepTime, step_time
from llmsizing.runs import run_from_step

DATA = Path(__file__).resolve().parents[1] / "data"


def _cells() -> dict:
    """(generation, dtype) -> (runs, GPUs, name) of data/kernel_efficiency.csv."""
    with open(DATA / "kernel_efficiency.csv", newline="") as fh:
        return {(r["generation"], r["dtype"]): (r["runs"], r["gpus"].split(";"), r["name"])
                for r in csv.DictReader(fh)}


def _generation(gpu: str) -> str:
    return next(gen for (gen, _), (_, gpus, _) in _cells().items() if gpu in gpus)


def _stand_in_words(gpu: str, dtype: str) -> list[str]:
    """What the note must say on ``gpu`` in ``dtype``, from the data: the cell has no calibration run, and
    where its published runs sit (data/stand_in_runs.csv, area training-layout; one run: where it sits) or that
    data/published_runs.csv holds none."""
    gen = _generation(gpu)
    assert not _cells()[gen, dtype][0], f"{gpu} {dtype} is calibrated in data/kernel_efficiency.csv"
    words = "FP8" if dtype == "fp8" else "16-bit"
    name = _cells()[gen, dtype][2]                  # the notes name the generation, not its key (s49)
    out = ["no calibrated range applies", f"no {name} {words} run calibrates it",
           "the band shown is the calibrated"]
    with open(DATA / "stand_in_runs.csv", newline="") as fh:
        cell = [r for r in csv.DictReader(fh) if (r["area"], r["generation"], r["dtype"]) ==
                ("training-layout", gen, dtype)]
    if cell and cell[0]["n_rows"] == "1":
        # one run (B200 BF16: pytorch/ao's BF16 row since data27): its ratio, and in or out of the range
        where = "inside" if cell[0]["inside"] == "1" else "outside"
        out += [f"the 1 published {name} {words} run (1 source)",
                f"sits at {float(cell[0]['min_ratio']):.2f} of this estimate, {where} the calibrated range"]
    elif cell:
        lo, hi = float(cell[0]["min_ratio"]), float(cell[0]["max_ratio"])
        out += [f"the {cell[0]['n_rows']} published {name} {words} runs", f"sit at {lo:.2f}-{hi:.2f} of this"]
    else:
        out.append(f"no {name} {words} run is in data/published_runs.csv")
    return out


def test_the_cells_the_tests_use_are_what_the_data_says():
    cells = _cells()
    assert cells["hopper", "bf16"][0] and cells["hopper", "fp8"][0]            # calibrated
    assert not cells["blackwell", "fp8"][0] and not cells["blackwell", "bf16"][0]   # stand-ins
    assert _generation("B200") == "blackwell" and _generation("H100 SXM") == "hopper"
    assert cells["blackwell", "fp8"][2] == "Blackwell" and cells["hopper", "bf16"][2] == "Hopper"


def _step(gpu, precision):
    return step_time("llama-3-8b", gpu, Parallel(dp=8), batch=1, seq=4096, grad_accum=4, precision=precision)


def test_a_step_on_a_b200_in_fp8_says_no_calibrated_range_applies_and_on_an_h100_in_bf16_not():
    b200 = _step("B200", "fp8-mixed")
    for words in _stand_in_words("B200", "fp8"):
        assert words in b200.range_note, (words, b200.range_note)
    assert "sit at 0." in b200.range_note          # the published B200 FP8 runs: well below the estimate
    h100 = _step("H100 SXM", "bf16-mixed")
    assert h100.range_note == ""
    # the range itself is unchanged: still the calibrated cells' band
    assert b200.range_factors == h100.range_factors and b200.range_area == h100.range_area
    assert h100.mfu_range[0] < h100.mfu < h100.mfu_range[1]


def test_a_run_from_a_step_carries_the_steps_note():
    for gpu, precision, dtype in (("B200", "fp8-mixed", "fp8"), ("H100 SXM", "bf16-mixed", "bf16")):
        st = _step(gpu, precision)
        run = run_from_step("llama-3-8b", st, tokens=1e11, gpu=gpu, seq=4096, dtype=dtype)
        assert run.range_note == st.range_note
    # a step made by hand without the range: the run states the GPU's own (as it takes its factors)
    st = _step("B200", "bf16-mixed")
    bare = StepTime(st.compute_s, st.bubble, st.communication, st.overlap, st.tokens, st.exposed,
                    st.model_flops, st.peak_flops, st.kernel_efficiency)
    assert bare.range_note == "" and bare.range_factors is None             # the old fields, as before
    run = run_from_step("llama-3-8b", bare, tokens=1e11, gpu="B200", seq=4096)
    for words in _stand_in_words("B200", "bf16"):
        assert words in run.range_note


def test_exposed_by_group_still_imports_from_layouts():
    from llmsizing import exposure, layouts

    assert layouts.exposed_by_group is exposure.exposed_by_group


def _shown(board) -> str:
    """The summary as a reader sees it (tags and style dropped, entities read back, white space folded)."""
    value = re.sub(r"<style>.*?</style>", " ", board.summary.value, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", value)).split())


@pytest.mark.parametrize("name,settings", [
    ("planner_widget", dict(model="llama-3-8b", tokens=1e11, seq=4096, global_batch=256, max_gpus=64)),
    ("long_context_widget", dict(model="llama-3-8b", seq=16384, max_gpus=64)),
])
def test_the_planner_widgets_say_when_the_chosen_gpu_borrows_its_range(name, settings):
    from llmsizing import widgets

    board = getattr(widgets, name)()
    for key, value in settings.items():
        board.controls[key].value = value
    board.controls["gpus"].value = ("H100 SXM",)
    assert board.error.value == "" and "on the H100 SXM" not in _shown(board)
    assert "no calibrated range applies" not in _shown(board)
    board.controls["gpus"].value = ("B200",)
    shown = _shown(board)
    assert board.error.value == "" and " x B200" in shown
    assert "range on the B200:" in shown
    for words in _stand_in_words("B200", "bf16"):
        assert words in shown, (words, shown)
