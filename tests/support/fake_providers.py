"""A real local HTTP server that speaks the OpenAI Chat Completions and Anthropic Messages wire formats.

Tests script it with `Reply` objects (status, headers, SSE frames, pauses, a cut connection, a hang) queued per API;
it records every request it receives and notices when a client drops a connection, so tests can check what the
provider clients really sent and that cancellation really closed the socket. Runs in a daemon thread, so both
in-process tests and a spawned `gatewright acp` can talk to it.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
# Client settings for tests against this server: retries within milliseconds, timeouts short enough to fail fast.
FAST_RETRIES = {
    "retry_base_delay": 0.01,
    "retry_max_delay": 0.05,
    "first_token_timeout": 5.0,
    "connect_timeout": 2.0,
    "idle_timeout": 5.0,
}
STREAMS = pathlib.Path(__file__).parents[1] / "fixtures" / "streams"


# ---- what a reply can do ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pause:
    """Wait before the next frame (ends early if the client disconnects)."""

    seconds: float


@dataclass(frozen=True)
class Cut:
    """Drop the connection mid-body, without the terminating chunk."""


@dataclass(frozen=True)
class Hang:
    """Send nothing more until the client goes away."""


Frame = bytes | Pause | Cut | Hang


@dataclass(frozen=True)
class Reply:
    status: int = 200
    frames: tuple[Frame, ...] = ()
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # a JSON body for non-streamed replies (errors)
    delay: float = 0.0  # before the status line: a slow server
    raw: bytes | None = None  # a non-JSON body (a proxy's HTML error page), sent with `content_type`
    content_type: str | None = None


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    at: float
    peer: tuple[str, int] = ("", 0)  # the client's address: the same port means the same pooled connection
    target: str = ""  # the request target as sent: absolute (`http://host/path`) when it came through a proxy


def sse(data: Any, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


# ---- recorded streams, and what proxies do to them -----------------------------------------------------------------
def replay(name: str) -> bytes:
    """A stream from tests/fixtures/streams, written after the provider's API reference."""
    return (STREAMS / name).read_bytes()


def events_of(data: bytes) -> tuple[bytes, ...]:
    """One frame per SSE event, as a server that flushes after every event sends them."""
    parts = data.replace(b"\r\n", b"\n").split(b"\n\n")
    return tuple(p + b"\n\n" for p in parts if p)


def split_reads(data: bytes, size: int, pause: float = 0.002) -> tuple[Frame, ...]:
    """The stream cut every `size` bytes — through lines, JSON and UTF-8 characters alike — with a pause between
    the pieces so the client reads each one on its own, as a buffering proxy delivers them."""
    out: list[Frame] = []
    for i in range(0, len(data), size):
        out += [data[i : i + size], Pause(pause)]
    return tuple(out)


def crlf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


# ---- OpenAI Chat Completions stream --------------------------------------------------------------------------------
def _oa_chunk(
    delta: dict[str, Any] | None,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
) -> bytes:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [],
    }
    if delta is not None or finish is not None:
        chunk["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    if usage is not None:
        chunk["usage"] = usage
    return sse(chunk)


def openai_stream(
    text: str | list[str] = "",
    *,
    reasoning: list[str] | None = None,
    tool_calls: list[tuple[str, str, list[str]]] | None = None,
    interleave_tools: bool = False,
    finish: str | None = None,
    usage: tuple[int, int] | None = (12, 5),
    cached: int = 0,
    done: bool = True,
) -> tuple[bytes, ...]:
    """Frames for one streamed completion. `tool_calls` is [(id, name, argument fragments)]."""
    frames = [_oa_chunk({"role": "assistant", "content": ""})]
    for piece in reasoning or []:
        frames.append(_oa_chunk({"reasoning_content": piece}))
    for piece in [text] if isinstance(text, str) and text else (text or []):
        frames.append(_oa_chunk({"content": piece}))
    calls = tool_calls or []
    if interleave_tools:  # parallel calls whose fragments arrive interleaved, as real servers do
        for i, (cid, name, _) in enumerate(calls):
            frames.append(
                _oa_chunk(
                    {
                        "tool_calls": [
                            {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
                        ]
                    }
                )
            )
        longest = max((len(c[2]) for c in calls), default=0)
        for k in range(longest):
            for i, (_, _, frags) in enumerate(calls):
                if k < len(frags):
                    frames.append(_oa_chunk({"tool_calls": [{"index": i, "function": {"arguments": frags[k]}}]}))
    else:
        for i, (cid, name, frags) in enumerate(calls):
            frames.append(
                _oa_chunk(
                    {
                        "tool_calls": [
                            {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
                        ]
                    }
                )
            )
            for frag in frags:
                frames.append(_oa_chunk({"tool_calls": [{"index": i, "function": {"arguments": frag}}]}))
    frames.append(_oa_chunk({}, finish or ("tool_calls" if calls else "stop")))
    if usage is not None:
        u: dict[str, Any] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        }
        if cached:
            u["prompt_tokens_details"] = {"cached_tokens": cached}
        frames.append(_oa_chunk(None, usage=u))
    if done:
        frames.append(b"data: [DONE]\n\n")
    return tuple(frames)


# ---- Anthropic Messages stream -------------------------------------------------------------------------------------
def anthropic_stream(
    text: str | list[str] = "",
    *,
    thinking: list[str] | None = None,
    signature: str = "sig-1",
    tool_uses: list[tuple[str, str, list[str]]] | None = None,
    stop: str | None = None,
    usage: tuple[int, int] = (20, 7),
    cache_read: int = 0,
    cache_write: int = 0,
) -> tuple[bytes, ...]:
    """Frames for one streamed message. `tool_uses` is [(id, name, partial_json fragments)]."""
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage[0],
                "output_tokens": 1,
                "cache_read_input_tokens": cache_read,
                "cache_creation_input_tokens": cache_write,
            },
        },
    }
    frames = [sse(start, "message_start"), sse({"type": "ping"}, "ping")]
    index = 0

    def block(start_block: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        frames.append(
            sse({"type": "content_block_start", "index": index, "content_block": start_block}, "content_block_start")
        )
        for d in deltas:
            frames.append(sse({"type": "content_block_delta", "index": index, "delta": d}, "content_block_delta"))
        frames.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1

    if thinking:
        block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [{"type": "thinking_delta", "thinking": t} for t in thinking]
            + [{"type": "signature_delta", "signature": signature}],
        )
    pieces = [text] if isinstance(text, str) and text else (text or [])
    if pieces:
        block({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces])
    for tid, name, frags in tool_uses or []:
        block(
            {"type": "tool_use", "id": tid, "name": name, "input": {}},
            [{"type": "input_json_delta", "partial_json": f} for f in frags],
        )
    frames.append(
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop or ("tool_use" if tool_uses else "end_turn"), "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            },
            "message_delta",
        )
    )
    frames.append(sse({"type": "message_stop"}, "message_stop"))
    return tuple(frames)


def error_body(api: str, status: int, message: str) -> dict[str, Any]:
    if api == "anthropic":
        kind = {
            401: "authentication_error",
            403: "permission_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": "error", "code": None}}


# ---- the server ----------------------------------------------------------------------------------------------------
class FakeProviders:
    """`with FakeProviders() as fp:` — queue replies with `fp.openai(...)` / `fp.anthropic(...)`."""

    def __init__(self, tls: tuple[str, str] | None = None) -> None:
        self.tls = tls  # (certificate, key) PEM files: serve https
        self.queues: dict[str, deque[Reply]] = {OPENAI_PATH: deque(), ANTHROPIC_PATH: deque()}
        self.requests: list[Recorded] = []
        self.disconnects: list[float] = []
        self.disconnected = threading.Event()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.model_ids: list[str] | None = None  # `serve_models`
        self.model_keys: set[str] | None = None

    # scripting
    def openai(self, *replies: Reply) -> None:
        self.queues[OPENAI_PATH].extend(replies)

    def anthropic(self, *replies: Reply) -> None:
        self.queues[ANTHROPIC_PATH].extend(replies)

    def serve_models(self, ids: list[str], keys: set[str] | None = None) -> None:
        """`GET /v1/models` answers these ids (OpenAI's and Anthropic's shape, `data: [{id}]`); with `keys`, only to
        a request carrying one of them (`Authorization: Bearer` or `x-api-key`), else 401."""
        self.model_ids = list(ids)
        self.model_keys = keys

    def requests_to(self, path: str) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    # lifecycle
    def __enter__(self) -> FakeProviders:
        owner = self

        class Handler(_Handler):
            fake = owner

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if self.tls is not None:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*self.tls)
            self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def next_reply(self, path: str) -> Reply:
        with self.lock:
            queue = self.queues.get(path)
            if queue:
                return queue.popleft()
        return Reply(404 if queue is None else 500, body={"error": {"message": f"no scripted reply for {path}"}})

    def saw_disconnect(self) -> None:
        with self.lock:
            self.disconnects.append(time.monotonic())
        self.disconnected.set()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stall per reply
    fake: FakeProviders

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.fake.lock:
            self.fake.requests.append(
                Recorded(path, headers, None, time.monotonic(), self.client_address[:2], self.path)
            )
        ids, keys = self.fake.model_ids, self.fake.model_keys
        if path != "/v1/models" or ids is None:
            self._json(404, {"error": {"message": f"no {path} here"}})
            return
        sent = headers.get("authorization", "").removeprefix("Bearer ") or headers.get("x-api-key", "")
        if keys is not None and sent not in keys:
            self._json(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})
            return
        self._json(200, {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})

    def _json(self, status: int, body: Any) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        target = self.path
        path = target.split("?", 1)[0]
        if "://" in path:  # absolute form: the client was sent through this server as its proxy
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        with self.fake.lock:
            self.fake.requests.append(
                Recorded(
                    path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    time.monotonic(),
                    self.client_address[:2],
                    target,
                )
            )
        reply = self.fake.next_reply(path)
        if reply.delay and self._wait(reply.delay):
            return
        if reply.body is not None or reply.raw is not None or not reply.frames:
            payload = (
                reply.raw
                if reply.raw is not None
                else json.dumps(reply.body if reply.body is not None else {}).encode()
            )
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type or "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type or "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.flush()
        for frame in reply.frames:
            if isinstance(frame, Pause):
                if self._wait(frame.seconds):
                    return
            elif isinstance(frame, Cut):
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            elif isinstance(frame, Hang):
                self._wait(None)
                self.close_connection = True
                return
            else:
                try:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                    self.wfile.flush()
                except OSError:
                    self.fake.saw_disconnect()
                    self.close_connection = True
                    return
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _wait(self, seconds: float | None) -> bool:
        """Sleep up to `seconds` (None: until the end), watching the socket. True if the client went away."""
        deadline = None if seconds is None else time.monotonic() + seconds
        sock = self.connection
        while not self.fake.stopping.is_set():
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                return False
            readable, _, _ = select.select([sock], [], [], left)
            if readable:
                try:
                    data = sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    data = b""
                if not data:
                    self.fake.saw_disconnect()
                    self.close_connection = True
                    return True
                # The client sent more bytes (a pipelined request): not a disconnect; keep waiting.
                time.sleep(left)
        self.close_connection = True
        return True
