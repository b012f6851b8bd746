"""Chapter 2's opening says how many seed articles undercount a model's training states, glued from the audit
(it was typed "three", which the audit does not support). Worked by hand from the articles: seed 000 gives
Adam's state as "model size / 2" with the fp32 model size, 2 bytes a parameter where AdamW keeps 12 (its
moments and master copy); seed 002 gives a 10B model's Adam states as 10B x 4 bytes x 2 = 80 GB, leaving out
the 40 GB fp32 master copy (120 GB). Seed 004's 2 + 12 + 2 = 16 holds; seeds 001 and 003 state none."""
import json
from pathlib import Path

from llmsizing.audit import audit_table, verdict_counts

BOOK = Path(__file__).resolve().parents[1] / "book"


def test_two_seed_articles_undercount_the_states():
    df = audit_table()
    states = verdict_counts(df[df["kind"] == "model states"], by="article")
    off = states[(states["off"] + states["wrong in kind"]) > 0]
    assert sorted(off.index) == ["000", "002"]
    ratio = df.set_index("id")["ratio"]
    assert abs(ratio["000-rule-adam-state"] - 2 / 12) < 1e-9 or abs(ratio["000-rule-adam-state"] - 12 / 2) < 1e-9
    assert abs(ratio["002-10b-optimizer"] - 80 / 120) < 0.01 or abs(ratio["002-10b-optimizer"] - 1.5) < 0.01


def test_the_opening_glues_the_count():
    nb = json.loads((BOOK / "02_bytes_per_parameter.ipynb").read_text())
    opening = "".join(nb["cells"][2]["source"])      # (after the first code cell, which binds it)
    assert "{eval}`ch2_seeds_off` of our five seed articles" in opening and "three of our" not in opening
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert 'glue("ch2_seeds_off"' in code
