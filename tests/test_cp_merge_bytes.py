"""What PyTorch's own ring attention moves around its attention kernels (issue 34, long24), and why the step
model does not price it.

``data/cp_merge_bytes.csv`` is measured by ``tools/measure_memory.py cp-merge``
(``tools/measure/cp_merge.py``): torch's ``_templated_ring_attention`` and its backward, run with gloo at cp =
2 and 4, every ATen op outside the attention kernel and the collectives counted by the bytes it reads and
writes. The expected counts below are worked out by hand from torch's loop
(``torch/distributed/tensor/experimental/_context_parallel/_attention.py``, torch 2.13, the same loop as torch
2.6's), per element of the rank's queries (``N``; K and V have as many, as torchtitan's Llama passes them
after ``repeat_kv``), bf16 2 bytes, fp32 4:

forward, rank ``r`` of ``c``: the first step's output cast to fp32 (read 2, write 4: 6); each of the ``c - 1``
sends packs K and V (``torch.cat``: read 4, write 4: 8); a later step from an earlier rank (``r`` of them,
whole q, whole output) casts (6), ``out - block_out`` (read 8, write 4: 12), times the sigmoid (8), subtracts
(12): 38; a later step from a later rank (``c - 1 - r``, half of q) casts half (3), the same three on half (6
+ 4 + 6) and ``_partial_update`` concatenates the whole fp32 output again (8): 27; the last cast to bf16 (6).
``12 + 35 (c - 1) + 11 r``.

backward: three fp32 zero buffers (12); step 0 packs K and V (8), adds dK and dV in fp32 (read 4 + 2, write
4: 10 each), packs the fp32 dK/dV for the ring (16), adds dQ (10): 54; each later step but the last packs K/V
(8); a step from an earlier rank (half of K/V): ``_partial_update`` of dK and of dV (add on half: 5, concat:
8; 13 each), the pack (16), dQ (10): 52; from a later rank: dK, dV (10 each), the pack (16), dQ's
``_partial_update`` (13): 49; the casts back to bf16 (dQ 6, dK/dV 12). ``84 + 8 (c - 2) + 49 (c - 1) + 3 r``.

The log-sum-exp's own ops add ``O(1 / head_dim)`` of that (under 3 bytes per element at head dim 64).
"""

import csv
from pathlib import Path

import pytest

from llmsizing import Parallel, get_gpu, step_time

ROWS = list(csv.DictReader(open(Path(__file__).resolve().parents[1] / "data" / "cp_merge_bytes.csv")))


def _by_hand(phase, c, r):
    if phase == "fwd":
        return 12 + 35 * (c - 1) + 11 * r
    return 84 + 8 * (c - 2) + 49 * (c - 1) + 3 * r


def _mean_over_ranks(phase, c):
    return sum(_by_hand(phase, c, r) for r in range(c)) / c


def test_the_rows_cover_both_degrees_and_every_rank():
    assert {(int(r["cp"]), int(r["rank"])) for r in ROWS} == {(2, 0), (2, 1), (4, 0), (4, 1), (4, 2), (4, 3)}
    assert {r["phase"] for r in ROWS} == {"fwd", "bwd"}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['phase']}-cp{r['cp']}-r{r['rank']}-s{r['seq']}")
def test_torchs_ring_moves_what_its_loop_says_by_hand(row):
    got = float(row["bytes_per_q_element"])
    want = _by_hand(row["phase"], int(row["cp"]), int(row["rank"]))
    assert 0 <= got - want < 3.0, (got, want)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['phase']}-cp{r['cp']}-r{r['rank']}-s{r['seq']}")
def test_the_measured_ring_computes_attention(row):
    # against whole-sequence causal attention in one process (bf16 outputs and gradients)
    assert float(row["max_abs_out_diff"]) < 0.02 and float(row["max_abs_grad_diff"]) < 0.05


# torchtitan benchmarks/llama3_h100_202412_torchtitan.md, Table 2 (Llama 3.1 8B, 8 GPUs, FSDP + CP,
# torch.compile + Float8, local batch 1, full AC): (seq, cp, TPS per GPU)
TABLE2 = ((32768, 1, 3890), (65536, 2, 2540), (131072, 4, 1071), (262144, 8, 548))


def _series():
    """Published / predicted TPS of Table 2's rows, before and after charging torch's ring bytes at the full
    HBM bandwidth of the part (H100 HBM2e (Meta), 2.4 TB/s): per layer the forward twice (full
    recomputation) and the backward once, on the rank's 32,768 x 4,096 query elements."""
    bw = get_gpu("H100 HBM2e (Meta)").memory_bandwidth_gbps * 1e9
    out = []
    for seq, cp, tps in TABLE2:
        st = step_time("llama-3-8b", "H100 HBM2e (Meta)", Parallel(dp=8 // cp, cp=cp, zero=3), batch=1,
                       seq=seq, recompute="full", precision="fp8-mixed")
        per_elem = 0 if cp == 1 else 2 * _mean_over_ranks("fwd", cp) + _mean_over_ranks("bwd", cp)
        merge_s = 32 * per_elem * (seq // cp) * 4096 / bw
        tokens = seq // cp
        out.append((cp, tps / (tokens / st.step_s), tps / (tokens / (st.step_s + merge_s)),
                    merge_s / st.step_s))
    return out


def test_the_ring_bytes_are_a_few_percent_of_torchtitans_step():
    """By hand: cp = 4 moves 2 x 133.5 + 251.5 = 518.5 bytes per query element per layer, 32 x 518.5 x
    131,072 / 4 x 4,096 = 2.23e12 bytes, 0.93 s at 2.4 TB/s: about 5% of the predicted step at cp 2 to 8."""
    assert 2 * _mean_over_ranks("fwd", 4) + _mean_over_ranks("bwd", 4) == 518.5
    shares = {cp: share for cp, _, _, share in _series()}
    assert shares[1] == 0 and all(0.03 < shares[c] < 0.06 for c in (2, 4, 8))


def test_the_ring_bytes_do_not_explain_torchtitans_long_context_gap():
    """The series' gap opens between cp = 2 and cp = 4 (published / predicted about 0.87, 0.88, 0.63, 0.59),
    and the ring's bytes, even unfused at the full HBM bandwidth, move cp = 4 and 8 by under 4 points. That
    cp = 2 shows no cost of the ring is a residual inference, not a measurement of its time: cp = 2 sits at
    cp = 1's published / predicted (0.877 against 0.868, a 1-point gap in a model whose training range is
    about 1.6x wide), where the bytes would put it 3 points above. Not priced: the bytes are torch's eager
    loop, the runs compiled it (torch.compile may fuse the merge), and the one pair that could show the cost
    (cp 1 -> 2) does not, within that residual."""
    s = {cp: (before, after) for cp, before, after, _ in _series()}
    assert s[2][0] == pytest.approx(s[1][0], abs=0.03)      # cp = 2 at cp = 1's ratio (a residual, 1 point)
    assert s[2][1] - s[1][0] > 0.03                          # with them it would run faster than cp = 1
    for cp in (4, 8):
        assert s[cp][0] < 0.65 and s[cp][1] - s[cp][0] < 0.04 and s[cp][1] < 0.7
