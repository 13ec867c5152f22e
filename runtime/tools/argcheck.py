"""Checking a tool call's arguments against the tool's JSON Schema, without `jsonschema` for the schemas ours use.

The built-in tools' argument schemas (`runtime/tools/schemas/`) use a small part of JSON Schema 2020-12: `type`,
`properties`, `required`, `additionalProperties` (true or false), `enum`, `minLength`, `maxLength`, `minimum`,
`maximum`, `minItems`, `maxItems`, `uniqueItems` and `items` (a schema), besides annotations. For a schema made of
those only, `Checker` yields the errors `jsonschema`'s validator yields, in the same order and with the same messages
and paths (tests/runtime/test_argcheck.py compares the two on generated arguments), and `jsonschema` (~25 ms to
import, paid by a fresh process's first tool call) is never loaded. A schema that uses anything else (an MCP
server's may use any keyword, `$ref`, `pattern`, `anyOf`...) is not `supported`, and `jsonschema` checks it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "minItems",
        "maxItems",
        "uniqueItems",
        "items",
    }
)
# Keywords that never produce an error (draft 2020-12 annotations, and `$schema` at the root).
ANNOTATIONS = frozenset(
    {"$schema", "$comment", "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"}
)
DRAFTS = frozenset({"https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema#"})
TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
# The length keywords, with the kind of instance each one bounds (strings count characters, arrays items).
_LOWER_BOUNDS: dict[str, type[str] | type[list[Any]]] = {"minLength": str, "minItems": list}
_UPPER_BOUNDS: dict[str, type[str] | type[list[Any]]] = {"maxLength": str, "maxItems": list}


class ArgumentError:
    """One error, shaped like the part of `jsonschema.ValidationError` the tools read."""

    __slots__ = ("message", "path")

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        self.path = path
        self.message = message

    @property
    def absolute_path(self) -> tuple[str | int, ...]:
        return self.path


def supported(schema: Any, *, root: bool = True) -> bool:
    """Whether `Checker` can check `schema` exactly as `jsonschema` would (see the module docstring)."""
    if not isinstance(schema, dict) or not schema.keys() <= KEYWORDS | ANNOTATIONS:
        return False
    if "$schema" in schema and (not root or schema["$schema"] not in DRAFTS):
        return False
    types = schema.get("type", "object")
    types = [types] if isinstance(types, str) else types
    if not isinstance(types, list) or not types or not all(isinstance(t, str) and t in TYPES for t in types):
        return False
    for key in ("minLength", "maxLength", "minItems", "maxItems"):
        if key in schema and not _count(schema[key]):
            return False
    for key in ("minimum", "maximum"):
        if key in schema and not _number(schema[key]):
            return False
    if "required" in schema and not (
        isinstance(schema["required"], list) and all(isinstance(p, str) for p in schema["required"])
    ):
        return False
    if "enum" in schema and not isinstance(schema["enum"], list):
        return False
    if "additionalProperties" in schema and not isinstance(schema["additionalProperties"], bool):
        return False
    if "uniqueItems" in schema and not isinstance(schema["uniqueItems"], bool):
        return False
    props = schema.get("properties", {})
    if not isinstance(props, dict) or not all(supported(s, root=False) for s in props.values()):
        return False
    return "items" not in schema or supported(schema["items"], root=False)


class Checker:
    """Checks instances against one `supported` schema; `iter_errors` as `jsonschema`'s validators have it."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema

    def iter_errors(self, instance: Any) -> Iterator[ArgumentError]:
        return _errors(self.schema, instance, ())


def _errors(schema: Mapping[str, Any], instance: Any, path: tuple[str | int, ...]) -> Iterator[ArgumentError]:
    # Keyword by keyword in the schema's own order, as jsonschema does: the order of errors is part of what matches.
    for key, value in schema.items():
        if key == "type":
            types = [value] if isinstance(value, str) else value
            if not any(_is(instance, t) for t in types):
                yield ArgumentError(path, f"{instance!r} is not of type {', '.join(repr(t) for t in types)}")
        elif key == "properties":
            if isinstance(instance, dict):
                for prop, sub in value.items():
                    if prop in instance:
                        yield from _errors(sub, instance[prop], (*path, prop))
        elif key == "required":
            if isinstance(instance, dict):
                for prop in value:
                    if prop not in instance:
                        yield ArgumentError(path, f"{prop!r} is a required property")
        elif key == "additionalProperties":
            if isinstance(instance, dict) and value is False:
                known = schema.get("properties", {})
                extras = sorted({p for p in instance if p not in known}, key=str)
                if extras:
                    verb = "was" if len(extras) == 1 else "were"
                    yield ArgumentError(
                        path,
                        f"Additional properties are not allowed "
                        f"({', '.join(repr(e) for e in extras)} {verb} unexpected)",
                    )
        elif key == "enum":
            if all(not _equal(each, instance) for each in value):
                yield ArgumentError(path, f"{instance!r} is not one of {value!r}")
        elif key in _LOWER_BOUNDS:
            if isinstance(instance, _LOWER_BOUNDS[key]) and len(instance) < value:
                yield ArgumentError(path, f"{instance!r} {'should be non-empty' if value == 1 else 'is too short'}")
        elif key in _UPPER_BOUNDS:
            if isinstance(instance, _UPPER_BOUNDS[key]) and len(instance) > value:
                yield ArgumentError(path, f"{instance!r} {'is expected to be empty' if value == 0 else 'is too long'}")
        elif key == "minimum":
            if _is(instance, "number") and instance < value:
                yield ArgumentError(path, f"{instance!r} is less than the minimum of {value!r}")
        elif key == "maximum":
            if _is(instance, "number") and instance > value:
                yield ArgumentError(path, f"{instance!r} is greater than the maximum of {value!r}")
        elif key == "uniqueItems":
            if value and isinstance(instance, list) and not _unique(instance):
                yield ArgumentError(path, f"{instance!r} has non-unique elements")
        elif key == "items" and isinstance(instance, list):
            for index, item in enumerate(instance):
                yield from _errors(value, item, (*path, index))


def _is(instance: Any, kind: str) -> bool:
    """JSON Schema 2020-12 types of a JSON value: a bool is no number, and 1.0 is an integer."""
    if kind == "string":
        return isinstance(instance, str)
    if kind == "object":
        return isinstance(instance, dict)
    if kind == "array":
        return isinstance(instance, list)
    if kind == "boolean":
        return isinstance(instance, bool)
    if kind == "null":
        return instance is None
    if isinstance(instance, bool):
        return False
    if kind == "integer":
        return isinstance(instance, int) or isinstance(instance, float) and instance.is_integer()
    return isinstance(instance, int | float)  # number


def _equal(one: Any, two: Any) -> bool:
    """JSON equality: `True` is not `1`, also inside arrays and objects."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(k in two and _equal(v, two[k]) for k, v in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    return bool(one == two)


def _unique(items: list[Any]) -> bool:
    """`uniqueItems` as jsonschema decides it, which is not always plain pairwise uniqueness: it sorts the items when
    Python can order them and then compares neighbours only (JSON equality, so `[1, True]` is unique), and compares
    every pair when it cannot (any top-level bool makes it so: jsonschema stands each bool in for an object that does
    not order). Elements Python finds equal but JSON does not (`[[1, True], [1, 1], [1, True]]`) stay in their order
    under the sort, so such a list passes; matching that keeps the two checkers' answers the same."""
    if len(items) > 1 and not any(isinstance(item, bool) for item in items):
        try:
            ordered = sorted(items)
        except TypeError:
            pass
        else:
            return not any(_equal(a, b) for a, b in zip(ordered, ordered[1:], strict=False))
    return not any(_equal(a, b) for i, a in enumerate(items) for b in items[:i])


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
