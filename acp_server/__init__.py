"""gatewright's ACP host: stdio framing, JSON-RPC, ACP methods, sessions, the CLI entry point.

The modules that `gatewright acp` needs only after it has answered `initialize` (the connection, the method table and
its wire models), and those of the other subcommands, are lazy attributes of this package (`permissions.lazy`, the one
deferral mechanism): the start-up modules do `import acp_server` and use `acp_server.rpc.JsonRpcConnection`.
"""

from __future__ import annotations

from permissions.lazy import deferred
from runtime.version import __version__

TYPE_CHECKING = False  # without importing typing, as in `runtime/__init__.py`
if TYPE_CHECKING:
    from acp_server import demo as demo
    from acp_server import dispatch as dispatch
    from acp_server import replay as replay
    from acp_server import rpc as rpc
    from acp_server import server as server
    from acp_server import transcript_view as transcript_view

__all__ = ["__version__"]

# Submodules loaded on first use by the modules that defer them (not re-exported names).
_SUBMODULES = ("demo", "dispatch", "replay", "rpc", "server", "transcript_view")

_LAZY: dict[str, str | tuple[str, str]] = {name: f"acp_server.{name}" for name in _SUBMODULES}

if not TYPE_CHECKING:
    __getattr__ = deferred(globals(), _LAZY)
