"""Chapter 14's audit applied beyond the seed claims' table: a claim about any training run judged as the
seeds' are (:func:`judge_run`, the same readings of :data:`~llmsizing.audit_inputs.OPEN_SETTINGS` and the same
:func:`~llmsizing.audit_verdict.verdict`), and how far the one stated offload batch
(:data:`~llmsizing.audit_inputs.OFFLOAD_TOKENS_PER_STEP`) carries a seed claim's verdict
(:func:`offload_batch_flip`). No formula lives here: every number comes from :mod:`llmsizing.audit`'s
readings.
"""

from __future__ import annotations

from ._validate import check_choice, check_number
from .audit import (BAND, OFFLOAD_TOKENS_PER_STEP, SEED_CLAIMS_CSV, SEQ, Claim, _compute, _cost, _days,
                    _findings, _judge, _judge_all, _tps)


def offload_batch_flip(claim_id: str, *, larger: bool = True, band: float = BAND) -> int | None:
    """The tokens per GPU per optimizer step nearest :data:`OFFLOAD_TOKENS_PER_STEP` (larger or, with
    ``larger=False``, smaller; whole sequences of :data:`SEQ`) at which the verdict of ``claim_id`` differs
    from its verdict at the stated batch, or ``None`` if no batch from one sequence to 256 times the stated
    one changes it: how far the one stated batch of :data:`OPEN_SETTINGS` carries a verdict. Where the
    library cannot price 256 times the stated batch (e.g. too many ZeRO-3 gathers per step for
    :func:`~llmsizing.comm.communication` to count exactly), the larger edge is halved until it prices, so
    ``None`` then means no change up to that batch (review24c M1). A larger batch
    adds less host time per token, a smaller one more; the verdict is found by bisection, which assumes it
    changes once on that side. Chapter 14 and chapter 13 (seed 000's fine-tune)."""
    from .audit_readings import at_offload_batch

    found = {c.id: c for c, _ in _findings()}
    if not isinstance(claim_id, str) or claim_id not in found:
        raise ValueError(f"claim_id must be an id of a recomputed claim in {SEED_CLAIMS_CSV.name}, got "
                         f"{claim_id!r}")
    c, band = found[claim_id], check_number("band", band, minimum=1.0)
    if not isinstance(larger, bool):
        raise TypeError(f"larger must be True or False, got {type(larger).__name__} {larger!r}")

    def verdict_at(k: int) -> str:
        with at_offload_batch(k * SEQ):
            return _judge(c, _compute((c,))[0][1], band)[1]

    k0 = OFFLOAD_TOKENS_PER_STEP // SEQ
    v0, edge = verdict_at(k0), (256 * k0 if larger else 1)
    while True:                             # the larger edge halved to the largest batch the library prices
        try:
            v_edge = verdict_at(edge)
            break
        except ValueError as e:             # e.g. more gathers per step than comm can count exactly
            if edge // 2 <= k0:
                raise ValueError(f"claim_id {claim_id!r}: the library cannot price any batch above the "
                                 f"stated {k0} sequences ({e})") from e
            edge //= 2
    if v_edge == v0:
        return None
    same, moved = k0, edge                  # bisect between a batch that keeps v0 and one that does not
    while abs(moved - same) > 1:
        mid = (same + moved) // 2
        same, moved = (mid, moved) if verdict_at(mid) == v0 else (same, mid)
    return moved * SEQ


def judge_run(model, tokens: float, gpu, n_gpus: int, claimed: float, *, unit: str = "days",
              bound: str = "about", band: float = BAND):
    """Judge a claim about a training run that is not in ``data/seed_claims.csv`` as chapter 14 judges the
    seeds' (the same readings, :data:`OPEN_SETTINGS`, and the same :func:`verdict`): ``claimed`` days,
    tokens/s (of all ``n_gpus`` GPUs) or USD (``unit`` "days", "tokens/s", "usd") of ``tokens`` tokens of
    ``model`` on ``n_gpus`` x ``gpu``. A DataFrame, one row per reading (the central one first): ``reading``,
    ``central``, ``low`` and ``high`` (the MFU band), ``library`` (the point judged), ``verdict`` and
    ``judged`` (True on the most favourable reading, the verdict of the claim). Chapter 14's exercise 1."""
    import pandas as pd

    from ._validate import check_int
    from .audit_readings import _names

    m, g = _names(model, gpu)
    tokens = check_number("tokens", tokens, allow_equal=False)
    n = check_int("n_gpus", n_gpus, minimum=1)
    kinds = {"days": ("time", lambda: _days(m, tokens, g, n)), "tokens/s": ("throughput", lambda: _tps(
        m, g, n_gpus=n)), "usd": ("cost", lambda: _cost(m, tokens, g, n))}
    kind, compute = kinds[check_choice("unit", unit, tuple(kinds))]
    c = Claim("ad hoc", "", "", "", check_number("claimed", claimed, allow_equal=False), unit, compute,
              bound=check_choice("bound", bound, ("about", "at least", "at most")), kind=kind)
    f = _compute((c,))[0][1]
    judged = _judge_all(c, f, check_number("band", band, minimum=1.0))
    best = min(judged, key=lambda j: j[:2])
    return pd.DataFrame([{"reading": j[4], "central": r.value, "low": r.low, "high": r.high, "library": j[2],
                          "verdict": j[3], "judged": j is best} for r, j in zip((f, *f.others), judged)])
