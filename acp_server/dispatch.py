"""The ACP method table: every method gatewright serves, with the model its params are read into and its handler.

This is the one place that says which methods exist. `rpc.JsonRpcConnection` reads a request's params with the route's
model (`acp_server.protocol.schema`: a value that does not fit is `-32602` and no handler runs), then calls the handler
with the connection's `GatewrightAgent` and the typed params. A method not in the table is `-32601`; a notification not
in it is ignored. `tests/acp_server/test_dispatch.py` holds the table to the schema: each route reads the params
definition that the schema names for its method (`authenticate` through a reader that first registers the params'
strings as secrets).

To add a method: write its handler in the family's module of `acp_server.methods`, add its route here, advertise it
in `GatewrightAgent.initialize_result` if the protocol has a capability for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from acp_server.agent import GatewrightAgent
from acp_server.methods import config, lifecycle, prompt, sessions
from acp_server.protocol.schema import (
    CancelNotification,
    CloseSessionRequest,
    DeleteSessionRequest,
    ForkSessionRequest,
    InitializeRequest,
    ListSessionsRequest,
    LoadSessionRequest,
    LogoutRequest,
    NewSessionRequest,
    PromptRequest,
    ResumeSessionRequest,
    SetSessionModeRequest,
    set_session_config_option_request_from_wire,
)
from acp_server.rpc import NotificationRoute, Route

REQUESTS: Final[Mapping[str, Route[GatewrightAgent, Any, Any]]] = MappingProxyType(
    {
        "initialize": Route(InitializeRequest.from_wire, lifecycle.initialize),
        "authenticate": Route(lifecycle.authenticate_params, lifecycle.authenticate),
        "logout": Route(LogoutRequest.from_wire, lifecycle.logout),
        "session/new": Route(NewSessionRequest.from_wire, sessions.new_session),
        "session/load": Route(LoadSessionRequest.from_wire, sessions.load_session),
        "session/resume": Route(ResumeSessionRequest.from_wire, sessions.resume_session),
        "session/fork": Route(ForkSessionRequest.from_wire, sessions.fork_session),
        "session/list": Route(ListSessionsRequest.from_wire, sessions.list_sessions),
        "session/close": Route(CloseSessionRequest.from_wire, sessions.close_session),
        "session/delete": Route(DeleteSessionRequest.from_wire, sessions.delete_session),
        "session/prompt": Route(
            PromptRequest.from_wire, prompt.prompt, received=prompt.received, cancel=prompt.cancel_request
        ),
        "session/set_mode": Route(SetSessionModeRequest.from_wire, config.set_mode),
        "session/set_config_option": Route(set_session_config_option_request_from_wire, config.set_config_option),
    }
)
"""Requests, by method."""

NOTIFICATIONS: Final[Mapping[str, NotificationRoute[GatewrightAgent, Any]]] = MappingProxyType(
    {
        "session/cancel": NotificationRoute(CancelNotification.from_wire, prompt.cancel),
    }
)
"""Notifications, by method (`$/cancel_request` is the connection's own)."""


class AcpDispatcher:
    """The table, for one connection's agent (`rpc.Dispatcher`)."""

    requests = REQUESTS
    notifications = NOTIFICATIONS

    def __init__(self, agent: GatewrightAgent) -> None:
        self.context = agent

    async def shutdown(self) -> None:
        await self.context.shutdown()
