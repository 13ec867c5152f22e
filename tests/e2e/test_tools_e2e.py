"""End to end through `gatewright acp` (a subprocess, the official ACP SDK as the editor, a scripted model).

1. A client without fs/terminal capabilities: bash, apply_patch (with a permission round trip showing the diff) and
   grep run on the disk, and the agent never calls an `fs/*` or `terminal/*` method.
2. A client that advertises fs and terminal: read_file sees the editor's unsaved buffer, edit writes through
   `fs/write_text_file`, and bash runs in an editor terminal whose id is embedded in the tool call.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any

import acp
import pytest
from acp import schema

from tests.support.sdk_client import check_recorded_frames

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]

REPO = Path(__file__).resolve().parents[2]


def agent_command() -> list[str]:
    script = Path(sysconfig.get_path("scripts")) / "gatewright"
    return [str(script)] if script.exists() else [sys.executable, "-m", "acp_server"]


def agent_env() -> dict[str, str]:
    env = dict(os.environ)
    # Run this checkout's code even when another checkout is installed in editable mode.
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class EditorClient:
    """A small editor: records updates, answers permissions, optionally serves files and real terminals."""

    def __init__(self, *, buffers: dict[str, str] | None = None) -> None:
        self.updates: list[dict[str, Any]] = []
        self.permissions: list[dict[str, Any]] = []
        self.methods: list[str] = []
        self.buffers = buffers or {}
        self.written: dict[str, str] = {}
        self.terminals: dict[str, asyncio.subprocess.Process] = {}
        self.outputs: dict[str, bytes] = {}

    async def request_permission(self, session_id, tool_call, options, **kw):
        self.methods.append("session/request_permission")
        self.permissions.append(tool_call.model_dump(by_alias=True, exclude_none=True))
        allow = next(o for o in options if o.kind == "allow_once")
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=allow.option_id)
        )

    async def session_update(self, session_id, update, **kw):
        self.updates.append(update.model_dump(by_alias=True, exclude_none=True))

    async def read_text_file(self, session_id, path, line=None, limit=None, **kw):
        self.methods.append("fs/read_text_file")
        text = self.buffers.get(path)
        if text is None:
            text = Path(path).read_text()
        return schema.ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id, path, content, **kw):
        self.methods.append("fs/write_text_file")
        self.written[path] = content
        self.buffers[path] = content
        return schema.WriteTextFileResponse()

    async def create_terminal(self, session_id, command, args=None, env=None, cwd=None, output_byte_limit=None, **kw):
        self.methods.append("terminal/create")
        proc = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
        )
        tid = f"term_{len(self.terminals) + 1}"
        self.terminals[tid] = proc
        return schema.CreateTerminalResponse(terminal_id=tid)

    async def wait_for_terminal_exit(self, session_id, terminal_id, **kw):
        self.methods.append("terminal/wait_for_exit")
        proc = self.terminals[terminal_id]
        self.outputs[terminal_id] = (await proc.communicate())[0]
        return schema.WaitForTerminalExitResponse(exit_code=proc.returncode)

    async def terminal_output(self, session_id, terminal_id, **kw):
        self.methods.append("terminal/output")
        proc = self.terminals[terminal_id]
        status = schema.TerminalExitStatus(exit_code=proc.returncode) if proc.returncode is not None else None
        return schema.TerminalOutputResponse(
            output=self.outputs.get(terminal_id, b"").decode(), truncated=False, exit_status=status
        )

    async def kill_terminal(self, session_id, terminal_id, **kw):
        self.methods.append("terminal/kill")
        self.terminals[terminal_id].kill()
        return schema.KillTerminalResponse()

    async def release_terminal(self, session_id, terminal_id, **kw):
        self.methods.append("terminal/release")
        return schema.ReleaseTerminalResponse()

    def tool_updates(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for u in self.updates:
            if u.get("sessionUpdate") in ("tool_call", "tool_call_update"):
                out.setdefault(u["toolCallId"], []).append(u)
        return out


async def drive(
    tmp_path: Path, script: list[dict[str, Any]], client: EditorClient, *, mode: str, caps: schema.ClientCapabilities
) -> str:
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"responses": script}))
    cmd = agent_command()
    record = tmp_path / "transcript.jsonl"
    async with acp.spawn_agent_process(
        client,
        cmd[0],
        *cmd[1:],
        "acp",
        "--model",
        f"scripted:{model}",
        "--mode",
        mode,
        "--record",
        str(record),
        env=agent_env(),
        transport_kwargs={"stderr": None, "limit": 50 * 2**20},
    ) as (conn, _proc):
        await conn.initialize(protocol_version=1, client_capabilities=caps)
        session = await conn.new_session(cwd=str(tmp_path / "ws"), mcp_servers=[])
        result = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("go")])
    check_recorded_frames(record)  # every frame, both directions, against the ACP schema
    return result.stop_reason


async def test_bash_apply_patch_and_grep_on_disk_with_a_permission_round_trip(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\nbeta\n")
    script = [
        {"tool_calls": [{"id": "c_bash", "name": "bash", "arguments": {"command": "echo from-bash > out.txt"}}]},
        {
            "tool_calls": [
                {
                    "id": "c_patch",
                    "name": "apply_patch",
                    "arguments": {
                        "patch": ("*** Begin Patch\n*** Update File: a.txt\n alpha\n-beta\n+gamma\n*** End Patch")
                    },
                }
            ]
        },
        {"tool_calls": [{"id": "c_grep", "name": "grep", "arguments": {"pattern": "gamma|from-bash"}}]},
        {"text": "done"},
    ]
    client = EditorClient()
    caps = schema.ClientCapabilities()
    stop = await drive(tmp_path, script, client, mode="safe", caps=caps)
    assert stop == "end_turn"
    assert (ws / "out.txt").read_text() == "from-bash\n"
    assert (ws / "a.txt").read_text() == "alpha\ngamma\n"
    asked = {p["toolCallId"]: p for p in client.permissions}
    assert "c_patch" in asked
    assert asked["c_patch"]["content"][0]["type"] == "diff"
    assert asked["c_patch"]["content"][0]["newText"] == "alpha\ngamma\n"
    assert "c_grep" not in asked  # a search inside the workspace runs without asking in safe mode
    calls = client.tool_updates()
    assert calls["c_bash"][0]["kind"] == "execute" and calls["c_bash"][0]["title"].startswith("Run echo from-bash")
    assert calls["c_patch"][0]["kind"] == "edit" and calls["c_grep"][0]["kind"] == "search"
    for cid in ("c_bash", "c_patch", "c_grep"):
        assert calls[cid][-1]["status"] == "completed", calls[cid][-1]
    grep_out = calls["c_grep"][-1]["rawOutput"]
    assert [m["line"] for m in grep_out["matches"]] == [2, 1]
    assert not [m for m in client.methods if m.startswith(("fs/", "terminal/"))]


async def test_a_client_with_fs_and_terminal_gets_the_agents_reads_writes_and_commands(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("on disk\n")
    key = str((ws / "a.txt").resolve())
    client = EditorClient(buffers={key: "unsaved line\n"})
    script = [
        {"tool_calls": [{"id": "c_read", "name": "read_file", "arguments": {"path": "a.txt"}}]},
        {
            "tool_calls": [
                {
                    "id": "c_edit",
                    "name": "edit",
                    "arguments": {"path": "a.txt", "old_string": "unsaved", "new_string": "edited"},
                }
            ]
        },
        {"tool_calls": [{"id": "c_bash", "name": "bash", "arguments": {"command": "echo in-terminal; exit 4"}}]},
        {"text": "done"},
    ]
    caps = schema.ClientCapabilities(
        fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
    )
    stop = await drive(tmp_path, script, client, mode="auto", caps=caps)
    assert stop == "end_turn"
    calls = client.tool_updates()
    read_out = calls["c_read"][-1]
    assert "unsaved line" in read_out["content"][0]["content"]["text"]
    assert client.written == {key: "edited line\n"}
    assert (ws / "a.txt").read_text() == "on disk\n"
    assert calls["c_edit"][-1]["content"][0]["type"] == "diff"
    terminal_frames = [c for u in calls["c_bash"] for c in u.get("content", []) if c["type"] == "terminal"]
    assert terminal_frames and terminal_frames[0]["terminalId"] == "term_1"
    assert calls["c_bash"][-1]["rawOutput"]["exitCode"] == 4
    assert "in-terminal" in calls["c_bash"][-1]["rawOutput"]["output"]
    for method in (
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ):
        assert method in client.methods
