"""widgets.encode_png: the widgets' own PNG encoder gives back exactly the pixels it was given."""

import io

import numpy as np
import pytest
from PIL import Image

from llmsizing.widgets import encode_png, png_size


@pytest.mark.parametrize("opaque", [True, False])
def test_round_trip_through_pillow(opaque):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, size=(37, 53, 4), dtype=np.uint8)
    if opaque:
        a[:, :, 3] = 255
    png = encode_png(a)
    im = Image.open(io.BytesIO(png))
    assert im.mode == ("RGB" if opaque else "RGBA")
    assert png_size(png) == (53, 37)
    assert np.array_equal(np.asarray(im.convert("RGBA")), a)


def test_a_figure_encodes_like_savefig():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2), dpi=96)
    FigureCanvasAgg(fig)
    fig.subplots().plot([1, 3, 2], label="x")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96)
    fig.canvas.draw()
    ours = np.asarray(Image.open(io.BytesIO(encode_png(fig.canvas.buffer_rgba()))).convert("RGBA"))
    theirs = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGBA"))
    assert ours.shape == theirs.shape == (192, 288, 4)
    assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("bad,kw,match", [
    (np.zeros((4, 4, 3), np.uint8), {}, "rgba"),
    (np.zeros((4, 4, 4), np.float32), {}, "rgba"),
    (np.zeros((4, 4, 4), np.uint8), {"compress_level": 12}, "compress_level"),
])
def test_bad_input_names_the_parameter(bad, kw, match):
    with pytest.raises(ValueError, match=match):
        encode_png(bad, **kw)


@pytest.mark.parametrize("level", [True, 1.5])
def test_compress_level_must_be_an_integer(level):
    with pytest.raises(TypeError, match="compress_level"):
        encode_png(np.zeros((4, 4, 4), np.uint8), compress_level=level)
