"""Shared helpers for the MCP tests: entries for the test servers, and a session-less harness around McpConnections."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio

from runtime.events import NoticeEvent
from runtime.mcp.config import parse_servers, session_context
from runtime.mcp.manager import McpConnections
from runtime.tools.base import ToolContext, ToolRegistry, ToolResult
from runtime.workspace import Workspace

SERVERS = Path(__file__).resolve().parents[1] / "mcp_servers"
TOOLS_SERVER = str(SERVERS / "tools_server.py")
HTTP_SERVER = str(SERVERS / "http_server.py")


def stdio_entry(name: str, env: dict[str, str] | None = None, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "command": sys.executable,
        "args": [TOOLS_SERVER],
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
    }
    if meta is not None:
        entry["_meta"] = meta
    return entry


def broken_entry(name: str, message: str = "bad config", code: int = 3) -> dict[str, Any]:
    script = f"import sys; sys.stderr.write({message!r} + '\\n'); sys.exit({code})"
    return {"name": name, "command": sys.executable, "args": ["-c", script], "env": []}


@contextlib.contextmanager
def http_server(kind: str) -> Iterator[str]:
    """Run http_server.py (`http` or `sse`) and yield its URL."""
    proc = subprocess.Popen(
        [sys.executable, HTTP_SERVER, kind], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/mcp" if kind == "http" else f"http://127.0.0.1:{port}/sse"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


class Harness:
    """McpConnections wired to a plain registry, with the notices it sends recorded."""

    def __init__(self, tg: Any, cwd: str, **kwargs: Any) -> None:
        self.registry = ToolRegistry()
        self.notices: list[NoticeEvent] = []
        self.cwd = cwd
        kwargs.setdefault("start_timeout", 30.0)
        kwargs.setdefault("turn_wait", 30.0)
        self.manager = McpConnections(
            registry=self.registry, cwd=cwd, notify=self._notify, spawn=tg.start_soon, **kwargs
        )
        self.notice_arrived = anyio.Event()

    async def _notify(self, ev: NoticeEvent) -> None:
        self.notices.append(ev)
        self.notice_arrived.set()

    def start(self, entries: list[dict[str, Any]]) -> None:
        specs, problems = parse_servers(entries, session_context("sess_test", self.cwd))
        self.manager.start(specs, problems)

    async def ready(self) -> None:
        await self.manager.wait_ready()

    async def wait_notices(self, n: int, seconds: float = 20.0) -> list[NoticeEvent]:
        with anyio.fail_after(seconds):
            while len(self.notices) < n:
                self.notice_arrived = anyio.Event()
                await self.notice_arrived.wait()
        return self.notices

    def ctx(self, progress: list[ToolResult] | None = None) -> ToolContext:
        async def on_progress(r: ToolResult) -> None:
            if progress is not None:
                progress.append(r)

        return ToolContext("sess_test", "call_1", Workspace(self.cwd, []), progress=on_progress)

    async def call(self, name: str, args: dict[str, Any], progress: list[ToolResult] | None = None) -> ToolResult:
        tool = self.registry.get(name)
        assert tool is not None, f"{name} not in {self.registry.names()}"
        return await tool.run(args, self.ctx(progress))


@contextlib.asynccontextmanager
async def harness(cwd: str, **kwargs: Any) -> AsyncIterator[Harness]:
    async with anyio.create_task_group() as tg:
        h = Harness(tg, cwd, **kwargs)
        try:
            yield h
        finally:
            with anyio.fail_after(15):
                await h.manager.close()
            tg.cancel_scope.cancel()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def marked(mark: object) -> list[int]:
    """Live processes with `mark` (e.g. a pidfile path) in their argv or environment: found from outside their
    sandbox, whose pid namespace numbers them differently."""
    needle = str(mark).encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                text = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                text += f.read()
        except OSError:
            continue
        if needle in text and alive(int(entry)):
            out.append(int(entry))
    return out
