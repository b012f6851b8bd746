"""The seed articles' numeric claims, each recomputed by the library (chapter 14, "Rules of thumb, checked").

The claims themselves (a paraphrase, the claimed value, its unit, its source article and line, whether it was
read off an image) are data: ``data/seed_claims.csv``, one row per claim, dated by the audit (``as_of``). This
module holds, for each claim id, a small function that asks the library for the same quantity
(:data:`COMPUTE`). No formula lives here: every number comes from :mod:`~llmsizing.memory`,
:mod:`~llmsizing.time_cost`, :mod:`~llmsizing.layouts`, :mod:`~llmsizing.inference`,
:mod:`~llmsizing.finetune` and the catalogues.

**The most favourable reading: one rule** (issue 38). Every setting a seed leaves open is tried at each value
of one list, the same for every claim (:data:`OPEN_SETTINGS`: sequence lengths :data:`SEQS`, the optimizer
kernel, CPU offload, full fine-tuning or LoRA, the MFU band, the batch and recomputation of a memory ratio);
the claim is judged at the combination with the best verdict (then the one whose number holds), then the
smallest factor off, and the table
names that reading (the ``reading`` column) and gives the central estimate beside it (``library_central``:
the same method and layout at :data:`SEQ` tokens and the centre of the MFU band). Its instances:

* the optimizer step is PyTorch's **fused** AdamW (no ``foreach`` temporaries: Llama 2 70B's step needs 1,194
  GB instead of 1,491);
* a run "on n GPUs" whose step does not fit on n GPUs is tried with **CPU offload** (DeepSpeed's ZeRO-Offload
  layouts, :class:`~llmsizing.parallel.Parallel` with ``offload=``), as long as the host memory it needs fits
  :data:`HOST_BYTES_PER_NODE` per node: the verdict is then "needs CPU offload", not "wrong in kind";
* the time such an offloaded run spends waiting for the host (the CPU's Adam step and the copies,
  :func:`~llmsizing.runs.offload_exposed_s`) is tried both **hidden** (the delayed parameter update of Ren
  et al. 2021, ZeRO-Offload, Sec. 5.2) and **counted** (a step that waits for its host), at one stated batch
  for every such claim
  (:data:`~llmsizing.audit_inputs.OFFLOAD_TOKENS_PER_STEP` tokens per GPU per optimizer step, chapter 13's
  case 1): counting it favours a claim that is too slow, hiding it one that is too fast;
* where a seed says "fine-tuning" without saying which, both **full fine-tuning and LoRA** are computed; when
  their verdicts differ, the ``depends`` column says so (each method's verdict kind) and ``depends_verdicts``
  gives each method's verdict with its factor (:func:`readings` has them as a table);
* times, throughputs and costs use the **calibrated MFU** of chapter 10 (by GPU generation, model size and
  sequence length, :func:`~llmsizing.time_cost.mfu_estimate`) and are judged at the point of its band (the
  published runs' spread) nearest the claim: a claim holds if some MFU that runs of that size reach makes it
  hold.

**One yardstick per kind of claim** (the ``kind`` column, :data:`YARDSTICKS`): "training memory" is always the
peak of a step on the most loaded GPU plus the allowance (:func:`~llmsizing.memory.training_memory`, full
recomputation, flash attention, one sequence of :data:`SEQ` tokens per micro-batch unless the seed names a
batch, and at 2,048 tokens too, as every claim); "model states" only the weights, gradients and optimizer
states, for the claims that name them; a "GPU count" is :func:`~llmsizing.fewest_gpus.min_gpus` of that same
step; and so on. Costs use the price per GPU-hour the seed itself states (:data:`SEED_PRICES_USD`), so that a
cost measures the seed's arithmetic, not the price list. The FP8 claims dispute how much of the FP8 peak a
run reaches, so they compare the central calibrated MFU of each dtype
(:func:`~llmsizing.time_cost.mfu_estimate`) with the FP8 recipes of :data:`~llmsizing.precision.RECIPES`;
"significantly faster", which names no factor, is read at its most favourable reading as every claim: faster
at all (a direction claim, ``above`` 1). "GB" is 10**9 bytes, as the seeds use it ("140 GB" for 70B
parameters in 16 bits), except where a seed quotes a source that computes its "GB" as bytes / 1024**3 (the
``gib_source`` column: Unsloth's 41 GB for QLoRA of Llama 3 70B). The unit is then one more open setting, and
the claim is read both as 10**9 bytes and as GiB (:data:`GIB_READING`). A GPU's memory is read both as its
vendor sells it (the central estimate) and as its driver's bytes in 10**9 (:data:`DRIVER_GB_READING`): a B200
sold as 180 GB reports 192.3e9 bytes.

**No double counting.** A claim that only repeats another (the same run in two tables) or follows from it by
the seed's own arithmetic (a table's cost = its days x its cost per day) names that claim in ``counted_with``;
:func:`verdict_counts` leaves such rows out, and counts by seed with ``by="article"``.

**The verdict rule** (:func:`verdict`, in :mod:`llmsizing.audit_verdict` with :data:`BAND`, :data:`BOUNDS`
and :data:`KINDS`, all importable from here too). With ``r = claimed / library``:

* ``about``: the claim holds if ``1/BAND <= r <= BAND`` (within 25% either way), otherwise it is
  "off by fx (too low / too high)" with ``f = max(r, 1/r)``;
* ``at least`` (a claim written "N+" or "more than N"): holds if the library value is at least N/BAND;
* ``at most`` (a claim that something fits in N GB, or that N GPUs suffice): holds if the library value is at
  most N x BAND;
* ``above`` / ``below`` (a claim that names a direction only, "faster", "reduces", "outperforms", "costs
  less", read as a ratio bounded by 1): holds only if the library value lies strictly on the claim's side of
  1, the band widening that side alone (0.9 is off for "faster", 1.05 holds);
* ``range`` (a claim "from lo to hi"): holds if the library value lies in ``[lo/BAND, hi x BAND]``, otherwise
  it is off by the factor to the nearer end; ``ratio`` uses the middle of the range.

A claim can **need CPU offload**: its premise (a run on n GPUs) holds only with ZeRO-Offload. The verdict is
then "needs CPU offload: <how>", followed in brackets by what the number scores. A claim is **wrong in kind**
when its premise fails whatever the number and whatever the reading (a run whose step fits on its GPUs in no
layout the library knows, offload included). The compute function then returns a :class:`Finding` with a
``reason``, and the verdict is "wrong: <reason>", followed in brackets by what the number alone would have
scored.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from functools import cache

from ._validate import check_choice, check_number
from . import audit_readings as _readings
from .audit_verdict import (BAND, BOUNDS, KINDS, verdict, verdict_kind, verdict_number,  # noqa: F401
                            verdict_short)
from .audit_readings import (  # noqa: F401  (re-exported: audit.SEQ, audit.Finding, ... keep working)
    DAYS_PER_MONTH, DAYS_PER_YEAR, DRIVER_GB_READING, GIB_READING, GPUS_PER_HOST, HOST_BYTES_PER_NODE,
    Finding, OFFLOAD_COUNTED,
    OFFLOAD_TOKENS_PER_STEP, OPEN_SETTINGS, RUN_GPUS_RULE, SEED_PRICES_USD, SEQ, SEQS, at_seq,
    offload_exposed_days,
    _OFFLOADS, _fit, _fit_reason, _min_offload_gpus, _offload_fit, _A100,
    _COST_TABLES, _H100, _H200, _L2_13, _L2_7, _L2_70,
    _L3_70, _L3_8, _L405, _M7, _MATRIX, _activations_gb,
    _b200_speedup, _bytes, _cost, _days, _finetune, _fp8_speedup,
    _fp8_tps, _fp8_vram, _gpu, _layer_activations_mb, _matrix, _memory_ratio,
    _min_gpus, _min_plan, _model, _one_gpu_gb, _one_way_gbps, _par,
    _qlora, _qlora_fits, _recompute_flops_factor, recompute_saving_pct, _run, _same_gpu_days_cost_ratio,
    _serving, seed_days_at_throughput, seed_gpu_days_usd,
    _serving_factor, _stage_params_billion, _states, _suffices, ten_b_stand_in, _tps,
    _train_gb, _weights_gb,
)

from .audit_claims import (  # noqa: F401  (re-exported: audit.COMPUTE, audit.claims, ... keep working)
    COMPUTE, READINGS, SEED_CLAIMS_CSV, YARDSTICKS, Claim, _flag, _rows, _run_gpus, _tps_of, claims,
    not_computed_claims,
)


def _value(result) -> Finding:
    if isinstance(result, Finding):
        return result
    return Finding(float(result))


def _at_other_seq(f: Finding, seq: int, kind: str) -> tuple[Finding, ...]:
    """``f`` and its other readings, each named as read at ``seq`` tokens (an alternative, never central)."""
    tag = f"; {seq:,} tokens"
    return tuple(replace(g, reading=(g.reading or READINGS[kind]) + tag, others=()) for g in (f, *f.others))


def _findings() -> tuple[tuple[Claim, Finding], ...]:
    """Every claim with the library's finding, computed once per session and offload batch
    (:func:`_findings_at`)."""
    return _findings_at(_readings.SEQ, _readings._TOKENS_PER_STEP)


@cache
def _findings_at(seq: int, tokens_per_step: int) -> tuple[tuple[Claim, Finding], ...]:
    """:func:`_compute` of every claim, keyed by the sequence length and the offload batch it is computed at
    (:func:`~llmsizing.audit_readings.at_seq`, :func:`~llmsizing.audit_readings.at_offload_batch`), so that
    no result depends on what ran first (review24c L4)."""
    return _compute(claims())


def _compute(cs: tuple[Claim, ...]) -> tuple[tuple[Claim, Finding], ...]:
    """Each claim of ``cs`` with the library's finding (a few seconds for all: the GPU counts search
    layouts): the central reading at :data:`SEQ` tokens, and as other readings the same at every other length
    of :data:`SEQS` (the one rule of :data:`OPEN_SETTINGS`)."""
    out = {c.id: _value(c.compute()) for c in cs}
    for seq in SEQS:
        if seq == SEQ:
            continue
        with at_seq(seq):
            alt = {c.id: (c, _value(c.compute())) for c in cs}
        for cid, (c, g) in alt.items():
            f = out[cid]
            if g.value == f.value and g.low == f.low and g.high == f.high and g.reason == f.reason:
                continue                        # the length does not enter this claim: no second reading
            out[cid] = replace(f, others=f.others + _at_other_seq(g, seq, c.kind))
    for c in cs:
        if c.gib_source:
            f = out[c.id]
            out[c.id] = replace(f, others=f.others + _as_gib(f, c.kind))
    return tuple((c, out[c.id]) for c in cs)


def _as_gib(f: Finding, kind: str) -> tuple[Finding, ...]:
    """``f`` and its other readings with their values in GiB (2**30 bytes) instead of GB (10**9 bytes), each
    named with :data:`GIB_READING`: the readings of a claim whose source writes GiB as "GB"."""
    to_gib = 1e9 / 2**30

    def scaled(x):
        return None if x is None else x * to_gib

    return tuple(replace(g, value=g.value * to_gib, low=scaled(g.low), high=scaled(g.high), others=(),
                         reading=(g.reading or READINGS[kind]) + GIB_READING) for g in (f, *f.others))


def _favourable(c: Claim, f: Finding) -> float:
    """The point of the finding's range (its MFU band) nearest the claim: the claim is judged there."""
    if f.low is None or f.high is None:
        return f.value
    lo, hi = min(f.low, f.high), max(f.low, f.high)
    if c.bound in ("at least", "above"):
        return hi
    if c.bound in ("at most", "below"):
        return lo
    top = c.claimed if c.claimed_high is None else c.claimed_high
    return min(max(c.claimed, lo), hi) if c.claimed >= lo else min(max(top, lo), hi)


def _judge_all(c: Claim, f: Finding, band: float) -> list[tuple]:
    """Each reading judged (its own first): ``(rank, |log factor|, value, verdict, reading)``; the rank is the
    verdict's kind, then whether its number holds (an offload verdict whose number holds beats one whose
    number is off, however near: a direction claim at 1.0 is off)."""
    judged = []
    for g in (f, *f.others):
        x = _favourable(c, g)
        v = verdict(c.claimed, x, bound=c.bound, claimed_high=c.claimed_high, reason=g.reason, band=band,
                    offload=g.offload)
        rank = 2 * KINDS.index(verdict_kind(v)) + (verdict_kind(verdict_number(v)) != "holds")
        judged.append((rank, abs(math.log(c.claimed_mid / x)), x, v, g.reading))
    return judged


def _methods(c: Claim, f: Finding, judged: list[tuple]) -> list[tuple]:
    """The judged readings that change the method (LoRA for "fine-tuning"), the finding's own first, at the
    central settings (not an open setting's other value, :data:`_SETTING`; not CPU offload, a layout whose
    verdict says so), each with its offload's host time hidden or counted, whichever is more favourable
    (:data:`OPEN_SETTINGS`)."""
    best: dict[str, tuple] = {}
    counted = f"; {_readings.offload_counted(_readings._TOKENS_PER_STEP)}"
    for g, j in zip((f, *f.others), judged):
        if g is not f and (g.reading == "CPU offload" or _SETTING.search(g.reading)):
            continue
        method = (g.reading or READINGS[c.kind]).replace(counted, "")
        if method not in best or j[:2] < best[method][:2]:
            best[method] = j
    return list(best.values())


def _best(judged):
    """The most favourable of :func:`_judge_all`'s readings: the best verdict kind, then a number that holds,
    then the smallest factor off (its first two fields); the one rule, shared by :func:`_judge` and
    :func:`~llmsizing.audit_runs.judge_run`."""
    return min(judged, key=lambda j: j[:2])


def _judge(c: Claim, f: Finding, band: float) -> tuple[float, str, str, str, str]:
    """(value judged, verdict, reading, depends, depends_verdicts) for one claim at its most favourable
    reading (the best :data:`~llmsizing.audit_verdict.KINDS`, then the smallest factor off). When the methods'
    verdicts differ in kind, ``depends`` lists their kinds and ``depends_verdicts`` their
    :func:`~llmsizing.audit_verdict.verdict_short` (else both empty)."""
    judged = _judge_all(c, f, band)
    best = _best(judged)
    methods = _methods(c, f, judged)
    if len({verdict_kind(j[3]) for j in methods}) < 2:
        return best[2], best[3], best[4], "", ""
    depends = " | ".join(f"{j[4] or 'as stated'}: {verdict_kind(j[3])}" for j in methods)
    detail = " | ".join(f"{j[4] or 'as stated'}: {verdict_short(j[3])}" for j in methods)
    return best[2], best[3], best[4], depends, detail


def readings(claim_id: str, band: float = BAND):
    """Each method of reading one claim, judged on its own at its most favourable setting (a DataFrame, the
    claim's own first): ``reading``, ``library`` (the value judged: its range's point nearest the claim),
    ``library_central``, ``verdict``, ``verdict_kind``, ``number``
    (:func:`~llmsizing.audit_verdict.verdict_number`): what ``depends`` in :func:`audit_table` sums up (seed
    000's "fine-tuning": full or LoRA). Taught in chapter 14."""
    import pandas as pd

    found = {c.id: (c, f) for c, f in _findings()}
    if not isinstance(claim_id, str) or claim_id not in found:
        raise ValueError(f"claim_id must be an id of a recomputed claim in {SEED_CLAIMS_CSV.name} (e.g. "
                         f"'000-faq-finetune-days'), got {claim_id!r}")
    c, f = found[claim_id]
    return pd.DataFrame([{"reading": j[4] or READINGS[c.kind], "library": j[2], "library_central":
                          _central(c, f, j[4]), "verdict": j[3], "verdict_kind": verdict_kind(j[3]),
                          "number": verdict_number(j[3])} for j in _methods(c, f, _judge_all(c, f, band))])


#: The tail of a reading that names an open setting's alternative value (:data:`OPEN_SETTINGS`), not a method.
_SETTING = re.compile(r"(; [\d,]+ tokens|; (micro-batch \d+, )?\w+ recomputation|"
                      + re.escape(GIB_READING) + "|" + re.escape(DRIVER_GB_READING) + ")+$")


def _central(c: Claim, f: Finding, reading: str) -> float:
    """The central estimate behind a judged reading: the same method and layout (offload, LoRA, ...), at the
    central sequence length :data:`SEQ` and, for a time, throughput or cost, the centre of the MFU band; in
    the unit it is judged in (GiB for a reading tagged :data:`GIB_READING`)."""
    base = _SETTING.sub("", reading or READINGS[c.kind])
    if GIB_READING in (reading or ""):
        base += GIB_READING
    return next((g.value for g in (f, *f.others) if (g.reading or READINGS[c.kind]) == base), f.value)


def audit_table(band: float = BAND):
    """One row per recomputed claim: ``id, article, topic, claim, claimed, library, ratio, verdict`` (then
    ``unit, bound, claimed_low, claimed_high, wrong_in_kind, kind, reading, depends, depends_verdicts,
    from_image, counted_with, line, library_central, verdict_kind``). ``claimed`` is the middle of a claimed
    range; ``library`` is the value judged, the point of the most favourable reading (:data:`OPEN_SETTINGS`)
    nearest the claim; ``library_central`` is the central estimate of the same method and layout (:data:`SEQ`
    tokens, the centre of the MFU band); ``unit`` is the claim's, or GiB where the reading judged takes its
    "GB" as GiB (:data:`GIB_READING`); ``ratio`` = claimed / library, and the verdict follows
    :func:`~llmsizing.audit_verdict.verdict` with tolerance ``band`` (default
    :data:`~llmsizing.audit_verdict.BAND`). The library values are computed once per session; a new ``band``
    only re-judges them. Taught in chapter 14."""
    import pandas as pd

    band = check_number("band", band, minimum=1.0)
    rows = []
    for c, f in _findings():
        x, v, reading, depends, detail = _judge(c, f, band)
        central = _central(c, f, reading)
        rows.append({"id": c.id, "article": c.article, "topic": c.topic, "claim": c.claim,
                     "claimed": c.claimed_mid, "library": x, "ratio": c.claimed_mid / x, "verdict": v,
                     "unit": c.unit.replace("GB", "GiB") if GIB_READING in (reading or "") else c.unit,
                     "bound": c.bound, "claimed_low": c.claimed,
                     "claimed_high": math.nan if c.claimed_high is None else c.claimed_high,
                     "wrong_in_kind": v.startswith("wrong"), "kind": c.kind,
                     "reading": reading or READINGS[c.kind],
                     "depends": depends, "depends_verdicts": detail, "from_image": c.from_image,
                     "counted_with": c.counted_with, "line": c.line, "library_central": central,
                     "verdict_kind": verdict_kind(v)})
    return pd.DataFrame(rows)


def verdict_counts(df=None, *, by: str | None = None, headline: bool = False):
    """How many claims hold, need CPU offload, are off by more than the band, or are wrong in kind (over
    :func:`audit_table`): a dict keyed by :data:`~llmsizing.audit_verdict.KINDS`. ``headline=True`` leaves out
    the claims that only repeat or follow from another (``counted_with``), so that no error is counted twice.
    ``by="article"`` returns a DataFrame instead: one row per seed, one column per kind, and the total."""
    df = audit_table() if df is None else df
    kinds = df["verdict"].map(verdict_kind)
    if headline:
        keep = df["counted_with"].fillna("") == ""
        df, kinds = df[keep], kinds[keep]
    if by is None:
        return {k: int((kinds == k).sum()) for k in KINDS}
    check_choice("by", by, ("article",))
    import pandas as pd

    out = pd.crosstab(df[by], kinds).reindex(columns=list(KINDS), fill_value=0)
    out["total"] = out.sum(axis=1)
    out.columns.name = None
    return out


def judged(claim_id: str, band: float = BAND):
    """One row of :func:`audit_table` (a pandas Series), for a chapter that discusses a single seed claim: so
    that every chapter gives a claim the same verdict as chapter 14 (chapter 13 does this for seed 000's
    fine-tune)."""
    t = audit_table(band).set_index("id")
    if not isinstance(claim_id, str) or claim_id not in t.index:
        raise ValueError(f"claim_id must be an id of a recomputed claim in {SEED_CLAIMS_CSV.name} (e.g. "
                         f"'000-faq-finetune-days'), got {claim_id!r}")
    return t.loc[claim_id]
