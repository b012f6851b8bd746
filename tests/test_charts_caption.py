"""A chart's ``caption`` (issue 38, read04: chapter 4's figure had no way to say what it shows): the words are
drawn under the axes inside the PNG, the axes keep their size, no caption changes nothing, and a caption that
is not text is refused with the parameter's name."""

from __future__ import annotations

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from llmsizing.charts import render_activation_memory

CAPTION = ("Per GPU at the peak of a step: model states, activations by component, what the peak adds and "
           "the overhead allowance. The bold column is the chosen sequence length.")


def _axes_inches(fig):
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    box = fig.axes[0].get_window_extent()
    return round(box.width / fig.dpi, 3), round(box.height / fig.dpi, 3)


def test_the_caption_is_drawn_under_the_axes_which_keep_their_size():
    plain = render_activation_memory()
    captioned = render_activation_memory(caption=CAPTION)
    words = [t for t in captioned.figure.texts if t.get_text()]
    assert len(words) == 1 and " ".join(words[0].get_text().split()) == CAPTION
    assert _axes_inches(captioned.figure) == _axes_inches(plain.figure)
    # the caption's top is below everything the axes draw (tick labels and axis label included)
    renderer = captioned.figure.canvas.get_renderer()
    assert words[0].get_window_extent(renderer).y1 < captioned.figure.axes[0].get_tightbbox(renderer).y0
    # two lines at 8 pt: the figure grew by more than their height, by less than three lines'
    grown = captioned.figure.get_figheight() - plain.figure.get_figheight()
    assert 2 * 8 * 1.25 / 72 < grown < 3 * 8 * 1.25 / 72 + 0.2, grown
    assert captioned.summary == plain.summary
    # a screen reader hears it too: the alt text ends with the caption instead of the summary's first line
    from llmsizing.charts import figure_alt_text

    assert figure_alt_text(captioned).endswith(CAPTION)
    assert not figure_alt_text(plain).endswith(CAPTION)


def test_no_caption_draws_the_same_png():
    assert render_activation_memory(caption="").png() == render_activation_memory().png()
    assert render_activation_memory(caption="  \n ").png() == render_activation_memory().png()


@pytest.mark.parametrize("bad", [None, 3, ["a caption"]])
def test_a_caption_that_is_not_text_is_refused(bad):
    with pytest.raises(TypeError, match="caption"):
        render_activation_memory(caption=bad)
