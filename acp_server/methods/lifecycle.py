"""`initialize` (after the first), `authenticate` and `logout`; the client's capabilities as the sessions read them.

The first `initialize` of a process is answered before the event loop by `GatewrightAgent.answer_initialize` (the
start-up fast path); this handler answers the same, from the same constants, for any later one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acp_server.agent import SETUP_METHOD
from acp_server.errors import AuthRequired, InvalidParams
from acp_server.protocol.schema import (
    AuthenticateRequest,
    AuthenticateResponse,
    ClientCapabilities,
    LogoutRequest,
    LogoutResponse,
)
from runtime import credentials, missing_key, secrets

if TYPE_CHECKING:
    from acp_server.agent import GatewrightAgent
    from acp_server.protocol.schema import InitializeRequest


async def initialize(agent: GatewrightAgent, req: InitializeRequest) -> dict[str, Any]:
    agent.accept_initialize(req.client_capabilities.to_wire())
    agent.client_caps = req.client_capabilities
    # The fast path's constants, as a JSON object (the path that has no models must give the same bytes).
    return agent.initialize_result()


def client_capabilities(agent: GatewrightAgent) -> ClientCapabilities:
    """What `initialize` said the client can do (none before it), read once."""
    if agent.client_caps is None:
        # Never fails on an object: every capability falls back to "not offered" (the schema's defaults).
        agent.client_caps = ClientCapabilities.from_wire(agent.client_caps_wire, "clientCapabilities")
    return agent.client_caps


def authenticate_params(value: object, at: str) -> AuthenticateRequest:
    """`AuthenticateRequest.from_wire`, after registering every string of the params but the method id as a secret:
    whatever a client sends beyond the method id may be a credential, never inherited, logged or stored, and that
    holds for params that do not fit as well."""
    secrets.register_payload(value, skip=frozenset({"methodId"}))
    return AuthenticateRequest.from_wire(value, at)


async def authenticate(agent: GatewrightAgent, req: AuthenticateRequest) -> AuthenticateResponse:
    """An `agent` method: it succeeds when its credentials are usable now (a key in the environment or stored by
    `gatewright setup`; `gatewright-setup` itself, for a client that read the older terminal shape as an agent
    method: the default model can be called), and answers `auth_required` otherwise, saying what to do. No network
    request is made: whether a provider accepts a key is said by its first answer."""
    method = req.method_id
    factory = agent.config.model_factory
    if method == SETUP_METHOD:
        if factory is None or factory.default_id is None:
            raise AuthRequired("No model is configured: run `gatewright setup` in a terminal, then restart the agent")
        problem = missing_key(factory)
        if problem is not None:
            raise AuthRequired(f"{problem}; or run `gatewright setup` in a terminal")
        return AuthenticateResponse()
    if factory is not None and method in {m["id"] for m in factory.auth_methods()}:
        var = method.removeprefix("env:")
        if factory.key_is_set(var):
            return AuthenticateResponse()
        raise AuthRequired(
            f"{var} is not set: set it in the environment the editor starts gatewright with, or run "
            "`gatewright setup` in a terminal, then restart the agent"
        )
    raise InvalidParams(f"Invalid params: unknown authentication method {method[:100]!r}")


async def logout(agent: GatewrightAgent, req: LogoutRequest) -> LogoutResponse:
    """Forget the keys `gatewright setup` stored; from the next model call on, open sessions no longer use them
    (a key set in the agent's environment is the editor's, not stored, and stays)."""
    forgotten = credentials.forget()
    factory = agent.config.model_factory
    if factory is not None and forgotten:
        factory.forget_keys(forgotten)
        if not factory.scripted:
            for session in agent.sessions.values():
                if session.model_id is not None:
                    thought = session.thought_level
                    session.set_model(session.model_id, factory.create(session.model_id, thought), thought)
    return LogoutResponse()
