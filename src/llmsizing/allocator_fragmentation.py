"""What the PyTorch CUDA caching allocator reserves beyond the tensors it holds, as published (issue 34;
chapter 3's allowance, :data:`~llmsizing.states.FRAGMENTATION`): pairs of (peak allocated or peak active
bytes, peak reserved bytes) from LLM training and fine-tuning runs, one row each in
``data/allocator_fragmentation.csv`` with its source, and their spread.

A row's ``fragmentation`` is ``reserved / allocated - 1``: what a step needs on top of its peak of live
tensors for the allocator's cached, split and per-stream blocks. ``statistic`` says which peak the source
printed: ``peak_allocated`` (``allocated_bytes.all.peak``, live tensors) or ``peak_active``
(``active_bytes.all.peak``, which also counts freed blocks a side stream still uses; FSDP1's and NCCL's
``recordStream`` make it larger). ``superseded`` is ``yes`` where the source's own change replaced that
configuration (a bug it fixed, a default it changed). Every published pair found so far ran the default
allocator (``expandable_segments`` off) or does not say; none measures ``expandable_segments:True``, which
torchtitan and other stacks now set.
"""

from __future__ import annotations

import csv
import functools
import statistics
from dataclasses import dataclass

from ._validate import check_bool, check_choice
from .catalog import DATA_DIR

#: The file of published pairs, in ``data/``.
ALLOCATOR_FRAGMENTATION_CSV = "allocator_fragmentation.csv"

#: Which peak a row's ``allocated_gib`` is (``torch.cuda.memory_stats`` keys ``allocated_bytes.all.peak`` and
#: ``active_bytes.all.peak``).
FRAGMENTATION_STATISTICS = ("peak_active", "peak_allocated")


@dataclass(frozen=True)
class FragmentationSpread:
    """The spread of published ``reserved / allocated - 1`` for one statistic: ``median`` and the range
    ``low``-``high`` over the rows, and ``source_median``, the median of each source's own median (a source
    with many rows, such as GMLake's figures, counts once)."""

    statistic: str
    n_rows: int
    n_sources: int
    median: float
    low: float
    high: float
    source_median: float


@functools.lru_cache(maxsize=1)
def _rows() -> tuple[dict[str, str], ...]:
    with open(DATA_DIR / ALLOCATOR_FRAGMENTATION_CSV, newline="") as fh:
        return tuple(csv.DictReader(fh))


def allocator_fragmentation_rows():
    """``data/allocator_fragmentation.csv`` as a DataFrame (a copy), numbers as floats."""
    import pandas as pd

    df = pd.DataFrame(list(_rows()))
    for col in ("allocated_gib", "reserved_gib", "fragmentation"):
        df[col] = df[col].astype("float64")
    return df


def measured_fragmentation(statistic: str = "peak_active", *,
                           include_superseded: bool = False) -> FragmentationSpread:
    """The spread of the published fragmentation for ``statistic`` (one of
    :data:`FRAGMENTATION_STATISTICS`), recomputed from each row's two peaks; rows whose configuration their
    own source replaced are left out unless ``include_superseded``."""
    check_choice("statistic", statistic, FRAGMENTATION_STATISTICS)
    check_bool("include_superseded", include_superseded)
    by_source: dict[str, list[float]] = {}
    for row in _rows():
        if row["statistic"] != statistic or (row["superseded"] == "yes" and not include_superseded):
            continue
        frag = float(row["reserved_gib"]) / float(row["allocated_gib"]) - 1
        by_source.setdefault(row["source_key"], []).append(frag)
    values = [v for vs in by_source.values() for v in vs]
    return FragmentationSpread(
        statistic=statistic, n_rows=len(values), n_sources=len(by_source), median=statistics.median(values),
        low=min(values), high=max(values),
        source_median=statistics.median(statistics.median(vs) for vs in by_source.values()))
