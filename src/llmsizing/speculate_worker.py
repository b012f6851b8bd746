"""The worker side of :mod:`llmsizing.widgets.speculate`: what its worker process runs (its set-up, a job, the
deletion of hand-off files), kept apart from the widgets package so that the worker imports only this module
and the function its jobs call (spec48, issue 38: imported from the widgets package, a fresh worker spent
~0.75 s of CPU importing matplotlib, ipywidgets and every chapter's widget before its first search, ~0.4 s of
it for nothing it runs; here it imports the library's core and the planner, ~0.4 s, at its first job).
Nothing here imports another module of the library; see :mod:`llmsizing.widgets.speculate` for what it is
for and its rules (the same answers, bounded, never waited for).
"""

from __future__ import annotations

import os

#: A worker's result whose pickle is at least this long (bytes) is handed over as a file (see the module's
#: docstring); a smaller one comes back through the pool's pipe as before.
HANDOFF_MIN_BYTES = 1 << 18


#: The environment variable that sets the worker's niceness (0-19; unset or anything else: 19, the lowest
#: priority). The tests set 0 (``tests/test_speculate.py``): at 19 the worker got almost no CPU while the
#: suite's two pytest workers kept both cores busy, and a test that waits for its answers took 150 s or timed
#: out (suite42, session 42). What the worker computes does not depend on it.
NICE_ENV = "LLMSIZING_SPECULATE_NICE"


def worker_nice() -> int:
    """The worker's niceness: :data:`NICE_ENV` if it holds a whole number from 0 to 19, else 19."""
    raw = os.environ.get(NICE_ENV, "").strip()
    return int(raw) if raw.isdigit() and int(raw) <= 19 else 19


#: How long (s) the worker waits before the first search a move hands it: the move's answer is still on
#: its way to the page (the server, the browser's decoding and painting), which a search started at once
#: slowed on 2 cores (spec30: chapter 12's lab moves with a reader's pause of 1.5 s, the worker starting at
#: once, were painted 1.05-1.54x later than without it; with its own autogroup and this wait, 0.76-0.93x);
#: a move made meanwhile makes the searches stale, and they return at once.
START_DELAY_S = 0.25

#: Where the worker sets its autogroup's nice value (Linux; see :func:`_worker_init`).
AUTOGROUP = "/proc/self/autogroup"

#: How often (s) the worker checks that the kernel that started it is still there (a kernel killed, e.g.
#: restarted by force, leaves no worker behind).
PARENT_CHECK_S = 0.5


def _worker_init(generation, parent: int, handoff: str | None = None) -> None:
    """The worker's set-up: the lowest CPU priority, its own and its session's (it yields to the kernel and
    everything else), the shared generation number its jobs are checked against, the directory it hands
    large results over in (``handoff``), and a watch that ends the worker once its kernel (process
    ``parent``) is gone: its parent process is another (the hand-off directory is removed first)."""
    import shutil
    import threading
    import time

    global _GENERATION, _HANDOFF
    _GENERATION, _HANDOFF = generation, handoff
    try:
        os.nice(worker_nice())
    except (AttributeError, OSError):                     # (no nice: run as is)
        pass
    # A session, so a process group, of its own: a kernel killed with its group (jupyter_client's forced
    # shutdown) leaves the worker to remove its hand-off files and end, as below. And, where Linux groups
    # processes by session to share the CPU (autogroup, /proc/sys/kernel/sched_autogroup_enabled), a group
    # of its own at the lowest priority: inside the kernel's group its nice 19 yielded to the kernel only,
    # and the group as a whole took its equal share from the browser, the server and every other session
    # (spec30: chapter 12's lab moves were painted later with the worker running).
    try:
        os.setsid()
    except (AttributeError, OSError):
        try:
            os.setpgid(0, 0)
        except (AttributeError, OSError):
            pass
    try:
        with open(AUTOGROUP, "w") as fh:
            fh.write("19")
    except OSError:                                      # (no autogroup: nice 19 is the whole story)
        pass
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        if handoff:
            shutil.rmtree(handoff, ignore_errors=True)
        os._exit(0)

    threading.Thread(target=watch, name="llmsizing-speculate-watch", daemon=True).start()


_GENERATION = None
_HANDOFF = None           # (in the worker: the kernel's hand-off directory)
_HANDED = [0]             # (in the worker: the files it wrote)
_STARTED = [None]         # (in the worker: the generation it last waited START_DELAY_S for)


def _run(gen: int, fn, args: tuple, kw: dict, handed_s: float | None = None):
    """One job in the worker (a move's first no sooner than :data:`START_DELAY_S` after the move handed it:
    ``handed_s``, its ``time.time()``; a fresh worker's start, ~0.5 s of importing, is counted in it, where
    it used to wait the whole delay after that: spec48; None: the whole delay): ``("ok", fn(*args, **kw))``,
    or ``("file", path)`` for a result whose pickle is at least :data:`HANDOFF_MIN_BYTES` long (written to the
    hand-off directory), or ``("stale",)`` if a later move made it stale before it started, or
    ``("error", message)`` if the function refuses the setting (the kernel then asks it itself, and shows its
    message)."""
    import pickle
    import time

    if _GENERATION is not None and _STARTED[0] != gen:
        _STARTED[0] = gen
        left = START_DELAY_S if handed_s is None else START_DELAY_S - (time.time() - handed_s)
        if left > 0:
            time.sleep(min(left, START_DELAY_S))
    if _GENERATION is not None and _GENERATION.value != gen:
        return ("stale",)
    try:
        got = fn(*args, **kw)
    except (ValueError, TypeError) as exc:
        return ("error", str(exc))
    if _HANDOFF is None:
        return ("ok", got)
    data = pickle.dumps(got, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) < HANDOFF_MIN_BYTES:
        return ("ok", got)
    _HANDED[0] += 1
    path = os.path.join(_HANDOFF, f"{os.getpid()}-{_HANDED[0]}.pickle")
    try:
        with open(path, "wb") as fh:
            fh.write(data)
    except OSError:                      # (the directory went: shut down meanwhile) through the pipe then
        return ("ok", got)
    return ("file", path)


def _delete(paths: tuple) -> tuple:
    """In the worker: delete hand-off files (those gone already are skipped)."""
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass
    return ("ok", None)


