"""data/gpu_prices.csv read with the csv module, not through the library (issue 38): each GPU's price, an
estimate by rule derived here from its neighbour's row and data/gpus.csv. tests/test_price_rule.py checks the
rule itself against figures worked by hand."""

import csv
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"


def _rows(name: str) -> dict[str, dict[str, str]]:
    with open(DATA / name, newline="", encoding="utf-8") as fh:
        return {r["name"]: r for r in csv.DictReader(fh)}


def csv_price(gpu: str) -> float:
    """The row's ``price_usd_per_gpu_hour``; for a row that names an ``estimate_neighbour``, the neighbour's
    price x the ratio of the two GPUs' ``estimate_basis`` columns in data/gpus.csv, to the cent."""
    rows, specs = _rows("gpu_prices.csv"), _rows("gpus.csv")
    r = rows[gpu]
    nb = r.get("estimate_neighbour", "")
    if not nb:
        return float(r["price_usd_per_gpu_hour"])
    basis = r["estimate_basis"]
    ratio = float(specs[gpu][basis]) / float(specs[nb][basis])
    return round(float(rows[nb]["price_usd_per_gpu_hour"]) * ratio, 2)


def csv_as_of(gpu: str) -> str:
    """The row's ``price_as_of``, or for an estimate by rule its neighbour's."""
    rows = _rows("gpu_prices.csv")
    nb = rows[gpu].get("estimate_neighbour", "")
    return rows[nb or gpu]["price_as_of"]
