"""Chapter 11's cost widget: choosing a GPU sets the price slider to that GPU's catalogued price, for every
GPU.

Expected values are read straight from data/gpu_prices.csv with the csv module (not through the library), so
the test fails if the slider clamps a price (a FloatSlider silently clamps to its max: GB200's $10.50 read
$10.00 before read11's fix)."""
import csv
from pathlib import Path

import pytest

pytest.importorskip("ipywidgets")
from _price_table import csv_price

PRICES = Path(__file__).resolve().parents[1] / "data" / "gpu_prices.csv"


def test_cost_widget_price_follows_every_catalogued_gpu():
    from llmsizing.widgets import cost_widget

    with open(PRICES, newline="") as fh:
        rows = {r["name"]: csv_price(r["name"]) for r in csv.DictReader(fh)}    # (an estimate by its rule)
    assert rows["GB200"] == 10.50                  # the row that exposed the clamp (CoreWeave tray / 4)
    w = cost_widget()
    offered = set(w.controls["gpu"].options)
    for name, price in rows.items():
        if name not in offered:
            continue
        w.controls["gpu"].value = name
        assert w.controls["price"].value == pytest.approx(price), name
