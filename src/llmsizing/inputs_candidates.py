"""Session 48's pre-registered candidates for the range of the end-to-end MFU model from the planner's inputs
(area ``training-inputs``, :mod:`llmsizing.mfu_inputs`; chapter 10, issue 34). Written down, with the adoption
rule below, before any of them was computed.

The fit is the one the library states (:data:`~llmsizing.range_candidates.REGISTERED` ``"registered"``: the
baseline terms, a stack family offset, log tokens per GPU with a "batch not published" flag; least squares
refit without the held-out source in every outer and inner fold); the candidates change only how its 80%
conformal range is built from the out-of-source residuals, by inputs a planner knows before a run:

- ``"kind_strata"``: group-conditional bounds by what is asked, a steady state or a whole-run total (the
  baseline's range already splits by kind; the inputs range does not): the stratum generation x kind where it
  has :func:`~llmsizing.intervals.min_units` sources, else the kind, else pooled.
- ``"named_strata"``: group-conditional bounds by whether the stack is named (a family other than
  ``"unknown"``: :func:`~llmsizing.frameworks.stack_family`; a user who names a framework gets the named
  band): generation x named, else named, else pooled.
- ``"scaled"``: normalised residuals (locally weighted conformal, Lei et al. 2018 Sec. 5.2): score
  ``|r| / s(x)`` with ``log s(x) = g . (stack unnamed, batch unpublished, whole run)``, ``g`` (with an
  intercept, which the quantile absorbs) the source-weighted least squares of ``log max(|r|, 0.01)`` (1%: the
  precision of a published MFU) on the fold's inner residuals, each inner row scored with ``g`` fitted without
  its own source; the quantile per GPU generation as today (9+ sources, else pooled); bounds ``+-q s(x)``.

Every candidate is checked nested, leaving whole sources out, with the same stand-in rule as
:func:`~llmsizing.intervals.loso_check` (a run whose generation and dtype no other source calibrates sets no
bound and is counted apart).

**Adoption rule** (registered with them): a candidate passes when, over the runs calibrated in their fold, its
coverage is at least 75% in every group of ``data/intervals.csv``'s area ``training-inputs`` that is at least
75% today (all, ampere, hopper, stack:deepspeed, stack:megatron, stack:pytorch, bf16, fp8, steady-state,
pretraining-total, batch:published, batch:unpublished; stack:unknown, 63.2% today, is reported, not gated) and
its median width over all those runs is strictly below today's 1.8637x. If several pass, the one with the
narrowest median width is adopted; no combination is tried this session (3 candidates, 3 tries). A candidate
that passes but moves a published figure a test checks is reported, not adopted. Nothing is widened by hand.
"""

from __future__ import annotations

#: name -> (how the bounds are built, its inputs): ``"levels"`` strata finest first (else pooled),
#: ``"scaled"`` the covariates of the scale model.
REGISTERED48 = {
    "kind_strata": ("levels", ("generation:kind", "kind")),
    "named_strata": ("levels", ("generation:named", "named")),
    "scaled": ("scaled", ("stack_unnamed", "batch_unpublished", "whole_run")),
}
#: The floor of ``|r|`` in the scale model's log (candidate ``"scaled"``).
SCALE_FLOOR = 0.01
#: Today's median width of the area (data/intervals.csv, training-inputs, all) a candidate must fall below.
TODAY_WIDTH = 1.8637
#: The groups whose coverage must stay at least 75% (those at 75% or more today).
GATED_GROUPS = ("all", "ampere", "hopper", "stack:deepspeed", "stack:megatron", "stack:pytorch", "bf16",
                "fp8", "steady-state", "pretraining-total", "batch:published", "batch:unpublished")
