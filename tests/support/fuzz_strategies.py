"""Hypothesis strategies and the reference oracle for fuzzing the JSON-RPC/ACP endpoint.

Shared by the bounded fuzz tests (tests/*/test_fuzz_*.py) and the long run (bench/fuzz_long.py).

- `expected_answer(line)` is an oracle written from JSON-RPC 2.0 §4–§6 (not from `acp_server.wire`): for one input
  line it says whether the agent must answer, and with which id. The reference JSON parser is orjson (RFC 8259 plus
  a nesting bound of 1024), the parser the agent documents; lone surrogates are therefore invalid JSON.
- `from_schema(name)` generates params from a `$defs` entry of the official ACP schema (schemas/acp/schema.json).
  hypothesis-jsonschema also works on this schema but needs ~160 ms per example for `PromptRequest`, too slow for
  the suite; this generator covers the keywords the ACP schema uses ($ref, allOf/anyOf/oneOf, const, enum, type
  lists, properties/required/additionalProperties, items, minimum/maximum) and is cheap. `bench/fuzz_long.py`
  uses hypothesis-jsonschema when it is installed.
- `mutate_wrong_type` puts a value of the wrong JSON type at one field of a valid instance ("wrong types in every
  field").
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import orjson
from hypothesis import strategies as st

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "acp" / "schema.json"

NO_ANSWER = "no-answer"
JSON_WHITESPACE = b" \t\r"

# Requests and notifications a client sends to an agent, by their params definition in the schema.
CLIENT_REQUESTS = {
    "initialize": "InitializeRequest",
    "authenticate": "AuthenticateRequest",
    "session/new": "NewSessionRequest",
    "session/prompt": "PromptRequest",
    "session/set_mode": "SetSessionModeRequest",
    "session/set_config_option": "SetSessionConfigOptionRequest",
    "session/load": "LoadSessionRequest",
    "session/resume": "ResumeSessionRequest",
    "session/list": "ListSessionsRequest",
    "session/close": "CloseSessionRequest",
    "session/delete": "DeleteSessionRequest",
    "logout": "LogoutRequest",
}
CLIENT_NOTIFICATIONS = {"session/cancel": "CancelNotification", "$/cancel_request": "CancelRequestNotification"}


# ---- the oracle ------------------------------------------------------------------------------------------------
def valid_id(value: Any) -> bool:
    """JSON-RPC 2.0 §4: an id is a String, a Number (we accept integers) or Null; never a boolean."""
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def expected_answer(line: bytes, max_frame: int | None = None) -> tuple[str, Any]:
    """What the agent owes for one input line: `(NO_ANSWER, None)` or `("answer", id)` (id None for null).

    JSON-RPC 2.0: invalid JSON is a Parse error with id null (§5.1); valid JSON that is not a Request object is an
    Invalid Request, answered with the id when one can be read (else null); a Notification is never answered (§4.1);
    every Request gets exactly one Response with its id (§5). ACP v1 has no batches, so an array is one Invalid
    Request. A line over the frame bound is refused with one Invalid Request (our rule, docs/rules.md R3). A frame
    that is a Response is input for the agent's own requests: it is never answered (a bad one is an Invalid
    Request).
    """
    if max_frame is not None and len(line) > max_frame:
        return ("answer", None)
    if not line.strip(JSON_WHITESPACE):
        return (NO_ANSWER, None)
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return ("answer", None)
    if not isinstance(msg, dict):
        return ("answer", None)
    has_id = "id" in msg
    echo = msg["id"] if has_id and valid_id(msg["id"]) else None
    if msg.get("jsonrpc") != "2.0":
        return ("answer", echo)
    if "method" in msg:
        if not isinstance(msg["method"], str):
            return ("answer", echo)
        if not has_id:
            return (NO_ANSWER, None)
        if not valid_id(msg["id"]):
            return ("answer", None)
        return ("answer", msg["id"])
    if "result" in msg or "error" in msg:
        return (NO_ANSWER, None) if has_id and valid_id(msg["id"]) else ("answer", None)
    return ("answer", echo)


def split_lines(data: bytes) -> list[bytes]:
    """The lines the agent will see for `data` (a final line without newline still counts at EOF)."""
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return parts


# ---- JSON values -------------------------------------------------------------------------------------------------
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT
JSON_VALUES = st.recursive(
    SCALARS, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(TEXT, kids, max_size=4), max_leaves=12
)
WRONG_TYPES: dict[str, Any] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "integer": st.integers(),
    "number": st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
    "string": TEXT,
    "array": st.lists(SCALARS, max_size=3),
    "object": st.dictionaries(TEXT, SCALARS, max_size=3),
}


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


# ---- schema-driven params -------------------------------------------------------------------------------------------
@functools.cache
def acp_defs() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))["$defs"]


def _deref(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = acp_defs()[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _flatten(schema: dict[str, Any]) -> dict[str, Any]:
    """Merge `$ref` and `allOf` into one schema (properties and required are unions)."""
    schema = _deref(schema)
    if "allOf" not in schema:
        return schema
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        sub = _flatten(part)
        for k, v in sub.items():
            if k == "properties":
                merged["properties"] = {**v, **merged.get("properties", {})}
            elif k == "required":
                merged["required"] = sorted(set(merged.get("required", [])) | set(v))
            else:
                merged.setdefault(k, v)
    return merged


def _gen(draw: Any, schema: dict[str, Any], overrides: dict[str, Any], depth: int) -> Any:
    schema = _flatten(schema)
    branch = _branch(draw, schema)
    if branch is not None:
        return _gen(draw, branch, overrides, depth)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    types = schema.get("type")
    if isinstance(types, list):
        types = draw(st.sampled_from(types))
    if types is None:
        types = "object" if "properties" in schema else None
    if types is None or depth > 6:
        return draw(JSON_VALUES) if depth <= 6 else None
    return _BY_TYPE.get(types, _gen_object)(draw, schema, overrides, depth)


def _branch(draw: Any, schema: dict[str, Any]) -> dict[str, Any] | None:
    """For a `oneOf`/`anyOf`, one branch drawn and merged with the rest of the schema (properties of both)."""
    for key in ("oneOf", "anyOf"):
        if key in schema:
            branch = _flatten(draw(st.sampled_from(schema[key])))
            rest = {k: v for k, v in schema.items() if k not in ("oneOf", "anyOf")}
            if "properties" in rest and "properties" in branch:
                branch = {
                    **branch,
                    "properties": {**branch["properties"], **rest["properties"]},
                    "required": sorted(set(branch.get("required", [])) | set(rest.get("required", []))),
                }
            return {**rest, **branch}
    return None


def _gen_integer(draw: Any, schema: dict[str, Any], overrides: dict[str, Any], depth: int) -> Any:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if schema.get("format") == "uint16":
        lo, hi = 0 if lo is None else lo, 65535 if hi is None else hi
    return draw(st.integers(min_value=lo, max_value=hi))


def _gen_object(draw: Any, schema: dict[str, Any], overrides: dict[str, Any], depth: int) -> Any:
    out: dict[str, Any] = {}
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    for name, sub in props.items():
        if name in required or draw(st.booleans()):
            if name in overrides and draw(st.integers(0, 3)) > 0:
                out[name] = draw(overrides[name])
            elif name == "_meta":
                out[name] = draw(st.none() | st.dictionaries(TEXT, SCALARS, max_size=2))
            else:
                out[name] = _gen(draw, sub, overrides, depth + 1)
    if schema.get("additionalProperties", True) is not False and draw(st.integers(0, 4)) == 0:
        out[draw(TEXT)] = draw(SCALARS)  # inbound objects tolerate unknown fields
    return out


_BY_TYPE: dict[str, Any] = {
    "null": lambda draw, schema, overrides, depth: None,
    "boolean": lambda draw, schema, overrides, depth: draw(st.booleans()),
    "integer": _gen_integer,
    "number": lambda draw, schema, overrides, depth: draw(
        st.floats(min_value=schema.get("minimum"), allow_nan=False, allow_infinity=False)
    ),
    "string": lambda draw, schema, overrides, depth: draw(TEXT),
    "array": lambda draw, schema, overrides, depth: [
        _gen(draw, schema.get("items", {}), overrides, depth + 1) for _ in range(draw(st.integers(0, 3)))
    ],
}
"""How an instance of each JSON type is drawn (objects, and anything else, by `_gen_object`)."""


def from_schema(def_name: str, overrides: dict[str, Any] | None = None) -> Any:
    """Instances of `$defs[def_name]`. `overrides` maps a property name (anywhere) to a strategy used 3 times in 4,
    e.g. real session ids, so that generated calls reach real sessions rather than only the unknown-id path.

    With `GW_FUZZ_JSONSCHEMA=1` (bench/fuzz_long.py) and hypothesis-jsonschema installed, half the instances come
    from `hypothesis_jsonschema.from_schema` instead: an independent generator for the same schema."""
    schema = {"$ref": f"#/$defs/{def_name}"}
    ours = st.composite(lambda draw: _gen(draw, schema, overrides or {}, 0))()
    if os.environ.get("GW_FUZZ_JSONSCHEMA") == "1":
        theirs = _jsonschema_strategy(def_name)
        if theirs is not None:
            return ours | theirs
    return ours


@functools.cache
def _jsonschema_strategy(def_name: str) -> Any:
    try:
        from hypothesis_jsonschema import from_schema as hj_from_schema
    except ImportError:
        return None
    return hj_from_schema({"$ref": f"#/$defs/{def_name}", "$defs": acp_defs()})


@st.composite
def mutate_wrong_type(draw: Any, value: Any) -> Any:
    """`value` with one field (chosen at any depth, or the whole value) replaced by a value of another JSON type."""
    paths: list[tuple[Any, ...]] = [()]

    def walk(v: Any, path: tuple[Any, ...]) -> None:
        if isinstance(v, dict):
            for k, sub in v.items():
                paths.append((*path, k))
                walk(sub, (*path, k))
        elif isinstance(v, list):
            for i, sub in enumerate(v):
                paths.append((*path, i))
                walk(sub, (*path, i))

    walk(value, ())
    path = draw(st.sampled_from(paths))
    target: Any = value
    for p in path:
        target = target[p]
    wrong = draw(
        st.sampled_from(
            sorted(
                t
                for t in WRONG_TYPES
                if t != json_type(target) and not (json_type(target) == "integer" and t == "number")
            )
        )
    )
    replacement = draw(WRONG_TYPES[wrong])
    if not path:
        return replacement
    copy = json.loads(json.dumps(value))
    holder = copy
    for p in path[:-1]:
        holder = holder[p]
    holder[path[-1]] = replacement
    return copy


# ---- whole lines -----------------------------------------------------------------------------------------------------
def frame_line(frame: Any) -> bytes:
    # json, not orjson: integers beyond 64 bits must reach the agent too
    return json.dumps(frame, separators=(",", ":")).encode()


def deep_nesting() -> Any:
    """Nesting around and beyond the parser's bound, as arrays, objects, or inside params."""
    return st.tuples(st.integers(1, 3000), st.sampled_from(["array", "object", "params"])).map(_nest)


def _nest(spec: tuple[int, str]) -> bytes:
    depth, kind = spec
    if kind == "array":
        return b"[" * depth + b"]" * depth
    if kind == "object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    return (
        b'{"jsonrpc":"2.0","id":"deep-%d","method":"session/new","params":' % depth
        + b'{"a":' * depth
        + b"1"
        + b"}" * depth
        + b"}"
    )


def garbage_lines() -> Any:
    """Random bytes and random text, newline-free (one line each)."""
    return (st.binary(max_size=200) | st.text(max_size=200).map(lambda s: s.encode("utf-8", "surrogatepass"))).map(
        lambda b: b.replace(b"\n", b" ")
    )
