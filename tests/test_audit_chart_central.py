"""Chapter 14's audit figure shows the central estimate beside the point judged (read38b: the figure showed
only the point judged; the central estimates were only in the table)."""

from __future__ import annotations

import matplotlib
import numpy as np

matplotlib.use("Agg")

from llmsizing.audit import audit_table  # noqa: E402
from llmsizing.charts import render_seed_audit  # noqa: E402


def _two_claims():
    """Two real rows of the audit, their library values set by hand: one judged at 283 whose central estimate
    is 223 (chapter 14's Llama 2 13B count: the band point nearest a claim of 283 against the centre 223), one
    judged at its own central estimate, 50."""
    t = audit_table().head(2).copy()
    t["library"] = [283.0, 50.0]
    t["library_central"] = [223.0, 50.0]
    t["claimed"] = [283.0, 50.0]
    t["ratio"] = t["claimed"] / t["library"]
    return t


def test_the_central_estimate_is_drawn_where_it_differs_from_the_point_judged():
    view = render_seed_audit(_two_claims())
    ax = view.figure.axes[0]
    handles, labels = ax.get_legend_handles_labels()
    central = [h for h, lab in zip(handles, labels) if lab.startswith("central estimate")]
    assert len(central) == 1, labels
    # one bar, at (223, 283): the second claim's centre is its point judged, so it gets none
    assert np.allclose(central[0].get_offsets(), [[223.0, 283.0]])
    # and a grey line joins it to the point judged, (223, 283) -> (283, 283)
    segments = [s for c in ax.collections if hasattr(c, "get_segments") for s in c.get_segments()]
    assert any(np.allclose(s, [[223.0, 283.0], [283.0, 283.0]]) for s in segments), segments
    assert "the central estimate is not the point judged for 1 claim (bars" in view.summary


def test_the_whole_audit_draws_one_bar_per_claim_judged_off_centre():
    t = audit_table()
    off = int((~np.isclose(t["library"], t["library_central"], rtol=1e-9)).sum())
    ax = render_seed_audit(t).figure.axes[0]
    handles, labels = ax.get_legend_handles_labels()
    (bars,) = [h for h, lab in zip(handles, labels) if lab.startswith("central estimate")]
    assert len(bars.get_offsets()) == off > 0
