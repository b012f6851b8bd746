"""What the PyTorch CUDA caching allocator reserves beyond the tensors it holds, as published (issue 34;
chapter 3's allowance, :data:`~llmsizing.states.FRAGMENTATION`): pairs of (peak allocated or peak active
bytes, peak reserved bytes) from LLM training and fine-tuning runs, one row each in
``data/allocator_fragmentation.csv`` with its source, and their spread.

A row's ``fragmentation`` is ``reserved / allocated - 1``: what a step needs on top of its peak of live
tensors for the allocator's cached, split and per-stream blocks. ``statistic`` says which peak the source
printed: ``peak_allocated`` (``allocated_bytes.all.peak``, live tensors) or ``peak_active``
(``active_bytes.all.peak``, which also counts freed blocks a side stream still uses; FSDP1's and NCCL's
``recordStream`` make it larger). ``superseded`` is ``yes`` where the source's own change replaced that
configuration (a bug it fixed, a default it changed).

``allocator_settings`` says how the allocator was set: :data:`ALLOCATOR_SETTINGS` sorts each row into
``default`` (the caching allocator as PyTorch ships it: ``expandable_segments`` off, not set, or not stated)
or ``expandable_segments`` (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``, which torchtitan, axolotl,
Unsloth and NeMo's launch scripts now set). The ``expandable_segments`` rows, so far, come from one source:
Giles Thomas's published sweeps (github.com/gpjt/fine-tune-2024-04, 2024; Hugging Face Trainer + DeepSpeed,
fp16, torch 2.2.2), which ran the same script with and without the setting, so each of his ``on`` rows has an
``off`` row of the same run (:func:`expandable_segments_effect`). Of each sweep the rows keep three points,
its first, middle and last value of sequence length or batch (for his 8B sequence sweep, whose two settings
ran on different grids, the first, middle and last of each grid: only the first is a pair); on 8 GPUs a
point's two peaks are the largest over the ranks.
"""

from __future__ import annotations

import csv
import functools
import statistics
from dataclasses import dataclass

from ._validate import check_bool, check_choice, check_number
from .catalog import DATA_DIR

#: The file of published pairs, in ``data/``.
ALLOCATOR_FRAGMENTATION_CSV = "allocator_fragmentation.csv"

#: Which peak a row's ``allocated_gib`` is (``torch.cuda.memory_stats`` keys ``allocated_bytes.all.peak`` and
#: ``active_bytes.all.peak``).
FRAGMENTATION_STATISTICS = ("peak_active", "peak_allocated")

#: How a row's allocator was set: ``default`` is PyTorch's caching allocator as shipped
#: (``expandable_segments`` off, not set or not stated), ``expandable_segments`` is
#: ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (the row's ``allocator_settings`` starts with
#: ``expandable_segments:True``).
ALLOCATOR_SETTINGS = ("default", "expandable_segments")


@dataclass(frozen=True)
class FragmentationSpread:
    """The spread of published ``reserved / allocated - 1`` for one statistic: ``median`` and the range
    ``low``-``high`` over the rows, and ``source_median``, the median of each source's own median (a source
    with many rows, such as GMLake's figures, counts once). ``values``: every row's fragmentation, in the
    file's order (to count the published runs above a room, e.g. :func:`~llmsizing.states.fragmentation_room`:
    chapter 4)."""

    statistic: str
    n_rows: int
    n_sources: int
    median: float
    low: float
    high: float
    source_median: float
    allocator: str = "default"
    values: tuple = ()

    def above(self, fraction: float) -> int:
        """How many of the published rows reserved more than ``fraction`` above their live tensors."""
        return sum(v > check_number("fraction", fraction, minimum=-1.0) for v in self.values)


@dataclass(frozen=True)
class ExpandableSegmentsEffect:
    """What ``expandable_segments:True`` changed in runs published both ways (same source, same run, same
    statistic): the median and range over the ``n_pairs`` pairs of ``reserved_on / reserved_off - 1``, and
    the median fragmentation of the same pairs with the setting off and on."""

    statistic: str
    n_pairs: int
    n_sources: int
    reserved_change_median: float
    reserved_change_low: float
    reserved_change_high: float
    fragmentation_off_median: float
    fragmentation_on_median: float


@functools.lru_cache(maxsize=1)
def _rows() -> tuple[dict[str, str], ...]:
    with open(DATA_DIR / ALLOCATOR_FRAGMENTATION_CSV, newline="") as fh:
        return tuple(csv.DictReader(fh))


def allocator_setting(allocator_settings: str) -> str:
    """The :data:`ALLOCATOR_SETTINGS` entry of a row whose ``allocator_settings`` column is the given text."""
    if not isinstance(allocator_settings, str):
        raise TypeError(f"allocator_settings must be a string, got {type(allocator_settings).__name__}")
    return "expandable_segments" if allocator_settings.startswith("expandable_segments:True") else "default"


def allocator_fragmentation_rows():
    """``data/allocator_fragmentation.csv`` as a DataFrame (a copy), numbers as floats, with an ``allocator``
    column (:func:`allocator_setting` of ``allocator_settings``)."""
    import pandas as pd

    df = pd.DataFrame(list(_rows()))
    for col in ("allocated_gib", "reserved_gib", "fragmentation"):
        df[col] = df[col].astype("float64")
    df["allocator"] = df["allocator_settings"].map(allocator_setting)
    return df


def _fragmentation(row: dict[str, str]) -> float:
    return float(row["reserved_gib"]) / float(row["allocated_gib"]) - 1


def measured_fragmentation(statistic: str = "peak_active", *, include_superseded: bool = False,
                           allocator: str = "default") -> FragmentationSpread:
    """The spread of the published fragmentation for ``statistic`` (one of
    :data:`FRAGMENTATION_STATISTICS`) with the allocator set as ``allocator`` (one of
    :data:`ALLOCATOR_SETTINGS`; ``default``, PyTorch's own setting, unless told), recomputed from each row's
    two peaks; rows whose configuration their own source replaced are left out unless
    ``include_superseded``. A ValueError if no published row has that statistic and setting (no source has
    printed peak allocated bytes with ``expandable_segments`` on)."""
    check_choice("statistic", statistic, FRAGMENTATION_STATISTICS)
    check_bool("include_superseded", include_superseded)
    check_choice("allocator", allocator, ALLOCATOR_SETTINGS)
    by_source: dict[str, list[float]] = {}
    for row in _rows():
        if row["statistic"] != statistic or (row["superseded"] == "yes" and not include_superseded):
            continue
        if allocator_setting(row["allocator_settings"]) != allocator:
            continue
        by_source.setdefault(row["source_key"], []).append(_fragmentation(row))
    if not by_source:
        raise ValueError(f"no published {statistic} pair with allocator {allocator!r}: choose another "
                         f"statistic ({', '.join(FRAGMENTATION_STATISTICS)}) or allocator "
                         f"({', '.join(ALLOCATOR_SETTINGS)})")
    values = [v for vs in by_source.values() for v in vs]
    return FragmentationSpread(
        statistic=statistic, n_rows=len(values), n_sources=len(by_source), median=statistics.median(values),
        low=min(values), high=max(values),
        source_median=statistics.median(statistics.median(vs) for vs in by_source.values()),
        allocator=allocator, values=tuple(values))


def fragmentation_allowance(allocator: str = "default") -> float:
    """A fragmentation allowance for ``allocator`` (one of :data:`ALLOCATOR_SETTINGS`), as a fraction of the
    modelled peak of live tensors, read off the published pairs: the median over sources of each source's
    median ``peak_active`` fragmentation (:attr:`FragmentationSpread.source_median`), so that a source with
    many rows counts once. It is what chapter 3's :data:`~llmsizing.states.FRAGMENTATION` would be if set
    from the data; the book keeps its own 8% (``states.py`` says why). To plan with it, pass the result times
    the modelled peak, plus the fixed part, as ``overhead_bytes=``."""
    return measured_fragmentation("peak_active", allocator=allocator).source_median


def expandable_segments_effect(statistic: str = "peak_active") -> ExpandableSegmentsEffect:
    """What ``expandable_segments:True`` changed in the runs published both ways: rows of one source with the
    same ``run`` and ``statistic``, one with each :data:`ALLOCATOR_SETTINGS` entry (superseded rows left out).
    A ValueError if no such pair exists for ``statistic``."""
    check_choice("statistic", statistic, FRAGMENTATION_STATISTICS)
    by_run: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
    for row in _rows():
        if row["statistic"] != statistic or row["superseded"] == "yes":
            continue
        setting = allocator_setting(row["allocator_settings"])
        by_run.setdefault((row["source_key"], row["run"]), {})[setting] = row
    pairs = [(v["default"], v["expandable_segments"]) for v in by_run.values() if len(v) == 2]
    if not pairs:
        raise ValueError(f"no run published both with and without expandable_segments for statistic "
                         f"{statistic!r}")
    change = [float(on["reserved_gib"]) / float(off["reserved_gib"]) - 1 for off, on in pairs]
    return ExpandableSegmentsEffect(
        statistic=statistic, n_pairs=len(pairs), n_sources=len({off["source_key"] for off, _ in pairs}),
        reserved_change_median=statistics.median(change), reserved_change_low=min(change),
        reserved_change_high=max(change),
        fragmentation_off_median=statistics.median(_fragmentation(off) for off, _ in pairs),
        fragmentation_on_median=statistics.median(_fragmentation(on) for _, on in pairs))
