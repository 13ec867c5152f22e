"""One ACP session: the host-neutral `runtime.session.Session` plus what only the ACP host has: the connection,
the client's capabilities, the prompt queue's bookkeeping and the streaming fast path.

What a session is made of comes from `Session` and the one composition root (`runtime.build_runtime`): this class
plugs in the ACP gateway (`acp_server.permission_gateway`), the editor's files and terminals (`acp_server.editor`)
and the session's questions to the user (`acp_server.elicitation`, only when the editor advertised elicitation;
`session/cancel` withdraws them). What the editor is shown is made by `acp_server.updates`.

`emit` is the runtime's event sink and, for text and thought chunks, the streaming fast path (one frame per token,
written from constant bytes); everything else becomes a record (`runtime.updates`), journaled and sent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from acp_server import updates
from acp_server.editor import AcpEditorBridge
from acp_server.elicitation import AcpElicitor
from acp_server.permission_gateway import AcpPermissionGateway
from acp_server.protocol.schema import ClientCapabilities
from runtime import RuntimeEvent, Session, TextChunk, ThoughtChunk, UsageReported, event_to_update

if TYPE_CHECKING:
    from acp_server.protocol.schema import PromptRequest
    from acp_server.rpc import JsonRpcConnection
    from runtime import EditorBridge
    from runtime.elicitation import UserAsker

__all__ = ["AcpSession"]

log = logging.getLogger("gatewright.session")


def _no_capabilities() -> ClientCapabilities:
    return ClientCapabilities.from_wire({}, "clientCapabilities")


@dataclass(kw_only=True, eq=False)
class AcpSession(Session):
    conn: JsonRpcConnection
    client_caps: ClientCapabilities = field(default_factory=_no_capabilities)
    turn_lock: anyio.Lock = field(default_factory=anyio.Lock)
    # Bumped by every cancel: a prompt queued before the cancel sees a different value and answers `cancelled`.
    cancel_epoch: int = 0
    active_prompt: PromptRequest | None = None  # the prompt holding `turn_lock` (to tell it from queued ones)
    cancelled_prompts: list[PromptRequest] = field(default_factory=list)  # queued prompts cancelled by request

    def __post_init__(self) -> None:
        self._chunk_prefix: tuple[str, str | None, bytes] = ("", None, b"")  # (kind, messageId, prefix) of the last
        self.features = updates.ClientFeatures.of(self.client_caps)
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
        """The runtime's event sink, and for text and thought chunks the streaming fast path (every token).

        A chunk's frame is the session's constant prefix, the text encoded once, and a constant suffix: the bytes
        `send_update` would write for the same record (tests/acp_server/test_streaming_fast_path.py), except that chunks
        are not redacted: the model sees every secret redacted, so it cannot echo one (runtime.secrets). Kept inline,
        without a call per token; a recorder gets the frame as an object (`_chunk_frame`) only when there is one. Every
        other event becomes its record (`runtime.updates`), journaled and sent.
        """
        kind = type(ev)
        if kind is TextChunk or kind is ThoughtChunk:
            update_kind = "agent_message_chunk" if kind is TextChunk else "agent_thought_chunk"
            text: str = ev.text  # type: ignore[union-attr]  # mypy does not narrow `kind is TextChunk` (hot path)
            mid = self.journal.record_text(update_kind, text) if self.journal is not None else None
            last_kind, last_mid, prefix = self._chunk_prefix
            if last_kind != update_kind or last_mid != mid:  # once per message
                prefix = (
                    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
                    + orjson.dumps(self.id)
                    + b',"update":{"sessionUpdate":"'
                    + update_kind.encode()
                    + (b'","messageId":' + orjson.dumps(mid) + b"," if mid is not None else b'",')
                    + b'"content":{"type":"text","text":'
                )
                self._chunk_prefix = (update_kind, mid, prefix)
            data = prefix + orjson.dumps(text) + b"}}}}\n"
            if not self.conn.emit_encoded_nowait(data, self._chunk_frame, update_kind, text, mid):
                await self.conn.emit_encoded(data, self._chunk_frame, update_kind, text, mid)
            return
        if isinstance(ev, UsageReported):
            ev = self.account(ev)
        upd = event_to_update(ev)
        if upd is not None:
            await self.send_update(upd)

    def _chunk_frame(self, update_kind: str, text: str, mid: str | None) -> dict[str, Any]:
        """The object form of a fast-path chunk frame, for a transcript recorder."""
        update: dict[str, Any] = {"sessionUpdate": update_kind}
        if mid is not None:
            update["messageId"] = mid
        update["content"] = {"type": "text", "text": text}
        return updates.session_update(self.id, update)

    async def deliver(self, update: dict[str, Any]) -> None:
        """Send a record as this client takes it (a notice as a `notice`, a compaction as one, where advertised)."""
        for shown in updates.shown(update, self.features, live=True):
            await self.conn.emit_frame(updates.session_update(self.id, shown))

    async def deliver_replayed(self, update: dict[str, Any]) -> None:
        """Send a stored record again (`session/load`), as this client takes it."""
        for shown in updates.shown(update, self.features, live=False):
            await self.conn.emit_frame(updates.session_update(self.id, shown))

    async def announce(self, *, mode: bool = False, config: bool = False) -> None:
        if mode:
            await self.send_update(updates.mode_update(self.mode))
        if config:
            await self.send_update(updates.config_update(self))

    def cancel(self) -> None:
        """Cancel the running turn and every prompt queued before now."""
        self.cancel_epoch += 1
        if self.elicitor is not None:
            # First, so that an MCP server waiting on a question hears `cancel` before its tool call is cancelled.
            self.elicitor.cancel_all()
        super().cancel()
