"""vLLM V1's scheduler replayed step by step on a closed batch of equal requests (chapter 15, "Batching";
kv30, issue 34): what :func:`~llmsizing.serve_step.serving`'s waves of the KV room leave out.

The rules replayed (``vllm/v1/core/sched/scheduler.py``: ``Scheduler.schedule`` and ``_preempt_request``, read
at commit 00024d31; ``vllm/v1/core/kv_cache_manager.py``: ``allocate_slots``):

* a step has ``max_num_batched_tokens`` tokens; RUNNING requests are scheduled first, in order, each its
  remaining tokens (a prompt's chunk, or one decode token);
* a request gets the blocks its computed and new tokens need (``block`` tokens a block); if too few are free
  the latest running request is preempted (``self.running.pop()``): its blocks are freed, its computed tokens
  set to 0 and it goes back to the head of the waiting queue. The tokens it generated are kept and recomputed
  with its prompt when it is readmitted (recompute preemption);
* WAITING requests are taken only in a step without a preemption, while ``len(self.running) <
  max_num_seqs`` and their blocks fit (``allocate_slots`` returning ``None`` ends the loop); with vLLM's
  admission ``watermark`` (``SchedulerConfig.watermark``, a share of the blocks, vllm-project/vllm#44594; 0,
  off, by default) their blocks plus ``int(watermark x blocks)`` must be free once a request is running
  (``allocate_slots(..., has_scheduled_reqs=bool(self.running))``, read at commit 003df296);
* a request whose tokens are all computed samples one; at ``output`` tokens it finishes and frees its blocks.

Left out: prefix caching (vLLM's default: a preempted request's freed blocks stay cached until evicted, so it
may recompute fewer tokens than counted here), ``scheduler_reserve_full_isl`` (off by default), speculative
tokens, arrivals (the batch is closed) and a sliding-window layer's freed blocks (:func:`waves_against_vllm`
refuses a sequence longer than the window). Run with the cap at the KV room (``kv_batch``), no admitted
request is ever preempted: that replay is the library's wave model, step by step.

Each step is priced from the library's own terms at batch 1 (one :func:`serving` call): the weights read and
the step overhead once per step, each decode token's KV read at its own context at the attention bandwidth,
and each prefilled token at one prompt's prefill compute and all-reduces per token (``interleave_s /
prompt``). This holds where decode is memory-bound (it says which) and for one GPU (``tp = 1``); both
schedules are priced alike, so their ratio is what the waves leave out.

A stand-in, disclosed: this is the book's own replay of the statements above, not vLLM running (that needs a
GPU, which this project's machines lack). It was read against the source twice (kv30, review30a); its
agreement with the wave model where no request is preempted (within 1% of ``waves_s``) checks the pricing,
not the scheduler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._validate import check_int, check_number
from .catalog import get_gpu, resolve_model
from .inference import kv_cache_bytes_per_token
from .serve_churn import Replay, replay_scheduler  # (moved there in churn32; still exported here)
from .serve_engine import BLOCK_SIZE, blocks_per_sequence
from .serve_step import serving


@dataclass(frozen=True)
class WavesAgainstVLLM:
    """A closed batch over the KV room: the library's whole batch (``cycle_s``: the cohort run with the
    preemptions' churn priced to the last token, cohort36; churn35's waves plus churn before) and its waves
    alone (``waves_s``, which ``cycle_s`` was before), the same waves replayed (``waves``), and vLLM's own
    rules replayed (``vllm``) at the same step prices; ``ratio`` is ``vllm.seconds / waves.seconds``."""

    model: str
    gpu: str
    prompt: int
    output: int
    batch: int
    kv_batch: int
    max_num_seqs: int
    decode_bound: str
    cycle_s: float
    waves: Replay
    vllm: Replay
    waves_s: float | None = None     # (churn35; None only in a result built by hand before it)

    @property
    def ratio(self) -> float:
        return self.vllm.seconds / self.waves.seconds


def waves_against_vllm(model, gpu, *, prompt: int, output: int, batch: int | None = None,
                       over_room: float = 2.0, watermark: float = 0.0, **kwargs) -> WavesAgainstVLLM:
    """Replay a closed batch of ``batch`` requests (default ``ceil(over_room x kv_batch)``) on one GPU under
    vLLM's rules and as the library's waves (:func:`replay_scheduler`), each step priced from
    :func:`serving` at batch 1 (module docstring); ``watermark`` is vLLM's admission watermark (vLLM's rules
    only); ``kwargs`` go to :func:`serving` (``tp`` must be 1). Chapter 15."""
    m, g = resolve_model(model), get_gpu(gpu)
    one = serving(m, g, prompt=prompt, output=output, batch=1, **kwargs)
    if one.tp != 1 or one.pp != 1 or one.ep != 1:
        raise ValueError(f"waves_against_vllm prices one GPU: tp, pp and ep must be 1, got {one.tp}, "
                         f"{one.pp}, {one.ep}")
    n = prompt + output
    if blocks_per_sequence(m, n) != math.ceil(n / BLOCK_SIZE):      # (the replay holds every token)
        raise ValueError(f"waves_against_vllm replays sequences that keep every token's KV, and {m.name} "
                         f"keeps fewer at prompt + output = {n:,} tokens (sliding_window={m.sliding_window}: "
                         "vLLM frees a windowed layer's old blocks, which the replay does not): give a "
                         "shorter prompt + output or another model")
    room = one.kv_batch
    if room < 1:
        raise ValueError(f"{m.name} on {g.name}: no KV room for one sequence of {prompt:,} + {output:,} "
                         "tokens")
    over = check_number("over_room", over_room, allow_equal=False, maximum=1000.0)
    batch = math.ceil(over * room) if batch is None else check_int("batch", batch)
    lib = serving(m, g, prompt=prompt, output=output, batch=batch, **kwargs)
    hbm = g.memory_bandwidth_gbps * 1e9
    kv_token_s = kv_cache_bytes_per_token(m, one.kv_cache) / (hbm * one.attention_bu)
    weights_s = (one.decode_bytes_per_gpu - one.decode_kv_bytes_per_gpu) / (hbm * one.mbu)
    prefill_token_s = one.interleave_s / prompt

    def price(contexts, prefill_tokens):
        return one.step_overhead_s + weights_s + sum(contexts) * kv_token_s + prefill_tokens * prefill_token_s

    blocks = one.kv_capacity.blocks
    return WavesAgainstVLLM(m.name, g.name, prompt, output, batch, room, one.max_num_seqs, lib.decode_bound,
                            lib.cycle_s, replay_scheduler(blocks, batch, prompt, output, room, price),
                            replay_scheduler(blocks, batch, prompt, output, one.max_num_seqs, price,
                                             watermark=watermark), lib.waves_s)


__all__ = ["Replay", "replay_scheduler", "WavesAgainstVLLM", "waves_against_vllm"]
