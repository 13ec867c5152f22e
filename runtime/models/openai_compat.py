"""`OpenAIChatModel`: any OpenAI-compatible Chat Completions server (OpenAI, llama.cpp, vLLM, Ollama, LM Studio,
OpenRouter, DeepSeek, Moonshot, Mistral…) as a streaming `ModelClient`.

Owns the conversion of our provider-neutral history to Chat Completions messages and the assembly of the streamed
reply: text deltas, reasoning deltas (`reasoning_content`, or `reasoning` as OpenRouter and Ollama name it) as
thoughts, and tool calls whose argument fragments arrive by `index`, possibly interleaved across parallel calls.
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

_FINISH: dict[str, ModelStop] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def image_omitted_note(part: ImagePart) -> dict[str, Any]:
    return {"type": "text", "text": f"[an image ({part.mime_type}) was attached but this model does not take images]"}


def to_openai_messages(request: ModelRequest, *, images: bool, send_reasoning: bool = False) -> list[dict[str, Any]]:
    """Our history as Chat Completions `messages`."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for msg in request.messages:
        if isinstance(msg, UserMessage):
            parts: list[dict[str, Any]] = []
            for p in msg.parts:
                if isinstance(p, ImagePart):
                    parts.append(
                        {"type": "image_url", "image_url": {"url": f"data:{p.mime_type};base64,{p.data}"}}
                        if images
                        else image_omitted_note(p)
                    )
                else:
                    parts.append({"type": "text", "text": p.text})
            # Plain strings are what every compatible server understands; parts only when there is an image.
            if all(p["type"] == "text" for p in parts):
                out.append({"role": "user", "content": "\n\n".join(p["text"] for p in parts)})
            else:
                out.append({"role": "user", "content": parts})
        elif isinstance(msg, AssistantMessage):
            m: dict[str, Any] = {"role": "assistant", "content": msg.text or None}
            if msg.tool_calls:
                m["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                    for c in msg.tool_calls
                ]
            if send_reasoning and msg.thinking:
                m["reasoning_content"] = msg.thinking
            if m["content"] is None and "tool_calls" not in m:
                m["content"] = ""
            out.append(m)
        elif isinstance(msg, ToolResultMessage):
            out.append({"role": "tool", "tool_call_id": msg.call_id, "content": msg.output})
    return out


def to_openai_tools(request: ModelRequest) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in request.tools
    ]


@dataclass
class _PendingCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamAssembler:
    """Turns Chat Completions stream events into ours. Sans-I/O.

    Per the API reference each event's data is a `chat.completion.chunk` and the stream ends with `data: [DONE]`;
    with `stream_options.include_usage` the last chunk before it has `choices: []` and the usage (some servers send
    `choices: null`, or put usage on the finishing chunk). A chunk `{"error": …}` (vLLM, OpenRouter, LiteLLM) or an
    event named `error` is the server failing mid-stream.
    """

    calls: dict[int, _PendingCall] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)
    finish: str | None = None
    usage: Usage | None = None
    done: bool = False

    def feed(self, event: str, data: str) -> list[ModelEvent]:
        if data.strip() == "[DONE]":
            self.done = True
            return []
        if not data.strip():
            return []
        chunk = json_data(data)
        if not isinstance(chunk, dict):
            raise MalformedStream(f"a chunk is not an object: {data[:80]!r}")
        if event == "error" or chunk.get("error"):
            err = chunk.get("error", chunk)
            message, etype = json_error(chunk, "the server reported an error mid-stream")
            raise ProviderStreamError(message, etype, err.get("code") if isinstance(err, dict) else None)
        return self.feed_chunk(chunk)

    def feed_chunk(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = _usage(usage)
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or (choice.get("index") or 0) != 0:
                continue  # we never ask for n > 1
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                events.append(ThoughtDelta(reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                events.append(TextDelta(content))
            for tc in delta.get("tool_calls") or ():
                if isinstance(tc, dict):
                    self._feed_call(tc)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        return events

    def _feed_call(self, tc: dict[str, Any]) -> None:
        index = tc.get("index")
        if not isinstance(index, int):
            index = len(self.order)
        fn = tc.get("function") or {}
        cid = tc.get("id")
        pending = self.calls.get(index)
        if pending is not None and cid and pending.id and cid != pending.id and pending.name:
            # Some servers send each complete call at index 0; a new id means a new call, not more fragments.
            index = max(self.calls) + 1
            pending = None
        if pending is None:
            pending = self.calls[index] = _PendingCall()
            self.order.append(index)
        if cid:
            pending.id = cid
        name = fn.get("name")
        if name:
            # Names arrive whole in practice; a few servers repeat them on every fragment.
            pending.name = name if not pending.name or pending.name == name else pending.name + name
        args = fn.get("arguments")
        if isinstance(args, str) and args:
            pending.arguments.append(args)
        elif isinstance(args, dict):  # a few servers send the arguments as an object
            pending.arguments.append(json.dumps(args))

    def finish_events(self) -> list[ModelEvent]:
        calls = [
            ToolCallRequest(self.calls[i].id, self.calls[i].name, "".join(self.calls[i].arguments))
            for i in sorted(self.order)
        ]
        stop = _FINISH.get(self.finish or "", "tool_use" if calls else "end_turn")
        if calls and stop == "end_turn":
            stop = "tool_use"  # some servers say "stop" after tool calls
        out: list[ModelEvent] = [ToolCallEvent(c) for c in calls]
        out.append(Finished(stop, self.usage or Usage()))
        return out


def _int(d: Any, key: str) -> int:
    value = d.get(key) if isinstance(d, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(u: dict[str, Any]) -> Usage:
    return Usage(
        input_tokens=_int(u, "prompt_tokens"),
        output_tokens=_int(u, "completion_tokens"),
        cached_read_tokens=_int(u.get("prompt_tokens_details"), "cached_tokens"),
        thought_tokens=_int(u.get("completion_tokens_details"), "reasoning_tokens"),
    )


class OpenAIChatModel(ProviderModel):
    """One configured model on an OpenAI-compatible server. Safe to share between sessions."""

    key_env = "OPENAI_API_KEY"
    default_base_url = "https://api.openai.com/v1"
    path = "/chat/completions"

    def _auth_headers(self) -> dict[str, str]:
        # A server that needs no key gets no Authorization header at all.
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.entry.model,
            "messages": to_openai_messages(
                request, images=self.accepts_images, send_reasoning=self.settings.send_reasoning
            ),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tools = to_openai_tools(request)
        if tools:
            params["tools"] = tools
        if self.entry.max_tokens:
            # OpenAI's own reasoning models refuse `max_tokens`; most compatible servers only know `max_tokens`.
            params["max_completion_tokens" if self.settings.base_url is None else "max_tokens"] = self.entry.max_tokens
        if self.entry.reasoning_effort:
            params["reasoning_effort"] = self.entry.reasoning_effort
        return params

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self._check_configured()
        assembler = StreamAssembler()
        async for ev in self._drive(self._params(request), assembler):
            yield ev
        if assembler.finish is None and not assembler.calls and assembler.usage is None:
            raise MalformedStream("the stream ended without a finish reason")
        for ev in assembler.finish_events():
            yield ev
