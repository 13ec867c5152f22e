"""The session family: `session/new`, `load`, `resume`, `fork`, `list`, `close`, `delete`, and the command list a
session is sent.

A new session is stored at once and journaled as it goes (`runtime.store_new`); the store is opened on first use
(`GatewrightAgent.store`). `session/load` replays the stored conversation before answering: user chunks, agent and
thought chunks, each tool call followed by one `tool_call_update` carrying its final status and content (a call that
never finished, because the process died, is shown as failed), plans; then the commands, the title and the last
usage. `session/new`, `resume` and `fork` answer at once, and the commands follow the answer (`rpc.Answer`): the
client cannot route a session's update before it knows the session.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

import anyio

from acp_server import updates
from acp_server.errors import InvalidParams, ResourceNotFound
from acp_server.methods.lifecycle import client_capabilities
from acp_server.protocol.schema import (
    CloseSessionResponse,
    DeleteSessionResponse,
    ForkSessionResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    ResumeSessionResponse,
    SessionInfo,
)
from acp_server.rpc import Answer
from acp_server.session import AcpSession
from permissions.modes import parse_mode
from permissions.store import state_dir
from runtime import (
    CursorError,
    commands,
    connect_servers,
    info_update,
    look_early,
    new_session_id,
    replay_records,
    revive,
    sandbox,
    settings,
    store_new,
)

if TYPE_CHECKING:
    from typing import Any

    from acp_server.agent import GatewrightAgent
    from acp_server.protocol.schema import (
        CloseSessionRequest,
        DeleteSessionRequest,
        ForkSessionRequest,
        ListSessionsRequest,
        LoadSessionRequest,
        NewSessionRequest,
        ResumeSessionRequest,
    )
    from runtime import SessionRecord

CLOSE_WAIT_S = 5.0


# ---- the methods ---------------------------------------------------------------------------------------------------
async def new_session(agent: GatewrightAgent, req: NewSessionRequest) -> Answer:
    cwd, more = _workspace(req.cwd, req.additional_directories)
    # The first turn tells the model what the sandbox helper found, and the helper is its own interpreter (~45 ms of
    # CPU): started first, it boots on the other core while this session is assembled. (Once per process; the idle
    # warm-up may have started it already.)
    sandbox.prestart()
    # The first turn's look at the workspace (`git status`, the nested instructions: two sandboxed processes) runs
    # beside the session's assembly, so that a prompt sent the moment this is answered need not wait for it.
    look_early(cwd)
    assert agent.conn is not None
    factory = agent.config.model_factory
    model = factory.create() if factory else None
    session = AcpSession(
        id=new_session_id(),
        cwd=cwd,
        additional_directories=more,
        mode=parse_mode(agent.config.mode),
        model=model,
        conn=agent.conn,
        client_caps=client_capabilities(agent),
        factory=factory,
        model_id=factory.default_id if factory and model else None,
        model_choices=factory.choices() if factory else (),
        state_dir=state_dir(agent.config.state_dir),
        configured_rules=agent.config.rules,
    )
    agent.sessions[session.id] = session
    await _connect_mcp(session, req.mcp_servers)  # returns at once; servers start after this answer
    store_new(agent.store, session)
    result = NewSessionResponse(
        session_id=session.id, modes=updates.modes_state(session.mode), config_options=updates.config_options(session)
    )
    return Answer(result, lambda: _after_new(agent, session))


async def load_session(agent: GatewrightAgent, req: LoadSessionRequest) -> LoadSessionResponse:
    cwd, more = _workspace(req.cwd, req.additional_directories)
    live = agent.sessions.get(req.session_id)
    if live is not None:
        # The store is complete (written as it goes): settle the live copy and rebuild from the store.
        await _shut(agent, live)
    rec = _record(agent, req.session_id)
    stored_at = rec.updated_at
    session = _revive(agent, rec, cwd, more)
    await _connect_mcp(session, req.mcp_servers)
    for update in replay_records(agent.store.events(session.id)):
        await session.deliver_replayed(update)
    await send_commands(agent, session)
    await session.deliver(info_update(session.title, stored_at))
    assert session.journal is not None
    if session.journal.last_usage:
        await session.deliver(session.journal.last_usage)
    return LoadSessionResponse(modes=updates.modes_state(session.mode), config_options=updates.config_options(session))


async def resume_session(agent: GatewrightAgent, req: ResumeSessionRequest) -> Answer:
    cwd, more = _workspace(req.cwd, req.additional_directories)
    session = agent.sessions.get(req.session_id)
    if session is not None and (session.cwd, session.additional_directories) != (cwd, more):
        await _shut(agent, session)  # the client names the roots: a session open on others is rebuilt on these
        session = None
    if session is None:
        session = _revive(agent, _record(agent, req.session_id), cwd, more)
    await _connect_mcp(session, req.mcp_servers or [])
    result = ResumeSessionResponse(
        modes=updates.modes_state(session.mode), config_options=updates.config_options(session)
    )
    return Answer(result, lambda: send_commands(agent, session))


async def fork_session(agent: GatewrightAgent, req: ForkSessionRequest) -> Answer:
    cwd, more = _workspace(req.cwd, req.additional_directories)
    live = agent.sessions.get(req.session_id)
    if live is not None and live.journal is not None:
        live.journal.sync()
    rec = agent.store.fork(req.session_id, new_session_id())
    if rec is None:
        raise ResourceNotFound(f"Session not found: {req.session_id[:100]}")
    session = _revive(agent, rec, cwd, more)
    await _connect_mcp(session, req.mcp_servers or [])
    result = ForkSessionResponse(
        session_id=session.id, modes=updates.modes_state(session.mode), config_options=updates.config_options(session)
    )
    return Answer(result, lambda: send_commands(agent, session))


async def list_sessions(agent: GatewrightAgent, req: ListSessionsRequest) -> ListSessionsResponse:
    if req.cwd is not None and not os.path.isabs(req.cwd):
        raise InvalidParams('Invalid params: "cwd" must be an absolute path')
    try:
        records, next_cursor = agent.store.list(req.cwd, req.cursor, _page_size())
    except CursorError:
        raise InvalidParams('Invalid params: "cursor" is not a cursor this agent gave') from None
    return ListSessionsResponse(
        sessions=[
            SessionInfo(
                session_id=r.id,
                cwd=r.cwd,
                updated_at=r.updated_iso,
                title=r.title or None,
                additional_directories=list(r.additional_dirs) or None,
            )
            for r in records
        ],
        next_cursor=next_cursor or None,
    )


async def close_session(agent: GatewrightAgent, req: CloseSessionRequest) -> CloseSessionResponse:
    session = agent.sessions.get(req.session_id)
    if session is None:
        _record(agent, req.session_id)  # stored but not open in this process: nothing to free
        return CloseSessionResponse()
    await _shut(agent, session)
    return CloseSessionResponse()


async def delete_session(agent: GatewrightAgent, req: DeleteSessionRequest) -> DeleteSessionResponse:
    session = agent.sessions.get(req.session_id)
    if session is not None:
        await _shut(agent, session)
    agent.store.delete(req.session_id)  # unknown or already deleted: nothing to do, and not an error
    return DeleteSessionResponse()


# ---- what every session needs -------------------------------------------------------------------------------------
async def send_commands(agent: GatewrightAgent, session: AcpSession) -> None:
    """The command menu (built-ins and the workspace's project commands). Straight to the client: the command list
    is state, not conversation."""
    current = commands.available(session.cwd)
    agent.sent_commands[session.id] = current
    await session.deliver(updates.commands_update(current))


async def commands_changed(agent: GatewrightAgent, session: AcpSession) -> None:
    """After a turn: announce the commands again if the workspace's changed during it."""
    if agent.sent_commands.get(session.id) != commands.available(session.cwd):
        await send_commands(agent, session)


async def _after_new(agent: GatewrightAgent, session: AcpSession) -> None:
    """`session/new`'s follow-up, once the answer is written: what a first prompt sent at once would wait for
    starts now. The first turn's look at the workspace (`git status` and the nested instructions: two processes, on
    threads: `SessionContext.prefetch`), then the default model's HTTP stack and client (~35 ms of imports, while
    those processes run; no connection is opened), then the command list."""
    if session.runtime.context is not None:
        session.runtime.context.prefetch()
    if agent.config.model_factory is not None:
        agent.config.model_factory.prepare_default()
    await send_commands(agent, session)


def _workspace(cwd: str, additional_directories: list[str] | None) -> tuple[str, list[str]]:
    """The session's roots as the client sent them: `cwd`, then each additional directory (absolute, existing
    directories; `additionalDirectories`). One stat of each path the client named: not worth a thread."""
    if not os.path.isabs(cwd) or "\x00" in cwd:
        raise InvalidParams('Invalid params: "cwd" must be an absolute path')
    if not os.path.isdir(cwd):
        raise InvalidParams('Invalid params: "cwd" is not an existing directory')
    roots: list[str] = []
    for i, d in enumerate(additional_directories or []):
        if not os.path.isabs(d) or "\x00" in d:
            raise InvalidParams(f'Invalid params: "additionalDirectories[{i}]" must be an absolute path')
        if not os.path.isdir(d):
            raise InvalidParams(f'Invalid params: "additionalDirectories[{i}]" is not an existing directory')
        if d != cwd and d not in roots:
            roots.append(d)
    return cwd, roots


async def _connect_mcp(session: AcpSession, servers: list[Any]) -> None:
    """The client sends its MCP servers with new/load/resume/fork: (re)start them; returns at once."""
    if servers:
        await connect_servers(session, servers)


def _record(agent: GatewrightAgent, sid: str) -> SessionRecord:
    rec = agent.store.get(sid)
    if rec is None:
        raise ResourceNotFound(f"Session not found: {sid[:100]}")
    return rec


def _revive(agent: GatewrightAgent, rec: SessionRecord, cwd: str, more: list[str]) -> AcpSession:
    """A live session from its stored record (settings, model context, usage, scripted position), on the roots the
    client names now: ACP restores none implicitly."""
    assert agent.conn is not None
    make = functools.partial(
        AcpSession, conn=agent.conn, client_caps=client_capabilities(agent), configured_rules=agent.config.rules
    )
    session = revive(
        agent.store,
        rec,
        make,
        cwd=cwd,
        additional_directories=more,
        factory=agent.config.model_factory,
        default_mode=agent.config.mode,
        state_dir=state_dir(agent.config.state_dir),
    )
    agent.sessions[session.id] = session
    return session


async def _shut(agent: GatewrightAgent, session: AcpSession) -> None:
    """Cancel the running and queued prompts, wait (briefly) for them to answer, store, free everything."""
    await session.close()  # also ends its background processes and MCP servers
    with anyio.move_on_after(CLOSE_WAIT_S):
        async with session.turn_lock:
            pass
    if session.journal is not None:
        session.journal.sync()
    agent.sessions.pop(session.id, None)
    agent.sent_commands.pop(session.id, None)


def _page_size() -> int:
    return int(settings.current().get("GATEWRIGHT_LIST_PAGE_SIZE", 50))
