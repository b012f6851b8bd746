"""Causal attention under a document mask, sharded as Llama 3 shards context parallelism (issue 34).

Dubey et al. 2024 (arXiv:2407.21783), Sec. 3.3.2: the sequence is cut into 2 x CP chunks, rank i taking the
i-th and the (2 x CP - 1 - i)-th, and documents packed in one sequence are masked from each other. WLB-LLM
(Wang et al. 2025, OSDI, Sec. 3.1) measured, in a 405B job at 128K with TP 8, CP 16, PP 16, that this leaves
the attention work uneven across ranks. Every number below is counted by hand.
"""

import random

import pytest

from llmsizing.flops import document_mask_cp_pairs


def test_two_documents_on_two_ranks_by_hand():
    # 16 tokens, cp = 2: chunks of 4, rank 0 takes chunks 0 and 3, rank 1 chunks 1 and 2. Documents of 4 and
    # 12 tokens: queries 0-3 attend to 1, 2, 3, 4 keys; queries 4-15 to 1 .. 12.
    # rank 0: (1 + 2 + 3 + 4) + (9 + 10 + 11 + 12) = 52; rank 1: (1 + 2 + 3 + 4) + (5 + 6 + 7 + 8) = 36
    assert document_mask_cp_pairs([4, 12], 2) == (52, 36)


def test_one_document_is_the_causal_mask_balanced():
    # one document of 16: rank 0 (1..4) + (13..16) = 10 + 58 = 68, rank 1 (5..8) + (9..12) = 26 + 42 = 68;
    # in general s (s + 1) / (2 cp) each: 16 x 17 / 4 = 68
    assert document_mask_cp_pairs([16], 2) == (68, 68)
    assert document_mask_cp_pairs([131072], 16) == (131072 * 131073 // 32,) * 16


def test_no_rank_exceeds_the_causal_mask():
    # a query under a document mask sees a subset of the keys the causal mask gives it, so no rank's pairs
    # exceed the causal mask's, whatever the packing (random packings of 256 tokens over 4 ranks)
    rng = random.Random(34)
    full = 256 * 257 // 8
    for _ in range(200):
        docs, left = [], 256
        while left:
            docs.append(rng.randint(1, left))
            left -= docs[-1]
        got = document_mask_cp_pairs(docs, 4)
        assert max(got) <= full and sum(got) == sum(d * (d + 1) // 2 for d in docs)


@pytest.mark.parametrize("docs, cp", [([4, 11], 2), ([], 2), ([0, 16], 2), ([16], 0)])
def test_bad_input(docs, cp):
    with pytest.raises(ValueError):
        document_mask_cp_pairs(docs, cp)
