"""The expert-parallel all-to-all measured under gloo (data/moe_all_to_all_gloo.csv, written by
tools/measure_memory.py a2a; issue 24) against hand arithmetic. No torch needed.

Each expected value is derived here from the recorded routing histograms (``routed_e0`` .. ``routed_e7``: the
(token, expert) assignments a rank's own tokens made) and the layer's shape, not read back from another column:

* experts are split contiguously, ``E / ep`` per rank: expert ``e`` lives on rank ``e // (E / ep)``;
* a rank's dispatch sends each of its assignments whose expert lives elsewhere as one row of ``hidden``
  numbers: sent bytes = (its assignments to other ranks' experts) x hidden x bytes per element (4 for float32,
  2 for bfloat16), and receives every other rank's assignments to its own experts;
* combine sends the rows back: its sent bytes are the dispatch's received bytes and vice versa;
* the backward pass mirrors the forward: the combine's backward moves the gradient rows in the dispatch's
  direction, the dispatch's backward in the combine's;
* for uniform routing a rank sends T k h b (ep - 1) / ep bytes per all-to-all and direction. With a router at
  Hugging Face's initialisation the routing is close to uniform, not equal to it: a rank's remote fraction is a
  sample of T k assignments (binomial standard deviation sqrt(p (1 - p) / (T k)) around p = (ep - 1) / ep), and
  the shared random router favours some experts slightly (a few per cent). The stated tolerance per rank is
  three binomial standard deviations (relative to p) plus 5% for the router's bias.
"""

import math

import pytest

from llmsizing.measurements import (MOE_EXCHANGES, load_moe_all_to_all, moe_all_to_all_table,
                                    moe_routing_counts)

BYTES_PER_ELEMENT = {"float32": 4, "bfloat16": 2}
ROUTER_BIAS_ALLOWANCE = 0.05
CONFIG = ["routing", "dtype", "ep", "tokens_per_rank"]


@pytest.fixture(scope="module")
def df():
    return load_moe_all_to_all()


def _groups(df):
    return [sub for _, sub in df.groupby(CONFIG, sort=False)]


def _home(e, experts, ep):
    return e // (experts // ep)


def _hand(sub):
    """{rank: (rows sent to each peer, rows received from each peer)} of the forward dispatch, from the routing
    histograms of one configuration's forward rows alone."""
    fwd = sub[sub["phase"] == "forward"].set_index("rank")
    ep, experts = int(fwd["ep"].iloc[0]), int(fwd["experts"].iloc[0])
    counts = {r: moe_routing_counts(fwd.loc[r]) for r in range(ep)}
    to = {r: [sum(c for e, c in enumerate(counts[r]) if _home(e, experts, ep) == d) for d in range(ep)]
          for r in range(ep)}
    return {r: (to[r], [to[s][r] for s in range(ep)]) for r in range(ep)}


def _check_dispatch_bytes(df):
    """The problems found comparing the forward dispatch with the hand arithmetic (empty: none)."""
    bad = []
    for sub in _groups(df):
        hand = _hand(sub)
        for _, row in sub[sub["phase"] == "forward"].iterrows():
            r, ep = int(row["rank"]), int(row["ep"])
            b = int(row["hidden"]) * BYTES_PER_ELEMENT[row["dtype"]]
            send, recv = hand[r]
            expect = {"dispatch_sent_bytes": sum(send[d] for d in range(ep) if d != r) * b,
                      "dispatch_recv_bytes": sum(recv[s] for s in range(ep) if s != r) * b,
                      "dispatch_local_bytes": send[r] * b,
                      "dispatch_send_rows": ";".join(map(str, send)),
                      "dispatch_recv_rows": ";".join(map(str, recv))}
            for col, want in expect.items():
                if str(row[col]) != str(want):
                    bad.append(f"{tuple(row[CONFIG])} rank {r} {col}: measured {row[col]}, hand {want}")
    return bad


def test_the_sweep_is_complete(df):
    for ep in (2, 4):
        for tokens in (256, 1024, 4096):
            sub = df[(df["routing"] == "hf-init") & (df["dtype"] == "float32") & (df["ep"] == ep)
                     & (df["tokens_per_rank"] == tokens)]
            assert sorted(zip(sub["rank"], sub["phase"])) == sorted(
                (r, p) for r in range(ep) for p in ("backward", "forward")), (ep, tokens)
    assert {"bfloat16"} <= set(df["dtype"]) and {"skewed"} <= set(df["routing"])
    assert set(df["hidden"]) == {256} and set(df["experts"]) == {8} and set(df["top_k"]) == {2}


def test_each_rank_routed_every_token_to_k_distinct_experts(df):
    for _, row in df.iterrows():
        counts = moe_routing_counts(row)
        assert sum(counts) == row["tokens_per_rank"] * row["top_k"]
        assert max(counts) <= row["tokens_per_rank"]          # top-k experts are distinct per token


def test_bytes_per_element_is_the_dtype_width(df):
    for _, row in df.iterrows():
        assert row["bytes_per_element"] == BYTES_PER_ELEMENT[row["dtype"]]


def test_dispatch_bytes_equal_the_routed_rows_times_hidden_times_width(df):
    assert _check_dispatch_bytes(df) == []


def test_the_check_catches_a_wrong_byte_count(df):
    """The hand check is not vacuous: one row off by one token row, or a histogram off by one, is caught."""
    broken = df.copy()
    i = broken.index[(broken["phase"] == "forward")][0]
    broken.loc[i, "dispatch_sent_bytes"] += 256 * 4
    assert len(_check_dispatch_bytes(broken)) == 1
    moved = df.copy()
    j = moved.index[(moved["phase"] == "forward") & (moved["ep"] == 2) & (moved["rank"] == 0)][0]
    moved.loc[j, "routed_e0"] -= 1          # one assignment moved from expert 0 (rank 0) to expert 7 (rank 1)
    moved.loc[j, "routed_e7"] += 1
    assert len(_check_dispatch_bytes(moved)) >= 2


def test_what_is_sent_is_received(df):
    for sub in _groups(df):
        for phase in ("forward", "backward"):
            p = sub[sub["phase"] == phase]
            for ex in MOE_EXCHANGES:
                assert p[f"{ex}_sent_bytes"].sum() == p[f"{ex}_recv_bytes"].sum()


def test_combine_mirrors_dispatch(df):
    for _, row in df.iterrows():
        assert row["combine_sent_bytes"] == row["dispatch_recv_bytes"]
        assert row["combine_recv_bytes"] == row["dispatch_sent_bytes"]
        assert row["combine_local_bytes"] == row["dispatch_local_bytes"]
        assert row["combine_send_rows"] == row["dispatch_recv_rows"]


def test_backward_mirrors_forward(df):
    key = CONFIG + ["rank"]
    fwd = df[df["phase"] == "forward"].set_index(key)
    bwd = df[df["phase"] == "backward"].set_index(key).loc[fwd.index]
    for ex in MOE_EXCHANGES:
        assert (bwd[f"{ex}_sent_bytes"] == fwd[f"{ex}_recv_bytes"]).all()
        assert (bwd[f"{ex}_recv_bytes"] == fwd[f"{ex}_sent_bytes"]).all()
        assert (bwd[f"{ex}_send_rows"] == fwd[f"{ex}_recv_rows"]).all()
    for e in range(8):
        assert (bwd[f"routed_e{e}"] == fwd[f"routed_e{e}"]).all()


def test_message_counts(df):
    """gloo's alltoallv posts one send and one receive per other rank, empty or not (gloo/alltoallv.cc); the
    non-empty chunks are the peers with at least one routed row, from the histograms."""
    for sub in _groups(df):
        hand = _hand(sub)
        for _, row in sub.iterrows():
            r, ep = int(row["rank"]), int(row["ep"])
            send, recv = hand[r]
            if row["phase"] == "backward":
                send, recv = recv, send
            for ex in MOE_EXCHANGES:
                assert row[f"{ex}_gloo_sends"] == ep - 1
            assert row["dispatch_nonempty_sends"] == sum(1 for d in range(ep) if d != r and send[d] > 0)
            assert row["dispatch_nonempty_recvs"] == sum(1 for s in range(ep) if s != r and recv[s] > 0)


def test_the_dispatcher_saw_the_same_all_to_alls(df):
    """Two c10d all-to-all calls per phase reached PyTorch's dispatcher, whose inputs (own chunk included) are
    the dispatch and combine rows of this rank: (T k) rows into dispatch and the received rows into combine in
    the forward pass."""
    for _, row in df.iterrows():
        b = int(row["hidden"]) * BYTES_PER_ELEMENT[row["dtype"]]
        assert row["dispatcher_alltoall_calls"] == 2
        assert row["dispatcher_alltoall_input_bytes"] == (
            row["dispatch_sent_bytes"] + row["dispatch_local_bytes"]
            + row["combine_sent_bytes"] + row["combine_local_bytes"])
        if row["phase"] == "forward":        # the dispatch's input: every assignment of this rank, one row each
            assert row["dispatch_sent_bytes"] + row["dispatch_local_bytes"] == (
                row["tokens_per_rank"] * row["top_k"] * b)


def _uniform(tokens, k, hidden, b, ep):
    return tokens * k * hidden * b * (ep - 1) / ep


def _tolerance(tokens, k, ep):
    p = (ep - 1) / ep
    return 3 * math.sqrt(p * (1 - p) / (tokens * k)) / p + ROUTER_BIAS_ALLOWANCE


def test_near_uniform_routing_matches_the_uniform_expectation(df):
    near = df[df["routing"] == "hf-init"]
    assert len(near) >= 40
    for _, row in near.iterrows():
        want = _uniform(row["tokens_per_rank"], 2, 256, BYTES_PER_ELEMENT[row["dtype"]], row["ep"])
        assert row["uniform_expected_bytes"] == pytest.approx(want)
        tol = _tolerance(row["tokens_per_rank"], 2, row["ep"])
        for col in ("dispatch_sent_bytes", "dispatch_recv_bytes"):
            assert abs(row[col] / want - 1) <= tol, (tuple(row[CONFIG]), row["rank"], col, row[col] / want, tol)


def test_the_uniform_expectation_fails_for_skewed_routing(df):
    """The bytes follow the routing: with the skewed tokens some rank departs from the uniform figure by more
    than the tolerance above, while the hand arithmetic from its histogram still holds (test above)."""
    sk = df[(df["routing"] == "skewed") & (df["phase"] == "forward")]
    assert len(sk) >= 6
    for ep, sub in sk.groupby("ep"):
        want = _uniform(sub["tokens_per_rank"].iloc[0], 2, 256, 4, ep)
        worst = max(abs(sub["dispatch_recv_bytes"] / want - 1))
        assert worst > _tolerance(sub["tokens_per_rank"].iloc[0], 2, ep), (ep, worst)


def test_the_expert_parallel_step_reproduced_hf(df):
    """The tool checked output and gradients against HF's unsplit MixtralSparseMoeBlock on the same tokens:
    float32 to rounding, bfloat16 to its 8-bit mantissa (sums in another order)."""
    for _, row in df.iterrows():
        assert row["max_rel_err_vs_hf"] < (1e-5 if row["dtype"] == "float32" else 2e-2)


def test_timings_are_recorded(df):
    for _, row in df.iterrows():
        for ex in MOE_EXCHANGES:
            assert 0 < row[f"{ex}_time_s_min"] <= row[f"{ex}_time_s_median"] < 10


def test_the_table_against_hand_figures(df):
    t = moe_all_to_all_table(df)
    assert len(t) == 2 * len(df.groupby(CONFIG + ["phase"]))
    r = t[(t["routing"] == "hf-init") & (t["dtype"] == "float32") & (t["ep"] == 4) & (t["tokens_per_rank"] == 1024)
          & (t["phase"] == "forward") & (t["exchange"] == "dispatch")].iloc[0]
    assert r["uniform_bytes"] == 1024 * 2 * 256 * 4 * 3 / 4 == 1572864
    sub = df[(df["routing"] == "hf-init") & (df["dtype"] == "float32") & (df["ep"] == 4)
             & (df["tokens_per_rank"] == 1024) & (df["phase"] == "forward")]
    assert r["sent_bytes_max"] == sub["dispatch_sent_bytes"].max()
    assert r["ratio_mean"] == pytest.approx(sub["dispatch_sent_bytes"].mean() / 1572864)


# ----------------------------------------------------------------- dist_compare.compare_all_to_all (chapter 18)
def test_compare_all_to_all_against_hand_figures(df):
    from llmsizing.dist_compare import compare_all_to_all

    cmp = compare_all_to_all(df)
    assert len(cmp) == len(df[df["phase"] == "forward"].groupby(CONFIG))
    r = cmp.loc[("hf-init", "float32", 4, 1024)]
    assert r["library_bytes"] == 1024 * 2 * 256 * 4 * 3 / 4 == 1572864           # T k h b (ep - 1) / ep
    assert cmp.loc[("hf-init", "bfloat16", 4, 1024), "library_bytes"] == 1572864 / 2
    assert cmp.loc[("hf-init", "float32", 2, 256), "library_bytes"] == 256 * 2 * 256 * 4 / 2 == 262144
    rows = df[(df["routing"] == "hf-init") & (df["dtype"] == "float32") & (df["ep"] == 4)
              & (df["tokens_per_rank"] == 1024) & (df["phase"] == "forward")]
    assert r["ranks"] == 4
    assert r["sent_mean_bytes"] == pytest.approx(sum(rows["dispatch_sent_bytes"]) / 4)
    assert r["ratio_busiest"] == pytest.approx(max(max(rows["dispatch_sent_bytes"]), max(rows["dispatch_recv_bytes"]))
                                               / 1572864)
    assert r["sigma"] == pytest.approx(math.sqrt(0.75 * 0.25 / 2048) / 0.75)


def test_compare_all_to_all_separates_near_uniform_from_skewed(df):
    """Near-uniform routing: the busiest rank within the tolerance of the hand-written test above; the skewed
    router's busiest rank beyond it (the library models no load imbalance)."""
    from llmsizing.dist_compare import compare_all_to_all

    cmp = compare_all_to_all(df)
    for key, r in cmp.iterrows():
        tol = _tolerance(key[3], 2, key[2])
        if key[0] == "hf-init":
            assert abs(r["ratio_mean"] - 1) <= tol and r["ratio_busiest"] - 1 <= tol, key
        else:
            assert r["ratio_busiest"] - 1 > tol, key


def test_compare_all_to_all_backward_combine_is_the_forward_dispatch_reversed(df):
    from llmsizing.dist_compare import compare_all_to_all

    fwd = compare_all_to_all(df, phase="forward", exchange="dispatch")
    bwd = compare_all_to_all(df, phase="backward", exchange="combine")
    # backward combine sends what the forward combine received, which is what the forward dispatch sent
    assert (bwd["sent_mean_bytes"] == fwd["sent_mean_bytes"]).all()
    assert (bwd["library_bytes"] == fwd["library_bytes"]).all()


def test_compare_all_to_all_refuses_bad_choices(df):
    from llmsizing.dist_compare import compare_all_to_all

    with pytest.raises(ValueError, match="phase"):
        compare_all_to_all(df, phase="sideways")
    with pytest.raises(ValueError, match="exchange"):
        compare_all_to_all(df, exchange="gather")
