"""Small random closed batches for comparing the cohort run (:func:`llmsizing.serve_churn.kv_churn`) with
the token-level replay (:func:`llmsizing.serve_replay.replay_scheduler`): blocks of 1-16 tokens, prompts and
answers of 1-60 tokens, 1-30 requests, caps of 1-30, watermark 0-0.3, and a token budget (4,096) no step
fills, so the two count the same work (their only difference is chunked prefill). Shared by test_serve_churn
and test_serve_last_ttft."""

from __future__ import annotations

import math
import random


def small_random_batches(seed: int, n: int = 80):
    """``n`` cases ``(args, kw)`` for ``kv_churn(*args, **kw)`` and
    ``replay_scheduler(*args, price, **kw)``."""
    rng = random.Random(seed)
    for _ in range(n):
        block, prompt, output = rng.choice([1, 2, 4, 16]), rng.randint(1, 60), rng.randint(1, 60)
        need = math.ceil((prompt + output) / block)
        args = (rng.randint(need, 6 * need), rng.randint(1, 30), prompt, output, rng.randint(1, 30))
        kw = dict(block=block, max_num_batched_tokens=4096, watermark=rng.choice([0.0, 0.0, 0.1, 0.3]))
        yield args, kw
