"""An `acp --record` transcript carries what its replay needs: the files the recorded agent read or changed, as
they were, so `gatewright replay --check FILE` passes from any directory once the workspace is gone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support.harness import REPO, AgentProcess, allow_once

pytestmark = pytest.mark.timeout(90)


def test_an_acp_record_replays_from_another_directory_after_the_workspace_is_gone(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# project\n\nhello\n")
    (ws / "lib").mkdir()
    (ws / "lib" / "util.py").write_text("X = 1\n")
    edit = {"path": "README.md", "old_string": "hello", "new_string": "hello again"}
    script = tmp_path / "model.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
                    {"tool_calls": [{"name": "glob", "arguments": {"pattern": "**/*.py"}}]},
                    {"tool_calls": [{"name": "edit", "arguments": edit}]},
                    {"text": "Edited."},
                ]
            }
        )
    )
    record = tmp_path / "acp.jsonl"
    agent = AgentProcess(
        "--model", f"scripted:{script}", "--record", str(record), cwd=ws, state_dir=tmp_path / "s", responder=allow_once
    )
    try:
        agent.initialize()
        sid = agent.new_session(ws)
        assert agent.prompt(sid, "edit the readme")["result"]["stopReason"] == "end_turn"
        assert agent.close() == 0
    finally:
        if agent.proc.poll() is None:
            agent.kill()
    meta = json.loads(record.read_text().splitlines()[0])["meta"]
    assert meta["workspace_files"] == {"README.md": "# project\n\nhello\n", "lib/util.py": "X = 1\n"}
    shutil.rmtree(ws)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWRIGHT_")}
    env["PYTHONPATH"] = REPO
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "from acp_server.cli import main; raise SystemExit(main())",
            "replay",
            "--check",
            str(record),
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
