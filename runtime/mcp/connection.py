"""One MCP server connection: started in the background, owned by a single task, closed with its session.

`ServerConnection.run` is that task. It imports the SDK (off the event loop: the import takes over a second), opens
the transport (stdio child, streamable HTTP or SSE), performs the handshake, lists the tools, reports them, then waits
until the session closes it or the server goes away. The SDK's `Client` must be entered and left in one task, which
is why calls from turns go through `call_tool` on the live client while `run` keeps the context open.

Every way this can end is reported exactly once through `ConnectionEvents`: `on_ready`, then `on_stopped` if the
server goes away later; or `on_failed` if it never became ready. A close by the session reports nothing.

Elicitation: the client tells the server exactly which modes the editor shows (form, url, or none), and a server's
`elicitation/create` during one of its tool calls is put to the user through the session's `UserAsker`, tied to that
call (a 2026-07-28 server embeds the request in the call's result; an older one sends it while the call runs, and it
is tied to the call only when just one is running on this connection). The answer goes back as is. What cannot be
shown (no support for the mode, a form ACP cannot hold, a question outside any tool call) is declined at once and
said in the session. A question still open when its call ends is withdrawn and answered `cancel`.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import anyio

from runtime import lazy  # the MCP SDK and the HTTP client: over a second to import, done off the event loop
from runtime.elicitation import Answer, CannotAsk, UserAsker, clean_form_schema, clip
from runtime.mcp.config import HttpServer, ServerSpec, StdioServer, redact
from runtime.mcp.stdio import StdioProcessTransport
from runtime.tools.base import ToolFailure, environ_without_secrets

log = logging.getLogger("gatewright.mcp")

State = Literal["starting", "ready", "failed", "stopped", "closed"]
ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
MAX_TOOL_PAGES = 50
LISTEN_RETRY_S = 1.0
MAX_URL_IDS = 100  # URL-mode questions whose completion may still be announced

# The tool call this task is running (set by `call_tool`): a 2026-07-28 server's questions arrive inside the call,
# in its task, and find their call here.
_CALL: contextvars.ContextVar[str | None] = contextvars.ContextVar("gatewright_mcp_call", default=None)


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool as the server lists it (only what gatewright uses)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    title: str | None = None
    read_only_hint: bool = False


class ConnectionEvents(Protocol):
    async def on_ready(self, conn: ServerConnection, tools: list[RemoteTool]) -> None: ...

    async def on_failed(self, conn: ServerConnection, reason: str) -> None: ...

    async def on_stopped(self, conn: ServerConnection, reason: str) -> None: ...

    async def on_tools_changed(self, conn: ServerConnection, tools: list[RemoteTool]) -> None:
        """The server said its tool list changed (`notifications/tools/list_changed`); `tools` is the new list."""
        ...

    async def on_question_declined(self, conn: ServerConnection, reason: str) -> None:
        """The server asked the user something that could not be shown; it was declined."""
        ...


@dataclass(eq=False)
class _OpenQuestion:
    """A server's question open with the user, and the tool calls it may belong to: once all have ended, it is
    withdrawn."""

    calls: set[str]
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


_import_lock = threading.Lock()


def _import_sdk() -> None:
    with _import_lock:  # several servers starting at once import once, not racing each other's module locks
        _ = lazy.httpx2, lazy.mcp_client, lazy.mcp_sse, lazy.mcp_streamable_http, lazy.mcp_types  # imported now


class ServerConnection:
    def __init__(
        self,
        spec: ServerSpec,
        *,
        cwd: str,
        events: ConnectionEvents,
        start_timeout: float = 30.0,
        client_version: str = "0",
        asker: UserAsker | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.cwd = cwd
        self.events = events
        self.start_timeout = start_timeout
        self.client_version = client_version
        self.state: State = "starting"
        self.settled = anyio.Event()  # ready or failed: a turn waiting for tools may go on
        self.finished = anyio.Event()  # run() returned
        self.started_at = time.monotonic()
        self.secrets = spec.secrets()
        self._client: Any = None
        self._transport: Any = None
        self._wake = anyio.Event()
        self._closing = False
        self._timed_out = False
        self._scope: anyio.CancelScope | None = None
        self._tools_changed = anyio.Event()
        self._listed: list[RemoteTool] = []
        self.asker = asker
        self._running: dict[str, int] = {}  # tool call id -> calls of it in flight on this connection
        self._questions: list[_OpenQuestion] = []
        self._url_ids: dict[str, str] = {}  # the server's elicitation id -> the one the editor was given
        self._completed: list[str] = []  # URL-mode steps the server said are done, for the editor
        self._completed_ready = anyio.Event()

    # ---- lifecycle -----------------------------------------------------------------------------------------------
    async def run(self) -> None:
        failure: BaseException | None = None
        try:
            async with anyio.create_task_group() as tg:
                self._scope = tg.cancel_scope
                if self._closing:
                    tg.cancel_scope.cancel()
                tg.start_soon(self._watch_start, tg.cancel_scope)
                await self._serve()
                tg.cancel_scope.cancel()
        except Exception as exc:  # every failure of a server is reported, never raised into the host
            failure = exc
        finally:
            self._client = None
            was_ready = self.state == "ready"
            with anyio.CancelScope(shield=True):
                if self._closing:
                    self.state = "closed"
                elif not was_ready:
                    self.state = "failed"
                    reason = (
                        f"did not finish starting within {self.start_timeout:g} s"
                        if self._timed_out
                        else await self._describe(failure)
                    )
                    await self._report(self.events.on_failed, reason)
                else:
                    self.state = "stopped"
                    await self._report(self.events.on_stopped, await self._describe(failure))
            self.settled.set()
            self.finished.set()

    async def _report(self, fn: Callable[[ServerConnection, str], Awaitable[None]], reason: str) -> None:
        try:
            with anyio.move_on_after(1.0):  # runs shielded: a stuck host must not hold the shutdown
                await fn(self, reason)
        except Exception:
            log.warning("reporting the state of MCP server %s failed", self.name, exc_info=True)

    async def close(self, grace: float = 2.0) -> None:
        """Stop the server (stdio: its process group is killed) and wait, bounded, for the connection to end."""
        self._closing = True
        self._wake.set()
        if self.state == "starting" and self._scope is not None:
            self._scope.cancel()
        with anyio.move_on_after(grace):
            await self.finished.wait()

    async def _watch_start(self, scope: anyio.CancelScope) -> None:
        await anyio.sleep(self.start_timeout)
        if self.state == "starting":
            self._timed_out = True
            scope.cancel()

    async def _serve(self) -> None:
        await anyio.to_thread.run_sync(_import_sdk, abandon_on_cancel=True)
        async with contextlib.AsyncExitStack() as stack:
            transport = await self._open_transport(stack)
            self._transport = transport
            modes = self.elicitation_modes()
            honest = _can_advertise_modes()
            # Without a way to say "no elicitation" while still answering, a server that may not ask is left to the
            # SDK's own refusal rather than told a capability the editor lacks.
            callback = self._on_elicit if modes or honest else None
            client = lazy.mcp_client.Client(
                transport,
                cache=None,
                message_handler=self._on_message,
                elicitation_callback=callback,
                client_info=lazy.mcp_types.Implementation(name="gatewright", version=self.client_version),
            )
            if honest:
                _advertise_modes(client, modes)
            await stack.enter_async_context(client)
            tools = await _list_tools(client)
            self._listed = tools
            self._client = client
            self.state = "ready"
            self.settled.set()
            log.info("MCP server %s is ready with %d tool(s)", self.name, len(tools))
            await self.events.on_ready(self, tools)
            exited: anyio.Event | None = getattr(transport, "exited", None)
            async with anyio.create_task_group() as waiters:

                async def wake_on(ev: anyio.Event) -> None:
                    await ev.wait()
                    waiters.cancel_scope.cancel()

                waiters.start_soon(wake_on, self._wake)
                if exited is not None:
                    waiters.start_soon(wake_on, exited)
                waiters.start_soon(self._follow_tool_list, client)
                waiters.start_soon(self._forward_completions)

    async def _on_message(self, message: Any) -> None:
        """Messages the SDK does not handle itself. Runs in the SDK's receive loop: only signal, never call back."""
        note = getattr(message, "root", message)
        method = getattr(note, "method", None)
        if method == "notifications/tools/list_changed":
            self._tools_changed.set()
        elif method == "notifications/elicitation/complete":
            ours = self._url_ids.pop(str(getattr(getattr(note, "params", None), "elicitation_id", "")), None)
            if ours is not None:
                self._completed.append(ours)
                self._completed_ready.set()

    async def _forward_completions(self) -> None:
        """Tell the editor that a URL-mode step it showed is done (`elicitation/complete`)."""
        while True:
            await self._completed_ready.wait()
            self._completed_ready = anyio.Event()
            done, self._completed = self._completed, []
            for elicitation_id in done:
                if self.asker is None:
                    continue
                try:
                    await self.asker.complete_url(elicitation_id)
                except Exception:
                    log.warning("MCP server %s: telling the editor a step is done failed", self.name, exc_info=True)

    # ---- elicitation ---------------------------------------------------------------------------------------------
    def elicitation_modes(self) -> frozenset[str]:
        """The elicitation modes the editor shows, which is exactly what the server is told."""
        a = self.asker
        if a is None:
            return frozenset()
        return frozenset(m for m, on in (("form", a.form), ("url", a.url)) if on)

    async def _on_elicit(self, context: Any, params: Any) -> Any:
        """The SDK's elicitation callback: always an `ElicitResult`, never an error, never a wait without end."""
        answer = await self._elicit(params)
        content = dict(answer.content) if answer.action == "accept" and answer.content is not None else None
        return lazy.mcp_types.ElicitResult(action=answer.action, content=content)

    async def _elicit(self, params: Any) -> Answer:
        mode = getattr(params, "mode", "form")
        message = " ".join(str(getattr(params, "message", "")).split())
        own = _CALL.get()
        calls = {own} if own else set(self._running)
        if self.asker is None:
            return await self._decline(message, "this editor does not show questions from the agent")
        if not calls:
            return await self._decline(message, "it asked outside any tool call")
        if mode not in self.elicitation_modes():
            kind = "open addresses" if mode == "url" else "show forms" if mode == "form" else f"do {str(mode)[:20]!r}"
            return await self._decline(message, f"this editor does not {kind}")
        call_id = next(iter(calls)) if len(calls) == 1 else None
        shown = clip(f"{self.name} (MCP server) asks: {message}")
        question = _OpenQuestion(set(calls))
        self._questions.append(question)
        try:
            with question.scope:
                if mode == "url":
                    ours = "elic_" + uuid.uuid4().hex
                    answer = await self.asker.ask_url(shown, str(getattr(params, "url", "")), ours, call_id)
                    theirs = getattr(params, "elicitation_id", None)
                    if answer.action == "accept" and isinstance(theirs, str) and theirs:
                        self._url_ids[theirs] = ours
                        while len(self._url_ids) > MAX_URL_IDS:
                            self._url_ids.pop(next(iter(self._url_ids)))
                    return answer
                form = clean_form_schema(getattr(params, "requested_schema", None))
                return await self.asker.ask_form(shown, form, call_id)
            return Answer("cancel")  # every call it may belong to ended while it was open
        except CannotAsk as exc:
            return await self._decline(message, exc.reason)
        finally:
            self._questions.remove(question)

    async def _decline(self, message: str, reason: str) -> Answer:
        reason = self._clean(reason)
        log.warning(
            "MCP server %s asked a question that was declined (%s): %s", self.name, reason, self._clean(message)[:200]
        )
        hook = getattr(self.events, "on_question_declined", None)
        if hook is not None:
            await self._report(hook, reason)
        return Answer("decline")

    def _call_ended(self, call_id: str) -> None:
        for question in list(self._questions):
            question.calls.discard(call_id)
            if not question.calls:
                question.scope.cancel()

    async def _follow_tool_list(self, client: Any) -> None:
        """List the tools again after every change the server announces (several in a row: once, after the last).

        A 2026-07-28 server announces changes on a `subscriptions/listen` stream; an older one sends
        `notifications/tools/list_changed` outright (`_on_message`). Both set the same event.
        """
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._listen_for_changes, client)
            await self._relist_on_change(client)

    async def _listen_for_changes(self, client: Any) -> None:
        while True:
            try:
                async with client.listen(tools_list_changed=True) as sub:
                    if not getattr(sub.honored, "tools_list_changed", False):
                        return  # the server will not tell: its tools are the ones it listed at the start
                    # Events are not replayed: a change between the first listing (or a dropped stream) and this
                    # acknowledgment would be lost, so list once more now.
                    self._tools_changed.set()
                    async for _event in sub:
                        self._tools_changed.set()
                    return  # the server ended the stream gracefully
            except lazy.mcp_subscriptions.SubscriptionLost as exc:
                # the stream dropped: listen again (for as long as the connection lives)
                log.info(
                    "MCP server %s: tool-change subscription lost (%s); listening again",
                    self.name,
                    self._clean(_one_line(_leaf(exc))),
                )
            except Exception as exc:  # no listen before 2026-07-28 (such servers send notifications/tools/list_changed
                # instead, see `_on_message`), or the server refused it: its tools stay as listed
                log.debug(
                    "MCP server %s: no tool-change subscription: %s", self.name, self._clean(_one_line(_leaf(exc)))
                )
                return
            await anyio.sleep(LISTEN_RETRY_S)

    async def _relist_on_change(self, client: Any) -> None:
        while True:
            await self._tools_changed.wait()
            self._tools_changed = anyio.Event()
            try:
                tools = await _list_tools(client)
            except Exception as exc:  # the old tools stay; the next change notification tries again
                log.warning(
                    "MCP server %s: listing its changed tools failed: %s", self.name, self._clean(_one_line(_leaf(exc)))
                )
                continue
            if tools == self._listed:
                continue
            self._listed = tools
            log.info("MCP server %s changed its tools: now %d", self.name, len(tools))
            await self.events.on_tools_changed(self, tools)

    async def _open_transport(self, stack: contextlib.AsyncExitStack) -> Any:
        spec = self.spec
        if isinstance(spec, StdioServer):
            env = environ_without_secrets() | dict(spec.env)
            return StdioProcessTransport(spec.name, spec.command, spec.args, env, self.cwd, self.secrets, spec.sandbox)
        assert isinstance(spec, HttpServer)
        headers = dict(spec.headers)
        if spec.transport == "sse":
            return lazy.mcp_sse.sse_client(spec.url, headers=headers, timeout=30.0)
        http = lazy.httpx2.AsyncClient(headers=headers, timeout=lazy.httpx2.Timeout(30.0, read=300.0))
        await stack.enter_async_context(http)
        return lazy.mcp_streamable_http.streamable_http_client(spec.url, http_client=http)

    # ---- calls ---------------------------------------------------------------------------------------------------
    async def call_tool(
        self, tool: str, arguments: dict[str, Any], progress: ProgressFn | None, call_id: str = ""
    ) -> Any:
        """Call a tool on the live server; returns the SDK's `CallToolResult`. `call_id` is the session's id of the
        call, which the server's questions during it are tied to.

        Raises:
            ToolFailure: the server is not running, went away during the call, or answered with a protocol error.
        """
        client = self._client
        if client is None or self.state != "ready":
            raise ToolFailure(f"MCP server {self.name} is not running", "McpServerUnavailable")
        token = _CALL.set(call_id or None)
        self._running[call_id] = self._running.get(call_id, 0) + 1
        try:
            return await self._call(client, tool, arguments, progress)
        finally:
            _CALL.reset(token)
            left = self._running.pop(call_id, 1) - 1
            if left:
                self._running[call_id] = left
            else:
                self._call_ended(call_id)

    async def _call(self, client: Any, tool: str, arguments: dict[str, Any], progress: ProgressFn | None) -> Any:
        try:
            return await client.call_tool(tool, arguments, progress_callback=progress)
        except lazy.mcp_exceptions.MCPError as exc:
            if _is_connection_closed(exc) or self._gone():
                raise ToolFailure(
                    f"MCP server {self.name} went away during the call{await self._exit_note()}", "McpServerStopped"
                ) from None
            raise ToolFailure(self._clean(f"MCP server {self.name} refused the call: {exc}"), "McpError") from None
        except ToolFailure:
            raise
        except Exception as exc:
            if self._gone():
                raise ToolFailure(
                    f"MCP server {self.name} went away during the call{await self._exit_note()}", "McpServerStopped"
                ) from None
            raise ToolFailure(self._clean(f"MCP server {self.name}: {_one_line(_leaf(exc))}"), "McpError") from None

    # ---- failure text --------------------------------------------------------------------------------------------
    def _stdio(self) -> StdioProcessTransport | None:
        """The transport when the server is a child process (an HTTP server has no exit to report)."""
        t = self._transport
        return t if isinstance(t, StdioProcessTransport) else None

    def _gone(self) -> bool:
        t = self._stdio()
        return t is not None and t.exited.is_set()

    async def _exit_note(self) -> str:
        rc = await self._returncode()
        return "" if rc is None else f" ({_exit_text(rc)})"

    async def _returncode(self) -> int | None:
        t = self._stdio()
        if t is None or t.process is None:
            return None
        # stdout EOF may arrive just before the exit is reaped; no event tells us when, so poll briefly
        with anyio.move_on_after(0.5):
            while t.returncode is None and t.exited.is_set():  # noqa: ASYNC110
                await anyio.sleep(0.01)
        return t.returncode

    async def _describe(self, exc: BaseException | None) -> str:
        leaf = _leaf(exc) if exc is not None else None
        text: str
        rc = await self._returncode()
        if isinstance(leaf, FileNotFoundError) and isinstance(self.spec, StdioServer):
            text = f"command not found: {self.spec.command}"
        elif isinstance(leaf, PermissionError) and isinstance(self.spec, StdioServer):
            text = f"command is not executable: {self.spec.command}"
        elif rc is not None:
            text = _exit_text(rc)
        elif leaf is None:
            text = "the connection ended"
        elif _is_connection_closed(leaf):
            text = "the server closed the connection"
        elif type(leaf).__name__ == "ConnectError" and isinstance(self.spec, HttpServer):
            text = f"cannot connect to {_safe_url(self.spec.url)}"
        elif type(leaf).__name__ == "HTTPStatusError":
            status = getattr(getattr(leaf, "response", None), "status_code", "?")
            text = f"HTTP {status} from {_safe_url(self.spec.url) if isinstance(self.spec, HttpServer) else 'server'}"
        else:
            text = _one_line(leaf)
        tail = self._transport.stderr.last_line() if getattr(self._transport, "stderr", None) else None
        if tail and rc is not None:
            text += f": {tail}"
        return self._clean(text)

    def _clean(self, text: str) -> str:
        text = redact(" ".join(text.split()), self.secrets)
        return text if len(text) <= 300 else text[:299] + "…"


def _can_advertise_modes() -> bool:
    """Whether this SDK lets us state the elicitation modes ourselves (see `_advertise_modes`)."""
    return callable(getattr(lazy.mcp_client.Client, "_build_session", None)) and callable(
        getattr(lazy.mcp_session.ClientSession, "_build_capabilities", None)
    )


def _advertise_modes(client: Any, modes: frozenset[str]) -> None:
    """Make the capabilities `client` sends name exactly `modes` (none: no elicitation capability at all).

    The SDK advertises both form and url as soon as a callback is set; an editor that shows only forms, or nothing,
    must not be promised more. Its session is built and handed its capabilities in private methods, so this wraps
    them (`_can_advertise_modes` checks they exist; tests/acp_server/test_elicitation_raw.py checks what a server
    receives).
    """
    build = client._build_session
    wanted = (
        lazy.mcp_types.ElicitationCapability(
            form=lazy.mcp_types.FormElicitationCapability() if "form" in modes else None,
            url=lazy.mcp_types.UrlElicitationCapability() if "url" in modes else None,
        )
        if modes
        else None
    )

    async def build_session(stack: Any) -> Any:
        session = await build(stack)
        own = session._build_capabilities

        def capabilities(version: str) -> Any:
            return own(version).model_copy(update={"elicitation": wanted})

        session._build_capabilities = capabilities
        return session

    client._build_session = build_session


async def _list_tools(client: Any) -> list[RemoteTool]:
    tools: list[RemoteTool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):  # a paginator that never ends cannot hang the start
        page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
        for t in page.tools:
            ann = t.annotations
            schema = t.input_schema if isinstance(t.input_schema, dict) else {}
            tools.append(
                RemoteTool(
                    name=t.name,
                    description=t.description or "",
                    input_schema=schema,
                    title=t.title or (ann.title if ann is not None else None),
                    read_only_hint=bool(ann is not None and ann.read_only_hint is True),
                )
            )
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups: task groups wrap the cause we want to show."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _is_connection_closed(exc: BaseException) -> bool:
    return type(exc).__name__ == "MCPError" and "connection closed" in str(exc).lower()


def _one_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def _exit_text(rc: int) -> str:
    return f"exited with code {rc}" if rc >= 0 else f"killed by signal {-rc}"


def _safe_url(url: str) -> str:
    """scheme://host[:port]/path: no credentials, no query (tokens often travel there)."""
    try:
        p = urlsplit(url)
        host = p.hostname or ""
        port = f":{p.port}" if p.port else ""
    except ValueError:
        return "<invalid url>"
    return f"{p.scheme}://{host}{port}{p.path}"
