"""Runtime messages ⇄ JSON, for the store.

Fields are written generically (every dataclass field), so a field another part of the runtime adds to a message
later (e.g. per-tool-call trace `meta`) is kept without a change here; reading drops fields the current build does
not know instead of failing, so an older build can still load a newer session.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from runtime.models.base import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
    UserPart,
)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def encode_message(message: Message) -> str:
    return orjson.dumps(_plain(message)).decode()


def decode_message(text: str | bytes) -> Message:
    data = orjson.loads(text)
    role = data.get("role")
    if role == "user":
        parts: list[UserPart] = []
        for p in data.get("parts") or []:
            parts.append(ImagePart(**_known(ImagePart, p)) if "mime_type" in p else TextPart(**_known(TextPart, p)))
        return UserMessage(tuple(parts))
    if role == "assistant":
        fields = _known(AssistantMessage, data)
        calls = data.get("tool_calls") or []
        fields["tool_calls"] = tuple(ToolCallRequest(**_known(ToolCallRequest, c)) for c in calls)
        return AssistantMessage(**fields)
    if role == "tool":
        return ToolResultMessage(**_known(ToolResultMessage, data))
    raise ValueError(f"unknown message role {role!r}")


def message_text(message: Message) -> str:
    """All text a message puts in the model's context (for token estimates and summaries)."""
    if isinstance(message, UserMessage):
        return "\n".join(p.text if isinstance(p, TextPart) else "[image]" for p in message.parts)
    if isinstance(message, AssistantMessage):
        calls = "\n".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        return "\n".join(s for s in (message.thinking, message.text, calls) if s)
    return message.output
