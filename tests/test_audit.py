"""Chapter 14's audit of the seed articles' claims (llmsizing.audit).

Expected values are derived by hand below (bytes per parameter, FLOPs per token, tokens per second, days), not
copied from the code's output."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmsizing import audit
from llmsizing.audit import BAND, BOUNDS, COMPUTE, SEED_CLAIMS_CSV, audit_table, claims, not_computed_claims, verdict

#: PCIe Gen5 x16, an H100 SXM's host link (NVIDIA H100 datasheet): 32 GT/s x 16 x 128/130 / 8 = 63.0 GB/s
PCIE5 = 32e9 * 16 * 128 / 130 / 8

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
                             "unit", "kind", "line", "from_image", "counted_with", "not_computed", "run_gpus",
                             "run_days", "as_of", "gib_source"]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "claim ids must be unique"
    for r in rows:
        assert r["source"] in SEEDS and r["source"].startswith(r["article"]), r["id"]
        assert r["id"].startswith(r["article"] + "-"), r["id"]
        assert "2026-11-23" <= r["as_of"] <= "2026-12-31" and len(r["as_of"]) == 10   # the audit's dates
        assert r["bound"] in BOUNDS
        assert r["kind"] in audit.YARDSTICKS, r["id"]
        assert all(0 < int(x) < 300 for x in r["line"].split(";")), r["id"]
        assert r["from_image"] in ("", "yes")
        assert r["counted_with"] in ("", *ids) and r["counted_with"] != r["id"]
        assert float(r["claimed"]) > 0
        assert (r["bound"] == "range") == bool(r["claimed_high"]), r["id"]
        if r["run_days"]:                        # the days of each run of run_gpus, one per GPU count
            days = r["run_days"].split(";")
            assert len(days) == len(r["run_gpus"].split(";")) and all(int(d) > 0 for d in days), r["id"]
            assert r["unit"] != "days", r["id"]          # a claim of days holds them in claimed
        if r["gib_source"]:                      # a source for reading a claim's "GB" as GiB, only where it is GB
            assert r["unit"].startswith("GB") and "1024" in r["gib_source"], r["id"]
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
    """The rule written out again, independently: holds / off, from the claimed and library values (the number
    alone, whatever the premise)."""
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
        number = r.verdict
        if r.verdict.startswith(("wrong", "needs CPU offload")):
            number = r.verdict.rsplit("(the number", 1)[1].split(": ", 1)[1]
        assert number.startswith(want), (r.id, r.verdict, want)
        if want == "off":
            f = max(r.library / (r.claimed_high if r.bound == "range" and r.library > r.claimed_high
                                 else r.claimed_low), 1e-300)
            f = max(f, 1 / f)
            assert f > BAND


def test_verdict_counts_add_up(table):
    counts = audit.verdict_counts(table)
    assert sum(counts.values()) == len(table)
    assert all(counts[k] > 0 for k in audit.KINDS)
    assert (table["verdict_kind"] == table["verdict"].map(audit.verdict_kind)).all()


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


@pytest.mark.parametrize("library, bound, want", [
    (0.9, "above", "off by 1.1x (too high)"), (1.0, "above", "off by 1.0x (too high)"), (1.05, "above", "holds"),
    (1.3, "above", "holds as a lower bound (library 1.3x higher)"),
    (1.1, "below", "off by 1.1x (too low)"), (0.95, "below", "holds"),
    (0.7, "below", "holds as an upper bound (library 1.4x lower)"),
])
def test_direction_claims_hold_only_on_their_side(library, bound, want):
    """Review24a M1: a claim that names a direction only ("FP8 trains faster", "8 GPUs cost less") is judged
    with the band on its side of 1 alone: FP8 at 0.9x is off, not held by the 25% band below 1."""
    assert verdict(1, library, bound=bound) == want
    assert verdict(1, 0.9, bound="at least") == "holds"        # why "at least 1" could not fail: the band


def test_every_direction_claim_is_read_as_one():
    """The one rule, applied to every row of its kind: a claim bounded by exactly 1x (a ratio whose seed names
    a direction, not a factor) is "above" or "below", never "at least"/"at most" (whose band below 1 would let
    "faster" hold when slower)."""
    with open(SEED_CLAIMS_CSV, newline="") as f:
        rows = [r for r in csv.DictReader(f) if not r["not_computed"]]
    ones = {r["id"]: r["bound"] for r in rows if r["unit"] == "x" and float(r["claimed"]) == 1
            and r["bound"] != "about"}
    assert ones == {"004-fp8-faster-h100": "above", "004-fp8-less-vram": "above",
                    "004-l40s-fp8-vs-a100": "above", "000-faq-8x50-cheaper": "below"}


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
    # ZeRO-3 over 2 shards the 16 bytes per parameter of the 31-layer 10.16B stand-in: 81 GB, then the step's
    # activations and allowance come on top
    assert by_id(table, "002-10b-two-gpus")["library"] > 10_161_024_000 * 16 / 2 / 1e9
    # one layer of Llama 2 13B keeps at least its input under full recomputation: b x s x h x 2 bytes
    assert by_id(table, "002-10b-layer-activations")["library_central"] == pytest.approx(32 * 4096 * 5120 * 2 / 1e6)
    # judged at the most favourable sequence length of audit.SEQS, 2,048 tokens: half as much (issue 38)
    assert by_id(table, "002-10b-layer-activations")["library"] == pytest.approx(32 * 2048 * 5120 * 2 / 1e6)


def test_000_time_formula_and_throughput_by_hand(table):
    from llmsizing.time_cost import mfu_estimate

    # Llama 2 70B: N = 68,976,648,192 parameters, of which the 32,000 x 8,192 input embedding is a lookup;
    # 6 FLOPs per matmul weight per token + attention 12 x L x a x d x s (PaLM, App. B)
    n, emb = 68_976_648_192, 32_000 * 8_192
    flops = 6 * (n - emb) + 12 * 80 * 64 * 128 * 4096
    assert by_id(table, "000-time-formula")["library_central"] == pytest.approx(flops / n, rel=1e-3)
    # that count has no recomputed forward (it would be 8.58, not 6.44), and the reading must not say it has one
    # (review read26d M2: the FLOPs rows read "6N + attention, recomputation's forward" for both)
    assert "recomputation's forward" not in by_id(table, "000-time-formula")["reading"]
    est = mfu_estimate("llama-2-70b", gpu="H100 SXM", seq=4096)              # the calibrated MFU (chapter 10)
    tps = 989.4e12 * est.mfu / flops                                          # H100 dense BF16 peak x MFU
    assert by_id(table, "000-tps-h100")["library_central"] == pytest.approx(tps, rel=1e-3)
    # the seed's 3,500 is above the whole band: judged at its top, and at the more favourable of the two
    # sequence lengths of audit.SEQS (issue 38): 2,048 tokens, where attention costs half as much per token
    flops_2k = 6 * (n - emb) + 12 * 80 * 64 * 128 * 2048
    est_2k = mfu_estimate("llama-2-70b", gpu="H100 SXM", seq=2048)
    assert by_id(table, "000-tps-h100")["library"] == pytest.approx(989.4e12 * est_2k.high / flops_2k, rel=1e-3)
    assert by_id(table, "000-tps-h100")["reading"].endswith("; 2,048 tokens")
    days_8 = 1e12 / (8 * tps) / 86400
    assert by_id(table, "000-opt2-days")["library_central"] == pytest.approx(days_8, rel=1e-3)
    assert by_id(table, "000-opt2-cost")["library_central"] == pytest.approx(days_8 * 24 * 8 * 2.69, rel=1e-3)
    a100 = mfu_estimate("llama-2-70b", gpu="A100 80GB", seq=4096)
    tps_a100 = 312e12 * a100.mfu / flops
    assert by_id(table, "000-opt1-cost")["library_central"] == pytest.approx(1e12 / tps_a100 / 3600 * 1.39, rel=1e-3)


def test_hardware_specs_by_hand(table):
    assert by_id(table, "003-nvlink4")["library"] == 900        # 18 links x 50 GB/s, both directions
    assert by_id(table, "004-b200-speedup")["library"] == pytest.approx(2250 / 989.4, rel=1e-6)


def test_a_gpus_memory_is_read_as_marketed_and_as_its_drivers_bytes(table):
    """The unit rule for a GPU's memory (issue 38: "the B200 alternative"): the central reading is the vendor's
    "GB" (data/gpus.csv memory_marketed_gb), the other the bytes the driver reports in 10**9-byte GB, and the
    claim is judged at the nearer. By hand: a B200 reports 183,359 MiB = 183,359 x 1,048,576 = 192.27e9 bytes,
    so seed 004's 192 GB is judged at 192.27 (the marketed 180 is 6.7% further off); an H100 is sold as 80 GB and
    reports 81,559 MiB = 85.52e9 bytes, so its 80 GB is judged at the marketed 80."""
    b200 = by_id(table, "004-b200-memory")
    assert b200["library_central"] == 180
    assert b200["library"] == pytest.approx(183_359 * 2**20 / 1e9) == pytest.approx(192.27, abs=0.005)
    assert b200["reading"].endswith(audit.DRIVER_GB_READING) and not b200["depends"]   # a setting, no method
    assert b200["verdict"] == "holds"
    h100 = by_id(table, "004-h100-memory")
    assert (h100["library"], h100["library_central"], h100["reading"]) == (80, 80, "catalogue")
    from llmsizing.catalog import get_gpu

    assert get_gpu("H100 SXM").memory_bytes / 1e9 == pytest.approx(81_559 * 2**20 / 1e9)   # the other reading
    assert audit.readings("004-b200-memory")["reading"].tolist() == ["catalogue"]       # one method


def test_not_computed_claims_say_why():
    df = not_computed_claims()
    assert len(df) > 0 and (df["why"].str.len() > 10).all()
    assert "004-qlora-70b-41gb" not in set(df["id"])          # computed since chapter 16 (finetune_memory)


def test_render_seed_audit_shows_the_table(table):
    from llmsizing.charts import render_seed_audit

    v = render_seed_audit(table)
    counts = audit.verdict_counts(table)
    assert v.summary.startswith(f"{len(table)} claims: {counts['holds']} hold")
    assert f"{counts['needs CPU offload']} need CPU offload" in v.summary
    assert len(v.png()) > 1000


def test_band_only_rejudges(table):
    wide = audit_table(3.0)
    same = wide["reading"] == table["reading"]        # a wider band can make another reading the favourable one
    assert same.mean() > 0.9 and (wide["library"] == table["library"])[same].all()
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


# ----------------------------------------------------------------------------- completeness: every numeric line
#: Every line of the five seeds that states a number the audit should judge, as (seed, line, a short token that
#: is on that line: a number with its unit, never a sentence). Lines that only set up an example (the "Scenario"
#: of seed 000's worked options), quote no quantity, or only hedge ("can potentially double") are not listed.
NUMERIC_LINES = [
    ("000", 9, "8-64"), ("000", 19, "/ 2"), ("000", 20, "/ 2"), ("000", 22, "/ 2"), ("000", 24, "4x"),
    ("000", 29, "14GB"), ("000", 30, "26GB"), ("000", 31, "140GB"), ("000", 32, "810GB"), ("000", 37, "24GB"),
    ("000", 38, "24GB"), ("000", 39, "batch=2-4"), ("000", 40, "batch=32"), ("000", 41, "batch=16"),
    ("000", 42, "141GB"), ("000", 50, "2-8"), ("000", 54, "85-95%"), ("000", 56, "4xA100"), ("000", 58, "32"),
    ("000", 59, "128"), ("000", 60, "2-3 days"), ("000", 66, "8-64"), ("000", 70, "70-85%"), ("000", 74, "8.75B"),
    ("000", 75, "35GB"), ("000", 76, "5-7 days"), ("000", 82, "16-128"), ("000", 86, "50-70%"),
    ("000", 90, "25.3B"), ("000", 91, "80GB"), ("000", 92, "10-15 days"), ("000", 98, "8-256"),
    ("000", 102, "75-90%"), ("000", 106, "12.7B"), ("000", 107, "80GB"), ("000", 108, "3-5 days"),
    ("000", 114, "x 3"), ("000", 121, "3,500"), ("000", 122, "2,500"), ("000", 123, "4,000"), ("000", 124, "1,200"),
    ("000", 125, "1,500"), ("000", 136, "3,500"), ("000", 140, "20,000"), ("000", 141, "50 million"),
    ("000", 142, "579 days"), ("000", 143, "$19,304"), ("000", 147, "28,000"), ("000", 148, "417 days"),
    ("000", 149, "$26,900"), ("000", 153, "224,000"), ("000", 154, "75%"), ("000", 155, "168,000"),
    ("000", 156, "69 days"), ("000", 157, "$44,863"), ("000", 164, "$16,768"), ("000", 165, "$18,318"),
    ("000", 166, "$18,907"), ("000", 171, "$18,112"), ("000", 172, "$18,907"), ("000", 173, "$21,238"),
    ("000", 178, "$216,006"), ("000", 179, "$239,316"), ("000", 180, "$269,360"), ("000", 181, "$285,936"),
    ("000", 183, "$2.69"), ("000", 188, "50B"), ("000", 189, "300B"), ("000", 190, "100B"), ("000", 191, "100B"),
    ("000", 192, "1T"), ("000", 193, "15T"), ("000", 201, "4-16x"), ("000", 203, "25-50%"), ("000", 207, "80GB"),
    ("000", 208, "40GB"), ("000", 209, "half"), ("000", 211, "10-30%"), ("000", 213, "FP32"), ("000", 217, "2x"),
    ("000", 235, "<1%"), ("000", 241, "50-60%"), ("000", 243, "60%"), ("000", 247, "1.6GB"), ("000", 248, "0.64GB"),
    ("000", 249, "7.7GB"), ("000", 255, "20%"), ("000", 265, "12+"), ("000", 267, "85%"), ("000", 269, "400 days"),
    ("000", 271, "85%"), ("000", 273, "20-30%"), ("000", 277, "2 years"), ("000", 279, "$192"),
    ("001", 9, "1.3B"), ("001", 14, "16 GPUs"), ("001", 15, "32-GPU"),
    ("002", 12, "4 bytes"), ("002", 16, "4 bytes"), ("002", 17, "2 bytes"), ("002", 18, "1 byte"),
    ("002", 19, "0.5 bytes"), ("002", 31, "4 bytes"), ("002", 35, "2 bytes"), ("002", 39, "1.2"), ("002", 41, "70b"),
    ("002", 86, "20 GB"), ("002", 92, "100k"), ("002", 94, "6.4 MB"), ("002", 98, "20–40 GB"), ("002", 102, "20 GB"),
    ("002", 106, "80 GB"), ("002", 110, "20 GB"), ("002", 111, "20–40"), ("002", 112, "20 GB"), ("002", 113, "80 GB"),
    ("002", 115, "140 to 160"), ("002", 136, "100 GB"),
    ("003", 5, "8x"), ("003", 6, "140GB"), ("003", 10, "900 GB/s"), ("003", 13, "15B"), ("003", 14, "141GB"),
    ("003", 17, "64+"),
    ("004", 23, "2 bytes"), ("004", 24, "8 bytes"), ("004", 25, "2 bytes"), ("004", 30, "840GB"),
    ("004", 34, "0.5 bytes"), ("004", 36, "41GB"), ("004", 44, "2.2x"), ("004", 50, "57 percent"),
    ("004", 54, "half the time"), ("004", 62, "600 GB/s"), ("004", 66, "FP8"), ("004", 68, "48GB"),
    ("004", 72, "FP8"), ("004", 88, "20 percent"), ("004", 116, "A100 40GB"), ("004", 120, "2x A100"),
    ("004", 124, "80GB"), ("004", 128, "8x H100"), ("004", 140, "140GB"), ("004", 146, "41GB"),
    ("004", 148, "1.1TB"), ("004", 156, "3.35 TB/s"), ("004", 162, "192GB"), ("004", 168, "12 bytes"),
    ("004", 180, "FP8"),
]
SEED_DIR = Path("/work/shared/seeds")


def _row_lines(rows):
    out = {}
    for r in rows:
        for line in r["line"].split(";"):
            out.setdefault((r["article"], int(line)), []).append(r["id"])
    return out


def test_every_numeric_line_of_the_seeds_has_a_claim_row(rows):
    listed = {(a, n) for a, n, _ in NUMERIC_LINES}
    assert len(listed) == len(NUMERIC_LINES) == 149, "a numeric line was added or lost: count them again"
    covered = _row_lines(rows)
    missing = sorted(listed - set(covered))
    assert not missing, f"numeric lines of the seeds with no claim row: {missing}"
    stray = sorted(set(covered) - listed)
    assert not stray, f"claim rows pointing at lines not in the list: {stray} ({[covered[k] for k in stray]})"
    # every seed contributes, and each seed's rows are judged or say why not
    assert {a for a, _ in covered} == {"000", "001", "002", "003", "004"}


@pytest.mark.skipif(not SEED_DIR.is_dir(), reason="the seed articles are not on this machine")
def test_numeric_lines_point_at_the_seed_text():
    files = {f.name[:3]: f.read_text().split("\n") for f in SEED_DIR.glob("00[0-4]_*.txt")}
    for article, line, token in NUMERIC_LINES:
        assert token.lower() in files[article][line - 1].lower(), (article, line, token)


def test_image_claims_are_marked(rows):
    by = {r["id"]: r for r in rows}
    # seed 002 gave its serving formula and its 168 GB in images: the rows are reconstructions
    for claim_id in ("002-70b-serving", "002-rule-batch32", "002-rule-128k"):
        assert by[claim_id]["from_image"] == "yes"
    assert sum(r["from_image"] == "yes" for r in rows) == 3


# ----------------------------------------------------------------------------- the most favourable reading
def test_fused_adamw_is_the_training_memory_yardstick(table):
    from llmsizing.memory import training_memory

    kw = dict(batch=1, seq=audit.SEQ, recompute="full")
    fused = training_memory("llama-2-70b", optimizer_impl="fused", **kw).total_bytes / 1e9
    foreach = training_memory("llama-2-70b", optimizer_impl="foreach", **kw).total_bytes / 1e9
    # foreach holds one more fp32 tensor per parameter (sqrt of the second moment): 4 bytes x 68.98B = 276 GB,
    # and the allowance grows with it
    assert 4 * 68_976_648_192 / 1e9 < foreach - fused < 1.1 * 4 * 68_976_648_192 / 1e9
    assert round(fused) == 1194 and round(foreach) == 1491                    # issue 26's figures
    assert by_id(table, "000-mem-llama2-70b-b1")["library_central"] == pytest.approx(fused)
    # the fewest H100s fall with the fused step (issue 26: Llama-3-70B 21 -> 18, Llama-2-70B 20 -> 16)
    assert by_id(table, "004-70b-two-nodes")["library"] == 18
    assert by_id(table, "000-intro-70b-gpus")["library_central"] == 16


#: The library look-up each kind of claim must go through (one yardstick per kind, issue 26).
YARDSTICK_CALLS = {
    "training memory": {"_train_gb", "_one_gpu_gb"},
    "model states": {"_states", "_stage_params_billion"},
    "GPU count": {"_min_gpus", "_suffices", "_matrix", "_min_plan"},
    "time": {"_days", "_finetune"},
    "throughput": {"_tps", "_tps_of"},
    "fine-tuning memory": {"_qlora", "_qlora_fits"},
}


def _calls(fn) -> set:
    names = set(fn.__code__.co_names) | {fn.__name__}
    for const in fn.__code__.co_consts:                # a lambda's body may sit in a nested code object
        if hasattr(const, "co_names"):
            names |= set(const.co_names)
    return names


def test_each_kind_of_claim_uses_its_yardstick(table):
    for r in table.itertuples():
        if r.kind in YARDSTICK_CALLS:
            assert _calls(COMPUTE[r.id]) & YARDSTICK_CALLS[r.kind], (r.id, r.kind, _calls(COMPUTE[r.id]))
    # the training-memory yardstick is the step peak with fused AdamW and full recomputation, never the states
    from llmsizing.memory import model_states, training_memory

    mem = table[(table["kind"] == "training memory")].set_index("id")
    assert len(mem) >= 15
    peak = training_memory("mistral-7b", batch=1, seq=audit.SEQ, recompute="full", optimizer_impl="fused")
    assert mem.loc["000-mem-mistral7b-b1", "library_central"] == pytest.approx(peak.total_bytes / 1e9)
    assert mem.loc["000-mem-mistral7b-b1", "library"] > model_states("mistral-7b").total_bytes / 1e9


def test_offload_replaces_wrong_in_kind_when_the_host_holds_the_states(table):
    # Llama 2 70B on 8 H100s: 16 bytes x 68.98B = 1.10 TB of states do not fit 8 x 72 GB ...
    n = 68_976_648_192
    assert 16 * n > 8 * 0.9 * 80e9
    # ... but ZeRO-3 with the optimizer (12 bytes per parameter) on the CPU leaves 4 bytes / 8 per GPU, and the
    # host holds 12 x 68.98B = 0.83 TB < 2 TB
    assert 4 * n / 8 < 0.9 * 80e9 and 12 * n < audit.HOST_BYTES_PER_NODE
    for claim_id in ("000-opt1-days", "000-opt2-cost", "000-cost-llama2-70b-8-days", "000-faq-8-h100"):
        assert by_id(table, claim_id)["verdict"].startswith("needs CPU offload"), claim_id
    # Llama 3.1 405B on 16 H100s (two servers): the optimizer alone is 12 x 405.9B = 4.9 TB > 2 x 2 TB of host
    # memory, so no offload layout runs it: wrong in kind
    assert 12 * 405.9e9 > 2 * audit.HOST_BYTES_PER_NODE
    assert by_id(table, "000-pp-405b-days")["verdict"].startswith("wrong: a llama-3.1-405b training step")
    # 64 H100s hold Llama 2 70B without offload: judged on the number alone
    assert by_id(table, "000-opt3-days")["verdict_kind"] == "off"


def test_mfu_band_reading(table):
    from llmsizing.time_cost import mfu_estimate

    # Mistral 7B on one H100 for 100B tokens: tokens / (peak x MFU / FLOPs per token), at the band's low end
    r = by_id(table, "000-cost-mistral7b-1-days")
    est = mfu_estimate("mistral-7b", gpu="H100 SXM", seq=audit.SEQ)
    flops = audit._run("mistral-7b", 1e11, "H100 SXM", 1).flops_per_token
    slow_days = 1e11 * flops / (989.4e12 * est.low) / 86400
    # the run needs CPU offload, and the claim is too slow, so the host's time is counted (100 times the 1B-token
    # fine-tune's 0.26 days at the library's CPU-Adam rate, 0.29 at Ren et al.'s: _offload_days_by_hand)
    counted = slow_days + 100 * _offload_days_by_hand(published=False)
    assert r["library"] == pytest.approx(counted, rel=1e-3)
    assert 1 < r["claimed"] / (slow_days + 100 * _offload_days_by_hand()) <= BAND     # the same verdict at Ren's
    assert r["library"] > r["library_central"]                 # the claim (262 days) is past the central value
    # and past the slow end of the 80% band too (issue 34: the band is no longer the envelope of every
    # run). Since rows31's refit (Dec 2026, 33 sources) Hopper's band is faster (this run's low MFU 25.4% ->
    # 29.6%): hidden, the slow end is ~194 days, which the 262 miss by 1.35x, beyond BAND; counted, it is
    # ~219 days (194 + 100 x 0.25), 1.19x, within BAND, so the number holds counted only, the reading judged.
    # One outcome asserted, not whichever the ratio gives (before the refit: ~226 hidden, 1.16x, and ~252
    # counted, 1.04x: both held)
    assert r["claimed"] / slow_days > BAND >= r["claimed"] / counted > 1
    assert r["verdict"].endswith("(the number: holds)")


def test_a_gb_its_source_computes_in_gib_is_read_both_ways(rows, table):
    """Seed 004's 41 GB for QLoRA of Llama 3 70B is Unsloth's, whose code divides bytes by 1024**3 and prints
    "GB" (the row's gib_source). The unit is an open setting there: the claim is judged at the more favourable
    of 10**9 bytes and 2**30 bytes, and no other claim gets a GiB reading."""
    from llmsizing.finetune import finetune_memory

    with_gib = {r["id"] for r in rows if r["gib_source"]}
    assert with_gib == {"004-qlora-70b-41gb"}
    assert not table[~table["id"].isin(with_gib)]["reading"].str.contains("GiB").any()
    assert not table[~table["id"].isin(with_gib)]["unit"].str.contains("GiB").any()
    # the yardstick: QLoRA r16, one 2,048-token sequence, full recomputation (chapter 16)
    peak = finetune_memory("llama-3-70b", method="qlora", batch=1, seq=2048, recompute="full").peak_bytes
    gb, gib = peak / 10**9, peak / 2**30
    assert gb / gib == pytest.approx(1.073741824)                      # 2**30 / 10**9
    r = by_id(table, "004-qlora-70b-41gb")
    # whichever reading the rule picks, it is the one whose factor off is smaller (41 lies below both values,
    # so the smaller value, GiB, is the nearer)
    assert 41 < gib < gb
    assert r["library"] == pytest.approx(gib) and r["unit"] == "GiB"
    assert r["library_central"] == pytest.approx(gib)               # the central estimate in the unit judged
    assert r["reading"].endswith(audit.GIB_READING) and not r["depends"]      # a setting, not a method
    assert r["verdict"] == ("holds" if gib / 41 <= BAND else f"off by {gib / 41:.1f}x (too low)")
    # read in decimal GB only, the verdict would be the one of the readings() table's single method
    only = audit.readings("004-qlora-70b-41gb")
    assert list(only["reading"]) == ["QLoRA r16, 2,048 tokens, checkpointing"]
    assert only["library"].iloc[0] == pytest.approx(gb)
    assert only["verdict"].iloc[0] == ("holds" if gb / 41 <= BAND else f"off by {gb / 41:.1f}x (too low)")


def test_unqualified_fine_tuning_is_read_both_ways(table):
    r = by_id(table, "000-faq-finetune-days")
    assert "LoRA" in r["depends"] and "full fine-tuning" in r["depends"]
    assert r["verdict_kind"] == "needs CPU offload"
    assert by_id(table, "000-faq-finetune-usd")["depends"]


def test_unqualified_fine_tuning_shows_each_readings_factor(table):
    """Issue 38: the LoRA reading's verdict carries its factor, not only its kind. Seed 000 claims 3 days for 1B
    tokens of Mistral 7B on one H100; as LoRA the library's run (finetune_time, rank 16, 4,096-token sequences)
    takes d days, judged as every other time is, at the end of its stated range nearest the claim: the slow
    end, ``hours_range[1] / 24`` days (about 2.0 against the central 0.93), so the claim is off by 3 / that,
    too high (the LoRA run is faster even at its slow end)."""
    from llmsizing.finetune_time import finetune_time

    run = finetune_time("mistral-7b", gpu="H100 SXM", method="lora", tokens=1e9, seq=4096, batch=1)
    lora_slow = run.hours_range[1] / 24
    assert run.days < lora_slow < 3
    assert 3 / lora_slow > BAND                                       # a miss the band does not cover
    want = f"off by {3 / lora_slow:.1f}x (too high)"
    r = by_id(table, "000-faq-finetune-days")
    lora = [x for x in r["depends_verdicts"].split(" | ") if x.startswith("LoRA")]
    # the run's own MFU (44% since ew35 priced the memory-bound kernels; 45% before)
    assert 0.40 < run.mfu < 0.50
    assert len(lora) == 1 and lora[0].endswith(f"MFU {run.mfu:.0%}: {want}")
    full = r["depends_verdicts"].split(" | ")[0]
    # full fine-tuning: the claim against the slow end of the calibrated band, days = tokens x FLOPs per token /
    # (dense peak x the band's low MFU), by hand (as test_mfu_band_reading)
    from llmsizing.time_cost import mfu_estimate

    est = mfu_estimate("mistral-7b", gpu="H100 SXM", seq=audit.SEQ)
    slow_days = 1e9 * audit._run("mistral-7b", 1e9, "H100 SXM", 1).flops_per_token / (989.4e12 * est.low) / 86400
    # with the host's exposed time counted (the more favourable reading of a claim that is too slow):
    # _offload_days_by_hand, 0.25 days on top of the band's slow end (0.28 at Ren et al.'s published rate).
    # Since rows31's refit (Dec 2026) the slow end is 1.94 days hidden and 2.19 counted: 3 days miss both
    # ways, by 1.55x and 1.37x (before: 2.26 and 2.52 days; hidden it missed, counted it held, 1.19x)
    counted = slow_days + _offload_days_by_hand(published=False)
    assert 3 / slow_days > 3 / counted > BAND                     # hidden and counted, it misses
    assert 3 / (slow_days + _offload_days_by_hand()) > BAND       # and at the published rate too
    want_full = f"off by {3 / counted:.1f}x (too high)"
    assert full.startswith("full fine-tuning") and audit.OFFLOAD_COUNTED in full
    assert full.endswith(f"needs CPU offload (the number: {want_full})")
    # the old column keeps its form (each reading's kind): old callers that parse it still work
    assert [x.rsplit(": ", 1)[1] for x in r["depends"].split(" | ")] == ["needs CPU offload", "off"]
    ways = audit.readings("000-faq-finetune-days").set_index("reading")
    lora_row = ways[ways.index.str.startswith("LoRA")].iloc[0]
    assert lora_row["library"] == pytest.approx(lora_slow) and lora_row["verdict"] == want
    assert lora_row["library_central"] == pytest.approx(run.days)
    assert ways.iloc[0]["verdict_kind"] == "needs CPU offload" and ways.iloc[0]["number"] == want_full
    assert ways.iloc[0]["library"] == pytest.approx(counted, rel=1e-3)
    assert (table["depends_verdicts"] == "").equals(table["depends"] == "")
    with pytest.raises(ValueError, match="claim_id"):
        audit.readings("no-such-claim")


#: Ren et al. 2021 (ZeRO-Offload, Table 4): DeepSpeed's CPU-Adam steps 10B fp32 parameters in 2.57 s on a DGX-2
#: host whose DRAM peaks at 2 sockets x 6 channels x 2.666 GT/s x 8 B = 255.9 GB/s; CPU Adam is memory-bound, so
#: on a DGX H100 (614.4 GB/s) shared by 8 GPUs each GPU gets 10e9 / 2.57 x 614.4 / 255.9 / 8 = 1.168B params/s.
REN_PARAMS_PER_S_PER_GPU = 10e9 / 2.57 * 614.4 / (2 * 6 * 2.666 * 8) / 8


def _offload_days_by_hand(published: bool = True) -> float:
    """Days the host adds to 1B tokens of Mistral 7B full fine-tuning on one H100 with ZeRO-1 and the optimizer
    on the CPU, by hand: per optimizer step of 64 x 4,096 = 262,144 tokens the CPU's Adam updates every
    parameter, at Ren et al. 2021's published rate scaled to an eighth of a DGX H100 (1.168B parameters/s,
    REN_PARAMS_PER_S_PER_GPU: 6.20 s) or, with ``published=False``, at the library's stated rate (40 GB/s over
    30 bytes per parameter, 1.333B/s, 14% faster: 5.43 s; test_ch7_data_parallel checks that constant against
    the same paper), and the 16-bit weights go back over the H100's host link, PCIe Gen5 x16 at 63.0 GB/s
    (0.23 s); the gradients' one copy
    down (ZeRO-1) hides behind the ~30 s of compute. Both wait on the critical path unless the delayed parameter
    update (Ren et al. 2021, Sec. 5.2) hides them."""
    n = 7_241_732_096                                               # Mistral 7B's parameters (its config)
    rate = REN_PARAMS_PER_S_PER_GPU if published else 40e9 / 30
    per_step = n / rate + n * 2 / PCIE5                              # 6.20 (5.43) s + 0.23 s
    return 1e9 / (64 * 4096) * per_step / 86_400                    # 3,815 steps: 0.28 (0.25) days


#: Each time, throughput and cost claim's run, from the seed's own words (model, GPU, GPUs), independent of the
#: audit's code; None for a per-GPU rate with no run named or a price (review24a H1).
_M7, _L13, _L70, _L405, _H, _A = ("mistral-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-405b", "H100 SXM",
                                  "A100 80GB")
_TABLE_MODELS = {"mistral7b": _M7, "llama2-13b": _L13, "llama2-70b": _L70}
RUNS = {
    "000-dp-mistral7b-days": [(_M7, _A, 4)], "000-tp-70b-days": [(_L70, _H, 8)],
    "000-pp-405b-days": [(_L405, _H, 16)], "000-fsdp-405b-days": [(_L405, _H, 32)],
    # the TPS table's "an H100 / A10 ... processes N tokens per second": a per-GPU rate, no run (review24c M3)
    "000-tps-h100": None, "000-tps-a100": None, "000-tps-h200": None, "000-tps-a10": None,
    "000-tps-rtx4090": None,
    "000-opt1-days": [(_L70, _A, 8)], "000-opt1-cost": [(_L70, _A, 8)], "000-opt2-days": [(_L70, _H, 8)],
    "000-opt2-cost": [(_L70, _H, 8)], "000-opt3-days": [(_L70, _H, 64)], "000-opt3-cost": [(_L70, _H, 64)],
    **{f"000-cost-{key}-{n}-{what}": [(m, _H, n)] for key, m in _TABLE_MODELS.items()
       for n in {"mistral7b": (1, 2, 4), "llama2-13b": (1, 4, 8), "llama2-70b": (8, 16, 32, 64)}[key]
       for what in ("days", "usd", "tps")},
    "000-cost-per-day": None,                                             # a price
    "000-faq-one-h100": [(_L70, _H, 1)], "000-faq-8-h100": [(_L70, _H, 8)], "000-faq-1gpu-years": [(_L70, _H, 1)],
    "000-faq-2gpu-years": [(_L70, _H, 2)], "000-faq-4gpu-years": [(_L70, _H, 4)],
    "000-faq-finetune-days": [(_M7, _H, 1)], "000-faq-finetune-usd": [(_M7, _H, 1)],
    "000-faq-8x50-cheaper": [(_M7, _H, 8), (_M7, _H, 1)],
}


def test_run_gpus_column_is_the_seed_s_runs():
    """Review24c M3: which claims are run-bound is data (``run_gpus`` of seed_claims.csv, dated), and it is the
    run the seed's words name (RUNS, written from the seed, not from the code); a rate has none."""
    import csv

    with open(audit.SEED_CLAIMS_CSV, newline="") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    for cid, runs in RUNS.items():
        assert rows[cid]["run_gpus"] == (";".join(str(n) for _, _, n in runs) if runs else ""), cid
        assert rows[cid]["as_of"], cid
    assert all(not r["run_gpus"] for cid, r in rows.items() if cid not in RUNS)


def test_throughput_rates_and_runs_follow_one_rule(table):
    """Review24c M3: the TPS table's five rows are per-GPU rates, read alike on the fewest GPUs of their type that
    hold a step without offload (so never "needs CPU offload"); a throughput of a named run gets the fit check
    (the cost table's Mistral 7B on one H100 needs offload: 16 bytes x 7.24B = 116 GB > 80 GB)."""
    assert 16 * 7_241_732_096 > 80e9
    for cid in ("000-tps-h100", "000-tps-a100", "000-tps-h200", "000-tps-a10", "000-tps-rtx4090"):
        r = by_id(table, cid)
        assert r["verdict_kind"] != "needs CPU offload" and "the fewest that hold a step" in r["reading"], cid
    assert by_id(table, "000-cost-mistral7b-1-tps")["verdict_kind"] == "needs CPU offload"
    assert "RUN_GPUS_RULE" not in audit.YARDSTICKS["throughput"]
    assert audit.RUN_GPUS_RULE in audit.YARDSTICKS["throughput"]


def test_offloaded_time_is_read_hidden_and_counted(table):
    """Issue 38 (reader24 H1/H2, review24a H1): the host time of an offloaded run can only lengthen it, so for a
    claim that is too slow counting it is the favourable reading. Every time, throughput and cost whose run
    needs CPU offload (found from the library's fit check of the run the seed names, RUNS, not from the
    audit's finding) is read both ways, at one stated batch (audit.OFFLOAD_TOKENS_PER_STEP), whatever its
    verdict; a run that fits without offload is read once."""
    from llmsizing.audit import _findings, _fit

    assert audit.OFFLOAD_TOKENS_PER_STEP == 64 * 4096
    assert f"{64 * 4096:,} tokens per GPU" in audit.OFFLOAD_COUNTED
    found = {c.id: (c, f) for c, f in _findings() if c.kind in ("time", "throughput", "cost")}
    assert set(found) == set(RUNS)                                  # a new claim of these kinds needs its run here
    needing = []
    for cid, runs in RUNS.items():
        if runs is None:
            continue
        c, f = found[cid]
        fits = [_fit(*run) for run in runs]
        if any(reason for reason, _, _ in fits):                    # wrong in kind: no layout holds it
            assert by_id(table, cid)["verdict_kind"] == "wrong in kind", cid
            continue
        counted = [g for g in f.others if audit.OFFLOAD_COUNTED in g.reading]
        if not any(off for _, off, _ in fits):
            assert not counted and by_id(table, cid)["verdict_kind"] != "needs CPU offload", cid
            continue
        needing.append(cid)
        assert counted and by_id(table, cid)["verdict_kind"] == "needs CPU offload", cid
        base = next(g for g in (f, *f.others) if g.reading + f"; {audit.OFFLOAD_COUNTED}" == counted[0].reading)
        # slower: more days and dollars, fewer tokens/s, and a smaller 8-GPU over 1-GPU cost ratio
        lower = c.kind == "throughput" or c.unit == "x"
        assert (counted[0].value < base.value) if lower else (counted[0].value > base.value), cid
    assert len(needing) >= 20
    assert {"000-cost-mistral7b-1-tps", "000-cost-llama2-13b-1-tps", "000-cost-llama2-70b-8-tps",
            "000-faq-8x50-cheaper"} <= set(needing)                 # the four review24a found unread
    # the fine-tune by hand: the band's slow end plus the host's days (since rows31's refit 1.94 + 0.25 =
    # 2.19, so 3 days are off by 1.37x, too high: test_unqualified_fine_tuning_shows_each_readings_factor;
    # before the refit 2.26 + 0.26 = 2.52, and 3 days held)
    r = by_id(table, "000-faq-finetune-days")
    assert audit.OFFLOAD_COUNTED in r["reading"]
    extra = audit.offload_exposed_days("mistral-7b", 1e9, "H100 SXM", 1)
    # the library's CPU-Adam stream is 14% faster than Ren et al.'s published rate scaled (so its host time is
    # 12% shorter: 0.26 against 0.29 days); by hand at the library's rate it agrees to 1%
    assert extra == pytest.approx(_offload_days_by_hand(published=False), rel=0.01)
    assert 0.85 < extra / _offload_days_by_hand() < 0.9
    # seed 000's cost at its own 2.69 USD per GPU-hour: the same days, priced (2.19 x 24 x 2.69 = 141 USD), so
    # the seed's 192 USD are off as its days are, too high (before the refit 2.52 days, 162 USD: it held)
    usd = by_id(table, "000-faq-finetune-usd")
    assert usd["library"] == pytest.approx(r["library"] * 24 * 2.69, rel=1e-6)
    assert 192 / usd["library"] > BAND
    assert usd["verdict"].endswith(f"(the number: off by {192 / usd['library']:.1f}x (too high))")
    # a run that is too fast keeps the host time hidden: Llama 2 70B on 8 H100s, 417 days claimed
    assert audit.OFFLOAD_COUNTED not in by_id(table, "000-opt2-days")["reading"]
    with pytest.raises(ValueError, match="n_gpus"):
        audit.offload_exposed_days("mistral-7b", 1e9, "H100 SXM", 0)


def test_offload_exposed_days_resolves_objects_and_needs_offload():
    """Review24a L3: Model and GPU objects are accepted; a run that fits without offload waits for no host (0.0);
    one that fits in no layout raises."""
    from llmsizing.catalog import get_gpu, get_model

    by_name = audit.offload_exposed_days("mistral-7b", 1e9, "H100 SXM", 1)
    assert audit.offload_exposed_days(get_model("mistral-7b"), 1e9, get_gpu("H100 SXM"), 1) == by_name
    assert audit.offload_exposed_days("mistral-7b", 1e9, "H100 SXM", 8) == 0.0
    # a larger batch adds less host time per token, a smaller one more
    assert (audit.offload_exposed_days("mistral-7b", 1e9, "H100 SXM", 1, tokens_per_step=128 * 4096) < by_name
            < audit.offload_exposed_days("mistral-7b", 1e9, "H100 SXM", 1, tokens_per_step=32 * 4096))
    with pytest.raises(ValueError, match="n_gpus"):
        audit.offload_exposed_days("llama-3.1-405b", 1e9, "H100 SXM", 1)
    with pytest.raises(ValueError, match="unknown model|model"):
        audit.offload_exposed_days("no-such-model", 1e9, "H100 SXM", 1)


def test_offload_batch_flip_of_the_fine_tune():
    """Review24a M3. Since rows31's refit (Dec 2026) seed 000's fine-tune "3 days" is off at the stated
    262,144 tokens per GPU per step even with the host's time counted: the band's slow end, 1.94 days hidden,
    plus 0.25 days of host time (_offload_days_by_hand) is 2.19 days, and 3 / 2.19 = 1.37 > 1.25. A larger
    batch only hides more of the host's time and shortens the run, so no larger batch makes it hold: the flip
    upward is None. A smaller one adds host time in proportion, 0.25 x 64 / k days at k sequences per step,
    and the claim holds once the run reaches 3 / 1.25 = 2.4 days: 0.25 x 64 / k >= 2.4 - 1.94 = 0.46, so
    k <= about 35 sequences. (Before the refit it held at the stated batch, 2.26 + 0.26 = 2.52 days, and
    stopped holding above about 490K tokens: the flip upward was 487,424 tokens, 119 sequences.)"""
    from llmsizing.audit_runs import offload_batch_flip
    from llmsizing.time_cost import mfu_estimate

    assert offload_batch_flip("000-faq-finetune-days") is None      # larger batches: further off, never holds
    low = offload_batch_flip("000-faq-finetune-days", larger=False)
    est = mfu_estimate("mistral-7b", gpu="H100 SXM", seq=audit.SEQ)
    slow_days = 1e9 * audit._run("mistral-7b", 1e9, "H100 SXM", 1).flops_per_token / (989.4e12 * est.low) / 86400
    k_by_hand = 64 * _offload_days_by_hand(published=False) / (3 / BAND - slow_days)
    assert 34 < k_by_hand < 36
    assert low % audit.SEQ == 0 and abs(low // audit.SEQ - k_by_hand) <= 1
    r = by_id(audit_table(), "000-faq-finetune-days")
    slow_hidden = r["library"] - audit.offload_exposed_days("mistral-7b", 1e9, "H100 SXM", 1)
    assert slow_hidden == pytest.approx(slow_days, rel=1e-3)
    at = {k: slow_hidden + audit.offload_exposed_days("mistral-7b", 1e9, "H100 SXM", 1, tokens_per_step=k)
          for k in (low, low + audit.SEQ)}
    assert 3 / at[low] <= BAND < 3 / at[low + audit.SEQ]            # the bracket flips exactly there
    assert offload_batch_flip("000-opt2-days") is None              # no offload: the batch does not enter
    with pytest.raises(ValueError, match="claim_id"):
        offload_batch_flip("no-such-claim")


def test_offload_batch_flip_caps_the_edge_it_cannot_price():
    """Review24c M1: 256 x 64 sequences per GPU for Meta's 405B under ZeRO-3 are 16,384 micro-batches x 126
    layers of weight gathers per step, more than comm counts exactly; the edge is halved until it prices, and
    the 405B days (a verdict no priced batch moves) keep their promise of None, both ways."""
    from llmsizing.audit_runs import offload_batch_flip

    assert 16_384 * 126 == 2_064_384                                 # the gathers comm refused, by hand
    assert offload_batch_flip("000-fsdp-405b-days") is None
    assert offload_batch_flip("000-fsdp-405b-days", larger=False) is None


def test_judge_run_matches_the_table():
    """Review24a L1: an ad-hoc claim judged by the library's one reading, as a seed claim is: the same run and
    number as a seed row gives that row's verdict and value."""
    from llmsizing.audit_runs import judge_run

    t = audit_table().set_index("id")
    for cid, unit, claimed in (("000-cost-mistral7b-1-days", "days", 262),
                               ("000-cost-mistral7b-1-usd", "usd", 16768),
                               ("000-cost-mistral7b-1-tps", "tokens/s", 3500)):
        j = judge_run("mistral-7b", 1e11, "H100 SXM", 1, claimed, unit=unit)
        best = j[j["judged"]].iloc[0]
        assert best["verdict"] == t.loc[cid, "verdict"] and best["library"] == pytest.approx(t.loc[cid, "library"])
    with pytest.raises(ValueError, match="unit"):
        judge_run("mistral-7b", 1e11, "H100 SXM", 1, 3, unit="weeks")


@pytest.mark.parametrize("v, number, short", [
    ("holds", "holds", "holds"),
    ("off by 2.0x (too low)", "off by 2.0x (too low)", "off by 2.0x (too low)"),
    ("needs CPU offload: ZeRO-1 with the optimizer on the CPU (the number: off by 1.5x (too high))",
     "off by 1.5x (too high)", "needs CPU offload (the number: off by 1.5x (too high))"),
    ("wrong: it does not fit (the number alone: holds)", "holds", "wrong in kind (the number: holds)"),
])
def test_verdict_number_and_short(v, number, short):
    assert audit.verdict_number(v) == number and audit.verdict_short(v) == short


def test_seed_arithmetic_by_hand():
    """Chapter 14's two sums on seed 000's own numbers, from the library (no formula in the notebook)."""
    from llmsizing.audit_readings import seed_days_at_throughput, seed_gpu_days_usd

    # 100B tokens at 3,500 tokens/s: 28,571,428.6 s, / 86,400 s = 330.7 days (the table says 262)
    assert seed_days_at_throughput(1e11, 3500) == pytest.approx(330.69, abs=0.01)
    # 8 GPUs x 50 days = 400 GPU-days = 9,600 GPU-hours, x 2.69 USD = 25,824 USD; the same for 1 x 400
    assert seed_gpu_days_usd(8, 50) == pytest.approx(25_824) == seed_gpu_days_usd(1, 400, "H100 SXM")
    assert seed_gpu_days_usd(1, 1, "A100 80GB") == pytest.approx(24 * 1.39)
    for call, word in ((lambda: seed_days_at_throughput(1e11, 0), "tokens_per_s"),
                       (lambda: seed_days_at_throughput(-1, 3500), "tokens"),
                       (lambda: seed_gpu_days_usd(0, 50), "n_gpus"), (lambda: seed_gpu_days_usd(8, -1), "days"),
                       (lambda: seed_gpu_days_usd(8, 50, "V100"), "gpu")):
        with pytest.raises((ValueError, TypeError), match=word):
            call()


def test_a100_band_for_llama2_70b_is_the_calibrated_range():
    """Issue 38: the A100's band for Llama 2 70B is the central estimate times the stored 80% factors of Ampere
    (data/mfu_inputs_model.csv, read by hand: the one end-to-end model since Dec 2026, issue 34), nothing added.
    MosaicML's MPT 70B on 64 A100s (llm-foundry benchmark table: 166 model TFLOP/s per GPU with activation
    checkpointing) kept its GPUs about 166 x 4/3 / 312 = 71% busy counting the recomputed forward. Since rows31's
    refit on 33 sources (Dec 2026) Ampere's stored high factor is 1.3412 (1.25 before) and the band's top for
    this run about 79% (64% after whole34's refit on 31 sources, 69% before it), so chapter 14 says such a run,
    keeping its activations, would land below the band's top, inside the band (before: above it)."""
    from llmsizing.mfu import mfu_estimate, published_runs
    from llmsizing.time_cost import training_time

    import csv
    from pathlib import Path

    with open(Path(__file__).resolve().parents[1] / "data" / "mfu_inputs_model.csv", newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if (r["generation"], r["dtype"]) == ("ampere", "bf16"))
    est = mfu_estimate("llama-2-70b", gpu="A100 80GB", seq=2048)
    assert est.low == pytest.approx(est.mfu * float(row["low"])) and est.high == pytest.approx(
        est.mfu * float(row["high"]))
    runs = published_runs().set_index("run")
    mpt = runs.loc["MPT 70b (llm-foundry benchmark), 64 x A100 80GB, seq 2,048"]
    assert mpt["implied_mfu"] == pytest.approx(166 / 312, rel=0.01)
    hfu = training_time("mpt-bench-70b", tokens=1e9, gpu="A100 80GB", n_gpus=64, seq=2048, recompute="full",
                        mfu=mpt["implied_mfu"]).hfu
    assert hfu == pytest.approx(166 * 4 / 3 / 312, rel=0.02)
    assert float(row["high"]) == pytest.approx(1.3412)             # read by hand from the stored row
    assert hfu < est.high - 0.03                      # chapter 14: "would land below the band's top"


def test_paraphrases_fixed(table):
    # seed 000's "model size (GB)" is the fp32 size (its FP16 parameters are "model size / 2"): 4 x 4 = 16 bytes
    assert by_id(table, "000-rule-4x")["claimed"] == 16 and by_id(table, "000-rule-4x")["verdict"] == "holds"
    # "might fit on a handful" is an upper bound
    r = by_id(table, "001-1p3b-handful")
    assert r["bound"] == "at most" and r["verdict"] == "holds"


def test_new_claims_by_hand(table):
    assert by_id(table, "000-grad-accum-batch")["library"] == 8 * 32          # not the 32 of "batch 32"
    assert by_id(table, "000-grad-accum-batch")["verdict"] == "off by 8.0x (too low)"
    # full recomputation runs the forward again: (2 + 4 + 2) / (2 + 4) = 4/3 of the FLOPs (attention included)
    assert by_id(table, "000-checkpointing-slowdown")["library"] == pytest.approx(4 / 3, rel=0.01)
    assert by_id(table, "000-checkpointing-slowdown")["verdict"] == "holds"
    # 8 GPUs x 50 days = 1 GPU x 400 days: the same GPU-hours, so at one MFU not cheaper (review24a H1). But one
    # H100 holds the Mistral 7B step only with CPU offload, and with its host's time counted (the more favourable
    # reading of this claim) the 1-GPU run is longer: ratio = D / (D + 100 x the fine-tune's host days), D the
    # 1-GPU run's central days (the 8-GPU run fits without offload and, at the same MFU, costs the same D)
    from llmsizing.time_cost import training_time

    d1 = training_time("mistral-7b", tokens=1e11, gpu="H100 SXM", n_gpus=1, seq=audit.SEQ).days
    d8 = training_time("mistral-7b", tokens=1e11, gpu="H100 SXM", n_gpus=8, seq=audit.SEQ).days
    assert 8 * d8 == pytest.approx(d1, rel=0.01)                       # the hidden reading: 1.00, "off"
    by_hand = d1 / (d1 + 100 * _offload_days_by_hand(published=False))
    r = by_id(table, "000-faq-8x50-cheaper")
    assert r["library"] == pytest.approx(by_hand, rel=0.01) and r["library"] < 1 / 1.1
    assert r["verdict_kind"] == "needs CPU offload" and r["verdict"].endswith("(the number: holds)")
    assert audit.OFFLOAD_COUNTED in r["reading"]
    assert len(table[table["id"].str.startswith("000-matrix-")]) == 12


def test_matrix_reading_times_the_run_on_the_claims_gpus(table):
    """read37e: a recommendation-matrix row names the layout of the fewest GPUs that hold the step (96
    H100s for Llama 3.1 405B) and a run time; the time is the run on the matrix's own count (256), so the
    reading must say so. By hand: F = 6 N_mm + 12 L s a d at s = 4,096 (N_mm = N - V h, the input embedding a
    lookup), 15T tokens on 256 H100s of 989.4 TFLOP/s dense BF16 at the calibrated MFU (an input from
    chapter 10's fit): days = 15e12 F / (256 x 989.4e12 x MFU) / 86,400, about 3,400 at an MFU near 50%; on
    96 GPUs it would be 256/96 = 2.7 times that."""
    from llmsizing import get_model
    from llmsizing.time_cost import mfu_estimate

    reading = by_id(table, "000-matrix-405b-15t-h100")["reading"]
    assert "TP8+SP PP1 DP12" in reading                                  # the 96 GPUs that hold the step
    assert "the run on 256 H100 SXM would take" in reading, reading
    m = get_model("llama-3.1-405b")
    n_mm = m.n_params - m.vocab * m.hidden
    f = 6 * n_mm + 12 * m.layers * 4096 * m.heads * m.head_dim
    mfu = mfu_estimate("llama-3.1-405b", gpu="H100 SXM", seq=4096).mfu
    days = 15e12 * f / (256 * 989.4e12 * mfu) / 86400
    assert f"would take {days:,.0f} days" in reading, (days, reading)


# ----------------------------------------------------------------------------- counting without double counting
def test_headline_counts_by_seed(table):
    total = audit.verdict_counts(table)
    head = audit.verdict_counts(table, headline=True)
    repeated = (table["counted_with"] != "").sum()
    assert repeated >= 10 and sum(head.values()) == len(table) - repeated
    assert sum(total.values()) == len(table)
    for r in table[table["counted_with"] != ""].itertuples():
        assert r.counted_with in set(table["id"]), r.id
    per_seed = audit.verdict_counts(table, by="article", headline=True)
    assert list(per_seed.index) == ["000", "001", "002", "003", "004"]
    assert list(per_seed.columns) == [*audit.KINDS, "total"]
    assert per_seed["total"].sum() == sum(head.values())
    assert (per_seed[list(audit.KINDS)].sum(axis=1) == per_seed["total"]).all()
    with pytest.raises(ValueError, match="by"):
        audit.verdict_counts(table, by="topic")


def test_cost_rows_follow_their_days_rows(table):
    # a cost table's total is its days x its cost per day: same ratio to the library as the days row
    t = table.set_index("id")
    for r in t[t.index.str.match(r"000-cost-.*-usd")].itertuples():
        days = t.loc[r.counted_with]
        assert r.counted_with.endswith("-days")
        assert r.verdict_kind == days["verdict_kind"], r.Index


# ----------------------------------------------------------------------------- chapters 13 and 14 agree
def test_chapter_13_gives_the_audits_verdicts(table):
    import json
    import re

    nb = json.loads((Path(__file__).resolve().parents[1] / "book" / "13_case_studies.ipynb").read_text())
    source = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    # the cells and the module they call for the case studies' sentences (issue 38)
    source += (Path(__file__).resolve().parents[1] / "src" / "llmsizing" / "case_study_prose.py").read_text()
    asked = set(re.findall(r"judged\(\"(\d{3}-[a-z0-9.-]+)\"\)", source))
    assert {"000-faq-finetune-days", "000-faq-finetune-usd"} <= asked
    shown = {}
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            for m in re.finditer(r"audit (\d{3}-[a-z0-9.-]+): (holds|needs CPU offload|off|wrong in kind)\b",
                                 "".join(o.get("text", ""))):
                shown[m.group(1)] = m.group(2)
    assert set(shown) == asked, "chapter 13 prints one audit verdict per claim it judges"
    t = table.set_index("id")
    for claim_id, kind in shown.items():
        assert t.loc[claim_id, "verdict_kind"] == kind, claim_id


def test_judged_and_offload_verdict_inputs():
    assert audit.judged("000-faq-finetune-days")["claimed"] == 3
    for bad in ("000-nope", 3, "000-flash-attention"):           # unknown, not a string, not recomputed
        with pytest.raises(ValueError, match="claim_id"):
            audit.judged(bad)
    v = verdict(3, 2.6, offload="ZeRO-1 puts the optimizer on the CPU")
    assert v == "needs CPU offload: ZeRO-1 puts the optimizer on the CPU (the number: holds)"
    assert audit.verdict_kind(v) == "needs CPU offload"
    # a reason (wrong in kind) wins over an offload note
    assert verdict(3, 2.6, reason="no layout", offload="x").startswith("wrong: no layout")
    with pytest.raises(TypeError, match="offload"):
        verdict(3, 2.6, offload=1)
    assert set(audit.READINGS) == set(audit.YARDSTICKS)


def test_one_rule_for_every_memory_ratio_and_every_ratio_of_runs(table):
    """Issue 38, round 3: the recomputation setting is read both ways for EVERY memory ratio (full is the
    central reading, the yardstick's), and every ratio of two runs at each side's central calibrated MFU."""
    from llmsizing.memory import training_memory
    from llmsizing.time_cost import mfu_estimate

    def peak(batch, recompute, **kw):
        return training_memory("mistral-7b", batch=batch, seq=4096, recompute=recompute,
                               optimizer_impl="fused", **kw).total_bytes

    ga_full = peak(8, "full", grad_accum=32) / peak(32, "full")
    assert by_id(table, "000-grad-accum")["library_central"] == pytest.approx(ga_full)
    assert by_id(table, "000-grad-accum-savings")["library_central"] == pytest.approx(100 * (1 - ga_full))
    mp_full = peak(32, "full", precision="fp32") / peak(32, "full")
    assert by_id(table, "000-mixed-precision-2x")["library_central"] == pytest.approx(mp_full)
    # "2x savings" is nearer without recomputation (activations, which halve, dominate): judged there
    mp_none = peak(32, "none", precision="fp32") / peak(32, "none")
    assert by_id(table, "000-mixed-precision-2x")["library"] == pytest.approx(mp_none)
    assert by_id(table, "000-mixed-precision-2x")["reading"].endswith("no recomputation")
    for cid in ("000-grad-accum", "000-grad-accum-savings", "000-mixed-precision-2x", "004-fp8-less-vram"):
        assert by_id(table, cid)["depends"] == ""                 # a setting, not a method
    # the B200 over the H100: each at its calibrated MFU; the calibration has no B200 run, so both get the
    # same MFU and the ratio is that of the dense BF16 peaks (2,250 and 989.4 TFLOP/s)
    b, h = (mfu_estimate("llama-3-70b", gpu=g, seq=4096).mfu for g in ("B200", "H100 SXM"))
    assert b == pytest.approx(h)
    assert "RATIO_MFU" not in dir(audit)


def test_checkpointing_memory_is_read_as_mixed_precision_is(table):
    """Seed 000's "30-40% memory" for checkpointing, like its "2x" for mixed precision, names no model or
    batch: both are read at Mistral 7B and batch 32, the batch of the seed's techniques section (issue 38,
    round 3)."""
    from llmsizing.memory import training_memory

    def peak(seq, recompute):
        return training_memory("mistral-7b", batch=32, seq=seq, recompute=recompute,
                               optimizer_impl="fused").total_bytes


    r = by_id(table, "000-checkpointing")
    assert r["library_central"] == pytest.approx(100 * (1 - peak(4096, "full") / peak(4096, "none")))
    # judged at 2,048 tokens, nearer the claim
    assert r["library"] == pytest.approx(100 * (1 - peak(2048, "full") / peak(2048, "none")))
    assert r["bound"] == "range" and r["kind"] == "memory ratio"
    assert "000-checkpointing" not in set(not_computed_claims()["id"])


def test_offload_batch_flip_leaves_no_state():
    """A speed-up must not make a result depend on what ran first: the table after a batch search is the table
    of a fresh computation, bit for bit (the cache of findings is keyed by the offload batch)."""
    import pandas as pd

    from llmsizing import audit_readings
    from llmsizing.audit import _findings_at
    from llmsizing.audit_runs import offload_batch_flip

    before = audit_table()
    offload_batch_flip("000-faq-finetune-usd", larger=False)
    assert audit_readings._TOKENS_PER_STEP == audit.OFFLOAD_TOKENS_PER_STEP
    _findings_at.cache_clear()
    pd.testing.assert_frame_equal(audit_table(), before, check_exact=True)


def test_findings_are_keyed_by_the_sequence_length_too():
    """Review24c L4: a first call made inside at_seq(2048) must not be cached as the central reading."""
    import pandas as pd

    from llmsizing import audit_readings
    from llmsizing.audit import _findings, _findings_at

    _findings_at.cache_clear()
    with audit_readings.at_seq(2048):
        inside = _findings()
    central = _findings()
    assert central is not inside
    _findings_at.cache_clear()
    pd.testing.assert_frame_equal(audit_table(), audit_table(), check_exact=True)


def test_fragile_offload_verdicts_flip_where_they_say():
    """Review24c M2/L2: the offloaded verdicts that change within half to twice the stated 64 sequences, each
    checked at its flip batch and one sequence before it (the kind of the verdict or of its number's score
    changes, not its wording); seed 000's fine-tune days are one of them (since rows31's refit it holds from 35
    sequences down, worked by hand in test_offload_batch_flip_of_the_fine_tune, which is above 32; before, it
    stopped holding above about 490K tokens = 119 sequences, below 128), and "8 x 50 is
    cheaper", whose wording alone moves at 40 sequences, is not."""
    from llmsizing.audit_readings import at_offload_batch
    from llmsizing.audit_runs import fragile_offload_verdicts, offload_batch_flip
    from llmsizing.audit_verdict import verdict_number

    fragile = {d["id"]: d for d in fragile_offload_verdicts(2.0)}
    assert "000-faq-finetune-days" in fragile and "000-faq-8x50-cheaper" not in fragile
    assert offload_batch_flip("000-faq-8x50-cheaper", larger=False) is None

    def key(cid, seqs):
        with at_offload_batch(seqs * audit.SEQ):
            r = by_id(audit_table(), cid)
        return r["verdict_kind"], audit.verdict_kind(verdict_number(r["verdict"]))

    for cid, d in fragile.items():
        for side, step in (("above", -1), ("below", 1)):
            if d[side] is not None:
                assert 32 <= d[side] <= 128
                assert key(cid, d[side]) != key(cid, 64) == key(cid, d[side] + step), (cid, side)
    with pytest.raises(ValueError, match="factor"):
        fragile_offload_verdicts(0.5)


def test_a_counted_reading_names_the_batch_it_was_counted_at():
    """Review24c L1: inside at_offload_batch(k) a counted reading says k tokens per GPU, not the stated 262,144
    (32 sequences of 4,096 = 131,072 tokens)."""
    from llmsizing.audit_readings import at_offload_batch, offload_counted

    assert offload_counted(64 * 4096) == audit.OFFLOAD_COUNTED
    with at_offload_batch(32 * 4096):
        r = by_id(audit_table(), "000-faq-finetune-days")
    assert "131,072 tokens per GPU" in r["reading"] and audit.OFFLOAD_COUNTED not in r["reading"]
