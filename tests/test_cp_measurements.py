"""Context parallelism measured on gloo (data/cp_gloo_measurements.csv, data/cp_gloo_messages.csv; written by
tools/measure_memory.py cp; issue 23) against hand arithmetic. No torch needed.

Every expected value below is derived from the model's shape and the algorithm (Transformer Engine's
AttnFuncWithCPAndKVP2P and AttnFuncWithCPAndKVAllGather, which the tool's stand-in follows), never read back
from the CSV or the library. Notation: L layers, b sequences, s tokens, cp ranks, n = s / cp tokens per rank,
h hidden, a heads, g KV heads, d head dim, f FFN width, V vocabulary, 4 bytes per fp32 element.

* Ring forward: each rank sends cp - 1 packed K+V blocks per layer of 2 b n g d x 4 bytes (and receives as
  many); backward sends the same number of KV blocks plus cp - 1 dKV blocks of the same size. Exact.
* All-gather: one all-gather of K+V per layer forward and one backward, whose gathered buffer is the whole
  sequence's K+V (2 b s g d x 4 bytes), and one reduce-scatter of dK+dV (same size). On a ring each rank sends
  (cp - 1) of its own blocks: the same bytes as the p2p ring. Exact.
* Saved for backward, per rank: every term is a number of tokens per rank times a per-token width, so at cp = k
  it is exactly the cp = 1 figure / k, category by category. What does not scale: a constant of a few scalars
  (the loss's token count and reduction), stated below as < 64 bytes in total; nothing else.
* Correctness: the cp runs match a whole-sequence run with HF's own sdpa attention: loss within 1e-5 (fp32
  summation order), gradients within 1e-6 absolute (the largest reference gradient is about 0.06, so 2e-5 of
  it; measured: below 6e-8).
"""

import sys

import pytest

from llmsizing.measurements import CP_SAVED_CATEGORIES, CP_VARIANTS, cp_measurements, cp_messages

# The shape the brief fixes (hidden 256, 4 layers, 8 heads, 2 KV heads, fp32) and the tool builds.
L, H, A, G, D, F, V = 4, 256, 8, 2, 32, 688, 8192
FP32 = 4
#: The scalars that do not scale with the tokens per rank (bytes, in total over the saved tensors).
CONSTANT_BOUND = 64


@pytest.fixture(scope="module")
def df():
    return cp_measurements()


@pytest.fixture(scope="module")
def msgs():
    return cp_messages()


def kv_block(b, n):
    """One packed K+V block of n tokens: 2 x b n g d x 4 bytes."""
    return 2 * b * n * G * D * FP32


def test_shape_is_the_stated_one(df):
    for col, want in (("layers", L), ("hidden", H), ("heads", A), ("kv_heads", G), ("head_dim", D), ("ffn", F),
                      ("vocab", V)):
        assert set(df[col]) == {want}, col
    assert set(df["dtype"]) == {"float32"}


def test_sweep_covers_cp_1_2_4_and_three_lengths(df):
    assert set(df["variant"]) == set(CP_VARIANTS)
    for variant in CP_VARIANTS:
        sub = df[df["variant"] == variant]
        assert set(sub["cp"]) == {1, 2, 4}
        assert set(sub["seq"]) == {256, 512, 1024}
        for cp, grp in sub.groupby("cp"):
            assert len(grp) == cp * 3                        # every rank reports, at every length
            assert set(grp["rank"]) == set(range(cp))
    assert (df["seq_per_rank"] * df["cp"] == df["seq"]).all()


def test_correct_against_the_whole_sequence(df):
    assert (df["max_abs_loss_diff"] < 1e-5).all()
    assert (df["max_abs_grad_diff"] < 1e-6).all()
    assert (df["loss"] > 8.0).all()                          # ~ln(8192) = 9.01 for random weights: a real loss


def test_ring_forward_and_backward_bytes(df):
    ring = df[df["variant"] == "ring"]
    for _, r in ring.iterrows():
        cp, b, n = int(r["cp"]), int(r["batch"]), int(r["seq"]) // int(r["cp"])
        fwd = L * (cp - 1) * kv_block(b, n)
        assert r["forward_send_bytes"] == fwd and r["forward_recv_bytes"] == fwd, (cp, r["seq"])
        assert r["backward_send_bytes"] == 2 * fwd and r["backward_recv_bytes"] == 2 * fwd   # KV + dKV
    # concrete: cp = 2, s = 1,024 -> 4 x 1 x 2 x 512 x 2 x 32 x 4 = 1,048,576 bytes forward per rank
    one = ring[(ring["cp"] == 2) & (ring["seq"] == 1024)].iloc[0]
    assert one["forward_send_bytes"] == 1_048_576


def test_ring_messages(msgs):
    ring = msgs[msgs["variant"] == "ring"]
    for (cp, seq, rank), grp in ring[ring["phase"] != "grad_sync"].groupby(["cp", "seq", "rank"]):
        n = seq // cp
        for _, m in grp.iterrows():
            assert m["message_bytes"] == kv_block(1, n)
            assert m["calls"] == L * (cp - 1)
        got = {(p, o, t) for p, o, t in zip(grp["phase"], grp["op"], grp["tensor"])}
        assert got == {("forward", "send", "kv"), ("forward", "recv", "kv"), ("backward", "send", "kv"),
                       ("backward", "recv", "kv"), ("backward", "send", "dkv"), ("backward", "recv", "dkv")}
    assert set(ring.loc[ring["phase"] != "grad_sync", "cp"]) == {2, 4}      # cp = 1 sends nothing


def test_allgather_messages_and_bytes(df, msgs):
    ag = msgs[(msgs["variant"] == "allgather") & (msgs["phase"] != "grad_sync")]
    for (cp, seq, rank), grp in ag.groupby(["cp", "seq", "rank"]):
        got = {(p, o): (mb, c) for p, o, mb, c in zip(grp["phase"], grp["op"], grp["message_bytes"], grp["calls"])}
        full = kv_block(1, seq)                              # the whole sequence's K+V
        assert got == {("forward", "all_gather"): (full, L), ("backward", "all_gather"): (full, L),
                       ("backward", "reduce_scatter"): (full, L)}
    rows = df[(df["variant"] == "allgather")]
    for _, r in rows.iterrows():
        cp, n = int(r["cp"]), int(r["seq"]) // int(r["cp"])
        assert r["forward_send_bytes"] == L * (cp - 1) * kv_block(1, n)     # the ring's bytes, not overlapped
        assert r["backward_send_bytes"] == 2 * L * (cp - 1) * kv_block(1, n)


def test_grad_sync_is_every_gradient_once(msgs):
    # parameters of the model, by hand: per layer q, o (h x a d), k, v (h x g d), gate, up, down (h x f), 2 norms
    layer = 2 * H * A * D + 2 * H * G * D + 3 * H * F + 2 * H
    n_params = L * layer + 2 * V * H + H                     # untied embedding and LM head, final norm
    gs = msgs[msgs["phase"] == "grad_sync"]
    assert set(gs["message_bytes"]) == {n_params * FP32}
    assert set(gs["calls"]) == {1}
    assert set(gs["cp"]) == {2, 4}


def _hand_saved(n, b=1):
    """Bytes saved for backward on one rank holding n tokens, by category (fp32, HF Llama, this tool's attention)."""
    t = b * n
    return {"attn_in": L * t * H * FP32,                       # the normed input of q, k, v projections
            "attn_q": L * t * A * D * FP32,                    # q after RoPE
            "attn_kv": L * kv_block(b, n),                     # one K+V block (TE keeps one, ring or all-gather)
            "attn_out": L * t * A * D * FP32,                  # output, also o_proj's input (one storage)
            "attn_lse": L * t * A * FP32,                      # fp32 log-sum-exp per head and token
            "rope": 2 * t * D * FP32,                          # cos and sin, shared by the layers
            "mlp": L * t * (H + 4 * F) * FP32,                 # gate/up input; gate out, SiLU out, up out, product
            "norms": (2 * L + 1) * t * (2 * H + 1) * FP32,     # each RMSNorm: input, normalised, 1/rms
            "embedding": t * 8,                                # the int64 token ids
            "logits_loss": t * (H + V) * FP32 + t * 8,         # LM-head input, log-softmax, int64 labels
            "other": 0}


@pytest.mark.parametrize("variant", CP_VARIANTS)
def test_saved_bytes_by_category_from_hand_arithmetic(df, variant):
    for _, r in df[df["variant"] == variant].iterrows():
        want = _hand_saved(int(r["seq_per_rank"]))
        for cat in CP_SAVED_CATEGORIES:
            got = int(r[f"saved_{cat}_bytes"])
            if cat == "logits_loss":
                assert 0 <= got - want[cat] < CONSTANT_BOUND, (variant, r["cp"], r["seq"], cat, got, want[cat])
            else:
                assert got == want[cat], (variant, r["cp"], r["seq"], cat, got, want[cat])


@pytest.mark.parametrize("variant", CP_VARIANTS)
def test_saved_bytes_divide_by_cp(df, variant):
    sub = df[df["variant"] == variant]
    for seq in (256, 512, 1024):
        base = sub[(sub["seq"] == seq) & (sub["cp"] == 1)].iloc[0]
        for cp in (2, 4):
            for _, r in sub[(sub["seq"] == seq) & (sub["cp"] == cp)].iterrows():
                for cat in CP_SAVED_CATEGORIES:
                    if cat != "logits_loss":
                        assert r[f"saved_{cat}_bytes"] * cp == base[f"saved_{cat}_bytes"], (cp, seq, cat)
                # the total: exactly 1/cp up to the constant scalars
                assert abs(r["saved_total_bytes"] - base["saved_total_bytes"] / cp) < CONSTANT_BOUND


def test_load_balanced_ranks_save_and_send_the_same(df):
    cols = ["saved_total_bytes", "forward_send_bytes", "backward_send_bytes", "forward_recv_buffer_peak_bytes"]
    for _, grp in df.groupby(["variant", "cp", "seq"]):
        for c in cols:
            assert grp[c].nunique() == 1, c


def test_receive_buffer_peaks(df):
    for _, r in df[df["cp"] > 1].iterrows():
        cp, n, s = int(r["cp"]), int(r["seq_per_rank"]), int(r["seq"])
        if r["variant"] == "ring":
            # forward: the block being received, plus the one received last step while it is still in use
            assert r["forward_recv_buffer_peak_bytes"] == min(cp - 1, 2) * kv_block(1, n)
            # backward: the KV block in flight, its successor, the partial dKV in flight: at most 3 blocks
            assert kv_block(1, n) < r["backward_recv_buffer_peak_bytes"] <= 3 * kv_block(1, n)
        else:
            # all-gather: the whole sequence's K+V per layer, whatever cp is
            assert r["forward_recv_buffer_peak_bytes"] == kv_block(1, s)
            assert r["backward_recv_buffer_peak_bytes"] == kv_block(1, s)
    one = df[df["cp"] == 1]
    assert (one["forward_recv_buffer_peak_bytes"] == 0).all() and (one["backward_recv_buffer_peak_bytes"] == 0).all()


def test_loader_filters_and_rejects_unknown_variant():
    assert set(cp_measurements("ring")["variant"]) == {"ring"}
    assert set(cp_messages("allgather")["variant"]) == {"allgather"}
    with pytest.raises(ValueError, match="variant"):
        cp_measurements("ringg")
    with pytest.raises(TypeError, match="variant"):
        cp_messages(2)


def test_loader_needs_no_torch():
    import subprocess

    code = ("import sys; from llmsizing.measurements import cp_measurements; cp_measurements(); "
            "assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_library_matches_the_gloo_measurement_of_context_parallelism():
    """Chapter 17's comparison (dist_compare.compare_cp): the bytes a rank saves are within 0.5% of the
    library's activation_memory(cp=...) on every measured row (the measured extras are the fp32 log-sum-exp and
    RoPE tables, about 0.2%), they divide by cp in both, and the attention traffic and the gradient all-reduce
    of the library's communication() are the measured bytes exactly."""
    from llmsizing.dist_compare import compare_cp

    cmp = compare_cp()
    assert len(cmp) == 18
    assert ((cmp["saved_ratio"] - 1).abs() < 0.005).all(), cmp["saved_ratio"]
    for col in ("forward_sent", "backward_sent", "grad_sync"):
        assert (cmp[f"{col}_measured_bytes"] == cmp[f"{col}_library_bytes"]).all(), col
    one = cmp.xs(1, level="cp")["saved_library_bytes"]
    for cp in (2, 4):
        assert (cmp.xs(cp, level="cp")["saved_library_bytes"] * cp == one).all()
