"""Upgrades keep user data: a state dir written by gatewright 0.1.0 (`tests/fixtures/state-0.1.0`, made with that
release's code) opens in this version. Its session is listed and loaded by an editor with everything it showed and
continues on its stored mode; its remembered rules are listed and still decide calls (an allowed command runs
without a question, a denied one is refused); its audit log is shown; and the files stay readable afterwards."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.harness import REPO, AgentProcess

pytestmark = pytest.mark.timeout(90)

FIXTURE = Path(REPO) / "tests" / "fixtures" / "state-0.1.0"
SID = "sess_1ed6613e1db9469e8588d0da1ead6036"
WS = "/tmp/gatewright-fixture-ws"  # where the release ran; project rules are keyed by it
CLI = "from acp_server.cli import main; raise SystemExit(main())"


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    """A copy of the old state dir (the fixture itself is never written), and the workspace it names."""
    # The workspace path is part of the old data; one test at a time holds it (other checkouts run this test too).
    lock = open(WS + ".lock", "w")  # noqa: SIM115 - held until the fixture ends
    fcntl.flock(lock, fcntl.LOCK_EX)
    dest = tmp_path / "state"
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("*.md", "*.py"))
    dest.chmod(0o700)
    ws = Path(WS)
    if ws.exists():
        shutil.rmtree(ws)
    ws.mkdir()
    (ws / ".git").mkdir()
    (ws / "README.md").write_text("# fixture project\n\nhello\n")
    (ws / "notes.txt").write_text("one\n")
    yield dest
    shutil.rmtree(ws, ignore_errors=True)
    lock.close()


def _gw(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWRIGHT_")}
    env.update(PYTHONPATH=REPO, GATEWRIGHT_STATE_DIR=str(state))
    return subprocess.run(
        [sys.executable, "-c", CLI, *args], env=env, capture_output=True, text=True, timeout=30, cwd=WS
    )


def test_the_old_rules_are_listed_with_their_scopes(state):
    proc = _gw(state, "permissions", "list", "--project", WS, "--json")
    assert proc.returncode == 0, proc.stderr
    rules = sorted((r["action"], r["label"], r["scope"]) for r in map(json.loads, proc.stdout.splitlines()))
    assert rules == [
        ("allow", "`touch made-by-rule`", "global"),
        ("allow", "writing this content to `notes.txt`", "project"),
        ("deny", "`rm -rf build`", "project"),
    ]


def test_the_old_audit_log_is_shown(state):
    proc = _gw(state, "audit", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert sorted((r["call_id"], r["tool"], r["decided_by"], r["outcome"]) for r in rows) == [
        ("c1", "read_file", "mode:safe", "completed"),
        ("c2", "write_file", "user", "completed"),
        ("c3", "bash", "user", "completed"),
        ("c4", "bash", "user", "rejected"),
    ]
    assert {r["session_id"] for r in rows} == {SID}


def test_the_old_session_is_listed_loaded_and_continued_and_its_rules_still_decide(state, tmp_path):
    # The session goes on where its scripted model stood: the new script's entries start at that position.
    with sqlite3.connect(state / "gatewright.sqlite3") as db:
        (stored,) = db.execute("SELECT state FROM sessions WHERE id = ?", (SID,)).fetchone()
    at = json.loads(stored)["model_position"]
    script = tmp_path / "model.json"
    script.write_text(
        json.dumps(
            {
                "responses": [{"text": "(spent)"}] * at
                + [
                    {"tool_calls": [{"id": "n1", "name": "bash", "arguments": {"command": "touch made-by-rule"}}]},
                    {"tool_calls": [{"id": "n2", "name": "bash", "arguments": {"command": "rm -rf build"}}]},
                    {"text": "never"},
                ]
            }
        )
    )
    asked: list[str] = []

    def answer(msg):
        asked.append(msg["params"]["toolCall"]["title"])
        return {"outcome": {"outcome": "cancelled"}}

    agent = AgentProcess("--model", f"scripted:{script}", cwd=WS, state_dir=state, responder=answer)
    try:
        agent.initialize()
        listed = agent.result("session/list", {"cwd": WS})["sessions"]
        assert [(s["sessionId"], s["title"]) for s in listed] == [(SID, "read the README and write notes")]
        loaded = agent.result("session/load", {"sessionId": SID, "cwd": WS, "mcpServers": []})
        assert loaded["modes"]["currentModeId"] == "auto"  # the mode the release stored
        replayed = agent.updates(SID)
        said = [u["content"]["text"] for u in replayed if u.get("sessionUpdate") == "user_message_chunk"]
        assert said == [
            "read the README and write notes",
            "touch a file",
            "clean the build",
            "a prompt typed in the terminal",
        ]
        titles = [u["title"] for u in replayed if u.get("sessionUpdate") == "tool_call"]
        assert titles == ["Read README.md", "Write notes.txt", "Run touch made-by-rule", "Run rm -rf build"]
        # Continued with the old rules: the everywhere rule runs the command without a question, the project's
        # deny refuses the other, and nothing asks.
        done = agent.prompt(SID, "once more", timeout=30)["result"]["stopReason"]
        assert done == "end_turn"
        assert (Path(WS) / "made-by-rule").exists()
        assert asked == []
        finals = {
            u["toolCallId"]: u["status"]
            for u in agent.updates(SID)
            if u.get("sessionUpdate") == "tool_call_update" and u.get("status") in ("completed", "failed")
        }
        assert finals["n1"] == "completed" and finals["n2"] == "failed"
        assert agent.close() == 0
    finally:
        if agent.proc.poll() is None:
            agent.kill()
    # And what this version wrote is readable again, by the audit command and a new agent.
    rows = [json.loads(line) for line in _gw(state, "audit", "--json").stdout.splitlines()]
    assert {"n1", "n2"} <= {r["call_id"] for r in rows}
    again = AgentProcess(cwd=WS, state_dir=state)
    try:
        again.initialize()
        assert [s["sessionId"] for s in again.result("session/list", {"cwd": WS})["sessions"]] == [SID]
        assert again.close() == 0
    finally:
        if again.proc.poll() is None:
            again.kill()
