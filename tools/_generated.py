"""The one rule of the tools that write a generated data file (issue 38: the block was written out in each):
write the fresh text, or with ``--check`` write nothing, compare it with the file and exit 1 if it differs.

Used by tools/layout_fits.py, tools/range_candidates.py (``--planned``), tools/churn_sweep.py and
tools/calibrate_finetune.py. The tools that write several files at once (tools/calibrate.py,
tools/calibrate_serving.py, tools/fit_nccl_logs.py) list the stale ones instead.
"""

from __future__ import annotations

from pathlib import Path


def write_or_check(path: Path, text: str, *, check: bool, rerun: str, unit: str = "rows") -> int:
    """Write ``text`` to ``path`` and say so with its count of ``unit`` (the lines after the header), or
    (``check``) write nothing and say whether the file holds exactly ``text``; ``rerun`` is the command that
    brings it up to date. Returns the exit code: 1 only for a file that is missing or differs under
    ``check``."""
    name = f"{path.parent.name}/{path.name}"            # data/<file>.csv
    if check:
        same = path.exists() and path.read_text() == text
        print(f"{name}: {'up to date' if same else f'differs from a fresh run: run {rerun}'}")
        return 0 if same else 1
    path.write_text(text)
    print(f"wrote {name} ({text.count(chr(10)) - 1} {unit})")
    return 0
