"""The durable half of the session surface: `session/load`, `resume`, `list`, `close`, `delete`, `fork`, plus what
every session needs from the store (creation, the journal, titles, commands around a prompt).

The store is opened on first use (never on the `initialize` path). If the state dir cannot be written, sessions live
in an in-memory database for the life of the process, so every advertised method keeps working.

`session/load` replays the stored conversation before answering: user chunks, agent and thought chunks, each tool
call followed by one `tool_call_update` carrying its final status and content (a call that never finished, because
the process died, is shown as failed), plans; then the commands, the title and the last usage. `session/resume`
answers at once and sends the commands after the answer.
"""

from __future__ import annotations

import builtins
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from acp_server import commands as acp_commands
from acp_server.errors import InvalidParams, ResourceNotFound
from acp_server.params import obj, opt_list, req_str, str_list
from runtime import PromptPlan, commands, plan_prompt

if TYPE_CHECKING:
    from acp_server.agent import GatewrightAgent
    from acp_server.session import AcpSession
    from runtime import SessionRecord, SessionStore, UserPart

log = logging.getLogger("gatewright.sessions")

CLOSE_WAIT_S = 5.0


class SessionLifecycle:
    def __init__(self, agent: GatewrightAgent) -> None:
        self.agent = agent
        self._store: SessionStore | None = None
        self._sent_commands: dict[str, list[commands.Command]] = {}

    def handlers(self) -> dict[str, Callable[[Any], Awaitable[Any]]]:
        return {"session/load": self.load, "session/resume": self.resume, "session/list": self.list,
                "session/close": self.close, "session/delete": self.delete, "session/fork": self.fork}

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            from runtime import open_store

            self._store = open_store(self.agent.config.state_dir)
        return self._store

    # ---- sessions coming alive -----------------------------------------------------------------------------------
    def created(self, session: AcpSession, result: dict[str, Any]) -> Any:
        """A `session/new` session: store it, attach its journal; the commands follow the answer."""
        from acp_server.rpc import Answer
        from runtime import store_new

        store_new(self.store, session)
        return Answer(result, lambda: self._send_commands(session))

    def _revive(self, rec: SessionRecord, cwd: str, new_id: str | None = None) -> AcpSession:
        """Build a live session from its stored record: settings, model context, usage, scripted position."""
        import functools

        from acp_server.session import AcpSession
        from permissions.store import state_dir
        from runtime import revive

        agent = self.agent
        assert agent.conn is not None
        make = functools.partial(AcpSession, conn=agent.conn, client_caps=agent.client_caps,
                                 configured_rules=agent.config.rules)
        session = revive(self.store, rec, make, cwd=cwd, factory=agent.config.model_factory,
                         default_mode=agent.config.mode, state_dir=state_dir(agent.config.state_dir), new_id=new_id)
        agent.sessions[session.id] = session
        return session

    async def _open_params(self, params: Any) -> tuple[list[Any], str, str]:
        """(mcpServers, sessionId, cwd) of a load/resume/fork request, checked."""
        p = obj(params)
        sid = req_str(p, "sessionId")
        cwd = req_str(p, "cwd")
        # One stat of a path the client named: not worth a thread.
        if not os.path.isabs(cwd) or "\x00" in cwd or not os.path.isdir(cwd):  # noqa: ASYNC240
            raise InvalidParams("Invalid params: \"cwd\" must be an absolute path to an existing directory")
        if str_list(p, "additionalDirectories"):
            raise InvalidParams("Invalid params: \"additionalDirectories\" is not supported by this agent")
        return opt_list(p, "mcpServers") or [], sid, cwd

    @staticmethod
    async def _connect_mcp(session: AcpSession, servers: list[Any]) -> None:
        """The client re-sends its MCP servers on load/resume/fork: (re)start them; returns at once."""
        if servers:
            from runtime import connect_servers

            await connect_servers(session, servers)

    def _record(self, sid: str) -> SessionRecord:
        rec = self.store.get(sid)
        if rec is None:
            raise ResourceNotFound(f"Session not found: {sid[:100]}")
        return rec

    # ---- the methods ---------------------------------------------------------------------------------------------
    async def load(self, params: Any) -> dict[str, Any]:
        servers, sid, cwd = await self._open_params(params)
        live = self.agent.sessions.get(sid)
        if live is not None:
            # The store is complete (written as it goes): settle the live copy and rebuild from the store.
            await self._shut(live)
        session = self._revive(self._record(sid), cwd)
        await self._connect_mcp(session, servers)
        await self._replay(session)
        await self._send_commands(session)
        if session.title:
            await session.conn.notify("session/update", {"sessionId": session.id, "update": {
                "sessionUpdate": "session_info_update", "title": session.title}})
        assert session.journal is not None
        if session.journal.last_usage:
            await session.conn.notify("session/update", {"sessionId": session.id,
                                                         "update": session.journal.last_usage})
        return {"modes": session.modes_state(), "configOptions": session.config_options()}

    async def resume(self, params: Any) -> Any:
        from acp_server.rpc import Answer

        servers, sid, cwd = await self._open_params(params)
        session = self.agent.sessions.get(sid) or self._revive(self._record(sid), cwd)
        await self._connect_mcp(session, servers)
        return Answer({"modes": session.modes_state(), "configOptions": session.config_options()},
                      lambda: self._send_commands(session))

    async def fork(self, params: Any) -> Any:
        from acp_server.rpc import Answer
        from acp_server.session import new_session_id

        servers, sid, cwd = await self._open_params(params)
        live = self.agent.sessions.get(sid)
        if live is not None and live.journal is not None:
            live.journal.sync()
        new_id = new_session_id()
        rec = self.store.fork(sid, new_id)
        if rec is None:
            raise ResourceNotFound(f"Session not found: {sid[:100]}")
        session = self._revive(rec, cwd)
        await self._connect_mcp(session, servers)
        return Answer({"sessionId": session.id, "modes": session.modes_state(),
                       "configOptions": session.config_options()}, lambda: self._send_commands(session))

    async def list(self, params: Any) -> dict[str, Any]:
        from runtime import CursorError

        p = obj(params) if params is not None else {}
        cwd, cursor = p.get("cwd"), p.get("cursor")
        if cwd is not None and (not isinstance(cwd, str) or not os.path.isabs(cwd)):
            raise InvalidParams("Invalid params: \"cwd\" must be an absolute path")
        if cursor is not None and not isinstance(cursor, str):
            raise InvalidParams("Invalid params: \"cursor\" must be a string from a previous \"nextCursor\"")
        try:
            records, next_cursor = self.store.list(cwd, cursor, _page_size())
        except CursorError:
            raise InvalidParams("Invalid params: \"cursor\" is not a cursor this agent gave") from None
        sessions: list[dict[str, Any]] = []
        for r in records:
            info: dict[str, Any] = {"sessionId": r.id, "cwd": r.cwd, "updatedAt": r.updated_iso}
            if r.title:
                info["title"] = r.title
            if r.additional_dirs:
                info["additionalDirectories"] = list(r.additional_dirs)
            sessions.append(info)
        out: dict[str, Any] = {"sessions": sessions}
        if next_cursor:
            out["nextCursor"] = next_cursor
        return out

    async def close(self, params: Any) -> dict[str, Any]:
        sid = req_str(obj(params), "sessionId")
        session = self.agent.sessions.get(sid)
        if session is None:
            if self.store.get(sid) is None:
                raise ResourceNotFound(f"Session not found: {sid[:100]}")
            return {}  # stored but not open in this process: nothing to free
        await self._shut(session)
        return {}

    async def delete(self, params: Any) -> dict[str, Any]:
        sid = req_str(obj(params), "sessionId")
        session = self.agent.sessions.get(sid)
        if session is not None:
            await self._shut(session)
        self.store.delete(sid)  # unknown or already deleted: nothing to do, and not an error
        return {}

    async def _shut(self, session: AcpSession) -> None:
        """Cancel the running and queued prompts, wait (briefly) for them to answer, store, free everything."""
        import anyio

        await session.close()  # also ends its background processes and MCP servers
        with anyio.move_on_after(CLOSE_WAIT_S):
            async with session.turn_lock:
                pass
        if session.journal is not None:
            session.journal.sync()
        self.agent.sessions.pop(session.id, None)
        self._sent_commands.pop(session.id, None)

    # ---- around a prompt -----------------------------------------------------------------------------------------
    async def before_prompt(self, session: AcpSession, blocks: builtins.list[Any],  # `list` is a method here
                            parts: builtins.list[UserPart]) -> PromptPlan:
        """What every host does with a prompt before the model (`runtime.session.plan_prompt`)."""
        return await plan_prompt(session, blocks, parts)

    async def after_prompt(self, session: AcpSession) -> None:
        """Store the finished turn; re-announce the commands if the workspace's changed during it."""
        if session.journal is not None:
            session.journal.sync()
        if self._sent_commands.get(session.id) != commands.available(session.cwd):
            await self._send_commands(session)

    async def _send_commands(self, session: AcpSession) -> None:
        current = commands.available(session.cwd)
        self._sent_commands[session.id] = current
        # Straight to the connection: the command list is state, not conversation.
        await session.conn.notify("session/update", {"sessionId": session.id,
                                                     "update": acp_commands.update_frame(current)})

    # ---- replay --------------------------------------------------------------------------------------------------
    async def _replay(self, session: AcpSession) -> None:
        from runtime import replay_records

        for update in replay_records(self.store.events(session.id)):
            await session.conn.notify("session/update", {"sessionId": session.id, "update": update})


def _page_size() -> int:
    try:
        return max(1, int(os.environ.get("GATEWRIGHT_LIST_PAGE_SIZE", "50")))
    except ValueError:
        return 50
