"""Issue 34: the planner searches ZeRO-2 and ZeRO-3 under a pipeline (a dense model), ZeRO-3 in the form Meta
ran Llama 3 405B and torchtitan runs it with PP (parallel.PIPELINED_FSDP: the weights gathered once per step and
kept, a chunk's gradients reduce-scattered once per run of its backwards). Every row is priced as step_time and
training_memory price the same Parallel, written out here by hand; tests/test_planner_speed.py compares whole
searches with one step_time per plan."""

import numpy as np
import pandas as pd
import pytest

from llmsizing import llama3_405b_layout, plan, step_time, training_memory
from llmsizing.catalog import get_gpu
from llmsizing.memory import USABLE_FRACTION
from llmsizing.parallel import Parallel
from llmsizing.pipeline_schedule import PIPELINED_FSDP, pipelined_zero_fields, reduce_scatter_windows
from llmsizing.plan_dp import _run_exposed, _run_windows
from llmsizing.plan_rank import pipelined_zero_winners

KW = dict(tokens=15.6e12, seq=8192, global_batch=2048, gpus=("H100 SXM",), max_gpus=16384,
          shard_under_pipeline=True)      # (issue 34: opt-in)


@pytest.fixture(scope="module")
def table():
    return plan("llama-3.1-405b", **KW)


def test_the_fields_are_metas():
    """The planner's ZeRO-3 under a pipeline is llama3_405b_layout's FSDP (Dubey et al. 2024, Sec. 3.3.2)."""
    meta = llama3_405b_layout(128)
    assert {f: getattr(meta, f) for f in PIPELINED_FSDP} == PIPELINED_FSDP
    assert pipelined_zero_fields(3, 16) == PIPELINED_FSDP
    assert pipelined_zero_fields(3, 1) == {} and pipelined_zero_fields(2, 16) == {}


def test_windows_by_hand():
    """pp = 2, m = 2 micro-batches, no interleaving, 2 FSDP units: one run of backwards, so one reduce-scatter
    per unit, issued after the last backward; unit 1's window is unit 2's backward (bwd / 2), unit 2's nothing.
    Traffic T = 1 s, a micro-batch's backward 0.4 s: exposed 0.5 - 0.2 + 0.5 = 0.8 s on either stage."""
    for stage in (0, 1):
        assert sorted(reduce_scatter_windows(2, 2, 1, stage, 2, 0.3, 0.4, per_run=True)) == [0.0, 0.2]
    got = _run_exposed(np.array([2]), np.array([2]), np.array([1]), np.array([2]), np.array([0.3]),
                       np.array([0.4]), np.array([1.0]))
    assert got[0] == pytest.approx(0.8, rel=1e-12)


@pytest.mark.parametrize("pp, m, v, units", [(4, 8, 2, 4), (4, 8, 2, 5), (16, 16, 8, 8), (4, 12, 3, 9),
                                             (3, 6, 1, 7), (16, 32, 8, 8), (2, 4, 1, 3),
                                             (2, 4, 1, 1)])
def test_windows_equal_the_schedule(pp, m, v, units):
    """_run_windows (prefix sums) gives reduce_scatter_windows' windows, stage by stage."""
    fwd, bwd = 0.37, 1.13
    for stage, (counts, whole, nf, nb) in enumerate(_run_windows(pp, m, v, units)):
        mine = np.repeat(np.where(whole, bwd / units + fwd / units * nf + bwd / units * nb, 0.0),
                         counts.astype(int))
        ref = reduce_scatter_windows(pp, m, v, stage, units, fwd, bwd, per_run=True)
        np.testing.assert_allclose(np.sort(mine), np.sort(ref), rtol=1e-14, atol=0)


def _by_hand(row):
    """The Parallel of a 405B plan row, written out: the split counting the embedding and the loss where pp
    does not divide the 126 layers, FSDP without resharding and per-run reduce-scatters for ZeRO-3."""
    pp, zero = int(row.pp), int(row.zero)
    accounted = 126 % pp != 0
    z3 = dict(reshard_after_forward=False, grad_reduce="chunk_run") if zero == 3 else {}
    return Parallel(tp=int(row.tp), pp=pp, dp=int(row.dp), zero=zero, sp=True,
                    virtual_stages=int(row.virtual_stages), account_for_embedding=accounted,
                    account_for_loss=accounted, **z3)


def test_rows_equal_step_time_and_training_memory(table):
    """30 ZeRO-2/3 rows under a pipeline against one step_time and one training_memory each."""
    new = table[(table["zero"] >= 2) & (table["pp"] > 1)]
    assert set(new["zero"]) == {2, 3} and (new["virtual_stages"] > 1).any() and (new["pp"] == 16).any()
    rows = pd.concat([new[new["zero"] == 3].head(15), new[new["zero"] == 2].head(15)])
    for row in rows.itertuples():
        n = None if pd.isna(row.recompute_layers) else int(row.recompute_layers)
        kw = dict(batch=int(row.micro_batch), seq=8192, grad_accum=int(row.grad_accum), recompute=row.recompute,
                  recompute_layers=n if n is not None and row.recompute == "full" and n < 126 // (
                      row.pp * row.virtual_stages) else None)
        par = _by_hand(row)
        st = step_time("llama-3.1-405b", "H100 SXM", par, **kw)
        mem = training_memory("llama-3.1-405b", parallel=par, **kw)
        assert row.step_time_s == pytest.approx(st.step_s, rel=1e-9)
        assert row.memory_per_gpu_bytes == pytest.approx(mem.total_bytes, rel=1e-9)


def test_metas_degrees_and_the_memory_line():
    """Meta's degrees (TP8 PP16 VP8 DP128) under ZeRO-3 as Meta ran it: without recomputation they need more
    than the planner's 90% of an H100 (0.9 x 79.6 GiB = 71.7 GiB) but less than 99% (78.9 GiB), so at
    usable_fraction=0.99 the fastest 16,384-GPU plan takes Meta's degrees without recomputation, priced as
    step_time prices them."""
    cap = get_gpu("H100 SXM").memory_bytes
    kw = dict(batch=1, seq=8192, grad_accum=16)
    need = training_memory("llama-3.1-405b", parallel=llama3_405b_layout(128), **kw).total_bytes
    assert USABLE_FRACTION * cap < need < 0.99 * cap
    wide = plan("llama-3.1-405b", **KW, usable_fraction=0.99)
    top = wide[wide["n_gpus"] == 16384].sort_values("step_time_s").iloc[0]
    assert (top["tp"], top["pp"], top["virtual_stages"], top["dp"], top["recompute"]) == (8, 16, 8, 128, "none")
    assert top["zero"] >= 2
    st = step_time("llama-3.1-405b", "H100 SXM", _by_hand(top), **kw)
    assert top["step_time_s"] == pytest.approx(st.step_s, rel=1e-9)
    assert top["memory_per_gpu_bytes"] == pytest.approx(
        training_memory("llama-3.1-405b", parallel=_by_hand(top), **kw).total_bytes, rel=1e-9)


def test_listed_only_where_they_can_win(table):
    """A ZeRO-2/3 plan under a pipeline is listed only where no plan of the same GPUs, micro-batch and dp is
    as fast and as light; by hand on a small table: the ZeRO-2 row as fast as and lighter than the ZeRO-1 one
    stays, the ZeRO-3 row slower and heavier goes, a ZeRO-3 row tied with ZeRO-1 on both goes, the plans
    without a pipeline all stay."""
    df = pd.DataFrame({"gpu": ["H"] * 5, "tp": 8, "cp": 1, "pp": [4, 4, 4, 1, 8], "micro_batch": 1,
                       "dp": [8, 8, 8, 8, 8], "zero": [1, 2, 3, 3, 3],
                       "step_time_s": [2.0, 2.0, 2.5, 9.0, 3.0],
                       "memory_per_gpu_bytes": [50.0, 40.0, 60.0, 1.0, 30.0]})
    assert pipelined_zero_winners(df).tolist() == [True, True, False, True, True]
    tie = df.iloc[[0, 2]].copy()
    tie["step_time_s"], tie["memory_per_gpu_bytes"] = 2.0, 50.0
    assert pipelined_zero_winners(tie).tolist() == [True, False]
    new = table[(table["zero"] >= 2) & (table["pp"] > 1)]
    assert len(new)


def test_a_mixture_of_experts_keeps_zero_1_under_pipelines():
    df = plan("mixtral-8x7b", tokens=1e12, seq=4096, global_batch=256, gpus=("H100 SXM",), max_gpus=256,
              shard_under_pipeline=True)
    assert not ((df["zero"] >= 2) & (df["pp"] > 1)).any()


def test_the_default_search_has_no_zero_2_or_3_under_a_pipeline():
    """The option is off by default (it doubles the layouts searched): the default search lists ZeRO-2/3
    only without a pipeline, and its pipelined plans are ZeRO-0/1."""
    df = plan("llama-3.1-405b", **{**KW, "shard_under_pipeline": False}, explain=False)
    assert not ((df["zero"] >= 2) & (df["pp"] > 1)).any()
    assert ((df["zero"] >= 2) & (df["pp"] == 1)).any() and (df["pp"] > 1).any()
    with pytest.raises(TypeError, match="shard_under_pipeline"):
        plan("llama-3.1-405b", **{**KW, "shard_under_pipeline": "yes"})


def test_the_option_adds_them(table):
    """shard_under_pipeline=True adds ZeRO-2 and ZeRO-3 rows under pipelines and keeps every plan the
    default search lists, with the same numbers (its new rows are listed only where they win)."""
    new = table[(table["zero"] >= 2) & (table["pp"] > 1)]
    assert set(new["zero"]) == {2, 3}
    default = plan("llama-3.1-405b", **{**KW, "shard_under_pipeline": False}, explain=False)
    key = ["gpu", "tp", "cp", "pp", "virtual_stages", "dp", "zero", "micro_batch", "recompute"]
    both = default.merge(table, on=key, suffixes=("", "_on"), how="left", validate="one_to_one")
    assert both["step_time_s_on"].notna().all()
    np.testing.assert_allclose(both["step_time_s_on"], both["step_time_s"], rtol=0, atol=0)
    np.testing.assert_allclose(both["memory_per_gpu_bytes_on"], both["memory_per_gpu_bytes"], rtol=0, atol=0)
