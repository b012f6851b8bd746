"""The library's communication against the collectives torch.distributed issued (data/dist_collectives.csv,
written by tools/measure_memory.py dist; chapter 9). No torch needed.

Every expected value is derived by hand from the model's shapes (a LlamaForCausalLM, fp32, b x s tokens per
rank), not read back from the library. Tolerances, and why:
* DDP, FSDP2 (even shards) and FSDP2 without resharding: exact. Every byte of the model's fp32 gradients (and
  weights) crosses once per collective the ZeRO paper counts, so the ring bytes per GPU equal communication()'s.
* FSDP2 on 3 ranks: exact against the padded sizes (each parameter's rows rounded up to a multiple of 3); the
  padding itself is stated as a fraction (below 1%).
* ZeroRedundancyOptimizer: exactly 1.5x the library's ZeRO-1 ring bytes: it all-reduces the gradients (DDP) and
  broadcasts each updated parameter, where the library counts reduce-scatter + all-gather.
* TP/SP: each message exact (b s h x 4 bytes); the call counts follow DTensor's plan (HF's unfused q/k/v and
  gate/up, the embedding and the LM head), not Megatron's 4 per layer, so the ratio is stated, not bounded.
"""

import math

import pytest

from llmsizing import Model
from llmsizing.dist_compare import (collective_bytes_per_gpu, compare_collectives, compare_states, dist_model,
                                    fsdp2_unit_bytes, load_collectives)


@pytest.fixture(scope="module")
def df():
    return load_collectives()


@pytest.fixture(scope="module")
def shape(df):
    r = df.iloc[0]
    return dict(L=int(r["layers"]), h=int(r["hidden"]), a=int(r["heads"]), kv=int(r["kv_heads"]),
                d=int(r["head_dim"]), f=int(r["ffn"]), V=int(r["vocab"]), b=int(r["batch"]), s=int(r["seq"]),
                P=int(r["n_params"]))


def _hand_params(x):
    layer = x["h"] * x["a"] * x["d"] * 2 + 2 * x["h"] * x["kv"] * x["d"] + 3 * x["h"] * x["f"] + 2 * x["h"]
    return x["L"] * layer + 2 * x["V"] * x["h"] + x["h"], layer


def _run(df, layout, world, rank=0):
    return df[(df["layout"] == layout) & (df["world_size"] == world) & (df["rank"] == rank)]


def _sum(part, **eq):
    for k, v in eq.items():
        part = part[part[k] == v]
    return int((part["message_bytes"] * part["calls"]).sum()), int(part["calls"].sum())


def test_csv_covers_the_runs(df, shape):
    runs = set(zip(df["layout"], df["world_size"]))
    assert runs == {("ddp", 2), ("ddp", 4), ("zero1", 2), ("zero1", 4), ("fsdp2", 2), ("fsdp2", 3), ("fsdp2", 4),
                    ("fsdp2-no-reshard", 2), ("fsdp2-no-reshard", 3), ("fsdp2-no-reshard", 4), ("tp", 2), ("sp", 2)}
    assert _hand_params(shape)[0] == shape["P"] == dist_model(df.iloc[0]).n_params
    assert set(df["dtype"]) == {"float32"} and "other" not in set(df["kind"])


def test_every_rank_issues_the_same_collectives(df):
    cols = ["phase", "kind", "op", "message_bytes", "calls"]
    for (layout, world), part in df.groupby(["layout", "world_size"]):
        ranks = [g[cols].sort_values(cols).reset_index(drop=True) for _, g in part.groupby("rank")]
        assert len(ranks) == world
        for r in ranks[1:]:
            assert r.equals(ranks[0]), (layout, world)


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_all_reduces_the_fp32_gradients_once(df, shape, world):
    run = _run(df, "ddp", world)
    nbytes, calls = _sum(run, phase="backward", kind="all-reduce")
    assert nbytes == 4 * shape["P"] and 1 <= calls <= 3           # a few 25 MiB buckets
    # and the rotary buffers (inv_freq, original_inv_freq: d/2 fp32 each) broadcast from rank 0 every forward
    assert _sum(run, phase="forward", kind="broadcast") == (2 * (shape["d"] // 2) * 4, 1)
    cmp = compare_collectives(df).set_index(["layout", "world_size"])
    buffers = (world - 1) / world * 2 * (shape["d"] // 2) * 4
    assert cmp.loc[("ddp", world), "measured_bytes_per_gpu"] == \
        pytest.approx(2 * (world - 1) / world * 4 * shape["P"] + buffers, rel=1e-12)
    # the buffer broadcast is the only difference: 128 bytes
    assert cmp.loc[("ddp", world), "ratio"] == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("world", [2, 4])
def test_zero_redundancy_optimizer_is_all_reduce_plus_broadcast(df, shape, world):
    run = _run(df, "zero1", world)
    assert _sum(run, phase="backward", kind="all-reduce")[0] == 4 * shape["P"]
    nbytes, calls = _sum(run, phase="optimizer", kind="broadcast")
    assert nbytes == 4 * shape["P"] and calls == 9 * shape["L"] + 3   # one per parameter tensor
    cmp = compare_collectives(df).set_index(["layout", "world_size"]).loc[("zero1", world)]
    assert cmp["ratio"] == pytest.approx(1.5, abs=1e-5)               # (2 + 1) / (1 + 1) ring shares
    assert cmp["measured_message_bytes"] == pytest.approx(cmp["predicted_message_bytes"], abs=200)


@pytest.mark.parametrize("world", [2, 4])
def test_fsdp2_two_gathers_one_reduce_scatter_per_unit(df, shape, world):
    run = _run(df, "fsdp2", world)
    L, P = shape["L"], 4 * shape["P"]
    assert _sum(run, phase="forward", kind="all-gather") == (P, L + 1)
    assert _sum(run, phase="backward", kind="all-gather") == (P, L + 1)
    assert _sum(run, phase="backward", kind="reduce-scatter") == (P, L + 1)
    layer = 4 * _hand_params(shape)[1]
    assert sorted(set(run["message_bytes"])) == [layer, P - L * layer]
    no = _run(df, "fsdp2-no-reshard", world)                              # ZeRO-2-like: gathered once
    assert _sum(no, phase="forward", kind="all-gather") == (P, L + 1)
    assert _sum(no, phase="backward", kind="all-gather") == (0, 0)
    assert _sum(no, phase="backward", kind="reduce-scatter") == (P, L + 1)
    cmp = compare_collectives(df).set_index(["layout", "world_size"])
    assert cmp.loc[("fsdp2", world), "ratio"] == pytest.approx(1.0, abs=1e-12)
    assert cmp.loc[("fsdp2-no-reshard", world), "ratio"] == pytest.approx(1.0, abs=1e-12)


def test_fsdp2_pads_uneven_shards(df, shape):
    run = _run(df, "fsdp2", 3)
    x = shape
    ceil3 = lambda r: math.ceil(r / 3) * 3                               # noqa: E731
    layer = 4 * (ceil3(x["a"] * x["d"]) * x["h"] + 2 * ceil3(x["kv"] * x["d"]) * x["h"] + ceil3(x["h"]) * x["a"]
                 * x["d"] + 2 * ceil3(x["f"]) * x["h"] + ceil3(x["h"]) * x["f"] + 2 * ceil3(x["h"]))
    root = 4 * (2 * ceil3(x["V"]) * x["h"] + ceil3(x["h"]))
    assert sorted(set(run["message_bytes"])) == [layer, root]
    m = dist_model(df.iloc[0])
    assert fsdp2_unit_bytes(m, 3) == [root] + [layer] * x["L"]
    assert fsdp2_unit_bytes(m, 2) == [4 * (2 * x["V"] * x["h"] + x["h"])] + [4 * _hand_params(x)[1]] * x["L"]
    padding = _sum(run, phase="forward", kind="all-gather")[0] / (4 * x["P"]) - 1
    assert 0 < padding < 0.01
    assert compare_collectives(df).set_index(["layout", "world_size"]).loc[("fsdp2", 3), "ratio"] == \
        pytest.approx(1 + padding, rel=1e-12)


def test_tensor_parallel_messages_and_calls(df, shape):
    x, run = shape, _run(df, "tp", 2)
    act = 4 * x["b"] * x["s"] * x["h"]
    ar = run[run["kind"] == "all-reduce"]
    assert set(ar["message_bytes"]) == {act}
    # forward: embedding + o and down per layer; backward: LM head input + q, k, v, gate, up per layer
    assert _sum(run, phase="forward", kind="all-reduce")[1] == 2 * x["L"] + 1
    assert _sum(run, phase="backward", kind="all-reduce")[1] == 5 * x["L"] + 1
    assert _sum(run, phase="forward", kind="all-gather") == (4 * x["b"] * x["s"] * x["V"], 1)   # the logits
    cmp = compare_collectives(df).set_index(["layout", "world_size"]).loc[("tp", 2)]
    assert cmp["predicted_calls"] == 4 * x["L"]                         # Megatron: 2 forward + 2 backward


def test_sequence_parallel_messages_and_calls(df, shape):
    x, run = shape, _run(df, "sp", 2)
    act = 4 * x["b"] * x["s"] * x["h"]
    for phase in ("forward", "backward"):
        assert _sum(run[run["message_bytes"] == act], phase=phase, kind="all-gather")[1] == 2 * x["L"] + 1
        assert _sum(run, phase=phase, kind="reduce-scatter") == ((2 * x["L"] + 1) * act, 2 * x["L"] + 1)
    assert _sum(run, phase="forward", kind="all-gather")[0] == (2 * x["L"] + 1) * act + 4 * x["b"] * x["s"] * x["V"]
    # the replicated norm weights' Partial gradients, all-reduced by each op of the for-loop AdamW that reads them
    opt = run[run["phase"] == "optimizer"]
    assert set(opt["kind"]) == {"all-reduce"} and set(opt["message_bytes"]) == {4 * x["h"]}
    assert opt["calls"].sum() % (2 * x["L"] + 1) == 0


def test_states_rank_by_rank():
    st = compare_states()
    assert (st["param_error_bytes"] == 0).all()
    dp = st[~st["layout"].isin(["tp", "sp"])]
    assert (dp["grad_error_bytes"] == 0).all()
    exact = dp[dp["layout"] != "zero1"]
    assert (exact["optimizer_state_error_bytes"] == 0).all()
    z = dp[dp["layout"] == "zero1"]
    m = dist_model(load_collectives().iloc[0])
    # ZeroRedundancyOptimizer hands out whole parameters: off by at most the embedding's two fp32 moments
    assert (z["optimizer_state_error_bytes"].abs() <= 8 * m.vocab * m.hidden).all()
    assert z.groupby("world_size")["optimizer_state_error_bytes"].sum().abs().max() == 0


def test_broadcast_cost_and_validation():
    assert collective_bytes_per_gpu("broadcast", 300.0, 3) == pytest.approx(200.0)
    assert collective_bytes_per_gpu("all-reduce", 300.0, 3) == pytest.approx(400.0)
    with pytest.raises(ValueError, match="kind"):
        collective_bytes_per_gpu("gossip", 1.0, 2)
    with pytest.raises((ValueError, TypeError), match="n"):
        fsdp2_unit_bytes(Model("x", layers=1, hidden=8, heads=2, ffn_hidden=16, vocab=32), 0)


def test_edge_inputs_raise_value_or_type_errors():
    import numpy as np

    from llmsizing.charts import render_collectives_vs_prediction

    m = Model("x", layers=2, hidden=8, heads=2, ffn_hidden=16, vocab=30)
    assert fsdp2_unit_bytes(m, np.int64(4)) == fsdp2_unit_bytes(m, 4)
    # by hand: vocab 30 over 4 ranks pads to 32 rows; q/k/v/o (8 x 8), MLP 16 rows, norms 8
    assert fsdp2_unit_bytes(m, 4, dtype_bytes=1) == [2 * 32 * 8 + 8] + [4 * 64 + 2 * 16 * 8 + 8 * 16 + 2 * 8] * 2
    assert len(fsdp2_unit_bytes("llama-3-8b", 8)) == 33
    for bad in (float("nan"), -1.0, float("inf")):
        with pytest.raises(ValueError):
            collective_bytes_per_gpu("all-gather", bad, 2)
    with pytest.raises((ValueError, TypeError)):
        fsdp2_unit_bytes(m, 2, dtype_bytes=0)
    with pytest.raises((ValueError, TypeError)):
        fsdp2_unit_bytes(m, 2.5)
    with pytest.raises(ValueError, match="world"):
        render_collectives_vs_prediction(8)
    with pytest.raises((ValueError, TypeError), match="world"):
        render_collectives_vs_prediction("2")


def test_a_panel_without_runs_says_so_under_its_title():
    """No TP/SP run was measured on 4 ranks: chapter 9's second figure leaves that panel empty, and it must
    say why instead of showing a bare title (read09); the 2-rank figure has runs in both panels."""
    from llmsizing.charts import render_collectives_vs_prediction

    four = render_collectives_vs_prediction(4).figure.axes[1]
    assert not four.axison and any("no run on 4 ranks" in t.get_text() for t in four.texts)
    two = render_collectives_vs_prediction(2).figure.axes[1]
    assert two.axison and not any("no run" in t.get_text() for t in two.texts)


def test_torch_zero1_time_ratio_by_hand():
    """(2(n-1)/n + 1) / (2(n-1)/n): n=2: (1 + 1) / 1 = 2; n=4: (1.5 + 1) / 1.5 = 5/3; n=64: (126/64 + 1) /
    (126/64) = 190/126 = 1.508 (chapter 9, exercise 1)."""
    import pytest

    from llmsizing.dist_compare import torch_zero1_time_ratio

    assert torch_zero1_time_ratio(2) == pytest.approx(2.0)
    assert torch_zero1_time_ratio(4) == pytest.approx(5 / 3)
    assert torch_zero1_time_ratio(64) == pytest.approx(190 / 126)
    with pytest.raises(ValueError, match="n"):
        torch_zero1_time_ratio(1)
