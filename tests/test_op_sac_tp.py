"""torchtitan's op SAC with tensor, sequence and context parallelism (issue 34, sac32).

What torchtitan does, read from its code at 9dec370ad26b (op_sac.OP_SAC_TP_SOURCE): ``apply_tp`` makes wq, wk,
wv, w1, w3 ``ColwiseParallel`` (their outputs split tp ways), wo and w2 ``RowwiseParallel(output_layouts=
Shard(1))`` (the local matmul's output is a partial sum of the whole width, reduce-scattered over the
sequence), the norms ``SequenceParallel`` (the block's input is this rank's s / tp tokens); ``_save_list``
holds ``mm`` (every other one: wq, wv, w1, w2 of a Llama block), SDPA and ``reduce_scatter_tensor``. Context
parallelism shards the sequence: every tensor of s / cp tokens. Expected values are worked out by hand from
that and Llama-3-8B's config (hidden 4,096, 32 heads of 128, 8 KV heads, FFN 14,336, 32 layers); the torch
measurement (``data/op_sac_tp_saved.csv``, tools/measure_op_sac_tp.py: torch 2.13's checkpoint cache on a
torchtitan block split by torchtitan's plan over gloo) is a check we did not write.
"""

import csv
from pathlib import Path

import pytest

import llmsizing as L
from llmsizing.activations import activation_memory, op_sac_layer_bytes
from llmsizing.comm import communication
from llmsizing.model import Model

CSV = Path(__file__).resolve().parents[1] / "data" / "op_sac_tp_saved.csv"


def test_llama_3_8b_tp4_sp_cp2_by_hand():
    # micro-batch 1 of 8,192 tokens, cp = 2: 4,096 tokens on this rank; bf16 (2 B); tp = 4 with SP
    t, p = 4096, 2
    kept = (p * t * 4096 / 4            # the block's input, this rank's sequence shard
            + p * t * 4096 / 4          # wq's output (32 x 128 / 4 columns)
            + p * t * 1024 / 4          # wv's output (8 x 128 / 4)
            + p * t * 4096 / 4          # SDPA's output (8 of the 32 heads)
            + p * t * 14336 / 4         # w1's output
            + p * t * 4096              # w2's output: the row-parallel partial sum, the whole width
            + 2 * p * t * 4096 / 4      # wo's and w2's reduce-scatter outputs
            + 4 * 1 * 8 * t)            # SDPA's fp32 log-sum-exp, 8 heads
    assert kept == 107_085_824
    assert op_sac_layer_bytes("llama-3-8b", batch=1, seq=8192, tp=4, sp=True, cp=2) == kept
    a = activation_memory("llama-3-8b", batch=1, seq=8192, tp=4, sp=True, cp=2, recompute="op-sac")
    assert a.per_layer_bytes == kept
    assert all(v >= 0 for v in a.breakdown.values())
    assert sum(a.breakdown.values()) == pytest.approx(a.total_bytes, rel=1e-12)


def test_without_sp_the_input_is_whole_and_nothing_is_reduce_scattered():
    t, p = 8192, 2
    kept = p * t * (4096 + (4096 + 1024 + 4096 + 14336) / 2 + 4096) + 4 * 16 * t
    assert kept == 16384 * 19968 + 524_288 == 327_680_000
    assert op_sac_layer_bytes("llama-3-8b", batch=1, seq=8192, tp=2) == kept


def test_tp_saves_less_than_it_splits():
    """w2's partial sum is whole on every rank, so op SAC's per-layer bytes fall less than 1/tp."""
    one = op_sac_layer_bytes("llama-3-8b", batch=1, seq=8192)
    for tp in (2, 4, 8):
        got = op_sac_layer_bytes("llama-3-8b", batch=1, seq=8192, tp=tp, sp=True)
        assert one / tp < got < one


def _measured():
    rows = list(csv.DictReader(CSV.open()))
    assert all(r["source"] and r["as_of"] for r in rows)
    out = {}
    for r in rows:
        out.setdefault((int(r["tp"]), bool(int(r["sp"]))), {})[r["op"]] = int(r["bytes"])
    return rows[0], out


def test_the_torch_measurement_is_the_library_per_layer_bytes():
    first, measured = _measured()
    m = Model("tiny-titan", layers=1, hidden=int(first["hidden"]), heads=int(first["heads"]),
              kv_heads=int(first["kv_heads"]), ffn_hidden=int(first["ffn_hidden"]), vocab=2048,
              gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=512)
    b, s = int(first["batch"]), int(first["seq"])
    assert set(measured) == {(1, False), (2, True), (4, True), (2, False), (4, False)}
    for (tp, sp), ops in measured.items():
        assert sum(ops.values()) == op_sac_layer_bytes(m, batch=b, seq=s, tp=tp, sp=sp), (tp, sp)


def test_the_torch_measurement_by_op_by_hand():
    # hidden 256, 8 heads of 32, 4 KV heads, FFN 512, batch 2 x 64 tokens = 128, bf16
    _, got = _measured()
    for tp in (1, 2, 4):
        sp = tp > 1
        ops = got[tp, sp]
        # wq, wv, w1 split; w2 whole
        assert ops["aten.mm.default"] == 2 * 128 * ((256 + 128 + 512) // tp + 256)
        sdpa = next(v for k, v in ops.items() if "scaled_dot_product" in k)
        assert sdpa == 2 * 128 * 256 // tp + 4 * 2 * (8 // tp) * 64                    # output + fp32 LSE
        assert ops["checkpoint input"] == 2 * 128 * 256 // (tp if sp else 1)
        assert ops.get("_c10d_functional.reduce_scatter_tensor.default", 0) == (2 * 2 * 128 * 256 // tp
                                                                                  if sp else 0)
    assert "_c10d_functional.reduce_scatter_tensor.default" not in got[2, False]


def _calls(par, rc, kind):
    c = communication("llama-3-8b", par, batch=1, seq=8192, gpu="H100 SXM", recompute=rc)
    return sum(x.calls for x in c.collectives if kind in x.collective)


def test_with_sp_op_sac_sends_what_no_recomputation_sends():
    """Forward 2 all-gathers and 2 reduce-scatters per layer; the recompute re-gathers the attention's and the
    MLP's inputs (2 all-gathers: the library's backward counts these as Megatron-LM's weight-gradient
    re-gathers), the reduce-scatters are saved; backward 2 + 2. So 6 all-gathers and 4 reduce-scatters per
    layer, 32 layers."""
    par = L.Parallel(tp=4, sp=True, dp=2)
    for rc in ("op-sac", "op-sac-sdpa-rerun"):
        assert _calls(par, rc, "all-gather") == 6 * 32
        assert _calls(par, rc, "reduce-scatter") == 4 * 32
    assert _calls(par, "full", "all-gather") == 8 * 32


def test_without_sp_op_sac_reruns_one_all_reduce_per_layer():
    # forward 2 (wo's, w2's), wo's again in the recompute (w2's output is the block's last: early stop),
    # backward 2
    par = L.Parallel(tp=4, dp=2)
    assert _calls(par, "op-sac", "all-reduce (forward)") == 3 * 32
    assert _calls(par, "none", "all-reduce (forward)") == 2 * 32
    assert _calls(par, "full", "all-reduce (forward)") == 4 * 32


def test_the_ring_reruns_only_without_sdpa_saved():
    # p2p ring: cp - 1 = 3 sends of K, V per layer in the forward, again where the attention forward reruns
    par = L.Parallel(cp=4, dp=2)
    fwd = "CP ring send/recv K,V (forward)"
    assert _calls(par, "op-sac", fwd) == 3 * 32
    assert _calls(par, "op-sac-sdpa-rerun", fwd) == 6 * 32 == _calls(par, "full", fwd)


def test_old_calls_keep_their_values():
    # without tp, sp, cp the per-layer bytes are session 30's (test_op_sac.py's 1,042,284,544)
    assert op_sac_layer_bytes("llama-3-8b", batch=2, seq=8192) == 1_042_284_544


@pytest.mark.parametrize("kw, words", [(dict(tp=16), "tp=16"), (dict(tp=1, sp=True), "sp"),
                                       (dict(cp=0), "cp"), (dict(tp="2"), "tp")])
def test_bad_layouts_are_refused_by_name(kw, words):
    with pytest.raises((ValueError, TypeError), match=words):
        op_sac_layer_bytes("llama-3-8b", batch=1, seq=8192, **kw)
