"""The streaming hot path writes exactly the bytes the general path would (a text chunk is a plain
`session/update`), and records the same frame when a transcript is being recorded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_server import wire
from acp_server.session import AcpSession
from runtime.events import TextChunk, ThoughtChunk
from runtime.loop import RuntimeOptions


class FakeConn:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.recorded: list[Any] = []

    def emit_encoded_nowait(self, data: bytes, frame, *args) -> bool:
        self.sent.append(data)
        self.recorded.append(frame(*args))
        return True

    async def emit_encoded(self, data: bytes, frame, *args) -> None:
        self.sent.append(data)
        self.recorded.append(frame(*args))

    async def emit_frame(self, frame: dict[str, Any]) -> None:
        self.sent.append(wire.encode(frame))
        self.recorded.append(frame)


@pytest.mark.anyio
@pytest.mark.parametrize("text", ["tok ", "", 'line\nbreak "quoted" \\ back', "ünïcödé ✓", "\x00\x1f"])
async def test_text_and_thought_chunks_are_encoded_exactly_like_any_session_update(tmp_path, text):
    conn = FakeConn()
    session = AcpSession(
        id="sess_x",
        cwd=str(tmp_path),
        mode="safe",
        model=None,
        conn=conn,  # type: ignore[arg-type]
        options=RuntimeOptions(),
    )
    await session.emit(TextChunk(text))
    await session.emit(ThoughtChunk(text))
    await session.send_update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
    await session.send_update({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}})
    fast_msg, fast_thought, slow_msg, slow_thought = conn.sent
    assert fast_msg == slow_msg and fast_thought == slow_thought
    assert fast_msg.endswith(b"\n") and fast_msg.count(b"\n") == 1
    assert json.loads(fast_msg) == conn.recorded[0]
