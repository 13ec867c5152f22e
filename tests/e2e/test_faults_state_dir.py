"""Faults in the state dir, through the real `gatewright acp` binary: remembered rules fail closed, and an unusable
state dir or audit log is said once, clearly, and never turns into a traceback per call or a silent loss.

Provenance: our rule "remembered rules fail closed" (an unreadable or corrupt rules database means no remembered
allow, and every call a remembered rejection might have covered asks, in every mode) and "an unwritable state dir is
one clear line at start (and in `/status`), never a traceback per call; if the audit log cannot be written, say so".
Tests run as root, so a read-only mode bit would not stop anything: the state dir is made unusable with a regular
file in its place or on its path, and the files inside with garbage bytes or a directory where the file should be.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from permissions.policy import CallFacts
from permissions.rules import RuleStore
from permissions.store import RuleDatabase
from tests.support.harness import allow_once, reject_once, write_script
from tests.support.permissions_helpers import run_gatewright

pytestmark = [pytest.mark.timeout(120)]

TOUCH = {"id": "t1", "name": "bash", "arguments": {"command": "touch marker"}}


def _agent(
    spawn,
    tmp_path: Path,
    state: Path,
    responder=reject_once,
    mode: str = "auto",
    responses: list[dict[str, Any]] | None = None,
):
    script = write_script(tmp_path / "m.json", responses or [{"tool_calls": [TOUCH]}, {"text": "done"}])
    agent = spawn("--model", f"scripted:{script}", "--mode", mode, responder=responder, state_dir=state)
    agent.initialize()
    return agent


def _said(agent, sid: str) -> str:
    return "".join(u["content"]["text"] for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk")


def _command(agent, sid: str, text: str) -> str:
    before = len(_said(agent, sid))
    assert agent.prompt(sid, text)["result"]["stopReason"] == "end_turn"
    return _said(agent, sid)[before:]


def _statuses(agent, call_id: str) -> list[str]:
    return [u["status"] for u in agent.updates() if u.get("toolCallId") == call_id and u.get("status")]


def _deny_rule_then_corrupt(state: Path, workspace: Path) -> None:
    """A remembered project rejection of `touch marker`, then the rules file is destroyed."""
    from runtime.tools.builtin.bash import BashTool  # the real key, as the tool computes it
    from runtime.workspace import Workspace

    key = BashTool().rule_key(TOUCH["arguments"], Workspace(str(workspace)))
    db = RuleDatabase(str(state))
    RuleStore(db, str(workspace.resolve())).add("deny", CallFacts("bash", "execute", key), "`touch marker`", "project")
    db.close()
    (state / "permissions.db").write_bytes(b"not a database, whatever it was " * 200)


# ---- remembered rules fail closed ------------------------------------------------------------------------------------
@pytest.mark.parametrize("broken", ["corrupt_file", "directory_in_its_place"])
def test_an_unreadable_rules_file_makes_auto_mode_ask_and_a_rejected_call_does_not_run(
    spawn, workspace, tmp_path, broken
):
    state = tmp_path / "state"
    state.mkdir()
    if broken == "corrupt_file":
        _deny_rule_then_corrupt(state, workspace)
    else:
        (state / "permissions.db").mkdir()
    agent = _agent(spawn, tmp_path, state, responder=reject_once, mode="auto")
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "go")["result"]["stopReason"] == "end_turn"
    (asked,) = agent.agent_requests
    assert asked["params"]["toolCall"]["rawInput"] == {"command": "touch marker"}
    assert not (workspace / "marker").exists(), "auto mode ran a call a remembered rejection may cover"
    assert _statuses(agent, "t1")[-1] == "failed"
    always = [o["name"] for o in asked["params"]["options"] if o["kind"] == "allow_always"]
    assert always == ["Always allow “touch marker” in this session"]
    status = _command(agent, sid, "/status")
    assert "Remembered rules cannot be read" in status and "every tool call asks" in status
    assert agent.close() == 0
    assert "Traceback" not in agent.stderr
    warnings = [ln for ln in agent.stderr.splitlines() if "permissions.db" in ln]
    assert len(warnings) == 1 and "cannot be read" in warnings[0], agent.stderr
    out = run_gatewright("audit", "--json", "--session", sid, state=str(state))
    (entry,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert entry["outcome"] == "rejected" and "remembered rules cannot be read" in entry["reason"]


def test_with_an_unreadable_rules_file_an_approved_call_runs_and_the_command_line_explains(spawn, workspace, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    _deny_rule_then_corrupt(state, workspace)
    agent = _agent(spawn, tmp_path, state, responder=allow_once, mode="auto")
    sid = agent.new_session(workspace)
    agent.prompt(sid, "go")
    assert len(agent.agent_requests) == 1 and (workspace / "marker").exists()
    assert agent.close() == 0
    listed = run_gatewright("permissions", "list", state=str(state))
    assert listed.returncode == 1 and "cannot be read" in listed.stderr and "Traceback" not in listed.stderr


# ---- an unusable state dir ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["regular_file_in_its_place", "path_through_a_regular_file"])
def test_an_unwritable_state_dir_is_one_line_at_start_and_in_status_and_calls_still_work(
    spawn, workspace, tmp_path, layout
):
    blocker = tmp_path / "blocker"
    blocker.write_text("a regular file\n")
    state = blocker if layout == "regular_file_in_its_place" else blocker / "state"
    calls = [
        {"tool_calls": [TOUCH]},
        {"tool_calls": [dict(TOUCH, id="t2")]},
        {"tool_calls": [dict(TOUCH, id="t3")]},
        {"text": "done"},
    ]

    def always(msg: dict[str, Any]) -> Any:
        return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}

    agent = _agent(spawn, tmp_path, state, responder=always, mode="safe", responses=calls)
    sid = agent.new_session(workspace)
    agent.result("session/set_config_option", {"sessionId": sid, "configId": "remember", "value": "project"})
    assert agent.prompt(sid, "go")["result"]["stopReason"] == "end_turn"
    (asked,) = agent.agent_requests  # remembered for the session, as the label said: asked once for three calls
    always_label = [o["name"] for o in asked["params"]["options"] if o["kind"] == "allow_always"]
    assert always_label == ["Always allow “touch marker” in this session (remembered rules cannot be saved now)"]
    assert [_statuses(agent, c)[-1] for c in ("t1", "t2", "t3")] == ["completed"] * 3
    assert (workspace / "marker").exists()
    status = _command(agent, sid, "/status")
    assert f"the state dir {state} cannot be written" in status
    assert agent.close() == 0
    err = agent.stderr
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert f"the state dir {state} cannot be written" in lines[0] and "audit log is not kept" in lines[0]
    assert blocker.read_text() == "a regular file\n"


def test_an_audit_log_that_cannot_be_written_is_said_once_and_shown_in_status(spawn, workspace, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "audit.db").mkdir()  # a directory where the file should be: fails for root too
    calls = [{"tool_calls": [TOUCH]}, {"tool_calls": [dict(TOUCH, id="t2")]}, {"text": "done"}]
    agent = _agent(spawn, tmp_path, state, responder=allow_once, mode="auto", responses=calls)
    sid = agent.new_session(workspace)
    assert agent.prompt(sid, "go")["result"]["stopReason"] == "end_turn"
    assert [_statuses(agent, c)[-1] for c in ("t1", "t2")] == ["completed"] * 2
    status = _command(agent, sid, "/status")
    assert "Audit log: not written" in status and "audit.db" in status
    assert agent.close() == 0
    assert "Traceback" not in agent.stderr
    (line,) = [ln for ln in agent.stderr.splitlines() if ln.strip()]
    assert "the audit log cannot be written" in line and "audit.db" in line
    out = run_gatewright("audit", state=str(state))
    assert out.returncode == 1 and "cannot be read" in out.stderr and "Traceback" not in out.stderr
