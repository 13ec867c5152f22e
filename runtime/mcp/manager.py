"""`McpConnections`: the MCP servers of one session, and their tools in that session's registry.

Servers start in the background after the host has answered (`session/new` is never delayed by a slow or broken
server). Each server's tools are added to the session's own `ToolRegistry` when it is ready, so the next model call
sees them, and removed when it stops. Every failure becomes a notice in the session ("MCP server X failed to start:
…"); the other servers carry on. A turn that starts while servers are still starting waits for them, bounded by
`turn_wait` seconds from the servers' start (`wait_ready`), so a prompt sent right after `session/new` sees the tools
of servers that start reasonably fast, and a server that hangs delays at most the first turns, never all of them.

A server that announces a changed tool list (on a 2026-07-28 `subscriptions/listen` stream, or with an older
server's `notifications/tools/list_changed`) is listed again and its tools in the registry are replaced; the next
model call sees the new set, and a call already running keeps the tool it started with.

A server's elicitation requests go to the session's `UserAsker` (see `connection`); one that cannot be shown is
declined and said in the session ("MCP server X asked a question that could not be shown: …").

Mode and model changes do not touch connections; only `close` (session closed, agent exiting) ends them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel

from runtime import settings
from runtime.elicitation import UserAsker
from runtime.events import NoticeEvent
from runtime.mcp.config import ConfigProblem, ServerSpec, register_secrets
from runtime.mcp.connection import RemoteTool, ServerConnection
from runtime.mcp.naming import exposed_name
from runtime.mcp.tool import McpTool
from runtime.tools.base import ToolRegistry

log = logging.getLogger("gatewright.mcp")

Spawn = Callable[..., None]
Notify = Callable[[NoticeEvent], Awaitable[None]]

DEFAULT_START_TIMEOUT = 30.0
DEFAULT_TURN_WAIT = 10.0


class McpConnections:
    def __init__(
        self,
        *,
        registry: ToolRegistry,
        cwd: str,
        notify: Notify,
        spawn: Spawn,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        turn_wait: float = DEFAULT_TURN_WAIT,
        client_version: str = "0",
        asker: UserAsker | None = None,
    ) -> None:
        self.registry = registry
        self.asker = asker  # the session's way to ask the user: servers' elicitation requests go there
        self.cwd = cwd
        self.notify = notify
        self.spawn = spawn
        self.start_timeout = start_timeout
        self.turn_wait = turn_wait
        self.client_version = client_version
        self.connections: list[ServerConnection] = []
        self._tools: dict[str, list[str]] = {}  # server name -> exposed tool names
        self._closed = False

    # ---- starting ------------------------------------------------------------------------------------------------
    def start(self, specs: list[ServerSpec], problems: list[ConfigProblem]) -> None:
        """Start every server in the background and report every unusable entry. Returns at once."""
        for spec in specs:
            conn = ServerConnection(
                spec,
                cwd=self.cwd,
                events=self,
                start_timeout=self.start_timeout,
                client_version=self.client_version,
                asker=self.asker,
            )
            register_secrets(spec)
            self.connections.append(conn)
            self.spawn(self._run, conn)
        for problem in problems:
            self.spawn(self._report_problem, problem)

    async def _run(self, conn: ServerConnection) -> None:
        await _after_the_answer()
        if self._closed:
            return
        await conn.run()

    async def _report_problem(self, problem: ConfigProblem) -> None:
        await _after_the_answer()
        log.warning("MCP server %s was not started: %s", problem.name, problem.message)
        await self._notice(f"MCP server {problem.name} was not started", problem.message)

    # ---- ConnectionEvents ----------------------------------------------------------------------------------------
    async def on_ready(self, conn: ServerConnection, tools: list[RemoteTool]) -> None:
        if self._closed:
            return
        self._add_tools(conn, tools)

    async def on_tools_changed(self, conn: ServerConnection, tools: list[RemoteTool]) -> None:
        """The server's new tool list replaces its old one; the next model call sees it."""
        if self._closed or conn.state != "ready":
            return
        self._remove_tools(conn.name)
        self._add_tools(conn, tools)

    def _add_tools(self, conn: ServerConnection, tools: list[RemoteTool]) -> None:
        names: list[str] = []
        offered = {t.name for t in tools}
        for remote in tools:
            taken = set(self.registry.names())
            name = exposed_name(conn.name, remote.name, taken)
            self.registry.add(McpTool(name, conn, remote, conn.spec.pinned.get(remote.name)))
            names.append(name)
        self._tools[conn.name] = names
        for missing in sorted(set(conn.spec.pinned) - offered):
            log.warning("MCP server %s has no tool %r to pin arguments of", conn.name, missing)

    async def on_failed(self, conn: ServerConnection, reason: str) -> None:
        log.warning("MCP server %s failed to start: %s", conn.name, reason)
        await self._notice(f"MCP server {conn.name} failed to start", reason)

    async def on_stopped(self, conn: ServerConnection, reason: str) -> None:
        self._remove_tools(conn.name)
        log.warning("MCP server %s stopped: %s", conn.name, reason)
        await self._notice(f"MCP server {conn.name} stopped", f"{reason}; its tools are no longer available")

    async def on_question_declined(self, conn: ServerConnection, reason: str) -> None:
        await self._notice(
            f"MCP server {conn.name} asked a question that could not be shown", f"{reason}; it was declined"
        )

    def _remove_tools(self, server: str) -> None:
        for name in self._tools.pop(server, []):
            self.registry.remove(name)

    async def _notice(self, title: str, description: str) -> None:
        if not self._closed:
            await self.notify(NoticeEvent("warning", title, description))

    # ---- turns ---------------------------------------------------------------------------------------------------
    async def wait_ready(self) -> None:
        """Wait for servers still starting, at most until `turn_wait` seconds after their start."""
        pending = [c for c in self.connections if not c.settled.is_set()]
        if not pending:
            return
        deadline = max(c.started_at for c in pending) + self.turn_wait
        with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
            for conn in pending:
                await conn.settled.wait()

    def status(self) -> list[tuple[str, str, int]]:
        """(server, state, number of exposed tools) for every server, in configuration order."""
        return [(c.name, c.state, len(self._tools.get(c.name, []))) for c in self.connections]

    # ---- closing -------------------------------------------------------------------------------------------------
    async def close(self) -> None:
        """Close every connection at once (stdio servers' process groups are killed); bounded."""
        if self._closed:
            return
        self._closed = True
        for name in list(self._tools):
            self._remove_tools(name)
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for conn in self.connections:
                    tg.start_soon(conn.close)


async def _after_the_answer() -> None:
    # Background work is spawned from inside the `session/new` handler; the host enqueues the answer one scheduling
    # round after the handler returns. Yielding twice first keeps our first notice behind the answer, so the editor
    # knows the session id before it hears about it.
    for _ in range(3):
        await anyio.lowlevel.checkpoint()


def connect_kwargs() -> dict[str, Any]:
    """Timeouts from the environment (tests and slow machines): GATEWRIGHT_MCP_START_TIMEOUT, _TURN_WAIT, seconds."""
    checked = settings.current()
    pairs = (("start_timeout", "GATEWRIGHT_MCP_START_TIMEOUT"), ("turn_wait", "GATEWRIGHT_MCP_TURN_WAIT"))
    return {key: float(checked.get(name)) for key, name in pairs if checked.get(name) is not None}
