"""Both providers at the wire: documented streams (tests/fixtures/streams) replayed by a real local HTTP server,
as sent and as proxies deliver them, and the HTTP failures a provider or a proxy produces. What the user gets is the
same events, the provider's own error text, the URL tried, and never a key."""

from __future__ import annotations

import logging
import re
import subprocess
import time
from typing import Any

import anyio
import pytest

from runtime.models.anthropic_messages import AnthropicModel
from runtime.models.base import (
    Finished,
    ModelError,
    ModelEvent,
    ModelRequest,
    TextDelta,
    TextPart,
    ThoughtDelta,
    ToolCallEvent,
    ToolCallRequest,
    ToolSchema,
    UserMessage,
)
from runtime.models.config import ModelEntry, ProviderSettings
from runtime.models.http import safe_url
from runtime.models.openai_compat import OpenAIChatModel
from runtime.models.provider import ProviderModel
from tests.support.fake_providers import (
    ANTHROPIC_PATH,
    FAST_RETRIES,
    OPENAI_PATH,
    FakeProviders,
    Pause,
    Reply,
    anthropic_stream,
    crlf,
    error_body,
    events_of,
    openai_stream,
    replay,
    split_reads,
    sse,
)

KEY = "sk-wire-test-0123456789abcdef"
TOOLS = (ToolSchema("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}),)
PATHS = {"openai": OPENAI_PATH, "anthropic": ANTHROPIC_PATH}


@pytest.fixture
async def make(fp):
    """`make("openai" | "anthropic", **settings)`: a model on the fake server with millisecond retry delays."""
    made: list[ProviderModel] = []

    def build(api: str, *, key: str | None = KEY, base_url: str | None = None, **settings: Any) -> ProviderModel:
        opts: dict[str, Any] = dict(FAST_RETRIES)
        opts.update(settings)
        url = base_url or (fp.url + "/v1" if api == "openai" else fp.url)
        provider = ProviderSettings(api, api, base_url=url, api_key_env=f"{api.upper()}_API_KEY", **opts)  # type: ignore[arg-type]
        entry = ModelEntry(f"{api}:m", api, "m", "m")
        cls = OpenAIChatModel if api == "openai" else AnthropicModel
        made.append(cls(entry, provider, key))
        return made[-1]

    yield build
    for m in made:
        await m.aclose()


def queue(fp: FakeProviders, api: str, *replies: Reply) -> None:
    (fp.openai if api == "openai" else fp.anthropic)(*replies)


def request() -> ModelRequest:
    return ModelRequest("You are a test.", (UserMessage((TextPart("hi"),)),), TOOLS)


async def collect(m: ProviderModel) -> list[ModelEvent]:
    with anyio.fail_after(15):
        return [ev async for ev in m.stream(request())]


def texts(events: list[ModelEvent], kind: type = TextDelta) -> str:
    return "".join(e.text for e in events if type(e) is kind)


# ---- documented streams ------------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_a_documented_text_stream_gives_its_deltas_and_the_usage_of_the_empty_choices_chunk(fp, make):
    fp.openai(Reply(frames=events_of(replay("openai_text_usage.sse"))))
    events = await collect(make("openai"))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["The ", "notes ", "say: ", "café ☕ ", "at 9."]
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.stop == "end_turn"
    assert (fin.usage.input_tokens, fin.usage.output_tokens, fin.usage.cached_read_tokens) == (1207, 9, 1024)


@pytest.mark.anyio
async def test_parallel_tool_calls_whose_arguments_arrive_interleaved_in_many_pieces_are_assembled(fp, make):
    fp.openai(Reply(frames=events_of(replay("openai_parallel_tool_calls.sse"))))
    events = await collect(make("openai"))
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCallRequest(
            "call_DdmO9pD3xa9XTPNJ32zg2hcA", "read_file", '{"path": "notes.txt", "startLine": 1, "endLine": 40}'
        ),
        ToolCallRequest("call_Kx7gq2Yb0Lw1t8Rk3pQvN5sZ", "grep", '{"pattern": "TODO", "include": "*.py"}'),
    ]
    assert isinstance(events[-1], Finished) and events[-1].stop == "tool_use" and events[-1].usage.output_tokens == 61


@pytest.mark.anyio
async def test_a_local_servers_reasoning_deltas_are_thoughts_and_its_null_choices_usage_chunk_counts(fp, make):
    fp.openai(Reply(frames=events_of(replay("openai_local_reasoning.sse"))))
    events = await collect(make("openai"))
    assert texts(events, ThoughtDelta) == "The user wants 6×7." and texts(events) == "42"
    assert [type(e) for e in events] == [ThoughtDelta] * 3 + [TextDelta, Finished]
    assert (events[-1].usage.input_tokens, events[-1].usage.output_tokens) == (31, 12)  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_reasoning_named_reasoning_as_openrouter_and_ollama_send_it_is_a_thought_too(fp, make):
    chunk = {
        "id": "gen-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": "", "reasoning": "hmm"}, "finish_reason": None}
        ],
    }
    fp.openai(Reply(frames=(sse(chunk), *openai_stream("ok"))))
    events = await collect(make("openai"))
    assert texts(events, ThoughtDelta) == "hmm" and texts(events) == "ok"


@pytest.mark.anyio
async def test_a_documented_thinking_and_tool_use_stream_keeps_the_signature_and_ignores_pings(fp, make):
    fp.anthropic(Reply(frames=events_of(replay("anthropic_thinking_tool_use.sse"))))
    events = await collect(make("anthropic"))
    assert texts(events, ThoughtDelta) == "The user wants the notes. I should read notes.txt first."
    assert texts(events) == "I'll read the notes."
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCallRequest("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "read_file", '{"path": "notes.txt", "startLine": 1}')
    ]
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.stop == "tool_use"
    assert fin.provider_state == {
        "anthropic": {
            "thinking": [
                {
                    "type": "thinking",
                    "thinking": "The user wants the notes. I should read notes.txt first.",
                    "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
                }
            ]
        }
    }
    assert (fin.usage.input_tokens, fin.usage.cached_read_tokens, fin.usage.output_tokens) == (472 + 2048, 2048, 89)


# ---- what proxies and odd servers do to a stream -----------------------------------------------------------------
def _comments(data: bytes) -> bytes:
    return b": OPENROUTER PROCESSING\n\n" + b"".join(e + b": keep-alive\n\n" for e in events_of(data))


DELIVERIES = {
    "cut every 7 bytes": lambda d: split_reads(d, 7),
    "CRLF line ends, cut every 5 bytes": lambda d: split_reads(crlf(d), 5),
    "comments between events": lambda d: (_comments(d),),
    "no space after data:": lambda d: (d.replace(b"data: ", b"data:"),),
    "one read for the whole stream": lambda d: (d,),
}


@pytest.mark.anyio
@pytest.mark.parametrize("delivery", list(DELIVERIES))
@pytest.mark.parametrize(
    ("api", "stream"),
    [
        ("openai", "openai_text_usage.sse"),
        ("openai", "openai_parallel_tool_calls.sse"),
        ("anthropic", "anthropic_thinking_tool_use.sse"),
    ],
)
async def test_the_same_stream_gives_the_same_events_however_the_bytes_are_delivered(fp, make, api, stream, delivery):
    data = replay(stream)
    queue(fp, api, Reply(frames=events_of(data)), Reply(frames=DELIVERIES[delivery](data)))
    m = make(api)
    reference = await collect(m)
    assert await collect(m) == reference
    assert len(reference) >= 3


# ---- failures inside a 200 stream --------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_an_anthropic_error_event_after_text_ends_the_call_with_the_text_kept_and_no_retry(fp, make):
    fp.anthropic(
        Reply(frames=events_of(replay("anthropic_error_after_text.sse"))),
        Reply(frames=anthropic_stream("a second answer")),
    )
    seen: list[ModelEvent] = []
    with pytest.raises(ModelError) as info, anyio.fail_after(10):
        async for ev in make("anthropic").stream(request()):
            seen.append(ev)
    assert texts(seen) == "Hello"
    assert "broke after the reply had started (Overloaded" in info.value.message
    assert len(fp.requests_to(ANTHROPIC_PATH)) == 1


@pytest.mark.anyio
async def test_an_openai_compatible_error_chunk_before_output_is_retried_and_after_output_is_an_error(fp, make):
    failing = sse({"error": {"message": "upstream model overloaded", "code": 502}})
    fp.openai(Reply(frames=(failing,)), Reply(frames=openai_stream("recovered")))
    assert texts(await collect(make("openai"))) == "recovered"
    assert len(fp.requests_to(OPENAI_PATH)) == 2
    fp.openai(Reply(frames=(*openai_stream("half an ans")[:2], failing)))
    with pytest.raises(ModelError) as info:
        await collect(make("openai"))
    assert "broke after the reply had started (upstream model overloaded" in info.value.message


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_200_json_error_from_a_gateway_is_the_gateways_own_text(fp, make, api):
    queue(fp, api, Reply(200, body={"error": {"message": "model 'm' is not served here", "type": "not_found_error"}}))
    with pytest.raises(ModelError) as info:
        await collect(make(api))
    assert "model 'm' is not served here" in info.value.message
    assert len(fp.requests_to(PATHS[api])) == 1  # a client error: not retried


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("api", "finish", "stop"),
    [
        ("openai", "length", "max_tokens"),
        ("openai", "content_filter", "refusal"),
        ("openai", "stop", "end_turn"),
        ("anthropic", "max_tokens", "max_tokens"),
        ("anthropic", "refusal", "refusal"),
        ("anthropic", "pause_turn", "end_turn"),
        ("anthropic", "stop_sequence", "end_turn"),
    ],
)
async def test_stop_reasons_map_to_ours(fp, make, api, finish, stop):
    frames = openai_stream("x", finish=finish) if api == "openai" else anthropic_stream("x", stop=finish)
    queue(fp, api, Reply(frames=frames))
    events = await collect(make(api))
    assert isinstance(events[-1], Finished) and events[-1].stop == stop


# ---- HTTP failures -----------------------------------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_400_carries_the_providers_own_text_and_the_url_tried_and_is_not_retried(fp, make, api):
    text = "tools.0.custom.input_schema: JSON schema is invalid - please consult https://json-schema.org"
    body = (
        {"type": "error", "error": {"type": "invalid_request_error", "message": text}}
        if api == "anthropic"
        else {
            "error": {
                "message": text,
                "type": "invalid_request_error",
                "param": "tools[0]",
                "code": "invalid_function_parameters",
            }
        }
    )
    queue(fp, api, Reply(400, body=body))
    with pytest.raises(ModelError) as info:
        await collect(make(api))
    assert info.value.message == f"{api} rejected the request (HTTP 400): {text} (at {fp.url}{PATHS[api]})"
    assert len(fp.requests_to(PATHS[api])) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_5xx_then_success_is_retried_and_a_proxys_html_page_is_reported_by_its_title(fp, make, api):
    page = b"<html><head><title>502 Bad Gateway</title></head><body><center>nginx</center></body></html>"
    frames = openai_stream("fine") if api == "openai" else anthropic_stream("fine")
    queue(fp, api, Reply(502, raw=page, content_type="text/html"), Reply(frames=frames))
    assert texts(await collect(make(api))) == "fine"
    queue(fp, api, *[Reply(502, raw=page, content_type="text/html")] * 2)
    with pytest.raises(ModelError) as info:
        await collect(make(api, max_retries=1))
    assert info.value.message.startswith(f"{api} failed (HTTP 502) after 2 attempts: 502 Bad Gateway (at ")


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_429_retry_after_is_waited_out_and_one_asking_too_long_is_an_error_at_once(fp, make, api):
    body = error_body(api, 429, "rate limited")
    frames = openai_stream("after") if api == "openai" else anthropic_stream("after")
    queue(fp, api, Reply(429, headers={"Retry-After": "0.3"}, body=body), Reply(frames=frames))
    assert texts(await collect(make(api))) == "after"
    first, second = fp.requests_to(PATHS[api])
    assert second.at - first.at >= 0.25
    queue(fp, api, Reply(429, headers={"Retry-After": "3600"}, body=body))
    start = time.monotonic()
    with pytest.raises(ModelError) as info:
        await collect(make(api))
    assert "asks to wait 3600 s" in info.value.message and "rate limited" in info.value.message
    assert time.monotonic() - start < 2


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_x_should_retry_false_stops_retries_of_a_5xx(fp, make, api):
    queue(fp, api, Reply(500, headers={"x-should-retry": "false"}, body=error_body(api, 500, "will not clear")))
    with pytest.raises(ModelError) as info:
        await collect(make(api))
    assert "will not clear" in info.value.message and len(fp.requests_to(PATHS[api])) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_a_stalled_stream_after_output_ends_at_the_idle_timeout_without_a_retry(fp, make, api):
    # up to the first text delta: output has reached the user
    frames = openai_stream("part")[:2] if api == "openai" else anthropic_stream("part")[:4]
    queue(fp, api, Reply(frames=(*frames, Pause(5.0))))
    start = time.monotonic()
    with pytest.raises(ModelError) as info:
        await collect(make(api, idle_timeout=0.3))
    assert time.monotonic() - start < 3
    assert "broke after the reply had started (no data within the idle timeout" in info.value.message
    assert len(fp.requests_to(PATHS[api])) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_an_unreachable_server_is_reported_with_the_url_tried(make, api):
    base = "http://127.0.0.1:9" + ("/v1" if api == "openai" else "")
    with pytest.raises(ModelError) as info:
        await collect(make(api, base_url=base, max_retries=1))
    message = info.value.message
    assert message.startswith(f"cannot reach {api} after 2 attempts: ")
    assert message.endswith(f"(at http://127.0.0.1:9{PATHS[api]})")


@pytest.mark.anyio
async def test_a_base_url_without_a_scheme_is_one_line_and_not_retried(make):
    with pytest.raises(ModelError) as info:
        await collect(make("openai", base_url="localhost:8080/v1"))
    assert info.value.message.startswith("openai failed: the URL cannot be used")
    assert "\n" not in info.value.message


def test_a_url_is_shown_without_its_user_info_or_query():
    assert (
        safe_url("https://me:pa55@gw.example:8443/v1/chat/completions?api-key=abc")
        == "https://gw.example:8443/v1/chat/completions"
    )


# ---- the connection ----------------------------------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_consecutive_calls_reuse_one_pooled_connection(fp, make, api):
    frames = openai_stream("one") if api == "openai" else anthropic_stream("one")
    queue(fp, api, Reply(frames=frames), Reply(frames=frames), Reply(frames=frames))
    m = make(api)
    for _ in range(3):
        await collect(m)
    assert len({r.peer for r in fp.requests_to(PATHS[api])}) == 1


@pytest.mark.anyio
async def test_requests_go_through_the_proxy_named_in_the_environment(fp, make, monkeypatch):
    for var in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTP_PROXY", fp.url)
    fp.openai(Reply(frames=openai_stream("via the proxy")))
    events = await collect(make("openai", base_url="http://models.invalid:8080/v1"))
    assert texts(events) == "via the proxy"
    assert fp.requests_to(OPENAI_PATH)[0].target == "http://models.invalid:8080/v1/chat/completions"


@pytest.fixture
def certificate(tmp_path):
    """A self-signed certificate for 127.0.0.1 (the openssl command line)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    try:
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
                "-keyout",
                str(key),
                "-out",
                str(cert),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"openssl cannot make a certificate here: {exc}")
    return str(cert), str(key)


@pytest.mark.anyio
async def test_https_trusts_the_ca_named_by_ssl_cert_file_and_refuses_an_unknown_one_without_retrying(
    make, certificate, monkeypatch
):
    for var in ("SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    with FakeProviders(tls=certificate) as tls:
        tls.openai(Reply(frames=openai_stream("never sent")))
        with pytest.raises(ModelError) as info:
            await collect(make("openai", base_url=tls.url + "/v1"))
        assert info.value.message.startswith("openai failed: the server's TLS certificate is not trusted (")
        assert "SSL_CERT_FILE" in info.value.message and "attempts" not in info.value.message  # not retried
        assert tls.requests == []
        monkeypatch.setenv("SSL_CERT_FILE", certificate[0])
        events = await collect(make("openai", base_url=tls.url + "/v1"))
        assert texts(events) == "never sent"


# ---- keys --------------------------------------------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_the_key_and_secret_headers_reach_the_server_but_no_message_or_log_record(fp, make, api, caplog):
    for name in ("", "httpx2", "httpcore2", "gatewright"):
        caplog.set_level(logging.DEBUG, logger=name)
    gateway_token = "gw-token-9876543210"
    echo = f"bad key {KEY} or token {gateway_token}"
    queue(fp, api, Reply(500, body=error_body(api, 500, echo)), Reply(401, body=error_body(api, 401, echo)))
    with pytest.raises(ModelError) as info:
        await collect(make(api, headers={"X-Gateway-Token": gateway_token, "X-Title": "gatewright tests"}))
    sent = fp.requests_to(PATHS[api])[0].headers
    assert sent["x-gateway-token"] == gateway_token and sent["x-title"] == "gatewright tests"
    assert (sent["authorization"] == f"Bearer {KEY}") if api == "openai" else (sent["x-api-key"] == KEY)
    assert info.value.auth
    for secret in (KEY, gateway_token):
        assert secret not in info.value.message
        assert secret not in caplog.text
    assert re.search(r"\[redacted\]", info.value.message)
