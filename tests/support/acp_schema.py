"""Validation of frames against the vendored official ACP schema (schemas/acp/schema.json).

The schema's envelope unions are deliberately loose (extension methods accept anything), so frames are checked
against the typed definition chosen by method: `x-method`/`x-side` tags in the schema map each method to its
request, response and notification types. Responses are checked against the response type of the request they
answer, so the caller passes the request's method.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas" / "acp"


@functools.cache
def _load(unstable: bool) -> tuple[Any, dict[tuple[str, str, str], str]]:
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    name = "schema.unstable.json" if unstable else "schema.json"
    schema = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    registry = Registry().with_resource("urn:acp", Resource.from_contents(schema, default_specification=DRAFT202012))
    index: dict[tuple[str, str, str], str] = {}
    for def_name, d in schema["$defs"].items():
        if "x-method" in d:
            kind = (
                "request"
                if def_name.endswith("Request")
                else "response"
                if def_name.endswith("Response")
                else "notification"
            )
            index[(d["x-side"], d["x-method"], kind)] = def_name

    @functools.cache
    def validator(def_name: str) -> Any:
        return jsonschema.Draft202012Validator({"$ref": f"urn:acp#/$defs/{def_name}"}, registry=registry)

    return validator, index


def _check(def_name: str | None, value: Any, unstable: bool = False) -> list[str]:
    if def_name is None:
        return []
    validator, _ = _load(unstable)
    errors = validator(def_name).iter_errors(value)
    return [f"{def_name}: {e.message[:300]} at {list(e.absolute_path)}" for e in errors][:3]


def def_errors(def_name: str, value: Any) -> list[str]:
    """Errors of `value` as an instance of `$defs[def_name]` (the stable schema, else the unstable one)."""
    stable = def_name in _load_defs(False)
    return _check(def_name, value, unstable=not stable)


@functools.cache
def _load_defs(unstable: bool) -> frozenset[str]:
    name = "schema.unstable.json" if unstable else "schema.json"
    return frozenset(json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))["$defs"])


def _def(side: str, method: str, kind: str) -> str | None:
    _, index = _load(False)
    return index.get((side, method, kind))


def agent_frame_errors(msg: Any, request_method: str | None = None) -> list[str]:
    """Errors of a frame the agent wrote (empty when valid). `request_method` names the request a response answers."""
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        return ["not a JSON-RPC 2.0 object"]
    extra = set(msg) - {"jsonrpc", "id", "method", "params", "result", "error"}
    if extra:
        return [f"unexpected envelope fields {sorted(extra)}"]
    if "method" in msg:
        method = msg["method"]
        if method == "$/cancel_request":
            return _check("CancelRequestNotification", msg.get("params"))
        if "id" in msg:
            d = _def("client", method, "request")
            return _check(d, msg.get("params")) if d else [f"the agent sent an unknown request {method}"]
        d = _def("client", method, "notification")
        return _check(d, msg.get("params")) if d else [f"the agent sent an unknown notification {method}"]
    if ("result" in msg) == ("error" in msg):
        return ["a response must carry exactly one of result/error"]
    if "id" not in msg:
        return ["a response without an id"]
    if "error" in msg:
        errs = _check("Error", msg["error"])
        if not isinstance(msg["error"].get("message"), str) or "\n" in msg["error"]["message"]:
            errs.append("error message must be one line")
        return errs
    if request_method is None:
        return []
    d = _def("agent", request_method, "response")
    unstable = False
    if d is None:
        _, uindex = _load(True)
        d = uindex.get(("agent", request_method, "response"))
        unstable = True
    return _check(d, msg["result"], unstable) if d else []


def client_frame_errors(msg: Any, request_method: str | None = None) -> list[str]:
    if not isinstance(msg, dict):
        return ["not an object"]
    if "method" in msg:
        kind = "request" if "id" in msg else "notification"
        d = _def("agent", msg["method"], kind)
        return _check(d, msg.get("params")) if d else []
    if "result" in msg and request_method:
        return _check(_def("client", request_method, "response"), msg["result"])
    return []


def assert_agent_frame(msg: Any, request_method: str | None = None) -> None:
    errors = agent_frame_errors(msg, request_method)
    assert not errors, f"frame does not match the ACP schema: {errors}\n{json.dumps(msg)[:2000]}"
