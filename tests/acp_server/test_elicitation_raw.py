"""The agent can ask: the ACP connection in process (tests/support/inprocess.py; raw harness, every frame checked
against the ACP schema), with the real MCP test server, asking the user through ACP `elicitation/create`.

Provenance: ACP elicitation (stable since schema 1.21.0: `elicitation/create` with `mode` form or url, scoped to the
session and optionally a tool call; the answer `accept` + content, `decline` or `cancel`; modes are advertised only
by a non-null `clientCapabilities.elicitation.form` / `.url`, and the agent MUST NOT call what the client did not
advertise); ACP `$/cancel_request`; MCP elicitation (a server's `elicitation/create` during a tool call, answered with
the same three actions); the reject-and-continue option's reason.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import never_answer, write_script
from tests.support.mcp_helpers import stdio_entry

pytestmark = [pytest.mark.timeout(120)]

FORMS = {"elicitation": {"form": {}}}
FORMS_AND_URLS = {"elicitation": {"form": {}, "url": {}}}
MCP_ENV = {"GATEWRIGHT_MCP_TURN_WAIT": "60"}
LEGACY = {"MCP_TEST_ERA": "legacy"}


class Editor:
    """Answers permission questions and elicitations as a test tells it, recording every elicitation."""

    def __init__(self, *, permission: str = "allow_once", elicitation: Any = None) -> None:
        self.permission = permission
        self.elicitation = elicitation if elicitation is not None else {"action": "decline"}
        self.asked: list[dict[str, Any]] = []
        self.asked_event = threading.Event()

    def __call__(self, msg: dict[str, Any]) -> Any:
        if msg["method"] == "session/request_permission":
            opt = next(
                o["optionId"]
                for o in msg["params"]["options"]
                if o["optionId"] == self.permission or o["kind"] == self.permission
            )
            return {"outcome": {"outcome": "selected", "optionId": opt}}
        if msg["method"] == "elicitation/create":
            self.asked.append(msg)
            self.asked_event.set()
            answer = self.elicitation
            return answer(msg) if callable(answer) else answer
        raise AssertionError(f"unexpected request {msg['method']}")


def call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": name, "arguments": args}]}


def start(
    inproc,
    tmp_path: Path,
    workspace: Path,
    responses: list[dict[str, Any]],
    editor: Editor,
    caps: dict[str, Any],
    servers: list[dict[str, Any]] | None = None,
    mode: str = "safe",
) -> tuple[Any, str]:
    script = write_script(tmp_path / "m.json", responses)
    agent = inproc("--model", f"scripted:{script}", "--mode", mode, responder=editor, env=MCP_ENV)
    agent.initialize(caps)
    sid = agent.result("session/new", {"cwd": str(workspace), "mcpServers": servers or []})["sessionId"]
    return agent, sid


def final(agent: Any, sid: str, cid: str) -> dict[str, Any]:
    done = [
        u
        for u in agent.updates(sid)
        if u.get("sessionUpdate") == "tool_call_update"
        and u.get("toolCallId") == cid
        and u.get("status") in ("completed", "failed")
    ]
    assert done, f"no final update for {cid}"
    return done[-1]


def text_of(update: dict[str, Any]) -> str:
    return "".join(c["content"].get("text", "") for c in update.get("content") or [] if c.get("type") == "content")


def messages(agent: Any, sid: str) -> str:
    return "".join(u["content"]["text"] for u in agent.updates(sid) if u.get("sessionUpdate") == "agent_message_chunk")


def elicitations(agent: Any) -> list[dict[str, Any]]:
    return [f for f in agent.frames if f.get("method") == "elicitation/create"]


# ---- MCP servers' questions ----------------------------------------------------------------------------------------
@pytest.mark.req("acp:elicitation:form-and-url")
@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_an_mcp_servers_question_during_a_tool_call_reaches_the_editor_and_the_answer_reaches_the_server(
    inproc, tmp_path, workspace, era
):
    """The handshake-era server's `ctx.elicit` (a request in the middle of the call) and the 2026-07-28 server's
    question embedded in the call's result both arrive as one session-scoped `elicitation/create` tied to the MCP
    tool call, naming the server; the editor's content goes back to the server, which answers with it."""
    editor = Editor(elicitation={"action": "accept", "content": {"name": "Ada"}})
    tool, args, env = (
        ("ask", {"question": "What is your name?"}, LEGACY) if era == "legacy" else ("ask_resolved", {}, {})
    )
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [call("c1", f"mcp__t__{tool}", args), {"text": "ok"}],
        editor,
        FORMS,
        [stdio_entry("t", env=env)],
        mode="auto",
    )
    assert agent.prompt(sid, "ask me", timeout=90)["result"]["stopReason"] == "end_turn"
    [asked] = editor.asked
    params = asked["params"]
    assert params["sessionId"] == sid and params["toolCallId"] == "c1" and params["mode"] == "form"
    assert params["message"] == (
        "t (MCP server) asks: " + ("What is your name?" if era == "legacy" else "Who are you?")
    )
    assert params["requestedSchema"]["properties"]["name"]["type"] == "string"
    assert final(agent, sid, "c1")["status"] == "completed"
    assert text_of(final(agent, sid, "c1")) == "accept: Ada"
    agent.assert_clean()


@pytest.mark.req("acp:elicitation:form-and-url")
@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_or_cancelled_question_is_answered_so_to_the_mcp_server(inproc, tmp_path, workspace, action):
    editor = Editor(elicitation={"action": action})
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [call("c1", "mcp__t__ask", {"question": "Name?"}), {"text": "ok"}],
        editor,
        FORMS,
        [stdio_entry("t", env=LEGACY)],
        mode="auto",
    )
    assert agent.prompt(sid, "ask me", timeout=90)["result"]["stopReason"] == "end_turn"
    assert len(editor.asked) == 1
    assert text_of(final(agent, sid, "c1")) == action


@pytest.mark.req("acp:elicitation:only-if-advertised", "acp:clientcap:never-call-unadvertised-methods")
@pytest.mark.parametrize(
    "caps",
    [{}, {"elicitation": {}}, {"elicitation": {"form": None, "url": None}}, {"elicitation": {"url": {}}}],
    ids=["none", "bare", "nulls", "url_only"],
)
def test_without_form_support_an_mcp_servers_question_is_declined_at_once_and_nothing_is_sent(
    inproc, tmp_path, workspace, caps
):
    """Capability honesty: a client that advertises no form mode (a bare `elicitation: {}` advertises nothing) never
    gets `elicitation/create` for a form; the server's question is answered `decline` without waiting, the user is
    told, and the server was never told the client can show forms."""
    marker = workspace / "outcome"  # the server runs sandboxed: it may write the workspace
    editor = Editor()
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [
            call("c0", "mcp__t__client_elicitation", {}),
            call("c1", "mcp__t__ask", {"question": "Name?", "marker": str(marker)}),
            {"text": "ok"},
        ],
        editor,
        caps,
        [stdio_entry("t", env=LEGACY)],
        mode="auto",
    )
    assert agent.prompt(sid, "ask me", timeout=90)["result"]["stopReason"] == "end_turn"
    assert elicitations(agent) == [] and editor.asked == []
    assert marker.read_text() == "decline"
    advertised = json.loads(text_of(final(agent, sid, "c0")))
    assert advertised == ({"url": {}} if caps == {"elicitation": {"url": {}}} else None)
    assert "MCP server t asked a question that could not be shown" in messages(agent, sid)


@pytest.mark.req("acp:elicitation:form-and-url")
@pytest.mark.parametrize("caps", [FORMS, FORMS_AND_URLS], ids=["form", "form_and_url"])
def test_the_mcp_server_is_told_exactly_the_modes_the_editor_shows(inproc, tmp_path, workspace, caps):
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [call("c0", "mcp__t__client_elicitation", {}), {"text": "ok"}],
        Editor(),
        caps,
        [stdio_entry("t")],
        mode="auto",
    )
    assert agent.prompt(sid, "which", timeout=90)["result"]["stopReason"] == "end_turn"
    assert json.loads(text_of(final(agent, sid, "c0"))) == caps["elicitation"]


@pytest.mark.req("acp:elicitation:form-and-url")
def test_a_form_acp_cannot_hold_is_declined_and_never_sent(inproc, tmp_path, workspace):
    """ACP forms hold flat primitive fields only: a server asking for a nested object gets `decline`, the editor
    gets nothing, and the session says why."""
    editor = Editor(elicitation={"action": "accept", "content": {}})
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [call("c1", "mcp__t__ask_nested", {}), {"text": "ok"}],
        editor,
        FORMS,
        [stdio_entry("t", env=LEGACY)],
        mode="auto",
    )
    assert agent.prompt(sid, "ask me", timeout=90)["result"]["stopReason"] == "end_turn"
    assert elicitations(agent) == []
    assert text_of(final(agent, sid, "c1")) == "decline"
    assert "field 'address' has type 'object'; ACP forms only hold" in messages(agent, sid)


@pytest.mark.req("acp:elicitation:form-and-url")
def test_a_url_question_is_shown_as_url_mode_and_its_completion_is_forwarded(inproc, tmp_path, workspace):
    editor = Editor(elicitation={"action": "accept"})
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [call("c1", "mcp__t__open_page", {"url": "https://login.example.com/device?code=1"}), {"text": "ok"}],
        editor,
        FORMS_AND_URLS,
        [stdio_entry("t", env=LEGACY)],
        mode="auto",
    )
    assert agent.prompt(sid, "sign in", timeout=90)["result"]["stopReason"] == "end_turn"
    [asked] = editor.asked
    params = asked["params"]
    assert params["mode"] == "url" and params["url"] == "https://login.example.com/device?code=1"
    assert params["toolCallId"] == "c1" and params["elicitationId"].startswith("elic_")
    assert text_of(final(agent, sid, "c1")) == "accept"
    done = agent.wait_for(lambda f: f.get("method") == "elicitation/complete")
    assert done["params"] == {"elicitationId": params["elicitationId"]}


@pytest.mark.req("acp:elicitation:cancelled-with-the-turn")
def test_session_cancel_withdraws_an_open_mcp_question_and_the_server_hears_cancel(inproc, tmp_path, workspace):
    """`session/cancel` while the editor shows a server's question: the editor gets `$/cancel_request` for it, the
    server's `ctx.elicit` returns `cancel` (it records what it got), and the turn ends `cancelled`."""
    marker = workspace / "outcome"  # the server runs sandboxed: it may write the workspace
    editor = Editor(elicitation=never_answer)
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [call("c1", "mcp__t__ask", {"question": "Name?", "marker": str(marker)}), {"text": "not reached"}],
        editor,
        FORMS,
        [stdio_entry("t", env=LEGACY)],
        mode="auto",
    )
    rid = agent.start_prompt(sid, "ask me")
    asked = agent.wait_for(lambda f: f.get("method") == "elicitation/create", timeout=90)
    agent.notify("session/cancel", {"sessionId": sid})
    assert agent.response(rid, timeout=30)["result"]["stopReason"] == "cancelled"
    assert agent.wait_for(lambda f: f.get("method") == "$/cancel_request" and f["params"]["requestId"] == asked["id"])
    assert _eventually(marker.exists) and marker.read_text() == "cancel"
    assert "not reached" not in messages(agent, sid)


@pytest.mark.req("acp:elicitation:cancelled-with-the-turn")
def test_session_cancel_withdraws_a_question_a_2026_server_embedded_in_its_call(inproc, tmp_path, workspace):
    editor = Editor(elicitation=never_answer)
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [call("c1", "mcp__t__ask_resolved", {}), {"text": "not reached"}],
        editor,
        FORMS,
        [stdio_entry("t")],
        mode="auto",
    )
    rid = agent.start_prompt(sid, "ask me")
    asked = agent.wait_for(lambda f: f.get("method") == "elicitation/create", timeout=90)
    assert asked["params"]["toolCallId"] == "c1"
    agent.notify("session/cancel", {"sessionId": sid})
    assert agent.response(rid, timeout=30)["result"]["stopReason"] == "cancelled"
    assert agent.wait_for(lambda f: f.get("method") == "$/cancel_request" and f["params"]["requestId"] == asked["id"])
    assert final(agent, sid, "c1")["status"] == "failed"


def _eventually(predicate: Any, seconds: float = 15.0) -> bool:
    # The MCP server is another process: nothing in this one tells us when it wrote its file, so poll briefly.
    end = time.monotonic() + seconds
    while not predicate() and time.monotonic() < end:
        time.sleep(0.02)
    return bool(predicate())


# ---- ask_user --------------------------------------------------------------------------------------------------------
@pytest.mark.req("acp:elicitation:form-and-url")
def test_ask_user_puts_the_models_question_to_the_user_without_an_approval_and_returns_the_answer(
    inproc, tmp_path, workspace
):
    editor = Editor(elicitation={"action": "accept", "content": {"choice": "tabs"}})
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [
            call(
                "q1", "ask_user", {"question": "Tabs or spaces?", "options": ["tabs", "spaces"], "allowFreeText": False}
            ),
            {"text": "ok"},
        ],
        editor,
        FORMS,
    )
    assert agent.prompt(sid, "format it")["result"]["stopReason"] == "end_turn"
    assert not [r for r in agent.agent_requests if r["method"] == "session/request_permission"]
    [asked] = editor.asked
    params = asked["params"]
    assert params["toolCallId"] == "q1" and params["message"] == "Tabs or spaces?"
    assert params["requestedSchema"] == {
        "type": "object",
        "required": ["choice"],
        "properties": {"choice": {"type": "string", "title": "Choose one", "enum": ["tabs", "spaces"]}},
    }
    done = final(agent, sid, "q1")
    assert done["status"] == "completed" and text_of(done) == "The user answered: tabs"
    started = next(u for u in agent.updates(sid) if u.get("sessionUpdate") == "tool_call" and u["toolCallId"] == "q1")
    assert started["title"] == "Ask the user: Tabs or spaces?"
    agent.assert_clean()


@pytest.mark.req("acp:elicitation:only-if-advertised")
def test_without_form_support_ask_user_is_not_offered_and_a_call_to_it_asks_nothing(inproc, tmp_path, workspace):
    editor = Editor()
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [call("q1", "ask_user", {"question": "Tabs?"}), {"text": "ok"}],
        editor,
        {"elicitation": {"url": {}}},
    )
    assert agent.prompt(sid, "format it")["result"]["stopReason"] == "end_turn"
    assert elicitations(agent) == []
    done = final(agent, sid, "q1")
    assert done["status"] == "failed" and text_of(done).startswith("unknown tool 'ask_user'; available tools: ")
    assert "ask_user" not in text_of(done).split("available tools: ")[1]  # the model was never offered it


@pytest.mark.req("acp:elicitation:cancelled-with-the-turn")
def test_session_cancel_withdraws_the_models_open_question(inproc, tmp_path, workspace):
    editor = Editor(elicitation=never_answer)
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [call("q1", "ask_user", {"question": "Really?"}), {"text": "not reached"}],
        editor,
        FORMS,
    )
    rid = agent.start_prompt(sid, "go")
    asked = agent.wait_for(lambda f: f.get("method") == "elicitation/create")
    agent.notify("session/cancel", {"sessionId": sid})
    assert agent.response(rid)["result"]["stopReason"] == "cancelled"
    assert agent.wait_for(lambda f: f.get("method") == "$/cancel_request" and f["params"]["requestId"] == asked["id"])
    assert "not reached" not in messages(agent, sid)


# ---- "Reject, and let the agent try another way" --------------------------------------------------------------------
@pytest.mark.req("gw:approval:reject-continue-reason")
def test_reject_and_continue_asks_why_and_the_reason_reaches_the_model_while_nothing_is_written(
    inproc, tmp_path, workspace
):
    editor = Editor(
        permission="reject_continue", elicitation={"action": "accept", "content": {"reason": "use tabs, not spaces"}}
    )
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [call("w1", "write_file", {"path": "a.py", "content": "x = 1\n"}), {"text": "trying another way"}],
        editor,
        FORMS,
    )
    assert agent.prompt(sid, "write it")["result"]["stopReason"] == "end_turn"
    assert not (workspace / "a.py").exists()
    [asked] = editor.asked
    params = asked["params"]
    assert params["message"] == "Tell the agent why (optional)" and params["toolCallId"] == "w1"
    assert list(params["requestedSchema"]["properties"]) == ["reason"]
    assert not params["requestedSchema"].get("required")
    done = final(agent, sid, "w1")
    assert done["status"] == "failed"
    assert text_of(done) == "Declined: not run. The agent was told to try another way, and why: “use tabs, not spaces”."
    assert "trying another way" in messages(agent, sid)  # the turn went on
    permission = next(r for r in agent.agent_requests if r["method"] == "session/request_permission")
    assert len(permission["params"]["options"]) == 5
    agent.assert_clean()


@pytest.mark.req("gw:approval:reject-continue-reason")
@pytest.mark.parametrize(
    "caps,answer",
    [
        ({}, None),
        (FORMS, {"action": "decline"}),
        (FORMS, {"action": "cancel"}),
        (FORMS, {"action": "accept", "content": {"reason": "  "}}),
    ],
    ids=["no_elicitation", "declined", "cancelled", "blank"],
)
def test_reject_and_continue_without_a_reason_keeps_todays_behaviour(inproc, tmp_path, workspace, caps, answer):
    editor = Editor(permission="reject_continue", elicitation=answer)
    agent, sid = start(
        inproc,
        tmp_path,
        workspace,
        [call("w1", "write_file", {"path": "a.py", "content": "x = 1\n"}), {"text": "trying another way"}],
        editor,
        caps,
    )
    assert agent.prompt(sid, "write it")["result"]["stopReason"] == "end_turn"
    assert not (workspace / "a.py").exists()
    assert len(editor.asked) == (0 if not caps else 1)
    assert elicitations(agent) == editor.asked
    assert text_of(final(agent, sid, "w1")) == "Declined: not run. The agent was told to try another way."
    assert "trying another way" in messages(agent, sid)
