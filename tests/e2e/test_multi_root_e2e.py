"""A multi-root workspace through the real binary (`additionalDirectories`, as Zed and JetBrains send for a project
of several folders): both roots are the workspace for every tool, the sandbox and the boundary (edits and commands
in both run without a question in `auto`; a write outside both asks), each root's AGENTS.md reaches the model, the
roots are kept with the session and re-sent on load; anything but an absolute, existing directory is -32602."""

from __future__ import annotations

import json

import pytest

from tests.support.fake_providers import OPENAI_PATH, Reply, openai_stream
from tests.support.harness import reject_once

pytestmark = pytest.mark.timeout(90)


def calls(*items: tuple[str, str, dict]) -> Reply:
    return Reply(frames=openai_stream(tool_calls=[(cid, name, [json.dumps(args)]) for cid, name, args in items]))


def test_two_roots_are_one_workspace_for_tools_sandbox_and_instructions(spawn, tmp_path, fp):
    one, two, outside = tmp_path / "one", tmp_path / "two", tmp_path / "outside"
    for d in (one, two, outside):
        d.mkdir()
    (two / ".git").mkdir()  # the second root's repository: protected like the first's
    (one / "AGENTS.md").write_text("Root one: always say PINEAPPLE.\n")
    (two / "AGENTS.md").write_text("Root two: never touch vendor/.\n")
    fp.openai(
        calls(
            ("c1", "write_file", {"path": "a.txt", "content": "in one\n"}),
            ("c2", "write_file", {"path": str(two / "b.txt"), "content": "in two\n"}),
        ),
        calls(("c3", "read_file", {"path": str(two / "b.txt")})),
        calls(("c3e", "edit", {"path": str(two / "b.txt"), "old_string": "in two", "new_string": "edited in two"})),
        calls(
            ("c4", "bash", {"command": "echo ran > made1.txt"}),
            ("c5", "bash", {"command": "echo ran > made2.txt", "cwd": str(two)}),
        ),
        calls(("c6", "write_file", {"path": str(outside / "x.txt"), "content": "no\n"})),
        calls(("c7", "write_file", {"path": str(two / ".git" / "hooks" / "pre-commit"), "content": "no\n"})),
        Reply(frames=openai_stream("done")),
    )
    env = {"OPENAI_BASE_URL": f"{fp.url}/v1", "OPENAI_API_KEY": "sk-test"}
    agent = spawn("--model", "openai:gpt-4.1", "--mode", "auto", env=env, responder=reject_once)
    init = agent.initialize()
    assert init["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"] == {}
    sid = agent.result("session/new", {"cwd": str(one), "additionalDirectories": [str(two)], "mcpServers": []})[
        "sessionId"
    ]
    agent.prompt(sid, "work in both roots", timeout=60)
    assert (one / "a.txt").read_text() == "in one\n"
    assert (two / "b.txt").read_text() == "edited in two\n"
    assert (one / "made1.txt").read_text() == "ran\n" and (two / "made2.txt").read_text() == "ran\n"
    asked = [
        r["params"]["toolCall"]["toolCallId"]
        for r in agent.agent_requests
        if r["method"] == "session/request_permission"
    ]
    assert asked == ["c6"] and not (outside / "x.txt").exists()
    agent.prompt(sid, "and the hook", timeout=60)
    asked = [
        r["params"]["toolCall"]["toolCallId"]
        for r in agent.agent_requests
        if r["method"] == "session/request_permission"
    ]
    assert asked == ["c6", "c7"] and not (two / ".git" / "hooks" / "pre-commit").exists()
    system = fp.requests_to(OPENAI_PATH)[0].body["messages"][0]["content"]
    assert "always say PINEAPPLE" in system and "never touch vendor/" in system and str(two) in system

    listed = agent.result("session/list", {"cwd": str(one)})["sessions"]
    assert [s["additionalDirectories"] for s in listed if s["sessionId"] == sid] == [[str(two)]]
    # The client re-sends the roots with load: nothing is restored implicitly; a load on one root has one root.
    assert "result" in agent.request("session/load", {"sessionId": sid, "cwd": str(one), "mcpServers": []})
    listed = agent.result("session/list", {"cwd": str(one)})["sessions"]
    assert [s.get("additionalDirectories") for s in listed if s["sessionId"] == sid] == [None]


@pytest.mark.parametrize(
    ("dirs", "problem"),
    [(["relative/dir"], "must be an absolute path"), (["/no/such/dir"], "is not an existing directory")],
)
def test_an_additional_directory_that_is_not_an_absolute_existing_directory_is_invalid_params(
    inproc, workspace, dirs, problem
):
    agent = inproc()
    agent.initialize()
    for method in ("session/new", "session/load", "session/resume", "session/fork"):
        params = {"cwd": str(workspace), "additionalDirectories": dirs, "mcpServers": [], "sessionId": "sess_x"}
        if method == "session/new":
            params.pop("sessionId")
        error = agent.request(method, params)["error"]
        assert error["code"] == -32602 and f'"additionalDirectories[0]" {problem}' in error["message"], method


def test_run_takes_add_dir(tmp_path, fp):
    import os
    import subprocess
    import sys

    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    fp.openai(
        calls(("c1", "write_file", {"path": str(two / "r.txt"), "content": "run\n"})), Reply(frames=openai_stream("ok"))
    )
    env = {
        **os.environ,
        "OPENAI_BASE_URL": f"{fp.url}/v1",
        "OPENAI_API_KEY": "sk-test",
        "GATEWRIGHT_STATE_DIR": str(tmp_path / "s"),
    }
    base = [sys.executable, "-c", "from acp_server.cli import main; raise SystemExit(main())", "run"]
    args = ["--model", "openai:gpt-4.1", "--mode", "auto", "--cwd", str(one)]
    proc = subprocess.run(
        [*base, *args, "--add-dir", str(two), "write"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert (two / "r.txt").read_text() == "run\n"
    bad = subprocess.run(
        [*base, *args, "--add-dir", str(tmp_path / "nope"), "x"], env=env, capture_output=True, text=True, timeout=30
    )
    assert bad.returncode == 2 and "--add-dir" in bad.stderr and "not an existing directory" in bad.stderr
