"""The ACP methods gatewright serves (the `Dispatcher` for `rpc.JsonRpcConnection`).

`initialize` is answered from constants: no model, MCP or disk work happens before it. Every other handler checks its
params and answers with a result or a typed error; unknown session ids get `-32002` and the connection stays usable.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp_server.errors import AuthRequired, InvalidParams, ResourceNotFound
from acp_server.params import obj, opt_list, req_str, str_list
from runtime import secrets
from runtime.version import __version__

if TYPE_CHECKING:
    from acp_server.rpc import JsonRpcConnection
    from acp_server.session import AcpSession
    from acp_server.session_methods import SessionLifecycle
    from permissions.rules import Rule
    from runtime import ModelFactory

log = logging.getLogger("gatewright.agent")

PROTOCOL_VERSION = 1


@dataclass
class AgentConfig:
    mode: str = "safe"
    model_factory: ModelFactory | None = None
    state_dir: str | None = None
    rules: tuple[Rule, ...] = ()  # the config file's allow/deny rules, in every session


class GatewrightAgent:
    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.conn: JsonRpcConnection | None = None
        self.sessions: dict[str, AcpSession] = {}
        self.client_caps: dict[str, Any] = {}
        self.initialized = False
        self._prompt_tickets: dict[int, int] = {}  # id(params) of a prompt read but not started → cancel epoch then
        self.notifications: Mapping[str, Any] = {
            "session/cancel": self.cancel,
        }

    # Built at first use, i.e. once the connection serves: the `initialize` fast path (server.py) answers before
    # the session machinery (and the SQLite store behind it) is even imported.
    @functools.cached_property
    def lifecycle(self) -> SessionLifecycle:
        from acp_server.session_methods import SessionLifecycle

        return SessionLifecycle(self)

    @functools.cached_property
    def requests(self) -> Mapping[str, Any]:
        return {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "session/new": self.new_session,
            "session/prompt": self.prompt,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
            **self.lifecycle.handlers(),
        }

    def attach(self, conn: JsonRpcConnection) -> None:
        self.conn = conn

    # ---- lifecycle -------------------------------------------------------------------------------------------------
    async def initialize(self, params: Any) -> dict[str, Any]:
        return self.initialize_sync(params)

    def initialize_sync(self, params: Any) -> dict[str, Any]:
        """`initialize` from constants only: also used before the event loop starts (see `server.py`)."""
        p = obj(params)
        version = p.get("protocolVersion")
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise InvalidParams("Invalid params: \"protocolVersion\" must be a non-negative integer")
        caps = p.get("clientCapabilities")
        self.client_caps = caps if isinstance(caps, dict) else {}
        self.initialized = True
        factory = self.config.model_factory  # built at start-up; these are in-memory look-ups, no I/O
        return {
            # A v1 agent answers 1 to every client version (never an echo).
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": bool(factory and factory.any_accepts_images()), "audio": False,
                                       "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": True},
                # Each one works (acp_server.session_methods); `fork` is unstable, hence in the unstable schema only.
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}, "fork": {}},
            },
            "authMethods": factory.auth_methods() if factory else [],
            "agentInfo": {"name": "gatewright", "title": "gatewright", "version": __version__},
        }

    async def authenticate(self, params: Any) -> dict[str, Any]:
        p = obj(params)
        # Whatever a client sends beyond the method id may be a credential: never inherited, logged or stored.
        secrets.register_payload(p, skip=frozenset({"methodId"}))
        method = req_str(p, "methodId")
        factory = self.config.model_factory
        if factory is not None and method in {m["id"] for m in factory.auth_methods()}:
            # An env-var method: nothing to do in-process; say plainly whether the variable is there.
            var = method.removeprefix("env:")
            if factory.key_is_set(var):
                return {}
            raise AuthRequired(f"{var} is not set: set it in the environment the editor starts gatewright with, "
                               "then restart the agent")
        raise InvalidParams(f"Invalid params: unknown authentication method {method[:100]!r}")

    def cancel_request_hook(self, method: str, params: Any) -> bool:
        # `$/cancel_request` for a prompt: cancel the turn, which answers `stopReason: cancelled` by itself.
        if method == "session/prompt" and isinstance(params, dict):
            session = self._session_of(params)
            if session is not None:
                if session.active_prompt is params:
                    session.runtime.cancel()
                else:  # still queued: it answers `cancelled` when its turn comes, without running
                    session.cancelled_prompts.append(params)
                return True
        return False

    def warm_up(self) -> None:
        for stage in self.warm_up_stages():
            stage()

    def warm_up_stages(self) -> list[Callable[[], None]]:
        """What a fresh process loads for its first session and first prompt, in the order they need it.
        `server.py` runs each stage when the connection has been idle for a moment (after `initialize`; while the
        user types the first prompt), so an editor that waits between steps does not wait at any of them."""

        def session() -> None:  # the runtime, tools, permissions, the session store (~100 ms)
            import acp_server.session  # noqa: F401
            from runtime import builtin_tools, store_new  # noqa: F401  (store_new: the journal, the store)

            builtin_tools()  # imports the tool modules
            _ = self.lifecycle.store

        def model() -> None:  # the default model's HTTP stack and client (~40 ms); no connection is opened
            if self.config.model_factory is not None:
                self.config.model_factory.prepare_default()

        def tool_calls() -> None:  # argument checking of the first tool call (~30 ms)
            import jsonschema  # noqa: F401

        def sandbox() -> None:  # the sandbox helper (~40 ms to start and probe, its own process): the first command
            from runtime.sandbox import prestart  # need not wait for it

            prestart()

        return [session, model, tool_calls, sandbox]

    async def shutdown(self) -> None:
        for session in list(self.sessions.values()):
            await session.close()
            if session.journal is not None:
                session.journal.sync()

    # ---- sessions ----------------------------------------------------------------------------------------------
    def _session(self, params: dict[str, Any]) -> AcpSession:
        sid = req_str(params, "sessionId")
        session = self.sessions.get(sid)
        if session is None:
            raise ResourceNotFound(f"Session not found: {sid[:100]}")
        return session

    async def new_session(self, params: Any) -> Any:
        from acp_server.session import AcpSession, new_session_id
        from permissions.modes import parse_mode
        from permissions.store import state_dir

        p = obj(params)
        cwd = req_str(p, "cwd")
        if not os.path.isabs(cwd) or "\x00" in cwd:
            raise InvalidParams("Invalid params: \"cwd\" must be an absolute path")
        if not os.path.isdir(cwd):  # noqa: ASYNC240  (one stat of a path the client named: not worth a thread)
            raise InvalidParams("Invalid params: \"cwd\" is not an existing directory")
        extra = str_list(p, "additionalDirectories")
        if extra:
            raise InvalidParams("Invalid params: \"additionalDirectories\" is not supported by this agent")
        servers = opt_list(p, "mcpServers")
        assert self.conn is not None
        sid = new_session_id()
        factory = self.config.model_factory
        model = factory.create() if factory else None
        session = AcpSession(id=sid, cwd=cwd, additional_directories=extra, mode=parse_mode(self.config.mode),
                             model=model, conn=self.conn, client_caps=self.client_caps, factory=factory,
                             model_id=factory.default_id if factory and model else None,
                             model_choices=factory.choices() if factory else (),
                             state_dir=state_dir(self.config.state_dir), configured_rules=self.config.rules)
        self.sessions[sid] = session
        if servers:
            from runtime import connect_servers  # lazy: sessions without MCP servers never load it

            await connect_servers(session, servers)  # returns at once; servers start after this answer
        result = {"sessionId": sid, "modes": session.modes_state(), "configOptions": session.config_options()}
        return self.lifecycle.created(session, result)  # stored; its commands follow the answer

    def request_received(self, method: str, params: Any) -> None:
        """Called by the connection as each request is read: a prompt remembers the cancel epoch of its arrival,
        so a `session/cancel` read after it cancels it even if its task has not started yet."""
        if method == "session/prompt" and isinstance(params, dict):
            session = self._session_of(params)
            if session is not None:
                self._prompt_tickets[id(params)] = session.cancel_epoch

    def _session_of(self, params: dict[str, Any]) -> AcpSession | None:
        """The session a request names, if any; a wrong-typed id (a list, an object) is simply none."""
        sid = params.get("sessionId")
        return self.sessions.get(sid) if isinstance(sid, str) else None

    async def prompt(self, params: Any) -> dict[str, Any]:
        import anyio

        from runtime import NO_MODEL_MESSAGE
        from runtime import AuthRequired as RuntimeAuthRequired

        arrival_epoch = self._prompt_tickets.pop(id(params), None)
        p = obj(params)
        session = self._session(p)
        blocks = p.get("prompt")
        if not isinstance(blocks, list):
            raise InvalidParams("Invalid params: \"prompt\" must be an array of content blocks")
        parts, notes = convert_prompt(blocks, accepts_images=bool(session.model and session.model.accepts_images))
        # Prompts queue on the lock in order; a cancel read after this prompt arrived cancels it too.
        ticket = session.cancel_epoch if arrival_epoch is None else arrival_epoch
        async with session.turn_lock:
            if session.closed or session.cancel_epoch != ticket or any(c is params for c in session.cancelled_prompts):
                session.cancelled_prompts = [c for c in session.cancelled_prompts if c is not params]
                return {"stopReason": "cancelled"}
            session.active_prompt = params
            plan = await self.lifecycle.before_prompt(session, blocks, parts)
            if plan.stop is not None:
                return {"stopReason": plan.stop}
            parts = plan.parts
            for note in notes:
                await session.send_update({"sessionUpdate": "agent_message_chunk",
                                           "content": {"type": "text", "text": note}})
            if session.model is None:
                await session.send_update({"sessionUpdate": "agent_message_chunk",
                                           "content": {"type": "text", "text": NO_MODEL_MESSAGE}})
                return {"stopReason": "end_turn"}
            try:
                outcome = await session.runtime.run_turn(parts, session.emit)
            except RuntimeAuthRequired as exc:
                raise AuthRequired(f"Authentication required: {exc}") from None
            finally:
                with anyio.CancelScope(shield=True):
                    await self.lifecycle.after_prompt(session)
            return {"stopReason": outcome.stop_reason}

    def cancel(self, params: Any) -> None:
        if not isinstance(params, dict):
            return
        session = self._session_of(params)
        if session is not None:
            session.cancel()

    async def set_mode(self, params: Any) -> dict[str, Any]:
        p = obj(params)
        session = self._session(p)
        mode_id = req_str(p, "modeId")
        await self._apply_mode(session, mode_id, announce_mode=False)
        session.save_settings()
        return {}

    async def set_config_option(self, params: Any) -> dict[str, Any]:
        from acp_server.session import REMEMBER_OPTION

        p = obj(params)
        session = self._session(p)
        config_id = req_str(p, "configId")
        value = p.get("value")
        if config_id not in ("mode", "model", REMEMBER_OPTION) or (config_id == "model" and not session.model_choices):
            raise InvalidParams(f"Invalid params: unknown config option {config_id[:100]!r}")
        if not isinstance(value, str):
            raise InvalidParams("Invalid params: \"value\" must be one of the option's values")
        if config_id == REMEMBER_OPTION:
            try:
                session.set_remember(value)
            except ValueError:
                raise InvalidParams(f"Invalid params: \"remember\" cannot be {value[:100]!r}; expected session, "
                                    "project or global") from None
        elif config_id == "model":
            if value not in {m.id for m in session.model_choices} or self.config.model_factory is None:
                raise InvalidParams(f"Invalid params: unknown model {value[:100]!r}")
            # Takes effect at the next model call, even in the middle of a running turn.
            session.set_model(value, self.config.model_factory.create(value))
        else:
            await self._apply_mode(session, value, announce_mode=True, announce_config=False)
        session.save_settings()
        return {"configOptions": session.config_options()}

    async def _apply_mode(self, session: AcpSession, mode_id: str, *, announce_mode: bool,
                          announce_config: bool = True) -> None:
        try:
            session.set_mode(mode_id)  # read by the decorator at the next call
        except ValueError:
            raise InvalidParams(f"Invalid params: unknown mode {mode_id[:100]!r}") from None
        await session.announce(mode=announce_mode, config=announce_config)


def convert_prompt(blocks: list[Any], *, accepts_images: bool) -> tuple[list[Any], list[str]]:
    """ACP content blocks → the runtime's user parts, plus plain notes for the user about what was not sent."""
    from runtime import ImagePart, TextPart

    parts: list[Any] = []
    notes: list[str] = []
    for i, b in enumerate(blocks):
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            raise InvalidParams(f"Invalid params: prompt[{i}] is not a content block")
        kind = b["type"]
        if kind == "text":
            if not isinstance(b.get("text"), str):
                raise InvalidParams(f"Invalid params: prompt[{i}].text must be a string")
            parts.append(TextPart(b["text"]))
        elif kind == "resource_link":
            uri, name = b.get("uri"), b.get("name")
            if not isinstance(uri, str) or not isinstance(name, str):
                raise InvalidParams(f"Invalid params: prompt[{i}] resource_link needs \"uri\" and \"name\"")
            parts.append(TextPart(f"[@{name}]({uri})"))
        elif kind == "resource":
            res = b.get("resource")
            if not isinstance(res, dict) or not isinstance(res.get("uri"), str):
                raise InvalidParams(f"Invalid params: prompt[{i}].resource needs a \"uri\"")
            if isinstance(res.get("text"), str):
                parts.append(TextPart(f'<context uri="{res["uri"]}">\n{res["text"]}\n</context>'))
            elif isinstance(res.get("blob"), str):
                parts.append(TextPart(f"[binary resource {res['uri']} attached; its bytes are not shown]"))
            else:
                raise InvalidParams(f"Invalid params: prompt[{i}].resource needs \"text\" or \"blob\"")
        elif kind == "image":
            if not isinstance(b.get("data"), str) or not isinstance(b.get("mimeType"), str):
                raise InvalidParams(f"Invalid params: prompt[{i}] image needs \"data\" and \"mimeType\"")
            if accepts_images:
                parts.append(ImagePart(b["data"], b["mimeType"]))
            else:
                notes.append("(The current model does not take images; the attached image was not sent to it.)\n\n")
        elif kind == "audio":
            # Checked like an image: the block is stored and replayed on `session/load` as the client sent it.
            if not isinstance(b.get("data"), str) or not isinstance(b.get("mimeType"), str):
                raise InvalidParams(f"Invalid params: prompt[{i}] audio needs \"data\" and \"mimeType\"")
            notes.append("(The current model does not take audio; the attached audio was not sent to it.)\n\n")
        else:
            raise InvalidParams(f"Invalid params: prompt[{i}] has unknown content type {kind[:50]!r}")
    return parts, notes
