"""The stdio transport for MCP servers: one sandboxed child process, killed with its session.

The SDK's `stdio_client` does most of this, but hides the process: gatewright starts it through `runtime.processes`
(sandboxed, and contained: agent exit kills it and everything it started, even on a hard exit), keeps the server's
stderr (its last lines explain a failed start) and the exit code. The wire side is the same as the SDK's: one
JSON-RPC message per line, parsed into `SessionMessage`s for `mcp.Client`.

The sandbox (`server_spec`): a server may write the workspace and its own private temp dir, read the baseline plus
the directories its command and path arguments live in, and has the network. The entry's `_meta.gatewright.sandbox`
widens it (`{"read": [...], "write": [...], "network": false}`, see `runtime.mcp.config` and docs/mcp.md).

`import mcp` is slow; this module uses it through `runtime.lazy`, first in `__aenter__`, which runs in a session that
has servers.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from permissions.confinement import Confinement
from runtime import lazy
from runtime.mcp.config import SandboxWidening, redact
from runtime.processes import PIPE, FdStream, Spawned, spawn
from runtime.sandbox import SandboxSpec, build_spec

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


def install_dirs(command: str, args: Sequence[str], cwd: str, path: str | None) -> list[str]:
    """The directories a server's command and path arguments live in (a venv's or package's whole tree when the
    file sits in its `bin/`), so that an interpreter finds its libraries and a script its package."""
    out: list[str] = []
    found = shutil.which(command, path=path) if os.sep not in command else os.path.join(cwd, command)
    for candidate in [
        found,
        *(os.path.join(cwd, a) for a in args if os.sep in a or os.path.exists(os.path.join(cwd, a))),
    ]:
        if not candidate or not os.path.exists(candidate):
            continue
        for p in dict.fromkeys((os.path.abspath(candidate), os.path.realpath(candidate))):
            d = p if os.path.isdir(p) else os.path.dirname(p)
            if os.path.basename(d) in ("bin", "sbin", ".bin"):
                d = os.path.dirname(d)
            if d not in ("/", "/usr", os.path.expanduser("~")):
                out.append(d)
    return out


def server_spec(
    command: str, args: Sequence[str], cwd: str, env: Mapping[str, str], tmpdir: str, widening: SandboxWidening
) -> SandboxSpec:
    reads = (*install_dirs(command, args, cwd, env.get("PATH")), *widening.read)
    confinement = Confinement(write=True, network=widening.network, extra_read=reads, extra_write=widening.write)
    return build_spec(confinement, [cwd], tmpdir=tmpdir, grace=None)


class StdioProcessTransport:
    """An `mcp.client` Transport: `async with` yields (read_stream, write_stream) to a freshly spawned server."""

    def __init__(
        self,
        server: str,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str],
        cwd: str,
        secrets: Sequence[str],
        sandbox: SandboxWidening | None = None,
    ) -> None:
        self.server = server
        self.command = command
        self.args = list(args)
        self.env = dict(env)
        self.cwd = cwd
        self.secrets = tuple(secrets)
        self.sandbox = sandbox or SandboxWidening()
        self.process: Spawned | None = None
        self.stderr: StderrTail | None = None
        self.exited = anyio.Event()  # stdout reached EOF: the server is gone (or closed its output)
        self._tg: anyio.abc.TaskGroup | None = None
        self._streams: tuple[Any, ...] = ()
        self._tmpdir: str | None = None

    @property
    def returncode(self) -> int | None:
        return self.process.poll() if self.process is not None else None

    async def __aenter__(self) -> tuple[Any, Any]:
        self._tmpdir = tempfile.mkdtemp(prefix=f"gatewright-mcp-{self.server[:20]}-")
        spec = server_spec(self.command, self.args, self.cwd, self.env, self._tmpdir, self.sandbox)
        read_fd, write_fd = os.pipe()
        try:
            self.process = spawn(
                [self.command, *self.args],
                cwd=self.cwd,
                env=self.env,
                spec=spec,
                grace=None,
                stdin=PIPE,
                stdout=PIPE,
                stderr=write_fd,
            )
        except BaseException:
            os.close(read_fd)
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            raise
        finally:
            os.close(write_fd)
        self.stderr = StderrTail(read_fd, self.server, self.secrets)
        process = self.process
        assert process.stdout is not None and process.stdin is not None
        stdout, stdin = FdStream(process.stdout), FdStream(process.stdin.fileno())

        reader_in, read_stream = anyio.create_memory_object_stream[Any](0)
        write_stream, writer_out = anyio.create_memory_object_stream[Any](0)
        self._streams = (reader_in, read_stream, write_stream, writer_out)

        async def stdout_reader() -> None:
            buffer = b""
            try:
                async with reader_in:
                    while chunk := await stdout.receive():
                        lines = (buffer + chunk).split(b"\n")
                        buffer = lines.pop()
                        for line in lines:
                            if not line.strip():
                                continue
                            try:
                                item: Any = lazy.mcp_message.SessionMessage(
                                    lazy.mcp_types.jsonrpc_message_adapter.validate_json(line)
                                )
                            except ValueError as exc:
                                log.debug("MCP server %s wrote a line that is not JSON-RPC", self.server)
                                item = exc
                            await reader_in.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
                pass
            finally:
                self.exited.set()

        async def stdin_writer() -> None:
            try:
                async with writer_out:
                    async for message in writer_out:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                        await stdin.send(data.encode())
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                # The server stopped reading: end the session's view of the connection instead of hanging.
                await reader_in.aclose()

        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(stdout_reader)
        self._tg.start_soon(stdin_writer)
        return read_stream, write_stream

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None and self.process is not None
        with anyio.CancelScope(shield=True):
            await stop_process(self.process)
            for s in self._streams:
                await s.aclose()
            self._tg.cancel_scope.cancel()
        try:
            return await self._tg.__aexit__(exc_type, exc, tb)
        finally:
            self.process.close()
            if self._tmpdir:
                shutil.rmtree(self._tmpdir, ignore_errors=True)


async def stop_process(process: Spawned) -> None:
    """Close stdin, give the server a moment, then SIGTERM and SIGKILL it with everything it started."""
    with contextlib.suppress(Exception):
        if process.stdin is not None:
            process.stdin.close()
    if not await _wait_exit(process, EXIT_GRACE):
        process.send_signal(signal.SIGTERM)
        await _wait_exit(process, TERM_GRACE)
    # Also reaches what the server started and left running after it exited.
    process.kill()
    await _wait_exit(process, 2.0)


async def _wait_exit(process: Spawned, seconds: float) -> bool:
    """Until the server and everything it started are gone (its sandbox's init reports that), at most `seconds`."""
    with anyio.move_on_after(seconds):
        await process.wait()
    return process.poll() is not None
