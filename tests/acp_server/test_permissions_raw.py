"""Permissions through the ACP connection in process (tests/support/inprocess.py, every frame checked against the
schema): persisted project rules across agents on one state dir, the decision in `_meta`, reject vs. "try another
way", cancellation scoped to one session, late answers, the question timeout, and the audit log."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tests.support.harness import allow_once, never_answer, write_script


def _model(tmp: Path, responses: list[dict[str, Any]], name: str = "model.json") -> str:
    return "scripted:" + write_script(tmp / name, responses)


def _option(msg: dict[str, Any], option_id: str) -> Any:
    assert option_id in [o["optionId"] for o in msg["params"]["options"]]
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


def _statuses(agent, call_id: str, sid: str | None = None) -> list[str]:
    return [u["status"] for u in agent.updates(sid) if u.get("toolCallId") == call_id and u.get("status")]


class _Questions:
    """A responder that records each session's question and holds it until both sessions have asked."""

    def __init__(self, answer) -> None:
        self.asked: dict[str, dict[str, Any]] = {}
        self.both_asked = threading.Event()
        self.answer = answer

    def __call__(self, msg: dict[str, Any]) -> Any:
        self.asked[msg["params"]["sessionId"]] = msg
        if len(self.asked) == 2:
            self.both_asked.set()
        return self.answer(msg)


def _text(agent, sid: str | None = None) -> str:
    return "".join(u["content"]["text"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk")


BUILD = {"id": "b1", "name": "bash", "arguments": {"command": "touch built.txt"}}


def _remember(agent, sid: str, scope: str) -> dict[str, Any]:
    """Set the session's "Remember approvals in" config option; returns that option as the answer shows it."""
    answer = agent.result("session/set_config_option", {"sessionId": sid, "configId": "remember", "value": scope})
    return next(o for o in answer["configOptions"] if o["id"] == "remember")


def test_always_allow_in_this_project_is_remembered_by_the_next_agent_process(inproc, workspace, tmp_path):
    model = _model(tmp_path, [{"tool_calls": [BUILD]}, {"text": "built"}])
    first = inproc("--model", model, responder=lambda m: _option(m, "allow_always"))
    first.initialize()
    sid = first.new_session(workspace)
    assert _remember(first, sid, "project")["currentValue"] == "project"
    assert first.prompt(sid, "build")["result"]["stopReason"] == "end_turn"
    (asked,) = first.agent_requests
    assert [o["name"] for o in asked["params"]["options"] if o["kind"] == "allow_always"] == [
        "Always allow “touch built.txt” in this project"
    ]
    assert first.close() == 0
    (workspace / "built.txt").unlink()

    second = inproc("--model", model, responder=never_answer)
    second.initialize()
    sid2 = second.new_session(workspace)
    assert second.prompt(sid2, "build again")["result"]["stopReason"] == "end_turn"
    assert not second.agent_requests, "the project rule must answer without a question"
    assert (workspace / "built.txt").exists()
    (running,) = [u for u in second.updates() if u.get("status") == "in_progress"]
    meta = running["_meta"]["gatewright"]
    assert meta["decision"] == "allow" and meta["by"].startswith("rule:p-") and meta["rule"].startswith("p-")


def test_the_in_progress_update_says_which_mode_or_answer_let_the_call_run(inproc, workspace, tmp_path):
    model = _model(
        tmp_path,
        [
            {"tool_calls": [{"id": "r", "name": "read_file", "arguments": {"path": "README.md"}}]},
            {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "n.txt", "content": "x"}}]},
            {"text": "ok"},
        ],
    )
    agent = inproc("--model", model, responder=allow_once)
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt(sid, "go")
    metas = {u["toolCallId"]: u["_meta"]["gatewright"] for u in agent.updates() if u.get("status") == "in_progress"}
    assert metas["r"] == {"decision": "allow", "by": "mode:safe", "reason": "safe mode allows this read call"}
    assert metas["w"]["by"] == "user" and metas["w"]["option"] == "allow_once"


def test_reject_stops_with_a_message_and_try_another_way_lets_the_model_go_on(inproc, workspace, tmp_path):
    model = _model(
        tmp_path,
        [
            {"tool_calls": [BUILD]},
            {"text": "Trying something else."},
            {"tool_calls": [dict(BUILD, id="b2")]},
            {"text": "NEVER"},
        ],
    )
    answers = iter(["reject_continue", "reject_once"])
    agent = inproc("--model", model, responder=lambda m: _option(m, next(answers)))
    agent.initialize()
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "one")["result"]["stopReason"] == "end_turn"
    assert "Trying something else." in _text(agent)
    assert _statuses(agent, "b1") == ["pending", "failed"]
    assert agent.prompt(sid, "two")["result"]["stopReason"] == "end_turn"
    assert "Stopped: you rejected Run touch built.txt." in _text(agent) and "NEVER" not in _text(agent)
    assert not (workspace / "built.txt").exists()


def test_session_cancel_resolves_only_that_sessions_question(inproc, workspace, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    model = _model(tmp_path, [{"tool_calls": [BUILD]}, {"text": "done"}])
    release = threading.Event()

    def hold(msg: dict[str, Any]) -> Any:
        release.wait(20)
        return _option(msg, "allow_once")

    questions = _Questions(hold)
    asked = questions.asked
    agent = inproc("--model", model, responder=questions)
    agent.initialize()
    sa, sb = agent.new_session(workspace), agent.new_session(other)
    ra, rb = agent.start_prompt(sa, "a"), agent.start_prompt(sb, "b")
    assert questions.both_asked.wait(15)
    agent.notify("session/cancel", {"sessionId": sa})
    assert agent.response(ra)["result"]["stopReason"] == "cancelled"
    cancels = [f for f in agent.frames if f.get("method") == "$/cancel_request"]
    assert [c["params"]["requestId"] for c in cancels] == [asked[sa]["id"]]
    release.set()  # both answers arrive now: session A's is late and must be ignored
    assert agent.response(rb)["result"]["stopReason"] == "end_turn"
    assert not (workspace / "built.txt").exists() and (other / "built.txt").exists()


def _two_sessions_one_answer(inproc, workspace, tmp_path, option: str):
    """Two sessions of one project ask the same question; only the first is answered, with `option`."""
    model = _model(tmp_path, [{"tool_calls": [BUILD]}, {"text": "done"}])

    def answer_only_the_first(msg: dict[str, Any]) -> Any:
        questions.both_asked.wait(20)
        if msg is next(iter(questions.asked.values())):
            return _option(msg, option)
        return never_answer(msg)  # the second question is left open: the rule must settle it

    questions = _Questions(answer_only_the_first)
    agent = inproc("--model", model, responder=questions)
    agent.initialize()
    sa, sb = agent.new_session(workspace), agent.new_session(workspace)
    for sid in (sa, sb):  # whichever asks first, its answer is remembered for the project
        _remember(agent, sid, "project")
    ra, rb = agent.start_prompt(sa, "a"), agent.start_prompt(sb, "b")
    assert questions.both_asked.wait(15)
    results = agent.response(ra)["result"], agent.response(rb)["result"]
    first, second = questions.asked.values()
    cancels = [f["params"]["requestId"] for f in agent.frames if f.get("method") == "$/cancel_request"]
    assert cancels == [second["id"]], "the settled question is withdrawn at the client"
    return agent, results, second["params"]["sessionId"]


def test_always_reject_for_the_project_also_settles_the_same_question_open_in_another_session(
    inproc, workspace, tmp_path
):
    agent, results, other = _two_sessions_one_answer(inproc, workspace, tmp_path, "reject_always")
    assert [r["stopReason"] for r in results] == ["end_turn", "end_turn"]
    assert _statuses(agent, "b1", other)[-1] == "failed"
    assert not (workspace / "built.txt").exists()


def test_always_allow_for_the_project_also_settles_the_same_question_open_in_another_session(
    inproc, workspace, tmp_path
):
    agent, results, other = _two_sessions_one_answer(inproc, workspace, tmp_path, "allow_always")
    assert [r["stopReason"] for r in results] == ["end_turn", "end_turn"]
    assert _statuses(agent, "b1", other)[-1] == "completed"
    (running,) = [u for u in agent.updates(other) if u.get("toolCallId") == "b1" and u.get("status") == "in_progress"]
    meta = running["_meta"]["gatewright"]
    assert meta["decision"] == "allow" and meta["by"].startswith("rule:p-")
    assert (workspace / "built.txt").exists()


def test_an_unanswered_question_times_out_as_a_rejection(inproc, workspace, tmp_path):
    model = _model(tmp_path, [{"tool_calls": [BUILD]}, {"text": "NEVER"}])
    agent = inproc("--model", model, responder=never_answer, env={"GATEWRIGHT_PERMISSION_TIMEOUT": "0.5"})
    agent.initialize()
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "go")["result"]["stopReason"] == "end_turn"
    assert "no answer within 0.5 s" in _text(agent) and not (workspace / "built.txt").exists()
    (req,) = agent.agent_requests
    assert any(f.get("method") == "$/cancel_request" and f["params"]["requestId"] == req["id"] for f in agent.frames), (
        "the withdrawn question is cancelled at the client"
    )


def test_decisions_of_an_acp_session_show_in_gatewright_audit(inproc, workspace, tmp_path):
    from tests.support.permissions_helpers import run_gatewright

    model = _model(tmp_path, [{"tool_calls": [BUILD]}, {"text": "ok"}])
    agent = inproc("--model", model, responder=lambda m: _option(m, "allow_once"))
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.prompt(sid, "go")
    assert agent.close() == 0
    out = run_gatewright("audit", "--json", "--session", sid, state=str(tmp_path / "state"))
    (entry,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert entry["call_id"] == "b1" and entry["decided_by"] == "user" and entry["option"] == "allow_once"
    assert entry["outcome"] == "completed" and entry["project"] == str(workspace)


def test_where_approvals_are_remembered_is_a_session_config_option_kept_with_the_session(inproc, workspace, tmp_path):
    from tests.support.permissions_helpers import run_gatewright

    model = _model(tmp_path, [{"tool_calls": [BUILD]}, {"text": "built"}])
    agent = inproc("--model", model, responder=lambda m: _option(m, "allow_always"))
    agent.initialize()
    created = agent.result("session/new", {"cwd": str(workspace), "mcpServers": []})
    sid = created["sessionId"]
    (remember,) = [o for o in created["configOptions"] if o["id"] == "remember"]
    assert remember["name"] == "Remember approvals in" and remember["currentValue"] == "session"
    assert [(v["value"], v["name"]) for v in remember["options"]] == [
        ("session", "This session"),
        ("project", "This project"),
        ("global", "Everywhere"),
    ]
    bad = agent.request("session/set_config_option", {"sessionId": sid, "configId": "remember", "value": "galaxy"})
    assert bad["error"]["code"] == -32602
    assert _remember(agent, sid, "global")["currentValue"] == "global"
    agent.prompt(sid, "build")
    (asked,) = agent.agent_requests
    assert [o["name"] for o in asked["params"]["options"]] == [
        "Allow once",
        "Always allow “touch built.txt” everywhere",
        "Reject once and stop",
        "Reject, and let the agent try another way",
        "Always reject “touch built.txt” everywhere",
    ]
    agent.prompt(sid, "/permissions remember project")
    assert "now remembered in this project" in _text(agent, sid)
    pushed = [u for u in agent.updates(sid) if u["sessionUpdate"] == "config_option_update"][-1]
    assert next(o for o in pushed["configOptions"] if o["id"] == "remember")["currentValue"] == "project"
    assert agent.close() == 0
    (rule,) = [
        json.loads(line)
        for line in run_gatewright("permissions", "list", "--json", state=str(tmp_path / "state")).stdout.splitlines()
    ]
    assert rule["scope"] == "global" and rule["action"] == "allow"

    again = inproc("--model", model, responder=never_answer)
    again.initialize()
    loaded = again.result("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    assert next(o for o in loaded["configOptions"] if o["id"] == "remember")["currentValue"] == "project"
