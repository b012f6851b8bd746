"""``catalog.prices_as_of``: the date the chapters print next to a price (issue 26, "a visible prices-as-of note").

Expected values are read from ``data/gpus.csv`` with the csv module, not through the library."""

import csv
from pathlib import Path

import pytest

from llmsizing.catalog import GPU, get_gpu, prices_as_of

ROWS = list(csv.DictReader((Path(__file__).resolve().parents[1] / "data" / "gpus.csv").open(encoding="utf-8")))
AS_OF = {r["name"]: r["as_of"] for r in ROWS}


def test_one_gpu_gives_its_row_s_date():
    assert prices_as_of(["H100 SXM"]) == AS_OF["H100 SXM"]
    assert prices_as_of(["h100-sxm", "A100 80GB"]) == (
        AS_OF["H100 SXM"] if AS_OF["H100 SXM"] == AS_OF["A100 80GB"] else None)


def test_the_whole_catalogue_gives_its_first_and_last_date():
    dates = sorted({r["as_of"] for r in ROWS})
    want = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    assert prices_as_of() == want
    assert len(dates) > 1, "the catalogue has rows priced on two days (B300, MI355X): the range form is exercised"


def test_a_gpu_without_a_date_and_bad_names_are_refused():
    h = get_gpu("H100 SXM")
    undated = GPU(**{**h.__dict__, "name": "my GPU", "as_of": ""})
    with pytest.raises(ValueError, match="my GPU"):
        prices_as_of([undated])
    with pytest.raises(ValueError, match="H1000"):
        prices_as_of(["H1000"])
    with pytest.raises(TypeError):
        prices_as_of(3)
