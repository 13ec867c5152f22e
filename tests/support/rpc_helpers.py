"""Driving `rpc.JsonRpcConnection` in process: method tables of plain handlers (params are passed as they came) and
`Pipe`, an in-memory client."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from acp_server.rpc import NotificationRoute, Route


def _as_sent(value: object, at: str) -> Any:
    return value


def raw_routes(handlers: Mapping[str, Callable[[Any], Awaitable[Any]]]) -> dict[str, Route[Any, Any, Any]]:
    return {m: Route(_as_sent, lambda _ctx, params, h=h: h(params)) for m, h in handlers.items()}


def raw_notification_routes(handlers: Mapping[str, Callable[[Any], Any]]) -> dict[str, NotificationRoute[Any, Any]]:
    return {m: NotificationRoute(_as_sent, lambda _ctx, params, h=h: h(params)) for m, h in handlers.items()}


class Pipe:
    """An in-memory client: feeds lines to the connection and collects what it writes."""

    def __init__(self) -> None:
        self.send, self.recv = anyio.create_memory_object_stream[bytes](100)
        self.out: list[dict[str, Any]] = []
        self.new = anyio.Event()

    async def read(self) -> bytes:
        try:
            return await self.recv.receive()
        except anyio.EndOfStream:
            return b""

    async def write(self, data: bytes) -> None:
        for line in data.splitlines():
            self.out.append(json.loads(line))
        self.new.set()
        self.new = anyio.Event()

    async def line(self, obj: Any) -> None:
        await self.send.send((json.dumps(obj) + "\n").encode())

    async def wait(self, pred) -> dict[str, Any]:
        with anyio.fail_after(5):
            while True:
                for m in self.out:
                    if pred(m):
                        return m
                await self.new.wait()
