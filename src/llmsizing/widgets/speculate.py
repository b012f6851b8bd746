"""Searches a widget's reader is likely to ask for next, worked out while the reader looks at the last answer
(issue 35/38: chapter 17's widget, where a new planner search after a mixture of experts' pick took 90-140 ms
of a move's CPU, over the 100 ms a move may take).

:class:`Speculation` hands such searches to one worker process (spawned, at the lowest CPU priority, shared by
every widget of the kernel and started when a speculating widget is built, so that it has imported and
searched ahead of the default view before the reader's first move; `make test`, `make book` and `make outputs`
unset the variable that turns it on, so nbval and the static pages never speculate: see "Who gets it"). The
worker runs the same pure function the widget would run (e.g. :func:`~llmsizing.planner.plan`) and sends back
its result; a move whose search is done by then takes that result instead of searching itself, and any other
move searches in the kernel as before. Its results are the function's: the planner gives the same table
whatever a process searched before (``tests/test_plan_kept_price.py`` and ``tests/test_speculate.py`` compare
with fresh processes), and a pickled table comes back bit for bit.

What a move's kernel never does: wait for the worker (a search not done is searched in the kernel, the worker
being a separate process that holds no lock the kernel needs), or share a cache with it. Thread safety: the
kernel's only other thread here is :class:`concurrent.futures.ProcessPoolExecutor`'s, which moves results
in :class:`~concurrent.futures.Future` objects (documented thread-safe); this module's own dict of futures is
read and written by the kernel's thread alone (the moves' callbacks). A large result (a plan table) does not
come back through the pool's pipe: the worker writes it, pickled, to a file of its kernel's own directory
(:data:`HANDOFF_MIN_BYTES`; in ``/dev/shm`` where there is one) and sends back its path, which the move that
takes it reads; the worker deletes the files, those never read included: a file a move read at the next
move, a result a move drops (not wanted by it, beyond the results held) at that move, before its jobs
(spec50: one move later, the files of two moves' jobs were there at once) (kern30: the pool's thread
received and unpickled every one of a move's 12 tables, 1-3 ms each and ~20 ms for a first batch of 5 MB
tables, 8-10 ms of the kernel's helper-thread CPU a move, most of it tables no move took; deleting a 5 MB
file of ``/dev/shm`` costs the deleting thread ~0.7 ms, so the worker does it). Bounded: at most a
widget's ``jobs`` searches a move (:data:`SPECULATE_JOBS` unless it gives its own: chapter 17 asks 28,
:func:`~.long_context.long_context_jobs`); each move makes the jobs of the move before stale (a shared
generation number: a stale job not yet started returns at once, and is cancelled where the pool still can);
at most ``jobs`` + :data:`SPECULATE_HELD` results held, as hand-off files. The worker ends with its kernel,
even one killed by force (its hand-off files with it). Where no process can be spawned (Pyodide, JupyterLite),
or where too little memory is free for a second process (:data:`SPECULATE_MIN_FREE_BYTES`), nothing is
speculated.

**Who gets it.** Speculation is for a reader on a machine of their own: on one server shared by a room, the
workers slowed every participant's redraws 1.4-2.8x even at the lowest priority (CHANGES.md: the load test of
chapter 17). A widget built with ``speculate=None`` (the default) speculates only where the environment says
so, ``LLMSIZING_SPECULATE=1`` (:data:`ENV`), which ``make lab``, ``make app`` (Voila) and ``make serve-live``
set (each one reader on 127.0.0.1); JupyterHub and Binder do not. It changes how soon an answer comes, never
the answer.

**The lowest tier** (pick50): a widget may also hand searches kept until taken (``Speculation(pinned=)``,
:meth:`Speculation.ahead`'s ``pinned``): chapter 17's pick of each dense model at the default view
(:func:`~.long_context.long_context_tier`). They go behind each move's own searches (those not started are
re-handed behind them, as stale jobs are) and are not counted in :data:`SPECULATE_HELD`; each holds one
hand-off file (the kernel its path): chapter 17's 54 dense tables, 0.06-2.0 MB each, ~58 MB of ``/dev/shm``
in all, and the worker's RSS ~0.28 GB after the build's searches and all 54 (2026-12-05).

What the worker process runs (its set-up, a job, deleting hand-off files) is
:mod:`llmsizing.speculate_worker`, outside this package: a worker imports that and its jobs' function, not the
widgets (spec48).
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from collections import OrderedDict

# (the worker's side, in a module of its own: a worker imports it without this package; spec48)
from ..speculate_worker import (_GENERATION, _HANDED, _HANDOFF, _STARTED, AUTOGROUP,  # noqa: F401
                                HANDOFF_MIN_BYTES, NICE_ENV, PARENT_CHECK_S, START_DELAY_S, _delete, _run,
                                _worker_init, worker_nice)

#: How many searches one move hands to the worker (the most likely first), unless a widget gives its own
#: count (``Speculation(jobs=)``: chapter 17's 28, every second GPU type included; spec50).
SPECULATE_JOBS = 12
#: How many finished results of earlier moves' searches a widget holds beside the last move's (the oldest
#: dropped first): each a plan table of ~5-25 MB in chapter 17 (the process's peak memory: see
#: long_context_widget).
SPECULATE_HELD = 4

_UNREAD: list = []        # (in the kernel: hand-off files for the worker to delete at the next move)
_POOL: dict = {}          # the one worker pool of the process, its generation counter, its hand-off directory
_WATCHED: dict = {}       # a widget's name -> a weak reference to the Speculation its last build watches with

#: The environment variable that turns speculation on for widgets built with ``speculate=None``: "1" on,
#: anything else or unset off (``make lab`` sets it: a reader's own machine).
ENV = "LLMSIZING_SPECULATE"


def wanted_by_environment() -> bool:
    """Whether :data:`ENV` asks for speculation ("1")."""
    return os.environ.get(ENV, "").strip() == "1"


#: The memory that must be free for this process before a worker is started: the worker's own peak (~0.4 GB
#: in chapter 17 when it imported the widgets package; ~0.26 GB after a few searches since spec48, which it
#: no longer imports; 0.74-0.75 GB at the peak of chapter 17's walk since spec50, whose 28 searches a move
#: fill the planner's 32 kept searches with tables of two GPU types; 0.44-0.55 before), the hand-off files of
#: the tables it worked out (a move's jobs and :data:`SPECULATE_HELD` more: 0.28 GB at the walk's peak, 32
#: files of 0.1-11 MB; 0.14-0.17 before) and some to spare (1.2 GiB before spec50, when the two came to
#: ~0.7 GB; ~1.0 GB now). A laptop short of memory then searches in the kernel alone, as without speculation.
SPECULATE_MIN_FREE_BYTES = int(1.5 * 2**30)

#: Where the memory left to this process is read (Linux): the machine's, and the limits of its own cgroup and
#: each cgroup above it (a JupyterHub that limits each participant, e.g. The Littlest JupyterHub's systemd
#: units, sets the limit there, not at the root).
MEMINFO = "/proc/meminfo"
PROC_CGROUP = "/proc/self/cgroup"
CGROUP_ROOT = "/sys/fs/cgroup"


def cgroup_files(proc_cgroup: str = PROC_CGROUP, root: str = CGROUP_ROOT) -> tuple:
    """``(limit file, usage file)`` of this process's memory cgroup and of each cgroup above it, as
    ``proc_cgroup`` names them: cgroup v2 (``0::/path``: ``memory.max``, ``memory.current``) and v1 (the
    ``memory`` controller's line: ``memory.limit_in_bytes``, ``memory.usage_in_bytes``)."""
    try:
        with open(proc_cgroup) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return ()
    out = []
    for line in lines:
        idx, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if idx == "0" and controllers == "":
            base, names = root, ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            base, names = os.path.join(root, "memory"), ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        parts = [x for x in path.split("/") if x]
        for i in range(len(parts), -1, -1):
            here = os.path.join(base, *parts[:i])
            out.append((os.path.join(here, names[0]), os.path.join(here, names[1])))
    return tuple(out)


def free_bytes(meminfo: str = MEMINFO, cgroups=None) -> float | None:
    """The memory this process may still take, in bytes: the smallest of the machine's available memory
    (``MemAvailable`` of ``/proc/meminfo``) and what each cgroup limit above it leaves (the limit less that
    cgroup's usage; "max" or a v1 limit near 2**63 is no limit; ``cgroups``: :func:`cgroup_files` by default).
    None where none can be read (not Linux)."""
    found = []
    try:
        with open(meminfo) as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(float(line.split()[1]) * 1024)
                    break
    except OSError:
        pass
    for limit_path, usage_path in (cgroup_files() if cgroups is None else cgroups):
        try:
            with open(limit_path) as fh:
                limit = fh.read().strip()
            with open(usage_path) as fh:
                usage = float(fh.read().strip())
        except (OSError, ValueError):
            continue
        if limit != "max" and float(limit) < 2.0**60:
            found.append(max(float(limit) - usage, 0.0))
    return min(found) if found else None


def _handoff_dir() -> str | None:
    """A new directory for the worker's large results, named after this process: in ``/dev/shm`` (memory)
    where there is one, else in the temporary directory; None if neither can be made (results then come
    through the pool's pipe). The directories of processes no longer running are removed first (a kernel and
    its worker both killed; on POSIX only: on Windows ``os.kill(pid, 0)`` ends the process, not probes it)."""
    import glob
    import shutil
    import tempfile

    for where in ("/dev/shm", None):
        if where is not None and not os.path.isdir(where):
            continue
        olds = glob.glob(os.path.join(where or tempfile.gettempdir(), "llmsizing-speculate-*-*"))
        for old in olds if os.name == "posix" else ():
            try:
                os.kill(int(os.path.basename(old).split("-")[2]), 0)
            except ProcessLookupError:
                shutil.rmtree(old, ignore_errors=True)
            except (ValueError, IndexError, OSError):     # (not ours to judge: another user's, a bad name)
                pass
        try:
            return tempfile.mkdtemp(prefix=f"llmsizing-speculate-{os.getpid()}-", dir=where)
        except OSError:
            continue
    return None


def _drop(f) -> None:
    """Hand the file of a finished job's result, if it has one (a result never taken), to the worker to delete
    at the next move (:func:`_delete`)."""
    if f.done() and not f.cancelled() and f.exception() is None:
        got = f.result()
        if got[0] == "file":
            _UNREAD.append(got[1])


def _pool():
    """The process's worker pool (one worker), started on first use; None where no process can be spawned or
    less than :data:`SPECULATE_MIN_FREE_BYTES` of memory is free for it (:func:`free_bytes`, read once)."""
    if "pool" in _POOL:
        return _POOL["pool"]
    pool = None
    free = free_bytes()
    if sys.platform not in ("emscripten", "wasi") and (free is None or free >= SPECULATE_MIN_FREE_BYTES):
        try:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            ctx = mp.get_context("spawn")     # (not fork: the kernel has threads)
            gen = ctx.Value("q", 0, lock=False)
            handoff = _handoff_dir()
            pool = ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=_worker_init,
                                       initargs=(gen, os.getpid(), handoff))
            _POOL["gen"], _POOL["dir"] = gen, handoff
            atexit.register(_shutdown_at_exit)
        except (ImportError, OSError, NotImplementedError, ValueError):
            pool = None
    _POOL["pool"] = pool
    return pool


def _shutdown_at_exit() -> None:
    """At the interpreter's exit: stop the worker while the modules its pool's threads use are still there
    (left to the pool's own finaliser, a pytest worker's exit printed "Exception ignored ... 'NoneType' object
    has no attribute 'util'")."""
    pool = _POOL.pop("pool", None)
    _POOL.pop("gen", None)
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)
    _remove_dir(_POOL.pop("dir", None))


def shutdown() -> None:
    """Stop the process's worker (its running job is left to finish, the others dropped); the next
    speculation starts a new one."""
    pool = _POOL.pop("pool", None)
    _POOL.pop("gen", None)
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)
    _remove_dir(_POOL.pop("dir", None))


def _remove_dir(path: str | None) -> None:
    """Remove a hand-off directory and the results in it (a job still running then sends its result through
    the pipe)."""
    import shutil

    if path:
        shutil.rmtree(path, ignore_errors=True)


class Speculation:
    """One widget's speculative searches: ``fn(*args, **kw)`` for the keys it is asked to work out ahead
    (:meth:`ahead`), taken by the widget's move that needs one (:meth:`take`). ``fn`` must be picklable (a
    module-level function) and pure: its result a function of its arguments alone."""

    def __init__(self, fn, *, jobs: int = SPECULATE_JOBS, held: int = SPECULATE_HELD, pinned: int = 0):
        self.fn, self.jobs, self.held, self.pinned = fn, jobs, held, pinned
        self._futures: OrderedDict = OrderedDict()       # key -> Future (the kernel's thread only)
        self.taken = self.missed = 0                     # (moves that took a result / searched themselves)

    def ahead(self, wanted, pinned=()) -> None:
        """Hand the worker the searches of ``wanted`` (``(key, args, kw)``, most likely first; the first
        :attr:`jobs` of them), after making the last move's stale: every job not done is dropped (cancelled
        where the pool still can; one already in the pool's call queue returns at once, one running finishes
        unused) and handed on again if still wanted; a result already done is held (at most :attr:`held`, the
        oldest dropped), unless it came back stale or broken.

        ``pinned`` (the lowest tier; the first :attr:`pinned` of them, those not in ``wanted``): searches
        handed after ``wanted``'s, whose results are kept until taken (not counted in :attr:`held`, never
        dropped while ``pinned`` lists them): chapter 17's model picks at the default view (pick50). A move
        re-hands the tier's jobs not started behind its own, as it does its stale jobs (the pool is FIFO: the
        tier never delays a move's searches); a tier job already in the pool's call queue is left to it (the
        one running finishes and its result is kept; the one queued comes back stale and is handed again at
        the next move). At most :attr:`pinned` results: the kernel holds the path of each hand-off file."""
        pool = _pool()
        if pool is None:
            return
        wanted = list(wanted)[:self.jobs]
        keys = {k for k, _, _ in wanted}
        tier = [job for job in pinned if job[0] not in keys][:self.pinned]
        tier_keys = {k for k, _, _ in tier}
        gen = _POOL["gen"]
        gen.value += 1
        for key, f in list(self._futures.items()):
            if not f.done():
                if key in tier_keys and f.running():     # (in the call queue: running, or back stale soon)
                    continue
                f.cancel()
                del self._futures[key]                   # (stale now: sent again below if still wanted)
                f.add_done_callback(_drop)               # (its file, if it runs on and writes one)
            elif f.cancelled() or f.exception() is not None or f.result()[0] in ("stale", "broken"):
                del self._futures[key]
        done = [k for k, f in self._futures.items()                         # (earlier moves', not pinned)
                if f.done() and k not in keys and k not in tier_keys]
        for key in done[:max(len(done) - self.held, 0)]:
            _drop(self._futures.pop(key))
        if _UNREAD:                 # (first in the worker's queue: after its running job, before the new)
            paths = tuple(_UNREAD)
            del _UNREAD[:len(paths)]
            try:
                pool.submit(_delete, paths)
            except RuntimeError:
                shutdown()
                return
        handed = time.time()                             # (the worker's delay counts from here)
        for key, args, kw in wanted + tier:              # (the move's own first: the tier behind them)
            if key not in self._futures:
                try:
                    self._futures[key] = pool.submit(_run, gen.value, self.fn, args, kw, handed)
                except RuntimeError:                     # (the pool broke or was shut down)
                    shutdown()
                    return

    def take(self, key):
        """The worker's result for ``key`` if it is done (``("ok", result)``), else None: the caller searches
        itself (a job not started is cancelled; one running is left to finish, its result dropped)."""
        f = self._futures.pop(key, None)
        if f is None or not f.done() or f.cancelled():
            if f is not None:
                f.cancel()
                f.add_done_callback(_drop)
            self.missed += 1
            return None
        try:
            got = f.result()
        except Exception:           # (the worker died: BrokenProcessPool; search in the kernel)
            got = ("broken",)
        if got[0] == "file":        # (a large result: read, once, by the move that takes it)
            path, got = got[1], _read_handoff(got[1])
            _UNREAD.append(path)
        if got[0] != "ok":
            self.missed += 1
            return None
        self.taken += 1
        return got

    def known(self, key) -> bool:
        """Whether ``key`` is asked of the worker (running, waiting or done)."""
        return key in self._futures

    def release(self) -> None:
        """Drop every search asked of the worker: not started, cancelled; running or done, its hand-off
        file handed to the worker to delete at the next move of any widget (a widget built again: the old
        one's files, up to ~0.35 GB of ``/dev/shm`` for chapter 17's, would stay until the kernel ends). A
        later move of this widget asks again (its answers stay right)."""
        for f in self._futures.values():
            if f.done():
                _drop(f)
            else:
                f.cancel()
                f.add_done_callback(_drop)
        self._futures.clear()


def nearest(options, value) -> list:
    """``options`` but ``value``, nearest to ``value`` in their order first (a tie: the later one first), as a
    reader steps a slider or a drop-down from ``value``; all of them, in order, if ``value`` is not one."""
    options = list(options)
    at = options.index(value) if value in options else 0
    return [o for _, o in sorted(((abs(i - at), -i), o) for i, o in enumerate(options) if o != value)]


def watch(board, spec: Speculation, wanted, pinned=None) -> None:
    """Speculate for ``board`` (a :class:`~.dashboard.Dashboard`): after each new value of any of its
    controls (observed after the board's own draw), hand ``spec`` the searches ``wanted()`` lists
    (``(key, args, kw)``, most likely first), then the lowest tier ``pinned()`` lists (if given: searches
    kept until taken, :meth:`Speculation.ahead`), unless they are the ones it was last handed and all still
    asked (a move that only filters: its jobs are left to run on); and once when called (the widget's build),
    so that the worker has started (~0.5 s of importing, at the lowest priority) and searched ahead of the
    default view before the reader's first move (issue 38: started at the first move, the worker's start
    made that move dearer and missed the next). A widget of the same name built before (a cell run again)
    has its searches released (:meth:`Speculation.release`). ``board.speculation`` is ``spec``. Shared by
    the widgets of chapters 12 and 17."""
    last: list = []

    def ahead(change=None) -> None:
        jobs = list(wanted())[:spec.jobs]
        tier = list(pinned())[:spec.pinned] if pinned is not None else []
        keys = [k for k, _, _ in jobs] + [None] + [k for k, _, _ in tier]
        if keys == last and all(spec.known(k) for k in keys if k is not None):
            return
        last[:] = keys
        spec.ahead(jobs, tier)

    import weakref

    name = getattr(board, "name", None)
    before = _WATCHED.get(name, lambda: None)()
    if before is not None and before is not spec:      # (the same widget built again: the old one's files go)
        before.release()
    _WATCHED[name] = weakref.ref(spec)
    for w in board.controls.values():
        w.observe(ahead, names="value")
    board.speculation = spec
    ahead()             # (at build: the worker starts, and searches ahead, before the reader's first move)


def _read_handoff(path: str) -> tuple:
    """``("ok", result)`` from a hand-off file (left for the worker to delete); ``("broken",)`` if it cannot
    be read."""
    import pickle

    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return ("broken",)
    return ("ok", pickle.loads(data))
