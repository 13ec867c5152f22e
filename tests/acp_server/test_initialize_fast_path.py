"""The two ways `initialize` is answered give the same answer: the start-up fast path
(`GatewrightAgent.answer_initialize`, before the event loop, no models) and the typed handler behind the method
table (`acp_server.methods.lifecycle.initialize`, any later `initialize`). Same result for every params that fit,
the same `-32602` message for every params that do not."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from acp_server.agent import AgentConfig, GatewrightAgent
from acp_server.dispatch import REQUESTS
from acp_server.errors import INVALID_PARAMS, RpcError, WireError, invalid_params
from acp_server.methods.lifecycle import client_capabilities

CASES: list[Any] = [
    {"protocolVersion": 1},
    {"protocolVersion": 0, "clientCapabilities": {}},
    {
        "protocolVersion": 65535,
        "clientCapabilities": {"fs": {"readTextFile": True}, "terminal": True},
        "clientInfo": {"name": "zed", "version": "1"},
    },
    {"protocolVersion": 1, "clientCapabilities": "garbage", "clientInfo": 5, "_meta": [1]},
    {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": "yes"}, "elicitation": {"form": {}}}},
    {"protocolVersion": 1, "unknown": {"x": 1}},
    {},
    {"protocolVersion": None},
    {"protocolVersion": "1"},
    {"protocolVersion": True},
    {"protocolVersion": 1.0},
    {"protocolVersion": -1},
    {"protocolVersion": 65536},
    [1],
    "x",
    7,
    None,
]


def _fast(params: Any) -> tuple[str, Any, GatewrightAgent]:
    agent = GatewrightAgent(AgentConfig())
    try:
        return "result", agent.answer_initialize(params), agent
    except RpcError as exc:
        return "error", exc.to_wire(), agent


def _typed(params: Any) -> tuple[str, Any, GatewrightAgent]:
    agent = GatewrightAgent(AgentConfig())
    route = REQUESTS["initialize"]
    try:
        req = route.params(params, "")
    except WireError as exc:
        return "error", invalid_params(exc).to_wire(), agent
    return "result", anyio.run(route.handle, agent, req), agent


@pytest.mark.parametrize("params", CASES, ids=[repr(c)[:60] for c in CASES])
def test_the_fast_path_answers_exactly_what_the_typed_handler_answers(params):
    fast_kind, fast, fast_agent = _fast(params)
    typed_kind, typed, typed_agent = _typed(params)
    assert (fast_kind, fast) == (typed_kind, typed)
    if fast_kind == "error":
        assert fast["code"] == INVALID_PARAMS and not fast_agent.initialized
    else:
        # What each path remembers of the client reads the same.
        assert client_capabilities(fast_agent) == client_capabilities(typed_agent)
