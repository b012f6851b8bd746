"""The library's and the tools' Python pass pyflakes' checks (ruff's F rules): an undefined name, an unused import, a name
used before it is bound. ``make test`` never runs tools/measure (it needs the optional torch venv,
``.venv-measure``), so this static check is what catches such a slip there between measurement runs
(``dkv_reqs`` in tools/measure/cp.py's ring backward, found in session 34, bound before its loop in 35). The
library passes them too (session 35 removed 20 unused imports and 5 unused variables, one of them a dead slider
list of the serving widget); its packages' ``__init__`` re-exports are exempt in pyproject.toml."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_tools_pass_pyflakes_checks():
    ruff = Path(sys.executable).with_name("ruff")
    r = subprocess.run([str(ruff), "check", "--no-cache", "--select", "F", "tools", "src"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
