"""MCP servers from the editor: connected per session, their tools behind the same approval as the built-ins.

The pieces: `config` (the `mcpServers` entries and their secrets), `pinning` (server-bound arguments), `naming`
(`mcp__<server>__<tool>`), `stdio` (the child-process transport), `connection` (one server), `tool` (an MCP tool as a
`Tool`), `manager` (the servers of one session). This package never imports the `mcp` SDK at import time (it costs
over a second); only a session that has servers pays for it, in the background.

Host entry points: `connect_servers(session, servers)` starts (or restarts, on load/resume) a session's servers and
returns at once; `session.mcp.close()` ends them.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from runtime.mcp.config import ConfigProblem, HttpServer, ServerSpec, StdioServer, parse_servers, session_context
from runtime.mcp.manager import McpConnections, connect_kwargs
from runtime.version import __version__

if TYPE_CHECKING:
    from runtime.events import RuntimeEvent
    from runtime.loop import AgentRuntime
    from runtime.mcp.manager import McpConnections
    from runtime.tools.base import ToolRegistry

__all__ = [
    "ConfigProblem",
    "HttpServer",
    "ServerSpec",
    "StdioServer",
    "close_servers",
    "connect_servers",
    "parse_servers",
]


class McpSession(Protocol):
    """What `close_servers` needs of a session (`runtime.Session` has it): its servers, and the runtime whose turns
    wait for them."""

    mcp: McpConnections | None

    @property
    def runtime(self) -> AgentRuntime: ...


class TaskStarter(Protocol):
    """Runs background work for as long as the host's connection lives (`acp_server.rpc.JsonRpcConnection`)."""

    def start_soon(self, func: Callable[..., Coroutine[Any, Any, object]], *args: Any) -> None: ...


class McpHost(McpSession, Protocol):
    """What `connect_servers` needs of a session (the ACP host's `AcpSession` has all of it)."""

    @property
    def id(self) -> str: ...

    @property
    def cwd(self) -> str: ...

    @property
    def registry(self) -> ToolRegistry: ...

    @property
    def conn(self) -> TaskStarter: ...

    async def emit(self, ev: RuntimeEvent) -> None: ...


async def connect_servers(session: McpHost, servers: list[Any]) -> None:
    """Start the session's MCP servers in the background (replacing any it had) and return without waiting.

    Also makes every turn of the session wait, bounded, for servers still starting (see `McpConnections.wait_ready`).
    """
    await close_servers(session)
    specs, problems = parse_servers(servers, session_context(session.id, session.cwd))
    if not specs and not problems:
        return
    manager = McpConnections(
        registry=session.registry,
        cwd=session.cwd,
        notify=session.emit,
        spawn=session.conn.start_soon,
        client_version=__version__,
        asker=session.runtime.env.asker,
        **connect_kwargs(),
    )
    session.mcp = manager
    hooks = session.runtime.before_turn
    if manager.wait_ready not in hooks:
        hooks.append(manager.wait_ready)
    manager.start(specs, problems)


async def close_servers(session: McpSession) -> None:
    """Close the session's MCP servers, if any (idempotent)."""
    manager = session.mcp
    if manager is None:
        return
    session.mcp = None
    hooks = session.runtime.before_turn
    if manager.wait_ready in hooks:
        hooks.remove(manager.wait_ready)
    await manager.close()
