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


def extrapolated_ratio(counts: str) -> float:
    """Beyond eight rooms the cohort counts ``counts`` (``"to_last_first_token"``, ``"to_last_token"``) are
    extrapolated (:func:`~llmsizing.serve_churn.churn_estimate`): checked here to be the line through 4 and 8
    rooms (10,000 blocks, 1,024 + 256 tokens, a room of 125), and returned: the time of that line at 12 rooms
    over the time of the counts walked there (Llama-3-8B on an H100), which each docstring bounds."""
    from dataclasses import astuple

    import pytest

    from llmsizing.serve import serving
    from llmsizing.serve_churn import StepCounts, churn_estimate, kv_churn

    at = {b: getattr(kv_churn(10_000, b, 1024, 256, 1024), counts) for b in (500, 1000, 1500)}
    line = [2 * y - x for x, y in zip(astuple(at[500]), astuple(at[1000]))]
    assert astuple(getattr(churn_estimate(10_000, 1500, 1024, 256, 1024), counts)) == pytest.approx(line)
    s = serving("llama-3-8b", "H100 SXM", prompt=1024, output=256)
    return s.steps_s(StepCounts(*line)) / s.steps_s(at[1500])


def ends_are_the_stored_bounds(s, names) -> None:
    """Each of ``names`` of the ``Serving`` ``s`` carries the serving range as every serving time does
    (``serve.serving_ends``): its ends are the point over the stored bounds read by hand
    (tests/_serving_bounds.py), high over low, nothing new or widened."""
    import pytest

    from llmsizing.serve import serving_ends
    from tests._serving_bounds import stored_bounds

    lo, hi = stored_bounds()
    e = serving_ends(s, tuple(names))
    for n in names:
        v = getattr(s, n)
        assert (e[f"{n}_low"], e[f"{n}_high"]) == pytest.approx((v / hi, v / lo), rel=1e-12), n
