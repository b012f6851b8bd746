"""The KV preemption's churn priced (chapter 15, "Batching"; churn32, issue 34): the tokens vLLM V1 computes
twice when a closed batch of equal requests runs over its KV room.

The rules are vLLM V1's (``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``: RUNNING requests first,
``self.running.pop()`` preempts the latest when ``kv_cache_manager.allocate_slots`` returns ``None``;
``_preempt_request`` frees the request's blocks and sets ``num_computed_tokens = 0``; WAITING requests are
taken only in a step without a preemption, while ``len(self.running) < max_num_running_reqs`` and their blocks
fit), as :mod:`llmsizing.serve_replay` replays them token by token. A request preempted with ``d`` tokens
computed (prompt and answer so far) computes those ``d`` again when it is readmitted.

* :func:`first_wave_recompute_tokens`, closed form: with ``h = ceil(prompt / block)`` blocks a prompt, the
  first ``A = min(batch, max_num_seqs, floor(blocks / h))`` requests are admitted and grow in lockstep; when
  their next token needs block ``k`` only ``R(k) = min(A, floor(blocks / k))`` fit (``R(h) = A``), so ``R(k -
  1) - R(k)`` are preempted with ``(k - 1) x block`` tokens computed: ``sum_k (R(k - 1) - R(k)) (k - 1)
  block``, ``k`` from ``h + 1`` to ``ceil((prompt + output - 1) / block)`` (the blocks at the last token).
  Against the replay over the sweep (no watermark): within 2% in 17 of 21 batches at 1.5 times the room, up
  to 31% high where the token budget admits the prompts a few a step against short answers (the lockstep is
  off by a few tokens); 17-82% of the replay's at 3 and 6 times the room, where the readmitted requests churn
  again: a lower bound.
* :func:`kv_churn`, the estimate the serving model uses: the same rules run on cohorts (requests with equal
  computed tokens move together; a prefill takes one step; steps where no request crosses a block boundary,
  finishes or can be admitted are skipped at once). Against the token-level replay over
  ``tools/churn_sweep.py``'s sweep (``data/serve_churn_sweep.csv``: 144 batches, 120 of them preempted, 1.5-6
  times the room, 128-4,096-token prompts, 128-1,024-token answers, with and without the watermark): within
  2% of one sequence's tokens per finished request in every batch, within 2% of the replay's total in 90% of
  the preempted batches and 20% in all (5,515 against 4,436 tokens: one preemption of five missed), 0.2% over
  the whole sweep. Its cost grows with the waves and the room: milliseconds for a few waves of a room of
  tens, half a second at 8 times a room of 203 sequences of 2,176 tokens.

``watermark`` is vLLM's KV-cache watermark (``SchedulerConfig.watermark``, vllm-project/vllm#44594, June
2026; 0, off, by default): ``KVCacheManager.allocate_slots`` refuses a WAITING or PREEMPTED request unless
its blocks plus ``int(watermark x num_blocks)`` are free, and only when a request is already running
(``has_scheduled_reqs=bool(self.running)``). Left out here as in the replay: prefix caching (a preempted
request's freed blocks stay in the prefix cache until evicted, so vLLM may recompute fewer tokens than counted
here: an upper bound with prefix caching on, vLLM's default), ``scheduler_reserve_full_isl`` (admission on the
whole prompt's blocks, off by default), speculative tokens and arrivals (the batch is closed).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from ._validate import check_int, check_number

#: vLLM's KV-cache block, tokens (``block_size``); the same as :data:`llmsizing.serve_engine.BLOCK_SIZE`.
_BLOCK = 16
#: vLLM V1's prefill chunk the library uses (``max_num_batched_tokens``).
_BUDGET = 8192


@dataclass(frozen=True)
class Churn:
    """The churn of one closed batch (:func:`kv_churn`): ``recomputed_tokens`` (computed twice),
    ``preemptions`` and the ``batch`` it finished; ``per_request`` is ``recomputed_tokens / batch``."""

    recomputed_tokens: int
    preemptions: int
    batch: int

    @property
    def per_request(self) -> float:
        return self.recomputed_tokens / self.batch


def _checked(blocks, batch, prompt, output, max_num_seqs, block, max_num_batched_tokens, watermark):
    blocks = check_int("blocks", blocks, minimum=0)
    batch, prompt = check_int("batch", batch), check_int("prompt", prompt)
    output, cap = check_int("output", output), check_int("max_num_seqs", max_num_seqs)
    block = check_int("block", block, maximum=4096)
    budget = check_int("max_num_batched_tokens", max_num_batched_tokens)
    watermark = check_number("watermark", watermark, maximum=1.0)
    need = math.ceil((prompt + output) / block)
    if need > blocks:
        raise ValueError(f"blocks must hold one whole sequence, {need:,} blocks of {block}, got {blocks:,}")
    return blocks, batch, prompt, output, cap, block, budget, int(watermark * blocks)


def first_wave_recompute_tokens(blocks: int, batch: int, prompt: int, output: int, max_num_seqs: int, *,
                                block: int = _BLOCK) -> int:
    """Tokens the first wave's preemptions throw away (module docstring's closed form): exact when the
    preempted requests fit the room when readmitted, a lower bound otherwise. Chapter 15."""
    blocks, batch, prompt, output, cap, block, _, _ = _checked(blocks, batch, prompt, output, max_num_seqs,
                                                               block, _BUDGET, 0.0)
    held = math.ceil(prompt / block)                    # blocks a request holds after its prompt
    last = math.ceil((prompt + output - 1) / block)     # ... when its last token is computed
    admitted = min(batch, cap, blocks // held)
    running, lost = admitted, 0
    for k in range(held + 1, last + 1):                 # block k is needed at (k - 1) x block tokens
        fits = min(admitted, blocks // k)
        lost += (running - fits) * (k - 1) * block
        running = fits
    return lost


def kv_churn(blocks: int, batch: int, prompt: int, output: int, max_num_seqs: int, *, block: int = _BLOCK,
             max_num_batched_tokens: int = _BUDGET, watermark: float = 0.0) -> Churn:
    """vLLM V1's preemptions on ``batch`` requests of ``prompt`` + ``output`` tokens with ``blocks`` KV blocks
    of ``block`` tokens, run on cohorts (module docstring); ``watermark`` is vLLM's admission watermark, a
    share of ``blocks``. Chapter 15."""
    blocks, batch, prompt, output, cap, block, budget, mark = _checked(
        blocks, batch, prompt, output, max_num_seqs, block, max_num_batched_tokens, watermark)
    last = prompt + output - 1                          # computed tokens when a request finishes
    held_last = math.ceil(last / block)
    run: list[list[int]] = []                           # [requests, computed tokens], in admission order
    wait = deque([[batch, prompt - 1]])                 # [requests, d]: d + 1 tokens to prefill
    free, finished, lost, preemptions, running = blocks, 0, 0, 0, 0

    def finish():
        nonlocal run, finished, free, running
        done = [c for c, d in run if d == last]
        if done:
            finished, free, running = finished + sum(done), free + sum(done) * held_last, running - sum(done)
            run = [r for r in run if r[1] != last]

    while finished < batch:
        if run:                                         # skip the steps where nothing changes
            to_block = min((-d) % block for _, d in run)
            head = math.ceil((wait[0][1] + 1) / block) + mark if wait else 0
            if to_block and not (wait and running < cap and free >= head):
                step = min(to_block, min(last - d for _, d in run))
                for r in run:
                    r[1] += step
                finish()
                continue
        left, preempted, i = budget, False, 0
        while i < len(run):                             # RUNNING first: a block for each crossing a boundary
            c, d = run[i]
            need = c if d % block == 0 else 0
            while need > free and len(run) - 1 > i:     # preempt the latest
                tc, td = run[-1]
                k = min(tc, -(-(need - free) // math.ceil(td / block)))
                free, lost, preemptions, running = (free + k * math.ceil(td / block), lost + k * td,
                                                    preemptions + k, running - k)
                wait.appendleft([k, td])
                preempted = True
                if k == tc:
                    run.pop()
                else:
                    run[-1][0] -= k
            if need > free:                             # the cohort's own latest members
                k = min(c, -(-(c - free) // (math.ceil(d / block) + 1)))
                free, lost, preemptions, running = (free + k * math.ceil(d / block), lost + k * d,
                                                    preemptions + k, running - k)
                wait.appendleft([k, d])
                preempted, c = True, c - k
                run[i][0], need = c, c
            free -= need
            left -= c
            i += 1
        run = [r for r in run if r[0] > 0]
        new = []
        while not preempted and wait and left > 0 and running < cap:    # then WAITING
            wc, wd = wait[0]
            n = wd + 1
            each, keep = math.ceil(n / block), mark if (run or new) else 0
            k = min(wc, cap - running, max(free - keep, 0) // each, max(left // n, 1))
            if mark and not (run or new):               # the first one admitted ignores the watermark
                k = min(k, 1)
            if k <= 0:
                break
            free, running, left = free - k * each, running + k, left - k * min(n, left)
            new.append([k, wd])
            if k == wc:
                wait.popleft()
            else:
                wait[0][0] -= k
        run.extend(new)
        for r in run:
            r[1] += 1
        finish()
    return Churn(lost, preemptions, batch)


#: Beyond this many times the room (whole sequences the blocks hold), :func:`churn_estimate` extrapolates.
EXTRAPOLATE_OVER_ROOM = 8


def churn_estimate(blocks: int, batch: int, prompt: int, output: int, max_num_seqs: int, *,
                   watermark: float = 0.0) -> Churn:
    """:func:`kv_churn` with its cost bounded (the serving model's churn, chapter 15): up to
    :data:`EXTRAPOLATE_OVER_ROOM` times the room it runs, beyond it the churn is taken as linear in the batch
    from the runs at 4 and 8 times the room (the run's cost grows with the waves and the room: 0.5 s at 8
    times, 14 s at 100 times, for Llama-3-8B on an H100 at 128 + 2,048 tokens, a room of 203). Against the
    full run at 12, 16 and 32 times the room (six rooms of 11-346 sequences, 1,024-4,096-token prompts or
    2,048-token answers) the extrapolation is 8% low to 12% high."""
    blocks, batch, prompt, output, cap, block, _, _ = _checked(blocks, batch, prompt, output, max_num_seqs,
                                                               _BLOCK, _BUDGET, watermark)
    room = blocks // math.ceil((prompt + output) / block)
    if batch <= EXTRAPOLATE_OVER_ROOM * room:
        return kv_churn(blocks, batch, prompt, output, cap, watermark=watermark)
    low, high = (kv_churn(blocks, k * room, prompt, output, cap, watermark=watermark)
                 for k in (EXTRAPOLATE_OVER_ROOM // 2, EXTRAPOLATE_OVER_ROOM))
    share = (batch - high.batch) / (high.batch - low.batch)
    return Churn(round(high.recomputed_tokens + share * (high.recomputed_tokens - low.recomputed_tokens)),
                 round(high.preemptions + share * (high.preemptions - low.preemptions)), batch)


__all__ = ["Churn", "EXTRAPOLATE_OVER_ROOM", "churn_estimate", "first_wave_recompute_tokens", "kv_churn"]
