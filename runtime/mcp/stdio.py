"""The stdio transport for MCP servers: one child process in its own process group, killed with its session.

The SDK's `stdio_client` does most of this, but hides the process: gatewright needs the process group registered in
`runtime.processes` (so agent exit kills it, grandchildren included, even on a hard exit), the server's stderr kept
(its last lines explain a failed start) and the exit code. The wire side is the same as the SDK's: one JSON-RPC
message per line, parsed into `SessionMessage`s for `mcp.Client`.

`import mcp` is slow; this module imports it only inside `__aenter__`, which runs in a session that has servers.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.abc

from runtime.mcp.config import redact
from runtime.processes import kill_group, register_group, unregister_group

log = logging.getLogger("gatewright.mcp")

# After stdin closes, a well-behaved server exits at once; these bound the wait before escalating. Short on purpose:
# session close and agent exit run under a ~1.5 s budget for everything.
EXIT_GRACE = 0.5
TERM_GRACE = 0.3


class StderrTail:
    """Reads a child's stderr on a daemon thread: each line logged (secrets scrubbed), the last few kept."""

    def __init__(self, fd: int, server: str, secrets: Sequence[str], keep: int = 20) -> None:
        self._lines: collections.deque[str] = collections.deque(maxlen=keep)
        self._server = server
        self._secrets = tuple(secrets)
        # A thread, not a task: a blocking read of a pipe costs nothing and needs no event-loop integration.
        self._thread = threading.Thread(target=self._pump, args=(fd,), name=f"mcp-stderr-{server}", daemon=True)
        self._thread.start()

    def _pump(self, fd: int) -> None:
        with open(fd, "rb", buffering=0, closefd=True) as f:
            for raw in iter(f.readline, b""):
                line = redact(raw.decode("utf-8", errors="replace").rstrip(), self._secrets)
                if line:
                    self._lines.append(line)
                    log.info("MCP server %s stderr: %s", self._server, line[:2000])

    def last_line(self) -> str | None:
        return self._lines[-1] if self._lines else None


class StdioProcessTransport:
    """An `mcp.client` Transport: `async with` yields (read_stream, write_stream) to a freshly spawned server."""

    def __init__(self, server: str, command: str, args: Sequence[str], env: Mapping[str, str], cwd: str,
                 secrets: Sequence[str]) -> None:
        self.server = server
        self.command = command
        self.args = list(args)
        self.env = dict(env)
        self.cwd = cwd
        self.secrets = tuple(secrets)
        self.process: anyio.abc.Process | None = None
        self.stderr: StderrTail | None = None
        self.exited = anyio.Event()  # stdout reached EOF: the server is gone (or closed its output)
        self._tg: anyio.abc.TaskGroup | None = None
        self._streams: tuple[Any, ...] = ()

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process is not None else None

    async def __aenter__(self) -> tuple[Any, Any]:
        import mcp_types
        from mcp.shared.message import SessionMessage

        read_fd, write_fd = os.pipe()
        try:
            self.process = await anyio.open_process(
                [self.command, *self.args], env=self.env, cwd=self.cwd, stderr=write_fd,
                start_new_session=True,  # its own process group, so a kill reaches its children too
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        register_group(self.process.pid)
        self.stderr = StderrTail(read_fd, self.server, self.secrets)
        process = self.process

        reader_in, read_stream = anyio.create_memory_object_stream[Any](0)
        write_stream, writer_out = anyio.create_memory_object_stream[Any](0)
        self._streams = (reader_in, read_stream, write_stream, writer_out)

        async def stdout_reader() -> None:
            assert process.stdout is not None
            buffer = b""
            try:
                async with reader_in:
                    async for chunk in process.stdout:
                        lines = (buffer + chunk).split(b"\n")
                        buffer = lines.pop()
                        for line in lines:
                            if not line.strip():
                                continue
                            try:
                                item: Any = SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line))
                            except ValueError as exc:
                                log.debug("MCP server %s wrote a line that is not JSON-RPC", self.server)
                                item = exc
                            await reader_in.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
                pass
            finally:
                self.exited.set()

        async def stdin_writer() -> None:
            assert process.stdin is not None
            try:
                async with writer_out:
                    async for message in writer_out:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                        await process.stdin.send(data.encode())
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                # The server stopped reading: end the session's view of the connection instead of hanging.
                await reader_in.aclose()

        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(stdout_reader)
        self._tg.start_soon(stdin_writer)
        return read_stream, write_stream

    async def __aexit__(self, *exc: object) -> bool | None:
        assert self._tg is not None and self.process is not None
        with anyio.CancelScope(shield=True):
            await stop_process(self.process)
            for s in self._streams:
                await s.aclose()
            self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(*exc)


async def stop_process(process: anyio.abc.Process) -> None:
    """Close stdin, give the server a moment, then SIGTERM and SIGKILL its whole process group."""
    pgid = process.pid
    with contextlib.suppress(Exception):
        if process.stdin is not None:
            await process.stdin.aclose()
    if not await _wait_exit(process, EXIT_GRACE):
        kill_group(pgid, signal.SIGTERM)
        await _wait_exit(process, TERM_GRACE)
    # Also reaches grandchildren left in the group after the server itself exited.
    kill_group(pgid, signal.SIGKILL)
    unregister_group(pgid)
    await _wait_exit(process, 1.0)
    with contextlib.suppress(Exception), anyio.move_on_after(1.0):
        await process.aclose()


async def _wait_exit(process: anyio.abc.Process, seconds: float) -> bool:
    # Poll returncode rather than `wait()`: on asyncio `wait()` also waits for the pipes, which a grandchild may hold.
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 - no event fires on exit; returncode is the truth
            await anyio.sleep(0.01)
    return process.returncode is not None
