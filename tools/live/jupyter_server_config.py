"""Jupyter server configuration for ``make serve-live`` (tools/serve_live.py passes it with ``--config``).

Kernels are culled (tools/live/live_kernels.py): 10 minutes after the last activity when no page is connected,
2 hours when one still is; a running cell is never interrupted. The token is not set here nor on the command
line: serve_live.py passes it in the server's environment (``JUPYTER_TOKEN``), so ``ps`` does not show it.
"""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("live_kernels", Path(__file__).resolve().parent / "live_kernels.py")
live_kernels = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(live_kernels)

from jupyter_server.services.kernels.websocket import KernelWebsocketHandler  # noqa: E402

live_kernels.send_without_delay(KernelWebsocketHandler)      # TCP_NODELAY, as in Voila and the lab (page30)

c = get_config()  # noqa: F821  (defined by traitlets when it loads this file)
c.ServerApp.kernel_manager_class = live_kernels.LiveKernelManager
c.MappingKernelManager.cull_idle_timeout = live_kernels.CULL_IDLE_TIMEOUT_S
c.MappingKernelManager.cull_interval = live_kernels.CULL_INTERVAL_S
c.MappingKernelManager.cull_connected = True      # connected kernels too, but after cull_connected_idle_timeout
c.MappingKernelManager.cull_busy = False
c.LiveKernelManager.cull_connected_idle_timeout = live_kernels.CULL_CONNECTED_IDLE_TIMEOUT_S
