"""Shared pytest configuration for the unit tests.

Hypothesis runs a modest number of examples with no per-example deadline, so the whole unit-test suite stays
fast and deterministic enough for a 2-core CI machine (``derandomize`` makes every run draw the same
examples: a failure seen once is seen again).
"""

import contextlib
import functools
import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "llmsizing",
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("llmsizing")


BROWSER_TESTS = Path(__file__).resolve().parent / "browser"


def pytest_ignore_collect(collection_path, config):
    """tests/browser (JupyterLab and the built site in Chromium) runs only when named on the command line
    (`make check-live`, `pytest tests/browser/...`); `pytest tests` and `make test` leave it out."""
    if Path(collection_path) != BROWSER_TESTS:
        return None
    for arg in config.args:
        target = Path(str(arg).split("::")[0]).resolve()
        if target == BROWSER_TESTS or BROWSER_TESTS in target.parents:
            return None
    return True


# ----------------------------------------------------------------------------- running on every core
#: Test files whose tests share work computed once per module (module-scoped fixtures, cached frames): under
#: pytest-xdist each is one unit of work, run whole on one worker, so that the work is done once.
#: (tests/test_speculate.py and tests/test_finetune_groupings.py, suite39: their module fixtures were made on
#: both workers, 2.5 s and up to 5 s CPU again; tests/test_speculate.py also waits for its widgets' worker
#: processes, 10 s or so of its 25 s: on one worker, early (:data:`FIRST`), the other worker's tests fill
#: those waits instead of both workers waiting at the end of the run.)
WHOLE_FILES = ("tests/test_finetune_calibration.py", "tests/test_step_intervals.py",
               "tests/test_stack_ranges.py", "tests/test_speculate.py", "tests/test_finetune_groupings.py")
#: The units of work handed out first (in this order; a unit holding a test that starts with one of these): the
#: slowest tests, so that none of them starts last while the other worker sits idle. Every other unit follows,
#: the largest first (xdist's order). Only the order depends on this list, never what runs.
_EVERY_MOVE = "tests/test_widgets.py::test_every_move_from_the_default_changes_the_figure_or_says_why"
FIRST = (
    f"{_EVERY_MOVE}[long_context_widget-0-model]",
    f"{_EVERY_MOVE}[planner_widget-0-model]",
    "tests/test_speculate.py",
    "tests/test_planner_speed.py",
    "tests/test_finetune_groupings.py",
    "tests/test_serving.py::test_calibration_tool_is_current",
    "tests/test_live_setup.py::test_serve_live_server_hides_its_token_and_culls_a_kernel",
    "tests/test_time_cost.py::test_calibration_files_are_up_to_date",
    "tests/test_widgets.py::test_every_move",
    "tests/test_widget_layout.py::test_update_equals_a_fresh_render",
    "tests/test_widgets.py",
    "tests/test_widget_layout.py",
)


#: A worker is sent more units while it has fewer than this many tests to run (xdist: 3), as long as more than
#: :data:`TAIL_UNITS` units wait (then one at a time, as xdist sends them). Only when a test runs changes.
AHEAD = 8
TAIL_UNITS = 60


#: Tests that share one computation made once per process (:func:`calibrate_check`): one unit of work each.
#: (tests/test_planner_speed.py: each setting's comparison is a unit of its own, for balance; the test that
#: reads one setting's frames again joins that setting's unit.) The calibration unit also holds every test
#: that reads the default table's fits, which the library keeps once per process (fit_kernel_efficiency,
#: mfu_loso_check, step_loso_check on published_runs()): with tools/calibrate.py --check on one worker, they
#: are fitted once instead of once more on each worker.
_SPEED = "tests/test_planner_speed.py::test_fast_search_equals_the_direct_one"
_CALIBRATE = "tools/calibrate.py --check"
_DEFAULT_FITS = (
    "tests/test_time_cost.py::test_calibration_files_are_up_to_date",
    "tests/test_calibration.py::test_the_fitted_files_are_up_to_date",
    "tests/test_calibration.py::test_each_runs_kernel_efficiency_gives_back_its_published_mfu",
    "tests/test_calibration.py::test_the_default_is_the_median_of_the_calibration_runs",
    "tests/test_calibration.py::test_held_out_runs_are_predicted_within_the_generations_spread",
    "tests/test_calibration.py::test_context_parallel_runs_are_held_out_of_the_kernel_fit",
    "tests/test_intervals.py::test_training_coverage_and_width_stored_are_measured",
    "tests/test_intervals.py::test_mfu_model_ranges_are_the_stated_bounds",
    "tests/test_intervals.py::test_training_folds_leave_whole_sources_out",
    "tests/test_round3_harden.py::test_a_good_table_fits_as_before",
    "tests/test_fp8.py::test_fp8_runs_are_covered_out_of_source_as_stated")
#: Whole files (:data:`WHOLE_FILES`) that join a shared unit: tests/test_step_intervals.py's module fixture is
#: step_loso_check() on the default table, which tools/calibrate.py --check computes too; most tests of
#: tests/test_stack_ranges.py read the plain and by-stack checks on the default table (``_out_of_source``).
SHARED_FILES = dict.fromkeys(("tests/test_step_intervals.py", "tests/test_stack_ranges.py"), _CALIBRATE)
SHARED_UNITS = {**dict.fromkeys(_DEFAULT_FITS, _CALIBRATE),
                "tests/test_planner_speed.py::test_the_comparison_can_fail":
                    f"{_SPEED}[70b at 32K, context parallelism by all-gather]"}


@pytest.fixture
def catalogue_prices():
    """The catalogue's own prices around a test (``catalog.use_prices(None)`` before and after), for the tests
    that read or set prices (tests/test_price_kind.py, tests/test_prices_as_of.py)."""
    from llmsizing.catalog import use_prices

    use_prices(None)
    yield
    use_prices(None)


@functools.cache
def run_tool(script: str, *argv: str) -> tuple[int, str]:
    """``tools/<script> <argv>`` run once per process, in this process (the library already imported): its
    exit code and what it printed."""
    import importlib.util
    import io
    from contextlib import redirect_stdout

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(Path(script).stem + "_tool", root / "tools" / script)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    out = io.StringIO()
    with redirect_stdout(out):
        code = tool.main(list(argv))
    return code, out.getvalue()


def calibrate_check() -> tuple[int, str]:
    """``tools/calibrate.py --check`` (:func:`run_tool`): tests/test_time_cost.py and tests/test_calibration.py
    both check that the fitted files are current; under xdist both are one unit (:data:`SHARED_UNITS`): the
    fits run once."""
    return run_tool("calibrate.py", "--check")


#: Browser tests (`make check-live`, tests/browser) that share one server started for them alone: one unit.
LIVE_SITE_TESTS = ("test_live_code_runs_the_page_and_a_slider_redraws_the_figure",
                   "test_live_widget_gets_the_page_width")


def _browser_scope(nodeid: str) -> str | None:
    """The unit of work of a browser test that shares an opened page with others (issue 38: `make check-live`
    on two workers): every test of one notebook in the lab (tests/browser/test_lab.py, its id in brackets:
    the page opened and run once), every Voila test of one chapter (``test_voila*[chapter]``, one Voila page),
    and the tests of the ``make serve-live`` server (:data:`LIVE_SITE_TESTS`). None for any other test."""
    path, _, rest = nodeid.partition("::")
    if not path.startswith("tests/browser/"):
        return None
    name, _, param = rest.partition("[")
    param = param.rstrip("]")
    if path.endswith("/test_lab.py") and param:
        return f"{path}[{param}]"
    if name.startswith("test_voila") and param:
        return f"voila[{param}]"
    if name in LIVE_SITE_TESTS:
        return "live_site"
    return None


_LAB_UNIT, _VOILA_UNIT = "tests/browser/test_lab.py[", "voila["


def interleave_lab_and_voila(units: list) -> list:
    """The browser tests' units (``(scope, tests)``, in queue order) with the lab's notebooks and the Voila
    chapters taken in turn, each list in its own order, in the slots they held; every other unit keeps its
    slot. Issue 38: the lab's units came first and Voila's after them, so both workers ran JupyterLab and
    then both ran Voila, and a Voila chapter keeps fewer cores busy (mostly one chain: kernel, page,
    harness; in a full run 1.2 cores of 2 against 1.9 for the lab). In turn, one worker's lab work fills
    the other's gaps."""
    lab = [u for u in units if u[0].startswith(_LAB_UNIT)]
    voila = [u for u in units if u[0].startswith(_VOILA_UNIT)]
    if not lab or not voila:
        return units
    turns = iter([u for pair in itertools.zip_longest(lab, voila) for u in pair if u is not None])
    return [next(turns) if u[0].startswith((_LAB_UNIT, _VOILA_UNIT)) else u for u in units]


#: The files whose tests share one widget instance per factory (:func:`widget`): under pytest-xdist the tests of
#: one widget (the factory's name opens the test's parameters) are one unit of work, so that only one worker
#: builds and draws that widget. Tests of these files named in :data:`WIDGET_TESTS` join that widget's unit.
WIDGET_FILES = ("tests/test_widgets.py", "tests/test_widget_layout.py")
WIDGET_TESTS = {"tests/test_widget_layout.py::test_planner_front_is_a_table_with_one_row_per_front_plan":
                "planner_widget"}


def widget_of(nodeid: str) -> str | None:
    """The widget factory whose shared instance the test ``nodeid`` uses (None: none, or one of its own)."""
    import re

    if nodeid.split("::", 1)[0] not in WIDGET_FILES:
        return None
    found = re.search(r"\[(\w+?_widget)(?:-|\])", nodeid)
    return found.group(1) if found else WIDGET_TESTS.get(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config, specs):
    """Before pytest-xdist starts its workers: the run's test files whose assert-rewritten code pytest has not
    cached yet (a fresh clone: none; ``__pycache__/*-pytest-*.pyc``, keyed by the source's hash) are rewritten
    once, split over as many processes as there will be workers, instead of by every worker while it collects
    (fast31: 2.6 MB of tests, about 10 s CPU per process; each worker made its own copy, side by side). The
    library's modules with no bytecode yet are compiled in the same processes. Each worker then reads the
    caches as on any later run. pytest's own functions rewrite and write (``_pytest.assertion.rewrite``: the
    code is the one a worker would make, the file written atomically); if they are not there, or anything
    fails, the workers rewrite and compile as before."""
    _rewrite_ahead(config, len(specs))


def _rewrite_ahead(config, processes: int) -> None:
    import os
    import sys

    try:
        from _pytest.assertion import rewrite as rw

        state = config.stash[rw.assertstate_key]
        needs = [rw.get_cache_dir, rw.PYC_TAIL, rw._read_pyc, rw._rewrite_test, rw._write_pyc,
                 rw.try_makedirs]
    except (ImportError, AttributeError, KeyError):
        return
    if processes < 2 or not hasattr(os, "fork") or sys.dont_write_bytecode or not all(needs):
        return
    import importlib.util

    here, args = Path(__file__).resolve().parent, [Path(str(a).split("::")[0]).resolve() for a in config.args]
    todo = []
    for fn in here.glob("test_*.py"):
        if not any(a == fn or a in fn.parents for a in args):        # (not in this run)
            continue
        pyc = rw.get_cache_dir(fn) / (fn.name[:-3] + rw.PYC_TAIL)
        if rw._read_pyc(fn, pyc) is None:
            todo.append((fn.stat().st_size, fn, pyc))
    if len(todo) < processes:
        return
    # the library's modules with no bytecode yet (a fresh clone), compiled as its import would (py_compile)
    for fn in (Path(__file__).resolve().parents[1] / "src" / "llmsizing").rglob("*.py"):
        if not os.path.exists(importlib.util.cache_from_source(str(fn))):
            todo.append((fn.stat().st_size, fn, None))
    parts, sizes = [[] for _ in range(processes)], [0] * processes
    for size, fn, pyc in sorted(todo, key=lambda t: -t[0]):     # the largest first, each to the lightest part
        i = sizes.index(min(sizes))
        parts[i].append((fn, pyc))
        sizes[i] += size

    def rewrite(part) -> None:
        import py_compile

        for fn, pyc in part:
            try:
                if pyc is None:
                    py_compile.compile(str(fn), doraise=True)
                elif rw.try_makedirs(pyc.parent):
                    source_hash, code = rw._rewrite_test(fn, config)
                    rw._write_pyc(state, code, source_hash, pyc)
            except Exception:       # (the worker that imports it rewrites it, as before)
                pass

    children = []
    for part in parts[1:]:
        pid = os.fork()
        if pid == 0:                # (a child: rewrite its part, then leave without pytest's clean-up)
            try:
                rewrite(part)
            finally:
                os._exit(0)
        children.append(pid)
    rewrite(parts[0])
    for pid in children:
        os.waitpid(pid, 0)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test` runs on every core (pytest-xdist, ``-n auto --dist loadgroup``). The cells of one notebook
    (nbval) must run in order in one kernel, so a notebook is one unit of work, sent whole to one worker; so
    is each file of :data:`WHOLE_FILES`. Every other test goes on its own to whichever worker is free, the
    slowest first (:data:`FIRST`); the tests of one widget go together too (:func:`widget_of`). (xdist's own loadgroup reads an ``xdist_group`` mark from a suffix it adds
    to the test's id, which pytest 9 no longer lets it add: the groups are made here instead.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Scheduling(LoadGroupScheduling):
        _ordered = False

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._index: dict = {}          # node -> {nodeid: its index in the node's collection}
            self._browser = None            # whether the run holds browser tests (known once collected)

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path.endswith(".ipynb") or path in WHOLE_FILES:
                return SHARED_FILES.get(path, path)
            if name := widget_of(nodeid):
                return f"widget {name}"
            if nodeid in SHARED_UNITS:
                return SHARED_UNITS[nodeid]
            return _browser_scope(nodeid) or super()._split_scope(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self._ordered:           # the first call: every unit is in the queue, none handed out yet
                self._ordered = True

                def rank(unit):             # a unit of several tests ranks as its earliest-listed test
                    return min(next((i for i, p in enumerate(FIRST) if nodeid.startswith(p)), len(FIRST))
                               for nodeid in unit[1])

                # (sorted is stable: within a rank, the largest unit first, as xdist queued them)
                units = interleave_lab_and_voila(sorted(self.workqueue.items(), key=rank))
                self.workqueue.clear()
                self.workqueue.update(units)
            scope, unit = self.workqueue.popitem(last=False)      # xdist's, with each test's index looked up
            self.assigned_work.setdefault(node, {})[scope] = unit   # in a dict (xdist: list.index per test)
            index = self._index.get(node)
            if index is None:
                index = self._index[node] = {n: i for i, n in enumerate(self.registered_collections[node])}
            node.send_runtest_some([index[nodeid] for nodeid, done in unit.items() if not done])

        def _reschedule(self, node) -> None:
            """xdist's (one more unit when the node has 2 tests or fewer to run), then, while more than
            :data:`TAIL_UNITS` units wait, more units until the node has :data:`AHEAD` tests to run. A worker
            starts a test only once it holds the next one's index; with two in hand, each test of a few
            milliseconds (most of the 7,000) waited for the controller's answer to the one before. Which tests
            run, and where each unit's tests run together, is as before; near the end every unit goes out one
            at a time, so that none waits behind another worker's long test. (Not for the browser tests, whose
            units are handed out one at a time in the order :func:`interleave_lab_and_voila` gives them.)"""
            super()._reschedule(node)
            if self._browser is None and self.collection is not None:
                self._browser = any(n.startswith("tests/browser/") for n in self.collection)
            work = self.assigned_work.get(node, {})
            while (not self._browser and not node.shutting_down and len(self.workqueue) > TAIL_UNITS
                   and sum(not done for unit in work.values() for done in unit.values()) < AHEAD):
                self._assign_work_unit(node)

        def mark_test_complete(self, node, item_index: int, duration: float = 0) -> None:
            """xdist's, except that a unit whose tests have all completed leaves the node's assigned work.
            xdist counts a node's pending tests (``_pending_of``) over every unit the node was ever given,
            after each test: with one test a unit, that is quadratic (issue 32: 5.5 M steps over the 5,800
            tests of `make test`; the controller's CPU fell by about 0.5% of the workers', 1.5-2 s). A
            finished unit has no pending test, so every count, and so every scheduling decision, is the one
            xdist makes; a crashed worker's unfinished units are still there to be handed out again."""
            nodeid = self.registered_collections[node][item_index]
            work, scope = self.assigned_work[node], self._split_scope(nodeid)
            work[scope][nodeid] = True
            if all(work[scope].values()):
                del work[scope]
            self._reschedule(node)

    return Scheduling(config, log)


# ----------------------------------------------------------------------------- widgets
@functools.cache
def controls_of(name: str):
    """The widget of factory ``name`` built with its drawing left out (``Dashboard._draw`` returns no view
    while the factory runs), for listing its dashboards and controls when the tests are collected: a
    factory's controls are made before its dashboard draws, so the list is the one the drawn widget has.
    No test looks at this instance's view: every test uses :func:`widget`, which is drawn. (Collection no
    longer draws every widget on every worker; under ``make test`` each widget's tests go to one worker
    (:func:`widget_of`), which alone builds and draws it.)

    A factory that warms its searches when it is built (``warm=True``, chapter 17's: the plans of the
    drop-down's mixtures of experts and of the nearby settings, made after its controls) is built here with
    ``warm=False``: the same controls, without the searches that only a drawn widget uses (fast33: chapter
    17's cost every worker 1.9 s of CPU while it collected, 0.07 s without; the worker that runs its tests
    makes them when :func:`widget` builds it)."""
    import inspect
    from unittest import mock

    from llmsizing import widgets

    factory = getattr(widgets, name)
    cold = {"warm": False} if "warm" in inspect.signature(factory).parameters else {}
    with mock.patch.object(widgets.Dashboard, "_draw", lambda self, values: ("error", "")):
        return factory(**cold)


@functools.cache
def widget(name: str):
    """The widget of factory ``name`` (:mod:`llmsizing.widgets`) at its defaults: one instance per process,
    shared by tests/test_widgets.py and tests/test_widget_layout.py, whose tests each restore what they change.
    (Both files list the controls of every widget when they are collected: one build serves both.)"""
    from llmsizing import widgets

    return getattr(widgets, name)()


class _NotDrawn(ValueError):
    """What :func:`undrawn` makes the widget's render raise while a control goes back to its default."""


@contextlib.contextmanager
def undrawn(board):
    """Inside: every redraw of ``board`` stops before it draws (its render raises :class:`_NotDrawn`, which
    the dashboard shows as an error, clearing the figure). The controls move and their observers run as they
    always do (a model change still limits the sequence slider), so the widget's state is the one a reader
    would reach; only the figure of that state is not drawn. On the way out the render is the widget's own
    again: the next move draws from scratch, from the controls' values alone."""
    real = board.render

    def not_drawn(**_):
        raise _NotDrawn("not drawn")

    board.render = not_drawn
    try:
        yield
    finally:
        board.render = real


def pytest_configure(config):
    # Hypothesis keeps a small cache in .hypothesis/ (git-ignored); pyproject's norecursedirs replaces
    # pytest's defaults, so hypothesis warns that it skips that folder. Harmless: silence it.
    config.addinivalue_line("filterwarnings", "ignore:Skipping collection of '.hypothesis':UserWarning")


def pytest_collection_finish(session):
    """Once the tests are collected, the objects made so far (about 300,000: the imported modules, the
    catalogues, the test items, the undrawn widgets of :func:`controls_of`) live to the end of the run anyway:
    ``gc.freeze`` moves them out of the cyclic collector's sight, so that each full collection during the run
    walks only what the tests made since (issue 32: measured on test_widget_layout, test_audit and
    test_serving, 1.3 s less collector time in 50 s of CPU). What a test makes is collected as before.

    The young generation's threshold goes from Python's 700 to :data:`YOUNG_GC_THRESHOLD` allocations: the
    widget tests make many short-lived matplotlib objects, and the collector ran about 900 young and 7 full
    collections in a minute of them (6% of their CPU). Cyclic garbage is still collected, only less often;
    the other thresholds (how many young collections make an older one) stay Python's. (plan() pauses the
    collector during its searches anyway: tests/test_moe_arrays.py.)"""
    import gc

    gc.freeze()
    gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """When the process exits, after pytest's own last collection (its unraisable-exception check, at
    unconfigure, runs before this hook) and the other plugins' unconfigure: ``gc.freeze`` again, so that the
    interpreter's shutdown does not walk and free, cycle by cycle, everything the tests kept (the widgets,
    their figures and kept answers, the fresh renders, the plan caches). Issue 32: in `make test` each worker
    spent about 3 s after its last test exiting, while the controller waited for it. The process ends as
    before; its memory goes back to the system at once. Nothing is checked at that point."""
    import atexit
    import gc

    atexit.register(gc.freeze)


#: Allocations (minus deallocations) of container objects between two young-generation collections during
#: the tests (:func:`pytest_collection_finish`; Python's default is 700). Issue 32, A/B on the widget tests
#: of three widgets (160 tests, one process): collector CPU 2.4-2.8 -> 0.9-1.1 s, test CPU 42-45 -> 40-41 s.
YOUNG_GC_THRESHOLD = 10_000


# ----------------------------------------------------------------------------- shared strategies
from hypothesis import strategies as st  # noqa: E402


@st.composite
def small_models(draw, *, gpt_like: bool | None = None) -> "Model":  # noqa: F821
    """Random small decoder-only architectures (GQA, gated or not, either norm, biases, tying). (The library
    is imported here, not when this file loads: the xdist controller, which runs no test, then starts its
    workers without importing it.)"""
    from llmsizing import Model

    heads = draw(st.sampled_from([1, 2, 4, 8, 16]))
    kv = draw(st.sampled_from([k for k in (1, 2, 4, 8, 16) if heads % k == 0]))
    head_dim = draw(st.sampled_from([8, 16, 32, 64]))
    return Model(
        "random", layers=draw(st.integers(1, 8)), hidden=heads * head_dim, heads=heads, kv_heads=kv,
        head_dim=head_dim, ffn_hidden=draw(st.sampled_from([16, 64, 128, 256, 512, 1024])),
        vocab=draw(st.integers(1, 5000)), gated_mlp=draw(st.booleans()), tied_embeddings=draw(st.booleans()),
        norm=draw(st.sampled_from(["layernorm", "rmsnorm"])), bias=draw(st.booleans()),
        qkv_bias=draw(st.booleans()), learned_pos=draw(st.booleans()), max_seq=draw(st.integers(1, 4096)),
    )


#: The fuzz counts of pytest-xdist's workers (each runs some of the fuzz tests), added up by the controller.
_FUZZ_FROM_WORKERS: dict = {}


def _fuzz_counts() -> dict | None:
    """This process's fuzz counts (tests/test_fuzz.py's CALLS, RETURNED and SLOWEST), if it ran any."""
    import sys

    fuzz = sys.modules.get("test_fuzz")
    if fuzz is None or not fuzz.CALLS:
        return None
    return {"calls": dict(fuzz.CALLS), "returned": dict(fuzz.RETURNED), "slowest": list(fuzz.SLOWEST),
            "examples": fuzz.EXAMPLES, "limit": fuzz.CALL_LIMIT_S}


def pytest_sessionfinish(session):
    """An xdist worker hands its fuzz counts to the controller, which prints the totals.

    Then the cyclic garbage the tests left is collected, once, and what is still alive is frozen
    (``gc.freeze``): pytest's unraisable-exception check collects again at unconfigure and at its clean-up,
    each a full collection that walked everything the tests kept alive (the widgets, their figures, the plan
    caches: about 0.3 s per collection on a third of a worker's tests, more on a whole worker's), while the
    controller waited for the worker to end (suite43). The collection here runs the same finalisers,
    earlier, with pytest's hook still in place: an exception one raises is reported as before; pytest's own
    collections then walk only what was made after this one."""
    import gc

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and (counts := _fuzz_counts()) is not None:
        workeroutput["fuzz"] = counts
    gc.collect()
    gc.freeze()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    counts = getattr(node, "workeroutput", {}).get("fuzz")
    if not counts:
        return
    total = _FUZZ_FROM_WORKERS
    if not total:
        total.update(calls={}, returned={}, slowest=[0.0, 0.0, ""], examples=counts["examples"],
                     limit=counts["limit"])
    for key in ("calls", "returned"):
        for name, n in counts[key].items():
            total[key][name] = total[key].get(name, 0) + n
    if counts["slowest"][0] > total["slowest"][0]:
        total["slowest"] = list(counts["slowest"])


def pytest_terminal_summary(terminalreporter):
    """After a run that included tests/test_fuzz.py, say how many generated calls it made (``make fuzz``), in
    this process or, under pytest-xdist, in all the workers together."""
    fuzz = _fuzz_counts() or _FUZZ_FROM_WORKERS
    if not fuzz:
        return
    calls, returned = sum(fuzz["calls"].values()), sum(fuzz["returned"].values())
    terminalreporter.write_line(f"fuzz: {calls:,} generated calls over {len(fuzz['calls'])} functions "
                                f"({fuzz['examples']} examples each), {returned:,} returned a result, "
                                "the rest raised ValueError/TypeError/FileNotFoundError")
    cpu, wall, name = fuzz["slowest"]
    terminalreporter.write_line(f"fuzz: slowest call {name} ({cpu:.2f} s CPU, {wall:.2f} s wall; the limit "
                                f"is {fuzz['limit']:g} s CPU per call)")
    if terminalreporter.config.getoption("verbose") > 0:
        for name in sorted(fuzz["calls"]):
            terminalreporter.write_line(f"  {name:<32s}{fuzz['calls'][name]:>8,d} calls"
                                        f"{fuzz['returned'].get(name, 0):>8,d} returned")


def pooled_layout_factors() -> tuple[float, float]:
    """``(low, high)`` of the pooled ``training-layout`` row (group ``all``) of ``data/intervals.csv``, read
    from the file (not from the library): the 80% range an H100 in BF16 without a stack takes. The tests that
    price a plan's slow end by hand use it, so a refit (``tools/calibrate.py``) does not leave a stale literal
    behind (0.7273 / 1.2280 until the runs were priced on their nodes, nodes34; 0.7187 / 1.2032 after; 0.7222 /
    1.2044 since data27b's pytorch/ao H100 BF16 row)."""
    import csv

    with open(Path(__file__).resolve().parents[1] / "data" / "intervals.csv", newline="") as fh:
        row = next(r for r in csv.DictReader(fh) if r["area"] == "training-layout" and r["group"] == "all")
    return float(row["low"]), float(row["high"])
