"""Issue 38 (nits39): chapter 4b's largest-micro-batch figure drew flash/none exactly under flash/selective
(and eager/selective, dashed, on both: for llama-3-8b on an H100 with states over 8 GPUs the three curves
have the same values at every length), so two legend entries named curves a reader could not see. A curve
with another drawn on top of it at every length now says so in the legend, and is wider than the one on top
by at least 0.75 pt a side (1.5 pt: 1 px at 96 dpi), so its rim shows."""

from __future__ import annotations

import numpy as np

from llmsizing.charts import render_max_micro_batch


def _curves(**kw):
    ax = render_max_micro_batch("llama-3-8b", gpu="H100 SXM", zero3_gpus=8, **kw).figure.axes[0]
    return [ln for ln in ax.lines if ln.get_label().split(",")[0] in ("flash", "eager")]


def test_a_curve_under_another_says_so_and_shows_its_rim():
    lines = _curves()
    hidden = 0
    for i, low in enumerate(lines):
        on_top = [hi for hi in lines[i + 1:]
                  if np.array_equal(low.get_ydata(), hi.get_ydata(), equal_nan=True)]
        if not on_top:
            assert "\n=" not in low.get_label()
            continue
        hidden += 1
        assert low.get_label().endswith(" = ".join(hi.get_label().split("\n")[0].replace(", recompute=", "/")
                                                   for hi in on_top)), low.get_label()
        assert all(low.get_linewidth() >= hi.get_linewidth() + 1.5 for hi in on_top), low.get_label()
    assert hidden == 2        # flash/none under flash/ and eager/selective; flash/selective under eager/


def test_the_hf_stack_has_no_selective_curves_and_no_note():
    labels = [ln.get_label() for ln in _curves(stack="hf")]
    assert labels == [f"{a}, recompute={r}" for r in ("none", "full") for a in ("flash", "eager")]
