"""A method-agnostic JSON-RPC 2.0 connection over a byte stream (one frame per line).

It owns: reading frames without ever blocking on a running handler, one writer task that alone writes the output,
reading each request's params into its typed model before anything else sees them (a `WireError` is `-32602`),
answering every request exactly once (results, typed errors, `-32800` after `$/cancel_request`), never answering a
notification, and correlating the agent's own requests to the client by id. Which methods exist, how their params
are read and what answers them is the `Dispatcher`'s table (`acp_server.dispatch` for ACP).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, Protocol, TypeVar, TypeVarTuple

import anyio
import anyio.abc
import orjson

from acp_server import wire
from acp_server.errors import (
    InternalError,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    RequestCancelled,
    RpcError,
    error_to_wire,
    invalid_params,
)
from acp_server.protocol.base import WireError, WireModel
from runtime import secrets

log = logging.getLogger("gatewright.rpc")

MAX_INFLIGHT = 512
WRITE_BUFFER = 4 << 20  # bytes of encoded frames waiting for the writer before senders wait (one frame always fits)

PosArgs = TypeVarTuple("PosArgs")
C = TypeVar("C")  # what every handler of a table is given first (the agent)
P = TypeVar("P")  # a method's params model
R = TypeVar("R")  # a method's result


class ByteReader(Protocol):
    async def read(self) -> bytes: ...


class ByteWriter(Protocol):
    async def write(self, data: bytes) -> None: ...


class Recorder(Protocol):
    def record(self, direction: str, msg: Any, raw: bytes | None = None) -> None: ...


class Route(NamedTuple, Generic[C, P, R]):
    """A request method: how its params are read, and what answers it.

    `params(value, path)` returns the typed params or raises `WireError` (the client gets `-32602`, and no handler
    runs). `handle(context, params)` answers with a result (a `WireModel`, a JSON object, None for `{}`) or an
    `Answer`. Two optional hooks, both synchronous and given the same typed params object:
    `received` runs in reading order, before the handler's task starts (to stamp a request with what was true when
    it arrived); `cancel` runs on `$/cancel_request` and returns True when the handler will answer by itself.
    """

    params: Callable[[object, str], P]
    handle: Callable[[C, P], Awaitable[R]]
    received: Callable[[C, P], None] | None = None
    cancel: Callable[[C, P], bool] | None = None


class NotificationRoute(NamedTuple, Generic[C, P]):
    """A notification method: params that do not fit are dropped (a notification is never answered)."""

    params: Callable[[object, str], P]
    handle: Callable[[C, P], Awaitable[None] | None]


class Dispatcher(Protocol[C]):
    @property
    def context(self) -> C: ...

    @property
    def requests(self) -> Mapping[str, Route[C, Any, Any]]: ...

    @property
    def notifications(self) -> Mapping[str, NotificationRoute[C, Any]]: ...

    async def shutdown(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Answer:
    """A handler result plus work to run right after the answer is written: a notification that must follow the
    answer (e.g. `available_commands_update` after `session/new`, which the client cannot route before it)."""

    result: Any
    then: Callable[[], Awaitable[None]]


class ClientError(Exception):
    """The client answered one of our requests with an error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ConnectionClosed(Exception):
    pass


@dataclass
class _Outbound:
    event: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: Any = None
    is_error: bool = False


@dataclass
class _Inbound:
    route: Route[Any, Any, Any]
    params: Any  # the typed params
    scope: anyio.CancelScope
    cancelled_by_peer: bool = False


class _Outbox:
    """Encoded frames waiting for the one writer task.

    A plain list the writer takes whole: handing a frame over is an append (the streaming hot path sends one frame
    per token), and the writer joins everything waiting into one write. Senders wait only when `limit` bytes are
    already waiting; a frame larger than that is still accepted when the box is empty, so nothing can wedge.
    """

    __slots__ = ("frames", "size", "limit", "closed", "_ready", "_room")

    def __init__(self, limit: int) -> None:
        self.frames: list[bytes] = []
        self.size = 0
        self.limit = limit
        self.closed = False
        self._ready: anyio.Event | None = None  # set when the writer sleeps on an empty box
        self._room: anyio.Event | None = None  # set when senders wait for the writer to drain

    def put(self, data: bytes) -> bool:
        """Add a frame without suspending; False when the box is full (then `await wait_room()` and retry).
        Once closed, frames are dropped (True): nothing is written any more."""
        if self.closed:
            return True
        if self.size >= self.limit and self.frames:
            return False
        self.frames.append(data)
        self.size += len(data)
        if self._ready is not None:
            self._ready.set()
            self._ready = None
        return True

    async def wait_room(self) -> None:
        if self._room is None:
            self._room = anyio.Event()
        await self._room.wait()

    async def take(self) -> list[bytes] | None:
        """Everything waiting (at least one frame); None once closed and drained."""
        while not self.frames:
            if self.closed:
                return None
            self._ready = ready = anyio.Event()
            await ready.wait()
        frames, self.frames, self.size = self.frames, [], 0
        self._wake_senders()
        return frames

    def close(self) -> None:
        """No more frames: the writer drains what is waiting, then stops; waiting senders are released."""
        self.closed = True
        if self._ready is not None:
            self._ready.set()
            self._ready = None
        self._wake_senders()

    def _wake_senders(self) -> None:
        if self._room is not None:
            self._room.set()
            self._room = None


def _carried_out(frame: dict[str, Any]) -> bool:
    """A request the editor carries out on our behalf (`fs/write_text_file` content, a `terminal/create` command):
    its params must arrive exactly as meant, or a file that holds a key would be saved with the marker instead. They
    are no leak: the key goes back where it was. The transcript still redacts them."""
    method = frame.get("method")
    return "id" in frame and isinstance(method, str) and method.startswith(("fs/", "terminal/"))


class JsonRpcConnection:
    def __init__(
        self, dispatcher: Dispatcher[Any], *, max_frame: int = wire.DEFAULT_MAX_FRAME, recorder: Recorder | None = None
    ) -> None:
        self.dispatcher = dispatcher
        self.max_frame = max_frame
        self.recorder = recorder
        self._outbox = _Outbox(WRITE_BUFFER)
        self._outbound: dict[tuple[str, Any], _Outbound] = {}
        self._inbound: dict[tuple[str, Any], list[_Inbound]] = {}
        self._drained: anyio.Event | None = None  # set when the last in-flight request has answered (shutdown)
        self._next_id = 0
        self._tg: anyio.abc.TaskGroup | None = None
        self.closed = anyio.Event()
        self._writer_dead = False

    # ---- outgoing ------------------------------------------------------------------------------------------------
    def _push(self, data: bytes) -> bool:
        """Hand an encoded frame to the writer without suspending; False when the write buffer is full.

        Hot path (every streamed chunk). Not a checkpoint: a cancel requested by another task lands at the caller's
        next suspension, which on a single event loop is where it would have landed anyway.
        """
        return self._writer_dead or self._outbox.put(data)

    async def _send_bytes(self, data: bytes) -> None:
        while not self._push(data):
            await self._outbox.wait_room()

    async def _emit(self, obj: dict[str, Any]) -> None:
        if self._writer_dead:
            return
        data = wire.encode(obj)
        if secrets.json_has_secret(data) and not _carried_out(obj):
            # The last net under every frame but streamed chunks (see runtime.secrets): an error message, a tool
            # title or arguments the model wrote, a notice. Checked on the encoded bytes, rebuilt only on a hit.
            obj = secrets.redact(obj)
            data = wire.encode(obj)
        if self.recorder is not None:
            self.recorder.record("out", obj)
        await self._send_bytes(data)

    async def notify(self, method: str, params: Any) -> None:
        await self._emit(wire.notification(method, params))

    async def emit_frame(self, frame: dict[str, Any]) -> None:
        """Send a notification frame the caller built (the streaming hot path skips a layer this way)."""
        await self._emit(frame)

    def emit_encoded_nowait(self, data: bytes, frame: Callable[..., dict[str, Any]], *args: Any) -> bool:
        """`emit_encoded` without suspending: False when the write buffer is full (then await `emit_encoded`)."""
        if not (self._writer_dead or self._outbox.put(data)):
            return False
        if self.recorder is not None and not self._writer_dead:
            self.recorder.record("out", frame(*args))
        return True

    async def emit_encoded(self, data: bytes, frame: Callable[..., dict[str, Any]], *args: Any) -> None:
        """Send a frame the caller already encoded (one line, ending in a newline): the streaming hot path.
        `frame(*args)` builds the same frame as an object, only when a recorder needs it."""
        if self._writer_dead:
            return
        if self.recorder is not None:
            self.recorder.record("out", frame(*args))
        await self._send_bytes(data)

    async def request(self, method: str, params: Any) -> Any:
        """Send a request to the client and wait for its answer.

        Raises:
            ClientError: the client answered with an error.
            ConnectionClosed: the client went away first.
        If the waiting task is cancelled, the client is told with `$/cancel_request` and a late answer is dropped.
        """
        if self.closed.is_set():
            raise ConnectionClosed()
        rid = self._next_id
        self._next_id += 1
        key = wire.id_key(rid)
        pending = _Outbound()
        self._outbound[key] = pending
        try:
            await self._emit(wire.request(rid, method, params))
            await pending.event.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                # Only a request still unanswered is worth cancelling.
                if not self.closed.is_set() and not pending.event.is_set():
                    await self._emit(wire.notification("$/cancel_request", {"requestId": rid}))
            raise
        finally:
            self._outbound.pop(key, None)
        if pending.is_error:
            err = pending.error if isinstance(pending.error, dict) else {}
            code = c if isinstance(c := err.get("code"), int) else InternalError.code
            msg = m if isinstance(m := err.get("message"), str) else "error"
            raise ClientError(code, msg)
        if pending.result is _CLOSED:
            raise ConnectionClosed()
        return pending.result

    def start_soon(self, func: Callable[[*PosArgs], Coroutine[Any, Any, object]], *args: *PosArgs) -> None:
        """Run background work that belongs to this connection (e.g. a session's MCP servers): it may outlive the
        request that started it and is cancelled when the connection ends."""
        assert self._tg is not None, "the connection is not serving"
        self._tg.start_soon(func, *args)

    @property
    def busy(self) -> bool:
        """A request of the client is in flight (its handler, or the follow-up after its answer, is running)."""
        return bool(self._inbound)

    # ---- serving -------------------------------------------------------------------------------------------------
    async def serve(self, reader: ByteReader, writer: ByteWriter, initial: bytes = b"", eof: bool = False) -> None:
        """Serve until the input reaches EOF (or the output breaks); then shut the dispatcher down.

        `initial` is input already read before serving (the start-up fast path); `eof` says the input ended there.
        """
        self._writer_done = anyio.Event()  # before the writer task: shutdown may come before it first runs
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._writer_loop, writer)
            try:
                await self._reader_loop(reader, initial, eof)
            finally:
                self.closed.set()
                for pending in list(self._outbound.values()):
                    pending.result = _CLOSED
                    pending.event.set()
                with anyio.CancelScope(shield=True), anyio.move_on_after(1.5):
                    await self.dispatcher.shutdown()
                    # Give in-flight handlers their chance to answer, then flush the writer briefly.
                    with anyio.move_on_after(0.3):
                        await self._all_answered()
                for entries in list(self._inbound.values()):
                    for entry in entries:
                        entry.scope.cancel()
                with anyio.CancelScope(shield=True), anyio.move_on_after(0.5):
                    # Cancelled handlers still answer (-32800, or `cancelled` for prompts) before the writer closes.
                    await self._all_answered()
                    self._outbox.close()
                    await self._writer_done.wait()
                tg.cancel_scope.cancel()

    _writer_done: anyio.Event

    async def _all_answered(self) -> None:
        """Wait until no request of the client is in flight (every one has written its answer)."""
        while self._inbound:
            self._drained = anyio.Event()
            await self._drained.wait()

    async def _writer_loop(self, writer: ByteWriter) -> None:
        try:
            while (frames := await self._outbox.take()) is not None:
                try:
                    await writer.write(frames[0] if len(frames) == 1 else b"".join(frames))
                except OSError:
                    log.info("the client closed its input; stopping")
                    return
        finally:
            self._writer_dead = True
            self._outbox.close()
            self._writer_done.set()

    async def _reader_loop(self, reader: ByteReader, initial: bytes = b"", eof: bool = False) -> None:
        splitter = wire.LineSplitter(self.max_frame)
        data = initial
        while not self._writer_dead:
            if not data and not eof:
                data = await reader.read()
            if eof and not data:
                for line in splitter.close():
                    await self._on_line(line)
                return
            if not data:
                for line in splitter.close():
                    await self._on_line(line)
                return
            chunk, data = data, b""
            for line in splitter.feed(chunk):
                await self._on_line(line)

    async def _on_line(self, line: bytes | wire.Oversized) -> None:
        if isinstance(line, wire.Oversized):
            if self.recorder is not None:
                self.recorder.record("in", None, raw=f"<{line.size} bytes dropped>".encode())
            err = InvalidRequest(
                f"Invalid request: frame of {line.size} bytes exceeds the {self.max_frame // (1024 * 1024)} MiB limit"
            )
            await self._emit(wire.error_response(None, err.to_wire()))
            return
        frame = wire.classify(line)
        if frame is None:
            return
        if self.recorder is not None:
            if isinstance(frame, wire.Invalid) and isinstance(frame.error, ParseError):
                self.recorder.record("in", None, raw=line)
            else:
                self.recorder.record("in", _loads_quiet(line))
        if isinstance(frame, wire.Invalid):
            await self._emit(wire.error_response(frame.id, frame.error.to_wire()))
        elif isinstance(frame, wire.Response):
            pending = self._outbound.get(wire.id_key(frame.id))
            if pending is None or pending.event.is_set():
                # Unknown, or a second answer that arrived before the first was consumed: the first answer stands
                # (a late "allow" must never overwrite a "reject").
                log.debug("dropping an answer to unknown or already answered request id %r", frame.id)
                return
            pending.result, pending.error, pending.is_error = frame.result, frame.error, frame.is_error
            pending.event.set()
        elif isinstance(frame, wire.Notification):
            await self._on_notification(frame)
        else:
            await self._on_request(frame)

    async def _on_notification(self, frame: wire.Notification) -> None:
        if frame.method == "$/cancel_request":
            self._cancel_inbound(frame.params)
            return
        route = self.dispatcher.notifications.get(frame.method)
        if route is None:
            log.debug("ignoring unknown notification %s", frame.method)
            return
        try:
            params = route.params({} if frame.params is None else frame.params, "")
        except WireError as exc:
            log.debug("ignoring %s: %s", frame.method, exc)
            return
        try:
            maybe = route.handle(self.dispatcher.context, params)
            if maybe is not None:
                assert self._tg is not None
                self._tg.start_soon(_quiet, maybe, frame.method)
        except Exception:
            log.warning("notification %s failed", frame.method, exc_info=True)

    def _cancel_inbound(self, params: Any) -> None:
        if not isinstance(params, dict) or "requestId" not in params or not wire.valid_id(params["requestId"]):
            return
        entries = self._inbound.get(wire.id_key(params["requestId"]))
        if not entries:
            return
        entry = entries[-1]
        hook = entry.route.cancel
        if hook is not None and hook(self.dispatcher.context, entry.params):
            return
        entry.cancelled_by_peer = True
        entry.scope.cancel()

    async def _on_request(self, frame: wire.Request) -> None:
        route = self.dispatcher.requests.get(frame.method)
        if route is None:
            await self._emit(
                wire.error_response(frame.id, MethodNotFound(f"Method not found: {frame.method}").to_wire())
            )
            return
        if sum(len(v) for v in self._inbound.values()) >= MAX_INFLIGHT:
            await self._emit(wire.error_response(frame.id, InternalError("Too many requests in flight").to_wire()))
            return
        try:
            # The connection boundary: a handler only ever sees params that fit the method's model.
            params = route.params({} if frame.params is None else frame.params, "")
        except WireError as exc:
            await self._emit(wire.error_response(frame.id, invalid_params(exc).to_wire()))
            return
        if route.received is not None:
            # In reading order, before the task runs; it runs in the reader loop, so a failure here must never end
            # the connection.
            try:
                route.received(self.dispatcher.context, params)
            except Exception:
                log.warning("the received hook of %s failed", frame.method, exc_info=True)
        key = wire.id_key(frame.id)
        entry = _Inbound(route, params, anyio.CancelScope())
        self._inbound.setdefault(key, []).append(entry)
        assert self._tg is not None
        self._tg.start_soon(self._run_request, frame, key, entry)

    async def _run_request(self, frame: wire.Request, key: tuple[str, Any], entry: _Inbound) -> None:
        started = time.perf_counter()
        answer: dict[str, Any] | None = None
        then: Callable[[], Awaitable[None]] | None = None
        try:
            with entry.scope:
                try:
                    result = await entry.route.handle(self.dispatcher.context, entry.params)
                    if isinstance(result, Answer):
                        result, then = result.result, result.then
                    answer = wire.response(frame.id, _result_wire(result))
                except RpcError as exc:
                    answer = wire.error_response(frame.id, exc.to_wire())
                except Exception as exc:
                    answer = wire.error_response(frame.id, error_to_wire(exc, frame.method))
            if answer is None:
                # Cancelled: by the peer's $/cancel_request, or because the connection is shutting down.
                answer = wire.error_response(frame.id, RequestCancelled().to_wire())
            with anyio.CancelScope(shield=True):
                await self._emit(answer)
            if then is not None and "result" in answer:
                try:
                    await then()
                except Exception:
                    log.warning("follow-up of %s failed", frame.method, exc_info=True)
        finally:
            entries = self._inbound.get(key)
            if entries is not None:
                if entry in entries:
                    entries.remove(entry)
                if not entries:
                    del self._inbound[key]
            if not self._inbound and self._drained is not None:
                self._drained.set()
            log.debug("%s answered in %.1f ms", frame.method, (time.perf_counter() - started) * 1000)


_CLOSED = object()


def _result_wire(result: Any) -> Any:
    if isinstance(result, WireModel):
        return result.to_wire()
    return {} if result is None else result


def _loads_quiet(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except Exception:
        return None


async def _quiet(aw: Awaitable[None], method: str) -> None:
    try:
        await aw
    except Exception:
        log.warning("notification %s failed", method, exc_info=True)
