"""Chapter 14's quotations of the seed articles: each figure as ``data/seed_claims.csv`` holds it
(:func:`said`, :data:`SEED_QUOTES`), never typed into the prose, and the audit table read the way the chapter
writes it.

:mod:`llmsizing.audit_text` builds the chapter's values on these; a statement of the prose that the audit no
longer supports raises :class:`~llmsizing.prose.ProseOutOfDate` there. Nothing here computes a new quantity:
it formats the data's figures and the audit's verdicts (:mod:`llmsizing.audit`).
"""

from __future__ import annotations

import csv
import re

from .audit import BAND, SEED_CLAIMS_CSV, verdict_number
from .prose import claimed_text, prose_check, three_figures

fmt = three_figures   # one rule for the chapter's values: 1.90 (rounded), 0.5 and 16 (exact), 1,194

#: The seed figures chapter 14 quotes: glue name (``ch14_said_<name>``) -> (claim id, unit, style). The style
#: "pct" writes a ratio above 1 as the percentage it adds (1.2 -> "20%"); "%" glues the unit to the number.
SEED_QUOTES = {
    "mem70": ("000-mem-llama2-70b-b1", "GB", ""), "tps_h100": ("000-tps-h100", "", ""),
    "tps_a100": ("000-tps-a100", "", ""), "tps_a10": ("000-tps-a10", "", ""),
    "70_64_days": ("000-cost-llama2-70b-64-days", "", ""), "opt1_days": ("000-opt1-days", "", ""),
    "m7_1_days": ("000-cost-mistral7b-1-days", "", ""), "m7_1_tps": ("000-cost-mistral7b-1-tps", "", ""),
    "70_64_usd": ("000-cost-llama2-70b-64-usd", "USD", ""),
    "opt3_usd": ("000-opt3-cost", "USD", ""), "tp_mem": ("000-tp-70b-mem", "GB", ""),
    "pp_mem": ("000-pp-405b-mem", "GB", ""), "opt_10b": ("002-10b-optimizer", "GB", ""),
    "10b_act": ("002-10b-activations", "GB", ""), "10b_total": ("002-10b-total", "GB", ""),
    "10b_two": ("002-10b-two-gpus", "GB", ""), "serve70": ("002-70b-serving", "GB", ""),
    "rule12": ("002-rule-batch32", "", ""), "cnt70": ("003-70b-h100s", "", ""),
    "w70": ("004-70b-weights", "GB", ""), "t70": ("004-70b-total", "GB", ""),
    "qlora41": ("004-qlora-70b-41gb", "GB", ""),
    "qlora41_gib": ("004-qlora-70b-41gb", "GiB", ""), "b16": ("004-16-bytes", "", ""),
    "adam2": ("000-rule-adam-state", "", ""), "flops3": ("000-time-formula", "", ""),
    "ga_batch": ("000-grad-accum-batch", "", ""), "ga_saving": ("000-grad-accum-savings", "%", "%"),
    "mp2": ("000-mixed-precision-2x", "", ""), "ckpt20": ("000-checkpointing-slowdown", "", "pct"),
    "ckpt_mem": ("000-checkpointing", "%", "%"), "layer_act": ("002-10b-layer-activations", "MB", ""),
    "two_nodes": ("004-70b-two-nodes", "", ""), "g405": ("003-405b-gpus", "", ""),
    "m405": ("000-matrix-405b-15t-h100", "", ""), "b200_bw": ("004-b200-bandwidth", "TB/s", ""),
    "b200_mem": ("004-b200-memory", "GB", ""), "b200_x": ("004-b200-speedup", "", ""),
    "ft_days": ("000-faq-finetune-days", "", ""), "ft_usd": ("000-faq-finetune-usd", "USD", ""),
    "qlora_one": ("004-qlora-70b-one-gpu", "GB", ""), "qlora_l40s": ("004-qlora-7-13b-l40s", "GB", ""),
    "fit24": ("000-fit-rtx4090-mistral7b-q", "GB", ""),
}


def _holds(ok, what: str) -> None:
    prose_check(ok, what, "chapter 14")


def said(table, claim_id: str, unit: str = "", style: str = "") -> str:
    """The seed's own figure for ``claim_id`` as ``data/seed_claims.csv`` holds it, in the one rule of
    :func:`~llmsizing.prose.claimed_text` ('69', '20 to 40 GB', '285,936 USD'; style "%": '30 to 40%'; style
    "pct": a factor 1.2 as '20%'). ``table`` is :func:`~llmsizing.audit.audit_table` (or a frame with its
    ``id``, ``claimed_low``, ``claimed_high``)."""
    rows = table.set_index("id") if "id" in table.columns else table
    if claim_id not in rows.index:
        raise ValueError(f"claim_id must be an id of the audit table, got {claim_id!r}")
    return claimed_text(rows.loc[claim_id, "claimed_low"], rows.loc[claim_id, "claimed_high"], unit, style)


def seed_quotes(table) -> dict[str, str]:
    """``said_<name>`` -> text for every quote of :data:`SEED_QUOTES`: the seed figures the chapter quotes
    (glued as ``ch14_said_<name>``), from the data."""
    return {f"said_{name}": said(table, c, unit, style)
            for name, (c, unit, style) in SEED_QUOTES.items()}


#: Seed 000's scaling efficiencies (claim ``000-efficiencies``, not recomputed: an efficiency belongs to a
#: layout, a batch and a network, not to a strategy): glue name -> the strategy as the claim's text names it.
SEED_EFFICIENCIES = {"eff_dp": "DP", "eff_tp": "TP", "eff_pp": "PP", "eff_fsdp": "FSDP"}


def seed_efficiencies(claim_id: str = "000-efficiencies") -> dict[str, str]:
    """``said_<name>`` -> the seed's range for each strategy of :data:`SEED_EFFICIENCIES` ('85–95%'), read
    from the claim's text in ``data/seed_claims.csv`` ("DP 85-95%, TP 70-85%, ..."), so chapter 14 quotes
    it rather than types it. A claim whose text no longer names a strategy's range raises ValueError."""
    with open(SEED_CLAIMS_CSV, newline="") as f:
        text = next((r["claim"] for r in csv.DictReader(f) if r["id"] == claim_id), None)
    if text is None:
        raise ValueError(f"claim_id must be an id of {SEED_CLAIMS_CSV.name}, got {claim_id!r}")
    out = {}
    for name, strategy in SEED_EFFICIENCIES.items():
        m = re.search(rf"\b{strategy} (\d+)-(\d+)%", text)
        if m is None:
            raise ValueError(f"{claim_id}'s claim names no range for {strategy}: {text!r}")
        out[f"said_{name}"] = f"{m[1]}–{m[2]}%"
    return out


class _Rows:
    """The audit table by id, with the chapter's ways of writing a row's values."""

    def __init__(self, table):
        self.table, self.row = table, table.set_index("id")

    def lib(self, c: str) -> str:
        return fmt(self.row.loc[c, "library"])

    def central(self, c: str) -> str:
        return fmt(self.row.loc[c, "library_central"])

    def v(self, c: str) -> str:
        return self.row.loc[c, "verdict"]

    def number(self, c: str) -> str:
        return verdict_number(self.v(c))

    def ratio_x(self, c: str) -> str:
        r = self.row.loc[c, "ratio"]
        return f"{max(r, 1 / r):.1f}"


def _verb(v: str) -> str:
    """A verdict as the prose's predicate: "holds (within the band of that end)" or "is off by 1.3x ..."."""
    return f"holds (within the audit's {BAND - 1:.0%} of that end)" if v == "holds" else f"is {v}"
