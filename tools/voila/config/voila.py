"""Voila configuration for ``make app`` (tools/serve_live.py passes ``--Voila.config_file_paths`` to this folder).

* ``prelaunch_hook``: the chapter's MyST prose as Markdown with the kernel's numbers (tools/voila/myst_voila.py).
* ``extension_denylist``: the venv holds jupyterlab-myst, jupytext's and JupyterLite's Pyodide kernel
  extensions (for ``make lab`` and the lite build). Voila's page cannot load them (each logged an error in the
  browser console: a missing shared module ``@jupyterlab/markdownviewer``, a missing ``@jupyterlab/docmanager``,
  a missing ``LicensesClient``) and the app needs none of them. (An allowlist of the widgets' extension alone
  drops the provider of its widget registry, so it is a denylist.)
* Kernels are freed (issue 38: each page load, reload or followed link left a kernel of about 141 MiB, and
  10 loads held 1.41 GiB):

  - when the page goes, Voila's page sends ``POST /voila/api/shutdown/<kernel>`` with the ``_xsrf`` cookie's
    value, but Voila 0.5's notebook page never sets that cookie (only its tree page does), so every shutdown
    got ``403 '_xsrf' argument missing from POST`` (voila-dashboards/voila#1458, open). :func:`_set_xsrf_cookie`
    makes the notebook page set it (tornado sets the cookie when a handler first reads ``xsrf_token``): the
    check itself stays on;
  - when the page's kernel WebSocket closes and no page connects again within :data:`CLOSE_GRACE_S`, the
    kernel is shut down (``LiveKernelManager.shutdown_after_last_close_s``, tools/live/live_kernels.py): a
    browser may drop the unload beacon (headless Chromium under Playwright's request interception did, every
    time), but it always closes the page's WebSocket, and a Voila kernel belongs to one page load; a
    WebSocket that only dropped reconnects within a few seconds (the page retries after 0-1, 0-3, 0-7 s);
  - when no page ever connected to the kernel and it has been idle, without activity, for
    :data:`UNCONNECTED_GRACE_S` (``LiveKernelManager.shutdown_unconnected_after_s``): its page went before its
    WebSocket opened (left at its load event, or while the chapter ran), so no WebSocket closed and the
    timer above never started; the kernel stayed until the culler (voila45: 2 of 2 pages left at their load
    event). A busy kernel is still running the chapter for its page and is kept; a page that loaded connects
    within seconds of the chapter's last activity (0.7-1.5 s in 12 loads of chapter 4b under a load of 1-6,
    voila45), so the grace is wide. And a WebSocket that closed while it was still being prepared no longer
    makes a page's later close look like a connection still open (``LiveKernelManager.notify_disconnect``;
    voila45 saw it once in 7 loaded runs). Either could have kept the kernel of the fresh-clone `make
    check-live` run whose closed page held its kernel 30 s (session 44);
  - as a backstop (a tab that crashed, a laptop that slept, a browser that dropped the beacon), idle kernels
    are culled with the kernel manager of ``make serve-live`` (tools/live/live_kernels.py): a kernel no page is
    connected to after :data:`CULL_IDLE_TIMEOUT_S` without activity, one whose page is still open after
    :data:`CULL_CONNECTED_IDLE_TIMEOUT_S`; a busy kernel (a cell still running) never.

* So a page can outlive its kernel (culled, or shut down after its connection was away CLOSE_GRACE_S, e.g. a
  laptop that slept), and a kernel process can exit on its own (jupyter_client then restarts it, empty, under
  the same id: it holds none of the page's widgets). The page then says, at its top, that the kernel stopped
  and to reload (templates/book/index.html.j2; issue 38, voila38: before, the controls moved and nothing
  redrew, with no word why), and the log names the exit status of a process that exited
  (``LiveKernelManager.start_kernel``).

* A Voila kernel sends no ``echo_update`` (``JUPYTER_WIDGETS_ECHO=0`` in its environment, unless set already;
  ipywidgets 8's ``widget.py``): the echo tells every other front end of the kernel about a value one of them
  set, and a Voila kernel has one page. It was one message of every move, handled by the page's widget
  manager and changing nothing (lat37, tests/browser/trace_moves.py: chapter 17's moves got 7 and 5
  messages, now 5 and 4). The page's widget manager drops only echoes it waits for; plain updates are
  untouched (``_handle_comm_msg`` of @jupyter-widgets/base 6).

* The page's kernel WebSocket sends each message at once (TCP_NODELAY, ``live_kernels.send_without_delay``):
  a widget's small messages right behind its figure were held by Nagle's algorithm, up to ~40 ms now and
  then (issue 38, page30).
"""

import importlib.util
import os
from pathlib import Path

_TOOLS = Path(__file__).resolve().parent.parent.parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


myst_voila = _load("myst_voila", _TOOLS / "voila" / "myst_voila.py")
live_kernels = _load("live_kernels", _TOOLS / "live" / "live_kernels.py")

#: Voila's culling (seconds): a kernel whose page has gone, one whose page is open but idle, and how often to look
CULL_IDLE_TIMEOUT_S = 120
CULL_CONNECTED_IDLE_TIMEOUT_S = 3600
CULL_INTERVAL_S = 30
#: Seconds after a kernel's last page WebSocket closed before it is shut down (unless a page reconnects)
CLOSE_GRACE_S = 10
#: Seconds a kernel no page has connected to may stay idle, without activity, before it is shut down (its page
#: went before its WebSocket opened; a page connects within seconds of its chapter's last cell)
UNCONNECTED_GRACE_S = 20


def _set_xsrf_cookie(handler_class):
    """Make ``handler_class`` (Voila's notebook page) set the ``_xsrf`` cookie that the page's shutdown beacon
    sends back. Idempotent."""
    if getattr(handler_class.prepare, "book_xsrf", False):
        return handler_class
    original = handler_class.prepare

    async def prepare(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if hasattr(result, "__await__"):
            result = await result
        self.xsrf_token          # tornado sets the _xsrf cookie on first access
        return result

    prepare.book_xsrf = True
    handler_class.prepare = prepare
    return handler_class


from voila.handler import VoilaHandler  # noqa: E402  (Voila is importable wherever this file is loaded)

_set_xsrf_cookie(VoilaHandler)

from voila.tornado.kernel_websocket_handler import VoilaKernelWebsocketHandler  # noqa: E402

live_kernels.send_without_delay(VoilaKernelWebsocketHandler)

#: no echo_update from a Voila kernel (its one page set the value; see the module's docstring)
os.environ.setdefault("JUPYTER_WIDGETS_ECHO", "0")

c = get_config()  # noqa: F821  (defined by traitlets when it loads this file)
c.VoilaConfiguration.prelaunch_hook = myst_voila.prelaunch_hook
c.VoilaConfiguration.extension_denylist = ["jupyterlab-myst", "jupyterlab-jupytext", "@jupyterlite/pyodide-kernel-extension"]
c.VoilaConfiguration.multi_kernel_manager_class = live_kernels.LiveKernelManager
c.MappingKernelManager.cull_idle_timeout = CULL_IDLE_TIMEOUT_S
c.MappingKernelManager.cull_interval = CULL_INTERVAL_S
c.MappingKernelManager.cull_connected = True
c.MappingKernelManager.cull_busy = False
c.LiveKernelManager.cull_connected_idle_timeout = CULL_CONNECTED_IDLE_TIMEOUT_S
c.LiveKernelManager.shutdown_after_last_close_s = CLOSE_GRACE_S
c.LiveKernelManager.shutdown_unconnected_after_s = UNCONNECTED_GRACE_S
