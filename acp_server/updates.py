"""The ACP shapes of what the agent tells the editor: the one place in `acp_server` that makes them.

- `session_update` wraps an update record in its `session/update` notification. The records of the conversation
  (message and thought chunks, tool calls and their updates, plans, usage) come from the runtime as they are: they
  are the runtime's record format (`runtime.updates`), which is ACP's `SessionUpdate` on purpose, because the
  session store keeps and replays them (`session/load`), whichever host started the session. Only
  `AcpSession.emit_chunk` (the streaming fast path) writes a frame without this module, byte for byte the same.
- `shown` is what a record becomes for this client: the newer update kinds (`notice`, `compaction_update`,
  `compaction_summary_chunk`, schema 1.25) go only to a client that advertised them (`ClientFeatures`); the others
  get the words every client understands, as before.
- What only the editor sees is made here, typed by the generated models (`acp_server.protocol.schema`): the modes
  and config options of a session, the current mode and config option updates, the slash commands as the command
  menu shows them, and the params of `session/request_permission`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp_server.protocol.schema import (
    AvailableCommand,
    AvailableCommandsUpdateSessionUpdate,
    BooleanSessionConfigOption,
    ConfigOptionUpdateSessionUpdate,
    CurrentModeUpdateSessionUpdate,
    PermissionOption,
    SelectSessionConfigOption,
    SessionConfigOption,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    UnstructuredCommandInput,
)
from permissions.modes import MODES
from permissions.options import REMEMBER_CHOICES
from runtime import NOTICE_META, asked_tool_call

if TYPE_CHECKING:
    from acp_server.protocol.schema import ClientCapabilities
    from acp_server.session import AcpSession
    from permissions.gateway import PermissionRequest
    from runtime import commands

MODEL_OPTION = "model"
THOUGHT_OPTION = "thought_level"  # how hard the model thinks
REMEMBER_OPTION = "remember"  # the session config option "Remember approvals in"
AUTO_COMPACT_OPTION = "auto_compact"  # boolean: only to clients that show boolean options


def session_update(session_id: str, update: dict[str, Any]) -> dict[str, Any]:
    """The `session/update` notification frame of one update record."""
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}


# ---- what this client takes -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ClientFeatures:
    """The optional parts of the protocol a client advertised in `initialize` that change what it is sent."""

    notices: bool = False  # `session.notices`: `notice` updates
    compaction: bool = False  # `session.compaction`: `compaction_update`, `compaction_summary_chunk`
    boolean_options: bool = False  # `session.configOptions.boolean`: boolean config options

    @classmethod
    def of(cls, caps: ClientCapabilities) -> ClientFeatures:
        session = caps.session
        if session is None:
            return cls()
        options = session.config_options
        return cls(
            notices=session.notices is not None,
            compaction=session.compaction is not None,
            boolean_options=options is not None and options.boolean is not None,
        )


def shown(record: dict[str, Any], features: ClientFeatures, *, live: bool) -> list[dict[str, Any]]:
    """What one record of the conversation (`runtime.updates`) is for this client, sent live or replayed by
    `session/load`.

    A notice is kept as a message in words (`runtime.updates.notice_record`): a client with `session.notices` gets a
    `notice` instead while it happens, and nothing on replay (notices are live events, not history). A compaction is a
    `compaction_update` for a client with `session.compaction` (live: the summary as a `compaction_summary_chunk`, then
    the final status; replayed: the final state with its summary), and only the notice in words for the others."""
    kind = record.get("sessionUpdate")
    if kind == "compaction_update":
        if not features.compaction:
            return []
        summary = record.get("summary")
        if live and summary:
            cid = record["compactionId"]
            final = {k: v for k, v in record.items() if k != "summary"}
            return [
                *({"sessionUpdate": "compaction_summary_chunk", "compactionId": cid, "content": b} for b in summary),
                final,
            ]
        return [record]
    if kind == "agent_message_chunk" and "_meta" in record:
        notice = ((record["_meta"] or {}).get("gatewright") or {}).get(NOTICE_META)
        if isinstance(notice, dict):
            if notice.get("compaction") and features.compaction:
                return []  # the compaction updates say it
            if features.notices:
                if not live:
                    return []
                out = {"sessionUpdate": "notice", "severity": notice["severity"], "title": notice["title"]}
                if notice.get("description"):
                    out["description"] = notice["description"]
                return [out]
    return [record]


# ---- modes and config options --------------------------------------------------------------------------------------
def modes_state(mode: str) -> SessionModeState:
    return SessionModeState(
        current_mode_id=mode,
        available_modes=[SessionMode(id=m.id, name=m.name, description=m.description) for m in MODES],
    )


def config_options(session: AcpSession) -> list[SessionConfigOption]:
    """The session's settings as the editor's config menu shows them: approval mode, model (whenever one is
    configured), how hard it thinks (for a model that thinks), where "always" answers are remembered, and, for a
    client that shows boolean options, whether the context is compacted automatically."""
    out: list[SessionConfigOption] = [
        SelectSessionConfigOption(
            id="mode",
            name="Approval mode",
            description="When gatewright asks before running a tool",
            category="mode",
            current_value=session.mode,
            options=[SessionConfigSelectOption(value=m.id, name=m.name, description=m.description) for m in MODES],
        )
    ]
    if session.model_id and session.model_choices:  # every configured model, even one (a scripted one is none)
        models = [
            SessionConfigSelectOption(value=m.id, name=m.name, description=m.description or m.spec)
            for m in session.model_choices
        ]
        out.append(
            SelectSessionConfigOption(
                id=MODEL_OPTION,
                name="Model",
                description="The model answering this session; a switch applies from the next model call",
                category="model",
                current_value=session.model_id,
                options=models,
            )
        )
    levels, level = session.thought_levels()
    if levels:
        out.append(
            SelectSessionConfigOption(
                id=THOUGHT_OPTION,
                name="Thinking",
                description="How much the model reasons before it answers; applies from the next model call",
                category="thought_level",
                current_value=level,
                options=[
                    SessionConfigSelectOption(value=lv.value, name=lv.name, description=lv.description) for lv in levels
                ],
            )
        )
    out.append(
        SelectSessionConfigOption(
            id=REMEMBER_OPTION,
            name="Remember approvals in",
            description="Where an “Always allow” or “Always reject” answer is remembered; each question's labels name "
            "the scope they use",
            current_value=session.rules.remember,
            options=[SessionConfigSelectOption(value=v, name=n, description=d) for v, n, d in REMEMBER_CHOICES],
        )
    )
    if session.features.boolean_options:
        out.append(
            BooleanSessionConfigOption(
                id=AUTO_COMPACT_OPTION,
                name="Compact automatically",
                description="When the context nears the model's window, summarise older messages into a checkpoint "
                "(/compact does it on demand either way)",
                current_value=session.auto_compact,
            )
        )
    return out


def mode_update(mode: str) -> dict[str, Any]:
    return CurrentModeUpdateSessionUpdate(current_mode_id=mode).to_wire()


def config_update(session: AcpSession) -> dict[str, Any]:
    return ConfigOptionUpdateSessionUpdate(config_options=config_options(session)).to_wire()


# ---- commands ---------------------------------------------------------------------------------------------------
def commands_update(available: Sequence[commands.Command]) -> dict[str, Any]:
    """The `available_commands_update` the editor shows in its command menu (the commands: `runtime.commands`)."""
    return AvailableCommandsUpdateSessionUpdate(
        available_commands=[
            AvailableCommand(
                name=c.name, description=c.description, input=UnstructuredCommandInput(hint=c.hint) if c.hint else None
            )
            for c in available
        ]
    ).to_wire()


# ---- permission questions ------------------------------------------------------------------------------------------
def permission_request(session_id: str, request: PermissionRequest) -> dict[str, Any]:
    """The params of `session/request_permission`: the call as its `tool_call` update announced it, and the options.

    `toolCall` is the runtime's record of the pending call (the same one the `tool_call` update carried)."""
    return {
        "sessionId": session_id,
        "toolCall": asked_tool_call(request),
        "options": [
            PermissionOption(option_id=o.option_id, name=o.name, kind=o.kind).to_wire() for o in request.options
        ],
    }
