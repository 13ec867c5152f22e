"""The ACP method table (`acp_server.dispatch`) and the connection boundary (`rpc.JsonRpcConnection`): one immutable
table, each route reading the params definition the schema names for its method, and a handler that only ever sees
typed params (params that do not fit get `-32602` with the schema path and no handler runs)."""

from __future__ import annotations

import inspect
from typing import Any

import anyio
import pytest

from acp_server.agent import AgentConfig, GatewrightAgent
from acp_server.dispatch import NOTIFICATIONS, REQUESTS, AcpDispatcher
from acp_server.errors import WireError
from acp_server.methods import lifecycle
from acp_server.protocol import schema
from acp_server.protocol.base import WireModel
from acp_server.rpc import JsonRpcConnection, Route
from runtime import secrets
from tests.support.rpc_helpers import Pipe

# In the stable schema, on the agent's side, and not served: said here so that a new method is a decision.
NOT_SERVED: set[str] = set()


def test_the_table_cannot_be_changed():
    with pytest.raises(TypeError):
        REQUESTS["x"] = REQUESTS["initialize"]  # type: ignore[index]
    with pytest.raises(TypeError):
        NOTIFICATIONS["x"] = NOTIFICATIONS["session/cancel"]  # type: ignore[index]


# Routes that read their params through a wrapper of the schema's decoder (it must return the same model).
WRAPPED = {"authenticate": lifecycle.authenticate_params}


def test_each_route_reads_the_params_definition_the_schema_names_for_its_method():
    for method, route in [*REQUESTS.items(), *NOTIFICATIONS.items()]:
        spec = schema.METHODS[method]
        assert spec.side == "agent", method
        assert (spec.result is None) == (method in NOTIFICATIONS), method
        assert route.params == WRAPPED.get(method, schema.DECODERS[spec.params]), method
        assert inspect.iscoroutinefunction(route.handle) or method in NOTIFICATIONS, method
    sample = {"methodId": "env:KEY", "token": "t"}
    assert lifecycle.authenticate_params(sample, "") == schema.AuthenticateRequest.from_wire(sample, "")


def test_the_strings_of_authenticate_params_are_secrets_even_when_the_params_do_not_fit():
    value = "credential-7f3a9c2e41"
    with pytest.raises(WireError):
        REQUESTS["authenticate"].params({"methodId": 5, "apiKey": value}, "")
    assert secrets.redact_text(f"the key is {value}") == f"the key is {secrets.REDACTED}"


def test_every_stable_agent_method_is_served_or_named_as_not_served():
    stable = {m for m, spec in schema.METHODS.items() if spec.side == "agent" and not spec.unstable}
    assert stable - set(REQUESTS) - set(NOTIFICATIONS) == NOT_SERVED
    assert {m for m in REQUESTS if schema.METHODS[m].unstable} == {"session/fork"}


def test_the_session_methods_advertised_are_the_session_methods_served():
    caps = GatewrightAgent(AgentConfig()).initialize_result()["agentCapabilities"]
    methods = {name for name in caps["sessionCapabilities"] if name != "additionalDirectories"}  # a field, not a method
    assert {f"session/{name}" for name in methods} <= set(REQUESTS)
    assert caps["auth"] == {"logout": {}} and "logout" in REQUESTS
    assert caps["loadSession"] is ("session/load" in REQUESTS)


@pytest.mark.anyio
@pytest.mark.parametrize("params", [{"sessionId": 5, "modeId": "auto"}, {"modeId": "auto"}, [1], {"sessionId": [1]}])
async def test_a_handler_never_runs_for_params_that_do_not_fit(params):
    seen: list[Any] = []

    async def spy(agent: Any, req: Any) -> None:
        seen.append(req)

    class Spy(AcpDispatcher):
        requests = {**REQUESTS, "session/set_mode": Route(REQUESTS["session/set_mode"].params, spy)}

    pipe = Pipe()
    conn = JsonRpcConnection(Spy(GatewrightAgent(AgentConfig())))
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(conn.serve, pipe, pipe)
            await pipe.line({"jsonrpc": "2.0", "id": 1, "method": "session/set_mode", "params": params})
            await pipe.line(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "session/set_mode",
                    "params": {"sessionId": "s", "modeId": "auto"},
                }
            )
            for request_id in (1, 2):
                await pipe.wait(lambda m, i=request_id: m.get("id") == i)
            await pipe.send.aclose()
    first, second = sorted(pipe.out, key=lambda m: m["id"])
    assert first["error"]["code"] == -32602 and first["error"]["message"].startswith("Invalid params: ")
    assert second == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert len(seen) == 1 and isinstance(seen[0], schema.SetSessionModeRequest) and isinstance(seen[0], WireModel)
    assert (seen[0].session_id, seen[0].mode_id) == ("s", "auto")
