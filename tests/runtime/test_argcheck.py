"""runtime.tools.argcheck against jsonschema: for every built-in tool's schema, on generated arguments (valid ones from
the schema, and mutations of them: wrong types, missing and extra fields, out-of-range values, bools for numbers), the
same errors in the same order with the same messages and paths. A schema beyond argcheck's part of JSON Schema is
left to jsonschema; a fresh process's first call of a built-in tool never imports it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.tools import argcheck
from runtime.tools.base import SCHEMA_DIR, ToolFailure, _validator, validate_arguments

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = {p.stem: json.loads(p.read_text()) for p in sorted(SCHEMA_DIR.glob("*.json"))}

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False)
    | st.sampled_from([0, 1, -1, 1.0, 0.0, 2.5, "", "x", "high", "pending", True, False, 10**9])
)
JSON = st.recursive(
    JSON_SCALARS | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _valid(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Instances of one of these schemas (hypothesis-jsonschema would do, but not with this hypothesis)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        required = [k for k in props if k in schema.get("required", [])]
        optional = [k for k in props if k not in required]
        return st.fixed_dictionaries(
            {k: _valid(props[k]) for k in required}, optional={k: _valid(props[k]) for k in optional}
        )
    if kind == "array":
        least = schema.get("minItems", 0)
        return st.lists(
            _valid(schema.get("items", {})),
            min_size=least,
            max_size=max(min(schema.get("maxItems", 3), 3), least),
            unique=schema.get("uniqueItems", False),
        )
    if kind == "string":
        return st.text(min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 12), 12))
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "boolean":
        return st.booleans()
    return JSON


def _mutations(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A valid instance, then some of its fields replaced, dropped or added, at any depth."""

    def mutate(value: Any, draw: Any) -> Any:
        if isinstance(value, dict):
            out = {
                k: mutate(v, draw) if draw(st.booleans()) else v
                for k, v in value.items()
                if draw(st.integers(0, 5)) != 0
            }
            if draw(st.integers(0, 4)) == 0:
                out[draw(st.sampled_from(["extra", "path", "zz", "mode", "a"]))] = draw(JSON)
            return out
        if isinstance(value, list):
            return [mutate(v, draw) for v in value] + (draw(st.lists(JSON, max_size=2)) if draw(st.booleans()) else [])
        return draw(JSON) if draw(st.integers(0, 2)) == 0 else value

    @st.composite
    def strategy(draw: Any) -> Any:
        return mutate(draw(_valid(schema)), draw)

    return strategy()


def _ours(schema: dict[str, Any], instance: Any) -> list[tuple[list[Any], str]]:
    return [(list(e.path), e.message) for e in argcheck.Checker(schema).iter_errors(instance)]


def _theirs(schema: dict[str, Any], instance: Any) -> list[tuple[list[Any], str]]:
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [(list(e.path), e.message) for e in validator.iter_errors(instance)]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_builtin_schema_is_checked_without_jsonschema(name):
    assert argcheck.supported(SCHEMAS[name]), name


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_the_errors_match_jsonschema_exactly_on_generated_arguments(name, data):
    schema = SCHEMAS[name]
    instance = data.draw(_mutations(schema) | JSON, label="arguments")
    assert _ours(schema, instance) == _theirs(schema, instance)


@pytest.mark.parametrize(
    ("instance", "message"),
    [
        ({"path": 5}, "5 is not of type 'string'"),
        ({"path": True}, "True is not of type 'string'"),
        ({}, "'path' is a required property"),
        ({"path": "a", "x": 1, "b": 2}, "Additional properties are not allowed ('b', 'x' were unexpected)"),
        ({"path": "a", "startLine": 0}, "0 is less than the minimum of 1"),
        ({"path": "a", "startLine": 2.0}, None),  # 1.0-style floats are integers in JSON Schema 2020-12
        ({"path": "a", "startLine": True}, "True is not of type 'integer'"),  # and bools are not
        ({"path": ""}, "'' should be non-empty"),
    ],
)
def test_read_file_arguments(instance, message):
    errors = _ours(SCHEMAS["read_file"], instance)
    assert errors == _theirs(SCHEMAS["read_file"], instance)
    assert (errors[0][1] if errors else None) == message


@pytest.mark.parametrize(
    ("instance", "message"),
    [
        ({"question": "q", "options": []}, "[] should be non-empty"),
        ({"question": "q", "options": ["a", "b", "a"]}, "['a', 'b', 'a'] has non-unique elements"),
        ({"question": "q", "options": ["a", "b"]}, None),
    ],
)
def test_ask_user_arguments_min_and_unique_items(instance, message):
    errors = _ours(SCHEMAS["ask_user"], instance)
    assert errors == _theirs(SCHEMAS["ask_user"], instance)
    assert (errors[0][1] if errors else None) == message


@settings(max_examples=300, deadline=None)
@given(items=st.lists(JSON, max_size=5))
def test_unique_items_decides_as_jsonschema_does_on_any_json_list(items):
    # jsonschema's uniqueness is not plain pairwise uniqueness (argcheck._unique says how): the same answers on
    # duplicates, bools next to numbers, nested lists and objects.
    schema = {"type": "array", "uniqueItems": True}
    doubled = items + items[:1]
    assert _ours(schema, items) == _theirs(schema, items)
    assert _ours(schema, doubled) == _theirs(schema, doubled)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"q": {"type": "string", "pattern": "^a"}}},  # a keyword argcheck lacks
        {"type": "object", "properties": {"q": {"$ref": "#/$defs/s"}}, "$defs": {"s": {"type": "string"}}},
        {"type": "object", "properties": {"q": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}},
        {"type": "object", "additionalProperties": {"type": "string"}},  # a schema, not true/false
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"},  # another draft: other rules
        {"type": "object", "properties": {"q": True}},  # a boolean schema
        {"type": "object", "properties": {"q": {"type": "strnig"}}},  # not a type: jsonschema says so
    ],
)
def test_a_schema_beyond_argchecks_part_of_json_schema_is_left_to_jsonschema(schema):
    assert not argcheck.supported(schema)
    assert not isinstance(_validator("mcp_tool", json.dumps(schema, sort_keys=True)), argcheck.Checker)


def test_an_mcp_style_schema_is_still_enforced_through_jsonschema():
    class Tool:
        name = "mcp__srv__find"
        schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": "^a"}}, "required": ["q"]}

        def check_arguments(self, args: Any) -> None:
            pass

    validate_arguments(Tool(), {"q": "abc"})  # type: ignore[arg-type]
    with pytest.raises(ToolFailure, match="does not match") as err:
        validate_arguments(Tool(), {"q": "zzz"})  # type: ignore[arg-type]
    assert err.value.error_type == "InvalidArguments"


def test_a_fresh_processs_first_builtin_tool_call_does_not_import_jsonschema():
    code = """
import sys
from runtime import builtin_tools
from runtime.tools.base import ToolFailure, validate_arguments
tools = {t.name: t for t in builtin_tools()}
validate_arguments(tools["read_file"], {"path": "a.txt"})
try:
    validate_arguments(tools["write_file"], {"path": "a.txt"})
except ToolFailure as exc:
    assert "'content' is a required property" in exc.message, exc.message
else:
    raise AssertionError("not refused")
assert "jsonschema" not in sys.modules
"""
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
