"""The first dashboard of a process moves what is alive into the garbage collector's permanent generation
(widgets.dashboard._freeze_once, issue 38, dense35): a full collection during a later move walks only what was
made since (~1 ms instead of 40-60 ms in a widget kernel), and it happens once per process."""

from types import SimpleNamespace

import ipywidgets as W
import numpy as np

from llmsizing.widgets import dashboard
from llmsizing.widgets.dashboard import Dashboard, encode_png


def test_the_first_dashboard_freezes_once(monkeypatch):
    import gc

    png = encode_png(np.zeros((1, 1, 4), dtype=np.uint8))
    calls = []
    dashboard._freeze_once.cache_clear()
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append("collect") or 0)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))

    def render(n):
        return SimpleNamespace(summary=f"n = {n}", figure=None, png=lambda compress_level: png)

    for _ in range(2):
        board = Dashboard(render, {"n": W.IntSlider(value=1, min=1, max=5)})
        board.controls["n"].value = 2
    assert calls == ["collect", "freeze"]
