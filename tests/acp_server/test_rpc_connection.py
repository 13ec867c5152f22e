"""The JSON-RPC connection in memory: one answer per request, opaque crashes, cancellation, correlation."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from acp_server.rpc import ClientError, JsonRpcConnection
from tests.support.rpc_helpers import Pipe, raw_notification_routes, raw_routes


class Dispatcher:
    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.context = None
        self.requests = raw_routes({"boom": self.boom, "slow": self.slow, "echo": self.echo})
        self.notifications = raw_notification_routes({"note": self.note})
        self.notes: list[Any] = []
        self.shut = False

    async def boom(self, params: Any) -> Any:
        raise RuntimeError("secret internal detail sk-123")

    async def slow(self, params: Any) -> Any:
        await anyio.sleep_forever()

    async def echo(self, params: Any) -> Any:
        return params

    def note(self, params: Any) -> None:
        self.notes.append(params)
        raise ValueError("notification handlers may fail silently")

    async def shutdown(self) -> None:
        self.shut = True


async def _serve(fn):
    pipe = Pipe()
    disp = Dispatcher()
    conn = JsonRpcConnection(disp)
    async with anyio.create_task_group() as tg:
        tg.start_soon(conn.serve, pipe, pipe)
        await fn(pipe, conn, disp)
        await pipe.send.aclose()
    pipe.recv.close()
    return pipe, disp


@pytest.mark.anyio
async def test_a_crashing_handler_gets_an_opaque_internal_error_with_a_correlation_id():
    async def body(pipe, conn, disp):
        await pipe.line({"jsonrpc": "2.0", "id": 1, "method": "boom"})
        err = (await pipe.wait(lambda m: m.get("id") == 1))["error"]
        assert err["code"] == -32603
        assert "secret" not in err["message"] and "sk-123" not in err["message"]
        assert "incident" in err["message"]

    await _serve(body)


@pytest.mark.anyio
async def test_cancel_request_answers_the_original_request_with_request_cancelled():
    async def body(pipe, conn, disp):
        await pipe.line({"jsonrpc": "2.0", "id": "a", "method": "slow"})
        await anyio.sleep(0.05)
        await pipe.line({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "a"}})
        msg = await pipe.wait(lambda m: m.get("id") == "a")
        assert msg["error"]["code"] == -32800

    await _serve(body)


@pytest.mark.anyio
async def test_a_cancel_for_integer_1_does_not_cancel_string_1():
    async def body(pipe, conn, disp):
        await pipe.line({"jsonrpc": "2.0", "id": "1", "method": "slow"})
        await anyio.sleep(0.05)
        await pipe.line({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}})
        await pipe.line({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": True}})
        await pipe.line({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": {"x": 1}})
        await pipe.wait(lambda m: m.get("id") == 2)
        assert not [m for m in pipe.out if m.get("id") == "1"]

    await _serve(body)


@pytest.mark.anyio
async def test_agent_requests_are_correlated_by_id_even_when_answered_out_of_order():
    async def body(pipe, conn, disp):
        results: dict[str, Any] = {}

        async def ask(name: str) -> None:
            results[name] = await conn.request("fs/read_text_file", {"path": name})

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "a")
            tg.start_soon(ask, "b")
            ra = await pipe.wait(lambda m: m.get("params", {}).get("path") == "a")
            rb = await pipe.wait(lambda m: m.get("params", {}).get("path") == "b")
            await pipe.line({"jsonrpc": "2.0", "id": rb["id"], "result": {"content": "B"}})
            await pipe.line({"jsonrpc": "2.0", "id": ra["id"], "result": {"content": "A"}})
        assert results == {"a": {"content": "A"}, "b": {"content": "B"}}

    await _serve(body)


@pytest.mark.anyio
async def test_a_client_error_answer_raises_client_error_and_late_answers_are_dropped():
    async def body(pipe, conn, disp):
        async def ask() -> None:
            with pytest.raises(ClientError):
                await conn.request("x/y", {})

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            req = await pipe.wait(lambda m: m.get("method") == "x/y")
            await pipe.line({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": "no"}})
        await pipe.line({"jsonrpc": "2.0", "id": 999, "result": {}})
        await pipe.line({"jsonrpc": "2.0", "id": 5, "method": "echo", "params": {}})
        await pipe.wait(lambda m: m.get("id") == 5)

    await _serve(body)


@pytest.mark.anyio
async def test_a_cancelled_agent_request_tells_the_client_with_cancel_request():
    async def body(pipe, conn, disp):
        with anyio.move_on_after(0.1):
            await conn.request("session/request_permission", {})
        req = await pipe.wait(lambda m: m.get("method") == "session/request_permission")
        cancel = await pipe.wait(lambda m: m.get("method") == "$/cancel_request")
        assert cancel["params"] == {"requestId": req["id"]}

    await _serve(body)


@pytest.mark.anyio
async def test_failing_notification_handlers_are_never_answered():
    async def body(pipe, conn, disp):
        await pipe.line({"jsonrpc": "2.0", "method": "note", "params": {"a": 1}})
        await pipe.line({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {}})
        await pipe.wait(lambda m: m.get("id") == 1)
        assert len(pipe.out) == 1 and disp.notes == [{"a": 1}]

    await _serve(body)


@pytest.mark.anyio
async def test_eof_shuts_the_dispatcher_down_and_cancels_in_flight_requests():
    async def body(pipe, conn, disp):
        await pipe.line({"jsonrpc": "2.0", "id": 1, "method": "slow"})

    pipe, disp = await _serve(body)
    assert disp.shut
    assert [m for m in pipe.out if m.get("id") == 1][0]["error"]["code"] == -32800
