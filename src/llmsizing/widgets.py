"""Interactive widgets for the book (need a running kernel: ``make lab``).

One public factory per widget, callable with no arguments. Each is thin glue: controls -> a ``render_*``
function from :mod:`llmsizing.charts` -> a PNG image and a text summary. Bad input (a combination the library
rejects) shows the library's error message in the widget instead of a traceback.

Layout (issue 12): the controls in a column of :data:`CONTROLS_WIDTH_PX` on the left, the figure beside them at
its own pixel size (at most :data:`FIGURE_MAX_PX`, never stretched) and the summary under it, scrolling past
:data:`SUMMARY_HEIGHT_PX`: about 1100 x 620 px in all, so controls and figure are on a 1280 x 720 screen together.
"""

from __future__ import annotations

import functools
import html

import ipywidgets as W

from . import charts
from ._validate import check_int
from .catalog import get_model, list_gpus, list_models

__all__ = ["parameter_counts_widget"]


#: The widget layout budget (issue 12: controls and figure visible together on a 1280x720 laptop screen, where
#: JupyterLab's notebook panel is about 1100 px wide with the file browser folded, and 600 px tall): the controls' column, the largest
#: figure (PNG pixels, shown at its own size, never stretched) and the height of the scrolling summary below it.
CONTROLS_WIDTH_PX = 330
FIGURE_MAX_PX = (760, 430)
SUMMARY_HEIGHT_PX = 150
#: Room for a control's widget part next to its 110 px description, in the controls' column.
_CONTROL_ROOM_PX = CONTROLS_WIDTH_PX - 110 - 12


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's IHDR header."""
    if len(png) < 24 or not png.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError("png must be PNG bytes (starting with the PNG signature)")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


class Dashboard(W.HBox):
    """Controls in a column on the left; on the right an error line (hidden when empty), the figure at its own
    pixel size and the text summary (scrolling when long). Where the page is narrower than both (a chapter page
    under ``make serve-live``), the figure wraps under the controls and shrinks to the width, never beyond its
    own size. ``update()`` redraws.

    The dashboard keeps one matplotlib figure for its whole life: when ``render`` takes an ``into`` argument
    (every ``render_*`` of :mod:`llmsizing.charts` that a widget uses does), each update draws into that figure
    again instead of building a new one (:func:`llmsizing.charts.blank_figure`). ``above`` names controls shown
    above the figure instead of in the column (wide ones, like the planner's plan selector)."""

    def __init__(self, render, controls: dict[str, W.ValueWidget], *, above: tuple[str, ...] = ()):
        import inspect

        from matplotlib.figure import Figure

        self.render = render
        self.controls = controls
        try:
            self._takes_into = "into" in inspect.signature(render).parameters
        except (TypeError, ValueError):
            self._takes_into = False
        self.figure = Figure(dpi=charts.DPI)
        _text_cache_canvas()(self.figure)     # its own canvas: every redraw reuses it, its renderer and its glyphs
        self.error = W.HTML(layout=W.Layout(display="none", max_width=f"{FIGURE_MAX_PX[0]}px"))
        self.summary = W.HTML(layout=W.Layout(max_height=f"{SUMMARY_HEIGHT_PX}px", max_width=f"{FIGURE_MAX_PX[0]}px",
                                              overflow="auto"))
        self.image = W.Image(format="png", layout=W.Layout(flex="0 0 auto", max_width="100%", height="auto",
                                                           object_fit="contain"))
        column = W.VBox([c for k, w in controls.items() if k not in above for c in (w, *_hint(w))],
                        layout=W.Layout(width=f"{CONTROLS_WIDTH_PX}px", flex=f"0 0 {CONTROLS_WIDTH_PX}px"))
        right = W.VBox([controls[k] for k in above] + [self.error, self.image, self.summary],
                       layout=W.Layout(flex="0 1 auto", align_items="flex-start", min_width="0", max_width="100%"))
        super().__init__([column, right], layout=W.Layout(align_items="flex-start", flex_flow="row wrap"))
        for w in controls.values():
            w.observe(self.update, names="value")
        self.update()

    def values(self) -> dict:
        return {k: w.value for k, w in self.controls.items()}

    def update(self, change=None) -> None:
        kw = dict(into=self.figure) if self._takes_into else {}
        try:
            view = self.render(**self.values(), **kw)
        except (ValueError, TypeError) as exc:
            # show the library's message; clear the old figure so it can't be read as the answer
            self.error.value = f"<b style='color:#b00020'>⚠ {html.escape(str(exc))}</b>"
            self.error.layout.display = None
            self.summary.value = ""
            self.image.value = b""
            self.image.layout.width = None
            return
        self.error.value = ""
        self.error.layout.display = "none"
        self.summary.value = (f"<pre style='line-height:1.25; font-size:12px; margin:0'>"
                              f"{html.escape(view.summary)}</pre>")
        png = _figure_png(view)
        width, _ = png_size(png)
        self.image.layout.width = f"{width}px"      # its own size (height follows), never stretched
        self.image.value = png


@functools.cache
def _text_cache_canvas():
    """A matplotlib Agg canvas whose renderer keeps the bitmap of every text it draws (issue 12, "Speed").

    Most of a widget redraw is text: tick labels, legends, titles, ~80 of them in the planner's figure, and Agg
    lays out and rasterises each one again on every draw (``RendererAgg.draw_text``: FreeType's ``set_text`` and
    ``draw_glyphs_to_bitmap``), although from one redraw to the next almost all of them are the same strings in
    the same fonts. This renderer keeps each string's bitmap, keyed by everything the bitmap depends on (the
    string, the font files and size, the DPI, antialiasing and the rcParams for hinting and kerning), and composites
    the kept bitmap with the same call and the same rounding as matplotlib's own ``draw_text``: the pixels are
    identical (``tests/test_widget_layout.py`` compares them with a plain Agg draw), ~10 ms sooner per planner
    redraw. It follows matplotlib 3.10's ``RendererAgg.draw_text`` (matplotlib is pinned below 3.11); where that
    method's helpers are missing, or on another matplotlib, it is the plain Agg canvas."""
    from collections import OrderedDict
    from math import cos, radians, sin

    import matplotlib as mpl
    import numpy as np
    from matplotlib import font_manager
    from matplotlib.backends import backend_agg

    # only on the matplotlib whose draw_text this copies (requirements.txt pins 3.10; an install from
    # pyproject.toml or the JupyterLite copy may bring another): anywhere else, the plain Agg canvas
    if mpl.__version_info__[:2] != (3, 10) or not (
            hasattr(backend_agg, "get_hinting_flag") and hasattr(backend_agg.RendererAgg, "_prepare_font")
            and hasattr(font_manager.fontManager, "_find_fonts_by_props")):
        return backend_agg.FigureCanvasAgg
    limit = 4096                                         # bitmaps kept (a few hundred bytes to a few KiB each)

    class TextCacheRendererAgg(backend_agg.RendererAgg):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.text_bitmaps: OrderedDict = OrderedDict()

        def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
            if ismath:
                return self.draw_mathtext(gc, x, y, s, prop, angle)
            flags = backend_agg.get_hinting_flag()
            # the font files the properties resolve to (findfont is cached), and the size asked of them
            files = tuple(font_manager.fontManager._find_fonts_by_props(prop))
            key = (s, files, prop.get_size_in_points(), self.dpi, bool(gc.get_antialiased()), flags,
                   mpl.rcParams["text.hinting_factor"], mpl.rcParams["text.kerning_factor"])
            hit = self.text_bitmaps.get(key)
            if hit is None:
                font = self._prepare_font(prop)
                font.set_text(s, 0, flags=flags)
                font.draw_glyphs_to_bitmap(antialiased=gc.get_antialiased())
                xo, yo = font.get_bitmap_offset()
                hit = (np.array(font), font.get_descent() / 64.0, xo / 64.0, yo / 64.0)
                self.text_bitmaps[key] = hit
                if len(self.text_bitmaps) > limit:
                    self.text_bitmaps.popitem(last=False)
            else:
                self.text_bitmaps.move_to_end(key)
            bitmap, d, xo, yo = hit
            x = round(x + xo + d * sin(radians(angle)))
            y = round(y + yo + d * cos(radians(angle)))
            self._renderer.draw_text_image(bitmap, x, y + 1, angle, gc)

    class TextCacheCanvasAgg(backend_agg.FigureCanvasAgg):
        def get_renderer(self):
            key = (*self.figure.bbox.size, self.figure.dpi)
            if self._lastKey != key:
                self.renderer = TextCacheRendererAgg(*self.figure.bbox.size, self.figure.dpi)
                self._lastKey = key
            return self.renderer

    return TextCacheCanvasAgg


def encode_png(rgba, compress_level: int = 1) -> bytes:
    """A PNG of an ``(height, width, 4)`` uint8 RGBA array: colour type RGB when every pixel is opaque (else
    RGBA), no per-row filter, zlib at ``compress_level`` (0-9). Same pixels as Pillow's encoder gives, a few times
    faster (Pillow tries every PNG row filter on every row, which is most of its time)."""
    import struct
    import zlib

    import numpy as np

    a = np.asarray(rgba)
    if a.ndim != 3 or a.shape[2] != 4 or a.dtype != np.uint8:
        raise ValueError(f"rgba must be a (height, width, 4) uint8 array; got shape {a.shape}, dtype {a.dtype}")
    compress_level = check_int("compress_level", compress_level, minimum=0, maximum=9)
    opaque = bool((a[:, :, 3] == 255).all())
    if opaque:          # RGB: Pillow drops the alpha bytes ~4x faster than numpy's strided copy (a[:, :, :3])
        from PIL import Image

        a = np.ascontiguousarray(a)
        px = np.asarray(Image.frombuffer("RGBA", (a.shape[1], a.shape[0]), a, "raw", "RGBA", 0, 1).convert("RGB"))
    else:
        px = a
    h, w, c = px.shape
    rows = np.empty((h, 1 + w * c), dtype=np.uint8)    # each row: filter type 0 (none), then its pixels
    rows[:, 0] = 0
    rows[:, 1:] = px.reshape(h, w * c)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2 if opaque else 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows.tobytes(), compress_level))
            + chunk(b"IEND", b""))


def _figure_png(view) -> bytes:
    """The view's PNG for the widget. A :class:`~llmsizing.charts.FixedView` (fixed margins, no tight crop) is
    drawn once on its figure's own Agg canvas and encoded by :func:`encode_png`; any other view is saved the usual
    way (``View.png``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = view.figure
    if not isinstance(view, charts.FixedView) or not isinstance(fig.canvas, FigureCanvasAgg):
        return view.png(compress_level=1)
    fig.canvas.draw()
    return encode_png(fig.canvas.buffer_rgba())


def _style(desc_width: str = "110px") -> dict:
    return dict(style={"description_width": desc_width}, layout=W.Layout(width=f"{CONTROLS_WIDTH_PX}px"))


def _button_px(label: str) -> int:
    """A button wide enough for ``label`` at JupyterLab's 13 px UI font (~7.5 px a character) plus the button's
    own padding and border, 34 px (a one-character label needs 41 px, measured in JupyterLab 4 in Chromium; this
    gives 42). ``tests/browser/test_lab.py`` checks that no toggle label is cut."""
    return round(7.5 * len(label)) + 34


def _choice(options, value, description: str) -> W.ValueWidget:
    """A few options as toggle buttons, each as wide as the longest label needs, when they fit on one line of
    the controls' column; otherwise a drop-down (so no label is ever cut or wrapped)."""
    width = max(_button_px(str(o)) for o in options)
    if len(options) * (width + 4) > _CONTROL_ROOM_PX:
        return W.Dropdown(options=options, value=value, description=description, **_style())
    w = W.ToggleButtons(options=options, value=value, description=description, **_style())
    w.style.button_width = f"{width}px"
    # ipywidgets 8 lays a ToggleButtons out as a block, so its description sits on a line of its own above the
    # buttons; as a flex row the description is beside them, aligned with the other controls' descriptions
    w.layout.display, w.layout.align_items = "flex", "center"
    return w


def _up_to_max_seq(lengths, model) -> list[int]:
    """The sequence lengths a slider offers for ``model``: those up to its trained context (``max_seq``),
    and at least the shortest one. Longer contexts are still accepted by the library (see :class:`Model`)."""
    return [n for n in lengths if n <= model.max_seq] or [lengths[0]]


def _follow_max_seq(box: Dashboard, key: str, lengths, option) -> None:
    """When the model changes, limit the ``key`` slider to the new model's ``max_seq`` (one redraw). The
    length the reader last chose is remembered, so a model with a longer context brings it back."""
    slider = box.controls[key]
    wanted = {"value": slider.value}

    def on_value(change):
        wanted["value"] = change["new"]

    def on_model(change):
        allowed = _up_to_max_seq(lengths, get_model(change["new"]))
        value = max([n for n in allowed if n <= wanted["value"]], default=allowed[0])
        slider.unobserve(on_value, names="value")
        slider.unobserve(box.update, names="value")
        with box.hold_sync():
            slider.options = [option(n) for n in allowed]
            slider.value = value
        slider.observe(box.update, names="value")
        slider.observe(on_value, names="value")
        box.update()

    slider.observe(on_value, names="value")

    box.controls["model"].unobserve(box.update, names="value")
    box.controls["model"].observe(on_model, names="value")


# =========================================================================== chapter 1
def parameter_counts_widget(model: str = "llama-2-7b") -> Dashboard:
    """Chapter 1: start from a catalogued model and change its architecture; see the count by component.

    The heads slider offers only the divisors of the hidden size (up to 256) and the KV-heads slider only the
    divisors of the heads, so every position is a valid model (:class:`~llmsizing.model.Model` checks the
    same rules). Changing the hidden size or the heads re-offers the dependent slider, keeping the value the
    reader last chose when it is still valid, else the nearest valid one (one redraw per change)."""
    m = get_model(model)                     # an unknown name raises the library's error, with a suggestion
    heads_opts = _divisors_up_to(m.hidden, _MAX_HEADS)
    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="start from", **_style()),
        "layers": W.IntSlider(value=m.layers, min=1, max=160, description="layers", **_style()),
        "hidden": W.IntSlider(value=m.hidden, min=256, max=32768, step=256, description="hidden", **_style()),
        "heads": W.SelectionSlider(options=heads_opts, value=m.heads, description="heads",
                                   tooltip="only the divisors of the hidden size", **_style()),
        "kv_heads": W.SelectionSlider(options=_divisors_up_to(m.heads, m.heads), value=m.kv_heads,
                                      description="KV heads", tooltip="only the divisors of the heads",
                                      **_style()),
        "ffn_hidden": W.IntSlider(value=m.ffn_hidden, min=256, max=131072, step=256, description="ffn hidden",
                                  **_style()),
        "vocab": W.IntSlider(value=m.vocab, min=1000, max=256000, step=1000, description="vocab", **_style()),
        "gated_mlp": W.Checkbox(value=m.gated_mlp, description="gated MLP (SwiGLU)", **_style()),
        "tied_embeddings": W.Checkbox(value=m.tied_embeddings, description="tied embeddings", **_style()),
    }
    box = Dashboard(_render_parameters, controls)
    # the values the reader last chose for heads and KV heads: brought back when they become valid again
    wanted = {"heads": m.heads, "kv_heads": m.kv_heads}
    busy = [False]                        # True while the widget itself moves controls (no redraw, no wanted)

    def offer(key, opts, value):          # re-offer a slider's options and value without a redraw
        w = controls[key]
        if list(w.options) != opts:
            if value in w.options:        # value first, so the slider never holds a value its options lack
                w.value = value
            w.options = opts
        w.value = value

    def fit_heads(hidden):                # heads, then KV heads, re-offered for this hidden size
        heads = _nearest(_divisors_up_to(hidden, _MAX_HEADS), wanted["heads"])
        offer("heads", _divisors_up_to(hidden, _MAX_HEADS), heads)
        offer("kv_heads", _divisors_up_to(heads, heads), _nearest(_divisors_up_to(heads, heads),
                                                                    wanted["kv_heads"]))

    def on_change(change):
        if busy[0]:
            return
        key = next(k for k, w in controls.items() if w is change["owner"])
        busy[0] = True
        try:
            with box.hold_sync():
                if key == "model":        # choosing a catalogue model resets the architecture controls
                    preset = get_model(change["new"])
                    wanted.update(heads=preset.heads, kv_heads=preset.kv_heads)
                    for k in controls:
                        if k not in ("model", "heads", "kv_heads"):
                            controls[k].value = getattr(preset, k)
                    fit_heads(preset.hidden)
                elif key in ("hidden", "heads", "kv_heads"):
                    if key != "hidden":
                        wanted[key] = change["new"]
                    fit_heads(controls["hidden"].value)
        finally:
            busy[0] = False
        box.update()                       # one redraw per change the reader makes

    for w in controls.values():
        w.unobserve(box.update, names="value")
        w.observe(on_change, names="value")
    return box


def _render_parameters(model, into=None, **fields):
    base = get_model(model)
    changed = {k: v for k, v in fields.items() if getattr(base, k) != v}
    if "kv_heads" in fields and "heads" in changed:
        changed["kv_heads"] = fields["kv_heads"]
    return charts.render_parameter_counts(base, into=into, **changed)


# =========================================================================== chapter 2
__all__ += ["model_states_widget"]

#: What the chapter-2 widget compares the selected recipe + optimizer with (kept short: each redraw <= 100 ms).
_WIDGET_STATES_COMPARE = (("fp32", "adamw"), ("bf16-mixed", "adamw"), ("bf16-mixed", "adamw-8bit"),
                          ("bf16", "adamw"))


def model_states_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 2: model x recipe x optimizer -> model states (weights, gradients, master copy, optimizer
    states) against the memory of ``count`` GPUs of the chosen types, and the minimum GPU count for the
    states alone (from :func:`llmsizing.memory.min_gpus_for_bytes`)."""
    from .precision import OPTIMIZERS, RECIPES

    get_model(model)
    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "precision": W.Dropdown(options=list(RECIPES), value="bf16-mixed", description="recipe", **_style()),
        "optimizer": W.Dropdown(options=list(OPTIMIZERS), value="adamw", description="optimizer", **_style()),
        "count": W.IntSlider(value=1, min=1, max=64, description="GPUs per line",
                             tooltip="how many GPUs of each type a dashed line stands for", **_style()),
        "gpus": _gpu_multiselect(("A100 40GB", "H100 SXM", "H200", "B200"), "GPUs"),
    }
    box = Dashboard(_render_model_states, controls)
    _cap_gpus_per_line(box)
    return box


def _render_model_states(model, precision, optimizer, count, gpus, into=None):
    return charts.render_model_states(model, precision=precision, optimizer=optimizer, gpus=tuple(gpus),
                                      count=count, compare=_WIDGET_STATES_COMPARE, into=into)


# =========================================================================== chapter 3
__all__ += ["inference_memory_widget"]

_CONTEXTS = [2**k for k in range(7, 18)]


def inference_memory_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 3: model x context x batch x weight dtype x KV-cache dtype -> weights + KV cache + overhead,
    next to the 1.2 x weights rule of thumb and the chosen GPUs' capacities."""
    from .precision import DTYPES

    contexts = _up_to_max_seq(_CONTEXTS, get_model(model))
    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "context": W.SelectionSlider(options=[(f"{c:,}", c) for c in contexts], value=min(8192, contexts[-1]),
                                     description="context", **_style()),
        "batch": W.IntSlider(value=1, min=1, max=256, description="batch", **_style()),
        "weights": W.Dropdown(options=list(DTYPES), value="bf16", description="weights dtype", **_style()),
        "kv_cache": W.Dropdown(options=["fp32", "bf16", "fp16", "fp8", "int8"], value="bf16",
                               description="KV-cache dtype", **_style()),
        "gpus": _gpu_multiselect(("A10", "L40S", "H100 SXM", "H200"), "GPUs"),
    }
    box = Dashboard(_render_inference_memory, controls)
    _follow_max_seq(box, "context", _CONTEXTS, lambda c: (f"{c:,}", c))
    return box


def _render_inference_memory(model, context, batch, weights, kv_cache, gpus, into=None):
    return charts.render_inference_memory(model, context=context, batch=batch, weights=weights,
                                          kv_cache=kv_cache, gpus=tuple(gpus), into=into)


# =========================================================================== chapter 4: activation memory
__all__ += ["activation_memory_widget", "max_micro_batch_widget"]

_SEQS = [512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 65536, 131072]


def activation_memory_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 4: model x sequence length x micro-batch x attention kernel x recompute (x GPU, x how many GPUs
    share the model states) -> per-GPU training memory by component against the GPU's capacity."""
    seqs = _up_to_max_seq(_SEQS, get_model(model))
    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "seq": W.SelectionSlider(options=seqs, value=min(8192, seqs[-1]), description="sequence", **_style()),
        "batch": W.IntSlider(value=1, min=1, max=64, description="micro-batch", **_style()),
        "attention": _choice(["flash", "eager"], "flash", "attention"),
        "recompute": _choice(["none", "selective", "full"], "none", "recompute"),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "zero3_gpus": W.Dropdown(options=[1, 2, 4, 8, 16, 32, 64], value=8, description="states over",
                                 **_style()),
        "stack": _choice(["fused", "hf"], "fused", "stack"),
        "precision": W.Dropdown(options=["bf16-mixed", "bf16-amp", "bf16-mixed-fp32-grads", "fp32"],
                                value="bf16-mixed", description="recipe", **_style()),
        "dropout": W.Checkbox(value=False, description="dropout", **_style()),
    }
    box = Dashboard(charts.render_activation_memory, controls)
    _follow_max_seq(box, "seq", _SEQS, int)
    return box


def max_micro_batch_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 4: the largest micro-batch that fits a GPU as sequence length grows, for each recompute level
    and attention kernel."""
    from .precision import RECIPES

    get_model(model)
    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "precision": W.Dropdown(options=list(RECIPES), value="bf16-mixed", description="precision", **_style()),
        "zero3_gpus": W.Dropdown(options=[1, 2, 4, 8, 16, 32, 64], value=8, description="states over",
                                 **_style()),
        "stack": _choice(["fused", "hf"], "fused", "stack"),
        "dropout": W.Checkbox(value=False, description="dropout", **_style()),
    }
    return Dashboard(charts.render_max_micro_batch, controls)


# =========================================================================== Part II: the parallelism explorer
__all__ += ["parallel_explorer_widget"]


def parallel_explorer_widget(model: str = "llama-3-8b") -> Dashboard:
    """Part II: model x GPU x layout (tp, pp, dp, ZeRO stage, sequence parallelism, virtual stages, offload) x
    recompute x micro-batch x sequence x micro-batches per step -> the most loaded GPU's memory, stage by stage,
    against capacity, and the step time (compute at an assumed MFU, bubble, communication by group). An
    impossible layout shows the library's message (which rule it breaks and what the engines do)."""
    from .parallel import OFFLOADS

    seqs = _up_to_max_seq(_SEQS, get_model(model))
    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "tp": W.Dropdown(options=[1, 2, 4, 8, 16], value=1, description="tensor par. (tp)", **_style()),
        "pp": W.Dropdown(options=[1, 2, 4, 8, 16], value=1, description="pipeline (pp)", **_style()),
        "dp": W.Dropdown(options=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512], value=8, description="data par. (dp)",
                         **_style()),
        "zero": _choice([0, 1, 2, 3], 1, "ZeRO stage"),
        "sp": W.Checkbox(value=False, description="sequence parallel (needs tp > 1)", **_style()),
        "virtual_stages": W.Dropdown(options=[1, 2, 4], value=1, description="virtual stages", **_style()),
        "offload": W.Dropdown(options=list(OFFLOADS), value="none", description="offload", **_style()),
        "recompute": _choice(["none", "selective", "full"], "selective", "recompute"),
        "batch": W.IntSlider(value=1, min=1, max=32, description="micro-batch", **_style()),
        "seq": W.SelectionSlider(options=seqs, value=min(4096, seqs[-1]), description="sequence", **_style()),
        "grad_accum": W.Dropdown(options=[1, 2, 4, 8, 16, 32, 64], value=8, description="micro-batches/step",
                                 **_style()),
        "mfu": W.FloatSlider(value=0.4, min=0.1, max=0.7, step=0.05, description="assumed MFU", **_style()),
    }
    box = Dashboard(charts.render_parallel_explorer, controls)
    _follow_max_seq(box, "seq", _SEQS, int)
    return box


__all__ += ["training_time_widget"]
TOKEN_BUDGETS = (("1B", 1e9), ("10B", 1e10), ("100B", 1e11), ("1T", 1e12), ("2T", 2e12), ("15T", 15e12))


def training_time_widget(model: str = "llama-3-70b") -> Dashboard:
    """Part III: days and cost of a run against the GPU count (:func:`~llmsizing.charts.render_training_time`)."""
    def render(model, tokens, gpu, seq, n_gpus, mfu, into=None):
        return charts.render_training_time(model, tokens=tokens, gpu=gpu, seq=seq, n_gpus=n_gpus,
                                           mfu=None if mfu == 0.40 else mfu, into=into)

    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "tokens": W.Dropdown(options=TOKEN_BUDGETS, value=1e12, description="tokens", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "seq": W.Dropdown(options=[2048, 4096, 8192], value=8192, description="sequence", **_style()),
        "n_gpus": W.SelectionSlider(options=[2**k for k in range(16)], value=1024, description="GPUs",
                                    **_style()),
        "mfu": W.FloatSlider(value=0.40, min=0.05, max=0.70, step=0.05, description="MFU",
                             readout_format=".2f", **_style()),
    }
    return Dashboard(render, controls)


# =========================================================================== chapter 6: the decode roofline
__all__ += ["decode_roofline_widget"]


def decode_roofline_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 6: model x GPU x context x batch x weight format -> one decode step's memory and compute bounds
    against the batch size (:func:`llmsizing.charts.render_decode_roofline`)."""
    get_model(model)
    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "context": W.SelectionSlider(options=[128, 512, 1024, 2048, 4096, 8192, 32768, 131072], value=4096,
                                     description="context", **_style()),
        "batch": W.SelectionSlider(options=[2**i for i in range(11)], value=1, description="batch", **_style()),
        "weights": _choice(["bf16", "fp8", "int4"], "bf16", "weights"),
    }
    return Dashboard(charts.render_decode_roofline, controls)


# =========================================================================== chapter 7: ZeRO stages
__all__ += ["zero_stages_widget"]


def zero_stages_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 7: model x data-parallel degree x recipe x optimizer x GPU -> the model states on each GPU for
    ZeRO stages 0-3 (:func:`~llmsizing.charts.render_zero_stages`)."""
    from .precision import OPTIMIZERS, RECIPES

    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "dp": W.Dropdown(options=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], value=8,
                         description="data par. (dp)", **_style()),
        "precision": W.Dropdown(options=list(RECIPES), value="bf16-mixed", description="recipe", **_style()),
        "optimizer": W.Dropdown(options=list(OPTIMIZERS), value="adamw", description="optimizer", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
    }
    return Dashboard(charts.render_zero_stages, controls)


# =========================================================================== chapter 11: cost
__all__ += ["cost_widget"]


def cost_widget(model: str = "llama-3-70b") -> Dashboard:
    """Chapter 11: model x tokens x GPU x price x MFU x GPU count -> the job's cost and days, on a price x MFU
    grid around the chosen point (:func:`~llmsizing.charts.render_cost_sensitivity`). Choosing a GPU resets
    the price to its catalogue on-demand price; a reserved discount is a lower price."""
    from .catalog import get_gpu

    get_model(model)
    start = get_gpu("H100 SXM")
    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "tokens": W.Dropdown(options=TOKEN_BUDGETS, value=1e12, description="tokens", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value=start.name, description="GPU", **_style()),
        "seq": W.Dropdown(options=[2048, 4096, 8192], value=8192, description="sequence", **_style()),
        "price": W.FloatSlider(value=start.price_usd_per_gpu_hour, min=0.10, max=10.0, step=0.01,
                               description="USD/GPU-hour", readout_format=".2f", **_style()),
        "mfu": W.FloatSlider(value=0.40, min=0.05, max=0.70, step=0.05, description="MFU",
                             readout_format=".2f", **_style()),
        "n_gpus": W.SelectionSlider(options=[2**k for k in range(16)], value=1024, description="GPUs",
                                    **_style()),
    }
    box = Dashboard(charts.render_cost_sensitivity, controls)

    def on_gpu(change):                      # a new GPU brings its own on-demand price (one redraw)
        price = controls["price"]
        price.unobserve(box.update, names="value")
        price.value = get_gpu(change["new"]).price_usd_per_gpu_hour
        price.observe(box.update, names="value")
        box.update()

    controls["gpu"].unobserve(box.update, names="value")
    controls["gpu"].observe(on_gpu, names="value")
    return box


# =========================================================================== chapter 15: serving
__all__ += ["serving_widget"]


def serving_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 15: model x GPU x weight format x tensor parallelism x prompt/output lengths x batch -> TTFT,
    ITL, throughput and cost per million tokens, with the latency/throughput curve and the roofline point
    (:func:`llmsizing.charts.render_serving_curve`). A layout that does not fit shows the library's message."""
    from .serve import WEIGHT_FORMATS

    get_model(model)
    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "weights": _choice([w for w in WEIGHT_FORMATS if w != "fp16"], "bf16", "weights"),
        "tp": W.Dropdown(options=[1, 2, 4, 8], value=1, description="tensor par. (tp)", **_style()),
        "prompt": W.SelectionSlider(options=[128, 256, 512, 1024, 2048, 4096, 8192, 32768], value=1024,
                                    description="prompt", **_style()),
        "output": W.SelectionSlider(options=[16, 64, 128, 256, 512, 1024, 4096], value=256, description="output",
                                    **_style()),
        "batch": W.SelectionSlider(options=[2**i for i in range(12)], value=16, description="batch", **_style()),
    }
    return Dashboard(charts.render_serving_curve, controls)


# =========================================================================== chapter 14: the seeds' claims, checked
__all__ += ["seed_audit_widget"]


def seed_audit_widget(article: str = "all") -> Dashboard:
    """Chapter 14: every recomputed seed claim, claimed against computed, with the verdict band and the article
    as controls (:func:`~llmsizing.charts.render_seed_audit`). The library values are computed once; moving the
    band only re-judges them."""
    from .audit import BAND, audit_table

    articles = ["all"] + sorted(audit_table()["article"].unique())
    controls = {
        "band": W.FloatSlider(value=BAND, min=1.05, max=3.0, step=0.05, description="band (factor)",
                              readout_format=".2f", **_style()),
        "article": W.Dropdown(options=articles, value=article, description="article", **_style()),
    }
    return Dashboard(lambda band, article, into=None: charts.render_seed_audit(band=band, article=article, into=into),
                     controls)


# =========================================================================== chapter 12: the planner
__all__ += ["planner_widget"]

#: Deadlines and budgets the planner widget offers (0 = none).
PLAN_DEADLINES = (("none", 0.0), ("7 days", 7.0), ("14 days", 14.0), ("30 days", 30.0), ("60 days", 60.0),
                  ("90 days", 90.0), ("1 day", 1.0))
PLAN_BUDGETS = (("none", 0.0), ("$500k", 5e5), ("$750k", 7.5e5), ("$1M", 1e6), ("$2M", 2e6), ("$5M", 5e6),
                ("$10M", 1e7))


def planner_widget(model: str = "llama-3-70b") -> Dashboard:
    """Chapter 12: model x token budget x GPU types x sequence x global batch x GPU limit x deadline x budget ->
    the planner's plans (:func:`~llmsizing.planner.plan`) and a chosen front plan
    (:func:`~llmsizing.charts.render_plan`). ``plan()``'s table is cached per (model, tokens, GPU types,
    sequence, global batch, max GPUs), and its search (0.1-0.3 s, ``planner._search``) per the same without the
    tokens, so a new token budget costs milliseconds: the deadline, the budget and the plan selector only filter
    and redraw.
    Filtering the cached plans by deadline and budget keeps exactly ``plan()``'s front (a plan dominated by one
    beyond the deadline or budget is beyond it too); when nothing is left, ``plan()`` is called with them to
    show its :class:`~llmsizing.planner.NoPlanError` message."""
    import functools

    from .planner import plan

    get_model(model)

    @functools.lru_cache(maxsize=16)
    def cached(model, tokens, gpus, seq, global_batch, max_gpus):
        return plan(model, tokens=tokens, gpus=gpus, seq=seq, global_batch=global_batch, max_gpus=max_gpus)

    @functools.lru_cache(maxsize=16)
    def explain(model, tokens, gpus, seq, global_batch, max_gpus, deadline, budget):
        """plan()'s error for these limits (None if it finds plans), computed once per set of arguments."""
        try:
            plan(model, tokens=tokens, gpus=gpus, seq=seq, global_batch=global_batch, max_gpus=max_gpus,
                 deadline_days=deadline or None, budget_usd=budget or None)
        except (ValueError, TypeError) as exc:
            return exc
        return None

    @functools.lru_cache(maxsize=16)
    def filtered(model, tokens, gpus, seq, global_batch, max_gpus, deadline, budget):
        """The cached plans within the deadline and budget (the same table object for the same arguments, so
        that render_plan's summary of it is reused), with its front."""
        args = dict(tokens=tokens, gpus=gpus, seq=seq, global_batch=global_batch, max_gpus=max_gpus)
        df = cached(model, **args)
        keep = df["days"] <= (deadline or float("inf"))
        keep &= df["cost_usd"] <= (budget or float("inf"))
        df = df[keep]
        if df.empty:                                   # plan() explains why (raises NoPlanError)
            why = explain(model, deadline=deadline, budget=budget, **args)
            if why is not None:
                raise type(why)(*why.args)           # a new exception each time (the kept one's traceback would grow)
            df = plan(model, **args, deadline_days=deadline or None, budget_usd=budget or None)
        front = df[df["pareto"]]
        return df, front, _front_options(front)

    holder: dict = {}

    def render(model, tokens, gpus, seq, global_batch, max_gpus, deadline, budget, choice, into=None):
        args = dict(tokens=tokens, gpus=tuple(gpus), seq=seq, global_batch=global_batch, max_gpus=max_gpus)
        df, front, options = filtered(model, deadline=deadline, budget=budget, **args)
        _set_front_options(holder["box"], front, choice, options)
        k = holder["box"].controls["choice"].value
        return charts.render_plan(model, **args, deadline_days=deadline or None, budget_usd=budget or None,
                                  plans=df, highlight=front.index[k], into=into)

    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "tokens": W.Dropdown(options=TOKEN_BUDGETS, value=1e12, description="tokens", **_style()),
        "gpus": _gpu_multiselect(charts.PLAN_GPUS, "GPU types"),
        "seq": W.Dropdown(options=[2048, 4096, 8192], value=8192, description="sequence", **_style()),
        "global_batch": W.Dropdown(options=[64, 128, 256, 512, 1024, 2048], value=512,
                                   description="global batch (seqs)", **_style()),
        "max_gpus": W.SelectionSlider(options=[2**k for k in range(3, 15)], value=4096, description="max GPUs",
                                      **_style()),
        "deadline": W.Dropdown(options=PLAN_DEADLINES, value=0.0, description="deadline", **_style()),
        "budget": W.Dropdown(options=PLAN_BUDGETS, value=0.0, description="budget", **_style()),
        "choice": W.Dropdown(options=[("#1", 0)], value=0, description="front plan", **_style()),
    }
    controls["choice"].layout.width = f"{FIGURE_MAX_PX[0]}px"
    holder["box"] = box = Dashboard.__new__(Dashboard)
    box.__init__(render, controls, above=("choice",))
    return box


def _front_options(front) -> list[tuple[str, int]]:
    """The plan selector's options: one per front plan (cheapest first)."""
    return [(f"#{i}: {int(r.n_gpus):,} x {r.gpu}, tp={r.tp} pp={r.pp} dp={r.dp}, {r.days:,.1f} days, "
             f"{charts._usd(r.cost_usd)}", i - 1) for i, r in enumerate(front.itertuples(), 1)]


def _set_front_options(box: Dashboard, front, choice: int, options=None) -> None:
    """Give the plan selector one option per front plan (cheapest first; ``options``: :func:`_front_options`
    already computed), keeping the chosen position (or the last one, if the front got shorter) without
    triggering another redraw."""
    sel = box.controls["choice"]
    options = _front_options(front) if options is None else options
    if list(sel.options) == options:
        return
    sel.unobserve(box.update, names="value")
    with box.hold_sync():
        sel.options = options
        sel.value = min(choice, len(options) - 1)
    sel.observe(box.update, names="value")


__all__ += ["finetune_widget"]


def finetune_widget(model: str = "llama-3-8b") -> Dashboard:
    """Fine-tuning chapter: will my fine-tune fit on the GPU I have, and with what batch?
    (:func:`~llmsizing.charts.render_finetune_memory`)."""
    targets = {"attention (q, k, v, o)": ("q", "k", "v", "o"),
               "all linear": ("q", "k", "v", "o", "gate", "up", "down")}

    def render(model, gpu, batch, seq, rank, targets, recompute, optimizer, into=None):
        return charts.render_finetune_memory(model, gpu=gpu, batch=batch, seq=seq, rank=rank, targets=targets,
                                             recompute=recompute, optimizer=optimizer, into=into)

    llama_like = [m for m in list_models() if get_model(m).gated_mlp]
    controls = {
        "model": W.Dropdown(options=llama_like, value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value="H100 SXM", description="GPU", **_style()),
        "batch": W.SelectionSlider(options=[1, 2, 4, 8, 16, 32], value=1, description="batch", **_style()),
        "seq": W.SelectionSlider(options=[512, 1024, 2048, 4096, 8192], value=2048, description="sequence",
                                 **_style()),
        "rank": W.SelectionSlider(options=[4, 8, 16, 32, 64, 128], value=16, description="LoRA rank", **_style()),
        "targets": W.Dropdown(options=list(targets.items()), value=targets["all linear"], description="targets",
                              **_style()),
        "recompute": W.Dropdown(options=["none", "selective", "full"], value="full", description="recompute",
                                **_style()),
        "optimizer": W.Dropdown(options=["adamw", "adamw-8bit"], value="adamw", description="optimizer",
                                **_style()),
    }
    return Dashboard(render, controls)


# =========================================================================== helpers for the controls (issue 12)
#: The heads slider of chapter 1 offers the divisors of the hidden size up to this many heads.
_MAX_HEADS = 256


def _divisors_up_to(n: int, limit: int) -> list[int]:
    """The divisors of ``n`` that are at most ``limit``, ascending (the valid heads for a hidden size ``n``, or
    the valid KV heads for ``n`` heads: :class:`~llmsizing.model.Model` requires them to divide)."""
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def _nearest(options, wanted):
    """The option closest to ``wanted`` (the smaller one on a tie)."""
    return min(options, key=lambda o: (abs(o - wanted), o))


#: How to pick several GPUs in a multi-select, shown next to it and as its tooltip.
GPU_SELECT_HINT = "Ctrl-click (⌘-click on a Mac) to pick several GPUs, Shift-click for a range"


def _gpu_multiselect(value, description: str) -> W.SelectMultiple:
    """A multi-select of every catalogued GPU, tall enough to show them all (so the default picks are never
    below the fold), with a line under it saying how to pick several (:class:`Dashboard` shows ``hint``; a
    control's label is one line that JupyterLab and thebe cut short, so the hint cannot go there)."""
    options = list_gpus()
    select = W.SelectMultiple(options=options, value=tuple(value), rows=len(options), description=description,
                              tooltip=GPU_SELECT_HINT, **_style())
    select.hint = GPU_SELECT_HINT
    return select


def _hint(control) -> tuple[W.HTML, ...]:
    """The small line of help a control carries in its ``hint`` attribute, placed under it (else nothing)."""
    hint = getattr(control, "hint", None)
    if not hint:
        return ()
    return (W.HTML(f"<small>{html.escape(hint)}</small>",
                   layout=W.Layout(margin="0 0 4px 114px", width=f"{CONTROLS_WIDTH_PX - 114}px")),)


#: "GPUs per line" (chapter 2) stops where the widest bar would fill less than this share of the axis, unless
#: more GPUs are needed for every chosen GPU type to hold every bar.
MIN_BAR_SHARE = 0.25


def gpus_per_line_cap(model, precision: str, optimizer: str, gpus) -> int:
    """The largest "GPUs per line" the chapter-2 widget offers for these choices: the larger of

    * the count at which the widest bar (the largest model states among the chosen recipe + optimizer and
      the widget's comparisons) still fills :data:`MIN_BAR_SHARE` of the axis next to the line of the
      largest chosen GPU, ``floor(widest / (MIN_BAR_SHARE x largest GPU memory))``, and
    * the count at which even the smallest chosen GPU type holds the widest bar,
      ``ceil(widest / smallest GPU memory)`` (so every line can cross every bar),

    and at least 1. Beyond it the axis, which spans the farthest capacity line, squeezes the bars to slivers.
    Uses :func:`llmsizing.memory.model_states` (chapter 2)."""
    import math

    from .catalog import get_gpu
    from .memory import model_states
    from .units import GiB

    pairs = dict.fromkeys(((precision, optimizer),) + _WIDGET_STATES_COMPARE)
    widest = max(model_states(model, precision=p, optimizer=o).total_bytes for p, o in pairs) / GiB
    mems = [get_gpu(g).memory_gib for g in gpus]
    if not mems:
        return 1
    return max(1, math.floor(widest / (MIN_BAR_SHARE * max(mems))), math.ceil(widest / min(mems)))


def _cap_gpus_per_line(box: Dashboard) -> None:
    """Keep the chapter-2 "GPUs per line" slider's maximum at :func:`gpus_per_line_cap` as the model, recipe,
    optimizer or GPUs change (one redraw per change). The count the reader last chose comes back when the cap
    allows it again."""
    controls = box.controls
    count = controls["count"]
    wanted = {"count": count.value}
    busy = [False]

    def fit():
        v = box.values()
        try:
            cap = gpus_per_line_cap(v["model"], v["precision"], v["optimizer"], v["gpus"])
        except (ValueError, TypeError):   # the redraw shows the library's message
            return
        busy[0] = True
        try:
            with box.hold_sync():
                if cap >= count.max:
                    count.max = cap
                    count.value = min(wanted["count"], cap)
                else:
                    count.value = min(wanted["count"], cap)
                    count.max = cap
        finally:
            busy[0] = False

    def on_change(change):
        if busy[0]:
            return
        if change["owner"] is count:
            wanted["count"] = change["new"]
        else:
            fit()
        box.update()

    for w in controls.values():
        w.unobserve(box.update, names="value")
        w.observe(on_change, names="value")
    fit()                                  # the starting cap (no redraw: the count stays in range)
