"""Method tables for driving `rpc.JsonRpcConnection` with plain handlers in tests: params are passed as they came."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from acp_server.rpc import NotificationRoute, Route


def _as_sent(value: object, at: str) -> Any:
    return value


def raw_routes(handlers: Mapping[str, Callable[[Any], Awaitable[Any]]]) -> dict[str, Route[Any, Any, Any]]:
    return {m: Route(_as_sent, lambda _ctx, params, h=h: h(params)) for m, h in handlers.items()}


def raw_notification_routes(handlers: Mapping[str, Callable[[Any], Any]]) -> dict[str, NotificationRoute[Any, Any]]:
    return {m: NotificationRoute(_as_sent, lambda _ctx, params, h=h: h(params)) for m, h in handlers.items()}
