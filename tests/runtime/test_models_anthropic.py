"""The Anthropic provider against a real local HTTP server: streaming, tool_use, thinking round trip, caching,
faults."""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio
import pytest

from runtime.models.anthropic_messages import AnthropicModel
from runtime.models.base import (
    AssistantMessage,
    Finished,
    ImagePart,
    ModelError,
    ModelEvent,
    ModelRequest,
    TextDelta,
    TextPart,
    ThoughtDelta,
    ToolCallEvent,
    ToolCallRequest,
    ToolResultMessage,
    ToolSchema,
    UserMessage,
)
from runtime.models.config import ModelEntry, ProviderSettings
from tests.support.fake_providers import (
    ANTHROPIC_PATH,
    FAST_RETRIES,
    Cut,
    Hang,
    Reply,
    anthropic_stream,
    error_body,
    sse,
)

KEY = "sk-ant-test-0123456789abcdef"
TOOLS = (
    ToolSchema("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}),
    ToolSchema("write_file", "Write a file", {"type": "object"}),
)


@pytest.fixture
async def model(fp):
    made: list[AnthropicModel] = []

    def make(*, thinking: int | None = None, **settings: Any) -> AnthropicModel:
        opts: dict[str, Any] = dict(FAST_RETRIES)
        opts.update(settings)
        provider = ProviderSettings("anthropic", "anthropic", base_url=fp.url, api_key_env="ANTHROPIC_API_KEY", **opts)
        entry = ModelEntry("anthropic:claude-test", "anthropic", "claude-test", "claude-test", thinking_budget=thinking)
        made.append(AnthropicModel(entry, provider, KEY))
        return made[-1]

    yield make
    for m in made:
        await m.aclose()


def request(*messages: Any) -> ModelRequest:
    return ModelRequest("You are a test.", tuple(messages) or (UserMessage((TextPart("hi"),)),), TOOLS)


async def collect(m: AnthropicModel, req: ModelRequest | None = None) -> list[ModelEvent]:
    with anyio.fail_after(15):
        return [ev async for ev in m.stream(req or request())]


@pytest.mark.anyio
async def test_text_streams_and_usage_counts_cached_prompt_tokens(fp, model):
    fp.anthropic(Reply(frames=anthropic_stream(["Hel", "lo"], usage=(10, 6), cache_read=100, cache_write=20)))
    events = await collect(model())
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.stop == "end_turn" and fin.provider_state is None
    assert (fin.usage.input_tokens, fin.usage.output_tokens) == (130, 6)
    assert (fin.usage.cached_read_tokens, fin.usage.cached_write_tokens) == (100, 20)
    sent = fp.requests_to(ANTHROPIC_PATH)[0]
    assert sent.body["model"] == "claude-test" and sent.body["stream"] is True and sent.body["max_tokens"] > 0
    assert "anthropic-version" in sent.headers


@pytest.mark.anyio
async def test_tool_use_input_is_assembled_from_json_deltas_for_each_block(fp, model):
    fp.anthropic(
        Reply(
            frames=anthropic_stream(
                "Two reads.",
                tool_uses=[
                    ("toolu_1", "read_file", ['{"pa', 'th": ', '"a.txt"}']),
                    ("toolu_2", "read_file", ['{"path": "b.txt"}']),
                ],
            )
        )
    )
    events = await collect(model())
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCallRequest("toolu_1", "read_file", '{"path": "a.txt"}'),
        ToolCallRequest("toolu_2", "read_file", '{"path": "b.txt"}'),
    ]
    assert events[-1] == Finished("tool_use", events[-1].usage)  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_thinking_with_its_signature_is_sent_back_in_the_next_request(fp, model):
    m = model(thinking=2000)
    fp.anthropic(
        Reply(
            frames=anthropic_stream(
                "Reading.",
                thinking=["I should ", "read it."],
                signature="SIG==",
                tool_uses=[("toolu_1", "read_file", ['{"path": "a"}'])],
            )
        ),
        Reply(frames=anthropic_stream("Done.")),
    )
    first = await collect(m)
    assert "".join(e.text for e in first if isinstance(e, ThoughtDelta)) == "I should read it."
    fin = first[-1]
    assert isinstance(fin, Finished) and fin.provider_state is not None
    # What the runtime stores and sends back on the next call of the turn:
    history = (
        UserMessage((TextPart("hi"),)),
        AssistantMessage(
            "Reading.",
            "I should read it.",
            (ToolCallRequest("toolu_1", "read_file", '{"path": "a"}'),),
            fin.provider_state,
        ),
        ToolResultMessage("toolu_1", "read_file", "file a"),
    )
    await collect(m, request(*history))
    first_body, second_body = (r.body for r in fp.requests_to(ANTHROPIC_PATH))
    assert first_body["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert first_body["max_tokens"] > 2000
    assistant = second_body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {"type": "thinking", "thinking": "I should read it.", "signature": "SIG=="}
    assert assistant["content"][1:] == [
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
    ]
    results = second_body["messages"][2]
    assert results["role"] == "user"
    assert results["content"][0]["type"] == "tool_result" and results["content"][0]["tool_use_id"] == "toolu_1"


@pytest.mark.anyio
async def test_redacted_thinking_is_kept_verbatim(fp, model):
    frames = (
        sse(
            {
                "type": "message_start",
                "message": {
                    "id": "m",
                    "type": "message",
                    "role": "assistant",
                    "model": "m",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                },
            },
            "message_start",
        ),
        sse(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "redacted_thinking", "data": "OPAQUE"},
            },
            "content_block_start",
        ),
        sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        *anthropic_stream("ok")[2:],
    )
    # anthropic_stream numbers its text block 0; renumber it after the redacted block.
    frames = tuple(f.replace(b'"index": 0', b'"index": 1') if i >= 3 else f for i, f in enumerate(frames))
    fp.anthropic(Reply(frames=frames))
    events = await collect(model(thinking=1024))
    fin = events[-1]
    assert isinstance(fin, Finished)
    assert fin.provider_state == {"anthropic": {"thinking": [{"type": "redacted_thinking", "data": "OPAQUE"}]}}


@pytest.mark.anyio
async def test_prompt_caching_marks_tools_system_and_the_newest_message(fp, model):
    fp.anthropic(Reply(frames=anthropic_stream("ok")))
    await collect(
        model(), request(UserMessage((TextPart("one"),)), AssistantMessage("two"), UserMessage((TextPart("three"),)))
    )
    body = fp.requests_to(ANTHROPIC_PATH)[0].body
    assert body["system"] == [{"type": "text", "text": "You are a test.", "cache_control": {"type": "ephemeral"}}]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["messages"][0]["content"][-1]
    marks = str(body).count("cache_control")
    assert marks <= 4  # the API allows at most four breakpoints


@pytest.mark.anyio
async def test_images_become_base64_image_blocks(fp, model):
    fp.anthropic(Reply(frames=anthropic_stream("a cat")))
    await collect(model(), request(UserMessage((TextPart("what is it?"), ImagePart("aGk=", "image/png")))))
    content = fp.requests_to(ANTHROPIC_PATH)[0].body["messages"][0]["content"]
    assert content[1]["source"] == {"type": "base64", "media_type": "image/png", "data": "aGk="}


@pytest.mark.anyio
async def test_an_overloaded_error_event_before_output_is_retried(fp, model):
    overloaded = (
        anthropic_stream("x")[0],
        sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error"),
    )
    fp.anthropic(Reply(frames=overloaded), Reply(frames=anthropic_stream("second time lucky")))
    events = await collect(model())
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "second time lucky"
    assert len(fp.requests_to(ANTHROPIC_PATH)) == 2


@pytest.mark.anyio
async def test_a_cut_after_text_is_an_error_and_the_partial_text_stays(fp, model):
    frames = anthropic_stream("partial")
    fp.anthropic(Reply(frames=(*frames[:5], Cut())), Reply(frames=anthropic_stream("never asked for")))
    seen: list[ModelEvent] = []
    with pytest.raises(ModelError) as info, anyio.fail_after(10):
        async for ev in model().stream(request()):
            seen.append(ev)
    assert [e.text for e in seen if isinstance(e, TextDelta)] == ["partial"]
    assert "broke after the reply had started" in info.value.message
    assert len(fp.requests_to(ANTHROPIC_PATH)) == 1


@pytest.mark.anyio
async def test_a_stream_without_message_stop_is_not_taken_as_complete(fp, model):
    fp.anthropic(Reply(frames=anthropic_stream("half")[:-2]))
    with pytest.raises(ModelError) as info:
        await collect(model())
    assert "message_stop" in info.value.message


@pytest.mark.anyio
async def test_403_is_an_auth_error_and_the_key_never_shows(fp, model, caplog):
    caplog.set_level(logging.DEBUG)
    fp.anthropic(Reply(403, body=error_body("anthropic", 403, f"key {KEY} may not use this model")))
    with pytest.raises(ModelError) as info:
        await collect(model())
    assert info.value.auth and KEY not in info.value.message and "ANTHROPIC_API_KEY" in info.value.message
    assert KEY not in caplog.text


@pytest.mark.anyio
async def test_529_overloaded_until_retries_run_out_gives_one_line(fp, model):
    fp.anthropic(*[Reply(529, body=error_body("anthropic", 529, "Overloaded"))] * 3)
    with pytest.raises(ModelError) as info:
        await collect(model(max_retries=2))
    assert info.value.message == (
        f"anthropic failed (HTTP 529) after 3 attempts: Overloaded (at {fp.url}{ANTHROPIC_PATH})"
    )


@pytest.mark.anyio
async def test_cancelling_mid_stream_closes_the_connection_at_once(fp, model):
    fp.anthropic(Reply(frames=(*anthropic_stream("streaming")[:5], Hang())))
    got_text = anyio.Event()

    async def consume() -> None:
        async for ev in model().stream(request()):
            if isinstance(ev, TextDelta):
                got_text.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await got_text.wait()
            cancelled_at = time.monotonic()
            tg.cancel_scope.cancel()
        saw = await anyio.to_thread.run_sync(fp.disconnected.wait, 3.0)
    assert saw and fp.disconnects[0] - cancelled_at < 0.5
