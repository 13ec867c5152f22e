"""A zero-latency mock LLM on loopback for the first-prompt benchmarks: it plays a 3-step coding task for any agent.

It answers OpenAI Chat Completions (`/v1/chat/completions`), Anthropic Messages (`/v1/messages`) and OpenAI Responses
(`/v1/responses`, what Codex speaks) with streams, and `GET …/models` with one model. The task: read `notes.txt`,
write `out.txt`, answer. Which step a request is at is the number of tool results in its history, so the mock needs
no state per agent; the tools are picked from those the request offers (a tool named like "read" and one like
"write", else a shell tool), with argument names taken from their schemas. A request offering no tools (a title or a
quota probe some agents send) gets a one-word answer. Every request is recorded with its arrival time
(`time.perf_counter`, the bench's clock). `ttft` and `per_chunk` add latency like a real provider's.
"""

from __future__ import annotations

import json
import os
import shlex
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NOTES = "remember the milk\n"
OUT_TEXT = "the notes say: remember the milk\n"
ANSWER = "Done: out.txt holds the notes."


@dataclass
class Seen:
    path: str
    at: float  # perf_counter when the request line and headers were read
    step: int
    tools: int


# ---- which step, which tool ----------------------------------------------------------------------------------------
def _tool_results(body: dict[str, Any]) -> int:
    n = 0
    for m in body.get("messages") or []:  # chat completions and messages
        if not isinstance(m, dict):
            continue
        if m.get("role") == "tool":
            n += 1
        content = m.get("content")
        if isinstance(content, list):
            n += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    for item in body.get("input") or [] if isinstance(body.get("input"), list) else []:  # responses
        if isinstance(item, dict) and item.get("type") in (
            "function_call_output",
            "custom_tool_call_output",
            "local_shell_call_output",
        ):
            n += 1
    return n


def _tools(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, JSON schema of the arguments) for every function tool offered, whatever the API."""
    out = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        fn = t.get("function") if isinstance(t.get("function"), dict) else t
        name = fn.get("name")
        schema = fn.get("parameters") or fn.get("input_schema") or {}
        if isinstance(name, str):
            out.append((name, schema if isinstance(schema, dict) else {}))
    return out


def _prop(schema: dict[str, Any], *names: str) -> str | None:
    props = schema.get("properties") or {}
    return next((n for n in names if n in props), None)


def _call_for(step: int, tools: list[tuple[str, dict[str, Any]]], ws: str) -> tuple[str, dict[str, Any]] | None:
    """The tool call for step 0 (read) or 1 (write), or None to answer."""
    if step > 1:
        return None
    want = "read" if step == 0 else "write"
    path_keys = ("path", "file_path", "filePath", "absolute_path", "target_file", "filename")
    for name, schema in tools:
        low = name.lower()
        if want in low and "many" not in low and "multiple" not in low:
            key = _prop(schema, *path_keys)
            if key is None:
                continue
            args: dict[str, Any] = {key: os.path.join(ws, "notes.txt" if step == 0 else "out.txt")}
            if step == 1:
                args[_prop(schema, "content", "contents", "text", "file_text") or "content"] = OUT_TEXT
            return name, args
    script = "cat notes.txt" if step == 0 else f"printf '%s\\n' {shlex.quote(OUT_TEXT.strip())} > out.txt"
    for name, schema in tools:
        if name.lower() in ("shell", "exec_command", "bash", "run_shell_command", "shell_command", "local_shell"):
            key = _prop(schema, "command", "cmd")
            if key is None:
                continue
            is_list = (schema.get("properties", {}).get(key) or {}).get("type") == "array"
            args = {key: ["bash", "-lc", script] if is_list else script}
            if _prop(schema, "workdir"):
                args["workdir"] = ws
            return name, args
    return None


# ---- the three wire formats ----------------------------------------------------------------------------------------
def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


def _chat(body: dict[str, Any], call: tuple[str, dict[str, Any]] | None, step: int) -> list[bytes]:
    model = body.get("model", "mock")
    base = {"id": f"chatcmpl-{step}", "object": "chat.completion.chunk", "created": 1, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    frames = [chunk({"role": "assistant", "content": ""})]
    if call is None:
        frames += [chunk({"content": w}) for w in _words(ANSWER)]
        frames.append(chunk({}, "stop"))
    else:
        frames.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": f"call_{step}",
                            "type": "function",
                            "function": {"name": call[0], "arguments": ""},
                        }
                    ]
                }
            )
        )
        frames.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(call[1])}}]}))
        frames.append(chunk({}, "tool_calls"))
    frames.append(
        _sse({**base, "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
    )
    frames.append(b"data: [DONE]\n\n")
    return frames


def _messages(body: dict[str, Any], call: tuple[str, dict[str, Any]] | None, step: int) -> list[bytes]:
    frames = [
        _sse(
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{step}",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "mock"),
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 100, "output_tokens": 1},
                },
            },
            "message_start",
        )
    ]
    if call is None:
        frames.append(
            _sse(
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                "content_block_start",
            )
        )
        frames += [
            _sse(
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}},
                "content_block_delta",
            )
            for w in _words(ANSWER)
        ]
    else:
        frames.append(
            _sse(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "tool_use", "id": f"toolu_{step}", "name": call[0], "input": {}},
                },
                "content_block_start",
            )
        )
        frames.append(
            _sse(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(call[1])},
                },
                "content_block_delta",
            )
        )
    frames.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    frames.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn" if call is None else "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
            "message_delta",
        )
    )
    frames.append(_sse({"type": "message_stop"}, "message_stop"))
    return frames


def _responses(body: dict[str, Any], call: tuple[str, dict[str, Any]] | None, step: int) -> list[bytes]:
    rid = f"resp_{step}_{time.monotonic_ns()}"
    response = {
        "id": rid,
        "object": "response",
        "created_at": 1,
        "status": "in_progress",
        "model": body.get("model", "mock"),
        "output": [],
    }
    frames = [_sse({"type": "response.created", "response": response}, "response.created")]
    if call is None:
        item = {
            "type": "message",
            "id": f"msg_{step}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
        }
        frames.append(
            _sse(
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {**item, "status": "in_progress", "content": []},
                },
                "response.output_item.added",
            )
        )
        frames += [
            _sse(
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": w,
                },
                "response.output_text.delta",
            )
            for w in _words(ANSWER)
        ]
    else:
        item = {
            "type": "function_call",
            "id": f"fc_{step}",
            "call_id": f"call_{step}",
            "name": call[0],
            "arguments": json.dumps(call[1]),
            "status": "completed",
        }
        frames.append(
            _sse(
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {**item, "arguments": "", "status": "in_progress"},
                },
                "response.output_item.added",
            )
        )
    frames.append(
        _sse({"type": "response.output_item.done", "output_index": 0, "item": item}, "response.output_item.done")
    )
    frames.append(
        _sse(
            {
                "type": "response.completed",
                "response": {
                    **response,
                    "status": "completed",
                    "output": [item],
                    "usage": {
                        "input_tokens": 100,
                        "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": 10,
                        "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": 110,
                    },
                },
            },
            "response.completed",
        )
    )
    return frames


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


# ---- the server ----------------------------------------------------------------------------------------------------
class MockLLM:
    """`with MockLLM(workspace) as llm:` — `llm.url`, `llm.seen`, `llm.reset()`."""

    def __init__(self, workspace: str, *, ttft: float = 0.0, per_chunk: float = 0.0) -> None:
        self.workspace = workspace
        self.ttft = ttft
        self.per_chunk = per_chunk
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def reset(self) -> list[Seen]:
        with self.lock:
            seen, self.seen = self.seen, []
        return seen

    def __enter__(self) -> MockLLM:
        owner = self

        class Handler(_Handler):
            llm = owner

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The status line and headers go out in one write and the body in another: with Nagle's algorithm the body
    # would wait for the client's delayed ACK (40 ms on Linux) on every reply.
    disable_nagle_algorithm = True
    llm: MockLLM

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(
                200, {"object": "list", "data": [{"id": "mock", "object": "model", "created": 1, "owned_by": "mock"}]}
            )
        else:
            self._json(404, {"error": {"message": f"no such path {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        at = time.perf_counter()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        path = self.path.split("?", 1)[0]
        tools = _tools(body)
        step = _tool_results(body)
        with self.llm.lock:
            self.llm.seen.append(Seen(path, at, step, len(tools)))
        call = _call_for(step, tools, self.llm.workspace) if tools else None
        if path.endswith("/chat/completions"):
            frames = _chat(body, call, step)
        elif path.endswith("/messages"):
            frames = _messages(body, call, step)
        elif path.endswith("/responses"):
            frames = _responses(body, call, step)
        else:
            self._json(404, {"error": {"message": f"no such path {path}", "type": "not_found"}})
            return
        if body.get("stream") is False:
            self._json(400, {"error": {"message": "the mock only streams", "type": "invalid_request_error"}})
            return
        if self.llm.ttft:
            time.sleep(self.llm.ttft)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if self.llm.per_chunk:
                for f in frames:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(f), f))
                    self.wfile.flush()
                    time.sleep(self.llm.per_chunk)
                self.wfile.write(b"0\r\n\r\n")
            else:  # zero latency: the whole stream in one write
                self.wfile.write(b"".join(b"%x\r\n%s\r\n" % (len(f), f) for f in frames) + b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
