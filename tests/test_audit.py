"""Chapter 14's audit of the seed articles' claims (llmsizing.audit).

Expected values are derived by hand below (bytes per parameter, FLOPs per token, tokens per second, days), not
copied from the code's output."""

from __future__ import annotations

import csv
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmsizing import audit
from llmsizing.audit import BAND, BOUNDS, COMPUTE, SEED_CLAIMS_CSV, audit_table, claims, not_computed_claims, verdict

SEEDS = {"000_d6a575a5f6cf2fc5.txt", "001_728459bae6ee56ef.txt", "002_cf3ae0560e47cdf5.txt",
         "003_49a84688992d7c26.txt", "004_cd8d1bb82c5d028d.txt"}


@pytest.fixture(scope="module")
def rows():
    with open(SEED_CLAIMS_CSV, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def table():
    return audit_table()


def by_id(table, claim_id):
    return table.set_index("id").loc[claim_id]


# ----------------------------------------------------------------------------- the registry
def test_csv_columns_and_values(rows):
    assert list(rows[0]) == ["id", "article", "source", "topic", "claim", "claimed", "claimed_high", "bound",
                             "unit", "not_computed", "as_of"]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "claim ids must be unique"
    for r in rows:
        assert r["source"] in SEEDS and r["source"].startswith(r["article"]), r["id"]
        assert r["id"].startswith(r["article"] + "-"), r["id"]
        assert "2026-11-23" <= r["as_of"] <= "2026-12-31" and len(r["as_of"]) == 10   # the audit's dates (FP8: 25th)
        assert r["bound"] in BOUNDS
        assert float(r["claimed"]) > 0
        assert (r["bound"] == "range") == bool(r["claimed_high"]), r["id"]
        if r["claimed_high"]:
            assert float(r["claimed_high"]) > float(r["claimed"]), r["id"]
    assert {r["source"] for r in rows} == SEEDS, "every seed article has at least one claim"


def test_every_row_has_a_compute_function_and_vice_versa(rows):
    computed = {r["id"] for r in rows if not r["not_computed"]}
    skipped = {r["id"] for r in rows if r["not_computed"]}
    assert computed == set(COMPUTE), (computed ^ set(COMPUTE))
    assert not skipped & set(COMPUTE)
    assert {c.id for c in claims()} == computed
    assert set(not_computed_claims()["id"]) == skipped


def test_required_topics_are_covered(rows):
    ids = {r["id"] for r in rows}
    for needed in ("000-tps-h100", "000-time-formula", "000-opt1-days", "000-opt3-cost", "000-cost-mistral7b-1-usd",
                   "000-tp-70b-mem", "000-pp-405b-mem", "000-fsdp-405b-mem", "000-faq-one-h100",
                   "002-10b-optimizer", "002-rule-128k", "004-16-bytes", "004-qlora-70b-41gb"):
        assert needed in ids


def test_library_values_are_finite_and_positive(table):
    assert len(table) == len(COMPUTE)
    assert list(table.columns[:8]) == ["id", "article", "topic", "claim", "claimed", "library", "ratio", "verdict"]
    for r in table.itertuples():
        assert math.isfinite(r.library) and r.library > 0, r.id
        assert math.isfinite(r.ratio) and r.ratio > 0, r.id
        assert r.ratio == pytest.approx(r.claimed / r.library)


def test_audit_table_is_a_copy(table):
    t = audit_table()
    t.loc[0, "library"] = -1.0
    assert audit_table().loc[0, "library"] > 0


# ----------------------------------------------------------------------------- the verdict rule
def expected_verdict(r) -> str:
    """The rule written out again, independently: holds / off / wrong, from the claimed and library values."""
    if r.wrong_in_kind:
        return "wrong"
    lo = r.claimed_low
    hi = r.claimed_high if r.bound == "range" else lo
    if r.bound == "about":
        ok = lo / BAND <= r.library <= lo * BAND
    elif r.bound == "at least":
        ok = r.library >= lo / BAND
    elif r.bound == "at most":
        ok = r.library <= lo * BAND
    else:
        ok = lo / BAND <= r.library <= hi * BAND
    return "holds" if ok else "off"


def test_verdicts_follow_the_rule(table):
    for r in table.itertuples():
        want = expected_verdict(r)
        assert r.verdict.startswith(want), (r.id, r.verdict, want)
        if want == "off":
            f = max(r.library / (r.claimed_high if r.bound == "range" and r.library > r.claimed_high
                                 else r.claimed_low), 1e-300)
            f = max(f, 1 / f)
            assert f > BAND


def test_verdict_counts_add_up(table):
    counts = audit.verdict_counts(table)
    assert sum(counts.values()) == len(table)
    assert counts["holds"] > 0 and counts["off"] > 0 and counts["wrong in kind"] > 0


@pytest.mark.parametrize("args, kw, want", [
    ((3500, 890), {}, "off by 3.9x (too high)"),
    ((14, 157), {}, "off by 11x (too low)"),
    ((100, 124.9), {}, "holds"),
    ((100, 80.1), {}, "holds"),
    ((100, 79.0), {}, "off by 1.3x (too high)"),
    ((64, 116), {"bound": "at least"}, "holds as a lower bound (library 1.8x higher)"),
    ((64, 70), {"bound": "at least"}, "holds"),
    ((64, 40), {"bound": "at least"}, "off by 1.6x (too high)"),
    ((80, 99), {"bound": "at most"}, "holds"),
    ((80, 240), {"bound": "at most"}, "off by 3.0x (too low)"),
    ((4, 20), {"bound": "range", "claimed_high": 8}, "off by 2.5x (too low)"),
    ((4, 2), {"bound": "range", "claimed_high": 8}, "off by 2.0x (too high)"),
    ((4, 9.9), {"bound": "range", "claimed_high": 8}, "holds"),
])
def test_verdict_examples(args, kw, want):
    assert verdict(*args, **kw) == want


def test_verdict_wrong_in_kind_keeps_the_number():
    v = verdict(12, 427, bound="at least", reason="it does not fit")
    assert v.startswith("wrong: it does not fit") and "holds as a lower bound" in v


@pytest.mark.parametrize("kw, word", [
    ({"claimed": 0, "library": 1}, "claimed"), ({"claimed": 1, "library": -1}, "library"),
    ({"claimed": 1, "library": float("nan")}, "library"), ({"claimed": 1, "library": 1, "bound": "roughly"}, "bound"),
    ({"claimed": 1, "library": 1, "bound": "range"}, "claimed_high"),
    ({"claimed": 2, "library": 1, "bound": "range", "claimed_high": 1}, "claimed_high"),
    ({"claimed": 1, "library": 1, "claimed_high": 3}, "claimed_high"),
    ({"claimed": 1, "library": 1, "band": 0.5}, "band"),
    ({"claimed": "1", "library": 1}, "claimed"), ({"claimed": 1, "library": 1, "reason": 3}, "reason"),
])
def test_verdict_refuses_bad_input_naming_it(kw, word):
    with pytest.raises((ValueError, TypeError), match=word):
        verdict(**kw)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.floats(1e-6, 1e12), st.floats(1e-6, 1e12), st.sampled_from(["about", "at least", "at most"]))
def test_verdict_is_total_on_positive_numbers(claimed, library, bound):
    v = verdict(claimed, library, bound=bound)
    assert v.startswith(("holds", "off by "))
    if 1 / BAND <= claimed / library <= BAND:
        assert v.startswith("holds")


# ----------------------------------------------------------------------------- claims checked by hand
def test_004_sixteen_bytes_per_param_by_hand(table):
    # bf16 weights 2 + bf16 gradients 2 + fp32 master 4 + Adam m 4 + Adam v 4 = 16 (ZeRO paper, Sec. 3.1)
    assert by_id(table, "004-16-bytes")["library"] == pytest.approx(2 + 2 + 4 + 4 + 4)
    assert by_id(table, "004-adamw-12-bytes")["library"] == pytest.approx(4 + 4 + 4)
    assert by_id(table, "004-16-bytes")["verdict"] == "holds"


def test_002_ten_billion_by_hand(table):
    n = 10e9
    assert by_id(table, "002-10b-weights")["library"] == pytest.approx(n * 2 / 1e9)     # 20 GB
    assert by_id(table, "002-10b-optimizer")["library"] == pytest.approx(n * 12 / 1e9)  # m, v and master: 120 GB
    assert by_id(table, "002-10b-optimizer")["verdict"] == "off by 1.5x (too low)"     # the seed forgot the master
    assert by_id(table, "002-10b-two-gpus")["library"] == pytest.approx(n * 16 / 2 / 1e9)  # ZeRO-3 over 2: 80 GB
    # one layer of Llama 2 13B keeps at least its input under full recomputation: b x s x h x 2 bytes
    assert by_id(table, "002-10b-layer-activations")["library"] == pytest.approx(32 * 4096 * 5120 * 2 / 1e6)


def test_000_time_formula_and_throughput_by_hand(table):
    # Llama 2 70B: N = 68,976,648,192 parameters, of which the 32,000 x 8,192 input embedding is a lookup;
    # 6 FLOPs per matmul weight per token + attention 12 x L x a x d x s (PaLM, App. B)
    n, emb = 68_976_648_192, 32_000 * 8_192
    flops = 6 * (n - emb) + 12 * 80 * 64 * 128 * 4096
    assert by_id(table, "000-time-formula")["library"] == pytest.approx(flops / n, rel=1e-3)
    tps = 989.4e12 * 0.40 / flops                                    # H100 dense BF16 peak x 40% MFU
    assert by_id(table, "000-tps-h100")["library"] == pytest.approx(tps, rel=1e-3)
    days_8 = 1e12 / (8 * tps) / 86400
    assert by_id(table, "000-opt2-days")["library"] == pytest.approx(days_8, rel=1e-3)
    assert by_id(table, "000-opt2-cost")["library"] == pytest.approx(days_8 * 24 * 8 * 2.69, rel=1e-3)
    tps_a100 = 312e12 * 0.40 / flops
    assert by_id(table, "000-opt1-cost")["library"] == pytest.approx(1e12 / tps_a100 / 3600 * 1.39, rel=1e-3)


def test_wrong_in_kind_when_the_step_does_not_fit(table):
    # 70B with 16 bytes per parameter is about 1.1 TB of states: 8 x 80 GB cannot hold it, whatever the layout
    assert 68_976_648_192 * 16 > 8 * 80e9
    for claim_id in ("000-opt1-days", "000-opt2-cost", "000-faq-one-h100", "000-cost-llama2-70b-8-days"):
        assert by_id(table, claim_id)["verdict"].startswith("wrong: a llama-2-70b training step does not fit")
    # 64 H100s hold it: the 64-GPU option is judged on its number alone
    assert not by_id(table, "000-opt3-days")["wrong_in_kind"]


def test_hardware_specs_by_hand(table):
    assert by_id(table, "003-nvlink4")["library"] == 900        # 18 links x 50 GB/s, both directions
    assert by_id(table, "004-b200-speedup")["library"] == pytest.approx(2250 / 989.4, rel=1e-6)


def test_not_computed_claims_say_why():
    df = not_computed_claims()
    assert len(df) > 0 and (df["why"].str.len() > 10).all()
    assert "004-qlora-70b-41gb" not in set(df["id"])          # computed since chapter 16 (finetune_memory)


def test_render_seed_audit_shows_the_table(table):
    from llmsizing.charts import render_seed_audit

    v = render_seed_audit(table)
    counts = audit.verdict_counts(table)
    assert v.summary.startswith(f"{len(table)} claims: {counts['holds']} hold")
    assert len(v.png()) > 1000


def test_band_only_rejudges(table):
    wide = audit_table(3.0)
    assert (wide["library"] == table["library"]).all()
    assert audit.verdict_counts(wide)["holds"] >= audit.verdict_counts(table)["holds"]
    assert audit.verdict_counts(wide)["wrong in kind"] == audit.verdict_counts(table)["wrong in kind"]
    with pytest.raises(ValueError, match="band"):
        audit_table(0.5)


def test_render_seed_audit_article_filter_and_errors(table):
    from llmsizing.charts import render_seed_audit

    v = render_seed_audit(article="004")
    assert v.summary.startswith(f"seed 004, {(table['article'] == '004').sum()} claims")
    with pytest.raises(ValueError, match="article"):
        render_seed_audit(article="005")
    with pytest.raises(ValueError, match="band"):
        render_seed_audit(table, band=1.5)


def test_seed_audit_widget_shows_the_library(table):
    from llmsizing.widgets import seed_audit_widget

    w = seed_audit_widget()
    counts = audit.verdict_counts(table)
    assert f"{counts['holds']} hold (within 25%)" in w.summary.value
    w.controls["band"].value = 3.0
    assert f"{audit.verdict_counts(audit_table(3.0))['holds']} hold (within 200%)" in w.summary.value
    w.controls["article"].value = "003"
    assert "seed 003" in w.summary.value


def test_inference_rule_claims_are_the_library_rule(rows):
    from llmsizing.inference import RULE_OF_THUMB

    by = {r["id"]: r for r in rows}
    assert float(by["002-rule-batch32"]["claimed"]) == RULE_OF_THUMB
    assert float(by["002-rule-128k"]["claimed"]) == RULE_OF_THUMB
    assert float(by["002-70b-serving"]["claimed"]) == pytest.approx(RULE_OF_THUMB * 140)  # 1.2 x 70B x 2 bytes
