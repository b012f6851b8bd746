"""Small random closed batches for comparing the cohort run (:func:`llmsizing.serve_churn.kv_churn`) with
the token-level replay (:func:`llmsizing.serve_replay.replay_scheduler`): blocks of 1-16 tokens, prompts and
answers of 1-60 tokens, 1-30 requests, caps of 1-30, watermark 0-0.3, and a token budget (4,096) no step
fills, so the two count the same work (their only difference is chunked prefill). Shared by test_serve_churn
and test_serve_last_ttft. Also data/serve_churn_sweep.csv's rows and their counts priced
(:func:`sweep_errors`), shared by test_serve_last_ttft (the first tokens) and test_serve_churn_cycle (the
whole run)."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

SWEEP = Path(__file__).resolve().parents[1] / "data" / "serve_churn_sweep.csv"
#: the counts of a ``StepCounts``, as the sweep's columns name them
COUNTS = ("steps", "decodes", "context_tokens", "prefill_tokens")


def sweep_rows() -> list[dict]:
    """data/serve_churn_sweep.csv's rows (tools/churn_sweep.py writes them), as strings."""
    with SWEEP.open() as f:
        return list(csv.DictReader(f))


def sweep_errors(upto: str) -> list[float]:
    """Each sweep row's counts up to ``upto`` (``"first_token"`` or ``"last_token"``), the replay's and the
    cohorts', priced at Llama-3-8B's step terms on one H100 at the row's prompt and answer: ``|cohorts /
    replay - 1|`` per row."""
    from llmsizing.serve import serving
    from llmsizing.serve_churn import StepCounts

    errors, terms = [], {}
    for row in sweep_rows():
        key = (int(row["prompt"]), int(row["output"]))
        if key not in terms:
            terms[key] = serving("llama-3-8b", "H100 SXM", prompt=key[0], output=key[1])
        replay, churn = (terms[key].steps_s(StepCounts(*(float(row[f"{who}_{upto}_{k}"]) for k in COUNTS)))
                         for who in ("replay", "churn"))
        errors.append(abs(churn / replay - 1))
    return errors


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


def sweep_counts_are_the_code_s(upto: str, counts: str) -> None:
    """Every 29th sweep row's stored cohort counts up to ``upto`` (``"first_token"``, ``"last_token"``) are
    :func:`~llmsizing.serve_churn.kv_churn`'s ``counts`` (``"to_last_first_token"``, ``"to_last_token"``) on
    the row's batch: the CSV is the code's, so the error it states is the library's."""
    from llmsizing.serve_churn import kv_churn

    for row in sweep_rows()[::29]:
        args = tuple(int(row[k]) for k in ("blocks", "batch", "prompt", "output", "max_num_seqs"))
        c = getattr(kv_churn(*args, watermark=float(row["watermark"])), counts)
        assert [getattr(c, k) for k in COUNTS] == [int(row[f"churn_{upto}_{k}"]) for k in COUNTS]
