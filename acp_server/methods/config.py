"""A session's settings from the editor: `session/set_mode` and `session/set_config_option`.

The options are the ones `acp_server.updates.config_options` shows the session's client (a value for an option
it was not shown is refused): the approval mode, the model, how hard it thinks, where "always" answers are
remembered, and (for a client that shows booleans) automatic compaction. A change applies from the next decision
or model call, even in the middle of a running turn, and is saved with the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acp_server import updates
from acp_server.errors import InvalidParams
from acp_server.protocol.schema import (
    BooleanSessionConfigOption,
    BooleanSetSessionConfigOptionRequest,
    SelectSessionConfigOption,
    SessionConfigSelectOption,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    ValueIdSetSessionConfigOptionRequest,
)

if TYPE_CHECKING:
    from acp_server.agent import GatewrightAgent
    from acp_server.protocol.schema import SetSessionConfigOptionRequest, SetSessionModeRequest
    from acp_server.session import AcpSession


async def set_mode(agent: GatewrightAgent, req: SetSessionModeRequest) -> SetSessionModeResponse:
    session = agent.session(req.session_id)
    await apply_mode(session, req.mode_id, announce_mode=False)
    session.save_settings()
    return SetSessionModeResponse()


async def set_config_option(
    agent: GatewrightAgent, req: SetSessionConfigOptionRequest
) -> SetSessionConfigOptionResponse:
    session = agent.session(req.session_id)
    offered = {o.id: o for o in updates.config_options(session)}
    option = offered.get(req.config_id)
    if option is None:
        raise InvalidParams(f"Invalid params: unknown config option {req.config_id[:100]!r}")
    if isinstance(option, BooleanSessionConfigOption):
        if not isinstance(req, BooleanSetSessionConfigOptionRequest):
            raise InvalidParams(f'Invalid params: "{option.id}" is a boolean option: send "type": "boolean"')
        session.auto_compact = req.value  # the one boolean option
        session.save_settings()
        return SetSessionConfigOptionResponse(config_options=updates.config_options(session))
    if not isinstance(req, ValueIdSetSessionConfigOptionRequest):
        raise InvalidParams('Invalid params: "value" must be one of the option\'s values')
    value = req.value
    if option.id == updates.REMEMBER_OPTION:
        try:
            session.set_remember(value)
        except ValueError:
            raise InvalidParams(
                f'Invalid params: "remember" cannot be {value[:100]!r}; expected session, project or global'
            ) from None
    elif option.id == updates.MODEL_OPTION:
        factory = agent.config.model_factory
        if factory is None or value not in {o.value for o in _select_values(option)}:
            raise InvalidParams(f"Invalid params: unknown model {value[:100]!r}")
        if value != session.model_id:
            # Takes effect at the next model call, even in the middle of a running turn.
            session.set_model(value, factory.create(value))
    elif option.id == updates.THOUGHT_OPTION:
        try:
            session.set_thought_level(value)
        except ValueError:
            raise InvalidParams(f"Invalid params: the model has no thinking level {value[:100]!r}") from None
    else:
        await apply_mode(session, value, announce_mode=True, announce_config=False)
    session.save_settings()
    return SetSessionConfigOptionResponse(config_options=updates.config_options(session))


def _select_values(option: SelectSessionConfigOption) -> list[SessionConfigSelectOption]:
    return [o for o in option.options if isinstance(o, SessionConfigSelectOption)]


async def apply_mode(session: AcpSession, mode_id: str, *, announce_mode: bool, announce_config: bool = True) -> None:
    try:
        session.set_mode(mode_id)  # read by the decorator at the next call
    except ValueError:
        raise InvalidParams(f"Invalid params: unknown mode {mode_id[:100]!r}") from None
    await session.announce(mode=announce_mode, config=announce_config)
