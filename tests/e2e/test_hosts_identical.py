"""The runtime is identical in every host: the same scripted model and the same answers give the same tool
executions and results through `gatewright acp` (editor approvals), `gatewright run` (terminal approvals) and
`gatewright chat` (one key per option, in a pseudo-terminal)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

from tests.support.harness import AgentProcess

SCRIPT = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "approved\n"}}]},
    {
        "tool_calls": [
            {"name": "write_file", "arguments": {"path": "b.txt", "content": "rejected\n"}},
            {"name": "read_file", "arguments": {"path": "missing.txt"}},
        ]
    },
    {"text": "never reached"},
]
ANSWERS = ["allow_once", "reject_once"]


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir(parents=True)
    (ws / "README.md").write_text("# same\n")
    return ws


def _files(ws: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(ws.iterdir()) if p.is_file()}


def run_acp(tmp: Path, model: Path) -> tuple[list[tuple[str, str]], dict[str, str], str]:
    ws = _workspace(tmp / "acp")
    answers = list(ANSWERS)

    def responder(msg):
        kind = answers.pop(0)
        return {"outcome": {"outcome": "selected", "optionId": kind}}

    agent = AgentProcess("--model", f"scripted:{model}", cwd=ws, responder=responder, state_dir=tmp / "s1")
    try:
        agent.initialize()
        sid = agent.new_session(ws)
        stop = agent.prompt(sid, "do it")["result"]["stopReason"]
        agent.close()
    finally:
        if agent.proc.poll() is None:
            agent.kill()
    agent.assert_clean()
    titles: dict[str, str] = {}
    finals: dict[str, str] = {}
    for u in agent.updates(sid):
        if u["sessionUpdate"] == "tool_call":
            titles[u["toolCallId"]] = u["title"]
        elif u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed"):
            finals[u["toolCallId"]] = u["status"]
    return [(titles[c], finals[c]) for c in titles], _files(ws), stop


def run_cli(tmp: Path, model: Path) -> tuple[list[tuple[str, str]], dict[str, str], int]:
    ws = _workspace(tmp / "cli")
    master, slave = pty.openpty()
    env = dict(os.environ, GATEWRIGHT_STATE_DIR=str(tmp / "s2"), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    env.pop("GATEWRIGHT_MODEL", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from acp_server.cli import main; raise SystemExit(main())",
            "run",
            "--cwd",
            str(ws),
            "--model",
            f"scripted:{model}",
            "do it",
        ],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(slave)
    err_lines: list[str] = []
    answers = ["y" if a == "allow_once" else "n" for a in ANSWERS]

    def read_err() -> None:
        assert proc.stderr is not None
        buf = b""
        while True:
            chunk = proc.stderr.read1(4096)  # type: ignore[attr-defined]
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf or b"Approve? [y/N] " in buf:
                if b"Approve? [y/N] " in buf and (b"\n" not in buf or buf.index(b"Approve?") < buf.index(b"\n")):
                    before, _, buf = buf.partition(b"Approve? [y/N] ")
                    err_lines.extend(before.decode().splitlines())
                    os.write(master, (answers.pop(0) + "\n").encode())
                    continue
                line, _, buf = buf.partition(b"\n")
                err_lines.append(line.decode())
        err_lines.extend(buf.decode().splitlines())

    t = threading.Thread(target=read_err, daemon=True)
    t.start()
    assert proc.stdout is not None
    proc.stdout.read()  # not communicate(): it would compete with the thread for stderr
    proc.wait(60)
    proc.stdout.close()
    t.join(5)
    assert proc.stderr is not None
    proc.stderr.close()
    os.close(master)
    results: list[tuple[str, str]] = []
    for line in err_lines:
        s = line.strip()
        if s.startswith("✓ ") or s.startswith("✗ "):
            results.append((s[2:], "completed" if s[0] == "✓" else "failed"))
    return results, _files(ws), proc.returncode


def run_chat(tmp: Path, model: Path) -> tuple[list[tuple[str, str]], dict[str, str]]:
    from tests.e2e.test_chat_terminal import Term

    ws = _workspace(tmp / "chat")
    term = Term("--model", f"scripted:{model}", cwd=ws, state=tmp / "s3")
    try:
        term.say("do it")
        for answer in ANSWERS:
            term.expect(r"cancels the turn\) ›")
            term.child.send("y" if answer == "allow_once" else "n")
        term.expect(r"Stopped: a tool call was not approved")
        term.prompt()
        term.child.sendcontrol("d")
        assert term.wait_exit() == 0
    finally:
        term.kill()
    results = [
        ("completed" if m.group(1) == "✓" else "failed", m.group(2))
        for m in re.finditer(r"(✓|✗) (\S.*?)  \d+(?:\.\d)?s", term.text)
    ]
    return [(title, status) for status, title in results], _files(ws)


def test_the_same_script_and_answers_give_the_same_executions_in_every_host(tmp_path):
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"responses": SCRIPT}))
    acp_calls, acp_files, stop = run_acp(tmp_path, model)
    cli_calls, cli_files, code = run_cli(tmp_path, model)
    chat_calls, chat_files = run_chat(tmp_path, model)
    assert acp_calls == [
        ("Read README.md", "completed"),
        ("Write a.txt", "completed"),
        ("Write b.txt", "failed"),
        ("Read missing.txt", "failed"),
    ]
    assert cli_calls == acp_calls
    assert chat_calls == acp_calls
    assert cli_files == acp_files == chat_files == {"README.md": "# same\n", "a.txt": "approved\n"}
    assert stop == "end_turn" and code == 3
