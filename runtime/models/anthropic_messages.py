"""`AnthropicModel`: the Anthropic Messages API as a streaming `ModelClient`.

Owns the conversion of our history to Messages (tool results in user turns, consecutive same-role turns merged, images
as base64 blocks), prompt caching (`cache_control` breakpoints on the system prompt, the last tool, and the newest
message, so the stable prefix is cached and each turn reuses the previous one), and the assembly of the streamed
reply. Thinking blocks are kept verbatim with their signatures in `Finished.provider_state` and sent back at the
start of the assistant turn they belong to, as the API requires when tools are used with extended thinking.
Spoken over plain HTTP (`runtime.models.http`); no provider SDK is imported.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from runtime.models.base import (
    AssistantMessage,
    Finished,
    ImagePart,
    ModelEvent,
    ModelRequest,
    ModelStop,
    TextDelta,
    ThoughtDelta,
    ToolCallEvent,
    ToolCallRequest,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from runtime.models.http import json_data, json_error
from runtime.models.provider import ProviderModel
from runtime.models.retry import MalformedStream, ProviderStreamError

STATE_KEY = "anthropic"
API_VERSION = "2023-06-01"
CACHE = {"type": "ephemeral"}
DEFAULT_MAX_TOKENS = 8192
_STOP: dict[str, ModelStop] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "pause_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}


def _tool_input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        value = None
    # The API wants an object; keep what the model wrote so it can see (and fix) its own mistake.
    return value if isinstance(value, dict) else {"_unparsed_arguments": arguments}


def _user_blocks(msg: UserMessage, images: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for p in msg.parts:
        if isinstance(p, ImagePart):
            if images:
                blocks.append(
                    {"type": "image", "source": {"type": "base64", "media_type": p.mime_type, "data": p.data}}
                )
            else:
                blocks.append(
                    {
                        "type": "text",
                        "text": f"[an image ({p.mime_type}) was attached but this model does not take images]",
                    }
                )
        elif p.text:  # the API refuses empty text blocks
            blocks.append({"type": "text", "text": p.text})
    return blocks


def _assistant_blocks(msg: AssistantMessage) -> list[dict[str, Any]]:
    state = (msg.provider_state or {}).get(STATE_KEY) or {}
    blocks: list[dict[str, Any]] = [dict(b) for b in state.get("thinking", ())]
    if msg.text:
        blocks.append({"type": "text", "text": msg.text})
    for c in msg.tool_calls:
        blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)})
    return blocks


def to_anthropic(
    request: ModelRequest,
    *,
    images: bool,
    cache: bool = True,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, messages, tools) for one request, with cache breakpoints when `cache`."""
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for msg in request.messages:
        if isinstance(msg, UserMessage):
            add("user", _user_blocks(msg, images) or [{"type": "text", "text": "(empty message)"}])
        elif isinstance(msg, AssistantMessage):
            add("assistant", _assistant_blocks(msg))
        elif isinstance(msg, ToolResultMessage):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": msg.call_id,
                "content": msg.output or "(no output)",
            }
            if msg.is_error:
                block["is_error"] = True
            add("user", [block])
    system: list[dict[str, Any]] = [{"type": "text", "text": request.system}] if request.system else []
    tools = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools]
    if cache:
        # Breakpoints: tools and system are the stable prefix (tools come first in the cache order); the newest
        # message makes the next call of this turn reuse everything before it. Three of the four allowed.
        if tools:
            tools[-1]["cache_control"] = CACHE
        if system:
            system[-1]["cache_control"] = CACHE
        if messages and messages[-1]["role"] == "user":
            last = messages[-1]["content"][-1]
            if last.get("type") in ("text", "tool_result", "image"):
                last["cache_control"] = CACHE
    return system, messages, tools


@dataclass
class _Block:
    kind: str
    id: str = ""
    name: str = ""
    text: list[str] = field(default_factory=list)
    signature: str = ""
    data: str = ""
    input: Any = None
    done: bool = False


@dataclass
class AnthropicAssembler:
    """Turns Messages stream events into ours. Sans-I/O.

    Per the API reference: `message_start`, then per content block `content_block_start`, its deltas and
    `content_block_stop`, then `message_delta` (stop reason, cumulative usage) and `message_stop`; `ping` events
    anywhere; an `error` event is a failure inside the 200 reply; event types added later are ignored.
    """

    blocks: dict[int, _Block] = field(default_factory=dict)
    stop: str | None = None
    input_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    stopped: bool = False

    @property
    def done(self) -> bool:
        return self.stopped

    def feed(self, event: str, data: str) -> list[ModelEvent]:
        if event == "ping" or not data.strip():
            return []
        ev = json_data(data)
        if not isinstance(ev, dict):
            raise MalformedStream(f"an event is not an object: {data[:80]!r}")
        if event == "error" or ev.get("type") == "error":
            message, etype = json_error(ev, "the server reported an error mid-stream")
            raise ProviderStreamError(message, etype)
        return self.feed_event(ev)

    def feed_event(self, ev: dict[str, Any]) -> list[ModelEvent]:
        kind = ev.get("type")
        if kind == "message_start":
            self._usage((ev.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            self._start(ev.get("index"), ev.get("content_block"))
            b = self.blocks[ev["index"]]
            if b.kind == "text" and b.text:
                return [TextDelta("".join(b.text))]
        elif kind == "content_block_delta":
            return self._delta(self._block(ev), ev.get("delta") or {})
        elif kind == "content_block_stop":
            b = self._block(ev)
            b.done = True
            if b.kind == "tool_use":
                args = "".join(b.text) or (json.dumps(b.input) if b.input else "")
                return [ToolCallEvent(ToolCallRequest(b.id or None, b.name, args))]
        elif kind == "message_delta":
            stop = (ev.get("delta") or {}).get("stop_reason")
            if stop:
                self.stop = stop
            self._usage(ev.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _block(self, ev: dict[str, Any]) -> _Block:
        index = ev.get("index")
        b = self.blocks.get(index) if isinstance(index, int) else None
        if b is None:
            raise MalformedStream(f"event for unknown content block {ev.get('index')!r}")
        return b

    def _start(self, index: Any, cb: Any) -> None:
        if not isinstance(index, int) or isinstance(index, bool) or not isinstance(cb, dict):
            raise MalformedStream("content_block_start without index or block")
        kind = cb.get("type") or "unknown"
        b = _Block(kind, id=cb.get("id") or "", name=cb.get("name") or "", input=cb.get("input"))
        if kind == "text" and cb.get("text"):
            b.text.append(cb["text"])
        if kind == "thinking":
            if cb.get("thinking"):
                b.text.append(cb["thinking"])
            b.signature = cb.get("signature") or ""
        if kind == "redacted_thinking":
            b.data = cb.get("data") or ""
        self.blocks[index] = b

    def _delta(self, b: _Block, d: dict[str, Any]) -> list[ModelEvent]:
        kind = d.get("type")
        if kind == "text_delta":
            text = d.get("text") or ""
            b.text.append(text)
            return [TextDelta(text)] if text else []
        if kind == "thinking_delta":
            text = d.get("thinking") or ""
            b.text.append(text)
            return [ThoughtDelta(text)] if text else []
        if kind == "signature_delta":
            b.signature += d.get("signature") or ""
        elif kind == "input_json_delta":
            b.text.append(d.get("partial_json") or "")
        return []

    def _usage(self, u: Any) -> None:
        if not isinstance(u, dict):
            return
        # message_delta repeats counts cumulatively; a field it leaves out keeps its message_start value.
        for attr, key in (
            ("input_tokens", "input_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_write", "cache_creation_input_tokens"),
            ("output_tokens", "output_tokens"),
        ):
            value = u.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(self, attr, value)

    def finished(self) -> Finished:
        if not self.stopped:
            raise MalformedStream("the stream ended before message_stop")
        thinking: list[dict[str, Any]] = []
        for _, b in sorted(self.blocks.items()):
            if b.kind == "thinking":
                thinking.append({"type": "thinking", "thinking": "".join(b.text), "signature": b.signature})
            elif b.kind == "redacted_thinking":
                thinking.append({"type": "redacted_thinking", "data": b.data})
        has_tools = any(b.kind == "tool_use" for b in self.blocks.values())
        stop = _STOP.get(self.stop or "", "tool_use" if has_tools else "end_turn")
        usage = Usage(
            input_tokens=self.input_tokens + self.cache_read + self.cache_write,
            output_tokens=self.output_tokens,
            cached_read_tokens=self.cache_read,
            cached_write_tokens=self.cache_write,
        )
        return Finished(stop, usage, {STATE_KEY: {"thinking": thinking}} if thinking else None)


class AnthropicModel(ProviderModel):
    """One configured Claude model. Safe to share between sessions."""

    key_env = "ANTHROPIC_API_KEY"

    default_base_url = "https://api.anthropic.com"
    path = "/v1/messages"

    def _auth_headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if self._api_key:  # a gateway configured by base_url may authenticate on its own
            headers["x-api-key"] = self._api_key
        return headers

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        system, messages, tools = to_anthropic(request, images=self.accepts_images)
        max_tokens = self.entry.max_tokens or DEFAULT_MAX_TOKENS
        params: dict[str, Any] = {"model": self.entry.model, "messages": messages, "stream": True}
        if system:
            params["system"] = system
        if tools:
            params["tools"] = tools
        if self.entry.thinking_budget:
            budget = max(1024, self.entry.thinking_budget)  # the API's minimum
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
            max_tokens = max(max_tokens, budget + 1024)  # the answer must fit after the thinking
        params["max_tokens"] = max_tokens
        return params

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self._check_configured()
        assembler = AnthropicAssembler()
        async for ev in self._drive(self._params(request), assembler):
            yield ev
        yield assembler.finished()
