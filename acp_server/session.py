"""One ACP session: the host-neutral `runtime.session.Session` plus what only the ACP host has: the connection, the
permission gateway, the streaming fast path, and the modes and config options as the editor sees them.

`AcpPermissionGateway` is the ACP implementation of `permissions.PermissionGateway`: it round-trips
`session/request_permission` so the editor owns the approval UI (and, where the editor shows forms, asks why a call
was declined); the session's runtime, with the approval decorator asking through that gateway, comes from the one
composition root (`runtime.build_runtime`, called by `Session`). A session's questions to the user go through its
`AcpElicitor` (`acp_server.elicitation`), which exists only when the editor advertised elicitation; `session/cancel`
withdraws them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from acp_server.editor import AcpEditorBridge
from acp_server.elicitation import AcpElicitor
from acp_server.rpc import ClientError, ConnectionClosed
from permissions.gateway import PermissionOutcome, PermissionRequest
from permissions.modes import MODES
from permissions.options import REASON_FORM, REASON_QUESTION, REMEMBER_CHOICES
from runtime import (
    RuntimeEvent,
    Session,
    TextChunk,
    ThoughtChunk,
    UsageReported,
    event_to_update,
    new_session_id,
    pending_tool_call,
)
from runtime.elicitation import CannotAsk

if TYPE_CHECKING:
    from acp_server.rpc import JsonRpcConnection
    from runtime import EditorBridge
    from runtime.elicitation import UserAsker

__all__ = ["REMEMBER_OPTION", "AcpPermissionGateway", "AcpSession", "new_session_id", "parse_permission_answer"]

log = logging.getLogger("gatewright.session")

REMEMBER_OPTION = "remember"  # the session config option "Remember approvals in"


class AcpPermissionGateway:
    """Asks the editor with `session/request_permission`. Anything but a valid selected option is not approval.

    With an elicitor that shows forms, it also asks why a call was declined (`ask_reason`)."""

    def __init__(self, conn: JsonRpcConnection, session_id: str, elicitor: AcpElicitor | None = None) -> None:
        self.conn = conn
        self.session_id = session_id
        self.elicitor = elicitor

    async def ask_reason(self, request: PermissionRequest) -> str | None:
        if self.elicitor is None or not self.elicitor.form:
            return None
        try:
            answer = await self.elicitor.ask_form(REASON_QUESTION, REASON_FORM, request.call_id or None)
        except CannotAsk as exc:
            log.info("could not ask why %s was declined: %s", request.call_id, exc.reason)
            return None
        reason = (answer.content or {}).get("reason") if answer.action == "accept" else None
        return reason if isinstance(reason, str) and reason.strip() else None

    async def request(self, request: PermissionRequest) -> PermissionOutcome:
        params = {
            "sessionId": self.session_id,
            "toolCall": pending_tool_call(request.call_id, request.title, request.kind, request.raw_input,
                                          request.content, request.locations),
            "options": [{"optionId": o.option_id, "name": o.name, "kind": o.kind} for o in request.options],
        }
        try:
            answer = await self.conn.request("session/request_permission", params)
        except ConnectionClosed:
            return PermissionOutcome.cancel()
        except ClientError as exc:
            log.warning("the client answered session/request_permission with error %s; treating as rejected",
                        exc.code)
            return PermissionOutcome.selected("")
        return parse_permission_answer(answer, {o.option_id for o in request.options})


def parse_permission_answer(answer: Any, valid_ids: set[str]) -> PermissionOutcome:
    """Read `{"outcome": {"outcome": "selected", "optionId": …}}` or `{"outcome": {"outcome": "cancelled"}}`.

    Garbage, wrong types or an option id we did not offer are never an approval.
    """
    outcome = answer.get("outcome") if isinstance(answer, dict) else None
    if isinstance(outcome, dict):
        if outcome.get("outcome") == "cancelled":
            return PermissionOutcome.cancel()
        oid = outcome.get("optionId")
        if outcome.get("outcome") == "selected" and isinstance(oid, str) and oid in valid_ids:
            return PermissionOutcome.selected(oid)
    log.warning("unusable answer to session/request_permission; treating it as a rejection")
    return PermissionOutcome.selected("")


@dataclass(kw_only=True, eq=False)
class AcpSession(Session):
    conn: JsonRpcConnection
    client_caps: dict[str, Any] = field(default_factory=dict)
    turn_lock: anyio.Lock = field(default_factory=anyio.Lock)
    # Bumped by every cancel: a prompt queued before the cancel sees a different value and answers `cancelled`.
    cancel_epoch: int = 0
    active_prompt: Any = None  # the params of the prompt holding `turn_lock` (to tell it from queued ones)
    cancelled_prompts: list[Any] = field(default_factory=list)  # params of queued prompts cancelled by request

    def __post_init__(self) -> None:
        self._chunk_prefixes: dict[str, bytes] = {}
        # Questions to the user, only in the modes the editor advertised (None: nothing is ever asked).
        self.elicitor = AcpElicitor.from_capabilities(self.conn, self.id, self.client_caps)
        super().__post_init__()

    def _gateway(self) -> AcpPermissionGateway:
        return AcpPermissionGateway(self.conn, self.id, self.elicitor)

    def _editor(self) -> EditorBridge | None:
        return AcpEditorBridge.from_capabilities(self.conn, self.id, self.client_caps)

    def _asker(self) -> UserAsker | None:
        return self.elicitor

    async def emit(self, ev: RuntimeEvent) -> None:
        kind = type(ev)
        if kind is TextChunk or kind is ThoughtChunk:
            # The streaming hot path (every token): the frame is the session's constant prefix, the text encoded
            # once, and a constant suffix; the same bytes `send_update` would produce for this update, except that
            # chunks are not redacted: the model sees every secret redacted, so it cannot echo one (runtime.secrets).
            update_kind = "agent_message_chunk" if kind is TextChunk else "agent_thought_chunk"
            text: str = ev.text  # type: ignore[union-attr]  # mypy does not narrow `kind is TextChunk` (hot path)
            if self.journal is not None:
                self.journal.record_text(update_kind, text)
            prefix = self._chunk_prefixes.get(update_kind)
            if prefix is None:
                prefix = self._chunk_prefixes[update_kind] = (
                    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + orjson.dumps(self.id)
                    + b',"update":{"sessionUpdate":"' + update_kind.encode() + b'","content":{"type":"text","text":')
            data = prefix + orjson.dumps(text) + b"}}}}\n"
            if not self.conn.emit_encoded_nowait(data, self._chunk_frame, update_kind, text):
                await self.conn.emit_encoded(data, self._chunk_frame, update_kind, text)
            return
        if isinstance(ev, UsageReported):
            ev = self.account(ev)
        upd = event_to_update(ev)
        if upd is not None:
            await self.send_update(upd)

    def _chunk_frame(self, update_kind: str, text: str) -> dict[str, Any]:
        """The object form of a fast-path chunk frame, for a transcript recorder."""
        return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": self.id, "update": {
            "sessionUpdate": update_kind, "content": {"type": "text", "text": text}}}}

    async def deliver(self, update: dict[str, Any]) -> None:
        await self.conn.emit_frame({"jsonrpc": "2.0", "method": "session/update",
                                    "params": {"sessionId": self.id, "update": update}})

    async def announce(self, *, mode: bool = False, config: bool = False) -> None:
        if mode:
            await self.send_update({"sessionUpdate": "current_mode_update", "currentModeId": self.mode})
        if config:
            await self.send_update({"sessionUpdate": "config_option_update", "configOptions": self.config_options()})

    def cancel(self) -> None:
        """Cancel the running turn and every prompt queued before now."""
        self.cancel_epoch += 1
        if self.elicitor is not None:
            # First, so that an MCP server waiting on a question hears `cancel` before its tool call is cancelled.
            self.elicitor.cancel_all()
        super().cancel()

    # ---- modes and config options ---------------------------------------------------------------------------------
    def modes_state(self) -> dict[str, Any]:
        return {
            "currentModeId": self.mode,
            "availableModes": [{"id": m.id, "name": m.name, "description": m.description} for m in MODES],
        }

    def config_options(self) -> list[dict[str, Any]]:
        return [{
            "id": "mode",
            "name": "Approval mode",
            "description": "When gatewright asks before running a tool",
            "category": "mode",
            "type": "select",
            "currentValue": self.mode,
            "options": [{"value": m.id, "name": m.name, "description": m.description} for m in MODES],
        }] + ([{
            "id": "model",
            "name": "Model",
            "description": "The model answering this session; a switch applies from the next model call",
            "category": "model",
            "type": "select",
            "currentValue": self.model_id,
            "options": [{"value": m.id, "name": m.name, "description": m.description or m.spec}
                        for m in self.model_choices],
        }] if self.model_choices and self.model_id else []) + [{
            "id": REMEMBER_OPTION,
            "name": "Remember approvals in",
            "description": "Where an “Always allow” or “Always reject” answer is remembered; each question's labels "
                           "name the scope they use",
            "type": "select",
            "currentValue": self.rules.remember,
            "options": [{"value": v, "name": n, "description": d} for v, n, d in REMEMBER_CHOICES],
        }]
