"""How long `session/load` takes (replay + answer) for a stored session of N turns, through a real `gatewright acp`.

    python -m bench.bench_sessions 100 1000

Each turn is what a typical tool-using turn stores: a prompt, a thought, a tool call with its updates and output,
and the answer text; the model context holds the matching four messages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runtime.models.base import AssistantMessage, TextPart, ToolCallRequest, ToolResultMessage, UserMessage
from runtime.store import SessionRecord, SessionStore
from tests.support.harness import write_script


def fill(store: SessionStore, sid: str, cwd: str, turns: int) -> None:
    store.create(SessionRecord(sid, cwd, "safe", title="bench"))
    history = []
    for t in range(turns):
        cid = f"call_{t}"
        store.append_events(
            sid,
            [
                (
                    "user_message_chunk",
                    {
                        "sessionUpdate": "user_message_chunk",
                        "content": {"type": "text", "text": f"prompt {t}: please look at the file"},
                    },
                ),
                (
                    "agent_thought_chunk",
                    {
                        "sessionUpdate": "agent_thought_chunk",
                        "content": {"type": "text", "text": "I should read it first. " * 4},
                    },
                ),
                (
                    "tool_call",
                    {
                        "sessionUpdate": "tool_call",
                        "toolCallId": cid,
                        "title": "Read `a.py`",
                        "kind": "read",
                        "status": "pending",
                        "rawInput": {"path": "a.py"},
                    },
                ),
                ("tool_call_update", {"sessionUpdate": "tool_call_update", "toolCallId": cid, "status": "in_progress"}),
                (
                    "tool_call_update",
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": cid,
                        "status": "completed",
                        "content": [{"type": "content", "content": {"type": "text", "text": "x = 1\n" * 100}}],
                    },
                ),
                (
                    "agent_message_chunk",
                    {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": "The file sets x to 1. " * 5},
                    },
                ),
            ],
        )
        history += [
            UserMessage((TextPart(f"prompt {t}"),)),
            AssistantMessage("", "thinking", (ToolCallRequest(cid, "read_file", '{"path": "a.py"}'),)),
            ToolResultMessage(cid, "read_file", "x = 1\n" * 100),
            AssistantMessage("The file sets x to 1."),
        ]
    store.replace_context(sid, history, {"model_position": 0})


def measure(turns: int) -> float:
    tmp = Path(tempfile.mkdtemp())
    ws = tmp / "ws"
    ws.mkdir()
    store = SessionStore(tmp / "state" / "gatewright.sqlite3")
    fill(store, "sess_bench", str(ws), turns)
    store.close()
    model = write_script(tmp / "m.json", [])
    env = dict(os.environ, GATEWRIGHT_STATE_DIR=str(tmp / "state"))
    # A bare client (no schema checks, which would dominate the time): read lines until the load's answer.
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_server", "--model", f"scripted:{model}"],
        cwd=tmp,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def call(rid: int, method: str, params: dict) -> int:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n")
        proc.stdin.flush()
        for lines, line in enumerate(proc.stdout, 1):
            msg = json.loads(line)
            if msg.get("id") == rid and "method" not in msg:
                assert "result" in msg, msg
                return lines
        raise AssertionError("the agent exited")

    call(0, "initialize", {"protocolVersion": 1})
    call(1, "session/new", {"cwd": str(ws), "mcpServers": []})  # warm the imports, as a first session would
    start = time.perf_counter()
    frames = call(2, "session/load", {"sessionId": "sess_bench", "cwd": str(ws), "mcpServers": []})
    elapsed = time.perf_counter() - start
    proc.stdin.close()
    proc.wait(10)
    assert frames > turns * 5
    return elapsed


def main() -> None:
    for n in [int(a) for a in sys.argv[1:]] or [100, 1000]:
        best = min(measure(n) for _ in range(3))
        sys.stdout.write(f"{n:>6} turns ({n * 5} updates replayed): session/load answered in {best * 1000:.0f} ms\n")


if __name__ == "__main__":
    main()
