"""The answers issue 38's widget-move work keeps (branch w100): chapter 15's fleet search keeps its Poisson
quantiles and a model's quantised weight bytes and lookup tables per (model, dtype); chapter 10's MoE
training-time chart keeps the fewest-GPU layout it asks once per GPU count. A kept answer must be keyed on
what it depends on (a changed model is a new answer) and must not swallow the checks of bad input."""

import dataclasses

import pytest

from llmsizing import inference, moe_default, stages
from llmsizing.catalog import get_gpu, resolve_model
from llmsizing.serve_fleet import _poisson_quantile, poisson_quantile


def test_poisson_quantile_kept_and_still_checked():
    _poisson_quantile.cache_clear()
    # Poisson(2): P(<=3) = e^-2 (1 + 2 + 2 + 4/3) = 0.857, P(<=4) = 0.857 + e^-2 2/3 = 0.947 -> 95% is 5
    assert poisson_quantile(2.0, 95) == 5
    assert poisson_quantile(2, 95) == 5                  # an int mean is the same question
    info = _poisson_quantile.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="mean"):
            poisson_quantile(bad, 95)
    with pytest.raises(ValueError, match="percentile"):
        poisson_quantile(2.0, 100)


def test_quantised_weight_bytes_kept_per_model_value():
    m = resolve_model("llama-3-8b", moe=True)
    inference._mixed_bytes.cache_clear()
    first = inference.weights_bytes(m, "int4")
    assert inference.weights_bytes(m, "int4") == first
    assert inference._mixed_bytes.cache_info().hits == 1
    # 32 -> 16 layers: the blocks' int4 matrices halve, the bf16 embeddings and head stay (a stale kept answer
    # would give `first` again)
    half = dataclasses.replace(m, layers=16)
    blocks_int4 = (m.block_params - half.block_params) * 0.5        # 16 layers' numbers, half a byte each
    assert inference.weights_bytes(half, "int4") < first
    assert first - inference.weights_bytes(half, "int4") == pytest.approx(blocks_int4, rel=0.01)
    with pytest.raises(ValueError, match="dtype"):
        inference.weights_bytes(m, "int3")


def test_lookup_tables_kept_and_per_model():
    m = resolve_model("llama-3-8b", moe=True)                 # untied: a 128,256 x 4,096 input embedding
    assert inference.lookup_table_rows(m, "bf16") == [(128256, 4096 * 2)]
    tied = dataclasses.replace(m, tied_embeddings=True)
    assert inference.lookup_table_rows(tied, "bf16") == []     # the table is the head: read in full


def test_fewest_moe_layout_asked_once(monkeypatch):
    calls = []

    def fake_min_gpus(*args, **kwargs):
        calls.append(kwargs)
        if kwargs["seq"] > 10**6:
            raise ValueError("seq too long for any layout")
        return type("P", (), {"parallel": "layout"})()

    monkeypatch.setattr(moe_default, "min_gpus", fake_min_gpus)     # (_kept_fewest's home since session 24)
    stages._kept_fewest.cache_clear()
    m, g = resolve_model("mixtral-8x7b", moe=True), get_gpu("H100 SXM")
    for _ in range(3):
        assert stages._kept_fewest(m, g, 4096, "none", "bf16-mixed", (("mtp_depth", 0),)) == "layout"
    assert len(calls) == 1 and calls[0]["mtp_depth"] == 0
    assert stages._kept_fewest(m, g, 2 * 10**6, "none", "bf16-mixed") is None   # no layout: None, kept too
    assert stages._kept_fewest(m, g, 2 * 10**6, "none", "bf16-mixed") is None
    assert len(calls) == 2
    stages._kept_fewest.cache_clear()
