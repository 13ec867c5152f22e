"""HTTP for the model providers: a pooled `httpx2` client per model and one streamed POST read as server-sent events.

httpx2 does the HTTP work — connection pooling, timeouts, proxies from the environment, TLS, and the SSE framing
(`httpx2.EventSource`: CRLF/CR/LF line ends, comments, lines split across reads, multi-line data). This module
decides what is sent and turns what comes back into `(event name, data)` pairs, or into `ProviderHTTPError` with
the provider's own error text for a non-2xx reply. Nothing here logs a header or a body: the API key travels in the
client's default headers and is never formatted into a message.

httpx2 costs ~30 ms to import and is imported when the first model client is built, never at start-up.
"""

from __future__ import annotations

import contextlib
import re
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import orjson

from runtime import lazy  # httpx2: imported with a provider's first client
from runtime.models.retry import MalformedStream, ProviderHTTPError, ProviderStreamError

if TYPE_CHECKING:
    import httpx2

# The most a single event may hold: some servers send a whole tool call (a file's new content) in one chunk.
MAX_EVENT_BYTES = 32 * 1024 * 1024
MAX_ERROR_BODY = 64 * 1024  # of a non-2xx body: the message is near the start, and a proxy's HTML page can be large
_TITLE = re.compile(rb"<title>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def safe_url(url: str) -> str:
    """The URL as it may be shown: no user-info and no query (either can carry a credential)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an invalid URL)"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def make_client(
    url: str,
    headers: Mapping[str, str],
    *,
    connect_timeout: float,
    idle_timeout: float,
) -> httpx2.AsyncClient:
    """A pooled client for one provider endpoint. `idle_timeout` bounds every read (so the time between two
    chunks); the first-token deadline is the caller's."""
    verify: ssl.SSLContext | bool = True
    if urlsplit(url).scheme == "http":
        # Plain HTTP never needs the CA bundle, whose loading is ~25 ms of a fresh process's first model call. A
        # context that trusts nothing fails closed if TLS were ever attempted with it.
        verify = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return lazy.httpx2.AsyncClient(
        headers=dict(headers),
        verify=verify,
        follow_redirects=False,
        timeout=lazy.httpx2.Timeout(idle_timeout or None, connect=connect_timeout or None),
    )


async def _close(resource: Any) -> None:
    # Shielded and bounded: a cancelled turn must still drop its connection, but a wedged peer must not hold it up.
    with anyio.CancelScope(shield=True), anyio.move_on_after(2), contextlib.suppress(Exception):
        await resource.aclose()


async def post_events(
    client: httpx2.AsyncClient,
    url: str,
    body: Mapping[str, Any],
) -> AsyncIterator[tuple[str, str]]:
    """POST `body` as JSON and yield the reply's server-sent events as (event name, data).

    A non-2xx reply raises `ProviderHTTPError` with the provider's message; a 2xx reply that is a JSON error (some
    gateways answer so) raises `ProviderStreamError`; anything else that is not an event stream is `MalformedStream`.
    Closing this generator (or cancelling its consumer) closes the response, which drops the connection at once
    when the reply was not read to its end.
    """
    request = client.build_request(
        "POST",
        url,
        content=orjson.dumps(body),
        headers={"content-type": "application/json", "accept": "text/event-stream"},
    )
    response = await client.send(request, stream=True)
    try:
        ctype = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if not 200 <= response.status_code < 300:
            raw = await _read_capped(response)
            message, etype = error_text(raw, ctype, f"HTTP {response.status_code}")
            raise ProviderHTTPError(response.status_code, message, etype, response.headers)
        if ctype != "text/event-stream":
            raw = await _read_capped(response)
            if ctype.endswith("json"):
                message, etype = error_text(raw, ctype, "")
                if message:
                    raise ProviderStreamError(message, etype)
            raise MalformedStream(f"expected an event stream, got {ctype or 'no content type'}")
        events = lazy.httpx2.EventSource(response, max_event_size=MAX_EVENT_BYTES).__aiter__()
        try:
            async for sse in events:
                yield sse.event, sse.data
        finally:
            await _close(events)
    finally:
        await _close(response)


async def _read_capped(response: httpx2.Response) -> bytes:
    out = bytearray()
    async for chunk in response.aiter_bytes():
        out += chunk
        if len(out) >= MAX_ERROR_BODY:
            break
    return bytes(out[:MAX_ERROR_BODY])


def error_text(raw: bytes, ctype: str, fallback: str) -> tuple[str, str | None]:
    """(message, error type) from an error body as OpenAI, Anthropic, most compatible servers and proxies send it."""
    try:
        body = orjson.loads(raw) if raw.strip() else None
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict):
        return json_error(body, fallback)
    if "html" in ctype or raw.lstrip()[:1] == b"<":
        title = _TITLE.search(raw)
        return (title.group(1).decode("utf-8", "replace").strip() if title else fallback) or fallback, None
    text = raw.decode("utf-8", "replace").strip()
    return text or fallback, None


def json_error(body: Mapping[str, Any], fallback: str) -> tuple[str, str | None]:
    """`{"error": {"message", "type"}}` (OpenAI, Anthropic), `{"error": "text"}`, `{"message": …}`, `{"detail": …}`."""
    err = body.get("error", body)
    if isinstance(err, str):
        return err or fallback, None
    if isinstance(err, Mapping):
        msg = err.get("message") or err.get("detail")
        etype = err.get("type")
        code = err.get("code")
        if not isinstance(etype, str):
            etype = code if isinstance(code, str) else None
        if isinstance(msg, str) and msg:
            return msg, etype
        if isinstance(msg, list | dict):  # FastAPI-style validation details
            return orjson.dumps(msg).decode()[:500], etype
        return fallback, etype
    return fallback, None


def json_data(data: str) -> Any:
    """One event's data as JSON; `MalformedStream` (with the start of it) when it is not."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise MalformedStream(f"an event is not JSON: {data[:80]!r}") from None
