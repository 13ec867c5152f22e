"""The prompt turn: `session/prompt`, `session/cancel`, and `$/cancel_request` of a prompt.

Prompts of a session queue on its turn lock, in the order they were read. A cancel cancels the running turn and
every prompt queued before it: `received` stamps each prompt, as the connection reads it, with the session's cancel
epoch, so a prompt read before a `session/cancel` answers `cancelled` even if its task had not started yet. A
`$/cancel_request` of a prompt cancels that prompt only, and the prompt answers `stopReason: cancelled` itself.

A turn: `convert_prompt` (content blocks to the runtime's user parts), `runtime.plan_prompt` (the journal, the title,
slash commands, an empty prompt), then `AgentRuntime.run_turn` with the session's `emit` as the event sink.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import anyio

from acp_server.errors import AuthRequired
from acp_server.methods.sessions import commands_changed
from acp_server.protocol.schema import (
    AudioContentBlock,
    BlobResourceContents,
    ContentBlock,
    ImageContentBlock,
    PromptResponse,
    ResourceContentBlock,
    ResourceLinkContentBlock,
    TextContentBlock,
)
from runtime import NO_MODEL_MESSAGE, ImagePart, TextPart, info_update, plan_prompt
from runtime import AuthRequired as RuntimeAuthRequired

if TYPE_CHECKING:
    from acp_server.agent import GatewrightAgent
    from acp_server.protocol.schema import CancelNotification, PromptRequest, StopReason
    from runtime import UserPart

IMAGE_NOT_SENT = "(The current model does not take images; the attached image was not sent to it.)\n\n"
AUDIO_NOT_SENT = "(The current model does not take audio; the attached audio was not sent to it.)\n\n"


def received(agent: GatewrightAgent, req: PromptRequest) -> None:
    """As the connection reads the prompt (in reading order): remember the cancel epoch of its arrival."""
    session = agent.sessions.get(req.session_id)
    if session is not None:
        agent.prompt_tickets[id(req)] = session.cancel_epoch


def cancel_request(agent: GatewrightAgent, req: PromptRequest) -> bool:
    """`$/cancel_request` of a prompt: cancel its turn, which answers `stopReason: cancelled` by itself."""
    session = agent.sessions.get(req.session_id)
    if session is None:
        return False
    if session.active_prompt is req:
        session.runtime.cancel()
    else:  # still queued: it answers `cancelled` when its turn comes, without running
        session.cancelled_prompts.append(req)
    return True


def cancel(agent: GatewrightAgent, req: CancelNotification) -> None:
    """`session/cancel`: the running turn and every prompt queued before now."""
    session = agent.sessions.get(req.session_id)
    if session is not None:
        session.cancel()


async def prompt(agent: GatewrightAgent, req: PromptRequest) -> PromptResponse:
    arrival_epoch = agent.prompt_tickets.pop(id(req), None)
    session = agent.session(req.session_id)
    parts, notes = convert_prompt(req.prompt, accepts_images=bool(session.model and session.model.accepts_images))
    # Prompts queue on the lock in order; a cancel read after this prompt arrived cancels it too.
    ticket = session.cancel_epoch if arrival_epoch is None else arrival_epoch
    async with session.turn_lock:
        if session.closed or session.cancel_epoch != ticket or any(c is req for c in session.cancelled_prompts):
            session.cancelled_prompts = [c for c in session.cancelled_prompts if c is not req]
            return PromptResponse(stop_reason="cancelled")
        session.active_prompt = req
        # The blocks as the client sent them (unknown fields too): the journal stores them, `session/load` replays them.
        plan = await plan_prompt(session, [b.to_wire() for b in req.prompt], parts)
        if plan.stop is not None:
            # Answered before the model (a command, an empty prompt): always one of ACP's stop reasons.
            return PromptResponse(stop_reason=cast("StopReason", plan.stop))
        for note in notes:
            await session.say(note)
        if session.model is None:
            await session.say(NO_MODEL_MESSAGE)
            return PromptResponse(stop_reason="end_turn")
        try:
            outcome = await session.runtime.run_turn(plan.parts, session.emit)
        except RuntimeAuthRequired as exc:
            raise AuthRequired(f"Authentication required: {exc}") from None
        finally:
            with anyio.CancelScope(shield=True):
                # Store the finished turn; re-announce the commands if the workspace's changed during it.
                if session.journal is not None:
                    session.journal.sync()
                await commands_changed(agent, session)
                await session.deliver(info_update())  # the session's last activity: now
        return PromptResponse(stop_reason=outcome.stop_reason)  # the runtime's stop reasons are ACP's


def convert_prompt(blocks: list[ContentBlock], *, accepts_images: bool) -> tuple[list[UserPart], list[str]]:
    """ACP content blocks → the runtime's user parts, plus plain notes for the user about what was not sent."""
    parts: list[UserPart] = []
    notes: list[str] = []
    for b in blocks:
        if isinstance(b, TextContentBlock):
            parts.append(TextPart(b.text))
        elif isinstance(b, ResourceLinkContentBlock):
            parts.append(TextPart(f"[@{b.name}]({b.uri})"))
        elif isinstance(b, ResourceContentBlock):
            res = b.resource
            if isinstance(res, BlobResourceContents):
                parts.append(TextPart(f"[binary resource {res.uri} attached; its bytes are not shown]"))
            else:
                parts.append(TextPart(f'<context uri="{res.uri}">\n{res.text}\n</context>'))
        elif isinstance(b, ImageContentBlock):
            if accepts_images:
                parts.append(ImagePart(b.data, b.mime_type))
            else:
                notes.append(IMAGE_NOT_SENT)
        elif isinstance(b, AudioContentBlock):
            # The block is stored and replayed on `session/load` as the client sent it; the model gets a note.
            notes.append(AUDIO_NOT_SENT)
    return parts, notes
