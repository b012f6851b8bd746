"""One rule for every estimated price with no stated source (issue 38; reader25c's L5).

data/gpu_prices.csv holds the rule, not the number: an estimate names a neighbour (a GPU with a provider's
list price in the same file) and a basis (the BF16 dense peak of data/gpus.csv), and the library prices it
from the neighbour's current row when it loads. The neighbours were chosen by one criterion, stated before the
prices were worked out: the same vendor's list-priced part of the same generation, else the other vendor's
part of that generation (the one it was set against), nearest in memory and board. Expected prices are worked
by hand from the datasheets' peaks and the neighbours' list prices quoted below, never copied from
the code."""

import pytest

from llmsizing import catalog
from llmsizing.catalog import estimated_price, get_gpu, use_prices

pytestmark = pytest.mark.usefixtures("catalogue_prices")      # (tests/conftest.py)


# name: (neighbour, its list price of 2026-09-20 (Lambda), BF16 dense peak of each (datasheets), by hand)
BY_HAND = {
    # Hopper, same HGX board: $3.99 x 148 / 989.4 = 590.52 / 989.4 = 0.5968 -> $0.60
    "H20": ("H100 SXM", 3.99, 148, 989.4, 0.60),
    # no list-priced CDNA 2 part: the A100 80GB, $2.79 x 191.5 / 312 = 534.285 / 312 = 1.7125 -> $1.71
    "MI250X GCD": ("A100 80GB", 2.79, 191.5, 312, 1.71),
    # no list-priced CDNA 4 part: the B200, $6.69 x 2,516.6 / 2,250 = 16,836.05 / 2,250 = 7.4827 -> $7.48
    "MI355X": ("B200", 6.69, 2516.6, 2250, 7.48),
}


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_each_estimate_is_its_neighbour_s_price_times_the_peak_ratio(name):
    nb, nb_price, peak, nb_peak, want = BY_HAND[name]
    g, n = get_gpu(name), get_gpu(nb)
    assert (n.price_usd_per_gpu_hour, n.price_kind) == (nb_price, "list")
    assert (g.bf16_dense_tflops, n.bf16_dense_tflops) == (peak, nb_peak)
    assert g.price_usd_per_gpu_hour == want and g.price_kind == "estimate"
    assert g.price_as_of == n.price_as_of          # as old as the price it was derived from
    assert f"the {nb}'s price ${nb_price:.2f}" in g.price_source and f"= ${want:.2f}" in g.price_source


def test_every_unsourced_estimate_has_a_rule():
    """An estimate either names its neighbour or cites a stated figure (the H800's $2 is DeepSeek-V3's own
    assumed rental, arXiv 2412.19437): no placeholder number is left in the table."""
    for name in catalog.list_gpus():
        g = get_gpu(name)
        if g.price_kind == "estimate" and name not in BY_HAND:
            assert name == "H800" and "2412.19437" in g.price_source, name


def test_the_estimate_follows_its_neighbour_when_the_reader_reprices_it():
    use_prices({"B200": 4.50})                     # $4.50 x 2,516.6 / 2,250 = 5.0332 -> $5.03
    try:
        assert get_gpu("MI355X").price_usd_per_gpu_hour == 5.03
        use_prices({"MI355X": 2.10})               # a reader's own price for the estimate replaces the rule
        assert (get_gpu("MI355X").price_usd_per_gpu_hour, get_gpu("MI355X").price_kind) == (2.10, "reader")
    finally:
        use_prices(None)


def test_the_rule_refuses_bad_input():
    assert estimated_price(2.0, 100, 200) == 1.0
    with pytest.raises(ValueError, match="neighbour_basis"):
        estimated_price(2.0, 100, 0)
    with pytest.raises(ValueError, match="neighbour_price_usd_per_gpu_hour"):
        estimated_price(-1.0, 100, 200)


def test_a_rule_must_name_a_list_priced_neighbour(monkeypatch):
    read = catalog._read
    rows = [{**r, "estimate_neighbour": "H800"} if r["name"] == "H20" else r for r in read("gpu_prices.csv")]
    monkeypatch.setattr(catalog, "_read", lambda f: rows if f == "gpu_prices.csv" else read(f))
    with pytest.raises(ValueError, match="H20's estimate_neighbour 'H800'"):
        catalog._prices()


def test_a_copy_of_the_table_keeps_its_rules(tmp_path):
    """chapter 11: a reader's edited copy of data/gpu_prices.csv is a valid price table; its estimates by rule
    follow the copy's neighbours (B200 at $4.50: the MI355X at $5.03, as above)."""
    import csv

    rows = catalog._read("gpu_prices.csv")
    rows = [{**r, "price_usd_per_gpu_hour": "4.50"} if r["name"] == "B200" else r for r in rows]
    path = tmp_path / "mine.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    use_prices(path)
    try:
        g = get_gpu("MI355X")
        assert (g.price_usd_per_gpu_hour, g.price_kind) == (5.03, "estimate")
        assert get_gpu("B200").price_kind == "list"          # the copy's own kind, as chapter 11 says
    finally:
        use_prices(None)


def _copy_with(tmp_path, change):
    import csv

    rows = [change(r) for r in catalog._read("gpu_prices.csv")]
    path = tmp_path / "mine.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_a_price_typed_into_a_copy_s_estimate_row_wins(tmp_path):
    """review25c M2: chapter 11's workflow, a reader types their own H20 price into the H20 row of a copy of
    data/gpu_prices.csv (the row still names its neighbour); that price is used, marked as the reader's."""
    use_prices(_copy_with(tmp_path, lambda r: {**r, "price_usd_per_gpu_hour": "1.10"} if r["name"] == "H20"
                          else r))
    try:
        g = get_gpu("H20")
        assert (g.price_usd_per_gpu_hour, g.price_kind) == (1.10, "reader")
        assert "estimate rule" in g.price_source
        assert get_gpu("MI355X").price_usd_per_gpu_hour == BY_HAND["MI355X"][-1]   # the other rules still apply (by hand above)
    finally:
        use_prices(None)


def test_a_bad_rule_in_a_reader_s_copy_names_the_reader_s_table(tmp_path):
    path = _copy_with(tmp_path, lambda r: {**r, "estimate_neighbour": "H800"} if r["name"] == "H20" else r)
    with pytest.raises(ValueError, match="the reader's price table, the H20's estimate_neighbour 'H800'"):
        use_prices(path)
    assert get_gpu("H20").price_usd_per_gpu_hour == 0.60          # refused: the catalogue as it was
