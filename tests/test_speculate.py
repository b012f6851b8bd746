"""Chapter 17's widget, and chapter 12's planner widget (spec30), working out the reader's likely next
searches in a worker process (issue 35/38: ``long_context_widget(speculate=True)``,
``planner_widget(speculate=True)``, :mod:`llmsizing.widgets.speculate`).

What must hold: a move answered from the worker shows the same PNG bytes and summary as the same move searched
in the kernel (the worker runs the planner's own pure ``plan()`` in another process, and its table comes back
pickled); a move made while the worker is still busy is answered correctly (searched in the kernel); building
the widget starts its worker only where it speculates (the static pages and nbval never do), and the first
move takes the worker's search; stale jobs do not run; where no process can be spawned (Pyodide) the widget
works without one.
"""

from __future__ import annotations

import hashlib
import operator
import time

import pytest

pytest.importorskip("ipywidgets")

from llmsizing import speculate_worker  # noqa: E402
from llmsizing.catalog import list_gpus  # noqa: E402
from llmsizing.widgets import long_context, speculate  # noqa: E402
from llmsizing.widgets.long_context import long_context_ahead, long_context_widget  # noqa: E402
from llmsizing.widgets.time_money import planner_ahead, planner_widget  # noqa: E402


# (a dense model, then a mixture of experts: the moves the worker is asked ahead of and those it is not)
WALK = (("model", "granite-3.0-1b-a400m"), ("seq", 65536), ("cp_comm", "all_gather"), ("batch_tokens", 2**23),
        ("seq", 32768), ("max_gpus", 4096), ("model", "llama-3-8b"), ("seq", 16384))


#: Chapter 12's planner widget: every control that searches (sequence, global batch, a GPU limit up, grad
#: buffer), then a token budget and a lower GPU limit (no search in the kernel where it searched), a deadline
#: (a filter) and a new model with its next step.
PLANNER_WALK = (("seq", 4096), ("global_batch", 256), ("max_gpus", 8192), ("grad_buffer", True),
                ("tokens", 1e11), ("max_gpus", 2048), ("deadline", 30.0), ("model", "llama-3-8b"),
                ("seq", 2048), ("global_batch", 512))


def _shown(w) -> tuple:
    choice = w.controls["choice"] if "choice" in w.controls else None
    return (hashlib.sha1(w.image.value).hexdigest(), w.summary.value, w.error.value,
            None if choice is None else (tuple(choice.options), choice.value))


def _settle(w, keys=None, timeout_s: float = 60.0) -> None:
    """Wait (wall time) until the searches the widget handed its worker are done: those of ``keys`` (the
    searches the next move of a walk will ask for) if given, else every one. (suite43: waiting for every one
    made the worker run each move's dozen or so likely next searches to the end: the two walks took 9.4-9.7 s
    of CPU with the worker's, 7.3-7.8 s now, and up to 150 s of wall time on a loaded machine; the searches
    the next move does not ask for go stale at that move, as they do for a reader.)"""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if all(f.done() for k, f in w.speculation._futures.items() if keys is None or k in keys):
            return
        time.sleep(0.05)
    raise AssertionError("the worker did not finish its searches in time")


def _record_takes(w) -> list:
    """Wrap widget ``w``'s ``speculation.take`` so that each call's ``(key, result)`` is appended to the list
    returned (the result None: the move searched in the kernel)."""
    taken, real = [], w.speculation.take

    def take(key):
        got = real(key)
        taken.append((key, got))
        return got

    w.speculation.take = take
    return taken


def _equals_a_fresh_search(table, key) -> None:
    """``table`` (a worker's) equals chapter 17's ``plan()`` for search ``key`` made afresh (the planner's kept
    searches cleared first), bit for bit, attrs included."""
    import pandas as pd

    from llmsizing import planner

    planner._search.cache_clear()
    args, kw = long_context._plan_args(*key)
    fresh = planner.plan(*args, **kw)
    pd.testing.assert_frame_equal(table, fresh, check_exact=True)
    assert table.attrs == fresh.attrs


def _long_context_keys(w, control, value) -> set:
    """The worker's search keys that chapter 17's widget asks for when ``control`` moves to ``value``
    (long_context_widget's ``cached``: the setting's own, or the one at the largest GPU limit it cuts)."""
    v = {**w.values(), control: value}
    return {(v["model"], v["seq"], tuple(v["gpus"]), v["batch_tokens"], m, v["cp_comm"])
            for m in (v["max_gpus"], max(long_context.LONG_CONTEXT_MAX_GPUS))}


def _planner_keys(w, control, value) -> set:
    """The same for chapter 12's planner widget (planner_ahead's keys), at any GPU limit (a lower one is a cut
    of a search at a higher one)."""
    from llmsizing.footprint import check_grad_buffer_kind

    v = {**w.values(), control: value}
    return {(v["model"], v["tokens"], tuple(v["gpus"]), v["seq"], v["global_batch"], m,
             check_grad_buffer_kind(v["grad_buffer"])) for m in w.controls["max_gpus"].options}


@pytest.fixture(autouse=True)
def speculation_asked(monkeypatch):
    """The widgets built here with ``speculate=None`` speculate, as under ``make lab``
    (``LLMSIZING_SPECULATE=1``); the default without it has its own test, which unsets it. Their workers run
    at nice 0: at 19 they starve beside the suite's two pytest workers (speculate.NICE_ENV)."""
    monkeypatch.setenv(speculate.ENV, "1")
    monkeypatch.setenv(speculate.NICE_ENV, "0")


def _walked(w, walk) -> list:
    """What widget ``w`` shows at each step of ``walk`` ((control, value) pairs), set in turn."""
    out = []
    for control, value in walk:
        w.controls[control].value = value
        out.append(_shown(w))
    return out


@pytest.fixture(scope="module")
def plain():
    """Each step of WALK as a widget without a worker shows it."""
    return _walked(long_context_widget("llama-3-8b", warm=False, speculate=False), WALK)


def test_the_worker_s_answers_are_the_kernel_s(plain):
    w = long_context_widget("llama-3-8b", warm=False)
    for step, ((control, value), want) in enumerate(zip(WALK, plain)):
        w.controls[control].value = value
        assert _shown(w) == want, (control, value)
        if step + 1 < len(WALK):
            _settle(w, _long_context_keys(w, *WALK[step + 1]))
    assert w.speculation.taken >= 4           # (seq 64K, all-gather, 8M, 32K, 16K: worked out ahead)


def test_a_move_while_the_worker_is_busy_is_answered_right(plain):
    w = long_context_widget("llama-3-8b", warm=False)
    for (control, value), want in zip(WALK, plain):      # back to back: no wait for the worker
        w.controls[control].value = value
        assert _shown(w) == want, (control, value)


@pytest.fixture(scope="module")
def planner_plain():
    """Each step of PLANNER_WALK as a planner widget without a worker shows it."""
    return _walked(planner_widget(speculate=False), PLANNER_WALK)


def test_the_planner_s_worker_answers_are_the_kernel_s(planner_plain):
    w = planner_widget()
    for step, ((control, value), want) in enumerate(zip(PLANNER_WALK, planner_plain)):
        w.controls[control].value = value
        assert _shown(w) == want, (control, value)
        if step + 1 < len(PLANNER_WALK):
            _settle(w, _planner_keys(w, *PLANNER_WALK[step + 1]))
    # (every search of the walk but the first move's and the new model's is worked out ahead: the sequence,
    # the global batch, the GPU limit up, the grad buffer, the token budget of a table the worker searched)
    assert w.speculation.taken >= 6


def test_a_planner_move_while_the_worker_is_busy_is_answered_right(planner_plain):
    w = planner_widget()
    for (control, value), want in zip(PLANNER_WALK, planner_plain):      # back to back: no wait
        w.controls[control].value = value
        assert _shown(w) == want, (control, value)


def test_the_planner_asks_ahead_for_the_searches_of_its_controls_nearest_first():
    v = dict(model="llama-3-8b", tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=512, max_gpus=4096,
             grad_buffer=False, deadline=30.0, deadline_rule="slow_end", budget=0.0, choice=0)
    here = ("llama-3-8b", ("H100 SXM",), 4096, 512, 4096, False)           # (this setting, without tokens)
    keys = planner_ahead(v, in_kernel={here: None})
    assert len(keys) == len(set(keys))
    changed = [tuple(i for i in range(7) if k[i] != (v["model"], 1e12, ("H100 SXM",), 4096, 512, 4096,
                                                         False)[i]) for k in keys]
    assert all(len(c) == 1 for c in changed)                              # one control moved at a time
    assert (1,) not in changed                      # the token budget: plan() kept this search in the kernel
    assert keys[0][3] in (2048, 8192) and keys[1][3] in (2048, 8192)    # the sequence first, both neighbours
    assert [k[4] for k in keys if changed[keys.index(k)] == (4,)][:2] in ([256, 1024], [1024, 256])
    assert all(k[5] > 4096 for k in keys if k[5] != 4096)                 # a lower limit is a cut: not asked
    assert {k[6] for k in keys} == {False, True, "ddp-copy", "ddp-view"}
    # a table the worker searched: its next token budgets are asked first (the kernel keeps no search of it)
    assert {k[1] for k in planner_ahead(v)[:2]} == {2e12, 1e11}
    # a setting searched already, or a GPU limit under one searched, is not asked again
    done = [("llama-3-8b", 1e12, ("H100 SXM",), 8192, 512, 4096, False),
            ("llama-3-8b", 1e12, ("H100 SXM",), 4096, 512, 16384, False)]
    left = planner_ahead(v, done, {here: None})
    assert not any(k[3] == 8192 and k[5] == 4096 for k in left) and not any(k[5] > 4096 for k in left)


def test_nearest_steps_out_from_the_value():
    assert speculate.nearest((1, 2, 3, 4, 5), 3) == [4, 2, 5, 1]
    assert speculate.nearest((1, 2, 3), 1) == [2, 3]
    assert speculate.nearest((1, 2, 3), 9) == [1, 2, 3]  # (not an option: all, from the first)


def test_building_without_speculation_starts_no_worker(monkeypatch):
    started = []
    monkeypatch.setattr(speculate, "_pool", lambda: started.append(1))
    w = long_context_widget("llama-3-8b", warm=False, speculate=False)
    w.controls["seq"].value = 65536
    assert started == [] and not hasattr(w, "speculation")


def test_building_with_speculation_starts_the_worker_and_its_first_searches():
    # issue 38: the worker started at the reader's first move, so that move and the next were searched in
    # the kernel (a participant's two slowest moves); now the build hands it the default view's next
    # searches, and the first move takes one (the context 128K -> 64K: long_context_ahead's nearest first)
    w = long_context_widget("llama-3-8b", warm=False)
    move = ("seq", 65536)
    assert set(w.speculation._futures) >= _long_context_keys(w, *move)
    _settle(w, _long_context_keys(w, *move))
    w.controls[move[0]].value = move[1]
    assert w.speculation.taken == 1
    want = _walked(long_context_widget("llama-3-8b", warm=False, speculate=False), [move])[0]
    assert _shown(w) == want


def test_no_worker_where_no_process_can_be_spawned(monkeypatch, plain):
    monkeypatch.setattr(speculate, "_POOL", {})
    monkeypatch.setattr(speculate.sys, "platform", "emscripten")
    w = long_context_widget("llama-3-8b", warm=False)
    for (control, value), want in list(zip(WALK, plain))[:3]:
        w.controls[control].value = value
        assert _shown(w) == want
    assert w.speculation.taken == 0 and speculate._POOL == {"pool": None}


def test_no_worker_where_too_little_memory_is_free(monkeypatch, plain):
    # a workshop server's 1 GB per participant, a kernel of 0.8 GB: 0.2 GB left, under the worker's 1.5 GB
    monkeypatch.setattr(speculate, "_POOL", {})
    monkeypatch.setattr(speculate, "free_bytes", lambda: 0.2 * 2**30)
    w = long_context_widget("llama-3-8b", warm=False)
    for (control, value), want in list(zip(WALK, plain))[:3]:
        w.controls[control].value = value
        assert _shown(w) == want
    assert w.speculation.taken == 0 and speculate._POOL == {"pool": None}


def test_free_bytes_reads_the_machine_and_the_cgroup(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  8000000 kB\nMemAvailable:    4000000 kB\n")
    limit, usage = tmp_path / "memory.max", tmp_path / "memory.current"
    limit.write_text("1073741824\n")                  # 1 GiB
    usage.write_text("805306368\n")                   # 0.75 GiB used
    cg = ((str(limit), str(usage)),)
    assert speculate.free_bytes(str(meminfo), ()) == 4000000 * 1024
    assert speculate.free_bytes(str(meminfo), cg) == 2**30 - 0.75 * 2**30           # the cgroup's is smaller
    limit.write_text("max\n")                         # cgroup v2 without a limit: the machine's
    assert speculate.free_bytes(str(meminfo), cg) == 4000000 * 1024
    limit.write_text("9223372036854771712\n")         # cgroup v1 without a limit (2**63 rounded to pages)
    assert speculate.free_bytes(str(meminfo), cg) == 4000000 * 1024
    assert speculate.free_bytes(str(tmp_path / "none"), ((str(tmp_path / "a"), str(tmp_path / "b")),)) is None


def test_the_memory_limit_is_read_where_a_hub_sets_it(tmp_path):
    # a TLJH participant's server: cgroup v2, a systemd unit with MemoryMax=1.5G, 1.2 GiB of it used; the
    # slice above has no limit; the machine has 4,000,000 kB available: 0.3 GiB is what is left
    proc = tmp_path / "cgroup"
    proc.write_text("0::/system.slice/jupyter-ann.service\n")
    unit = tmp_path / "system.slice" / "jupyter-ann.service"
    unit.mkdir(parents=True)
    (unit / "memory.max").write_text(f"{int(1.5 * 2**30)}\n")
    (unit / "memory.current").write_text(f"{int(1.2 * 2**30)}\n")
    (tmp_path / "system.slice" / "memory.max").write_text("max\n")
    (tmp_path / "system.slice" / "memory.current").write_text("123\n")
    files = speculate.cgroup_files(str(proc), str(tmp_path))
    assert files[0] == (str(unit / "memory.max"), str(unit / "memory.current"))
    assert len(files) == 3                                   # the unit, the slice and the root
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemAvailable:    4000000 kB\n")
    assert speculate.free_bytes(str(meminfo), files) == pytest.approx(0.3 * 2**30, abs=1)
    # cgroup v1: the memory controller's line
    proc.write_text("12:cpu,cpuacct:/x\n9:memory:/user/ann\n")
    v1 = speculate.cgroup_files(str(proc), str(tmp_path))
    assert v1[0] == (str(tmp_path / "memory" / "user" / "ann" / "memory.limit_in_bytes"),
                     str(tmp_path / "memory" / "user" / "ann" / "memory.usage_in_bytes"))
    assert speculate.cgroup_files(str(tmp_path / "none"), str(tmp_path)) == ()


def test_the_default_follows_the_environment(monkeypatch):
    monkeypatch.delenv(speculate.ENV, raising=False)
    assert not hasattr(long_context_widget("llama-3-8b", warm=False), "speculation")      # Voila, a hub
    monkeypatch.setenv(speculate.ENV, "0")
    assert not hasattr(long_context_widget("llama-3-8b", warm=False), "speculation")
    monkeypatch.setenv(speculate.ENV, "1")                                                # make lab
    assert hasattr(long_context_widget("llama-3-8b", warm=False), "speculation")
    monkeypatch.delenv(speculate.ENV)
    assert hasattr(long_context_widget("llama-3-8b", warm=False, speculate=True), "speculation")
    assert not hasattr(planner_widget("llama-3-8b"), "speculation")                      # chapter 12 too
    monkeypatch.setenv(speculate.ENV, "1")
    assert hasattr(planner_widget("llama-3-8b"), "speculation")
    assert not hasattr(planner_widget("llama-3-8b", speculate=False), "speculation")


def test_a_still_wanted_job_is_sent_again():
    # the pool moves the running job and one more into its call queue, where neither can be cancelled; a
    # move that wants them again must not keep the queued one, which comes back stale
    s = speculate.Speculation(time.sleep)
    keys = [(("w", i), (0.5,), {}) for i in range(3)]
    s.ahead(keys)
    s.ahead(keys)                                   # the next move wants the same three
    for f in list(s._futures.values()):
        f.result(timeout=60)
    assert sorted(s._futures) == sorted(k for k, _, _ in keys)
    assert all(s.take(k) == ("ok", None) for k, _, _ in keys)


def test_speculate_is_checked():
    with pytest.raises(TypeError, match="speculate"):
        long_context_widget("llama-3-8b", speculate=1)
    with pytest.raises(TypeError, match="speculate"):
        planner_widget("llama-3-8b", speculate="yes")


def test_stale_jobs_do_not_run_and_take_is_by_key(monkeypatch):
    s = speculate.Speculation(operator.mul)
    s.ahead([(("a",), (6, 7), {})])
    f = s._futures[("a",)]
    assert f.result(timeout=60) == ("ok", 42)
    assert s.take(("b",)) is None and s.take(("a",)) == ("ok", 42) and s.take(("a",)) is None
    gen = speculate._POOL["gen"]
    monkeypatch.setattr(speculate_worker, "_GENERATION", gen)  # (as the worker's set-up leaves it)
    assert speculate._run(gen.value - 1, operator.mul, (2, 3), {}) == ("stale",)
    assert speculate._run(gen.value, operator.mul, (2, 3), {}) == ("ok", 6)
    assert speculate._run(gen.value, operator.truediv, (1, "x"), {})[0] == "error"


def test_a_move_makes_the_last_move_s_jobs_stale():
    s = speculate.Speculation(time.sleep)
    s.ahead([(("x", i), (2.0,), {}) for i in range(5)])        # (long enough not to be done at the next move)
    jobs = list(s._futures.values())
    s.ahead([])                                   # the next move: nothing asked
    assert s._futures == {}
    got = [f.result(timeout=60) if not f.cancelled() else "cancelled" for f in jobs]
    # at most the job running and the one the pool had queued run; every later one is cancelled or stale
    assert sum(g == ("ok", None) for g in got) <= 2
    assert all(g in (("ok", None), ("stale",), "cancelled") for g in got)
    assert got[-1] in (("stale",), "cancelled")


def test_held_results_are_bounded():
    s = speculate.Speculation(operator.mul, held=2)
    for i in range(4):
        s.ahead([((i, j), (i, j), {}) for j in range(3)])
        for f in list(s._futures.values()):
            f.result(timeout=60)
    s.ahead([])
    assert len(s._futures) <= 2


def test_a_large_result_is_handed_over_as_a_file_and_read_once():
    # kern30: a result of HANDOFF_MIN_BYTES or more (a plan table) comes back as a file the move that takes
    # it reads; one never taken is deleted unread, and the directory goes with the pool
    import os

    n = speculate.HANDOFF_MIN_BYTES + 1000
    s = speculate.Speculation(bytes, held=0)
    s.ahead([(("big", i), (n + i,), {}) for i in range(3)] + [(("small",), (10,), {})])
    got = {k: f.result(timeout=60) for k, f in s._futures.items()}
    assert got[("small",)] == ("ok", bytes(10))
    paths = [got["big", i][1] for i in range(3)]
    assert all(got["big", i][0] == "file" and os.path.isfile(p) for i, p in enumerate(paths))
    assert all(os.path.dirname(p) == speculate._POOL["dir"] for p in paths)
    assert s.take(("big", 1)) == ("ok", bytes(n + 1)) and s.take(("big", 1)) is None
    s.ahead([])                     # the next move wants none: held=0 drops them; the worker deletes all 3
    s.ahead([(("after",), (1,), {})])
    s._futures[("after",)].result(timeout=60)        # (the worker's deletions came before this job)
    assert not any(os.path.exists(p) for p in paths)
    folder = speculate._POOL["dir"]
    speculate.shutdown()
    assert not os.path.exists(folder)


def test_results_dropped_at_a_move_are_deleted_before_its_jobs():
    # spec50: chapter 17 asks 28 searches a move; a result the next move does not want (held=0 here) is
    # deleted by the worker before that move's jobs, not one move later (the hand-off files of two moves'
    # jobs, up to ~0.5 GB of /dev/shm, were there at once)
    import os

    n = speculate.HANDOFF_MIN_BYTES + 1000
    s = speculate.Speculation(bytes, held=0)
    s.ahead([(("big", i), (n + i,), {}) for i in range(3)])
    paths = [s._futures["big", i].result(timeout=60)[1] for i in range(3)]
    assert all(os.path.isfile(p) for p in paths)
    s.ahead([(("after",), (1,), {})])               # the next move: none of the three wanted
    assert s._futures[("after",)].result(timeout=60) == ("ok", bytes(1))
    assert not any(os.path.exists(p) for p in paths)


def test_the_hand_off_folders_of_gone_kernels_are_removed():
    import os
    import subprocess
    import sys
    import tempfile

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    where = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    old = tempfile.mkdtemp(prefix=f"llmsizing-speculate-{gone}-", dir=where)
    mine = speculate._handoff_dir()
    try:
        assert not os.path.exists(old)
        assert os.path.basename(mine).startswith(f"llmsizing-speculate-{os.getpid()}-")
    finally:
        speculate._remove_dir(mine)
        speculate._remove_dir(old)


def test_no_process_is_probed_on_windows(monkeypatch):
    """On Windows ``os.kill(pid, 0)`` terminates the process (Python's docs, os.kill): a leftover folder's
    number must never be 'probed' there (lead, session 30)."""
    import os
    import tempfile

    where = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    old = tempfile.mkdtemp(prefix="llmsizing-speculate-1-", dir=where)

    def kill(*a):
        raise AssertionError(f"os.kill{a} called")

    monkeypatch.setattr(os, "kill", kill)
    monkeypatch.setattr(os, "name", "nt")
    mine = speculate._handoff_dir()
    monkeypatch.undo()
    try:
        assert os.path.isdir(old) and mine is not None
    finally:
        speculate._remove_dir(mine)
        speculate._remove_dir(old)


def test_the_likely_next_searches():
    most = max(long_context.LONG_CONTEXT_MAX_GPUS)
    values = dict(model="m", seq=131072, gpus=("H100 SXM",), batch_tokens=2**24, max_gpus=4096,
                  cp_comm="p2p")
    got = long_context_ahead(values, most)
    assert len(got) == len(set(got))
    assert [k[1] for k in got[:5]] == [262144, 65536, 32768, 16384, 8192]     # the slider, nearest first
    assert got[5] == ("m", 131072, ("H100 SXM",), 2**24, most, "all_gather")
    assert {k[3] for k in got[6:8]} == {2**22, 2**23}
    assert all(k[4] == most for k in got)                  # (a lower limit is a cut of the widest)
    pairs = [k[2] for k in got[8:]]
    assert all(len(p) == 2 and "H100 SXM" in p for p in pairs) and ("H100 SXM", "B200") in pairs
    # spec50: every GPU type not chosen, once: the catalogue's neighbours of H100 SXM first (one step on each
    # side, then two), then the other 16 in the catalogue's order (A10, the list's first row, is the one the
    # participant adds)
    added = [next(g for g in p if g != "H100 SXM") for p in pairs]
    assert added == ["H200", "A100 80GB", "B200", "A100 40GB",
                     "A10", "L40S", "RTX 4090", "MI300X", "H800", "H100 PCIe", "H20", "A100 PCIe 80GB",
                     "V100", "L4", "RTX 6000 Ada", "GB200", "B300", "MI250X GCD", "MI325X", "MI355X"]
    assert len(got) == 5 + 1 + 2 + 20 == long_context.long_context_jobs()         # (the worker asks them all)
    # two chosen (A10 and H100 SXM): the neighbours of either, nearest first, then the other 15; none chosen
    two = long_context_ahead({**values, "gpus": ("A10", "H100 SXM")}, most)
    added = [next(g for g in k[2] if g not in ("A10", "H100 SXM")) for k in two[8:]]
    assert added[:6] == ["L40S", "H200", "A100 80GB", "RTX 4090", "B200", "A100 40GB"]
    assert sorted(added) == sorted(g for g in list_gpus() if g not in ("A10", "H100 SXM"))
    assert all(len(k[2]) == 3 for k in two[8:]) and len(two) <= long_context.long_context_jobs()


def test_a_second_gpu_type_no_neighbour_predicts_is_the_worker_s():
    # spec50: a reader may add any GPU type; one far from H100 SXM in the catalogue (L4, the 22nd of the 28
    # searches a move asks) comes from the worker, the planner's own table bit for bit, and is drawn as the
    # kernel draws it (before, only H100 SXM's four neighbours were asked: the kernel searched it itself)
    walk = (("seq", 65536), ("gpus", ("H100 SXM", "L4")))
    want = _walked(long_context_widget("llama-3-8b", warm=False, speculate=False), walk)
    w = long_context_widget("llama-3-8b", warm=False)
    taken = _record_takes(w)
    w.controls["seq"].value = 65536
    assert _shown(w) == want[0]
    _settle(w, _long_context_keys(w, "gpus", ("H100 SXM", "L4")))
    w.controls["gpus"].value = ("H100 SXM", "L4")
    assert _shown(w) == want[1]
    key = ("llama-3-8b", 65536, ("H100 SXM", "L4"), 2**24, max(long_context.LONG_CONTEXT_MAX_GPUS), "p2p")
    got = [g for k, g in taken if k == key and g is not None]
    assert len(got) == 1 and got[0][0] == "ok"
    _equals_a_fresh_search(got[0][1], key)


def test_a_second_gpu_type_the_planner_refuses_comes_back_as_its_refusal():
    # spec50: Qwen3-30B-A3B at 128K on H100 SXM and B300 is more than the 60,000 plans plan() prices in one
    # call; the worker's job returns the planner's message ("error"), and a move that wants it searches in the
    # kernel, which raises the same message for the widget to show
    from llmsizing import planner

    key = ("qwen3-30b-a3b", 131072, ("H100 SXM", "B300"), 2**24, 16384, "p2p")
    args, kw = long_context._plan_args(*key)
    with pytest.raises(ValueError, match="60,000 plans") as refused:
        planner.plan(*args, **kw)
    s = speculate.Speculation(planner.plan)
    s.ahead([(key, args, kw)])
    assert s._futures[key].result(timeout=120) == ("error", str(refused.value))
    assert s.take(key) is None and s.missed == 1 and s.taken == 0


_KILLED_KERNEL = """
import os, sys, time
from llmsizing.widgets import speculate
if __name__ == "__main__":
    s = speculate.Speculation(time.sleep)
    s.ahead([(("a",), (0.1,), {})])
    s._futures[("a",)].result(timeout=120)
    print(*speculate._POOL["pool"]._processes, flush=True)
    os.kill(os.getpid(), 9)
"""


def test_a_killed_kernel_leaves_no_worker(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "kernel.py"
    script.write_text(_KILLED_KERNEL)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    worker = int(out.stdout.split()[0])
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(worker, 9)
    raise AssertionError("the worker outlived its kernel")


@pytest.mark.parametrize("raw, want", [("", 19), ("0", 0), ("7", 7), ("19", 19), ("20", 19), ("-1", 19),
                                       ("high", 19), (" 5 ", 5)])
def test_the_worker_s_niceness_comes_from_the_environment_within_0_to_19(monkeypatch, raw, want):
    monkeypatch.setenv(speculate.NICE_ENV, raw)
    assert speculate.worker_nice() == want


def test_the_worker_imports_neither_the_widgets_nor_matplotlib():
    # spec48: a fresh worker imported the widgets package (matplotlib, ipywidgets, every chapter's widget:
    # ~0.75 s of CPU) to run its first job, and missed the step after a reader's first move; it needs only
    # the worker's module and the job's function.
    speculate.shutdown()                                   # (a fresh worker: no earlier job's imports)
    s = speculate.Speculation(eval)
    probe = "tuple(m in __import__('sys').modules for m in ('matplotlib', 'ipywidgets', 'llmsizing.widgets'))"
    s.ahead([(("probe",), (probe,), {})])
    assert s._futures[("probe",)].result(timeout=120) == ("ok", (False, False, False))
    speculate.shutdown()


def test_the_worker_s_delay_counts_from_the_move(monkeypatch):
    # spec48: a job's first search waits START_DELAY_S after the move that handed it (its answer on the way
    # to the page), not after the worker's start: a worker that took longer than that to start (importing)
    # searches at once; one that starts at the move still waits.
    class Gen:
        value = 7
    monkeypatch.setattr(speculate_worker, "_GENERATION", Gen())
    monkeypatch.setattr(speculate_worker, "START_DELAY_S", 0.6)
    monkeypatch.setattr(speculate_worker, "_STARTED", [None])
    t = time.monotonic()
    assert speculate_worker._run(7, operator.mul, (2, 3), {}, time.time() - 1.0) == ("ok", 6)
    assert time.monotonic() - t < 0.3                      # handed 1 s ago: no wait left
    monkeypatch.setattr(speculate_worker, "_STARTED", [None])
    t = time.monotonic()
    assert speculate_worker._run(7, operator.mul, (2, 3), {}, time.time() - 0.2) == ("ok", 6)
    assert 0.3 <= time.monotonic() - t < 0.55              # handed 0.2 s ago: 0.4 s of the 0.6 left


# pick50: chapter 17's lowest tier, a pick of every drop-down model not searched at the default view

_DEFAULT_VIEW = (131072, ("H100 SXM",), 2**24, max(long_context.LONG_CONTEXT_MAX_GPUS), "p2p")


class _Handed:
    """The pool, recording the key of every search handed to it (``_run``'s jobs), in the order handed."""

    def __init__(self, pool):
        self.pool, self.keys = pool, []

    def submit(self, fn, *a):
        if fn is speculate_worker._run:
            (model,), kw = a[2], a[3]
            self.keys.append((model, kw["seq"], kw["gpus"], kw["global_batch"] * kw["seq"], kw["max_gpus"],
                              kw["cp_comm"]))
        return self.pool.submit(fn, *a)


def test_the_tier_lists_every_dense_model_once_at_the_default_view_after_the_move_s_jobs(monkeypatch):
    # built with warm=True (the mixtures of experts searched in the kernel) at Llama 3.1 405B: the worker is
    # handed the build's own likely searches (the 20 second GPU types; its context, exchange and batch steps
    # are warm), then a pick of each other dense model at 128K, H100 SXM, 16M tokens, ring, in the
    # drop-down's order, once; a move hands its own searches first and the tier's jobs not started after them
    from llmsizing.catalog import get_model, list_models

    w = long_context_widget()
    dense = [m for m in list_models() if not get_model(m).is_moe and m != "llama-3.1-405b"]
    tier = [(m, *_DEFAULT_VIEW) for m in dense]
    keys = list(w.speculation._futures)
    assert len(dense) == 54 and keys[20:] == tier
    assert all(k[0] == "llama-3.1-405b" and len(k[2]) == 2 for k in keys[:20])
    handed = _Handed(speculate._pool())
    monkeypatch.setattr(speculate, "_pool", lambda: handed)
    w.controls["seq"].value = 65536
    own = [k for k in handed.keys if k not in tier]
    assert own and all(k[0] == "llama-3.1-405b" for k in own)
    assert handed.keys == own + [k for k in handed.keys if k in tier]          # (the tier's behind)
    assert set(tier) <= set(w.speculation._futures)                          # (handed, running or done)


def test_a_later_move_does_not_drop_a_done_tier_result():
    # held=0: a move drops every earlier result it does not want, but not the tier's (kept until taken, as
    # hand-off files: the kernel holds their paths)
    import os

    n = speculate.HANDOFF_MIN_BYTES + 1000
    s = speculate.Speculation(bytes, held=0, pinned=3)
    tier = [(("pick", i), (n + i,), {}) for i in range(3)]
    s.ahead([], tier)
    paths = [s._futures["pick", i].result(timeout=60) for i in range(3)]
    assert all(p[0] == "file" and os.path.isfile(p[1]) for p in paths)
    for move in range(3):
        s.ahead([(("move", move), (10,), {})], tier)
        s._futures["move", move].result(timeout=60)
    assert ("move", 0) not in s._futures and all(os.path.isfile(p[1]) for p in paths)
    assert [s.take(("pick", i)) for i in range(3)] == [("ok", bytes(n + i)) for i in range(3)]
    assert s.take(("pick", 0)) is None                                       # (taken once)


def test_a_tier_job_running_at_a_move_is_kept_and_the_queued_one_handed_again():
    s = speculate.Speculation(time.sleep, pinned=3)
    tier = [(("pick", i), (1.0,), {}) for i in range(3)]
    s.ahead([(("probe",), (0,), {})], tier)
    s._futures[("probe",)].result(timeout=60)
    time.sleep(0.3)                                          # (pick 0 running, pick 1 in the call queue)
    first = s._futures["pick", 0]
    s.ahead([(("move",), (0,), {})], tier)
    assert s._futures["pick", 0] is first and first.result(timeout=60) == ("ok", None)
    assert s._futures["pick", 1].result(timeout=60) == ("stale",)
    for _ in range(4):                   # (the next moves hand it again; a tier job queued at one comes back
        s.ahead([], tier)                # stale in turn)
        got = [s._futures["pick", i].result(timeout=60) for i in range(3)]
        if got == [("ok", None)] * 3:
            break
    assert got == [("ok", None)] * 3


def test_a_pick_at_the_default_view_takes_the_worker_s_table(monkeypatch):
    # a widget built cold (warm=False: the mixtures of experts are in the tier too), no other searches asked
    # (the tier alone, quicker to wait for): GPT-2, the drop-down's first model, is worked out as a hand-off
    # file; its pick draws what a widget without a worker draws, from the worker's table, the planner's own
    # bit for bit (before pick50 no pick was asked of the worker: the kernel searched it)
    want = _walked(long_context_widget("llama-3-8b", warm=False, speculate=False), [("model", "gpt2")])
    monkeypatch.setattr(long_context, "long_context_jobs", lambda: 0)
    w = long_context_widget("llama-3-8b", warm=False)
    key = ("gpt2", *_DEFAULT_VIEW)
    _settle(w, {key})
    handed = w.speculation._futures.get(key)              # (the tier's first job: the drop-down's first)
    taken = _record_takes(w)
    w.controls["model"].value = "gpt2"
    assert _shown(w) == want[0]
    got = [g for k, g in taken if k == key]
    assert len(got) == 1 and got[0] is not None and got[0][0] == "ok"
    assert handed.result()[0] == "file"                  # (until the pick, the kernel held its path alone)
    _equals_a_fresh_search(got[0][1], key)


def test_a_widget_built_again_releases_the_old_one_s_files():
    # found in review: the worker starts at build, so every run of chapter 17's cell left the old widget's
    # hand-off files (its jobs, held results and the model tier: up to ~0.35 GB of /dev/shm) until the kernel
    # ended. Building the widget again releases them; the new widget's build hands the worker their deletion.
    import os

    old = long_context_widget("llama-3-8b", warm=False)
    _settle(old)
    paths = [f.result()[1] for f in old.speculation._futures.values()
             if f.done() and not f.cancelled() and f.result()[0] == "file"]
    assert paths and all(os.path.isfile(p) for p in paths)
    new = long_context_widget("llama-3-8b", warm=False)
    assert old.speculation._futures == {}
    _settle(new, set(list(new.speculation._futures)[:1]))     # (the deletion runs before the new jobs)
    assert not any(os.path.exists(p) for p in paths)
