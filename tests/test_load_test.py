"""tools/load_test.py (issue 38): what it is told and what it reports, without starting a server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import load_test  # noqa: E402


@pytest.mark.parametrize("spec, stem", [
    ("7", "07_data_parallelism"), ("07", "07_data_parallelism"), (" 7 ", "07_data_parallelism"),
    ("4b", "04b_peak_of_a_step"), ("12", "12_how_many_gpus"), ("17_long_context", "17_long_context"),
    ("book/17_long_context.ipynb", "17_long_context"),
])
def test_chapter_is_named_as_for_make_app_or_by_its_bare_number(spec, stem):
    assert load_test.chapter_notebook(spec) == ROOT / "book" / f"{stem}.ipynb"


@pytest.mark.parametrize("spec", ["99", "", "4"])   # "4" is 04_activation_memory AND 04b: two match
def test_a_chapter_that_matches_none_or_several_is_refused_naming_the_option(spec):
    with pytest.raises(ValueError, match="--chapter"):
        load_test.chapter_notebook(spec)


def test_nearest_rank_by_hand():
    ten = [float(v) for v in range(10, 110, 10)]           # 10, 20, ..., 100
    assert load_test.nearest_rank(ten, 0.9) == 90           # 9 of 10 values at or below it
    assert load_test.nearest_rank(ten, 0.5) == 50
    assert load_test.nearest_rank(ten, 1.0) == 100
    assert load_test.nearest_rank([5.0, 7.0, 9.0], 0.5) == 7   # ceil(1.5) = 2nd
    assert load_test.nearest_rank([5.0, 7.0, 9.0], 0.9) == 9   # ceil(2.7) = 3rd
    assert load_test.nearest_rank([4.0], 0.9) == 4
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="p: must be in"):
            load_test.nearest_rank(ten, bad)
    with pytest.raises(ValueError, match="sorted_values"):
        load_test.nearest_rank([], 0.5)


@pytest.mark.parametrize("argv, option", [
    (["-n", "0"], "--participants"), (["--moves", "-1"], "--moves"), (["--think-s", "-2"], "--think-s"),
    (["--chapter", "99"], "--chapter"),
])
def test_bad_options_are_refused_before_any_server_starts(argv, option, capsys, monkeypatch):
    monkeypatch.setattr(load_test, "run_n", lambda *a, **k: pytest.fail("a server was started"))
    assert load_test.main(argv) == 2
    assert option in capsys.readouterr().err


@pytest.mark.parametrize("chapter, call", [("12", "planner_widget(warm=True)"), ("17", "long_context_widget()")])
def test_the_widget_the_test_moves_is_the_chapters_widget(chapter, call):
    cells, widget = load_test.code_cells(load_test.chapter_notebook(chapter))
    assert widget in cells
    assert widget.strip().splitlines()[-1] == call


def test_a_move_steps_each_control_in_turn_and_wraps():
    class Drop:
        def __init__(self):
            self.options, self.index = ("a", "b", "c"), 2

    class Slider:
        def __init__(self):
            self.min, self.max, self.step, self.value = 1, 4, 1, 4

    class Range:
        index = (0, 1)                                       # a range slider: left alone

    class W:
        controls = {"drop": Drop(), "range": Range(), "n": Slider()}

    space: dict = {"_book_w": W()}
    exec(load_test.MOVE_HELPER, space)
    assert space["__book_move"](0) == "drop" and W.controls["drop"].index == 0      # 2 -> wraps to 0
    assert space["__book_move"](1) == "n" and W.controls["n"].value == 1             # 4 is max -> min
    assert space["__book_move"](2) == "drop" and W.controls["drop"].index == 1
    assert space["__book_move"](3) == "n" and W.controls["n"].value == 2


def test_a_participant_that_cannot_start_is_an_error_of_its_own_not_a_crash():
    import asyncio
    import socket

    with socket.socket() as s:                               # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = asyncio.run(load_test.participant(f"http://127.0.0.1:{port}", "t", ["1"], None, 2))
    assert out["start_s"] is None and out["run_s"] is None and out["move_s"] == []
    assert len(out["errors"]) == 1 and out["errors"][0].startswith("start: ")


def test_cpu_and_busy_time_grow_with_work():
    import os
    import time

    me, busy = load_test.cpu_s(os.getpid()), load_test.machine_busy_s()
    t = time.process_time()
    while time.process_time() - t < 0.3:
        pass
    assert load_test.cpu_s(os.getpid()) - me >= 0.2         # clock ticks: 0.3 s of work, at least 0.2 counted
    assert load_test.machine_busy_s() - busy >= 0.2
    assert load_test.cpu_s(2**22 + 7) == 0.0 and load_test.rss_mib(2**22 + 7) is None   # no such process


def test_the_moves_go_to_the_widget_the_chapter_displayed_not_a_new_one():
    class Dash:
        controls = {"x": None}

    made = []
    space: dict = {"Out": {7: Dash()}, "make": lambda: made.append(1) or Dash()}
    exec(load_test.widget_setup("from x import make\nmake()", 7), space)
    assert space["_book_w"] is space["Out"][7] and made == []
    for count in (None, 8):                                  # no result kept: a new widget from the last line
        space = {"Out": {}, "make": lambda: made.append(1) or Dash()}
        exec(load_test.widget_setup("make()", count), space)
        assert isinstance(space["_book_w"], Dash)
    assert made == [1, 1]


def test_a_kernels_worker_processes_count_in_its_memory_and_cpu():
    import os
    import subprocess

    # (children=True also counts children already reaped, e.g. by other tests: compare with before the worker)
    before = load_test.cpu_s(os.getpid(), children=True) - load_test.cpu_s(os.getpid())
    worker = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                               "while time.process_time() - t < 0.4: pass\nprint('busy', flush=True)\n"
                               "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "busy"   # (its 0.4 s of CPU spent, however loaded)
        assert worker.pid in load_test.descendants(os.getpid())
        alone, with_workers = load_test.cpu_s(os.getpid()), load_test.cpu_s(os.getpid(), children=True)
        assert with_workers - alone - before >= 0.3          # the worker's 0.4 s of CPU, in clock ticks
        assert load_test.rss_mib(worker.pid) > 1
    finally:
        worker.kill()
        worker.wait()
        worker.stdout.close()
