"""Fuzzing the sans-I/O framing (`wire.classify`) and the JSON-RPC connection (`rpc.JsonRpcConnection`) in process.

`wire.classify` is checked against the spec oracle `tests.support.fuzz_strategies.expected_answer` (JSON-RPC 2.0 §4–§6),
byte for byte. The connection is driven with random interleavings of requests (answering, failing, hanging),
notifications, `$/cancel_request` and answers to nothing, then EOF: every request is answered exactly once — a
hanging one with -32800 at shutdown — and nothing else is ever answered (docs/rules.md R1, R5, R6).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_server import wire
from acp_server.errors import INTERNAL_ERROR, REQUEST_CANCELLED
from acp_server.rpc import JsonRpcConnection
from tests.support.fuzz_strategies import JSON_VALUES, NO_ANSWER, expected_answer, frame_line, garbage_lines
from tests.support.rpc_helpers import raw_notification_routes, raw_routes

SCALE = float(os.environ.get("GW_FUZZ_SCALE", "1"))
pytestmark = [pytest.mark.timeout(int(60 * max(1.0, SCALE)))]


def fuzz_settings(examples: int) -> Any:
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


ENVELOPE_KEYS = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"])
ENVELOPE_VALUES = st.sampled_from(["2.0", "1.0", "session/new", 1, "1", None, True, 1.5, [], {}]) | JSON_VALUES
LINES = (
    garbage_lines()
    | JSON_VALUES.map(frame_line)
    | st.dictionaries(ENVELOPE_KEYS, ENVELOPE_VALUES, max_size=5).map(frame_line)
    | st.sampled_from([b"", b" ", b"\t\r", b"\x0c", b"\x0b", b"[]", b"null", b"{}"])
)


def classified(frame: wire.Frame | None) -> tuple[str, Any]:
    if frame is None or isinstance(frame, wire.Notification | wire.Response):
        return (NO_ANSWER, None)
    return ("answer", frame.id)


@pytest.mark.req("jsonrpc:parse-error:null-id", "jsonrpc:invalid-request:not-a-request-object")
@fuzz_settings(800)
@given(LINES)
def test_classify_agrees_with_the_spec_oracle_on_every_line(line):
    """JSON-RPC 2.0 §4–§5.1: whether a line is answered, and with which id, is decided by the spec, not by chance."""
    assert classified(wire.classify(line)) == expected_answer(line)


@fuzz_settings(300)
@given(st.binary(max_size=400), st.integers(1, 64))
def test_the_line_splitter_never_loses_or_invents_a_line(data, bound):
    """Our framing rule (ACP v1 transports: one message per line): every newline-terminated line comes out once,
    either whole or as one `Oversized` marker, in order."""
    splitter = wire.LineSplitter(bound)
    out = splitter.feed(data) + splitter.close()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    assert len(out) == len(lines)
    for got, want in zip(out, lines, strict=True):
        assert got == want if len(want) <= bound else isinstance(got, wire.Oversized) and got.size == len(want)


class Dispatcher:
    """Handlers with every outcome: answer, typed failure, crash, and hang (until shutdown cancels it)."""

    def __init__(self) -> None:
        self.context = None
        self.requests = raw_routes({"echo": self.echo, "boom": self.boom, "hang": self.hang, "typed": self.typed})
        self.notifications = raw_notification_routes({"note": lambda p: None, "bad_note": self.bad_note})

    async def echo(self, params: Any) -> Any:
        await anyio.lowlevel.checkpoint()
        return {"echo": params}

    async def boom(self, params: Any) -> Any:
        raise RuntimeError("crash with secret sk-fuzz")

    async def typed(self, params: Any) -> Any:
        from acp_server.errors import InvalidParams

        raise InvalidParams("Invalid params: no")

    async def hang(self, params: Any) -> Any:
        await anyio.sleep_forever()

    def bad_note(self, params: Any) -> None:
        raise ValueError("a failing notification handler is never answered")

    async def shutdown(self) -> None:
        pass


class Feed:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)
        self.out = bytearray()

    async def read(self) -> bytes:
        await anyio.lowlevel.checkpoint()
        return self.chunks.pop(0) if self.chunks else b""

    async def write(self, data: bytes) -> None:
        self.out += data


IDS = st.integers(-3, 3) | st.sampled_from(["1", "a", None])
ACTIONS = st.one_of(
    st.tuples(st.just("request"), st.sampled_from(["echo", "echo", "boom", "typed", "missing", "_ext/x", "hang"]), IDS),
    st.tuples(st.just("notify"), st.sampled_from(["note", "bad_note", "missing", "$/cancel_request"]), IDS),
    st.tuples(st.just("answer"), st.sampled_from(["result", "error"]), IDS),
    st.tuples(st.just("line"), LINES, st.none()),
)


@pytest.mark.req(
    "jsonrpc:response:exactly-one-per-request",
    "jsonrpc:notification:never-answered",
    "jsonrpc:internal-error:opaque",
    "acp:cancel-request:original-still-answered",
)
@fuzz_settings(100)
@given(st.lists(ACTIONS, max_size=15), st.integers(1, 300))
def test_the_connection_answers_every_request_exactly_once_whatever_the_interleaving(actions, chunk):
    """JSON-RPC 2.0 §5 and ACP `$/cancel_request`: one answer per request (a hanging handler is answered -32800 when
    it is cancelled, by the peer or by EOF), none for notifications or responses; crashes are opaque -32603."""
    owed: Counter[str] = Counter()
    data = bytearray()
    for kind, what, rid in actions:
        if kind == "request":
            line = frame_line({"jsonrpc": "2.0", "id": rid, "method": what, "params": {"x": 1}})
        elif kind == "notify":
            params = {"requestId": rid} if what == "$/cancel_request" else {}
            line = frame_line({"jsonrpc": "2.0", "method": what, "params": params})
        elif kind == "answer":
            line = frame_line(
                {"jsonrpc": "2.0", "id": rid, what: {"code": 1, "message": "m"} if what == "error" else {}}
            )
        else:
            line = what
        answer, aid = expected_answer(line)
        if answer != NO_ANSWER:
            owed[json.dumps(aid)] += 1
        data += line + b"\n"
    chunks = [bytes(data[i : i + chunk]) for i in range(0, len(data), chunk)]
    feed = Feed(chunks)

    async def main() -> None:
        conn = JsonRpcConnection(Dispatcher())
        with anyio.fail_after(10):
            await conn.serve(feed, feed)

    anyio.run(main)
    seen: Counter[str] = Counter()
    for raw in bytes(feed.out).splitlines():
        msg = json.loads(raw)
        assert msg["jsonrpc"] == "2.0" and "method" not in msg
        assert ("result" in msg) != ("error" in msg)
        if "error" in msg:
            assert isinstance(msg["error"]["code"], int) and not isinstance(msg["error"]["code"], bool)
            assert "sk-fuzz" not in msg["error"]["message"] and "\n" not in msg["error"]["message"]
            assert msg["error"]["code"] != INTERNAL_ERROR or "incident" in msg["error"]["message"]
        seen[json.dumps(msg["id"])] += 1
    assert seen == owed
    hanging = sum(1 for kind, what, _ in actions if kind == "request" and what == "hang")
    cancelled = sum(
        1 for raw in bytes(feed.out).splitlines() if json.loads(raw).get("error", {}).get("code") == REQUEST_CANCELLED
    )
    assert cancelled >= hanging  # a peer's $/cancel_request may also cancel a request that would have answered
