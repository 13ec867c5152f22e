"""The agent's state for one connection: its configuration, the client's capabilities, the live sessions and the
session store. The ACP methods (`acp_server.methods`) act on it; `acp_server.dispatch` routes each request to one.

`answer_initialize` is the start-up fast path: `server.py` calls it before the event loop (and anyio, the runtime, the
wire models) is even imported, to answer a first `initialize` from constants. It checks its params exactly as
`InitializeRequest.from_wire` would, by hand, so that it needs no models (tests/acp_server/test_initialize_fast_path.py
holds the two to the same answers); the typed `initialize` handler (`acp_server.methods.lifecycle`) answers any later
one. No model, MCP or disk work happens before either answers.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import acp_server  # lazy submodules: the method table and wire models load with the first session
import runtime  # the runtime's lazy public API: `runtime.name` loads a name's module on first use
from acp_server.errors import InvalidParams, ResourceNotFound
from runtime.version import __version__

if TYPE_CHECKING:
    from acp_server.protocol.schema import ClientCapabilities
    from acp_server.rpc import JsonRpcConnection
    from acp_server.session import AcpSession
    from permissions.rules import Rule
    from runtime import ModelFactory, SessionStore, commands

log = logging.getLogger("gatewright.agent")

PROTOCOL_VERSION = 1
_UINT16_MAX = 0xFFFF
SETUP_METHOD = "gatewright-setup"
_SETUP_METHOD = {
    "id": SETUP_METHOD,
    "name": "Sign in",
    "description": "Choose a provider (OpenAI, Anthropic, or any OpenAI-compatible server such as Ollama), type its "
    "key if it needs one, and pick the default model: gatewright setup, in a terminal",
}


def _setup_command() -> tuple[str, list[str]]:
    """How to start `gatewright setup` as this process was started (the console script, or `python -m`)."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(script).startswith("gatewright") and os.path.isfile(script):
        return script, ["setup"]
    return sys.executable, ["-m", "acp_server", "setup"]


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
        self.initialized = False
        # What `initialize` said the client can do, as sent; read into `ClientCapabilities` with the first session
        # (`acp_server.methods.lifecycle.client_capabilities`), after the start-up fast path.
        self.client_caps_wire: dict[str, Any] = {}
        self.client_caps: ClientCapabilities | None = None
        # A prompt read but not started yet (by identity of its params) -> the session's cancel epoch when it arrived.
        self.prompt_tickets: dict[int, int] = {}
        self.sent_commands: dict[str, list[commands.Command]] = {}  # per session: the command list it was last sent
        self._store: SessionStore | None = None

    def attach(self, conn: JsonRpcConnection) -> None:
        self.conn = conn

    # ---- initialize ------------------------------------------------------------------------------------------------
    def answer_initialize(self, params: object) -> dict[str, Any]:
        """`initialize` from constants only: the start-up fast path (see the module docstring).

        Raises:
            InvalidParams: with the message the typed path gives for the same params.
        """
        if type(params) is not dict:
            raise InvalidParams("Invalid params: the params must be an object")
        version = params.get("protocolVersion")
        if "protocolVersion" not in params:
            raise InvalidParams('Invalid params: "protocolVersion" is required')
        if type(version) is not int:
            raise InvalidParams('Invalid params: "protocolVersion" must be an integer')
        if not 0 <= version <= _UINT16_MAX:
            raise InvalidParams('Invalid params: "protocolVersion" is out of range')
        caps = params.get("clientCapabilities")
        # As the schema says (`x-deserialize-default-on-error`): capabilities that are not an object are none.
        self.accept_initialize(caps if type(caps) is dict else {})
        return self.initialize_result()

    def accept_initialize(self, client_caps_wire: dict[str, Any]) -> None:
        self.client_caps_wire = client_caps_wire
        self.client_caps = None
        self.initialized = True

    def initialize_result(self) -> dict[str, Any]:
        factory = self.config.model_factory  # built at start-up; these are in-memory look-ups, no I/O
        return {
            # A v1 agent answers 1 to every client version (never an echo).
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {
                    "image": bool(factory and factory.any_accepts_images()),
                    "audio": False,
                    "embeddedContext": True,
                },
                "mcpCapabilities": {"http": True, "sse": True},
                # Each one works (acp_server.methods.sessions); `fork` is unstable, hence in the unstable schema only.
                "sessionCapabilities": {
                    "list": {},
                    "resume": {},
                    "close": {},
                    "delete": {},
                    "fork": {},
                    "additionalDirectories": {},
                },
                "auth": {"logout": {}},
            },
            "authMethods": self.auth_methods(),
            "agentInfo": {"name": "gatewright", "title": "gatewright", "version": __version__},
        }

    def auth_methods(self) -> list[dict[str, Any]]:
        """How the user signs in, as this client can offer it. `gatewright setup` in a terminal, for a client that
        enables terminal auth: ACP's `terminal` method (`auth.terminal`), or the older shape that clients reading
        `_meta["terminal-auth"]` launch (no `type`, the command under `_meta`); nothing terminal otherwise, as the
        schema requires. Then one `agent` method per key variable the configured models read."""
        caps = self.client_caps_wire
        auth, meta = caps.get("auth"), caps.get("_meta")
        out: list[dict[str, Any]] = []
        if type(auth) is dict and auth.get("terminal") is True:
            out.append({"type": "terminal", **_SETUP_METHOD, "args": ["setup"]})
        elif type(meta) is dict and meta.get("terminal-auth") is True:
            command, args = _setup_command()
            label = {"command": command, "args": args, "label": "gatewright setup"}
            out.append({**_SETUP_METHOD, "_meta": {"terminal-auth": label}})
        factory = self.config.model_factory  # built at start-up; these are in-memory look-ups, no I/O
        return out + (factory.auth_methods() if factory else [])

    # ---- sessions and the store ------------------------------------------------------------------------------------
    @property
    def store(self) -> SessionStore:
        """The session store, opened on first use (never on the `initialize` path). If the state dir cannot be
        written, sessions live in an in-memory database for the life of the process (`runtime.open_store`)."""
        if self._store is None:
            # the store's modules and sqlite3 load with the first session
            self._store = runtime.open_store(self.config.state_dir)
        return self._store

    @property
    def store_is_open(self) -> bool:
        return self._store is not None

    def session(self, sid: str) -> AcpSession:
        """The live session `sid`.

        Raises:
            ResourceNotFound: no such session in this process.
        """
        session = self.sessions.get(sid)
        if session is None:
            raise ResourceNotFound(f"Session not found: {sid[:100]}")
        return session

    # ---- warm-up and shutdown --------------------------------------------------------------------------------------
    def warm_up(self) -> None:
        for stage in self.warm_up_stages():
            stage()

    def warm_up_stages(self) -> list[Callable[[], None]]:
        """What a fresh process loads for its first session and first prompt, in the order they need it.
        `server.py` runs each stage when the connection has been idle for a moment (after `initialize`; while the
        user types the first prompt), so an editor that waits between steps does not wait at any of them."""

        def session() -> None:  # the runtime, tools, permissions, the session store (~100 ms)
            _ = acp_server.dispatch  # the methods, the wire models, the ACP session
            _ = runtime.store_new  # the journal, the store
            runtime.builtin_tools()  # imports the tool modules
            _ = self.store

        def model() -> None:  # the default model's HTTP stack and client (~40 ms); no connection is opened
            if self.config.model_factory is not None:
                self.config.model_factory.prepare_default()

        def sandbox() -> None:  # the sandbox helper (~45 ms of CPU, its own process): the first turn and the first
            runtime.sandbox.prestart()  # command need not wait for it

        return [session, model, sandbox]  # (tool arguments need no warm-up: runtime.tools.argcheck)

    async def shutdown(self) -> None:
        for session in list(self.sessions.values()):
            await session.close()
            if session.journal is not None:
                session.journal.sync()
