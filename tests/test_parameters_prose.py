"""Chapter 1's sentences (src/llmsizing/parameters_prose.py): counts worked by hand from the published shapes,
the table's agreements added up, and a reading that raises when the numbers contradict it."""

from __future__ import annotations

import pytest

import llmsizing.parameters_prose as pp


@pytest.fixture(scope="module")
def published():
    return pp.published_counts_prose()


def test_gpt3_by_hand(published):
    """GPT-3 175B (Brown et al. 2020, Table 2.1: 96 layers, width 12,288; vocabulary 50,257 tied, 2,048
    learned positions). A layer: 12 h^2 weights + 13 h biases and norms = 1,812,099,072; times 96 =
    173,961,510,912; plus 50,257 x 12,288 = 617,558,016 (embedding), 2,048 x 12,288 = 25,165,824 (positions)
    and 2 x 12,288 (final norm) = 174,604,259,328; positions 0.0144% of it."""
    t = published.values
    assert t["gpt3_n"] == "174,604,259,328"
    assert (t["gpt3_pos"], t["gpt3_pos_share"]) == ("25,165,824", "0.014%")


def test_the_table_adds_up(published):
    """Every model agrees exactly, after rounding, or is the one recorded miss."""
    check, t = published.data["table"], published.values
    assert int(t["n_exact"]) + int(t["n_rounded"]) + 1 == int(t["n_models"]) == len(check)
    assert check.loc[t["miss_name"], "agrees"] == "NO"


def test_moe_counts_by_hand():
    """Mixtral-8x7B's expert: gate, up and down projections, 3 x 4,096 x 14,336 = 176,160,768 parameters.
    DeepSeek-V3's vocabulary matrix: 129,280 x 7,168 = 926,679,040, 0.93B."""
    t = pp.moe_counts_prose().values
    assert t["mx_expert"] == "176,160,768"
    assert t["ds_vocab"] == "0.93B"


def test_a_reading_the_numbers_contradict_raises(monkeypatch):
    """Were DeepSeek's MTP module published as 11.0B, "the MTP figures round from the count" would be false."""
    monkeypatch.setattr(pp, "DS_MTP_PUBLISHED", 11.0e9)
    with pytest.raises(pp.ProseOutOfDate, match="chapter 1's prose says the MTP figures round"):
        pp.moe_counts_prose()
