"""`OpenAIChatModel`: any OpenAI-compatible Chat Completions server (OpenAI, llama.cpp, vLLM, Ollama, LM Studio,
OpenRouter, DeepSeek, Moonshot, Mistral…) as a streaming `ModelClient`.

Owns the conversion of our provider-neutral history to Chat Completions messages and the assembly of the streamed
reply: text deltas, reasoning deltas (`reasoning_content`, or `reasoning` as OpenRouter and Ollama name it) as
thoughts, and tool calls whose argument fragments arrive by `index`, possibly interleaved across parallel calls.
The `openai` SDK is imported on the first call, never at start-up.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
from runtime.models.provider import ProviderModel
from runtime.models.retry import (
    MalformedStream,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI


_FINISH: dict[str, ModelStop] = {
    "stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens",
    "content_filter": "refusal",
}
# Servers that need no key still get a syntactically valid one: the SDK refuses to send a request without.
_NO_KEY = "no-key-configured"


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
                    parts.append({"type": "image_url", "image_url": {"url": f"data:{p.mime_type};base64,{p.data}"}}
                                 if images else image_omitted_note(p))
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
                m["tool_calls"] = [{"id": c.id, "type": "function",
                                    "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                                   for c in msg.tool_calls]
            if send_reasoning and msg.thinking:
                m["reasoning_content"] = msg.thinking
            if m["content"] is None and "tool_calls" not in m:
                m["content"] = ""
            out.append(m)
        elif isinstance(msg, ToolResultMessage):
            out.append({"role": "tool", "tool_call_id": msg.call_id, "content": msg.output})
    return out


def to_openai_tools(request: ModelRequest) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.parameters}} for t in request.tools]


@dataclass
class _PendingCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamAssembler:
    """Turns Chat Completions chunks (as plain dicts or SDK objects) into our events. Sans-I/O."""

    calls: dict[int, _PendingCall] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)
    finish: str | None = None
    usage: Usage | None = None

    def feed(self, chunk: Any) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        usage = _get(chunk, "usage")
        if usage:
            self.usage = _usage(usage)
        for choice in _get(chunk, "choices") or ():
            if (_get(choice, "index") or 0) != 0:
                continue  # we never ask for n > 1
            delta = _get(choice, "delta") or {}
            reasoning = _get(delta, "reasoning_content") or _get(delta, "reasoning")
            if isinstance(reasoning, str) and reasoning:
                events.append(ThoughtDelta(reasoning))
            content = _get(delta, "content")
            if isinstance(content, str) and content:
                events.append(TextDelta(content))
            for tc in _get(delta, "tool_calls") or ():
                self._feed_call(tc)
            if _get(choice, "finish_reason"):
                self.finish = _get(choice, "finish_reason")
        return events

    def _feed_call(self, tc: Any) -> None:
        index = _get(tc, "index")
        if not isinstance(index, int):
            index = len(self.order)
        fn = _get(tc, "function") or {}
        cid = _get(tc, "id")
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
        name = _get(fn, "name")
        if name:
            # Names arrive whole in practice; a few servers repeat them on every fragment.
            pending.name = name if not pending.name or pending.name == name else pending.name + name
        args = _get(fn, "arguments")
        if args:
            pending.arguments.append(args)

    def finish_events(self) -> list[ModelEvent]:
        calls = [ToolCallRequest(self.calls[i].id, self.calls[i].name, "".join(self.calls[i].arguments))
                 for i in sorted(self.order)]
        stop = _FINISH.get(self.finish or "", "tool_use" if calls else "end_turn")
        if calls and stop == "end_turn":
            stop = "tool_use"  # some servers say "stop" after tool calls
        out: list[ModelEvent] = [ToolCallEvent(c) for c in calls]
        out.append(Finished(stop, self.usage or Usage()))
        return out


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(key)
    value = getattr(obj, key, None)
    if value is None:
        extra = getattr(obj, "model_extra", None)  # non-standard fields such as reasoning_content
        if isinstance(extra, dict):
            value = extra.get(key)
    return value


def _usage(u: Any) -> Usage:
    details = _get(u, "prompt_tokens_details") or {}
    out_details = _get(u, "completion_tokens_details") or {}
    return Usage(
        input_tokens=int(_get(u, "prompt_tokens") or 0),
        output_tokens=int(_get(u, "completion_tokens") or 0),
        cached_read_tokens=int(_get(details, "cached_tokens") or 0),
        thought_tokens=int(_get(out_details, "reasoning_tokens") or 0),
    )


class OpenAIChatModel(ProviderModel):
    """One configured model on an OpenAI-compatible server. Safe to share between sessions."""

    key_env = "OPENAI_API_KEY"
    no_key_hint = ("or, for a server that needs no key, set OPENAI_BASE_URL or base_url under [providers.{name}] in "
                   "the config file")

    def _make_client(self) -> AsyncOpenAI:
        import openai

        return openai.AsyncOpenAI(
            api_key=self._api_key or _NO_KEY,
            base_url=self.settings.base_url or None,
            # Our own retry loop decides (it knows whether output reached the user); the SDK must not.
            max_retries=0,
            timeout=openai.Timeout(self.settings.idle_timeout, connect=self.settings.connect_timeout),
            default_headers=dict(self.settings.headers) or None,
        )

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.entry.model,
            "messages": to_openai_messages(request, images=self.accepts_images,
                                           send_reasoning=self.settings.send_reasoning),
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

    async def _attempt(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self._check_configured()
        client = self._sdk()
        assembler = StreamAssembler()
        async for ev in self._drive(lambda: client.chat.completions.create(**self._params(request)), assembler.feed):
            yield ev
        if assembler.finish is None and not assembler.calls and assembler.usage is None:
            raise MalformedStream("the stream ended without a finish reason")
        for ev in assembler.finish_events():
            yield ev

