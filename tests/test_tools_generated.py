"""tools/_generated.py: the write-or-``--check`` rule of the tools that write one generated data file
(tools/layout_fits.py, tools/range_candidates.py --planned, tools/churn_sweep.py, tools/calibrate_finetune.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from _generated import write_or_check  # noqa: E402


def test_write_then_check(tmp_path, capsys):
    path = tmp_path / "data" / "x.csv"
    path.parent.mkdir()
    text = "a,b\n1,2\n3,4\n"
    assert write_or_check(path, text, check=True, rerun="tools/x.py") == 1        # missing: stale, not written
    assert not path.exists()
    assert write_or_check(path, text, check=False, rerun="tools/x.py", unit="runs") == 0
    assert path.read_text() == text
    assert write_or_check(path, text, check=True, rerun="tools/x.py") == 0
    path.write_text(text + "5,6\n")
    assert write_or_check(path, text, check=True, rerun="tools/x.py") == 1        # differs: left as it is
    assert path.read_text() == text + "5,6\n"
    out = capsys.readouterr().out.splitlines()
    assert out == ["data/x.csv: differs from a fresh run: run tools/x.py", "wrote data/x.csv (2 runs)",
                   "data/x.csv: up to date", "data/x.csv: differs from a fresh run: run tools/x.py"]
