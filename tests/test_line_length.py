"""Lines of the library are at most 110 characters (issue 32): ruff's E501, configured in pyproject.toml
(``[tool.ruff]``; the files being wrapped next are listed there under ``per-file-ignores``)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_library_lines_fit_in_110_characters():
    ruff = Path(sys.executable).with_name("ruff")
    r = subprocess.run([str(ruff), "check", "--no-cache", "--select", "E501", "src"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
