"""Asking the user through the host: the `UserAsker` protocol, and what may be asked.

A host that can put a question in front of the user (the ACP host, when the editor advertises elicitation) gives the
runtime a `UserAsker`; the `ask_user` tool, MCP servers' elicitation requests and the "reject, and let the agent try
another way" follow-up all go through it. A host that cannot ask gives none, and nothing is ever asked.

The forms are the restricted ones ACP (and MCP) define: a flat object whose properties are strings (optionally a
single choice), numbers, integers, booleans or a multiple choice of strings. `clean_form_schema` checks a requested
schema against that and returns the part the editor is given (known keywords only); anything it cannot forward raises
`CannotAsk`. `clean_content` checks what the user sent back against the same schema. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

Action = Literal["accept", "decline", "cancel"]

MAX_PROPERTIES = 32
MAX_CHOICES = 100
MAX_MESSAGE = 4000
MAX_URL = 4096
STRING_FORMATS = frozenset({"email", "uri", "date", "date-time"})
_COMMON = ("title", "description")


class CannotAsk(Exception):
    """The question cannot be put to the user (no such support, a form ACP cannot carry, the editor failed)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Answer:
    """What the user did: `accept` (with `content` for a form), `decline` (said no) or `cancel` (dismissed it, or
    the turn was cancelled while it was open)."""

    action: Action
    content: Mapping[str, Any] | None = None


class UserAsker(Protocol):
    """Puts questions to the user. `form` / `url`: which kinds the host can show."""

    form: bool
    url: bool

    async def ask_form(self, message: str, schema: Mapping[str, Any], call_id: str | None = None) -> Answer:
        """Show a form; `call_id` ties it to the running tool call. Raises `CannotAsk`."""
        ...

    async def ask_url(self, message: str, url: str, elicitation_id: str, call_id: str | None = None) -> Answer:
        """Ask the user to open `url` (an out-of-band step such as a sign-in). Raises `CannotAsk`."""
        ...

    async def complete_url(self, elicitation_id: str) -> None:
        """Tell the host that the step behind an `ask_url` question is done."""
        ...


# ---- requested schemas --------------------------------------------------------------------------------------------
def clean_form_schema(schema: Any) -> dict[str, Any]:
    """The requested schema as the editor gets it: checked against what ACP forms can hold, known keywords only.

    An MCP-era `enumNames` list (parallel to `enum`) becomes titled choices (`oneOf`); an unknown string `format` is
    dropped (the editor could not render it; the server still checks what it gets).

    Raises:
        CannotAsk: the schema is not a flat object of the primitive kinds ACP forms hold, or is malformed.
    """
    if not isinstance(schema, Mapping):
        raise CannotAsk("the requested form is not a JSON object schema")
    if schema.get("type", "object") != "object":
        raise CannotAsk("the requested form is not an object schema")
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        raise CannotAsk("the requested form's properties are not an object")
    if len(props) > MAX_PROPERTIES:
        raise CannotAsk(f"the requested form has {len(props)} fields (at most {MAX_PROPERTIES} are shown)")
    out: dict[str, Any] = {"type": "object"}
    for key in _COMMON:
        if key in schema and schema[key] is not None:
            out[key] = _text(schema[key], f"the form's {key}")
    cleaned: dict[str, Any] = {}
    for name, prop in props.items():
        if not isinstance(name, str) or not name:
            raise CannotAsk("the requested form has a field without a name")
        cleaned[name] = _clean_property(name, prop)
    out["properties"] = cleaned
    required = schema.get("required")
    if required is not None:
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise CannotAsk("the requested form's required list is not a list of field names")
        unknown = [r for r in required if r not in cleaned]
        if unknown:
            raise CannotAsk(f"the requested form requires a field it does not define: {unknown[0][:60]!r}")
        out["required"] = list(dict.fromkeys(required))
    return out


def _clean_property(name: str, prop: Any) -> dict[str, Any]:
    where = f"field {name[:60]!r}"
    if not isinstance(prop, Mapping):
        raise CannotAsk(f"{where} of the requested form is not a schema")
    kind = prop.get("type")
    out: dict[str, Any] = {"type": kind}
    for key in _COMMON:
        if prop.get(key) is not None:
            out[key] = _text(prop[key], f"the {key} of {where}")
    clean = _CLEANERS.get(kind) if isinstance(kind, str) else None
    if clean is None:
        shown = f"type {kind[:40]!r}" if isinstance(kind, str) else "no type"
        raise CannotAsk(
            f"{where} has {shown}; ACP forms only hold strings, numbers, integers, booleans and multiple choices "
            "of strings"
        )
    clean(prop, where, out)
    return out


def _clean_string(prop: Mapping[str, Any], where: str, out: dict[str, Any]) -> None:
    for key in ("minLength", "maxLength"):
        if prop.get(key) is not None:
            out[key] = _count(prop[key], f"{key} of {where}")
    if prop.get("pattern") is not None:
        out["pattern"] = _text(prop["pattern"], f"the pattern of {where}")
    if isinstance(prop.get("format"), str) and prop["format"] in STRING_FORMATS:
        out["format"] = prop["format"]
    if prop.get("default") is not None:
        out["default"] = _text(prop["default"], f"the default of {where}")
    if prop.get("enum") is not None:
        values = _strings(prop["enum"], f"the choices of {where}")
        labels = prop.get("enumNames")
        if (
            prop.get("oneOf") is None
            and isinstance(labels, list)
            and len(labels) == len(values)
            and all(isinstance(s, str) for s in labels)
        ):
            out["oneOf"] = [{"const": v, "title": t} for v, t in zip(values, labels, strict=True)]
        else:
            out["enum"] = values
    if prop.get("oneOf") is not None:
        out["oneOf"] = _titled(prop["oneOf"], f"the choices of {where}")


def _clean_number(prop: Mapping[str, Any], where: str, out: dict[str, Any]) -> None:
    for key in ("minimum", "maximum", "default"):
        if prop.get(key) is not None:
            out[key] = _number(prop[key], out["type"] == "integer", f"{key} of {where}")


def _clean_boolean(prop: Mapping[str, Any], where: str, out: dict[str, Any]) -> None:
    if prop.get("default") is not None:
        if not isinstance(prop["default"], bool):
            raise CannotAsk(f"the default of {where} is not a boolean")
        out["default"] = prop["default"]


def _clean_array(prop: Mapping[str, Any], where: str, out: dict[str, Any]) -> None:
    items = prop.get("items")
    if not isinstance(items, Mapping):
        raise CannotAsk(f"{where} is a list without choices (ACP forms only hold a multiple choice of strings)")
    if items.get("anyOf") is not None:
        out["items"] = {"anyOf": _titled(items["anyOf"], f"the choices of {where}")}
    elif items.get("type") == "string" and items.get("enum") is not None:
        out["items"] = {"type": "string", "enum": _strings(items["enum"], f"the choices of {where}")}
    else:
        raise CannotAsk(f"{where} is a list that is not a multiple choice of strings")
    for key in ("minItems", "maxItems"):
        if prop.get(key) is not None:
            out[key] = _count(prop[key], f"{key} of {where}")
    if prop.get("default") is not None:
        out["default"] = _strings(prop["default"], f"the default of {where}", allow_empty=True)


_CLEANERS: dict[str, Callable[[Mapping[str, Any], str, dict[str, Any]], None]] = {
    "string": _clean_string,
    "number": _clean_number,
    "integer": _clean_number,
    "boolean": _clean_boolean,
    "array": _clean_array,
}
"""The property types an ACP form holds, each with what keeps the keys it may carry."""


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise CannotAsk(f"{what} is not a string")
    return value


def _count(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CannotAsk(f"{what} is not a non-negative integer")
    return value


def _number(value: Any, integer: bool, what: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        raise CannotAsk(f"{what} is not {'an integer' if integer else 'a number'}")
    return value


def _strings(value: Any, what: str, allow_empty: bool = False) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or (not value and not allow_empty):
        raise CannotAsk(f"{what} are not a list of strings")
    if len(value) > MAX_CHOICES:
        raise CannotAsk(f"{what} are more than {MAX_CHOICES}")
    return list(value)


def _titled(value: Any, what: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value or len(value) > MAX_CHOICES:
        raise CannotAsk(f"{what} are not a list of titled options")
    out: list[dict[str, str]] = []
    for option in value:
        if (
            not isinstance(option, Mapping)
            or not isinstance(option.get("const"), str)
            or not isinstance(option.get("title"), str)
        ):
            raise CannotAsk(f"{what} are not a list of titled options")
        entry = {"const": option["const"], "title": option["title"]}
        if isinstance(option.get("description"), str):
            entry["description"] = option["description"]
        out.append(entry)
    return out


# ---- answers ------------------------------------------------------------------------------------------------------
def clean_content(content: Any, schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The fields of an accepted form that the schema defines, each of its kind; None when the content is not an
    object or a field holds the wrong kind of value (the answer is then not used). Unknown fields are dropped."""
    if content is None:
        return {}
    if not isinstance(content, Mapping):
        return None
    props = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for name, value in content.items():
        prop = props.get(name)
        if not isinstance(prop, Mapping):
            continue
        if value is None:
            continue
        if not _fits(prop.get("type"), value):
            return None
        out[name] = list(value) if isinstance(value, list) else value
    return out


def _fits(kind: Any, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return False


# ---- URLs and messages --------------------------------------------------------------------------------------------
def url_problem(url: Any) -> str | None:
    """Why `url` may not be put in front of the user, or None. Only plain http(s) addresses with a host and no
    credentials (`https://github.com@evil.example` reads as GitHub but is not)."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL:
        return "the address is empty or too long"
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return "the address contains spaces or control characters"
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return "the address is not a valid URL"
    if parts.scheme not in ("https", "http") or not host:
        return "only http and https addresses are opened"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "the address carries a user name or password"
    return None


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
