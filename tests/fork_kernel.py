"""A fork server of IPython kernels for `make test`'s nbval (tests/kernel_forks.py starts it; issue 32).

Every notebook of book/ runs in a fresh kernel, which pays Python's start-up, ipykernel's imports and then, in
its first cell, pandas, matplotlib and llmsizing's imports: up to 2.5 s CPU of the same work 22 times. Here
one process per pytest worker (``serve``) imports all that once, then forks a child for each kernel asked of
it; the child is a fresh kernel (its own session, connection file, working directory and environment, numpy's
random state re-seeded) that starts from the imports already made. Nothing is created before the fork but
imported modules: no zmq context, no event loop, no Python thread (ipykernel makes those in the child;
numpy's OpenBLAS pool is the one other thread, and OpenBLAS handles a fork itself).

``launch SOCKET -f CONNECTION_FILE`` is the kernel's command (its kernelspec's argv): a small process that
hands the request, its working directory, environment and standard streams to the server, forwards
SIGINT/SIGTERM to the child, and exits with the child's exit code. jupyter_client sees it as the kernel
process; killing it (nbval stops kernels with SIGKILL) makes the server kill the child. With no server (none
started, or it stopped) the launcher becomes a normal kernel (``python -m ipykernel_launcher``), so the tests
run either way.

Only the standard library is imported at the top: the launcher stays cheap.
"""

import json
import os
import signal
import socket
import sys

#: What every kernel would import (ipykernel itself; 17 to 22 notebooks import these in their first cell).
PRELOAD = ("ipykernel.kernelapp", "pandas", "matplotlib.pyplot", "llmsizing", "llmsizing.prose",
           "llmsizing.charts", "ipywidgets", "llmsizing.widgets")
INLINE = "module://matplotlib_inline.backend_inline"
#: What the server's import of ipykernel's debugger set in the environment: each kernel sets it (serve).
_IMPORT_ENV: dict[str, str] = {}


# ------------------------------------------------------------------------- the launcher (the kernel's argv)
def launch(path: str, argv: list[str]) -> None:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(path)
    except OSError:                 # no server: this process becomes the kernel jupyter_client asked for
        client.close()
        os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *argv])
    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode() + b"\n"
    socket.send_fds(client, [request], [0, 1, 2])
    stream = client.makefile("rb")
    line = stream.readline()
    if not line:
        sys.exit(1)
    child = int(line)

    def forward(signum, frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, forward)
    line = stream.readline()        # the child's exit code, when it ends
    sys.exit(int(line) if line.strip() else 1)


# ----------------------------------------------------------------------------- the server
class _InKernel:
    """What the preloaded modules see of IPython while imported (:func:`serve`): a shell with a kernel."""
    kernel = True


def _child(conn: socket.socket, request: dict, fds: list[int], others: list) -> None:
    """In the forked child: become the kernel of ``request``; never returns."""
    code = 1
    try:
        os.setsid()                 # as jupyter_client starts a kernel: its own session and process group
        for sock in others:
            sock.close()
        conn.close()
        for signum in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for key, value in _IMPORT_ENV.items():     # (only if unset, as the import does)
            os.environ.setdefault(key, value)
        if "numpy" in sys.modules:  # forks share the server's random state: a fresh seed, as a new process
            sys.modules["numpy"].random.seed()
        import ipykernel_launcher   # noqa: F401  (the file a normal kernel runs, for sys.argv[0])
        from ipykernel.kernelapp import IPKernelApp

        sys.argv = [ipykernel_launcher.__file__, *request["argv"]]
        app = IPKernelApp.instance()
        app.initialize([*request["argv"], f"--IPKernelApp.parent_handle={os.getppid()}"])
        if "ipywidgets" in sys.modules:     # what ipywidgets does when imported in a kernel: its comm targets
            sys.modules["ipywidgets"]._handle_ipython()
        app.start()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(path: str) -> None:
    import selectors
    import time

    parent = os.getppid()
    del sys.path[0]                 # this file's folder: a kernel's path has neither it nor its cwd
    os.environ.setdefault("MPLBACKEND", INLINE)     # as ipykernel sets it before anything imports matplotlib
    import builtins
    import importlib

    # Imported as from a kernel's cell: there, IPython has put ``get_ipython`` in the builtins, returning a
    # shell with a ``kernel``. pandas reads it once, at import (pandas.core.config_init.is_terminal: a kernel
    # gets ``display.max_columns`` 20, a terminal 0). No other module imported here reads it while imported.
    builtins.get_ipython = lambda: _InKernel
    try:
        for name in PRELOAD:
            importlib.import_module(name)
    finally:
        del builtins.get_ipython
    # ipykernel imports its debugger (debugpy and pydevd, about 0.17 s CPU) in every kernel, when the kernel
    # object is made: imported here once. PYDEVD_DISABLE_FILE_VALIDATION is set only while it is imported, so
    # that pydevd's import-time note on frozen modules (a normal kernel writes it to its stderr stream, never
    # in a cell) is not logged here: pydevd's log stream is then set on first use, in the kernel, to the
    # kernel's stderr stream, the one a normal kernel's import gives it. pydevd reads no other setting that
    # differs here: a kernel's environment is this worker's (the other PYDEVD_* variables are unset). What
    # the import puts in the environment (debugpy's PYDEVD_USE_FRAME_EVAL=NO, when unset) each kernel puts in
    # its own (:data:`_IMPORT_ENV`), as its import would have.
    import itertools
    import threading

    validation = os.environ.pop("PYDEVD_DISABLE_FILE_VALIDATION", None)
    before, number = dict(os.environ), threading._counter()    # the next thread's number (Thread-N)
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    try:
        importlib.import_module("ipykernel.debugger")
    finally:
        # the import's Thread object took a number: the threads a kernel starts are numbered as in a new one
        threading._counter = itertools.count(number).__next__
        del os.environ["PYDEVD_DISABLE_FILE_VALIDATION"]
        _IMPORT_ENV.update((k, v) for k, v in os.environ.items() if k not in before)
        if validation is not None:
            os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = validation
    import gc
    gc.freeze()     # what is imported is never collected: a child's collections do not walk (and copy) it

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}         # pid -> the launcher's connection
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # a Ctrl-C of the terminal: pytest decides
    print("ready", flush=True)
    sys.stdout = open(os.devnull, "w")

    def kill(pid: int) -> None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass

    while not stopping and os.getppid() == parent:
        for key, _ in sel.select(timeout=0.5):
            sock = key.fileobj
            if sock is listener:
                conn, _ = listener.accept()
                data, fds = b"", []
                while not data.endswith(b"\n"):
                    chunk, got, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                    if not chunk:
                        break
                    data, fds = data + chunk, fds + list(got)
                if len(fds) != 3 or not data.endswith(b"\n"):
                    conn.close()
                    for fd in fds:
                        os.close(fd)
                    continue
                request = json.loads(data)
                pid = os.fork()
                if pid == 0:
                    _child(conn, request, fds, [listener, *children.values()])
                for fd in fds:
                    os.close(fd)
                conn.sendall(b"%d\n" % pid)
                children[pid] = conn
                sel.register(conn, selectors.EVENT_READ, pid)
            elif not sock.recv(1):              # the launcher is gone (killed): so is its kernel
                kill(key.data)
                sel.unregister(sock)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                try:
                    conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
                except OSError:
                    pass
                if conn.fileno() >= 0:
                    try:
                        sel.unregister(conn)
                    except (KeyError, ValueError):
                        pass
                conn.close()
    for pid in children:
        kill(pid)
    deadline = time.monotonic() + 5
    while children and time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        children.pop(pid, None) if pid else time.sleep(0.05)
    for remove in (os.unlink, os.rmdir):      # the socket, then its folder (if nothing else is in it)
        try:
            remove(path)
        except OSError:
            pass
        path = os.path.dirname(path)


if __name__ == "__main__":
    if sys.argv[1] == "launch":
        launch(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        sys.exit(f"usage: {sys.argv[0]} launch SOCKET -f CONNECTION_FILE | serve SOCKET")
