"""Sessions that survive the process, through the real binary and the raw harness (every frame schema-checked):
`kill -9` in the middle of a turn, two processes on one store. The session methods themselves are tested in process:
tests/acp_server/test_sessions_methods.py."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from tests.support.harness import allow_once, never_answer, write_script


def load(agent, sid: str, ws: Path) -> dict:
    return agent.request("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})


def replayed(agent, sid: str, start: int = 0) -> list[dict]:
    return [
        f["params"]["update"]
        for f in agent.frames[start:]
        if f.get("method") == "session/update" and f["params"]["sessionId"] == sid
    ]


def text_of(updates: list[dict], kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


def test_after_kill_9_mid_turn_the_session_loads_with_every_completed_step(spawn, tmp_path, workspace):
    (workspace / "a.txt").write_text("alpha\n")
    model = write_script(
        tmp_path / "m.json",
        [
            {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
            {
                "text": "Now README.",
                "tool_calls": [{"id": "r2", "name": "read_file", "arguments": {"path": "README.md"}}],
            },
            {
                "thinking": "Time to write.",
                "tool_calls": [
                    {"id": "w1", "name": "write_file", "arguments": {"path": "out.txt", "content": "done\n"}}
                ],
            },
            {"text": "Resumed and finished."},
        ],
    )
    agent = spawn("--model", f"scripted:{model}", responder=never_answer)
    agent.initialize()
    sid = agent.new_session(workspace)
    agent.start_prompt(sid, "Do the work")
    agent.wait_for(lambda f: f.get("method") == "session/request_permission")
    os.killpg(agent.proc.pid, signal.SIGKILL)  # no shutdown code runs; the reader thread then sees EOF
    agent.proc.wait(10)

    again = spawn("--model", f"scripted:{model}", responder=allow_once)
    again.initialize()
    start = len(again.frames)
    assert "result" in load(again, sid, workspace)
    ups = replayed(again, sid, start)
    assert text_of(ups, "user_message_chunk") == "Do the work"
    assert text_of(ups) == "Now README."
    finals = {u["toolCallId"]: u for u in ups if u["sessionUpdate"] == "tool_call_update"}
    assert finals["r1"]["status"] == "completed" and finals["r2"]["status"] == "completed"
    assert finals["w1"]["status"] == "failed"  # announced, never finished: shown as interrupted
    assert "Interrupted" in finals["w1"]["content"][0]["content"]["text"]
    assert text_of(ups, "agent_thought_chunk") == "Time to write."
    # The model context holds both completed steps; the script resumes at the step that was cut short.
    assert again.prompt(sid, "Please continue")["result"]["stopReason"] == "end_turn"
    assert (workspace / "out.txt").read_text() == "done\n"
    assert text_of(replayed(again, sid)).endswith("Resumed and finished.")


def test_two_processes_write_one_store_at_once_and_a_third_sees_both_complete(spawn, tmp_path, workspace):
    n = 6
    model = write_script(tmp_path / "m.json", [{"text": f"answer {i}"} for i in range(n)])
    agents = [spawn("--model", f"scripted:{model}") for _ in range(2)]
    sids = []
    for a in agents:
        a.initialize()
        sids.append(a.new_session(workspace))

    def chat(agent, sid: str) -> None:
        for i in range(n):
            assert agent.prompt(sid, f"question {i}")["result"]["stopReason"] == "end_turn"

    threads = [threading.Thread(target=chat, args=(a, s)) for a, s in zip(agents, sids, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    third = spawn("--model", f"scripted:{model}")
    third.initialize()
    listed = third.result("session/list", {"cwd": str(workspace)})["sessions"]
    assert {s["sessionId"] for s in listed} == set(sids)
    for sid in sids:
        start = len(third.frames)
        assert "result" in load(third, sid, workspace)
        ups = replayed(third, sid, start)
        assert [u["content"]["text"] for u in ups if u["sessionUpdate"] == "user_message_chunk"] == [
            f"question {i}" for i in range(n)
        ]
        assert text_of(ups) == "".join(f"answer {i}" for i in range(n))
