"""`AcpElicitor`: the session's `runtime.elicitation.UserAsker`, through ACP `elicitation/create`.

It exists only when the client advertised a mode (`clientCapabilities.elicitation.form` or `.url` as an object; a
bare `elicitation: {}` advertises nothing, and so does a mode that is not an object, as the schema reads it), and
sends only the modes advertised. Every question is session-scoped,
tied to the tool call it belongs to when there is one. A form is checked against what ACP forms can hold before it is
sent. `cancel_all` (on `session/cancel`) withdraws every open question: the editor gets `$/cancel_request` and the
asker answers `cancel`. An editor error, a closed connection or an unusable answer is never an acceptance.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from acp_server.errors import WireError
from acp_server.protocol.schema import (
    AcceptCreateElicitationResponse,
    CancelCreateElicitationResponse,
    DeclineCreateElicitationResponse,
    create_elicitation_response_from_wire,
)
from acp_server.rpc import ClientError, ConnectionClosed
from runtime.elicitation import Answer, CannotAsk, clean_content, clean_form_schema, clip, url_problem

if TYPE_CHECKING:
    from acp_server.protocol.schema import ClientCapabilities
    from acp_server.rpc import JsonRpcConnection

log = logging.getLogger("gatewright.elicitation")


class AcpElicitor:
    def __init__(self, conn: JsonRpcConnection, session_id: str, *, form: bool, url: bool) -> None:
        self.conn = conn
        self.session_id = session_id
        self.form = form
        self.url = url
        self._open: set[anyio.CancelScope] = set()

    @classmethod
    def from_capabilities(
        cls, conn: JsonRpcConnection, session_id: str, caps: ClientCapabilities
    ) -> AcpElicitor | None:
        """An asker for the modes the client advertised, or None when it advertised none."""
        el = caps.elicitation
        form = el is not None and el.form is not None
        url = el is not None and el.url is not None
        return cls(conn, session_id, form=form, url=url) if form or url else None

    @property
    def open_questions(self) -> int:
        return len(self._open)

    async def ask_form(self, message: str, schema: Mapping[str, Any], call_id: str | None = None) -> Answer:
        if not self.form:
            raise CannotAsk("the editor does not show forms (it did not advertise elicitation.form)")
        requested = clean_form_schema(schema)
        answer = await self._request(self._params("form", message, call_id, requestedSchema=requested))
        if answer is None:
            return Answer("cancel")
        return read_answer(answer, requested)

    async def ask_url(self, message: str, url: str, elicitation_id: str, call_id: str | None = None) -> Answer:
        if not self.url:
            raise CannotAsk("the editor does not open addresses (it did not advertise elicitation.url)")
        problem = url_problem(url)
        if problem is not None:
            raise CannotAsk(problem)
        answer = await self._request(self._params("url", message, call_id, url=url, elicitationId=elicitation_id))
        if answer is None:
            return Answer("cancel")
        return read_answer(answer, None)

    async def complete_url(self, elicitation_id: str) -> None:
        if self.url:
            await self.conn.notify("elicitation/complete", {"elicitationId": elicitation_id})

    def cancel_all(self) -> None:
        """Withdraw every open question (the turn is being cancelled): each one answers `cancel`."""
        for scope in list(self._open):
            scope.cancel()

    def _params(self, mode: str, message: str, call_id: str | None, **extra: Any) -> dict[str, Any]:
        params: dict[str, Any] = {
            "sessionId": self.session_id,
            "mode": mode,
            "message": clip(message.strip() or "The agent has a question."),
        }
        if call_id:
            params["toolCallId"] = call_id
        params.update(extra)
        return params

    async def _request(self, params: dict[str, Any]) -> Any:
        """The editor's answer, or None when the question was withdrawn by `cancel_all`."""
        scope = anyio.CancelScope()
        self._open.add(scope)
        try:
            with scope:
                # Cancelling the scope cancels the request, which sends `$/cancel_request` for it.
                return await self.conn.request("elicitation/create", params)
            return None
        except ClientError as exc:
            raise CannotAsk(f"the editor could not show the question ({exc.message[:200]}, error {exc.code})") from None
        except ConnectionClosed:
            raise CannotAsk("the editor connection is closed") from None
        finally:
            self._open.discard(scope)


def read_answer(answer: Any, schema: Mapping[str, Any] | None) -> Answer:
    """`{"action": "accept", "content": {…}}`, `{"action": "decline"}` or `{"action": "cancel"}`. Anything else
    (an answer that does not fit `CreateElicitationResponse`, an unknown action, content that does not fit the form)
    is taken as `cancel`: never as an acceptance."""
    try:
        read = create_elicitation_response_from_wire(answer, "result")
    except WireError as exc:
        log.warning("unusable answer to elicitation/create (%s); taking it as cancelled", exc)
        return Answer("cancel")
    if isinstance(read, DeclineCreateElicitationResponse | CancelCreateElicitationResponse):
        return Answer(read.action)
    if isinstance(read, AcceptCreateElicitationResponse):
        if schema is None:
            return Answer("accept")
        content = clean_content(read.content, schema)
        if content is not None:
            return Answer("accept", content)
        log.warning("the editor accepted a form with content that does not fit it; taking it as cancelled")
        return Answer("cancel")
    log.warning("unusable answer to elicitation/create (action %r); taking it as cancelled", read.action[:40])
    return Answer("cancel")
