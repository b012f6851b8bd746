"""Prices: each dated and sourced on its own, estimates marked, and one place to set them (issues 26 and 38).

``data/gpu_prices.csv`` is the price table: one row per GPU with its price, its kind (``list`` or ``estimate``),
its source and the date of that source. Expected values are read from the CSV with the csv module, not through
the library."""

import csv
import re
from pathlib import Path

import pytest

from llmsizing.catalog import GPU, get_gpu, list_gpus, prices_as_of, use_prices
from llmsizing.time_cost import cost_by_gpu
from _price_table import csv_as_of, csv_price

DATA = Path(__file__).resolve().parents[1] / "data"
ROWS = list(csv.DictReader((DATA / "gpu_prices.csv").open(encoding="utf-8")))
BY_NAME = {r["name"]: r for r in ROWS}
AS_OF = {r["name"]: csv_as_of(r["name"]) for r in ROWS}


pytestmark = pytest.mark.usefixtures("catalogue_prices")      # (tests/conftest.py)


def test_every_catalogued_gpu_has_one_dated_sourced_price():
    assert sorted(BY_NAME) == sorted(list_gpus())
    for r in ROWS:
        if r["estimate_neighbour"]:                # an estimate by rule: priced and dated by its neighbour
            r = {**r, "price_usd_per_gpu_hour": csv_price(r["name"]), "price_as_of": csv_as_of(r["name"])}
        assert float(r["price_usd_per_gpu_hour"]) > 0, r["name"]
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["price_as_of"]), r
        assert r["price_kind"] in ("list", "estimate", "reported"), r
        assert len(r["price_source"]) > 20, r
        # an estimate says so in its source, and a list price names no estimate
        assert (r["price_kind"] == "estimate") == ("estimate" in r["price_source"].lower()
                                                   or "assumed" in r["price_source"].lower()), r
    assert BY_NAME["MI355X"]["price_kind"] == "estimate"      # issue 38: the placeholder is marked
    assert len({r["price_as_of"] for r in ROWS}) >= 3          # priced on different days, each with its own date


def test_the_library_reads_the_price_table():
    for name, r in BY_NAME.items():
        g = get_gpu(name)
        assert g.price_usd_per_gpu_hour == csv_price(name)
        assert (g.price_as_of, g.price_kind) == (csv_as_of(name), r["price_kind"])
        # an estimate by rule keeps its row's reason and adds the sum it was priced by
        assert g.price_source == r["price_source"] or (r["estimate_neighbour"] and g.price_source.startswith(
            r["price_source"]) and f"= ${csv_price(name):.2f}" in g.price_source), name


def test_one_gpu_gives_its_row_s_date():
    assert prices_as_of(["H100 SXM"]) == AS_OF["H100 SXM"]
    a, b = AS_OF["H100 SXM"], AS_OF["A100 80GB"]
    assert prices_as_of(["h100-sxm", "A100 80GB"]) == (a if a == b else f"{min(a, b)} to {max(a, b)}")


def test_the_whole_catalogue_gives_its_first_and_last_date():
    dates = sorted(set(AS_OF.values()))
    assert prices_as_of() == f"{dates[0]} to {dates[-1]}"


def test_a_gpu_without_a_date_and_bad_names_are_refused():
    h = get_gpu("H100 SXM")
    undated = GPU(**{**h.__dict__, "name": "my GPU", "as_of": "", "price_as_of": ""})
    with pytest.raises(ValueError, match="my GPU"):
        prices_as_of([undated])
    with pytest.raises(ValueError, match="H1000"):
        prices_as_of(["H1000"])
    with pytest.raises(TypeError):
        prices_as_of(3)


def test_use_prices_sets_a_price_everywhere_and_goes_back():
    # 1B tokens of Llama 2 7B on its fewest H100s: the cost is GPU-hours x price, so it halves with the price
    before = cost_by_gpu("llama-2-7b", tokens=1e9, seq=4096, gpus=["H100 SXM"]).iloc[0]
    use_prices({"h100-sxm": before["price_usd_per_gpu_hour"] / 2})
    g = get_gpu("H100 SXM")
    assert g.price_kind == "reader" and g.price_usd_per_gpu_hour == pytest.approx(float(BY_NAME["H100 SXM"]["price_usd_per_gpu_hour"]) / 2)
    after = cost_by_gpu("llama-2-7b", tokens=1e9, seq=4096, gpus=["H100 SXM"]).iloc[0]
    assert after["cost_usd"] == pytest.approx(before["cost_usd"] / 2)
    assert get_gpu("A100 80GB").price_usd_per_gpu_hour == float(BY_NAME["A100 80GB"]["price_usd_per_gpu_hour"])
    use_prices(None)
    assert get_gpu("H100 SXM").price_usd_per_gpu_hour == float(BY_NAME["H100 SXM"]["price_usd_per_gpu_hour"])


def test_a_price_table_from_a_file_or_the_environment(tmp_path, monkeypatch):
    from llmsizing import catalog

    path = tmp_path / "my_prices.csv"
    path.write_text("name,price_usd_per_gpu_hour,price_source,price_as_of\n"
                    "B200,3.75,my provider's quote,2026-11-01\n")
    use_prices(path)
    b = get_gpu("B200")
    assert (b.price_usd_per_gpu_hour, b.price_source, b.price_as_of, b.price_kind) == (
        3.75, "my provider's quote", "2026-11-01", "reader")
    use_prices(None)
    monkeypatch.setenv(catalog.PRICES_ENV, str(path))
    catalog._gpus.cache_clear()
    assert get_gpu("B200").price_usd_per_gpu_hour == 3.75
    monkeypatch.delenv(catalog.PRICES_ENV)
    catalog._gpus.cache_clear()
    assert get_gpu("B200").price_usd_per_gpu_hour == float(BY_NAME["B200"]["price_usd_per_gpu_hour"])


@pytest.mark.parametrize("bad, match", [({"H1000": 2.0}, "H1000"), ({"H100 SXM": -1}, "prices"),
                                        ("/no/such/prices.csv", "no price table"), (3, "path to a CSV")])
def test_bad_prices_are_refused_and_leave_the_catalogue_as_it_was(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        use_prices(bad)
    assert get_gpu("H100 SXM").price_usd_per_gpu_hour == float(BY_NAME["H100 SXM"]["price_usd_per_gpu_hour"])
