"""The only module that touches the process's stdin and stdout.

`guard_stdio` moves the protocol onto private descriptors (duplicated with close-on-exec, so child processes never
inherit them) and points fd 1 at stderr and fd 0 at /dev/null. After that, a `print`, a C extension writing to fd 1
or a child process writing to its inherited stdout lands on stderr, never in the protocol stream; anything reading
stdin sees EOF. `FdReader` does blocking reads in a worker thread; `FdWriter` writes into a pipe from the event loop
while the pipe has room and hands the rest to a worker thread. Neither sets O_NONBLOCK on a descriptor shared with
the editor.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from runtime import lazy  # anyio: this module is on the path to answering `initialize`, the event loop is not

READ_CHUNK = 1 << 20
PIPE_SLOT = 4096  # PIPE_BUF on Linux: a write this size into a pipe with a free slot completes at once


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
    _widen_pipe(write_fd)
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


def _widen_pipe(fd: int, size: int = 1 << 20) -> None:
    """Grow the output pipe's kernel buffer (64 KiB by default; 1 MiB is the unprivileged limit on Linux), so a burst
    of streamed frames fits without waiting for the client: with `FdWriter`'s direct writes this measured 1.5× the
    frames/s of a 64 KiB pipe. Not a pipe, or not allowed: nothing changes."""
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)


class FdReader:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def read(self) -> bytes:
        """Read some bytes; b"" at EOF (or when the descriptor fails)."""
        try:
            return await lazy.anyio_to_thread.run_sync(os.read, self.fd, READ_CHUNK, abandon_on_cancel=True)
        except OSError:
            return b""


class FdWriter:
    """Writes the protocol stream.

    On a pipe (what editors give an agent), bytes go straight from the event loop while the pipe has a free buffer
    slot: a write of at most PIPE_BUF bytes into a pipe with a free slot never blocks, so this needs neither
    O_NONBLOCK (which would change the descriptor for everyone sharing it) nor a thread hand-off. Whatever does not
    fit then (the client reads slower than we write), and everything on other kinds of descriptor, is written by a
    worker thread that may block.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._poll: Any = None
        with contextlib.suppress(OSError):
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                self._poll = select.poll()
                self._poll.register(fd, select.POLLOUT)

    def _write_all(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    async def write(self, data: bytes) -> None:
        """Write everything. Raises `BrokenPipeError`/`OSError` when the client is gone."""
        view = memoryview(data)
        if self._poll is not None:
            while view and self._poll.poll(0):
                view = view[os.write(self.fd, view[:PIPE_SLOT]) :]
            if not view:
                return
        await lazy.anyio_to_thread.run_sync(self._write_all, view, abandon_on_cancel=True)
