"""The no-sandbox mode through the real binary (what macOS and Windows run: no sandbox backend is built for them
yet, `runtime.sandbox`): forced with `GATEWRIGHT_SANDBOX=off` as on such a machine, the agent says so once, as a
`notice` to a client that advertises `session.notices` and in words to the others, and the modes ask more."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from runtime import sandbox
from tests.support.harness import write_script

NOTICES = {"session": {"notices": {}}}


def load(agent, sid: str, ws: Path) -> list[dict]:
    start = len(agent.frames)
    assert "result" in agent.request("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
    return [
        f["params"]["update"]
        for f in agent.frames[start:]
        if f.get("method") == "session/update" and f["params"]["sessionId"] == sid
    ]


def test_without_a_sandbox_a_notices_client_gets_a_notice_and_the_others_the_words(spawn, tmp_path, workspace):
    """The forced no-sandbox path (`GATEWRIGHT_SANDBOX=off`: what macOS and Windows get, having no backend yet), on
    the real binary: the agent says so once, as a `notice` where the client shows notices."""
    model = write_script(tmp_path / "m.json", [{"text": "answer"}] * 4)
    env = {"GATEWRIGHT_SANDBOX": "off"}
    for caps, wants_notice in ((NOTICES, True), ({}, False)):
        agent = spawn("--model", f"scripted:{model}", env=env, state_dir=tmp_path / f"state{wants_notice}")
        agent.initialize(caps)
        sid = agent.new_session(workspace)
        agent.prompt(sid, "hi")
        agent.prompt(sid, "again")
        ups = agent.updates(sid)
        notices = [u for u in ups if u["sessionUpdate"] == "notice"]
        worded = [
            u for u in ups if u["sessionUpdate"] == "agent_message_chunk" and "No sandbox" in u["content"]["text"]
        ]
        if wants_notice:
            assert [(n["severity"], n["title"]) for n in notices] == [("warning", "No sandbox")]
            assert "ask for approval more often" in notices[0]["description"] and not worded
            # A notice is a live event, not history: it is not replayed.
            assert not [u for u in load(agent, sid, workspace) if "No sandbox" in json.dumps(u)]
        else:
            assert not notices and len(worded) == 1
            # A message of its own: not glued into the reply that follows.
            reply = [u for u in ups if u["sessionUpdate"] == "agent_message_chunk" and u["content"]["text"] == "answer"]
            assert reply[0]["messageId"] != worded[0]["messageId"]
            assert len([u for u in load(agent, sid, workspace) if "No sandbox" in json.dumps(u)]) == 1
        agent.close()


def test_a_system_that_is_not_linux_has_no_sandbox_and_says_why(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    found = sandbox.support()
    assert not found.active and found.landlock_why == "not Linux"
    assert found.describe().startswith("sandbox: not available (not Linux)")
