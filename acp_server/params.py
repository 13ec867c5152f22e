"""Typed reading of inbound ACP params. Inbound objects tolerate unknown fields; a missing or mistyped required field
is an `InvalidParams` error with our own one-line message (never validator output)."""

from __future__ import annotations

from typing import Any

from acp_server.errors import InvalidParams


def obj(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise InvalidParams("Invalid params: expected an object")
    return params


def req_str(p: dict[str, Any], key: str) -> str:
    v = p.get(key)
    if not isinstance(v, str) or not v:
        raise InvalidParams(f"Invalid params: \"{key}\" must be a non-empty string")
    return v


def opt_list(p: dict[str, Any], key: str) -> list[Any]:
    v = p.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise InvalidParams(f"Invalid params: \"{key}\" must be an array")
    return v


def str_list(p: dict[str, Any], key: str) -> list[str]:
    items = opt_list(p, key)
    if not all(isinstance(i, str) for i in items):
        raise InvalidParams(f"Invalid params: \"{key}\" must be an array of strings")
    return items
