"""Newline-delimited JSON-RPC framing, sans I/O.

`LineSplitter` turns arbitrary byte chunks into complete lines with a bounded line size: a line longer than the
bound is dropped up to its newline and reported once, and the stream carries on. `classify` turns one line into a
request, notification, response or a typed error answer. `encode` makes one compact frame (orjson never emits raw
newlines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from acp_server.errors import InvalidRequest, ParseError, RpcError

DEFAULT_MAX_FRAME = 64 * 1024 * 1024
"""64 MiB: a prompt with several base64 images (tens of MiB) fits; beyond it the frame is refused."""

RequestId = int | str | None


@dataclass(frozen=True, slots=True)
class Oversized:
    size: int


class LineSplitter:
    def __init__(self, max_line: int = DEFAULT_MAX_FRAME) -> None:
        self.max_line = max_line
        self._buf = bytearray()
        self._discarding = False
        self._discarded = 0

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                rest = data[start:]
                if self._discarding:
                    self._discarded += len(rest)
                else:
                    self._buf += rest
                    if len(self._buf) > self.max_line:
                        self._discarding = True
                        self._discarded = len(self._buf)
                        self._buf = bytearray()
                return out
            piece = data[start:nl]
            if self._discarding:
                out.append(Oversized(self._discarded + len(piece)))
                self._discarding = False
                self._discarded = 0
            elif self._buf:
                self._buf += piece
                line = bytes(self._buf)
                self._buf = bytearray()
                out.append(Oversized(len(line)) if len(line) > self.max_line else line)
            elif len(piece) > self.max_line:
                out.append(Oversized(len(piece)))
            else:
                out.append(bytes(piece))
            start = nl + 1

    def close(self) -> list[bytes | Oversized]:
        """End of input: a final line without a newline still counts."""
        if self._discarding:
            self._discarding = False
            return [Oversized(self._discarded)]
        if self._buf:
            line = bytes(self._buf)
            self._buf = bytearray()
            return [line]
        return []


@dataclass(frozen=True, slots=True)
class Request:
    id: RequestId
    method: str
    params: Any


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: Any


@dataclass(frozen=True, slots=True)
class Response:
    id: RequestId
    result: Any = None
    error: Any = None
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Invalid:
    """A frame that must be answered with an error (`id` is null unless a valid id could be read)."""

    id: RequestId
    error: RpcError


Frame = Request | Notification | Response | Invalid


def valid_id(value: Any) -> bool:
    # bool is a subclass of int: `true` is not a valid id.
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def classify(line: bytes) -> Frame | None:
    """Classify one line. Returns None for a blank line (ignored): only JSON whitespace counts as blank, so a line
    of, say, form feeds is a parse error like any other non-JSON line."""
    if not line.strip(b" \t\r"):
        return None
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return Invalid(None, ParseError("Parse error: the line is not valid JSON"))
    return classify_object(msg)


def classify_object(msg: Any) -> Frame:
    if isinstance(msg, list):
        return Invalid(None, InvalidRequest("Invalid request: batches are not used by ACP v1"))
    if not isinstance(msg, dict):
        return Invalid(None, InvalidRequest("Invalid request: expected a JSON-RPC object"))
    has_id = "id" in msg
    rid = msg.get("id")
    id_ok = valid_id(rid)
    echo_id = rid if (has_id and id_ok) else None
    if msg.get("jsonrpc") != "2.0":
        return Invalid(echo_id, InvalidRequest('Invalid request: "jsonrpc" must be "2.0"'))
    if "method" in msg:
        method = msg["method"]
        if not isinstance(method, str):
            return Invalid(echo_id, InvalidRequest('Invalid request: "method" must be a string'))
        params = msg.get("params")
        if "params" in msg and not isinstance(params, dict | list):
            if not has_id:
                return Notification(method, params)  # never answered; the handler ignores bad params
            return Invalid(echo_id, InvalidRequest('Invalid request: "params" must be an object or an array'))
        if not has_id:
            return Notification(method, params)
        if not id_ok:
            return Invalid(None, InvalidRequest('Invalid request: "id" must be an integer, a string or null'))
        return Request(rid, method, params)
    if "result" in msg or "error" in msg:
        if not has_id or not id_ok:
            return Invalid(None, InvalidRequest("Invalid request: a response needs a valid id"))
        if "error" in msg:
            return Response(rid, error=msg["error"], is_error=True)
        return Response(rid, result=msg["result"])
    return Invalid(echo_id, InvalidRequest('Invalid request: no "method", "result" or "error"'))


def encode(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


def response(rid: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def error_response(rid: RequestId, error: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def request(rid: RequestId, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def id_key(rid: RequestId) -> tuple[str, Any]:
    """A correlation key that keeps `1` and `"1"` apart (and a bool can never be one)."""
    return (type(rid).__name__, rid)
