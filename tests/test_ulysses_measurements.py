"""Ulysses context parallelism measured on gloo (data/ulysses_all_to_all_gloo.csv, written by
tools/measure_memory.py ulysses; issue 38) against hand arithmetic, then against the library's price of the same
exchange (llmsizing.all_to_all.ulysses_collectives through L.communication). No torch needed.

The expected bytes are written out from the shape and the algorithm (DeepSpeed-Ulysses, Jacobs et al. 2023,
Sec. 3.1; Transformer Engine's AttnFuncWithCPAndQKVOA2A: one all-to-all per tensor), never read back from the
CSV or the library. Notation: b = 1 sequence, s tokens, cp ranks, n = s / cp tokens per rank, a = 8 query heads,
g = 4 KV heads, d = 32 head dim, 4 bytes per fp32 element.

* Before the attention a rank passes its Q (b n a d), K and V (b n g d each) to three all-to-alls: b n (a + 2 g)
  d x 4 = 2,048 n bytes; after it, its output (b n a d x 4 = 1,024 n bytes) to one. The backward moves dO
  (1,024 n) and dQ, dK, dV (2,048 n): the same bytes in the other order.
* Each call keeps the rank's own 1 / cp chunk and sends the other (cp - 1) / cp, and receives as much.
  At s = 1,024, cp = 4: n = 256, Q, K, V 524,288 bytes, 393,216 of them sent.
"""

import pandas as pd
import pytest

import llmsizing as L
from llmsizing import Model
from llmsizing.measurements import DATA_DIR
from llmsizing.parallel import Parallel

CSV = DATA_DIR / "ulysses_all_to_all_gloo.csv"
B, A, G, D, FP32 = 1, 8, 4, 32, 4
QKV_PER_TOKEN = B * (A + 2 * G) * D * FP32          # 2,048 bytes
OUT_PER_TOKEN = B * A * D * FP32                    # 1,024 bytes


@pytest.fixture(scope="module")
def df():
    return pd.read_csv(CSV)


def test_the_sweep_is_the_stated_one(df):
    assert sorted(set(df["cp"])) == [2, 4] and sorted(set(df["seq"])) == [256, 1024, 4096]
    for col, want in (("batch", B), ("heads", A), ("kv_heads", G), ("head_dim", D), ("bytes_per_element", FP32)):
        assert set(df[col]) == {want}, col
    # every rank of every configuration, a forward and a backward row each
    for (cp, seq), sub in df.groupby(["cp", "seq"]):
        assert sorted(sub["rank"]) == sorted(list(range(cp)) * 2) and (sub["tokens_per_rank"] == seq // cp).all()
    assert df["source"].str.len().gt(0).all() and df["as_of"].str.len().eq(10).all()


def test_the_split_attention_equals_the_unsplit_one(df):
    """Each rank's output and its dQ, dK, dV rows match the whole-sequence attention (fp32)."""
    assert (df["max_rel_err_vs_unsplit"] <= 1e-5).all()


def test_bytes_are_the_hand_count(df):
    for r in df.itertuples():
        n, keep = r.seq // r.cp, (r.cp - 1) / r.cp
        assert (r.qkv_calls, r.out_calls) == (3, 1)
        assert r.qkv_input_bytes == QKV_PER_TOKEN * n
        assert r.out_input_bytes == OUT_PER_TOKEN * n
        assert r.qkv_sent_bytes == r.qkv_recv_bytes == QKV_PER_TOKEN * n * keep
        assert r.out_sent_bytes == r.out_recv_bytes == OUT_PER_TOKEN * n * keep
    one = df[(df.cp == 4) & (df.seq == 1024)].iloc[0]
    assert (one.qkv_input_bytes, one.qkv_sent_bytes) == (524_288, 393_216)


def test_the_library_prices_the_measured_bytes(df):
    """L.communication for the same layer (one layer, fp32, batch 1) lists Ulysses' four all-to-alls with the
    buffers and the bytes a rank sent in the run."""
    model = Model("ulysses-gloo", layers=1, hidden=A * D, heads=A, kv_heads=G, head_dim=D, ffn_hidden=688,
                  vocab=8192, gated_mlp=True, norm="rmsnorm", max_seq=4096)
    names = {("forward", "qkv"): "CP all-to-all Q,K,V (forward)", ("forward", "out"): "CP all-to-all output "
             "(forward)", ("backward", "out"): "CP all-to-all dO (backward)",
             ("backward", "qkv"): "CP all-to-all dQ,dK,dV (backward)"}
    for (cp, seq), sub in df.groupby(["cp", "seq"]):
        comm = L.communication(model, Parallel(cp=cp, cp_comm="a2a"), batch=B, seq=seq, gpu="H100 SXM",
                               precision="fp32")
        rows = {c.collective: c for c in comm.collectives if c.group == "cp"}
        assert set(rows) == set(names.values())
        for (phase, exchange), name in names.items():
            measured = sub[(sub["phase"] == phase) & (sub["rank"] == 0)].iloc[0]
            assert rows[name].calls == 1
            assert rows[name].message_bytes == measured[f"{exchange}_input_bytes"], name
            assert rows[name].bytes_per_gpu == pytest.approx(measured[f"{exchange}_sent_bytes"], rel=1e-12), name


def test_times_are_recorded_and_grow_with_the_message(df):
    """Every call was timed; 16 times the tokens (256 -> 4,096) take longer for the Q, K, V exchange. (gloo over
    loopback on a shared 2-core machine: only the order is checked, never a bandwidth.)"""
    for col in ("qkv_time_s_median", "out_time_s_median", "qkv_time_s_min", "phase_time_s_median"):
        assert (df[col] > 0).all(), col
    for cp in (2, 4):
        fwd = df[(df.cp == cp) & (df.phase == "forward") & (df["rank"] == 0)].set_index("seq")
        assert fwd.loc[4096, "qkv_time_s_median"] > fwd.loc[256, "qkv_time_s_median"]
