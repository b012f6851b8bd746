"""tools/participant_stats.py: nearest-rank percentiles and the split of a move's wait, checked by hand."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import participant_stats as ps  # noqa: E402


def test_nearest_rank_by_hand():
    vals = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert ps.nearest_rank(vals, 0.5) == 50        # ceil(5) = 5th smallest
    assert ps.nearest_rank(vals, 0.9) == 90        # ceil(9) = 9th smallest
    assert ps.nearest_rank([7, 3, 5], 0.5) == 5    # ceil(1.5) = 2nd smallest
    with pytest.raises(ValueError, match="values"):
        ps.nearest_rank([], 0.5)
    with pytest.raises(ValueError, match="p:"):
        ps.nearest_rank([1], 1.5)


def test_split_and_summary_by_hand():
    moves = [{"redrawn": 80, "painted": 110, "kernel_cpu_ms": 50},
             {"redrawn": 40, "painted": 60, "kernel_cpu_ms": 10},
             {"redrawn": None, "painted": None, "kernel_cpu_ms": 5}]
    assert ps.split(moves[0]) == {"painted": 110, "kernel_cpu_ms": 50, "workers_cpu_ms": None,
                                  "to_page_ms": 30, "browser_ms": 30, "browser_cpu_ms": None,
                                  "summarised": None}
    # page35's fields, as recorded: passed through and summarised like the others
    two = [{"painted": 50, "browser_cpu_ms": 12.5, "summarised": 70}, {"painted": 30, "browser_cpu_ms": 8.0,
                                                                        "summarised": 45}]
    assert ps.split(two[0])["browser_cpu_ms"] == 12.5 and ps.split(two[0])["summarised"] == 70
    assert ps.summary(two)["summarised"] == {"median": 45, "p90": 70, "max": 70}    # ceil(1) = 1st, ceil(1.8)
    assert "| 45 / 70 |" in ps.table({"r": two})
    s = ps.summary(moves)
    assert s["moves"] == 3
    assert s["over_goal"] == 2                      # 110 ms, and the move never seen painted
    assert s["painted"] == {"median": 60, "p90": 110, "max": 110}
    assert s["kernel_cpu_ms"] == {"median": 10, "p90": 50, "max": 50}
