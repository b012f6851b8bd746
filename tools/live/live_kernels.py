"""Kernel culling for ``make serve-live`` (tools/serve_live.py; loaded by tools/live/jupyter_server_config.py).

Each chapter a reader opens with "Live code" starts a kernel (140-155 MB each, issue 25). Without culling they
all live until the server stops. jupyter_server culls idle kernels (``MappingKernelManager.cull_idle_timeout``)
but has one timeout for every kernel; here there are two:

* a kernel with no page connected (the reader went on to another chapter, or closed the tab) is shut down
  after ``cull_idle_timeout`` seconds without activity (10 minutes);
* a kernel whose page is still open is shut down only after ``cull_connected_idle_timeout`` seconds without
  activity (2 hours): a reader who pauses over a chapter keeps their kernel, a tab forgotten overnight does not.

A busy kernel (a cell running) is never culled. The server checks every ``cull_interval`` seconds (60).

``shutdown_after_last_close_s`` (off here; ``make app``'s Voila sets it, tools/voila/config/voila.py): a
kernel whose last page WebSocket closed is shut down that many seconds later unless a page connects again (a
WebSocket that dropped reconnects within seconds). A Voila kernel belongs to one page load, so this frees it
when its page goes even if the browser never sends the page's shutdown beacon (issue 38).

``shutdown_unconnected_after_s`` (off here; Voila sets it): a kernel no page has connected to yet is shut down
once it has been that many seconds idle, without activity (a Voila kernel runs its chapter for its page, then
the page connects within seconds): the page went before its WebSocket opened, so no close ever armed the timer
above (issue 38, voila45: a page left at its load event kept its kernel until the culler, 2 of 2).
"""

from __future__ import annotations

from datetime import timedelta

from jupyter_server._tz import utcnow
from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
from jupyter_server.utils import ensure_async
from tornado.ioloop import IOLoop
from traitlets import Dict, Float, Integer

#: serve-live's culling settings (also what tests/test_live_setup.py checks)
CULL_IDLE_TIMEOUT_S = 600
CULL_CONNECTED_IDLE_TIMEOUT_S = 7200
CULL_INTERVAL_S = 60


def send_without_delay(handler_class):
    """Make ``handler_class`` (a kernel WebSocket handler: jupyter_server's ``KernelWebsocketHandler`` or
    Voila's subclass) send each message at once: TCP_NODELAY on the connection when it opens (tornado's
    ``WebSocketHandler.set_nodelay``, whose documentation names the cause: Nagle's algorithm holds a small
    write while an earlier one is unacknowledged, and the receiver's delayed ACK can make that ~40 ms).
    jupyter_server never sets it, and a widget's move sends small messages back to back (the summary and
    the busy mark right behind the figure; status, echo and busy mark at its start). Issue 38 (page30):
    tornado on 127.0.0.1 to headless Chromium, a frame followed at once by two small ones: the p90 wait for
    the next one was 41-45 ms without the flag and 1.3-1.9 ms with it. Idempotent."""
    if getattr(handler_class.open, "book_nodelay", False):
        return handler_class
    original = handler_class.open

    async def open(self, *args, **kwargs):
        self.set_nodelay(True)
        result = original(self, *args, **kwargs)
        if hasattr(result, "__await__"):
            result = await result
        return result

    open.book_nodelay = True
    handler_class.open = open
    return handler_class


def should_cull(idle_s: float, connections: int, busy: bool, idle_timeout_s: float,
                connected_idle_timeout_s: float) -> bool:
    """Whether a kernel idle for ``idle_s`` seconds with ``connections`` open pages is culled."""
    if busy:
        return False
    return idle_s > (connected_idle_timeout_s if connections else idle_timeout_s)


def unconnected_wait_s(idle_s: float, busy: bool, grace_s: float) -> float:
    """Seconds until a kernel no page has connected to is looked at again; 0: shut it down now. It is shut
    down once idle (not busy) without activity for ``grace_s``: a busy kernel is still running its page's
    chapter, and a kernel with recent activity has just finished it (its page connects next)."""
    if grace_s <= 0:
        raise ValueError(f"grace_s must be > 0 seconds, got {grace_s}")
    if busy:
        return grace_s
    return 0.0 if idle_s >= grace_s else grace_s - idle_s


def exit_reason(code) -> str:
    """A process's exit status as a reader can look it up: ``signal 9 (SIGKILL)``, ``status 1``."""
    import signal

    if code is None:
        return "an unknown status"
    if code < 0:
        try:
            return f"signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"signal {-code}"
    return f"status {code}"


class LiveKernelManager(AsyncMappingKernelManager):
    """jupyter_server's kernel manager with a longer idle timeout for kernels a page is still connected to."""

    cull_connected_idle_timeout = Integer(
        CULL_CONNECTED_IDLE_TIMEOUT_S, config=True,
        help="Seconds without activity after which a kernel that a page is still connected to is culled "
             "(kernels without a connection use cull_idle_timeout).")

    shutdown_after_last_close_s = Float(
        0, config=True,
        help="Seconds after its last WebSocket closed that a kernel no page reconnected to is shut down "
             "(0: never; culling still applies).")
    shutdown_unconnected_after_s = Float(
        0, config=True,
        help="Seconds idle, without activity, after which a kernel no page has connected to yet is shut down "
             "(0: never; culling still applies).")
    _orphan_timers = Dict()      # kernel id -> the IOLoop timeout of its pending shutdown
    _unconnected_timers = Dict()     # kernel id -> the IOLoop timeout of its next look (no page yet)

    async def start_kernel(self, *args, **kwargs):
        """Start a kernel as jupyter_server does; when its process exits on its own (jupyter_client's restarter
        then starts it again, empty, under the same id), the log says which process and with what status."""
        kernel_id = await super().start_kernel(*args, **kwargs)
        kernel = self._kernels.get(kernel_id)
        if kernel is not None and not getattr(kernel, "book_exit_logged", False):
            kernel.book_exit_logged = True

            def exited():
                provisioner = kernel.provisioner
                process = getattr(provisioner, "process", None)
                self.log.warning("Kernel %s: its process %s exited with %s.", kernel_id,
                                 getattr(provisioner, "pid", None),
                                 exit_reason(None if process is None else process.returncode))

            kernel.add_restart_callback(exited, "restart")
        if self.shutdown_unconnected_after_s > 0 and self._kernel_connections.get(kernel_id) == 0 \
                and kernel_id not in self._unconnected_timers:
            self._look_unconnected_in(kernel_id, self.shutdown_unconnected_after_s)
        return kernel_id

    def notify_connect(self, kernel_id):
        super().notify_connect(kernel_id)
        self._cancel_orphan_shutdown(kernel_id)
        timer = self._unconnected_timers.pop(kernel_id, None)
        if timer is not None:
            IOLoop.current().remove_timeout(timer)

    def notify_disconnect(self, kernel_id):
        super().notify_disconnect(kernel_id)
        if self._kernel_connections.get(kernel_id, 0) < 0:
            # jupyter_server's WebSocket handler disconnects on close even when it closed while still being
            # prepared, before connect() counted it (seen under load, voila45: a reloaded page's first
            # WebSocket). Left at -1, the page's real connection counted 0 and its close -1: the timer never
            # ran and the culler took the kernel for connected (an hour). The count stays -1 until
            # jupyter_server's disconnect has finished (at 0 it would buffer the channels this connection
            # never opened, and the page's next connection, restoring them, would fail), then goes back to 0.
            self.log.warning("Kernel %s: a WebSocket closed before it connected.", kernel_id)
            IOLoop.current().add_callback(self._uncount_unopened, kernel_id)
            return
        if self.shutdown_after_last_close_s > 0 and self._kernel_connections.get(kernel_id) == 0:
            self._cancel_orphan_shutdown(kernel_id)
            self._orphan_timers[kernel_id] = IOLoop.current().call_later(
                self.shutdown_after_last_close_s, self._shutdown_orphan, kernel_id)

    def _uncount_unopened(self, kernel_id):
        if self._kernel_connections.get(kernel_id, 0) < 0:
            self._kernel_connections[kernel_id] += 1

    def _cancel_orphan_shutdown(self, kernel_id):
        timer = self._orphan_timers.pop(kernel_id, None)
        if timer is not None:
            IOLoop.current().remove_timeout(timer)

    async def _shutdown_orphan(self, kernel_id):
        """Shut ``kernel_id`` down if no page is connected yet (its beacon may have shut it down already)."""
        self._orphan_timers.pop(kernel_id, None)
        if self._kernel_connections.get(kernel_id) != 0 or kernel_id not in self:
            return
        self.log.warning("Shutting down kernel %s: no page connected for %g s after its last one closed.",
                         kernel_id, self.shutdown_after_last_close_s)
        try:
            await ensure_async(self.shutdown_kernel(kernel_id))
        except KeyError:        # shut down meanwhile (the page's beacon, the culler)
            pass

    def _look_unconnected_in(self, kernel_id, delay_s):
        self._unconnected_timers[kernel_id] = IOLoop.current().call_later(
            delay_s, self._shutdown_unconnected, kernel_id)

    async def _shutdown_unconnected(self, kernel_id):
        """Shut ``kernel_id`` down if no page has connected to it and it has been idle, without activity, for
        ``shutdown_unconnected_after_s`` (:func:`unconnected_wait_s`); otherwise look again later."""
        self._unconnected_timers.pop(kernel_id, None)
        kernel = self._kernels.get(kernel_id)
        if kernel is None or self._kernel_connections.get(kernel_id) != 0:
            return
        last = getattr(kernel, "last_activity", None)
        idle_s = (utcnow() - last) / timedelta(seconds=1) if last is not None else 0.0
        busy = getattr(kernel, "execution_state", None) in ("busy", "starting")
        wait_s = unconnected_wait_s(idle_s, busy, self.shutdown_unconnected_after_s)
        if wait_s > 0:
            self._look_unconnected_in(kernel_id, wait_s)
            return
        self.log.warning("Shutting down kernel %s: no page connected to it, %d s without activity.",
                         kernel_id, idle_s)
        try:
            await ensure_async(self.shutdown_kernel(kernel_id))
        except KeyError:        # shut down meanwhile (the page's beacon, the culler)
            pass

    async def cull_kernel_if_idle(self, kernel_id):
        kernel = self._kernels.get(kernel_id)
        if (kernel is None or getattr(kernel, "execution_state", None) == "dead"
                or not hasattr(kernel, "last_activity")):
            return await super().cull_kernel_if_idle(kernel_id)
        idle_s = (utcnow() - kernel.last_activity) / timedelta(seconds=1)
        connections = self._kernel_connections.get(kernel_id, 0)
        busy = kernel.execution_state == "busy"
        if should_cull(idle_s, connections, busy, self.cull_idle_timeout, self.cull_connected_idle_timeout):
            self.log.warning("Culling kernel %s (%s) after %d s without activity, %d page(s) connected.",
                             kernel.kernel_name, kernel_id, idle_s, connections)
            await ensure_async(self.shutdown_kernel(kernel_id))
