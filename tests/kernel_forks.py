"""pytest plugin for `make test` (``-p tests.kernel_forks``): nbval's kernels are forked from a process that
has made their imports once (tests/fork_kernel.py), instead of each starting from nothing (issue 32).

With ``--nbval-current-env`` nbval asks jupyter_client for its ``:nbval-parent-env`` kernel, ipykernel's own
kernelspec (``python -m ipykernel_launcher -f {connection_file}``). Here that kernelspec's command is
tests/fork_kernel.py's launcher instead, pointed at this process's fork server, which is started when the
first notebook asks for a kernel (a worker that runs no notebook starts none) and stopped when pytest ends.
Each kernel is still a fresh process with its own connection file, working folder and environment; the
notebooks' outputs are compared by nbval as strictly as ever. If the server cannot start, the kernelspec is
left as it is.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_SCRIPT = Path(__file__).resolve().with_name("fork_kernel.py")
_server: dict = {}


def _start() -> str | None:
    """The fork server's socket (started on first use; None if it could not start)."""
    if "path" in _server:
        return _server["path"]
    _server["path"] = None
    folder = tempfile.mkdtemp(prefix="kernel-forks-")
    path = os.path.join(folder, "socket")
    proc = subprocess.Popen([sys.executable, str(_SCRIPT), "serve", path], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, start_new_session=True)
    _server.update(proc=proc, folder=folder)
    if proc.stdout.readline().strip() == b"ready":     # after its imports (a few seconds)
        _server["path"] = path
    else:
        _stop()
    return _server["path"]


def _stop() -> None:
    proc = _server.get("proc")
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    if _server.get("folder"):
        shutil.rmtree(_server["folder"], ignore_errors=True)
    _server.clear()
    _server["path"] = None


def pytest_configure(config):
    try:
        from nbval import kernel
    except ImportError:
        return
    own = kernel.NbvalKernelspecManager.get_kernel_spec

    def get_kernel_spec(self, kernel_name):
        spec = own(self, kernel_name)
        if kernel_name == kernel.CURRENT_ENV_KERNEL_NAME and (path := _start()):
            spec.argv = [sys.executable, "-S", str(_SCRIPT), "launch", path, "-f", "{connection_file}"]
        return spec

    kernel.NbvalKernelspecManager.get_kernel_spec = get_kernel_spec


def pytest_unconfigure(config):
    if _server:
        _stop()
