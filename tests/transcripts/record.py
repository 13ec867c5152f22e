"""Re-record the transcripts in this folder with `gatewright acp --record` (run from the repository root):

    python -m tests.transcripts.record

Each scenario is a scripted model, a workspace and a list of client actions. The recorded file has the workspace
path replaced by `<WORKSPACE>` and carries the scripted model and the workspace files in its meta line, so that
`tests/acp_server/test_transcripts.py` can replay it on its own.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp_server.transcript import STATE, WORKSPACE, substitute_path
from tests.support.harness import AgentProcess, allow_once, reject_once

HERE = Path(__file__).resolve().parent
FILES = {"README.md": "# sample\n\nA sample project.\n", "src/app.py": "print('app')\n"}
TEXT = [{"type": "text", "text": ""}]


def prompt(agent: AgentProcess, sid: str, text: str) -> None:
    agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}, 30)


def handshake_and_errors(agent: AgentProcess, ws: Path) -> None:
    agent.request(
        "initialize",
        {"protocolVersion": 65535, "clientCapabilities": {}, "clientInfo": {"name": "replay", "version": "1"}},
    )
    agent.send_raw(b"this is not json")
    agent.send_raw(b'{"foo": "bar"}')
    agent.request("no/such/method", {})
    agent.request("_vendor/extension", {})
    agent.request("session/new", {"cwd": "relative", "mcpServers": []})
    sid = agent.result("session/new", {"cwd": str(ws), "mcpServers": []})["sessionId"]
    agent.request("session/prompt", {"sessionId": "sess_unknown", "prompt": []})
    agent.request("session/set_mode", {"sessionId": sid, "modeId": "yolo"})
    agent.request("initialize", {"protocolVersion": 1})


def approve_and_write(agent: AgentProcess, ws: Path) -> None:
    agent.initialize()
    sid = agent.new_session(ws)
    prompt(agent, sid, "Add a greeting module.")


def reject_write(agent: AgentProcess, ws: Path) -> None:
    agent.responder = reject_once
    agent.initialize()
    sid = agent.new_session(ws)
    prompt(agent, sid, "Rewrite the README.")


def cancel_pending_permission(agent: AgentProcess, ws: Path) -> None:
    agent.initialize()
    sid = agent.new_session(ws)

    def cancel_then_answer(msg: dict[str, Any]) -> Any:
        agent.notify("session/cancel", {"sessionId": sid})
        return {"outcome": {"outcome": "cancelled"}}

    agent.responder = cancel_then_answer
    prompt(agent, sid, "Write the changelog.")


def modes_and_remembered_rules(agent: AgentProcess, ws: Path) -> None:
    agent.initialize()
    sid = agent.new_session(ws)
    agent.result("session/set_mode", {"sessionId": sid, "modeId": "read-only"})
    prompt(agent, sid, "Try to write in read-only mode.")
    agent.result("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "safe"})

    def always(msg: dict[str, Any]) -> Any:
        return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}

    agent.responder = always
    prompt(agent, sid, "Write twice; the second identical call is remembered.")


def tool_errors_and_limits(agent: AgentProcess, ws: Path) -> None:
    agent.initialize()
    sid = agent.new_session(ws)
    prompt(agent, sid, "Exercise the sanitizer.")


WRITE = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hello\n"}}
SCENARIOS: dict[str, tuple[Callable[[AgentProcess, Path], None], list[dict[str, Any]]]] = {
    "01_handshake_and_errors": (handshake_and_errors, []),
    "02_approve_and_write": (
        approve_and_write,
        [
            {
                "thinking": "Read first.",
                "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "README.md"}}],
            },
            {
                "text": "Adding it now.",
                "tool_calls": [
                    {
                        "id": "w1",
                        "name": "write_file",
                        "arguments": {"path": "src/greet.py", "content": "def greet():\n    return 'hi'\n"},
                    }
                ],
            },
            {"text": "Created src/greet.py.", "usage": {"input_tokens": 120, "output_tokens": 14}},
        ],
    ),
    "03_reject_write": (
        reject_write,
        [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": "# replaced\n"}}]},
            {"text": "never reached"},
        ],
    ),
    "04_cancel_pending_permission": (
        cancel_pending_permission,
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "CHANGELOG.md", "content": "# 1.0\n"}}]},
            {"text": "never reached"},
        ],
    ),
    "05_modes_and_remembered_rules": (
        modes_and_remembered_rules,
        [
            {"tool_calls": [WRITE]},
            {"text": "Read-only mode refused the write."},
            {"tool_calls": [WRITE]},
            {"tool_calls": [WRITE]},
            {"text": "Wrote notes.txt twice, asked once."},
        ],
    ),
    "06_tool_errors_and_limits": (
        tool_errors_and_limits,
        [
            {
                "tool_calls": [
                    {"id": "bad1", "name": "read_file", "arguments": "{not json"},
                    {"id": "bad2", "name": "read_file", "arguments": {"path": "README.md", "evil": True}},
                    {"id": "bad3", "name": "no_such_tool", "arguments": {}},
                    {"id": "ok1", "name": "read_file", "arguments": {"path": "src/app.py", "startLine": 1}},
                ]
            },
            {"text": "Partial answer", "stop": "max_tokens"},
        ],
    ),
}


def record(name: str) -> Path:
    action, responses = SCENARIOS[name]
    tmp = Path(tempfile.mkdtemp(prefix="gw-record-"))
    try:
        ws = tmp / "ws"
        for rel, content in FILES.items():
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(content, encoding="utf-8")
        model = tmp / "model.json"
        model.write_text(json.dumps({"responses": responses}, indent=1), encoding="utf-8")
        out = tmp / "t.jsonl"
        agent = AgentProcess(
            "--record", str(out), "--model", f"scripted:{model}", cwd=ws, responder=allow_once, state_dir=tmp / "state"
        )
        try:
            action(agent, ws)
            assert agent.close() == 0
        finally:
            if agent.proc.poll() is None:
                agent.kill()
        agent.assert_clean()
        lines = []
        for line in out.read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            if "meta" in obj:
                obj["meta"]["workspace_files"] = FILES
                for volatile in ("model", "python", "platform"):  # a temporary path; this machine's facts
                    obj["meta"].pop(volatile, None)
            obj = substitute_path(substitute_path(obj, str(tmp / "state"), STATE), str(ws), WORKSPACE)
            lines.append(json.dumps(obj, ensure_ascii=False))
        dest = HERE / f"{name}.jsonl"
        dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return dest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    for scenario in SCENARIOS:
        print("recorded", record(scenario))
