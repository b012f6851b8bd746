"""The fine-tuning range's groupings registered before their check (ft39, issue 34: "let the range depend on
what explains the spread"): quantised base vs bf16 base, one GPU vs several. Each group is counted by hand from
the CSV, the grouped nested check is recomputed without llmsizing.intervals, and the registered rule's verdict
(until ft43 neither grouping; since, base meets it, and session 43 adopted it: a range per base) follows from
those hand-made numbers; the stated per-base ranges are recounted from the same residuals."""

import csv
import math
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _covered():
    import pandas as pd

    df = pd.read_csv(ROOT / "data" / "finetune_published.csv")
    return df[df["known_out"].isna()].reset_index(drop=True)


def _ranks_by_hand(values):
    """80% split conformal, every row its own unit: ranks floor((n + 1) 0.1) and ceil((n + 1) 0.9)."""
    v = sorted(values)
    n = len(v)
    return v[math.floor(round((n + 1) * 0.1, 9)) - 1], v[math.ceil(round((n + 1) * 0.9, 9)) - 1]


def test_groups_counted_by_hand():
    """Quantised base: the QLoRA rows, Answer.AI 8 + LLaMA-Factory 6 + Qwen's Int4 24 + optimum-benchmark 19
    + torchtune 2 = 59 of 118. Several GPUs: Answer.AI 10 + MLPerf 1 + Qwen's 4-GPU and two-node 12 +
    VectorLM's 2- and 4-GPU 6 + torchtune's 8-GPU 2 = 31."""
    from llmsizing import finetune_time as ft

    rows = _covered()
    assert len(rows) == 118
    assert 8 + 6 + 24 + 19 + 2 == 59 and 10 + 1 + 12 + 6 + 2 == 31
    base = ft.finetune_group_labels(rows, "base")
    gpus = ft.finetune_group_labels(rows, "gpus")
    assert list(base).count("quantised") == 59 and list(base).count("bf16-base") == 59
    assert list(gpus).count("multi-gpu") == 31 and list(gpus).count("single-gpu") == 87
    assert set(rows.loc[base == "quantised", "method"]) == {"qlora"}
    assert (rows.loc[gpus == "multi-gpu", "n_gpus"] > 1).all()


def test_old_calls_unchanged_and_bad_names_refused():
    """finetune_loso_check() as before: one range, no group column, data/intervals.csv's bounds; a grouping
    leaves those pooled bounds alone. An unknown grouping is refused by name, a non-string by type."""
    from llmsizing import finetune_time as ft

    with open(ROOT / "data" / "intervals.csv", newline="") as fh:
        row = {(r["area"], r["group"]): r for r in csv.DictReader(fh)}[("fine-tuning", "all")]
    check, rows = ft.finetune_loso_check()
    assert "group" not in rows and set(check.bounds) == {None}
    assert check.stated() == pytest.approx((float(row["low"]), float(row["high"])), abs=1e-4)
    grouped, grows = ft.finetune_loso_check(grouping="base")
    assert grouped.stated() == pytest.approx(check.stated(), abs=1e-12)
    assert set(grows["group"]) == {"quantised", "bf16-base"}
    with pytest.raises(ValueError, match="grouping 'bse'"):
        ft.finetune_loso_check(grouping="bse")
    with pytest.raises(TypeError, match="grouping must be a string"):
        ft.finetune_loso_check(grouping=1)
    with pytest.raises(ValueError, match="groupings"):
        ft.finetune_grouping_table(["stack"])


@pytest.fixture(scope="module")
def by_hand():
    """The nested check recomputed: for each held-out source k, every other source j is predicted by constants
    fitted on rows of neither; a group with 9 or more of those rows (80% needs 9 for finite bounds) takes the
    ranks of its own, else the ranks of all of them; k's rows (fitted without k) are inside or not."""
    from llmsizing import finetune_time as ft

    rows = _covered()
    key = rows["source"].map(lambda s: s.split(" (")[0]).to_numpy()
    sources = list(dict.fromkeys(key))
    fits = {}

    def resid(out, test_src):
        out = frozenset(out)
        if out not in fits:
            fits[out] = ft._fit_on(rows[~np.isin(key, list(out))], refine=True)
        o, f = fits[out]
        return [math.log(r.s_per_step / ft._predict(r, layer_overhead_s=o, dequant_bandwidth_fraction=f))
                for r in rows[key == test_src].itertuples()]

    labels = {"none": np.full(len(rows), "all"),
              "base": np.where(rows["method"] == "qlora", "quantised", "bf16-base"),
              "gpus": np.where(rows["n_gpus"] > 1, "multi-gpu", "single-gpu")}
    out, outer = {}, np.zeros(len(rows))
    for k in sources:                                 # each row fitted without its source: the stated bounds' ranks
        outer[key == k] = resid({k}, k)
    for name, lab in labels.items():
        inside, width = np.zeros(len(rows), bool), np.zeros(len(rows))
        for k in sources:
            inner = {j: resid({k, j}, j) for j in sources if j != k}
            pooled = [x for j in inner for x in inner[j]]
            per = {}
            for g in set(lab):
                mine = [x for j in inner for x, gl in zip(inner[j], lab[key == j]) if gl == g]
                per[g] = _ranks_by_hand(mine) if len(mine) >= 9 else _ranks_by_hand(pooled)
            for i, x in zip(np.flatnonzero(key == k), resid({k}, k)):
                lo, hi = per[lab[i]]
                inside[i] = lo - 1e-12 <= x <= hi + 1e-12
                width[i] = math.exp(hi - lo)
        out[name] = {g: (inside[m].mean(), float(np.median(width[m])))
                     for g, m in [("all", np.ones(len(rows), bool))] + [(g, lab == g) for g in set(lab)]}
    out["outer"], out["labels"] = outer, labels
    return out


@pytest.fixture(scope="module")
def table():
    """finetune_grouping_table() (about 3.5 s CPU: the nested check once per grouping) made once for the two
    tests below, which only read it (suite39: each made its own)."""
    from llmsizing import finetune_time as ft

    return ft.finetune_grouping_table()


def test_grouped_check_matches_the_hand_recomputation(by_hand, table):
    t = table
    assert list(dict.fromkeys(t["grouping"])) == ["none", "base", "gpus"]
    for r in t.itertuples():
        cov, width = by_hand[r.grouping][r.group]
        assert r.measured_coverage == pytest.approx(cov, abs=1e-12), (r.grouping, r.group)
        assert r.median_width == pytest.approx(width, rel=1e-9), (r.grouping, r.group)


def test_since_ft43_the_base_grouping_meets_the_registered_rule_and_gpus_does_not(by_hand, table):
    """The rule fixed before the check: coverage at least the single range's, median width below it, every
    group at least 75%. Until ft43 neither grouping met it (base kept coverage, 79.7% >= 79.7%, but widened,
    2.45x > 2.36x; session 41). Since ft43 priced the launch floor by passes over a layer (full recomputation:
    three), base meets it: 99 of 118 (83.9%) against the single range's 96 (81.4%), median width 2.26x
    against 2.36x, the quantised rows 49 of 59 and the bf16-base rows 50 of 59. gpus still loses coverage and
    widens, and its multi-GPU rows hold 61%. Session 43 adopted base (a range per base, FINETUNE_GROUPING).
    Since gemm44 (few-row GEMMs priced by XLA's measured table) base holds 98 (83.1%) against the single
    range's 94 (79.7%), 2.20x against 2.25x, the quantised rows 50 of 59 and the bf16-base rows 48 of 59;
    gpus 88 (74.6%), 2.89x, multi-GPU 52%."""
    cov0, width0 = by_hand["none"]["all"]
    assert round(cov0 * 118) == 94
    cov, width = by_hand["base"]["all"]
    floor = min(c for g, (c, _) in by_hand["base"].items())
    assert round(cov * 118) == 98 and cov >= cov0 and width < width0 and floor >= 0.75
    assert round(by_hand["base"]["quantised"][0] * 59) == 50
    assert round(by_hand["base"]["bf16-base"][0] * 59) == 48
    cov, width = by_hand["gpus"]["all"]
    assert cov < cov0 and width > width0 and by_hand["gpus"]["multi-gpu"][0] < 0.75
    assert list(table.loc[table["adopt"], "grouping"]) == ["base"]
    from llmsizing import finetune_time as ft

    assert ft.FINETUNE_GROUPING == "base"


def _stored(area, group):
    with open(ROOT / "data" / "intervals.csv", newline="") as fh:
        return {(r["area"], r["group"]): r for r in csv.DictReader(fh)}[(area, group)]


def test_the_stated_range_per_base_recounted_by_hand(by_hand):
    """Session 43 (issue 34): each base states the 80% conformal ranks of its own rows' out-of-source residuals
    (each row predicted by constants fitted without its source; 59 rows a group: ranks floor(60 x 0.1) = 6 and
    ceil(60 x 0.9) = 54), rounded outwards to 0.01 in data/finetune_model.csv, unrounded in data/intervals.csv
    (area fine-tuning-base), with the grouped nested check's coverage and median width. The pooled range
    stays the ranks of all 118 (ranks 11 and 108) in RESIDUAL_RANGE and the fine-tuning row."""
    from llmsizing import finetune_time as ft

    outer, base = by_hand["outer"], by_hand["labels"]["base"]
    with open(ROOT / "data" / "finetune_model.csv", newline="") as fh:
        consts = {r["constant"]: float(r["value"]) for r in csv.DictReader(fh)}
    for group, suffix in (("quantised", "quantised"), ("bf16-base", "bf16_base")):
        mine = sorted(outer[base == group])
        assert len(mine) == 59
        lo, hi = math.exp(mine[6 - 1]), math.exp(mine[54 - 1])
        row = _stored("fine-tuning-base", group)
        assert (float(row["low"]), float(row["high"])) == pytest.approx((lo, hi), abs=1e-4), group
        assert int(row["n_rows"]) == 59
        cov, width = by_hand["base"][group]
        assert float(row["measured_coverage"]) == pytest.approx(cov, abs=1e-4)
        assert float(row["median_width"]) == pytest.approx(width, abs=1e-4)
        stated = (math.floor(min(lo, 1) * 100) / 100, math.ceil(max(hi, 1) * 100) / 100)
        assert (consts[f"range_low_{suffix}"], consts[f"range_high_{suffix}"]) == stated
        assert ft.GROUP_RANGES[group] == stated
    row = _stored("fine-tuning-base", "all")
    assert (row["low"], row["high"]) == ("", "")                       # no one range: each base states its own
    assert float(row["measured_coverage"]) == pytest.approx(by_hand["base"]["all"][0], abs=1e-4)
    everything = sorted(outer)
    pooled = (math.floor(min(math.exp(everything[11 - 1]), 1) * 100) / 100,
              math.ceil(max(math.exp(everything[108 - 1]), 1) * 100) / 100)
    assert ft.RESIDUAL_RANGE == pooled == (consts["range_low"], consts["range_high"])


def test_a_qlora_step_and_a_lora_step_take_their_own_groups_range(capsys):
    """Session 43: a QLoRA run's hours take the quantised rows' range, a LoRA run's the bf16-base rows' (read
    here from data/finetune_model.csv), and the result names it; full fine-tuning has none. Before, both took
    the pooled range_low/range_high. The CLI names the range it used."""
    from llmsizing import cli
    from llmsizing.finetune_time import finetune_time

    with open(ROOT / "data" / "finetune_model.csv", newline="") as fh:
        c = {r["constant"]: float(r["value"]) for r in csv.DictReader(fh)}
    kw = dict(gpu="H100 SXM", tokens=1e8, seq=2048)
    for method, group, suffix in (("qlora", "quantised", "quantised"), ("lora", "bf16-base", "bf16_base")):
        t = finetune_time("llama-3-8b", method=method, **kw)
        lo, hi = c[f"range_low_{suffix}"], c[f"range_high_{suffix}"]
        assert t.range_group == group and t.to_dict()["range_group"] == group
        assert t.hours_range == pytest.approx((t.hours * lo, t.hours * hi), rel=1e-12)
        assert t.step_s_range == pytest.approx((t.step_s * lo, t.step_s * hi), rel=1e-12)
        assert t.hours_range != pytest.approx((t.hours * c["range_low"], t.hours * c["range_high"]))
    full = finetune_time("llama-3-8b", method="full", n_gpus=8, strategy="fsdp", **kw)
    assert full.range_group is None and full.hours_range is None
    assert cli.main(["finetune", "llama-3-8b", "--method", "lora", "--gpu", "H100 SXM", "--tokens", "100M",
                     "--seq", "2048"]) == 0
    assert "(the bf16-base step's range" in capsys.readouterr().out


def test_the_calls_of_before_session_43_are_unchanged():
    """finetune_time's and FinetuneTime's signatures and to_dict's old keys as before the ranges per base
    (listed by hand); RESIDUAL_RANGE still the pooled pair; GROUPINGS and finetune_group_labels importable
    from finetune_time; an unknown method still refused by name."""
    import inspect

    from llmsizing import finetune_time as ft

    assert list(inspect.signature(ft.finetune_time).parameters) == [
        "model", "gpu", "method", "tokens", "epochs", "seq", "batch", "grad_accum", "n_gpus", "strategy", "rank",
        "targets", "recompute", "kernel_efficiency", "dequant_bandwidth_fraction", "layer_overhead_s",
        "price_usd_per_gpu_hour", "node", "kbit_prep"]
    assert list(inspect.signature(ft.finetune_loso_check).parameters) == ["coverage", "unit", "grouping"]
    assert list(inspect.signature(ft.fit_finetune_constants).parameters) == ["with_range"]
    d = ft.finetune_time("llama-3-8b", gpu="H100 SXM", tokens=1e6, seq=1024).to_dict()
    assert {"hours", "hours_low", "hours_high", "cost_usd", "step_s"} <= set(d)
    assert len(ft.RESIDUAL_RANGE) == 2 and set(ft.GROUPINGS) == {"base", "gpus"}
    assert callable(ft.finetune_group_labels)
    with pytest.raises(ValueError, match="method 'qlor'"):
        ft.residual_range("qlor")
