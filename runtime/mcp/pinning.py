"""Server-bound ("pinned") tool arguments: values the host binds from trusted context, never the model.

A pin names a tool of one MCP server and some of its arguments, for example a tenant or a project filter. The
configuration lives in the `_meta` of the editor's `mcpServers` entry (the editor and the user are trusted, the model
is not):

    {"name": "tickets", "command": "...", "args": [], "env": [],
     "_meta": {"gatewright": {"pinned": {"search": {"tenant": "acme",
                                                    "project": {"$env": "TICKETS_PROJECT"},
                                                    "workspace": {"$session": "cwd"}}}}}}

A value is a JSON literal, `{"$env": NAME}` (this agent's environment, read when the session connects) or
`{"$session": "id" | "cwd"}`. Pinned fields are removed from the schema the model sees, injected at execution, and a
value the model supplies for one of them is refused as `InvalidArguments` (it is never silently overwritten: a model
trying to choose the tenant is worth telling about).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any


class PinError(ValueError):
    """The pin configuration is malformed or refers to context that does not exist."""


def parse_pins(
    meta: Any, session: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """Read `_meta.gatewright.pinned` of one `mcpServers` entry and resolve every value.

    Raises:
        PinError: wrong shapes, an unset environment variable, an unknown session field. The message names the
            tool and the argument but never a value.
    """
    env = os.environ if environ is None else environ
    if not isinstance(meta, dict):
        return {}
    ours = meta.get("gatewright")
    if ours is None:
        return {}
    if not isinstance(ours, dict):
        raise PinError("_meta.gatewright must be an object")
    pinned = ours.get("pinned")
    if pinned is None:
        return {}
    if not isinstance(pinned, dict):
        raise PinError("_meta.gatewright.pinned must be an object of tool name -> {argument: value}")
    out: dict[str, dict[str, Any]] = {}
    for tool, fields in pinned.items():
        if not isinstance(fields, dict):
            raise PinError(f"pinned arguments of tool {tool!r} must be an object")
        resolved: dict[str, Any] = {}
        for arg, value in fields.items():
            resolved[arg] = _resolve(tool, arg, value, session, env)
        out[tool] = resolved
    return out


def _resolve(tool: str, arg: str, value: Any, session: Mapping[str, str], env: Mapping[str, str]) -> Any:
    if isinstance(value, dict) and len(value) == 1 and "$env" in value:
        name = value["$env"]
        if not isinstance(name, str) or name not in env:
            raise PinError(f"pinned argument {arg!r} of tool {tool!r}: environment variable {name!r} is not set")
        return env[name]
    if isinstance(value, dict) and len(value) == 1 and "$session" in value:
        key = value["$session"]
        if not isinstance(key, str) or key not in session:
            raise PinError(
                f"pinned argument {arg!r} of tool {tool!r}: unknown session field {key!r} "
                f"(known: {', '.join(sorted(session))})"
            )
        return session[key]
    return copy.deepcopy(value)


def strip_schema(schema: Mapping[str, Any], pinned: Mapping[str, Any]) -> dict[str, Any]:
    """The input schema without the pinned properties (and without them in `required`)."""
    out = copy.deepcopy(dict(schema))
    if not pinned:
        return out
    props = out.get("properties")
    if isinstance(props, dict):
        out["properties"] = {k: v for k, v in props.items() if k not in pinned}
    required = out.get("required")
    if isinstance(required, list):
        out["required"] = [r for r in required if r not in pinned]
        if not out["required"]:
            del out["required"]
    return out


def supplied_pins(args: Mapping[str, Any], pinned: Mapping[str, Any]) -> list[str]:
    """The pinned argument names the model tried to supply itself (sorted, for a stable message)."""
    return sorted(k for k in args if k in pinned)


def inject(args: Mapping[str, Any], pinned: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments sent to the server: the model's, plus the pinned values."""
    out = dict(args)
    out.update(copy.deepcopy(dict(pinned)))
    return out
