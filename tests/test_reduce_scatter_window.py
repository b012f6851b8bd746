"""FSDP2's per-micro-batch gradient reduce-scatter under a pipeline: the window each call hides behind.

PyTorch FSDP2 (``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``, ``FSDPParamGroup.post_backward``)
makes the compute stream wait for the previous reduce-scatter's event only when it issues the next one, and
``_fsdp_state.py``'s ``_root_post_backward_final_callback`` waits for the last one only when
``is_last_backward`` is set. So a unit's reduce-scatter runs behind everything the GPU computes from its issue
(after the unit's backward) to the next issue (after the next unit's backward): one unit's backward inside a
chunk, the forward chunks a 1F1B schedule places before the next backward for a chunk's last unit, nothing
after the step's last backward. The schedules below are laid out by hand from Narayanan et al. 2021 (Sec.
2.2): stage ``i`` of ``p`` runs ``p - i - 1`` warm-up forwards (1F1B) or ``2 (p - i - 1) + (v - 1) p``
warm-up chunk forwards (interleaved), then one forward and one backward in turn, then the remaining backwards.
"""

from types import SimpleNamespace

import pytest

from llmsizing.pipeline_schedule import reduce_scatter_windows, zero3_exposed_s


def test_1f1b_two_stages_by_hand():
    # p = 2, m = 2, two units per stage; a micro-batch's forward 1 and backward 2: a unit's 0.5 and 1.
    # Stage 0: F0 F1 B0 B1. B0's first unit hides behind B0's second unit (1); B0's last behind B1's first
    # unit (1: no forward in between); B1's first behind its second (1); B1's last behind nothing (0).
    assert reduce_scatter_windows(2, 2, 1, 0, 2, 1.0, 2.0) == pytest.approx((1, 1, 1, 0))
    # Stage 1: F0 B0 F1 B1. B0's last unit also hides behind F1 (two units of 0.5) and B1's first unit.
    assert reduce_scatter_windows(2, 2, 1, 1, 2, 1.0, 2.0) == pytest.approx((1, 2, 1, 0))


def test_interleaved_two_stages_by_hand():
    # p = 2, m = 2, v = 2, one unit per chunk; a unit's forward 1 and backward 2.
    # Stage 0: warm-up 2 (2 - 0 - 1) + 2 = 4 chunk forwards, i.e. all of them, then four backwards: each
    # last unit hides behind the next backward's first unit (2), the step's last behind nothing.
    assert reduce_scatter_windows(2, 2, 2, 0, 2, 2.0, 4.0) == pytest.approx((2, 2, 2, 0))
    # Stage 1: warm-up 2 chunk forwards, then F(0, chunk 1) B(0, chunk 1) F(1, chunk 1) B(1, chunk 1), then
    # B(0, chunk 0) B(1, chunk 0): the first backward's reduce-scatter hides behind a forward chunk (1) and
    # the next backward's unit (2).
    assert reduce_scatter_windows(2, 2, 2, 1, 2, 2.0, 4.0) == pytest.approx((3, 2, 2, 0))


def test_exposed_by_hand_against_the_old_rule():
    # Stage 0 of the 1F1B case above with 6 s of reduce-scatter per step: 1.5 s a call against windows
    # (1, 1, 1, 0): 0.5 + 0.5 + 0.5 + 1.5 = 3 s exposed. Without a pipeline each micro-batch's 3 s against its
    # 2 s backward: 2 x 1 = 2 s (the last call's wait at the step's end is what the pipeline rule adds).
    piped = SimpleNamespace(pp=2, virtual_stages=1)
    assert zero3_exposed_s(piped, 2, 2, 1.0, 2.0, 6.0) == pytest.approx(3.0)
    alone = SimpleNamespace(pp=1, virtual_stages=1)
    assert zero3_exposed_s(alone, 2, 2, 1.0, 2.0, 6.0) == pytest.approx(2.0)
    # the step waits for the stage that waits longest: stage 1's windows (1, 2, 1, 0) leave
    # 0.5 + 0 + 0.5 + 1.5 = 2.5 s, stage 0's 3 s
    assert zero3_exposed_s(SimpleNamespace(pp=2, virtual_stages=1), 2, 2, 1.0, 2.0, 6.0) == pytest.approx(3.0)


def test_calls_match_the_collective():
    # one window per call: units x micro-batches, whatever the chunks (7 units in 4 chunks: 2, 2, 2, 1)
    assert len(reduce_scatter_windows(4, 8, 4, 1, 7, 1.0, 2.0)) == 7 * 8
    assert len(reduce_scatter_windows(4, 6, 1, 3, 5, 1.0, 2.0)) == 5 * 6


@pytest.mark.parametrize("kw, name", [(dict(units=1, virtual_stages=2), "units"),
                                      (dict(stage=2), "stage"), (dict(forward=-1.0), "forward")])
def test_bad_input_names_the_parameter(kw, name):
    args = dict(pp=2, micro_batches=2, virtual_stages=1, stage=0, units=2, forward=1.0, backward=2.0) | kw
    with pytest.raises(ValueError, match=name):
        reduce_scatter_windows(**args)


# ---------------------------------------------------- grad_reduce="chunk_run": once per run of a chunk
def test_runs_of_a_chunks_backwards_by_hand():
    # Megatron-LM's interleaved order runs chunk v - 1 - (k // p) % v for the k-th backward: p backwards of
    # one chunk in a row. p = 2, m = 4, v = 2: chunks 1 1 0 0 1 1 0 0, two runs per chunk; m = p: one run.
    from llmsizing.pipeline_schedule import grad_reduce_runs

    assert grad_reduce_runs(2, 4, 2) == 2
    assert grad_reduce_runs(2, 2, 2) == 1
    assert grad_reduce_runs(16, 32, 8) == 2 and grad_reduce_runs(16, 16, 8) == 1    # Meta's 8K rows
    assert grad_reduce_runs(4, 8, 1) == 1                # plain 1F1B: one chunk, all backwards one run
    assert grad_reduce_runs(1, 3, 1) == 1                # no pipeline: accumulate, reduce once


def test_chunk_run_windows_interleaved_by_hand():
    # p = 2, m = 4, v = 2, one unit per chunk, a unit's forward 1 and backward 2 (forward 2, backward 4 per
    # micro-batch). Stage 0: 4 warm-up chunk forwards, then F4 B0 F5 B1 F6 B2 F7 B3, then B4 B5 B6 B7; runs
    # end at B1, B3, B5, B7. B1's reduce-scatter hides behind F6 B2 F7 and B3's first unit (1 + 2 + 1 + 2);
    # B3's behind B4 and B5's unit (2 + 2); B5's behind B6 and B7's (4); B7's behind nothing.
    assert reduce_scatter_windows(2, 4, 2, 0, 2, 2.0, 4.0, per_run=True) == pytest.approx((6, 4, 4, 0))
    # Stage 1: F0 F1, then F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5, then B6 B7: B1's window F4 B2 F5 + B3's unit
    # (6), B3's F6 B4 F7 + B5's (6), B5's B6 + B7's (4), B7's nothing.
    assert reduce_scatter_windows(2, 4, 2, 1, 2, 2.0, 4.0, per_run=True) == pytest.approx((6, 6, 4, 0))


def test_chunk_run_without_a_pipeline_by_hand():
    # p = 1, m = 3, two units: F0 B0 F1 B1 F2 B2, one run ending at B2: its first unit's call hides behind
    # the second unit's backward (a unit's backward: 4 / 2 = 2), the last behind nothing
    assert reduce_scatter_windows(1, 3, 1, 0, 2, 2.0, 4.0, per_run=True) == pytest.approx((2, 0))
    par = SimpleNamespace(pp=1, virtual_stages=1, grad_reduce="chunk_run")
    # two calls of 3 each: 3 - 2 and 3 - 0
    assert zero3_exposed_s(par, 3, 2, 2.0, 4.0, 6.0) == pytest.approx(1 + 3)


def test_chunk_run_needs_fsdp():
    from llmsizing import Parallel

    with pytest.raises(ValueError, match="zero=3"):
        Parallel(dp=8, zero=1, grad_reduce="chunk_run")
    with pytest.raises(ValueError, match="grad_reduce"):
        Parallel(dp=8, zero=3, grad_reduce="per_step")
