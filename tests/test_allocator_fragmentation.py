"""Published allocator fragmentation (issue 34; data/allocator_fragmentation.csv and
llmsizing.allocator_fragmentation): every row's two peaks and its fraction agree, a few rows against their
source's printed figures by hand, and the spread the library states from them."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from llmsizing.allocator_fragmentation import (
    FRAGMENTATION_STATISTICS, FragmentationSpread, allocator_fragmentation_rows, measured_fragmentation)

CSV = Path(__file__).resolve().parents[1] / "data" / "allocator_fragmentation.csv"


def _rows():
    with open(CSV, newline="") as fh:
        return list(csv.DictReader(fh))


def test_every_row_has_a_source_a_date_and_a_known_statistic():
    rows = _rows()
    assert len(rows) >= 20
    for row in rows:
        assert row["source"].strip() and row["source_key"].strip() and row["reading"].strip(), row["run"]
        assert len(row["as_of"]) == 10 and row["as_of"][4] == "-", row["run"]
        assert row["statistic"] in FRAGMENTATION_STATISTICS, row["run"]
        assert row["superseded"] in ("yes", "no"), row["run"]
        assert "https://" in row["source"], row["run"]


def test_each_rows_fragmentation_is_its_reserved_over_allocated_minus_one():
    """The stored fraction, rounded to 4 decimals, is reserved / allocated - 1 of the row's own two numbers,
    and a reserved peak is never below the peak it is compared with."""
    for row in _rows():
        alloc, res, frag = (float(row[k]) for k in ("allocated_gib", "reserved_gib", "fragmentation"))
        assert 0 < alloc <= res, row["run"]
        assert frag == pytest.approx(res / alloc - 1, abs=6e-5), row["run"]


@pytest.mark.parametrize("run_start, expected", [
    # torchtitan PR 165: 33.82% peak reserved over 24.81% peak active of 95.0396 GiB: 33.82 / 24.81 = 1.36316
    ("Llama 7B, 8 GPUs FSDP1, full recompute", 0.3632),
    # torchtitan PR 165, FSDP2 with selective recompute: 62.51 / 52.13 = 1.19912
    ("Llama 7B, 8 GPUs FSDP2, selective recompute", 0.1991),
    # llama-recipes PR 41, the merged configuration: 19.36 GB reserved / 15.22 GB active = 1.27201
    ("Llama 2 7B LoRA, 4 GPUs FSDP, limit_all_gathers=True, logits not kept alive", 0.2720),
    # Megatron-LM PR 6885 after its fix: 221,706 MiB / 203,503.89 MiB = 1.08945
    ("42-layer M-FSDP v2 workload, wrapper initialised on the current stream", 0.0894),
    # GMLake's OPT-1.3B with recomputation: utilisation 0.664 read off the figure, 1 / 0.664 = 1.50602
    ("OPT-1.3B fine-tune, 4 GPUs DeepSpeed ZeRO-3, recomputation (", 0.5060),
])
def test_rows_by_hand_from_the_printed_figures(run_start, expected):
    hits = [r for r in _rows() if r["run"].startswith(run_start)]
    assert len(hits) == 1, run_start
    assert float(hits[0]["fragmentation"]) == pytest.approx(expected, abs=2e-4)


def test_llama2_70b_pairs_keep_both_statistics():
    """llama-cookbook issue 120 printed three peaks for one run (42 GB allocated, 59 GB active, 63 GB
    reserved): two rows, 63 / 42 - 1 = 0.5 against live tensors and 63 / 59 - 1 = 0.0678 against active."""
    rows = [r for r in _rows()
            if r["run"].startswith("Llama 2 70B full fine-tune") and "anyprecision" not in r["run"]]
    got = {r["statistic"]: float(r["fragmentation"]) for r in rows}
    assert got == {"peak_allocated": pytest.approx(0.5), "peak_active": pytest.approx(0.0678, abs=1e-4)}


def test_peak_allocated_spread_by_hand():
    """Three current peak_allocated rows: 63/42 - 1 = 0.5, 58/42 - 1 = 0.38095 (llama-cookbook issue 120) and
    221706/203503.89 - 1 = 0.08945 (Megatron-LM PR 6885). Median 0.38095; the sources' medians are
    (0.5 + 0.38095) / 2 = 0.44048 and 0.08945, whose median is 0.26496."""
    got = measured_fragmentation("peak_allocated")
    assert isinstance(got, FragmentationSpread)
    assert (got.n_rows, got.n_sources) == (3, 2)
    assert got.median == pytest.approx(58 / 42 - 1)
    assert (got.low, got.high) == (pytest.approx(221706 / 203503.89 - 1, rel=1e-4), pytest.approx(0.5))
    by_source = [(0.5 + 58 / 42 - 1) / 2, 221706 / 203503.89 - 1]
    assert got.source_median == pytest.approx(sum(by_source) / 2, rel=1e-4)
    with_bug = measured_fragmentation("peak_allocated", include_superseded=True)
    # the one-shot-stream row adds 242670 / 203503.89 - 1 = 0.19246: median of four = (0.19246 + 0.38095) / 2
    assert with_bug.n_rows == 4
    assert with_bug.median == pytest.approx((242670 / 203503.89 - 1 + 58 / 42 - 1) / 2, rel=1e-4)


def test_peak_active_spread_is_far_above_the_books_eight_percent():
    """Without the superseded rows, the torchtitan source alone has 33.82/24.81, 67.23/52.98, 32.64/23.92 and
    62.51/52.13 (minus 1): 0.3632, 0.2690, 0.3646, 0.1991, median (0.2690 + 0.3632) / 2 = 0.3161; every
    source's median but llama-cookbook issue 120's (0.0678, 0.1154) is above 0.25."""
    got = measured_fragmentation()
    assert got.statistic == "peak_active" and got.n_sources == 4
    tt = [33.82 / 24.81 - 1, 67.23 / 52.98 - 1, 32.64 / 23.92 - 1, 62.51 / 52.13 - 1]
    assert min(tt) == pytest.approx(0.1991, abs=2e-4) and max(tt) == pytest.approx(0.3646, abs=2e-4)
    assert got.low < 0.08 < got.median and got.source_median > 0.25
    assert got.low <= got.median <= got.high


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="statistic"):
        measured_fragmentation("peak_reserved")
    with pytest.raises(TypeError, match="include_superseded"):
        measured_fragmentation(include_superseded=1)


def test_the_frame_has_float_columns():
    df = allocator_fragmentation_rows()
    assert len(df) == len(_rows())
    assert df["fragmentation"].dtype == "float64"


def test_the_fragmentation_comment_in_states_quotes_the_current_spread():
    """states.py's comment on FRAGMENTATION states the spread of the data; adding a row must update it."""
    import re

    import llmsizing.states as states

    text = Path(states.__file__).read_text()
    comment = text[text.index("#: Allocator fragmentation"):text.index("FRAGMENTATION = ")]
    act, alloc = measured_fragmentation(), measured_fragmentation("peak_allocated")
    under = sum(1 for r in _rows() if r["statistic"] == "peak_active" and r["superseded"] == "no"
                and float(r["reserved_gib"]) / float(r["allocated_gib"]) - 1 < 0.08)
    quoted = (f"{act.low:.0%}"[:-1] + f"-{act.high:.0%}", f"median {act.median:.0%}",
              f"{act.n_rows} runs", f"from {act.n_sources} sources", f"{under} of them under 8%",
              f"{alloc.low:.0%}"[:-1] + f"-{alloc.high:.0%}",
              f"({alloc.n_rows} runs, {alloc.n_sources} sources)")
    flat = re.sub(r"\s*\n#:\s*", " ", comment)
    for q in quoted:
        assert q in flat, q
