"""The figures' colours stay distinguishable for colour-blind readers (issue 12).

Each group of colours that one figure shows side by side is simulated for the three kinds of dichromacy with the
matrices of Machado, Oliveira & Fernandes (2009, "A physiologically-based model for simulation of color vision
deficiency", severity 1.0, applied in linear RGB), then compared in CIELAB: every pair must stay at least
``MIN_DELTA_E`` apart (CIE76; about 2.3 is a just-noticeable difference, 10 is "clearly different" at a glance).
The book's former palette (seaborn's "deep") fails this: its blue and purple are 2.7 apart for a protanope.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest

from llmsizing import charts

MIN_DELTA_E = 10.0

MACHADO = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                            [0.004733, 0.691367, 0.303900]]),
    "normal vision": np.eye(3),
}


def _lab(hex_colour: str, vision: str) -> np.ndarray:
    """CIELAB (D65) of a colour as seen with ``vision``."""
    h = hex_colour.lstrip("#")
    srgb = np.array([int(h[i:i + 2], 16) / 255 for i in (0, 2, 4)])
    linear = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    linear = np.clip(MACHADO[vision] @ linear, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def closest_pair(colours) -> tuple[float, str, str, str]:
    """The smallest CIE76 distance between two of ``colours`` under any of the simulated visions."""
    return min((float(np.linalg.norm(_lab(a, v) - _lab(b, v))), v, a, b)
               for a, b in itertools.combinations(dict.fromkeys(colours), 2) for v in MACHADO)


def _pick(mapping, keys):
    return [mapping[k] for k in keys]


C = charts.COLORS
# one entry per figure (or family of figures) that shows these colours together
GROUPS = {
    "model states (ch2, ch7, ch12)": _pick(C, ["weights", "gradients", "master copy", "optimizer states",
                                               "activations", "overhead", "FP8 weight copies"]),
    "parameter components (ch1)": _pick(C, ["embedding", "position", "attention", "mlp", "norms", "lm_head"]),
    "activation components (ch4)": _pick(C, ["embedding", "norms", "attention_projections", "attention_core",
                                             "mlp", "dropout_masks", "residuals", "logits"]),
    "activation memory stack (ch4, 13 parts)": _pick(C, ["weights", "optimizer", "overhead",
                                                         "at the peak: gradients + temporaries",
                                                         *charts.ACT_LABELS.values()]),
    "explorer stack (ch8)": _pick(C, ["weights", "gradients", "optimizer", "activations", "temporaries",
                                      "overhead"]),
    "peak of a step (ch4)": _pick(C, ["weights", "gradients", "master copy", "optimizer", "activations",
                                      "autocast copies", "temporaries", "overhead"]),
    "GPUs (ch6, ch11)": list(charts.GPU_COLORS.values()),
    "recomputation": list(charts.RECOMPUTE_COLORS.values()),
    "measurements": list(charts.MEASURE_COLORS.values()),
    "step time parts": list(charts.EXPLORER_TIME_COLORS.values()),
    "ZeRO stages": [c for _, c, _ in charts._ZERO_STYLES.values()],
    "audit verdicts": [c for c, _ in charts._AUDIT_STYLES.values()],
    "fine-tuning parts": list(charts.FINETUNE_COLORS.values()),
    "capacity lines": [c for c in charts._CAPACITY_COLORS if c.startswith("#")],
    "attention patterns (ch17)": [style[0] for style in charts._KEYS_STYLES.values()],
    # the GPUs the ch6 roofline panel names, and the light grey of the others (lows29)
    "roofline panel (ch6)": [*(charts.GPU_COLORS[g] for g in charts._ROOFLINE_NAMED), charts._ROOFLINE_OTHERS[0]],
    # the curve, the cap's line and the chosen batch's three marks (runs, queued, does not fit; lows29)
    "serving curve (ch15)": ["#0072B2", "#D55E00", *(m["color"] for m in charts._BATCH_MARKS.values())],
}

OKABE_ITO = {"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"}
TOL_MUTED = {"#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677", "#882255", "#AA4499"}
GREYS = {"#BBBBBB", "#555555", "#7F7F7F"}
# single-purpose colours that never have to be told apart from a neighbour: the error text, the planner's
# chosen-plan frame, the MFU default's label, and the pale phase backgrounds of the step timeline (each labelled)
SPECIAL = {"#B00020", "#1F3B73", "#2F6B3A", *(c.upper() for c in charts._PHASE_SHADES.values())}


@pytest.mark.parametrize("name", GROUPS)
def test_each_figures_colours_stay_apart_for_colour_blind_readers(name):
    colours = GROUPS[name]
    assert len(colours) >= 2
    d, vision, a, b = closest_pair(colours)
    assert d >= MIN_DELTA_E, f"{name}: {a} and {b} are only {d:.1f} apart with {vision}"


def test_the_check_rejects_the_former_palette():
    deep = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860"]
    d, vision, a, b = closest_pair(deep)
    assert d < MIN_DELTA_E and vision == "protanopia" and {a, b} == {"#4C72B0", "#8172B3"}


def test_identical_colours_are_distance_zero_and_simulation_keeps_grey_grey():
    assert closest_pair(["#0072B2", "#0072B2", "#000000"])[0] > 0      # duplicates count once
    grey = _lab("#777777", "deuteranopia")
    assert abs(grey[1]) < 1 and abs(grey[2]) < 1


def test_every_colour_literal_in_charts_comes_from_the_palettes():
    files = sorted(Path(charts.__file__).parent.glob("*.py"))        # the charts package: base and one module a part
    assert {p.name for p in files} >= {"__init__.py", "base.py", "one_gpu.py", "many_gpus.py", "time_money.py",
                                       "serve_tune.py"}
    source = "\n".join(p.read_text() for p in files)
    used = {c.upper() for c in re.findall(r"#[0-9A-Fa-f]{6}\b", source)}
    allowed = OKABE_ITO | TOL_MUTED | GREYS | SPECIAL
    assert not used - allowed, f"colours outside the colour-blind-safe palettes: {sorted(used - allowed)}"


def contrast_ratio(fg, bg) -> float:
    """WCAG 2.1's contrast ratio (L1 + 0.05) / (L2 + 0.05) of two colours (any matplotlib colour), L the
    relative luminance 0.2126 R + 0.7152 G + 0.0722 B of the linearised sRGB channels (threshold 0.03928,
    exponent 2.4).
    Black on white is (1 + 0.05) / (0 + 0.05) = 21; a colour on itself is 1."""
    from matplotlib.colors import to_rgb

    def luminance(c):
        rgb = np.array(to_rgb(c))
        return float(np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
                     @ [0.2126, 0.7152, 0.0722])

    lo, hi = sorted((luminance(fg), luminance(bg)))
    return (hi + 0.05) / (lo + 0.05)


#: WCAG 2.1 success criterion 1.4.11 (non-text contrast: graphical objects) and 1.4.3 for large text: 3:1.
MIN_CONTRAST = 3.0


def test_contrast_ratio_by_hand():
    assert contrast_ratio("#000000", "#FFFFFF") == pytest.approx(21.0)
    assert contrast_ratio("#FFFFFF", "#FFFFFF") == pytest.approx(1.0)
    # mid grey #777777: 0x77/255 = 0.4667 -> ((0.4667 + 0.055) / 1.055)^2.4 = 0.1845; (1.05) / (0.2345) = 4.48
    assert contrast_ratio("#777777", "white") == pytest.approx(4.48, abs=0.01)
    # Okabe-Ito yellow #F0E442: R 0.871, G 0.776, B 0.0648 linear -> L = 0.1852 + 0.5550 + 0.0047 = 0.745;
    # 1.05 / 0.795 = 1.32: a yellow name on white is barely readable
    assert contrast_ratio("#F0E442", "white") == pytest.approx(1.32, abs=0.01)


def test_the_gpus_chapter_6_names_stand_out_from_the_figure_background():
    """Chapter 6 writes these GPUs' names in their colours (the capacity panel's labels, the roofline's lines
    and legend); each must reach :data:`MIN_CONTRAST` against the figure's own background (white). On main the
    MI300X's yellow had 1.32:1 (issue 38)."""
    from llmsizing.charts.figures import new_figure
    from llmsizing.charts.many_gpus_hardware import _ROOFLINE_NAMED

    fig, _ = new_figure(2, 2)
    background = fig.get_facecolor()
    low = {g: round(contrast_ratio(charts.GPU_COLORS[g], background), 2) for g in _ROOFLINE_NAMED
           if contrast_ratio(charts.GPU_COLORS[g], background) < MIN_CONTRAST}
    assert not low, f"GPU colours below {MIN_CONTRAST}:1 against the figure background: {low}"


def test_every_gpu_name_in_the_capacity_panel_is_readable_on_the_figure():
    """Chapter 6's capacity panel writes each GPU's name next to its dot. Every name's text colour must
    reach :data:`MIN_CONTRAST` against the figure's background, read from the drawn figure itself (on main the
    MI300X at 1.32:1, the A10 #BBBBBB at 1.92:1 and the A100 40GB #88CCEE at 1.76:1 failed; issue 38)."""
    from llmsizing.charts import render_gpu_landscape

    fig = render_gpu_landscape().figure
    background = fig.get_facecolor()
    names = [t for t in fig.axes[0].texts if t.get_text().strip()]
    assert len(names) >= 10
    low = {t.get_text(): round(contrast_ratio(t.get_color(), background), 2) for t in names
           if contrast_ratio(t.get_color(), background) < MIN_CONTRAST}
    assert not low, f"names below {MIN_CONTRAST}:1 against the figure background: {low}"
    mi = next(t for t in names if t.get_text() == "MI300X")
    assert mi.get_color() == charts.GPU_COLORS["MI300X"]          # a readable colour stays the GPU's own


def test_the_library_contrast_agrees_with_the_hand_computation():
    from llmsizing.charts.base import _contrast_ratio, _label_colour

    for fg in ("#000000", "#777777", "#F0E442", "#999933", "#BBBBBB"):
        assert _contrast_ratio(fg) == pytest.approx(contrast_ratio(fg, "white"), rel=1e-9)
    assert _label_colour("#BBBBBB") == "0.25" and _label_colour("#999933") == "#999933"
