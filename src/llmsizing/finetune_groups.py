"""The groups of fine-tuning's range (issue 34: "let the range depend on what explains the spread"; ch. 16).

:data:`GROUPINGS` are the groupings of the calibration rows registered by ft39 before any grouped residual was
computed, each with the rule that would adopt it; :data:`FINETUNE_GROUPING` is the one adopted (session 43):
a QLoRA step (quantised base) and a LoRA step (bf16 base) each take the 80% range of their own group,
:data:`~llmsizing.finetune_time.GROUP_RANGES`, from :func:`~llmsizing.finetune_time.finetune_loso_check`
``grouping="base"``. Kept apart from :mod:`llmsizing.finetune_time` to keep that module under 600 lines.
"""

from __future__ import annotations

#: Groupings of the covered rows registered before any grouped residual was computed (ft39, issue 34: "let
#: the range depend on what explains the spread"): name -> (the label of a row, why it should explain spread).
#: Each was to be adopted only if, checked as the single range is
#: (:func:`~llmsizing.finetune_time.finetune_loso_check`), it kept the out-of-source coverage at least the
#: single range's and narrowed its median width, every group at least 75%
#: (``tools/calibrate_finetune.py --groupings``). Until ft43 neither did. Since ft43 (the launch floor per
#: pass) ``base`` meets the rule, and is adopted (ftbase43, session 43; :data:`FINETUNE_GROUPING`): 99 of 118
#: rows (83.9%) held out of source at a median 2.26x, against the single range's 96 (81.4%) at 2.36x; the
#: quantised rows 49 of 59 (83.1%, 2.17x), the bf16-base rows 50 of 59 (84.7%, 2.78x). ``gpus`` is not:
#: 79.7% at 3.22x, its multi-GPU rows 61%.
GROUPINGS = {
    "base": (lambda r: "quantised" if r.method == "qlora" else "bf16-base",
             "QLoRA's dequantisation is priced by one HBM share for GPTQ, bitsandbytes and torchao 4-bit"),
    "gpus": (lambda r: "multi-gpu" if int(r.n_gpus) > 1 else "single-gpu",
             "over several GPUs the exposed collectives are estimated; on one GPU there are none"),
}
#: The grouping the stated fine-tuning range follows (adopted by the registered rule, session 43).
FINETUNE_GROUPING = "base"
#: The groups of :data:`FINETUNE_GROUPING` and the suffix of their rows in ``data/finetune_model.csv``.
RANGE_GROUPS = {"quantised": "quantised", "bf16-base": "bf16_base"}


def range_group(method: str) -> str | None:
    """The group of :data:`FINETUNE_GROUPING` whose range a ``method`` step takes: ``"quantised"`` for QLoRA,
    ``"bf16-base"`` for LoRA; ``None`` for full fine-tuning, which no range bounds (its rows are
    ``known_out``)."""
    from ._validate import check_choice
    from .finetune_base import METHODS

    method = check_choice("method", method, METHODS)
    return None if method == "full" else ("quantised" if method == "qlora" else "bf16-base")


def _group_ranges() -> dict:
    """:data:`GROUP_RANGES` read from ``data/finetune_model.csv`` (a file without its rows, before
    ``tools/calibrate_finetune.py`` wrote them: the pooled range, and that tool's ``--check`` fails)."""
    import csv

    from .catalog import DATA_DIR

    with open(DATA_DIR / "finetune_model.csv", newline="") as f:
        fitted = {r["constant"]: float(r["value"]) for r in csv.DictReader(f)}
    return {g: tuple(fitted.get(f"range_{end}_{k}", fitted[f"range_{end}"]) for end in ("low", "high"))
            for g, k in RANGE_GROUPS.items()}


#: The stated 80% range of published / predicted step time per group of :data:`FINETUNE_GROUPING` (a QLoRA
#: step's, ``"quantised"``, and a LoRA step's, ``"bf16-base"``): the bounds of
#: :func:`~llmsizing.finetune_time.finetune_loso_check` ``grouping="base"``, rounded outwards
#: (``data/finetune_model.csv``, ``range_low_quantised`` ...; ``data/intervals.csv``, ``fine-tuning-base``).
GROUP_RANGES = _group_ranges()


def residual_range(method: str) -> tuple | None:
    """The 80% range of published / predicted step time a ``method`` step states: its group's
    (:func:`range_group`, :data:`GROUP_RANGES`); ``None`` for full fine-tuning."""
    group = range_group(method)
    return None if group is None else GROUP_RANGES[group]


def finetune_group_labels(rows, grouping: str):
    """The label of :data:`GROUPINGS` ``grouping`` for each row of ``rows``
    (:func:`~llmsizing.finetune_time.published_frame`'s)."""
    import numpy as np

    from ._validate import check_choice

    label = GROUPINGS[check_choice("grouping", grouping, GROUPINGS)][0]
    return np.array([label(r) for r in rows.itertuples()], dtype=object)


__all__ = ["GROUPINGS", "FINETUNE_GROUPING", "RANGE_GROUPS", "GROUP_RANGES", "range_group", "residual_range",
           "finetune_group_labels"]
