#!/usr/bin/env python3
"""Read GMLake's PyTorch-baseline points off its figures (issue 34; data/allocator_fragmentation.csv):

    .venv/bin/python tools/digitise_gmlake.py FIGURE_DIR

FIGURE_DIR holds GMLake/docs/figures/*.png of github.com/intelligent-machine-learning/glake (read at commit
0274a9c5). For each strategy or platform it prints the P-R marker's utilisation (peak active / peak reserved,
right axis) and the P-M bar's peak reserved memory (left axis, GB): the marker is the longest run of its blue
within five columns of the category, the bar's top the highest light-blue pixel of its column (gaps of up to 6
pixels, where the P-R line crosses it, allowed). The axis calibration (pixel row of 0 GB and the span of the
axes) was read from each figure's grid lines. In stra-neox-20b.png the N and R markers sit under G-R's: the
CSV has them read by eye on a 4x crop (0.955, 0.958).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PIL import Image

#: figure: (categories with their x pixel, bar offset left of it, y pixel of 0 GB, pixels from 0 GB to the
#: top grid line, GB there, utilisation at 0 GB, utilisation span over the same pixels, bar colour)
FIGURES = {
    "stra-opt-1.3b.png": ((("N", 73.5), ("R", 115), ("LR", 157), ("RO", 198.5), ("LRO", 240)),
                          6.5, 147.5, 137, 100, 0.6, 0.5, (30, 176, 238)),
    "stra-vicuna-13b.png": ((("N", 79.5), ("R", 119), ("LR", 158.5), ("RO", 198.5), ("LRO", 238.5)),
                            6, 149.5, 132.5, 120, 0.6, 0.7, (20, 176, 240)),
    "stra-neox-20b.png": ((("N", 80), ("R", 120), ("LR", 158.5), ("RO", 197.5), ("LRO", 237.5)),
                          6, 151, 132.5, 140, 0.6, 0.7, (20, 176, 240)),
    "platforms.png": ((("GLM-10B", 123), ("OPT-13B", 221), ("GPT-2", 319)),
                      13, 207, 195, 100, 0.5, 0.6, (46, 176, 237)),
}
MARKER_RGB = (70, 114, 195)
#: markers hidden under another series' marker, read by eye on a 4x crop (the pixel rule finds a wrong run)
BY_EYE = {("stra-neox-20b.png", "N"): 0.955, ("stra-neox-20b.png", "R"): 0.958}


def _near(a, rgb, tol):
    return np.abs(a.astype(int) - np.array(rgb)).sum(axis=2) <= tol


def _runs(idx):
    out: list[list[int]] = []
    for y in idx:
        if out and y - out[-1][-1] <= 1:
            out[-1].append(y)
        else:
            out.append([y])
    return out


def read_figure(path: Path, spec) -> list[tuple[str, float, float]]:
    cats, bar_off, y0, span_px, span_gb, r0, r_span, bar_rgb = spec
    a = np.array(Image.open(path).convert("RGB"))
    marker, bar = _near(a, MARKER_RGB, 70), _near(a, bar_rgb, 45)
    out = []
    for name, cx in cats:
        width = marker[:, int(cx) - 2:int(cx) + 3].sum(axis=1)
        best = max(_runs([y for y in range(a.shape[0]) if width[y] >= 3]), key=len)
        ratio = r0 + (y0 - float(np.mean(best))) / span_px * r_span
        col, y, top, gap = bar[:, int(round(cx - bar_off))], int(y0) - 1, int(y0), 0
        while y > 0 and gap <= 6:
            top, gap = (y, 0) if col[y] else (top, gap + 1)
            y -= 1
        out.append((name, round(ratio, 3), round((y0 - top + 0.5) / span_px * span_gb, 1)))
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__)
        return 2
    for fig, spec in FIGURES.items():
        for name, ratio, gb in read_figure(Path(argv[0]) / fig, spec):
            eye = BY_EYE.get((fig, name))
            note = f" (by eye; the pixel rule gives {ratio:.3f})" if eye else ""
            print(f"{fig:22} {name:8} utilisation {eye or ratio:.3f}  reserved {gb:5.1f} GB{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
