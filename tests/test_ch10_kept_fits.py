"""Chapter 10's widget keeps which GPU counts hold a step and the fewest that do (issue 38: widget moves
<= 100 ms; charts.render_training_time's ``fits`` and ``fewest``). The expected figure and summary are the
reference path's: render_training_time with its defaults (fits_on and min_gpus asked anew), computed here on a
grid of the widget's settings, never typed in; the kept path must draw the same data and say the same text,
on a first visit and on a return."""

from __future__ import annotations

import numpy as np
import pytest

from llmsizing import fewest_gpus
from llmsizing.charts import render_training_time
from llmsizing.widgets import training_time_widget

#: dense (small and large) and a mixture of experts, on two GPU generations (the widget offers every one;
#: the 70B on A100s crosses out more counts than on H100s)
SETTINGS = (("gpt2", "H100 SXM"), ("gpt2", "A100 80GB"), ("llama-3-70b", "A100 80GB"),
            ("mixtral-8x7b", "H100 SXM"))
#: the widget's moves that keep the model, GPU and sequence: tokens and MFU (0.0: calibrated), GPU count
MOVES = ((1e12, 0.0, 1024), (1e11, 0.4, 8), (2e12, 0.25, 16384))


def _drawn(view) -> tuple:
    """Everything the figure shows, as numbers and text: each panel's lines (gid, marker, x, y), filled
    areas' outlines, texts with their places, axis limits; and the summary."""
    panels = []
    for ax in view.figure.axes:
        lines = [(ln.get_gid(), ln.get_marker(), np.asarray(ln.get_xdata(), float).tolist(),
                  np.asarray(ln.get_ydata(), float).tolist()) for ln in ax.get_lines()]
        areas = [[p.vertices.tolist() for p in c.get_paths()] for c in ax.collections]
        areas += [p.get_path().vertices.tolist() for p in ax.patches]
        texts = [(t.get_text(), tuple(map(float, t.get_position()))) for t in ax.texts]
        panels.append((lines, areas, texts, ax.get_xlim(), ax.get_ylim(), ax.get_title(loc="left")))
    return panels, view.summary


@pytest.mark.parametrize("model, gpu", SETTINGS)
def test_the_widgets_kept_answers_draw_what_a_fresh_render_draws(model, gpu):
    box = training_time_widget(model)
    refs = [_drawn(render_training_time(model, tokens=tokens, gpu=gpu, seq=8192, n_gpus=n,
                                        mfu=mfu or None)) for tokens, mfu, n in MOVES]
    for visit in range(2):                           # the second visit answers from what was kept
        for (tokens, mfu, n), ref in zip(MOVES, refs):
            kept = _drawn(box.render(model=model, tokens=tokens, gpu=gpu, seq=8192, n_gpus=n, mfu=mfu))
            assert kept == ref, (gpu, visit, tokens, mfu, n)


def test_a_shorter_sequence_is_asked_again():
    box = training_time_widget("llama-3-70b")
    for seq in (8192, 2048, 8192):
        kept = _drawn(box.render(model="llama-3-70b", tokens=1e12, gpu="A100 80GB", seq=seq, n_gpus=8,
                                 mfu=0.0))
        assert kept == _drawn(render_training_time("llama-3-70b", tokens=1e12, gpu="A100 80GB", seq=seq,
                                                   n_gpus=8))


def test_moving_the_tokens_or_the_mfu_asks_no_fit_again(monkeypatch):
    calls = []

    def counted(*a, **kw):
        calls.append(a[2])
        return fits_on(*a, **kw)
    fits_on = fewest_gpus.fits_on
    monkeypatch.setattr(fewest_gpus, "fits_on", counted)
    box = training_time_widget("llama-3-70b")
    box.render(model="llama-3-70b", tokens=1e12, gpu="H100 SXM", seq=8192, n_gpus=1024, mfu=0.0)
    assert sorted(calls) == [1, 8, 64, 512, 1024, 4096, 32768]       # the default counts and the one marked
    box.render(model="llama-3-70b", tokens=1e11, gpu="H100 SXM", seq=8192, n_gpus=1024, mfu=0.4)
    box.render(model="llama-3-70b", tokens=1e11, gpu="H100 SXM", seq=8192, n_gpus=2048, mfu=0.4)
    assert sorted(calls) == [1, 8, 64, 512, 1024, 2048, 4096, 32768]  # only the new count asked
    # the function itself keeps nothing: a fresh render asks every count again
    render_training_time("llama-3-70b", tokens=1e12, gpu="H100 SXM", seq=8192, n_gpus=1024)
    assert len(calls) == 8 + 7
