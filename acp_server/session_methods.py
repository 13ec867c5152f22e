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

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp_server import commands
from acp_server.errors import InvalidParams, ResourceNotFound
from acp_server.params import obj, opt_list, req_str, str_list

if TYPE_CHECKING:
    from acp_server.agent import GatewrightAgent
    from acp_server.session import AcpSession
    from runtime.loop import RuntimeOptions
    from runtime.models.base import Message, UserPart
    from runtime.store import SessionRecord, SessionStore

log = logging.getLogger("gatewright.sessions")

TITLE_CHARS = 80
CLOSE_WAIT_S = 5.0


def runtime_options() -> RuntimeOptions:
    """Runtime options for a new session; `GATEWRIGHT_CONTEXT_WINDOW` overrides the window of models that do not
    declare one (the scripted model), which is how tests make compaction happen with small conversations."""
    from runtime.loop import RuntimeOptions

    raw = os.environ.get("GATEWRIGHT_CONTEXT_WINDOW")
    try:
        return RuntimeOptions(context_window=max(1_000, int(raw))) if raw else RuntimeOptions()
    except ValueError:
        return RuntimeOptions()


def title_from(blocks: list[Any]) -> str | None:
    text = next((b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"
                 and isinstance(b.get("text"), str) and b["text"].strip()), None)
    if text is None:
        return None
    line = " ".join(next(ln for ln in text.splitlines() if ln.strip()).split())
    return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS - 1].rstrip() + "…"


@dataclass(frozen=True, slots=True)
class PromptPlan:
    """What to do with a prompt: answer at once (`stop` set), or run a turn with `parts`."""

    parts: list[UserPart]
    stop: str | None = None


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
            from permissions.store import state_dir, state_dir_problem
            from runtime.store import SessionStore

            # An unwritable state dir is said once, in one line, for everything kept there (sessions, rules, audit).
            if state_dir_problem(state_dir(self.agent.config.state_dir)) is not None:
                self._store = SessionStore(":memory:")
                return self._store
            try:
                self._store = SessionStore.in_state_dir(self.agent.config.state_dir)
            except Exception as exc:
                log.warning("cannot open the session store (%s); sessions will last only for this process", exc)
                self._store = SessionStore(":memory:")
        return self._store

    def close_store(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    # ---- sessions coming alive -----------------------------------------------------------------------------------
    def created(self, session: AcpSession, result: dict[str, Any]) -> Any:
        """A `session/new` session: store it, attach its journal; the commands follow the answer."""
        from acp_server.rpc import Answer
        from runtime.store import SessionRecord

        self.store.create(SessionRecord(session.id, session.cwd, session.mode, tuple(session.additional_directories),
                                        model_id=session.model_id))
        self._attach(session)
        return Answer(result, lambda: self._send_commands(session))

    def _attach(self, session: AcpSession, epoch: int = 0, state: dict[str, Any] | None = None) -> None:
        """Attach a journal; the session's current history is what the store holds."""
        from acp_server.journal import SessionJournal

        session.journal = SessionJournal(self.store, session, epoch, session.runtime.history, state)
        session.runtime.before_step = session.journal.before_step

    def _revive(self, rec: SessionRecord, cwd: str, new_id: str | None = None) -> AcpSession:
        """Build a live session from its stored record: settings, model context, usage, scripted position."""
        from acp_server.journal import restore_state
        from acp_server.session import AcpSession
        from permissions.modes import parse_mode
        from permissions.store import state_dir

        agent = self.agent
        factory = agent.config.model_factory
        model_id = None
        if factory is not None:
            known = {m.id for m in factory.choices()} | {factory.default_id}
            model_id = rec.model_id if rec.model_id in known else factory.default_id
        model = factory.create(model_id) if factory and model_id else None
        try:
            mode = parse_mode(rec.mode)
        except ValueError:
            mode = parse_mode(agent.config.mode)
        assert agent.conn is not None
        session = AcpSession(new_id or rec.id, cwd, list(rec.additional_dirs), mode, agent.conn, model,
                             agent.client_caps, runtime_options(), model_id=model_id if model else None,
                             model_choices=factory.choices() if factory else (), title=rec.title,
                             state_dir=state_dir(agent.config.state_dir), configured_rules=agent.config.rules)
        epoch, stored = self.store.context(rec.id)
        session.runtime.history = _repaired(stored)
        restore_state(session, rec.state)
        self._attach(session, epoch, rec.state)
        if session.runtime.history is not stored:
            session.journal.rewrite()  # type: ignore[union-attr]
        if cwd != rec.cwd:
            self.store.save(rec.id, cwd=cwd, touch=False)
        agent.sessions[session.id] = session
        return session

    async def _open_params(self, params: Any) -> tuple[list[Any], str, str]:
        """(mcpServers, sessionId, cwd) of a load/resume/fork request, checked."""
        p = obj(params)
        sid = req_str(p, "sessionId")
        cwd = req_str(p, "cwd")
        if not os.path.isabs(cwd) or "\x00" in cwd or not os.path.isdir(cwd):
            raise InvalidParams("Invalid params: \"cwd\" must be an absolute path to an existing directory")
        if str_list(p, "additionalDirectories"):
            raise InvalidParams("Invalid params: \"additionalDirectories\" is not supported by this agent")
        return opt_list(p, "mcpServers") or [], sid, cwd

    @staticmethod
    async def _connect_mcp(session: AcpSession, servers: list[Any]) -> None:
        """The client re-sends its MCP servers on load/resume/fork: (re)start them; returns at once."""
        if servers:
            from runtime.mcp import connect_servers

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
        from runtime.store import CursorError

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
    async def before_prompt(self, session: AcpSession, blocks: list[Any], parts: list[UserPart]) -> PromptPlan:
        """Record the prompt, give the session its title, and answer locally what is no request for the model: an
        empty prompt, a built-in command, a `/name` that is no command."""
        if commands.is_empty(blocks):
            # Nothing to record or to send: the answer is straight to the connection, not part of the conversation.
            reply = {"type": "text", "text": commands.EMPTY_PROMPT_REPLY}
            await session.conn.notify("session/update", {"sessionId": session.id, "update": {
                "sessionUpdate": "agent_message_chunk", "content": reply}})
            return PromptPlan(parts, "end_turn")
        journal = session.journal
        if journal is not None:
            journal.record_prompt(blocks)
        parsed = commands.parse(blocks)
        command = None
        text = None
        if parsed is not None:
            available = commands.available(session)
            command = next((c for c in available if c.name == parsed[0]), None)
            if command is None:
                text = commands.unknown_reply(parsed[0], available)
        if command is not None and command.template is None:
            text = await commands.run_builtin(self.agent, session, command.name, parsed[1] if parsed else "")
        if text is not None:
            await session.send_update({"sessionUpdate": "agent_message_chunk",
                                       "content": {"type": "text", "text": text}})
            if journal is not None:
                journal.sync()
            return PromptPlan(parts, "end_turn")
        if session.title is None:
            title = title_from(blocks)
            if title:
                session.title = title
                if journal is not None:
                    journal.save_title(title)
                await session.send_update({"sessionUpdate": "session_info_update", "title": title})
        if command is not None and command.template is not None:
            from runtime.models.base import TextPart

            return PromptPlan([TextPart(commands.expand(command.template, parsed[1] if parsed else ""))])
        return PromptPlan(parts)

    async def after_prompt(self, session: AcpSession) -> None:
        """Store the finished turn; re-announce the commands if the workspace's changed during it."""
        if session.journal is not None:
            session.journal.sync()
        if self._sent_commands.get(session.id) != commands.available(session):
            await self._send_commands(session)

    async def _send_commands(self, session: AcpSession) -> None:
        current = commands.available(session)
        self._sent_commands[session.id] = current
        # Straight to the connection: the command list is state, not conversation.
        await session.conn.notify("session/update", {"sessionId": session.id,
                                                     "update": commands.update_frame(current)})

    # ---- replay --------------------------------------------------------------------------------------------------
    async def _replay(self, session: AcpSession) -> None:
        events = self.store.events(session.id)
        last_update: dict[str, int] = {}
        final: dict[str, dict[str, Any]] = {}
        for i, (kind, data) in enumerate(events):
            if kind == "tool_call_update":
                cid = str(data.get("toolCallId"))
                last_update[cid] = i
                final.setdefault(cid, {}).update({k: v for k, v in data.items() if k != "sessionUpdate"})
        notify = session.conn.notify
        for i, (kind, data) in enumerate(events):
            if kind == "tool_call_update":
                cid = str(data.get("toolCallId"))
                if last_update[cid] == i:
                    await notify("session/update", {"sessionId": session.id,
                                                    "update": _finished({"sessionUpdate": kind, **final[cid]})})
                continue
            await notify("session/update", {"sessionId": session.id, "update": data})
            if kind == "tool_call" and str(data.get("toolCallId")) not in last_update:
                await notify("session/update", {"sessionId": session.id, "update": _finished(
                    {"sessionUpdate": "tool_call_update", "toolCallId": data.get("toolCallId")})})


def _finished(update: dict[str, Any]) -> dict[str, Any]:
    """A tool call that never reached a final status was cut short by the agent stopping: show it as failed."""
    if update.get("status") in ("completed", "failed"):
        return update
    return {**update, "status": "failed", "content": [
        {"type": "content", "content": {"type": "text", "text": "Interrupted: the agent stopped before this call "
                                                                 "finished."}}]}


def _repaired(history: list[Message]) -> list[Message]:
    """Give every stored tool call a result, so the context is valid for every provider."""
    from runtime.models.base import AssistantMessage, ToolResultMessage

    answered = {m.call_id for m in history if isinstance(m, ToolResultMessage)}
    out: list[Message] = []
    for m in history:
        out.append(m)
        if isinstance(m, AssistantMessage):
            out += [ToolResultMessage(c.id or "", c.name, "interrupted: the agent stopped before this call finished",
                                      True) for c in m.tool_calls if (c.id or "") not in answered]
    return out if len(out) != len(history) else history


def _page_size() -> int:
    try:
        return max(1, int(os.environ.get("GATEWRIGHT_LIST_PAGE_SIZE", "50")))
    except ValueError:
        return 50
