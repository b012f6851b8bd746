"""fleetsum34 (issue 34, "every worked budget in the book shows its range"): the fleet widget's summary gives
each plan's percentile TTFT and ITL as "point (low-high)" on this fleet, and ``ServingPlan.to_frame`` lists the
``_low``/``_high`` fields after its older columns.

Expected ends are worked here from the stored bounds (``data/serving_intervals.csv``, read with csv: group
``all``, 0.772-1.309; 0.79-1.319 before the refit that priced Megatron-LM's backward TP overlap) and
each plan's own steps, never from its ``_low``/``_high`` fields. The widget's users
ask again at once (no thinking): a closed loop of ``U`` users keeps ``rate x R = U`` requests in service
whatever the engine's speed (Little's law), so at speed ``v`` every slot's offered load is the same and only
the time scale changes: the service time is ``R / v`` and the rate ``v U / R``. Erlang C's wait then scales
like the service time (the wait in units of the service time depends on the offered load, the slots and the
squared coefficient of variation alone, none of which move), so every engine part of a TTFT or an ITL is
divided by ``v``. The KV transfer between two pools is the network's and is not. Worked, chapter 15's 1,000
users of Llama-3-70B on H100s (1,024 + 256 tokens, ITL <= 50 ms, TTFT <= 1 s), the mean plan: TTFT 76.2 ms
-> 76.2 / 1.309 = 58 ms and 76.2 / 0.772 = 99 ms; ITL 49.7 ms -> 37.9 and 64.3 ms.
"""

from __future__ import annotations

import csv
import html
import math
import re
from pathlib import Path

import pytest

from llmsizing.serve import replicas_for
from llmsizing.serve_fleet import tpot_p_s

INTERVALS = Path(__file__).resolve().parents[1] / "data" / "serving_intervals.csv"
TARGET = dict(prompt=1024, output=256, itl_s=0.05, ttft_s=1.0)


def _bounds() -> tuple[float, float]:
    with open(INTERVALS, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["low"] and r["high"]]
    assert [r["group"] for r in rows] == ["all"]
    lo, hi = float(rows[0]["low"]), float(rows[0]["high"])
    assert (lo, hi) == (0.772, 1.309)                   # (0.79, 1.319 before the backward TP overlap's refit)
    return lo, hi


def _by_hand(p) -> dict:
    """{"ttft": (point, fast end, slow end), "itl": (...)} in seconds, worked from the plan's own steps (the
    module docstring): engine times over the speed, the KV transfer kept."""
    lo, hi = _bounds()
    s = p.serving
    if p.prefill_serving is None:
        itl = s.itl_s if p.percentile <= 50 else tpot_p_s(s, p.percentile)
        engine_ttft, kept = p.ttft_p_s, 0.0
    else:
        itl = s.decode_step_s                       # a decode pool carries no prefill
        engine_ttft, kept = p.ttft_p_s - p.kv_transfer_s, p.kv_transfer_s
    return {"ttft": (p.ttft_p_s, engine_ttft / hi + kept, engine_ttft / lo + kept),
            "itl": (itl, itl / hi, itl / lo)}


def _text(v, fmt) -> str:
    a, b, c = (f"{x * 1e3:{fmt}}" for x in v)
    return f"{a} ({b}-{c})"


def _cells(summary_html: str) -> list[list[str]]:
    return [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", summary_html)]


def _check_widget(w, users):
    rows = _cells(w.summary.value)
    assert rows[0][4:6] == ["TTFT ms (on this fleet)", "ITL ms (on this fleet)"]
    shown = {r[0]: r for r in rows[1:]}
    asks = {"mean, co-located": dict(percentile=50.0), "p95, co-located": dict(percentile=95.0),
            "p95, disaggregated": dict(percentile=95.0, disaggregated=True)}
    for label, kw in asks.items():
        p = replicas_for("llama-3-70b", "H100 SXM", users=users, **TARGET, **kw)
        want = _by_hand(p)
        assert shown[label][4] == _text(want["ttft"], ",.0f"), label
        assert shown[label][5] == _text(want["itl"], ",.1f"), label
        # and the fields the summary reads agree with the hand-worked ends
        assert (p.ttft_p_s_low, p.ttft_p_s_high) == pytest.approx(want["ttft"][1:], rel=1e-9)
        assert (p.itl_p_s_low, p.itl_p_s_high) == pytest.approx(want["itl"][1:], rel=1e-9)
    assert "in parentheses, on this fleet" in html.unescape(w.summary.value)


def test_fleet_widget_summary_shows_ttft_and_itl_on_this_fleet_by_hand():
    from llmsizing.widgets import fleet_widget

    w = fleet_widget()
    _check_widget(w, 1000)
    # (the printed figures themselves, e.g. "87 (65-110)", are chapter 15's stored output, which strict nbval
    # compares; a copy of them here would only repeat the code's own output)
    w.controls["users"].value = 100                      # a move: the summary follows
    _check_widget(w, 100)


def test_a_disaggregated_ttft_keeps_its_kv_transfer():
    """Two pools: the KV transfer is not divided, so the TTFT's ends are NOT the point over the speed."""
    lo, hi = _bounds()
    p = replicas_for("llama-3-70b", "H100 SXM", users=1000, **TARGET, percentile=95, disaggregated=True)
    assert p.kv_transfer_s > 0
    assert p.ttft_p_s_low > p.ttft_p_s / hi and p.ttft_p_s_high < p.ttft_p_s / lo


def test_an_end_whose_queue_grows_without_bound_reads_unbounded():
    """A rate given (not users) does not slow down with the engine: 220 requests/s fill this plan's slots to
    79.9%, so at the slow end 0.799 / 0.79 > 100% and the wait has no bound (test_fleet_on_fleet)."""
    from llmsizing.charts.serve_tune import _on_this_fleet

    p = replicas_for("llama-3-8b", "H100 SXM", requests_per_s=220.0, prompt=1024, output=256, percentile=95)
    assert math.isinf(p.ttft_p_s_high)
    text = _on_this_fleet(p, "ttft_p_s", ",.0f")
    assert text.endswith("-unbounded)") and "inf" not in text
    bare = replicas_for("llama-3-8b", "H100 SXM", requests_per_s=220.0, prompt=1024, output=256,
                        percentile=95, with_range=False)
    assert _on_this_fleet(bare, "ttft_p_s", ",.0f") == f"{bare.ttft_p_s * 1e3:,.0f}"    # no ends: no brackets


# the columns ServingPlan.to_frame listed before fleetsum34, in their order (a p95 plan, co-located)
OLD = ["engine", "gpu", "gpus", "tp", "pp", "ep", "replicas", "batch", "requests_per_s", "ttft_s", "itl_s",
       "output_tokens_per_s_per_gpu", "capacity_requests_per_s", "usd_per_hour", "usd_per_million_output_tokens",
       "fleet_usd_per_million_output_tokens", "percentile", "occupancy", "occupancy_ceiling", "ttft_p_s",
       "itl_p_s", "wait_p_s", "gpus_low", "gpus_high"]
NEW = ["fleet_usd_per_million_output_tokens_low", "fleet_usd_per_million_output_tokens_high", "ttft_p_s_low",
       "ttft_p_s_high", "itl_p_s_low", "itl_p_s_high", "request_s_low", "request_s_high", "requests_per_s_low",
       "requests_per_s_high"]


def test_to_frame_lists_the_ends_after_the_old_columns():
    lo, hi = _bounds()
    p = replicas_for("llama-3-70b", "H100 SXM", users=1000, **TARGET, percentile=95)
    f = p.to_frame()["value"]
    assert list(f.index) == OLD + NEW
    r = p.serving.request_s
    assert (f["request_s_low"], f["request_s_high"]) == pytest.approx((r / hi, r / lo), rel=1e-12)
    assert (f["requests_per_s_low"], f["requests_per_s_high"]) == pytest.approx((1000 / (r / lo),
                                                                                  1000 / (r / hi)), rel=1e-12)
    # the mean answer has no percentile ends; without a range there are no ends at all
    mean = replicas_for("llama-3-70b", "H100 SXM", users=1000, **TARGET).to_frame()["value"]
    assert "request_s_low" in mean.index and "ttft_p_s_low" not in mean.index
    bare = replicas_for("llama-3-70b", "H100 SXM", users=1000, **TARGET, with_range=False).to_frame()["value"]
    assert not any(k.endswith(("_low", "_high")) for k in bare.index)
