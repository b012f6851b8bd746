"""Sliding-window layers in vLLM's KV capacity (serve_engine.blocks_per_sequence, kv_capacity_sequences;
chapters 3 and 15; reader25a M3). The blocks a sequence holds are derived by hand from the configs:
gpt-oss-120b has 36 attention layers of equal KV width, 18 of them windowed at 128 tokens (its config.json's
``sliding_window: 128`` and alternating ``layer_types``); Mistral 7B v0.1 windows all 32 layers at 4,096. The
sequence counts are relations to the capacity the code computes (``cap.blocks``: how many blocks a GPU holds
is chapter 15's test), not hand capacities (review25a L7)."""

import pytest

from llmsizing.serve_engine import blocks_per_sequence, kv_capacity_sequences, kv_capacity_tokens


def test_a_windowed_layer_holds_only_its_window():
    # Mistral 7B v0.1: every layer keeps the last 4,096 tokens, 4096 / 16 = 256 blocks whatever the context
    assert blocks_per_sequence("mistral-7b", 32768) == 256
    assert blocks_per_sequence("mistral-7b", 1000) == 63           # ceil(1000 / 16)
    # gpt-oss-120b at 128K: half the layers hold 131,072 tokens, half 128: (131072 + 128) / 2 / 16 = 4,100
    assert blocks_per_sequence("gpt-oss-120b", 131072) == 4100


def test_sequences_count_the_window_not_every_token():
    cap = kv_capacity_tokens("gpt-oss-120b", "H100 SXM", weights="mxfp4-moe")
    # the logged figure prices every layer for every token: under one 128K sequence's 131,072 ...
    assert cap.tokens < 131072
    # ... yet one 128K sequence holds 4,100 blocks and fits (the windowed half keeps 128 tokens)
    assert cap.blocks >= 4100
    assert kv_capacity_sequences("gpt-oss-120b", "H100 SXM", 131072, weights="mxfp4-moe") == 1
    # all layers windowed: a 32K sequence costs what a 4K one does
    m = kv_capacity_tokens("mistral-7b", "H100 SXM")
    assert kv_capacity_sequences("mistral-7b", "H100 SXM", 32768) == m.blocks // 256 \
        == kv_capacity_sequences("mistral-7b", "H100 SXM", 4096)


def test_a_model_without_windows_divides_its_tokens():
    cap = kv_capacity_tokens("llama-3-8b", "H100 SXM")
    assert kv_capacity_sequences("llama-3-8b", "H100 SXM", 8192) == cap.tokens // 8192


def test_bad_context_is_refused_by_name():
    with pytest.raises((ValueError, TypeError), match="context"):
        blocks_per_sequence("llama-3-8b", 0)
