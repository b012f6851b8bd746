"""tools/refresh_outputs.py runs each notebook in a kernel that starts in ``book/``: its PYTHONPATH must name
this checkout's ``src`` by an absolute path, or a worktree's refresh silently runs another checkout's library
(found by a helper of session 44, whose relative ``PYTHONPATH=src`` pointed at ``book/src``)."""

import importlib.util
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("refresh_outputs_path", ROOT / "tools" / "refresh_outputs.py")
refresh_outputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(refresh_outputs)


def test_own_src_first_and_relative_entries_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got = refresh_outputs.kernel_pythonpath(os.pathsep.join(["src", "", "/opt/x"])).split(os.pathsep)
    assert got == [str(ROOT / "src"), str(tmp_path / "src"), str(Path("/opt/x").resolve())]


def test_own_src_named_once_and_empty_path_allowed(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert refresh_outputs.kernel_pythonpath("src") == str(ROOT / "src")
    assert refresh_outputs.kernel_pythonpath("") == str(ROOT / "src")
