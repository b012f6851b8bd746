"""The capacity line's label stands clear of its dashed line (session 38's read of ch13: the label sat on it).

At 8-point text the descenders of a label whose box bottom sits exactly on the line (``va="bottom"`` at the
line's height, as before) touch the dash; 2 points of offset at the figure's dpi put at least 1 px between them.
"""

import pytest

from llmsizing.charts.base import blank_figure, capacity_line


@pytest.mark.parametrize("left", [False, True])
def test_horizontal_label_sits_above_its_line(left):
    fig = blank_figure(6, 3)
    ax = fig.subplots()
    ax.bar([0, 1], [30, 60])
    capacity_line(ax, 80.0, "H100", left=left)
    ax.set_ylim(0, 100)
    fig.draw_without_rendering()
    text = ax.texts[-1]
    box = text.get_window_extent()
    line_px = ax.transData.transform((0, 80.0))[1]
    # 2 points at the figure's dpi (points are 1/72 inch): the box's bottom is that far above the line
    assert box.y0 - line_px == pytest.approx(2 * fig.dpi / 72, abs=0.5)
    assert box.y0 - line_px >= 1


def test_vertical_label_sits_right_of_its_line():
    fig = blank_figure(6, 3)
    ax = fig.subplots()
    ax.barh([0, 1], [30, 60])
    capacity_line(ax, 80.0, "H100", horizontal=False)
    ax.set_xlim(0, 100)
    fig.draw_without_rendering()
    box = ax.texts[-1].get_window_extent()
    line_px = ax.transData.transform((80.0, 0))[0]
    assert box.x0 - line_px == pytest.approx(2 * fig.dpi / 72, abs=0.5)
