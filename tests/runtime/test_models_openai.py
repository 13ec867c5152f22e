"""The OpenAI-compatible provider against a real local HTTP server: streaming, tools, reasoning, faults, cancel."""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio
import pytest

from runtime.models import ModelFactory, parse_model_spec
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
from runtime.models.config import ModelEntry, ModelsConfig, ProviderSettings
from runtime.models.openai_compat import OpenAIChatModel
from tests.support.fake_providers import (
    FAST_RETRIES,
    OPENAI_PATH,
    Cut,
    FakeProviders,
    Hang,
    Pause,
    Reply,
    error_body,
    openai_stream,
    sse,
)

KEY = "sk-test-0123456789abcdef"
TOOLS = (ToolSchema("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}),)


@pytest.fixture
async def model(fp):
    """Builds models on the fake server with millisecond retry delays, and closes their connection pools."""
    made: list[OpenAIChatModel] = []

    def make(*, key: str | None = KEY, images: bool | None = None, **settings: Any) -> OpenAIChatModel:
        made.append(build(fp, key=key, images=images, **settings))
        return made[-1]

    yield make
    for m in made:
        await m.aclose()


def build(fp: FakeProviders, *, key: str | None = KEY, images: bool | None = None, **settings: Any) -> OpenAIChatModel:
    opts: dict[str, Any] = dict(FAST_RETRIES)
    opts.update(settings)
    provider = ProviderSettings("openai", "openai", base_url=fp.url + "/v1", api_key_env="OPENAI_API_KEY", **opts)
    entry = ModelEntry("openai:test-model", "openai", "test-model", "test-model", images=images)
    return OpenAIChatModel(entry, provider, key)


def request(*messages: Any, text: str = "hi") -> ModelRequest:
    msgs = messages or (UserMessage((TextPart(text),)),)
    return ModelRequest("You are a test.", tuple(msgs), TOOLS)


async def collect(m: OpenAIChatModel, req: ModelRequest | None = None) -> list[ModelEvent]:
    with anyio.fail_after(15):
        return [ev async for ev in m.stream(req or request())]


@pytest.mark.anyio
async def test_text_streams_as_deltas_and_usage_is_reported(fp, model):
    fp.openai(Reply(frames=openai_stream(["Hel", "lo", " world"], usage=(30, 4), cached=10)))
    events = await collect(model())
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo", " world"]
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.stop == "end_turn"
    assert (fin.usage.input_tokens, fin.usage.output_tokens, fin.usage.cached_read_tokens) == (30, 4, 10)
    sent = fp.requests_to(OPENAI_PATH)[0]
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["stream"] is True and sent.body["model"] == "test-model"
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"][0] == {"role": "system", "content": "You are a test."}
    assert sent.body["tools"][0]["function"]["name"] == "read_file"


@pytest.mark.anyio
async def test_parallel_tool_calls_are_assembled_from_interleaved_fragments_by_index(fp, model):
    fp.openai(
        Reply(
            frames=openai_stream(
                "Reading both.",
                tool_calls=[
                    ("call_a", "read_file", ['{"pa', 'th": "a', '.txt"}']),
                    ("call_b", "read_file", ['{"path"', ': "b.txt"}']),
                ],
                interleave_tools=True,
            )
        )
    )
    events = await collect(model())
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCallRequest("call_a", "read_file", '{"path": "a.txt"}'),
        ToolCallRequest("call_b", "read_file", '{"path": "b.txt"}'),
    ]
    assert isinstance(events[-1], Finished) and events[-1].stop == "tool_use"


@pytest.mark.anyio
async def test_reasoning_content_deltas_become_thoughts_before_the_text(fp, model):
    fp.openai(Reply(frames=openai_stream("42", reasoning=["Let me ", "think."])))
    events = await collect(model())
    assert [type(e) for e in events] == [ThoughtDelta, ThoughtDelta, TextDelta, Finished]
    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == "Let me think."


@pytest.mark.anyio
async def test_history_with_tool_results_and_images_is_sent_in_chat_completions_form(fp, model):
    fp.openai(Reply(frames=openai_stream("ok")))
    history = (
        UserMessage((TextPart("look"), ImagePart("aGVsbG8=", "image/png"))),
        AssistantMessage("Reading.", "thought", (ToolCallRequest("c1", "read_file", '{"path":"a"}'),)),
        ToolResultMessage("c1", "read_file", "contents of a"),
    )
    await collect(model(images=True), request(*history))
    msgs = fp.requests_to(OPENAI_PATH)[0].body["messages"]
    assert msgs[1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}},
        ],
    }
    assert msgs[2] == {
        "role": "assistant",
        "content": "Reading.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"a"}'}}
        ],
    }
    assert msgs[3] == {"role": "tool", "tool_call_id": "c1", "content": "contents of a"}


@pytest.mark.anyio
async def test_a_model_without_images_gets_a_note_instead_of_the_image(fp, model):
    fp.openai(Reply(frames=openai_stream("ok")))
    m = model()  # a self-hosted base URL: text-only unless configured
    assert not m.accepts_images
    await collect(m, request(UserMessage((TextPart("look"), ImagePart("aGVsbG8=", "image/png")))))
    content = fp.requests_to(OPENAI_PATH)[0].body["messages"][1]["content"]
    assert "image_url" not in str(content) and "does not take images" in str(content)


@pytest.mark.anyio
async def test_429_with_retry_after_is_waited_out_then_the_call_succeeds(fp, model):
    fp.openai(
        Reply(429, headers={"Retry-After": "1"}, body=error_body("openai", 429, "slow down")),
        Reply(frames=openai_stream("after the wait")),
    )
    start = time.monotonic()
    events = await collect(model())
    elapsed = time.monotonic() - start
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "after the wait"
    attempts = fp.requests_to(OPENAI_PATH)
    assert len(attempts) == 2
    gap = attempts[1].at - attempts[0].at
    assert 0.9 <= gap < 2.0 and elapsed < 3.0


@pytest.mark.anyio
async def test_retry_after_ms_is_preferred_and_backoff_stops_after_max_retries(fp, model):
    fp.openai(*[Reply(503, headers={"retry-after-ms": "50"}, body=error_body("openai", 503, "busy"))] * 3)
    with pytest.raises(ModelError) as info:
        await collect(model(max_retries=2))
    assert len(fp.requests_to(OPENAI_PATH)) == 3
    assert info.value.message == f"openai failed (HTTP 503) after 3 attempts: busy (at {fp.url}{OPENAI_PATH})"
    assert not info.value.auth


@pytest.mark.anyio
async def test_500_after_partial_output_is_an_error_and_never_retried(fp, model):
    fp.openai(
        Reply(frames=(*openai_stream("partial answer")[:2], Cut())),
        Reply(frames=openai_stream("a second, different answer")),
    )
    seen: list[ModelEvent] = []
    with pytest.raises(ModelError) as info, anyio.fail_after(10):
        async for ev in model().stream(request()):
            seen.append(ev)
    assert [e.text for e in seen if isinstance(e, TextDelta)] == ["partial answer"]
    assert len(fp.requests_to(OPENAI_PATH)) == 1
    assert "broke after the reply had started" in info.value.message and "\n" not in info.value.message


@pytest.mark.anyio
async def test_a_stream_cut_before_any_output_is_retried(fp, model):
    fp.openai(Reply(frames=(Cut(),)), Reply(frames=openai_stream("second try")))
    events = await collect(model())
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "second try"
    assert len(fp.requests_to(OPENAI_PATH)) == 2


@pytest.mark.anyio
async def test_401_is_an_auth_error_without_the_key_even_when_the_server_echoes_it(fp, model, caplog):
    caplog.set_level(logging.DEBUG)
    fp.openai(Reply(401, body=error_body("openai", 401, f"Incorrect API key provided: {KEY}")))
    with pytest.raises(ModelError) as info:
        await collect(model())
    assert info.value.auth
    assert KEY not in info.value.message and "OPENAI_API_KEY" in info.value.message
    assert len(fp.requests_to(OPENAI_PATH)) == 1  # never retried
    assert KEY not in caplog.text


@pytest.mark.anyio
async def test_no_log_record_or_error_ever_contains_the_key(fp, model, caplog):
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "httpx", "httpx2", "httpcore", "httpcore2", "gatewright"):
        caplog.set_level(logging.DEBUG, logger=name)
    fp.openai(Reply(500, body=error_body("openai", 500, f"upstream said {KEY}")), Reply(frames=openai_stream("fine")))
    await collect(model())
    fp.openai(*[Reply(500, body=error_body("openai", 500, f"key {KEY} broke"))] * 4)
    with pytest.raises(ModelError) as info:
        await collect(model())
    assert KEY not in info.value.message
    assert caplog.records  # the retries were logged…
    assert KEY not in caplog.text  # …without the key


@pytest.mark.anyio
async def test_a_slow_first_token_times_out_and_is_retried(fp, model):
    fp.openai(Reply(delay=2.0, frames=openai_stream("too late")), Reply(frames=openai_stream("in time")))
    start = time.monotonic()
    events = await collect(model(first_token_timeout=0.3))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "in time"
    assert time.monotonic() - start < 1.5


@pytest.mark.anyio
async def test_a_first_token_that_never_comes_ends_with_a_clear_timeout(fp, model):
    fp.openai(*[Reply(frames=(Pause(5.0),))] * 2)
    with pytest.raises(ModelError) as info:
        await collect(model(first_token_timeout=0.2, max_retries=1))
    assert info.value.message == (
        f"openai did not answer after 2 attempts: no response within 0.2 s (at {fp.url}{OPENAI_PATH})"
    )


@pytest.mark.anyio
async def test_a_malformed_chunk_is_a_one_line_error_not_a_crash(fp, model):
    fp.openai(Reply(frames=(sse("{this is not json"),)))
    with pytest.raises(ModelError) as info:
        await collect(model())
    assert info.value.message.startswith("openai sent a response gatewright cannot read")
    assert "\n" not in info.value.message and "Traceback" not in info.value.message
    assert len(fp.requests_to(OPENAI_PATH)) == 1


@pytest.mark.anyio
async def test_connection_refused_is_retried_then_reported(fp, model):
    m = model(max_retries=1)
    m.settings = ProviderSettings(
        "openai", "openai", base_url="http://127.0.0.1:9/v1", retry_base_delay=0.01, connect_timeout=1.0
    )
    with pytest.raises(ModelError) as info:
        await collect(m)
    assert info.value.message.startswith("cannot reach openai after 2 attempts")


@pytest.mark.anyio
async def test_cancelling_mid_stream_closes_the_connection_at_once(fp, model):
    fp.openai(Reply(frames=(*openai_stream("first words")[:2], Hang())))
    got_text = anyio.Event()
    cancelled_at = 0.0

    async def consume(scope: anyio.CancelScope) -> None:
        async for ev in model().stream(request()):
            if isinstance(ev, TextDelta):
                got_text.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume, tg.cancel_scope)
            await got_text.wait()
            cancelled_at = time.monotonic()
            tg.cancel_scope.cancel()
        saw = await anyio.to_thread.run_sync(fp.disconnected.wait, 3.0)
    assert saw, "the server never saw the client go away"
    assert fp.disconnects[0] - cancelled_at < 0.5


@pytest.mark.anyio
async def test_no_key_and_no_base_url_says_exactly_what_to_set():
    factory = ModelFactory(parse_model_spec("openai:gpt-4.1"), ModelsConfig(), env={})
    m = factory.create()
    assert m is not None
    with pytest.raises(ModelError) as info:
        async for _ in m.stream(request()):
            pass
    assert info.value.message.startswith("OPENAI_API_KEY is not set, and openai:gpt-4.1 needs it: set OPENAI_API_KEY")
    assert info.value.auth  # auth_required in ACP
    assert "\n" not in info.value.message


@pytest.mark.anyio
async def test_a_base_url_without_a_key_works_for_servers_that_need_none(fp, model):
    fp.openai(Reply(frames=openai_stream("local model here")))
    events = await collect(model(key=None))
    assert any(isinstance(e, TextDelta) for e in events)
