"""Replay vLLM V1's scheduler on a closed batch of equal requests over the KV room, to measure what
:func:`llmsizing.serve.serving`'s waves of ``kv_batch`` leave out (kv30, issue 34).

The rules replayed are vLLM V1's (``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule`` and
``_preempt_request``, stored copy at 00024d31; ``vllm/v1/core/kv_cache_manager.py``, ``allocate_slots``):

* each step has ``max_num_batched_tokens`` tokens; RUNNING requests are scheduled first, in order, each its
  remaining tokens (a prompt's chunk, or one decode token);
* a request gets the blocks its computed + new tokens need (16 tokens a block); if the free blocks are
  too few, the last running request is preempted (``self.running.pop()``): its blocks are freed, its
  computed tokens set to 0 and it goes back to the head of the waiting queue (its generated tokens are kept
  and recomputed as a prompt when it is readmitted);
* WAITING requests are taken only in a step without preemption, while ``len(running) < max_num_seqs`` and
  their blocks fit; the first that does not fit stops the loop;
* a request whose tokens are all computed samples one token; at ``output`` tokens it finishes and frees its
  blocks.

Run with ``max_num_seqs`` at the KV room (``kv_batch``) the same replay is the library's wave model step by
step: every admitted request's whole sequence fits, so none is preempted.

Each step is priced from the library's own step terms (one :func:`serving` call at batch 1): the weights read
and the step overhead once per step, each scheduled decode token's KV read at its own context, and each
prefilled token at one prompt's prefill compute and all-reduce per token (``interleave_s / prompt``). The
decode step is memory-bound in the cases replayed (checked). This prices both schedules the same way: their
ratio is what the waves leave out; the library's ``cycle_s`` is printed beside them.

Run: ``.venv/bin/python tools/replay_kv_preemption.py`` (about a second a case; one GPU, ``tp=1``).
Session 30 (kv30): vLLM's rules take 0.78x (Llama-2-7B on an A100, 128 + 2,048 tokens, 60 requests over
a room of 53: the 7 preempted late keep most of their answers) to 1.15x (Llama-3-8B on an A100, 2,048 +
2,048 tokens, twice the room: long prompts recomputed) the waves' time; the replayed waves match
``cycle_s`` within 1%.
"""

from __future__ import annotations

import math
import sys
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from llmsizing.catalog import get_gpu, resolve_model  # noqa: E402
from llmsizing.inference import kv_cache_bytes_per_token  # noqa: E402
from llmsizing.serve import serving  # noqa: E402
from llmsizing.serve_engine import BLOCK_SIZE, MAX_NUM_BATCHED_TOKENS  # noqa: E402


def replay(blocks: int, batch: int, prompt: int, output: int, cap: int, price, *,
           budget: int = MAX_NUM_BATCHED_TOKENS, block: int = BLOCK_SIZE) -> dict:
    """Replay the scheduler (module docstring) on ``batch`` requests with ``blocks`` KV blocks and
    ``max_num_seqs = cap``; ``price(decode_contexts, prefill_tokens)`` gives one step's seconds. Returns the
    time, steps, preemptions and recomputed tokens."""
    n = [prompt] * batch          # tokens of each request (prompt + sampled)
    done = [0] * batch            # computed tokens
    gen = [0] * batch             # sampled tokens
    held = [0] * batch            # blocks held
    waiting, running = deque(range(batch)), []
    free, t, steps, preemptions, recomputed, finished = blocks, 0.0, 0, 0, 0, 0
    while finished < batch:
        left, sched, preempted, i = budget, {}, False, 0
        while i < len(running) and left > 0:          # RUNNING first
            r = running[i]
            new = min(n[r] - done[r], left)
            need = math.ceil((done[r] + new) / block) - held[r]
            while need > free:                        # preempt the latest running request
                v = running.pop()
                free += held[v]
                held[v], done[v] = 0, 0
                left += sched.pop(v, 0)
                waiting.appendleft(v)
                preempted, preemptions = True, preemptions + 1
                if v == r:
                    break
            if r not in running:
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
            if need > free:
                break
            waiting.popleft()
            recomputed += new if gen[r] else 0
            free -= need
            held[r] += need
            running.append(r)
            sched[r] = new
            left -= new
        decode = [done[r] + 1 for r in sched if gen[r] and done[r] == n[r] - 1]
        t += price(decode, sum(sched.values()) - len(decode))
        steps += 1
        for r, k in sched.items():
            done[r] += k
            if done[r] == n[r]:                       # all computed: one token sampled
                gen[r] += 1
                n[r] += 1
                if gen[r] == output:
                    running.remove(r)
                    free += held[r]
                    held[r] = 0
                    finished += 1
    return dict(seconds=t, steps=steps, preemptions=preemptions, recomputed_tokens=recomputed)


def case(model, gpu, prompt, output, factor, **kw):
    m, g = resolve_model(model), get_gpu(gpu)
    one = serving(m, g, prompt=prompt, output=output, batch=1, **kw)
    room = one.kv_batch
    batch = math.ceil(factor * room)
    lib = serving(m, g, prompt=prompt, output=output, batch=batch, **kw)
    hbm = g.memory_bandwidth_gbps * 1e9
    kv_tok = kv_cache_bytes_per_token(m, one.kv_cache)
    w_s = (one.decode_bytes_per_gpu - one.decode_kv_bytes_per_gpu) / (hbm * one.mbu)
    pre_tok = one.interleave_s / prompt

    def price(contexts, prefill_tokens):
        return (one.step_overhead_s + w_s + sum(contexts) * kv_tok / (hbm * one.attention_bu)
                + prefill_tokens * pre_tok)

    blocks = one.kv_capacity.blocks
    vllm = replay(blocks, batch, prompt, output, one.max_num_seqs, price)
    # the waves: the room's kv_batch sequences at a time, each holding its whole sequence's blocks (no
    # preemption: the same replay with the cap at the room)
    waves = replay(blocks, batch, prompt, output, room, price)
    return dict(model=m.name, gpu=g.name, prompt=prompt, output=output, room=room, cap=one.max_num_seqs,
                batch=batch, bound=lib.decode_bound, lib_cycle_s=lib.cycle_s, waves_s=waves["seconds"],
                vllm_s=vllm["seconds"], ratio=vllm["seconds"] / waves["seconds"],
                preemptions=vllm["preemptions"], recomputed=vllm["recomputed_tokens"],
                waves_preemptions=waves["preemptions"])


#: (model, GPU, prompt, output, batch over the KV room)
CASES = [("llama-3-8b", "H100 SXM", 1024, 256, 1.1), ("llama-3-8b", "H100 SXM", 1024, 256, 1.5),
         ("llama-3-8b", "H100 SXM", 1024, 256, 2), ("llama-3-8b", "H100 SXM", 1024, 256, 4),
         ("llama-2-7b", "A100 80GB", 128, 2048, 60 / 53),
         ("llama-3-8b", "H100 SXM", 128, 2048, 2), ("llama-2-7b", "A100 80GB", 128, 2048, 2),
         ("llama-3-8b", "A100 80GB", 2048, 2048, 2), ("llama-3-8b", "H100 SXM", 4096, 512, 2)]

if __name__ == "__main__":
    for c in CASES:
        r = case(*c)
        print(f"{r['model']} {r['gpu']} {r['prompt']}+{r['output']}: room {r['room']}, cap {r['cap']}, batch "
              f"{r['batch']} ({r['bound']}-bound): library cycle {r['lib_cycle_s']:.1f} s; replayed waves "
              f"{r['waves_s']:.1f} s ({r['waves_preemptions']} preemptions), vLLM's rules "
              f"{r['vllm_s']:.1f} s = {r['ratio']:.3f}x, {r['preemptions']:,} preemptions, "
              f"{r['recomputed']:,} tokens recomputed")
