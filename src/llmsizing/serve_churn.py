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
  finishes or can be admitted are skipped at once). Where no step fills its token budget it is the replay
  exactly (the tests: 80 random small batches); chunked prefill is its only difference. Against the
  token-level replay over
  ``tools/churn_sweep.py``'s sweep (``data/serve_churn_sweep.csv``: 144 batches, 120 of them preempted, 1.5-6
  times the room, 128-4,096-token prompts, 128-1,024-token answers, with and without the watermark): within
  2% of one sequence's tokens per finished request in every batch, within 2% of the replay's total in 90% of
  the preempted batches and 20% in all (5,515 against 4,436 tokens: one preemption of five missed), 0.2% over
  the whole sweep. Its cost grows with the waves and the room: milliseconds for a few waves of a room of
  tens, half a second at 8 times a room of 203 sequences of 2,176 tokens.

* :func:`churn_estimate`, what :class:`~llmsizing.serve_result.Serving` prices: :func:`kv_churn` where a
  prompt is at most half of ``max_num_batched_tokens``; above that the token-level :func:`replay_scheduler`
  (moved here from :mod:`llmsizing.serve_replay`), as a prompt prefilled in chunks is admitted on its first
  chunk and preempted mid-prompt, which one-step cohorts miss; linear in the batch beyond 8 times the room.

The same runs count the work up to the end of the step that samples the batch's last first token
(:class:`StepCounts`, ``Churn.to_last_first_token`` and ``Replay.to_last_first_token``; ttft35): steps, decode
tokens and their contexts, prefilled tokens, which :attr:`~llmsizing.serve_result.Serving.last_ttft_s` prices
over the KV room. The cohorts count exactly the replay's where no step fills its budget (the tests: 80
random small batches), and over the sweep priced at Llama-3-8B's H100 steps they are within 0.63% of it.
cohort36: the same four counts over the whole run, to the batch's last token (``Churn.to_last_token``,
``Replay.to_last_token``), which :attr:`~llmsizing.serve_result.Serving.cycle_s` prices over the KV room: the
cohorts count the replay's exactly where no step fills its budget (the same 80 random batches), within 0.49%
of it priced over the sweep (median 0.04%). Both keep ``decodes + prefill_tokens = batch x (prompt + output -
1) + recomputed_tokens`` (each request computes every token but its last sampled one once, and a preempted
one its lost tokens again): the sum of the waves and the churn computes the same tokens, in more steps.

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
import sys
from collections import deque
from dataclasses import astuple, dataclass, field

from ._validate import check_int, check_number
from .serve_engine import BLOCK_SIZE, MAX_NUM_BATCHED_TOKENS

_BLOCK, _BUDGET = BLOCK_SIZE, MAX_NUM_BATCHED_TOKENS


@dataclass(frozen=True)
class StepCounts:
    """The engine's work from the start of a closed batch to the end of the step that samples its last first
    token (ttft35): ``steps`` engine steps, ``decodes`` decode tokens (a running request's one token a step,
    summed over the steps), ``context_tokens`` the contexts those decode tokens attend to (each the request's
    computed tokens plus the new one, as :func:`replay_scheduler` prices them) and ``prefill_tokens`` (prompts
    and the recomputation of preempted requests). A linear step price turns them into seconds
    (:attr:`~llmsizing.serve_result.Serving.last_ttft_s`)."""

    steps: float
    decodes: float
    context_tokens: float
    prefill_tokens: float

    def __post_init__(self):
        for name in ("steps", "decodes", "context_tokens", "prefill_tokens"):
            # (a count: finite and >= 0; no MAX_MEANINGFUL cap, which a batch at that cap times its tokens
            # passes: the fuzz's edge values)
            check_number(name, getattr(self, name), maximum=sys.float_info.max)


@dataclass(frozen=True)
class Churn:
    """The churn of one closed batch (:func:`kv_churn`): ``recomputed_tokens`` (computed twice),
    ``preemptions`` and the ``batch`` it finished; ``per_request`` is ``recomputed_tokens / batch``;
    ``to_last_first_token`` the work up to the batch's last first token (ttft35; None where not counted) and
    ``to_last_token`` the whole run's (cohort36)."""

    recomputed_tokens: int
    preemptions: int
    batch: int
    # (left out of ==, so that a Churn built by hand with the three fields before it still compares)
    to_last_first_token: StepCounts | None = field(default=None, compare=False)
    # cohort36: the work of the whole run, to the batch's last token (what Serving.cycle_s prices)
    to_last_token: StepCounts | None = field(default=None, compare=False)

    @property
    def per_request(self) -> float:
        return self.recomputed_tokens / self.batch


@dataclass(frozen=True)
class Replay:
    """One replayed schedule: its seconds, engine steps, preemptions and ``recomputed_tokens``, the tokens
    whose KV a preemption threw away (``num_computed_tokens`` at the preemption: each is computed again), and
    ``last_first_token_s``, when the batch's last first token was sampled (the end of that step; churn35), and
    the work up to it, ``to_last_first_token`` (ttft35: what
    :attr:`~llmsizing.serve_result.Serving.last_ttft_s` prices over the KV room), and the whole run's,
    ``to_last_token`` (cohort36: what ``Serving.cycle_s`` prices there)."""

    seconds: float
    steps: int
    preemptions: int
    recomputed_tokens: int
    # (left out of ==, so that a Replay built by hand with the four fields before it still compares)
    last_first_token_s: float = field(default=math.nan, compare=False)
    # ttft35: the work up to that step (StepCounts), which a linear price turns into last_first_token_s
    to_last_first_token: StepCounts | None = field(default=None, compare=False)
    # cohort36: the whole run's work, which the same price turns into seconds
    to_last_token: StepCounts | None = field(default=None, compare=False)


def replay_scheduler(blocks: int, batch: int, prompt: int, output: int, max_num_seqs: int, price, *,
                     max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS, block: int = BLOCK_SIZE,
                     watermark: float = 0.0) -> Replay:
    """Replay vLLM V1's scheduler token by token (the rules are :mod:`llmsizing.serve_replay`'s docstring;
    moved here from there in churn32) on ``batch`` requests of ``prompt`` + ``output`` tokens with ``blocks``
    KV blocks of ``block`` tokens; ``price(decode_contexts, prefill_tokens)`` gives one step's seconds;
    ``watermark`` is vLLM's admission watermark (a share of ``blocks``). Chapter 15."""
    blocks = check_int("blocks", blocks, minimum=0)
    batch, prompt = check_int("batch", batch), check_int("prompt", prompt)
    output, cap = check_int("output", output), check_int("max_num_seqs", max_num_seqs)
    budget = check_int("max_num_batched_tokens", max_num_batched_tokens)
    block = check_int("block", block, maximum=4096)
    mark = int(check_number("watermark", watermark, maximum=1.0) * blocks)
    if math.ceil((prompt + output) / block) > blocks:
        raise ValueError(f"blocks must hold one whole sequence, {math.ceil((prompt + output) / block):,} "
                         f"blocks of {block}, got {blocks:,}")
    n, done, gen, held = [prompt] * batch, [0] * batch, [0] * batch, [0] * batch   # tokens, computed, sampled
    waiting, running = deque(range(batch)), []
    free, t, steps, preemptions, recomputed, finished = blocks, 0.0, 0, 0, 0, 0
    last_first, decodes, contexts, prefills, first = 0.0, 0, 0, 0, StepCounts(0, 0, 0, 0)
    while finished < batch:
        left, sched, preempted, i = budget, {}, False, 0
        while i < len(running) and left > 0:          # RUNNING first
            r = running[i]
            new = min(n[r] - done[r], left)
            need = math.ceil((done[r] + new) / block) - held[r]
            while need > free:                        # preempt the latest running request
                v = running.pop()
                free += held[v]
                recomputed += done[v]                 # its computed KV, lost: computed again on return
                held[v], done[v] = 0, 0
                left += sched.pop(v, 0)
                waiting.appendleft(v)
                preempted, preemptions = True, preemptions + 1
                if v == r:
                    break
            if i >= len(running):                      # (r preempted itself: the pops reached index i)
                break
            free -= need
            held[r] += need
            sched[r] = new
            left -= new
            i += 1
        while not preempted and waiting and left > 0 and len(running) < cap:    # then WAITING
            r = waiting[0]
            new = min(n[r], left)
            need = math.ceil(new / block)
            if need + (mark if running else 0) > free:
                break
            waiting.popleft()
            free -= need
            held[r] += need
            running.append(r)
            sched[r] = new
            left -= new
        decode = [done[r] + 1 for r in sched if gen[r] and done[r] == n[r] - 1]
        t += price(decode, sum(sched.values()) - len(decode))
        steps, decodes, contexts = steps + 1, decodes + len(decode), contexts + sum(decode)
        prefills += sum(sched.values()) - len(decode)
        ended = []
        for r, k in sched.items():
            done[r] += k
            if done[r] == n[r]:                       # all computed: one token sampled
                if not gen[r]:
                    last_first = t                    # (t never falls: the latest first token so far)
                    first = StepCounts(steps, decodes, contexts, prefills)
                gen[r] += 1
                n[r] += 1
                if gen[r] == output:
                    ended.append(r)
                    free += held[r]
                    held[r] = 0
                    finished += 1
        if ended:                                     # (the finished leave running together, in one pass)
            ended = set(ended)
            running = [r for r in running if r not in ended]
    return Replay(t, steps, preemptions, recomputed, last_first, first,
                  StepCounts(steps, decodes, contexts, prefills))


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
    # ttft35: the work so far (StepCounts' fields) and the requests never admitted (the wait queue's tail
    # cohort, d = prompt - 1: a preempted request has computed its prompt at least); `mass` is the running
    # requests' computed tokens, sum(c x d), kept as they change so that no step walks the cohorts for it
    steps = decodes = contexts = prefills = mass = 0
    fresh, first = batch, None

    def finish():
        nonlocal run, finished, free, running, mass
        done = [c for c, d in run if d == last]
        if done:
            finished, free, running = finished + sum(done), free + sum(done) * held_last, running - sum(done)
            mass -= sum(done) * last
            run = [r for r in run if r[1] != last]

    while finished < batch:
        if run:                                         # skip the steps where nothing changes
            to_block = min((-d) % block for _, d in run)
            head = math.ceil((wait[0][1] + 1) / block) + mark if wait else 0
            if to_block and not (wait and running < cap and free >= head):
                step = min(to_block, min(last - d for _, d in run))
                # `step` decode steps: a cohort at d attends to d + 1, ..., d + step tokens
                contexts += step * mass + step * (step + 1) // 2 * running
                steps, decodes, mass = steps + step, decodes + step * running, mass + step * running
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
                mass -= k * td
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
                mass -= k * d
                wait.appendleft([k, d])
                preempted, c = True, c - k
                run[i][0], need = c, c
            free -= need
            left -= c
            i += 1
        run = [r for r in run if r[0] > 0]
        # each running request decodes one token, attending to its d + 1
        steps, decodes, contexts = steps + 1, decodes + running, contexts + mass + running
        mass += running
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
            prefills, mass = prefills + k * n, mass + k * n     # (in this step: chunked prefill left out)
            if wd == prompt - 1:
                fresh -= k
            new.append([k, wd])
            if k == wc:
                wait.popleft()
            else:
                wait[0][0] -= k
        run.extend(new)
        for r in run:
            r[1] += 1
        if fresh == 0 and first is None:                # the last first token is sampled in this step
            first = StepCounts(steps, decodes, contexts, prefills)
        finish()
    return Churn(lost, preemptions, batch, first, StepCounts(steps, decodes, contexts, prefills))


def _no_price(contexts, prefill_tokens) -> float:
    """A step's price when only the tokens are counted."""
    return 0.0


#: Beyond this many times the room (whole sequences the blocks hold), :func:`churn_estimate` extrapolates.
EXTRAPOLATE_OVER_ROOM = 8


def churn_estimate(blocks: int, batch: int, prompt: int, output: int, max_num_seqs: int, *,
                   watermark: float = 0.0) -> Churn:
    """:func:`kv_churn` with its cost bounded, and the token-level replay where the cohorts fail (the serving
    model's churn, chapter 15). A prompt over half of ``max_num_batched_tokens`` (8,192) is prefilled in
    chunks: vLLM admits it on its first chunk's blocks and preempts it mid-prefill, again and again (the
    thrashing vllm-project/vllm#21793 and #37307 describe), which the cohorts, prefilling a prompt in one
    step, miss (at 8,192 + 512 tokens twice the room: 8,519 tokens against the replay's 98,477): there
    :func:`replay_scheduler` runs, token by token (its rooms are small: 0.7 s at 8 times). Up to
    :data:`EXTRAPOLATE_OVER_ROOM` times the room it runs, beyond it the churn is taken as linear in the batch
    from the runs at 4 and 8 times the room (the cohorts' cost grows with the waves and the room: 0.5 s at 8
    times, 14 s at 100 times, for Llama-3-8B on an H100 at 128 + 2,048 tokens, a room of 203). Against the
    full run at 12, 16 and 32 times the room (six rooms of 11-346 sequences, 1,024-4,096-token prompts or
    2,048-token answers) the extrapolation is 8% low to 12% high. The work to the last first token
    (``to_last_first_token``, ttft35) is extrapolated alike: priced, 0.6% low to 12% high against the full run
    at 12, 16 and 32 times six rooms of 29-346 sequences (Llama-3-8B and Llama-2-7B on an H100 and A100s;
    cohort36 found 6.1% low at 12 times Llama-2-7B's room of 53 on an A100 80GB at 128 + 2,048 tokens). The
    whole run's work (``to_last_token``, cohort36) too: priced, 0.4% low to 4.6% high against the full run at
    12, 16 and 32 times six rooms of 21-346 sequences."""
    blocks, batch, prompt, output, cap, block, _, _ = _checked(blocks, batch, prompt, output, max_num_seqs,
                                                               _BLOCK, _BUDGET, watermark)
    room = blocks // math.ceil((prompt + output) / block)

    def run(n):
        if 2 * prompt <= _BUDGET:
            return kv_churn(blocks, n, prompt, output, cap, watermark=watermark)
        r = replay_scheduler(blocks, n, prompt, output, cap, _no_price, watermark=watermark)
        return Churn(r.recomputed_tokens, r.preemptions, n, r.to_last_first_token, r.to_last_token)

    if batch <= EXTRAPOLATE_OVER_ROOM * room:
        return run(batch)
    low, high = (run(k * room) for k in (EXTRAPOLATE_OVER_ROOM // 2, EXTRAPOLATE_OVER_ROOM))
    share = (batch - high.batch) / (high.batch - low.batch)

    def line(a, b):
        return StepCounts(*(y + share * (y - x) for x, y in zip(astuple(a), astuple(b))))

    return Churn(round(high.recomputed_tokens + share * (high.recomputed_tokens - low.recomputed_tokens)),
                 round(high.preemptions + share * (high.preemptions - low.preemptions)), batch,
                 line(low.to_last_first_token, high.to_last_first_token),
                 line(low.to_last_token, high.to_last_token))


__all__ = ["Churn", "EXTRAPOLATE_OVER_ROOM", "Replay", "StepCounts", "churn_estimate",
           "first_wave_recompute_tokens", "kv_churn", "replay_scheduler"]
