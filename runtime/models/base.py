"""The `ModelClient` interface: what every model (scripted or a real provider) gives the runtime.

A model call takes the conversation so far (provider-neutral `Message`s) and the tools the model may see, and
yields a stream of typed `ModelEvent`s. Cancellation is anyio cancellation of the consuming task: a client must
stop its network stream (or its scripted wait) promptly when cancelled.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from runtime.events import TextChunk, ThoughtChunk

# Re-exported (they live in runtime.models.errors, off the start-up path).
from runtime.models.errors import ModelError as ModelError
from runtime.models.errors import ModelNotConfigured as ModelNotConfigured

ModelStop = Literal["end_turn", "tool_use", "max_tokens", "refusal"]


# ---- conversation -------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TextPart:
    text: str


@dataclass(frozen=True, slots=True)
class ImagePart:
    data: str  # base64
    mime_type: str


UserPart = TextPart | ImagePart


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """A tool call as the model proposed it. `arguments` is the raw arguments text, untouched."""

    id: str | None
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class UserMessage:
    parts: tuple[UserPart, ...]
    role: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    text: str = ""
    thinking: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    # Provider-specific data that must be sent back verbatim (e.g. Anthropic thinking signatures).
    provider_state: dict[str, Any] | None = None
    role: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    call_id: str
    name: str
    output: str
    is_error: bool = False
    role: Literal["tool"] = "tool"
    # Beside the result, never sent to the model: operation id, attempts, the tool's structured trace.
    meta: dict[str, Any] | None = None


Message = UserMessage | AssistantMessage | ToolResultMessage


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """A tool as the model sees it: name, description and JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...]
    session_id: str = ""


# ---- stream events ------------------------------------------------------------------------------------------------
# A streamed piece of text is one record from the model to the client: the runtime passes the model's delta on as
# its own event (runtime.events), instead of copying it into a second record for every token.
TextDelta = TextChunk
ThoughtDelta = ThoughtChunk


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """A complete tool call (providers assemble streamed fragments before emitting it)."""

    call: ToolCallRequest


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_read_tokens: int = 0
    cached_write_tokens: int = 0
    thought_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Finished:
    """Always the last event of a successful call. `provider_state` is stored with the assistant message."""

    stop: ModelStop
    usage: Usage = field(default_factory=Usage)
    provider_state: dict[str, Any] | None = None


ModelEvent = TextDelta | ThoughtDelta | ToolCallEvent | Finished


class ModelClient(Protocol):
    """Streams one model call. Implementations must be safe to call concurrently from several sessions."""

    @property
    def name(self) -> str: ...

    @property
    def accepts_images(self) -> bool: ...

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]: ...
