"""How far the planner's own pick lands from what teams ran (chapter 12; issue 34).

:func:`~llmsizing.step_intervals.planned_loso_check` asks :func:`~llmsizing.planner.plan` for each published
run with a layout, given only what the team stated (model, GPU type and count, sequence, global batch,
precision, stack family, the node's network) and a kernel efficiency fitted without the run's source, and
compares the MFU of the layout it picks with the run's published MFU: leaving one source out, nested, at 80%,
as pre-registered in :data:`~llmsizing.step_intervals.PLANNED_AREA` (a dead end as a stated range: too
wide). That takes about 10 s of CPU, so ``tools/range_candidates.py --planned --write`` writes its per-run
table to ``data/planned_picks.csv`` (:func:`picks_csv`; ``--check`` compares) and the book reads the file
(:func:`planned_picks`, :func:`planned_summary`; chapter 12's sentences:
:func:`llmsizing.plan_prose_lead.pick_prose`). No new arithmetic.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass

from .catalog import DATA_DIR

__all__ = ["PICK_COLUMNS", "PICKS_AS_OF", "PICKS_CSV", "planned_picks_table", "picks_csv", "planned_picks",
           "PlannedSummary", "planned_summary", "layout_parts"]

#: The file :func:`picks_csv` writes (``tools/range_candidates.py --planned --write``).
PICKS_CSV = DATA_DIR / "planned_picks.csv"
#: The date the measurement was made on (every row's ``as_of``; bump it when ``--write`` changes the file);
#: the runs' own dates are in data/published_runs.csv.
PICKS_AS_OF = "2026-12-04"
#: The procedure, in every row's ``method``.
PICKS_METHOD = ("llmsizing.step_intervals.planned_loso_check, pre-registered in "
                "step_intervals.PLANNED_AREA (training-planned): plan() given model, GPU, GPU count, seq, "
                "global batch, precision, stack family, network and the kernel efficiency fitted without "
                "the run's source; its fastest plan on the run's GPU count; nested leave-one-source-out, "
                "two-tailed, 80%")
#: ``data/planned_picks.csv``'s columns: ``source`` is the run's source key (the unit left out);
#: ``published`` and ``pick`` the two layouts; ``efficiency`` the kernel efficiency fitted without the
#: source; ``published_mfu`` the run's; ``step_mfu`` and ``pick_mfu`` the step model's MFU of the published
#: layout and of the pick at that efficiency; ``gain`` pick_mfu / step_mfu; ``ratio`` published_mfu /
#: pick_mfu; ``low``/``high`` the 80% bounds on ``ratio`` set without the source; ``inside``, ``calibrated``
#: (its efficiency is fitted, not a stand-in) and ``planned`` (plan() has a plan on its count): yes/no.
PICK_COLUMNS = ("run", "source", "model", "gpu", "n_gpus", "dtype", "stack", "published", "pick",
                "efficiency", "published_mfu", "step_mfu", "pick_mfu", "gain", "ratio", "low", "high",
                "inside", "calibrated", "planned", "method", "as_of")
_FLOATS = ("efficiency", "published_mfu", "step_mfu", "pick_mfu", "gain", "ratio", "low", "high")
_FLAGS = ("inside", "calibrated", "planned")


def planned_picks_table():
    """The rows of ``data/planned_picks.csv`` (:data:`PICK_COLUMNS`) computed afresh from
    :func:`~llmsizing.step_intervals.planned_loso_check` (its default table, cached in the process)."""
    import pandas as pd

    from .step_intervals import planned_loso_check

    _, df = planned_loso_check()
    return pd.DataFrame({
        "run": df["run"], "source": df["source_key"], "model": df["model"], "gpu": df["gpu"],
        "n_gpus": df["n_gpus"].astype(int), "dtype": df["dtype"], "stack": df["stack_family"],
        "published": df["published"], "pick": df["pick"], "efficiency": df["efficiency"],
        "published_mfu": df["implied_mfu"], "step_mfu": df["step_mfu"], "pick_mfu": df["plan_mfu"],
        "gain": df["plan_mfu"] / df["step_mfu"], "ratio": df["ratio"], "low": df["low"], "high": df["high"],
        "inside": df["inside"].astype(bool), "calibrated": df["calibrated"].astype(bool),
        "planned": df["planned"].astype(bool), "method": PICKS_METHOD, "as_of": PICKS_AS_OF,
    }).reset_index(drop=True)


def _cell(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None or isinstance(value, float) and math.isnan(value):
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def picks_csv(table=None) -> str:
    """``data/planned_picks.csv``'s text: ``table`` (default :func:`planned_picks_table`), floats to 4
    decimals, flags yes/no, a run without a plan with its pick's cells empty."""
    t = planned_picks_table() if table is None else table
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(PICK_COLUMNS)
    for row in t[list(PICK_COLUMNS)].itertuples(index=False):
        w.writerow([_cell(v.item() if hasattr(v, "item") else v) for v in row])
    return out.getvalue()


def planned_picks(path=None):
    """``data/planned_picks.csv`` (or ``path``) as a table: floats as floats (NaN where a run has no plan),
    the yes/no flags as bools. Raises ``ValueError`` if the file lacks a column of :data:`PICK_COLUMNS` or a
    flag is neither yes nor no."""
    import pandas as pd

    t = pd.read_csv(PICKS_CSV if path is None else path, dtype=str, keep_default_na=False)
    missing = [c for c in PICK_COLUMNS if c not in t.columns]
    if missing:
        raise ValueError(f"path lacks the columns {missing} of data/planned_picks.csv")
    for c in _FLOATS:
        t[c] = [float(v) if v != "" else math.nan for v in t[c]]
    for c in _FLAGS:
        bad = sorted(set(t[c]) - {"yes", "no"})
        if bad:
            raise ValueError(f"column {c} must hold yes or no, got {bad}")
        t[c] = t[c] == "yes"
    t["n_gpus"] = t["n_gpus"].astype(int)
    return t


@dataclass(frozen=True)
class PlannedSummary:
    """:func:`planned_summary`: over the runs calibrated in their fold (``n``), ``inside`` fell inside the
    80% range set without their source (``coverage`` = inside / n; a run without a plan counts as outside:
    ``no_plan`` names them); over those with a plan, the median of the held-out ranges' width (high / low),
    low and high bounds on published / pick MFU, and the pick's ``gain`` (its MFU over the published
    layout's at the same efficiency): median and 10th-90th percentiles (linear interpolation). ``largest``:
    the rows (dicts) of the largest gains, one per source (each source's largest), largest first;
    ``smallest``: the row of the smallest."""

    n: int
    inside: int
    coverage: float
    no_plan: tuple
    median_width: float
    median_low: float
    median_high: float
    gain_median: float
    gain_p10: float
    gain_p90: float
    largest: tuple
    smallest: dict
    as_of: str


def planned_summary(table=None, *, largest: int = 3) -> PlannedSummary:
    """The measurement of ``data/planned_picks.csv`` in a few numbers (:class:`PlannedSummary`); ``table``
    a :func:`planned_picks` table (default: the file), ``largest`` how many sources' largest gains to keep.
    Raises ``TypeError`` for a ``table`` that is not a DataFrame or a ``largest`` that is not a whole number,
    ``ValueError`` for a table without a calibrated run that has a plan or a ``largest`` below 1."""
    import numpy as np
    import pandas as pd

    if isinstance(largest, bool) or not isinstance(largest, int):
        raise TypeError(f"largest must be a whole number, got {type(largest).__name__}")
    if largest < 1:
        raise ValueError(f"largest must be at least 1, got {largest}")
    t = planned_picks() if table is None else table
    if not isinstance(t, pd.DataFrame):
        raise TypeError(f"table must be a planned_picks() table, got {type(t).__name__}")
    missing = [c for c in PICK_COLUMNS if c not in t.columns]
    if missing:
        raise ValueError(f"table lacks the columns {missing} of data/planned_picks.csv")
    cal = t[t["calibrated"].astype(bool)]
    sub = cal[cal["planned"].astype(bool)]
    if sub.empty:
        raise ValueError("table has no calibrated run with a plan: nothing to summarise")
    gain = sub["gain"].to_numpy(float)
    order = sub.assign(_g=gain).sort_values("_g", ascending=False, kind="stable")
    top = list(order.drop_duplicates("source", keep="first").index[:largest])
    return PlannedSummary(
        n=len(cal), inside=int(cal["inside"].astype(bool).sum()),
        coverage=float(cal["inside"].astype(bool).mean()), no_plan=tuple(cal.loc[~cal["planned"], "run"]),
        median_width=float(np.median(sub["high"] / sub["low"])), median_low=float(np.median(sub["low"])),
        median_high=float(np.median(sub["high"])), gain_median=float(np.median(gain)),
        gain_p10=float(np.quantile(gain, 0.1)), gain_p90=float(np.quantile(gain, 0.9)),
        largest=tuple(order.loc[top].drop(columns="_g").to_dict("records")),
        smallest=order.iloc[-1].drop("_g").to_dict(), as_of=str(t["as_of"].iloc[0]))


def layout_parts(layout: str) -> dict:
    """``{"tp", "pp", "zero", "recompute"}`` of a layout as ``data/planned_picks.csv`` writes it
    (``"TP8 PP16x8 DP128 mb1 ZeRO-2 none"``; recompute ``"none"``, ``"selective"`` or ``"full"``). Raises
    ``ValueError`` for any other text."""
    m = re.fullmatch(r"TP(\d+) PP(\d+)(?:x\d+)? DP\d+(?: CP\d+)? mb\d+ ZeRO-(\d) (\w+)(?:\(\d+\))?",
                     layout if isinstance(layout, str) else "")
    if m is None:
        raise ValueError(f"layout must read like 'TP8 PP16x8 DP128 mb1 ZeRO-2 none', got {layout!r}")
    return {"tp": int(m.group(1)), "pp": int(m.group(2)), "zero": int(m.group(3)), "recompute": m.group(4)}
