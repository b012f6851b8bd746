"""A batch over the engine's max_num_seqs is priced as the engine runs it (issue 34, session 29, queue29).

vLLM V1's scheduler (``vllm/v1/core/sched/scheduler.py``) sets ``self.max_num_running_reqs =
self.scheduler_config.max_num_seqs`` and, scheduling the WAITING queue, stops with ``if len(self.running) ==
self.max_num_running_reqs: break``: at most ``max_num_seqs`` sequences run, the rest wait. Requests of one
length finish together, so a closed batch of ``B`` requests runs in ``ceil(B / cap)`` waves. Its default cap
is 1,024 on an H100 (80 GB, not an A100) and 256 on an A100 (``EngineArgs``, data/vllm_batch_defaults.csv).

The expectations are counted by hand (waves, the queued requests, the last wave's size) or are relations
between calls: the step of a queued batch is the running batch's step, and its whole time is the waves'
times one after the other.
"""

from __future__ import annotations

import dataclasses

import pytest

from llmsizing.serve import serving
from llmsizing.serve_search import at_speed, with_prefix_cache

KW = dict(prompt=128, output=64)          # short sequences: on an H100 the KV room (> 2,000) exceeds the cap


def _s(batch, gpu="H100 SXM", **kw):
    return serving("llama-3-8b", gpu, batch=batch, **{**KW, **kw})


def test_twice_the_cap_takes_two_waves_at_the_caps_price():
    cap, two = _s(1024), _s(2048)             # vLLM's default cap on an H100: 1,024
    assert cap.max_num_seqs == 1024 and cap.kv_batch > 2048    # (the KV room is not what queues it)
    assert (cap.waves, cap.queued, cap.running_batch) == (1, 0, 1024) and cap.fits
    assert (two.waves, two.queued, two.running_batch) == (2, 1024, 1024) and not two.fits
    assert two.batch == 2048 and two.batch_bound == "max_num_seqs"
    # every per-step figure is the running batch's: the ITL, the rate, the price per token
    for f in ("decode_step_s", "itl_s", "ttft_s", "batch_prefill_s", "output_tokens_per_s",
              "output_tokens_per_s_per_gpu", "requests_per_s", "usd_per_million_output_tokens",
              "usd_per_million_input_tokens", "microbatch"):
        assert getattr(two, f) == getattr(cap, f), f
    # the whole batch: two waves back to back; the last request waits one wave, then its wave's prefill
    assert two.cycle_s == pytest.approx(2 * cap.cycle_s, rel=1e-12)
    assert two.queue_wait_s == pytest.approx(cap.cycle_s, rel=1e-12)
    assert two.last_ttft_s == pytest.approx(cap.cycle_s + cap.batch_prefill_s, rel=1e-12)
    # a closed batch of two full waves makes tokens at the running batch's rate
    assert 2048 * 64 / two.cycle_s == pytest.approx(cap.output_tokens_per_s, rel=1e-12)


def test_running_the_whole_batch_at_once_takes_a_larger_cap():
    # before issue 34 the library priced 2,048 sequences in one step. Raising the cap runs them at once (the
    # KV room holds them), and that step is slower than the cap's: the default engine does not run it
    two, once = _s(2048), _s(2048, max_num_seqs=2048)
    assert once.waves == 1 and once.fits
    assert once.itl_s > two.itl_s and once.decode_step_s > two.decode_step_s


def test_a_last_wave_that_is_not_full_is_priced_at_its_own_size():
    s, full, rest = _s(1500), _s(1024), _s(476)             # 1,500 = 1,024 + 476
    assert (s.waves, s.queued) == (2, 476) and s.last_wave.batch == 476
    assert s.last_wave.waves == 1 and s.last_wave.last_wave is None
    assert s.cycle_s == pytest.approx(full.cycle_s + rest.cycle_s, rel=1e-12)
    assert s.last_ttft_s == pytest.approx(full.cycle_s + rest.batch_prefill_s, rel=1e-12)
    assert s.itl_s == full.itl_s                             # a first-wave sequence's ITL
    # the closed batch's own mean rate is below the engine's running rate: its last wave is not full
    assert 1500 * 64 / s.cycle_s < s.output_tokens_per_s == full.output_tokens_per_s


@pytest.mark.parametrize("batch,waves,last", [(100, 1, None), (101, 2, 1), (250, 3, 50), (300, 3, None)])
def test_waves_counted_by_hand_at_a_given_cap(batch, waves, last):
    s = _s(batch, max_num_seqs=100)
    assert s.running_batch == min(batch, 100) and s.waves == waves and s.queued == batch - min(batch, 100)
    assert (s.last_wave.batch if s.last_wave else None) == last
    one = _s(min(batch, 100), max_num_seqs=100)
    tail = s.last_wave or one
    assert s.cycle_s == pytest.approx((waves - 1) * one.cycle_s + tail.cycle_s, rel=1e-12)


def test_an_a100_queues_above_256():
    a = _s(512, gpu="A100 80GB")
    assert a.max_num_seqs == 256 and a.running_batch == 256 and a.waves == 2
    assert a.itl_s == _s(256, gpu="A100 80GB").itl_s


def test_a_batch_within_the_cap_is_unchanged():
    s = _s(64)
    assert (s.running_batch, s.waves, s.queued, s.queue_wait_s, s.last_wave) == (64, 1, 0, 0.0, None)
    assert s.cycle_s == pytest.approx(s.batch_prefill_s + 64 * s.decode_step_s, rel=1e-12)
    assert s.last_ttft_s == s.batch_prefill_s
    assert s.output_tokens_per_s == pytest.approx(64 * 64 / s.cycle_s, rel=1e-12)


def test_expert_parallel_groups_queue_above_their_summed_caps():
    # 8 attention groups of 4 sequences run 32; 80 take ceil(80 / 32) = 3 waves, the last of 16
    s = serving("mixtral-8x7b", "H100 SXM", tp=1, ep=8, prompt=128, output=128, max_num_seqs=4, batch=80)
    assert (s.running_batch, s.waves, s.last_wave.batch) == (32, 3, 16)


def test_speed_and_prefix_cache_reach_the_last_wave():
    s = _s(1500)
    slow = at_speed(s, 0.5)
    assert slow.cycle_s == pytest.approx(2 * s.cycle_s, rel=1e-12)
    assert slow.last_ttft_s == pytest.approx(2 * s.last_ttft_s, rel=1e-12)
    cached = with_prefix_cache(s, 0.5)
    assert cached.last_wave.batch_prefill_s < s.last_wave.batch_prefill_s
    assert cached.last_wave == with_prefix_cache(s.last_wave, 0.5)


def test_a_result_built_by_hand_runs_its_batch_at_once():
    s = _s(64)
    old = {f.name: getattr(s, f.name) for f in dataclasses.fields(s)
           if f.name not in ("running_batch", "last_wave")}
    t = type(s)(**{**old, "batch": 5000})
    assert t.running_batch == 5000 and t.waves == 1 and t.last_wave is None


def test_the_frame_reports_the_waves():
    f = _s(2048).to_frame()["value"]
    assert (f["running_batch"], f["waves"], f["queued"]) == (1024, 2, 1024)
    assert f["last_ttft_s"] > f["ttft_s"]


def test_a_static_published_batch_runs_whole_in_the_calibration():
    """TensorRT-LLM's static batching runs its whole batch together, so the calibration passes the row's own
    batch as the cap (serve_fit._engine_cap): rows 14 and 45 of data/serving_published.csv (A100 80GB,
    batches 384 and 1,280, above vLLM's 256) are priced at once, not in vLLM's waves."""
    from llmsizing.serve_calibration import _read
    from llmsizing.serve_fit import _serving_of

    over = [r for r in _read().itertuples() if r.batching == "static" and r.gpu.startswith("A100")
            and int(r.batch) > 256]
    assert sorted(int(r.batch) for r in over) == [384, 1280]
    for r in over:
        s = _serving_of(r)
        assert s.waves == 1 and s.running_batch == int(r.batch)


def test_waves_hold_for_generated_batches_and_caps():
    """The relations above for generated batches and caps (the fuzz test's spirit, chapter 15): the batch is
    ``(waves - 1)`` full waves and a last one of ``1..running_batch``; the step is the running batch's."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=25, deadline=None, derandomize=True)
    @given(batch=st.integers(1, 5000), cap=st.integers(1, 600))
    def check(batch, cap):
        s = _s(batch, max_num_seqs=cap)
        run = min(batch, cap)
        last = s.last_wave.batch if s.last_wave else run      # (a full last wave has no last_wave)
        assert s.running_batch == run and (s.waves - 1) * run + last == batch and 1 <= last <= run
        one = _s(run, max_num_seqs=cap)
        assert s.itl_s == one.itl_s and s.output_tokens_per_s == one.output_tokens_per_s
        assert s.cycle_s >= one.cycle_s * (s.waves - 1) and s.last_ttft_s >= s.queue_wait_s
        assert s.cycle_s == pytest.approx((s.waves - 1) * one.cycle_s + (s.last_wave or one).cycle_s, rel=1e-12)

    check()


def test_the_fleets_itl_tail_and_the_calibrations_fast_rows_read_the_running_batch():
    """review29a: two readers of a Serving's batch outside serve_step. The fleet's ITL at a percentile
    (serve_fleet.tpot_p_s) counts the other sequences running beside a request, and the calibration's fast
    predictor (serve_fit._Row) must match predict_row; for a queued batch both are the running batch's, as
    itl_s and output_tokens_per_s are."""
    from llmsizing.serve_calibration import _read
    from llmsizing.serve_fit import _Row, predict_row
    from llmsizing.serve_fleet import tpot_p_s

    two, cap = _s(2048), _s(1024)
    for p in (50, 95, 99):
        assert tpot_p_s(two, p) == tpot_p_s(cap, p)
    rows = _read()
    vllm = rows[(rows.engine == "vLLM") & (rows.batching == "continuous") & (rows.gpu == "H100 SXM")].head(1)
    c = dict(mbu=0.7, attention_bu=0.6, mfu=0.5, step_overhead_s=0.004)
    for metric in ("itl_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu"):
        r = next(vllm.assign(batch=4000, metric=metric).itertuples())     # over H100's cap of 1,024
        assert _Row(r)(**c) == pytest.approx(predict_row(r, **c), rel=1e-9), metric
