"""The scripted model (`--model scripted:PATH`), exactly as docs/scripted-model.md describes it.

Deterministic: each model call consumes the next entry of `responses`. One `ScriptedModel` instance belongs to one
session, so every session keeps its own position (`position` can be saved and restored with the session).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

# anyio and the conversation records are lazy: the CLI imports this module (ScriptError) on the way to answering
# `initialize`, before they are needed.
from runtime import lazy
from runtime.models.errors import ModelError

if TYPE_CHECKING:
    from runtime.models.base import ModelEvent, ModelRequest, ModelStop

EXHAUSTED_TEXT = "(scripted model: no more responses)"
SLICE_S = 0.001
"""The longest the scripted stream runs without yielding to the event loop."""
_ENTRY_KEYS = {"text", "chunks", "thinking", "tool_calls", "delay_ms", "stop", "error", "usage"}


class ScriptError(ValueError):
    """A malformed script: the message names the file and the problem."""


@dataclass(frozen=True, slots=True)
class Script:
    source: str
    responses: tuple[dict[str, Any], ...]


def load_script(path: str | Path) -> Script:
    """Read and check a script file. Raises `ScriptError` naming the file and what is wrong."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ScriptError(f"scripted model file {p}: cannot be read ({exc.strerror or exc})") from None
    return parse_script(raw, str(p))


def parse_script(raw: bytes | str, source: str = "<script>") -> Script:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ScriptError(f"scripted model file {source}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("responses"), list):
        raise ScriptError(f'scripted model file {source}: expected an object with a "responses" list')
    for i, entry in enumerate(doc["responses"]):
        _check_entry(f"scripted model file {source}: responses[{i}]", entry)
    return Script(source, tuple(doc["responses"]))


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _usage(u: Any) -> bool:
    return isinstance(u, dict) and all(_integer(u.get(k, 0)) for k in ("input_tokens", "output_tokens"))


_Field = tuple[str, Callable[[Any], bool], str]
_ENTRY_FIELDS: tuple[_Field, ...] = (
    ("text", lambda v: isinstance(v, str), "must be a string"),
    ("thinking", lambda v: isinstance(v, str), "must be a string"),
    ("error", lambda v: isinstance(v, str), "must be a string"),
    ("chunks", lambda v: _integer(v) and v >= 1, "must be a positive integer"),
    (
        "delay_ms",
        lambda v: isinstance(v, int | float) and not isinstance(v, bool) and v >= 0,
        "must be a non-negative number",
    ),
    ("stop", lambda v: v in ("max_tokens", "refusal"), 'must be "max_tokens" or "refusal"'),
    ("usage", _usage, 'must be {"input_tokens": N, "output_tokens": M}'),
    ("tool_calls", lambda v: isinstance(v, list), "must be a list"),
)
"""Each optional key of a response entry, what its value must be, and what the error says (in this order)."""
_CALL_FIELDS: tuple[_Field, ...] = (
    ("name", lambda v: isinstance(v, str), "must be a string"),
    ("id", lambda v: v is None or isinstance(v, str), "must be a string"),
    ("arguments", lambda v: isinstance(v, dict | str), "must be an object or a string"),
)


def _check_fields(where: str, obj: dict[str, Any], fields: tuple[_Field, ...]) -> None:
    for key, fits, must in fields:
        if key in obj and not fits(obj[key]):
            raise ScriptError(f"{where}.{key} {must}")


def _check_entry(where: str, entry: Any) -> None:
    if not isinstance(entry, dict):
        raise ScriptError(f"{where} is not an object")
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        raise ScriptError(f"{where} has unknown field(s): {', '.join(sorted(unknown))}")
    _check_fields(where, entry, _ENTRY_FIELDS)
    for j, call in enumerate(entry.get("tool_calls", [])):
        if not isinstance(call, dict) or "name" not in call:
            raise ScriptError(f'{where}.tool_calls[{j}] must be an object with a "name"')
        _check_fields(f"{where}.tool_calls[{j}]", call, _CALL_FIELDS)


_WORD = re.compile(r"\s*\S+|\s+")


def split_text(text: str, chunks: int | None) -> Iterator[str]:
    """Split text into `chunks` pieces, or one piece per word (each word with the whitespace before it; trailing
    whitespace is a piece of its own) when not given. Lazy: the first piece is ready before the rest is split."""
    if not text:
        return
    if chunks is None:
        for m in _WORD.finditer(text):
            yield m.group()
        return
    n = min(chunks, len(text))
    size, extra = divmod(len(text), n)
    start = 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        yield text[start:end]
        start = end


class ScriptedModel:
    """One session's view of a script. Not shared between sessions."""

    accepts_images = False

    def __init__(self, script: Script, position: int = 0) -> None:
        self.script = script
        self.position = position

    @property
    def name(self) -> str:
        return f"scripted:{self.script.source}"

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        if self.position >= len(self.script.responses):
            self.position += 1
            yield lazy.model_base.TextDelta(EXHAUSTED_TEXT)
            yield lazy.model_base.Finished("end_turn")
            return
        entry = self.script.responses[self.position]
        self.position += 1
        delay = entry.get("delay_ms")
        if delay:
            await lazy.anyio.sleep(delay / 1000)
        if "error" in entry:
            raise ModelError(entry["error"])
        # Like a provider's stream, which parses many deltas out of one network read, the pieces come in bursts:
        # the stream yields to the event loop (and to a cancel) at least every SLICE_S, not after every piece.
        deadline = time.perf_counter() + SLICE_S
        if entry.get("thinking"):
            for piece in split_text(entry["thinking"], None):
                yield lazy.model_base.ThoughtDelta(piece)
                if time.perf_counter() >= deadline:
                    await lazy.anyio_lowlevel.checkpoint()
                    deadline = time.perf_counter() + SLICE_S
        for piece in split_text(entry.get("text", ""), entry.get("chunks")):
            yield lazy.model_base.TextDelta(piece)
            if time.perf_counter() >= deadline:
                await lazy.anyio_lowlevel.checkpoint()
                deadline = time.perf_counter() + SLICE_S
        await lazy.anyio_lowlevel.checkpoint()
        calls = entry.get("tool_calls") or []
        for call in calls:
            args = call.get("arguments", {})
            raw = args if isinstance(args, str) else orjson.dumps(args).decode()
            yield lazy.model_base.ToolCallEvent(lazy.model_base.ToolCallRequest(call.get("id"), call["name"], raw))
        u = entry.get("usage") or {}
        usage = lazy.model_base.Usage(input_tokens=u.get("input_tokens", 0), output_tokens=u.get("output_tokens", 0))
        stop: ModelStop = entry.get("stop") or ("tool_use" if calls else "end_turn")  # checked by load_script
        yield lazy.model_base.Finished(stop, usage)
