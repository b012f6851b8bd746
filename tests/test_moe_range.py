"""The range of a mixture of experts' step, measured leaving whole sources out (issue 35; moerange33).

Expected values are worked out by hand from the rows of data/moe_published_runs.csv (published GPU-hours)
and the step's predicted GPU-hours (llmsizing.moe_runs.predict_moe_run, the model under test's input here,
not its range), with the conformal rule of llmsizing.intervals written out in each docstring; never read
from moe_loso_check's output.
"""

import csv
import math
from pathlib import Path

import pytest

from llmsizing import moe_runs
from llmsizing.intervals import conformal_bounds, min_units, source_key
from llmsizing.mfu import LAYOUT_RANGE_AREA, MOE_RANGE_AREA, layout_range_factors

ROOT = Path(moe_runs.__file__).resolve().parents[2]


def _intervals_row(area, group):
    with open(ROOT / "data" / "intervals.csv", newline="") as fh:
        return next(r for r in csv.DictReader(fh) if r["area"] == area and r["group"] == group)


@pytest.fixture(scope="module")
def runs():
    """Per run: its source (the text before the first " (" of the source cell: one publication), published
    GPU-hours and the step's predicted GPU-hours, read from the CSV row by row."""
    out = []
    with open(ROOT / "data" / "moe_published_runs.csv", newline="") as fh:
        table = moe_runs.moe_published_runs()
        for r in csv.DictReader(fh):
            row = table[table["run"] == r["run"]].iloc[0]
            out.append({"run": r["run"], "source": r["source"].split(" (")[0].strip(" ,;:."),
                        "published": float(r["gpu_hours"]),
                        "predicted": moe_runs.predict_moe_run(row)["gpu_hours"]})
    return out


def test_absolute_score_needs_four_units_at_80_percent():
    """(1 - alpha)(S + 1) / S <= 1 at alpha = 0.2: S >= 0.8 / 0.2 = 4 (S = 3 gives 0.8 x 4 / 3 = 1.07 > 1);
    the two tails (1 - alpha / 2)(S + 1) / S <= 1: S >= 1.8 / 0.2 = 9. With 4 units the level is exactly 1:
    the bound is the largest |residual| (0.3 of 0.1, -0.3, 0.2, 0.05); 3 units refuse."""
    assert (min_units(0.8), min_units(0.8, "absolute")) == (9, 4)
    assert conformal_bounds([0.1, -0.3, 0.2, 0.05], 0.8, score="absolute") == pytest.approx((-0.3, 0.3))
    with pytest.raises(ValueError, match="at least 4"):
        conformal_bounds([0.1, -0.3, 0.2], 0.8, score="absolute")
    with pytest.raises(ValueError, match="score"):
        min_units(0.8, "abs")


def test_seven_sources_one_per_publication(runs):
    """The brief's seven publications: the Llama 4 card's two runs and the Granite 3.0 report's two are one
    source each; the library's source_key reads the same seven."""
    sources = {r["source"] for r in runs}
    assert len(runs) == 9 and len(sources) == 7
    assert {source_key(s) for s in moe_runs.moe_published_runs()["source"]} == sources


def test_stated_range_is_the_largest_residual(runs):
    """7 sources, each weighing 1/7 (a two-run source's runs 1/14 each). The absolute score's bound is the
    smallest |r| at which the sorted weights reach (1 - 0.2)(7 + 1) / 7 = 0.914; six sources weigh 6/7 =
    0.857 < 0.914, so the bound is the largest |r| of all runs, r = log(predicted / published) (Dec 2026,
    session 39, the 1F1B fill and drain at each stage's own speed: JetMoE-8B, published 30,000 against 21,588
    predicted, |r| = log 1.390 = 0.329; jetmoe38: Phi-3.5-MoE, 282,624 against 409,600, log 1.449 = 0.371;
    before JetMoE-8B's mixture of attention heads was priced, JetMoE-8B: 30,000 against 20,382, log 1.472).
    The range is
    symmetric: low = exp(-q), high = exp(q); data/intervals.csv keeps 4 decimals."""
    q = max(abs(math.log(r["predicted"] / r["published"])) for r in runs)
    row = _intervals_row(MOE_RANGE_AREA, "all")
    assert float(row["low"]) == pytest.approx(math.exp(-q), abs=1e-4)
    assert float(row["high"]) == pytest.approx(math.exp(q), abs=1e-4)
    assert (int(row["n_rows"]), int(row["n_sources"])) == (9, 7)


def test_out_of_source_coverage_by_hand(runs):
    """Nested: source k's runs against the bound of the other six alone, whose level (0.8 x 7 / 6 = 0.933)
    passes five sources' weight (5/6 = 0.833), so each fold's bound is the largest |r| of the other
    sources. A run is inside iff its |r| is no more than that; so every run is inside but those of the
    source with the largest |r| (when no other source ties it), and only if its runs exceed the others'
    largest. The width of a run's interval is exp(2 q_k); the median over the 9 runs is stated."""
    by_source = {}
    for r in runs:
        by_source.setdefault(r["source"], []).append(abs(math.log(r["predicted"] / r["published"])))
    inside, widths = 0, []
    for k, mine in by_source.items():
        q_k = max(v for s, vs in by_source.items() if s != k for v in vs)
        inside += sum(v <= q_k for v in mine)
        widths += [math.exp(2 * q_k)] * len(mine)
    row = _intervals_row(MOE_RANGE_AREA, "all")
    assert round(float(row["measured_coverage"]) * int(row["n_rows"])) == inside
    widths.sort()
    assert float(row["median_width"]) == pytest.approx(widths[len(widths) // 2], abs=1e-4)
    # the runs outside are exactly those of the one source whose residual no other source reaches
    top = max(by_source, key=lambda s: max(by_source[s]))
    others = max(v for s, vs in by_source.items() if s != top for v in vs)
    assert len(runs) - inside == sum(v > others for v in by_source[top])


def test_dense_range_coverage_of_the_moe_runs(runs):
    """What the dense layout range (data/intervals.csv, training-layout "all": its bounds on implied / step
    MFU, set on dense runs only) would have held: a run is inside iff low <= predicted / published <= high.
    The brief counts 5 of 9 (Dec 2026)."""
    dense = _intervals_row(LAYOUT_RANGE_AREA, "all")
    lo, hi = float(dense["low"]), float(dense["high"])
    held = sum(lo <= r["predicted"] / r["published"] <= hi for r in runs)
    row = _intervals_row(MOE_RANGE_AREA, "dense")
    assert round(float(row["measured_coverage"]) * len(runs)) == held
    assert float(row["median_width"]) == pytest.approx(hi / lo, abs=1e-3)
    # the old range kept for chapter 18's story: moe_run_check on the dense area gives the same count
    dense_check = moe_runs.moe_run_check(range_area=LAYOUT_RANGE_AREA)
    assert int(dense_check["inside"].sum()) == held
    with pytest.raises(ValueError, match="range_area"):
        moe_runs.moe_run_check(range_area="moe")


def test_the_library_states_the_moe_range_for_moe_steps():
    """Every place an MoE range is stated gives the moe-layout row; a dense model keeps its dense range."""
    from llmsizing.deepseek import deepseek_v3_check
    from llmsizing.layouts import step_time
    from llmsizing.parallel import Parallel
    from llmsizing.planner import plan
    from llmsizing.time_cost import training_time

    row = _intervals_row(MOE_RANGE_AREA, "all")
    moe = (float(row["low"]), float(row["high"]))
    dense = _intervals_row(LAYOUT_RANGE_AREA, "all")
    assert layout_range_factors("H100 SXM", "bf16", moe=True) == moe
    assert layout_range_factors("H800", "fp8", "megatron-core", moe=True) == moe       # every stack
    assert layout_range_factors("H100 SXM") == (float(dense["low"]), float(dense["high"]))   # old call
    st = step_time("olmoe-1b-7b", "H100 SXM", Parallel(dp=8, ep=8), batch=1, seq=4096, grad_accum=4)
    assert (st.range_factors, st.range_area) == (moe, MOE_RANGE_AREA)
    st = step_time("llama-3-8b", "H100 SXM", Parallel(dp=8), batch=1, seq=4096, grad_accum=4)
    assert st.range_area == LAYOUT_RANGE_AREA
    t = training_time("olmoe-1b-7b", tokens=1e12, gpu="H100 SXM", seq=4096, parallel=Parallel(dp=8, ep=8),
                      global_batch=256)
    assert (t.mfu_low / t.mfu, t.mfu_high / t.mfu) == pytest.approx(moe)
    assert "published MoE runs (7 sources)" in t.range_note
    df = plan("olmoe-1b-7b", tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=1024, max_gpus=64)
    assert df.attrs["range_area"] == MOE_RANGE_AREA
    assert (df["days"] / df["days_high"]).to_numpy() == pytest.approx(moe[0])
    check = moe_runs.moe_run_check()
    assert (check["predicted"] / check["high"]).to_numpy() == pytest.approx(moe[0])
    d = deepseek_v3_check()
    assert d["gpu_hours_dualpipe"] / d["gpu_hours_dualpipe_high"] == pytest.approx(moe[0])


def test_bad_moe_flag():
    with pytest.raises(TypeError, match="moe"):
        layout_range_factors("H100 SXM", moe="yes")
