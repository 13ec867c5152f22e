"""`AcpPermissionGateway`: the ACP host's `permissions.PermissionGateway`, which asks the editor.

The approval decorator (`permissions.ToolApprovalDecorator`, assembled by `runtime.build_runtime`) decides whether a
call needs a question; when it does, this gateway round-trips `session/request_permission` so the editor owns the
approval UI. The decorator with this gateway is what the design calls the `AcpToolApprovalDecorator`: the runtime is
the same in every host, only the gateway differs. Where the editor shows forms, the gateway also asks why a call
was declined (`ask_reason`, through the session's `AcpElicitor`).

Fail closed: an answer that does not fit `RequestPermissionResponse`, an option id that was not offered, a client
error or a closed connection is never an approval. A client error or an answer that cannot be read is not a
rejection either: the user was not asked (`PermissionOutcome.could_not_ask`), and is told so.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from acp_server import updates
from acp_server.errors import WireError
from acp_server.protocol.schema import CancelledRequestPermissionOutcome, RequestPermissionResponse
from acp_server.rpc import ClientError, ConnectionClosed
from permissions.gateway import EDITOR_COULD_NOT_ASK, PermissionOutcome, PermissionRequest
from permissions.options import REASON_FORM, REASON_QUESTION
from runtime.elicitation import CannotAsk

if TYPE_CHECKING:
    from acp_server.elicitation import AcpElicitor
    from acp_server.rpc import JsonRpcConnection

log = logging.getLogger("gatewright.session")


class AcpPermissionGateway:
    """Asks the editor with `session/request_permission`. Anything but a valid selected option is not approval."""

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
        try:
            answer = await self.conn.request(
                "session/request_permission", updates.permission_request(self.session_id, request)
            )
        except ConnectionClosed:
            return PermissionOutcome.cancel()
        except ClientError as exc:
            # The client did not show the question (-32601: it does not serve permission questions at all): nobody
            # rejected anything, and nothing is run without an answer.
            log.warning("the client answered session/request_permission with error %s; the call is not run", exc.code)
            return PermissionOutcome.could_not_ask(EDITOR_COULD_NOT_ASK)
        return parse_permission_answer(answer, {o.option_id for o in request.options})


def parse_permission_answer(answer: Any, valid_ids: set[str]) -> PermissionOutcome:
    """Read `{"outcome": {"outcome": "selected", "optionId": …}}` or `{"outcome": {"outcome": "cancelled"}}`.

    Garbage, wrong types or an option id we did not offer are never an approval.
    """
    try:
        outcome = RequestPermissionResponse.from_wire(answer, "result").outcome
    except WireError as exc:
        log.warning("unusable answer to session/request_permission (%s); the call is not run", exc)
        return PermissionOutcome.could_not_ask(EDITOR_COULD_NOT_ASK)
    if isinstance(outcome, CancelledRequestPermissionOutcome):
        return PermissionOutcome.cancel()
    if outcome.option_id in valid_ids:
        return PermissionOutcome.selected(outcome.option_id)
    log.warning("session/request_permission answered with an option that was not offered; treating it as a rejection")
    return PermissionOutcome.selected("")
