"""Interactive widgets for the book (need a running kernel: ``make lab``).

One public factory per widget, callable with no arguments. Each is thin glue: controls -> a ``render_*``
function from :mod:`llmsizing.charts` -> a PNG image and a text summary. Bad input (a combination the library
rejects) shows the library's error message in the widget instead of a traceback.
"""

from __future__ import annotations

import html

import ipywidgets as W

from . import charts
from .catalog import get_model, list_gpus, list_models

__all__ = ["parameter_counts_widget"]


class Dashboard(W.VBox):
    """Controls on top, then an error line, a text summary and the figure. ``update()`` redraws."""

    def __init__(self, render, controls: dict[str, W.ValueWidget], *, columns: int = 2):
        self.render = render
        self.controls = controls
        self.error = W.HTML()
        self.summary = W.HTML()
        self.image = W.Image(format="png")
        ctl = list(controls.values())
        rows = [W.HBox(ctl[i:i + columns]) for i in range(0, len(ctl), columns)]
        super().__init__(rows + [self.error, self.summary, self.image])
        for w in ctl:
            w.observe(self.update, names="value")
        self.update()

    def values(self) -> dict:
        return {k: w.value for k, w in self.controls.items()}

    def update(self, change=None) -> None:
        try:
            view = self.render(**self.values())
        except (ValueError, TypeError) as exc:
            self.error.value = f"<b style='color:#b00020'>⚠ {html.escape(str(exc))}</b>"
            return
        self.error.value = ""
        self.summary.value = f"<pre style='line-height:1.25'>{html.escape(view.summary)}</pre>"
        self.image.value = view.png()


def _style(desc_width: str = "110px") -> dict:
    return dict(style={"description_width": desc_width}, layout=W.Layout(width="330px"))


# =========================================================================== chapter 1
def parameter_counts_widget(model: str = "llama-2-7b") -> Dashboard:
    """Chapter 1: start from a catalogued model and change its architecture; see the count by component."""
    m = get_model(model)
    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="start from", **_style()),
        "layers": W.IntSlider(value=m.layers, min=1, max=160, description="layers", **_style()),
        "hidden": W.IntSlider(value=m.hidden, min=256, max=32768, step=256, description="hidden", **_style()),
        "heads": W.IntSlider(value=m.heads, min=1, max=256, description="heads", **_style()),
        "kv_heads": W.IntSlider(value=m.kv_heads, min=1, max=256, description="KV heads", **_style()),
        "ffn_hidden": W.IntSlider(value=m.ffn_hidden, min=256, max=131072, step=256, description="ffn hidden",
                                  **_style()),
        "vocab": W.IntSlider(value=m.vocab, min=1000, max=256000, step=1000, description="vocab", **_style()),
        "gated_mlp": W.Checkbox(value=m.gated_mlp, description="gated MLP (SwiGLU)", **_style()),
        "tied_embeddings": W.Checkbox(value=m.tied_embeddings, description="tied embeddings", **_style()),
    }
    box = Dashboard(_render_parameters, controls)

    def load_preset(change):  # choosing a catalogue model resets the architecture controls
        preset = get_model(change["new"])
        with box.hold_sync():
            for k in controls:
                if k != "model":
                    w = controls[k]
                    w.unobserve(box.update, names="value")
                    w.value = getattr(preset, k)
                    w.observe(box.update, names="value")
        box.update()

    controls["model"].observe(load_preset, names="value")
    return box


def _render_parameters(model, **fields):
    base = get_model(model)
    changed = {k: v for k, v in fields.items() if getattr(base, k) != v}
    if "kv_heads" in fields and "heads" in changed:
        changed["kv_heads"] = fields["kv_heads"]
    return charts.render_parameter_counts(base, **changed)
