"""Chapter 14's audit applied beyond the seed claims' table: a claim about any training run judged as the
seeds' are (:func:`judge_run`, the same readings of :data:`~llmsizing.audit_inputs.OPEN_SETTINGS` and the same
:func:`~llmsizing.audit_verdict.verdict`), and how far the one stated offload batch
(:data:`~llmsizing.audit_inputs.OFFLOAD_TOKENS_PER_STEP`) carries a seed claim's verdict
(:func:`offload_batch_flip`). No formula lives here: every number comes from :mod:`llmsizing.audit`'s
readings.
"""

from __future__ import annotations

from ._validate import check_choice, check_number
from .audit_verdict import verdict_kind, verdict_number
from .audit import (BAND, OFFLOAD_TOKENS_PER_STEP, SEED_CLAIMS_CSV, SEQ, Claim, _best, _compute, _cost,
                    _days, _findings, _judge, _judge_all, _tps)


def offload_batch_flip(claim_id: str, *, larger: bool = True, band: float = BAND) -> int | None:
    """The tokens per GPU per optimizer step nearest :data:`OFFLOAD_TOKENS_PER_STEP` (larger or, with
    ``larger=False``, smaller; whole sequences of :data:`SEQ`) at which the verdict of ``claim_id`` differs
    from its verdict at the stated batch, or ``None`` if no batch from one sequence to 256 times the stated
    one changes it: how far the one stated batch of :data:`OPEN_SETTINGS` carries a verdict. A verdict
    differs when its kind or the kind of its number's score does ("holds" against "off"), not its wording
    (review24c L2). The batches are scanned by doubling (or halving) first, then bisected between the last
    that keeps the verdict and the first that does not, so a verdict that changes and changes back within
    one doubling can be missed. Where the library cannot price a larger batch (e.g. too many ZeRO-3 gathers
    per step for :func:`~llmsizing.comm.communication` to count exactly), the scan stops at the last batch
    it prices, so ``None`` then means no change up to that batch (review24c M1). A larger batch adds less
    host time per token, a smaller one more. Chapter 14 and chapter 13 (seed 000's fine-tune)."""
    found = {c.id: c for c, _ in _findings()}
    if not isinstance(claim_id, str) or claim_id not in found:
        raise ValueError(f"claim_id must be an id of a recomputed claim in {SEED_CLAIMS_CSV.name}, got "
                         f"{claim_id!r}")
    c, band = found[claim_id], check_number("band", band, minimum=1.0)
    if not isinstance(larger, bool):
        raise TypeError(f"larger must be True or False, got {type(larger).__name__} {larger!r}")
    return _flip(c, larger, band)


def _flip(c: Claim, larger: bool, band: float, within: float | None = None) -> int | None:
    """:func:`offload_batch_flip` of claim ``c`` (its arguments checked). ``within``: only a flip batch within
    that factor of the stated one is wanted (:func:`fragile_offload_verdicts`): the scan stops once the batch
    that keeps the verdict is at or beyond that factor, where any flip it went on to find would lie beyond it
    too. The batches scanned up to there are the same, so a flip within the factor is the same batch."""
    from .audit_readings import at_offload_batch

    def key_at(k: int) -> tuple[str, str]:
        with at_offload_batch(k * SEQ):
            v = _judge(c, _compute((c,))[0][1], band)[1]
        return verdict_kind(v), verdict_kind(verdict_number(v))

    k0 = OFFLOAD_TOKENS_PER_STEP // SEQ
    end = 256 * k0 if larger else 1
    if within is not None:                  # (same >= k0 x within: a flip found later is above it too)
        end = min(end, k0 * within) if larger else max(end, k0 / within)
    v0, same, moved = key_at(k0), k0, None
    while moved is None and (same < end if larger else same > end):
        k = min(2 * same, 256 * k0) if larger else max(same // 2, 1)
        try:
            v = key_at(k)
        except ValueError:                  # the library cannot price it: the scan ends at the last it did
            if larger:
                break
            raise
        same, moved = (k, None) if v == v0 else (same, k)
    if moved is None:
        return None
    while abs(moved - same) > 1:            # bisect between a batch that keeps v0 and one that does not
        mid = (same + moved) // 2
        same, moved = (mid, moved) if key_at(mid) == v0 else (same, mid)
    return moved * SEQ


def fragile_offload_verdicts(factor: float = 2.0, *, band: float = BAND) -> list[dict]:
    """The offloaded time, throughput and cost claims whose verdict changes at a batch within ``factor`` of
    the stated :data:`OFFLOAD_TOKENS_PER_STEP` (from stated / factor to stated x factor,
    :func:`offload_batch_flip` both ways): one dict per claim, ``id`` and the flip batches in sequences of
    :data:`SEQ` (``above``, ``below``; None where it does not change within the factor). Chapter 14
    (review24c M2)."""
    factor = check_number("factor", factor, minimum=1.0)
    k0, out = OFFLOAD_TOKENS_PER_STEP // SEQ, []
    for c, f in _findings():
        if c.kind not in ("time", "throughput", "cost") or not f.offload:
            continue
        # (each scan stops where a flip could only lie beyond the factor: the flips within it are the
        # ones the whole scan finds, in a fraction of the batches priced; fast34)
        up, down = (_flip(c, b, band, within=factor) for b in (True, False))
        up = up // SEQ if up is not None and up // SEQ <= factor * k0 else None
        down = down // SEQ if down is not None and down // SEQ >= k0 / factor else None
        if up is not None or down is not None:
            out.append({"id": c.id, "above": up, "below": down})
    return out


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
    best = _best(judged)
    return pd.DataFrame([{"reading": j[4], "central": r.value, "low": r.low, "high": r.high, "library": j[2],
                          "verdict": j[3], "judged": j is best} for r, j in zip((f, *f.others), judged)])
