"""The output path under load: the connection's outbox (order, back-pressure, shutdown) and `FdWriter` on real
descriptors (direct writes into a pipe never stall the event loop; a full pipe, a file and a closed reader)."""

from __future__ import annotations

import fcntl
import os
import threading
import time

import anyio
import pytest

from acp_server.rpc import _Outbox
from acp_server.stdio import FdWriter, _widen_pipe


# ---- the outbox ----------------------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_the_writer_takes_frames_in_order_and_senders_wait_only_when_the_box_is_full():
    box = _Outbox(limit=100)
    assert box.put(b"a" * 60) and box.put(b"b" * 60)  # the second goes in: the box held < limit bytes
    assert not box.put(b"c")  # now full
    released = anyio.Event()

    async def sender() -> None:
        while not box.put(b"c"):
            await box.wait_room()
        released.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(sender)
        await anyio.wait_all_tasks_blocked()
        assert not released.is_set()
        assert await box.take() == [b"a" * 60, b"b" * 60]
        with anyio.fail_after(2):
            await released.wait()
    assert await box.take() == [b"c"]


@pytest.mark.anyio
async def test_a_frame_larger_than_the_limit_still_goes_through_an_empty_box():
    box = _Outbox(limit=10)
    assert box.put(b"x" * 1000)
    assert await box.take() == [b"x" * 1000]


@pytest.mark.anyio
async def test_close_drains_what_is_waiting_then_ends_and_releases_waiting_senders():
    box = _Outbox(limit=1)
    box.put(b"1")
    result: list[bool] = []

    async def sender() -> None:
        await box.wait_room()
        result.append(box.put(b"late"))  # after close: dropped, never written

    async with anyio.create_task_group() as tg:
        tg.start_soon(sender)
        await anyio.wait_all_tasks_blocked()
        box.close()
    assert result == [True]
    assert await box.take() == [b"1"]
    assert await box.take() is None


@pytest.mark.anyio
async def test_a_sleeping_writer_wakes_for_the_next_frame():
    box = _Outbox(limit=100)
    got: list[list[bytes] | None] = []

    async def writer() -> None:
        got.append(await box.take())

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        await anyio.wait_all_tasks_blocked()
        box.put(b"hello")
    assert got == [[b"hello"]]


# ---- FdWriter on real descriptors ----------------------------------------------------------------------------------
def _drain(fd: int, into: bytearray, delay: float = 0.0) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        while data := os.read(fd, 1 << 16):
            into.extend(data)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.anyio
async def test_a_pipe_gets_every_byte_in_order_even_when_the_reader_starts_late():
    r, w = os.pipe()
    payload = b"".join(b"frame %d\n" % i for i in range(400_000))  # ~5 MB: far more than the pipe holds
    got = bytearray()
    reader = _drain(r, got, delay=0.3)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.01)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            await FdWriter(w).write(payload)
            tg.cancel_scope.cancel()
    finally:
        os.close(w)
    reader.join(5)
    os.close(r)
    assert bytes(got) == payload
    # The write waited ~0.3 s for a reader; the event loop kept running meanwhile (a blocking write on the loop
    # thread would have frozen the ticker).
    assert ticks >= 10


@pytest.mark.anyio
async def test_a_widened_pipe_takes_a_burst_without_a_reader():
    r, w = os.pipe()
    _widen_pipe(w)
    size = fcntl.fcntl(w, fcntl.F_GETPIPE_SZ)
    assert size >= 1 << 16
    burst = b"y" * (size // 2)
    with anyio.fail_after(2):
        await FdWriter(w).write(burst)  # fits: returns without anyone reading
    os.close(w)
    got = bytearray()
    _drain(r, got).join(5)
    os.close(r)
    assert bytes(got) == burst


@pytest.mark.anyio
async def test_a_regular_file_is_written_whole(tmp_path):
    path = tmp_path / "out.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        await FdWriter(fd).write(b"a\n" * 100_000)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"a\n" * 100_000


@pytest.mark.anyio
async def test_a_closed_reader_raises_oserror_instead_of_hanging():
    r, w = os.pipe()
    os.close(r)
    try:
        with anyio.fail_after(2), pytest.raises(OSError):
            await FdWriter(w).write(b"z" * 10_000)
    finally:
        os.close(w)
