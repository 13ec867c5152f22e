"""A session's settings from the editor: `session/set_mode` and `session/set_config_option`.

The options are the ones `acp_server.updates.config_options` shows: the approval mode, the model (when the config
offers a choice), and where "always" answers are remembered. A change applies from the next decision or model call,
even in the middle of a running turn, and is saved with the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acp_server import updates
from acp_server.errors import InvalidParams
from acp_server.protocol.schema import (
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
    config_id = req.config_id
    if config_id not in ("mode", "model", updates.REMEMBER_OPTION) or (
        config_id == "model" and not session.model_choices
    ):
        raise InvalidParams(f"Invalid params: unknown config option {config_id[:100]!r}")
    if not isinstance(req, ValueIdSetSessionConfigOptionRequest):  # every option here is a select
        raise InvalidParams('Invalid params: "value" must be one of the option\'s values')
    value = req.value
    if config_id == updates.REMEMBER_OPTION:
        try:
            session.set_remember(value)
        except ValueError:
            raise InvalidParams(
                f'Invalid params: "remember" cannot be {value[:100]!r}; expected session, project or global'
            ) from None
    elif config_id == "model":
        factory = agent.config.model_factory
        if value not in {m.id for m in session.model_choices} or factory is None:
            raise InvalidParams(f"Invalid params: unknown model {value[:100]!r}")
        # Takes effect at the next model call, even in the middle of a running turn.
        session.set_model(value, factory.create(value))
    else:
        await apply_mode(session, value, announce_mode=True, announce_config=False)
    session.save_settings()
    return SetSessionConfigOptionResponse(config_options=updates.config_options(session))


async def apply_mode(session: AcpSession, mode_id: str, *, announce_mode: bool, announce_config: bool = True) -> None:
    try:
        session.set_mode(mode_id)  # read by the decorator at the next call
    except ValueError:
        raise InvalidParams(f"Invalid params: unknown mode {mode_id[:100]!r}") from None
    await session.announce(mode=announce_mode, config=announce_config)
