"""The widgets' own PNG encoder (issue 38: a move within 100 ms): :func:`encode_png` turns a canvas's RGBA
pixels into a PNG a few times faster than Pillow's encoder, with the same pixels, and :func:`png_size` reads a
PNG's size. :mod:`.dashboard` re-exports both (its ``_figure_png`` calls ``encode_png`` by that module's
name, which the benchmarks wrap).
"""

from __future__ import annotations

import functools

from .._validate import check_int


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's IHDR header."""
    if len(png) < 24 or not png.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError("png must be PNG bytes (starting with the PNG signature)")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def encode_png(rgba, compress_level: int = 1) -> bytes:
    """A PNG of an ``(height, width, 4)`` uint8 RGBA array: colour type RGB when every pixel is opaque (else
    RGBA), no per-row filter, deflated at ``compress_level`` (0-9). Same pixels as Pillow's encoder gives, a
    few times faster (Pillow tries every PNG row filter on every row, which is most of its time). The deflate
    is :func:`_deflate`'s: ISA-L's where the ``isal`` package is installed and the level is 1-3 (speed43:
    ~0.3 ms instead of zlib's ~2.1 for a planner figure, a PNG ~10% larger, the same pixels), else zlib's."""
    import struct
    import zlib

    import numpy as np

    a = np.asarray(rgba)
    if a.ndim != 3 or a.shape[2] != 4 or a.dtype != np.uint8:
        raise ValueError(f"rgba must be a (height, width, 4) uint8 array; got shape {a.shape}, dtype "
                         f"{a.dtype}")
    compress_level = check_int("compress_level", compress_level, minimum=0, maximum=9)
    opaque = bool((a[:, :, 3] == 255).all())
    if opaque:          # RGB: Pillow drops the alpha bytes ~4x faster than numpy's strided copy (a[:, :, :3])
        from PIL import Image

        a = np.ascontiguousarray(a)
        px = np.asarray(Image.frombuffer("RGBA", (a.shape[1], a.shape[0]), a, "raw", "RGBA", 0, 1)
                        .convert("RGB"))
    else:
        px = a
    h, w, c = px.shape
    rows = np.empty((h, 1 + w * c), dtype=np.uint8)    # each row: filter type 0 (none), then its pixels
    rows[:, 0] = 0
    rows[:, 1:] = px.reshape(h, w * c)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2 if opaque else 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", _deflate(compress_level)(rows, compress_level))
            + chunk(b"IEND", b""))


@functools.lru_cache(maxsize=None)
def _deflate(compress_level: int):
    """The function :func:`encode_png` deflates its rows with at ``compress_level``: ISA-L's
    ``isal_zlib.compress`` (the ``isal`` package: a zlib stream any PNG decoder reads) for levels 1-3, where
    it is installed; zlib's ``compress`` otherwise (level 0, stored, and 4-9, which ISA-L has not; no
    ``isal``, as on the JupyterLite copy). Both take the rows' buffer as it is (no copy to bytes). Measured
    (speed43, 2026-12-04, 2 cores, load 2.6): a chapter 17 planner figure's 422 x 758 RGB rows at level 1,
    zlib 2.1 ms of CPU and 50.6 KB, ISA-L 0.28 ms and 55.9 KB."""
    import zlib

    if 1 <= compress_level <= 3:
        try:
            from isal import isal_zlib
        except ImportError:
            pass
        else:
            return isal_zlib.compress
    return zlib.compress
