"""A batch over the KV room but within max_num_seqs is priced as vLLM's scheduler runs it (issue 34,
session 30, kv30).

vLLM V1's scheduler (``vllm/v1/core/sched/scheduler.py``) takes a waiting request only if
``kv_cache_manager.allocate_slots`` finds its blocks (``if new_blocks is None: ... break``), and a running
request that cannot get its next block preempts the latest running one (``self.running.pop()``;
``_preempt_request`` frees its blocks and puts it back at the head of the waiting queue). Of a closed batch of
equal requests the ones whose whole sequences' blocks fit run to the end; the library prices that as waves of
the KV room (``kv_batch``). A static batch (TensorRT-LLM's static batching) runs as stated.

The KV room is worked out by hand, as tests/test_max_num_seqs_cap.py does, from Llama-3-8B's config.json (32
layers, 8 KV heads of 128, 16-bit: 2 x 32 x 8 x 128 x 2 = 131,072 bytes per token, 2,097,152 per 16-token
block; 8,030,261,248 parameters of 2 bytes), the H100 SXM driver's 81,559 MiB, vLLM's 0.9 utilisation, the
profiled activation peak at vLLM's 1,024 sequences (the sampler's 67,108,864 + 2 x 1,024 x 128,256 x 4 bytes,
larger than the forward's 973,078,528) and the library's stated 1 GiB + 0.5 GiB allowances.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from llmsizing.charts.serve_tune import _batch_state, _fit_text
from llmsizing.serve import serving
from llmsizing.serve_fit import _serving_of
from llmsizing.serve_replay import Replay, replay_scheduler, waves_against_vllm

MIB, GIB = 2**20, 2**30
KW = dict(prompt=1024, output=256)        # 1,280 tokens: 80 blocks a sequence


def _blocks():
    act = max(973_078_528, 8192 * 4096 * 2 + 2 * 1024 * 128_256 * 4)
    kv = 0.9 * 81_559 * MIB - 8_030_261_248 * 2 - act - 1 * GIB - 0.5 * GIB
    return math.floor(kv / (16 * 2 * 32 * 8 * 128 * 2))


def _room(tokens: int = 1280):
    return _blocks() // math.ceil(tokens / 16)


ROOM = _room()


def _s(batch, **kw):
    return serving("llama-3-8b", "H100 SXM", batch=batch, **{**KW, **kw})


def test_the_room_by_hand_is_under_the_cap():
    # 27,742 blocks / 80 = 346 sequences, under vLLM's 1,024 on an H100
    assert ROOM == 346
    s = _s(1)
    assert (s.kv_batch, s.max_num_seqs, s.max_batch, s.batch_bound) == (346, 1024, 346, "kv")


def test_twice_the_room_runs_in_two_waves_of_the_room():
    room, two = _s(ROOM), _s(2 * ROOM)
    assert two.batch == 692 < two.max_num_seqs                   # within the cap: the KV room queues it
    assert (two.running_batch, two.waves, two.queued, two.last_wave) == (346, 2, 346, None)
    assert not two.fits and two.running_bound == "kv" and room.running_bound == "batch" and room.fits
    for f in ("decode_step_s", "itl_s", "ttft_s", "batch_prefill_s", "output_tokens_per_s",
              "usd_per_million_output_tokens", "usd_per_million_input_tokens"):
        assert getattr(two, f) == getattr(room, f), f
    # the waves (waves_s; cycle_s is the cohort run that counts the preemptions' churn, priced to the last
    # token, cohort36: tests/test_serve_churn_cycle.py; here within 1% of the waves plus the churn)
    assert two.waves_s == pytest.approx(2 * room.cycle_s, rel=1e-12)
    assert abs(two.cycle_s / (two.waves_s + two.churn_s) - 1) < 0.01 and room.churn_s == 0
    # the waves' last first token (last_ttft_s over the room is vLLM's admission, ttft35:
    # tests/test_serve_last_ttft.py)
    assert two.waves_last_ttft_s == pytest.approx(room.cycle_s + room.batch_prefill_s, rel=1e-12)


@pytest.mark.parametrize("batch,waves,last", [(347, 2, 1), (700, 3, 8), (1024, 3, 332)])
def test_waves_of_the_room_counted_by_hand(batch, waves, last):
    # 347 = 346 + 1; 700 = 2 x 346 + 8; 1,024 (the cap) = 2 x 346 + 332
    s = _s(batch)
    assert (s.running_batch, s.waves, s.last_wave.batch) == (346, waves, last)
    assert s.waves_s == pytest.approx((waves - 1) * _s(346).cycle_s + _s(last).cycle_s, rel=1e-12)


def test_over_both_bounds_the_smaller_sets_the_running_batch():
    # 2,048 requests: over the cap (1,024) and the room (346); the room is the smaller
    s = _s(2048)
    assert (s.running_batch, s.waves, s.running_bound) == (346, 6, "kv")      # ceil(2,048 / 346) = 6
    # a cap under the room: the cap sets it
    c = _s(700, max_num_seqs=300)
    assert c.kv_batch >= 300 and (c.running_batch, c.waves, c.running_bound) == (300, 3, "max_num_seqs")
    assert c.batch_bound == "max_num_seqs" and s.batch_bound == "kv"


def test_a_static_batch_runs_as_stated_and_does_not_fit():
    once = _s(2 * ROOM, batching="static")
    assert (once.running_batch, once.waves, once.running_bound, once.fits) == (692, 1, "batch", False)
    assert _batch_state(once) == "does not fit"
    assert _fit_text(once) == "DOES NOT FIT (KV cache holds 346)"
    # all at once is a slower step than the room's: more KV read per step
    assert once.decode_step_s > _s(ROOM).decode_step_s


def test_a_static_batch_over_the_cap_within_the_room_runs_at_once_on_the_chart():
    # 128 + 128 tokens: 16 blocks a sequence, so the room, 27,742 blocks / 16 = 1,733 sequences, is above
    # vLLM's 1,024 on an H100; a static batch of 1,100 runs at once, one wave: the chart must not call it
    # queued (review30a)
    s = _s(1100, prompt=128, output=128, batching="static")
    assert _blocks() == 27_742 and s.kv_batch == _room(256) == 1733 and s.max_num_seqs == 1024
    assert (s.running_batch, s.waves, s.fits) == (1100, 1, False)
    assert _batch_state(s) == "fits"
    assert "queues" not in _fit_text(s) and _fit_text(s).startswith("fits: a static batch")
    # the same batch under continuous batching is queued by the cap
    c = _s(1100, prompt=128, output=128)
    assert (c.running_batch, c.waves, _batch_state(c)) == (1024, 2, "queued")


def test_the_chart_names_the_kv_room_as_the_bound():
    s = _s(2 * ROOM)
    assert _batch_state(s) == "queued"
    assert _fit_text(s) == ("above the KV room of 346 sequences: vLLM runs 346 at once and queues the rest "
                            "(2 waves)")
    frame = s.to_frame()["value"]
    assert frame["running_bound"] == "kv" and frame["waves"] == 2


def test_one_sequence_that_does_not_fit_is_queued_by_the_cap_only():
    # Llama-3-70B in bf16 (141 GB of weights) leaves no KV room on one H100: vLLM refuses to start. The result
    # still prices what it is asked, and says it does not fit
    s = serving("llama-3-70b", "H100 SXM", batch=4)
    assert s.kv_batch == 0 and not s.fits and (s.running_batch, s.waves, s.running_bound) == (4, 1, "batch")


def test_batching_is_checked():
    with pytest.raises(ValueError, match="batching"):
        _s(1, batching="in-flight")


def test_the_static_published_rows_over_the_room_run_whole():
    # data/serving_published.csv rows 4, 47 and 49 (0-based): TensorRT-LLM static batching, each batch over
    # vLLM's KV room as the library counts it (60 > 53, 64 > 63, 64 > 59), priced whole
    df = pd.read_csv(Path(__file__).resolve().parents[1] / "data" / "serving_published.csv")
    for i in (4, 47, 49):
        r = next(df.iloc[[i]].itertuples())
        assert r.batching == "static"
        s = _serving_of(r)
        assert s.kv_batch < s.batch == s.running_batch and s.waves == 1 and not s.fits


def test_the_replayed_scheduler_preempts_and_its_waves_match_the_library():
    # 381 requests (1.1 x the room): vLLM's rules admit them all on their prompts' blocks and preempt some
    # in decode; run with the cap at the room, nothing is preempted and the time is the library's waves'
    r = waves_against_vllm("llama-3-8b", "H100 SXM", prompt=1024, output=256, over_room=1.1)
    assert r.batch == 381 and r.kv_batch == ROOM and r.decode_bound == "memory"
    assert r.waves.preemptions == 0 and r.vllm.preemptions > 0 and r.vllm.recomputed_tokens > 0
    assert r.waves.recomputed_tokens == 0
    assert r.waves.seconds == pytest.approx(r.waves_s, rel=0.02)
    assert 0.7 < r.ratio < 1.3


def test_the_replay_counts_blocks_by_hand():
    # 3 requests of 16 + 16 tokens (2 blocks each at the end) in 5 blocks: all 3 are admitted on 1 block
    # each; at the 17th token each needs a 2nd block: 2 get it (5 = 3 + 2), the third is preempted, losing
    # the KV of its 16 computed prompt tokens (its 1st generated token's KV was never computed), and
    # recomputes them (with that token: 17) once the first two finish. Steps: 1 prefill (each samples its
    # 1st token), 15 decode steps for the first two (the step of the preemption included), then the third's
    # recompute (which samples its 2nd token) and its 14 decode steps: 31 steps at 1 s each
    r = replay_scheduler(5, 3, 16, 16, 10, lambda decode, prefill: 1.0)
    assert (r.preemptions, r.recomputed_tokens, r.steps, r.seconds) == (1, 16, 31, 31.0)
    assert r.last_first_token_s == 1.0        # all three sampled their first token in step 1 (churn35)
    # with room for all three whole sequences nothing is preempted: 1 prefill + 15 decode steps
    assert replay_scheduler(6, 3, 16, 16, 10, lambda d, p: 1.0) == Replay(16.0, 16, 0, 0)


@pytest.mark.parametrize("blocks,batch,prompt,output,budget", [(5, 3, 16, 16, 8192), (20, 12, 40, 24, 48),
                                                                 (30, 9, 100, 60, 32)])
def test_the_replay_conserves_tokens(blocks, batch, prompt, output, budget):
    # every token an engine step computes is either in a finished request's KV (prompt + output - 1 tokens:
    # the last sampled token is never fed back) or was thrown away by a preemption and computed again; with
    # a small token budget the recompute of a readmitted request is chunked over several steps (review30a)
    computed = []

    def price(decode, prefill):
        computed.append(len(decode) + prefill)
        return 1.0

    r = replay_scheduler(blocks, batch, prompt, output, 10, price, max_num_batched_tokens=budget)
    assert r.preemptions > 0 and r.steps == len(computed)
    assert sum(computed) == batch * (prompt + output - 1) + r.recomputed_tokens


def test_the_replay_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match="blocks"):
        replay_scheduler(1, 3, 16, 16, 10, lambda d, p: 1.0)      # one sequence needs 2 blocks
    with pytest.raises(ValueError, match="tp"):
        waves_against_vllm("llama-3-8b", "H100 SXM", prompt=1024, output=256, tp=2)
    # Mistral-7B's 4,096-token sliding window: at 4,096 + 2,048 tokens vLLM frees its old blocks, which the
    # replay does not (its waves preempted 85 times and took 1.34x cycle_s; review30a)
    with pytest.raises(ValueError, match="sliding_window=4096"):
        waves_against_vllm("mistral-7b", "H100 SXM", prompt=4096, output=2048)
    assert waves_against_vllm("mistral-7b", "H100 SXM", prompt=2048, output=2048).waves.preemptions == 0
    with pytest.raises(ValueError, match="over_room must be > 0"):     # (it said "batch must be", review30a)
        waves_against_vllm("llama-3-8b", "H100 SXM", prompt=1024, output=256, over_room=0)
