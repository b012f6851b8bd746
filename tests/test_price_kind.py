"""An estimated price is marked wherever a library user meets a cost (issue 38).

``data/gpu_prices.csv`` says of each price whether it is a provider's ``list`` price or an ``estimate`` (a
placeholder). Every result that turns a price into dollars carries that kind (``price_kind``), the text the
command line and the charts print says "(estimated price)" after an estimate, and ranked figures hatch it; a
list price gets no mark. And ``catalog.use_prices`` is the one place that sets prices for every cost path.
The expected kinds are read from the CSV with the csv module, not through the library."""

import csv
from pathlib import Path

import pytest

from llmsizing import catalog
from llmsizing.catalog import price_kind_of, price_note, use_prices
from llmsizing.cli import main
from llmsizing.cost import compare_gpus, cost_vs_gpus
from llmsizing.finetune_time import finetune_time
from llmsizing.planner import plan
from llmsizing.rl import rl_run
from llmsizing.serve_step import serving
from llmsizing.time_cost import training_time

from _price_table import csv_price

ROWS = {r["name"]: r for r in csv.DictReader(
    (Path(__file__).resolve().parents[1] / "data" / "gpu_prices.csv").open(encoding="utf-8"))}
ESTIMATES = sorted(n for n, r in ROWS.items() if r["price_kind"] == "estimate")
LIST = "H100 SXM"
EST = "MI355X"        # an estimate with BF16, FP8 and the memory to hold the small runs below


pytestmark = pytest.mark.usefixtures("catalogue_prices")      # (tests/conftest.py)


def test_the_table_has_the_estimates_this_file_relies_on():
    assert ROWS[LIST]["price_kind"] == "list" and ROWS[EST]["price_kind"] == "estimate"
    assert {"H20", "MI355X", "H800", "MI250X GCD"} <= set(ESTIMATES)


@pytest.mark.parametrize("gpu", ESTIMATES + [LIST])
def test_training_time_says_what_its_price_is(gpu):
    t = training_time("llama-3-8b", tokens=1e9, seq=2048, gpu=gpu, n_gpus=8)
    assert t.price_kind == ROWS[gpu]["price_kind"]
    assert t.price_usd_per_gpu_hour == csv_price(gpu)
    # a price the caller gives is the caller's, whatever the GPU
    assert training_time("llama-3-8b", tokens=1e9, seq=2048, gpu=gpu, n_gpus=8,
                         price_usd_per_gpu_hour=1.23).price_kind == "reader"


def test_a_staged_run_says_so_too():
    staged = training_time("llama-3-8b", stages=[(1e9, 2048), (1e8, 8192)], gpu=EST, n_gpus=8)
    assert staged.price_kind == "estimate"
    staged = training_time("llama-3-8b", stages=[(1e9, 2048), (1e8, 8192)], gpu=LIST, n_gpus=8)
    assert staged.price_kind == "list"


def test_the_planner_marks_each_plan_s_price():
    df = plan("llama-3-8b", tokens=1e10, seq=2048, global_batch=64, gpus=(LIST, EST), max_gpus=64)
    kinds = df.groupby("gpu")["price_kind"].unique()
    assert list(kinds[EST]) == ["estimate"] and list(kinds[LIST]) == ["list"]
    assert (df["gpu"] == EST).any() and (df["gpu"] == LIST).any()


def test_cost_functions_carry_the_kind():
    c = compare_gpus(LIST, EST)
    assert (c.price_kind_a, c.price_kind_b) == ("list", "estimate")
    assert compare_gpus(LIST, EST, prices={EST: 9.0}).price_kind_b == "reader"
    for gpu in (LIST, EST):
        df = cost_vs_gpus("llama-3-8b", tokens=1e10, gpu=gpu, seq=2048, global_batch=64, tp=1, dps=(8, 16))
        assert set(df["price_kind"]) == {ROWS[gpu]["price_kind"]}


@pytest.mark.parametrize("gpu", [LIST, EST])
def test_finetune_serving_and_rl_carry_the_kind(gpu):
    kind = ROWS[gpu]["price_kind"]
    ft = finetune_time("llama-3-8b", gpu=gpu, tokens=1e6, seq=1024)
    assert ft.price_kind == kind and ft.to_dict()["price_kind"] == kind
    assert serving("llama-3-8b", gpu, batch=8).price_kind == kind
    r = rl_run("qwen2-7b", gpu=gpu, n_gpus=8, prompts_per_step=32, samples_per_prompt=4, prompt=256,
               response=1024, steps=10)
    assert r.price_kind == kind


def test_text_marks_an_estimate_and_nothing_else():
    assert price_note("estimate") == " (estimated price)"
    assert price_note("list") == price_note("reader") == ""
    with pytest.raises(ValueError, match="price_kind"):
        price_note("guess")


@pytest.mark.parametrize("gpu", [LIST, EST])
def test_the_command_line_prints_the_mark(gpu, capsys):
    assert main(["time", "llama-3-8b", "--tokens", "1B", "--gpu", gpu, "--gpus", "8", "--seq", "2048"]) == 0
    out = capsys.readouterr().out
    assert ("(estimated price)" in out) == (ROWS[gpu]["price_kind"] == "estimate"), out
    assert main(["cost", "llama-3-8b", "--tokens", "1B", "--seq", "2048", "--gpu", LIST, "--gpu", EST]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if LIST in x or EST in x]
    assert any(EST in x and "(estimate)" in x for x in lines), lines
    assert not any(LIST in x and "estimate" in x for x in lines), lines


def test_the_serving_cost_ranking_hatches_and_names_an_estimate():
    from llmsizing.charts import render_serving_cost

    view = render_serving_cost("llama-3-8b", gpus=[LIST, EST])
    ax = view.figure.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    est = f"{EST} (est. price, not ranked)"
    assert labels == [LIST, est], labels           # the estimate after (above) the ranked bars, whatever its cost
    hatched = {lab: bool(b.get_hatch()) for lab, b in zip(labels, ax.patches)}
    assert hatched == {est: True, LIST: False}
    assert "(estimated price)" in view.summary and "hatched" in ax.get_xlabel()


def test_use_prices_is_the_one_place_every_cost_path_reads():
    use_prices({EST: 2.5, LIST: 1.25})
    assert catalog.get_gpu(EST).price_kind == "reader"
    t = training_time("llama-3-8b", tokens=1e9, seq=2048, gpu=EST, n_gpus=8)
    assert (t.price_usd_per_gpu_hour, t.price_kind) == (2.5, "reader")
    assert t.cost_usd == pytest.approx(t.gpu_hours * 2.5)
    df = plan("llama-3-8b", tokens=1e10, seq=2048, global_batch=64, gpus=(LIST,), max_gpus=64)
    assert df["cost_usd"].to_numpy() == pytest.approx(df["gpu_hours"].to_numpy() * 1.25)
    assert set(df["price_kind"]) == {"reader"}
    assert finetune_time("llama-3-8b", gpu=LIST, tokens=1e6, seq=1024).price_usd_per_gpu_hour == 1.25
    assert serving("llama-3-8b", LIST, batch=8).price_usd_per_gpu_hour == 1.25
    assert compare_gpus(LIST, EST).price_ratio == pytest.approx(2.5 / 1.25)
    assert rl_run("qwen2-7b", gpu=LIST, n_gpus=8, prompts_per_step=32, samples_per_prompt=4, prompt=256,
                  response=1024, steps=10).price_usd_per_gpu_hour == 1.25
    use_prices(None)
    assert price_kind_of(catalog.get_gpu(EST)) == "estimate"


def test_the_mi250x_estimate_follows_the_list_price_it_is_derived_from():
    """The MI250X GCD has no on-demand price; its row names the rule (the A100 80GB's price scaled by the two
    BF16 peaks, 191.5 / 312 TFLOP/s, AMD's and NVIDIA's datasheets), not a number, so when the A100's price
    moves the estimate moves with it (read11: it once kept the A100's old $1.79), a reader's A100 price too."""
    a100, gcd = ROWS["A100 80GB"], ROWS["MI250X GCD"]
    assert gcd["price_kind"] == "estimate" and a100["price_kind"] == "list"
    assert (gcd["estimate_neighbour"], gcd["estimate_basis"], gcd["price_usd_per_gpu_hour"]) == (
        "A100 80GB", "bf16_dense_tflops", "")
    g = catalog.get_gpu("MI250X GCD")
    assert g.price_usd_per_gpu_hour == pytest.approx(float(a100["price_usd_per_gpu_hour"]) * 191.5 / 312, abs=0.005)
    assert g.price_as_of == a100["price_as_of"]
    use_prices({"A100 80GB": 3.12})                # 3.12 x 191.5 / 312 = 1.915, to the cent 1.92 (or 1.91)
    try:
        g = catalog.get_gpu("MI250X GCD")
        assert g.price_usd_per_gpu_hour in (1.91, 1.92) and g.price_kind == "estimate"
    finally:
        use_prices(None)


def test_a_survey_s_price_is_ranked_but_marked():
    """M3 (reader25c): the MI300X's price is Vultr's as a dated third-party survey reports it, not read from a
    provider's price page: price_kind "reported", ranked among the list prices, but named so."""
    from llmsizing.charts import render_serving_cost

    assert ROWS["MI300X"]["price_kind"] == "reported" and "survey" in ROWS["MI300X"]["price_source"]
    assert price_note("reported") == " (reported price)"
    view = render_serving_cost("llama-3-8b", gpus=[LIST, "MI300X"])
    labels = [t.get_text() for t in view.figure.axes[0].get_yticklabels()]
    assert "MI300X (rep. price)" in labels and not any(b.get_hatch() for b in view.figure.axes[0].patches)
