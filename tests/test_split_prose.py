"""Chapter 9's sentences (src/llmsizing/split_prose.py): the counts its prose explains, worked by hand from the
measured model's row of data/dist_collectives.csv (4 layers, hidden 256, vocabulary 8,192, 6,965,504
parameters, 1 x 64 tokens, fp32) and from the collectives' formulas, and a reading that raises when false."""

from __future__ import annotations

import pytest

import llmsizing.split_prose as sp
from llmsizing.dist_compare import compare_collectives, load_collectives


@pytest.fixture(scope="module")
def collectives():
    coll = load_collectives()
    return sp.collectives_prose(coll, compare_collectives(coll).set_index(["layout", "world_size"]))


def test_the_counts_the_prose_explains(collectives):
    """FSDP2: 3 collectives per unit, 4 layers + the root = 15; without resharding 2 per unit = 10. Tensor
    parallelism on HF modules: 2L + 1 = 9 all-reduces forward, 5L + 1 = 21 backward, each of
    1 x 64 x 256 x 4 B = 64 KiB; the logits' all-gather 1 x 64 x 8,192 x 4 B = 2,048 KiB. DDP all-reduces
    every fp32 gradient once: 6,965,504 x 4 B = 26.57 MiB."""
    table, t = collectives.report, collectives.values
    assert (t["fsdp_calls"], t["units"], t["nr_calls"]) == ("15", "5", "10")
    assert (t["tp_fwd"], t["tp_bwd"]) == ("9", "21")
    assert (t["tp_msg_kib"], t["logits_kib"]) == ("64 KiB", "2,048 KiB")
    assert t["ddp_mib"] == "26.57 MiB" and t["vocab"] == "8,192"
    assert t["sp_fwd_ag"] == "9"                 # SP: 2 per layer + the embedding's or the LM head's, 2L + 1
    assert t["tp_outside_80"] == "0.6%"          # 2 / (4 x 80 + 2) = 0.62%
    assert "fsdp2-no-reshard" in table


def test_the_network_log_by_hand():
    """A 16-rank all-reduce: bus factor 2(n-1)/n = 1.875, 2(n-1) = 30 ring steps; PCIe 3 x16:
    8 GT/s x 16 lanes x 128/130 / 8 = 15.75 GB/s; NCCL's ring on an H100 node, 370 of 450 GB/s = 0.82."""
    t = sp.nccl_fits_prose().values
    assert (t["net_ring_factor"], t["net_steps"], t["net_ranks"]) == ("1.875", "30", "16")
    assert t["pcie3_line"] == "15.75 GB/s" and t["h100_ring_share"] == "0.82"


def test_the_typed_figures_are_now_values():
    """The figures the prose used to type, worked by hand: DDP's buckets (torch's bucket_cap_mb=25 and its
    1 MiB first bucket); the library's Megatron-LM count, 2L = 8 all-reduces each way on 4 layers; NVLink 3,
    12 links x 25 GB/s = 300 GB/s one way; the a3-megagpu-8g's 8 NICs x 200 Gb/s / 8 = 200 GB/s; PCIe Gen3
    x16, 8 GT/s x 16 / 8 = 16 GB/s; NVLink 4, 18 links x 25 GB/s = 450 GB/s; NCCL's quotes, 370 and 480 GB/s."""
    coll = load_collectives()
    t = sp.collectives_prose(coll, compare_collectives(coll).set_index(["layout", "world_size"])).values
    assert (t["ddp_cap"], t["ddp_first"], t["tp_pred_dir"]) == ("25 MiB", "1 MiB", "8")
    v = sp.nccl_fits_prose().values
    assert (v["nv_nominal"], v["net_nics"], v["net_egress"]) == ("300 GB/s", "8 x 200 Gb/s", "200 GB/s")
    assert (v["pcie3_nominal"], v["h100_nominal"]) == ("16 GB/s", "450 GB/s")
    assert (v["h100_quote_ring"], v["h100_quote_nvls"]) == ("370", "480 GB/s")


def test_a_reading_the_numbers_contradict_raises(monkeypatch):
    """With NICs far wider than the log's bandwidth, a flat ring could have run: the prose would be false."""
    monkeypatch.setattr(sp, "A3_MEGA_EGRESS_GBPS", 1e6)
    with pytest.raises(sp.ProseOutOfDate, match="chapter 9's prose says NCCL cannot have run a flat ring"):
        sp.nccl_fits_prose()
