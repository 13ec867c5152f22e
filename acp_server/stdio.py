"""The only module that touches the process's stdin and stdout.

`guard_stdio` moves the protocol onto private descriptors (duplicated with close-on-exec, so child processes never
inherit them) and points fd 1 at stderr and fd 0 at /dev/null. After that, a `print`, a C extension writing to fd 1
or a child process writing to its inherited stdout lands on stderr, never in the protocol stream; anything reading
stdin sees EOF. `FdReader` / `FdWriter` do blocking reads and writes in worker threads (never setting O_NONBLOCK on
a descriptor shared with the editor).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

READ_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class ProtocolFds:
    read_fd: int
    write_fd: int


@contextlib.contextmanager
def guard_stdio() -> Iterator[ProtocolFds]:
    """Take fds 0 and 1 off the descriptor table for the protocol's private use while serving."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    read_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    write_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    saved_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    saved_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        os.dup2(devnull, 0)
        try:
            os.fstat(2)
            os.dup2(2, 1)
        except OSError:
            os.dup2(devnull, 1)
    finally:
        os.close(devnull)
    try:
        yield ProtocolFds(read_fd, write_fd)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (saved_in, saved_out, read_fd, write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


class FdReader:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def read(self) -> bytes:
        """Read some bytes; b"" at EOF (or when the descriptor fails)."""
        import anyio.to_thread  # not at module level: this module is on the path to answering `initialize`

        try:
            return await anyio.to_thread.run_sync(os.read, self.fd, READ_CHUNK, abandon_on_cancel=True)
        except OSError:
            return b""


class FdWriter:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    async def write(self, data: bytes) -> None:
        """Write everything. Raises `BrokenPipeError`/`OSError` when the client is gone."""
        import anyio.to_thread

        await anyio.to_thread.run_sync(self._write_all, data, abandon_on_cancel=True)
