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


def _rows(a):
    """What encode_png deflates for an opaque ``a``: each row a filter byte 0, then its RGB bytes."""
    h, w = a.shape[:2]
    return np.concatenate([np.zeros((h, 1), np.uint8), a[:, :, :3].reshape(h, w * 3)], axis=1).tobytes()


@pytest.fixture
def fresh_deflate():
    """encode_png's choice of deflate made again (it is kept per level), before and after the test."""
    from llmsizing.widgets.dashboard import _deflate

    _deflate.cache_clear()
    yield
    _deflate.cache_clear()


def _idat(png: bytes) -> bytes:
    """The data of a PNG's (one) IDAT chunk."""
    at = png.index(b"IDAT")
    n = int.from_bytes(png[at - 4:at], "big")
    return png[at + 4:at + 4 + n]


def test_without_isal_the_rows_are_zlibs(monkeypatch, fresh_deflate):
    """No ``isal`` package (as on the JupyterLite copy): zlib's stream of the rows at that level, byte for byte
    what the encoder gave before speed43."""
    import sys
    import zlib

    monkeypatch.setitem(sys.modules, "isal", None)            # (import isal raises ImportError)
    a = np.full((6, 5, 4), 255, np.uint8)
    a[2:4, 1:3, :3] = (10, 200, 30)
    for level in (0, 1, 6):
        assert _idat(encode_png(a, compress_level=level)) == zlib.compress(_rows(a), level)


def test_isal_deflates_levels_1_to_3_only(monkeypatch, fresh_deflate):
    """With ``isal`` installed, its ``isal_zlib.compress`` deflates levels 1-3 (what the widgets use: 1) and
    zlib the others (0 stored, 4-9: levels ISA-L has not). A stand-in isal records its calls."""
    import sys
    import types
    import zlib

    calls = []

    def compress(data, level):
        calls.append(level)
        return zlib.compress(bytes(data), level)

    fake = types.ModuleType("isal")
    fake.isal_zlib = types.SimpleNamespace(compress=compress)
    monkeypatch.setitem(sys.modules, "isal", fake)
    monkeypatch.setitem(sys.modules, "isal.isal_zlib", fake.isal_zlib)
    a = np.full((3, 4, 4), 255, np.uint8)
    for level in range(10):
        encode_png(a, compress_level=level)
    assert calls == [1, 2, 3]


def test_isal_gives_the_same_pixels(fresh_deflate):
    """Where ``isal`` is installed, the widget's PNG of a planner-like figure (text, lines, fills) decodes to
    the pixels it was given, in a zlib stream Pillow reads."""
    pytest.importorskip("isal")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 2.5), dpi=96)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.plot([1, 3, 2], label="a line")
    ax.fill_between([0, 1, 2], [0, 1, 0], alpha=0.3)
    ax.legend()
    fig.canvas.draw()
    a = np.asarray(fig.canvas.buffer_rgba()).copy()
    png = encode_png(a)
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")), a)
