"""JSON-RPC and ACP error codes, and the one place that maps exceptions to wire errors.

RpcError
├── ParseError        -32700  the line is not JSON
├── InvalidRequest    -32600  JSON, but not a request object (or a frame over the size bound)
├── MethodNotFound    -32601  unknown method (including unknown `_` extensions)
├── InvalidParams     -32602  params do not fit the method: the model's `WireError` (a schema path and a fixed
│                             phrase, never a value), or the handler's own one-line reason
├── InternalError     -32603  a handler crashed (details on stderr under a correlation id)
├── RequestCancelled  -32800  the request was cancelled with `$/cancel_request`
├── AuthRequired      -32000  the model provider needs credentials
└── ResourceNotFound  -32002  e.g. an unknown session id

WireError             a JSON value does not fit its wire model (`acp_server.protocol`); for a request's params,
                      the connection answers it with `invalid_params(exc)`
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

log = logging.getLogger("gatewright.rpc")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002


class WireError(ValueError):
    """A JSON value does not fit the schema: `path` says where (`prompt[2].text`), `problem` says how.

    Both come from the schema and the decoders only (field names, indices, fixed phrases), never from a value or an
    object key the peer chose: the message is safe to show to the peer as it is."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f'"{path}" {problem}' if path else problem)
        self.path = path
        self.problem = problem


class RpcError(Exception):
    code = INTERNAL_ERROR
    default_message = "Internal error"

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        message = one_line(message or self.default_message)
        super().__init__(message)
        self.message = message
        self.data = data

    def to_wire(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class ParseError(RpcError):
    code = PARSE_ERROR
    default_message = "Parse error"


class InvalidRequest(RpcError):
    code = INVALID_REQUEST
    default_message = "Invalid request"


class MethodNotFound(RpcError):
    code = METHOD_NOT_FOUND
    default_message = "Method not found"


class InvalidParams(RpcError):
    code = INVALID_PARAMS
    default_message = "Invalid params"


class InternalError(RpcError):
    code = INTERNAL_ERROR


class RequestCancelled(RpcError):
    code = REQUEST_CANCELLED
    default_message = "Request cancelled"


class AuthRequired(RpcError):
    code = AUTH_REQUIRED
    default_message = "Authentication required"


class ResourceNotFound(RpcError):
    code = RESOURCE_NOT_FOUND
    default_message = "Resource not found"


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(message: str) -> str:
    """Messages often quote client input (an unknown session id, a mode name): control characters and line breaks
    in it are escaped, so an error message stays one line (ACP: one concise sentence, no newlines)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), message)


def invalid_params(exc: WireError) -> InvalidParams:
    """The `-32602` for params that do not fit their model. A `WireError` names a schema path and a fixed phrase
    (`acp_server.protocol.base`), never a value the client sent, so it can go on the wire as it is."""
    return InvalidParams(f"Invalid params: {exc}" if exc.path else f"Invalid params: the params {exc.problem}")


def error_to_wire(exc: BaseException, method: str | None = None) -> dict[str, Any]:
    """The only exception-to-wire mapping. Unknown exceptions become an opaque -32603 with a correlation id."""
    if isinstance(exc, RpcError):
        return exc.to_wire()
    incident = uuid.uuid4().hex[:12]
    log.error("internal error in %s (incident %s)", method or "handler", incident, exc_info=exc)
    return {"code": INTERNAL_ERROR, "message": f"Internal error (incident {incident}; details in the agent's log)"}
