"""`gatewright replay --check --workspace DIR FILE` re-drives a transcript someone sent, in a copy of DIR, and refuses
without `--trust` one that would write outside its temporary workspace. The copy keeps DIR's symbolic links, so a
write the transcript names inside the workspace (`out/pwned.txt`) lands wherever a link of DIR leads (a project's
`data -> /mnt/data`, a monorepo's link to a shared tree), with the recorded "allow" answering the agent's question.

Effects only: the real binary records a session that writes through such a link (approved), then `replay --check`
runs it against a project holding the same link; the file must not appear where the link leads.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.harness import REPO, allow_once, write_script

pytestmark = [pytest.mark.timeout(90)]
CLI = "from acp_server.cli import main; raise SystemExit(main())"


@pytest.mark.xfail(
    strict=True,
    reason="replay --check copies the --workspace tree with its links and checks the transcript's paths as text "
    "only: a link leading outside the copy is written through (not built yet)",
)
def test_replay_check_does_not_write_through_a_link_of_the_copied_workspace(spawn, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    recorded, proj = tmp_path / "recorded", tmp_path / "proj"
    for ws in (recorded, proj):
        ws.mkdir()
        os.symlink(target, ws / "out")
    script = write_script(
        tmp_path / "model.json",
        [{"tool_calls": [{"name": "write_file", "arguments": {"path": "out/pwned.txt", "content": "x\n"}}]}],
    )
    bug = tmp_path / "bug.jsonl"
    agent = spawn("--model", f"scripted:{script}", "--record", str(bug), cwd=recorded, responder=allow_once)
    agent.initialize()
    agent.prompt(agent.new_session(recorded), "go")
    assert agent.close() == 0
    (target / "pwned.txt").unlink()  # the recording wrote it, approved; the replay must not

    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWRIGHT_")}
    env.update(PYTHONPATH=REPO, GATEWRIGHT_STATE_DIR=str(tmp_path / "gw-state"), XDG_CONFIG_HOME=str(tmp_path / "x"))
    done = subprocess.run(
        [sys.executable, "-c", CLI, "replay", "--check", "--workspace", str(proj), str(bug)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert not (target / "pwned.txt").exists(), done.stdout + done.stderr
